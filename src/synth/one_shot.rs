//! One-shot all_reduce: in a single step every rank sends its whole contribution (every piece of
//! every block) to every other rank as a reduce, and every rank then holds every block reduced
//! (the contributions a rank receives are pairwise disjoint and disjoint from its own: rule 4 of
//! docs/design/MODEL.md section 4).
//!
//! It needs a single hop from every rank to every other (a direct link, or a path through
//! switches and npus outside the ranks), no two of them sharing a link (rule 2): two ranks on any
//! network that joins them both ways, a ring of 3, a fully connected network. Its bandwidth term
//! is the whole vector over one path, R/2 times the transmission-count bound, so it wins only
//! where a step's latency outweighs bytes: on two ranks always (one step against the
//! reduce-scatter's and the all-gather's two, with the same bytes over each link), and on a
//! complete network at small sizes (a 3-ring at 1 byte per rank: 100.03 ns against 200.02 ns).

use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::schedule::{Op, Step, Transfer};
use crate::topology::hops::HopGraph;
use crate::topology::Topology;

/// Above this many piece-transfers (ranks x (ranks - 1) x pieces) the one-shot schedule is not
/// built: it would lose to the others long before (64 fully connected ranks at 16 pieces per
/// block: 4.1 million).
const MAX_PIECE_TRANSFERS: usize = 1 << 22;

/// The one-shot all_reduce's single step, or `None` when `c` is not an all_reduce, the step
/// would be too large, or the single hops between the ranks cannot give every ordered pair a
/// path of its own (each pair takes the first of its hops whose links the pairs before it left
/// free).
pub fn one_shot(t: &Topology, c: &Collective) -> Option<Vec<Step>> {
    let r = c.num_ranks();
    if c.kind != CollectiveKind::AllReduce || r < 2 || r * (r - 1) * r * c.pieces as usize > MAX_PIECE_TRANSFERS {
        return None;
    }
    // Every rank needs r - 1 links up out of it or into a router; most tori fail here at once.
    if c.ranks.iter().any(|&a| t.up_out_links(a).count() < r - 1) {
        return None;
    }
    let hops = HopGraph::with_endpoints(t, &c.rank_mask(t));
    let pieces: Vec<PieceId> = c.pieces().collect();
    let mut used = vec![false; t.num_links()];
    let mut transfers = Vec::with_capacity(r * (r - 1));
    for &a in &c.ranks {
        for &b in c.ranks.iter().filter(|&&b| b != a) {
            let hop = hops.out[a.index()].iter().map(|&i| &hops.hops[i]).find(|h| h.to == b && h.path.iter().all(|l| !used[l.index()]))?;
            for l in &hop.path {
                used[l.index()] = true;
            }
            transfers.push(Transfer { path: hop.path.clone(), op: Op::Reduce, pieces: pieces.clone() });
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

    #[test]
    fn two_ranks_under_a_switch_reduce_in_one_step_and_more_would_share_its_links() {
        use crate::topology::{fat_tree, FatTreeParams, NodeId};
        let t =
            fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 4, board: None, bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })
                .unwrap();
        let c = |n: u32| Collective::new(CollectiveKind::AllReduce, (0..n).map(NodeId).collect(), 1024, 1, None, &t).unwrap();
        let steps = one_shot(&t, &c(2)).unwrap();
        assert!(steps[0].transfers.iter().all(|tr| tr.path.len() > 1), "through the switch");
        let s = crate::schedule::Schedule { header: crate::schedule::ScheduleHeader { topology: t.clone(), collective: c(2), meta: None }, steps };
        assert!(verify_schedule(&s, &VerifyOptions::default()).unwrap().is_valid());
        assert!(one_shot(&t, &c(3)).is_none(), "three ranks would share their up links");
    }
}
