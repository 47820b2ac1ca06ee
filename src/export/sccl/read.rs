//! Reading SCCL's algorithm JSON into a [`Schedule`] (docs/design/FORMATS.md "SCCL algorithm
//! JSON", Import).
//!
//! **Collective.** The file's chunks (sorted, before `instance.chunks` cuts them) must be those of
//! SCCL's Alltoall, Allgather, ReduceScatter or Allreduce over its ranks, possibly already cut
//! into equal chunks, and `runtime_name` must name the same collective; anything else (Broadcast,
//! Scan, a custom pre/postcondition, triggers) is refused. The pieces per block follow from the
//! chunks ([`super::Addressing`]).
//!
//! **Topology.** Without an instance, the ranks are npus `0..n` and every nonzero
//! `links[dst][src] = m` is one link src -> dst of `m` x [`DEFAULT_UNIT_GBPS`] GB/s and
//! [`DEFAULT_LATENCY_NS`] ns, and every piece is one byte. Onto a spec's instance, rank g is the
//! spec's rank g; every SCCL link must be links of the spec's topology: one (up or down: a down
//! one then fails rule 1 in `verify`) or several parallel ones, whose up links' bandwidths are
//! summed, as the export sums them; the spec's bandwidths must be proportional to SCCL's
//! multiplicities.
//!
//! **Steps.** A step's sends from rank a to rank b become one transfer over that link carrying
//! their pieces, or over parallel links one transfer per link, each piece on the link that carries
//! it soonest: `copy` for Alltoall and Allgather, `reduce` for the reducing collectives (where
//! `ncclize` lowers every receive to a reduction, since every rank's buffer starts initialized).

use super::{base_chunks, chunk_up, rules::structure_problems, sccl_names, Addressing, ScclAlgorithm, ScclChunk};
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::spec::Instance;
use crate::topology::{LinkClass, LinkId, NodeId, NodeKind, Shape, Topology, TopologyBuilder};
use crate::units::{rational_from_decimal, Rational};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The bandwidth of one unit of SCCL's link multiplicity when no spec gives bandwidths (GB/s).
pub const DEFAULT_UNIT_GBPS: f64 = 1.0;

/// The latency of every link when no spec gives latencies (ns): SCCL's topology has none.
pub const DEFAULT_LATENCY_NS: f64 = 0.0;

/// Whether a JSON file is an SCCL algorithm rather than a collsched schedule, by its top-level
/// keys: `msccl_type`, `sccl_type`, `name`, `instance`, `input_map` and `output_map` are SCCL's,
/// `format`, `version` and `meta` ours (`topology`, `collective` and `steps` both have). The keys
/// are read until one decides, skipping values without keeping them, so a large schedule file
/// costs only the scan to its first deciding key (`format`, which our writer puts first).
/// Anything that is not a JSON object is not SCCL's (the schedule reader then says why).
pub fn is_sccl_json(path: &Path) -> Result<bool> {
    const SCCL: [&str; 6] = ["msccl_type", "sccl_type", "name", "instance", "input_map", "output_map"];
    let deciding: Vec<&str> = SCCL.iter().copied().chain(["format", "version", "meta"]).collect();
    Ok(crate::io::first_top_level_key(path, &deciding)?.is_some_and(|(key, _)| SCCL.contains(&key.as_str())))
}

/// Parses SCCL's algorithm JSON; errors name `source` and the field (`steps[2].sends[0]`).
pub fn parse_sccl(text: &str, source: &str) -> Result<ScclAlgorithm> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| Error::bad(format!("{source}: SCCL algorithm: {}", crate::io::field_json_message(&e, text.as_bytes()))))
}

/// Reads an SCCL algorithm file and imports it ([`import_sccl`]).
pub fn read_sccl_file(path: &Path, onto: Option<&Instance>) -> Result<(ScclAlgorithm, Schedule)> {
    let source = path.display().to_string();
    let alg = parse_sccl(&crate::io::read_decoded_to_string(path)?, &source)?;
    let schedule = import_sccl(&alg, onto).map_err(|e| e.context(&source))?;
    Ok((alg, schedule))
}

/// Imports an SCCL algorithm as a schedule (module docs), onto a spec's instance when given.
///
/// Errors ([`Error::bad`]): a header the rules 1-2 of the format refuse, a collective that is
/// not one of the four, an Allreduce cut into a number of chunks that is not a multiple of the
/// ranks, an instance that disagrees (kind, ranks, pieces, links, bandwidth ratios), and a send
/// that names no piece (out of range, or an all_to_all block from a rank to itself) or no link.
/// Which sends are legal (who holds what) is left to `verify`.
pub fn import_sccl(alg: &ScclAlgorithm, onto: Option<&Instance>) -> Result<Schedule> {
    let problems = structure_problems(alg);
    if !problems.is_empty() {
        return Err(Error::bad(format!("SCCL algorithm: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))));
    }
    let n = alg.topology.links.len() as u32;
    let addressing = identify(alg, n)?;
    let (topology, collective) = match onto {
        None => {
            let t = default_topology(&alg.topology.links)?;
            let ranks: Vec<NodeId> = (0..n).map(NodeId).collect();
            let bytes = n as u64 * addressing.pieces as u64;
            let c = Collective::new(addressing.kind, ranks, bytes, addressing.pieces, None, &t)?;
            (t, c)
        }
        Some(inst) => onto_instance(alg, addressing, inst)?,
    };
    let links = rank_links(&topology, &collective);
    let steps = alg.steps.iter().enumerate().map(|(t, s)| import_step(t, &s.sends, addressing, &links)).collect::<Result<Vec<_>>>()?;
    let mut meta = serde_json::json!({
        "imported_from": "sccl-json",
        "name": alg.name,
        "topology": alg.topology.name,
        "instance": serde_json::to_value(&alg.instance).expect("an instance is JSON"),
    });
    if onto.is_none() {
        meta["bytes_per_chunk"] = serde_json::json!(1);
    }
    Ok(Schedule { header: ScheduleHeader { topology, collective, meta: Some(meta) }, steps })
}

/// Which of our collectives the file's chunks are, and into how many pieces per block.
fn identify(alg: &ScclAlgorithm, n: u32) -> Result<Addressing> {
    let coll = &alg.collective;
    let mut file: Vec<ScclChunk> = coll
        .chunks
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.pre.sort_unstable();
            c.post.sort_unstable();
            c
        })
        .collect();
    file.sort();
    let matching: Vec<(CollectiveKind, u64)> = CollectiveKind::ALL
        .into_iter()
        .filter_map(|kind| {
            let base = base_chunks(kind, n);
            if file.is_empty() || file.len() % base.len() != 0 {
                return None;
            }
            let cut = (file.len() / base.len()) as u64;
            let mut want = chunk_up(&base, cut);
            want.sort();
            (want == file).then_some((kind, cut))
        })
        .collect();
    let Some(&(kind, cut)) = matching.iter().find(|(k, _)| sccl_names(*k, n).1 == coll.runtime_name).or(matching.first()) else {
        return Err(Error::bad(format!(
            "collective.name = \"{}\" (runtime_name \"{}\"): its {} chunks are not those of SCCL's Alltoall, Allgather, ReduceScatter or Allreduce over {n} ranks; collsched has no such collective",
            coll.name,
            coll.runtime_name,
            coll.chunks.len()
        )));
    };
    let (name, runtime) = sccl_names(kind, n);
    if coll.runtime_name != runtime {
        return Err(Error::bad(format!(
            "collective.runtime_name = \"{}\", but the chunks are {name}'s, whose runtime name (the XML's coll) is \"{runtime}\"",
            coll.runtime_name
        )));
    }
    let div = cut.checked_mul(alg.instance.chunks).ok_or_else(|| Error::bad(format!("instance.chunks = {}: too many chunks", alg.instance.chunks)))?;
    let pieces = if kind == CollectiveKind::AllReduce {
        if div % n as u64 != 0 {
            return Err(Error::bad(format!(
                "{name} cut into {div} chunks (instance.chunks = {}): collsched's all_reduce cuts the buffer into ranks x pieces, so the chunks must be a multiple of {n}",
                alg.instance.chunks
            )));
        }
        div / n as u64
    } else {
        div
    };
    let pieces = u32::try_from(pieces).map_err(|_| Error::bad(format!("instance.chunks = {}: too many chunks", alg.instance.chunks)))?;
    Ok(Addressing { kind, ranks: n, pieces })
}

/// Ranks `0..n` as npus `gpu0..`, one link per nonzero multiplicity (module docs).
fn default_topology(links: &[Vec<u64>]) -> Result<Topology> {
    let mut b = TopologyBuilder::new();
    let nodes: Vec<NodeId> = (0..links.len()).map(|g| b.node(NodeKind::Npu, format!("gpu{g}"))).collect();
    for (s, &src) in nodes.iter().enumerate() {
        for (d, &dst) in nodes.iter().enumerate() {
            let m = links[d][s];
            if m > 0 {
                let gbps = m as f64 * DEFAULT_UNIT_GBPS;
                crate::units::checked_bandwidth(gbps)
                    .map_err(|e| Error::bad(format!("topology.links[{d}][{s}] = {m}: its link of {m} x {DEFAULT_UNIT_GBPS} GB/s is out of range ({e})")))?;
                b.link(src, dst, gbps, DEFAULT_LATENCY_NS, LinkClass::Custom);
            }
        }
    }
    b.build(Shape::Custom, 0.0)
}

/// The spec's topology and collective, checked against the file (module docs).
fn onto_instance(alg: &ScclAlgorithm, addressing: Addressing, inst: &Instance) -> Result<(Topology, Collective)> {
    let (kind, n, c) = (addressing.kind, addressing.ranks, &inst.collective);
    if c.kind != kind {
        return Err(Error::bad(format!("the spec's collective is {}, the SCCL file's is {kind}", c.kind)));
    }
    if c.num_ranks() != n as usize {
        return Err(Error::bad(format!("the spec's collective has {} ranks, the SCCL file's topology {n}", c.num_ranks())));
    }
    if c.block_bytes.is_some() {
        return Err(Error::bad("the spec's collective.block_bytes: SCCL's chunks all have one size"));
    }
    if inst.pieces_given && c.pieces != addressing.pieces {
        return Err(Error::bad(format!("the spec cuts blocks into {} pieces, the SCCL file into {}", c.pieces, addressing.pieces)));
    }
    let t = &inst.topology;
    let links = rank_links(t, c);
    // Bandwidth per unit of multiplicity, from the first SCCL link, which every other must match.
    let mut unit: Option<(Rational, (usize, usize))> = None;
    for (d, row) in alg.topology.links.iter().enumerate() {
        for (s, &m) in row.iter().enumerate().filter(|(_, &m)| m > 0) {
            let (a, b) = (c.ranks[s], c.ranks[d]);
            let at = format!("topology.links[{d}][{s}] = {m}");
            let Some(between) = links.get(&(s as u32, d as u32)) else {
                return Err(Error::bad(format!("{at}: the spec's topology has no link from node {a} to node {b} (ranks {s} and {d})")));
            };
            let bw: Rational = between.iter().map(|(_, bw)| bw).sum();
            let per_unit = bw / Rational::from_integer(m as i128);
            match &unit {
                None => unit = Some((per_unit, (s, d))),
                Some((u, (s0, d0))) if *u != per_unit => {
                    let what = if between.len() == 1 { "has".to_string() } else { format!("has {} parallel links of", between.len()) };
                    return Err(Error::bad(format!(
                        "{at}: the spec's link from rank {s} to rank {d} {what} {} GB/s, not {m} x the {} GB/s per unit that links[{d0}][{s0}] implies: SCCL's multiplicities must be proportional to the bandwidths",
                        crate::units::to_f64(&bw),
                        crate::units::to_f64(u)
                    )));
                }
                Some(_) => {}
            }
        }
    }
    let collective = Collective::new(kind, c.ranks.clone(), c.bytes_per_rank, addressing.pieces, None, t)?;
    Ok((t.clone(), collective))
}

/// Per (sender rank, receiver rank): the links a send between them may take, with their
/// bandwidths: the parallel links that are up, else the lowest id (so that `verify` names a down
/// link under rule 1).
fn rank_links(t: &Topology, c: &Collective) -> HashMap<(u32, u32), Vec<(LinkId, Rational)>> {
    let mut all: BTreeMap<(u32, u32), Vec<LinkId>> = BTreeMap::new();
    for (id, l) in t.links() {
        if let (Some(s), Some(d)) = (c.rank_index(l.src), c.rank_index(l.dst)) {
            all.entry((s as u32, d as u32)).or_default().push(id);
        }
    }
    // A topology's bandwidths are exact decimals (docs/design/MODEL.md section 2).
    let bandwidth = |l: LinkId| rational_from_decimal(t.link(l).bandwidth_gbps).unwrap_or_else(|| Rational::from_integer(1));
    all.into_iter()
        .map(|(pair, ids)| {
            let up: Vec<LinkId> = ids.iter().copied().filter(|&l| t.link(l).up).collect();
            let chosen = if up.is_empty() { vec![ids[0]] } else { up };
            (pair, chosen.into_iter().map(|l| (l, bandwidth(l))).collect())
        })
        .collect()
}

/// One step: the sends from rank a to rank b become one transfer over the link a -> b, or where
/// the ranks have parallel links, one per link, each piece on the link that carries its pieces
/// soonest with it (the fewest pieces over the bandwidth, then the lowest id).
fn import_step(t: usize, sends: &[[u64; 3]], addressing: Addressing, links: &HashMap<(u32, u32), Vec<(LinkId, Rational)>>) -> Result<Step> {
    let n = addressing.ranks as u64;
    let mut by_pair: BTreeMap<(u32, u32), Vec<PieceId>> = BTreeMap::new();
    for (i, &[addr, src, dst]) in sends.iter().enumerate() {
        let at = format!("steps[{t}].sends[{i}] = [{addr}, {src}, {dst}]");
        if src >= n || dst >= n || src == dst {
            return Err(Error::bad(format!("{at}: a send needs two different ranks below {n}")));
        }
        let piece = addressing.piece(addr).map_err(|why| Error::bad(format!("{at}: {why}")))?;
        let pair = (src as u32, dst as u32);
        if !links.contains_key(&pair) {
            return Err(Error::bad(format!("{at}: there is no link from rank {src} to rank {dst} (topology.links[{dst}][{src}] = 0)")));
        }
        by_pair.entry(pair).or_default().push(piece);
    }
    let op = if addressing.kind.is_reducing() { Op::Reduce } else { Op::Copy };
    let mut transfers = Vec::new();
    for (pair, pieces) in by_pair {
        let parallel = &links[&pair];
        let mut carried: Vec<Vec<PieceId>> = vec![Vec::new(); parallel.len()];
        for piece in pieces {
            let soonest = (0..parallel.len())
                .min_by(|&i, &j| {
                    let after = |k: usize| Rational::from_integer(carried[k].len() as i128 + 1) / parallel[k].1;
                    after(i).cmp(&after(j)).then(parallel[i].0.cmp(&parallel[j].0))
                })
                .expect("a pair with a send has a link");
            carried[soonest].push(piece);
        }
        transfers.extend(parallel.iter().zip(carried).filter(|(_, p)| !p.is_empty()).map(|(&(l, _), p)| Transfer::hop(l, op, p)));
    }
    Ok(Step { transfers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{torus, TorusParams};

    const RING4: &str = include_str!("../../../tests/data/sccl/ring4_alltoall.msccl.json");

    fn ring_instance(n: usize, bandwidth: Vec<f64>, kind: CollectiveKind) -> Instance {
        let t = torus(&TorusParams { dims: vec![n], wrap: vec![true], bandwidth_gbps: bandwidth, latency_ns: vec![100.0] }).unwrap();
        let c = Collective::new(kind, t.node_ids().collect(), 4096, 1, None, &t).unwrap();
        Instance { topology: t, collective: c, pieces_given: false }
    }

    #[test]
    fn onto_a_spec_the_spec_gives_bandwidths_and_sizes() {
        let alg = parse_sccl(RING4, "ring4").unwrap();
        let inst = ring_instance(4, vec![32.0], CollectiveKind::AllToAll);
        let s = import_sccl(&alg, Some(&inst)).unwrap();
        assert_eq!(s.header.collective.bytes_per_rank, 4096);
        assert_eq!(s.header.topology.num_links(), inst.topology.num_links());
        let plain = import_sccl(&alg, None).unwrap();
        assert_eq!(s.steps.iter().map(|st| st.transfers.len()).collect::<Vec<_>>(), plain.steps.iter().map(|st| st.transfers.len()).collect::<Vec<_>>());
        // The wrong collective, the wrong number of ranks, a link the spec lacks.
        let e = import_sccl(&alg, Some(&ring_instance(4, vec![32.0], CollectiveKind::AllGather))).unwrap_err();
        assert!(e.message().contains("the spec's collective is all_gather, the SCCL file's is all_to_all"), "{e}");
        let e = import_sccl(&alg, Some(&ring_instance(5, vec![32.0], CollectiveKind::AllToAll))).unwrap_err();
        assert!(e.message().contains("has 5 ranks"), "{e}");
        let mut more = alg.clone();
        more.topology.links[2][0] = 1;
        let e = import_sccl(&more, Some(&inst)).unwrap_err();
        assert!(e.message().contains("topology.links[2][0] = 1: the spec's topology has no link from node 0 to node 2"), "{e}");
        // Multiplicities not proportional to the spec's bandwidths.
        let mut doubled = alg.clone();
        doubled.topology.links[1][0] = 2;
        let e = import_sccl(&doubled, Some(&inst)).unwrap_err();
        assert!(e.message().contains("must be proportional"), "{e}");
    }

    #[test]
    fn allreduce_chunks_must_cover_the_ranks_and_runtime_names_must_agree() {
        let mut alg = parse_sccl(RING4, "ring4").unwrap();
        alg.collective = super::super::base_collective(CollectiveKind::AllReduce, 4);
        alg.instance.chunks = 6;
        let e = import_sccl(&alg, None).unwrap_err();
        assert!(e.message().contains("must be a multiple of 4"), "{e}");
        let mut alg = parse_sccl(RING4, "ring4").unwrap();
        alg.collective.runtime_name = "allgather".into();
        let e = import_sccl(&alg, None).unwrap_err();
        assert!(e.message().contains("runtime_name = \"allgather\", but the chunks are Alltoall(n=4)'s"), "{e}");
        // Chunks already cut in two (8 chunks per block pair) with instance.chunks 1: P = 2.
        let mut alg = parse_sccl(RING4, "ring4").unwrap();
        alg.collective.chunks = chunk_up(&alg.collective.chunks, 2);
        alg.steps.clear();
        assert_eq!(import_sccl(&alg, None).unwrap().header.collective.pieces, 2);
        // The older tag is read.
        let old = RING4.replace("msccl_type", "sccl_type");
        assert_eq!(parse_sccl(&old, "old").unwrap(), parse_sccl(RING4, "new").unwrap());
    }
}
