//! `collsched export`: lower a schedule to per-rank programs, check rule 6 on them, write MSCCL
//! XML, and re-check what was written with the reader's rules and a chunk-level simulation.

use crate::error::{Error, ExitCode, Result};
use crate::export::{check_reader_rules, msccl_xml, simulate, MscclOptions};
use crate::lower::{lower, ChannelSpread, LowerOptions};
use crate::verify::check_deadlock;
use std::path::Path;

/// The lowerings tried in order: the one asked for, then more channels with operations spread,
/// until the XML passes the reader's rules (its limits of 64 steps per threadblock and 32
/// threadblocks per channel are what more channels relieve).
fn candidates(channels: Option<usize>) -> Vec<LowerOptions> {
    match channels {
        Some(c) => vec![LowerOptions { channels: c.max(1), ..Default::default() }],
        None => std::iter::once(LowerOptions::default())
            .chain((2..=8).map(|c| LowerOptions { channels: c, spread: ChannelSpread::Operations, ..Default::default() }))
            .collect(),
    }
}

/// Runs the export.
pub fn export(schedule: &Path, to: &str, dir: &Path, channels: Option<usize>, legacy: bool) -> Result<ExitCode> {
    if to != "msccl-xml" {
        return Err(Error::bad(format!("--to {to}: this version exports msccl-xml (Chakra traces are not written yet)")));
    }
    let s = crate::schedule::read_schedule_file(schedule)?;
    let report = crate::verify::verify_schedule(&s, &Default::default())?;
    if !report.is_valid() {
        return Err(Error::bad(format!("{}: the schedule fails verification, nothing to export: {}", schedule.display(), report.findings.failures()[0])));
    }
    let stem = schedule.file_stem().map(|x| x.to_string_lossy().into_owned()).unwrap_or_else(|| "schedule".into());
    let opts = MscclOptions { name: stem.clone(), legacy_coll_names: legacy, ..Default::default() };
    let mut last_problems = Vec::new();
    for lower_opts in candidates(channels) {
        let programs = lower(&s, &lower_opts)?;
        let deadlocks = check_deadlock(&programs);
        if let Some(d) = deadlocks.first() {
            return Err(Error::bad(format!("{}: the lowered programs fail rule 6: {d}", schedule.display())));
        }
        let xml = msccl_xml(&programs, &opts)?;
        let problems = check_reader_rules(&xml);
        if !problems.is_empty() {
            last_problems = problems;
            continue;
        }
        let sim = simulate(&xml).map_err(|e| Error::bad(format!("the exported XML does not run: {e}")))?;
        if !sim.is_correct() {
            return Err(Error::bad(format!("the exported XML computes the wrong result: {}", sim.errors[0])));
        }
        let out = dir.join(format!("{stem}.xml"));
        crate::io::write_atomic(&out, |w| std::io::Write::write_all(w, xml.as_bytes()).map_err(crate::io::write_error(&out)))?;
        println!(
            "wrote {}: {} channels ({:?} spread), {} KiB; reader rules pass; the chunk-level simulation ran {} steps and every chunk ends where the collective wants it; rule 6 holds",
            out.display(),
            lower_opts.channels,
            lower_opts.spread,
            xml.len() / 1024,
            sim.steps
        );
        return Ok(ExitCode::Ok);
    }
    Err(Error::bad(format!(
        "no lowering tried ({}) gives XML the MSCCL reader accepts: {}",
        if channels.is_some() { "the channel count given" } else { "1 to 8 channels" },
        last_problems.first().cloned().unwrap_or_default()
    )))
}
