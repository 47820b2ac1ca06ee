//! collsched: synthesize and verify collective-communication schedules on torus and fat-tree
//! networks, healthy or with failed links.
pub mod collective;
pub mod error;
pub mod io;
pub mod schedule;
pub mod topology;
pub mod units;
pub mod cost;
pub mod verify;
pub mod algorithms;
pub mod spec;
pub mod cli;
pub mod generate;
pub mod bounds;
