//! The SMT backend: z3 with 0-1 variables as `Bool`s and pseudo-boolean constraints.
//!
//! docs/design/DEPENDENCIES.md measured pseudo-boolean encodings far lighter than integer ones on this
//! program, so a constraint over booleans only becomes `pb_le`/`pb_eq`; a constraint that
//! mentions an integer variable falls back to integer arithmetic.

use super::{Backend, Model, Outcome, Term, Var};
use std::time::Duration;
use z3::ast::{Bool, Int};
use z3::{Params, SatResult};

enum Z3Var {
    Bool(Bool),
    Int(Int),
}

/// A feasibility program solved by z3 (thread-local context of the calling thread).
pub struct SmtBackend {
    solver: z3::Solver,
    vars: Vec<Z3Var>,
}

impl Default for SmtBackend {
    fn default() -> Self {
        SmtBackend { solver: z3::Solver::new(), vars: Vec::new() }
    }
}

impl SmtBackend {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    /// The terms as pseudo-boolean pairs with positive coefficients, and the adjusted right-hand
    /// side, or `None` when a term is an integer variable. A negative term `c*x` is rewritten as
    /// `|c|*(not x) - |c|`, since z3's pseudo-boolean constraints are only documented for
    /// non-negative coefficients.
    fn pseudo_boolean(&self, terms: &[Term], rhs: i64) -> Option<(Vec<(Bool, i32)>, i32)> {
        let mut out = Vec::with_capacity(terms.len());
        let mut rhs = rhs;
        for &(v, c) in terms {
            let Z3Var::Bool(b) = &self.vars[v.0] else { return None };
            if c < 0 {
                out.push((b.not(), i32::try_from(-c).ok()?));
                rhs -= c;
            } else if c > 0 {
                out.push((b.clone(), i32::try_from(c).ok()?));
            }
        }
        Some((out, i32::try_from(rhs).ok()?))
    }

    fn int_sum(&self, terms: &[Term]) -> Int {
        let parts: Vec<Int> = terms
            .iter()
            .map(|&(v, c)| {
                let x = match &self.vars[v.0] {
                    Z3Var::Bool(b) => b.ite(&Int::from_i64(1), &Int::from_i64(0)),
                    Z3Var::Int(i) => i.clone(),
                };
                Int::mul(&[Int::from_i64(c), x])
            })
            .collect();
        if parts.is_empty() {
            Int::from_i64(0)
        } else {
            Int::add(&parts)
        }
    }

    fn assert_linear(&mut self, terms: &[Term], rhs: i64, equal: bool) {
        let constraint = match self.pseudo_boolean(terms, rhs) {
            Some((pb, k)) => {
                let refs: Vec<(&Bool, i32)> = pb.iter().map(|(b, c)| (b, *c)).collect();
                if equal {
                    Bool::pb_eq(&refs, k)
                } else {
                    Bool::pb_le(&refs, k)
                }
            }
            None => {
                let sum = self.int_sum(terms);
                if equal {
                    sum.eq(Int::from_i64(rhs))
                } else {
                    sum.le(Int::from_i64(rhs))
                }
            }
        };
        self.solver.assert(&constraint);
    }
}

impl Backend for SmtBackend {
    fn name(&self) -> &'static str {
        "smt-z3"
    }

    fn add_int_var(&mut self, lo: i64, hi: i64) -> Var {
        let x = Int::new_const(format!("x{}", self.vars.len()));
        self.solver.assert(x.ge(Int::from_i64(lo)));
        self.solver.assert(x.le(Int::from_i64(hi)));
        self.vars.push(Z3Var::Int(x));
        Var(self.vars.len() - 1)
    }

    fn add_bool(&mut self) -> Var {
        self.vars.push(Z3Var::Bool(Bool::new_const(format!("b{}", self.vars.len()))));
        Var(self.vars.len() - 1)
    }

    fn add_linear_le(&mut self, terms: &[Term], rhs: i64) {
        self.assert_linear(terms, rhs, false);
    }

    fn add_linear_eq(&mut self, terms: &[Term], rhs: i64) {
        self.assert_linear(terms, rhs, true);
    }

    fn solve(&mut self, time_limit: Duration) -> Outcome {
        let mut params = Params::new();
        params.set_u32("timeout", u32::try_from(time_limit.as_millis()).unwrap_or(u32::MAX).max(1));
        self.solver.set_params(&params);
        match self.solver.check() {
            SatResult::Unsat => Outcome::Unsat,
            SatResult::Unknown => Outcome::Unknown(format!("z3: {}", self.solver.get_reason_unknown().unwrap_or_else(|| "unknown".into()))),
            SatResult::Sat => {
                let Some(model) = self.solver.get_model() else { return Outcome::Unknown("z3: sat without a model".into()) };
                let values = self
                    .vars
                    .iter()
                    .map(|v| match v {
                        Z3Var::Bool(b) => model.eval(b, true).and_then(|x| x.as_bool()).map_or(0, i64::from),
                        Z3Var::Int(i) => model.eval(i, true).and_then(|x| x.as_i64()).unwrap_or(0),
                    })
                    .collect();
                Outcome::Sat(Model { values })
            }
        }
    }
}
