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
//!   every length 1 is the volume bound, the indicator of a cut is that cut);
//! - `steps_arrival`: the pieces that must enter a rank (or leave it) no earlier (no later) than
//!   a single-hop distance allows, over its up links ([`arrival`]).

use super::cut::{candidate_cuts, crossing, links_leaving, membership, tighten, Crossing};
use super::flow::{steps_flow_bound, FlowOptions};
use super::{farthest, transfers_per_piece, Farthest, HopProfile};
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
    /// The pieces that must enter `rank` over its up links in a step no earlier than `distance`
    /// (with `into`), or leave it no later than `distance` steps before the end (claim
    /// `steps_arrival`, see [`arrival`]).
    Arrival {
        /// The rank.
        rank: NodeId,
        /// Count what enters the rank (otherwise what leaves it).
        into: bool,
        /// The single-hop distance d: the claim is d - 1 + ceil(pieces / links).
        distance: u32,
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
    /// `steps_flow`, `steps_arrival`).
    pub fn bound_name(&self) -> &'static str {
        match self.witness {
            StepsWitness::Distance { .. } => "steps",
            StepsWitness::Transmissions { .. } => "steps_transmissions",
            StepsWitness::Cut { .. } => "steps_cut",
            StepsWitness::Flow { .. } => "steps_flow",
            StepsWitness::Arrival { .. } => "steps_arrival",
        }
    }

    /// The claim as a certificate writes it (the format of [`collsched_checker`]).
    pub fn to_json(&self) -> Value {
        let witness = match &self.witness {
            StepsWitness::Distance { source, destination } => json!({"source": source.0, "destination": destination.0}),
            StepsWitness::Transmissions { into } => json!({"into": into}),
            StepsWitness::Cut { nodes, into } => json!({"nodes": nodes.iter().map(|n| n.0).collect::<Vec<_>>(), "into": into}),
            StepsWitness::Flow { lengths } => json!({"lengths": lengths.iter().map(|y| y.to_string()).collect::<Vec<_>>()}),
            StepsWitness::Arrival { rank, into, distance } => json!({"rank": rank.0, "into": into, "distance": distance}),
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

/// How many pieces one partner at distance h or more stands for, by kind and direction: `Each`
/// partner its own pieces, or `Whole` the same pieces for every partner (so `m` when any partner
/// is that far).
enum PerPartner {
    Each(u64),
    Whole(u64),
}

/// The arrival bound (docs/design/MODEL.md section 6): a value that starts at rank u and is
/// needed at rank v crosses a chain of at least dist(u, v) transfers in successive steps, the last
/// of which enters v over one of its links; so a piece that v needs from a rank d or more hops
/// away enters v in a step no earlier than d. Such pieces are counted by kind: all_to_all and
/// all_gather, each source's own pieces (one per partner); reduce_scatter, v's block, whose every
/// piece needs the farthest contribution; all_reduce, every piece. A link carries one piece per
/// step, so `links x (T - d + 1) >= pieces`: `T >= d - 1 + ceil(pieces / links)`. Out of v,
/// symmetrically: a piece a rank d hops away needs of v leaves v no later than step T - d + 1
/// (all_to_all and reduce_scatter: each destination's pieces; all_gather: v's own; all_reduce:
/// every piece). The best over every rank, direction and distance.
fn arrival(t: &Topology, c: &Collective, profile: &HopProfile) -> Option<StepsClaim> {
    let r = c.num_ranks() as u64;
    let p = u64::from(c.pieces);
    let per = |into: bool| match (c.kind, into) {
        (CollectiveKind::AllToAll, _) | (CollectiveKind::AllGather, true) | (CollectiveKind::ReduceScatter, false) => PerPartner::Each(p),
        (CollectiveKind::AllGather, false) | (CollectiveKind::ReduceScatter, true) => PerPartner::Whole(p),
        (CollectiveKind::AllReduce, _) => PerPartner::Whole(r * p),
    };
    let mut best: Option<StepsClaim> = None;
    for (into, rows) in [(false, &profile.out), (true, &profile.into)] {
        let per = per(into);
        for (i, row) in rows.iter().enumerate() {
            let rank = c.ranks[i];
            // The up links entering (leaving) the rank.
            let links = if into { t.in_links(rank).filter(|&l| t.link(l).up).count() } else { t.up_out_links(rank).count() } as u64;
            // Partners at distance h or more, from the farthest in.
            let mut partners = 0u64;
            for h in (1..row.len()).rev() {
                partners += u64::from(row[h]);
                let pieces = match per {
                    PerPartner::Each(m) => m * partners,
                    PerPartner::Whole(m) if partners > 0 => m,
                    PerPartner::Whole(_) => 0,
                };
                if pieces == 0 || links == 0 {
                    continue;
                }
                let steps = (h as u32 - 1).saturating_add(ceil_div(pieces, links));
                if best.as_ref().is_none_or(|b| steps > b.steps) {
                    best = Some(StepsClaim { steps, witness: StepsWitness::Arrival { rank, into, distance: h as u32 } });
                }
            }
        }
    }
    best
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
    StepsBounds { claims: [distance(far), transmissions(t, c), cut, flow, arrival(t, c, &far.profile)].into_iter().flatten().collect() }
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
    fn an_end_of_a_line_waits_for_the_far_end() {
        // A ring of n with a failed cable is a line: its end rank has one link each way, and
        // every piece of an all_reduce must bring it the far end's contribution, n - 1 hops away,
        // no earlier than step n - 1: n - 2 + n P steps (the optimum 6 on a line of 4; 7 on a
        // line of 3 at two pieces per block). The transmission count gives only 2(n - 1) P n /
        // (2(n - 1)) = n P.
        for n in 3..=8usize {
            for pieces in 1..=3u32 {
                let t = ring(n, true);
                let b = steps_bounds(&t, &collective(&t, CollectiveKind::AllReduce, pieces), Duration::from_secs(1));
                let claim = b.claims.iter().find(|c| c.bound_name() == "steps_arrival").unwrap();
                assert_eq!(claim.steps as usize, n - 2 + n * pieces as usize, "line of {n}, {pieces} pieces");
                assert!(matches!(claim.witness, StepsWitness::Arrival { distance, .. } if distance as usize == n - 1));
                assert_eq!(b.best(), claim.steps);
                // all_gather: the end rank receives n - 1 sources' pieces, the farthest in step
                // n - 1 at the earliest: the one at distance h no earlier than h, so at one piece
                // per block it is the distance n - 1; at P pieces, n - 2 + P (the last source's
                // pieces) or (n - 1) P over the one link.
                let b = steps_bounds(&t, &collective(&t, CollectiveKind::AllGather, pieces), Duration::from_secs(1));
                let p = pieces as usize;
                assert_eq!(b.best() as usize, (n - 2 + p).max((n - 1) * p), "line of {n}, all_gather, {pieces} pieces");
            }
        }
        // On a healthy ring the transmission count is at least as strong.
        for n in 3..=8usize {
            let t = ring(n, false);
            let b = steps_bounds(&t, &collective(&t, CollectiveKind::AllReduce, 1), Duration::from_secs(1));
            let arrival = b.claims.iter().find(|c| c.bound_name() == "steps_arrival").unwrap().steps;
            assert!(arrival <= b.best() && b.best() as usize == n - 1, "ring of {n}");
        }
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
