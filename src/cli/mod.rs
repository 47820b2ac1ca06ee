//! The command line (docs/design/CLI.md): subcommands, their output, and their exit codes.

mod export;
mod flags;
mod interrupt;
pub mod progress;
mod proof;
mod sccl;
mod sweep;
mod synth;
mod xml;

pub use flags::SpecFlags;
pub use interrupt::clean_up_on_signals;

use crate::error::{Error, ExitCode, Result};
use crate::spec::{MethodSpec, Spec};
use crate::topology::LinkId;
use crate::units::{format_ns, plural, to_f64};
use crate::verify::{verify_file_with, Report, Rule, VerifyOptions};
use clap::{Parser, Subcommand};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Synthesize and verify collective-communication schedules on torus and fat-tree networks.
#[derive(Debug, Parser)]
#[command(name = "collsched", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
// Parsed once per run: the size difference between variants costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a schedule file against the rules of docs/design/MODEL.md section 4 (and a spec's `expect`).
    ///
    /// Example: collsched verify out/ring8.json --spec specs/ring8_halfring.json
    #[command(
        after_help = "Exit codes: 0 valid, 1 a rule fails (one line per failure), 2 unreadable file or invalid header, 4 an MSCCL XML file too large to look for data races in (not proven).\n\nExamples:\n  collsched verify out/torus4x4x4_halfring_dimrotation.json --spec specs/torus4x4x4_halfring_dimrotation.json\n  collsched verify allreduce_ring.xml --rendezvous"
    )]
    Verify {
        /// The schedule file (collsched JSON), an SCCL algorithm JSON (by its keys), or MSCCL XML
        /// (by its `.xml` extension).
        schedule: PathBuf,
        /// A spec: the schedule must be for its instance; its `expect` is asserted. For an SCCL
        /// file it gives the topology's bandwidths and latencies and the bytes per rank.
        #[arg(long)]
        spec: Option<PathBuf>,
        /// Print the report as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Keep at most this many diagnostics per rule (all are counted).
        #[arg(long, default_value_t = 20)]
        max_diagnostics: usize,
        /// Also report the peak number of pieces a node holds that are bound elsewhere (slower).
        #[arg(long)]
        peak_holdings: bool,
        /// For an MSCCL XML file: judge it under rendezvous (no buffering, the strict answer)
        /// instead of the runtime's buffering (8 slots per connection, 4 per chunk).
        #[arg(long)]
        rendezvous: bool,
    },
    /// Run the algorithm a spec names and write the schedule file (verified before it is written).
    #[command(
        after_help = "Exit codes: 0 written, 1 the generated schedule fails verification (a generator bug; written for inspection), 2 bad input, 3 the faults cut a rank off or the algorithm cannot run on them.\n\nExample:\n  collsched generate specs/torus4x4x4_halfring_dimrotation.json -o out/torus4x4x4_halfring_dimrotation.json"
    )]
    Generate {
        /// The spec (with `method.generate`); or build one with the flags below.
        spec: Option<PathBuf>,
        /// Shorthand flags that build a spec.
        #[command(flatten)]
        flags: SpecFlags,
        /// Where to write the schedule (default: `out/SPEC_NAME.json`, `out/schedule.json` when flags build the spec).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Also draw the topology with its failed links marked.
        #[arg(long, value_name = "OUT.svg")]
        topology_svg: Option<PathBuf>,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compute the lower bounds of docs/design/MODEL.md section 6 (steps, latency, volume, cut, flow) and write their certificate.
    #[command(
        after_help = "Exit codes: 0, 2 bad input, 3 a rank cut off.\n\nExamples:\n  collsched bound specs/torus4x4x4_matee_one_cable.json\n  collsched bound specs/ring8_halfring.json --certificate proofs/ring8_halfring.cert.json --schedule out/ring8_halfring.json\n  collsched bound --torus 4x4x4 --fail \"(0,0,0)-(1,0,0)\" --bytes 8MiB --certificate out/pod.cert.json"
    )]
    Bound {
        /// The spec; or build one with the flags below (with `--certificate OUT.cert.json` the
        /// built spec is written beside it as `OUT.spec.json`, which the certificate names).
        spec: Option<PathBuf>,
        /// Shorthand flags that build a spec.
        #[command(flatten)]
        flags: SpecFlags,
        /// Write the certificate here.
        #[arg(long, value_name = "OUT")]
        certificate: Option<PathBuf>,
        /// Attach this schedule's step-synchronous times (and whether it is bandwidth-optimal).
        #[arg(long)]
        schedule: Option<PathBuf>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Solve for a contention-free schedule for the spec's topology, faults and collective; print
    /// the bound, the gap and whether optimality is certified.
    #[command(
        after_help = "Exit codes: 0 found, 2 bad input, 3 infeasible (which rank is cut off), 4 time limit reached (best found written, gap printed).\n\nExamples:\n  collsched synthesize specs/torus4x4x4_matee_one_cable.json -o out/synth.json\n  collsched synthesize --torus 5 --fail 0-1 --objective steps -o out/ring5.json\n  collsched synthesize --torus 4x4 --fail \"(0,0)-(1,0)\" --bytes 8MiB --pareto"
    )]
    Synthesize {
        /// The spec; or build one with the flags below.
        spec: Option<PathBuf>,
        /// Shorthand flags that build a spec.
        #[command(flatten)]
        flags: SpecFlags,
        /// Where to write the schedule.
        #[arg(short, long, default_value = "out/synthesized.json")]
        output: PathBuf,
        /// `time`: the best step-synchronous time at the spec's size; `event`: the best
        /// event-driven time; `steps`: the fewest steps.
        #[arg(long, default_value = "time")]
        objective: crate::synth::portfolio::Objective,
        /// auto, ilp (microlp), smt (z3), or highs (cargo feature `highs`); default the spec's
        /// `method.synthesize.solver` or auto.
        #[arg(long)]
        solver: Option<crate::synth::Solver>,
        /// Seconds for the whole search (default the spec's time_limit_s, or 60).
        #[arg(long)]
        time_limit: Option<f64>,
        /// Also list the steps/time trade-off: the verified candidates that no other beats in
        /// both steps and time (over pieces per block and horizons).
        #[arg(long)]
        pareto: bool,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write what runtimes run: lower to per-rank programs, check rule 6, write MSCCL XML and
    /// re-check it with the reader's acceptance rules and a chunk-level simulation.
    #[command(
        after_help = "Exit codes: 0 written, 2 bad input (or a schedule that cannot be exported).\n\nExamples:\n  collsched export out/torus4x4_foldedring_fault.json --to msccl-xml -o out/xml\n  collsched export out/synthesized.json --to sccl-json -o out/sccl"
    )]
    Export {
        /// The schedule file.
        schedule: PathBuf,
        /// The format: msccl-xml, chakra-et (one trace per rank for ASTRA-sim), or sccl-json
        /// (msccl-tools' algorithm file, `OUT/STEM.msccl.json`, which its ncclize lowers).
        #[arg(long, value_name = "FORMAT")]
        to: String,
        /// The folder to write into.
        #[arg(short, long, default_value = "out")]
        output: PathBuf,
        /// Channels of the lowering, 1 to 32 (the MSCCL readers' `nchannels`), for msccl-xml and
        /// chakra-et (default: for msccl-xml the fewest, from 1, whose XML the reader accepts; for
        /// chakra-et 1).
        #[arg(long)]
        channels: Option<usize>,
        /// Write the older MSCCL runtime's dialect (what msccl-tools 2.3 writes: no outofplace,
        /// reduce_scatter spelled so) instead of msccl-executor-nccl's.
        #[arg(long)]
        legacy: bool,
    },
    /// Re-check certificates without any solver.
    #[command(subcommand)]
    Proof(ProofCommand),
    /// A fault library: a verified, certified schedule for every fault of a family (every cable,
    /// every pair of cables, every TPUv4 OCS), one synthesis per class of faults under the
    /// network's symmetries, and an index naming every fault.
    #[command(
        after_help = "Exit codes: 0 every class has a schedule, 2 bad input, 3 a class is infeasible (listed; the rest is written), 4 a class reached its time limit (its best schedule is written), 5 a file could not be written, 6 a mapped schedule failed its check (a bug).\n\nExamples:\n  collsched sweep --torus 8x8x8 --bytes 8MiB --faults cables --verify-members sample 8 -o out/sweep-8x8x8\n  collsched sweep --torus 4x4x4 --bytes 8MiB --faults pairs --time-limit 20 -o out/sweep-pairs\n  collsched sweep --torus 8x4x4 --faults ocs --shard 0/2 -o out/shard-0\n  collsched sweep merge out/shard-0 out/shard-1 -o out/sweep-ocs"
    )]
    Sweep(sweep::SweepArgs),
    /// Run the torus study's comparison (methods x tori x sizes) and write Markdown, CSV and SVG plots.
    #[command(
        after_help = "Exit codes: 0 written, 2 bad input, 3 a method of the study cannot run on a torus (named; nothing is written), 5 a file could not be written.\n\nExample:\n  collsched eval --out out/eval\n  collsched eval --tori 4x4,4x4x4 --out out/eval-small"
    )]
    Eval {
        /// Tori to compare, comma-separated (default: the study's 5x5, 5x5x5, 5x5x5x5).
        #[arg(long, default_value = "5x5,5x5x5,5x5x5x5")]
        tori: String,
        /// Folder for torus.md, torus.csv, fat_tree.md, fat_tree.csv and the plots.
        #[arg(long, default_value = "out/eval")]
        out: PathBuf,
        /// Also run the fat-tree table (the four reference trees, EP 32 and 64, pairwise and
        /// bruck under both routings, event-driven and step-synchronous).
        #[arg(long)]
        fat_trees: bool,
    },
    /// Print a schedule's step-synchronous cost: time, bandwidth, per-link and per-dimension use.
    #[command(
        after_help = "Exit codes: 0, 2 bad input (an unreadable file, or a schedule that breaks rule 1: it has no cost).\n\nExamples:\n  collsched cost out/torus4x4x4_halfring_dimrotation.json\n  collsched cost out/torus4x4x4_halfring_dimrotation.json --model event --json"
    )]
    Cost {
        /// The schedule file.
        schedule: PathBuf,
        /// `sync`: step-synchronous (exact; the model of the closed forms and the bounds).
        /// `event`: event-driven (ranks drift, links shared max-min fairly; what a runtime approaches).
        #[arg(long, default_value = "sync", value_parser = ["sync", "event"])]
        model: String,
        /// With `--model event`: links serve one transfer at a time, first come first served
        /// (as ASTRA-sim's congestion-aware analytical backend does) instead of fair sharing.
        #[arg(long)]
        fifo: bool,
        /// Also write the timeline picture (per-dimension and per-link utilization over time).
        #[arg(long, value_name = "OUT.svg")]
        svg: Option<PathBuf>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `collsched proof ...`.
#[derive(Debug, Subcommand)]
pub enum ProofCommand {
    /// Re-check certificates (files, or folders searched for *.json) with exact arithmetic: each
    /// claimed bound against its witness, the spec against its hash and instance, an attached
    /// schedule against its claimed cost.
    #[command(after_help = "Exit codes: 0 all hold, 1 one fails, 2 unreadable.\n\nExample:\n  collsched proof check proofs/")]
    Check {
        /// Certificate files or folders.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

/// Refuses a command whose output path is one of its inputs (the same file, by any name), or two
/// of whose outputs are one file, before anything is written: `io` refuses each write over a file
/// read, but a command with several outputs (a schedule and its picture) could have written the
/// first by then.
fn outputs_apart(cmd: &Command) -> Result<()> {
    let (outputs, inputs): (Vec<Option<&Path>>, Vec<Option<&Path>>) = match cmd {
        Command::Cost { schedule, svg, .. } => (vec![svg.as_deref()], vec![Some(schedule.as_path())]),
        Command::Generate { spec, output, topology_svg, .. } => (vec![output.as_deref(), topology_svg.as_deref()], vec![spec.as_deref()]),
        Command::Synthesize { spec, output, .. } => (vec![Some(output.as_path())], vec![spec.as_deref()]),
        Command::Bound { spec, certificate, schedule, .. } => (vec![certificate.as_deref()], vec![spec.as_deref(), schedule.as_deref()]),
        _ => return Ok(()),
    };
    let outputs: Vec<&Path> = outputs.into_iter().flatten().collect();
    for (i, a) in outputs.iter().enumerate() {
        if let Some(b) = outputs[..i].iter().find(|b| same_path(a, b)) {
            return Err(Error::bad(format!("{}: named for two outputs of this command ({} too); give each its own file", a.display(), b.display())));
        }
    }
    for out in outputs {
        for input in inputs.iter().flatten() {
            if crate::io::same_file(out, input) {
                return Err(crate::io::output_is_input(out, input));
            }
        }
    }
    Ok(())
}

/// Whether two output paths name one file: the same existing file, or the same name in the same
/// (existing) folder.
fn same_path(a: &Path, b: &Path) -> bool {
    let resolved = |p: &Path| match (p.parent().map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d }), p.file_name()) {
        (Some(dir), Some(name)) => dir.canonicalize().map(|d| d.join(name)).unwrap_or_else(|_| p.to_path_buf()),
        _ => p.to_path_buf(),
    };
    crate::io::same_file(a, b) || resolved(a) == resolved(b)
}

/// Runs the command line and returns the exit code.
pub fn run(cli: Cli) -> ExitCode {
    crate::io::guard_inputs();
    if let Err(e) = outputs_apart(&cli.command) {
        eprintln!("error: {e}");
        return e.exit_code();
    }
    let result = match cli.command {
        Command::Verify { schedule, spec, json, max_diagnostics, peak_holdings, rendezvous } => {
            verify(schedule, spec, json, max_diagnostics, peak_holdings, rendezvous)
        }
        Command::Cost { schedule, model, fifo, svg, json } => cost(schedule, &model, fifo, svg.as_deref(), json),
        Command::Generate { spec, flags, output, topology_svg, json } => generate(spec, flags, output, topology_svg, json),
        Command::Eval { tori, out, fat_trees } => eval(&tori, &out, fat_trees),
        Command::Bound { spec, flags, certificate, schedule, json } => match load_spec(spec.as_deref(), &flags, SynthFlags::default(), |_| Ok(())) {
            Ok(Some(spec)) => proof::bound(&spec, certificate.as_deref(), schedule.as_deref(), json),
            Ok(None) => Ok(ExitCode::Ok),
            Err(e) => Err(e),
        },
        Command::Proof(ProofCommand::Check { paths }) => proof::proof_check(&paths),
        Command::Synthesize { spec, flags, output, objective, solver, time_limit, pareto, json } => {
            match load_spec(spec.as_deref(), &flags, SynthFlags { solver, time_limit }, |spec| synth::options(spec, solver, time_limit).map(drop)) {
                Ok(Some(spec)) => synth::synthesize(&spec, &output, objective, solver, time_limit, pareto, json),
                Ok(None) => Ok(ExitCode::Ok),
                Err(e) => Err(e),
            }
        }
        Command::Export { schedule, to, output, channels, legacy } => export::export(&schedule, &to, &output, channels, legacy),
        Command::Sweep(args) => sweep::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e @ Error::Internal(_)) => {
            eprintln!("internal error (a bug in collsched {}; please report it with the command): {e}", env!("CARGO_PKG_VERSION"));
            e.exit_code()
        }
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// An algorithm bandwidth for people: a schedule that takes no time (one rank, nothing to move)
/// has none.
fn gbps(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3} GB/s")
    } else {
        "none (the schedule takes no time)".into()
    }
}

fn ns(r: &crate::units::Rational) -> f64 {
    to_f64(r)
}

fn verify(schedule: PathBuf, spec_path: Option<PathBuf>, json: bool, max_diagnostics: usize, peak_holdings: bool, rendezvous: bool) -> Result<ExitCode> {
    if schedule.extension().is_some_and(|e| e.eq_ignore_ascii_case("xml")) {
        return xml::verify_xml(&schedule, spec_path.as_deref(), json, max_diagnostics, rendezvous);
    }
    if rendezvous {
        return Err(Error::bad(format!("{}: --rendezvous applies to MSCCL XML files (.xml) only", schedule.display())));
    }
    let spec = spec_path.as_deref().map(Spec::load).transpose()?;
    let instance = spec.as_ref().map(|s| s.instance()).transpose()?;
    let (options, conformance) =
        expectations(spec.as_ref(), VerifyOptions { max_diagnostics_per_rule: max_diagnostics, track_relays: peak_holdings, ..Default::default() });
    // Rules 6 and 7 always run, streamed with the others: rule 6 on the default lowering (one
    // channel, one threadblock per peer and direction, sends before receives within a step);
    // `expect.deadlock_free` asserts their outcome (below).
    let checks: Vec<Box<dyn crate::verify::Check>> = vec![
        Box::new(conformance),
        Box::new(crate::verify::RoutingDeadlock::new()),
        Box::new(crate::verify::DeadlockCheck::new(crate::lower::LowerOptions::default())),
    ];
    // An SCCL algorithm (by its top-level keys) is imported and its steps verified in memory.
    let (header, mut report, sccl) = if crate::export::sccl::is_sccl_json(&schedule)? {
        let (header, report, verdict) = sccl::verify_sccl(&schedule, instance, &options, checks)?;
        (header, report, Some(verdict))
    } else {
        let (header, report) = verify_with_progress(&schedule, &options, instance, checks)?;
        (header, report, None)
    };
    expect_deadlock(spec.as_ref(), &mut report.findings);
    let valid = report.is_valid() && sccl.as_ref().is_none_or(|v| v.problems.is_empty());
    if json {
        let mut out = report_json(&report, &header);
        if let Some(v) = &sccl {
            out["valid"] = json!(valid);
            out["sccl"] = json!({"problems": v.lines(), "rules_broken": crate::export::sccl::rules_broken(&v.problems), "algorithm": v.summary});
        }
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
    } else {
        for p in sccl.iter().flat_map(|v| v.lines()) {
            println!("{p}");
        }
        print_report(&report, &header, valid);
        if let Some(v) = &sccl {
            println!("{}; {}", v.line(), v.verdict());
        }
    }
    Ok(if valid { ExitCode::Ok } else { ExitCode::RuleFailed })
}

/// What a spec's `expect` asks of `verify`, for every format: `allow_contention` in the options,
/// the rest as the rule-8 check ([`crate::verify::Conformance`]).
pub(crate) fn expectations(spec: Option<&Spec>, options: VerifyOptions) -> (VerifyOptions, crate::verify::Conformance) {
    let expect = spec.map(|s| s.expect.clone()).unwrap_or_default();
    let options = VerifyOptions { allow_contention: expect.allow_contention.unwrap_or(false), ..options };
    let conformance = crate::verify::Conformance::new(crate::verify::Expectations {
        bandwidth_optimal: expect.bandwidth_optimal,
        max_gap_pct: expect.max_gap_pct,
        max_steps: expect.max_steps,
    });
    (options, conformance)
}

/// `expect.deadlock_free` (FORMATS.md): `true` holds when rules 6 and 7 find nothing, which
/// their failures already say; `false` (a baseline that is meant to deadlock, such as
/// dimension-order routing on a ring) turns their failures into warnings and fails rule 8 when
/// they find nothing.
fn expect_deadlock(spec: Option<&Spec>, findings: &mut crate::verify::Findings) {
    use crate::verify::{Diagnostic, Rule};
    if spec.and_then(|s| s.expect.deadlock_free) != Some(false) {
        return;
    }
    let rules = [Rule::Deadlock, Rule::RoutingDeadlock];
    if rules.iter().any(|&r| findings.is_failed(r)) {
        findings.expect_failures_of(&rules);
    } else {
        findings.fail(Diagnostic {
            rule: Rule::BoundConformance,
            step: None,
            transfer: None,
            subject: None,
            message: "expect.deadlock_free = false, but rules 6 and 7 hold: the schedule is deadlock-free".into(),
        });
    }
}

/// Schedule files at least this large get a progress bar while `verify` reads them, then a spinner
/// while the checks at the end run (completion, bound conformance); smaller files take well under
/// a second.
const VERIFY_BAR_BYTES: u64 = 1 << 20;

/// [`crate::verify::verify_file_checked`], showing on a terminal, for a large file, the bytes and
/// steps read and then the final checks.
fn verify_with_progress(
    path: &std::path::Path,
    options: &VerifyOptions,
    instance: Option<crate::spec::Instance>,
    checks: Vec<Box<dyn crate::verify::Check>>,
) -> Result<(crate::schedule::ScheduleHeader, Report)> {
    let mut verifier = crate::verify::Verifier::new(options.clone());
    if let Some(inst) = instance {
        verifier = verifier.against(inst);
    }
    for c in checks {
        verifier = verifier.with_check(c);
    }
    let file = crate::io::open(path)?.into_inner();
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = if size >= VERIFY_BAR_BYTES { progress::Bar::bytes(size, "verify") } else { progress::Bar::hidden() };
    // The bar counts the stored bytes below the buffer (compressed ones for a .zst file), so it
    // moves once per buffer fill.
    let reader = crate::io::decoded(path, std::io::BufReader::with_capacity(1 << 20, bar.reader(file)))?;
    let mut sink = StepsRead { inner: &mut verifier, bar: &bar, drawn: bar.is_drawn(), steps: 0 };
    let header = crate::schedule::stream_schedule(reader, &path.display().to_string(), &mut sink)?;
    let steps = sink.steps;
    bar.finish();
    let spinner = if size >= VERIFY_BAR_BYTES { progress::Bar::spinner("verify") } else { progress::Bar::hidden() };
    spinner.set_message(format!("steps read: {steps}; checking completion"));
    let report = verifier.finish().map_err(|e| e.context(path.display()))?;
    spinner.finish();
    Ok((header, report))
}

/// Passes a schedule on to another sink and shows on a bar how many steps went by.
struct StepsRead<'a> {
    inner: &'a mut dyn crate::schedule::StepSink,
    bar: &'a progress::Bar,
    drawn: bool,
    steps: usize,
}

impl crate::schedule::StepSink for StepsRead<'_> {
    fn begin(&mut self, header: &crate::schedule::ScheduleHeader) -> Result<()> {
        self.inner.begin(header)
    }
    fn step(&mut self, index: usize, step: crate::schedule::Step) -> Result<()> {
        self.inner.step(index, step)?;
        self.steps = index + 1;
        if self.drawn {
            self.bar.set_message(format!("steps read: {}", self.steps));
        }
        Ok(())
    }
}

fn report_json(r: &Report, header: &crate::schedule::ScheduleHeader) -> serde_json::Value {
    let s = &r.stats;
    let counts: serde_json::Map<String, serde_json::Value> =
        crate::verify::Rule::ALL.iter().map(|&rule| (format!("rule{}", rule.number()), json!(r.findings.failures_of(rule)))).collect();
    json!({
        "valid": r.is_valid(),
        "failures": r.findings.failures().iter().map(|d| json!({
            "rule": d.rule.number(), "rule_name": d.rule.name(), "step": d.step, "transfer": d.transfer,
            "subject": d.subject, "message": d.message, "text": d.to_string()})).collect::<Vec<_>>(),
        "failure_counts": counts,
        "warnings": r.findings.warnings().iter().map(|d| d.to_string()).collect::<Vec<_>>(),
        "stats": {
            "steps": s.steps, "transfers": s.transfers, "single_hop_transfers": s.single_hop_transfers,
            "longest_path": s.longest_path, "piece_hops": s.piece_hops, "wasted_copies": s.wasted_copies, "empty_transfers": s.empty_transfers,
            "peak_relay": s.peak_relay.map(|(n, c, st)| json!({"node": n.0, "name": header.topology.node(n).name, "pieces": c, "step": st})),
        },
        // A schedule that breaks rule 1 has no cost (CLI.md `cost`): `null`, as the text prints none.
        "cost": r.cost.as_ref().filter(|_| r.findings.failures_of(Rule::Structure) == 0).map(|c| json!({
            "model": "sync", "time_ns": ns(&c.time_ns()), "bandwidth_term_ns": ns(&c.bandwidth_ns()),
            "latency_term_ns": ns(&c.latency_ns()), "algo_bandwidth_gbps": c.algo_bandwidth_gbps()})),
    })
}

/// Prints a verification report; `valid` is the whole verdict (an SCCL file's own rules too), so
/// that a file called invalid is never first called valid.
fn print_report(r: &Report, header: &crate::schedule::ScheduleHeader, valid: bool) {
    for d in r.findings.failures() {
        println!("{d}");
    }
    for line in r.findings.unshown_failures() {
        println!("{line}");
    }
    let s = &r.stats;
    let verdict = if valid { "valid" } else { "INVALID" };
    println!(
        "{verdict}: {} {} over {} ranks; {} steps, {} transfers ({} single-hop, longest path {} links), {} piece-hops",
        header.collective.kind,
        crate::units::format_bytes(header.collective.bytes_per_rank),
        header.collective.num_ranks(),
        s.steps,
        s.transfers,
        s.single_hop_transfers,
        s.longest_path,
        s.piece_hops
    );
    let contention = r.findings.warnings_of(crate::verify::Rule::LinkSharing);
    if contention > 0 {
        println!("contention allowed by the spec: {contention} link shares (rule 2 reported, not failed)");
    }
    // A deadlock the spec expects (`expect.deadlock_free = false`) is reported, not failed.
    let deadlock_rules = [crate::verify::Rule::Deadlock, crate::verify::Rule::RoutingDeadlock];
    for d in r.findings.warnings().iter().filter(|d| deadlock_rules.contains(&d.rule)) {
        println!("expected by the spec (expect.deadlock_free = false), reported, not failed: {d}");
    }
    if s.wasted_copies > 0 {
        println!("wasted copies: {} (a copy of a value the receiver already held)", s.wasted_copies);
    }
    if s.empty_transfers > 0 {
        println!("transfers carrying no piece: {} (each holds its path's links for its step and delivers nothing)", s.empty_transfers);
    }
    if let Some((n, c, st)) = s.peak_relay {
        println!("peak holdings of pieces bound elsewhere: {c} pieces at node {n} {} (start of step {st})", header.topology.node(n).name);
    }
    if let (Some(c), true) = (&r.cost, r.is_valid()) {
        println!(
            "step-synchronous time {} (bandwidth term {} + latency term {}), bandwidth (bytes per rank / time) {}",
            format_ns(ns(&c.time_ns())),
            format_ns(ns(&c.bandwidth_ns())),
            format_ns(ns(&c.latency_ns())),
            gbps(c.algo_bandwidth_gbps())
        );
    }
}

fn cost(schedule: PathBuf, model: &str, fifo: bool, svg: Option<&std::path::Path>, json: bool) -> Result<ExitCode> {
    if fifo && model != "event" {
        return Err(Error::bad("--fifo applies to --model event"));
    }
    // Every model costs the transfers as written: a schedule that breaks rule 1 (a link, node or
    // piece that does not exist, a path that is no walk) has no cost, and is refused as `export`
    // refuses it rather than costed without what it cannot place. Sharing a link (rule 2) is what
    // the models price, and is allowed.
    let options = VerifyOptions { allow_contention: true, track_relays: false, ..Default::default() };
    // The picture and the event-driven model need the schedule in memory, read once; the
    // step-synchronous cost alone streams it.
    let held = if svg.is_some() || model == "event" { Some(crate::schedule::read_schedule_file(&schedule)?) } else { None };
    let (header, report) = match &held {
        Some(s) => (s.header.clone(), crate::verify::verify_schedule(s, &options).map_err(|e| e.context(schedule.display()))?),
        None => verify_file_with(&schedule, &options, None)?,
    };
    if report.findings.failures_of(crate::verify::Rule::Structure) > 0 {
        let first = report.findings.failures().iter().find(|d| d.rule == crate::verify::Rule::Structure).map(|d| d.to_string()).unwrap_or_default();
        return Err(Error::bad(format!("{}: the schedule breaks rule 1, nothing to cost: {first}", schedule.display())));
    }
    if let (Some(out), Some(s)) = (svg, &held) {
        let meta = |k: &str| s.header.meta.as_ref().and_then(|m| m.get(k)).and_then(|a| a.as_str()).map(str::to_string);
        let method = [meta("algorithm"), meta("scheduler")].into_iter().flatten().collect::<Vec<_>>().join(" + ");
        let name = schedule.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let title = if method.is_empty() { name } else { format!("{method}: {name}") };
        let picture = crate::pictures::timeline_svg(s, &title, 512);
        crate::io::write_atomic(out, |w| std::io::Write::write_all(w, picture.as_bytes()).map_err(crate::io::write_error(out)))?;
        eprintln!("wrote {}", out.display());
    }
    let c = report.cost.expect("a read schedule has a cost");
    let t = &header.topology;
    // The model's time: utilization is each link's busy time (its bytes at its bandwidth) over it.
    let event = match (model == "event", &held) {
        (true, Some(s)) => Some(crate::cost::event_cost(s, fifo)?),
        _ => None,
    };
    let total = event.as_ref().map_or_else(|| ns(&c.time_ns()), |e| e.time_ns);
    let utilization = |busy: f64, links: usize| if total > 0.0 { busy / (links as f64 * total) } else { 0.0 };
    // Per link group, over its links that are up (a failed link carries nothing and offers no
    // capacity); its bytes summed exactly (a float sum rounds past 2^53 bytes). Per link, those
    // that are up, busiest first (ties by id).
    let mut groups: std::collections::BTreeMap<String, (f64, collsched_checker::Q, usize)> = Default::default();
    let mut links: Vec<(LinkId, f64)> = Vec::new();
    for (id, l) in t.links().filter(|(_, l)| l.up) {
        let busy = ns(&c.link_bytes[id.index()]) / l.bandwidth_gbps;
        let g = groups.entry(l.class.group_label()).or_default();
        g.0 += busy;
        g.1 += crate::units::to_checker(&c.link_bytes[id.index()]);
        g.2 += 1;
        links.push((id, busy));
    }
    links.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if json {
        let per_group: serde_json::Map<String, serde_json::Value> = groups
            .iter()
            .map(|(k, (busy, bytes, n))| {
                let bytes = crate::bounds::certified::q_to_f64(bytes).unwrap_or(f64::MAX);
                (k.clone(), json!({"links": n, "bytes": bytes, "utilization": utilization(*busy, *n)}))
            })
            .collect();
        let per_link: Vec<_> = links
            .iter()
            .map(|&(id, busy)| {
                let l = t.link(id);
                let (src, dst) = (&t.node(l.src).name, &t.node(l.dst).name);
                json!({"link": id.0, "src": src, "dst": dst, "group": l.class.group_label(), "bytes": ns(&c.link_bytes[id.index()]), "utilization": utilization(busy, 1)})
            })
            .collect();
        let mut out = match &event {
            Some(e) => {
                json!({"model": "event", "link_sharing": if fifo { "fifo" } else { "fair" }, "time_ns": e.time_ns, "algo_bandwidth_gbps": e.algo_bandwidth_gbps()})
            }
            None => {
                let per_step: Vec<_> =
                    c.step_bandwidth_ns.iter().zip(&c.step_latency_ns).map(|(b, l)| json!({"bandwidth_ns": ns(b), "latency_ns": ns(l)})).collect();
                json!({
                    "model": "sync", "time_ns": total, "bandwidth_term_ns": ns(&c.bandwidth_ns()), "latency_term_ns": ns(&c.latency_ns()),
                    "algo_bandwidth_gbps": c.algo_bandwidth_gbps(), "steps": per_step.len(), "per_step": per_step,
                })
            }
        };
        out["per_group"] = per_group.into();
        out["per_link"] = per_link.into();
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        return Ok(ExitCode::Ok);
    }
    match &event {
        Some(e) => println!(
            "event-driven time ({} link sharing) {}, bandwidth (bytes per rank / time) {}",
            if fifo { "fifo" } else { "fair" },
            format_ns(e.time_ns),
            gbps(e.algo_bandwidth_gbps())
        ),
        None => println!(
            "step-synchronous time {} (bandwidth term {}, latency term {}) over {} steps; bandwidth (bytes per rank / time) {}",
            format_ns(total),
            format_ns(ns(&c.bandwidth_ns())),
            format_ns(ns(&c.latency_ns())),
            c.step_bandwidth_ns.len(),
            gbps(c.algo_bandwidth_gbps())
        ),
    }
    println!("{:<10} {:>6} {:>16} {:>12}", "links", "count", "bytes", "utilization");
    for (k, (busy, bytes, n)) in &groups {
        println!("{k:<10} {n:>6} {:>16} {:>11.1}%", collsched_checker::show_q(bytes), 100.0 * utilization(*busy, *n));
    }
    let shown = links.len().min(BUSIEST_LINKS_SHOWN);
    let more = if shown < links.len() { format!(" of {} (--json lists every link)", links.len()) } else { String::new() };
    println!("busiest links ({shown}{more}):");
    for &(id, busy) in &links[..shown] {
        println!(
            "  {:<40} {:>16} {:>11.1}%",
            t.describe_link(id),
            collsched_checker::show_q(&crate::units::to_checker(&c.link_bytes[id.index()])),
            100.0 * utilization(busy, 1)
        );
    }
    Ok(ExitCode::Ok)
}

/// The busiest links `cost` prints (`--json` lists them all).
const BUSIEST_LINKS_SHOWN: usize = 8;

/// The flags of a command that map to `method.synthesize` (`--solver`, `--time-limit`), which
/// `--print-spec` writes into the spec it prints.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SynthFlags {
    /// `--solver`.
    pub solver: Option<crate::synth::Solver>,
    /// `--time-limit`.
    pub time_limit: Option<f64>,
}

impl SynthFlags {
    /// `spec` with these flags written into its `method.synthesize` (over the spec's own values;
    /// unchanged when neither flag was given).
    fn apply(&self, spec: &Spec) -> Spec {
        let mut spec = spec.clone();
        if self.solver.is_some() || self.time_limit.is_some() {
            let (solver, secs) = match &spec.method {
                Some(MethodSpec::Synthesize(s)) => (s.solver, s.time_limit_s),
                _ => (crate::synth::Solver::Auto, None),
            };
            spec.method =
                Some(MethodSpec::Synthesize(crate::spec::SynthesizeSpec { solver: self.solver.unwrap_or(solver), time_limit_s: self.time_limit.or(secs) }));
        }
        spec
    }
}

/// The spec from a file or from shorthand flags (not both). With `--print-spec` it is printed
/// (with the command's `synth` flags written into it) and `None` returned, once `check`, the
/// command's own check of its input before it does any work, and the instance accept it: a spec
/// the command would refuse as bad input is refused here with the command's message, and nothing
/// is printed (a rank the faults cut off, or a method that cannot run on them, is the instance's,
/// not the spec's: the spec is printed).
fn load_spec(path: Option<&std::path::Path>, flags: &SpecFlags, synth: SynthFlags, check: impl FnOnce(&Spec) -> Result<()>) -> Result<Option<Spec>> {
    let spec = match (path, flags.any()) {
        (Some(_), true) => return Err(Error::bad("give a spec file or shorthand flags, not both")),
        (Some(p), false) => Spec::load(p)?,
        (None, _) => flags.build()?,
    };
    if flags.print_spec {
        if let Err(e @ Error::BadInput(_)) = check(&spec).and_then(|()| spec.instance().map(drop)) {
            return Err(e);
        }
        println!("{}", synth.apply(&spec).to_json_string());
        return Ok(None);
    }
    Ok(Some(spec))
}

fn generate(spec_path: Option<PathBuf>, flags: SpecFlags, output: Option<PathBuf>, topology_svg: Option<PathBuf>, json: bool) -> Result<ExitCode> {
    // The command's checks of a spec are made as it generates (the pieces an algorithm cuts a
    // block into are known once it ran): `--print-spec` generates, and prints what generates.
    let check = |spec: &Spec| crate::generate::from_spec(spec).map(drop);
    let Some(spec) = load_spec(spec_path.as_deref(), &flags, SynthFlags::default(), check)? else { return Ok(ExitCode::Ok) };
    let schedule = crate::generate::from_spec(&spec)?;
    // The picture and the schedule appear together or not at all: a schedule that cannot be
    // written takes the picture written before it away.
    let files = crate::io::OutputSet::new();
    if let Some(out) = &topology_svg {
        let title = spec.description.clone().unwrap_or_else(|| "topology".into());
        let picture = crate::pictures::topology_svg(&schedule.header.topology, &title.chars().take(90).collect::<String>());
        files.write_bytes(out, picture.as_bytes())?;
    }
    let out = output.unwrap_or_else(|| {
        let stem = spec_path.as_ref().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "schedule".into());
        PathBuf::from("out").join(format!("{stem}.json"))
    });
    // Routings that share links by design (dimension-order and fault-aware hardware routing,
    // single-path routing through switches) are written and costed: their rule-2 sharing is a
    // note, not a failure (docs/design/MODEL.md rule 2).
    let by_design = matches!(&spec.method, Some(MethodSpec::Generate(g)) if crate::generate::shares_links_by_design(g));
    let options = VerifyOptions { allow_contention: by_design || spec.expect.allow_contention.unwrap_or(false), ..Default::default() };
    let report = crate::verify::verify_schedule(&schedule, &options)?;
    for d in report.findings.failures() {
        eprintln!("{d}");
    }
    let shared = report.findings.warnings_of(Rule::LinkSharing) + report.findings.failures_of(Rule::LinkSharing);
    if by_design && shared > 0 {
        eprintln!("note: {shared} links shared within a step (rule 2), by design of this routing; `collsched cost --model event` prices the contention");
    }
    files.write_encoded(&out, |w| crate::schedule::write_schedule(w, &schedule).map(drop).map_err(crate::io::write_error(&out)))?;
    files.commit()?;
    let c = report.cost.as_ref().expect("verification computes the cost");
    if json {
        println!(
            "{}",
            json!({"output": out, "valid": report.is_valid(), "steps": report.stats.steps, "transfers": report.stats.transfers,
                   "pieces": schedule.header.collective.pieces, "piece_hops": report.stats.piece_hops,
                   "time_ns": ns(&c.time_ns()), "bandwidth_term_ns": ns(&c.bandwidth_ns()), "meta": schedule.header.meta})
        );
    } else {
        println!(
            "wrote {}: {} step{}, {} transfer{}, {}, {} piece-hop{}; step-synchronous time {} (bandwidth term {})",
            out.display(),
            report.stats.steps,
            plural(report.stats.steps as u64),
            report.stats.transfers,
            plural(report.stats.transfers as u64),
            crate::units::per_block(schedule.header.collective.pieces),
            report.stats.piece_hops,
            plural(report.stats.piece_hops as u64),
            format_ns(ns(&c.time_ns())),
            format_ns(ns(&c.bandwidth_ns()))
        );
    }
    if let Some(svg) = &topology_svg {
        eprintln!("wrote {}", svg.display());
    }
    if !report.is_valid() {
        eprintln!("error: the generated schedule fails verification (a bug in the generator; the file was written for inspection)");
        return Ok(ExitCode::RuleFailed);
    }
    Ok(ExitCode::Ok)
}

fn eval(tori: &str, out: &std::path::Path, fat_trees: bool) -> Result<ExitCode> {
    let all: Vec<Vec<usize>> = tori
        .split(',')
        .map(|t| t.trim().split('x').map(|d| d.parse::<usize>().map_err(|_| Error::bad(format!("--tori {tori}: `{t}` is not like 5x5x5")))).collect())
        .collect::<Result<_>>()?;
    // One torus is one table, one plot and one file name: listed twice it is a slip.
    if let Some(twice) = all.iter().enumerate().find_map(|(i, d)| all[..i].contains(d).then_some(d)) {
        let name = twice.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        return Err(Error::bad(format!("--tori {tori}: {name} is listed twice")));
    }
    let methods = &crate::eval::TORUS_METHODS;
    let rows = all.len() * methods.len() + if fat_trees { crate::eval::fat_tree_rows() } else { 0 };
    let bar = progress::Bar::new(rows as u64, "eval");
    let mut progress = |p: crate::eval::StudyProgress| match p {
        crate::eval::StudyProgress::Started(what) => bar.set_message(what.to_string()),
        crate::eval::StudyProgress::Finished => bar.inc(1),
    };
    // Every file of the study appears once all were written, or none does.
    let files = crate::io::OutputSet::new();
    let md = crate::eval::torus_study(&all, methods, out, &files, &mut progress)?;
    let fat_tree_md = if fat_trees { Some(crate::eval::fat_tree_study(out, &files, &mut progress)?) } else { None };
    files.commit()?;
    bar.println(format!("wrote {}/torus.md, torus.csv and one SVG per torus", out.display()));
    if fat_tree_md.is_some() {
        bar.println(format!("wrote {}/fat_tree.md and fat_tree.csv", out.display()));
    }
    bar.finish();
    println!("{md}");
    if let Some(md) = fat_tree_md {
        println!("{md}");
    }
    Ok(ExitCode::Ok)
}
