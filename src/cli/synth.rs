//! `collsched synthesize`: a contention-free schedule for the spec's topology, faults and
//! collective, how far it is from the best possible, and whether that is proven.
//!
//! `--objective steps` runs the solver search for the fewest steps of any collective kind (one
//! piece per link per step, transfers from rank to rank, docs/design/MODEL.md section 3), and
//! weighs its schedule against every other verified candidate of that model. The default
//! objective, the schedule's step-synchronous time at the spec's message size, takes the fastest
//! verified candidate of [`portfolio::synthesize`]: the fewest-steps schedule, time-expanded
//! routing over pieces per block and horizons (`synth::routing`), on tori the hand-written
//! schedules that fit the faults (HalfRing+DimRotation, MATE, MATEe), for the gathering and
//! reducing kinds the spreading trees of `synth::spreading`, and on switched networks the
//! route-and-step candidates of `synth::switched` and the switched algorithms under balanced
//! routing; `--objective event` takes the fastest of the same candidates event-driven. Its gap is
//! measured against the certified bandwidth bound plus the latency bound, or the crossing bound
//! where that is larger (docs/design/MODEL.md section 6); `--pareto` lists the candidates'
//! steps/time trade-off.

use crate::collective::CollectiveKind;
use crate::error::{Error, ExitCode, Result};
use crate::spec::{MethodSpec, Spec};
use crate::synth::portfolio::{self, Objective};
use crate::synth::{Progress, Solver, SynthOptions, SynthStatus};
use crate::topology::hops::HopGraph;
use crate::units::{format_ns, to_f64};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// The synthesis options: the spec's `method.synthesize`, overridden by flags.
pub(super) fn options(spec: &Spec, solver: Option<Solver>, time_limit: Option<f64>) -> Result<SynthOptions> {
    let from_spec = match &spec.method {
        Some(MethodSpec::Synthesize(s)) => Some(s),
        _ => None,
    };
    let field = if solver.is_some() { "--solver".to_string() } else { format!("{}: method.synthesize.solver", spec.source()) };
    let solver = solver.or_else(|| from_spec.map(|s| s.solver)).unwrap_or(Solver::Auto);
    solver.check_built(&field)?;
    let field = if time_limit.is_some() { "--time-limit".to_string() } else { format!("{}: method.synthesize.time_limit_s", spec.source()) };
    let secs = time_limit.or_else(|| from_spec.and_then(|s| s.time_limit_s)).unwrap_or(60.0);
    crate::spec::check_time_limit(&field, secs)?;
    Ok(SynthOptions {
        solver,
        time_limit: Duration::from_secs_f64(secs),
        max_steps: None,
        verify_every_candidate: false,
        defer_verification_from: Some(portfolio::DEFERRED_PIECE_HOPS),
    })
}

/// Runs the synthesis.
pub fn synthesize(
    spec: &Spec,
    output: &Path,
    objective: Objective,
    solver: Option<Solver>,
    time_limit: Option<f64>,
    pareto: bool,
    json_out: bool,
) -> Result<ExitCode> {
    let opts = SynthOptions { verify_every_candidate: pareto, ..options(spec, solver, time_limit)? };
    let inst = spec.instance()?;
    let bar = super::progress::Bar::spinner("synthesize");
    let mut progress = |p: &Progress| {
        bar.set_message(match p {
            Progress::Trying(what) => what.clone(),
            other => format!("{other:?}"),
        })
    };
    let answer = portfolio::synthesize(&inst, &opts, objective, &mut progress);
    let mut answer = match answer {
        Ok(a) => a,
        Err(e) => {
            bar.finish();
            return Err(e);
        }
    };
    let steps_status = steps_status(&answer, &answer.schedule);
    // The schedule moves out of the answer: at pod scale a copy would take gigabytes.
    let steps = std::mem::take(&mut answer.schedule.steps);
    let mut schedule = crate::schedule::Schedule { header: answer.schedule.header.clone(), steps };
    let note = json!({"objective": objective.name(), "chosen": answer.chosen, "steps_status": steps_status, "gap_to_certified_bound": answer.gap});
    match schedule.header.meta.as_mut().and_then(|m| m.as_object_mut()) {
        Some(meta) => {
            meta.insert("synthesis".into(), note);
        }
        None => schedule.header.meta = Some(json!({ "synthesis": note })),
    }
    let written = if answer.deferred {
        // A large schedule is verified on one core while the other writes it; the file is kept
        // only if it verifies.
        bar.set_message(format!("verifying {} while writing {}", answer.chosen, output.display()));
        let chosen = answer.chosen;
        std::thread::scope(|scope| {
            let check = scope.spawn(|| portfolio::verify_deferred(chosen, &schedule));
            crate::schedule::write_schedule_file_then(output, &schedule, || check.join().unwrap_or_else(|_| Err(Error::internal("the verification stopped"))))
        })
        .map(|unverified| answer.unverified = unverified)
    } else {
        bar.set_message(format!("writing {}", output.display()));
        crate::schedule::write_schedule_file(output, &schedule)
    };
    bar.finish();
    written?;
    if json_out {
        print_json(output, &schedule, &answer, steps_status.as_deref(), pareto);
    } else {
        print_text(output, &schedule, &answer, steps_status.as_deref(), pareto);
    }
    Ok(if answer.limit_reached { ExitCode::LimitReached } else { ExitCode::Ok })
}

/// The fewest-steps search's answer in words. The solver's optimality is over hops along
/// shortest paths; where paths can pass through switches or npus outside the ranks, longer ones
/// exist that it did not consider, and the claim says so.
fn steps_status(answer: &portfolio::Answer, schedule: &crate::schedule::Schedule) -> Option<String> {
    let (t, c) = (&schedule.header.topology, &schedule.header.collective);
    answer.steps_report.as_ref().map(|report| match (&report.status, report.gap()) {
        (SynthStatus::Optimal { certified: true }, _) => "optimal (certified)".to_string(),
        (SynthStatus::Optimal { certified: false }, _) if HopGraph::only_direct(t, &c.rank_mask(t)) => "optimal (solver-attested)".to_string(),
        (SynthStatus::Optimal { certified: false }, _) => {
            "optimal among schedules over shortest paths (solver-attested; longer single hops were not searched)".to_string()
        }
        // The search gets a share of the time limit (the rest is the other candidates').
        (SynthStatus::LimitReached, g) => format!("its share of the time limit ran out, gap {:.1}%", 100.0 * g.unwrap_or(f64::NAN)),
        (_, g) => format!("gap {:.1}% to the certified steps bound", 100.0 * g.unwrap_or(f64::NAN)),
    })
}

/// The answer as one JSON object (with `--pareto`, the trade-off and every verified candidate).
fn print_json(output: &Path, schedule: &crate::schedule::Schedule, answer: &portfolio::Answer, steps_status: Option<&str>, pareto: bool) {
    let entry = |e: &portfolio::Entry| {
        let sccl = e.sccl.as_ref().map(|c| json!({"steps": c.steps, "rounds": c.rounds, "chunks": c.chunks}));
        json!({"name": e.candidate, "method": e.candidate.method(), "pieces": e.pieces, "steps": e.steps, "time_ns": e.time_ns, "event_driven_ns": e.event_ns, "sccl": sccl})
    };
    let cost = &answer.cost;
    let mut out = json!({"output": output, "chosen": answer.chosen, "steps": schedule.steps.len(), "pieces": schedule.header.collective.pieces,
           "steps_lower_bound": answer.steps_report.as_ref().map(|r| r.steps_lower_bound), "steps_status": steps_status,
           "steps_status_of_written": answer.fewest_steps_by == Some(answer.chosen), "fewest_steps_by": answer.fewest_steps_by,
           "time_ns": to_f64(&cost.time_ns()), "bandwidth_term_ns": to_f64(&cost.bandwidth_ns()), "event_driven_ns": answer.event_ns,
           "bound_ns": answer.bound_ns, "gap_to_certified_bound": answer.gap, "bandwidth_optimal_certified": answer.bandwidth_optimal,
           "limit_reached": answer.limit_reached, "verified": answer.unverified.is_none()});
    if pareto {
        out["pareto"] = answer.pareto().into_iter().map(entry).collect();
        out["candidates"] = answer.entries.iter().map(entry).collect();
    }
    println!("{out}");
}

/// The answer in words: what was written, the fewest-steps search, the time and its gap, and
/// with `--pareto` the steps/time trade-off as a table.
fn print_text(output: &Path, schedule: &crate::schedule::Schedule, answer: &portfolio::Answer, steps_status: Option<&str>, pareto: bool) {
    let (cost, gap) = (&answer.cost, answer.gap);
    let steps = schedule.steps.len();
    let pieces = if answer.chosen.names_pieces() { String::new() } else { format!(", {}", crate::units::per_block(schedule.header.collective.pieces)) };
    println!("wrote {}: {}, {steps} step{}{pieces}", output.display(), answer.chosen, crate::units::plural(steps as u64));
    match (&answer.steps_report, steps_status) {
        (Some(r), Some(status)) => {
            let found = r.steps_found.map_or("none".to_string(), |s| s.to_string());
            // Whose schedule has those steps, when a time objective wrote another.
            let faster = match answer.objective {
                Objective::Event => " event-driven",
                Objective::Time | Objective::Steps => "",
            };
            let other = match answer.fewest_steps_by {
                Some(by) if by == answer.chosen && by == portfolio::Candidate::FewestSteps => String::new(),
                Some(by) if by == answer.chosen => format!(" (by {by})"),
                Some(portfolio::Candidate::FewestSteps) => {
                    format!(" (its schedule, one piece per link and step, was not the one written: {} is faster{faster})", answer.chosen)
                }
                Some(by) => format!(" (by {by}, one piece per link and step, not the one written: {} is faster{faster})", answer.chosen),
                None => String::new(),
            };
            println!("fewest steps: bound {} steps, found {found}: {status}{other}", r.steps_lower_bound)
        }
        _ if schedule.header.collective.kind == CollectiveKind::AllToAll => {
            println!("fewest steps: not searched (an all_to_all this large is synthesized by planes and lines, else hand-written)")
        }
        _ => println!(
            "fewest steps: not searched ({} is synthesized by layered trees, spreading trees and route-and-step candidates)",
            schedule.header.collective.kind
        ),
    }
    let one_rank = schedule.header.collective.num_ranks() < 2;
    println!(
        "step-synchronous time {} (bandwidth term {}); {}",
        format_ns(to_f64(&cost.time_ns())),
        format_ns(to_f64(&cost.bandwidth_ns())),
        match (gap, answer.bound_ns) {
            (Some(g), Some(b)) => format!(
                "{:.2}% above the certified {} ({}){}",
                100.0 * g,
                if answer.crossing_bound { "crossing bound" } else { "bandwidth bound plus the latency bound" },
                format_ns(b),
                if answer.bandwidth_optimal { " (bandwidth-optimal, certified)" } else { "" }
            ),
            (None, Some(0.0)) => "the certified bounds are 0: there is nothing to move".into(),
            _ if one_rank => "one rank moves nothing: there is nothing to bound".into(),
            _ => "no certified bandwidth bound for this collective kind".into(),
        }
    );
    // Where nothing moves (one rank, or bounds of 0), a time above the bound has no percentage.
    if let (Some(ev), Some(b)) = (answer.event_ns, answer.bound_ns.filter(|&b| b > 0.0)) {
        let chose = if answer.objective == Objective::Event { "; it chose the schedule (--objective event)" } else { "" };
        println!(
            "event-driven time {} (what ranks that pipeline their steps approach{chose}): {:.2}% above the same bound, which is proven for the step-synchronous model only",
            format_ns(ev),
            100.0 * (ev / b - 1.0)
        );
    }
    if let Some(why) = &answer.unverified {
        println!("not verified before writing ({why}); priced by the step-synchronous cost alone: run `collsched verify` on the file");
    }
    if answer.limit_reached {
        println!("time limit reached before the search finished: the best schedule found is written (exit 4)");
    }
    if pareto {
        print_pareto(answer);
    }
}

/// The steps/time trade-off: every verified candidate, those no other beats in both starred.
fn print_pareto(answer: &portfolio::Answer) {
    let front = answer.pareto();
    println!("steps/time trade-off (verified candidates; * = not beaten in both steps and time):");
    // The fewest-steps line counts steps of one piece per link; a candidate here may carry more.
    println!("(steps: the schedule's own, whose transfers may carry several pieces; the fewest-steps search counts one piece per link and step)");
    println!(
        "| steps | pieces per block | step-synchronous time | event-driven time | SCCL (steps, rounds, chunks) | candidate |\n|---:|---:|---:|---:|---:|---|"
    );
    let mut all: Vec<&portfolio::Entry> = answer.entries.iter().collect();
    all.sort_by(|a, b| a.steps.cmp(&b.steps).then(a.time_ns.total_cmp(&b.time_ns)));
    for e in all {
        let star = if front.contains(&e) { " *" } else { "" };
        let ev = e.event_ns.map_or("-".to_string(), format_ns);
        let sccl = e.sccl.as_ref().map_or("-".to_string(), |c| format!("({}, {}, {})", c.steps, c.rounds, c.chunks));
        println!("| {}{star} | {} | {} | {ev} | {sccl} | {} |", e.steps, e.pieces, format_ns(e.time_ns), e.candidate);
    }
}
