//! Rule 8, bound conformance: a schedule's step-synchronous cost against the lower bounds of
//! docs/design/MODEL.md section 6, failing when a declared expectation does not hold. The
//! bandwidth expectations are judged against the best certified bandwidth bound (volume or
//! transmissions, cut, flow), re-derived by the checker, as `bound` and `synthesize` report it.

use super::{Check, Diagnostic, Findings, Rule, Stats};
use crate::bounds::certified::{certified_bounds, q_to_f64, CertifiedBounds};
use crate::cost::SyncCost;
use crate::schedule::ScheduleHeader;
use crate::spec::Instance;
use crate::units::{rational_from_decimal, to_checker};
use collsched_checker::Q;
use std::time::Duration;

/// The flow bound's search budget when an expectation needs the bandwidth bound (any length
/// function gives a valid bound; a longer search only a stronger one).
const FLOW_TIME: Duration = Duration::from_secs(5);

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
    /// The certified bounds (bandwidth, and time: bandwidth plus latency or the crossing bound),
    /// when an expectation needs them, or why they could not be had.
    bounds: Option<Result<CertifiedBounds, String>>,
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
        if self.expect.bandwidth_optimal.is_none() && self.expect.max_gap_pct.is_none() {
            return;
        }
        let inst = Instance { topology: header.topology.clone(), collective: header.collective.clone(), pieces_given: true };
        self.bounds = Some(certified_bounds(&inst, FLOW_TIME, false).map_err(|e| e.to_string()));
    }

    fn finish(&mut self, stats: &Stats, cost: Option<&SyncCost>, out: &mut Findings) {
        if let Some(max) = self.expect.max_steps {
            if stats.steps > max {
                fail(out, format!("expect.max_steps = {max}: the schedule has {} steps", stats.steps));
            }
        }
        let Some(cost) = cost else { return };
        let (bandwidth, bound, crossing) = match &self.bounds {
            None => return,
            Some(Err(e)) => return fail(out, format!("the certified bounds could not be derived: {e}")),
            Some(Ok(CertifiedBounds { bandwidth: Some(b), time: Some(t), crossing, .. })) => (b, t, *crossing),
            Some(Ok(_)) => return fail(out, "expect: no certified bandwidth bound exists for this instance".into()),
        };
        let f = |q: &Q| q_to_f64(q).unwrap_or(f64::NAN);
        let bw = to_checker(&cost.bandwidth_ns());
        if let Some(want) = self.expect.bandwidth_optimal {
            if (&bw == bandwidth) != want {
                fail(
                    out,
                    format!(
                        "expect.bandwidth_optimal = {want}: the bandwidth term is {:.6} ns, {:.6}x the certified bandwidth bound {:.6} ns",
                        f(&bw),
                        f(&(&bw / bandwidth)),
                        f(bandwidth)
                    ),
                );
            }
        }
        if let Some(g) = self.expect.max_gap_pct {
            let Some(g) = rational_from_decimal(g).map(|g| to_checker(&g)) else {
                return fail(out, format!("expect.max_gap_pct = {g} is not a usable number"));
            };
            let limit = (Q::from_integer(1.into()) + g.clone() / Q::from_integer(100.into())) * bound;
            let time = to_checker(&cost.time_ns());
            if time > limit {
                let gap = (&time / bound - Q::from_integer(1.into())) * Q::from_integer(100.into());
                fail(
                    out,
                    format!(
                        "expect.max_gap_pct = {}: the step-synchronous time {:.3} ns is {:.2}% above the certified {} ({:.3} ns)",
                        f(&g),
                        f(&time),
                        f(&gap),
                        if crossing { "crossing bound" } else { "bandwidth bound plus the latency bound" },
                        f(bound)
                    ),
                );
            }
        }
    }
}
