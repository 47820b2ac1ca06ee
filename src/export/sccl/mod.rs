//! SCCL's algorithm JSON (docs/design/FORMATS.md "SCCL algorithm JSON"): the file msccl-tools'
//! synthesizer writes and its `ncclize` lowers to MSCCL XML, read into a [`Schedule`] and written
//! from one.
//!
//! The format's objects are typed here ([`ScclAlgorithm`] and its parts) together with what both
//! directions share: SCCL's four collectives we have, the correspondence between SCCL's chunk
//! *addresses* and our piece ids ([`Addressing`]), and SCCL's chunking (`chunk_up`). The rules a
//! file must meet are in [`rules`], the import in [`read`], the export and SCCL's coordinates of
//! a schedule (steps, rounds, chunks) in [`mod@write`].
//!
//! [`Schedule`]: crate::schedule::Schedule

pub mod read;
pub mod rules;
pub mod write;

pub use read::{import_sccl, is_sccl_json, parse_sccl, read_sccl_file};
pub use rules::{rules_broken, sccl_problems, without_unsendable, ScclProblem};
pub use write::{sccl_algorithm, sccl_coordinates, sccl_json, ScclCoordinates};

use crate::collective::{CollectiveKind, PieceId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The top-level object: `msccl_type` "algorithm" (older SCCL releases spell the tag
/// `sccl_type`; both are read, `msccl_type` is written). Fields in the order msccl-tools'
/// encoder writes them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ScclAlgorithm {
    /// Always "algorithm".
    #[serde(alias = "sccl_type")]
    pub msccl_type: String,
    /// `{collective}-{topology}-{instance}`, e.g. `Alltoall(n=4)-Ring(n=4)-steps=2,rounds=3`.
    pub name: String,
    /// The synthesis instance: steps, extra rounds, chunks.
    pub instance: ScclInstance,
    /// Per rank (a decimal string key), the addresses that live in its input buffer.
    pub input_map: BTreeMap<u32, Vec<u64>>,
    /// Per rank, the addresses that live in its output buffer.
    pub output_map: BTreeMap<u32, Vec<u64>>,
    /// The steps in order.
    pub steps: Vec<ScclStep>,
    /// The collective, before chunking (its chunks are cut into `instance.chunks` each).
    pub collective: ScclCollective,
    /// The ranks and their links.
    pub topology: ScclTopology,
}

/// `msccl_type` "instance": what the synthesizer was asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ScclInstance {
    /// Always "instance".
    #[serde(alias = "sccl_type")]
    pub msccl_type: String,
    /// The number of steps.
    pub steps: u64,
    /// Rounds allowed beyond one per step.
    pub extra_rounds: u64,
    /// How many chunks every chunk of the collective is cut into.
    pub chunks: u64,
    /// Steps between pipelined iterations; `ncclize` refuses a pipelined algorithm.
    #[serde(default)]
    pub pipeline: Option<u64>,
    /// A bound on scratch memory the synthesizer honoured (makes `ncclize` remap scratch).
    #[serde(default)]
    pub extra_memory: Option<u64>,
    /// Whether the synthesizer was allowed exchanges.
    #[serde(default)]
    pub allow_exchange: bool,
}

/// `msccl_type` "step": its rounds (its bandwidth multiplier) and its sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ScclStep {
    /// Always "step".
    #[serde(alias = "sccl_type")]
    pub msccl_type: String,
    /// At least 1: every link may carry `rounds` times its multiplicity of chunks in this step.
    pub rounds: u64,
    /// `[address, src, dst]`: the chunks at `address` that `src` holds go to `dst`.
    pub sends: Vec<[u64; 3]>,
}

/// `msccl_type` "collective".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ScclCollective {
    /// Always "collective".
    #[serde(alias = "sccl_type")]
    pub msccl_type: String,
    /// `Alltoall(n=4)`, `Allgather(n=4)`, `ReduceScatter(n=4)`, `Allreduce(n=4)`, ...
    pub name: String,
    /// The number of ranks.
    pub nodes: u64,
    /// The chunks: which ranks hold each at the start and at the end, and its address.
    pub chunks: Vec<ScclChunk>,
    /// Rank -> chunk -> chunk: sends that must pair up (distributed sub-problems).
    pub triggers: BTreeMap<String, serde_json::Value>,
    /// What `ncclize` writes as the XML's `coll`: alltoall, allgather, reduce_scatter, allreduce.
    pub runtime_name: String,
}

/// `msccl_type` "chunk".
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ScclChunk {
    /// Always "chunk".
    #[serde(alias = "sccl_type")]
    pub msccl_type: String,
    /// The ranks that hold it at the start (precondition).
    pub pre: Vec<u32>,
    /// The ranks that must hold it at the end (postcondition).
    pub post: Vec<u32>,
    /// Its address: chunks that share one are reduced together (a combining collective).
    pub addr: u64,
}

/// `msccl_type` "topology".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ScclTopology {
    /// Always "topology".
    #[serde(alias = "sccl_type")]
    pub msccl_type: String,
    /// `Ring(n=4)`, `DGX1`, ...
    pub name: String,
    /// Shared-bandwidth groups `[srcs, dsts, bandwidth, name]`.
    pub switches: Vec<serde_json::Value>,
    /// `links[dst][src]`: how many chunks per round the link src -> dst carries (0: no link).
    pub links: Vec<Vec<u64>>,
}

impl ScclChunk {
    fn new(mut pre: Vec<u32>, mut post: Vec<u32>, addr: u64) -> Self {
        pre.sort_unstable();
        post.sort_unstable();
        ScclChunk { msccl_type: "chunk".into(), pre, post, addr }
    }
}

/// The names SCCL gives a collective we have: `(name, runtime_name)` over `n` ranks.
pub fn sccl_names(kind: CollectiveKind, n: u32) -> (String, &'static str) {
    match kind {
        CollectiveKind::AllToAll => (format!("Alltoall(n={n})"), "alltoall"),
        CollectiveKind::AllGather => (format!("Allgather(n={n})"), "allgather"),
        CollectiveKind::ReduceScatter => (format!("ReduceScatter(n={n})"), "reduce_scatter"),
        CollectiveKind::AllReduce => (format!("Allreduce(n={n})"), "allreduce"),
    }
}

/// The chunks of SCCL's collective of this kind over `n` ranks, before chunking
/// (msccl/collectives.py): chunk `c` of Alltoall and ReduceScatter starts at rank `c % n` and ends
/// at rank `c / n`, at address `c` (Alltoall) or `c / n` (ReduceScatter: one address per output
/// block); chunk `c` of Allgather and Allreduce starts at rank `c` and ends at every rank, at
/// address `c` (Allgather) or 0 (Allreduce: one buffer).
pub fn base_chunks(kind: CollectiveKind, n: u32) -> Vec<ScclChunk> {
    let every: Vec<u32> = (0..n).collect();
    match kind {
        CollectiveKind::AllToAll | CollectiveKind::ReduceScatter => (0..n * n)
            .map(|c| {
                let addr = if kind == CollectiveKind::AllToAll { c } else { c / n };
                ScclChunk::new(vec![c % n], vec![c / n], addr as u64)
            })
            .collect(),
        CollectiveKind::AllGather | CollectiveKind::AllReduce => {
            (0..n).map(|c| ScclChunk::new(vec![c], every.clone(), if kind == CollectiveKind::AllGather { c as u64 } else { 0 })).collect()
        }
    }
}

/// SCCL's `chunk_up(div)`: every chunk becomes `div` chunks, chunk `c`'s part `i` at address
/// `addr(c) * div + i`, in the order chunk-major.
pub fn chunk_up(chunks: &[ScclChunk], div: u64) -> Vec<ScclChunk> {
    chunks.iter().flat_map(|c| (0..div).map(move |i| ScclChunk { addr: c.addr * div + i, ..c.clone() })).collect()
}

/// The base collective object of a kind, as SCCL writes it (no triggers).
pub fn base_collective(kind: CollectiveKind, n: u32) -> ScclCollective {
    let (name, runtime) = sccl_names(kind, n);
    ScclCollective {
        msccl_type: "collective".into(),
        name,
        nodes: n as u64,
        chunks: base_chunks(kind, n),
        triggers: BTreeMap::new(),
        runtime_name: runtime.into(),
    }
}

/// The input and output maps `Algorithm.make_implementation` derives from a chunked collective:
/// an address is in rank r's input (output) buffer when some chunk at that address has r in its
/// precondition (postcondition). Ranks without addresses are left out; addresses ascend.
pub fn buffer_maps(chunked: &[ScclChunk]) -> (BTreeMap<u32, Vec<u64>>, BTreeMap<u32, Vec<u64>>) {
    let mut input: BTreeMap<u32, std::collections::BTreeSet<u64>> = BTreeMap::new();
    let mut output: BTreeMap<u32, std::collections::BTreeSet<u64>> = BTreeMap::new();
    for c in chunked {
        for &r in &c.pre {
            input.entry(r).or_default().insert(c.addr);
        }
        for &r in &c.post {
            output.entry(r).or_default().insert(c.addr);
        }
    }
    let flat = |m: BTreeMap<u32, std::collections::BTreeSet<u64>>| m.into_iter().map(|(r, s)| (r, s.into_iter().collect())).collect();
    (flat(input), flat(output))
}

/// How SCCL's chunk addresses and our piece ids correspond for one collective of R ranks cut
/// into P pieces per block (docs/design/FORMATS.md "SCCL algorithm JSON", Collective):
///
/// | kind | SCCL `instance.chunks` | piece | address |
/// |---|---|---|---|
/// | all_to_all | P | `[i, j, k]` | `(j*R + i)*P + k` |
/// | all_gather | P | `[i, k]` | `i*P + k` |
/// | reduce_scatter | P | `[j, k]` | `j*P + k` |
/// | all_reduce | R*P | `[j, k]` | `j*P + k` |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addressing {
    /// The collective.
    pub kind: CollectiveKind,
    /// R.
    pub ranks: u32,
    /// P.
    pub pieces: u32,
}

impl Addressing {
    /// SCCL's chunks per chunk of its base collective (`instance.chunks` as we write it).
    pub fn chunks(&self) -> u64 {
        match self.kind {
            CollectiveKind::AllReduce => self.ranks as u64 * self.pieces as u64,
            _ => self.pieces as u64,
        }
    }

    /// The address of a piece of the collective.
    pub fn address(&self, piece: &PieceId) -> u64 {
        let (r, p) = (self.ranks as u64, self.pieces as u64);
        match *piece.parts() {
            [i, j, k] => (j as u64 * r + i as u64) * p + k as u64,
            [x, k] => x as u64 * p + k as u64,
            _ => unreachable!("a piece id has two or three numbers"),
        }
    }

    /// The piece at an address, or why there is none (out of range; an all_to_all chunk from a
    /// rank to itself, which our all_to_all has no piece for).
    pub fn piece(&self, addr: u64) -> std::result::Result<PieceId, String> {
        let (r, p) = (self.ranks as u64, self.pieces as u64);
        let space = if self.kind == CollectiveKind::AllToAll { r * r * p } else { r * p };
        if addr >= space {
            return Err(format!("address {addr} is out of range ({} over {r} ranks in {} chunks has addresses 0..{space})", self.kind, self.chunks()));
        }
        let (block, k) = (addr / p, (addr % p) as u32);
        Ok(match self.kind {
            CollectiveKind::AllToAll => {
                let (src, dst) = ((block % r) as u32, (block / r) as u32);
                if src == dst {
                    return Err(format!("address {addr} is rank {src}'s block to itself, which never moves (all_to_all has no piece for it)"));
                }
                PieceId::a2a(src, dst, k)
            }
            _ => PieceId::block(block as u32, k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_pieces_correspond_both_ways() {
        for kind in CollectiveKind::ALL {
            for (r, p) in [(1, 1), (4, 1), (3, 2), (5, 3)] {
                let a = Addressing { kind, ranks: r, pieces: p };
                // The chunked base collective has exactly our pieces' addresses (plus all_to_all's
                // blocks from a rank to itself).
                let chunked = chunk_up(&base_chunks(kind, r), a.chunks());
                let addrs: std::collections::BTreeSet<u64> = chunked.iter().map(|c| c.addr).collect();
                let mut ours = 0;
                for &addr in &addrs {
                    match a.piece(addr) {
                        Ok(piece) => {
                            ours += 1;
                            assert_eq!(a.address(&piece), addr, "{kind} R={r} P={p}");
                        }
                        Err(why) => assert!(kind == CollectiveKind::AllToAll && why.contains("to itself"), "{kind}: {why}"),
                    }
                }
                let expected = if kind == CollectiveKind::AllToAll { r * (r - 1) * p } else { r * p };
                assert_eq!(ours, expected, "{kind} R={r} P={p}");
                assert!(a.piece(addrs.len() as u64).unwrap_err().contains("out of range"));
            }
        }
    }

    #[test]
    fn sources_and_destinations_agree_with_our_collectives() {
        // SCCL's chunk of a piece starts where our piece starts and ends where it must end.
        let (r, p) = (4u32, 2u32);
        for kind in CollectiveKind::ALL {
            let a = Addressing { kind, ranks: r, pieces: p };
            for c in chunk_up(&base_chunks(kind, r), a.chunks()) {
                let Ok(piece) = a.piece(c.addr) else { continue };
                match kind {
                    CollectiveKind::AllToAll => assert_eq!((c.pre.clone(), c.post.clone()), (vec![piece.parts()[0]], vec![piece.parts()[1]])),
                    CollectiveKind::AllGather => assert_eq!(c.pre, vec![piece.parts()[0]]),
                    CollectiveKind::ReduceScatter => assert_eq!(c.post, vec![piece.parts()[0]]),
                    CollectiveKind::AllReduce => assert_eq!(c.post.len(), r as usize),
                }
            }
        }
    }
}
