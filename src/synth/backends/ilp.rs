//! The ILP backend: good_lp with microlp (pure Rust branch and bound), or with HiGHS behind the
//! opt-in cargo feature `highs` (a C++ build that needs cmake and libclang: docs/design/DEPENDENCIES.md), a
//! zero objective.

use super::{Backend, Model, Outcome, Term, Var};
use good_lp::{constraint, microlp, variable, Constraint, Expression, ProblemVariables, ResolutionError, Solution, SolverModel, Variable, WithTimeLimit};
use std::time::Duration;

/// The MILP solver behind an [`IlpBackend`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MilpSolver {
    Microlp,
    #[cfg(feature = "highs")]
    Highs,
}

/// A 0-1/integer feasibility program solved through good_lp (microlp by default).
pub struct IlpBackend {
    solver: MilpSolver,
    problem: ProblemVariables,
    vars: Vec<Variable>,
    constraints: Vec<Constraint>,
}

impl Default for IlpBackend {
    fn default() -> Self {
        IlpBackend { solver: MilpSolver::Microlp, problem: ProblemVariables::new(), vars: Vec::new(), constraints: Vec::new() }
    }
}

impl IlpBackend {
    /// An empty program for microlp.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty program for HiGHS (cargo feature `highs`).
    #[cfg(feature = "highs")]
    pub fn highs() -> Self {
        IlpBackend { solver: MilpSolver::Highs, ..Self::default() }
    }

    fn expression(&self, terms: &[Term]) -> Expression {
        let mut e = Expression::from(0.0);
        for &(v, c) in terms {
            e.add_mul(c as f64, self.vars[v.0]);
        }
        e
    }
}

/// Adds the constraints to a solver's model, solves it and reads the values of `vars`.
fn run<M>(mut model: M, constraints: Vec<Constraint>, vars: &[Variable], solver: &str) -> Outcome
where
    M: SolverModel<Error = ResolutionError>,
{
    for c in constraints {
        model.add_constraint(c);
    }
    match model.solve() {
        // A feasible point of a zero objective is optimal, whatever status the solver reports
        // (microlp and HiGHS return a solution only when they hold a feasible one).
        Ok(sol) => Outcome::Sat(Model { values: vars.iter().map(|&v| sol.value(v).round() as i64).collect() }),
        Err(ResolutionError::Infeasible) => Outcome::Unsat,
        Err(e) => Outcome::Unknown(format!("{solver}: {e}")),
    }
}

impl Backend for IlpBackend {
    fn name(&self) -> &'static str {
        match self.solver {
            MilpSolver::Microlp => "ilp-microlp",
            #[cfg(feature = "highs")]
            MilpSolver::Highs => "ilp-highs",
        }
    }

    fn add_int_var(&mut self, lo: i64, hi: i64) -> Var {
        self.vars.push(self.problem.add(variable().integer().min(lo as f64).max(hi as f64)));
        Var(self.vars.len() - 1)
    }

    fn add_bool(&mut self) -> Var {
        self.vars.push(self.problem.add(variable().binary()));
        Var(self.vars.len() - 1)
    }

    fn add_linear_le(&mut self, terms: &[Term], rhs: i64) {
        let c = constraint::leq(self.expression(terms), rhs as f64);
        self.constraints.push(c);
    }

    fn add_linear_eq(&mut self, terms: &[Term], rhs: i64) {
        let c = constraint::eq(self.expression(terms), rhs as f64);
        self.constraints.push(c);
    }

    fn solve(&mut self, time_limit: Duration) -> Outcome {
        // good_lp consumes the program: a backend solves once (the search builds one per step
        // count anyway, since the horizon changes every variable).
        let problem = std::mem::take(&mut self.problem);
        let constraints = std::mem::take(&mut self.constraints);
        let seconds = time_limit.as_secs_f64();
        let unsolved = problem.minimise(Expression::from(0.0));
        match self.solver {
            MilpSolver::Microlp => run(unsolved.using(microlp).with_time_limit(seconds), constraints, &self.vars, "microlp"),
            #[cfg(feature = "highs")]
            MilpSolver::Highs => run(unsolved.using(good_lp::solvers::highs::highs).with_time_limit(seconds), constraints, &self.vars, "highs"),
        }
    }
}
