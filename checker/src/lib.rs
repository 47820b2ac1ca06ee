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
//! {"format": "collsched.certificate", "version": 1, "spec": "specs/ring3.json", "spec_sha256": "9f86d0...",
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
//!    {"bound": "steps_arrival", "value": "1", "witness": {"rank": 0, "into": true, "distance": 1}},
//!    {"bound": "group_transmissions", "value": "125/12", "witness": {"groups": [[0], [1], [2]], "into": false}}],
//!  "schedule": {"file": "out/ring3.json", "sha256": "4be1c2...", "bandwidth_ns": "125/12",
//!    "time_ns": "1325/12", "bandwidth_optimal": true}}
//! ```
//!
//! Every field is required but `schedule` (a certificate of bounds alone), `bandwidth_optimal`
//! (left out, no claim) and those of `collective` its kind does not use; `spec` may be absent
//! only while a certificate is built ([`check_bounds_str`]). A field the format does not have or
//! lacks, a key twice in one object, a value of the wrong type, a SHA-256 that is not 64 hex
//! digits, a claim's value that is no rational, negative, or (a steps claim) not whole make the
//! text unreadable, not failing.
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
//! **Group claims** (docs/design/MODEL.md section 6, "Groups of ranks") name a partition of the
//! ranks: `groups`, node sets that are disjoint and hold every rank, none without a rank.
//!
//! - `group_transmissions` (a bandwidth bound): the crossing transfers every piece needs (a
//!   transfer crosses when its ends lie in different groups; all_to_all, a demand whose ends do;
//!   all_gather and reduce_scatter G-1 per piece, all_reduce 2(G-1), G groups) over the up links
//!   leaving the groups' node sets (`into`: entering them);
//! - `crossing` (a bound on step-synchronous time, all_gather, reduce_scatter and all_reduce;
//!   witness `{"groups": [...], "cuts": [{"nodes": [...], "into": false}, ...]}`, at most 256
//!   groups, each cut holding all or none of every group's ranks): re-derived after every other
//!   claim, from the best bandwidth and latency bounds they prove, as the least over thresholds of
//!   latency plus the bandwidth term that the demand between groups that must be direct forces
//!   across the cuts (see [`CheckReport::time_bound`]).
//!
//! Values are exact rationals written as `"7"`, `"25/2"` or `"12.5"` (digits on both sides of the
//! slash or point, a leading `-` at most, nothing else: no spaces, `+`, exponents); capacities are bytes per
//! ns (GB/s), times are ns, `steps` counts single hops (a hop ends at a rank: only ranks store). `collective` is, for all_to_all, either
//! `block_bytes` (the same bytes between every ordered pair of distinct ranks) or `demands`
//! (`[source node, destination node, "bytes"]` triples); for all_gather, reduce_scatter and
//! all_reduce, `piece_bytes` and `pieces` (a block is `pieces` pieces). An all_to_all may state
//! `pieces` too (pieces per block, 1 when absent), which only the steps claims count.

mod derive;
mod groups;
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
    /// The best latency bound proven (max of the `latency` claims), if any was claimed.
    pub latency_bound: Option<Q>,
    /// The best bound on step-synchronous time proven: the best bandwidth bound plus the latency
    /// bound, or a `crossing` claim where that is larger; `None` when neither was claimed.
    pub time_bound: Option<Q>,
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
    pub file: String,
    /// The hex SHA-256 of the schedule file's bytes.
    pub sha256: String,
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

/// Parses an exact rational written as the format writes one: `"7"`, `"-3"`, `"25/2"` or a
/// decimal such as `"12.5"`, with digits on both sides of the point and of the slash, a minus
/// sign at most in front, and nothing else (no spaces, exponents, `+` or hex).
pub fn parse_q(text: &str) -> Result<Q, String> {
    let bad = || format!("`{text}` is not a rational (examples: \"7\", \"25/2\", \"12.5\")");
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (negative, t) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let int = |s: &str| -> Result<BigInt, String> {
        if !digits(s) {
            return Err(bad());
        }
        s.parse::<BigInt>().map_err(|_| bad())
    };
    let magnitude = if let Some((n, d)) = t.split_once('/') {
        let (n, d) = (int(n)?, int(d)?);
        if d.is_zero() {
            return Err(format!("`{text}` is not a rational: zero denominator"));
        }
        Q::new(n, d)
    } else if let Some((i, f)) = t.split_once('.') {
        let (i, f_int) = (int(i)?, int(f)?);
        Q::from_integer(i) + Q::new(f_int, num_traits::pow(BigInt::from(10), f.len()))
    } else {
        Q::from_integer(int(t)?)
    };
    Ok(if negative { -magnitude } else { magnitude })
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

/// Two different rationals for one message (a claim against what its witness supports): as
/// [`show_q`] writes them, unless that rounds them alike (`262144` against
/// `262144.0000000001`); then exactly, every digit of a decimal that ends, else the fraction.
pub fn show_q_pair(a: &Q, b: &Q) -> (String, String) {
    let micros = |q: &Q| (q * Q::from_integer(BigInt::from(1_000_000u32))).round();
    if a == b || micros(a) != micros(b) {
        return (show_q(a), show_q(b));
    }
    (show_exact(a), show_exact(b))
}

/// A rational exactly: its decimal digits when they end (the denominator is a product of 2s and
/// 5s), else `n/d`.
fn show_exact(q: &Q) -> String {
    if q.is_integer() {
        return q.to_integer().to_string();
    }
    let ten = BigInt::from(10);
    let mut denom = q.denom().clone();
    let mut places = 0usize;
    for p in [2u32, 5] {
        let p = BigInt::from(p);
        while (&denom % &p).is_zero() {
            denom /= &p;
        }
    }
    if denom != BigInt::from(1) {
        return q.to_string();
    }
    let mut scaled = q.clone();
    while !scaled.is_integer() {
        scaled *= Q::from_integer(ten.clone());
        places += 1;
    }
    let n = scaled.to_integer();
    let sign = if n < BigInt::zero() { "-" } else { "" };
    let digits = format!("{:0>width$}", n.magnitude().to_string(), width = places + 1);
    let (whole, frac) = digits.split_at(digits.len() - places);
    format!("{sign}{whole}.{frac}")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCertificate {
    format: String,
    version: u32,
    spec_sha256: String,
    /// Where the spec is, relative to the certificate (for the command that checks that the
    /// spec still hashes to `spec_sha256`; the checker itself does not read it). Required of a
    /// certificate file; absent only while one is built ([`check_bounds_str`]).
    #[serde(default)]
    spec: Option<String>,
    instance: serde_json::Value,
    claims: Vec<serde_json::Value>,
    #[serde(default)]
    schedule: Option<serde_json::Value>,
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
    GroupTransmissions { value: String, witness: GroupsWitness },
    Crossing { value: String, witness: CrossingWitness },
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
    /// Count the links entering the set (the complement's side) instead of those leaving it.
    into: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupsWitness {
    /// The groups' node sets: disjoint, every rank in one.
    groups: Vec<Vec<usize>>,
    /// Count the links entering the groups' sets instead of those leaving them.
    into: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CrossingWitness {
    /// The groups' node sets: disjoint, every rank in one (only the ranks matter here).
    groups: Vec<Vec<usize>>,
    /// Cuts that hold all or none of each group's ranks, for the demand between groups that must be direct.
    cuts: Vec<CutWitness>,
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
    /// the command around the checker, which the times are only claims without).
    file: String,
    /// The hex SHA-256 of that file's bytes (compared by the command around the checker).
    sha256: String,
}

/// The lengths of a flow witness, parsed.
fn lengths(witness: &FlowWitness) -> Result<Vec<Q>, String> {
    witness.lengths.iter().enumerate().map(|(i, s)| parse_q(s).map_err(|e| format!("length of link {i}: {e}"))).collect()
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Reads JSON text as the format reads it: a key twice in one object, at any depth, is refused
/// (JSON leaves its meaning open; a parser that keeps the last would check another certificate
/// than one that keeps the first), the key and where named (`instance.links[3]`).
fn read_json(text: &str) -> Result<serde_json::Value, CheckError> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let value = NoDuplicates { at: String::new() }.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    value.map_err(|e| unreadable(format!("not a certificate: {e}")))
}

/// A JSON value read with every object's keys held to be distinct; `at` is where it sits.
struct NoDuplicates {
    at: String,
}

impl NoDuplicates {
    fn inside(&self, step: &str) -> NoDuplicates {
        let at = if self.at.is_empty() || step.starts_with('[') { format!("{}{step}", self.at) } else { format!("{}.{step}", self.at) };
        NoDuplicates { at }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for NoDuplicates {
    type Value = serde_json::Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for NoDuplicates {
    type Value = serde_json::Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self.inside(&format!("[{}]", out.len())))? {
            out.push(v);
        }
        Ok(out.into())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                let at = if self.at.is_empty() { "the top level".to_string() } else { format!("`{}`", self.at) };
                return Err(serde::de::Error::custom(format!("duplicate key `{key}` in {at}")));
            }
            let value = map.next_value_seed(self.inside(&key))?;
            out.insert(key, value);
        }
        Ok(out.into())
    }
}

/// A claim's value: an exact rational that is not negative (a bound below zero says nothing,
/// and is no number a bound computes) and, for a steps claim, a whole number of steps (docs/design/MODEL.md
/// section 6). Otherwise the claim is not one the format writes: unreadable.
fn claim_value(text: &str, steps: bool) -> Result<Q, String> {
    let q = parse_q(text)?;
    if q < Q::zero() {
        return Err(format!("`{text}` is negative: a bound is at least 0"));
    }
    if steps && !q.is_integer() {
        return Err(format!("`{text}` is not a whole number of steps"));
    }
    Ok(q)
}

/// Whether two `instance` objects describe the same instance, their numbers compared as exact
/// rationals (`"1048576"` and `"1048576.0"`, `"100"` and `"200/2"` alike); an object the format
/// does not describe is an error.
pub fn same_instance(a: &serde_json::Value, b: &serde_json::Value) -> Result<bool, CheckError> {
    Ok(Instance::from_json(a)? == Instance::from_json(b)?)
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
        for (j, cut) in items(claim.get("witness").and_then(|w| w.get("cuts"))).iter().enumerate() {
            field(format!("claims[{i}].witness.cuts[{j}]"), Some(cut));
        }
    }
    objects.into_iter().find(|(_, v)| v.is_array()).map(|(at, _)| format!("{at}: expected an object with named fields, found an array"))
}

/// Checks a certificate given as JSON text: every claim must hold (see the module docs). A
/// certificate names its spec (`spec`); one that does not is unreadable.
pub fn check_str(text: &str) -> Result<CheckReport, CheckError> {
    check(text, true)
}

/// Checks the claims of a certificate being built, before it names the files it will sit beside
/// (`bound` and `sweep` check theirs before writing them): as [`check_str`], except that `spec`
/// may be absent.
pub fn check_bounds_str(text: &str) -> Result<CheckReport, CheckError> {
    check(text, false)
}

fn check(text: &str, names_spec: bool) -> Result<CheckReport, CheckError> {
    let value = read_json(text)?;
    if let Some(why) = object_as_array(&value) {
        return Err(unreadable(format!("not a certificate: {why}")));
    }
    // Without `format`, say so rather than which other field serde meets first.
    if value.get("format").is_none() {
        return Err(unreadable(format!("not a certificate: missing field `format` (a certificate has \"format\": \"{FORMAT}\", \"version\": {VERSION})")));
    }
    let raw: RawCertificate = serde_json::from_value(value).map_err(|e| unreadable(format!("not a certificate: {e}")))?;
    if raw.format != FORMAT || raw.version != VERSION {
        return Err(unreadable(format!("format `{}` version {}: this checker reads `{FORMAT}` version {VERSION}", raw.format, raw.version)));
    }
    if !is_sha256_hex(&raw.spec_sha256) {
        return Err(unreadable(format!("spec_sha256 = \"{}\": expected 64 hex digits", raw.spec_sha256)));
    }
    if names_spec && raw.spec.is_none() {
        return Err(unreadable("not a certificate: missing field `spec` (the spec file it was made from, relative to the certificate's folder)"));
    }
    let inst = Instance::from_json(&raw.instance)?;
    let mut claims = Vec::new();
    let mut bandwidth: Option<(Q, Q)> = None; // (best derived, best claimed)
    let mut latency_bound: Option<Q> = None;
    let mut steps_bound: Option<Q> = None;
    let mut crossings = Vec::new();
    for (index, value) in raw.claims.iter().enumerate() {
        let name = value.get("bound").and_then(|b| b.as_str()).unwrap_or("?").to_string();
        let at = |msg: String| claim_failed(index, &name, msg);
        let unreadable_at = |msg: String| CheckError { unreadable: true, ..at(msg) };
        // A claim the format does not describe (a field it lacks or does not have, an unknown
        // bound, a value that is no rational or no bound) is unreadable, not failing: only a
        // witness that does not support its value fails.
        let claim: RawClaim = serde_json::from_value(value.clone()).map_err(|e| unreadable_at(e.to_string()))?;
        let claimed_text = match &claim {
            RawClaim::Steps { value, .. }
            | RawClaim::Latency { value, .. }
            | RawClaim::Volume { value }
            | RawClaim::Cut { value, .. }
            | RawClaim::Flow { value, .. }
            | RawClaim::Transmissions { value, .. }
            | RawClaim::StepsTransmissions { value, .. }
            | RawClaim::StepsCut { value, .. }
            | RawClaim::StepsFlow { value, .. }
            | RawClaim::StepsArrival { value, .. }
            | RawClaim::GroupTransmissions { value, .. }
            | RawClaim::Crossing { value, .. } => value,
        };
        let claimed = claim_value(claimed_text, claim.is_steps()).map_err(|e| unreadable_at(format!("value: {e}")))?;
        // A crossing claim builds on the best bandwidth and latency bounds of all the others.
        if let RawClaim::Crossing { witness, .. } = claim {
            crossings.push((index, name, claimed, witness));
            continue;
        }
        let derived = match &claim {
            RawClaim::Steps { witness, .. } | RawClaim::Latency { witness, .. } => {
                let (s, d) = (witness.source, witness.destination);
                if s >= inst.nodes || d >= inst.nodes || !inst.is_required_pair(s, d) {
                    return Err(at(format!("witness {s} -> {d}: the collective needs nothing of node {s} at node {d}")));
                }
                let r = if matches!(claim, RawClaim::Steps { .. }) { derive::steps(&inst, s, d) } else { derive::latency(&inst, s, d) };
                r.map_err(at)?
            }
            RawClaim::Volume { .. } => derive::volume(&inst).map_err(at)?,
            RawClaim::Cut { witness, .. } => derive::cut(&inst, &witness.nodes, witness.into).map_err(at)?,
            RawClaim::Flow { witness, .. } => derive::flow(&inst, &lengths(witness).map_err(unreadable_at)?).map_err(at)?,
            RawClaim::Transmissions { witness, .. } => derive::transmissions(&inst, witness.into).map_err(at)?,
            RawClaim::StepsTransmissions { witness, .. } => derive::steps_transmissions(&inst, witness.into).map_err(at)?,
            RawClaim::StepsCut { witness, .. } => derive::steps_cut(&inst, &witness.nodes, witness.into).map_err(at)?,
            RawClaim::StepsFlow { witness, .. } => derive::steps_flow(&inst, &lengths(witness).map_err(unreadable_at)?).map_err(at)?,
            RawClaim::StepsArrival { witness, .. } => derive::steps_arrival(&inst, witness.rank, witness.into, witness.distance).map_err(at)?,
            RawClaim::GroupTransmissions { witness, .. } => {
                let groups = groups::Groups::new(&inst, &witness.groups).map_err(at)?;
                groups::group_transmissions(&inst, &groups, witness.into).map_err(at)?
            }
            RawClaim::Crossing { .. } => unreachable!("crossing claims are checked after the others"),
        };
        supports(&derived, &claimed, if claim.is_steps() { " steps" } else { " ns" }).map_err(at)?;
        match claim {
            RawClaim::Latency { .. } => latency_bound = Some(latency_bound.map_or(derived.clone(), |b| b.max(derived.clone()))),
            RawClaim::Volume { .. } | RawClaim::Cut { .. } | RawClaim::Flow { .. } | RawClaim::Transmissions { .. } | RawClaim::GroupTransmissions { .. } => {
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
            RawClaim::Crossing { .. } => {}
        }
        claims.push(ClaimReport { index, bound: name, claimed, derived });
    }
    // Bandwidth plus latency bounds the step-synchronous time; a crossing claim may bound it more.
    let best_bandwidth = bandwidth.as_ref().map_or_else(Q::zero, |(d, _)| d.clone());
    let best_latency = latency_bound.clone().unwrap_or_else(Q::zero);
    let mut time_bound = (bandwidth.is_some() || latency_bound.is_some()).then(|| &best_bandwidth + &best_latency);
    for (index, name, claimed, witness) in crossings {
        let at = |msg: String| claim_failed(index, &name, msg);
        if witness.groups.len() > groups::MAX_CROSSING_GROUPS {
            let msg = format!("witness: {} groups; a crossing claim names at most {}", witness.groups.len(), groups::MAX_CROSSING_GROUPS);
            return Err(CheckError { unreadable: true, ..at(msg) });
        }
        let groups = groups::Groups::new(&inst, &witness.groups).map_err(at)?;
        let cuts: Vec<(Vec<usize>, bool)> = witness.cuts.iter().map(|c| (c.nodes.clone(), c.into)).collect();
        let derived = groups::crossing(&inst, &groups, &cuts, &best_bandwidth, &best_latency).map_err(at)?;
        supports(&derived, &claimed, " ns").map_err(at)?;
        time_bound = Some(time_bound.map_or(derived.clone(), |b| b.max(derived.clone())));
        claims.push(ClaimReport { index, bound: name, claimed, derived });
    }
    claims.sort_by_key(|c| c.index);
    let schedule = match &raw.schedule {
        None => None,
        // An attached schedule is checked by the command around the checker only through its
        // file: without `file` and `sha256` its times would be claims nobody checks.
        Some(v) => {
            let (claim, optimal) = read_schedule(v)?;
            check_schedule(&claim, optimal, bandwidth.as_ref(), time_bound.as_ref())?;
            Some(claim)
        }
    };
    Ok(CheckReport {
        spec_sha256: raw.spec_sha256,
        instance: raw.instance,
        claims,
        bandwidth_bound: bandwidth.map(|(d, _)| d),
        latency_bound,
        time_bound,
        steps_bound,
        spec: raw.spec,
        schedule,
    })
}

/// The failure of claim `index` (bound `name`), as every claim's message starts.
fn claim_failed(index: usize, name: &str, msg: String) -> CheckError {
    CheckError { claim: Some(index), message: format!("claim {index} ({name}): {msg}"), unreadable: false }
}

/// Whether a witness supports its claim: what it proves is at least what is claimed (a claim may
/// be weaker than its witness, never stronger); otherwise both values, in `unit`.
fn supports(derived: &Q, claimed: &Q, unit: &str) -> Result<(), String> {
    if derived < claimed {
        let (d, c) = show_q_pair(derived, claimed);
        return Err(format!("the witness supports {d}{unit}, the claim is {c}{unit}"));
    }
    Ok(())
}

/// The `schedule` attachment as the format writes it: every field but `bandwidth_optimal`
/// present, its times rationals of at least 0 ns, its SHA-256 64 hex digits; otherwise it is
/// unreadable, the field named.
fn read_schedule(v: &serde_json::Value) -> Result<(ScheduleClaim, Option<bool>), CheckError> {
    let raw: RawSchedule = serde_json::from_value(v.clone()).map_err(|e| unreadable(format!("schedule: {e}")))?;
    if !is_sha256_hex(&raw.sha256) {
        return Err(unreadable(format!("schedule.sha256 = \"{}\": expected 64 hex digits", raw.sha256)));
    }
    let time = |field: &str, text: &str| claim_value(text, false).map_err(|e| unreadable(format!("schedule.{field}: {e}")));
    let claim =
        ScheduleClaim { bandwidth_ns: time("bandwidth_ns", &raw.bandwidth_ns)?, time_ns: time("time_ns", &raw.time_ns)?, file: raw.file, sha256: raw.sha256 };
    Ok((claim, raw.bandwidth_optimal))
}

/// A schedule's step-synchronous times against the proven bounds (docs/design/MODEL.md section 6): its
/// bandwidth time is at least every bandwidth bound, its time at least the best time bound
/// (bandwidth plus latency, or a crossing claim).
fn check_schedule(s: &ScheduleClaim, bandwidth_optimal: Option<bool>, bandwidth: Option<&(Q, Q)>, time_bound: Option<&Q>) -> Result<(), CheckError> {
    let (bw, time) = (&s.bandwidth_ns, &s.time_ns);
    let floor = time_bound.cloned().unwrap_or_else(Q::zero);
    if *time < floor {
        let (t, f) = show_q_pair(time, &floor);
        return Err(fail(format!("schedule: time {t} ns is below the proven time bound {f} ns")));
    }
    if let Some((derived, claimed)) = bandwidth {
        if bw < derived {
            let (b, d) = show_q_pair(bw, derived);
            return Err(fail(format!("schedule: bandwidth time {b} ns is below the proven bandwidth bound {d} ns")));
        }
        if bandwidth_optimal == Some(true) && bw != claimed {
            let (b, c) = show_q_pair(bw, claimed);
            return Err(fail(format!("schedule: claims bandwidth-optimal, but its bandwidth time {b} ns is not the best claimed bandwidth bound {c} ns")));
        }
        if bandwidth_optimal == Some(false) && bw == claimed {
            return Err(fail(format!("schedule: claims not bandwidth-optimal, but its bandwidth time {} ns is the best claimed bandwidth bound", show_q(bw))));
        }
    } else if bandwidth_optimal == Some(true) {
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
