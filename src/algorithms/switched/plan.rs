//! The switched algorithms as logical steps: in each step, which rank sends which pieces to which
//! rank (rank indices), before any routing.

use crate::collective::PieceId;
use crate::schedule::Op;

/// One rank-to-rank message of a logical step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Flow {
    /// Sending rank index.
    pub src: usize,
    /// Receiving rank index.
    pub dst: usize,
    /// Copy or reduce.
    pub op: Op,
    /// Pieces carried.
    pub pieces: Vec<PieceId>,
}

/// Logical steps, each a list of flows.
pub(super) type Plan = Vec<Vec<Flow>>;

fn flow(src: usize, dst: usize, op: Op, pieces: Vec<PieceId>) -> Flow {
    Flow { src, dst, op, pieces }
}

fn block(x: usize, k: u32) -> PieceId {
    PieceId::block(x as u32, k)
}

/// Pairwise all-to-all: in step s = 1..p-1 rank i sends its block for rank i+s.
pub(super) fn pairwise(p: usize) -> Plan {
    (1..p).map(|s| (0..p).map(|i| flow(i, (i + s) % p, Op::Copy, vec![PieceId::a2a(i as u32, ((i + s) % p) as u32, 0)])).collect()).collect()
}

/// Bruck all-to-all, store and forward: in round r every rank passes to rank +2^r each piece it
/// holds whose remaining distance (destination - holder, mod p) has bit r set. Lower bits are
/// cleared in earlier rounds, so after ceil(log2 p) rounds every piece is home. This is the
/// index-rotated formulation without the local rotations, which move no data over links.
pub(super) fn bruck(p: usize) -> Plan {
    // where[i * p + j]: the rank that holds piece (i, j) now.
    let mut held_at: Vec<usize> = (0..p * p).map(|x| x / p).collect();
    let mut plan = Vec::new();
    let mut r = 0;
    while (1usize << r) < p {
        let hop = 1usize << r;
        let mut out: Vec<Vec<PieceId>> = vec![Vec::new(); p];
        for i in 0..p {
            for j in (0..p).filter(|&j| j != i) {
                let at = held_at[i * p + j];
                if ((j + p - at) % p) & hop != 0 {
                    out[at].push(PieceId::a2a(i as u32, j as u32, 0));
                    held_at[i * p + j] = (at + hop) % p;
                }
            }
        }
        plan.push(
            out.into_iter()
                .enumerate()
                .filter(|(_, v)| !v.is_empty())
                .map(|(x, mut v)| {
                    v.sort();
                    flow(x, (x + hop) % p, Op::Copy, v)
                })
                .collect(),
        );
        r += 1;
    }
    plan
}

/// Ring reduce-scatter: in step s = 0..p-2 rank i reduces block i-s-1 into rank i+1, so block j
/// collects its contributions on the way from rank j+1 round to rank j.
pub(super) fn ring_reduce_scatter(p: usize) -> Plan {
    (0..p.saturating_sub(1)).map(|s| (0..p).map(|i| flow(i, (i + 1) % p, Op::Reduce, vec![block((i + 2 * p - s - 1) % p, 0)])).collect()).collect()
}

/// Ring all-gather from rank i holding block i: in step s = 0..p-2 rank i passes block i-s to
/// rank i+1.
pub(super) fn ring_all_gather(p: usize) -> Plan {
    (0..p.saturating_sub(1)).map(|s| (0..p).map(|i| flow(i, (i + 1) % p, Op::Copy, vec![block((i + p - s) % p, 0)])).collect()).collect()
}

/// The largest power of two at most `p` (`p` >= 1): the ranks that recursive halving and
/// doubling pair up; the `p - m` others are folded onto ranks `0..p - m` first.
fn folded(p: usize) -> usize {
    1 << (usize::BITS - 1 - p.leading_zeros())
}

/// The blocks that rank `v < m` of the power-of-two core stands for: its own, and that of the
/// extra rank `v + m` folded onto it.
fn stands_for(v: usize, m: usize, p: usize) -> impl Iterator<Item = usize> {
    std::iter::once(v).chain(Some(v + m).filter(|&e| e < p))
}

/// Each extra rank `e >= m` reduces (or copies) `blocks(e)` into rank `e - m` of the core: the
/// step that folds the extras onto the core before recursive halving or doubling, or (`back`)
/// the one that unfolds the result from the core to them after it. Empty for a power of two.
fn fold(p: usize, op: Op, back: bool, blocks: impl Fn(usize) -> Vec<usize>) -> Option<Vec<Flow>> {
    let m = folded(p);
    (m < p).then(|| {
        (m..p)
            .map(|e| {
                let pieces = blocks(e).into_iter().map(|b| block(b, 0)).collect();
                if back {
                    flow(e - m, e, op, pieces)
                } else {
                    flow(e, e - m, op, pieces)
                }
            })
            .collect()
    })
}

/// Recursive halving among the `m` ranks of the power-of-two core: at distance d = m/2, ..., 1
/// rank i reduces into its partner i^d the half of its current range of 2d (core) blocks that
/// the partner keeps; the ranges shrink to what rank i stands for.
fn halving_core(p: usize) -> Plan {
    let m = folded(p);
    let mut plan = Vec::new();
    let mut d = m / 2;
    while d >= 1 {
        plan.push(
            (0..m)
                .map(|i| {
                    let partner = i ^ d;
                    let base = i & !(2 * d - 1);
                    let pieces = (base..base + 2 * d).filter(|b| b & d == partner & d).flat_map(|b| stands_for(b, m, p)).map(|b| block(b, 0)).collect();
                    flow(i, partner, Op::Reduce, pieces)
                })
                .collect(),
        );
        d /= 2;
    }
    plan
}

/// Recursive doubling among the `m` ranks of the power-of-two core: at distance d = 1, 2, ...,
/// m/2 rank i sends what the d core ranks of its range stand for to its partner i^d.
fn doubling_core(p: usize) -> Plan {
    let m = folded(p);
    let mut plan = Vec::new();
    let mut d = 1;
    while d < m {
        plan.push(
            (0..m)
                .map(|i| flow(i, i ^ d, Op::Copy, (i & !(d - 1)..(i & !(d - 1)) + d).flat_map(|b| stands_for(b, m, p)).map(|b| block(b, 0)).collect()))
                .collect(),
        );
        d *= 2;
    }
    plan
}

/// Recursive halving reduce-scatter: halving among the largest power of two m <= p ranks
/// (log2 m steps); for another p, the p - m extra ranks first reduce all their blocks into ranks
/// 0..p-m and get their own reduced block back at the end (one step each).
pub(super) fn recursive_halving(p: usize) -> Plan {
    let into_core = fold(p, Op::Reduce, false, |_| (0..p).collect());
    let back = fold(p, Op::Copy, true, |e| vec![e]);
    into_core.into_iter().chain(halving_core(p)).chain(back).collect()
}

/// Recursive doubling all-gather from rank i holding block i: doubling among the largest power of
/// two m <= p ranks (log2 m steps); for another p, the p - m extra ranks first hand their block
/// to ranks 0..p-m and get every other block from them at the end (one step each).
pub(super) fn recursive_doubling(p: usize) -> Plan {
    let into_core = fold(p, Op::Copy, false, |e| vec![e]);
    let back = fold(p, Op::Copy, true, |e| (0..p).filter(|&b| b != e).collect());
    into_core.into_iter().chain(doubling_core(p)).chain(back).collect()
}

/// Halving-doubling all-reduce (Rabenseifner): recursive halving then recursive doubling among
/// the largest power of two m <= p ranks (2 log2 m steps); for another p, the p - m extra ranks
/// first reduce all their blocks into ranks 0..p-m and get every reduced block back at the end.
pub(super) fn halving_doubling(p: usize) -> Plan {
    let into_core = fold(p, Op::Reduce, false, |_| (0..p).collect());
    let back = fold(p, Op::Copy, true, |_| (0..p).collect());
    into_core.into_iter().chain(halving_core(p)).chain(doubling_core(p)).chain(back).collect()
}

/// A balanced binary tree over positions `lo..=hi` (root at the midpoint, in-order): fills the
/// parent and depth of every position.
fn midpoint_tree(lo: usize, hi: usize, parent: Option<usize>, depth: usize, parents: &mut [Option<usize>], depths: &mut [usize]) {
    if lo > hi {
        return;
    }
    let root = lo + (hi - lo) / 2;
    parents[root] = parent;
    depths[root] = depth;
    if root > lo {
        midpoint_tree(lo, root - 1, Some(root), depth + 1, parents, depths);
    }
    midpoint_tree(root + 1, hi, Some(root), depth + 1, parents, depths);
}

/// Double binary tree all-reduce, pipelined over `chunks` chunks per tree (2 x `chunks` pieces per
/// block): tree 0 carries pieces 0..chunks of every block, tree 1 the rest. Tree 1 is tree 0 with
/// every position shifted by one rank, so most leaves of one tree are inner nodes of the other
/// and the two trees' traffic is spread over different ranks. In each tree of height h, chunk k
/// leaves the ranks at depth d for their parent in step h - d + k (their children's arrived in
/// the step before), and goes down to them in step h + d - 1 + k (their parent holds its final
/// value from the step before): 2h + chunks - 1 steps, both trees in the same steps, reduces up
/// one chunk while copies go down another.
pub(super) fn double_binary_tree(p: usize, chunks: usize) -> Plan {
    let mut parents = vec![None; p];
    let mut depths = vec![0; p];
    if p > 0 {
        midpoint_tree(0, p - 1, None, 0, &mut parents, &mut depths);
    }
    let h = depths.iter().copied().max().unwrap_or(0);
    if h == 0 || chunks == 0 {
        return Vec::new();
    }
    let rank = |tree: usize, pos: usize| (pos + tree) % p;
    let chunk = |tree: usize, k: usize| (0..p).map(|b| block(b, (tree * chunks + k) as u32)).collect::<Vec<_>>();
    let mut plan = Vec::new();
    for s in 0..2 * h + chunks - 1 {
        let mut step = Vec::new();
        for tree in 0..2 {
            for pos in (0..p).filter(|&x| depths[x] > 0) {
                let d = depths[pos];
                let parent = parents[pos].expect("a non-root position has a parent");
                // Up: chunk s - (h - d); down: chunk s - (h + d - 1).
                if let Some(k) = (s + d).checked_sub(h).filter(|&k| k < chunks) {
                    step.push(flow(rank(tree, pos), rank(tree, parent), Op::Reduce, chunk(tree, k)));
                }
                if let Some(k) = (s + 1).checked_sub(h + d).filter(|&k| k < chunks) {
                    step.push(flow(rank(tree, parent), rank(tree, pos), Op::Copy, chunk(tree, k)));
                }
            }
        }
        plan.push(step);
    }
    plan.into_iter().map(merge).collect()
}

/// Merges the flows of one step that have the same sender, receiver and op into one (the two
/// trees of the double binary tree can use the same edge in the same step), so that one transfer
/// carries them.
fn merge(step: Vec<Flow>) -> Vec<Flow> {
    let mut out: Vec<Flow> = Vec::new();
    for f in step {
        match out.iter_mut().find(|g| (g.src, g.dst, g.op) == (f.src, f.dst, f.op)) {
            Some(g) => g.pieces.extend(f.pieces),
            None => out.push(f),
        }
    }
    out
}
