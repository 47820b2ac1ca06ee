//! Layered trees: all_gather, reduce_scatter and all_reduce on any topology and fault pattern
//! as one shortest-path tree per piece, the trees chosen so that every step loads every link
//! alike; on a healthy torus this meets the bandwidth bound and the latency bound exactly.
//!
//! **The schedule.** Every piece travels down (all_gather) or up (reduce_scatter) its tree one
//! level per step: in step d of an all-gather every edge into a rank at depth d carries the piece;
//! the reduce-scatter is the time reversal (ranks at depth d send their merged value to their
//! parent in step D + 1 - d of D, after all their children); the all-reduce runs the
//! reduce-scatter up the tree and the all-gather back down it. One transfer per hop and step
//! carries every piece that crosses the hop then. The steps number the depth D of the deepest
//! tree (the diameter on a torus), each paying one hop latency: the latency bound.
//!
//! **The trees.** A piece's tree is a shortest-path tree over the single hops between ranks,
//! rooted at its source (all_gather) or at its block's rank (reducing kinds); over the reverse
//! hops too for all_reduce (so both must be up). Since a step moves the edges of one depth, a
//! step's time is its busiest hop's count of pieces at that depth: the trees balance the count
//! per hop *and depth*. The first choice of a rank's parent follows the dimension order of the
//! piece's chunk (piece k of a block takes chunk k mod n on an n-dimensional torus: DimRotation
//! as trees), breaking ties by load; passes then re-choose every parent by load until nothing
//! changes. On a healthy torus of equal radix this balances exactly, given pieces enough to split
//! the ties: n chunks, twice that when a ring has even length (its antipode is reached both ways
//! round), on 4x4 twice that again (the tests check radix 3 to 6 in one to three dimensions).
//! Around a failed cable the shortest paths bend and the passes spread what they carry.
//!
//! The reducing kinds' trees use the same balance for their one half (reduce_scatter) or both
//! (all_reduce, a hop's load counted per direction). A rank with fewer links (at a failed cable)
//! sends every one of its contributions within the reduce-scatter's steps, so there it is the
//! bottleneck of both halves of an all_reduce: such instances are near the cut bound of that rank,
//! not the transmission bound (4x4x4 with a failed cable: 104.6 us, 20.2% above it).
//!
//! Two ways out that do not work here (measured on that instance, 24 pieces per block):
//! pipelining the halves over groups of pieces (the all-gather of one group in the steps of the
//! next group's reduce-scatter) puts a reduce and a copy on one link in one step, which rule 2 of
//! docs/design/MODEL.md section 4 forbids (a transfer has one op); splitting those steps took
//! 229 us. Rooting more pieces at such a rank (its share of the reduce-scatter's sends made equal
//! per link: about 17.5% of all trees at each of the two ranks) took 224 us: in a shortest-path
//! tree every neighbour of the root sends to it, so each of its in-links carries every piece it
//! roots (about 270, more than the 253 per link of a whole balanced half). Either needs trees that are
//! not shortest-path trees, or transfers that mix ops.

use super::hops::HopGraph;
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::reverse::reverse_links;
use crate::schedule::{Op, Step, Transfer};
use crate::topology::{LinkClass, LinkId, NodeId, Topology};
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

const NONE: u32 = u32::MAX;
const FAR: u16 = u16::MAX;

/// Passes that re-choose parents by load at most (they usually settle within four).
const MAX_PASSES: usize = 8;

/// The single hops between a collective's ranks, as the trees use them.
pub struct TreeGraph {
    hops: HopGraph,
    /// Rank index of each npu (`NONE` for npus outside the group).
    rank_of: Vec<u32>,
    /// The rank's nodes.
    nodes: Vec<NodeId>,
    /// The hop back along the reversed path, where every link of it is up (`NONE` otherwise).
    reverse: Vec<u32>,
    /// Whether the collective may use the hop (reducing kinds: its reverse is up as well).
    usable: Vec<bool>,
    /// The torus dimension of the hop's first link.
    dim: Vec<Option<u8>>,
    /// Whether the trees grow towards the root (reducing kinds) or away from it.
    towards_root: bool,
    /// Per rank, where its candidate hops start in `cand`.
    cand_start: Vec<u32>,
    /// The candidate hops of every rank, in rank order: (hop, rank at the other end, dimension or
    /// `u8::MAX`), usable ones only.
    cand: Vec<(u32, u32, u8)>,
}

impl TreeGraph {
    /// The hops between `c`'s ranks; npus outside the group pass paths through without storing
    /// (docs/design/MODEL.md section 1).
    pub fn new(t: &Topology, c: &Collective) -> Self {
        let hops = HopGraph::with_endpoints(t, &c.rank_mask(t));
        let rank_of = (0..t.num_npus()).map(|v| c.rank_index(NodeId(v as u32)).map_or(NONE, |r| r as u32)).collect();
        let rev_link = reverse_links(t);
        let by_path: HashMap<&[LinkId], u32> = hops.hops.iter().enumerate().map(|(i, h)| (h.path.as_slice(), i as u32)).collect();
        let reverse: Vec<u32> = hops
            .hops
            .iter()
            .map(|h| {
                let back: Option<Vec<LinkId>> = h.path.iter().rev().map(|l| rev_link[l.index()]).collect();
                back.and_then(|p| by_path.get(p.as_slice()).copied()).unwrap_or(NONE)
            })
            .collect();
        let towards_root = c.kind.is_reducing();
        let usable = reverse.iter().map(|&r| !towards_root || r != NONE).collect();
        let dim = hops
            .hops
            .iter()
            .map(|h| match t.link(h.path[0]).class {
                LinkClass::TorusDim { dim, .. } => Some(dim),
                _ => None,
            })
            .collect();
        let mut g = TreeGraph { hops, rank_of, nodes: c.ranks.clone(), reverse, usable, dim, towards_root, cand_start: vec![0], cand: Vec::new() };
        for v in 0..g.nodes.len() {
            let node = g.nodes[v].index();
            let list = if towards_root { &g.hops.out[node] } else { &g.hops.into[node] };
            for &h in list {
                let hop = &g.hops.hops[h];
                let end = g.rank_of[if towards_root { hop.to } else { hop.from }.index()];
                if g.usable[h] && end != NONE {
                    g.cand.push((h as u32, end, g.dim[h].unwrap_or(u8::MAX)));
                }
            }
            g.cand_start.push(g.cand.len() as u32);
        }
        g
    }

    /// The usable hops a rank may join its parent by (out of it for the reducing kinds, into it
    /// otherwise), each with the rank at its other end and its torus dimension.
    fn candidates(&self, v: usize) -> &[(u32, u32, u8)] {
        &self.cand[self.cand_start[v] as usize..self.cand_start[v + 1] as usize]
    }

    /// Hop distances between `root` and every rank (to the root for the reducing kinds).
    fn distances(&self, root: usize) -> Vec<u16> {
        let mut dist = vec![FAR; self.nodes.len()];
        dist[root] = 0;
        let mut queue = VecDeque::from([root]);
        while let Some(x) = queue.pop_front() {
            let node = self.nodes[x].index();
            let edges = if self.towards_root { &self.hops.into[node] } else { &self.hops.out[node] };
            for &h in edges {
                if !self.usable[h] {
                    continue;
                }
                let hop = &self.hops.hops[h];
                let y = self.rank_of[if self.towards_root { hop.from } else { hop.to }.index()] as usize;
                if dist[y] == FAR {
                    dist[y] = dist[x] + 1;
                    queue.push_back(y);
                }
            }
        }
        dist
    }
}

/// One shortest-path tree per piece.
pub struct Forest {
    ranks: usize,
    pieces: usize,
    /// Per piece and rank: the index, among the rank's candidate hops, of the one that joins it to
    /// its parent (unused at the root).
    parent: Vec<u16>,
    /// Per root and rank: the hop distance, which is the rank's depth in every tree of that root.
    dist: Vec<u16>,
    /// The deepest rank of any tree.
    max_depth: usize,
    /// Whether the deadline stopped the balancing passes (the trees are whole, less balanced).
    cut_short: bool,
}

impl Forest {
    fn root(&self, q: usize) -> usize {
        q / self.pieces
    }

    fn depth(&self, q: usize, v: usize) -> usize {
        self.dist[self.root(q) * self.ranks + v] as usize
    }

    /// The hop joining rank `v` to its parent in tree `q` (towards the root for the reducing
    /// kinds, from the parent for all_gather), `None` at the root.
    fn hop(&self, g: &TreeGraph, q: usize, v: usize) -> Option<usize> {
        (v != self.root(q)).then(|| g.candidates(v)[self.parent[q * self.ranks + v] as usize].0 as usize)
    }
}

/// The piece counts per block worth trying on `t`, best first: on a torus its n chunks (n
/// dimensions longer than 1), doubled when some ring has even length, then doubled twice more
/// (finer pieces spread the load around faults: on 4x4x4 with a failed cable all_gather is 3.1%
/// above the certified bound at 6 pieces, 1.2% at 12, 0.2% at 24); elsewhere 1, 2 and 4.
pub fn piece_counts(t: &Topology) -> Vec<u32> {
    match t.torus_shape() {
        Some(s) => {
            let long: Vec<usize> = (0..s.ndims()).filter(|&d| s.dims[d] > 1).collect();
            let n = long.len().max(1) as u32;
            let even = long.iter().any(|&d| s.is_ring(d) && s.dims[d] % 2 == 0);
            let base = if even { 2 * n } else { n };
            vec![base, 2 * base, 4 * base]
        }
        None => vec![1, 2, 4],
    }
}

/// Balances the trees of `c` (see the module docs); `None` when `deadline` passed before every
/// piece had a tree (a later deadline only ends the balancing passes early).
///
/// Errors: [`Error::infeasible`] when some rank cannot reach another over usable hops.
pub fn forest(t: &Topology, c: &Collective, g: &TreeGraph, deadline: Instant) -> Result<Option<Forest>> {
    let r = c.num_ranks();
    let p = c.pieces as usize;
    if g.hops.hops.len() >= u32::MAX as usize || r >= FAR as usize {
        return Err(Error::bad(format!("layered trees: {r} ranks and {} hops are more than the trees index", g.hops.hops.len())));
    }
    if let Some(v) = (0..r).find(|&v| g.candidates(v).len() > u16::MAX as usize) {
        return Err(Error::bad(format!("layered trees: rank {v} has more than {} hops", u16::MAX)));
    }
    let mut dist = Vec::with_capacity(r * r);
    for root in 0..r {
        let row = g.distances(root);
        if let Some(v) = row.iter().position(|&d| d == FAR) {
            let (from, to) = if g.towards_root { (v, root) } else { (root, v) };
            return Err(Error::infeasible(format!(
                "layered trees: rank {from} (node {}) cannot reach rank {to} (node {}) over hops that are up{}",
                g.nodes[from],
                g.nodes[to],
                if g.towards_root { " in both directions" } else { "" }
            )));
        }
        dist.extend(row);
    }
    let max_depth = dist.iter().copied().max().unwrap_or(0) as usize;
    let mut f = Forest { ranks: r, pieces: p, parent: vec![0; r * r * p], dist, max_depth, cut_short: false };
    let mut loads = Loads::new(g, max_depth, c.kind == CollectiveKind::AllReduce);
    let ndims = t.torus_shape().map_or(1, |s| s.ndims()).max(1);
    let mut cost = u64::MAX;
    for pass in 0..=MAX_PASSES {
        for q in 0..r * p {
            if Instant::now() >= deadline {
                if pass == 0 {
                    return Ok(None);
                }
                f.cut_short = true;
                return Ok(Some(f));
            }
            let (root, k) = (q / p, q % p);
            // The chunk's dimension order: rotate by k (and by the root when P < dimensions).
            let first = (k + if p < ndims { root } else { 0 }) % ndims;
            let dist = &f.dist[root * r..(root + 1) * r];
            for v in (0..r).filter(|&v| v != root) {
                let d = dist[v] as usize;
                let cands = g.candidates(v);
                if pass > 0 {
                    loads.add(g, cands[f.parent[q * r + v] as usize].0 as usize, d, -1);
                }
                let mut best: Option<((u32, u32), usize)> = None;
                for (i, &(h, w, dim)) in cands.iter().enumerate() {
                    if dist[w as usize] as usize + 1 != d {
                        continue;
                    }
                    let pref = if dim == u8::MAX { 0 } else { ((dim as usize + ndims - first) % ndims) as u32 };
                    let load = loads.get(g, h as usize, d);
                    let key = if pass == 0 { (pref, load) } else { (load, pref) };
                    if best.is_none_or(|(b, _)| key < b) {
                        best = Some((key, i));
                    }
                }
                let (_, i) = best.expect("a rank at depth d > 0 has a neighbour at depth d - 1");
                f.parent[q * r + v] = i as u16;
                loads.add(g, cands[i].0 as usize, d, 1);
            }
        }
        // Stop when a pass lowers the busiest hops' sum by less than 0.2%.
        let now = loads.cost(g);
        if now.saturating_add(now / 500) >= cost {
            break;
        }
        cost = now;
    }
    Ok(Some(f))
}

/// Pieces per hop and depth: those of the first half (all_gather, or the reduce-scatter up the
/// trees) and, for all_reduce, of the all-gather back down the reverse hops.
struct Loads {
    depths: usize,
    up: Vec<u32>,
    down: Vec<u32>,
}

impl Loads {
    fn new(g: &TreeGraph, max_depth: usize, both: bool) -> Self {
        let depths = max_depth + 1;
        let n = g.hops.hops.len() * depths;
        Loads { depths, up: vec![0; n], down: if both { vec![0; n] } else { Vec::new() } }
    }

    fn get(&self, g: &TreeGraph, h: usize, d: usize) -> u32 {
        let up = self.up[h * self.depths + d];
        if self.down.is_empty() {
            up
        } else {
            up.max(self.down[g.reverse[h] as usize * self.depths + d])
        }
    }

    /// The sum over levels of the busiest hop's pieces: the schedule's bandwidth term in pieces.
    fn cost(&self, g: &TreeGraph) -> u64 {
        (0..self.depths).map(|d| (0..g.hops.hops.len()).map(|h| self.get(g, h, d)).max().unwrap_or(0) as u64).sum()
    }

    fn add(&mut self, g: &TreeGraph, h: usize, d: usize, delta: i32) {
        let i = h * self.depths + d;
        self.up[i] = self.up[i].wrapping_add_signed(delta);
        if !self.down.is_empty() {
            let j = g.reverse[h] as usize * self.depths + d;
            self.down[j] = self.down[j].wrapping_add_signed(delta);
        }
    }
}

/// The layered steps of `c` over `forest` (see the module docs).
pub fn layered_steps(t: &Topology, c: &Collective, g: &TreeGraph, forest: &Forest) -> Vec<Step> {
    let (r, p, d) = (forest.ranks, forest.pieces, forest.max_depth);
    let nhops = g.hops.hops.len();
    // Per level and hop, the pieces it carries (in piece order): counted first, so that every
    // transfer's list is allocated once at its size.
    let mut count = vec![0u32; d * nhops];
    for q in 0..r * p {
        for v in 0..r {
            if let Some(h) = forest.hop(g, q, v) {
                count[(forest.depth(q, v) - 1) * nhops + h] += 1;
            }
        }
    }
    let mut lists: Vec<Vec<PieceId>> = count.iter().map(|&n| Vec::with_capacity(n as usize)).collect();
    for q in 0..r * p {
        let id = PieceId::block((q / p) as u32, (q % p) as u32);
        for v in 0..r {
            if let Some(h) = forest.hop(g, q, v) {
                lists[(forest.depth(q, v) - 1) * nhops + h].push(id);
            }
        }
    }
    let mut levels: Vec<Vec<(usize, Vec<PieceId>)>> = vec![Vec::new(); d];
    for (i, list) in lists.into_iter().enumerate() {
        if !list.is_empty() {
            levels[i / nhops].push((i % nhops, list));
        }
    }
    // The reducing kinds' trees hold the hops towards the root: the reduce-scatter sends over
    // them, deepest level first; the all-gather down the reverse hops, shallowest first.
    let level_steps = |level: Vec<(usize, Vec<PieceId>)>, down: bool| {
        let transfers = level.into_iter().map(|(h, pieces)| {
            let (hop, op) = match (g.towards_root, down) {
                (true, true) => (g.reverse[h] as usize, Op::Copy),
                (true, false) => (h, Op::Reduce),
                (false, _) => (h, Op::Copy),
            };
            Transfer { path: g.hops.hops[hop].path.clone(), op, pieces }
        });
        without_shared_links(t, transfers.collect())
    };
    match c.kind {
        CollectiveKind::AllGather => levels.into_iter().flat_map(|l| level_steps(l, true)).collect(),
        CollectiveKind::ReduceScatter => levels.into_iter().rev().flat_map(|l| level_steps(l, false)).collect(),
        _ => {
            let mut steps: Vec<Step> = levels.iter().rev().flat_map(|l| level_steps(l.clone(), false)).collect();
            steps.extend(levels.into_iter().flat_map(|l| level_steps(l, true)));
            steps
        }
    }
}

/// One level's transfers as steps where no two transfers share a link (docs/design/MODEL.md
/// rule 2): a single step unless multi-link hops (through switches) meet, first fit otherwise.
fn without_shared_links(t: &Topology, transfers: Vec<Transfer>) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut used: Vec<Vec<bool>> = Vec::new();
    for x in transfers {
        let fits = |u: &Vec<bool>| x.path.iter().all(|l| !u[l.index()]);
        let i = match used.iter().position(fits) {
            Some(i) => i,
            None => {
                steps.push(Step::default());
                used.push(vec![false; t.num_links()]);
                steps.len() - 1
            }
        };
        x.path.iter().for_each(|l| used[i][l.index()] = true);
        steps[i].transfers.push(x);
    }
    steps
}

/// What [`tree_steps`] found.
pub struct Layered {
    /// The steps.
    pub steps: Vec<Step>,
    /// Whether the deadline ended the balancing early (the steps are complete and valid).
    pub cut_short: bool,
}

/// The layered-trees steps of `c` (all_gather, reduce_scatter or all_reduce), or `None` when
/// `deadline` passed before every piece had a tree.
///
/// Errors: [`Error::bad`] for all_to_all; [`Error::infeasible`] when a rank cannot be reached.
pub fn tree_steps(t: &Topology, c: &Collective, deadline: Instant) -> Result<Option<Layered>> {
    if c.kind == CollectiveKind::AllToAll {
        return Err(Error::bad("layered trees: all_to_all has no trees (every piece has one destination)"));
    }
    let g = TreeGraph::new(t, c);
    Ok(forest(t, c, &g, deadline)?.map(|f| Layered { steps: layered_steps(t, c, &g, &f), cut_short: f.cut_short }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::certified::certified_bounds_ns;
    use crate::schedule::{Schedule, ScheduleHeader};
    use crate::synth::steps::tests::fail_picked_cables;
    use crate::topology::{fat_tree, torus, FatTreeParams, TorusParams};
    use crate::units::to_f64;
    use crate::verify::{verify_schedule, VerifyOptions};
    use std::time::Duration;

    const KINDS: [CollectiveKind; 3] = [CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce];

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    /// The largest hop distance between two npus over the links that are up: BFS on its own, not
    /// the trees' (every npu of these tori is a rank, every hop one link).
    fn diameter(t: &Topology) -> usize {
        let n = t.num_npus();
        let mut worst = 0;
        for s in 0..n {
            let mut dist = vec![usize::MAX; n];
            dist[s] = 0;
            let mut queue = VecDeque::from([NodeId(s as u32)]);
            while let Some(x) = queue.pop_front() {
                for l in t.up_out_links(x) {
                    let y = t.link(l).dst;
                    if dist[y.index()] == usize::MAX {
                        dist[y.index()] = dist[x.index()] + 1;
                        queue.push_back(y);
                    }
                }
            }
            worst = worst.max(dist.into_iter().max().unwrap_or(0));
        }
        worst
    }

    /// Builds, verifies (rules 1-5, and rule 6 on the lowered programs) and prices the layered trees of
    /// `kind`; returns (steps, time, certified bandwidth + latency bound), ns.
    fn measured(t: &Topology, kind: CollectiveKind, ranks: Vec<NodeId>, pieces: u32) -> (usize, f64, f64) {
        let c = Collective::new(kind, ranks, 8 << 20, pieces, None, t).unwrap();
        let layered = tree_steps(t, &c, far()).unwrap().unwrap();
        assert!(!layered.cut_short);
        let s = Schedule { header: ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: None }, steps: layered.steps };
        let r = verify_schedule(&s, &VerifyOptions::default()).unwrap();
        assert!(r.is_valid(), "{kind}: {:?}", r.findings.failures().iter().take(3).map(|d| d.to_string()).collect::<Vec<_>>());
        let programs = crate::lower::lower(&s, &Default::default()).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(crate::verify::check_deadlock(&programs).is_empty(), "{kind}: rule 6");
        let (bw, lat) = certified_bounds_ns(t, &c, Duration::from_secs(5)).unwrap();
        (s.steps.len(), to_f64(&r.cost.unwrap().time_ns()), bw.unwrap() + lat)
    }

    #[test]
    fn a_failed_cable_costs_the_gathering_kinds_little() {
        // The bound of all_gather and reduce_scatter is the cut around a rank of the failed cable
        // (five links instead of six): the trees meet it within 3% on 4x4x4 and 6x6x6.
        for dims in [vec![4, 4, 4], vec![6, 6, 6]] {
            let mut t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            fail_picked_cables(&mut t, &[(0, 0)]);
            let pieces = *piece_counts(&t).last().unwrap();
            for kind in [CollectiveKind::AllGather, CollectiveKind::ReduceScatter] {
                let (_, time, bound) = measured(&t, kind, t.node_ids().collect(), pieces);
                assert!(time <= 1.03 * bound, "{dims:?} {kind}: {time} ns against {bound} ns");
            }
        }
    }

    #[test]
    fn groups_and_fat_trees_verify() {
        let t = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        let group: Vec<NodeId> = [0, 1, 2, 5, 6, 10, 15].into_iter().map(NodeId).collect();
        let params = FatTreeParams { levels: 2, k: 8, osr: 1.0, npus: 16, board: Some(4), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 };
        let ft = fat_tree(&params).unwrap();
        for kind in KINDS {
            measured(&t, kind, group.clone(), 2);
            measured(&ft, kind, ft.node_ids().filter(|&v| ft.is_npu(v)).collect(), 2);
        }
        let a2a = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        assert!(tree_steps(&t, &a2a, far()).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

        /// DimRotation as trees: on a healthy torus of equal radix every step moves one level, so
        /// the steps are the diameter (twice for all_reduce), and at one of the piece counts the
        /// portfolio tries (n chunks, twice as many when the rings are even: the antipode is
        /// reached both ways round; 4x4 needs twice that again) the bandwidth term is the
        /// certified bandwidth bound exactly and the time that plus the latency bound (all_reduce
        /// pays the diameter's latency twice, the bound once).
        #[test]
        fn healthy_equal_radix_tori_meet_the_certified_bound(radix in 3usize..=6, n in 1usize..=3) {
            let dims = vec![radix; n];
            let t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            let diameter = diameter(&t);
            proptest::prop_assert_eq!(diameter, n * (radix / 2));
            for kind in KINDS {
                let halves = if kind == CollectiveKind::AllReduce { 2 } else { 1 };
                let lat = 100.0 * (halves * diameter) as f64;
                let slack = if kind == CollectiveKind::AllReduce { 100.0 * diameter as f64 } else { 0.0 };
                let mut best = f64::INFINITY;
                for pieces in piece_counts(&t) {
                    let c = Collective::new(kind, t.node_ids().collect(), 8 << 20, pieces, None, &t).unwrap();
                    let (bw, _) = certified_bounds_ns(&t, &c, Duration::from_secs(5)).unwrap();
                    let (steps, time, bound) = measured(&t, kind, t.node_ids().collect(), pieces);
                    proptest::prop_assert_eq!(steps, halves * diameter, "{:?} {} P={}", dims, kind, pieces);
                    proptest::prop_assert!(time - lat >= bw.unwrap() - 1e-6, "{:?} {} P={}: below the bound", dims, kind, pieces);
                    best = best.min(time - bound - slack);
                    if best.abs() < 1e-6 {
                        break;
                    }
                }
                proptest::prop_assert!(best.abs() < 1e-6, "{:?} {}: {} ns above the bound at best", dims, kind, best);
            }
        }

        /// Over sizes, failed cables anywhere and piece counts, every kind's layered trees verify
        /// whenever the ranks stay connected, in as many steps as the diameter around the faults
        /// (twice for all_reduce), and a cut-off rank is named as infeasible.
        #[test]
        fn layered_trees_verify_over_sizes_and_faults(
            dims in proptest::prop_oneof![proptest::collection::vec(2usize..7, 1..=2), proptest::collection::vec(2usize..5, 3..=3)],
            cuts in proptest::collection::vec((0usize..1000, 0usize..8), 0..=3),
            pieces in 1u32..=4,
        ) {
            let mut t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            fail_picked_cables(&mut t, &cuts);
            let ranks: Vec<NodeId> = t.node_ids().collect();
            for kind in KINDS {
                if t.check_connected(&ranks).is_ok() {
                    let (steps, _, _) = measured(&t, kind, ranks.clone(), pieces);
                    let halves = if kind == CollectiveKind::AllReduce { 2 } else { 1 };
                    proptest::prop_assert_eq!(steps, halves * diameter(&t), "{:?} {:?} {}", dims, cuts, kind);
                } else {
                    let c = Collective::new(kind, ranks.clone(), 1 << 20, pieces, None, &t).unwrap();
                    proptest::prop_assert!(matches!(tree_steps(&t, &c, far()), Err(Error::Infeasible(_))));
                }
            }
        }
    }
}
