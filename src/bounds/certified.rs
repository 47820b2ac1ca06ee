//! The certified bounds of an instance: its bound certificate (docs/design/MODEL.md section 6),
//! re-derived by the independent checker ([`collsched_checker`]), so that every gap collsched
//! prints is measured against a bound that the trusted base has checked.

use super::certificate::{certificate_of_instance_with, instance_json};
use super::flow::FlowOptions;
use super::steps::{steps_bounds, StepsBounds, StepsClaim};
use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::spec::Instance;
use crate::topology::Topology;
use collsched_checker::Q;
use num_traits::ToPrimitive;
use serde_json::json;
use std::time::Duration;

/// The certified bounds of an instance, re-derived by the independent checker
/// ([`collsched_checker`]) from the bound certificate (docs/design/MODEL.md section 6), in ns.
#[derive(Clone, Debug, PartialEq)]
pub struct CertifiedBounds {
    /// The best bandwidth bound (volume, cut or flow); `None` when none applies.
    pub bandwidth: Option<Q>,
    /// The latency bound.
    pub latency: Q,
    /// The best bound on step-synchronous time: bandwidth plus latency, or a crossing bound
    /// (docs/design/MODEL.md section 6, "Groups of ranks") where that is larger; what gaps are
    /// measured against. `None` when no bandwidth bound applies.
    pub time: Option<Q>,
    /// Whether that time bound is a crossing claim's, above bandwidth plus latency.
    pub crossing: bool,
    /// The largest steps bound (docs/design/MODEL.md section 6: distance, transmissions, cut,
    /// flow), in steps; `None` when the certificate has none.
    pub steps: Option<u32>,
}

/// The certified bounds of `inst`; `flow_time` caps the flow bound's multiplicative weights (any
/// length function gives a valid bound, only a weaker one); the steps flow bound (all_to_all) is
/// searched only if `steps_flow` (the largest steps bound is then that of the others).
///
/// Errors: [`Error::Internal`] when the certificate does not check (a bug).
pub fn certified_bounds(inst: &Instance, flow_time: Duration, steps_flow: bool) -> Result<CertifiedBounds> {
    let flow = FlowOptions { time_limit: flow_time, ..Default::default() };
    let cert = certificate_of_instance_with(inst, &"0".repeat(64), &flow, steps_flow);
    let checked = collsched_checker::check_bounds_str(&cert.to_string()).map_err(|e| Error::internal(format!("the bound certificate does not check: {e}")))?;
    let latency = checked.latency_bound.clone().unwrap_or_default();
    let steps = checked.steps_bound.as_ref().and_then(|q| q.to_integer().to_u32());
    // A time bound without a bandwidth bound (latency alone) gives no gap.
    let crossing = crossing_binds(&checked);
    let time = checked.bandwidth_bound.as_ref().and(checked.time_bound);
    Ok(CertifiedBounds { bandwidth: checked.bandwidth_bound, latency, time, crossing, steps })
}

/// Whether a checked certificate's time bound is a crossing claim's, above its bandwidth bound
/// plus its latency bound (docs/design/MODEL.md section 6, "Groups of ranks").
pub fn crossing_binds(report: &collsched_checker::CheckReport) -> bool {
    let floor = report.bandwidth_bound.clone().unwrap_or_default() + report.latency_bound.clone().unwrap_or_default();
    report.time_bound.as_ref().is_some_and(|t| *t > floor)
}

/// An exact number as a float.
pub fn q_to_f64(x: &Q) -> Option<f64> {
    num_traits::ToPrimitive::to_f64(x)
}

/// The certified bounds of an instance in ns ([`CertifiedBounds`] as floats).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CertifiedNs {
    /// The best bandwidth bound; `None` when none applies.
    pub bandwidth: Option<f64>,
    /// The latency bound.
    pub latency: f64,
    /// The best bound on step-synchronous time (bandwidth plus latency, or a crossing bound);
    /// `None` when no bandwidth bound applies.
    pub time: Option<f64>,
}

/// The certified bounds of an instance in ns ([`certified_bounds`]).
///
/// Errors: [`Error::Internal`] when the certificate does not check (a bug).
pub fn certified_bounds_ns(t: &Topology, c: &Collective, flow_time: Duration) -> Result<CertifiedNs> {
    let inst = Instance { topology: t.clone(), collective: c.clone(), pieces_given: true };
    let b = certified_bounds(&inst, flow_time, false)?;
    Ok(CertifiedNs {
        bandwidth: b.bandwidth.as_ref().and_then(q_to_f64),
        latency: q_to_f64(&b.latency).unwrap_or(0.0),
        time: b.time.as_ref().and_then(q_to_f64),
    })
}

/// The steps bounds of an instance, re-derived by the independent checker from their certificate
/// (docs/design/MODEL.md section 6), with the largest it confirms: what a synthesized schedule's
/// "optimal (certified)" rests on.
///
/// Errors: [`Error::Internal`] when the checker rejects a claim (a bug in this module or in the
/// checker).
pub fn certified_steps_bounds(t: &Topology, c: &Collective, flow_time: Duration) -> Result<(StepsBounds, u32)> {
    let bounds = steps_bounds(t, c, flow_time);
    let inst = crate::spec::Instance { topology: t.clone(), collective: c.clone(), pieces_given: true };
    let cert = json!({
        "format": "collsched.certificate",
        "version": 1,
        "spec_sha256": "0".repeat(64),
        "instance": instance_json(&inst),
        "claims": bounds.claims.iter().map(StepsClaim::to_json).collect::<Vec<_>>(),
    });
    let checked =
        collsched_checker::check_bounds_str(&cert.to_string()).map_err(|e| Error::internal(format!("the steps bound certificate does not check: {e}")))?;
    let best = checked.steps_bound.as_ref().and_then(|q| q.to_integer().to_u32()).unwrap_or(0);
    Ok((bounds, best))
}
