//! Parameter-server failures in wall-clock time: the Daly time cost model,
//! failure processes in time, and the fault-tolerance strategies
//! checkpoint-restart, SCAR, chain replication and the stateless PS
//! (SCAR §4 and §5.5; Cao et al. 2024, *Training Through Failure*).
//!
//! - [`daly`]: `T = T_solve + T_dump + T_rework + T_restart`, Young's and
//!   Daly's optimum checkpoint intervals, and a checkpoint/restart timeline;
//! - [`failures`]: fixed kills, Poisson failures per node, failure traces;
//! - `ps`: a PS and its workers training a real gradient model under a
//!   strategy, with loss and accuracy against wall time;
//! - [`overhead`]: SCAR §5.5 in the iteration domain with time costs
//!   (any block model, e.g. LDA): partial prioritized checkpoints every
//!   iteration vs full checkpoints every C iterations.

pub mod daly;
pub mod failures;
pub mod overhead;
pub(crate) mod ps;
pub(crate) mod usage;

pub use daly::TimeSplit;
pub use failures::{FailureProcess, Outage};
pub use ps::{CheckpointCost, PsRun, PsSetup, Replication, RestoreFrom, Strategy, run_ps};
