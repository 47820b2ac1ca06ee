//! Import of MSCCL XML (docs/design/FORMATS.md "MSCCL XML") back into a [`Schedule`], so that `verify` can
//! check an `.xml` file with the rules of docs/design/MODEL.md section 4 (docs/design/CLI.md, `verify`).
//!
//! **Collective.** `coll` gives the kind (`alltoall`, `allgather`, `reducescatter` or
//! `reduce_scatter`, `allreduce`), `ngpus` the ranks R (gpu g is rank g, npu id g), and
//! `nchunksperloop` = R*P the pieces per block P, as [`crate::lower::Layout`] lays the buffers
//! out (the exporter writes the larger of the input and output chunk counts, which is R*P for
//! every kind). The XML names no sizes, so the imported collective has `bytes_per_rank` =
//! `nchunksperloop`: one byte per chunk, every piece exactly one byte.
//!
//! **Topology.** Onto a given topology, every send from gpu a to gpu b needs a direct link
//! a -> b that is up; without one, onto a full mesh of R npus built here (every ordered pair a
//! link, bandwidth 1 GB/s, latency 0).
//!
//! **Steps.** The threadblocks run in rounds: a round fires every head step whose dependency
//! (`depid`/`deps`) completed in an earlier round, local steps (`cpy`, `re`, `nop`) alone and
//! sends only together with their matching receive (the k-th send of gpu a's threadblock with
//! `send=b` on channel c with the k-th receive of gpu b's threadblock with `recv=a` on c). Reads
//! see the buffers as they were at the start of the round. A fused step (`rcs`, `rrs`, `rrcs`)
//! receives in one round and sends in a later one. Every round that moves data is one step of
//! the schedule; the pairs of a round over the same link become one transfer carrying the pieces
//! that the sender's chunks hold (tracked from the input buffer's layout), `copy` for `r` and
//! `rcs`, `reduce` for `rrc`, `rrs` and `rrcs`. A pair whose op differs from the op already on its
//! link in the round waits for the next round (rule 2: one transfer per link and step).
//!
//! What the import does not check: whether chunks land in the right output chunk (run
//! [`crate::export::simulate`] for that) and the reader's attribute rules
//! ([`crate::export::check_reader_rules`]).

use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::lower::Layout;
use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::topology::{LinkClass, LinkId, NodeId, NodeKind, Shape, Topology, TopologyBuilder};
use std::collections::HashMap;

/// One `<step>`.
#[derive(Clone, Debug)]
struct XStep {
    kind: String,
    src: (usize, i64),
    dst: (usize, i64),
    cnt: usize,
    dep: Option<(usize, usize)>,
}

/// One `<tb>`.
#[derive(Clone, Debug)]
struct XTb {
    send: Option<usize>,
    recv: Option<usize>,
    chan: i64,
    steps: Vec<XStep>,
}

/// One `<gpu>`: chunks of its input, output and scratch buffers, its threadblocks.
#[derive(Clone, Debug)]
struct XGpu {
    chunks: [usize; 3],
    tbs: Vec<XTb>,
}

/// The `<algo>` element.
#[derive(Clone, Debug)]
struct XAlgo {
    name: String,
    proto: String,
    coll: String,
    ngpus: usize,
    nchunksperloop: usize,
    gpus: Vec<XGpu>,
}

/// A tag: its name, its attributes, whether it closes an element.
type Tag = (String, HashMap<String, String>, bool);

/// Every tag of an XML text, in document order.
fn tags(xml: &str) -> Result<Vec<Tag>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(j) = xml[i..].find('<') {
        let start = i + j;
        let rest = &xml[start..];
        if rest.starts_with("<?") || rest.starts_with("<!--") {
            let close = if rest.starts_with("<?") { "?>" } else { "-->" };
            i = start + rest.find(close).ok_or_else(|| Error::bad("MSCCL XML: unterminated declaration or comment"))? + close.len();
            continue;
        }
        let end = start + rest.find('>').ok_or_else(|| Error::bad("MSCCL XML: unterminated tag"))?;
        let body = xml[start + 1..end].trim();
        i = end + 1;
        if let Some(name) = body.strip_prefix('/') {
            out.push((name.trim().to_string(), HashMap::new(), true));
            continue;
        }
        let body = body.strip_suffix('/').unwrap_or(body);
        let name_end = body.find(char::is_whitespace).unwrap_or(body.len());
        let name = body[..name_end].to_string();
        let mut attrs = HashMap::new();
        let mut rest = body[name_end..].trim_start();
        while !rest.is_empty() {
            let eq = rest.find('=').ok_or_else(|| Error::bad(format!("MSCCL XML: <{name}>: attribute without a value: {rest}")))?;
            let key = rest[..eq].trim().to_string();
            let after = rest[eq + 1..].trim_start();
            let quote = after
                .chars()
                .next()
                .filter(|c| *c == '"' || *c == '\'')
                .ok_or_else(|| Error::bad(format!("MSCCL XML: <{name}>: attribute {key} is not quoted")))?;
            let close = after[1..].find(quote).ok_or_else(|| Error::bad(format!("MSCCL XML: <{name}>: attribute {key} is not terminated")))?;
            let value = after[1..1 + close].replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&");
            attrs.insert(key, value);
            rest = after[close + 2..].trim_start();
        }
        out.push((name, attrs, false));
    }
    Ok(out)
}

fn attr<'a>(attrs: &'a HashMap<String, String>, tag: &str, key: &str) -> Result<&'a str> {
    attrs.get(key).map(String::as_str).ok_or_else(|| Error::bad(format!("MSCCL XML: <{tag}> lacks the attribute {key}")))
}

fn int(attrs: &HashMap<String, String>, tag: &str, key: &str) -> Result<i64> {
    let v = attr(attrs, tag, key)?;
    v.trim().parse().map_err(|_| Error::bad(format!("MSCCL XML: <{tag}> {key}=\"{v}\" is not an integer")))
}

fn count(attrs: &HashMap<String, String>, tag: &str, key: &str) -> Result<usize> {
    let v = int(attrs, tag, key)?;
    usize::try_from(v).map_err(|_| Error::bad(format!("MSCCL XML: <{tag}> {key}=\"{v}\" is negative")))
}

fn peer(attrs: &HashMap<String, String>, tag: &str, key: &str) -> Result<Option<usize>> {
    let v = int(attrs, tag, key)?;
    Ok(usize::try_from(v).ok())
}

fn buffer(attrs: &HashMap<String, String>, tag: &str, key: &str) -> Result<usize> {
    match attr(attrs, tag, key)? {
        "i" => Ok(0),
        "o" => Ok(1),
        "s" => Ok(2),
        other => Err(Error::bad(format!("MSCCL XML: <{tag}> {key}=\"{other}\" is not a buffer (i, o or s)"))),
    }
}

/// Parses the elements the import needs.
fn parse(xml: &str) -> Result<XAlgo> {
    let mut algo: Option<XAlgo> = None;
    for (name, a, closing) in tags(xml)? {
        if closing {
            continue;
        }
        match name.as_str() {
            "algo" => {
                algo = Some(XAlgo {
                    name: a.get("name").cloned().unwrap_or_default(),
                    proto: a.get("proto").cloned().unwrap_or_default(),
                    coll: attr(&a, "algo", "coll")?.to_string(),
                    ngpus: count(&a, "algo", "ngpus")?,
                    nchunksperloop: count(&a, "algo", "nchunksperloop")?,
                    gpus: Vec::new(),
                })
            }
            "gpu" => {
                let algo = algo.as_mut().ok_or_else(|| Error::bad("MSCCL XML: <gpu> outside <algo>"))?;
                let id = count(&a, "gpu", "id")?;
                if id != algo.gpus.len() {
                    return Err(Error::bad(format!("MSCCL XML: <gpu id=\"{id}\">: gpus must be listed in id order from 0 (expected {})", algo.gpus.len())));
                }
                let chunks = [count(&a, "gpu", "i_chunks")?, count(&a, "gpu", "o_chunks")?, count(&a, "gpu", "s_chunks")?];
                algo.gpus.push(XGpu { chunks, tbs: Vec::new() });
            }
            "tb" => {
                let gpu = algo.as_mut().and_then(|a| a.gpus.last_mut()).ok_or_else(|| Error::bad("MSCCL XML: <tb> outside <gpu>"))?;
                let id = count(&a, "tb", "id")?;
                if id != gpu.tbs.len() {
                    return Err(Error::bad(format!("MSCCL XML: <tb id=\"{id}\">: threadblock ids must be dense from 0 (expected {})", gpu.tbs.len())));
                }
                gpu.tbs.push(XTb { send: peer(&a, "tb", "send")?, recv: peer(&a, "tb", "recv")?, chan: int(&a, "tb", "chan")?, steps: Vec::new() });
            }
            "step" => {
                let tb =
                    algo.as_mut().and_then(|a| a.gpus.last_mut()).and_then(|g| g.tbs.last_mut()).ok_or_else(|| Error::bad("MSCCL XML: <step> outside <tb>"))?;
                let kind = attr(&a, "step", "type")?.to_string();
                let nop = kind == "nop";
                let (src, dst) = if nop {
                    ((0, -1), (0, -1))
                } else {
                    ((buffer(&a, "step", "srcbuf")?, int(&a, "step", "srcoff")?), (buffer(&a, "step", "dstbuf")?, int(&a, "step", "dstoff")?))
                };
                let dep = match (int(&a, "step", "depid")?, int(&a, "step", "deps")?) {
                    (d, s) if d >= 0 && s >= 0 => Some((d as usize, s as usize)),
                    _ => None,
                };
                tb.steps.push(XStep { kind, src, dst, cnt: if nop { 0 } else { count(&a, "step", "cnt")? }, dep });
            }
            _ => {}
        }
    }
    let algo = algo.ok_or_else(|| Error::bad("MSCCL XML: no <algo> element"))?;
    if algo.gpus.len() != algo.ngpus {
        return Err(Error::bad(format!("MSCCL XML: ngpus=\"{}\" but {} <gpu> elements", algo.ngpus, algo.gpus.len())));
    }
    Ok(algo)
}

fn sends(kind: &str) -> bool {
    matches!(kind, "s" | "rcs" | "rrs" | "rrcs")
}

fn receives(kind: &str) -> bool {
    matches!(kind, "r" | "rcs" | "rrs" | "rrc" | "rrcs")
}

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

/// The state of one gpu's buffers: which piece every chunk holds.
type Buffers = [Vec<Option<PieceId>>; 3];

/// Reads `cnt` chunks of a buffer, naming the place on failure.
fn read(bufs: &Buffers, (b, off): (usize, i64), cnt: usize, at: &str) -> Result<Vec<PieceId>> {
    let names = ["i", "o", "s"];
    let start = usize::try_from(off).map_err(|_| Error::bad(format!("{at}: offset {off} of buffer {} is negative", names[b])))?;
    let chunks = bufs[b]
        .get(start..start + cnt)
        .ok_or_else(|| Error::bad(format!("{at}: chunks {start}..{} are outside buffer {} ({} chunks)", start + cnt, names[b], bufs[b].len())))?;
    chunks
        .iter()
        .enumerate()
        .map(|(x, c)| c.ok_or_else(|| Error::bad(format!("{at}: reads chunk {} of buffer {}, which holds nothing yet", start + x, names[b]))))
        .collect()
}

fn write(bufs: &mut Buffers, (b, off): (usize, i64), pieces: &[PieceId], at: &str) -> Result<()> {
    let start = usize::try_from(off).map_err(|_| Error::bad(format!("{at}: negative offset {off}")))?;
    let len = bufs[b].len();
    let chunks = bufs[b]
        .get_mut(start..start + pieces.len())
        .ok_or_else(|| Error::bad(format!("{at}: chunks {start}..{} are outside the buffer ({len} chunks)", start + pieces.len())))?;
    for (c, p) in chunks.iter_mut().zip(pieces) {
        *c = Some(*p);
    }
    Ok(())
}

/// Reconstructs a schedule from MSCCL XML (module docs: collective, sizes, rounds).
///
/// `topology`: the network the gpus run on (gpu g is npu g); `None` builds a [`full_mesh`] of
/// the gpus. Errors ([`Error::bad`]): unreadable XML, an unknown `coll`, chunk counts that do not
/// fit the collective's layout, a send from a to b without a direct up link a -> b (naming the
/// pair), a step that reads a chunk holding nothing, matched steps of different `cnt`, a send
/// without a receiving threadblock, and programs that stop before every step ran (a deadlock,
/// naming a stuck threadblock).
pub fn import_msccl(xml: &str, topology: Option<&Topology>) -> Result<Schedule> {
    let algo = parse(xml)?;
    let kind = match algo.coll.as_str() {
        "alltoall" => CollectiveKind::AllToAll,
        "allgather" => CollectiveKind::AllGather,
        "reducescatter" | "reduce_scatter" => CollectiveKind::ReduceScatter,
        "allreduce" => CollectiveKind::AllReduce,
        other => return Err(Error::bad(format!("MSCCL XML: coll=\"{other}\": only alltoall, allgather, reducescatter and allreduce can be imported"))),
    };
    let n = algo.ngpus;
    if n == 0 || algo.nchunksperloop == 0 || algo.nchunksperloop % n != 0 {
        return Err(Error::bad(format!("MSCCL XML: nchunksperloop=\"{}\" is not a positive multiple of ngpus=\"{n}\"", algo.nchunksperloop)));
    }
    let pieces = u32::try_from(algo.nchunksperloop / n).map_err(|_| Error::bad("MSCCL XML: nchunksperloop is too large"))?;
    let built;
    let topo = match topology {
        Some(t) => t,
        None => {
            built = full_mesh(n)?;
            &built
        }
    };
    let ranks: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    let collective = Collective::new(kind, ranks, algo.nchunksperloop as u64, pieces, None, topo).map_err(|e| e.context("MSCCL import"))?;
    let layout = Layout::of(&collective);
    for (g, gpu) in algo.gpus.iter().enumerate() {
        if gpu.chunks[0] != layout.input_chunks() || gpu.chunks[1] != layout.output_chunks() {
            return Err(Error::bad(format!(
                "MSCCL XML: gpu {g}: i_chunks=\"{}\" o_chunks=\"{}\", but {kind} over {n} ranks with {pieces} pieces per block has {} and {}",
                gpu.chunks[0],
                gpu.chunks[1],
                layout.input_chunks(),
                layout.output_chunks()
            )));
        }
    }
    // The input buffers by the layout.
    let mut bufs: Vec<Buffers> = algo.gpus.iter().map(|gpu| [vec![None; gpu.chunks[0]], vec![None; gpu.chunks[1]], vec![None; gpu.chunks[2]]]).collect();
    for (g, b) in bufs.iter_mut().enumerate() {
        let own: Vec<PieceId> = match kind {
            CollectiveKind::AllToAll => (0..n as u32).flat_map(|j| (0..pieces).map(move |k| PieceId::a2a(g as u32, j, k))).collect(),
            CollectiveKind::AllGather => (0..pieces).map(|k| PieceId::block(g as u32, k)).collect(),
            _ => (0..n as u32).flat_map(|j| (0..pieces).map(move |k| PieceId::block(j, k))).collect(),
        };
        for p in own {
            b[0][layout.input_offset(&p)] = Some(p);
        }
    }
    // The receiving threadblock of every (sender, receiver, channel).
    let mut receiver: HashMap<(usize, usize, i64), usize> = HashMap::new();
    for (g, gpu) in algo.gpus.iter().enumerate() {
        for (t, tb) in gpu.tbs.iter().enumerate() {
            if let Some(from) = tb.recv {
                if from >= n || from == g {
                    return Err(Error::bad(format!("MSCCL XML: gpu {g} tb {t}: recv=\"{from}\" is not another gpu")));
                }
                if receiver.insert((from, g, tb.chan), t).is_some() {
                    return Err(Error::bad(format!("MSCCL XML: gpu {g} has two threadblocks receiving from {from} on channel {}", tb.chan)));
                }
            }
        }
    }
    let link_of = |a: usize, b: usize| -> Result<LinkId> {
        topo.out_links(NodeId(a as u32))
            .filter(|&l| topo.link(l).dst == NodeId(b as u32) && topo.link(l).up)
            .min()
            .ok_or_else(|| Error::bad(format!("MSCCL import: gpu {a} sends to gpu {b}, but the topology has no direct link {a} -> {b} that is up")))
    };
    let mut pc: Vec<Vec<usize>> = algo.gpus.iter().map(|g| vec![0; g.tbs.len()]).collect();
    // The pieces a fused step received and still has to send.
    let mut carry: Vec<Vec<Option<Vec<PieceId>>>> = algo.gpus.iter().map(|g| vec![None; g.tbs.len()]).collect();
    let total: usize = algo.gpus.iter().flat_map(|g| &g.tbs).map(|t| t.steps.len()).sum();
    let mut done = 0;
    let mut steps: Vec<Step> = Vec::new();
    let mut round = 0;
    while done < total {
        let before = pc.clone();
        let ready = |g: usize, st: &XStep| st.dep.is_none_or(|(t, s)| before[g].get(t).is_some_and(|&p| p > s));
        // Writes of the round, applied after every read: (gpu, place, pieces).
        let mut writes: Vec<(usize, (usize, i64), Vec<PieceId>)> = Vec::new();
        let mut transfers: Vec<(LinkId, Op, Vec<PieceId>)> = Vec::new();
        let mut advanced: Vec<(usize, usize)> = Vec::new();
        let mut busy: Vec<Vec<bool>> = algo.gpus.iter().map(|gpu| vec![false; gpu.tbs.len()]).collect();
        for g in 0..n {
            for (t, tb) in algo.gpus[g].tbs.iter().enumerate() {
                if busy[g][t] {
                    continue;
                }
                let Some(st) = tb.steps.get(before[g][t]) else { continue };
                let at = format!("MSCCL XML: gpu {g} tb {t} step {}", before[g][t]);
                let sending = sends(&st.kind) && (!receives(&st.kind) || carry[g][t].is_some());
                if !sending && receives(&st.kind) {
                    // A receive fires with its sender.
                    continue;
                }
                if !sending {
                    if !ready(g, st) {
                        continue;
                    }
                    match st.kind.as_str() {
                        "cpy" | "re" => writes.push((g, st.dst, read(&bufs[g], st.src, st.cnt, &at)?)),
                        "nop" => {}
                        other => return Err(Error::bad(format!("{at}: type=\"{other}\" is not a step type"))),
                    }
                    busy[g][t] = true;
                    advanced.push((g, t));
                    continue;
                }
                if carry[g][t].is_none() && !ready(g, st) {
                    continue;
                }
                let b =
                    tb.send.filter(|&b| b < n && b != g).ok_or_else(|| Error::bad(format!("{at}: sends, but its threadblock has no other gpu to send to")))?;
                let rt = *receiver
                    .get(&(g, b, tb.chan))
                    .ok_or_else(|| Error::bad(format!("{at}: sends to gpu {b} on channel {}, where no threadblock receives from {g}", tb.chan)))?;
                if busy[b][rt] || carry[b][rt].is_some() {
                    continue;
                }
                let Some(rs) = algo.gpus[b].tbs[rt].steps.get(before[b][rt]) else { continue };
                if !receives(&rs.kind) || !ready(b, rs) {
                    continue;
                }
                let rat = format!("MSCCL XML: gpu {b} tb {rt} step {}", before[b][rt]);
                if rs.cnt != st.cnt {
                    return Err(Error::bad(format!("{at} sends {} chunks to gpu {b}, whose matching {rat} receives {}", st.cnt, rs.cnt)));
                }
                let op = if matches!(rs.kind.as_str(), "rrc" | "rrs" | "rrcs") { Op::Reduce } else { Op::Copy };
                let link = link_of(g, b)?;
                if transfers.iter().any(|(l, o, _)| *l == link && *o != op) {
                    continue;
                }
                let data = match &carry[g][t] {
                    Some(d) => d.clone(),
                    None => read(&bufs[g], st.src, st.cnt, &at)?,
                };
                if op == Op::Reduce {
                    let local = read(&bufs[b], rs.src, rs.cnt, &rat)?;
                    if local != data {
                        return Err(Error::bad(format!("{rat}: reduces the received pieces {data:?} with its own chunks, which hold {local:?}")));
                    }
                }
                if matches!(rs.kind.as_str(), "r" | "rrc" | "rcs" | "rrcs") {
                    writes.push((b, rs.dst, data.clone()));
                }
                match transfers.iter_mut().find(|(l, _, _)| *l == link) {
                    Some((_, _, ps)) => ps.extend(data.iter().copied().filter(|p| !ps.contains(p)).collect::<Vec<_>>()),
                    None => transfers.push((link, op, data.clone())),
                }
                busy[g][t] = true;
                busy[b][rt] = true;
                carry[g][t] = None;
                advanced.push((g, t));
                if sends(&rs.kind) {
                    carry[b][rt] = Some(data);
                } else {
                    advanced.push((b, rt));
                }
            }
        }
        if advanced.is_empty() && transfers.is_empty() {
            let stuck = (0..n).flat_map(|g| (0..pc[g].len()).map(move |t| (g, t))).find(|&(g, t)| pc[g][t] < algo.gpus[g].tbs[t].steps.len());
            let (g, t) = stuck.unwrap_or((0, 0));
            return Err(Error::bad(format!(
                "MSCCL XML: the programs stop after {done} of {total} steps (round {round}): gpu {g} tb {t} waits forever at step {} (a deadlock)",
                pc[g].get(t).copied().unwrap_or(0)
            )));
        }
        for (g, place, pieces) in writes {
            write(&mut bufs[g], place, &pieces, &format!("MSCCL XML: gpu {g}"))?;
        }
        for (g, t) in advanced {
            pc[g][t] += 1;
            done += 1;
        }
        if !transfers.is_empty() {
            steps.push(Step { transfers: transfers.into_iter().map(|(l, op, pieces)| Transfer::hop(l, op, pieces)).collect() });
        }
        round += 1;
    }
    let meta = serde_json::json!({ "imported_from": "msccl-xml", "name": algo.name, "proto": algo.proto, "bytes_per_chunk": 1 });
    Ok(Schedule { header: ScheduleHeader { topology: topo.clone(), collective, meta: Some(meta) }, steps })
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
            let s = crate::export::msccl::tests::ring_schedule(kind, 4);
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
