//! The time-expanded program of an all_gather in T steps, and of a reduce_scatter as its time
//! reversal over the transposed hops; and their decoding into schedules.
//!
//! **All-gather.** `x[p, h, t]` = 1 when piece p crosses hop h in step t. A held piece may go out
//! on several hops in one step (docs/design/MODEL.md section 3: a step is a set of transfers, and
//! each reads the state at its start), one piece per link per step. Pieces are not
//! interchangeable here (every rank needs every one), so each piece is a commodity of its own;
//! every rank but the source receives it exactly once (a second copy is wasted: dropping it
//! leaves a schedule with the same steps), so holdings are 0-1 and a send needs only that one
//! arrival came before.
//!
//! **Reduce-scatter.** Run an all-gather over the transposed hops ([`HopGraph::transposed`]: each
//! hop's ends swapped, its links kept) and reverse time: piece `(j, k)` "starts" at rank j, every
//! arrival at v over the transposed hop from u becomes, at step `T - 1 - t`, a `reduce` of v's
//! partial value into u over the original hop from v to u. Every rank receives once in the
//! gather, so the reduces follow a tree into j: a rank sends once, after all of its subtree has
//! merged into it, and the subtrees merging at one rank are disjoint (rule 4). This is exact:
//! in any reduce-scatter, the contributions that reach j travel along time-respecting chains of
//! transfers into j; those chains, reversed, are an all-gather of the same steps over the
//! transposed hops (each transfer still one piece on its links). So the fewest steps agree.

use crate::collective::{Collective, PieceId};
use crate::schedule::{Op, Step, Transfer};
use crate::synth::backends::{Backend, Model, Term, Var};
use crate::topology::hops::HopGraph;
use crate::topology::NodeId;

/// Every piece of `c` with the rank it spreads from: piece (x, k) is all_gather rank x's block, or
/// reduce_scatter block x; either way it spreads from rank x.
fn all_pieces(c: &Collective) -> Vec<(PieceId, NodeId)> {
    c.pieces().map(|p| (p, c.ranks[p.parts()[0] as usize])).collect()
}

/// One all_gather (or, reversed, reduce_scatter) instance over a hop graph.
pub struct Multicast {
    hops: HopGraph,
    /// Every piece with the rank it spreads from (all_gather: the owner of its block;
    /// reduce_scatter: the destination of its block).
    pieces: Vec<(PieceId, NodeId)>,
    /// The ranks, which must all receive every piece.
    ranks: Vec<NodeId>,
    /// Sets of hops that share one piece per step: the hops over each link (section 3), or, for a
    /// translation-invariant schedule, the hops of each direction (`symmetric`).
    shared: Vec<Vec<usize>>,
    /// `dist[p][v]`: hops from piece p's source to npu v (`u32::MAX` if none).
    dist: Vec<Vec<u32>>,
    /// Whether this is a reduce_scatter (the hops are transposed; decoding reverses time).
    reducing: bool,
}

impl Multicast {
    /// The all_gather of `c` over `hops` (single hops between its ranks).
    pub fn all_gather(c: &Collective, hops: &HopGraph) -> Self {
        Self::new(hops.clone(), all_pieces(c), c.ranks.clone(), hops.on_link.clone(), false)
    }

    /// The reduce_scatter of `c` over `hops`, as an all_gather over their transposition.
    pub fn reduce_scatter(c: &Collective, hops: &HopGraph) -> Self {
        Self::new(hops.transposed(), all_pieces(c), c.ranks.clone(), hops.on_link.clone(), true)
    }

    /// Some `pieces` (with the rank each spreads from) to every rank of `ranks` over `hops`, the
    /// hops of each set of `shared` carrying one piece per step between them; with `reducing`,
    /// `hops` are transposed and decoding reverses time (a reduce_scatter).
    pub fn new(hops: HopGraph, pieces: Vec<(PieceId, NodeId)>, ranks: Vec<NodeId>, shared: Vec<Vec<usize>>, reducing: bool) -> Self {
        let mut by_source: Vec<Option<Vec<u32>>> = vec![None; hops.out.len()];
        let dist = pieces
            .iter()
            .map(|&(_, s)| by_source[s.index()].get_or_insert_with(|| hops.distances(s, false).into_iter().map(|d| d.unwrap_or(u32::MAX)).collect()).clone())
            .collect();
        Multicast { hops, pieces, ranks, shared, dist, reducing }
    }

    /// Whether piece p may cross hop h in step t of `steps` at all: its sender can hold it by
    /// then, and its receiver is not its source (which never needs it). Others are fixed to 0.
    fn useful(&self, p: usize, h: usize, t: u32, steps: u32) -> bool {
        let hop = &self.hops.hops[h];
        t < steps && self.dist[p][hop.from.index()] <= t && hop.to != self.pieces[p].1
    }

    /// Number of 0-1 variables of the program with `steps` steps.
    pub fn variables(&self, steps: u32) -> usize {
        (0..self.pieces.len()).map(|p| (0..self.hops.hops.len()).map(|h| (0..steps).filter(|&t| self.useful(p, h, t, steps)).count()).sum::<usize>()).sum()
    }

    /// Steps that always suffice: every piece to every rank one hop at a time, one after another.
    pub fn sequential_steps(&self) -> u64 {
        self.pieces.iter().enumerate().map(|(p, _)| self.ranks.iter().map(|r| u64::from(self.dist[p][r.index()])).sum::<u64>()).sum()
    }

    /// Writes the program for `steps` steps into `backend`.
    pub fn encode<'s>(&'s self, backend: &mut dyn Backend, steps: u32) -> MulticastProgram<'s> {
        let (np, nh, nt) = (self.pieces.len(), self.hops.hops.len(), steps as usize);
        let mut sends = vec![None; np * nh * nt];
        for p in 0..np {
            for h in 0..nh {
                for t in 0..steps {
                    if self.useful(p, h, t, steps) {
                        sends[(p * nh + h) * nt + t as usize] = Some(backend.add_bool());
                    }
                }
            }
        }
        let program = MulticastProgram { instance: self, steps, sends };
        program.one_piece_per_link_per_step(backend);
        program.send_only_what_is_held(backend);
        program.every_rank_receives_once(backend);
        program
    }
}

/// The program for one horizon: the send variables of every (piece, hop, step).
pub struct MulticastProgram<'a> {
    instance: &'a Multicast,
    steps: u32,
    sends: Vec<Option<Var>>,
}

impl MulticastProgram<'_> {
    /// `x[p, h, t]`, or `None` where it is fixed to 0.
    fn send(&self, p: usize, h: usize, t: u32) -> Option<Var> {
        self.sends[(p * self.instance.hops.hops.len() + h) * self.steps as usize + t as usize]
    }

    /// docs/design/MODEL.md section 3: "a link carries at most one piece per step" (and rule 2 on
    /// every link of a hop's path); or one per direction, for a translation-invariant schedule.
    fn one_piece_per_link_per_step(&self, backend: &mut dyn Backend) {
        for on_link in &self.instance.shared {
            for t in 0..self.steps {
                let terms: Vec<Term> =
                    (0..self.instance.pieces.len()).flat_map(|p| on_link.iter().filter_map(move |&h| self.send(p, h, t))).map(|x| (x, 1)).collect();
                if terms.len() > 1 {
                    backend.add_linear_le(&terms, 1);
                }
            }
        }
    }

    /// Rule 3: the sender holds the piece at the start of the step: it is the source, or the
    /// piece arrived in an earlier step. One arrival serves every hop out of it (a held piece may
    /// go out on several links in one step).
    fn send_only_what_is_held(&self, backend: &mut dyn Backend) {
        let hops = &self.instance.hops;
        for (p, &(_, source)) in self.instance.pieces.iter().enumerate() {
            for (h, hop) in hops.hops.iter().enumerate() {
                if hop.from == source {
                    continue;
                }
                for t in 0..self.steps {
                    let Some(x) = self.send(p, h, t) else { continue };
                    // x <= arrivals at the sender before t
                    let mut terms: Vec<Term> = vec![(x, 1)];
                    terms.extend((0..t).flat_map(|s| hops.into[hop.from.index()].iter().filter_map(move |&g| self.send(p, g, s))).map(|y| (y, -1)));
                    backend.add_linear_le(&terms, 0);
                }
            }
        }
    }

    /// Rule 5: every rank other than the source ends with the piece; it arrives exactly once.
    fn every_rank_receives_once(&self, backend: &mut dyn Backend) {
        let hops = &self.instance.hops;
        for (p, &(_, source)) in self.instance.pieces.iter().enumerate() {
            for &v in self.instance.ranks.iter().filter(|&&v| v != source) {
                let terms: Vec<Term> =
                    (0..self.steps).flat_map(|t| hops.into[v.index()].iter().filter_map(move |&h| self.send(p, h, t))).map(|x| (x, 1)).collect();
                backend.add_linear_eq(&terms, 1);
            }
        }
    }

    /// The schedule of a solution: one `copy` per send (all_gather), or the sends reversed in
    /// time as `reduce`s over the original hops (reduce_scatter). Empty steps are dropped.
    pub fn decode(&self, model: &Model) -> Vec<Step> {
        let hops = &self.instance.hops;
        let op = if self.instance.reducing { Op::Reduce } else { Op::Copy };
        let mut steps: Vec<Step> = (0..self.steps)
            .map(|t| {
                let mut step = Step::default();
                for (p, &(piece, _)) in self.instance.pieces.iter().enumerate() {
                    for (h, hop) in hops.hops.iter().enumerate() {
                        if self.send(p, h, t).is_some_and(|x| model.value(x) == 1) {
                            step.transfers.push(Transfer { path: hop.path.clone(), op, pieces: vec![piece] });
                        }
                    }
                }
                step
            })
            .filter(|s| !s.transfers.is_empty())
            .collect();
        if self.instance.reducing {
            steps.reverse();
        }
        steps
    }
}
