//! Benchmark: the layered trees of `synth::trees` for 8 MiB all_gather, reduce_scatter and
//! all_reduce at 32 GB/s and 100 ns per link, on 4x4x4 and 8x8x8 tori, healthy and with the cable
//! (0,0,0)-(1,0,0) down, at every piece count the portfolio tries (`collsched::tree_piece_counts`).
//!
//! ```text
//! cargo run --release --example trees_bench -- [DIMS FAULTS KIND]
//! ```
//!
//! With no arguments it runs the reference instances above; with three, one instance, e.g.
//! `[16,16,16] '{"cables": [[[0,0,0],[1,0,0]]]}' all_gather` (`FAULTS` is the spec's `faults`,
//! `[]` for none). Prints per instance and piece count: the steps, the step-synchronous time (its
//! bandwidth term), the certified bound (bandwidth + latency) and the gap, the seconds the trees
//! took, and whether the schedule verifies (rules 1-5; skipped when the verifier's state would
//! exceed its limit). Synthesis end to end, with its wall time and peak memory, is measured on
//! the command line instead: `/usr/bin/time -v collsched synthesize --torus 16x16x16 --fail
//! "(0,0,0)-(1,0,0)" --collective all_reduce --bytes 8MiB --time-limit 280`.

use collsched::{
    certified_bounds_ns, to_f64, tree_piece_counts as piece_counts, tree_steps, verify_schedule, Collective, CollectiveKind, Error, Result, Schedule,
    ScheduleHeader, Spec, SyncMeter, VerifyOptions,
};
use std::time::{Duration, Instant};

const FAULT: &str = r#"{"cables": [[[0,0,0],[1,0,0]]]}"#;
const KINDS: [CollectiveKind; 3] = [CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    println!("| torus | faults | collective | pieces | steps | time (us) | bandwidth term (us) | bound (us) | gap | trees (s) | verified |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    match args.as_slice() {
        [] => {
            for (dims, faults) in [("[4,4,4]", "[]"), ("[4,4,4]", FAULT), ("[8,8,8]", "[]"), ("[8,8,8]", FAULT)] {
                for kind in KINDS {
                    instance(dims, faults, kind)?;
                }
            }
        }
        [dims, faults, kind] => {
            let kind = CollectiveKind::parse(kind).ok_or_else(|| Error::bad(format!("KIND = {kind}: all_gather, reduce_scatter or all_reduce")))?;
            instance(dims, faults, kind)?;
        }
        _ => return Err(Error::bad("usage: trees_bench [DIMS FAULTS KIND]")),
    }
    Ok(())
}

/// One row per piece count of the instance.
fn instance(dims: &str, faults: &str, kind: CollectiveKind) -> Result<()> {
    let text = format!(
        r#"{{"topology": {{"torus": {{"dims": {dims}, "bandwidth_gbps": 32.0, "latency_ns": 100.0}}}}, "faults": {faults}, "collective": {{"kind": "{}", "bytes_per_rank": "8MiB"}}}}"#,
        kind.as_str()
    );
    let inst = Spec::parse(&text, "trees_bench")?.instance()?;
    let t = &inst.topology;
    for pieces in piece_counts(t) {
        let c = Collective::new(kind, inst.collective.ranks.clone(), inst.collective.bytes_per_rank, pieces, None, t)?;
        let b = certified_bounds_ns(t, &c, Duration::from_secs(20))?;
        let bound = b.time.unwrap_or(f64::NAN);
        let started = Instant::now();
        let layered = tree_steps(t, &c, Instant::now() + Duration::from_secs(600))?.ok_or_else(|| Error::bad("the trees took over 600 s"))?;
        let seconds = started.elapsed().as_secs_f64();
        let s = Schedule { header: ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: None }, steps: layered.steps };
        let mut meter = SyncMeter::new(&s.header)?;
        s.steps.iter().for_each(|st| meter.step(st));
        let cost = meter.finish().unwrap();
        let time = to_f64(&cost.time_ns());
        let verified = match verify_schedule(&s, &VerifyOptions::default()) {
            Ok(r) if r.is_valid() => "yes".to_string(),
            Ok(r) => format!("NO: {}", r.findings.failures().first().map_or(String::new(), |d| d.to_string())),
            Err(e) => format!("skipped ({e})"),
        };
        println!(
            "| {dims} | {faults} | {kind} | {pieces} | {} | {:.2} | {:.2} | {:.2} | {:.2}% | {seconds:.2} | {verified} |",
            s.steps.len(),
            time / 1e3,
            to_f64(&cost.bandwidth_ns()) / 1e3,
            bound / 1e3,
            100.0 * (time / bound - 1.0)
        );
    }
    Ok(())
}
