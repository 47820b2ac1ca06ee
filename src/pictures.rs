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

/// The fraction of time each group's links are busy, averaged over links and the schedule (the
/// tests compare schedulers by it).
#[cfg(test)]
fn group_utilization(schedule: &Schedule) -> BTreeMap<String, f64> {
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

/// The topology with its failed links marked in red: a torus as its 2-D planes side by side
/// (dimensions beyond the second are laid out as a row of planes), any other network in layers
/// (npus at the bottom, then switches by id).
pub fn topology_svg(t: &crate::topology::Topology, title: &str) -> String {
    use crate::topology::NodeId;
    let n = t.num_nodes();
    let mut pos = vec![(0.0f64, 0.0f64); n];
    let (w, h);
    if let Some(s) = t.torus_shape() {
        let dx = s.dims.first().copied().unwrap_or(1);
        let dy = s.dims.get(1).copied().unwrap_or(1);
        let planes: usize = s.dims.iter().skip(2).product::<usize>().max(1);
        let gap = 60.0;
        let cell = 46.0;
        let plane_w = cell * dx as f64 + gap;
        for (id, p) in pos.iter_mut().enumerate() {
            let c = s.coord(NodeId(id as u32));
            let plane = id / (dx * dy);
            *p = (40.0 + plane as f64 * plane_w + cell * c[0] as f64, 60.0 + cell * c.get(1).copied().unwrap_or(0) as f64);
        }
        w = 40.0 + planes as f64 * plane_w;
        h = 100.0 + cell * dy as f64;
    } else {
        let npus = t.num_npus();
        let up = crate::topology::UpAdjacency::new(t);
        let layer_of = |i: usize| -> usize {
            if i < npus {
                0
            } else {
                // Switches one hop from an npu are layer 1, their other neighbours layer 2, ...
                let d = up.hop_distances(NodeId(i as u32));
                (0..npus).filter_map(|p| d[p]).min().unwrap_or(1) as usize
            }
        };
        let layers: Vec<usize> = (0..n).map(layer_of).collect();
        let top = layers.iter().copied().max().unwrap_or(0);
        let widest = (0..=top).map(|l| layers.iter().filter(|&&x| x == l).count()).max().unwrap_or(1);
        w = 80.0 + 22.0 * widest as f64;
        h = 120.0 + 110.0 * top as f64;
        for l in 0..=top {
            let members: Vec<usize> = (0..n).filter(|&i| layers[i] == l).collect();
            let step = (w - 80.0) / members.len().max(1) as f64;
            for (k, &i) in members.iter().enumerate() {
                pos[i] = (40.0 + step * (k as f64 + 0.5), h - 50.0 - 110.0 * l as f64);
            }
        }
    }
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" font-family=\"sans-serif\" font-size=\"10\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{:.0}\" y=\"20\" font-size=\"14\" text-anchor=\"middle\">{title}</text>\n",
        w / 2.0
    );
    let mut drawn = std::collections::HashSet::new();
    for (id, l) in t.links() {
        let key = (l.src.0.min(l.dst.0), l.src.0.max(l.dst.0));
        let down = !l.up || t.link_between(l.dst, l.src).is_some_and(|r| !t.link(r).up);
        if !drawn.insert(key) {
            continue;
        }
        let (a, b) = (pos[l.src.index()], pos[l.dst.index()]);
        let wraps = (a.0 - b.0).abs() > 60.0 || (a.1 - b.1).abs() > 60.0;
        let (color, width) = if down { ("#d62728", 3.0) } else { ("#9aa6b2", 1.0) };
        if wraps && t.torus_shape().is_some() {
            // A wrap-around cable: a short stub out of each end, so the grid stays readable.
            let reach = if down { -18.0 } else { -10.0 };
            let (ux, uy) = ((b.0 - a.0).signum() * reach, (b.1 - a.1).signum() * reach);
            let _ = writeln!(out, "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-width=\"{width}\" stroke-dasharray=\"3 2\"><title>{}</title></line>", a.0, a.1, a.0 + ux, a.1 + uy, t.describe_link(id));
        } else {
            let _ = writeln!(
                out,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-width=\"{width}\"><title>{}</title></line>",
                a.0,
                a.1,
                b.0,
                b.1,
                t.describe_link(id)
            );
        }
    }
    for id in t.node_ids() {
        let (x, y) = pos[id.index()];
        let node = t.node(id);
        let fill = if t.is_npu(id) { "#1f77b4" } else { "#ff7f0e" };
        let _ = writeln!(out, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"{fill}\"><title>{} ({})</title></circle>", node.name, id);
        if t.torus_shape().is_some() && t.num_nodes() <= 128 {
            let _ = writeln!(out, "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">{}</text>", y + 15.0, node.name);
        }
    }
    out.push_str("</svg>\n");
    out
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

    #[test]
    fn topology_pictures_mark_failed_links() {
        let mut t = torus(&TorusParams::uniform(&[4, 4, 2], 32.0, 0.0)).unwrap();
        let fault = crate::topology::FaultPattern { cables: vec![(crate::topology::NodeId(0), crate::topology::NodeId(1))], ..Default::default() };
        fault.apply(&mut t).unwrap();
        let svg = topology_svg(&t, "4x4x2");
        assert_eq!(svg.matches("#d62728").count(), 1, "one failed cable drawn once");
        let ft = crate::topology::fat_tree(&crate::topology::FatTreeParams {
            levels: 3,
            k: 8,
            osr: 1.0,
            npus: 64,
            board: None,
            bandwidth_gbps: 1.0,
            latency_ns: 0.0,
            switch_latency_ns: 0.0,
        })
        .unwrap();
        assert_eq!(topology_svg(&ft, "3L").matches("<circle").count(), 64 + 48);
    }
}
