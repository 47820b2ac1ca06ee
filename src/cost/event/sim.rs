//! The event-driven simulation, in time proportional to the events: a transfer's rate changes
//! only when a transfer it shares a link with (directly or through others) starts or finishes, so
//! an event refills the rates of its connected group of transfers alone, and finishing times sit
//! in a heap. Bytes left are brought up to date only when a transfer's rate changes.
//!
//! Max-min fair shares are found by progressive filling within each connected group, which gives
//! the same shares as filling over all active transfers at once (groups share no link). In FIFO
//! mode a transfer holds every link of its path alone, so its rate is its slowest link's.

use super::{Cond, Group, Setup, Time, Tr};
use crate::error::{Error, Result};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// The simulation state (module docs).
pub(super) struct Sim {
    fifo: bool,
    now: f64,
    tr: Vec<Tr>,
    groups: Vec<Group>,
    conds: Vec<Cond>,
    waiters: Vec<Vec<usize>>,
    cap: Vec<f64>,
    /// Per transfer: bytes left at time `since`, and the rate since then.
    remaining: Vec<f64>,
    since: Vec<f64>,
    rate: Vec<f64>,
    active: Vec<bool>,
    /// Per transfer: the version of its pending finish event (older events in the heap are stale).
    version: Vec<u32>,
    finishes: BinaryHeap<Reverse<(Time, usize, u32)>>,
    ready: Vec<usize>,
    arrivals: BinaryHeap<Reverse<(Time, usize)>>,
    finish: Vec<f64>,
    /// Fair mode: the active transfers on every link, and the links whose set changed.
    on_link: Vec<Vec<usize>>,
    dirty: Vec<usize>,
    /// FIFO mode: per link, the transfers queued on it (the head holds the link), and the
    /// transfers that may have come to head all their queues.
    queues: Vec<VecDeque<usize>>,
    candidates: Vec<usize>,
    // Scratch space for the water-filling: stamps mark links and transfers seen in a pass.
    load: Vec<f64>,
    mult: Vec<f64>,
    link_seen: Vec<u32>,
    tr_seen: Vec<u32>,
    pass: u32,
    link_filled: Vec<u32>,
    fills: u32,
}

impl Sim {
    pub(super) fn new(setup: Setup, fifo: bool, cap: Vec<f64>) -> Self {
        let (n, n_links) = (setup.tr.len(), cap.len());
        Sim {
            fifo,
            now: 0.0,
            remaining: setup.tr.iter().map(|x| x.bytes).collect(),
            tr: setup.tr,
            groups: setup.groups,
            conds: setup.conds,
            waiters: setup.waiters,
            cap,
            since: vec![0.0; n],
            rate: vec![0.0; n],
            active: vec![false; n],
            version: vec![0; n],
            finishes: BinaryHeap::new(),
            ready: Vec::new(),
            arrivals: BinaryHeap::new(),
            finish: vec![f64::NAN; n],
            on_link: vec![Vec::new(); n_links],
            dirty: Vec::new(),
            queues: vec![VecDeque::new(); n_links],
            candidates: Vec::new(),
            load: vec![0.0; n_links],
            mult: vec![0.0; n_links],
            link_seen: vec![0; n_links],
            tr_seen: vec![0; n],
            pass: 0,
            link_filled: vec![0; n_links],
            fills: 0,
        }
    }

    /// Runs to the end; returns, per transfer, when its pieces arrive.
    pub(super) fn run(mut self) -> Result<Vec<f64>> {
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
            } else {
                self.refill();
            }
            let t_done = self.next_finish();
            let t_arr = self.arrivals.peek().map_or(f64::INFINITY, |Reverse((t, _))| t.0);
            let t = t_done.min(t_arr);
            if !t.is_finite() {
                break;
            }
            self.now = t;
            if t == t_done {
                for k in self.finished_at(t) {
                    self.retire(k);
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
        Ok(self.finish)
    }

    /// The earliest pending finish, dropping stale events.
    fn next_finish(&mut self) -> f64 {
        while let Some(&Reverse((t, k, v))) = self.finishes.peek() {
            if self.active[k] && v == self.version[k] {
                return t.0;
            }
            self.finishes.pop();
        }
        f64::INFINITY
    }

    /// The transfers whose last byte leaves at `t`: those due then, and those due so soon after
    /// that less than a billionth of their bytes is left (rounding).
    fn finished_at(&mut self, t: f64) -> Vec<usize> {
        let mut done = Vec::new();
        while let Some(&Reverse((at, k, v))) = self.finishes.peek() {
            let valid = self.active[k] && v == self.version[k];
            if valid && at.0 > t && (at.0 - t) * self.rate[k] > 1e-9 * self.tr[k].bytes {
                break;
            }
            self.finishes.pop();
            if valid {
                done.push(k);
            }
        }
        done.sort_unstable();
        done
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
                self.candidates.push(k);
            } else {
                self.activate(k);
                for &(l, _) in &self.tr[k].uses {
                    self.on_link[l].push(k);
                    self.dirty.push(l);
                }
            }
        }
    }

    fn activate(&mut self, k: usize) {
        self.active[k] = true;
        self.since[k] = self.now;
    }

    /// Schedules transfer `k`'s finish at its current rate.
    fn set_rate(&mut self, k: usize, rate: f64) {
        self.rate[k] = rate;
        self.version[k] += 1;
        let at = self.now + self.remaining[k] / rate;
        self.finishes.push(Reverse((Time(at), k, self.version[k])));
    }

    /// FIFO mode: starts every candidate that heads all the queues of its path, at its slowest
    /// link's rate.
    fn admit(&mut self) {
        let mut candidates = std::mem::take(&mut self.candidates);
        candidates.sort_unstable();
        candidates.dedup();
        for k in candidates {
            let heads_all = self.tr[k].uses.iter().all(|&(l, _)| self.queues[l].front() == Some(&k));
            if !self.active[k] && self.finish[k].is_nan() && self.remaining[k] > 0.0 && heads_all {
                self.activate(k);
                let rate = self.tr[k].uses.iter().map(|&(l, m)| self.cap[l].max(0.0) / m).fold(f64::INFINITY, f64::min);
                self.set_rate(k, rate);
            }
        }
    }

    /// Fair mode: new max-min fair rates for every group of transfers connected to a link whose
    /// set of transfers changed.
    fn refill(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        self.pass += 1;
        let pass = self.pass;
        for l in dirty {
            if self.link_seen[l] == pass {
                continue;
            }
            // The connected group through link `l`.
            let (mut links, mut group) = (vec![l], Vec::new());
            self.link_seen[l] = pass;
            let mut i = 0;
            while i < links.len() {
                for &k in &self.on_link[links[i]] {
                    if self.tr_seen[k] != pass {
                        self.tr_seen[k] = pass;
                        group.push(k);
                        for &(m, _) in &self.tr[k].uses {
                            if self.link_seen[m] != pass {
                                self.link_seen[m] = pass;
                                links.push(m);
                            }
                        }
                    }
                }
                i += 1;
            }
            group.sort_unstable();
            self.water_fill(&group);
        }
    }

    /// Progressive filling over one connected group: raise its rates together until a link
    /// saturates, freeze the transfers through it, repeat.
    fn water_fill(&mut self, group: &[usize]) {
        let mut touched = Vec::new();
        self.fills += 1;
        for &k in group {
            // Bytes left up to now, at the old rate.
            self.remaining[k] -= self.rate[k] * (self.now - self.since[k]);
            self.since[k] = self.now;
            for &(l, m) in &self.tr[k].uses {
                if self.link_filled[l] != self.fills {
                    self.link_filled[l] = self.fills;
                    touched.push(l);
                    self.load[l] = 0.0;
                    self.mult[l] = 0.0;
                }
                self.mult[l] += m;
            }
        }
        let mut frozen = vec![false; group.len()];
        let mut unfrozen = group.len();
        while unfrozen > 0 {
            let mut best = f64::INFINITY;
            let mut bottleneck = usize::MAX;
            for &l in &touched {
                if self.mult[l] > 0.0 {
                    let share = (self.cap[l] - self.load[l]).max(0.0) / self.mult[l];
                    if share < best {
                        best = share;
                        bottleneck = l;
                    }
                }
            }
            for (i, &k) in group.iter().enumerate() {
                if frozen[i] || !self.tr[k].uses.iter().any(|&(l, _)| l == bottleneck) {
                    continue;
                }
                frozen[i] = true;
                unfrozen -= 1;
                for &(l, m) in &self.tr[k].uses {
                    self.load[l] += best * m;
                    self.mult[l] -= m;
                }
                self.set_rate(k, best);
            }
        }
    }

    /// Takes a transfer whose last byte left out of the active set.
    fn retire(&mut self, k: usize) {
        self.active[k] = false;
        self.remaining[k] = 0.0;
        if self.fifo {
            return;
        }
        for &(l, _) in &self.tr[k].uses {
            let on = &mut self.on_link[l];
            if let Some(i) = on.iter().position(|&x| x == k) {
                on.swap_remove(i);
            }
            self.dirty.push(l);
        }
    }

    /// The last byte of transfer `k` has left at `now`.
    fn transmitted(&mut self, k: usize) {
        let x = &self.tr[k];
        if self.fifo && x.bytes > 0.0 {
            for &(l, _) in &x.uses {
                let head = self.queues[l].pop_front();
                debug_assert_eq!(head, Some(k));
                self.candidates.extend(self.queues[l].front().copied());
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
}
