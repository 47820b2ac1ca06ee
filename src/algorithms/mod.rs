//! Hand-written algorithms of docs/design/ALGORITHMS.md as schedule generators.
//!
//! [`torus_all_to_all`] builds an all-to-all on a torus (or mesh) from three parts, one module
//! each:
//! - `ring`: the one-dimensional algorithms (Ring, HalfRing, FoldedRing, and routing along a
//!   line without wrap-around) as plans of sub-steps over ring positions;
//! - `dims`: which plan every line of the torus runs given the faults, and the pieces every block
//!   of a phase stands for;
//! - `scheduler`: how the data is cut into chunks and in which slot each chunk crosses each
//!   dimension (Sequential, Pipeline, DimRotation).
//!
//! [`torus_ring_collective`] (`gather`) runs all-gather, reduce-scatter and all-reduce on the
//! same lines, dimension after dimension; `mate` and `routed` are the multi-dimensional fault
//! schemes and the hardware-routed baselines, `switched` the fat-tree algorithms.

mod dims;
mod gather;
mod mate;
mod ring;
mod routed;
mod scheduler;
pub mod switched;

use crate::collective::{Collective, CollectiveKind};
use crate::error::{Error, Result};
use crate::schedule::{Schedule, ScheduleHeader, StepSink};
use crate::topology::{NodeId, Topology};
use dims::TorusPlan;
pub use gather::torus_ring_collective;
pub use mate::torus_mate;
pub use routed::{routed_all_to_all, HardwareRouting};

/// The one-dimensional all-to-all every ring of a torus runs (docs/design/ALGORITHMS.md, "Single ring").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RingAlgorithm {
    /// Every block cut in half, one half each way round, the long or the short way.
    Ring,
    /// Every block the short way; both directions at once.
    HalfRing,
    /// Rings with a failed cable fold around it; healthy rings run HalfRing.
    FoldedRing,
}

impl RingAlgorithm {
    /// Every algorithm, in the order of docs/design/ALGORITHMS.md.
    pub const ALL: [RingAlgorithm; 3] = [RingAlgorithm::Ring, RingAlgorithm::HalfRing, RingAlgorithm::FoldedRing];

    /// The name used in spec and schedule files (`ring`, `halfring`, `foldedring`).
    pub fn as_str(self) -> &'static str {
        match self {
            RingAlgorithm::Ring => "ring",
            RingAlgorithm::HalfRing => "halfring",
            RingAlgorithm::FoldedRing => "foldedring",
        }
    }
}

/// How the phases of the dimensions are placed in time (docs/design/ALGORITHMS.md, "Many dimensions").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheduler {
    /// All the data crosses one dimension after another.
    Sequential,
    /// The data is cut into `chunks`; each goes through the dimensions in order, one slot behind
    /// the previous chunk.
    Pipeline {
        /// How many chunks (at least 1).
        chunks: usize,
    },
    /// One chunk per dimension; chunk i starts on dimension i, so every dimension is busy in
    /// every slot.
    DimRotation,
}

impl Scheduler {
    /// The name used in spec and schedule files (`sequential`, `pipeline`, `dimrotation`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scheduler::Sequential => "sequential",
            Scheduler::Pipeline { .. } => "pipeline",
            Scheduler::DimRotation => "dimrotation",
        }
    }
}

/// The torus of an all-to-all that the torus generators can run: a torus topology, and the
/// collective an all_to_all over every npu in id order. `name` prefixes the error messages.
pub fn torus_all_to_all_shape<'t>(topology: &'t Topology, collective: &Collective, name: &str) -> Result<&'t crate::topology::TorusShape> {
    let shape = topology.torus_shape().ok_or_else(|| Error::bad(format!("{name}: the topology is not a torus")))?;
    if collective.kind != CollectiveKind::AllToAll {
        return Err(Error::bad(format!("{name}: the collective is {}, not all_to_all", collective.kind)));
    }
    require_every_npu(topology, collective, name)?;
    Ok(shape)
}

/// Checks that `collective.ranks` is every npu in id order, as the torus generators need.
///
/// Errors: [`Error::infeasible`] naming a failed npu (every link of it down) when the ranks leave
/// it out, as they do by default (the algorithm cannot run on that fault); [`Error::bad`] for
/// another subset or order.
pub(crate) fn require_every_npu(topology: &Topology, collective: &Collective, name: &str) -> Result<()> {
    if collective.ranks.len() == topology.num_npus() && collective.ranks.iter().enumerate().all(|(i, r)| r.index() == i) {
        return Ok(());
    }
    let dead = |n: &NodeId| !topology.out_links(*n).chain(topology.in_links(*n)).any(|l| topology.link(l).up);
    let failed: Vec<String> = topology
        .node_ids()
        .filter(|&n| topology.is_npu(n))
        .filter(|n| dead(n) && !collective.ranks.contains(n))
        .map(|n| topology.node(n).name.clone())
        .collect();
    if !failed.is_empty() {
        return Err(Error::infeasible(format!(
            "{name}: the algorithm runs on every npu of the torus, and npu {} has failed (every link of it is down); `synthesize` schedules around it",
            failed.join(", ")
        )));
    }
    Err(Error::bad(format!(
        "{name}: collective.ranks must be every npu in id order (0..{}); a subset or another order is not supported",
        topology.num_npus().saturating_sub(1)
    )))
}

/// Generates an all-to-all on a torus topology (faults already applied as down links).
///
/// `collective` gives ranks (must be ALL npus of the torus, in id order), bytes_per_rank and
/// optional block_bytes; its `pieces` field is ignored: the generator chooses P, the smallest that
/// makes every move whole pieces (chunks, times two when some ring moves half blocks, times the
/// multiple `finer_parts` takes where links differ in bandwidth), and builds
/// the returned schedule's collective with it. The schedule's meta records the algorithm, the
/// scheduler, the chunks, P, the torus shape and the rings that fold around a failed cable (a
/// ring with one failed cable runs FoldedRing whatever `algorithm` says).
///
/// Errors: [`Error::bad`] for a topology that is not a torus, a collective that is not an
/// all-to-all over every npu in id order, or a pipeline of 0 chunks; [`Error::infeasible`] when a
/// line has a failed cable or a ring has two or more (the message names it and its cables).
pub fn torus_all_to_all(topology: &Topology, collective: &Collective, algorithm: RingAlgorithm, scheduler: Scheduler) -> Result<Schedule> {
    struct Collect(Vec<crate::schedule::Step>);
    impl StepSink for Collect {
        fn begin(&mut self, _: &ScheduleHeader) -> Result<()> {
            Ok(())
        }
        fn step(&mut self, _: usize, step: crate::schedule::Step) -> Result<()> {
            self.0.push(step);
            Ok(())
        }
    }
    let mut steps = Collect(Vec::new());
    let header = torus_all_to_all_into(topology, collective, algorithm, scheduler, &mut steps)?;
    Ok(Schedule { header, steps: steps.0 })
}

/// [`torus_all_to_all`] for schedules too large to hold (a pod-scale all-to-all has over a
/// billion piece-hops): hands the header and then the steps, one by one as they are built, to
/// `sink` (a writer, a verifier); only the pieces of the phases running at one time are held.
/// Returns the header.
pub fn torus_all_to_all_into(
    topology: &Topology,
    collective: &Collective,
    algorithm: RingAlgorithm,
    scheduler: Scheduler,
    sink: &mut dyn StepSink,
) -> Result<ScheduleHeader> {
    let shape = torus_all_to_all_shape(topology, collective, "torus all-to-all")?;
    let plan = TorusPlan::new(topology, shape, algorithm, true)?;
    let halves = if plan.splits_blocks() { 2 } else { 1 };
    // The pieces follow from the chunks: say so in terms of what the user set (the chunks), and
    // before the phases of that many chunks are placed (a huge count would exhaust the memory).
    let pieces_of = |chunks: usize| -> Result<u32> {
        let pieces = chunks as u128 * halves as u128;
        u32::try_from(pieces).ok().filter(|&p| p <= crate::collective::MAX_PIECES).ok_or_else(|| {
            Error::bad(format!("chunks = {chunks}: makes {pieces} pieces per block ({halves} per chunk), more than {}", crate::collective::MAX_PIECES))
        })
    };
    if let Scheduler::Pipeline { chunks } = scheduler {
        pieces_of(chunks)?;
    }
    let (chunks, phases) = scheduler::place(scheduler, plan.dims.len())?;
    let fine = finer_parts(topology, shape, &plan, &phases, halves, chunks)?;
    let (pieces, halves) = (pieces_of(chunks * fine)?, halves * fine);
    let ranks: Vec<NodeId> = collective.ranks.clone();
    let coll = Collective::new(CollectiveKind::AllToAll, ranks, collective.bytes_per_rank, pieces, collective.block_bytes.clone(), topology)?;
    let folded: Vec<serde_json::Value> = plan
        .folded
        .iter()
        .map(|f| {
            serde_json::json!({
                "dim": f.dim,
                "nodes": f.nodes.iter().map(|n| n.0).collect::<Vec<_>>(),
                "failed_cable": [f.cable.0 .0, f.cable.1 .0],
            })
        })
        .collect();
    let meta = serde_json::json!({
        "algorithm": algorithm.as_str(),
        "scheduler": scheduler.as_str(),
        "chunks": chunks,
        "pieces": pieces,
        "folded_rings": folded,
    });
    let header = ScheduleHeader { topology: topology.clone(), collective: coll, meta: Some(meta) };
    sink.begin(&header)?;
    let mut index = 0;
    plan.emit_into(topology, shape, &phases, halves, &mut |step| {
        sink.step(index, step)?;
        index += 1;
        Ok(())
    })?;
    Ok(header)
}

/// How many pieces each part of a chunk (a chunk, or a half block where lines move halves) is
/// cut into: 1, except where the torus's dimensions have links of different bandwidths. There a
/// slot's phases may run unequal sub-steps of unequal speed, and [`dims`]'s layout cuts a
/// slower phase's sub-step beside a faster one's in proportion to time, which whole pieces may
/// only approximate (5x3 at 32 and 16 GB/s, HalfRing + DimRotation: the 3-ring's sub-step of 5
/// pieces per link beside three 5-ring sub-steps of 1.5 of its piece-times each, cut 2 + 1 + 2:
/// 16516.5 ns against the slower ring's 15015). The least of [`FINER_PARTS`] whose steps'
/// bandwidth term is least (each tried on the steps' busiest transfers, pieces over bandwidth)
/// is taken, the pieces per block staying within [`crate::collective::MAX_PIECES`].
fn finer_parts(
    topology: &Topology,
    shape: &crate::topology::TorusShape,
    plan: &TorusPlan,
    phases: &[scheduler::Phase],
    halves: usize,
    chunks: usize,
) -> Result<usize> {
    let mut speeds: Vec<u64> = topology.links().filter(|(_, l)| l.up).map(|(_, l)| l.bandwidth_gbps.to_bits()).collect();
    speeds.sort_unstable();
    speeds.dedup();
    if speeds.len() < 2 {
        return Ok(1);
    }
    let mut best = (f64::INFINITY, 1);
    for &k in FINER_PARTS.iter().filter(|&&k| chunks * halves * k <= crate::collective::MAX_PIECES as usize) {
        let mut time = 0.0;
        plan.emit_into(topology, shape, phases, halves * k, &mut |step| {
            let busiest = step.transfers.iter().map(|t| t.pieces.len() as f64 / topology.link(t.path[0]).bandwidth_gbps).fold(0.0, f64::max);
            time += busiest / k as f64;
            Ok(())
        })?;
        if time < best.0 * (1.0 - 1e-9) {
            best = (time, k);
        }
    }
    Ok(best.1)
}

/// The multiples [`finer_parts`] tries.
const FINER_PARTS: [usize; 7] = [1, 2, 3, 4, 5, 6, 8];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, FaultPattern, NodeKind, Shape, TopologyBuilder, TorusParams};
    use crate::units::Rational;
    use crate::verify::{verify_schedule, Report, VerifyOptions};
    use proptest::prelude::*;

    const SCHEDULERS: [Scheduler; 4] = [Scheduler::Sequential, Scheduler::Pipeline { chunks: 1 }, Scheduler::Pipeline { chunks: 3 }, Scheduler::DimRotation];

    fn topo(dims: &[usize], wrap: bool, bandwidth: f64, cables: &[(u32, u32)]) -> Topology {
        let mut p = TorusParams::uniform(dims, bandwidth, 100.0);
        p.wrap = vec![wrap; dims.len()];
        let mut t = torus(&p).unwrap();
        FaultPattern { cables: cables.iter().map(|&(a, b)| (NodeId(a), NodeId(b))).collect(), ..Default::default() }.apply(&mut t).unwrap();
        t
    }

    fn a2a(t: &Topology, bytes: u64, block_bytes: Option<Vec<Vec<u64>>>) -> Collective {
        Collective::new(CollectiveKind::AllToAll, t.node_ids().take(t.num_npus()).collect(), bytes, 1, block_bytes, t).unwrap()
    }

    fn run(t: &Topology, c: &Collective, a: RingAlgorithm, s: Scheduler) -> (Schedule, Report) {
        let sched = torus_all_to_all(t, c, a, s).unwrap_or_else(|e| panic!("{a:?} {s:?}: {e}"));
        let report = verify_schedule(&sched, &VerifyOptions::default()).unwrap();
        let first: Vec<String> = report.findings.failures().iter().take(3).map(|d| d.to_string()).collect();
        assert!(report.is_valid(), "{a:?} {s:?} on {:?}: {first:?}", t.torus_shape());
        (sched, report)
    }

    fn bandwidth(r: &Report) -> Rational {
        r.cost.as_ref().unwrap().bandwidth_ns()
    }

    fn q(n: i128, d: i128) -> Rational {
        Rational::new(n, d)
    }

    /// The bandwidth terms of one ring of n npus with S bytes per npu and B bytes per ns, derived
    /// from the sub-step structure (see ring.rs).
    fn ring_term(n: i128, s: i128, b: i128) -> Rational {
        q((n - 1) * s, 4 * b)
    }
    fn half_ring_term(n: i128, s: i128, b: i128) -> Rational {
        if n % 2 == 0 {
            q(n * s, 8 * b)
        } else {
            q((n * n - 1) * s, 8 * n * b)
        }
    }
    fn folded_ring_term(n: i128, s: i128, b: i128) -> Rational {
        q((n - 1) * s, 2 * b)
    }

    #[test]
    fn every_combination_is_valid_on_rings_and_tori() {
        let mut cases: Vec<(Vec<usize>, bool)> = (3..=12).map(|n| (vec![n], true)).collect();
        cases.extend([(vec![3, 3], true), (vec![4, 4], true), (vec![5, 5], true), (vec![4, 4, 4], true), (vec![3, 5, 4], true)]);
        cases.extend([(vec![4, 4], false), (vec![2, 2, 2, 2], true)]);
        for (dims, wrap) in cases {
            let t = topo(&dims, wrap, 10.0, &[]);
            let c = a2a(&t, 1 << 20, None);
            // Ring and HalfRing need wrap-around; on a mesh only FoldedRing runs.
            for a in RingAlgorithm::ALL.into_iter().filter(|&a| wrap || a == RingAlgorithm::FoldedRing) {
                for s in SCHEDULERS {
                    run(&t, &c, a, s);
                }
            }
        }
    }

    #[test]
    fn one_failed_cable_folds_its_ring() {
        for n in 3..=12u32 {
            for f in 0..n {
                let t = topo(&[n as usize], true, 10.0, &[(f, (f + 1) % n)]);
                let c = a2a(&t, 1000, None);
                let (sched, report) = run(&t, &c, RingAlgorithm::FoldedRing, Scheduler::Sequential);
                assert_eq!(bandwidth(&report), folded_ring_term(n as i128, 1000, 10), "n {n}, cable {f}");
                assert_eq!(sched.header.meta.as_ref().unwrap()["folded_rings"].as_array().unwrap().len(), 1);
                // Ring and HalfRing need the wrap-around the failed cable took (they ran FoldedRing
                // there unasked).
                for a in [RingAlgorithm::Ring, RingAlgorithm::HalfRing] {
                    let e = torus_all_to_all(&t, &c, a, Scheduler::Sequential).unwrap_err();
                    assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible, "n {n}, cable {f}: {e}");
                }
            }
        }
        let t = topo(&[4, 4], true, 10.0, &[]);
        let cables: Vec<(u32, u32)> = t.links().filter(|(_, l)| l.src < l.dst).map(|(_, l)| (l.src.0, l.dst.0)).collect();
        assert_eq!(cables.len(), 32);
        for cable in cables {
            let t = topo(&[4, 4], true, 10.0, &[cable]);
            let c = a2a(&t, 1 << 12, None);
            for s in SCHEDULERS {
                let (sched, _) = run(&t, &c, RingAlgorithm::FoldedRing, s);
                let folded = &sched.header.meta.as_ref().unwrap()["folded_rings"];
                // Recorded in ring order (the wrap-around cable as (3,y)-(0,y)).
                let mut recorded: Vec<u64> = folded[0]["failed_cable"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
                recorded.sort_unstable();
                assert_eq!(recorded, vec![cable.0 as u64, cable.1 as u64], "{folded}");
            }
        }
    }

    /// With links of unequal bandwidth the slot's layout cuts the slower ring's sub-step beside
    /// the faster ring's; cut in whole pieces of 2 per block, the 3-ring's 5 pieces per link went
    /// 2 + 1 + 2 beside three 5-ring sub-steps of 1.5 of its piece-times each (16516.5 ns for
    /// 720720 bytes at 32 and 16 GB/s); at 4 pieces per block the bandwidth term is the slower
    /// ring's one-ring time exactly, S / (3 x 16) = 15015 ns (docs/design/ALGORITHMS.md,
    /// DimRotation). Equal bandwidths keep the fewest pieces.
    #[test]
    fn unequal_bandwidths_cut_finer_pieces_for_the_exact_slot() {
        let mut p = TorusParams::uniform(&[5, 3], 32.0, 0.0);
        p.bandwidth_gbps = vec![32.0, 16.0];
        let t = torus(&p).unwrap();
        let (sched, report) = run(&t, &a2a(&t, 720_720, None), RingAlgorithm::HalfRing, Scheduler::DimRotation);
        assert_eq!(sched.header.collective.pieces, 4);
        assert_eq!(bandwidth(&report), q(15015, 1));
        let even = topo(&[5, 3], true, 32.0, &[]);
        let (sched, report) = run(&even, &a2a(&even, 720_720, None), RingAlgorithm::HalfRing, Scheduler::DimRotation);
        assert_eq!(sched.header.collective.pieces, 2);
        // The 5-ring's one-ring time at 32 GB/s: (25 - 1) / 8 x S / (5 x 32).
        assert_eq!(bandwidth(&report), q(27027, 2));
    }

    #[test]
    fn pieces_are_as_few_as_the_moves_allow() {
        let pieces = |dims: &[usize], wrap: bool, a: RingAlgorithm, s: Scheduler| {
            let t = topo(dims, wrap, 10.0, &[]);
            let sched = torus_all_to_all(&t, &a2a(&t, 4096, None), a, s).unwrap();
            let meta = sched.header.meta.clone().unwrap();
            assert_eq!(meta["pieces"], serde_json::json!(sched.header.collective.pieces));
            sched.header.collective.pieces
        };
        assert_eq!(pieces(&[5], true, RingAlgorithm::HalfRing, Scheduler::Sequential), 1);
        assert_eq!(pieces(&[4], true, RingAlgorithm::HalfRing, Scheduler::Sequential), 2);
        assert_eq!(pieces(&[5], true, RingAlgorithm::Ring, Scheduler::Sequential), 2);
        assert_eq!(pieces(&[5, 5, 5], true, RingAlgorithm::HalfRing, Scheduler::DimRotation), 3);
        assert_eq!(pieces(&[3, 5, 4], true, RingAlgorithm::HalfRing, Scheduler::DimRotation), 6);
        assert_eq!(pieces(&[4, 4], false, RingAlgorithm::FoldedRing, Scheduler::Pipeline { chunks: 6 }), 6);
        assert_eq!(pieces(&[4, 4], true, RingAlgorithm::Ring, Scheduler::Pipeline { chunks: 6 }), 12);
        assert_eq!(pieces(&[1, 1], true, RingAlgorithm::Ring, Scheduler::DimRotation), 1);
    }

    #[test]
    fn meta_records_the_choices() {
        let t = topo(&[4, 3], true, 10.0, &[(0, 1)]);
        // HalfRing refuses the faulty ring; FoldedRing folds it and runs HalfRing in the others.
        let sched = torus_all_to_all(&t, &a2a(&t, 1200, None), RingAlgorithm::FoldedRing, Scheduler::Pipeline { chunks: 2 }).unwrap();
        let meta = sched.header.meta.unwrap();
        assert_eq!(meta["algorithm"], "foldedring");
        assert_eq!(meta["scheduler"], "pipeline");
        assert_eq!(meta["chunks"], 2);
        assert_eq!(meta["folded_rings"], serde_json::json!([{"dim": 0, "nodes": [0, 1, 2, 3], "failed_cable": [0, 1]}]));
    }

    #[test]
    fn dimension_schedulers_meet_their_closed_forms() {
        // Equal radix: every phase with all the data is a one-ring all-to-all with S per npu, so
        // Sequential takes n T(S), Pipeline (c+n-1)/c T(S), DimRotation T(S).
        for dims in [vec![4, 4], vec![5, 5], vec![3, 3, 3], vec![4, 4, 4]] {
            let n = dims.len() as i128;
            let t = topo(&dims, true, 4.0, &[]);
            let s = 3000i128;
            let c = a2a(&t, s as u64, None);
            let radix = dims[0] as i128;
            for (a, term) in [(RingAlgorithm::HalfRing, half_ring_term(radix, s, 4)), (RingAlgorithm::Ring, ring_term(radix, s, 4))] {
                assert_eq!(bandwidth(&run(&t, &c, a, Scheduler::DimRotation).1), term, "{dims:?} {a:?}");
                assert_eq!(bandwidth(&run(&t, &c, a, Scheduler::Sequential).1), term * n, "{dims:?} {a:?}");
                let pipeline = bandwidth(&run(&t, &c, a, Scheduler::Pipeline { chunks: 3 }).1);
                assert_eq!(pipeline, term * q(3 + n - 1, 3), "{dims:?} {a:?}");
            }
        }
    }

    /// Unequal radix (ALGORITHMS.md, DimRotation: "the slowest dimension bounds it"): a slot's
    /// shorter phase spreads its sub-steps over the longer one's steps, so DimRotation takes the
    /// slowest ring's HalfRing time with all the data (aligned sub-step by sub-step, 3x5 took
    /// 11S/15 against 3S/5).
    #[test]
    fn dim_rotation_on_unequal_radix_takes_the_slowest_ring() {
        let s = 7200i128;
        for dims in [vec![3, 5], vec![5, 3], vec![4, 6], vec![3, 4], vec![2, 6], vec![4, 8], vec![4, 5], vec![3, 4, 5]] {
            let t = topo(&dims, true, 1.0, &[]);
            let c = a2a(&t, s as u64, None);
            let slowest = dims.iter().map(|&n| half_ring_term(n as i128, s, 1)).max().unwrap();
            assert_eq!(bandwidth(&run(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).1), slowest, "{dims:?}");
        }
    }

    #[test]
    fn lines_carry_what_the_middle_cable_must() {
        // A line of n (mesh, or a dimension of size 2): floor(n^2/4) blocks of S/n cross the
        // middle cable one way, one per sub-step.
        for n in 2..=12usize {
            let t = topo(&[n], false, 5.0, &[]);
            let (sched, report) = run(&t, &a2a(&t, 7000, None), RingAlgorithm::FoldedRing, Scheduler::Sequential);
            assert_eq!(sched.steps.len(), n * n / 4);
            assert_eq!(bandwidth(&report), q((n * n / 4) as i128 * 7000, n as i128 * 5), "line of {n}");
        }
    }

    #[test]
    fn reference_speed_ups_of_the_bandwidth_terms() {
        // docs/design/ALGORITHMS.md, 5-ary 2-D torus at large messages, over Ring + Pipeline with c = 6:
        // Ring + DimRotation 7/6, HalfRing + DimRotation 1.94 (= 7/6 * 5/3).
        let t = topo(&[5, 5], true, 10.0, &[]);
        let c = a2a(&t, 1 << 20, None);
        let base = bandwidth(&run(&t, &c, RingAlgorithm::Ring, Scheduler::Pipeline { chunks: 6 }).1);
        assert_eq!(base / bandwidth(&run(&t, &c, RingAlgorithm::Ring, Scheduler::DimRotation).1), q(7, 6));
        assert_eq!(base / bandwidth(&run(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).1), q(35, 18));
    }

    #[test]
    fn non_uniform_blocks_keep_the_schedule() {
        for (dims, wrap, cables) in [(vec![3, 5, 4], true, vec![]), (vec![4, 4], true, vec![(5, 6)]), (vec![4, 3], false, vec![])] {
            let t = topo(&dims, wrap, 10.0, &cables);
            let r = t.num_npus();
            let sizes: Vec<Vec<u64>> = (0..r).map(|i| (0..r).map(|j| if i == j { 0 } else { ((i * 7 + j * 3) % 11) as u64 * 100 }).collect()).collect();
            // Ring and HalfRing need wrap-around, which a mesh and a failed cable take away.
            for a in RingAlgorithm::ALL.into_iter().filter(|&a| (wrap && cables.is_empty()) || a == RingAlgorithm::FoldedRing) {
                for s in [Scheduler::Sequential, Scheduler::DimRotation] {
                    let (skewed, _) = run(&t, &a2a(&t, 0, Some(sizes.clone())), a, s);
                    // Equal blocks of S/R bytes written out cost exactly what the uniform form does.
                    let (_, equal) = run(&t, &a2a(&t, 0, Some((0..r).map(|i| (0..r).map(|j| if i == j { 0 } else { 64 }).collect()).collect())), a, s);
                    let (uniform, expected) = run(&t, &a2a(&t, 64 * r as u64, None), a, s);
                    assert_eq!(bandwidth(&equal), bandwidth(&expected));
                    assert_eq!(skewed.steps, uniform.steps);
                }
            }
        }
    }

    #[test]
    fn bad_inputs_and_cut_rings_are_refused() {
        let t = topo(&[4, 4], true, 10.0, &[]);
        let c = a2a(&t, 1600, None);
        let mut b = TopologyBuilder::new();
        b.node(NodeKind::Npu, "a");
        let custom = b.build(Shape::Custom, 0.0).unwrap();
        let e = torus_all_to_all(&custom, &a2a(&custom, 8, None), RingAlgorithm::Ring, Scheduler::Sequential).unwrap_err();
        assert!(e.message().contains("not a torus"), "{e}");
        let subset = Collective::new(CollectiveKind::AllToAll, vec![NodeId(1), NodeId(0)], 8, 1, None, &t).unwrap();
        let e = torus_all_to_all(&t, &subset, RingAlgorithm::Ring, Scheduler::Sequential).unwrap_err();
        // 16 npus: ids 0 to 15, inclusive as FORMATS.md writes them (0..n-1).
        assert!(e.message().contains("every npu in id order (0..15)"), "{e}");
        let gather = Collective::new(CollectiveKind::AllGather, t.node_ids().collect(), 8, 1, None, &t).unwrap();
        assert!(torus_all_to_all(&t, &gather, RingAlgorithm::Ring, Scheduler::Sequential).is_err());
        let e = torus_all_to_all(&t, &c, RingAlgorithm::Ring, Scheduler::Pipeline { chunks: 0 }).unwrap_err();
        assert!(e.message().contains("chunks = 0"), "{e}");
        let cut = topo(&[4, 4], true, 10.0, &[(4, 5), (6, 7)]);
        for a in RingAlgorithm::ALL {
            let e = torus_all_to_all(&cut, &c, a, Scheduler::DimRotation).unwrap_err();
            assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible);
            assert!(e.message().contains("ring along dimension 0 through (0,1)"), "{e}");
        }
    }

    /// A failed npu is left out of the default ranks; the generators that run on every npu say
    /// that the algorithm cannot run on that fault (exit 3), naming the npu, not that the ranks
    /// are wrong. The hardware-routed ones name the block and the failed npu on its route.
    #[test]
    fn a_failed_npu_is_named_as_the_fault_the_algorithm_cannot_run_on() {
        let mut t = topo(&[4, 4], true, 10.0, &[]);
        crate::topology::FaultPattern { nodes: vec![NodeId(5)], ..Default::default() }.apply(&mut t).unwrap();
        let live: Vec<NodeId> = t.node_ids().filter(|&n| n != NodeId(5)).collect();
        let a2a = Collective::new(CollectiveKind::AllToAll, live.clone(), 1500, 1, None, &t).unwrap();
        let ar = Collective::new(CollectiveKind::AllReduce, live, 1500, 1, None, &t).unwrap();
        let errors = [
            torus_all_to_all(&t, &a2a, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap_err(),
            torus_ring_collective(&t, &ar, RingAlgorithm::Ring).unwrap_err(),
            routed::routed_all_to_all(&t, &a2a, routed::HardwareRouting::Wfr).unwrap_err(),
        ];
        for e in errors {
            assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible, "{e}");
            assert!(e.message().contains(&format!("npu {}", t.node(NodeId(5)).name)), "{e}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// The closed forms of one ring, exactly, for any N, S, B and fault position.
        #[test]
        fn ring_closed_forms(n in 3usize..=12, s in 1u64..=1 << 40, b in 1u32..=400, fault in 0usize..12) {
            let (ni, si, bi) = (n as i128, s as i128, b as i128);
            let t = topo(&[n], true, b as f64, &[]);
            let c = a2a(&t, s, None);
            prop_assert_eq!(bandwidth(&run(&t, &c, RingAlgorithm::Ring, Scheduler::Sequential).1), ring_term(ni, si, bi));
            prop_assert_eq!(bandwidth(&run(&t, &c, RingAlgorithm::HalfRing, Scheduler::Sequential).1), half_ring_term(ni, si, bi));
            // FoldedRing on a healthy ring is HalfRing.
            prop_assert_eq!(bandwidth(&run(&t, &c, RingAlgorithm::FoldedRing, Scheduler::DimRotation).1), half_ring_term(ni, si, bi));
            let f = (fault % n) as u32;
            let t = topo(&[n], true, b as f64, &[(f, (f + 1) % n as u32)]);
            prop_assert_eq!(bandwidth(&run(&t, &c, RingAlgorithm::FoldedRing, Scheduler::Sequential).1), folded_ring_term(ni, si, bi));
        }

        /// ALGORITHMS.md, DimRotation: "with unequal dimensions ... the slowest dimension bounds
        /// it": on any torus of 2 or 3 dimensions of radix 2 to 7 the bandwidth term is exactly the
        /// slowest dimension's one-dimensional time with all the data (4x5 HalfRing took 13S/20
        /// against 3S/5: the 4-ring's S/8 sub-step did not fit beside the 5-ring's S/10 ones).
        #[test]
        fn dim_rotation_takes_the_slowest_dimension(dims in proptest::collection::vec(2usize..=7, 2..=3), ring in any::<bool>()) {
            prop_assume!(dims.iter().product::<usize>() <= 150);
            let a = if ring { RingAlgorithm::Ring } else { RingAlgorithm::HalfRing };
            // Divisible by every rank count times pieces per block here: exact piece sizes.
            let s = 2u64.pow(8) * 3u64.pow(3) * 5u64.pow(3) * 7u64.pow(3);
            let t = topo(&dims, true, 4.0, &[]);
            let slowest = dims
                .iter()
                .map(|&n| {
                    let one = topo(&[n], true, 4.0, &[]);
                    bandwidth(&run(&one, &a2a(&one, s, None), a, Scheduler::Sequential).1)
                })
                .max()
                .unwrap();
            prop_assert_eq!(bandwidth(&run(&t, &a2a(&t, s, None), a, Scheduler::DimRotation).1), slowest, "{:?} {:?}", dims, a);
        }
    }
}
