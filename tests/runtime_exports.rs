//! What runtimes run: every schedule of a matrix of generators (tori healthy and faulty, MATE,
//! switched algorithms on a fat tree, the synthesizer's heuristic) lowers to per-rank programs
//! that pass rule 6, exports to MSCCL XML that the reader's rules accept and whose chunk-level
//! run computes the collective under rendezvous (so with any buffer size), and to Chakra traces that decode and pair up.

use collsched::check_deadlock;
use collsched::Schedule;
use collsched::{chakra_traces, check_reader_rules, check_xml, decode_chakra, import_msccl, msccl_xml, Buffering, MscclOptions};
use collsched::{fat_tree, torus, FatTreeParams, FaultPattern, NodeId, Topology, TorusParams};
use collsched::{fat_tree_candidates, verify_schedule, VerifyOptions};
use collsched::{lower, ChannelSpread, LowerOptions};
use collsched::{switched, Routing, SwitchedAlgorithm};
use collsched::{torus_all_to_all, torus_mate, RingAlgorithm, Scheduler};
use collsched::{Collective, CollectiveKind};

fn a2a(t: &Topology) -> Collective {
    Collective::new(CollectiveKind::AllToAll, t.node_ids().take(t.num_npus()).collect(), 1 << 16, 1, None, t).unwrap()
}

fn faulty(dims: &[usize]) -> Topology {
    let mut t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
    FaultPattern { cables: vec![(NodeId(0), NodeId(1))], ..Default::default() }.apply(&mut t).unwrap();
    t
}

fn matrix() -> Vec<(String, Schedule)> {
    let mut out = Vec::new();
    for dims in [vec![5], vec![3, 3], vec![4, 4]] {
        let t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
        for alg in [RingAlgorithm::Ring, RingAlgorithm::HalfRing] {
            for sch in [Scheduler::Sequential, Scheduler::DimRotation] {
                out.push((format!("{dims:?} {alg:?} {sch:?}"), torus_all_to_all(&t, &a2a(&t), alg, sch).unwrap()));
            }
        }
        let f = faulty(&dims);
        out.push((format!("{dims:?} faulty FoldedRing"), torus_all_to_all(&f, &a2a(&f), RingAlgorithm::FoldedRing, Scheduler::DimRotation).unwrap()));
        if dims.len() > 1 {
            out.push((format!("{dims:?} MATEe"), torus_mate(&f, &a2a(&f), true).unwrap()));
        }
        let synth = collsched::synthesize_steps(&f, &a2a(&f), &Default::default()).unwrap();
        out.push((format!("{dims:?} synthesized"), synth.schedule.unwrap()));
    }
    let ft =
        fat_tree(&FatTreeParams { levels: 2, k: 4, osr: 1.0, npus: 8, board: Some(4), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 })
            .unwrap();
    let ranks: Vec<NodeId> = (0..8).map(NodeId).collect();
    for (kind, alg) in [
        (CollectiveKind::AllToAll, SwitchedAlgorithm::Pairwise),
        (CollectiveKind::AllToAll, SwitchedAlgorithm::Bruck),
        (CollectiveKind::AllReduce, SwitchedAlgorithm::Ring),
        (CollectiveKind::AllReduce, SwitchedAlgorithm::HalvingDoubling),
        (CollectiveKind::AllGather, SwitchedAlgorithm::RecursiveDoubling),
        (CollectiveKind::ReduceScatter, SwitchedAlgorithm::RecursiveHalving),
    ] {
        let c = Collective::new(kind, ranks.clone(), 1 << 16, 1, None, &ft).unwrap();
        out.push((format!("fat tree {alg:?}"), switched(&ft, &c, alg, Routing::Balanced).unwrap()));
    }
    // The synthesizer's board collectives (one-crossing all_reduce among them), healthy and with
    // a board link down (crossed through the switches).
    let mut broken = ft.clone();
    FaultPattern { cables: vec![(NodeId(0), NodeId(1))], ..Default::default() }.apply(&mut broken).unwrap();
    for (state, t) in [("healthy", &ft), ("board link down", &broken)] {
        for kind in [CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter] {
            let c = Collective::new(kind, ranks.clone(), 1 << 16, 1, None, t).unwrap();
            for (m, s) in fat_tree_candidates(t, &c).unwrap().into_iter().filter(|(m, _)| m.to_string().starts_with("board")) {
                out.push((format!("fat tree {state} {kind} {m}"), s));
            }
        }
    }
    out
}

#[test]
fn every_schedule_of_the_matrix_runs_in_msccl_and_astra_sim() {
    for (name, s) in matrix() {
        let programs = lower(&s, &LowerOptions::default()).unwrap();
        let cycles = check_deadlock(&programs);
        assert!(cycles.is_empty(), "{name}: {}", cycles[0]);
        // The fewest channels whose XML the reader accepts (its per-threadblock step limit).
        let accepted = (1..=6).find_map(|c| {
            let opts = LowerOptions { channels: c, spread: if c == 1 { ChannelSpread::Transfers } else { ChannelSpread::Operations }, ..Default::default() };
            let p = lower(&s, &opts).unwrap();
            let xml = msccl_xml(&p, &MscclOptions::default()).unwrap();
            check_reader_rules(&xml).is_empty().then_some(xml)
        });
        let xml = accepted.unwrap_or_else(|| panic!("{name}: no channel count up to 6 gives XML the reader accepts"));
        // What export promises: it runs without any buffering and computes the collective.
        let report = check_xml(&xml, Buffering::Rendezvous);
        assert!(report.is_valid(), "{name}: {:?} {:?}", report.problems, report.runs.first().map(|r| r.outcome.as_ref().err()));
        assert!(report.problems.warnings.is_empty(), "{name}: {:?}", report.problems.warnings);
        // And what `verify FILE.xml` then checks: imported onto the network, rules 1-5.
        let back = import_msccl(&xml, Some(&s.header.topology)).unwrap_or_else(|e| panic!("{name}: import: {e}"));
        let r = verify_schedule(&back, &VerifyOptions::default()).unwrap();
        assert!(r.is_valid(), "{name}: the imported XML: {:?}", r.findings.failures().iter().take(3).map(|d| d.to_string()).collect::<Vec<_>>());
        let traces = chakra_traces(&programs, &s).unwrap();
        let (mut sends, mut recvs) = (0, 0);
        for (_, data) in &traces {
            let (_, nodes) = decode_chakra(data).unwrap();
            sends += nodes.iter().filter(|n| n.r#type == 5).count();
            recvs += nodes.iter().filter(|n| n.r#type == 6).count();
        }
        assert_eq!(sends, recvs, "{name}");
        assert!(sends > 0, "{name}");
    }
}
