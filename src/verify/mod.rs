//! `collsched verify`: the rules of docs/design/MODEL.md section 4, applied while the schedule streams by.
//!
//! Rules 1-5 (structure, no link sharing, causality, reduction soundness, completion) are one
//! pass over the steps (the private module `rules`). Further rules plug in as [`Check`]s that see the header, every
//! step and the end, and report into the same [`Findings`]: rules 6-8 (deadlock freedom, routing
//! deadlock freedom, bound conformance) are added that way without touching the core pass.

mod conformance;
mod deadlock;
mod diagnostic;
mod fast_hash;
mod presence;
mod routing;
mod rules;

pub use conformance::{Conformance, Expectations};
pub use deadlock::{check_deadlock, DeadlockCheck};
pub use routing::RoutingDeadlock;

pub use diagnostic::{Diagnostic, Findings, Rule};

use crate::cost::{SyncCost, SyncMeter};
use crate::error::Result;
use crate::schedule::{Schedule, ScheduleHeader, Step, StepSink};
use crate::topology::NodeId;
use rules::CoreRules;
use std::path::Path;

/// The largest per-(piece, npu) state the verifier allocates for a reducing collective (the
/// machine has 24 GiB).
const MAX_STATE_BYTES: u128 = 16 << 30;

/// A rule that plugs into the verifier: it sees the header, every step, and the end.
pub trait Check {
    /// Called once with the header.
    fn begin(&mut self, _header: &ScheduleHeader, _out: &mut Findings) {}
    /// Called for every step in order.
    fn step(&mut self, _index: usize, _step: &Step, _out: &mut Findings) {}
    /// Called once after the last step; `stats` and `cost` are final.
    fn finish(&mut self, _stats: &Stats, _cost: Option<&SyncCost>, _out: &mut Findings) {}
}

/// Options of a verification.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    /// Rule-2 sharing is reported as a warning rather than a failure (the spec's
    /// `allow_contention`, for baselines such as single-path or dimension-order routing).
    pub allow_contention: bool,
    /// At most this many diagnostics of each rule are kept (all are counted).
    pub max_diagnostics_per_rule: usize,
    /// Track the peak holdings of pieces bound elsewhere (off by default: it keeps an entry per
    /// (piece, relay) holding, memory proportional to the piece-hops, and slows the verifier
    /// about 4x on large all-to-alls).
    pub track_relays: bool,
    /// How the per-piece state is kept: `None` by size, `Some(true)` the lean way, `Some(false)`
    /// the dense way. Copy-only kinds track which npus hold each piece by one bit per (piece,
    /// npu) (dense, by size up to 1 GiB of bits) or by holder lists. Reducing kinds keep a
    /// contributor set per (piece, npu) while the steps stream by (dense, by size up to 64 MiB)
    /// or record each transfer's pieces and check rules 3-5 after the last step one piece at a
    /// time (about 8 bytes per piece-hop; diagnostics then come piece by piece).
    pub sparse_pieces: Option<bool>,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions { allow_contention: false, max_diagnostics_per_rule: 100, track_relays: false, sparse_pieces: None }
    }
}

/// Counts gathered while verifying.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Number of steps.
    pub steps: usize,
    /// Number of transfers.
    pub transfers: usize,
    /// Transfers whose interior nodes only route: switches, or npus that are not ranks (on a torus
    /// where every npu is a rank: one link).
    pub single_hop_transfers: usize,
    /// The longest path, in links.
    pub longest_path: usize,
    /// Pieces times links of their paths.
    pub piece_hops: u64,
    /// Copies that delivered a value the receiver already had.
    pub wasted_copies: u64,
    /// Transfers that carry no piece: valid (MODEL.md section 4 asks nothing of them), but they
    /// hold their paths' links for the step and deliver nothing, which is never what was meant.
    pub empty_transfers: u64,
    /// The largest number of pieces a node held that it is not a destination of (a relay drops
    /// a piece after its last send of it), with the node and the step where it happened.
    pub peak_relay: Option<(NodeId, usize, usize)>,
}

/// What a verification found.
#[derive(Clone, Debug)]
pub struct Report {
    /// Failures and warnings.
    pub findings: Findings,
    /// Counts.
    pub stats: Stats,
    /// The step-synchronous cost (always computed; meaningful when the schedule is valid).
    pub cost: Option<SyncCost>,
}

impl Report {
    /// True when no rule failed.
    pub fn is_valid(&self) -> bool {
        self.findings.failure_count() == 0
    }
}

/// Verifies a schedule as it streams by: a [`StepSink`] that applies every rule.
pub struct Verifier {
    options: VerifyOptions,
    reference: Option<crate::spec::Instance>,
    core: Option<CoreRules>,
    meter: Option<SyncMeter>,
    checks: Vec<Box<dyn Check>>,
    findings: Findings,
}

impl Verifier {
    /// A verifier for rules 1-5 with these options.
    pub fn new(options: VerifyOptions) -> Self {
        let findings = Findings::new(options.max_diagnostics_per_rule);
        Verifier { options, reference: None, core: None, meter: None, checks: Vec::new(), findings }
    }

    /// Verifies against a spec's instance: the schedule must be for the same network (nodes,
    /// links, their bandwidths and latencies) and collective, and links the spec declares down
    /// count as down (so a schedule written before
    /// a failure is checked against it).
    pub fn against(mut self, instance: crate::spec::Instance) -> Self {
        self.reference = Some(instance);
        self
    }

    /// Adds a further rule.
    pub fn with_check(mut self, check: Box<dyn Check>) -> Self {
        self.checks.push(check);
        self
    }

    /// Checks one step (the steps must come in order, after [`StepSink::begin`]).
    pub fn check_step(&mut self, index: usize, step: &Step) {
        if let Some(core) = &mut self.core {
            core.step(index, step, &mut self.findings);
        }
        if let Some(m) = &mut self.meter {
            m.step(step);
        }
        for c in &mut self.checks {
            c.step(index, step, &mut self.findings);
        }
    }

    /// Ends the verification and returns the report.
    ///
    /// Fails only when the exact cost cannot be computed (see [`SyncMeter::finish`]).
    pub fn finish(mut self) -> Result<Report> {
        let mut stats = Stats::default();
        if let Some(core) = self.core.take() {
            stats = core.finish(&mut self.findings);
        }
        let cost = self.meter.take().map(SyncMeter::finish).transpose()?;
        for c in &mut self.checks {
            c.finish(&stats, cost.as_ref(), &mut self.findings);
        }
        Ok(Report { findings: self.findings, stats, cost })
    }
}

impl StepSink for Verifier {
    fn begin(&mut self, header: &ScheduleHeader) -> Result<()> {
        let adjusted;
        let header = match &self.reference {
            Some(inst) => {
                adjusted = match_instance(header, inst)?;
                &adjusted
            }
            None => header,
        };
        let c = &header.collective;
        // Reducing kinds keep a contributor set per (piece, npu) only when told to (otherwise
        // when small; beyond, a piece's sets at a time); copy-only kinds keep holder lists when
        // bits would not fit, at least a 4-byte list head per piece.
        let (pieces, npus) = (c.piece_space() as u128, header.topology.num_npus() as u128);
        let sets = npus * (c.num_ranks() as u128) / 8;
        let state_bytes = match (c.kind.is_reducing(), self.options.sparse_pieces) {
            (true, Some(false)) => pieces * sets,
            (true, _) => sets,
            (false, _) => (pieces * npus / 8).min(pieces * 4),
        };
        if state_bytes > MAX_STATE_BYTES {
            return Err(crate::error::Error::bad(format!(
                "the verifier's state for {} pieces on {} npus would take {} GiB (limit {} GiB): use fewer pieces per block",
                c.piece_space(),
                header.topology.num_npus(),
                state_bytes >> 30,
                MAX_STATE_BYTES >> 30
            )));
        }
        self.core = Some(CoreRules::new(header, &self.options));
        self.meter = Some(SyncMeter::new(header)?);
        for c in &mut self.checks {
            c.begin(header, &mut self.findings);
        }
        Ok(())
    }

    fn step(&mut self, index: usize, step: Step) -> Result<()> {
        self.check_step(index, &step);
        Ok(())
    }
}

/// Verifies a schedule held in memory under rules 1-5.
pub fn verify_schedule(schedule: &Schedule, options: &VerifyOptions) -> Result<Report> {
    verify_schedule_checked(schedule, options, Vec::new())
}

/// Verifies a schedule held in memory with further checks (rules beyond 1-5), as
/// [`verify_file_checked`] does a file.
pub fn verify_schedule_checked(schedule: &Schedule, options: &VerifyOptions, checks: Vec<Box<dyn Check>>) -> Result<Report> {
    verify_schedule_with(schedule, options, None, checks)
}

/// Verifies a schedule held in memory against a spec's instance ([`Verifier::against`]), as
/// `verify --spec` does a file: a schedule for another network or collective is refused.
pub fn verify_schedule_against(schedule: &Schedule, options: &VerifyOptions, instance: crate::spec::Instance) -> Result<Report> {
    verify_schedule_with(schedule, options, Some(instance), Vec::new())
}

fn verify_schedule_with(schedule: &Schedule, options: &VerifyOptions, instance: Option<crate::spec::Instance>, checks: Vec<Box<dyn Check>>) -> Result<Report> {
    let mut v = Verifier::new(options.clone());
    if let Some(inst) = instance {
        v = v.against(inst);
    }
    for c in checks {
        v = v.with_check(c);
    }
    v.begin(&schedule.header)?;
    for (i, s) in schedule.steps.iter().enumerate() {
        v.check_step(i, s);
    }
    v.finish()
}

/// Verifies a schedule held in memory under every rule, as `collsched verify` does: 1-5, the
/// per-rank programs' deadlock freedom on the default lowering (rule 6) and routing deadlock
/// freedom (rule 7); for tests.
#[cfg(test)]
pub(crate) fn verify_every_rule(s: &Schedule) -> Report {
    let checks: Vec<Box<dyn Check>> = vec![Box::new(DeadlockCheck::new(crate::lower::LowerOptions::default())), Box::new(RoutingDeadlock::new())];
    verify_schedule_checked(s, &VerifyOptions::default(), checks).expect("a valid header")
}

/// Verifies a schedule file, optionally against a spec's instance ([`Verifier::against`]).
pub fn verify_file_with(path: &Path, options: &VerifyOptions, instance: Option<crate::spec::Instance>) -> Result<(ScheduleHeader, Report)> {
    verify_file_checked(path, options, instance, Vec::new())
}

/// Verifies a schedule file with further checks (rules beyond 1-5).
pub fn verify_file_checked(
    path: &Path,
    options: &VerifyOptions,
    instance: Option<crate::spec::Instance>,
    checks: Vec<Box<dyn Check>>,
) -> Result<(ScheduleHeader, Report)> {
    let mut v = Verifier::new(options.clone());
    if let Some(inst) = instance {
        v = v.against(inst);
    }
    for c in checks {
        v = v.with_check(c);
    }
    let header = crate::schedule::stream_schedule_file(path, &mut v)?;
    Ok((header, v.finish().map_err(|e| e.context(path.display()))?))
}

/// Checks that a schedule's header describes the spec's instance; returns the header with the
/// spec's down links applied.
fn match_instance(header: &ScheduleHeader, inst: &crate::spec::Instance) -> Result<ScheduleHeader> {
    use crate::error::Error;
    let (a, b) = (&header.topology, &inst.topology);
    if a.num_nodes() != b.num_nodes() || a.num_links() != b.num_links() {
        return Err(Error::bad(format!(
            "the schedule's topology ({} nodes, {} links) is not the spec's ({} nodes, {} links)",
            a.num_nodes(),
            a.num_links(),
            b.num_nodes(),
            b.num_links()
        )));
    }
    if let Some(n) = a.node_ids().find(|&n| a.node(n).kind != b.node(n).kind) {
        return Err(Error::bad(format!("node {n}: the schedule has a {} where the spec has a {}", a.node(n).kind.as_str(), b.node(n).kind.as_str())));
    }
    if let Some((id, _)) = a.links().zip(b.links()).map(|((id, x), (_, y))| (id, (x.src, x.dst) == (y.src, y.dst))).find(|(_, same)| !same) {
        return Err(Error::bad(format!("link {id}: the schedule's {} is not the spec's {}", a.describe_link(id), b.describe_link(id))));
    }
    if let Some((id, x, y)) =
        a.links().zip(b.links()).map(|((id, x), (_, y))| (id, x, y)).find(|(_, x, y)| (x.bandwidth_gbps, x.latency_ns) != (y.bandwidth_gbps, y.latency_ns))
    {
        return Err(Error::bad(format!(
            "{}: the schedule's {} GB/s and {} ns are not the spec's {} GB/s and {} ns",
            b.describe_link(id),
            x.bandwidth_gbps,
            x.latency_ns,
            y.bandwidth_gbps,
            y.latency_ns
        )));
    }
    if a.switch_latency_ns() != b.switch_latency_ns() {
        return Err(Error::bad(format!("the schedule's switch latency {} ns is not the spec's {} ns", a.switch_latency_ns(), b.switch_latency_ns())));
    }
    let (c, d) = (&header.collective, &inst.collective);
    if let Some(what) = collective_difference(c, d) {
        return Err(Error::bad(format!(
            "the schedule's collective ({} over {} ranks, {} bytes per rank) is not the spec's: {what}",
            c.kind,
            c.num_ranks(),
            c.bytes_per_rank
        )));
    }
    if inst.pieces_given && c.pieces != d.pieces {
        return Err(Error::bad(format!("the schedule cuts blocks into {} pieces, the spec into {}", c.pieces, d.pieces)));
    }
    let mut out = header.clone();
    for l in b.down_links() {
        out.topology.set_down(l);
    }
    Ok(out)
}

/// What first differs between a schedule's collective and the spec's (kind, ranks, sizes), said
/// so that the two can be told apart, or `None` when they agree.
fn collective_difference(c: &crate::collective::Collective, d: &crate::collective::Collective) -> Option<String> {
    if c.kind != d.kind {
        return Some(format!("the schedule's kind is {}, the spec's {}", c.kind, d.kind));
    }
    if c.num_ranks() != d.num_ranks() {
        return Some(format!("the schedule has {} ranks, the spec {}", c.num_ranks(), d.num_ranks()));
    }
    if let Some(i) = (0..c.num_ranks()).find(|&i| c.ranks[i] != d.ranks[i]) {
        let same_set = c.ranks.iter().all(|&r| d.rank_index(r).is_some());
        let order = if same_set { " (the same ranks in another order: piece ids are positions in ranks)" } else { "" };
        return Some(format!("ranks[{i}] is node {} in the schedule, node {} in the spec{order}", c.ranks[i], d.ranks[i]));
    }
    if c.bytes_per_rank != d.bytes_per_rank {
        return Some(format!("the schedule has {} bytes per rank, the spec {}", c.bytes_per_rank, d.bytes_per_rank));
    }
    match (&c.block_bytes, &d.block_bytes) {
        (None, None) => None,
        (Some(_), None) => Some("the schedule has block_bytes (non-uniform blocks), the spec none".into()),
        (None, Some(_)) => Some("the spec has block_bytes (non-uniform blocks), the schedule none".into()),
        (Some(x), Some(y)) => {
            let (i, j) = (0..x.len()).flat_map(|i| (0..x.len()).map(move |j| (i, j))).find(|&(i, j)| x[i][j] != y[i][j])?;
            Some(format!("block_bytes[{i}][{j}] is {} in the schedule, {} in the spec", x[i][j], y[i][j]))
        }
    }
}
