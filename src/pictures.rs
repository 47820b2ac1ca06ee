//! Pictures (SVG, written by a small writer of our own): a schedule's timeline, link by link and
//! per dimension, in the step-synchronous model.
//!
//! The x axis is time: every step is as wide as it lasts (its bandwidth term plus its latency
//! term). A cell's shade is the fraction of the step the link (or the links of a group, on
//! average) spends moving bytes, so bubbles - links idle while others work - show as white.

use crate::schedule::Schedule;
use crate::units::to_f64;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Per step: duration (ns) and, per link, the busy fraction.
fn busy(schedule: &Schedule) -> (Vec<f64>, Vec<Vec<f64>>) {
    let t = &schedule.header.topology;
    let c = &schedule.header.collective;
    let mut durations = Vec::new();
    let mut per_step = Vec::new();
    for step in &schedule.steps {
        let mut bytes = vec![0f64; t.num_links()];
        let mut lat: f64 = 0.0;
        for tr in &step.transfers {
            let b: f64 = tr.pieces.iter().filter_map(|p| c.piece_index(p)).map(|i| to_f64(&c.piece_size_at(i))).sum();
            for l in &tr.path {
                if l.index() < bytes.len() {
                    bytes[l.index()] += b;
                }
            }
            lat = lat.max(t.path_latency_ns(&tr.path));
        }
        let times: Vec<f64> = t.links().map(|(id, l)| bytes[id.index()] / l.bandwidth_gbps).collect();
        let bw = times.iter().fold(0f64, |a, &b| a.max(b));
        let d = bw + lat;
        durations.push(d);
        per_step.push(times.iter().map(|&x| if d > 0.0 { x / d } else { 0.0 }).collect());
    }
    (durations, per_step)
}

fn shade(u: f64) -> String {
    let u = u.clamp(0.0, 1.0);
    let (r, g, b) = (255.0 - 224.0 * u, 255.0 - 170.0 * u, 255.0 - 75.0 * u);
    format!("#{:02x}{:02x}{:02x}", r as u8, g as u8, b as u8)
}

/// The timeline SVG: per-group (per-dimension) utilization rows, then one row per link when
/// there are at most `max_link_rows` links.
pub fn timeline_svg(schedule: &Schedule, title: &str, max_link_rows: usize) -> String {
    let t = &schedule.header.topology;
    let (durations, per_step) = busy(schedule);
    let total: f64 = durations.iter().sum();
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (id, l) in t.links() {
        if l.up {
            groups.entry(l.class.group_label()).or_default().push(id.index());
        }
    }
    let show_links = t.num_links() <= max_link_rows;
    let (left, top, row_h, width): (f64, f64, f64, f64) = (190.0, 46.0, 18.0, 900.0);
    let link_rows = if show_links { t.num_links() } else { 0 };
    let link_h = if show_links { (row_h / 3.0).max(3.0) } else { 0.0 };
    let height = top + row_h * groups.len() as f64 + 30.0 + link_h * link_rows as f64 + 50.0;
    let x = |time: f64| left + (width - left - 20.0) * if total > 0.0 { time / total } else { 0.0 };
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"20\" font-size=\"15\" text-anchor=\"middle\">{title}</text>\n<text x=\"{}\" y=\"36\" text-anchor=\"middle\" fill=\"#555\">{} steps, {} (step-synchronous); shade = busy fraction of each step; white = idle</text>\n",
        width / 2.0,
        width / 2.0,
        durations.len(),
        crate::units::format_ns(total)
    );
    let mut y = top;
    for (name, links) in &groups {
        let _ = writeln!(out, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{name} ({} links)</text>", left - 8.0, y + row_h * 0.7, links.len());
        let mut start = 0.0;
        for (s, d) in durations.iter().enumerate() {
            let u = links.iter().map(|&l| per_step[s][l]).sum::<f64>() / links.len() as f64;
            let _ = writeln!(
                out,
                "<rect x=\"{:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"{}\"><title>step {s}: {:.0}% busy</title></rect>",
                x(start),
                x(start + d) - x(start),
                row_h - 2.0,
                shade(u),
                100.0 * u
            );
            start += d;
        }
        y += row_h;
    }
    let mut start = 0.0;
    for (s, d) in durations.iter().enumerate() {
        if durations.len() <= 60 || s % (durations.len() / 30 + 1) == 0 {
            let _ = writeln!(out, "<line x1=\"{:.2}\" x2=\"{:.2}\" y1=\"{top}\" y2=\"{:.1}\" stroke=\"#999\" stroke-width=\"0.5\"/><text x=\"{:.2}\" y=\"{:.1}\" font-size=\"9\" fill=\"#777\">{s}</text>", x(start), x(start), y + 4.0, x(start) + 1.0, y + 14.0);
        }
        start += d;
    }
    y += 26.0;
    if show_links {
        let _ = writeln!(out, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"11\">links (red: down)</text>", left - 8.0, y - 4.0);
        for (id, l) in t.links() {
            let yy = y + link_h * id.index() as f64;
            if !l.up {
                let _ = writeln!(
                    out,
                    "<rect x=\"{left}\" y=\"{yy:.1}\" width=\"{:.1}\" height=\"{link_h:.1}\" fill=\"#f4c7c3\"><title>{} (down)</title></rect>",
                    width - left - 20.0,
                    t.describe_link(id)
                );
                continue;
            }
            let mut start = 0.0;
            for (s, d) in durations.iter().enumerate() {
                let u = per_step[s][id.index()];
                if u > 0.0 {
                    let _ = writeln!(
                        out,
                        "<rect x=\"{:.2}\" y=\"{yy:.1}\" width=\"{:.2}\" height=\"{link_h:.1}\" fill=\"{}\"><title>{}, step {s}</title></rect>",
                        x(start),
                        x(start + d) - x(start),
                        shade(u),
                        t.describe_link(id)
                    );
                }
                start += d;
            }
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The fraction of time each group's links are busy, averaged over links and the schedule.
pub fn group_utilization(schedule: &Schedule) -> BTreeMap<String, f64> {
    let (durations, per_step) = busy(schedule);
    let total: f64 = durations.iter().sum();
    let t = &schedule.header.topology;
    let mut acc: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for (id, l) in t.links() {
        if !l.up {
            continue;
        }
        let busy_ns: f64 = durations.iter().zip(&per_step).map(|(d, u)| d * u[id.index()]).sum();
        let e = acc.entry(l.class.group_label()).or_default();
        e.0 += busy_ns;
        e.1 += 1;
    }
    acc.into_iter().map(|(k, (b, n))| (k, if total > 0.0 { b / (n as f64 * total) } else { 0.0 })).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::{torus_all_to_all, RingAlgorithm, Scheduler};
    use crate::collective::{Collective, CollectiveKind};
    use crate::topology::{torus, TorusParams};

    #[test]
    fn dimrotation_has_no_bubbles_and_pipeline_does() {
        let t = torus(&TorusParams::uniform(&[4, 4, 4], 32.0, 0.0)).unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        let dr = torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap();
        let pl = torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::Pipeline { chunks: 6 }).unwrap();
        let u_dr = group_utilization(&dr);
        let u_pl = group_utilization(&pl);
        for dim in ["dim0", "dim1", "dim2"] {
            assert!((u_dr[dim] - 1.0).abs() < 1e-9, "{dim}: {}", u_dr[dim]);
            assert!(u_pl[dim] < 0.95, "{dim}: {}", u_pl[dim]);
        }
        let svg = timeline_svg(&dr, "HalfRing+DimRotation on 4x4x4", 512);
        assert!(svg.starts_with("<svg") && svg.contains("dim2 (128 links)"));
    }
}
