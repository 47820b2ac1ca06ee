//! Runs a sweep: plans the classes, then per class (in parallel, [`rayon`]) synthesizes the
//! representative's schedule, verifies and certifies it, checks every member's symmetry and
//! verifies the mapped schedules asked for, and writes the files of the class.
//!
//! Files under the output folder, per class `c` (five digits): `specs/cNNNNN.spec.json` (the
//! representative's instance), `schedules/cNNNNN.json` (its schedule) and
//! `certificates/cNNNNN.cert.json` (the bound certificate with the schedule attached, naming
//! both by relative path and SHA-256, so `collsched proof check DIR/certificates` re-checks every
//! class without trusting the sweep).

use super::classes::{orbits, Class};
use super::index::{ClassEntry, ClassSchedule, ClassStatus, FaultEntry, Index, ShardInfo, SweepHeader, INDEX_FORMAT};
use super::patterns::{enumerate, Cables, FaultCase, FaultFamily};
use crate::bounds::certificate::{certificate_of_instance, schedule_json};
use crate::bounds::certified::q_to_f64;
use crate::bounds::flow::FlowOptions;
use crate::cost::SyncCost;
use crate::error::{Error, ExitCode, Result};
use crate::io::{sha256_hex, write_error, HashingReader, OutputSet};
use crate::schedule::mapping::map_schedule;
use crate::schedule::{write_schedule, Schedule};
use crate::spec::{FaultsSpec, Spec, TopologySpec};
use crate::synth::portfolio::{synthesize, Objective};
use crate::synth::{Progress, SynthOptions};
use crate::topology::symmetry::{describe, Automorphism, LinkTable, SymmetryGroup};
use crate::topology::{FaultPattern, NodeId, Topology};
use crate::units::{to_checker, to_f64};
use crate::verify::{verify_schedule, VerifyOptions};
use rayon::prelude::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which mapped members (besides each class's representative) are verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberCheck {
    /// None (each member's symmetry is still checked to map the representative's faults onto its
    /// own).
    None,
    /// Every member.
    All,
    /// Up to this many members per class, drawn by the seed.
    Sample(usize),
}

impl MemberCheck {
    /// `none`, `all` or `sample N`.
    pub fn text(self) -> String {
        match self {
            MemberCheck::None => "none".into(),
            MemberCheck::All => "all".into(),
            MemberCheck::Sample(n) => format!("sample {n}"),
        }
    }
}

/// What a sweep runs.
#[derive(Clone, Debug)]
pub struct SweepSetup {
    /// The spec: topology and collective (its faults are ignored).
    pub base: Spec,
    /// Which faults.
    pub family: FaultFamily,
    /// The synthesis limits per class.
    pub synth: SynthOptions,
    /// Which mapped members to verify.
    pub members: MemberCheck,
    /// The seed of the member sample.
    pub seed: u64,
}

impl SweepSetup {
    /// What a sweep ran, read back from its index's `sweep` header (`sweep merge` re-derives the
    /// sweep from it); `source` names the header in messages.
    ///
    /// Errors (bad input): a field the sweep does not write (an unknown fault family, solver or
    /// member check, a time limit that is no duration), a topology or collective that is no spec's.
    pub fn of_header(h: &SweepHeader, source: &str) -> Result<SweepSetup> {
        let bad = |field: &str, value: String| Error::bad(format!("{source}: field `sweep.{field}`: {value}: not a value a sweep writes"));
        let family = match (h.faults.as_str(), h.cube) {
            ("cables", None) => FaultFamily::Cables,
            ("pairs", None) => FaultFamily::CablePairs,
            ("ocs", cube) => FaultFamily::Ocs { cube: cube.unwrap_or(4) },
            (_, Some(cube)) => return Err(bad("cube", cube.to_string())),
            (other, None) => return Err(bad("faults", format!("{other:?}"))),
        };
        let solver = crate::synth::Solver::from_name(&h.solver).ok_or_else(|| bad("solver", format!("{:?}", h.solver)))?;
        let time_limit = Duration::try_from_secs_f64(h.time_limit_s).map_err(|_| bad("time_limit_s", h.time_limit_s.to_string()))?;
        let members = match h.verify_members.split_once(' ') {
            None if h.verify_members == "none" => MemberCheck::None,
            None if h.verify_members == "all" => MemberCheck::All,
            Some(("sample", n)) => MemberCheck::Sample(n.parse().map_err(|_| bad("verify_members", format!("{:?}", h.verify_members)))?),
            _ => return Err(bad("verify_members", format!("{:?}", h.verify_members))),
        };
        let text = json!({"topology": h.topology, "collective": h.collective}).to_string();
        let base = Spec::parse(&text, &format!("{source}: field `sweep`"))?;
        Ok(SweepSetup { base, family, synth: SynthOptions { solver, time_limit, ..SynthOptions::default() }, members, seed: h.seed })
    }
}

/// A planned sweep: the healthy network, its fault cases, the symmetry group and the classes.
pub struct Plan {
    /// What was asked.
    pub setup: SweepSetup,
    /// The network without faults.
    pub healthy: Topology,
    /// Its cables.
    pub cables: Cables,
    /// Its links by their ends.
    pub links: LinkTable,
    /// Every fault case, in the sweep's order.
    pub cases: Vec<FaultCase>,
    /// The symmetries.
    pub group: SymmetryGroup,
    /// The orbits of the cases.
    pub classes: Vec<Class>,
}

/// The `topology.torus` of a topology that has a torus shape: its dimensions, wraps, and each
/// dimension's bandwidth and latency (those of its links; a dimension of size 1 has none and
/// takes dimension 0's, or the defaults of the command-line flags).
fn torus_spec_of(t: &Topology) -> Option<crate::spec::TorusSpec> {
    let shape = t.torus_shape()?;
    let of_dim = |d: usize| {
        t.links().find_map(|(_, l)| match l.class {
            crate::topology::LinkClass::TorusDim { dim, .. } if usize::from(dim) == d => Some((l.bandwidth_gbps, l.latency_ns)),
            _ => None,
        })
    };
    let fallback = (0..shape.ndims()).find_map(of_dim).unwrap_or((32.0, 100.0));
    let (bandwidth, latency): (Vec<f64>, Vec<f64>) = (0..shape.ndims()).map(|d| of_dim(d).unwrap_or(fallback)).unzip();
    Some(crate::spec::TorusSpec {
        dims: shape.dims.clone(),
        wrap: Some(shape.wrap.clone()),
        bandwidth_gbps: crate::spec::PerDim::Each(bandwidth),
        latency_ns: crate::spec::PerDim::Each(latency),
    })
}

/// What a running sweep reports, for a progress display.
#[derive(Clone, Debug)]
pub enum SweepEvent {
    /// A class is at this stage.
    Working {
        /// The class.
        class: usize,
        /// What it does.
        what: String,
    },
    /// A class is finished.
    Finished {
        /// The class.
        class: usize,
    },
}

impl Plan {
    /// Plans a sweep: checks the spec, builds the healthy network, enumerates the faults and
    /// finds their classes.
    ///
    /// Errors (bad input): a topology other than a torus or fat tree, a collective with its own
    /// ranks or non-uniform blocks (a symmetry must map the collective onto itself), an OCS sweep
    /// on a network without the preset.
    pub fn new(mut setup: SweepSetup) -> Result<Plan> {
        if !matches!(setup.base.topology, TopologySpec::Torus(_) | TopologySpec::FatTree(_)) {
            // A torus however it was given (an ASTRA-sim network of `Ring` dimensions): swept,
            // and written into the class specs, as the `topology.torus` it is.
            let mut healthy_spec = setup.base.clone();
            healthy_spec.faults = FaultsSpec::default();
            let t = healthy_spec.build_topology()?;
            match torus_spec_of(&t) {
                Some(torus) => setup.base.topology = TopologySpec::Torus(torus),
                None => {
                    return Err(Error::bad(format!(
                        "{}: a sweep needs `topology.torus` or `topology.fat_tree` (a torus may also be an ASTRA-sim network of `Ring` dimensions): the symmetries of other topologies are not known",
                        setup.base.source()
                    )))
                }
            }
        }
        let base = &setup.base;
        if base.collective.ranks.is_some() || base.collective.block_bytes.is_some() {
            return Err(Error::bad(format!(
                "{}: collective.ranks and collective.block_bytes: a sweep runs over every npu with uniform blocks, which every symmetry maps onto themselves",
                base.source()
            )));
        }
        let mut healthy_spec = base.clone();
        healthy_spec.faults = FaultsSpec::default();
        // The collective is checked here, once, before any class runs.
        let healthy = healthy_spec.instance()?.topology;
        let cables = Cables::of(&healthy);
        let cases = enumerate(&healthy, &cables, setup.family)?;
        let group = SymmetryGroup::of(&healthy)?;
        let maps: Vec<Vec<u32>> = group.generators.iter().map(|g| cables.permutation(&g.map)).collect();
        let classes = orbits(&cases, &maps);
        let links = LinkTable::of(&healthy)?;
        Ok(Plan { setup, healthy, cables, links, cases, group, classes })
    }

    /// What the index says was swept.
    pub fn header(&self) -> SweepHeader {
        let base = serde_json::to_value(&self.setup.base).expect("a spec serializes");
        SweepHeader {
            topology: base["topology"].clone(),
            collective: base["collective"].clone(),
            faults: self.setup.family.as_str().into(),
            cube: match self.setup.family {
                FaultFamily::Ocs { cube } => Some(cube),
                _ => None,
            },
            time_limit_s: self.setup.synth.time_limit.as_secs_f64(),
            solver: self.setup.synth.solver.name().into(),
            verify_members: self.setup.members.text(),
            seed: self.setup.seed,
            group_order: self.group.order.to_string(),
            generators: self.group.generators.iter().map(|g| g.name.clone()).collect(),
            fault_count: self.cases.len(),
            class_count: self.classes.len(),
        }
    }

    fn cube(&self) -> usize {
        match self.setup.family {
            FaultFamily::Ocs { cube } => cube,
            _ => 4,
        }
    }

    /// The classes shard `shard` takes: `c % count == index` (round robin spreads the large
    /// classes, which come first, over the shards).
    pub fn shard_classes(&self, shard: Option<ShardInfo>) -> Vec<usize> {
        (0..self.classes.len()).filter(|c| shard.is_none_or(|s| c % s.count == s.index)).collect()
    }

    /// Runs the classes of `shard` (all without one) and writes their files and the index into
    /// `out`: all of them, once every class has run, or (on an error) none.
    pub fn run(&self, shard: Option<ShardInfo>, out: &Path, progress: &(dyn Fn(SweepEvent) + Sync)) -> Result<Index> {
        check_output_folder(out)?;
        let set = OutputSet::new();
        let results: Vec<ClassResult> = self
            .shard_classes(shard)
            .into_par_iter()
            .map(|c| {
                let r = self.solve_class(c, out, &set, progress);
                progress(SweepEvent::Finished { class: c });
                r
            })
            .collect::<Result<_>>()?;
        let mut faults: Vec<FaultEntry> = results.iter().flat_map(|r| r.faults.iter().cloned()).collect();
        faults.sort_by_key(|f| f.fault);
        let index =
            Index { format: INDEX_FORMAT.into(), version: 1, sweep: self.header(), shard, classes: results.into_iter().map(|r| r.entry).collect(), faults };
        index.write_all(out, &set)?;
        let stale = stale_class_files(out, &index);
        set.commit()?;
        remove_files(out, &stale)?;
        Ok(index)
    }

    /// The representative's spec: the base spec with the case's faults, as text (`sweep merge`
    /// holds each shard's class spec to it).
    pub(super) fn class_spec(&self, class: usize) -> Result<(Spec, String)> {
        let case = &self.cases[self.classes[class].representative()];
        let mut v = serde_json::to_value(&self.setup.base).expect("a spec serializes");
        let obj = v.as_object_mut().expect("a spec is an object");
        obj.remove("expect");
        obj.insert("description".into(), json!(format!("sweep class {class}: {}", case.name(&self.healthy, &self.cables))));
        obj.insert("faults".into(), case.spec_faults(&self.healthy, &self.cables, self.cube()));
        let limit = self.setup.synth.time_limit.as_secs_f64();
        obj.insert("method".into(), json!({"synthesize": {"solver": self.setup.synth.solver, "time_limit_s": limit}}));
        let text = serde_json::to_string_pretty(&v).expect("json") + "\n";
        let files = ClassFiles::of(class);
        let mut spec = Spec::parse(&text, &files.spec)?;
        // Messages name the spec by its place in the output folder, the same in every shard.
        spec.path = Some(files.spec.into());
        Ok((spec, text))
    }

    fn solve_class(&self, class: usize, out: &Path, set: &OutputSet, progress: &(dyn Fn(SweepEvent) + Sync)) -> Result<ClassResult> {
        let say = |what: &str| progress(SweepEvent::Working { class, what: what.to_string() });
        let (spec, spec_text) = self.class_spec(class)?;
        let files = ClassFiles::of(class);
        set.write_bytes(&out.join(&files.spec), spec_text.as_bytes())?;
        let synthesized = spec.instance().and_then(|inst| {
            say("synthesizing");
            let mut note = |p: &Progress| {
                if let Progress::Trying(what) = p {
                    say(what);
                }
            };
            synthesize(&inst, &self.setup.synth, Objective::Time, &mut note).map(|a| (inst, a))
        });
        let (inst, answer) = match synthesized {
            Ok(x) => x,
            Err(e) if e.exit_code() == ExitCode::Infeasible => return self.without_schedule(class, e.message().to_string()),
            Err(e) => return Err(e.context(format!("class {class} ({})", self.class_name(class)))),
        };
        let mut schedule = answer.schedule;
        add_meta(&mut schedule, json!({"class": class, "representative": self.class_name(class), "chosen": answer.chosen.to_string()}));
        say("writing and certifying");
        let path = out.join(&files.schedule);
        set.write_encoded(&path, |w| write_schedule(w, &schedule).map(drop).map_err(write_error(&path)))?;
        let sha256 = file_sha256(&set.staged_path(&path))?;
        let certified = self.certify(&inst, &schedule, &spec_text, &files, &sha256, out, set)?;
        let status = if answer.limit_reached { ClassStatus::LimitReached } else { ClassStatus::Ok };
        let class_schedule = certified.class_schedule(&files, sha256, answer.chosen.to_string(), &schedule);
        say("checking members");
        let maps = self.member_maps(class)?;
        let verified = self.verify_members(class, &maps, &schedule, &certified.cost)?;
        Ok(self.entries(class, status, None, Some(class_schedule), &maps, &verified))
    }

    /// A class's entry and its faults' entries, as the sweep writes them once the class ended
    /// (`status`, `reason`, its `schedule` entry), with the members' symmetries `maps` and which
    /// mapped members were `verified`.
    fn entries(
        &self,
        class: usize,
        status: ClassStatus,
        reason: Option<String>,
        schedule: Option<ClassSchedule>,
        maps: &[Vec<NodeId>],
        verified: &[bool],
    ) -> ClassResult {
        let faults = self.fault_entries(class, maps, schedule.as_ref(), verified);
        let entry = ClassEntry {
            class,
            representative: self.classes[class].representative(),
            name: self.class_name(class),
            members: self.classes[class].members.len(),
            status,
            reason,
            schedule,
            members_verified: verified.iter().filter(|&&v| v).count(),
        };
        ClassResult { entry, faults }
    }

    /// The entries a sweep writes for a class that ended with `status`, `reason` and `schedule`
    /// (what cannot be re-derived without synthesizing again): its representative, name, member
    /// count and verified members, every member's number, name, faults and symmetry, and the
    /// flags of the members the seed's sample verifies. `sweep merge` holds every shard to them.
    pub(super) fn expected_entries(
        &self,
        class: usize,
        status: ClassStatus,
        reason: Option<String>,
        schedule: Option<ClassSchedule>,
    ) -> Result<(ClassEntry, Vec<FaultEntry>)> {
        let maps = self.member_maps(class)?;
        // The sweep verifies exactly the sample's members of a class with a schedule (or fails).
        let verified = if schedule.is_some() { self.sample(class) } else { Vec::new() };
        let r = self.entries(class, status, reason, schedule, &maps, &verified);
        Ok((r.entry, r.faults))
    }

    fn class_name(&self, class: usize) -> String {
        self.cases[self.classes[class].representative()].name(&self.healthy, &self.cables)
    }

    fn without_schedule(&self, class: usize, reason: String) -> Result<ClassResult> {
        let maps = self.member_maps(class)?;
        Ok(self.entries(class, ClassStatus::Infeasible, Some(reason), None, &maps, &[]))
    }

    /// Verifies the class schedule, writes its bound certificate with the schedule attached and
    /// has the checker re-derive the bounds and hold the schedule to them.
    #[allow(clippy::too_many_arguments)]
    fn certify(
        &self,
        inst: &crate::spec::Instance,
        schedule: &Schedule,
        spec_text: &str,
        files: &ClassFiles,
        sha256: &str,
        out: &Path,
        set: &OutputSet,
    ) -> Result<Certified> {
        let report = verify_schedule(schedule, &VerifyOptions::default())?;
        if !report.is_valid() {
            return Err(Error::internal(format!("{}: the class schedule fails verification: {}", files.schedule, report.findings.failures()[0])));
        }
        let cost = report.cost.expect("verification computes the cost");
        // The same flow budget as the synthesis gives its own certified bound.
        let flow = FlowOptions { time_limit: self.setup.synth.time_limit.mul_f64(0.1).min(Duration::from_secs(20)), ..Default::default() };
        let mut cert = certificate_of_instance(inst, &sha256_hex(spec_text.as_bytes()), &flow);
        let checked = collsched_checker::check_bounds_str(&cert.to_string())
            .map_err(|e| Error::internal(format!("{}: the bound certificate does not check: {e}", files.certificate)))?;
        let certified = Certified::of(&checked, cost);
        let mut attached = schedule_json(certified.cost.bandwidth_ns(), certified.cost.time_ns(), certified.bandwidth_optimal);
        attached["file"] = json!(format!("../{}", files.schedule));
        attached["sha256"] = json!(sha256);
        cert["spec"] = json!(format!("../{}", files.spec));
        cert["schedule"] = attached;
        collsched_checker::check_str(&cert.to_string())
            .map_err(|e| Error::internal(format!("{}: the class schedule does not meet its certified bounds: {e}", files.certificate)))?;
        set.write_bytes(&out.join(&files.certificate), (serde_json::to_string_pretty(&cert).expect("json") + "\n").as_bytes())?;
        Ok(certified)
    }

    /// Where each member's symmetry sends every node, checked to map the representative's
    /// faults onto the member's.
    fn member_maps(&self, class: usize) -> Result<Vec<Vec<NodeId>>> {
        let members = &self.classes[class].members;
        let rep = &self.cases[members[0].case].cables;
        members
            .par_iter()
            .map(|m| {
                let nodes = self.group.node_map(&self.healthy, &m.word);
                let mut image: Vec<Option<u32>> =
                    rep.iter().map(|&c| self.cables.ends(c)).map(|(a, b)| self.cables.find(nodes[a.index()], nodes[b.index()])).collect();
                image.sort_unstable();
                if image.iter().copied().collect::<Option<Vec<u32>>>().as_ref() != Some(&self.cases[m.case].cables) {
                    return Err(Error::internal(format!("class {class}: the symmetry of fault {} does not map the representative's faults onto it", m.case)));
                }
                Ok(nodes)
            })
            .collect()
    }

    /// Verifies and costs the mapped schedules of the members the sample picks; returns, per
    /// member, whether its schedule was verified.
    fn verify_members(&self, class: usize, maps: &[Vec<NodeId>], schedule: &Schedule, expected: &SyncCost) -> Result<Vec<bool>> {
        let members = &self.classes[class].members;
        self.sample(class)
            .into_par_iter()
            .enumerate()
            .map(|(i, chosen)| {
                if !chosen {
                    return Ok(false);
                }
                let g = Automorphism::new(&self.healthy, &self.links, maps[i].clone())?;
                self.verify_member(class, members[i].case, &g, schedule, expected).map(|()| true)
            })
            .collect()
    }

    fn verify_member(&self, class: usize, case: usize, g: &Automorphism, schedule: &Schedule, expected: &SyncCost) -> Result<()> {
        let mut topology = self.healthy.clone();
        let cables = self.cases[case].cables.iter().map(|&c| self.cables.ends(c)).collect();
        FaultPattern { cables, ..Default::default() }.apply(&mut topology)?;
        let mapped = map_schedule(schedule, g, topology)?;
        let report = verify_schedule(&mapped, &VerifyOptions::default())?;
        let name = self.cases[case].name(&self.healthy, &self.cables);
        if !report.is_valid() {
            return Err(Error::internal(format!(
                "class {class}: the schedule mapped onto fault {case} ({name}) fails verification: {}",
                report.findings.failures()[0]
            )));
        }
        let cost = report.cost.expect("verification computes the cost");
        if (cost.time_ns(), cost.bandwidth_ns()) != (expected.time_ns(), expected.bandwidth_ns()) {
            let ns = |c: &SyncCost| to_f64(&c.time_ns());
            return Err(Error::internal(format!(
                "class {class}: the schedule mapped onto fault {case} ({name}) costs {} ns, not {} ns",
                ns(&cost),
                ns(expected)
            )));
        }
        Ok(())
    }

    /// Which members (by position in the class) get their mapped schedule verified; never the
    /// representative, whose schedule is the class's.
    fn sample(&self, class: usize) -> Vec<bool> {
        let n = self.classes[class].members.len();
        let mut chosen = vec![false; n];
        let want = match self.setup.members {
            MemberCheck::None => 0,
            MemberCheck::All => n - 1,
            MemberCheck::Sample(k) => k.min(n - 1),
        };
        // A partial Fisher-Yates shuffle of positions 1..n, seeded by the seed and the class.
        let mut positions: Vec<usize> = (1..n).collect();
        let mut rng = SplitMix(self.setup.seed ^ (class as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for i in 0..want {
            let j = i + (rng.next() % (positions.len() - i) as u64) as usize;
            positions.swap(i, j);
            chosen[positions[i]] = true;
        }
        chosen
    }

    fn fault_entries(&self, class: usize, maps: &[Vec<NodeId>], schedule: Option<&ClassSchedule>, verified: &[bool]) -> Vec<FaultEntry> {
        let cube = self.cube();
        self.classes[class]
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let case = &self.cases[m.case];
                FaultEntry {
                    fault: m.case,
                    name: case.name(&self.healthy, &self.cables),
                    faults: case.spec_faults(&self.healthy, &self.cables, cube),
                    class,
                    symmetry: describe(&self.healthy, &maps[i]),
                    schedule: schedule.map(|s| s.file.clone()),
                    time_ns: schedule.map(|s| s.time_ns),
                    bound_ns: schedule.and_then(|s| s.bound_ns),
                    gap: schedule.and_then(|s| s.gap),
                    verified: verified.get(i).copied().filter(|&v| v),
                }
            })
            .collect()
    }
}

/// A verified class schedule's exact cost and its certified bounds (ns).
pub(super) struct Certified {
    cost: SyncCost,
    bandwidth: Option<collsched_checker::Q>,
    latency: collsched_checker::Q,
    time: Option<collsched_checker::Q>,
    bandwidth_optimal: bool,
}

impl Certified {
    /// The bounds the checker re-derived from a class's certificate (its best bandwidth bound,
    /// its latency claim, its best time bound) with the schedule's cost.
    pub(super) fn of(checked: &collsched_checker::CheckReport, cost: SyncCost) -> Certified {
        let latency = checked.latency_bound.clone().unwrap_or_default();
        let bandwidth = checked.bandwidth_bound.clone();
        let bandwidth_optimal = bandwidth.as_ref().is_some_and(|b| *b == to_checker(&cost.bandwidth_ns()));
        let time = bandwidth.as_ref().and(checked.time_bound.clone());
        Certified { cost, bandwidth, latency, time, bandwidth_optimal }
    }

    /// The class's schedule entry of the index: its files, the candidate chosen, and the
    /// numbers the schedule and its bounds give (`sweep merge` recomputes them to check a
    /// shard's entry).
    pub(super) fn class_schedule(&self, files: &ClassFiles, sha256: String, chosen: String, schedule: &Schedule) -> ClassSchedule {
        ClassSchedule {
            file: files.schedule.clone(),
            sha256,
            certificate: files.certificate.clone(),
            spec: files.spec.clone(),
            chosen,
            steps: schedule.steps.len(),
            pieces: schedule.header.collective.pieces,
            time_ns: to_f64(&self.cost.time_ns()),
            bandwidth_ns: to_f64(&self.cost.bandwidth_ns()),
            bandwidth_bound_ns: self.bandwidth.as_ref().and_then(q_to_f64),
            latency_bound_ns: q_to_f64(&self.latency).unwrap_or(0.0),
            bound_ns: self.bound().as_ref().and_then(q_to_f64),
            gap: self.gap(),
            bandwidth_optimal: self.bandwidth_optimal,
        }
    }

    /// The best time bound: bandwidth plus latency, or a crossing bound where that is larger.
    fn bound(&self) -> Option<collsched_checker::Q> {
        self.time.clone()
    }

    /// `time / bound - 1`.
    fn gap(&self) -> Option<f64> {
        self.bound().and_then(|b| q_to_f64(&(to_checker(&self.cost.time_ns()) / b))).map(|r| r - 1.0)
    }
}

/// A class's entry and its faults' entries.
struct ClassResult {
    entry: ClassEntry,
    faults: Vec<FaultEntry>,
}

/// The files of a class, relative to the output folder.
pub struct ClassFiles {
    /// `schedules/cNNNNN.json`.
    pub schedule: String,
    /// `specs/cNNNNN.spec.json`.
    pub spec: String,
    /// `certificates/cNNNNN.cert.json`.
    pub certificate: String,
}

impl ClassFiles {
    /// The files of class `class`.
    pub fn of(class: usize) -> ClassFiles {
        ClassFiles {
            schedule: format!("schedules/c{class:05}.json"),
            spec: format!("specs/c{class:05}.spec.json"),
            certificate: format!("certificates/c{class:05}.cert.json"),
        }
    }
}

/// Whether the folder `out` holds a library: its `index.json` is a sweep's.
fn holds_library(out: &Path) -> bool {
    // Not through `io`, which would take the file for an input and refuse to write it.
    std::fs::read_to_string(out.join("index.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|v| v.get("format").and_then(Value::as_str) == Some(INDEX_FORMAT))
}

/// Refuses an output folder whose `index.json` is not a sweep's: a file of the user's that the
/// library's index would overwrite (and whose folder a later sweep would then take for a
/// library, removing files named like its class files). Checked before anything is run.
///
/// Errors: bad input, naming the file.
pub(super) fn check_output_folder(out: &Path) -> Result<()> {
    let index = out.join("index.json");
    if std::fs::symlink_metadata(&index).is_ok() && !holds_library(out) {
        return Err(Error::bad(format!(
            "{}: there already, and not a sweep's index (no \"format\": \"{INDEX_FORMAT}\"): the library's index would overwrite it; write the library to another folder (-o) or move the file",
            index.display()
        )));
    }
    Ok(())
}

/// The class files of the library already in `out` (a folder whose `index.json` is a sweep's) that
/// the library `new` does not write: in its `schedules/`, `specs/` and `certificates/`, the files
/// named as a sweep names a class's (`c` and five or more digits, then `.json`, `.spec.json`,
/// `.cert.json`). Removed once `new` is committed, so that the folder holds one library, whose
/// certificates all check; a folder that holds no library is left as it is, but for the files
/// written.
pub(super) fn stale_class_files(out: &Path, new: &Index) -> Vec<PathBuf> {
    if !holds_library(out) {
        return Vec::new();
    }
    let mut written = std::collections::HashSet::new();
    for c in &new.classes {
        let files = ClassFiles::of(c.class);
        written.insert(files.spec);
        if c.schedule.is_some() {
            written.extend([files.schedule, files.certificate]);
        }
    }
    let mut stale = Vec::new();
    for (folder, suffix) in [("schedules", ".json"), ("specs", ".spec.json"), ("certificates", ".cert.json")] {
        let Ok(entries) = std::fs::read_dir(out.join(folder)) else { continue };
        let mut names: Vec<String> = entries.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).collect();
        names.sort();
        for name in names {
            let digits = name.strip_prefix('c').and_then(|n| n.strip_suffix(suffix));
            let a_class_file = digits.is_some_and(|d| d.len() >= 5 && d.bytes().all(|b| b.is_ascii_digit()));
            let relative = format!("{folder}/{name}");
            if a_class_file && out.join(&relative).is_file() && !written.contains(&relative) {
                stale.push(PathBuf::from(relative));
            }
        }
    }
    stale
}

/// Removes the files `stale` (relative to `out`) of an earlier library, then those of its
/// subfolders that this leaves empty.
pub(super) fn remove_files(out: &Path, stale: &[PathBuf]) -> Result<()> {
    if stale.is_empty() {
        return Ok(());
    }
    for f in stale {
        let path = out.join(f);
        std::fs::remove_file(&path).map_err(|e| Error::io(format!("{}: cannot remove this class file of the earlier library: {e}", path.display())))?;
    }
    for folder in ["schedules", "specs", "certificates"] {
        // Only an empty folder is removed; one that still holds anything stays.
        let _ = std::fs::remove_dir(out.join(folder));
    }
    Ok(())
}

fn add_meta(schedule: &mut Schedule, sweep: Value) {
    match schedule.header.meta.as_mut().and_then(Value::as_object_mut) {
        Some(meta) => {
            meta.insert("sweep".into(), sweep);
        }
        None => schedule.header.meta = Some(json!({ "sweep": sweep })),
    }
}

/// The SHA-256 of a file, read as a stream.
pub fn file_sha256(path: &Path) -> Result<String> {
    let mut reader = HashingReader::new(crate::io::open(path)?);
    std::io::copy(&mut reader, &mut std::io::sink()).map_err(|e| Error::bad(format!("{}: cannot read: {e}", path.display())))?;
    Ok(reader.hex_digest())
}

/// SplitMix64 (Steele, Lea and Flood 2014): a small, well-mixed generator, enough to draw a
/// reproducible sample.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
