//! Certificates tied to their files: a certificate re-checked by the independent checker
//! ([`collsched_checker`]), then held to the spec and the schedule it names (the spec still
//! hashes the same and describes the certificate's instance; the schedule still hashes the same,
//! is for that instance, verifies and costs what is claimed). `proof check` reports it; `sweep
//! merge` refuses a shard whose class certificates do not hold.

use crate::bounds::certificate::instance_json;
use crate::bounds::certified::crossing_binds;
use crate::cost::SyncCost;
use crate::error::{Error, Result};
use crate::io::sha256_hex;
use crate::schedule::Schedule;
use crate::spec::Spec;
use crate::units::{to_checker, to_f64};
use crate::verify::{verify_schedule_against, Report, VerifyOptions};
use collsched_checker::{CheckReport, ScheduleClaim};
use std::path::Path;

/// An attached schedule and its SHA-256: a schedule file, or an SCCL algorithm (by its keys)
/// imported onto the spec's instance, which gives it bandwidths, latencies and sizes.
pub fn read_attached(path: &Path, instance: impl FnOnce() -> Result<Option<crate::spec::Instance>>) -> Result<(Schedule, String)> {
    if crate::export::sccl::is_sccl_json(path)? {
        let inst = instance()?.ok_or_else(|| Error::bad(format!("{}: an SCCL algorithm needs a spec for its bandwidths and sizes", path.display())))?;
        let bytes = crate::io::read_bytes(path)?;
        let (_, s) = crate::export::sccl::read_sccl_file(path, Some(&inst))?;
        return Ok((s, sha256_hex(&bytes)));
    }
    crate::schedule::read_schedule_file_hashed(path)
}

/// An attached schedule verified on its certificate's instance as `verify --spec` verifies a
/// schedule (the same network and collective, the instance's down links down; links shared
/// within a step reported, not failed, where the spec's `expect.allow_contention` says so: the
/// bounds of docs/design/MODEL.md section 6 do not assume rule 2), and made for the same faults:
/// a schedule for other faults is another instance's, even where it avoids these.
pub fn verify_attached(s: &Schedule, spec: &Spec, inst: &crate::spec::Instance) -> Result<Report> {
    let options = VerifyOptions { allow_contention: spec.expect.allow_contention.unwrap_or(false), ..Default::default() };
    let report = verify_schedule_against(s, &options, inst.clone())?;
    let (theirs, ours) = (s.header.topology.down_links(), inst.topology.down_links());
    if let Some(&l) = theirs.iter().chain(&ours).find(|l| theirs.contains(l) != ours.contains(l)) {
        let (sched, spec) = if theirs.contains(&l) { ("down", "up") } else { ("up", "down") };
        return Err(Error::bad(format!("{}: the schedule has it {sched}, the spec {spec} (a schedule for other faults)", inst.topology.describe_link(l))));
    }
    Ok(report)
}

/// Why a certificate did not check.
pub enum NotChecked {
    /// It is a certificate, and a claim or a tie to its files fails (exit 1).
    Fails(String),
    /// It cannot be read as a certificate (exit 2).
    Unreadable(String),
}

impl From<String> for NotChecked {
    fn from(why: String) -> Self {
        NotChecked::Fails(why)
    }
}

/// A certificate that holds, with the files it names.
pub struct Checked {
    /// What the checker established.
    pub report: CheckReport,
    /// The attached schedule (when the certificate names its file), verified, and its cost.
    pub schedule: Option<(Schedule, SyncCost)>,
    /// What was checked besides the claims, for a summary line (`spec ...`, `schedule ...`).
    pub notes: Vec<String>,
}

impl Checked {
    /// The one-line summary `proof check` prints after `ok`.
    pub fn summary(&self, path: &Path) -> String {
        let report = &self.report;
        let mut best = report.bandwidth_bound.as_ref().map(|b| format!(", bandwidth bound {}", collsched_checker::show_q(b))).unwrap_or_default();
        // A crossing claim raises the time bound above bandwidth plus latency: say so.
        if let Some(time) = report.time_bound.as_ref().filter(|_| crossing_binds(report)) {
            best += &format!(", time bound {} (crossing)", collsched_checker::show_q(time));
        }
        if let Some(steps) = &report.steps_bound {
            best += &format!(", steps bound {}", collsched_checker::show_q(steps));
        }
        let notes = if self.notes.is_empty() { String::new() } else { format!(" ({})", self.notes.join(", ")) };
        format!("{}: {} claims hold{best}{notes}", path.display(), report.claims.len())
    }
}

/// Checks one certificate and the files it names. With `regenerate`, a missing attached schedule
/// whose spec generates it is regenerated first (written beside the certificate); without, it
/// fails as missing, and nothing is written.
pub fn check_certificate(path: &Path, regenerate: bool) -> std::result::Result<Checked, NotChecked> {
    let report =
        collsched_checker::check_file(path).map_err(|e| if e.unreadable { NotChecked::Unreadable(e.message) } else { NotChecked::Fails(e.message) })?;
    // The folder the certificate really is in: through a symbolic link, its target's, where
    // `bound --certificate` wrote it and named its files from.
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let real = if is_link { std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()) } else { path.to_path_buf() };
    let dir = real.parent().unwrap_or(Path::new("."));
    // Files are named relative to the certificate's folder, so that a copied folder checks its
    // own files; an absolute name would check the originals.
    for (field, name) in [("spec", report.spec.as_ref()), ("schedule.file", report.schedule.as_ref().map(|c| &c.file))] {
        if let Some(name) = name.filter(|n| Path::new(n).is_absolute()) {
            return Err(format!("{}: {field} = \"{name}\": an absolute path; a certificate names its files relative to its own folder", path.display()).into());
        }
    }
    // The checker reads no certificate without its spec (`check_str`).
    let rel = report.spec.as_ref().expect("the checker requires `spec`");
    let spec_path = dir.join(rel);
    let bytes = std::fs::read(&spec_path).map_err(|e| format!("{}: spec {}: cannot read: {e}", path.display(), spec_path.display()))?;
    if !sha256_hex(&bytes).eq_ignore_ascii_case(&report.spec_sha256) {
        return Err(format!("{}: the spec {} changed since the certificate was made (its SHA-256 differs)", path.display(), spec_path.display()).into());
    }
    let spec = Spec::load(&spec_path).map_err(|e| format!("{}: {e}", path.display()))?;
    let inst = spec.instance().map_err(|e| format!("{}: {e}", path.display()))?;
    if !collsched_checker::same_instance(&instance_json(&inst), &report.instance).map_err(|e| NotChecked::Unreadable(e.message))? {
        return Err(format!("{}: the certificate's instance is not the one {} describes", path.display(), spec_path.display()).into());
    }
    let mut notes = vec![format!("spec {rel}")];
    let mut schedule = None;
    if let Some(claim) = &report.schedule {
        let (note, s, cost) = check_attached_schedule(path, &dir.join(&claim.file), claim, &spec, inst, regenerate)?;
        notes.push(format!("schedule {}{note}", claim.file));
        schedule = Some((s, cost));
    }
    Ok(Checked { report, schedule, notes })
}

/// Checks the schedule a certificate attaches: the file's SHA-256 is the one recorded, it verifies,
/// it is for the certificate's instance (its spec's `inst`, checked as `verify --spec` checks a
/// schedule), and it costs what the certificate claims. With `regenerate`, a missing file is regenerated first from the spec that generates it
/// (`generate` is deterministic: the same spec gives the same bytes), so that a fresh clone checks
/// every certificate without running anything before. Returns what it did, for the summary line,
/// the schedule and its cost.
fn check_attached_schedule(
    cert: &Path,
    sched_path: &Path,
    claim: &ScheduleClaim,
    spec: &Spec,
    inst: crate::spec::Instance,
    regenerate: bool,
) -> std::result::Result<(String, Schedule, SyncCost), String> {
    let at = |msg: String| format!("{}: {msg}", cert.display());
    let mut note = String::new();
    if !sched_path.exists() {
        if !regenerate {
            return Err(at(format!("the attached schedule {}: cannot read: no such file", sched_path.display())));
        }
        if !matches!(spec.method, Some(crate::spec::MethodSpec::Generate(_))) {
            return Err(at(format!(
                "the attached schedule {} is missing, and its spec synthesizes (a timed search) rather than generates it",
                sched_path.display()
            )));
        }
        let schedule = crate::generate::from_spec(spec).map_err(|e| at(e.to_string()))?;
        crate::schedule::write_schedule_file(sched_path, &schedule).map_err(|e| at(e.to_string()))?;
        note.push_str(" (regenerated from its spec)");
    }
    let (s, sha256) = read_attached(sched_path, || Ok(Some(inst.clone()))).map_err(|e| at(e.to_string()))?;
    if sha256 != claim.sha256 {
        return Err(at(format!("the attached schedule {} is not the file the certificate was made with (its SHA-256 differs)", sched_path.display())));
    }
    note.push_str(", SHA-256 matches");
    let not_for = |why: String| at(format!("the attached schedule {} is not for the certificate's instance: {why}", sched_path.display()));
    let r = verify_attached(&s, spec, &inst).map_err(|e| not_for(e.to_string()))?;
    if !r.is_valid() {
        return Err(at(format!("the attached schedule {} fails verification: {}", sched_path.display(), r.findings.failures()[0])));
    }
    let c = r.cost.expect("verification computes the cost");
    if to_checker(&c.bandwidth_ns()) != claim.bandwidth_ns || to_checker(&c.time_ns()) != claim.time_ns {
        return Err(at(format!(
            "the attached schedule {} no longer costs what the certificate claims (bandwidth term {} ns, time {} ns)",
            sched_path.display(),
            to_f64(&c.bandwidth_ns()),
            to_f64(&c.time_ns())
        )));
    }
    Ok((note, s, c))
}
