//! What `collsched synthesize` answers: the fastest verified schedule for an instance, how far it
//! is from the certified bound, and the steps/time trade-off behind it.
//!
//! The objective ([`Objective`]) is the schedule's step-synchronous time at the collective's size
//! (docs/design/MODEL.md section 5), its event-driven time, or its number of steps. The
//! candidates ([`Candidate`]):
//! - the fewest-steps search ([`super::steps::synthesize_steps_with`]: one piece per link per step, exact where
//!   the program is small enough);
//! - the time-expanded routing of [`routing`] over pieces per block (1, 2,
//!   4, 8 unless the spec fixes `pieces`) and horizons: latency per step against bandwidth
//!   granularity;
//! - on tori, the hand-written schedules that fit the instance (HalfRing+DimRotation; MATE and
//!   MATEe when a cable is down; for the gathering and reducing kinds the rings by dimension of
//!   [`torus_ring_collective`], folded around a failed cable), which the synthesizer must beat or
//!   match;
//! - for all_gather, reduce_scatter and all_reduce, the layered trees of [`trees`] at the piece
//!   counts the topology calls for (networks without switches, any fault pattern), then the spreading trees of
//!   [`spreading`] over pieces per block, unless the instance is so large that they cannot gain;
//! - on switched networks, the route-and-step candidates of [`switched`] (every collective kind)
//!   and the switched algorithms of docs/design/ALGORITHMS.md under balanced routing, as
//!   `collsched generate` runs them.
//!
//! Where none of these applies (hops that the trees cannot use), the fewest-steps search is the
//! candidate under every objective. Where links differ in bandwidth or latency, the searches also
//! run on the network without its slowest links, as long as the ranks still reach one another
//! ([`without_slow_links`]): they count hops, and a slow link on a short path can hold a step.
//!
//! Under the steps objective the other candidates run too (at the collective's pieces per block,
//! unless the search's schedule meets the certified steps bound), and the one of the steps model
//! with the fewest steps is chosen; under every objective the fewest-steps report counts them.
//!
//! Each candidate is verified (rules 1-5) and priced exactly as it comes, and only the best
//! schedule so far is kept; the search stops once a candidate is within 0.1% of the certified
//! bound. A synthesized schedule whose verifier state would exceed the verifier's limit is priced
//! without it, and the answer says so. Under the time objective a candidate is chosen by its
//! step-synchronous time, on every network (docs/design/CLI.md); under the event objective by its
//! event-driven time (which the slotted fat-tree candidates are built for: the step-synchronous
//! model charges a full path latency through the switches to every step, which ranks that
//! pipeline their steps do not pay). The gap is measured against the certified bandwidth bound
//! plus the latency bound, both re-derived by the independent checker (`collsched_checker`) from
//! the bound certificate of the instance; the bound is proven for the step-synchronous model,
//! and the event-driven gap (switched networks, the event objective) is reported beside it as a
//! measure, not a proof.

use super::steps::{synthesize_steps_above, SynthReport, SynthStatus};
use super::switched::SwitchedMethod;
use super::{frames, one_shot, planes, routing, spreading, switched, trees};
use super::{Progress, SynthOptions};
use crate::algorithms::{torus_all_to_all, torus_all_to_all_shape, torus_mate, torus_ring_collective, RingAlgorithm, Scheduler};
use crate::bounds::certified::{certified_bounds, q_to_f64};
use crate::bounds::steps::steps_bounds;
use crate::collective::{Collective, CollectiveKind};
use crate::cost::event_cost;
use crate::cost::{SyncCost, SyncMeter};
use crate::error::{Error, Result};
use crate::export::sccl::{sccl_coordinates, ScclCoordinates};
use crate::schedule::{Schedule, ScheduleHeader, Step};
use crate::spec::Instance;
use crate::topology::{NodeId, Topology};
use crate::units::{per_block, plural, to_checker, to_f64};
use crate::verify::{verify_schedule, VerifyOptions};
use std::fmt;
use std::time::{Duration, Instant};

/// What to minimize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    /// Step-synchronous time at the collective's size.
    Time,
    /// Event-driven time at the collective's size (docs/design/MODEL.md section 5: what ranks
    /// that pipeline their steps approach), over the same candidates as [`Objective::Time`].
    Event,
    /// Steps (one piece per link per step).
    Steps,
}

impl Objective {
    /// The objective's name on the command line and in a schedule's `meta.synthesis`.
    pub fn name(self) -> &'static str {
        match self {
            Objective::Time => "time",
            Objective::Event => "event",
            Objective::Steps => "steps",
        }
    }
}

impl std::str::FromStr for Objective {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "time" => Ok(Objective::Time),
            "event" => Ok(Objective::Event),
            "steps" => Ok(Objective::Steps),
            other => Err(format!("`{other}`: expected time, event or steps")),
        }
    }
}

/// The hand-written schedules the synthesizer weighs its own against (docs/design/ALGORITHMS.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HandWritten {
    /// HalfRing in every ring, DimRotation over the dimensions (all_to_all).
    HalfRingDimRotation,
    /// MATE around failed cables (all_to_all).
    Mate,
    /// MATEe around failed cables (all_to_all).
    Matee,
    /// A ring algorithm dimension after dimension (the gathering and reducing kinds).
    RingsByDimension(RingAlgorithm),
}

/// Which method produced a candidate schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Candidate {
    /// The fewest-steps search (one piece per link per step).
    FewestSteps,
    /// Time-expanded routing at a piece count and horizon.
    TimeExpandedRouting {
        /// Pieces per block.
        pieces: u32,
        /// Steps of the horizon.
        horizon: u32,
    },
    /// Layered shortest-path trees (all_gather, reduce_scatter, all_reduce).
    LayeredTrees {
        /// Pieces per block.
        pieces: u32,
        /// all_reduce with its halves pipelined (`synth::trees::pipelined`): the pieces a transfer
        /// carries at most.
        pipelined: Option<usize>,
    },
    /// Spreading trees (all_gather, reduce_scatter, all_reduce).
    SpreadingTrees {
        /// Pieces per block.
        pieces: u32,
        /// Pieces a transfer may carry at once.
        per_transfer: usize,
    },
    /// all_to_all by planes and lines (`synth::planes`): one plane routing in every plane.
    PlanesAndLines {
        /// Pieces per plane block of the plane routing.
        plane_pieces: u32,
        /// The plane routing's horizon.
        horizon: u32,
    },
    /// A route-and-step candidate on a switched network.
    Switched(SwitchedMethod),
    /// A hand-written algorithm.
    HandWritten(HandWritten),
    /// all_reduce in one step, over a single hop of its own between every two ranks
    /// (`synth::one_shot`).
    OneShot,
}

impl Candidate {
    /// Whether collsched synthesized it: such a schedule that fails verification is a bug, while
    /// a hand-written algorithm (on a torus, or a switched one under balanced routing) may simply
    /// not fit the instance.
    pub fn is_synthesized(self) -> bool {
        !matches!(self, Candidate::HandWritten(_) | Candidate::Switched(SwitchedMethod::Balanced(_)))
    }

    /// A short machine-readable name of the method (`fewest_steps`, `time_expanded_routing`, ...).
    pub fn method(self) -> &'static str {
        match self {
            Candidate::FewestSteps => "fewest_steps",
            Candidate::TimeExpandedRouting { .. } => "time_expanded_routing",
            Candidate::LayeredTrees { .. } => "layered_trees",
            Candidate::SpreadingTrees { .. } => "spreading_trees",
            Candidate::PlanesAndLines { .. } => "planes_and_lines",
            Candidate::Switched(_) => "switched",
            Candidate::HandWritten(_) => "hand_written",
            Candidate::OneShot => "one_shot",
        }
    }

    /// Whether its name ([`fmt::Display`]) says the schedule's pieces per block.
    pub fn names_pieces(self) -> bool {
        matches!(self, Candidate::TimeExpandedRouting { .. } | Candidate::LayeredTrees { .. } | Candidate::SpreadingTrees { .. })
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Candidate::FewestSteps => f.write_str("fewest steps"),
            Candidate::TimeExpandedRouting { pieces, horizon } => write!(f, "time-expanded routing ({}, horizon {horizon})", per_block(pieces)),
            Candidate::LayeredTrees { pieces, pipelined: None } => write!(f, "layered trees ({})", per_block(pieces)),
            Candidate::LayeredTrees { pieces, pipelined: Some(b) } => {
                write!(f, "layered trees ({}, halves pipelined, up to {b} per transfer)", per_block(pieces))
            }
            Candidate::SpreadingTrees { pieces, per_transfer: 1 } => write!(f, "spreading trees ({})", per_block(pieces)),
            Candidate::SpreadingTrees { pieces, per_transfer } => write!(f, "spreading trees ({}, up to {per_transfer} per transfer)", per_block(pieces)),
            Candidate::PlanesAndLines { plane_pieces, horizon } => {
                write!(f, "planes and lines (plane routing: {plane_pieces} piece{} per plane block, horizon {horizon})", plural(u64::from(plane_pieces)))
            }
            Candidate::Switched(m) => write!(f, "{m}"),
            Candidate::HandWritten(HandWritten::HalfRingDimRotation) => f.write_str("HalfRing+DimRotation"),
            Candidate::HandWritten(HandWritten::Mate) => f.write_str("MATE"),
            Candidate::HandWritten(HandWritten::Matee) => f.write_str("MATEe"),
            Candidate::HandWritten(HandWritten::RingsByDimension(RingAlgorithm::HalfRing)) => f.write_str("HalfRing (rings by dimension)"),
            Candidate::HandWritten(HandWritten::RingsByDimension(a)) => write!(f, "{} (rings by dimension)", a.as_str()),
            Candidate::OneShot => f.write_str("one-shot all_reduce"),
        }
    }
}

/// Written as its name (what `--json` prints as `chosen` and in the entries).
impl serde::Serialize for Candidate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A verified candidate: its method, pieces per block, steps and exact time.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Which method produced it.
    pub candidate: Candidate,
    /// Pieces per block.
    pub pieces: u32,
    /// Steps.
    pub steps: usize,
    /// Step-synchronous time in ns.
    pub time_ns: f64,
    /// Event-driven time in ns (max-min fair links), computed on switched networks and under
    /// the event objective.
    pub event_ns: Option<f64>,
    /// Whether the schedule is one of the steps model (docs/design/MODEL.md section 3: the
    /// collective's pieces per block, single-hop transfers from rank to rank, a link carrying at
    /// most one piece per step), whose steps the certified steps bound holds for; judged where
    /// the fewest-steps search runs.
    pub steps_model: bool,
    /// SCCL's coordinates (steps, rounds, chunks), where the schedule is one SCCL's algorithm
    /// files can hold (single hops between ranks, uniform blocks).
    pub sccl: Option<ScclCoordinates>,
}

impl Entry {
    /// The time candidates are ranked by under `objective`: the event-driven time under
    /// [`Objective::Event`] (where computed), else the step-synchronous time.
    pub fn rank_ns(&self, objective: Objective) -> f64 {
        match objective {
            Objective::Event => self.event_ns.unwrap_or(self.time_ns),
            Objective::Time | Objective::Steps => self.time_ns,
        }
    }
}

/// The answer of a synthesis.
#[derive(Clone, Debug)]
pub struct Answer {
    /// What was minimized.
    pub objective: Objective,
    /// The fewest-steps search's report (its bound and status): for all_to_all, and for every
    /// kind under the steps objective. Its `steps_found` and `status` count every verified
    /// candidate of the steps model (`Entry::steps_model`), not the search's schedule alone.
    pub steps_report: Option<SynthReport>,
    /// The candidate whose schedule has the steps of `steps_report.steps_found`, if one was
    /// verified (the fewest-steps search's, or another of the steps model with fewer steps).
    pub fewest_steps_by: Option<Candidate>,
    /// The chosen candidate.
    pub chosen: Candidate,
    /// The chosen schedule (verified).
    pub schedule: Schedule,
    /// Its exact step-synchronous cost.
    pub cost: SyncCost,
    /// The certified time bound, in ns: bandwidth bound plus latency bound, or the crossing bound
    /// where that is larger (`None` when no bandwidth bound applies).
    pub bound_ns: Option<f64>,
    /// Whether that bound is the crossing bound (docs/design/MODEL.md section 6, "Groups of
    /// ranks") rather than bandwidth plus latency.
    pub crossing_bound: bool,
    /// `time / bound - 1` (step-synchronous time).
    pub gap: Option<f64>,
    /// Event-driven time of the chosen schedule in ns (switched networks).
    pub event_ns: Option<f64>,
    /// Whether the bandwidth term equals the certified bandwidth bound exactly.
    pub bandwidth_optimal: bool,
    /// Every verified candidate, fastest first.
    pub entries: Vec<Entry>,
    /// Whether the time limit stopped a search before it finished (the answer is the best
    /// found; exit code 4); false when the answer meets its certified bound all the same.
    pub limit_reached: bool,
    /// Why the chosen schedule was priced without verification (the verifier declined a state
    /// that large), if it was; `None` when it was verified (rules 1-5), or is `deferred`.
    pub unverified: Option<String>,
    /// The chosen schedule is synthesized, as large as [`SynthOptions::defer_verification_from`]
    /// asked, and was priced by one pass over its transfers: its verification is left to the
    /// caller, who runs [`verify_deferred`](crate::verify_deferred) (while writing the file).
    pub deferred: bool,
}

impl Answer {
    /// The candidates no other candidate beats in both steps and time (`Entry::rank_ns` of the
    /// objective), fewest steps first: the steps/time trade-off (`--pareto`).
    pub fn pareto(&self) -> Vec<&Entry> {
        let o = self.objective;
        let mut front: Vec<&Entry> = self.entries.iter().filter(|e| !self.entries.iter().any(|x| dominates(x, e, o))).collect();
        front.sort_by(|a, b| a.steps.cmp(&b.steps).then(a.rank_ns(o).total_cmp(&b.rank_ns(o))));
        front.dedup_by(|a, b| a.steps == b.steps && a.rank_ns(o) == b.rank_ns(o));
        front
    }

    /// The entry of the chosen candidate.
    pub fn chosen_entry(&self) -> Option<&Entry> {
        self.entries.iter().find(|e| e.candidate == self.chosen)
    }
}

fn dominates(a: &Entry, b: &Entry, o: Objective) -> bool {
    a.steps <= b.steps && a.rank_ns(o) <= b.rank_ns(o) && (a.steps < b.steps || a.rank_ns(o) < b.rank_ns(o))
}

/// Piece counts the time objective tries when the spec leaves `pieces` open (time-expanded
/// routing and spreading; the layered trees derive theirs from the topology,
/// [`trees::piece_counts`]).
pub const PIECE_COUNTS: [u32; 4] = [1, 2, 4, 8];

/// Pieces per transfer the spreading trees also try, at the coarsest piece count.
pub const SPREAD_BATCHES: [usize; 3] = [2, 4, 8];

/// Piece-hops (one piece over one hop) beyond which the layered trees do not try a finer piece
/// count: a schedule holds 16 bytes per piece-hop, and the trees, the verifier and the writer
/// add as much again. On 16x16x16 the first count (6 pieces, 100M piece-hops for all_gather) is
/// 0.25% above the certified bound; 12 pieces gained 0.05 points for 7.8 GB and 277 s.
pub const MAX_TREE_PIECE_HOPS: u64 = 120_000_000;

/// Piece-hops of an instance at one piece per block beyond which, once the layered trees have an
/// answer, the slower candidates that never beat them there (spreading, rings by dimension) are
/// left out. 16x16x16 (16.8M for all_gather) is beyond it: there the reduce_scatter's other
/// candidates took over 18 GB; 8x8x8 (0.26M) is well within.
pub const SECONDARY_PIECE_HOPS: u64 = 10_000_000;

/// The piece-hops up to which a candidate is cut into the finer pieces a spec fixes
/// ([`Schedule::refined`]): the 16x16x16 all_to_all's 200 million are verified and written in
/// about 1.2 GB.
const MAX_REFINED_PIECE_HOPS: u64 = 1 << 29;

/// A gap to the certified bound at which the search stops: nothing measurable is left to find.
pub const GOOD_ENOUGH_GAP: f64 = 0.001;

/// The verified candidates so far, kept as they come: the fastest with its schedule and cost,
/// an entry for every one, and what stopped a search early. A beaten schedule is dropped at once
/// (at pod scale one takes gigabytes).
struct Gathered<'a> {
    inst: &'a Instance,
    objective: Objective,
    /// When the searches stop; past it, a candidate that cannot beat the best is not verified
    /// (unless `verify_every`), so that a run near its limit verifies what it returns.
    deadline: Instant,
    /// [`SynthOptions::verify_every_candidate`].
    verify_every: bool,
    /// When the time limit ends: the searches' `deadline` leaves room for writing the answer.
    end: Instant,
    /// The certified time bound, ns, to stop once a candidate is good enough.
    bound_ns: Option<f64>,
    best: Option<(Entry, Schedule, SyncCost)>,
    entries: Vec<Entry>,
    /// A search stopped at the deadline (the answer is the best found; exit 4).
    limit_reached: bool,
    /// Why the layered or spreading trees found nothing, for the error when no other candidate
    /// exists either.
    spread_error: Option<Error>,
    /// Why the chosen candidate was priced without verification, if it was.
    unverified: Option<String>,
    /// [`SynthOptions::defer_verification_from`].
    defer_from: Option<u64>,
    /// Whether the best candidate's verification is deferred ([`Answer::deferred`]).
    deferred: bool,
    /// Whether candidates are judged for the steps model ([`Entry::steps_model`]): where the
    /// fewest-steps search runs.
    judge_steps_model: bool,
    /// The network the candidates are judged on when they were built on it with its slowest links
    /// taken out ([`without_slow_links`]).
    retarget: Option<Topology>,
}

impl Gathered<'_> {
    /// When a search must end for what follows it (building, verifying and writing: `after`,
    /// from [`finish_time`]) to end by the time limit; `or` if that time is before any instant.
    fn finish_from(&self, after: Duration, or: Instant) -> Instant {
        self.end.checked_sub(after).unwrap_or(or)
    }

    /// The best candidate's time as the objective ranks it (step-synchronous or event-driven).
    fn best_ns(&self) -> Option<f64> {
        self.best.as_ref().map(|(e, _, _)| e.rank_ns(self.objective))
    }

    /// Whether the best candidate is within [`GOOD_ENOUGH_GAP`] of the bound.
    fn good_enough(&self) -> bool {
        match (&self.best, self.bound_ns) {
            (Some((e, _, _)), Some(b)) => self.objective != Objective::Steps && e.time_ns <= b * (1.0 + GOOD_ENOUGH_GAP),
            _ => false,
        }
    }

    /// Verifies and prices a candidate (event-driven too on switched networks and under the
    /// event objective) and keeps it if it is the best so far: the time objective keeps the
    /// fastest step-synchronously, the event objective the fastest event-driven, the steps
    /// objective the one of the steps model with the fewest steps (then the fastest; the first,
    /// the fewest-steps search's, on a tie). A synthesized schedule too large for the verifier's
    /// state is priced without it, and the answer says so.
    fn offer(&mut self, candidate: Candidate, mut s: Schedule, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
        let inst = self.inst;
        if let Some(t) = &self.retarget {
            // Built without some links, it runs on the whole network as it is.
            s.header.topology = t.clone();
        }
        // An npu outside the group runs no program, so a candidate that stores and forwards
        // there cannot be lowered (rule 6); the time objectives have others that route through.
        if self.objective != Objective::Steps && relay_outside_group(&s).is_some() {
            return Ok(());
        }
        // A spec that fixes `pieces` is answered in those pieces (hand-written generators choose
        // their own): a schedule of coarser pieces whose count divides them is cut into them
        // (the same transfers and bytes), unless that would outgrow [`MAX_REFINED_PIECE_HOPS`].
        let (given, own) = (inst.collective.pieces, s.header.collective.pieces);
        if inst.pieces_given && own != given {
            // The size is judged before the finer schedule is built.
            let fits = own > 0 && given % own == 0 && piece_hops(&s).saturating_mul(u64::from(given / own)) <= MAX_REFINED_PIECE_HOPS;
            if !fits {
                return Ok(());
            }
            s = s.refined(given).expect("the spec's pieces are a multiple of the schedule's");
        }
        if self.cannot_win_past_deadline(&s) {
            self.limit_reached = true;
            return Ok(());
        }
        let defer = candidate.is_synthesized() && self.defer_from.is_some_and(|from| piece_hops(&s) >= from);
        if !defer {
            progress(&Progress::Trying(format!("verifying {candidate}")));
        }
        let (cost, unverified) = if defer {
            (sync_cost(&s)?, None)
        } else {
            match verify_schedule(&s, &VerifyOptions::default()) {
                Ok(r) if r.is_valid() => (r.cost.expect("verification computes the cost"), None),
                Ok(r) if candidate.is_synthesized() => return Err(failed_verification(candidate, &r)),
                Err(Error::BadInput(why)) if candidate.is_synthesized() => (sync_cost(&s)?, Some(why)),
                Ok(_) | Err(_) => return Ok(()),
            }
        };
        let event_ns = if inst.topology.num_switches() > 0 || self.objective == Objective::Event { Some(event_cost(&s, false)?.time_ns) } else { None };
        let sccl = sccl_coordinates(&s).ok();
        // The search's schedules are verified by the search; the others count once verified here.
        let checked = candidate == Candidate::FewestSteps || (!defer && unverified.is_none());
        let steps_model = self.judge_steps_model && checked && in_steps_model(&s, inst.collective.pieces);
        let entry =
            Entry { candidate, pieces: s.header.collective.pieces, steps: s.steps.len(), time_ns: to_f64(&cost.time_ns()), event_ns, steps_model, sccl };
        self.entries.push(entry.clone());
        let o = self.objective;
        let better = match &self.best {
            None => true,
            Some((b, _, _)) if o == Objective::Steps => {
                (!entry.steps_model, entry.steps, entry.time_ns).partial_cmp(&(!b.steps_model, b.steps, b.time_ns)) == Some(std::cmp::Ordering::Less)
            }
            Some((b, _, _)) => entry.rank_ns(o) < b.rank_ns(o),
        };
        if better {
            self.best = Some((entry, s, cost));
            self.unverified = unverified;
            self.deferred = defer;
        }
        Ok(())
    }
}

impl Gathered<'_> {
    /// Lets the best schedule go when a candidate about to be built is sure to beat it (its
    /// step-synchronous time is at most `at_most_ns`), so that the two do not take memory at once;
    /// under the time objective, where that time ranks them.
    fn let_go_if_beaten(&mut self, at_most_ns: f64) {
        if self.ranked_by_sync_time() && self.best.as_ref().is_some_and(|(b, _, _)| b.time_ns > at_most_ns) {
            self.best = None;
            self.unverified = None;
            self.deferred = false;
        }
    }

    /// Whether candidates are ranked by their step-synchronous time: under the time objective
    /// (`Entry::rank_ns`).
    fn ranked_by_sync_time(&self) -> bool {
        self.objective == Objective::Time
    }

    /// Whether the searches' deadline has passed and candidates may be left out
    /// ([`SynthOptions::verify_every_candidate`] keeps them all).
    fn past_deadline(&self) -> bool {
        !self.verify_every && Instant::now() >= self.deadline
    }

    /// Whether the deadline has passed and `s` cannot beat the best verified candidate. Under the
    /// time objective the rank is the step-synchronous time, which one pass over the transfers
    /// gives without verifying (verifying an 8x8x8 MATEe takes 10 s).
    fn cannot_win_past_deadline(&self, s: &Schedule) -> bool {
        let Some((best, _, _)) = &self.best else { return false };
        if !self.ranked_by_sync_time() || !self.past_deadline() {
            return false;
        }
        sync_cost(s).is_ok_and(|c| to_f64(&c.time_ns()) >= best.time_ns)
    }
}

/// Whether `s` is a schedule of the steps model (docs/design/MODEL.md section 3) at `pieces` per
/// block: every transfer carries at most one piece over a single hop from a rank to a rank, and
/// no link carries two pieces in a step. The certified steps bound holds for its steps.
fn in_steps_model(s: &Schedule, pieces: u32) -> bool {
    let (t, c) = (&s.header.topology, &s.header.collective);
    let is_rank = |v: NodeId| c.rank_index(v).is_some();
    c.pieces == pieces
        && s.steps.iter().all(|st| {
            let mut used = std::collections::HashSet::new();
            st.transfers.iter().all(|x| {
                let (Some(first), Some(last)) = (x.path.first(), x.path.last()) else { return x.pieces.is_empty() };
                x.pieces.len() <= 1
                    && is_rank(t.link(*first).src)
                    && is_rank(t.link(*last).dst)
                    && x.path[..x.path.len() - 1].iter().all(|l| !is_rank(t.link(*l).dst))
                    && x.path.iter().all(|l| used.insert(*l))
            })
        })
}

/// The step-synchronous cost of a schedule, without verifying it.
fn sync_cost(s: &Schedule) -> Result<SyncCost> {
    let mut meter = SyncMeter::new(&s.header)?;
    s.steps.iter().for_each(|st| meter.step(st));
    meter.finish()
}

/// Piece-hops of `c` at `pieces` per block if every piece crosses each of its R-1 tree edges
/// once per half (the gathering and reducing kinds).
fn tree_piece_hops(c: &Collective, pieces: u32) -> u64 {
    let r = c.num_ranks() as u64;
    let halves = if c.kind == CollectiveKind::AllReduce { 2 } else { 1 };
    r * pieces as u64 * r.saturating_sub(1) * halves
}

/// The estimated time to build, verify and write `piece_hops` piece-hops at `ns_per_piece_hop`.
fn finish_time(piece_hops: u64, ns_per_piece_hop: f64) -> Duration {
    Duration::from_secs_f64(piece_hops as f64 * ns_per_piece_hop * 1e-9)
}

/// [`finish_time`] of the layered trees' steps of `c` at `pieces` per block.
fn tree_finish_time(c: &Collective, pieces: u32) -> Duration {
    let ns = if c.kind.is_reducing() { FINISH_NS_PER_PIECE_HOP } else { GATHER_FINISH_NS_PER_PIECE_HOP };
    finish_time(tree_piece_hops(c, pieces), ns)
}

/// A piece count per block coarser than `first` whose layered trees' steps can be built,
/// verified and written in the time `left` ([`tree_finish_time`]), where
/// `first`'s cannot: the largest divisor of `first` that can, else one. A divisor keeps the
/// chunks' dimension orders of [`trees::piece_counts`] balanced (on 16x16x16 four pieces per
/// block were 79% above the certified bound where three and six are not). `None` where `first`
/// fits, or is already one piece. On 16x16x16 with a failed cable and `--time-limit 15`, the
/// all_reduce at 6 pieces per block took 24-37 s (its balancing passes cut to none: 45.9% above
/// the certified bound); see the caller.
fn coarse_enough(c: &Collective, first: Option<u32>, left: Duration) -> Option<u32> {
    let first = first.filter(|&p| p > 1)?;
    let fits = |p: u32| tree_finish_time(c, p) <= left;
    if fits(first) {
        return None;
    }
    Some((1..first).rev().find(|&p| first % p == 0 && fits(p)).unwrap_or(1))
}

/// The least time the flow bounds are searched for (below it they keep their seeds).
const MIN_FLOW_BUDGET: Duration = Duration::from_secs(1);

/// Synthesizes for `objective` within `opts.time_limit`: the certified bound first (its flow
/// part given a tenth of the limit, at most 20 s, none under 10 s), then the fewest-steps search
/// (up to half of the limit under the time objectives, three fifths under the steps objective),
/// then the other searches until 80% of the
/// limit, each candidate verified as it comes; the rest of the limit is for writing the answer.
///
/// Errors: bad input; [`Error::infeasible`] when the faults cut a rank off or nothing was found.
pub fn synthesize(inst: &Instance, opts: &SynthOptions, objective: Objective, progress: &mut dyn FnMut(&Progress)) -> Result<Answer> {
    let started = Instant::now();
    let deadline = started + opts.time_limit.mul_f64(0.8);
    let (t, c) = (&inst.topology, &inst.collective);
    t.check_connected(&c.ranks).map_err(|e| Error::infeasible(e.message().to_string()))?;
    progress(&Progress::Trying("certified bounds".into()));
    // Under a limit of a few seconds the flow search's phases (about a second each on 8x8x8) would
    // overrun it: the certificate then has the volume and cut bounds, which it seeds with.
    let tenth = opts.time_limit.mul_f64(0.1).min(Duration::from_secs(20));
    let flow_budget = if tenth >= MIN_FLOW_BUDGET { tenth } else { Duration::ZERO };
    // An all_to_all too large for the flat searches (4,096 npus: 200 million piece-hops) is
    // answered by planes and lines; the fewest-steps search, and with it the steps flow bound,
    // are for the flat ones and the steps objective.
    let flat = c.kind != CollectiveKind::AllToAll || a2a_piece_hops(t, c, c.pieces).is_none_or(|h| h <= MAX_FLAT_PIECE_HOPS);
    let fewest = (c.kind == CollectiveKind::AllToAll && flat) || objective == Objective::Steps;
    let bounds = certified_bounds(inst, flow_budget, fewest)?;
    let bound = bounds.time.clone();
    let mut found = Gathered {
        inst,
        objective,
        deadline,
        verify_every: opts.verify_every_candidate,
        end: started + opts.time_limit,
        bound_ns: bound.as_ref().and_then(q_to_f64),
        best: None,
        entries: Vec::new(),
        limit_reached: false,
        spread_error: None,
        unverified: None,
        defer_from: opts.defer_verification_from,
        deferred: false,
        judge_steps_model: fewest,
        retarget: None,
    };
    let steps_limit = if objective == Objective::Steps { opts.time_limit.mul_f64(0.6) } else { opts.time_limit / 2 };
    let steps_report = if fewest { Some(fewest_steps(inst, opts, steps_limit, bounds.steps, &mut found, progress)?) } else { None };
    // Under the steps objective the other searches may find fewer steps than the fewest-steps
    // search (which keeps to shortest paths and may stop at its limit), but only the search
    // decides whether a limit left the answer unproven.
    let steps_limit_reached = found.limit_reached;
    let certified_fewest = steps_report.as_ref().is_some_and(|r| r.status == SynthStatus::Optimal { certified: true });
    // The steps objective counts the steps of the collective's pieces per block only.
    let steps_inst;
    let inst = if objective == Objective::Steps {
        steps_inst = Instance { pieces_given: true, ..inst.clone() };
        &steps_inst
    } else {
        inst
    };
    // Nothing has fewer steps than the certified bound.
    if objective != Objective::Steps || !certified_fewest {
        searches_by_kind(inst, &counts_of(inst), (flat, true), deadline, &mut found, progress)?;
    }
    if objective != Objective::Steps && flat && !found.good_enough() {
        without_slow_links(inst, &counts_of(inst), deadline, &mut found, progress)?;
    }
    // Where no other candidate applies (hops that trees cannot use), the fewest-steps search, which
    // routes over every link that is up in the direction it runs, is the answer under the time
    // objectives too: an instance whose ranks reach each other is never infeasible.
    //
    // Where the others' best is slower than any schedule of the fewest-steps search could be (at a
    // small size, where a step's latency outweighs the bytes it moves), the search is a candidate
    // too, with a quarter of the limit at most: on a 3x3 torus its all_gather of one piece per
    // block is bandwidth-optimal in 2 steps, 48.7% faster than the layered trees' 2 steps.
    let steps_report = match steps_report {
        None if found.best.is_none() => {
            found.judge_steps_model = true;
            let left = found.end.saturating_duration_since(Instant::now()).max(MIN_FLOW_BUDGET);
            Some(fewest_steps(inst, opts, left, None, &mut found, progress)?)
        }
        None if !found.good_enough()
            && found.end.saturating_duration_since(Instant::now()) >= opts.time_limit / 4
            && steps_search_may_win(inst, objective, bounds.steps, found.best_ns()) =>
        {
            found.judge_steps_model = true;
            // A candidate on the side: where its exact phase cannot close the gap to its steps
            // bound in its share (a 4-npu custom network with a one-way link: 36 s and more), the
            // answer is still the others' and their limits', not a limit reached.
            let limit_reached = found.limit_reached;
            let report = fewest_steps(inst, opts, opts.time_limit / 4, bounds.steps, &mut found, progress)?;
            found.limit_reached = limit_reached;
            Some(report)
        }
        report => report,
    };
    let Gathered { best, mut entries, limit_reached, spread_error, unverified, deferred, .. } = found;
    let limit_reached = if objective == Objective::Steps { steps_limit_reached } else { limit_reached };
    let (chosen, schedule, cost) =
        best.ok_or_else(|| spread_error.unwrap_or_else(|| Error::infeasible(format!("no contention-free {} schedule was found for this instance", c.kind))))?;
    entries.sort_by(|a, b| a.rank_ns(objective).total_cmp(&b.rank_ns(objective)));
    let mut steps_report = steps_report;
    let fewest_steps_by = steps_report.as_mut().and_then(|r| count_fewest_steps(r, &entries, &chosen));
    // A bound of 0 (nothing to move) has no gap to speak of.
    let gap = bound.as_ref().filter(|b| num_traits::Signed::is_positive(*b)).and_then(|b| q_to_f64(&(to_checker(&cost.time_ns()) / b))).map(|r| r - 1.0);
    let bandwidth_optimal = bounds.bandwidth.as_ref().is_some_and(|b| &to_checker(&cost.bandwidth_ns()) == b);
    // A limit that stopped some search does not matter when the answer meets its certified bound.
    let proven = match objective {
        Objective::Time | Objective::Event => bound.as_ref().is_some_and(|b| &to_checker(&cost.time_ns()) == b),
        Objective::Steps => steps_report.as_ref().is_some_and(|r| r.status == SynthStatus::Optimal { certified: true }),
    };
    let limit_reached = limit_reached && !proven;
    Ok(Answer {
        objective,
        steps_report,
        fewest_steps_by,
        chosen: chosen.candidate,
        schedule,
        cost,
        bound_ns: bound.as_ref().and_then(q_to_f64),
        crossing_bound: bounds.crossing,
        gap,
        event_ns: chosen.event_ns,
        bandwidth_optimal,
        entries,
        limit_reached,
        unverified,
        deferred,
    })
}

/// Lowers the fewest-steps search's report to the fewest steps of any verified candidate of the
/// steps model (its status follows: optimal and certified at the certified bound, else a gap, or
/// still the search's limit) and says which candidate has them: `chosen` when it does, else the
/// search's, else the first such entry.
fn count_fewest_steps(report: &mut SynthReport, entries: &[Entry], chosen: &Entry) -> Option<Candidate> {
    let searched = report.steps_found;
    let fewest = entries.iter().filter(|e| e.steps_model).map(|e| e.steps as u32).min();
    if let Some(n) = fewest.filter(|&n| searched.is_none_or(|f| n < f)) {
        report.steps_found = Some(n);
        report.status = if n <= report.steps_lower_bound {
            SynthStatus::Optimal { certified: true }
        } else if report.status == SynthStatus::LimitReached {
            SynthStatus::LimitReached
        } else {
            SynthStatus::Gap
        };
    }
    let found = report.steps_found? as usize;
    if chosen.steps_model && chosen.steps == found {
        Some(chosen.candidate)
    } else if searched == report.steps_found {
        Some(Candidate::FewestSteps)
    } else {
        entries.iter().find(|e| e.steps_model && e.steps == found).map(|e| e.candidate)
    }
}

/// From this many piece-hops (every transfer's pieces times its links) the CLI verifies a
/// synthesized answer while it writes it ([`SynthOptions::defer_verification_from`]): the
/// 4,096-npu all_to_all (200 million piece-hops) takes about 30 s to verify and as long to write,
/// each on one core.
pub const DEFERRED_PIECE_HOPS: u64 = 1 << 24;

/// The piece-hops of a schedule: every transfer's pieces times the links of its path.
fn piece_hops(s: &Schedule) -> u64 {
    s.piece_hops() as u64
}

/// The error of a synthesized schedule that fails verification (a bug of the synthesis).
fn failed_verification(candidate: Candidate, r: &crate::verify::Report) -> Error {
    Error::internal(format!("synthesis ({candidate}): the schedule fails verification: {:?}", r.findings.failures().first()))
}

/// Verifies (rules 1-5) an answer's schedule whose verification was deferred
/// ([`Answer::deferred`]): `Ok(None)` when it is valid, `Ok(Some(why))` when the verifier declines
/// a state that large (as [`Answer::unverified`]).
///
/// Errors: [`Error::Internal`] when the schedule fails verification (a bug of the synthesis).
pub fn verify_deferred(chosen: Candidate, s: &Schedule) -> Result<Option<String>> {
    match verify_schedule(s, &VerifyOptions::default()) {
        Ok(r) if r.is_valid() => Ok(None),
        Ok(r) => Err(failed_verification(chosen, &r)),
        Err(Error::BadInput(why)) => Ok(Some(why)),
        Err(e) => Err(e),
    }
}

/// Above this many ranks times pieces the fewest-steps search is not tried as a mere candidate
/// of a gathering or reducing kind (its list-scheduled incumbent, which always runs to its end,
/// takes 2.4 s for a 22x22 all_reduce of one piece per block and 4 s on 8x8x8).
const MAX_STEPS_CANDIDATE_PIECES: usize = 256;

/// Whether a schedule of the fewest-steps search could beat `best_ns`: it has `steps` steps at
/// least (the certified steps bound), each moving a piece over a link at least (MODEL.md section
/// 3: a link carries one piece per step in the steps model), so none is faster than that many
/// of the cheapest piece-hops the network has.
///
/// Under the event objective only the size counts: ranks that pipeline their steps overlap them.
fn steps_search_may_win(inst: &Instance, objective: Objective, steps: Option<u32>, best_ns: Option<f64>) -> bool {
    let (t, c) = (&inst.topology, &inst.collective);
    if c.num_ranks() * c.pieces as usize > MAX_STEPS_CANDIDATE_PIECES {
        return false;
    }
    if objective == Objective::Event {
        return true;
    }
    let (Some(steps), Some(best)) = (steps, best_ns) else { return false };
    let smallest = (0..c.piece_space()).filter(|&i| c.is_required_index(i)).map(|i| to_f64(&c.piece_size_at(i))).fold(f64::INFINITY, f64::min);
    // bytes / (GB/s) = ns
    let hop = t.links().map(|(_, l)| l).filter(|l| l.up).map(|l| smallest / l.bandwidth_gbps + l.latency_ns).fold(f64::INFINITY, f64::min);
    f64::from(steps) * hop < best
}

/// The fewest-steps search (all_to_all, and every kind under the steps objective) within
/// `limit`; `lower` is the certified steps bound, when the bound certificate has one.
fn fewest_steps(
    inst: &Instance,
    opts: &SynthOptions,
    limit: Duration,
    lower: Option<u32>,
    found: &mut Gathered,
    progress: &mut dyn FnMut(&Progress),
) -> Result<SynthReport> {
    let steps_opts = SynthOptions { time_limit: limit, ..opts.clone() };
    let report = synthesize_steps_above(&inst.topology, &inst.collective, &steps_opts, lower, progress)?;
    if let SynthStatus::Infeasible(why) = &report.status {
        return Err(Error::infeasible(why.clone()));
    }
    found.limit_reached |= matches!(report.status, SynthStatus::LimitReached);
    if let Some(s) = report.schedule.clone() {
        found.offer(Candidate::FewestSteps, s, progress)?;
    }
    Ok(report)
}

/// Time-expanded routing over piece counts and horizons (all_to_all); the sweep keeps the best per
/// piece count, the points of the trade-off worth verifying (its estimate is the exact cost).
/// Where `finer` (the spec leaves the pieces open, some link is down, the objective is a time)
/// and the finest count routes fastest, twice as many pieces are routed while that is faster
/// still, the best so far more than [`FINER_FROM_GAP`] above the certified bound, the instance
/// small ([`MAX_FINER_PIECE_HOPS`]) and the time left three times what the last round took; a
/// finer round cut short by the limit does not count as the limit reached. On a healthy torus
/// the hand-written algorithms tried next meet or nearly meet the bound.
fn time_expanded_routing(
    t: &Topology,
    c: &Collective,
    counts: &[u32],
    finer: bool,
    deadline: Instant,
    found: &mut Gathered,
    progress: &mut dyn FnMut(&Progress),
) -> Result<()> {
    let finer = finer && found.objective != Objective::Steps && !t.down_links().is_empty();
    let (mut counts, mut fastest, mut round) = (counts.to_vec(), f64::INFINITY, 0);
    loop {
        let started = Instant::now();
        let sweep = {
            let mut note = |m: &str| progress(&Progress::Trying(m.to_string()));
            routing::candidates(t, c, &counts, deadline, &mut note)?
        };
        // A finer round is a try beyond the sweep: cut short by the limit, it does not make the
        // answer's exit 4.
        found.limit_reached |= sweep.cut_short && round == 0;
        round += 1;
        let finest = counts.iter().copied().max().unwrap_or(1);
        // The candidates come cheapest first: the finest count gained if it is the first, and
        // after the first round faster by a point in a thousand than every earlier round's.
        let gained = sweep.found.first().is_some_and(|r| r.pieces == finest && r.time_ns < fastest * (1.0 - FINER_GAIN));
        fastest = fastest.min(sweep.found.first().map_or(f64::INFINITY, |r| r.time_ns));
        for r in sweep.found {
            let candidate = Candidate::TimeExpandedRouting { pieces: r.pieces, horizon: r.params.steps };
            found.offer(candidate, schedule(t, &r.collective, r.steps, "time-expanded"), progress)?;
        }
        let next = finest.saturating_mul(2);
        // Twice the pieces take about twice as long to route: a round is started only where
        // three times the last one's time is left.
        let room = Instant::now() + started.elapsed() * 3 < deadline;
        let far_off = found.best.as_ref().zip(found.bound_ns).is_some_and(|((e, _, _), b)| e.time_ns > b * (1.0 + FINER_FROM_GAP));
        if !finer || !gained || !room || !far_off || sweep.cut_short || a2a_piece_hops(t, c, next).is_none_or(|h| h > MAX_FINER_PIECE_HOPS) {
            return Ok(());
        }
        counts = vec![next];
    }
}

/// Up to this many piece-hops ([`a2a_piece_hops`]) the time-expanded routing tries finer pieces
/// than [`PIECE_COUNTS`] while they route faster: around several failed cables a small torus needs
/// them to spread its cut (4x4 with three failed cables: 8 pieces per block 5.85% above the
/// certified bound, 16 4.58%, 32 3.24%; 8x8 at 16 pieces has 258,048).
const MAX_FINER_PIECE_HOPS: u64 = 1 << 18;

/// What a finer piece count must gain over the coarser ones for a finer one still to be tried.
const FINER_GAIN: f64 = 0.001;

/// How far above the certified bound the best so far must be for finer pieces to be tried: their
/// schedules carry more transfers (4x4x4 with one failed cable, 0.28% above the bound at 8 pieces
/// per block: 16 gained 0.04 points, and its MSCCL XML outgrew what the reader stores per gpu).
const FINER_FROM_GAP: f64 = 0.01;

/// Planes and lines (all_to_all too large for the flat routing): the plane routing gets half the
/// time to the deadline, since composing, verifying and writing the whole takes about as long.
fn planes_and_lines(t: &Topology, c: &Collective, deadline: Instant, found: &mut Gathered, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
    let now = Instant::now();
    // Composing, verifying and writing take time in proportion to the schedule: the plane routing
    // ends early enough for them to end by the limit, with a few seconds for one routing at least.
    let latest = found.finish_from(finish_time(a2a_piece_hops(t, c, c.pieces).unwrap_or(0), FINISH_NS_PER_PIECE_HOP), now);
    let until = (now + deadline.saturating_duration_since(now) / 2).min(latest).max(now + MIN_PLANE_ROUTING);
    let (planned, cut_short) = {
        let mut note = |m: &str| progress(&Progress::Trying(m.to_string()));
        planes::plan(t, c, until, &mut note)?
    };
    found.limit_reached |= cut_short;
    if let Some(p) = planned {
        let candidate = Candidate::PlanesAndLines { plane_pieces: p.plane_pieces, horizon: p.horizon };
        found.offer(candidate, schedule(t, &p.collective, p.steps, "planes and lines"), progress)?;
    }
    Ok(())
}

/// Per piece-hop of a large synthesized schedule, the time of what follows its search (measured
/// on this project's 2-core machine, release build, 16x16x16 with a failed cable): after the plane
/// routing of an all_to_all, composing (4-5 s), then verifying while writing (30-37 s) its 200
/// million piece-hops; after the layered trees' balancing passes of an all_reduce, building the
/// steps (3 s), then verifying while writing (35 s) its 201 million (reduce_scatter: 21 s for 100
/// million).
const FINISH_NS_PER_PIECE_HOP: f64 = 200.0;

/// [`FINISH_NS_PER_PIECE_HOP`] for all_gather, whose verification follows which ranks hold a
/// piece, not which contributions a value holds: 16x16x16 with a failed cable verifies while
/// writing in 9 s per 100 million piece-hops.
const GATHER_FINISH_NS_PER_PIECE_HOP: f64 = 100.0;

/// The least time the plane routing is given (a 16x16 plane's first horizon takes a few seconds).
const MIN_PLANE_ROUTING: Duration = Duration::from_secs(5);

/// Piece-hops of a torus all_to_all at `pieces` per block on shortest paths (`None` off a
/// torus): R(R-1)P times the mean distance, the sum over dimensions of a ring's (or line's).
fn a2a_piece_hops(t: &Topology, c: &Collective, pieces: u32) -> Option<u64> {
    let s = t.torus_shape()?;
    let mean: f64 = (0..s.ndims())
        .map(|d| {
            let n = s.dims[d];
            let dist = |a: usize, b: usize| if s.wrap[d] { a.abs_diff(b).min(n - a.abs_diff(b)) } else { a.abs_diff(b) };
            (0..n).flat_map(|a| (0..n).map(move |b| (a, b))).map(|(a, b)| dist(a, b)).sum::<usize>() as f64 / (n * n) as f64
        })
        .sum();
    let r = c.num_ranks() as f64;
    Some((r * (r - 1.0) * f64::from(pieces) * mean) as u64)
}

/// Above this many piece-hops ([`a2a_piece_hops`]) an all_to_all is not searched flat. With a
/// failed cable under the default limit: 8x8x8 (1.6 million) routes 0.3% above the certified bound,
/// 9x9x9 (3.5 million) 1.6%; 10x10x10 (7.5 million) flat only 54.7% (the routing finishes nothing),
/// by planes and lines 7.0% in 18 s; 16x16x16 has 200 million.
const MAX_FLAT_PIECE_HOPS: u64 = 1 << 22;

/// The layered trees (all_gather, reduce_scatter, all_reduce) at the piece counts derived from
/// the topology ([`trees::piece_counts`], after the first the pipelined all_reduce's and
/// [`trees::balancing_piece_counts`]) or the spec's, finer ones while the schedule stays below
/// [`MAX_TREE_PIECE_HOPS`], time remains and the best is not good enough; where the limit leaves
/// too little time for the first count's steps, a coarser one first ([`coarse_enough`]).
fn layered_trees(inst: &Instance, deadline: Instant, found: &mut Gathered, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
    let (t, c) = (&inst.topology, &inst.collective);
    let mut counts = if inst.pieces_given { vec![c.pieces] } else { trees::piece_counts(t) };
    // The pipelined all_reduce's finer count right after the coarsest, so that the limit does not
    // cut it off (5x5x5 with a failed cable: 3, 6 and 12 pieces took 22 s of the 60).
    if !inst.pieces_given {
        let pipelined = trees::pipelined_piece_count(t, c);
        if let Some(p) = pipelined {
            counts.insert(1, p);
        }
        // Then the counts at which ranks with fewer links can carry an equal share, before the
        // finer ones (6x6 with a failed cable: 3 pieces per block meet the bound, 16 do not). Not
        // for all_reduce, whose layered halves cannot meet its bound around such ranks anyway
        // (they gained nothing on 4x4x4, 5x5x5 and 8x8x8 with a failed cable, and took 1.4 to
        // 2.2 times as long).
        if c.kind != CollectiveKind::AllReduce {
            let at = 1 + usize::from(pipelined.is_some());
            let balancing: Vec<u32> = trees::balancing_piece_counts(t, c).into_iter().filter(|p| !counts.contains(p)).collect();
            counts.splice(at..at, balancing);
        }
        // Where the first count's steps could not be verified and written by the limit (a pod
        // with a short limit), a coarser count that can goes first; the finer ones follow while
        // time is left.
        if let Some(p) = coarse_enough(c, counts.first().copied(), found.end.saturating_duration_since(Instant::now())) {
            counts.retain(|&q| q != p);
            counts.insert(0, p);
        }
    }
    // An all_reduce on a torus with failed links, small enough for its halves to be pipelined
    // (whose heuristics the placement of the faults sways), is built in the canonical frame (the
    // first failed cable at the origin: `frames`), then, at the best pipelined count, in the
    // other frames while time is left. Larger ones stay in their own frame: carrying a schedule
    // back copies it (16x16x16: 3.4 GB).
    let framed = c.kind == CollectiveKind::AllReduce && counts.first().is_some_and(|&p| trees::pipelining_fits(c, p));
    let frames = if framed { frames::frames(t, c)? } else { Vec::new() };
    // Every count tried: its pieces, how long it took to build and verify, and how much of that
    // its pipelined halves took.
    let mut took: Vec<(u32, Duration, Duration)> = Vec::new();
    for (i, pieces) in counts.into_iter().enumerate() {
        if i > 0 && found.good_enough() {
            break;
        }
        if i > 0 && tree_piece_hops(c, pieces) > MAX_TREE_PIECE_HOPS {
            continue;
        }
        // A finer count takes about its share more than the last one did (the trees, their steps
        // and their verification all grow with the pieces): not started when it would end past
        // the deadline, so that the limit holds with the best so far in hand.
        // Where this count is too large for the pipelined halves, it will not take their time.
        let expected = took.last().map_or(Duration::ZERO, |&(before, took, pipelining)| {
            let took = if trees::pipelining_fits(c, pieces) { took } else { took.saturating_sub(pipelining) };
            took.mul_f64(f64::from(pieces) / f64::from(before))
        });
        if Instant::now() + expected >= deadline {
            found.limit_reached = true;
            break;
        }
        let started = Instant::now();
        let pipelining = match layered_candidate(inst, frames.first(), pieces, deadline, found, progress)? {
            Tried::Unreachable => return Ok(()),
            Tried::Offered(pipelining) => pipelining,
        };
        took.push((pieces, started.elapsed(), pipelining));
    }
    // The other frames at the count of the best candidate where it is these trees' pipelined
    // halves (the heuristics they depend on), each while the time that count took is left.
    let best = found.best.as_ref().and_then(|(e, _, _)| match e.candidate {
        Candidate::LayeredTrees { pieces, pipelined: Some(_) } => took.iter().find(|&&(p, _, _)| p == pieces).copied(),
        _ => None,
    });
    if let Some((pieces, took, _)) = best {
        for frame in frames.iter().skip(1) {
            if found.good_enough() || Instant::now() + took >= deadline {
                break;
            }
            layered_candidate(inst, Some(frame), pieces, deadline, found, progress)?;
        }
    }
    Ok(())
}

/// What [`layered_candidate`] did.
enum Tried {
    /// Offered a candidate, or ran out of time (the limit noted): how long its pipelined halves took.
    Offered(Duration),
    /// The trees cannot reach every rank over hops that are up (the reason kept).
    Unreachable,
}

/// The layered trees at `pieces` per block, built in `frame` (on the instance's own network where
/// `None`) and offered carried back onto it.
fn layered_candidate(
    inst: &Instance,
    frame: Option<&frames::Frame>,
    pieces: u32,
    deadline: Instant,
    found: &mut Gathered,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Tried> {
    let (t, c) = (&inst.topology, &inst.collective);
    let on = frame.map_or(t, |f| &f.topology);
    let moved = frame.filter(|f| !f.is_identity());
    let name = Candidate::LayeredTrees { pieces, pipelined: None }.to_string();
    progress(&Progress::Trying(match moved {
        Some(f) => format!("{name} in the frame {}", serde_json::to_string(&f.map).unwrap_or_default()),
        None => name,
    }));
    let started = Instant::now();
    let cp = Collective::new(c.kind, c.ranks.clone(), c.bytes_per_rank, pieces, None, on)?;
    // The finer trees usually win: the schedule they beat is let go before their steps are
    // built (on 8x8x8 with a failed cable, the all_gather's 12-pieces schedule, 25 MB, while
    // the 24-pieces one takes 50 MB).
    // Building, verifying and writing the steps take time in proportion to them: the balancing
    // passes end early enough for those to end by the limit.
    let passes_until = found.finish_from(tree_finish_time(c, pieces), started);
    let layered = match trees::tree_steps_within(on, &cp, (deadline, passes_until), &mut |at_most| found.let_go_if_beaten(at_most)) {
        // Trees over the hops that are up may not reach where longer routes do (`check_connected`
        // has passed): other candidates may still apply, and without one this is the reason.
        Err(e @ Error::Infeasible(_)) => {
            found.spread_error.get_or_insert(e);
            return Ok(Tried::Unreachable);
        }
        layered => layered?,
    };
    let Some(layered) = layered else {
        found.limit_reached = true;
        return Ok(Tried::Offered(Duration::ZERO));
    };
    found.limit_reached |= layered.cut_short;
    let candidate = Candidate::LayeredTrees { pieces, pipelined: layered.pipelined };
    let mut s = schedule(on, &cp, layered.steps, "layered trees");
    if let Some(f) = moved {
        s = f.carry_back(&s, t)?;
        if let Some(serde_json::Value::Object(meta)) = s.header.meta.as_mut() {
            meta.insert("frame".into(), serde_json::to_value(&f.map).expect("a coordinate map serializes"));
        }
    }
    found.offer(candidate, s, progress)?;
    Ok(Tried::Offered(layered.pipelining))
}

/// The hand-written schedules that fit the instance, the baseline the synthesized ones must beat
/// or match: on a torus HalfRing+DimRotation, MATE and MATEe for all_to_all, for the other kinds
/// the rings by dimension (folding around a failed cable); on a switched network every switched
/// algorithm for the kind under balanced routing, as `collsched generate` runs them. Those that
/// do not fit the faults are left out.
fn hand_written(t: &Topology, c: &Collective, found: &mut Gathered, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
    // The switched algorithms take a fraction of a second on the largest fat trees: always built,
    // so that `synthesize` is never behind `generate`.
    if t.num_switches() > 0 {
        progress(&Progress::Trying("switched algorithms (balanced)".into()));
        for (m, s) in switched::balanced_algorithms(t, c) {
            found.offer(Candidate::Switched(m), s, progress)?;
        }
    }
    // Past the deadline with an answer in hand, the torus baselines are not even built (MATEe
    // alone takes tens of seconds on 8x8x8, and the searches' candidates beat it there).
    if found.best.is_some() && found.past_deadline() {
        found.limit_reached = true;
        return Ok(());
    }
    let mut add = |h: HandWritten, s: Result<Schedule>| match s {
        Ok(s) => found.offer(Candidate::HandWritten(h), s, progress),
        Err(_) => Ok(()),
    };
    if c.kind == CollectiveKind::AllToAll {
        if torus_all_to_all_shape(t, c, "synthesize").is_ok() {
            // FoldedRing: HalfRing in healthy rings, and it also runs along the lines of a mesh.
            add(HandWritten::HalfRingDimRotation, torus_all_to_all(t, c, RingAlgorithm::FoldedRing, Scheduler::DimRotation))?;
            if !t.down_links().is_empty() {
                add(HandWritten::Matee, torus_mate(t, c, true))?;
                add(HandWritten::Mate, torus_mate(t, c, false))?;
            }
        }
    } else if t.torus_shape().is_some() {
        // Ring and HalfRing need wrap-around (the generator refuses a line, and a ring with a
        // failed cable, as infeasible); there FoldedRing, which is HalfRing in healthy rings, runs
        // along the lines of the mesh and folds the faulty rings. Ring is then no candidate.
        let half = match torus_ring_collective(t, c, RingAlgorithm::HalfRing) {
            Err(Error::Infeasible(_)) => (RingAlgorithm::FoldedRing, torus_ring_collective(t, c, RingAlgorithm::FoldedRing)),
            built => (RingAlgorithm::HalfRing, built),
        };
        add(HandWritten::RingsByDimension(half.0), half.1)?;
        add(HandWritten::RingsByDimension(RingAlgorithm::Ring), torus_ring_collective(t, c, RingAlgorithm::Ring))?;
    }
    Ok(())
}

/// Spreading trees for the gathering and reducing kinds: finer pieces one per transfer, then the
/// coarsest pieces several per transfer (fewer steps, less latency: what large tori need).
fn spreading_trees(t: &Topology, c: &Collective, counts: &[u32], deadline: Instant, found: &mut Gathered, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
    let settings = counts.iter().map(|&p| (p, 1)).chain(SPREAD_BATCHES.iter().map(|&b| (counts[0], b)));
    // The steps bound of each piece count, derived once (the batches share the first count's).
    let mut steps_by_pieces: Vec<(u32, u32)> = Vec::new();
    for (pieces, per_transfer) in settings {
        if Instant::now() >= deadline {
            found.limit_reached = true;
            break;
        }
        if found.good_enough() {
            break;
        }
        let candidate = Candidate::SpreadingTrees { pieces, per_transfer };
        let cp = Collective::new(c.kind, c.ranks.clone(), c.bytes_per_rank, pieces, c.block_bytes.clone(), t)?;
        // A candidate whose every schedule is slower than the best is not built (on 512 npus
        // one holds hundreds of megabytes).
        if let (Objective::Time, Some((best, _, _))) = (found.objective, &found.best) {
            let steps = || match steps_by_pieces.iter().find(|e| e.0 == pieces) {
                Some(&(_, steps)) => steps,
                None => {
                    let steps = steps_bounds(t, &cp, Duration::ZERO).best();
                    steps_by_pieces.push((pieces, steps));
                    steps
                }
            };
            if sync_time_floor_ns(t, &cp, per_transfer, steps).is_some_and(|floor| floor >= best.time_ns) {
                continue;
            }
        }
        progress(&Progress::Trying(candidate.to_string()));
        match spreading::spread_steps(t, &cp, per_transfer, deadline) {
            Ok(Some(steps)) => found.offer(candidate, schedule(t, &cp, steps, "spreading"), progress)?,
            Ok(None) => found.limit_reached = true,
            Err(e) => {
                found.spread_error = Some(e);
                break;
            }
        }
    }
    Ok(())
}

/// A floor on the step-synchronous time of every schedule of `c` that carries at most
/// `per_transfer` pieces over a link in a step, ns: a link carrying one piece per step needs
/// `steps_bound()` steps (the steps bound of [`steps_bounds`], asked for only where the floor
/// applies), so `per_transfer` pieces at a time need at least that over `per_transfer` steps
/// that move something, and each of them costs at least the least link latency plus a piece over
/// the widest link (docs/design/MODEL.md section 5). `None` on switched networks (where the
/// spreading trees never win, and paths through switches cost more than a link's latency) and
/// for blocks of different sizes.
fn sync_time_floor_ns(t: &Topology, c: &Collective, per_transfer: usize, steps_bound: impl FnOnce() -> u32) -> Option<f64> {
    if t.num_switches() > 0 || !c.is_uniform() || c.num_ranks() < 2 {
        return None;
    }
    let up = || t.links().filter(|(_, l)| l.up).map(|(_, l)| l);
    let latency = up().map(|l| l.latency_ns).fold(f64::INFINITY, f64::min);
    let bandwidth = up().map(|l| l.bandwidth_gbps).fold(0.0, f64::max);
    let piece = to_f64(&c.block_size(0, 1)) / c.pieces as f64;
    let steps = steps_bound().div_ceil(per_transfer.max(1) as u32);
    (latency.is_finite() && bandwidth > 0.0).then(|| steps as f64 * (latency + piece / bandwidth) * (1.0 - 1e-9))
}

/// The pieces per block the searches try.
fn counts_of(inst: &Instance) -> Vec<u32> {
    if inst.pieces_given {
        vec![inst.collective.pieces]
    } else {
        PIECE_COUNTS.to_vec()
    }
}

/// How many networks without their slowest links [`without_slow_links`] tries at most.
const SLOW_LINK_LEVELS: usize = 2;

/// The searches count hops and steps: on a network whose links differ widely in speed a short
/// path over a slow link can hold a whole step (a custom network with a 0.001 GB/s link beside 30
/// GB/s ones: 32.8 ms for an all_to_all that runs in 3.6 us without it; a ring whose links one
/// way have 1 s of latency: 2 s against 49 us one way round). So where links have several
/// bandwidths, the searches also run on the network with the links below each of its lowest
/// bandwidths taken out, and where they have several latencies, with the links above each of its
/// highest latencies taken out (at most [`SLOW_LINK_LEVELS`] of each, as long as the ranks still
/// reach one another), and their schedules, which use links of the whole network only, are
/// judged on the whole network.
fn without_slow_links(inst: &Instance, counts: &[u32], deadline: Instant, found: &mut Gathered, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
    let t = &inst.topology;
    let levels = |value: fn(&crate::topology::Link) -> f64| {
        let mut v: Vec<f64> = t.links().filter(|(_, l)| l.up).map(|(_, l)| value(l)).collect();
        v.sort_unstable_by(f64::total_cmp);
        v.dedup();
        v
    };
    for floor in levels(|l| l.bandwidth_gbps).into_iter().skip(1).take(SLOW_LINK_LEVELS) {
        let what = format!("the network without its links below {floor} GB/s");
        if !without_links(inst, &what, |l| l.bandwidth_gbps < floor, counts, deadline, found, progress)? {
            break;
        }
    }
    for ceiling in levels(|l| l.latency_ns).into_iter().rev().skip(1).take(SLOW_LINK_LEVELS) {
        let what = format!("the network without its links of more than {} latency", crate::units::format_ns(ceiling));
        if !without_links(inst, &what, |l| l.latency_ns > ceiling, counts, deadline, found, progress)? {
            break;
        }
    }
    Ok(())
}

/// The searches of [`without_slow_links`] on `inst`'s network without the links that are `slow`;
/// false where there is no time left or the ranks no longer reach one another without them.
fn without_links(
    inst: &Instance,
    what: &str,
    slow: impl Fn(&crate::topology::Link) -> bool,
    counts: &[u32],
    deadline: Instant,
    found: &mut Gathered,
    progress: &mut dyn FnMut(&Progress),
) -> Result<bool> {
    let (t, c) = (&inst.topology, &inst.collective);
    if Instant::now() >= deadline {
        return Ok(false);
    }
    let mut pruned = t.clone();
    for (l, _) in t.links().filter(|(_, l)| l.up && slow(l)) {
        pruned.set_down(l);
    }
    if pruned.check_connected(&c.ranks).is_err() {
        return Ok(false);
    }
    progress(&Progress::Trying(what.to_string()));
    let sub = Instance { topology: pruned, ..inst.clone() };
    found.retarget = Some(t.clone());
    let outcome = searches_by_kind(&sub, counts, (true, false), deadline, found, progress);
    found.retarget = None;
    match outcome {
        // The whole network's candidates stand; one that cannot run without these links is no loss.
        Err(Error::Infeasible(_)) if found.best.is_some() => {}
        other => other?,
    }
    Ok(true)
}

/// The searches for `inst`'s kind and network, each run where the best so far leaves it something
/// to gain: time-expanded routing for an all_to_all that is `flat` (else planes and lines);
/// otherwise the layered trees on networks without switches and the spreading trees; route-and-step
/// through switches; the hand-written algorithms too where `whole` (the instance's own network,
/// not one with links taken out).
fn searches_by_kind(
    inst: &Instance,
    counts: &[u32],
    (flat, whole): (bool, bool),
    deadline: Instant,
    found: &mut Gathered,
    progress: &mut dyn FnMut(&Progress),
) -> Result<()> {
    let (t, c) = (&inst.topology, &inst.collective);
    let a2a = c.kind == CollectiveKind::AllToAll;
    // An all_to_all's piece-hops at one piece per block: flat at some piece count.
    let per_piece = a2a_piece_hops(t, c, 1).unwrap_or(0);
    if a2a && flat {
        time_expanded_routing(t, c, counts, !inst.pieces_given, deadline, found, progress)?;
    } else if a2a {
        // Planes and lines route pieces through the planes' ranks: never the steps model.
        if found.objective != Objective::Steps {
            planes_and_lines(t, c, deadline, found, progress)?;
        }
        // Pieces a spec fixes too fine to route flat (65,536 per block on a 2x2x2 torus): coarser
        // ones that divide them are routed, and `offer` cuts the schedules into the spec's.
        let coarse: Vec<u32> = PIECE_COUNTS.into_iter().filter(|&d| c.pieces % d == 0 && per_piece * u64::from(d) <= MAX_FLAT_PIECE_HOPS).collect();
        if inst.pieces_given && !coarse.is_empty() {
            time_expanded_routing(t, c, &coarse, false, deadline, found, progress)?;
        }
    } else if t.num_switches() == 0 {
        // Through switches every npu is one hop from every other: the layered trees would be
        // stars, each root's uplink carrying every copy (hundreds of steps on the reference
        // fat trees); route-and-step is built for those networks.
        layered_trees(inst, deadline, found, progress)?;
    }
    // At pod scale the layered trees leave the gathering and reducing kinds nothing to gain.
    let large = !a2a && found.best.is_some() && tree_piece_hops(c, 1) > SECONDARY_PIECE_HOPS;
    if whole && ((!found.good_enough() && !large && (flat || per_piece <= MAX_FLAT_PIECE_HOPS)) || found.best.is_none()) {
        hand_written(t, c, found, progress)?;
    }
    if !a2a && !found.good_enough() && !large {
        spreading_trees(t, c, counts, deadline, found, progress)?;
    }
    if t.num_switches() > 0 && !found.good_enough() {
        route_and_step(t, c, found, progress)?;
    }
    // Cheap where it applies (it fails at once on a torus of more than 7 ranks), and one latency
    // ahead of the others on two ranks even when they are within the good-enough gap.
    if let Some(steps) = one_shot::one_shot(t, c) {
        found.offer(Candidate::OneShot, schedule(t, c, steps, "one-shot"), progress)?;
    }
    Ok(())
}

/// The route-and-step candidates of a switched network.
fn route_and_step(t: &Topology, c: &Collective, found: &mut Gathered, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
    progress(&Progress::Trying("fat-tree route-and-step candidates".into()));
    match switched::route_and_step_candidates(t, c) {
        Ok(list) => {
            for (m, s) in list {
                found.offer(Candidate::Switched(m), s, progress)?;
            }
        }
        // Other candidates may remain; with none, the caller's error says so.
        Err(e) if found.best.is_none() => return Err(e),
        Err(_) => {}
    }
    Ok(())
}

/// The first npu outside the collective's group that a transfer of `s` starts or ends at: such
/// an npu would have to store and forward, but runs no program in a runtime (rule 6 lowers the
/// ranks alone).
pub fn relay_outside_group(s: &Schedule) -> Option<NodeId> {
    let (t, c) = (&s.header.topology, &s.header.collective);
    let ends = s.steps.iter().flat_map(|st| &st.transfers).flat_map(|x| [x.path.first().map(|l| t.link(*l).src), x.path.last().map(|l| t.link(*l).dst)]);
    ends.flatten().find(|&v| c.rank_index(v).is_none())
}

/// The schedule of synthesized steps, with the shape of the topology kept for the readers.
fn schedule(t: &Topology, c: &Collective, steps: Vec<Step>, method: &str) -> Schedule {
    let meta = serde_json::json!({"algorithm": "synth", "method": method});
    Schedule { header: ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: Some(meta) }, steps }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    /// The flat searches' size gate: piece-hops counted by ring distances (4x4x4: 64 x 63 pairs,
    /// 3 x 1 hops on average; a ring of 6 averages 3/2), 9x9x9 searched flat, 10x10x10 not.
    #[test]
    fn flat_all_to_all_size_gate() {
        let hops = |dims: &str| {
            let inst = instance(dims, "{}", "");
            a2a_piece_hops(&inst.topology, &inst.collective, 1).unwrap()
        };
        assert_eq!(hops("[4, 4, 4]"), 64 * 63 * 3);
        assert_eq!(hops("[6]"), 6 * 5 * 3 / 2);
        assert!(hops("[9, 9, 9]") <= MAX_FLAT_PIECE_HOPS);
        assert!(hops("[10, 10, 10]") > MAX_FLAT_PIECE_HOPS);
    }

    /// A short limit on a large instance starts the layered trees at the largest divisor of the
    /// first piece count whose steps can be finished in the time left, else at one piece; a
    /// limit that fits leaves the counts alone.
    #[test]
    fn a_short_limit_starts_the_trees_at_a_coarser_divisor() {
        let inst = instance("[16, 16]", "{}", "");
        let of = |kind: CollectiveKind| Collective::new(kind, inst.collective.ranks.clone(), inst.collective.bytes_per_rank, 1, None, &inst.topology).unwrap();
        let c = &of(CollectiveKind::AllReduce);
        // 256 x 255 edges per piece, both halves, at 200 ns per piece-hop: 26.1 ms per piece per block.
        let per_piece = tree_finish_time(c, 1);
        assert_eq!(tree_piece_hops(c, 1), 2 * 256 * 255);
        assert_eq!(coarse_enough(c, Some(8), per_piece * 9), None);
        assert_eq!(coarse_enough(c, Some(8), per_piece.mul_f64(8.01)), None);
        // Not 7, 6 or 5: the largest divisor of 8 below it.
        assert_eq!(coarse_enough(c, Some(8), per_piece.mul_f64(7.5)), Some(4));
        assert_eq!(coarse_enough(c, Some(6), per_piece.mul_f64(5.9)), Some(3));
        assert_eq!(coarse_enough(c, Some(6), per_piece.mul_f64(2.5)), Some(2));
        assert_eq!(coarse_enough(c, Some(6), per_piece.mul_f64(0.5)), Some(1));
        assert_eq!(coarse_enough(c, Some(1), Duration::ZERO), None);
        assert_eq!(coarse_enough(c, None, Duration::ZERO), None);
        // The gathering kinds are estimated at half the reducing kinds' pace, per half.
        assert_eq!(coarse_enough(&of(CollectiveKind::AllGather), Some(6), per_piece.mul_f64(6.01 / 4.0)), None);
        assert_eq!(coarse_enough(&of(CollectiveKind::AllGather), Some(6), per_piece.mul_f64(5.9 / 4.0)), Some(3));
    }

    fn instance(dims: &str, faults: &str, extra: &str) -> Instance {
        let text = format!(
            "{{\"topology\": {{\"torus\": {{\"dims\": {dims}, \"bandwidth_gbps\": 32.0, \"latency_ns\": 100.0}}}}, \"faults\": {faults}, \"collective\": {{\"kind\": \"all_to_all\", \"bytes_per_rank\": \"8MiB\"{extra}}}}}"
        );
        Spec::parse(&text, "test").unwrap().instance().unwrap()
    }

    fn opts() -> SynthOptions {
        // These tests weigh the synthesized schedule against every candidate.
        SynthOptions { time_limit: Duration::from_secs(30), verify_every_candidate: true, ..Default::default() }
    }

    #[test]
    fn a_slow_link_on_a_short_path_is_left_out() {
        // Npus 0-1 joined directly at 100 GB/s and all four through a switch, npus 2-3 directly;
        // npu 3's only way into the switch is 0.001 GB/s. Counted in hops, the all_to_all took that
        // link (32.8 ms); without it every piece has a fast way (under 3 us).
        let link = |id: u32, a: u32, b: u32, gbps: f64| format!(r#"{{"id": {id}, "src": {a}, "dst": {b}, "bandwidth_gbps": {gbps}, "latency_ns": 5}}"#);
        let ends = [
            (0, 1, 100.0),
            (1, 0, 100.0),
            (0, 4, 25.0),
            (4, 0, 25.0),
            (1, 4, 25.0),
            (4, 1, 25.0),
            (2, 4, 50.0),
            (4, 2, 50.0),
            (3, 4, 0.001),
            (4, 3, 1e6),
            (2, 3, 20.0),
            (3, 2, 30.0),
        ];
        let links: Vec<String> = ends.iter().enumerate().map(|(i, &(a, b, g))| link(i as u32, a, b, g)).collect();
        let nodes = r#"{"id": 0, "kind": "npu"}, {"id": 1, "kind": "npu"}, {"id": 2, "kind": "npu"}, {"id": 3, "kind": "npu"}, {"id": 4, "kind": "switch"}"#;
        let spec = |kind: &str| {
            format!(
                r#"{{"topology": {{"custom": {{"nodes": [{nodes}], "links": [{}]}}}}, "collective": {{"kind": "{kind}", "bytes_per_rank": "64KiB"}}}}"#,
                links.join(", ")
            )
        };
        for kind in ["all_to_all", "all_gather"] {
            let inst = Spec::parse(&spec(kind), "test").unwrap().instance().unwrap();
            let a = synthesize(&inst, &SynthOptions { time_limit: Duration::from_secs(20), ..Default::default() }, Objective::Time, &mut |_| {}).unwrap();
            let time = to_f64(&a.cost.time_ns());
            assert!(time < 10_000.0, "{kind}: {time} ns");
            assert!(a.schedule.header.topology.down_links().is_empty(), "{kind}: judged and written on the whole network");
            assert!(verify_schedule(&a.schedule, &VerifyOptions::default()).unwrap().is_valid());
        }
    }

    #[test]
    fn a_link_of_long_latency_on_a_short_path_is_left_out() {
        // A ring of four whose links one way round take 1 s: the fewest steps use them (2 s);
        // one way round every kind runs in tens of microseconds.
        let links: Vec<String> = (0..4)
            .flat_map(|i| [(i, (i + 1) % 4, 100.0), ((i + 1) % 4, i, 1e9)])
            .enumerate()
            .map(|(id, (a, b, ns))| format!(r#"{{"id": {id}, "src": {a}, "dst": {b}, "bandwidth_gbps": 32, "latency_ns": {ns}}}"#))
            .collect();
        let nodes = (0..4).map(|i| format!(r#"{{"id": {i}, "kind": "npu"}}"#)).collect::<Vec<_>>().join(", ");
        for kind in ["all_to_all", "all_gather", "reduce_scatter", "all_reduce"] {
            let text = format!(
                r#"{{"topology": {{"custom": {{"nodes": [{nodes}], "links": [{}]}}}}, "collective": {{"kind": "{kind}", "bytes_per_rank": "1MiB"}}}}"#,
                links.join(", ")
            );
            let inst = Spec::parse(&text, "test").unwrap().instance().unwrap();
            let a = synthesize(&inst, &SynthOptions { time_limit: Duration::from_secs(20), ..Default::default() }, Objective::Time, &mut |_| {}).unwrap();
            let time = to_f64(&a.cost.time_ns());
            assert!(time < 100_000.0, "{kind}: {time} ns by {}", a.chosen);
            assert!(a.schedule.header.topology.down_links().is_empty(), "{kind}: judged and written on the whole network");
            assert!(verify_schedule(&a.schedule, &VerifyOptions::default()).unwrap().is_valid());
        }
    }

    #[test]
    fn pieces_fixed_by_the_spec_are_kept_by_every_kind() {
        // The hand-written candidates choose their own pieces (HalfRing halves, MATEe shares); a
        // spec that fixes `pieces` must get a schedule in those, whichever candidate wins.
        for kind in ["all_to_all", "all_gather", "reduce_scatter", "all_reduce"] {
            for (dims, faults) in [("[3]", "{\"cables\": [[[1], [2]]]}"), ("[4, 4]", "{}")] {
                let mut inst = instance(dims, faults, ", \"pieces\": 3");
                inst.collective =
                    crate::collective::Collective::new(CollectiveKind::parse(kind).unwrap(), inst.collective.ranks.clone(), 1 << 20, 3, None, &inst.topology)
                        .unwrap();
                let a = synthesize(&inst, &opts(), Objective::Time, &mut |_| {}).unwrap();
                assert_eq!(a.schedule.header.collective.pieces, 3, "{kind} on {dims}: {}", a.chosen);
            }
        }
        // Too many to route flat (2x2x2 at 65,536 pieces per block: 5.5 million piece-hops), or
        // a hand-written schedule's own pieces divide them (4x4): coarser schedules are cut into
        // them, near the bound; before, the fewest-steps search alone answered, with 262,144 and
        // 524,288 steps.
        for dims in ["[2, 2, 2]", "[4, 4]"] {
            let inst = instance(dims, "{}", ", \"pieces\": 65536");
            let a = synthesize(&inst, &opts(), Objective::Time, &mut |_| {}).unwrap();
            assert_eq!(a.schedule.header.collective.pieces, 65536, "{dims}: {}", a.chosen);
            assert!(a.gap.unwrap() < 0.05 && a.schedule.steps.len() < 100, "{dims}: {} {:?} in {} steps", a.chosen, a.gap, a.schedule.steps.len());
        }
    }

    #[test]
    fn small_faulty_tori_route_finer_pieces_while_they_gain() {
        // 4x4 with three failed cables: at 8 pieces per block, the finest of the counts every
        // instance tries, the routing is 5.85% above the certified bound; twice and four times
        // as many pieces spread the cut further (3.24% at 32), and the answer is no limit reached.
        let faults = r#"{"cables": [[[2, 2], [3, 2]], [[1, 3], [2, 3]], [[2, 1], [2, 2]]]}"#;
        let a = synthesize(&instance("[4, 4]", faults, ""), &opts(), Objective::Time, &mut |_| {}).unwrap();
        assert!(matches!(a.chosen, Candidate::TimeExpandedRouting { pieces, .. } if pieces > 8), "{}", a.chosen);
        assert!(a.gap.unwrap() < 0.035, "{:?}", a.gap);
        assert!(!a.limit_reached);
    }

    /// Instances with nothing to move synthesize an empty schedule, whose certified bounds are 0
    /// (no gap is printed against them): a lone rank whose links have all failed (its flow bound
    /// would price no link), and blocks of 0 bytes (the gap would divide by 0).
    #[test]
    fn nothing_to_move_gives_an_empty_schedule() {
        for (dims, faults, extra) in [("[2]", "{\"nodes\": [[0]]}", ""), ("[4]", "{}", ", \"block_bytes\": [[0,0,0,0],[0,0,0,0],[0,0,0,0],[0,0,0,0]]")] {
            let a = synthesize(&instance(dims, faults, extra), &opts(), Objective::Time, &mut |_| {}).unwrap();
            assert!(a.schedule.steps.is_empty(), "{dims} {faults} {extra}: {} steps", a.schedule.steps.len());
            assert_eq!(a.gap, None, "{dims} {faults} {extra}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 16, ..Default::default() })]

        /// The floor that lets spreading candidates go unbuilt is below every spreading schedule,
        /// over sizes, failed cables, kinds, pieces and batches.
        #[test]
        fn the_time_floor_is_below_every_spreading_schedule(
            dims in proptest::collection::vec(2usize..6, 1..=3),
            cuts in proptest::collection::vec((0usize..1000, 0usize..8), 0..=2),
            kind in proptest::sample::select(vec![CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce]),
            pieces in 1u32..=4,
            batch in 1usize..=3,
        ) {
            let mut t = crate::topology::torus(&crate::topology::TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            crate::synth::steps::tests::fail_picked_cables(&mut t, &cuts);
            proptest::prop_assume!(t.check_connected(&t.node_ids().collect::<Vec<_>>()).is_ok());
            let c = Collective::new(kind, t.node_ids().collect(), 8 << 20, pieces, None, &t).unwrap();
            let Ok(Some(steps)) = spreading::spread_steps(&t, &c, batch, Instant::now() + Duration::from_secs(60)) else { return Ok(()) };
            let time = to_f64(&sync_cost(&schedule(&t, &c, steps, "spreading")).unwrap().time_ns());
            let floor = sync_time_floor_ns(&t, &c, batch, || steps_bounds(&t, &c, Duration::ZERO).best()).unwrap();
            proptest::prop_assert!(floor <= time, "floor {floor} ns above a spreading schedule's {time} ns");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

        /// Random small directed networks that are strongly connected (a one-way ring through a
        /// shuffled order of the npus plus a few one-way links): no objective calls them
        /// infeasible, and what comes back verifies.
        #[test]
        fn strongly_connected_directed_networks_are_never_infeasible(
            order in proptest::strategy::Strategy::prop_shuffle(proptest::strategy::Just((0u32..5).collect::<Vec<_>>())),
            n in 3usize..=5,
            extra in proptest::collection::vec((0u32..5, 0u32..5), 0..=3),
            kind in proptest::sample::select(vec![CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce]),
            objective in proptest::sample::select(vec![Objective::Time, Objective::Event, Objective::Steps]),
            pieces in 1u32..=2,
        ) {
            let order: Vec<u32> = order.into_iter().filter(|&v| (v as usize) < n).collect();
            let mut ends: Vec<(u32, u32)> = (0..n).map(|i| (order[i], order[(i + 1) % n])).collect();
            for (a, b) in extra {
                let (a, b) = (a % n as u32, b % n as u32);
                if a != b && !ends.contains(&(a, b)) {
                    ends.push((a, b));
                }
            }
            let nodes: Vec<String> = (0..n).map(|v| format!(r#"{{"id": {v}, "kind": "npu", "name": "n{v}"}}"#)).collect();
            let links: Vec<String> = ends
                .iter()
                .enumerate()
                .map(|(i, (a, b))| format!(r#"{{"id": {i}, "src": {a}, "dst": {b}, "bandwidth_gbps": 32, "latency_ns": 100, "up": true}}"#))
                .collect();
            let text = format!(
                r#"{{"topology": {{"custom": {{"nodes": [{}], "links": [{}]}}}}, "collective": {{"kind": "{kind}", "bytes_per_rank": "6KiB", "pieces": {pieces}}}}}"#,
                nodes.join(", "),
                links.join(", ")
            );
            let inst = Spec::parse(&text, "test").unwrap().instance().unwrap();
            let opts = SynthOptions { time_limit: Duration::from_secs(10), ..Default::default() };
            let a = synthesize(&inst, &opts, objective, &mut |_| {});
            proptest::prop_assert!(a.is_ok(), "{text}: {:?}", a.err());
            let r = verify_schedule(&a.unwrap().schedule, &VerifyOptions::default()).unwrap();
            proptest::prop_assert!(r.is_valid(), "{text}: {:?}", r.findings.failures().first());
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, ..Default::default() })]

        /// Over sizes and the position of a failed cable, with a limit that leaves the search
        /// time and one already past at the start (candidates that cannot win go unverified):
        /// the all_to_all chosen verifies with every rule, is the fastest verified candidate, and
        /// is not below the certified bound.
        #[test]
        fn faulty_tori_all_to_all_verifies_with_every_rule(
            dims in proptest::prop_oneof![proptest::collection::vec(3usize..6, 1..=2), proptest::collection::vec(3usize..4, 3..=3)],
            at in 0usize..1000,
            dim in 0usize..3,
            limit in proptest::prop_oneof![proptest::strategy::Just(0.01), proptest::strategy::Just(2.0)],
        ) {
            let dim = dim % dims.len();
            let n: usize = dims.iter().product();
            // The node `at` in mixed radix, first coordinate fastest, and its neighbour along `dim`.
            let mut rest = at % n;
            let from: Vec<usize> = dims.iter().map(|&d| { let x = rest % d; rest /= d; x }).collect();
            let mut to = from.clone();
            to[dim] = (to[dim] + 1) % dims[dim];
            let faults = format!("{{\"cables\": [[{from:?}, {to:?}]]}}");
            let inst = instance(&format!("{dims:?}"), &faults, "");
            let opts = SynthOptions { time_limit: Duration::from_secs_f64(limit), ..Default::default() };
            let a = synthesize(&inst, &opts, Objective::Time, &mut |_| {}).unwrap();
            let r = crate::verify::verify_every_rule(&a.schedule);
            proptest::prop_assert!(r.is_valid(), "{:?}", r.findings.failures().first());
            let time = to_f64(&a.cost.time_ns());
            for e in &a.entries {
                proptest::prop_assert!(time <= e.time_ns, "chosen {} at {} but {:?}", a.chosen, time, e);
            }
            proptest::prop_assert!(a.gap.unwrap() >= -1e-9, "gap {:?}", a.gap);
        }
    }

    #[test]
    fn a_faulty_torus_gets_within_five_percent_and_beats_every_hand_written_schedule() {
        let inst = instance("[4, 4]", "{\"cables\": [[[0, 0], [1, 0]]]}", "");
        let a = synthesize(&inst, &opts(), Objective::Time, &mut |_| {}).unwrap();
        assert!(a.gap.unwrap() < 0.05, "gap {:?}", a.gap);
        let time = to_f64(&a.cost.time_ns());
        for hand in [HandWritten::HalfRingDimRotation, HandWritten::Mate, HandWritten::Matee] {
            let e = a.entries.iter().find(|e| e.candidate == Candidate::HandWritten(hand)).unwrap_or_else(|| panic!("{hand:?} missing: {:?}", a.entries));
            assert!(time < e.time_ns, "{} vs {hand:?} {}", time, e.time_ns);
        }
        assert!(matches!(a.chosen, Candidate::TimeExpandedRouting { .. }), "{}", a.chosen);
        let r = verify_schedule(&a.schedule, &VerifyOptions::default()).unwrap();
        assert!(r.is_valid());
        // The trade-off: fewest steps first, time strictly falling, nothing in it beaten.
        let front = a.pareto();
        assert!(!front.is_empty());
        for w in front.windows(2) {
            assert!(w[0].steps < w[1].steps && w[0].time_ns > w[1].time_ns, "{front:?}");
        }
        for e in &a.entries {
            assert!(front.iter().any(|f| f.steps <= e.steps && f.time_ns <= e.time_ns), "{e:?} not covered");
        }
    }

    /// An all_reduce around one failed cable is built in the canonical frame wherever the cable
    /// lies, so every placement gets the same time; a schedule built in a moved frame says so in
    /// its meta and verifies on the instance's own network.
    #[test]
    fn an_all_reduce_around_a_cable_costs_the_same_wherever_the_cable_lies() {
        let inst = |cable: &str| {
            let text = format!(
                "{{\"topology\": {{\"torus\": {{\"dims\": [3, 3, 3], \"bandwidth_gbps\": 32.0, \"latency_ns\": 100.0}}}}, \"faults\": {{\"cables\": [{cable}]}}, \"collective\": {{\"kind\": \"all_reduce\", \"bytes_per_rank\": \"8MiB\"}}}}"
            );
            Spec::parse(&text, "test").unwrap().instance().unwrap()
        };
        let opts = SynthOptions { time_limit: Duration::from_secs(60), ..Default::default() };
        let mut times = Vec::new();
        for cable in ["[[0, 0, 0], [1, 0, 0]]", "[[1, 2, 0], [1, 2, 1]]", "[[2, 1, 1], [0, 1, 1]]"] {
            let inst = inst(cable);
            let a = synthesize(&inst, &opts, Objective::Time, &mut |_| {}).unwrap();
            assert!(matches!(a.chosen, Candidate::LayeredTrees { pipelined: Some(_), .. }), "{}", a.chosen);
            assert!(a.gap.unwrap() < 0.05, "{cable}: gap {:?}", a.gap);
            assert_eq!(a.schedule.header.topology.down_links(), inst.topology.down_links());
            let r = verify_schedule(&a.schedule, &VerifyOptions::default()).unwrap();
            assert!(r.is_valid(), "{cable}: {:?}", r.findings.failures());
            let frame = a.schedule.header.meta.as_ref().and_then(|m| m.get("frame")).cloned();
            if cable.starts_with("[[1") {
                assert!(frame.is_some(), "{cable}: {:?}", a.schedule.header.meta);
            }
            times.push(to_f64(&a.cost.time_ns()));
        }
        assert!(times.iter().all(|&t| t == times[0]), "{times:?}");
    }

    /// Without `pieces`, the piece count lets the ranks at a failed cable carry an equal share: 3
    /// pieces per block on 6x6 (its 3-link ranks take 35 pieces of each block index), 5 on 4x4x4
    /// (5 links, 63); the derived counts alone (4, 8, 16 and 6, 12, 24) stay 1.2% and 0.2% above.
    #[test]
    fn the_piece_count_meets_the_bound_where_one_does() {
        for (dims, cable, kind) in [("[6, 6]", "[[0, 0], [1, 0]]", "all_gather"), ("[4, 4, 4]", "[[0, 0, 0], [1, 0, 0]]", "reduce_scatter")] {
            let text = format!(
                r#"{{"topology": {{"torus": {{"dims": {dims}, "bandwidth_gbps": 32.0, "latency_ns": 100.0}}}}, "faults": {{"cables": [{cable}]}}, "collective": {{"kind": "{kind}", "bytes_per_rank": "8MiB"}}}}"#
            );
            let inst = Spec::parse(&text, "test").unwrap().instance().unwrap();
            let a = synthesize(&inst, &opts(), Objective::Time, &mut |_| {}).unwrap();
            assert_eq!(a.gap, Some(0.0), "{dims} {kind}: {} {:?}", a.chosen, a.gap);
        }
    }

    #[test]
    fn skewed_blocks_weigh_by_their_bytes() {
        let n = 12;
        let rows: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "[{}]",
                    (0..n)
                        .map(|j| if i == j {
                            "0"
                        } else if j < 2 {
                            "400000"
                        } else {
                            "100000"
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
            .collect();
        let inst = instance("[4, 3]", "{\"cables\": [[[1, 1], [2, 1]]]}", &format!(", \"block_bytes\": [{}]", rows.join(", ")));
        let a = synthesize(&inst, &opts(), Objective::Time, &mut |_| {}).unwrap();
        assert!(a.gap.unwrap() < 0.10, "gap {:?}", a.gap);
        let hand = a.entries.iter().filter(|e| !e.candidate.is_synthesized());
        for e in hand {
            assert!(to_f64(&a.cost.time_ns()) < e.time_ns, "{e:?}");
        }
    }

    #[test]
    fn switched_networks_choose_by_the_objectives_time_for_every_kind() {
        use crate::topology::{fat_tree, FatTreeParams, NodeId};
        let params = FatTreeParams { levels: 2, k: 8, osr: 1.0, npus: 64, board: Some(8), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 };
        let t = fat_tree(&params).unwrap();
        let ranks: Vec<NodeId> = (0..32).map(NodeId).collect();
        for kind in [CollectiveKind::AllToAll, CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce] {
            let c = crate::collective::Collective::new(kind, ranks.clone(), 1 << 20, 1, None, &t).unwrap();
            let inst = Instance { topology: t.clone(), collective: c, pieces_given: false };
            // The event objective: the least event-driven time.
            let a = synthesize(&inst, &opts(), Objective::Event, &mut |_| {}).unwrap();
            let chosen = a.event_ns.unwrap();
            assert!(a.entries.iter().all(|e| e.event_ns.unwrap() >= chosen), "{kind}: {:?}", a.entries);
            // The fewest-steps search runs for every kind here: for the others as a candidate
            // of this size (32 ranks of one piece) that the event objective may take.
            assert!(a.steps_report.is_some(), "{kind}");
            if kind == CollectiveKind::AllToAll {
                // The slotted pairwise meets the bound in the event-driven model (EP=32: 5.07 us).
                assert!(chosen <= 1.01 * a.bound_ns.unwrap(), "{chosen} vs {:?}", a.bound_ns);
            }
            // The time objective: the least step-synchronous time, as on every network.
            let a = synthesize(&inst, &opts(), Objective::Time, &mut |_| {}).unwrap();
            let chosen = to_f64(&a.cost.time_ns());
            assert!(a.entries.iter().all(|e| e.time_ns >= chosen), "{kind}: {:?}", a.entries);
        }
    }

    /// A 16-npu fat tree (k = 8, no boards) at 1 MiB, healthy and with a leaf-spine cable down.
    fn ft16(faults: &str, kind: &str) -> Instance {
        let text = format!(
            r#"{{"topology": {{"fat_tree": {{"levels": 2, "k": 8, "osr": 1, "npus": 16, "board": null, "bandwidth_gbps": 400, "latency_ns": 25, "switch_latency_ns": 1000}}}}, "faults": {faults}, "collective": {{"kind": "{kind}", "bytes_per_rank": "1MiB"}}}}"#
        );
        Spec::parse(&text, "test").unwrap().instance().unwrap()
    }

    /// `synthesize` is never behind `collsched generate` on a switched network: every switched
    /// algorithm for the kind, under balanced routing, is among its candidates (FT16 all_to_all:
    /// 42.81 us, the fewest-steps schedule chosen event-driven, against bruck's 17.64 us).
    #[test]
    fn fat_trees_are_never_behind_the_switched_algorithms() {
        use crate::algorithms::switched::{switched as generate, Routing, SwitchedAlgorithm};
        for faults in ["{}", r#"{"cables": [[16, 20]]}"#] {
            for kind in ["all_to_all", "all_gather", "reduce_scatter", "all_reduce"] {
                let inst = ft16(faults, kind);
                let a = synthesize(&inst, &SynthOptions { time_limit: Duration::from_secs(20), ..Default::default() }, Objective::Time, &mut |_| {}).unwrap();
                let time = to_f64(&a.cost.time_ns());
                for alg in SwitchedAlgorithm::ALL.into_iter().filter(|a| a.kinds().contains(&inst.collective.kind)) {
                    let s = generate(&inst.topology, &inst.collective, alg, Routing::Balanced).unwrap();
                    let generated = to_f64(&sync_cost(&s).unwrap().time_ns());
                    assert!(time <= generated, "{kind} {faults}: {} at {time} ns, {} at {generated} ns", a.chosen, alg.as_str());
                }
            }
        }
    }

    /// The steps objective weighs every candidate of the steps model: with a leaf-spine cable down
    /// the search finds 21 steps, the greedy slotted pairwise 18 (one piece per block, single
    /// hops, no link shared), and the report counts those.
    #[test]
    fn the_steps_objective_takes_the_fewest_steps_of_every_candidate() {
        let inst = ft16(r#"{"cables": [[16, 20]]}"#, "all_to_all");
        let a = synthesize(&inst, &SynthOptions { time_limit: Duration::from_secs(20), ..Default::default() }, Objective::Steps, &mut |_| {}).unwrap();
        let steps = a.schedule.steps.len();
        assert!(steps <= 18, "{}: {steps} steps", a.chosen);
        assert!(in_steps_model(&a.schedule, 1), "{}", a.chosen);
        let report = a.steps_report.as_ref().unwrap();
        assert_eq!(report.steps_found, Some(steps as u32));
        assert_eq!(a.fewest_steps_by, Some(a.chosen));
        assert!(a.entries.iter().filter(|e| e.steps_model).all(|e| e.steps >= steps), "{:?}", a.entries);
        // The time objective reports the same fewest steps beside its faster schedule.
        let b = synthesize(&inst, &SynthOptions { time_limit: Duration::from_secs(20), ..Default::default() }, Objective::Time, &mut |_| {}).unwrap();
        assert_eq!(b.steps_report.unwrap().steps_found, Some(steps as u32));
    }

    #[test]
    fn the_time_objectives_are_never_behind_the_fewest_steps_search() {
        // One piece per block, where a step's latency outweighs its bytes: the layered trees'
        // 3x3 all_gather took 11.12 us, the fewest-steps search's 7.48 us (the bound).
        for (dims, kind) in [("[3, 3]", "all_gather"), ("[3, 3]", "reduce_scatter"), ("[4, 4]", "all_reduce"), ("[4]", "all_reduce"), ("[2, 2]", "all_reduce")]
        {
            let text = format!(
                r#"{{"topology": {{"torus": {{"dims": {dims}, "bandwidth_gbps": 32.0, "latency_ns": 100.0}}}}, "collective": {{"kind": "{kind}", "bytes_per_rank": "1MiB", "pieces": 1}}}}"#
            );
            let inst = Spec::parse(&text, "test").unwrap().instance().unwrap();
            let limit = SynthOptions { time_limit: Duration::from_secs(10), ..Default::default() };
            let steps = synthesize(&inst, &limit, Objective::Steps, &mut |_| {}).unwrap();
            for objective in [Objective::Time, Objective::Event] {
                let a = synthesize(&inst, &limit, objective, &mut |_| {}).unwrap();
                let (mine, theirs) = match objective {
                    Objective::Event => (a.event_ns.unwrap(), event_cost(&steps.schedule, false).unwrap().time_ns),
                    _ => (to_f64(&a.cost.time_ns()), to_f64(&steps.cost.time_ns())),
                };
                assert!(mine <= theirs + 1e-6, "{dims} {kind} {objective:?}: {} {mine} ns, fewest steps {theirs} ns", a.chosen);
                assert!(a.steps_report.is_some() || a.chosen == Candidate::OneShot, "{dims} {kind}: the search ran");
            }
        }
        // Two ranks reduce in one step, at the bound (the two halves took one latency more).
        let text = r#"{"topology": {"torus": {"dims": [2], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}, "collective": {"kind": "all_reduce", "bytes_per_rank": "1MiB"}}"#;
        let inst = Spec::parse(text, "test").unwrap().instance().unwrap();
        let a = synthesize(&inst, &SynthOptions { time_limit: Duration::from_secs(10), ..Default::default() }, Objective::Time, &mut |_| {}).unwrap();
        assert_eq!((a.chosen, a.schedule.steps.len(), a.gap), (Candidate::OneShot, 1, Some(0.0)));
    }

    #[test]
    fn a_deferred_answer_costs_what_its_verification_finds_and_a_broken_one_is_caught() {
        // Deferred from 0 piece-hops, every synthesized candidate is priced by one pass: the
        // answer says so, and verifying it later gives the same cost and validity.
        let inst = instance("[4, 4]", "{\"cables\": [[[0, 0], [1, 0]]]}", "");
        let opts = SynthOptions { time_limit: Duration::from_secs(10), defer_verification_from: Some(0), ..Default::default() };
        let mut a = synthesize(&inst, &opts, Objective::Time, &mut |_| {}).unwrap();
        assert!(a.deferred && a.chosen.is_synthesized(), "{}", a.chosen);
        assert_eq!(verify_deferred(a.chosen, &a.schedule).unwrap(), None);
        let r = verify_schedule(&a.schedule, &VerifyOptions::default()).unwrap();
        assert_eq!(r.cost.unwrap().time_ns(), a.cost.time_ns());
        // A transfer lost: the deferred verification fails, as an internal error.
        let last = a.schedule.steps.iter_mut().rev().find(|s| !s.transfers.is_empty()).unwrap();
        last.transfers.pop();
        let e = verify_deferred(a.chosen, &a.schedule).unwrap_err();
        assert!(matches!(e, Error::Internal(_)) && e.to_string().contains("fails verification"), "{e}");
        // Without deferral nothing is left to the caller.
        let b = synthesize(&inst, &SynthOptions { defer_verification_from: None, ..opts }, Objective::Time, &mut |_| {}).unwrap();
        assert!(!b.deferred);
    }

    #[test]
    fn the_steps_objective_keeps_the_fewest_steps() {
        let inst = instance("[5]", "{\"cables\": [[[0], [1]]]}", "");
        let a = synthesize(&inst, &opts(), Objective::Steps, &mut |_| {}).unwrap();
        assert_eq!(a.chosen, Candidate::FewestSteps);
        let report = a.steps_report.unwrap();
        assert_eq!(Some(a.schedule.steps.len() as u32), report.steps_found);
        assert_eq!(report.status, SynthStatus::Optimal { certified: true });
    }
}
