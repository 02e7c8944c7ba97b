//! Parameter-server failures in wall-clock time: the fault-tolerance
//! strategies checkpoint-restart, SCAR, chain replication and the stateless
//! PS (SCAR §4 and §5.5; Cao et al. 2024, *Training Through Failure*). The
//! failure processes they face are in `policy::failure`, Daly's time model
//! in `theory::daly`.
//!
//! - `ps`: a PS and its workers training a real gradient model under a
//!   strategy, with loss and accuracy against wall time;
//! - [`overhead`]: SCAR §5.5 in the iteration domain with time costs
//!   (any block model, e.g. LDA): partial prioritized checkpoints every
//!   iteration vs full checkpoints every C iterations.

pub mod overhead;
pub(crate) mod ps;
pub(crate) mod usage;

pub use ps::{CheckpointCost, PsRun, PsSetup, Replication, RestoreFrom, Strategy, run_ps};
