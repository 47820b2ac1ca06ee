//! The fault patterns a sweep enumerates: every single cable, every pair of cables, or every
//! TPUv4 optical switch (docs/design/FORMATS.md, `faults.ocs` with the `tpuv4` preset), each as
//! the set of cables it takes down.

use crate::error::{Error, Result};
use crate::topology::symmetry::Automorphism;
use crate::topology::{tpuv4_ocs_cables, NodeId, Topology, TorusShape};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Which faults a sweep covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultFamily {
    /// Every cable alone.
    Cables,
    /// Every pair of distinct cables.
    CablePairs,
    /// Every TPUv4 OCS of cubes of this side (docs/design/FORMATS.md, `tpuv4` preset).
    Ocs {
        /// The cube side (4 on TPUv4).
        cube: usize,
    },
}

impl FaultFamily {
    /// The name in the index and on the command line (`cables`, `pairs`, `ocs`).
    pub fn as_str(self) -> &'static str {
        match self {
            FaultFamily::Cables => "cables",
            FaultFamily::CablePairs => "pairs",
            FaultFamily::Ocs { .. } => "ocs",
        }
    }
}

/// The cables of a topology (unordered pairs of nodes joined by links both ways), numbered in
/// the order of their ends.
pub struct Cables {
    ends: Vec<(NodeId, NodeId)>,
    index: HashMap<(NodeId, NodeId), u32>,
}

impl Cables {
    /// Every cable of `t`: a pair `a < b` with a link from `a` to `b` and one back.
    pub fn of(t: &Topology) -> Cables {
        let mut ends: Vec<(NodeId, NodeId)> =
            t.links().filter(|(_, l)| l.src < l.dst && t.link_between(l.dst, l.src).is_some()).map(|(_, l)| (l.src, l.dst)).collect();
        ends.sort_unstable();
        ends.dedup();
        let index = ends.iter().enumerate().map(|(i, &e)| (e, i as u32)).collect();
        Cables { ends, index }
    }

    /// Number of cables.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The two ends of cable `i` (lower id first).
    pub fn ends(&self, i: u32) -> (NodeId, NodeId) {
        self.ends[i as usize]
    }

    /// The cable between two nodes, either way round.
    pub fn find(&self, a: NodeId, b: NodeId) -> Option<u32> {
        self.index.get(&(a.min(b), a.max(b))).copied()
    }

    /// Where an automorphism sends every cable.
    pub fn permutation(&self, a: &Automorphism) -> Vec<u32> {
        self.ends.iter().map(|&(x, y)| self.find(a.node(x), a.node(y)).expect("an automorphism maps cables onto cables")).collect()
    }
}

/// One fault pattern of a sweep: the cables it takes down (sorted cable numbers) and, for an
/// OCS, which one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultCase {
    /// The failed cables, sorted.
    pub cables: Vec<u32>,
    /// The OCS `(dim, face position)` that takes them down, for an OCS sweep.
    pub ocs: Option<(usize, Vec<usize>)>,
}

/// Every fault pattern of the family, in a fixed order: cables by their ends, pairs
/// lexicographically, OCSes by dimension then face position. OCSes that carry no cable (a mesh
/// dimension of one cube, a dimension of 2 npus in a cube of side 2) are left out.
///
/// Errors: an OCS sweep on a topology that is no torus made of cubes of side `cube`.
pub fn enumerate(t: &Topology, cables: &Cables, family: FaultFamily) -> Result<Vec<FaultCase>> {
    let n = cables.len() as u32;
    let cases: Vec<FaultCase> = match family {
        FaultFamily::Cables => (0..n).map(|c| FaultCase { cables: vec![c], ocs: None }).collect(),
        FaultFamily::CablePairs => (0..n).flat_map(|a| (a + 1..n).map(move |b| FaultCase { cables: vec![a, b], ocs: None })).collect(),
        FaultFamily::Ocs { cube } => ocs_cases(t, cables, cube)?,
    };
    if cases.is_empty() {
        return Err(Error::bad(match family {
            FaultFamily::Ocs { cube } => {
                format!("--faults ocs: no OCS carries a cable of this topology (cubes of side {cube}: every cable stays inside a cube, and a mesh has no wrap-around cable)")
            }
            _ => format!("--faults {}: the topology has no such fault to sweep", family.as_str()),
        }));
    }
    Ok(cases)
}

fn ocs_cases(t: &Topology, cables: &Cables, cube: usize) -> Result<Vec<FaultCase>> {
    let s = t.torus_shape().ok_or_else(|| Error::bad("--faults ocs: the TPUv4 OCS preset needs a torus, and this topology is a fat tree"))?;
    let mut out = Vec::new();
    for dim in 0..s.ndims() {
        for position in face_positions(s, dim, cube) {
            let ends = tpuv4_ocs_cables(s, dim, &position, cube).map_err(|e| e.context(format!("--faults ocs (cube side {cube})")))?;
            let mut list: Vec<u32> = ends.iter().map(|&(a, b)| cables.find(a, b).expect("an OCS carries cables of the torus")).collect();
            list.sort_unstable();
            if !list.is_empty() {
                out.push(FaultCase { cables: list, ocs: Some((dim, position)) });
            }
        }
    }
    Ok(out)
}

/// The face positions of dimension `dim`: coordinates in the other dimensions, each below
/// `min(cube, radix)`, the last dimension fastest.
fn face_positions(s: &TorusShape, dim: usize, cube: usize) -> Vec<Vec<usize>> {
    let sides: Vec<usize> = (0..s.ndims()).filter(|&d| d != dim).map(|d| cube.min(s.dims[d]).max(1)).collect();
    let mut out = vec![Vec::new()];
    for &side in &sides {
        out = out.into_iter().flat_map(|p: Vec<usize>| (0..side).map(move |c| [p.clone(), vec![c]].concat())).collect();
    }
    out
}

impl FaultCase {
    /// The spec's `faults` object for this case (docs/design/FORMATS.md): cables by their end
    /// coordinates on a torus, node ids otherwise; an OCS by its `tpuv4` preset.
    pub fn spec_faults(&self, t: &Topology, cables: &Cables, cube: usize) -> Value {
        if let Some((dim, position)) = &self.ocs {
            return json!({"ocs": [{"name": self.name(t, cables), "tpuv4": {"dim": dim, "position": position, "cube": cube}}]});
        }
        let node = |n: NodeId| match t.torus_shape() {
            Some(s) => json!(s.coord(n)),
            None => json!(n.0),
        };
        let list: Vec<Value> = self.cables.iter().map(|&c| cables.ends(c)).map(|(a, b)| json!([node(a), node(b)])).collect();
        json!({"cables": list})
    }

    /// A name for people: `(0,0,0)-(1,0,0)`, `npu3-leaf0 + leaf0-spine1`, `ocs dim 2 (2,3)`.
    pub fn name(&self, t: &Topology, cables: &Cables) -> String {
        match &self.ocs {
            Some((dim, position)) => ocs_name(*dim, position),
            None => cables_name(t, self.cables.iter().map(|&c| cables.ends(c))),
        }
    }
}

/// The name of OCS `dim` at `position`: `ocs dim 2 (2,3)`.
pub fn ocs_name(dim: usize, position: &[usize]) -> String {
    format!("ocs dim {dim} {}", TorusShape::name(position))
}

/// The name of cables by their ends: `(0,0,0)-(1,0,0)`, `npu3-leaf0 + leaf0-spine1`.
pub fn cables_name(t: &Topology, ends: impl Iterator<Item = (NodeId, NodeId)>) -> String {
    ends.map(|(a, b)| format!("{}-{}", t.node(a).name, t.node(b).name)).collect::<Vec<_>>().join(" + ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{fat_tree, torus, FatTreeParams, TorusParams};

    #[test]
    fn families_have_their_sizes() {
        let t = torus(&TorusParams::uniform(&[8, 8, 8], 32.0, 100.0)).unwrap();
        let cables = Cables::of(&t);
        assert_eq!(cables.len(), 1536);
        assert_eq!(enumerate(&t, &cables, FaultFamily::Cables).unwrap().len(), 1536);
        // 8x8x8 is 2x2x2 cubes: 16 face positions per dimension, each OCS two cables per cube
        // row.
        let ocs = enumerate(&t, &cables, FaultFamily::Ocs { cube: 4 }).unwrap();
        assert_eq!(ocs.len(), 48);
        assert!(ocs.iter().all(|c| c.cables.len() == 8), "{:?}", ocs[0]);
        let t = torus(&TorusParams::uniform(&[4, 4, 4], 32.0, 100.0)).unwrap();
        let cables = Cables::of(&t);
        assert_eq!(enumerate(&t, &cables, FaultFamily::CablePairs).unwrap().len(), 192 * 191 / 2);
        let ocs = enumerate(&t, &cables, FaultFamily::Ocs { cube: 4 }).unwrap();
        assert_eq!(ocs[0].name(&t, &cables), "ocs dim 0 (0,0)");
        assert_eq!(ocs[0].spec_faults(&t, &cables, 4), json!({"ocs": [{"name": "ocs dim 0 (0,0)", "tpuv4": {"dim": 0, "position": [0, 0], "cube": 4}}]}));
    }

    #[test]
    fn ocs_faults_take_down_cube_crossing_cables_only() {
        // 4x2 in cubes of side 2: along the radix of 2 every cable is inside a cube, so only the
        // OCSes of dimension 0 are swept, each carrying (1,y)-(2,y) (and on a torus the wrap
        // (3,y)-(0,y)); a 2x2 has no OCS with a cable at all.
        for wrap in [false, true] {
            let mut params = TorusParams::uniform(&[4, 2], 32.0, 100.0);
            params.wrap = vec![wrap; 2];
            let t = torus(&params).unwrap();
            let cables = Cables::of(&t);
            let ocs = enumerate(&t, &cables, FaultFamily::Ocs { cube: 2 }).unwrap();
            let names: Vec<String> = ocs.iter().map(|c| c.name(&t, &cables)).collect();
            assert_eq!(names, ["ocs dim 0 (0)", "ocs dim 0 (1)"], "wrap {wrap}");
            let downed: Vec<String> = ocs[1].cables.iter().map(|&c| FaultCase { cables: vec![c], ocs: None }.name(&t, &cables)).collect();
            assert_eq!(downed, if wrap { vec!["(0,1)-(3,1)", "(1,1)-(2,1)"] } else { vec!["(1,1)-(2,1)"] }, "wrap {wrap}");
            params.dims = vec![2, 2];
            let t = torus(&params).unwrap();
            let e = enumerate(&t, &Cables::of(&t), FaultFamily::Ocs { cube: 2 }).unwrap_err();
            assert!(e.message().contains("no OCS carries a cable"), "wrap {wrap}: {e}");
        }
    }

    #[test]
    fn ocs_needs_a_torus_of_cubes() {
        // Every radix must be a whole number of cubes: 6 is not, and neither is 3 (below the side).
        let t = torus(&TorusParams::uniform(&[6, 4], 32.0, 100.0)).unwrap();
        let e = enumerate(&t, &Cables::of(&t), FaultFamily::Ocs { cube: 4 }).unwrap_err();
        assert!(e.message().contains("radix 6 is not made of cubes of side 4"), "{e}");
        let t = torus(&TorusParams::uniform(&[3, 3], 32.0, 100.0)).unwrap();
        let e = enumerate(&t, &Cables::of(&t), FaultFamily::Ocs { cube: 4 }).unwrap_err();
        assert!(e.message().contains("radix 3 is not made of cubes of side 4"), "{e}");
        let f =
            fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 8, board: None, bandwidth_gbps: 1.0, latency_ns: 0.0, switch_latency_ns: 0.0 }).unwrap();
        let e = enumerate(&f, &Cables::of(&f), FaultFamily::Ocs { cube: 4 }).unwrap_err();
        assert!(e.message().contains("needs a torus"), "{e}");
    }
}
