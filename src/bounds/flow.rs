//! The flow bound for all_to_all (docs/design/MODEL.md section 6): the maximum concurrent flow, approached
//! from both sides by multiplicative weights (Garg-Konemann, Fleischer).
//!
//! Lengths `y_e >= 0` on the links give a lower bound on the time of any routing:
//! `sum_demands bytes x y-distance / sum_e capacity_e y_e`. A routing of every demand gives an
//! upper bound on the optimal (fluid) time: its most loaded link's bytes over capacity. The
//! method keeps a weight per link (the "experts"), routes every demand on shortest paths under
//! the current lengths (one shortest-path tree per source, which is also exactly what the lower
//! bound of those lengths needs), and raises the weight of each link exponentially in its load.
//! The averaged routings converge to the optimum from above, the best lengths from below.
//!
//! The lengths are computed in floating point, then rounded to integers, and the bound they give
//! is recomputed exactly; so the certified value never depends on floating point. Lengths 1
//! everywhere give exactly the volume bound, and lengths 1 on the links crossing a cut give
//! exactly that cut's bound; both seed the search (the cut: the best that [`best_cut`] finds),
//! so the result is never below either. It may lie below a cut that the cut search misses: the
//! search stops within a gap of the optimum, which dominates every cut (docs/design/MODEL.md
//! section 6).

use super::cut::best_cut;
use crate::collective::{Collective, CollectiveKind};
use crate::topology::Topology;
use crate::units::{rational_from_decimal, to_f64, Rational};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{ToPrimitive, Zero};
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Limits of the flow computation.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowOptions {
    /// Stop after this long.
    pub time_limit: Duration,
    /// Stop once `upper / lower - 1` is at most this (0.02 = 2%).
    pub target_gap: f64,
    /// Stop after this many phases (one phase routes every demand once).
    pub max_phases: usize,
    /// Step of the weight update: larger moves faster, smaller converges closer.
    pub epsilon: f64,
}

impl Default for FlowOptions {
    fn default() -> Self {
        FlowOptions { time_limit: Duration::from_secs(60), target_gap: 0.02, max_phases: 1_000_000, epsilon: 0.1 }
    }
}

/// Why the computation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowStop {
    /// The gap reached the target.
    GapReached,
    /// The time limit.
    TimeLimit,
    /// The phase limit.
    PhaseLimit,
    /// Nothing has to move (or nothing can be improved: the bound is 0).
    Trivial,
}

/// Where the lengths of a flow bound come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowWitness {
    /// Every length 1: the volume bound.
    Volume,
    /// Length 1 on the links crossing the best cut ([`super::cut::best_cut`]), else 0: the cut
    /// bound, which the flow bound dominates.
    Cut,
    /// The lengths found by multiplicative weights.
    Weights,
}

/// The result: a certified lower bound with its witness, and the best routing's time.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowBound {
    /// The certified lower bound (exact: recomputed from `lengths`): on time in ns for
    /// [`flow_bound`], on steps for `steps_flow_bound`.
    pub lower: BigRational,
    /// The witness: an integer length per link (down links 0).
    pub lengths: Vec<u64>,
    /// Where the witness comes from.
    pub witness: FlowWitness,
    /// The value of the best fractional routing found (ns, or steps): the fractional optimum
    /// lies in `[lower, upper]`.
    pub upper: f64,
    /// `upper / lower - 1`.
    pub gap: f64,
    /// Phases run.
    pub phases: usize,
    /// Why it stopped.
    pub stop: FlowStop,
    /// Time spent.
    pub elapsed: Duration,
}

/// The up links in a compact form, and the demands grouped by source.
struct Net {
    n: usize,
    /// Per node, `(link index, destination)` over up links.
    adj: Vec<Vec<(usize, usize)>>,
    cap: Vec<f64>,
    up: Vec<bool>,
    /// Per link, its source node.
    src_of: Vec<usize>,
    /// `(source node, [(destination node, bytes)])`.
    sources: Vec<(usize, Vec<(usize, f64)>)>,
}

impl Net {
    fn new(t: &Topology, c: &Collective) -> Net {
        let mut adj = vec![Vec::new(); t.num_nodes()];
        for (id, l) in t.links().filter(|(_, l)| l.up) {
            adj[l.src.index()].push((id.index(), l.dst.index()));
        }
        let cap = t.links().map(|(_, l)| l.bandwidth_gbps).collect();
        let up = t.links().map(|(_, l)| l.up).collect();
        let src_of = t.links().map(|(_, l)| l.src.index()).collect();
        let sources = (0..c.num_ranks())
            .map(|i| {
                let row = (0..c.num_ranks()).filter(|&j| j != i).map(|j| (c.ranks[j].index(), to_f64(&c.block_size(i, j)))).filter(|&(_, b)| b > 0.0);
                (c.ranks[i].index(), row.collect::<Vec<_>>())
            })
            .filter(|(_, row)| !row.is_empty())
            .collect();
        Net { n: t.num_nodes(), adj, cap, up, src_of, sources }
    }

    /// The steps version (docs/design/MODEL.md section 3: one piece per link per step): every
    /// link carries 1 per step, every required piece weighs 1.
    fn pieces(t: &Topology, c: &Collective) -> Net {
        let mut net = Net::new(t, c);
        net.cap.iter_mut().for_each(|x| *x = 1.0);
        for (_, row) in &mut net.sources {
            row.iter_mut().for_each(|(_, b)| *b = c.pieces as f64);
        }
        net
    }
}

/// Reusable Dijkstra buffers.
struct Tree {
    dist: Vec<f64>,
    pred: Vec<usize>,
    order: Vec<usize>,
    acc: Vec<f64>,
    done: Vec<bool>,
}

impl Tree {
    fn new(n: usize) -> Tree {
        Tree { dist: vec![f64::INFINITY; n], pred: vec![usize::MAX; n], order: Vec::with_capacity(n), acc: vec![0.0; n], done: vec![false; n] }
    }

    /// Shortest-path tree from `s` under lengths `y`.
    fn grow(&mut self, net: &Net, y: &[f64], s: usize) {
        self.dist.iter_mut().for_each(|d| *d = f64::INFINITY);
        self.done.iter_mut().for_each(|d| *d = false);
        self.order.clear();
        self.dist[s] = 0.0;
        self.pred[s] = usize::MAX;
        // Non-negative floats order like their bit patterns, which makes them heap keys.
        let mut heap = BinaryHeap::from([Reverse((0u64, s))]);
        while let Some(Reverse((_, v))) = heap.pop() {
            if std::mem::replace(&mut self.done[v], true) {
                continue;
            }
            self.order.push(v);
            let dv = self.dist[v];
            for &(l, w) in &net.adj[v] {
                let nd = dv + y[l];
                if nd < self.dist[w] {
                    self.dist[w] = nd;
                    self.pred[w] = l;
                    heap.push(Reverse((nd.to_bits(), w)));
                }
            }
        }
    }

    /// Routes `row` on the tree: `(link, bytes)` for every link it loads, into `out`.
    fn route(&mut self, row: &[(usize, f64)], src_of: &[usize], out: &mut Vec<(usize, f64)>) {
        out.clear();
        for &(d, b) in row {
            self.acc[d] += b;
        }
        // Leaves first: each node passes what its subtree needs to its parent link.
        for &v in self.order.iter().rev() {
            let a = std::mem::replace(&mut self.acc[v], 0.0);
            let l = self.pred[v];
            if a > 0.0 && l != usize::MAX {
                out.push((l, a));
                self.acc[src_of[l]] += a;
            }
        }
    }

    /// `sum over demands of bytes x distance` under lengths `y`: the numerator of their bound;
    /// the sources in parallel, each thread with its own tree. `None` once past `deadline`.
    /// Summed in source order, so that the same lengths always give the same float.
    fn weighted_distance(net: &Net, y: &[f64], deadline: Instant) -> Option<f64> {
        let per_source: Option<Vec<f64>> = net
            .sources
            .par_iter()
            .map_init(
                || Tree::new(net.n),
                |tree, (s, row)| {
                    (Instant::now() < deadline).then(|| {
                        tree.grow(net, y, *s);
                        row.iter().map(|&(d, b)| b * tree.dist[d]).sum::<f64>()
                    })
                },
            )
            .collect();
        Some(per_source?.into_iter().sum())
    }
}

/// The exact bound of integer lengths (`None` unless all_to_all, or if every length is 0 on
/// the up links): `sum bytes x distance / sum capacity x length`.
pub fn exact_length_bound(t: &Topology, c: &Collective, lengths: &[u64]) -> Option<BigRational> {
    if c.kind != CollectiveKind::AllToAll || lengths.len() != t.num_links() {
        return None;
    }
    let big = |r: Rational| BigRational::new(BigInt::from(*r.numer()), BigInt::from(*r.denom()));
    let denominator: BigRational = t
        .links()
        .filter(|(_, l)| l.up)
        .map(|(id, l)| big(rational_from_decimal(l.bandwidth_gbps).unwrap_or_default()) * BigRational::from_integer(lengths[id.index()].into()))
        .sum();
    if denominator.is_zero() {
        return None;
    }
    let mut adj = vec![Vec::new(); t.num_nodes()];
    for (id, l) in t.links().filter(|(_, l)| l.up) {
        adj[l.src.index()].push((id.index(), l.dst.index()));
    }
    // Every rank's distances in parallel; exact sums, so their order does not matter.
    let per_rank: Vec<BigRational> = (0..c.num_ranks())
        .into_par_iter()
        .map(|i| {
            let dist = int_dijkstra(&adj, lengths, c.ranks[i].index());
            if c.is_uniform() {
                // Same bytes everywhere: add distances as integers, multiply once.
                let sum: u128 = (0..c.num_ranks()).filter(|&j| j != i).map(|j| dist[c.ranks[j].index()].unwrap_or(0) as u128).sum();
                big(c.block_size(i, (i + 1) % c.num_ranks())) * BigRational::from_integer(sum.into())
            } else {
                (0..c.num_ranks())
                    .filter(|&j| j != i)
                    .map(|j| big(c.block_size(i, j)) * BigRational::from_integer(dist[c.ranks[j].index()].unwrap_or(0).into()))
                    .sum()
            }
        })
        .collect();
    Some(per_rank.into_iter().sum::<BigRational>() / denominator)
}

/// The exact steps bound of integer lengths (`None` unless all_to_all, or if every length is 0
/// on the up links): a link carries one piece per step, so in T steps `T x sum_e y_e` is at least
/// `sum over required pieces of y-distance` (docs/design/MODEL.md section 6, the flow bound with
/// unit capacities and unit pieces).
pub fn exact_steps_length_bound(t: &Topology, c: &Collective, lengths: &[u64]) -> Option<BigRational> {
    if c.kind != CollectiveKind::AllToAll || lengths.len() != t.num_links() {
        return None;
    }
    let denominator: u128 = t.links().filter(|(_, l)| l.up).map(|(id, _)| lengths[id.index()] as u128).sum();
    if denominator == 0 {
        return None;
    }
    let mut adj = vec![Vec::new(); t.num_nodes()];
    for (id, l) in t.links().filter(|(_, l)| l.up) {
        adj[l.src.index()].push((id.index(), l.dst.index()));
    }
    let numerator: u128 = (0..c.num_ranks())
        .into_par_iter()
        .map(|i| {
            let dist = int_dijkstra(&adj, lengths, c.ranks[i].index());
            let required = |j: usize| j != i && (c.is_uniform() || c.block_size(i, j) > Rational::zero());
            (0..c.num_ranks()).filter(|&j| required(j)).map(|j| dist[c.ranks[j].index()].unwrap_or(0) as u128 * c.pieces as u128).sum::<u128>()
        })
        .sum();
    Some(BigRational::new(numerator.into(), denominator.into()))
}

/// The lengths of a cut: 1 on the up links leaving `nodes` (entering, with `into`), else 0.
fn cut_lengths(t: &Topology, nodes: &[crate::topology::NodeId], into: bool) -> Vec<u64> {
    let u = super::cut::membership(t, nodes, into);
    t.links().map(|(_, l)| u64::from(l.up && u[l.src.index()] && !u[l.dst.index()])).collect()
}

fn int_dijkstra(adj: &[Vec<(usize, usize)>], len: &[u64], s: usize) -> Vec<Option<u64>> {
    let mut dist: Vec<Option<u64>> = vec![None; adj.len()];
    dist[s] = Some(0);
    let mut heap = BinaryHeap::from([Reverse((0u64, s))]);
    while let Some(Reverse((d, v))) = heap.pop() {
        if dist[v].is_some_and(|x| x < d) {
            continue;
        }
        for &(l, w) in &adj[v] {
            let nd = d + len[l];
            if dist[w].is_none_or(|x| nd < x) {
                dist[w] = Some(nd);
                heap.push(Reverse((nd, w)));
            }
        }
    }
    dist
}

/// How often (in phases) the lower bound is evaluated: each evaluation costs three phases' worth
/// of shortest paths (current lengths, and two averages).
const EVAL_EVERY: usize = 4;

/// Rounds float lengths to integers with `2^40` as the largest: fine enough that the rounding
/// costs far less than the method's own gap, small enough that distances fit in `u64`.
fn integer_lengths(y: &[f64], up: &[bool]) -> Vec<u64> {
    let max = y.iter().zip(up).filter(|(_, &u)| u).map(|(v, _)| *v).fold(0.0f64, f64::max);
    y.iter().zip(up).map(|(v, &u)| if u && max > 0.0 { (v / max * (1u64 << 40) as f64).round() as u64 } else { 0 }).collect()
}

/// Whether some link is up: without one no lengths price a link (a lone rank whose links all
/// failed has nothing to move, and the bound is 0 without a flow certificate).
fn has_up_link(t: &Topology) -> bool {
    t.links().any(|(_, l)| l.up)
}

/// Computes the flow bound of an all_to_all (`None` for other kinds: pieces may be copied or
/// combined there, so point-to-point demands overstate what must move).
pub fn flow_bound(t: &Topology, c: &Collective, opts: &FlowOptions) -> Option<FlowBound> {
    if c.kind != CollectiveKind::AllToAll || !has_up_link(t) {
        return None;
    }
    let cut = best_cut(t, c).map(|b| cut_lengths(t, &b.nodes, b.into));
    Some(lengths_search(t, &Net::new(t, c), cut, &|y| exact_length_bound(t, c, y), false, opts))
}

/// The flow bound on the steps of an all_to_all (one piece per link per step, docs/design/MODEL.md
/// section 3): [`flow_bound`] with every capacity 1 and every piece 1, so that [`FlowBound::lower`]
/// is in steps (fractional: the steps are at least its ceiling). `cut` seeds the search with the
/// lengths of a cut (1 on the links leaving `nodes`, or entering them with `into`). The search
/// also stops once the best routing's steps are at most the lower bound's ceiling (no lengths
/// can raise the ceiling then). `None` unless all_to_all.
pub fn steps_flow_bound(t: &Topology, c: &Collective, cut: Option<(&[crate::topology::NodeId], bool)>, opts: &FlowOptions) -> Option<FlowBound> {
    if c.kind != CollectiveKind::AllToAll || !has_up_link(t) {
        return None;
    }
    let cut = cut.map(|(nodes, into)| cut_lengths(t, nodes, into));
    Some(lengths_search(t, &Net::pieces(t, c), cut, &|y| exact_steps_length_bound(t, c, y), true, opts))
}

/// The multiplicative-weights state: lengths, per-phase loads, and the running averages that
/// give upper bounds (averaged routings) and lower bounds (averaged weights).
struct Weights {
    /// Lengths y_e = p_e / c_e of the weights p_e (so that sum_e c_e y_e = sum_e p_e).
    y: Vec<f64>,
    /// The last phase's load per link.
    load: Vec<f64>,
    /// Sums of the phases' loads: since the start, and since the last power-of-two phase (early
    /// phases route badly; dropping them is still a valid average of full routings).
    sum_all: Vec<f64>,
    sum_window: Vec<f64>,
    /// Averages of the normalized weights, likewise: the lower bound is concave in the weights,
    /// so an average is at least as good as the average iterate; it is what the method's
    /// guarantee speaks of, while a single iterate wobbles.
    pbar_all: Vec<f64>,
    pbar_window: Vec<f64>,
    window_start: usize,
    next_window: usize,
    phases: usize,
}

impl Weights {
    fn new(net: &Net) -> Self {
        let m = net.cap.len();
        let y = (0..m).map(|e| if net.up[e] { 1.0 / net.cap[e] } else { 0.0 }).collect();
        let zeros = vec![0.0f64; m];
        Weights {
            y,
            load: zeros.clone(),
            sum_all: zeros.clone(),
            sum_window: zeros.clone(),
            pbar_all: zeros.clone(),
            pbar_window: zeros,
            window_start: 0,
            next_window: 1,
            phases: 0,
        }
    }

    /// One phase: every source routes its demands on shortest paths under the current lengths,
    /// raising the lengths of what it used at once (later sources avoid the links just loaded,
    /// which keeps each step small: a source carries about 1/R of the traffic). Returns the
    /// best upper bound the averaged routings give.
    /// `None` when `deadline` passes before every source has routed (on 4,096 npus a phase takes
    /// seconds): the phase is then not counted.
    fn phase(&mut self, net: &Net, tree: &mut Tree, touched: &mut Vec<(usize, f64)>, epsilon: f64, volume: f64, deadline: Instant) -> Option<f64> {
        if self.phases + 1 == self.next_window {
            self.sum_window.iter_mut().for_each(|x| *x = 0.0);
            self.pbar_window.iter_mut().for_each(|x| *x = 0.0);
            self.window_start = self.phases;
            self.next_window *= 2;
        }
        self.load.iter_mut().for_each(|x| *x = 0.0);
        for (s, row) in &net.sources {
            if Instant::now() >= deadline {
                return None;
            }
            tree.grow(net, &self.y, *s);
            tree.route(row, &net.src_of, touched);
            for &(l, a) in touched.iter() {
                self.load[l] += a;
                self.y[l] *= (epsilon * a / net.cap[l] / volume).exp();
            }
        }
        let psum: f64 = self.y.iter().zip(&net.cap).map(|(v, c)| v * c).sum();
        // Keep the lengths in range; the bound does not depend on their scale.
        self.y.iter_mut().for_each(|v| *v /= psum);
        for (e, c) in net.cap.iter().enumerate() {
            let p = self.y[e] * c;
            self.pbar_all[e] += p;
            self.pbar_window[e] += p;
        }
        self.phases += 1;
        let (mut worst_all, mut worst_window) = (0.0f64, 0.0f64);
        for e in (0..net.cap.len()).filter(|&e| net.up[e]) {
            self.sum_all[e] += self.load[e];
            self.sum_window[e] += self.load[e];
            worst_all = worst_all.max(self.sum_all[e] / net.cap[e]);
            worst_window = worst_window.max(self.sum_window[e] / net.cap[e]);
        }
        Some((worst_all / self.phases as f64).min(worst_window / (self.phases - self.window_start) as f64))
    }

    /// Length functions worth evaluating as lower bounds: the current lengths and the averaged
    /// weights. (Lengths read off the averaged routing, steeply weighted towards its most loaded
    /// links, were tried and never won.)
    fn candidates(&self, net: &Net) -> Vec<Vec<f64>> {
        let mut out = vec![self.y.clone()];
        out.extend([&self.pbar_window, &self.pbar_all].map(|pb| pb.iter().zip(&net.cap).map(|(p, c)| p / c).collect()));
        out
    }
}

/// Multiplicative weights over the lengths of `net` (see the module docs), seeded with every length
/// 1 (the volume bound) and the lengths `cut` (on a faulty torus a bisection next to the failure
/// is often (nearly) the optimum, which the weights approach only slowly); `exact` evaluates
/// integer lengths exactly. With `integral`, only the bound's ceiling matters (steps).
fn lengths_search(
    t: &Topology,
    net: &Net,
    cut: Option<Vec<u64>>,
    exact: &dyn Fn(&[u64]) -> Option<BigRational>,
    integral: bool,
    opts: &FlowOptions,
) -> FlowBound {
    let start = Instant::now();
    let deadline = start + opts.time_limit;
    let ones: Vec<u64> = t.links().map(|(_, l)| u64::from(l.up)).collect();
    let volume = exact(&ones).unwrap_or_else(BigRational::zero);
    let volume_f = volume.to_f64().unwrap_or(0.0);
    if volume_f <= 0.0 || net.sources.is_empty() {
        let (phases, stop, elapsed) = (0, FlowStop::Trivial, start.elapsed());
        return FlowBound { lower: volume, lengths: ones, witness: FlowWitness::Volume, upper: volume_f, gap: 0.0, phases, stop, elapsed };
    }
    let mut seeds: Vec<(BigRational, Vec<u64>, FlowWitness)> = vec![(volume.clone(), ones, FlowWitness::Volume)];
    if let Some((v, y)) = cut.and_then(|y| Some((exact(&y)?, y))) {
        seeds.push((v, y, FlowWitness::Cut));
    }
    let mut best_lower = seeds.iter().map(|s| s.0.to_f64().unwrap_or(0.0)).fold(0.0, f64::max);
    let (mut best_y, mut best_upper) = (None, f64::INFINITY);
    let (mut weights, mut tree, mut touched) = (Weights::new(net), Tree::new(net.n), Vec::new());
    let stop = loop {
        // No time at all: the seeds are the answer (a caller short of time asks for no search).
        if opts.time_limit.is_zero() {
            break FlowStop::TimeLimit;
        }
        let Some(upper) = weights.phase(net, &mut tree, &mut touched, opts.epsilon, volume_f, deadline) else {
            break FlowStop::TimeLimit;
        };
        best_upper = best_upper.min(upper);
        if weights.phases % EVAL_EVERY == 0 {
            for cand in weights.candidates(net) {
                // Floating point here; the best is certified exactly at the end.
                let total: f64 = cand.iter().zip(&net.cap).map(|(v, c)| v * c).sum();
                let Some(distance) = Tree::weighted_distance(net, &cand, deadline) else { break };
                let lower = distance / total;
                if lower > best_lower {
                    best_lower = lower;
                    best_y = Some(cand);
                }
            }
        }
        // The fractional optimum lies in [lower, upper]: for steps, once upper is at most
        // ceil(lower), no lengths give a larger ceiling.
        if best_upper / best_lower - 1.0 <= opts.target_gap || (integral && best_upper <= best_lower.ceil() * (1.0 + 1e-12)) {
            break FlowStop::GapReached;
        }
        if weights.phases >= opts.max_phases {
            break FlowStop::PhaseLimit;
        }
        if start.elapsed() >= opts.time_limit {
            break FlowStop::TimeLimit;
        }
    };
    // Certify: the best float lengths, rounded, recomputed exactly; keep the volume or cut
    // witness if it is at least as good.
    if let Some(ints) = best_y.map(|yb| integer_lengths(&yb, &net.up)) {
        if let Some(v) = exact(&ints) {
            seeds.push((v, ints, FlowWitness::Weights));
        }
    }
    // The first of the best: volume before cut before weights, the simplest witness on a tie.
    let best = seeds.iter().map(|s| &s.0).max().cloned().unwrap_or_else(BigRational::zero);
    let (lower, lengths, witness) = seeds.into_iter().find(|s| s.0 == best).expect("the volume seed is always there");
    let lower_f = lower.to_f64().unwrap_or(f64::NAN);
    let phases = weights.phases;
    FlowBound { upper: best_upper, gap: best_upper / lower_f - 1.0, lower, lengths, witness, phases, stop, elapsed: start.elapsed() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::bounds;
    use crate::topology::{torus, NodeId, TorusParams};

    fn a2a(t: &Topology) -> Collective {
        Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, t).unwrap()
    }

    fn quick() -> FlowOptions {
        FlowOptions { time_limit: Duration::from_secs(20), target_gap: 0.01, max_phases: 1500, epsilon: 0.1 }
    }

    fn big(r: Rational) -> BigRational {
        BigRational::new((*r.numer()).into(), (*r.denom()).into())
    }

    #[test]
    fn healthy_flow_bound_is_the_volume_bound() {
        for dims in [&[5][..], &[8], &[4, 4], &[3, 3, 3], &[4, 4, 4]] {
            let t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
            let c = a2a(&t);
            let f = flow_bound(&t, &c, &quick()).unwrap();
            assert_eq!(f.lower, big(bounds(&t, &c).volume_ns.unwrap()), "{dims:?}");
            assert!(f.gap < 0.05, "{dims:?}: gap {}", f.gap);
        }
    }

    #[test]
    fn faulty_torus_flow_bound_beats_volume() {
        let mut t = torus(&TorusParams::uniform(&[4, 4, 4], 32.0, 100.0)).unwrap();
        for (a, b) in [(0, 1), (1, 0)] {
            t.set_down(t.link_between(NodeId(a), NodeId(b)).unwrap());
        }
        let c = a2a(&t);
        let f = flow_bound(&t, &c, &quick()).unwrap();
        let volume = big(bounds(&t, &c).volume_ns.unwrap());
        assert!(f.witness != FlowWitness::Volume && f.lower > volume, "flow {} vs volume {}", f.lower, volume);
        // In units of block bytes per unit capacity the LP optimum is 33.03 (healthy: 32).
        let unit = (1u64 << 20) as f64 / 64.0 / 32.0;
        let lower = f.lower.to_f64().unwrap() / unit;
        assert!(lower <= 33.04 && f.upper / unit >= 33.02, "lower {lower}, upper {}", f.upper / unit);
    }

    /// The 8x8x8 measurement of the report (release, about 5 minutes):
    /// `cargo test --release --lib flow_8x8x8 -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn flow_8x8x8_faulty() {
        let mut t = torus(&TorusParams::uniform(&[8, 8, 8], 32.0, 100.0)).unwrap();
        for (a, b) in [(0, 1), (1, 0)] {
            t.set_down(t.link_between(NodeId(a), NodeId(b)).unwrap());
        }
        let c = a2a(&t);
        let opts = FlowOptions { time_limit: Duration::from_secs(300), target_gap: 0.02, max_phases: usize::MAX, epsilon: 0.1 };
        let f = flow_bound(&t, &c, &opts).unwrap();
        let unit = (1u64 << 20) as f64 / 512.0 / 32.0;
        let volume = big(bounds(&t, &c).volume_ns.unwrap()).to_f64().unwrap();
        eprintln!(
            "8x8x8 faulty: volume {:.4}, flow lower {:.4} ({:?}), upper {:.4} (units), gap {:.4}, {} phases, {:?}, {:?}",
            volume / unit,
            f.lower.to_f64().unwrap() / unit,
            f.witness,
            f.upper / unit,
            f.gap,
            f.phases,
            f.stop,
            f.elapsed
        );
    }
}
