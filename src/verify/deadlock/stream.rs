//! Rule 6 as `verify` runs it: the wait-for graph of the lowered programs, decided one step at a
//! time while the schedule streams by, without building the programs.
//!
//! **Every cycle lies within one step.** In the programs [`crate::lower::lower`] builds, every
//! wait points to the same or an earlier step: a threadblock runs its operations in rank order,
//! which goes step by step; a dependency always points to an operation earlier in rank order; a
//! matched send and receive come from the same transfer. So the programs deadlock exactly when the
//! operations of some step, with the waits among themselves, form a cycle.
//!
//! **Which waits within a step close cycles.** An operation waits for the one before it in its
//! threadblock, and for its dependencies. Within a step only receives depend on operations of the
//! step: on receives of earlier transfers that delivered the same piece to the same rank (sends
//! read the state at the start of the step, and a receive never overwrites a chunk a send of its
//! step reads: it gets fresh scratch space). With one threadblock per rank those receives are in
//! its only threadblock, where `lower` leaves such dependencies to the order; with one threadblock
//! per peer and direction every wait points to an earlier (step, transfer), so no cycle forms at
//! all. So the threadblock order and the matching close every cycle there is, and the check
//! follows them alone.
//!
//! **One pair per transfer.** The lowering cuts a transfer into one operation per run of
//! contiguous chunks. With whole transfers on a channel (`ChannelSpread::Transfers`, the default)
//! these operations are consecutive in one threadblock on each side, matched run by run, and
//! treating them as one pair changes no cycle: with one threadblock per peer and direction there
//! is none either way; with one threadblock per rank, whatever waits for one run of a transfer on
//! a rank comes after its last run in the only threadblock, and the last run waits for all the
//! others. Spreading the runs of one transfer over several channels has no such pairing; it is
//! refused (check those programs whole with [`super::check_deadlock`]).
//!
//! **Matching.** Both ends list a stream's transfers in transfer order, step after step, and a
//! transfer's channel is counted per (sender, receiver) pair alike on both ends, so the k-th send
//! of a (sender, receiver, channel) stream meets the k-th receive, of the same transfer, with the
//! same pieces: no operation is left unmatched and no pair disagrees.
//!
//! So the check keeps one step's transfers and takes time linear in them. What it can find: a
//! path that starts or ends at a node that is not a rank (no program runs there), and, with one
//! threadblock per rank, the cycles of rendezvous sends and receives within a step.

use super::cycles::{Wait, WaitGraph, Why};
use crate::collective::Collective;
use crate::lower::{ChannelSpread, LowerOptions, ThreadblockLayout};
use crate::schedule::{Op, ScheduleHeader, Step};
use crate::topology::{NodeId, Topology};
use crate::verify::{Check, Diagnostic, Findings, Rule};
use std::collections::HashMap;

/// A threadblock of a rank, keyed as `lower` orders them: (channel, peer, direction).
type TbKey = (usize, usize, u8);

/// Which end of a transfer an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Side {
    Send,
    Recv,
}

/// A transfer of the step being checked, as the lowering turns it into a matched pair.
struct Pair {
    transfer: usize,
    sender: usize,
    receiver: usize,
    channel: usize,
    reduce: bool,
}

/// An operation of a step: ordered by rank, threadblock and transfer, so that a cycle is told
/// from its smallest operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct StepOp {
    rank: usize,
    tb: TbKey,
    transfer: usize,
    side: Side,
    pair: usize,
}

/// The rule-6 check for the verifier (module docs: what it decides and why that suffices).
pub struct DeadlockCheck {
    options: LowerOptions,
    run: Option<Run>,
}

/// What the check keeps between steps.
struct Run {
    topology: Topology,
    collective: Collective,
    /// Set when a transfer cannot be lowered: there are no programs to check after it.
    stopped: bool,
}

impl DeadlockCheck {
    /// A check of the programs lowered with these options (whole transfers per channel: the
    /// module docs say why `ChannelSpread::Operations` over several channels is refused).
    pub fn new(options: LowerOptions) -> Self {
        DeadlockCheck { options, run: None }
    }

    fn refuse(&self) -> Option<String> {
        if self.options.channels == 0 {
            return Some("lower: channels = 0: needs at least one channel".into());
        }
        (self.options.spread == ChannelSpread::Operations && self.options.channels > 1).then(|| {
            format!(
                "cannot stream programs whose transfers are cut over {} channels (ChannelSpread::Operations): lower them and use check_deadlock",
                self.options.channels
            )
        })
    }

    /// The operation of `pair` at one end, in its threadblock.
    fn op(&self, pairs: &[Pair], pair: usize, side: Side) -> StepOp {
        let p = &pairs[pair];
        let (rank, peer, dir) = match side {
            Side::Send => (p.sender, p.receiver, 0),
            Side::Recv => (p.receiver, p.sender, 1),
        };
        let tb = match self.options.threadblocks {
            ThreadblockLayout::PerRank => (0, 0, 0),
            ThreadblockLayout::PerPeer => (p.channel, peer, dir),
        };
        StepOp { rank, tb, transfer: p.transfer, side, pair }
    }

    /// The waits among the operations of one step that can close a cycle (module docs), as
    /// (waiting pair, pair waited for, why).
    fn waits(&self, pairs: &[Pair]) -> Vec<(usize, usize, Wait<StepOp>)> {
        let mut waits = Vec::new();
        // Threadblock order: each rank's operations of the step in rank order, which is sends then
        // receives (or the reverse), each in transfer order.
        let groups = if self.options.recv_first { [Side::Recv, Side::Send] } else { [Side::Send, Side::Recv] };
        let mut last: HashMap<(usize, TbKey), StepOp> = HashMap::new();
        for side in groups {
            for i in 0..pairs.len() {
                let op = self.op(pairs, i, side);
                if let Some(prev) = last.insert((op.rank, op.tb), op) {
                    waits.push((i, prev.pair, Wait { from: op, to: prev, why: Why::Earlier }));
                }
            }
        }
        waits
    }
}

impl Run {
    /// The transfers of a step as pairs of ranks with their channels; `Err` names the first path
    /// end that is not a rank (there are no programs for such a schedule). Transfers whose paths
    /// are broken or start and end at one rank fail rule 1 and are left out.
    fn pairs(&self, index: usize, step: &Step, channels: usize) -> Result<Vec<Pair>, Diagnostic> {
        let (t, c) = (&self.topology, &self.collective);
        let mut pairs = Vec::with_capacity(step.transfers.len());
        let mut count: HashMap<(usize, usize), usize> = HashMap::new();
        for (ti, tr) in step.transfers.iter().enumerate() {
            let (Some(first), Some(last)) = (tr.path.first(), tr.path.last()) else { continue };
            if first.index() >= t.num_links() || last.index() >= t.num_links() {
                continue;
            }
            let (a, b) = (t.link(*first).src, t.link(*last).dst);
            let rank = |n: NodeId, end: &str| {
                c.rank_index(n).ok_or_else(|| Diagnostic {
                    rule: Rule::Deadlock,
                    step: Some(index),
                    transfer: Some(ti),
                    subject: Some(format!("node {n} {}", t.node(n).name)),
                    message: format!(
                        "cannot lower the schedule: the path {end} at node {n} {}, which is not a rank of the collective: a runtime runs a program on \
                         each rank and on nothing else (docs/design/MODEL.md section 1); later steps are not checked",
                        t.node(n).name
                    ),
                })
            };
            let (sender, receiver) = (rank(a, "starts")?, rank(b, "ends")?);
            if sender == receiver {
                continue;
            }
            let channel = if channels == 1 {
                0
            } else {
                let n = count.entry((sender, receiver)).or_insert(0);
                *n += 1;
                (*n - 1) % channels
            };
            pairs.push(Pair { transfer: ti, sender, receiver, channel, reduce: tr.op == Op::Reduce });
        }
        Ok(pairs)
    }
}

/// Whether a graph over `n` nodes given by its edges has a cycle (Kahn's algorithm).
fn has_cycle(n: usize, edges: &[(usize, usize, Wait<StepOp>)]) -> bool {
    let mut start = vec![0usize; n + 1];
    let mut indegree = vec![0u32; n];
    for &(from, to, _) in edges {
        start[from + 1] += 1;
        indegree[to] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut targets = vec![0usize; edges.len()];
    let mut fill = start.clone();
    for &(from, to, _) in edges {
        targets[fill[from]] = to;
        fill[from] += 1;
    }
    let mut free: Vec<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut removed = 0;
    while let Some(v) = free.pop() {
        removed += 1;
        for &w in &targets[start[v]..start[v + 1]] {
            indegree[w] -= 1;
            if indegree[w] == 0 {
                free.push(w);
            }
        }
    }
    removed < n
}

impl Check for DeadlockCheck {
    fn begin(&mut self, header: &ScheduleHeader, out: &mut Findings) {
        if let Some(why) = self.refuse() {
            out.fail(Diagnostic { rule: Rule::Deadlock, step: None, transfer: None, subject: None, message: why });
            return;
        }
        self.run = Some(Run { topology: header.topology.clone(), collective: header.collective.clone(), stopped: false });
    }

    fn step(&mut self, index: usize, step: &Step, out: &mut Findings) {
        let Some(run) = self.run.as_ref().filter(|r| !r.stopped) else { return };
        match run.pairs(index, step, self.options.channels) {
            Ok(pairs) => {
                let waits = self.waits(&pairs);
                if has_cycle(pairs.len(), &waits) {
                    report_cycles(index, &pairs, waits, |i, side| self.op(&pairs, i, side), out);
                }
            }
            Err(d) => {
                out.fail(d);
                if let Some(r) = self.run.as_mut() {
                    r.stopped = true;
                }
            }
        }
    }
}

/// Reports the cycles of a step's wait-for graph, each once.
fn report_cycles(index: usize, pairs: &[Pair], waits: Vec<(usize, usize, Wait<StepOp>)>, op: impl Fn(usize, Side) -> StepOp, out: &mut Findings) {
    let members = (0..pairs.len()).map(|i| vec![op(i, Side::Send), op(i, Side::Recv)]).collect();
    let mut graph = WaitGraph::new(members);
    for (from, to, w) in waits {
        graph.add(from, to, w);
    }
    let what = |o: StepOp| {
        let p = &pairs[o.pair];
        match (o.side, p.reduce) {
            (Side::Send, _) => format!("rank {} send to {}", o.rank, p.receiver),
            (Side::Recv, false) => format!("rank {} recv from {}", o.rank, p.sender),
            (Side::Recv, true) => format!("rank {} recv-reduce from {}", o.rank, p.sender),
        }
    };
    let describe = |o: StepOp| format!("{} (step {index}, transfer {}, channel {})", what(o), o.transfer, pairs[o.pair].channel);
    for (start, story) in graph.cycles(describe) {
        out.fail(Diagnostic {
            rule: Rule::Deadlock,
            step: Some(index),
            transfer: Some(start.transfer),
            subject: Some(what(start)),
            message: format!("wait-for cycle under rendezvous semantics: {story}"),
        });
    }
}
