//! The time-expanded program for an all-to-all in T steps, and its decomposition into a schedule.
//!
//! Commodities are aggregated per destination: `f[d, h, t]` = 1 when a piece bound for rank `d`
//! crosses hop `h` in step `t`. This is exact, not a relaxation: pieces bound for one destination
//! are interchangeable for routing (they start at different ranks, but once held by a node any of
//! them can take any onward hop), so an integral aggregated flow in the time-expanded graph
//! decomposes into unit paths, one per piece, by following the flow forward from the sources
//! (`decode` does exactly that, choosing concrete pieces greedily at every node). Hence a
//! schedule with T steps exists iff the aggregated program is feasible.
//!
//! Since a link carries at most one piece per step, every `f` is 0-1; the holdings
//! `h[d, v, t]` are not variables but the linear expressions `held_at_start`, which keeps the
//! program pure 0-1 (pseudo-boolean for z3, fewer columns for microlp).

use crate::collective::{Collective, PieceId};
use crate::schedule::{Op, Step, Transfer};
use crate::synth::backends::{Backend, Model, Term, Var};
use crate::topology::hops::HopGraph;
use crate::topology::NodeId;

/// The pieces to move and where they go, grouped by destination.
#[derive(Clone, Debug)]
pub struct Demand {
    /// Every required piece with its source and destination npus.
    pub pieces: Vec<(PieceId, NodeId, NodeId)>,
    /// The distinct destinations, in rank order.
    pub dests: Vec<NodeId>,
    /// `initial[d][v]`: pieces bound for `dests[d]` that npu `v` holds at the start.
    pub initial: Vec<Vec<i64>>,
}

impl Demand {
    /// The required pieces of an all-to-all (a non-uniform block of 0 bytes moves nothing).
    pub fn all_to_all(c: &Collective, npus: usize) -> Self {
        let mut pieces = Vec::new();
        for i in (0..c.piece_space()).filter(|&i| c.is_required_index(i)) {
            let p = c.piece_at(i);
            let (s, d) = (p.parts()[0] as usize, p.parts()[1] as usize);
            pieces.push((p, c.ranks[s], c.ranks[d]));
        }
        let dests: Vec<NodeId> = c.ranks.iter().copied().filter(|r| pieces.iter().any(|p| p.2 == *r)).collect();
        let mut initial = vec![vec![0i64; npus]; dests.len()];
        for &(_, s, d) in &pieces {
            let di = dests.iter().position(|&x| x == d).unwrap_or(0);
            initial[di][s.index()] += 1;
        }
        Demand { pieces, dests, initial }
    }

    /// Pieces bound for destination `d` (an index into `dests`).
    pub fn need(&self, d: usize) -> i64 {
        self.initial[d].iter().sum()
    }
}

/// Reachability in hops, shared by every horizon T.
#[derive(Clone, Debug)]
pub struct Reach {
    /// `to_dest[d][v]`: hops from npu v to `dests[d]` (`u32::MAX` if none).
    pub to_dest: Vec<Vec<u32>>,
    /// `earliest[d][v]`: the first step at which v can hold a piece bound for `dests[d]`.
    pub earliest: Vec<Vec<u32>>,
}

impl Reach {
    /// Distances in hops for every destination of the demand.
    pub fn new(hops: &HopGraph, demand: &Demand) -> Self {
        let n = hops.out.len();
        let mut to_dest = Vec::new();
        let mut earliest = Vec::new();
        let from: Vec<Vec<u32>> = (0..n as u32).map(|u| hops.distances(NodeId(u), false).into_iter().map(|d| d.unwrap_or(u32::MAX)).collect()).collect();
        for (d, &dest) in demand.dests.iter().enumerate() {
            to_dest.push((0..n).map(|v| from[v][dest.index()]).collect());
            let sources: Vec<usize> = (0..n).filter(|&v| demand.initial[d][v] > 0).collect();
            earliest.push((0..n).map(|v| sources.iter().map(|&s| from[s][v]).min().unwrap_or(u32::MAX)).collect());
        }
        Reach { to_dest, earliest }
    }

    /// Whether a piece bound for destination `d` may cross hop `from -> to` in step `t` of `steps`
    /// at all: it can be at `from` by then, can still reach `d` in time, and `from` is not `d`
    /// (a destination keeps its pieces). Variables failing this are fixed to 0 by omission.
    pub(super) fn useful(&self, demand: &Demand, d: usize, from: NodeId, to: NodeId, t: u32, steps: u32) -> bool {
        from != demand.dests[d] && self.earliest[d][from.index()] <= t && self.to_dest[d][to.index()].saturating_add(t + 1) <= steps
    }

    /// Number of 0-1 variables of the program with `steps` steps.
    ///
    /// Counted in closed form: the steps `t` where [`Reach::useful`] holds run from the earliest
    /// step at the sender to the last one that leaves time to reach the destination.
    pub fn variables(&self, hops: &HopGraph, demand: &Demand, steps: u32) -> usize {
        let mut count = 0u64;
        for (d, &dest) in demand.dests.iter().enumerate() {
            for h in hops.hops.iter().filter(|h| h.from != dest) {
                let (early, to_go) = (u64::from(self.earliest[d][h.from.index()]), u64::from(self.to_dest[d][h.to.index()]));
                count += u64::from(steps).saturating_sub(early.saturating_add(to_go));
            }
        }
        usize::try_from(count).unwrap_or(usize::MAX)
    }
}

/// The program for one horizon: the send variables of every (destination, hop, step).
pub struct TimeExpanded<'a> {
    hops: &'a HopGraph,
    demand: &'a Demand,
    steps: u32,
    sends: Vec<Option<Var>>,
}

impl<'a> TimeExpanded<'a> {
    /// Writes the program for `steps` steps into `backend`.
    pub fn encode<B: Backend + ?Sized>(backend: &mut B, hops: &'a HopGraph, demand: &'a Demand, reach: &Reach, steps: u32) -> Self {
        let (nd, nh, nt) = (demand.dests.len(), hops.hops.len(), steps as usize);
        let mut sends = vec![None; nd * nh * nt];
        for d in 0..nd {
            for (h, hop) in hops.hops.iter().enumerate() {
                for t in 0..steps {
                    if reach.useful(demand, d, hop.from, hop.to, t, steps) {
                        sends[(d * nh + h) * nt + t as usize] = Some(backend.add_bool());
                    }
                }
            }
        }
        let p = TimeExpanded { hops, demand, steps, sends };
        p.one_piece_per_link_per_step(backend);
        p.send_only_what_is_held(backend);
        p.every_piece_arrives(backend);
        p
    }

    /// `f[d, h, t]`, or `None` where it is fixed to 0.
    fn send(&self, d: usize, h: usize, t: u32) -> Option<Var> {
        self.sends[(d * self.hops.hops.len() + h) * self.steps as usize + t as usize]
    }

    /// The terms of "pieces for d that v holds at the start of step t", minus its constant
    /// `initial[d][v]`: what arrived before t minus what left before t.
    fn held_at_start(&self, d: usize, v: NodeId, t: u32) -> Vec<Term> {
        let mut terms = Vec::new();
        for s in 0..t {
            terms.extend(self.hops.into[v.index()].iter().filter_map(|&h| self.send(d, h, s)).map(|x| (x, 1)));
            terms.extend(self.hops.out[v.index()].iter().filter_map(|&h| self.send(d, h, s)).map(|x| (x, -1)));
        }
        terms
    }

    /// docs/design/MODEL.md 3: "For step counts ... a link carries at most one piece per step" (and rule 2,
    /// "within one step, every directed link appears in at most one transfer's path", which a
    /// hop through switches must respect on every link of its path).
    fn one_piece_per_link_per_step<B: Backend + ?Sized>(&self, backend: &mut B) {
        for on_link in &self.hops.on_link {
            for t in 0..self.steps {
                let terms: Vec<Term> =
                    (0..self.demand.dests.len()).flat_map(|d| on_link.iter().filter_map(move |&h| self.send(d, h, t))).map(|x| (x, 1)).collect();
                if terms.len() > 1 {
                    backend.add_linear_le(&terms, 1);
                }
            }
        }
    }

    /// docs/design/MODEL.md 4, rule 3: "every piece a transfer carries is held by the sender at the start of
    /// the step" (all transfers of step t read the state at the start of step t, so a piece that
    /// arrives in step t can leave in step t+1 at the earliest). Also keeps holdings >= 0.
    fn send_only_what_is_held<B: Backend + ?Sized>(&self, backend: &mut B) {
        for d in 0..self.demand.dests.len() {
            for v in 0..self.hops.out.len() {
                let v = NodeId(v as u32);
                for t in 0..self.steps {
                    let mut terms: Vec<Term> = self.hops.out[v.index()].iter().filter_map(|&h| self.send(d, h, t)).map(|x| (x, 1)).collect();
                    if terms.is_empty() {
                        continue;
                    }
                    // sent(t) <= initial + held_at_start(t)  <=>  sent(t) - held_at_start(t) <= initial
                    terms.extend(self.held_at_start(d, v, t).into_iter().map(|(x, c)| (x, -c)));
                    backend.add_linear_le(&terms, self.demand.initial[d][v.index()]);
                }
            }
        }
    }

    /// docs/design/MODEL.md 4, rule 5: "at the end, every postcondition holds": every piece bound for d is
    /// at d after step T. Nothing leaves d, so counting arrivals suffices.
    fn every_piece_arrives<B: Backend + ?Sized>(&self, backend: &mut B) {
        for (d, &dest) in self.demand.dests.iter().enumerate() {
            let terms: Vec<Term> =
                (0..self.steps).flat_map(|t| self.hops.into[dest.index()].iter().filter_map(move |&h| self.send(d, h, t))).map(|x| (x, 1)).collect();
            backend.add_linear_eq(&terms, self.demand.need(d) - self.demand.initial[d][dest.index()]);
        }
    }

    /// Turns a solution into steps of single-hop transfers, one piece each. At every node the
    /// pieces bound for d form a pool; a send of `f[d, h, t]` takes any piece of the sender's
    /// pool (they are interchangeable), and arrivals join the receiver's pool after the step.
    pub fn decode(&self, model: &Model) -> Vec<Step> {
        let n = self.hops.out.len();
        let mut pools: Vec<Vec<Vec<PieceId>>> = vec![vec![Vec::new(); n]; self.demand.dests.len()];
        for &(p, s, d) in &self.demand.pieces {
            let di = self.demand.dests.iter().position(|&x| x == d).unwrap_or(0);
            pools[di][s.index()].push(p);
        }
        let mut steps = Vec::new();
        for t in 0..self.steps {
            let mut step = Step::default();
            let mut arrivals = Vec::new();
            for (d, pool) in pools.iter_mut().enumerate() {
                for (h, hop) in self.hops.hops.iter().enumerate() {
                    let Some(x) = self.send(d, h, t) else { continue };
                    if model.value(x) != 1 {
                        continue;
                    }
                    // The program guarantees a held piece; an empty pool would be a solver bug,
                    // which verification then reports rather than a panic here.
                    if let Some(p) = pool[hop.from.index()].pop() {
                        step.transfers.push(Transfer { path: hop.path.clone(), op: Op::Copy, pieces: vec![p] });
                        arrivals.push((d, hop.to, p));
                    }
                }
            }
            for (d, v, p) in arrivals {
                pools[d][v.index()].push(p);
            }
            // An empty step adds nothing: the program at T allows idling, the schedule need not.
            if !step.transfers.is_empty() {
                steps.push(step);
            }
        }
        steps
    }
}
