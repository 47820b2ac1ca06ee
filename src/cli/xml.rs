//! `collsched verify FILE.xml`: an MSCCL XML file as a runtime would run it. The file is checked
//! against the reader's acceptance rules, run chunk by chunk (where every chunk ends up; a hang
//! is a rule-6 cycle), and imported as a schedule onto the spec's topology (or a full mesh of its
//! gpus) and verified under rules 1-5.

use crate::error::{ExitCode, Result};
use crate::export::{check_reader_rules, import_msccl, simulate};
use crate::verify::{verify_schedule, VerifyOptions};
use serde_json::json;
use std::path::Path;

/// Verifies an MSCCL XML file.
pub fn verify_xml(path: &Path, spec: Option<&Path>, json_out: bool) -> Result<ExitCode> {
    let text = crate::io::read_to_string(path)?;
    let topology = match spec {
        Some(p) => Some(crate::spec::Spec::load(p)?.instance()?.topology),
        None => None,
    };
    let mut failures: Vec<String> = check_reader_rules(&text).into_iter().map(|p| format!("MSCCL reader rule: {p}")).collect();
    match simulate(&text) {
        Ok(sim) => failures.extend(sim.errors.iter().map(|e| format!("rule 5 completion (chunk-level simulation): {e}"))),
        Err(e) => failures.push(format!("rule 6 deadlock freedom (chunk-level simulation): {e}")),
    }
    let mut summary = String::new();
    match import_msccl(&text, topology.as_ref()) {
        Ok(schedule) => {
            let r = verify_schedule(&schedule, &VerifyOptions::default())?;
            failures.extend(r.findings.failures().iter().map(|d| format!("imported schedule: {d}")));
            summary = format!("imported as {} steps, {} transfers over {} ranks", r.stats.steps, r.stats.transfers, schedule.header.collective.num_ranks());
        }
        Err(e) => failures.push(format!("import: {e}")),
    }
    let valid = failures.is_empty();
    if json_out {
        println!("{}", json!({"valid": valid, "failures": failures, "summary": summary}));
    } else {
        for f in &failures {
            println!("{f}");
        }
        println!("{}: {} ({summary})", if valid { "valid" } else { "INVALID" }, path.display());
    }
    Ok(if valid { ExitCode::Ok } else { ExitCode::RuleFailed })
}
