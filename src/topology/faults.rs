//! Fault patterns: failed cables, failed nodes, and optical-switch (OCS) failures.
//!
//! A failed cable takes both directions down; a failed node takes down every link into or out of
//! it; an OCS failure takes down every cable the OCS carries.
//!
//! # The TPUv4 OCS convention
//!
//! A TPUv4 pod is a 4x4x4 cube of chips; larger slices (8x4x4, ...) are cubes side by side.
//! Every cable that leaves a cube face goes through an optical circuit switch: the cables between
//! coordinate `c` and `c + 1 (mod n)` along dimension `d` where `c + 1` is a multiple of the cube
//! size (4), which on a single cube are exactly the wrap-around cables. A cube has 48 such OCSes:
//! one per dimension `d` and *face position* `p`, the coordinates in the other dimensions modulo
//! the cube size (16 positions per dimension). OCS `(d, p)` carries that cable at position `p` in
//! every cube of the slice; the cable from the last coordinate back to 0 exists on a ring of more
//! than 2 npus only (a mesh has none, and a dimension of 2 has one cable, inside a cube of side 2,
//! which no OCS carries). So on 4x4x4 an OCS failure downs one wrap-around cable; on 8x4x4 (two
//! cubes along dimension 0) the OCS `(2, (2,3))` downs the two parallel cables
//! `(2,3,3)-(2,3,0)` and `(6,3,3)-(6,3,0)`, and an OCS of dimension 0 downs the two cables that
//! join the cubes, `(3,y,z)-(4,y,z)` and `(7,y,z)-(0,y,z)`.

use super::{NodeId, Topology, TorusShape};
use crate::error::{Error, Result};

/// An optical-switch failure: a name and the cables it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ocs {
    /// A name for messages.
    pub name: String,
    /// The cables (pairs of node ids) that go down together.
    pub cables: Vec<(NodeId, NodeId)>,
}

/// The set of failures applied to a topology.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPattern {
    /// Failed cables (both directions down).
    pub cables: Vec<(NodeId, NodeId)>,
    /// Failed nodes (every link down).
    pub nodes: Vec<NodeId>,
    /// Failed optical switches.
    pub ocs: Vec<Ocs>,
}

impl FaultPattern {
    /// No failure.
    pub fn is_empty(&self) -> bool {
        self.cables.is_empty() && self.nodes.is_empty() && self.ocs.is_empty()
    }

    /// Applies the pattern. Naming a cable that does not exist (no link in either direction) or a
    /// node out of range is an error.
    pub fn apply(&self, t: &mut Topology) -> Result<()> {
        let named = |n: NodeId, t: &Topology| {
            if n.index() < t.num_nodes() {
                t.node(n).name.clone()
            } else {
                format!("node {n}")
            }
        };
        let fail_cable = |t: &mut Topology, (a, b): (NodeId, NodeId), what: &str| -> Result<()> {
            let n = t.num_nodes();
            if a.index() >= n || b.index() >= n {
                return Err(Error::bad(format!("{what}: cable {}-{}: no such node (there are {n} nodes)", named(a, t), named(b, t))));
            }
            let links: Vec<_> = t.links().filter(|(_, l)| (l.src, l.dst) == (a, b) || (l.src, l.dst) == (b, a)).map(|(id, _)| id).collect();
            if links.is_empty() {
                return Err(Error::bad(format!("{what}: cable {}-{} does not exist in the topology", named(a, t), named(b, t))));
            }
            for l in links {
                t.set_down(l);
            }
            Ok(())
        };
        for (i, &c) in self.cables.iter().enumerate() {
            fail_cable(t, c, &format!("faults.cables[{i}]"))?;
        }
        for (i, o) in self.ocs.iter().enumerate() {
            for (j, &c) in o.cables.iter().enumerate() {
                fail_cable(t, c, &format!("faults.ocs[{i}] ({}).cables[{j}]", o.name))?;
            }
        }
        for (i, &node) in self.nodes.iter().enumerate() {
            if node.index() >= t.num_nodes() {
                return Err(Error::bad(format!("faults.nodes[{i}] = {node}: no such node (there are {} nodes)", t.num_nodes())));
            }
            let ids: Vec<_> = t.links().filter(|(_, l)| l.src == node || l.dst == node).map(|(id, _)| id).collect();
            for l in ids {
                t.set_down(l);
            }
        }
        Ok(())
    }
}

/// The cables carried by TPUv4-style OCS `(dim, position)` on a torus made of cubes of side
/// `cube` (4 for TPUv4); see the module documentation for the convention. Every radix must be a
/// multiple of `cube` (an error otherwise). `position` lists the coordinates in the other
/// dimensions (in dimension order, without `dim`), each below `cube`.
pub fn tpuv4_ocs_cables(shape: &TorusShape, dim: usize, position: &[usize], cube: usize) -> Result<Vec<(NodeId, NodeId)>> {
    let nd = shape.ndims();
    if dim >= nd {
        return Err(Error::bad(format!("dim = {dim}: the torus has {nd} dimensions")));
    }
    if cube == 0 {
        return Err(Error::bad("cube = 0: the cube side must be at least 1"));
    }
    if position.len() + 1 != nd {
        return Err(Error::bad(format!("position = {position:?}: needs {} coordinates (one per dimension other than {dim})", nd - 1)));
    }
    // Every radix a whole number of cubes: a radix below the side (3 on 3x3) is no cube at all,
    // and has no OCS (a TPUv4 slice smaller than a cube has none).
    for (d, &n) in shape.dims.iter().enumerate() {
        if n % cube != 0 || n < 2 {
            let which = if d == dim { format!("dim = {dim}") } else { format!("dimension {d}") };
            return Err(Error::bad(format!("{which}: radix {n} is not made of cubes of side {cube}")));
        }
    }
    let n = shape.dims[dim];
    let others: Vec<usize> = (0..nd).filter(|&d| d != dim).collect();
    for (&d, &p) in others.iter().zip(position) {
        if p >= cube {
            return Err(Error::bad(format!("position = {position:?}: coordinate {p} in dimension {d} is outside the cube face (0 to {})", cube - 1)));
        }
    }
    let mut cables = Vec::new();
    for id in 0..shape.num_nodes() {
        let node = NodeId(id as u32);
        let c = shape.coord(node);
        if c[dim] % cube != cube - 1 || others.iter().zip(position).any(|(&d, &p)| c[d] % cube != p) {
            continue;
        }
        let next = (c[dim] + 1) % n;
        // The wrap-around cable exists on a ring only: a mesh line has none, and on a dimension
        // of size 2 (a ring or not) node 1 back to node 0 is the one inner cable, which stays
        // inside the cube (and a dimension of size 1 has no cable at all).
        if next == 0 && !shape.is_ring(dim) {
            continue;
        }
        cables.push((node, shape.with_coord(node, dim, next)));
    }
    Ok(cables)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, TorusParams};

    fn name_pairs(t: &Topology, cables: &[(NodeId, NodeId)]) -> Vec<String> {
        cables.iter().map(|&(a, b)| format!("{}-{}", t.node(a).name, t.node(b).name)).collect()
    }

    #[test]
    fn ocs_on_one_cube_is_one_wrap_cable() {
        let t = torus(&TorusParams::uniform(&[4, 4, 4], 56.0, 500.0)).unwrap();
        let s = t.torus_shape().unwrap();
        let c = tpuv4_ocs_cables(s, 2, &[2, 3], 4).unwrap();
        assert_eq!(name_pairs(&t, &c), vec!["(2,3,3)-(2,3,0)"]);
        // 16 positions per dimension, 48 OCSes, every wrap cable carried exactly once.
        let mut all = Vec::new();
        for dim in 0..3 {
            for a in 0..4 {
                for b in 0..4 {
                    all.extend(tpuv4_ocs_cables(s, dim, &[a, b], 4).unwrap());
                }
            }
        }
        assert_eq!(all.len(), 48);
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 48);
    }

    #[test]
    fn ocs_on_two_cubes_downs_parallel_cables() {
        let mut t = torus(&TorusParams::uniform(&[8, 4, 4], 56.0, 500.0)).unwrap();
        let s = t.torus_shape().unwrap().clone();
        let z = tpuv4_ocs_cables(&s, 2, &[2, 3], 4).unwrap();
        assert_eq!(name_pairs(&t, &z), vec!["(2,3,3)-(2,3,0)", "(6,3,3)-(6,3,0)"]);
        let x = tpuv4_ocs_cables(&s, 0, &[1, 2], 4).unwrap();
        assert_eq!(name_pairs(&t, &x), vec!["(3,1,2)-(4,1,2)", "(7,1,2)-(0,1,2)"]);
        let pattern = FaultPattern { ocs: vec![Ocs { name: "z(2,3)".into(), cables: z }], ..Default::default() };
        pattern.apply(&mut t).unwrap();
        assert_eq!(t.down_links().len(), 4);
        assert!(tpuv4_ocs_cables(&s, 1, &[4, 0], 4).is_err());
    }

    #[test]
    fn ocs_needs_every_radix_a_whole_number_of_cubes() {
        for (dims, dim, message) in [
            (vec![3, 3], 0, "dim = 0: radix 3 is not made of cubes of side 4"),
            (vec![4, 3], 0, "dimension 1: radix 3 is not made of cubes of side 4"),
            (vec![5, 5], 1, "dimension 0: radix 5 is not made of cubes of side 4"),
            (vec![2, 2, 2], 2, "dimension 0: radix 2 is not made of cubes of side 4"),
        ] {
            let t = torus(&TorusParams::uniform(&dims, 56.0, 500.0)).unwrap();
            let e = tpuv4_ocs_cables(t.torus_shape().unwrap(), dim, &vec![0; dims.len() - 1], 4).unwrap_err();
            assert!(e.message().contains(message), "{dims:?}: {e}");
        }
        let t = torus(&TorusParams::uniform(&[4, 8], 56.0, 500.0)).unwrap();
        assert_eq!(tpuv4_ocs_cables(t.torus_shape().unwrap(), 1, &[3], 4).unwrap().len(), 2);
    }

    #[test]
    fn a_dimension_of_two_has_no_wrap_cable_for_an_ocs_to_carry() {
        // On a radix of 2 the only cable, (0)-(1), is inside a cube of side 2: no OCS carries it,
        // on a mesh or a torus; along a radix of 4 the OCS carries the cube-crossing cable
        // (1)-(2), and on a mesh not the wrap-around, which a mesh lacks.
        for wrap in [false, true] {
            let mut params = TorusParams::uniform(&[4, 2], 56.0, 500.0);
            params.wrap = vec![wrap; 2];
            let t = torus(&params).unwrap();
            let s = t.torus_shape().unwrap();
            for p in 0..2 {
                assert_eq!(tpuv4_ocs_cables(s, 1, &[p], 2).unwrap(), vec![], "wrap {wrap}");
            }
            let crossing = if wrap { vec!["(1,0)-(2,0)", "(3,0)-(0,0)"] } else { vec!["(1,0)-(2,0)"] };
            assert_eq!(name_pairs(&t, &tpuv4_ocs_cables(s, 0, &[0], 2).unwrap()), crossing, "wrap {wrap}");
            // Cubes of side 1: every cable crosses cubes, that of a radix of 2 too, once.
            let all = vec!["(0,0)-(0,1)", "(1,0)-(1,1)", "(2,0)-(2,1)", "(3,0)-(3,1)"];
            assert_eq!(name_pairs(&t, &tpuv4_ocs_cables(s, 1, &[0], 1).unwrap()), all, "wrap {wrap}");
        }
    }

    #[test]
    fn missing_cable_is_an_error() {
        let mut t = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        let p = FaultPattern { cables: vec![(NodeId(0), NodeId(5))], ..Default::default() };
        let e = p.apply(&mut t).unwrap_err();
        assert!(e.message().contains("(0,0)-(1,1) does not exist"), "{e}");
        let p = FaultPattern { nodes: vec![NodeId(5)], ..Default::default() };
        p.apply(&mut t).unwrap();
        assert_eq!(t.down_links().len(), 8);
        assert!(t.check_connected(&[NodeId(0), NodeId(5)]).unwrap_err().message().contains("rank 1 (node 5, (1,1))"));
    }
}
