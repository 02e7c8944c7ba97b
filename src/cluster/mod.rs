//! Wall-clock simulation of a parameter server and P workers with random
//! straggler delays under the K-sync, K-batch-sync, K-async and K-batch-async
//! SGD protocols of Dutta, Joshi, Ghosh, Dube and Nagpurkar, *Slow and Stale
//! Gradients Can Win the Race* (AISTATS 2018).
//!
//! - `delay`: delay distributions and per-worker random streams;
//! - `protocol`: the four protocols and a schedule of K over time;
//! - `adaptive`: a rule that raises K when the observed loss plateaus;
//! - [`sim`]: the event loop (which gradients an update uses, which work is
//!   cancelled, what staleness each gradient has);
//! - [`training`]: a real model trained inside the loop;
//! - [`theory`]: the paper's runtime results (order statistics, renewal
//!   theory) and the K-sync error floor.

pub(crate) mod adaptive;
pub(crate) mod delay;
pub(crate) mod protocol;
pub mod sim;
pub mod training;

pub use adaptive::{PlateauRule, PlateauState, Switch};
pub use delay::{Delay, Empirical, WorkerDelays};
pub use protocol::{KSchedule, Protocol};
pub use sim::{DelaySource, Handler, NoModel, RunStats, Stop, simulate};
