//! The streaming schedule reader.
//!
//! The file is parsed straight from a buffered reader; steps are handed to a [`StepSink`] one at
//! a time as they are parsed, so memory stays proportional to one step plus what the sink keeps.
//! The header (format, version, topology, collective, meta) normally comes before the steps, as
//! the writer puts it; a file whose keys come in another order (for example sorted, which puts
//! `steps` before `topology`) is still read, by holding its steps until the header is complete.

use super::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::topology::custom::{custom, CustomLink, CustomNode};
use crate::topology::{LinkId, NodeId};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::io::Read;
use std::path::Path;

/// Receives a schedule as it is read: the header once, then every step in order.
pub trait StepSink {
    /// Called once, before the first step.
    fn begin(&mut self, header: &ScheduleHeader) -> Result<()>;
    /// Called for every step in order (`index` counts from 0).
    fn step(&mut self, index: usize, step: Step) -> Result<()>;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
struct RawCollective {
    kind: String,
    ranks: Vec<u64>,
    bytes_per_rank: u64,
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
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
struct RawStep {
    transfers: Vec<Transfer>,
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(Step { transfers: RawStep::deserialize(d)?.transfers })
    }
}

const FIELDS: &[&str] = &["format", "version", "topology", "collective", "meta", "steps"];

/// What the reader learns along the way, kept outside serde so that a sink's own error (which
/// serde can only carry as text) comes back with its kind, and parse errors can name the step.
struct ReadState<'a> {
    sink: &'a mut dyn StepSink,
    failure: Option<Error>,
    steps_seen: usize,
    in_steps: bool,
    header: Option<ScheduleHeader>,
}

impl ReadState<'_> {
    fn fail<E: de::Error>(&mut self, e: Error) -> E {
        let msg = e.to_string();
        self.failure = Some(e);
        E::custom(msg)
    }

    fn deliver<E: de::Error>(&mut self, step: Step) -> std::result::Result<(), E> {
        let index = self.steps_seen;
        self.steps_seen += 1;
        self.sink.step(index, step).map_err(|e| self.fail(e))
    }
}

struct FileSeed<'s, 'a>(&'s mut ReadState<'a>);

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
    let legacy = meta.as_ref().and_then(|m| m.get("shape")).filter(|s| !s.is_null());
    if let Some((shape, field)) = raw_t.shape.as_ref().map(|s| (s, "topology.shape")).or(legacy.map(|s| (s, "meta.shape"))) {
        topology = crate::topology::adopt_shape(topology, shape).map_err(|e| e.context(field))?;
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
    let collective = Collective::new(kind, ranks, rc.bytes_per_rank, rc.pieces, rc.block_bytes, &topology)?;
    Ok(ScheduleHeader { topology, collective, meta })
}

impl<'de> DeserializeSeed<'de> for FileSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FileSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a collsched schedule object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let state = self.0;
        let mut parts = Parts::default();
        let mut held_steps: Option<Vec<Step>> = None;
        let mut seen_steps = false;
        while let Some(key) = map.next_key::<String>()? {
            let dup = || de::Error::custom(format!("duplicate field `{key}`"));
            match key.as_str() {
                "format" if parts.format.is_none() => parts.format = Some(map.next_value()?),
                "version" if parts.version.is_none() => parts.version = Some(map.next_value()?),
                "topology" if parts.topology.is_none() => parts.topology = Some(map.next_value()?),
                "collective" if parts.collective.is_none() => parts.collective = Some(map.next_value()?),
                "meta" if parts.meta.is_none() => parts.meta = Some(map.next_value()?),
                "steps" if !seen_steps => {
                    seen_steps = true;
                    let complete = parts.format.is_some() && parts.version.is_some() && parts.topology.is_some() && parts.collective.is_some();
                    if complete {
                        let header = build_header(&mut parts).map_err(|e| state.fail(e))?;
                        state.sink.begin(&header).map_err(|e| state.fail(e))?;
                        state.header = Some(header);
                        state.in_steps = true;
                        map.next_value_seed(StepsSeed(&mut *state))?;
                        state.in_steps = false;
                    } else {
                        held_steps = Some(map.next_value()?);
                    }
                }
                "format" | "version" | "topology" | "collective" | "meta" | "steps" => return Err(dup()),
                other => return Err(de::Error::unknown_field(other, FIELDS)),
            }
        }
        if !seen_steps {
            return Err(de::Error::missing_field("steps"));
        }
        if state.header.is_none() {
            let header = build_header(&mut parts).map_err(|e| state.fail(e))?;
            state.sink.begin(&header).map_err(|e| state.fail(e))?;
            state.header = Some(header);
            for step in held_steps.take().unwrap_or_default() {
                state.deliver(step)?;
            }
        }
        Ok(())
    }
}

struct StepsSeed<'s, 'a>(&'s mut ReadState<'a>);

impl<'de> DeserializeSeed<'de> for StepsSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for StepsSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of steps")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        while let Some(step) = seq.next_element::<Step>()? {
            self.0.deliver(step)?;
        }
        Ok(())
    }
}

/// Reads a schedule from `reader`, handing each step to `sink` as soon as it is parsed. `source`
/// names the input in error messages (a file name). Returns the header.
pub fn stream_schedule<R: Read>(reader: R, source: &str, sink: &mut dyn StepSink) -> Result<ScheduleHeader> {
    let mut state = ReadState { sink, failure: None, steps_seen: 0, in_steps: false, header: None };
    let mut de = serde_json::Deserializer::from_reader(reader);
    let parsed = FileSeed(&mut state).deserialize(&mut de).and_then(|()| de.end());
    match parsed {
        Ok(()) => Ok(state.header.expect("a parsed file has a header")),
        Err(e) => {
            if let Some(f) = state.failure.take() {
                return Err(f.context(source));
            }
            let place = if state.in_steps { format!(" (in steps[{}])", state.steps_seen) } else { String::new() };
            Err(Error::bad(format!("{source}: {e}{place}")))
        }
    }
}

/// Streams a schedule file into a sink (a `.json.zst` file is decompressed as it is read).
pub fn stream_schedule_file(path: &Path, sink: &mut dyn StepSink) -> Result<ScheduleHeader> {
    stream_schedule(crate::io::open_decoded(path)?, &path.display().to_string(), sink)
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
    let header = stream_schedule(reader, source, &mut c)?;
    Ok(Schedule { header, steps: c.0 })
}

/// Reads a whole schedule file into memory (a `.json.zst` file is decompressed as it is read).
pub fn read_schedule_file(path: &Path) -> Result<Schedule> {
    read_schedule(crate::io::open_decoded(path)?, &path.display().to_string())
}
