//! `collsched verify FILE` on an SCCL algorithm JSON (detected by its top-level keys): the file
//! is checked against the format's rules (docs/design/FORMATS.md "SCCL algorithm JSON"),
//! imported onto the spec's instance (or SCCL's own topology with the defaults of
//! docs/design/CLI.md), and its steps verified like a schedule file.

use crate::error::Result;
use crate::export::sccl::{import_sccl, parse_sccl, rules_broken, sccl_problems, without_unsendable, ScclProblem};
use crate::schedule::{ScheduleHeader, StepSink};
use crate::verify::{Check, Report, Verifier, VerifyOptions};
use serde_json::json;
use std::path::Path;

/// What the SCCL file adds to a verification report.
pub struct ScclVerdict {
    /// The format's rules the file breaks, one failure each (a rule may fail many times).
    pub problems: Vec<ScclProblem>,
    /// SCCL's own coordinates of the file: steps, rounds, chunks, and its name.
    pub summary: serde_json::Value,
}

impl ScclVerdict {
    /// One line for people.
    pub fn line(&self) -> String {
        let s = &self.summary;
        format!("SCCL algorithm {}: {} steps, {} rounds, {} chunks", s["name"], s["steps"], s["rounds"], s["chunks"])
    }

    /// Each failure as printed, `SCCL rule N: ...`.
    pub fn lines(&self) -> Vec<String> {
        self.problems.iter().map(|p| format!("SCCL {p}")).collect()
    }

    /// The verdict on the format: the distinct rules broken (a rule that fails at many sends is
    /// one rule) and how many failures.
    pub fn verdict(&self) -> String {
        let rules = rules_broken(&self.problems);
        if rules.is_empty() {
            return "meets every rule of the format".into();
        }
        let plural = |n: usize, what: &str| if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") };
        let numbers: Vec<String> = rules.iter().map(u8::to_string).collect();
        format!(
            "INVALID as SCCL: breaks {} of the format ({}; {}, listed above)",
            plural(rules.len(), "rule"),
            numbers.join(", "),
            plural(self.problems.len(), "failure")
        )
    }
}

/// Imports the file (onto `instance` when a spec gives one) and verifies its steps with `checks`.
pub fn verify_sccl(
    path: &Path,
    instance: Option<crate::spec::Instance>,
    options: &VerifyOptions,
    checks: Vec<Box<dyn Check>>,
) -> Result<(ScheduleHeader, Report, ScclVerdict)> {
    let source = path.display().to_string();
    let alg = parse_sccl(&crate::io::read_decoded_to_string(path)?, &source)?;
    let problems = sccl_problems(&alg);
    // A send rule 5 refuses (no such chunk, ranks or link) is one of the problems above, a
    // failure in the steps (exit 1), not of the header: the rest of the steps are still checked.
    let schedule = import_sccl(&without_unsendable(&alg), instance.as_ref()).map_err(|e| e.context(&source))?;
    let mut verifier = Verifier::new(options.clone());
    if let Some(inst) = instance {
        verifier = verifier.against(inst);
    }
    for c in checks {
        verifier = verifier.with_check(c);
    }
    verifier.begin(&schedule.header)?;
    for (i, s) in schedule.steps.iter().enumerate() {
        verifier.check_step(i, s);
    }
    let summary = json!({
        "name": alg.name,
        "steps": alg.steps.len(),
        "rounds": alg.steps.iter().map(|s| s.rounds).sum::<u64>(),
        "chunks": alg.instance.chunks,
    });
    Ok((schedule.header, verifier.finish().map_err(|e| e.context(&source))?, ScclVerdict { problems, summary }))
}
