//! Failure processes: when failures strike and what they take down.
//!
//! - [`iteration`]: in the iteration domain (SCAR): the iteration T of a
//!   trial's failure ([`FailureTime`]) and the parameter blocks it loses
//!   ([`LossSpec`]);
//! - [`wallclock`]: in wall-clock time (Cao et al., SCAR §5.5): fixed kills,
//!   Poisson failures per node and failure traces ([`FailureProcess`]), each
//!   a list of node [`Outage`]s.

pub(crate) mod iteration;
pub mod wallclock;

pub(crate) use iteration::{FailureTime, LossSpec};
pub(crate) use wallclock::read_trace_rows;
pub use wallclock::{FailureProcess, Outage, exponential};
