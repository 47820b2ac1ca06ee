//! Merges the outputs of the shards of one sweep (`collsched sweep --shard K/N`, one per job of
//! a job array) into the output of the whole sweep: byte for byte what one unsharded run
//! writes.
//!
//! The shards must be of one sweep (the same `sweep` header: topology, collective, faults,
//! options, classes) and all present, each once, each holding only the classes of its label.
//! Every class file is copied, and checked first: every schedule against the SHA-256 its shard
//! recorded, every certificate as `proof check` checks it (with the class's spec and schedule),
//! and the class's entry against the numbers its schedule and certificate give.

use super::index::{ClassEntry, Index, ShardInfo, SweepHeader};
use super::lookup::member_symmetry;
use super::run::{file_sha256, Certified, ClassFiles};
use crate::error::{Error, Result};
use crate::io::{write_error, OutputSet};
use crate::proof::{check_certificate, NotChecked};
use crate::spec::Spec;
use crate::topology::LinkId;
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
    let shards: Vec<Index> = dirs.iter().map(|d| Index::read(d)).collect::<Result<_>>()?;
    let first = &shards[0];
    let count = first.shard.map_or(1, |s| s.count);
    let mut seen = vec![None; count];
    for (dir, ix) in dirs.iter().zip(&shards) {
        if ix.sweep != first.sweep {
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
    // entry is what its schedule and certificate give, and every fault entry is its class's.
    let mut copies = Vec::new();
    for (dir, ix) in dirs.iter().zip(&shards) {
        for c in &ix.classes {
            let files = ClassFiles::of(c.class);
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
        check_faults(dir, ix)?;
    }
    // All the files appear together, or none.
    let set = OutputSet::new();
    for (from, to) in &copies {
        copy(from, to, &set)?;
    }
    let index = Index { format: first.format.clone(), version: first.version, sweep: first.sweep.clone(), shard: None, classes, faults };
    index.write_all(out, &set)?;
    set.commit()?;
    Ok(index)
}

/// Checks a shard's fault entries against their classes, as the sweep wrote them: each belongs to
/// a class of the shard, records its class's schedule, time, bound and gap (a symmetry keeps them
/// exactly), and its symmetry carries the class representative's failed links onto its own faults
/// (the check `sweep schedule` makes before it maps a schedule).
fn check_faults(dir: &Path, ix: &Index) -> Result<()> {
    let index_path = dir.join("index.json");
    let mut specs: HashMap<usize, (Spec, Vec<LinkId>)> = HashMap::new();
    for f in &ix.faults {
        let at = |field: &str, why: String| Error::bad(format!("{}: fault {} ({}): field `{field}`: {why}", index_path.display(), f.fault, f.name));
        let class = ix.classes.iter().find(|c| c.class == f.class).ok_or_else(|| at("class", format!("{}: not a class of this shard", f.class)))?;
        let cs = class.schedule.as_ref();
        let expected = [
            ("schedule", serde_json::to_value(&f.schedule), serde_json::to_value(cs.map(|s| &s.file))),
            ("time_ns", serde_json::to_value(f.time_ns), serde_json::to_value(cs.map(|s| s.time_ns))),
            ("bound_ns", serde_json::to_value(f.bound_ns), serde_json::to_value(cs.and_then(|s| s.bound_ns))),
            ("gap", serde_json::to_value(f.gap), serde_json::to_value(cs.and_then(|s| s.gap))),
        ];
        for (field, theirs, class_value) in expected {
            let (theirs, class_value) = (theirs.expect("json"), class_value.expect("json"));
            if theirs != class_value {
                return Err(at(field, format!("{theirs} is not its class's ({class_value}; class {})", f.class)));
            }
        }
        let (spec, down) = match specs.entry(f.class) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let spec = Spec::load(&dir.join(ClassFiles::of(f.class).spec))?;
                let down = spec.build_topology()?.down_links();
                e.insert((spec, down))
            }
        };
        member_symmetry(spec, down, f, &index_path)?;
    }
    Ok(())
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
    for (field, named, own) in
        [("spec", report.spec.as_deref(), &files.spec), ("schedule.file", report.schedule.as_ref().and_then(|s| s.file.as_deref()), &files.schedule)]
    {
        let own = format!("../{own}");
        if named != Some(own.as_str()) {
            let named = named.map_or("nothing".to_string(), |n| format!("\"{n}\""));
            return Err(refused(format!("field `{field}`: names {named}, not the class's {own}")));
        }
    }
    let (schedule, cost) = checked.schedule.ok_or_else(|| refused("field `schedule.file`: no schedule attached".into()))?;
    let entry = c.schedule.as_ref().expect("a class with a schedule");
    let sha256 = report.schedule.as_ref().and_then(|s| s.sha256.clone()).unwrap_or_default();
    let expected = Certified::of(report, cost).class_schedule(&files, sha256, entry.chosen.clone(), &schedule);
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
    let (a, b) = (serde_json::to_value(a).expect("json"), serde_json::to_value(b).expect("json"));
    let each: Vec<String> =
        differences(&a, &b).into_iter().map(|(field, x, y)| format!("`{field}`: {x} in {}, {y} in {}", a_dir.display(), b_dir.display())).collect();
    each.join("; ")
}

/// Copies a file as a file of `set` (a target that is one of the inputs is refused by `io`).
fn copy(from: &Path, to: &Path, set: &OutputSet) -> Result<()> {
    let mut reader = crate::io::open(from)?;
    set.write(to, |w| std::io::copy(&mut reader, w).map(|_| ()).map_err(write_error(to)))
}
