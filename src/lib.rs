//! collsched: synthesize and verify collective-communication schedules on torus and fat-tree
//! networks, healthy or with failed links.
//!
//! Build a topology with its faults, state the collective, synthesize a schedule, verify it with
//! every rule of docs/design/MODEL.md section 4, and check the bound certificate that says how
//! far from optimal it is, with the independent checker ([`collsched_checker`]):
//!
//! ```
//! use collsched::{
//!     certificate_of_instance, synthesize, verify_schedule, CollectiveKind, FlowOptions, Instance, Objective, SynthOptions, Spec,
//!     VerifyOptions,
//! };
//!
//! // A 4x4 torus with one failed cable, an all-to-all of 64 KiB per npu.
//! let spec: Spec = serde_json::from_str(
//!     r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32, "latency_ns": 100}},
//!         "faults": {"cables": [[[0, 0], [1, 0]]]},
//!         "collective": {"kind": "all_to_all", "bytes_per_rank": "64KiB"}}"#,
//! )
//! .unwrap();
//! let instance: Instance = spec.instance().unwrap();
//! assert_eq!(instance.collective.kind, CollectiveKind::AllToAll);
//!
//! // Synthesize: the fastest verified candidate, with its gap to the certified bound.
//! let answer = synthesize(&instance, &SynthOptions::default(), Objective::Time, &mut |_| {}).unwrap();
//! assert!(answer.gap.unwrap() >= 0.0);
//!
//! // Verify: every rule, including deadlock freedom of the lowered per-rank programs.
//! let report = verify_schedule(&answer.schedule, &VerifyOptions::default()).unwrap();
//! assert!(report.is_valid());
//!
//! // Certify: the bound certificate, re-derived by the checker crate without any solver.
//! let certificate = certificate_of_instance(&instance, &"0".repeat(64), &FlowOptions::default());
//! let checked = collsched_checker::check_bounds_str(&certificate.to_string()).unwrap();
//! let bound = checked.bandwidth_bound.unwrap();
//! assert!(collsched::to_checker(&answer.cost.bandwidth_ns()) >= bound);
//! ```
//!
//! The API, from the bottom up: topologies ([`Topology`], [`torus`], [`fat_tree`], [`custom`],
//! [`FaultPattern`]), collectives ([`Collective`]), schedules ([`Schedule`], the streaming
//! schedule file [`read_schedule`] / [`write_schedule`]), specs ([`Spec`]), bounds and
//! certificates ([`bounds()`], [`certified_bounds`], [`certificate_for`]), costs ([`SyncCost`],
//! [`event_cost`]), hand-written algorithms ([`torus_all_to_all`], [`torus_mate`],
//! [`torus_ring_collective`], [`switched()`]), synthesis ([`synthesize`],
//! [`synthesize_steps`]), verification ([`verify_schedule`], [`Verifier`]), the lowering to
//! per-rank programs ([`lower()`]), exports (MSCCL XML, SCCL JSON, Chakra ET), fault libraries
//! ([`SweepPlan`]) and the command line ([`run_cli`]).

#![warn(missing_docs)]

mod algorithms;
mod bounds;
mod cli;
mod collective;
mod cost;
mod error;
mod eval;
mod export;
mod generate;
mod io;
mod lower;
mod pictures;
mod proof;
mod schedule;
mod spec;
mod sweep;
mod synth;
mod topology;
mod units;
mod verify;

pub use algorithms::switched::{switched, SwitchedAlgorithm};
pub use algorithms::{
    routed_all_to_all, torus_all_to_all, torus_all_to_all_into, torus_mate, torus_ring_collective, HardwareRouting, RingAlgorithm, Scheduler,
};
pub use bounds::certificate::{certificate_for, certificate_of_instance};
pub use bounds::certified::{certified_bounds, certified_bounds_ns, certified_steps_bounds, CertifiedBounds, CertifiedNs};
pub use bounds::flow::{flow_bound, FlowBound, FlowOptions};
pub use bounds::{bounds, Bounds};
pub use cli::{clean_up_on_signals, run as run_cli, Cli};
pub use collective::{Collective, CollectiveKind, PieceId};
pub use cost::{event_cost, EventCost, SyncCost, SyncMeter};
pub use error::{Error, ExitCode, Result};
pub use export::sccl::{import_sccl, parse_sccl, sccl_algorithm, sccl_coordinates, sccl_json, sccl_problems, ScclAlgorithm, ScclProblem};
pub use export::{chakra_traces, check_reader_rules, check_xml, decode_chakra, import_msccl, msccl_xml, write_chakra, Buffering, MscclOptions, XmlReport};
pub use generate::from_spec as generate_from_spec;
pub use io::write_atomic_encoded;
pub use lower::{lower, ChannelSpread, LowerOptions, OpKind, OpRef, Programs};
pub use schedule::{read_schedule, read_schedule_file, write_schedule, write_schedule_file, Op, Schedule, ScheduleHeader, Step, StepSink, Transfer, WriteSink};
pub use spec::{Instance, Routing, Solver, Spec};
pub use sweep::{ClassStatus, FaultFamily, MemberCheck, Plan as SweepPlan, SweepEvent, SweepSetup};
pub use synth::portfolio::{synthesize, verify_deferred, Answer, Candidate, HandWritten, Objective, DEFERRED_PIECE_HOPS};
pub use synth::spreading::spread_steps;
pub use synth::switched::fat_tree_candidates;
pub use synth::trees::{piece_counts as tree_piece_counts, tree_steps, Layered};
pub use synth::{fewest_steps_exact_with, steps_lower_bound, synthesize_steps, Progress, SynthOptions, SynthReport, SynthStatus};
pub use topology::astra::parse as parse_astra;
pub use topology::{custom, fat_tree, shape_json, torus, FatTreeParams, FaultPattern, LinkId, NodeId, Topology, TorusParams};
pub use units::{to_checker, to_f64, Rational};
pub use verify::{
    check_deadlock, verify_file_checked, verify_schedule, Check, Conformance, DeadlockCheck, Expectations, Report, RoutingDeadlock, Rule, Verifier,
    VerifyOptions,
};
