//! The event-driven simulation as first written, kept as the tests' reference: it refills every
//! rate over all active transfers at every event, which is simple to trust and quadratic in the
//! active transfers. The production simulation ([`super::Sim`]) must agree with it.

use super::{Group, Setup, Time, Tr};
use crate::error::{Error, Result};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Runs the reference simulation; returns, per transfer, when its pieces arrive.
pub(super) fn simulate(setup: Setup, fifo: bool, n_links: usize, cap: Vec<f64>) -> Result<Vec<f64>> {
    let n = setup.tr.len();
    let mut sim = Sim {
        fifo,
        now: 0.0,
        remaining: setup.tr.iter().map(|x| x.bytes).collect(),
        tr: setup.tr,
        groups: setup.groups,
        conds: setup.conds,
        waiters: setup.waiters,
        cap,
        rate: vec![0.0; n],
        active: Vec::new(),
        ready: Vec::new(),
        arrivals: BinaryHeap::new(),
        finish: vec![f64::NAN; n],
        queues: vec![Default::default(); n_links],
        waiting: Vec::new(),
        load: vec![0.0; n_links],
        mult: vec![0.0; n_links],
        touched: Vec::new(),
        mark: vec![false; n_links],
    };
    sim.run()?;
    Ok(sim.finish)
}

struct Sim {
    fifo: bool,
    now: f64,
    tr: Vec<Tr>,
    groups: Vec<Group>,
    conds: Vec<super::Cond>,
    /// Per transfer: the conditions its arrival may meet.
    waiters: Vec<Vec<usize>>,
    cap: Vec<f64>,
    remaining: Vec<f64>,
    rate: Vec<f64>,
    active: Vec<usize>,
    ready: Vec<usize>,
    arrivals: BinaryHeap<Reverse<(Time, usize)>>,
    finish: Vec<f64>,
    /// FIFO mode: per link, the transfers queued on it (the head holds the link).
    queues: Vec<std::collections::VecDeque<usize>>,
    /// FIFO mode: queued transfers not transmitting yet, in queue order.
    waiting: Vec<usize>,
    // Scratch space for the water-filling.
    load: Vec<f64>,
    mult: Vec<f64>,
    touched: Vec<usize>,
    mark: Vec<bool>,
}

impl Sim {
    fn run(&mut self) -> Result<()> {
        for g in 0..self.groups.len() {
            self.try_ready(g);
        }
        loop {
            // Starting a group can release the node's next one at once (zero-byte sends).
            while !self.ready.is_empty() {
                let mut batch = std::mem::take(&mut self.ready);
                // Ascending group ids = step order, then order of first appearance in the step:
                // the FIFO tie-break.
                batch.sort_unstable();
                for g in batch {
                    self.start_group(g);
                }
            }
            if self.fifo {
                self.admit();
            }
            self.water_fill();
            let t_done = self.active.iter().map(|&k| self.now + self.remaining[k] / self.rate[k]).fold(f64::INFINITY, f64::min);
            let t_arr = self.arrivals.peek().map_or(f64::INFINITY, |Reverse((t, _))| t.0);
            let t = t_done.min(t_arr);
            if !t.is_finite() {
                break;
            }
            let dt = t - self.now;
            let mut done = Vec::new();
            for &k in &self.active {
                // The transfer(s) that defined t_done finish exactly; the others up to rounding.
                if t == t_done && self.now + self.remaining[k] / self.rate[k] <= t_done {
                    self.remaining[k] = 0.0;
                } else {
                    self.remaining[k] -= self.rate[k] * dt;
                }
                if self.remaining[k] <= 1e-9 * self.tr[k].bytes {
                    done.push(k);
                }
            }
            self.now = t;
            if !done.is_empty() {
                let remaining = &self.remaining;
                self.active.retain(|&k| remaining[k] > 1e-9 * self.tr[k].bytes);
                for k in done {
                    self.transmitted(k);
                }
            }
            while let Some(&Reverse((at, k))) = self.arrivals.peek() {
                if at.0 > self.now {
                    break;
                }
                self.arrivals.pop();
                self.arrive(k, at.0);
            }
        }
        if let Some(k) = self.finish.iter().position(|f| f.is_nan()) {
            return Err(Error::bad(format!("event-driven cost: transfer {k} (counted over all steps) never completed")));
        }
        Ok(())
    }

    fn try_ready(&mut self, g: usize) {
        let gr = &mut self.groups[g];
        if !gr.started && gr.pending == 0 && !gr.prev_pending {
            gr.started = true;
            self.ready.push(g);
        }
    }

    fn start_group(&mut self, g: usize) {
        for i in 0..self.groups[g].transfers.len() {
            let k = self.groups[g].transfers[i];
            if self.tr[k].bytes <= 0.0 {
                self.transmitted(k);
            } else if self.fifo {
                for &(l, _) in &self.tr[k].uses {
                    self.queues[l].push_back(k);
                }
                self.waiting.push(k);
            } else {
                self.active.push(k);
            }
        }
    }

    /// FIFO mode: moves every waiter that heads all the queues of its path to the active set.
    fn admit(&mut self) {
        let queues = &self.queues;
        let tr = &self.tr;
        let active = &mut self.active;
        self.waiting.retain(|&k| {
            let heads_all = tr[k].uses.iter().all(|&(l, _)| queues[l].front() == Some(&k));
            if heads_all {
                active.push(k);
            }
            !heads_all
        });
    }

    /// The last byte of transfer `k` has left at `now`.
    fn transmitted(&mut self, k: usize) {
        let x = &self.tr[k];
        if self.fifo && x.bytes > 0.0 {
            for &(l, _) in &x.uses {
                let head = self.queues[l].pop_front();
                debug_assert_eq!(head, Some(k));
            }
        }
        self.arrivals.push(Reverse((Time(self.now + x.latency_ns), k)));
        let g = x.group;
        self.groups[g].untransmitted -= 1;
        if self.groups[g].untransmitted == 0 {
            if let Some(next) = self.groups[g].next {
                self.groups[next].prev_pending = false;
                self.try_ready(next);
            }
        }
    }

    /// Transfer `k`'s pieces arrive at `at`.
    fn arrive(&mut self, k: usize, at: f64) {
        self.finish[k] = at;
        for c in std::mem::take(&mut self.waiters[k]) {
            if !self.conds[c].met {
                self.conds[c].met = true;
                let g = self.conds[c].group;
                self.groups[g].pending -= 1;
                self.try_ready(g);
            }
        }
    }

    /// Max-min fair rates by progressive filling: raise every unfrozen rate together until a
    /// link saturates, freeze the transfers through it, repeat. In FIFO mode every active
    /// transfer holds its links alone, so this yields the slowest link of its path.
    fn water_fill(&mut self) {
        for &l in &self.touched {
            self.mark[l] = false;
        }
        self.touched.clear();
        for &k in &self.active {
            for &(l, m) in &self.tr[k].uses {
                if !self.mark[l] {
                    self.mark[l] = true;
                    self.touched.push(l);
                    self.load[l] = 0.0;
                    self.mult[l] = 0.0;
                }
                self.mult[l] += m;
            }
        }
        let mut frozen = vec![false; self.active.len()];
        let mut unfrozen = self.active.len();
        while unfrozen > 0 {
            let mut best = f64::INFINITY;
            let mut bottleneck = usize::MAX;
            for &l in &self.touched {
                if self.mult[l] > 0.0 {
                    let share = (self.cap[l] - self.load[l]).max(0.0) / self.mult[l];
                    if share < best {
                        best = share;
                        bottleneck = l;
                    }
                }
            }
            for (i, &k) in self.active.iter().enumerate() {
                if frozen[i] || !self.tr[k].uses.iter().any(|&(l, _)| l == bottleneck) {
                    continue;
                }
                frozen[i] = true;
                unfrozen -= 1;
                self.rate[k] = best;
                for &(l, m) in &self.tr[k].uses {
                    self.load[l] += best * m;
                    self.mult[l] -= m;
                }
            }
        }
    }
}
