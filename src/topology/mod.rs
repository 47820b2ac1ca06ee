//! Networks: nodes (npus and switches), directed links, and the families the project builds.
//!
//! docs/design/MODEL.md section 1. In every family the npus come first (ids `0..n`), then the switches; links
//! are directed and a bidirectional cable is two links. A [`Topology`] is stored as a
//! [`petgraph`] directed graph whose node and edge indices are exactly the [`NodeId`]s and
//! [`LinkId`]s of the schedule file, so graph algorithms and the file agree on every id.

mod adjacency;
pub mod astra;
pub(crate) mod custom;
mod fat_tree;
mod faults;
pub(crate) mod hops;
pub mod symmetry;
mod torus;

pub use adjacency::UpAdjacency;
pub use custom::{custom, CustomLink, CustomNode};
pub use fat_tree::{fat_tree, FatTreeParams, FatTreeShape};
pub use faults::{tpuv4_ocs_cables, FaultPattern, Ocs};
pub use torus::{torus, TorusParams, TorusShape};

use crate::error::{Error, Result};
use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::VecDeque;
use std::fmt;

/// The id of a node (dense, `0..num_nodes`; npus first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

/// The id of a directed link (dense, `0..num_links`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct LinkId(pub u32);

impl NodeId {
    /// The id as an index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl LinkId {
    /// The id as an index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// An endpoint that holds data, can store and forward pieces, and whose router can pass a
    /// path through within a step.
    Npu,
    /// Passes paths through; never stores data.
    Switch,
}

impl NodeKind {
    /// The name used in files (`npu`, `switch`).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Npu => "npu",
            NodeKind::Switch => "switch",
        }
    }
}

/// A node of the network.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Npu or switch.
    pub kind: NodeKind,
    /// A readable name (a torus coordinate such as `(1,0,2)`, `leaf3`, ...).
    pub name: String,
}

/// Where a link sits in its family; used for per-dimension and per-tier statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkClass {
    /// A torus link along `dim`, towards increasing (`positive`) or decreasing coordinates.
    TorusDim {
        /// The dimension.
        dim: u8,
        /// Towards coordinate + 1 (with wrap) when true.
        positive: bool,
    },
    /// A direct npu-to-npu link inside a board of a fat tree.
    Board,
    /// A fat-tree link between tier `tier` and `tier + 1` (0: npu-leaf, 1: leaf-spine or
    /// ToR-aggregation, 2: aggregation-core), going up or down.
    Tier {
        /// The lower tier of the two ends.
        tier: u8,
        /// Towards the upper tier when true.
        up: bool,
    },
    /// A link of a custom topology.
    Custom,
}

impl LinkClass {
    /// A short label for grouping statistics (`dim0`, `board`, `tier1`, `custom`).
    pub fn group_label(self) -> String {
        match self {
            LinkClass::TorusDim { dim, .. } => format!("dim{dim}"),
            LinkClass::Board => "board".into(),
            LinkClass::Tier { tier, .. } => format!("tier{tier}"),
            LinkClass::Custom => "custom".into(),
        }
    }
}

/// A directed link.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// Where it starts.
    pub src: NodeId,
    /// Where it ends.
    pub dst: NodeId,
    /// Bandwidth in GB/s (10^9 bytes per second), i.e. bytes per nanosecond.
    pub bandwidth_gbps: f64,
    /// Latency in nanoseconds.
    pub latency_ns: f64,
    /// False when the link has failed.
    pub up: bool,
    /// Its place in the family.
    pub class: LinkClass,
}

/// The family a topology was built from, with the parameters that algorithms need.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// A torus or mesh.
    Torus(TorusShape),
    /// A fat tree.
    FatTree(FatTreeShape),
    /// Explicit lists.
    Custom,
}

/// A network: nodes, directed links, switch latency, and the family's shape.
#[derive(Clone, Debug)]
pub struct Topology {
    graph: DiGraph<Node, Link, u32>,
    switch_latency_ns: f64,
    shape: Shape,
    npus: usize,
}

/// Collects nodes and links in id order; npus must come before switches.
#[derive(Clone, Debug, Default)]
pub struct TopologyBuilder {
    graph: DiGraph<Node, Link, u32>,
}

impl TopologyBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node and returns its id.
    pub fn node(&mut self, kind: NodeKind, name: impl Into<String>) -> NodeId {
        NodeId(self.graph.add_node(Node { kind, name: name.into() }).index() as u32)
    }

    /// Adds a directed link and returns its id.
    pub fn link(&mut self, src: NodeId, dst: NodeId, bandwidth_gbps: f64, latency_ns: f64, class: LinkClass) -> LinkId {
        let link = Link { src, dst, bandwidth_gbps, latency_ns, up: true, class };
        LinkId(self.graph.add_edge(NodeIndex::new(src.index()), NodeIndex::new(dst.index()), link).index() as u32)
    }

    /// Adds both directions of a cable, `a -> b` first.
    pub fn cable(&mut self, a: NodeId, b: NodeId, bandwidth_gbps: f64, latency_ns: f64, class_ab: LinkClass, class_ba: LinkClass) {
        self.link(a, b, bandwidth_gbps, latency_ns, class_ab);
        self.link(b, a, bandwidth_gbps, latency_ns, class_ba);
    }

    /// Finishes the topology; checks that npus come first and that every value is sane.
    pub fn build(self, shape: Shape, switch_latency_ns: f64) -> Result<Topology> {
        let graph = self.graph;
        let npus = graph.node_weights().take_while(|n| n.kind == NodeKind::Npu).count();
        if let Some(late) = graph.node_indices().skip(npus).find(|&i| graph[i].kind == NodeKind::Npu) {
            return Err(Error::bad(format!("node {} ({}) is an npu listed after a switch: npus must come first (ids 0..n-1)", late.index(), graph[late].name)));
        }
        if npus == 0 {
            return Err(Error::bad("the topology has no npu"));
        }
        // The one check of every bandwidth and latency, whatever the topology came from (spec,
        // flags, schedule file, ASTRA-sim network file): in range and exact (crate::units).
        crate::units::checked_latency(switch_latency_ns).map_err(|why| Error::bad(format!("switch_latency_ns = {why}")))?;
        for e in graph.edge_indices() {
            let l = &graph[e];
            crate::units::checked_bandwidth(l.bandwidth_gbps).map_err(|why| Error::bad(format!("link {}: bandwidth_gbps = {why}", e.index())))?;
            crate::units::checked_latency(l.latency_ns).map_err(|why| Error::bad(format!("link {}: latency_ns = {why}", e.index())))?;
            if l.src == l.dst {
                return Err(Error::bad(format!("link {}: a link from node {} to itself", e.index(), l.src)));
            }
        }
        Ok(Topology { graph, switch_latency_ns, shape, npus })
    }
}

impl Topology {
    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.graph.node_count()
    }

    /// Number of directed links (up and down).
    pub fn num_links(&self) -> usize {
        self.graph.edge_count()
    }

    /// Number of npus; they are nodes `0..num_npus()`.
    pub fn num_npus(&self) -> usize {
        self.npus
    }

    /// Number of switches.
    pub fn num_switches(&self) -> usize {
        self.num_nodes() - self.npus
    }

    /// The node with this id. Panics on an id out of range (check with [`Self::num_nodes`]).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.graph[NodeIndex::new(id.index())]
    }

    /// The link with this id. Panics on an id out of range (check with [`Self::num_links`]).
    pub fn link(&self, id: LinkId) -> &Link {
        &self.graph[EdgeIndex::new(id.index())]
    }

    /// Whether the node is an npu.
    pub fn is_npu(&self, id: NodeId) -> bool {
        id.index() < self.npus
    }

    /// All node ids in order.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.num_nodes() as u32).map(NodeId)
    }

    /// All link ids in order.
    pub fn link_ids(&self) -> impl Iterator<Item = LinkId> + '_ {
        (0..self.num_links() as u32).map(LinkId)
    }

    /// All links with their ids.
    pub fn links(&self) -> impl Iterator<Item = (LinkId, &Link)> + '_ {
        self.graph.edge_indices().map(move |e| (LinkId(e.index() as u32), &self.graph[e]))
    }

    /// The links leaving a node (up and down), in no particular order.
    pub fn out_links(&self, node: NodeId) -> impl Iterator<Item = LinkId> + '_ {
        self.graph.edges_directed(NodeIndex::new(node.index()), Direction::Outgoing).map(|e| LinkId(e.id().index() as u32))
    }

    /// The links entering a node (up and down), in no particular order.
    pub fn in_links(&self, node: NodeId) -> impl Iterator<Item = LinkId> + '_ {
        self.graph.edges_directed(NodeIndex::new(node.index()), Direction::Incoming).map(|e| LinkId(e.id().index() as u32))
    }

    /// The links leaving a node that are up.
    pub fn up_out_links(&self, node: NodeId) -> impl Iterator<Item = LinkId> + '_ {
        self.out_links(node).filter(move |&l| self.link(l).up)
    }

    /// The link with the lowest id from `src` to `dst`, up or down.
    pub fn link_between(&self, src: NodeId, dst: NodeId) -> Option<LinkId> {
        self.graph.edges_connecting(NodeIndex::new(src.index()), NodeIndex::new(dst.index())).map(|e| LinkId(e.id().index() as u32)).min()
    }

    /// Seconds-free latency of a path: the links' latencies plus the switch latency for every
    /// switch the path passes through (docs/design/MODEL.md section 5).
    pub fn path_latency_ns(&self, path: &[LinkId]) -> f64 {
        let links: f64 = path.iter().map(|&l| self.link(l).latency_ns).sum();
        let switches = path.iter().skip(1).filter(|&&l| !self.is_npu(self.link(l).src)).count();
        links + self.switch_latency_ns * switches as f64
    }

    /// The forwarding latency a switch adds to every path through it, in ns.
    pub fn switch_latency_ns(&self) -> f64 {
        self.switch_latency_ns
    }

    /// The family and its parameters.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The torus shape, when this is a torus.
    pub fn torus_shape(&self) -> Option<&TorusShape> {
        match &self.shape {
            Shape::Torus(t) => Some(t),
            _ => None,
        }
    }

    /// The fat-tree shape, when this is a fat tree.
    pub fn fat_tree_shape(&self) -> Option<&FatTreeShape> {
        match &self.shape {
            Shape::FatTree(t) => Some(t),
            _ => None,
        }
    }

    /// The underlying graph (node index = node id, edge index = link id).
    pub fn graph(&self) -> &DiGraph<Node, Link, u32> {
        &self.graph
    }

    /// Marks a link as failed.
    pub fn set_down(&mut self, link: LinkId) {
        self.graph[EdgeIndex::new(link.index())].up = false;
    }

    /// The same network with every link up (the faults taken away).
    pub fn with_every_link_up(&self) -> Topology {
        let mut t = self.clone();
        t.graph.edge_weights_mut().for_each(|l| l.up = true);
        t
    }

    /// Ids of links that are down.
    pub fn down_links(&self) -> Vec<LinkId> {
        self.links().filter(|(_, l)| !l.up).map(|(id, _)| id).collect()
    }

    /// A readable description of a link: `link 12: (1,0,0)->(2,0,0)`.
    pub fn describe_link(&self, id: LinkId) -> String {
        if id.index() >= self.num_links() {
            return format!("link {id} (no such link)");
        }
        let l = self.link(id);
        format!("link {id}: {}->{}", self.node(l.src).name, self.node(l.dst).name)
    }

    /// Which nodes can be reached from `from` over links that are up (forward) or, with
    /// `reverse`, which nodes can reach `from`. Paths may pass through npus and switches.
    pub fn reachable(&self, from: NodeId, reverse: bool) -> Vec<bool> {
        let mut seen = vec![false; self.num_nodes()];
        let mut queue = VecDeque::from([from]);
        seen[from.index()] = true;
        let dir = if reverse { Direction::Incoming } else { Direction::Outgoing };
        while let Some(n) = queue.pop_front() {
            for e in self.graph.edges_directed(NodeIndex::new(n.index()), dir) {
                if !e.weight().up {
                    continue;
                }
                let next = if reverse { e.source() } else { e.target() };
                if !seen[next.index()] {
                    seen[next.index()] = true;
                    queue.push_back(NodeId(next.index() as u32));
                }
            }
        }
        seen
    }

    /// Checks that every rank can reach every other over links that are up; otherwise names a
    /// rank that the faults cut off (exit 3 on the command line).
    pub fn check_connected(&self, ranks: &[NodeId]) -> Result<()> {
        if ranks.len() < 2 {
            return Ok(());
        }
        // A rank whose every link is down (a failed node) first: it is the one to leave out.
        for (idx, &r) in ranks.iter().enumerate() {
            if !self.out_links(r).chain(self.in_links(r)).any(|l| self.link(l).up) {
                return Err(Error::infeasible(format!(
                    "rank {idx} (node {r}, {}) is cut off: every link of it is down (the npu or every cable of it has failed); leave it out of `collective.ranks`",
                    self.node(r).name
                )));
            }
        }
        let first = ranks[0];
        let fwd = self.reachable(first, false);
        let back = self.reachable(first, true);
        for (idx, &r) in ranks.iter().enumerate() {
            if !fwd[r.index()] || !back[r.index()] {
                // Which way is missing, and whether failed links are to blame or the network itself.
                let way = match (fwd[r.index()], back[r.index()]) {
                    (false, false) => "neither reaches the other",
                    (false, true) => "rank 0 cannot reach it",
                    _ => "it cannot reach rank 0",
                };
                let why = if self.down_links().is_empty() { "the network's links (none has failed)" } else { "the failed links" };
                return Err(Error::infeasible(format!(
                    "rank {idx} (node {r}, {}) is cut off from rank 0 (node {first}, {}): {way} over links that are up, in the directions they run; {why} cut it off",
                    self.node(r).name,
                    self.node(first).name
                )));
            }
        }
        Ok(())
    }

    /// Hop distances (in links that are up) from `from` to every node; `None` if unreachable.
    /// Scans from many nodes build an `UpAdjacency` once and call its `hop_distances`.
    pub fn hop_distances(&self, from: NodeId) -> Vec<Option<u32>> {
        UpAdjacency::new(self).hop_distances(from)
    }
}

/// The family's parameters as JSON, for a schedule file's `topology.shape`, so that a reader can
/// recover dimensions and tiers from the explicit lists.
pub fn shape_json(t: &Topology) -> Option<serde_json::Value> {
    match t.shape() {
        Shape::Torus(s) => Some(serde_json::json!({"torus": {"dims": s.dims, "wrap": s.wrap}})),
        Shape::FatTree(s) => Some(serde_json::json!({"fat_tree": {"levels": s.levels, "down": s.down, "up": s.up, "npus": s.npus, "board": s.board}})),
        Shape::Custom => None,
    }
}

/// Gives an explicit-list topology back its family, when the lists are exactly that family's
/// nodes and links (bandwidths, latencies and faults stay as listed). `field` names where the
/// shape was read (`topology.shape`, or `meta.shape` in older files) for the messages.
pub fn adopt_shape(t: Topology, shape: &serde_json::Value, field: &str) -> Result<Topology> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields, expecting = "an object with named fields")]
    struct T {
        dims: Vec<usize>,
        wrap: Vec<bool>,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields, expecting = "an object with named fields")]
    struct F {
        levels: u32,
        down: usize,
        up: usize,
        npus: usize,
        board: Option<usize>,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "snake_case")]
    enum S {
        Torus(T),
        FatTree(F),
    }
    let s: S = serde_json::from_value(shape.clone()).map_err(|e| Error::bad(format!("{field} = {shape}: {e}")))?;
    let reference = match s {
        S::Torus(x) => {
            let n = x.dims.len();
            torus(&TorusParams { dims: x.dims, wrap: x.wrap, bandwidth_gbps: vec![1.0; n], latency_ns: vec![0.0; n] }).map_err(|e| e.context(field))?
        }
        S::FatTree(x) => fat_tree(&FatTreeParams {
            levels: x.levels,
            k: x.down + x.up,
            osr: x.down as f64 / x.up.max(1) as f64,
            npus: x.npus,
            board: x.board,
            bandwidth_gbps: 1.0,
            latency_ns: 0.0,
            switch_latency_ns: 0.0,
        })
        .map_err(|e| e.context(field))?,
    };
    let same_nodes = reference.num_nodes() == t.num_nodes() && reference.node_ids().all(|n| reference.node(n).kind == t.node(n).kind);
    let same_links = reference.num_links() == t.num_links() && reference.links().zip(t.links()).all(|((_, a), (_, b))| (a.src, a.dst) == (b.src, b.dst));
    if !same_nodes || !same_links {
        return Err(Error::bad(format!("{field}: the node and link lists are not those of the family it names; remove {field} or fix the lists")));
    }
    let mut graph = t.graph;
    for (e, (_, r)) in graph.edge_weights_mut().zip(reference.links()) {
        e.class = r.class;
    }
    Ok(Topology { graph, switch_latency_ns: t.switch_latency_ns, shape: reference.shape, npus: t.npus })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_node_among_the_ranks_is_named_before_the_others() {
        // Node 0 fails on a ring of 4: every other rank is cut off from it, but the message must
        // name node 0 itself (rank 0), not a live rank "cut off from rank 0".
        let mut t = torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap();
        FaultPattern { nodes: vec![NodeId(0)], ..Default::default() }.apply(&mut t).unwrap();
        let all: Vec<NodeId> = t.node_ids().collect();
        let e = t.check_connected(&all).unwrap_err();
        assert!(e.message().contains("rank 0 (node 0") && e.message().contains("every cable of it has failed"), "{}", e.message());
        assert!(t.check_connected(&all[1..]).is_ok());
    }

    #[test]
    fn a_rank_cut_off_without_a_fault_says_which_way_and_why() {
        // One link 0 -> 1 and nothing back: no fault did it, and 1 cannot reach 0.
        let mut b = TopologyBuilder::new();
        let (a, c) = (b.node(NodeKind::Npu, "a"), b.node(NodeKind::Npu, "c"));
        b.link(a, c, 1.0, 0.0, LinkClass::Custom);
        let t = b.build(Shape::Custom, 0.0).unwrap();
        let e = t.check_connected(&[a, c]).unwrap_err();
        assert!(e.message().contains("it cannot reach rank 0") && e.message().contains("none has failed"), "{}", e.message());
        // Two cables of a ring of 4 down: the failed links are to blame, both ways.
        let mut t = torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap();
        FaultPattern { cables: vec![(NodeId(0), NodeId(1)), (NodeId(2), NodeId(3))], ..Default::default() }.apply(&mut t).unwrap();
        let e = t.check_connected(&t.node_ids().collect::<Vec<_>>()).unwrap_err();
        assert!(e.message().contains("neither reaches the other") && e.message().contains("the failed links cut it off"), "{}", e.message());
    }

    #[test]
    fn npus_must_come_first() {
        let mut b = TopologyBuilder::new();
        b.node(NodeKind::Switch, "s");
        b.node(NodeKind::Npu, "n");
        let err = b.build(Shape::Custom, 0.0).unwrap_err();
        assert!(err.message().contains("npus must come first"), "{err}");
    }

    #[test]
    fn path_latency_counts_switches() {
        let mut b = TopologyBuilder::new();
        let a = b.node(NodeKind::Npu, "a");
        let c = b.node(NodeKind::Npu, "c");
        let s = b.node(NodeKind::Switch, "s");
        let l0 = b.link(a, s, 10.0, 5.0, LinkClass::Custom);
        let l1 = b.link(s, c, 10.0, 5.0, LinkClass::Custom);
        let t = b.build(Shape::Custom, 100.0).unwrap();
        assert_eq!(t.path_latency_ns(&[l0, l1]), 110.0);
        assert_eq!(t.link_between(s, c), Some(l1));
        assert_eq!(t.hop_distances(a)[c.index()], Some(2));
    }
}
