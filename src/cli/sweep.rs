//! `collsched sweep`: a fault library, one verified and certified schedule per class of faults
//! under the network's symmetries, an index naming every fault; `sweep merge` joins the shards
//! of a sweep spread over a job array; `sweep schedule` hands out one fault's schedule.

use super::progress::Bar;
use super::SpecFlags;
use crate::error::{Error, ExitCode, Result};
use crate::sweep::{member_schedule, merge, ClassStatus, FaultFamily, Index, MemberCheck, Plan, ShardInfo, SweepEvent, SweepSetup};
use crate::synth::Solver;
use crate::units::format_ns;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `collsched sweep ...`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SweepArgs {
    /// Merge shards, or hand out one fault's schedule.
    #[command(subcommand)]
    pub command: Option<SweepCommand>,
    /// The spec (a torus or fat tree and a collective; its faults are ignored); or the flags.
    pub spec: Option<PathBuf>,
    /// Shorthand flags that build the spec (`--fail` and `--algorithm` do not apply).
    #[command(flatten)]
    pub flags: SpecFlags,
    /// Which faults: every single cable, every pair of cables, or every TPUv4 OCS.
    #[arg(long, value_enum)]
    pub faults: Option<FamilyArg>,
    /// The OCS cube side (`--faults ocs`; default 4).
    #[arg(long)]
    pub cube: Option<usize>,
    /// The output folder (index.json, summary.md, gaps.svg, schedules/, specs/, certificates/).
    #[arg(short, long, default_value = "out/sweep")]
    pub output: PathBuf,
    /// Seconds of synthesis per class (default the spec's time_limit_s, or 60).
    #[arg(long)]
    pub time_limit: Option<f64>,
    /// auto, ilp, smt or highs (default the spec's or auto).
    #[arg(long)]
    pub solver: Option<Solver>,
    /// Verify the mapped schedules of `all` members, or of a `sample N` per class (default
    /// none: each member's symmetry is still checked against its faults).
    #[arg(long, num_args = 1..=2, value_names = ["all|sample|none", "N"])]
    pub verify_members: Vec<String>,
    /// The seed of the member sample.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run only shard K of N (K from 0): the classes c with c % N == K. Merge the shards'
    /// folders with `collsched sweep merge`.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Classes synthesized at once, at most 1024 (default: one per core; no more threads are
    /// started than the classes to run or the cores, whichever is more).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The fault families on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FamilyArg {
    /// Every single cable.
    Cables,
    /// Every pair of cables.
    Pairs,
    /// Every TPUv4 optical switch (`--cube` side).
    Ocs,
}

/// `collsched sweep merge|schedule`.
#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Merge the output folders of the shards of one sweep into the output of the whole sweep.
    #[command(
        after_help = "Exit codes: 0 merged, 2 shards missing, of different sweeps, or changed (an entry that is not what the sweep writes, a class file missing or changed), 3 a class is infeasible (merged with the rest), 4 a class reached its time limit (its best schedule merged), 5 a file could not be written (nothing is left behind).\n\nExample:\n  collsched sweep merge out/shard-0 out/shard-1 -o out/sweep"
    )]
    Merge {
        /// The shards' output folders.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The merged output folder.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Write one fault's schedule: its class schedule mapped through the fault's symmetry,
    /// verified first.
    #[command(
        after_help = "Exit codes: 0 written, 2 no such fault, or the library changed since the sweep (a class schedule that does not verify or costs other than the index says), 3 the fault's class has no schedule, 5 the file could not be written, 6 a mapped schedule failed its check (a bug).\n\nExample:\n  collsched sweep schedule out/sweep \"(3,0,0)-(4,0,0)\" -o out/fault.json"
    )]
    Schedule {
        /// The sweep's output folder.
        dir: PathBuf,
        /// The fault: its number or its name in the index.
        fault: String,
        /// Where to write the schedule.
        #[arg(short, long)]
        output: PathBuf,
    },
}

/// Runs `collsched sweep`.
pub fn run(args: SweepArgs) -> Result<ExitCode> {
    match args.command {
        Some(SweepCommand::Merge { dirs, output }) => {
            let index = merge(&dirs, &output)?;
            print_summary(&index, &output, None, false);
            Ok(exit_code(&index))
        }
        Some(SweepCommand::Schedule { dir, fault, output }) => {
            let (entry, schedule) = member_schedule(&dir, &fault)?;
            crate::schedule::write_schedule_file(&output, &schedule)?;
            println!("wrote {}: fault {} ({}), class {}, verified", output.display(), entry.fault, entry.name, entry.class);
            Ok(ExitCode::Ok)
        }
        None => sweep(&args),
    }
}

fn sweep(args: &SweepArgs) -> Result<ExitCode> {
    if !args.flags.fail.is_empty() || !args.flags.fail_node.is_empty() {
        return Err(Error::bad("--fail, --fail-node: a sweep enumerates the faults itself (--faults cables|pairs|ocs)"));
    }
    if args.flags.algorithm.is_some() || args.flags.scheduler.is_some() || args.flags.chunks.is_some() {
        return Err(Error::bad("--algorithm, --scheduler, --chunks: a sweep synthesizes every class's schedule"));
    }
    let family = match (args.faults.ok_or_else(|| Error::bad("--faults cables|pairs|ocs is needed: which faults to sweep"))?, args.cube) {
        (FamilyArg::Cables | FamilyArg::Pairs, Some(cube)) => return Err(Error::bad(format!("--cube {cube}: applies to --faults ocs only"))),
        (FamilyArg::Cables, None) => FaultFamily::Cables,
        (FamilyArg::Pairs, None) => FaultFamily::CablePairs,
        (FamilyArg::Ocs, Some(0)) => return Err(Error::bad("--cube 0: the cube side must be at least 1")),
        (FamilyArg::Ocs, cube) => FaultFamily::Ocs { cube: cube.unwrap_or(4) },
    };
    match args.jobs {
        Some(0) => return Err(Error::bad("--jobs 0: at least 1 (leave it out for one per core)")),
        Some(n) if n > MAX_JOBS => return Err(Error::bad(format!("--jobs {n}: at most {MAX_JOBS} (leave it out for one per core)"))),
        _ => {}
    }
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    let members = parse_member_check(&args.verify_members)?;
    let synth_flags = super::SynthFlags { solver: args.solver, time_limit: args.time_limit };
    let check = |spec: &crate::spec::Spec| super::synth::options(spec, args.solver, args.time_limit).map(drop);
    let Some(base) = super::load_spec(args.spec.as_deref(), &args.flags, synth_flags, check)? else { return Ok(ExitCode::Ok) };
    if !base.faults.is_empty() {
        eprintln!("note: the spec's faults are ignored: the sweep enumerates its own");
    }
    let synth = super::synth::options(&base, args.solver, args.time_limit)?;
    let started = Instant::now();
    let plan = Plan::new(SweepSetup { base, family, synth, members, seed: args.seed })?;
    let mine = plan.shard_classes(shard);
    eprintln!(
        "{} faults in {} classes (symmetry group of order {}){}",
        plan.cases.len(),
        plan.classes.len(),
        plan.group.order,
        shard.map_or(String::new(), |s| format!("; shard {}/{} runs {} of them", s.index, s.count, mine.len()))
    );
    let bar = Bar::new(mine.len() as u64, "sweep");
    let progress = |e: SweepEvent| match e {
        SweepEvent::Working { class, what } => bar.set_message(format!("class {class}: {what}")),
        SweepEvent::Finished { .. } => bar.inc(1),
    };
    // No more threads than classes to run or cores, whichever is more: the rest would idle.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let threads = args.jobs.map_or(0, |n| n.min(mine.len().max(cores)));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| match args.jobs {
        Some(n) => Error::bad(format!("--jobs {n}: cannot start {threads} threads: {e} (give a smaller --jobs)")),
        None => Error::bad(format!("cannot start one thread per core: {e} (give --jobs N)")),
    })?;
    let index = pool.install(|| plan.run(shard, &args.output, &progress));
    bar.finish();
    let index = index?;
    print_summary(&index, &args.output, Some(started.elapsed().as_secs_f64()), args.json);
    Ok(exit_code(&index))
}

/// The most classes synthesized at once (`--jobs`): more threads than that only contend.
const MAX_JOBS: usize = 1024;

/// `K/N` with K below N.
fn parse_shard(text: &str) -> Result<ShardInfo> {
    let bad = |why: &str| Error::bad(format!("--shard {text}: {why}"));
    let (k, n) = text.split_once('/').ok_or_else(|| bad("expected K/N, e.g. 0/4 (shard K of N, K from 0)"))?;
    let number = |part: &str| -> Result<usize> {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) || (part.len() > 1 && part.starts_with('0')) {
            return Err(bad("K and N must be whole numbers written in plain digits, e.g. 0/4"));
        }
        part.parse::<usize>().map_err(|_| bad(&format!("{part} is too large (at most {})", usize::MAX)))
    };
    let (index, count) = (number(k)?, number(n)?);
    if count == 0 {
        return Err(bad("N must be at least 1"));
    }
    if index >= count {
        return Err(bad(&format!("K must be below N (shards are numbered 0 to {})", count - 1)));
    }
    Ok(ShardInfo { index, count })
}

fn parse_member_check(values: &[String]) -> Result<MemberCheck> {
    match values.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] | ["none"] => Ok(MemberCheck::None),
        ["all"] => Ok(MemberCheck::All),
        ["sample", n] => n.parse().map(MemberCheck::Sample).map_err(|_| Error::bad(format!("--verify-members sample {n}: N must be a whole number"))),
        other => Err(Error::bad(format!("--verify-members {}: expected `all`, `none` or `sample N` (give SPEC before the options)", other.join(" ")))),
    }
}

/// 3 when a class is infeasible, 4 when a class reached its time limit (its best schedule is
/// there), else 0.
fn exit_code(index: &Index) -> ExitCode {
    if index.classes.iter().any(|c| c.status == ClassStatus::Infeasible) {
        ExitCode::Infeasible
    } else if index.classes.iter().any(|c| c.status == ClassStatus::LimitReached) {
        ExitCode::LimitReached
    } else {
        ExitCode::Ok
    }
}

fn print_summary(index: &Index, out: &Path, seconds: Option<f64>, json_out: bool) {
    let scheduled: Vec<_> = index.faults.iter().filter(|f| f.schedule.is_some()).collect();
    let worst = scheduled.iter().filter_map(|f| f.gap).fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.max(g))));
    let count = |s: ClassStatus| index.classes.iter().filter(|c| c.status == s).count();
    let verified = index.faults.iter().filter(|f| f.verified == Some(true)).count();
    if json_out {
        println!(
            "{}",
            json!({"output": out, "faults": index.faults.len(), "classes": index.classes.len(), "with_schedule": scheduled.len(),
                   "infeasible_classes": count(ClassStatus::Infeasible), "limit_reached_classes": count(ClassStatus::LimitReached),
                   "worst_gap": worst, "members_verified": verified, "seconds": seconds})
        );
        return;
    }
    println!(
        "wrote {}: {} faults in {} classes; {} faults with a schedule, worst gap {}, {} mapped members verified{}",
        out.join("index.json").display(),
        index.faults.len(),
        index.classes.len(),
        scheduled.len(),
        worst.map_or("-".to_string(), |g| format!("{:.2}%", 100.0 * g)),
        verified,
        seconds.map_or(String::new(), |s| format!(", in {s:.1} s"))
    );
    for c in index.classes.iter().filter(|c| c.status != ClassStatus::Ok) {
        let what = match c.status {
            ClassStatus::Infeasible => format!("infeasible: {}", c.reason.as_deref().unwrap_or("")),
            _ => format!("time limit reached; best schedule found: {}", c.schedule.as_ref().map_or("-".into(), |s| format_ns(s.time_ns))),
        };
        println!("class {} ({}, {} faults): {what}", c.class, c.name, c.members);
    }
    println!("summary: {}, gaps: {}, certificates: {}", out.join("summary.md").display(), out.join("gaps.svg").display(), out.join("certificates").display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_and_member_checks_parse_or_say_why() {
        assert_eq!(parse_shard("1/4").unwrap(), ShardInfo { index: 1, count: 4 });
        assert!(parse_shard("3/2").unwrap_err().message().contains("K must be below N"));
        assert!(parse_shard("0/0").unwrap_err().message().contains("at least 1"));
        assert!(parse_shard("a/2").is_err() && parse_shard("2").is_err());
        for odd in [" 1/3", "+1/3", "01/3", "1/ 3", "1/03", "-0/3", "/3"] {
            assert!(parse_shard(odd).unwrap_err().message().contains("plain digits"), "{odd}");
        }
        assert!(parse_shard("0/18446744073709551616").unwrap_err().message().contains("18446744073709551616 is too large"));
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(parse_member_check(&v(&["sample", "8"])).unwrap(), MemberCheck::Sample(8));
        assert_eq!(parse_member_check(&v(&["all"])).unwrap(), MemberCheck::All);
        assert_eq!(parse_member_check(&[]).unwrap(), MemberCheck::None);
        assert!(parse_member_check(&v(&["all", "spec.json"])).unwrap_err().message().contains("give SPEC before"));
    }
}
