//! The trusted certificate checker: re-derives every claimed lower bound from its witness with exact rational arithmetic, without any solver.
