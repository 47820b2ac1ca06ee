//! Which npus hold each piece of a copy-only collective (rules 3 and 5): one bit per (piece, npu)
//! when that fits, else the holders of every piece as short lists, since a piece of an all-to-all
//! visits a few npus of many (on a 16x16x16 torus at most 25 of 4,096).
//!
//! The lists live in fixed chunks of 32 bytes linked newest first, so memory follows the
//! holdings: about 40 bytes per piece of a pod-scale all-to-all, against 512 bytes of bits.

const NONE: u32 = u32::MAX;

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
pub(super) trait Slot: Copy + Eq {
    const EMPTY: Self;
}

impl Slot for u16 {
    const EMPTY: u16 = u16::MAX;
}

impl Slot for u32 {
    const EMPTY: u32 = u32::MAX;
}

/// The holders of every piece: chunks of `N` slots, each piece's chunks linked newest first.
pub(super) struct Holders<T, const N: usize> {
    /// Per piece: its newest chunk, or `NONE`.
    head: Vec<u32>,
    chunks: Vec<[T; N]>,
    /// Per chunk: the piece's previous chunk, or `NONE`.
    prev: Vec<u32>,
}

impl<T: Slot, const N: usize> Holders<T, N> {
    fn new(pieces: usize) -> Self {
        Holders { head: vec![NONE; pieces], chunks: Vec::new(), prev: Vec::new() }
    }

    fn contains(&self, piece: usize, node: T) -> bool {
        let mut c = self.head[piece];
        while c != NONE {
            for &x in &self.chunks[c as usize] {
                if x == node {
                    return true;
                }
                if x == T::EMPTY {
                    break;
                }
            }
            c = self.prev[c as usize];
        }
        false
    }

    fn insert(&mut self, piece: usize, node: T) -> bool {
        if self.contains(piece, node) {
            return false;
        }
        let c = self.head[piece];
        if c != NONE {
            if let Some(free) = self.chunks[c as usize].iter_mut().find(|x| **x == T::EMPTY) {
                *free = node;
                return true;
            }
        }
        let mut chunk = [T::EMPTY; N];
        chunk[0] = node;
        let id = u32::try_from(self.chunks.len()).ok().filter(|&i| i != NONE).expect("fewer than 4 billion chunks of holders");
        self.chunks.push(chunk);
        self.prev.push(c);
        self.head[piece] = id;
        true
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
