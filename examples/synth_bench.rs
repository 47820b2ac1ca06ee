//! Benchmarks of the fewest-steps synthesis, three tables:
//!
//! - `search`: the whole search (`synth::synthesize_steps`: certified bound, incumbents, exact
//!   program) for every collective kind: the all-gathers SCCL answers (rings of 4-10, healthy and
//!   with a failed cable, a 3x3 torus; SCCL's step counts beside ours), the same instances as
//!   reduce-scatters and all-reduces, the all-to-alls of the 4x4 and 4x4x4 tori (healthy and with
//!   one failed cable), and every kind on a group of 5 ranks of a 4x4 torus;
//! - `ladder`: the exact program alone on programs of growing size, every kind, per backend,
//!   each horizon's variables, answer and time (what the backends' size caps,
//!   `synth::Solver::max_variables`, were set from);
//! - `exact` (the default): the exact fewest-steps search alone (`synth::fewest_steps_exact_with`,
//!   no incumbent) with each backend, all-to-all on rings, small tori and 2-level fat trees,
//!   healthy and with one failed cable (a torus cable, or a leaf-spine cable of a fat tree).
//!
//! ```text
//! cargo run --release --example synth_bench -- search [LIMIT_SECONDS] [FILTER]
//! cargo run --release --features smt --example synth_bench -- ladder 120
//! cargo run --release --example synth_bench -- [exact] [LIMIT_SECONDS] [FILTER]
//! cargo run --release --features highs --example synth_bench   # adds a HiGHS column
//! ```
//!
//! `LIMIT_SECONDS` (default 60) caps each search (`search`), or each backend on each instance
//! (`exact`: the whole search from the certified bound upward, building the programs included);
//! `FILTER` keeps the instances whose name contains it. Prints a Markdown table as the instances
//! finish. `search`: the certified bound, the steps found, the status, the method of the schedule
//! and the wall time. `exact`: the certified lower bound, the 0-1 variables of the program at the
//! bound, the fewest steps and the time per backend, and whether the backends agree (`timeout`
//! when one of them gave no answer in time; `@T` in a steps cell is the horizon it was working
//! on, every horizon below being infeasible).

use collsched::{fat_tree, torus, FatTreeParams, NodeId, Topology, TorusParams};
use collsched::{fewest_steps_exact_with, steps_lower_bound, synthesize_steps, Progress, Solver, SynthOptions, SynthStatus};
use collsched::{Collective, CollectiveKind};
use std::io::Write;
use std::time::{Duration, Instant};

/// The backends of this build, with their column names.
fn backends() -> Vec<(&'static str, Solver)> {
    let all = [("ILP (microlp)", Solver::Ilp), ("SMT (z3)", Solver::Smt), ("HiGHS", Solver::Highs)];
    all.into_iter().filter(|(_, s)| s.is_built()).collect()
}

fn fail_cable(t: &mut Topology, a: u32, b: u32) {
    for (x, y) in [(a, b), (b, a)] {
        let l = t.link_between(NodeId(x), NodeId(y)).expect("a cable between the two nodes");
        t.set_down(l);
    }
}

/// A 2-level fat tree of `npus` npus, leaf radix `k`, osr 1 (k/2 npus per leaf, k/2 spines).
fn two_level(k: usize, npus: usize) -> Topology {
    fat_tree(&FatTreeParams { levels: 2, k, osr: 1.0, npus, board: None, bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })
        .expect("a valid fat tree")
}

fn instances() -> Vec<(String, Topology)> {
    let mut out = Vec::new();
    let ring = |n: usize| torus(&TorusParams::uniform(&[n], 32.0, 100.0)).expect("a valid ring");
    for n in 3..=10 {
        out.push((format!("ring {n}"), ring(n)));
        let mut t = ring(n);
        fail_cable(&mut t, 0, 1);
        out.push((format!("ring {n}, cable 0-1 down"), t));
    }
    for dims in [vec![3, 3], vec![2, 2, 2]] {
        let name = dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        let t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).expect("a valid torus");
        out.push((format!("{name} torus"), t.clone()));
        let mut t = t;
        fail_cable(&mut t, 0, 1);
        out.push((format!("{name} torus, cable 0-1 down"), t));
    }
    // Npus come first, then the leaves, then the spines: npus / (k/2) leaves.
    for (k, npus) in [(4, 8), (8, 16)] {
        let t = two_level(k, npus);
        let (leaf0, spine0) = (npus as u32, (npus + npus / (k / 2)) as u32);
        out.push((format!("fat tree 2L k{k} osr1, {npus} npus"), t.clone()));
        let mut t = t;
        fail_cable(&mut t, leaf0, spine0);
        out.push((format!("fat tree 2L k{k} osr1, {npus} npus, leaf 0-spine 0 down"), t));
    }
    out
}

/// What one backend did on one instance.
enum Answer {
    Steps(u32),
    /// No answer in time, while solving this horizon.
    Timeout(Option<u32>),
    Error(String),
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<f64>().ok()).unwrap_or(0.0) / 1024.0
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mode = match args.first().map(String::as_str) {
        Some("search") | Some("exact") | Some("ladder") => args.remove(0),
        _ => "exact".to_string(),
    };
    let limit = Duration::from_secs_f64(args.first().map(|s| s.parse().expect("LIMIT_SECONDS is a number")).unwrap_or(60.0));
    let filter = args.get(1).cloned().unwrap_or_default();
    if mode == "search" {
        search_table(limit, &filter);
    } else if mode == "ladder" {
        ladder_table(limit, &filter);
    } else {
        exact_table(limit, &filter);
    }
    println!("\nPeak resident memory: {:.0} MiB", peak_rss_mib());
}

/// SCCL's least-steps all-gathers (msccl-tools with z3, on this machine): rings of 4-10, healthy
/// and with a failed cable, and a 3x3 torus.
const SCCL_ALL_GATHER: [(&str, u32); 15] = [
    ("ring 4", 2),
    ("ring 5", 2),
    ("ring 6", 3),
    ("ring 7", 3),
    ("ring 8", 4),
    ("ring 9", 4),
    ("ring 10", 5),
    ("ring 4, cable 0-1 down", 3),
    ("ring 5, cable 0-1 down", 4),
    ("ring 6, cable 0-1 down", 5),
    ("ring 7, cable 0-1 down", 6),
    ("ring 8, cable 0-1 down", 7),
    ("ring 9, cable 0-1 down", 8),
    ("ring 10, cable 0-1 down", 9),
    ("3x3 torus", 2),
];

/// The instances of the `search` table: (name, topology, kind, ranks).
fn search_instances() -> Vec<(String, Topology, CollectiveKind, Vec<NodeId>)> {
    let tori = |dims: &[usize], fault: bool| {
        let mut t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).expect("a valid torus");
        if fault {
            fail_cable(&mut t, 0, 1);
        }
        t
    };
    let all = |t: &Topology| (0..t.num_npus() as u32).map(NodeId).collect::<Vec<_>>();
    let mut out = Vec::new();
    let mut small: Vec<(String, Topology)> = Vec::new();
    for fault in [false, true] {
        for n in 4..=10 {
            small.push((if fault { format!("ring {n}, cable 0-1 down") } else { format!("ring {n}") }, tori(&[n], fault)));
        }
    }
    small.push(("3x3 torus".into(), tori(&[3, 3], false)));
    for kind in [CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce] {
        for (name, t) in &small {
            out.push((name.clone(), t.clone(), kind, all(t)));
        }
    }
    for (dims, name) in [(&[4usize, 4][..], "4x4 torus"), (&[4, 4, 4][..], "4x4x4 torus")] {
        for fault in [false, true] {
            let t = tori(dims, fault);
            let name = if fault { format!("{name}, cable 0-1 down") } else { name.to_string() };
            out.push((name, t.clone(), CollectiveKind::AllToAll, all(&t)));
        }
    }
    let t = tori(&[4, 4], false);
    for kind in CollectiveKind::ALL {
        out.push(("4x4 torus, group of 5 ranks (0, 1, 6, 11, 13)".into(), t.clone(), kind, [0, 1, 6, 11, 13].map(NodeId).to_vec()));
    }
    out
}

fn search_table(limit: Duration, filter: &str) {
    println!(
        "Fewest steps, the whole search (certified bound, incumbents, exact program; solver auto), one piece per block, {} s per instance.\n",
        limit.as_secs_f64()
    );
    println!("| collective | instance | bound | steps | status | SCCL | schedule from | time |\n|---|---|---:|---:|---|---:|---|---:|");
    for (name, t, kind, ranks) in search_instances().into_iter().filter(|(name, ..)| name.contains(filter)) {
        let c = Collective::new(kind, ranks, 1 << 20, 1, None, &t).expect("a collective");
        let started = Instant::now();
        let r = synthesize_steps(&t, &c, &SynthOptions { solver: Solver::Auto, time_limit: limit, ..SynthOptions::default() }).expect("the search runs");
        let seconds = started.elapsed().as_secs_f64();
        let status = match &r.status {
            SynthStatus::Optimal { certified: true } => "optimal (certified)".to_string(),
            SynthStatus::Optimal { certified: false } => "optimal (solver-attested)".to_string(),
            SynthStatus::Gap => format!("gap {:.1}%", 100.0 * r.gap().unwrap_or(f64::NAN)),
            SynthStatus::LimitReached => format!("time limit, gap {:.1}%", 100.0 * r.gap().unwrap_or(f64::NAN)),
            SynthStatus::Infeasible(why) => format!("infeasible: {why}"),
        };
        let sccl = SCCL_ALL_GATHER.iter().find(|(n, _)| kind == CollectiveKind::AllGather && *n == name).map_or("-".to_string(), |(_, s)| s.to_string());
        let method = r.schedule.as_ref().and_then(|s| s.header.meta.as_ref()).and_then(|m| m["method"].as_str().map(str::to_string)).unwrap_or_default();
        let steps = r.steps_found.map_or("-".to_string(), |s| s.to_string());
        println!("| {kind} | {name} | {} | {steps} | {status} | {sccl} | {method} | {seconds:.3} s |", r.steps_lower_bound);
        std::io::stdout().flush().ok();
    }
}

/// Programs from about 1,500 to 170,000 variables: the all-to-alls and all-gathers the incumbents
/// leave above the bound, and all-reduces the composition leaves above it.
fn ladder_instances() -> Vec<(&'static str, CollectiveKind, Topology)> {
    let tori = |dims: &[usize], fault: bool| {
        let mut t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).expect("a valid torus");
        if fault {
            fail_cable(&mut t, 0, 1);
        }
        t
    };
    let tree = |k: usize, npus: usize, fault: bool| {
        let mut t = two_level(k, npus);
        if fault {
            fail_cable(&mut t, npus as u32, (npus + npus / (k / 2)) as u32);
        }
        t
    };
    use CollectiveKind::{AllGather, AllReduce, AllToAll};
    vec![
        ("3x4 torus", AllToAll, tori(&[3, 4], false)),
        ("3x4 torus, cable 0-1 down", AllToAll, tori(&[3, 4], true)),
        ("3x3x3 torus, cable 0-1 down", AllToAll, tori(&[3, 3, 3], true)),
        ("4x6 torus, cable 0-1 down", AllToAll, tori(&[4, 6], true)),
        ("5x5 torus, cable 0-1 down", AllToAll, tori(&[5, 5], true)),
        ("fat tree 2L k8, 16 npus, leaf 0-spine 0 down", AllToAll, tree(8, 16, true)),
        ("5x5 torus", AllGather, tori(&[5, 5], false)),
        ("4x6 torus", AllGather, tori(&[4, 6], false)),
        ("6x6 torus", AllGather, tori(&[6, 6], false)),
        ("fat tree 2L k4, 8 npus, leaf 0-spine 0 down", AllGather, tree(4, 8, true)),
        ("fat tree 2L k8, 16 npus", AllGather, tree(8, 16, false)),
        ("ring 6", AllReduce, tori(&[6], false)),
        ("ring 8", AllReduce, tori(&[8], false)),
        ("ring 5, cable 0-1 down", AllReduce, tori(&[5], true)),
        ("3x3 torus, cable 0-1 down", AllReduce, tori(&[3, 3], true)),
        ("2x2x2 torus", AllReduce, tori(&[2, 2, 2], false)),
    ]
}

fn ladder_table(limit: Duration, filter: &str) {
    println!(
        "The exact program alone per backend, one piece per block, {} s per backend and instance: per horizon T, its 0-1 variables, the answer and the time.\n",
        limit.as_secs_f64()
    );
    println!("| collective | instance | backend | steps | horizons |\n|---|---|---|---:|---|");
    for (name, kind, t) in ladder_instances().into_iter().filter(|(name, ..)| name.contains(filter)) {
        let c = Collective::new(kind, (0..t.num_npus() as u32).map(NodeId).collect(), 1 << 20, 1, None, &t).expect("a collective");
        for (backend, solver) in backends() {
            let mut horizons = Vec::new();
            let mut last = Instant::now();
            let result = std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        fewest_steps_exact_with(&t, &c, solver, limit, &mut |p| match *p {
                            Progress::Solving { steps, variables } => {
                                last = Instant::now();
                                horizons.push(format!("T={steps}: {variables} vars"));
                            }
                            Progress::Answered { feasible, .. } => {
                                let answer = match feasible {
                                    Some(true) => "feasible",
                                    Some(false) => "infeasible",
                                    None => "no answer",
                                };
                                if let Some(h) = horizons.last_mut() {
                                    *h += &format!(", {answer} in {:.2} s", last.elapsed().as_secs_f64());
                                }
                            }
                            _ => {}
                        })
                    })
                    .join()
                    .expect("the search does not panic")
            });
            let steps = match result {
                Ok(Some((steps, _))) => steps.to_string(),
                Ok(None) => "-".into(),
                Err(e) => format!("error: {}", e.message()),
            };
            println!("| {kind} | {name} | {backend} | {steps} | {} |", horizons.join("; "));
            std::io::stdout().flush().ok();
        }
    }
}

fn exact_table(limit: Duration, filter: &str) {
    let backends = backends();
    println!("Exact fewest-steps search per backend, all-to-all with one piece per pair, {} s per backend and instance.\n", limit.as_secs_f64());
    let mut header = "| instance | bound | vars@bound |".to_string();
    let mut rule = "|---|---:|---:|".to_string();
    for (name, _) in &backends {
        header += &format!(" {name} steps | {name} time |");
        rule += "---:|---:|";
    }
    println!("{header} agree |\n{rule}---|");

    for (name, t) in instances().into_iter().filter(|(name, _)| name.contains(filter)) {
        let c = Collective::new(CollectiveKind::AllToAll, (0..t.num_npus() as u32).map(NodeId).collect(), 1 << 20, 1, None, &t).expect("an all-to-all");
        let bound = steps_lower_bound(&t, &c);
        let mut vars_at_bound = None;
        let mut cells = String::new();
        let mut answers = Vec::new();
        for &(_, solver) in &backends {
            let mut working_on = None;
            let started = Instant::now();
            // A thread of its own: z3 then starts from a fresh (thread-local) context, whose
            // history otherwise changes its times (3x3 torus: 3.8 s alone, over 10 s after rings).
            let result = std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        fewest_steps_exact_with(&t, &c, solver, limit, &mut |p| {
                            if let Progress::Solving { steps, variables } = *p {
                                working_on = Some(steps);
                                vars_at_bound.get_or_insert(variables);
                            }
                        })
                    })
                    .join()
                    .expect("the search does not panic")
            });
            let seconds = started.elapsed().as_secs_f64();
            let answer = match result {
                Ok(Some((steps, _schedule))) => Answer::Steps(steps),
                Ok(None) => Answer::Timeout(working_on),
                Err(e) => Answer::Error(e.message().to_string()),
            };
            let steps_cell = match &answer {
                Answer::Steps(s) => s.to_string(),
                Answer::Timeout(Some(h)) => format!("timeout @{h}"),
                Answer::Timeout(None) => "timeout".into(),
                Answer::Error(e) => format!("error: {e}"),
            };
            cells += &format!(" {steps_cell} | {seconds:.2} s |");
            answers.push(answer);
        }
        let found: Vec<u32> = answers.iter().filter_map(|a| if let Answer::Steps(s) = a { Some(*s) } else { None }).collect();
        let agree = if answers.iter().any(|a| matches!(a, Answer::Error(_))) {
            "error"
        } else if found.windows(2).any(|w| w[0] != w[1]) {
            "no"
        } else if found.len() < answers.len() {
            "timeout"
        } else {
            "yes"
        };
        let vars = vars_at_bound.map_or("-".to_string(), |v| v.to_string());
        println!("| {name} | {bound} | {vars} |{cells} {agree} |");
        std::io::stdout().flush().ok();
    }
}
