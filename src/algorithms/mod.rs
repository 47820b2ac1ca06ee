//! Hand-written algorithms of ALGORITHMS.md as schedule generators.
