//! What a schedule costs in time (docs/design/MODEL.md section 5).

mod event;
mod sync;

pub use event::{event_cost, EventCost};
pub use sync::{SyncCost, SyncMeter};
