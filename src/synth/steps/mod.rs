//! Fewest steps (docs/design/MODEL.md section 3: one piece per link per step): the certified
//! lower bound, a list-scheduled incumbent, then the time-expanded program solved exactly for
//! every horizon from the bound upward.
//!
//! The search is a runner in egg's shape: limits in ([`SynthOptions`]), a report out
//! ([`SynthReport`]: the certified lower bound, the steps found, and why it stopped).
//!
//! - `encoding`: the time-expanded program for T steps, written once against [`Backend`](super::Backend), and
//!   its decomposition into a [`Schedule`];
//! - `heuristic`: balanced shortest-hop routes packed by list scheduling, for instances the exact
//!   program cannot take, and as the incumbent the exact search has to beat.
//!
//! ```
//! use collsched::collective::{Collective, CollectiveKind};
//! use collsched::synth::{synthesize_steps, SynthOptions, SynthStatus};
//! use collsched::topology::{torus, TorusParams};
//!
//! let ring = torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap();
//! let a2a = Collective::new(CollectiveKind::AllToAll, ring.node_ids().collect(), 1 << 20, 1, None, &ring).unwrap();
//! let report = synthesize_steps(&ring, &a2a, &SynthOptions::default()).unwrap();
//! assert_eq!(report.steps_found, Some(2));
//! assert_eq!(report.status, SynthStatus::Optimal { certified: true });
//! ```

pub(crate) mod encoding;
pub(crate) mod heuristic;
#[cfg(test)]
pub(crate) mod tests;

use super::backends::{Outcome, Solver};
use super::hops::HopGraph;
use super::{Progress, SynthOptions};
use crate::bounds::bounds;
use crate::collective::{Collective, CollectiveKind};
use crate::error::{Error, Result};
use crate::schedule::{Schedule, ScheduleHeader, Step};
use crate::topology::Topology;
use crate::verify::{verify_schedule, VerifyOptions};
use encoding::{Demand, Reach, TimeExpanded};
use std::time::{Duration, Instant};

/// Above this many 0-1 variables for one horizon the exact program is not attempted: microlp
/// stalls on MILPs past about 3k variables and z3 past a 4x4 torus (docs/design/DEPENDENCIES.md).
pub const MAX_EXACT_VARIABLES: usize = 2000;

/// Why the search stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthStatus {
    /// The schedule has the fewest steps: `certified` when its steps equal the certified lower
    /// bound; otherwise the solver proved one step fewer infeasible (solver-attested, docs/design/MODEL.md
    /// section 6: "re-run; marked solver-attested, not independently certified"). The bound
    /// holds for every single-hop schedule; the solver's claim is over hops along shortest switch
    /// paths (the same thing on a torus, which has no switches).
    Optimal {
        /// Whether the optimality rests on the certified bound alone.
        certified: bool,
    },
    /// A schedule above the bound, not proven optimal: the exact program was too large (more than
    /// [`MAX_EXACT_VARIABLES`]) or `max_steps` stopped the search.
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
    /// The certified lower bound on the steps (diameter, volume, cuts: [`steps_lower_bound`]).
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

/// Finds an all-to-all schedule with the fewest steps (see [`synthesize_steps_with`]).
pub fn synthesize_steps(topology: &Topology, collective: &Collective, opts: &SynthOptions) -> Result<SynthReport> {
    synthesize_steps_with(topology, collective, opts, &mut |_| {})
}

/// Finds an all-to-all schedule of single-hop transfers, one piece per link per step, with the
/// fewest steps, reporting progress.
///
/// The heuristic's schedule comes first; then the exact program runs for every horizon from the
/// certified lower bound up to one below the best schedule so far, stopping at the first
/// feasible one, at the time limit, or when the program grows past [`MAX_EXACT_VARIABLES`].
/// Every returned schedule has passed [`verify_schedule`].
///
/// Errors: [`Error::bad`] for a collective other than all_to_all, or a schedule that fails
/// verification (a bug). A rank cut off by the faults is a report with
/// [`SynthStatus::Infeasible`], not an error.
pub fn synthesize_steps_with(topology: &Topology, collective: &Collective, opts: &SynthOptions, progress: &mut dyn FnMut(&Progress)) -> Result<SynthReport> {
    let started = Instant::now();
    if collective.kind != CollectiveKind::AllToAll {
        return Err(Error::bad(format!("synthesis: the collective is {}; only all_to_all is synthesized so far", collective.kind)));
    }
    if let Err(e) = topology.check_connected(&collective.ranks) {
        return Ok(SynthReport { schedule: None, steps_lower_bound: 0, steps_found: None, status: SynthStatus::Infeasible(e.message().to_string()) });
    }
    let hops = HopGraph::new(topology);
    let demand = Demand::all_to_all(collective, topology.num_npus());
    let lower = steps_lower_bound(topology, collective);
    progress(&Progress::LowerBound(lower));
    let cap = opts.max_steps.unwrap_or(u32::MAX);
    let report = |schedule: Option<Schedule>, status| {
        let steps_found = schedule.as_ref().map(|s: &Schedule| s.steps.len() as u32);
        SynthReport { schedule, steps_lower_bound: lower, steps_found, status }
    };
    if lower > cap {
        return Ok(report(None, SynthStatus::Infeasible(format!("every schedule needs at least {lower} steps, more than max_steps = {cap}"))));
    }

    let steps = heuristic::route_and_pack_until(&hops, &demand, topology.num_links(), Some(started + opts.time_limit / 4));
    let incumbent = checked(topology, collective, steps, "heuristic", lower)?;
    progress(&Progress::Heuristic(incumbent.steps.len() as u32));
    let best = (incumbent.steps.len() as u32 <= cap).then_some(incumbent);
    let best_steps = |b: &Option<Schedule>| b.as_ref().map_or(cap.saturating_add(1), |s| s.steps.len() as u32);
    if best_steps(&best) == lower {
        return Ok(report(best, SynthStatus::Optimal { certified: true }));
    }

    let reach = Reach::new(&hops, &demand);
    let exact = ExactProgram { topology, collective, hops: &hops, demand: &demand, reach: &reach, lower };
    let mut horizon = lower;
    while horizon < best_steps(&best) {
        let variables = reach.variables(&hops, &demand, horizon);
        if variables > MAX_EXACT_VARIABLES {
            return Ok(report(best, SynthStatus::Gap));
        }
        let Some(left) = opts.time_limit.checked_sub(started.elapsed()).filter(|d| !d.is_zero()) else {
            return Ok(report(best, SynthStatus::LimitReached));
        };
        match exact.solve(horizon, variables, opts.solver, left, progress)? {
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

/// The exact search alone (see [`fewest_steps_exact_with`]).
pub fn fewest_steps_exact(topology: &Topology, collective: &Collective, solver: Solver, time_limit: Duration) -> Result<Option<(u32, Schedule)>> {
    fewest_steps_exact_with(topology, collective, solver, time_limit, &mut |_| {})
}

/// The exact search alone, reporting progress: the time-expanded program for every horizon from
/// [`steps_lower_bound`] upward, with no heuristic incumbent, stopping at the first feasible
/// horizon. For comparing backends (`examples/synth_bench.rs`); [`synthesize_steps_with`] is the
/// search to use otherwise.
///
/// Returns the steps and the schedule of that horizon (verified under rules 1-5, like every
/// synthesized schedule), or `None` when `time_limit` (for the whole search) ran out or the
/// solver gave up first. The steps are the fewest of any schedule of single-hop transfers along
/// shortest switch paths, one piece per link per step: certified when they equal the bound,
/// solver-attested otherwise (every horizon below was proven infeasible). Unlike
/// [`synthesize_steps_with`], programs above [`MAX_EXACT_VARIABLES`] are attempted too, so cap
/// `time_limit` (and expect memory to grow with the program). The limit is checked before every
/// horizon and handed to the solver; writing a program is not interrupted, so large ones overrun
/// it (a 16-npu fat tree, 170k variables: about 75-100 s under a 60 s limit, measured).
///
/// Errors: the error of [`Topology::check_connected`] when a rank is cut off by the faults;
/// [`Error::bad`] for a collective other than all_to_all, and for bugs: a schedule that fails
/// verification, or a solver refuting a horizon long enough to send the pieces one at a time.
pub fn fewest_steps_exact_with(
    topology: &Topology,
    collective: &Collective,
    solver: Solver,
    time_limit: Duration,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Option<(u32, Schedule)>> {
    let started = Instant::now();
    if collective.kind != CollectiveKind::AllToAll {
        return Err(Error::bad(format!("exact synthesis: the collective is {}; only all_to_all is synthesized so far", collective.kind)));
    }
    topology.check_connected(&collective.ranks)?;
    let hops = HopGraph::new(topology);
    let demand = Demand::all_to_all(collective, topology.num_npus());
    let reach = Reach::new(&hops, &demand);
    let lower = steps_lower_bound(topology, collective);
    progress(&Progress::LowerBound(lower));
    if demand.pieces.is_empty() {
        return Ok(Some((0, checked(topology, collective, Vec::new(), "exact", lower)?)));
    }
    // Moving the pieces one hop at a time, one after another, is always feasible (the ranks are
    // connected): a solver that refutes this many steps is wrong.
    let sequential: u64 = demand
        .pieces
        .iter()
        .map(|&(_, s, d)| {
            let di = demand.dests.iter().position(|&x| x == d).unwrap_or(0);
            u64::from(reach.to_dest[di][s.index()])
        })
        .sum();
    let exact = ExactProgram { topology, collective, hops: &hops, demand: &demand, reach: &reach, lower };
    let mut horizon = lower.max(1);
    loop {
        if u64::from(horizon) > sequential {
            return Err(Error::bad(format!("exact synthesis ({solver:?}): every horizon up to {sequential} steps reported infeasible (a solver bug)")));
        }
        let Some(left) = time_limit.checked_sub(started.elapsed()).filter(|d| !d.is_zero()) else { return Ok(None) };
        let variables = reach.variables(&hops, &demand, horizon);
        match exact.solve(horizon, variables, solver, left, progress)? {
            Some(Some(found)) => return Ok(Some((found.steps.len() as u32, found))),
            Some(None) => horizon += 1,
            None => return Ok(None),
        }
    }
}

/// One instance's time-expanded program, for solving one horizon at a time.
struct ExactProgram<'a> {
    topology: &'a Topology,
    collective: &'a Collective,
    hops: &'a HopGraph,
    demand: &'a Demand,
    reach: &'a Reach,
    /// The certified steps bound (for the verified schedule's report).
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
        let program = TimeExpanded::encode(backend.as_mut(), self.hops, self.demand, self.reach, horizon);
        let answer = match backend.solve(left) {
            Outcome::Sat(model) => {
                let method = format!("exact-{}", backend.name());
                Some(Some(checked(self.topology, self.collective, program.decode(&model), &method, self.lower)?))
            }
            Outcome::Unsat => Some(None),
            Outcome::Unknown(_) => None,
        };
        progress(&Progress::Answered { steps: horizon, feasible: answer.as_ref().map(Option::is_some) });
        Ok(answer)
    }
}

/// The certified lower bound on the steps of a single-hop schedule, one piece per link per step:
/// the largest of
/// - `bounds().steps`: the farthest (source, destination) in hops;
/// - the volume bound in steps: every piece crosses at least its shortest distance in links and a
///   link moves one piece per step, so steps >= ceil(piece-links / links that are up);
/// - cuts, for the node sets of `bounds::cut::candidate_cuts` (single npus, bisections, the ends
///   of failed cables, fat-tree subtrees): the pieces from ranks inside to ranks outside each
///   cross a link leaving the set, one per link per step; and the reverse.
pub fn steps_lower_bound(topology: &Topology, collective: &Collective) -> u32 {
    let demand = Demand::all_to_all(collective, topology.num_npus());
    let mut lower = bounds(topology, collective).steps as u64;
    let up_links = topology.links().filter(|(_, l)| l.up).count() as u64;
    let mut piece_links = 0u64;
    let n = topology.num_nodes();
    let mut distances = vec![None; n];
    for &(_, s, d) in &demand.pieces {
        if distances[s.index()].is_none() {
            distances[s.index()] = Some(topology.hop_distances(s));
        }
        piece_links += distances[s.index()].as_ref().and_then(|v: &Vec<Option<u32>>| v[d.index()]).unwrap_or(0) as u64;
    }
    if up_links > 0 {
        lower = lower.max(piece_links.div_ceil(up_links));
    }
    for (_, nodes) in crate::bounds::cut::candidate_cuts(topology) {
        let mut inside = vec![false; n];
        for v in nodes {
            inside[v.index()] = true;
        }
        let leaving = demand.pieces.iter().filter(|(_, s, d)| inside[s.index()] && !inside[d.index()]).count() as u64;
        let entering = demand.pieces.iter().filter(|(_, s, d)| !inside[s.index()] && inside[d.index()]).count() as u64;
        let links_out = topology.links().filter(|(_, l)| l.up && inside[l.src.index()] && !inside[l.dst.index()]).count() as u64;
        let links_in = topology.links().filter(|(_, l)| l.up && !inside[l.src.index()] && inside[l.dst.index()]).count() as u64;
        if links_out > 0 {
            lower = lower.max(leaving.div_ceil(links_out));
        }
        if links_in > 0 {
            lower = lower.max(entering.div_ceil(links_in));
        }
    }
    u32::try_from(lower).unwrap_or(u32::MAX)
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
