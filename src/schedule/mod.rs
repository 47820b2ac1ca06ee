//! Schedules: ordered steps of transfers (docs/design/MODEL.md section 3) and the schedule file v1
//! (docs/design/FORMATS.md), read and written by streaming.

mod fast_step;
pub mod mapping;
mod read;
pub mod reverse;
mod scan;
mod write;

pub use read::{read_schedule, read_schedule_file, read_schedule_file_hashed, stream_schedule, stream_schedule_file, StepSink};
pub use write::{write_schedule, write_schedule_file, write_schedule_file_then, WriteSink};

use crate::collective::{Collective, PieceId};
use crate::topology::{LinkId, Topology};

/// `copy` replaces the receiver's value; `reduce` merges into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Replace the receiver's value with the carried one.
    Copy,
    /// Combine the carried value into the receiver's.
    Reduce,
}

impl Op {
    /// The file name (`copy`, `reduce`).
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Copy => "copy",
            Op::Reduce => "reduce",
        }
    }
}

/// One transfer: a path of links held for the whole step, an op, and the pieces it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// A walk from an npu to an npu (link ids).
    pub path: Vec<LinkId>,
    /// Copy or reduce.
    pub op: Op,
    /// Pieces carried.
    pub pieces: Vec<PieceId>,
}

impl Transfer {
    /// A transfer over one link.
    pub fn hop(link: LinkId, op: Op, pieces: Vec<PieceId>) -> Self {
        Transfer { path: vec![link], op, pieces }
    }
}

/// A set of transfers that run at the same time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// The transfers of the step.
    pub transfers: Vec<Transfer>,
}

impl Step {
    /// Transfers meant to run at once, as steps where no two transfers share a link
    /// (docs/design/MODEL.md rule 2): a single step unless multi-link paths (through switches)
    /// meet, first fit otherwise. The transfers must not depend on each other (none reads what
    /// another writes), since they may land in different steps in any order.
    pub fn without_shared_links(num_links: usize, transfers: Vec<Transfer>) -> Vec<Step> {
        let mut steps: Vec<Step> = Vec::new();
        let mut used: Vec<Vec<bool>> = Vec::new();
        for x in transfers {
            let fits = |u: &Vec<bool>| x.path.iter().all(|l| !u[l.index()]);
            let i = match used.iter().position(fits) {
                Some(i) => i,
                None => {
                    steps.push(Step::default());
                    used.push(vec![false; num_links]);
                    steps.len() - 1
                }
            };
            x.path.iter().for_each(|l| used[i][l.index()] = true);
            steps[i].transfers.push(x);
        }
        steps
    }
}

/// Everything in a schedule file but the steps.
#[derive(Clone, Debug)]
pub struct ScheduleHeader {
    /// The network, with its fault pattern (down links).
    pub topology: Topology,
    /// The collective.
    pub collective: Collective,
    /// Free-form information: algorithm, scheduler, choices made, spec hash.
    pub meta: Option<serde_json::Value>,
}

/// A whole schedule in memory.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Topology, collective, meta.
    pub header: ScheduleHeader,
    /// The steps in order.
    pub steps: Vec<Step>,
}

impl Schedule {
    /// Total piece-hops (pieces times links of their paths).
    pub fn piece_hops(&self) -> usize {
        self.steps.iter().flat_map(|s| &s.transfers).map(|t| t.pieces.len() * t.path.len()).sum()
    }

    /// The same schedule with every block cut into `pieces` (a multiple of its own P): piece
    /// `[.., k]` becomes the pieces `[.., k m]` to `[.., k m + m - 1]`, m = `pieces` / P, carried
    /// by the same transfers. Every block's pieces have one size (docs/design/MODEL.md section 2),
    /// so each transfer moves the same bytes: validity and cost carry over exactly. `None` when
    /// `pieces` is not a multiple of P.
    pub fn refined(&self, pieces: u32) -> Option<Schedule> {
        let p = self.header.collective.pieces;
        if p == 0 || pieces % p != 0 {
            return None;
        }
        let m = pieces / p;
        let cut = |q: &PieceId| {
            let mut parts = q.parts().to_vec();
            let last = parts.len() - 1;
            let k = parts[last];
            (k * m..(k + 1) * m).map(move |k| {
                parts[last] = k;
                PieceId::from_parts(&parts).expect("a piece id has two or three numbers")
            })
        };
        let steps = self
            .steps
            .iter()
            .map(|st| Step {
                transfers: st.transfers.iter().map(|t| Transfer { path: t.path.clone(), op: t.op, pieces: t.pieces.iter().flat_map(cut).collect() }).collect(),
            })
            .collect();
        let mut header = self.header.clone();
        header.collective.pieces = pieces;
        Some(Schedule { header, steps })
    }
}

#[cfg(test)]
mod tests {
    use crate::algorithms::{torus_all_to_all, RingAlgorithm, Scheduler};
    use crate::collective::{Collective, CollectiveKind};
    use crate::cost::SyncMeter;
    use crate::topology::{torus, TorusParams};
    use crate::verify::{verify_schedule, VerifyOptions};

    #[test]
    fn a_refined_schedule_moves_the_same_bytes_in_finer_pieces() {
        let t = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        let s = torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap();
        let p = s.header.collective.pieces;
        let cost = |s: &super::Schedule| {
            let mut m = SyncMeter::new(&s.header).unwrap();
            s.steps.iter().for_each(|st| m.step(st));
            m.finish().unwrap().time_ns()
        };
        let fine = s.refined(3 * p).unwrap();
        assert_eq!(fine.header.collective.pieces, 3 * p);
        assert_eq!(fine.piece_hops(), 3 * s.piece_hops());
        assert!(verify_schedule(&fine, &VerifyOptions::default()).unwrap().is_valid());
        assert_eq!(cost(&fine), cost(&s));
        assert!(s.refined(p + 1).is_none());
    }
}
