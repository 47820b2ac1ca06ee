//! `collsched verify FILE.xml [--rendezvous]`: an MSCCL XML file judged for the runtime of its
//! dialect ([`crate::export::check_xml`]: the reader's rules, a chunk-level run under the
//! runtime's buffering or rendezvous for every declared placement, where every chunk ends up),
//! then imported as a schedule onto the spec's topology (or a full mesh of its gpus) and
//! verified under rules 1-5. A spec must name the file's collective (kind and ranks; else exit
//! 2, as for the other formats) and its `expect` is asserted on the import (rule 8);
//! `expect.deadlock_free = false` on the run: a placement that deadlocks is what is expected, and
//! a file whose every placement runs to its end fails rule 8.

use crate::error::{Error, ExitCode, Result};
use crate::export::msccl::model::{Program, Proto};
use crate::export::msccl::races::MAX_ORDER_WORK;
use crate::export::msccl::{import_program, pieces_per_block, Onto, PlacementRun, SimError, XmlReport};
use crate::export::{check_xml, Buffering};
use crate::spec::{Instance, Spec};
use crate::verify::{verify_schedule_checked, VerifyOptions};
use serde_json::json;
use std::path::Path;

/// Verifies an MSCCL XML file; the imported schedule's failures are kept to
/// `max_diagnostics` per rule (all are counted), as a schedule file's are.
pub fn verify_xml(path: &Path, spec_path: Option<&Path>, json_out: bool, max_diagnostics: usize, rendezvous: bool) -> Result<ExitCode> {
    let text = crate::io::read_to_string(path)?;
    let spec = spec_path.map(Spec::load).transpose()?;
    let instance = spec.as_ref().map(Spec::instance).transpose()?;
    let (options, conformance) = super::expectations(spec.as_ref(), VerifyOptions { max_diagnostics_per_rule: max_diagnostics, ..Default::default() });
    // Onto the spec's network, its ranks (gpu g is rank g) and its bytes per rank (where its
    // blocks are uniform, as the file's chunks are).
    let onto = instance.as_ref().map(|i| Onto {
        topology: &i.topology,
        ranks: Some(&i.collective.ranks),
        bytes_per_rank: i.collective.block_bytes.is_none().then_some(i.collective.bytes_per_rank),
    });
    let buffering = if rendezvous { Buffering::Rendezvous } else { Buffering::Runtime };
    let report = check_xml(&text, buffering);
    unreadable(path, &report)?;
    if let (Some(program), Some(inst), Some(spec_path)) = (&report.program, &instance, spec_path) {
        same_collective(program, inst).map_err(|e| e.context(format!("{} (with --spec {})", path.display(), spec_path.display())))?;
    }
    let proto = report.program.as_ref().map_or(Proto::default(), Program::protocol);
    let mut failures: Vec<String> = report.problems.errors.iter().map(|p| format!("MSCCL reader rule: {p}")).collect();
    let mut notes: Vec<String> = Vec::new();
    let expect_deadlock = spec.as_ref().and_then(|s| s.expect.deadlock_free) == Some(false);
    for run in &report.runs {
        run_lines(&report, run, expect_deadlock, &mut failures, &mut notes);
    }
    if expect_deadlock && !report.runs.is_empty() && !report.runs.iter().any(deadlocks) {
        failures.push(format!(
            "rule 8 bound conformance: expect.deadlock_free = false, but every placement runs to its end under {}: the file is deadlock-free",
            buffering.describe(proto)
        ));
    }
    let mut summary = String::new();
    if let (Some(_), true) = (&report.program, failures.is_empty() && expect_deadlock && report.runs.iter().any(deadlocks)) {
        notes.push("not imported as a schedule: its run deadlocks, so rules 1-5 are not checked on it".into());
    } else if let (Some(program), true) = (&report.program, failures.is_empty()) {
        match import_program(program, onto) {
            Ok(schedule) => {
                let r = verify_schedule_checked(&schedule, &options, vec![Box::new(conformance)])?;
                failures.extend(r.findings.failures().iter().map(|d| format!("imported schedule: {d}")));
                failures.extend(r.findings.unshown_failures().iter().map(|l| format!("imported schedule: {l}")));
                summary = format!("imported as {} steps, {} transfers over {} ranks", r.stats.steps, r.stats.transfers, schedule.header.collective.num_ranks());
            }
            Err(e) if program.collective().and_then(|c| c.kind()).is_none() => notes.push(format!("not imported as a schedule: {e}")),
            Err(e) => failures.push(format!("import: {e}")),
        }
    }
    // With a deadlock expected, a placement that deadlocks counts as one that ran as it should.
    let runs_valid = !report.runs.is_empty() && report.runs.iter().all(|r| r.is_valid() || (expect_deadlock && deadlocks(r)));
    let valid = failures.is_empty() && report.program.is_some() && report.problems.errors.is_empty() && runs_valid;
    // A program too large to look for races in is valid only as far as it was checked.
    let races_unchecked = report.runs.iter().any(|r| r.outcome.as_ref().is_ok_and(|e| !e.races_checked));
    let runtime = report.runtime.map_or("no runtime (unreadable)", |r| r.name());
    let judged = verdict_words(&report);
    if json_out {
        let placements: Vec<_> = report
            .runs
            .iter()
            .map(|r| {
                json!({
                    "placement": r.placement.name(),
                    "runs": r.is_valid(),
                    "steps": r.outcome.as_ref().ok().map(|e| e.steps),
                    "relies_on_buffering": r.without_buffering.is_some(),
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "valid": valid,
                "races_checked": !races_unchecked,
                "runtime": runtime,
                "buffering": buffering.describe(proto),
                "relies_on_buffering": report.relies_on_buffering(),
                "placements": placements,
                "failures": failures,
                "warnings": report.problems.warnings,
                "notes": notes,
                "summary": summary,
            })
        );
    } else {
        let dialect = report.runtime.map_or(String::new(), |r| format!(" ({})", r.dialect()));
        println!("judged for {runtime}{dialect} under {}", buffering.describe(proto));
        for w in &report.problems.warnings {
            println!("warning: {w}");
        }
        if !report.other_runtime_refuses.is_empty() {
            if let Some(r) = report.runtime {
                let more = report.other_runtime_refuses.len() - 1;
                let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
                println!("note: {} would refuse this file: {}{more}", r.other(), report.other_runtime_refuses[0]);
            }
        }
        for n in &notes {
            println!("{n}");
        }
        for f in &failures {
            println!("{f}");
        }
        if !summary.is_empty() {
            println!("{summary}");
        }
        let verdict = match (valid, races_unchecked) {
            (false, _) => "INVALID",
            (true, true) => "not proven (valid but for data races, which were not looked for: a limit)",
            (true, false) => "valid",
        };
        println!("{verdict}: {} ({runtime}; {judged})", path.display());
    }
    Ok(match (valid, races_unchecked) {
        (false, _) => ExitCode::RuleFailed,
        (true, true) => ExitCode::LimitReached,
        (true, false) => ExitCode::Ok,
    })
}

/// Refuses (exit 2, CLI.md `verify`) a file that cannot be read as an MSCCL program: XML that is
/// not well-formed, no `<algo>`, an element without an attribute the reader requires, a step of
/// no type the reader models. A file that reads but breaks a reader rule fails (exit 1).
fn unreadable(path: &Path, report: &XmlReport) -> Result<()> {
    let why: Vec<&str> = match report.program {
        None => report.problems.errors.iter().map(String::as_str).collect(),
        Some(_) => report.problems.errors.iter().map(String::as_str).filter(|e| e.contains(": <algo> lacks the attribute ")).collect(),
    };
    if why.is_empty() {
        return Ok(());
    }
    Err(Error::bad(format!("{}: cannot be read as an MSCCL program: {}", path.display(), why.join("; "))))
}

/// Refuses a spec whose collective is not the file's (its kind, its number of ranks, and the
/// pieces per block when the spec fixes them), as `verify` does for the other formats. Sizes
/// are not compared: the XML names none.
fn same_collective(p: &Program, inst: &Instance) -> Result<()> {
    let spec = &inst.collective;
    let kind = p.collective().and_then(|c| c.kind());
    let ngpus = p.ngpus.unwrap_or(0);
    if kind != Some(spec.kind) || usize::try_from(ngpus).ok() != Some(spec.num_ranks()) {
        let coll = p.coll.as_ref().map_or("", |(t, _)| t.as_str());
        return Err(Error::bad(format!(
            "the file's collective (coll=\"{coll}\" over ngpus=\"{ngpus}\") is not the spec's ({} over {} ranks)",
            spec.kind,
            spec.num_ranks()
        )));
    }
    // The import cuts each block into nchunksperloop / ngpus pieces (an all-reduce's chunks
    // that are not a multiple of its gpus: the fewest pieces that fill each chunk).
    let chunks = usize::try_from(p.nchunksperloop.unwrap_or(0)).unwrap_or(0);
    let pieces = pieces_per_block(spec.kind, spec.num_ranks(), chunks).map_or(0, |(pieces, _)| pieces);
    if inst.pieces_given && pieces != spec.pieces {
        return Err(Error::bad(format!(
            "the file cuts blocks into {pieces} pieces (nchunksperloop=\"{}\" over ngpus=\"{ngpus}\"), the spec into {}",
            p.nchunksperloop.unwrap_or(0),
            spec.pieces
        )));
    }
    Ok(())
}

/// Whether a placement's run deadlocks (or leaves operations unpaired, which block forever).
fn deadlocks(run: &PlacementRun) -> bool {
    matches!(run.outcome, Err(SimError::Deadlock(_) | SimError::Unpaired(_)))
}

/// What one placement's run says: failures, or the lines of a run that finished. A deadlock that
/// the spec expects is a note.
fn run_lines(report: &XmlReport, run: &PlacementRun, expect_deadlock: bool, failures: &mut Vec<String>, notes: &mut Vec<String>) {
    let pl = run.placement.name();
    let coll = report.program.as_ref().and_then(|p| p.coll.as_ref()).map_or("", |(t, _)| t.as_str());
    let rule = if expect_deadlock {
        format!("rule 6 deadlock freedom ({pl}), as expect.deadlock_free = false expects")
    } else {
        format!("rule 6 deadlock freedom ({pl})")
    };
    let deadlock_lines: Vec<String> = match &run.outcome {
        Err(SimError::Deadlock(d)) => vec![format!("{rule}: {d}")],
        Err(SimError::Unpaired(items)) => items.iter().map(|i| format!("{rule}: {i}")).collect(),
        _ => Vec::new(),
    };
    if expect_deadlock {
        notes.extend(deadlock_lines);
    } else {
        failures.extend(deadlock_lines);
    }
    match &run.outcome {
        Err(SimError::Deadlock(_) | SimError::Unpaired(_)) => {}
        Err(SimError::Refused(items)) => failures.extend(items.iter().map(|i| format!("{pl}: not run: {i}"))),
        Ok(exec) => {
            failures.extend(exec.errors.iter().map(|e| format!("rule 5 completion ({pl}, chunk-level run): {e}")));
            failures.extend(exec.races.iter().map(|r| format!("data race ({pl}): {r}")));
            if !exec.races_checked {
                notes.push(format!("{pl}: too large to look for data races (more than {MAX_ORDER_WORK} clock updates)"));
            }
            let placed = if !exec.aliasing_modelled {
                format!("how coll=\"{coll}\" aliases its buffers in place is not modelled, so it was run with separate buffers, for deadlock freedom only: where the chunks end is not checked")
            } else if !exec.postcondition_checked {
                format!("coll=\"{coll}\" has no postcondition here, so where the chunks end is not checked")
            } else if exec.errors.is_empty() {
                format!("every chunk ends where {coll} wants it")
            } else {
                "some chunks end in the wrong place".into()
            };
            notes.push(format!("{pl}: runs to its end ({} steps); {placed}", exec.steps));
            if let Some(e) = &run.without_buffering {
                notes.push(format!("{pl}: relies on buffering: {e}"));
            }
        }
    }
}

/// How the verdict was reached, for the last line.
fn verdict_words(report: &XmlReport) -> String {
    match report.buffering {
        Buffering::Rendezvous => "under rendezvous, so with any buffer size".into(),
        Buffering::Runtime if report.relies_on_buffering() => "relies on the runtime's buffering; deadlocks under rendezvous".into(),
        Buffering::Runtime if report.runs.iter().all(PlacementRun::is_valid) && !report.runs.is_empty() => {
            "under the runtime's buffering; runs under rendezvous too".into()
        }
        Buffering::Runtime => "under the runtime's buffering".into(),
    }
}
