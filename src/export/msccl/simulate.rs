//! Runs an MSCCL program chunk by chunk as the runtime would, under its buffering or under
//! rendezvous, and tells where every chunk ends up or which threadblocks wait on each other
//! (docs/design/FORMATS.md "MSCCL XML", "Buffering").
//!
//! **Buffering.** Each connection (sender gpu, receiver gpu, channel) is a FIFO of
//! [`NCCL_STEPS`] slots in the receiver's memory; a chunk travels as [`chunk_slots`] slots: the
//! runtime's chunk is `MSCCL_CHUNKSTEPS` = [`CHUNK_STEPS`] slots under `proto="Simple"`, one
//! under LL and LL128. A step that sends `cnt` chunks writes that many slots per chunk in order
//! and waits only while the FIFO is full; a receive reads (and frees) the slots of its message as they arrive; a fused step
//! (`rcs`, `rrs`, `rrcs`) passes each slot on as it reads it, so it needs room downstream. With
//! [`Buffering::Rendezvous`] a connection holds no slot: a slot moves only when its receiver
//! takes it at once (through a chain of fused steps, all of them at once), the strict model
//! under which a program runs with any buffer size. Each threadblock runs its steps in order;
//! a step first waits for its dependencies (its own `depid`/`deps` and those of the `nop`s just
//! before it) until the threadblock waited on has finished the step that signals them
//! ([`super::Threadblock::signal_for`]).
//!
//! The k-th send of gpu a's threadblock with `send=b` on channel c is the k-th receive of gpu
//! b's threadblock with `recv=a` on channel c; those pairs must agree on `cnt`, else the program
//! is not run ([`SimError::Unpaired`]). The run is deterministic in what it reaches: each FIFO
//! has one writer and one reader and a blocked step is unblocked only by others' progress, so
//! whether it finishes does not depend on the order threadblocks are stepped in.
//!
//! **Data.** Every input chunk starts as its own value ([`ChunkValue`]); receives and copies
//! move values, reductions merge their contributor sets. In place, the buffers alias as the
//! runtime passes them: all-reduce and all-to-all read and write one buffer; all-gather's input
//! is chunks rank x P.. of its output, reduce-scatter's output chunks rank x P.. of its input
//! (P = nchunksperloop / ngpus). At the end the output buffers are compared with what `coll`
//! asks for. Every delivered message also gets a *level*, the step of a step-synchronous
//! schedule it can run in, which is what [`super::import_msccl`] builds a schedule from. A
//! message carries what its send read when it began, so its level is after the messages that
//! delivered what it read, after those that wrote what it overwrites, and not after the step in
//! which its sender overwrites what it read (a write follows the sends that read the old value,
//! whenever their receivers take them); a local `cpy` or `re` happens in the step of the
//! messages whose data it moves. Messages that overwrite what each other read (a swap) share a
//! level. The levels are given once the run is over, in an order that follows these
//! constraints, each message the first level they allow where its gpu pair carries nothing or
//! the same operation on other pieces. Given the
//! network's paths between the gpus ([`simulate_routed`]), a message also takes one of its
//! pair's candidate paths whose links no other pair uses in its level, else a later level: a
//! network that routes a send through switches carries it after the sends in its way.

use super::model::{buffer_index, Coll, Program, Proto, Runtime, StepKind};
use super::races::{HappensBefore, StepGraph, MAX_CLOCK_ENTRIES, MAX_ORDER_WORK};
use super::rules::{buffer_chunks, check_program};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;

/// Slots of one connection's FIFO (`NCCL_STEPS`).
pub const NCCL_STEPS: usize = 8;
/// Slots one chunk takes under `proto="Simple"` (`MSCCL_CHUNKSTEPS`).
pub const CHUNK_STEPS: usize = 4;

/// Slots one chunk takes under a protocol: msccl-executor-nccl `src/device/msccl_kernel.cu`
/// sizes a chunk as `Proto::calcBytePerStep()/sizeof(T) * (Proto::Id == NCCL_PROTO_SIMPLE ?
/// MSCCL_CHUNKSTEPS : 1)`, so [`CHUNK_STEPS`] slots under Simple and one under LL and LL128.
pub fn chunk_slots(proto: Proto) -> usize {
    match proto {
        Proto::Simple => CHUNK_STEPS,
        Proto::LL | Proto::LL128 => 1,
    }
}
/// The most chunks, over all gpus, a run keeps track of; a larger program is refused before its
/// memory is laid out.
pub const MAX_SIMULATED_CHUNKS: usize = 1 << 22;

/// What a send may leave in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buffering {
    /// No slots: a send completes only together with its receive.
    Rendezvous,
    /// The runtime's FIFOs: `NCCL_STEPS` slots per connection, `chunk_slots` per chunk.
    Runtime,
}

impl Buffering {
    /// Slots per connection.
    pub fn slots(self) -> usize {
        match self {
            Buffering::Rendezvous => 0,
            Buffering::Runtime => NCCL_STEPS,
        }
    }

    /// The model in words, for a program of protocol `proto` (which sizes its chunks).
    pub fn describe(self, proto: Proto) -> String {
        match self {
            Buffering::Rendezvous => "rendezvous (no buffering: a send completes only together with its receive)".into(),
            Buffering::Runtime => {
                let n = chunk_slots(proto);
                let slots = if n == 1 { "slot" } else { "slots" };
                format!("the runtime's buffering ({NCCL_STEPS} slots per connection, {n} {slots} per chunk with proto {})", proto.as_str())
            }
        }
    }
}

/// Whether the input and output buffers alias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Separate input and output buffers.
    OutOfPlace,
    /// The buffers alias (module docs).
    InPlace,
}

impl Placement {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Placement::OutOfPlace => "out-of-place",
            Placement::InPlace => "in-place",
        }
    }

    /// The placements a program declares it runs in: `inplace` and `outofplace` for the
    /// executor, `inplace` alone (one or the other) for the older runtime.
    pub fn declared(p: &Program) -> Vec<Placement> {
        let inplace = p.inplace.is_some_and(|v| v != 0);
        let outofplace = match p.runtime {
            Runtime::Executor => p.outofplace.is_some_and(|v| v != 0),
            Runtime::Legacy => !inplace,
        };
        [(outofplace, Placement::OutOfPlace), (inplace, Placement::InPlace)].into_iter().filter(|(on, _)| *on).map(|(_, pl)| pl).collect()
    }
}

/// What a chunk holds: the input chunk it started as and the gpus whose contributions it holds
/// (one gpu for collectives that do not reduce).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChunkValue {
    /// The input chunk index it came from.
    pub offset: usize,
    /// Contributing gpus, sorted.
    pub gpus: Vec<usize>,
}

impl fmt::Display for ChunkValue {
    /// In words: `the input chunk 0 of gpu 2`, `input chunk 3 reduced over gpus 0, 1 and 2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.gpus.as_slice() {
            [g] => write!(f, "the input chunk {} of gpu {g}", self.offset),
            gpus => write!(f, "input chunk {} reduced over gpus {}", self.offset, gpu_list(gpus)),
        }
    }
}

/// `0`, `0 and 1`, `0, 1 and 2`.
fn gpu_list(gpus: &[usize]) -> String {
    match gpus {
        [] => "none".into(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// What a chunk holds, in words (`nothing` when it holds nothing).
pub fn describe(value: Option<&ChunkValue>) -> String {
    value.map_or_else(|| "nothing".into(), ChunkValue::to_string)
}

/// One delivered send/receive pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The sending gpu.
    pub from: usize,
    /// The receiving gpu.
    pub to: usize,
    /// Whether the receiver reduces it with its own chunks: in the receiving step (`rr*`), or
    /// later with a reduction that reads it where it landed or where a `cpy` moved it
    /// unchanged: a `re` from it (a receive into scratch, then a local reduce into the chunk
    /// that accumulates) or into it (a tree of `re`s in scratch), or an `rr*` that reduces it
    /// with what arrives.
    pub reduce: bool,
    /// What it carries.
    pub payload: Vec<Option<ChunkValue>>,
    /// The step of a step-synchronous schedule it can run in (from 1; module docs; 0 when it
    /// has none, [`Execution::unleveled`]).
    pub level: usize,
    /// The links it takes, one of its pair's candidate paths in the [`Routes`] given (empty
    /// where none were given for its pair).
    pub route: Vec<usize>,
}

/// Candidate paths (link indices of the network the program is imported onto) for gpu pairs: a
/// message between such a pair takes, in its level, the first candidate whose links no other
/// pair uses then, or moves to a later level (module docs).
pub type Routes = HashMap<(usize, usize), Vec<Vec<usize>>>;

/// A run that finished.
#[derive(Clone, Debug)]
pub struct Execution {
    /// Steps run (a `nop` is not one; it only adds waits).
    pub steps: usize,
    /// Every gpu's output buffer at the end.
    pub outputs: Vec<Vec<Option<ChunkValue>>>,
    /// Output chunks that do not hold what `coll` wants, reductions that count a contribution
    /// twice or mix chunks, reads of chunks that hold nothing (empty: correct).
    pub errors: Vec<String>,
    /// Whether the outputs were compared with `coll` (only all-reduce, all-gather,
    /// reduce-scatter and all-to-all have a postcondition here).
    pub postcondition_checked: bool,
    /// The delivered messages, in the order they completed.
    pub messages: Vec<Message>,
    /// Data races: two steps of a gpu that touch a chunk, one writing it, that the program
    /// does not order ([`super::races`]), one line per pair of steps (empty: none).
    pub races: Vec<String>,
    /// Whether races were looked for (not for programs beyond
    /// [`super::races::MAX_ORDER_WORK`]).
    pub races_checked: bool,
    /// Whether the run had the buffers as the placement aliases them: not for an in-place run of
    /// a collective whose aliasing is not modelled (other than all-reduce, all-gather,
    /// reduce-scatter and all-to-all), which is run with separate buffers for deadlock freedom
    /// and races only; what its chunks hold is then not judged.
    pub aliasing_modelled: bool,
    /// Why the messages could not all be given levels (`None`: every one has its level): a
    /// value held in flight while its sender overwrites it, which no step-synchronous schedule
    /// carries.
    pub unleveled: Option<String>,
}

impl Execution {
    /// Whether every chunk ended where the collective wants it.
    pub fn is_correct(&self) -> bool {
        self.errors.is_empty() && self.races.is_empty()
    }
}

/// Threadblocks that wait on each other in a cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    /// The model it happened under.
    pub buffering: Buffering,
    /// The program's protocol (which sizes its chunks in slots).
    pub proto: Proto,
    /// One line per threadblock of the cycle: where it is and whom it waits for.
    pub waits: Vec<String>,
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "deadlock under {}: {} threadblocks wait on each other in a cycle:", self.buffering.describe(self.proto), self.waits.len())?;
        for w in &self.waits {
            write!(f, "\n  {w}")?;
        }
        Ok(())
    }
}

/// Why a program did not run to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// It breaks the reader's rules or uses what the simulation does not model.
    Refused(Vec<String>),
    /// Sends and receives do not pair up (a missing partner, different counts or `cnt`s).
    Unpaired(Vec<String>),
    /// The threadblocks hang.
    Deadlock(Deadlock),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Refused(p) => write!(f, "not run: {}", p.join("; ")),
            SimError::Unpaired(p) => write!(f, "sends and receives do not pair up: {}", p.join("; ")),
            SimError::Deadlock(d) => d.fmt(f),
        }
    }
}

/// Runs a program (module docs). It must pass [`super::check_program`] for its runtime.
pub fn simulate(p: &Program, placement: Placement, buffering: Buffering) -> Result<Execution, SimError> {
    simulate_routed(p, placement, buffering, Routes::new())
}

/// [`simulate`], with the messages between the gpu pairs of `routes` given paths and levels
/// that share no link with another pair's (module docs). A pair with no candidate is refused.
pub fn simulate_routed(p: &Program, placement: Placement, buffering: Buffering, routes: Routes) -> Result<Execution, SimError> {
    simulate_ordered(p, placement, buffering, routes, MAX_CLOCK_ENTRIES)
}

/// [`simulate_routed`], with one happens-before order over every threadblock up to `whole` clock
/// entries, one per gpu beyond ([`super::races`]).
fn simulate_ordered(p: &Program, placement: Placement, buffering: Buffering, routes: Routes, whole: usize) -> Result<Execution, SimError> {
    if let Some((&(a, b), _)) = routes.iter().find(|(_, paths)| paths.is_empty()) {
        return Err(SimError::Refused(vec![format!("gpu {a} sends to gpu {b}, which no path reaches")]));
    }
    let problems = check_program(p, p.runtime);
    if !problems.errors.is_empty() {
        return Err(SimError::Refused(problems.errors));
    }
    let net = Net::build(p)?;
    let memory = Memory::layout(p, placement)?;
    let mut sim = Sim::new(p, net, memory, buffering, whole);
    sim.routes = routes;
    sim.run();
    if let Some(d) = sim.deadlock() {
        return Err(SimError::Deadlock(d));
    }
    Ok(sim.finish(p, placement))
}

/// A dependency resolved to the operation that signals it.
#[derive(Clone, Copy, Debug)]
struct Wait {
    tb: usize,
    op: usize,
    depid: i64,
    deps: i64,
}

/// A step that runs (a `nop`'s dependency is folded into the waits of the next one).
#[derive(Clone, Debug)]
struct Op {
    kind: StepKind,
    s: i64,
    /// (buffer index, offset) of `src` and `dst`.
    src: (usize, usize),
    dst: (usize, usize),
    cnt: usize,
    /// Slots its message takes: `cnt` chunks of [`chunk_slots`] each.
    slots: usize,
    waits: Vec<Wait>,
    /// Index of its message on the outgoing and incoming connection.
    out_msg: usize,
    in_msg: usize,
}

impl Op {
    fn slots(&self) -> usize {
        self.slots
    }
}

#[derive(Clone, Debug)]
struct Tb {
    send: Option<usize>,
    recv: Option<usize>,
    chan: i64,
    ops: Vec<Op>,
    out_conn: Option<usize>,
    in_conn: Option<usize>,
}

/// A connection: (sender gpu, tb) -> (receiver gpu, tb) on a channel.
#[derive(Clone, Debug)]
struct Conn {
    from: (usize, usize),
    to: (usize, usize),
    messages: usize,
}

/// The program in the shape the run needs: gpus and threadblocks by id, dependencies
/// resolved, sends paired with receives.
struct Net {
    gpus: Vec<Vec<Tb>>,
    conns: Vec<Conn>,
}

impl Net {
    fn build(p: &Program) -> Result<Net, SimError> {
        let refused = |what: String| SimError::Refused(vec![what]);
        let n = usize::try_from(p.ngpus.unwrap_or(0)).unwrap_or(0);
        let mut gpus: Vec<Vec<Tb>> = vec![Vec::new(); n];
        for gpu in &p.gpus {
            let g = usize::try_from(gpu.id).ok().filter(|&g| g < n).ok_or_else(|| refused(format!("gpu {} is out of range", gpu.id)))?;
            let mut tbs: Vec<&super::model::Threadblock> = gpu.tbs.iter().collect();
            tbs.sort_by_key(|t| t.id);
            gpus[g] = tbs.iter().map(|tb| Self::threadblock(gpu, tb, p.protocol())).collect::<Result<_, _>>()?;
        }
        let mut net = Net { gpus, conns: Vec::new() };
        net.pair()?;
        Ok(net)
    }

    fn threadblock(gpu: &super::model::Gpu, tb: &super::model::Threadblock, proto: Proto) -> Result<Tb, SimError> {
        let refused = |what: String| SimError::Refused(vec![what]);
        let index = |id: i64| usize::try_from(id).map_err(|_| refused(format!("gpu {} tb {id}: a negative id", gpu.id)));
        let mut ops = Vec::new();
        let mut pending: Vec<Wait> = Vec::new();
        for st in &tb.steps {
            if let Some(d) = st.dep {
                let target = gpu
                    .tbs
                    .iter()
                    .find(|t| t.id == d.tb)
                    .ok_or_else(|| refused(format!("gpu {} tb {}: depid {} names no threadblock", gpu.id, tb.id, d.tb)))?;
                let pos = target.signal_for(d.step).ok_or_else(|| refused(format!("gpu {} tb {}: a wait that never ends", gpu.id, tb.id)))?;
                // The signalling step's index among the steps that run (nops do not).
                let op = target.steps[..pos].iter().filter(|s| s.kind != StepKind::Nop).count();
                pending.push(Wait { tb: index(d.tb)?, op, depid: d.tb, deps: d.step });
            }
            if st.kind == StepKind::Nop {
                continue;
            }
            let place = |pl: super::model::Place| (buffer_index(pl.buffer), usize::try_from(pl.offset).unwrap_or(0));
            ops.push(Op {
                kind: st.kind,
                s: st.s,
                src: place(st.src),
                dst: place(st.dst),
                cnt: usize::try_from(st.cnt).unwrap_or(0),
                slots: chunk_slots(proto).saturating_mul(usize::try_from(st.cnt).unwrap_or(0)),
                waits: std::mem::take(&mut pending),
                out_msg: 0,
                in_msg: 0,
            });
        }
        Ok(Tb { send: tb.send_peer(), recv: tb.recv_peer(), chan: tb.chan, ops, out_conn: None, in_conn: None })
    }

    /// Pairs the k-th send of every connection with its k-th receive.
    fn pair(&mut self) -> Result<(), SimError> {
        let mut problems = Vec::new();
        let mut receivers: HashMap<(usize, usize, i64), usize> = HashMap::new();
        for (g, tbs) in self.gpus.iter().enumerate() {
            for (t, tb) in tbs.iter().enumerate() {
                if let Some(from) = tb.recv {
                    receivers.insert((from, g, tb.chan), t);
                }
            }
        }
        for g in 0..self.gpus.len() {
            for t in 0..self.gpus[g].len() {
                let Some(b) = self.gpus[g][t].send else { continue };
                let chan = self.gpus[g][t].chan;
                let Some(&rt) = receivers.get(&(g, b, chan)) else {
                    if self.gpus[g][t].ops.iter().any(|o| o.kind.sends()) {
                        problems.push(format!(
                            "gpu {g} tb {t} sends to gpu {b} on channel {chan}, but no threadblock of gpu {b} receives from gpu {g} on channel {chan}"
                        ));
                    }
                    continue;
                };
                let c = self.conns.len();
                self.gpus[g][t].out_conn = Some(c);
                self.gpus[b][rt].in_conn = Some(c);
                let sends: Vec<usize> = (0..self.gpus[g][t].ops.len()).filter(|&k| self.gpus[g][t].ops[k].kind.sends()).collect();
                let recvs: Vec<usize> = (0..self.gpus[b][rt].ops.len()).filter(|&k| self.gpus[b][rt].ops[k].kind.receives()).collect();
                for (m, (&sk, &rk)) in sends.iter().zip(&recvs).enumerate() {
                    let (so, ro) = (&self.gpus[g][t].ops[sk], &self.gpus[b][rt].ops[rk]);
                    if so.cnt != ro.cnt {
                        problems.push(format!(
                            "gpu {g} tb {t} step {} sends {} chunks to gpu {b}; its matching receive, gpu {b} tb {rt} step {}, takes {}: the data would land in the wrong place",
                            so.s, so.cnt, ro.s, ro.cnt
                        ));
                    }
                    self.gpus[g][t].ops[sk].out_msg = m;
                    self.gpus[b][rt].ops[rk].in_msg = m;
                }
                if sends.len() != recvs.len() {
                    let (extra, k) = if sends.len() > recvs.len() { ((g, t), sends[recvs.len()]) } else { ((b, rt), recvs[sends.len()]) };
                    problems.push(format!(
                        "gpu {g} tb {t} sends {} time{} to gpu {b} on channel {chan}, gpu {b} tb {rt} receives {} time{} from it: gpu {} tb {} step {} has no partner",
                        sends.len(),
                        crate::units::plural(sends.len() as u64),
                        recvs.len(),
                        crate::units::plural(recvs.len() as u64),
                        extra.0,
                        extra.1,
                        self.gpus[extra.0][extra.1].ops[k].s
                    ));
                }
                self.conns.push(Conn { from: (g, t), to: (b, rt), messages: sends.len().max(recvs.len()) });
            }
        }
        for (g, tbs) in self.gpus.iter().enumerate() {
            for (t, tb) in tbs.iter().enumerate() {
                if let (Some(a), None) = (tb.recv, tb.in_conn) {
                    if tb.ops.iter().any(|o| o.kind.receives()) {
                        problems
                            .push(format!("gpu {g} tb {t} receives from gpu {a} on channel {}, but no threadblock of gpu {a} sends to gpu {g} on it", tb.chan));
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SimError::Unpaired(problems))
        }
    }
}

/// Every gpu's chunks in one array, with the buffers mapped onto it as the placement aliases
/// them; each cell also keeps, for the leveling ([`Sim::level`]), the messages its value waits
/// for, the messages whose arrival brought it to this gpu and the messages that read it since.
struct Memory {
    /// Per gpu: where `i`, `o` and `s` start.
    base: Vec<[usize; 3]>,
    /// Per gpu: chunks of the input and output buffers the runtime has.
    sizes: [usize; 2],
    cells: Vec<Vec<Option<ChunkValue>>>,
    /// Per cell: the messages (nodes) a step that reads its value runs after.
    deps: Vec<Vec<Vec<usize>>>,
    /// Per cell: the messages (nodes) whose arrival put its value on this gpu, as a schedule
    /// sees it (a local `cpy` or `re` of what arrived happens in the step the message does).
    by: Vec<Vec<Vec<usize>>>,
    /// Per cell: the messages (nodes) that read its value, when they read it (a send when it
    /// begins, not when its receiver takes it).
    readers: Vec<Vec<Vec<usize>>>,
    /// Per cell: the delivered message (its index) whose data the cell holds as it arrived,
    /// if a plain receive, or a copy of one, wrote it last.
    landed: Vec<Vec<Option<usize>>>,
}

impl Memory {
    fn layout(p: &Program, placement: Placement) -> Result<Memory, SimError> {
        let n = usize::try_from(p.ngpus.unwrap_or(0)).unwrap_or(0);
        let known = buffer_chunks(p);
        let declared = |g: usize, b: usize| p.gpus.iter().find(|x| x.id == g as i64).map_or(0, |x| usize::try_from(x.chunks[b]).unwrap_or(0));
        let sizes = known.unwrap_or_else(|| [(0..n).map(|g| declared(g, 0)).max().unwrap_or(0), (0..n).map(|g| declared(g, 1)).max().unwrap_or(0)]);
        let total = usize::try_from(p.nchunksperloop.unwrap_or(0)).unwrap_or(0);
        let per_gpu = total / n.max(1);
        let mut base = Vec::with_capacity(n);
        for g in 0..n {
            base.push(match (placement, p.collective()) {
                (Placement::OutOfPlace, _) => [0, sizes[0], sizes[0] + sizes[1]],
                (Placement::InPlace, Some(Coll::AllReduce | Coll::AllToAll)) => [0, 0, total],
                (Placement::InPlace, Some(Coll::AllGather)) => [g * per_gpu, 0, total],
                (Placement::InPlace, Some(Coll::ReduceScatter)) => [0, g * per_gpu, total],
                // How the other collectives' buffers alias in place is not modelled: they are run
                // with separate buffers, for deadlock freedom (which does not depend on where the
                // data is) and for the races that separate buffers show already.
                (Placement::InPlace, _) => [0, sizes[0], sizes[0] + sizes[1]],
            });
        }
        // Scratch as far as the gpu's own steps reach into it (the reader rules keep that within
        // s_chunks), not as declared.
        let scratch = |g: usize| {
            let steps = p.gpus.iter().filter(|x| x.id == g as i64).flat_map(|x| &x.tbs).flat_map(|t| &t.steps);
            let reach = |st: &super::model::Step| {
                let used = [(st.kind.reads_src(), st.src), (st.kind.writes_dst(), st.dst)];
                used.into_iter().filter(|(on, pl)| *on && pl.buffer == crate::lower::Buffer::Scratch).map(|(_, pl)| pl.offset.saturating_add(st.cnt)).max()
            };
            usize::try_from(steps.filter_map(reach).max().unwrap_or(0)).unwrap_or(0).min(declared(g, 2))
        };
        let lens: Vec<usize> = (0..n).map(|g| base[g][2].saturating_add(scratch(g))).collect();
        let total = lens.iter().fold(0usize, |a, &b| a.saturating_add(b));
        if total > MAX_SIMULATED_CHUNKS {
            return Err(SimError::Refused(vec![format!(
                "the gpus' buffers hold {total} chunks in all; the run keeps track of at most {MAX_SIMULATED_CHUNKS}"
            )]));
        }
        let len = |g: usize| lens[g];
        let cells: Vec<Vec<Option<ChunkValue>>> = (0..n).map(|g| vec![None; len(g)]).collect();
        let empty = || cells.iter().map(|c| vec![Vec::new(); c.len()]).collect::<Vec<_>>();
        let (deps, by, readers) = (empty(), empty(), empty());
        let landed = cells.iter().map(|c| vec![None; c.len()]).collect();
        let mut m = Memory { base, sizes, cells, deps, by, readers, landed };
        for g in 0..n {
            for k in 0..sizes[0] {
                if let Some(c) = m.cell(g, (0, k)) {
                    m.cells[g][c] = Some(ChunkValue { offset: k, gpus: vec![g] });
                }
            }
        }
        Ok(m)
    }

    /// Those of `cells` of gpu `g` in its scratch buffer.
    fn scratch_only(&self, g: usize, cells: &[usize]) -> Vec<usize> {
        cells.iter().copied().filter(|&c| c >= self.base[g][2]).collect()
    }

    fn cell(&self, g: usize, (buffer, offset): (usize, usize)) -> Option<usize> {
        let c = self.base[g][buffer] + offset;
        (c < self.cells[g].len()).then_some(c)
    }

    /// The cells of `cnt` chunks from a place (fewer when they run past the memory, which the
    /// reader rules exclude).
    fn range(&self, g: usize, place: (usize, usize), cnt: usize) -> Vec<usize> {
        (0..cnt).filter_map(|i| self.cell(g, (place.0, place.1 + i))).collect()
    }

    fn output(&self, g: usize) -> Vec<Option<ChunkValue>> {
        (0..self.sizes[1]).map(|k| self.cell(g, (1, k)).and_then(|c| self.cells[g][c].clone())).collect()
    }
}

/// Where a threadblock is.
#[derive(Clone, Debug, Default)]
struct TbState {
    pc: usize,
    begun: bool,
    moved_in: usize,
    moved_out: usize,
    /// What a reducing step read of its own `src` when it began.
    local: Vec<Option<ChunkValue>>,
}

/// A message in flight.
#[derive(Clone, Debug, Default)]
struct MessageState {
    payload: Vec<Option<ChunkValue>>,
    /// Its node in [`Sim::nodes`].
    node: usize,
}

/// A message of the run as the leveling sees it, numbered when its send begins.
#[derive(Clone, Debug, Default)]
struct Node {
    /// The messages (nodes) it runs after: (node, strictly in a later step).
    after: Vec<(usize, bool)>,
    /// Its index in [`Sim::messages`] once delivered.
    message: Option<usize>,
}

/// A connection's FIFO.
#[derive(Clone, Debug, Default)]
struct Fifo {
    /// (message, slots) in order.
    queue: VecDeque<(usize, usize)>,
    queued: usize,
    messages: Vec<MessageState>,
}

/// What tells two pieces apart in a message: (input chunk, origin gpu; `usize::MAX` for a
/// reduction's block, which every gpu contributes to).
type PieceKey = (usize, usize);

/// What a gpu pair carries in one level: its operation, its pieces and the path it takes.
struct Claim {
    reduce: bool,
    held: Vec<PieceKey>,
    route: Vec<usize>,
}

/// What one claim of [`Sim::claim_at`] changed: a link taken, a pair claimed, pieces added to
/// a pair's claim (how many), each by (level, ...).
enum Undo {
    Link((usize, usize)),
    Pair((usize, usize, usize)),
    Held((usize, usize, usize), usize),
}

/// The strongly connected components of a graph given by its out-edges: each vertex's
/// component and how many there are (Kosaraju, without recursion).
fn strongly_connected(next: &[Vec<(usize, bool)>]) -> (Vec<usize>, usize) {
    let n = next.len();
    let mut prev: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (v, e) in next.iter().enumerate() {
        for &(x, _) in e {
            prev[x].push(v);
        }
    }
    let mut seen = vec![false; n];
    let mut finished = Vec::with_capacity(n);
    for root in 0..n {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        let mut stack = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut i)) = stack.last_mut() {
            if let Some(&(x, _)) = next[v].get(*i) {
                *i += 1;
                if !seen[x] {
                    seen[x] = true;
                    stack.push((x, 0));
                }
            } else {
                finished.push(v);
                stack.pop();
            }
        }
    }
    let mut group = vec![usize::MAX; n];
    let mut groups = 0;
    for &root in finished.iter().rev() {
        if group[root] != usize::MAX {
            continue;
        }
        group[root] = groups;
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            for &x in &prev[v] {
                if group[x] == usize::MAX {
                    group[x] = groups;
                    stack.push(x);
                }
            }
        }
        groups += 1;
    }
    (group, groups)
}

struct Sim {
    net: Net,
    mem: Memory,
    state: Vec<Vec<TbState>>,
    fifos: Vec<Fifo>,
    capacity: usize,
    buffering: Buffering,
    proto: Proto,
    reducing_kind: bool,
    executed: usize,
    errors: Vec<String>,
    messages: Vec<Message>,
    /// The ops numbered, and their happens-before order.
    order: StepOrder,
    /// Per gpu and cell: the step that last wrote it and the steps that read it since.
    last_write: Vec<Vec<Option<usize>>>,
    reads_since: Vec<Vec<Vec<usize>>>,
    /// Races found, and the pairs of steps already reported (or, for a program ordered one gpu
    /// at a time, kept for [`Sim::deferred_races`]).
    races: Vec<String>,
    raced: HashSet<(usize, usize)>,
    /// Pairs of steps that touch a cell, to be ordered after the run (a program too large for
    /// one order): (earlier step, later step, cell and whether each writes it).
    deferred: Vec<(usize, usize, Touch)>,
    /// (level, from, to) -> what the pair carries then in the schedule being built.
    pairs: HashMap<(usize, usize, usize), Claim>,
    /// Candidate paths of the gpu pairs given.
    routes: Routes,
    /// (level, link) taken by a pair's path.
    taken: HashSet<(usize, usize)>,
    /// Every message begun, with what it must follow.
    nodes: Vec<Node>,
}

impl Sim {
    fn new(p: &Program, net: Net, mem: Memory, buffering: Buffering, whole: usize) -> Sim {
        let state = net.gpus.iter().map(|tbs| vec![TbState::default(); tbs.len()]).collect();
        let fifos = net.conns.iter().map(|c| Fifo { messages: vec![MessageState::default(); c.messages], ..Fifo::default() }).collect();
        let order = happens_before(&net, whole);
        let last_write = mem.cells.iter().map(|c| vec![None; c.len()]).collect();
        let reads_since = mem.cells.iter().map(|c| vec![Vec::new(); c.len()]).collect();
        Sim {
            order,
            last_write,
            reads_since,
            races: Vec::new(),
            raced: HashSet::new(),
            deferred: Vec::new(),
            net,
            mem,
            state,
            fifos,
            capacity: buffering.slots(),
            buffering,
            proto: p.protocol(),
            reducing_kind: matches!(p.collective(), Some(Coll::AllReduce | Coll::ReduceScatter | Coll::Reduce)),
            executed: 0,
            errors: Vec::new(),
            messages: Vec::new(),
            pairs: HashMap::new(),
            routes: Routes::new(),
            taken: HashSet::new(),
            nodes: Vec::new(),
        }
    }

    fn op(&self, g: usize, t: usize) -> Option<&Op> {
        self.net.gpus[g][t].ops.get(self.state[g][t].pc)
    }

    fn waits_done(&self, g: usize, t: usize) -> bool {
        self.op(g, t).is_some_and(|op| op.waits.iter().all(|w| self.state[g][w.tb].pc > w.op))
    }

    /// Steps every threadblock as far as it goes, until none moves.
    fn run(&mut self) {
        let mut progress = true;
        while progress {
            progress = false;
            for g in 0..self.net.gpus.len() {
                for t in 0..self.net.gpus[g].len() {
                    while self.advance(g, t) {
                        progress = true;
                    }
                }
            }
        }
    }

    /// One move of a threadblock; false when it cannot move now.
    fn advance(&mut self, g: usize, t: usize) -> bool {
        let Some(op) = self.op(g, t).cloned() else { return false };
        if !self.state[g][t].begun && !self.waits_done(g, t) {
            return false;
        }
        let tb = &self.net.gpus[g][t];
        let (out_conn, in_conn) = (tb.out_conn, tb.in_conn);
        let st = &self.state[g][t];
        let can_send = |sim: &Sim| out_conn.map_or(0, |c| sim.accept(c, op.out_msg, &mut Vec::new()));
        let available = |sim: &Sim| in_conn.map_or(0, |c| sim.available(c, op.in_msg));
        let n = match (op.kind.receives(), op.kind.sends()) {
            (false, false) => {
                self.local(g, t, &op);
                self.finish_op(g, t);
                return true;
            }
            (false, true) => (op.slots() - st.moved_out).min(can_send(self)),
            (true, false) => (op.slots() - st.moved_in).min(available(self)),
            (true, true) => (op.slots() - st.moved_in).min(available(self)).min(can_send(self)),
        };
        if n == 0 {
            return false;
        }
        if !self.state[g][t].begun {
            self.begin(g, t, &op);
        }
        if op.kind.receives() {
            if let Some(c) = in_conn {
                self.pop(c, n);
            }
            self.received(g, t, n);
        } else if let Some(c) = out_conn {
            self.push(c, op.out_msg, n);
            self.state[g][t].moved_out += n;
            if self.state[g][t].moved_out == op.slots() {
                self.finish_op(g, t);
            }
        }
        true
    }

    /// Slots connection `c` can take now for message `m`: free FIFO slots, or, when the FIFO is
    /// empty and holds none, what its receiver (and a chain of fused steps after it) takes at once.
    fn accept(&self, c: usize, m: usize, visited: &mut Vec<(usize, usize)>) -> usize {
        let fifo = &self.fifos[c];
        if self.capacity > fifo.queued {
            return self.capacity - fifo.queued;
        }
        if fifo.queued > 0 {
            return 0;
        }
        let (b, rt) = self.net.conns[c].to;
        if visited.contains(&(b, rt)) {
            return 0;
        }
        visited.push((b, rt));
        let Some(op) = self.op(b, rt) else { return 0 };
        if !op.kind.receives() || op.in_msg != m || !(self.state[b][rt].begun || self.waits_done(b, rt)) {
            return 0;
        }
        let want = op.slots() - self.state[b][rt].moved_in;
        match (op.kind.sends(), self.net.gpus[b][rt].out_conn) {
            (true, Some(out)) => want.min(self.accept(out, op.out_msg, visited)),
            (true, None) => 0,
            (false, _) => want,
        }
    }

    fn available(&self, c: usize, m: usize) -> usize {
        match self.fifos[c].queue.front() {
            Some(&(msg, slots)) if msg == m => slots,
            _ => 0,
        }
    }

    fn pop(&mut self, c: usize, n: usize) {
        let fifo = &mut self.fifos[c];
        if let Some(front) = fifo.queue.front_mut() {
            front.1 -= n;
            fifo.queued -= n;
            if front.1 == 0 {
                fifo.queue.pop_front();
            }
        }
    }

    /// Moves `n` slots of message `m` into connection `c`: into free FIFO slots, or straight to
    /// its receiver ([`Sim::accept`] said which).
    fn push(&mut self, c: usize, m: usize, n: usize) {
        if self.capacity >= self.fifos[c].queued + n {
            let fifo = &mut self.fifos[c];
            match fifo.queue.back_mut() {
                Some(back) if back.0 == m => back.1 += n,
                _ => fifo.queue.push_back((m, n)),
            }
            fifo.queued += n;
            return;
        }
        let (b, rt) = self.net.conns[c].to;
        if let Some(op) = self.op(b, rt).cloned() {
            if !self.state[b][rt].begun {
                self.begin(b, rt, &op);
            }
            self.received(b, rt, n);
        }
    }

    /// A receiving step took `n` slots: a fused step passes them on; the last slot ends the
    /// message.
    fn received(&mut self, g: usize, t: usize, n: usize) {
        let Some(op) = self.op(g, t).cloned() else { return };
        self.state[g][t].moved_in += n;
        if self.state[g][t].moved_in == op.slots() {
            self.deliver(g, t, &op);
        }
        if op.kind.sends() {
            if let Some(out) = self.net.gpus[g][t].out_conn {
                self.push(out, op.out_msg, n);
            }
            self.state[g][t].moved_out += n;
        }
        let done = if op.kind.sends() { self.state[g][t].moved_out } else { self.state[g][t].moved_in };
        if done == op.slots() {
            self.finish_op(g, t);
        }
    }

    fn read(&mut self, g: usize, place: (usize, usize), cnt: usize, at: &str) -> (Vec<Option<ChunkValue>>, Vec<usize>) {
        let cells = self.mem.range(g, place, cnt);
        let values: Vec<Option<ChunkValue>> = cells.iter().map(|&c| self.mem.cells[g][c].clone()).collect();
        if let Some(k) = values.iter().position(Option::is_none) {
            self.errors.push(format!("{at}: reads chunk {} of buffer {}, which holds nothing yet", place.1 + k, ["i", "o", "s"][place.0]));
        }
        (values, cells)
    }

    /// A step's first slot: it reads what it sends or reduces with.
    fn begin(&mut self, g: usize, t: usize, op: &Op) {
        self.state[g][t].begun = true;
        let at = format!("gpu {g} tb {t} step {}", op.s);
        let (local, cells) = if op.kind.reads_src() { self.read(g, op.src, op.cnt, &at) } else { Default::default() };
        self.touch(g, t, op.src, &cells, false);
        // The messages that read `cells` now: what it sends, and what it receives to reduce with
        // them. They follow what wrote the values; a later write of the cells follows them.
        let mut readers = Vec::new();
        let mut deps: Vec<usize> = cells.iter().flat_map(|&c| self.mem.deps[g][c].iter().copied()).collect();
        deps.sort_unstable();
        deps.dedup();
        let tb = &self.net.gpus[g][t];
        let (out_conn, in_conn) = (tb.out_conn, tb.in_conn);
        if let (true, Some(out)) = (op.kind.sends(), out_conn) {
            let forwarded = (op.kind.receives()).then(|| in_conn.map(|c| (c, op.in_msg))).flatten();
            let payload = match forwarded {
                None => local.clone(),
                Some((c, m)) if op.kind.reduces_received() => {
                    let incoming = self.fifos[c].messages[m].payload.clone();
                    self.combine(&local, &incoming, &at)
                }
                Some((c, m)) => self.fifos[c].messages[m].payload.clone(),
            };
            let node = self.nodes.len();
            let mut after: Vec<(usize, bool)> = deps.iter().map(|&d| (d, true)).collect();
            after.extend(forwarded.map(|(c, m)| (self.fifos[c].messages[m].node, true)));
            self.nodes.push(Node { after, message: None });
            self.fifos[out].messages[op.out_msg] = MessageState { payload, node };
            readers.push(node);
        }
        if let (true, Some(c)) = (op.kind.reduces_received(), in_conn) {
            // What a plain receive left in scratch `cells` is reduced with what arrives now.
            self.reduced_here(g, &self.mem.scratch_only(g, &cells));
            let node = self.fifos[c].messages[op.in_msg].node;
            self.nodes[node].after.extend(deps.iter().map(|&d| (d, true)));
            readers.push(node);
        }
        for &c in &cells {
            self.mem.readers[g][c].extend(readers.iter().copied());
        }
        self.state[g][t].local = local;
    }

    /// The last slot of a receive arrived: its data lands, after what its chunks held (and
    /// not before the messages that read that).
    fn deliver(&mut self, g: usize, t: usize, op: &Op) {
        let Some(c) = self.net.gpus[g][t].in_conn else { return };
        let at = format!("gpu {g} tb {t} step {}", op.s);
        let msg = self.fifos[c].messages[op.in_msg].clone();
        let reduce = op.kind.reduces_received();
        let local = std::mem::take(&mut self.state[g][t].local);
        let value = if reduce { self.combine(&local, &msg.payload, &at) } else { msg.payload.clone() };
        let from = self.net.conns[c].from.0;
        let dst_cells = if op.kind.writes_dst() { self.mem.range(g, op.dst, op.cnt) } else { Vec::new() };
        let node = msg.node;
        // A fused step's own send reads its chunks as this message lands in them (it carries
        // the sum, in a later step), not before.
        let own_send = self.net.gpus[g][t].out_conn.filter(|_| op.kind.sends()).map(|o| self.fifos[o].messages[op.out_msg].node);
        for &cell in &dst_cells {
            let overwritten = self.mem.deps[g][cell].iter().map(|&d| (d, true));
            let read = self.mem.readers[g][cell].iter().filter(|&&r| r != node && Some(r) != own_send).map(|&r| (r, false));
            let after: Vec<(usize, bool)> = overwritten.chain(read).collect();
            self.nodes[node].after.extend(after);
        }
        self.touch(g, t, op.dst, &dst_cells, true);
        let index = self.messages.len();
        for (&cell, v) in dst_cells.iter().zip(value) {
            self.mem.cells[g][cell] = v;
            self.mem.deps[g][cell] = vec![node];
            self.mem.by[g][cell] = vec![node];
            self.mem.readers[g][cell].clear();
            self.mem.landed[g][cell] = (!reduce).then_some(index);
        }
        self.nodes[node].message = Some(index);
        self.messages.push(Message { from, to: g, reduce, payload: msg.payload, level: 0, route: Vec::new() });
    }

    /// Gives every delivered message its level and path (module docs). Messages that must
    /// not come before one another in a cycle (a swap: each overwrites what the other read)
    /// share a level; the groups are taken in an order where each comes after the groups it
    /// follows ([`Node::after`]), each at the first level that is after (or, not strictly, not
    /// before) them where every member's pair and links are free ([`Sim::claim_at`]); a group
    /// that fits in no level with disjoint paths, even alone in a new one, takes that new level
    /// with paths that share as few links as they can (verify reports rule 2). A cycle through
    /// a strict constraint, or a group whose members cannot share any level (a gpu pair would
    /// carry a copy and a reduce, or a piece twice), leaves level 0 and is described in the
    /// answer.
    fn level(&mut self) -> Option<String> {
        let n = self.messages.len();
        let mut next: Vec<Vec<(usize, bool)>> = vec![Vec::new(); n];
        for node in &self.nodes {
            let Some(m) = node.message else { continue };
            for &(a, strict) in &node.after {
                if let Some(x) = self.nodes[a].message.filter(|&x| x != m) {
                    next[x].push((m, strict));
                }
            }
        }
        for e in &mut next {
            // A strict edge wins over a loose one to the same message.
            e.sort_unstable_by_key(|&(x, strict)| (x, !strict));
            e.dedup_by_key(|e| e.0);
        }
        let (group, groups) = strongly_connected(&next);
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); groups];
        for m in 0..n {
            members[group[m]].push(m);
        }
        let mut waiting = vec![0usize; groups];
        let mut cyclic = None;
        for m in 0..n {
            for &(x, strict) in &next[m] {
                if group[x] != group[m] {
                    waiting[group[x]] += 1;
                } else if strict {
                    cyclic = Some(m);
                }
            }
        }
        let describe = |sim: &Sim, ms: &[usize]| {
            let shown: Vec<String> = ms.iter().take(4).map(|&m| format!("gpu {} -> gpu {}", sim.messages[m].from, sim.messages[m].to)).collect();
            format!("{}{}", shown.join(", "), if ms.len() > 4 { ", ..." } else { "" })
        };
        if let Some(m) = cyclic {
            return Some(format!(
                "the messages {} cannot be put in steps: one carries a value its sender overwrites before a message that it must follow arrives",
                describe(self, &members[group[m]])
            ));
        }
        let mut earliest = vec![1usize; groups];
        let key = |ms: &[usize], at: usize| std::cmp::Reverse((at, ms[0]));
        let mut ready: std::collections::BinaryHeap<(std::cmp::Reverse<(usize, usize)>, usize)> =
            (0..groups).filter(|&q| waiting[q] == 0).map(|q| (key(&members[q], 1), q)).collect();
        let mut highest = 0;
        while let Some((_, q)) = ready.pop() {
            let mut level = earliest[q];
            let routes = loop {
                // Alone in a step of their own, members whose paths cannot all be disjoint
                // share links: the schedule still runs, and verify reports rule 2 (MODEL.md).
                let mut found = None;
                for share in [false, true].into_iter().take(if level > highest { 2 } else { 1 }) {
                    let mut undo = Vec::new();
                    let routes: Option<Vec<Vec<usize>>> = members[q].iter().map(|&m| self.claim_at(level, m, share, &mut undo)).collect();
                    if routes.is_some() {
                        found = routes;
                        break;
                    }
                    self.undo(undo);
                }
                if let Some(routes) = found {
                    break routes;
                }
                if level > highest {
                    return Some(self.unshareable(&members[q]));
                }
                level += 1;
            };
            highest = highest.max(level);
            for (&m, route) in members[q].iter().zip(routes) {
                (self.messages[m].level, self.messages[m].route) = (level, route);
            }
            for &m in &members[q] {
                for &(x, strict) in &next[m] {
                    let gx = group[x];
                    if gx == q {
                        continue;
                    }
                    earliest[gx] = earliest[gx].max(level + usize::from(strict));
                    waiting[gx] -= 1;
                    if waiting[gx] == 0 {
                        ready.push((key(&members[gx], earliest[gx]), gx));
                    }
                }
            }
        }
        None
    }

    /// Claims `level` for message `m`, if its gpu pair carries nothing then or the same
    /// operation on other pieces (and, for a pair with candidate paths that carries nothing yet,
    /// one of them has no link another pair takes then, or with `share` the one with the
    /// fewest such links): the path it takes. What it claimed is
    /// logged in `undo`.
    fn claim_at(&mut self, level: usize, m: usize, share: bool, undo: &mut Vec<Undo>) -> Option<Vec<usize>> {
        let (from, to, reduce) = (self.messages[m].from, self.messages[m].to, self.messages[m].reduce);
        let keys = self.piece_keys(m);
        let direct = [Vec::new()];
        let candidates = self.routes.get(&(from, to)).map_or(&direct[..], |c| &c[..]);
        match self.pairs.get_mut(&(level, from, to)) {
            None => {
                let busy = |r: &Vec<usize>| r.iter().filter(|&&l| self.taken.contains(&(level, l))).count();
                let route = if share { candidates.iter().min_by_key(|r| busy(r)) } else { candidates.iter().find(|r| busy(r) == 0) }?.clone();
                for &l in &route {
                    if self.taken.insert((level, l)) {
                        undo.push(Undo::Link((level, l)));
                    }
                }
                self.pairs.insert((level, from, to), Claim { reduce, held: keys, route: route.clone() });
                undo.push(Undo::Pair((level, from, to)));
                Some(route)
            }
            Some(c) if c.reduce == reduce && !keys.iter().any(|k| c.held.contains(k)) => {
                undo.push(Undo::Held((level, from, to), keys.len()));
                c.held.extend(keys);
                Some(c.route.clone())
            }
            Some(_) => None,
        }
    }

    /// The pieces message `m` carries, as a gpu pair's claim on a level holds them.
    fn piece_keys(&self, m: usize) -> Vec<PieceKey> {
        let origin = |v: &ChunkValue| if self.reducing_kind { usize::MAX } else { v.gpus.first().copied().unwrap_or(0) };
        self.messages[m].payload.iter().flatten().map(|v| (v.offset, origin(v))).collect()
    }

    /// Why messages that must share a step cannot, even sharing links: the first gpu pair
    /// among them that would carry both a copy and a reduce, or one piece twice, in that step
    /// (a transfer has one operation and lists a piece once, MODEL.md section 3 and rule 1).
    fn unshareable(&self, members: &[usize]) -> String {
        let mut seen: HashMap<(usize, usize), (bool, Vec<PieceKey>)> = HashMap::new();
        let mut why = None;
        for &m in members {
            let (from, to, reduce) = (self.messages[m].from, self.messages[m].to, self.messages[m].reduce);
            let k = self.piece_keys(m);
            match seen.get_mut(&(from, to)) {
                Some((r, _)) if *r != reduce => {
                    why = Some(format!("gpu {from} -> gpu {to} would carry both a copy and a reduce in that step (a transfer has one operation)"))
                }
                Some((_, held)) if k.iter().any(|x| held.contains(x)) => {
                    why = Some(format!("gpu {from} -> gpu {to} would carry one piece twice in that step (a transfer lists a piece once)"))
                }
                Some((_, held)) => held.extend(k),
                None => {
                    seen.insert((from, to), (reduce, k));
                }
            }
            if why.is_some() {
                break;
            }
        }
        let shown: Vec<String> = members.iter().take(4).map(|&m| format!("gpu {} -> gpu {}", self.messages[m].from, self.messages[m].to)).collect();
        format!(
            "the {} messages {}{} must share a step (each overwrites a chunk another reads, or reads one another writes) but cannot: {}",
            members.len(),
            shown.join(", "),
            if members.len() > 4 { ", ..." } else { "" },
            why.unwrap_or_else(|| "they do not fit in one step".to_string())
        )
    }

    /// Takes back what [`Sim::claim_at`] claimed, latest first.
    fn undo(&mut self, undo: Vec<Undo>) {
        for u in undo.into_iter().rev() {
            match u {
                Undo::Link(x) => {
                    self.taken.remove(&x);
                }
                Undo::Pair(x) => {
                    self.pairs.remove(&x);
                }
                Undo::Held(x, k) => {
                    if let Some(c) = self.pairs.get_mut(&x) {
                        c.held.truncate(c.held.len() - k);
                    }
                }
            }
        }
    }

    /// `cpy` and `re`. A schedule has no local steps: what they write reaches this gpu's chunk
    /// in the step of the messages that brought the data read, so those messages run after
    /// what the chunk held (a `re` adds to it: not strictly) and not before its readers.
    fn local(&mut self, g: usize, t: usize, op: &Op) {
        let at = format!("gpu {g} tb {t} step {}", op.s);
        let (src, src_cells) = self.read(g, op.src, op.cnt, &at);
        self.touch(g, t, op.src, &src_cells, false);
        let dst_cells = self.mem.range(g, op.dst, op.cnt);
        self.touch(g, t, op.dst, &dst_cells, true);
        let landed: Vec<Option<usize>> = src_cells.iter().map(|&c| self.mem.landed[g][c]).collect();
        let value = if op.kind == StepKind::Reduce {
            let (old, _) = self.read(g, op.dst, op.cnt, &at);
            // What arrived in a plain receive and is reduced here, from the source or in scratch
            // at the destination (a tree of `re`s in scratch: `re X <- Y`, then `re i <- X`),
            // was for the schedule a reduce into this gpu's value. A receive into the gpu's own
            // chunk replaced its value (a copy), whatever is reduced into it later.
            self.reduced_here(g, &src_cells);
            self.reduced_here(g, &self.mem.scratch_only(g, &dst_cells));
            self.combine(&old, &src, &at)
        } else {
            src
        };
        let strict = op.kind != StepKind::Reduce;
        for (k, (&dc, v)) in dst_cells.iter().zip(value).enumerate() {
            let sc = src_cells.get(k).copied();
            let (deps, by) = sc.map_or_else(Default::default, |sc| (self.mem.deps[g][sc].clone(), self.mem.by[g][sc].clone()));
            for &b in &by {
                let overwritten = self.mem.deps[g][dc].iter().filter(|&&d| d != b).map(|&d| (d, strict));
                let read = self.mem.readers[g][dc].iter().filter(|&&r| r != b).map(|&r| (r, false));
                let after: Vec<(usize, bool)> = overwritten.chain(read).collect();
                self.nodes[b].after.extend(after);
            }
            let mut new_deps = if strict { Vec::new() } else { std::mem::take(&mut self.mem.deps[g][dc]) };
            new_deps.extend(deps);
            new_deps.sort_unstable();
            new_deps.dedup();
            self.mem.cells[g][dc] = v;
            self.mem.deps[g][dc] = new_deps;
            self.mem.by[g][dc] = by;
            self.mem.readers[g][dc].clear();
            self.mem.landed[g][dc] = if op.kind == StepKind::Copy { landed.get(k).copied().flatten() } else { None };
        }
    }

    /// Marks the messages whose data `cells` of gpu `g` hold as it arrived in a plain receive
    /// (or a `cpy` of it) as reduces: a reduction now combines that data with other chunks.
    fn reduced_here(&mut self, g: usize, cells: &[usize]) {
        for &c in cells {
            if let Some(m) = self.mem.landed[g][c] {
                self.messages[m].reduce = true;
            }
        }
    }

    /// Threadblock `t` of gpu `g` reads (or writes) `cells`, the chunks from `place` on, in its
    /// current step: a race with the last write, or for a write with a read since, that the
    /// program does not order before it ([`super::races`]). For a program ordered one gpu at a
    /// time, the pairs are kept and ordered after the run.
    fn touch(&mut self, g: usize, t: usize, place: (usize, usize), cells: &[usize], write: bool) {
        let (hb, deferring) = (self.order.hb.as_ref(), self.order.graph.is_some());
        if hb.is_none() && !deferring {
            return;
        }
        let me = self.order.first_op[g][t] + self.state[g][t].pc;
        for (i, &cell) in cells.iter().enumerate() {
            let earlier = self.last_write[g][cell].into_iter().chain(if write { self.reads_since[g][cell].clone() } else { Vec::new() });
            let unordered: Vec<usize> = earlier.filter(|&x| x != me && hb.is_none_or(|hb| !hb.ordered(x, me))).collect();
            for x in unordered {
                if !self.raced.insert((x, me)) {
                    continue;
                }
                let touch = Touch { buffer: place.0, chunk: place.1 + i, write, wrote: self.last_write[g][cell] == Some(x) };
                if hb.is_some() {
                    self.races.push(race_line(&self.net, &self.order, (x, me), touch));
                } else if self.order.op_at[x].1 != t {
                    // Steps of one threadblock are ordered by it.
                    self.deferred.push((x, me, touch));
                }
            }
            if write {
                self.last_write[g][cell] = Some(me);
                self.reads_since[g][cell].clear();
            } else if !self.reads_since[g][cell].contains(&me) {
                self.reads_since[g][cell].push(me);
            }
        }
    }

    /// Orders the pairs [`Self::touch`] kept, one gpu at a time, each order watching that gpu's
    /// threadblocks: the races among them, in the order they were touched per gpu; `None` when the
    /// orders would take more than [`MAX_ORDER_WORK`] or one gpu's clocks more than
    /// [`super::races::MAX_CLOCK_ENTRIES`].
    fn deferred_races(&self) -> Option<Vec<String>> {
        let graph = self.order.graph.as_ref()?;
        let mut by_gpu: Vec<Vec<&(usize, usize, Touch)>> = vec![Vec::new(); self.net.gpus.len()];
        for d in &self.deferred {
            by_gpu[self.order.op_at[d.1].0].push(d);
        }
        // Each gpu's order watches the threadblocks whose steps come first in its pairs.
        let watched: Vec<Vec<usize>> = by_gpu
            .iter()
            .map(|pairs| {
                let mut tbs: Vec<usize> = pairs.iter().map(|&&(x, _, _)| graph.threadblock(x)).collect();
                tbs.sort_unstable();
                tbs.dedup();
                tbs
            })
            .collect();
        let work: usize = watched.iter().map(|w| graph.work(w.len())).sum();
        if work > MAX_ORDER_WORK {
            return None;
        }
        // A gpu watching more threadblocks than one order's clocks hold takes several orders,
        // each watching some of them; the orders are independent: on every thread.
        let batch = (MAX_CLOCK_ENTRIES / graph.steps().max(1)).max(1);
        let tasks: Vec<(usize, &[usize])> = watched.iter().enumerate().flat_map(|(g, w)| w.chunks(batch).map(move |b| (g, b))).collect();
        let found: Vec<Option<Vec<(usize, usize)>>> = tasks
            .par_iter()
            .map(|&(g, tbs)| {
                let hb = graph.order(tbs, MAX_CLOCK_ENTRIES)?;
                Some(
                    by_gpu[g]
                        .iter()
                        .enumerate()
                        .filter(|(_, (x, me, _))| tbs.binary_search(&graph.threadblock(*x)).is_ok() && !hb.ordered(*x, *me))
                        .map(|(k, _)| (g, k))
                        .collect(),
                )
            })
            .collect();
        let mut races: Vec<(usize, usize)> = found.into_iter().collect::<Option<Vec<_>>>()?.concat();
        races.sort_unstable();
        Some(
            races
                .into_iter()
                .map(|(g, k)| {
                    let &(x, me, touch) = by_gpu[g][k];
                    race_line(&self.net, &self.order, (x, me), touch)
                })
                .collect(),
        )
    }

    fn finish_op(&mut self, g: usize, t: usize) {
        let st = &mut self.state[g][t];
        *st = TbState { pc: st.pc + 1, ..TbState::default() };
        self.executed += 1;
    }

    fn combine(&mut self, a: &[Option<ChunkValue>], b: &[Option<ChunkValue>], at: &str) -> Vec<Option<ChunkValue>> {
        a.iter()
            .zip(b)
            .map(|(x, y)| {
                let (x, y) = (x.as_ref()?, y.as_ref()?);
                if x.offset != y.offset {
                    self.errors.push(format!("{at}: reduces input chunk {} with input chunk {}", x.offset, y.offset));
                }
                if x.gpus.iter().any(|g| y.gpus.contains(g)) {
                    self.errors.push(format!("{at}: counts a contribution twice (reduces {x} with {y})"));
                }
                let mut gpus: Vec<usize> = x.gpus.iter().chain(&y.gpus).copied().collect();
                gpus.sort_unstable();
                gpus.dedup();
                Some(ChunkValue { offset: x.offset, gpus })
            })
            .collect()
    }

    /// After the run: the cycle of threadblocks that wait on each other, if any is stuck.
    fn deadlock(&self) -> Option<Deadlock> {
        let stuck = |g: usize, t: usize| self.op(g, t).is_some();
        let start = (0..self.net.gpus.len()).flat_map(|g| (0..self.net.gpus[g].len()).map(move |t| (g, t))).find(|&(g, t)| stuck(g, t))?;
        let mut path: Vec<((usize, usize), String)> = Vec::new();
        let mut cur = start;
        loop {
            if let Some(i) = path.iter().position(|(x, _)| *x == cur) {
                return Some(Deadlock { buffering: self.buffering, proto: self.proto, waits: path.drain(i..).map(|(_, w)| w).collect() });
            }
            let (next, text) = self.blocker(cur.0, cur.1);
            path.push((cur, text));
            match next {
                Some(n) if stuck(n.0, n.1) => cur = n,
                _ => return Some(Deadlock { buffering: self.buffering, proto: self.proto, waits: path.into_iter().map(|(_, w)| w).collect() }),
            }
        }
    }

    /// Where a threadblock is, in words: `step 1 (r, 1 chunk from gpu 0 on channel 0)`.
    fn position(&self, g: usize, t: usize) -> String {
        let Some(op) = self.op(g, t) else { return "finished".into() };
        let tb = &self.net.gpus[g][t];
        let chunks = if op.cnt == 1 { "1 chunk".to_string() } else { format!("{} chunks", op.cnt) };
        let peer = match (op.kind.receives(), op.kind.sends()) {
            (true, true) => format!(" from gpu {} to gpu {} on channel {}", tb.recv.unwrap_or(0), tb.send.unwrap_or(0), tb.chan),
            (true, false) => format!(" from gpu {} on channel {}", tb.recv.unwrap_or(0), tb.chan),
            (false, true) => format!(" to gpu {} on channel {}", tb.send.unwrap_or(0), tb.chan),
            (false, false) => String::new(),
        };
        format!("step {} ({}, {chunks}{peer})", op.s, op.kind)
    }

    /// Whom a stuck threadblock waits for, and why.
    fn blocker(&self, g: usize, t: usize) -> (Option<(usize, usize)>, String) {
        let here = format!("gpu {g} tb {t} {}", self.position(g, t));
        let Some(op) = self.op(g, t) else { return (None, here) };
        let st = &self.state[g][t];
        if !st.begun {
            if let Some(w) = op.waits.iter().find(|w| self.state[g][w.tb].pc <= w.op) {
                let target = self.net.gpus[g][w.tb].ops.get(w.op).map_or(-1, |o| o.s);
                let text = format!(
                    "{here} waits for gpu {g} tb {} to finish its step {target} (depid=\"{}\" deps=\"{}\"); that threadblock is at its {}",
                    w.tb,
                    w.depid,
                    w.deps,
                    self.position(g, w.tb)
                );
                return (Some((g, w.tb)), text);
            }
        }
        let tb = &self.net.gpus[g][t];
        let input_empty = op.kind.receives() && tb.in_conn.is_none_or(|c| self.available(c, op.in_msg) == 0);
        // A fused step whose sender is ready to send it waits, with it, on its own send: the
        // receiver of that send is what holds both up.
        let mut sender_ready = None;
        if input_empty {
            let Some(c) = tb.in_conn else { return (None, here) };
            let (a, at) = self.net.conns[c].from;
            if !(op.kind.sends() && self.ready_to_send(a, at, c, op.in_msg, &mut Vec::new())) {
                let text = format!("{here} waits for gpu {a} tb {at} to send it; gpu {a} tb {at} is at its {}", self.position(a, at));
                return (Some((a, at)), text);
            }
            sender_ready = Some((a, at));
        }
        let Some(c) = tb.out_conn else { return (None, here) };
        let (b, bt) = self.net.conns[c].to;
        let written = if op.kind.receives() { st.moved_in } else { st.moved_out };
        let text = match (self.buffering, sender_ready) {
            (_, Some((a, at))) => format!(
                "{here} can take what gpu {a} tb {at} is ready to send only as it passes it on: it waits for gpu {b} tb {bt} to receive it; gpu {b} tb {bt} is at its {}",
                self.position(b, bt)
            ),
            (Buffering::Runtime, None) => format!(
                "{here} has written {written} of its {} slots and the {} slots of its connection are full: it waits for gpu {b} tb {bt} to receive, which is at its {}",
                op.slots(),
                self.capacity,
                self.position(b, bt)
            ),
            (Buffering::Rendezvous, None) => format!("{here} waits for gpu {b} tb {bt} to receive it; gpu {b} tb {bt} is at its {}", self.position(b, bt)),
        };
        (Some((b, bt)), text)
    }

    /// Whether threadblock `t` of gpu `g` is at the send of message `m` on connection `c` with
    /// nothing in its way but that send's receiver: its dependencies are met and, for a fused
    /// step, what it passes on has arrived or its own sender is ready so (a chain of fused steps
    /// moves at once under rendezvous; one that comes back to itself is not ready).
    fn ready_to_send(&self, g: usize, t: usize, c: usize, m: usize, visited: &mut Vec<(usize, usize)>) -> bool {
        let Some(op) = self.op(g, t) else { return false };
        let tb = &self.net.gpus[g][t];
        if !(op.kind.sends() && tb.out_conn == Some(c) && op.out_msg == m && (self.state[g][t].begun || self.waits_done(g, t))) {
            return false;
        }
        if !op.kind.receives() {
            return true;
        }
        let Some(i) = tb.in_conn else { return false };
        if self.available(i, op.in_msg) > 0 {
            return true;
        }
        if visited.contains(&(g, t)) {
            return false;
        }
        visited.push((g, t));
        let (a, at) = self.net.conns[i].from;
        self.ready_to_send(a, at, i, op.in_msg, visited)
    }

    fn finish(mut self, p: &Program, placement: Placement) -> Execution {
        let races_checked = self.order.hb.is_some()
            || self.order.graph.is_some() && {
                match self.deferred_races() {
                    Some(races) => {
                        self.races = races;
                        true
                    }
                    None => false,
                }
            };
        let unleveled = self.level();
        let outputs: Vec<Vec<Option<ChunkValue>>> = (0..self.net.gpus.len()).map(|g| self.mem.output(g)).collect();
        let aliasing_modelled =
            placement == Placement::OutOfPlace || matches!(p.collective(), Some(Coll::AllReduce | Coll::AllToAll | Coll::AllGather | Coll::ReduceScatter));
        let mut errors = self.errors;
        let checked = aliasing_modelled && expect_outputs(p, &outputs, &mut errors);
        if !aliasing_modelled {
            // What the chunks hold depends on the aliasing, which this run does not have.
            errors.clear();
        }
        Execution {
            steps: self.executed,
            outputs,
            errors,
            postcondition_checked: checked,
            messages: self.messages,
            races: self.races,
            races_checked,
            aliasing_modelled,
            unleveled,
        }
    }
}

/// A cell a pair of steps touches: its buffer (0 `i`, 1 `o`, 2 `s`) and chunk, and whether the
/// later step writes it and the earlier one wrote it.
#[derive(Clone, Copy)]
struct Touch {
    buffer: usize,
    chunk: usize,
    write: bool,
    wrote: bool,
}

/// The line of a race between ops `x` and `me` (numbered as in [`StepOrder`]) of one gpu over a
/// cell, the writer first, as in docs/design/FORMATS.md "Data races".
fn race_line(net: &Net, order: &StepOrder, (x, me): (usize, usize), touch: Touch) -> String {
    let (g, t, k) = order.op_at[me];
    let (_, xt, xk) = order.op_at[x];
    let (other, mine) = (&net.gpus[g][xt].ops[xk], &net.gpus[g][t].ops[k]);
    let (first, second) =
        if touch.write || !touch.wrote { ((t, mine, touch.write), (xt, other, touch.wrote)) } else { ((xt, other, touch.wrote), (t, mine, touch.write)) };
    let does = |w: bool| if w { "writes" } else { "reads" };
    format!(
        "gpu {g} buffer {} chunk {}: tb {} step {} ({}) {} it, unordered with tb {} step {} ({}), which {} it",
        ["i", "o", "s"][touch.buffer],
        touch.chunk,
        first.0,
        first.1.s,
        first.1.kind,
        does(first.2),
        second.0,
        second.1.s,
        second.1.kind,
        does(second.2)
    )
}

/// A program's ops numbered threadblock after threadblock, and their happens-before order.
struct StepOrder {
    /// The order watched by every threadblock (`None`: a cycle, or too large,
    /// [`super::races::MAX_CLOCK_ENTRIES`]).
    hb: Option<HappensBefore>,
    /// Where `hb` is too large: the steps and what orders them, for orders one gpu at a time.
    graph: Option<StepGraph>,
    /// Per gpu and threadblock: the number of its first op.
    first_op: Vec<Vec<usize>>,
    /// Per number: (gpu, threadblock, index of the op in it).
    op_at: Vec<(usize, usize, usize)>,
}

/// The happens-before order of a program's ops ([`super::races`]): over every threadblock up to
/// `whole` clock entries, else the graph for orders one gpu at a time.
fn happens_before(net: &Net, whole: usize) -> StepOrder {
    let mut first_op = Vec::new();
    let mut op_at = Vec::new();
    let mut lengths = Vec::new();
    for (g, tbs) in net.gpus.iter().enumerate() {
        let mut firsts = Vec::new();
        for (t, tb) in tbs.iter().enumerate() {
            firsts.push(op_at.len());
            op_at.extend((0..tb.ops.len()).map(|k| (g, t, k)));
            lengths.push(tb.ops.len());
        }
        first_op.push(firsts);
    }
    let mut edges = Vec::new();
    for (g, tbs) in net.gpus.iter().enumerate() {
        for (t, tb) in tbs.iter().enumerate() {
            for (k, op) in tb.ops.iter().enumerate() {
                // A wait ends when the op that signals it has finished.
                edges.extend(op.waits.iter().map(|w| (first_op[g][w.tb] + w.op, first_op[g][t] + k)));
            }
        }
    }
    for c in &net.conns {
        let ((a, at), (b, bt)) = (c.from, c.to);
        let sends = net.gpus[a][at].ops.iter().enumerate().filter(|(_, o)| o.kind.sends()).map(|(k, _)| k);
        let recvs = net.gpus[b][bt].ops.iter().enumerate().filter(|(_, o)| o.kind.receives()).map(|(k, _)| k);
        // A receive ends after its send has read everything it sends.
        edges.extend(sends.zip(recvs).map(|(sk, rk)| (first_op[a][at] + sk, first_op[b][bt] + rk)));
    }
    let graph = StepGraph::new(&lengths, &edges);
    let every: Vec<usize> = (0..lengths.len()).collect();
    let hb = graph.as_ref().and_then(|g| g.order(&every, whole));
    let graph = if hb.is_none() { graph } else { None };
    StepOrder { hb, graph, first_op, op_at }
}

/// Compares the outputs with what `coll` wants (the layout of [`crate::lower::Layout`]);
/// false when it has no postcondition here.
fn expect_outputs(p: &Program, outputs: &[Vec<Option<ChunkValue>>], errors: &mut Vec<String>) -> bool {
    let (Some(coll), Some([input, _])) = (p.collective(), buffer_chunks(p)) else { return false };
    let n = outputs.len();
    let all: Vec<usize> = (0..n).collect();
    let per_gpu = usize::try_from(p.nchunksperloop.unwrap_or(0)).unwrap_or(0) / n.max(1);
    for (j, out) in outputs.iter().enumerate() {
        for (x, got) in out.iter().enumerate() {
            let want = match coll {
                Coll::AllToAll => ChunkValue { offset: j * per_gpu + x % per_gpu.max(1), gpus: vec![x / per_gpu.max(1)] },
                Coll::AllGather => ChunkValue { offset: x % input.max(1), gpus: vec![x / input.max(1)] },
                Coll::ReduceScatter => ChunkValue { offset: j * per_gpu + x, gpus: all.clone() },
                _ => ChunkValue { offset: x, gpus: all.clone() },
            };
            if got.as_ref() != Some(&want) {
                errors.push(format!(
                    "gpu {j} output chunk {x}: holds {}; {} wants {want}",
                    describe(got.as_ref()),
                    p.coll.as_ref().map_or("", |(t, _)| t.as_str())
                ));
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::model::read_program;
    use super::*;
    use proptest::prelude::*;

    fn program(xml: &str) -> Program {
        let r = read_program(xml);
        assert!(r.problems.errors.is_empty(), "{:?}", r.problems.errors);
        r.program.unwrap()
    }

    /// Two gpus exchange their all-to-all blocks of `p` chunks: each gpu's threadblock 0 sends
    /// first or receives first (`send_first`), threadblock 1 copies the gpu's own block; in the
    /// executor's dialect or the older one.
    fn exchange(p: usize, send_first: [bool; 2], executor: bool) -> String {
        let algo = if executor { r#" outofplace="1" minBytes="0" maxBytes="0""# } else { "" };
        let mut x = format!(
            "<algo name=\"exchange\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"{}\" ngpus=\"2\" coll=\"alltoall\" inplace=\"0\"{algo}>\n",
            2 * p
        );
        for (g, &sends_first) in send_first.iter().enumerate() {
            let other = 1 - g;
            let send = format!(r#"type="s" srcbuf="i" srcoff="{}" dstbuf="o" dstoff="{}""#, other * p, g * p);
            let recv = format!(r#"type="r" srcbuf="i" srcoff="{}" dstbuf="o" dstoff="{}""#, g * p, other * p);
            let (first, second) = if sends_first { (send, recv) } else { (recv, send) };
            x += &format!("  <gpu id=\"{g}\" i_chunks=\"{}\" o_chunks=\"{}\" s_chunks=\"0\">\n", 2 * p, 2 * p);
            x += &format!("    <tb id=\"0\" send=\"{other}\" recv=\"{other}\" chan=\"0\">\n");
            for (s, body) in [first, second].iter().enumerate() {
                x += &format!("      <step s=\"{s}\" {body} cnt=\"{p}\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n");
            }
            x += "    </tb>\n    <tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">\n";
            x += &format!("      <step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"{0}\" dstbuf=\"o\" dstoff=\"{0}\" cnt=\"{p}\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n", g * p);
            x += "    </tb>\n  </gpu>\n";
        }
        x + "</algo>"
    }

    fn deadlock(r: Result<Execution, SimError>) -> Deadlock {
        match r {
            Err(SimError::Deadlock(d)) => d,
            other => panic!("expected a deadlock, got {other:?}"),
        }
    }

    #[test]
    fn one_chunk_each_way_runs_on_buffering_and_deadlocks_under_rendezvous() {
        for executor in [true, false] {
            let p = program(&exchange(1, [true, true], executor));
            let run = simulate(&p, Placement::OutOfPlace, Buffering::Runtime).unwrap();
            assert!(run.is_correct() && run.postcondition_checked, "{:?}", run.errors);
            assert_eq!(run.steps, 6);
            let d = deadlock(simulate(&p, Placement::OutOfPlace, Buffering::Rendezvous));
            assert_eq!(
                d.waits,
                [
                    "gpu 0 tb 0 step 0 (s, 1 chunk to gpu 1 on channel 0) waits for gpu 1 tb 0 to receive it; gpu 1 tb 0 is at its step 0 (s, 1 chunk to gpu 0 on channel 0)",
                    "gpu 1 tb 0 step 0 (s, 1 chunk to gpu 0 on channel 0) waits for gpu 0 tb 0 to receive it; gpu 0 tb 0 is at its step 0 (s, 1 chunk to gpu 1 on channel 0)",
                ]
            );
        }
    }

    #[test]
    fn three_chunks_each_way_overflow_the_eight_slots() {
        let p = program(&exchange(3, [true, true], true));
        let d = deadlock(simulate(&p, Placement::OutOfPlace, Buffering::Runtime));
        assert_eq!(
            d.to_string(),
            "deadlock under the runtime's buffering (8 slots per connection, 4 slots per chunk with proto Simple): 2 threadblocks wait on each other in a cycle:\n  \
             gpu 0 tb 0 step 0 (s, 3 chunks to gpu 1 on channel 0) has written 8 of its 12 slots and the 8 slots of its connection are full: it waits for gpu 1 tb 0 to receive, which is at its step 0 (s, 3 chunks to gpu 0 on channel 0)\n  \
             gpu 1 tb 0 step 0 (s, 3 chunks to gpu 0 on channel 0) has written 8 of its 12 slots and the 8 slots of its connection are full: it waits for gpu 0 tb 0 to receive, which is at its step 0 (s, 3 chunks to gpu 1 on channel 0)"
        );
        // Two chunks are exactly the eight slots: that still runs.
        let two = program(&exchange(2, [true, true], true));
        assert!(simulate(&two, Placement::OutOfPlace, Buffering::Runtime).unwrap().is_correct());
    }

    /// Under LL and LL128 a chunk is one slot (the runtime's chunk is `MSCCL_CHUNKSTEPS` slots
    /// only under Simple): three chunks each way run (they hang under Simple), eight fill the
    /// eight slots and run, nine hang. Every chunk was four slots whatever the protocol.
    #[test]
    fn a_chunk_is_one_slot_under_ll_and_ll128() {
        for proto in ["LL", "LL128"] {
            let with = |p: usize| program(&exchange(p, [true, true], true).replacen(r#"proto="Simple""#, &format!(r#"proto="{proto}""#), 1));
            for p in [3, 8] {
                let run = simulate(&with(p), Placement::OutOfPlace, Buffering::Runtime).unwrap_or_else(|e| panic!("{proto} {p}: {e}"));
                assert!(run.is_correct(), "{proto} {p}: {:?}", run.errors);
            }
            let d = deadlock(simulate(&with(9), Placement::OutOfPlace, Buffering::Runtime));
            assert!(
                d.to_string().starts_with(&format!(
                    "deadlock under the runtime's buffering (8 slots per connection, 1 slot per chunk with proto {proto}): 2 threadblocks"
                )),
                "{d}"
            );
            assert!(d.waits[0].contains("has written 8 of its 9 slots and the 8 slots of its connection are full"), "{d}");
            // Rendezvous holds no slot, whatever the protocol.
            deadlock(simulate(&with(1), Placement::OutOfPlace, Buffering::Rendezvous));
        }
        deadlock(simulate(&program(&exchange(3, [true, true], true)), Placement::OutOfPlace, Buffering::Runtime));
    }

    #[test]
    fn receiving_first_on_both_sides_deadlocks_in_every_model() {
        let p = program(&exchange(1, [false, false], false));
        for buffering in [Buffering::Runtime, Buffering::Rendezvous] {
            let d = deadlock(simulate(&p, Placement::OutOfPlace, buffering));
            assert_eq!(
                d.waits[0],
                "gpu 0 tb 0 step 0 (r, 1 chunk from gpu 1 on channel 0) waits for gpu 1 tb 0 to send it; gpu 1 tb 0 is at its step 0 (r, 1 chunk from gpu 0 on channel 0)"
            );
            assert_eq!(d.waits.len(), 2);
        }
    }

    #[test]
    fn dependencies_wait_and_can_close_a_cycle() {
        // gpu 0: tb 1 copies only after tb 0's step 1, which follows a receive that waits for gpu 1.
        let xml = exchange(1, [true, true], true).replacen(
            r#"<step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1""#,
            r#"<step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="0" deps="1""#,
            1,
        );
        let xml = xml.replacen(r#"dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0""#, r#"dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1""#, 1);
        let p = program(&xml);
        assert!(simulate(&p, Placement::OutOfPlace, Buffering::Runtime).unwrap().is_correct());
        // Now tb 0's send waits for tb 1's copy, which waits for tb 0's receive.
        let cyclic = xml
            .replacen(
                r#"type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1""#,
                r#"type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="1" deps="0""#,
                1,
            )
            .replacen(r#"depid="0" deps="1" hasdep="0""#, r#"depid="0" deps="1" hasdep="1""#, 1);
        let d = deadlock(simulate(&program(&cyclic), Placement::OutOfPlace, Buffering::Runtime));
        assert!(
            d.waits
                .iter()
                .any(|w| w
                    .starts_with("gpu 0 tb 0 step 0 (s, 1 chunk to gpu 1 on channel 0) waits for gpu 0 tb 1 to finish its step 0 (depid=\"1\" deps=\"0\")")),
            "{d}"
        );
        assert!(d.waits.iter().any(|w| w.starts_with("gpu 0 tb 1 step 0 (cpy, 1 chunk) waits for gpu 0 tb 0 to finish its step 1")), "{d}");
    }

    #[test]
    fn in_place_rings_alias_their_buffers() {
        for (file, xml) in [
            ("allreduce", include_str!("../../../tests/data/msccl/allreduce_ring_inplace.xml")),
            ("allgather", include_str!("../../../tests/data/msccl/allgather_ring_inplace.xml")),
            ("allreduce executor", include_str!("../../../tests/data/msccl/allreduce_ring_inplace.executor.xml")),
            ("allgather executor", include_str!("../../../tests/data/msccl/allgather_ring_inplace.executor.xml")),
        ] {
            let p = program(xml);
            assert_eq!(Placement::declared(&p), [Placement::InPlace], "{file}");
            let run = simulate(&p, Placement::InPlace, Buffering::Runtime).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(run.is_correct() && run.postcondition_checked, "{file}: {:?}", run.errors);
            assert_eq!(deadlock(simulate(&p, Placement::InPlace, Buffering::Rendezvous)).waits.len(), 4, "{file}");
            // Without the aliasing the all-gather reads chunks that hold nothing and the
            // all-reduce leaves its output buffer empty.
            let apart = simulate(&p, Placement::OutOfPlace, Buffering::Runtime).unwrap();
            assert!(apart.errors.iter().any(|e| e.contains("holds nothing") || e.contains("holds None")), "{file}: {:?}", apart.errors);
        }
    }

    #[test]
    fn a_chain_of_fused_steps_moves_at_once_under_rendezvous() {
        // gpu 0 sends its chunk to gpu 2 through gpu 1 (rcs); all-gather leaves the rest undone,
        // so only the run matters here.
        let xml = r#"<algo name="chain" proto="Simple" nchannels="1" nchunksperloop="3" ngpus="3" coll="allgather" inplace="0">
  <gpu id="0" i_chunks="1" o_chunks="3" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="3" s_chunks="0">
    <tb id="0" send="2" recv="0" chan="0">
      <step s="0" type="rcs" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
  <gpu id="2" i_chunks="1" o_chunks="3" s_chunks="0">
    <tb id="0" send="-1" recv="1" chan="0">
      <step s="0" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" />
    </tb>
  </gpu>
</algo>"#;
        let p = program(xml);
        for buffering in [Buffering::Rendezvous, Buffering::Runtime] {
            let run = simulate(&p, Placement::OutOfPlace, buffering).unwrap();
            assert_eq!(run.steps, 3);
            assert_eq!(run.outputs[2][0], Some(ChunkValue { offset: 0, gpus: vec![0] }));
            assert_eq!(run.messages.iter().map(|m| (m.from, m.to, m.level)).collect::<Vec<_>>(), [(0, 1, 1), (1, 2, 2)]);
        }
    }

    #[test]
    fn unpaired_sends_and_misplaced_chunks_are_reported() {
        let extra = exchange(1, [true, true], true).replacen(
            "    </tb>",
            "      <step s=\"2\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n    </tb>",
            1,
        );
        match simulate(&program(&extra), Placement::OutOfPlace, Buffering::Runtime) {
            Err(SimError::Unpaired(p)) => {
                assert_eq!(p, ["gpu 0 tb 0 sends 2 times to gpu 1 on channel 0, gpu 1 tb 0 receives 1 time from it: gpu 0 tb 0 step 2 has no partner"])
            }
            other => panic!("{other:?}"),
        }
        let wrong = exchange(1, [true, true], true).replacen(
            r#"type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0""#,
            r#"type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1""#,
            1,
        );
        let run = simulate(&program(&wrong), Placement::OutOfPlace, Buffering::Runtime).unwrap();
        // In words, not as Rust's debug output.
        assert!(run.errors.contains(&"gpu 1 output chunk 0: holds nothing; alltoall wants the input chunk 1 of gpu 0".to_string()), "{:?}", run.errors);
        // The receive now writes o[1], which gpu 1's copy also writes, and nothing orders them.
        assert_eq!(run.races.len(), 1, "{:?}", run.races);
        assert!(run.races[0].starts_with("gpu 1 buffer o chunk 1: "), "{:?}", run.races);
        assert!(run.races[0].contains("tb 0 step 1 (r)") && run.races[0].contains("tb 1 step 0 (cpy)"), "{:?}", run.races);
        let reduced = ChunkValue { offset: 3, gpus: vec![0, 1, 2] };
        assert_eq!((reduced.to_string(), describe(None)), ("input chunk 3 reduced over gpus 0, 1 and 2".to_string(), "nothing".to_string()));
    }

    /// A write-after-read race is found under either buffering, whichever order the run takes,
    /// and a dependency that orders the write after the read removes it.
    #[test]
    fn races_do_not_depend_on_the_buffering() {
        let racy = program(include_str!("../../../tests/data/msccl/race_war.xml"));
        let fixed = program(include_str!("../../../tests/data/msccl/race_fixed.xml"));
        for buffering in [Buffering::Runtime, Buffering::Rendezvous] {
            let run = simulate(&racy, Placement::InPlace, buffering).unwrap();
            assert!(run.races_checked && run.races.len() == 3 && !run.is_correct(), "{buffering:?}: {:?}", run.races);
            // Ordered one gpu at a time (a program too large for one order), the same races.
            let per_gpu = simulate_ordered(&racy, Placement::InPlace, buffering, Routes::new(), 0).unwrap();
            let sorted = |mut v: Vec<String>| {
                v.sort();
                v
            };
            assert!(per_gpu.races_checked && sorted(per_gpu.races) == sorted(run.races.clone()), "{buffering:?}");
            if let Ok(run) = simulate(&fixed, Placement::InPlace, buffering) {
                assert!(run.races.is_empty() && run.is_correct(), "{buffering:?}: {:?} {:?}", run.races, run.errors);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

        /// Who hangs, by the buffering rule worked out by hand: with both sending first, the
        /// exchange runs under buffering iff one send fits (4 x chunks <= 8 slots under Simple,
        /// 1 x chunks under LL and LL128) and never
        /// under rendezvous; receiving first on both sides always hangs; otherwise it runs.
        #[test]
        fn exchanges_hang_exactly_when_the_slots_say(p in 1usize..11, send_first in any::<[bool; 2]>(), executor in any::<bool>(), proto in 0usize..3) {
            let (proto, per_chunk) = [("Simple", CHUNK_STEPS), ("LL", 1), ("LL128", 1)][proto];
            let prog = program(&exchange(p, send_first, executor).replacen(r#"proto="Simple""#, &format!(r#"proto="{proto}""#), 1));
            let fits = per_chunk * p <= NCCL_STEPS;
            let runs_buffered = match send_first { [true, true] => fits, [false, false] => false, _ => true };
            let runs_rendezvous = send_first[0] != send_first[1];
            for (buffering, expect) in [(Buffering::Runtime, runs_buffered), (Buffering::Rendezvous, runs_rendezvous)] {
                match simulate(&prog, Placement::OutOfPlace, buffering) {
                    Ok(run) => {
                        prop_assert!(expect, "{buffering:?} ran");
                        prop_assert!(run.is_correct(), "{:?}", run.errors);
                    }
                    Err(SimError::Deadlock(d)) => {
                        prop_assert!(!expect, "{buffering:?}: {d}");
                        prop_assert_eq!(d.waits.len(), 2);
                    }
                    Err(e) => prop_assert!(false, "{e}"),
                }
            }
        }
    }
}
