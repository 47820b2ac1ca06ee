use super::*;
use crate::topology::{fat_tree, FatTreeParams, FaultPattern, NodeId};
use crate::units::to_f64;
use crate::verify::{verify_schedule, Report, Rule, VerifyOptions};

/// The four reference trees: (levels, k, osr).
const TREES: [(u32, usize, f64); 4] = [(2, 16, 1.0), (2, 8, 1.0), (2, 12, 2.0), (3, 8, 1.0)];

fn tree(levels: u32, k: usize, osr: f64) -> Topology {
    fat_tree(&FatTreeParams { levels, k, osr, npus: 64, board: Some(8), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 }).unwrap()
}

/// TP groups (consecutive npus) and EP groups (half the npus, consecutive or strided, and all).
fn groups() -> Vec<Vec<NodeId>> {
    let mut g: Vec<Vec<NodeId>> = [2u32, 4, 8, 16].iter().map(|&n| (0..n).map(NodeId).collect()).collect();
    g.push((32..64).map(NodeId).collect());
    g.push((0..32).map(|i| NodeId(2 * i + 1)).collect());
    g.push((0..64).map(NodeId).collect());
    g
}

fn generate(t: &Topology, kind: CollectiveKind, ranks: &[NodeId], bytes: u64, a: SwitchedAlgorithm, r: Routing) -> Schedule {
    let c = Collective::new(kind, ranks.to_vec(), bytes, 1, None, t).unwrap();
    switched(t, &c, a, r).unwrap_or_else(|e| panic!("{} {} {kind} over {} ranks: {e}", a.as_str(), r.name(), ranks.len()))
}

fn verify(s: &Schedule, allow_contention: bool) -> Report {
    verify_schedule(s, &VerifyOptions { allow_contention, ..Default::default() }).unwrap()
}

fn assert_valid(s: &Schedule, allow_contention: bool, what: &str) -> Report {
    let report = verify(s, allow_contention);
    let first: Vec<String> = report.findings.failures().iter().take(3).map(|d| d.to_string()).collect();
    assert!(report.is_valid(), "{what}: {first:?}");
    report
}

#[test]
fn names_are_the_specs_closed_list() {
    for a in SwitchedAlgorithm::ALL {
        assert_eq!(crate::spec::Algorithm::from_name(a.as_str()).map(|n| n.name()), Some(a.as_str()));
    }
}

#[test]
fn every_algorithm_and_routing_is_valid_on_the_reference_trees() {
    for (levels, k, osr) in TREES {
        let t = tree(levels, k, osr);
        for ranks in groups() {
            for a in SwitchedAlgorithm::ALL.into_iter() {
                for &kind in a.kinds() {
                    for &r in Routing::ALL {
                        let s = generate(&t, kind, &ranks, 1 << 20, a, r);
                        let what = format!("{levels}L-k{k}-osr{osr} {} {} {kind} over {} ranks", a.as_str(), r.name(), ranks.len());
                        // Balanced schedules must not share a link; single-path ones may.
                        assert_valid(&s, r == Routing::SinglePath, &what);
                    }
                }
            }
        }
    }
}

#[test]
fn groups_of_any_size_where_the_algorithm_allows() {
    let t = tree(3, 8, 1.0);
    for n in [3u32, 5, 6, 12, 24] {
        let ranks: Vec<NodeId> = (0..n).map(|i| NodeId((i * 5) % 64)).collect();
        for a in SwitchedAlgorithm::ALL {
            for &kind in a.kinds() {
                for &r in Routing::ALL {
                    let s = generate(&t, kind, &ranks, 1000, a, r);
                    assert_valid(&s, r == Routing::SinglePath, &format!("{} {kind} over {n} ranks", a.as_str()));
                }
            }
        }
    }
}

#[test]
fn step_counts_follow_the_algorithms() {
    // Single path never splits a logical step.
    let t = tree(2, 16, 1.0);
    let all: Vec<NodeId> = (0..64).map(NodeId).collect();
    let steps = |kind, a| generate(&t, kind, &all, 1 << 20, a, Routing::SinglePath).steps.len();
    assert_eq!(steps(CollectiveKind::AllToAll, SwitchedAlgorithm::Pairwise), 63);
    assert_eq!(steps(CollectiveKind::AllToAll, SwitchedAlgorithm::Bruck), 6);
    assert_eq!(steps(CollectiveKind::AllReduce, SwitchedAlgorithm::Ring), 126);
    assert_eq!(steps(CollectiveKind::AllReduce, SwitchedAlgorithm::HalvingDoubling), 12);
    assert_eq!(steps(CollectiveKind::AllGather, SwitchedAlgorithm::RecursiveDoubling), 6);
    assert_eq!(steps(CollectiveKind::ReduceScatter, SwitchedAlgorithm::RecursiveHalving), 6);
    // Double binary tree: 64 positions make a tree of height 6, reduced then broadcast, in
    // 2 x 6 + chunks - 1 steps for the chunks per tree that half the pieces give.
    for (pieces, expected) in [(2, 12), (8, 15)] {
        let c = Collective::new(CollectiveKind::AllReduce, all.clone(), 1 << 20, pieces, None, &t).unwrap();
        let s = switched(&t, &c, SwitchedAlgorithm::DoubleBinaryTree, Routing::SinglePath).unwrap();
        assert_eq!(s.steps.len(), expected);
        assert_eq!(s.header.collective.pieces, pieces);
        let meta = s.header.meta.unwrap();
        assert_eq!(
            (meta["algorithm"].as_str(), meta["routing"].as_str(), meta["pieces"].as_u64(), meta["chunks"].as_u64()),
            (Some("double_binary_tree"), Some("single_path"), Some(pieces as u64), Some(pieces as u64 / 2))
        );
    }
}

/// Pipelined, the double binary tree sends each rank's 2M (M/2 up and M down in the tree where it
/// is inner, M/2 up where it is a leaf) at close to the link's rate: on 8 ranks without latency
/// within 30% of 2M/B, where the two halves one after the other took 5M/B.
#[test]
fn the_double_binary_tree_pipelines_its_chunks() {
    let t = fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 8, board: None, bandwidth_gbps: 1.0, latency_ns: 0.0, switch_latency_ns: 0.0 }).unwrap();
    let all: Vec<NodeId> = (0..8).map(NodeId).collect();
    let time = |pieces| {
        let c = Collective::new(CollectiveKind::AllReduce, all.clone(), 8000, pieces, None, &t).unwrap();
        let s = switched(&t, &c, SwitchedAlgorithm::DoubleBinaryTree, Routing::Balanced).unwrap();
        to_f64(&assert_valid(&s, false, &format!("{pieces} pieces")).cost.unwrap().time_ns())
    };
    assert_eq!(time(2), 40_000.0);
    let chosen = time(1);
    assert!(chosen <= 1.3 * 16_000.0, "{chosen} ns");
    assert!(chosen <= time(16), "{chosen} ns against 8 chunks per tree");
}

/// Without `chunks` the double binary tree takes the fastest count around the fastest power of
/// two, and tries 128: 16 ranks (every fourth npu, boards of 4) of the 2L-k8-osr1 tree, 64 MiB,
/// no slower than any count from 4 to 16; without latency, on 5, 9 and 16 ranks, 128 chunks per
/// tree beat 64, the most it tried.
#[test]
fn the_double_binary_tree_takes_the_fastest_chunk_count() {
    let t = |latency_ns: f64, switch_latency_ns: f64| {
        fat_tree(&FatTreeParams { levels: 2, k: 8, osr: 1.0, npus: 64, board: Some(4), bandwidth_gbps: 400.0, latency_ns, switch_latency_ns }).unwrap()
    };
    let time = |t: &Topology, ranks: &[NodeId], pieces: u32| {
        let c = Collective::new(CollectiveKind::AllReduce, ranks.to_vec(), 64 << 20, pieces, None, t).unwrap();
        let s = switched(t, &c, SwitchedAlgorithm::DoubleBinaryTree, Routing::Balanced).unwrap();
        let mut meter = crate::cost::SyncMeter::new(&s.header).unwrap();
        s.steps.iter().for_each(|step| meter.step(step));
        (meter.finish().unwrap().time_ns(), s.header.meta.unwrap()["chunks"].as_u64().unwrap())
    };
    let ranks: Vec<NodeId> = (0..16).map(|i| NodeId(4 * i)).collect();
    let tree = t(25.0, 1000.0);
    let (chosen, chunks) = time(&tree, &ranks, 1);
    for c in [4u32, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] {
        let (other, _) = time(&tree, &ranks, 2 * c);
        assert!(chosen <= other, "{chunks} chunks: {} ns against {c} chunks: {} ns", to_f64(&chosen), to_f64(&other));
        assert!(chosen < other || chunks <= c as u64, "a tie goes to the fewer chunks");
    }
    let flat = t(0.0, 0.0);
    for p in [5u32, 9, 16] {
        let ranks: Vec<NodeId> = (0..p).map(|i| NodeId(4 * i)).collect();
        let (chosen, chunks) = time(&flat, &ranks, 1);
        let (at_128, _) = time(&flat, &ranks, 256);
        assert!(chosen <= at_128, "{p} ranks: {chunks} chunks {} ns against 128 chunks {} ns", to_f64(&chosen), to_f64(&at_128));
    }
}

#[test]
fn single_path_pairwise_shares_uplinks_and_balanced_does_not() {
    let all: Vec<NodeId> = (0..64).map(NodeId).collect();
    for (levels, k, osr) in TREES {
        let t = tree(levels, k, osr);
        let single = generate(&t, CollectiveKind::AllToAll, &all, 1 << 20, SwitchedAlgorithm::Pairwise, Routing::SinglePath);
        let report = verify(&single, false);
        assert!(report.findings.failures_of(Rule::LinkSharing) > 0, "{levels}L-k{k}-osr{osr}");
        let balanced = generate(&t, CollectiveKind::AllToAll, &all, 1 << 20, SwitchedAlgorithm::Pairwise, Routing::Balanced);
        assert_eq!(verify(&balanced, false).findings.failures_of(Rule::LinkSharing), 0);
        // A full-bisection tree carries every pairwise step at once. With osr 2 (8 npus, 4
        // uplinks per leaf, the leaf one board) step s sends min(s, 64 - s, 8) flows out of each
        // leaf, so the 55 steps with more than 4 take two sub-steps.
        let expected = if osr == 1.0 { 63 } else { 63 + 55 };
        assert_eq!(balanced.steps.len(), expected, "{levels}L-k{k}-osr{osr}");
    }
}

#[test]
fn pairwise_times_single_path_against_balanced() {
    let all: Vec<NodeId> = (0..64).map(NodeId).collect();
    for (levels, k, osr) in TREES {
        let t = tree(levels, k, osr);
        for bytes in [1u64 << 20, 64 << 20] {
            let cost = |r| {
                let s = generate(&t, CollectiveKind::AllToAll, &all, bytes, SwitchedAlgorithm::Pairwise, r);
                let c = verify(&s, true).cost.unwrap();
                (to_f64(&c.time_ns()), to_f64(&c.bandwidth_ns()))
            };
            let ((single, single_bw), (balanced, balanced_bw)) = (cost(Routing::SinglePath), cost(Routing::Balanced));
            println!(
                "pairwise EP=64 {}MiB {levels}L-k{k}-osr{osr}: single_path {single:.0} ns (bandwidth term {single_bw:.0}), balanced {balanced:.0} ns (bandwidth term {balanced_bw:.0})",
                bytes >> 20
            );
            let tree = format!("{levels}L-k{k}-osr{osr}, {bytes} bytes");
            assert!(balanced_bw < single_bw, "{tree}: balanced bandwidth term {balanced_bw} ns is not below single path {single_bw} ns");
            // On an oversubscribed tree the sub-steps of balanced routing each pay the path
            // latency again (3 switches of 1 us), which at 1 MiB costs more than the sharing it
            // avoids; on full-bisection trees balanced routing never splits a step.
            if osr == 1.0 || bytes >= 64 << 20 {
                assert!(balanced < single, "{tree}: balanced {balanced} ns is not below single path {single} ns");
            }
        }
    }
}

#[test]
fn balanced_routing_works_around_failed_links() {
    // A failed leaf-spine cable leaves the colouring router; first fit keeps every sub-step
    // free of sharing and every path shortest among what is up.
    for (levels, k, osr) in TREES {
        let mut t = tree(levels, k, osr);
        let shape = t.fat_tree_shape().unwrap().clone();
        FaultPattern { cables: vec![(shape.leaf(0), shape.middle_switch(0))], ..Default::default() }.apply(&mut t).unwrap();
        let all: Vec<NodeId> = (0..64).map(NodeId).collect();
        for (a, kind) in [(SwitchedAlgorithm::Pairwise, CollectiveKind::AllToAll), (SwitchedAlgorithm::DoubleBinaryTree, CollectiveKind::AllReduce)] {
            for &r in Routing::ALL {
                let s = generate(&t, kind, &all, 1 << 20, a, r);
                assert_valid(&s, r == Routing::SinglePath, &format!("{levels}L-k{k}-osr{osr} {} {} with a failed cable", a.as_str(), r.name()));
            }
        }
    }
}

#[test]
fn a_healthy_tree_is_never_slower_than_with_a_cable_down() {
    // Every sub-step of the faulty tree's schedule runs on the healthy tree too, so the colouring
    // must do at least as well. The double binary tree's flows carry 1 or 2 pieces' worth; the
    // König colouring of all flows at once put a large flow in every sub-step (24 ranks of the
    // 2-level k16 tree, no latency: 84.2 us healthy against 68.6 us with the cable down).
    for (levels, k, osr) in TREES {
        let t = fat_tree(&FatTreeParams { levels, k, osr, npus: 64, board: Some(8), bandwidth_gbps: 32.0, latency_ns: 0.0, switch_latency_ns: 0.0 }).unwrap();
        let mut faulty = t.clone();
        let shape = t.fat_tree_shape().unwrap().clone();
        FaultPattern { cables: vec![(shape.leaf(0), shape.middle_switch(0))], ..Default::default() }.apply(&mut faulty).unwrap();
        let ranks: Vec<NodeId> = (0..24).map(NodeId).collect();
        let time = |t: &Topology| {
            to_f64(
                &assert_valid(&generate(t, CollectiveKind::AllReduce, &ranks, 1 << 20, SwitchedAlgorithm::DoubleBinaryTree, Routing::Balanced), false, "dbt")
                    .cost
                    .unwrap()
                    .time_ns(),
            )
        };
        let (healthy, down) = (time(&t), time(&faulty));
        assert!(healthy <= down, "{levels}L-k{k}-osr{osr}: {healthy} ns healthy, {down} ns with a cable down");
    }
}

#[test]
fn wrong_kinds_are_refused() {
    let t = tree(2, 16, 1.0);
    let ranks: Vec<NodeId> = (0..6).map(NodeId).collect();
    let c = Collective::new(CollectiveKind::AllReduce, ranks.clone(), 1 << 20, 1, None, &t).unwrap();
    let e = switched(&t, &c, SwitchedAlgorithm::Pairwise, Routing::Balanced).unwrap_err();
    assert!(e.message().contains("pairwise") && e.message().contains("all_reduce"), "{e}");
    let c = Collective::new(CollectiveKind::AllGather, ranks, 1 << 20, 1, None, &t).unwrap();
    let e = switched(&t, &c, SwitchedAlgorithm::RecursiveHalving, Routing::SinglePath).unwrap_err();
    assert!(e.message().contains("recursive_halving") && e.message().contains("all_gather"), "{e}");
}

/// Beyond a power of two the recursive algorithms fold the p - m extra ranks onto the core of
/// m ranks and unfold them at the end: one logical step each side, log2 m between (twice for
/// halving-doubling); every rank sends at most once per logical step.
#[test]
fn recursive_algorithms_fold_the_ranks_beyond_a_power_of_two() {
    for p in 2usize..=13 {
        let m = 1usize << p.ilog2();
        let ends = if m < p { 2 } else { 0 };
        let log = m.ilog2() as usize;
        for (plan, core) in [(plan::recursive_halving(p), log), (plan::recursive_doubling(p), log), (plan::halving_doubling(p), 2 * log)] {
            assert_eq!(plan.len(), core + ends, "p = {p}");
            for step in &plan {
                let mut senders: Vec<usize> = step.iter().map(|f| f.src).collect();
                senders.sort();
                senders.dedup();
                assert_eq!(senders.len(), step.len(), "p = {p}: a rank sends twice in a step");
            }
        }
    }
}
