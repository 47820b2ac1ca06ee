//! Frames: a torus instance seen through a symmetry of its healthy network, synthesized there
//! and carried back.
//!
//! A symmetry of the healthy torus (translations along its rings, reflections, permutations of
//! dimensions of one radix and link speeds: `crate::topology::symmetry`) maps the instance's failed
//! links onto other links: another instance, of the same bounds, whose schedules map back onto
//! this one link by link, valid exactly when they are and costing exactly the same
//! (`crate::schedule::mapping`). The layered trees' heuristics (dimension orders, ties broken by rank
//! order) are not symmetric, so the schedule they find depends on where the fault lies: on 4x4x4
//! with a failed cable the pipelined all_reduce was 4.04% above the certified bound with the cable
//! at (0,0,0)-(1,0,0) and up to 5.17% elsewhere. [`frames`] puts the first failed cable at the
//! origin along the first dimension of its kind, pointing up (the *canonical* frame: every
//! placement of a single cable synthesizes the same schedule, carried to its place), then lists
//! other frames a search may also try and keep the best of.

use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::schedule::mapping::map_schedule;
use crate::schedule::Schedule;
use crate::topology::symmetry::{Automorphism, CoordinateMap, LinkTable};
use crate::topology::{NodeId, Topology, TorusShape};

/// The instance's network seen through a symmetry of the healthy torus.
pub struct Frame {
    /// The symmetry, in coordinates (for people and the schedule's meta).
    pub map: CoordinateMap,
    /// The network with the instance's failed links moved by the symmetry.
    pub topology: Topology,
    /// From the frame's network back onto the instance's.
    back: Automorphism,
}

impl Frame {
    /// `s`, made on [`Frame::topology`], carried back onto `onto` (the instance's network).
    ///
    /// Errors: a schedule of another network or ranks (an internal error: the frame maps the
    /// ranks onto themselves).
    pub fn carry_back(&self, s: &Schedule, onto: &Topology) -> Result<Schedule> {
        map_schedule(s, &self.back, onto.clone())
    }

    /// Whether the frame moves nothing.
    pub fn is_identity(&self) -> bool {
        self.back.is_identity()
    }
}

/// The frames worth synthesizing `c` on `t` in, the canonical one first (see the module docs),
/// then the cable along every other dimension of its kind, pointing down (across the wrap at the
/// origin), and moved half way round every ring; none where `t` is not a torus whose dimensions
/// are all rings, no link is down, or some npu is not a rank (a symmetry must map the ranks onto
/// themselves).
///
/// Errors: none expected (every map is checked to be a symmetry before it is used; one that is
/// not, as a swap of dimensions of unequal link speeds, is left out).
pub fn frames(t: &Topology, c: &Collective) -> Result<Vec<Frame>> {
    let Some(s) = t.torus_shape() else { return Ok(Vec::new()) };
    let down = t.down_links();
    let rings = (0..s.ndims()).filter(|&d| s.dims[d] > 1).all(|d| s.is_ring(d));
    let Some(&first) = down.first() else { return Ok(Vec::new()) };
    if !rings || c.num_ranks() != t.num_npus() {
        return Ok(Vec::new());
    }
    let l = t.link(first);
    let (a, b) = (s.coord(l.src), s.coord(l.dst));
    let Some(d) = (0..s.ndims()).find(|&d| a[d] != b[d]) else { return Ok(Vec::new()) };
    // The cable's lower end: the one whose step up dimension `d` reaches the other.
    let lower = if (a[d] + 1) % s.dims[d] == b[d] { a } else { b };
    let nd = s.ndims();
    let same_kind: Vec<usize> = (0..nd).filter(|&e| s.dims[e] == s.dims[d]).collect();
    let identity = CoordinateMap { axes: (0..nd).collect(), reflect: vec![false; nd], shift: vec![0; nd] };
    let mut to_origin = CoordinateMap { shift: (0..nd).map(|e| (s.dims[e] - lower[e]) % s.dims[e]).collect(), ..identity.clone() };
    to_origin.axes.swap(d, same_kind[0]);
    let home = same_kind[0];
    let mut maps = vec![to_origin.clone()];
    for &e in same_kind.iter().filter(|&&e| e != home) {
        let mut m = identity.clone();
        m.axes.swap(home, e);
        maps.push(then(&to_origin, &m, s));
    }
    let mut down_the_wrap = identity.clone();
    down_the_wrap.reflect[home] = true;
    down_the_wrap.shift[home] = 1 % s.dims[home];
    maps.push(then(&to_origin, &down_the_wrap, s));
    let half_way = CoordinateMap { shift: s.dims.iter().map(|&n| n / 2).collect(), ..identity };
    maps.push(then(&to_origin, &half_way, s));

    let healthy = t.with_every_link_up();
    let table = LinkTable::of(&healthy)?;
    let mut out: Vec<Frame> = Vec::new();
    for map in maps {
        let Some(nodes) = map.permutation(s) else { continue };
        let Ok(forth) = Automorphism::new(&healthy, &table, nodes.clone()) else { continue };
        let mut topology = healthy.clone();
        down.iter().for_each(|&l| topology.set_down(forth.link(l)));
        let mut inverse = vec![NodeId(0); nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            inverse[n.index()] = NodeId(i as u32);
        }
        let back = Automorphism::new(&healthy, &table, inverse)?;
        if topology.links().any(|(id, l)| l.up != t.link(back.link(id)).up) {
            return Err(Error::internal(format!("the frame {map:?} does not carry its failed links back onto the instance's")));
        }
        // Two maps may give one network (a cable's frames coincide on a ring of 2); the first is kept.
        if !out.iter().any(|f| f.topology.down_links() == topology.down_links()) {
            out.push(Frame { map, topology, back });
        }
    }
    Ok(out)
}

/// `first`, then `next`, as one coordinate map (through their node permutations).
fn then(first: &CoordinateMap, next: &CoordinateMap, s: &TorusShape) -> CoordinateMap {
    let (Some(f), Some(n)) = (first.permutation(s), next.permutation(s)) else { return first.clone() };
    let nodes: Vec<NodeId> = f.iter().map(|x| n[x.index()]).collect();
    CoordinateMap::of(s, &nodes).unwrap_or_else(|| first.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::CollectiveKind;
    use crate::topology::{torus, FaultPattern, TorusParams};

    fn faulty(dims: &[usize], cables: &[(&[usize], &[usize])]) -> Topology {
        let mut t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
        let s = t.torus_shape().unwrap().clone();
        let cables = cables.iter().map(|(a, b)| (s.node_at(a).unwrap(), s.node_at(b).unwrap())).collect();
        FaultPattern { cables, ..Default::default() }.apply(&mut t).unwrap();
        t
    }

    fn down_ends(t: &Topology) -> Vec<(Vec<usize>, Vec<usize>)> {
        let s = t.torus_shape().unwrap();
        let mut v: Vec<_> = t.down_links().into_iter().map(|l| (s.coord(t.link(l).src), s.coord(t.link(l).dst))).collect();
        v.sort();
        v
    }

    /// Every placement of one failed cable has the same canonical frame: the cable between the
    /// origin and the next npu along dimension 0; the other frames are distinct networks, each
    /// carried back onto the instance by a symmetry (checked when it is built).
    #[test]
    fn one_cable_anywhere_has_the_same_canonical_frame() {
        let origin = vec![(vec![0, 0, 0], vec![1, 0, 0]), (vec![1, 0, 0], vec![0, 0, 0])];
        for (a, b) in [([0, 0, 0], [1, 0, 0]), ([1, 2, 3], [1, 3, 3]), ([3, 0, 0], [0, 0, 0]), ([2, 1, 3], [2, 1, 0]), ([0, 3, 2], [0, 2, 2])] {
            let t = faulty(&[4, 4, 4], &[(&a, &b)]);
            let c = Collective::new(CollectiveKind::AllReduce, t.node_ids().filter(|&n| t.is_npu(n)).collect(), 1 << 20, 1, None, &t).unwrap();
            let f = frames(&t, &c).unwrap();
            assert_eq!(down_ends(&f[0].topology), origin, "{a:?}-{b:?}");
            assert_eq!(f[0].is_identity(), a == [0, 0, 0] && b == [1, 0, 0]);
            // Along y and z, down the wrap, half way round: five networks in all.
            assert_eq!(f.len(), 5);
            for (i, x) in f.iter().enumerate() {
                assert!(f[..i].iter().all(|y| y.topology.down_links() != x.topology.down_links()));
            }
        }
    }

    /// No frame where a symmetry cannot help or would not keep the ranks: a healthy torus, a
    /// mesh, a group of ranks.
    #[test]
    fn no_frames_without_a_fault_on_a_mesh_or_for_a_group() {
        let healthy = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        let all = |t: &Topology| Collective::new(CollectiveKind::AllReduce, t.node_ids().collect(), 1024, 1, None, t).unwrap();
        assert!(frames(&healthy, &all(&healthy)).unwrap().is_empty());
        let mut mesh = torus(&TorusParams { wrap: vec![false, false], ..TorusParams::uniform(&[4, 4], 32.0, 100.0) }).unwrap();
        FaultPattern { cables: vec![(NodeId(0), NodeId(1))], ..Default::default() }.apply(&mut mesh).unwrap();
        assert!(frames(&mesh, &all(&mesh)).unwrap().is_empty());
        let t = faulty(&[4, 4], &[(&[0, 0], &[1, 0])]);
        let group = Collective::new(CollectiveKind::AllReduce, (0..8).map(NodeId).collect(), 1024, 1, None, &t).unwrap();
        assert!(frames(&t, &group).unwrap().is_empty());
    }
}
