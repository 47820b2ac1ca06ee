//! Custom topologies from explicit node and link lists (the schedule file's `topology` object).

use super::{LinkClass, NodeId, NodeKind, Shape, Topology, TopologyBuilder};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// A node as written in a schedule file or a custom spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct CustomNode {
    /// Must equal the node's position in the list when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// `npu` or `switch`.
    pub kind: String,
    /// A readable name; defaults to `n<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A directed link as written in a schedule file or a custom spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
pub struct CustomLink {
    /// Must equal the link's position in the list when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Source node id.
    pub src: u64,
    /// Destination node id.
    pub dst: u64,
    /// GB/s.
    pub bandwidth_gbps: f64,
    /// ns.
    pub latency_ns: f64,
    /// False for a failed link (default true).
    #[serde(default = "yes")]
    pub up: bool,
}

fn yes() -> bool {
    true
}

/// Builds a topology from explicit lists. Ids, when given, must be dense and in order; npus
/// must come before switches.
pub fn custom(nodes: &[CustomNode], links: &[CustomLink], switch_latency_ns: f64) -> Result<Topology> {
    let mut b = TopologyBuilder::new();
    for (i, n) in nodes.iter().enumerate() {
        if let Some(id) = n.id {
            if id != i as u64 {
                return Err(Error::bad(format!("nodes[{i}].id = {id}: ids must be dense and listed in order (expected {i})")));
            }
        }
        let kind = match n.kind.as_str() {
            "npu" => NodeKind::Npu,
            "switch" => NodeKind::Switch,
            other => return Err(Error::bad(format!("nodes[{i}].kind = \"{other}\": expected \"npu\" or \"switch\""))),
        };
        b.node(kind, n.name.clone().unwrap_or_else(|| format!("n{i}")));
    }
    let mut down = Vec::new();
    for (i, l) in links.iter().enumerate() {
        if let Some(id) = l.id {
            if id != i as u64 {
                return Err(Error::bad(format!("links[{i}].id = {id}: ids must be dense and listed in order (expected {i})")));
            }
        }
        for (field, v) in [("src", l.src), ("dst", l.dst)] {
            if v >= nodes.len() as u64 {
                return Err(Error::bad(format!("links[{i}].{field} = {v}: no such node (there are {} nodes)", nodes.len())));
            }
        }
        crate::units::checked_bandwidth(l.bandwidth_gbps).map_err(|why| Error::bad(format!("links[{i}].bandwidth_gbps = {why}")))?;
        crate::units::checked_latency(l.latency_ns).map_err(|why| Error::bad(format!("links[{i}].latency_ns = {why}")))?;
        if l.src == l.dst {
            return Err(Error::bad(format!("links[{i}]: src = dst = {}: a link needs two different nodes", l.src)));
        }
        let id = b.link(NodeId(l.src as u32), NodeId(l.dst as u32), l.bandwidth_gbps, l.latency_ns, LinkClass::Custom);
        if !l.up {
            down.push(id);
        }
    }
    let mut t = b.build(Shape::Custom, switch_latency_ns)?;
    for l in down {
        t.set_down(l);
    }
    Ok(t)
}

/// The explicit lists of any topology (what the schedule file writes).
pub fn to_lists(t: &Topology) -> (Vec<CustomNode>, Vec<CustomLink>) {
    let nodes = t.node_ids().map(|n| CustomNode { id: Some(n.0 as u64), kind: t.node(n).kind.as_str().into(), name: Some(t.node(n).name.clone()) }).collect();
    let links = t
        .links()
        .map(|(id, l)| CustomLink {
            id: Some(id.0 as u64),
            src: l.src.0 as u64,
            dst: l.dst.0 as u64,
            bandwidth_gbps: l.bandwidth_gbps,
            latency_ns: l.latency_ns,
            up: l.up,
        })
        .collect();
    (nodes, links)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let nodes = vec![CustomNode { id: Some(0), kind: "npu".into(), name: Some("a".into()) }, CustomNode { id: None, kind: "npu".into(), name: None }];
        let links = vec![CustomLink { id: Some(0), src: 0, dst: 1, bandwidth_gbps: 10.0, latency_ns: 1.0, up: false }];
        let t = custom(&nodes, &links, 0.0).unwrap();
        assert_eq!(t.node(NodeId(1)).name, "n1");
        assert!(!t.link(super::super::LinkId(0)).up);
        let (n2, l2) = to_lists(&t);
        assert!(!l2[0].up);
        assert_eq!(n2[0].name.as_deref(), Some("a"));
        let bad = vec![CustomLink { id: None, src: 0, dst: 7, bandwidth_gbps: 10.0, latency_ns: 1.0, up: true }];
        assert!(custom(&nodes, &bad, 0.0).unwrap_err().message().contains("links[0].dst = 7"));
        let bad_kind = vec![CustomNode { id: None, kind: "router".into(), name: None }];
        assert!(custom(&bad_kind, &[], 0.0).unwrap_err().message().contains("\"router\""));
    }
}
