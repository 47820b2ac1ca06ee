//! `collsched bound` and `collsched proof check`: writing certificates, and re-checking them
//! with the independent checker plus the checks that tie a certificate to its files (the spec
//! still hashes the same and describes the same instance; an attached schedule still costs what
//! the certificate says).

use crate::bounds::certificate::{certificate_for, schedule_json};
use crate::bounds::certified::crossing_binds;
use crate::error::{Error, ExitCode, Result};
use crate::proof::{check_certificate, read_attached, verify_attached, NotChecked};
use crate::spec::Spec;
use crate::units::to_checker;
use serde_json::{json, Value};
use std::path::{Component, Path, PathBuf};

/// `path` made absolute against the working folder, with `.` and `..` folded away lexically (the
/// folder of an output may not exist yet, so it cannot be canonicalized).
fn absolute(path: &Path) -> PathBuf {
    // An empty path (the folder of a bare file name) is the working folder.
    let path = if path.as_os_str().is_empty() { Path::new(".") } else { path };
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` as the file system resolves it: its longest existing ancestor canonicalized (symbolic
/// links followed), the rest appended (the folders of an output may not exist yet).
fn resolved(path: &Path) -> PathBuf {
    let abs = absolute(path);
    for (n, ancestor) in abs.ancestors().enumerate() {
        if let Ok(real) = std::fs::canonicalize(ancestor) {
            let rest: Vec<Component> = abs.components().collect();
            return rest[rest.len() - n..].iter().fold(real, |p, c| p.join(c));
        }
    }
    abs
}

/// The file `target` relative to the folder `base`, both resolved through symbolic links first
/// (the file's folder, not the file: a spec that is a link is named as the link), which is how a
/// certificate names its spec and schedule (docs/design/CLI.md, `proof check`): relative to the
/// folder the certificate really lands in, whatever the working folder or the links on the way,
/// so that a copied folder checks its own files.
fn relative(target: &Path, base: &Path) -> String {
    let target = match (target.parent(), target.file_name()) {
        (Some(dir), Some(name)) => resolved(dir).join(name),
        _ => resolved(target),
    };
    let (t, b) = (target, resolved(base));
    let tc: Vec<Component> = t.components().collect();
    let bc: Vec<Component> = b.components().collect();
    let common = tc.iter().zip(&bc).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..bc.len() {
        out.push("..");
    }
    for c in &tc[common..] {
        out.push(c);
    }
    out.to_string_lossy().into_owned()
}

/// Computes the bounds of a spec, prints them, and writes the certificate when asked. A spec
/// built from shorthand flags has no file for the certificate to name and hash: with
/// `certificate`, it is written beside it (`X.cert.json` -> `X.spec.json`).
pub fn bound(spec: &Spec, certificate: Option<&Path>, schedule: Option<&Path>, json_out: bool) -> Result<ExitCode> {
    let inst = spec.instance()?;
    let (spec_path, bytes) = match (&spec.path, certificate) {
        (Some(p), _) => (p.clone(), crate::io::read_bytes(p)?),
        (None, Some(out)) => {
            let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let stem = name.strip_suffix(".cert.json").or_else(|| name.strip_suffix(".json")).unwrap_or(&name);
            (out.with_file_name(format!("{stem}.spec.json")), spec.to_json_string().into_bytes())
        }
        (None, None) => (PathBuf::from("spec"), spec.to_json_string().into_bytes()),
    };
    let mut cert = certificate_for(spec, &bytes)?;
    // The folder the certificate really lands in (through a symbolic link, its target's), which
    // it names its files relative to.
    let cert_folder = certificate.map(|out| crate::io::output_target(out).map(|p| p.parent().unwrap_or(Path::new(".")).to_path_buf())).transpose()?;
    let report =
        collsched_checker::check_bounds_str(&cert.to_string()).map_err(|e| Error::internal(format!("the certificate we built does not check: {e}")))?;
    let best = report.bandwidth_bound.clone();
    if let Some(sched_path) = schedule {
        let (s, sha256) = read_attached(sched_path, || Ok(Some(inst.clone())))?;
        let r =
            verify_attached(&s, spec, &inst).map_err(|e| Error::bad(format!("{}: the schedule is not for the spec's instance: {e}", sched_path.display())))?;
        if !r.is_valid() {
            return Err(Error::bad(format!("{}: the schedule fails verification: {}", sched_path.display(), r.findings.failures()[0])));
        }
        let c = r.cost.expect("verification computes the cost");
        let optimal = best.as_ref().is_some_and(|b| &to_checker(&c.bandwidth_ns()) == b);
        let mut attach = schedule_json(c.bandwidth_ns(), c.time_ns(), optimal);
        if let Some(folder) = &cert_folder {
            attach["file"] = json!(relative(sched_path, folder));
            attach["sha256"] = json!(sha256);
        }
        cert["schedule"] = attach;
    }
    if let (Some(out), Some(folder)) = (certificate, &cert_folder) {
        cert["spec"] = json!(relative(&spec_path, folder));
        collsched_checker::check_str(&cert.to_string()).map_err(|e| Error::bad(format!("the schedule does not meet the bounds: {e}")))?;
        // The spec built from flags and the certificate that names it appear together or not at
        // all: a certificate that cannot be written takes the spec written beside it away.
        let files = crate::io::OutputSet::new();
        if spec.path.is_none() {
            files.write_bytes(&spec_path, &bytes)?;
        }
        let text = serde_json::to_string_pretty(&cert).expect("json");
        files.write_bytes(out, text.as_bytes())?;
        files.commit()?;
        if spec.path.is_none() {
            eprintln!("wrote {}", spec_path.display());
        }
        eprintln!("wrote {}", out.display());
    }
    let claims: Vec<Value> = cert["claims"].as_array().cloned().unwrap_or_default();
    if json_out {
        // The time bound (docs/design/MODEL.md section 6) as the checker derived it, exactly.
        let time = report.time_bound.as_ref().map(|t| t.to_string());
        println!(
            "{}",
            json!({"spec_sha256": cert["spec_sha256"], "claims": claims, "schedule": cert.get("schedule"),
                "time_bound_ns": time, "time_bound_is_crossing": crossing_binds(&report)})
        );
    } else {
        println!("lower bounds for {} over {} ranks:", inst.collective.kind, inst.collective.num_ranks());
        for c in &claims {
            let v = collsched_checker::parse_q(c["value"].as_str().unwrap_or("0")).map(|q| collsched_checker::show_q(&q)).unwrap_or_default();
            let bound = c["bound"].as_str().unwrap_or("?");
            // The steps claims (steps, steps_cut, ...) count steps; the others are times.
            let unit = if bound.starts_with("steps") { "steps" } else { "ns" };
            println!("  {bound:<19} {v} {unit}");
        }
        // The best bound on step-synchronous time (docs/design/MODEL.md section 6).
        if let (Some(time), Some(_)) = (&report.time_bound, &report.bandwidth_bound) {
            let how = if crossing_binds(&report) { "the crossing bound" } else { "bandwidth + latency" };
            println!("  time bound          {} ns ({how})", collsched_checker::show_q(time));
        }
        if let Some(s) = cert.get("schedule") {
            println!("  schedule: bandwidth term {} ns, time {} ns, bandwidth-optimal: {}", s["bandwidth_ns"], s["time_ns"], s["bandwidth_optimal"]);
        }
    }
    Ok(ExitCode::Ok)
}

/// Whether a file in a folder is a certificate to check: named `*.cert.json` (so that a corrupt
/// one fails rather than disappears), or a JSON object whose `format` is the certificate's.
fn is_certificate(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.ends_with(".cert.json") || (name.ends_with(".json") && json_format(path).as_deref() == Some(collsched_checker::FORMAT))
}

/// The top-level `format` of a JSON object file, if it has one (schedule files and certificates
/// put it first).
fn json_format(path: &Path) -> Option<String> {
    let (_, value) = crate::io::first_top_level_key(path, &["format"]).ok()??;
    value.as_str().map(str::to_string)
}

/// Whether a JSON file has a key only a certificate has (`claims`, `spec_sha256`): one that lacks
/// `format` and keeps `instance` is still a certificate, to be read as one and refused for what it
/// lacks, not taken for an SCCL algorithm (which has an `instance` too).
fn has_certificate_keys(path: &Path) -> bool {
    crate::io::first_top_level_key(path, &["claims", "spec_sha256"]).is_ok_and(|k| k.is_some())
}

/// The certificate files under the paths, in order, and how many files the folders held that
/// are not certificates (specs, schedules, a sweep's `index.json`, SCCL algorithms a certificate
/// may attach), which are passed over. A file named on the command line is checked whatever its
/// name, except an SCCL algorithm, refused as not a certificate, and a path that does not exist:
/// those are `Err` entries (why), reported as unreadable while the others are still checked.
fn certificate_files(paths: &[PathBuf]) -> Result<(Vec<std::result::Result<PathBuf, String>>, usize)> {
    let mut out = Vec::new();
    let mut passed_over = 0;
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> =
                std::fs::read_dir(p).map_err(|e| Error::bad(format!("{}: cannot read: {e}", p.display())))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
            entries.sort();
            for e in entries {
                if e.is_dir() {
                    let (found, skipped) = certificate_files(&[e])?;
                    out.extend(found);
                    passed_over += skipped;
                } else if is_certificate(&e) {
                    out.push(Ok(e));
                } else {
                    passed_over += 1;
                }
            }
        } else if !p.exists() {
            out.push(Err(format!("{}: cannot read: no such file or folder", p.display())));
        } else if crate::export::sccl::is_sccl_json(p).unwrap_or(false) && !has_certificate_keys(p) {
            out.push(Err(format!(
                "{}: an SCCL algorithm, not a certificate: check it with `collsched verify {0}`, or attach it to one with `collsched bound SPEC --schedule {0} --certificate OUT`",
                p.display()
            )));
        } else {
            out.push(Ok(p.clone()));
        }
    }
    Ok((out, passed_over))
}

/// `proof check PATH...`.
pub fn proof_check(paths: &[PathBuf]) -> Result<ExitCode> {
    let (files, passed_over) = certificate_files(paths)?;
    if passed_over > 0 {
        eprintln!(
            "passed over {passed_over} files in the folders that are not certificates (neither *.cert.json nor \"format\": \"{}\")",
            collsched_checker::FORMAT
        );
    }
    if files.is_empty() {
        return Err(Error::bad("no certificate found under the given paths"));
    }
    // Every certificate is checked and reported; an unreadable one decides the exit code (2)
    // over one that fails (1), since it was not checked at all.
    let (mut failed, mut unreadable) = (0, 0);
    for f in &files {
        match f.as_ref().map_err(|why| NotChecked::Unreadable(why.clone())).and_then(|f| check_certificate(f, true).map(|c| (f, c))) {
            Ok((f, checked)) => println!("ok   {}", checked.summary(f)),
            Err(NotChecked::Fails(why)) => {
                failed += 1;
                println!("FAIL {why}");
            }
            Err(NotChecked::Unreadable(why)) => {
                unreadable += 1;
                println!("BAD  {why}");
            }
        }
    }
    let bad = if unreadable > 0 { format!(", {unreadable} unreadable") } else { String::new() };
    println!("{} certificates, {} hold, {failed} fail{bad}", files.len(), files.len() - failed - unreadable);
    Ok(if unreadable > 0 {
        ExitCode::BadInput
    } else if failed > 0 {
        ExitCode::RuleFailed
    } else {
        ExitCode::Ok
    })
}
