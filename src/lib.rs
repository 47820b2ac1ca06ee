//! collsched: synthesize and verify collective-communication schedules on torus and fat-tree
//! networks, healthy or with failed links.
//!
//! Build a topology with its faults, pick a collective, generate a schedule, verify it:
//!
//! ```
//! use collsched::algorithms::{torus_all_to_all, RingAlgorithm, Scheduler};
//! use collsched::bounds::bounds;
//! use collsched::collective::{Collective, CollectiveKind};
//! use collsched::topology::{torus, TorusParams};
//! use collsched::verify::{verify_schedule, VerifyOptions};
//!
//! let net = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
//! let a2a = Collective::new(CollectiveKind::AllToAll, net.node_ids().collect(), 1 << 20, 1, None, &net).unwrap();
//! let schedule = torus_all_to_all(&net, &a2a, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap();
//! let report = verify_schedule(&schedule, &VerifyOptions::default()).unwrap();
//! assert!(report.is_valid());
//! // HalfRing + DimRotation is bandwidth-optimal: its bandwidth term equals the volume bound.
//! let bound = bounds(&net, &schedule.header.collective).volume_ns.unwrap();
//! assert_eq!(report.cost.unwrap().bandwidth_ns(), bound);
//! ```
//!
//! Modules, from the bottom up: [`topology`] (tori, fat trees, custom lists, faults),
//! [`collective`] (kinds, ranks, pieces), [`schedule`] (the IR and the streaming schedule file),
//! [`spec`] (input files), [`bounds`] and [`cost`], [`algorithms`] (generators), [`verify`] (the
//! rules of docs/design/MODEL.md section 4), [`generate`] and [`cli`].

#![warn(missing_docs)]

pub mod algorithms;
pub mod bounds;
pub mod cli;
pub mod collective;
pub mod cost;
pub mod error;
pub mod eval;
pub mod export;
pub mod generate;
pub mod io;
pub mod lower;
pub mod pictures;
pub mod schedule;
pub mod spec;
pub mod sweep;
pub mod synth;
pub mod topology;
pub mod units;
pub mod verify;
