//! Import of MSCCL XML (docs/design/FORMATS.md "MSCCL XML") back into a [`Schedule`], so that
//! `verify` can check an `.xml` file with rules 1-5 of docs/design/MODEL.md section 4.
//!
//! **Collective.** `coll` gives the kind (all-to-all, all-gather, reduce-scatter in either
//! spelling, all-reduce), `ngpus` the ranks R (gpu g is rank g, npu id g), and `nchunksperloop`
//! = R*P the pieces per block P, laid out as [`crate::lower::Layout`] says. The XML names no
//! sizes, so the imported collective has `bytes_per_rank` = `nchunksperloop`: one byte per
//! chunk, every piece exactly one byte.
//!
//! **Topology.** Onto a given topology, every send from gpu a to gpu b needs a direct link
//! a -> b that is up; without one, onto a full mesh of R npus built here (every ordered pair a
//! link, bandwidth 1 GB/s, latency 0).
//!
//! **Steps.** The program is run under the runtime's buffering ([`super::simulate()`], in the
//! first placement the file declares, out-of-place before in-place, so an in-place program is
//! run with its buffers aliased). Every delivered message becomes a transfer over the link
//! between its gpus, `reduce` when the receiver reduces it, else `copy`, carrying the pieces its
//! chunks hold; it goes into the schedule step of its level (after every message whose data it
//! carries or whose chunks it overwrites), and messages of one level over one link, which the
//! run gives the same operation, share one transfer (rule 2).

use super::model::{read_program, Program};
use super::simulate::{simulate, Buffering, ChunkValue, Placement};
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::topology::{LinkClass, LinkId, NodeId, NodeKind, Shape, Topology, TopologyBuilder};
use std::collections::BTreeMap;

/// A full mesh of `n` npus: every ordered pair a link of bandwidth 1 GB/s and latency 0.
pub fn full_mesh(n: usize) -> Result<Topology> {
    let mut b = TopologyBuilder::new();
    let nodes: Vec<NodeId> = (0..n).map(|g| b.node(NodeKind::Npu, format!("gpu{g}"))).collect();
    for &a in &nodes {
        for &c in &nodes {
            if a != c {
                b.link(a, c, 1.0, 0.0, LinkClass::Custom);
            }
        }
    }
    b.build(Shape::Custom, 0.0)
}

/// Reconstructs a schedule from MSCCL XML (module docs).
///
/// `topology`: the network the gpus run on (gpu g is npu g); `None` builds a [`full_mesh`] of the
/// gpus. Errors ([`Error::bad`]): a file the runtime's reader refuses, a `coll` other than the
/// four collectives, a send from a to b without a direct up link a -> b (naming the pair), a
/// program that does not run to its end (unpaired sends, a deadlock even with buffering), a
/// message carrying a chunk that holds nothing.
pub fn import_msccl(xml: &str, topology: Option<&Topology>) -> Result<Schedule> {
    let reading = read_program(xml);
    match reading.program {
        Some(p) if reading.problems.errors.is_empty() => import_program(&p, topology),
        _ => Err(Error::bad(format!("MSCCL XML: the runtime's reader refuses it: {}", reading.problems.errors.join("; ")))),
    }
}

/// [`import_msccl`] of a program already read.
pub fn import_program(p: &Program, topology: Option<&Topology>) -> Result<Schedule> {
    let coll = p.collective().and_then(|c| c.kind());
    let coll_text = p.coll.as_ref().map_or("", |(t, _)| t.as_str());
    let kind = coll.ok_or_else(|| {
        Error::bad(format!("MSCCL XML: coll=\"{coll_text}\": only alltoall, allgather, reducescatter (reduce_scatter) and allreduce can be imported"))
    })?;
    let (n, per_loop) = (usize::try_from(p.ngpus.unwrap_or(0)).unwrap_or(0), usize::try_from(p.nchunksperloop.unwrap_or(0)).unwrap_or(0));
    if n == 0 || per_loop == 0 || per_loop % n != 0 {
        return Err(Error::bad(format!("MSCCL XML: nchunksperloop=\"{per_loop}\" is not a positive multiple of ngpus=\"{n}\"")));
    }
    let pieces = u32::try_from(per_loop / n).map_err(|_| Error::bad("MSCCL XML: nchunksperloop is too large"))?;
    let built;
    let topo = match topology {
        Some(t) => t,
        None => {
            built = full_mesh(n)?;
            &built
        }
    };
    let ranks: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    let collective = Collective::new(kind, ranks, per_loop as u64, pieces, None, topo).map_err(|e| e.context("MSCCL import"))?;
    let placement = Placement::declared(p).first().copied().unwrap_or(Placement::OutOfPlace);
    let run = simulate(p, placement, Buffering::Runtime).map_err(|e| Error::bad(format!("MSCCL XML ({}): {e}", placement.name())))?;
    let piece = |v: &ChunkValue| -> Option<PieceId> {
        let (o, p) = (v.offset as u32, pieces);
        let origin = *v.gpus.first()? as u32;
        Some(match kind {
            CollectiveKind::AllToAll => PieceId::a2a(origin, o / p, o % p),
            CollectiveKind::AllGather => PieceId::block(origin, o),
            _ => PieceId::block(o / p, o % p),
        })
    };
    let mut levels: BTreeMap<usize, Vec<(LinkId, Op, Vec<PieceId>)>> = BTreeMap::new();
    for m in &run.messages {
        let link = link_between(topo, m.from, m.to)?;
        let op = if m.reduce { Op::Reduce } else { Op::Copy };
        let carried: Vec<PieceId> = m
            .payload
            .iter()
            .map(|v| v.as_ref().and_then(piece))
            .collect::<Option<_>>()
            .ok_or_else(|| Error::bad(format!("MSCCL XML: gpu {} sends gpu {} a chunk that holds nothing", m.from, m.to)))?;
        let step = levels.entry(m.level).or_default();
        match step.iter_mut().find(|(l, o, _)| *l == link && *o == op) {
            Some((_, _, held)) => held.extend(carried.into_iter().filter(|x| !held.contains(x)).collect::<Vec<_>>()),
            None => step.push((link, op, carried)),
        }
    }
    let steps = levels.into_values().map(|ts| Step { transfers: ts.into_iter().map(|(l, op, pieces)| Transfer::hop(l, op, pieces)).collect() }).collect();
    let name = p.name.clone().unwrap_or_default();
    let proto = p.proto.as_ref().map(|(t, _)| t.clone()).unwrap_or_default();
    let meta = serde_json::json!({ "imported_from": "msccl-xml", "name": name, "proto": proto, "bytes_per_chunk": 1, "placement": placement.name() });
    Ok(Schedule { header: ScheduleHeader { topology: topo.clone(), collective, meta: Some(meta) }, steps })
}

fn link_between(topo: &Topology, a: usize, b: usize) -> Result<LinkId> {
    topo.out_links(NodeId(a as u32))
        .filter(|&l| topo.link(l).dst == NodeId(b as u32) && topo.link(l).up)
        .min()
        .ok_or_else(|| Error::bad(format!("MSCCL import: gpu {a} sends to gpu {b}, but the topology has no direct link {a} -> {b} that is up")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::{torus_all_to_all, RingAlgorithm, Scheduler};
    use crate::export::{msccl_xml, MscclOptions};
    use crate::lower::tests::torus_with;
    use crate::lower::{lower, LowerOptions};
    use crate::verify::{verify_schedule, VerifyOptions};

    /// Every hop (sender, receiver, piece), sorted.
    fn hops(s: &Schedule) -> Vec<(u32, u32, PieceId)> {
        let t = &s.header.topology;
        let mut v: Vec<_> = s
            .steps
            .iter()
            .flat_map(|st| &st.transfers)
            .flat_map(|tr| tr.path.iter().flat_map(move |&l| tr.pieces.iter().map(move |p| (t.link(l).src.0, t.link(l).dst.0, *p))))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn torus_all_to_all_round_trips() {
        for (dims, sched) in [(&[4][..], Scheduler::Sequential), (&[4, 4][..], Scheduler::DimRotation)] {
            let t = torus_with(dims, &[]);
            let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().take(t.num_npus()).collect(), 1 << 16, 1, None, &t).unwrap();
            let s = torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, sched).unwrap();
            let xml = msccl_xml(&lower(&s, &LowerOptions::default()).unwrap(), &MscclOptions::default()).unwrap();
            let back = import_msccl(&xml, Some(&t)).unwrap();
            assert_eq!(back.header.collective.pieces, s.header.collective.pieces, "{dims:?}");
            let report = verify_schedule(&back, &VerifyOptions::default()).unwrap();
            assert!(report.is_valid(), "{dims:?}: {:?}", report.findings.failures());
            assert_eq!(hops(&back), hops(&s), "{dims:?}");
            let mesh = import_msccl(&xml, None).unwrap();
            assert_eq!(mesh.header.topology.num_links(), t.num_npus() * (t.num_npus() - 1));
            let report = verify_schedule(&mesh, &VerifyOptions::default()).unwrap();
            assert!(report.is_valid(), "{dims:?} mesh: {:?}", report.findings.failures());
            assert_eq!(hops(&mesh).len(), hops(&s).len());
        }
    }

    #[test]
    fn ring_gather_and_reductions_round_trip() {
        for kind in [CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce] {
            let s = crate::export::msccl::write::tests::ring_schedule(kind, 4);
            let xml = msccl_xml(&lower(&s, &LowerOptions::default()).unwrap(), &MscclOptions::default()).unwrap();
            for topo in [Some(&s.header.topology), None] {
                let back = import_msccl(&xml, topo).unwrap_or_else(|e| panic!("{kind}: {e}"));
                assert_eq!(back.header.collective.kind, kind);
                let report = verify_schedule(&back, &VerifyOptions::default()).unwrap();
                assert!(report.is_valid(), "{kind}: {:?}", report.findings.failures());
                assert_eq!(hops(&back).len(), hops(&s).len(), "{kind}");
            }
            assert_eq!(hops(&import_msccl(&xml, Some(&s.header.topology)).unwrap()), hops(&s), "{kind}");
        }
    }

    #[test]
    fn in_place_and_buffered_programs_import_with_their_aliasing() {
        for (xml, kind, steps) in [
            (include_str!("../../../tests/data/msccl/allreduce_ring_inplace.xml"), CollectiveKind::AllReduce, 6),
            (include_str!("../../../tests/data/msccl/allgather_ring_inplace.executor.xml"), CollectiveKind::AllGather, 3),
        ] {
            let s = import_msccl(xml, None).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!((s.header.collective.kind, s.steps.len()), (kind, steps));
            assert_eq!(s.header.meta.as_ref().unwrap()["placement"], "in-place");
            let report = verify_schedule(&s, &VerifyOptions::default()).unwrap();
            assert!(report.is_valid(), "{kind}: {:?}", report.findings.failures());
            // Every ring step moves one block over every ring link.
            assert!(s.steps.iter().all(|st| st.transfers.len() == 4), "{kind}");
        }
    }

    #[test]
    fn a_send_without_a_link_is_refused() {
        let t = torus_with(&[4, 4], &[]);
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 16, 1, None, &t).unwrap();
        let s = torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap();
        let xml = msccl_xml(&lower(&s, &LowerOptions::default()).unwrap(), &MscclOptions::default()).unwrap();
        let ring = torus_with(&[16], &[]);
        let e = import_msccl(&xml, Some(&ring)).unwrap_err();
        assert!(e.message().contains("no direct link"), "{e}");
        assert!(import_msccl("<algo", None).is_err());
    }
}
