//! Writes lowered programs ([`crate::lower`], threadblocks per (channel, peer, direction)) as
//! MSCCL XML, in the executor's dialect or the older runtime's ([`MscclOptions::runtime`]).
//!
//! **Dialects.** For msccl-executor-nccl `<algo>` carries `inplace="0" outofplace="1"
//! minBytes maxBytes` (`maxBytes="0"`: no limit) and reduce-scatter is `reducescatter`. For the
//! older runtime it carries `inplace="0"` and no `outofplace`, reduce-scatter is
//! `reduce_scatter`, and "no limit" is written as the largest `maxBytes` (without one that
//! runtime stops at 128 MiB; with `maxBytes="0"` it never picks the algorithm).
//!
//! **Chunks and rounding.** One chunk is one piece of the schedule. The XML names no sizes: the
//! runtime cuts each buffer into `nchunksperloop` equal chunks of (buffer bytes /
//! `nchunksperloop`), rounded down to its element and protocol granularity, and runs the
//! remainder in a last, shorter loop. So the exported program moves exactly the schedule's
//! pieces when the buffer size is a multiple of `nchunksperloop` elements, and otherwise moves
//! chunks that differ from S/(R*P) by less than one element. Non-uniform all-to-all
//! (`block_bytes`) has pieces of different sizes, which equal chunks cannot express: it is
//! refused.
//!
//! **Steps.** An operation of more than 71 chunks becomes several steps of at most 71 (both ends
//! of a matched pair carry the same pieces, so both split it the same way). A dependency on
//! another threadblock's operation waits for its last step; an operation with several
//! dependencies gets one `nop` step per extra dependency just before it. A send's `dstbuf` /
//! `dstoff` and a plain receive's `srcbuf` / `srcoff` name the partner's chunks, as msccl-tools
//! writes them; every gpu declares the largest scratch size of all gpus, so those offsets are
//! within bounds on both ends. `nop` steps have `cnt="0"` and offsets -1.

use super::model::{Coll, Proto, Runtime, MAX_VALUE_LEN};
use super::rules::MAX_CNT;
use crate::collective::CollectiveKind;
use crate::error::{Error, Result};
use crate::lower::{OpKind, Programs, Slice};
use std::collections::HashSet;
use std::fmt::Write as _;

/// Options of the MSCCL export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MscclOptions {
    /// The algorithm's name.
    pub name: String,
    /// The protocol.
    pub proto: Proto,
    /// The runtime whose dialect to write (module docs).
    pub runtime: Runtime,
    /// Smallest buffer size, in bytes, the runtime picks this algorithm for.
    pub min_bytes: u64,
    /// Largest buffer size (0: no limit).
    pub max_bytes: u64,
}

impl Default for MscclOptions {
    fn default() -> Self {
        MscclOptions { name: "collsched".into(), proto: Proto::Simple, runtime: Runtime::Executor, min_bytes: 0, max_bytes: 0 }
    }
}

fn coll_name(kind: CollectiveKind, runtime: Runtime) -> &'static str {
    let coll = match kind {
        CollectiveKind::AllToAll => Coll::AllToAll,
        CollectiveKind::AllGather => Coll::AllGather,
        CollectiveKind::ReduceScatter => Coll::ReduceScatter,
        CollectiveKind::AllReduce => Coll::AllReduce,
    };
    coll.spelled(runtime).unwrap_or_default()
}

/// The `<algo>` attributes after `coll`: which placements and buffer sizes the runtime picks
/// the algorithm for.
fn selection(opts: &MscclOptions) -> String {
    match opts.runtime {
        Runtime::Executor => format!(r#"inplace="0" outofplace="1" minBytes="{}" maxBytes="{}""#, opts.min_bytes, opts.max_bytes),
        Runtime::Legacy => {
            let max = if opts.max_bytes == 0 { i64::MAX as u64 } else { opts.max_bytes };
            format!(r#"inplace="0" minBytes="{}" maxBytes="{max}""#, opts.min_bytes)
        }
    }
}

/// `<algo name>` as the readers take it: they do not unescape values, so the characters XML
/// would escape (and control characters, which break their tokenizer) become `_`, and the name is
/// cut at a character boundary to the [`MAX_VALUE_LEN`] bytes their buffers hold. Any schedule
/// exports whatever its file is called (the current runtime does not even read `name`).
fn algo_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if matches!(c, '&' | '<' | '>' | '"' | '\'') || c.is_control() { '_' } else { c };
        if out.len() + c.len_utf8() > MAX_VALUE_LEN {
            break;
        }
        out.push(c);
    }
    if out.is_empty() {
        "collsched".into()
    } else {
        out
    }
}

/// One `<step>` before numbering.
struct XmlStep {
    kind: &'static str,
    src: Option<Slice>,
    dst: Option<Slice>,
    cnt: usize,
    dep: Option<(usize, usize)>,
}

/// The channels that carry a threadblock: one past the highest `chan`.
pub fn used_channels(programs: &Programs) -> usize {
    programs.ranks.iter().flat_map(|r| &r.threadblocks).map(|t| t.channel + 1).max().unwrap_or(1)
}

/// Writes lowered programs as MSCCL XML (module docs: chunks, splitting, dependencies).
///
/// Fails on programs that MSCCL cannot express: a threadblock that sends to or receives from
/// several peers (`crate::lower::ThreadblockLayout::PerRank`), or pieces of unequal sizes.
pub fn msccl_xml(programs: &Programs, opts: &MscclOptions) -> Result<String> {
    if !programs.uniform {
        return Err(Error::bad("MSCCL export: the pieces have different sizes (block_bytes), which equal MSCCL chunks cannot express"));
    }
    let p = programs;
    let scratch = p.ranks.iter().map(|r| r.scratch_chunks).max().unwrap_or(0);
    let per_loop = p.ranks.iter().map(|r| r.input_chunks.max(r.output_chunks)).max().unwrap_or(0);
    // The channels the lowering was asked for, all of which the runtime opens, even where the
    // spread leaves some without a threadblock.
    let nchannels = used_channels(p).max(p.channels).max(1);
    let mut x = String::new();
    let _ = writeln!(
        x,
        r#"<algo name="{}" proto="{}" nchannels="{nchannels}" nchunksperloop="{per_loop}" ngpus="{}" coll="{}" {}>"#,
        algo_name(&opts.name),
        opts.proto.as_str(),
        p.ranks.len(),
        coll_name(p.kind, opts.runtime),
        selection(opts)
    );
    for (g, rp) in p.ranks.iter().enumerate() {
        // Steps of every threadblock, with the step index of every operation's last step.
        let mut steps: Vec<Vec<XmlStep>> = Vec::with_capacity(rp.threadblocks.len());
        let mut last_step: Vec<Vec<usize>> = Vec::with_capacity(rp.threadblocks.len());
        for (t, tb) in rp.threadblocks.iter().enumerate() {
            let mut out = Vec::new();
            let mut last = Vec::with_capacity(tb.ops.len());
            for (i, op) in tb.ops.iter().enumerate() {
                let (kind, src, dst) = match op.kind {
                    OpKind::Send { peer } => {
                        if tb.send != Some(peer) || tb.recv.is_some() {
                            return Err(Error::bad(format!("MSCCL export: gpu {g} tb {t} op {i} sends to {peer}, but the threadblock is not the one sending to {peer} (lower with one threadblock per peer)")));
                        }
                        ("s", op.src, op.remote)
                    }
                    OpKind::Recv { peer, reduce } => {
                        if tb.recv != Some(peer) || tb.send.is_some() {
                            return Err(Error::bad(format!("MSCCL export: gpu {g} tb {t} op {i} receives from {peer}, but the threadblock is not the one receiving from {peer} (lower with one threadblock per peer)")));
                        }
                        if reduce {
                            ("rrc", op.src, op.dst)
                        } else {
                            ("r", op.remote, op.dst)
                        }
                    }
                    OpKind::Copy => ("cpy", op.src, op.dst),
                };
                // Extra dependencies wait in nops just before the operation.
                let deps: Vec<(usize, usize)> = op.deps.iter().map(|d| (d.tb, d.op)).collect();
                if let Some((_, rest)) = deps.split_last() {
                    for &(tb, o) in rest {
                        out.push(XmlStep { kind: "nop", src: None, dst: None, cnt: 0, dep: Some((tb, o)) });
                    }
                }
                let count = src.or(dst).map(|s| s.count).unwrap_or(0);
                let mut done = 0;
                while done < count {
                    let n = (count - done).min(MAX_CNT as usize);
                    let part = |s: Option<Slice>| s.map(|s| Slice { buffer: s.buffer, offset: s.offset + done, count: n });
                    let dep = if done == 0 { deps.last().copied() } else { None };
                    out.push(XmlStep { kind, src: part(src), dst: part(dst), cnt: n, dep });
                    done += n;
                }
                last.push(out.len().saturating_sub(1));
            }
            steps.push(out);
            last_step.push(last);
        }
        // Dependencies point at operations; resolve them to steps and mark their targets.
        let mut hasdep: HashSet<(usize, usize)> = HashSet::new();
        for tb in &mut steps {
            for st in tb.iter_mut() {
                if let Some((t, o)) = st.dep {
                    let s = last_step[t][o];
                    st.dep = Some((t, s));
                    hasdep.insert((t, s));
                }
            }
        }
        let _ = writeln!(x, r#"  <gpu id="{g}" i_chunks="{}" o_chunks="{}" s_chunks="{scratch}">"#, rp.input_chunks, rp.output_chunks);
        for (t, tb) in rp.threadblocks.iter().enumerate() {
            let peer = |p: Option<usize>| p.map_or(-1, |p| p as i64);
            let _ = writeln!(x, r#"    <tb id="{t}" send="{}" recv="{}" chan="{}">"#, peer(tb.send), peer(tb.recv), tb.channel);
            for (s, st) in steps[t].iter().enumerate() {
                let buf = |b: Option<Slice>| b.map_or(("i", -1), |b| (b.buffer.short(), b.offset as i64));
                let (sb, so) = buf(st.src);
                let (db, d) = buf(st.dst);
                let (sb, db) = if st.kind == "nop" { ("i", "o") } else { (sb, db) };
                let (depid, deps) = st.dep.map_or((-1, -1), |(t, s)| (t as i64, s as i64));
                let has = u8::from(hasdep.contains(&(t, s)));
                let _ = writeln!(
                    x,
                    r#"      <step s="{s}" type="{}" srcbuf="{sb}" srcoff="{so}" dstbuf="{db}" dstoff="{d}" cnt="{}" depid="{depid}" deps="{deps}" hasdep="{has}"/>"#,
                    st.kind, st.cnt
                );
            }
            x.push_str("    </tb>\n");
        }
        x.push_str("  </gpu>\n");
    }
    x.push_str("</algo>\n");
    Ok(x)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::check::{check_reader_rules, check_xml};
    use super::super::simulate::Buffering;
    use super::*;
    use crate::lower::tests::torus_schedules;
    use crate::lower::{lower, ChannelSpread, LowerOptions, ThreadblockLayout};

    /// The file is read, runs under rendezvous and computes its collective.
    fn assert_runs_strictly(xml: &str, name: &str) {
        let report = check_xml(xml, Buffering::Rendezvous);
        assert!(report.problems.errors.is_empty(), "{name}: {:?}", report.problems.errors);
        assert!(report.problems.warnings.is_empty(), "{name}: {:?}", report.problems.warnings);
        assert_eq!(report.runs.len(), 1, "{name}");
        match &report.runs[0].outcome {
            Ok(run) => assert!(run.is_correct(), "{name}: {:?}", &run.errors[..run.errors.len().min(5)]),
            Err(e) => panic!("{name}: {e}"),
        }
    }

    #[test]
    fn torus_schedules_export_run_and_place_every_chunk() {
        for (name, s) in torus_schedules() {
            // Spreading operations over channels keeps threadblocks short (the 64-step limit).
            for (channels, spread) in [(1, ChannelSpread::Transfers), (2, ChannelSpread::Operations)] {
                let programs = lower(&s, &LowerOptions { channels, spread, ..LowerOptions::default() }).unwrap();
                let xml = msccl_xml(&programs, &MscclOptions::default()).unwrap();
                assert_runs_strictly(&xml, &name);
            }
        }
    }

    /// Ring reduce-scatter, all-gather, and all-reduce (the two in sequence) on a ring of n.
    pub(crate) fn ring_schedule(kind: CollectiveKind, n: usize) -> crate::schedule::Schedule {
        use crate::collective::{Collective, PieceId};
        use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
        use crate::topology::NodeId;
        let t = crate::lower::tests::torus_with(&[n], &[]);
        let c = Collective::new(kind, t.node_ids().collect(), 4096, 2, None, &t).unwrap();
        let link = |r: usize| t.link_between(NodeId(r as u32), NodeId(((r + 1) % n) as u32)).unwrap();
        let block = |b: usize| (0..2).map(|k| PieceId::block(b as u32, k)).collect::<Vec<_>>();
        // Block j is reduced along j+1 -> j+2 -> ... -> j; then block j travels from j around.
        let reduce: Vec<Step> =
            (0..n - 1).map(|s| Step { transfers: (0..n).map(|r| Transfer::hop(link(r), Op::Reduce, block((r + 2 * n - 1 - s) % n))).collect() }).collect();
        let gather: Vec<Step> =
            (0..n - 1).map(|s| Step { transfers: (0..n).map(|r| Transfer::hop(link(r), Op::Copy, block((r + n - s) % n))).collect() }).collect();
        let steps = match kind {
            CollectiveKind::ReduceScatter => reduce,
            CollectiveKind::AllGather => gather,
            _ => reduce.into_iter().chain(gather).collect(),
        };
        Schedule { header: ScheduleHeader { topology: t, collective: c, meta: None }, steps }
    }

    #[test]
    fn ring_gather_and_reductions_export_and_compute() {
        use crate::verify::{check_deadlock, verify_schedule, VerifyOptions};
        for kind in [CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce] {
            let s = ring_schedule(kind, 4);
            let report = verify_schedule(&s, &VerifyOptions::default()).unwrap();
            assert!(report.is_valid(), "{kind}: {:?}", report.findings.failures());
            let programs = lower(&s, &LowerOptions::default()).unwrap();
            assert!(check_deadlock(&programs).is_empty(), "{kind}");
            for runtime in [Runtime::Executor, Runtime::Legacy] {
                let xml = msccl_xml(&programs, &MscclOptions { runtime, ..MscclOptions::default() }).unwrap();
                assert_runs_strictly(&xml, &format!("{kind} for {runtime}"));
                assert_eq!(check_xml(&xml, Buffering::Rendezvous).runtime, Some(runtime), "{kind}");
                assert!(check_reader_rules(&xml).is_empty());
            }
        }
    }

    #[test]
    fn attributes_and_coll_names() {
        let (_, s) = &torus_schedules()[0];
        let programs = lower(s, &LowerOptions::default()).unwrap();
        let xml = msccl_xml(&programs, &MscclOptions::default()).unwrap();
        let first = xml.lines().next().unwrap();
        let per_loop = 16 * s.header.collective.pieces;
        assert_eq!(
            first,
            format!(
                r#"<algo name="collsched" proto="Simple" nchannels="1" nchunksperloop="{per_loop}" ngpus="16" coll="alltoall" inplace="0" outofplace="1" minBytes="0" maxBytes="0">"#
            )
        );
        assert_eq!(coll_name(CollectiveKind::ReduceScatter, Runtime::Executor), "reducescatter");
        assert_eq!(coll_name(CollectiveKind::ReduceScatter, Runtime::Legacy), "reduce_scatter");
        let legacy = msccl_xml(&programs, &MscclOptions { runtime: Runtime::Legacy, ..MscclOptions::default() }).unwrap();
        assert_eq!(
            legacy.lines().next().unwrap(),
            format!(
                r#"<algo name="collsched" proto="Simple" nchannels="1" nchunksperloop="{per_loop}" ngpus="16" coll="alltoall" inplace="0" minBytes="0" maxBytes="9223372036854775807">"#
            )
        );
        // Names the readers take as written: no escapes, at most 255 bytes, cut between
        // characters.
        assert_eq!(algo_name(r#"a"b&<x>'y"#), "a_b__x__y");
        assert_eq!(algo_name("tab\there"), "tab_here");
        assert_eq!(algo_name(&"&".repeat(100)), "_".repeat(100));
        assert_eq!(algo_name(&"x".repeat(300)), "x".repeat(255));
        assert_eq!(algo_name(&format!("{}\u{e9}", "x".repeat(254))), "x".repeat(254));
        assert_eq!(algo_name(""), "collsched");
        let odd = msccl_xml(&programs, &MscclOptions { name: format!("{}\"{}", "&".repeat(100), "\u{e9}".repeat(200)), ..MscclOptions::default() }).unwrap();
        assert!(check_reader_rules(&odd).is_empty(), "{:?}", check_reader_rules(&odd));
        // A per-rank threadblock cannot be written.
        let single = lower(s, &LowerOptions { threadblocks: ThreadblockLayout::PerRank, ..LowerOptions::default() }).unwrap();
        assert!(msccl_xml(&single, &MscclOptions::default()).is_err());
    }
}
