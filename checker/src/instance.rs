//! The instance a certificate speaks of, read from its own JSON and checked for sense.
//!
//! This is deliberately a second, independent description of a network and a collective: the
//! checker must not trust the code that built the certificate, so it reads only numbers.

use crate::{parse_q, Q};
use num_traits::Signed;
use serde::Deserialize;

/// A directed link as the checker sees it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Link {
    pub src: usize,
    pub dst: usize,
    /// Bytes per ns (GB/s).
    pub capacity: Q,
    pub latency_ns: Q,
    pub up: bool,
}

/// What must move, per collective kind.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Demands {
    /// all_to_all with the same bytes from every rank to every other rank.
    UniformAllToAll(Q),
    /// all_to_all as explicit `(source node, destination node, bytes)` triples.
    AllToAll(Vec<(usize, usize, Q)>),
    /// all_gather, reduce_scatter or all_reduce: every block is `pieces x piece_bytes`.
    Blocks { kind: BlockKind, block_bytes: Q },
}

/// The collectives that reason about sets rather than point-to-point demands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockKind {
    AllGather,
    ReduceScatter,
    AllReduce,
}

/// The whole instance: nodes `0..npus` are npus, the rest switches (docs/design/MODEL.md section 1).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Instance {
    pub nodes: usize,
    pub npus: usize,
    pub switch_latency_ns: Q,
    pub links: Vec<Link>,
    pub ranks: Vec<usize>,
    pub demands: Demands,
    /// Pieces per block (all_to_all: `pieces`, 1 when absent): what the steps bounds count.
    pub pieces: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInstance {
    nodes: usize,
    npus: usize,
    switch_latency_ns: String,
    links: Vec<RawLink>,
    collective: RawCollective,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    src: usize,
    dst: usize,
    capacity: String,
    latency_ns: String,
    up: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCollective {
    kind: String,
    ranks: Vec<usize>,
    #[serde(default)]
    block_bytes: Option<String>,
    #[serde(default)]
    demands: Option<Vec<(usize, usize, String)>>,
    #[serde(default)]
    piece_bytes: Option<String>,
    #[serde(default)]
    pieces: Option<u32>,
}

/// The most ranks times nodes of an instance (what collsched writes at most).
const MAX_RANKS_TIMES_NODES: usize = 1 << 30;

impl Instance {
    /// Reads and checks the `instance` object: an object the format does not describe (a field
    /// it lacks or does not have, a wrong type) is unreadable; one that does not make sense (a
    /// link to a node that does not exist) fails.
    pub fn from_json(v: &serde_json::Value) -> Result<Instance, crate::CheckError> {
        let raw: RawInstance = serde_json::from_value(v.clone()).map_err(|e| crate::unreadable(format!("instance: {e}")))?;
        Instance::from_raw(raw)
    }

    /// Checks the instance as read: a collective whose kind or fields the format does not describe
    /// is unreadable, the rest fails.
    fn from_raw(raw: RawInstance) -> Result<Instance, crate::CheckError> {
        // The checks scan every rank's distances to every node: a certificate may not make them
        // allocate or scan more than collsched ever writes (docs/design/FORMATS.md, `collective`).
        if raw.nodes > MAX_RANKS_TIMES_NODES || raw.collective.ranks.len().saturating_mul(raw.nodes) > MAX_RANKS_TIMES_NODES {
            return Err(crate::fail(format!(
                "instance: nodes = {} with {} ranks: the ranks times the nodes must be at most 2^30",
                raw.nodes,
                raw.collective.ranks.len()
            )));
        }
        if raw.npus == 0 || raw.npus > raw.nodes {
            return Err(crate::fail(format!("instance: npus = {} must be in 1..={} (nodes)", raw.npus, raw.nodes)));
        }
        let switch_latency_ns = nonneg(&raw.switch_latency_ns, "instance.switch_latency_ns")?;
        let mut links = Vec::with_capacity(raw.links.len());
        for (i, l) in raw.links.iter().enumerate() {
            if l.src >= raw.nodes || l.dst >= raw.nodes || l.src == l.dst {
                return Err(crate::fail(format!("instance.links[{i}]: {} -> {} is not a link between two distinct nodes of 0..{}", l.src, l.dst, raw.nodes)));
            }
            let capacity = rational(&l.capacity, &format!("instance.links[{i}].capacity"))?;
            // A zero capacity would make a link free in the volume and flow bounds' denominators
            // and infinite in a cut: neither means anything physical.
            if !capacity.is_positive() {
                return Err(crate::fail(format!("instance.links[{i}].capacity = {}: must be > 0", l.capacity)));
            }
            let latency_ns = nonneg(&l.latency_ns, &format!("instance.links[{i}].latency_ns"))?;
            links.push(Link { src: l.src, dst: l.dst, capacity, latency_ns, up: l.up });
        }
        let c = raw.collective;
        let mut is_rank = vec![false; raw.nodes];
        for (i, &r) in c.ranks.iter().enumerate() {
            if r >= raw.npus {
                return Err(crate::fail(format!("instance.collective.ranks[{i}] = {r}: not an npu (npus are 0..{})", raw.npus)));
            }
            if std::mem::replace(&mut is_rank[r], true) {
                return Err(crate::fail(format!("instance.collective.ranks[{i}] = {r}: listed twice")));
            }
        }
        if c.pieces == Some(0) {
            return Err(crate::fail("instance.collective.pieces = 0: a block has at least one piece"));
        }
        let pieces = c.pieces.unwrap_or(1);
        // all_to_all states `pieces` only when it is not 1 (the bytes bounds do not need it).
        let demands = match (c.kind.as_str(), c.block_bytes, c.demands, c.piece_bytes, c.pieces) {
            ("all_to_all", Some(b), None, None, _) => Demands::UniformAllToAll(nonneg(&b, "instance.collective.block_bytes")?),
            ("all_to_all", None, Some(list), None, _) => {
                let mut out = Vec::with_capacity(list.len());
                for (i, (s, d, b)) in list.iter().enumerate() {
                    // Demands speak of ranks only: a demand from or to a non-rank would be an
                    // instance that the spec's collective does not describe.
                    if *s >= raw.nodes || *d >= raw.nodes || !is_rank[*s] || !is_rank[*d] || s == d {
                        return Err(crate::fail(format!("instance.collective.demands[{i}]: {s} -> {d} is not a pair of distinct ranks")));
                    }
                    out.push((*s, *d, nonneg(b, &format!("instance.collective.demands[{i}]"))?));
                }
                Demands::AllToAll(out)
            }
            (kind @ ("all_gather" | "reduce_scatter" | "all_reduce"), None, None, Some(pb), Some(p)) => {
                let kind = match kind {
                    "all_gather" => BlockKind::AllGather,
                    "reduce_scatter" => BlockKind::ReduceScatter,
                    _ => BlockKind::AllReduce,
                };
                Demands::Blocks { kind, block_bytes: nonneg(&pb, "instance.collective.piece_bytes")? * Q::from_integer(p.into()) }
            }
            // A kind the format does not have, or fields its kind lacks or does not have: the
            // format's matter (unreadable), like a field missing elsewhere.
            (kind, ..) => {
                return Err(crate::unreadable(format!(
                    "instance.collective: kind `{kind}` needs `block_bytes` or `demands` and optionally `pieces` (all_to_all), or `piece_bytes` and `pieces` (all_gather, reduce_scatter, all_reduce)"
                )))
            }
        };
        Ok(Instance { nodes: raw.nodes, npus: raw.npus, switch_latency_ns, links, ranks: c.ranks, demands, pieces })
    }

    /// The up links leaving each node: `(link index, destination)`.
    pub fn up_adjacency(&self) -> Vec<Vec<(usize, usize)>> {
        let mut adj = vec![Vec::new(); self.nodes];
        for (i, l) in self.links.iter().enumerate() {
            if l.up {
                adj[l.src].push((i, l.dst));
            }
        }
        adj
    }

    /// Membership flags of the ranks, by node.
    pub fn rank_flags(&self) -> Vec<bool> {
        let mut flags = vec![false; self.nodes];
        for &r in &self.ranks {
            flags[r] = true;
        }
        flags
    }

    /// The pieces that must move: per all_to_all demand with bytes, or per block of the other
    /// kinds, `pieces` of them.
    pub fn required_pieces(&self) -> u64 {
        let blocks = match &self.demands {
            Demands::UniformAllToAll(b) if b.is_positive() => self.ranks.len() * self.ranks.len().saturating_sub(1),
            Demands::UniformAllToAll(_) => 0,
            Demands::AllToAll(list) => list.iter().filter(|(_, _, b)| b.is_positive()).count(),
            Demands::Blocks { .. } => self.ranks.len(),
        };
        blocks as u64 * u64::from(self.pieces)
    }

    /// Whether something of rank `s` is needed at rank `d` (the pair is a legitimate witness of
    /// the steps and latency bounds).
    pub fn is_required_pair(&self, s: usize, d: usize) -> bool {
        if s == d || !self.ranks.contains(&s) || !self.ranks.contains(&d) {
            return false;
        }
        match &self.demands {
            Demands::UniformAllToAll(b) => b.is_positive(),
            Demands::AllToAll(list) => list.iter().any(|(a, z, b)| *a == s && *z == d && b.is_positive()),
            // Every block kind needs something of every rank at every other rank: all_gather its
            // block, reduce_scatter its contribution to the destination's block, all_reduce both.
            Demands::Blocks { block_bytes, .. } => block_bytes.is_positive(),
        }
    }
}

/// A number of the instance: text that is no rational is unreadable (the format's matter), a
/// rational below 0 fails (an instance that makes no sense).
fn nonneg(text: &str, field: &str) -> Result<Q, crate::CheckError> {
    let q = rational(text, field)?;
    if q.is_negative() {
        return Err(crate::fail(format!("{field} = {text}: must be >= 0")));
    }
    Ok(q)
}

fn rational(text: &str, field: &str) -> Result<Q, crate::CheckError> {
    parse_q(text).map_err(|e| crate::unreadable(format!("{field}: {e}")))
}
