//! The links that are up, gathered by the node they leave into two flat arrays: the form that
//! scans from every node walk (a bound at 8,000 npus runs 8,000 of them), where following the
//! graph's per-edge lists costs a cache miss per link.

use super::{LinkId, NodeId, Topology};

/// The up links of a [`Topology`] by source node, in compressed rows: node `n`'s links are
/// `link[start[n]..start[n + 1]]` and the nodes they enter `head[..]` at the same positions.
#[derive(Clone, Debug)]
pub struct UpAdjacency {
    start: Vec<u32>,
    head: Vec<u32>,
    link: Vec<LinkId>,
}

impl UpAdjacency {
    /// The up links of `t`.
    pub fn new(t: &Topology) -> Self {
        let mut start = Vec::with_capacity(t.num_nodes() + 1);
        let (mut head, mut link) = (Vec::new(), Vec::new());
        start.push(0);
        for n in t.node_ids() {
            for l in t.up_out_links(n) {
                head.push(t.link(l).dst.0);
                link.push(l);
            }
            start.push(head.len() as u32);
        }
        UpAdjacency { start, head, link }
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.start.len() - 1
    }

    /// The nodes that `n`'s up links enter.
    pub fn heads(&self, n: usize) -> &[u32] {
        &self.head[self.start[n] as usize..self.start[n + 1] as usize]
    }

    /// `n`'s up links, each with the node it enters.
    pub fn out(&self, n: usize) -> impl Iterator<Item = (LinkId, usize)> + '_ {
        let range = self.start[n] as usize..self.start[n + 1] as usize;
        self.link[range.clone()].iter().copied().zip(self.head[range].iter().map(|&h| h as usize))
    }

    /// Fewest links from `from` to every node over links that are up (`None` where unreachable).
    pub fn hop_distances(&self, from: NodeId) -> Vec<Option<u32>> {
        let mut dist = vec![None; self.num_nodes()];
        dist[from.index()] = Some(0);
        let mut queue = vec![from.0];
        let mut next = 0;
        while let Some(&n) = queue.get(next) {
            next += 1;
            let d = dist[n as usize].map_or(0, |d| d + 1);
            for &y in self.heads(n as usize) {
                if dist[y as usize].is_none() {
                    dist[y as usize] = Some(d);
                    queue.push(y);
                }
            }
        }
        dist
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{fat_tree, torus, FatTreeParams, TorusParams};

    /// The oracle: every up link relaxed until nothing changes (Bellman-Ford over the graph).
    fn relaxed(t: &Topology, from: NodeId) -> Vec<Option<u32>> {
        let mut dist = vec![None; t.num_nodes()];
        dist[from.index()] = Some(0u32);
        let mut changed = true;
        while changed {
            changed = false;
            for (_, l) in t.links().filter(|(_, l)| l.up) {
                if let Some(d) = dist[l.src.index()] {
                    if dist[l.dst.index()].is_none_or(|x| d + 1 < x) {
                        dist[l.dst.index()] = Some(d + 1);
                        changed = true;
                    }
                }
            }
        }
        dist
    }

    #[test]
    fn distances_agree_with_the_graph() {
        // A torus with a failed cable and one more failed link; a fat tree with a failed link.
        let mut t = torus(&TorusParams::uniform(&[4, 3, 5], 32.0, 100.0)).unwrap();
        for (a, b) in [(0, 1), (1, 0)] {
            t.set_down(t.link_between(NodeId(a), NodeId(b)).unwrap());
        }
        let l = t.out_links(NodeId(7)).next().unwrap();
        t.set_down(l);
        let params = FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 8, board: None, bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 };
        let mut f = fat_tree(&params).unwrap();
        let l = f.out_links(NodeId(0)).next().unwrap();
        f.set_down(l);
        for t in [t, f] {
            let adj = UpAdjacency::new(&t);
            for n in t.node_ids() {
                assert_eq!(adj.hop_distances(n), relaxed(&t, n), "from {n:?}");
                let mut out: Vec<_> = adj.out(n.index()).collect();
                let mut want: Vec<_> = t.up_out_links(n).map(|l| (l, t.link(l).dst.index())).collect();
                out.sort();
                want.sort();
                assert_eq!(out, want);
            }
        }
    }
}
