//! The synthesizer's quality matrix (issue 4): for failed cables on tori, the time-objective
//! synthesis against the certified bandwidth + latency bound and against MATEe.
//!
//! `cargo run --release --example synth_quality` (all rows; about 6 minutes on 2 cores), or
//! `cargo run --release --example synth_quality -- 4x4` to run the rows whose name contains `4x4`.
//! Each row is `collsched synthesize` with its default 60 s budget; 32 GB/s, 100 ns, 8 MiB per npu.

use collsched::Spec;
use collsched::SynthOptions;
use collsched::{synthesize, Candidate, HandWritten, Objective};
use std::time::{Duration, Instant};

/// (name, dims, faults JSON, extra collective fields, time limit in s)
fn rows() -> Vec<(String, String, String, String, u64)> {
    let mut rows = Vec::new();
    let mut add = |name: &str, dims: &str, faults: &str, extra: &str, limit: u64| {
        rows.push((name.to_string(), dims.to_string(), faults.to_string(), extra.to_string(), limit));
    };
    // One failed cable in each dimension, at a few positions (all equivalent by symmetry).
    for (dims, cables) in [
        ("[4, 4]", vec!["[[0, 0], [1, 0]]", "[[2, 1], [3, 1]]", "[[0, 0], [0, 1]]", "[[3, 2], [3, 3]]"]),
        ("[5, 5]", vec!["[[0, 0], [1, 0]]", "[[4, 3], [0, 3]]", "[[0, 0], [0, 1]]"]),
        ("[4, 4, 4]", vec!["[[0, 0, 0], [1, 0, 0]]", "[[0, 0, 0], [0, 1, 0]]", "[[0, 0, 0], [0, 0, 1]]", "[[2, 3, 1], [2, 3, 2]]"]),
        ("[5, 5, 5]", vec!["[[0, 0, 0], [1, 0, 0]]", "[[0, 0, 0], [0, 1, 0]]", "[[0, 0, 0], [0, 0, 1]]"]),
    ] {
        for c in cables {
            add(&format!("{dims} cable {c}"), dims, &format!("{{\"cables\": [{c}]}}"), "", 60);
        }
    }
    // Harder faults.
    add("[5, 5] two cables in one ring", "[5, 5]", "{\"cables\": [[[0, 2], [1, 2]], [[3, 2], [4, 2]]]}", "", 60);
    add("[4, 4, 4] cables in two dimensions", "[4, 4, 4]", "{\"cables\": [[[0, 0, 0], [1, 0, 0]], [[2, 2, 2], [2, 3, 2]]]}", "", 60);
    add("[4, 4, 4] OCS z (2,3)", "[4, 4, 4]", "{\"ocs\": [{\"name\": \"z\", \"tpuv4\": {\"dim\": 2, \"position\": [2, 3]}}]}", "", 60);
    add("[8, 4, 4] OCS z (2,3)", "[8, 4, 4]", "{\"ocs\": [{\"name\": \"z\", \"tpuv4\": {\"dim\": 2, \"position\": [2, 3]}}]}", "", 60);
    // Non-uniform all-to-all: every rank sends 4x the average to rank 0..3 (hot experts).
    let n = 64;
    let matrix: Vec<String> = (0..n)
        .map(|i| {
            let row: Vec<String> = (0..n)
                .map(|j| {
                    if i == j {
                        "0".into()
                    } else if j < 4 {
                        (4 * 131072).to_string()
                    } else {
                        "131072".into()
                    }
                })
                .collect();
            format!("[{}]", row.join(", "))
        })
        .collect();
    add(
        "[4, 4, 4] cable, skewed blocks (ranks 0-3 receive 4x)",
        "[4, 4, 4]",
        "{\"cables\": [[[0, 0, 0], [1, 0, 0]]]}",
        &format!(", \"block_bytes\": [{}]", matrix.join(", ")),
        60,
    );
    add("[8, 8, 8] cable", "[8, 8, 8]", "{\"cables\": [[[0, 0, 0], [1, 0, 0]]]}", "", 240);
    rows
}

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    println!("| instance | chosen | steps | pieces | time (us) | certified bound (us) | gap | MATEe (us) | speed-up over MATEe | HalfRing+DimRotation (us) | seconds |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, dims, faults, extra, limit) in rows().into_iter().filter(|r| r.0.contains(&filter)) {
        let text = format!(
            "{{\"topology\": {{\"torus\": {{\"dims\": {dims}, \"bandwidth_gbps\": 32.0, \"latency_ns\": 100.0}}}}, \"faults\": {faults}, \"collective\": {{\"kind\": \"all_to_all\", \"bytes_per_rank\": \"8MiB\"{extra}}}}}"
        );
        let spec = Spec::parse(&text, &name).expect("row spec");
        let inst = spec.instance().expect("row instance");
        let opts = SynthOptions { time_limit: Duration::from_secs(limit), ..Default::default() };
        let started = Instant::now();
        let a = match synthesize(&inst, &opts, Objective::Time, &mut |_| {}) {
            Ok(a) => a,
            Err(e) => {
                println!("| {name} | error: {e} |");
                continue;
            }
        };
        let secs = started.elapsed().as_secs_f64();
        let us = |x: f64| x / 1000.0;
        let time = a.chosen_entry().map_or(f64::NAN, |e| e.time_ns);
        let named = |h: HandWritten| a.entries.iter().find(|e| e.candidate == Candidate::HandWritten(h)).map(|e| e.time_ns);
        let matee = named(HandWritten::Matee);
        println!(
            "| {name} | {} | {} | {} | {:.1} | {:.1} | {:.2}% | {} | {} | {} | {secs:.1} |",
            a.chosen,
            a.schedule.steps.len(),
            a.schedule.header.collective.pieces,
            us(time),
            us(a.bound_ns.unwrap_or(f64::NAN)),
            100.0 * a.gap.unwrap_or(f64::NAN),
            matee.map_or("-".into(), |m| format!("{:.1}", us(m))),
            matee.map_or("-".into(), |m| format!("{:.2}x", m / time)),
            named(HandWritten::HalfRingDimRotation).map_or("-".into(), |m| format!("{:.1}", us(m))),
        );
    }
}
