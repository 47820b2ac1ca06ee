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
//! happen before (or are) the step.

/// The most clock entries (steps x threadblocks) kept; a larger program is not checked.
pub const MAX_CLOCK_ENTRIES: usize = 1 << 25;

/// The happens-before order of a program's steps, numbered threadblock after threadblock (the
/// steps of threadblock `t` are `starts[t]..starts[t + 1]`, in program order).
pub struct HappensBefore {
    threadblocks: usize,
    /// Per step: its threadblock and position in it.
    place: Vec<(usize, u32)>,
    /// Per step, `threadblocks` entries: how many steps of each threadblock happen before or
    /// are it.
    clocks: Vec<u32>,
}

impl HappensBefore {
    /// The order of `lengths[t]` steps per threadblock in program order, and the further
    /// `edges` (earlier step, later step) between steps of different threadblocks. `None`: the
    /// program is too large ([`MAX_CLOCK_ENTRIES`]) or the edges make a cycle (a program that
    /// cannot run to its end).
    pub fn new(lengths: &[usize], edges: &[(usize, usize)]) -> Option<HappensBefore> {
        let threadblocks = lengths.len();
        let place: Vec<(usize, u32)> = lengths.iter().enumerate().flat_map(|(t, &n)| (0..n).map(move |k| (t, k as u32))).collect();
        let steps = place.len();
        if steps.checked_mul(threadblocks)? > MAX_CLOCK_ENTRIES {
            return None;
        }
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); steps];
        let mut indegree = vec![0usize; steps];
        for (x, &(_, k)) in place.iter().enumerate() {
            if k > 0 {
                preds[x].push(x - 1);
                indegree[x] += 1;
            }
        }
        let mut succs: Vec<Vec<usize>> = vec![Vec::new(); steps];
        for x in 0..steps {
            if place[x].1 > 0 {
                succs[x - 1].push(x);
            }
        }
        for &(a, b) in edges {
            if a < steps && b < steps {
                preds[b].push(a);
                succs[a].push(b);
                indegree[b] += 1;
            }
        }
        let mut clocks = vec![0u32; steps * threadblocks];
        let mut ready: Vec<usize> = (0..steps).filter(|&x| indegree[x] == 0).collect();
        let mut done = 0;
        while let Some(x) = ready.pop() {
            done += 1;
            for &p in &preds[x] {
                for t in 0..threadblocks {
                    let v = clocks[p * threadblocks + t];
                    let c = &mut clocks[x * threadblocks + t];
                    *c = (*c).max(v);
                }
            }
            let (t, k) = place[x];
            clocks[x * threadblocks + t] = k + 1;
            for &s in &succs[x] {
                indegree[s] -= 1;
                if indegree[s] == 0 {
                    ready.push(s);
                }
            }
        }
        (done == steps).then_some(HappensBefore { threadblocks, place, clocks })
    }

    /// Whether step `a` happens before step `b` (or is it).
    pub fn ordered(&self, a: usize, b: usize) -> bool {
        let (t, k) = self.place[a];
        self.clocks[b * self.threadblocks + t] > k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_order_and_edges_order_steps_transitively() {
        // Threadblocks of 2, 2 and 1 steps: 0 1 | 2 3 | 4; step 0 -> 3, step 3 -> 4.
        let hb = HappensBefore::new(&[2, 2, 1], &[(0, 3), (3, 4)]).unwrap();
        assert!(hb.ordered(0, 1) && hb.ordered(0, 3) && hb.ordered(0, 4) && hb.ordered(2, 4) && hb.ordered(4, 4));
        assert!(!hb.ordered(1, 3) && !hb.ordered(3, 1) && !hb.ordered(1, 4) && !hb.ordered(4, 0));
        assert!(HappensBefore::new(&[1, 1], &[(0, 1), (1, 0)]).is_none(), "a cycle");
    }
}
