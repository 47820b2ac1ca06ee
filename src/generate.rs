//! `collsched generate`: runs the algorithm a spec names on the spec's instance.

use crate::algorithms::switched::{switched, Routing, SwitchedAlgorithm};
use crate::algorithms::{routed_all_to_all, torus_all_to_all, torus_mate, torus_ring_collective, HardwareRouting, RingAlgorithm, Scheduler};
use crate::collective::CollectiveKind;
use crate::error::{Error, Result};
use crate::schedule::Schedule;
use crate::spec::{MethodSpec, Spec};

/// The algorithm names that run on tori: docs/design/FORMATS.md's one-ring algorithms, and the
/// hardware-routed baselines `dor` and `wfr` (docs/design/ALGORITHMS.md, "Hardware-routed baselines").
const TORUS_ALGORITHMS: [&str; 5] = ["ring", "halfring", "foldedring", "dor", "wfr"];
/// The scheduler names of docs/design/FORMATS.md.
const SCHEDULERS: [&str; 5] = ["sequential", "pipeline", "dimrotation", "mate", "matee"];

/// Generates the schedule a spec's `method.generate` names.
pub fn from_spec(spec: &Spec) -> Result<Schedule> {
    let src = spec.path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "spec".into());
    let Some(MethodSpec::Generate(g)) = &spec.method else {
        return Err(Error::bad(format!("{src}: field `method`: `generate` needs {{\"generate\": {{\"algorithm\": ...}}}}")));
    };
    let inst = spec.instance()?;
    let t = &inst.topology;
    let c = &inst.collective;
    if t.torus_shape().is_none() {
        return switched_from_spec(&src, g, &inst);
    }
    if g.routing.is_some() {
        return Err(Error::bad(format!("{src}: field `method.generate.routing`: routing policies apply to switched topologies, not to a torus")));
    }
    let hardware = match g.algorithm.as_str() {
        "dor" => Some(HardwareRouting::Dor),
        "wfr" => Some(HardwareRouting::Wfr),
        _ => None,
    };
    if let Some(routing) = hardware {
        if g.scheduler.is_some() || g.chunks.is_some() {
            return Err(Error::bad(format!("{src}: algorithm \"{}\" routes every block in hardware: it takes no scheduler", g.algorithm)));
        }
        return routed_all_to_all(t, c, routing).map_err(|e| e.context(&src));
    }
    let algorithm = match g.algorithm.as_str() {
        "ring" => RingAlgorithm::Ring,
        "halfring" => RingAlgorithm::HalfRing,
        "foldedring" => RingAlgorithm::FoldedRing,
        other => {
            return Err(Error::bad(format!(
                "{src}: field `method.generate.algorithm` = \"{other}\": expected one of {} on a torus",
                TORUS_ALGORITHMS.join(", ")
            )))
        }
    };
    if c.kind != CollectiveKind::AllToAll {
        // The gathering and reducing kinds run dimension after dimension.
        if let Some(s) = g.scheduler.as_deref().filter(|&s| s != "sequential") {
            return Err(Error::bad(format!(
                "{src}: field `method.generate.scheduler` = \"{s}\": {} on a torus runs its rings dimension after dimension; leave the scheduler out or set \"sequential\"",
                c.kind
            )));
        }
        if let Some(chunks) = g.chunks {
            return Err(Error::bad(format!("{src}: field `method.generate.chunks` = {chunks}: only the all_to_all pipeline scheduler takes chunks")));
        }
        let schedule = torus_ring_collective(t, c, algorithm).map_err(|e| e.context(&src))?;
        return check_pieces(&src, &inst, &g.algorithm, schedule);
    }
    let scheduler = match (g.scheduler.as_deref(), g.chunks) {
        (None | Some("sequential"), None) => Scheduler::Sequential,
        (Some("pipeline"), chunks) => Scheduler::Pipeline { chunks: chunks.unwrap_or(6) },
        (Some("dimrotation"), None) => Scheduler::DimRotation,
        (Some(s @ ("mate" | "matee")), None) => {
            if algorithm != RingAlgorithm::HalfRing {
                return Err(Error::bad(format!(
                    "{src}: scheduler \"{s}\" runs HalfRing in the healthy rings: set `method.generate.algorithm` to \"halfring\""
                )));
            }
            let schedule = torus_mate(t, c, s == "matee").map_err(|e| e.context(&src))?;
            return check_pieces(&src, &inst, &g.algorithm, schedule);
        }
        (Some(other), None) if !SCHEDULERS.contains(&other) => {
            return Err(Error::bad(format!("{src}: field `method.generate.scheduler` = \"{other}\": expected one of {}", SCHEDULERS.join(", "))))
        }
        (_, Some(c)) => return Err(Error::bad(format!("{src}: field `method.generate.chunks` = {c}: only the pipeline scheduler takes chunks"))),
        (Some(other), None) => return Err(Error::bad(format!("{src}: scheduler \"{other}\" is not available"))),
    };
    if let Scheduler::Pipeline { chunks: 0 } = scheduler {
        return Err(Error::bad(format!("{src}: field `method.generate.chunks` = 0: needs at least 1")));
    }
    let schedule = torus_all_to_all(t, c, algorithm, scheduler).map_err(|e| e.context(&src))?;
    check_pieces(&src, &inst, &g.algorithm, schedule)
}

/// A spec that fixes `pieces` must agree with the granularity the algorithm chose.
fn check_pieces(src: &str, inst: &crate::spec::Instance, algorithm: &str, schedule: Schedule) -> Result<Schedule> {
    let chosen = schedule.header.collective.pieces;
    if inst.pieces_given && chosen != inst.collective.pieces {
        return Err(Error::bad(format!(
            "{src}: field `collective.pieces` = {}: {algorithm} with this scheduler cuts blocks into {chosen} pieces; remove the field or set it to {chosen}",
            inst.collective.pieces
        )));
    }
    Ok(schedule)
}

/// A switched algorithm (pairwise, bruck, ring, ...) on a topology with switches.
fn switched_from_spec(src: &str, g: &crate::spec::GenerateSpec, inst: &crate::spec::Instance) -> Result<Schedule> {
    let names = ["pairwise", "bruck", "ring", "halving_doubling", "double_binary_tree", "recursive_doubling", "recursive_halving"];
    let algorithm = SwitchedAlgorithm::parse(&g.algorithm).ok_or_else(|| {
        Error::bad(format!("{src}: field `method.generate.algorithm` = \"{}\": on a switched topology expected one of {}", g.algorithm, names.join(", ")))
    })?;
    if let Some(s) = &g.scheduler {
        return Err(Error::bad(format!(
            "{src}: field `method.generate.scheduler` = \"{s}\": schedulers compose torus dimensions; leave it out on a switched topology"
        )));
    }
    let routing = match g.routing.as_deref() {
        None | Some("balanced") => Routing::Balanced,
        Some("single_path") => Routing::SinglePath,
        Some(other) => return Err(Error::bad(format!("{src}: field `method.generate.routing` = \"{other}\": expected single_path or balanced"))),
    };
    let schedule = switched(&inst.topology, &inst.collective, algorithm, routing).map_err(|e| e.context(src))?;
    check_pieces(src, inst, &g.algorithm, schedule)
}
