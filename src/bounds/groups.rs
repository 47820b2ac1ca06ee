//! Bounds over groups of ranks (docs/design/MODEL.md section 6, "Groups of ranks"): the boards of
//! a fat tree, the npus under one leaf, a pod. A transfer between ranks of different groups
//! crosses. The group transmission count is a bandwidth bound; the crossing bound bounds the
//! step-synchronous time where bandwidth plus latency does not: on a fat tree an all_reduce either
//! chains two switch traversals, or brings every board each other board's contribution
//! separately.
//!
//! The checker re-derives both (`collsched_checker`, module `groups`); this module finds the
//! partitions and cuts to try and computes the same values independently.

use super::cut::{bandwidth, candidate_cuts, membership};
use super::LatencyMetric;
use crate::collective::{Collective, CollectiveKind};
use crate::topology::{NodeId, Topology};
use crate::units::to_checker;
use collsched_checker::Q;
use num_traits::{ToPrimitive, Zero};

/// Groups past this many are not tried: the crossing bound weighs every pair of groups through
/// every third (the checker takes at most 256).
const MAX_GROUPS: usize = 128;

/// A partition of the ranks: each group a node set holding at least one rank (and, for the links
/// that count as leaving it, other nodes: a board's npus outside the ranks, a leaf).
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// What the groups are (`boards`, `leaves`, ...).
    pub label: &'static str,
    /// The groups' node sets, disjoint, in increasing id order each.
    pub groups: Vec<Vec<NodeId>>,
}

/// The partitions worth trying on `t` for `c`: on a fat tree its boards (alone, and with the
/// leaves whose npus are all on one board), its leaves with their npus, its pods; elsewhere the
/// sets of ranks joined by direct links between ranks, when there are several. Groups without a
/// rank are left out; a partition needs two groups, at most [`MAX_GROUPS`].
pub fn partitions(t: &Topology, c: &Collective) -> Vec<Partition> {
    let stores = c.rank_mask(t);
    let is_rank = |v: &NodeId| stores.get(v.index()).copied().unwrap_or(false);
    let mut out: Vec<Partition> = Vec::new();
    let mut add = |label: &'static str, sets: Vec<Vec<NodeId>>| {
        let mut groups: Vec<Vec<NodeId>> = sets.into_iter().filter(|s| s.iter().any(is_rank)).collect();
        groups.iter_mut().for_each(|g| g.sort());
        // Two partitions with the same ranks per group but other node sets count other links:
        // both are kept.
        if (2..=MAX_GROUPS).contains(&groups.len()) && !out.iter().any(|p| p.groups == groups) {
            out.push(Partition { label, groups });
        }
    };
    if let Some(f) = t.fat_tree_shape() {
        let npus = |pred: &dyn Fn(NodeId) -> bool| -> Vec<NodeId> { (0..f.npus as u32).map(NodeId).filter(|&v| pred(v)).collect() };
        if let Some(b) = f.board.filter(|&b| b > 1) {
            let boards = f.npus.div_ceil(b);
            let on_board: Vec<Vec<NodeId>> = (0..boards).map(|i| npus(&|v| v.index() / b == i)).collect();
            add("boards", on_board.clone());
            // With the leaves whose npus are all on the board (npus are numbered leaf by leaf).
            let mut with_leaves = on_board;
            for leaf in (0..f.leaves).filter(|&l| l * f.down < f.npus) {
                let (first, last) = (leaf * f.down, ((leaf + 1) * f.down).min(f.npus) - 1);
                if first / b == last / b {
                    with_leaves[first / b].push(f.leaf(leaf));
                }
            }
            add("boards and their leaves", with_leaves);
        }
        add("leaves", (0..f.leaves).map(|l| npus(&|v| f.leaf_of(v) == l).into_iter().chain([f.leaf(l)]).collect()).collect());
        if f.levels == 3 {
            let pods = f.leaves / f.up.max(1);
            let pod = |p: usize| -> Vec<NodeId> {
                let mut nodes = npus(&|v| f.pod_of_leaf(f.leaf_of(v)) == p);
                nodes.extend((p * f.up..(p + 1) * f.up).flat_map(|i| [f.leaf(i), f.middle_switch(i)]));
                nodes
            };
            add("pods", (0..pods).map(pod).collect());
        }
    } else {
        add("ranks joined by direct links", joined_ranks(t, &stores));
    }
    out
}

/// The ranks joined by up links between ranks (either direction), each set once.
fn joined_ranks(t: &Topology, stores: &[bool]) -> Vec<Vec<NodeId>> {
    let n = t.num_nodes();
    let is_rank = |v: NodeId| stores.get(v.index()).copied().unwrap_or(false);
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for (_, l) in t.links().filter(|(_, l)| l.up && is_rank(l.src) && is_rank(l.dst)) {
        let (a, b) = (root(&mut parent, l.src.index()), root(&mut parent, l.dst.index()));
        parent[a] = b;
    }
    let mut sets: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    for v in t.node_ids().filter(|&v| is_rank(v)) {
        let r = root(&mut parent, v.index());
        sets[r].push(v);
    }
    sets.into_iter().filter(|s| !s.is_empty()).collect()
}

/// The group of each node of `p`, if any.
fn group_of(t: &Topology, p: &Partition) -> Vec<Option<usize>> {
    let mut of = vec![None; t.num_nodes()];
    for (g, set) in p.groups.iter().enumerate() {
        set.iter().for_each(|v| of[v.index()] = Some(g));
    }
    of
}

/// The ranks of each group of `p`.
fn ranks_of(c: &Collective, of: &[Option<usize>], groups: usize) -> Vec<Vec<NodeId>> {
    let mut ranks = vec![Vec::new(); groups];
    for &r in &c.ranks {
        if let Some(g) = of[r.index()] {
            ranks[g].push(r);
        }
    }
    ranks
}

/// The bytes of one block of `c` (all_gather, reduce_scatter, all_reduce), exact.
fn block_bytes(c: &Collective) -> Q {
    to_checker(&c.piece_size_at(0)) * Q::from_integer(c.pieces.into())
}

/// The group transmission-count bound of `p` (MODEL.md section 6): the crossing transfers every
/// piece needs (all_to_all, a demand between groups; all_gather and reduce_scatter G-1, all_reduce
/// 2(G-1)) over the capacity of the up links leaving the groups' node sets, or entering them,
/// whichever bounds more, with that direction (`true`: entering). `None` when nothing crosses.
pub fn group_transmissions(t: &Topology, c: &Collective, p: &Partition) -> Option<(Q, bool)> {
    let of = group_of(t, p);
    let ranks = ranks_of(c, &of, p.groups.len());
    let r = c.num_ranks() as i64;
    let g = p.groups.len() as i64;
    let bytes = match c.kind {
        CollectiveKind::AllToAll => {
            let mut sum = Q::zero();
            for i in 0..c.num_ranks() {
                for j in (0..c.num_ranks()).filter(|&j| of[c.ranks[j].index()] != of[c.ranks[i].index()]) {
                    sum += to_checker(&c.block_size(i, j));
                }
            }
            sum
        }
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter => block_bytes(c) * Q::from_integer((r * (g - 1)).into()),
        CollectiveKind::AllReduce => block_bytes(c) * Q::from_integer((r * 2 * (g - 1)).into()),
    };
    if bytes.is_zero() || ranks.iter().any(Vec::is_empty) {
        return None;
    }
    [false, true]
        .into_iter()
        .filter_map(|into| {
            let capacity: crate::units::Rational = t
                .links()
                .filter(|(_, l)| {
                    let (inside, outside) = if into { (l.dst, l.src) } else { (l.src, l.dst) };
                    l.up && of[inside.index()].is_some() && of[inside.index()] != of[outside.index()]
                })
                .map(|(_, l)| bandwidth(l))
                .sum();
            (!capacity.is_zero()).then(|| (&bytes / to_checker(&capacity), into))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
}

/// A crossing bound: its value and the cuts its witness names.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossingBound {
    /// The bound on step-synchronous time, ns.
    pub value_ns: Q,
    /// The cuts (node set, counted entering) that bind at some threshold.
    pub cuts: Vec<(Vec<NodeId>, bool)>,
}

/// The crossing bound of `p` (MODEL.md section 6) on top of the instance's best `bandwidth` and
/// `latency` bounds, ns: the least over thresholds t (the latency bound, and every L2 above it)
/// of max(t, latency) + max(bandwidth, the demand of the pairs of groups whose two-crossing latency
/// L2 exceeds t, over each cut's capacity). The cuts tried are each group's node set and the
/// topology's candidate cuts that hold all or none of each group's ranks, both ways. `None` for all_to_all, for groups
/// that cannot reach each other, and when nothing must cross.
pub fn crossing(t: &Topology, c: &Collective, p: &Partition, bandwidth_ns: &Q, latency_ns: &Q) -> Option<CrossingBound> {
    if c.kind == CollectiveKind::AllToAll {
        return None;
    }
    let of = group_of(t, p);
    let g = p.groups.len();
    let ranks = ranks_of(c, &of, g);
    if g < 2 || ranks.iter().any(Vec::is_empty) {
        return None;
    }
    // Latencies in the metric's integer units (1/denominator ns), so that the sums over every
    // third group are machine additions.
    let metric = LatencyMetric::new(t);
    let up = crate::topology::UpAdjacency::new(t);
    let mut lx = vec![vec![0i128; g]; g];
    for (h, row) in lx.iter_mut().enumerate() {
        let dist = metric.scaled_distances_from_set(&up, &ranks[h]);
        for f in (0..g).filter(|&f| f != h) {
            row[f] = ranks[f].iter().filter_map(|r| dist[r.index()]).min()?;
        }
    }
    let pairs = || (0..g).flat_map(move |h| (0..g).filter(move |&f| f != h).map(move |f| (h, f)));
    let three = 3 * pairs().map(|(h, f)| lx[h][f]).min()?;
    let l2: Vec<(usize, usize, i128)> =
        pairs().map(|(h, f)| (h, f, (0..g).filter(|&m| m != h && m != f).map(|m| lx[h][m] + lx[m][f]).fold(three, i128::min))).collect();
    // A pair's demand in blocks (all_reduce: all R; all_gather: the source group's; reduce_scatter:
    // the destination group's).
    let blocks = |h: usize, f: usize| -> u128 {
        (match c.kind {
            CollectiveKind::AllGather => ranks[h].len(),
            CollectiveKind::ReduceScatter => ranks[f].len(),
            _ => c.num_ranks(),
        }) as u128
    };
    // The cuts: each group's set, and the candidates that hold all or none of each group's ranks;
    // both ways.
    let stores = c.rank_mask(t);
    let whole = |nodes: &[NodeId]| {
        let u = membership(t, nodes, false);
        ranks.iter().all(|rs| rs.iter().all(|r| u[r.index()] == u[rs[0].index()]))
    };
    let mut sets: Vec<Vec<NodeId>> = p.groups.clone();
    sets.extend(
        candidate_cuts(t).into_iter().map(|(_, nodes)| nodes).filter(|n| n.iter().any(|v| stores.get(v.index()).copied().unwrap_or(false)) && whole(n)),
    );
    sets.sort();
    sets.dedup();
    let block = block_bytes(c);
    // Per cut: its nodes and side, which groups it holds, and the bytes per block of demand over
    // its capacity.
    let sides: Vec<(Vec<NodeId>, bool, Vec<bool>, Q)> = sets
        .into_iter()
        .flat_map(|nodes| [false, true].map(|into| (nodes.clone(), into)))
        .filter_map(|(nodes, into)| {
            let u = membership(t, &nodes, into);
            let inside: Vec<bool> = ranks.iter().map(|rs| u[rs[0].index()]).collect();
            let capacity: crate::units::Rational = t.links().filter(|(_, l)| l.up && u[l.src.index()] && !u[l.dst.index()]).map(|(_, l)| bandwidth(l)).sum();
            (!capacity.is_zero()).then(|| (nodes, into, inside, &block / to_checker(&capacity)))
        })
        .collect();
    // Thresholds: the latency bound and every L2 above it, each with its floor in the metric's
    // units (an L2 exceeds a threshold exactly when it exceeds that floor).
    let latency_floor = (latency_ns * Q::from_integer(metric.denominator().into())).floor().to_integer().to_i128().unwrap_or(i128::MAX);
    let mut above: Vec<i128> = l2.iter().map(|&(_, _, x)| x).filter(|&x| x > latency_floor).collect();
    above.sort_unstable();
    above.dedup();
    let mut thresholds: Vec<(Q, i128)> = vec![(latency_ns.clone(), latency_floor)];
    thresholds.extend(above.into_iter().map(|x| (to_checker(&metric.ns(x)), x)));
    // Thresholds from the largest down: each cut's demand above the threshold only grows, pair by
    // pair, as the threshold falls past the pairs' L2 (each cut's separated pairs sorted likewise).
    let separated: Vec<Vec<(i128, u128)>> = sides
        .iter()
        .map(|(_, _, inside, _)| {
            let mut v: Vec<(i128, u128)> = l2.iter().filter(|(h, f, _)| inside[*h] && !inside[*f]).map(|&(h, f, x)| (x, blocks(h, f))).collect();
            v.sort_by_key(|a| std::cmp::Reverse(a.0));
            v
        })
        .collect();
    let mut taken = vec![0usize; sides.len()];
    let mut must = vec![0u128; sides.len()];
    let mut best: Option<Q> = None;
    let mut binding: Vec<usize> = Vec::new();
    for (th, th_floor) in thresholds.iter().rev() {
        let mut bw = bandwidth_ns.clone();
        let mut at: Option<usize> = None;
        for (i, (_, _, _, per_block)) in sides.iter().enumerate() {
            while let Some(&(_, n)) = separated[i].get(taken[i]).filter(|(x, _)| x > th_floor) {
                must[i] += n;
                taken[i] += 1;
            }
            if must[i] == 0 {
                continue;
            }
            let v = per_block * Q::from_integer(must[i].into());
            if v > bw {
                bw = v;
                at = Some(i);
            }
        }
        let value = th.clone().max(latency_ns.clone()) + bw;
        binding.extend(at);
        best = Some(best.map_or(value.clone(), |b| b.min(value)));
    }
    binding.sort();
    binding.dedup();
    let value_ns = best?;
    Some(CrossingBound { value_ns, cuts: binding.into_iter().map(|i| (sides[i].0.clone(), sides[i].1)).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::certificate::{certificate_of_instance, schedule_json};
    use crate::bounds::flow::FlowOptions;
    use crate::collective::PieceId;
    use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
    use crate::spec::{Instance, Spec};
    use crate::topology::LinkId;
    use crate::units::Rational;
    use crate::verify::{verify_schedule, VerifyOptions};
    use serde_json::json;

    /// Npus 0, 1, 2 under switch 3, every link 1 GB/s and 10 ns, the switch 100 ns: every path
    /// between npus takes 120 ns. Links in order 0->3, 3->0, 1->3, 3->1, 2->3, 3->2.
    fn star(kind: &str) -> Instance {
        let links: Vec<String> = [(0, 3), (3, 0), (1, 3), (3, 1), (2, 3), (3, 2)]
            .iter()
            .map(|(a, b)| format!(r#"{{"src": {a}, "dst": {b}, "bandwidth_gbps": 1, "latency_ns": 10}}"#))
            .collect();
        let nodes = r#"{"kind": "npu"}, {"kind": "npu"}, {"kind": "npu"}, {"kind": "switch"}"#;
        let text = format!(
            r#"{{"topology": {{"custom": {{"nodes": [{nodes}], "links": [{}], "switch_latency_ns": 100}}}}, "collective": {{"kind": "{kind}", "bytes_per_rank": 18}}}}"#,
            links.join(", ")
        );
        Spec::parse(&text, "test").unwrap().instance().unwrap()
    }

    fn checked(inst: &Instance, schedule: Option<&Schedule>) -> collsched_checker::CheckReport {
        let mut cert = certificate_of_instance(inst, &"0".repeat(64), &FlowOptions { time_limit: std::time::Duration::from_secs(2), ..Default::default() });
        if let Some(s) = schedule {
            let contention = VerifyOptions { allow_contention: true, ..Default::default() };
            let cost = verify_schedule(s, &contention).unwrap().cost.unwrap();
            cert["schedule"] = schedule_json(cost.bandwidth_ns(), cost.time_ns(), false);
            cert["schedule"]["file"] = json!("s.json");
            cert["schedule"]["sha256"] = json!("0".repeat(64));
        }
        collsched_checker::check_bounds_str(&cert.to_string()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn sending_every_vector_straight_to_every_rank_meets_the_crossing_bound() {
        // all_reduce of 18 bytes per rank: bandwidth 24 ns (4 transfers of each 6-byte piece over
        // 3 links out of ranks), latency 120 ns. Chains crossing twice take 240 ns; otherwise each
        // rank sends its whole vector to both others, 36 bytes over its one link: 120 + 36 = 156.
        let inst = star("all_reduce");
        let report = checked(&inst, None);
        let crossing = report.claims.iter().find(|c| c.bound == "crossing").expect("a crossing claim");
        assert_eq!(crossing.claimed, crossing.derived, "not tight");
        assert_eq!(report.time_bound, Some(Q::from_integer(156.into())));
        assert_eq!(report.bandwidth_bound, Some(Q::from_integer(24.into())));

        // The schedule that does just that: one step, each rank reducing its vector into both
        // others. Its two transfers share the rank's link (rule 2, which the bound does not
        // assume: a link's bytes in a step are what the step-synchronous cost charges).
        let c = &inst.collective;
        let all: Vec<PieceId> = (0..3).map(|b| PieceId::block(b, 0)).collect();
        let transfers = (0u32..3)
            .flat_map(|i| (0u32..3).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| Transfer { path: vec![LinkId(2 * i), LinkId(2 * j + 1)], op: Op::Reduce, pieces: all.clone() })
            .collect();
        let s = Schedule { header: ScheduleHeader { topology: inst.topology.clone(), collective: c.clone(), meta: None }, steps: vec![Step { transfers }] };
        let contention = VerifyOptions { allow_contention: true, ..Default::default() };
        let cost = verify_schedule(&s, &contention).unwrap();
        assert!(cost.is_valid());
        assert_eq!(cost.cost.as_ref().unwrap().time_ns(), Rational::from_integer(156));
        assert!(checked(&inst, Some(&s)).schedule.is_some());
    }

    #[test]
    fn boards_of_a_fat_tree_give_a_crossing_bound_that_checks() {
        // 2 levels, k = 8: 16 npus under 4 leaves, boards of 4 (one per leaf). Chains that cross
        // twice take two traversals (2 x 3,100 ns); one crossing brings each board the three
        // others' vectors over its four leaf links.
        let text = r#"{"topology": {"fat_tree": {"levels": 2, "k": 8, "osr": 1, "npus": 16, "board": 4, "bandwidth_gbps": 400.0, "latency_ns": 25.0, "switch_latency_ns": 1000.0}},
            "collective": {"kind": "all_reduce", "bytes_per_rank": "1MiB"}}"#;
        let inst = Spec::parse(text, "test").unwrap().instance().unwrap();
        let report = checked(&inst, None);
        let crossing = report.claims.iter().find(|c| c.bound == "crossing").expect("a crossing claim");
        assert_eq!(crossing.claimed, crossing.derived, "not tight");
        // 3,100 ns + 3 x 1 MiB / (4 links x 400 bytes/ns) = 3,100 + 1,966.08.
        assert_eq!(crossing.derived, Q::new(5_066_080.into(), 1000.into()));
        assert_eq!(report.time_bound, Some(crossing.derived.clone()));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]
        /// On small fat trees with boards, failed links and any ranks, every route-and-step
        /// candidate of the gathering and reducing kinds takes at least the certified time bound
        /// in the step-synchronous model (with latencies from none to far above the bytes' time).
        #[test]
        fn no_schedule_beats_the_time_bound(
            (levels, k, npus, board) in proptest::sample::select(vec![(2u32, 4usize, 8usize, 2usize), (2, 4, 8, 4), (2, 8, 16, 4), (2, 8, 32, 8), (3, 4, 16, 4)]),
            mask in 0u64..u64::MAX,
            failed in proptest::collection::vec(0usize..1000, 0..=2),
            (latency, switch) in proptest::sample::select(vec![(0.0, 0.0), (25.0, 0.0), (25.0, 1000.0), (100.0, 20000.0)]),
            kind in proptest::sample::select(vec![CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce]),
        ) {
            use crate::topology::{fat_tree, FatTreeParams, FaultPattern};
            let params = FatTreeParams { levels, k, osr: 1.0, npus, board: Some(board), bandwidth_gbps: 100.0, latency_ns: latency, switch_latency_ns: switch };
            let mut t = fat_tree(&params).unwrap();
            let cables: Vec<(NodeId, NodeId)> = {
                let all: Vec<(NodeId, NodeId)> = t.links().map(|(_, l)| (l.src, l.dst)).filter(|(a, b)| a < b).collect();
                let mut picked: Vec<(NodeId, NodeId)> = failed.iter().map(|&i| all[i % all.len()]).collect();
                picked.sort();
                picked.dedup();
                picked
            };
            FaultPattern { cables, ..Default::default() }.apply(&mut t).unwrap();
            let ranks: Vec<NodeId> = (0..npus).filter(|i| mask >> i & 1 == 1).map(|i| NodeId(i as u32)).collect();
            proptest::prop_assume!(ranks.len() >= 2 && t.check_connected(&ranks).is_ok());
            let c = Collective::new(kind, ranks, 1 << 16, 1, None, &t).unwrap();
            let bound = crate::bounds::certified::certified_bounds_ns(&t, &c, std::time::Duration::from_millis(200)).unwrap().time.unwrap();
            let contention = VerifyOptions { allow_contention: true, ..Default::default() };
            for (m, sched) in crate::synth::switched::route_and_step_candidates(&t, &c).unwrap() {
                let time = crate::units::to_f64(&verify_schedule(&sched, &contention).unwrap().cost.unwrap().time_ns());
                proptest::prop_assert!(time >= bound * (1.0 - 1e-12), "{m:?}: {time} ns below the bound {bound} ns");
            }
        }
    }
}
