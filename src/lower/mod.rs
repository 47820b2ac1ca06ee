//! Lowering of a schedule to the per-rank programs a runtime runs.
