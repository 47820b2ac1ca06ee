//! MSCCL XML (what msccl-executor-nccl, the older MSCCL runtime and RCCL execute),
//! docs/design/FORMATS.md "MSCCL XML": writing it, reading it as the runtimes read it, and
//! judging whether it runs and computes its collective.
//!
//! - [`write`](mod@write): lowered programs to XML in either runtime's dialect ([`msccl_xml`]).
//! - [`model`]: one reading of a file ([`read_program`]), quick-xml underneath, with the
//!   runtimes' own handling of repeated, unknown and missing attributes.
//! - [`rules`]: what each runtime's reader refuses and what would hang or corrupt memory
//!   ([`check_program`]).
//! - [`simulate`](mod@simulate): the program run chunk by chunk under the runtime's buffering or rendezvous,
//!   with the cycle of waiting threadblocks when it hangs and every chunk's final place.
//! - [`races`]: the program's happens-before order, with which the run finds data races.
//! - [`import`]: the run turned into a [`crate::schedule::Schedule`] ([`import_msccl`]).
//! - [`check`]: what `collsched verify FILE.xml` answers ([`check_xml`]).

pub mod check;
pub mod import;
pub mod model;
pub mod races;
pub mod rules;
pub mod simulate;
pub mod write;

pub use check::{check_reader_rules, check_xml, PlacementRun, XmlReport};
pub use import::{import_msccl, import_program, pieces_per_block, Onto};
pub use model::Runtime;
pub use simulate::{Buffering, SimError};
pub use write::{msccl_xml, MscclOptions};
