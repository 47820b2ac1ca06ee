//! The event-driven cost (docs/design/MODEL.md section 5): what a real runtime approaches when every rank
//! issues its steps in order, with no global barrier, and transfers that share a link split its
//! bandwidth.
//!
//! Unlike [`super::SyncCost`], this is *not* exact: it is a fluid simulation in `f64`, so times
//! carry rounding errors of the order of a few ulps per event. It is meant for comparing
//! schedules and for reports, never for certificates.
//!
//! Interpretation choices (where docs/design/MODEL.md leaves room):
//!
//! - The sender of a transfer is the source node of its first link. A node's sends of step `t`
//!   form one group that starts as a whole.
//! - A node holds a piece at time 0 if it starts with it: the collective's source of the piece
//!   for copy-only kinds, every rank for reducing kinds. Otherwise it holds it once the
//!   deliveries of *earlier steps* have arrived: for reducing kinds all of them (each carries a
//!   contribution that must be merged before forwarding), for copy-only kinds the first of them
//!   to arrive in time (any copy will do). A piece that no earlier step delivered and that the
//!   node did not start with (an invalid schedule; the verifier reports it) does not delay the
//!   send.
//! - Fair mode: max-min fair shares by progressive filling over the active transfers; a path that
//!   crosses the same link twice uses it twice.
//! - FIFO mode: a transfer arrives at every link of its path when it starts (ties broken by step,
//!   then by position in the step); it transmits only when it is the earliest-queued transfer on
//!   every link of its path, and then holds all of them until its last byte has left. Because
//!   every link orders its queue by the same (time, sequence) key, the globally earliest waiter
//!   always heads all of its queues, so the simulation cannot deadlock.
//! - Zero-byte transfers are transmitted the moment they start (they take no link time, even in
//!   FIFO mode) and arrive their path latency later.

#[cfg(test)]
mod reference;
mod sim;

use crate::error::{Error, Result};
use crate::schedule::Schedule;
use crate::units::to_f64;
use sim::Sim;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

/// The event-driven cost of a schedule (f64, not exact: see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct EventCost {
    /// When the last piece arrives, ns (0 for an empty schedule).
    pub time_ns: f64,
    /// Per step, per transfer (in file order): when its pieces arrive at the end of its path, ns.
    /// Kept so that reports can show where ranks drift apart.
    pub transfer_finish_ns: Vec<Vec<f64>>,
    /// Bytes per rank (S) for the bandwidth figure.
    pub bytes_per_rank: u64,
}

impl EventCost {
    /// All-to-all bandwidth as the field reports it: bytes per rank over time, GB/s (infinite for
    /// a schedule that takes no time, so that comparisons still order it first).
    pub fn algo_bandwidth_gbps(&self) -> f64 {
        if self.time_ns > 0.0 {
            self.bytes_per_rank as f64 / self.time_ns
        } else {
            f64::INFINITY
        }
    }
}

/// A time with a total order, so that arrivals can sit in a heap.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Time(f64);

impl Eq for Time {}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Time {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// One transfer, flattened over the steps.
struct Tr {
    /// Links used with their multiplicity (a walk may cross a link twice).
    uses: Vec<(usize, f64)>,
    bytes: f64,
    latency_ns: f64,
    group: usize,
}

/// A node's sends of one step: they start together.
struct Group {
    transfers: Vec<usize>,
    /// Piece conditions not yet met.
    pending: usize,
    /// Whether the node's previous group is still transmitting.
    prev_pending: bool,
    /// Transfers of this group whose last byte has not left yet.
    untransmitted: usize,
    /// The node's next group, released when this one is transmitted.
    next: Option<usize>,
    started: bool,
}

/// "The group's node holds a piece": met when any one of the listed transfers arrives (a
/// single transfer for reducing kinds, every earlier delivery for copy-only kinds).
struct Cond {
    group: usize,
    met: bool,
}

/// Computes the event-driven cost of a schedule; `fifo` makes links serve one transfer at a time
/// in order of arrival (as ASTRA-sim's congestion-aware analytical backend does) instead of
/// sharing them max-min fairly.
///
/// Errors on a transfer with an empty path or a link out of range, since it has no sender or no
/// bandwidth to simulate; pieces that are not pieces of the collective are skipped (the verifier
/// reports both).
pub fn event_cost(schedule: &Schedule, fifo: bool) -> Result<EventCost> {
    let (setup, shape) = setup(schedule)?;
    let topo = &schedule.header.topology;
    let cap: Vec<f64> = topo.links().map(|(_, l)| l.bandwidth_gbps).collect();
    let finish = Sim::new(setup, fifo, cap).run()?;
    let mut transfer_finish_ns = Vec::with_capacity(shape.len());
    let mut it = finish.iter().copied();
    for len in shape {
        transfer_finish_ns.push(it.by_ref().take(len).collect());
    }
    let time_ns = finish.iter().copied().fold(0.0, f64::max);
    Ok(EventCost { time_ns, transfer_finish_ns, bytes_per_rank: schedule.header.collective.bytes_per_rank })
}

/// What the simulation starts from: the transfers, the groups of sends that start together, and
/// the piece conditions they wait for.
struct Setup {
    tr: Vec<Tr>,
    groups: Vec<Group>,
    conds: Vec<Cond>,
    /// Per transfer: the conditions its arrival may meet.
    waiters: Vec<Vec<usize>>,
}

/// Flattens the steps into transfers, groups and conditions; also returns the number of
/// transfers of every step.
fn setup(schedule: &Schedule) -> Result<(Setup, Vec<usize>)> {
    let topo = &schedule.header.topology;
    let coll = &schedule.header.collective;
    let reducing = coll.kind.is_reducing();
    let n_links = topo.num_links();

    let mut tr = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut conds: Vec<Cond> = Vec::new();
    let mut waiters: Vec<Vec<usize>> = Vec::new();
    let mut last_group: HashMap<u32, usize> = HashMap::new();
    // (node, piece index) -> transfers of the steps seen so far that delivered the piece there.
    let mut deliveries: HashMap<(u32, usize), Vec<usize>> = HashMap::new();
    let mut shape = Vec::with_capacity(schedule.steps.len());

    for (t, step) in schedule.steps.iter().enumerate() {
        shape.push(step.transfers.len());
        let mut step_groups: HashMap<u32, usize> = HashMap::new();
        let first_group = groups.len();
        let mut new_deliveries = Vec::new();
        let mut group_pieces: Vec<(usize, u32, Vec<usize>)> = Vec::new();
        for (k, x) in step.transfers.iter().enumerate() {
            let (Some(first), Some(last)) = (x.path.first(), x.path.last()) else {
                return Err(Error::bad(format!("step {t}, transfer {k}: empty path, so there is no sender to simulate")));
            };
            if let Some(bad) = x.path.iter().find(|l| l.index() >= n_links) {
                return Err(Error::bad(format!("step {t}, transfer {k}: link {bad} does not exist (there are {n_links} links)")));
            }
            let src = topo.link(*first).src.0;
            let dst = topo.link(*last).dst.0;
            let id = tr.len();
            let g = *step_groups.entry(src).or_insert_with(|| {
                let g = groups.len();
                let prev = last_group.insert(src, g);
                if let Some(p) = prev {
                    groups[p].next = Some(g);
                }
                groups.push(Group { transfers: Vec::new(), pending: 0, prev_pending: prev.is_some(), untransmitted: 0, next: None, started: false });
                group_pieces.push((g, src, Vec::new()));
                g
            });
            groups[g].transfers.push(id);
            groups[g].untransmitted += 1;
            let mut bytes = 0.0;
            // Groups of this step are numbered consecutively, in the order of `group_pieces`.
            let pieces = &mut group_pieces[g - first_group].2;
            for p in &x.pieces {
                if let Some(i) = coll.piece_index(p) {
                    bytes += to_f64(&coll.piece_size_at(i));
                    pieces.push(i);
                    new_deliveries.push(((dst, i), id));
                }
            }
            let mut uses: Vec<(usize, f64)> = Vec::new();
            for l in &x.path {
                match uses.iter_mut().find(|(u, _)| *u == l.index()) {
                    Some(u) => u.1 += 1.0,
                    None => uses.push((l.index(), 1.0)),
                }
            }
            tr.push(Tr { uses, bytes, latency_ns: topo.path_latency_ns(&x.path), group: g });
            waiters.push(Vec::new());
        }
        // Conditions look only at deliveries of earlier steps: they are built before this
        // step's deliveries are recorded.
        for (g, node, pieces) in group_pieces {
            let node = crate::topology::NodeId(node);
            let mut seen_pieces = HashSet::new();
            let mut seen_deliveries = HashSet::new();
            for i in pieces {
                if !seen_pieces.insert(i) {
                    continue;
                }
                let Some(ds) = deliveries.get(&(node.0, i)) else { continue };
                if reducing {
                    for &d in ds {
                        if seen_deliveries.insert(d) {
                            waiters[d].push(conds.len());
                            conds.push(Cond { group: g, met: false });
                            groups[g].pending += 1;
                        }
                    }
                } else {
                    let starts_with = coll.source(&coll.piece_at(i)).and_then(|r| coll.ranks.get(r)) == Some(&node);
                    if !starts_with {
                        for &d in ds {
                            waiters[d].push(conds.len());
                        }
                        conds.push(Cond { group: g, met: false });
                        groups[g].pending += 1;
                    }
                }
            }
        }
        for (key, id) in new_deliveries {
            deliveries.entry(key).or_default().push(id);
        }
    }

    Ok((Setup { tr, groups, conds, waiters }, shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, CollectiveKind, PieceId};
    use crate::schedule::{Op, ScheduleHeader, Step, Transfer};
    use crate::topology::{torus, LinkClass, NodeId, NodeKind, Shape, Topology, TopologyBuilder, TorusParams};
    use crate::units::to_f64;

    fn schedule(topology: Topology, kind: CollectiveKind, bytes: u64, pieces: u32, steps: Vec<Step>) -> Schedule {
        let ranks: Vec<NodeId> = (0..topology.num_npus() as u32).map(NodeId).collect();
        let collective = Collective::new(kind, ranks, bytes, pieces, None, &topology).unwrap();
        Schedule { header: ScheduleHeader { topology, collective, meta: None }, steps }
    }

    /// Two npus, one link 0 -> 1 of 10 GB/s and 7 ns.
    fn one_link() -> Topology {
        let mut b = TopologyBuilder::new();
        let a = b.node(NodeKind::Npu, "a");
        let c = b.node(NodeKind::Npu, "c");
        b.link(a, c, 10.0, 7.0, LinkClass::Custom);
        b.build(Shape::Custom, 0.0).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn single_transfer_takes_bytes_over_bandwidth_plus_latency() {
        // all_gather over 2 ranks, 1 piece: a piece is S/2 = 1000 bytes.
        let steps = vec![Step { transfers: vec![Transfer::hop(crate::topology::LinkId(0), Op::Copy, vec![PieceId::block(0, 0)])] }];
        let s = schedule(one_link(), CollectiveKind::AllGather, 2000, 1, steps);
        for fifo in [false, true] {
            let c = event_cost(&s, fifo).unwrap();
            assert!(close(c.time_ns, 1000.0 / 10.0 + 7.0), "{c:?}");
            assert!(close(c.algo_bandwidth_gbps(), 2000.0 / 107.0));
        }
    }

    #[test]
    fn shared_link_is_split_fairly_or_served_in_order() {
        // 2 pieces per block: each piece is 4000 / (2 * 2) = 1000 bytes.
        let l = crate::topology::LinkId(0);
        let steps =
            vec![Step { transfers: vec![Transfer::hop(l, Op::Copy, vec![PieceId::block(0, 0)]), Transfer::hop(l, Op::Copy, vec![PieceId::block(0, 1)])] }];
        let s = schedule(one_link(), CollectiveKind::AllGather, 4000, 2, steps);
        let fair = event_cost(&s, false).unwrap();
        assert!(close(fair.transfer_finish_ns[0][0], 207.0) && close(fair.transfer_finish_ns[0][1], 207.0), "{fair:?}");
        let fifo = event_cost(&s, true).unwrap();
        assert!(close(fifo.transfer_finish_ns[0][0], 107.0) && close(fifo.transfer_finish_ns[0][1], 207.0), "{fifo:?}");
        assert!(close(fifo.time_ns, 207.0));
    }

    fn ring4() -> Topology {
        torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap()
    }

    fn plus(t: &Topology, i: u32) -> crate::topology::LinkId {
        t.link_between(NodeId(i), NodeId((i + 1) % 4)).unwrap()
    }

    #[test]
    fn contention_free_ring_is_no_slower_than_step_synchronous() {
        let t = ring4();
        let step0 = Step { transfers: (0..4).map(|i| Transfer::hop(plus(&t, i), Op::Copy, vec![PieceId::block(i, 0)])).collect() };
        let step1 = Step { transfers: (0..4).map(|i| Transfer::hop(plus(&t, i), Op::Copy, vec![PieceId::block((i + 3) % 4, 0)])).collect() };
        let s = schedule(t, CollectiveKind::AllGather, 4096, 1, vec![step0, step1]);
        let sync = to_f64(&crate::verify::verify_schedule(&s, &Default::default()).unwrap().cost.unwrap().time_ns());
        for fifo in [false, true] {
            let e = event_cost(&s, fifo).unwrap();
            assert!(e.time_ns <= sync * (1.0 + 1e-12), "event {} > sync {sync}", e.time_ns);
            // Here both models agree: two hops of 1024 bytes at 32 GB/s plus 100 ns each.
            assert!(close(e.time_ns, 2.0 * (1024.0 / 32.0 + 100.0)));
        }
    }

    #[test]
    fn forward_waits_for_the_piece() {
        // 0 -> 1 -> 2 -> 3, one hop per step; nodes 1 and 2 have no earlier sends, so only the
        // piece holds them back.
        let t = ring4();
        let steps: Vec<Step> = (0..3).map(|i| Step { transfers: vec![Transfer::hop(plus(&t, i), Op::Copy, vec![PieceId::block(0, 0)])] }).collect();
        let s = schedule(t, CollectiveKind::AllGather, 4096, 1, steps);
        let e = event_cost(&s, false).unwrap();
        let hop = 1024.0 / 32.0 + 100.0;
        for (i, f) in e.transfer_finish_ns.iter().enumerate() {
            assert!(close(f[0], (i + 1) as f64 * hop), "step {i}: {f:?}");
        }
        assert!(close(e.time_ns, 3.0 * hop));
    }

    #[test]
    fn reducing_waits_for_every_contribution() {
        // reduce_scatter on the ring: nodes 1 and 3 each send block 2 to node 2 in step 0 (node 3
        // sends twice the bytes, so it arrives later); node 2 forwards it in step 1 only after
        // both contributions arrived.
        let t = ring4();
        let minus3 = t.link_between(NodeId(3), NodeId(2)).unwrap();
        let step0 = Step {
            transfers: vec![
                Transfer::hop(plus(&t, 1), Op::Reduce, vec![PieceId::block(2, 0)]),
                Transfer::hop(minus3, Op::Reduce, vec![PieceId::block(2, 0), PieceId::block(2, 1)]),
            ],
        };
        let step1 = Step { transfers: vec![Transfer::hop(plus(&t, 2), Op::Reduce, vec![PieceId::block(2, 0)])] };
        // Pieces are 4096 / (4 * 2) = 512 bytes.
        let s = schedule(t, CollectiveKind::ReduceScatter, 4096, 2, vec![step0, step1]);
        let e = event_cost(&s, false).unwrap();
        let late = 1024.0 / 32.0 + 100.0;
        assert!(close(e.transfer_finish_ns[1][0], late + 512.0 / 32.0 + 100.0), "{e:?}");
    }
}

#[cfg(test)]
mod agreement {
    use super::*;
    use crate::algorithms::switched::{switched, Routing, SwitchedAlgorithm};
    use crate::algorithms::{routed_all_to_all, torus_all_to_all, torus_ring_collective, HardwareRouting, RingAlgorithm, Scheduler};
    use crate::collective::{Collective, CollectiveKind};
    use crate::topology::{fat_tree, torus, FatTreeParams, NodeId, TorusParams};

    /// Schedules with and without contention: hardware-routed all-to-alls share links heavily,
    /// single-path fat-tree routing shares uplinks, the torus rings share none.
    fn schedules() -> Vec<(String, Schedule)> {
        let mut out = Vec::new();
        for dims in [&[4usize, 4][..], &[5, 3][..], &[3, 3, 3][..]] {
            let t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
            let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 16, 1, None, &t).unwrap();
            for r in [HardwareRouting::Dor, HardwareRouting::Wfr] {
                out.push((format!("{dims:?} {r:?}"), routed_all_to_all(&t, &c, r).unwrap()));
            }
            out.push((format!("{dims:?} halfring"), torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::Pipeline { chunks: 3 }).unwrap()));
            let ar = Collective::new(CollectiveKind::AllReduce, t.node_ids().collect(), 1 << 16, 1, None, &t).unwrap();
            out.push((format!("{dims:?} all_reduce"), torus_ring_collective(&t, &ar, RingAlgorithm::Ring).unwrap()));
        }
        for (k, osr) in [(4, 1.0), (6, 2.0)] {
            let ft =
                fat_tree(&FatTreeParams { levels: 2, k, osr, npus: 8, board: Some(4), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })
                    .unwrap();
            for a in SwitchedAlgorithm::ALL {
                for &kind in a.kinds() {
                    for &routing in Routing::ALL {
                        let c = Collective::new(kind, (0..8).map(NodeId).collect(), 1 << 14, 1, None, &ft).unwrap();
                        out.push((format!("k{k} {kind} {a:?} {routing:?}"), switched(&ft, &c, a, routing).unwrap()));
                    }
                }
            }
        }
        out
    }

    /// The event-proportional simulation gives the reference's times (to rounding), link by link
    /// sharing fair or first-in-first-out.
    #[test]
    fn the_simulation_agrees_with_the_reference() {
        let mut shared = 0;
        for (name, s) in schedules() {
            for fifo in [false, true] {
                let cap: Vec<f64> = s.header.topology.links().map(|(_, l)| l.bandwidth_gbps).collect();
                let n_links = cap.len();
                let expected = reference::simulate(setup(&s).unwrap().0, fifo, n_links, cap).unwrap();
                let got = event_cost(&s, fifo).unwrap();
                let got: Vec<f64> = got.transfer_finish_ns.concat();
                assert_eq!(got.len(), expected.len(), "{name}");
                for (k, (a, b)) in got.iter().zip(&expected).enumerate() {
                    assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{name} fifo={fifo}: transfer {k} arrives at {a} ns, the reference says {b} ns");
                }
            }
            let mut uses = vec![0usize; s.header.topology.num_links()];
            for st in &s.steps {
                uses.iter_mut().for_each(|u| *u = 0);
                for t in &st.transfers {
                    t.path.iter().for_each(|l| uses[l.index()] += 1);
                }
                shared += uses.iter().any(|&u| u > 1) as usize;
            }
        }
        assert!(shared > 20, "only {shared} steps share a link: contention is not exercised");
    }
}
