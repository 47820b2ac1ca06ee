//! Builds the certificate of an instance's bounds (docs/design/MODEL.md section 6), in the format that
//! [`collsched_checker`] checks: the instance itself, and each bound with its witness.

use super::cut::best_cut;
use super::flow::{flow_bound, FlowOptions};
use super::groups::{crossing, group_transmissions, partitions};
use super::steps::{steps_bounds_with, StepsClaim};
use super::{bounds_with, farthest};
use crate::collective::{Collective, CollectiveKind};
use crate::error::Result;
use crate::io::sha256_hex;
use crate::spec::{Instance, Spec};
use crate::topology::{NodeId, Topology};
use crate::units::{rational_from_decimal, to_checker, Rational};
use serde_json::{json, Value};

fn q(r: Rational) -> String {
    r.to_string()
}

fn decimal(x: f64) -> String {
    q(rational_from_decimal(x).unwrap_or_default())
}

/// The `instance` object of a certificate: nodes (npus first), every link with its exact
/// capacity, latency and state, and what the collective must move. Comparing it with a
/// certificate's `instance` tells whether the certificate speaks of this spec's instance.
pub fn instance_json(inst: &Instance) -> Value {
    let t = &inst.topology;
    let c = &inst.collective;
    let links: Vec<Value> = t
        .links()
        .map(|(_, l)| json!({"src": l.src.0, "dst": l.dst.0, "capacity": decimal(l.bandwidth_gbps), "latency_ns": decimal(l.latency_ns), "up": l.up}))
        .collect();
    let ranks: Vec<u32> = c.ranks.iter().map(|r| r.0).collect();
    let collective = match c.kind {
        CollectiveKind::AllToAll if c.is_uniform() => json!({"kind": "all_to_all", "ranks": ranks, "block_bytes": q(c.block_size(0, 0))}),
        CollectiveKind::AllToAll => {
            let mut demands = Vec::new();
            for i in 0..c.num_ranks() {
                for j in (0..c.num_ranks()).filter(|&j| j != i) {
                    let b = c.block_size(i, j);
                    if b > Rational::from_integer(0) {
                        demands.push(json!([c.ranks[i].0, c.ranks[j].0, q(b)]));
                    }
                }
            }
            json!({"kind": "all_to_all", "ranks": ranks, "demands": demands})
        }
        kind => json!({"kind": kind.as_str(), "ranks": ranks, "piece_bytes": q(c.piece_size_at(0)), "pieces": c.pieces}),
    };
    let mut collective = collective;
    // Pieces per block matter to the steps bounds only; written when not 1, so that certificates
    // of one piece per block read as before.
    if c.kind == CollectiveKind::AllToAll && c.pieces != 1 {
        collective["pieces"] = json!(c.pieces);
    }
    json!({"nodes": t.num_nodes(), "npus": t.num_npus(), "switch_latency_ns": decimal(t.switch_latency_ns()), "links": links, "collective": collective})
}

/// The certificate of the spec's instance (the steps bounds of `super::steps`, latency, volume,
/// transmissions, best cut, flow), with the
/// flow bound computed under default limits (60 s, 2% gap).
pub fn certificate_for(spec: &Spec, spec_bytes: &[u8]) -> Result<Value> {
    certificate_with(spec, spec_bytes, &FlowOptions::default())
}

/// [`certificate_for`] with explicit limits for the flow bound.
pub fn certificate_with(spec: &Spec, spec_bytes: &[u8], flow: &FlowOptions) -> Result<Value> {
    let inst = spec.instance()?;
    Ok(certificate_of_instance(&inst, &sha256_hex(spec_bytes), flow))
}

/// The certificate of an instance already built; `spec_sha256` is the hex digest of its spec.
pub fn certificate_of_instance(inst: &Instance, spec_sha256: &str, flow: &FlowOptions) -> Value {
    certificate_of_instance_with(inst, spec_sha256, flow, true)
}

/// [`certificate_of_instance`], with the steps flow bound (all_to_all) only if `steps_flow`: a
/// synthesis that does not search for the fewest steps has no use for it.
pub fn certificate_of_instance_with(inst: &Instance, spec_sha256: &str, flow: &FlowOptions, steps_flow: bool) -> Value {
    let (t, c) = (&inst.topology, &inst.collective);
    let far = farthest(t, c);
    let b = bounds_with(t, c, &far);
    // The steps bounds first (distance, transmissions, cut, flow: docs/design/MODEL.md section 6).
    let steps_flow_time = steps_flow.then_some(flow.time_limit);
    let mut claims: Vec<Value> = steps_bounds_with(t, c, steps_flow_time, &far).claims.iter().map(StepsClaim::to_json).collect();
    if let Some((latency, ls, ld)) = far.latency {
        claims.push(json!({"bound": "latency", "value": q(latency), "witness": {"source": ls.0, "destination": ld.0}}));
    }
    if let Some(v) = b.volume_ns {
        claims.push(json!({"bound": "volume", "value": q(v)}));
    }
    if let Some(tr) = b.transmissions {
        claims.push(json!({"bound": "transmissions", "value": q(tr.value_ns), "witness": {"into": tr.into}}));
    }
    if let Some(cut) = best_cut(t, c) {
        let nodes: Vec<u32> = cut.nodes.iter().map(|n| n.0).collect();
        claims.push(json!({"bound": "cut", "value": q(cut.value_ns), "witness": {"nodes": nodes, "into": cut.into}}));
    }
    if let Some(f) = flow_bound(t, c, flow) {
        let lengths: Vec<String> = f.lengths.iter().map(|y| y.to_string()).collect();
        claims.push(json!({"bound": "flow", "value": f.lower.to_string(), "witness": {"lengths": lengths}}));
    }
    claims.extend(group_claims(t, c, &claims, far.latency.map(|(l, ..)| l)));
    json!({
        "format": "collsched.certificate",
        "version": 1,
        "spec_sha256": spec_sha256,
        "instance": instance_json(inst),
        "claims": claims,
    })
}

/// The claims over groups of ranks (docs/design/MODEL.md section 6, "Groups of ranks"), given
/// the claims made so far and the latency bound: the best group transmission count where it beats
/// every bandwidth claim, then the best crossing bound where it beats bandwidth plus latency.
fn group_claims(t: &Topology, c: &Collective, claims: &[Value], latency: Option<Rational>) -> Vec<Value> {
    let bandwidth_kinds = ["volume", "transmissions", "cut", "flow"];
    let mut bandwidth = claims
        .iter()
        .filter(|cl| cl["bound"].as_str().is_some_and(|b| bandwidth_kinds.contains(&b)))
        .filter_map(|cl| cl["value"].as_str().and_then(|v| collsched_checker::parse_q(v).ok()))
        .max()
        .unwrap_or_default();
    let latency = latency.map(|l| to_checker(&l)).unwrap_or_default();
    let parts = partitions(t, c);
    let ids = |nodes: &[NodeId]| nodes.iter().map(|n| n.0).collect::<Vec<u32>>();
    let mut out = Vec::new();
    let best_count = parts.iter().filter_map(|p| group_transmissions(t, c, p).map(|(v, into)| (v, into, p))).max_by(|a, b| a.0.cmp(&b.0));
    if let Some((v, into, p)) = best_count.filter(|(v, ..)| *v > bandwidth) {
        let groups: Vec<Vec<u32>> = p.groups.iter().map(|g| ids(g)).collect();
        out.push(json!({"bound": "group_transmissions", "value": v.to_string(), "witness": {"groups": groups, "into": into}}));
        bandwidth = v;
    }
    let best_crossing = parts.iter().filter_map(|p| crossing(t, c, p, &bandwidth, &latency).map(|b| (b, p))).max_by(|a, b| a.0.value_ns.cmp(&b.0.value_ns));
    if let Some((b, p)) = best_crossing.filter(|(b, _)| b.value_ns > &bandwidth + &latency) {
        let groups: Vec<Vec<u32>> = p.groups.iter().map(|g| ids(g)).collect();
        let cuts: Vec<Value> = b.cuts.iter().map(|(nodes, into)| json!({"nodes": ids(nodes), "into": into})).collect();
        out.push(json!({"bound": "crossing", "value": b.value_ns.to_string(), "witness": {"groups": groups, "cuts": cuts}}));
    }
    out
}

/// The optional `schedule` attachment: a schedule's step-synchronous bandwidth time (latencies
/// set to 0) and time, and whether it claims to be bandwidth-optimal.
pub fn schedule_json(bandwidth_ns: Rational, time_ns: Rational, bandwidth_optimal: bool) -> Value {
    json!({"bandwidth_ns": q(bandwidth_ns), "time_ns": q(time_ns), "bandwidth_optimal": bandwidth_optimal})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::bounds;
    use collsched_checker::check_bounds_str;
    use std::time::Duration;

    fn quick() -> FlowOptions {
        FlowOptions { time_limit: Duration::from_secs(20), target_gap: 0.01, max_phases: 1500, epsilon: 0.1 }
    }

    fn cert(spec_text: &str) -> Value {
        let spec = Spec::parse(spec_text, "test").unwrap();
        certificate_with(&spec, spec_text.as_bytes(), &quick()).unwrap()
    }

    fn claim_index(v: &Value, bound: &str) -> usize {
        v["claims"].as_array().unwrap().iter().position(|c| c["bound"] == bound).unwrap()
    }

    fn rejected(v: &Value) -> String {
        check_bounds_str(&v.to_string()).expect_err("tampered certificate accepted").message
    }

    const FAULTY: &str = r#"{"topology": {"torus": {"dims": [4, 4, 4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}},
        "faults": {"cables": [[[0, 0, 0], [1, 0, 0]]]}, "collective": {"kind": "all_to_all", "bytes_per_rank": "1MiB"}}"#;

    #[test]
    fn produced_certificates_check() {
        let specs = [
            FAULTY,
            r#"{"topology": {"torus": {"dims": [5], "bandwidth_gbps": 12.5, "latency_ns": 100.0}}, "collective": {"kind": "all_to_all", "bytes_per_rank": 1000}}"#,
            r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}, "collective": {"kind": "all_gather", "bytes_per_rank": "1MiB", "pieces": 2}}"#,
            r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}, "collective": {"kind": "all_reduce", "bytes_per_rank": "1MiB"}}"#,
            r#"{"topology": {"torus": {"dims": [3], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}, "collective": {"kind": "all_to_all", "block_bytes": [[0, 5, 7], [1, 0, 0], [9, 9, 0]]}}"#,
            r#"{"topology": {"fat_tree": {"levels": 2, "k": 4, "osr": 1.0, "npus": 8, "bandwidth_gbps": 400.0, "latency_ns": 25.0, "switch_latency_ns": 1000.0}},
                "collective": {"kind": "reduce_scatter", "bytes_per_rank": 8000}}"#,
        ];
        for s in specs {
            let v = cert(s);
            let report = check_bounds_str(&v.to_string()).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(report.spec_sha256, sha256_hex(s.as_bytes()));
            assert_eq!(report.instance, instance_json(&Spec::parse(s, "t").unwrap().instance().unwrap()));
            for c in &report.claims {
                assert_eq!(c.claimed, c.derived, "{s}: claim {} ({}) is not tight", c.index, c.bound);
            }
        }
    }

    #[test]
    fn tampering_is_rejected_with_the_reason() {
        let v = cert(FAULTY);
        let flow = claim_index(&v, "flow");
        let cut = claim_index(&v, "cut");

        // Raising the longest link's length changes the distances and the denominator: the
        // witness then supports a different (lower) value than claimed.
        let mut t = v.clone();
        let lengths = t["claims"][flow]["witness"]["lengths"].as_array_mut().unwrap();
        let (i, _) = lengths.iter().enumerate().max_by_key(|(_, y)| y.as_str().unwrap().parse::<u64>().unwrap()).unwrap();
        lengths[i] = json!("99999999999999");
        let msg = rejected(&t);
        assert!(msg.starts_with(&format!("claim {flow} (flow): the witness supports")), "{msg}");

        // Moving one node out of the best cut's set.
        let mut t = v.clone();
        t["claims"][cut]["witness"]["nodes"].as_array_mut().unwrap().pop();
        let msg = rejected(&t);
        assert!(msg.starts_with(&format!("claim {cut} (cut): the witness supports")), "{msg}");

        // Claiming a little more than proven.
        let mut t = v.clone();
        let claimed = collsched_checker::parse_q(t["claims"][flow]["value"].as_str().unwrap()).unwrap();
        t["claims"][flow]["value"] = json!((claimed * collsched_checker::Q::new(1001.into(), 1000.into())).to_string());
        let msg = rejected(&t);
        assert!(msg.contains("(flow): the witness supports"), "{msg}");

        // A faster link makes every bandwidth bound smaller than claimed.
        let mut t = v.clone();
        t["instance"]["links"][5]["capacity"] = json!("64");
        let msg = rejected(&t);
        assert!(msg.contains("the witness supports"), "{msg}");

        // A schedule that would beat the proven bound, and one that claims optimality it lacks.
        let report = check_bounds_str(&v.to_string()).unwrap();
        let best = report.bandwidth_bound.unwrap();
        let mut t = v.clone();
        let below = &best - collsched_checker::Q::new(1.into(), 1000.into());
        t["schedule"] = json!({"file": "s.json", "sha256": "0".repeat(64), "bandwidth_ns": below.to_string(), "time_ns": "1000000000"});
        let msg = rejected(&t);
        assert!(msg.contains("below the proven bandwidth bound"), "{msg}");
        let mut t = v.clone();
        let above = &best + collsched_checker::Q::new(1.into(), 1000.into());
        t["schedule"] =
            json!({"file": "s.json", "sha256": "0".repeat(64), "bandwidth_ns": above.to_string(), "time_ns": "1000000000", "bandwidth_optimal": true});
        let msg = rejected(&t);
        assert!(msg.contains("not the best claimed bandwidth bound"), "{msg}");
        t["schedule"]["bandwidth_optimal"] = json!(false);
        assert!(check_bounds_str(&t.to_string()).is_ok());
    }

    #[test]
    fn healthy_torus_schedule_is_certified_optimal() {
        let s = r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32.0, "latency_ns": 100.0}}, "collective": {"kind": "all_to_all", "bytes_per_rank": "1MiB"}}"#;
        let mut v = cert(s);
        let inst = Spec::parse(s, "t").unwrap().instance().unwrap();
        let volume = bounds(&inst.topology, &inst.collective).volume_ns.unwrap();
        v["schedule"] = schedule_json(volume, volume + Rational::from_integer(10_000), true);
        v["schedule"]["file"] = json!("s.json");
        v["schedule"]["sha256"] = json!("0".repeat(64));
        let report = check_bounds_str(&v.to_string()).unwrap();
        assert!(report.schedule.is_some());
        let flow = &report.claims[claim_index(&v, "flow")];
        assert_eq!(flow.derived, report.bandwidth_bound.unwrap());
    }
}
