//! Index checkpoints: the file format (`format.rs`) that recovery loads, and the checkpointer
//! (`writer.rs`) that decides when to write one and writes it.

mod format;
mod writer;

pub use format::{load, Checkpoint, FILE_NAME};
pub use writer::Checkpointer;
