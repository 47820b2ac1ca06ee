//! Simple schedule builders for the tests: shortest-path store-and-forward all-to-all with greedy
//! step packing (any topology, any faults), and ring reduce-scatter / all-gather / all-reduce
//! over consecutive ranks.
#![allow(dead_code)]

use collsched::{Collective, CollectiveKind, PieceId};
use collsched::{LinkId, NodeId, Topology};
use collsched::{Op, Schedule, ScheduleHeader, Step, Transfer};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::OnceLock;

/// This test process's folder under the system's temporary folder, `collsched-SUITE-PID`.
static SCRATCH: OnceLock<PathBuf> = OnceLock::new();

/// This test process's own folder for the files its tests write, `collsched-SUITE-PID` under the
/// system's temporary folder: made on first use, and removed with everything in it when the
/// process exits, whether its tests passed or not, so that a test run leaves nothing behind.
pub fn scratch(suite: &str) -> PathBuf {
    extern "C" fn remove() {
        if let Some(dir) = SCRATCH.get() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    SCRATCH
        .get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("collsched-{suite}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            // SAFETY: `remove` is a plain function that touches only the folder, registered once.
            assert_eq!(unsafe { libc::atexit(remove) }, 0, "atexit");
            dir
        })
        .clone()
}

/// A shortest path (in links that are up) from `a` to `b`, cut into hops that end at ranks of
/// `c` (only ranks store; other npus route like switches).
pub fn hops(t: &Topology, c: &Collective, a: NodeId, b: NodeId) -> Vec<Vec<LinkId>> {
    let path = shortest_path(t, a, b);
    let mut out = vec![Vec::new()];
    for l in path {
        out.last_mut().unwrap().push(l);
        if c.rank_index(t.link(l).dst).is_some() {
            out.push(Vec::new());
        }
    }
    out.pop();
    out
}

/// A shortest path (in links that are up) from `a` to `b`.
fn shortest_path(t: &Topology, a: NodeId, b: NodeId) -> Vec<LinkId> {
    let mut prev: Vec<Option<LinkId>> = vec![None; t.num_nodes()];
    let mut seen = vec![false; t.num_nodes()];
    seen[a.index()] = true;
    let mut q = VecDeque::from([a]);
    while let Some(n) = q.pop_front() {
        if n == b {
            break;
        }
        // Switches and npus both forward; prefer lower link ids for determinism.
        let mut outs: Vec<LinkId> = t.up_out_links(n).collect();
        outs.sort();
        for l in outs {
            let d = t.link(l).dst;
            if !seen[d.index()] {
                seen[d.index()] = true;
                prev[d.index()] = Some(l);
                q.push_back(d);
            }
        }
    }
    let mut path = Vec::new();
    let mut at = b;
    while at != a {
        let l = prev[at.index()].expect("b is reachable from a");
        path.push(l);
        at = t.link(l).src;
    }
    path.reverse();
    path
}

/// Every piece on its shortest path, one hop per step, greedily packed so that no link carries
/// two transfers in one step.
pub fn shortest_path_all_to_all(t: &Topology, c: &Collective) -> Schedule {
    assert_eq!(c.kind, CollectiveKind::AllToAll);
    let mut routes: Vec<(PieceId, Vec<Vec<LinkId>>, usize)> = Vec::new();
    for p in c.pieces() {
        let (i, j) = (p.parts()[0] as usize, p.parts()[1] as usize);
        routes.push((p, hops(t, c, c.ranks[i], c.ranks[j]), 0));
    }
    let mut steps = Vec::new();
    let mut used = vec![usize::MAX; t.num_links()];
    while routes.iter().any(|r| r.2 < r.1.len()) {
        let s = steps.len();
        let mut step = Step::default();
        for r in routes.iter_mut() {
            if r.2 >= r.1.len() {
                continue;
            }
            let hop = &r.1[r.2];
            if hop.iter().all(|l| used[l.index()] != s) {
                hop.iter().for_each(|l| used[l.index()] = s);
                step.transfers.push(Transfer { path: hop.clone(), op: Op::Copy, pieces: vec![r.0] });
                r.2 += 1;
            }
        }
        steps.push(step);
    }
    Schedule { header: ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: None }, steps }
}

/// The whole path between two npus as one routed transfer path.
pub fn route(t: &Topology, a: NodeId, b: NodeId) -> Vec<LinkId> {
    shortest_path(t, a, b)
}

/// Ring over consecutive ranks: reduce-scatter (reducing kinds), then all-gather (all_gather and
/// all_reduce). Paths between consecutive ranks are shortest paths (through switches when
/// needed).
pub fn ring_collective(t: &Topology, c: &Collective) -> Schedule {
    let n = c.num_ranks();
    let next: Vec<Vec<LinkId>> = (0..n).map(|i| route(t, c.ranks[i], c.ranks[(i + 1) % n])).collect();
    let mut steps = Vec::new();
    let pieces_of = |block: usize| (0..c.pieces).map(move |k| PieceId::block(block as u32, k)).collect::<Vec<_>>();
    if c.kind.is_reducing() {
        for s in 0..n - 1 {
            let transfers = (0..n).map(|i| Transfer { path: next[i].clone(), op: Op::Reduce, pieces: pieces_of((i + 2 * n - s - 1) % n) }).collect();
            steps.push(Step { transfers });
        }
    }
    if matches!(c.kind, CollectiveKind::AllGather | CollectiveKind::AllReduce) {
        for s in 0..n - 1 {
            let transfers = (0..n).map(|i| Transfer { path: next[i].clone(), op: Op::Copy, pieces: pieces_of((i + n - s) % n) }).collect();
            steps.push(Step { transfers });
        }
    }
    Schedule { header: ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: None }, steps }
}
