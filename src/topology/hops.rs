//! Single hops (docs/design/MODEL.md section 3): the edges of a store-and-forward schedule.
//!
//! A hop goes from an npu to another npu over links that are up, through switches only (and,
//! for a group, through npus outside it: [`HopGraph::with_endpoints`]): one link on a torus,
//! `npu -> leaf -> (spine -> leaf ->) npu` on a fat tree. Between two npus we keep
//! every direct link and every *shortest* switch path: a longer switch path holds more links for
//! the same move, so the synthesizer's optimum is over shortest switch paths (the steps bound of
//! `bounds` measures hops the same way, so the two agree).

use crate::topology::{LinkId, NodeId, Topology};
use std::collections::VecDeque;

/// Paths kept per pair of npus at most, so that wide fat trees do not explode the hop list.
const MAX_PATHS_PER_PAIR: usize = 64;

/// One single hop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The sending npu.
    pub from: NodeId,
    /// The receiving npu.
    pub to: NodeId,
    /// The links, in order.
    pub path: Vec<LinkId>,
}

/// Every hop of a topology, with adjacency by npu and by link.
#[derive(Clone, Debug)]
pub struct HopGraph {
    /// The hops.
    pub hops: Vec<Hop>,
    /// Hops leaving each npu (indexed by npu id).
    pub out: Vec<Vec<usize>>,
    /// Hops entering each npu.
    pub into: Vec<Vec<usize>>,
    /// Hops using each link (indexed by link id).
    pub on_link: Vec<Vec<usize>>,
}

impl HopGraph {
    /// Enumerates the hops over links that are up.
    pub fn new(t: &Topology) -> Self {
        Self::with_endpoints(t, &vec![true; t.num_npus()])
    }

    /// The hops between the npus marked in `endpoint` (indexed by npu id), the others passing
    /// paths through their routers like switches, never storing (docs/design/MODEL.md section 1). A
    /// collective over a group uses this: an npu outside the group has no program in the
    /// runtime, so it can route a path but cannot store and forward a piece (rule 6 lowers only
    /// the ranks).
    pub fn with_endpoints(t: &Topology, endpoint: &[bool]) -> Self {
        let n = t.num_npus();
        let mut hops = Vec::new();
        for u in (0..n as u32).map(NodeId).filter(|u| endpoint[u.index()]) {
            for l in t.up_out_links(u) {
                let v = t.link(l).dst;
                if t.is_npu(v) && endpoint[v.index()] {
                    hops.push(Hop { from: u, to: v, path: vec![l] });
                }
            }
            hops.extend(switch_paths(t, endpoint, u));
        }
        let mut g = HopGraph { hops: Vec::new(), out: vec![Vec::new(); n], into: vec![Vec::new(); n], on_link: vec![Vec::new(); t.num_links()] };
        for (i, h) in hops.iter().enumerate() {
            g.out[h.from.index()].push(i);
            g.into[h.to.index()].push(i);
            for l in &h.path {
                g.on_link[l.index()].push(i);
            }
        }
        g.hops = hops;
        g
    }

    /// Whether every single hop between the marked npus is one link: no up link leaves one of
    /// them for a switch or an unmarked npu, so no hop passes through anything (then the hops,
    /// shortest or not, are all the single-hop transfers there are).
    pub fn only_direct(t: &Topology, endpoint: &[bool]) -> bool {
        (0..t.num_npus() as u32).map(NodeId).filter(|u| endpoint[u.index()]).all(|u| {
            t.up_out_links(u).all(|l| {
                let v = t.link(l).dst;
                t.is_npu(v) && endpoint[v.index()]
            })
        })
    }

    /// The same hops with their ends swapped, each keeping its path (its links still run from the
    /// original sender to the original receiver): a schedule over the transposed hops, run
    /// backwards in time, is one over the original hops. A reduce_scatter is the time reversal
    /// of an all_gather over these (`steps::gather`).
    pub fn transposed(&self) -> HopGraph {
        let hops = self.hops.iter().map(|h| Hop { from: h.to, to: h.from, path: h.path.clone() }).collect();
        HopGraph { hops, out: self.into.clone(), into: self.out.clone(), on_link: self.on_link.clone() }
    }

    /// Hop distances from `from` to every npu (forward), or to `from` from every npu (`reverse`).
    pub fn distances(&self, from: NodeId, reverse: bool) -> Vec<Option<u32>> {
        let mut dist = vec![None; self.out.len()];
        dist[from.index()] = Some(0);
        let mut queue = VecDeque::from([from]);
        while let Some(x) = queue.pop_front() {
            let d = dist[x.index()].unwrap_or(0);
            let edges = if reverse { &self.into[x.index()] } else { &self.out[x.index()] };
            for &h in edges {
                let y = if reverse { self.hops[h].from } else { self.hops[h].to };
                if dist[y.index()].is_none() {
                    dist[y.index()] = Some(d + 1);
                    queue.push_back(y);
                }
            }
        }
        dist
    }
}

/// The shortest paths from npu `u` through pass-through nodes (switches, and npus that are no
/// endpoint) to every other endpoint that has one, at most [`MAX_PATHS_PER_PAIR`] per endpoint.
pub(crate) fn switch_paths(t: &Topology, endpoint: &[bool], u: NodeId) -> Vec<Hop> {
    let is_end = |x: NodeId| t.is_npu(x) && endpoint[x.index()];
    // BFS over pass-through nodes; `parents[x]` are the links into x on shortest such paths.
    let mut dist: Vec<Option<u32>> = vec![None; t.num_nodes()];
    let mut parents: Vec<Vec<LinkId>> = vec![Vec::new(); t.num_nodes()];
    let mut queue = VecDeque::new();
    let mut order = Vec::new();
    for l in t.up_out_links(u) {
        let s = t.link(l).dst;
        if is_end(s) {
            continue;
        }
        if dist[s.index()].is_none() {
            dist[s.index()] = Some(1);
            queue.push_back(s);
        }
        if dist[s.index()] == Some(1) {
            parents[s.index()].push(l);
        }
    }
    while let Some(x) = queue.pop_front() {
        order.push(x);
        let d = dist[x.index()].unwrap_or(0);
        for l in t.up_out_links(x) {
            let y = t.link(l).dst;
            if is_end(y) {
                continue;
            }
            if dist[y.index()].is_none() {
                dist[y.index()] = Some(d + 1);
                queue.push_back(y);
            }
            if dist[y.index()] == Some(d + 1) {
                parents[y.index()].push(l);
            }
        }
    }
    // The last link of a hop: from a switch into an npu other than u, at the least length.
    let mut best: Vec<(u32, Vec<LinkId>)> = vec![(u32::MAX, Vec::new()); t.num_npus()];
    for &x in &order {
        let d = dist[x.index()].unwrap_or(0) + 1;
        for l in t.up_out_links(x) {
            let v = t.link(l).dst;
            if !is_end(v) || v == u {
                continue;
            }
            let b = &mut best[v.index()];
            if d < b.0 {
                *b = (d, vec![l]);
            } else if d == b.0 {
                b.1.push(l);
            }
        }
    }
    let mut hops = Vec::new();
    for (v, (_, lasts)) in best.into_iter().enumerate() {
        let mut paths = Vec::new();
        for last in lasts {
            let mut suffix = vec![last];
            extend_back(t, &parents, u, t.link(last).src, &mut suffix, &mut paths);
        }
        hops.extend(paths.into_iter().map(|path| Hop { from: u, to: NodeId(v as u32), path }));
    }
    hops
}

/// Completes the reversed suffix `rev` (which starts at pass-through node `x`) back to the
/// source npu `u`.
fn extend_back(t: &Topology, parents: &[Vec<LinkId>], u: NodeId, x: NodeId, rev: &mut Vec<LinkId>, out: &mut Vec<Vec<LinkId>>) {
    if out.len() >= MAX_PATHS_PER_PAIR {
        return;
    }
    for &l in &parents[x.index()] {
        rev.push(l);
        let s = t.link(l).src;
        if s == u {
            out.push(rev.iter().rev().copied().collect());
        } else {
            extend_back(t, parents, u, s, rev, out);
        }
        rev.pop();
    }
}
