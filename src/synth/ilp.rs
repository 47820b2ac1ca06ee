//! The ILP backend: good_lp with microlp (pure Rust branch and bound), a zero objective.

use super::backend::{Backend, Model, Outcome, Term, Var};
use good_lp::{constraint, microlp, variable, Constraint, Expression, ProblemVariables, ResolutionError, Solution, SolverModel, Variable, WithTimeLimit};
use std::time::Duration;

/// A 0-1/integer feasibility program solved by microlp through good_lp.
pub struct IlpBackend {
    problem: ProblemVariables,
    vars: Vec<Variable>,
    constraints: Vec<Constraint>,
}

impl Default for IlpBackend {
    fn default() -> Self {
        IlpBackend { problem: ProblemVariables::new(), vars: Vec::new(), constraints: Vec::new() }
    }
}

impl IlpBackend {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    fn expression(&self, terms: &[Term]) -> Expression {
        let mut e = Expression::from(0.0);
        for &(v, c) in terms {
            e.add_mul(c as f64, self.vars[v.0]);
        }
        e
    }
}

impl Backend for IlpBackend {
    fn name(&self) -> &'static str {
        "ilp-microlp"
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
        let mut model = problem.minimise(Expression::from(0.0)).using(microlp).with_time_limit(time_limit.as_secs_f64());
        for c in constraints {
            model.add_constraint(c);
        }
        match model.solve() {
            // A feasible point of a zero objective is optimal, whatever status microlp reports.
            Ok(sol) => Outcome::Sat(Model { values: self.vars.iter().map(|&v| sol.value(v).round() as i64).collect() }),
            Err(ResolutionError::Infeasible) => Outcome::Unsat,
            Err(e) => Outcome::Unknown(format!("microlp: {e}")),
        }
    }
}
