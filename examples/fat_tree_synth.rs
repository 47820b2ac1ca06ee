//! Contention-free route-and-step synthesis on the four reference fat trees (64 npus, boards of
//! 8, 400 GB/s and 25 ns per link, 1 us per switch), 1 MiB per npu, EP groups of the first 32
//! and all 64 npus, healthy and with a failed leaf-spine (ToR-aggregation) cable: for every
//! collective the candidate with the least event-driven time (route-and-step, and for the
//! gathering and reducing kinds also the spreading trees of `synth::spreading`), its
//! step-synchronous time, the certified time bound (bandwidth + latency, or the crossing bound of
//! docs/design/MODEL.md section 6 where that is larger: "crossing") and the gap of the event-driven
//! time to it. The choice is by event-driven time, as `collsched synthesize
//! --objective event` chooses (since 2026-12-04 `synthesize` without the flag chooses by
//! step-synchronous time, on fat trees too), among the route-and-step candidates and the
//! switched algorithms under balanced routing (`fat_tree_candidates`).
//!
//! `cargo run --release --example fat_tree_synth`

use collsched::certified_bounds_ns;
use collsched::event_cost;
use collsched::fat_tree_candidates;
use collsched::spread_steps;
use collsched::to_f64;
use collsched::{fat_tree, FatTreeParams, FaultPattern, NodeId};
use collsched::{verify_schedule, VerifyOptions};
use collsched::{Collective, CollectiveKind};
use collsched::{Schedule, ScheduleHeader};
use std::time::{Duration, Instant};

const TREES: [(&str, u32, usize, f64); 4] = [("2L-k16-osr1", 2, 16, 1.0), ("2L-k8-osr1", 2, 8, 1.0), ("2L-k12-osr2", 2, 12, 2.0), ("3L-k8-osr1", 3, 8, 1.0)];
const KINDS: [CollectiveKind; 4] = [CollectiveKind::AllToAll, CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce];

fn main() -> collsched::Result<()> {
    let started = Instant::now();
    println!(
        "| tree | EP | collective | network | candidate chosen | steps | event-driven (us) | step-synchronous (us) | bound (us): bandwidth + latency, or crossing | gap |"
    );
    println!("|---|---:|---|---|---|---:|---:|---:|---:|---:|");
    for (name, levels, k, osr) in TREES {
        for faulty in [false, true] {
            let mut t =
                fat_tree(&FatTreeParams { levels, k, osr, npus: 64, board: Some(8), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })?;
            let shape = t.fat_tree_shape().expect("a fat tree").clone();
            if faulty {
                FaultPattern { cables: vec![(shape.leaf(0), shape.middle_switch(0))], ..Default::default() }.apply(&mut t)?;
            }
            for ep in [32u32, 64] {
                for kind in KINDS {
                    let c = Collective::new(kind, (0..ep).map(NodeId).collect(), 1 << 20, 1, None, &t)?;
                    let mut best: Option<(String, usize, f64, f64)> = None;
                    let mut candidates: Vec<(String, Schedule)> = fat_tree_candidates(&t, &c)?.into_iter().map(|(m, s)| (m.to_string(), s)).collect();
                    if kind != CollectiveKind::AllToAll {
                        let steps = spread_steps(&t, &c, 1, Instant::now() + Duration::from_secs(60))?.expect("spreading within a minute");
                        let header = ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: None };
                        candidates.push(("spreading trees".into(), Schedule { header, steps }));
                    }
                    for (cand, s) in candidates {
                        let event = event_cost(&s, false)?.time_ns;
                        let report = verify_schedule(&s, &VerifyOptions::default())?;
                        assert!(report.is_valid(), "{name} EP={ep} {kind}: {cand} fails verification");
                        let sync = to_f64(&report.cost.expect("verification prices the schedule").time_ns());
                        if best.as_ref().is_none_or(|b| event < b.2) {
                            best = Some((cand, s.steps.len(), event, sync));
                        }
                    }
                    let (cand, steps, event, sync) = best.expect("at least one candidate");
                    let b = certified_bounds_ns(&t, &c, Duration::from_secs(5))?;
                    let (bandwidth, latency) = (b.bandwidth.unwrap_or(0.0), b.latency);
                    let bound = b.time.unwrap_or(latency);
                    let how =
                        if bound > bandwidth + latency + 1e-6 { "crossing".to_string() } else { format!("{:.2} + {:.2}", bandwidth / 1e3, latency / 1e3) };
                    let network = if faulty { "failed leaf0-spine0 cable" } else { "healthy" };
                    println!(
                        "| {name} | {ep} | {kind} | {network} | {cand} | {steps} | {:.2} | {:.1} | {:.2} ({how}) | {:+.1}% |",
                        event / 1e3,
                        sync / 1e3,
                        bound / 1e3,
                        100.0 * (event / bound - 1.0)
                    );
                }
            }
        }
    }
    eprintln!("{:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
