//! Composition over dimensions: an n-D all-to-all as one one-dimensional all-to-all phase per
//! dimension (docs/design/ALGORITHMS.md, "Many dimensions").
//!
//! In the phase of a chunk on dimension x, every ring (or line) along x runs its plan at the same
//! time as the others: their links are disjoint. Block `v>d` of a ring is every piece of the chunk
//! that sits at the ring's position v and whose destination has x-coordinate d. Where a piece sits
//! follows from the dimensions its chunk has finished: their coordinates are the destination's,
//! the others still the source's. So the pieces of every phase are known without replaying the
//! earlier ones.

use super::ring::{Part, RingKind, RingPlan};
use super::scheduler::Phase;
use super::RingAlgorithm;
use crate::collective::PieceId;
use crate::error::{Error, Result};
use crate::schedule::{Op, Step, Transfer};
use crate::topology::{LinkId, NodeId, Topology, TorusShape};
use std::collections::HashMap;

/// One ring or line along a dimension and the plan it runs.
#[derive(Clone, Debug)]
pub(crate) struct Line {
    /// Its nodes in coordinate order (position p is the node with coordinate p).
    pub nodes: Vec<NodeId>,
    /// Index into [`TorusPlan::plans`] (where they are built).
    pub plan: usize,
    /// What it runs.
    pub kind: RingKind,
}

/// A dimension of size > 1: its lines, and how many sub-steps its phase lasts (its slowest line).
#[derive(Clone, Debug)]
pub(crate) struct Dimension {
    /// The torus dimension.
    pub dim: usize,
    /// Every line along it.
    pub lines: Vec<Line>,
    /// The sub-steps of a phase on it.
    pub len: usize,
}

/// A ring that runs FoldedRing because one of its cables is down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FoldedRing {
    /// The torus dimension of the ring.
    pub dim: usize,
    /// Its nodes in coordinate order.
    pub nodes: Vec<NodeId>,
    /// The failed cable.
    pub cable: (NodeId, NodeId),
}

/// What every line of a torus runs, given the algorithm and the faults.
#[derive(Clone, Debug)]
pub(crate) struct TorusPlan {
    /// The dimensions of size > 1, in order.
    pub dims: Vec<Dimension>,
    /// The distinct all-to-all plans (healthy rings of one dimension share one); empty, as is
    /// every dimension's `len`, when built for a gathering kind.
    pub plans: Vec<RingPlan>,
    /// The rings that fold around a failed cable.
    pub folded: Vec<FoldedRing>,
}

/// Whether both directions of the cable between two nodes are up.
pub(super) fn cable_up(topo: &Topology, a: NodeId, b: NodeId) -> bool {
    let up = |x, y| topo.link_between(x, y).is_some_and(|l| topo.link(l).up);
    up(a, b) && up(b, a)
}

/// The failed cables of a line of nodes: cable c joins positions c and c + 1 (mod n on a ring).
pub(super) fn down_cables(topo: &Topology, nodes: &[NodeId], ring: bool) -> Vec<usize> {
    let n = nodes.len();
    let cables = if ring { n } else { n - 1 };
    (0..cables).filter(|&c| !cable_up(topo, nodes[c], nodes[(c + 1) % n])).collect()
}

/// The nodes' names, for messages.
pub(super) fn names(topo: &Topology, nodes: &[NodeId]) -> String {
    nodes.iter().map(|&n| topo.node(n).name.as_str()).collect::<Vec<_>>().join(" ")
}

impl TorusPlan {
    /// Chooses each line's plan: lines (no wrap, or two nodes) route along the line; healthy
    /// rings run `algorithm` (HalfRing when it is FoldedRing); a ring with one failed cable folds
    /// around it when `algorithm` is FoldedRing. A failed cable in a line, or two in a ring, cut
    /// it: nothing one-dimensional can run there. Ring and HalfRing refuse a ring with a failed
    /// cable as they refuse a mesh line (it is one); `all_to_all` adds MATE to the message's
    /// remedies on a torus of two or more dimensions and builds the all-to-all sub-step plans.
    pub fn new(topo: &Topology, shape: &TorusShape, algorithm: RingAlgorithm, all_to_all: bool) -> Result<Self> {
        let mut plans = Vec::new();
        let mut index: HashMap<(RingKind, usize), usize> = HashMap::new();
        let mut dims = Vec::new();
        let mut folded = Vec::new();
        for dim in (0..shape.ndims()).filter(|&d| shape.dims[d] > 1) {
            let n = shape.dims[dim];
            let ring = shape.is_ring(dim);
            // Ring and HalfRing send blocks both ways round: a line of three or more npus lacks
            // the wrap-around cable they need (two npus are one cable either way).
            if !shape.wrap[dim] && n > 2 && algorithm != RingAlgorithm::FoldedRing {
                return Err(Error::infeasible(format!(
                    "dimension {dim} is a line of {n} npus without wrap-around: {} needs the wrap-around cable of a ring (it sends blocks \
                     round both ways); foldedring runs on a line (every block the only way along it)",
                    algorithm.as_str()
                )));
            }
            let mut lines = Vec::new();
            for start in (0..shape.num_nodes() as u32).map(NodeId).filter(|&v| shape.coord_in(v, dim) == 0) {
                let nodes = shape.line(start, dim);
                let down = down_cables(topo, &nodes, ring);
                let cable_text = |c: usize| format!("{}-{}", topo.node(nodes[c]).name, topo.node(nodes[(c + 1) % n]).name);
                let kind = match (ring, down.as_slice()) {
                    (false, []) => RingKind::Line,
                    (false, [c, ..]) => {
                        return Err(Error::infeasible(format!(
                            "the line along dimension {dim} through {} ({}) has its cable {} down: a line without wrap-around has no other way \
                             between its two sides, so the phase on dimension {dim} cannot run",
                            topo.node(start).name,
                            names(topo, &nodes),
                            cable_text(*c)
                        )))
                    }
                    (true, []) => match algorithm {
                        RingAlgorithm::Ring => RingKind::Ring,
                        RingAlgorithm::HalfRing | RingAlgorithm::FoldedRing => RingKind::HalfRing,
                    },
                    (true, [c]) if algorithm != RingAlgorithm::FoldedRing => {
                        let used = shape.dims.iter().filter(|&&d| d > 1).count();
                        let mate = if all_to_all && used > 1 {
                            "; or --scheduler mate|matee with halfring, which sends around it through the healthy parallel rings"
                        } else {
                            ""
                        };
                        return Err(Error::infeasible(format!(
                            "the ring along dimension {dim} through {} ({}) has its cable {} down: {} sends blocks round both ways and needs \
                             the wrap-around, and a ring with a failed cable is a line; foldedring folds this ring around the failed cable \
                             (and runs HalfRing in the healthy rings){mate}",
                            topo.node(start).name,
                            names(topo, &nodes),
                            cable_text(*c),
                            algorithm.as_str()
                        )));
                    }
                    (true, [c]) => {
                        folded.push(FoldedRing { dim, nodes: nodes.clone(), cable: (nodes[*c], nodes[(c + 1) % n]) });
                        RingKind::Folded { failed: *c }
                    }
                    (true, many) => {
                        let list: Vec<String> = many.iter().map(|&c| cable_text(c)).collect();
                        return Err(Error::infeasible(format!(
                            "the ring along dimension {dim} through {} ({}) has {} failed cables ({}): it falls apart into lines, and \
                             FoldedRing tolerates only one failed cable per ring",
                            topo.node(start).name,
                            names(topo, &nodes),
                            many.len(),
                            list.join(", ")
                        )));
                    }
                };
                let distinct = index.len();
                let plan = *index.entry((kind, n)).or_insert_with(|| {
                    // A ring's all-to-all plan holds N^3/2 moves (a ring of 256: 0.8 GB), which
                    // the gathering kinds, moving whole units (gather.rs), never read.
                    if all_to_all {
                        plans.push(RingPlan::new(kind, n));
                    }
                    distinct
                });
                lines.push(Line { nodes, plan, kind });
            }
            let len = lines.iter().filter_map(|l| plans.get(l.plan)).map(RingPlan::len).max().unwrap_or(0);
            dims.push(Dimension { dim, lines, len });
        }
        Ok(TorusPlan { dims, plans, folded })
    }

    /// Whether some line moves half blocks, so that every block must be cut into two halves.
    pub fn splits_blocks(&self) -> bool {
        self.plans.iter().any(RingPlan::splits_blocks)
    }

    /// The steps of every phase, handed over one by one as they are built: only the pieces of the
    /// phases of one slot are held, never the whole schedule. `halves` is how many part indices
    /// each chunk has (a multiple of 2 where some line moves half blocks: the first half of them
    /// is a block's first half); phases in one slot are merged step by step. Where the phases of a
    /// slot run the same plans (equal radix, no folded ring), sub-step s of each runs in step s.
    /// Otherwise (unequal radix, or a folded ring) their sub-steps are laid out over the slot's
    /// steps by [`spread`], so that the slot lasts what its slowest phase does.
    pub fn emit_into(&self, topo: &Topology, shape: &TorusShape, phases: &[Phase], halves: usize, out: &mut dyn FnMut(Step) -> Result<()>) -> Result<()> {
        let slots = phases.iter().map(|p| p.slot + 1).max().unwrap_or(0);
        let coords: Vec<Vec<usize>> = (0..shape.num_nodes() as u32).map(|v| shape.coord(NodeId(v))).collect();
        // Dimensions whose lines run the same plans move the same loads sub-step by sub-step.
        let plans_of = |d: usize| {
            let mut p: Vec<usize> = self.dims[d].lines.iter().map(|l| l.plan).collect();
            p.sort_unstable();
            p.dedup();
            p
        };
        for slot in 0..slots {
            let here: Vec<&Phase> = phases.iter().filter(|p| p.slot == slot).collect();
            let len = here.iter().map(|p| self.dims[p.dim].len).max().unwrap_or(0);
            let groups: Vec<Vec<Vec<PieceId>>> = here.iter().map(|p| self.phase_groups(shape, &coords, p, halves)).collect();
            if here.windows(2).all(|w| plans_of(w[0].dim) == plans_of(w[1].dim)) {
                for s in 0..len {
                    let mut step = Step::default();
                    for (p, g) in here.iter().zip(&groups) {
                        self.emit_substep(topo, shape, p, g, halves, s, &mut step)?;
                    }
                    out(step)?;
                }
                continue;
            }
            let mut subs = Vec::with_capacity(here.len());
            for (p, g) in here.iter().zip(&groups) {
                let mut phase = Vec::with_capacity(self.dims[p.dim].len);
                for s in 0..self.dims[p.dim].len {
                    let mut step = Step::default();
                    self.emit_substep(topo, shape, p, g, halves, s, &mut step)?;
                    phase.push(step);
                }
                subs.push(phase);
            }
            for step in spread(topo, subs, len) {
                out(step)?;
            }
        }
        Ok(())
    }

    /// The pieces of one chunk's phase on one dimension, by block: entry `(node * n + d) * halves
    /// + h` holds half h of the block at `node` bound for x-coordinate d (n the dimension's size).
    fn phase_groups(&self, shape: &TorusShape, coords: &[Vec<usize>], phase: &Phase, halves: usize) -> Vec<Vec<PieceId>> {
        let dim = &self.dims[phase.dim];
        let (x, n) = (dim.dim, shape.dims[dim.dim]);
        let mut finished = vec![false; shape.ndims()];
        for &d in &phase.done {
            finished[self.dims[d].dim] = true;
        }
        let strides: Vec<usize> = (0..shape.ndims()).map(|d| shape.stride(d)).collect();
        let group = |node: usize, d: usize, h: usize| (node * n + d) * halves + h;
        let mut groups: Vec<Vec<PieceId>> = vec![Vec::new(); coords.len() * n * halves];
        for (i, ci) in coords.iter().enumerate() {
            for (j, cj) in coords.iter().enumerate() {
                if i == j || ci[x] == cj[x] {
                    continue;
                }
                let at: usize = (0..shape.ndims()).map(|d| (if finished[d] { cj[d] } else { ci[d] }) * strides[d]).sum();
                for h in 0..halves {
                    let k = (phase.chunk * halves + h) as u32;
                    groups[group(at, cj[x], h)].push(PieceId::a2a(i as u32, j as u32, k));
                }
            }
        }
        groups
    }

    /// Sub-step `s` of one chunk's phase (nothing once the phase is over), appended to `step`.
    #[allow(clippy::too_many_arguments)]
    fn emit_substep(
        &self,
        topo: &Topology,
        shape: &TorusShape,
        phase: &Phase,
        groups: &[Vec<PieceId>],
        halves: usize,
        s: usize,
        step: &mut Step,
    ) -> Result<()> {
        let dim = &self.dims[phase.dim];
        let n = shape.dims[dim.dim];
        for line in &dim.lines {
            let Some(moves) = self.plans[line.plan].substeps().get(s) else { continue };
            for m in moves {
                let at = line.nodes[m.origin].index();
                // A half block is the first or second half of the chunk's parts.
                let parts = match m.part {
                    Part::Whole => 0..halves,
                    Part::First => 0..halves / 2,
                    Part::Second => halves / 2..halves,
                };
                debug_assert!(halves % 2 == 0 || m.part == Part::Whole, "a half block moves but blocks are not cut in halves");
                let pieces: Vec<PieceId> = parts.flat_map(|h| groups[(at * n + m.dest) * halves + h].iter().copied()).collect();
                if pieces.is_empty() {
                    continue;
                }
                let path = m.path.windows(2).map(|w| link(topo, line.nodes[w[0]], line.nodes[w[1]])).collect::<Result<Vec<_>>>()?;
                step.transfers.push(Transfer { path, op: Op::Copy, pieces });
            }
        }
        Ok(())
    }
}

/// The steps of one slot from its phases' sub-steps (`subs`, a phase's sub-steps in order, at
/// most `len` of them), the fastest of four layouts by the slot's estimated time (per step, its
/// busiest transfer's pieces over its bandwidth), the fewest steps among equally fast ones. A
/// layout gives each sub-step of a phase a range of consecutive steps, and each step of the range
/// a weight: the sub-step's transfers are cut there in proportion (each transfer's pieces split in
/// order).
///
/// - aligned: sub-step s of every phase in step s alone (a phase with fewer sub-steps leaves the
///   last steps to the others);
/// - even: a phase with fewer sub-steps than `len` cuts its sub-steps into equal parts, as many
///   for a sub-step as keep its largest part least;
/// - weighted: the steps last what the slot's longest phases take there; a shorter phase's
///   sub-steps take the ranges that leave least of them over what their steps last, cut in
///   proportion to it. On a 3x5 torus the 3-ring's one sub-step then runs beside both of the
///   5-ring's, and the slot takes the slower ring's time, not the sum of the 3-ring's and part
///   of the 5-ring's;
/// - clocked ([`clocked_layout`]): the slowest phase runs at full rate, the others fill its steps,
///   and a step is cut in two where a sub-step would otherwise not fit: the slot lasts exactly
///   what its slowest phase does, with a few more steps where the sub-steps do not line up (4x5:
///   the 4-ring's first sub-step, S/8 per link, is longer than the 5-ring's S/10 sub-steps; one
///   more step per slot).
///
/// A sub-step's parts run in consecutive steps before the next sub-step's, and phases of one
/// slot move different chunks, so causality holds; each link still carries one transfer per step.
pub(super) fn spread(topo: &Topology, subs: Vec<Vec<Step>>, len: usize) -> Vec<Step> {
    let load = |step: &Step| step.transfers.iter().map(|t| t.pieces.len() as f64 / topo.link(t.path[0]).bandwidth_gbps).fold(0.0, f64::max);
    let loads: Vec<Vec<f64>> = subs.iter().map(|phase| phase.iter().map(load).collect()).collect();
    // What the steps last by the phases that have all `len` sub-steps.
    let full: Vec<f64> = (0..len).map(|g| loads.iter().filter(|w| w.len() == len).map(|w| w[g]).fold(0.0, f64::max)).collect();
    let aligned: Vec<Layout> = loads.iter().map(|w| (0..w.len()).map(|i| (i, i + 1, Vec::new())).collect()).collect();
    let even: Vec<Layout> = loads
        .iter()
        .map(|w| {
            let mut n = vec![1usize; w.len()];
            for _ in w.len()..len {
                let (i, _) = w.iter().zip(&n).enumerate().fold((0, f64::MIN), |b, (i, (x, &k))| if x / k as f64 > b.1 { (i, x / k as f64) } else { b });
                n[i] += 1;
            }
            let mut start = 0;
            n.iter()
                .map(|&k| {
                    start += k;
                    (start - k, start, Vec::new())
                })
                .collect()
        })
        .collect();
    // A phase with `len` sub-steps gets one step each, as aligned. The weighted layout's dynamic
    // program is left out where it would take longer than the schedule is worth.
    let weighted: Option<Vec<Layout>> =
        loads.iter().all(|w| weighted_work(w.len(), len) <= MAX_WEIGHTED_WORK).then(|| loads.iter().map(|w| weighted_layout(w, &full)).collect());
    let (steps, clocked) = clocked_layout(&loads);
    let estimate = |layout: &[Layout], steps: usize| -> f64 {
        (0..steps).map(|g| layout.iter().zip(&loads).filter_map(|(l, w)| part_at(l, g).map(|(i, lo, hi)| w[i] * (hi - lo))).fold(0.0, f64::max)).sum()
    };
    let candidates: Vec<(usize, Vec<Layout>)> =
        [Some((len, aligned)), Some((len, even)), weighted.map(|w| (len, w)), Some((steps, clocked))].into_iter().flatten().collect();
    let times: Vec<f64> = candidates.iter().map(|(n, l)| estimate(l, *n)).collect();
    let least = times.iter().copied().fold(f64::INFINITY, f64::min);
    // Equally fast within rounding: the first, which has the fewest steps.
    let pick = times.iter().position(|&t| t <= least * (1.0 + 1e-9)).expect("three or four layouts");
    let (steps, best) = &candidates[pick];
    (0..*steps)
        .map(|g| {
            let mut step = Step::default();
            for (phase, layout) in subs.iter().zip(best) {
                let Some((i, lo, hi)) = part_at(layout, g) else { continue };
                for t in &phase[i].transfers {
                    let m = t.pieces.len() as f64;
                    let (a, b) = ((lo * m).round() as usize, (hi * m).round() as usize);
                    if a < b {
                        step.transfers.push(Transfer { path: t.path.clone(), op: t.op, pieces: t.pieces[a..b].to_vec() });
                    }
                }
            }
            step
        })
        .collect()
}

/// The clocked layout of phases with sub-step loads `loads`, and its number of steps. The phase
/// with the most load (the clock) runs at full rate: its sub-steps end at the step boundaries.
/// Every other phase, in turn, ends each sub-step at the first boundary that leaves room for the
/// rest of it before the clock ends, or, where none does, at a new boundary where the sub-step
/// ends at full rate (which cuts a step in two for the phases placed so far). A sub-step fills its
/// steps from the first on, so with equal bandwidths every part is whole pieces.
fn clocked_layout(loads: &[Vec<f64>]) -> (usize, Vec<Layout>) {
    let totals: Vec<f64> = loads.iter().map(|w| w.iter().sum()).collect();
    let Some(clock) = (0..loads.len()).max_by(|&a, &b| totals[a].total_cmp(&totals[b])) else { return (0, Vec::new()) };
    let end = totals[clock];
    let eps = end * 1e-9;
    // Step boundaries after 0, ascending; the last is `end`.
    let mut bounds: Vec<f64> = Vec::new();
    let mut t = 0.0;
    for &w in &loads[clock] {
        t += w;
        if w > 0.0 {
            bounds.push(t);
        }
    }
    // Per phase and sub-step, where it starts and ends (`None`: nothing to move).
    let mut spans: Vec<Vec<Option<(f64, f64)>>> = vec![Vec::new(); loads.len()];
    let mut order: Vec<usize> = (0..loads.len()).collect();
    order.sort_by(|&a, &b| totals[b].total_cmp(&totals[a]));
    for p in order {
        let mut t = 0.0;
        let mut rest = totals[p];
        for &w in &loads[p] {
            rest -= w;
            if w <= 0.0 {
                spans[p].push(None);
                continue;
            }
            let at = bounds.partition_point(|&b| b < t + w - eps);
            let stop = match bounds.get(at) {
                Some(&b) if (p == clock || rest <= end - b + eps) => b,
                _ => {
                    bounds.insert(at, t + w);
                    t + w
                }
            };
            spans[p].push(Some((t, stop)));
            t = stop;
        }
    }
    let index = |x: f64| bounds.partition_point(|&b| b < x - eps);
    let starts: Vec<f64> = std::iter::once(0.0).chain(bounds.iter().copied()).collect();
    let layouts = loads
        .iter()
        .zip(&spans)
        .map(|(w, spans)| {
            w.iter()
                .zip(spans)
                .map(|(&w, span)| {
                    let Some((lo, hi)) = *span else { return (0, 0, Vec::new()) };
                    // Step g runs from starts[g] to bounds[g]; the sub-step starts in the step
                    // after the boundary `lo` (step 0 at 0) and ends in the step ending at `hi`.
                    let (a, b) = (if lo <= eps { 0 } else { index(lo) + 1 }, index(hi) + 1);
                    let mut left = w;
                    let weights = (a..b)
                        .map(|g| {
                            let part = left.min(bounds[g] - starts[g]).max(0.0);
                            left -= part;
                            part
                        })
                        .collect::<Vec<f64>>();
                    // Rounding leaves a sliver over: the last step takes it.
                    let mut weights = weights;
                    if let Some(last) = weights.last_mut() {
                        *last += left.max(0.0);
                    }
                    (a, b, weights)
                })
                .collect()
        })
        .collect();
    (bounds.len(), layouts)
}

/// Per sub-step of a phase: its first step, the step after its last, and the weights of its steps
/// (empty: equal).
type Layout = Vec<(usize, usize, Vec<f64>)>;

/// The sub-step of `layout` in step `g`, with the share of its pieces that runs there (from `lo`
/// to `hi` of 1), if any.
fn part_at(layout: &Layout, g: usize) -> Option<(usize, f64, f64)> {
    let (i, (a, b, weights)) = layout.iter().enumerate().find(|(_, (a, b, _))| (*a..*b).contains(&g))?;
    let weight = |h: usize| if weights.is_empty() { 1.0 } else { weights[h - a] };
    // Positive: equal weights, or the longest phases' loads where they sum above 0.
    let total: f64 = (*a..*b).map(weight).sum();
    let before: f64 = (*a..g).map(weight).sum();
    Some((i, before / total, (before + weight(g)) / total))
}

/// About twice the (sub-step, end, start) triples [`weighted_layout`] visits for `k` sub-steps
/// over `len` steps (each of the `k` rows visits `free (free + 1) / 2`).
fn weighted_work(k: usize, len: usize) -> u128 {
    let free = (len + 1).saturating_sub(k) as u128;
    k as u128 * free * free
}

/// The most [`weighted_work`] a layout is computed with: 0.35 s of a 4x168 mesh's DimRotation
/// all-to-all (19 s in all). A 4x255 mesh lays the 4-line's 4 sub-steps over the 255-line's
/// 16,256 (5*10^8 triples; before prefix sums each also summed its range, and `synthesize`
/// there did not end in 200 s).
const MAX_WEIGHTED_WORK: u128 = 200_000_000;

/// A shorter phase's sub-steps (loads `w`) over steps lasting `full`: consecutive ranges, at least
/// one step each, that leave least load over what the ranges last (dynamic programming over the
/// first i sub-steps in the first g steps), each cut in proportion to its steps.
fn weighted_layout(w: &[f64], full: &[f64]) -> Layout {
    let (k, len) = (w.len(), full.len());
    let mut sum = vec![0.0; len + 1];
    for (g, &x) in full.iter().enumerate() {
        sum[g + 1] = sum[g] + x;
    }
    let over = |i: usize, a: usize, b: usize| (w[i] - (sum[b] - sum[a])).max(0.0);
    // best[i][g]: least excess of the first i sub-steps in the first g steps; from[i][g] where
    // sub-step i - 1 starts.
    let mut best = vec![vec![f64::INFINITY; len + 1]; k + 1];
    let mut from = vec![vec![0usize; len + 1]; k + 1];
    best[0][0] = 0.0;
    for i in 1..=k {
        for g in i..=len - (k - i) {
            for a in i - 1..g {
                let v = best[i - 1][a] + over(i - 1, a, g);
                if v < best[i][g] {
                    (best[i][g], from[i][g]) = (v, a);
                }
            }
        }
    }
    let mut layout = vec![(0, 0, Vec::new()); k];
    let mut g = len;
    for i in (1..=k).rev() {
        let a = from[i][g];
        // Steps that last nothing by the longest phases still take an even share.
        let weights = if full[a..g].iter().sum::<f64>() > 0.0 { full[a..g].to_vec() } else { Vec::new() };
        layout[i - 1] = (a, g, weights);
        g = a;
    }
    layout
}

/// The up link from `a` to `b`. The plans only use cables found up, so a miss is a bug; it is
/// still reported rather than written into a schedule the verifier would reject.
pub(super) fn link(topo: &Topology, a: NodeId, b: NodeId) -> Result<LinkId> {
    match topo.link_between(a, b) {
        Some(l) if topo.link(l).up => Ok(l),
        _ => Err(Error::internal(format!("no up link {}->{} for a planned hop", topo.node(a).name, topo.node(b).name))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, FaultPattern, TorusParams};

    fn faulty(dims: &[usize], cables: &[(u32, u32)]) -> Topology {
        let mut t = torus(&TorusParams::uniform(dims, 10.0, 0.0)).unwrap();
        let f = FaultPattern { cables: cables.iter().map(|&(a, b)| (NodeId(a), NodeId(b))).collect(), ..Default::default() };
        f.apply(&mut t).unwrap();
        t
    }

    #[test]
    fn lines_get_their_plans() {
        let t = faulty(&[4, 4], &[(0, 1)]);
        let p = TorusPlan::new(&t, t.torus_shape().unwrap(), RingAlgorithm::FoldedRing, true).unwrap();
        assert_eq!(p.dims.len(), 2);
        assert!(p.dims.iter().all(|d| d.lines.len() == 4));
        // The row through (0,0) folds; the other rows and every column keep HalfRing.
        assert_eq!(p.folded, vec![FoldedRing { dim: 0, nodes: (0..4).map(NodeId).collect(), cable: (NodeId(0), NodeId(1)) }]);
        assert!(p.dims[0].lines[1..].iter().chain(&p.dims[1].lines).all(|l| l.kind == RingKind::HalfRing));
        assert_eq!((p.dims[0].len, p.dims[1].len), (6, RingPlan::new(RingKind::HalfRing, 4).len()));
        assert_eq!(p.plans.len(), 2);

        let mut params = TorusParams::uniform(&[4, 1, 2], 10.0, 0.0);
        params.wrap = vec![false, true, true];
        let t = torus(&params).unwrap();
        let p = TorusPlan::new(&t, t.torus_shape().unwrap(), RingAlgorithm::FoldedRing, true).unwrap();
        assert_eq!(p.dims.iter().map(|d| (d.dim, d.len)).collect::<Vec<_>>(), vec![(0, 4), (2, 1)]);
        assert!(!p.splits_blocks());

        // The gathering kinds read the lines' kinds only: no all-to-all plan is built (on a ring
        // of 1004 npus one took more than this machine's 24 GB).
        let t = faulty(&[6, 5], &[(0, 1)]);
        let p = TorusPlan::new(&t, t.torus_shape().unwrap(), RingAlgorithm::FoldedRing, false).unwrap();
        assert!(p.plans.is_empty() && p.dims.iter().all(|d| d.len == 0));
        assert_eq!(p.dims[0].lines[0].kind, RingKind::Folded { failed: 0 });
    }

    /// The weighted layout leaves the least excess of any layout of consecutive ranges (every one
    /// enumerated, up to 4 sub-steps over 8 steps).
    #[test]
    fn weighted_layout_leaves_least_excess() {
        let excess = |w: &[f64], full: &[f64], ends: &[usize]| {
            let mut a = 0;
            let mut total = 0.0;
            for (i, &b) in ends.iter().enumerate() {
                total += (w[i] - full[a..b].iter().sum::<f64>()).max(0.0);
                a = b;
            }
            total
        };
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / (1u64 << 31) as f64
        };
        for len in 1..=8 {
            for k in 1..=len.min(4) {
                let w: Vec<f64> = (0..k).map(|_| 3.0 * next()).collect();
                let full: Vec<f64> = (0..len).map(|_| if next() < 0.2 { 0.0 } else { next() }).collect();
                // Every choice of k - 1 cut points among the len - 1 inner step boundaries.
                let best = (0u32..1 << (len - 1))
                    .filter(|m| m.count_ones() as usize == k - 1)
                    .map(|m| {
                        let ends: Vec<usize> = (1..len).filter(|b| m >> (b - 1) & 1 == 1).chain([len]).collect();
                        excess(&w, &full, &ends)
                    })
                    .fold(f64::INFINITY, f64::min);
                let layout = weighted_layout(&w, &full);
                let ends: Vec<usize> = layout.iter().map(|&(_, b, _)| b).collect();
                assert!(layout.iter().all(|&(a, b, _)| a < b) && ends.last() == Some(&len), "{layout:?}");
                assert!((excess(&w, &full, &ends) - best).abs() < 1e-9, "k {k} len {len}: {} against {best}", excess(&w, &full, &ends));
            }
        }
        assert!(weighted_work(4, 16_256) > MAX_WEIGHTED_WORK && weighted_work(4, 1024) < MAX_WEIGHTED_WORK);
    }

    /// Ring and HalfRing need wrap-around (a line of three or more npus is refused as infeasible,
    /// naming the dimension); FoldedRing runs on a line, and a dimension of two npus is one cable
    /// whatever the wrap.
    #[test]
    fn ring_and_half_ring_need_wrap_around() {
        let mut params = TorusParams::uniform(&[5], 10.0, 0.0);
        params.wrap = vec![false];
        let t = torus(&params).unwrap();
        for a in [RingAlgorithm::Ring, RingAlgorithm::HalfRing] {
            let e = TorusPlan::new(&t, t.torus_shape().unwrap(), a, true).unwrap_err();
            assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible);
            assert!(e.message().contains("dimension 0 is a line of 5 npus without wrap-around"), "{e}");
            assert!(e.message().contains(a.as_str()) && e.message().contains("foldedring runs on a line"), "{e}");
        }
        assert_eq!(TorusPlan::new(&t, t.torus_shape().unwrap(), RingAlgorithm::FoldedRing, true).unwrap().dims[0].lines[0].kind, RingKind::Line);
        let mut params = TorusParams::uniform(&[2, 3], 10.0, 0.0);
        params.wrap = vec![false, true];
        let t = torus(&params).unwrap();
        assert!(TorusPlan::new(&t, t.torus_shape().unwrap(), RingAlgorithm::Ring, true).is_ok());
    }

    /// A ring with a failed cable is a line: Ring and HalfRing refuse it (they ran FoldedRing
    /// there unasked), naming the ring and the cable and pointing to foldedring (and, for an
    /// all-to-all of two or more dimensions, to MATE).
    #[test]
    fn ring_and_half_ring_refuse_a_ring_with_a_failed_cable() {
        for (dims, all_to_all, mate) in [(&[5][..], true, false), (&[4, 4][..], true, true), (&[4, 4][..], false, false)] {
            let t = faulty(dims, &[(1, 2)]);
            for a in [RingAlgorithm::Ring, RingAlgorithm::HalfRing] {
                let e = TorusPlan::new(&t, t.torus_shape().unwrap(), a, all_to_all).unwrap_err();
                assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible, "{e}");
                let m = e.message();
                assert!(m.contains("ring along dimension 0 through (0") && m.contains("cable (1") && m.contains("(2") && m.contains(" down"), "{e}");
                assert!(m.contains(a.as_str()) && m.contains("foldedring"), "{e}");
                assert_eq!(m.contains("--scheduler mate|matee"), mate, "{e}");
            }
            assert_eq!(TorusPlan::new(&t, t.torus_shape().unwrap(), RingAlgorithm::FoldedRing, all_to_all).unwrap().folded.len(), 1);
        }
    }

    #[test]
    fn cut_lines_and_rings_are_named() {
        let t = faulty(&[4, 4], &[(0, 1), (2, 3)]);
        let e = TorusPlan::new(&t, t.torus_shape().unwrap(), RingAlgorithm::FoldedRing, true).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible);
        assert!(e.message().contains("ring along dimension 0 through (0,0)"), "{e}");
        assert!(e.message().contains("(0,0)-(1,0), (2,0)-(3,0)"), "{e}");

        let mut params = TorusParams::uniform(&[3, 3], 10.0, 0.0);
        params.wrap = vec![true, false];
        let mut t = torus(&params).unwrap();
        FaultPattern { cables: vec![(NodeId(4), NodeId(7))], ..Default::default() }.apply(&mut t).unwrap();
        let e = TorusPlan::new(&t, t.torus_shape().unwrap(), RingAlgorithm::FoldedRing, true).unwrap_err();
        assert!(e.message().contains("line along dimension 1 through (1,0)"), "{e}");
        assert!(e.message().contains("(1,1)-(1,2) down"), "{e}");
    }
}
