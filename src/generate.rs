//! `collsched generate`: runs the algorithm a spec names on the spec's instance.

use crate::algorithms::{routed_all_to_all, torus_all_to_all, HardwareRouting, RingAlgorithm, Scheduler};
use crate::collective::CollectiveKind;
use crate::error::{Error, Result};
use crate::schedule::Schedule;
use crate::spec::{MethodSpec, Spec};

/// The algorithm names that run on tori: FORMATS.md's one-ring algorithms, and the
/// hardware-routed baselines `dor` and `wfr` (ALGORITHMS.md, "Hardware-routed baselines").
const TORUS_ALGORITHMS: [&str; 5] = ["ring", "halfring", "foldedring", "dor", "wfr"];
/// The scheduler names of FORMATS.md.
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
    if t.torus_shape().is_none() {
        return Err(Error::bad(format!("{src}: algorithm \"{}\" runs on a torus; the topology is not one", g.algorithm)));
    }
    if c.kind != CollectiveKind::AllToAll {
        return Err(Error::bad(format!("{src}: algorithm \"{}\" on a torus generates all_to_all, not {}", g.algorithm, c.kind)));
    }
    let scheduler = match (g.scheduler.as_deref(), g.chunks) {
        (None | Some("sequential"), None) => Scheduler::Sequential,
        (Some("pipeline"), chunks) => Scheduler::Pipeline { chunks: chunks.unwrap_or(6) },
        (Some("dimrotation"), None) => Scheduler::DimRotation,
        (Some(s @ ("mate" | "matee")), _) => return Err(Error::bad(format!("{src}: scheduler \"{s}\" is not available in this version yet"))),
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
    if inst.pieces_given && schedule.header.collective.pieces != c.pieces {
        return Err(Error::bad(format!(
            "{src}: field `collective.pieces` = {}: {} with this scheduler cuts blocks into {} pieces; remove the field or set it to {}",
            c.pieces, g.algorithm, schedule.header.collective.pieces, schedule.header.collective.pieces
        )));
    }
    Ok(schedule)
}
