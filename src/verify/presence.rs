//! Which npus hold each piece of a copy-only collective (rules 3 and 5): one bit per (piece, npu)
//! when that fits, else the holders of every piece as short lists, since a piece of an all-to-all
//! visits a few npus of many (on a 16x16x16 torus at most 25 of 4,096).
//!
//! A piece's first holders sit in a row of 32 bytes of its own (16 npu ids, or 8 past 65,535
//! npus), so that asking whether an npu holds it reads one cache line; the few pieces with more
//! holders keep the rest in a set of (piece, npu) pairs. That is 32 bytes per piece of a pod-scale
//! all-to-all, against 512 bytes of bits.

use super::fast_hash::FastHash;
use std::collections::HashSet;

/// Presence of pieces at npus (module docs).
pub(super) enum Presence {
    /// One bit per (piece, npu): `words` u64 per piece.
    Dense { words: usize, bits: Vec<u64> },
    /// Holder lists with 16-bit npu ids (fewer than 65,535 npus).
    Narrow(Holders<u16, 16>),
    /// Holder lists with 32-bit npu ids.
    Wide(Holders<u32, 8>),
}

impl Presence {
    /// Presence for `pieces` pieces on `npus` npus: bits when they take at most `dense_limit`
    /// bytes, lists otherwise.
    pub fn new(pieces: usize, npus: usize, dense_limit: u128) -> Self {
        let words = npus.div_ceil(64);
        if (pieces as u128) * (words as u128) * 8 <= dense_limit {
            Presence::Dense { words, bits: vec![0; pieces * words] }
        } else if npus < u16::MAX as usize {
            Presence::Narrow(Holders::new(pieces))
        } else {
            Presence::Wide(Holders::new(pieces))
        }
    }

    /// Whether npu `node` holds piece `piece`.
    pub fn holds(&self, piece: usize, node: usize) -> bool {
        match self {
            Presence::Dense { words, bits } => bits[piece * words + node / 64] >> (node % 64) & 1 == 1,
            Presence::Narrow(h) => h.contains(piece, node as u16),
            Presence::Wide(h) => h.contains(piece, node as u32),
        }
    }

    /// Loads the memory that [`Presence::holds`] and [`Presence::insert`] read for `piece` at
    /// `node`. Called over a batch of pieces before they are looked at one by one, its loads do
    /// not wait for each other, so the batch pays about one memory latency instead of one per
    /// piece (the pieces of a pod-scale all-to-all are spread over gigabytes).
    pub fn warm(&self, piece: usize, node: usize) -> u64 {
        match self {
            Presence::Dense { words, bits } => bits[piece * words + node / 64],
            Presence::Narrow(h) => h.rows[piece][0] as u64,
            Presence::Wide(h) => h.rows[piece][0] as u64,
        }
    }

    /// Records that `node` holds `piece`; false if it already did.
    pub fn insert(&mut self, piece: usize, node: usize) -> bool {
        match self {
            Presence::Dense { words, bits } => {
                let word = &mut bits[piece * *words + node / 64];
                let new = *word >> (node % 64) & 1 == 0;
                *word |= 1 << (node % 64);
                new
            }
            Presence::Narrow(h) => h.insert(piece, node as u16),
            Presence::Wide(h) => h.insert(piece, node as u32),
        }
    }
}

/// A node id slot of a holder list; `EMPTY` marks a free slot.
pub(super) trait Slot: Copy + Eq + Into<u64> {
    const EMPTY: Self;
}

impl Slot for u16 {
    const EMPTY: u16 = u16::MAX;
}

impl Slot for u32 {
    const EMPTY: u32 = u32::MAX;
}

/// The holders of every piece: the first `N` in the piece's row, in order of arrival, the rest
/// (of pieces whose row is full) in `more`.
pub(super) struct Holders<T, const N: usize> {
    rows: Vec<[T; N]>,
    more: HashSet<u64, FastHash>,
}

impl<T: Slot, const N: usize> Holders<T, N> {
    fn new(pieces: usize) -> Self {
        Holders { rows: vec![[T::EMPTY; N]; pieces], more: HashSet::default() }
    }

    fn key(piece: usize, node: T) -> u64 {
        ((piece as u64) << 32) | node.into()
    }

    fn contains(&self, piece: usize, node: T) -> bool {
        let row = &self.rows[piece];
        if row.contains(&node) {
            return true;
        }
        row[N - 1] != T::EMPTY && self.more.contains(&Self::key(piece, node))
    }

    fn insert(&mut self, piece: usize, node: T) -> bool {
        let row = &mut self.rows[piece];
        for slot in row.iter_mut() {
            if *slot == node {
                return false;
            }
            if *slot == T::EMPTY {
                *slot = node;
                return true;
            }
        }
        self.more.insert(Self::key(piece, node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every form answers like a set of (piece, npu) pairs.
        #[test]
        fn every_form_is_a_set(ops in proptest::collection::vec((0usize..7, 0usize..300), 0..400)) {
            let mut forms = [Presence::new(7, 300, u128::MAX), Presence::Narrow(Holders::new(7)), Presence::Wide(Holders::new(7))];
            let mut model = std::collections::HashSet::new();
            for (piece, node) in ops {
                let new = model.insert((piece, node));
                for f in forms.iter_mut() {
                    prop_assert_eq!(f.insert(piece, node), new);
                }
            }
            for piece in 0..7 {
                for node in 0..300 {
                    for f in &forms {
                        prop_assert_eq!(f.holds(piece, node), model.contains(&(piece, node)));
                    }
                }
            }
        }
    }

    #[test]
    fn large_instances_get_lists() {
        assert!(matches!(Presence::new(1000, 4096, 1000), Presence::Narrow(_)));
        assert!(matches!(Presence::new(10, 100_000, 0), Presence::Wide(_)));
        assert!(matches!(Presence::new(10, 100, 1 << 30), Presence::Dense { .. }));
    }
}
