//! Cut bounds (docs/design/MODEL.md section 6): for a node set U, the bytes that must leave U over the
//! capacity of the up links leaving U (or, reversed, the bytes that must enter U).
//!
//! Any U gives a valid bound; we evaluate the sets that matter on the families we build: torus
//! bisections along every dimension and rotation, the sets next to failed cables, single npus,
//! and fat-tree subtrees (leaves, pods); on any other (custom) topology, the halves that every
//! link splits the nodes into by distance. The rule for what must cross is the one the checker
//! (`certify`) applies; see [`crossing_bytes`].

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
    let capacity: Rational = links_leaving(t, &u, nodes).map(|l| rational_from_decimal(l.bandwidth_gbps).unwrap_or_default()).sum();
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

/// The best cut bound over [`candidate_cuts`], both directions; `None` if no cut bounds anything.
pub fn best_cut(t: &Topology, c: &Collective) -> Option<CutBound> {
    let mut best: Option<CutBound> = None;
    for (label, nodes) in candidate_cuts(t) {
        for into in [false, true] {
            if let Some(v) = cut_value(t, c, &nodes, into) {
                if best.as_ref().is_none_or(|b| v > b.value_ns) {
                    best = Some(CutBound { value_ns: v, nodes: nodes.clone(), into, label: label.clone() });
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, TorusParams};

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
}
