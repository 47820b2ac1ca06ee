//! Cut bounds (docs/design/MODEL.md section 6): for a node set U, the bytes that must leave U over the
//! capacity of the up links leaving U (or, reversed, the bytes that must enter U).
//!
//! Any U gives a valid bound; we evaluate the sets that matter on the families we build: torus
//! bisections along every dimension and rotation, the sets next to failed cables, single npus,
//! fat-tree boards (every npu on them, ranks or not) and subtrees (leaves, pods); on any other
//! (custom) topology, the halves that every link splits the nodes into by distance. What must
//! cross depends only on the ranks in U, so each candidate is then [`tighten`]ed: the nodes
//! outside the ranks (switches, npus that only relay) move to the side that leaves fewer links.
//! The rule for what must cross is the one the checker (`certify`) applies; see
//! [`crossing_bytes`].

use crate::collective::{Collective, CollectiveKind};
use crate::topology::{Link, LinkClass, NodeId, Topology};
use crate::units::{rational_from_decimal, Rational};
use num_traits::Zero;

/// A cut bound with its witness.
#[derive(Clone, Debug, PartialEq)]
pub struct CutBound {
    /// The bound, ns.
    pub value_ns: Rational,
    /// The node set U, in increasing id order.
    pub nodes: Vec<NodeId>,
    /// False: bytes leaving U over links leaving U; true: bytes entering U over links entering U.
    pub into: bool,
    /// Which family of cuts U comes from (`dim0 bisection`, `failed cable end`, ...).
    pub label: String,
}

/// What must leave a node set (docs/design/MODEL.md section 6), before it is weighed in bytes
/// ([`crossing_bytes`]) or in pieces ([`super::steps`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Crossing {
    /// all_to_all: the blocks `(i, j)` (rank indices) from ranks inside to ranks outside; each
    /// piece of each crosses a link leaving U.
    Blocks(Vec<(usize, usize)>),
    /// A uniform all_to_all: how many such blocks, all of one size (a bisection of 4,096 ranks
    /// crosses 4 million of them: counted, not listed).
    EqualBlocks(u64),
    /// The other kinds: this many whole blocks, at least one value of each of their pieces.
    WholeBlocks(usize),
}

/// What must leave the node set `u` (membership flags), by the collective's rule.
///
/// - all_to_all: the blocks from ranks inside to ranks outside (each crosses a link leaving U).
/// - all_gather: with a >= 1 ranks inside and b >= 1 outside, each inside rank's block is needed
///   outside and exists only inside at the start: a blocks cross.
/// - reduce_scatter: each outside rank's block must end there reduced over all ranks, including
///   the a >= 1 inside ones, whose contributions exist only inside; values of different pieces
///   are never combined, so one value of each piece of those b blocks crosses: b blocks.
/// - all_reduce: the same for all R blocks, each needed (reduced) outside: R blocks.
pub fn crossing(c: &Collective, u: &[bool]) -> Crossing {
    let inside: Vec<bool> = c.ranks.iter().map(|r| u[r.index()]).collect();
    let a = inside.iter().filter(|&&x| x).count();
    let b = inside.len() - a;
    match c.kind {
        CollectiveKind::AllToAll if c.is_uniform() => Crossing::EqualBlocks(a as u64 * b as u64),
        CollectiveKind::AllToAll => {
            Crossing::Blocks((0..inside.len()).filter(|&i| inside[i]).flat_map(|i| (0..inside.len()).filter(|&j| !inside[j]).map(move |j| (i, j))).collect())
        }
        CollectiveKind::AllGather if b >= 1 => Crossing::WholeBlocks(a),
        CollectiveKind::ReduceScatter if a >= 1 => Crossing::WholeBlocks(b),
        CollectiveKind::AllReduce if a >= 1 && b >= 1 => Crossing::WholeBlocks(a + b),
        _ => Crossing::WholeBlocks(0),
    }
}

/// Bytes that must leave the node set `u` (membership flags): [`crossing`] in bytes.
pub fn crossing_bytes(c: &Collective, u: &[bool]) -> Rational {
    match crossing(c, u) {
        // Blocks of one size: one product.
        Crossing::EqualBlocks(n) => c.block_size(0, 0) * Rational::from_integer(i128::from(n)),
        Crossing::Blocks(pairs) => pairs.into_iter().map(|(i, j)| c.block_size(i, j)).sum(),
        Crossing::WholeBlocks(n) => Rational::new(c.bytes_per_rank as i128, c.num_ranks() as i128) * Rational::from_integer(n as i128),
    }
}

/// The membership flags of U: `nodes` (or, with `into`, every node but `nodes`).
pub fn membership(t: &Topology, nodes: &[NodeId], into: bool) -> Vec<bool> {
    let mut u = vec![into; t.num_nodes()];
    for n in nodes {
        u[n.index()] = !into;
    }
    u
}

/// The up links from U (flags `u`, from [`membership`]) to the other nodes, found from the links
/// at `nodes` (distinct), the side U was built from: each such link has exactly one end there, so the scan
/// costs the set's links, not the network's (8,000 single-npu cuts of a 20x20x20 torus).
pub fn links_leaving<'a>(t: &'a Topology, u: &'a [bool], nodes: &'a [NodeId]) -> impl Iterator<Item = &'a Link> + 'a {
    nodes.iter().flat_map(move |&n| t.out_links(n).chain(t.in_links(n))).map(|l| t.link(l)).filter(|l| l.up && u[l.src.index()] && !u[l.dst.index()])
}

/// The cut bound of one node set; `None` when no up link leaves it (or nothing must cross).
pub fn cut_value(t: &Topology, c: &Collective, nodes: &[NodeId], into: bool) -> Option<Rational> {
    let u = membership(t, nodes, into);
    let crossing = crossing_bytes(c, &u);
    let capacity: Rational = links_leaving(t, &u, nodes).map(bandwidth).sum();
    (!capacity.is_zero() && !crossing.is_zero()).then(|| crossing / capacity)
}

/// The node sets worth trying on this topology, each with a label.
pub fn candidate_cuts(t: &Topology) -> Vec<(String, Vec<NodeId>)> {
    let mut sets: Vec<(String, Vec<NodeId>)> = Vec::new();
    // A single npu: what it alone must send or receive, over its own links.
    for n in 0..t.num_npus() as u32 {
        sets.push(("single npu".into(), vec![NodeId(n)]));
    }
    if let Some(s) = t.torus_shape() {
        for dim in 0..s.ndims() {
            let n = s.dims[dim];
            let arcs: Vec<Vec<usize>> = if s.is_ring(dim) {
                // Bisections of a ring: every rotation of an arc of floor(n/2) (and ceil(n/2) when
                // odd, which differs in which side holds more ranks).
                let mut lens = vec![n / 2];
                if n % 2 == 1 {
                    lens.push(n / 2 + 1);
                }
                lens.iter().flat_map(|&len| (0..n).map(move |r| (0..len).map(|k| (r + k) % n).collect())).collect()
            } else {
                // A mesh line (or a dimension of 2): every prefix.
                (1..n).map(|k| (0..k).collect()).collect()
            };
            for arc in arcs {
                let mut in_arc = vec![false; n];
                arc.iter().for_each(|&k| in_arc[k] = true);
                let nodes: Vec<NodeId> = (0..s.num_nodes() as u32).map(NodeId).filter(|&v| in_arc[s.coord_in(v, dim)]).collect();
                sets.push((format!("dim{dim} bisection"), nodes));
            }
        }
        // Next to a failed cable: the half of the faulty ring that starts after the failure,
        // whose traffic towards the other half lost one of its two exits.
        for (_, l) in t.links().filter(|(_, l)| !l.up) {
            let LinkClass::TorusDim { dim, positive } = l.class else { continue };
            let dim = dim as usize;
            let n = s.dims[dim];
            let start = s.coord_in(l.dst, dim);
            let half: Vec<NodeId> =
                (0..(n / 2).max(1)).map(|k| s.with_coord(l.dst, dim, if positive { (start + k) % n } else { (start + n - k) % n })).collect();
            sets.push(("half of a faulty ring".into(), half));
        }
    }
    if let Some(f) = t.fat_tree_shape() {
        // A board and every npu on it, ranks or not (an npu outside the ranks only relays, and
        // in U it hides the board's mesh links), alone and with the leaves whose npus are all on
        // it: a board's traffic to the rest leaves over its npus' leaf links, or their uplinks.
        // Npus are numbered leaf by leaf and board by board, so a leaf lies on one board when its
        // first and last npus do: one pass over the npus and one over the leaves.
        if let Some(b) = f.board.filter(|&b| b > 1) {
            let mut on_board: Vec<Vec<NodeId>> = vec![Vec::new(); f.npus.div_ceil(b)];
            (0..f.npus as u32).map(NodeId).for_each(|v| on_board[v.index() / b].push(v));
            let mut leaves_on: Vec<Vec<NodeId>> = vec![Vec::new(); on_board.len()];
            for leaf in (0..f.leaves).filter(|&l| l * f.down < f.npus) {
                let (first, last) = (leaf * f.down, ((leaf + 1) * f.down).min(f.npus) - 1);
                if first / b == last / b {
                    leaves_on[first / b].push(f.leaf(leaf));
                }
            }
            for (npus, leaves) in on_board.into_iter().zip(leaves_on) {
                if !leaves.is_empty() {
                    sets.push(("board and its leaves".into(), npus.iter().copied().chain(leaves).collect()));
                }
                sets.push(("board".into(), npus));
            }
        }
        // A leaf and the npus below it: their traffic to the rest leaves over the uplinks only.
        for leaf in 0..f.leaves {
            let mut nodes: Vec<NodeId> = (0..f.npus as u32).map(NodeId).filter(|&v| f.leaf_of(v) == leaf).collect();
            nodes.push(f.leaf(leaf));
            sets.push(("leaf subtree".into(), nodes));
        }
        if f.levels == 3 {
            // A pod: its ToRs, aggregation switches and npus; traffic out uses the core links.
            let pods = f.leaves / f.up.max(1);
            for pod in 0..pods {
                let mut nodes: Vec<NodeId> = (0..f.npus as u32).map(NodeId).filter(|&v| f.pod_of_leaf(f.leaf_of(v)) == pod).collect();
                nodes.extend((pod * f.up..(pod + 1) * f.up).flat_map(|i| [f.leaf(i), f.middle_switch(i)]));
                nodes.sort();
                sets.push(("pod".into(), nodes));
            }
        }
    }
    if t.torus_shape().is_none() && t.fat_tree_shape().is_none() {
        sets.extend(distance_halves(t).into_iter().map(|nodes| ("distance half".to_string(), nodes)));
    }
    sets
}

/// Node counts up to which [`distance_halves`] keeps all distances (2 bytes each).
const MAX_DISTANCE_NODES: usize = 4096;

/// For every up link a -> b, the nodes closer to a than to b, and those no closer to b than to a
/// (the two differ by the ties), each set once. On a torus written out as a custom topology these
/// are its bisections: on an even ring, the half on a's side; on an odd one, the arcs of
/// floor(n/2) and ceil(n/2). Hop distances over up links; none above [`MAX_DISTANCE_NODES`] nodes.
fn distance_halves(t: &Topology) -> Vec<Vec<NodeId>> {
    let n = t.num_nodes();
    if n > MAX_DISTANCE_NODES {
        return Vec::new();
    }
    let adjacency = crate::topology::UpAdjacency::new(t);
    let far = u16::MAX;
    let dist: Vec<Vec<u16>> =
        (0..n as u32).map(|v| adjacency.hop_distances(NodeId(v)).into_iter().map(|d| d.map_or(far, |d| d.min(far as u32 - 1) as u16)).collect()).collect();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (_, l) in t.links().filter(|(_, l)| l.up) {
        let (a, b) = (&dist[l.src.0 as usize], &dist[l.dst.0 as usize]);
        for ties in [false, true] {
            let nodes: Vec<NodeId> = (0..n).filter(|&v| a[v] < b[v] || (ties && a[v] == b[v] && a[v] != far)).map(|v| NodeId(v as u32)).collect();
            if !nodes.is_empty() && nodes.len() < n && seen.insert(nodes.clone()) {
                out.push(nodes);
            }
        }
    }
    out
}

/// Moves the nodes outside the collective's ranks (`stores[v]` false: switches and npus that only
/// relay) across the cut `nodes` (with `into`, as [`membership`] reads it) while each move lowers
/// the weight of the up links leaving U: what must cross depends on the ranks on each side only
/// ([`crossing`]), so such a move only tightens the bound. Only nodes next to a moved node (or to
/// `nodes`) are tried, so the work follows the cut's boundary, and a network whose nodes are all
/// ranks (a torus) costs nothing. `None` when no move helps; else the new node set, on the same
/// side as `nodes` (in increasing id order).
pub fn tighten(t: &Topology, stores: &[bool], nodes: &[NodeId], into: bool, weight: &dyn Fn(&Link) -> Rational) -> Option<Vec<NodeId>> {
    let relays = |v: NodeId| !stores.get(v.index()).copied().unwrap_or(false);
    if stores.len() >= t.num_nodes() && !stores.contains(&false) {
        return None;
    }
    let mut u = membership(t, nodes, into);
    let neighbours = |v: NodeId| t.out_links(v).map(|l| t.link(l).dst).chain(t.in_links(v).map(|l| t.link(l).src));
    let mut queued = vec![false; t.num_nodes()];
    let mut work: Vec<NodeId> = Vec::new();
    let push = |v: NodeId, queued: &mut Vec<bool>, work: &mut Vec<NodeId>| {
        if relays(v) && !std::mem::replace(&mut queued[v.index()], true) {
            work.push(v);
        }
    };
    for &n in nodes {
        push(n, &mut queued, &mut work);
        neighbours(n).for_each(|v| push(v, &mut queued, &mut work));
    }
    let mut moved = false;
    while let Some(v) = work.pop() {
        queued[v.index()] = false;
        // The weight of v's links to the outside, less that of the links into v from U: what
        // putting v into U adds (taking it out of U adds its negative).
        let out: Rational = t.out_links(v).map(|l| t.link(l)).filter(|l| l.up && l.dst != v && !u[l.dst.index()]).map(weight).sum();
        let from_u: Rational = t.in_links(v).map(|l| t.link(l)).filter(|l| l.up && l.src != v && u[l.src.index()]).map(weight).sum();
        let gain = if u[v.index()] { from_u - out } else { out - from_u };
        if gain < Rational::zero() {
            u[v.index()] = !u[v.index()];
            moved = true;
            neighbours(v).for_each(|w| push(w, &mut queued, &mut work));
        }
    }
    moved.then(|| (0..t.num_nodes() as u32).map(NodeId).filter(|v| u[v.index()] != into).collect())
}

/// The weight of a link in a cut bound on time: its bandwidth.
pub fn bandwidth(l: &Link) -> Rational {
    rational_from_decimal(l.bandwidth_gbps).unwrap_or_default()
}

/// The best cut bound over [`candidate_cuts`], both directions, each [`tighten`]ed by the nodes
/// outside the ranks; `None` if no cut bounds anything.
pub fn best_cut(t: &Topology, c: &Collective) -> Option<CutBound> {
    let stores = c.rank_mask(t);
    let mut best: Option<CutBound> = None;
    for (label, nodes) in candidate_cuts(t) {
        for into in [false, true] {
            let tightened = tighten(t, &stores, &nodes, into, &bandwidth);
            let nodes = tightened.as_deref().unwrap_or(&nodes);
            if let Some(v) = cut_value(t, c, nodes, into) {
                if best.as_ref().is_none_or(|b| v > b.value_ns) {
                    let label = if tightened.is_some() { format!("{label}, relays moved") } else { label.clone() };
                    best = Some(CutBound { value_ns: v, nodes: nodes.to_vec(), into, label });
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{fat_tree, torus, FatTreeParams, TorusParams};
    use proptest::prelude::*;

    #[test]
    fn ring_bisection_matches_closed_form() {
        // Even ring of n, uniform all_to_all of S per rank: a half sends (n/2)^2 blocks of S/n
        // over 2 links: S n / (8 b) = the volume bound.
        let t = torus(&TorusParams::uniform(&[8], 32.0, 0.0)).unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        let best = best_cut(&t, &c).unwrap();
        assert_eq!(best.value_ns, Rational::new(8 * (1 << 20), 8 * 32));
        assert_eq!(best.nodes.len(), 4);
    }

    #[test]
    fn all_gather_single_node_cut() {
        // One npu must receive R-1 blocks over its 2 incoming links.
        let t = torus(&TorusParams::uniform(&[4], 10.0, 0.0)).unwrap();
        let c = Collective::new(CollectiveKind::AllGather, t.node_ids().collect(), 4000, 1, None, &t).unwrap();
        assert_eq!(cut_value(&t, &c, &[NodeId(0)], true), Some(Rational::new(3000, 20)));
        assert_eq!(cut_value(&t, &c, &[NodeId(0)], false), Some(Rational::new(1000, 20)));
    }

    #[test]
    fn a_torus_written_out_keeps_its_bisection_bounds() {
        for dims in [&[4usize, 4][..], &[3, 5], &[4, 2, 3]] {
            let t = torus(&TorusParams::uniform(dims, 32.0, 0.0)).unwrap();
            let (nodes, links) = crate::topology::custom::to_lists(&t);
            let written = crate::topology::custom::custom(&nodes, &links, 0.0).unwrap();
            assert!(written.torus_shape().is_none());
            for kind in [CollectiveKind::AllToAll, CollectiveKind::AllGather] {
                let c = |t: &Topology| Collective::new(kind, t.node_ids().take(t.num_npus()).collect(), 1 << 20, 1, None, t).unwrap();
                let (torus_best, written_best) = (best_cut(&t, &c(&t)).unwrap(), best_cut(&written, &c(&written)).unwrap());
                assert_eq!(written_best.value_ns, torus_best.value_ns, "{dims:?} {kind}");
            }
        }
    }

    /// The tester's instance: a 2-level fat tree (k 4, osr 1, 8 npus, boards of 4) with ranks
    /// 0, 1, 2, 5, 6, so that npus 3, 4 and 7 only relay. Board 0 with its relay npu 3 is the
    /// best cut: 3 ranks x 2 blocks of S/5 over the 4 leaf links leaving it (each way).
    #[test]
    fn a_board_with_a_relay_npu_is_cut_whole() {
        let t =
            fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 8, board: Some(4), bandwidth_gbps: 100.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })
                .unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, [0, 1, 2, 5, 6].map(NodeId).to_vec(), 1 << 20, 1, None, &t).unwrap();
        let best = best_cut(&t, &c).unwrap();
        assert_eq!(best.value_ns, Rational::new(393_216, 125));
        assert_eq!(cut_value(&t, &c, &[0, 1, 2, 3].map(NodeId), false), Some(Rational::new(393_216, 125)));
        let steps = crate::bounds::steps::steps_bounds_with(&t, &c, None, &crate::bounds::farthest(&t, &c));
        let steps_cut = steps.claims.iter().find(|cl| matches!(cl.witness, crate::bounds::steps::StepsWitness::Cut { .. })).unwrap();
        assert_eq!(steps_cut.steps, 2);
        // The flow bound, seeded with that cut, is not below it; the checker confirms both.
        let flow = crate::bounds::flow::flow_bound(&t, &c, &quick_flow()).unwrap();
        assert!(flow.lower >= big(best.value_ns), "flow {} below the cut {}", flow.lower, best.value_ns);
        let inst = crate::spec::Instance { topology: t, collective: c, pieces_given: true };
        let certified = crate::bounds::certified::certified_bounds(&inst, std::time::Duration::from_millis(300), true).unwrap();
        assert!(certified.bandwidth.unwrap() >= big(Rational::new(393_216, 125)));
        assert!(certified.steps.unwrap() >= 2);
    }

    fn quick_flow() -> crate::bounds::flow::FlowOptions {
        crate::bounds::flow::FlowOptions { time_limit: std::time::Duration::from_millis(200), max_phases: 40, ..Default::default() }
    }

    fn big(r: Rational) -> num_rational::BigRational {
        num_rational::BigRational::new((*r.numer()).into(), (*r.denom()).into())
    }

    /// The groups of a fat tree a cut must not miss: each board's npus, each leaf's npus with
    /// and without the leaf, each board with the leaves below it only, each pod.
    fn fat_tree_groups(t: &Topology) -> Vec<Vec<NodeId>> {
        let f = t.fat_tree_shape().unwrap();
        let npus = || (0..f.npus as u32).map(NodeId);
        let mut groups = Vec::new();
        for leaf in 0..f.leaves {
            let below: Vec<NodeId> = npus().filter(|&v| f.leaf_of(v) == leaf).collect();
            groups.push(below.iter().copied().chain([f.leaf(leaf)]).collect());
            groups.push(below);
        }
        for board in 0..f.board.map_or(0, |b| f.npus.div_ceil(b)) {
            let on: Vec<NodeId> = npus().filter(|&v| f.board_of(v) == Some(board)).collect();
            let leaves =
                (0..f.leaves).filter(|&l| npus().filter(|&v| f.leaf_of(v) == l).all(|v| f.board_of(v) == Some(board)) && npus().any(|v| f.leaf_of(v) == l));
            groups.push(on.iter().copied().chain(leaves.map(|l| f.leaf(l))).collect());
            groups.push(on);
        }
        groups
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

        /// On small fat trees and tori where some npus only relay, the best cut is at least
        /// every board and leaf group's cut (time and steps), and the flow bound is at least the
        /// best cut.
        #[test]
        fn relays_do_not_hide_cuts(fat in any::<bool>(), shape in 0usize..4, board in 0usize..3, ranks in proptest::collection::vec(any::<bool>(), 16), all_gather in any::<bool>()) {
            let t = if fat {
                let (k, npus) = [(4, 8), (4, 4), (8, 16), (6, 12)][shape];
                let board = [None, Some(2), Some(4)][board];
                fat_tree(&FatTreeParams { levels: 2, k, osr: 1.0, npus, board, bandwidth_gbps: 100.0, latency_ns: 25.0, switch_latency_ns: 1000.0 }).unwrap()
            } else {
                torus(&TorusParams::uniform([&[5][..], &[4, 3], &[8], &[3, 3]][shape], 32.0, 0.0)).unwrap()
            };
            let chosen: Vec<NodeId> = (0..t.num_npus() as u32).map(NodeId).filter(|v| ranks[v.index() % ranks.len()] ^ (v.index() >= ranks.len())).collect();
            prop_assume!(chosen.len() >= 2);
            let kind = if all_gather { CollectiveKind::AllGather } else { CollectiveKind::AllToAll };
            let c = Collective::new(kind, chosen, 1 << 20, 1, None, &t).unwrap();
            let best = best_cut(&t, &c).map(|b| b.value_ns);
            let steps = crate::bounds::steps::steps_bounds_with(&t, &c, None, &crate::bounds::farthest(&t, &c));
            let steps_cut = steps.claims.iter().filter(|cl| matches!(cl.witness, crate::bounds::steps::StepsWitness::Cut { .. })).map(|cl| cl.steps).max().unwrap_or(0);
            let stores = c.rank_mask(&t);
            for group in if fat { fat_tree_groups(&t) } else { Vec::new() } {
                for into in [false, true] {
                    if let Some(v) = cut_value(&t, &c, &group, into) {
                        prop_assert!(best.is_some_and(|b| b >= v), "{group:?} into {into}: {v} above the best cut {best:?}");
                    }
                    let u = membership(&t, &group, into);
                    let (links, pieces) = (links_leaving(&t, &u, &group).count() as u64, crate::bounds::steps::pieces_crossing(&c, &u));
                    if links > 0 {
                        prop_assert!(u64::from(steps_cut) >= pieces.div_ceil(links), "{group:?} into {into}: steps cut {steps_cut}");
                    }
                    // Tightening never loosens a cut.
                    if let (Some(v), Some(tight)) = (cut_value(&t, &c, &group, into), tighten(&t, &stores, &group, into, &bandwidth)) {
                        prop_assert!(cut_value(&t, &c, &tight, into).is_some_and(|w| w >= v));
                    }
                }
            }
            if kind == CollectiveKind::AllToAll {
                if let (Some(best), Some(flow)) = (best, crate::bounds::flow::flow_bound(&t, &c, &quick_flow())) {
                    prop_assert!(flow.lower >= big(best), "flow {} below the cut {best}", flow.lower);
                }
            }
        }
    }
}
