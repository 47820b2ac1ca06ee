//! Carries a schedule through a symmetry: every transfer's path link by link, every piece id by
//! where its ranks go, so that the image is a schedule for the image of the fault pattern,
//! valid exactly when the original is and costing exactly the same.

use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::{Schedule, ScheduleHeader, Step, Transfer};
use crate::topology::symmetry::Automorphism;
use crate::topology::Topology;

/// The image of `s` under `g`, on `topology` (the same network with the image of the fault
/// pattern applied). Ranks keep their order; a piece id follows its rank indices (docs/design/
/// FORMATS.md: piece ids use positions in `ranks`), so the rank at position `i` going to node
/// `g(ranks[i])`, at position `i'`, turns `[i, j, k]` into `[i', j', k]`.
///
/// Errors: a symmetry that does not map the ranks onto themselves, or a topology of another
/// size than the schedule's.
pub fn map_schedule(s: &Schedule, g: &Automorphism, topology: Topology) -> Result<Schedule> {
    let c = &s.header.collective;
    if topology.num_nodes() != s.header.topology.num_nodes() || topology.num_links() != s.header.topology.num_links() {
        return Err(Error::internal("a schedule mapped onto a topology of another size"));
    }
    let rank_to: Vec<u32> = c
        .ranks
        .iter()
        .map(|&r| {
            c.rank_index(g.node(r))
                .map(|i| i as u32)
                .ok_or_else(|| Error::internal(format!("the symmetry sends rank node {r} to node {}, which is no rank", g.node(r))))
        })
        .collect::<Result<_>>()?;
    let block_bytes = c.block_bytes.as_ref().map(|bb| {
        let mut out = vec![vec![0; bb.len()]; bb.len()];
        for (i, row) in bb.iter().enumerate() {
            for (j, &b) in row.iter().enumerate() {
                out[rank_to[i] as usize][rank_to[j] as usize] = b;
            }
        }
        out
    });
    let collective = Collective::new(c.kind, c.ranks.clone(), c.bytes_per_rank, c.pieces, block_bytes, &topology)?;
    let piece = |p: &PieceId| match (c.kind, &*p.parts()) {
        (CollectiveKind::AllToAll, &[i, j, k]) => PieceId::a2a(rank_to[i as usize], rank_to[j as usize], k),
        (_, &[x, k]) => PieceId::block(rank_to[x as usize], k),
        _ => *p,
    };
    let steps = s
        .steps
        .iter()
        .map(|st| Step {
            transfers: st
                .transfers
                .iter()
                .map(|t| Transfer { path: t.path.iter().map(|&l| g.link(l)).collect(), op: t.op, pieces: t.pieces.iter().map(piece).collect() })
                .collect(),
        })
        .collect();
    Ok(Schedule { header: ScheduleHeader { topology, collective, meta: s.header.meta.clone() }, steps })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Instance;
    use crate::sweep::patterns::Cables;
    use crate::synth::portfolio::{synthesize, Objective};
    use crate::synth::SynthOptions;
    use crate::topology::symmetry::SymmetryGroup;
    use crate::topology::{torus, FaultPattern, NodeId, TorusParams};
    use crate::verify::{verify_schedule, VerifyOptions};
    use proptest::prelude::*;
    use std::time::Duration;

    fn with_cables(t: &Topology, cables: &[(NodeId, NodeId)]) -> Topology {
        let mut t = t.clone();
        FaultPattern { cables: cables.to_vec(), ..Default::default() }.apply(&mut t).unwrap();
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// A synthesized schedule for a random cable, carried by a random symmetry onto the image
        /// of that cable, verifies and costs exactly what the original costs.
        #[test]
        fn mapped_schedules_verify_and_cost_the_same(
            dims in prop::sample::select(vec![vec![3usize, 3], vec![4, 3], vec![4, 4], vec![5], vec![2, 3, 2]]),
            kind in prop::sample::select(CollectiveKind::ALL.to_vec()),
            cable_pick in any::<prop::sample::Index>(),
            word in prop::collection::vec(any::<u16>(), 0..12),
        ) {
            let healthy = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
            let cables = Cables::of(&healthy);
            let cable = cables.ends(cable_pick.index(cables.len()) as u32);
            let group = SymmetryGroup::of(&healthy).unwrap();
            let word: Vec<u16> = word.iter().map(|&w| w % group.generators.len() as u16).collect();
            let g = group.element(&healthy, &word);
            let image = (g.node(cable.0), g.node(cable.1));
            let faulty = with_cables(&healthy, &[cable]);
            let c = Collective::new(kind, healthy.node_ids().collect(), 1 << 16, 1, None, &faulty).unwrap();
            let inst = Instance { topology: faulty, collective: c, pieces_given: false };
            let opts = SynthOptions { time_limit: Duration::from_secs(20), ..Default::default() };
            let answer = synthesize(&inst, &opts, Objective::Time, &mut |_| {}).unwrap();
            let mapped = map_schedule(&answer.schedule, &g, with_cables(&healthy, &[image])).unwrap();
            let before = verify_schedule(&answer.schedule, &VerifyOptions::default()).unwrap();
            let after = verify_schedule(&mapped, &VerifyOptions::default()).unwrap();
            prop_assert!(after.is_valid(), "{:?}", after.findings.failures().first());
            let (b, a) = (before.cost.unwrap(), after.cost.unwrap());
            prop_assert_eq!(b.time_ns(), a.time_ns());
            prop_assert_eq!(b.bandwidth_ns(), a.bandwidth_ns());
            // Paths mapped but pieces left as they were: wrong as soon as a rank moves (a piece
            // then starts or ends at the wrong rank), except for all_reduce, where every block
            // starts and ends everywhere and any relabelling of blocks is as good.
            if !g.is_identity() && kind != CollectiveKind::AllReduce {
                let mut wrong = mapped.clone();
                for (w, o) in wrong.steps.iter_mut().zip(&answer.schedule.steps) {
                    for (wt, ot) in w.transfers.iter_mut().zip(&o.transfers) {
                        wt.pieces = ot.pieces.clone();
                    }
                }
                prop_assert!(!verify_schedule(&wrong, &VerifyOptions::default()).unwrap().is_valid());
            }
        }
    }
}
