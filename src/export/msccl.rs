//! MSCCL XML (what MSCCL, msccl-executor-nccl and RCCL execute), docs/design/FORMATS.md "MSCCL XML".
//!
//! [`msccl_xml`] writes lowered programs ([`crate::lower`], threadblocks per (channel, peer,
//! direction)) in the current reader's dialect; [`check_reader_rules`] re-implements the
//! reader's acceptance rules; [`simulate`] runs an XML file chunk by chunk under blocking
//! (rendezvous) semantics and re-derives where every chunk ends up, so a test can prove that
//! what was written computes the collective and cannot hang.
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

use crate::collective::CollectiveKind;
use crate::error::{Error, Result};
use crate::lower::{OpKind, Programs, Slice};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// The most chunks one step may move (the reader's limit).
const MAX_CNT: usize = 71;
/// Steps per threadblock in the reader's default build.
const MAX_STEPS: usize = 64;
/// Sending (and receiving) threadblocks per channel.
const MAX_TBS_PER_CHANNEL: usize = 32;

/// The runtime protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Proto {
    /// Large messages.
    #[default]
    Simple,
    /// Low latency.
    LL,
    /// Low latency, 128-byte lines.
    LL128,
}

impl Proto {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Simple => "Simple",
            Proto::LL => "LL",
            Proto::LL128 => "LL128",
        }
    }
}

/// Options of the MSCCL export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MscclOptions {
    /// The algorithm's name.
    pub name: String,
    /// The protocol.
    pub proto: Proto,
    /// Spell reduce_scatter `reduce_scatter`, as the older runtime does (the current reader
    /// spells it `reducescatter`).
    pub legacy_coll_names: bool,
    /// Smallest buffer size, in bytes, the runtime picks this algorithm for.
    pub min_bytes: u64,
    /// Largest buffer size (0: no limit).
    pub max_bytes: u64,
}

impl Default for MscclOptions {
    fn default() -> Self {
        MscclOptions { name: "collsched".into(), proto: Proto::Simple, legacy_coll_names: false, min_bytes: 0, max_bytes: 0 }
    }
}

fn coll_name(kind: CollectiveKind, legacy: bool) -> &'static str {
    match kind {
        CollectiveKind::AllToAll => "alltoall",
        CollectiveKind::AllGather => "allgather",
        CollectiveKind::ReduceScatter if legacy => "reduce_scatter",
        CollectiveKind::ReduceScatter => "reducescatter",
        CollectiveKind::AllReduce => "allreduce",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

/// One `<step>` before numbering.
struct XmlStep {
    kind: &'static str,
    src: Option<Slice>,
    dst: Option<Slice>,
    cnt: usize,
    dep: Option<(usize, usize)>,
}

/// Writes lowered programs as MSCCL XML (module docs: chunks, splitting, dependencies).
///
/// Fails on programs that MSCCL cannot express: a threadblock that sends to or receives from
/// several peers ([`crate::lower::ThreadblockLayout::PerRank`]), or pieces of unequal sizes.
pub fn msccl_xml(programs: &Programs, opts: &MscclOptions) -> Result<String> {
    if !programs.uniform {
        return Err(Error::bad("MSCCL export: the pieces have different sizes (block_bytes), which equal MSCCL chunks cannot express"));
    }
    let p = programs;
    let scratch = p.ranks.iter().map(|r| r.scratch_chunks).max().unwrap_or(0);
    let per_loop = p.ranks.iter().map(|r| r.input_chunks.max(r.output_chunks)).max().unwrap_or(0);
    let nchannels = p.ranks.iter().flat_map(|r| &r.threadblocks).map(|t| t.channel + 1).max().unwrap_or(1);
    let mut x = String::new();
    let _ = writeln!(
        x,
        r#"<algo name="{}" proto="{}" nchannels="{nchannels}" nchunksperloop="{per_loop}" ngpus="{}" coll="{}" inplace="0" outofplace="1" minBytes="{}" maxBytes="{}">"#,
        escape(&opts.name),
        opts.proto.as_str(),
        p.ranks.len(),
        coll_name(p.kind, opts.legacy_coll_names),
        opts.min_bytes,
        opts.max_bytes
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
                    let n = (count - done).min(MAX_CNT);
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

/// An XML element: name, attributes, children.
#[derive(Debug)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<Element>,
}

impl Element {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// A small parser for the XML subset MSCCL files use: elements with quoted attributes,
/// declarations, comments, whitespace and ignored text.
fn parse_xml(xml: &str) -> std::result::Result<Element, String> {
    let b = xml.as_bytes();
    let mut i = 0;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let line = |i: usize| xml[..i].bytes().filter(|&c| c == b'\n').count() + 1;
    while i < b.len() {
        if b[i] != b'<' {
            i += 1;
            continue;
        }
        if xml[i..].starts_with("<?") {
            i = xml[i..].find("?>").map(|j| i + j + 2).ok_or_else(|| format!("line {}: unterminated declaration", line(i)))?;
            continue;
        }
        if xml[i..].starts_with("<!--") {
            i = xml[i..].find("-->").map(|j| i + j + 3).ok_or_else(|| format!("line {}: unterminated comment", line(i)))?;
            continue;
        }
        let end = xml[i..].find('>').map(|j| i + j).ok_or_else(|| format!("line {}: unterminated tag", line(i)))?;
        let tag = &xml[i + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            let el = stack.pop().ok_or_else(|| format!("line {}: </{}> closes nothing", line(i), name.trim()))?;
            if el.name != name.trim() {
                return Err(format!("line {}: </{}> closes <{}>", line(i), name.trim(), el.name));
            }
            match stack.last_mut() {
                Some(parent) => parent.children.push(el),
                None => root = Some(el),
            }
            i = end + 1;
            continue;
        }
        let (tag, closed) = match tag.strip_suffix('/') {
            Some(t) => (t, true),
            None => (tag, false),
        };
        let el = parse_tag(tag).map_err(|e| format!("line {}: {e}", line(i)))?;
        if closed {
            match stack.last_mut() {
                Some(parent) => parent.children.push(el),
                None => root = Some(el),
            }
        } else {
            stack.push(el);
        }
        i = end + 1;
    }
    if let Some(open) = stack.last() {
        return Err(format!("<{}> is never closed", open.name));
    }
    root.ok_or_else(|| "no element".to_string())
}

fn parse_tag(tag: &str) -> std::result::Result<Element, String> {
    let tag = tag.trim();
    let name_end = tag.find(|c: char| c.is_whitespace()).unwrap_or(tag.len());
    let name = tag[..name_end].to_string();
    let mut rest = tag[name_end..].trim_start();
    let mut attrs = Vec::new();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or_else(|| format!("<{name}>: attribute without a value: {rest}"))?;
        let key = rest[..eq].trim().to_string();
        let after = rest[eq + 1..].trim_start();
        let quote = after.chars().next().filter(|c| *c == '"' || *c == '\'').ok_or_else(|| format!("<{name}>: attribute {key} is not quoted"))?;
        let close = after[1..].find(quote).ok_or_else(|| format!("<{name}>: attribute {key} is not terminated"))?;
        let value = after[1..1 + close].replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&");
        if attrs.iter().any(|(k, _)| *k == key) {
            return Err(format!("<{name}>: attribute {key} given twice"));
        }
        attrs.push((key, value));
        rest = after[close + 2..].trim_start();
    }
    Ok(Element { name, attrs, children: Vec::new() })
}

/// A parsed step.
#[derive(Clone, Debug)]
struct SimStep {
    kind: String,
    src: (char, i64),
    dst: (char, i64),
    cnt: usize,
    dep: Option<(usize, usize)>,
    hasdep: bool,
}

/// A parsed threadblock.
#[derive(Clone, Debug)]
struct SimTb {
    send: i64,
    recv: i64,
    chan: i64,
    steps: Vec<SimStep>,
}

/// A parsed gpu.
#[derive(Clone, Debug)]
struct SimGpu {
    chunks: [usize; 3],
    tbs: Vec<SimTb>,
}

/// A parsed algorithm.
struct Algo {
    coll: String,
    gpus: Vec<SimGpu>,
}

const ALGO_ATTRS: [&str; 10] = ["name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll", "inplace", "outofplace", "minBytes", "maxBytes"];
const STEP_ATTRS: [&str; 10] = ["s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep"];
const TYPES: [&str; 9] = ["s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop"];
const COLLS: [&str; 8] = ["allreduce", "allgather", "reducescatter", "reduce_scatter", "alltoall", "alltoallv", "broadcast", "reduce"];

fn sends(kind: &str) -> bool {
    matches!(kind, "s" | "rcs" | "rrs" | "rrcs")
}

fn receives(kind: &str) -> bool {
    matches!(kind, "r" | "rcs" | "rrs" | "rrc" | "rrcs")
}

fn buffer_index(b: char) -> Option<usize> {
    match b {
        'i' => Some(0),
        'o' => Some(1),
        's' => Some(2),
        _ => None,
    }
}

/// Reads an XML file into the algorithm, collecting every rule it breaks.
fn read_algo(xml: &str, problems: &mut Vec<String>) -> Option<Algo> {
    let root = match parse_xml(xml) {
        Ok(r) => r,
        Err(e) => {
            problems.push(format!("not well-formed XML: {e}"));
            return None;
        }
    };
    if root.name != "algo" {
        problems.push(format!("the root element is <{}>, not <algo>", root.name));
        return None;
    }
    for a in ALGO_ATTRS {
        if root.attr(a).is_none() {
            problems.push(format!("<algo> lacks the attribute {a}"));
        }
    }
    let int = |el: &Element, key: &str, at: &str, problems: &mut Vec<String>| -> Option<i64> {
        let v = el.attr(key)?;
        let n = v.parse::<i64>().ok();
        if n.is_none() {
            problems.push(format!("{at}: {key}=\"{v}\" is not an integer"));
        }
        n
    };
    if let Some(p) = root.attr("proto") {
        if !["Simple", "LL", "LL128"].contains(&p) {
            problems.push(format!("<algo>: proto=\"{p}\" is not Simple, LL or LL128"));
        }
    }
    let coll = root.attr("coll").unwrap_or("").to_string();
    if !coll.is_empty() && !COLLS.contains(&coll.as_str()) {
        problems.push(format!("<algo>: coll=\"{coll}\" is not a collective the reader knows"));
    }
    for key in ["inplace", "outofplace"] {
        if let Some(v) = int(&root, key, "<algo>", problems) {
            if !(0..=1).contains(&v) {
                problems.push(format!("<algo>: {key}=\"{v}\" is not 0 or 1"));
            }
        }
    }
    for key in ["nchunksperloop", "minBytes", "maxBytes"] {
        if int(&root, key, "<algo>", problems).is_some_and(|v| v < 0) {
            problems.push(format!("<algo>: {key} is negative"));
        }
    }
    let ngpus = int(&root, "ngpus", "<algo>", problems).unwrap_or(0).max(0) as usize;
    let nchannels = int(&root, "nchannels", "<algo>", problems).unwrap_or(0);
    let gpu_els: Vec<&Element> = root.children.iter().filter(|c| c.name == "gpu").collect();
    if gpu_els.len() != ngpus {
        problems.push(format!("<algo> declares ngpus=\"{ngpus}\" but has {} <gpu> elements", gpu_els.len()));
    }
    let mut gpus: Vec<Option<SimGpu>> = vec![None; gpu_els.len().max(ngpus)];
    for el in &gpu_els {
        let at = "<gpu>".to_string();
        for a in ["id", "i_chunks", "o_chunks", "s_chunks"] {
            if el.attr(a).is_none() {
                problems.push(format!("{at} lacks the attribute {a}"));
            }
        }
        let Some(id) = int(el, "id", &at, problems) else { continue };
        let at = format!("gpu {id}");
        if id < 0 || id as usize >= gpus.len() || gpus[id as usize].is_some() {
            problems.push(format!("{at}: the id is out of range or repeated"));
            continue;
        }
        let g = id as usize;
        let mut chunks = [0usize; 3];
        for (slot, key) in ["i_chunks", "o_chunks", "s_chunks"].iter().enumerate() {
            chunks[slot] = int(el, key, &at, problems).unwrap_or(0).max(0) as usize;
        }
        let mut tbs = Vec::new();
        let mut seen_send: HashSet<(i64, i64)> = HashSet::new();
        let mut seen_recv: HashSet<(i64, i64)> = HashSet::new();
        for (ti, tel) in el.children.iter().filter(|c| c.name == "tb").enumerate() {
            let at = format!("gpu {g} tb {ti}");
            for a in ["id", "send", "recv", "chan"] {
                if tel.attr(a).is_none() {
                    problems.push(format!("{at}: lacks the attribute {a}"));
                }
            }
            if int(tel, "id", &at, problems).is_some_and(|v| v != ti as i64) {
                problems.push(format!("{at}: id=\"{}\": threadblock ids must be dense from 0 in order", tel.attr("id").unwrap_or("")));
            }
            let send = int(tel, "send", &at, problems).unwrap_or(-1);
            let recv = int(tel, "recv", &at, problems).unwrap_or(-1);
            let chan = int(tel, "chan", &at, problems).unwrap_or(0);
            for (what, peer) in [("send", send), ("recv", recv)] {
                if peer != -1 && (peer < 0 || peer as usize >= ngpus) {
                    problems.push(format!("{at}: {what}=\"{peer}\" is neither -1 nor a gpu"));
                }
                if peer == g as i64 {
                    problems.push(format!("{at}: {what}=\"{peer}\" is the gpu itself"));
                }
            }
            if chan < 0 || chan >= nchannels {
                problems.push(format!("{at}: chan=\"{chan}\" is not below nchannels ({nchannels})"));
            }
            if send != -1 && !seen_send.insert((chan, send)) {
                problems.push(format!("{at}: a second threadblock sending to {send} on channel {chan}"));
            }
            if recv != -1 && !seen_recv.insert((chan, recv)) {
                problems.push(format!("{at}: a second threadblock receiving from {recv} on channel {chan}"));
            }
            let mut steps = Vec::new();
            for (si, sel) in tel.children.iter().filter(|c| c.name == "step").enumerate() {
                let at = format!("gpu {g} tb {ti} step {si}");
                for a in STEP_ATTRS {
                    if sel.attr(a).is_none() {
                        problems.push(format!("{at}: lacks the attribute {a}"));
                    }
                }
                if int(sel, "s", &at, problems).is_some_and(|v| v != si as i64) {
                    problems.push(format!("{at}: s=\"{}\": steps must be numbered from 0 in order", sel.attr("s").unwrap_or("")));
                }
                let kind = sel.attr("type").unwrap_or("nop").to_string();
                if !TYPES.contains(&kind.as_str()) {
                    problems.push(format!("{at}: type=\"{kind}\" is not a step type"));
                }
                let buf = |key: &str| sel.attr(key).and_then(|v| v.chars().next()).unwrap_or('?');
                let (sb, db) = (buf("srcbuf"), buf("dstbuf"));
                let so = int(sel, "srcoff", &at, problems).unwrap_or(-1);
                let dof = int(sel, "dstoff", &at, problems).unwrap_or(-1);
                let cnt = int(sel, "cnt", &at, problems).unwrap_or(0);
                let depid = int(sel, "depid", &at, problems).unwrap_or(-1);
                let deps = int(sel, "deps", &at, problems).unwrap_or(-1);
                let hasdep = int(sel, "hasdep", &at, problems).unwrap_or(0);
                if !(0..=1).contains(&hasdep) {
                    problems.push(format!("{at}: hasdep=\"{hasdep}\" is not 0 or 1"));
                }
                if kind != "nop" {
                    if !(1..=MAX_CNT as i64).contains(&cnt) {
                        problems.push(format!("{at}: cnt=\"{cnt}\" is not within 1..={MAX_CNT}"));
                    }
                    for (what, b, off) in [("src", sb, so), ("dst", db, dof)] {
                        match buffer_index(b) {
                            None => problems.push(format!("{at}: {what}buf=\"{b}\" is not i, o or s")),
                            Some(x) => {
                                if off < 0 || off + cnt.max(0) > chunks[x] as i64 {
                                    problems.push(format!("{at}: {what}off=\"{off}\" with cnt {cnt} is outside buffer {b} ({} chunks)", chunks[x]));
                                }
                            }
                        }
                    }
                }
                if sends(&kind) && send == -1 {
                    problems.push(format!("{at}: a {kind} step in a threadblock with send=\"-1\""));
                }
                if receives(&kind) && recv == -1 {
                    problems.push(format!("{at}: a {kind} step in a threadblock with recv=\"-1\""));
                }
                let dep = match (depid, deps) {
                    (-1, -1) => None,
                    (t, s) if t >= 0 && s >= 0 => Some((t as usize, s as usize)),
                    (t, s) => {
                        problems.push(format!("{at}: depid=\"{t}\" deps=\"{s}\" must both be -1 or both name a step"));
                        None
                    }
                };
                steps.push(SimStep { kind, src: (sb, so), dst: (db, dof), cnt: cnt.max(0) as usize, dep, hasdep: hasdep == 1 });
            }
            if steps.len() > MAX_STEPS {
                problems.push(format!("{at}: {} steps; the reader allows s below {MAX_STEPS} per threadblock", steps.len()));
            }
            tbs.push(SimTb { send, recv, chan, steps });
        }
        for chan in 0..nchannels.max(0) {
            let senders = tbs.iter().filter(|t| t.chan == chan && t.send != -1).count();
            let receivers = tbs.iter().filter(|t| t.chan == chan && t.recv != -1).count();
            if senders > MAX_TBS_PER_CHANNEL || receivers > MAX_TBS_PER_CHANNEL {
                problems
                    .push(format!("gpu {g} channel {chan}: {senders} sending and {receivers} receiving threadblocks; at most {MAX_TBS_PER_CHANNEL} of each"));
            }
        }
        // Dependency targets exist in another threadblock and announce themselves.
        for (ti, tb) in tbs.iter().enumerate() {
            for (si, st) in tb.steps.iter().enumerate() {
                let Some((t, s)) = st.dep else { continue };
                match tbs.get(t).and_then(|x| x.steps.get(s)) {
                    None => problems.push(format!("gpu {g} tb {ti} step {si}: depends on tb {t} step {s}, which does not exist")),
                    Some(target) if !target.hasdep => problems.push(format!("gpu {g} tb {ti} step {si}: depends on tb {t} step {s}, which lacks hasdep=\"1\"")),
                    Some(_) if t == ti => problems.push(format!("gpu {g} tb {ti} step {si}: depends on its own threadblock")),
                    Some(_) => {}
                }
            }
        }
        gpus[g] = Some(SimGpu { chunks, tbs });
    }
    if gpus.iter().any(Option::is_none) {
        problems.push("some gpu ids are missing".into());
        return None;
    }
    Some(Algo { coll, gpus: gpus.into_iter().map(|g| g.expect("checked")).collect() })
}

/// The reader's acceptance rules (docs/design/FORMATS.md "MSCCL XML"): every attribute present, dense
/// threadblock and step ids, one peer per direction (never the gpu itself), one threadblock per
/// (channel, peer, direction), at most 32 sending and 32 receiving threadblocks per channel,
/// 1 <= cnt <= 71 (except `nop`), fewer than 64 steps per threadblock, offsets within the
/// buffers, dependency targets that exist and carry `hasdep="1"`. Returns one message per broken
/// rule; empty means the reader accepts the file.
pub fn check_reader_rules(xml: &str) -> Vec<String> {
    let mut problems = Vec::new();
    read_algo(xml, &mut problems);
    problems
}

/// What a chunk holds: the input chunk it started as and the gpus whose contributions it
/// contains (one gpu for non-reducing collectives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkValue {
    /// The input chunk index it came from.
    pub offset: usize,
    /// Contributing gpus, sorted.
    pub gpus: Vec<usize>,
}

/// The outcome of a simulation that did not hang.
#[derive(Clone, Debug)]
pub struct SimResult {
    /// Steps executed (a fused receive-and-send counts once).
    pub steps: usize,
    /// Every gpu's output buffer at the end.
    pub outputs: Vec<Vec<Option<ChunkValue>>>,
    /// Output chunks that do not hold what the collective wants (empty: the collective is
    /// computed), and reductions that counted a contribution twice or mixed chunks.
    pub errors: Vec<String>,
}

impl SimResult {
    /// Whether every chunk ended where the collective wants it.
    pub fn is_correct(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Runs an XML file chunk by chunk (module docs) under rendezvous semantics: the k-th send of
/// gpu a's threadblock with `send=b` on channel c meets the k-th receive of gpu b's threadblock
/// with `recv=a` on channel c, and both complete together; steps of a threadblock run in order
/// and wait for their dependency. Fused steps (`rcs`, `rrs`, `rrcs`) receive first and then
/// send. Returns an error when the file breaks a reader rule, when a matched pair disagrees on
/// `cnt`, or when the gpus hang (with the cycle of threadblocks that wait on each other).
pub fn simulate(xml: &str) -> std::result::Result<SimResult, String> {
    let mut problems = Vec::new();
    let algo = read_algo(xml, &mut problems);
    if !problems.is_empty() {
        return Err(format!("the reader refuses the file: {}", problems.join("; ")));
    }
    let algo = algo.expect("no problems means parsed");
    let n = algo.gpus.len();
    let mut bufs: Vec<[Vec<Option<ChunkValue>>; 3]> =
        algo.gpus.iter().map(|g| [vec![None; g.chunks[0]], vec![None; g.chunks[1]], vec![None; g.chunks[2]]]).collect();
    for (g, b) in bufs.iter_mut().enumerate() {
        for (o, c) in b[0].iter_mut().enumerate() {
            *c = Some(ChunkValue { offset: o, gpus: vec![g] });
        }
    }
    let mut errors = Vec::new();
    // Program counter of every threadblock; `carry` holds what a fused step received and will
    // send on.
    let mut pc: Vec<Vec<usize>> = algo.gpus.iter().map(|g| vec![0; g.tbs.len()]).collect();
    let mut carry: Vec<Vec<Option<Vec<Option<ChunkValue>>>>> = algo.gpus.iter().map(|g| vec![None; g.tbs.len()]).collect();
    let partner: HashMap<(usize, i64, i64, bool), usize> = algo
        .gpus
        .iter()
        .enumerate()
        .flat_map(|(g, gpu)| {
            gpu.tbs.iter().enumerate().flat_map(move |(t, tb)| {
                let mut v = Vec::new();
                if tb.send != -1 {
                    v.push(((g, tb.send, tb.chan, true), t));
                }
                if tb.recv != -1 {
                    v.push(((g, tb.recv, tb.chan, false), t));
                }
                v
            })
        })
        .collect();
    let head = |pc: &Vec<Vec<usize>>, g: usize, t: usize| algo.gpus[g].tbs[t].steps.get(pc[g][t]);
    let ready = |pc: &Vec<Vec<usize>>, g: usize, st: &SimStep| st.dep.is_none_or(|(t, s)| pc[g][t] > s);
    let read = |b: &[Vec<Option<ChunkValue>>; 3], (buf, off): (char, i64), cnt: usize| -> Vec<Option<ChunkValue>> {
        let x = buffer_index(buf).expect("checked");
        b[x][off as usize..off as usize + cnt].to_vec()
    };
    let combine = |a: &[Option<ChunkValue>], b: &[Option<ChunkValue>], at: &str, errors: &mut Vec<String>| -> Vec<Option<ChunkValue>> {
        a.iter()
            .zip(b)
            .map(|(x, y)| match (x, y) {
                (Some(x), Some(y)) => {
                    if x.offset != y.offset {
                        errors.push(format!("{at}: reduces input chunk {} with input chunk {}", x.offset, y.offset));
                    }
                    if x.gpus.iter().any(|g| y.gpus.contains(g)) {
                        errors.push(format!("{at}: counts a contribution twice ({:?} and {:?})", x.gpus, y.gpus));
                    }
                    let mut gpus: Vec<usize> = x.gpus.iter().chain(&y.gpus).copied().collect();
                    gpus.sort_unstable();
                    gpus.dedup();
                    Some(ChunkValue { offset: x.offset, gpus })
                }
                _ => {
                    errors.push(format!("{at}: reduces an empty chunk"));
                    None
                }
            })
            .collect()
    };
    let mut executed = 0usize;
    loop {
        let mut progress = false;
        for g in 0..n {
            for t in 0..algo.gpus[g].tbs.len() {
                while let Some(st) = head(&pc, g, t) {
                    if !ready(&pc, g, st) {
                        break;
                    }
                    let at = format!("gpu {g} tb {t} step {}", pc[g][t]);
                    let tb = &algo.gpus[g].tbs[t];
                    match st.kind.as_str() {
                        "nop" => {}
                        "cpy" | "re" => {
                            let mut v = read(&bufs[g], st.src, st.cnt);
                            if st.kind == "re" {
                                v = combine(&v, &read(&bufs[g], st.dst, st.cnt), &at, &mut errors);
                            }
                            write(&mut bufs[g], st.dst, v);
                        }
                        kind if sends(kind) && (!receives(kind) || carry[g][t].is_some()) => {
                            // Rendezvous with the receiving threadblock of the peer.
                            let b = tb.send as usize;
                            let Some(&rt) = partner.get(&(b, g as i64, tb.chan, false)) else { break };
                            let Some(rs) = head(&pc, b, rt) else { break };
                            let waiting_recv = receives(&rs.kind) && carry[b][rt].is_none();
                            if !waiting_recv || !ready(&pc, b, rs) {
                                break;
                            }
                            if rs.cnt != st.cnt {
                                return Err(format!("{at} sends {} chunks to gpu {b}, whose matching tb {rt} step {} receives {}", st.cnt, pc[b][rt], rs.cnt));
                            }
                            let data = match carry[g][t].take() {
                                Some(d) => d,
                                None => read(&bufs[g], st.src, st.cnt),
                            };
                            let rat = format!("gpu {b} tb {rt} step {}", pc[b][rt]);
                            let reducing = matches!(rs.kind.as_str(), "rrc" | "rrs" | "rrcs");
                            let value = if reducing { combine(&read(&bufs[b], rs.src, rs.cnt), &data, &rat, &mut errors) } else { data };
                            if matches!(rs.kind.as_str(), "r" | "rrc" | "rcs" | "rrcs") {
                                write(&mut bufs[b], rs.dst, value.clone());
                            }
                            if sends(&rs.kind) {
                                carry[b][rt] = Some(value);
                            } else {
                                pc[b][rt] += 1;
                                executed += 1;
                            }
                        }
                        // A receive waits for its sender to come to it.
                        _ => break,
                    }
                    pc[g][t] += 1;
                    executed += 1;
                    progress = true;
                }
            }
        }
        if !progress {
            break;
        }
    }
    let blocked: Vec<(usize, usize)> =
        (0..n).flat_map(|g| (0..algo.gpus[g].tbs.len()).map(move |t| (g, t))).filter(|&(g, t)| head(&pc, g, t).is_some()).collect();
    if let Some(&start) = blocked.first() {
        return Err(hang_report(&algo, &pc, &carry, &partner, start));
    }
    let outputs: Vec<Vec<Option<ChunkValue>>> = bufs.into_iter().map(|[_, o, _]| o).collect();
    expect_outputs(&algo, &outputs, &mut errors);
    Ok(SimResult { steps: executed, outputs, errors })
}

fn write(b: &mut [Vec<Option<ChunkValue>>; 3], (buf, off): (char, i64), v: Vec<Option<ChunkValue>>) {
    let x = buffer_index(buf).expect("checked");
    for (i, c) in v.into_iter().enumerate() {
        b[x][off as usize + i] = c;
    }
}

/// Follows who waits for whom from a blocked threadblock until a threadblock repeats (or the
/// wait leads to one that cannot answer) and tells the story.
fn hang_report(
    algo: &Algo,
    pc: &[Vec<usize>],
    carry: &[Vec<Option<Vec<Option<ChunkValue>>>>],
    partner: &HashMap<(usize, i64, i64, bool), usize>,
    start: (usize, usize),
) -> String {
    let describe = |(g, t): (usize, usize)| -> String {
        let tb = &algo.gpus[g].tbs[t];
        match tb.steps.get(pc[g][t]) {
            None => format!("gpu {g} tb {t} (finished)"),
            Some(st) => {
                let what = if sends(&st.kind) && (!receives(&st.kind) || carry[g][t].is_some()) {
                    format!("{} to {}", st.kind, tb.send)
                } else if receives(&st.kind) {
                    format!("{} from {}", st.kind, tb.recv)
                } else {
                    st.kind.clone()
                };
                format!("gpu {g} tb {t} step {} {what} (channel {})", pc[g][t], tb.chan)
            }
        }
    };
    let mut path = vec![start];
    let mut text = String::from("deadlock: ");
    text += &describe(start);
    let mut cur = start;
    loop {
        let (g, t) = cur;
        let tb = &algo.gpus[g].tbs[t];
        let Some(st) = tb.steps.get(pc[g][t]) else {
            return text + ", which has finished: no partner will come";
        };
        let next = if let Some((dt, ds)) = st.dep.filter(|&(dt, ds)| pc[g][dt] <= ds) {
            text += &format!(" waits for its dependency tb {dt} step {ds}: ");
            Some((g, dt))
        } else if sends(&st.kind) && (!receives(&st.kind) || carry[g][t].is_some()) {
            let p = partner.get(&(tb.send as usize, g as i64, tb.chan, false)).map(|&x| (tb.send as usize, x));
            if p.is_none() {
                return text + &format!(" waits for a threadblock of gpu {} receiving from {g} on channel {}, which does not exist", tb.send, tb.chan);
            }
            text += " waits for its receiver ";
            p
        } else if receives(&st.kind) {
            let p = partner.get(&(tb.recv as usize, g as i64, tb.chan, true)).map(|&x| (tb.recv as usize, x));
            if p.is_none() {
                return text + &format!(" waits for a threadblock of gpu {} sending to {g} on channel {}, which does not exist", tb.recv, tb.chan);
            }
            text += " waits for its sender ";
            p
        } else {
            None
        };
        let Some(next) = next else { return text + " is stuck" };
        text += &describe(next);
        if path.contains(&next) {
            return text + ": a cycle";
        }
        path.push(next);
        cur = next;
    }
}

/// Compares the outputs with what the collective wants, by the layout of [`crate::lower::Layout`].
fn expect_outputs(algo: &Algo, outputs: &[Vec<Option<ChunkValue>>], errors: &mut Vec<String>) {
    let n = algo.gpus.len();
    let all: Vec<usize> = (0..n).collect();
    for (j, out) in outputs.iter().enumerate() {
        let gpu = &algo.gpus[j];
        for (x, got) in out.iter().enumerate() {
            let want = match algo.coll.as_str() {
                "alltoall" => {
                    let p = gpu.chunks[1] / n.max(1);
                    ChunkValue { offset: j * p + x % p.max(1), gpus: vec![x / p.max(1)] }
                }
                "allgather" => {
                    let p = gpu.chunks[0].max(1);
                    ChunkValue { offset: x % p, gpus: vec![x / p] }
                }
                "reducescatter" | "reduce_scatter" => ChunkValue { offset: j * gpu.chunks[1] + x, gpus: all.clone() },
                "allreduce" => ChunkValue { offset: x, gpus: all.clone() },
                other => {
                    errors.push(format!("coll {other}: the simulation does not know what it should compute"));
                    return;
                }
            };
            if got.as_ref() != Some(&want) {
                errors.push(format!("gpu {j} output chunk {x}: holds {got:?}, the collective wants {want:?}"));
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::lower::tests::torus_schedules;
    use crate::lower::{lower, ChannelSpread, LowerOptions, ThreadblockLayout};

    #[test]
    fn torus_schedules_export_run_and_place_every_chunk() {
        for (name, s) in torus_schedules() {
            // Spreading operations over channels keeps threadblocks short (the 64-step limit).
            for (channels, spread) in [(1, ChannelSpread::Transfers), (2, ChannelSpread::Operations)] {
                let programs = lower(&s, &LowerOptions { channels, spread, ..LowerOptions::default() }).unwrap();
                let xml = msccl_xml(&programs, &MscclOptions::default()).unwrap();
                let problems = check_reader_rules(&xml);
                assert!(problems.is_empty(), "{name}: {problems:?}");
                let sim = simulate(&xml).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(sim.is_correct(), "{name}: {:?}", &sim.errors[..sim.errors.len().min(5)]);
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
            for legacy in [false, true] {
                let xml = msccl_xml(&programs, &MscclOptions { legacy_coll_names: legacy, ..MscclOptions::default() }).unwrap();
                assert!(check_reader_rules(&xml).is_empty(), "{kind}: {:?}", check_reader_rules(&xml));
                let sim = simulate(&xml).unwrap_or_else(|e| panic!("{kind}: {e}"));
                assert!(sim.is_correct(), "{kind}: {:?}", sim.errors);
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
        assert_eq!(coll_name(CollectiveKind::ReduceScatter, false), "reducescatter");
        assert_eq!(coll_name(CollectiveKind::ReduceScatter, true), "reduce_scatter");
        // A per-rank threadblock cannot be written.
        let single = lower(s, &LowerOptions { threadblocks: ThreadblockLayout::PerRank, ..LowerOptions::default() }).unwrap();
        assert!(msccl_xml(&single, &MscclOptions::default()).is_err());
    }

    const TWO: &str = r#"<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="alltoall" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="FIRST0" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="SECOND0" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="FIRST1" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="SECOND1" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>"#;

    /// Two gpus exchanging one chunk each in one threadblock per gpu: `first0` and `first1`
    /// are the types of their first steps.
    fn two(first0: &str, first1: &str) -> String {
        let (second0, second1) = (if first0 == "s" { "r" } else { "s" }, if first1 == "s" { "r" } else { "s" });
        TWO.replace("FIRST0", first0).replace("SECOND0", second0).replace("FIRST1", first1).replace("SECOND1", second1)
    }

    #[test]
    fn hand_written_exchanges_run_or_hang() {
        let ok = simulate(&two("s", "r")).unwrap();
        assert!(ok.is_correct(), "{:?}", ok.errors);
        let e = simulate(&two("s", "s")).unwrap_err();
        assert_eq!(
            e,
            "deadlock: gpu 0 tb 0 step 0 s to 1 (channel 0) waits for its receiver gpu 1 tb 0 step 0 s to 0 (channel 0) waits for its receiver gpu 0 tb 0 step 0 s to 1 (channel 0): a cycle"
        );
        assert!(simulate(&two("r", "r")).unwrap_err().contains("a cycle"));
    }

    #[test]
    fn reader_rules_catch_what_the_reader_refuses() {
        let bad = two("s", "r")
            .replace(r#"minBytes="0" "#, "")
            .replace(r#"<tb id="1" send="-1" recv="-1" chan="0">"#, r#"<tb id="2" send="0" recv="-1" chan="0">"#)
            .replace(r#"srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1""#, r#"srcoff="1" dstbuf="o" dstoff="1" cnt="72" depid="0" deps="0""#);
        let problems = check_reader_rules(&bad);
        let all = problems.join("\n");
        for want in [
            "<algo> lacks the attribute minBytes",
            "gpu 0 tb 1: id=\"2\": threadblock ids must be dense",
            "gpu 0 tb 1: send=\"0\" is the gpu itself",
            "cnt=\"72\" is not within 1..=71",
            "srcoff=\"1\" with cnt 72 is outside buffer i",
            "depends on tb 0 step 0, which lacks hasdep=\"1\"",
        ] {
            assert!(all.contains(want), "missing {want:?} in\n{all}");
        }
        assert!(check_reader_rules("<algo").iter().any(|p| p.contains("not well-formed")));
    }

    #[test]
    fn misplaced_chunks_are_reported() {
        // gpu 1 writes what it receives to the wrong output chunk.
        let xml = two("s", "r").replace(r#"type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0""#, r#"type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1""#);
        let sim = simulate(&xml).unwrap();
        assert!(!sim.is_correct());
        assert!(sim.errors.iter().any(|e| e.starts_with("gpu 1 output chunk")), "{:?}", sim.errors);
    }
}
