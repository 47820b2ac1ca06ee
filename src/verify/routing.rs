//! Rule 7, routing deadlock freedom: the channel-dependency graph of the routed paths of a step
//! must be acyclic (Dally-Seitz). A routed path holds link `l_i` while it waits for `l_{i+1}`,
//! so every consecutive pair of links of a multi-link path is a dependency edge; a cycle of such
//! edges is a set of packets that can wait on each other forever in wormhole or virtual
//! cut-through routers without virtual channels. Store-and-forward (single-link) transfers add
//! no edge, so they meet the rule trivially.

use super::{Check, Diagnostic, Findings, Rule};
use crate::schedule::{ScheduleHeader, Step};
use crate::topology::{LinkId, Topology};
use std::collections::HashMap;

/// The rule-7 check. It reports at most one cycle per step.
#[derive(Default)]
pub struct RoutingDeadlock {
    topology: Option<Topology>,
}

impl RoutingDeadlock {
    /// A new check.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Finds a cycle in a directed graph given as adjacency lists, by iterative depth-first search.
fn find_cycle(adj: &HashMap<u32, Vec<u32>>) -> Option<Vec<u32>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    let mut mark: HashMap<u32, Mark> = HashMap::new();
    let mut starts: Vec<u32> = adj.keys().copied().collect();
    starts.sort_unstable();
    for start in starts {
        if mark.contains_key(&start) {
            continue;
        }
        // Stack of (node, index of the next successor to visit).
        let mut stack: Vec<(u32, usize)> = vec![(start, 0)];
        mark.insert(start, Mark::Open);
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let succ = adj.get(&node).map(Vec::as_slice).unwrap_or(&[]);
            if *next < succ.len() {
                let s = succ[*next];
                *next += 1;
                match mark.get(&s) {
                    Some(Mark::Open) => {
                        let from = stack.iter().position(|&(n, _)| n == s).expect("an open node is on the stack");
                        return Some(stack[from..].iter().map(|&(n, _)| n).collect());
                    }
                    Some(Mark::Done) => {}
                    None => {
                        mark.insert(s, Mark::Open);
                        stack.push((s, 0));
                    }
                }
            } else {
                mark.insert(node, Mark::Done);
                stack.pop();
            }
        }
    }
    None
}

impl Check for RoutingDeadlock {
    fn begin(&mut self, header: &ScheduleHeader, _out: &mut Findings) {
        self.topology = Some(header.topology.clone());
    }

    fn step(&mut self, index: usize, step: &Step, out: &mut Findings) {
        let Some(t) = &self.topology else { return };
        let n = t.num_links() as u32;
        let mut adj: HashMap<u32, Vec<u32>> = HashMap::new();
        for tr in &step.transfers {
            for w in tr.path.windows(2) {
                if w[0].0 < n && w[1].0 < n {
                    adj.entry(w[0].0).or_default().push(w[1].0);
                }
            }
        }
        if adj.is_empty() {
            return;
        }
        for v in adj.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        if let Some(cycle) = find_cycle(&adj) {
            let mut names: Vec<String> = cycle.iter().map(|&l| t.describe_link(LinkId(l))).collect();
            names.push(t.describe_link(LinkId(cycle[0])));
            out.fail(Diagnostic {
                rule: Rule::RoutingDeadlock,
                step: Some(index),
                transfer: None,
                subject: None,
                message: format!(
                    "the routed paths' channel dependencies form a cycle of {} link{}: {}",
                    cycle.len(),
                    crate::units::plural(cycle.len() as u64),
                    names.join(" waits for ")
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::{routed_all_to_all, torus_all_to_all, HardwareRouting, RingAlgorithm, Scheduler};
    use crate::collective::{Collective, CollectiveKind};
    use crate::schedule::StepSink;
    use crate::topology::{torus, TorusParams};
    use crate::verify::{Verifier, VerifyOptions};

    fn check(s: &crate::schedule::Schedule) -> crate::verify::Report {
        let mut v = Verifier::new(VerifyOptions { allow_contention: true, ..Default::default() }).with_check(Box::new(RoutingDeadlock::new()));
        v.begin(&s.header).unwrap();
        for (i, st) in s.steps.iter().enumerate() {
            v.check_step(i, st);
        }
        v.finish().unwrap()
    }

    #[test]
    fn dor_cycles_on_rings_of_four_or_more() {
        for n in 3..8usize {
            let t = torus(&TorusParams::uniform(&[n], 32.0, 100.0)).unwrap();
            let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
            let r = check(&routed_all_to_all(&t, &c, HardwareRouting::Dor).unwrap());
            assert_eq!(r.findings.is_failed(Rule::RoutingDeadlock), n >= 4, "N={n}");
            if n >= 4 {
                let text = r.findings.failures()[0].to_string();
                assert!(text.contains("rule 7 routing deadlock freedom") && text.contains("waits for"), "{text}");
            }
        }
    }

    #[test]
    fn store_and_forward_meets_it() {
        let t = torus(&TorusParams::uniform(&[4, 4], 32.0, 100.0)).unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        let r = check(&torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation).unwrap());
        assert!(r.is_valid());
    }
}
