//! Pipelined all_reduce over a forest of trees: the reduce-scatter up each piece's tree and the
//! all-gather back down it, scheduled as one list of tasks, so that the all-gather of the pieces
//! reduced first runs in the steps where others are still being reduced.
//!
//! The layered trees ([`super`]) run the halves one after the other, every piece one level
//! per step. Around a failed cable a rank with five links sends every contribution it does not
//! root in the first half and receives every final value in the second, so its out-links are the
//! busiest of the first half and its in-links of the second. Here every (hop, step) carries one op
//! (rule 2 of docs/design/MODEL.md section 4: a transfer has one op), chosen per hop and step, so
//! in one step a hop whose ready work is the reduce-scatter's reduces while another copies.
//!
//! **Tasks.** For piece q and rank v other than the root: the reduce of v's merged value to its
//! parent (ready once every child's reduce has arrived) and the copy of the final value from the
//! parent to v (ready once the parent holds it: at the root, once every reduce into it arrived).
//! Every step each hop takes up to `budget` ready tasks of one op, those with the longest chain of
//! tasks behind them first (a tree's reduces rank above its copies, and above the copies of trees
//! as tall); a hop whose links another transfer of the step uses waits. The budget trades steps
//! (latency) against the pieces a step's busiest hop carries; [`fastest`] tries several.
//!
//! **Forward-backward improvement.** A list schedule's order is then refined once: the tasks are
//! list-scheduled backward in time (a task once every task that waits for it is placed), those
//! that ended last in the forward schedule first, and forward again in the order the backward pass
//! left them (those it placed earliest in time first), the standard improvement of list schedules
//! of precedence-constrained tasks on shared resources. [`fastest`] keeps the better of the two at
//! every budget. More rounds gained nothing on 4x4x4; breaking the backward pass's ties by the
//! levels behind a task changed nothing either.
//!
//! Measured (4x4x4, one failed cable, 8 MiB, 24 pieces per block, the free-root forest): 94.6 us
//! with cable (0,0,0)-(1,0,0) down and 96.7 us with another cable of (0,0,0), at a budget of 16
//! pieces (35 steps): 8.7% and 11.1% above the certified bound, against 101.4 us (16.5%)
//! layered. Every hop carries its budget in nearly every step but those where the reduce-scatter
//! runs out and the all-gather has not yet spread: ordering the tasks by a due time staggered
//! over the pieces (so that the halves overlap more) or choosing each hop's op by which fills the
//! step left hops idle and took 107-160 us; trees balanced for each hop's total over both halves
//! (86.7 us of load on the busiest hop, the bound's) took 111-121 us, since their all-gather loads
//! other hops than their reduce-scatter. [`super::tree_steps`] pipelines the forests of both
//! plans and keeps the fastest of them and the layered halves: on 5x5x5 the free roots' forest,
//! whose layered halves are the slower, pipelines to 102.7 us (17.3%, layered 106.4 us); on 8x8x8
//! neither gains. With the forward-backward round (2026-12-02): 4x4x4 93.9 us (7.8%; the test's
//! cable: 96.7 -> 93.9 us), 5x5x5 101.9 us (16.4%), 3x3x3 unchanged (10.3%).
//!
//! **Steps cut short.** With every step at the budget, the turn from the reduce-scatter to the
//! all-gather cost about one and a half full steps: at 24 pieces per block on 4x4x4, two steps
//! whose hops carried 61% and 78% of the budget on average while the busiest carried all of it,
//! since a copy is ready only once its piece's reduce-scatter has ended, and it then needs a step
//! per level to spread. [`fastest`] therefore also schedules each budget with steps cut short
//! ([`step_budget`]): a step carries the count of pieces that moves the most per unit of its
//! time (its busiest hop's pieces plus one latency), the budget where every hop has it ready and
//! fewer where few hops have work, so that the turn and the last copies take short steps. 4x4x4
//! with a failed cable: 93.9 -> 92.7 us (7.80% -> 6.44%, 29 steps at up to 32 pieces against 34
//! at 16); 3x3x3 10.3% -> 7.15% (at 24 pieces per block, [`super::pipelined_piece_count`]); 5x5x5
//! 16.4% -> 7.30% (at 24 pieces per block; at its former 3, 15.3%); on 8x8x8 (at 6 and 12
//! pieces per block, beyond the size the portfolio pipelined then) it stayed behind the layered
//! halves (108 us against 107.5 us).
//!
//! **The last steps by what is left** (2026-12-03). Cut by rate alone, the end of the 92.7 us
//! schedule took nine steps for the last 2% of the pieces: most hops had one or two copies ready,
//! so the steps were cut to that, while a few hops still had ten or more to carry, one or two per
//! step. [`fastest`] now also tries each budget with the last tenth of the tasks' steps cut to at
//! least the count that makes the step plus a bound on the time after it shortest (`Ahead`: the
//! hop with the most pieces left after the step carries them one after another, each step with
//! its latency): 92.7 -> 91.9 us, the last copies in one step. With the free roots' trees balanced
//! by hop totals (`super`, "Free roots"; no hop above the average), 4x4x4 90.6 us (4.04%, 12
//! pieces per block, 32 steps whose busiest hops sum to 256 pieces against 253.3 for a perfect
//! spread), 3x3x3 89.0 us (4.06%), 5x5x5 92.7 us (5.94%). Since 2026-12-06 steps cut by rate
//! alone, never the fastest, gave way to steps cut by what is left from the first task on
//! ([`AHEAD_SHARES`]): 8x8x8 with a failed cable 96.80 -> 96.07 us (9.42% -> 8.60%).
//!
//! **Budgets from the top** (2026-12-04). [`fastest`] took the budgets 2, 4, 8, ... upwards, each
//! with nine list schedules (three cuts, each forward, backward and forward again); the small
//! ones cannot win where a step's latency is a piece's time or more, since they need many steps.
//! It now starts at twice the least budget whose busiest hop fits in as many steps as the trees
//! have levels and halves it while a lower bound on any schedule at that budget (the busiest hop's
//! pieces, plus the steps it needs at the budget, each with the least latency) is below the
//! fastest so far, and the two plans' forests are scheduled on two threads. The same schedules
//! win at 3x3x3, 4x4x4 and 5x5x5 (4.06%, 4.04%, 5.94%) in 0.45 s, 2.6 s and 11.2 s (0.8 s,
//! 5.3 s, 32.8 s before), and the portfolio now pipelines 8x8x8 with a failed cable at 6 pieces
//! per block: 104.9 us, 18.60% above the certified bound (21.26% layered), in 35 s (since the
//! free roots' trees are also grown by each root's turn, `super::Rotation`: 98.7 us, 11.58%,
//! in 44 s). At 12 pieces
//! per block it reaches 14.2%, but in 87 s (233 s before): there every hop carries its budget in every
//! step but the five of the turn and the last two, so what is left is the turn (about 4%) and the
//! latency of 69 steps (about 5%). Staggering the pieces in two cohorts (the first's
//! reduce-scatter ranked above the second's, the second's above the first's all-gather, with or
//! without holding the second back for a while) did not shorten the turn: 18.8-20.5% against
//! 19.3% at 6 pieces per block, and 7.7-9.8% against 4.04% on 4x4x4.
//!
//! **Waves** (2026-12-07). On a mesh each half loads the links unevenly whatever the roots
//! (`TreeGraph::lopsided`): the corners send nearly every piece over two links in the
//! reduce-scatter and take nearly every final value over them in the all-gather, so a schedule
//! that runs nearly all reduces first leaves their links idle in one half and the busiest in the
//! other. [`fastest`] then also ranks the tasks in 2 and 4 waves of trees ([`in_waves`]): every
//! task of a wave above every task of the next, by the levels behind it within its wave, so that
//! one wave's all-gather runs while the next wave is reduced. On an 8x8 mesh (8 MiB) the
//! all_reduce went from 218.4 us to 198.3 us (46.8% -> 33.2% above the certified bound). The
//! forest of the fixed roots balanced for each link's total over both halves (`super`,
//! `Plan::edges`) carries 144 pieces on every link there at 4 pieces per block, the mean, where
//! the fixed roots balanced level by level leave 178 on the busiest; but ranked by the levels
//! alone it pipelined to 239 us. Around a failed cable each half balances alone, and waves are not
//! tried: two cohorts ranked one above the other made it slower there (above).

use super::{Forest, TreeGraph};
use crate::collective::{Collective, PieceId};
use crate::cost::SyncMeter;
use crate::error::Result;
use crate::schedule::{Op, ScheduleHeader, Step, Transfer};
use crate::topology::Topology;
use crate::units::to_f64;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

const NONE: u32 = u32::MAX;

/// The forest's parent links, children lists and heights, flattened per (piece, rank).
struct Links {
    ranks: usize,
    /// Per (piece, rank): its parent rank (`NONE` at the root).
    parent: Vec<u32>,
    /// Per (piece, rank): its first child, and per (piece, rank) its next sibling.
    first_child: Vec<u32>,
    next_sibling: Vec<u32>,
    /// Per (piece, rank): the hop to its parent (towards the root), `NONE` at the root.
    hop: Vec<u32>,
    /// Per (piece, rank): its depth; per piece the tree's height.
    depth: Vec<u16>,
    height: Vec<u16>,
}

impl Links {
    fn new(g: &TreeGraph, f: &Forest) -> Self {
        let (r, trees) = (f.ranks(), f.trees());
        let mut l = Links {
            ranks: r,
            parent: vec![NONE; trees * r],
            first_child: vec![NONE; trees * r],
            next_sibling: vec![NONE; trees * r],
            hop: vec![NONE; trees * r],
            depth: vec![0; trees * r],
            height: vec![0; trees],
        };
        for q in 0..trees {
            for v in 0..r {
                let i = q * r + v;
                l.depth[i] = f.depth(q, v);
                l.height[q] = l.height[q].max(l.depth[i]);
                if let Some((h, u)) = f.parent(g, q, v) {
                    l.parent[i] = u as u32;
                    l.hop[i] = h as u32;
                    l.next_sibling[i] = l.first_child[q * r + u];
                    l.first_child[q * r + u] = v as u32;
                }
            }
        }
        l
    }

    fn children(&self, q: usize, v: usize) -> impl Iterator<Item = usize> + '_ {
        let r = self.ranks;
        let real = |c: u32| (c != NONE).then_some(c as usize);
        std::iter::successors(real(self.first_child[q * r + v]), move |&c| real(self.next_sibling[q * r + c]))
    }
}

/// The pipelined all_reduce over `forest` with at most `budget` pieces per transfer, steps cut as
/// `cut` says, tasks ranked by the levels behind them; with `improved`, then by a forward-backward
/// round ([`fastest`]).
#[cfg(test)]
pub fn pipelined_steps(t: &Topology, g: &TreeGraph, forest: &Forest, (budget, cut): (usize, Cut), improved: bool) -> Vec<Step> {
    let l = Links::new(g, forest);
    let dag = Dag { l: &l, g };
    let mut at = dag.schedule(t, true, &dag.levels_behind(), budget, cut);
    if improved {
        at = dag.refined(t, &at, budget, cut);
    }
    dag.steps(&at, forest.pieces())
}

/// The tasks of the pipelined all_reduce and what each waits for. Task `i = q * r + v` is the
/// reduce of (q, v)'s merged value to its parent, task `n + i` the copy of the final value from
/// the parent into (q, v) (`n` tree-rank pairs; a root has neither).
struct Dag<'a> {
    l: &'a Links,
    g: &'a TreeGraph,
}

impl Dag<'_> {
    fn pairs(&self) -> usize {
        self.l.parent.len()
    }

    /// Whether `id` is a task (not the root's).
    fn is_task(&self, id: usize) -> bool {
        self.l.parent[id % self.pairs()] != NONE
    }

    fn op(&self, id: usize) -> Op {
        if id < self.pairs() {
            Op::Reduce
        } else {
            Op::Copy
        }
    }

    /// The hop the task crosses.
    fn hop(&self, id: usize) -> usize {
        let up = self.l.hop[id % self.pairs()] as usize;
        if id < self.pairs() {
            up
        } else {
            self.g.reverse_hop(up)
        }
    }

    /// The tasks that wait for `id` (`forward`) or that `id` waits for, into `out`.
    fn next(&self, id: usize, forward: bool, out: &mut Vec<usize>) {
        let (n, r) = (self.pairs(), self.l.ranks);
        let i = id % n;
        let (q, v) = (i / r, i % r);
        let copies_below = |u: usize, out: &mut Vec<usize>| out.extend(self.l.children(q, u).map(|c| n + q * r + c));
        let reduces_into = |u: usize, out: &mut Vec<usize>| out.extend(self.l.children(q, u).map(|c| q * r + c));
        let parent = |x: usize| self.l.parent[q * r + x];
        match (id < n, forward) {
            // A reduce feeds its parent's reduce, or at the root every copy out of it.
            (true, true) => {
                let u = parent(v) as usize;
                if parent(u) == NONE {
                    copies_below(u, out);
                } else {
                    out.push(q * r + u);
                }
            }
            (true, false) => reduces_into(v, out),
            (false, true) => copies_below(v, out),
            // A copy waits for its parent's copy, or at the root for every reduce into it.
            (false, false) => {
                let u = parent(v) as usize;
                if parent(u) == NONE {
                    reduces_into(u, out);
                } else {
                    out.push(n + q * r + u);
                }
            }
        }
    }

    /// Per hop: the tasks that cross it.
    fn tasks_per_hop(&self) -> Vec<usize> {
        let mut n = vec![0; self.g.num_hops()];
        (0..2 * self.pairs()).filter(|&id| self.is_task(id)).for_each(|id| n[self.hop(id)] += 1);
        n
    }

    /// Per task: the levels of tasks behind it (a reduce: up to the root and then the
    /// all-gather's height; a copy: the levels below its rank).
    fn levels_behind(&self) -> Vec<u32> {
        let (n, r) = (self.pairs(), self.l.ranks);
        (0..2 * n)
            .map(|id| {
                let i = id % n;
                let (depth, height) = (u32::from(self.l.depth[i]), u32::from(self.l.height[i / r]));
                if !self.is_task(id) {
                    0
                } else if id < n {
                    depth - 1 + height
                } else {
                    height - depth
                }
            })
            .collect()
    }

    /// List-schedules the tasks, forward in time (a task once what it waits for is done) or
    /// backward (once what waits for it is): every step each hop whose links are free takes up
    /// to `budget` ready tasks of one op (fewer where `cut` cuts the step short), the op whose
    /// most urgent task ranks higher (`rank`, then the task's index). The step of every task
    /// (`u32::MAX` for non-tasks).
    fn schedule(&self, t: &Topology, forward: bool, rank: &[u32], budget: usize, cut: Cut) -> Vec<u32> {
        let nhops = self.g.num_hops();
        // Per hop: the ready reduces and the ready copies that cross it.
        let mut ready: Vec<[BinaryHeap<(u32, u32)>; 2]> = vec![[BinaryHeap::new(), BinaryHeap::new()]; nhops];
        let mut waiting = vec![0u32; 2 * self.pairs()];
        let mut scratch = Vec::new();
        let mut left = 0usize;
        for id in (0..2 * self.pairs()).filter(|&id| self.is_task(id)) {
            left += 1;
            scratch.clear();
            self.next(id, !forward, &mut scratch);
            waiting[id] = scratch.len() as u32;
        }
        let push = |ready: &mut [[BinaryHeap<(u32, u32)>; 2]], id: usize| ready[self.hop(id)][usize::from(id >= self.pairs())].push((rank[id], id as u32));
        for id in (0..2 * self.pairs()).filter(|&id| self.is_task(id) && waiting[id] == 0) {
            push(&mut ready, id);
        }
        let mut at = vec![u32::MAX; 2 * self.pairs()];
        let mut used_in = vec![u32::MAX; t.num_links()];
        let mut done = Vec::new();
        let mut step = 0u32;
        let mut counts = vec![0usize; budget + 1];
        // Per hop, its tasks not yet placed.
        let mut hop_left: Vec<u32> = self.tasks_per_hop().into_iter().map(|n| n as u32).collect();
        let mut ahead = Ahead::new(budget);
        // The tasks left from which a step is also cut by what is left.
        let tail = match cut {
            Cut::Full => 0,
            Cut::Rate { ahead_share, .. } => (left as f64 * ahead_share) as usize,
        };
        while left > 0 {
            let take = match cut {
                Cut::Full => budget,
                Cut::Rate { lambda, .. } => {
                    let rate = step_budget(&ready, budget, lambda, &mut counts);
                    if left > tail {
                        rate
                    } else {
                        rate.max(ahead.budget(&ready, &hop_left, lambda))
                    }
                }
            };
            for (h, queues) in ready.iter_mut().enumerate() {
                let Some(kind) = op_taken(queues) else { continue };
                let path = self.g.path(h);
                if path.iter().any(|k| used_in[k.index()] == step) {
                    continue;
                }
                path.iter().for_each(|k| used_in[k.index()] = step);
                for _ in 0..take {
                    let Some((_, id)) = queues[kind].pop() else { break };
                    hop_left[h] -= 1;
                    at[id as usize] = step;
                    done.push(id as usize);
                }
            }
            left -= done.len();
            for id in done.drain(..) {
                scratch.clear();
                self.next(id, forward, &mut scratch);
                for &w in &scratch {
                    waiting[w] -= 1;
                    if waiting[w] == 0 {
                        push(&mut ready, w);
                    }
                }
            }
            step += 1;
        }
        at
    }

    /// A forward schedule `at` refined once (forward-backward improvement): backward in the order
    /// its tasks ended, then forward in the order the backward pass left them.
    fn refined(&self, t: &Topology, at: &[u32], budget: usize, cut: Cut) -> Vec<u32> {
        self.schedule(t, true, &self.schedule(t, false, at, budget, cut), budget, cut)
    }

    /// The steps of a forward schedule `at` (`p` pieces per block): per step and hop one
    /// transfer with its tasks' pieces.
    fn steps(&self, at: &[u32], p: usize) -> Vec<Step> {
        let r = self.l.ranks;
        let mut by_step: Vec<(u32, u32, u32)> = (0..at.len()).filter(|&id| at[id] != u32::MAX).map(|id| (at[id], self.hop(id) as u32, id as u32)).collect();
        by_step.sort_unstable();
        let count = by_step.last().map_or(0, |x| x.0 as usize + 1);
        let mut steps = vec![Step::default(); count];
        for group in by_step.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            let (s, h) = (group[0].0 as usize, group[0].1 as usize);
            let mut pieces: Vec<PieceId> =
                group.iter().map(|x| (x.2 as usize % self.pairs()) / r).map(|q| PieceId::block((q / p) as u32, (q % p) as u32)).collect();
            pieces.sort_unstable();
            steps[s].transfers.push(Transfer { path: self.g.path(h).to_vec(), op: self.op(group[0].2 as usize), pieces });
        }
        steps
    }
}

/// A pipelined all_reduce and what it costs.
pub struct Pipelined {
    /// The steps.
    pub steps: Vec<Step>,
    /// The pieces a transfer carries at most.
    pub budget: usize,
    /// The step-synchronous time, ns.
    pub time_ns: f64,
}

/// The fastest pipelined all_reduce of `c` over `forest` in the step-synchronous model, over
/// budgets of pieces per transfer, each with every step at the budget and with steps cut short
/// ([`step_budget`]), each refined once. The budgets are powers of two, largest first: from twice
/// the least one at which the busiest hop's tasks fit in as many steps as the trees' levels
/// (beyond it steps only grow heavier), halving while [`Clock::lower_bound`] leaves the budget a
/// chance to beat the best so far (a smaller budget only adds steps, and with them latency).
/// A cut is not started when its three list schedules, at the first one's pace, would end past
/// `deadline`. `None` when `deadline` passed before the first budget was tried.
pub fn fastest(t: &Topology, c: &Collective, g: &TreeGraph, forest: &Forest, waves: bool, deadline: Instant) -> Result<Option<Pipelined>> {
    let l = Links::new(g, forest);
    let dag = Dag { l: &l, g };
    let levels = 2 * l.height.iter().copied().max().unwrap_or(0) as usize;
    let lambda = latency_in_pieces(t, c, g);
    let clock = Clock::new(t, g, to_f64(&c.piece_size_at(0)));
    let per_hop = dag.tasks_per_hop();
    let busiest = per_hop.iter().copied().max().unwrap_or(0);
    // The largest budget worth a try: twice the least at which the busiest hop's tasks fit in the
    // trees' levels.
    let largest = (2 * busiest.div_ceil(levels.max(1)).next_power_of_two()).clamp(2, MAX_BUDGET);
    // The best task steps so far: their time, budget and steps.
    let mut best: Option<(f64, usize, Vec<u32>)> = None;
    // The tasks ranked by the levels behind them (the same for every budget), and with `waves`
    // also by each wave in turn.
    let behind = dag.levels_behind();
    let waved: Vec<Vec<u32>> = WAVES.iter().filter(|_| waves).map(|&k| in_waves(&behind, &l, forest.pieces(), k)).collect();
    let rankings: Vec<Vec<u32>> = std::iter::once(behind).chain(waved).collect();
    // How long one list schedule takes, once known: a cut (three of them) is not started when it
    // would end past the deadline.
    let mut per_schedule: Option<Duration> = None;
    'rankings: for rank in &rankings {
        let mut budget = largest;
        while Instant::now() < deadline && budget >= 2 {
            if best.as_ref().is_some_and(|b| clock.lower_bound(&per_hop, levels, budget) >= b.0) {
                break;
            }
            // Every step at the budget, and steps cut to what moves the most per unit of time, the
            // last tasks' or every task's also to what is left (where steps have a latency: without
            // one that is a single piece per step at every budget).
            let rate = |ahead_share: f64| Cut::Rate { lambda, ahead_share };
            let cuts = if lambda > 0.0 { vec![Cut::Full, rate(AHEAD_SHARES[0]), rate(AHEAD_SHARES[1])] } else { vec![Cut::Full] };
            for cut in cuts {
                if per_schedule.is_some_and(|d| Instant::now() + 3 * d > deadline) {
                    break 'rankings;
                }
                // The tasks ranked by the levels behind them, then refined once.
                let started = Instant::now();
                let first = dag.schedule(t, true, rank, budget, cut);
                per_schedule.get_or_insert(started.elapsed());
                let improved = dag.refined(t, &first, budget, cut);
                for at in [first, improved] {
                    let time_ns = clock.time_ns(&dag, &at);
                    if best.as_ref().is_none_or(|b| time_ns < b.0) {
                        best = Some((time_ns, budget, at));
                    }
                }
            }
            budget /= 2;
        }
    }
    // Only the fastest becomes steps, priced again by the cost model itself.
    best.map(|(_, budget, at)| {
        let steps = dag.steps(&at, forest.pieces());
        Ok(Pipelined { time_ns: time_ns(t, c, &steps)?, steps, budget })
    })
    .transpose()
}

/// The wave counts tried where the ranks' hops are lopsided ([`fastest`]'s `waves`).
const WAVES: [usize; 2] = [2, 4];

/// `behind` (each task's levels behind it) ranked in `k` waves of trees: every task of a wave
/// above every task of the next, by the levels behind it within its wave. A wave takes the trees
/// of some piece indexes of every block and, within an index, of ranks spread over the network
/// (taken by a stride coprime to the ranks, about 5/8 of them, so that neighbours fall in
/// different waves), so that each wave loads the links alike.
fn in_waves(behind: &[u32], l: &Links, pieces: usize, k: usize) -> Vec<u32> {
    let (r, n) = (l.ranks, l.parent.len());
    let above = behind.iter().copied().max().unwrap_or(0) + 1;
    let stride = (1..r).rev().find(|&s| num_integer::gcd(s, r) == 1 && 8 * s <= 5 * r).unwrap_or(1);
    let wave = |q: usize| ((q % pieces) * r + (q / pieces) * stride % r) * k / (pieces * r);
    behind.iter().enumerate().map(|(id, &b)| b + above * (k - 1 - wave(id % n / r)) as u32).collect()
}

/// A step's latency in the time a piece takes, at the slowest hop's latency and bandwidth: the
/// `lambda` of [`Cut`].
fn latency_in_pieces(t: &Topology, c: &Collective, g: &TreeGraph) -> f64 {
    let (gbps, latency) = g.slowest(t);
    latency * gbps / to_f64(&c.piece_size_at(0))
}

/// The step-synchronous time of task steps without building the steps (docs/design/MODEL.md
/// section 5, for pieces of one size): per step, the hop whose pieces take longest at its
/// slowest link, plus the largest latency of a hop in use.
struct Clock {
    /// Per hop: ns per piece at its slowest link, and its path latency.
    piece_ns: Vec<f64>,
    latency_ns: Vec<f64>,
}

impl Clock {
    fn new(t: &Topology, g: &TreeGraph, piece_bytes: f64) -> Self {
        let hops = 0..g.num_hops();
        let slowest = |h: usize| g.path(h).iter().map(|l| t.link(*l).bandwidth_gbps).fold(f64::INFINITY, f64::min);
        Clock { piece_ns: hops.clone().map(|h| piece_bytes / slowest(h)).collect(), latency_ns: hops.map(|h| t.path_latency_ns(g.path(h))).collect() }
    }

    /// A lower bound on the time of any task steps at `budget` pieces per hop and step: every hop
    /// carries its `per_hop` tasks, in at least as many steps as the budget needs for the busiest
    /// and the trees' `levels`, each step paying at least the least latency of a hop.
    fn lower_bound(&self, per_hop: &[usize], levels: usize, budget: usize) -> f64 {
        let work = per_hop.iter().zip(&self.piece_ns).map(|(&n, &ns)| n as f64 * ns).fold(0.0, f64::max);
        let steps = per_hop.iter().map(|n| n.div_ceil(budget)).max().unwrap_or(0).max(levels);
        let latency = self.latency_ns.iter().copied().fold(f64::INFINITY, f64::min);
        work + steps as f64 * if latency.is_finite() { latency } else { 0.0 }
    }

    /// The time of the task steps `at`.
    fn time_ns(&self, dag: &Dag, at: &[u32]) -> f64 {
        let nhops = self.piece_ns.len();
        let count = at.iter().filter(|&&s| s != u32::MAX).max().map_or(0, |&s| s as usize + 1);
        let mut load = vec![0u32; count * nhops];
        for (id, &s) in at.iter().enumerate().filter(|x| *x.1 != u32::MAX) {
            load[s as usize * nhops + dag.hop(id)] += 1;
        }
        load.chunks(nhops.max(1))
            .map(|step| {
                let used = step.iter().zip(&self.piece_ns).zip(&self.latency_ns).filter(|x| *x.0 .0 > 0);
                let (busiest, latency) = used.fold((0.0f64, 0.0f64), |(b, l), ((&n, &ns), &lat)| (b.max(f64::from(n) * ns), l.max(lat)));
                busiest + latency
            })
            .sum()
    }
}

/// How many pieces every free hop may take in a step.
#[derive(Clone, Copy, Debug)]
pub enum Cut {
    /// The budget, every step.
    Full,
    /// The count that moves the most ready pieces per unit of the step's time, for a step
    /// latency of `lambda` pieces' time (`step_budget`); once at most `ahead_share` of the tasks
    /// (0 to 1) are left, at least the count that makes the step and a bound on what is left
    /// after it shortest (`Ahead`).
    Rate {
        /// A step's latency in pieces' time.
        lambda: f64,
        /// The share of the tasks whose steps are also cut by what is left (0: none).
        ahead_share: f64,
    },
}

/// The shares of the tasks whose steps [`fastest`] also cuts by what is left ([`Ahead`]): the
/// last tenth, and every task. Where most tasks are left, its bound on the time after a step is
/// far from what the schedule takes, and on 4x4x4 with a failed cable the steps it cut were too
/// short (93.0 us from the first task on, 91.9 us from the last tenth, the same from the last
/// twentieth or the last 40%). On 8x8x8 with a failed cable the first task on is the faster
/// (96.07 us against 96.80 us, 8.60% above the certified bound against 9.42%): the hops of the
/// cable's ranks, whose totals are the average, carried fewer than the budget in the steps of
/// the turn, and the steps cut to what is left lose less of them. Both replace steps cut by rate
/// alone, which was never the fastest (3x3x3, 4x4x4, 5x5, 5x5x5, 6x6x6, 7x7x7 and 8x8x8 with a
/// failed cable, release build, `collsched synthesize --collective all_reduce --bytes 8MiB`).
const AHEAD_SHARES: [f64; 2] = [0.1, 1.0];

/// Which of a hop's ready queues (reduces, copies) it takes from this step: the one whose most
/// urgent task ranks higher; `None` when both are empty.
fn op_taken(queues: &[BinaryHeap<(u32, u32)>; 2]) -> Option<usize> {
    match (queues[0].peek(), queues[1].peek()) {
        (None, None) => None,
        (Some(a), Some(b)) if b.0 > a.0 => Some(1),
        (Some(_), _) => Some(0),
        (None, Some(_)) => Some(1),
    }
}

/// The pieces every free hop may take this step: of 1..=`budget`, the count that moves the most
/// ready pieces per unit of the step's time (its busiest hop's pieces plus its latency, `lambda`
/// pieces' worth), a hop's ready pieces counted as the larger of its two queues. Where every hop
/// has `budget` ready that is `budget`; where few hops have work left (the turn from the
/// reduce-scatter to the all-gather, the last copies) the step is cut short, so that what its
/// transfers deliver moves on sooner (an infinite `lambda` gives the budget). Counting only the
/// queue the hop takes from was slower (4x4x4 with a failed cable: 93.1 us against 92.7 us).
/// `counts` has `budget + 1` entries.
fn step_budget(ready: &[[BinaryHeap<(u32, u32)>; 2]], budget: usize, lambda: f64, counts: &mut [usize]) -> usize {
    counts.iter_mut().for_each(|x| *x = 0);
    for queues in ready {
        counts[queues[0].len().max(queues[1].len()).min(budget)] += 1;
    }
    let (mut at_least, mut work, mut best) = (counts[1..].iter().sum::<usize>(), 0usize, (0.0, budget));
    for (b, &exactly) in counts.iter().enumerate().skip(1) {
        work += at_least;
        at_least -= exactly;
        let rate = work as f64 / (b as f64 + lambda);
        if rate > best.0 {
            best = (rate, b);
        }
    }
    best.1
}

/// Steps cut by what is left: of 1..=budget, the count that minimizes the step's time plus a
/// bound on the time after it, the hop with the most pieces left then carrying them one after
/// another in steps of at most the budget, each with its latency. At the end of a schedule a few
/// hops have many pieces left while most have few ready: [`step_budget`] alone then cuts the
/// steps to the many hops' few pieces, and the few hops' pieces take a step each (4x4x4 with a
/// failed cable: nine steps carried the last 2% of the pieces, 92.7 us; with this rule one step,
/// 91.9 us).
struct Ahead {
    budget: usize,
    /// Per count of ready pieces a hop takes (at most the budget): the most pieces left on a hop
    /// taking that many, and the most left on one after it takes them.
    most_left: Vec<i64>,
    most_after: Vec<i64>,
    /// Per count: the most pieces left on a hop taking at least that many.
    from: Vec<i64>,
}

impl Ahead {
    fn new(budget: usize) -> Self {
        Ahead { budget, most_left: vec![0; budget + 1], most_after: vec![0; budget + 1], from: vec![0; budget + 2] }
    }

    /// The count for this step, `left` the pieces left per hop and `lambda` a step's latency in
    /// pieces' time.
    fn budget(&mut self, ready: &[[BinaryHeap<(u32, u32)>; 2]], left: &[u32], lambda: f64) -> usize {
        let b = self.budget;
        self.most_left.iter_mut().chain(self.most_after.iter_mut()).for_each(|x| *x = 0);
        for (queues, &n) in ready.iter().zip(left) {
            let r = op_taken(queues).map_or(0, |k| queues[k].len()).min(b);
            self.most_left[r] = self.most_left[r].max(i64::from(n));
            self.most_after[r] = self.most_after[r].max(i64::from(n) - r as i64);
        }
        self.from[b + 1] = 0;
        for r in (0..=b).rev() {
            self.from[r] = self.from[r + 1].max(self.most_left[r]);
        }
        // A hop with fewer ready than the count keeps what it cannot take; the others keep their
        // pieces less the count.
        let (mut fewer, mut best) = (0i64, (f64::INFINITY, b));
        for take in 1..=b {
            fewer = fewer.max(self.most_after[take - 1]);
            let after = fewer.max(self.from[take] - take as i64) as f64;
            let time = take as f64 + lambda + after + lambda * (after / b as f64).ceil();
            if time < best.0 {
                best = (time, take);
            }
        }
        best.1
    }
}

/// The largest budget tried: pieces per transfer.
const MAX_BUDGET: usize = 4096;

/// The step-synchronous time of `steps` (docs/design/MODEL.md section 5), ns.
pub(crate) fn time_ns(t: &Topology, c: &Collective, steps: &[Step]) -> Result<f64> {
    let header = ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: None };
    let mut meter = SyncMeter::new(&header)?;
    steps.iter().for_each(|s| meter.step(s));
    Ok(to_f64(&meter.finish()?.time_ns()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::CollectiveKind;
    use crate::schedule::Schedule;
    use crate::synth::steps::tests::fail_picked_cables;
    use crate::topology::{torus, NodeId, TorusParams};
    use crate::verify::{verify_schedule, VerifyOptions};
    use std::collections::HashSet;
    use std::time::Duration;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

        /// Over sizes, failed cables anywhere, groups, piece counts and budgets, the pipelined
        /// all_reduce verifies (rules 1-5, and rule 6 on the lowered programs), every transfer
        /// carries at most the budget and every link one transfer per step.
        #[test]
        fn pipelined_all_reduce_verifies_over_sizes_faults_and_budgets(
            dims in proptest::prop_oneof![proptest::collection::vec(2usize..7, 1..=2), proptest::collection::vec(2usize..5, 3..=3)],
            cuts in proptest::collection::vec((0usize..1000, 0usize..8), 0..=3),
            pieces in 1u32..=4,
            budget in 1usize..=12,
            (kind, lambda) in (0usize..4, 0.05f64..4.0),
            drop in proptest::collection::vec(0usize..1000, 0..=2),
        ) {
            let mut t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            fail_picked_cables(&mut t, &cuts);
            let n = t.num_npus();
            let gone: HashSet<usize> = if n > 3 { drop.iter().map(|d| d % n).collect() } else { HashSet::new() };
            let ranks: Vec<NodeId> = t.node_ids().filter(|v| !gone.contains(&v.index())).collect();
            proptest::prop_assume!(t.check_connected(&ranks).is_ok());
            let c = Collective::new(CollectiveKind::AllReduce, ranks, 1 << 20, pieces, None, &t).unwrap();
            let g = TreeGraph::new(&t, &c);
            // Every plan's forest where the ranks' hops are unequal (the free roots' balanced by
            // hop totals, with and without chains, each in two dimension orders).
            let far = Instant::now() + Duration::from_secs(60);
            let (a, b, _) = super::super::forests(&t, &c, &g, (far, far)).unwrap().unwrap();
            let forests: Vec<Forest> = std::iter::once(a).chain(b).collect();
            // The fixed roots also balanced over both halves where the hops are lopsided.
            let both = usize::from(forests.len() > 1 && g.lopsided());
            proptest::prop_assert!([1, 3, 5].contains(&(forests.len() - both)), "{} forests", forests.len());
            for (f, improved) in forests.iter().flat_map(|f| [(f, false), (f, true)]) {
                let cut = [Cut::Full, Cut::Rate { lambda, ahead_share: 0.0 }, Cut::Rate { lambda, ahead_share: AHEAD_SHARES[0] }, Cut::Rate { lambda, ahead_share: AHEAD_SHARES[1] }][kind];
                let steps = pipelined_steps(&t, &g, f, (budget, cut), improved);
                for s in &steps {
                    let mut used = HashSet::new();
                    for x in &s.transfers {
                        proptest::prop_assert!(!x.pieces.is_empty() && x.pieces.len() <= budget);
                        proptest::prop_assert!(x.path.iter().all(|l| used.insert(*l)), "a link shared in a step");
                    }
                }
                let s = Schedule { header: ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: None }, steps };
                let r = verify_schedule(&s, &VerifyOptions::default()).unwrap();
                proptest::prop_assert!(r.is_valid(), "{:?} {:?}: {:?}", dims, cuts, r.findings.failures().iter().take(3).map(|d| d.to_string()).collect::<Vec<_>>());
                let programs = crate::lower::lower(&s, &Default::default()).unwrap();
                proptest::prop_assert!(crate::verify::check_deadlock(&programs).is_empty(), "rule 6");
            }
        }
    }

    #[test]
    fn a_larger_budget_takes_fewer_steps_and_the_fastest_beats_layered_on_4x4x4_with_a_failed_cable() {
        let (t, c) = super::super::tests::all_reduce_on_4x4x4_with_a_failed_cable();
        let g = TreeGraph::new(&t, &c);
        let far = Instant::now() + Duration::from_secs(600);
        let (a, b, _) = super::super::forests(&t, &c, &g, (far, far)).unwrap().unwrap();
        assert_eq!(b.len(), 4, "ranks with unequal hops: the free roots' plans, with and without chains, in two dimension orders besides the fixed roots'");
        // A free roots' forest (more levels) is what the pipelined halves run on fastest; the
        // fixed roots' (the fewest levels) is the faster layered.
        let least = a.levels.min(b.iter().map(|f| f.levels).min().unwrap());
        let (free, fixed): (Vec<Forest>, Vec<Forest>) = std::iter::once(a).chain(b).partition(|f| f.levels > least);
        let fixed = fixed.into_iter().next().unwrap();
        let (best, f) =
            free.into_iter().map(|f| (fastest(&t, &c, &g, &f, false, far).unwrap().unwrap().time_ns, f)).min_by(|x, y| x.0.total_cmp(&y.0)).unwrap();
        let counts: Vec<usize> = [2, 4, 8, 16].iter().map(|&b| pipelined_steps(&t, &g, &f, (b, Cut::Full), false).len()).collect();
        assert!(counts.windows(2).all(|w| w[1] < w[0]), "{counts:?}");
        let layered = time_ns(&t, &c, &crate::synth::trees::layered_steps(&t, &c, &g, &fixed)).unwrap();
        // Measured: 90.6 us against 104.6 us layered.
        assert!(best < 0.9 * layered, "{best} ns pipelined against {layered} ns layered");
        let fastest_of = |cut: Cut, improved: bool| {
            let time = |b: usize| time_ns(&t, &c, &pipelined_steps(&t, &g, &f, (b, cut), improved)).unwrap();
            [2, 4, 8, 16, 32, 64].map(time).into_iter().fold(f64::INFINITY, f64::min)
        };
        // The forward-backward round gains on the first schedules of every budget (measured: 90.6
        // us against 93.9 us).
        let plain = fastest_of(Cut::Full, false);
        assert!(best < 0.99 * plain, "{best} ns improved against {plain} ns");
        // The last steps cut by what is left gain on steps cut by rate alone (measured: 92.3 us
        // against 92.7 us; on this forest every step at the budget is faster still, 90.6 us).
        let lambda = latency_in_pieces(&t, &c, &g);
        let (rate, ahead) = (fastest_of(Cut::Rate { lambda, ahead_share: 0.0 }, true), fastest_of(Cut::Rate { lambda, ahead_share: AHEAD_SHARES[0] }, true));
        assert!(ahead < 0.998 * rate, "{ahead} ns by what is left against {rate} ns by rate");
    }

    /// On a mesh each half loads the links unevenly whatever the trees (the corners send nearly
    /// every piece over two links in the reduce-scatter and take nearly every one over them in
    /// the all-gather), so the halves must overlap: in waves the pipelined all_reduce is faster
    /// than ranked by the levels alone, on the best forest of each.
    #[test]
    fn waves_overlap_the_halves_on_a_mesh() {
        let (t, c) = super::super::tests::all_reduce_on_a_mesh(&[4, 4], 2);
        let g = TreeGraph::new(&t, &c);
        let far = Instant::now() + Duration::from_secs(600);
        let forests = super::super::forests_split(&t, &c, &g, 1);
        let best = |waves: bool| forests.iter().map(|f| fastest(&t, &c, &g, f, waves, far).unwrap().unwrap().time_ns).fold(f64::INFINITY, f64::min);
        let (plain, waved) = (best(false), best(true));
        // Measured: 215.4 us against 231.5 us.
        assert!(waved < 0.95 * plain, "{waved} ns in waves against {plain} ns");
    }

    /// A step carries the budget where every hop has it ready, and is cut short where few hops
    /// have work: there a short step moves more per unit of time than a full one.
    #[test]
    fn a_step_is_cut_short_where_few_hops_have_work() {
        let queue = |n: u32| (0..n).map(|i| (0, i)).collect::<BinaryHeap<(u32, u32)>>();
        let hops = |lens: &[u32]| lens.iter().map(|&n| [queue(n), BinaryHeap::new()]).collect::<Vec<_>>();
        let mut counts = vec![0; 9];
        assert_eq!(step_budget(&hops(&[10, 9, 8, 12]), 8, 0.5, &mut counts), 8);
        // One hop with 8 ready, three with 1: a step of 1 moves 4 pieces in 1.5 pieces' time, a
        // step of 8 moves 11 in 8.5.
        assert_eq!(step_budget(&hops(&[8, 1, 1, 1]), 8, 0.5, &mut counts), 1);
        // With a latency of 20 pieces' time the full step is worth it.
        assert_eq!(step_budget(&hops(&[8, 1, 1, 1]), 8, 20.0, &mut counts), 8);
        assert_eq!(step_budget(&hops(&[8, 1, 1, 1]), 8, f64::INFINITY, &mut counts), 8);
        // A hop's ready pieces are the larger of its two queues.
        let mut mixed = hops(&[1, 1, 1, 1]);
        mixed[0][1] = queue(8);
        assert_eq!(step_budget(&mixed, 8, 0.5, &mut counts), 1);
        assert_eq!(step_budget(&mixed, 8, 20.0, &mut counts), 8);
    }

    /// At the end of a schedule a hop with many pieces left sets the step, where the rate alone
    /// would cut it to the other hops' single pieces; a hop whose pieces are not ready does not.
    #[test]
    fn what_is_left_lengthens_the_last_steps() {
        let queue = |n: u32| (0..n).map(|i| (0, i)).collect::<BinaryHeap<(u32, u32)>>();
        let hops = |lens: &[u32]| lens.iter().map(|&n| [queue(n), BinaryHeap::new()]).collect::<Vec<_>>();
        let (mut counts, mut ahead) = (vec![0; 9], Ahead::new(8));
        let ready = hops(&[8, 1, 1, 1]);
        assert_eq!(step_budget(&ready, 8, 0.5, &mut counts), 1);
        // 20 left on the first hop: a step of 1 leaves 19 (three more steps), one of 4 or more
        // leaves at most 16 (two): 4 is the least count with the least bound.
        assert_eq!(ahead.budget(&ready, &[20, 1, 1, 1], 0.5), 4);
        // With only its 8 ready left, the first hop is best emptied at once.
        assert_eq!(ahead.budget(&ready, &[8, 1, 1, 1], 0.5), 8);
        // Its pieces left but one not ready: no count gains on a step of one.
        assert_eq!(ahead.budget(&hops(&[1, 1, 1, 1]), &[20, 1, 1, 1], 0.5), 1);
        // Two pieces ready and left on one hop: a step of two ends them all.
        assert_eq!(ahead.budget(&hops(&[2, 1, 1, 1]), &[2, 1, 1, 1], 0.5), 2);
    }
}
