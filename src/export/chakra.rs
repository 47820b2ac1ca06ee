//! Chakra execution traces (what ASTRA-sim runs as a custom collective), docs/design/FORMATS.md "Chakra
//! execution traces".
//!
//! [`chakra_traces`] turns lowered programs ([`crate::lower`]) into one trace per rank;
//! [`write_chakra`] writes them as `<prefix>.<rank>.et` next to a system-file snippet;
//! [`decode_chakra`] reads a trace back (tests, tools).
//!
//! **Encoding.** A trace is a stream of protobuf messages, each preceded by its length as a
//! varint: first a [`GlobalMetadata`] with version `0.0.4`, then [`Node`]s. The message structs
//! are hand-written with prost and carry the field numbers of Chakra's `schema/protobuf/et_def.proto`
//! (`AttributeProto`: name 1, doc_string 2, int32_val 7, int64_val 9, uint64_val 13, bool_val 27,
//! string_val 29; `Node`: id 1 ... attr 10).
//!
//! **Nodes.** Every send becomes a `COMM_SEND_NODE` and every receive a `COMM_RECV_NODE`; a
//! reducing receive is a `COMM_RECV_NODE` followed by a `COMP_NODE` (the reduction) that depends
//! on it. Local copies (placing a rank's own block, moving a piece out of scratch) move no data
//! over the network and ASTRA-sim has no node for them: they are left out, and whatever waited
//! for a copy waits for what the copy waited for instead. Nodes are written in a topological
//! order of their dependencies and numbered from 0 in that order. `data_deps` of a node: the
//! previous operation of its threadblock and the cross-threadblock dependencies of the lowering.
//!
//! **Attributes.** Types follow what ASTRA-sim's feeder reads (`int32_val` for ranks, tags and
//! chunk counts, `int64_val` for `comm_size`): sends carry `comm_src`, `comm_dst`, `comm_size`,
//! `comm_tag`, receives the same; both carry `is_cpu_op` = false and the chunk attributes
//! `msg_chunk_cnt` (pieces in the message), `msg_chunk_idx` (chunk index of its first piece among
//! the `total_chunk_cnt` = R*P chunks of the collective's largest buffer), from which ASTRA-sim
//! sizes a message as `data_size / total_chunk_cnt * msg_chunk_cnt`. Non-uniform all-to-all has
//! pieces of different sizes, which equal chunks cannot express: its chunk attributes are -1, and
//! ASTRA-sim then falls back to `comm_size`. A reduction carries `tensor_size` (bytes, uint64)
//! and `num_ops` (4-byte elements, int64).
//!
//! **Sizes and rounding.** `comm_size` is the exact size of the message's pieces
//! (`Collective::piece_size_at`) summed, then rounded **up** to whole bytes; so a message is at
//! most one byte larger than the schedule's, and exact when S is a multiple of R*P.
//!
//! **Tags.** The k-th message from rank `src` to rank `dst` on channel `c` (k counted in
//! threadblock order, which is the runtime's first-in-first-out order, as the lowering puts each
//! (channel, peer, direction) in one threadblock) gets tag `k*(C*R*R) + (c*R + src)*R + dst` (C
//! channels, R ranks): unique per message, so matching on (tag, src, dst, size) pairs the k-th
//! send with the k-th receive whatever order ASTRA-sim issues them in. Both ends are checked to
//! carry the same pieces.

use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::lower::{Layout, OpKind, OpRef, Operation, Programs, Threadblock};
use crate::schedule::Schedule;
use crate::units::Rational;
use prost::Message;
use std::collections::HashMap;
use std::path::Path;

/// The Chakra schema version written in [`GlobalMetadata`].
pub const CHAKRA_VERSION: &str = "0.0.4";

/// Chakra's `GlobalMetadata`: the first message of a trace.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GlobalMetadata {
    /// Schema version.
    #[prost(string, tag = "1")]
    pub version: String,
    /// Free attributes.
    #[prost(message, repeated, tag = "2")]
    pub attr: Vec<AttributeProto>,
}

/// Chakra's `AttributeProto` (the value kinds this exporter uses).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// Attribute name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Documentation.
    #[prost(string, tag = "2")]
    pub doc_string: String,
    /// The value (a `oneof` in et_def.proto).
    #[prost(oneof = "AttrValue", tags = "7, 9, 13, 27, 29")]
    pub value: Option<AttrValue>,
}

/// The used members of `AttributeProto.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
#[allow(clippy::enum_variant_names)] // the names of Chakra's protobuf schema
pub enum AttrValue {
    /// `int32_val`.
    #[prost(int32, tag = "7")]
    Int32Val(i32),
    /// `int64_val`.
    #[prost(int64, tag = "9")]
    Int64Val(i64),
    /// `uint64_val`.
    #[prost(uint64, tag = "13")]
    Uint64Val(u64),
    /// `bool_val`.
    #[prost(bool, tag = "27")]
    BoolVal(bool),
    /// `string_val`.
    #[prost(string, tag = "29")]
    StringVal(String),
}

impl AttributeProto {
    fn new(name: &str, value: AttrValue) -> Self {
        AttributeProto { name: name.into(), doc_string: String::new(), value: Some(value) }
    }

    /// The value as an integer, whatever its integer kind.
    pub fn as_i64(&self) -> Option<i64> {
        match self.value {
            Some(AttrValue::Int32Val(v)) => Some(v as i64),
            Some(AttrValue::Int64Val(v)) => Some(v),
            Some(AttrValue::Uint64Val(v)) => i64::try_from(v).ok(),
            _ => None,
        }
    }
}

/// Chakra's `NodeType` (the kinds this exporter writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
#[allow(clippy::enum_variant_names)] // the names of Chakra's protobuf schema
pub enum NodeType {
    /// `INVALID_NODE`.
    InvalidNode = 0,
    /// `COMP_NODE`: a reduction.
    CompNode = 4,
    /// `COMM_SEND_NODE`.
    CommSendNode = 5,
    /// `COMM_RECV_NODE`.
    CommRecvNode = 6,
}

/// Chakra's `IOInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IoInfo {
    /// Values.
    #[prost(string, tag = "1")]
    pub values: String,
    /// Shapes.
    #[prost(string, tag = "2")]
    pub shapes: String,
    /// Types.
    #[prost(string, tag = "3")]
    pub types: String,
}

/// Chakra's `Node`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Node {
    /// Id, unique within the trace.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// [`NodeType`] as its number.
    #[prost(enumeration = "NodeType", tag = "3")]
    pub r#type: i32,
    /// Control dependencies (unused).
    #[prost(uint64, repeated, tag = "4")]
    pub ctrl_deps: Vec<u64>,
    /// Data dependencies: the nodes that must finish first.
    #[prost(uint64, repeated, tag = "5")]
    pub data_deps: Vec<u64>,
    /// Start time (unused).
    #[prost(uint64, tag = "6")]
    pub start_time_micros: u64,
    /// Duration (0: left to the simulator).
    #[prost(uint64, tag = "7")]
    pub duration_micros: u64,
    /// Inputs (unused).
    #[prost(message, optional, tag = "8")]
    pub inputs: Option<IoInfo>,
    /// Outputs (unused).
    #[prost(message, optional, tag = "9")]
    pub outputs: Option<IoInfo>,
    /// Attributes.
    #[prost(message, repeated, tag = "10")]
    pub attr: Vec<AttributeProto>,
}

impl Node {
    /// The integer value of an attribute.
    pub fn attr_i64(&self, name: &str) -> Option<i64> {
        self.attr.iter().find(|a| a.name == name).and_then(AttributeProto::as_i64)
    }
}

/// ASTRA-sim's name of a collective kind in system-file keys.
pub fn astra_sim_name(kind: CollectiveKind) -> &'static str {
    match kind {
        CollectiveKind::AllToAll => "all-to-all",
        CollectiveKind::AllGather => "all-gather",
        CollectiveKind::ReduceScatter => "reduce-scatter",
        CollectiveKind::AllReduce => "all-reduce",
    }
}

fn int32(name: &str, v: i64) -> Result<AttributeProto> {
    let v = i32::try_from(v).map_err(|_| Error::bad(format!("chakra: attribute {name} = {v} does not fit in int32")))?;
    Ok(AttributeProto::new(name, AttrValue::Int32Val(v)))
}

/// A message's size rounded up to whole bytes, which `comm_size` (int64) must hold.
fn ceil_bytes(r: Rational, what: impl FnOnce() -> String) -> Result<i64> {
    let bytes = r.ceil().to_integer();
    i64::try_from(bytes).map_err(|_| Error::bad(format!("chakra: {}: {bytes} bytes cannot be represented as comm_size (int64, at most {})", what(), i64::MAX)))
}

/// A message of a rank: (src, dst, channel) and its pieces' size.
struct Msg {
    stream: (usize, usize, usize),
    bytes: i64,
    first_chunk: i64,
    chunks: i64,
}

/// The pieces of the k-th message of every (src, dst, channel) stream, at one of its ends.
type StreamPieces<'a> = HashMap<(usize, usize, usize), Vec<&'a [PieceId]>>;

/// One encoded trace per rank, indexed by rank index (module docs: nodes, attributes, sizes,
/// tags). Fails when a piece is not one of the collective's, when dependencies are cyclic, or
/// when the two ends of a (src, dst, channel) stream do not carry the same pieces in order.
pub fn chakra_traces(programs: &Programs, schedule: &Schedule) -> Result<Vec<(usize, Vec<u8>)>> {
    let c = &schedule.header.collective;
    let r = programs.ranks.len();
    if r != c.num_ranks() {
        return Err(Error::bad(format!("chakra: {} rank programs for a collective of {} ranks", r, c.num_ranks())));
    }
    let channels = programs.ranks.iter().flat_map(|p| &p.threadblocks).flat_map(|t| &t.ops).map(|o| o.channel + 1).max().unwrap_or(1).max(programs.channels);
    // Only used when it fits int32 (checked where it is written); saturating keeps it from wrapping.
    let total_chunks = i64::try_from(r.saturating_mul(c.pieces as usize)).unwrap_or(i64::MAX);
    let mut tracer = Tracer { c, layout: Layout::of(c), ranks: r, channels, total_chunks, sent: HashMap::new(), received: HashMap::new() };
    let mut out = Vec::with_capacity(r);
    for (rank, program) in programs.ranks.iter().enumerate() {
        let nodes = tracer.rank_nodes(rank, &program.threadblocks)?;
        let mut bytes = Vec::new();
        GlobalMetadata { version: CHAKRA_VERSION.into(), attr: Vec::new() }.encode_length_delimited(&mut bytes).expect("a Vec grows");
        for n in &nodes {
            n.encode_length_delimited(&mut bytes).expect("a Vec grows");
        }
        out.push((rank, bytes));
    }
    tracer.check_streams()?;
    Ok(out)
}

/// What the traces of every rank share: the collective, the tag space, and both ends of every
/// stream, to check that they agree.
struct Tracer<'a> {
    c: &'a Collective,
    layout: Layout,
    ranks: usize,
    channels: usize,
    total_chunks: i64,
    sent: StreamPieces<'a>,
    received: StreamPieces<'a>,
}

impl<'a> Tracer<'a> {
    /// The nodes of one rank, in an order that respects every dependency: each threadblock's
    /// operations in order, an operation once the operations it waits on in other threadblocks
    /// have nodes. `data_deps` point at the exits of the previous operation and of those waited on.
    fn rank_nodes(&mut self, rank: usize, tbs: &'a [Threadblock]) -> Result<Vec<Node>> {
        // Exits of every operation: the node ids that mark it complete.
        let mut exits: Vec<Vec<Option<Vec<u64>>>> = tbs.iter().map(|t| vec![None; t.ops.len()]).collect();
        let mut next = vec![0usize; tbs.len()];
        let mut nodes: Vec<Node> = Vec::new();
        let mut counters: HashMap<(usize, usize, usize), usize> = HashMap::new();
        let remaining: usize = tbs.iter().map(|t| t.ops.len()).sum();
        let mut done = 0;
        while done < remaining {
            let mut progress = false;
            for tb in 0..tbs.len() {
                while next[tb] < tbs[tb].ops.len() {
                    let i = next[tb];
                    let op = &tbs[tb].ops[i];
                    let ready = |d: &OpRef| exits.get(d.tb).and_then(|t| t.get(d.op)).is_some_and(|e| e.is_some());
                    if !op.deps.iter().all(ready) {
                        break;
                    }
                    let mut deps: Vec<u64> = Vec::new();
                    if i > 0 {
                        deps.extend(exits[tb][i - 1].as_deref().unwrap_or_default());
                    }
                    for d in &op.deps {
                        deps.extend(exits[d.tb][d.op].as_deref().unwrap_or_default());
                    }
                    deps.sort_unstable();
                    deps.dedup();
                    let exit = match op.kind {
                        OpKind::Copy => deps,
                        OpKind::Send { .. } | OpKind::Recv { .. } => self.comm_nodes(rank, (tb, i), op, deps, &mut counters, &mut nodes)?,
                    };
                    exits[tb][i] = Some(exit);
                    next[tb] += 1;
                    done += 1;
                    progress = true;
                }
            }
            if !progress {
                return Err(Error::bad(format!("chakra: rank {rank}: cyclic dependencies between threadblocks")));
            }
        }
        Ok(nodes)
    }

    /// The message of an operation from `src` to `dst`: its stream, whole bytes, and chunks.
    fn message(&self, rank: usize, op: &Operation, src: usize, dst: usize) -> Result<Msg> {
        let c = self.c;
        let mut bytes = Rational::from_integer(0);
        for p in &op.pieces {
            let idx = c.piece_index(p).ok_or_else(|| Error::bad(format!("chakra: rank {rank}: piece {p} is not a piece of the collective")))?;
            bytes += c.piece_size_at(idx);
        }
        let first =
            op.pieces.first().map_or(0, |p| if c.kind == CollectiveKind::AllGather { self.layout.output_offset(p) } else { self.layout.input_offset(p) });
        let bytes = ceil_bytes(bytes, || format!("rank {rank}: the message from rank {src} to rank {dst} on channel {}", op.channel))?;
        Ok(Msg { stream: (src, dst, op.channel), bytes, first_chunk: first as i64, chunks: op.pieces.len() as i64 })
    }

    /// The send or receive node of an operation (and, for a reducing receive, the compute node
    /// after it); returns the node ids that mark the operation complete.
    fn comm_nodes(
        &mut self,
        rank: usize,
        (tb, i): (usize, usize),
        op: &'a Operation,
        deps: Vec<u64>,
        counters: &mut HashMap<(usize, usize, usize), usize>,
        nodes: &mut Vec<Node>,
    ) -> Result<Vec<u64>> {
        let (is_send, peer) = match op.kind {
            OpKind::Send { peer } => (true, peer),
            OpKind::Recv { peer, .. } => (false, peer),
            OpKind::Copy => unreachable!("copies make no communication node"),
        };
        let m = if is_send { self.message(rank, op, rank, peer)? } else { self.message(rank, op, peer, rank)? };
        let (src, dst, ch) = m.stream;
        let (r, channels) = (self.ranks, self.channels);
        let k = counters.entry((src, dst, ch)).or_default();
        let tag =
            k.checked_mul(channels * r * r).and_then(|t| t.checked_add((ch * r + src) * r + dst)).and_then(|t| i64::try_from(t).ok()).ok_or_else(|| {
                Error::bad(format!("chakra: rank {rank}: message {k} from rank {src} to rank {dst} on channel {ch}: its tag does not fit in int32"))
            })?;
        *k += 1;
        let ends = if is_send { &mut self.sent } else { &mut self.received };
        ends.entry(m.stream).or_default().push(&op.pieces);
        let uniform = self.c.is_uniform();
        let chunk = |v: i64| if uniform { v } else { -1 };
        let attr = vec![
            AttributeProto::new("is_cpu_op", AttrValue::BoolVal(false)),
            int32("comm_src", src as i64)?,
            int32("comm_dst", dst as i64)?,
            AttributeProto::new("comm_size", AttrValue::Int64Val(m.bytes)),
            int32("comm_tag", tag)?,
            int32("msg_chunk_cnt", chunk(m.chunks))?,
            int32("msg_chunk_idx", chunk(m.first_chunk))?,
            int32("total_chunk_cnt", chunk(self.total_chunks))?,
        ];
        let (ty, name) = if is_send {
            (NodeType::CommSendNode, format!("send_tb{tb}_op{i}_to{peer}_ch{ch}_tag{tag}"))
        } else {
            (NodeType::CommRecvNode, format!("recv_tb{tb}_op{i}_from{peer}_ch{ch}_tag{tag}"))
        };
        let id = nodes.len() as u64;
        nodes.push(Node { id, name, r#type: ty as i32, data_deps: deps, attr, ..Node::default() });
        if !matches!(op.kind, OpKind::Recv { reduce: true, .. }) {
            return Ok(vec![id]);
        }
        let rid = nodes.len() as u64;
        let attr = vec![
            AttributeProto::new("is_cpu_op", AttrValue::BoolVal(false)),
            AttributeProto::new("tensor_size", AttrValue::Uint64Val(m.bytes as u64)),
            // 4-byte elements, rounded up (m.bytes + 3 could overflow).
            AttributeProto::new("num_ops", AttrValue::Int64Val(m.bytes / 4 + i64::from(m.bytes % 4 != 0))),
        ];
        let name = format!("reduce_tb{tb}_op{i}_from{peer}_ch{ch}");
        nodes.push(Node { id: rid, name, r#type: NodeType::CompNode as i32, data_deps: vec![id], attr, ..Node::default() });
        Ok(vec![rid])
    }

    /// Both ends of every stream carry the same pieces in the same order.
    fn check_streams(&self) -> Result<()> {
        let mut streams: Vec<_> = self.sent.keys().chain(self.received.keys()).copied().collect();
        streams.sort_unstable();
        streams.dedup();
        for s in streams {
            let (a, b) = (self.sent.get(&s).map_or(&[][..], Vec::as_slice), self.received.get(&s).map_or(&[][..], Vec::as_slice));
            if a != b {
                return Err(Error::bad(format!(
                    "chakra: stream {} -> {} channel {}: {} sends and {} receives do not carry the same pieces in order",
                    s.0,
                    s.1,
                    s.2,
                    a.len(),
                    b.len()
                )));
            }
        }
        Ok(())
    }
}

/// Writes `<prefix>.<rank>.et` for every rank into `dir` (created if missing) and
/// `<prefix>.system.json`, the system-file entry that makes ASTRA-sim run them, e.g.
/// `{"all-to-all-implementation-custom": ["<dir>/<prefix>"]}`; all or none of them
/// (crate::io::OutputSet).
pub fn write_chakra(dir: &Path, prefix: &str, programs: &Programs, schedule: &Schedule) -> Result<()> {
    let traces = chakra_traces(programs, schedule)?;
    write_chakra_traces(dir, prefix, &traces, schedule.header.collective.kind)
}

/// [`write_chakra`] for traces already made (and checked) by [`chakra_traces`].
pub fn write_chakra_traces(dir: &Path, prefix: &str, traces: &[(usize, Vec<u8>)], kind: CollectiveKind) -> Result<()> {
    // The files appear together or not at all (exit 5 on failure, the files there before kept).
    let files = crate::io::OutputSet::new();
    for (rank, bytes) in traces {
        files.write_bytes(&dir.join(format!("{prefix}.{rank}.et")), bytes)?;
    }
    let key = format!("{}-implementation-custom", astra_sim_name(kind));
    let entry = serde_json::json!({ key: [dir.join(prefix).display().to_string()] });
    let text = serde_json::to_string_pretty(&entry).map_err(|e| Error::bad(e.to_string()))? + "\n";
    files.write_bytes(&dir.join(format!("{prefix}.system.json")), text.as_bytes())?;
    files.commit()
}

/// Decodes a trace: its metadata and its nodes.
pub fn decode_chakra(mut bytes: &[u8]) -> Result<(GlobalMetadata, Vec<Node>)> {
    let bad = |e: prost::DecodeError| Error::bad(format!("chakra: {e}"));
    let meta = GlobalMetadata::decode_length_delimited(&mut bytes).map_err(bad)?;
    let mut nodes = Vec::new();
    while !bytes.is_empty() {
        nodes.push(Node::decode_length_delimited(&mut bytes).map_err(bad)?);
    }
    Ok((meta, nodes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::{torus_all_to_all, RingAlgorithm, Scheduler};
    use crate::collective::Collective;
    use crate::lower::tests::torus_with;
    use crate::lower::{lower, LowerOptions, ThreadblockLayout};

    /// A ring of 4 running HalfRing all-to-all, S = 64 KiB, P = 1.
    fn ring4() -> Schedule {
        let t = torus_with(&[4], &[]);
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().take(t.num_npus()).collect(), 1 << 16, 1, None, &t).unwrap();
        torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap()
    }

    /// Decodes every trace and checks FIFO pairing on (tag, src, dst, size), the byte total,
    /// the chunk attributes and that `data_deps` point backwards.
    fn check(s: &Schedule, traces: &[(usize, Vec<u8>)]) -> i64 {
        let mut sends: HashMap<(i64, i64, i64, i64), usize> = HashMap::new();
        let mut recvs: HashMap<(i64, i64, i64, i64), usize> = HashMap::new();
        let (mut total, mut comps) = (0, 0);
        for (rank, bytes) in traces {
            let (meta, nodes) = decode_chakra(bytes).unwrap();
            assert_eq!(meta.version, "0.0.4");
            for (i, n) in nodes.iter().enumerate() {
                assert_eq!(n.id, i as u64);
                assert!(n.data_deps.iter().all(|&d| d < n.id), "{n:?}");
                let a = |k: &str| n.attr_i64(k).unwrap_or_else(|| panic!("{k} missing in {n:?}"));
                let rank = *rank as i64;
                match NodeType::try_from(n.r#type).unwrap() {
                    NodeType::CommSendNode => {
                        assert_eq!(a("comm_src"), rank);
                        *sends.entry((a("comm_tag"), rank, a("comm_dst"), a("comm_size"))).or_default() += 1;
                        total += a("comm_size");
                        assert_eq!(a("comm_size"), a("msg_chunk_cnt") * (1 << 16) / a("total_chunk_cnt"));
                    }
                    NodeType::CommRecvNode => {
                        assert_eq!(a("comm_dst"), rank);
                        *recvs.entry((a("comm_tag"), a("comm_src"), rank, a("comm_size"))).or_default() += 1;
                    }
                    NodeType::CompNode => comps += 1,
                    NodeType::InvalidNode => panic!("invalid node"),
                }
            }
        }
        assert_eq!(sends, recvs);
        assert!(sends.values().all(|&n| n == 1), "tags are unique per message");
        assert_eq!(comps, 0, "all-to-all reduces nothing");
        let c = &s.header.collective;
        let piece = c.piece_size_at(0);
        let expected: Rational = s.steps.iter().flat_map(|st| &st.transfers).map(|t| piece * Rational::from_integer(t.pieces.len() as i128)).sum();
        assert_eq!(Rational::from_integer(total as i128), expected);
        total
    }

    #[test]
    fn chakra_ring_half_ring_all_to_all_pairs_up() {
        let s = ring4();
        for threadblocks in [ThreadblockLayout::PerPeer, ThreadblockLayout::PerRank] {
            let p = lower(&s, &LowerOptions { threadblocks, ..LowerOptions::default() }).unwrap();
            let traces = chakra_traces(&p, &s).unwrap();
            assert_eq!(traces.len(), 4);
            let total = check(&s, &traces);
            assert!(total > 0);
        }
    }

    #[test]
    fn chakra_write_files_and_system_snippet() {
        let s = ring4();
        let p = lower(&s, &LowerOptions::default()).unwrap();
        let dir = std::env::temp_dir().join(format!("collsched-chakra-{}", std::process::id()));
        write_chakra(&dir, "a2a", &p, &s).unwrap();
        for r in 0..4 {
            let bytes = std::fs::read(dir.join(format!("a2a.{r}.et"))).unwrap();
            assert!(!decode_chakra(&bytes).unwrap().1.is_empty());
        }
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("a2a.system.json")).unwrap()).unwrap();
        assert_eq!(v["all-to-all-implementation-custom"][0], dir.join("a2a").display().to_string());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn chakra_reductions_become_comp_nodes() {
        use crate::collective::PieceId;
        use crate::schedule::{Op, ScheduleHeader, Step, Transfer};
        use crate::topology::NodeId;
        // Reduce-scatter on a ring of 3: block j is reduced along j+1 -> j+2 -> j.
        let n = 3;
        let t = torus_with(&[n], &[]);
        let c = Collective::new(CollectiveKind::ReduceScatter, t.node_ids().collect(), 3000, 1, None, &t).unwrap();
        let link = |r: usize| t.link_between(NodeId(r as u32), NodeId(((r + 1) % n) as u32)).unwrap();
        let steps = (0..n - 1)
            .map(|st| Step {
                transfers: (0..n).map(|r| Transfer::hop(link(r), Op::Reduce, vec![PieceId::block(((r + 2 * n - 1 - st) % n) as u32, 0)])).collect(),
            })
            .collect();
        let s = Schedule { header: ScheduleHeader { topology: t, collective: c, meta: None }, steps };
        let p = lower(&s, &LowerOptions::default()).unwrap();
        let traces = chakra_traces(&p, &s).unwrap();
        let mut comps = 0;
        for (_, bytes) in &traces {
            let (_, nodes) = decode_chakra(bytes).unwrap();
            for n in &nodes {
                if n.r#type == NodeType::CompNode as i32 {
                    comps += 1;
                    let recv = &nodes[n.data_deps[0] as usize];
                    assert_eq!(recv.r#type, NodeType::CommRecvNode as i32);
                    assert_eq!(n.attr_i64("tensor_size"), Some(1000));
                }
            }
        }
        assert_eq!(comps, n * (n - 1));
    }
}
