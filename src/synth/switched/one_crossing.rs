//! all_reduce over boards with one crossing of the switches: at small sizes on a fat tree the
//! time of an all_reduce is made of switched path latency (3.1 us on the reference trees), and
//! [`super::board_hierarchical`]'s reduce-scatter then all-gather crosses twice: a piece's final
//! value depends on a chain of two crossings. Here no chain crosses twice:
//!
//! 1. each board sums each *slice* of the vector at its *sender* for that slice: the ranks of a
//!    board at position i (within the boards, below the smallest board's size m) send slice i,
//!    the blocks of the ranks at positions i, i + m, ...; every other board mate reduces its
//!    contribution into the sender;
//! 2. the sender copies the board's sum to the slice's *accumulator*, the board mate at position
//!    i + 1 (mod m) (a copy over the accumulator's own contribution, which the sum holds: rule 4
//!    of docs/design/MODEL.md calls that an update);
//! 3. over B - 1 rounds (B boards), the sender of slice i of board b reduces its board's sum into
//!    the accumulator of slice i of board b + q + 1 (mod B) in round q, each round routed like a
//!    slot of the pairwise all_to_all (every rank sends and receives at most once): the
//!    accumulators end with every board's sum. Sender and accumulator differ so that what a
//!    sender carries stays its board's sum while accumulators receive (rule 3 reads a value at
//!    the start of a step);
//! 4. each accumulator copies the final value of its slice to its board mates.
//!
//! Each rank sends and receives (B - 1)/m of the vector through the switches against 2(B - 1)/(Bm)
//! for the two crossings of the reduce-scatter and the all-gather: more bytes for one path latency
//! less, so it wins at small sizes under the event-driven cost (where a rank's sends of successive
//! steps pipeline), and in the step-synchronous one (each round pays the path latency) only where
//! boards are few (two boards: one round).
//! Pipelined over the pieces of each block like the board-hierarchical collectives
//! ([`super::pipeline`]).

use super::{block_pieces, finish, pipeline, Boards, Phase, SlotRouter};
use crate::collective::{Collective, CollectiveKind, PieceId};
use crate::error::Result;
use crate::schedule::{Op, Step, Transfer};
use crate::topology::Topology;

/// The one-crossing all_reduce's steps (one chain, or chunk `k` of each block per chain when
/// `pipelined` gives the lag of [`super::pipeline`]); `None` off fat trees with boards, for other
/// kinds, or where some board has fewer than two ranks that reach the switches (a sender would be
/// its own accumulator). Senders and accumulators are ranks that reach the switches; board mates
/// whose link is down cross the switches instead ([`Boards`]).
pub(super) fn one_crossing(t: &Topology, c: &Collective, pipelined: Option<usize>) -> Result<Option<Vec<Step>>> {
    if c.kind != CollectiveKind::AllReduce {
        return Ok(None);
    }
    let Some(boards) = Boards::of(t, c) else { return Ok(None) };
    let m = boards.m;
    if m < 2 || boards.groups.len() < 2 {
        return Ok(None);
    }
    let plan = Plan { c, m, slices: slices(&boards.groups, m), boards: &boards };
    let mut router = SlotRouter::new(t);
    let steps = match pipelined {
        Some(lag) => {
            let chains = (0..c.pieces).map(|k| plan.chain(&mut router, Some(k))).collect::<Result<Vec<_>>>()?;
            pipeline(chains, lag)
        }
        None => plan
            .chain(&mut router, None)?
            .into_iter()
            .flat_map(|p| match p {
                Phase::Board(s) => vec![s],
                Phase::Switched(v) => v,
            })
            .collect(),
    };
    Ok(Some(finish(t, steps)))
}

/// The rank indices whose blocks make slice i: those at positions i, i + m, ... of their boards.
fn slices(groups: &[Vec<usize>], m: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); m];
    for g in groups {
        for (pos, &x) in g.iter().enumerate() {
            out[pos % m].push(x);
        }
    }
    out
}

struct Plan<'a> {
    c: &'a Collective,
    /// The smallest board's size: the number of slices.
    m: usize,
    /// Rank indices per slice.
    slices: Vec<Vec<usize>>,
    /// The boards: rank indices, those that reach the switches first, and the paths between mates.
    boards: &'a Boards,
}

impl Plan<'_> {
    fn sender(&self, b: usize, i: usize) -> usize {
        self.boards.groups[b][i]
    }

    fn accumulator(&self, b: usize, i: usize) -> usize {
        self.boards.groups[b][(i + 1) % self.m]
    }

    /// The pieces of slice i: all of its blocks', or piece `k` of each.
    fn pieces(&self, i: usize, k: Option<u32>) -> Vec<PieceId> {
        block_pieces(self.c, &self.slices[i], k)
    }

    fn hop(&self, x: usize, y: usize, op: Op, pieces: Vec<PieceId>) -> Transfer {
        self.boards.hop(x, y, op, pieces)
    }

    /// The four phases for the pieces `k` (module documentation).
    fn chain(&self, router: &mut SlotRouter, k: Option<u32>) -> Result<Vec<Phase>> {
        let nb = self.boards.groups.len();
        let (mut sums, mut handover, mut share) = (Step::default(), Step::default(), Step::default());
        for (b, g) in self.boards.groups.iter().enumerate() {
            for i in 0..self.m {
                let (s, a) = (self.sender(b, i), self.accumulator(b, i));
                for &z in g.iter().filter(|&&z| z != s) {
                    sums.transfers.push(self.hop(z, s, Op::Reduce, self.pieces(i, k)));
                }
                handover.transfers.push(self.hop(s, a, Op::Copy, self.pieces(i, k)));
                for &z in g.iter().filter(|&&z| z != a) {
                    share.transfers.push(self.hop(a, z, Op::Copy, self.pieces(i, k)));
                }
            }
        }
        let mut crossing = Vec::new();
        for q in 0..nb - 1 {
            // (sender, accumulator, slice) of the round's flows.
            let flows: Vec<(usize, usize, usize)> = (0..nb)
                .flat_map(|b| (0..self.m).map(move |i| (b, (b + q + 1) % nb, i)))
                .map(|(b, b2, i)| (self.sender(b, i), self.accumulator(b2, i), i))
                .collect();
            let ends: Vec<_> = flows.iter().map(|&(x, y, _)| (self.c.ranks[x], self.c.ranks[y])).collect();
            for sub in router.route(&ends, q)? {
                let transfers = sub.into_iter().map(|(f, path)| Transfer { path, op: Op::Reduce, pieces: self.pieces(flows[f].2, k) }).collect();
                crossing.push(Step { transfers });
            }
        }
        Ok(vec![Phase::Board(sums), Phase::Board(handover), Phase::Switched(crossing), Phase::Board(share)])
    }
}
