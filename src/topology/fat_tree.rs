//! Fat trees of two or three levels, with oversubscription and an optional board model.
//!
//! Numbering (docs/design/MODEL.md section 1): npus `0..n`, then the switches: leaves then spines (2
//! levels), or ToRs, then aggregation switches, then cores (3 levels). Npu `i` sits under leaf
//! (ToR) `i / d` and on board `i / b`. Pod `p` of a 3-level tree holds ToRs `p*u .. p*u+u-1` and
//! aggregation switches `p*u .. p*u+u-1`; aggregation switch `j` of every pod is linked to cores
//! `j*u .. j*u+u-1`.
//!
//! Links are listed as cables (both directions, upward first): npu-leaf cables by npu, then the
//! board meshes (board by board, each pair `a < b` once), then leaf-spine cables (leaf by leaf,
//! spine by spine) or ToR-aggregation cables (ToR by ToR) followed by aggregation-core cables.

use super::{LinkClass, NodeId, NodeKind, Shape, Topology, TopologyBuilder};
use crate::error::{Error, Result};

/// Parameters of a fat tree (the spec's `fat_tree` object).
#[derive(Clone, Debug, PartialEq)]
pub struct FatTreeParams {
    /// 2 or 3.
    pub levels: u32,
    /// Leaf radix.
    pub k: usize,
    /// Oversubscription ratio (down ports per up port).
    pub osr: f64,
    /// Number of npus.
    pub npus: usize,
    /// Npus per board (fully meshed by direct links); `None` for no board links.
    pub board: Option<usize>,
    /// Bandwidth of every link, GB/s.
    pub bandwidth_gbps: f64,
    /// Latency of every link, ns.
    pub latency_ns: f64,
    /// Forwarding latency of every switch, ns.
    pub switch_latency_ns: f64,
}

/// The structure of a built fat tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FatTreeShape {
    /// 2 or 3.
    pub levels: u32,
    /// Npus per leaf (down ports), d = round(k*osr/(osr+1)).
    pub down: usize,
    /// Up ports per leaf, u = k - d.
    pub up: usize,
    /// Number of npus.
    pub npus: usize,
    /// Number of leaves (ToRs).
    pub leaves: usize,
    /// Number of spines (2 levels) or aggregation switches (3 levels).
    pub middle: usize,
    /// Number of core switches (3 levels; 0 for 2 levels).
    pub cores: usize,
    /// Npus per board, if boards are modelled.
    pub board: Option<usize>,
}

impl FatTreeShape {
    /// The node id of leaf (ToR) `i`.
    pub fn leaf(&self, i: usize) -> NodeId {
        NodeId((self.npus + i) as u32)
    }

    /// The node id of spine (2 levels) or aggregation switch (3 levels) `i`.
    pub fn middle_switch(&self, i: usize) -> NodeId {
        NodeId((self.npus + self.leaves + i) as u32)
    }

    /// The node id of core switch `i`.
    pub fn core(&self, i: usize) -> NodeId {
        NodeId((self.npus + self.leaves + self.middle + i) as u32)
    }

    /// The leaf an npu sits under.
    pub fn leaf_of(&self, npu: NodeId) -> usize {
        npu.index() / self.down
    }

    /// The board of an npu, if boards are modelled.
    pub fn board_of(&self, npu: NodeId) -> Option<usize> {
        self.board.map(|b| npu.index() / b)
    }

    /// The pod of a leaf (3 levels): leaves `p*u .. p*u+u-1`.
    pub fn pod_of_leaf(&self, leaf: usize) -> usize {
        leaf / self.up
    }

    /// Total number of switches.
    pub fn switches(&self) -> usize {
        self.leaves + self.middle + self.cores
    }
}

/// Builds a fat tree.
pub fn fat_tree(p: &FatTreeParams) -> Result<Topology> {
    if p.levels != 2 && p.levels != 3 {
        return Err(Error::bad(format!("levels = {}: a fat tree has 2 or 3 levels", p.levels)));
    }
    if !(p.osr.is_finite() && p.osr > 0.0) {
        return Err(Error::bad(format!("osr = {}: the oversubscription ratio must be > 0", p.osr)));
    }
    let down = (p.k as f64 * p.osr / (p.osr + 1.0)).round() as usize;
    if p.k < 2 || down == 0 || down >= p.k {
        return Err(Error::bad(format!(
            "k = {}, osr = {}: gives {down} down ports and {} up ports; both must be at least 1",
            p.k,
            p.osr,
            p.k as isize - down as isize
        )));
    }
    let up = p.k - down;
    if p.npus == 0 || p.npus % down != 0 {
        return Err(Error::bad(format!("npus = {}: must be a positive multiple of the {down} npus per leaf (k = {}, osr = {})", p.npus, p.k, p.osr)));
    }
    if p.npus > 1 << 20 {
        return Err(Error::bad(format!("npus = {}: more than 1048576", p.npus)));
    }
    if let Some(b) = p.board {
        if b == 0 || p.npus % b != 0 {
            return Err(Error::bad(format!("board = {b}: must divide npus = {}", p.npus)));
        }
    }
    let leaves = p.npus / down;
    let (middle, cores) = if p.levels == 2 {
        (up, 0)
    } else {
        if leaves % up != 0 {
            return Err(Error::bad(format!("npus = {}: a 3-level tree needs a whole number of pods of {up} ToRs, but there are {leaves} ToRs", p.npus)));
        }
        (leaves, up * up)
    };
    let shape = FatTreeShape { levels: p.levels, down, up, npus: p.npus, leaves, middle, cores, board: p.board };
    crate::units::checked_bandwidth(p.bandwidth_gbps).map_err(|why| Error::bad(format!("bandwidth_gbps = {why}")))?;
    crate::units::checked_latency(p.latency_ns).map_err(|why| Error::bad(format!("latency_ns = {why}")))?;
    crate::units::checked_latency(p.switch_latency_ns).map_err(|why| Error::bad(format!("switch_latency_ns = {why}")))?;
    let (bw, lat) = (p.bandwidth_gbps, p.latency_ns);
    let mut b = TopologyBuilder::new();
    for i in 0..p.npus {
        b.node(NodeKind::Npu, format!("npu{i}"));
    }
    let (leaf_name, mid_name) = if p.levels == 2 { ("leaf", "spine") } else { ("tor", "agg") };
    for i in 0..leaves {
        b.node(NodeKind::Switch, format!("{leaf_name}{i}"));
    }
    for i in 0..middle {
        b.node(NodeKind::Switch, format!("{mid_name}{i}"));
    }
    for i in 0..cores {
        b.node(NodeKind::Switch, format!("core{i}"));
    }
    let tier = |tier: u8, up: bool| LinkClass::Tier { tier, up };
    for i in 0..p.npus {
        let npu = NodeId(i as u32);
        b.cable(npu, shape.leaf(shape.leaf_of(npu)), bw, lat, tier(0, true), tier(0, false));
    }
    if let Some(bs) = p.board {
        for start in (0..p.npus).step_by(bs) {
            for a in start..start + bs {
                for c in a + 1..start + bs {
                    b.cable(NodeId(a as u32), NodeId(c as u32), bw, lat, LinkClass::Board, LinkClass::Board);
                }
            }
        }
    }
    if p.levels == 2 {
        for l in 0..leaves {
            for s in 0..up {
                b.cable(shape.leaf(l), shape.middle_switch(s), bw, lat, tier(1, true), tier(1, false));
            }
        }
    } else {
        for l in 0..leaves {
            let pod = shape.pod_of_leaf(l);
            for j in 0..up {
                b.cable(shape.leaf(l), shape.middle_switch(pod * up + j), bw, lat, tier(1, true), tier(1, false));
            }
        }
        for a in 0..middle {
            let j = a % up;
            for c in 0..up {
                b.cable(shape.middle_switch(a), shape.core(j * up + c), bw, lat, tier(2, true), tier(2, false));
            }
        }
    }
    b.build(Shape::FatTree(shape), p.switch_latency_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(levels: u32, k: usize, osr: f64) -> Topology {
        fat_tree(&FatTreeParams { levels, k, osr, npus: 64, board: Some(8), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 }).unwrap()
    }

    #[test]
    fn the_four_reference_trees() {
        // (levels, k, osr) -> (leaves, middle, cores, switches, npus per leaf)
        let cases = [(2, 16, 1.0, (8, 8, 0, 16, 8)), (2, 8, 1.0, (16, 4, 0, 20, 4)), (2, 12, 2.0, (8, 4, 0, 12, 8)), (3, 8, 1.0, (16, 16, 16, 48, 4))];
        for (levels, k, osr, (leaves, middle, cores, switches, per_leaf)) in cases {
            let t = reference(levels, k, osr);
            let s = t.fat_tree_shape().unwrap();
            assert_eq!((s.leaves, s.middle, s.cores, s.switches(), s.down), (leaves, middle, cores, switches, per_leaf), "{levels}L-k{k}-osr{osr}");
            assert_eq!(t.num_npus(), 64);
            assert_eq!(t.num_switches(), switches);
            // npu-leaf cables + 8 boards of 8 fully meshed + leaf-middle (+ middle-core) cables
            let board_cables = 8 * 8 * 7 / 2;
            let upper = if levels == 2 { leaves * s.up } else { leaves * s.up + middle * s.up };
            assert_eq!(t.num_links(), 2 * (64 + board_cables + upper));
        }
    }

    #[test]
    fn three_level_pods() {
        let t = reference(3, 8, 1.0);
        let s = t.fat_tree_shape().unwrap().clone();
        // 4 pods of 4 ToRs and 4 aggregation switches: ToR 5 (pod 1) reaches agg 4..8 only.
        let aggs: Vec<usize> = t.out_links(s.leaf(5)).map(|l| t.link(l).dst.index()).filter(|n| (64 + 16..64 + 32).contains(n)).map(|n| n - 64 - 16).collect();
        let mut aggs = aggs;
        aggs.sort();
        assert_eq!(aggs, vec![4, 5, 6, 7]);
        // aggregation switch 6 (j = 2) reaches cores 8..12.
        let mut cores: Vec<usize> = t.out_links(s.middle_switch(6)).map(|l| t.link(l).dst.index()).filter(|&n| n >= 96).map(|n| n - 96).collect();
        cores.sort();
        assert_eq!(cores, vec![8, 9, 10, 11]);
        assert_eq!(t.node(s.core(0)).name, "core0");
        assert_eq!(t.node(s.leaf(3)).name, "tor3");
    }

    #[test]
    fn bad_parameters() {
        let mut p = FatTreeParams { levels: 2, k: 16, osr: 1.0, npus: 60, board: None, bandwidth_gbps: 1.0, latency_ns: 0.0, switch_latency_ns: 0.0 };
        assert!(fat_tree(&p).unwrap_err().message().contains("npus = 60"));
        p.npus = 64;
        p.levels = 4;
        assert!(fat_tree(&p).unwrap_err().message().contains("levels = 4"));
        p.levels = 2;
        p.board = Some(7);
        assert!(fat_tree(&p).unwrap_err().message().contains("board = 7"));
    }
}
