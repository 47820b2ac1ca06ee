//! ASTRA-sim analytical network files (docs/design/FORMATS.md) as topologies.
//!
//! ```yaml
//! topology: [ Ring, Ring, Ring ]   # per dimension: Ring | FullyConnected | Switch
//! npus_count: [ 4, 4, 4 ]
//! bandwidth: [ 56.0, 56.0, 56.0 ]  # GB/s per link per direction
//! latency: [ 500.0, 500.0, 500.0 ] # ns
//! ```
//!
//! Npus are numbered as on a torus (dimension 0 fastest). A network of `Ring` dimensions only is
//! a torus (with its shape, so torus algorithms run on it). Otherwise: `Ring` dimensions cable
//! each line into a ring, `FullyConnected` dimensions cable every pair of a line, and `Switch`
//! dimensions add one switch per line (after all npus, line by line) cabled to each npu of it.
//! ASTRA-sim reads these files with yaml-cpp, so any YAML spelling of the data is legal; this
//! subset is read: `key: [a, b]` lists or `- item` block lists, `#` comments, plain, single- or
//! double-quoted scalars and keys, a leading byte-order mark, and a file that is one flow mapping
//! `{...}` when it is JSON.

use super::{torus, LinkClass, NodeId, NodeKind, Shape, Topology, TopologyBuilder, TorusParams, TorusShape};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// What one dimension is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AstraDim {
    /// A bidirectional ring.
    Ring,
    /// Every pair of the line cabled.
    FullyConnected,
    /// One switch per line.
    Switch,
}

/// The keys of a network file.
const KEYS: [&str; 4] = ["topology", "npus_count", "bandwidth", "latency"];
/// The most npus of a network with a fully connected or switched dimension.
const MAX_NPUS: usize = 1 << 20;

/// A scalar as yaml-cpp hands it over: without its quotes (`''` in a single-quoted one is a
/// quote; a double-quoted one's escapes are kept, as no value here needs them).
fn unquote(s: &str) -> String {
    if let Some(inner) = s.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')).filter(|_| s.len() >= 2) {
        return inner.replace("''", "'");
    }
    match s.strip_prefix('"').and_then(|v| v.strip_suffix('"')).filter(|_| s.len() >= 2) {
        Some(inner) => inner.to_string(),
        None => s.to_string(),
    }
}

/// Whether a line holds nothing but white space or a comment.
fn blank(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// The lists of a file that is one flow mapping, read as JSON (a flow mapping in another YAML
/// spelling is refused, saying so). Every value must be a list; its strings and numbers are
/// handed on as the block reader hands on its scalars.
fn parse_json_lists(text: &str) -> Result<BTreeMap<String, Vec<String>>> {
    let not_json = |why: String| {
        Error::bad(format!("a flow mapping {{...}} that is not JSON ({why}): only a JSON one is read, or write the keys as `key: [values]` lines"))
    };
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Map<String, serde_json::Value>>();
    let map = match stream.next() {
        Some(Ok(map)) => map,
        Some(Err(e)) => return Err(not_json(e.to_string())),
        None => return Err(not_json("it is empty".into())),
    };
    let rest = &text[stream.byte_offset()..];
    if !rest.lines().all(blank) {
        return Err(not_json(format!("text after its closing brace: `{}`", rest.trim().lines().next().unwrap_or(""))));
    }
    let mut out = BTreeMap::new();
    for (key, value) in map {
        if !KEYS.contains(&key.as_str()) {
            return Err(Error::bad(format!("unknown key `{key}` (expected topology, npus_count, bandwidth, latency)")));
        }
        let serde_json::Value::Array(items) = value else {
            return Err(Error::bad(format!("`{key}` = `{value}`: expected a list such as [ 4, 4 ]")));
        };
        let items = items
            .into_iter()
            .map(|v| match v {
                serde_json::Value::String(s) => Ok(s),
                serde_json::Value::Number(n) => Ok(n.to_string()),
                other => Err(Error::bad(format!("`{key}` holds `{other}`: expected a number or a name"))),
            })
            .collect::<Result<_>>()?;
        out.insert(key, items);
    }
    Ok(out)
}

fn parse_lists(text: &str) -> Result<BTreeMap<String, Vec<String>>> {
    if text.lines().find(|l| !blank(l)).is_some_and(|l| l.trim_start().starts_with('{')) {
        let skipped: usize = text.lines().take_while(|l| blank(l)).map(|l| l.len() + 1).sum();
        return parse_json_lists(&text[skipped.min(text.len())..]);
    }
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let lineno = n + 1;
        if let Some(item) = line.trim_start().strip_prefix("- ") {
            let key = current.clone().ok_or_else(|| Error::bad(format!("line {lineno}: a list item outside a key")))?;
            out.get_mut(&key).expect("current key exists").push(unquote(item.trim()));
            continue;
        }
        let (key, value) = line.split_once(':').ok_or_else(|| Error::bad(format!("line {lineno}: expected `key: [values]`, found `{}`", line.trim())))?;
        let key = unquote(key.trim());
        if !KEYS.contains(&key.as_str()) {
            return Err(Error::bad(format!("line {lineno}: unknown key `{key}` (expected topology, npus_count, bandwidth, latency)")));
        }
        if out.contains_key(&key) {
            return Err(Error::bad(format!("line {lineno}: key `{key}` given twice")));
        }
        let value = value.trim();
        let items = if value.is_empty() {
            Vec::new()
        } else {
            let inner = value
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .ok_or_else(|| Error::bad(format!("line {lineno}: `{key}` = `{value}`: expected a list such as [ 4, 4 ]")))?;
            inner.split(',').map(str::trim).filter(|s| !s.is_empty()).map(unquote).collect()
        };
        out.insert(key.clone(), items);
        current = Some(key);
    }
    Ok(out)
}

/// Parses the text of an analytical network file into a topology.
pub fn parse(text: &str) -> Result<Topology> {
    // yaml-cpp skips a byte-order mark.
    let net = Network::read(text.strip_prefix('\u{feff}').unwrap_or(text))?;
    if net.kinds.iter().all(|&k| k == AstraDim::Ring) {
        let n = net.dims.len();
        return torus(&TorusParams { dims: net.dims, wrap: vec![true; n], bandwidth_gbps: net.bandwidth, latency_ns: net.latency });
    }
    net.build()
}

/// The four lists of a network file, checked: one kind, npu count, bandwidth and latency per
/// dimension.
struct Network {
    kinds: Vec<AstraDim>,
    dims: Vec<usize>,
    bandwidth: Vec<f64>,
    latency: Vec<f64>,
}

impl Network {
    /// Reads and checks the lists (every error names the key and the value).
    fn read(text: &str) -> Result<Network> {
        let lists = parse_lists(text)?;
        let get = |k: &str| lists.get(k).ok_or_else(|| Error::bad(format!("missing key `{k}`")));
        let kinds: Vec<AstraDim> = get("topology")?
            .iter()
            .map(|s| match s.as_str() {
                "Ring" => Ok(AstraDim::Ring),
                "FullyConnected" => Ok(AstraDim::FullyConnected),
                "Switch" => Ok(AstraDim::Switch),
                other => Err(Error::bad(format!("topology: `{other}`: expected Ring, FullyConnected or Switch"))),
            })
            .collect::<Result<_>>()?;
        // A value that is not a number is named by its key and index, as a bad number is below
        // (YAML's `.nan` and `.inf` are not numbers here; a quoted number is read as yaml-cpp
        // reads it, as the number).
        let nums = |k: &str| -> Result<Vec<f64>> {
            get(k)?.iter().enumerate().map(|(i, s)| s.parse::<f64>().map_err(|_| Error::bad(format!("{k}[{i}] = \"{s}\": not a number")))).collect()
        };
        let counts = nums("npus_count")?;
        let bw = nums("bandwidth")?;
        let lat = nums("latency")?;
        let n = kinds.len();
        if n == 0 {
            return Err(Error::bad("topology: [] has no dimension"));
        }
        for (k, len) in [("npus_count", counts.len()), ("bandwidth", bw.len()), ("latency", lat.len())] {
            if len != n {
                return Err(Error::bad(format!("{k} has {len} values but topology has {n}: the lists must have equal length")));
            }
        }
        // Checked here, so that a bad value is named by the file's own key.
        for (i, &v) in bw.iter().enumerate() {
            crate::units::checked_bandwidth(v).map_err(|why| Error::bad(format!("bandwidth[{i}] = {why}")))?;
        }
        for (i, &v) in lat.iter().enumerate() {
            crate::units::checked_latency(v).map_err(|why| Error::bad(format!("latency[{i}] = {why}")))?;
        }
        let dims: Vec<usize> = counts
            .iter()
            .enumerate()
            .map(
                |(i, &c)| {
                    if c >= 1.0 && c.fract() == 0.0 {
                        Ok(c as usize)
                    } else {
                        Err(Error::bad(format!("npus_count[{i}] = {c}: must be a positive integer")))
                    }
                },
            )
            .collect::<Result<_>>()?;
        // Sized here, before a count beyond the machine's integers is clamped, so that the
        // message names the file's key and the value as written.
        let limit: usize = if kinds.iter().all(|&k| k == AstraDim::Ring) { super::torus::MAX_NODES } else { MAX_NPUS };
        let written = get("npus_count")?;
        if let Some(i) = counts.iter().position(|&c| c > limit as f64) {
            return Err(Error::bad(format!("npus_count[{i}] = {}: more than {limit} npus", written[i])));
        }
        if dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).is_none_or(|t| t > limit) {
            return Err(Error::bad(format!("npus_count = [{}]: more than {limit} npus", written.join(", "))));
        }
        Ok(Network { kinds, dims, bandwidth: bw, latency: lat })
    }

    /// The topology of a network with at least one fully connected or switched dimension: npus
    /// on the grid of `dims`, each dimension's lines joined as a ring, a full mesh, or through
    /// one switch per line.
    fn build(self) -> Result<Topology> {
        let Network { kinds, dims, bandwidth: bw, latency: lat } = self;
        let n = dims.len();
        let shape = TorusShape { dims: dims.clone(), wrap: vec![true; n] };
        let total: usize = dims.iter().product();
        if total > MAX_NPUS {
            return Err(Error::bad(format!("npus_count = {dims:?}: more than {MAX_NPUS} npus")));
        }
        let mut b = TopologyBuilder::new();
        for id in 0..total {
            b.node(NodeKind::Npu, TorusShape::name(&shape.coord(NodeId(id as u32))));
        }
        for (dim, &kind) in kinds.iter().enumerate() {
            let class = |positive| LinkClass::TorusDim { dim: dim as u8, positive };
            let lines: Vec<NodeId> = (0..total as u32).map(NodeId).filter(|&v| shape.coord_in(v, dim) == 0).collect();
            for first in lines {
                let line = shape.line(first, dim);
                match kind {
                    AstraDim::Ring => {
                        for &v in &line {
                            if let Some(w) = shape.neighbor(v, dim, true) {
                                if shape.coord_in(w, dim) != 0 || line.len() > 2 {
                                    b.cable(v, w, bw[dim], lat[dim], class(true), class(false));
                                }
                            }
                        }
                    }
                    AstraDim::FullyConnected => {
                        for (i, &v) in line.iter().enumerate() {
                            for &w in &line[i + 1..] {
                                b.cable(v, w, bw[dim], lat[dim], class(true), class(false));
                            }
                        }
                    }
                    AstraDim::Switch => {}
                }
            }
        }
        let mut switch_lines = Vec::new();
        for (dim, &kind) in kinds.iter().enumerate() {
            if kind == AstraDim::Switch {
                for first in (0..total as u32).map(NodeId).filter(|&v| shape.coord_in(v, dim) == 0) {
                    let s = b.node(NodeKind::Switch, format!("switch{dim}{}", TorusShape::name(&shape.coord(first))));
                    switch_lines.push((dim, first, s));
                }
            }
        }
        for (dim, first, s) in switch_lines {
            for v in shape.line(first, dim) {
                b.cable(v, s, bw[dim], lat[dim], LinkClass::Tier { tier: dim as u8, up: true }, LinkClass::Tier { tier: dim as u8, up: false });
            }
        }
        b.build(Shape::Custom, 0.0)
    }
}

/// Loads an analytical network file.
pub fn load(path: &Path) -> Result<Topology> {
    let text = crate::io::read_to_string(path)?;
    parse(&text).map_err(|e| e.context(path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_make_a_torus() {
        let t = parse("topology: [ Ring, Ring, Ring ]   # dims\nnpus_count: [ 4, 4, 4 ]\nbandwidth: [ 56.0, 56.0, 56.0 ]\nlatency: [ 500.0, 500.0, 500.0 ]\n")
            .unwrap();
        assert_eq!(t.num_npus(), 64);
        assert_eq!(t.torus_shape().unwrap().dims, vec![4, 4, 4]);
        assert_eq!(t.num_links(), 64 * 6);
    }

    #[test]
    fn mixed_dimensions_and_block_lists() {
        let t = parse("topology:\n  - FullyConnected\n  - Switch\nnpus_count: [ 4, 2 ]\nbandwidth: [ 100, 50 ]\nlatency: [ 10, 20 ]\n").unwrap();
        assert_eq!(t.num_npus(), 8);
        assert_eq!(t.num_switches(), 4);
        assert_eq!(t.num_links(), 2 * (2 * 6 + 8));
    }

    #[test]
    fn errors_name_the_key() {
        let e = parse("topology: [ Ring ]\nnpus_count: [ 4, 4 ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]").unwrap_err();
        assert!(e.message().contains("npus_count has 2 values"), "{e}");
        let e = parse("topology: [ Torus ]\nnpus_count: [ 4 ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]").unwrap_err();
        assert!(e.message().contains("`Torus`"), "{e}");
        let e = parse("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 1 ]").unwrap_err();
        assert!(e.message().contains("missing key `latency`"), "{e}");
        assert!(parse("hello").is_err());
    }

    /// Bad bandwidths and latencies are named by the file's keys, and an unknown key is named as
    /// one, whatever its value.
    #[test]
    fn errors_use_the_files_keys() {
        let e = parse("topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 3.3333333333333335 ]\nlatency: [ 500.0 ]\n").unwrap_err();
        assert!(e.message().starts_with("bandwidth[0] = 3.3333333333333335: "), "{e}");
        let e = parse("topology: [ Ring, Switch ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 50, 50 ]\nlatency: [ 1, 1e39 ]\n").unwrap_err();
        assert!(e.message().starts_with("latency[1] = 1e39: "), "{e}");
        for (bw, lat, want) in [
            ("tbd", "1", r#"bandwidth[0] = "tbd": not a number"#),
            (".nan", "1", r#"bandwidth[0] = ".nan": not a number"#),
            (".inf", "1", r#"bandwidth[0] = ".inf": not a number"#),
            ("\"50GB/s\"", "1", r#"bandwidth[0] = "50GB/s": not a number"#),
            ("50", "soon", r#"latency[0] = "soon": not a number"#),
        ] {
            let e = parse(&format!("topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ {bw} ]\nlatency: [ {lat} ]\n")).unwrap_err();
            assert_eq!(e.message(), want);
        }
        let e = parse("topology: [ Ring, Ring ]\nnpus_count: [ 2, 2 ]\nbandwidth:\n  - 50\n  - tbd\nlatency: [ 1, 1 ]\n").unwrap_err();
        assert_eq!(e.message(), r#"bandwidth[1] = "tbd": not a number"#);
        let e = parse("topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 56.0 ]\nlatency: [ 500.0 ]\nfoo: 1\n").unwrap_err();
        assert_eq!(e.message(), "line 5: unknown key `foo` (expected topology, npus_count, bandwidth, latency)");
    }

    /// yaml-cpp reads any YAML spelling of the lists: quoted scalars and keys, a byte-order mark,
    /// and a file that is JSON; each is the network of the plain spelling.
    #[test]
    fn other_yaml_spellings_of_the_same_network() {
        let plain = parse("topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 50.0, 25.0 ]\nlatency: [ 500.0, 100.0 ]\n").unwrap();
        let shape = |t: &Topology| (t.num_npus(), t.num_switches(), t.num_links());
        for text in [
            "topology: [ \"Ring\", 'Switch' ]\nnpus_count: [ 4, '2' ]\nbandwidth: [ \"50.0\", 25.0 ]\nlatency: [ 500.0, 100.0 ]\n",
            "\"topology\":\n  - 'Ring'\n  - \"Switch\"\n'npus_count': [ 4, 2 ]\nbandwidth: [ 50.0, 25.0 ]\nlatency: [ 500.0, 100.0 ]\n",
            "\u{feff}topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 50.0, 25.0 ]\nlatency: [ 500.0, 100.0 ]\n",
            r#"{"topology": ["Ring", "Switch"], "npus_count": [4, 2], "bandwidth": [50.0, 25], "latency": [500.0, 100.0]}"#,
            "\u{feff}# a network\n\n{\"topology\": [\"Ring\", \"Switch\"],\n \"npus_count\": [4, 2], \"bandwidth\": [50.0, 25.0], \"latency\": [500.0, 100.0]}\n# end\n",
        ] {
            assert_eq!(shape(&parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))), shape(&plain), "{text}");
        }
        let t = parse(r#"{"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}"#).unwrap();
        assert_eq!(t.torus_shape().unwrap().dims, vec![8]);
        // Real errors keep their messages, in every spelling.
        let e = parse("topology: [ 'Torus' ]\nnpus_count: [ 4 ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]").unwrap_err();
        assert_eq!(e.message(), "topology: `Torus`: expected Ring, FullyConnected or Switch");
        let e = parse(r#"{"topology": ["Ring"], "npus_count": [8], "bandwidth": ["tbd"], "latency": [500.0]}"#).unwrap_err();
        assert_eq!(e.message(), r#"bandwidth[0] = "tbd": not a number"#);
        let e = parse(r#"{"topology": ["Ring"], "npus_count": [8], "bandwidth": [50], "latency": [500.0], "foo": [1]}"#).unwrap_err();
        assert_eq!(e.message(), "unknown key `foo` (expected topology, npus_count, bandwidth, latency)");
        let e = parse(r#"{"topology": ["Ring"], "npus_count": [8], "bandwidth": [50]}"#).unwrap_err();
        assert_eq!(e.message(), "missing key `latency`");
        // A flow mapping that is not JSON is refused as such.
        for text in ["{topology: [Ring], npus_count: [8], bandwidth: [50], latency: [500]}", "{\"topology\": [\"Ring\"]} trailing"] {
            let e = parse(text).unwrap_err();
            assert!(e.message().starts_with("a flow mapping {...} that is not JSON ("), "{e}");
        }
    }

    /// A count too large is named by the file's key and the value as written (it was named
    /// `dims` with the count clamped to the largest integer).
    #[test]
    fn a_huge_count_is_named_as_written() {
        let e = parse("topology: [ Ring ]\nnpus_count: [ 99999999999999999999 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n").unwrap_err();
        assert_eq!(e.message(), "npus_count[0] = 99999999999999999999: more than 4194304 npus");
        let e = parse("topology: [ Ring, Switch ]\nnpus_count: [ 4, 1e7 ]\nbandwidth: [ 50, 50 ]\nlatency: [ 500, 500 ]\n").unwrap_err();
        assert_eq!(e.message(), "npus_count[1] = 1e7: more than 1048576 npus");
        let e = parse("topology: [ Ring, Ring ]\nnpus_count: [ 4096, 4096 ]\nbandwidth: [ 50, 50 ]\nlatency: [ 500, 500 ]\n").unwrap_err();
        assert_eq!(e.message(), "npus_count = [4096, 4096]: more than 4194304 npus");
        assert!(matches!(e, Error::BadInput(_)));
    }
}
