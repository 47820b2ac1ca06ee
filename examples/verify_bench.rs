//! Benchmark: verify a large all-to-all schedule and report piece-hops checked per second and
//! peak memory.
//!
//! ```text
//! cargo run --release --example verify_bench -- [DIMS]   # default 8x8x8 (512 npus)
//! ```
//!
//! It generates HalfRing + DimRotation on the torus, writes it to a temporary file, then times
//! (1) rules 1-5 on the schedule in memory, one core, and (2) streaming verification from the
//! file (parse + rules 1-5 + cost), and prints the peak resident memory of the process.

use collsched::algorithms::{torus_all_to_all, RingAlgorithm, Scheduler};
use collsched::collective::{Collective, CollectiveKind};
use collsched::schedule::write_schedule_file;
use collsched::topology::{torus, TorusParams};
use collsched::verify::{verify_file, verify_schedule, VerifyOptions};
use std::time::Instant;

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<f64>().ok()).unwrap_or(0.0) / 1024.0
}

fn main() {
    let dims: Vec<usize> = std::env::args().nth(1).unwrap_or_else(|| "8x8x8".into()).split('x').map(|d| d.parse().expect("dims like 8x8x8")).collect();
    let t = torus(&TorusParams::uniform(&dims, 56.0, 500.0)).unwrap();
    let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 64 << 20, 1, None, &t).unwrap();
    let start = Instant::now();
    let schedule = torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap();
    let gen = start.elapsed().as_secs_f64();
    let hops = schedule.piece_hops();
    println!("{} npus, {} steps, {} piece-hops; generated in {gen:.2} s", t.num_npus(), schedule.steps.len(), hops);
    println!("peak memory after generating: {:.0} MiB", peak_rss_mib());

    let start = Instant::now();
    let report = verify_schedule(&schedule, &VerifyOptions::default()).unwrap();
    let mem = start.elapsed().as_secs_f64();
    assert!(report.is_valid(), "{:?}", report.findings.failures().first());
    println!("in memory:  rules 1-5 + cost: {mem:.2} s, {:.1} million piece-hops/s", hops as f64 / mem / 1e6);
    let start = Instant::now();
    let report = verify_schedule(&schedule, &VerifyOptions { track_relays: true, ..Default::default() }).unwrap();
    let relays = start.elapsed().as_secs_f64();
    println!(
        "in memory, with peak holdings ({:?}): {relays:.2} s, {:.1} million piece-hops/s",
        report.stats.peak_relay.map(|(_, n, _)| n),
        hops as f64 / relays / 1e6
    );

    let path = std::env::temp_dir().join(format!("collsched-bench-{}.json", std::process::id()));
    write_schedule_file(&path, &schedule).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    drop(schedule);
    let start = Instant::now();
    let (_, report) = verify_file(&path, &VerifyOptions::default()).unwrap();
    let streamed = start.elapsed().as_secs_f64();
    assert!(report.is_valid());
    println!(
        "from file:  parse + rules 1-5 + cost of a {:.0} MiB file: {streamed:.2} s, {:.1} million piece-hops/s",
        size as f64 / (1 << 20) as f64,
        hops as f64 / streamed / 1e6
    );
    println!("peak memory of the process: {:.0} MiB", peak_rss_mib());
    std::fs::remove_file(&path).unwrap();
}
