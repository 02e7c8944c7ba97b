//! The trial engine.
//!
//! A trial of a SCAR recovery experiment is the unperturbed run up to its
//! failure iteration T, a failure and a recovery, then training until the
//! convergence criterion. Since the prefix is identical to the unperturbed
//! run, the engine runs that once (`baseline`), keeps its trajectory, and
//! forks every trial from x(T) (`trial`). In the iteration domain one
//! iteration is one time unit and checkpoints cost nothing, so the events of a
//! trial (iteration done, checkpoint, failure, recovery) are totally ordered
//! by iteration with the failure at T preceding a checkpoint due at T; the
//! wall-clock simulations (the protocols' and the PS's) are each an
//! `Events` impl run by one event loop, `run_events`, over the general
//! `queue::EventQueue`.

pub(crate) mod baseline;
pub(crate) mod queue;
pub(crate) mod trial;

pub(crate) use baseline::{Baseline, RunStart, run_baseline, run_baselines};
pub(crate) use queue::{EventQueue, Events, run_events};
pub(crate) use trial::restoration;
pub use trial::{
    EngineOptions, Finish, ForkMode, TrialHook, TrialOutcome, TrialSetup, run_cohort,
    run_cohort_on, run_hooked, run_trial,
};

/// When a run counts as converged, and when to give up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Convergence {
    /// A run has converged at the first iteration whose metric is ≤ this.
    pub(crate) criterion: f64,
    /// Runs are cut off (censored) at this iteration.
    pub(crate) max_iterations: usize,
}
