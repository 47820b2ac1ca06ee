//! Wait-for graphs between matched send/receive pairs, and how their cycles are reported: one
//! shortest cycle per strongly connected component, told as the chain of operations that wait on
//! each other, starting at the smallest operation so that the report does not depend on the order
//! of the search.
//!
//! Both rule-6 checks build one: the check of whole programs ([`super::check_deadlock`], nodes are
//! operations of threadblocks) and the streamed check ([`super::DeadlockCheck`], nodes are the
//! transfers of one step), so both tell a cycle the same way.

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use std::collections::{HashMap, HashSet, VecDeque};

/// Why one operation waits for another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Why {
    /// It comes earlier in the same threadblock.
    Earlier,
    /// The waiting operation lists it as a dependency.
    Dependency,
}

/// One edge of the wait-for graph: `from` (an operation of the waiting pair) waits for `to` (an
/// operation of the pair waited for).
#[derive(Clone, Copy, Debug)]
pub(super) struct Wait<A> {
    pub from: A,
    pub to: A,
    pub why: Why,
}

/// A wait-for graph whose nodes are matched pairs (or single operations) of type `A`.
pub(super) struct WaitGraph<A> {
    graph: DiGraph<(), Wait<A>, u32>,
    members: Vec<Vec<A>>,
}

impl<A: Copy + Ord + std::hash::Hash> WaitGraph<A> {
    /// A graph with one node per entry of `members` (the operations that complete together).
    pub fn new(members: Vec<Vec<A>>) -> Self {
        let mut graph = DiGraph::with_capacity(members.len(), members.len() * 2);
        for _ in 0..members.len() {
            graph.add_node(());
        }
        WaitGraph { graph, members }
    }

    /// Node `from` waits for node `to` because `wait.from` waits for `wait.to`.
    pub fn add(&mut self, from: usize, to: usize, wait: Wait<A>) {
        self.graph.add_edge(NodeIndex::new(from), NodeIndex::new(to), wait);
    }

    /// Every cycle, once per strongly connected component, ordered by the smallest operation of
    /// the component's first node: the operation it starts at and the story of the chain.
    pub fn cycles(&self, describe: impl Fn(A) -> String) -> Vec<(A, String)> {
        let mut sccs = petgraph::algo::tarjan_scc(&self.graph);
        sccs.iter_mut().for_each(|c| c.sort_unstable());
        sccs.sort_by_key(|c| self.members[c[0].index()].iter().min().copied());
        let mut out = Vec::new();
        for scc in sccs {
            let cyclic = scc.len() > 1 || self.graph.find_edge(scc[0], scc[0]).is_some();
            if cyclic {
                let (start, cycle) = rotate(self.cycle_in(&scc));
                out.push((start, narrate(&describe, start, &cycle)));
            }
        }
        out
    }

    /// A shortest cycle through the first node of a strongly connected component, as its edges.
    fn cycle_in(&self, scc: &[NodeIndex<u32>]) -> Vec<Wait<A>> {
        let g = &self.graph;
        let start = scc[0];
        let inside: HashSet<_> = scc.iter().copied().collect();
        let mut parent: HashMap<NodeIndex<u32>, EdgeIndex<u32>> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(n) = queue.pop_front() {
            for e in g.edges(n) {
                let m = e.target();
                if !inside.contains(&m) || parent.contains_key(&m) {
                    continue;
                }
                parent.insert(m, e.id());
                if m == start {
                    queue.clear();
                    break;
                }
                queue.push_back(m);
            }
        }
        // Walk back from the start to itself.
        let mut edges = Vec::new();
        let mut n = start;
        loop {
            let e = parent[&n];
            edges.push(g[e]);
            n = g.edge_endpoints(e).expect("edge exists").0;
            if n == start {
                break;
            }
        }
        edges.reverse();
        edges
    }
}

/// Starts a cycle at its smallest operation: returns that operation and the cycle's edges from
/// the pair it belongs to.
fn rotate<A: Copy + Ord>(mut cycle: Vec<Wait<A>>) -> (A, Vec<Wait<A>>) {
    let start = cycle.iter().flat_map(|w| [w.from, w.to]).min().expect("a cycle has an edge");
    // The pair of edge i's `from` also holds the previous edge's `to`.
    let n = cycle.len();
    let i = (0..n).find(|&i| cycle[i].from == start || cycle[(i + n - 1) % n].to == start).expect("every operation of the cycle is in a pair of it");
    cycle.rotate_left(i);
    (start, cycle)
}

/// "X waits for its matching Y, which waits for Z (earlier in its threadblock), ...".
fn narrate<A: Copy + PartialEq>(describe: &impl Fn(A) -> String, start: A, cycle: &[Wait<A>]) -> String {
    let mut text = describe(start);
    let mut current = start;
    let mut first = true;
    for w in cycle {
        let lead = if first { " waits for" } else { ", which waits for" };
        if w.from != current {
            text += &format!("{lead} its matching {}", describe(w.from));
            first = false;
        }
        let lead = if first { " waits for" } else { ", which waits for" };
        let why = match w.why {
            Why::Earlier => "earlier in its threadblock",
            Why::Dependency => "a dependency",
        };
        text += &format!("{lead} {} ({why})", describe(w.to));
        first = false;
        current = w.to;
    }
    if current != start {
        text += &format!(", which waits for its matching {}", describe(start));
    }
    text + ", which closes the cycle"
}
