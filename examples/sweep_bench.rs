//! Benchmark: fault libraries (`collsched sweep`) for 8 MiB all-to-all at 32 GB/s and 100 ns:
//! every single cable of 8x8x8 (1,536 faults, a sample of mapped members verified) and every
//! pair of cables of 4x4x4 (18,336 faults).
//!
//! ```text
//! cargo run --release --example sweep_bench -- [WHICH] [LIMIT_SECONDS] [OUT_DIR]
//! ```
//!
//! `WHICH` is `cables-8x8x8`, `pairs-4x4x4` or `all` (default); `LIMIT_SECONDS` is the synthesis
//! time limit per class (default 60 for 8x8x8, 20 for the pairs); `OUT_DIR` (default
//! `out/sweep_bench`) receives one folder per sweep. Prints, per sweep, the faults, the classes,
//! how they ended, the worst and median gap to the certified bound, the mapped members verified
//! and the wall time of the whole sweep (planning, synthesis, certificates, files), then the
//! seconds the classes spent in each stage (summed over classes, which run in parallel).

use collsched::spec::Spec;
use collsched::sweep::{ClassStatus, FaultFamily, MemberCheck, Plan, SweepEvent, SweepSetup};
use collsched::synth::SynthOptions;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn spec(dims: &str) -> Spec {
    let text = format!(
        r#"{{"topology": {{"torus": {{"dims": {dims}, "bandwidth_gbps": 32.0, "latency_ns": 100.0}}}}, "collective": {{"kind": "all_to_all", "bytes_per_rank": "8MiB"}}}}"#
    );
    Spec::parse(&text, "sweep_bench").expect("a valid spec")
}

/// Per class: its current stage and since when; per stage: seconds summed over classes.
type StageClock = (HashMap<usize, (&'static str, Instant)>, BTreeMap<&'static str, f64>);

fn sweep(name: &str, dims: &str, family: FaultFamily, limit: f64, members: MemberCheck, out: &std::path::Path) {
    let started = Instant::now();
    let setup =
        SweepSetup { base: spec(dims), family, synth: SynthOptions { time_limit: Duration::from_secs_f64(limit), ..Default::default() }, members, seed: 0 };
    let plan = Plan::new(setup).expect("a sweep plan");
    let planned = started.elapsed().as_secs_f64();
    let dir = out.join(name);
    let clock: Mutex<StageClock> = Mutex::default();
    let progress = |e: SweepEvent| {
        let (class, stage) = match &e {
            SweepEvent::Working { class, what } => (*class, stage_of(what)),
            SweepEvent::Finished { class } => (*class, "finished"),
        };
        let mut guard = clock.lock().expect("no panic while the clock is held");
        let (current, totals) = &mut *guard;
        match current.get(&class) {
            Some(&(was, _)) if was == stage => {}
            previous => {
                if let Some(&(was, since)) = previous {
                    *totals.entry(was).or_default() += since.elapsed().as_secs_f64();
                }
                current.insert(class, (stage, Instant::now()));
            }
        }
    };
    let index = plan.run(None, &dir, &progress).expect("the sweep runs");
    let seconds = started.elapsed().as_secs_f64();
    let mut gaps: Vec<f64> = index.faults.iter().filter_map(|f| f.gap).collect();
    gaps.sort_by(f64::total_cmp);
    let status = |s: ClassStatus| index.classes.iter().filter(|c| c.status == s).count();
    let pct = |g: Option<&f64>| g.map_or("-".into(), |g| format!("{:.2}%", 100.0 * g));
    println!(
        "| {name} | {} | {} | {} / {} / {} | {} | {} | {} | {limit} s | {planned:.1} s | {seconds:.1} s |",
        index.faults.len(),
        index.classes.len(),
        status(ClassStatus::Ok),
        status(ClassStatus::LimitReached),
        status(ClassStatus::Infeasible),
        pct(gaps.last()),
        pct(gaps.get(gaps.len().saturating_sub(1) / 2)),
        index.faults.iter().filter(|f| f.verified == Some(true)).count(),
    );
    let totals = &clock.lock().expect("the sweep is over").1;
    let stages: Vec<String> = totals.iter().map(|(stage, s)| format!("{stage} {s:.1} s")).collect();
    println!("|  | class seconds by stage: {} |", stages.join(", "));
}

/// The stage a progress message belongs to (the synthesis reports its candidates one by one).
fn stage_of(what: &str) -> &'static str {
    match what {
        "writing and certifying" => "writing and certifying",
        "checking members" => "checking members",
        _ => "synthesizing",
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().map(String::as_str).unwrap_or("all");
    let limit: Option<f64> = args.get(1).map(|s| s.parse().expect("LIMIT_SECONDS is a number"));
    let out = PathBuf::from(args.get(2).map(String::as_str).unwrap_or("out/sweep_bench"));
    println!(
        "| sweep | faults | classes | ok / limit reached / infeasible | worst gap | median gap | members verified | limit per class | planning | wall time |"
    );
    println!("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    if which == "all" || which == "cables-8x8x8" {
        sweep("cables-8x8x8", "[8, 8, 8]", FaultFamily::Cables, limit.unwrap_or(60.0), MemberCheck::Sample(8), &out);
    }
    if which == "all" || which == "pairs-4x4x4" {
        sweep("pairs-4x4x4", "[4, 4, 4]", FaultFamily::CablePairs, limit.unwrap_or(20.0), MemberCheck::Sample(2), &out);
    }
}
