//! `collsched generate`: runs the algorithm a spec names on the spec's instance.

use crate::algorithms::switched::{switched, SwitchedAlgorithm};
use crate::algorithms::{routed_all_to_all, torus_all_to_all, torus_mate, torus_ring_collective, HardwareRouting, RingAlgorithm, Scheduler};
use crate::collective::CollectiveKind;
use crate::error::{Error, Result};
use crate::schedule::Schedule;
use crate::spec::{Algorithm, GenerateSpec, Instance, MethodSpec, Routing, SchedulerName, Spec};

/// Generates the schedule a spec's `method.generate` names.
pub fn from_spec(spec: &Spec) -> Result<Schedule> {
    let src = spec.path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "spec".into());
    let Some(MethodSpec::Generate(g)) = &spec.method else {
        return Err(Error::bad(format!("{src}: field `method`: `generate` needs {{\"generate\": {{\"algorithm\": ...}}}}")));
    };
    let inst = spec.instance()?;
    let schedule = if inst.topology.torus_shape().is_some() { torus_from_spec(&src, g, &inst)? } else { switched_from_spec(&src, g, &inst)? };
    check_pieces(&src, &inst, g.algorithm, schedule)
}

/// Whether the method's schedules share links by design: the hardware-routed baselines on a
/// torus and single-path routing on switched networks (docs/design/MODEL.md rule 2: written and
/// costed, the sharing reported rather than failed).
pub fn shares_links_by_design(g: &GenerateSpec) -> bool {
    g.algorithm.shares_links() || g.routing == Some(Routing::SinglePath)
}

/// The torus algorithms: the rings of docs/design/ALGORITHMS.md under a scheduler, MATE and MATEe,
/// and the hardware-routed baselines.
fn torus_from_spec(src: &str, g: &GenerateSpec, inst: &Instance) -> Result<Schedule> {
    let (t, c) = (&inst.topology, &inst.collective);
    if g.routing.is_some() {
        return Err(Error::bad(format!("{src}: field `method.generate.routing`: routing policies apply to switched topologies, not to a torus")));
    }
    let algorithm = match g.algorithm {
        Algorithm::Ring => RingAlgorithm::Ring,
        Algorithm::HalfRing => RingAlgorithm::HalfRing,
        Algorithm::FoldedRing => RingAlgorithm::FoldedRing,
        Algorithm::Dor | Algorithm::Wfr => {
            if g.scheduler.is_some() || g.chunks.is_some() {
                return Err(Error::bad(format!("{src}: algorithm \"{}\" routes every block in hardware: it takes no scheduler", g.algorithm)));
            }
            let routing = if g.algorithm == Algorithm::Dor { HardwareRouting::Dor } else { HardwareRouting::Wfr };
            return routed_all_to_all(t, c, routing).map_err(|e| e.context(src));
        }
        other => {
            let on_torus = [Algorithm::Ring, Algorithm::HalfRing, Algorithm::FoldedRing, Algorithm::Dor, Algorithm::Wfr];
            return Err(Error::bad(format!(
                "{src}: field `method.generate.algorithm` = \"{other}\": on a torus expected one of {}",
                on_torus.map(Algorithm::name).join(", ")
            )));
        }
    };
    if c.kind != CollectiveKind::AllToAll {
        // The gathering and reducing kinds run dimension after dimension.
        if let Some(s) = g.scheduler.filter(|&s| s != SchedulerName::Sequential) {
            return Err(Error::bad(format!(
                "{src}: field `method.generate.scheduler` = \"{s}\": {} on a torus runs its rings dimension after dimension; leave the scheduler out or set \"sequential\"",
                c.kind
            )));
        }
        if let Some(chunks) = g.chunks {
            return Err(Error::bad(format!("{src}: field `method.generate.chunks` = {chunks}: only the all_to_all pipeline scheduler takes chunks")));
        }
        return torus_ring_collective(t, c, algorithm).map_err(|e| e.context(src));
    }
    // FORMATS.md, `method`: the scheduler may be left out on a one-dimensional torus only; with
    // more dimensions (of size > 1) the choice is the user's, never a silent Sequential.
    let shape = t.torus_shape().expect("a torus");
    let used = (0..shape.ndims()).filter(|&d| shape.dims[d] > 1).count();
    if g.scheduler.is_none() && used > 1 {
        let dims: Vec<String> = shape.dims.iter().map(|d| d.to_string()).collect();
        return Err(Error::bad(format!(
            "{src}: field `method.generate.scheduler` is missing: an all_to_all on a torus of {used} dimensions ({}) needs one of {} \
             (`--scheduler` on the command line)",
            dims.join("x"),
            SchedulerName::NAMES.join(", ")
        )));
    }
    let scheduler = match (g.scheduler, g.chunks) {
        (Some(s @ (SchedulerName::Mate | SchedulerName::Matee)), None) => {
            if algorithm != RingAlgorithm::HalfRing {
                return Err(Error::bad(format!(
                    "{src}: scheduler \"{s}\" runs HalfRing in the healthy rings: set `method.generate.algorithm` to \"halfring\""
                )));
            }
            return torus_mate(t, c, s == SchedulerName::Matee).map_err(|e| e.context(src));
        }
        (None | Some(SchedulerName::Sequential), None) => Scheduler::Sequential,
        (Some(SchedulerName::DimRotation), None) => Scheduler::DimRotation,
        (Some(SchedulerName::Pipeline), Some(0)) => return Err(Error::bad(format!("{src}: field `method.generate.chunks` = 0: needs at least 1"))),
        (Some(SchedulerName::Pipeline), chunks) => Scheduler::Pipeline { chunks: chunks.unwrap_or(6) },
        (_, Some(c)) => return Err(Error::bad(format!("{src}: field `method.generate.chunks` = {c}: only the pipeline scheduler takes chunks"))),
    };
    torus_all_to_all(t, c, algorithm, scheduler).map_err(|e| e.context(src))
}

/// A switched algorithm (pairwise, bruck, ring, ...) on a topology that is not a torus.
fn switched_from_spec(src: &str, g: &GenerateSpec, inst: &Instance) -> Result<Schedule> {
    let algorithm = match g.algorithm {
        Algorithm::Pairwise => SwitchedAlgorithm::Pairwise,
        Algorithm::Bruck => SwitchedAlgorithm::Bruck,
        Algorithm::Ring => SwitchedAlgorithm::Ring,
        Algorithm::HalvingDoubling => SwitchedAlgorithm::HalvingDoubling,
        Algorithm::DoubleBinaryTree => SwitchedAlgorithm::DoubleBinaryTree,
        Algorithm::RecursiveDoubling => SwitchedAlgorithm::RecursiveDoubling,
        Algorithm::RecursiveHalving => SwitchedAlgorithm::RecursiveHalving,
        other => {
            let names: Vec<&str> = SwitchedAlgorithm::ALL.iter().map(|a| a.as_str()).collect();
            return Err(Error::bad(format!(
                "{src}: field `method.generate.algorithm` = \"{other}\": the topology is not a torus (it has switches, fully connected dimensions or custom links), where the algorithms are {}",
                names.join(", ")
            )));
        }
    };
    if let Some(s) = g.scheduler {
        return Err(Error::bad(format!(
            "{src}: field `method.generate.scheduler` = \"{s}\": schedulers compose torus dimensions; leave it out on a switched topology"
        )));
    }
    let routing = g.routing.unwrap_or(Routing::Balanced);
    // Only the double binary tree pipelines (ALGORITHMS.md, switched table): its chunks per tree
    // give the pieces, two trees of `chunks` each.
    let mut collective = inst.collective.clone();
    match (algorithm, g.chunks) {
        (_, None) => {}
        (SwitchedAlgorithm::DoubleBinaryTree, Some(0)) => return Err(Error::bad(format!("{src}: field `method.generate.chunks` = 0: needs at least 1"))),
        (SwitchedAlgorithm::DoubleBinaryTree, Some(chunks)) => {
            let pieces = chunks.checked_mul(2).and_then(|p| u32::try_from(p).ok()).filter(|&p| p <= crate::collective::MAX_PIECES).ok_or_else(|| {
                Error::bad(format!(
                    "{src}: field `method.generate.chunks` = {chunks}: makes {} pieces per block (two trees), more than {}",
                    chunks as u128 * 2,
                    crate::collective::MAX_PIECES
                ))
            })?;
            if inst.pieces_given && inst.collective.pieces != pieces {
                return Err(Error::bad(format!(
                    "{src}: field `collective.pieces` = {}: `method.generate.chunks` = {chunks} makes {pieces} pieces per block (two trees); remove one of the fields or make them agree",
                    inst.collective.pieces
                )));
            }
            collective.pieces = pieces;
        }
        (_, Some(1)) => {}
        (_, Some(c)) => {
            return Err(Error::bad(format!(
                "{src}: field `method.generate.chunks` = {c}: {} does not pipeline; on a switched topology only double_binary_tree takes chunks",
                algorithm.as_str()
            )))
        }
    }
    switched(&inst.topology, &collective, algorithm, routing).map_err(|e| e.context(src))
}

/// A spec that fixes `pieces` must agree with the granularity the algorithm chose.
fn check_pieces(src: &str, inst: &Instance, algorithm: Algorithm, schedule: Schedule) -> Result<Schedule> {
    let chosen = schedule.header.collective.pieces;
    if inst.pieces_given && chosen != inst.collective.pieces {
        return Err(Error::bad(format!(
            "{src}: field `collective.pieces` = {}: {algorithm} with this scheduler cuts blocks into {chosen} pieces; remove the field or set it to {chosen}",
            inst.collective.pieces
        )));
    }
    Ok(schedule)
}
