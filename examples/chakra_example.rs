//! Writes the Chakra traces of a HalfRing all-to-all on a ring of 4 (S = 64 KiB, P = 1).
//!
//! Usage: `cargo run --example chakra_example -- DIR [PREFIX]`. Writes `DIR/PREFIX.<rank>.et` and
//! `DIR/PREFIX.system.json`, and prints the total bytes sent, which
//! `tests/chakra_decode.py DIR PREFIX BYTES 4` checks.

use collsched::write_chakra;
use collsched::{lower, LowerOptions};
use collsched::{torus, TorusParams};
use collsched::{torus_all_to_all, RingAlgorithm, Scheduler};
use collsched::{Collective, CollectiveKind};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: chakra_example DIR [PREFIX]")?);
    let prefix = args.next().unwrap_or_else(|| "a2a".into());
    let t = torus(&TorusParams::uniform(&[4], 32.0, 100.0))?;
    let c = Collective::new(CollectiveKind::AllToAll, t.node_ids().take(t.num_npus()).collect(), 1 << 16, 1, None, &t)?;
    let s = torus_all_to_all(&t, &c, RingAlgorithm::HalfRing, Scheduler::DimRotation)?;
    let programs = lower(&s, &LowerOptions::default())?;
    write_chakra(&dir, &prefix, &programs, &s)?;
    // Every transfer of a ring is one hop between two ranks: one message of its pieces.
    let bytes: i128 =
        s.steps.iter().flat_map(|st| &st.transfers).map(|tr| (s.header.collective.piece_size_at(0) * tr.pieces.len() as i128).ceil().to_integer()).sum();
    println!("{bytes}");
    Ok(())
}
