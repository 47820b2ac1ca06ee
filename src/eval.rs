//! `collsched eval`: the comparison the torus study makes, run by our own generators and cost
//! model, written as Markdown, CSV and one SVG plot per torus.
//!
//! Each method's schedule is generated once per torus; its step-synchronous time at every size
//! follows exactly from that one schedule, because every piece's size is proportional to the
//! bytes per rank: time(S) = (S / S0) x bandwidth term(S0) + latency term.

use crate::algorithms::switched::{Routing, SwitchedAlgorithm};
use crate::algorithms::{torus_all_to_all, torus_mate, RingAlgorithm, Scheduler};
use crate::collective::{Collective, CollectiveKind};
use crate::error::{Error, Result};
use crate::schedule::Schedule;
use crate::topology::{torus, FaultPattern, Topology, TorusParams};
use crate::units::{format_bytes, to_f64, Rational};
use crate::verify::{verify_schedule, VerifyOptions};
use std::fmt::Write as _;
use std::path::Path;

/// A method of the comparison.
#[derive(Clone, Copy, Debug)]
pub struct Method {
    /// Its label in tables and plots.
    pub label: &'static str,
    /// Whether it runs on the torus with one failed cable in dimension 0.
    pub faulty: bool,
    generate: fn(&Topology, &Collective) -> Result<Schedule>,
}

fn ring_pipeline(t: &Topology, c: &Collective) -> Result<Schedule> {
    torus_all_to_all(t, c, RingAlgorithm::Ring, Scheduler::Pipeline { chunks: 6 })
}
fn ring_dimrotation(t: &Topology, c: &Collective) -> Result<Schedule> {
    torus_all_to_all(t, c, RingAlgorithm::Ring, Scheduler::DimRotation)
}
fn halfring_pipeline(t: &Topology, c: &Collective) -> Result<Schedule> {
    torus_all_to_all(t, c, RingAlgorithm::HalfRing, Scheduler::Pipeline { chunks: 6 })
}
fn halfring_dimrotation(t: &Topology, c: &Collective) -> Result<Schedule> {
    torus_all_to_all(t, c, RingAlgorithm::HalfRing, Scheduler::DimRotation)
}
fn foldedring_pipeline(t: &Topology, c: &Collective) -> Result<Schedule> {
    torus_all_to_all(t, c, RingAlgorithm::FoldedRing, Scheduler::Pipeline { chunks: 6 })
}
fn foldedring_dimrotation(t: &Topology, c: &Collective) -> Result<Schedule> {
    torus_all_to_all(t, c, RingAlgorithm::FoldedRing, Scheduler::DimRotation)
}

fn mate(t: &Topology, c: &Collective) -> Result<Schedule> {
    torus_mate(t, c, false)
}
fn matee(t: &Topology, c: &Collective) -> Result<Schedule> {
    torus_mate(t, c, true)
}

/// The methods of the torus study, baseline first.
pub const TORUS_METHODS: [Method; 8] = [
    Method { label: "Ring+Pipeline(6)", faulty: false, generate: ring_pipeline },
    Method { label: "Ring+DimRotation", faulty: false, generate: ring_dimrotation },
    Method { label: "HalfRing+Pipeline(6)", faulty: false, generate: halfring_pipeline },
    Method { label: "HalfRing+DimRotation", faulty: false, generate: halfring_dimrotation },
    Method { label: "FoldedRing+Pipeline(6)", faulty: true, generate: foldedring_pipeline },
    Method { label: "FoldedRing+DimRotation", faulty: true, generate: foldedring_dimrotation },
    Method { label: "MATE", faulty: true, generate: mate },
    Method { label: "MATEe", faulty: true, generate: matee },
];

/// What a study reports while it runs, for a progress display: every row of its tables starts,
/// then ends.
#[derive(Clone, Copy, Debug)]
pub enum StudyProgress<'a> {
    /// A row is being computed (what it is: torus or tree, and method).
    Started(&'a str),
    /// That row is done.
    Finished,
}

/// Bytes per npu of the study: 8 KiB to 2 GiB, every factor of 4.
pub fn study_sizes() -> Vec<u64> {
    (0..10).map(|i| (8u64 << 10) << (2 * i)).collect()
}

/// One method on one torus: its cost terms at the reference size.
#[derive(Clone, Debug)]
pub struct Row {
    /// The method's label.
    pub label: &'static str,
    /// Bandwidth term at `reference_bytes`, ns.
    pub bandwidth_ns: Rational,
    /// Latency term, ns (independent of size).
    pub latency_ns: Rational,
    /// The size the schedule was generated at.
    pub reference_bytes: u64,
    /// Steps of the schedule.
    pub steps: usize,
}

impl Row {
    /// The step-synchronous time at `bytes` per npu, ns.
    pub fn time_ns(&self, bytes: u64) -> f64 {
        to_f64(&(self.bandwidth_ns * Rational::new(bytes as i128, self.reference_bytes as i128) + self.latency_ns))
    }
}

/// Runs every method on a torus of `dims` (32 GB/s, 100 ns); faulty methods get one failed
/// cable in dimension 0, between the origin and its + neighbour. Every schedule is verified.
/// Reports one row per method to `progress`.
pub fn torus_rows(dims: &[usize], methods: &[Method], progress: &mut dyn FnMut(StudyProgress)) -> Result<Vec<Row>> {
    let healthy = torus(&TorusParams::uniform(dims, 32.0, 100.0))?;
    let mut faulty = healthy.clone();
    let shape = healthy.torus_shape().expect("a torus").clone();
    let origin = crate::topology::NodeId(0);
    let next = shape
        .neighbor(origin, 0, true)
        .ok_or_else(|| Error::bad(format!("--tori {}: dimension 0 has no cable to fail (a dimension of one npu)", dims_label(dims))))?;
    FaultPattern { cables: vec![(origin, next)], ..Default::default() }.apply(&mut faulty)?;
    let reference_bytes = 8u64 << 20;
    let mut rows = Vec::new();
    for m in methods {
        progress(StudyProgress::Started(&format!("{} {}", dims_label(dims), m.label)));
        let t = if m.faulty { &faulty } else { &healthy };
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), reference_bytes, 1, None, t)?;
        let fault = if m.faulty { " with a failed cable" } else { "" };
        let s = (m.generate)(t, &c).map_err(|e| e.context(format!("{} on the {} torus{fault}", m.label, dims_label(dims))))?;
        let report = verify_schedule(&s, &VerifyOptions::default())?;
        if !report.is_valid() {
            return Err(Error::bad(format!("{} on {dims:?}: the generated schedule fails verification: {}", m.label, report.findings.failures()[0])));
        }
        let cost = report.cost.expect("verification computes the cost");
        rows.push(Row { label: m.label, bandwidth_ns: cost.bandwidth_ns(), latency_ns: cost.latency_ns(), reference_bytes, steps: s.steps.len() });
        progress(StudyProgress::Finished);
    }
    Ok(rows)
}

fn dims_label(dims: &[usize]) -> String {
    dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
}

/// The speed-up table (Markdown) and CSV of one torus; the first row is the baseline.
pub fn tables(dims: &[usize], rows: &[Row], sizes: &[u64]) -> (String, String) {
    let base = &rows[0];
    let mut md = format!("### {} torus (32 GB/s, 100 ns), speed-up over {}\n\n| method | steps |", dims_label(dims), base.label);
    let mut csv = String::from("torus,method,bytes_per_npu,time_ns,speedup\n");
    for &s in sizes {
        let _ = write!(md, " {} |", format_bytes(s));
    }
    md.push_str(" mean |\n|---|---|");
    md.push_str(&"---|".repeat(sizes.len() + 1));
    md.push('\n');
    for r in rows {
        let _ = write!(md, "| {} | {} |", r.label, r.steps);
        let mut sum = 0.0;
        for &s in sizes {
            let speedup = base.time_ns(s) / r.time_ns(s);
            sum += speedup;
            let _ = write!(md, " {speedup:.2} |");
            let _ = writeln!(csv, "{},{},{s},{:.3},{speedup:.4}", dims_label(dims), r.label, r.time_ns(s));
        }
        let _ = writeln!(md, " **{:.2}** |", sum / sizes.len() as f64);
    }
    (md, csv)
}

/// A line plot of speed-up against message size, one line per method.
pub fn svg_plot(title: &str, rows: &[Row], sizes: &[u64]) -> String {
    let (w, h, left, right, top, bottom) = (760.0, 420.0, 60.0, 210.0, 40.0, 50.0);
    let base = &rows[0];
    let series: Vec<Vec<f64>> = rows.iter().map(|r| sizes.iter().map(|&s| base.time_ns(s) / r.time_ns(s)).collect()).collect();
    let ymax = series.iter().flatten().fold(1.0f64, |a, &b| a.max(b)).ceil().max(1.0);
    let x = |i: usize| left + (w - left - right) * i as f64 / (sizes.len().max(2) - 1) as f64;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / ymax);
    let colors = ["#444444", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{title}</text>\n",
        (w - right + left) / 2.0
    );
    for k in 0..=(ymax as usize * 2) {
        let v = k as f64 / 2.0;
        let _ = writeln!(
            out,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.1}</text>",
            w - right,
            y(v),
            y(v),
            left - 6.0,
            y(v) + 4.0
        );
    }
    for (i, &s) in sizes.iter().enumerate() {
        let _ = writeln!(out, "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>", x(i), h - bottom + 18.0, format_bytes(s));
    }
    let _ = writeln!(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">bytes per npu</text>", (w - right + left) / 2.0, h - 10.0);
    let _ =
        writeln!(out, "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">speed-up over {}</text>", h / 2.0, h / 2.0, base.label);
    for (k, (r, pts)) in rows.iter().zip(&series).enumerate() {
        let color = colors[k % colors.len()];
        let points: Vec<String> = pts.iter().enumerate().map(|(i, &v)| format!("{:.1},{:.1}", x(i), y(v))).collect();
        let dash = if r.label.starts_with("Folded") || r.label.starts_with("MATE") { " stroke-dasharray=\"6 3\"" } else { "" };
        let _ = writeln!(out, "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>", points.join(" "));
        let ly = top + 18.0 * k as f64;
        let _ = writeln!(
            out,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{}\">{}</text>",
            w - right + 10.0,
            w - right + 34.0,
            w - right + 40.0,
            ly + 4.0,
            r.label
        );
    }
    out.push_str("</svg>\n");
    out
}

/// Runs the torus study for these tori and writes `torus.md`, `torus.csv` and one SVG per torus
/// into `dir` as part of `files` (which the caller commits, so that the study's files appear
/// together or not at all). Returns the Markdown. Reports `all_dims.len() x methods.len()` rows
/// to `progress`.
pub fn torus_study(
    all_dims: &[Vec<usize>],
    methods: &[Method],
    dir: &Path,
    files: &crate::io::OutputSet,
    progress: &mut dyn FnMut(StudyProgress),
) -> Result<String> {
    let sizes = study_sizes();
    let mut md = String::from("## All-to-all on tori: step-synchronous model, our generators\n\nFaulty methods run with one failed cable in dimension 0.\n\n");
    let mut csv = String::new();
    for dims in all_dims {
        let rows = torus_rows(dims, methods, progress)?;
        let (m, c) = tables(dims, &rows, &sizes);
        md.push_str(&m);
        md.push('\n');
        if csv.is_empty() {
            csv = c;
        } else {
            csv.push_str(c.split_once('\n').map(|x| x.1).unwrap_or(""));
        }
        let svg = svg_plot(&format!("all-to-all on a {} torus", dims_label(dims)), &rows, &sizes);
        let path = dir.join(format!("torus_{}.svg", dims_label(dims)));
        files.write_bytes(&path, svg.as_bytes())?;
    }
    for (name, text) in [("torus.md", &md), ("torus.csv", &csv)] {
        let path = dir.join(name);
        files.write_bytes(&path, text.as_bytes())?;
    }
    Ok(md)
}

/// The reference fat trees of the fat-tree table: name, levels, radix k, oversubscription.
const FAT_TREES: [(&str, u32, usize, f64); 4] =
    [("2L-k16-osr1", 2, 16, 1.0), ("2L-k8-osr1", 2, 8, 1.0), ("2L-k12-osr2", 2, 12, 2.0), ("3L-k8-osr1", 3, 8, 1.0)];
/// EP group sizes of the fat-tree table (the last npus of the tree).
const FAT_TREE_EPS: [usize; 2] = [32, 64];
/// Algorithms of the fat-tree table.
const FAT_TREE_ALGORITHMS: [SwitchedAlgorithm; 2] = [SwitchedAlgorithm::Pairwise, SwitchedAlgorithm::Bruck];
/// Routing policies of the fat-tree table.
const FAT_TREE_ROUTINGS: [Routing; 2] = [Routing::SinglePath, Routing::Balanced];

/// The number of rows of the fat-tree table ([`fat_tree_study`]).
pub fn fat_tree_rows() -> usize {
    FAT_TREES.len() * FAT_TREE_EPS.len() * FAT_TREE_ALGORITHMS.len() * FAT_TREE_ROUTINGS.len()
}

/// The fat-tree table: the four reference trees (64 npus, boards of 8, 400 GB/s, 25 ns links,
/// 1000 ns per switch), EP groups of 32 and 64 npus, 1 MiB per npu, pairwise and bruck under
/// both routing policies, priced in both models (the event-driven one prices the contention of
/// single-path routing by sharing link bandwidth). Writes `fat_tree.md` and `fat_tree.csv`.
/// Reports [`fat_tree_rows`] rows to `progress`; the files are part of `files`, as in
/// [`torus_study`].
pub fn fat_tree_study(dir: &Path, files: &crate::io::OutputSet, progress: &mut dyn FnMut(StudyProgress)) -> Result<String> {
    use crate::algorithms::switched::switched;
    use crate::topology::{fat_tree, FatTreeParams};
    let mut md = String::from(
        "## All-to-all on the reference fat trees (1 MiB per npu)\n\nTimes in us: event-driven (step-synchronous in brackets); rule 2 = link shares found by the verifier.\n\n| tree | EP | algorithm | routing | steps | event-driven | step-synchronous | rule 2 shares |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut csv = String::from("tree,ep,algorithm,routing,steps,event_ns,sync_ns,link_shares\n");
    for (name, levels, k, osr) in FAT_TREES {
        let t = fat_tree(&FatTreeParams { levels, k, osr, npus: 64, board: Some(8), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })?;
        for ep in FAT_TREE_EPS {
            let ranks = (64 - ep..64).map(|i| crate::topology::NodeId(i as u32)).collect();
            let c = Collective::new(CollectiveKind::AllToAll, ranks, 1 << 20, 1, None, &t)?;
            for algorithm in FAT_TREE_ALGORITHMS {
                for routing in FAT_TREE_ROUTINGS {
                    progress(StudyProgress::Started(&format!("{name} EP={ep} {} {}", algorithm.as_str(), routing.name())));
                    let s = switched(&t, &c, algorithm, routing)?;
                    let r = verify_schedule(&s, &VerifyOptions { allow_contention: true, ..Default::default() })?;
                    if !r.is_valid() {
                        return Err(Error::bad(format!("{name}: {} fails verification: {}", algorithm.as_str(), r.findings.failures()[0])));
                    }
                    let sync = to_f64(&r.cost.expect("verification computes the cost").time_ns());
                    let event = crate::cost::event_cost(&s, false)?.time_ns;
                    let shares = r.findings.warnings_of(crate::verify::Rule::LinkSharing);
                    let _ = writeln!(
                        md,
                        "| {name} | {ep} | {} | {} | {} | {:.1} | ({:.1}) | {shares} |",
                        algorithm.as_str(),
                        routing.name(),
                        s.steps.len(),
                        event / 1e3,
                        sync / 1e3
                    );
                    let _ = writeln!(csv, "{name},{ep},{},{},{},{event:.1},{sync:.1},{shares}", algorithm.as_str(), routing.name(), s.steps.len());
                    progress(StudyProgress::Finished);
                }
            }
        }
    }
    for (file, text) in [("fat_tree.md", &md), ("fat_tree.csv", &csv)] {
        let path = dir.join(file);
        files.write_bytes(&path, text.as_bytes())?;
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_message_speedups_match_the_closed_forms() {
        let rows = torus_rows(&[5, 5], &TORUS_METHODS[..4], &mut |_| {}).unwrap();
        let big = 1u64 << 40;
        let speedup = |i: usize| rows[0].time_ns(big) / rows[i].time_ns(big);
        // docs/design/ALGORITHMS.md: Ring+DimRotation 7/6, HalfRing+DimRotation 1.94 on a 5x5 torus.
        assert!((speedup(1) - 7.0 / 6.0).abs() < 1e-3, "{}", speedup(1));
        assert!((speedup(3) - 35.0 / 18.0).abs() < 1e-3, "{}", speedup(3));
        let (md, csv) = tables(&[5, 5], &rows, &study_sizes());
        assert!(md.contains("HalfRing+DimRotation") && csv.lines().count() == 1 + 4 * 10);
        assert!(svg_plot("t", &rows, &study_sizes()).contains("<polyline"));
    }
}
