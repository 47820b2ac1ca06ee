//! Fewest steps for every collective kind (docs/design/MODEL.md section 3: transfers go from rank
//! to rank over single hops, one piece per link per step): the certified lower bound, incumbents,
//! then the time-expanded program solved exactly for every horizon from the bound upward.
//!
//! The search is a runner in egg's shape: limits in ([`SynthOptions`]), a report out
//! ([`SynthReport`]: the certified lower bound, the steps found, and why it stopped). The bound is
//! the largest of [`crate::bounds::steps`], re-derived by the independent checker.
//!
//! - `encoding`: the all_to_all program for T steps (commodities per destination), written once
//!   against [`Backend`], and its decomposition into a [`Schedule`];
//! - `gather`: the all_gather program (a held piece may go out on several links in one step),
//!   and the reduce_scatter as its time reversal over the transposed hops;
//! - `allreduce`: the all_reduce program with contributor sets (exact, for small instances);
//! - `heuristic`: balanced shortest-hop routes packed by list scheduling (all_to_all), for
//!   instances the exact program cannot take, and as the incumbent the exact search has to beat;
//! - `symmetric`: the translation-invariant all_to_all of a healthy torus, which meets the bound
//!   on even tori far beyond the exact program's reach.
//!
//! The incumbents of the other kinds are the spreading trees with one piece per transfer
//! ([`super::spreading`]) and, for all_reduce, the fewest-steps reduce_scatter followed by the
//! fewest-steps all_gather.
//!
//! ```
//! use collsched::{synthesize_steps, torus, Collective, CollectiveKind, SynthOptions, SynthStatus, TorusParams};
//!
//! let ring = torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap();
//! let a2a = Collective::new(CollectiveKind::AllToAll, ring.node_ids().collect(), 1 << 20, 1, None, &ring).unwrap();
//! let report = synthesize_steps(&ring, &a2a, &SynthOptions::default()).unwrap();
//! assert_eq!(report.steps_found, Some(2));
//! assert_eq!(report.status, SynthStatus::Optimal { certified: true });
//!
//! // An all-gather on the same ring: every rank needs 3 pieces over its 2 links.
//! let gather = Collective::new(CollectiveKind::AllGather, ring.node_ids().collect(), 1 << 20, 1, None, &ring).unwrap();
//! let report = synthesize_steps(&ring, &gather, &SynthOptions::default()).unwrap();
//! assert_eq!((report.steps_found, report.status), (Some(2), SynthStatus::Optimal { certified: true }));
//! ```

pub(crate) mod allreduce;
pub(crate) mod encoding;
pub(crate) mod gather;
pub(crate) mod heuristic;
pub(crate) mod symmetric;
#[cfg(test)]
pub(crate) mod tests;

use super::backends::{Backend, Model, Outcome, ProgramFamily, Solver};
use super::{spreading, Progress, SynthOptions};
use crate::bounds::certified::certified_steps_bounds;
use crate::bounds::steps::steps_bounds;
use crate::collective::{Collective, CollectiveKind};
use crate::error::{Error, Result};
use crate::schedule::{Schedule, ScheduleHeader, Step};
use crate::topology::hops::HopGraph;
use crate::topology::Topology;
use crate::verify::{verify_schedule, VerifyOptions};
use allreduce::AllReduce;
use encoding::{Demand, Reach, TimeExpanded};
use gather::Multicast;
use std::time::{Duration, Instant};

/// Why the search stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthStatus {
    /// The schedule has the fewest steps: `certified` when its steps equal the certified lower
    /// bound; otherwise the solver proved one step fewer infeasible (solver-attested, docs/design/MODEL.md
    /// section 6: "re-run; marked solver-attested, not independently certified"). The bound
    /// holds for every schedule of transfers from rank to rank; the solver's claim is over hops
    /// along shortest switch paths (the same thing on a torus, which has no switches).
    Optimal {
        /// Whether the optimality rests on the certified bound alone.
        certified: bool,
    },
    /// A schedule above the bound, not proven optimal: the exact program was too large for the
    /// backend ([`Solver::max_variables`]) or `max_steps` stopped the search.
    Gap,
    /// The time limit ended the search before a proof; the schedule, if any, is the best found.
    LimitReached,
    /// No schedule exists: a rank is cut off, or the lower bound exceeds `max_steps`.
    Infeasible(String),
}

/// What a synthesis found.
#[derive(Clone, Debug)]
pub struct SynthReport {
    /// The best schedule found (verified under rules 1-5).
    pub schedule: Option<Schedule>,
    /// The certified lower bound on the steps (distance, transmissions, cuts, flow:
    /// `crate::bounds::steps`, re-derived by the checker).
    pub steps_lower_bound: u32,
    /// Steps of `schedule`.
    pub steps_found: Option<u32>,
    /// Why the search stopped.
    pub status: SynthStatus,
}

impl SynthReport {
    /// `steps_found / steps_lower_bound - 1` (0 when optimal and certified).
    pub fn gap(&self) -> Option<f64> {
        let found = self.steps_found?;
        (self.steps_lower_bound > 0).then(|| found as f64 / self.steps_lower_bound as f64 - 1.0)
    }
}

/// How long the steps flow bound may search for lengths (all_to_all): only its ceiling counts,
/// and the cut and volume seeds usually decide it.
const FLOW_TIME: Duration = Duration::from_secs(2);

/// Finds a schedule with the fewest steps (see `synthesize_steps_with`).
pub fn synthesize_steps(topology: &Topology, collective: &Collective, opts: &SynthOptions) -> Result<SynthReport> {
    synthesize_steps_with(topology, collective, opts, &mut |_| {})
}

/// Finds a schedule of single-hop transfers between the collective's ranks, one piece per link
/// per step, with the fewest steps, for any collective kind, reporting progress.
///
/// The incumbents come first (the list heuristic and, on a healthy torus, the
/// translation-invariant schedule for all_to_all; the spreading trees for the other kinds, and
/// for all_reduce also the fewest-steps reduce_scatter followed by the fewest-steps all_gather);
/// then the exact program runs for every horizon from the certified lower bound up to one below
/// the best schedule so far, stopping at the first feasible one, at the time limit, or when the
/// program grows past the backend's cap ([`Solver::max_variables`]). Npus outside the ranks route like switches (only
/// ranks store, docs/design/MODEL.md section 1). Every returned schedule has passed
/// [`verify_schedule`].
///
/// Errors: [`Error::Internal`] when the checker rejects the steps bounds, and [`Error::bad`] for
/// a schedule that fails verification (both bugs). A rank cut off by the faults is a report
/// with [`SynthStatus::Infeasible`], not an error.
pub fn synthesize_steps_with(topology: &Topology, collective: &Collective, opts: &SynthOptions, progress: &mut dyn FnMut(&Progress)) -> Result<SynthReport> {
    synthesize_steps_above(topology, collective, opts, None, progress)
}

/// [`synthesize_steps_with`], given the certified steps lower bound when the caller has it
/// already (`None`: derived and certified here).
pub(crate) fn synthesize_steps_above(
    topology: &Topology,
    collective: &Collective,
    opts: &SynthOptions,
    certified_lower: Option<u32>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<SynthReport> {
    let started = Instant::now();
    if let Err(e) = topology.check_connected(&collective.ranks) {
        return Ok(SynthReport { schedule: None, steps_lower_bound: 0, steps_found: None, status: SynthStatus::Infeasible(e.message().to_string()) });
    }
    let lower = match certified_lower {
        Some(lower) => lower,
        None => certified_steps_bounds(topology, collective, FLOW_TIME.min(opts.time_limit / 10))?.1,
    };
    progress(&Progress::LowerBound(lower));
    let cap = opts.max_steps.unwrap_or(u32::MAX);
    let report = |schedule: Option<Schedule>, status| {
        let steps_found = schedule.as_ref().map(|s: &Schedule| s.steps.len() as u32);
        SynthReport { schedule, steps_lower_bound: lower, steps_found, status }
    };
    if lower > cap {
        return Ok(report(None, SynthStatus::Infeasible(format!("every schedule needs at least {lower} steps, more than max_steps = {cap}"))));
    }
    let hops = HopGraph::with_endpoints(topology, &collective.rank_mask(topology));
    let best = incumbent(topology, collective, &hops, opts, started, lower, progress)?.filter(|s| s.steps.len() as u32 <= cap);
    if let Some(b) = &best {
        progress(&Progress::Heuristic(b.steps.len() as u32));
    }
    let best_steps = |b: &Option<Schedule>| b.as_ref().map_or(cap.saturating_add(1), |s| s.steps.len() as u32);
    if best_steps(&best) == lower {
        return Ok(report(best, SynthStatus::Optimal { certified: true }));
    }

    let exact = ExactProgram { topology, collective, program: Program::new(collective, &hops), lower };
    let mut horizon = lower;
    while horizon < best_steps(&best) {
        let variables = exact.program.variables(horizon);
        let solver = opts.solver.resolve_for(exact.program.family(), variables);
        if variables > solver.max_variables(exact.program.family()) {
            return Ok(report(best, SynthStatus::Gap));
        }
        let Some(left) = opts.time_limit.checked_sub(started.elapsed()).filter(|d| !d.is_zero()) else {
            return Ok(report(best, SynthStatus::LimitReached));
        };
        match exact.solve(horizon, variables, solver, left, progress)? {
            // Every horizon below was proven infeasible (or is below the certified bound).
            Some(Some(found)) => return Ok(report(Some(found), SynthStatus::Optimal { certified: horizon == lower })),
            Some(None) => horizon += 1,
            None => return Ok(report(best, SynthStatus::LimitReached)),
        }
    }
    // Every horizon from the bound to one below the incumbent is infeasible.
    let status =
        if best.is_some() { SynthStatus::Optimal { certified: false } } else { SynthStatus::Infeasible(format!("no schedule within max_steps = {cap}")) };
    Ok(report(best, status))
}

/// A way to a schedule other than the exact program, for the search to beat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Incumbent {
    /// The translation-invariant schedule of a healthy torus (`symmetric`).
    TranslationInvariant,
    /// Balanced shortest-hop routes packed by list scheduling (`heuristic`, all_to_all).
    ListHeuristic,
    /// The spreading trees with one piece per transfer (a link then carries one piece per
    /// step); the reducing kinds need the reverse of every hop.
    Spreading,
    /// all_reduce: the fewest-steps reduce_scatter, then the fewest-steps all_gather.
    ReduceScatterThenAllGather,
}

impl Incumbent {
    /// The incumbents of a kind, cheapest first.
    fn of(kind: CollectiveKind) -> &'static [Incumbent] {
        use Incumbent::*;
        match kind {
            CollectiveKind::AllToAll => &[TranslationInvariant, ListHeuristic],
            CollectiveKind::AllGather | CollectiveKind::ReduceScatter => &[Spreading, TranslationInvariant],
            CollectiveKind::AllReduce => &[Spreading, ReduceScatterThenAllGather, TranslationInvariant],
        }
    }

    /// The name a schedule's `method` records.
    fn name(self) -> &'static str {
        match self {
            Incumbent::TranslationInvariant => "translation-invariant",
            Incumbent::ListHeuristic => "heuristic",
            Incumbent::Spreading => "spreading",
            Incumbent::ReduceScatterThenAllGather => "fewest-steps reduce_scatter + all_gather",
        }
    }
}

/// The best verified schedule of the incumbents of `c`'s kind ([`Incumbent::of`]), tried in
/// order until one meets the bound `lower`; `None` when none applies. The heuristics stop at a
/// quarter of the time limit, each half of an all_reduce gets a quarter too.
fn incumbent(
    t: &Topology,
    c: &Collective,
    hops: &HopGraph,
    opts: &SynthOptions,
    started: Instant,
    lower: u32,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Option<Schedule>> {
    let deadline = started + opts.time_limit / 4;
    let mut best: Option<Schedule> = None;
    for &method in Incumbent::of(c.kind) {
        let below = best.as_ref().map_or(u32::MAX, |b| b.steps.len() as u32);
        if below <= lower {
            break;
        }
        let steps = match method {
            Incumbent::TranslationInvariant if c.kind == CollectiveKind::AllToAll => symmetric::translation_invariant(t, c, deadline),
            Incumbent::TranslationInvariant => symmetric::translation_invariant_blocks(t, c, hops, opts.solver, (lower, below), deadline)?,
            Incumbent::ListHeuristic => {
                let demand = Demand::all_to_all(c, t.num_npus());
                Some(heuristic::route_and_pack_until(hops, &demand, t.num_links(), Some(deadline)))
            }
            Incumbent::Spreading => spreading::spread_steps(t, c, 1, deadline).ok().flatten(),
            Incumbent::ReduceScatterThenAllGather => {
                let half_opts = SynthOptions { time_limit: opts.time_limit / 4, ..opts.clone() };
                let mut half = |kind: CollectiveKind| -> Result<Option<Schedule>> {
                    let mut half = c.clone();
                    half.kind = kind;
                    Ok(synthesize_steps_with(t, &half, &half_opts, progress)?.schedule)
                };
                match (half(CollectiveKind::ReduceScatter)?, half(CollectiveKind::AllGather)?) {
                    (Some(rs), Some(ag)) => Some(rs.steps.into_iter().chain(ag.steps).collect()),
                    _ => None,
                }
            }
        };
        if let Some(steps) = steps.filter(|s| (s.len() as u32) < below) {
            best = Some(checked(t, c, steps, method.name(), lower)?);
        }
    }
    Ok(best)
}

/// The exact search alone (see [`fewest_steps_exact_with`]), for the tests.
#[cfg(test)]
pub fn fewest_steps_exact(topology: &Topology, collective: &Collective, solver: Solver, time_limit: Duration) -> Result<Option<(u32, Schedule)>> {
    fewest_steps_exact_with(topology, collective, solver, time_limit, &mut |_| {})
}

/// The exact search alone, reporting progress: the time-expanded program for every horizon from
/// the steps lower bound upward, with no incumbent, stopping at the first feasible horizon. For
/// comparing backends (`examples/synth_bench.rs`); `synthesize_steps_with` is the search to
/// use otherwise.
///
/// Returns the steps and the schedule of that horizon (verified under rules 1-5, like every
/// synthesized schedule), or `None` when `time_limit` (for the whole search) ran out or the
/// solver gave up first. The steps are the fewest of any schedule of single-hop transfers along
/// shortest switch paths, one piece per link per step: certified when they equal the bound,
/// solver-attested otherwise (every horizon below was proven infeasible). Unlike
/// `synthesize_steps_with`, programs above the backend's cap are attempted too, so cap
/// `time_limit` (and expect memory to grow with the program). The limit is checked before every
/// horizon and handed to the solver; writing a program is not interrupted, so large ones overrun
/// it (a 16-npu fat tree, 170k variables: about 75-100 s under a 60 s limit, measured).
///
/// Errors: the error of [`Topology::check_connected`] when a rank is cut off by the faults;
/// [`Error::bad`] for bugs: a schedule that fails verification, or a solver refuting a horizon
/// long enough to send the pieces one at a time.
pub fn fewest_steps_exact_with(
    topology: &Topology,
    collective: &Collective,
    solver: Solver,
    time_limit: Duration,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Option<(u32, Schedule)>> {
    let lower = steps_lower_bound(topology, collective);
    progress(&Progress::LowerBound(lower));
    exact_from(topology, collective, (solver, time_limit), lower, lower, progress)
}

/// The exact search from `horizon` steps upward, with no incumbent: a test confirms that no
/// horizon below the certified bound is feasible by starting below it.
#[cfg(test)]
pub(crate) fn fewest_steps_exact_from(
    topology: &Topology,
    collective: &Collective,
    solver: Solver,
    time_limit: Duration,
    from: u32,
) -> Result<Option<(u32, Schedule)>> {
    exact_from(topology, collective, (solver, time_limit), steps_lower_bound(topology, collective), from, &mut |_| {})
}

/// [`fewest_steps_exact_with`] from horizon `from` (the certified bound `lower`).
fn exact_from(
    topology: &Topology,
    collective: &Collective,
    (solver, time_limit): (Solver, Duration),
    lower: u32,
    from: u32,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Option<(u32, Schedule)>> {
    let started = Instant::now();
    topology.check_connected(&collective.ranks)?;
    let hops = HopGraph::with_endpoints(topology, &collective.rank_mask(topology));
    let exact = ExactProgram { topology, collective, program: Program::new(collective, &hops), lower };
    // Moving the pieces one hop at a time, one after another, is always feasible (the ranks are
    // connected): a solver that refutes this many steps is wrong.
    let sequential = exact.program.sequential_steps();
    if sequential == 0 {
        return Ok(Some((0, checked(topology, collective, Vec::new(), "exact", lower)?)));
    }
    let mut horizon = from.max(1);
    loop {
        if u64::from(horizon) > sequential {
            return Err(Error::bad(format!("exact synthesis ({solver:?}): every horizon up to {sequential} steps reported infeasible (a solver bug)")));
        }
        let Some(left) = time_limit.checked_sub(started.elapsed()).filter(|d| !d.is_zero()) else { return Ok(None) };
        let variables = exact.program.variables(horizon);
        match exact.solve(horizon, variables, solver.resolve_for(exact.program.family(), variables), left, progress)? {
            Some(Some(found)) => return Ok(Some((found.steps.len() as u32, found))),
            Some(None) => horizon += 1,
            None => return Ok(None),
        }
    }
}

/// The time-expanded program of a collective kind, for any horizon.
enum Program<'a> {
    /// Commodities per destination ([`encoding`]).
    AllToAll { hops: &'a HopGraph, demand: Demand, reach: Reach },
    /// all_gather, and reduce_scatter over the transposed hops ([`gather`]).
    Multicast(Multicast),
    /// Contributor sets ([`allreduce`]).
    AllReduce(AllReduce),
}

impl<'a> Program<'a> {
    fn new(c: &Collective, hops: &'a HopGraph) -> Self {
        match c.kind {
            CollectiveKind::AllToAll => {
                let demand = Demand::all_to_all(c, hops.out.len());
                let reach = Reach::new(hops, &demand);
                Program::AllToAll { hops, demand, reach }
            }
            CollectiveKind::AllGather => Program::Multicast(Multicast::all_gather(c, hops)),
            CollectiveKind::ReduceScatter => Program::Multicast(Multicast::reduce_scatter(c, hops)),
            CollectiveKind::AllReduce => Program::AllReduce(AllReduce::new(c, hops)),
        }
    }

    /// Flows (all_to_all) or sets (the other kinds), for choosing a backend.
    fn family(&self) -> ProgramFamily {
        match self {
            Program::AllToAll { .. } => ProgramFamily::Flows,
            Program::Multicast(_) | Program::AllReduce(_) => ProgramFamily::Sets,
        }
    }

    /// The 0-1 variables of the program with `horizon` steps.
    fn variables(&self, horizon: u32) -> usize {
        match self {
            Program::AllToAll { hops, demand, reach } => reach.variables(hops, demand, horizon),
            Program::Multicast(m) => m.variables(horizon),
            Program::AllReduce(a) => a.variables(horizon),
        }
    }

    /// Steps that always suffice (pieces moved one hop at a time, one after another).
    fn sequential_steps(&self) -> u64 {
        match self {
            Program::AllToAll { demand, reach, .. } => demand
                .pieces
                .iter()
                .map(|&(_, s, d)| {
                    let di = demand.dests.iter().position(|&x| x == d).unwrap_or(0);
                    u64::from(reach.to_dest[di][s.index()])
                })
                .sum(),
            Program::Multicast(m) => m.sequential_steps(),
            Program::AllReduce(a) => a.sequential_steps(),
        }
    }

    /// Writes the program for `horizon` steps into `backend` and solves it within `left`: the
    /// steps of a solution, `Some(None)` when infeasible, `None` without an answer.
    fn solve(&self, backend: &mut dyn Backend, horizon: u32, left: Duration) -> Option<Option<Vec<Step>>> {
        fn answer(outcome: Outcome, decode: impl FnOnce(&Model) -> Vec<Step>) -> Option<Option<Vec<Step>>> {
            match outcome {
                Outcome::Sat(model) => Some(Some(decode(&model))),
                Outcome::Unsat => Some(None),
                Outcome::Unknown(_) => None,
            }
        }
        match self {
            Program::AllToAll { hops, demand, reach } => {
                let p = TimeExpanded::encode(backend, hops, demand, reach, horizon);
                answer(backend.solve(left), |m| p.decode(m))
            }
            Program::Multicast(m) => {
                let p = m.encode(backend, horizon);
                answer(backend.solve(left), |model| p.decode(model))
            }
            Program::AllReduce(a) => {
                let p = a.encode(backend, horizon);
                answer(backend.solve(left), |model| p.decode(model))
            }
        }
    }
}

/// One instance's time-expanded program, for solving one horizon at a time.
struct ExactProgram<'a> {
    topology: &'a Topology,
    collective: &'a Collective,
    program: Program<'a>,
    /// The steps bound (for the verified schedule's report).
    lower: u32,
}

impl ExactProgram<'_> {
    /// Encodes the program of `horizon` steps (`variables` 0-1 variables) for `solver` and solves
    /// it within `left`, reporting progress: `Some(Some(schedule))` when feasible (the schedule
    /// decoded and verified), `Some(None)` when proven infeasible, `None` when the solver gave no
    /// answer. Errors only for a schedule that fails verification (a bug).
    fn solve(&self, horizon: u32, variables: usize, solver: Solver, left: Duration, progress: &mut dyn FnMut(&Progress)) -> Result<Option<Option<Schedule>>> {
        progress(&Progress::Solving { steps: horizon, variables });
        let mut backend = solver.backend(variables)?;
        let answer = match self.program.solve(backend.as_mut(), horizon, left) {
            Some(Some(steps)) => {
                let method = format!("exact-{}", backend.name());
                Some(Some(checked(self.topology, self.collective, steps, &method, self.lower)?))
            }
            Some(None) => Some(None),
            None => None,
        };
        progress(&Progress::Answered { steps: horizon, feasible: answer.as_ref().map(Option::is_some) });
        Ok(answer)
    }
}

/// The largest steps bound of `crate::bounds::steps` (distance, transmissions, cuts and, for
/// all_to_all, flow), computed here without the checker: `synthesize_steps_with` reports the
/// one the checker re-derives ([`certified_steps_bounds`]), which is the same number.
pub fn steps_lower_bound(topology: &Topology, collective: &Collective) -> u32 {
    steps_bounds(topology, collective, FLOW_TIME).best()
}

/// Wraps steps into a schedule and verifies it; a failure is a bug of the synthesizer.
fn checked(topology: &Topology, collective: &Collective, steps: Vec<Step>, method: &str, lower: u32) -> Result<Schedule> {
    let meta = serde_json::json!({"algorithm": "synth", "method": method, "steps_lower_bound": lower});
    let schedule = Schedule { header: ScheduleHeader { topology: topology.clone(), collective: collective.clone(), meta: Some(meta) }, steps };
    let verdict = verify_schedule(&schedule, &VerifyOptions::default())?;
    if !verdict.is_valid() {
        return Err(Error::bad(format!(
            "synthesis ({method}): the schedule fails verification (a bug): {:?}",
            verdict.findings.failures().iter().take(3).collect::<Vec<_>>()
        )));
    }
    Ok(schedule)
}
