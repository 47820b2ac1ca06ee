//! Merges the outputs of the shards of one sweep (`collsched sweep --shard K/N`, one per job of
//! a job array) into the output of the whole sweep: byte for byte what one unsharded run
//! writes.
//!
//! The shards must be of one sweep (the same `sweep` header: topology, collective, faults,
//! options, classes, compared by value) and all present, each once, each holding only the
//! classes of its label. The sweep is planned again from the header, with the code the sweep
//! runs, and every shard is held to it: each class's representative, name, member count and
//! spec file, each fault's number, name, faults, class, symmetry and verified flag. Every class
//! file is copied, and checked first: every schedule against the SHA-256 its shard recorded,
//! every certificate as `proof check` checks it (with the class's spec and schedule), and the
//! class's entry against the numbers its schedule and certificate give. What only a synthesis
//! again would tell (whether a class is `ok`, reached its limit or is infeasible) is held to the
//! files: a class with a schedule has its schedule and certificate, one without has neither.

use super::index::{ClassEntry, ClassStatus, FaultEntry, Index, ShardInfo, SweepHeader};
use super::run::{file_sha256, remove_files, stale_class_files, Certified, ClassFiles, Plan, SweepSetup};
use crate::error::{Error, Result};
use crate::io::{write_error, OutputSet};
use crate::proof::{check_certificate, NotChecked};
use crate::spec::Bytes;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Merges the shard folders `dirs` into `out` and returns the merged index.
///
/// Errors (bad input): an unreadable index, shards of different sweeps (the fields that differ
/// named), a shard missing or given twice, a class in a shard whose label does not take it, a
/// fault entry that is not its class's (another time, bound, gap or schedule, a symmetry that
/// does not carry the class's faults onto its own), a class file missing or changed since its
/// shard wrote it, a class certificate that does not check (or not for the class's spec and
/// schedule), a class entry whose numbers are not those its schedule and certificate give.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Index> {
    if dirs.is_empty() {
        return Err(Error::bad("sweep merge: give the shard folders to merge"));
    }
    super::run::check_output_folder(out)?;
    let shards: Vec<Index> = dirs.iter().map(|d| Index::read(d)).collect::<Result<_>>()?;
    let first = &shards[0];
    let count = first.shard.map_or(1, |s| s.count);
    let mut seen = vec![None; count];
    for (dir, ix) in dirs.iter().zip(&shards) {
        if by_value(&ix.sweep) != by_value(&first.sweep) {
            return Err(Error::bad(format!(
                "{}: a shard of another sweep than {} (the `sweep` headers differ: {})",
                dir.display(),
                dirs[0].display(),
                header_difference(&ix.sweep, dir, &first.sweep, &dirs[0])
            )));
        }
        let s = ix.shard.unwrap_or(ShardInfo { index: 0, count: 1 });
        if s.count != count || s.index >= count {
            return Err(Error::bad(format!("{}: shard {}/{} of a sweep that {} splits into {count}", dir.display(), s.index, s.count, dirs[0].display())));
        }
        if let Some(c) = ix.classes.iter().find(|c| c.class % s.count != s.index) {
            return Err(Error::bad(format!(
                "{}: class {}: not of shard {}/{count}, as the index labels it (shard {}/{count} holds the classes c with c % {count} = {})",
                dir.join("index.json").display(),
                c.class,
                s.index,
                c.class % count,
                c.class % count
            )));
        }
        if let Some(other) = seen[s.index].replace(dir) {
            return Err(Error::bad(format!("{} and {}: both are shard {}/{count}", other.display(), dir.display(), s.index)));
        }
    }
    if let Some(missing) = seen.iter().position(Option::is_none) {
        return Err(Error::bad(format!("sweep merge: shard {missing}/{count} is missing (give every shard's folder)")));
    }
    let mut classes: Vec<_> = shards.iter().flat_map(|s| s.classes.iter().cloned()).collect();
    classes.sort_by_key(|c| c.class);
    let mut faults: Vec<_> = shards.iter().flat_map(|s| s.faults.iter().cloned()).collect();
    faults.sort_by_key(|f| f.fault);
    let complete = classes.iter().enumerate().all(|(i, c)| c.class == i) && faults.iter().enumerate().all(|(i, f)| f.fault == i);
    if !complete || classes.len() != first.sweep.class_count || faults.len() != first.sweep.fault_count {
        return Err(Error::bad(format!(
            "sweep merge: the shards hold {} classes and {} faults, not each of the sweep's {} classes and {} faults once",
            classes.len(),
            faults.len(),
            first.sweep.class_count,
            first.sweep.fault_count
        )));
    }
    // Every input is checked before anything is written: the class files are there, each
    // schedule still has the SHA-256 its shard recorded, each certificate checks, each class
    // entry is what its schedule and certificate give, and every class and fault entry is what
    // the sweep, planned again from the header, writes.
    let mut plans: Vec<(&SweepHeader, Plan)> = Vec::new();
    let mut copies = Vec::new();
    for (dir, ix) in dirs.iter().zip(&shards) {
        let plan = match plans.iter().position(|(h, _)| **h == ix.sweep) {
            Some(i) => &plans[i].1,
            None => {
                plans.push((&ix.sweep, replan(dir, &ix.sweep)?));
                &plans.last().expect("just pushed").1
            }
        };
        for c in &ix.classes {
            let files = ClassFiles::of(c.class);
            check_status(dir, c)?;
            check_spec(dir, c, plan)?;
            let mut names = vec![&files.spec];
            if let Some(s) = &c.schedule {
                let sha = file_sha256(&dir.join(&s.file))?;
                if sha != s.sha256 {
                    return Err(Error::bad(format!(
                        "{}: changed since its shard wrote it (its SHA-256 differs from the index's)",
                        dir.join(&s.file).display()
                    )));
                }
                names.extend([&files.schedule, &files.certificate]);
            }
            for name in names {
                let from = dir.join(name);
                if !from.is_file() {
                    return Err(Error::bad(format!("{}: cannot read: no such file (its shard's index lists it)", from.display())));
                }
                copies.push((from, out.join(name)));
            }
            if c.schedule.is_some() {
                check_class(dir, c)?;
            }
        }
    }
    for (dir, ix) in dirs.iter().zip(&shards) {
        let plan = &plans.iter().find(|(h, _)| **h == ix.sweep).expect("planned above").1;
        check_entries(dir, ix, plan)?;
    }
    // All the files appear together, or none. Shards whose headers spell a value differently
    // (`"1MiB"`, 1048576) merge under shard 0's, whatever the order they are given in.
    let header = &shards[dirs.iter().position(|d| seen[0] == Some(d)).expect("shard 0 is there")].sweep;
    let set = OutputSet::new();
    for (from, to) in &copies {
        copy(from, to, &set)?;
    }
    let index = Index { format: first.format.clone(), version: first.version, sweep: header.clone(), shard: None, classes, faults };
    index.write_all(out, &set)?;
    let stale = stale_class_files(out, &index);
    set.commit()?;
    remove_files(out, &stale)?;
    Ok(index)
}

/// The sweep a shard's header describes, planned again as the sweep plans it; its header must
/// be the shard's (the symmetry group, its generators and the counts follow from the rest).
fn replan(dir: &Path, header: &SweepHeader) -> Result<Plan> {
    let index_path = dir.join("index.json");
    let source = index_path.display().to_string();
    let plan = Plan::new(SweepSetup::of_header(header, &source)?).map_err(|e| e.context(format!("{source}: field `sweep`")))?;
    let (theirs, ours) = (serde_json::to_value(header).expect("json"), serde_json::to_value(plan.header()).expect("json"));
    if let Some((field, theirs, ours)) = differences(&theirs, &ours).into_iter().next() {
        return Err(Error::bad(format!("{source}: field `sweep.{field}`: {theirs}, where the sweep the header describes gives {ours}")));
    }
    Ok(plan)
}

/// A class's status agrees with its files: `ok` and `limit_reached` have a `schedule` entry and
/// no `reason`; `infeasible` has a `reason`, no `schedule` entry and no schedule or certificate
/// file in the shard's folder.
fn check_status(dir: &Path, c: &ClassEntry) -> Result<()> {
    let at = |field: &str, why: String| Error::bad(format!("{}: class {} ({}): field `{field}`: {why}", dir.join("index.json").display(), c.class, c.name));
    let status = serde_json::to_value(c.status).expect("json");
    match (c.status, &c.schedule, &c.reason) {
        (ClassStatus::Ok | ClassStatus::LimitReached, None, _) => Err(at("status", format!("{status}, but the class has no `schedule`"))),
        (ClassStatus::Ok | ClassStatus::LimitReached, Some(_), Some(r)) => Err(at("reason", format!("{:?}: a class with a schedule has no reason", r))),
        (ClassStatus::Infeasible, Some(_), _) => Err(at("status", format!("{status}, but the class has a `schedule`"))),
        (ClassStatus::Infeasible, None, None) => Err(at("reason", "absent: an infeasible class says why".into())),
        (ClassStatus::Infeasible, None, Some(_)) => {
            let files = ClassFiles::of(c.class);
            match [files.schedule, files.certificate].into_iter().find(|f| dir.join(f).exists()) {
                Some(f) => Err(at("status", format!("{status}, but the folder holds its {f}"))),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// A class's spec file is the one the sweep writes for it (the header's topology and
/// collective with the representative's faults, its method and description).
fn check_spec(dir: &Path, c: &ClassEntry, plan: &Plan) -> Result<()> {
    let path = dir.join(ClassFiles::of(c.class).spec);
    if c.class >= plan.classes.len() {
        return Err(Error::bad(format!("{}: class {}: no such class (the sweep has {})", dir.join("index.json").display(), c.class, plan.classes.len())));
    }
    let (_, expected) = plan.class_spec(c.class)?;
    if crate::io::read_bytes(&path)? != expected.as_bytes() {
        return Err(Error::bad(format!(
            "{}: not the spec the sweep writes for class {} (the header's topology and collective with the faults of fault {}): changed since its shard wrote it",
            path.display(),
            c.class,
            plan.classes[c.class].representative()
        )));
    }
    Ok(())
}

/// Holds every class and fault entry of a shard to the sweep planned again from its header:
/// each class's representative, name, member count and verified members; each fault's class,
/// name, faults, symmetry, schedule numbers (its class's) and verified flag. Names the folder,
/// the class or fault, the field and both values.
fn check_entries(dir: &Path, ix: &Index, plan: &Plan) -> Result<()> {
    let index_path = dir.join("index.json");
    let mut expected: HashMap<usize, FaultEntry> = HashMap::new();
    for c in &ix.classes {
        let (entry, faults) = plan.expected_entries(c.class, c.status, c.reason.clone(), c.schedule.clone())?;
        let (theirs, ours) = (serde_json::to_value(c).expect("json"), serde_json::to_value(&entry).expect("json"));
        if let Some((field, theirs, ours)) = differences(&theirs, &ours).into_iter().next() {
            return Err(Error::bad(format!(
                "{}: class {} ({}): field `{field}`: {theirs}, where the sweep gives {ours}",
                index_path.display(),
                c.class,
                c.name
            )));
        }
        expected.extend(faults.into_iter().map(|f| (f.fault, f)));
    }
    let owner: HashMap<usize, usize> = plan.classes.iter().enumerate().flat_map(|(c, class)| class.members.iter().map(move |m| (m.case, c))).collect();
    for f in &ix.faults {
        let at = |field: &str, why: String| Error::bad(format!("{}: fault {} ({}): field `{field}`: {why}", index_path.display(), f.fault, f.name));
        let Some(&class) = owner.get(&f.fault) else {
            return Err(at("fault", format!("{}: the sweep has {} faults, 0 to {}", f.fault, plan.cases.len(), plan.cases.len().saturating_sub(1))));
        };
        if f.class != class {
            return Err(at("class", format!("{}, where the sweep puts the fault in class {class}", f.class)));
        }
        let ours = expected.get(&f.fault).ok_or_else(|| at("class", format!("{}: not a class of this shard", f.class)))?;
        let (theirs, ours) = (serde_json::to_value(f).expect("json"), serde_json::to_value(ours).expect("json"));
        if let Some((field, theirs, ours)) = differences(&theirs, &ours).into_iter().next() {
            return Err(at(&field, format!("{theirs}, where the sweep gives {ours} (class {})", f.class)));
        }
    }
    Ok(())
}

/// A `sweep` header as its values: a size in bytes as its number (`"1MiB"` and 1048576 alike).
fn by_value(h: &SweepHeader) -> Value {
    let mut v = serde_json::to_value(h).expect("json");
    for field in ["bytes_per_rank", "block_bytes"] {
        if let Some(size) = v["collective"].get_mut(field) {
            if let Ok(Bytes::Text(t)) = serde_json::from_value::<Bytes>(size.clone()) {
                if let Ok(n) = crate::units::parse_bytes(&t) {
                    *size = Value::from(n);
                }
            }
        }
    }
    v
}

/// Checks a class that has a schedule: its certificate holds as `proof check` checks it (the
/// checker re-derives every claim; the spec and schedule it names still hash the same, describe
/// its instance, verify and cost what is claimed), it names the class's own spec and schedule,
/// and the class's entry is what the sweep writes from them (cost, bounds, gap, steps, pieces),
/// compared as the index stores them.
fn check_class(dir: &Path, c: &ClassEntry) -> Result<()> {
    let files = ClassFiles::of(c.class);
    let cert_path = dir.join(&files.certificate);
    let refused = |why: String| Error::bad(format!("{}: class {} ({}): {}: {why}", dir.display(), c.class, c.name, files.certificate));
    // The checker's messages start with the certificate's path, which `refused` already names.
    let own = |why: String| why.strip_prefix(&format!("{}: ", cert_path.display())).map(str::to_string).unwrap_or(why);
    let checked = check_certificate(&cert_path, false).map_err(|e| match e {
        NotChecked::Unreadable(why) => refused(format!("not a readable certificate: {}", own(why))),
        NotChecked::Fails(why) => refused(format!("does not check: {}", own(why))),
    })?;
    let report = &checked.report;
    // The sweep writes each claim at the value the checker derives, pretty-printed: a weaker claim
    // (a lower bound below the derived one still holds) or a file written otherwise is not the
    // sweep's, and the merged library would differ from the unsharded run's.
    if let Some(claim) = report.claims.iter().find(|cl| cl.claimed != cl.derived) {
        return Err(refused(format!(
            "claim {} ({}): value {}, where the sweep writes the value the checker derives, {}",
            claim.index, claim.bound, claim.claimed, claim.derived
        )));
    }
    let text = crate::io::read_to_string(&cert_path)?;
    let canonical = serde_json::from_str::<Value>(&text).map(|v| serde_json::to_string_pretty(&v).expect("json") + "\n");
    if canonical.ok().as_deref() != Some(text.as_str()) {
        return Err(refused("not as the sweep writes it (pretty-printed JSON, one value per line as written by serde_json)".into()));
    }
    for (field, named, own) in
        [("spec", report.spec.as_deref(), &files.spec), ("schedule.file", report.schedule.as_ref().map(|s| s.file.as_str()), &files.schedule)]
    {
        let own = format!("../{own}");
        if named != Some(own.as_str()) {
            let named = named.map_or("nothing".to_string(), |n| format!("\"{n}\""));
            return Err(refused(format!("field `{field}`: names {named}, not the class's {own}")));
        }
    }
    let (schedule, cost) = checked.schedule.ok_or_else(|| refused("field `schedule.file`: no schedule attached".into()))?;
    let entry = c.schedule.as_ref().expect("a class with a schedule");
    let sha256 = report.schedule.as_ref().map(|s| s.sha256.clone()).unwrap_or_default();
    // The candidate chosen is recorded in the schedule too (`meta.sweep`, with the class), which
    // its SHA-256 and the certificate hold.
    let meta = schedule.header.meta.as_ref().and_then(|m| m.get("sweep"));
    if meta.and_then(|m| m.get("class")).and_then(Value::as_u64) != Some(c.class as u64) {
        return Err(Error::bad(format!("{}: field `meta.sweep.class`: not class {} (not the class's schedule)", dir.join(&files.schedule).display(), c.class)));
    }
    let chosen = meta.and_then(|m| m.get("chosen")).and_then(Value::as_str).unwrap_or_default().to_string();
    let expected = Certified::of(report, cost).class_schedule(&files, sha256, chosen, &schedule);
    let (theirs, ours) = (serde_json::to_value(entry).expect("json"), serde_json::to_value(&expected).expect("json"));
    if let Some((field, theirs, ours)) = differences(&theirs, &ours).into_iter().next() {
        return Err(Error::bad(format!(
            "{}: class {} ({}): field `schedule.{field}`: {theirs}, where its schedule and certificate give {ours}",
            dir.join("index.json").display(),
            c.class,
            c.name
        )));
    }
    Ok(())
}

/// The fields of two JSON objects whose values differ (by name), with both values as JSON
/// (`absent` where an object lacks the field).
fn differences(a: &Value, b: &Value) -> Vec<(String, String, String)> {
    let empty = serde_json::Map::new();
    let (a, b) = (a.as_object().unwrap_or(&empty), b.as_object().unwrap_or(&empty));
    let show = |v: Option<&Value>| v.map_or("absent".to_string(), Value::to_string);
    let mut fields: Vec<&String> = a.keys().chain(b.keys()).collect();
    fields.sort();
    fields.dedup();
    fields.into_iter().filter(|k| a.get(*k) != b.get(*k)).map(|k| (k.clone(), show(a.get(k)), show(b.get(k)))).collect()
}

/// Which fields of two shards' `sweep` headers differ, and how: `` `faults`: "cables" in A,
/// "pairs" in B ``.
fn header_difference(a: &SweepHeader, a_dir: &Path, b: &SweepHeader, b_dir: &Path) -> String {
    let (a, b) = (by_value(a), by_value(b));
    let each: Vec<String> =
        differences(&a, &b).into_iter().map(|(field, x, y)| format!("`{field}`: {x} in {}, {y} in {}", a_dir.display(), b_dir.display())).collect();
    each.join("; ")
}

/// Copies a file as a file of `set` (a target that is one of the inputs is refused by `io`).
fn copy(from: &Path, to: &Path, set: &OutputSet) -> Result<()> {
    let mut reader = crate::io::open(from)?;
    set.write(to, |w| std::io::copy(&mut reader, w).map(|_| ()).map_err(write_error(to)))
}
