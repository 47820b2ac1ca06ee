//! Exports for runtimes and simulators: MSCCL XML and Chakra execution traces.
