//! Schedules: ordered steps of transfers (docs/design/MODEL.md section 3) and the schedule file v1
//! (docs/design/FORMATS.md), read and written by streaming.

mod fast_step;
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
}
