//! The streaming schedule reader.
//!
//! The file is read through a buffer; each member of its top-level object, and each step, is cut
//! out as text (`scan`) and parsed from memory. Steps are handed to a [`StepSink`] one at a time
//! as they are parsed, so memory stays proportional to a few steps plus what the sink keeps.
//! The header (format, version, topology, collective, meta) normally comes before the steps, as
//! the writer puts it; a file whose keys come in another order (for example sorted, which puts
//! `steps` before `topology`) is still read, by holding its steps until the header is complete.
//! Since `meta` is optional and may change the topology (`meta.shape`) and what sinks are told,
//! the header is complete only once `meta` has been read: a file without `meta`, or with it after
//! `steps`, has its steps held, so that the result never depends on the order of the keys.

use super::fast_step::parse_step;
use super::scan::{Pos, ScanError, Scanner};
use super::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::topology::custom::{custom, CustomLink, CustomNode};
use crate::topology::{LinkId, NodeId};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::io::{BufRead, Read};
use std::path::Path;

/// Receives a schedule as it is read: the header once, then every step in order.
pub trait StepSink {
    /// Called once, before the first step.
    fn begin(&mut self, header: &ScheduleHeader) -> Result<()>;
    /// Called for every step in order (`index` counts from 0).
    fn step(&mut self, index: usize, step: Step) -> Result<()>;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
struct RawTopology {
    nodes: Vec<CustomNode>,
    links: Vec<CustomLink>,
    #[serde(default)]
    switch_latency_ns: f64,
    /// The family the lists form (docs/design/FORMATS.md: `torus` or `fat_tree`), absent for a
    /// custom topology.
    #[serde(default)]
    shape: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
struct RawCollective {
    kind: String,
    ranks: Vec<u64>,
    /// A JSON integer or a string with a unit, as in a spec.
    bytes_per_rank: crate::spec::Bytes,
    pieces: u32,
    #[serde(default)]
    block_bytes: Option<Vec<Vec<u64>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawOp {
    Copy,
    Reduce,
}

impl<'de> Deserialize<'de> for PieceId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PieceId;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a piece id: an array of 2 or 3 non-negative integers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<PieceId, A::Error> {
                let mut parts = [0u32; 3];
                let mut n = 0;
                while let Some(x) = seq.next_element::<u32>()? {
                    if n == 3 {
                        return Err(de::Error::invalid_length(4, &self));
                    }
                    parts[n] = x;
                    n += 1;
                }
                PieceId::from_parts(&parts[..n]).ok_or_else(|| de::Error::invalid_length(n, &self))
            }
        }
        d.deserialize_seq(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
struct RawTransfer {
    path: Vec<LinkId>,
    op: RawOp,
    pieces: Vec<PieceId>,
}

impl<'de> Deserialize<'de> for Transfer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let r = RawTransfer::deserialize(d)?;
        let op = match r.op {
            RawOp::Copy => Op::Copy,
            RawOp::Reduce => Op::Reduce,
        };
        Ok(Transfer { path: r.path, op, pieces: r.pieces })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with named fields")]
struct RawStep {
    transfers: Vec<Transfer>,
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(Step { transfers: RawStep::deserialize(d)?.transfers })
    }
}

const FIELDS: &[&str] = &["format", "version", "topology", "collective", "meta", "steps"];

#[derive(Default)]
struct Parts {
    format: Option<String>,
    version: Option<u64>,
    topology: Option<RawTopology>,
    collective: Option<RawCollective>,
    meta: Option<serde_json::Value>,
}

fn build_header(parts: &mut Parts) -> Result<ScheduleHeader> {
    match parts.format.as_deref() {
        Some("collsched.schedule") => {}
        Some(other) => return Err(Error::bad(format!("format = \"{other}\": expected \"collsched.schedule\""))),
        None => return Err(Error::bad("missing field `format` (expected \"collsched.schedule\")")),
    }
    match parts.version {
        Some(1) => {}
        Some(v) => return Err(Error::bad(format!("version = {v}: this reader knows schedule file version 1"))),
        None => return Err(Error::bad("missing field `version`")),
    }
    let raw_t = parts.topology.take().ok_or_else(|| Error::bad("missing field `topology`"))?;
    let mut topology = custom(&raw_t.nodes, &raw_t.links, raw_t.switch_latency_ns).map_err(|e| e.context("topology"))?;
    let meta = parts.meta.take();
    // The family is `topology.shape`; files written before it was a field of the format kept it
    // in `meta.shape` (`null` for a custom topology), which is still read.
    let legacy = meta.as_ref().and_then(|m| m.get("shape"));
    if let (Some(shape), Some(old)) = (&raw_t.shape, legacy) {
        // Both name the family: a file that says two things means neither.
        if shape != old {
            return Err(Error::bad(format!(
                "meta.shape = {old} contradicts topology.shape = {shape}: both name the topology's family (meta.shape is where files written before topology.shape kept it); make them equal or remove meta.shape"
            )));
        }
    }
    if let Some((shape, field)) = raw_t.shape.as_ref().map(|s| (s, "topology.shape")).or(legacy.filter(|s| !s.is_null()).map(|s| (s, "meta.shape"))) {
        topology = crate::topology::adopt_shape(topology, shape, field)?;
    }
    let rc = parts.collective.take().ok_or_else(|| Error::bad("missing field `collective`"))?;
    let kind = CollectiveKind::parse(&rc.kind)
        .ok_or_else(|| Error::bad(format!("collective.kind = \"{}\": expected all_to_all, all_gather, reduce_scatter or all_reduce", rc.kind)))?;
    let mut ranks = Vec::with_capacity(rc.ranks.len());
    for (i, &r) in rc.ranks.iter().enumerate() {
        if r >= topology.num_nodes() as u64 {
            return Err(Error::bad(format!("collective.ranks[{i}] = {r}: no such node (there are {} nodes)", topology.num_nodes())));
        }
        ranks.push(NodeId(r as u32));
    }
    let bytes_per_rank = rc.bytes_per_rank.value("collective.bytes_per_rank")?;
    let collective = Collective::new(kind, ranks, bytes_per_rank, rc.pieces, rc.block_bytes, &topology)?;
    Ok(ScheduleHeader { topology, collective, meta })
}

/// Parses the file's top-level object member by member; each value is cut out by the scanner and
/// parsed from memory, the steps one at a time.
struct TopLevel<'a, R> {
    scan: Scanner<R>,
    source: &'a str,
    /// The text of the value being parsed.
    text: Vec<u8>,
    /// How many steps were handed on (for "in steps[i]" in errors).
    steps_seen: usize,
}

impl<R: BufRead> TopLevel<'_, R> {
    /// An error at a place of the file, worded as serde_json words its own.
    fn syntax(&self, at: Pos, what: &str) -> Error {
        Error::bad(format!("{}: {what} at {at}", self.source))
    }

    fn scanned<T>(&self, r: std::result::Result<T, ScanError>) -> Result<T> {
        r.map_err(|e| match e {
            ScanError::Io(e) => Error::bad(format!("{}: cannot read: {e}", self.source)),
            ScanError::Eof(at) => self.syntax(at, "EOF while parsing a value"),
        })
    }

    fn peek(&mut self) -> Result<Option<u8>> {
        let r = self.scan.peek();
        self.scanned(r)
    }

    /// Consumes `byte` (after white space) or fails naming what was expected.
    fn expect(&mut self, byte: u8, what: &str) -> Result<()> {
        match self.peek()? {
            Some(b) if b == byte => {
                self.scan.bump();
                Ok(())
            }
            Some(_) => Err(self.syntax(self.scan.pos(), &format!("expected {what}"))),
            None => Err(self.syntax(self.scan.pos(), &format!("EOF while expecting {what}"))),
        }
    }

    /// The next value, parsed as a `T`; `field` names it in errors (`collective`, `steps[3]`; empty
    /// for a field name).
    fn value<T: serde::de::DeserializeOwned>(&mut self, field: &dyn Fn() -> String) -> Result<T> {
        let r = self.scan.value(&mut self.text);
        let at = self.scanned(r)?;
        self.parse_text(at, field)
    }

    /// The next value, an object of the format with `lists` of objects in it, parsed as a `T`.
    fn object<T: serde::de::DeserializeOwned>(&mut self, field: &dyn Fn() -> String, lists: &[&str]) -> Result<T> {
        let r = self.scan.value(&mut self.text);
        let at = self.scanned(r)?;
        self.objects_named(at, field, lists)?;
        self.parse_text(at, field)
    }

    /// Refuses the value cut out at `at` where it, or an item of one of its `lists`, is an array:
    /// serde reads a struct from an array of its fields in order too, but the format has objects
    /// with named fields there (docs/design/FORMATS.md, the schedule file).
    fn objects_named(&self, at: Pos, field: &dyn Fn() -> String, lists: &[&str]) -> Result<()> {
        // Text that is not JSON is left to serde, which places the error.
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&self.text) else { return Ok(()) };
        let refuse = |path: String| Err(self.syntax(at, &format!("field `{path}`: expected an object with named fields, found an array")));
        if v.is_array() {
            return refuse(field());
        }
        for list in lists {
            let items = v.get(list).and_then(serde_json::Value::as_array).map_or(&[][..], Vec::as_slice);
            if let Some(i) = items.iter().position(serde_json::Value::is_array) {
                return refuse(format!("{}.{list}[{i}]", field()));
            }
        }
        Ok(())
    }

    /// The next value, a step: by the fast path where it is sure, else by serde.
    fn step(&mut self, index: usize) -> Result<Step> {
        let r = self.scan.value(&mut self.text);
        let at = self.scanned(r)?;
        match parse_step(&self.text) {
            Some(step) => Ok(step),
            None => {
                let field = || format!("steps[{index}]");
                self.objects_named(at, &field, &["transfers"])?;
                self.parse_text(at, &field)
            }
        }
    }

    /// The value cut out at `at`, parsed by serde; its errors placed in the file and named by
    /// their field path below `field` (`collective.block_bytes[0][1]`).
    fn parse_text<T: serde::de::DeserializeOwned>(&self, at: Pos, field: &dyn Fn() -> String) -> Result<T> {
        let mut de = serde_json::Deserializer::from_slice(&self.text);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let inner = e.path().to_string();
            let e = e.into_inner();
            let shown = crate::io::json_message(&e, &self.text);
            let message = shown.rsplit_once(" at line ").map_or(shown.as_str(), |(m, _)| m);
            let at = if e.line() == 0 { at } else { at.within(e.line(), e.column()) };
            let path = match (field(), inner.as_str()) {
                (f, "" | ".") => f,
                (f, i) if f.is_empty() => i.to_string(),
                (f, i) if i.starts_with('[') => format!("{f}{i}"),
                (f, i) => format!("{f}.{i}"),
            };
            let named = if path.is_empty() { String::new() } else { format!("field `{path}`: ") };
            Error::bad(format!("{}: {named}{message} at {at}", self.source))
        })
    }

    /// The steps array, each step handed to `sink` as soon as it is parsed.
    fn steps(&mut self, sink: &mut dyn StepSink) -> Result<()> {
        self.expect(b'[', "`[` (a list of steps)")?;
        if self.peek()? == Some(b']') {
            self.scan.bump();
            return Ok(());
        }
        loop {
            let index = self.steps_seen;
            let step = self.step(index)?;
            self.steps_seen += 1;
            sink.step(index, step).map_err(|e| e.context(self.source))?;
            match self.peek()? {
                Some(b',') => self.scan.bump(),
                Some(b']') => {
                    self.scan.bump();
                    return Ok(());
                }
                _ => return Err(self.syntax(self.scan.pos(), &format!("expected `,` or `]` after steps[{index}]"))),
            }
        }
    }

    /// The whole document; returns the header.
    fn document(&mut self, sink: &mut dyn StepSink) -> Result<ScheduleHeader> {
        let nowhere = || String::new();
        if self.peek()? == Some(0xEF) {
            return Err(self.syntax(self.scan.pos(), "a UTF-8 byte-order mark, which JSON text does not start with (RFC 8259): save the file without it"));
        }
        self.expect(b'{', "`{` (a collsched schedule object)")?;
        let mut parts = Parts::default();
        let mut header: Option<ScheduleHeader> = None;
        let mut held_steps: Option<Vec<Step>> = None;
        let mut seen_steps = false;
        let mut first = true;
        loop {
            match self.peek()? {
                Some(b'}') if first => {
                    self.scan.bump();
                    break;
                }
                Some(b'"') => {}
                _ => return Err(self.syntax(self.scan.pos(), "expected a field name")),
            }
            first = false;
            let key_at = self.scan.pos();
            let key: String = self.value(&nowhere)?;
            self.expect(b':', "`:`")?;
            match key.as_str() {
                "format" if parts.format.is_none() => parts.format = Some(self.value(&|| "format".into())?),
                "version" if parts.version.is_none() => parts.version = Some(self.value(&|| "version".into())?),
                "topology" if parts.topology.is_none() => parts.topology = Some(self.object(&|| "topology".into(), &["nodes", "links"])?),
                "collective" if parts.collective.is_none() => parts.collective = Some(self.object(&|| "collective".into(), &[])?),
                "meta" if parts.meta.is_none() => parts.meta = Some(self.value(&|| "meta".into())?),
                "steps" if !seen_steps => {
                    seen_steps = true;
                    // `meta` too: read after the steps, it could no longer shape the header.
                    let complete =
                        parts.format.is_some() && parts.version.is_some() && parts.topology.is_some() && parts.collective.is_some() && parts.meta.is_some();
                    if complete {
                        let h = build_header(&mut parts).map_err(|e| e.context(self.source))?;
                        sink.begin(&h).map_err(|e| e.context(self.source))?;
                        header = Some(h);
                        self.steps(sink)?;
                    } else {
                        // One step at a time, as when streaming: never the list as one text.
                        let mut held = Collect(Vec::new());
                        self.steps(&mut held)?;
                        held_steps = Some(held.0);
                    }
                }
                "format" | "version" | "topology" | "collective" | "meta" | "steps" => {
                    return Err(self.syntax(key_at, &format!("duplicate field `{key}`")));
                }
                other => {
                    let expected = FIELDS.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ");
                    return Err(self.syntax(key_at, &format!("unknown field `{other}`, expected one of {expected}")));
                }
            }
            match self.peek()? {
                Some(b',') => self.scan.bump(),
                Some(b'}') => {
                    self.scan.bump();
                    break;
                }
                _ => return Err(self.syntax(self.scan.pos(), "expected `,` or `}`")),
            }
        }
        if self.peek()?.is_some() {
            return Err(self.syntax(self.scan.pos(), "trailing characters"));
        }
        if !seen_steps {
            return Err(self.syntax(self.scan.pos(), "missing field `steps`"));
        }
        match header {
            Some(h) => Ok(h),
            None => {
                let h = build_header(&mut parts).map_err(|e| e.context(self.source))?;
                sink.begin(&h).map_err(|e| e.context(self.source))?;
                for (index, step) in held_steps.take().unwrap_or_default().into_iter().enumerate() {
                    sink.step(index, step).map_err(|e| e.context(self.source))?;
                }
                Ok(h)
            }
        }
    }
}

/// Reads a schedule from `reader` on the calling thread (the reader of [`stream_schedule`]).
fn parse_schedule<R: Read>(reader: R, source: &str, sink: &mut dyn StepSink) -> Result<ScheduleHeader> {
    let scan = Scanner::new(std::io::BufReader::with_capacity(1 << 16, reader));
    TopLevel { scan, source, text: Vec::new(), steps_seen: 0 }.document(sink)
}

/// Reads a schedule from `reader`, handing each step to `sink` as soon as it is parsed. `source`
/// names the input in error messages (a file name). Returns the header.
///
/// The text is read and parsed on a thread of its own while the sink works on the steps already
/// read (a queue of a few steps between them), so on a large file reading costs no time beyond
/// the sink's own when there are two cores. Errors are those of a reading on one thread: the
/// first, in file order, of a parse error and the sink's own.
pub fn stream_schedule<R: Read + Send>(reader: R, source: &str, sink: &mut dyn StepSink) -> Result<ScheduleHeader> {
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUED_STEPS);
    std::thread::scope(|scope| {
        let parser = scope.spawn(|| parse_schedule(reader, source, &mut Forward(tx)));
        let mut own: Result<()> = Ok(());
        for message in rx.iter() {
            own = match message {
                Message::Begin(header) => sink.begin(&header),
                Message::Step(index, step) => sink.step(index, step),
            };
            if own.is_err() {
                // Dropping the queue's end stops the parser at its next step.
                break;
            }
        }
        drop(rx);
        let parsed = parser.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        own.map_err(|e| e.context(source)).and(parsed)
    })
}

/// Streams a schedule file into a sink (a `.json.zst` file is decompressed as it is read).
pub fn stream_schedule_file(path: &Path, sink: &mut dyn StepSink) -> Result<ScheduleHeader> {
    stream_schedule(crate::io::open_decoded(path)?, &path.display().to_string(), sink)
}

/// Steps read ahead of the sink: enough to keep both threads busy, few enough that memory stays
/// at a few steps.
const QUEUED_STEPS: usize = 2;

/// What the parsing thread hands over.
enum Message {
    Begin(Box<ScheduleHeader>),
    Step(usize, Step),
}

/// The parsing thread's sink: forwards to the queue; fails once the receiving sink has stopped.
struct Forward(std::sync::mpsc::SyncSender<Message>);

impl StepSink for Forward {
    fn begin(&mut self, header: &ScheduleHeader) -> Result<()> {
        self.0.send(Message::Begin(Box::new(header.clone()))).map_err(|_| Error::bad("the reader was stopped"))
    }
    fn step(&mut self, index: usize, step: Step) -> Result<()> {
        self.0.send(Message::Step(index, step)).map_err(|_| Error::bad("the reader was stopped"))
    }
}

struct Collect(Vec<Step>);

impl StepSink for Collect {
    fn begin(&mut self, _: &ScheduleHeader) -> Result<()> {
        Ok(())
    }
    fn step(&mut self, _: usize, step: Step) -> Result<()> {
        self.0.push(step);
        Ok(())
    }
}

/// Reads a whole schedule into memory.
pub fn read_schedule<R: Read>(reader: R, source: &str) -> Result<Schedule> {
    let mut c = Collect(Vec::new());
    let header = parse_schedule(reader, source, &mut c)?;
    Ok(Schedule { header, steps: c.0 })
}

/// Reads a whole schedule file into memory (a `.json.zst` file is decompressed as it is read).
pub fn read_schedule_file(path: &Path) -> Result<Schedule> {
    read_schedule(crate::io::open_decoded(path)?, &path.display().to_string())
}

/// [`read_schedule_file`] and the SHA-256 of the file's bytes (compressed, for `.json.zst`),
/// hashed as they are read.
pub fn read_schedule_file_hashed(path: &Path) -> Result<(Schedule, String)> {
    let mut reader = crate::io::HashingReader::new(crate::io::open(path)?);
    let s = read_schedule(crate::io::decoded(path, std::io::BufReader::new(&mut reader))?, &path.display().to_string())?;
    Ok((s, reader.hex_digest()))
}
