//! Lower bounds on the steps of a schedule (docs/design/MODEL.md sections 3 and 6: a transfer goes
//! from a rank to a rank, a link carries one piece per step), each with the witness that the
//! certificate carries and the checker ([`collsched_checker`]) re-derives:
//!
//! - `steps` (distance): the farthest (source, destination) pair in single hops;
//! - `steps_transmissions`: every piece needs a number of transfers (section 6: all_to_all 1,
//!   all_gather and reduce_scatter R-1, all_reduce 2(R-1)), and each uses a link leaving a rank
//!   and a link entering a rank, at most one piece per link and step: the count over the up links
//!   leaving ranks (or entering them), rounded up;
//! - `steps_cut`: the pieces that must leave a node set (the rule of [`super::cut::crossing`]),
//!   over the up links leaving it, rounded up;
//! - `steps_flow` (all_to_all): lengths y on the links; in T steps a link carries at most T pieces,
//!   so `T x sum_e y_e >= sum over pieces of y-distance` ([`super::flow::steps_flow_bound`];
//!   every length 1 is the volume bound, the indicator of a cut is that cut).

use super::cut::{candidate_cuts, crossing, links_leaving, membership, tighten, Crossing};
use super::flow::{steps_flow_bound, FlowOptions};
use super::{farthest, transfers_per_piece, Farthest};
use crate::collective::{Collective, CollectiveKind};
use crate::topology::{NodeId, Topology};
use crate::units::Rational;
use num_traits::{ToPrimitive, Zero};
use serde_json::{json, Value};
use std::time::Duration;

/// Why a steps bound holds: the witness of one claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepsWitness {
    /// The single-hop distance from `source` to `destination` (claim `steps`).
    Distance {
        /// Where a piece (or contribution) starts.
        source: NodeId,
        /// A rank that needs it.
        destination: NodeId,
    },
    /// The transfers every piece needs over the links leaving ranks, or entering them with `into`
    /// (claim `steps_transmissions`).
    Transmissions {
        /// Count the links entering ranks.
        into: bool,
    },
    /// The pieces that must leave `nodes` over the links leaving it, or with `into` the pieces
    /// that must enter it over the links entering it (claim `steps_cut`).
    Cut {
        /// The node set, in increasing id order.
        nodes: Vec<NodeId>,
        /// Count what enters the set.
        into: bool,
    },
    /// An integer length per link, down links 0 (claim `steps_flow`, all_to_all).
    Flow {
        /// The lengths, by link id.
        lengths: Vec<u64>,
    },
}

/// A lower bound on the steps with its witness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepsClaim {
    /// The bound.
    pub steps: u32,
    /// Why it holds.
    pub witness: StepsWitness,
}

impl StepsClaim {
    /// The claim's name in a certificate (`steps`, `steps_transmissions`, `steps_cut`,
    /// `steps_flow`).
    pub fn bound_name(&self) -> &'static str {
        match self.witness {
            StepsWitness::Distance { .. } => "steps",
            StepsWitness::Transmissions { .. } => "steps_transmissions",
            StepsWitness::Cut { .. } => "steps_cut",
            StepsWitness::Flow { .. } => "steps_flow",
        }
    }

    /// The claim as a certificate writes it (the format of [`collsched_checker`]).
    pub fn to_json(&self) -> Value {
        let witness = match &self.witness {
            StepsWitness::Distance { source, destination } => json!({"source": source.0, "destination": destination.0}),
            StepsWitness::Transmissions { into } => json!({"into": into}),
            StepsWitness::Cut { nodes, into } => json!({"nodes": nodes.iter().map(|n| n.0).collect::<Vec<_>>(), "into": into}),
            StepsWitness::Flow { lengths } => json!({"lengths": lengths.iter().map(|y| y.to_string()).collect::<Vec<_>>()}),
        };
        json!({"bound": self.bound_name(), "value": self.steps.to_string(), "witness": witness})
    }
}

/// The steps bounds of an instance: the best claim of each kind that applies.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StepsBounds {
    /// The claims, distance first.
    pub claims: Vec<StepsClaim>,
}

impl StepsBounds {
    /// The largest bound (0 when nothing has to move).
    pub fn best(&self) -> u32 {
        self.claims.iter().map(|c| c.steps).max().unwrap_or(0)
    }
}

/// `ceil(a / b)` for `b > 0`.
fn ceil_div(a: u64, b: u64) -> u32 {
    u32::try_from(a.div_ceil(b)).unwrap_or(u32::MAX)
}

/// The required pieces of `c`, by block: per block `(i, j)` of an all_to_all its `pieces` when
/// it has bytes; per block of the other kinds its `pieces`.
fn required_pieces(c: &Collective) -> u64 {
    let r = c.num_ranks();
    let blocks = match c.kind {
        CollectiveKind::AllToAll if c.is_uniform() => r * r.saturating_sub(1),
        CollectiveKind::AllToAll => (0..r).flat_map(|i| (0..r).map(move |j| (i, j))).filter(|&(i, j)| i != j && c.block_size(i, j) > Rational::zero()).count(),
        _ => r,
    };
    blocks as u64 * u64::from(c.pieces)
}

/// The pieces that must leave the node set `u` ([`crossing`], counted in pieces).
pub fn pieces_crossing(c: &Collective, u: &[bool]) -> u64 {
    let blocks = match crossing(c, u) {
        Crossing::Blocks(pairs) => pairs.into_iter().filter(|&(i, j)| c.block_size(i, j) > Rational::zero()).count() as u64,
        Crossing::EqualBlocks(n) => n,
        Crossing::WholeBlocks(n) => n as u64,
    };
    blocks * u64::from(c.pieces)
}

/// The farthest required (source, destination) in single hops: the `steps` claim.
fn distance(far: &Farthest) -> Option<StepsClaim> {
    far.hops.map(|(steps, source, destination)| StepsClaim { steps, witness: StepsWitness::Distance { source, destination } })
}

/// The transmission count over the links leaving ranks or entering them, whichever is fewer.
fn transmissions(t: &Topology, c: &Collective) -> Option<StepsClaim> {
    let per_piece = u64::try_from(transfers_per_piece(c.kind, c.num_ranks())).unwrap_or(0);
    let count = required_pieces(c) * per_piece;
    let stores = c.rank_mask(t);
    let is_rank = |n: NodeId| stores.get(n.index()).copied().unwrap_or(false);
    [false, true]
        .into_iter()
        .filter_map(|into| {
            let links = t.links().filter(|(_, l)| l.up && is_rank(if into { l.dst } else { l.src })).count() as u64;
            (links > 0 && count > 0).then(|| StepsClaim { steps: ceil_div(count, links), witness: StepsWitness::Transmissions { into } })
        })
        .max_by_key(|claim| claim.steps)
}

/// The best cut over [`candidate_cuts`], both directions, each [`tighten`]ed with every link
/// weighing 1.
fn best_cut(t: &Topology, c: &Collective) -> Option<StepsClaim> {
    let stores = c.rank_mask(t);
    let one = |_: &crate::topology::Link| Rational::from_integer(1);
    let mut best: Option<StepsClaim> = None;
    for (_, nodes) in candidate_cuts(t) {
        for into in [false, true] {
            let tightened = tighten(t, &stores, &nodes, into, &one);
            let nodes = tightened.as_deref().unwrap_or(&nodes);
            let u = membership(t, nodes, into);
            let links = links_leaving(t, &u, nodes).count() as u64;
            let pieces = pieces_crossing(c, &u);
            if links == 0 || pieces == 0 {
                continue;
            }
            let steps = ceil_div(pieces, links);
            if best.as_ref().is_none_or(|b| steps > b.steps) {
                best = Some(StepsClaim { steps, witness: StepsWitness::Cut { nodes: nodes.to_vec(), into } });
            }
        }
    }
    best
}

/// The steps bounds of an instance (every rank connected, checked earlier); the flow bound (all_to_all)
/// searches for lengths within `flow_time`, seeded with the best cut.
pub fn steps_bounds(t: &Topology, c: &Collective, flow_time: Duration) -> StepsBounds {
    steps_bounds_with(t, c, Some(flow_time), &farthest(t, c))
}

/// [`steps_bounds`] from the instance's [`farthest`] pairs, already scanned; without the flow
/// bound when `flow_time` is `None`.
pub fn steps_bounds_with(t: &Topology, c: &Collective, flow_time: Option<Duration>, far: &Farthest) -> StepsBounds {
    let cut = best_cut(t, c);
    let flow = if let (CollectiveKind::AllToAll, Some(flow_time)) = (c.kind, flow_time) {
        let seed = cut.as_ref().and_then(|claim| match &claim.witness {
            StepsWitness::Cut { nodes, into } => Some((nodes.as_slice(), *into)),
            _ => None,
        });
        // Only its ceiling matters: stop once the fractional optimum is pinned within 1%.
        let opts = FlowOptions { time_limit: flow_time, target_gap: 0.01, ..FlowOptions::default() };
        steps_flow_bound(t, c, seed, &opts).and_then(|f| {
            let steps = f.lower.ceil().to_integer().to_u32()?;
            (steps > 0).then_some(StepsClaim { steps, witness: StepsWitness::Flow { lengths: f.lengths } })
        })
    } else {
        None
    };
    StepsBounds { claims: [distance(far), transmissions(t, c), cut, flow].into_iter().flatten().collect() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::certified::certified_steps_bounds;
    use crate::topology::{torus, TorusParams};

    fn ring(n: usize, fail: bool) -> Topology {
        let mut t = torus(&TorusParams::uniform(&[n], 32.0, 100.0)).unwrap();
        if fail {
            for (a, b) in [(0, 1), (1, 0)] {
                t.set_down(t.link_between(NodeId(a), NodeId(b)).unwrap());
            }
        }
        t
    }

    fn collective(t: &Topology, kind: CollectiveKind, pieces: u32) -> Collective {
        Collective::new(kind, t.node_ids().collect(), 1 << 20, pieces, None, t).unwrap()
    }

    #[test]
    fn all_gather_on_rings_is_bounded_by_distance_and_receptions() {
        // A ring of n: the farthest rank is n/2 hops away, and n(n-1) receptions over 2n links
        // take ceil((n-1)/2) steps; with a failed cable the ring is a line of n-1 hops.
        for n in 3..=10usize {
            let t = ring(n, false);
            let b = steps_bounds(&t, &collective(&t, CollectiveKind::AllGather, 1), Duration::from_secs(1));
            assert_eq!(b.best() as usize, (n / 2).max((n - 1).div_ceil(2)), "ring {n}");
            let t = ring(n, true);
            let b = steps_bounds(&t, &collective(&t, CollectiveKind::AllGather, 1), Duration::from_secs(1));
            assert_eq!(b.best() as usize, n - 1, "ring {n}, a failed cable");
        }
    }

    #[test]
    fn all_reduce_needs_twice_the_transfers() {
        // A ring of 5: 2 x 4 transfers for each of 5 blocks over 10 links: 4 steps.
        let t = ring(5, false);
        let b = steps_bounds(&t, &collective(&t, CollectiveKind::AllReduce, 1), Duration::from_secs(1));
        let claim = b.claims.iter().find(|c| c.bound_name() == "steps_transmissions").unwrap();
        assert_eq!(claim.steps, 4);
        assert_eq!(b.best(), 4);
        // Two pieces per block double it.
        let b = steps_bounds(&t, &collective(&t, CollectiveKind::AllReduce, 2), Duration::from_secs(1));
        assert_eq!(b.best(), 8);
    }

    #[test]
    fn certified_bounds_are_confirmed_by_the_checker() {
        let mut t = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        for kind in CollectiveKind::ALL {
            let c = collective(&t, kind, 1);
            let (b, best) = certified_steps_bounds(&t, &c, Duration::from_secs(2)).unwrap();
            assert_eq!(best, b.best(), "{kind}");
        }
        // A failed cable: the all_to_all bisection through it (64 pieces over 7 links) gives 10.
        for (a, b) in [(0, 1), (1, 0)] {
            t.set_down(t.link_between(NodeId(a), NodeId(b)).unwrap());
        }
        let (_, best) = certified_steps_bounds(&t, &collective(&t, CollectiveKind::AllToAll, 1), Duration::from_secs(2)).unwrap();
        assert_eq!(best, 10);
    }
}
