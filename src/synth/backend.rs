//! The small solver interface the encoding is written against, and what a solve returns.
//!
//! The time-expanded program is written once against [`Backend`]; the ILP ([`super::ilp`]) and
//! SMT ([`super::smt`]) backends translate it, so the two can be checked against each other and
//! swapped without touching the encoding (good_lp's shape: one trait, one file per backend).

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
