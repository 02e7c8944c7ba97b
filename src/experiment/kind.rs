//! The seam between the runner and a scenario kind.
//!
//! Everything the runner, `--plan`, the memory budget, shards, `merge` and
//! `reproduce` need from a kind is one [`Experiment`] implementation, and a
//! [`Scenario`] reaches its kind's implementation in one place: [`of`] (and
//! [`of_mut`] for `--plan`'s cut-down copy). The unit loop, the journal and
//! the record encoding are the kind-independent part (see
//! [`super::tasks`] and [`super::units`]).
//!
//! Adding a kind: a folder under `experiment/` with its `impl Experiment`,
//! its scenario struct and parser under `scenario/` (one enum variant, one
//! parse arm), one arm in [`of`] and [`of_mut`], and a figure
//! [`Layout`](crate::report::figures::Layout).

use anyhow::Result;

use super::units::Driver;
use super::{Outcome, Plan, RawResult, RunOptions};
use crate::data::{DataCache, DatasetName};
use crate::scenario::Scenario;

/// What a scenario kind provides: its units, what they cost, how they run
/// and how their records become tables.
///
/// A unit is one trial at one point (one mantissa width for precision
/// runs); units are independent, so any subset of them (a shard, a resumed
/// remainder) can run alone and their records be combined later.
pub(crate) trait Experiment: Sync {
    /// Points and trials per point, counted without listing the units (the
    /// memory budget counts them before anything is allocated).
    fn points_and_trials(&self) -> (u64, u64);

    /// A readable name for every unit, in unit order.
    fn unit_names(&self) -> Vec<String>;

    /// The relative expected cost of every unit, in unit order: how shards
    /// are balanced, and how `--plan` extrapolates from the unit it times.
    fn unit_costs(&self) -> Vec<f64>;

    /// The datasets the scenario trains on (what `reproduce` checks for
    /// before it starts).
    fn datasets(&self) -> Vec<DatasetName>;

    /// Estimated bytes the run holds beyond one record per unit and one
    /// summary row per point (curves, logs, the unperturbed run's metrics);
    /// see [`super::budget::footprint`].
    fn extra_bytes(&self) -> u64;

    /// Runs the units `driver` assigns to this run and returns their records
    /// with the context they share.
    fn run_raw(
        &self,
        opts: &RunOptions,
        cache: &DataCache,
        driver: &Driver<'_>,
    ) -> Result<RawResult>;

    /// Builds the output tables from the records of every unit.
    fn tables(&self, raw: &RawResult) -> Result<Outcome>;

    /// `--plan` measured the kind's own way, or `None` to time one sample
    /// unit cut down by [`Experiment::cut_work`] and extrapolate by
    /// [`Experiment::unit_costs`] (see [`super::plan`]).
    fn plan(&self, _opts: &RunOptions, _cache: &DataCache) -> Option<Result<Plan>> {
        None
    }

    /// Cuts every unit's work (iterations, updates, expected events) to
    /// about `work`, so that `--plan` never times a huge unit; returns the
    /// factor by which the real units' work is larger (1: nothing cut).
    fn cut_work(&mut self, _work: f64) -> f64 {
        1.0
    }
}

/// The kind of `scenario`: the one place a scenario is dispatched.
pub(crate) fn of(scenario: &Scenario) -> &dyn Experiment {
    match scenario {
        Scenario::Recovery(s) => s,
        Scenario::Perturbation(s) => s,
        Scenario::Precision(s) => s,
        Scenario::Protocol(s) => s,
        Scenario::Faults(s) => s,
    }
}

/// [`of`], to change the scenario (`--plan`'s cut-down sample).
pub(crate) fn of_mut(scenario: &mut Scenario) -> &mut dyn Experiment {
    match scenario {
        Scenario::Recovery(s) => s,
        Scenario::Perturbation(s) => s,
        Scenario::Precision(s) => s,
        Scenario::Protocol(s) => s,
        Scenario::Faults(s) => s,
    }
}
