//! The schedulers of docs/design/ALGORITHMS.md ("Many dimensions"): how many chunks the data is cut into, and
//! in which time slot each chunk runs its one-dimensional phase on each dimension.
//!
//! Phases placed in the same slot run at the same time: they always belong to different
//! dimensions (so their links are disjoint) and to different chunks (so their pieces are).

use super::Scheduler;
use crate::error::{Error, Result};

/// One chunk's one-dimensional all-to-all along one dimension, placed in a time slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Phase {
    /// The time slot (slots run one after another; a slot lasts as long as its longest phase).
    pub slot: usize,
    /// The chunk (chunk c holds the pieces whose part index k has k / halves == c).
    pub chunk: usize,
    /// The dimension, as an index into the dimensions of size > 1.
    pub dim: usize,
    /// The dimensions (same indexing) the chunk has finished before this phase.
    pub done: Vec<usize>,
}

/// The number of chunks and every phase of every chunk over `m` dimensions of size > 1.
pub(crate) fn place(scheduler: Scheduler, m: usize) -> Result<(usize, Vec<Phase>)> {
    // Chunk `chunk` visits the dimensions in `order`, one per slot from `first_slot` on.
    let visits = |chunk: usize, first_slot: usize, order: Vec<usize>| -> Vec<Phase> {
        (0..order.len()).map(|j| Phase { slot: first_slot + j, chunk, dim: order[j], done: order[..j].to_vec() }).collect()
    };
    Ok(match scheduler {
        Scheduler::Sequential => (1, visits(0, 0, (0..m).collect())),
        Scheduler::Pipeline { chunks } => {
            if chunks == 0 {
                return Err(Error::bad("scheduler pipeline: chunks = 0: needs at least one chunk"));
            }
            // Chunk i enters dimension 0 one slot after chunk i-1, so in every slot the active
            // chunks sit in different dimensions.
            (chunks, (0..chunks).flat_map(|i| visits(i, i, (0..m).collect())).collect())
        }
        Scheduler::DimRotation => {
            // Chunk i starts on dimension i: in every slot each dimension carries one chunk.
            let chunks = m.max(1);
            (chunks, (0..m).flat_map(|i| visits(i, 0, (0..m).map(|j| (i + j) % m).collect())).collect())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Every chunk visits every dimension once, in increasing slots; no slot holds a dimension or
    /// a chunk twice.
    fn check(chunks: usize, phases: &[Phase], m: usize) {
        for c in 0..chunks {
            let mine: Vec<&Phase> = phases.iter().filter(|p| p.chunk == c).collect();
            assert_eq!(mine.iter().map(|p| p.dim).collect::<HashSet<_>>().len(), m);
            assert_eq!(mine.len(), m);
            assert!(mine.windows(2).all(|w| w[0].slot < w[1].slot && w[1].done.len() == w[0].done.len() + 1));
        }
        let slots: HashSet<usize> = phases.iter().map(|p| p.slot).collect();
        for s in slots {
            let here: Vec<&Phase> = phases.iter().filter(|p| p.slot == s).collect();
            assert_eq!(here.iter().map(|p| p.dim).collect::<HashSet<_>>().len(), here.len());
            assert_eq!(here.iter().map(|p| p.chunk).collect::<HashSet<_>>().len(), here.len());
        }
    }

    #[test]
    fn schedulers_place_every_phase_once() {
        for m in 0..=4 {
            let (c, p) = place(Scheduler::Sequential, m).unwrap();
            check(c, &p, m);
            assert_eq!((c, p.iter().map(|x| x.slot + 1).max().unwrap_or(0)), (1, m));
            for chunks in 1..=6 {
                let (c, p) = place(Scheduler::Pipeline { chunks }, m).unwrap();
                check(c, &p, m);
                let slots = p.iter().map(|x| x.slot + 1).max().unwrap_or(0);
                assert_eq!(slots, if m == 0 { 0 } else { chunks + m - 1 });
            }
            let (c, p) = place(Scheduler::DimRotation, m).unwrap();
            check(c, &p, m);
            assert_eq!(c, m.max(1));
            // No bubbles: every slot has every dimension busy.
            for s in 0..m {
                assert_eq!(p.iter().filter(|x| x.slot == s).count(), m);
            }
        }
        assert!(place(Scheduler::Pipeline { chunks: 0 }, 2).is_err());
    }
}
