//! Lower bounds of docs/design/MODEL.md section 6: steps, latency and volume here; cuts, flows and
//! the steps bounds with their witnesses in the submodules.
//!
//! Every bound here is computed exactly (rationals) from the instance alone: no solver.

pub mod certificate;
pub mod certified;
pub mod cut;
pub mod flow;
pub mod groups;
pub mod steps;

use crate::collective::{Collective, CollectiveKind};
use crate::topology::{NodeId, Topology, UpAdjacency};
use crate::units::{rational_from_decimal, Rational};
use num_traits::Zero;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The bounds of one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounds {
    /// Fewest steps of a single-hop schedule: the farthest required (piece, destination) in
    /// single hops (a hop is one link, or one path through switches only).
    pub steps: u32,
    /// The largest shortest-path latency from a piece's source to a destination that needs it, ns.
    pub latency_ns: Rational,
    /// all_to_all only: sum over pieces of size times shortest distance (links), over the total
    /// bandwidth of the links that are up, ns.
    pub volume_ns: Option<Rational>,
    /// The transmission-count bound (`transmissions`), ns; `None` when no link leaves a rank.
    pub transmissions: Option<Transmissions>,
}

impl Bounds {
    /// The best bandwidth bound known here (volume or transmission count), ns. The cut and flow
    /// bounds of `cut` and `flow` may be higher; they cost a search, so they are computed
    /// for certificates, not here.
    pub fn bandwidth_ns(&self) -> Option<Rational> {
        match (self.volume_ns, self.transmissions.map(|t| t.value_ns)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The transmission-count bound (docs/design/MODEL.md section 6): every piece needs a number of
/// transfers, each leaving a rank and entering a rank, so the bytes over the links out of ranks
/// (or into them) are at least `count x size` summed over pieces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transmissions {
    /// The bound, ns.
    pub value_ns: Rational,
    /// Whether it counts the links entering ranks (else those leaving them): the larger one.
    pub into: bool,
}

/// How many transfers a piece needs at least (docs/design/MODEL.md section 6): all_to_all 1,
/// all_gather and reduce_scatter R-1, all_reduce 2(R-1).
pub fn transfers_per_piece(kind: CollectiveKind, ranks: usize) -> i128 {
    let r = ranks as i128;
    match kind {
        CollectiveKind::AllToAll => 1,
        CollectiveKind::AllGather | CollectiveKind::ReduceScatter => r - 1,
        CollectiveKind::AllReduce => 2 * (r - 1),
    }
}

/// The transmission-count bound of an instance, over the links out of ranks and into ranks,
/// whichever is larger; `None` when no up link leaves or enters a rank.
pub fn transmissions(t: &Topology, c: &Collective) -> Option<Transmissions> {
    let r = c.num_ranks();
    let bytes: Rational = match c.kind {
        CollectiveKind::AllToAll if c.is_uniform() => c.block_size(0, 0) * Rational::from_integer(r as i128 * (r as i128 - 1)),
        CollectiveKind::AllToAll => (0..r).flat_map(|i| (0..r).filter(move |&j| j != i).map(move |j| (i, j))).map(|(i, j)| c.block_size(i, j)).sum(),
        kind => c.piece_size_at(0) * Rational::from_integer(c.pieces as i128 * r as i128 * transfers_per_piece(kind, r)),
    };
    let stores = c.rank_mask(t);
    let is_rank = |n: NodeId| stores.get(n.index()).copied().unwrap_or(false);
    let capacity = |into: bool| -> Rational {
        t.links()
            .filter(|(_, l)| l.up && is_rank(if into { l.dst } else { l.src }))
            .map(|(_, l)| rational_from_decimal(l.bandwidth_gbps).unwrap_or_default())
            .sum()
    };
    [false, true]
        .into_iter()
        .filter_map(|into| {
            let cap = capacity(into);
            (!cap.is_zero()).then(|| Transmissions { value_ns: bytes / cap, into })
        })
        .max_by(|a, b| a.value_ns.cmp(&b.value_ns))
}

/// Single-hop distances from `from` to every rank: BFS where a hop goes from a rank over links
/// that are up, through switches and npus outside the collective only (`stores[n]` false), to
/// another rank (only ranks store, docs/design/MODEL.md sections 1 and 3). `stores` is indexed by
/// npu id (nodes past its end are switches). `up` is the topology's [`UpAdjacency`].
pub fn single_hop_distances(up: &UpAdjacency, stores: &[bool], from: NodeId) -> Vec<Option<u32>> {
    let n = up.num_nodes();
    let mut dist = vec![None; n];
    dist[from.index()] = Some(0);
    let mut queue = vec![from.0];
    // The pass-through nodes seen while expanding the queue's `turn`-th node (stamped with it).
    let mut seen = vec![usize::MAX; n];
    let mut stack = Vec::new();
    let mut turn = 0usize;
    while let Some(&x0) = queue.get(turn) {
        let d = dist[x0 as usize].map_or(0, |d| d + 1);
        // Expand through the nodes that do not store within one hop.
        stack.push(x0);
        while let Some(x) = stack.pop() {
            for &y in up.heads(x as usize) {
                let yi = y as usize;
                if stores.get(yi).copied().unwrap_or(false) {
                    if dist[yi].is_none() {
                        dist[yi] = Some(d);
                        queue.push(y);
                    }
                } else if seen[yi] != turn {
                    seen[yi] = turn;
                    stack.push(y);
                }
            }
        }
        turn += 1;
    }
    dist
}

/// The exact latencies of a topology's links and switches over one common denominator, so that
/// the shortest-path searches from every rank (which the bounds run) add integers, not fractions.
pub struct LatencyMetric {
    /// Per link: its latency, plus the switch latency when it enters a switch, in units of
    /// `1 / denominator` ns.
    weight: Vec<i128>,
    /// The one weight of every link, when they are all alike (a torus): the searches are then
    /// breadth-first.
    uniform: Option<i128>,
    denominator: i128,
}

impl LatencyMetric {
    /// The metric of `t` (every latency is a finite decimal, so a power of ten serves).
    pub fn new(t: &Topology) -> Self {
        let sw = rational_from_decimal(t.switch_latency_ns()).unwrap_or_default();
        let lat: Vec<Rational> =
            t.links().map(|(_, l)| rational_from_decimal(l.latency_ns).unwrap_or_default() + if t.is_npu(l.dst) { Rational::zero() } else { sw }).collect();
        let denominator = lat.iter().fold(1i128, |acc, x| num_integer::lcm(acc, *x.denom()));
        let weight: Vec<i128> = lat.iter().map(|x| x.numer() * (denominator / x.denom())).collect();
        let uniform = weight.first().copied().filter(|w| weight.iter().all(|x| x == w));
        LatencyMetric { weight, uniform, denominator }
    }

    /// The metric's units per ns.
    pub fn denominator(&self) -> i128 {
        self.denominator
    }

    /// A latency in the metric's units, in ns.
    pub fn ns(&self, scaled: i128) -> Rational {
        Rational::new(scaled, self.denominator)
    }

    /// Latencies of `hops` links each, when every link weighs the same.
    pub fn uniform_distances(&self, hops: &[Option<u32>]) -> Option<Vec<Option<i128>>> {
        self.uniform.map(|w| hops.iter().map(|d| d.map(|h| w * i128::from(h))).collect())
    }

    /// Shortest latencies from `from` to every node in units of `1 / denominator` ns (`None`
    /// where unreachable), over `up` (the topology's [`UpAdjacency`]): breadth-first when every
    /// link weighs the same, Dijkstra otherwise.
    pub fn scaled_distances(&self, up: &UpAdjacency, from: NodeId) -> Vec<Option<i128>> {
        if let Some(lats) = self.uniform_distances(&up.hop_distances(from)) {
            return lats;
        }
        self.scaled_distances_from_set(up, &[from])
    }

    /// Shortest latencies from the nearest of `sources` to every node, as
    /// [`LatencyMetric::scaled_distances`] measures them (Dijkstra).
    pub fn scaled_distances_from_set(&self, up: &UpAdjacency, sources: &[NodeId]) -> Vec<Option<i128>> {
        let mut dist: Vec<Option<i128>> = vec![None; up.num_nodes()];
        let mut heap = BinaryHeap::new();
        for &s in sources {
            dist[s.index()] = Some(0);
            heap.push(Reverse((0i128, s.0)));
        }
        while let Some(Reverse((d, n))) = heap.pop() {
            if dist[n as usize].is_some_and(|x| x < d) {
                continue;
            }
            for (l, y) in up.out(n as usize) {
                let nd = d + self.weight[l.index()];
                if dist[y].is_none_or(|x| nd < x) {
                    dist[y] = Some(nd);
                    heap.push(Reverse((nd, y as u32)));
                }
            }
        }
        // A path ends at an npu: the last switch's latency was counted on entering it, which is
        // what docs/design/MODEL.md charges (every switch on the path).
        dist
    }
}

/// What the bounds take from the distances between required pairs of ranks (every kind needs
/// something of rank i at rank j, except an empty all_to_all block), found in one scan from every
/// rank, the ranks shared out over threads.
#[derive(Clone, Debug, PartialEq)]
pub struct Farthest {
    /// The largest single-hop distance of a required pair, with the pair (the first in rank
    /// order among equals): the steps bound and its witness.
    pub hops: Option<(u32, NodeId, NodeId)>,
    /// The largest shortest-path latency of a required pair, ns, with the pair (the first in rank
    /// order among equals): the latency bound and its witness.
    pub latency: Option<(Rational, NodeId, NodeId)>,
    /// all_to_all only: the sum over blocks of their bytes times their distance in links.
    pub byte_links: Rational,
    /// Per rank (by index), how many ranks need something of it at each single-hop distance
    /// (`out[i][h]`: required pairs (rank i, j) with j `h` hops from i), and how many it needs
    /// something of (`into[i][h]`: pairs (j, rank i), j `h` hops to i): the steps arrival bound's
    /// profile ([`steps::arrival`]).
    pub profile: HopProfile,
}

/// Counts of required partners by single-hop distance, per rank ([`Farthest::profile`]).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HopProfile {
    /// Per rank, per distance h, the required destinations h hops from it.
    pub out: Vec<Vec<u32>>,
    /// Per rank, per distance h, the required sources h hops to it.
    pub into: Vec<Vec<u32>>,
}

/// Adds one to `row[h]`, growing the row as needed.
fn count_at(row: &mut Vec<u32>, h: u32) {
    let h = h as usize;
    if row.len() <= h {
        row.resize(h + 1, 0);
    }
    row[h] += 1;
}

/// Scans every required pair of `c` once ([`Farthest`]). Assumes every rank is connected.
pub fn farthest(t: &Topology, c: &Collective) -> Farthest {
    use rayon::prelude::*;
    let stores = c.rank_mask(t);
    let metric = LatencyMetric::new(t);
    let up = UpAdjacency::new(t);
    let all_to_all = c.kind == CollectiveKind::AllToAll;
    let every_node_stores = t.num_nodes() == stores.len() && stores.iter().all(|&x| x);
    let needed = |si: usize, di: usize| si != di && (!all_to_all || c.is_uniform() || c.block_size(si, di) > Rational::zero());
    // Per source: (hops, destination), (scaled latency, destination), bytes times links, its
    // required destinations by hops.
    type Row = (Option<(u32, usize)>, Option<(i128, usize)>, Rational, Vec<u32>);
    let r = c.num_ranks();
    // Each thread keeps its sources' rows and its share of every rank's required sources by hops
    // (the columns of the distances, which no single row holds).
    let (mut rows, into): (Vec<(usize, Row)>, Vec<Vec<u32>>) = (0..r)
        .into_par_iter()
        // Few accumulators: each holds a list per rank.
        .with_min_len(r.div_ceil(4 * rayon::current_num_threads()).max(1))
        .fold(
            || (Vec::new(), vec![Vec::new(); r]),
            |(mut rows, mut into): (Vec<(usize, Row)>, Vec<Vec<u32>>), si| {
                let src = c.ranks[si];
                let hops = single_hop_distances(&up, &stores, src);
                // Where every node stores (a torus of ranks), a single hop is a link: one scan serves
                // the hops, the links and (when every link weighs the same) the latencies.
                let lats = every_node_stores.then(|| metric.uniform_distances(&hops)).flatten().unwrap_or_else(|| metric.scaled_distances(&up, src));
                let links = all_to_all.then(|| if every_node_stores { hops.clone() } else { up.hop_distances(src) });
                let (mut far_hops, mut far_lat, mut byte_links) = (None, None, Rational::zero());
                let mut out = Vec::new();
                // A uniform all_to_all sums its links as integers and weighs them once.
                let mut uniform_links = 0u64;
                for (di, &dst) in c.ranks.iter().enumerate().filter(|&(di, _)| needed(si, di)) {
                    if let Some(h) = hops[dst.index()] {
                        count_at(&mut out, h);
                        count_at(&mut into[di], h);
                        if far_hops.is_none_or(|(b, _)| h > b) {
                            far_hops = Some((h, di));
                        }
                    }
                    if let Some(l) = lats[dst.index()].filter(|&l| far_lat.is_none_or(|(b, _)| l > b)) {
                        far_lat = Some((l, di));
                    }
                    match &links {
                        Some(links) if c.is_uniform() => uniform_links += u64::from(links[dst.index()].unwrap_or(0)),
                        Some(links) => byte_links += c.block_size(si, di) * Rational::from_integer(i128::from(links[dst.index()].unwrap_or(0))),
                        None => {}
                    }
                }
                if uniform_links > 0 {
                    byte_links = c.block_size(si, si) * Rational::from_integer(i128::from(uniform_links));
                }
                rows.push((si, (far_hops, far_lat, byte_links, out)));
                (rows, into)
            },
        )
        .reduce(
            || (Vec::new(), vec![Vec::new(); r]),
            |(mut rows, mut into), (more, other)| {
                rows.extend(more);
                for (mine, theirs) in into.iter_mut().zip(other) {
                    if mine.len() < theirs.len() {
                        mine.resize(theirs.len(), 0);
                    }
                    mine.iter_mut().zip(theirs).for_each(|(a, b)| *a += b);
                }
                (rows, into)
            },
        );
    rows.sort_unstable_by_key(|&(si, _)| si);
    let mut far = Farthest { hops: None, latency: None, byte_links: Rational::zero(), profile: HopProfile { out: Vec::with_capacity(r), into } };
    let mut best_lat: Option<i128> = None;
    for (si, (h, l, v, out)) in rows {
        far.profile.out.push(out);
        if let Some((h, di)) = h.filter(|&(h, _)| far.hops.is_none_or(|(b, _, _)| h > b)) {
            far.hops = Some((h, c.ranks[si], c.ranks[di]));
        }
        if let Some((l, di)) = l.filter(|&(l, _)| best_lat.is_none_or(|b| l > b)) {
            best_lat = Some(l);
            far.latency = Some((metric.ns(l), c.ranks[si], c.ranks[di]));
        }
        far.byte_links += v;
    }
    far
}

/// Computes the bounds of an instance. Assumes every rank is connected (checked earlier).
pub fn bounds(t: &Topology, c: &Collective) -> Bounds {
    bounds_with(t, c, &farthest(t, c))
}

/// [`bounds`] from the instance's [`farthest`] pairs, already scanned.
pub fn bounds_with(t: &Topology, c: &Collective, far: &Farthest) -> Bounds {
    let total_bw: Rational = t.links().filter(|(_, l)| l.up).map(|(_, l)| rational_from_decimal(l.bandwidth_gbps).unwrap_or_default()).sum();
    let volume_ns = (c.kind == CollectiveKind::AllToAll && !total_bw.is_zero()).then(|| far.byte_links / total_bw);
    Bounds {
        steps: far.hops.map_or(0, |(h, _, _)| h),
        latency_ns: far.latency.map_or_else(Rational::zero, |(l, _, _)| l),
        volume_ns,
        transmissions: transmissions(t, c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{fat_tree, torus, FatTreeParams, TorusParams};
    use crate::units::to_f64;

    #[test]
    fn ring_volume_bound_is_halfring() {
        for n in 3..10usize {
            let t = torus(&TorusParams::uniform(&[n], 32.0, 100.0)).unwrap();
            let s = 1_000_000u64;
            let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), s, 1, None, &t).unwrap();
            let b = bounds(&t, &c);
            let n_ = n as i128;
            let expected = if n % 2 == 0 { Rational::new(n_ * s as i128, 8 * 32) } else { Rational::new((n_ * n_ - 1) * s as i128, 8 * n_ * 32) };
            assert_eq!(b.volume_ns, Some(expected), "N={n}");
            assert_eq!(b.steps, (n / 2) as u32);
            assert_eq!(b.latency_ns, Rational::from_integer(100 * (n / 2) as i128));
        }
    }

    #[test]
    fn transmission_counts_on_a_healthy_torus() {
        // docs/design/MODEL.md section 6: all_reduce on a healthy 4x4x4 torus at 32 GB/s and 8 MiB,
        // 2(R-1)S over the ranks' outgoing capacity (64 x 6 links of 32 GB/s): 86.0 us.
        let t = torus(&TorusParams::uniform(&[4, 4, 4], 32.0, 100.0)).unwrap();
        let s = 8u64 << 20;
        for (kind, count) in [(CollectiveKind::AllGather, 63), (CollectiveKind::ReduceScatter, 63), (CollectiveKind::AllReduce, 126)] {
            let c = Collective::new(kind, t.node_ids().collect(), s, 1, None, &t).unwrap();
            let b = bounds(&t, &c).transmissions.unwrap();
            assert_eq!(b.value_ns, Rational::new(count * s as i128, 64 * 6 * 32), "{kind}");
        }
        let c = Collective::new(CollectiveKind::AllReduce, t.node_ids().collect(), s, 1, None, &t).unwrap();
        assert!((to_f64(&bounds(&t, &c).bandwidth_ns().unwrap()) - 86_016.0).abs() < 1.0);
    }

    #[test]
    fn fat_tree_steps_and_latency() {
        let t =
            fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 8, board: None, bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })
                .unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, (0..8).map(NodeId).collect(), 8000, 1, None, &t).unwrap();
        let b = bounds(&t, &c);
        assert_eq!(b.steps, 1);
        // npu -> leaf -> spine -> leaf -> npu: 4 links, 3 switches.
        assert_eq!(b.latency_ns, Rational::from_integer(4 * 25 + 3 * 1000));
    }
}
