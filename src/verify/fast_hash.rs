//! A fast hasher for the verifier's maps keyed by (piece, npu).

/// A multiplicative hasher for (piece, node) keys: the keys are not chosen
/// by an adversary, and SipHash would dominate the verifier's time.
#[derive(Clone, Copy, Default)]
pub(super) struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        self.0 ^= self.0 >> 32;
    }
}

pub(super) type FastHash = std::hash::BuildHasherDefault<FastHasher>;
