//! The trusted certificate checker: re-derives every claimed lower bound from its witness with exact rational arithmetic, without any solver.
//!
//! It is a crate of its own that depends on nothing of collsched (only std, serde and the num
//! crates), so that a bug in the code that computes bounds cannot also hide in the code that
//! checks them. A
//! certificate carries the instance it speaks of (nodes, links, demands) and the checker reads
//! nothing else; whoever calls it checks that this instance is the one of the spec (by comparing
//! the `instance` object, and `spec_sha256` against the spec file's bytes).
//!
//! **Semantics of a claim.** A claim holds iff the value re-derived from its witness is at least
//! the claimed value: a certificate may claim less than its witness proves (for example a value
//! rounded down for display), never more. The schedule attachment is checked against the
//! re-derived bounds: a schedule cannot be faster than a proven lower bound, and
//! `"bandwidth_optimal"` says whether its bandwidth time equals the best claimed bandwidth bound
//! (either way, the claim is checked).
//!
//! The format (`"format": "collsched.certificate", "version": 1`):
//!
//! ```json
//! {"format": "collsched.certificate", "version": 1, "spec_sha256": "9f86d0...",
//!  "instance": {"nodes": 3, "npus": 3, "switch_latency_ns": "0",
//!    "links": [{"src": 0, "dst": 1, "capacity": "32", "latency_ns": "100", "up": true}, ...],
//!    "collective": {"kind": "all_to_all", "ranks": [0, 1, 2], "block_bytes": "1000/3"}},
//!  "claims": [
//!    {"bound": "steps", "value": "1", "witness": {"source": 0, "destination": 1}},
//!    {"bound": "latency", "value": "100", "witness": {"source": 0, "destination": 1}},
//!    {"bound": "volume", "value": "125/12"},
//!    {"bound": "cut", "value": "125/12", "witness": {"nodes": [0], "into": false}},
//!    {"bound": "flow", "value": "125/12", "witness": {"lengths": ["1", "1", "1", "1", "1", "1"]}},
//!    {"bound": "transmissions", "value": "125/12", "witness": {"into": false}},
//!    {"bound": "steps_transmissions", "value": "1", "witness": {"into": false}},
//!    {"bound": "steps_cut", "value": "1", "witness": {"nodes": [0], "into": false}},
//!    {"bound": "steps_flow", "value": "1", "witness": {"lengths": ["1", "1", "1", "1", "1", "1"]}},
//!    {"bound": "steps_arrival", "value": "1", "witness": {"rank": 0, "into": true, "distance": 1}}],
//!  "schedule": {"bandwidth_ns": "125/12", "time_ns": "1325/12", "bandwidth_optimal": true}}
//! ```
//!
//! **Steps claims** bound the number of steps of a schedule in which a transfer goes from a rank to
//! a rank and a link carries one piece per step (docs/design/MODEL.md sections 3 and 6); each
//! re-derived value is a whole number of steps (a ratio rounded up):
//!
//! - `steps`: the single-hop distance of the witness pair;
//! - `steps_transmissions`: the transfers every piece needs (all_to_all 1, all_gather and
//!   reduce_scatter R-1, all_reduce 2(R-1)) over the up links leaving ranks (`into`: entering);
//! - `steps_cut`: the pieces that must leave the node set (the rule of the `cut` claim, counted
//!   in pieces) over the up links leaving it (`into`: the complement);
//! - `steps_flow` (all_to_all): sum over pieces of the distance under the lengths, over the sum
//!   of the lengths of the up links;
//! - `steps_arrival`: d - 1 plus the pieces that must enter the rank in a step no earlier than
//!   the distance d allows (`into`; otherwise leave it no later), over its up links, rounded up.
//!
//! Values are exact rationals written as `"7"`, `"25/2"` or `"12.5"`; capacities are bytes per
//! ns (GB/s), times are ns, `steps` counts single hops (a hop ends at a rank: only ranks store). `collective` is, for all_to_all, either
//! `block_bytes` (the same bytes between every ordered pair of distinct ranks) or `demands`
//! (`[source node, destination node, "bytes"]` triples); for all_gather, reduce_scatter and
//! all_reduce, `piece_bytes` and `pieces` (a block is `pieces` pieces). An all_to_all may state
//! `pieces` too (pieces per block, 1 when absent), which only the steps claims count.

mod derive;
mod instance;

use instance::Instance;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{ToPrimitive, Zero};
use serde::Deserialize;
use std::fmt;
use std::path::Path;

/// The exact numbers of the checker.
pub type Q = BigRational;

/// The format name a certificate must carry.
pub const FORMAT: &str = "collsched.certificate";
/// The format version this checker reads.
pub const VERSION: u32 = 1;

/// One claim, re-derived.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimReport {
    /// Position in the certificate's `claims` list (0-based).
    pub index: usize,
    /// `steps`, `latency`, `volume`, `cut`, `flow`, `transmissions`, `steps_transmissions`,
    /// `steps_cut`, `steps_flow` or `steps_arrival`.
    pub bound: String,
    /// The value the certificate claims (hops for steps, ns otherwise).
    pub claimed: Q,
    /// The value the witness proves.
    pub derived: Q,
}

/// What a successful check established.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckReport {
    /// The hex SHA-256 of the spec file the certificate says it was made from.
    pub spec_sha256: String,
    /// The instance exactly as the certificate states it (to compare with a spec's).
    pub instance: serde_json::Value,
    /// Every claim, each of which holds.
    pub claims: Vec<ClaimReport>,
    /// The best bandwidth bound proven (max of volume, cut, flow and transmissions), if any was
    /// claimed.
    pub bandwidth_bound: Option<Q>,
    /// The best steps bound proven (max of `steps`, `steps_transmissions`, `steps_cut`,
    /// `steps_flow` and `steps_arrival`), if any was claimed.
    pub steps_bound: Option<Q>,
    /// The spec's path relative to the certificate, when recorded.
    pub spec: Option<String>,
    /// The attached schedule, when recorded.
    pub schedule: Option<ScheduleClaim>,
}

/// A schedule attached to a certificate, as claimed (its times already held to the bounds).
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleClaim {
    /// The schedule file, relative to the certificate.
    pub file: Option<String>,
    /// The hex SHA-256 of the schedule file's bytes.
    pub sha256: Option<String>,
    /// Its step-synchronous time with every latency 0, ns.
    pub bandwidth_ns: Q,
    /// Its step-synchronous time, ns.
    pub time_ns: Q,
}

/// Why a certificate was rejected; the message says where (`claim 2 (flow): ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckError {
    /// The failing claim's index, when a claim failed.
    pub claim: Option<usize>,
    /// Whether the text could not be read as a certificate at all (not a readable file, not JSON,
    /// unknown or missing fields, another format or version), as against a certificate whose
    /// claims do not hold.
    pub unreadable: bool,
    /// The whole message.
    pub message: String,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CheckError {}

fn fail(msg: impl Into<String>) -> CheckError {
    CheckError { claim: None, message: msg.into(), unreadable: false }
}

fn unreadable(msg: impl Into<String>) -> CheckError {
    CheckError { claim: None, message: msg.into(), unreadable: true }
}

/// Parses an exact rational: `"7"`, `"-3"`, `"25/2"` or a decimal such as `"12.5"`.
pub fn parse_q(text: &str) -> Result<Q, String> {
    let t = text.trim();
    let bad = || format!("`{text}` is not a rational (examples: \"7\", \"25/2\", \"12.5\")");
    let int = |s: &str| -> Result<BigInt, String> {
        if s.is_empty() || !s.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit()) || s.trim_start_matches('-').is_empty() {
            return Err(bad());
        }
        s.parse::<BigInt>().map_err(|_| bad())
    };
    if let Some((n, d)) = t.split_once('/') {
        let d = int(d)?;
        if d.is_zero() {
            return Err(format!("`{text}`: zero denominator"));
        }
        return Ok(Q::new(int(n)?, d));
    }
    if let Some((i, f)) = t.split_once('.') {
        if f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let negative = i.starts_with('-');
        let whole = Q::from_integer(if i == "-" || i.is_empty() { BigInt::zero() } else { int(i)? });
        let frac = Q::new(f.parse::<BigInt>().map_err(|_| bad())?, num_traits::pow(BigInt::from(10), f.len()));
        return Ok(if negative { whole - frac } else { whole + frac });
    }
    Ok(Q::from_integer(int(t)?))
}

/// A rational for messages: the decimal value, and the exact fraction when it is short.
pub fn show_q(q: &Q) -> String {
    if q.is_integer() {
        return q.to_integer().to_string();
    }
    // Rounded to six decimals in exact arithmetic (a float would misprint large values).
    let million = BigInt::from(1_000_000u32);
    let scaled = (q * Q::from_integer(million.clone())).round().to_integer();
    let sign = if scaled < BigInt::zero() { "-" } else { "" };
    let magnitude = if scaled < BigInt::zero() { -scaled } else { scaled };
    let (whole, frac) = (&magnitude / &million, (&magnitude % &million).to_u32().unwrap_or(0));
    let approx = format!("{sign}{whole}.{frac:06}");
    let exact = q.to_string();
    if exact.len() <= 24 {
        format!("{approx} ({exact})")
    } else {
        approx
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCertificate {
    format: String,
    version: u32,
    spec_sha256: String,
    /// Where the spec is, relative to the certificate (for the command that checks that the
    /// spec still hashes to `spec_sha256`; the checker itself does not read it).
    #[serde(default)]
    spec: Option<String>,
    instance: serde_json::Value,
    claims: Vec<serde_json::Value>,
    #[serde(default)]
    schedule: Option<RawSchedule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, tag = "bound", rename_all = "snake_case")]
enum RawClaim {
    Steps { value: String, witness: PairWitness },
    Latency { value: String, witness: PairWitness },
    Volume { value: String },
    Cut { value: String, witness: CutWitness },
    Flow { value: String, witness: FlowWitness },
    Transmissions { value: String, witness: DirectionWitness },
    StepsTransmissions { value: String, witness: DirectionWitness },
    StepsCut { value: String, witness: CutWitness },
    StepsFlow { value: String, witness: FlowWitness },
    StepsArrival { value: String, witness: ArrivalWitness },
}

impl RawClaim {
    /// Whether the claim bounds steps (a count) rather than time (ns).
    fn is_steps(&self) -> bool {
        matches!(
            self,
            RawClaim::Steps { .. }
                | RawClaim::StepsTransmissions { .. }
                | RawClaim::StepsCut { .. }
                | RawClaim::StepsFlow { .. }
                | RawClaim::StepsArrival { .. }
        )
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectionWitness {
    /// Count the links entering ranks instead of those leaving them.
    into: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PairWitness {
    source: usize,
    destination: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CutWitness {
    nodes: Vec<usize>,
    #[serde(default)]
    into: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArrivalWitness {
    /// The rank whose links carry the pieces.
    rank: usize,
    /// Count what enters the rank (otherwise what leaves it).
    into: bool,
    /// The single-hop distance d >= 1.
    distance: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlowWitness {
    lengths: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    bandwidth_ns: String,
    time_ns: String,
    /// Whether its bandwidth time is the best claimed bandwidth bound; left out, no claim.
    #[serde(default)]
    bandwidth_optimal: Option<bool>,
    /// The schedule file the times were measured on, relative to the certificate (re-costed by
    /// the command around the checker).
    #[serde(default)]
    file: Option<String>,
    /// The hex SHA-256 of that file's bytes (compared by the command around the checker).
    #[serde(default)]
    sha256: Option<String>,
}

/// The lengths of a flow witness, parsed.
fn lengths(witness: &FlowWitness) -> Result<Vec<Q>, String> {
    witness.lengths.iter().enumerate().map(|(i, s)| parse_q(s).map_err(|e| format!("length of link {i}: {e}"))).collect()
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Checks a certificate file.
pub fn check_file(path: impl AsRef<Path>) -> Result<CheckReport, CheckError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| unreadable(format!("{}: {e}", path.display())))?;
    check_str(&text).map_err(|e| CheckError { message: format!("{}: {}", path.display(), e.message), ..e })
}

/// Where the certificate gives one of its objects (itself, the instance, its links and
/// collective, a claim, a witness, the schedule) as an array: serde reads a struct from an array
/// of its fields in order too, but the format has objects with named fields there.
fn object_as_array(cert: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let items = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let mut objects: Vec<(String, Value)> = vec![("the certificate".into(), cert.clone())];
    let mut field = |path: String, v: Option<&Value>| {
        if let Some(v) = v {
            objects.push((format!("field `{path}`"), v.clone()));
        }
    };
    field("instance".into(), cert.get("instance"));
    field("schedule".into(), cert.get("schedule"));
    field("instance.collective".into(), cert.get("instance").and_then(|i| i.get("collective")));
    for (i, link) in items(cert.get("instance").and_then(|i| i.get("links"))).iter().enumerate() {
        field(format!("instance.links[{i}]"), Some(link));
    }
    for (i, claim) in items(cert.get("claims")).iter().enumerate() {
        field(format!("claims[{i}]"), Some(claim));
        field(format!("claims[{i}].witness"), claim.get("witness"));
    }
    objects.into_iter().find(|(_, v)| v.is_array()).map(|(at, _)| format!("{at}: expected an object with named fields, found an array"))
}

/// Checks a certificate given as JSON text: every claim must hold (see the module docs).
pub fn check_str(text: &str) -> Result<CheckReport, CheckError> {
    if let Some(why) = serde_json::from_str(text).ok().as_ref().and_then(object_as_array) {
        return Err(unreadable(format!("not a certificate: {why}")));
    }
    let raw: RawCertificate = serde_json::from_str(text).map_err(|e| unreadable(format!("not a certificate: {e}")))?;
    if raw.format != FORMAT || raw.version != VERSION {
        return Err(unreadable(format!("format `{}` version {}: this checker reads `{FORMAT}` version {VERSION}", raw.format, raw.version)));
    }
    if !is_sha256_hex(&raw.spec_sha256) {
        return Err(fail("spec_sha256: expected 64 hex digits"));
    }
    let inst = Instance::from_json(&raw.instance)?;
    let mut claims = Vec::new();
    let mut bandwidth: Option<(Q, Q)> = None; // (best derived, best claimed)
    let mut latency_bound: Option<Q> = None;
    let mut steps_bound: Option<Q> = None;
    for (index, value) in raw.claims.iter().enumerate() {
        let name = value.get("bound").and_then(|b| b.as_str()).unwrap_or("?").to_string();
        let at = |msg: String| CheckError { claim: Some(index), message: format!("claim {index} ({name}): {msg}"), unreadable: false };
        // A claim the format does not describe (a field it lacks or does not have, an unknown
        // bound) is unreadable, not failing: only a witness that does not support its value fails.
        let claim: RawClaim = serde_json::from_value(value.clone()).map_err(|e| CheckError { unreadable: true, ..at(e.to_string()) })?;
        let (claimed_text, derived) = match &claim {
            RawClaim::Steps { value, witness } | RawClaim::Latency { value, witness } => {
                let (s, d) = (witness.source, witness.destination);
                if s >= inst.nodes || d >= inst.nodes || !inst.is_required_pair(s, d) {
                    return Err(at(format!("witness {s} -> {d}: the collective needs nothing of node {s} at node {d}")));
                }
                let r = if matches!(claim, RawClaim::Steps { .. }) { derive::steps(&inst, s, d) } else { derive::latency(&inst, s, d) };
                (value, r.map_err(at)?)
            }
            RawClaim::Volume { value } => (value, derive::volume(&inst).map_err(at)?),
            RawClaim::Cut { value, witness } => (value, derive::cut(&inst, &witness.nodes, witness.into).map_err(at)?),
            RawClaim::Flow { value, witness } => (value, derive::flow(&inst, &lengths(witness).map_err(at)?).map_err(at)?),
            RawClaim::Transmissions { value, witness } => (value, derive::transmissions(&inst, witness.into).map_err(at)?),
            RawClaim::StepsTransmissions { value, witness } => (value, derive::steps_transmissions(&inst, witness.into).map_err(at)?),
            RawClaim::StepsCut { value, witness } => (value, derive::steps_cut(&inst, &witness.nodes, witness.into).map_err(at)?),
            RawClaim::StepsFlow { value, witness } => (value, derive::steps_flow(&inst, &lengths(witness).map_err(at)?).map_err(at)?),
            RawClaim::StepsArrival { value, witness } => (value, derive::steps_arrival(&inst, witness.rank, witness.into, witness.distance).map_err(at)?),
        };
        let claimed = parse_q(claimed_text).map_err(|e| at(format!("value: {e}")))?;
        let unit = if claim.is_steps() { " steps" } else { " ns" };
        if derived < claimed {
            return Err(at(format!("the witness supports {}{unit}, the claim is {}{unit}", show_q(&derived), show_q(&claimed))));
        }
        match claim {
            RawClaim::Latency { .. } => latency_bound = Some(latency_bound.map_or(derived.clone(), |b| b.max(derived.clone()))),
            RawClaim::Volume { .. } | RawClaim::Cut { .. } | RawClaim::Flow { .. } | RawClaim::Transmissions { .. } => {
                bandwidth = Some(match bandwidth {
                    Some((d, c)) => (d.max(derived.clone()), c.max(claimed.clone())),
                    None => (derived.clone(), claimed.clone()),
                })
            }
            RawClaim::Steps { .. }
            | RawClaim::StepsTransmissions { .. }
            | RawClaim::StepsCut { .. }
            | RawClaim::StepsFlow { .. }
            | RawClaim::StepsArrival { .. } => steps_bound = Some(steps_bound.map_or(derived.clone(), |b| b.max(derived.clone()))),
        }
        claims.push(ClaimReport { index, bound: name, claimed, derived });
    }
    if let Some(s) = &raw.schedule {
        check_schedule(s, bandwidth.as_ref(), latency_bound.as_ref())?;
    }
    let schedule = match raw.schedule {
        Some(sc) => {
            if sc.sha256.as_deref().is_some_and(|h| !is_sha256_hex(h)) {
                return Err(fail("schedule.sha256: expected 64 hex digits"));
            }
            Some(ScheduleClaim {
                bandwidth_ns: parse_q(&sc.bandwidth_ns).map_err(fail)?,
                time_ns: parse_q(&sc.time_ns).map_err(fail)?,
                file: sc.file,
                sha256: sc.sha256,
            })
        }
        None => None,
    };
    Ok(CheckReport {
        spec_sha256: raw.spec_sha256,
        instance: raw.instance,
        claims,
        bandwidth_bound: bandwidth.map(|(d, _)| d),
        steps_bound,
        spec: raw.spec,
        schedule,
    })
}

/// A schedule's step-synchronous times against the proven bounds (docs/design/MODEL.md section 6): its
/// bandwidth time is at least every bandwidth bound, its time at least the best bandwidth bound
/// plus the latency bound.
fn check_schedule(s: &RawSchedule, bandwidth: Option<&(Q, Q)>, latency: Option<&Q>) -> Result<(), CheckError> {
    let bw = parse_q(&s.bandwidth_ns).map_err(|e| fail(format!("schedule.bandwidth_ns: {e}")))?;
    let time = parse_q(&s.time_ns).map_err(|e| fail(format!("schedule.time_ns: {e}")))?;
    let floor = bandwidth.map_or_else(Q::zero, |(d, _)| d.clone()) + latency.cloned().unwrap_or_else(Q::zero);
    if time < floor {
        return Err(fail(format!("schedule: time {} ns is below the proven bandwidth + latency bound {} ns", show_q(&time), show_q(&floor))));
    }
    if let Some((derived, claimed)) = bandwidth {
        if bw < *derived {
            return Err(fail(format!("schedule: bandwidth time {} ns is below the proven bandwidth bound {} ns", show_q(&bw), show_q(derived))));
        }
        if s.bandwidth_optimal == Some(true) && bw != *claimed {
            return Err(fail(format!(
                "schedule: claims bandwidth-optimal, but its bandwidth time {} ns is not the best claimed bandwidth bound {} ns",
                show_q(&bw),
                show_q(claimed)
            )));
        }
        if s.bandwidth_optimal == Some(false) && bw == *claimed {
            return Err(fail(format!("schedule: claims not bandwidth-optimal, but its bandwidth time {} ns is the best claimed bandwidth bound", show_q(&bw))));
        }
    } else if s.bandwidth_optimal == Some(true) {
        return Err(fail("schedule: claims bandwidth-optimal, but the certificate claims no bandwidth bound"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rationals_show_their_exact_decimals() {
        let q = |s: &str| parse_q(s).unwrap();
        assert_eq!(show_q(&q("1048576000/90003")), "11650.456096 (1048576000/90003)");
        assert_eq!(show_q(&q("-1/3")), "-0.333333 (-1/3)");
        assert_eq!(show_q(&q("5/2")), "2.500000 (5/2)");
        // Past a float's 53 bits the digits are still the quotient's: 6964237866325117768.776280...
        assert_eq!(show_q(&q("122978293824730344100000000/17658543")), "6964237866325117768.776280");
    }
}
