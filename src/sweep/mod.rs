//! A fault library: schedules for every fault of a family (every single cable, every pair of
//! cables, every TPUv4 optical switch) of a torus or fat tree, ready before the faults happen.
//!
//! Faults that a symmetry of the network maps onto each other need one schedule between them:
//! the sweep finds the classes of the faults under the network's symmetries ([`crate::topology::symmetry`],
//! [`classes`]), synthesizes one schedule per class for its representative
//! ([`crate::synth::portfolio::synthesize`]), verifies and certifies it, and maps it onto every
//! other member through the member's symmetry ([`crate::schedule::mapping`]), which keeps validity and cost
//! exactly. The index ([`index`]) names every fault with its class, the class schedule and the
//! symmetry; the classes split into shards ([`Plan::shard_classes`]) that separate machines run
//! and [`merge()`] joins.
//!
//! ```
//! use collsched::{FaultFamily, MemberCheck, Spec, SweepPlan as Plan, SweepSetup, SynthOptions};
//!
//! let spec = Spec::parse(r#"{"topology": {"torus": {"dims": [4, 4], "bandwidth_gbps": 32, "latency_ns": 100}},
//!                            "collective": {"kind": "all_to_all", "bytes_per_rank": "1MiB"}}"#, "example").unwrap();
//! let setup = SweepSetup { base: spec, family: FaultFamily::CablePairs, synth: SynthOptions::default(), members: MemberCheck::None, seed: 0 };
//! let plan = Plan::new(setup).unwrap();
//! assert_eq!(plan.cases.len(), 32 * 31 / 2);
//! assert_eq!(plan.classes.iter().map(|c| c.members.len()).sum::<usize>(), plan.cases.len());
//! ```

pub mod classes;
pub mod index;
pub mod lookup;
pub mod merge;
pub mod patterns;
mod run;

pub use index::{ClassStatus, Index, ShardInfo};
pub use lookup::member_schedule;
pub use merge::merge;
pub use patterns::FaultFamily;
pub use run::{MemberCheck, Plan, SweepEvent, SweepSetup};
