//! The outputs of a sweep: the index (`index.json`: every fault, its class, the class schedule
//! and the symmetry that maps it, time, certified bound and gap), the summary table
//! (`summary.md`) and the histogram of the gaps (`gaps.svg`).
//!
//! Every output is a function of the index alone, written with a fixed key order and one line
//! per class and per fault, so the same sweep always gives the same bytes, and merging the
//! shards of a sweep gives the bytes of the unsharded run.

use crate::error::{Error, Result};
use crate::io::OutputSet;
use crate::units::format_ns;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

/// The `format` of an index file.
pub const INDEX_FORMAT: &str = "collsched.sweep";

/// What a sweep covered: the same in every shard of one sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct SweepHeader {
    /// The spec's `topology` object (without faults).
    pub topology: Value,
    /// The spec's `collective` object.
    pub collective: Value,
    /// The fault family: `cables`, `pairs` or `ocs`.
    pub faults: String,
    /// The OCS cube side (`ocs` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cube: Option<usize>,
    /// Seconds of synthesis per class.
    pub time_limit_s: f64,
    /// The exact backend.
    pub solver: String,
    /// Which mapped members were verified: `none`, `all` or `sample N`.
    pub verify_members: String,
    /// The seed of the sample.
    pub seed: u64,
    /// The order of the symmetry group (a decimal number).
    pub group_order: String,
    /// Its generators.
    pub generators: Vec<String>,
    /// Number of fault patterns.
    pub fault_count: usize,
    /// Number of classes.
    pub class_count: usize,
}

/// Which slice of the classes a shard index holds: classes `c` with `c % count == index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ShardInfo {
    /// K of `--shard K/N`.
    pub index: usize,
    /// N of `--shard K/N`.
    pub count: usize,
}

/// How a class ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassStatus {
    /// A verified, certified schedule.
    Ok,
    /// The time limit stopped a search: the best schedule found is there (verified, certified).
    LimitReached,
    /// No schedule: the faults cut a rank off, or nothing was found.
    Infeasible,
}

/// A class's schedule: where its files are and what it costs against its certified bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ClassSchedule {
    /// The schedule file, relative to the output folder.
    pub file: String,
    /// Its SHA-256.
    pub sha256: String,
    /// The bound certificate with the schedule attached (`collsched proof check` re-checks it).
    pub certificate: String,
    /// The spec of the representative's instance.
    pub spec: String,
    /// The synthesis candidate chosen.
    pub chosen: String,
    /// Steps.
    pub steps: usize,
    /// Pieces per block.
    pub pieces: u32,
    /// Step-synchronous time, ns.
    pub time_ns: f64,
    /// Its bandwidth term (latencies set to 0), ns.
    pub bandwidth_ns: f64,
    /// The certified bandwidth bound, ns.
    pub bandwidth_bound_ns: Option<f64>,
    /// The certified latency bound, ns.
    pub latency_bound_ns: f64,
    /// Bandwidth bound plus latency bound, ns.
    pub bound_ns: Option<f64>,
    /// `time / bound - 1`.
    pub gap: Option<f64>,
    /// The bandwidth term equals the certified bandwidth bound.
    pub bandwidth_optimal: bool,
}

/// One class of the index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct ClassEntry {
    /// Its number (classes are numbered by their representatives' order).
    pub class: usize,
    /// The representative's fault number.
    pub representative: usize,
    /// The representative's name.
    pub name: String,
    /// Number of faults in the class.
    pub members: usize,
    /// How it ended.
    pub status: ClassStatus,
    /// Why there is no schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The schedule, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ClassSchedule>,
    /// How many mapped members (besides the representative) were verified.
    pub members_verified: usize,
}

/// One fault of the index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct FaultEntry {
    /// Its number in the sweep's order.
    pub fault: usize,
    /// A name for people.
    pub name: String,
    /// The spec's `faults` object for it.
    pub faults: Value,
    /// Its class.
    pub class: usize,
    /// The symmetry that maps the class schedule onto a schedule for this fault
    /// (`{"axes", "reflect", "shift"}` on a torus, `{"nodes"}` otherwise).
    pub symmetry: Value,
    /// The class schedule file (absent when the class has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Step-synchronous time, ns (that of the class schedule: a symmetry keeps it exactly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_ns: Option<f64>,
    /// The certified bound, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_ns: Option<f64>,
    /// `time / bound - 1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    /// The mapped schedule was verified (rules 1-5) and costs exactly the class's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
}

/// A sweep's index, or one shard's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct Index {
    /// [`INDEX_FORMAT`].
    pub format: String,
    /// 1.
    pub version: u32,
    /// What was swept.
    pub sweep: SweepHeader,
    /// The slice of a shard; absent in a whole sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// The classes, by number.
    pub classes: Vec<ClassEntry>,
    /// The faults, by number.
    pub faults: Vec<FaultEntry>,
}

fn line<T: Serialize>(out: &mut Vec<u8>, value: &T) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    Ok(())
}

impl Index {
    /// The index as bytes: one line per class and per fault.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let write = |out: &mut Vec<u8>| -> std::io::Result<()> {
            write!(out, "{{\n  \"format\": {},\n  \"version\": {},\n  \"sweep\": ", serde_json::to_string(&self.format)?, self.version)?;
            line(out, &self.sweep)?;
            if let Some(shard) = &self.shard {
                out.extend_from_slice(b",\n  \"shard\": ");
                line(out, shard)?;
            }
            out.extend_from_slice(b",\n  \"classes\": [");
            for (i, c) in self.classes.iter().enumerate() {
                out.extend_from_slice(if i == 0 { b"\n    " } else { b",\n    " });
                line(out, c)?;
            }
            out.extend_from_slice(b"\n  ],\n  \"faults\": [");
            for (i, f) in self.faults.iter().enumerate() {
                out.extend_from_slice(if i == 0 { b"\n    " } else { b",\n    " });
                line(out, f)?;
            }
            out.extend_from_slice(b"\n  ]\n}\n");
            Ok(())
        };
        write(&mut out).expect("writing to memory cannot fail");
        out
    }

    /// Reads `DIR/index.json`.
    pub fn read(dir: &Path) -> Result<Index> {
        let path = dir.join("index.json");
        let text = crate::io::read_to_string(&path)?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        let index: Index = serde_path_to_error::deserialize(de)
            .map_err(|e| Error::bad(format!("{}: field `{}`: {}", path.display(), e.path(), crate::io::json_message(e.inner(), text.as_bytes()))))?;
        if index.format != INDEX_FORMAT || index.version != 1 {
            return Err(Error::bad(format!(
                "{}: format {:?} version {}: not a sweep index (expected {INDEX_FORMAT:?} version 1)",
                path.display(),
                index.format,
                index.version
            )));
        }
        Ok(index)
    }

    /// Writes `index.json`, `summary.md` and `gaps.svg` into `dir`, as files of `out`.
    pub fn write_all(&self, dir: &Path, out: &OutputSet) -> Result<()> {
        let files = [("index.json", self.to_bytes()), ("summary.md", self.summary().into_bytes()), ("gaps.svg", self.histogram_svg().into_bytes())];
        for (name, bytes) in files {
            out.write_bytes(&dir.join(name), &bytes)?;
        }
        Ok(())
    }

    /// The gaps of the faults that have a schedule, smallest first.
    fn sorted_gaps(&self) -> Vec<f64> {
        let mut gaps: Vec<f64> = self.faults.iter().filter_map(|f| f.gap).collect();
        gaps.sort_by(f64::total_cmp);
        gaps
    }

    fn title(&self) -> String {
        let h = &self.sweep;
        let topology = describe_topology(&h.topology);
        let kind = h.collective.get("kind").and_then(Value::as_str).unwrap_or("?");
        let bytes = match h.collective.get("bytes_per_rank") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => format!("{v} bytes"),
            None => "?".into(),
        };
        let family = match h.faults.as_str() {
            "cables" => "every single cable".to_string(),
            "pairs" => "every pair of cables".to_string(),
            _ => format!("every TPUv4 OCS (cubes of side {})", h.cube.unwrap_or(4)),
        };
        format!("{kind} of {bytes} per rank on {topology}, {family}")
    }

    /// The Markdown summary: totals, then one row per class.
    pub fn summary(&self) -> String {
        let gaps = self.sorted_gaps();
        let mut times: Vec<f64> = self.faults.iter().filter_map(|f| f.time_ns).collect();
        times.sort_by(f64::total_cmp);
        let count = |s: ClassStatus| self.classes.iter().filter(|c| c.status == s).map(|c| c.members).sum::<usize>();
        let pct = |g: Option<&f64>| g.map_or("-".to_string(), |g| format!("{:.2}%", 100.0 * g));
        let time = |t: Option<&f64>| t.map_or("-".to_string(), |&t| format_ns(t));
        let mut out = format!("# Fault library: {}\n\n", self.title());
        let _ = writeln!(out, "{} faults in {} classes (symmetry group of order {}).", self.sweep.fault_count, self.sweep.class_count, self.sweep.group_order);
        let _ = writeln!(out, "Gaps and times are over faults (a class counts once per member); medians are the lower middle value.\n");
        out.push_str("| faults | classes | with a schedule | of which limit reached | infeasible | worst gap | median gap | worst time | median time | members verified |\n");
        out.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            self.faults.len(),
            self.classes.len(),
            count(ClassStatus::Ok) + count(ClassStatus::LimitReached),
            count(ClassStatus::LimitReached),
            count(ClassStatus::Infeasible),
            pct(gaps.last()),
            pct(median(&gaps)),
            time(times.last()),
            time(median(&times)),
            self.faults.iter().filter(|f| f.verified == Some(true)).count()
        );
        out.push_str("| class | representative | members | status | chosen | steps | time | certified bound | gap |\n");
        out.push_str("|---:|---|---:|---|---|---:|---:|---:|---:|\n");
        for c in &self.classes {
            let status = match c.status {
                ClassStatus::Ok => "ok".to_string(),
                ClassStatus::LimitReached => "limit reached".to_string(),
                ClassStatus::Infeasible => format!("infeasible: {}", c.reason.as_deref().unwrap_or("")).replace('|', "/"),
            };
            let (chosen, steps, t, bound, gap) = match &c.schedule {
                Some(s) => (s.chosen.clone(), s.steps.to_string(), format_ns(s.time_ns), time(s.bound_ns.as_ref()), pct(s.gap.as_ref())),
                None => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
            };
            let _ = writeln!(out, "| {} | {} | {} | {status} | {chosen} | {steps} | {t} | {bound} | {gap} |", c.class, c.name, c.members);
        }
        out
    }

    /// An SVG histogram of the faults' gaps to their certified bounds.
    pub fn histogram_svg(&self) -> String {
        let gaps: Vec<f64> = self.sorted_gaps().iter().map(|g| 100.0 * g).collect();
        let widest = gaps.last().copied().unwrap_or(0.0).max(0.0);
        // The finest bin width of these that needs at most 20 bins.
        let width = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0].into_iter().find(|w| widest / w < 20.0).unwrap_or(widest / 19.0);
        let bins = (widest / width).floor() as usize + 1;
        let mut counts = vec![0usize; bins];
        for g in &gaps {
            counts[((g.max(0.0) / width).floor() as usize).min(bins - 1)] += 1;
        }
        let tallest = counts.iter().copied().max().unwrap_or(0).max(1);
        let (left, top, plot_w, plot_h) = (70.0, 50.0, 760.0, 300.0);
        let bar_w = plot_w / bins as f64;
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"20\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n<text x=\"{}\" y=\"38\" text-anchor=\"middle\" fill=\"#555\">gap to the certified time bound, {} faults with a schedule in {} classes</text>\n",
            left + plot_w + 30.0,
            top + plot_h + 60.0,
            (left + plot_w) / 2.0,
            xml_escape(&self.title()),
            (left + plot_w) / 2.0,
            gaps.len(),
            self.classes.iter().filter(|c| c.schedule.is_some()).count()
        );
        for (i, &n) in counts.iter().enumerate() {
            let h = plot_h * n as f64 / tallest as f64;
            let x = left + bar_w * i as f64;
            let (lo, hi) = (width * i as f64, width * (i + 1) as f64);
            let _ = writeln!(
                out,
                "<rect x=\"{x:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{h:.2}\" fill=\"#1f55b4\"><title>{lo:.2}% to {hi:.2}%: {n} faults</title></rect>",
                top + plot_h - h,
                (bar_w - 1.0).max(0.5)
            );
            let _ = writeln!(out, "<text x=\"{x:.2}\" y=\"{:.1}\" font-size=\"10\" fill=\"#555\">{lo:.2}%</text>", top + plot_h + 14.0);
        }
        let _ = writeln!(out, "<line x1=\"{left}\" x2=\"{left}\" y1=\"{top}\" y2=\"{}\" stroke=\"#333\"/>", top + plot_h);
        let _ = writeln!(out, "<line x1=\"{left}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>", left + plot_w, top + plot_h, top + plot_h);
        let _ = writeln!(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{tallest}</text>", left - 6.0, top + 4.0);
        let _ = writeln!(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>", left - 6.0, top + plot_h);
        let _ = writeln!(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">gap (bins of {width}%)</text>", left + plot_w / 2.0, top + plot_h + 36.0);
        let _ = writeln!(
            out,
            "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">faults</text>",
            top + plot_h / 2.0,
            top + plot_h / 2.0
        );
        out.push_str("</svg>\n");
        out
    }
}

fn median(sorted: &[f64]) -> Option<&f64> {
    sorted.get(sorted.len().saturating_sub(1) / 2)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// `torus 8x8x8`, `mesh 4x4`, `fat tree (2 levels, k 8, 64 npus)`.
fn describe_topology(v: &Value) -> String {
    if let Some(t) = v.get("torus") {
        let dims: Vec<String> = t["dims"].as_array().map(|a| a.iter().map(|d| d.to_string()).collect()).unwrap_or_default();
        let mesh = t.get("wrap").and_then(Value::as_array).is_some_and(|w| w.iter().all(|x| x == false));
        return format!("{} {}", if mesh { "mesh" } else { "torus" }, dims.join("x"));
    }
    if let Some(f) = v.get("fat_tree") {
        return format!("fat tree ({} levels, k {}, osr {}, {} npus)", f["levels"], f["k"], f["osr"], f["npus"]);
    }
    "a network".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn index(gaps: &[f64]) -> Index {
        let sweep = SweepHeader {
            topology: json!({"torus": {"dims": [4, 4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}),
            collective: json!({"kind": "all_to_all", "bytes_per_rank": "1MiB"}),
            faults: "cables".into(),
            cube: None,
            time_limit_s: 10.0,
            solver: "auto".into(),
            verify_members: "none".into(),
            seed: 0,
            group_order: "128".into(),
            generators: vec!["shift dim 0".into()],
            fault_count: gaps.len(),
            class_count: 1,
        };
        let faults = gaps
            .iter()
            .enumerate()
            .map(|(i, &g)| FaultEntry {
                fault: i,
                name: format!("f{i}"),
                faults: json!({}),
                class: 0,
                symmetry: json!({}),
                schedule: None,
                time_ns: Some(1000.0 * (1.0 + g)),
                bound_ns: Some(1000.0),
                gap: Some(g),
                verified: None,
            })
            .collect();
        let class = ClassEntry {
            class: 0,
            representative: 0,
            name: "f0".into(),
            members: gaps.len(),
            status: ClassStatus::Ok,
            reason: None,
            schedule: None,
            members_verified: 0,
        };
        Index { format: INDEX_FORMAT.into(), version: 1, sweep, shard: None, classes: vec![class], faults }
    }

    #[test]
    fn the_index_reads_back_and_the_summary_counts_faults() {
        let ix = index(&[0.01, 0.03, 0.02, 0.5]);
        let back: Index = serde_json::from_slice(&ix.to_bytes()).unwrap();
        assert_eq!(back, ix);
        let md = ix.summary();
        assert!(md.contains("| 4 | 1 | 4 | 0 | 0 | 50.00% | 2.00% |"), "{md}");
        assert!(md.starts_with("# Fault library: all_to_all of 1MiB per rank on torus 4x4, every single cable"), "{md}");
        let svg = ix.histogram_svg();
        // 50% wide: bins of 5% (the finest with fewer than 20 bins), the last one holding the 50%
        // fault.
        assert!(svg.contains("bins of 5%") && svg.contains("50.00% to 55.00%: 1 faults") && svg.contains("0.00% to 5.00%: 3 faults"), "{svg}");
    }
}
