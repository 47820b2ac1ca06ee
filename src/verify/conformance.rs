//! Rule 8, bound conformance: a schedule's step-synchronous cost against the lower bounds of
//! docs/design/MODEL.md section 6, failing when a declared expectation does not hold.

use super::{Check, Diagnostic, Findings, Rule, Stats};
use crate::bounds::{bounds, Bounds};
use crate::cost::SyncCost;
use crate::schedule::ScheduleHeader;
use crate::units::{rational_from_decimal, to_f64, Rational};

/// What a spec expects of the schedule's cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expectations {
    /// The bandwidth term equals a certified bandwidth bound.
    pub bandwidth_optimal: Option<bool>,
    /// Time at most (1 + g/100) x (bandwidth bound + latency bound).
    pub max_gap_pct: Option<f64>,
    /// At most this many steps.
    pub max_steps: Option<usize>,
}

/// The rule-8 check.
pub struct Conformance {
    expect: Expectations,
    bounds: Option<Bounds>,
}

impl Conformance {
    /// A check of these expectations.
    pub fn new(expect: Expectations) -> Self {
        Conformance { expect, bounds: None }
    }
}

fn fail(out: &mut Findings, message: String) {
    out.fail(Diagnostic { rule: Rule::BoundConformance, step: None, transfer: None, subject: None, message });
}

impl Check for Conformance {
    fn begin(&mut self, header: &ScheduleHeader, _out: &mut Findings) {
        self.bounds = Some(bounds(&header.topology, &header.collective));
    }

    fn finish(&mut self, stats: &Stats, cost: Option<&SyncCost>, out: &mut Findings) {
        let (Some(b), Some(cost)) = (&self.bounds, cost) else { return };
        if let Some(max) = self.expect.max_steps {
            if stats.steps > max {
                fail(out, format!("expect.max_steps = {max}: the schedule has {} steps", stats.steps));
            }
        }
        let bw = cost.bandwidth_ns();
        if let Some(want) = self.expect.bandwidth_optimal {
            match b.bandwidth_ns() {
                None => fail(out, "expect.bandwidth_optimal: no certified bandwidth bound exists for this collective kind yet".into()),
                Some(bound) => {
                    let optimal = bw == bound;
                    if optimal != want {
                        fail(
                            out,
                            format!(
                                "expect.bandwidth_optimal = {want}: the bandwidth term is {:.6} ns, {:.6}x the certified volume bound {:.6} ns",
                                to_f64(&bw),
                                to_f64(&(bw / bound)),
                                to_f64(&bound)
                            ),
                        );
                    }
                }
            }
        }
        if let Some(g) = self.expect.max_gap_pct {
            match (b.bandwidth_ns(), rational_from_decimal(g)) {
                (Some(bound), Some(g)) => {
                    let limit = (Rational::from_integer(1) + g / Rational::from_integer(100)) * (bound + b.latency_ns);
                    let time = cost.time_ns();
                    if time > limit {
                        let gap = (time / (bound + b.latency_ns) - Rational::from_integer(1)) * Rational::from_integer(100);
                        fail(
                            out,
                            format!(
                                "expect.max_gap_pct = {}: the step-synchronous time {:.3} ns is {:.2}% above the certified bandwidth bound plus the latency bound ({:.3} ns)",
                                to_f64(&g),
                                to_f64(&time),
                                to_f64(&gap),
                                to_f64(&(bound + b.latency_ns))
                            ),
                        );
                    }
                }
                _ => fail(out, "expect.max_gap_pct: no certified bandwidth bound exists for this collective kind yet".into()),
            }
        }
    }
}
