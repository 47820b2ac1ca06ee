//! Exports for runtimes and simulators: MSCCL XML and Chakra execution traces.
//!
//! Every export starts from the lowered [`crate::lower::Programs`], so what rule 6 checked is
//! what a runtime runs.

pub mod chakra;
pub mod msccl;

pub use chakra::{chakra_traces, decode_chakra, write_chakra};
pub use msccl::{
    check_reader_rules, check_xml, full_mesh, import_msccl, msccl_xml, read_program, simulate, Buffering, ChunkValue, Execution, MscclOptions, Placement,
    Proto, Runtime, SimError, XmlReport,
};
