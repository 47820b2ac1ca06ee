//! Shorthand flags that build a spec on the command line (docs/design/CLI.md): every flag maps to a spec
//! field, and `--print-spec` shows the spec built.

use crate::collective::CollectiveKind;
use crate::error::{Error, Result};
use crate::spec::{Algorithm, SchedulerName, Spec};
use clap::Args;
use serde_json::{json, Map, Value};

/// Flags that build a spec instead of a spec file.
#[derive(Debug, Args, Default, Clone)]
pub struct SpecFlags {
    /// A torus, e.g. `4x4x4` (topology.torus.dims).
    #[arg(long, value_name = "DIMS")]
    pub torus: Option<String>,
    /// No wrap-around in any dimension (topology.torus.wrap = false).
    #[arg(long)]
    pub mesh: bool,
    /// Link bandwidth in GB/s (topology.*.bandwidth_gbps; default 32).
    #[arg(long, value_name = "GBPS")]
    pub bandwidth: Option<f64>,
    /// Link latency in ns (topology.*.latency_ns; default 100).
    #[arg(long, value_name = "NS")]
    pub latency: Option<f64>,
    /// A failed cable, `(0,0,0)-(1,0,0)` on a torus or `3-7` by node id (faults.cables); repeatable.
    #[arg(long, value_name = "CABLE")]
    pub fail: Vec<String>,
    /// A failed node, `(1,1,1)` or an id (faults.nodes); repeatable.
    #[arg(long, value_name = "NODE")]
    pub fail_node: Vec<String>,
    /// all_to_all, all_gather, reduce_scatter or all_reduce (collective.kind; default all_to_all).
    #[arg(long, value_name = "KIND")]
    pub collective: Option<CollectiveKind>,
    /// Bytes per rank, e.g. `4MiB` (collective.bytes_per_rank; default 1MiB).
    #[arg(long, value_name = "SIZE")]
    pub bytes: Option<String>,
    /// Pieces per block (collective.pieces).
    #[arg(long)]
    pub pieces: Option<u32>,
    /// The algorithm (method.generate.algorithm).
    #[arg(long)]
    pub algorithm: Option<Algorithm>,
    /// The scheduler (method.generate.scheduler).
    #[arg(long)]
    pub scheduler: Option<SchedulerName>,
    /// Chunks of the pipeline scheduler (method.generate.chunks).
    #[arg(long)]
    pub chunks: Option<usize>,
    /// Print the spec the flags build (or the spec file read) and stop.
    #[arg(long)]
    pub print_spec: bool,
}

impl SpecFlags {
    /// Whether any flag that builds a spec was given.
    pub fn any(&self) -> bool {
        self.torus.is_some()
            || self.mesh
            || self.bandwidth.is_some()
            || self.latency.is_some()
            || !self.fail.is_empty()
            || !self.fail_node.is_empty()
            || self.collective.is_some()
            || self.bytes.is_some()
            || self.pieces.is_some()
            || self.algorithm.is_some()
            || self.scheduler.is_some()
            || self.chunks.is_some()
    }

    /// Builds the spec the flags describe.
    pub fn build(&self) -> Result<Spec> {
        let dims_text = self.torus.as_deref().ok_or_else(|| Error::bad("--torus DIMS is needed to build a spec from flags (or give a spec file)"))?;
        let dims: Vec<usize> = dims_text
            .split('x')
            .map(|d| d.trim().parse::<usize>().map_err(|_| Error::bad(format!("--torus {dims_text}: expected dimensions like 4x4x4"))))
            .collect::<Result<_>>()?;
        // Checked here so that the message names the flag (JSON has no NaN: it would turn to null).
        if let Some(bw) = self.bandwidth {
            crate::units::checked_bandwidth(bw).map_err(|why| Error::bad(format!("command-line flags: --bandwidth {why}")))?;
        }
        if let Some(lat) = self.latency {
            crate::units::checked_latency(lat).map_err(|why| Error::bad(format!("command-line flags: --latency {why}")))?;
        }
        let mut torus = json!({"dims": dims, "bandwidth_gbps": self.bandwidth.unwrap_or(32.0), "latency_ns": self.latency.unwrap_or(100.0)});
        if self.mesh {
            torus["wrap"] = json!(vec![false; dims.len()]);
        }
        let mut spec = Map::new();
        spec.insert("topology".into(), json!({"torus": torus}));
        let mut faults = Map::new();
        if !self.fail.is_empty() {
            let cables = self.fail.iter().map(|c| parse_cable(c)).collect::<Result<Vec<_>>>()?;
            faults.insert("cables".into(), Value::Array(cables));
        }
        if !self.fail_node.is_empty() {
            let nodes = self.fail_node.iter().map(|n| parse_node(n, "--fail-node")).collect::<Result<Vec<_>>>()?;
            faults.insert("nodes".into(), Value::Array(nodes));
        }
        if !faults.is_empty() {
            spec.insert("faults".into(), Value::Object(faults));
        }
        if let Some(bytes) = &self.bytes {
            crate::units::parse_bytes(bytes).map_err(|why| Error::bad(format!("command-line flags: --bytes {bytes}: {why}")))?;
        }
        let mut collective =
            json!({"kind": self.collective.unwrap_or(CollectiveKind::AllToAll), "bytes_per_rank": self.bytes.clone().unwrap_or_else(|| "1MiB".into())});
        if let Some(p) = self.pieces {
            collective["pieces"] = json!(p);
        }
        spec.insert("collective".into(), collective);
        if let Some(a) = &self.algorithm {
            let mut g = json!({"algorithm": a});
            if let Some(s) = self.scheduler {
                g["scheduler"] = json!(s);
            }
            if let Some(c) = self.chunks {
                g["chunks"] = json!(c);
            }
            spec.insert("method".into(), json!({"generate": g}));
        } else if self.scheduler.is_some() || self.chunks.is_some() {
            return Err(Error::bad("--scheduler and --chunks need --algorithm"));
        }
        Spec::parse(&Value::Object(spec).to_string(), "command-line flags")
    }
}

/// `(0,0,0)` -> `[0,0,0]`; `7` -> `7`; the error names the whole value given to `flag`.
fn parse_node(text: &str, flag: &str) -> Result<Value> {
    node(text).map_err(|why| Error::bad(format!("{flag} {text}: {why}")))
}

/// A node's coordinate or id, or why `text` is neither.
fn node(text: &str) -> std::result::Result<Value, String> {
    let t = text.trim();
    if let Some(inner) = t.strip_prefix('(').and_then(|x| x.strip_suffix(')')) {
        let coord =
            inner.split(',').map(|c| c.trim().parse::<u64>().map_err(|_| format!("`{c}` is not a coordinate"))).collect::<std::result::Result<Vec<_>, _>>()?;
        return Ok(json!(coord));
    }
    t.parse::<u64>().map(|id| json!(id)).map_err(|_| format!("`{t}`: expected a coordinate like (1,0,2) or a node id"))
}

/// `(0,0,0)-(1,0,0)` or `3-7`; the error quotes the whole value given to `--fail`.
fn parse_cable(text: &str) -> Result<Value> {
    let expected = "expected a cable like (0,0,0)-(1,0,0) or 3-7";
    let split = text.find(")-(").map(|i| i + 1).or_else(|| if text.contains('(') { None } else { text.find('-') });
    let at = split.ok_or_else(|| Error::bad(format!("--fail {text}: {expected}")))?;
    let end = |part: &str| node(part).map_err(|why| Error::bad(format!("--fail {text}: {expected}: {why}")));
    Ok(json!([end(&text[..at])?, end(&text[at + 1..])?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_build_the_formats_example() {
        let f = SpecFlags {
            torus: Some("4x4x4".into()),
            fail: vec!["(0,0,0)-(1,0,0)".into()],
            collective: Some(CollectiveKind::AllToAll),
            bytes: Some("4MiB".into()),
            ..Default::default()
        };
        let s = f.build().unwrap();
        let inst = s.instance().unwrap();
        assert_eq!(inst.topology.down_links().len(), 2);
        assert_eq!(inst.collective.bytes_per_rank, 4 << 20);
        assert!(SpecFlags { torus: Some("4xq".into()), ..Default::default() }.build().is_err());
        assert!(SpecFlags { torus: Some("4".into()), fail: vec!["(0)".into()], ..Default::default() }.build().is_err());
        let ids = SpecFlags { torus: Some("6".into()), fail: vec!["2-3".into()], ..Default::default() }.build().unwrap();
        assert_eq!(ids.instance().unwrap().topology.down_links().len(), 2);
    }

    /// A cable's error quotes the whole value given to `--fail`, not the part after its first
    /// dash (it said "--fail (1,0)-(2,0): `0)-(2` is not a coordinate").
    #[test]
    fn a_bad_cable_is_quoted_whole() {
        for bad in ["(0,0)-(1,0)-(2,0)", "(0,0)-(x,0)", "3-q", "(0,0)"] {
            let e = SpecFlags { torus: Some("4x4".into()), fail: vec![bad.into()], ..Default::default() }.build().unwrap_err();
            assert!(e.message().starts_with(&format!("--fail {bad}: expected a cable like")), "{bad}: {e}");
        }
        let e = SpecFlags { torus: Some("4x4".into()), fail_node: vec!["(1,y)".into()], ..Default::default() }.build().unwrap_err();
        assert_eq!(e.message(), "--fail-node (1,y): `y` is not a coordinate");
    }
}
