//! Hardware-routed baselines on a torus (docs/design/ALGORITHMS.md): every block is one routed multi-hop
//! path through the npus' routers, not stored on the way, and all blocks are in flight at once.
//!
//! - DOR (dimension-order routing): correct dimension 0 fully, then 1, then 2, ...; in a ring
//!   the shorter way round (towards + on a tie).
//! - WFR (a fault-avoiding variant): route first in the dimensions that hold a failed cable, and
//!   in every ring go the way that avoids failed cables (the shorter such way).
//!
//! The schedule is one step of contention-heavy transfers: rule 2 reports the sharing (verify
//! such schedules with `allow_contention`), the event-driven cost shares link bandwidth among
//! them, and rule 7 finds the channel-dependency cycles of DOR on rings of four or more nodes.

use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::topology::{LinkId, NodeId, Topology, TorusShape};

/// Which routing function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HardwareRouting {
    /// Dimension-order routing.
    Dor,
    /// Faulty dimensions first, detouring around failed cables.
    Wfr,
}

impl HardwareRouting {
    /// The spec name (`dor`, `wfr`).
    pub fn as_str(self) -> &'static str {
        match self {
            HardwareRouting::Dor => "dor",
            HardwareRouting::Wfr => "wfr",
        }
    }
}

/// The links from `node` to coordinate `target` along `dim`, going `positive` or not; `None` when
/// a link on the way is missing or down.
fn walk(t: &Topology, s: &TorusShape, mut node: NodeId, dim: usize, target: usize, positive: bool) -> Option<Vec<LinkId>> {
    let mut links = Vec::new();
    while s.coord_in(node, dim) != target {
        let next = s.neighbor(node, dim, positive)?;
        let l = t.link_between(node, next)?;
        if !t.link(l).up {
            return None;
        }
        links.push(l);
        node = next;
    }
    Some(links)
}

/// The route of one block.
fn route(t: &Topology, s: &TorusShape, from: NodeId, to: NodeId, order: &[usize], avoid_faults: bool) -> Result<Vec<LinkId>> {
    let mut path = Vec::new();
    let mut at = from;
    for &dim in order {
        let target = s.coord_in(to, dim);
        let c = s.coord_in(at, dim);
        if c == target {
            continue;
        }
        let n = s.dims[dim];
        let forward = (target + n - c) % n;
        let prefer_plus = !s.is_ring(dim) && target > c || s.is_ring(dim) && forward <= n - forward;
        let tries = if avoid_faults { vec![prefer_plus, !prefer_plus] } else { vec![prefer_plus] };
        let mut found = None;
        for dir in tries {
            if let Some(links) = walk(t, s, at, dim, target, dir) {
                found = Some(links);
                break;
            }
        }
        let links = found.ok_or_else(|| {
            let (corner, dead) = (s.with_coord(at, dim, target), |n: NodeId| !t.out_links(n).any(|l| t.link(l).up));
            let why = if dead(corner) { format!("npu {} on the way has failed", t.node(corner).name) } else { "a cable on the way is down".to_string() };
            Error::infeasible(format!(
                "no {} route for the block from {} to {}: its leg along dimension {dim}, from {} to {}, is cut ({why})",
                if avoid_faults { "fault-avoiding" } else { "dimension-order" },
                t.node(from).name,
                t.node(to).name,
                t.node(at).name,
                t.node(corner).name
            ))
        })?;
        path.extend(links);
        at = s.with_coord(at, dim, target);
    }
    Ok(path)
}

/// Generates the DOR or WFR all-to-all on a torus: one step, one routed transfer per block.
pub fn routed_all_to_all(topology: &Topology, collective: &Collective, routing: HardwareRouting) -> Result<Schedule> {
    let s = topology.torus_shape().ok_or_else(|| Error::bad(format!("routing \"{}\" runs on a torus", routing.as_str())))?;
    if collective.kind != CollectiveKind::AllToAll {
        return Err(Error::bad(format!("routing \"{}\" generates all_to_all, not {}", routing.as_str(), collective.kind)));
    }
    let nd = s.ndims();
    let faulty: Vec<usize> = (0..nd)
        .filter(|&d| topology.links().any(|(_, l)| !l.up && matches!(l.class, crate::topology::LinkClass::TorusDim { dim, .. } if dim as usize == d)))
        .collect();
    let order: Vec<usize> = match routing {
        HardwareRouting::Dor => (0..nd).collect(),
        HardwareRouting::Wfr => faulty.iter().copied().chain((0..nd).filter(|d| !faulty.contains(d))).collect(),
    };
    let p = collective.pieces;
    let r = collective.num_ranks();
    let mut step = Step::default();
    for i in 0..r {
        for j in 0..r {
            if i == j {
                continue;
            }
            let path = route(topology, s, collective.ranks[i], collective.ranks[j], &order, routing == HardwareRouting::Wfr)?;
            let pieces = (0..p).map(|k| PieceId::a2a(i as u32, j as u32, k)).collect();
            step.transfers.push(Transfer { path, op: Op::Copy, pieces });
        }
    }
    let meta = serde_json::json!({
        "algorithm": routing.as_str(),
        "routing": "hardware",
        "dimension_order": order,
    });
    Ok(Schedule { header: ScheduleHeader { topology: topology.clone(), collective: collective.clone(), meta: Some(meta) }, steps: vec![step] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, FaultPattern, TorusParams};
    use crate::verify::{verify_schedule, Rule, VerifyOptions};

    fn a2a(t: &Topology) -> Collective {
        Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, t).unwrap()
    }

    #[test]
    fn dor_is_valid_with_contention_allowed() {
        for dims in [vec![4], vec![4, 4], vec![3, 5, 4], vec![4, 4, 4]] {
            let t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            let s = routed_all_to_all(&t, &a2a(&t), HardwareRouting::Dor).unwrap();
            let strict = verify_schedule(&s, &VerifyOptions::default()).unwrap();
            assert!(strict.findings.failures_of(Rule::LinkSharing) > 0, "{dims:?}");
            assert_eq!(strict.findings.failed_rules(), vec![Rule::LinkSharing], "{dims:?}");
            let allowed = verify_schedule(&s, &VerifyOptions { allow_contention: true, ..Default::default() }).unwrap();
            assert!(allowed.is_valid());
        }
    }

    #[test]
    fn dor_fails_on_a_fault_and_wfr_routes_around_it() {
        let mut t = torus(&TorusParams::uniform(&[4, 4, 4], 32.0, 100.0)).unwrap();
        let s = t.torus_shape().unwrap().clone();
        let (a, b) = (s.node_at(&[0, 0, 0]).unwrap(), s.node_at(&[1, 0, 0]).unwrap());
        FaultPattern { cables: vec![(a, b)], ..Default::default() }.apply(&mut t).unwrap();
        let e = routed_all_to_all(&t, &a2a(&t), HardwareRouting::Dor).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible);
        let w = routed_all_to_all(&t, &a2a(&t), HardwareRouting::Wfr).unwrap();
        let r = verify_schedule(&w, &VerifyOptions { allow_contention: true, ..Default::default() }).unwrap();
        assert!(r.is_valid(), "{:?}", r.findings.failures().first());
    }
}
