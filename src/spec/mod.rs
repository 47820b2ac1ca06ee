//! Input specs (docs/design/FORMATS.md): a topology, a fault pattern, a collective, what to do, and what is
//! expected. Unknown fields are rejected by name; every error names the file, the field and the
//! value.

mod names;

pub use names::{Algorithm, Routing, SchedulerName, Solver};

use crate::collective::{Collective, CollectiveKind};
use crate::error::{Error, Result};
use crate::topology::{
    custom, fat_tree, torus, tpuv4_ocs_cables, CustomLink, CustomNode, FatTreeParams, FaultPattern, NodeId, Ocs, Topology, TorusParams, TorusShape,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A number, or one number per dimension.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PerDim {
    /// The same value in every dimension.
    One(f64),
    /// One value per dimension.
    Each(Vec<f64>),
}

impl<'de> Deserialize<'de> for PerDim {
    /// A number or a list of numbers; anything else is named with its value and what was
    /// expected (serde's untagged enums say only that no variant matched).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let number = |x: &Value| x.as_f64();
        match &v {
            Value::Number(_) => number(&v).map(PerDim::One),
            Value::Array(items) => items.iter().map(number).collect::<Option<Vec<f64>>>().map(PerDim::Each),
            _ => None,
        }
        .ok_or_else(|| serde::de::Error::custom(format!("{v}: expected a number, or a list with one number per dimension")))
    }
}

impl PerDim {
    fn expand(&self, n: usize, field: &str) -> Result<Vec<f64>> {
        match self {
            PerDim::One(x) => Ok(vec![*x; n]),
            PerDim::Each(v) if v.len() == n => Ok(v.clone()),
            PerDim::Each(v) => Err(Error::bad(format!("topology.torus.{field} has {} values but dims has {n}", v.len()))),
        }
    }
}

/// The spec's `torus` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct TorusSpec {
    /// Radix per dimension.
    pub dims: Vec<usize>,
    /// Wrap per dimension (default: every dimension wraps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrap: Option<Vec<bool>>,
    /// GB/s, one value or one per dimension.
    pub bandwidth_gbps: PerDim,
    /// ns, one value or one per dimension.
    pub latency_ns: PerDim,
}

/// The spec's `fat_tree` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct FatTreeSpec {
    /// 2 or 3.
    pub levels: u32,
    /// Leaf radix.
    pub k: usize,
    /// Oversubscription ratio.
    pub osr: f64,
    /// Number of npus.
    pub npus: usize,
    /// Npus per board, fully meshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board: Option<usize>,
    /// GB/s per link.
    pub bandwidth_gbps: f64,
    /// ns per link.
    pub latency_ns: f64,
    /// ns per switch.
    #[serde(default)]
    pub switch_latency_ns: f64,
}

/// The spec's `custom` object (as the schedule file's topology).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct CustomSpec {
    /// Nodes, npus first.
    pub nodes: Vec<CustomNode>,
    /// Directed links.
    pub links: Vec<CustomLink>,
    /// ns per switch.
    #[serde(default)]
    pub switch_latency_ns: f64,
}

/// Exactly one topology family.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum TopologySpec {
    /// A torus or mesh.
    Torus(TorusSpec),
    /// A fat tree.
    FatTree(FatTreeSpec),
    /// Explicit lists.
    Custom(CustomSpec),
    /// An ASTRA-sim analytical network file, relative to the spec's folder (or absolute).
    AstraNetwork(String),
}

/// The TPUv4 OCS preset of an `ocs` entry (see [`crate::topology::tpuv4_ocs_cables`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct Tpuv4Ocs {
    /// The dimension whose cube-crossing cables the OCS carries.
    pub dim: usize,
    /// The face position: coordinates in the other dimensions (mod the cube side).
    pub position: Vec<usize>,
    /// The cube side (default 4).
    #[serde(default = "four")]
    pub cube: usize,
}

fn four() -> usize {
    4
}

/// An optical-switch failure in a spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct OcsSpec {
    /// A name for messages.
    pub name: String,
    /// The cables it carries, as in `faults.cables`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cables: Option<Vec<Value>>,
    /// Or: the TPUv4 cube convention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpuv4: Option<Tpuv4Ocs>,
}

/// The spec's fault pattern.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct FaultsSpec {
    /// Cables by their end coordinates (torus) or node ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cables: Vec<Value>,
    /// Failed nodes by coordinate (torus) or id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Value>,
    /// Failed optical switches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ocs: Vec<OcsSpec>,
}

impl FaultsSpec {
    /// True when no fault is listed.
    pub fn is_empty(&self) -> bool {
        self.cables.is_empty() && self.nodes.is_empty() && self.ocs.is_empty()
    }
}

/// A byte count: an integer, or a string with a unit (`"4MiB"`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Bytes {
    /// A plain number of bytes.
    Count(u64),
    /// A size with a unit.
    Text(String),
}

/// By hand rather than untagged, so that a value that is neither says what it was.
impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        const WANTED: &str = "a whole number of bytes >= 1 or a size like \"4MiB\"";
        impl serde::de::Visitor<'_> for V {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(WANTED)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Bytes, E> {
                Ok(Bytes::Count(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Bytes, E> {
                u64::try_from(v).map(Bytes::Count).map_err(|_| E::custom(format!("{v}: expected {WANTED}")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Bytes, E> {
                // serde_json hands an integer above 2^64-1 over as the nearest f64: its exact
                // digits are gone, so it is named as what it is.
                if v.fract() == 0.0 && v >= 18446744073709551616.0 {
                    return Err(E::custom(format!(
                        "an integer above 2^64-1 = {} (about {}): more than 2^64-1 bytes; expected {WANTED}",
                        u64::MAX,
                        crate::units::show_f64(v)
                    )));
                }
                if v.fract() == 0.0 && v > 0.0 {
                    return Err(E::custom(format!("{v:?}: not a JSON integer (write it without a decimal point or exponent); expected {WANTED}")));
                }
                Err(E::custom(format!("{}: not a whole number; expected {WANTED}", crate::units::show_f64(v))))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Bytes, E> {
                Ok(Bytes::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl Bytes {
    /// The number of bytes, exactly; `field` names the value in the error.
    pub fn value(&self, field: &str) -> Result<u64> {
        match self {
            Bytes::Count(n) => Ok(*n),
            Bytes::Text(t) => crate::units::parse_bytes(t).map_err(|e| Error::bad(format!("{field}: {e}"))),
        }
    }
}

/// The spec's collective.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct CollectiveSpec {
    /// all_to_all, all_gather, reduce_scatter or all_reduce.
    pub kind: CollectiveKind,
    /// S: bytes per rank (optional with `block_bytes`, where it defaults to the largest row sum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_rank: Option<Bytes>,
    /// The group (node ids or torus coordinates); default every npu that has not failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<Vec<Value>>,
    /// Non-uniform all_to_all block sizes, R x R.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_bytes: Option<Vec<Vec<u64>>>,
    /// P; absent lets the method choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pieces: Option<u32>,
}

/// `method.generate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct GenerateSpec {
    /// The algorithm (docs/design/ALGORITHMS.md).
    pub algorithm: Algorithm,
    /// The multi-dimensional scheduler (tori).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SchedulerName>,
    /// Chunks of the `pipeline` scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<usize>,
    /// Routing on switched topologies: `single_path` or `balanced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
}

/// `method.synthesize`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct SynthesizeSpec {
    /// The exact backend (`auto`, `ilp`, `smt`, `highs`).
    #[serde(default = "auto")]
    pub solver: Solver,
    /// Wall-clock limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<f64>,
}

/// The largest `expect.max_gap_pct` taken (a trillion percent).
pub const MAX_GAP_PCT: f64 = 1e12;

/// The longest time limit taken, in seconds (a year): more is a typo, and a `Duration` cannot
/// hold every `f64`.
pub const MAX_TIME_LIMIT_S: f64 = 365.0 * 24.0 * 3600.0;

/// Checks a time limit in seconds given as `field` (`FILE: method.synthesize.time_limit_s`,
/// `--time-limit`): it must be a positive, finite number of seconds of at most
/// [`MAX_TIME_LIMIT_S`]; else bad input naming the field and the value as written.
pub fn check_time_limit(field: &str, secs: f64) -> Result<()> {
    let why = if !(secs.is_finite() && secs > 0.0) {
        "must be a positive number of seconds".to_string()
    } else if secs > MAX_TIME_LIMIT_S {
        format!("must be a positive number of seconds of at most {MAX_TIME_LIMIT_S} (a year)")
    } else {
        return Ok(());
    };
    Err(Error::bad(format!("{field} = {}: {why}", crate::units::show_f64(secs))))
}

fn auto() -> Solver {
    Solver::Auto
}

/// What to do with the instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum MethodSpec {
    /// Run a named algorithm.
    Generate(GenerateSpec),
    /// Solve for a schedule.
    Synthesize(SynthesizeSpec),
}

/// What CI asserts (a closed list, docs/design/FORMATS.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ExpectSpec {
    /// Certified bandwidth-optimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_optimal: Option<bool>,
    /// Step-synchronous time within this many percent of the certified bound plus latency bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gap_pct: Option<f64>,
    /// At most this many steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<usize>,
    /// Rules 6 and 7 hold on the default lowering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadlock_free: Option<bool>,
    /// Rule-2 sharing is reported, not failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_contention: Option<bool>,
}

/// A whole spec file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct Spec {
    /// Free text for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The network.
    pub topology: TopologySpec,
    /// Failures.
    #[serde(default, skip_serializing_if = "FaultsSpec::is_empty")]
    pub faults: FaultsSpec,
    /// The collective.
    pub collective: CollectiveSpec,
    /// What to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<MethodSpec>,
    /// What CI asserts.
    #[serde(default, skip_serializing_if = "is_default_expect")]
    pub expect: ExpectSpec,
    /// Where the spec was read from (relative paths inside it resolve against its folder).
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

fn is_default_expect(e: &ExpectSpec) -> bool {
    *e == ExpectSpec::default()
}

/// A spec turned into the objects it describes.
#[derive(Clone, Debug)]
pub struct Instance {
    /// The network with the faults applied.
    pub topology: Topology,
    /// The collective (with `pieces` = the spec's, or 1 when absent).
    pub collective: Collective,
    /// Whether the spec fixed `pieces`.
    pub pieces_given: bool,
}

impl Spec {
    /// Parses a spec from text; `source` names it in messages.
    pub fn parse(text: &str, source: &str) -> Result<Spec> {
        if text.starts_with('\u{feff}') {
            return Err(Error::bad(format!(
                "{source}: line 1: a UTF-8 byte-order mark, which JSON text does not start with (RFC 8259): save the file without it"
            )));
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let spec: Spec = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            // Text that is no object, and a topology or method object without exactly one
            // family or way (`one_of`), are named as such.
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                if !v.is_object() {
                    return Error::bad(format!("{source}: {}: a spec is one JSON object (with `topology` and `collective`)", brief(&v)));
                }
                for (key, names) in [("topology", &TOPOLOGY_FAMILIES[..]), ("method", &METHODS[..])] {
                    if let Some(why) = v.get(key).and_then(|value| one_of(value, names)) {
                        return Error::bad(format!("{source}: field `{key}`: {why}"));
                    }
                }
            }
            // serde names a repeated field only where it reaches the second: an error in the
            // first (`"topology": {}, "topology": {...}`) hides it.
            if let Some((path, key)) = repeated_key(text) {
                let at = if path.is_empty() { String::new() } else { format!("field `{path}`: ") };
                return Error::bad(format!("{source}: {at}duplicate field `{key}`"));
            }
            Error::bad(format!("{source}: {}", crate::io::field_json_message(&e, text.as_bytes())))
        })?;
        // One JSON object and nothing after it but whitespace, as the schedule reader demands.
        de.end().map_err(|e| Error::bad(format!("{source}: after the spec's JSON object: {e}")))?;
        if let Some(why) = positional_object(text, &spec) {
            return Err(Error::bad(format!("{source}: {why}")));
        }
        if let Some(MethodSpec::Synthesize(SynthesizeSpec { time_limit_s: Some(secs), .. })) = &spec.method {
            check_time_limit(&format!("{source}: method.synthesize.time_limit_s"), *secs)?;
        }
        // Zero chunks is no schedule, whichever command reads the spec.
        if let Some(MethodSpec::Generate(GenerateSpec { chunks: Some(0), .. })) = &spec.method {
            return Err(Error::bad(format!("{source}: field `method.generate.chunks` = 0: needs at least 1")));
        }
        // A time cannot be below its lower bound: a negative gap is a mistake, not a wish.
        // Above a trillion percent it asserts nothing, and rule 8 could not weigh it exactly.
        if let Some(gap) = spec.expect.max_gap_pct.filter(|g| !(0.0..=MAX_GAP_PCT).contains(g)) {
            let gap = crate::units::show_f64(gap);
            return Err(Error::bad(format!("{source}: expect.max_gap_pct = {gap}: must be a percentage of at least 0 and at most {MAX_GAP_PCT:e}")));
        }
        Ok(spec)
    }

    /// Reads a spec file.
    pub fn load(path: &Path) -> Result<Spec> {
        let text = crate::io::read_to_string(path)?;
        let mut spec = Spec::parse(&text, &path.display().to_string())?;
        spec.path = Some(path.to_path_buf());
        Ok(spec)
    }

    /// The file the spec was read from, for messages (`spec` when it was built from flags).
    pub(crate) fn source(&self) -> String {
        self.path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "spec".into())
    }

    /// The spec as pretty JSON (what `--print-spec` shows). An ASTRA-sim network file is named
    /// by its absolute path (canonicalized, links resolved), so that the printed spec reads it
    /// wherever the spec is saved; the path as written is relative to the folder of the spec it
    /// was read from, which the printed one need not share.
    pub fn to_json_string(&self) -> String {
        let mut spec = self.clone();
        if let TopologySpec::AstraNetwork(rel) = &mut spec.topology {
            let path = self.astra_network_path(rel);
            let abs = path.canonicalize().or_else(|_| std::path::absolute(&path)).unwrap_or(path);
            *rel = abs.to_string_lossy().into_owned();
        }
        serde_json::to_string_pretty(&spec).expect("a spec serializes")
    }

    /// Where an ASTRA-sim network file named `rel` in this spec is: relative to the spec's folder
    /// (to the working folder for a spec built on the command line); an absolute path as it is.
    fn astra_network_path(&self, rel: &str) -> PathBuf {
        let base = self.path.as_ref().and_then(|p| p.parent()).unwrap_or(Path::new(""));
        base.join(rel)
    }

    /// Builds the topology with the faults applied.
    pub fn build_topology(&self) -> Result<Topology> {
        let src = self.source();
        let mut t = match &self.topology {
            TopologySpec::Torus(s) => {
                let n = s.dims.len();
                let params = TorusParams {
                    dims: s.dims.clone(),
                    wrap: s.wrap.clone().unwrap_or_else(|| vec![true; n]),
                    bandwidth_gbps: s.bandwidth_gbps.expand(n, "bandwidth_gbps").map_err(|e| e.context(&src))?,
                    latency_ns: s.latency_ns.expand(n, "latency_ns").map_err(|e| e.context(&src))?,
                };
                torus(&params).map_err(|e| e.context(format!("{src}: topology.torus")))?
            }
            TopologySpec::FatTree(f) => fat_tree(&FatTreeParams {
                levels: f.levels,
                k: f.k,
                osr: f.osr,
                npus: f.npus,
                board: f.board,
                bandwidth_gbps: f.bandwidth_gbps,
                latency_ns: f.latency_ns,
                switch_latency_ns: f.switch_latency_ns,
            })
            .map_err(|e| e.context(format!("{src}: topology.fat_tree")))?,
            TopologySpec::Custom(c) => custom(&c.nodes, &c.links, c.switch_latency_ns).map_err(|e| e.context(format!("{src}: topology.custom")))?,
            TopologySpec::AstraNetwork(rel) => {
                crate::topology::astra::load(&self.astra_network_path(rel)).map_err(|e| e.context(format!("{src}: topology.astra_network")))?
            }
        };
        self.fault_pattern(&t)?.apply(&mut t).map_err(|e| e.context(&src))?;
        Ok(t)
    }

    /// Resolves the spec's fault pattern against a topology (before faults are applied).
    pub fn fault_pattern(&self, t: &Topology) -> Result<FaultPattern> {
        let src = self.source();
        let mut p = FaultPattern::default();
        for (i, c) in self.faults.cables.iter().enumerate() {
            p.cables.push(resolve_cable(t, c).map_err(|e| e.context(format!("{src}: faults.cables[{i}]")))?);
        }
        // A cable is undirected: (a)-(b) and (b)-(a) are one cable, listed once (FORMATS.md).
        let name = |n: NodeId| t.node(n).name.clone();
        let key = |&(a, b): &(NodeId, NodeId)| (a.min(b), a.max(b));
        for (j, c) in p.cables.iter().enumerate() {
            if let Some(i) = p.cables[..j].iter().position(|d| key(d) == key(c)) {
                return Err(Error::bad(format!(
                    "{src}: faults.cables[{j}] = {}-{}: the same cable as faults.cables[{i}] = {}-{}; list each failed cable once",
                    name(c.0),
                    name(c.1),
                    name(p.cables[i].0),
                    name(p.cables[i].1)
                )));
            }
        }
        for (j, n) in self.faults.nodes.iter().enumerate() {
            let node = resolve_node(t, n).map_err(|e| e.context(format!("{src}: faults.nodes[{j}]")))?;
            if let Some(i) = p.nodes.iter().position(|&m| m == node) {
                return Err(Error::bad(format!("{src}: faults.nodes[{j}] = {}: the same node as faults.nodes[{i}]; list each failed node once", name(node))));
            }
            p.nodes.push(node);
        }
        for (i, o) in self.faults.ocs.iter().enumerate() {
            let entry = format!("faults.ocs[{i}] ({})", o.name);
            let field = format!("{src}: {entry}");
            let cables = match (&o.cables, &o.tpuv4) {
                (Some(list), None) => list
                    .iter()
                    .enumerate()
                    .map(|(j, c)| resolve_cable(t, c).map_err(|e| e.context(format!("{field}.cables[{j}]"))))
                    .collect::<Result<Vec<_>>>()?,
                (None, Some(preset)) => {
                    let shape = t.torus_shape().ok_or_else(|| Error::bad(format!("{field}.tpuv4: the TPUv4 OCS preset needs a torus")))?;
                    tpuv4_ocs_cables(shape, preset.dim, &preset.position, preset.cube).map_err(|e| e.context(format!("{field}.tpuv4")))?
                }
                _ => return Err(Error::bad(format!("{field}: give exactly one of `cables` and `tpuv4`"))),
            };
            if cables.is_empty() {
                let what = if o.cables.is_some() { ".cables is empty" } else { ".tpuv4 carries no cable of this torus" };
                return Err(Error::bad(format!("{field}{what}: an OCS that carries no cable fails nothing; list the cables it carries")));
            }
            if let Some(k) = self.faults.ocs[..i].iter().position(|q| q.name == o.name) {
                return Err(Error::bad(format!("{src}: faults.ocs[{i}]: the same name \"{}\" as faults.ocs[{k}]; name each failed OCS once", o.name)));
            }
            // A failure listed twice is a mistake: the same OCS again, or a cable that a listed
            // cable or OCS already fails (FORMATS.md).
            let same = |a: &[(NodeId, NodeId)], b: &[(NodeId, NodeId)]| {
                let set = |l: &[(NodeId, NodeId)]| l.iter().map(key).collect::<std::collections::BTreeSet<_>>();
                set(a) == set(b)
            };
            if let Some(k) = p.ocs.iter().position(|q| same(&q.cables, &cables)) {
                return Err(Error::bad(format!("{field}: the same OCS (the same cables) as faults.ocs[{k}] ({}); list each failed OCS once", p.ocs[k].name)));
            }
            for (j, c) in cables.iter().enumerate() {
                let earlier = |l: &[(NodeId, NodeId)]| l.iter().position(|d| key(d) == key(c));
                let carried = if o.cables.is_some() {
                    format!("{field}.cables[{j}] = {}-{}", name(c.0), name(c.1))
                } else {
                    format!("{field} carries {}-{}", name(c.0), name(c.1))
                };
                if let Some(k) = earlier(&cables[..j]) {
                    return Err(Error::bad(format!("{carried}: the same cable as {entry}.cables[{k}]; list each failed cable once")));
                }
                if let Some(k) = earlier(&p.cables) {
                    return Err(Error::bad(format!("{carried}: the same cable as faults.cables[{k}]; list each failed cable once")));
                }
                if let Some((k, q)) = p.ocs.iter().enumerate().find(|(_, q)| earlier(&q.cables).is_some()) {
                    return Err(Error::bad(format!("{carried}: a cable that faults.ocs[{k}] ({}) carries too; list each failed cable once", q.name)));
                }
            }
            p.ocs.push(Ocs { name: o.name.clone(), cables });
        }
        Ok(p)
    }

    /// Builds the topology and the collective, and checks that the faults leave every rank
    /// connected (exit 3 otherwise, naming the rank).
    pub fn instance(&self) -> Result<Instance> {
        let src = self.source();
        let topology = self.build_topology()?;
        let c = &self.collective;
        let kind = c.kind;
        let failed: Vec<NodeId> = self.fault_pattern(&topology)?.nodes;
        let ranks = match &c.ranks {
            Some(list) => list
                .iter()
                .enumerate()
                .map(|(i, v)| resolve_node(&topology, v).map_err(|e| e.context(format!("{src}: collective.ranks[{i}]"))))
                .collect::<Result<Vec<_>>>()?,
            None => (0..topology.num_npus() as u32).map(NodeId).filter(|n| !failed.contains(n)).collect(),
        };
        if ranks.is_empty() && c.ranks.is_none() && !failed.is_empty() {
            return Err(Error::infeasible(format!("{src}: faults.nodes fail all {} npus: no rank is left", topology.num_npus())));
        }
        let bytes = match (&c.bytes_per_rank, &c.block_bytes) {
            (Some(b), _) => b.value(&format!("{src}: collective.bytes_per_rank"))?,
            (None, Some(bb)) => bb.iter().enumerate().map(|(i, row)| row.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &x)| x).sum()).max().unwrap_or(0),
            (None, None) => return Err(Error::bad(format!("{src}: missing field `collective.bytes_per_rank`"))),
        };
        let pieces = c.pieces.unwrap_or(1);
        let collective = Collective::new(kind, ranks, bytes, pieces, c.block_bytes.clone(), &topology).map_err(|e| e.context(&src))?;
        topology.check_connected(&collective.ranks).map_err(|e| e.context(&src))?;
        Ok(Instance { topology, collective, pieces_given: c.pieces.is_some() })
    }
}

/// The topology families a spec may name, one per `topology` object.
const TOPOLOGY_FAMILIES: [&str; 4] = ["torus", "fat_tree", "custom", "astra_network"];

/// The ways a spec's `method` may take, one per `method` object.
const METHODS: [&str; 2] = ["generate", "synthesize"];

/// Why `value` is not an object naming exactly one of `names` (serde reads its first key as the
/// one and says only "expected value" where there is none, or what is wrong inside it where
/// there are two): the keys found, or that there are none.
fn one_of(value: &Value, names: &[&str]) -> Option<String> {
    let Some(fields) = value.as_object() else {
        return Some(format!("{}: expected an object with one of {}", brief(value), names.join(", ")));
    };
    let keys: Vec<&String> = fields.keys().collect();
    if keys.len() == 1 {
        return None;
    }
    let found = if keys.is_empty() { "none".to_string() } else { keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ") };
    Some(format!("expected exactly one of {}; found {found}", names.join(", ")))
}

/// The first key that an object of the JSON text repeats: the path of the object (empty at the
/// top level) and the key.
fn repeated_key(text: &str) -> Option<(String, String)> {
    use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
    /// Finds a repeated key in the value at this path.
    struct At(String);
    type Found = Option<(String, String)>;
    impl<'de> DeserializeSeed<'de> for At {
        type Value = Found;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Found, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for At {
        type Value = Found;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> std::result::Result<Found, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> std::result::Result<Found, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> std::result::Result<Found, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> std::result::Result<Found, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> std::result::Result<Found, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> std::result::Result<Found, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> std::result::Result<Found, A::Error> {
            let mut found = None;
            let mut i = 0;
            while let Some(f) = items.next_element_seed(At(format!("{}[{i}]", self.0)))? {
                found = found.or(f);
                i += 1;
            }
            Ok(found)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> std::result::Result<Found, A::Error> {
            let (mut keys, mut found) = (std::collections::HashSet::new(), None);
            while let Some(key) = fields.next_key::<String>()? {
                let at = if self.0.is_empty() { key.clone() } else { format!("{}.{key}", self.0) };
                let inner = fields.next_value_seed(At(at))?;
                if !keys.insert(key.clone()) {
                    found = found.or(Some((self.0.clone(), key)));
                }
                found = found.or(inner);
            }
            Ok(found)
        }
    }
    At(String::new()).deserialize(&mut serde_json::Deserializer::from_str(text)).ok().flatten()
}

/// Where the spec file gives one of its objects as an array, the field and what it found; also
/// an `expect` key given as `null` (read as absent, an assertion would be dropped unseen).
///
/// serde reads a struct from a JSON array of its fields in order as well as from an object, so
/// `"collective": ["all_to_all", "1MiB"]` would read as a collective; the format has objects
/// there (FORMATS.md, spec files). The spec as read is written back: wherever that has an object
/// and the file an array, the file used the positional form.
fn positional_object(text: &str, spec: &Spec) -> Option<String> {
    fn walk(input: &Value, read: &Value, path: &str) -> Option<String> {
        match (input, read) {
            (Value::Array(_), Value::Object(_)) => {
                let field = if path.is_empty() { "the spec".to_string() } else { format!("field `{path}`") };
                Some(format!("{field}: expected an object with named fields, found an array {}", brief(input)))
            }
            (Value::Object(i), Value::Object(r)) => i.iter().find_map(|(k, v)| {
                let at = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                // An assertion given as null would be dropped unseen: a CI check that checks nothing.
                if v.is_null() && path == "expect" {
                    return Some(format!("field `{at}` is null: give it a value or leave it out"));
                }
                r.get(k).and_then(|w| walk(v, w, &at))
            }),
            (Value::Array(i), Value::Array(r)) if i.len() == r.len() => i.iter().zip(r).enumerate().find_map(|(n, (v, w))| walk(v, w, &format!("{path}[{n}]"))),
            _ => None,
        }
    }
    let input: Value = serde_json::from_str(text).ok()?;
    let mut read = serde_json::to_value(spec).ok()?;
    // The objects written back only where they say something: one read empty from an array
    // (`"faults": []`, `[[], []]`, `"expect": []`) is compared as the empty object it became.
    if let Some(fields) = read.as_object_mut() {
        for key in ["faults", "expect"] {
            fields.entry(key).or_insert_with(|| Value::Object(Default::default()));
        }
    }
    walk(&input, &read, "")
}

/// A value as it appears in a message: its JSON text, cut after 60 characters.
fn brief(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// A node named by id (a number) or, on a torus, by coordinate (an array).
fn resolve_node(t: &Topology, v: &Value) -> Result<NodeId> {
    match v {
        Value::Number(n) => {
            let id = n.as_u64().ok_or_else(|| Error::bad(format!("{v} is not a node id")))?;
            if id >= t.num_nodes() as u64 {
                return Err(Error::bad(format!("node {id} does not exist (there are {} nodes)", t.num_nodes())));
            }
            Ok(NodeId(id as u32))
        }
        Value::Array(parts) => {
            let shape = t.torus_shape().ok_or_else(|| Error::bad(format!("{v}: coordinates name nodes of a torus only; use a node id")))?;
            let coord: Option<Vec<usize>> = parts.iter().map(|p| p.as_u64().map(|x| x as usize)).collect();
            let coord = coord.ok_or_else(|| Error::bad(format!("{v} is not a coordinate")))?;
            shape.node_at(&coord).ok_or_else(|| Error::bad(format!("{v}: no such node in the {} torus", dims_text(shape))))
        }
        _ => Err(Error::bad(format!("{v}: expected a node id or a coordinate"))),
    }
}

fn dims_text(s: &TorusShape) -> String {
    s.dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
}

/// A cable named by its two ends.
fn resolve_cable(t: &Topology, v: &Value) -> Result<(NodeId, NodeId)> {
    match v {
        Value::Array(ends) if ends.len() == 2 => Ok((resolve_node(t, &ends[0])?, resolve_node(t, &ends[1])?)),
        _ => Err(Error::bad(format!("{v}: a cable is a pair of its two ends, e.g. [[0,0,0],[1,0,0]] or [3, 7]"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TORUS: &str = r#"{
      "topology": {"torus": {"dims": [4, 4, 4], "wrap": [true, true, true], "bandwidth_gbps": 32.0, "latency_ns": 100.0}},
      "faults": {"cables": [[[0, 0, 0], [1, 0, 0]]]},
      "collective": {"kind": "all_to_all", "bytes_per_rank": 8388608},
      "method": {"synthesize": {"solver": "auto", "time_limit_s": 60}},
      "expect": {"max_gap_pct": 5, "deadlock_free": true}
    }"#;

    #[test]
    fn the_formats_example_parses() {
        let s = Spec::parse(TORUS, "t.json").unwrap();
        let inst = s.instance().unwrap();
        assert_eq!(inst.topology.down_links().len(), 2);
        assert_eq!(inst.collective.num_ranks(), 64);
        assert_eq!(inst.collective.bytes_per_rank, 8 << 20);
        let again = Spec::parse(&s.to_json_string(), "again").unwrap();
        assert_eq!(again, s);
    }

    #[test]
    fn unknown_fields_are_named() {
        let text = TORUS.replace("\"latency_ns\": 100.0", "\"latency_ns\": 100.0, \"speed\": 3");
        let e = Spec::parse(&text, "t.json").unwrap_err();
        assert!(e.message().contains("t.json") && e.message().contains("topology.torus") && e.message().contains("`speed`"), "{e}");
        let e = Spec::parse(&TORUS.replace("\"expect\"", "\"expects\""), "t.json").unwrap_err();
        assert!(e.message().contains("`expects`"), "{e}");
    }

    #[test]
    fn a_per_dimension_value_that_is_not_a_number_is_named() {
        for (bad, shown) in [("\"fast\"", "\"fast\""), ("[32.0, \"x\"]", "[32.0,\"x\"]"), ("null", "null")] {
            let e = Spec::parse(&TORUS.replace("\"bandwidth_gbps\": 32.0", &format!("\"bandwidth_gbps\": {bad}")), "t.json").unwrap_err();
            let m = e.message();
            assert!(m.contains("t.json") && m.contains("topology.torus.bandwidth_gbps") && m.contains(shown), "{e}");
            assert!(m.contains("expected a number, or a list with one number per dimension") && !m.contains("untagged"), "{e}");
        }
        let text = TORUS.replace("\"bandwidth_gbps\": 32.0", "\"bandwidth_gbps\": [32, 16, 8]");
        let inst = Spec::parse(&text, "t.json").unwrap().instance().unwrap();
        assert_eq!(inst.topology.num_links(), 6 * 64);
    }

    /// A count beyond 64 bits is named as the spec writes it, not as the float serde_json reads.
    #[test]
    fn a_count_beyond_64_bits_is_named_as_written() {
        let spec = TORUS.replace("\"bytes_per_rank\": 8388608", "\"bytes_per_rank\": 8388608, \"pieces\": 18446744073709551616");
        let e = Spec::parse(&spec, "t.json").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::BadInput);
        assert!(e.message().starts_with("t.json: field `collective.pieces`: invalid type: floating point `18446744073709551616`, expected u32"), "{e}");
    }

    /// Objects given as an empty array, or as arrays of empty arrays, are arrays too: `"faults":
    /// []` and `[[], []]` read as no faults (exit 0), `"expect": []` as nothing asserted.
    #[test]
    fn objects_given_as_empty_arrays_are_refused() {
        let faults = r#""faults": {"cables": [[[0, 0, 0], [1, 0, 0]]]}"#;
        for (array, field) in
            [(r#""faults": []"#, "faults"), (r#""faults": [[]]"#, "faults"), (r#""faults": [[], []]"#, "faults"), (r#""faults": [[], [], []]"#, "faults")]
        {
            let e = Spec::parse(&TORUS.replace(faults, array), "t.json").unwrap_err();
            assert_eq!(e.exit_code(), crate::error::ExitCode::BadInput);
            assert!(e.message().starts_with(&format!("t.json: field `{field}`: expected an object with named fields, found an array")), "{e}");
        }
        let expect = r#""expect": {"max_gap_pct": 5, "deadlock_free": true}"#;
        for array in [r#""expect": []"#, r#""expect": [null, null]"#] {
            let e = Spec::parse(&TORUS.replace(expect, array), "t.json").unwrap_err();
            assert!(e.message().starts_with("t.json: field `expect`: expected an object with named fields, found an array"), "{e}");
        }
        // Empty lists of faults stay what they are.
        Spec::parse(&TORUS.replace(faults, r#""faults": {"cables": [], "nodes": [], "ocs": []}"#), "t.json").unwrap();
    }

    /// Values of the wrong type are named with what the format has there, not with an internal
    /// type name or serde_json's bare "expected value"; a repeated key hidden by an error in its
    /// first value is named as repeated.
    #[test]
    fn wrong_types_and_repeated_keys_are_named() {
        let kind = r#""kind": "all_to_all""#;
        for (value, shown) in [("1", "1: "), ("null", "null: ")] {
            let e = Spec::parse(&TORUS.replace(kind, &format!(r#""kind": {value}"#)), "t.json").unwrap_err();
            let want = format!("t.json: field `collective.kind`: {shown}expected one of all_to_all, all_gather, reduce_scatter, all_reduce");
            assert!(e.message().starts_with(&want), "{e}");
        }
        for (expect, key) in [(r#""max_gap_pct": null, "deadlock_free": true"#, "max_gap_pct"), (r#""max_gap_pct": 5, "deadlock_free": null"#, "deadlock_free")]
        {
            let text = TORUS.replace(r#""max_gap_pct": 5, "deadlock_free": true"#, expect);
            let e = Spec::parse(&text, "t.json").unwrap_err();
            assert!(e.message().contains(&format!("t.json: field `expect.{key}` is null: give it a value or leave it out")), "{e}");
        }
        let e = Spec::parse(&TORUS.replace(r#""faults": {"cables": [[[0, 0, 0], [1, 0, 0]]]}"#, r#""faults": null"#), "t.json").unwrap_err();
        assert!(e.message().contains("field `faults`: invalid type: null, expected an object with named fields") && !e.message().contains("struct"), "{e}");
        let text = TORUS.replace(r#""topology": {"torus""#, r#""topology": {}, "topology": {"torus""#);
        let e = Spec::parse(&text, "t.json").unwrap_err();
        assert_eq!(e.message(), "t.json: duplicate field `topology`");
        let text = TORUS.replace(r#""kind": "all_to_all""#, r#""kind": 7, "kind": "all_to_all""#);
        let e = Spec::parse(&text, "t.json").unwrap_err();
        assert_eq!(e.message(), "t.json: field `collective`: duplicate field `kind`");
    }

    /// A failure listed twice through `ocs` (FORMATS.md): the same name, the same OCS, a cable
    /// also in `cables` or carried by another OCS; and an OCS that carries no cable.
    #[test]
    fn ocs_failures_listed_twice_or_empty_are_refused() {
        let faults = r#""faults": {"cables": [[[0, 0, 0], [1, 0, 0]]]}"#;
        let a = r#"{"name": "a", "tpuv4": {"dim": 0, "position": [1, 2]}}"#;
        let b = r#"{"name": "b", "tpuv4": {"dim": 0, "position": [1, 2]}}"#;
        let cable = "[[3, 1, 2], [0, 1, 2]]";
        for (ocs, want) in [
            (format!(r#""ocs": [{a}, {b}]"#), "faults.ocs[1] (b): the same OCS (the same cables) as faults.ocs[0] (a); list each failed OCS once"),
            (format!(r#""ocs": [{a}, {a}]"#), "faults.ocs[1]: the same name \"a\" as faults.ocs[0]; name each failed OCS once"),
            (
                format!(r#""cables": [{cable}], "ocs": [{a}]"#),
                "faults.ocs[0] (a) carries (3,1,2)-(0,1,2): the same cable as faults.cables[0]; list each failed cable once",
            ),
            (
                format!(r#""ocs": [{a}, {{"name": "c", "cables": [[[0, 0, 0], [1, 0, 0]], {cable}]}}]"#),
                "faults.ocs[1] (c).cables[1] = (3,1,2)-(0,1,2): a cable that faults.ocs[0] (a) carries too; list each failed cable once",
            ),
            (
                r#""ocs": [{"name": "c", "cables": [[[0, 0, 0], [1, 0, 0]], [[1, 0, 0], [0, 0, 0]]]}]"#.to_string(),
                "faults.ocs[0] (c).cables[1] = (1,0,0)-(0,0,0): the same cable as faults.ocs[0] (c).cables[0]",
            ),
            (r#""ocs": [{"name": "c", "cables": []}]"#.to_string(), "faults.ocs[0] (c).cables is empty: an OCS that carries no cable fails nothing"),
        ] {
            let text = TORUS.replace(faults, &format!(r#""faults": {{{ocs}}}"#));
            let e = Spec::parse(&text, "t.json").unwrap().instance().unwrap_err();
            assert_eq!(e.exit_code(), crate::error::ExitCode::BadInput, "{e}");
            // A spec parsed from text is named `spec` (a file, by its path).
            assert!(e.message().starts_with(&format!("spec: {want}")), "{e}");
        }
        // Two OCSes of one dimension at other positions fail their own cables.
        let text = TORUS.replace(faults, &format!(r#""faults": {{"ocs": [{a}, {}]}}"#, b.replace("[1, 2]", "[2, 1]")));
        Spec::parse(&text, "t.json").unwrap().instance().unwrap();
    }

    /// A topology object must name one family: none, or two, was "expected value" or an error
    /// inside the first.
    #[test]
    fn a_topology_names_exactly_one_family() {
        let torus = r#"{"dims": [4], "bandwidth_gbps": 1, "latency_ns": 1}"#;
        for (topology, found) in [("{}".to_string(), "found none"), (format!(r#"{{"torus": {torus}, "custom": {{}}}}"#), "found `custom`, `torus`")] {
            let text = format!(r#"{{"topology": {topology}, "collective": {{"kind": "all_to_all", "bytes_per_rank": 1}}}}"#);
            let e = Spec::parse(&text, "t.json").unwrap_err();
            assert_eq!(e.message(), format!("t.json: field `topology`: expected exactly one of torus, fat_tree, custom, astra_network; {found}"));
        }
        // One family: its own errors are named as before.
        let e = Spec::parse(r#"{"topology": {"torus": {"dims": [4]}}, "collective": {"kind": "all_to_all", "bytes_per_rank": 1}}"#, "t.json").unwrap_err();
        assert!(e.message().contains("topology.torus") && e.message().contains("bandwidth_gbps"), "{e}");
    }

    /// A method names one way, and a spec is one object: both were named only by serde's
    /// "expected value" or the first element's type.
    #[test]
    fn a_method_names_one_way_and_a_spec_is_an_object() {
        let base = r#"{"topology": {"torus": {"dims": [4], "bandwidth_gbps": 1, "latency_ns": 1}}, "collective": {"kind": "all_gather", "bytes_per_rank": 1}"#;
        let both = format!(r#"{base}, "method": {{"generate": {{"algorithm": "ring"}}, "synthesize": {{}}}}}}"#);
        let e = Spec::parse(&both, "t.json").unwrap_err();
        assert_eq!(e.message(), "t.json: field `method`: expected exactly one of generate, synthesize; found `generate`, `synthesize`");
        let e = Spec::parse("[1, 2, 3]", "t.json").unwrap_err();
        assert_eq!(e.message(), "t.json: [1,2,3]: a spec is one JSON object (with `topology` and `collective`)");
    }

    /// A collective whose ranks times nodes the bounds cannot scan is refused by its size before
    /// anything is built for it, and faults that fail every npu leave no rank (exit 3).
    #[test]
    fn too_many_pairs_and_no_rank_left() {
        let ring = |n: u64| {
            format!(
                r#"{{"topology": {{"torus": {{"dims": [{n}], "bandwidth_gbps": 1, "latency_ns": 1}}}}, "collective": {{"kind": "all_gather", "bytes_per_rank": 1}}}}"#
            )
        };
        let e = Spec::parse(&ring(100_000), "t.json").unwrap().instance().unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::BadInput, "{e}");
        assert!(e.message().contains("100000 ranks on a network of 100000 nodes make 10000000000 rank-node pairs"), "{e}");
        Spec::parse(&ring(32_768), "t.json").unwrap().instance().unwrap();
        let all = r#"{"topology": {"torus": {"dims": [2], "bandwidth_gbps": 1, "latency_ns": 1}}, "faults": {"nodes": [0, 1]}, "collective": {"kind": "all_gather", "bytes_per_rank": 1}}"#;
        let e = Spec::parse(all, "t.json").unwrap().instance().unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible, "{e}");
        assert_eq!(e.message(), "spec: faults.nodes fail all 2 npus: no rank is left");
    }

    #[test]
    fn objects_given_as_arrays_of_their_fields_are_refused() {
        let positional = [
            (r#""collective": {"kind": "all_to_all", "bytes_per_rank": 8388608}"#, r#""collective": ["all_to_all", 8388608]"#, "field `collective`"),
            (r#""synthesize": {"solver": "auto", "time_limit_s": 60}"#, r#""synthesize": ["auto", 60]"#, "field `method.synthesize`"),
            (
                r#"{"dims": [4, 4, 4], "wrap": [true, true, true], "bandwidth_gbps": 32.0, "latency_ns": 100.0}"#,
                r#"[[4, 4, 4], [true, true, true], 32.0, 100.0]"#,
                "field `topology.torus`",
            ),
        ];
        for (object, array, field) in positional {
            assert!(TORUS.contains(object), "{object}");
            let text = TORUS.replace(object, array);
            let e = Spec::parse(&text, "t.json").unwrap_err();
            assert_eq!(e.exit_code(), crate::error::ExitCode::BadInput);
            assert!(e.message().starts_with(&format!("t.json: {field}: expected an object")), "{e}");
        }
        // Arrays the format has (dims, a cable's ends, a coordinate) stay arrays.
        Spec::parse(TORUS, "t.json").unwrap();
    }

    #[test]
    fn malformed_json_gives_line_and_column() {
        let e = Spec::parse("{\n  \"topology\": ,\n}", "bad.json").unwrap_err();
        assert!(e.message().contains("bad.json") && e.message().contains("line 2"), "{e}");
    }

    #[test]
    fn trailing_characters_after_the_object_are_refused() {
        let e = Spec::parse(&format!("{TORUS} garbage"), "t.json").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::BadInput);
        assert!(e.message().contains("t.json") && e.message().contains("trailing characters"), "{e}");
        let e = Spec::parse(&format!("{TORUS}{TORUS}"), "t.json").unwrap_err();
        assert!(e.message().contains("trailing characters"), "{e}");
        // Whitespace after the object is fine.
        Spec::parse(&format!("{TORUS}\n\n  "), "t.json").unwrap();
    }

    #[test]
    fn time_limits_must_be_positive_finite_and_sane() {
        for bad in ["-1", "0", "-0.5", "1e300", "31536001"] {
            let text = TORUS.replace("\"time_limit_s\": 60", &format!("\"time_limit_s\": {bad}"));
            let e = Spec::parse(&text, "t.json").unwrap_err();
            assert_eq!(e.exit_code(), crate::error::ExitCode::BadInput, "{bad}");
            let m = e.message();
            assert!(m.contains("t.json: method.synthesize.time_limit_s = ") && m.contains("must be a positive number of seconds"), "{bad}: {e}");
            assert!(m.len() < 200, "the value as written, not in 300 digits: {e}");
        }
        let text = TORUS.replace(
            r#"{"synthesize": {"solver": "auto", "time_limit_s": 60}}"#,
            r#"{"generate": {"algorithm": "ring", "scheduler": "pipeline", "chunks": 0}}"#,
        );
        let e = Spec::parse(&text, "t.json").unwrap_err();
        assert!(e.message().contains("t.json: field `method.generate.chunks` = 0: needs at least 1"), "read by every command, not only generate: {e}");
        let text = TORUS.replace("\"time_limit_s\": 60", "\"time_limit_s\": 0.25");
        assert_eq!(
            Spec::parse(&text, "t.json").unwrap().method,
            Some(MethodSpec::Synthesize(SynthesizeSpec { solver: Solver::Auto, time_limit_s: Some(0.25) }))
        );
    }

    #[test]
    fn missing_cables_and_ranks_out_of_range() {
        let text = TORUS.replace("[[0, 0, 0], [1, 0, 0]]", "[[0, 0, 0], [2, 0, 0]]");
        let e = Spec::parse(&text, "t.json").unwrap().instance().unwrap_err();
        assert!(e.message().contains("faults.cables[0]") && e.message().contains("(0,0,0)-(2,0,0) does not exist"), "{e}");
        let text = TORUS.replace("[[0, 0, 0], [1, 0, 0]]", "[[0, 0, 0], [1, 0, 9]]");
        let e = Spec::parse(&text, "t.json").unwrap().instance().unwrap_err();
        assert!(e.message().contains("[1,0,9]"), "{e}");
        let text = TORUS.replace("\"bytes_per_rank\": 8388608", "\"bytes_per_rank\": 8, \"ranks\": [0, 64]");
        let e = Spec::parse(&text, "t.json").unwrap().instance().unwrap_err();
        assert!(e.message().contains("collective.ranks[1]") && e.message().contains("node 64 does not exist"), "{e}");
        let text = TORUS.replace("8388608", "0");
        let e = Spec::parse(&text, "t.json").unwrap().instance().unwrap_err();
        assert!(e.message().contains("bytes_per_rank = 0"), "{e}");
        let text = TORUS.replace("8388608", "8388608, \"pieces\": 0");
        let e = Spec::parse(&text, "t.json").unwrap().instance().unwrap_err();
        assert!(e.message().contains("pieces = 0"), "{e}");
    }

    #[test]
    fn a_cut_off_rank_is_infeasible() {
        let text = r#"{"topology": {"torus": {"dims": [4], "bandwidth_gbps": 1, "latency_ns": 1}},
          "faults": {"cables": [[0, 1], [1, 2]]}, "collective": {"kind": "all_gather", "bytes_per_rank": "4KiB"}}"#;
        let e = Spec::parse(text, "t.json").unwrap().instance().unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::Infeasible);
        assert!(e.message().contains("rank 1 (node 1, (1))"), "{e}");
    }

    #[test]
    fn failed_nodes_leave_the_default_group_and_ocs_presets_resolve() {
        let text = r#"{"topology": {"torus": {"dims": [8, 4, 4], "bandwidth_gbps": 56, "latency_ns": 500}},
          "faults": {"nodes": [[1, 1, 1]], "ocs": [{"name": "z23", "tpuv4": {"dim": 2, "position": [2, 3]}}]},
          "collective": {"kind": "all_to_all", "bytes_per_rank": 1024}}"#;
        let inst = Spec::parse(text, "t.json").unwrap().instance().unwrap();
        assert_eq!(inst.collective.num_ranks(), 127);
        assert_eq!(inst.topology.down_links().len(), 12 + 4);
    }
}
