//! One ring or line of a torus dimension: the one-dimensional all-to-all algorithms of
//! docs/design/ALGORITHMS.md ("Single ring") as plans of sub-steps over ring positions.
//!
//! A plan knows nothing about nodes or pieces. It says, sub-step by sub-step, which block
//! (`origin > dest`, in ring positions), or which half of it, moves along which positions. The
//! composition over dimensions maps positions to the nodes of each ring and blocks to the pieces
//! they stand for in that phase, so one plan serves every ring of a dimension and every chunk.
//!
//! Bandwidth terms (step-synchronous, latency 0), with S bytes per rank, link bandwidth B and N
//! positions, follow from the sub-step structure; the tests check them exactly:
//! - Ring: N(N-1)/2 sub-steps, each moving a half block S/(2N) on every directed link:
//!   (N-1) S/(4B). This is docs/design/ALGORITHMS.md's (N-1)/2 * S/(2B), written differently.
//! - HalfRing, odd N: (N^2-1)/8 sub-steps of whole blocks S/N: (N^2-1) S/(8NB). Even N: the
//!   N/2-1 distance phases take (N/2-1)(N/2)/2 sub-steps of S/N, the distance-N/2 phase N/2
//!   sub-steps of S/(2N): N S/(8B). Both as in docs/design/ALGORITHMS.md.
//! - FoldedRing: N(N-1)/2 sub-steps of whole blocks S/N, and the fold keeps every link at one
//!   block per sub-step: (N-1) S/(2B), as in docs/design/ALGORITHMS.md.
//! - Line (mesh, or a dimension of size 2): floor(N^2/4) sub-steps of one block per link, which
//!   is what the middle cable must carry: floor(N^2/4) S/(NB), bandwidth-optimal for a line.

/// Which part of a block a move carries. Ring and even-N HalfRing cut blocks in half by the
/// pieces' part index; the first half is the one that goes clockwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Part {
    /// The whole block.
    Whole,
    /// The half that travels clockwise.
    First,
    /// The half that travels anticlockwise.
    Second,
}

/// One transfer of a plan: block `origin > dest` (or half of it) goes from `path[0]` to the last
/// position of `path`, passing through the positions between (a routed path when more than two).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Move {
    /// Ring position the block started at (before this phase).
    pub origin: usize,
    /// Ring position the block must reach.
    pub dest: usize,
    /// Which part of the block moves.
    pub part: Part,
    /// Positions visited, from the sender to the receiver (at least two).
    pub path: Vec<usize>,
}

/// Which one-dimensional algorithm a ring or line runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RingKind {
    /// Halves both ways round, the long and the short way.
    Ring,
    /// Every block the short way; distance-N/2 blocks of an even ring cut in half.
    HalfRing,
    /// One-way Ring around a failed cable between positions `failed` and `failed + 1` (mod N).
    Folded {
        /// The position on the clockwise side of the failed cable's start.
        failed: usize,
    },
    /// No wrap-around: every block the only way along the line.
    Line,
}

/// The sub-steps of one ring or line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RingPlan {
    substeps: Vec<Vec<Move>>,
}

impl RingPlan {
    /// The plan of `kind` on `n` positions (`n >= 3` for the ring kinds, `n >= 2` for a line).
    pub fn new(kind: RingKind, n: usize) -> Self {
        let substeps = match kind {
            RingKind::Ring => {
                let (cw, acw) = (OneWay::clockwise(n), OneWay::anticlockwise(n));
                // A block at clockwise distance k has its first half in the clockwise phase k
                // and its second half in the anticlockwise phase N-k.
                (1..n).flat_map(|k| merge(cw.phase(k, Part::First), acw.phase(k, Part::Second))).collect()
            }
            RingKind::HalfRing => {
                let (cw, acw) = (OneWay::clockwise(n), OneWay::anticlockwise(n));
                let mut out: Vec<Vec<Move>> = (1..=(n - 1) / 2).flat_map(|k| merge(cw.phase(k, Part::Whole), acw.phase(k, Part::Whole))).collect();
                if n % 2 == 0 {
                    // Both ways are equally short: half each way keeps both directions busy.
                    out.extend(merge(cw.phase(n / 2, Part::First), acw.phase(n / 2, Part::Second)));
                }
                out
            }
            RingKind::Folded { failed } => {
                let ring = OneWay::folded(n, failed);
                (1..n).flat_map(|k| ring.phase(k, Part::Whole)).collect()
            }
            RingKind::Line => line(n),
        };
        RingPlan { substeps }
    }

    /// The sub-steps in order.
    pub fn substeps(&self) -> &[Vec<Move>] {
        &self.substeps
    }

    /// Number of sub-steps.
    pub fn len(&self) -> usize {
        self.substeps.len()
    }

    /// Whether some move carries half a block (then pieces must come in pairs of halves).
    pub fn splits_blocks(&self) -> bool {
        self.substeps.iter().flatten().any(|m| m.part != Part::Whole)
    }
}

/// A one-way ring: `order[i]` is the position of logical node i; `hops[i]` lists the positions a
/// move from logical i to logical i+1 (mod N) passes through: two for a direct link, more for the
/// fold of FoldedRing.
struct OneWay {
    order: Vec<usize>,
    hops: Vec<Vec<usize>>,
}

impl OneWay {
    fn direct(order: Vec<usize>) -> Self {
        let n = order.len();
        let hops = (0..n).map(|i| vec![order[i], order[(i + 1) % n]]).collect();
        OneWay { order, hops }
    }

    /// Links i -> i+1.
    fn clockwise(n: usize) -> Self {
        Self::direct((0..n).collect())
    }

    /// Links i -> i-1.
    fn anticlockwise(n: usize) -> Self {
        Self::direct((0..n).map(|i| (n - i) % n).collect())
    }

    /// Clockwise, starting just after the failed cable `{failed, failed+1}`: the last logical hop
    /// would cross that cable, so it goes the other way round over the anticlockwise links, which
    /// the clockwise ring leaves idle.
    fn folded(n: usize, failed: usize) -> Self {
        let order: Vec<usize> = (0..n).map(|i| (failed + 1 + i) % n).collect();
        let mut ring = Self::direct(order);
        ring.hops[n - 1] = ring.order.iter().rev().copied().collect();
        ring
    }

    /// Phase k: every block whose destination is k logical hops ahead moves one hop per sub-step
    /// (k sub-steps). In each sub-step every logical hop carries exactly one block.
    fn phase(&self, k: usize, part: Part) -> Vec<Vec<Move>> {
        let n = self.order.len();
        (0..k)
            .map(|s| (0..n).map(|a| Move { origin: self.order[a], dest: self.order[(a + k) % n], part, path: self.hops[(a + s) % n].clone() }).collect())
            .collect()
    }
}

/// Runs two sub-step sequences at the same time (they must use disjoint links).
fn merge(a: Vec<Vec<Move>>, b: Vec<Vec<Move>>) -> Vec<Vec<Move>> {
    let (mut long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    for (l, s) in long.iter_mut().zip(short) {
        l.extend(s);
    }
    long
}

/// A line: the rightward and leftward blocks use disjoint links and run at the same time; the
/// leftward plan is the rightward one mirrored.
fn line(n: usize) -> Vec<Vec<Move>> {
    let right = farthest_first(n);
    let mirror = |p: usize| n - 1 - p;
    let left = right
        .iter()
        .map(|s| {
            s.iter().map(|m| Move { origin: mirror(m.origin), dest: mirror(m.dest), part: m.part, path: m.path.iter().map(|&p| mirror(p)).collect() }).collect()
        })
        .collect();
    merge(right, left)
}

/// The rightward blocks of a line, store-and-forward, one block per link per sub-step: each link
/// forwards the waiting block with the farthest destination (ties: the earliest origin). Sending
/// the far blocks first keeps the middle links busy from the first sub-step to the last, so the
/// plan takes floor(N^2/4) sub-steps, the load of the middle cable.
fn farthest_first(n: usize) -> Vec<Vec<Move>> {
    let mut waiting: Vec<Vec<(usize, usize)>> = (0..n).map(|v| (v + 1..n).map(|d| (v, d)).collect()).collect();
    let mut out = Vec::new();
    while waiting.iter().any(|w| !w.is_empty()) {
        let mut step = Vec::new();
        let mut arrived = Vec::new();
        for (u, w) in waiting.iter_mut().enumerate() {
            let Some(pick) = (0..w.len()).max_by_key(|&i| (w[i].1, std::cmp::Reverse(w[i].0))) else { continue };
            let (origin, dest) = w.swap_remove(pick);
            step.push(Move { origin, dest, part: Part::Whole, path: vec![u, u + 1] });
            if dest > u + 1 {
                arrived.push((u + 1, (origin, dest)));
            }
        }
        // Arrivals join the queues only after every link of this sub-step has picked: all
        // transfers of a step read the state at its start.
        for (u, block) in arrived {
            waiting[u].push(block);
        }
        out.push(step);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// Replays a plan on positions: every half block starts at its origin, every move must start
    /// where the half is, no directed hop is used twice in a sub-step, consecutive path positions
    /// are neighbours (the fold included), and every half ends at its destination.
    fn replay(plan: &RingPlan, n: usize, wrap: bool, forbidden: Option<(usize, usize)>) {
        let mut at: HashMap<(usize, usize, u8), usize> = HashMap::new();
        for v in 0..n {
            for d in (0..n).filter(|&d| d != v) {
                for h in 0..2 {
                    at.insert((v, d, h), v);
                }
            }
        }
        for (s, moves) in plan.substeps().iter().enumerate() {
            let mut used = HashSet::new();
            let mut updates = Vec::new();
            for m in moves {
                assert!(m.path.len() >= 2);
                for w in m.path.windows(2) {
                    let (a, b) = (w[0], w[1]);
                    let adjacent = if wrap { (a + 1) % n == b || (b + 1) % n == a } else { a + 1 == b || b + 1 == a };
                    assert!(adjacent, "sub-step {s}: {a}->{b} is not a link");
                    if let Some((x, y)) = forbidden {
                        assert!(!((a, b) == (x, y) || (a, b) == (y, x)), "sub-step {s}: uses the failed cable");
                    }
                    assert!(used.insert((a, b)), "sub-step {s}: link {a}->{b} used twice");
                }
                let halves: &[u8] = match m.part {
                    Part::Whole => &[0, 1],
                    Part::First => &[0],
                    Part::Second => &[1],
                };
                for &h in halves {
                    assert_eq!(at[&(m.origin, m.dest, h)], m.path[0], "sub-step {s}: {}>{} half {h} is not at the sender", m.origin, m.dest);
                    updates.push(((m.origin, m.dest, h), *m.path.last().unwrap()));
                }
            }
            at.extend(updates);
        }
        for ((v, d, h), p) in at {
            assert_eq!(p, d, "{v}>{d} half {h} ends at {p}");
        }
    }

    #[test]
    fn every_plan_delivers_without_sharing_links() {
        for n in 2..=12 {
            replay(&RingPlan::new(RingKind::Line, n), n, false, None);
            if n >= 3 {
                replay(&RingPlan::new(RingKind::Ring, n), n, true, None);
                replay(&RingPlan::new(RingKind::HalfRing, n), n, true, None);
                for f in 0..n {
                    replay(&RingPlan::new(RingKind::Folded { failed: f }, n), n, true, Some((f, (f + 1) % n)));
                }
            }
        }
    }

    #[test]
    fn sub_step_counts_match_the_structure() {
        for n in 3..=12 {
            assert_eq!(RingPlan::new(RingKind::Ring, n).len(), n * (n - 1) / 2);
            let half = if n % 2 == 1 { (n * n - 1) / 8 } else { (n / 2 - 1) * (n / 2) / 2 + n / 2 };
            assert_eq!(RingPlan::new(RingKind::HalfRing, n).len(), half);
            assert_eq!(RingPlan::new(RingKind::Folded { failed: n - 1 }, n).len(), n * (n - 1) / 2);
            assert!(RingPlan::new(RingKind::Ring, n).splits_blocks());
            assert_eq!(RingPlan::new(RingKind::HalfRing, n).splits_blocks(), n % 2 == 0);
            assert!(!RingPlan::new(RingKind::Folded { failed: 0 }, n).splits_blocks());
        }
        for n in 2..=12 {
            assert_eq!(RingPlan::new(RingKind::Line, n).len(), n * n / 4, "line of {n}");
            assert!(!RingPlan::new(RingKind::Line, n).splits_blocks());
        }
    }

    /// The tables of docs/design/ALGORITHMS.md for N = 4 and N = 5.
    #[test]
    fn half_ring_follows_the_tables() {
        // (sender, receiver, origin, dest) of every move of sub-step `s`.
        let hops = |plan: &RingPlan, s: usize| -> HashSet<(usize, usize, usize, usize)> {
            plan.substeps()[s].iter().map(|m| (m.path[0], m.path[1], m.origin, m.dest)).collect()
        };
        // A table row: the block on each CW link u -> u+1, then on each ACW link u -> u-1.
        let row = |n: usize, cw: &[(usize, usize)], acw: &[(usize, usize)]| -> HashSet<(usize, usize, usize, usize)> {
            let cw = (0..n).map(|u| (u, (u + 1) % n, cw[u].0, cw[u].1));
            let acw = (0..n).map(|u| (u, (u + n - 1) % n, acw[u].0, acw[u].1));
            cw.chain(acw).collect()
        };
        let four = RingPlan::new(RingKind::HalfRing, 4);
        assert_eq!(four.len(), 3);
        assert_eq!(hops(&four, 0), row(4, &[(0, 1), (1, 2), (2, 3), (3, 0)], &[(0, 3), (1, 0), (2, 1), (3, 2)]));
        assert_eq!(hops(&four, 1), row(4, &[(0, 2), (1, 3), (2, 0), (3, 1)], &[(0, 2), (1, 3), (2, 0), (3, 1)]));
        assert_eq!(hops(&four, 2), row(4, &[(3, 1), (0, 2), (1, 3), (2, 0)], &[(1, 3), (2, 0), (3, 1), (0, 2)]));
        assert!(four.substeps()[0].iter().all(|m| m.part == Part::Whole));
        let clockwise = |m: &Move| (m.path[0] + 1) % 4 == m.path[1];
        assert!(four.substeps()[1..].iter().flatten().all(|m| m.part == if clockwise(m) { Part::First } else { Part::Second }));

        let five = RingPlan::new(RingKind::HalfRing, 5);
        assert_eq!(five.len(), 3);
        assert_eq!(hops(&five, 0), row(5, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)], &[(0, 4), (1, 0), (2, 1), (3, 2), (4, 3)]));
        assert_eq!(hops(&five, 1), row(5, &[(0, 2), (1, 3), (2, 4), (3, 0), (4, 1)], &[(0, 3), (1, 4), (2, 0), (3, 1), (4, 2)]));
        assert_eq!(hops(&five, 2), row(5, &[(4, 1), (0, 2), (1, 3), (2, 4), (3, 0)], &[(1, 4), (2, 0), (3, 1), (4, 2), (0, 3)]));
        assert!(five.substeps().iter().flatten().all(|m| m.part == Part::Whole));
    }

    #[test]
    fn the_fold_runs_the_long_way_round() {
        // Failed cable {4, 0} on a ring of 5: the logical order is 0, 1, 2, 3, 4 and the hop 4 => 0
        // is the routed path 4 -> 3 -> 2 -> 1 -> 0.
        let plan = RingPlan::new(RingKind::Folded { failed: 4 }, 5);
        let folds: Vec<&Move> = plan.substeps()[0].iter().filter(|m| m.path.len() > 2).collect();
        assert_eq!(folds.len(), 1);
        assert_eq!(folds[0].path, vec![4, 3, 2, 1, 0]);
        assert_eq!((folds[0].origin, folds[0].dest), (4, 0));
        assert!(plan.substeps().iter().all(|s| s.iter().filter(|m| m.path.len() > 2).count() == 1));
    }
}
