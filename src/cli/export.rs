//! `collsched export`: lower a schedule to per-rank programs, check rule 6 on them, write MSCCL
//! XML, and re-check what was written as `verify FILE.xml --rendezvous` does: the reader's rules
//! and a chunk-level run without buffering, so the file runs with any buffer size.

use crate::error::{Error, ExitCode, Result};
use crate::export::msccl::rules::{elements_over_limit, program_over_elements, MAX_CHANNELS};
use crate::export::msccl::write::used_channels;
use crate::export::{check_xml, msccl_xml, Buffering, MscclOptions, Runtime};
use crate::lower::{lower, ChannelSpread, LowerOptions};
use crate::verify::check_deadlock;
use std::path::Path;

/// The lowerings tried in order: the one asked for (whole transfers per channel), then its
/// operations spread over the channels, and with no count given more and more channels up to the
/// readers' 32, until the XML passes the reader's rules (its limits of 64 steps per threadblock
/// and 32 threadblocks per channel are what more channels relieve).
fn candidates(channels: Option<usize>) -> Vec<LowerOptions> {
    const COUNTS: [usize; 12] = [2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32];
    let spread = |c: usize| LowerOptions { channels: c, spread: ChannelSpread::Operations, ..Default::default() };
    match channels {
        Some(c) => vec![LowerOptions { channels: c, ..Default::default() }, spread(c)],
        None => std::iter::once(LowerOptions::default()).chain(COUNTS.into_iter().filter(|&c| c <= MAX_CHANNELS as usize).map(spread)).collect(),
    }
}

/// Runs the export.
pub fn export(schedule: &Path, to: &str, dir: &Path, channels: Option<usize>, legacy: bool) -> Result<ExitCode> {
    if !["msccl-xml", "chakra-et", "sccl-json"].contains(&to) {
        return Err(Error::bad(format!("--to {to}: expected msccl-xml, chakra-et or sccl-json")));
    }
    // `--legacy` picks the MSCCL XML dialect; `--channels` the lowering's channels, which the
    // MSCCL XML and the Chakra traces (their tags) carry and SCCL's algorithm file has no room for.
    if legacy && to != "msccl-xml" {
        return Err(Error::bad(format!("--legacy: applies to --to msccl-xml (the older MSCCL dialect), not to --to {to}")));
    }
    if let (Some(c), "sccl-json") = (channels, to) {
        return Err(Error::bad(format!(
            "--channels {c}: applies to --to msccl-xml and chakra-et, not to --to sccl-json (msccl-tools' ncclize picks the channels)"
        )));
    }
    check_channels(channels)?;
    // The reader names the file in its own messages; every refusal after it is about the file
    // too and is named here, once (a failed write names the path it could not write).
    let s = crate::schedule::read_schedule_file(schedule)?;
    export_schedule(&s, schedule, to, dir, channels, legacy).map_err(|e| {
        if matches!(e, Error::Io(_)) {
            e
        } else {
            e.context(format!("{}: --to {to}", schedule.display()))
        }
    })
}

/// The export of the schedule read from the file `schedule`, once the flags are checked.
fn export_schedule(s: &crate::schedule::Schedule, schedule: &Path, to: &str, dir: &Path, channels: Option<usize>, legacy: bool) -> Result<ExitCode> {
    let report = crate::verify::verify_schedule(s, &Default::default())?;
    if !report.is_valid() {
        return Err(Error::bad(format!("the schedule fails verification, nothing to export: {}", report.findings.failures()[0])));
    }
    // `x.json` and `x.json.zst` both export as `x`.
    let plain = if crate::io::is_zstd(schedule) { schedule.with_extension("") } else { schedule.to_path_buf() };
    let stem = plain.file_stem().map(|x| x.to_string_lossy().into_owned()).unwrap_or_else(|| "schedule".into());
    if to == "chakra-et" {
        return chakra(s, dir, &stem, channels);
    }
    if to == "sccl-json" {
        return sccl_json(s, dir, &stem);
    }
    let runtime = if legacy { Runtime::Legacy } else { Runtime::Executor };
    let opts = MscclOptions { name: stem.clone(), runtime, ..Default::default() };
    let mut last_problems = Vec::new();
    // The channels of a lowering whose gpu has more elements than the reader stores.
    let mut hopeless_at = None;
    for lower_opts in candidates(channels) {
        let programs = lower(s, &lower_opts)?;
        if let Some(e) = elements_over_limit(&programs) {
            last_problems = vec![e];
            hopeless_at = Some(lower_opts.channels);
            break;
        }
        let deadlocks = check_deadlock(&programs);
        if let Some(d) = deadlocks.first() {
            return Err(Error::bad(format!("the lowered programs fail rule 6: {d}")));
        }
        let xml = msccl_xml(&programs, &opts)?;
        let report = check_xml(&xml, Buffering::Rendezvous);
        if !report.problems.errors.is_empty() {
            // A gpu with more elements than the reader stores keeps them on more channels, which
            // only add threadblocks (a 6x6x6 all_to_all took 132 s and 3 GB to try all 13).
            if let Some(e) = report.program.as_ref().and_then(program_over_elements) {
                // The error more channels cannot mend is the one to name.
                last_problems = vec![e];
                hopeless_at = Some(lower_opts.channels);
                break;
            }
            last_problems = report.problems.errors;
            continue;
        }
        let run = match report.runs.first().map(|r| &r.outcome) {
            Some(Ok(run)) => run,
            Some(Err(e)) => return Err(Error::internal(format!("the exported XML does not run under rendezvous: {e}"))),
            None => return Err(Error::internal("the exported XML declares no placement to run")),
        };
        if let Some(e) = run.errors.first().or(run.races.first()) {
            return Err(Error::internal(format!("the exported XML computes the wrong result: {e}")));
        }
        let out = dir.join(format!("{stem}.xml"));
        crate::io::write_atomic(&out, |w| std::io::Write::write_all(w, xml.as_bytes()).map_err(crate::io::write_error(&out)))?;
        let written = report.program.as_ref().and_then(|p| p.nchannels).unwrap_or(0);
        let used = used_channels(&programs);
        let carried = if used == lower_opts.channels { String::new() } else { format!(", threadblocks on {used} of them") };
        println!(
            "wrote {}: nchannels=\"{written}\" ({} channel{}{carried}; {:?} spread), {} KiB, for {runtime}; its reader rules pass; rule 6 holds: under rendezvous (no buffering) the chunk-level run takes {} steps and every chunk ends where the collective wants it, so it runs with any buffer size",
            out.display(),
            lower_opts.channels,
            crate::units::plural(lower_opts.channels as u64),
            lower_opts.spread,
            xml.len() / 1024,
            run.steps
        );
        return Ok(ExitCode::Ok);
    }
    Err(Error::bad(format!(
        "no lowering tried ({}) gives XML the MSCCL reader accepts: {}",
        match (hopeless_at, channels) {
            (Some(c), _) => format!("{c} channel(s); more channels only add threadblocks"),
            (None, Some(c)) => format!("{c} channels, whole transfers or operations spread"),
            (None, None) => format!("1 to {MAX_CHANNELS} channels"),
        },
        last_problems.first().cloned().unwrap_or_default()
    )))
}

/// Refuses a `--channels` outside 1..=32, before the schedule is read, for every format that takes
/// it: the MSCCL runtimes' readers accept `nchannels` in 1..=32, and the Chakra traces are the
/// same lowering onto the same channels (their tags carry them), for the runtimes they model.
fn check_channels(channels: Option<usize>) -> Result<()> {
    match channels {
        Some(c) if c == 0 || c > MAX_CHANNELS as usize => Err(Error::bad(format!(
            "--channels {c}: expected 1 to {MAX_CHANNELS} (the MSCCL runtimes' readers accept nchannels 1..={MAX_CHANNELS}; msccl-xml and chakra-et lower onto them alike)"
        ))),
        _ => Ok(()),
    }
}

/// Chakra execution traces for ASTRA-sim: one file per rank and the system-file snippet. Prints
/// the bytes all sends carry, which a decoder can check the files against.
fn chakra(s: &crate::schedule::Schedule, dir: &Path, stem: &str, channels: Option<usize>) -> Result<ExitCode> {
    let opts = LowerOptions { channels: channels.unwrap_or(1), ..Default::default() };
    let programs = lower(s, &opts)?;
    if let Some(d) = check_deadlock(&programs).first() {
        return Err(Error::bad(format!("the lowered programs fail rule 6: {d}")));
    }
    let traces = crate::export::chakra_traces(&programs, s)?;
    // The traces are checked before anything is written. Every `comm_size` fits int64 (else
    // `chakra_traces` refused the schedule), but their sum may not: it is summed in i128.
    let (mut bytes, mut messages): (i128, i128) = (0, 0);
    for (_, data) in &traces {
        let (_, nodes) = crate::export::decode_chakra(data)?;
        for n in nodes.iter().filter(|n| n.r#type == 5) {
            bytes += i128::from(n.attr.iter().find(|a| a.name == "comm_size").and_then(|a| a.as_i64()).unwrap_or(0));
            messages += 1;
        }
    }
    // What the schedule itself moves, exactly. Each message rounds its size up to whole bytes
    // (by less than one byte), and the lowering may cut a transfer into several messages or join
    // several into one, so the traces carry at least that and less than one byte more per message.
    let c = &s.header.collective;
    let exact: crate::units::Rational =
        s.steps.iter().flat_map(|st| &st.transfers).flat_map(|tr| tr.pieces.iter().filter_map(|p| c.piece_index(p))).map(|i| c.piece_size_at(i)).sum();
    let carried = crate::units::Rational::from_integer(bytes);
    if carried < exact || carried >= exact + crate::units::Rational::from_integer(messages.max(1)) {
        return Err(Error::bad(format!(
            "the traces' {messages} sends carry {bytes} bytes but the schedule's transfers carry {} (each message may round up by less than a byte)",
            exact_bytes(&exact)
        )));
    }
    crate::export::write_chakra_traces(dir, stem, &traces, c.kind)?;
    let rounding = if carried == exact {
        "as the schedule's transfers do".to_string()
    } else {
        format!("the schedule's transfers {}, each message rounded up to whole bytes", exact_bytes(&exact))
    };
    println!(
        "wrote {} for {} rank{} and {}; {messages} send{} carry {bytes} bytes in all, {rounding}",
        dir.join(format!("{stem}.<rank>.et")).display(),
        traces.len(),
        crate::units::plural(traces.len() as u64),
        dir.join(format!("{stem}.system.json")).display(),
        crate::units::plural(messages as u64)
    );
    Ok(ExitCode::Ok)
}

/// A total of bytes exactly: an integer, or a whole number and a fraction (`7 1/3`), never
/// through f64, which rounds totals beyond 2^53.
fn exact_bytes(r: &crate::units::Rational) -> String {
    let whole = r.floor();
    let rest = r - whole;
    if rest == crate::units::Rational::from_integer(0) {
        whole.to_integer().to_string()
    } else {
        format!("{} {}/{}", whole.to_integer(), rest.numer(), rest.denom())
    }
}

/// SCCL's algorithm JSON, `DIR/STEM.msccl.json` (msccl-tools' own ending for algorithms): what
/// its `ncclize` lowers. The algorithm meets every rule of the format before it is written.
fn sccl_json(s: &crate::schedule::Schedule, dir: &Path, stem: &str) -> Result<ExitCode> {
    let export = crate::export::sccl::sccl_algorithm(s)?;
    let text = crate::export::sccl::sccl_json(&export.algorithm);
    let out = dir.join(format!("{stem}.msccl.json"));
    crate::io::write_atomic(&out, |w| std::io::Write::write_all(w, text.as_bytes()).map_err(crate::io::write_error(&out)))?;
    let c = &export.coordinates;
    let unit = export.unit_gbps.map(|u| format!("one unit of link multiplicity = {u} GB/s")).unwrap_or_else(|| "no links".into());
    println!(
        "wrote {}: SCCL algorithm {}: {} steps, {} rounds, {} chunks; {unit}; latencies are not part of the format; it meets every rule of docs/design/FORMATS.md \"SCCL algorithm JSON\"",
        out.display(),
        export.algorithm.name,
        c.steps,
        c.rounds,
        c.chunks
    );
    Ok(ExitCode::Ok)
}

#[cfg(test)]
mod tests {
    use super::exact_bytes;
    use crate::units::Rational;

    #[test]
    fn byte_totals_are_printed_exactly() {
        // 3 x (2^64 - 1), beyond f64's 2^53, and a fraction of a byte.
        let three = Rational::from_integer(3 * (u64::MAX as i128));
        assert_eq!(exact_bytes(&three), "55340232221128654845");
        assert_eq!(exact_bytes(&Rational::new(22, 3)), "7 1/3");
        assert_eq!(exact_bytes(&Rational::from_integer(0)), "0");
    }
}
