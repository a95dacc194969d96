//! The log: heads that append records to segments, buffer them, flush them and make them
//! durable (group commit), and the fixed set of heads a KVDB writes through.
//!
//! Records the cleaner moves never share a segment with fresh client writes: each media class
//! has a client head and cleaner heads of its own (see `heads.rs`).

mod head;
mod heads;
mod lifecycle;
mod seals;

pub use head::LogHead;
pub use heads::{Heads, HeadsConfig};
pub use lifecycle::Lifecycle;
