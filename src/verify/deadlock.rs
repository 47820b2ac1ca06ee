//! Rule 6, deadlock freedom of what a runtime runs: the schedule lowered to per-rank programs
//! ([`crate::lower`]) must have an acyclic wait-for graph under blocking (rendezvous) semantics,
//! and every matched send/receive pair must carry the same pieces.
//!
//! Semantics checked: the operations of a threadblock run in order; an operation also waits for
//! the operations of other threadblocks of its rank that it lists as dependencies; the k-th send
//! from rank a to rank b on channel c is matched with the k-th receive of b from a on c, and the
//! two complete only together (no buffering). So a matched pair is one event of the wait-for
//! graph, and it waits for everything either side waits for. A cycle of such events can never
//! start; an unmatched send or receive waits forever.

use super::{Check, Diagnostic, Findings, Rule, Stats};
use crate::cost::SyncCost;
use crate::lower::{lower, LowerOptions, OpKind, Operation, Programs};
use crate::schedule::{Schedule, ScheduleHeader, Step};
use std::collections::{HashMap, VecDeque};

/// An operation of the programs: (rank, threadblock, position).
type At = (usize, usize, usize);

/// The sends and the receives of one (sender, receiver, channel) stream, in order.
type Stream = (Vec<At>, Vec<At>);

/// Why one operation waits for another.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Why {
    /// It comes earlier in the same threadblock.
    Earlier,
    /// The waiting operation lists it as a dependency.
    Dependency,
}

/// One edge of the wait-for graph between matched pairs: `from` (one side of the waiting pair)
/// waits for `to` (one side of the pair waited for).
#[derive(Clone, Copy)]
struct Wait {
    from: At,
    to: At,
    why: Why,
}

fn op(p: &Programs, at: At) -> &Operation {
    &p.ranks[at.0].threadblocks[at.1].ops[at.2]
}

/// `rank 0 tb 1 op 3 send to 1 (step 2, transfer 5, channel 0)`.
fn describe(p: &Programs, at: At) -> String {
    let o = op(p, at);
    let what = match o.kind {
        OpKind::Send { peer } => format!("send to {peer}"),
        OpKind::Recv { peer, reduce: false } => format!("recv from {peer}"),
        OpKind::Recv { peer, reduce: true } => format!("recv-reduce from {peer}"),
        OpKind::Copy => "copy".to_string(),
    };
    let place = match o.origin {
        Some((s, t)) => format!(" (step {s}, transfer {t}, channel {})", o.channel),
        None => String::new(),
    };
    format!("rank {} tb {} op {} {what}{place}", at.0, at.1, at.2)
}

fn diagnostic(p: &Programs, at: Option<At>, message: String) -> Diagnostic {
    let origin = at.and_then(|a| op(p, a).origin);
    Diagnostic {
        rule: Rule::Deadlock,
        step: origin.map(|o| o.0),
        transfer: origin.map(|o| o.1),
        subject: at.map(|a| format!("rank {} tb {} op {}", a.0, a.1, a.2)),
        message,
    }
}

/// Checks rule 6 on lowered programs: FIFO matching per (sender, receiver, channel), equal
/// pieces on both sides of every pair, no unmatched operation, and an acyclic wait-for graph
/// (each cycle is reported once, as the chain of operations that wait on each other).
pub fn check_deadlock(programs: &Programs) -> Vec<Diagnostic> {
    let p = programs;
    let mut out = Vec::new();
    let nranks = p.ranks.len();
    // Sends and receives of every (sender, receiver, channel) stream, in threadblock order.
    let mut streams: HashMap<(usize, usize, usize), Stream> = HashMap::new();
    let mut stream_tbs: HashMap<(usize, usize, usize, bool), Vec<usize>> = HashMap::new();
    for (r, rp) in p.ranks.iter().enumerate() {
        for (t, tb) in rp.threadblocks.iter().enumerate() {
            for (i, o) in tb.ops.iter().enumerate() {
                let at = (r, t, i);
                let (key, is_send) = match o.kind {
                    OpKind::Send { peer } => ((r, peer, o.channel), true),
                    OpKind::Recv { peer, .. } => ((peer, r, o.channel), false),
                    OpKind::Copy => continue,
                };
                let peer = if is_send { key.1 } else { key.0 };
                if peer >= nranks || peer == r {
                    out.push(diagnostic(p, Some(at), format!("{} names peer {peer}, which is not another rank (there are {nranks})", describe(p, at))));
                    continue;
                }
                let s = streams.entry(key).or_default();
                if is_send {
                    s.0.push(at);
                } else {
                    s.1.push(at);
                }
                let tbs = stream_tbs.entry((key.0, key.1, key.2, is_send)).or_default();
                if tbs.last() != Some(&t) {
                    tbs.push(t);
                }
            }
        }
    }
    let mut keys: Vec<_> = stream_tbs.keys().copied().collect();
    keys.sort_unstable();
    for k in keys {
        let tbs = &stream_tbs[&k];
        if tbs.len() > 1 {
            let (a, b, c, is_send) = k;
            let (who, what) = if is_send { (a, format!("send to {b}")) } else { (b, format!("receive from {a}")) };
            out.push(diagnostic(
                p,
                None,
                format!("rank {who}: threadblocks {tbs:?} all {what} on channel {c}: the first-in-first-out order between threadblocks is undefined"),
            ));
        }
    }

    // Matched pairs become one node; an unmatched operation is a node of its own.
    let mut node_of: HashMap<At, usize> = HashMap::new();
    let mut members: Vec<Vec<At>> = Vec::new();
    let mut skeys: Vec<_> = streams.keys().copied().collect();
    skeys.sort_unstable();
    for key in skeys {
        let (sends, recvs) = &streams[&key];
        for (k, (&s, &r)) in sends.iter().zip(recvs).enumerate() {
            let (so, ro) = (op(p, s), op(p, r));
            if so.pieces != ro.pieces {
                out.push(diagnostic(
                    p,
                    Some(s),
                    format!(
                        "{} and {} are matched (send number {k} from {} to {} on channel {}) but carry different pieces: {} against {}",
                        describe(p, s),
                        describe(p, r),
                        key.0,
                        key.1,
                        key.2,
                        pieces(&so.pieces),
                        pieces(&ro.pieces)
                    ),
                ));
            }
            node_of.insert(s, members.len());
            node_of.insert(r, members.len());
            members.push(vec![s, r]);
        }
        let (matched, extra, side) =
            if sends.len() > recvs.len() { (recvs.len(), &sends[recvs.len()..], "send") } else { (sends.len(), &recvs[sends.len()..], "receive") };
        if let Some(&first) = extra.first() {
            out.push(diagnostic(
                p,
                Some(first),
                format!(
                    "{} waits forever: rank {} sends {} and rank {} receives {} on channel {} from {} to {}, so {} {side}(s) from {} on have no partner",
                    describe(p, first),
                    key.0,
                    sends.len(),
                    key.1,
                    recvs.len(),
                    key.2,
                    key.0,
                    key.1,
                    extra.len(),
                    matched
                ),
            ));
        }
    }
    for (r, rp) in p.ranks.iter().enumerate() {
        for (t, tb) in rp.threadblocks.iter().enumerate() {
            for i in 0..tb.ops.len() {
                node_of.entry((r, t, i)).or_insert_with(|| {
                    members.push(vec![(r, t, i)]);
                    members.len() - 1
                });
            }
        }
    }

    // Wait-for edges between nodes.
    let mut graph: petgraph::graph::DiGraph<(), Wait, u32> = petgraph::graph::DiGraph::with_capacity(members.len(), members.len() * 2);
    for _ in 0..members.len() {
        graph.add_node(());
    }
    for (r, rp) in p.ranks.iter().enumerate() {
        for (t, tb) in rp.threadblocks.iter().enumerate() {
            for (i, o) in tb.ops.iter().enumerate() {
                let from = (r, t, i);
                let mut waits = Vec::new();
                if i > 0 {
                    waits.push(Wait { from, to: (r, t, i - 1), why: Why::Earlier });
                }
                for d in &o.deps {
                    if d.tb < rp.threadblocks.len() && d.op < rp.threadblocks[d.tb].ops.len() {
                        waits.push(Wait { from, to: (r, d.tb, d.op), why: Why::Dependency });
                    } else {
                        out.push(diagnostic(p, Some(from), format!("{} depends on tb {} op {}, which does not exist", describe(p, from), d.tb, d.op)));
                    }
                }
                for w in waits {
                    graph.add_edge(petgraph::graph::NodeIndex::new(node_of[&w.from]), petgraph::graph::NodeIndex::new(node_of[&w.to]), w);
                }
            }
        }
    }
    let mut sccs = petgraph::algo::tarjan_scc(&graph);
    // Report in a stable order: by the smallest operation of each cycle.
    sccs.iter_mut().for_each(|c| c.sort_unstable());
    sccs.sort_by_key(|c| members[c[0].index()].iter().min().copied());
    for scc in sccs {
        let cyclic = scc.len() > 1 || graph.find_edge(scc[0], scc[0]).is_some();
        if cyclic {
            let (start, cycle) = rotate(cycle_in(&graph, &scc));
            out.push(diagnostic(p, Some(start), format!("wait-for cycle under rendezvous semantics: {}", narrate(p, start, &cycle))));
        }
    }
    out
}

fn pieces(list: &[crate::collective::PieceId]) -> String {
    let shown: Vec<String> = list.iter().take(8).map(|p| p.to_string()).collect();
    let more = if list.len() > 8 { format!(" and {} more", list.len() - 8) } else { String::new() };
    format!("[{}{more}]", shown.join(" "))
}

/// A shortest cycle through the first node of a strongly connected component, as its edges.
fn cycle_in(graph: &petgraph::graph::DiGraph<(), Wait, u32>, scc: &[petgraph::graph::NodeIndex<u32>]) -> Vec<Wait> {
    use petgraph::visit::EdgeRef;
    let start = scc[0];
    let inside: std::collections::HashSet<_> = scc.iter().copied().collect();
    let mut parent: HashMap<petgraph::graph::NodeIndex<u32>, petgraph::graph::EdgeIndex<u32>> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for e in graph.edges(n) {
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
        edges.push(graph[e]);
        n = graph.edge_endpoints(e).expect("edge exists").0;
        if n == start {
            break;
        }
    }
    edges.reverse();
    edges
}

/// Starts a cycle at its smallest operation, so that the report does not depend on the order
/// of the search: returns that operation and the cycle's edges from the pair it belongs to.
fn rotate(mut cycle: Vec<Wait>) -> (At, Vec<Wait>) {
    let start = cycle.iter().flat_map(|w| [w.from, w.to]).min().expect("a cycle has an edge");
    // The pair of edge i's `from` also holds the previous edge's `to`.
    let n = cycle.len();
    let i = (0..n).find(|&i| cycle[i].from == start || cycle[(i + n - 1) % n].to == start).expect("every operation of the cycle is in a pair of it");
    cycle.rotate_left(i);
    (start, cycle)
}

/// "rank 0 tb 0 op 0 send to 1 waits for its matching rank 1 ..., which waits for ...".
fn narrate(p: &Programs, start: At, cycle: &[Wait]) -> String {
    let mut text = describe(p, start);
    let mut current = start;
    let mut first = true;
    for w in cycle {
        let lead = if first { " waits for" } else { ", which waits for" };
        if w.from != current {
            text += &format!("{lead} its matching {}", describe(p, w.from));
            first = false;
        }
        let lead = if first { " waits for" } else { ", which waits for" };
        let why = match w.why {
            Why::Earlier => "earlier in its threadblock",
            Why::Dependency => "a dependency",
        };
        text += &format!("{lead} {} ({why})", describe(p, w.to));
        first = false;
        current = w.to;
    }
    if current != start {
        text += &format!(", which waits for its matching {}", describe(p, start));
    }
    text + ", which closes the cycle"
}

/// The rule-6 check for the verifier: it keeps the steps it sees and, at the end, lowers the
/// schedule with its options and checks the programs. It holds the whole schedule in memory (the
/// programs need it anyway), and skips the check when rules 1 or 3 failed, since the lowering
/// needs valid paths and held pieces.
pub struct DeadlockCheck {
    options: LowerOptions,
    header: Option<ScheduleHeader>,
    steps: Vec<Step>,
}

impl DeadlockCheck {
    /// A check of the programs lowered with these options.
    pub fn new(options: LowerOptions) -> Self {
        DeadlockCheck { options, header: None, steps: Vec::new() }
    }
}

impl Check for DeadlockCheck {
    fn begin(&mut self, header: &ScheduleHeader, _out: &mut Findings) {
        self.header = Some(header.clone());
    }

    fn step(&mut self, _index: usize, step: &Step, _out: &mut Findings) {
        self.steps.push(step.clone());
    }

    fn finish(&mut self, _stats: &Stats, _cost: Option<&SyncCost>, out: &mut Findings) {
        let Some(header) = self.header.take() else { return };
        if out.is_failed(Rule::Structure) || out.is_failed(Rule::Causality) {
            return;
        }
        let schedule = Schedule { header, steps: std::mem::take(&mut self.steps) };
        match lower(&schedule, &self.options) {
            Ok(programs) => check_deadlock(&programs).into_iter().for_each(|d| out.fail(d)),
            Err(e) => {
                out.fail(Diagnostic { rule: Rule::Deadlock, step: None, transfer: None, subject: None, message: format!("cannot lower the schedule: {e}") })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{CollectiveKind, PieceId};
    use crate::lower::tests::torus_schedules;
    use crate::lower::{Buffer, ChannelSpread, OpRef, RankProgram, Slice, Threadblock, ThreadblockLayout};
    use crate::topology::NodeId;
    use crate::verify::{verify_schedule, Verifier, VerifyOptions};

    fn slice(offset: usize) -> Option<Slice> {
        Some(Slice { buffer: Buffer::Input, offset, count: 1 })
    }

    fn send(peer: usize, channel: usize, piece: u32) -> Operation {
        Operation {
            kind: OpKind::Send { peer },
            channel,
            pieces: vec![PieceId::block(piece, 0)],
            src: slice(0),
            dst: None,
            remote: None,
            origin: None,
            deps: Vec::new(),
        }
    }

    fn recv(peer: usize, channel: usize, piece: u32) -> Operation {
        Operation {
            kind: OpKind::Recv { peer, reduce: false },
            channel,
            pieces: vec![PieceId::block(piece, 0)],
            src: None,
            dst: slice(0),
            remote: None,
            origin: None,
            deps: Vec::new(),
        }
    }

    fn tb(send: Option<usize>, recv: Option<usize>, ops: Vec<Operation>) -> Threadblock {
        Threadblock { send, recv, channel: 0, ops }
    }

    fn programs(ranks: Vec<Vec<Threadblock>>) -> Programs {
        Programs {
            kind: CollectiveKind::AllGather,
            pieces_per_block: 1,
            uniform: true,
            channels: 1,
            ranks: ranks
                .into_iter()
                .enumerate()
                .map(|(i, threadblocks)| RankProgram { node: NodeId(i as u32), input_chunks: 1, output_chunks: 2, scratch_chunks: 0, threadblocks })
                .collect(),
        }
    }

    fn run_verifier(s: &Schedule, opts: LowerOptions) -> crate::verify::Report {
        use crate::schedule::StepSink;
        let mut v = Verifier::new(VerifyOptions::default()).with_check(Box::new(DeadlockCheck::new(opts)));
        v.begin(&s.header).unwrap();
        for (i, st) in s.steps.iter().enumerate() {
            v.check_step(i, st);
        }
        v.finish()
    }

    #[test]
    fn torus_schedules_lower_without_deadlock() {
        for (name, s) in torus_schedules() {
            assert!(verify_schedule(&s, &VerifyOptions::default()).unwrap().is_valid(), "{name}");
            for (channels, spread) in [(1, ChannelSpread::Transfers), (3, ChannelSpread::Operations)] {
                for recv_first in [false, true] {
                    let opts = LowerOptions { channels, spread, recv_first, ..LowerOptions::default() };
                    let d = check_deadlock(&lower(&s, &opts).unwrap());
                    assert!(d.is_empty(), "{name} {opts:?}: {}", d[0]);
                }
            }
            let report = run_verifier(&s, LowerOptions::default());
            assert!(report.is_valid(), "{name}: {:?}", report.findings.failures());
        }
    }

    #[test]
    fn one_threadblock_per_rank_deadlocks_a_ring_step() {
        // Every rank sends first and then receives: each send waits for a neighbour that is
        // itself blocked in its send.
        let (name, s) = &torus_schedules()[0];
        for recv_first in [false, true] {
            let opts = LowerOptions { recv_first, threadblocks: ThreadblockLayout::PerRank, ..LowerOptions::default() };
            let d = check_deadlock(&lower(s, &opts).unwrap());
            assert!(!d.is_empty(), "{name}");
            assert!(d[0].message.contains("wait-for cycle"), "{}", d[0]);
            let report = run_verifier(s, opts);
            assert!(report.findings.is_failed(Rule::Deadlock));
        }
    }

    #[test]
    fn two_ranks_that_both_send_first_deadlock() {
        let p = programs(vec![vec![tb(None, None, vec![send(1, 0, 0), recv(1, 0, 1)])], vec![tb(None, None, vec![send(0, 0, 1), recv(0, 0, 0)])]]);
        let d = check_deadlock(&p);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            d[0].message,
            "wait-for cycle under rendezvous semantics: rank 0 tb 0 op 0 send to 1 waits for its matching rank 1 tb 0 op 1 recv from 0, \
             which waits for rank 1 tb 0 op 0 send to 0 (earlier in its threadblock), which waits for its matching rank 0 tb 0 op 1 recv from 1, \
             which waits for rank 0 tb 0 op 0 send to 1 (earlier in its threadblock), which closes the cycle"
        );
        assert_eq!(d[0].subject.as_deref(), Some("rank 0 tb 0 op 0"));
        // One of them receiving first breaks the cycle.
        let p = programs(vec![vec![tb(None, None, vec![send(1, 0, 0), recv(1, 0, 1)])], vec![tb(None, None, vec![recv(0, 0, 0), send(0, 0, 1)])]]);
        assert!(check_deadlock(&p).is_empty());
    }

    #[test]
    fn fifo_order_that_differs_between_the_ends_deadlocks_and_mismatches() {
        // Rank 0 sends pieces 0 then 1; rank 1 expects 1 then 0 on the same channel. The pairs
        // carry different pieces; with one threadblock per stream it does not hang.
        let p = programs(vec![vec![tb(Some(1), None, vec![send(1, 0, 0), send(1, 0, 1)])], vec![tb(None, Some(0), vec![recv(0, 0, 1), recv(0, 0, 0)])]]);
        let d = check_deadlock(&p);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].message.contains("rank 0 tb 0 op 0 send to 1 and rank 1 tb 0 op 0 recv from 0 are matched"), "{}", d[0]);
        assert!(d[0].message.contains("[[0,0]] against [[1,0]]"), "{}", d[0]);
        // Split over two channels, with the receiver's order given by dependencies across its
        // threadblocks that contradict the sender's: a cycle.
        let mut r1 = recv(0, 1, 1);
        r1.deps = vec![];
        let mut r0 = recv(0, 0, 0);
        r0.deps = vec![OpRef { tb: 1, op: 0 }];
        let mut s1 = send(1, 1, 1);
        s1.deps = vec![OpRef { tb: 0, op: 0 }];
        let mut send_tb1 = tb(Some(1), None, vec![s1]);
        send_tb1.channel = 1;
        let mut recv_tb1 = tb(None, Some(0), vec![r1]);
        recv_tb1.channel = 1;
        // Rank 0 sends on channel 1 only after channel 0; rank 1 receives on channel 0 only
        // after channel 1: each pair waits for the other.
        let p = programs(vec![vec![tb(Some(1), None, vec![send(1, 0, 0)]), send_tb1], vec![tb(None, Some(0), vec![r0]), recv_tb1]]);
        let d = check_deadlock(&p);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].message.contains("(a dependency)"), "{}", d[0]);
    }

    #[test]
    fn a_dependency_cycle_across_threadblocks_of_one_rank_is_reported() {
        let mut a = send(1, 0, 0);
        a.deps = vec![OpRef { tb: 1, op: 0 }];
        let mut b = recv(1, 0, 1);
        b.deps = vec![OpRef { tb: 0, op: 0 }];
        let p = programs(vec![
            vec![tb(Some(1), None, vec![a]), tb(None, Some(1), vec![b])],
            vec![tb(None, Some(0), vec![recv(0, 0, 0)]), tb(Some(0), None, vec![send(0, 0, 1)])],
        ]);
        let d = check_deadlock(&p);
        assert_eq!(d.len(), 1, "{d:?}");
        let m = &d[0].message;
        assert!(m.contains("rank 0 tb 0 op 0 send to 1 waits for rank 0 tb 1 op 0 recv from 1 (a dependency)"), "{m}");
        assert!(m.contains("rank 0 tb 1 op 0 recv from 1 (a dependency)"), "{m}");
    }

    #[test]
    fn unmatched_operations_wait_forever() {
        let p = programs(vec![vec![tb(Some(1), None, vec![send(1, 0, 0), send(1, 0, 1)])], vec![tb(None, Some(0), vec![recv(0, 0, 0)])]]);
        let d = check_deadlock(&p);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].message.contains("rank 0 tb 0 op 1 send to 1 waits forever"), "{}", d[0]);
    }
}
