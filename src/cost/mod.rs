//! What a schedule costs in time (MODEL.md section 5).

mod sync;

pub use sync::{SyncCost, SyncMeter};
