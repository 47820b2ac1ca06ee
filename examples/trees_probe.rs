//! Probe (not committed): layered trees on a torus instance.
use collsched::bounds::certified::certified_bounds_ns;
use collsched::collective::{Collective, CollectiveKind};
use collsched::schedule::{Schedule, ScheduleHeader};
use collsched::spec::Spec;
use collsched::synth::trees::tree_steps;
use collsched::verify::{verify_schedule, VerifyOptions};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dims = &args[1];
    let faults = &args[2];
    let kind = CollectiveKind::parse(&args[3]).unwrap();
    let pieces: Vec<u32> = args[4].split(',').map(|x| x.parse().unwrap()).collect();
    let verify = args.get(5).is_some();
    let text = format!(
        "{{\"topology\": {{\"torus\": {{\"dims\": {dims}, \"bandwidth_gbps\": 32.0, \"latency_ns\": 100.0}}}}, \"faults\": {faults}, \"collective\": {{\"kind\": \"{}\", \"bytes_per_rank\": \"8MiB\"}}}}",
        kind.as_str()
    );
    let inst = Spec::parse(&text, "probe").unwrap().instance().unwrap();
    let t = &inst.topology;
    for &p in &pieces {
        let c = Collective::new(kind, inst.collective.ranks.clone(), inst.collective.bytes_per_rank, p, None, t).unwrap();
        let (bw, lat) = certified_bounds_ns(t, &c, Duration::from_secs(5)).unwrap();
        let bound = bw.unwrap() + lat;
        let started = Instant::now();
        let steps = tree_steps(t, &c, Instant::now() + Duration::from_secs(600)).unwrap().unwrap().steps;
        let ts = started.elapsed().as_secs_f64();
        let s = Schedule { header: ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: None }, steps };
        let mut meter = collsched::cost::SyncMeter::new(&s.header).unwrap();
        for st in &s.steps {
            meter.step(st);
        }
        let cost = meter.finish();
        let time = collsched::units::to_f64(&cost.time_ns());
        let bwt = collsched::units::to_f64(&cost.bandwidth_ns());
        if std::env::var("TREES_DEBUG").is_ok() {
            for (i, st) in s.steps.iter().enumerate() {
                let mut load = std::collections::HashMap::new();
                for x in &st.transfers {
                    for l in &x.path {
                        *load.entry(*l).or_insert(0usize) += x.pieces.len();
                    }
                }
                let (l, m) = load.iter().max_by_key(|e| *e.1).map(|(l, m)| (*l, *m)).unwrap_or((collsched::topology::LinkId(0), 0));
                let mut v: Vec<usize> = load.values().copied().collect();
                v.sort_unstable();
                let med = v.get(v.len() / 2).copied().unwrap_or(0);
                let lk = t.link(l);
                println!("step {i}: max {m} on {}->{} (median {med}, {} links)", t.node(lk.src).name, t.node(lk.dst).name, v.len());
            }
        }
        let mut valid = String::new();
        if verify {
            let r = verify_schedule(&s, &VerifyOptions::default()).unwrap();
            valid = format!(" valid={}", r.is_valid());
            if !r.is_valid() {
                valid += &format!(" {:?}", r.findings.failures().iter().take(2).map(|d| d.to_string()).collect::<Vec<_>>());
            }
        }
        println!(
            "{dims} {faults} {kind} P={p}: steps {} time {:.2} (bw {:.2}) bound {:.2} (bw {:.2}) gap {:.2}% synth {ts:.2}s{valid}",
            s.steps.len(),
            time / 1e3,
            bwt / 1e3,
            bound / 1e3,
            bw.unwrap() / 1e3,
            100.0 * (time / bound - 1.0)
        );
    }
}
