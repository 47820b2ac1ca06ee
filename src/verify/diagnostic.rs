//! Diagnostics: which rule failed, where, and why.

use std::fmt;

/// The rules of docs/design/MODEL.md section 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// 1: ids exist, paths are connected walks between npus over links that are up.
    Structure = 1,
    /// 2: no directed link in two transfers of one step.
    LinkSharing = 2,
    /// 3: a sender holds every piece it sends.
    Causality = 3,
    /// 4: no contribution counted twice or lost.
    Reduction = 4,
    /// 5: every postcondition holds at the end.
    Completion = 5,
    /// 6: the lowered per-rank programs cannot deadlock.
    Deadlock = 6,
    /// 7: routed paths have an acyclic channel-dependency graph.
    RoutingDeadlock = 7,
    /// 8: the schedule meets its declared bounds.
    BoundConformance = 8,
}

impl Rule {
    /// All rules in order.
    pub const ALL: [Rule; 8] =
        [Rule::Structure, Rule::LinkSharing, Rule::Causality, Rule::Reduction, Rule::Completion, Rule::Deadlock, Rule::RoutingDeadlock, Rule::BoundConformance];

    /// The rule's number.
    pub fn number(self) -> u8 {
        self as u8
    }

    /// The rule's name as diagnostics print it.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Structure => "structure",
            Rule::LinkSharing => "no link sharing",
            Rule::Causality => "causality",
            Rule::Reduction => "reduction soundness",
            Rule::Completion => "completion",
            Rule::Deadlock => "deadlock freedom",
            Rule::RoutingDeadlock => "routing deadlock freedom",
            Rule::BoundConformance => "bound conformance",
        }
    }
}

/// One finding: a rule, a place (step, transfer, subject such as a link or a piece), a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The rule.
    pub rule: Rule,
    /// The step (from 0), if the finding is about one.
    pub step: Option<usize>,
    /// The transfer within the step (from 0).
    pub transfer: Option<usize>,
    /// What it is about: `link 12: (1,0,0)->(2,0,0)`, `piece [0,3,1]`, ...
    pub subject: Option<String>,
    /// Why it fails.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut place = Vec::new();
        if let Some(s) = self.step {
            place.push(format!("step {s}"));
        }
        if let Some(t) = self.transfer {
            place.push(format!("transfer {t}"));
        }
        let mut head = place.join(", ");
        if let Some(subj) = &self.subject {
            head = if head.is_empty() { subj.clone() } else { format!("{head} ({subj})") };
        }
        if !head.is_empty() {
            write!(f, "{head}: ")?;
        }
        write!(f, "rule {} {}: {}", self.rule.number(), self.rule.name(), self.message)
    }
}

/// Failures and warnings, kept up to a limit per rule and counted in full.
#[derive(Clone, Debug)]
pub struct Findings {
    limit: usize,
    failures: Vec<Diagnostic>,
    failure_counts: [u64; 9],
    warnings: Vec<Diagnostic>,
    warning_counts: [u64; 9],
}

impl Findings {
    /// Keeps at most `limit` diagnostics of each rule and kind.
    pub fn new(limit: usize) -> Self {
        Findings { limit, failures: Vec::new(), failure_counts: [0; 9], warnings: Vec::new(), warning_counts: [0; 9] }
    }

    /// The diagnostics kept per rule and kind.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Records `later`'s findings after these, keeping what recording them one by one would
    /// have kept (`later` kept the first of each rule and kind, at the same limit).
    pub fn absorb(&mut self, later: Findings) {
        let keep = |kept: &mut Vec<Diagnostic>, counts: &mut [u64; 9], more: Vec<Diagnostic>, more_counts: [u64; 9], limit: usize| {
            let mut seen = [0u64; 9];
            for d in more {
                let r = d.rule as usize;
                seen[r] += 1;
                if (counts[r] + seen[r]) as usize <= limit {
                    kept.push(d);
                }
            }
            counts.iter_mut().zip(more_counts).for_each(|(n, m)| *n += m);
        };
        keep(&mut self.failures, &mut self.failure_counts, later.failures, later.failure_counts, self.limit);
        keep(&mut self.warnings, &mut self.warning_counts, later.warnings, later.warning_counts, self.limit);
    }

    /// Records a failure.
    pub fn fail(&mut self, d: Diagnostic) {
        let n = &mut self.failure_counts[d.rule as usize];
        *n += 1;
        if *n as usize <= self.limit {
            self.failures.push(d);
        }
    }

    /// Records a warning (reported, not a failure).
    pub fn warn(&mut self, d: Diagnostic) {
        let n = &mut self.warning_counts[d.rule as usize];
        *n += 1;
        if *n as usize <= self.limit {
            self.warnings.push(d);
        }
    }

    /// Turns the failures of `rules` into warnings: what a spec expects to fail is reported, not
    /// failed (`expect.deadlock_free = false` for rules 6 and 7).
    pub fn expect_failures_of(&mut self, rules: &[Rule]) {
        let (expected, kept): (Vec<Diagnostic>, Vec<Diagnostic>) = std::mem::take(&mut self.failures).into_iter().partition(|d| rules.contains(&d.rule));
        self.failures = kept;
        self.warnings.extend(expected);
        for &r in rules {
            self.warning_counts[r as usize] += std::mem::take(&mut self.failure_counts[r as usize]);
        }
    }

    /// Whether a failure of this rule was recorded.
    pub fn is_failed(&self, rule: Rule) -> bool {
        self.failure_counts[rule as usize] > 0
    }

    /// How many failures of a rule were found.
    pub fn failures_of(&self, rule: Rule) -> u64 {
        self.failure_counts[rule as usize]
    }

    /// How many warnings of a rule were found.
    pub fn warnings_of(&self, rule: Rule) -> u64 {
        self.warning_counts[rule as usize]
    }

    /// Total number of failures.
    pub fn failure_count(&self) -> u64 {
        self.failure_counts.iter().sum()
    }

    /// The kept failures, in the order found.
    pub fn failures(&self) -> &[Diagnostic] {
        &self.failures
    }

    /// Per rule with failures beyond those kept: the summary line of how many more there are
    /// (`... rule 2 no link sharing: 7 more failures not shown`).
    pub fn unshown_failures(&self) -> Vec<String> {
        Rule::ALL
            .into_iter()
            .filter_map(|rule| {
                let shown = self.failures.iter().filter(|d| d.rule == rule).count() as u64;
                let n = self.failures_of(rule);
                (n > shown).then(|| format!("... rule {} {}: {} more failures not shown", rule.number(), rule.name(), n - shown))
            })
            .collect()
    }

    /// The kept warnings.
    pub fn warnings(&self) -> &[Diagnostic] {
        &self.warnings
    }

    /// The rules that failed.
    pub fn failed_rules(&self) -> Vec<Rule> {
        Rule::ALL.into_iter().filter(|&r| self.is_failed(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_reads_like_the_style_guide() {
        let d = Diagnostic {
            rule: Rule::LinkSharing,
            step: Some(7),
            transfer: Some(3),
            subject: Some("link 12: (1,0,0)->(2,0,0)".into()),
            message: "also used by transfer 5".into(),
        };
        assert_eq!(d.to_string(), "step 7, transfer 3 (link 12: (1,0,0)->(2,0,0)): rule 2 no link sharing: also used by transfer 5");
    }

    #[test]
    fn absorbing_later_findings_keeps_what_recording_them_in_order_keeps() {
        let d = |rule: Rule, i: usize| Diagnostic { rule, step: Some(i), transfer: None, subject: None, message: format!("{i}") };
        let all: Vec<Diagnostic> = (0..12).map(|i| d(if i % 3 == 0 { Rule::Completion } else { Rule::Causality }, i)).collect();
        for split in 0..=all.len() {
            let mut whole = Findings::new(3);
            all.iter().cloned().for_each(|x| whole.fail(x));
            let (mut first, mut later) = (Findings::new(3), Findings::new(3));
            all[..split].iter().cloned().for_each(|x| first.fail(x));
            all[split..].iter().cloned().for_each(|x| later.fail(x));
            first.absorb(later);
            assert_eq!(first.failures(), whole.failures(), "split at {split}");
            assert_eq!((first.failures_of(Rule::Causality), first.failures_of(Rule::Completion)), (8, 4));
        }
    }

    #[test]
    fn findings_count_past_the_limit() {
        let mut f = Findings::new(1);
        for _ in 0..3 {
            f.fail(Diagnostic { rule: Rule::Causality, step: None, transfer: None, subject: None, message: "x".into() });
        }
        assert_eq!(f.failures().len(), 1);
        assert_eq!(f.failures_of(Rule::Causality), 3);
        assert_eq!(f.failed_rules(), vec![Rule::Causality]);
        assert_eq!(f.unshown_failures(), [format!("... rule {} {}: 2 more failures not shown", Rule::Causality.number(), Rule::Causality.name())]);
    }
}
