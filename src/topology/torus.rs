//! Tori and meshes of any dimension and radix.
//!
//! Numbering: the node id of coordinate `(c0, c1, ...)` is its mixed-radix index with dimension 0
//! fastest: `c0 + d0 * (c1 + d1 * (c2 + ...))`. A node's name is its coordinate, `(c0,c1,...)`.
//! Links are listed node by node (in id order); for each node, dimension by dimension, the link
//! towards coordinate + 1 then the link towards coordinate - 1, where they exist.
//!
//! Cables: along a dimension of size n, node c is cabled to c + 1 for c + 1 < n; with wrap and
//! n > 2, node n - 1 is also cabled to node 0 (the wrap-around cable). A dimension of size 2 has
//! one cable between its two nodes (wrap adds none); a dimension of size 1 has none.

use super::{LinkClass, NodeId, NodeKind, Shape, Topology, TopologyBuilder};
use crate::error::{Error, Result};

/// The dimensions and wrap flags of a torus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TorusShape {
    /// Radix per dimension.
    pub dims: Vec<usize>,
    /// Whether each dimension wraps around (a ring) or not (a mesh line).
    pub wrap: Vec<bool>,
}

/// The most nodes a torus may have.
pub const MAX_NODES: usize = 1 << 22;

/// Everything needed to build a torus.
#[derive(Clone, Debug, PartialEq)]
pub struct TorusParams {
    /// Radix per dimension.
    pub dims: Vec<usize>,
    /// Wrap per dimension.
    pub wrap: Vec<bool>,
    /// Bandwidth per dimension, GB/s.
    pub bandwidth_gbps: Vec<f64>,
    /// Latency per dimension, ns.
    pub latency_ns: Vec<f64>,
}

impl TorusParams {
    /// A torus with wrap in every dimension and the same link speed everywhere.
    pub fn uniform(dims: &[usize], bandwidth_gbps: f64, latency_ns: f64) -> Self {
        TorusParams {
            dims: dims.to_vec(),
            wrap: vec![true; dims.len()],
            bandwidth_gbps: vec![bandwidth_gbps; dims.len()],
            latency_ns: vec![latency_ns; dims.len()],
        }
    }
}

impl TorusShape {
    /// Number of npus.
    pub fn num_nodes(&self) -> usize {
        self.dims.iter().product()
    }

    /// Number of dimensions.
    pub fn ndims(&self) -> usize {
        self.dims.len()
    }

    /// The coordinate of a node.
    pub fn coord(&self, node: NodeId) -> Vec<usize> {
        let mut rest = node.index();
        self.dims
            .iter()
            .map(|&d| {
                let c = rest % d;
                rest /= d;
                c
            })
            .collect()
    }

    /// The coordinate of `node` along one dimension.
    pub fn coord_in(&self, node: NodeId, dim: usize) -> usize {
        (node.index() / self.stride(dim)) % self.dims[dim]
    }

    /// The id step between neighbours along `dim`.
    pub fn stride(&self, dim: usize) -> usize {
        self.dims[..dim].iter().product()
    }

    /// The node at a coordinate; `None` when it is out of range or has the wrong length.
    pub fn node_at(&self, coord: &[usize]) -> Option<NodeId> {
        if coord.len() != self.dims.len() {
            return None;
        }
        let mut id = 0usize;
        for (&c, &n) in coord.iter().zip(&self.dims).rev() {
            if c >= n {
                return None;
            }
            id = id * n + c;
        }
        Some(NodeId(id as u32))
    }

    /// The node `node` with its coordinate along `dim` replaced by `c`.
    pub fn with_coord(&self, node: NodeId, dim: usize, c: usize) -> NodeId {
        let cur = self.coord_in(node, dim);
        let s = self.stride(dim);
        NodeId((node.index() - cur * s + c * s) as u32)
    }

    /// The neighbour of `node` along `dim` towards + (or -), if a cable joins them.
    pub fn neighbor(&self, node: NodeId, dim: usize, positive: bool) -> Option<NodeId> {
        let n = self.dims[dim];
        let c = self.coord_in(node, dim);
        let wraps = self.wrap[dim] && n > 2;
        let next = if positive {
            if c + 1 < n {
                Some(c + 1)
            } else if wraps {
                Some(0)
            } else {
                None
            }
        } else if c > 0 {
            Some(c - 1)
        } else if wraps {
            Some(n - 1)
        } else {
            None
        };
        next.map(|x| self.with_coord(node, dim, x))
    }

    /// Whether the line along `dim` is a ring (wrap and more than two nodes).
    pub fn is_ring(&self, dim: usize) -> bool {
        self.wrap[dim] && self.dims[dim] > 2
    }

    /// The name of a coordinate: `(1,0,2)`.
    pub fn name(coord: &[usize]) -> String {
        let parts: Vec<String> = coord.iter().map(|c| c.to_string()).collect();
        format!("({})", parts.join(","))
    }

    /// The nodes of the line through `node` along `dim`, in coordinate order.
    pub fn line(&self, node: NodeId, dim: usize) -> Vec<NodeId> {
        (0..self.dims[dim]).map(|c| self.with_coord(node, dim, c)).collect()
    }
}

/// Builds a torus (or mesh, per dimension) with per-dimension bandwidth and latency.
pub fn torus(params: &TorusParams) -> Result<Topology> {
    let nd = params.dims.len();
    if nd == 0 {
        return Err(Error::bad("dims = []: a torus needs at least one dimension"));
    }
    for (name, len) in [("wrap", params.wrap.len()), ("bandwidth_gbps", params.bandwidth_gbps.len()), ("latency_ns", params.latency_ns.len())] {
        if len != nd {
            return Err(Error::bad(format!("{name} has {len} values but dims has {nd}: give one per dimension")));
        }
    }
    for (d, (&bw, &lat)) in params.bandwidth_gbps.iter().zip(&params.latency_ns).enumerate() {
        crate::units::checked_bandwidth(bw).map_err(|why| Error::bad(format!("bandwidth_gbps[{d}] = {why}")))?;
        crate::units::checked_latency(lat).map_err(|why| Error::bad(format!("latency_ns[{d}] = {why}")))?;
    }
    if let Some(d) = params.dims.iter().position(|&d| d == 0) {
        return Err(Error::bad(format!("dims[{d}] = 0: every dimension needs at least one node")));
    }
    let total = params.dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    match total {
        Some(t) if t <= MAX_NODES => {}
        _ => return Err(Error::bad(format!("dims = {:?}: more than {MAX_NODES} nodes", params.dims))),
    }
    let shape = TorusShape { dims: params.dims.clone(), wrap: params.wrap.clone() };
    let mut b = TopologyBuilder::new();
    for id in 0..shape.num_nodes() {
        b.node(NodeKind::Npu, TorusShape::name(&shape.coord(NodeId(id as u32))));
    }
    for id in 0..shape.num_nodes() {
        let node = NodeId(id as u32);
        for dim in 0..nd {
            for positive in [true, false] {
                if let Some(nb) = shape.neighbor(node, dim, positive) {
                    b.link(node, nb, params.bandwidth_gbps[dim], params.latency_ns[dim], LinkClass::TorusDim { dim: dim as u8, positive });
                }
            }
        }
    }
    b.build(Shape::Torus(shape), 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cables(t: &Topology) -> usize {
        t.num_links() / 2
    }

    #[test]
    fn ring_and_mesh_counts() {
        let ring = torus(&TorusParams::uniform(&[5], 32.0, 100.0)).unwrap();
        assert_eq!((ring.num_nodes(), cables(&ring)), (5, 5));
        let two = torus(&TorusParams::uniform(&[2], 32.0, 100.0)).unwrap();
        assert_eq!(cables(&two), 1);
        let mut p = TorusParams::uniform(&[4, 4], 32.0, 100.0);
        p.wrap = vec![false, false];
        let mesh = torus(&p).unwrap();
        assert_eq!(cables(&mesh), 2 * 4 * 3);
        let t = torus(&TorusParams::uniform(&[3, 5, 4], 32.0, 100.0)).unwrap();
        assert_eq!(cables(&t), 60 * 3);
        let hyper = torus(&TorusParams::uniform(&[2, 2, 2, 2], 32.0, 100.0)).unwrap();
        assert_eq!(cables(&hyper), 16 * 4 / 2);
    }

    #[test]
    fn coordinates_round_trip() {
        let t = torus(&TorusParams::uniform(&[3, 5, 4], 32.0, 100.0)).unwrap();
        let s = t.torus_shape().unwrap();
        for n in t.node_ids() {
            let c = s.coord(n);
            assert_eq!(s.node_at(&c), Some(n));
            assert_eq!(t.node(n).name, TorusShape::name(&c));
            for (dim, &x) in c.iter().enumerate() {
                assert_eq!(s.coord_in(n, dim), x);
            }
        }
        assert_eq!(s.node_at(&[1, 2, 3]), Some(NodeId(1 + 3 * (2 + 5 * 3))));
        assert_eq!(s.node_at(&[3, 0, 0]), None);
    }

    #[test]
    fn links_follow_the_numbering() {
        let t = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        let s = t.torus_shape().unwrap().clone();
        for (id, l) in t.links() {
            let LinkClass::TorusDim { dim, positive } = l.class else { panic!() };
            assert_eq!(s.neighbor(l.src, dim as usize, positive), Some(l.dst), "{}", t.describe_link(id));
        }
        // (3,0) -> (0,0) is the wrap link of dimension 0.
        let wrap = t.link_between(NodeId(3), NodeId(0)).unwrap();
        assert_eq!(t.describe_link(wrap), format!("link {wrap}: (3,0)->(0,0)"));
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut p = TorusParams::uniform(&[4, 4], 32.0, 100.0);
        p.wrap.pop();
        assert!(torus(&p).unwrap_err().message().contains("wrap has 1 values"));
        assert!(torus(&TorusParams::uniform(&[4, 0], 32.0, 100.0)).unwrap_err().message().contains("dims[1] = 0"));
        assert!(torus(&TorusParams::uniform(&[4], -1.0, 100.0)).is_err());
    }
}
