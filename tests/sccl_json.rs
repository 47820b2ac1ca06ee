//! SCCL's algorithm JSON (docs/design/FORMATS.md "SCCL algorithm JSON"): a hand-written
//! msccl-tools file round-trips; every file written from generated and synthesized schedules
//! meets the format's rules as FORMATS.md states them, checked here by a checker of its own
//! (written from the document, not from `export::sccl::rules`); each rule catches an injected
//! defect; bad files get their exit codes.

mod common;

use collsched::Instance;
use collsched::Rational;
use collsched::{import_sccl, parse_sccl, sccl_algorithm, sccl_coordinates, sccl_json, sccl_problems, ScclAlgorithm};
use collsched::{torus, FaultPattern, NodeId, Topology, TorusParams};
use collsched::{torus_all_to_all, torus_ring_collective, RingAlgorithm, Scheduler};
use collsched::{verify_schedule, VerifyOptions};
use collsched::{write_schedule_file, Schedule};
use collsched::{Collective, CollectiveKind};
use proptest::prelude::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const RING4: &str = include_str!("data/sccl/ring4_alltoall.msccl.json");

// ---------------------------------------------------------------------------------------------
// The format's rules, from docs/design/FORMATS.md, on the JSON text as msccl-tools would read it.

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default()
}

fn uint(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a non-negative integer"))
}

/// Every way the text departs from FORMATS.md, for a file collsched writes (so also: exact key
/// sets, `extra_rounds` = rounds - steps, and each step's rounds the least that fit).
fn violations(text: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(text).expect("JSON");
    let mut bad = Vec::new();
    let want = |b: &mut Vec<String>, what: &str, v: &Value, ks: &[&str], tag: &str| {
        if keys(v) != ks.iter().copied().collect() {
            b.push(format!("{what} has keys {:?}", keys(v)));
        }
        if v["msccl_type"] != tag {
            b.push(format!("{what}.msccl_type = {}", v["msccl_type"]));
        }
    };
    want(&mut bad, "algorithm", &v, &["msccl_type", "name", "instance", "input_map", "output_map", "steps", "collective", "topology"], "algorithm");
    let (inst, coll, topo) = (&v["instance"], &v["collective"], &v["topology"]);
    want(&mut bad, "instance", inst, &["msccl_type", "steps", "extra_rounds", "chunks", "pipeline", "extra_memory", "allow_exchange"], "instance");
    want(&mut bad, "collective", coll, &["msccl_type", "name", "nodes", "chunks", "triggers", "runtime_name"], "collective");
    want(&mut bad, "topology", topo, &["msccl_type", "name", "switches", "links"], "topology");
    if !bad.is_empty() {
        return bad;
    }
    // Rules 1 and 2.
    let links: Vec<Vec<u64>> = topo["links"].as_array().unwrap().iter().map(|r| r.as_array().unwrap().iter().map(uint).collect()).collect();
    let n = links.len();
    if uint(&coll["nodes"]) as usize != n || links.iter().enumerate().any(|(d, r)| r.len() != n || r[d] != 0) {
        bad.push("rule 1: links is not an n x n matrix with a zero diagonal over collective.nodes".into());
        return bad;
    }
    if !inst["pipeline"].is_null() || coll["triggers"] != serde_json::json!({}) || topo["switches"] != serde_json::json!([]) || uint(&inst["chunks"]) == 0 {
        bad.push("rule 2: pipeline, triggers, switches or chunks".into());
        return bad;
    }
    // The chunked collective: chunk c's part i at address addr(c)*C + i.
    let cut = uint(&inst["chunks"]);
    let mut chunks: Vec<(BTreeSet<u64>, BTreeSet<u64>, u64)> = Vec::new();
    for ch in coll["chunks"].as_array().unwrap() {
        want(&mut bad, "chunk", ch, &["msccl_type", "pre", "post", "addr"], "chunk");
        let set = |x: &Value| x.as_array().unwrap().iter().map(uint).collect::<BTreeSet<u64>>();
        for i in 0..cut {
            chunks.push((set(&ch["pre"]), set(&ch["post"]), uint(&ch["addr"]) * cut + i));
        }
    }
    // Rule 3.
    for (field, side) in [("input_map", 0), ("output_map", 1)] {
        let mut derived: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        for (pre, post, addr) in &chunks {
            for r in if side == 0 { pre } else { post } {
                derived.entry(r.to_string()).or_default().insert(*addr);
            }
        }
        let file: BTreeMap<String, BTreeSet<u64>> =
            v[field].as_object().unwrap().iter().map(|(k, a)| (k.clone(), a.as_array().unwrap().iter().map(uint).collect())).collect();
        if file != derived {
            bad.push(format!("rule 3: {field}"));
        }
    }
    // Rules 4-9, simulating who holds which chunk.
    let steps = v["steps"].as_array().unwrap();
    let rounds: Vec<u64> = steps.iter().map(|s| uint(&s["rounds"])).collect();
    if uint(&inst["steps"]) != steps.len() as u64 || uint(&inst["extra_rounds"]) + steps.len() as u64 != rounds.iter().sum::<u64>() || rounds.contains(&0) {
        bad.push("rule 4: instance.steps, extra_rounds or a zero rounds".into());
    }
    let mut holds: HashSet<(u64, usize)> = chunks.iter().enumerate().flat_map(|(c, (pre, _, _))| pre.iter().map(move |&r| (r, c))).collect();
    for (t, step) in steps.iter().enumerate() {
        want(&mut bad, "step", step, &["msccl_type", "rounds", "sends"], "step");
        let sends: Vec<[u64; 3]> = step["sends"].as_array().unwrap().iter().map(|s| serde_json::from_value(s.clone()).unwrap()).collect();
        let mut per_pair: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        let mut gained: HashSet<(u64, usize)> = HashSet::new();
        let (mut out_addr, mut in_addr) = (HashSet::new(), HashSet::new());
        if sends.iter().collect::<HashSet<_>>().len() != sends.len() {
            bad.push(format!("rule 5: step {t} lists a send twice"));
        }
        for &[addr, src, dst] in &sends {
            let at: Vec<usize> = (0..chunks.len()).filter(|&c| chunks[c].2 == addr).collect();
            if at.is_empty() || src as usize >= n || dst as usize >= n || src == dst || links[dst as usize][src as usize] == 0 {
                bad.push(format!("rule 5: step {t} send {:?}", [addr, src, dst]));
                continue;
            }
            *per_pair.entry((src, dst)).or_default() += 1;
            let carried: Vec<usize> = at.iter().copied().filter(|&c| holds.contains(&(src, c))).collect();
            if carried.is_empty() {
                bad.push(format!("rule 7: step {t}: rank {src} sends address {addr} it does not hold"));
            }
            for c in carried {
                if holds.contains(&(dst, c)) || !gained.insert((dst, c)) {
                    bad.push(format!("rule 8: step {t}: rank {dst} gets chunk {c} again"));
                }
            }
            out_addr.insert((src, addr));
            in_addr.insert((dst, addr));
        }
        if out_addr.intersection(&in_addr).next().is_some() {
            bad.push(format!("rule 9: step {t}"));
        }
        // Rule 6, and the rounds are the least that fit (FORMATS.md, Rounds and coordinates).
        let least = per_pair.iter().map(|(&(s, d), &k)| k.div_ceil(links[d as usize][s as usize])).max().unwrap_or(1).max(1);
        if rounds[t] != least {
            bad.push(format!("rule 6: step {t} has rounds {} but its sends need exactly {least}", rounds[t]));
        }
        holds.extend(gained);
    }
    // Rule 10.
    for (c, (_, post, _)) in chunks.iter().enumerate() {
        if post.iter().any(|&r| !holds.contains(&(r, c))) {
            bad.push(format!("rule 10: chunk {c}"));
        }
    }
    // The name msccl-tools gives an algorithm.
    let mut inst_name = format!("steps={}", inst["steps"]);
    if uint(&inst["extra_rounds"]) > 0 {
        inst_name += &format!(",rounds={}", rounds.iter().sum::<u64>());
    }
    if cut > 1 {
        inst_name += &format!(",chunks={cut}");
    }
    let name = format!("{}-{}-{inst_name}", coll["name"].as_str().unwrap(), topo["name"].as_str().unwrap());
    if v["name"] != name.as_str() {
        bad.push(format!("name {} is not {name}", v["name"]));
    }
    bad
}

// ---------------------------------------------------------------------------------------------

/// The steps as comparable values: per step, its transfers (link, op, pieces) sorted.
fn normalized(s: &Schedule) -> Vec<Vec<(u32, &'static str, Vec<String>)>> {
    s.steps
        .iter()
        .map(|st| {
            let mut v: Vec<_> = st
                .transfers
                .iter()
                .map(|tr| {
                    let mut p: Vec<String> = tr.pieces.iter().map(|p| p.to_string()).collect();
                    p.sort();
                    (tr.path[0].0, tr.op.as_str(), p)
                })
                .collect();
            v.sort();
            v
        })
        .collect()
}

fn instance_of(s: &Schedule) -> Instance {
    Instance { topology: s.header.topology.clone(), collective: s.header.collective.clone(), pieces_given: true }
}

/// Writes the schedule, checks the text against the rules, and reads it back onto the same
/// instance: the same steps. Returns the text.
fn written_and_read_back(name: &str, s: &Schedule) -> String {
    let export = sccl_algorithm(s).unwrap_or_else(|e| panic!("{name}: {e}"));
    let text = sccl_json(&export.algorithm);
    let bad = violations(&text);
    assert!(bad.is_empty(), "{name}: {bad:?}");
    assert!(sccl_problems(&export.algorithm).is_empty());
    let back = import_sccl(&parse_sccl(&text, name).unwrap(), Some(&instance_of(s))).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(normalized(&back), normalized(s), "{name}");
    assert_eq!(sccl_coordinates(s).unwrap(), export.coordinates, "{name}");
    text
}

fn ranks(t: &Topology) -> Vec<NodeId> {
    t.node_ids().take(t.num_npus()).collect()
}

fn collective(t: &Topology, kind: CollectiveKind, pieces: u32) -> Collective {
    Collective::new(kind, ranks(t), 1 << 16, pieces, None, t).unwrap()
}

fn faulty(dims: &[usize], a: u32, b: u32) -> Topology {
    let mut t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
    FaultPattern { cables: vec![(NodeId(a), NodeId(b))], ..Default::default() }.apply(&mut t).unwrap();
    t
}

/// The most pieces any link carries in each step (the rounds on equal bandwidths).
fn busiest_link(s: &Schedule) -> Vec<u64> {
    s.steps
        .iter()
        .map(|st| {
            let mut per: BTreeMap<u32, u64> = BTreeMap::new();
            for tr in &st.transfers {
                *per.entry(tr.path[0].0).or_default() += tr.pieces.len() as u64;
            }
            per.values().copied().max().unwrap_or(1).max(1)
        })
        .collect()
}

#[test]
fn a_hand_written_ring4_all_to_all_round_trips() {
    let alg = parse_sccl(RING4, "ring4").unwrap();
    assert!(violations(RING4).is_empty(), "{:?}", violations(RING4));
    assert!(sccl_problems(&alg).is_empty(), "{:?}", sccl_problems(&alg));
    let s = import_sccl(&alg, None).unwrap();
    let report = verify_schedule(&s, &VerifyOptions::default()).unwrap();
    assert!(report.is_valid(), "{:?}", report.findings.failures());
    // Step 1: every rank sends its right neighbour's block and the opposite rank's block right
    // (two chunks on one link: rounds 2) and its left neighbour's left; step 2 forwards.
    let c = sccl_coordinates(&s).unwrap();
    assert_eq!((c.steps, c.rounds_per_step.clone(), c.rounds, c.chunks), (2, vec![2, 1], 3, 1));
    // At 1 GB/s per unit and one byte per chunk, the bandwidth term is the rounds in ns.
    assert_eq!(report.cost.unwrap().bandwidth_ns(), Rational::from_integer(3));
    let export = sccl_algorithm(&s).unwrap();
    let mut hand = alg.clone();
    for m in [&mut hand.input_map, &mut hand.output_map] {
        m.values_mut().for_each(|v| v.sort_unstable());
    }
    assert_eq!(export.algorithm, hand, "what we write is the hand-written file up to the order of map entries");
    let text = written_and_read_back("ring4", &s);
    assert_eq!(normalized(&import_sccl(&parse_sccl(&text, "again").unwrap(), None).unwrap()), normalized(&s));
}

#[test]
fn generated_schedules_are_written_by_the_rules_and_read_back() {
    let mut cases: Vec<(String, Schedule)> = Vec::new();
    for dims in [vec![4], vec![5], vec![3, 3], vec![4, 4]] {
        let t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
        for (alg, sch) in [(RingAlgorithm::Ring, Scheduler::Sequential), (RingAlgorithm::HalfRing, Scheduler::DimRotation)] {
            let s = torus_all_to_all(&t, &collective(&t, CollectiveKind::AllToAll, 1), alg, sch).unwrap();
            cases.push((format!("{dims:?} all_to_all {alg:?} {sch:?}"), s));
        }
        for kind in [CollectiveKind::AllGather, CollectiveKind::ReduceScatter] {
            for alg in [RingAlgorithm::Ring, RingAlgorithm::HalfRing] {
                let p = if alg == RingAlgorithm::HalfRing { 2 } else { 1 };
                let s = torus_ring_collective(&t, &collective(&t, kind, p), alg).unwrap();
                cases.push((format!("{dims:?} {kind} {alg:?}"), s));
            }
        }
    }
    let f = faulty(&[3, 3], 0, 1);
    let synth = collsched::synthesize_steps(&f, &collective(&f, CollectiveKind::AllToAll, 1), &Default::default()).unwrap();
    cases.push(("3x3 one cable down, synthesized".into(), synth.schedule.unwrap()));
    for (name, s) in &cases {
        assert!(verify_schedule(s, &VerifyOptions::default()).unwrap().is_valid(), "{name}");
        written_and_read_back(name, s);
        // Equal bandwidths: one unit per link, so a step's rounds are its busiest link's pieces.
        assert_eq!(sccl_coordinates(s).unwrap().rounds_per_step, busiest_link(s), "{name}");
    }
}

#[test]
fn coordinates_of_a_ring_all_reduce_are_the_known_costs() {
    // Ring all-reduce on n ranks: 2(n-1) steps of one block per link, so R = 2(n-1) rounds over
    // C = n chunks of the one buffer: R/C = 2(n-1)/n, the ring all-reduce's bandwidth factor.
    for n in [3usize, 4, 6] {
        let t = torus(&TorusParams::uniform(&[n], 32.0, 100.0)).unwrap();
        let s = torus_ring_collective(&t, &collective(&t, CollectiveKind::AllReduce, 1), RingAlgorithm::Ring).unwrap();
        let c = sccl_coordinates(&s).unwrap();
        assert_eq!((c.steps, c.rounds, c.chunks), (2 * (n as u64 - 1), 2 * (n as u64 - 1), n as u64));
        assert_eq!(c.rounds_per_chunk(), Rational::new(2 * (n as i128 - 1), n as i128));
        // And it cannot be written: ncclize could not lower any all_reduce correctly.
        let e = sccl_algorithm(&s).unwrap_err();
        assert!(e.message().contains("all_reduce over") && e.message().contains("ncclize"), "{e}");
    }
}

#[test]
fn what_the_format_cannot_hold_is_refused_with_its_place() {
    // A routed path (FoldedRing's fold over the failed cable).
    let f = faulty(&[5], 0, 1);
    let s = torus_all_to_all(&f, &collective(&f, CollectiveKind::AllToAll, 1), RingAlgorithm::FoldedRing, Scheduler::Sequential).unwrap();
    let e = sccl_algorithm(&s).unwrap_err();
    assert!(e.message().contains("transfer") && e.message().contains("links; an SCCL send goes over one link"), "{e}");
    assert!(sccl_coordinates(&s).is_err());
    // A group that leaves npus out.
    let t = torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap();
    let mut s = torus_all_to_all(&t, &collective(&t, CollectiveKind::AllToAll, 1), RingAlgorithm::Ring, Scheduler::Sequential).unwrap();
    let group = Collective::new(CollectiveKind::AllToAll, vec![NodeId(0), NodeId(1)], 1 << 16, 1, None, &t).unwrap();
    s.header.collective = group;
    assert!(sccl_algorithm(&s).unwrap_err().message().contains("node 2 ((2), a npu) is not a rank"), "{}", sccl_algorithm(&s).unwrap_err());
    // Non-uniform blocks.
    let bb: Vec<Vec<u64>> = (0..4).map(|i| (0..4).map(|j| if i == j { 0 } else { j as u64 }).collect()).collect();
    let mut s = torus_all_to_all(&t, &collective(&t, CollectiveKind::AllToAll, 1), RingAlgorithm::Ring, Scheduler::Sequential).unwrap();
    s.header.collective = Collective::new(CollectiveKind::AllToAll, ranks(&t), 6, 1, Some(bb), &t).unwrap();
    assert!(sccl_algorithm(&s).unwrap_err().message().contains("block_bytes"));
    // A wasted copy (a receive of a chunk the receiver holds: ncclize would reduce it).
    let mut s = torus_all_to_all(&t, &collective(&t, CollectiveKind::AllToAll, 1), RingAlgorithm::Ring, Scheduler::Sequential).unwrap();
    let again = s.steps[0].clone();
    s.steps.push(again);
    assert!(verify_schedule(&s, &VerifyOptions::default()).unwrap().is_valid(), "wasted copies are valid in our model");
    let e = sccl_algorithm(&s).unwrap_err();
    assert!(e.message().contains("rule 8") && e.message().contains("already holds"), "{e}");
}

/// One defect per rule, injected into a valid algorithm: both checkers catch it, ours with the
/// rule's number.
#[test]
fn every_rule_catches_its_injected_defect() {
    let good = parse_sccl(RING4, "ring4").unwrap();
    type Mutation = (u32, fn(&mut ScclAlgorithm));
    let mutations: Vec<Mutation> = vec![
        (1, |a| a.topology.links[0][0] = 1),
        (1, |a| a.collective.nodes = 5),
        (2, |a| a.instance.pipeline = Some(1)),
        (2, |a| a.topology.switches.push(serde_json::json!([[0], [1], 1, "s"]))),
        (3, |a| a.input_map.get_mut(&0).unwrap().push(1)),
        (3, |a| {
            a.output_map.remove(&3);
        }),
        (4, |a| a.instance.steps = 3),
        (4, |a| a.instance.extra_rounds = 0),
        (5, |a| a.steps[1].sends.push([2, 3, 1])),
        (5, |a| a.steps[1].sends.push([2, 3, 0])),
        (6, |a| {
            a.steps[0].rounds = 1;
            a.steps[1].rounds = 2;
        }),
        (7, |a| a.steps[0].sends.push([5, 0, 1])),
        (8, |a| a.steps[1].sends.push([1, 1, 0])),
        (9, |a| {
            // Rank 1 sends address 8 on in step 1, in which it also receives it.
            a.steps.swap(0, 1);
            a.steps[0].sends.push([8, 0, 1]);
        }),
        (10, |a| {
            a.steps[1].sends.pop();
        }),
    ];
    for (i, (rule, mutate)) in mutations.iter().enumerate() {
        let mut a = good.clone();
        mutate(&mut a);
        let ours = sccl_problems(&a);
        assert!(ours.iter().any(|p| u32::from(p.rule) == *rule), "mutation {i}: rule {rule} not among {ours:?}");
        let theirs = violations(&serde_json::to_string(&a).unwrap());
        assert!(!theirs.is_empty(), "mutation {i} (rule {rule}) passes the independent checker");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    /// Synthesized all-to-alls on small tori with one failed cable anywhere: written by the
    /// rules, read back to the same steps, coordinates = busiest links.
    #[test]
    fn synthesized_all_to_alls_with_a_fault_round_trip(dims in prop_oneof![Just(vec![5usize]), Just(vec![6]), Just(vec![3, 3]), Just(vec![2, 4])], a in 0u32..16, dim in 0usize..2) {
        let t = torus(&TorusParams::uniform(&dims, 32.0, 100.0)).unwrap();
        let a = a % t.num_npus() as u32;
        let dim = dim % dims.len();
        let stride: usize = dims[..dim].iter().product();
        let coord = (a as usize / stride) % dims[dim];
        let b = (a as usize - coord * stride + ((coord + 1) % dims[dim]) * stride) as u32;
        let f = faulty(&dims, a, b);
        let report = collsched::synthesize_steps(&f, &collective(&f, CollectiveKind::AllToAll, 1), &Default::default()).unwrap();
        if let Some(s) = report.schedule {
            written_and_read_back(&format!("{dims:?} cable {a}-{b}"), &s);
            prop_assert_eq!(sccl_coordinates(&s).unwrap().rounds_per_step, busiest_link(&s));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The binary.

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_collsched")).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn tmp(name: &str) -> PathBuf {
    common::scratch("sccl").join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn verify_and_export_from_the_command_line() {
    let hand = tmp("ring4.msccl.json");
    std::fs::write(&hand, RING4).unwrap();
    let o = run(&["verify", s(&hand)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("2 steps, 3 rounds, 1 chunks; meets every rule"), "{}", text(&o));
    // Synthesize all_gather on a 3x3 torus, write it as SCCL JSON, read that back.
    let sched = tmp("ag3x3.json");
    let o = run(&["synthesize", "--torus", "3x3", "--collective", "all_gather", "--bytes", "1MiB", "-o", s(&sched)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = tmp("sccl-out");
    let o = run(&["export", s(&sched), "--to", "sccl-json", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let written = dir.join("ag3x3.msccl.json");
    let bad = violations(&std::fs::read_to_string(&written).unwrap());
    assert!(bad.is_empty(), "{bad:?}");
    let o = run(&["verify", s(&written), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["valid"].clone(), v["sccl"]["problems"].clone()), (Value::Bool(true), serde_json::json!([])));
    // Onto the synthesis's own network (32 GB/s, 1 MiB) the cost is the schedule's.
    let spec = tmp("ag3x3.spec.json");
    let o = run(&["synthesize", "--torus", "3x3", "--collective", "all_gather", "--bytes", "1MiB", "--print-spec"]);
    std::fs::write(&spec, &o.stdout).unwrap();
    let mine = run(&["cost", s(&sched), "--json"]);
    let theirs = run(&["verify", s(&written), "--spec", s(&spec), "--json"]);
    assert_eq!(theirs.status.code(), Some(0), "{}", text(&theirs));
    let (a, b): (Value, Value) = (serde_json::from_slice(&mine.stdout).unwrap(), serde_json::from_slice(&theirs.stdout).unwrap());
    assert_eq!(a["time_ns"], b["cost"]["time_ns"]);
    // A certificate attaches the SCCL file; proof check re-checks it and passes over it in a folder.
    let certs = tmp("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let attached = certs.join("ag.msccl.json");
    std::fs::copy(&written, &attached).unwrap();
    let o = run(&["bound", s(&spec), "--schedule", s(&attached), "--certificate", s(&certs.join("ag.cert.json"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["proof", "check", s(&certs)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("1 certificates, 1 hold"), "{}", text(&o));
    let o = run(&["proof", "check", s(&attached)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not a certificate"));
    // Refused among others (an SCCL file, a path that does not exist), it is reported as
    // unreadable and the certificates beside it are still checked.
    let missing = certs.join("missing.cert.json");
    let o = run(&["proof", "check", s(&attached), s(&certs.join("ag.cert.json")), s(&missing)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains(&format!("BAD  {}: an SCCL algorithm, not a certificate", attached.display())), "{out}");
    assert!(out.contains(&format!("BAD  {}: cannot read: no such file or folder", missing.display())), "{out}");
    assert!(out.contains("3 certificates, 1 hold, 0 fail, 2 unreadable"), "{out}");
}

#[test]
fn bad_sccl_files_get_clear_errors_and_exit_codes() {
    let write = |name: &str, v: &Value| {
        let p = tmp(name);
        std::fs::write(&p, serde_json::to_string(v).unwrap()).unwrap();
        p
    };
    let good: Value = serde_json::from_str(RING4).unwrap();
    // A missing key: exit 2, naming it.
    let mut v = good.clone();
    v["instance"].as_object_mut().unwrap().remove("chunks");
    let o = run(&["verify", s(&write("missing.json", &v))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("field `instance`") && text(&o).contains("missing field `chunks`"), "{}", text(&o));
    // A count is refused before anything is sized by it: exit 2 at once, naming file, field and
    // value (these aborted on allocation, panicked, or took seconds and gigabytes).
    for (chunks, what) in [
        (serde_json::json!(1_000_000_000u64), "instance.chunks = 1000000000: "),
        (serde_json::json!(1u64 << 63), "instance.chunks = 9223372036854775808: "),
        (serde_json::json!(1_000_000u64), "instance.chunks = 1000000: "),
        (serde_json::json!(u64::MAX), "instance.chunks = 18446744073709551615: "),
    ] {
        let mut v = good.clone();
        v["instance"]["chunks"] = chunks;
        let p = write("manychunks.json", &v);
        let started = std::time::Instant::now();
        let o = run(&["verify", s(&p)]);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", text(&o));
        assert!(text(&o).contains(s(&p)) && text(&o).contains(what), "{what}: {}", text(&o));
        assert!(started.elapsed() < std::time::Duration::from_secs(3), "{what}: {:?}", started.elapsed());
    }
    // A send from a rank that does not hold the chunk: exit 1, our rule 3 and SCCL rule 7.
    let mut v = good.clone();
    v["steps"][0]["sends"].as_array_mut().unwrap().push(serde_json::json!([14, 0, 1]));
    let o = run(&["verify", s(&write("causality.json", &v))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("rule 3") && text(&o).contains("SCCL rule 7: steps[0].sends[12] = [14, 0, 1]: rank 0 holds no chunk at address 14"),
        "{}",
        text(&o)
    );
    // An unknown collective (a Broadcast from rank 0): exit 2, naming it.
    let mut v = good.clone();
    let chunk = serde_json::json!({"msccl_type": "chunk", "pre": [0], "post": [0, 1, 2, 3], "addr": 0});
    v["collective"]["chunks"] = serde_json::json!([chunk]);
    v["collective"]["name"] = "Broadcast(n=4,root=0)".into();
    v["collective"]["runtime_name"] = "custom".into();
    let o = run(&["verify", s(&write("broadcast.json", &v))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("collective.name = \"Broadcast(n=4,root=0)\"") && text(&o).contains("no such collective"), "{}", text(&o));
    // A send over a pair without a link, from a rank to itself, or of an address no chunk has:
    // SCCL rule 5, a failure in the steps (exit 1, one line each), not of the header (exit 2).
    for (send, why) in [
        ([9, 1, 3], "SCCL rule 5: steps[1].sends[4] = [9, 1, 3]: topology.links[3][1] = 0, there is no link from rank 1 to rank 3"),
        ([0, 0, 0], "SCCL rule 5: steps[1].sends[4] = [0, 0, 0]: needs two different ranks below 4"),
        ([99, 0, 1], "SCCL rule 5: steps[1].sends[4] = [99, 0, 1]: no chunk of the collective has address 99"),
    ] {
        let mut v = good.clone();
        v["steps"][1]["sends"].as_array_mut().unwrap().push(serde_json::json!(send));
        let o = run(&["verify", s(&write("nolink.json", &v))]);
        assert_eq!(o.status.code(), Some(1), "{send:?}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.lines().any(|l| l == why), "{send:?}: {out}");
        assert!(!out.lines().any(|l| l.starts_with("valid")) && out.contains("INVALID as SCCL"), "{send:?}: {out}");
        let o = run(&["verify", s(&write("nolink.json", &v)), "--json"]);
        assert_eq!(o.status.code(), Some(1), "{send:?}: {}", text(&o));
        let j: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["valid"], Value::Bool(false));
    }
    // A step of no rounds: rule 4 once, rule 6 at every pair the step sends over. The summary
    // counts the distinct rules and the failures apart (it said "breaks 9 rules" for 2), and the
    // rounds it prints are the file's steps' (its `name` is echoed as written).
    let mut v = good.clone();
    v["steps"][0]["rounds"] = 0.into();
    let rounds: u64 = v["steps"].as_array().unwrap().iter().map(|st| st["rounds"].as_u64().unwrap()).sum();
    let o = run(&["verify", s(&write("rounds0.json", &v))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let failures: Vec<&str> = out.lines().filter(|l| l.starts_with("SCCL rule ")).collect();
    let rules: BTreeSet<&str> = failures.iter().map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(rules, BTreeSet::from(["SCCL rule 4", "SCCL rule 6"]), "{out}");
    assert!(failures.len() > 2, "{out}");
    let summary =
        format!("2 steps, {rounds} rounds, 1 chunks; INVALID as SCCL: breaks 2 rules of the format (4, 6; {} failures, listed above)", failures.len());
    assert!(out.lines().any(|l| l.ends_with(&summary)), "{summary}: {out}");
    let o = run(&["verify", s(&write("rounds0.json", &v)), "--json"]);
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["sccl"]["rules_broken"], serde_json::json!([4, 6]), "{j}");
    assert_eq!(j["sccl"]["problems"].as_array().unwrap().len(), failures.len(), "{j}");
    // The tester's files: a send over a missing link (rule 5) and an input map that is not the
    // derived one (rule 3); neither is called valid before it is called invalid.
    for (file, rule) in [("rule5_nolink.msccl.json", "SCCL rule 5: "), ("rule3_inmap.msccl.json", "SCCL rule 3: ")] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sccl").join(file);
        let o = run(&["verify", s(&path)]);
        assert_eq!(o.status.code(), Some(1), "{file}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.lines().any(|l| l.starts_with(rule)), "{file}: {out}");
        assert!(!out.lines().any(|l| l.starts_with("valid")), "{file}: {out}");
        assert!(out.lines().any(|l| l.starts_with("INVALID:")) && out.contains("INVALID as SCCL"), "{file}: {out}");
    }
    // Sorted keys (collective first, as `json.dumps(sort_keys=True)` writes): still SCCL's.
    let sorted: BTreeMap<String, Value> = serde_json::from_value(good.clone()).unwrap();
    let o = run(&["verify", s(&write("sorted.json", &serde_json::to_value(sorted).unwrap()))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // An all_reduce schedule cannot be exported: exit 2 and no file.
    let t = torus(&TorusParams::uniform(&[4], 32.0, 100.0)).unwrap();
    let ar = torus_ring_collective(&t, &collective(&t, CollectiveKind::AllReduce, 1), RingAlgorithm::Ring).unwrap();
    let path = tmp("ar4.json");
    write_schedule_file(&path, &ar).unwrap();
    let dir = tmp("ar-out");
    let o = run(&["export", s(&path), "--to", "sccl-json", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("all_reduce over 4 ranks cannot be written"), "{}", text(&o));
    assert!(!dir.join("ar4.msccl.json").exists());
}

#[test]
fn parallel_links_are_summed_on_export_and_shared_on_import() {
    // Three npus in a ring, 0 <-> 1 over two parallel 16 GB/s links each way, the rest 32 GB/s:
    // the export writes one unit per pair; the import onto the same spec spreads a pair's sends
    // over its parallel links, and the file costs what the schedule does.
    let link = |id: usize, src: u32, dst: u32, bw: f64| serde_json::json!({"id": id, "src": src, "dst": dst, "bandwidth_gbps": bw, "latency_ns": 100.0});
    let pairs = [(0, 1, 16.0), (0, 1, 16.0), (1, 0, 16.0), (1, 0, 16.0), (1, 2, 32.0), (2, 1, 32.0), (2, 0, 32.0), (0, 2, 32.0)];
    let links: Vec<Value> = pairs.iter().enumerate().map(|(i, &(a, b, bw))| link(i, a, b, bw)).collect();
    let nodes: Vec<Value> = (0..3).map(|i| serde_json::json!({"id": i, "kind": "npu", "name": format!("n{i}")})).collect();
    let spec_of = |links: &[Value]| {
        serde_json::json!({"topology": {"custom": {"nodes": nodes, "links": links}}, "collective": {"kind": "all_gather", "bytes_per_rank": "3KiB", "pieces": 4}})
            .to_string()
    };
    let spec = tmp("parallel.spec.json");
    std::fs::write(&spec, spec_of(&links)).unwrap();
    let sched = tmp("parallel.json");
    let o = run(&["synthesize", s(&spec), "-o", s(&sched)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dir = tmp("parallel-sccl");
    let o = run(&["export", s(&sched), "--to", "sccl-json", "-o", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let written = dir.join("parallel.msccl.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    assert_eq!(v["topology"]["links"], serde_json::json!([[0, 1, 1], [1, 0, 1], [1, 1, 0]]));
    let mine = run(&["cost", s(&sched), "--json"]);
    let theirs = run(&["verify", s(&written), "--spec", s(&spec), "--json"]);
    assert_eq!(theirs.status.code(), Some(0), "{}", text(&theirs));
    let (a, b): (Value, Value) = (serde_json::from_slice(&mine.stdout).unwrap(), serde_json::from_slice(&theirs.stdout).unwrap());
    assert_eq!(a["time_ns"], b["cost"]["time_ns"]);
    // Parallel links whose sum is out of proportion are named with their count.
    let mut uneven = links.clone();
    uneven[1]["bandwidth_gbps"] = 8.0.into();
    std::fs::write(&spec, spec_of(&uneven)).unwrap();
    let o = run(&["verify", s(&written), "--spec", s(&spec)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("has 2 parallel links of 24 GB/s") && text(&o).contains("must be proportional"), "{}", text(&o));
}
