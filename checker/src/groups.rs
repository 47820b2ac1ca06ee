//! Bounds over a partition of the ranks into groups (docs/design/MODEL.md section 6, "Groups of
//! ranks"): a board of a fat tree, a leaf's npus, a pod. A transfer between two ranks of
//! different groups *crosses*.
//!
//! - `group_transmissions` (bandwidth): every piece needs a number of crossing transfers (the
//!   transmission count with each group as one rank); each leaves its group's node set, so the
//!   bytes over the up links leaving those sets are at least that count times the piece's size.
//! - `crossing` (time): a value whose chain of transfers crosses twice pays two crossings'
//!   latency; one that crosses once was sent from its source group straight to the group that
//!   needs it, so every such pair of groups adds demand to the cuts between them. The bound is the
//!   least, over how far the chains may cross, of the latency that costs plus the bandwidth term
//!   the direct demand forces.

use crate::derive::{latencies_from, membership};
use crate::instance::{BlockKind, Demands, Instance};
use crate::Q;
use num_traits::Zero;

/// The most groups a crossing claim may name: the bound weighs every pair of groups through every
/// third (256 groups: 16.6 million sums), so a certificate cannot make the checker run for hours.
pub(crate) const MAX_CROSSING_GROUPS: usize = 256;

/// A partition of the ranks, read from a witness: each group a node set (its ranks, and any other
/// nodes whose links count as the group's), the sets disjoint, every rank in one of them.
pub(crate) struct Groups {
    /// The group of each node, if any.
    of: Vec<Option<usize>>,
    /// The ranks of each group.
    ranks: Vec<Vec<usize>>,
}

impl Groups {
    /// Reads `sets`: errors for a node out of range or named twice, a group without a rank, or a
    /// rank in no group.
    pub(crate) fn new(inst: &Instance, sets: &[Vec<usize>]) -> Result<Groups, String> {
        let mut of = vec![None; inst.nodes];
        for (g, set) in sets.iter().enumerate() {
            for &n in set {
                if n >= inst.nodes {
                    return Err(format!("group {g} names node {n}, but there are {} nodes", inst.nodes));
                }
                match of[n].replace(g) {
                    Some(h) if h == g => return Err(format!("group {g} names node {n} twice")),
                    Some(h) => return Err(format!("node {n} is in group {h} and in group {g}")),
                    None => {}
                }
            }
        }
        let mut ranks = vec![Vec::new(); sets.len()];
        for &r in &inst.ranks {
            match of[r] {
                Some(g) => ranks[g].push(r),
                None => return Err(format!("rank {r} is in no group")),
            }
        }
        if let Some(g) = ranks.iter().position(Vec::is_empty) {
            return Err(format!("group {g} holds no rank"));
        }
        Ok(Groups { of, ranks })
    }

    fn len(&self) -> usize {
        self.ranks.len()
    }
}

/// Crossing transfers per piece, with G groups (MODEL.md section 6): an all_gather piece must
/// reach the G-1 groups that lack it; a reduce_scatter piece needs the contributions of G-1 other
/// groups, each leaving its group; an all_reduce piece 2(G-1) (the gossip bound over groups); an
/// all_to_all demand one if its ends lie in different groups (counted by the caller).
fn crossings_per_piece(kind: BlockKind, groups: usize) -> i64 {
    let g = groups as i64 - 1;
    match kind {
        BlockKind::AllGather | BlockKind::ReduceScatter => g,
        BlockKind::AllReduce => 2 * g,
    }
}

/// The group transmission-count bound: the bytes of the crossing transfers every piece needs, over
/// the capacity of the up links leaving the groups' node sets (with `into`, entering them).
pub(crate) fn group_transmissions(inst: &Instance, groups: &Groups, into: bool) -> Result<Q, String> {
    let r = inst.ranks.len() as i64;
    let apart = |s: usize, d: usize| groups.of[s] != groups.of[d];
    let bytes = match &inst.demands {
        Demands::UniformAllToAll(b) => {
            let same: i64 = groups.ranks.iter().map(|g| (g.len() * g.len()) as i64).sum();
            b * Q::from_integer((r * r - same).into())
        }
        Demands::AllToAll(list) => list.iter().filter(|(s, d, _)| apart(*s, *d)).fold(Q::zero(), |acc, (_, _, b)| acc + b),
        Demands::Blocks { kind, block_bytes } => block_bytes * Q::from_integer((r * crossings_per_piece(*kind, groups.len())).into()),
    };
    let crosses = |l: &crate::instance::Link| {
        let (inside, outside) = if into { (l.dst, l.src) } else { (l.src, l.dst) };
        l.up && groups.of[inside].is_some() && groups.of[inside] != groups.of[outside]
    };
    let capacity = inst.links.iter().filter(|l| crosses(l)).fold(Q::zero(), |acc, l| acc + &l.capacity);
    if capacity.is_zero() {
        return if bytes.is_zero() { Ok(Q::zero()) } else { Err("no up link leaves (or enters) a group, yet bytes must cross between groups".into()) };
    }
    Ok(bytes / capacity)
}

/// The crossing bound of `groups`, given the certificate's best proven bandwidth bound and latency
/// bound, and cuts (node sets holding all or none of each group's ranks; `into` counts the links
/// entering)
/// for the demand between groups that must be direct.
///
/// Lx(h, g) is the least latency of a path from a rank of h to a rank of g; a chain from h to g
/// that crosses k >= 2 times has latency at least L2(h, g) = min(Lx(h, f) + Lx(f, g) over groups
/// f other than h and g, 3 x the least Lx). For a threshold t, every pair with L2(h, g) > t must
/// be direct (one crossing) for every piece if the chains' latency stays within t, and a transfer
/// is the straight crossing of one pair only, so each such pair's demand (all_reduce: every piece; all_gather: the pieces of h's ranks; reduce_scatter:
/// those of g's ranks) crosses every cut with h inside and g outside. A step-synchronous schedule
/// then takes max(t, latency) + max(bandwidth, that demand over the cut's capacity); the bound is
/// the least of these over the thresholds that matter (the latency bound, and each L2 above it).
pub(crate) fn crossing(inst: &Instance, groups: &Groups, cuts: &[(Vec<usize>, bool)], bandwidth: &Q, latency: &Q) -> Result<Q, String> {
    let Demands::Blocks { kind, block_bytes } = &inst.demands else {
        return Err("the crossing bound is for all_gather, reduce_scatter and all_reduce".into());
    };
    let g = groups.len();
    if g < 2 {
        return Err("the crossing bound needs at least two groups".into());
    }
    // Least latencies between groups, one search from each group's ranks.
    let mut lx = vec![vec![Q::zero(); g]; g];
    for (h, row) in lx.iter_mut().enumerate() {
        let dist = latencies_from(inst, &groups.ranks[h]);
        for (f, ranks) in groups.ranks.iter().enumerate().filter(|&(f, _)| f != h) {
            let best = ranks.iter().filter_map(|&r| dist[r].clone()).min();
            row[f] = best.ok_or_else(|| format!("no rank of group {f} can be reached from group {h} over up links"))?;
        }
    }
    let least = (0..g).flat_map(|h| (0..g).filter(move |&f| f != h).map(move |f| (h, f))).map(|(h, f)| lx[h][f].clone()).min().unwrap_or_default();
    let three = Q::from_integer(3.into()) * &least;
    let l2 = |h: usize, f: usize| -> Q { (0..g).filter(|&m| m != h && m != f).map(|m| &lx[h][m] + &lx[m][f]).fold(three.clone(), |a, b| a.min(b)) };
    let pairs: Vec<(usize, usize, Q)> = (0..g).flat_map(|h| (0..g).filter(move |&f| f != h).map(move |f| (h, f))).map(|(h, f)| (h, f, l2(h, f))).collect();
    let demand = |h: usize, f: usize| -> Q {
        let blocks = match kind {
            BlockKind::AllReduce => inst.ranks.len(),
            BlockKind::AllGather => groups.ranks[h].len(),
            BlockKind::ReduceScatter => groups.ranks[f].len(),
        };
        block_bytes * Q::from_integer(blocks.into())
    };
    // Each cut: which groups lie inside it, and the capacity of the up links leaving it.
    let mut sides = Vec::with_capacity(cuts.len());
    for (i, (nodes, into)) in cuts.iter().enumerate() {
        let u = membership(inst, nodes, *into).map_err(|e| format!("cut {i}: {e}"))?;
        let inside: Vec<bool> = groups.ranks.iter().map(|ranks| u[ranks[0]]).collect();
        if let Some(r) = groups.ranks.iter().flatten().find(|&&r| u[r] != inside[groups.of[r].unwrap_or(0)]) {
            return Err(format!("cut {i} splits the group of rank {r}: a cut holds all or none of each group's ranks"));
        }
        let capacity = inst.links.iter().filter(|l| l.up && u[l.src] && !u[l.dst]).fold(Q::zero(), |acc, l| acc + &l.capacity);
        sides.push((inside, capacity));
    }
    let mut thresholds: Vec<Q> = pairs.iter().map(|(_, _, t)| t.clone()).filter(|t| t > latency).collect();
    thresholds.push(latency.clone());
    thresholds.sort();
    thresholds.dedup();
    // Per cut, the pairs it separates by L2 from the largest down, with the running sum of their
    // demand: the demand that must cross it above a threshold is one lookup.
    let mut above: Vec<(Vec<Q>, Vec<Q>, &Q)> = Vec::with_capacity(sides.len());
    for (i, (inside, capacity)) in sides.iter().enumerate() {
        let mut separated: Vec<(&Q, Q)> = pairs.iter().filter(|(h, f, _)| inside[*h] && !inside[*f]).map(|(h, f, l)| (l, demand(*h, *f))).collect();
        if separated.iter().any(|(_, d)| !d.is_zero()) && capacity.is_zero() {
            return Err(format!("cut {i}: no up link leaves it, yet bytes must cross it: the instance is infeasible"));
        }
        separated.sort_by(|a, b| b.0.cmp(a.0));
        let mut sums = Vec::with_capacity(separated.len());
        let mut total = Q::zero();
        for (_, d) in &separated {
            total += d;
            sums.push(total.clone());
        }
        above.push((separated.into_iter().map(|(l, _)| l.clone()).collect(), sums, capacity));
    }
    let mut best: Option<Q> = None;
    for t in &thresholds {
        let mut bw = bandwidth.clone();
        for (l2s, sums, capacity) in &above {
            // The pairs with L2 > t come first.
            let n = l2s.partition_point(|l| l > t);
            if n > 0 && !sums[n - 1].is_zero() {
                bw = bw.max(&sums[n - 1] / *capacity);
            }
        }
        let value = t.clone().max(latency.clone()) + bw;
        best = Some(best.map_or(value.clone(), |b| b.min(value)));
    }
    Ok(best.unwrap_or_default())
}
