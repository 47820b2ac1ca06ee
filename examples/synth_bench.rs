//! Benchmark: the exact fewest-steps search (`synth::fewest_steps_exact_with`, no heuristic
//! incumbent) with each backend, on rings, small tori and 2-level fat trees, healthy and with
//! one failed cable (a torus cable, or a leaf-spine cable of a fat tree).
//!
//! ```text
//! cargo run --release --example synth_bench -- [LIMIT_SECONDS] [FILTER]
//! cargo run --release --features highs --example synth_bench   # adds a HiGHS column
//! ```
//!
//! `LIMIT_SECONDS` (default 60) caps each backend on each instance (the whole search from the
//! certified bound upward, building the programs included); `FILTER` keeps the instances whose
//! name contains it. Prints a Markdown table as the instances finish: the certified lower bound,
//! the 0-1 variables of the program at the bound, the fewest steps and the time per backend, and
//! whether the backends agree (`timeout` when one of them gave no answer in time; `@T` in a steps
//! cell is the horizon it was working on, every horizon below being infeasible).

use collsched::collective::{Collective, CollectiveKind};
use collsched::synth::{fewest_steps_exact_with, steps_lower_bound, Progress, Solver};
use collsched::topology::{fat_tree, torus, FatTreeParams, NodeId, Topology, TorusParams};
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
    let mut args = std::env::args().skip(1);
    let limit = Duration::from_secs_f64(args.next().map(|s| s.parse().expect("LIMIT_SECONDS is a number")).unwrap_or(60.0));
    let filter = args.next().unwrap_or_default();
    let backends = backends();

    println!("Exact fewest-steps search per backend, all-to-all with one piece per pair, {} s per backend and instance.\n", limit.as_secs_f64());
    let mut header = "| instance | bound | vars@bound |".to_string();
    let mut rule = "|---|---:|---:|".to_string();
    for (name, _) in &backends {
        header += &format!(" {name} steps | {name} time |");
        rule += "---:|---:|";
    }
    println!("{header} agree |\n{rule}---|");

    for (name, t) in instances().into_iter().filter(|(name, _)| name.contains(&filter)) {
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
    println!("\nPeak resident memory: {:.0} MiB", peak_rss_mib());
}
