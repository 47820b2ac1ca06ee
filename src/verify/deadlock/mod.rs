//! Rule 6, deadlock freedom of what a runtime runs: the schedule lowered to per-rank programs
//! ([`crate::lower`]) must have an acyclic wait-for graph under blocking (rendezvous) semantics,
//! and every matched send/receive pair must carry the same pieces.
//!
//! Two checks share these semantics: [`check_deadlock`] checks whole programs (what `export`
//! writes, and MSCCL XML read back), [`DeadlockCheck`] streams a schedule step by step through
//! the lowering's rules without holding the programs (what `verify` runs; see its module).
//!
//! Semantics checked: the operations of a threadblock run in order; an operation also waits for
//! the operations of other threadblocks of its rank that it lists as dependencies; the k-th send
//! from rank a to rank b on channel c is matched with the k-th receive of b from a on c, and the
//! two complete only together (no buffering). So a matched pair is one event of the wait-for
//! graph, and it waits for everything either side waits for. A cycle of such events can never
//! start; an unmatched send or receive waits forever.

mod cycles;
mod stream;

pub use stream::DeadlockCheck;

use super::{Diagnostic, Rule};
use crate::lower::{OpKind, Operation, Programs};
use cycles::{Wait, WaitGraph, Why};
use std::collections::HashMap;

/// An operation of the programs: (rank, threadblock, position).
type At = (usize, usize, usize);

/// The sends and the receives of one (sender, receiver, channel) stream, in order.
type Stream = (Vec<At>, Vec<At>);

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
    let mut out = Vec::new();
    let streams = streams(programs, &mut out);
    let (node_of, members) = match_pairs(programs, &streams, &mut out);
    let graph = wait_for_graph(programs, &node_of, members, &mut out);
    for (start, story) in graph.cycles(|at| describe(programs, at)) {
        out.push(diagnostic(programs, Some(start), format!("wait-for cycle under rendezvous semantics: {story}")));
    }
    out
}

/// The sends and receives of every (sender, receiver, channel) stream, in threadblock order;
/// reports an operation whose peer is not another rank, and a stream that several threadblocks
/// of one rank share (the first-in-first-out order between them is undefined).
fn streams(p: &Programs, out: &mut Vec<Diagnostic>) -> HashMap<(usize, usize, usize), Stream> {
    let nranks = p.ranks.len();
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
    streams
}

/// The nodes of the wait-for graph: the k-th send and the k-th receive of a stream are matched
/// into one node (reported when they carry different pieces); an unmatched operation (reported:
/// it waits forever) and every other operation is a node of its own. Returns each operation's
/// node and each node's operations.
fn match_pairs(p: &Programs, streams: &HashMap<(usize, usize, usize), Stream>, out: &mut Vec<Diagnostic>) -> (HashMap<At, usize>, Vec<Vec<At>>) {
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
    (node_of, members)
}

/// The wait-for edges between nodes: an operation waits for the one before it in its threadblock
/// and for its dependencies (a dependency on an operation that does not exist is reported).
fn wait_for_graph(p: &Programs, node_of: &HashMap<At, usize>, members: Vec<Vec<At>>, out: &mut Vec<Diagnostic>) -> WaitGraph<At> {
    let mut graph = WaitGraph::new(members);
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
                    graph.add(node_of[&w.from], node_of[&w.to], w);
                }
            }
        }
    }
    graph
}

fn pieces(list: &[crate::collective::PieceId]) -> String {
    let shown: Vec<String> = list.iter().take(8).map(|p| p.to_string()).collect();
    let more = if list.len() > 8 { format!(" and {} more", list.len() - 8) } else { String::new() };
    format!("[{}{more}]", shown.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{CollectiveKind, PieceId};
    use crate::lower::tests::torus_schedules;
    use crate::lower::{lower, Buffer, ChannelSpread, LowerOptions, OpRef, RankProgram, Slice, Threadblock, ThreadblockLayout};
    use crate::schedule::Schedule;
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
        v.finish().unwrap()
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

    /// Schedules of every kind, with routed paths, switches and folds: what the streamed check
    /// is compared on.
    fn assorted_schedules() -> Vec<(String, Schedule)> {
        use crate::algorithms::switched::{switched, Routing, SwitchedAlgorithm};
        use crate::algorithms::{routed_all_to_all, torus_mate, torus_ring_collective, HardwareRouting, RingAlgorithm};
        use crate::lower::tests::torus_with;
        use crate::topology::{fat_tree, FatTreeParams};
        let mut out = torus_schedules();
        for (dims, cables) in [(&[4usize, 4][..], &[][..]), (&[5][..], &[(2u32, 3u32)][..]), (&[3, 3][..], &[][..])] {
            let t = torus_with(dims, cables);
            for kind in [CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce] {
                let c = crate::collective::Collective::new(kind, t.node_ids().collect(), 1 << 12, 1, None, &t).unwrap();
                for a in RingAlgorithm::ALL {
                    if let Ok(s) = torus_ring_collective(&t, &c, a) {
                        out.push((format!("{dims:?} {cables:?} {kind} {a:?}"), s));
                    }
                }
            }
        }
        let t = torus_with(&[5, 4], &[]);
        let c = crate::collective::Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 12, 1, None, &t).unwrap();
        out.push(("5x4 dor".into(), routed_all_to_all(&t, &c, HardwareRouting::Dor).unwrap()));
        let t = torus_with(&[4, 4], &[(0, 1)]);
        let c = crate::collective::Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 12, 1, None, &t).unwrap();
        out.push(("4x4 matee".into(), torus_mate(&t, &c, true).unwrap()));
        let ft =
            fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 8, board: Some(4), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })
                .unwrap();
        for a in SwitchedAlgorithm::ALL {
            for &kind in a.kinds() {
                let c = crate::collective::Collective::new(kind, (0..8).map(NodeId).collect(), 1 << 12, 1, None, &ft).unwrap();
                out.push((format!("fat tree {kind} {a:?}"), switched(&ft, &c, a, Routing::Balanced).unwrap()));
            }
        }
        out
    }

    /// The streamed check (one step at a time, one pair per transfer, threadblock order and
    /// matching only) finds a cycle in exactly the steps where the lowered programs have one.
    #[test]
    fn the_streamed_check_decides_what_the_programs_check_decides() {
        let mut cyclic = 0;
        for (name, s) in assorted_schedules() {
            assert!(
                verify_schedule(&s, &VerifyOptions { allow_contention: true, ..Default::default() })
                    .unwrap()
                    .findings
                    .failed_rules()
                    .iter()
                    .all(|&r| r == Rule::LinkSharing),
                "{name}"
            );
            for channels in 1..=3 {
                for recv_first in [false, true] {
                    for threadblocks in [ThreadblockLayout::PerPeer, ThreadblockLayout::PerRank] {
                        let opts = LowerOptions { channels, spread: ChannelSpread::Transfers, recv_first, threadblocks };
                        let exact = check_deadlock(&lower(&s, &opts).unwrap());
                        assert!(exact.iter().all(|d| d.message.starts_with("wait-for cycle")), "{name} {opts:?}: {}", exact[0]);
                        let mut exact_steps: Vec<usize> = exact.iter().map(|d| d.step.expect("a cycle of a step")).collect();
                        exact_steps.sort_unstable();
                        exact_steps.dedup();
                        let mut v = Verifier::new(VerifyOptions { allow_contention: true, max_diagnostics_per_rule: usize::MAX, ..Default::default() })
                            .with_check(Box::new(DeadlockCheck::new(opts.clone())));
                        crate::schedule::StepSink::begin(&mut v, &s.header).unwrap();
                        for (i, st) in s.steps.iter().enumerate() {
                            v.check_step(i, st);
                        }
                        let report = v.finish().unwrap();
                        let streamed: Vec<&Diagnostic> = report.findings.failures().iter().filter(|d| d.rule == Rule::Deadlock).collect();
                        let mut streamed_steps: Vec<usize> = streamed.iter().map(|d| d.step.unwrap()).collect();
                        streamed_steps.dedup();
                        assert_eq!(streamed_steps, exact_steps, "{name} {opts:?}: {:?}", streamed.first().map(|d| d.to_string()));
                        if threadblocks == ThreadblockLayout::PerPeer {
                            assert!(exact.is_empty(), "{name} {opts:?}");
                        }
                        cyclic += !exact.is_empty() as usize;
                    }
                }
            }
        }
        assert!(cyclic > 20, "only {cyclic} lowerings deadlock: the comparison is too weak");
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
