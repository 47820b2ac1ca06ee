//! The verifier cannot be fooled: valid schedules on rings, tori with faults, a small fat tree and
//! communication groups (npus outside the group route but store nothing) pass; every injected
//! defect is rejected under the rule it breaks. Each mutant is built so that it must break its
//! rule (no equivalent mutants). Lowered programs are mutated too (rule 6 on whole programs).
//! Run with `-- --nocapture` to see the tallies.

mod common;

use collsched::StepSink;
use collsched::{check_deadlock, DeadlockCheck, Report, Rule, Verifier, VerifyOptions};
use collsched::{fat_tree, torus, FatTreeParams, FaultPattern, LinkId, NodeId, TorusParams};
use collsched::{lower, LowerOptions, OpKind, OpRef, Programs};
use collsched::{Collective, CollectiveKind, PieceId};
use collsched::{Op, Schedule, Step, Transfer};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRng, TestRunner};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Defect {
    DroppedTransfer,
    TooEarly,
    SharedLink,
    DownLink,
    SwitchEnd,
    VisitsTwice,
    Disconnected,
    LinkOutOfRange,
    PieceOutOfRange,
    DoubleCount,
    LostContribution,
    Unmet,
    RelayAtNonRank,
    /// A transfer lists one of its pieces a second time (copy or reduce alike).
    DuplicatePiece,
}

impl Defect {
    /// The rules of which at least one must be reported.
    fn rules(self) -> &'static [Rule] {
        match self {
            Defect::DroppedTransfer => &[Rule::Causality, Rule::Completion],
            Defect::TooEarly => &[Rule::Causality],
            Defect::SharedLink => &[Rule::LinkSharing],
            Defect::DownLink | Defect::SwitchEnd | Defect::VisitsTwice | Defect::Disconnected | Defect::LinkOutOfRange | Defect::PieceOutOfRange => {
                &[Rule::Structure]
            }
            Defect::DoubleCount | Defect::LostContribution => &[Rule::Reduction],
            Defect::Unmet => &[Rule::Completion],
            Defect::RelayAtNonRank | Defect::DuplicatePiece => &[Rule::Structure],
        }
    }
}

const ALL: [Defect; 14] = [
    Defect::DroppedTransfer,
    Defect::TooEarly,
    Defect::SharedLink,
    Defect::DownLink,
    Defect::SwitchEnd,
    Defect::VisitsTwice,
    Defect::Disconnected,
    Defect::LinkOutOfRange,
    Defect::PieceOutOfRange,
    Defect::DoubleCount,
    Defect::LostContribution,
    Defect::Unmet,
    Defect::RelayAtNonRank,
    Defect::DuplicatePiece,
];

/// Rules 1-6 (rule 6 streamed on the default lowering), as `verify` runs them; also checks that
/// the lean state (holder lists instead of bits for copy-only kinds, reducing kinds checked piece
/// by piece after the last step) finds exactly the same failures (piece by piece they come in
/// another order).
fn verify(s: &Schedule) -> Report {
    let run = |sparse: bool| {
        let options = VerifyOptions { sparse_pieces: Some(sparse), track_relays: true, ..Default::default() };
        let mut v = Verifier::new(options).with_check(Box::new(DeadlockCheck::new(LowerOptions::default())));
        v.begin(&s.header).unwrap();
        for (i, st) in s.steps.iter().enumerate() {
            v.check_step(i, st);
        }
        v.finish().unwrap()
    };
    let (bits, lists) = (run(false), run(true));
    let sorted = |r: &Report| {
        let mut f: Vec<String> = r.findings.failures().iter().map(|d| d.to_string()).collect();
        f.sort();
        f
    };
    assert_eq!(sorted(&bits), sorted(&lists));
    assert_eq!(bits.stats, lists.stats);
    bits
}

fn positions(s: &Schedule) -> Vec<(usize, usize)> {
    s.steps.iter().enumerate().flat_map(|(i, st)| (0..st.transfers.len()).map(move |t| (i, t))).collect()
}

/// When each (piece, node) first holds its piece: -1 for the start, else the step that delivered it.
fn arrivals(s: &Schedule) -> HashMap<(PieceId, NodeId), isize> {
    let c = &s.header.collective;
    let t = &s.header.topology;
    let mut at = HashMap::new();
    for p in c.pieces() {
        if let Some(src) = c.source(&p) {
            at.insert((p, c.ranks[src]), -1);
        }
    }
    for (i, st) in s.steps.iter().enumerate() {
        for tr in &st.transfers {
            let dst = t.link(*tr.path.last().unwrap()).dst;
            for p in &tr.pieces {
                at.entry((*p, dst)).or_insert(i as isize);
            }
        }
    }
    at
}

fn src_of(s: &Schedule, tr: &Transfer) -> NodeId {
    s.header.topology.link(tr.path[0]).src
}

/// Builds a mutant of `defect` at a random place, or `None` when the schedule offers no place
/// where the defect must break its rule.
fn mutate(base: &Schedule, defect: Defect, rng: &mut TestRng) -> Option<Schedule> {
    let mut s = base.clone();
    let t = base.header.topology.clone();
    let c = &base.header.collective;
    let reducing = c.kind.is_reducing();
    let pick = |v: &[(usize, usize)], rng: &mut TestRng| -> Option<(usize, usize)> {
        if v.is_empty() {
            None
        } else {
            Some(v[rng.random_range(0..v.len())])
        }
    };
    let all = positions(base);
    match defect {
        Defect::DroppedTransfer => {
            let (i, j) = pick(&all, rng)?;
            s.steps[i].transfers.remove(j);
        }
        Defect::TooEarly => {
            if reducing {
                return None;
            }
            let arr = arrivals(base);
            let cands: Vec<_> = all
                .iter()
                .copied()
                .filter(|&(i, j)| {
                    let tr = &base.steps[i].transfers[j];
                    i > 0 && tr.pieces.iter().any(|p| arr.get(&(*p, src_of(base, tr))) == Some(&(i as isize - 1)))
                })
                .collect();
            let (i, j) = pick(&cands, rng)?;
            let tr = s.steps[i].transfers.remove(j);
            s.steps[i - 1].transfers.push(tr);
        }
        Defect::SharedLink => {
            let (i, j) = pick(&all, rng)?;
            let tr = &s.steps[i].transfers[j];
            let dup = Transfer { path: tr.path.clone(), op: tr.op, pieces: vec![tr.pieces[0]] };
            s.steps[i].transfers.push(dup);
        }
        Defect::DownLink => {
            let (i, j) = pick(&all, rng)?;
            let path = &s.steps[i].transfers[j].path;
            let l = path[rng.random_range(0..path.len())];
            s.header.topology.set_down(l);
        }
        Defect::SwitchEnd => {
            // Shorten a routed path so that it starts or ends at a node that is not a rank (a
            // switch, or an npu outside the group).
            let ends = |i: usize, j: usize| -> Vec<bool> {
                let path = &base.steps[i].transfers[j].path;
                if path.len() < 2 {
                    return Vec::new();
                }
                let (new_end, new_start) = (t.link(path[path.len() - 2]).dst, t.link(path[1]).src);
                [(true, new_end), (false, new_start)].into_iter().filter(|&(_, n)| c.rank_index(n).is_none()).map(|(pop, _)| pop).collect()
            };
            let cands: Vec<_> = all.iter().copied().filter(|&(i, j)| !ends(i, j).is_empty()).collect();
            let (i, j) = pick(&cands, rng)?;
            let options = ends(i, j);
            let path = &mut s.steps[i].transfers[j].path;
            if options[rng.random_range(0..options.len())] {
                path.pop();
            } else {
                path.remove(0);
            }
        }
        Defect::VisitsTwice => {
            let cands: Vec<_> = all
                .iter()
                .copied()
                .filter(|&(i, j)| {
                    let l = t.link(*base.steps[i].transfers[j].path.last().unwrap());
                    t.link_between(l.dst, l.src).is_some()
                })
                .collect();
            let (i, j) = pick(&cands, rng)?;
            let path = &mut s.steps[i].transfers[j].path;
            let l = t.link(*path.last().unwrap());
            path.push(t.link_between(l.dst, l.src).unwrap());
        }
        Defect::Disconnected => {
            let (i, j) = pick(&all, rng)?;
            let path = &mut s.steps[i].transfers[j].path;
            let end = t.link(*path.last().unwrap()).dst;
            let others: Vec<LinkId> = t.link_ids().filter(|&l| t.link(l).src != end).collect();
            let l = others[rng.random_range(0..others.len())];
            if path.len() >= 2 && rng.random_bool(0.5) {
                // Replace an interior link by one that does not start where the previous ends.
                let k = rng.random_range(1..path.len());
                let prev_end = t.link(path[k - 1]).dst;
                let bad: Vec<LinkId> = t.link_ids().filter(|&x| t.link(x).src != prev_end).collect();
                path[k] = bad[rng.random_range(0..bad.len())];
            } else {
                path.push(l);
            }
        }
        Defect::LinkOutOfRange => {
            let (i, j) = pick(&all, rng)?;
            let path = &mut s.steps[i].transfers[j].path;
            let k = rng.random_range(0..path.len());
            path[k] = LinkId((t.num_links() + rng.random_range(0..1000usize)) as u32);
        }
        Defect::PieceOutOfRange => {
            let (i, j) = pick(&all, rng)?;
            let tr = &mut s.steps[i].transfers[j];
            let k = rng.random_range(0..tr.pieces.len());
            let r = c.num_ranks() as u32;
            let parts = tr.pieces[k].parts().to_vec();
            let mut bad = parts.clone();
            match rng.random_range(0..3) {
                0 => bad[0] = r + rng.random_range(0..5u32),
                1 => *bad.last_mut().unwrap() = c.pieces + rng.random_range(0..5u32),
                _ => {
                    if bad.len() == 3 {
                        bad[1] = bad[0];
                    } else {
                        bad.push(0);
                    }
                }
            }
            tr.pieces[k] = PieceId::from_parts(&bad).unwrap();
        }
        Defect::DoubleCount => {
            if !reducing {
                return None;
            }
            let cands: Vec<_> = all.iter().copied().filter(|&(i, j)| base.steps[i].transfers[j].op == Op::Reduce).collect();
            let (i, j) = pick(&cands, rng)?;
            let tr = s.steps[i].transfers[j].clone();
            if i + 1 == s.steps.len() {
                s.steps.push(Step::default());
            }
            s.steps[i + 1].transfers.push(tr);
        }
        Defect::LostContribution => {
            if !reducing {
                return None;
            }
            let cands: Vec<_> = all
                .iter()
                .copied()
                .filter(|&(i, j)| {
                    let tr = &base.steps[i].transfers[j];
                    tr.op == Op::Reduce && c.rank_index(t.link(*tr.path.last().unwrap()).dst).is_some()
                })
                .collect();
            let (i, j) = pick(&cands, rng)?;
            s.steps[i].transfers[j].op = Op::Copy;
        }
        Defect::RelayAtNonRank => {
            // Cut a routed path at an npu outside the group it passes through: the first part
            // stores there, the second forwards a step later.
            let stop = |i: usize, j: usize| -> Option<usize> {
                let path = &base.steps[i].transfers[j].path;
                (0..path.len() - 1).find(|&h| {
                    let v = t.link(path[h]).dst;
                    t.is_npu(v) && c.rank_index(v).is_none()
                })
            };
            let cands: Vec<_> = all.iter().copied().filter(|&(i, j)| stop(i, j).is_some()).collect();
            let (i, j) = pick(&cands, rng)?;
            let h = stop(i, j).unwrap();
            let tr = &mut s.steps[i].transfers[j];
            let rest = Transfer { path: tr.path.split_off(h + 1), op: tr.op, pieces: tr.pieces.clone() };
            s.steps.insert(i + 1, Step { transfers: vec![rest] });
        }
        Defect::DuplicatePiece => {
            let (i, j) = pick(&all, rng)?;
            let tr = &mut s.steps[i].transfers[j];
            let k = rng.random_range(0..tr.pieces.len());
            let at = rng.random_range(0..=tr.pieces.len());
            tr.pieces.insert(at, tr.pieces[k]);
        }
        Defect::Unmet => {
            let last = s.steps.len().checked_sub(1)?;
            let n = s.steps[last].transfers.len();
            if n == 0 {
                return None;
            }
            let j = rng.random_range(0..n);
            let tr = &mut s.steps[last].transfers[j];
            let k = rng.random_range(0..tr.pieces.len());
            tr.pieces.remove(k);
        }
    }
    Some(s)
}

#[derive(Clone, Debug)]
enum Base {
    Ring {
        n: usize,
        kind: CollectiveKind,
        pieces: u32,
    },
    Torus {
        dims: Vec<usize>,
        faults: Vec<(usize, usize)>,
    },
    FatTree {
        kind: CollectiveKind,
    },
    /// A torus whose collective runs over some of its npus (`group` picks them by bit).
    Group {
        dims: Vec<usize>,
        group: u64,
        kind: CollectiveKind,
    },
}

fn build(base: &Base) -> Option<Schedule> {
    match base {
        Base::Ring { n, kind, pieces } => {
            let t = torus(&TorusParams::uniform(&[*n], 32.0, 100.0)).unwrap();
            let c = Collective::new(*kind, t.node_ids().collect(), 6000, *pieces, None, &t).unwrap();
            Some(if *kind == CollectiveKind::AllToAll { common::shortest_path_all_to_all(&t, &c) } else { common::ring_collective(&t, &c) })
        }
        Base::Torus { dims, faults } => {
            let mut t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
            let cables: Vec<(NodeId, NodeId)> = faults
                .iter()
                .map(|&(node, pick)| {
                    let links: Vec<LinkId> = t.out_links(NodeId((node % t.num_nodes()) as u32)).collect();
                    let l = t.link(links[pick % links.len()]);
                    (l.src, l.dst)
                })
                .collect();
            FaultPattern { cables, ..Default::default() }.apply(&mut t).unwrap();
            let ranks: Vec<NodeId> = t.node_ids().collect();
            t.check_connected(&ranks).ok()?;
            let c = Collective::new(CollectiveKind::AllToAll, ranks, 4096, 1, None, &t).unwrap();
            Some(common::shortest_path_all_to_all(&t, &c))
        }
        Base::FatTree { kind } => {
            let t = fat_tree(&FatTreeParams {
                levels: 2,
                k: 4,
                osr: 1.0,
                npus: 8,
                board: Some(4),
                bandwidth_gbps: 400.0,
                latency_ns: 25.0,
                switch_latency_ns: 1000.0,
            })
            .unwrap();
            let c = Collective::new(*kind, t.node_ids().take(8).collect(), 8000, 1, None, &t).unwrap();
            Some(if *kind == CollectiveKind::AllToAll { common::shortest_path_all_to_all(&t, &c) } else { common::ring_collective(&t, &c) })
        }
        Base::Group { dims, group, kind } => {
            let t = torus(&TorusParams::uniform(dims, 32.0, 100.0)).unwrap();
            let ranks: Vec<NodeId> = t.node_ids().filter(|n| group >> (n.index() % 64) & 1 == 1).collect();
            if ranks.len() < 2 || ranks.len() == t.num_npus() {
                return None;
            }
            let c = Collective::new(*kind, ranks, 6000, 1, None, &t).unwrap();
            if *kind == CollectiveKind::AllToAll {
                return Some(common::shortest_path_all_to_all(&t, &c));
            }
            // The routes between consecutive ranks of a group may share links: one transfer per
            // step (each rank sends a block other than the one it receives in a ring step, so
            // the order within a step does not matter).
            let mut s = common::ring_collective(&t, &c);
            s.steps = s.steps.into_iter().flat_map(|st| st.transfers.into_iter().map(|tr| Step { transfers: vec![tr] })).collect();
            Some(s)
        }
    }
}

fn base_strategy() -> impl Strategy<Value = Base> {
    let kind =
        prop_oneof![Just(CollectiveKind::AllToAll), Just(CollectiveKind::AllGather), Just(CollectiveKind::ReduceScatter), Just(CollectiveKind::AllReduce)];
    prop_oneof![
        (3usize..9, kind.clone(), 1u32..3).prop_map(|(n, kind, pieces)| Base::Ring { n, kind, pieces }),
        (prop_oneof![Just(vec![3, 3]), Just(vec![4, 4]), Just(vec![3, 4, 2]), Just(vec![5])], proptest::collection::vec((0usize..64, 0usize..8), 0..3))
            .prop_map(|(dims, faults)| Base::Torus { dims, faults }),
        kind.clone().prop_map(|kind| Base::FatTree { kind }),
        (prop_oneof![Just(vec![4, 4]), Just(vec![3, 4]), Just(vec![6])], any::<u64>(), kind).prop_map(|(dims, group, kind)| Base::Group { dims, group, kind }),
    ]
}

/// A runner of `cases` cases and a generator for the mutations, both seeded the same way every
/// run, so that the tally is the same every time.
fn seeded(cases: u32) -> (TestRunner, TestRng) {
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let rng = || TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha);
    (TestRunner::new_with_rng(config, rng()), rng())
}

#[test]
fn every_mutant_is_killed_by_its_rule() {
    let tally: RefCell<BTreeMap<Defect, (usize, usize)>> = RefCell::new(BTreeMap::new());
    let (mut runner, mut rng) = seeded(96);
    let rng_cell = RefCell::new(&mut rng);
    runner
        .run(&base_strategy(), |base| {
            let Some(valid) = build(&base) else { return Ok(()) };
            let report = verify(&valid);
            prop_assert!(report.is_valid(), "{base:?}: the valid schedule fails: {:?}", report.findings.failures().first().map(|d| d.to_string()));
            for defect in ALL {
                for _ in 0..2 {
                    let mut rng = rng_cell.borrow_mut();
                    let Some(mutant) = mutate(&valid, defect, &mut rng) else { continue };
                    let report = verify(&mutant);
                    let mut killed = defect.rules().iter().any(|&r| report.findings.is_failed(r));
                    if defect == Defect::RelayAtNonRank {
                        // No program runs at the relay: the lowering names it too.
                        killed &= report.findings.failures().iter().any(|d| d.rule == Rule::Deadlock && d.message.contains("not a rank"));
                    }
                    let mut t = tally.borrow_mut();
                    let e = t.entry(defect).or_default();
                    e.0 += 1;
                    e.1 += killed as usize;
                    prop_assert!(killed, "{base:?}: mutant {defect:?} survived; found {:?}", report.findings.failed_rules());
                }
            }
            Ok(())
        })
        .unwrap();
    let tally = tally.into_inner();
    let (total, killed) = tally.values().fold((0, 0), |a, &(n, k)| (a.0 + n, a.1 + k));
    println!("mutation tally (defect: killed/built):");
    for (d, (n, k)) in &tally {
        println!("  {d:?}: {k}/{n}");
    }
    println!("total: {killed}/{total} mutants killed ({:.1}%)", 100.0 * killed as f64 / total as f64);
    assert_eq!(killed, total);
    assert!(total >= 1000, "only {total} mutants were built");
    for d in ALL {
        assert!(tally.get(&d).is_some_and(|&(n, _)| n > 0), "no mutant of {d:?} was built");
    }
}

/// A piece listed twice in one transfer is a rule-1 failure that names the step, the transfer
/// and the piece, for a copy as for a reduce (a copy was once counted as a wasted copy and
/// costed twice, a reduce reported as rule-4 double counting).
#[test]
fn a_piece_listed_twice_in_a_transfer_is_named_under_rule_1() {
    for kind in [CollectiveKind::AllGather, CollectiveKind::AllToAll, CollectiveKind::ReduceScatter] {
        let mut s = build(&Base::Ring { n: 4, kind, pieces: 1 }).unwrap();
        let tr = &mut s.steps[0].transfers[1];
        let p = tr.pieces[0];
        tr.pieces.push(p);
        let report = verify(&s);
        let failures: Vec<String> = report.findings.failures().iter().map(|d| d.to_string()).collect();
        let want = format!("step 0, transfer 1 (piece {p}): rule 1 structure: listed twice in the transfer's pieces");
        assert!(failures.iter().any(|f| f.starts_with(&want)), "{kind}: {failures:?}");
        assert!(!report.findings.is_failed(Rule::Reduction), "{kind}: {failures:?}");
        assert_eq!(report.stats.wasted_copies, 0, "{kind}");
    }
}

/// Defects injected into lowered programs, which rule 6 on whole programs must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum ProgramDefect {
    /// Two operations of one stream swapped at one end: matched pairs carry different pieces.
    SwappedInStream,
    /// The last operation of a threadblock dropped: its partner waits forever.
    DroppedOperation,
    /// Two pairs of opposite streams made to wait for each other through dependencies.
    DependencyCycle,
}

const PROGRAM_DEFECTS: [ProgramDefect; 3] = [ProgramDefect::SwappedInStream, ProgramDefect::DroppedOperation, ProgramDefect::DependencyCycle];

/// An operation of the programs: (rank, threadblock, position).
type At = (usize, usize, usize);

/// Every operation, in threadblock order.
fn operations(p: &Programs) -> Vec<At> {
    p.ranks
        .iter()
        .enumerate()
        .flat_map(|(r, rp)| rp.threadblocks.iter().enumerate().flat_map(move |(t, tb)| (0..tb.ops.len()).map(move |i| (r, t, i))))
        .collect()
}

/// The matched pairs of the programs (first in, first out per stream): (send, receive).
fn matched_pairs(p: &Programs) -> Vec<(At, At)> {
    // (sender, receiver, channel) -> (sends, receives).
    type Streams = BTreeMap<(usize, usize, usize), (Vec<At>, Vec<At>)>;
    let mut streams = Streams::new();
    for (r, t, i) in operations(p) {
        let op = &p.ranks[r].threadblocks[t].ops[i];
        match op.kind {
            OpKind::Send { peer } => streams.entry((r, peer, op.channel)).or_default().0.push((r, t, i)),
            OpKind::Recv { peer, .. } => streams.entry((peer, r, op.channel)).or_default().1.push((r, t, i)),
            OpKind::Copy => {}
        }
    }
    streams.into_values().flat_map(|(s, r)| s.into_iter().zip(r)).collect()
}

/// Builds a program mutant of `defect`, or `None` when the programs offer no place for it.
fn mutate_programs(base: &Programs, defect: ProgramDefect, rng: &mut TestRng) -> Option<Programs> {
    let mut p = base.clone();
    let pick = |n: usize, rng: &mut TestRng| (n > 0).then(|| rng.random_range(0..n));
    match defect {
        ProgramDefect::SwappedInStream => {
            // Adjacent operations of one stream (same threadblock, kind and channel) with
            // different pieces.
            let cands: Vec<At> = operations(base)
                .into_iter()
                .filter(|&(r, t, i)| {
                    let ops = &base.ranks[r].threadblocks[t].ops;
                    i + 1 < ops.len()
                        && ops[i].kind == ops[i + 1].kind
                        && ops[i].channel == ops[i + 1].channel
                        && ops[i].pieces != ops[i + 1].pieces
                        && ops[i].kind != OpKind::Copy
                })
                .collect();
            let (r, t, i) = cands[pick(cands.len(), rng)?];
            p.ranks[r].threadblocks[t].ops.swap(i, i + 1);
        }
        ProgramDefect::DroppedOperation => {
            let cands: Vec<(usize, usize)> = operations(base)
                .into_iter()
                .filter(|&(r, t, i)| i + 1 == base.ranks[r].threadblocks[t].ops.len() && base.ranks[r].threadblocks[t].ops[i].kind != OpKind::Copy)
                .map(|(r, t, _)| (r, t))
                .collect();
            let (r, t) = cands[pick(cands.len(), rng)?];
            p.ranks[r].threadblocks[t].ops.pop();
        }
        ProgramDefect::DependencyCycle => {
            // A pair a -> b and a pair b -> a: each send waits for the other pair's receive.
            let pairs = matched_pairs(base);
            let opposite: Vec<(usize, usize)> = (0..pairs.len())
                .flat_map(|x| (0..pairs.len()).map(move |y| (x, y)))
                .filter(|&(x, y)| pairs[x].0 .0 == pairs[y].1 .0 && pairs[x].1 .0 == pairs[y].0 .0)
                .take(64)
                .collect();
            let (x, y) = opposite[pick(opposite.len(), rng)?];
            for (send, recv) in [(pairs[x].0, pairs[y].1), (pairs[y].0, pairs[x].1)] {
                p.ranks[send.0].threadblocks[send.1].ops[send.2].deps.push(OpRef { tb: recv.1, op: recv.2 });
            }
        }
    }
    Some(p)
}

#[test]
fn every_program_mutant_is_caught_by_rule_6() {
    let tally: RefCell<BTreeMap<ProgramDefect, (usize, usize)>> = RefCell::new(BTreeMap::new());
    let (mut runner, mut rng) = seeded(64);
    let rng_cell = RefCell::new(&mut rng);
    runner
        .run(&base_strategy(), |base| {
            let Some(valid) = build(&base) else { return Ok(()) };
            let programs = lower(&valid, &LowerOptions::default()).unwrap();
            prop_assert!(check_deadlock(&programs).is_empty(), "{base:?}: the valid programs fail rule 6");
            for defect in PROGRAM_DEFECTS {
                let mut rng = rng_cell.borrow_mut();
                let Some(mutant) = mutate_programs(&programs, defect, &mut rng) else { continue };
                let found = check_deadlock(&mutant);
                let expected = match defect {
                    ProgramDefect::SwappedInStream => "carry different pieces",
                    ProgramDefect::DroppedOperation => "waits forever",
                    ProgramDefect::DependencyCycle => "wait-for cycle",
                };
                let killed = found.iter().any(|d| d.rule == Rule::Deadlock && d.message.contains(expected));
                let mut t = tally.borrow_mut();
                let e = t.entry(defect).or_default();
                e.0 += 1;
                e.1 += killed as usize;
                prop_assert!(killed, "{base:?}: program mutant {defect:?} survived; found {:?}", found.iter().map(|d| d.to_string()).collect::<Vec<_>>());
            }
            Ok(())
        })
        .unwrap();
    let tally = tally.into_inner();
    println!("program mutation tally (defect: caught/built):");
    for (d, (n, k)) in &tally {
        println!("  {d:?}: {k}/{n}");
    }
    for d in PROGRAM_DEFECTS {
        assert!(tally.get(&d).is_some_and(|&(n, k)| n > 10 && k == n), "{d:?}: {:?}", tally.get(&d));
    }
}
