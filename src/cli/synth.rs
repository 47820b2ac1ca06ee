//! `collsched synthesize`: a contention-free schedule for the spec's topology, faults and
//! collective, how far it is from the best possible, and whether that is proven.
//!
//! `--objective steps` runs the solver search for the fewest steps (one piece per link per step,
//! MODEL.md section 3). The default objective, the schedule's time at the spec's message size,
//! takes the best of a portfolio: the fewest-steps schedule, and, on tori, the hand-written
//! schedules that fit the faults (HalfRing+DimRotation; MATEe, MATE and FoldedRing+DimRotation
//! when a cable is down), each verified and priced in the step-synchronous model; its gap is
//! measured against the certified bandwidth bound plus the latency bound (MODEL.md section 6).

use crate::algorithms::{torus_all_to_all, torus_mate, RingAlgorithm, Scheduler};
use crate::bounds::certificate::certificate_of_instance;
use crate::bounds::flow::FlowOptions;
use crate::error::{Error, ExitCode, Result};
use crate::schedule::Schedule;
use crate::spec::{MethodSpec, Spec};
use crate::synth::{synthesize_steps_with, Progress, Solver, SynthOptions, SynthStatus};
use crate::units::{format_ns, to_f64};
use crate::verify::{verify_schedule, VerifyOptions};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// The synthesis options: the spec's `method.synthesize`, overridden by flags.
fn options(spec: &Spec, solver: Option<&str>, time_limit: Option<f64>) -> Result<SynthOptions> {
    let from_spec = match &spec.method {
        Some(MethodSpec::Synthesize(s)) => Some(s),
        _ => None,
    };
    let name = solver.map(str::to_string).or_else(|| from_spec.map(|s| s.solver.clone())).unwrap_or_else(|| "auto".into());
    let solver = match name.as_str() {
        "auto" => Solver::Auto,
        "ilp" => Solver::Ilp,
        "smt" => Solver::Smt,
        other => return Err(Error::bad(format!("solver \"{other}\": expected auto, ilp or smt"))),
    };
    let secs = time_limit.or_else(|| from_spec.and_then(|s| s.time_limit_s)).unwrap_or(60.0);
    if !(secs.is_finite() && secs > 0.0) {
        return Err(Error::bad(format!("time limit {secs} s: must be a positive number of seconds")));
    }
    Ok(SynthOptions { solver, time_limit: Duration::from_secs_f64(secs), max_steps: None })
}

/// Runs the synthesis.
pub fn synthesize(spec: &Spec, output: &Path, objective: &str, solver: Option<&str>, time_limit: Option<f64>, json_out: bool) -> Result<ExitCode> {
    let opts = options(spec, solver, time_limit)?;
    let inst = spec.instance()?;
    let (t, c) = (&inst.topology, &inst.collective);
    let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut progress = |p: &Progress| {
        if on_terminal {
            eprintln!("synthesize: {p:?}");
        }
    };
    let report = synthesize_steps_with(t, c, &opts, &mut progress)?;
    if let SynthStatus::Infeasible(why) = &report.status {
        return Err(Error::infeasible(why.clone()));
    }
    let steps_status = match (&report.status, report.gap()) {
        (SynthStatus::Optimal { certified: true }, _) => "optimal (certified)".to_string(),
        (SynthStatus::Optimal { certified: false }, _) => "optimal (solver-attested)".to_string(),
        (SynthStatus::LimitReached, g) => format!("time limit reached, gap {:.1}%", 100.0 * g.unwrap_or(f64::NAN)),
        (_, g) => format!("gap {:.1}% to the certified steps bound", 100.0 * g.unwrap_or(f64::NAN)),
    };
    let mut candidates: Vec<(String, Schedule)> = Vec::new();
    if let Some(s) = report.schedule.clone() {
        candidates.push(("fewest steps (solver)".into(), s));
    }
    if objective == "time" && crate::algorithms::torus_all_to_all_shape(t, c, "synthesize").is_ok() {
        let faulty = !t.down_links().is_empty();
        let mut add = |name: &str, s: Result<Schedule>| {
            if let Ok(s) = s {
                candidates.push((name.into(), s));
            }
        };
        add("HalfRing+DimRotation", torus_all_to_all(t, c, RingAlgorithm::HalfRing, Scheduler::DimRotation));
        if faulty {
            add("MATEe", torus_mate(t, c, true));
            add("MATE", torus_mate(t, c, false));
        }
    }
    let mut best: Option<(String, Schedule, crate::cost::SyncCost)> = None;
    for (name, s) in candidates {
        let r = verify_schedule(&s, &VerifyOptions::default())?;
        if !r.is_valid() {
            continue;
        }
        let cost = r.cost.expect("verification computes the cost");
        let better = match &best {
            None => true,
            Some((_, _, b)) if objective == "time" => cost.time_ns() < b.time_ns(),
            Some(_) => false,
        };
        if better {
            best = Some((name, s, cost));
        }
    }
    let Some((name, mut schedule, cost)) = best else {
        return Err(Error::infeasible("no contention-free schedule was found for this instance"));
    };
    // The certified bounds (flow bound with a short budget: any length function is a valid bound).
    let cert = certificate_of_instance(&inst, &"0".repeat(64), &FlowOptions { time_limit: Duration::from_secs(20), ..Default::default() });
    let checked = crate::certify::check_str(&cert.to_string()).map_err(|e| Error::bad(format!("internal: the bound certificate does not check: {e}")))?;
    let latency = checked.claims.iter().find(|cl| cl.bound == "latency").map(|cl| cl.derived.clone());
    let q = |x: crate::units::Rational| crate::certify::parse_q(&x.to_string()).unwrap_or_default();
    let gap = match (&checked.bandwidth_bound, &latency) {
        (Some(bw), Some(lat)) => {
            let bound = bw + lat;
            let ratio = q(cost.time_ns()) / bound;
            Some(crate::certify::show_q(&ratio).split_whitespace().next().and_then(|x| x.parse::<f64>().ok()).unwrap_or(f64::NAN) - 1.0)
        }
        _ => None,
    };
    let optimal_bw = checked.bandwidth_bound.as_ref().is_some_and(|b| &q(cost.bandwidth_ns()) == b);
    if let Some(meta) = schedule.header.meta.as_mut().and_then(|m| m.as_object_mut()) {
        meta.insert("synthesis".into(), json!({"objective": objective, "chosen": name, "steps_status": steps_status}));
    } else {
        schedule.header.meta =
            Some(json!({"synthesis": {"objective": objective, "chosen": name, "steps_status": steps_status}, "shape": crate::topology::shape_json(t)}));
    }
    crate::schedule::write_schedule_file(output, &schedule)?;
    let limit = matches!(report.status, SynthStatus::LimitReached);
    if json_out {
        println!(
            "{}",
            json!({"output": output, "chosen": name, "steps": schedule.steps.len(), "steps_lower_bound": report.steps_lower_bound,
                   "steps_status": steps_status, "time_ns": to_f64(&cost.time_ns()), "bandwidth_term_ns": to_f64(&cost.bandwidth_ns()),
                   "gap_to_certified_bound": gap, "bandwidth_optimal_certified": optimal_bw, "limit_reached": limit})
        );
    } else {
        println!("wrote {}: {name}, {} steps", output.display(), schedule.steps.len());
        println!("fewest steps: bound {} steps, found {:?}: {steps_status}", report.steps_lower_bound, report.steps_found);
        println!(
            "step-synchronous time {} (bandwidth term {}); {}",
            format_ns(to_f64(&cost.time_ns())),
            format_ns(to_f64(&cost.bandwidth_ns())),
            match gap {
                Some(g) => format!(
                    "{:.2}% above the certified bandwidth bound plus the latency bound{}",
                    100.0 * g,
                    if optimal_bw { " (bandwidth-optimal, certified)" } else { "" }
                ),
                None => "no certified bandwidth bound for this collective kind".into(),
            }
        );
    }
    Ok(if limit { ExitCode::LimitReached } else { ExitCode::Ok })
}
