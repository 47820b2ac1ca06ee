//! Exports for runtimes and simulators: MSCCL XML, Chakra execution traces, and SCCL's algorithm
//! JSON (msccl-tools' synthesizer format, read and written).
//!
//! The runtime exports start from the lowered [`crate::lower::Programs`], so what rule 6 checked
//! is what a runtime runs. SCCL's JSON sits a level above: it holds steps of sends, and
//! msccl-tools' `ncclize` does its own lowering.

pub mod chakra;
pub mod msccl;
pub mod sccl;

pub use chakra::{chakra_traces, decode_chakra, write_chakra, write_chakra_traces};
pub use msccl::{check_reader_rules, check_xml, import_msccl, msccl_xml, Buffering, MscclOptions, Runtime, XmlReport};
