//! Lowering of a schedule to the per-rank programs a runtime runs.
//!
//! A [`Schedule`] says which pieces cross which paths in which step; a runtime instead runs, on
//! every rank, ordered sends, receives and local copies in threadblocks, and pairs the k-th send
//! from rank a to rank b on channel c with the k-th receive of b from a on c (first in, first
//! out). [`lower`] produces these [`Programs`]; docs/design/MODEL.md rule 6 (`verify::check_deadlock`) and
//! the MSCCL exporter (`export::msccl`) both read them, so the program that is checked is the
//! program that is exported.
//!
//! Choices, all visible in [`LowerOptions`] because each one decides whether the programs can
//! deadlock under blocking (rendezvous) semantics:
//!
//! - **Ranks**: the npus at the two ends of each transfer path (every end must be a rank of the
//!   collective); interior nodes are routers and do nothing in the programs.
//! - **Buffers** (offsets in chunks, one chunk per piece): `input` and `output` follow MSCCL's
//!   layout for the collective (see [`Layout`]); a piece that a rank receives but is not a
//!   destination of goes to a fresh `scratch` slot (store-and-forward), and so does a piece that
//!   a rank receives in a step where it also sends it, so that no receive overwrites what a send
//!   of the same step still reads (that would add a wait from a receive to a send of the same
//!   step, which closes a cycle around any ring that updates in place).
//! - **Order within a rank** (its "rank order"): step by step; within a step all sends before all
//!   receives (or receives first with [`LowerOptions::recv_first`]), each group in transfer order.
//!   With one threadblock per peer and direction (the default, as MSCCL runs it) this order only
//!   decides the order inside each threadblock, and every threadblock serves one (sender,
//!   receiver, channel) stream, so both ends of a stream list its transfers in the same order and
//!   no cycle can form. With a single threadblock per rank ([`ThreadblockLayout::PerRank`]) it is
//!   the order that matters: sends first means every rank of a ring blocks in its send while its
//!   neighbour blocks in its own send, which rule 6 reports as a cycle; receives first deadlocks
//!   the same way.
//! - **Dependencies** between threadblocks of a rank are derived from the buffers: a send or a
//!   reducing receive waits for the operation that last wrote the chunks it reads; a receive or
//!   copy waits for the last writer of the chunks it writes and for the reads of them since.
//!   Semantics are those of the schedule (docs/design/MODEL.md section 3): the sends of step t read the state
//!   at the start of step t.

use crate::collective::{Collective, CollectiveKind, Destinations, PieceId};
use crate::error::{Error, Result};
use crate::schedule::{Op, Schedule, Step};
use crate::topology::NodeId;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// A rank's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Buffer {
    /// What the rank contributes (read only).
    Input,
    /// What the collective leaves at the rank.
    Output,
    /// Relay space for store-and-forward hops.
    Scratch,
}

impl Buffer {
    /// MSCCL's name of the buffer (`i`, `o`, `s`).
    pub fn short(self) -> &'static str {
        match self {
            Buffer::Input => "i",
            Buffer::Output => "o",
            Buffer::Scratch => "s",
        }
    }
}

/// Contiguous chunks of one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slice {
    /// Which buffer.
    pub buffer: Buffer,
    /// The first chunk.
    pub offset: usize,
    /// How many chunks.
    pub count: usize,
}

impl fmt::Display for Slice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}..{}]", self.buffer.short(), self.offset, self.offset + self.count)
    }
}

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Sends `src` to rank index `peer`.
    Send {
        /// The receiving rank (index into the collective's ranks).
        peer: usize,
    },
    /// Receives from rank index `peer` into `dst`; with `reduce`, combines the received data with
    /// the local operand `src` first.
    Recv {
        /// The sending rank (index into the collective's ranks).
        peer: usize,
        /// Whether the received data is reduced with the local `src`.
        reduce: bool,
    },
    /// Copies `src` to `dst` on the rank itself.
    Copy,
}

/// An operation of a threadblock of a rank program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Send, receive or local copy.
    pub kind: OpKind,
    /// The channel its send or receive travels on (0 for copies).
    pub channel: usize,
    /// The pieces it moves, in chunk order (all_to_all self blocks appear as `[i, i, k]`).
    pub pieces: Vec<PieceId>,
    /// The local chunks it reads: a send's data, a reducing receive's local operand, a copy's
    /// source.
    pub src: Option<Slice>,
    /// The local chunks it writes: a receive's or a copy's destination.
    pub dst: Option<Slice>,
    /// The partner's chunks (a send: where the receiver writes; a receive: where the sender
    /// reads). Informational: runtimes address only local buffers.
    pub remote: Option<Slice>,
    /// The step and transfer of the schedule it comes from (`None` for the local copies that
    /// place a rank's own data or move a piece from scratch into the output at the end).
    pub origin: Option<(usize, usize)>,
    /// Operations of other threadblocks of the same rank that must complete before this one
    /// starts (at most one per threadblock: the latest).
    pub deps: Vec<OpRef>,
}

/// An operation of a rank program: threadblock and position in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpRef {
    /// Threadblock index within the rank.
    pub tb: usize,
    /// Position within the threadblock.
    pub op: usize,
}

/// A sequence of operations that run in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Threadblock {
    /// The one peer it sends to, if any (MSCCL's `send`; `None` for a per-rank threadblock
    /// that sends to many).
    pub send: Option<usize>,
    /// The one peer it receives from, if any (MSCCL's `recv`).
    pub recv: Option<usize>,
    /// Its channel.
    pub channel: usize,
    /// The operations in the order they run.
    pub ops: Vec<Operation>,
}

/// What one rank runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankProgram {
    /// The npu.
    pub node: NodeId,
    /// Chunks of the input buffer.
    pub input_chunks: usize,
    /// Chunks of the output buffer.
    pub output_chunks: usize,
    /// Chunks of scratch space the program uses.
    pub scratch_chunks: usize,
    /// Its threadblocks.
    pub threadblocks: Vec<Threadblock>,
}

/// The lowered schedule: one program per rank, indexed by rank index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Programs {
    /// The collective's kind (decides the buffer layout).
    pub kind: CollectiveKind,
    /// P: pieces per block.
    pub pieces_per_block: u32,
    /// Whether every piece has the same size (runtimes with equal chunks need it).
    pub uniform: bool,
    /// Channels used.
    pub channels: usize,
    /// One program per rank, in the collective's rank order.
    pub ranks: Vec<RankProgram>,
}

impl Programs {
    /// Total operations over all ranks.
    pub fn num_ops(&self) -> usize {
        self.ranks.iter().flat_map(|r| &r.threadblocks).map(|t| t.ops.len()).sum()
    }
}

/// How operations are grouped into threadblocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ThreadblockLayout {
    /// As MSCCL realizes channels: one threadblock per (channel, peer, direction), plus one for
    /// local copies.
    #[default]
    PerPeer,
    /// One threadblock per rank running everything in rank order (what a single-stream runtime
    /// does; deadlocks under rendezvous on any ring step).
    PerRank,
}

/// What [`LowerOptions::channels`] spreads round-robin per (sender, receiver) pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChannelSpread {
    /// Whole transfers: all operations of a transfer share a channel.
    #[default]
    Transfers,
    /// Operations (the contiguous runs of chunks a transfer is cut into): a transfer whose
    /// chunks are scattered in the buffers becomes many operations, and spreading them is what
    /// keeps each threadblock under a runtime's step limit.
    Operations,
}

/// The choices of the lowering (module docs: which of them decide deadlock freedom).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerOptions {
    /// The transfers of a step between one (sender, receiver) pair are spread over this many
    /// channels round-robin, in transfer order, from the channel of the sum of the pair's rank
    /// indices (default 1).
    pub channels: usize,
    /// What is spread over the channels (default: whole transfers).
    pub spread: ChannelSpread,
    /// Within a step, put all receives before all sends in rank order (default: sends first).
    pub recv_first: bool,
    /// How operations are grouped into threadblocks.
    pub threadblocks: ThreadblockLayout,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions { channels: 1, spread: ChannelSpread::Transfers, recv_first: false, threadblocks: ThreadblockLayout::PerPeer }
    }
}

/// Where the pieces of a collective sit in MSCCL's input and output buffers (P = pieces per
/// block, R = ranks):
///
/// | kind | input chunks | piece in input | output chunks | piece in output |
/// |---|---|---|---|---|
/// | all_to_all | R*P | `[i,j,k]` at rank i, chunk j*P+k | R*P | at rank j, chunk i*P+k |
/// | all_gather | P | `[i,k]` at rank i, chunk k | R*P | chunk i*P+k |
/// | reduce_scatter | R*P | `[j,k]`, chunk j*P+k | P | at rank j, chunk k |
/// | all_reduce | R*P | `[j,k]`, chunk j*P+k | R*P | chunk j*P+k |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The collective's kind.
    pub kind: CollectiveKind,
    /// R.
    pub ranks: usize,
    /// P.
    pub pieces: usize,
}

impl Layout {
    /// The layout of a collective.
    pub fn of(c: &Collective) -> Self {
        Layout { kind: c.kind, ranks: c.num_ranks(), pieces: c.pieces as usize }
    }

    /// Chunks of every rank's input buffer.
    pub fn input_chunks(&self) -> usize {
        match self.kind {
            CollectiveKind::AllGather => self.pieces,
            _ => self.ranks * self.pieces,
        }
    }

    /// Chunks of every rank's output buffer.
    pub fn output_chunks(&self) -> usize {
        match self.kind {
            CollectiveKind::ReduceScatter => self.pieces,
            _ => self.ranks * self.pieces,
        }
    }

    /// The input chunk of a piece (at its source rank, or at every rank for reducing kinds).
    pub fn input_offset(&self, p: &PieceId) -> usize {
        let (x, k) = (p.parts()[p.parts().len() - 2] as usize, p.parts()[p.parts().len() - 1] as usize);
        match self.kind {
            // [i, j, k]: the block for rank j.
            CollectiveKind::AllToAll => x * self.pieces + k,
            CollectiveKind::AllGather => k,
            _ => x * self.pieces + k,
        }
    }

    /// The output chunk of a piece at a destination.
    pub fn output_offset(&self, p: &PieceId) -> usize {
        let parts = p.parts();
        let k = parts[parts.len() - 1] as usize;
        match self.kind {
            CollectiveKind::ReduceScatter => k,
            _ => parts[0] as usize * self.pieces + k,
        }
    }
}

/// One chunk of a rank's buffers.
type Slot = (Buffer, usize);

/// The (sender, receiver) ranks of a step's transfers, and which (rank, piece) it sends.
type StepEnds = (Vec<(usize, usize)>, HashSet<(usize, PieceId)>);

/// An operation before it is placed in a threadblock.
struct Pending {
    op: Operation,
    /// Sort key of the rank order: (phase of the program, step, send/receive group, transfer,
    /// segment).
    key: (u8, usize, u8, usize, usize),
    /// Operations of the same rank (indices into its pending list) it depends on.
    deps: Vec<usize>,
}

/// Per-chunk hazard tracking of one rank: the last writer and the reads since.
#[derive(Default)]
struct Hazards {
    last_write: HashMap<Slot, usize>,
    reads: HashMap<Slot, Vec<usize>>,
}

impl Hazards {
    fn read(&mut self, slots: &[Slot], op: usize, deps: &mut Vec<usize>) {
        for s in slots {
            deps.extend(self.last_write.get(s).copied());
            self.reads.entry(*s).or_default().push(op);
        }
    }

    fn write(&mut self, slots: &[Slot], op: usize, deps: &mut Vec<usize>) {
        for s in slots {
            deps.extend(self.last_write.insert(*s, op));
            deps.extend(self.reads.remove(s).unwrap_or_default().into_iter().filter(|&r| r != op));
        }
    }
}

/// What a transfer moves per piece, before it is cut into contiguous segments.
struct Move {
    piece: PieceId,
    src: Slot,
    dst: Slot,
    operand: Option<Slot>,
}

/// Lowers a schedule to per-rank programs (module docs: the choices made).
///
/// Fails when a path does not start and end at ranks of the collective, or when a sender does
/// not hold a piece it sends (rule 3: verify the schedule first).
pub fn lower(schedule: &Schedule, opts: &LowerOptions) -> Result<Programs> {
    if opts.channels == 0 {
        return Err(Error::bad("lower: channels = 0: needs at least one channel"));
    }
    let mut l = Lowering::new(schedule, opts);
    l.own_blocks();
    for (si, step) in schedule.steps.iter().enumerate() {
        l.step(si, step)?;
    }
    l.final_copies();
    Ok(l.finish())
}

/// The state of a lowering: every rank's operations so far (not yet placed in threadblocks), the
/// buffer hazards that order them, and where each rank holds each piece.
struct Lowering<'a> {
    schedule: &'a Schedule,
    opts: &'a LowerOptions,
    layout: Layout,
    pending: Vec<Vec<Pending>>,
    hazards: Vec<Hazards>,
    /// Scratch chunks used so far, per rank.
    scratch: Vec<usize>,
    /// Where each rank holds its current value of a piece; absent means the rank's initial
    /// holding (see [`Lowering::initial`]).
    held: HashMap<(usize, PieceId), Slot>,
    /// Operations so far per (sender, receiver) pair, for spreading operations over channels.
    pair_ops: HashMap<(usize, usize), usize>,
}

impl<'a> Lowering<'a> {
    fn new(schedule: &'a Schedule, opts: &'a LowerOptions) -> Self {
        let c = &schedule.header.collective;
        let r = c.num_ranks();
        Lowering {
            schedule,
            opts,
            layout: Layout::of(c),
            pending: (0..r).map(|_| Vec::new()).collect(),
            hazards: (0..r).map(|_| Hazards::default()).collect(),
            scratch: vec![0; r],
            held: HashMap::new(),
            pair_ops: HashMap::new(),
        }
    }

    fn collective(&self) -> &'a Collective {
        &self.schedule.header.collective
    }

    /// Where a rank holds a piece before any transfer: its input chunk, if it holds it at all.
    fn initial(&self, rank: usize, p: &PieceId) -> Option<Slot> {
        match self.collective().source(p) {
            Some(s) if s != rank => None,
            _ => Some((Buffer::Input, self.layout.input_offset(p))),
        }
    }

    /// Where a rank holds a piece now.
    fn holding(&self, rank: usize, p: &PieceId) -> Option<Slot> {
        self.held.get(&(rank, *p)).copied().or_else(|| self.initial(rank, p))
    }

    fn is_destination(&self, rank: usize, p: &PieceId) -> bool {
        match self.collective().destinations(p) {
            Destinations::One(d) => d == rank,
            Destinations::All => true,
        }
    }

    /// A rank's own all_to_all block never travels, but the runtime must still place it.
    fn own_blocks(&mut self) {
        if self.collective().kind != CollectiveKind::AllToAll {
            return;
        }
        let p = self.layout.pieces;
        for (i, list) in self.pending.iter_mut().enumerate() {
            let pieces: Vec<PieceId> = (0..p).map(|k| PieceId::a2a(i as u32, i as u32, k as u32)).collect();
            let src = Slice { buffer: Buffer::Input, offset: i * p, count: p };
            let dst = Slice { buffer: Buffer::Output, offset: i * p, count: p };
            let op = Operation { kind: OpKind::Copy, channel: 0, pieces, src: Some(src), dst: Some(dst), remote: None, origin: None, deps: Vec::new() };
            let mut deps = Vec::new();
            self.hazards[i].write(&slots(&dst), list.len(), &mut deps);
            list.push(Pending { op, key: (0, 0, 0, 0, 0), deps });
        }
    }

    /// Lowers one step: sends read the state at its start, receives move the pieces, and both
    /// become operations of their ranks.
    fn step(&mut self, si: usize, step: &Step) -> Result<()> {
        let (ends, sent_here) = self.ends(si, step)?;
        let sources = self.sources(si, step, &ends)?;
        let moves = self.receives(si, step, &ends, &sent_here, &sources)?;
        self.operations(si, step, &ends, &moves);
        Ok(())
    }

    /// The (sender, receiver) ranks of every transfer of a step, and which rank sends which piece
    /// in it.
    fn ends(&self, si: usize, step: &Step) -> Result<StepEnds> {
        let topo = &self.schedule.header.topology;
        let c = self.collective();
        let mut ends = Vec::with_capacity(step.transfers.len());
        let mut sent_here = HashSet::new();
        for (ti, t) in step.transfers.iter().enumerate() {
            let at = |what: &str| format!("step {si}, transfer {ti}: {what}");
            let (Some(first), Some(last)) = (t.path.first(), t.path.last()) else {
                return Err(Error::bad(at("empty path")));
            };
            if first.index() >= topo.num_links() || last.index() >= topo.num_links() {
                return Err(Error::bad(at("no such link")));
            }
            let (a, b) = (topo.link(*first).src, topo.link(*last).dst);
            let rank = |n: NodeId| c.rank_index(n).ok_or_else(|| Error::bad(at(&format!("node {n} ({}) is not a rank of the collective", topo.node(n).name))));
            let (ra, rb) = (rank(a)?, rank(b)?);
            if ra == rb {
                return Err(Error::bad(at(&format!("the path starts and ends at rank {ra}"))));
            }
            sent_here.extend(t.pieces.iter().map(|p| (ra, *p)));
            ends.push((ra, rb));
        }
        Ok((ends, sent_here))
    }

    /// Sends read the state at the start of the step: every source is resolved before any
    /// receive of the step moves a piece. Each transfer's pieces in the sender's chunk order, so
    /// that runs of chunks become one operation.
    fn sources(&self, si: usize, step: &Step, ends: &[(usize, usize)]) -> Result<Vec<Vec<(PieceId, Slot)>>> {
        let mut sources = Vec::with_capacity(step.transfers.len());
        for (ti, t) in step.transfers.iter().enumerate() {
            let ra = ends[ti].0;
            let mut v = Vec::with_capacity(t.pieces.len());
            for p in &t.pieces {
                let slot = self.holding(ra, p).ok_or_else(|| {
                    Error::bad(format!("step {si}, transfer {ti}: rank {ra} sends piece {p}, which it does not hold (rule 3: verify the schedule first)"))
                })?;
                v.push((*p, slot));
            }
            v.sort_by_key(|&(_, s)| s);
            v.dedup_by_key(|&mut (p, _)| p);
            sources.push(v);
        }
        Ok(sources)
    }

    /// Receives, in transfer order; each moves its pieces, so a second reduce of the same piece
    /// in the step reads the first one's result (docs/design/MODEL.md: disjoint reduces merge).
    /// A piece lands in the receiver's output when it is a destination that does not send it on
    /// in this step, else in scratch.
    fn receives(
        &mut self,
        si: usize,
        step: &Step,
        ends: &[(usize, usize)],
        sent_here: &HashSet<(usize, PieceId)>,
        sources: &[Vec<(PieceId, Slot)>],
    ) -> Result<Vec<Vec<Move>>> {
        let mut moves_of = Vec::with_capacity(step.transfers.len());
        for (ti, t) in step.transfers.iter().enumerate() {
            let rb = ends[ti].1;
            let reduce = t.op == Op::Reduce;
            let mut moves = Vec::with_capacity(sources[ti].len());
            for &(p, src) in &sources[ti] {
                let current = self.holding(rb, &p);
                let operand = if reduce {
                    Some(current.ok_or_else(|| Error::bad(format!("step {si}, transfer {ti}: rank {rb} reduces piece {p} into a value it does not hold")))?)
                } else {
                    None
                };
                let dst = if self.is_destination(rb, &p) && !sent_here.contains(&(rb, p)) {
                    (Buffer::Output, self.layout.output_offset(&p))
                } else {
                    self.scratch[rb] += 1;
                    (Buffer::Scratch, self.scratch[rb] - 1)
                };
                self.held.insert((rb, p), dst);
                moves.push(Move { piece: p, src, dst, operand });
            }
            moves_of.push(moves);
        }
        Ok(moves_of)
    }

    /// The operations of a step: all sends first (they read the start-of-step state), then the
    /// receives; the rank order may still put receives first (`recv_first`). Channels go
    /// round-robin per (sender, receiver) pair: whole transfers in transfer order, restarting
    /// every step; operations in operation order, continuing from step to step (so that every
    /// channel gets its share even where a pair has one short transfer per step).
    fn operations(&mut self, si: usize, step: &Step, ends: &[(usize, usize)], moves_of: &[Vec<Move>]) {
        let opts = self.opts;
        let mut pair_count: HashMap<(usize, usize), usize> =
            if opts.spread == ChannelSpread::Operations { std::mem::take(&mut self.pair_ops) } else { HashMap::new() };
        // Each pair starts at its own channel (the sum of its ranks), so that pairs with one
        // transfer each (a pairwise all_to_all: 63 peers a gpu on 64 ranks) spread over the
        // channels instead of all taking channel 0 (MSCCL's readers take at most 32 sending and
        // 32 receiving threadblocks per channel).
        let mut next_channel = |pair: (usize, usize)| {
            let n = pair_count.entry(pair).or_insert(0);
            *n += 1;
            (*n - 1 + pair.0 + pair.1) % opts.channels
        };
        let (send_group, recv_group) = if opts.recv_first { (1, 0) } else { (0, 1) };
        let mut recv_ops: Vec<(usize, Pending, Vec<Slot>, Vec<Slot>)> = Vec::new();
        for (ti, t) in step.transfers.iter().enumerate() {
            let (ra, rb) = ends[ti];
            let reduce = t.op == Op::Reduce;
            let transfer_channel = if opts.spread == ChannelSpread::Transfers { next_channel((ra, rb)) } else { 0 };
            for (seg, run) in segments(&moves_of[ti]).into_iter().enumerate() {
                let channel = if opts.spread == ChannelSpread::Transfers { transfer_channel } else { next_channel((ra, rb)) };
                let pieces: Vec<PieceId> = run.iter().map(|m| m.piece).collect();
                let src = slice(run.iter().map(|m| m.src));
                let dst = slice(run.iter().map(|m| m.dst));
                let operand = if reduce { Some(slice(run.iter().map(|m| m.operand.expect("reduce has an operand")))) } else { None };
                let origin = Some((si, ti));
                let send = Operation {
                    kind: OpKind::Send { peer: rb },
                    channel,
                    pieces: pieces.clone(),
                    src: Some(src),
                    dst: None,
                    remote: Some(dst),
                    origin,
                    deps: Vec::new(),
                };
                let idx = self.pending[ra].len();
                let mut deps = Vec::new();
                self.hazards[ra].read(&slots(&src), idx, &mut deps);
                self.pending[ra].push(Pending { op: send, key: (1, si, send_group, ti, seg), deps });
                let recv = Operation {
                    kind: OpKind::Recv { peer: ra, reduce },
                    channel,
                    pieces,
                    src: operand,
                    dst: Some(dst),
                    remote: Some(src),
                    origin,
                    deps: Vec::new(),
                };
                let reads = operand.map(|s| slots(&s)).unwrap_or_default();
                recv_ops.push((rb, Pending { op: recv, key: (1, si, recv_group, ti, seg), deps: Vec::new() }, reads, slots(&dst)));
            }
        }
        if opts.spread == ChannelSpread::Operations {
            self.pair_ops = pair_count;
        }
        for (rb, mut p, reads, writes) in recv_ops {
            let idx = self.pending[rb].len();
            self.hazards[rb].read(&reads, idx, &mut p.deps);
            self.hazards[rb].write(&writes, idx, &mut p.deps);
            self.pending[rb].push(p);
        }
    }

    /// A destination whose value ended in scratch (or still sits in its input) copies it into
    /// its output.
    fn final_copies(&mut self) {
        let c = self.collective();
        for rank in 0..c.num_ranks() {
            let mut moves = Vec::new();
            for p in destined(c, &self.layout, rank) {
                let Some(at) = self.holding(rank, &p) else { continue };
                let out = (Buffer::Output, self.layout.output_offset(&p));
                if at != out {
                    moves.push(Move { piece: p, src: at, dst: out, operand: None });
                }
            }
            moves.sort_by_key(|m| m.src);
            for (seg, run) in segments(&moves).into_iter().enumerate() {
                let src = slice(run.iter().map(|m| m.src));
                let dst = slice(run.iter().map(|m| m.dst));
                let pieces = run.iter().map(|m| m.piece).collect();
                // Spread operations spread the copies too, one copying threadblock per channel.
                let channel = if self.opts.spread == ChannelSpread::Operations { seg % self.opts.channels.max(1) } else { 0 };
                let op = Operation { kind: OpKind::Copy, channel, pieces, src: Some(src), dst: Some(dst), remote: None, origin: None, deps: Vec::new() };
                let idx = self.pending[rank].len();
                let mut deps = Vec::new();
                self.hazards[rank].read(&slots(&src), idx, &mut deps);
                self.hazards[rank].write(&slots(&dst), idx, &mut deps);
                self.pending[rank].push(Pending { op, key: (2, 0, 0, 0, seg), deps });
            }
        }
    }

    /// Every rank's operations placed in threadblocks.
    fn finish(self) -> Programs {
        let c = self.collective();
        let (layout, scratch, opts) = (self.layout, self.scratch, self.opts);
        let ranks = self
            .pending
            .into_iter()
            .enumerate()
            .map(|(i, list)| RankProgram {
                node: c.ranks[i],
                input_chunks: layout.input_chunks(),
                output_chunks: layout.output_chunks(),
                scratch_chunks: scratch[i],
                threadblocks: place(list, opts),
            })
            .collect();
        Programs { kind: c.kind, pieces_per_block: c.pieces, uniform: c.is_uniform(), channels: opts.channels, ranks }
    }
}

/// The pieces a rank must hold in its output at the end.
fn destined(c: &Collective, layout: &Layout, rank: usize) -> Vec<PieceId> {
    let (rr, p) = (layout.ranks as u32, layout.pieces as u32);
    let me = rank as u32;
    match c.kind {
        CollectiveKind::AllToAll => (0..rr).filter(|&i| i != me).flat_map(|i| (0..p).map(move |k| PieceId::a2a(i, me, k))).collect(),
        CollectiveKind::AllGather | CollectiveKind::AllReduce => (0..rr).flat_map(|x| (0..p).map(move |k| PieceId::block(x, k))).collect(),
        CollectiveKind::ReduceScatter => (0..p).map(|k| PieceId::block(me, k)).collect(),
    }
}

/// The chunks of a slice.
fn slots(s: &Slice) -> Vec<Slot> {
    (s.offset..s.offset + s.count).map(|o| (s.buffer, o)).collect()
}

/// The slice of consecutive slots (the caller guarantees they are consecutive).
fn slice(mut it: impl Iterator<Item = Slot>) -> Slice {
    let (buffer, offset) = it.next().expect("a segment is not empty");
    Slice { buffer, offset, count: 1 + it.count() }
}

/// Cuts moves into maximal runs whose source, destination and operand chunks all advance by one
/// in the same buffers: each run is one operation on both sides, so sender and receiver cut a
/// transfer the same way.
fn segments(moves: &[Move]) -> Vec<&[Move]> {
    let next = |a: Slot, b: Slot| a.0 == b.0 && a.1 + 1 == b.1;
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=moves.len() {
        let joined = i < moves.len() && {
            let (x, y) = (&moves[i - 1], &moves[i]);
            next(x.src, y.src)
                && next(x.dst, y.dst)
                && match (x.operand, y.operand) {
                    (None, None) => true,
                    (Some(a), Some(b)) => next(a, b),
                    _ => false,
                }
        };
        if !joined && i > start {
            out.push(&moves[start..i]);
            start = i;
        }
    }
    out
}

/// Places a rank's operations into threadblocks in rank order and turns their dependencies
/// into references to other threadblocks (a dependency inside the same threadblock is implied
/// by its order).
fn place(mut list: Vec<Pending>, opts: &LowerOptions) -> Vec<Threadblock> {
    // Rank order; the sort is stable, and dependencies always point to operations earlier in
    // it (sends read earlier steps only, receives of a step depend on earlier transfers).
    let mut order: Vec<usize> = (0..list.len()).collect();
    order.sort_by_key(|&i| list[i].key);
    // Threadblock key: (channel, peer, direction), local copies last (by channel).
    let tb_key = |op: &Operation| -> (usize, usize, u8) {
        match (opts.threadblocks, op.kind) {
            (ThreadblockLayout::PerRank, _) => (0, 0, 0),
            (_, OpKind::Send { peer }) => (op.channel, peer, 0),
            (_, OpKind::Recv { peer, .. }) => (op.channel, peer, 1),
            (_, OpKind::Copy) => (usize::MAX, op.channel, 2),
        }
    };
    let mut keys: Vec<(usize, usize, u8)> = list.iter().map(|p| tb_key(&p.op)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut tbs: Vec<Threadblock> = keys
        .iter()
        .map(|&(channel, peer, dir)| match (opts.threadblocks, dir) {
            (ThreadblockLayout::PerRank, _) => Threadblock { send: None, recv: None, channel: 0, ops: Vec::new() },
            (_, 0) => Threadblock { send: Some(peer), recv: None, channel, ops: Vec::new() },
            (_, 1) => Threadblock { send: None, recv: Some(peer), channel, ops: Vec::new() },
            // Copies: the key holds their channel where a peer would be.
            (_, _) => Threadblock { send: None, recv: None, channel: peer, ops: Vec::new() },
        })
        .collect();
    let mut at: Vec<Option<OpRef>> = vec![None; list.len()];
    let mut known = Known::new(tbs.len(), list.len());
    for &i in &order {
        let tb = keys.binary_search(&tb_key(&list[i].op)).expect("every key has a threadblock");
        at[i] = Some(OpRef { tb, op: tbs[tb].ops.len() });
        let mut deps: Vec<OpRef> = list[i].deps.iter().map(|&d| at[d].expect("dependencies come earlier in rank order")).filter(|d| d.tb != tb).collect();
        // Waiting for the latest operation of a threadblock covers its earlier ones.
        deps.sort_unstable();
        deps.reverse();
        deps.dedup_by_key(|d| d.tb);
        deps.reverse();
        let mut op = std::mem::replace(&mut list[i].op, empty_op());
        op.deps = known.place(tb, tbs[tb].ops.len(), deps);
        tbs[tb].ops.push(op);
    }
    tbs
}

/// What a rank's threadblocks know has completed, to leave out dependencies that others already
/// imply: each one costs a step of its threadblock (MSCCL waits for one dependency per step),
/// and runtimes cap the steps per threadblock.
///
/// For every placed operation, its closure: per threadblock, one past the last of its operations
/// that has completed when this one has (itself, the operations before it in its threadblock,
/// what it waits for, and theirs in turn). A dependency on operation k of threadblock u is implied
/// when the operation before in the same threadblock, or another dependency, has u's entry past k.
/// Ranks with more than [`Known::MAX_ENTRIES`] entries keep their dependencies as they are.
struct Known {
    threadblocks: usize,
    /// closure[tb][k]: the closure of operation k of threadblock tb (empty when not kept).
    closure: Vec<Vec<Vec<u32>>>,
    on: bool,
}

impl Known {
    /// A cap on threadblocks x operations per rank (4 bytes each).
    const MAX_ENTRIES: usize = 1 << 26;

    fn new(threadblocks: usize, ops: usize) -> Self {
        Known { threadblocks, closure: vec![Vec::new(); threadblocks], on: threadblocks.saturating_mul(ops) <= Self::MAX_ENTRIES }
    }

    /// Records operation `index` of threadblock `tb` (placed in rank order, after everything it
    /// depends on) and returns the dependencies it still needs, in the order given.
    fn place(&mut self, tb: usize, index: usize, deps: Vec<OpRef>) -> Vec<OpRef> {
        if !self.on {
            return deps;
        }
        let implied = |d: &OpRef, by: &[u32]| by[d.tb] > d.op as u32;
        let before = self.closure[tb].last().cloned().unwrap_or_else(|| vec![0; self.threadblocks]);
        let of = |d: &OpRef| &self.closure[d.tb][d.op];
        let kept: Vec<OpRef> = deps.iter().filter(|d| !implied(d, &before) && !deps.iter().any(|e| e != *d && implied(d, of(e)))).copied().collect();
        let mut mine = before;
        for d in &kept {
            for (m, c) in mine.iter_mut().zip(of(d)) {
                *m = (*m).max(*c);
            }
        }
        mine[tb] = index as u32 + 1;
        self.closure[tb].push(mine);
        kept
    }
}

fn empty_op() -> Operation {
    Operation { kind: OpKind::Copy, channel: 0, pieces: Vec::new(), src: None, dst: None, remote: None, origin: None, deps: Vec::new() }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::algorithms::{torus_all_to_all, RingAlgorithm, Scheduler};
    use crate::topology::{torus, FaultPattern, Topology, TorusParams};

    /// A torus with failed cables (node id pairs).
    pub(crate) fn torus_with(dims: &[usize], cables: &[(u32, u32)]) -> Topology {
        let mut t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
        FaultPattern { cables: cables.iter().map(|&(a, b)| (NodeId(a), NodeId(b))).collect(), ..Default::default() }.apply(&mut t).unwrap();
        t
    }

    /// The torus all-to-all schedules the tests of rule 6 and the exporter run.
    pub(crate) fn torus_schedules() -> Vec<(String, Schedule)> {
        // Dimensions, failed cables, algorithm, scheduler.
        type Case = (&'static [usize], &'static [(u32, u32)], RingAlgorithm, Scheduler);
        let cases: [Case; 4] = [
            (&[4, 4], &[], RingAlgorithm::HalfRing, Scheduler::DimRotation),
            (&[3, 3, 3], &[], RingAlgorithm::HalfRing, Scheduler::DimRotation),
            (&[4, 4], &[(0, 1)], RingAlgorithm::FoldedRing, Scheduler::DimRotation),
            (&[5], &[(2, 3)], RingAlgorithm::FoldedRing, Scheduler::Sequential),
        ];
        cases
            .iter()
            .map(|(dims, cables, a, s)| {
                let t = torus_with(dims, cables);
                let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().take(t.num_npus()).collect(), 1 << 16, 1, None, &t).unwrap();
                (format!("{dims:?} faults {cables:?} {a:?} {s:?}"), torus_all_to_all(&t, &c, *a, *s).unwrap())
            })
            .collect()
    }

    #[test]
    fn sends_and_receives_pair_up_with_the_same_pieces() {
        for (name, s) in torus_schedules() {
            let p = lower(&s, &LowerOptions::default()).unwrap();
            let (mut sends, mut recvs) = (Vec::new(), Vec::new());
            for (ri, rp) in p.ranks.iter().enumerate() {
                for tb in &rp.threadblocks {
                    // One peer and one direction per threadblock.
                    assert!(tb.send.is_none() || tb.recv.is_none(), "{name}");
                    for op in &tb.ops {
                        match op.kind {
                            OpKind::Send { peer } => sends.push((ri, peer, op.pieces.clone())),
                            OpKind::Recv { peer, .. } => recvs.push((peer, ri, op.pieces.clone())),
                            OpKind::Copy => {}
                        }
                        let local = if matches!(op.kind, OpKind::Send { .. }) { op.src } else { op.dst };
                        assert!(local.is_some_and(|s| s.count == op.pieces.len()), "{name}");
                    }
                }
            }
            sends.sort();
            recvs.sort();
            assert_eq!(sends, recvs, "{name}");
            // One send per piece and transfer, however many links its path has.
            let carried: usize = s.steps.iter().flat_map(|st| &st.transfers).map(|t| t.pieces.len()).sum();
            assert_eq!(sends.iter().map(|s| s.2.len()).sum::<usize>(), carried, "{name}");
        }
    }

    #[test]
    fn relays_use_scratch_and_destinations_the_output() {
        let t = torus_with(&[3], &[]);
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 300, 1, None, &t).unwrap();
        let l = |a: u32, b: u32| t.link_between(NodeId(a), NodeId(b)).unwrap();
        // [0,2,0] goes 0 -> 1 -> 2 (store and forward through rank 1's scratch).
        let steps = vec![
            crate::schedule::Step { transfers: vec![crate::schedule::Transfer::hop(l(0, 1), Op::Copy, vec![PieceId::a2a(0, 2, 0), PieceId::a2a(0, 1, 0)])] },
            crate::schedule::Step { transfers: vec![crate::schedule::Transfer::hop(l(1, 2), Op::Copy, vec![PieceId::a2a(0, 2, 0)])] },
        ];
        let s = Schedule { header: crate::schedule::ScheduleHeader { topology: t.clone(), collective: c, meta: None }, steps };
        let p = lower(&s, &LowerOptions::default()).unwrap();
        let r1 = &p.ranks[1];
        assert_eq!(r1.scratch_chunks, 1);
        let recv = r1.threadblocks.iter().find(|tb| tb.recv == Some(0)).unwrap();
        // Chunk order of the sender: [0,1,0] (input chunk 1) then [0,2,0] (chunk 2); they land
        // in different buffers, so two operations.
        assert_eq!(recv.ops.len(), 2);
        assert_eq!(recv.ops[0].dst, Some(Slice { buffer: Buffer::Output, offset: 0, count: 1 }));
        assert_eq!(recv.ops[1].dst, Some(Slice { buffer: Buffer::Scratch, offset: 0, count: 1 }));
        let send = r1.threadblocks.iter().find(|tb| tb.send == Some(2)).unwrap();
        assert_eq!(send.ops[0].src, Some(Slice { buffer: Buffer::Scratch, offset: 0, count: 1 }));
        // The forward waits for the receive that filled the scratch chunk.
        let recv_tb = r1.threadblocks.iter().position(|tb| tb.recv == Some(0)).unwrap();
        assert_eq!(send.ops[0].deps, vec![OpRef { tb: recv_tb, op: 1 }]);
    }

    #[test]
    fn dependencies_that_others_imply_are_left_out() {
        let r = |tb, op| OpRef { tb, op };
        let mut k = Known::new(3, 4);
        assert_eq!(k.place(0, 0, vec![]), vec![]);
        assert_eq!(k.place(1, 0, vec![r(0, 0)]), vec![r(0, 0)]);
        // Threadblock 1's operation has waited for threadblock 0's: waiting for it covers both.
        assert_eq!(k.place(2, 0, vec![r(0, 0), r(1, 0)]), vec![r(1, 0)]);
        // The operation before in threadblock 2 has waited for it already.
        assert_eq!(k.place(2, 1, vec![r(0, 0)]), vec![]);
    }

    #[test]
    fn spread_operations_fill_every_channel_over_the_steps() {
        // A ring moves one transfer per pair and step; spreading operations per step would put
        // all of them on channel 0.
        let t = torus_with(&[6], &[]);
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 600, 1, None, &t).unwrap();
        let s = torus_all_to_all(&t, &c, RingAlgorithm::Ring, Scheduler::Sequential).unwrap();
        let p = lower(&s, &LowerOptions { channels: 2, spread: ChannelSpread::Operations, ..Default::default() }).unwrap();
        for rank in &p.ranks {
            let sends = |ch: usize| rank.threadblocks.iter().filter(|tb| tb.send.is_some() && tb.channel == ch).map(|tb| tb.ops.len()).sum::<usize>();
            assert!(sends(0).min(sends(1)) * 3 >= sends(0) + sends(1), "{} and {}", sends(0), sends(1));
        }
    }
}
