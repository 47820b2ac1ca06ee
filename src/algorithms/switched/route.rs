//! Routing the flows of a logical step through the switches: one transfer per flow, whose path
//! runs npu -> switches -> npu (or over the direct board link).
//!
//! - Single path: every pair takes its first shortest path (lowest-numbered next hop at every
//!   switch), as the reference study's tool does; flows of one step then pile onto the first spine
//!   and share links (rule 2 reports it).
//! - Balanced on a healthy fat tree: König edge colourings pick a spine (3 levels: an aggregation
//!   index and a core) for every flow so that no two flows of a sub-step meet on a link; a step
//!   whose demand is more than the tree carries at once (an npu sending twice, or more flows per
//!   leaf than uplinks) is split into sub-steps.
//! - Balanced elsewhere (custom topologies, fat trees with failed links): first fit, each flow
//!   on a shortest path over links still free in the earliest sub-step that has one.

use super::colour::colour_edges;
use super::plan::Flow;
use super::Routing;
use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::schedule::{Step, Transfer};
use crate::topology::{FatTreeShape, LinkId, NodeId, Topology};
use crate::units::to_f64;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::{HashMap, VecDeque};

const FAR: u32 = u32::MAX;

/// Sub-steps of one logical step, each a list of (flow index, path).
type SubSteps = Vec<Vec<(usize, Vec<LinkId>)>>;

/// Turns logical steps into schedule steps.
pub(super) struct Router<'a> {
    topology: &'a Topology,
    /// The collective (its pieces' sizes price the colourings).
    collective: &'a Collective,
    ranks: &'a [NodeId],
    routing: Routing,
    /// The fat-tree shape when the colouring router applies (a fat tree with no link down).
    fat_tree: Option<&'a FatTreeShape>,
    /// Hop distances to each destination over paths whose interior nodes are switches.
    distances: HashMap<NodeId, Vec<u32>>,
    /// Each pair's first shortest path.
    paths: HashMap<(NodeId, NodeId), Vec<LinkId>>,
}

impl<'a> Router<'a> {
    /// A router for the collective's ranks (in its order) on this topology.
    pub(super) fn new(topology: &'a Topology, collective: &'a Collective, routing: Routing) -> Self {
        let fat_tree = topology.fat_tree_shape().filter(|_| topology.down_links().is_empty());
        Router { topology, collective, ranks: &collective.ranks, routing, fat_tree, distances: HashMap::new(), paths: HashMap::new() }
    }

    /// Routes one logical step; balanced routing may return several sub-steps.
    pub(super) fn route(&mut self, flows: &[Flow]) -> Result<Vec<Step>> {
        if flows.is_empty() {
            return Ok(Vec::new());
        }
        let ends: Vec<(NodeId, NodeId)> = flows.iter().map(|f| (self.ranks[f.src], self.ranks[f.dst])).collect();
        let placed: SubSteps = match (self.routing, self.fat_tree) {
            (Routing::SinglePath, _) => vec![ends.iter().enumerate().map(|(i, &(a, b))| Ok((i, self.first_shortest_path(a, b)?))).collect::<Result<_>>()?],
            (Routing::Balanced, Some(shape)) => self.fastest_colouring(shape, flows, &ends)?,
            (Routing::Balanced, None) => self.first_fit(&ends)?,
        };
        Ok(placed
            .into_iter()
            .filter(|s| !s.is_empty())
            .map(|mut s| {
                // Transfers in flow order, so that the same input always gives the same file.
                s.sort_by_key(|(i, _)| *i);
                Step { transfers: s.into_iter().map(|(i, path)| Transfer { path, op: flows[i].op, pieces: flows[i].pieces.clone() }).collect() }
            })
            .collect())
    }

    /// The König colouring of all flows at once has the fewest sub-steps, but it ignores their
    /// sizes: a step whose flows carry 48 and 24 pieces may put a 48 in every sub-step (double
    /// binary tree all_reduce, 24 ranks of a 2-level k16 tree: 84.2 us healthy, 68.6 us with a
    /// leaf-spine cable down, where first fit happened to group them). So the flows are also
    /// coloured by size, largest first (each size its own sub-steps), and placed first fit,
    /// largest first; the sub-steps that take least time by the step-synchronous cost (busiest
    /// link's bytes plus the longest path's latency, per sub-step) are kept, the fewest sub-steps
    /// among equals.
    fn fastest_colouring(&mut self, shape: &FatTreeShape, flows: &[Flow], ends: &[(NodeId, NodeId)]) -> Result<SubSteps> {
        let t = self.topology;
        let all = coloured(t, shape, ends)?;
        let bytes: Vec<f64> = flows
            .iter()
            .map(|f| f.pieces.iter().map(|p| self.collective.piece_index(p).map_or(0.0, |i| to_f64(&self.collective.piece_size_at(i)))).sum())
            .collect();
        let mut sizes = bytes.clone();
        sizes.sort_unstable_by(|a, b| b.total_cmp(a));
        sizes.dedup();
        if sizes.len() <= 1 {
            return Ok(all);
        }
        let mut candidates = vec![all];
        let mut by_size: SubSteps = Vec::new();
        for &size in &sizes {
            let members: Vec<usize> = (0..flows.len()).filter(|&i| bytes[i] == size).collect();
            let sub_ends: Vec<(NodeId, NodeId)> = members.iter().map(|&i| ends[i]).collect();
            for sub in coloured(t, shape, &sub_ends)? {
                by_size.push(sub.into_iter().map(|(i, path)| (members[i], path)).collect());
            }
        }
        candidates.push(by_size);
        let mut order: Vec<usize> = (0..flows.len()).collect();
        order.sort_by(|&a, &b| bytes[b].total_cmp(&bytes[a]));
        let sorted_ends: Vec<(NodeId, NodeId)> = order.iter().map(|&i| ends[i]).collect();
        let fit = self.first_fit(&sorted_ends)?;
        candidates.push(fit.into_iter().map(|sub| sub.into_iter().map(|(i, path)| (order[i], path)).collect()).collect());
        let time = |placed: &SubSteps| -> f64 { placed.iter().map(|sub| sub_step_ns(t, sub, &bytes)).sum() };
        let times: Vec<f64> = candidates.iter().map(time).collect();
        let best =
            (0..candidates.len()).min_by(|&a, &b| times[a].total_cmp(&times[b]).then(candidates[a].len().cmp(&candidates[b].len()))).expect("three candidates");
        Ok(candidates.swap_remove(best))
    }

    /// Hop distances from every node to `to` over up links, through switches only.
    fn distances_to(&mut self, to: NodeId) -> &[u32] {
        let t = self.topology;
        self.distances.entry(to).or_insert_with(|| {
            let mut dist = vec![FAR; t.num_nodes()];
            dist[to.index()] = 0;
            let mut queue = VecDeque::from([to]);
            while let Some(x) = queue.pop_front() {
                for e in t.graph().edges_directed(NodeIndex::new(x.index()), Direction::Incoming) {
                    let y = NodeId(e.source().index() as u32);
                    if e.weight().up && dist[y.index()] == FAR {
                        dist[y.index()] = dist[x.index()] + 1;
                        // An npu may start a path but not relay one within a step.
                        if !t.is_npu(y) {
                            queue.push_back(y);
                        }
                    }
                }
            }
            dist
        })
    }

    /// The first shortest path from `a` to `b`: at every node, the lowest-numbered next hop that
    /// gets closer (lowest link id among parallel links).
    fn first_shortest_path(&mut self, a: NodeId, b: NodeId) -> Result<Vec<LinkId>> {
        if let Some(p) = self.paths.get(&(a, b)) {
            return Ok(p.clone());
        }
        let t = self.topology;
        let dist = self.distances_to(b).to_vec();
        if dist[a.index()] == FAR {
            return Err(unrouted(t, a, b));
        }
        let mut path = Vec::new();
        let mut x = a;
        while x != b {
            let (_, l) = t
                .up_out_links(x)
                .map(|l| (t.link(l).dst, l))
                .filter(|&(y, _)| dist[y.index()] != FAR && dist[y.index()] + 1 == dist[x.index()] && (y == b || !t.is_npu(y)))
                .min()
                .expect("a node on a shortest path has a next hop");
            path.push(l);
            x = t.link(l).dst;
        }
        self.paths.insert((a, b), path.clone());
        Ok(path)
    }

    /// Balanced routing without a fat-tree structure to exploit: each flow goes on a shortest
    /// path over links not yet used, in the earliest sub-step that still has one.
    fn first_fit(&mut self, ends: &[(NodeId, NodeId)]) -> Result<SubSteps> {
        let t = self.topology;
        let mut used: Vec<Vec<bool>> = Vec::new();
        let mut out: SubSteps = Vec::new();
        for (i, &(a, b)) in ends.iter().enumerate() {
            let shortest = self.first_shortest_path(a, b)?;
            let fit = used.iter().position(|u| free_path(t, a, b, u).is_some_and(|p| p.len() == shortest.len()));
            let (slot, path) = match fit {
                Some(s) => (s, free_path(t, a, b, &used[s]).expect("found above")),
                None => {
                    used.push(vec![false; t.num_links()]);
                    out.push(Vec::new());
                    (used.len() - 1, shortest)
                }
            };
            for l in &path {
                used[slot][l.index()] = true;
            }
            out[slot].push((i, path));
        }
        Ok(out)
    }
}

/// The step-synchronous time of one contention-free sub-step (docs/design/MODEL.md section 5): its
/// busiest link's bytes over its bandwidth plus its longest path's latency (switches included).
fn sub_step_ns(t: &Topology, sub: &[(usize, Vec<LinkId>)], bytes: &[f64]) -> f64 {
    let (mut transfer, mut latency) = (0.0f64, 0.0f64);
    for (i, path) in sub {
        for &l in path {
            transfer = transfer.max(bytes[*i] / t.link(l).bandwidth_gbps);
        }
        latency = latency.max(t.path_latency_ns(path));
    }
    transfer + latency
}

/// Why the switched algorithms find no route from `a` to `b`: they go over a direct link or
/// through switches, never through other npus. Bad input (exit 2) when the topology itself has
/// no such route (its npus are joined only through other npus, as a ring or a mesh of several
/// dimensions is); infeasible (exit 3) when the failed links cut the routes it has.
pub(crate) fn unrouted(t: &Topology, a: NodeId, b: NodeId) -> Error {
    let pair = format!("npu {a} ({}) to npu {b} ({})", t.node(a).name, t.node(b).name);
    let mut seen = vec![false; t.num_nodes()];
    seen[a.index()] = true;
    let mut queue = VecDeque::from([a]);
    while let Some(x) = queue.pop_front() {
        if x == b {
            return Error::infeasible(format!(
                "no path from {pair} over a direct link or through switches whose links are up: the failed links cut it (the switched algorithms never relay through other npus)"
            ));
        }
        if x != a && t.is_npu(x) {
            continue;
        }
        for l in t.out_links(x) {
            let y = t.link(l).dst;
            if !seen[y.index()] {
                seen[y.index()] = true;
                queue.push_back(y);
            }
        }
    }
    Error::bad(format!(
        "no path from {pair} over a direct link or through switches: the switched algorithms route only over those, never through other npus, and this topology joins these two only through other npus"
    ))
}

/// A shortest path from `a` to `b` whose interior nodes are switches, over up links that `used`
/// leaves free (lowest-numbered next hop first).
pub(crate) fn free_path(t: &Topology, a: NodeId, b: NodeId, used: &[bool]) -> Option<Vec<LinkId>> {
    let mut via: Vec<Option<LinkId>> = vec![None; t.num_nodes()];
    let mut seen = vec![false; t.num_nodes()];
    seen[a.index()] = true;
    let mut queue = VecDeque::from([a]);
    while let Some(x) = queue.pop_front() {
        if x == b {
            let mut path = Vec::new();
            let mut y = b;
            while let Some(l) = via[y.index()] {
                path.push(l);
                y = t.link(l).src;
            }
            path.reverse();
            return Some(path);
        }
        if x != a && t.is_npu(x) {
            continue;
        }
        let mut next: Vec<(NodeId, LinkId)> = t.up_out_links(x).filter(|l| !used[l.index()]).map(|l| (t.link(l).dst, l)).collect();
        next.sort();
        for (y, l) in next {
            if !seen[y.index()] {
                seen[y.index()] = true;
                via[y.index()] = Some(l);
                queue.push_back(y);
            }
        }
    }
    None
}

fn link(t: &Topology, a: NodeId, b: NodeId) -> Result<LinkId> {
    t.link_between(a, b).ok_or_else(|| Error::bad(format!("the fat tree has no link from node {a} to node {b}")))
}

/// Balanced routing on a healthy fat tree. Returns sub-steps of (flow index, path).
///
/// Board flows take their direct link, which no other flow uses. The rest are first coloured by
/// npu (each npu sends and receives at most one switched flow per class, so the npu-leaf links
/// are never shared); within a class the leaf-to-leaf flows are coloured by leaf: colour c runs
/// in sub-step c / u over uplink c % u, and with u colours per sub-step no uplink or downlink is
/// shared. On 3 levels an inter-pod flow of uplink j crosses aggregation switch j of both pods;
/// one more colouring, pod to pod per j, gives it one of the u cores of j. Each pod has u ToRs
/// with at most one flow of each uplink, so that colouring needs at most u colours.
fn coloured(t: &Topology, shape: &FatTreeShape, ends: &[(NodeId, NodeId)]) -> Result<SubSteps> {
    let u = shape.up;
    let leaf = |n: NodeId| shape.leaf(shape.leaf_of(n));
    let same_board = |a: NodeId, b: NodeId| shape.board.is_some() && shape.board_of(a) == shape.board_of(b);
    let mut out: SubSteps = Vec::new();
    // Board flows: the k-th flow on one board link goes to sub-step k (several only when a step
    // has a copy and a reduce between the same two npus).
    let mut board_count: HashMap<(NodeId, NodeId), usize> = HashMap::new();
    let mut board_flows = Vec::new();
    let mut switched = Vec::new();
    for (i, &(a, b)) in ends.iter().enumerate() {
        if same_board(a, b) {
            let k = board_count.entry((a, b)).or_insert(0);
            board_flows.push((*k, i, vec![link(t, a, b)?]));
            *k += 1;
        } else {
            switched.push(i);
        }
    }
    let npu_edges: Vec<(usize, usize)> = switched.iter().map(|&i| (ends[i].0.index(), ends[i].1.index())).collect();
    let (npu_colour, npu_classes) = colour_edges(shape.npus, shape.npus, &npu_edges);
    for class in 0..npu_classes {
        let members: Vec<usize> = switched.iter().zip(&npu_colour).filter(|(_, &c)| c == class).map(|(&i, _)| i).collect();
        let first = out.len();
        out.push(Vec::new());
        let mut cross = Vec::new();
        for &i in &members {
            let (a, b) = ends[i];
            if shape.leaf_of(a) == shape.leaf_of(b) {
                out[first].push((i, vec![link(t, a, leaf(a))?, link(t, leaf(a), b)?]));
            } else {
                cross.push(i);
            }
        }
        let leaf_edges: Vec<(usize, usize)> = cross.iter().map(|&i| (shape.leaf_of(ends[i].0), shape.leaf_of(ends[i].1))).collect();
        let (leaf_colour, leaf_colours) = colour_edges(shape.leaves, shape.leaves, &leaf_edges);
        let groups = leaf_colours.div_ceil(u).max(1);
        while out.len() < first + groups {
            out.push(Vec::new());
        }
        // Core choice on 3 levels: per (sub-step, uplink j), colour the inter-pod flows by pod.
        let mut core_of: HashMap<usize, usize> = HashMap::new();
        if shape.levels == 3 {
            for c in 0..leaf_colours {
                let of_c: Vec<usize> = (0..cross.len()).filter(|&x| leaf_colour[x] == c).collect();
                let inter: Vec<usize> = of_c.into_iter().filter(|&x| shape.pod_of_leaf(leaf_edges[x].0) != shape.pod_of_leaf(leaf_edges[x].1)).collect();
                let pods = shape.leaves / u;
                let pod_edges: Vec<(usize, usize)> = inter.iter().map(|&x| (shape.pod_of_leaf(leaf_edges[x].0), shape.pod_of_leaf(leaf_edges[x].1))).collect();
                let (pod_colour, pod_colours) = colour_edges(pods, pods, &pod_edges);
                assert!(pod_colours <= u, "a pod has at most {u} flows of one uplink");
                for (x, c3) in inter.into_iter().zip(pod_colour) {
                    core_of.insert(x, c3);
                }
            }
        }
        for (x, &i) in cross.iter().enumerate() {
            let (a, b) = ends[i];
            let (la, lb) = (shape.leaf_of(a), shape.leaf_of(b));
            let (group, j) = (leaf_colour[x] / u, leaf_colour[x] % u);
            let mut path = vec![link(t, a, leaf(a))?];
            if shape.levels == 2 {
                let spine = shape.middle_switch(j);
                path.extend([link(t, leaf(a), spine)?, link(t, spine, leaf(b))?]);
            } else {
                let (pa, pb) = (shape.pod_of_leaf(la), shape.pod_of_leaf(lb));
                let agg_a = shape.middle_switch(pa * u + j);
                let agg_b = shape.middle_switch(pb * u + j);
                path.push(link(t, leaf(a), agg_a)?);
                if pa != pb {
                    let core = shape.core(j * u + core_of[&x]);
                    path.extend([link(t, agg_a, core)?, link(t, core, agg_b)?]);
                }
                path.push(link(t, agg_b, leaf(b))?);
            }
            path.push(link(t, leaf(b), b)?);
            out[first + group].push((i, path));
        }
    }
    for (k, i, path) in board_flows {
        while out.len() <= k {
            out.push(Vec::new());
        }
        out[k].push((i, path));
    }
    Ok(out)
}
