//! Exports for runtimes and simulators: MSCCL XML and Chakra execution traces.
//!
//! Every export starts from the lowered [`crate::lower::Programs`], so what rule 6 checked is
//! what a runtime runs.

pub mod chakra;
pub mod msccl;
pub mod msccl_import;

pub use chakra::{chakra_traces, decode_chakra, write_chakra};
pub use msccl::{check_reader_rules, msccl_xml, simulate, ChunkValue, MscclOptions, Proto, SimResult};
pub use msccl_import::{full_mesh, import_msccl};
