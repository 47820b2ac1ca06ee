//! Import of MSCCL XML (docs/design/FORMATS.md "MSCCL XML") back into a [`Schedule`], so that
//! `verify` can check an `.xml` file with rules 1-5 of docs/design/MODEL.md section 4.
//!
//! **Collective.** `coll` gives the kind (all-to-all, all-gather, reduce-scatter in either
//! spelling, all-reduce), `ngpus` the ranks R (gpu g is rank g, npu id g), and `nchunksperloop`
//! = R*P the pieces per block P, laid out as [`crate::lower::Layout`] says (an all-reduce's
//! chunks need not be a multiple of R: [`pieces_per_block`]). The XML names no
//! sizes: onto a spec ([`Onto`]) gpu g is the spec's rank g and the pieces are sized by its bytes
//! per rank; otherwise gpu g is npu g and the imported collective has `bytes_per_rank` =
//! `nchunksperloop`, one byte per chunk.
//!
//! **Topology.** Onto a given topology, a send from gpu a to gpu b takes the direct link a -> b
//! that is up; where there is none (a fat tree: gpus meet at switches), one of the shortest
//! paths from a to b through switches and npus outside the ranks (a single hop,
//! docs/design/MODEL.md section 3, as [`crate::topology::hops`] lists them), the first that
//! shares no link with another pair's transfer in its step; when every one does, the
//! message moves to a later step (the network carries it after the sends in its way), unless
//! it must share its step with messages whose paths cannot all be disjoint even alone in a new
//! one: they then share links there (rule 2, which `expect.allow_contention` allows). Where no
//! such path exists, the shortest paths through other ranks' routers (a routed transfer, as the
//! fold of FoldedRing on a ring with a failed cable). A pair that no path joins is refused.
//! Without a topology, onto a full mesh of R npus built here (every ordered pair a link,
//! bandwidth 1 GB/s, latency 0).
//!
//! **Steps.** The program is run under the runtime's buffering ([`super::simulate()`], in the
//! first placement the file declares, out-of-place before in-place, so an in-place program is
//! run with its buffers aliased). Every delivered message becomes a transfer over the link
//! between its gpus, `reduce` when the receiver reduces it (in the receiving step, or later: a
//! receive into scratch that a local `re` then reduces into the chunk that accumulates), else
//! `copy`, carrying the pieces its chunks held when its send read them; it goes into the
//! schedule step of its level ([`super::simulate()`]: after the messages whose data it carries or
//! whose chunks it overwrites, not before those that read what it overwrites, and no later than
//! the step its sender overwrites what it read in), and messages of one level over one link,
//! which the leveling gives the same operation, share one transfer (rule 2). A program whose
//! messages no leveling orders is refused, naming them.

use super::model::{read_program, Program};
use super::rules::check_program;
use super::simulate::{simulate_routed, Buffering, ChunkValue, Placement, Routes};
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::topology::hops::switch_paths;
use crate::topology::{LinkClass, LinkId, NodeId, NodeKind, Shape, Topology, TopologyBuilder};
use crate::units::{to_f64, Rational};
use std::collections::{BTreeMap, HashMap};

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

/// Where an import puts the gpus: a network, the npu of each gpu (gpu g is rank g of a spec's
/// collective) and the bytes per rank that size the pieces.
#[derive(Clone, Copy)]
pub struct Onto<'a> {
    /// The network.
    pub topology: &'a Topology,
    /// The npu of each gpu, in gpu order (`None`: gpu g is npu g).
    pub ranks: Option<&'a [NodeId]>,
    /// Bytes per rank (`None`: one byte per chunk, the file naming no sizes).
    pub bytes_per_rank: Option<u64>,
}

/// Reconstructs a schedule from MSCCL XML (module docs).
///
/// `topology`: the network the gpus run on (gpu g is npu g); `None` builds a `full_mesh` of the
/// gpus. Errors ([`Error::bad`]): a file the runtime's reader refuses, a `coll` other than the
/// four collectives, a send from a to b that no path joins (naming the pair), a
/// program that does not run to its end (unpaired sends, a deadlock even with buffering), a
/// message carrying a chunk that holds nothing.
pub fn import_msccl(xml: &str, topology: Option<&Topology>) -> Result<Schedule> {
    let reading = read_program(xml);
    match reading.program {
        Some(p) if reading.problems.errors.is_empty() => import_program(&p, topology.map(|topology| Onto { topology, ranks: None, bytes_per_rank: None })),
        _ => Err(Error::bad(format!("MSCCL XML: the runtime's reader refuses it: {}", reading.problems.errors.join("; ")))),
    }
}

/// [`import_msccl`] of a program already read, onto a network and its ranks (a spec's), or
/// onto a full mesh of the gpus with `None`.
pub fn import_program(p: &Program, onto: Option<Onto>) -> Result<Schedule> {
    // Nothing is sized by the file's counts before its reader rules (and their limits) pass.
    let rules = check_program(p, p.runtime);
    if !rules.errors.is_empty() {
        return Err(Error::bad(format!("MSCCL XML: the runtime's reader refuses it: {}", rules.errors.join("; "))));
    }
    let coll = p.collective().and_then(|c| c.kind());
    let coll_text = p.coll.as_ref().map_or("", |(t, _)| t.as_str());
    let kind = coll.ok_or_else(|| {
        Error::bad(format!("MSCCL XML: coll=\"{coll_text}\": only alltoall, allgather, reducescatter (reduce_scatter) and allreduce can be imported"))
    })?;
    let (n, per_loop) = (usize::try_from(p.ngpus.unwrap_or(0)).unwrap_or(0), usize::try_from(p.nchunksperloop.unwrap_or(0)).unwrap_or(0));
    let (pieces, per_chunk) = pieces_per_block(kind, n, per_loop)
        .ok_or_else(|| Error::bad(format!("MSCCL XML: nchunksperloop=\"{per_loop}\" is not a positive multiple of ngpus=\"{n}\"")))?;
    let built;
    let topo = match onto {
        Some(o) => o.topology,
        None => {
            built = full_mesh(n)?;
            &built
        }
    };
    let ranks: Vec<NodeId> = match onto.and_then(|o| o.ranks) {
        Some(r) if r.len() == n => r.to_vec(),
        Some(r) => return Err(Error::bad(format!("MSCCL import: ngpus=\"{n}\", but the collective has {} ranks", r.len()))),
        None => (0..n as u32).map(NodeId).collect(),
    };
    let bytes = onto.and_then(|o| o.bytes_per_rank).unwrap_or(per_loop as u64);
    let collective = Collective::new(kind, ranks.clone(), bytes, pieces, None, topo).map_err(|e| e.context("MSCCL import"))?;
    let placement = Placement::declared(p).first().copied().unwrap_or(Placement::OutOfPlace);
    let routes = routes(p, topo, &ranks)?;
    let run = simulate_routed(p, placement, Buffering::Runtime, routes).map_err(|e| Error::bad(format!("MSCCL XML ({}): {e}", placement.name())))?;
    if let Some(why) = &run.unleveled {
        return Err(Error::bad(format!("MSCCL import ({}): {why}", placement.name())));
    }
    // The pieces a chunk holds: one, or for an all-reduce whose chunks are not a multiple of
    // its gpus, `per_chunk` consecutive ones.
    let piece = |v: &ChunkValue| -> Option<Vec<PieceId>> {
        let (o, p) = (v.offset as u32, pieces);
        let origin = *v.gpus.first()? as u32;
        Some(match kind {
            CollectiveKind::AllToAll => vec![PieceId::a2a(origin, o / p, o % p)],
            CollectiveKind::AllGather => vec![PieceId::block(origin, o)],
            _ => (o * per_chunk..(o + 1) * per_chunk).map(|x| PieceId::block(x / p, x % p)).collect(),
        })
    };
    let mut levels: BTreeMap<usize, Vec<Transfer>> = BTreeMap::new();
    for m in &run.messages {
        if m.route.is_empty() {
            return Err(Error::bad(format!("MSCCL import: gpu {} sends to gpu {}, which the topology's npus do not include", m.from, m.to)));
        }
        let path: Vec<LinkId> = m.route.iter().map(|&l| LinkId(l as u32)).collect();
        let op = if m.reduce { Op::Reduce } else { Op::Copy };
        let carried: Vec<PieceId> = m
            .payload
            .iter()
            .map(|v| v.as_ref().and_then(piece))
            .collect::<Option<Vec<Vec<PieceId>>>>()
            .map(|p| p.concat())
            .ok_or_else(|| Error::bad(format!("MSCCL XML: gpu {} sends gpu {} a chunk that holds nothing", m.from, m.to)))?;
        let step = levels.entry(m.level).or_default();
        // A transfer lists a piece once (MODEL.md rule 1), as the messages it merges deliver it.
        let at = match step.iter().position(|t| t.path == path && t.op == op) {
            Some(at) => at,
            None => {
                step.push(Transfer { path, op, pieces: Vec::new() });
                step.len() - 1
            }
        };
        let t = &mut step[at];
        for x in carried {
            if !t.pieces.contains(&x) {
                t.pieces.push(x);
            }
        }
    }
    let steps = levels.into_values().map(|transfers| Step { transfers }).collect();
    let name = p.name.clone().unwrap_or_default();
    let proto = p.proto.as_ref().map(|(t, _)| t.clone()).unwrap_or_default();
    let meta = serde_json::json!({ "imported_from": "msccl-xml", "name": name, "proto": proto, "bytes_per_chunk": serde_json::to_value(to_f64(&(collective.piece_size_at(0) * Rational::from_integer(i128::from(per_chunk))))).unwrap_or_default(), "placement": placement.name() });
    Ok(Schedule { header: ScheduleHeader { topology: topo.clone(), collective, meta: Some(meta) }, steps })
}

/// How the import cuts a block (module docs): the pieces per block P and the pieces of one chunk,
/// for `ngpus` gpus and `nchunksperloop` chunks. A multiple of the gpus gives P = chunks / gpus
/// and one piece a chunk; an all-reduce's chunks need not be (msccl-tools'
/// `allreduce_a100_ncv4_v2.py` cuts the buffer of 4 gpus in 2): the fewest pieces per block
/// that a whole number of pieces fills each chunk with, P = chunks / g and gpus / g pieces a
/// chunk, g their greatest common divisor. `None`: no such cut (no gpus or chunks, or another
/// kind's chunks not a multiple of its gpus, which its reader rules refuse).
pub fn pieces_per_block(kind: CollectiveKind, ngpus: usize, nchunksperloop: usize) -> Option<(u32, u32)> {
    if ngpus == 0 || nchunksperloop == 0 {
        return None;
    }
    let g = if kind == CollectiveKind::AllReduce { num_integer::gcd(ngpus, nchunksperloop) } else { ngpus };
    if nchunksperloop % g != 0 {
        return None;
    }
    Some((u32::try_from(nchunksperloop / g).ok()?, u32::try_from(ngpus / g).ok()?))
}

/// The candidate paths of every pair the program sends over (module docs): the direct up link,
/// else the shortest paths through switches and npus outside the ranks, else through any npu's
/// router; an error names a pair with none.
fn routes(p: &Program, topo: &Topology, ranks: &[NodeId]) -> Result<Routes> {
    let endpoints = |keep: &dyn Fn(usize) -> bool| (0..topo.num_npus()).map(keep).collect::<Vec<bool>>();
    let is_rank = endpoints(&|v| ranks.iter().any(|r| r.index() == v));
    // The paths from npu `a` to every endpoint of `mask` it reaches through the others, by npu.
    let by_end = |a: usize, mask: &[bool]| {
        let mut to: HashMap<usize, Vec<Vec<LinkId>>> = HashMap::new();
        for h in switch_paths(topo, mask, NodeId(a as u32)) {
            to.entry(h.to.index()).or_default().push(h.path);
        }
        to
    };
    let mut out = Routes::new();
    // Paths from each sending gpu's npu through switches, found once per gpu.
    let mut from: HashMap<usize, HashMap<usize, Vec<Vec<LinkId>>>> = HashMap::new();
    // A gpu is its `id`, wherever the file lists it.
    for gpu in &p.gpus {
        let Ok(a) = usize::try_from(gpu.id) else { continue };
        for tb in &gpu.tbs {
            let Ok(b) = usize::try_from(tb.send) else { continue };
            if b >= ranks.len() || a >= ranks.len() || out.contains_key(&(a, b)) {
                continue;
            }
            let (na, nb) = (ranks[a].index(), ranks[b].index());
            if na >= topo.num_npus() || nb >= topo.num_npus() {
                continue;
            }
            let direct = topo.out_links(ranks[a]).filter(|&l| topo.link(l).dst.index() == nb && topo.link(l).up).min();
            let mut paths = match direct {
                Some(l) => vec![vec![l]],
                None => from.entry(na).or_insert_with(|| by_end(na, &is_rank)).remove(&nb).unwrap_or_default(),
            };
            if paths.is_empty() {
                // Through the routers of every npu but the two ends.
                paths = by_end(na, &endpoints(&|v| v == na || v == nb)).remove(&nb).unwrap_or_default();
            }
            if paths.is_empty() {
                return Err(Error::bad(format!(
                    "MSCCL import: gpu {a} (npu {}) sends to gpu {b} (npu {}), but the topology has no direct link between them that is up, nor any path",
                    ranks[a], ranks[b]
                )));
            }
            out.insert((a, b), paths.into_iter().map(|path| path.into_iter().map(LinkId::index).collect()).collect());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::{torus_all_to_all, RingAlgorithm, Scheduler};
    use crate::export::{msccl_xml, MscclOptions};
    use crate::lower::tests::torus_with;
    use crate::lower::{lower, LowerOptions};
    use crate::verify::{verify_schedule, VerifyOptions};

    /// Verifies an imported schedule under every rule, its failures shown if any.
    fn assert_valid(s: &Schedule) {
        let report = verify_schedule(s, &VerifyOptions::default()).unwrap();
        assert!(report.is_valid(), "{:?}", report.findings.failures());
    }

    /// (from, to, piece) for every piece of every transfer and every pair `pairs` gives the
    /// transfer, sorted.
    fn triples(s: &Schedule, pairs: impl Fn(&Topology, &Transfer) -> Vec<(u32, u32)>) -> Vec<(u32, u32, PieceId)> {
        let t = &s.header.topology;
        let mut v: Vec<_> = s
            .steps
            .iter()
            .flat_map(|st| &st.transfers)
            .flat_map(|tr| pairs(t, tr).into_iter().flat_map(move |(a, b)| tr.pieces.iter().map(move |p| (a, b, *p))))
            .collect();
        v.sort();
        v
    }

    /// Every hop (sender, receiver, piece), sorted.
    fn hops(s: &Schedule) -> Vec<(u32, u32, PieceId)> {
        triples(s, |t, tr| tr.path.iter().map(|&l| (t.link(l).src.0, t.link(l).dst.0)).collect())
    }

    /// A receive into scratch that a local `re` then reduces into the input is a reduce; the
    /// same receive copied over the input (`cpy` for `re`) loses the gpu's own contribution, and
    /// the import says so too.
    #[test]
    fn a_receive_into_scratch_reduced_locally_is_a_reduce() {
        let xml = include_str!("../../../tests/data/msccl/ar2_re.xml");
        let s = import_msccl(xml, None).unwrap();
        let ops: Vec<Op> = s.steps.iter().flat_map(|st| st.transfers.iter().map(|t| t.op)).collect();
        assert_eq!(ops, [Op::Reduce, Op::Reduce, Op::Copy, Op::Copy]);
        assert_valid(&s);
        let copied = xml.replace(r#"type="re""#, r#"type="cpy""#);
        let s = import_msccl(&copied, None).unwrap();
        assert!(s.steps.iter().flat_map(|st| &st.transfers).all(|t| t.op == Op::Copy));
        let report = verify_schedule(&s, &VerifyOptions::default()).unwrap();
        assert!(report.findings.failures().iter().any(|d| d.to_string().contains("loses the contributions")), "{:?}", report.findings.failures());
    }

    /// msccl-tools' `examples/mscclang/allreduce_a100_allpairs_v2.py 4 1` (commit 030a750):
    /// every gpu receives its peers' chunks into scratch, reduces them as a tree there
    /// (`re s[0] <- s[2]`) and then into its input (`re i[r] <- s[0]`). The receive into
    /// `s[0]`, the target of the first `re`, is a reduce as much as the one into `s[2]`; it was
    /// imported as a copy, which met the other's reduce in its step (rule 4).
    #[test]
    fn a_receive_reduced_into_by_a_tree_of_local_reduces_is_a_reduce() {
        let xml = include_str!("../../../tests/data/msccl/allreduce_a100_allpairs_v2_4.xml");
        let s = import_msccl(xml, None).unwrap();
        assert_valid(&s);
        // The reduce-scatter half: every gpu's three peers reduce into it; then it sends its
        // block to each of them.
        let ops: Vec<(usize, Op)> = s.steps.iter().enumerate().flat_map(|(i, st)| st.transfers.iter().map(move |t| (i, t.op))).collect();
        assert_eq!(ops.iter().filter(|&&(i, op)| i == 0 && op == Op::Reduce).count(), 12);
        assert_eq!(ops.iter().filter(|&&(i, op)| i == 1 && op == Op::Copy).count(), 12);
    }

    /// The `<gpu>` elements in reverse order are the same program: a gpu is its `id` (the routes
    /// were keyed by the element's place in the file, so gpu 0 listed second sent as gpu 1).
    #[test]
    fn gpus_listed_in_any_order_import_alike() {
        let xml = include_str!("../../../tests/data/msccl/allreduce_a100_allpairs_v2_4.xml");
        let (head, rest) = xml.split_at(xml.find("<gpu ").unwrap());
        let end = rest.rfind("</gpu>").unwrap() + "</gpu>".len();
        let mut gpus: Vec<String> = rest[..end].split_inclusive("</gpu>").map(|g| g.trim().to_string()).collect();
        assert_eq!(gpus.len(), 4);
        gpus.reverse();
        let reversed = format!("{head}{}\n{}", gpus.join("\n"), &rest[end..]);
        let (s, r) = (import_msccl(xml, None).unwrap(), import_msccl(&reversed, None).unwrap());
        assert_valid(&r);
        assert_eq!(hops(&r), hops(&s));
    }

    /// msccl-tools' `examples/mscclang/allreduce_a100_ncv4_v2.py 4 1` cuts the buffer of 4 gpus
    /// in 2 chunks (nchunksperloop="2"), which the runtime runs; it was refused as "not a
    /// positive multiple of ngpus". Each chunk is two pieces of blocks of one piece.
    #[test]
    fn an_all_reduce_in_fewer_chunks_than_gpus_imports_with_pieces_per_chunk() {
        assert_eq!(pieces_per_block(CollectiveKind::AllReduce, 4, 2), Some((1, 2)));
        assert_eq!(pieces_per_block(CollectiveKind::AllReduce, 4, 6), Some((3, 2)));
        assert_eq!(pieces_per_block(CollectiveKind::AllReduce, 4, 8), Some((2, 1)));
        assert_eq!(pieces_per_block(CollectiveKind::AllGather, 4, 2), None);
        assert_eq!(pieces_per_block(CollectiveKind::AllReduce, 0, 2), None);
        let xml = include_str!("../../../tests/data/msccl/allreduce_a100_ncv4_v2_4.xml");
        let s = import_msccl(xml, None).unwrap();
        assert_eq!((s.header.collective.pieces, s.header.collective.bytes_per_rank), (1, 2));
        assert_eq!(s.header.meta.as_ref().unwrap()["bytes_per_chunk"], 1.0);
        assert_valid(&s);
        // Every message carries whole chunks: pieces 0 and 1, or 2 and 3.
        for t in s.steps.iter().flat_map(|st| &st.transfers) {
            let mut blocks: Vec<u32> = t.pieces.iter().map(|p| p.parts()[0]).collect();
            blocks.sort_unstable();
            assert!(blocks.chunks(2).all(|c| c.len() == 2 && c[0] / 2 == c[1] / 2 && c[0] != c[1]), "{blocks:?}");
        }
    }

    /// All-pairs all-reduce on 3 gpus over 2 channels (as msccl-scheduler's ndv4 `ap-1pass`):
    /// every gpu sends its raw input to each peer on each channel and reduces what it receives
    /// into its input once the channel's sends are done. Under buffering a channel may finish
    /// (its chunks reduced) before the other channel's messages are taken; each message still
    /// carries the raw value it read, so it goes in a step no later than the one its sender
    /// overwrites that value in. It was put after (the reduce of one channel's message of a
    /// pair joined a copy's claim first), where it carried the sender's sum: double counting.
    #[test]
    fn a_message_goes_no_later_than_its_sender_overwrites_what_it_read() {
        let xml = include_str!("../../../tests/data/msccl/allreduce_allpairs_3gpu_2chan.xml");
        let s = import_msccl(xml, None).unwrap();
        assert_valid(&s);
        // One step, as on one channel: each pair one reduce of all its pieces.
        assert_eq!(s.steps.len(), 1);
        assert_eq!(s.steps[0].transfers.len(), 6);
        assert!(s.steps[0].transfers.iter().all(|t| t.op == Op::Reduce && t.pieces.len() == 6));
        // Whatever order the threadblocks run in: channel 1's gpus listed first.
        let swapped = xml.replace(r#"chan="0""#, r#"chan="x""#).replace(r#"chan="1""#, r#"chan="0""#).replace(r#"chan="x""#, r#"chan="1""#);
        let s = import_msccl(&swapped, None).unwrap();
        assert!(verify_schedule(&s, &VerifyOptions::default()).unwrap().is_valid());
        assert_eq!(s.steps.len(), 1);
    }

    /// The same all-pairs all-reduce onto a one-way ring of 3: its messages must share one step
    /// (each gpu reduces into the input its sends read), and gpu 0's message to gpu 2 can only
    /// go 0 -> 1 -> 2, over the link of its message to gpu 1. It was refused ("must share a
    /// step but cannot"); it imports with the link shared, which verify reports as rule 2
    /// unless contention is allowed (MODEL.md rule 2), as for msccl-scheduler's ndv4 `ap-1pass`
    /// onto a fat tree.
    #[test]
    fn messages_that_must_share_a_step_share_links_and_rule_2_says_so() {
        let xml = include_str!("../../../tests/data/msccl/allreduce_allpairs_3gpu_2chan.xml");
        let mut b = TopologyBuilder::new();
        let nodes: Vec<NodeId> = (0..3).map(|g| b.node(NodeKind::Npu, format!("gpu{g}"))).collect();
        for i in 0..3 {
            b.link(nodes[i], nodes[(i + 1) % 3], 1.0, 0.0, LinkClass::Custom);
        }
        let one_way = b.build(Shape::Custom, 0.0).unwrap();
        let s = import_msccl(xml, Some(&one_way)).unwrap();
        assert_eq!(s.steps.len(), 1);
        assert!(s.steps[0].transfers.iter().all(|t| t.op == Op::Reduce));
        let strict = verify_schedule(&s, &VerifyOptions::default()).unwrap();
        let failures: Vec<String> = strict.findings.failures().iter().map(|d| d.to_string()).collect();
        assert!(!failures.is_empty() && failures.iter().all(|f| f.contains("rule 2")), "{failures:?}");
        let allowed = verify_schedule(&s, &VerifyOptions { allow_contention: true, ..VerifyOptions::default() }).unwrap();
        assert!(allowed.is_valid(), "{:?}", allowed.findings.failures());
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
    fn a_send_without_a_link_is_routed_through_the_ranks_between_or_refused() {
        let t = torus_with(&[4, 4], &[]);
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 16, 1, None, &t).unwrap();
        let s = torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap();
        let xml = msccl_xml(&lower(&s, &LowerOptions::default()).unwrap(), &MscclOptions::default()).unwrap();
        // On a ring of 16 the torus's second dimension (4 apart) is routed over 4 links.
        let ring = torus_with(&[16], &[]);
        let back = import_msccl(&xml, Some(&ring)).unwrap();
        assert!(verify_schedule(&back, &VerifyOptions::default()).unwrap().is_valid());
        assert_eq!(ends(&back), ends(&s));
        let longest = back.steps.iter().flat_map(|st| &st.transfers).map(|tr| tr.path.len()).max();
        assert_eq!(longest, Some(4));
        // One way round, every pair is routed; cut once, the pairs across the cut are refused.
        for cut in [None, Some(4)] {
            let mut b = TopologyBuilder::new();
            let nodes: Vec<NodeId> = (0..16).map(|g| b.node(NodeKind::Npu, format!("gpu{g}"))).collect();
            for (i, &a) in nodes.iter().enumerate().filter(|&(i, _)| Some(i) != cut) {
                b.link(a, nodes[(i + 1) % 16], 1.0, 0.0, LinkClass::Custom);
            }
            let one_way = b.build(Shape::Custom, 0.0).unwrap();
            match (cut, import_msccl(&xml, Some(&one_way))) {
                (None, Ok(back)) => assert!(verify_schedule(&back, &VerifyOptions::default()).unwrap().is_valid()),
                (Some(_), Err(e)) => assert!(e.message().contains("nor any path"), "{e}"),
                (_, r) => panic!("{cut:?}: {:?}", r.map(|s| s.steps.len())),
            }
        }
        assert!(import_msccl("<algo", None).is_err());
    }

    /// (sender, receiver, piece) of every transfer, sorted: the ranks a routed path joins.
    fn ends(s: &Schedule) -> Vec<(u32, u32, PieceId)> {
        triples(s, |t, tr| vec![(t.link(tr.path[0]).src.0, t.link(*tr.path.last().unwrap()).dst.0)])
    }

    #[test]
    fn onto_a_spec_gpus_are_its_ranks_and_pieces_its_sizes() {
        // Ranks on the diagonal of a 4x4 torus: gpu g is rank g (npu 5g), not npu g, and the
        // pieces weigh what the spec's bytes per rank make them.
        let t = crate::topology::torus(&crate::topology::TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        let ranks: Vec<NodeId> = (0..4).map(|g| NodeId(5 * g)).collect();
        let c = Collective::new(CollectiveKind::AllGather, ranks.clone(), 1 << 20, 1, None, &t).unwrap();
        let steps = crate::synth::spreading::spread_steps(&t, &c, 1, std::time::Instant::now() + std::time::Duration::from_secs(60)).unwrap().unwrap();
        let s = Schedule { header: ScheduleHeader { topology: t.clone(), collective: c, meta: None }, steps };
        let xml = msccl_xml(&lower(&s, &LowerOptions::default()).unwrap(), &MscclOptions::default()).unwrap();
        let p = read_program(&xml).program.unwrap();
        let back = import_program(&p, Some(Onto { topology: &t, ranks: Some(&ranks), bytes_per_rank: Some(1 << 20) })).unwrap();
        assert_eq!(back.header.collective.ranks, ranks);
        assert_eq!(back.header.collective.bytes_per_rank, 1 << 20);
        assert!(verify_schedule(&back, &VerifyOptions::default()).unwrap().is_valid());
        assert_eq!(ends(&back), ends(&s));
        // Without the ranks the gpus would be npus 0-3: other ends.
        let own = import_program(&p, Some(Onto { topology: &t, ranks: None, bytes_per_rank: None })).unwrap();
        assert_ne!(ends(&own), ends(&s));
        let short = import_program(&p, Some(Onto { topology: &t, ranks: Some(&ranks[..3]), bytes_per_rank: None }));
        assert!(short.is_err_and(|e| e.message().contains("ngpus=\"4\"")));
    }

    #[test]
    fn sends_through_switches_take_paths_that_share_no_link() {
        use crate::algorithms::switched::{switched, Routing, SwitchedAlgorithm};
        use crate::topology::{fat_tree, FatTreeParams};
        for (levels, k, osr, board) in [(2, 8, 1.0, None), (2, 12, 2.0, Some(4)), (3, 4, 1.0, Some(2))] {
            let t = fat_tree(&FatTreeParams { levels, k, osr, npus: 16, board, bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 }).unwrap();
            let ranks: Vec<NodeId> = (0..16).map(NodeId).collect();
            for (kind, a) in [(CollectiveKind::AllToAll, SwitchedAlgorithm::Pairwise), (CollectiveKind::AllReduce, SwitchedAlgorithm::Ring)] {
                for routing in [Routing::Balanced, Routing::SinglePath] {
                    let what = format!("{levels}L-k{k}-osr{osr} {board:?} {kind} {}", routing.name());
                    let c = Collective::new(kind, ranks.clone(), 1 << 16, 1, None, &t).unwrap();
                    let s = switched(&t, &c, a, routing).unwrap();
                    let xml = msccl_xml(&lower(&s, &LowerOptions::default()).unwrap(), &MscclOptions::default()).unwrap();
                    let back = import_msccl(&xml, Some(&t)).unwrap_or_else(|e| panic!("{what}: {e}"));
                    // Contention-free even where the single-path original shares uplinks: a
                    // send whose every path is busy waits for a later step.
                    let report = verify_schedule(&back, &VerifyOptions::default()).unwrap();
                    assert!(report.is_valid(), "{what}: {:?}", report.findings.failures().iter().take(3).collect::<Vec<_>>());
                    assert_eq!(ends(&back), ends(&s), "{what}");
                    // Every path is the direct link or a shortest one through switches.
                    for tr in back.steps.iter().flat_map(|st| &st.transfers) {
                        let (a, b) = (t.link(tr.path[0]).src, t.link(*tr.path.last().unwrap()).dst);
                        let shortest = match t.link_between(a, b) {
                            Some(_) => Some(1),
                            None => switch_paths(&t, &[true; 16], a).into_iter().find(|h| h.to == b).map(|h| h.path.len()),
                        };
                        assert_eq!(Some(tr.path.len()), shortest, "{what}");
                        assert!(tr.path[1..].iter().all(|&l| t.link(l).src.index() >= 16), "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_busy_uplink_moves_the_next_send_to_the_next_step() {
        use crate::topology::{fat_tree, FatTreeParams};
        // Two leaves of two npus; every gpu sends to the three others at once, all over its one
        // uplink (even to its leaf's other npu, through the leaf switch).
        let t =
            fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 4, board: None, bandwidth_gbps: 1.0, latency_ns: 0.0, switch_latency_ns: 0.0 }).unwrap();
        let hops = switch_paths(&t, &[true; 4], NodeId(0));
        let far: Vec<&crate::topology::hops::Hop> = hops.iter().filter(|h| h.to == NodeId(2)).collect();
        assert_eq!((far.len(), far[0].path.len()), (2, 4), "up to either spine and down");
        assert!(hops.iter().filter(|h| h.to == NodeId(1)).all(|h| h.path.len() == 2), "through the shared leaf");
        let mesh = full_mesh(4).unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, (0..4).map(NodeId).collect(), 4, 1, None, &mesh).unwrap();
        let link = |a: u32, b: u32| mesh.out_links(NodeId(a)).find(|&l| mesh.link(l).dst == NodeId(b)).unwrap();
        let step = Step {
            transfers: (0..4u32)
                .flat_map(|a| (0..4u32).filter(move |&b| b != a).map(move |b| (a, b)))
                .map(|(a, b)| Transfer::hop(link(a, b), Op::Copy, vec![PieceId::a2a(a, b, 0)]))
                .collect(),
        };
        let s = Schedule { header: ScheduleHeader { topology: mesh.clone(), collective: c, meta: None }, steps: vec![step] };
        let xml = msccl_xml(&lower(&s, &LowerOptions::default()).unwrap(), &MscclOptions::default()).unwrap();
        let back = import_msccl(&xml, Some(&t)).unwrap();
        // Each npu's uplink carries one send per step: its three sends take three steps.
        assert_eq!(back.steps.len(), 3);
        assert!(verify_schedule(&back, &VerifyOptions::default()).unwrap().is_valid());
        assert_eq!(ends(&back), ends(&s));
    }
}
