//! The happens-before order of an MSCCL program's steps, for finding data races
//! (docs/design/FORMATS.md "MSCCL XML", "Data races").
//!
//! A step happens before another when a chain of these orders joins them: a threadblock's
//! steps in document order; a step waiting (`depid`/`deps`, or a `nop` just before it) on the
//! step whose signal ends the wait; a send and the receive it is matched with on its connection
//! (the receive ends after the send has read all it sends). Nothing else orders steps: not the
//! FIFOs' sizes (a send may run ahead of its receiver), not the order a simulation happens to
//! run threadblocks in. So two steps of one gpu that touch one chunk, one of them writing it,
//! race unless one happens before the other; and whether a program has such a pair does not
//! depend on the order any run takes.
//!
//! The order is kept as a vector clock per step: for every threadblock, how many of its steps
//! happen before (or are) the step. Since races are between steps of one gpu, a program too
//! large for every threadblock's clock is ordered one gpu at a time, each watching its own.

/// The most clock entries (steps x threadblocks watched) one order keeps; a larger program is
/// checked one gpu at a time ([`StepGraph::order`] over that gpu's threadblocks, in as many
/// orders as its threadblocks need).
pub const MAX_CLOCK_ENTRIES: usize = 1 << 25;

/// The most work (steps and edges, times the threadblocks watched, summed over the gpus) spent
/// on orders one gpu at a time (about 30 s on one core); a larger program is not checked for
/// races.
pub const MAX_ORDER_WORK: usize = 1 << 35;

/// A program's steps, numbered threadblock after threadblock (each threadblock's in program
/// order), with what orders them, in a topological order.
pub struct StepGraph {
    /// Per step: its threadblock and position in it.
    place: Vec<(usize, u32)>,
    /// Per step: the steps that happen just before it (the step before it in its threadblock,
    /// then the further edges).
    preds: Vec<Vec<usize>>,
    /// Every step, each after those that happen before it.
    topological: Vec<usize>,
}

impl StepGraph {
    /// The graph of `lengths[t]` steps per threadblock in program order, and the further
    /// `edges` (earlier step, later step) between steps of different threadblocks. `None`: the
    /// edges make a cycle (a program that cannot run to its end).
    pub fn new(lengths: &[usize], edges: &[(usize, usize)]) -> Option<StepGraph> {
        let place: Vec<(usize, u32)> = lengths.iter().enumerate().flat_map(|(t, &n)| (0..n).map(move |k| (t, k as u32))).collect();
        let steps = place.len();
        let mut preds: Vec<Vec<usize>> = (0..steps).map(|x| if place[x].1 > 0 { vec![x - 1] } else { Vec::new() }).collect();
        let mut succs: Vec<Vec<usize>> = vec![Vec::new(); steps];
        for x in (0..steps).filter(|&x| place[x].1 > 0) {
            succs[x - 1].push(x);
        }
        for &(a, b) in edges.iter().filter(|&&(a, b)| a < steps && b < steps) {
            preds[b].push(a);
            succs[a].push(b);
        }
        let mut indegree: Vec<usize> = preds.iter().map(Vec::len).collect();
        let mut ready: Vec<usize> = (0..steps).filter(|&x| indegree[x] == 0).collect();
        let mut topological = Vec::with_capacity(steps);
        while let Some(x) = ready.pop() {
            topological.push(x);
            for &s in &succs[x] {
                indegree[s] -= 1;
                if indegree[s] == 0 {
                    ready.push(s);
                }
            }
        }
        (topological.len() == steps).then_some(StepGraph { place, preds, topological })
    }

    /// The number of steps.
    pub fn steps(&self) -> usize {
        self.place.len()
    }

    /// The threadblock of step `x` (numbered across the gpus, as the steps are).
    pub fn threadblock(&self, x: usize) -> usize {
        self.place[x].0
    }

    /// The work of an order watching `threadblocks` of them: steps and edges, times that.
    pub fn work(&self, threadblocks: usize) -> usize {
        (self.place.len() + self.preds.iter().map(Vec::len).sum::<usize>()).saturating_mul(threadblocks)
    }

    /// The happens-before order as seen by the threadblocks `watched` (distinct; it answers
    /// whether a step of one of them happens before any step). `None` beyond `limit` clock
    /// entries ([`MAX_CLOCK_ENTRIES`] but in tests).
    pub fn order(&self, watched: &[usize], limit: usize) -> Option<HappensBefore> {
        let (steps, width) = (self.place.len(), watched.len());
        if steps.checked_mul(width)? > limit {
            return None;
        }
        let threadblocks = self.place.last().map_or(0, |p| p.0 + 1);
        let mut column = vec![u32::MAX; threadblocks.max(watched.iter().map(|&t| t + 1).max().unwrap_or(0))];
        for (i, &t) in watched.iter().enumerate() {
            column[t] = i as u32;
        }
        // A threadblock has fewer than 2^16 steps (the runtimes allow 256).
        let mut clocks = vec![0u16; steps * width];
        for &x in &self.topological {
            for &p in &self.preds[x] {
                let (before, after) = clocks.split_at_mut(x.max(p) * width);
                let (from, to) =
                    if p < x { (&before[p * width..][..width], &mut after[..width]) } else { (&after[..width], &mut before[x * width..][..width]) };
                for (c, &v) in to.iter_mut().zip(from) {
                    *c = (*c).max(v);
                }
            }
            let (t, k) = self.place[x];
            if let Some(&i) = column.get(t).filter(|&&i| i != u32::MAX) {
                clocks[x * width + i as usize] = u16::try_from(k + 1).unwrap_or(u16::MAX);
            }
        }
        Some(HappensBefore { column, width, place: self.place.clone(), clocks })
    }
}

/// The happens-before order of a program's steps as seen by some of its threadblocks: a vector
/// clock per step, for every watched threadblock how many of its steps happen before (or are)
/// the step.
pub struct HappensBefore {
    /// Per threadblock: its column in the clocks (`u32::MAX`: not watched).
    column: Vec<u32>,
    /// The watched threadblocks: entries per step.
    width: usize,
    /// Per step: its threadblock and position in it.
    place: Vec<(usize, u32)>,
    clocks: Vec<u16>,
}

impl HappensBefore {
    /// Whether step `a`, of a watched threadblock, happens before step `b` (or is it).
    pub fn ordered(&self, a: usize, b: usize) -> bool {
        let (t, k) = self.place[a];
        let width = self.width;
        debug_assert!(self.column[t] != u32::MAX, "threadblock {t} is not watched");
        u32::from(self.clocks[b * width + self.column[t] as usize]) > k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_order_and_edges_order_steps_transitively() {
        // Threadblocks of 2, 2 and 1 steps: 0 1 | 2 3 | 4; step 0 -> 3, step 3 -> 4.
        let graph = StepGraph::new(&[2, 2, 1], &[(0, 3), (3, 4)]).unwrap();
        let hb = graph.order(&[0, 1, 2], MAX_CLOCK_ENTRIES).unwrap();
        assert!(hb.ordered(0, 1) && hb.ordered(0, 3) && hb.ordered(0, 4) && hb.ordered(2, 4) && hb.ordered(4, 4));
        assert!(!hb.ordered(1, 3) && !hb.ordered(3, 1) && !hb.ordered(1, 4) && !hb.ordered(4, 0));
        // Watching threadblock 1 alone answers the same for its steps, through the others.
        let one = graph.order(&[1], MAX_CLOCK_ENTRIES).unwrap();
        assert!(graph.order(&[0, 1, 2], 14).is_none(), "5 steps x 3 threadblocks");
        for b in 0..5 {
            for a in [2, 3] {
                assert_eq!(one.ordered(a, b), hb.ordered(a, b), "{a} before {b}");
            }
        }
        assert!(StepGraph::new(&[1, 1], &[(0, 1), (1, 0)]).is_none(), "a cycle");
    }
}
