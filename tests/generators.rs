//! Generators under random fault patterns: every generator either returns a schedule that
//! verifies, or says the faults defeat it (exit 3), never an invalid schedule or a panic.

use collsched::ExitCode;
use collsched::{torus, FaultPattern, LinkId, Topology, TorusParams};
use collsched::{torus_all_to_all, torus_mate, RingAlgorithm, Scheduler};
use collsched::{verify_schedule, VerifyOptions};
use collsched::{Collective, CollectiveKind};
use proptest::prelude::*;

fn faulty(dims: &[usize], picks: &[usize]) -> Topology {
    let mut t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
    let cables = picks
        .iter()
        .map(|&p| {
            let l = t.link(LinkId((p % t.num_links()) as u32));
            (l.src, l.dst)
        })
        .collect();
    FaultPattern { cables, ..Default::default() }.apply(&mut t).unwrap();
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_faults_give_valid_schedules_or_a_reason(which in 0usize..4, picks in proptest::collection::vec(0usize..10_000, 1..4)) {
        let dims = [vec![4, 4], vec![5, 5], vec![3, 4], vec![4, 4, 3]][which].clone();
        let t = faulty(&dims, &picks);
        let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().collect(), 1 << 20, 1, None, &t).unwrap();
        let attempts = [
            ("foldedring+dimrotation", torus_all_to_all(&t, &c, RingAlgorithm::FoldedRing, Scheduler::DimRotation)),
            ("halfring+pipeline", torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::Pipeline { chunks: 3 })),
            ("mate", torus_mate(&t, &c, false)),
            ("matee", torus_mate(&t, &c, true)),
            ("synthesis heuristic", collsched::synthesize_steps(&t, &c, &collsched::SynthOptions {
                time_limit: std::time::Duration::from_millis(200), ..Default::default() })
                .and_then(|r| r.schedule.ok_or_else(|| collsched::Error::infeasible("no schedule")))),
        ];
        for (name, result) in attempts {
            match result {
                Ok(s) => {
                    let r = verify_schedule(&s, &VerifyOptions::default()).unwrap();
                    prop_assert!(r.is_valid(), "{name} on {dims:?} with {picks:?}: {:?}", r.findings.failures().first().map(|d| d.to_string()));
                }
                Err(e) => prop_assert_eq!(e.exit_code(), ExitCode::Infeasible, "{} on {:?} with {:?}: {}", name, dims, picks, e),
            }
        }
    }
}
