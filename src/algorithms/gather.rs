//! All-gather, reduce-scatter and all-reduce on a torus (or mesh) by rings, one dimension after
//! another (docs/design/ALGORITHMS.md: Ring for all_gather, p-1 steps of M/p; FoldedRing "also works for
//! all-gather, reduce-scatter and all-reduce rings").
//!
//! **All-gather.** In the phase of dimension x every line along x runs a one-dimensional
//! all-gather of what its nodes hold, all lines at once (their links are disjoint). At the start
//! of the phase a node holds the pieces of every source that agrees with it on the dimensions not
//! yet gathered (x included): its *unit*. Every kind takes N-1 steps on N positions:
//! - Ring: one way round: in step s, position i sends to i+1 the unit of position i-s, which it
//!   received in step s-1 (one unit per link per step).
//! - HalfRing: both ways at once, the first half of every block (pieces `k < P/2`) clockwise,
//!   the second anticlockwise: the same steps with half the bytes.
//! - FoldedRing (a ring with one failed cable, whatever the algorithm; [`TorusPlan`]): one way
//!   round starting just past the failed cable; the hop across it is a routed path back the
//!   other way round (the fold), on anticlockwise links that nothing else uses.
//! - Line (no wrap-around, or two nodes): both ways along the line: position i sends to i+1 the
//!   unit of i-s (when s <= i) and to i-1 the unit of i+s (when i+s < N).
//!
//! **Reduce-scatter** is the all-gather's time reversal ([`crate::schedule::reverse`]) and
//! **all-reduce** the reduce-scatter followed by the all-gather.

use super::dims::{link, TorusPlan};
use super::ring::RingKind;
use super::RingAlgorithm;
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::reverse::reversed_as_reduce;
use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::topology::{NodeId, Topology, TorusShape};
use std::collections::HashMap;

/// Generates an all_gather, reduce_scatter or all_reduce on a torus (faults applied as down
/// links) by rings, dimension after dimension (see the module documentation).
///
/// `collective.ranks` must be every npu in id order; its `pieces` is ignored: 2 when some ring
/// runs HalfRing (one half each way round), else 1. The schedule's meta records the algorithm,
/// P, the shape and the rings that fold.
///
/// Errors: [`Error::bad`] for a topology that is not a torus, another group of ranks, or an
/// all_to_all; [`Error::infeasible`] when a line has a failed cable or a ring two or more.
pub fn torus_ring_collective(topology: &Topology, collective: &Collective, algorithm: RingAlgorithm) -> Result<Schedule> {
    let name = format!("torus {} by rings", collective.kind);
    let shape = topology.torus_shape().ok_or_else(|| Error::bad(format!("{name}: the topology is not a torus")))?;
    if collective.kind == CollectiveKind::AllToAll {
        return Err(Error::bad(format!("{name}: all_to_all runs the torus all-to-all generators")));
    }
    super::require_every_npu(topology, collective, &name)?;
    let plan = TorusPlan::new(topology, shape, algorithm, false)?;
    let halves = if plan.dims.iter().flat_map(|d| &d.lines).any(|l| l.kind == RingKind::HalfRing) { 2 } else { 1 };
    let coll = Collective::new(collective.kind, collective.ranks.clone(), collective.bytes_per_rank, halves, collective.block_bytes.clone(), topology)?;
    let gather = all_gather_steps(topology, shape, &plan, halves)?;
    let steps = match collective.kind {
        CollectiveKind::AllGather => gather,
        CollectiveKind::ReduceScatter => reversed_as_reduce(topology, &gather)?,
        _ => reversed_as_reduce(topology, &gather)?.into_iter().chain(gather).collect(),
    };
    let folded: Vec<serde_json::Value> = plan
        .folded
        .iter()
        .map(|f| serde_json::json!({"dim": f.dim, "nodes": f.nodes.iter().map(|n| n.0).collect::<Vec<_>>(), "failed_cable": [f.cable.0 .0, f.cable.1 .0]}))
        .collect();
    let meta = serde_json::json!({
        "algorithm": algorithm.as_str(),
        "scheduler": "sequential",
        "pieces": halves,
        "folded_rings": folded,
    });
    Ok(Schedule { header: ScheduleHeader { topology: topology.clone(), collective: coll, meta: Some(meta) }, steps })
}

/// One move of a line's all-gather: along `path` (positions, sender first, receiver last), the
/// unit of position `unit`, the halves in `parts`.
struct Move {
    path: Vec<usize>,
    unit: usize,
    parts: std::ops::Range<u32>,
}

/// The moves of step `s` of an all-gather on a line of `n` positions running `kind`.
fn moves(kind: RingKind, n: usize, s: usize, halves: u32) -> Vec<Move> {
    let all = 0..halves;
    let cw = |i: usize| (i + 1) % n;
    let acw = |i: usize| (i + n - 1) % n;
    match kind {
        RingKind::Ring => (0..n).map(|i| Move { path: vec![i, cw(i)], unit: (i + n - s) % n, parts: all.clone() }).collect(),
        RingKind::HalfRing => (0..n)
            .flat_map(|i| {
                [
                    Move { path: vec![i, cw(i)], unit: (i + n - s) % n, parts: 0..halves / 2 },
                    Move { path: vec![i, acw(i)], unit: (i + s) % n, parts: halves / 2..halves },
                ]
            })
            .collect(),
        RingKind::Folded { failed } => {
            // One way round in the order failed+1, ..., failed; the last hop folds back.
            let start = (failed + 1) % n;
            (0..n)
                .map(|j| {
                    let from = (start + j) % n;
                    let path = if from == failed { (0..n).map(|k| (failed + n - k) % n).collect() } else { vec![from, cw(from)] };
                    Move { path, unit: (start + (j + n - s) % n) % n, parts: all.clone() }
                })
                .collect()
        }
        RingKind::Line => (0..n)
            .flat_map(|i| {
                let right = (i + 1 < n && s <= i).then(|| Move { path: vec![i, i + 1], unit: i - s, parts: all.clone() });
                let left = (i >= 1 && i + s < n).then(|| Move { path: vec![i, i - 1], unit: i + s, parts: all.clone() });
                right.into_iter().chain(left)
            })
            .collect(),
    }
}

/// The all-gather's steps: N-1 per dimension of size N > 1, in dimension order.
fn all_gather_steps(topo: &Topology, shape: &TorusShape, plan: &TorusPlan, halves: u32) -> Result<Vec<Step>> {
    let mut steps = Vec::new();
    let mut gathered = vec![false; shape.ndims()];
    for dimension in &plan.dims {
        // A node's unit: every source agreeing with it on the dimensions not yet gathered.
        let key = |v: NodeId| -> Vec<usize> { (0..shape.ndims()).filter(|&e| !gathered[e]).map(|e| shape.coord_in(v, e)).collect() };
        let mut units: HashMap<Vec<usize>, Vec<u32>> = HashMap::new();
        for v in (0..shape.num_nodes() as u32).map(NodeId) {
            units.entry(key(v)).or_default().push(v.0);
        }
        let n = shape.dims[dimension.dim];
        for s in 0..n - 1 {
            let mut step = Step::default();
            for line in &dimension.lines {
                for m in moves(line.kind, n, s, halves) {
                    let sources = &units[&key(line.nodes[m.unit])];
                    let pieces: Vec<PieceId> = sources.iter().flat_map(|&r| m.parts.clone().map(move |k| PieceId::block(r, k))).collect();
                    let path = m.path.windows(2).map(|w| link(topo, line.nodes[w[0]], line.nodes[w[1]])).collect::<Result<Vec<_>>>()?;
                    step.transfers.push(Transfer { path, op: Op::Copy, pieces });
                }
            }
            steps.push(step);
        }
        gathered[dimension.dim] = true;
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, FaultPattern, TorusParams};
    use crate::units::to_f64;
    use crate::verify::{verify_schedule, VerifyOptions};

    const KINDS: [CollectiveKind; 3] = [CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce];

    fn faulty(dims: &[usize], wrap: Option<Vec<bool>>, cables: &[(u32, u32)]) -> Topology {
        let mut p = TorusParams::uniform(dims, 10.0, 0.0);
        if let Some(w) = wrap {
            p.wrap = w;
        }
        let mut t = torus(&p).unwrap();
        FaultPattern { cables: cables.iter().map(|&(a, b)| (NodeId(a), NodeId(b))).collect(), ..Default::default() }.apply(&mut t).unwrap();
        t
    }

    /// Generates, verifies (rules 1-5 and the lowering of rule 6), and returns the bandwidth
    /// term in ns.
    fn checked(t: &Topology, kind: CollectiveKind, algorithm: RingAlgorithm) -> f64 {
        let c = Collective::new(kind, t.node_ids().filter(|&v| t.is_npu(v)).collect(), 1 << 20, 1, None, t).unwrap();
        let s = torus_ring_collective(t, &c, algorithm).unwrap();
        let r = verify_schedule(&s, &VerifyOptions::default()).unwrap();
        assert!(r.is_valid(), "{kind} {algorithm:?}: {:?}", r.findings.failures().iter().take(3).map(|d| d.to_string()).collect::<Vec<_>>());
        crate::lower::lower(&s, &Default::default()).unwrap();
        to_f64(&r.cost.unwrap().bandwidth_ns())
    }

    #[test]
    fn one_ring_meets_the_closed_forms() {
        // S = 1 MiB over N = 6 at 10 GB/s: Ring (N-1) S/(N B); HalfRing half of it; FoldedRing
        // (one failed cable) the same as Ring; all-reduce twice each.
        let unit = (1u64 << 20) as f64 / 6.0 / 10.0;
        let healthy = faulty(&[6], None, &[]);
        let broken = faulty(&[6], None, &[(2, 3)]);
        for kind in KINDS {
            let twice = if kind == CollectiveKind::AllReduce { 2.0 } else { 1.0 };
            let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
            assert!(close(checked(&healthy, kind, RingAlgorithm::Ring), twice * 5.0 * unit));
            assert!(close(checked(&healthy, kind, RingAlgorithm::HalfRing), twice * 2.5 * unit));
            assert!(close(checked(&broken, kind, RingAlgorithm::FoldedRing), twice * 5.0 * unit));
            // A ring with a failed cable is a line: Ring and HalfRing refuse it (they ran
            // FoldedRing there unasked).
            for a in [RingAlgorithm::Ring, RingAlgorithm::HalfRing] {
                let c = Collective::new(kind, broken.node_ids().collect(), 1 << 20, 1, None, &broken).unwrap();
                let e = torus_ring_collective(&broken, &c, a).unwrap_err();
                assert!(matches!(e, Error::Infeasible(_)) && e.message().contains("(2)-(3) down") && e.message().contains("foldedring"), "{kind} {a:?}: {e}");
            }
        }
    }

    #[test]
    fn tori_meshes_and_folds_verify() {
        let cases = [
            faulty(&[4, 4], None, &[]),
            faulty(&[4, 4], None, &[(0, 1)]),
            faulty(&[3, 4, 2], None, &[(0, 3), (5, 8), (1, 2)]),
            faulty(&[4, 3], Some(vec![false, true]), &[]),
            faulty(&[2, 2, 2], None, &[]),
            faulty(&[5], None, &[(4, 0)]),
        ];
        for t in &cases {
            let mesh = t.torus_shape().unwrap().wrap.iter().any(|w| !w) || !t.down_links().is_empty();
            for kind in KINDS {
                // Ring and HalfRing need wrap-around; on a mesh, or with a failed cable, only
                // FoldedRing runs.
                for algorithm in RingAlgorithm::ALL.into_iter().filter(|&a| !mesh || a == RingAlgorithm::FoldedRing) {
                    checked(t, kind, algorithm);
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

        /// Over sizes, wrap-around, failed cables anywhere and every algorithm and kind: the
        /// generator either names what cannot run (a cut line, two failures in a ring) or gives a
        /// schedule that verifies and lowers.
        #[test]
        fn generated_ring_collectives_verify_over_sizes_and_faults(
            dims in proptest::collection::vec(2usize..7, 1..=3),
            wrap in proptest::collection::vec(proptest::bool::weighted(0.8), 3),
            cuts in proptest::collection::vec((0usize..1000, 0usize..6), 0..=2),
            kind in 0usize..3,
            algorithm in 0usize..3,
        ) {
            let mut p = TorusParams::uniform(&dims, 10.0, 5.0);
            p.wrap = wrap[..dims.len()].to_vec();
            let mut t = torus(&p).unwrap();
            for (node, k) in cuts {
                let u = NodeId((node % t.num_npus()) as u32);
                let outs: Vec<_> = t.up_out_links(u).collect();
                if let Some(&l) = outs.get(k % outs.len().max(1)) {
                    let v = t.link(l).dst;
                    FaultPattern { cables: vec![(u, v)], ..Default::default() }.apply(&mut t).unwrap();
                }
            }
            let c = Collective::new(KINDS[kind], t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
            match torus_ring_collective(&t, &c, RingAlgorithm::ALL[algorithm]) {
                Err(e) => proptest::prop_assert!(matches!(e, Error::Infeasible(_)), "{}", e.message()),
                Ok(_) => {
                    checked(&t, KINDS[kind], RingAlgorithm::ALL[algorithm]);
                }
            }
        }
    }

    #[test]
    fn what_cannot_run_is_named() {
        let two = faulty(&[6], None, &[(0, 1), (3, 4)]);
        let c = Collective::new(CollectiveKind::AllGather, two.node_ids().collect(), 1 << 20, 1, None, &two).unwrap();
        let e = torus_ring_collective(&two, &c, RingAlgorithm::FoldedRing).unwrap_err();
        assert!(e.message().contains("2 failed cables"), "{}", e.message());
        let t = faulty(&[4], None, &[]);
        let group = Collective::new(CollectiveKind::AllGather, vec![NodeId(0), NodeId(2)], 1 << 20, 1, None, &t).unwrap();
        assert!(torus_ring_collective(&t, &group, RingAlgorithm::Ring).is_err());
        let a2a = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        assert!(torus_ring_collective(&t, &a2a, RingAlgorithm::Ring).is_err());
    }
}
