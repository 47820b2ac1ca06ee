//! The time-expanded program of an all_reduce in T steps, with contributor sets: exact, and
//! large (pieces x contributors x hops x steps), so it decides small instances only.
//!
//! A piece's value at a rank is the set of ranks whose contributions it holds (docs/design/MODEL.md
//! section 2). Per piece p, hop h (from u to v) and step t:
//! - `s[p, h, t]`: p crosses h in step t (one piece per link per step, section 3);
//! - `c[p, h, t]`: that transfer is a `copy` (else a `reduce`);
//! - `H[p, r, v, t]`: v's value of p includes r's contribution at the start of step t (at step 0,
//!   exactly v's own);
//! - `Y[p, r, h, t]` = `s[p, h, t]` and `H[p, r, u, t]`: the transfer carries r's contribution
//!   (a transfer carries the sender's whole value).
//!
//! Either op leaves the receiver with the union of its value and what arrives: a `reduce` merges
//! disjoint sets, and a `copy` is allowed only onto a value it contains (rule 4: a copy that
//! drops a contribution is an error), so it replaces the value by a superset. So H is the running
//! union, and rule 4 becomes: without a copy arriving, the arrivals and the old value are
//! pairwise disjoint; a copy arrives alone (identical copies in one step count once, so one
//! suffices; a copy beside a reduce is an error) and contains the old value. Rule 5: at the end
//! every rank holds every contribution of every piece.

use crate::collective::{Collective, PieceId};
use crate::schedule::{Op, Step, Transfer};
use crate::synth::backends::{Backend, Model, Term, Var};
use crate::topology::hops::HopGraph;
use crate::topology::NodeId;

/// A 0-1 quantity of the program: fixed, or a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bit {
    Zero,
    One,
    Of(Var),
}

/// Adds `coefficient x bit` to a linear form: a variable becomes a term, a constant moves to the
/// right-hand side.
fn add(terms: &mut Vec<Term>, rhs: &mut i64, bit: Bit, coefficient: i64) {
    match bit {
        Bit::Zero => {}
        Bit::One => *rhs -= coefficient,
        Bit::Of(x) => terms.push((x, coefficient)),
    }
}

/// One all_reduce instance over a hop graph (single hops between its ranks).
pub struct AllReduce {
    hops: HopGraph,
    pieces: Vec<PieceId>,
    ranks: Vec<NodeId>,
    /// Sets of hops that share one piece per step: the hops over each link (section 3), or, for a
    /// translation-invariant schedule, the hops of each direction (`symmetric`).
    shared: Vec<Vec<usize>>,
    /// `dist[r][v]`: hops from rank index r to npu v (`u32::MAX` if none).
    dist: Vec<Vec<u32>>,
}

impl AllReduce {
    /// The all_reduce of `c` over `hops`.
    pub fn new(c: &Collective, hops: &HopGraph) -> Self {
        Self::with(hops.clone(), c.pieces().collect(), c.ranks.clone(), hops.on_link.clone())
    }

    /// The all_reduce of some `pieces` over `ranks`, the hops of each set of `shared` carrying
    /// one piece per step between them.
    pub fn with(hops: HopGraph, pieces: Vec<PieceId>, ranks: Vec<NodeId>, shared: Vec<Vec<usize>>) -> Self {
        let dist = ranks.iter().map(|&r| hops.distances(r, false).into_iter().map(|d| d.unwrap_or(u32::MAX)).collect()).collect();
        AllReduce { hops, pieces, ranks, shared, dist }
    }

    /// Number of 0-1 variables of the program with `steps` steps.
    pub fn variables(&self, steps: u32) -> usize {
        let (np, nh) = (self.pieces.len(), self.hops.hops.len());
        let reachable = |t: u32, v: NodeId| self.dist.iter().filter(|d| d[v.index()] <= t).count();
        let holdings: usize = (1..=steps).map(|t| self.ranks.iter().map(|&v| reachable(t, v)).sum::<usize>()).sum();
        // At step 0 a sender holds its own contribution alone: what it carries is its send.
        let carried: usize = (1..steps).map(|t| self.hops.hops.iter().map(|h| reachable(t, h.from)).sum::<usize>()).sum();
        np * (2 * nh * steps as usize + holdings + carried)
    }

    /// Steps that always suffice: a reduce to rank 0 along a BFS tree and a broadcast back, one
    /// hop at a time, one piece after another.
    pub fn sequential_steps(&self) -> u64 {
        let depth: u64 = self.ranks.iter().map(|r| u64::from(self.dist[0][r.index()])).sum();
        self.pieces.len() as u64 * 2 * depth.max(1)
    }

    /// Writes the program for `steps` steps into `backend`.
    pub fn encode<'s>(&'s self, backend: &mut dyn Backend, steps: u32) -> AllReduceProgram<'s> {
        let mut program = AllReduceProgram { instance: self, steps, send: Vec::new(), copy: Vec::new(), held: Vec::new(), carried: Vec::new() };
        program.add_variables(backend);
        program.one_piece_per_link_per_step(backend);
        program.carried_is_the_senders_value(backend);
        program.values_are_running_unions(backend);
        program.rule_four(backend);
        program.every_rank_ends_complete(backend);
        program
    }
}

/// The program for one horizon.
pub struct AllReduceProgram<'a> {
    instance: &'a AllReduce,
    steps: u32,
    /// `s[p][h][t]`.
    send: Vec<Vec<Vec<Var>>>,
    /// `c[p][h][t]`.
    copy: Vec<Vec<Vec<Var>>>,
    /// `H[p][r][v][t]`, t in 0..=steps, v by npu id (only ranks are used).
    held: Vec<Vec<Vec<Vec<Bit>>>>,
    /// `Y[p][r][h][t]`.
    carried: Vec<Vec<Vec<Vec<Bit>>>>,
}

impl AllReduceProgram<'_> {
    fn add_variables(&mut self, backend: &mut dyn Backend) {
        let inst = self.instance;
        let (nh, n, steps) = (inst.hops.hops.len(), inst.hops.out.len(), self.steps);
        let grid = |backend: &mut dyn Backend| -> Vec<Vec<Var>> { (0..nh).map(|_| (0..steps).map(|_| backend.add_bool()).collect()).collect() };
        for _ in &inst.pieces {
            self.send.push(grid(backend));
            self.copy.push(grid(backend));
            let mut held = Vec::new();
            for (r, &rank) in inst.ranks.iter().enumerate() {
                let mut by_node = vec![Vec::new(); n];
                for &v in &inst.ranks {
                    by_node[v.index()] = (0..=steps)
                        .map(|t| match t {
                            0 if v == rank => Bit::One,
                            _ if inst.dist[r][v.index()] > t => Bit::Zero,
                            _ => Bit::Of(backend.add_bool()),
                        })
                        .collect();
                }
                held.push(by_node);
            }
            self.held.push(held);
        }
        for p in 0..inst.pieces.len() {
            let mut carried = Vec::new();
            for r in 0..inst.ranks.len() {
                let by_hop = (0..nh)
                    .map(|h| {
                        (0..steps as usize)
                            .map(|t| match self.held[p][r][inst.hops.hops[h].from.index()][t] {
                                Bit::Zero => Bit::Zero,
                                Bit::One => Bit::Of(self.send[p][h][t]),
                                Bit::Of(_) => Bit::Of(backend.add_bool()),
                            })
                            .collect()
                    })
                    .collect();
                carried.push(by_hop);
            }
            self.carried.push(carried);
        }
    }

    /// docs/design/MODEL.md section 3: a link carries at most one piece per step (or a direction
    /// one, for a translation-invariant schedule).
    fn one_piece_per_link_per_step(&self, backend: &mut dyn Backend) {
        for on_link in &self.instance.shared {
            for t in 0..self.steps as usize {
                let terms: Vec<Term> = self.send.iter().flat_map(|by_hop| on_link.iter().map(move |&h| (by_hop[h][t], 1))).collect();
                if terms.len() > 1 {
                    backend.add_linear_le(&terms, 1);
                }
            }
        }
    }

    /// `Y = s and H[sender]` (a transfer carries the sender's whole value), and `c <= s`.
    fn carried_is_the_senders_value(&self, backend: &mut dyn Backend) {
        let inst = self.instance;
        for p in 0..inst.pieces.len() {
            for (h, hop) in inst.hops.hops.iter().enumerate() {
                for t in 0..self.steps as usize {
                    let s = self.send[p][h][t];
                    backend.add_linear_le(&[(self.copy[p][h][t], 1), (s, -1)], 0);
                    for r in 0..inst.ranks.len() {
                        let (Bit::Of(y), Bit::Of(held)) = (self.carried[p][r][h][t], self.held[p][r][hop.from.index()][t]) else { continue };
                        backend.add_linear_le(&[(y, 1), (s, -1)], 0);
                        backend.add_linear_le(&[(y, 1), (held, -1)], 0);
                        backend.add_linear_le(&[(s, 1), (held, 1), (y, -1)], 1);
                    }
                }
            }
        }
    }

    /// `H[t+1]` is the union of `H[t]` and the contributions carried in: at least each of them,
    /// at most their sum.
    fn values_are_running_unions(&self, backend: &mut dyn Backend) {
        let inst = self.instance;
        for p in 0..inst.pieces.len() {
            for r in 0..inst.ranks.len() {
                for &v in &inst.ranks {
                    for t in 0..self.steps as usize {
                        let (now, next) = (self.held[p][r][v.index()][t], self.held[p][r][v.index()][t + 1]);
                        let arriving: Vec<Bit> = inst.hops.into[v.index()].iter().map(|&h| self.carried[p][r][h][t]).collect();
                        for lower in std::iter::once(now).chain(arriving.iter().copied()) {
                            // lower <= next
                            let (mut terms, mut rhs) = (Vec::new(), 0);
                            add(&mut terms, &mut rhs, lower, 1);
                            add(&mut terms, &mut rhs, next, -1);
                            constrain_le(backend, &terms, rhs);
                        }
                        // next <= now + arrivals
                        let (mut terms, mut rhs) = (Vec::new(), 0);
                        add(&mut terms, &mut rhs, next, 1);
                        add(&mut terms, &mut rhs, now, -1);
                        arriving.iter().for_each(|&y| add(&mut terms, &mut rhs, y, -1));
                        constrain_le(backend, &terms, rhs);
                    }
                }
            }
        }
    }

    /// Rule 4: without a copy, what arrives and what is held are pairwise disjoint; a copy
    /// arrives alone and contains what is held.
    fn rule_four(&self, backend: &mut dyn Backend) {
        let inst = self.instance;
        for p in 0..inst.pieces.len() {
            for &v in &inst.ranks {
                let into = &inst.hops.into[v.index()];
                for t in 0..self.steps as usize {
                    for r in 0..inst.ranks.len() {
                        // H[v] + sum Y - sum c <= 1
                        let (mut terms, mut rhs) = (Vec::new(), 1);
                        add(&mut terms, &mut rhs, self.held[p][r][v.index()][t], 1);
                        into.iter().for_each(|&h| add(&mut terms, &mut rhs, self.carried[p][r][h][t], 1));
                        terms.extend(into.iter().map(|&h| (self.copy[p][h][t], -1)));
                        constrain_le(backend, &terms, rhs);
                        // A copy contains the old value: H[v] - H[u] + c <= 1.
                        for &h in into {
                            let (mut terms, mut rhs) = (vec![(self.copy[p][h][t], 1)], 1);
                            add(&mut terms, &mut rhs, self.held[p][r][v.index()][t], 1);
                            add(&mut terms, &mut rhs, self.held[p][r][inst.hops.hops[h].from.index()][t], -1);
                            constrain_le(backend, &terms, rhs);
                        }
                    }
                    // A copy over h arrives alone: sum of the other sends + M c[h] <= M.
                    let m = into.len() as i64 - 1;
                    if m > 0 {
                        for &h in into {
                            let mut terms: Vec<Term> = into.iter().filter(|&&g| g != h).map(|&g| (self.send[p][g][t], 1)).collect();
                            terms.push((self.copy[p][h][t], m));
                            backend.add_linear_le(&terms, m);
                        }
                    }
                }
            }
        }
    }

    /// Rule 5: every rank holds every contribution of every piece at the end.
    fn every_rank_ends_complete(&self, backend: &mut dyn Backend) {
        let end = self.steps as usize;
        for held in &self.held {
            for by_node in held {
                for &v in &self.instance.ranks {
                    let (mut terms, mut rhs) = (Vec::new(), 1);
                    add(&mut terms, &mut rhs, by_node[v.index()][end], 1);
                    if terms.is_empty() {
                        // Fixed: 1 is met (rhs became 0); 0 (too far for the horizon) is not.
                        if rhs != 0 {
                            contradiction(backend);
                        }
                        continue;
                    }
                    backend.add_linear_eq(&terms, rhs);
                }
            }
        }
    }

    /// The schedule of a solution: one transfer per send, `copy` or `reduce` as chosen. Empty
    /// steps are dropped.
    pub fn decode(&self, model: &Model) -> Vec<Step> {
        let inst = self.instance;
        (0..self.steps as usize)
            .map(|t| {
                let mut step = Step::default();
                for (p, &piece) in inst.pieces.iter().enumerate() {
                    for (h, hop) in inst.hops.hops.iter().enumerate() {
                        if model.value(self.send[p][h][t]) == 1 {
                            let op = if model.value(self.copy[p][h][t]) == 1 { Op::Copy } else { Op::Reduce };
                            step.transfers.push(Transfer { path: hop.path.clone(), op, pieces: vec![piece] });
                        }
                    }
                }
                step
            })
            .filter(|s| !s.transfers.is_empty())
            .collect()
    }
}

/// Adds `terms <= rhs`; without terms it holds or fails whatever the variables are, and a
/// failing one makes the program infeasible.
fn constrain_le(backend: &mut dyn Backend, terms: &[Term], rhs: i64) {
    if !terms.is_empty() {
        backend.add_linear_le(terms, rhs);
    } else if rhs < 0 {
        contradiction(backend);
    }
}

/// Makes the program infeasible (a fresh variable both 0 and 1), for constant constraints that
/// fail: the backends need not take constraints without variables.
fn contradiction(backend: &mut dyn Backend) {
    let x = backend.add_bool();
    backend.add_linear_le(&[(x, 1)], 0);
    backend.add_linear_eq(&[(x, 1)], 1);
}
