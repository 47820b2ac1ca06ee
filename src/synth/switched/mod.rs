//! Contention-free route-and-step synthesis on fat trees (and any topology with switches),
//! healthy or with failed switch links: which spine (or aggregation switch and core) every flow
//! takes, and in which step, so that no directed link carries two transfers of one step (docs/design/MODEL.md
//! rule 2) and the event-driven time comes close to the certified bound.
//!
//! all_to_all (`slotted pairwise`): every block that has a direct (board) link takes it; the
//! others are cut into *slots*, the colour classes of a König edge colouring of the rank-to-rank
//! demand (sender x receiver), so that in a slot every rank sends at most one switched block and
//! receives at most one. A slot is routed as in docs/design/ALGORITHMS.md ("each flow its own spine"): the
//! leaf-to-leaf flows are coloured again, colour `c` taking spine (2 levels) or aggregation index
//! (3 levels) `c mod u` in sub-step `c / u`, and on 3 levels the inter-pod flows of one colour get
//! their cores by a pod-to-pod colouring. Flows whose preferred path crosses a failed link (or
//! any flow on a topology that is not a fat tree) go first-fit onto a shortest path over links
//! still free in the earliest sub-step of their slot that has one; only what fits nowhere opens a
//! new sub-step. A rank's board blocks go with its first switched send, on links no switched
//! flow uses.
//!
//! With failed links two more all_to_all candidates run (`slotted pairwise (greedy ...)`): a
//! leaf that lost an uplink cannot take one block per npu per slot, so rather than splitting
//! every slot, slots are filled greedily with one sub-step each (blocks overdue first, then
//! those of the most loaded leaves), a rank without a switched block in a slot sends a board
//! block instead, and, with `board relays`, a leaf short of uplinks (downlinks) hands blocks to
//! board mates under other leaves, which send them on (receive them and forward them over the
//! board at the end) while that lowers the larger of the two leaves' loads. An npu whose own
//! link to its leaf is down relays every block so (one hand-over per board link and slot): on
//! 2L-k16 at 1 MiB, 11.33 us -> 8.64 us event-driven against the store-and-forward heuristic.
//!
//! Why slots: under the event-driven cost a rank starts its next sends once its previous ones
//! have left, without a barrier, so what runs at the same time is each rank's k-th group of
//! sends, not step k. Giving every rank exactly one switched send per slot keeps the ranks in
//! step with each other: on a full-bisection tree no link is ever shared at run time and the time
//! is the uplink's bytes over its bandwidth plus one path latency, which is the flow bound plus
//! the latency bound. On an oversubscribed tree a slot takes two sub-steps, whose flows share
//! the leaf uplinks evenly at run time (each uplink carries one flow of each), so the uplinks
//! stay busy and the time again meets the bound.
//!
//! all_gather, reduce_scatter and all_reduce at these sizes are made of path latency (3 us per
//! switched step against 41 ns for a block), so the candidate built here (`board hierarchical`)
//! takes one switched round: board all-gather, one exchange between boards (each board pair its
//! own pair of ranks, routed like a slot), board all-gather of what arrived; reduce_scatter is
//! the mirror image with reduces, all_reduce the two in turn. Pipelined over the pieces of each
//! block (`board hierarchical, pipelined`), one chunk's board phases run while another's cross
//! the switches, with a lag that covers the switched latency ([`pipeline`]): at 64 MiB the
//! all-reduce on the k=16 tree takes 54.0 us where the phases in turn take 95.4 us. The
//! candidates also include the
//! switched algorithms of [`crate::algorithms::switched`] with balanced routing (it colours on a
//! healthy tree and routes first-fit around failed links): ring, halving-doubling, recursive
//! doubling or halving and the double binary tree.
//!
//! Every candidate is verified (rules 1-5, no contention allowed) before it is returned.

mod one_crossing;

use super::steps::encoding::Demand;
use super::steps::heuristic::route_and_pack;
use crate::algorithms::switched::colour::colour_edges;
use crate::algorithms::switched::route::free_path;
use crate::algorithms::switched::{switched, Routing, SwitchedAlgorithm};
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::{Error, Result};
use crate::schedule::{Op, Schedule, ScheduleHeader, Step, Transfer};
use crate::topology::hops::HopGraph;
use crate::topology::{FatTreeShape, LinkId, NodeId, Topology};
use crate::verify::{verify_schedule, VerifyOptions};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

/// The route-and-step methods on switched networks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SwitchedMethod {
    /// Boards first over their direct links, then the leaders through the switches (the
    /// gathering and reducing kinds on fat trees with boards).
    BoardHierarchical,
    /// The same phases pipelined over the pieces of every block (each piece a chunk), so that
    /// board links and uplinks work at once (large messages).
    BoardHierarchicalPipelined,
    /// all_reduce over boards crossing the switches once ([`one_crossing`]).
    BoardOneCrossing,
    /// The same pipelined over the pieces of every block.
    BoardOneCrossingPipelined,
    /// Pairwise exchange in slots, each flow on its own spine (all_to_all).
    SlottedPairwise,
    /// The slots packed greedily around failed links.
    SlottedGreedy,
    /// The greedy slots, relaying through board mates where a rank's uplink is down.
    SlottedGreedyBoardRelays,
    /// Balanced store-and-forward routes packed by list scheduling (a rank without a path
    /// through switches).
    StoreAndForward,
    /// A switched algorithm of docs/design/ALGORITHMS.md under balanced routing.
    Balanced(SwitchedAlgorithm),
}

impl fmt::Display for SwitchedMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwitchedMethod::BoardHierarchical => f.write_str("board hierarchical"),
            SwitchedMethod::BoardHierarchicalPipelined => f.write_str("board hierarchical, pipelined"),
            SwitchedMethod::BoardOneCrossing => f.write_str("board all_reduce, one crossing"),
            SwitchedMethod::BoardOneCrossingPipelined => f.write_str("board all_reduce, one crossing, pipelined"),
            SwitchedMethod::SlottedPairwise => f.write_str("slotted pairwise"),
            SwitchedMethod::SlottedGreedy => f.write_str("slotted pairwise (greedy, around faults)"),
            SwitchedMethod::SlottedGreedyBoardRelays => f.write_str("slotted pairwise (greedy, board relays)"),
            SwitchedMethod::StoreAndForward => f.write_str("store-and-forward heuristic"),
            SwitchedMethod::Balanced(a) => write!(f, "{} (balanced)", a.as_str()),
        }
    }
}

/// Named, verified, contention-free candidate schedules of the collective on a topology with
/// switches (a fat tree, healthy or with failed links, or any custom switched network); the
/// caller keeps the fastest under its cost model.
///
/// - all_to_all: `slotted pairwise` (see the module documentation; it keeps the collective's
///   `pieces`, every transfer carrying whole blocks), with failed links (or off fat trees) also
///   its greedy variants without and with board relays, the switched `pairwise` and `bruck` with
///   balanced routing, and, when a rank can only be reached through another npu (a failed npu
///   link), the greedy slots with board relays (the rank hands every block to board mates that
///   send it on, and receives its blocks through them) and the store-and-forward heuristic of the
///   fewest-steps search instead of the others;
/// - all_gather: `board hierarchical` (on fat trees with boards, around failed board links) and, for a
///   collective of one piece per block, the same `pipelined` over 2 to 32 pieces, `ring`,
///   `recursive doubling`;
/// - reduce_scatter: `board hierarchical` (and pipelined), `ring`, `recursive halving`;
/// - all_reduce: `board hierarchical` (and pipelined), the board all_reduce with one crossing of
///   the switches (ALGORITHMS.md, and pipelined), `ring`, `halving-doubling`, `double binary
///   tree`.
///
/// The switched algorithms choose their own piece count (1, or 2 for the double binary tree).
///
/// Errors: [`Error::bad`] for a topology without switches; [`Error::internal`] for a synthesized
/// schedule that fails verification (a bug); the error of [`Topology::check_connected`] when the faults cut a rank
/// off; [`Error::infeasible`] when no candidate could be built.
pub fn fat_tree_candidates(t: &Topology, c: &Collective) -> Result<Vec<(SwitchedMethod, Schedule)>> {
    let mut out = route_and_step_candidates(t, c)?;
    for (m, s) in &out {
        if let Some(d) = verify_schedule(s, &VerifyOptions::default())?.findings.failures().first() {
            return Err(Error::internal(format!("fat-tree synthesis: the {m} schedule fails verification: {d}")));
        }
    }
    for (m, s) in balanced_algorithms(t, c) {
        if verify_schedule(&s, &VerifyOptions::default())?.is_valid() {
            out.push((m, s));
        }
    }
    if out.is_empty() {
        return Err(Error::infeasible(format!("fat-tree synthesis: no contention-free {} schedule was found for these ranks and faults", c.kind)));
    }
    Ok(out)
}

/// The synthesized candidates of [`fat_tree_candidates`] (all but the switched algorithms under
/// balanced routing), unverified: the caller verifies them, and one that fails is a bug.
///
/// Errors: as [`fat_tree_candidates`], but an empty list is no error.
pub fn route_and_step_candidates(t: &Topology, c: &Collective) -> Result<Vec<(SwitchedMethod, Schedule)>> {
    if t.num_switches() == 0 {
        return Err(Error::bad("fat-tree synthesis: the topology has no switches (use the torus generators or `synthesize`)"));
    }
    t.check_connected(&c.ranks)?;
    let mut out = Vec::new();
    if c.kind != CollectiveKind::AllToAll {
        match board_hierarchical(t, c, None) {
            Ok(Some(steps)) => out.push((SwitchedMethod::BoardHierarchical, schedule(t, c, steps, SwitchedMethod::BoardHierarchical))),
            // No boards, or a rank without a path through switches: the others may still run.
            Ok(None) | Err(Error::Infeasible(_)) => {}
            Err(e) => return Err(e),
        }
        if let Some(s) = pipelined_board_hierarchical(t, c)? {
            out.push((SwitchedMethod::BoardHierarchicalPipelined, s));
        }
        match one_crossing::one_crossing(t, c, None) {
            Ok(Some(steps)) => out.push((SwitchedMethod::BoardOneCrossing, schedule(t, c, steps, SwitchedMethod::BoardOneCrossing))),
            Ok(None) | Err(Error::Infeasible(_)) => {}
            Err(e) => return Err(e),
        }
        let build = |cp: &Collective, lag: usize| one_crossing::one_crossing(t, cp, Some(lag));
        if let Some(s) = pipelined(t, c, SwitchedMethod::BoardOneCrossingPipelined, build)? {
            out.push((SwitchedMethod::BoardOneCrossingPipelined, s));
        }
    } else {
        match slotted_all_to_all(t, c) {
            Ok(steps) => {
                out.push((SwitchedMethod::SlottedPairwise, schedule(t, c, steps, SwitchedMethod::SlottedPairwise)));
                if !t.down_links().is_empty() || t.fat_tree_shape().is_none() {
                    for (m, relays) in [(SwitchedMethod::SlottedGreedy, false), (SwitchedMethod::SlottedGreedyBoardRelays, true)] {
                        out.push((m, schedule(t, c, greedy_slotted_all_to_all(t, c, relays)?, m)));
                    }
                }
            }
            // A rank without a path through switches to some other rank (its npu link is
            // down): the greedy slots hand its blocks to board mates that send them on, and the
            // heuristic relays through any npu.
            Err(Error::Infeasible(_)) => {
                match greedy_slotted_all_to_all(t, c, true) {
                    Ok(steps) => out.push((SwitchedMethod::SlottedGreedyBoardRelays, schedule(t, c, steps, SwitchedMethod::SlottedGreedyBoardRelays))),
                    Err(Error::Infeasible(_)) => {}
                    Err(e) => return Err(e),
                }
                let steps = route_and_pack(&HopGraph::new(t), &Demand::all_to_all(c, t.num_npus()), t.num_links());
                out.push((SwitchedMethod::StoreAndForward, schedule(t, c, steps, SwitchedMethod::StoreAndForward)));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Every switched algorithm of docs/design/ALGORITHMS.md that generates the collective's kind
/// for its number of ranks, under balanced routing (what `collsched generate` runs by default),
/// unverified; those that cannot run on the faults (a pair without a path through switches) are
/// left out.
pub fn balanced_algorithms(t: &Topology, c: &Collective) -> Vec<(SwitchedMethod, Schedule)> {
    let fits = |a: &&SwitchedAlgorithm| a.kinds().contains(&c.kind);
    SwitchedAlgorithm::ALL.iter().filter(fits).filter_map(|&a| switched(t, c, a, Routing::Balanced).ok().map(|s| (SwitchedMethod::Balanced(a), s))).collect()
}

/// The schedule of a method's steps. Not verified here: the portfolio verifies every candidate,
/// and a synthesized one that fails is a bug it reports.
fn schedule(t: &Topology, c: &Collective, steps: Vec<Step>, method: SwitchedMethod) -> Schedule {
    let meta = serde_json::json!({"algorithm": "synth", "method": method.to_string()});
    Schedule { header: ScheduleHeader { topology: t.clone(), collective: c.clone(), meta: Some(meta) }, steps }
}

/// The up link from `a` to `b`, if any.
fn up_link(t: &Topology, a: NodeId, b: NodeId) -> Option<LinkId> {
    t.out_links(a).filter(|&l| t.link(l).up && t.link(l).dst == b).min()
}

/// The boards of a fat tree as the board collectives use them: their ranks, which of them take
/// the switched roles, and the path between every two ranks of a board.
struct Boards {
    /// Rank indices by board: first those that reach the switches (an up link to a switch and
    /// one from it), then the others, each in rank order.
    groups: Vec<Vec<usize>>,
    /// The fewest ranks that reach the switches on any board: the ranks at positions below it
    /// take the switched roles (with one board, its size).
    m: usize,
    /// Per ordered pair of board mates: their direct link, or, where it is down, a shortest path
    /// through switches (one transfer crosses it, at a switched path's latency).
    paths: HashMap<(usize, usize), Vec<LinkId>>,
}

impl Boards {
    /// `None` off fat trees with boards, where some board has no rank that reaches the switches
    /// (and there are others), or where two ranks of a board are joined neither directly nor
    /// through switches.
    fn of(t: &Topology, c: &Collective) -> Option<Boards> {
        let shape = t.fat_tree_shape()?;
        shape.board?;
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for (x, &n) in c.ranks.iter().enumerate() {
            let b = shape.board_of(n)?;
            match groups.iter_mut().find(|(g, _)| *g == b) {
                Some((_, members)) => members.push(x),
                None => groups.push((b, vec![x])),
            }
        }
        // Per rank: whether it has an up link to a switch and one from a switch.
        let reaches: Vec<bool> = c
            .ranks
            .iter()
            .map(|&n| t.up_out_links(n).any(|l| !t.is_npu(t.link(l).dst)) && t.in_links(n).any(|l| t.link(l).up && !t.is_npu(t.link(l).src)))
            .collect();
        let mut groups: Vec<Vec<usize>> = groups.into_iter().map(|(_, g)| g).collect();
        for g in &mut groups {
            g.sort_by_key(|&x| !reaches[x]);
        }
        let m = if groups.len() == 1 { groups[0].len() } else { groups.iter().map(|g| g.iter().filter(|&&x| reaches[x]).count()).min().unwrap_or(0) };
        if m == 0 {
            return None;
        }
        let none = vec![false; t.num_links()];
        let mut paths = HashMap::new();
        for g in &groups {
            for &x in g {
                for &y in g.iter().filter(|&&y| y != x) {
                    let (a, b) = (c.ranks[x], c.ranks[y]);
                    let path = up_link(t, a, b).map(|l| vec![l]).or_else(|| free_path(t, a, b, &none))?;
                    paths.insert((x, y), path);
                }
            }
        }
        Some(Boards { groups, m, paths })
    }

    /// A transfer between board mates `x` and `y` (rank indices).
    fn hop(&self, x: usize, y: usize, op: Op, pieces: Vec<PieceId>) -> Transfer {
        Transfer { path: self.paths[&(x, y)].clone(), op, pieces }
    }
}

/// A board collective's steps as the schedule runs them: the transfers of a step with the same
/// path and op as one (a rank designated for several boards), then split where paths through
/// switches meet (a board link that is down, crossed through the switches, beside the switched
/// flows of a pipelined period), empty steps dropped.
fn finish(t: &Topology, steps: Vec<Step>) -> Vec<Step> {
    steps.into_iter().flat_map(|s| Step::without_shared_links(t.num_links(), merge_same_path(s).transfers)).filter(|s| !s.transfers.is_empty()).collect()
}

/// Hierarchical all_gather, reduce_scatter or all_reduce over boards, in few steps (the latency
/// of a switched path is what the time of these collectives at 1 MiB is made of):
///
/// - all_gather: every rank copies its block to its board mates; then, for every ordered pair of
///   boards (b, b'), one rank of b sends the blocks of b to one rank of b' through the switches
///   (rank `k mod m` of each board for pair distance `k = b' - b - 1 mod B`, where m is the
///   smallest board, so each rank sends and receives at most once per round), routed without
///   sharing a link; finally every receiver copies what it received to its board mates.
/// - reduce_scatter: the same backwards, with reduces: the designated rank of b' collects its
///   board's contributions to the blocks of b and sends their sum to the rank of b, which then
///   reduces into the owner of each block of b over the board.
/// - all_reduce: reduce_scatter, then all_gather.
///
/// The ranks that cross the switches are those at the first m positions of their boards, where
/// m is the fewest ranks of a board that reach the switches ([`Boards`]); board mates whose link
/// is down cross the switches instead. `None` where [`Boards::of`] has none.
fn board_hierarchical(t: &Topology, c: &Collective, pipelined: Option<usize>) -> Result<Option<Vec<Step>>> {
    let Some(boards) = Boards::of(t, c) else { return Ok(None) };
    let (groups, m) = (&boards.groups, boards.m);
    let nb = groups.len();
    // (round, sending board, receiving board, rank index within the boards)
    let mut pairs: Vec<(usize, usize, usize, usize)> = Vec::new();
    for b in 0..nb {
        for b2 in (0..nb).filter(|&b2| b2 != b) {
            let k = (b2 + nb - b - 1) % nb;
            pairs.push((k / m, b, b2, k % m));
        }
    }
    let phases = BoardPhases { c, boards: &boards, pairs: &pairs, rounds: pairs.iter().map(|x| x.0 + 1).max().unwrap_or(0) };
    let mut router = SlotRouter::new(t);
    // Each kind's phases in order, for the pieces `k` (every piece, or one when pipelined).
    let mut chain = |k: Option<u32>| -> Result<Vec<Phase>> {
        let rs = |router: &mut SlotRouter| -> Result<Vec<Phase>> {
            Ok(vec![
                Phase::Board(phases.designated(Op::Reduce, k)),
                Phase::Switched(phases.switched(router, true, Op::Reduce, k)?),
                Phase::Board(phases.to_owners(k)),
            ])
        };
        let ag = |router: &mut SlotRouter| -> Result<Vec<Phase>> {
            Ok(vec![
                Phase::Board(phases.share_from_owners(k)),
                Phase::Switched(phases.switched(router, false, Op::Copy, k)?),
                Phase::Board(phases.designated(Op::Copy, k)),
            ])
        };
        Ok(match c.kind {
            CollectiveKind::AllGather => ag(&mut router)?,
            CollectiveKind::ReduceScatter => rs(&mut router)?,
            CollectiveKind::AllReduce => {
                let mut v = rs(&mut router)?;
                v.extend(ag(&mut router)?);
                v
            }
            CollectiveKind::AllToAll => Vec::new(),
        })
    };
    if c.kind == CollectiveKind::AllToAll {
        return Ok(None);
    }
    let steps: Vec<Step> = if let Some(lag) = pipelined {
        let chains = (0..c.pieces).map(|k| chain(Some(k))).collect::<Result<Vec<_>>>()?;
        pipeline(chains, lag)
    } else {
        chain(None)?
            .into_iter()
            .flat_map(|p| match p {
                Phase::Board(s) => vec![s],
                Phase::Switched(v) => v,
            })
            .collect()
    };
    Ok(Some(finish(t, steps)))
}

/// One phase of the board-hierarchical collectives: a step over board links, or the sub-steps of
/// a switched exchange.
enum Phase {
    Board(Step),
    Switched(Vec<Step>),
}

/// Lays chains of phases (one chain per chunk, the same kinds of phase in the same order) into
/// steps as a software pipeline. A period has one step per board phase of a chain (its board
/// phases take them in order, and so do its switched phases); chunk k's phase runs in period
/// k + D, where D grows along the chain so that every phase comes after the one before it, and
/// `lag` periods after a switched one: under the event-driven cost a rank runs its steps in
/// order, so a phase that waited for data still crossing the switches would hold up everything
/// after it; `lag` periods of other chunks' work cover that latency. Board phases use the board
/// links, switched ones the uplinks, so the two of a step never share a link; a switched phase
/// of several sub-steps becomes consecutive steps, the board phase in the first.
fn pipeline(chains: Vec<Vec<Phase>>, lag: usize) -> Vec<Step> {
    let Some(first) = chains.first() else { return Vec::new() };
    // Each phase's (period offset, position in the period), by the first chain. The switched
    // phases run beside the heaviest board phases (most pieces on a link), so that a step's
    // board links and uplinks take about as long.
    let board_weights: Vec<(usize, usize)> = first
        .iter()
        .filter_map(|p| match p {
            Phase::Board(s) => Some(heaviest_link(s)),
            Phase::Switched(_) => None,
        })
        .enumerate()
        .collect();
    let switches = first.iter().filter(|p| matches!(p, Phase::Switched(_))).count();
    let mut beside: Vec<usize> = {
        let mut by_weight = board_weights.clone();
        by_weight.sort_by_key(|&(pos, w)| (std::cmp::Reverse(w), pos));
        by_weight.iter().take(switches).map(|x| x.0).collect()
    };
    beside.sort_unstable();
    beside.extend(board_weights.len()..switches);
    let (mut boards, mut switched_seen) = (0, 0);
    let mut place: Vec<(usize, usize)> = Vec::new();
    for (j, phase) in first.iter().enumerate() {
        let pos = match phase {
            Phase::Board(_) => post_inc(&mut boards),
            Phase::Switched(_) => beside[post_inc(&mut switched_seen)],
        };
        let offset = match j.checked_sub(1).map(|i| (place[i], &first[i])) {
            None => 0,
            Some(((d, _), Phase::Switched(_))) => d + lag.max(1),
            Some(((d, p), Phase::Board(_))) => d + usize::from(pos <= p),
        };
        place.push((offset, pos));
    }
    let period = place.iter().map(|x| x.1 + 1).max().unwrap_or(1);
    let slots = (chains.len() + place.iter().map(|x| x.0).max().unwrap_or(0)) * period;
    let mut board: Vec<Option<Step>> = (0..slots).map(|_| None).collect();
    let mut switched: Vec<Option<Vec<Step>>> = (0..slots).map(|_| None).collect();
    for (k, chain) in chains.into_iter().enumerate() {
        for (phase, &(d, pos)) in chain.into_iter().zip(&place) {
            let at = (k + d) * period + pos;
            match phase {
                Phase::Board(s) => board[at] = Some(s),
                Phase::Switched(v) => switched[at] = Some(v),
            }
        }
    }
    let mut steps = Vec::new();
    for (b, sw) in board.into_iter().zip(switched) {
        let mut subs = sw.unwrap_or_default();
        if subs.is_empty() {
            subs.push(Step::default());
        }
        if let Some(b) = b {
            subs[0].transfers.extend(b.transfers);
        }
        steps.extend(subs);
    }
    steps
}

/// The most pieces a step puts on one link.
fn heaviest_link(s: &Step) -> usize {
    let mut on: HashMap<LinkId, usize> = HashMap::new();
    for tr in &s.transfers {
        for &l in &tr.path {
            *on.entry(l).or_default() += tr.pieces.len();
        }
    }
    on.into_values().max().unwrap_or(0)
}

/// `*x`, then adds one to it.
fn post_inc(x: &mut usize) -> usize {
    *x += 1;
    *x - 1
}

/// The pieces of the blocks of rank indices `g`: all, or piece `k` of each.
fn block_pieces(c: &Collective, g: &[usize], k: Option<u32>) -> Vec<PieceId> {
    let ks: Vec<u32> = match k {
        Some(k) => vec![k],
        None => (0..c.pieces).collect(),
    };
    g.iter().flat_map(|&x| ks.iter().map(move |&k| PieceId::block(x as u32, k))).collect()
}

/// The phases of [`board_hierarchical`], each for every piece of the blocks it moves or one.
struct BoardPhases<'a> {
    c: &'a Collective,
    boards: &'a Boards,
    /// (round, sending board, receiving board, rank index within the boards).
    pairs: &'a [(usize, usize, usize, usize)],
    rounds: usize,
}

impl BoardPhases<'_> {
    fn blocks(&self, g: &[usize], k: Option<u32>) -> Vec<PieceId> {
        block_pieces(self.c, g, k)
    }

    fn hop(&self, x: usize, y: usize, op: Op, pieces: Vec<PieceId>) -> Transfer {
        self.boards.hop(x, y, op, pieces)
    }

    /// The switched rounds: the rank of the sending board sends the blocks of that board over to
    /// its partner (`reverse`: the partner sends them back, reducing).
    fn switched(&self, router: &mut SlotRouter, reverse: bool, op: Op, k: Option<u32>) -> Result<Vec<Step>> {
        let (groups, c) = (&self.boards.groups, self.c);
        let mut steps = Vec::new();
        for q in 0..self.rounds {
            let mut flows: Vec<(usize, usize, Vec<PieceId>)> = Vec::new();
            for &(_, b, b2, i) in self.pairs.iter().filter(|x| x.0 == q) {
                let (x, y) = (groups[b][i], groups[b2][i]);
                flows.push(if reverse { (y, x, self.blocks(&groups[b], k)) } else { (x, y, self.blocks(&groups[b], k)) });
            }
            let ends: Vec<(NodeId, NodeId)> = flows.iter().map(|f| (c.ranks[f.0], c.ranks[f.1])).collect();
            for sub in router.route(&ends, q)? {
                steps.push(Step { transfers: sub.into_iter().map(|(f, path)| Transfer { path, op, pieces: flows[f].2.clone() }).collect() });
            }
        }
        Ok(steps)
    }

    /// all_gather, first: every rank copies its block to its board mates.
    fn share_from_owners(&self, k: Option<u32>) -> Step {
        let mut step = Step::default();
        for g in &self.boards.groups {
            for &x in g {
                for &y in g.iter().filter(|&&y| y != x) {
                    step.transfers.push(self.hop(x, y, Op::Copy, self.blocks(&[x], k)));
                }
            }
        }
        step
    }

    /// Between each designated rank and its board mates, for the blocks of the board it was
    /// designated for: all_gather, last, copies from it to them ([`Op::Copy`]); reduce_scatter,
    /// first, reduces from them into it ([`Op::Reduce`]).
    fn designated(&self, op: Op, k: Option<u32>) -> Step {
        let mut step = Step::default();
        for &(_, b, b2, i) in self.pairs {
            let y = self.boards.groups[b2][i];
            for &z in self.boards.groups[b2].iter().filter(|&&z| z != y) {
                let (from, to) = if op == Op::Copy { (y, z) } else { (z, y) };
                step.transfers.push(self.hop(from, to, op, self.blocks(&self.boards.groups[b], k)));
            }
        }
        step
    }

    /// reduce_scatter, last: every rank reduces into the owner of each block of its board.
    fn to_owners(&self, k: Option<u32>) -> Step {
        let mut step = Step::default();
        for g in &self.boards.groups {
            for &x in g {
                for &j in g.iter().filter(|&&j| j != x) {
                    step.transfers.push(self.hop(x, j, Op::Reduce, self.blocks(&[j], k)));
                }
            }
        }
        step
    }
}

/// How long [`pipelined_board_hierarchical`] tries piece counts and lags, once it has one.
const PIPELINE_SEARCH: Duration = Duration::from_secs(5);

/// [`board_hierarchical`] pipelined over chunks ([`pipelined`]); `None` where there are no
/// boards, or a rank has no path, or the boards need more than one switched round (more boards
/// than a board has ranks that reach the switches, plus one: a chunk's switched phase then keeps the uplinks busy over
/// several sub-steps by itself, and on 512 npus in 64 boards the pipelined schedules took longer,
/// 133 against 103 us).
fn pipelined_board_hierarchical(t: &Topology, c: &Collective) -> Result<Option<Schedule>> {
    let Some(boards) = Boards::of(t, c) else { return Ok(None) };
    if boards.groups.len() > boards.m + 1 {
        return Ok(None);
    }
    pipelined(t, c, SwitchedMethod::BoardHierarchicalPipelined, |cp: &Collective, lag: usize| board_hierarchical(t, cp, Some(lag)))
}

/// A board collective (`build`: its steps for the collective cut into pieces, pipelined with a
/// lag, each piece a chunk): for a collective of one piece per block, the fastest under the
/// event-driven cost of 2, 4, 8, 16 and 32 pieces per block and lags of 1, 2, 4 and 8 periods,
/// more pieces only while they help and for at most [`PIPELINE_SEARCH`]; for one of more pieces
/// (a spec that fixes them), those pieces at every lag. Unverified (the caller verifies it);
/// `None` where `build` has no steps (no boards, or a rank without a path).
fn pipelined(
    t: &Topology,
    c: &Collective,
    method: SwitchedMethod,
    build: impl Fn(&Collective, usize) -> Result<Option<Vec<Step>>>,
) -> Result<Option<Schedule>> {
    if c.block_bytes.is_some() {
        return Ok(None);
    }
    let counts: &[u32] = if c.pieces == 1 { &[2, 4, 8, 16, 32] } else { &[c.pieces] };
    let started = Instant::now();
    let mut best: Option<(f64, Schedule)> = None;
    'pieces: for &pieces in counts {
        let cp = Collective::new(c.kind, c.ranks.clone(), c.bytes_per_rank, pieces, None, t)?;
        let before = best.as_ref().map(|b| b.0);
        for lag in [1, 2, 4, 8] {
            if best.is_some() && started.elapsed() > PIPELINE_SEARCH {
                break 'pieces;
            }
            let steps = match build(&cp, lag) {
                Ok(Some(steps)) => steps,
                Ok(None) | Err(Error::Infeasible(_)) => return Ok(None),
                Err(e) => return Err(e),
            };
            let s = schedule(t, &cp, steps, method);
            let time = crate::cost::event_cost(&s, false)?.time_ns;
            if best.as_ref().is_none_or(|b| time < b.0) {
                best = Some((time, s));
            }
        }
        if before.is_some() && before == best.as_ref().map(|b| b.0) {
            break;
        }
    }
    Ok(best.map(|(_, s)| s))
}

/// Merges the transfers of a step that take the same path with the same op into one.
fn merge_same_path(step: Step) -> Step {
    let mut out: Vec<Transfer> = Vec::new();
    let mut at: HashMap<(Vec<LinkId>, Op), usize> = HashMap::new();
    for tr in step.transfers {
        match at.entry((tr.path.clone(), tr.op)) {
            std::collections::hash_map::Entry::Occupied(e) => out[*e.get()].pieces.extend(tr.pieces),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(out.len());
                out.push(tr);
            }
        }
    }
    Step { transfers: out }
}

/// A block that goes through switches: sending rank index, receiving rank index, pieces.
type Flow = (usize, usize, Vec<PieceId>);

/// The blocks of an all_to_all: those with a direct (board) link up, as transfers over it, and the
/// others.
fn split_blocks(t: &Topology, c: &Collective) -> (Vec<Transfer>, Vec<Flow>) {
    let r = c.num_ranks();
    let p = c.pieces as usize;
    let mut direct: Vec<Transfer> = Vec::new();
    let mut flows: Vec<Flow> = Vec::new();
    for i in 0..r {
        for j in (0..r).filter(|&j| j != i) {
            let pieces: Vec<PieceId> =
                (0..p).filter(|&k| c.is_required_index((i * r + j) * p + k)).map(|k| PieceId::a2a(i as u32, j as u32, k as u32)).collect();
            if pieces.is_empty() {
                continue;
            }
            match up_link(t, c.ranks[i], c.ranks[j]) {
                Some(l) => direct.push(Transfer::hop(l, Op::Copy, pieces)),
                None => flows.push((i, j, pieces)),
            }
        }
    }
    (direct, flows)
}

/// Slotted pairwise all_to_all (module documentation): the steps.
fn slotted_all_to_all(t: &Topology, c: &Collective) -> Result<Vec<Step>> {
    let r = c.num_ranks();
    let (direct, flows) = split_blocks(t, c);
    let edges: Vec<(usize, usize)> = flows.iter().map(|&(i, j, _)| (i, j)).collect();
    let (slot_of, slots) = colour_edges(r, r, &edges);
    let mut by_slot: Vec<Vec<usize>> = vec![Vec::new(); slots];
    for (f, &s) in slot_of.iter().enumerate() {
        by_slot[s].push(f);
    }
    let mut router = SlotRouter::new(t);
    let mut steps: Vec<Step> = Vec::new();
    for (g, members) in by_slot.iter().enumerate() {
        let ends: Vec<(NodeId, NodeId)> = members.iter().map(|&f| (c.ranks[flows[f].0], c.ranks[flows[f].1])).collect();
        for sub in router.route(&ends, g)? {
            let mut sub = sub;
            sub.sort_by_key(|(x, _)| *x);
            steps.push(Step { transfers: sub.into_iter().map(|(x, path)| Transfer { path, op: Op::Copy, pieces: flows[members[x]].2.clone() }).collect() });
        }
    }
    // A rank's board blocks go with its first switched send, on links nothing else uses: a step
    // of board blocks alone would be a group of its own, which delays the rank's later sends
    // and puts it out of step with the ranks it shares uplinks with.
    let mut first_step: HashMap<NodeId, usize> = HashMap::new();
    for (x, step) in steps.iter().enumerate() {
        for tr in &step.transfers {
            first_step.entry(t.link(tr.path[0]).src).or_insert(x);
        }
    }
    if !direct.is_empty() && steps.is_empty() {
        steps.push(Step::default());
    }
    for tr in direct {
        let x = first_step.get(&t.link(tr.path[0]).src).copied().unwrap_or(0);
        steps[x].transfers.push(tr);
    }
    Ok(steps)
}

/// Slots between a relay's hand-over over the board and the mate's send: the hand-over arrives
/// after one slot plus a board link's latency.
const HAND_OVER_SLOTS: usize = 2;

/// Slotted pairwise with faults: one sub-step per slot, filled greedily. Each block is due in
/// its slot of the König colouring; slot by slot, the blocks in order of due slot (overdue
/// first), then of how loaded the leaves at their ends are (remaining blocks over usable
/// uplinks), take a shortest path over links still free in the slot, while their sender and
/// receiver are free. A leaf that lost an uplink thus sends (and receives) one block fewer per
/// slot and the rest wait; a rank left without a switched block in a slot sends one of its board
/// blocks instead, so that every rank keeps one group of sends per slot and the ranks stay in
/// step under the event-driven cost. Board blocks left over go with the rank's first send.
fn greedy_slotted_all_to_all(t: &Topology, c: &Collective, relay: bool) -> Result<Vec<Step>> {
    let mut g = GreedySlots::new(t, c);
    if relay {
        g.plan_relays();
    }
    let due = g.due_slots();
    // Sub-steps per slot: as many as a healthy leaf needs for one block from each of its npus
    // (2 on a tree oversubscribed 2:1, whose flows then share the uplinks evenly at run time).
    let per_slot = g.shape.as_ref().map_or(1, |s| s.down.div_ceil(s.up)).max(1);
    let mut by_due: Vec<Vec<usize>> = vec![Vec::new(); due.iter().copied().max().map_or(0, |m| m + 1)];
    for (f, &d) in due.iter().enumerate() {
        by_due[d].push(f);
    }
    let mut router = SlotRouter::new(t);
    let mut pending: Vec<usize> = (0..g.flows.len()).collect();
    let mut steps: Vec<Step> = Vec::new();
    let mut slot = 0;
    while !pending.is_empty() {
        let members = by_due.get(slot).map_or(&[][..], Vec::as_slice);
        let (subs, rest) = g.fill_slot(&mut router, slot, per_slot, &due, members, pending)?;
        if subs.iter().all(|st| st.transfers.is_empty()) && slot > 2 + steps.len() {
            return Err(Error::internal(format!("fat-tree synthesis: slot {slot} places no block")));
        }
        steps.extend(subs.into_iter().filter(|st| !st.transfers.is_empty()));
        pending = rest;
        slot += 1;
    }
    Ok(g.finish(steps))
}

/// The state of the greedy slotted pairwise: the blocks still to send through the switches, the
/// load left at each leaf, and the board transfers and relays that fill the gaps.
struct GreedySlots<'a> {
    t: &'a Topology,
    c: &'a Collective,
    shape: Option<FatTreeShape>,
    /// Up links from each node to switches, and from switches to it.
    switch_out: Vec<usize>,
    switch_in: Vec<usize>,
    /// Up links into each switch from npus, and from it to npus.
    npus_in: Vec<usize>,
    npus_out: Vec<usize>,
    /// The blocks through the switches: (sender rank, receiver rank, pieces).
    flows: Vec<Flow>,
    /// Remaining blocks out of and into each leaf group (or rank elsewhere).
    out_left: HashMap<usize, f64>,
    in_left: HashMap<usize, f64>,
    /// Board transfers a rank sends in slots where it has no switched block.
    board: Vec<VecDeque<Transfer>>,
    /// Blocks a rank hands to a board mate that sends them on (relays), with their flow.
    hand_over: Vec<VecDeque<(Transfer, usize)>>,
    /// The first slot each flow may go in (`None` until its hand-over has been sent).
    ready: Vec<Option<usize>>,
    /// Flows a board mate forwards at the end, which go first.
    early: Vec<bool>,
    /// The final board forwards of relayed incoming blocks, by link.
    forwards: HashMap<LinkId, Vec<PieceId>>,
}

impl<'a> GreedySlots<'a> {
    fn new(t: &'a Topology, c: &'a Collective) -> Self {
        let r = c.num_ranks();
        let (direct, flows) = split_blocks(t, c);
        let (mut switch_out, mut switch_in) = (vec![0usize; t.num_nodes()], vec![0usize; t.num_nodes()]);
        let (mut npus_in, mut npus_out) = (vec![0usize; t.num_nodes()], vec![0usize; t.num_nodes()]);
        for (_, l) in t.links().filter(|(_, l)| l.up) {
            match (t.is_npu(l.src), t.is_npu(l.dst)) {
                (true, false) => npus_in[l.dst.index()] += 1,
                (false, true) => npus_out[l.src.index()] += 1,
                _ => {}
            }
            if !t.is_npu(l.dst) {
                switch_out[l.src.index()] += 1;
            }
            if !t.is_npu(l.src) {
                switch_in[l.dst.index()] += 1;
            }
        }
        let n = flows.len();
        let mut g = GreedySlots {
            t,
            c,
            shape: t.fat_tree_shape().cloned(),
            switch_out,
            switch_in,
            npus_in,
            npus_out,
            flows,
            out_left: HashMap::new(),
            in_left: HashMap::new(),
            board: vec![VecDeque::new(); r],
            hand_over: vec![VecDeque::new(); r],
            ready: vec![Some(0); n],
            early: vec![false; n],
            forwards: HashMap::new(),
        };
        for f in 0..n {
            let (i, j) = (g.flows[f].0, g.flows[f].1);
            *g.out_left.entry(g.group(c.ranks[i])).or_default() += 1.0;
            *g.in_left.entry(g.group(c.ranks[j])).or_default() += 1.0;
        }
        for tr in direct {
            let sender = t.link(tr.path[0]).src;
            g.board[c.rank_index(sender).expect("a rank sends")].push_back(tr);
        }
        g
    }

    /// The load group of a node: its leaf on a fat tree (the switch links next to it are the
    /// leaf's), the node itself elsewhere.
    fn group(&self, n: NodeId) -> usize {
        self.shape.as_ref().filter(|s| n.index() < s.npus).map_or(n.index(), |s| self.t.num_nodes() + s.leaf_of(n))
    }

    /// The blocks a node's group moves through the switches at once, out or in (at least 1):
    /// on a fat tree its leaf's up links to the switches above, or its npus' up links to the
    /// leaf if fewer (an npu whose link is down sends through board mates), elsewhere the node's
    /// own up links to switches.
    fn capacity(&self, n: NodeId, out: bool) -> f64 {
        let links = match self.shape.as_ref().filter(|s| n.index() < s.npus) {
            Some(s) => {
                let leaf = s.leaf(s.leaf_of(n)).index();
                if out {
                    self.switch_out[leaf].min(self.npus_in[leaf])
                } else {
                    self.switch_in[leaf].min(self.npus_out[leaf])
                }
            }
            None => {
                if out {
                    self.switch_out[n.index()]
                } else {
                    self.switch_in[n.index()]
                }
            }
        };
        links.max(1) as f64
    }

    fn ratio(&self, n: NodeId, out: bool) -> f64 {
        let left = if out { &self.out_left } else { &self.in_left };
        left.get(&self.group(n)).copied().unwrap_or(0.0) / self.capacity(n, out)
    }

    /// Whether the npu has an up link to a switch (`out`) or from one.
    fn reaches(&self, n: NodeId, out: bool) -> bool {
        (if out { self.switch_out[n.index()] } else { self.switch_in[n.index()] }) > 0
    }

    /// Whether rank x can relay for rank y, sending (`out`) or receiving its blocks through the
    /// switches: a board mate linked both ways that reaches the switches, under another leaf
    /// unless y itself cannot reach them (then every mate that can will do).
    fn mate(&self, x: usize, y: usize, avoid: usize, out: bool) -> bool {
        let (t, ranks) = (self.t, &self.c.ranks);
        x != y
            && x != avoid
            && (self.group(ranks[x]) != self.group(ranks[y]) || !self.reaches(ranks[y], out))
            && self.reaches(ranks[x], out)
            && up_link(t, ranks[y], ranks[x]).is_some()
            && up_link(t, ranks[x], ranks[y]).is_some()
    }

    /// A leaf with fewer usable uplinks (downlinks) than its neighbours hands blocks to board
    /// mates under other leaves while that lowers the larger of the two loads; a rank whose own
    /// link to (from) its leaf is down hands every block to (receives every block through) its
    /// board mates.
    fn plan_relays(&mut self) {
        let (t, c) = (self.t, self.c);
        let mut relays_by = vec![0usize; c.num_ranks()];
        for f in 0..self.flows.len() {
            let (i, j) = (self.flows[f].0, self.flows[f].1);
            let (a, b) = (c.ranks[i], c.ranks[j]);
            let least_loaded = |g: &Self, out: bool, candidates: Vec<usize>| {
                candidates.into_iter().min_by(|&x, &y| g.ratio(c.ranks[x], out).total_cmp(&g.ratio(c.ranks[y], out)).then(relays_by[x].cmp(&relays_by[y])))
            };
            // Outgoing: a -> m over the board, then m sends the block through the switches.
            let cut_out = !self.reaches(a, true);
            let outs = (0..c.num_ranks()).filter(|&m| self.mate(m, i, j, true) && up_link(t, c.ranks[m], b).is_none()).collect();
            if let Some(m) = least_loaded(self, true, outs) {
                let ma = c.ranks[m];
                if cut_out || self.ratio(a, true) - 1.0 / self.capacity(a, true) >= self.ratio(ma, true) + 1.0 / self.capacity(ma, true) {
                    *self.out_left.get_mut(&self.group(a)).expect("counted") -= 1.0;
                    *self.out_left.entry(self.group(ma)).or_default() += 1.0;
                    relays_by[m] += 1;
                    let hop = Transfer::hop(up_link(t, a, ma).expect("a mate"), Op::Copy, self.flows[f].2.clone());
                    self.hand_over[i].push_back((hop, f));
                    self.flows[f].0 = m;
                    self.ready[f] = None;
                    continue;
                }
            }
            // Incoming: the block goes through the switches to a board mate m of b, which
            // forwards it over the board at the end.
            let cut_in = !self.reaches(b, false);
            let ins = (0..c.num_ranks()).filter(|&m| self.mate(m, j, i, false) && up_link(t, a, c.ranks[m]).is_none()).collect();
            if let Some(m) = least_loaded(self, false, ins) {
                let mb = c.ranks[m];
                if cut_in || self.ratio(b, false) - 1.0 / self.capacity(b, false) >= self.ratio(mb, false) + 1.0 / self.capacity(mb, false) {
                    *self.in_left.get_mut(&self.group(b)).expect("counted") -= 1.0;
                    *self.in_left.entry(self.group(mb)).or_default() += 1.0;
                    relays_by[m] += 1;
                    self.forwards.entry(up_link(t, mb, b).expect("a mate")).or_default().extend(self.flows[f].2.iter().copied());
                    self.flows[f].1 = m;
                    self.early[f] = true;
                }
            }
        }
    }

    /// The slot each flow is due in: its colour in the König colouring of the flows, 0 for the
    /// blocks a mate forwards at the end (so that they have arrived by then).
    fn due_slots(&self) -> Vec<usize> {
        let edges: Vec<(usize, usize)> = self.flows.iter().map(|&(i, j, _)| (i, j)).collect();
        let r = self.c.num_ranks();
        let (mut due, _) = colour_edges(r, r, &edges);
        for (d, &e) in due.iter_mut().zip(&self.early) {
            if e {
                *d = 0;
            }
        }
        due
    }

    /// Places the pending flows of one slot into its sub-steps (the `members` due now on their
    /// preferred paths of the healthy tree's colouring where still free); returns the sub-steps
    /// and the flows left for later slots.
    fn fill_slot(
        &mut self,
        router: &mut SlotRouter,
        slot: usize,
        per_slot: usize,
        due: &[usize],
        members: &[usize],
        mut pending: Vec<usize>,
    ) -> Result<(Vec<Step>, Vec<usize>)> {
        let (t, c) = (self.t, self.c);
        let r = c.num_ranks();
        let mut preferred: HashMap<usize, (usize, Vec<LinkId>)> = HashMap::new();
        if let Some(sh) = self.shape.as_ref() {
            let ends: Vec<(NodeId, NodeId)> = members.iter().map(|&f| (c.ranks[self.flows[f].0], c.ranks[self.flows[f].1])).collect();
            for (&f, pref) in members.iter().zip(healthy_colouring(t, sh, &ends, slot)) {
                if let Some(x) = pref {
                    preferred.insert(f, x);
                }
            }
        }
        let load = |f: usize| {
            let (a, b) = (c.ranks[self.flows[f].0], c.ranks[self.flows[f].1]);
            (self.out_left[&self.group(a)] / self.capacity(a, true)).max(self.in_left[&self.group(b)] / self.capacity(b, false))
        };
        let loads: HashMap<usize, f64> = pending.iter().map(|&f| (f, load(f))).collect();
        pending.sort_by(|&x, &y| due[x].cmp(&due[y]).then(loads[&y].total_cmp(&loads[&x])).then(x.cmp(&y)));
        let mut used = vec![vec![false; t.num_links()]; per_slot];
        let (mut sending, mut receiving) = (vec![false; r], vec![false; r]);
        let mut subs = vec![Step::default(); per_slot];
        let mut rest = Vec::new();
        for f in pending {
            let (i, j, _) = self.flows[f];
            let placed = self.ready[f].is_some_and(|x| x <= slot) && !sending[i] && !receiving[j] && {
                let (a, b) = (c.ranks[i], c.ranks[j]);
                let len = router.shortest_len(a, b)?;
                let free = |u: &[bool], p: &[LinkId]| p.iter().all(|l| t.link(*l).up && !u[l.index()]);
                let fit = preferred
                    .get(&f)
                    .filter(|(x, p)| *x < per_slot && free(&used[*x], p))
                    .cloned()
                    .or_else(|| (0..per_slot).find_map(|x| free_path(t, a, b, &used[x]).filter(|p| p.len() == len).map(|p| (x, p))));
                match fit {
                    Some((x, path)) => {
                        path.iter().for_each(|l| used[x][l.index()] = true);
                        subs[x].transfers.push(Transfer { path, op: Op::Copy, pieces: self.flows[f].2.clone() });
                        true
                    }
                    None => false,
                }
            };
            if placed {
                sending[i] = true;
                receiving[j] = true;
                *self.out_left.get_mut(&self.group(c.ranks[i])).expect("counted") -= 1.0;
                *self.in_left.get_mut(&self.group(c.ranks[j])).expect("counted") -= 1.0;
            } else {
                rest.push(f);
            }
        }
        // A rank without a switched block in this slot sends a board transfer instead, so that it
        // keeps one group of sends per slot: a relay hand-over first, else one of its own blocks.
        // (Handing over beside the switched sends, as early as possible, measured slower.) A rank
        // that cannot reach the switches hands over one block on each of its board links.
        for x in (0..r).filter(|&x| !sending[x]) {
            if !self.reaches(c.ranks[x], true) {
                let mut on: Vec<LinkId> = Vec::new();
                for (tr, f) in std::mem::take(&mut self.hand_over[x]) {
                    if on.contains(&tr.path[0]) {
                        self.hand_over[x].push_back((tr, f));
                    } else {
                        on.push(tr.path[0]);
                        subs[0].transfers.push(tr);
                        self.ready[f] = Some(slot + HAND_OVER_SLOTS);
                    }
                }
            } else if let Some((tr, f)) = self.hand_over[x].pop_front() {
                subs[0].transfers.push(tr);
                self.ready[f] = Some(slot + HAND_OVER_SLOTS);
            } else if let Some(tr) = self.board[x].pop_front() {
                subs[0].transfers.push(tr);
            }
        }
        Ok((subs, rest))
    }

    /// The steps with the board blocks left over added to each sender's first step (with a
    /// hand-over on the same link, one transfer), and the relays' final board forwards as a last
    /// step.
    fn finish(self, mut steps: Vec<Step>) -> Vec<Step> {
        let t = self.t;
        let left: Vec<Transfer> = self.board.into_iter().flatten().collect();
        if !left.is_empty() && steps.is_empty() {
            steps.push(Step::default());
        }
        let mut first_step: HashMap<NodeId, usize> = HashMap::new();
        for (x, step) in steps.iter().enumerate() {
            for tr in &step.transfers {
                first_step.entry(t.link(tr.path[0]).src).or_insert(x);
            }
        }
        for tr in left {
            let x = first_step.get(&t.link(tr.path[0]).src).copied().unwrap_or(0);
            steps[x].transfers.push(tr);
        }
        if !self.forwards.is_empty() {
            let mut last: Vec<(LinkId, Vec<PieceId>)> = self.forwards.into_iter().collect();
            last.sort();
            steps.push(Step { transfers: last.into_iter().map(|(l, pieces)| Transfer::hop(l, Op::Copy, pieces)).collect() });
        }
        steps.into_iter().map(merge_same_path).collect()
    }
}

/// Sub-steps of one slot: each a list of (flow index, path).
type SubSteps = Vec<Vec<(usize, Vec<LinkId>)>>;

/// Routes the flows of a slot (at most one switched send and one receive per npu) into the
/// fewest contention-free sub-steps it can find.
struct SlotRouter<'a> {
    t: &'a Topology,
    /// The fat-tree shape, whose healthy colouring gives every flow a preferred path.
    shape: Option<FatTreeShape>,
    /// Per pair, the length of a shortest path through switches over up links.
    shortest: HashMap<(NodeId, NodeId), usize>,
}

impl<'a> SlotRouter<'a> {
    fn new(t: &'a Topology) -> Self {
        SlotRouter { t, shape: t.fat_tree_shape().cloned(), shortest: HashMap::new() }
    }

    fn shortest_len(&mut self, a: NodeId, b: NodeId) -> Result<usize> {
        if let Some(&n) = self.shortest.get(&(a, b)) {
            return Ok(n);
        }
        let t = self.t;
        let none = vec![false; t.num_links()];
        let path = free_path(t, a, b, &none)
            .ok_or_else(|| Error::infeasible(format!("no path through switches from npu {a} ({}) to npu {b} ({})", t.node(a).name, t.node(b).name)))?;
        self.shortest.insert((a, b), path.len());
        Ok(path.len())
    }

    /// Routes one slot; `slot` rotates the colour-to-spine mapping so that a failed uplink hits a
    /// different flow of each leaf from slot to slot.
    fn route(&mut self, ends: &[(NodeId, NodeId)], slot: usize) -> Result<SubSteps> {
        let t = self.t;
        let preferred: Vec<Option<(usize, Vec<LinkId>)>> = match &self.shape {
            Some(shape) => healthy_colouring(t, shape, ends, slot),
            None => vec![None; ends.len()],
        };
        let mut used: Vec<Vec<bool>> = Vec::new();
        let mut out: SubSteps = Vec::new();
        let mut left = Vec::new();
        for (i, pref) in preferred.into_iter().enumerate() {
            let fits = |used: &Vec<Vec<bool>>, s: usize, path: &[LinkId]| path.iter().all(|l| t.link(*l).up && used.get(s).is_none_or(|u| !u[l.index()]));
            match pref {
                Some((s, path)) if fits(&used, s, &path) => {
                    while used.len() <= s {
                        used.push(vec![false; t.num_links()]);
                        out.push(Vec::new());
                    }
                    path.iter().for_each(|l| used[s][l.index()] = true);
                    out[s].push((i, path));
                }
                _ => left.push(i),
            }
        }
        for i in left {
            let (a, b) = ends[i];
            let len = self.shortest_len(a, b)?;
            let fit = (0..used.len()).find_map(|s| free_path(t, a, b, &used[s]).filter(|p| p.len() == len).map(|p| (s, p)));
            let (s, path) = match fit {
                Some(x) => x,
                None => {
                    used.push(vec![false; t.num_links()]);
                    out.push(Vec::new());
                    let none = vec![false; t.num_links()];
                    (used.len() - 1, free_path(t, a, b, &none).expect("a shortest path exists (checked above)"))
                }
            };
            path.iter().for_each(|l| used[s][l.index()] = true);
            out[s].push((i, path));
        }
        Ok(out.into_iter().filter(|s| !s.is_empty()).collect())
    }
}

/// The preferred (sub-step, path) of every flow of a slot on the healthy tree (the path may cross
/// failed links; the caller checks): flows within a leaf go through the leaf; the leaf-to-leaf
/// flows are coloured by leaf, colour `c` in sub-step `c / u` on uplink `(c + slot) mod u`; on 3
/// levels the inter-pod flows of one colour are coloured pod to pod to pick one of the u cores of
/// their aggregation index (a pod has u ToRs with at most one flow of each colour, so u colours
/// suffice). `None` for a flow whose ends are not npus of the tree.
fn healthy_colouring(t: &Topology, shape: &FatTreeShape, ends: &[(NodeId, NodeId)], slot: usize) -> Vec<Option<(usize, Vec<LinkId>)>> {
    let u = shape.up;
    let link = |a: NodeId, b: NodeId| t.link_between(a, b);
    let leaf = |n: NodeId| shape.leaf(shape.leaf_of(n));
    let mut out: Vec<Option<(usize, Vec<LinkId>)>> = vec![None; ends.len()];
    let mut cross = Vec::new();
    for (i, &(a, b)) in ends.iter().enumerate() {
        if a.index() >= shape.npus || b.index() >= shape.npus {
            continue;
        }
        if shape.leaf_of(a) == shape.leaf_of(b) {
            out[i] = link(a, leaf(a)).zip(link(leaf(a), b)).map(|(x, y)| (0, vec![x, y]));
        } else {
            cross.push(i);
        }
    }
    let leaf_edges: Vec<(usize, usize)> = cross.iter().map(|&i| (shape.leaf_of(ends[i].0), shape.leaf_of(ends[i].1))).collect();
    let (colour, colours) = colour_edges(shape.leaves, shape.leaves, &leaf_edges);
    let mut core_of: HashMap<usize, usize> = HashMap::new();
    if shape.levels == 3 {
        let pods = shape.leaves / u;
        for c in 0..colours {
            let inter: Vec<usize> =
                (0..cross.len()).filter(|&x| colour[x] == c && shape.pod_of_leaf(leaf_edges[x].0) != shape.pod_of_leaf(leaf_edges[x].1)).collect();
            let pod_edges: Vec<(usize, usize)> = inter.iter().map(|&x| (shape.pod_of_leaf(leaf_edges[x].0), shape.pod_of_leaf(leaf_edges[x].1))).collect();
            let (pod_colour, _) = colour_edges(pods, pods, &pod_edges);
            for (x, c3) in inter.into_iter().zip(pod_colour) {
                core_of.insert(x, c3 % u);
            }
        }
    }
    for (x, &i) in cross.iter().enumerate() {
        let (a, b) = ends[i];
        let (sub, j) = (colour[x] / u, (colour[x] + slot) % u);
        let mut nodes = vec![a, leaf(a)];
        if shape.levels == 2 {
            nodes.push(shape.middle_switch(j));
        } else {
            let (pa, pb) = (shape.pod_of_leaf(leaf_edges[x].0), shape.pod_of_leaf(leaf_edges[x].1));
            nodes.push(shape.middle_switch(pa * u + j));
            if pa != pb {
                nodes.push(shape.core(j * u + (core_of[&x] + slot) % u));
                nodes.push(shape.middle_switch(pb * u + j));
            }
        }
        nodes.extend([leaf(b), b]);
        let path: Option<Vec<LinkId>> = nodes.windows(2).map(|w| link(w[0], w[1])).collect();
        out[i] = path.map(|p| (sub, p));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::certified::certified_bounds_ns;
    use crate::cost::event_cost;
    use crate::topology::{fat_tree, FatTreeParams, FaultPattern};
    use std::time::Duration;

    /// The four reference trees: (levels, k, osr).
    const TREES: [(u32, usize, f64); 4] = [(2, 16, 1.0), (2, 8, 1.0), (2, 12, 2.0), (3, 8, 1.0)];
    const KINDS: [CollectiveKind; 4] = [CollectiveKind::AllToAll, CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce];

    fn tree(levels: u32, k: usize, osr: f64, faulty: bool) -> Topology {
        let mut t =
            fat_tree(&FatTreeParams { levels, k, osr, npus: 64, board: Some(8), bandwidth_gbps: 400.0, latency_ns: 25.0, switch_latency_ns: 1000.0 }).unwrap();
        if faulty {
            let s = t.fat_tree_shape().unwrap().clone();
            FaultPattern { cables: vec![(s.leaf(0), s.middle_switch(0))], ..Default::default() }.apply(&mut t).unwrap();
        }
        t
    }

    fn collective(t: &Topology, kind: CollectiveKind, ep: u32) -> Collective {
        Collective::new(kind, (0..ep).map(NodeId).collect(), 1 << 20, 1, None, t).unwrap()
    }

    #[test]
    fn every_candidate_verifies_on_the_reference_trees_healthy_and_faulty() {
        for (levels, k, osr) in TREES {
            for faulty in [false, true] {
                let t = tree(levels, k, osr, faulty);
                for kind in KINDS {
                    // EP=32 for all_to_all only: the reused algorithms do not depend on the group;
                    // 3 pieces per block as a spec may fix them (every candidate keeps them).
                    let cases = if kind == CollectiveKind::AllToAll { vec![(32, 1), (64, 1), (64, 3)] } else { vec![(64, 1), (64, 3)] };
                    for (ep, pieces) in cases {
                        let c = Collective::new(kind, (0..ep).map(NodeId).collect(), 1 << 20, pieces, None, &t).unwrap();
                        let what = format!("{levels}L-k{k}-osr{osr} faulty={faulty} {kind} EP={ep} pieces={pieces}");
                        let candidates = fat_tree_candidates(&t, &c).unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert!(!candidates.is_empty(), "{what}");
                        let first = if kind == CollectiveKind::AllToAll { SwitchedMethod::SlottedPairwise } else { SwitchedMethod::BoardHierarchical };
                        assert_eq!(candidates[0].0, first, "{what}");
                        for (name, s) in &candidates {
                            let r = verify_schedule(s, &VerifyOptions::default()).unwrap();
                            let first: Vec<String> = r.findings.failures().iter().take(3).map(|d| d.to_string()).collect();
                            assert!(r.is_valid(), "{what} {name}: {first:?}");
                        }
                    }
                }
            }
        }
    }

    /// At 64 MiB the all-reduce is made of bandwidth: pipelined over pieces, the board links and
    /// the uplinks work at once (95.4 us one phase after the other, 54.0 us pipelined, against a
    /// bound of 44.4 us).
    #[test]
    fn the_pipelined_board_all_reduce_overlaps_boards_and_switches() {
        let t = tree(2, 16, 1.0, false);
        let c = Collective::new(CollectiveKind::AllReduce, (0..64).map(NodeId).collect(), 64 << 20, 1, None, &t).unwrap();
        let candidates = fat_tree_candidates(&t, &c).unwrap();
        let time = |m: SwitchedMethod| event_cost(&candidates.iter().find(|x| x.0 == m).unwrap().1, false).unwrap().time_ns;
        let (plain, pipelined) = (time(SwitchedMethod::BoardHierarchical), time(SwitchedMethod::BoardHierarchicalPipelined));
        let bound = certified_bounds_ns(&t, &c, Duration::from_secs(2)).unwrap().time.unwrap();
        assert!(pipelined < 0.6 * plain && pipelined < 1.25 * bound, "pipelined {pipelined} ns, plain {plain} ns, bound {bound} ns");
    }

    /// At 1 MiB the all-reduce is made of switched latency: crossing once beats crossing twice on
    /// the full-bisection trees (2L-k16: 7.11 us -> 5.85 us event-driven; 3L-k8: 11.21 -> 7.90),
    /// with boards of unequal size too (60 ranks: the last board has 4), and no piece reaches a
    /// rank through the switches from a rank it reached through them before.
    #[test]
    fn the_one_crossing_all_reduce_crosses_once_and_wins_at_small_sizes() {
        for (levels, k) in [(2, 16), (3, 8)] {
            let t = tree(levels, k, 1.0, false);
            for ep in [64, 60] {
                let c = collective(&t, CollectiveKind::AllReduce, ep);
                let candidates = fat_tree_candidates(&t, &c).unwrap();
                let time = |m: SwitchedMethod| candidates.iter().find(|x| x.0 == m).map(|x| event_cost(&x.1, false).unwrap().time_ns);
                let once = time(SwitchedMethod::BoardOneCrossingPipelined).unwrap();
                let twice = time(SwitchedMethod::BoardHierarchicalPipelined).or(time(SwitchedMethod::BoardHierarchical)).unwrap();
                assert!(once < 0.9 * twice, "{levels}L-k{k} EP={ep}: once {once} ns, twice {twice} ns");
                for m in [SwitchedMethod::BoardOneCrossing, SwitchedMethod::BoardOneCrossingPipelined] {
                    let s = &candidates.iter().find(|x| x.0 == m).unwrap().1;
                    let mut crossed: HashMap<(PieceId, NodeId), ()> = HashMap::new();
                    for step in &s.steps {
                        let switched: Vec<&Transfer> = step.transfers.iter().filter(|tr| tr.path.len() > 1).collect();
                        for tr in &switched {
                            let from = t.link(tr.path[0]).src;
                            assert!(tr.pieces.iter().all(|&q| !crossed.contains_key(&(q, from))), "{m}: a second crossing from {from}");
                        }
                        for tr in switched {
                            let to = t.link(*tr.path.last().unwrap()).dst;
                            crossed.extend(tr.pieces.iter().map(|&q| ((q, to), ())));
                        }
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

        /// Over tree shapes, board sizes, any group of ranks and failed leaf uplinks, the
        /// one-crossing all_reduce (plain and pipelined), where it applies, verifies under every
        /// rule but the bound, and crosses the switches once.
        #[test]
        fn the_one_crossing_all_reduce_verifies_over_groups_and_faults(
            (k, osr, npus, board) in proptest::sample::select(vec![(4usize, 1.0f64, 8usize, 2usize), (4, 1.0, 8, 4), (8, 1.0, 32, 4), (8, 1.0, 32, 8), (8, 1.0, 32, 2), (12, 2.0, 64, 8), (12, 2.0, 48, 4)]),
            mask in 0u64..u64::MAX,
            cuts in proptest::collection::vec((0usize..64, 0usize..64), 0..=2),
        ) {
            let params = FatTreeParams { levels: 2, k, osr, npus, board: Some(board), bandwidth_gbps: 100.0, latency_ns: 25.0, switch_latency_ns: 500.0 };
            let mut t = fat_tree(&params).unwrap();
            let s = t.fat_tree_shape().unwrap().clone();
            let cables: Vec<_> = cuts.iter().map(|&(l, m)| (s.leaf(l % s.leaves), s.middle_switch(m % s.middle))).collect();
            FaultPattern { cables, ..Default::default() }.apply(&mut t).unwrap();
            let ranks: Vec<NodeId> = (0..npus).filter(|i| mask >> i & 1 == 1).map(|i| NodeId(i as u32)).collect();
            proptest::prop_assume!(ranks.len() >= 2 && t.check_connected(&ranks).is_ok());
            let c = Collective::new(CollectiveKind::AllReduce, ranks, 1 << 16, 1, None, &t).unwrap();
            for lag in [None, Some(2)] {
                let cp = if lag.is_some() { Collective::new(c.kind, c.ranks.clone(), c.bytes_per_rank, 4, None, &t).unwrap() } else { c.clone() };
                // No boards, or a rank without a path through switches (its leaf cables cut,
                // reached only through an npu): no candidate, as `balanced_algorithms` takes it.
                let steps = match one_crossing::one_crossing(&t, &cp, lag) {
                    Ok(Some(steps)) => steps,
                    Ok(None) | Err(Error::Infeasible(_)) => continue,
                    Err(e) => panic!("{e}"),
                };
                let sched = schedule(&t, &cp, steps, SwitchedMethod::BoardOneCrossing);
                let r = verify_schedule(&sched, &VerifyOptions::default()).unwrap();
                let first: Vec<String> = r.findings.failures().iter().take(3).map(|d| d.to_string()).collect();
                proptest::prop_assert!(r.is_valid(), "lag {lag:?}: {first:?}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

        /// Over tree shapes, board sizes, groups and failed cables of every kind (leaf to spine,
        /// npu to leaf, board links), every route-and-step candidate of the gathering and reducing
        /// kinds verifies, plain and at 3 pieces per block; the board collectives are among them
        /// wherever every board keeps a rank that reaches the switches (two, for the one-crossing
        /// all_reduce), since board mates whose link is down cross the switches instead.
        #[test]
        fn board_collectives_run_around_failed_board_and_npu_links(
            (levels, k, osr, npus, board) in proptest::sample::select(vec![(2u32, 4usize, 1.0f64, 8usize, 4usize), (2, 8, 1.0, 32, 8), (2, 8, 1.0, 32, 4), (2, 12, 2.0, 48, 8), (3, 4, 1.0, 16, 4)]),
            mask in 0u64..u64::MAX,
            boards in proptest::collection::vec((0usize..64, 1usize..8), 0..=2),
            npu_links in proptest::collection::vec(0usize..64, 0..=2),
            kind in proptest::sample::select(vec![CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce]),
        ) {
            let params = FatTreeParams { levels, k, osr, npus, board: Some(board), bandwidth_gbps: 100.0, latency_ns: 25.0, switch_latency_ns: 500.0 };
            let mut t = fat_tree(&params).unwrap();
            let s = t.fat_tree_shape().unwrap().clone();
            let mut cables: Vec<(NodeId, NodeId)> = Vec::new();
            for &(a, d) in &boards {
                let a = a % npus;
                let b = a - a % board + (a % board + d) % board;
                if a != b && !cables.iter().any(|&(x, y)| (x, y) == (NodeId(a as u32), NodeId(b as u32)) || (y, x) == (NodeId(a as u32), NodeId(b as u32))) {
                    cables.push((NodeId(a as u32), NodeId(b as u32)));
                }
            }
            for &a in &npu_links {
                let n = NodeId((a % npus) as u32);
                if !cables.contains(&(n, s.leaf(s.leaf_of(n)))) {
                    cables.push((n, s.leaf(s.leaf_of(n))));
                }
            }
            FaultPattern { cables, ..Default::default() }.apply(&mut t).unwrap();
            let ranks: Vec<NodeId> = (0..npus).filter(|i| mask >> i & 1 == 1).map(|i| NodeId(i as u32)).collect();
            proptest::prop_assume!(ranks.len() >= 2 && t.check_connected(&ranks).is_ok());
            let reaches = |n: NodeId| t.in_links(n).chain(t.out_links(n)).filter(|&l| t.link(l).up && !(t.is_npu(t.link(l).src) && t.is_npu(t.link(l).dst))).count() == 2;
            let mut per_board: HashMap<usize, usize> = HashMap::new();
            for &n in &ranks {
                *per_board.entry(s.board_of(n).unwrap()).or_default() += usize::from(reaches(n));
            }
            let fewest = per_board.values().copied().min().unwrap();
            // Board mates whose link is down are joined through the switches when both reach them.
            let is_rank = |n: NodeId| ranks.contains(&n);
            let joined = t.down_links().iter().map(|&l| t.link(l)).filter(|l| is_rank(l.src) && is_rank(l.dst)).all(|l| reaches(l.src) && reaches(l.dst));
            for pieces in [1, 3] {
                let c = Collective::new(kind, ranks.clone(), 1 << 16, pieces, None, &t).unwrap();
                let candidates = route_and_step_candidates(&t, &c).unwrap();
                for (m, sched) in &candidates {
                    let r = verify_schedule(sched, &VerifyOptions::default()).unwrap();
                    let first: Vec<String> = r.findings.failures().iter().take(3).map(|d| d.to_string()).collect();
                    proptest::prop_assert!(r.is_valid(), "{m} at {pieces} pieces: {first:?}");
                }
                let has = |m: SwitchedMethod| candidates.iter().any(|x| x.0 == m);
                if joined && (fewest >= 1 || per_board.len() == 1) {
                    proptest::prop_assert!(has(SwitchedMethod::BoardHierarchical), "no board hierarchical: {per_board:?}");
                }
                if joined && kind == CollectiveKind::AllReduce && fewest >= 2 && per_board.len() >= 2 {
                    proptest::prop_assert!(has(SwitchedMethod::BoardOneCrossing), "no one crossing: {per_board:?}");
                }
            }
        }
    }

    #[test]
    fn slotted_pairwise_meets_the_bound_on_a_full_bisection_tree() {
        let t = tree(2, 16, 1.0, false);
        let c = collective(&t, CollectiveKind::AllToAll, 64);
        let s = &fat_tree_candidates(&t, &c).unwrap()[0].1;
        // Each rank has 56 blocks for npus off its board: one slot each, one sub-step per slot.
        assert_eq!(s.steps.len(), 56);
        let event = event_cost(s, false).unwrap().time_ns;
        let bound = certified_bounds_ns(&t, &c, Duration::from_secs(2)).unwrap().time.unwrap();
        assert!((5300.0..5500.0).contains(&bound), "bound {bound} ns");
        assert!(event <= 1.1 * bound, "event-driven {event} ns against the bound {bound} ns");
    }

    #[test]
    fn a_failed_spine_a_failed_npu_link_and_no_switches() {
        // A whole spine down: every leaf loses an uplink; the flows that preferred it move.
        let mut t = tree(2, 8, 1.0, false);
        let s = t.fat_tree_shape().unwrap().clone();
        FaultPattern { nodes: vec![s.middle_switch(1)], ..Default::default() }.apply(&mut t).unwrap();
        let c = collective(&t, CollectiveKind::AllToAll, 64);
        assert!(!fat_tree_candidates(&t, &c).unwrap().is_empty());
        // A failed npu link: that npu reaches the others only through its board mates.
        let mut t = tree(2, 16, 1.0, false);
        let leaf0 = t.fat_tree_shape().unwrap().leaf(0);
        FaultPattern { cables: vec![(NodeId(3), leaf0)], ..Default::default() }.apply(&mut t).unwrap();
        let c = collective(&t, CollectiveKind::AllToAll, 16);
        let methods: Vec<SwitchedMethod> = fat_tree_candidates(&t, &c).unwrap().into_iter().map(|(m, _)| m).collect();
        assert!(methods.contains(&SwitchedMethod::StoreAndForward), "{methods:?}");
        // The greedy slots hand its blocks to board mates, which send them on (and receive its
        // blocks and forward them): 2L-k16, all 64 npus, 11.33 us -> 8.64 us event-driven.
        let c = collective(&t, CollectiveKind::AllToAll, 64);
        let candidates = fat_tree_candidates(&t, &c).unwrap();
        let time = |m: SwitchedMethod| candidates.iter().find(|x| x.0 == m).map(|x| event_cost(&x.1, false).unwrap().time_ns);
        let (relays, heuristic) = (time(SwitchedMethod::SlottedGreedyBoardRelays).unwrap(), time(SwitchedMethod::StoreAndForward).unwrap());
        assert!(relays < 0.85 * heuristic, "board relays {relays} ns, store-and-forward {heuristic} ns");
        // No switches: refused.
        let ring = crate::topology::torus(&crate::topology::TorusParams::uniform(&[4], 10.0, 1.0)).unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, ring.node_ids().collect(), 1000, 1, None, &ring).unwrap();
        assert!(fat_tree_candidates(&ring, &c).is_err());
    }

    #[test]
    fn colouring_uses_the_largest_degree() {
        let mut edges = Vec::new();
        let mut x = 11usize;
        for _ in 0..400 {
            x = (x * 1103515245 + 12345) % (1 << 31);
            edges.push((x % 9, (x / 9) % 7));
        }
        let (colour, delta) = colour_edges(9, 7, &edges);
        let mut seen = std::collections::HashSet::new();
        for (e, &(a, b)) in edges.iter().enumerate() {
            assert!(colour[e] < delta && seen.insert((0, a, colour[e])) && seen.insert((1, b, colour[e])));
        }
    }
}
