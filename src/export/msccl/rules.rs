//! The reader's acceptance rules, and what the runtime would hang or corrupt memory on, for one
//! runtime (docs/design/FORMATS.md "MSCCL XML"). Each message names the element (gpu, tb and step
//! ids), the attribute and its value.
//!
//! Beyond what the reader itself refuses, these are errors because the runtime then misbehaves:
//! an offset range past the buffer (the reader checks only the first chunk), a channel at or
//! above `nchannels` (never connected), two threadblocks on one (channel, peer, direction)
//! (they would share one connection), a gpu id missing (that rank runs nothing), a dependency on
//! a threadblock or step that never signals, an offset range past the collective's buffer where
//! `i_chunks`/`o_chunks` declare more (the older runtime also refuses a declared count other than
//! the buffer's). `cnt="0"` is refused too: the current runtime skips such a step, the older one
//! indexes an array with `cnt - 1`.

use super::model::{Coll, Dependency, Gpu, Problems, Program, Runtime, StepKind, Threadblock};
use crate::lower::Buffer;
use std::collections::HashMap;

/// The most chunks one step may move (`MSCCL_MAX_COUNT` - 1).
pub const MAX_CNT: i64 = 71;
/// Sending (and receiving) threadblocks per channel.
const MAX_TBS_PER_CHANNEL: usize = 32;
/// Channels the runtime has (`MAXCHANNELS`): `nchannels` must be within 1..=32.
pub const MAX_CHANNELS: i64 = 32;
/// Elements the reader stores per gpu (`MAX_NODES`): the `<algo>`, every `<gpu>`, and that gpu's
/// threadblocks and steps.
const MAX_NODES: usize = 4096;
/// Children the reader stores per element (`MAX_SUBS`).
const MAX_CHILDREN: usize = 1024;
/// The older runtime's `maxBytes` when the file gives none (128 MiB).
pub const LEGACY_DEFAULT_MAX_BYTES: i64 = 1 << 27;
/// The most chunks one gpu's steps can reach ([`MAX_NODES`] steps of [`MAX_CNT`] chunks): a
/// larger `nchunksperloop`, `i_chunks`, `o_chunks` or `s_chunks` names chunks that no file the
/// reader stores can move, and is refused before anything is sized by it.
pub const MAX_CHUNKS: i64 = MAX_NODES as i64 * MAX_CNT;

/// The reader's error for a gpu with more elements than it stores (the `<algo>`, every `<gpu>`,
/// and the gpu's `tbs` threadblocks and `steps` steps), or `None` where they fit; `at_least` when
/// the count is a lower bound. More channels only add threadblocks, so the exporter stops trying
/// them at this error.
fn over_elements(gpu: impl std::fmt::Display, gpus: usize, tbs: usize, steps: usize, at_least: bool) -> Option<String> {
    let stored = 1 + gpus + tbs + steps;
    (stored > MAX_NODES).then(|| {
        let at_least = if at_least { " at least" } else { "" };
        format!(
            "gpu {gpu}: the reader would store {stored} elements for this gpu{at_least} (<algo>, every <gpu>, its <tb>s and <step>s); it stores at most {MAX_NODES}"
        )
    })
}

/// The first gpu of lowered programs that holds more elements than the reader stores however
/// they are written (each operation is one `<step>` at least), with the reader's error; checked
/// before the XML is built, which for 512 gpus takes gigabytes.
pub fn elements_over_limit(programs: &crate::lower::Programs) -> Option<String> {
    let gpus = programs.ranks.len();
    programs.ranks.iter().enumerate().find_map(|(g, r)| over_elements(g, gpus, r.threadblocks.len(), r.threadblocks.iter().map(|t| t.ops.len()).sum(), true))
}

/// The first gpu of a program with more elements than the reader stores, with the reader's
/// error (one of [`check_program`]'s).
pub fn program_over_elements(p: &Program) -> Option<String> {
    p.gpus.iter().find_map(|gpu| gpu_over_elements(p, gpu))
}

fn gpu_over_elements(p: &Program, gpu: &Gpu) -> Option<String> {
    over_elements(gpu.id, p.gpus.len(), gpu.tbs.len(), gpu.tbs.iter().map(|t| t.steps.len()).sum(), false)
}

/// Checks a program against `runtime`'s reader and runtime (module docs).
pub fn check_program(p: &Program, runtime: Runtime) -> Problems {
    let line = p.line;
    let mut out = Problems::default();
    algo(p, runtime, &mut out);
    let ngpus = p.ngpus.unwrap_or(0);
    // The reader stores at most MAX_CHILDREN gpus: beyond that the count is the one error, not
    // every gpu that is missing.
    let too_many = ngpus > MAX_CHILDREN as i64;
    if too_many {
        out.errors.push(format!("line {line}: <algo>: ngpus=\"{ngpus}\" is more gpus than the reader stores (at most {MAX_CHILDREN} <gpu> elements)"));
    }
    let mut seen = vec![false; usize::try_from(ngpus).unwrap_or(0).min(MAX_CHILDREN)];
    for gpu in &p.gpus {
        match usize::try_from(gpu.id).ok().filter(|&g| g < seen.len()) {
            Some(g) if seen[g] => out.errors.push(format!("line {}: gpu {}: a second <gpu> with this id", gpu.line, gpu.id)),
            Some(g) => seen[g] = true,
            None => out.errors.push(format!("line {}: gpu {}: id=\"{}\" is not a gpu of ngpus=\"{ngpus}\"", gpu.line, gpu.id, gpu.id)),
        }
        gpu_rules(p, gpu, runtime, &mut out);
    }
    for (g, _) in seen.iter().enumerate().filter(|(_, s)| !**s && !too_many) {
        out.errors.push(format!("gpu {g} is missing: that rank would run nothing and its peers wait for it forever"));
    }
    if p.gpus.len() > MAX_CHILDREN {
        out.errors.push(format!("line {line}: <algo>: {} gpus; the reader stores at most {MAX_CHILDREN} children of an element", p.gpus.len()));
    }
    out
}

fn algo(p: &Program, runtime: Runtime, out: &mut Problems) {
    let line = p.line;
    let required: &[(&str, bool)] = match runtime {
        Runtime::Executor => &[
            ("nchunksperloop", p.nchunksperloop.is_some()),
            ("nchannels", p.nchannels.is_some()),
            ("ngpus", p.ngpus.is_some()),
            ("proto", p.proto.is_some()),
            ("coll", p.coll.is_some()),
            ("minBytes", p.min_bytes.is_some()),
            ("maxBytes", p.max_bytes.is_some()),
            ("inplace", p.inplace.is_some()),
            ("outofplace", p.outofplace.is_some()),
        ],
        Runtime::Legacy => &[
            ("name", p.name.is_some()),
            ("ngpus", p.ngpus.is_some()),
            ("nchunksperloop", p.nchunksperloop.is_some()),
            ("nchannels", p.nchannels.is_some()),
            ("proto", p.proto.is_some()),
            ("coll", p.coll.is_some()),
            ("inplace", p.inplace.is_some()),
        ],
    };
    for (attr, present) in required {
        if !present {
            out.errors.push(format!("line {}: <algo> lacks the attribute {attr}", p.line));
        }
    }
    if let Some((text, None)) = &p.proto {
        out.errors.push(format!("line {line}: <algo>: proto=\"{text}\" is not Simple, LL or LL128"));
    }
    coll(p, runtime, out);
    if p.ngpus.is_some_and(|n| n < 1) {
        out.errors.push(format!("line {line}: <algo>: ngpus=\"{}\" is not a positive number", p.ngpus.unwrap_or(0)));
    }
    if let Some(c) = p.nchannels.filter(|&c| !(1..=MAX_CHANNELS).contains(&c)) {
        out.errors.push(format!("line {line}: <algo>: nchannels=\"{c}\" is not within 1..={MAX_CHANNELS}"));
    }
    if let Some(n) = p.nchunksperloop.filter(|&n| n < 1) {
        out.errors.push(format!("line {line}: <algo>: nchunksperloop=\"{n}\" is not a positive number"));
    }
    if let Some(n) = p.nchunksperloop.filter(|&n| n > MAX_CHUNKS) {
        out.errors.push(too_many_chunks(&format!("line {line}: <algo>"), "nchunksperloop", n));
    }
    placement(p, runtime, out);
    bytes(p, runtime, out);
    match (runtime, p.nthreads) {
        (Runtime::Legacy, Some(t)) if t % 32 != 0 => out.errors.push(format!("line {line}: <algo>: nthreads=\"{t}\" is not a multiple of 32")),
        (Runtime::Executor, Some(t)) => out.warnings.push(format!("line {line}: <algo>: nthreads=\"{t}\": {runtime} ignores it")),
        _ => {}
    }
}

fn coll(p: &Program, runtime: Runtime, out: &mut Problems) {
    let line = p.line;
    let Some((text, parsed)) = &p.coll else { return };
    match parsed {
        None => out.errors.push(format!("line {line}: <algo>: coll=\"{text}\" is not a collective {runtime} knows")),
        Some(c) => match c.spelled(runtime) {
            Some(s) if s == text => {}
            Some(s) => out.errors.push(format!("line {line}: <algo>: coll=\"{text}\": {runtime} spells this collective {s}")),
            None => out.errors.push(format!("line {line}: <algo>: coll=\"{text}\" is not a collective {runtime} knows")),
        },
    }
    let (Some(c), Some(n), Some(r)) = (p.collective(), p.nchunksperloop, p.ngpus) else { return };
    if matches!(c, Coll::AllGather | Coll::ReduceScatter | Coll::AllToAll) && r > 0 && n > 0 && n % r != 0 {
        out.errors
            .push(format!("line {line}: <algo>: nchunksperloop=\"{n}\" is not a multiple of ngpus=\"{r}\": {text} needs a whole number of chunks per gpu"));
    }
}

fn placement(p: &Program, runtime: Runtime, out: &mut Problems) {
    let line = p.line;
    let inplace = p.inplace.is_some_and(|v| v != 0);
    let outofplace = match runtime {
        Runtime::Executor => p.outofplace.is_some_and(|v| v != 0),
        Runtime::Legacy => !inplace,
    };
    if runtime == Runtime::Executor && p.inplace.is_some() && p.outofplace.is_some() && !inplace && !outofplace {
        out.errors.push(format!("line {line}: <algo>: inplace=\"0\" and outofplace=\"0\": the runtime never picks this algorithm"));
    }
    if runtime == Runtime::Legacy && p.outofplace.is_some() {
        out.warnings.push(format!("line {line}: <algo>: outofplace: {runtime} ignores it (inplace alone decides)"));
    }
}

fn bytes(p: &Program, runtime: Runtime, out: &mut Problems) {
    let line = p.line;
    match runtime {
        Runtime::Executor => {
            if let (Some(lo), Some(hi)) = (p.min_bytes, p.max_bytes) {
                if hi != 0 && hi < lo {
                    out.errors.push(format!("line {line}: <algo>: maxBytes=\"{hi}\" is below minBytes=\"{lo}\": the runtime never picks this algorithm"));
                }
            }
        }
        Runtime::Legacy => {
            let lo = p.min_bytes.unwrap_or(0);
            let hi = p.max_bytes.unwrap_or(LEGACY_DEFAULT_MAX_BYTES);
            if lo < 0 || hi < 0 {
                out.errors.push(format!("line {line}: <algo>: minBytes=\"{lo}\" maxBytes=\"{hi}\": the older runtime wants 0 <= minBytes <= maxBytes"));
            } else if lo >= hi {
                // It picks a file for minBytes <= bytes < maxBytes: an empty range (maxBytes="0"
                // among them) is a file it never runs, as the executor's empty selections are.
                let attrs = match p.max_bytes {
                    Some(_) => format!("minBytes=\"{lo}\" maxBytes=\"{hi}\""),
                    None => format!("minBytes=\"{lo}\" (maxBytes {hi} by default)"),
                };
                out.errors.push(format!(
                    "line {line}: <algo>: {attrs}: the runtime never picks this algorithm ({runtime} picks it for minBytes <= bytes < maxBytes)"
                ));
            } else if p.max_bytes.is_none() {
                out.warnings
                    .push(format!("line {line}: <algo> has no maxBytes: {runtime} picks it only for buffers below {LEGACY_DEFAULT_MAX_BYTES} bytes (128 MiB)"))
            }
        }
    }
}

/// The error for a chunk count above [`MAX_CHUNKS`].
fn too_many_chunks(at: &str, attr: &str, n: i64) -> String {
    format!("{at}: {attr}=\"{n}\" is more chunks than one gpu's steps can reach (at most {MAX_NODES} steps of {MAX_CNT} chunks = {MAX_CHUNKS})")
}

/// The chunks of a gpu's input and output buffers that the runtime has, for the collectives
/// whose buffer sizes follow from `coll`, `ngpus` and `nchunksperloop`.
pub fn buffer_chunks(p: &Program) -> Option<[usize; 2]> {
    let (n, r) = (usize::try_from(p.nchunksperloop?).ok()?, usize::try_from(p.ngpus?).ok().filter(|&r| r > 0)?);
    Some(match p.collective()? {
        Coll::AllReduce | Coll::AllToAll => [n, n],
        Coll::AllGather => [n / r, n],
        Coll::ReduceScatter => [n, n / r],
        _ => return None,
    })
}

fn gpu_rules(p: &Program, gpu: &Gpu, runtime: Runtime, out: &mut Problems) {
    let at = format!("line {}: gpu {}", gpu.line, gpu.id);
    for (b, v) in [Buffer::Input, Buffer::Output, Buffer::Scratch].into_iter().zip(gpu.chunks) {
        if v < 0 {
            out.errors.push(format!("{at}: {}_chunks=\"{v}\" is negative", b.short()));
        } else if v > MAX_CHUNKS {
            out.errors.push(too_many_chunks(&at, &format!("{}_chunks", b.short()), v));
        }
    }
    chunk_counts(p, gpu, runtime, out);
    let ids: Vec<i64> = gpu.tbs.iter().map(|t| t.id).collect();
    for (k, tb) in gpu.tbs.iter().enumerate() {
        let name = format!("gpu {} tb {}", gpu.id, tb.id);
        let tat = format!("line {}: {name}", tb.line);
        if tb.id < 0 || tb.id as usize >= runtime.max_threadblocks() {
            out.errors.push(format!("{tat}: id=\"{}\" is not within 0..{}", tb.id, runtime.max_threadblocks()));
        } else if ids[..k].contains(&tb.id) {
            out.errors.push(format!("{tat}: a second threadblock with this id"));
        } else if tb.id as usize >= gpu.tbs.len() {
            out.errors.push(format!(
                "{tat}: id=\"{}\", but the gpu has {} threadblocks: ids must be 0 to {} without gaps",
                tb.id,
                gpu.tbs.len(),
                gpu.tbs.len() - 1
            ));
        }
        tb_rules(p, gpu, tb, &name, runtime, out);
    }
    channels(gpu, &at, out);
    out.errors.extend(gpu_over_elements(p, gpu));
    if gpu.tbs.len() > MAX_CHILDREN {
        out.errors.push(format!("{at}: {} threadblocks; the reader stores at most {MAX_CHILDREN} children of an element", gpu.tbs.len()));
    }
}

/// `i_chunks` and `o_chunks` against the buffers the collective has (the older runtime).
fn chunk_counts(p: &Program, gpu: &Gpu, runtime: Runtime, out: &mut Problems) {
    let Some(real) = buffer_chunks(p) else { return };
    let (name, n) = (p.coll.as_ref().map_or("", |(t, _)| t.as_str()), p.nchunksperloop.unwrap_or(0));
    for (slot, attr) in [(0, "i_chunks"), (1, "o_chunks")] {
        let declared = gpu.chunks[slot];
        // The older reader wants the declared count to be the buffer's (0: unused); the current
        // one only bounds the offsets by it (those past the collective's buffer are refused
        // by `step_rules`).
        if runtime == Runtime::Legacy && declared != 0 && declared != real[slot] as i64 {
            out.errors.push(format!(
                "line {}: gpu {}: {attr}=\"{declared}\", but {name} with nchunksperloop=\"{n}\" gives each gpu {} chunks there",
                gpu.line, gpu.id, real[slot]
            ));
        }
    }
}

fn channels(gpu: &Gpu, at: &str, out: &mut Problems) {
    let mut per: HashMap<(i64, bool, i64), i64> = HashMap::new();
    let mut count: HashMap<(i64, bool), usize> = HashMap::new();
    for tb in &gpu.tbs {
        for (sending, peer) in [(true, tb.send), (false, tb.recv)] {
            if peer < 0 {
                continue;
            }
            if let Some(first) = per.insert((tb.chan, sending, peer), tb.id) {
                let dir = if sending { "sending to" } else { "receiving from" };
                out.errors.push(format!(
                    "line {}: gpu {} tb {}: a second threadblock {dir} gpu {peer} on channel {} (tb {first} is the first): both would use one connection",
                    tb.line, gpu.id, tb.id, tb.chan
                ));
            }
            *count.entry((tb.chan, sending)).or_default() += 1;
        }
    }
    let mut over: Vec<_> = count.into_iter().filter(|&(_, c)| c > MAX_TBS_PER_CHANNEL).collect();
    over.sort();
    for ((chan, sending), c) in over {
        let dir = if sending { "sending" } else { "receiving" };
        out.errors.push(format!("{at} channel {chan}: {c} {dir} threadblocks; at most {MAX_TBS_PER_CHANNEL}"));
    }
}

/// `name`: `gpu G tb T`; every message starts with the line of the element it is about.
fn tb_rules(p: &Program, gpu: &Gpu, tb: &Threadblock, name: &str, runtime: Runtime, out: &mut Problems) {
    let at = format!("line {}: {name}", tb.line);
    let ngpus = p.ngpus.unwrap_or(0);
    for (attr, peer) in [("send", tb.send), ("recv", tb.recv)] {
        if peer == gpu.id {
            out.errors.push(format!("{at}: {attr}=\"{peer}\" is the gpu itself"));
        } else if peer != -1 && !(0..ngpus).contains(&peer) {
            out.errors.push(format!("{at}: {attr}=\"{peer}\" is neither -1 nor a gpu of ngpus=\"{ngpus}\""));
        }
    }
    if let Some(n) = p.nchannels.filter(|&n| !(0..n).contains(&tb.chan)) {
        out.errors.push(format!("{at}: chan=\"{}\" is not within 0..{n} (nchannels=\"{n}\"): the runtime connects only those channels", tb.chan));
    }
    if tb.steps.len() > runtime.max_steps() {
        out.errors.push(format!("{at}: {} steps; {runtime} runs at most {} per threadblock", tb.steps.len(), runtime.max_steps()));
    }
    let mut pending_nops = 0;
    for (pos, st) in tb.steps.iter().enumerate() {
        let sat = format!("line {}: {name} step {}", st.line, st.s);
        if !(0..runtime.max_steps() as i64).contains(&st.s) {
            out.errors.push(format!("{sat}: s=\"{}\" is not within 0..{}", st.s, runtime.max_steps()));
        } else if st.s != pos as i64 {
            out.warnings.push(format!(
                "{sat}: s=\"{}\" is the step at position {pos}: the runtime runs steps in document order and counts dependencies by position",
                st.s
            ));
        }
        step_rules(gpu, tb, pos, (&sat, buffer_chunks(p)), out);
        if let Some(d) = st.dep {
            dependency(gpu, d, &sat, out);
        }
        if st.kind == StepKind::Nop {
            pending_nops += usize::from(st.dep.is_some());
            if st.hasdep == 1 {
                out.warnings
                    .push(format!("{sat}: hasdep=\"1\" on a nop: the runtime never signals a nop, so waits on it end only at a later step with hasdep=\"1\""));
            }
        } else {
            if pending_nops > 0 && st.dep.is_none() {
                out.errors.push(format!("{sat}: follows nop steps with dependencies but has no depid itself: the reader refuses this"));
            }
            pending_nops = 0;
        }
    }
    if pending_nops > 0 {
        out.warnings.push(format!("{at}: ends with nop steps whose dependencies the runtime drops (a nop only adds waits to the step after it)"));
    }
}

/// One step's rules; `real` the input and output chunks the collective gives each gpu, where
/// they follow from the `<algo>`: an offset range is refused past them as past its buffer's
/// declared count (a declared count may be larger: the current runtime only bounds the offsets
/// by it, and reads or writes memory past the buffer beyond the real one).
fn step_rules(gpu: &Gpu, tb: &Threadblock, pos: usize, (at, real): (&str, Option<[usize; 2]>), out: &mut Problems) {
    let st = &tb.steps[pos];
    if st.kind == StepKind::Nop {
        return;
    }
    if !(1..=MAX_CNT).contains(&st.cnt) {
        out.errors.push(format!("{at}: cnt=\"{}\" is not within 1..={MAX_CNT}", st.cnt));
    }
    if !(0..=1).contains(&st.hasdep) {
        out.errors.push(format!("{at}: hasdep=\"{}\" is not 0 or 1", st.hasdep));
    }
    if st.kind.sends() && tb.send < 0 {
        out.errors.push(format!("{at}: type=\"{}\" sends, but its threadblock has send=\"{}\"", st.kind, tb.send));
    }
    if st.kind.receives() && tb.recv < 0 {
        out.errors.push(format!("{at}: type=\"{}\" receives, but its threadblock has recv=\"{}\"", st.kind, tb.recv));
    }
    let cnt = st.cnt.max(1);
    for (used, which, place) in [(st.kind.reads_src(), "src", st.src), (st.kind.writes_dst(), "dst", st.dst)] {
        let declared = gpu.declared(place.buffer);
        let end = place.offset.checked_add(cnt).filter(|_| place.offset >= 0);
        let (buf, off) = (place.buffer.short(), place.offset);
        if used && end.is_none_or(|end| end > declared) {
            out.errors
                .push(format!("{at}: {which}buf=\"{buf}\" {which}off=\"{off}\" with cnt=\"{}\" is outside the buffer ({buf}_chunks=\"{declared}\")", st.cnt));
        } else if let (true, Some(end), Some(slot)) = (used, end, [Buffer::Input, Buffer::Output].iter().position(|&b| b == place.buffer)) {
            if let Some(real) = real.map(|r| r[slot] as i64).filter(|&r| end > r && declared > r) {
                out.errors.push(format!(
                    "{at}: {which}buf=\"{buf}\" {which}off=\"{off}\" with cnt=\"{}\" is outside the buffer: {buf}_chunks=\"{declared}\" allows it, but the collective gives each gpu {real} chunks there",
                    st.cnt
                ));
            }
        }
    }
}

fn dependency(gpu: &Gpu, d: Dependency, at: &str, out: &mut Problems) {
    let Some(target) = gpu.tbs.iter().find(|t| t.id == d.tb) else {
        out.errors.push(format!("{at}: depid=\"{}\" names no threadblock of the gpu: it would wait forever", d.tb));
        return;
    };
    if d.step < 0 {
        out.errors.push(format!("{at}: depid=\"{}\" with deps=\"{}\": deps must name a step", d.tb, d.step));
        return;
    }
    match target.signal_for(d.step) {
        None => out.errors.push(format!(
            "{at}: waits for tb {} step {} (depid=\"{}\" deps=\"{}\"), but no step of tb {} from there on has hasdep=\"1\": it would wait forever",
            d.tb, d.step, d.tb, d.step, d.tb
        )),
        Some(pos) if target.counters()[pos] != Some(d.step) => out.warnings.push(format!(
            "{at}: waits for tb {} step {}, which does not signal (no hasdep=\"1\", or a nop): it waits until tb {} step {} finishes",
            d.tb, d.step, d.tb, target.steps[pos].s
        )),
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::read_program;
    use super::*;

    /// Two gpus, each with one threadblock that sends one chunk to the other and then receives.
    const EXCHANGE: &str = r#"<algo name="x" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="alltoall" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
"#;

    fn problems(xml: &str) -> Problems {
        let r = read_program(xml);
        let p = r.program.unwrap_or_else(|| panic!("{:?}", r.problems));
        check_program(&p, p.runtime)
    }

    #[test]
    fn a_clean_file_passes() {
        assert_eq!(problems(EXCHANGE), Problems::default());
    }

    /// Every injected defect is caught, with a message naming the element, attribute and value.
    #[test]
    fn injected_defects_are_caught() {
        let first_tb = r#"<tb id="0" send="1" recv="1" chan="0">"#;
        for (from, to, want) in [
            (r#" minBytes="0""#, "", "line 1: <algo> lacks the attribute minBytes"),
            (r#"proto="Simple""#, r#"proto="Fast""#, "line 1: <algo>: proto=\"Fast\" is not Simple, LL or LL128"),
            (r#"coll="alltoall""#, r#"coll="reduce_scatter""#, "<algo>: coll=\"reduce_scatter\": msccl-executor-nccl spells this collective reducescatter"),
            (r#"inplace="0" outofplace="1""#, r#"inplace="0" outofplace="0""#, "the runtime never picks this algorithm"),
            (first_tb, r#"<tb id="1" send="1" recv="1" chan="0">"#, "line 3: gpu 0 tb 1: id=\"1\", but the gpu has 1 threadblocks"),
            (first_tb, r#"<tb id="0" send="0" recv="1" chan="0">"#, "line 3: gpu 0 tb 0: send=\"0\" is the gpu itself"),
            (first_tb, r#"<tb id="0" send="1" recv="1" chan="1">"#, "line 3: gpu 0 tb 0: chan=\"1\" is not within 0..1 (nchannels=\"1\")"),
            (
                r#"srcoff="1" dstbuf="o" dstoff="0" cnt="1""#,
                r#"srcoff="1" dstbuf="o" dstoff="0" cnt="72""#,
                "line 4: gpu 0 tb 0 step 0: cnt=\"72\" is not within 1..=71",
            ),
            (
                r#"srcoff="1" dstbuf="o" dstoff="0" cnt="1""#,
                r#"srcoff="1" dstbuf="o" dstoff="0" cnt="2""#,
                "gpu 0 tb 0 step 0: srcbuf=\"i\" srcoff=\"1\" with cnt=\"2\" is outside the buffer (i_chunks=\"2\")",
            ),
            (
                r#"cnt="1" depid="-1" deps="-1" hasdep="0"/>"#,
                r#"cnt="1" depid="-1" deps="-1" hasdep="2"/>"#,
                "line 4: gpu 0 tb 0 step 0: hasdep=\"2\" is not 0 or 1",
            ),
            (r#"<gpu id="1""#, r#"<gpu id="0""#, "gpu 1 is missing"),
        ] {
            assert!(EXCHANGE.contains(from), "{from}");
            let p = problems(&EXCHANGE.replacen(from, to, 1));
            assert!(p.errors.iter().any(|e| e.contains(want)), "{want}: {:?}", p.errors);
        }
    }

    /// A declared `i_chunks` above the collective's: the older runtime refuses it, the current
    /// one only bounds the offsets by it (docs/design/FORMATS.md, MSCCL XML), and an offset past
    /// the collective's buffer is refused there as outside it.
    #[test]
    fn declared_chunks_above_the_buffer_bound_only_the_offsets_for_the_current_runtime() {
        let larger = EXCHANGE.replacen(r#"<gpu id="0" i_chunks="2""#, r#"<gpu id="0" i_chunks="3""#, 1);
        assert_eq!(problems(&larger), Problems::default());
        let past = larger.replacen(r#"type="s" srcbuf="i" srcoff="1""#, r#"type="s" srcbuf="i" srcoff="2""#, 1);
        let want = r#"line 4: gpu 0 tb 0 step 0: srcbuf="i" srcoff="2" with cnt="1" is outside the buffer: i_chunks="3" allows it, but the collective gives each gpu 2 chunks there"#;
        assert_eq!(problems(&past).errors, [want]);
        let legacy = larger.replacen(r#" outofplace="1""#, "", 1);
        let want = r#"line 2: gpu 0: i_chunks="3", but alltoall with nchunksperloop="2" gives each gpu 2 chunks there"#;
        assert!(problems(&legacy).errors.iter().any(|e| e == want), "{:?}", problems(&legacy).errors);
    }

    /// Counts and offsets at the ends of what the runtime reads (a 32-bit int) are refused by
    /// name, with no overflow on the way; past them the value wraps as the runtime's does.
    #[test]
    fn huge_counts_and_offsets_are_refused_by_name() {
        for (from, to, want) in [
            (r#"srcoff="1""#, r#"srcoff="2147483647""#, r#"srcbuf="i" srcoff="2147483647" with cnt="1" is outside the buffer"#),
            (r#"srcoff="1""#, r#"srcoff="9223372036854775807""#, r#"srcbuf="i" srcoff="-1" with cnt="1" is outside the buffer"#),
            (r#"s_chunks="0""#, r#"s_chunks="2147483647""#, r#"gpu 0: s_chunks="2147483647" is more chunks than one gpu's steps can reach"#),
            (r#"s_chunks="0""#, r#"s_chunks="2147483648""#, r#"gpu 0: s_chunks="-2147483648" is negative"#),
            (r#"i_chunks="2""#, r#"i_chunks="2147483647""#, r#"gpu 0: i_chunks="2147483647" is more chunks"#),
            (r#"nchunksperloop="2""#, r#"nchunksperloop="290817""#, r#"<algo>: nchunksperloop="290817" is more chunks"#),
            (r#"ngpus="2""#, r#"ngpus="2147483647""#, r#"<algo>: ngpus="2147483647" is more gpus than the reader stores"#),
        ] {
            let p = problems(&EXCHANGE.replacen(from, to, 1));
            assert!(p.errors.iter().any(|e| e.contains(want)), "{want}: {:?}", p.errors);
            assert!(p.errors.len() < 2000, "{}", p.errors.len());
        }
    }

    /// More gpus than the reader stores is one error, not one per missing gpu (a tester's
    /// ngpus="1025" listed 1021 missing gpus before it).
    #[test]
    fn too_many_gpus_is_one_error_not_a_missing_gpu_each() {
        for ngpus in [1025, 2147483647] {
            let p = problems(&EXCHANGE.replacen(r#"ngpus="2""#, &format!(r#"ngpus="{ngpus}""#), 1));
            assert!(p.errors.iter().any(|e| e.contains(&format!(r#"<algo>: ngpus="{ngpus}" is more gpus than the reader stores"#))), "{:?}", p.errors);
            assert!(!p.errors.iter().any(|e| e.contains("is missing")), "{:?}", &p.errors[..p.errors.len().min(3)]);
        }
        // At the limit, a missing gpu is still named.
        let p = problems(&EXCHANGE.replacen(r#"ngpus="2""#, r#"ngpus="1024""#, 1));
        assert!(p.errors.iter().any(|e| e.starts_with("gpu 1023 is missing")), "{:?}", &p.errors[..p.errors.len().min(3)]);
    }

    /// A gpu with more elements than the reader stores is named once, alike by the reader's rules
    /// and by the question the exporter asks of the program.
    #[test]
    fn a_gpu_over_the_element_limit_is_named() {
        let copy = r#"      <step s="9" type="nop" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
"#;
        // 1 <algo> + 2 <gpu> + 1 <tb> + 2 steps: 4090 more nops take gpu 0 to 4096, one more over.
        for (nops, over) in [(4090, false), (4091, true)] {
            let xml = EXCHANGE.replacen("    </tb>\n  </gpu>", &format!("{}    </tb>\n  </gpu>", copy.repeat(nops)), 1);
            let r = read_program(&xml);
            let p = r.program.unwrap();
            let want = "gpu 0: the reader would store 4097 elements for this gpu (<algo>, every <gpu>, its <tb>s and <step>s); it stores at most 4096";
            assert_eq!(program_over_elements(&p).as_deref(), over.then_some(want));
            assert_eq!(check_program(&p, p.runtime).errors.iter().any(|e| e == want), over);
        }
    }

    #[test]
    fn dependencies_that_never_end_and_late_signals() {
        // tb 1 waits for tb 0 step 0, which lacks hasdep: it waits for step 1, which lacks it too.
        let with_tb1 = EXCHANGE.replacen(
            "    </tb>\n  </gpu>",
            "    </tb>\n    <tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">\n      <step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"0\" deps=\"0\" hasdep=\"0\"/>\n    </tb>\n  </gpu>",
            1,
        );
        let p = problems(&with_tb1);
        assert!(
            p.errors.iter().any(|e| e.starts_with("line 8: gpu 0 tb 1 step 0: waits for tb 0 step 0") && e.ends_with("it would wait forever")),
            "{:?}",
            p.errors
        );
        let late = with_tb1.replacen(r#"dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0""#, r#"dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1""#, 1);
        let p = problems(&late);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert!(p.warnings.iter().any(|w| w.contains("it waits until tb 0 step 1 finishes")), "{:?}", p.warnings);
    }

    #[test]
    fn the_older_dialect_has_its_own_rules() {
        let legacy = EXCHANGE.replace(r#" outofplace="1" minBytes="0" maxBytes="0""#, "");
        let p = problems(&legacy);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert!(p.warnings.iter().any(|w| w.contains("no maxBytes")), "{:?}", p.warnings);
        // The older runtime picks a file for minBytes <= bytes < maxBytes: an empty range
        // (maxBytes="0" among them) is never picked, an error as in the executor's dialect.
        for (attrs, want) in [
            (r#" maxBytes="0""#, r#"<algo>: minBytes="0" maxBytes="0": the runtime never picks this algorithm"#),
            (r#" minBytes="5" maxBytes="5""#, r#"<algo>: minBytes="5" maxBytes="5": the runtime never picks this algorithm"#),
            (r#" minBytes="9" maxBytes="5""#, r#"<algo>: minBytes="9" maxBytes="5": the runtime never picks this algorithm"#),
            (r#" minBytes="134217728""#, r#"<algo>: minBytes="134217728" (maxBytes 134217728 by default): the runtime never picks"#),
        ] {
            let p = problems(&EXCHANGE.replace(r#" outofplace="1" minBytes="0" maxBytes="0""#, attrs));
            assert!(p.errors.iter().any(|e| e.contains(want)), "{attrs}: {:?}", p.errors);
        }
        let p = problems(&EXCHANGE.replace(r#" outofplace="1" minBytes="0" maxBytes="0""#, r#" minBytes="5" maxBytes="6""#));
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        // The executor's maxBytes="0" means no limit.
        assert!(problems(EXCHANGE).warnings.is_empty());
        let p = problems(&legacy.replace(r#"coll="alltoall""#, r#"coll="alltoallv""#));
        assert!(p.errors.iter().any(|e| e.contains("coll=\"alltoallv\" is not a collective the older MSCCL runtime")), "{:?}", p.errors);
        let p = problems(&legacy.replace(r#"name="x" "#, ""));
        assert!(p.errors.contains(&"line 1: <algo> lacks the attribute name".to_string()), "{:?}", p.errors);
    }
}
