//! Symmetries of a network: node permutations that map every link onto a link of the same
//! bandwidth, latency and state, and the group of them that a sweep reduces fault patterns by.
//!
//! The group is given by generators, each checked to be an automorphism when it is built, so
//! that every element (a product of generators) maps a schedule onto one that is valid exactly
//! when the original is and costs exactly the same (docs/design/MODEL.md sections 4 and 5 read
//! nothing but links, their bandwidths and latencies, and which npus are ranks).
//!
//! - Torus: translations along every ring (a dimension that wraps and has more than two nodes),
//!   the reflection `c -> n-1-c` of every dimension, and the permutations of dimensions with the
//!   same radix, wrap, bandwidth and latency. This is the group of coordinate maps; where a ring
//!   has radix 4 the graph has more automorphisms (a 4-ring is a 2-cube, so 4x4x4 is the 6-cube),
//!   which the sweep does not use.
//! - Fat tree: the npus form nested blocks (leaves, boards, pods, each block a run of
//!   consecutive ids): any permutation of the blocks of one level inside their parent block,
//!   carrying their leaf switches and (3 levels) their pod's aggregation switches along; the
//!   spines (2 levels); the aggregation index `j` of every pod at once with core group `j`, and
//!   the cores inside a group (3 levels).

use crate::error::{Error, Result};
use crate::topology::{FatTreeShape, LinkId, NodeId, Shape, Topology, TorusShape};
use num_bigint::BigUint;
use serde_json::{json, Value};
use std::collections::HashMap;

/// A permutation of the nodes that maps links onto links with the same bandwidth, latency and
/// state (and npus onto npus), with the link permutation it induces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Automorphism {
    nodes: Vec<NodeId>,
    links: Vec<LinkId>,
}

/// The links of a topology by their two ends.
pub struct LinkTable(HashMap<(NodeId, NodeId), LinkId>);

impl LinkTable {
    /// The table of `t`; two links with the same ends (parallel links) are refused, since a node
    /// map could not tell them apart.
    pub fn of(t: &Topology) -> Result<LinkTable> {
        let mut map = HashMap::with_capacity(t.num_links());
        for (id, l) in t.links() {
            if let Some(other) = map.insert((l.src, l.dst), id) {
                return Err(Error::bad(format!(
                    "{} and {}: parallel links; a sweep needs one link per ordered pair of nodes",
                    t.describe_link(other),
                    t.describe_link(id)
                )));
            }
        }
        Ok(LinkTable(map))
    }

    /// The link from `src` to `dst`.
    pub fn get(&self, src: NodeId, dst: NodeId) -> Option<LinkId> {
        self.0.get(&(src, dst)).copied()
    }
}

impl Automorphism {
    /// The identity of `t`.
    pub fn identity(t: &Topology) -> Automorphism {
        Automorphism { nodes: t.node_ids().collect(), links: t.link_ids().collect() }
    }

    /// Checks that `nodes` (node `i` goes to `nodes[i]`) is a permutation that keeps node kinds
    /// and maps every link onto a link with the same bandwidth, latency and state.
    pub fn new(t: &Topology, table: &LinkTable, nodes: Vec<NodeId>) -> Result<Automorphism> {
        let n = t.num_nodes();
        if nodes.len() != n {
            return Err(Error::bad(format!("a symmetry maps {} nodes, but the topology has {n}", nodes.len())));
        }
        let mut seen = vec![false; n];
        for (i, &m) in nodes.iter().enumerate() {
            if m.index() >= n || std::mem::replace(&mut seen[m.index()], true) {
                return Err(Error::bad(format!("a symmetry maps node {i} to {m}, which is out of range or taken twice")));
            }
            if t.is_npu(NodeId(i as u32)) != t.is_npu(m) {
                return Err(Error::bad(format!(
                    "a symmetry maps node {i} ({}) to node {m} ({}), of another kind",
                    t.node(NodeId(i as u32)).name,
                    t.node(m).name
                )));
            }
        }
        let mut links = Vec::with_capacity(t.num_links());
        for (id, l) in t.links() {
            let image = table.get(nodes[l.src.index()], nodes[l.dst.index()]).ok_or_else(|| {
                Error::bad(format!("a symmetry maps {} to {}->{}, which is no link", t.describe_link(id), nodes[l.src.index()], nodes[l.dst.index()]))
            })?;
            let m = t.link(image);
            if (m.bandwidth_gbps, m.latency_ns, m.up) != (l.bandwidth_gbps, l.latency_ns, l.up) {
                return Err(Error::bad(format!(
                    "a symmetry maps {} onto {}, whose bandwidth, latency or state differs",
                    t.describe_link(id),
                    t.describe_link(image)
                )));
            }
            links.push(image);
        }
        Ok(Automorphism { nodes, links })
    }

    /// Where a node goes.
    pub fn node(&self, n: NodeId) -> NodeId {
        self.nodes[n.index()]
    }

    /// Where a link goes.
    pub fn link(&self, l: LinkId) -> LinkId {
        self.links[l.index()]
    }

    /// The node images, by node id.
    pub fn nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// `self` first, then `next`.
    pub fn then(&self, next: &Automorphism) -> Automorphism {
        Automorphism { nodes: self.nodes.iter().map(|&n| next.node(n)).collect(), links: self.links.iter().map(|&l| next.link(l)).collect() }
    }

    /// Whether it moves nothing.
    pub fn is_identity(&self) -> bool {
        self.nodes.iter().enumerate().all(|(i, n)| n.index() == i)
    }
}

/// One generator of a [`SymmetryGroup`]: a name for people and its automorphism.
#[derive(Clone, Debug)]
pub struct Generator {
    /// What it does (`shift dim 0`, `swap leaves 0,1`, ...).
    pub name: String,
    /// The automorphism.
    pub map: Automorphism,
}

/// The symmetries a sweep uses (see the module documentation), by generators.
#[derive(Clone, Debug)]
pub struct SymmetryGroup {
    /// The generators; every element is a product of them.
    pub generators: Vec<Generator>,
    /// The number of elements.
    pub order: BigUint,
}

impl SymmetryGroup {
    /// The group of a torus or fat tree without faults.
    ///
    /// Errors: a custom topology, a topology with a failed link, or a fat tree whose boards
    /// straddle its leaves or pods (its symmetries are then no product of block permutations).
    pub fn of(t: &Topology) -> Result<SymmetryGroup> {
        if let Some(l) = t.down_links().first() {
            return Err(Error::internal(format!("the symmetries of a faulty topology were asked for ({} is down)", t.describe_link(*l))));
        }
        let table = LinkTable::of(t)?;
        let named = match t.shape() {
            Shape::Torus(s) => torus_generators(t, s),
            Shape::FatTree(s) => fat_tree_generators(s)?,
            Shape::Custom => return Err(Error::bad("a sweep needs a torus or a fat tree: a custom topology's symmetries are not known")),
        };
        let order = match t.shape() {
            Shape::Torus(s) => torus_order(t, s),
            Shape::FatTree(s) => fat_tree_order(s)?,
            Shape::Custom => unreachable!("refused above"),
        };
        let mut generators = Vec::new();
        for (name, perm) in named {
            let map = Automorphism::new(t, &table, perm).map_err(|e| Error::internal(format!("the generator `{name}` is no symmetry: {e}")))?;
            if !map.is_identity() {
                generators.push(Generator { name, map });
            }
        }
        Ok(SymmetryGroup { generators, order })
    }

    /// The product of the generators named by `word`, applied in order.
    pub fn element(&self, t: &Topology, word: &[u16]) -> Automorphism {
        word.iter().fold(Automorphism::identity(t), |acc, &g| acc.then(&self.generators[g as usize].map))
    }

    /// Where the product of the generators named by `word` sends every node (the node part of
    /// [`Self::element`], without the links: what a sweep needs for every member).
    pub fn node_map(&self, t: &Topology, word: &[u16]) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = t.node_ids().collect();
        for &g in word {
            let map = &self.generators[g as usize].map;
            nodes.iter_mut().for_each(|n| *n = map.node(*n));
        }
        nodes
    }
}

/// Dimensions that may be permuted among themselves have the same radix, wrap and link speeds.
fn dimension_kind(t: &Topology, s: &TorusShape, dim: usize) -> (usize, bool, Vec<(u64, u64)>) {
    let mut speeds: Vec<(u64, u64)> = t
        .links()
        .filter(|(_, l)| matches!(l.class, crate::topology::LinkClass::TorusDim { dim: d, .. } if d as usize == dim))
        .map(|(_, l)| (l.bandwidth_gbps.to_bits(), l.latency_ns.to_bits()))
        .collect();
    speeds.sort_unstable();
    speeds.dedup();
    (s.dims[dim], s.is_ring(dim), speeds)
}

/// Node permutations of a coordinate map applied to every node.
fn coordinate_perm(s: &TorusShape, f: impl Fn(&mut Vec<usize>)) -> Vec<NodeId> {
    (0..s.num_nodes() as u32)
        .map(|id| {
            let mut c = s.coord(NodeId(id));
            f(&mut c);
            s.node_at(&c).expect("a coordinate map stays on the torus")
        })
        .collect()
}

fn torus_generators(t: &Topology, s: &TorusShape) -> Vec<(String, Vec<NodeId>)> {
    let mut out = Vec::new();
    for d in 0..s.ndims() {
        let n = s.dims[d];
        if s.is_ring(d) {
            out.push((format!("shift dim {d}"), coordinate_perm(s, |c| c[d] = (c[d] + 1) % n)));
        }
        if n > 1 {
            out.push((format!("reflect dim {d}"), coordinate_perm(s, |c| c[d] = n - 1 - c[d])));
        }
    }
    let kinds: Vec<_> = (0..s.ndims()).map(|d| dimension_kind(t, s, d)).collect();
    for d in 0..s.ndims() {
        // Transpositions of each dimension with the next one of its kind generate all
        // permutations of that kind.
        if let Some(e) = (d + 1..s.ndims()).find(|&e| kinds[e] == kinds[d]) {
            if s.dims[d] > 1 {
                out.push((format!("swap dims {d},{e}"), coordinate_perm(s, |c| c.swap(d, e))));
            }
        }
    }
    out
}

fn factorial(n: usize) -> BigUint {
    (1..=n as u64).map(BigUint::from).product()
}

fn torus_order(t: &Topology, s: &TorusShape) -> BigUint {
    let mut order = BigUint::from(1u32);
    for d in 0..s.ndims() {
        let n = s.dims[d];
        order *= BigUint::from(if s.is_ring(d) {
            2 * n
        } else if n > 1 {
            2
        } else {
            1
        });
    }
    let mut kinds: Vec<_> = (0..s.ndims()).filter(|&d| s.dims[d] > 1).map(|d| dimension_kind(t, s, d)).collect();
    kinds.sort();
    for group in kinds.chunk_by(|a, b| a == b) {
        order *= factorial(group.len());
    }
    order
}

/// The nested npu blocks of a fat tree, smallest first (sizes 1 < ... < npus), each with its
/// name; refused when the boards straddle leaves or pods.
fn npu_blocks(s: &FatTreeShape) -> Result<Vec<(usize, &'static str)>> {
    let mut sizes: Vec<(usize, &'static str)> = vec![(1, "npus"), (s.down, if s.levels == 2 { "leaves" } else { "tors" })];
    if let Some(b) = s.board {
        sizes.push((b, "boards"));
    }
    if s.levels == 3 {
        sizes.push((s.up * s.down, "pods"));
    }
    sizes.push((s.npus, "all"));
    sizes.sort_by_key(|&(size, _)| size);
    sizes.dedup_by_key(|&mut (size, _)| size);
    for w in sizes.windows(2) {
        if w[1].0 % w[0].0 != 0 {
            return Err(Error::bad(format!(
                "the fat tree's {} ({} npus each) and {} ({} npus each) are not nested, so its symmetries are not known to the sweep",
                w[0].1, w[0].0, w[1].1, w[1].0
            )));
        }
    }
    Ok(sizes)
}

/// The node permutation that swaps npu blocks `[a, a + size)` and `[b, b + size)` and carries
/// the leaves and pods (aggregation switches) inside them along.
fn swap_npu_blocks(s: &FatTreeShape, size: usize, a: usize, b: usize) -> Vec<NodeId> {
    let npu = |i: usize| {
        if (a..a + size).contains(&i) {
            i - a + b
        } else if (b..b + size).contains(&i) {
            i - b + a
        } else {
            i
        }
    };
    let mut perm: Vec<NodeId> = (0..s.npus + s.switches()).map(|i| NodeId(i as u32)).collect();
    for (i, p) in perm.iter_mut().enumerate().take(s.npus) {
        *p = NodeId(npu(i) as u32);
    }
    for l in 0..s.leaves {
        perm[s.leaf(l).index()] = s.leaf(npu(l * s.down) / s.down);
    }
    if s.levels == 3 {
        let pod_npus = s.up * s.down;
        for p in 0..s.leaves / s.up {
            let to = npu(p * pod_npus) / pod_npus;
            for j in 0..s.up {
                perm[s.middle_switch(p * s.up + j).index()] = s.middle_switch(to * s.up + j);
            }
        }
    }
    perm
}

fn fat_tree_generators(s: &FatTreeShape) -> Result<Vec<(String, Vec<NodeId>)>> {
    let blocks = npu_blocks(s)?;
    let mut out = Vec::new();
    for w in blocks.windows(2) {
        let ((size, name), (parent, _)) = (w[0], w[1]);
        // Adjacent transpositions inside the first parent block; the swaps of the parents
        // conjugate them into every other parent.
        for i in 0..parent / size - 1 {
            out.push((format!("swap {name} {i},{}", i + 1), swap_npu_blocks(s, size, i * size, (i + 1) * size)));
        }
    }
    let identity: Vec<NodeId> = (0..s.npus + s.switches()).map(|i| NodeId(i as u32)).collect();
    let swap = |pairs: &[(NodeId, NodeId)]| {
        let mut p = identity.clone();
        for &(x, y) in pairs {
            p.swap(x.index(), y.index());
        }
        p
    };
    if s.levels == 2 {
        for i in 0..s.middle.saturating_sub(1) {
            out.push((format!("swap spines {i},{}", i + 1), swap(&[(s.middle_switch(i), s.middle_switch(i + 1))])));
        }
    } else {
        let u = s.up;
        let pods = s.leaves / u;
        for j in 0..u.saturating_sub(1) {
            let mut pairs: Vec<(NodeId, NodeId)> = (0..pods).map(|p| (s.middle_switch(p * u + j), s.middle_switch(p * u + j + 1))).collect();
            pairs.extend((0..u).map(|c| (s.core(j * u + c), s.core((j + 1) * u + c))));
            out.push((format!("swap aggregation index {j},{} (with core groups)", j + 1), swap(&pairs)));
            out.push((format!("swap cores {j},{} of group 0", j + 1), swap(&[(s.core(j), s.core(j + 1))])));
        }
    }
    Ok(out)
}

fn fat_tree_order(s: &FatTreeShape) -> Result<BigUint> {
    let blocks = npu_blocks(s)?;
    let mut order = BigUint::from(1u32);
    for w in blocks.windows(2) {
        let (size, parent) = (w[0].0, w[1].0);
        order *= factorial(parent / size).pow((s.npus / parent) as u32);
    }
    if s.levels == 2 {
        order *= factorial(s.middle);
    } else {
        order *= factorial(s.up) * factorial(s.up).pow(s.up as u32);
    }
    Ok(order)
}

/// A torus symmetry in coordinates: the node at `x` goes to the node at `y` with
/// `y[axes[d]] = ((reflect[d] ? n_d - 1 - x[d] : x[d]) + shift[d]) mod n_d`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct CoordinateMap {
    /// Where each dimension goes.
    pub axes: Vec<usize>,
    /// Which dimensions are reflected (before the shift).
    pub reflect: Vec<bool>,
    /// The shift along each (source) dimension.
    pub shift: Vec<usize>,
}

impl CoordinateMap {
    /// The node permutation, or `None` when the map does not fit the shape (lengths, a
    /// dimension sent to one of another radix, a shift out of range).
    pub fn permutation(&self, s: &TorusShape) -> Option<Vec<NodeId>> {
        let nd = s.ndims();
        let mut axes = self.axes.clone();
        axes.sort_unstable();
        axes.dedup();
        let fits = self.axes.len() == nd && axes.len() == nd && self.reflect.len() == nd && self.shift.len() == nd;
        if !fits || (0..nd).any(|d| self.axes[d] >= nd || s.dims[self.axes[d]] != s.dims[d] || self.shift[d] >= s.dims[d]) {
            return None;
        }
        Some(coordinate_perm(s, |c| {
            let x = c.clone();
            for d in 0..nd {
                let n = s.dims[d];
                let r = if self.reflect[d] { n - 1 - x[d] } else { x[d] };
                c[self.axes[d]] = (r + self.shift[d]) % n;
            }
        }))
    }

    /// The coordinate form of a torus automorphism's node map (`nodes[i]` is where node `i`
    /// goes): read off the images of the origin and of the unit vectors, then checked against
    /// every node. `None` if it is no coordinate map.
    pub fn of(s: &TorusShape, nodes: &[NodeId]) -> Option<CoordinateMap> {
        let nd = s.ndims();
        let origin = s.coord(nodes[0]);
        let mut axes = vec![usize::MAX; nd];
        let (mut reflect, mut shift) = (vec![false; nd], vec![0; nd]);
        for d in (0..nd).filter(|&d| s.dims[d] > 1) {
            let n = s.dims[d];
            let y = s.coord(nodes[s.with_coord(NodeId(0), d, 1).index()]);
            let moved: Vec<usize> = (0..nd).filter(|&e| y[e] != origin[e]).collect();
            let &[axis] = moved.as_slice() else { return None };
            let delta = (y[axis] + n - origin[axis]) % n;
            reflect[d] = delta == n - 1 && n > 2;
            if !reflect[d] && delta != 1 {
                return None;
            }
            axes[d] = axis;
            shift[d] = (origin[axis] + n - if reflect[d] { n - 1 } else { 0 }) % n;
        }
        // Dimensions of one node go to the unused ones of one node, in order.
        let free: Vec<usize> = (0..nd).filter(|e| s.dims[*e] == 1 && !axes.contains(e)).collect();
        let mut free = free.into_iter();
        for d in (0..nd).filter(|&d| s.dims[d] == 1) {
            axes[d] = free.next()?;
        }
        let map = CoordinateMap { axes, reflect, shift };
        (map.permutation(s)? == nodes).then_some(map)
    }
}

/// How the index writes a symmetry, given where it sends every node: a torus's in coordinates
/// (`{"axes", "reflect", "shift"}`, [`CoordinateMap`]), any other as the image of every node
/// (`{"nodes": [...]}`).
pub fn describe(t: &Topology, nodes: &[NodeId]) -> Value {
    if let Some(map) = t.torus_shape().and_then(|s| CoordinateMap::of(s, nodes)) {
        return serde_json::to_value(map).expect("a coordinate map serializes");
    }
    json!({"nodes": nodes.iter().map(|n| n.0).collect::<Vec<_>>()})
}

/// Reads a symmetry written by [`describe`] back, checking that it is one.
pub fn read_description(t: &Topology, v: &Value) -> Result<Automorphism> {
    let nodes = if let Some(list) = v.get("nodes") {
        let ids: Vec<u32> = serde_json::from_value(list.clone()).map_err(|e| Error::bad(format!("symmetry.nodes: {e}")))?;
        ids.into_iter().map(NodeId).collect()
    } else {
        let map: CoordinateMap = serde_json::from_value(v.clone()).map_err(|e| Error::bad(format!("symmetry: {e}")))?;
        let s = t.torus_shape().ok_or_else(|| Error::bad("symmetry: a coordinate map needs a torus"))?;
        map.permutation(s).ok_or_else(|| Error::bad(format!("symmetry {v}: does not fit the torus")))?
    };
    Automorphism::new(t, &LinkTable::of(t)?, nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{fat_tree, torus, FatTreeParams, TorusParams};

    #[test]
    fn torus_groups_have_the_orders_of_their_coordinate_maps() {
        // 8x8x8: 16^3 dihedral moves times 3! axis orders.
        let t = torus(&TorusParams::uniform(&[8, 8, 8], 32.0, 100.0)).unwrap();
        assert_eq!(SymmetryGroup::of(&t).unwrap().order, BigUint::from(16u32 * 16 * 16 * 6));
        // 3x4: no axis swap; 6 * 8.
        let t = torus(&TorusParams::uniform(&[3, 4], 32.0, 100.0)).unwrap();
        let g = SymmetryGroup::of(&t).unwrap();
        assert_eq!(g.order, BigUint::from(48u32));
        assert!(g.generators.iter().all(|x| !x.name.starts_with("swap")));
        // Unequal bandwidths keep two radix-4 dimensions apart.
        let mut p = TorusParams::uniform(&[4, 4], 32.0, 100.0);
        p.bandwidth_gbps = vec![32.0, 64.0];
        let g = SymmetryGroup::of(&torus(&p).unwrap()).unwrap();
        assert_eq!(g.order, BigUint::from(64u32));
        // A mesh line reflects only; a line of two nodes swaps them.
        let mut p = TorusParams::uniform(&[4, 2], 32.0, 100.0);
        p.wrap = vec![false, true];
        assert_eq!(SymmetryGroup::of(&torus(&p).unwrap()).unwrap().order, BigUint::from(4u32));
    }

    #[test]
    fn coordinate_maps_round_trip_through_node_permutations() {
        let t = torus(&TorusParams::uniform(&[4, 5, 4, 1], 32.0, 100.0)).unwrap();
        let s = t.torus_shape().unwrap();
        let g = SymmetryGroup::of(&t).unwrap();
        let word: Vec<u16> = (0..40).map(|i| ((i * 7 + 3) % g.generators.len()) as u16).collect();
        for len in 0..word.len() {
            let a = g.element(&t, &word[..len]);
            assert_eq!(g.node_map(&t, &word[..len]), a.nodes());
            let map = CoordinateMap::of(s, a.nodes()).expect("a product of generators is a coordinate map");
            assert_eq!(map.permutation(s).unwrap(), a.nodes());
            assert_eq!(read_description(&t, &describe(&t, a.nodes())).unwrap(), a);
        }
    }

    #[test]
    fn fat_tree_generators_are_automorphisms_and_boards_must_nest() {
        let tree = |levels, k, npus, board| {
            fat_tree(&FatTreeParams { levels, k, osr: 1.0, npus, board, bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 }).unwrap()
        };
        // 2 levels, 4 npus per leaf, boards of 8 (two leaves): (4!)^4 (2!)^2 2! for npus, leaves,
        // boards; 4! spines.
        let g = SymmetryGroup::of(&tree(2, 8, 16, Some(8))).unwrap();
        assert_eq!(g.order, factorial(4).pow(4) * BigUint::from(4u32 * 2) * factorial(4));
        // 3 levels, k = 4: 2 npus per ToR, pods of 2 ToRs; 8 npus = 2 pods.
        let t = tree(3, 4, 8, None);
        let g = SymmetryGroup::of(&t).unwrap();
        assert_eq!(g.order, BigUint::from(16u32 * 4 * 2 * 2 * 4));
        let a = g.element(&t, &[0, 1, 2, 3]);
        assert_eq!(read_description(&t, &describe(&t, a.nodes())).unwrap(), a);
        let e = SymmetryGroup::of(&tree(2, 8, 24, Some(6))).unwrap_err();
        assert!(e.message().contains("not nested"), "{e}");
    }

    #[test]
    fn a_map_that_breaks_a_link_is_refused() {
        let t = torus(&TorusParams::uniform(&[5], 32.0, 100.0)).unwrap();
        let table = LinkTable::of(&t).unwrap();
        let e = Automorphism::new(&t, &table, [0, 2, 1, 3, 4].map(NodeId).to_vec()).unwrap_err();
        assert!(e.message().contains("which is no link"), "{e}");
        assert!(Automorphism::new(&t, &table, [0, 0, 1, 3, 4].map(NodeId).to_vec()).is_err());
    }
}
