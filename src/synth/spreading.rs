//! All-gather, reduce-scatter and all-reduce on any topology, by spreading pieces over single
//! hops: a store-and-forward schedule for the time objective where no hand-written generator fits
//! (a torus with failed cables, a mesh, a custom network).
//!
//! **All-gather.** Every rank starts with its own pieces and must end with all of them. Each step,
//! every receiving npu takes at most `batch` pieces per hop that enters it (one transfer; fewer on
//! hops slower than the fastest, in proportion to their bandwidth), each a piece it neither holds
//! nor receives from another hop this step, rarest first (the piece held by the fewest npus, among
//! a bounded window of candidates): pieces spread like a gossip, and every link works every step
//! until the receivers run out of pieces their neighbours can give. A transfer goes over one hop,
//! no two transfers of a step share a link, and every npu receives each piece once, so each piece
//! travels down a tree rooted at its source. For a group, the hops join its ranks only, passing
//! through the routers of npus outside it: those run no program in a runtime, so they may not
//! store and forward (rule 6 lowers the ranks alone).
//!
//! **Reduce-scatter** is the all-gather's time reversal ([`crate::schedule::reverse`]): the
//! transfer of piece `(j, k)` from `u` to `v` at step `t` of `T` becomes a `reduce` from `v` to
//! `u` at step `T - 1 - t` over the reverse links. **All-reduce** is the reduce-scatter followed
//! by the all-gather on the same trees (`copy` of the full value replaces each partial one).
//!
//! Pieces per block and pieces per transfer (`batch`) trade latency against granularity: one
//! piece of a block per hop and step takes about (R-1)/degree steps, each paying a path latency,
//! which on a large torus (8x8x8: about 100 steps) costs more than the bandwidth it saves; a
//! batch of b pieces per transfer takes about b times fewer steps. The portfolio tries several of
//! each and keeps the fastest verified schedule. Which receiver takes a contended link first
//! shapes the trees, so on small instances several receiver orders are tried (a fault and its
//! mirror image then spread alike more often).

use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::reverse::{reverse_links, reversed_as_reduce};
use crate::schedule::{Op, Step, Transfer};
use crate::topology::hops::HopGraph;
use crate::topology::Topology;
use std::time::Instant;

/// Candidate pieces looked at per hop and step for the rarest one: the whole set on small
/// instances, a rotating window on large ones (512 npus with 8 pieces per block hold 4,096).
const WINDOW: usize = 64;

/// One piece moved over one hop: (hop index, piece index `source rank * pieces + k`).
type Move = (usize, usize);

/// The steps of `c` (all_gather, reduce_scatter or all_reduce) by spreading, each transfer
/// carrying up to `batch` pieces (at least 1), or `None` when `deadline` passed first.
///
/// Errors: [`Error::bad`] for all_to_all; [`Error::infeasible`] when some rank cannot be reached
/// over hops that are up (for the reducing kinds: up in both directions).
pub fn spread_steps(t: &Topology, c: &Collective, batch: usize, deadline: Instant) -> Result<Option<Vec<Step>>> {
    // Npus outside the group route paths but never store (they run no program).
    let hops = HopGraph::with_endpoints(t, &c.rank_mask(t));
    // The reducing kinds run the trees backwards: a hop is usable only if its reverse is up.
    let usable: Vec<bool> = match c.kind {
        CollectiveKind::AllToAll => return Err(Error::bad("spreading: all_to_all is synthesized by time-expanded routing, not by spreading")),
        CollectiveKind::AllGather => vec![true; hops.hops.len()],
        CollectiveKind::ReduceScatter | CollectiveKind::AllReduce => {
            let reverse = reverse_links(t);
            hops.hops.iter().map(|h| h.path.iter().all(|l| reverse[l.index()].is_some())).collect()
        }
    };
    // The receivers' order decides which of them gets a contended link first, and with it how
    // the trees grow: on small instances several orders are tried and the fewest steps kept (a
    // 3x3 torus with one line, all_gather around a failed cable: 4 of 8 orders meet the bound,
    // among them not the npus' own order, though they do on the mirrored fault).
    let mut best: Option<Vec<Vec<Move>>> = None;
    for seed in 0..order_tries(c.num_ranks(), c.num_ranks() * c.pieces as usize) {
        match spread(t, c, &hops, &usable, batch.max(1), deadline, seed)? {
            Some(moves) if best.as_ref().is_none_or(|b| moves.len() < b.len()) => best = Some(moves),
            Some(_) => {}
            None => break,
        }
    }
    let Some(moves) = best else { return Ok(None) };
    let piece = |q: usize| PieceId::block((q / c.pieces as usize) as u32, (q % c.pieces as usize) as u32);
    // A hop's moves of a step are consecutive: one transfer carries them all.
    let gather: Vec<Step> = moves
        .iter()
        .map(|step| Step {
            transfers: step
                .chunk_by(|a, b| a.0 == b.0)
                .map(|run| Transfer { path: hops.hops[run[0].0].path.clone(), op: Op::Copy, pieces: run.iter().map(|&(_, q)| piece(q)).collect() })
                .collect(),
        })
        .collect();
    Ok(Some(match c.kind {
        CollectiveKind::AllGather => gather,
        CollectiveKind::ReduceScatter => reversed_as_reduce(t, &gather)?,
        _ => reversed_as_reduce(t, &gather)?.into_iter().chain(gather).collect(),
    }))
}

/// Bitsets of pieces, one row per npu.
struct Rows {
    words: usize,
    bits: Vec<u64>,
}

impl Rows {
    fn new(rows: usize, columns: usize) -> Self {
        let words = columns.div_ceil(64);
        Rows { words, bits: vec![0; rows * words] }
    }
    fn row(&self, r: usize) -> &[u64] {
        &self.bits[r * self.words..(r + 1) * self.words]
    }
    fn get(&self, r: usize, q: usize) -> bool {
        self.bits[r * self.words + q / 64] >> (q % 64) & 1 == 1
    }
    fn set(&mut self, r: usize, q: usize) {
        self.bits[r * self.words + q / 64] |= 1 << (q % 64);
    }
}

/// The all-gather moves per step (see the module docs).
/// The receivers' order of [`spread`] for try `seed`: the npus' own order for 0, otherwise a
/// shuffle by a fixed generator (the same on every run).
fn shuffle(order: &mut [usize], seed: u64) {
    if seed == 0 {
        return;
    }
    // Knuth's MMIX linear congruential generator, its high bits.
    let mut x = seed;
    for i in (1..order.len()).rev() {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        order.swap(i, ((x >> 33) % (i as u64 + 1)) as usize);
    }
}

/// How many receiver orders [`spread_steps`] tries: up to 8 where a try is cheap (`ranks` times
/// the `pieces` of all blocks at most [`ORDER_WORK`] / 2), one on large instances (64 ranks at
/// one piece per block: 8; at 24: 1).
fn order_tries(ranks: usize, pieces: usize) -> u64 {
    (ORDER_WORK / (ranks * pieces).max(1)).clamp(1, 8) as u64
}

/// Ranks times pieces up to which [`spread_steps`] tries more than one receiver order.
const ORDER_WORK: usize = 1 << 16;

fn spread(t: &Topology, c: &Collective, hops: &HopGraph, usable: &[bool], batch: usize, deadline: Instant, seed: u64) -> Result<Option<Vec<Vec<Move>>>> {
    let n = t.num_npus();
    let p = c.pieces as usize;
    let m = c.num_ranks() * p;
    let mut have = Rows::new(n, m);
    let mut holders = vec![1u32; m];
    for (i, r) in c.ranks.iter().enumerate() {
        for k in 0..p {
            have.set(r.index(), i * p + k);
        }
    }
    let is_rank = c.rank_mask(t);
    let mut order: Vec<usize> = (0..n).filter(|&v| is_rank[v]).collect();
    shuffle(&mut order, seed);
    // Pieces per transfer in proportion to the hop's bandwidth (its slowest link), so that on a
    // network of mixed links a step's transfers take about the same time: `batch` on the
    // fastest hops, at least one on every hop.
    let hop_gbps: Vec<f64> = hops.hops.iter().map(|h| h.path.iter().map(|l| t.link(*l).bandwidth_gbps).fold(f64::INFINITY, f64::min)).collect();
    let fastest = hop_gbps.iter().copied().fold(0.0, f64::max);
    let cap: Vec<usize> = hop_gbps.iter().map(|&b| ((batch as f64 * b / fastest).round() as usize).clamp(1, batch)).collect();
    let full = |have: &Rows, v: usize| (0..m).all(|q| have.get(v, q));
    let mut is_full: Vec<bool> = (0..n).map(|v| is_rank[v] && full(&have, v)).collect();
    let mut missing = (0..n).filter(|&v| is_rank[v] && !is_full[v]).count();
    let mut steps: Vec<Vec<Move>> = Vec::new();
    let mut link_busy = vec![false; t.num_links()];
    while missing > 0 {
        if Instant::now() >= deadline {
            return Ok(None);
        }
        let s = steps.len();
        let mut moves: Vec<Move> = Vec::new();
        link_busy.iter_mut().for_each(|b| *b = false);
        for (rot, &v) in order.iter().enumerate() {
            // Rotating start positions spread the choices of neighbouring receivers.
            let start = (s * 7 + rot * 13) % m.max(1);
            let mut incoming: Vec<usize> = Vec::new();
            let mut ins: Vec<(usize, usize)> =
                hops.into[v].iter().filter(|&&h| usable[h]).map(|&h| (count_new(&have, hops.hops[h].from.index(), v), h)).filter(|&(k, _)| k > 0).collect();
            ins.sort_unstable();
            for (_, h) in ins {
                let path = &hops.hops[h].path;
                if path.iter().any(|l| link_busy[l.index()]) {
                    continue;
                }
                let u = hops.hops[h].from.index();
                // Up to its share of `batch` distinct pieces over the hop, rarest first: one
                // transfer.
                for _ in 0..cap[h] {
                    let Some(q) = rarest_new(&have, &holders, u, v, &incoming, start, m) else { break };
                    path.iter().for_each(|l| link_busy[l.index()] = true);
                    incoming.push(q);
                    moves.push((h, q));
                }
            }
        }
        if moves.is_empty() {
            let stuck = order.iter().find(|&&v| is_rank[v] && !full(&have, v)).copied().unwrap_or(0);
            let lacks = (0..m).find(|&q| !have.get(stuck, q)).unwrap_or(0);
            return Err(Error::infeasible(format!(
                "spreading {}: npu {stuck} cannot receive the block of npu {} over hops that are up{}",
                c.kind,
                c.ranks[lacks / p].index(),
                if c.kind == CollectiveKind::AllGather { "" } else { " in both directions" }
            )));
        }
        for &(h, q) in &moves {
            let v = hops.hops[h].to.index();
            have.set(v, q);
            holders[q] += 1;
        }
        for &(h, _) in &moves {
            let v = hops.hops[h].to.index();
            if is_rank[v] && !is_full[v] && full(&have, v) {
                is_full[v] = true;
                missing -= 1;
            }
        }
        steps.push(moves);
    }
    Ok(Some(steps))
}

/// Pieces `u` holds that `v` lacks.
fn count_new(have: &Rows, u: usize, v: usize) -> usize {
    let (a, b) = (have.row(u), have.row(v));
    a.iter().zip(b).map(|(x, y)| (x & !y).count_ones() as usize).sum()
}

/// Among the pieces `u` holds and `v` neither holds nor receives this step, the one with the
/// fewest holders within a window of [`WINDOW`] candidates from `start` (wrapping).
fn rarest_new(have: &Rows, holders: &[u32], u: usize, v: usize, incoming: &[usize], start: usize, m: usize) -> Option<usize> {
    let (a, b) = (have.row(u), have.row(v));
    let words = a.len();
    let mut best: Option<usize> = None;
    let mut seen = 0;
    for i in 0..=words {
        let w = (start / 64 + i) % words;
        let mut bits = a[w] & !b[w];
        if i == 0 {
            bits &= u64::MAX << (start % 64);
        } else if i == words {
            bits &= !(u64::MAX << (start % 64));
        }
        while bits != 0 {
            let q = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if q >= m || incoming.contains(&q) {
                continue;
            }
            if best.is_none_or(|x| holders[q] < holders[x]) {
                best = Some(q);
            }
            seen += 1;
            if seen >= WINDOW {
                return best;
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{Schedule, ScheduleHeader};
    use crate::synth::steps::tests::{fail_cable, fail_picked_cables};
    use crate::topology::{fat_tree, torus, FatTreeParams, NodeId, TorusParams};
    use crate::verify::{verify_schedule, VerifyOptions};

    const KINDS: [CollectiveKind; 3] = [CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce];

    fn far() -> Instant {
        Instant::now() + std::time::Duration::from_secs(3600)
    }

    /// Spreads `kind` over `ranks` and verifies it (rules 1-5); returns the steps.
    fn verified(t: &Topology, kind: CollectiveKind, ranks: Vec<NodeId>, pieces: u32) -> usize {
        verified_in_batches(t, kind, ranks, pieces, 1)
    }

    /// [`verified`] with up to `batch` pieces per transfer.
    fn verified_in_batches(t: &Topology, kind: CollectiveKind, ranks: Vec<NodeId>, pieces: u32, batch: usize) -> usize {
        let c = Collective::new(kind, ranks, 1 << 20, pieces, None, t).unwrap();
        let steps = spread_steps(t, &c, batch, far()).unwrap().unwrap();
        assert!(steps.iter().flat_map(|s| &s.transfers).all(|x| (1..=batch).contains(&x.pieces.len())));
        let s = Schedule { header: ScheduleHeader { topology: t.clone(), collective: c, meta: None }, steps };
        let r = verify_schedule(&s, &VerifyOptions::default()).unwrap();
        assert!(r.is_valid(), "{kind}: {:?}", r.findings.failures().iter().take(3).map(|d| d.to_string()).collect::<Vec<_>>());
        // Rule 6 lowers the ranks alone: no npu outside the group may send or receive.
        crate::lower::lower(&s, &Default::default()).unwrap_or_else(|e| panic!("{kind}: {e}"));
        s.steps.len()
    }

    #[test]
    fn a_healthy_torus_gathers_within_a_step_of_the_in_degree_bound() {
        // Every rank must receive (R - 1) * P pieces over 2 * dims links, one piece per link per step.
        for (dims, pieces) in [(vec![4, 4, 4], 1), (vec![4, 4, 4], 4), (vec![5, 5], 2), (vec![8], 1)] {
            let t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            let r = t.num_npus();
            let bound = ((r - 1) * pieces as usize).div_ceil(2 * dims.len());
            let steps = verified(&t, CollectiveKind::AllGather, t.node_ids().collect(), pieces);
            assert!(steps <= bound + 1, "{dims:?} x {pieces}: {steps} steps, bound {bound}");
            // The reversal has the same steps; all-reduce both.
            assert_eq!(verified(&t, CollectiveKind::ReduceScatter, t.node_ids().collect(), pieces), steps);
            assert_eq!(verified(&t, CollectiveKind::AllReduce, t.node_ids().collect(), pieces), 2 * steps);
        }
    }

    #[test]
    fn mirrored_faults_spread_alike() {
        // A 3x3 torus whose second dimension is a line, all_gather with a failed cable at either
        // end of a line: the faults mirror each other, and with several receiver orders both meet
        // the in-degree bound of the rank at the cable (8 pieces over 2 links: 4 steps; the npus'
        // own order alone took 5 steps on one of them).
        let mut p = TorusParams::uniform(&[3, 3], 32.0, 100.0);
        p.wrap = vec![true, false];
        for (a, b) in [([0, 0], [0, 1]), ([0, 1], [0, 2])] {
            let mut t = torus(&p).unwrap();
            let shape = t.torus_shape().unwrap().clone();
            fail_cable(&mut t, shape.node_at(&a).unwrap().0, shape.node_at(&b).unwrap().0);
            assert_eq!(verified(&t, CollectiveKind::AllGather, t.node_ids().collect(), 1), 4, "{a:?}-{b:?}");
        }
    }

    #[test]
    fn batches_cut_the_steps() {
        // 8x8: one piece per hop per step needs at least 63/4 = 16 steps; four per transfer
        // could take 4 by bandwidth, but the diameter is 8 hops: within a step of that.
        let t = torus(&TorusParams::uniform(&[8, 8], 32.0, 100.0)).unwrap();
        let one = verified(&t, CollectiveKind::AllGather, t.node_ids().collect(), 1);
        let four = verified_in_batches(&t, CollectiveKind::AllGather, t.node_ids().collect(), 1, 4);
        assert!(one >= 16 && four <= 9, "{one} steps one by one, {four} in fours");
        assert_eq!(verified_in_batches(&t, CollectiveKind::AllReduce, t.node_ids().collect(), 1, 4), 2 * four);
    }

    #[test]
    fn slower_hops_carry_fewer_pieces_per_transfer() {
        // A 4x4 torus whose dimension 1 runs at half the speed: in batches of four, dimension-0
        // transfers carry more than two pieces (up to four), dimension-1 transfers up to two, so
        // a step's transfers take about the same time.
        let mut p = TorusParams::uniform(&[4, 4], 64.0, 100.0);
        p.bandwidth_gbps = vec![64.0, 32.0];
        let t = torus(&p).unwrap();
        let c = Collective::new(CollectiveKind::AllGather, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        let steps = spread_steps(&t, &c, 4, far()).unwrap().unwrap();
        let most = |gbps: f64| steps.iter().flat_map(|s| &s.transfers).filter(|x| t.link(x.path[0]).bandwidth_gbps == gbps).map(|x| x.pieces.len()).max();
        assert!(most(64.0).unwrap() > 2 && most(64.0).unwrap() <= 4 && most(32.0) == Some(2), "{:?} {:?}", most(64.0), most(32.0));
        verified_in_batches(&t, CollectiveKind::AllReduce, t.node_ids().collect(), 1, 4);
    }

    #[test]
    fn a_group_relays_through_npus_outside_it() {
        // Ranks on a diagonal of a 4x4 torus: every path between them passes npus outside the
        // group, which route the paths without storing (`verified` lowers the ranks alone).
        let t = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        let ranks = vec![NodeId(0), NodeId(5), NodeId(10), NodeId(15)];
        for kind in KINDS {
            verified(&t, kind, ranks.clone(), 2);
        }
    }

    #[test]
    fn a_link_down_one_way_is_used_by_gathers_only() {
        // Ring of 4 with 0->1 down but 1->0 up: all-gather may send 1->0; the reducing kinds run
        // the trees backwards, so they use neither direction of that cable.
        let mut t = torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap();
        let l = t.link_between(NodeId(0), NodeId(1)).unwrap();
        t.set_down(l);
        let back = t.link_between(NodeId(1), NodeId(0)).unwrap();
        for kind in KINDS {
            let c = Collective::new(kind, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
            let steps = spread_steps(&t, &c, 1, far()).unwrap().unwrap();
            let uses_back = steps.iter().flat_map(|s| &s.transfers).any(|x| x.path.contains(&back));
            if kind != CollectiveKind::AllGather {
                assert!(!uses_back, "{kind} uses the reverse of a down link");
            }
            verified(&t, kind, t.node_ids().collect(), 1);
        }
    }

    #[test]
    fn switched_hops_never_share_a_link() {
        let t =
            fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 8, board: None, bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })
                .unwrap();
        for kind in KINDS {
            verified(&t, kind, t.node_ids().filter(|&v| t.is_npu(v)).collect(), 2);
        }
    }

    #[test]
    fn a_rank_cut_off_is_named_and_all_to_all_is_refused() {
        let mut t = torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap();
        fail_cable(&mut t, 1, 2);
        fail_cable(&mut t, 2, 3);
        let c = Collective::new(CollectiveKind::AllGather, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        let e = spread_steps(&t, &c, 1, far()).unwrap_err();
        assert!(e.message().contains("npu 0 cannot receive the block of npu 2"), "{}", e.message());
        let a2a = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        assert!(spread_steps(&t, &a2a, 1, far()).is_err());
        assert!(spread_steps(&t, &c, 1, Instant::now()).unwrap().is_none());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, ..Default::default() })]

        /// Over sizes, failed cables anywhere (up to three), groups and piece counts, every kind
        /// spreads to a schedule that verifies, whenever the group stays connected.
        #[test]
        fn spread_schedules_verify_over_sizes_faults_and_groups(
            dims in proptest::prop_oneof![proptest::collection::vec(2usize..7, 1..=2), proptest::collection::vec(2usize..4, 3..=3)],
            cuts in proptest::collection::vec((0usize..1000, 0usize..8), 0..=3),
            group in proptest::collection::vec(proptest::bool::ANY, 64),
            pieces in 1u32..=3,
            batch in 1usize..=3,
        ) {
            let mut t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            fail_picked_cables(&mut t, &cuts);
            let mut ranks: Vec<NodeId> = t.node_ids().filter(|v| group[v.index() % 64]).collect();
            if ranks.len() < 2 {
                ranks = t.node_ids().collect();
            }
            proptest::prop_assume!(t.check_connected(&t.node_ids().collect::<Vec<_>>()).is_ok());
            for kind in KINDS {
                verified_in_batches(&t, kind, ranks.clone(), pieces, batch);
            }
        }
    }
}
