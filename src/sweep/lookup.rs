//! Reads one fault's schedule out of a sweep's output: the class schedule carried through the
//! symmetry the index records for that fault, checked before it is handed out.

use super::index::{ClassEntry, FaultEntry, Index};
use super::patterns::{cables_name, ocs_name};
use crate::error::{Error, Result};
use crate::schedule::mapping::map_schedule;
use crate::schedule::{read_schedule_file_hashed, Schedule};
use crate::spec::{FaultsSpec, Spec};
use crate::topology::symmetry::{read_description, Automorphism};
use crate::topology::{LinkId, NodeId, Topology};
use crate::verify::{verify_schedule, VerifyOptions};
use serde_json::Value;
use std::path::Path;

/// The schedule for the fault named `fault` (its number or its name in the index) of the sweep
/// written to `dir`, verified (rules 1-5) and costing exactly what the class schedule costs.
///
/// Errors: bad input (no such fault, one of another shard's, a class the folder does not hold or
/// the sweep does not have, a class without a schedule, unreadable files, a class
/// schedule changed since the sweep, one that does not verify or costs other than the index
/// says, or a symmetry that does not carry the class's faults onto the fault's); internal (the
/// mapped schedule of a class schedule that verified fails verification or costs otherwise).
pub fn member_schedule(dir: &Path, fault: &str) -> Result<(FaultEntry, Schedule)> {
    let index = Index::read(dir)?;
    let entry = index
        .faults
        .iter()
        .find(|f| same_fault(&f.name, fault) || fault.parse::<usize>().is_ok_and(|n| n == f.fault))
        .cloned()
        .ok_or_else(|| not_in_index(dir, &index, fault))?;
    let class = class_of(dir, &index, &entry)?;
    let cs = class.schedule.as_ref().ok_or_else(|| {
        Error::infeasible(format!(
            "fault {} ({}): its class {} has no schedule: {}",
            entry.fault,
            entry.name,
            entry.class,
            class.reason.as_deref().unwrap_or("")
        ))
    })?;
    let class_path = dir.join(&cs.file);
    let (class_schedule, sha256) = read_schedule_file_hashed(&class_path)?;
    if sha256 != cs.sha256 {
        return Err(Error::bad(format!("{}: changed since the sweep wrote it (its SHA-256 differs from the index's)", class_path.display())));
    }
    // The class schedule is an input: one that does not verify, or costs other than the index
    // says, is a library changed since the sweep wrote it (the index's SHA-256 edited with it),
    // not a mapping of ours that broke it.
    let before = verify_schedule(&class_schedule, &VerifyOptions::default())?;
    if !before.is_valid() {
        let failure = before.findings.failures().first().map_or("a rule fails".to_string(), ToString::to_string);
        return Err(Error::bad(format!(
            "{}: the class schedule of fault {} ({}) does not verify: {failure} (the library changed since the sweep wrote it?)",
            class_path.display(),
            entry.fault,
            entry.name
        )));
    }
    let time_ns = before.cost.as_ref().map(|c| crate::units::to_f64(&c.time_ns()));
    if time_ns != Some(cs.time_ns) {
        return Err(Error::bad(format!(
            "{}: the class schedule costs {} ns, where the index's class {} says {} ns (the library changed since the sweep wrote it?)",
            class_path.display(),
            time_ns.map_or("nothing".into(), |t| t.to_string()),
            entry.class,
            cs.time_ns
        )));
    }
    let spec = Spec::load(&dir.join(&cs.spec))?;
    let (g, member_topology) = member_symmetry(&spec, &class_schedule.header.topology.down_links(), &entry, &dir.join("index.json"))?;
    check_name(&entry, &member_topology, &dir.join("index.json"))?;
    let mapped = map_schedule(&class_schedule, &g, member_topology)?;
    let after = verify_schedule(&mapped, &VerifyOptions::default())?;
    let cost = |r: &crate::verify::Report| r.cost.as_ref().map(|c| (c.time_ns(), c.bandwidth_ns()));
    if !after.is_valid() || cost(&before) != cost(&after) {
        return Err(Error::internal(format!("fault {} ({}): the mapped class schedule does not verify or costs otherwise", entry.fault, entry.name)));
    }
    Ok((entry, mapped))
}

/// Refuses a fault entry whose `name` is not that of its faults (the network `member` with them
/// applied): a fault asked for by name must be the one whose faults it names. An OCS is named by
/// its dimension and position (`ocs dim 2 (2,3)`), cables by their ends (`(0,0)-(1,0) + ...`, in
/// any order and either way round).
fn check_name(entry: &FaultEntry, member: &Topology, index: &Path) -> Result<()> {
    let ocs = entry.faults.get("ocs").and_then(Value::as_array).and_then(|a| a.first()).and_then(|o| o.get("tpuv4"));
    let expected = match ocs {
        Some(o) => {
            let dim = o.get("dim").and_then(Value::as_u64).map_or(usize::MAX, |d| d as usize);
            let position: Vec<usize> =
                o.get("position").and_then(Value::as_array).map_or(Vec::new(), |p| p.iter().filter_map(|x| x.as_u64().map(|x| x as usize)).collect());
            ocs_name(dim, &position)
        }
        None => {
            let mut cables: Vec<(NodeId, NodeId)> =
                member.down_links().into_iter().map(|l| member.link(l)).map(|l| (l.src.min(l.dst), l.src.max(l.dst))).collect();
            cables.sort_unstable();
            cables.dedup();
            cables_name(member, cables.into_iter())
        }
    };
    let same = if ocs.is_some() { expected == entry.name } else { same_fault(&expected, &entry.name) };
    if !same {
        return Err(Error::bad(format!(
            "{}: fault {}: field `name`: \"{}\", where its faults give \"{expected}\" (the library changed since the sweep wrote it?)",
            index.display(),
            entry.fault,
            entry.name
        )));
    }
    Ok(())
}

/// The error for a fault the index of `dir` does not list: in a shard's folder, that it may be
/// another shard's.
fn not_in_index(dir: &Path, index: &Index, fault: &str) -> Error {
    let numbered = fault.parse::<usize>().ok();
    match index.shard {
        Some(s) if numbered.is_none_or(|n| n < index.sweep.fault_count) => Error::bad(format!(
            "{}: no fault numbered or named {fault:?} in this shard's index (shard {}/{}): {}another shard's folder lists it (or ask the merged folder, `collsched sweep merge`)",
            dir.display(),
            s.index,
            s.count,
            if numbered.is_some() { "" } else { "if it is a fault of this sweep, " }
        )),
        _ => Error::bad(format!("{}: no fault numbered or named {fault:?} in the index ({} faults)", dir.display(), index.sweep.fault_count)),
    }
}

/// The class entry of `entry`'s class, looked up by its number (a shard's folder holds only the
/// classes c with c % N == K): bad input when the index names a class that does not exist or
/// that this folder does not hold.
fn class_of<'a>(dir: &Path, index: &'a Index, entry: &FaultEntry) -> Result<&'a ClassEntry> {
    let at = || format!("{}: fault {} ({}): class {}", dir.join("index.json").display(), entry.fault, entry.name, entry.class);
    if let Some(class) = index.classes.iter().find(|c| c.class == entry.class) {
        return Ok(class);
    }
    if entry.class >= index.sweep.class_count {
        return Err(Error::bad(format!(
            "{}: no such class (the sweep has {} classes, 0 to {})",
            at(),
            index.sweep.class_count,
            index.sweep.class_count.saturating_sub(1)
        )));
    }
    Err(Error::bad(match index.shard {
        Some(s) if entry.class % s.count != s.index => {
            format!("{}: not in this folder (shard {}/{}): the folder of shard {}/{} holds it", at(), s.index, s.count, entry.class % s.count, s.count)
        }
        Some(s) => format!("{}: this shard's folder (shard {}/{}) lacks its class (the index changed since the sweep wrote it?)", at(), s.index, s.count),
        None => format!("{}: the index lists no such class (the index changed since the sweep wrote it?)", at()),
    }))
}

/// A fault's symmetry and network (the class spec's network with the fault's own faults), the
/// symmetry checked to carry `class_down`, the failed links of its class's representative, onto
/// the fault's: what `sweep schedule` maps a class schedule through (`sweep merge` holds every
/// fault's symmetry to the one the sweep, planned again, gives). `index` names the index in
/// messages.
pub(crate) fn member_symmetry(class_spec: &Spec, class_down: &[LinkId], entry: &FaultEntry, index: &Path) -> Result<(Automorphism, Topology)> {
    let mut spec = class_spec.clone();
    spec.faults = FaultsSpec::default();
    let healthy = spec.build_topology()?;
    let mut value = serde_json::to_value(&spec).expect("a spec serializes");
    value["faults"] = entry.faults.clone();
    let member_topology = Spec::parse(&value.to_string(), &format!("{}: fault {}", index.display(), entry.fault))?.build_topology()?;
    let g = read_description(&healthy, &entry.symmetry).map_err(|e| e.context(format!("{}: fault {}", index.display(), entry.fault)))?;
    // The index's symmetry must carry the class's failed links onto the fault's, or the
    // schedule it maps would use links that are down (an index edited since the sweep).
    let mut carried: Vec<_> = class_down.iter().map(|&l| g.link(l)).collect();
    carried.sort();
    if carried != member_topology.down_links() {
        return Err(Error::bad(format!(
            "{}: fault {} ({}): its `symmetry` does not carry the class's failed links onto the fault's (the index changed since the sweep wrote it?)",
            index.display(),
            entry.fault,
            entry.name
        )));
    }
    Ok((g, member_topology))
}

/// Whether `given` names the fault named `name` in an index (`(0,0)-(1,0)`,
/// `npu3-leaf0 + leaf0-spine1`, `ocs dim 2 (2,3)`): a cable is undirected, so its two ends may
/// come in either order, and the cables of a pair in either order.
fn same_fault(name: &str, given: &str) -> bool {
    // `given`'s cable read the other way round: its two ends swapped at one of its dashes (a node
    // name may hold a dash of its own; only the swap that gives an indexed cable matters).
    let same_cable = |indexed: &str, given: &str| {
        indexed == given || given.match_indices('-').any(|(i, _)| indexed.len() == given.len() && indexed == format!("{}-{}", &given[i + 1..], &given[..i]))
    };
    let (indexed, given): (Vec<&str>, Vec<&str>) = (name.split(" + ").collect(), given.split(" + ").collect());
    if indexed.len() != given.len() {
        return false;
    }
    let mut used = vec![false; indexed.len()];
    given.iter().all(|g| match indexed.iter().enumerate().position(|(i, c)| !used[i] && same_cable(c, g)) {
        Some(i) => {
            used[i] = true;
            true
        }
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::same_fault;

    #[test]
    fn a_cable_is_named_in_either_order() {
        assert!(same_fault("(0,0)-(1,0)", "(0,0)-(1,0)"));
        assert!(same_fault("(0,0)-(1,0)", "(1,0)-(0,0)"));
        assert!(same_fault("npu3-leaf0 + leaf0-spine1", "spine1-leaf0 + leaf0-npu3"));
        assert!(same_fault("npu3-leaf0 + leaf0-spine1", "leaf0-npu3 + leaf0-spine1"));
        assert!(!same_fault("(0,0)-(1,0)", "(0,0)-(2,0)"));
        assert!(!same_fault("npu3-leaf0 + leaf0-spine1", "npu3-leaf0"));
        assert!(!same_fault("npu3-leaf0 + leaf0-spine1", "npu3-leaf0 + npu3-leaf0"));
        assert!(same_fault("ocs dim 2 (2,3)", "ocs dim 2 (2,3)"));
    }
}
