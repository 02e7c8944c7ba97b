//! Fault-tolerance policies, as data: when failures strike and what they take
//! down ([`failure`], in iterations and in wall-clock time), where blocks live (`placement`), how checkpoints are
//! taken ([`checkpoint`]) and written (`persist`) and how a failure is recovered from (`recovery`).

pub mod checkpoint;
pub mod failure;
pub(crate) mod persist;
pub(crate) mod placement;
pub(crate) mod recovery;

pub use checkpoint::{CheckpointPolicy, EventOrder, RunningCheckpoint, Selector, WriteBudget};
pub(crate) use failure::{FailureTime, LossSpec};
pub(crate) use placement::Placement;
pub(crate) use recovery::Restoration;
pub use recovery::{RecoveryOutcome, RecoveryPolicy};
