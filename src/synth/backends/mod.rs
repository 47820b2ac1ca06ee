//! The exact backends behind one small interface (good_lp's shape: one trait, one file per
//! backend): the time-expanded program is written once against [`Backend`], and the ILP
//! ([`IlpBackend`]: microlp, or HiGHS) and SMT (`SmtBackend`: z3) backends translate it, so they
//! can be checked against each other and swapped without touching the encoding. [`Solver`] names
//! a backend and builds it. microlp is always built; z3 (`smt`) and HiGHS (`highs`) are cargo
//! features, since they link or build C and C++ libraries.

mod ilp;
#[cfg(feature = "smt")]
mod smt;

pub use ilp::IlpBackend;
#[cfg(feature = "smt")]
pub use smt::SmtBackend;

use crate::error::{Error, Result};
pub use crate::spec::Solver;
use std::time::Duration;

/// A variable of a [`Backend`], numbered in creation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Var(pub usize);

/// A linear term: a variable times an integer coefficient.
pub type Term = (Var, i64);

/// Values of every variable, indexed by [`Var`] (booleans are 0 or 1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// One value per variable.
    pub values: Vec<i64>,
}

impl Model {
    /// The value of a variable.
    pub fn value(&self, v: Var) -> i64 {
        self.values[v.0]
    }
}

/// What a solve found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A solution.
    Sat(Model),
    /// The solver proved that no solution exists.
    Unsat,
    /// No answer within the limit (or the solver gave up); the reason is the solver's.
    Unknown(String),
}

/// A feasibility solver over bounded integer and 0-1 variables with linear constraints.
pub trait Backend {
    /// A short name for reports (`ilp-microlp`, `smt-z3`).
    fn name(&self) -> &'static str;
    /// A new integer variable with `lo <= x <= hi`.
    fn add_int_var(&mut self, lo: i64, hi: i64) -> Var;
    /// A new 0-1 variable.
    fn add_bool(&mut self) -> Var;
    /// Adds `sum(coefficient * variable) <= rhs`.
    fn add_linear_le(&mut self, terms: &[Term], rhs: i64);
    /// Adds `sum(coefficient * variable) == rhs`.
    fn add_linear_eq(&mut self, terms: &[Term], rhs: i64);
    /// Looks for a solution for at most `time_limit`. Call it once: a backend holds one program
    /// (the ILP backend hands it to the solver).
    fn solve(&mut self, time_limit: Duration) -> Outcome;
}

/// Where `Solver::Auto` switches from microlp to z3 on flow programs. Measured in release on this
/// machine (search from the bound to the first feasible horizon): microlp was faster on rings
/// 4-8, 3x3 and rings with a failed cable up to 694 variables (ring 8: 0.07 s vs 0.81 s; 3x3:
/// 0.02 s vs 2.28 s); z3 on the faulty 3x3 (708 variables: 0.06 s vs 0.25 s) and the faulty ring
/// 8 (1302: 0.37 s vs 1.67 s).
pub const AUTO_ILP_VARIABLES: usize = 700;

/// The largest program (0-1 variables) the fewest-steps search gives microlp (and HiGHS, not
/// measured on this machine), either family. Measured (release, 2 busy cores, one horizon):
/// all_to_all on a 3x4 torus, 2,256 variables, feasible in 43 s, with a failed cable (2,156) in
/// 84 s; all_reduce on a ring of 6, 3,096, in 99 s; a line of 5 at 2,800 and the all_gather of a
/// fat tree at 3,440 gave no answer in 120 s.
pub const ILP_MAX_VARIABLES: usize = 2_500;

/// The largest set program (0-1 variables) the fewest-steps search gives z3 (Debian's 4.8.12).
/// Measured like [`ILP_MAX_VARIABLES`]: all_gather on a 6x6 torus, 29,952 variables, feasible
/// in 43 s (microlp: no answer in 140 s); all_reduce on a 3x3 torus with a failed cable, 16,101,
/// in 15 s; a 16-npu fat tree's all_gather, 172,176, no answer in 250 s.
pub const SMT_MAX_SET_VARIABLES: usize = 40_000;

/// The largest flow program z3 is given: all_to_all on a 3x4 torus, 2,156-2,256 variables, gave
/// no answer in 120 s, where microlp answered.
pub const SMT_MAX_FLOW_VARIABLES: usize = 2_000;

/// The shape of an exact program, which decides which backend copes with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramFamily {
    /// Flows aggregated per destination (all_to_all): a node's holding is a sum of sends.
    Flows,
    /// Sets: 0-1 holdings per piece (all_gather, reduce_scatter) or per contribution (all_reduce).
    Sets,
}

impl Solver {
    /// Whether this build has the backend (`smt` and `highs` are cargo features).
    pub fn is_built(self) -> bool {
        match self {
            Solver::Auto | Solver::Ilp => true,
            Solver::Smt => cfg!(feature = "smt"),
            Solver::Highs => cfg!(feature = "highs"),
        }
    }

    /// Bad input (exit 2) naming `field` when this build lacks the backend, with how to get it.
    pub fn check_built(self, field: &str) -> Result<()> {
        match self {
            _ if self.is_built() => Ok(()),
            Solver::Smt => Err(Error::bad(format!(
                "{field} = \"smt\": this build has no SMT backend; install libz3 (`apt-get install -y libz3-dev`) and build with `cargo build --release --features smt`"
            ))),
            _ => Err(Error::bad(format!(
                "{field} = \"highs\": this build has no HiGHS backend; install cmake and libclang (`apt-get install -y cmake libclang-dev`) and build with `cargo build --release --features highs`"
            ))),
        }
    }

    /// The concrete backend for a program of `family` with `variables` 0-1 variables: for set
    /// programs z3 whenever this build has it (it took programs ten times larger than microlp:
    /// [`SMT_MAX_SET_VARIABLES`]), for flow programs [`Solver::resolve`] within z3's cap.
    pub fn resolve_for(self, family: ProgramFamily, variables: usize) -> Solver {
        match (self, family) {
            (Solver::Auto, ProgramFamily::Sets) if Solver::Smt.is_built() => Solver::Smt,
            (Solver::Auto, ProgramFamily::Flows) if variables > SMT_MAX_FLOW_VARIABLES => Solver::Ilp,
            _ => self.resolve(variables),
        }
    }

    /// The largest program of `family` the fewest-steps search gives this backend (a concrete
    /// one: [`Solver::resolve_for`] first); above, it reports a gap rather than spend the time
    /// limit on a program that, measured, does not finish in it.
    pub fn max_variables(self, family: ProgramFamily) -> usize {
        match (self, family) {
            (Solver::Smt, ProgramFamily::Sets) => SMT_MAX_SET_VARIABLES,
            (Solver::Smt, ProgramFamily::Flows) => SMT_MAX_FLOW_VARIABLES,
            _ => ILP_MAX_VARIABLES,
        }
    }

    /// The concrete backend for a program of `variables` 0-1 variables.
    pub fn resolve(self, variables: usize) -> Solver {
        match self {
            Solver::Auto if variables <= AUTO_ILP_VARIABLES || !Solver::Smt.is_built() => Solver::Ilp,
            Solver::Auto => Solver::Smt,
            s => s,
        }
    }

    /// The backend; an error only for a backend this build lacks (see [`Solver::check_built`]).
    pub fn backend(self, variables: usize) -> Result<Box<dyn Backend>> {
        let solver = self.resolve(variables);
        solver.check_built("solver")?;
        Ok(match solver {
            #[cfg(feature = "smt")]
            Solver::Smt => Box::new(SmtBackend::new()),
            #[cfg(feature = "highs")]
            Solver::Highs => Box::new(IlpBackend::highs()),
            _ => Box::new(IlpBackend::new()),
        })
    }
}
