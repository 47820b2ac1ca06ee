//! Synthesis: contention-free store-and-forward schedules for an instance (topology, faults,
//! collective), each verified before it is returned, with how far it is from the certified bound.
//!
//! One module per strategy:
//! - [`steps`]: the fewest steps, one piece per link per step (exact search over the
//!   time-expanded program from the certified lower bound upward, a list-scheduled incumbent);
//! - [`routing`]: time-expanded routing over pieces per block and horizons, for the best
//!   step-synchronous time at the collective's size (all_to_all);
//! - [`trees`]: all_gather, reduce_scatter and all_reduce on any topology by layered
//!   shortest-path trees balanced per step (on a healthy torus: the certified bound);
//! - [`planes`]: all_to_all on 3-D tori too large for the flat routing, one plane's routing run
//!   in every plane, with the lines in step;
//! - [`one_shot`]: all_reduce in one step where every rank has a link to every other (two
//!   ranks, small sizes on a complete network);
//! - [`spreading`]: all_gather, reduce_scatter and all_reduce on any topology by spreading trees
//!   (and their time reversal);
//! - [`switched`]: route-and-step on fat trees and other switched networks, every kind;
//! - [`backends`]: the exact solvers behind one interface (microlp; z3 and HiGHS as features);
//! - [`portfolio`]: what `collsched synthesize` answers: the fastest verified candidate of the
//!   strategies above and of the hand-written algorithms that fit, and the trade-off behind it.
//!
//! `topology::hops` (the single hops of docs/design/MODEL.md section 3) is shared by all of them
//! and by the MSCCL import.

pub mod backends;
pub mod frames;
pub mod one_shot;
pub mod planes;
pub mod portfolio;
pub mod routing;
pub mod spreading;
pub mod steps;
pub mod switched;
pub mod trees;

pub use backends::Solver;
pub use steps::{fewest_steps_exact_with, steps_lower_bound, synthesize_steps, SynthReport, SynthStatus};

use std::time::Duration;

/// Limits of a synthesis.
#[derive(Clone, Debug)]
pub struct SynthOptions {
    /// The exact backend.
    pub solver: Solver,
    /// Wall-clock budget of the whole search (the heuristic always runs to completion).
    pub time_limit: Duration,
    /// Do not return schedules with more steps than this.
    pub max_steps: Option<u32>,
    /// Verify and list every candidate even once the search's deadline has passed (what the
    /// steps/time trade-off of `--pareto` needs); otherwise, past the deadline, candidates that
    /// cannot beat the best verified one are left out.
    pub verify_every_candidate: bool,
    /// Price a synthesized candidate of at least this many piece-hops by one pass over its
    /// transfers and leave the chosen one's verification to the caller
    /// ([`Answer::deferred`](crate::Answer::deferred),
    /// [`verify_deferred`](crate::verify_deferred)), who can run it while writing the file;
    /// `None`: verify every candidate as it comes. The CLI defers from
    /// [`DEFERRED_PIECE_HOPS`](crate::DEFERRED_PIECE_HOPS).
    pub defer_verification_from: Option<u64>,
}

impl Default for SynthOptions {
    fn default() -> Self {
        SynthOptions {
            solver: Solver::Auto,
            time_limit: Duration::from_secs(60),
            max_steps: None,
            verify_every_candidate: false,
            defer_verification_from: None,
        }
    }
}

/// Events of a running synthesis, for a progress display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The certified lower bound.
    LowerBound(u32),
    /// The heuristic's schedule (verified).
    Heuristic(u32),
    /// The exact program for this many steps, with this many variables, goes to the solver.
    Solving {
        /// The horizon.
        steps: u32,
        /// Its 0-1 variables.
        variables: usize,
    },
    /// The solver answered for a horizon: `Some(true)` feasible, `Some(false)` infeasible,
    /// `None` no answer in time.
    Answered {
        /// The horizon.
        steps: u32,
        /// The answer.
        feasible: Option<bool>,
    },
    /// A candidate or phase of the time objective (a line for a progress display).
    Trying(String),
}
