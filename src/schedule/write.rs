//! The streaming schedule writer: header first, then one line per step.
//!
//! The output is deterministic: the same schedule always gives the same bytes (fixed key
//! order, shortest round-trip floats, no maps with unspecified order).

use super::{Schedule, ScheduleHeader, Step, StepSink};
use crate::error::Result;
use crate::io::{write_atomic_encoded, write_error};
use crate::topology::custom::to_lists;
use std::io::{self, Write};
use std::path::Path;

/// Writes a schedule step by step, so that a generator never needs the whole file in memory.
pub struct ScheduleWriter<W: Write> {
    out: W,
    steps: usize,
    buf: Vec<u8>,
}

impl<W: Write> ScheduleWriter<W> {
    /// Writes the header and opens the step list.
    pub fn new(mut out: W, header: &ScheduleHeader) -> io::Result<Self> {
        let t = &header.topology;
        let (nodes, links) = to_lists(t);
        out.write_all(b"{\n  \"format\": \"collsched.schedule\",\n  \"version\": 1,\n  \"topology\": {\n    \"nodes\": [")?;
        for (i, n) in nodes.iter().enumerate() {
            out.write_all(if i == 0 { b"\n      " } else { b",\n      " })?;
            serde_json::to_writer(&mut out, n)?;
        }
        out.write_all(b"\n    ],\n    \"links\": [")?;
        for (i, l) in links.iter().enumerate() {
            out.write_all(if i == 0 { b"\n      " } else { b",\n      " })?;
            serde_json::to_writer(&mut out, l)?;
        }
        write!(out, "\n    ],\n    \"switch_latency_ns\": {}", serde_json::to_string(&t.switch_latency_ns())?)?;
        if let Some(shape) = crate::topology::shape_json(t) {
            write!(out, ",\n    \"shape\": {}", serde_json::to_string(&shape)?)?;
        }
        out.write_all(b"\n  },\n")?;
        let c = &header.collective;
        let ranks: Vec<u32> = c.ranks.iter().map(|r| r.0).collect();
        write!(
            out,
            "  \"collective\": {{\"kind\": \"{}\", \"ranks\": {}, \"bytes_per_rank\": {}, \"pieces\": {}",
            c.kind.as_str(),
            serde_json::to_string(&ranks)?,
            c.bytes_per_rank,
            c.pieces
        )?;
        if let Some(bb) = &c.block_bytes {
            write!(out, ", \"block_bytes\": {}", serde_json::to_string(bb)?)?;
        }
        out.write_all(b"},\n")?;
        if let Some(meta) = &header.meta {
            writeln!(out, "  \"meta\": {},", serde_json::to_string(meta)?)?;
        }
        out.write_all(b"  \"steps\": [")?;
        Ok(ScheduleWriter { out, steps: 0, buf: Vec::with_capacity(1 << 16) })
    }

    /// Appends one step.
    pub fn write_step(&mut self, step: &Step) -> io::Result<()> {
        let b = &mut self.buf;
        b.clear();
        b.extend_from_slice(if self.steps == 0 { b"\n    {\"transfers\": [" } else { b",\n    {\"transfers\": [" });
        let mut num = itoa::Buffer::new();
        for (ti, t) in step.transfers.iter().enumerate() {
            if ti > 0 {
                b.extend_from_slice(b", ");
            }
            b.extend_from_slice(b"{\"path\": [");
            for (i, l) in t.path.iter().enumerate() {
                if i > 0 {
                    b.extend_from_slice(b", ");
                }
                b.extend_from_slice(num.format(l.0).as_bytes());
            }
            b.extend_from_slice(b"], \"op\": \"");
            b.extend_from_slice(t.op.as_str().as_bytes());
            b.extend_from_slice(b"\", \"pieces\": [");
            for (i, p) in t.pieces.iter().enumerate() {
                b.extend_from_slice(if i == 0 { b"[" } else { b", [" });
                for (j, x) in p.parts().iter().enumerate() {
                    if j > 0 {
                        b.push(b',');
                    }
                    b.extend_from_slice(num.format(*x).as_bytes());
                }
                b.push(b']');
            }
            b.extend_from_slice(b"]}");
        }
        b.extend_from_slice(b"]}");
        self.steps += 1;
        self.out.write_all(b)
    }

    /// Closes the step list and the file; returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(if self.steps == 0 { b"]\n}\n" } else { b"\n  ]\n}\n" })?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A [`StepSink`] that writes a schedule as it is produced: the header when it comes, then
/// every step, so that a generator streams straight into a file.
pub struct WriteSink<W: Write> {
    out: Option<W>,
    writer: Option<ScheduleWriter<W>>,
}

impl<W: Write> WriteSink<W> {
    /// A sink writing into `out`.
    pub fn new(out: W) -> Self {
        WriteSink { out: Some(out), writer: None }
    }

    /// Closes the file (it must have had its header); returns the writer.
    pub fn finish(self) -> Result<W> {
        let writer = self.writer.ok_or_else(|| crate::error::Error::internal("a schedule without a header was written"))?;
        writer.finish().map_err(|e| crate::error::Error::io(format!("cannot write: {e}")))
    }
}

impl<W: Write> StepSink for WriteSink<W> {
    fn begin(&mut self, header: &ScheduleHeader) -> Result<()> {
        let out = self.out.take().ok_or_else(|| crate::error::Error::internal("a schedule header was written twice"))?;
        self.writer = Some(ScheduleWriter::new(out, header).map_err(|e| crate::error::Error::io(format!("cannot write: {e}")))?);
        Ok(())
    }

    fn step(&mut self, _index: usize, step: Step) -> Result<()> {
        let w = self.writer.as_mut().ok_or_else(|| crate::error::Error::internal("a step was written before the header"))?;
        w.write_step(&step).map_err(|e| crate::error::Error::io(format!("cannot write: {e}")))
    }
}

/// Writes a whole schedule to a writer.
pub fn write_schedule<W: Write>(out: W, schedule: &Schedule) -> io::Result<W> {
    let mut w = ScheduleWriter::new(out, &schedule.header)?;
    for s in &schedule.steps {
        w.write_step(s)?;
    }
    w.finish()
}

/// Writes a whole schedule to a file, atomically; a path ending in `.zst` gets the same JSON,
/// zstd-compressed (docs/design/FORMATS.md).
pub fn write_schedule_file(path: &Path, schedule: &Schedule) -> Result<()> {
    write_schedule_file_then(path, schedule, || Ok(()))
}

/// [`write_schedule_file`], kept only if `then` (called once the schedule is written, before the
/// file takes its name) succeeds: on its error no file is left behind. What runs alongside the
/// writing (a verification) can decide whether the file stands.
pub fn write_schedule_file_then<T>(path: &Path, schedule: &Schedule, then: impl FnOnce() -> Result<T>) -> Result<T> {
    write_atomic_encoded(path, |w| {
        write_schedule(w, schedule).map_err(write_error(path))?;
        then()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, CollectiveKind};
    use crate::schedule::{read_schedule_file, ScheduleHeader};
    use crate::topology::{torus, TorusParams};

    #[test]
    fn a_schedule_whose_check_fails_leaves_no_file_and_one_that_passes_is_whole() {
        let t = torus(&TorusParams::uniform(&[3], 32.0, 100.0)).unwrap();
        let c = Collective::new(CollectiveKind::AllGather, t.node_ids().collect(), 1 << 10, 1, None, &t).unwrap();
        let s = Schedule { header: ScheduleHeader { topology: t, collective: c, meta: None }, steps: vec![Step::default()] };
        let dir = std::env::temp_dir().join(format!("collsched-write-then-{}", std::process::id()));
        let path = dir.join("x.json.zst");
        let e = write_schedule_file_then(&path, &s, || Err::<(), _>(crate::error::Error::internal("does not verify"))).unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
        assert!(!path.exists());
        assert!(!dir.exists(), "the folder made for the file (or a temporary file in it) was left behind");
        assert_eq!(write_schedule_file_then(&path, &s, || Ok(7)).unwrap(), 7);
        assert_eq!(read_schedule_file(&path).unwrap().steps.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
