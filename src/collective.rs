//! Collectives, their pieces, and what every piece must become (docs/design/MODEL.md section 2).
//!
//! A collective runs over an ordered list of ranks (npu ids). Each rank's data is cut into
//! blocks, and each block into `pieces` equal pieces. A piece id uses rank *indices* (positions
//! in `ranks`): `[i, j, k]` for all_to_all (from rank i to rank j, part k), `[i, k]` for
//! all_gather (rank i's block), `[j, k]` for reduce_scatter and all_reduce (block j).
//!
//! Pieces have a dense index (`piece_index`) so that the verifier and the generators can keep
//! per-piece state in flat arrays.

use crate::error::{Error, Result};
use crate::topology::{NodeId, Topology};
use crate::units::Rational;
use std::fmt;

/// The most pieces a block may be cut into.
pub const MAX_PIECES: u32 = 1 << 16;

/// Most rank-node pairs an instance may have: the bounds scan the distances from every rank to
/// every node (a ring of 100,000 npus would need 10^10 of them, and memory to match).
pub const MAX_RANK_NODE_PAIRS: u64 = 1 << 30;

/// The kind of collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveKind {
    /// Every rank sends a distinct block to every other rank.
    AllToAll,
    /// Every rank's block ends at every rank.
    AllGather,
    /// Block j, reduced over all ranks, ends at rank j.
    ReduceScatter,
    /// Every block, reduced over all ranks, ends at every rank.
    AllReduce,
}

impl CollectiveKind {
    /// All kinds, in the order of docs/design/MODEL.md.
    pub const ALL: [CollectiveKind; 4] = [CollectiveKind::AllToAll, CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce];

    /// The file name of the kind (`all_to_all`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            CollectiveKind::AllToAll => "all_to_all",
            CollectiveKind::AllGather => "all_gather",
            CollectiveKind::ReduceScatter => "reduce_scatter",
            CollectiveKind::AllReduce => "all_reduce",
        }
    }

    /// Parses a file name of a kind.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether pieces carry contributor sets that are combined by `reduce`.
    pub fn is_reducing(self) -> bool {
        matches!(self, CollectiveKind::ReduceScatter | CollectiveKind::AllReduce)
    }

    /// Number of numbers in a piece id (3 for all_to_all, else 2).
    pub fn piece_arity(self) -> usize {
        if self == CollectiveKind::AllToAll {
            3
        } else {
            2
        }
    }
}

impl std::str::FromStr for CollectiveKind {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Self::parse(s).ok_or_else(|| format!("expected one of {}", Self::ALL.map(|k| k.as_str()).join(", ")))
    }
}

/// By hand, so that a value that is not a kind's name is named with the list (serde_json says
/// only "expected value" of a number or `null` where an enum is read).
impl<'de> serde::Deserialize<'de> for CollectiveKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = <serde_json::Value as serde::Deserialize>::deserialize(d)?;
        let kinds = || Self::ALL.map(|k| k.as_str()).join(", ");
        match v.as_str() {
            Some(text) => text.parse().map_err(|e: String| serde::de::Error::custom(format!("\"{text}\": {e}"))),
            None => Err(serde::de::Error::custom(format!("{v}: expected one of {} (a string)", kinds()))),
        }
    }
}

impl fmt::Display for CollectiveKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A piece id as written in files: two or three numbers, packed into 8 bytes (a schedule holds
/// one per piece and transfer: on 8x8x8 the all-gather's 6.3 M, on 16x16x16 hundreds of millions).
///
/// `[x, k]` with `k < 2^30` and `[i, j, k]` with `i, j < 2^21` and `k < 2^20` are stored in the
/// word itself (ranks and pieces per block of any collective are below these), ordered as their
/// numbers are. Any other id (one a file may carry, which no collective has) is kept whole in a
/// process-wide table and sorts after those of its arity.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PieceId(u64);

/// Three numbers (otherwise two).
const THREE: u64 = 1 << 63;
/// Kept in the table of ids that do not fit (the low bits index it).
const WIDE: u64 = 1 << 62;
const BITS_2K: u32 = 30;
const BITS_3: u32 = 21;
const BITS_3K: u32 = 20;

/// Ids that do not fit the word, each once, with their index.
type WideTable = (Vec<([u32; 3], u8)>, std::collections::HashMap<([u32; 3], u8), u64>);

fn wide_table() -> std::sync::MutexGuard<'static, WideTable> {
    static TABLE: std::sync::OnceLock<std::sync::Mutex<WideTable>> = std::sync::OnceLock::new();
    TABLE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

impl PieceId {
    /// An all_to_all piece `[i, j, k]`.
    pub fn a2a(i: u32, j: u32, k: u32) -> Self {
        if i >> BITS_3 == 0 && j >> BITS_3 == 0 && k >> BITS_3K == 0 {
            PieceId(THREE | (i as u64) << (BITS_3 + BITS_3K) | (j as u64) << BITS_3K | k as u64)
        } else {
            Self::wide([i, j, k], 3)
        }
    }

    /// A two-number piece `[x, k]` (all_gather: source index; reducing kinds: block index).
    pub fn block(x: u32, k: u32) -> Self {
        if k >> BITS_2K == 0 {
            PieceId((x as u64) << BITS_2K | k as u64)
        } else {
            Self::wide([x, k, 0], 2)
        }
    }

    fn wide(parts: [u32; 3], len: u8) -> Self {
        let mut table = wide_table();
        let next = table.0.len() as u64;
        let index = *table.1.entry((parts, len)).or_insert(next);
        if index == next {
            table.0.push((parts, len));
        }
        PieceId(if len == 3 { THREE } else { 0 } | WIDE | index)
    }

    /// Builds a piece id from its numbers (2 or 3 of them; anything else yields `None`).
    pub fn from_parts(parts: &[u32]) -> Option<Self> {
        match *parts {
            [x, k] => Some(Self::block(x, k)),
            [i, j, k] => Some(Self::a2a(i, j, k)),
            _ => None,
        }
    }

    /// The numbers of the id.
    pub fn parts(&self) -> Parts {
        let w = self.0;
        let mask = |bits: u32| (1u64 << bits) - 1;
        if w & WIDE != 0 {
            let (parts, len) = wide_table().0[(w & mask(32)) as usize];
            Parts { parts, len }
        } else if w & THREE != 0 {
            let (i, j, k) = (w >> (BITS_3 + BITS_3K) & mask(BITS_3), w >> BITS_3K & mask(BITS_3), w & mask(BITS_3K));
            Parts { parts: [i as u32, j as u32, k as u32], len: 3 }
        } else {
            Parts { parts: [(w >> BITS_2K) as u32, (w & mask(BITS_2K)) as u32, 0], len: 2 }
        }
    }
}

/// The numbers of a [`PieceId`], read as a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    parts: [u32; 3],
    len: u8,
}

impl std::ops::Deref for Parts {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.parts[..self.len as usize]
    }
}

impl fmt::Display for PieceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.parts().iter().map(|p| p.to_string()).collect();
        write!(f, "[{}]", parts.join(","))
    }
}

impl fmt::Debug for PieceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PieceId{self}")
    }
}

/// A collective over a set of ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct Collective {
    /// What it computes.
    pub kind: CollectiveKind,
    /// The ranks, in collective order (npu ids).
    pub ranks: Vec<NodeId>,
    /// S of docs/design/MODEL.md: the bytes each rank sends (all_to_all, reduce_scatter, all_reduce) or the
    /// output size (all_gather).
    pub bytes_per_rank: u64,
    /// P: how finely each block is cut.
    pub pieces: u32,
    /// Non-uniform all_to_all: bytes from rank index i to rank index j (the diagonal is 0).
    pub block_bytes: Option<Vec<Vec<u64>>>,
    rank_of_node: Vec<u32>,
}

const NO_RANK: u32 = u32::MAX;

impl Collective {
    /// Builds and checks a collective on a topology: ranks are distinct npus, sizes positive.
    pub fn new(
        kind: CollectiveKind,
        ranks: Vec<NodeId>,
        bytes_per_rank: u64,
        pieces: u32,
        block_bytes: Option<Vec<Vec<u64>>>,
        topo: &Topology,
    ) -> Result<Self> {
        if ranks.is_empty() {
            return Err(Error::bad("collective.ranks = []: a collective needs at least one rank"));
        }
        if pieces == 0 {
            return Err(Error::bad("collective.pieces = 0: each block needs at least one piece"));
        }
        if pieces > MAX_PIECES {
            return Err(Error::bad(format!("collective.pieces = {pieces}: more than {MAX_PIECES} pieces per block")));
        }
        let pairs = ranks.len() as u64 * topo.num_nodes() as u64;
        if pairs > MAX_RANK_NODE_PAIRS {
            return Err(Error::bad(format!(
                "collective.ranks: {} ranks on a network of {} nodes make {pairs} rank-node pairs, more than the {MAX_RANK_NODE_PAIRS} whose distances the bounds can scan",
                ranks.len(),
                topo.num_nodes()
            )));
        }
        let mut rank_of_node = vec![NO_RANK; topo.num_npus()];
        for (i, &r) in ranks.iter().enumerate() {
            if r.index() >= topo.num_nodes() {
                return Err(Error::bad(format!("collective.ranks[{i}] = {r}: no such node (there are {} nodes)", topo.num_nodes())));
            }
            if !topo.is_npu(r) {
                return Err(Error::bad(format!("collective.ranks[{i}] = {r} ({}): a switch cannot be a rank", topo.node(r).name)));
            }
            if rank_of_node[r.index()] != NO_RANK {
                return Err(Error::bad(format!("collective.ranks[{i}] = {r}: listed twice (also ranks[{}])", rank_of_node[r.index()])));
            }
            rank_of_node[r.index()] = i as u32;
        }
        let r = ranks.len();
        if let Some(bb) = &block_bytes {
            if kind != CollectiveKind::AllToAll {
                return Err(Error::bad(format!("collective.block_bytes: only all_to_all takes non-uniform blocks, not {kind}")));
            }
            if bb.len() != r {
                return Err(Error::bad(format!("collective.block_bytes has {} rows: needs one per rank ({r})", bb.len())));
            }
            for (i, row) in bb.iter().enumerate() {
                if row.len() != r {
                    return Err(Error::bad(format!("collective.block_bytes[{i}] has {} values: needs one per rank ({r})", row.len())));
                }
                // MODEL.md section 2: all_to_all has no piece (i, i, k), so no block to size.
                if row[i] != 0 {
                    return Err(Error::bad(format!(
                        "collective.block_bytes[{i}][{i}] = {}: an all_to_all sends no block from a rank to itself, so the diagonal must be 0",
                        row[i]
                    )));
                }
            }
        } else if bytes_per_rank == 0 {
            return Err(Error::bad("collective.bytes_per_rank = 0: must be at least 1"));
        }
        Ok(Collective { kind, ranks, bytes_per_rank, pieces, block_bytes, rank_of_node })
    }

    /// Number of ranks R.
    pub fn num_ranks(&self) -> usize {
        self.ranks.len()
    }

    /// The rank index of a node, if it is a rank.
    pub fn rank_index(&self, node: NodeId) -> Option<usize> {
        match self.rank_of_node.get(node.index()) {
            Some(&r) if r != NO_RANK => Some(r as usize),
            _ => None,
        }
    }

    /// Per npu of `t` (by id): whether it is a rank.
    pub fn rank_mask(&self, t: &Topology) -> Vec<bool> {
        (0..t.num_npus()).map(|v| self.rank_index(NodeId(v as u32)).is_some()).collect()
    }

    /// Size of the dense piece index space (some indices, such as all_to_all's `[i, i, k]`, are
    /// not pieces).
    pub fn piece_space(&self) -> usize {
        let r = self.num_ranks();
        let p = self.pieces as usize;
        match self.kind {
            CollectiveKind::AllToAll => r * r * p,
            _ => r * p,
        }
    }

    /// The dense index of a piece id, or `None` if the id is not a piece of this collective.
    pub fn piece_index(&self, id: &PieceId) -> Option<usize> {
        let r = self.num_ranks() as u32;
        let p = self.pieces;
        match (self.kind, &*id.parts()) {
            (CollectiveKind::AllToAll, &[i, j, k]) if i < r && j < r && i != j && k < p => {
                Some(((i as usize * r as usize) + j as usize) * p as usize + k as usize)
            }
            (CollectiveKind::AllToAll, _) => None,
            (_, &[x, k]) if x < r && k < p => Some(x as usize * p as usize + k as usize),
            _ => None,
        }
    }

    /// Why a piece id is not a piece of this collective (for rule-1 diagnostics).
    pub fn piece_error(&self, id: &PieceId) -> Option<String> {
        if self.piece_index(id).is_some() {
            return None;
        }
        let (r, p, arity) = (self.num_ranks(), self.pieces, self.kind.piece_arity());
        Some(if id.parts().len() != arity {
            format!("piece {id}: a {} piece id has {arity} numbers", self.kind)
        } else if self.kind == CollectiveKind::AllToAll && id.parts()[0] == id.parts()[1] && (id.parts()[0] as usize) < r {
            format!("piece {id}: an all_to_all piece goes from a rank to a different rank")
        } else if id.parts().iter().take(arity - 1).any(|&x| x as usize >= r) {
            format!("piece {id}: rank index out of range (there are {r} ranks)")
        } else {
            format!("piece {id}: part index out of range (pieces = {p})")
        })
    }

    /// The piece id at a dense index (which must be a piece).
    pub fn piece_at(&self, index: usize) -> PieceId {
        let r = self.num_ranks();
        let p = self.pieces as usize;
        let k = (index % p) as u32;
        let rest = index / p;
        match self.kind {
            CollectiveKind::AllToAll => PieceId::a2a((rest / r) as u32, (rest % r) as u32, k),
            _ => PieceId::block(rest as u32, k),
        }
    }

    /// Every piece id, in dense-index order.
    pub fn pieces(&self) -> impl Iterator<Item = PieceId> + '_ {
        (0..self.piece_space()).filter(move |&i| self.is_piece_index(i)).map(move |i| self.piece_at(i))
    }

    /// Whether a dense index denotes a piece.
    pub fn is_piece_index(&self, index: usize) -> bool {
        match self.kind {
            CollectiveKind::AllToAll => {
                let r = self.num_ranks();
                let rest = index / self.pieces as usize;
                rest / r != rest % r
            }
            _ => true,
        }
    }

    /// The bytes of block `(i, j)` of an all_to_all (uniform: S/R).
    pub fn block_size(&self, i: usize, j: usize) -> Rational {
        match &self.block_bytes {
            Some(bb) => Rational::from_integer(bb[i][j] as i128),
            None => Rational::new(self.bytes_per_rank as i128, self.num_ranks() as i128),
        }
    }

    /// The exact size in bytes of the piece at a dense index.
    pub fn piece_size_at(&self, index: usize) -> Rational {
        let p = self.pieces as i128;
        match (&self.block_bytes, self.kind) {
            (Some(bb), _) => {
                let r = self.num_ranks();
                let rest = index / self.pieces as usize;
                Rational::new(bb[rest / r][rest % r] as i128, p)
            }
            _ => Rational::new(self.bytes_per_rank as i128, self.num_ranks() as i128 * p),
        }
    }

    /// The size of a piece as an integer weight times [`Self::weight_unit`]: cost models add up
    /// weights in integers and multiply once. Uniform: weight 1, unit S/(R*P); non-uniform:
    /// weight = the block's bytes, unit 1/P.
    pub fn piece_weight_at(&self, index: usize) -> u64 {
        match &self.block_bytes {
            Some(bb) => {
                let r = self.num_ranks();
                let rest = index / self.pieces as usize;
                bb[rest / r][rest % r]
            }
            None => 1,
        }
    }

    /// The bytes of one unit of [`Self::piece_weight_at`].
    pub fn weight_unit(&self) -> Rational {
        match &self.block_bytes {
            Some(_) => Rational::new(1, self.pieces as i128),
            None => Rational::new(self.bytes_per_rank as i128, self.num_ranks() as i128 * self.pieces as i128),
        }
    }

    /// Whether every piece has the same size (no `block_bytes`).
    pub fn is_uniform(&self) -> bool {
        self.block_bytes.is_none()
    }

    /// Whether the piece at a dense index must move at all (a non-uniform block of 0 bytes need
    /// not).
    pub fn is_required_index(&self, index: usize) -> bool {
        self.is_piece_index(index) && (self.block_bytes.is_none() || self.piece_size_at(index) > Rational::from_integer(0))
    }

    /// The rank indices that must hold the piece at the end.
    pub fn destinations(&self, id: &PieceId) -> Destinations {
        match self.kind {
            CollectiveKind::AllToAll => Destinations::One(id.parts()[1] as usize),
            CollectiveKind::ReduceScatter => Destinations::One(id.parts()[0] as usize),
            CollectiveKind::AllGather | CollectiveKind::AllReduce => Destinations::All,
        }
    }

    /// The rank index that holds the piece at the start, or `None` when every rank holds its own
    /// contribution (reducing kinds).
    pub fn source(&self, id: &PieceId) -> Option<usize> {
        match self.kind {
            CollectiveKind::AllToAll | CollectiveKind::AllGather => Some(id.parts()[0] as usize),
            _ => None,
        }
    }

    /// Total bytes every rank must receive or send, summed over ranks (for bandwidth figures).
    pub fn total_bytes(&self) -> Rational {
        let r = self.num_ranks() as i128;
        match &self.block_bytes {
            Some(bb) => {
                let mut s = 0i128;
                for (i, row) in bb.iter().enumerate() {
                    for (j, &b) in row.iter().enumerate() {
                        if i != j {
                            s += b as i128;
                        }
                    }
                }
                Rational::from_integer(s)
            }
            None => Rational::from_integer(self.bytes_per_rank as i128 * r),
        }
    }
}

/// Which ranks must hold a piece at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destinations {
    /// One rank index.
    One(usize),
    /// Every rank.
    All,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, TorusParams};

    fn ring(n: usize) -> Topology {
        torus(&TorusParams::uniform(&[n], 32.0, 100.0)).unwrap()
    }

    proptest::proptest! {
        /// Piece ids keep their numbers, packed (8 bytes) or not, and packed ones order as their
        /// numbers do (schedule files list a transfer's pieces in that order).
        #[test]
        fn piece_ids_keep_their_numbers_and_order(a in proptest::collection::vec(0u32..4096, 3), b in proptest::collection::vec(0u32..4096, 3), wide in 0u32..4, big in (1u32 << 20)..) {
            proptest::prop_assert_eq!(std::mem::size_of::<PieceId>(), 8);
            for len in [2, 3] {
                let (x, y) = (PieceId::from_parts(&a[..len]).unwrap(), PieceId::from_parts(&b[..len]).unwrap());
                proptest::prop_assert_eq!(&*x.parts(), &a[..len]);
                proptest::prop_assert_eq!(x.cmp(&y), a[..len].cmp(&b[..len]));
                proptest::prop_assert_eq!(x == y, a[..len] == b[..len]);
                // A number beyond what the word holds (any part of three, the last of two).
                let mut far = a[..len].to_vec();
                let at = if len == 2 { 1 } else { wide as usize % 3 };
                far[at] = if len == 2 { big | 1 << 30 } else { big };
                let w = PieceId::from_parts(&far).unwrap();
                proptest::prop_assert_eq!(&*w.parts(), &far[..]);
                proptest::prop_assert_eq!(w, PieceId::from_parts(&far).unwrap());
                proptest::prop_assert_ne!(w, x);
                proptest::prop_assert_eq!(w.to_string(), format!("[{}]", far.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(",")));
            }
        }
    }

    #[test]
    fn dense_indices_round_trip() {
        let t = ring(5);
        for kind in CollectiveKind::ALL {
            let c = Collective::new(kind, t.node_ids().collect(), 1000, 3, None, &t).unwrap();
            let all: Vec<_> = c.pieces().collect();
            let expected = if kind == CollectiveKind::AllToAll { 5 * 4 * 3 } else { 5 * 3 };
            assert_eq!(all.len(), expected);
            for p in all {
                let i = c.piece_index(&p).unwrap();
                assert_eq!(c.piece_at(i), p);
                assert!(c.piece_error(&p).is_none());
            }
        }
    }

    #[test]
    fn bad_pieces_are_explained() {
        let t = ring(4);
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1000, 2, None, &t).unwrap();
        assert!(c.piece_error(&PieceId::a2a(1, 1, 0)).unwrap().contains("different rank"));
        assert!(c.piece_error(&PieceId::a2a(1, 4, 0)).unwrap().contains("rank index out of range"));
        assert!(c.piece_error(&PieceId::a2a(1, 2, 2)).unwrap().contains("part index"));
        assert!(c.piece_error(&PieceId::block(1, 0)).unwrap().contains("3 numbers"));
        assert_eq!(c.piece_size_at(c.piece_index(&PieceId::a2a(0, 1, 1)).unwrap()), Rational::new(1000, 8));
    }

    #[test]
    fn ranks_are_checked() {
        let t = ring(4);
        let e = Collective::new(CollectiveKind::AllGather, vec![NodeId(0), NodeId(9)], 8, 1, None, &t).unwrap_err();
        assert!(e.message().contains("ranks[1] = 9"), "{e}");
        let e = Collective::new(CollectiveKind::AllGather, vec![NodeId(0), NodeId(0)], 8, 1, None, &t).unwrap_err();
        assert!(e.message().contains("listed twice"), "{e}");
        let e = Collective::new(CollectiveKind::AllGather, vec![NodeId(0)], 0, 1, None, &t).unwrap_err();
        assert!(e.message().contains("bytes_per_rank = 0"));
        let e = Collective::new(CollectiveKind::AllGather, vec![NodeId(0)], 8, 0, None, &t).unwrap_err();
        assert!(e.message().contains("pieces = 0"));
    }

    #[test]
    fn non_uniform_sizes() {
        let t = ring(3);
        let bb = vec![vec![0, 30, 60], vec![9, 0, 3], vec![0, 0, 0]];
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 100, 3, Some(bb), &t).unwrap();
        assert_eq!(c.piece_size_at(c.piece_index(&PieceId::a2a(0, 2, 1)).unwrap()), Rational::from_integer(20));
        assert!(!c.is_required_index(c.piece_index(&PieceId::a2a(2, 0, 0)).unwrap()));
        assert_eq!(c.total_bytes(), Rational::from_integer(102));
    }
}
