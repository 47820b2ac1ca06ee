//! One-shot all_reduce: in a single step every rank sends its whole contribution (every piece of
//! every block) to every other rank, each over its own direct link, as a reduce, and every rank
//! then holds every block reduced (the contributions a rank receives are pairwise disjoint and
//! disjoint from its own: rule 4 of docs/design/MODEL.md section 4).
//!
//! It needs a link up from every rank to every other (two ranks, a ring of 3, a fully connected
//! network). Its bandwidth term is the whole vector over one link, R/2 times the transmission
//! bound, so it wins only where a step's latency outweighs bytes: on two ranks always (one step
//! against the reduce-scatter's and the all-gather's two, with the same bytes over each link), and
//! on a complete network at small sizes (a 3-ring at 1 byte per rank: 100.03 ns against 200.02 ns).

use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::schedule::{Op, Step, Transfer};
use crate::topology::Topology;

/// Above this many piece-transfers (ranks x (ranks - 1) x pieces) the one-shot schedule is not
/// built: it would lose to the others long before (64 fully connected ranks at 16 pieces per
/// block: 4.1 million).
const MAX_PIECE_TRANSFERS: usize = 1 << 22;

/// The one-shot all_reduce's single step, or `None` when `c` is not an all_reduce, some rank has
/// no link up to some other, or the step would be too large.
pub fn one_shot(t: &Topology, c: &Collective) -> Option<Vec<Step>> {
    let r = c.num_ranks();
    if c.kind != CollectiveKind::AllReduce || r < 2 || r * (r - 1) * r * c.pieces as usize > MAX_PIECE_TRANSFERS {
        return None;
    }
    let pieces: Vec<PieceId> = c.pieces().collect();
    let mut transfers = Vec::with_capacity(r * (r - 1));
    for &a in &c.ranks {
        for &b in c.ranks.iter().filter(|&&b| b != a) {
            let link = t.out_links(a).filter(|&l| t.link(l).up && t.link(l).dst == b).min()?;
            transfers.push(Transfer { path: vec![link], op: Op::Reduce, pieces: pieces.clone() });
        }
    }
    Some(vec![Step { transfers }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, TorusParams};
    use crate::verify::{verify_schedule, VerifyOptions};

    fn verified(dims: &[usize], bytes: u64) -> Option<crate::verify::Report> {
        let t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
        let c = Collective::new(CollectiveKind::AllReduce, t.node_ids().collect(), bytes, 2, None, &t).unwrap();
        let steps = one_shot(&t, &c)?;
        let s = crate::schedule::Schedule { header: crate::schedule::ScheduleHeader { topology: t, collective: c, meta: None }, steps };
        Some(verify_schedule(&s, &VerifyOptions::default()).unwrap())
    }

    #[test]
    fn complete_networks_reduce_in_one_step() {
        for dims in [&[2][..], &[3], &[2, 2, 2][..]] {
            let r = verified(dims, 3000);
            // A 2x2x2 torus is not complete: (0,0,0) has no link to (1,1,1).
            assert_eq!(r.is_some(), dims.len() == 1, "{dims:?}");
            if let Some(r) = r {
                assert!(r.is_valid(), "{dims:?}: {:?}", r.findings.failures().first());
                assert_eq!(r.stats.steps, 1);
            }
        }
        assert!(verified(&[4], 3000).is_none(), "a 4-ring is not complete");
    }
}
