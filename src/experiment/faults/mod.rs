//! Runs a `faults` scenario (PS failures in wall-clock time).
//!
//! Units are (point, trial). Trial `t` draws the same worker delays, failure
//! times, block placement and minibatch order at every point (common random
//! numbers), so strategies are compared on the same randomness.
//!
//! - `[wallclock]`: one [`run_ps`](crate::faults::run_ps) per unit; curves of loss and accuracy on a
//!   common time grid with 95% CIs across trials (`curves.csv`), failures and
//!   recoveries (`incidents.csv`), the time split and the currency cost.
//! - `[iterations]`: the unperturbed run (context) sets the criterion and B;
//!   one failure timeline per unit; `comparison.csv` gives the rework and total
//!   time each series saves against the first full-recovery series (paired by trial).
//! - `[interval]`: one unit runs every interval on the same failure times;
//!   `optimum.csv` puts the simulated best interval next to Young's and Daly's.

use anyhow::{Context, Result};
use serde_json::json;

use super::budget::{CURVE_POINT_BYTES, INTERVAL_BYTES, ROW_BYTES, mul};
use super::kind::Experiment;
use super::tasks::decode_records;
use super::units::Driver;
use super::{Outcome, RawResult, RunOptions};
use crate::data::{DataCache, DatasetName};
use crate::faults::PsRun;
use crate::model::build_and_visit;
use crate::model::gradient::build_gradient_and_visit;
use crate::scenario::faults::{FaultsMeasure, FaultsScenario};
use crate::theory::daly;

mod interval;
mod iterations;
mod wallclock;

use interval::{IntervalTrial, interval_tables, interval_trial};
use iterations::{IterationsContext, IterationsVisitor, iterations_tables};
use wallclock::{ModelContext, WallclockVisitor, wallclock_tables};

impl Experiment for FaultsScenario {
    fn points_and_trials(&self) -> (u64, u64) {
        (self.point_count() as u64, self.meta.trials as u64)
    }

    fn unit_names(&self) -> Vec<String> {
        unit_names(self)
    }

    fn unit_costs(&self) -> Vec<f64> {
        unit_costs(self)
    }

    fn datasets(&self) -> Vec<DatasetName> {
        match &self.measure {
            FaultsMeasure::Wallclock(w) => w.model.dataset().into_iter().collect(),
            FaultsMeasure::Iterations(i) => vec![i.model.dataset()],
            FaultsMeasure::Interval(_) => Vec::new(),
        }
    }

    fn extra_bytes(&self) -> u64 {
        let (points, trials) = self.points_and_trials();
        let units = mul(points, trials);
        match &self.measure {
            FaultsMeasure::Wallclock(w) => {
                let grid = w.grid_points() as u64;
                mul(units, mul(grid, 2 * CURVE_POINT_BYTES))
                    .saturating_add(mul(points, mul(grid, ROW_BYTES)))
            }
            FaultsMeasure::Iterations(i) => mul(i.max_iterations as u64, 32),
            FaultsMeasure::Interval(i) => {
                // One time split per interval factor per unit, and a summary
                // row per (MTBF, factor).
                let factors = i.factors.len() as u64;
                mul(units, mul(factors, INTERVAL_BYTES))
                    .saturating_add(mul(points, mul(factors, ROW_BYTES)))
            }
        }
    }

    fn run_raw(
        &self,
        opts: &RunOptions,
        cache: &DataCache,
        driver: &Driver<'_>,
    ) -> Result<RawResult> {
        run_raw(self, opts, cache, driver)
    }

    fn tables(&self, raw: &RawResult) -> Result<Outcome> {
        tables(self, raw)
    }

    fn cut_work(&mut self, work: f64) -> f64 {
        let cut = |w: f64| (w / work).max(1.0);
        match &mut self.measure {
            FaultsMeasure::Wallclock(w) => {
                let workers = w.workers.iter().copied().max().unwrap_or(1) as f64;
                let per =
                    w.compute_time.mean() + w.communication_time.as_ref().map_or(0.0, |d| d.mean());
                let events = if per.is_finite() && per > 0.0 {
                    w.horizon / per * workers
                } else {
                    1.0
                };
                let f = cut(events);
                w.horizon /= f;
                f
            }
            FaultsMeasure::Interval(i) => {
                // Steps of a timeline: segments plus failures (the parser
                // bounds their expected number).
                let steps = i
                    .mtbf
                    .iter()
                    .flat_map(|&m| i.factors.iter().map(move |&f| (m, f)))
                    .map(|(m, f)| {
                        let tau = f * daly::daly_interval(i.checkpoint_time, m);
                        daly::expected_wall_time(
                            i.solve_time,
                            tau,
                            i.checkpoint_time,
                            i.restart_time,
                            m,
                        ) / m
                            + i.solve_time / tau
                    })
                    .fold(1.0, f64::max);
                let f = cut(steps);
                i.solve_time /= f;
                f
            }
            FaultsMeasure::Iterations(_) => 1.0,
        }
    }
}

/// Readable unit names, in unit order.
pub(crate) fn unit_names(sc: &FaultsScenario) -> Vec<String> {
    let trials = sc.meta.trials;
    let labels: Vec<String> = match &sc.measure {
        FaultsMeasure::Wallclock(w) => w
            .points()
            .iter()
            .map(|&(s, p, f)| {
                format!(
                    "series={},P={p},failures={}",
                    w.series[s].name,
                    if f { "on" } else { "off" }
                )
            })
            .collect(),
        FaultsMeasure::Iterations(i) => i
            .series
            .iter()
            .map(|s| format!("series={}", s.name))
            .collect(),
        FaultsMeasure::Interval(i) => i.mtbf.iter().map(|m| format!("mtbf={m}")).collect(),
    };
    labels
        .iter()
        .flat_map(|l| (0..trials).map(move |t| format!("{l},trial={t}")))
        .collect()
}

/// Relative unit costs (for shards): workers × horizon for wall-clock units.
pub(crate) fn unit_costs(sc: &FaultsScenario) -> Vec<f64> {
    let trials = sc.meta.trials;
    match &sc.measure {
        FaultsMeasure::Wallclock(w) => w
            .points()
            .iter()
            .flat_map(|&(_, p, _)| std::iter::repeat_n(p as f64, trials))
            .collect(),
        _ => vec![1.0; sc.point_count() * trials],
    }
}

fn units(sc: &FaultsScenario) -> Vec<(usize, usize)> {
    let trials = sc.meta.trials;
    (0..sc.point_count())
        .flat_map(|p| (0..trials).map(move |t| (p, t)))
        .collect()
}

/// Runs the units `driver` assigns, `unit(point, trial, workspace)`, in parallel.
fn run_units<W: Send>(
    sc: &FaultsScenario,
    driver: &Driver<'_>,
    context: serde_json::Value,
    init: impl Fn() -> W + Sync + Send,
    unit: impl Fn(&mut W, usize, usize) -> Result<serde_json::Value> + Sync + Send,
) -> Result<RawResult> {
    let units = units(sc);
    let (mine, todo) = driver.assign(&unit_costs(sc));
    let done = driver.run_units(&todo, 2, init, |ws, u| unit(ws, units[u].0, units[u].1))?;
    let records = driver.collect(done, &mine)?;
    Ok(RawResult { context, records })
}

fn decode<T: serde::de::DeserializeOwned>(sc: &FaultsScenario, raw: &RawResult) -> Result<Vec<T>> {
    decode_records(&unit_names(sc), raw)
}

/// Runs the units of `sc` that `driver` assigns to this run.
fn run_raw(
    sc: &FaultsScenario,
    opts: &RunOptions,
    cache: &DataCache,
    driver: &Driver<'_>,
) -> Result<RawResult> {
    match &sc.measure {
        FaultsMeasure::Wallclock(w) => build_gradient_and_visit(
            &w.model,
            cache,
            &opts.data,
            sc.meta.seed,
            w.loss_subsample,
            WallclockVisitor {
                sc,
                w,
                driver,
                share: opts.share_identical_trials,
            },
        )?,
        FaultsMeasure::Iterations(i) => build_and_visit(
            &i.model,
            cache,
            &opts.data,
            sc.meta.seed,
            IterationsVisitor {
                sc,
                cfg: i,
                driver,
                share: opts.share_identical_trials,
            },
        )?,
        FaultsMeasure::Interval(i) => run_units(
            sc,
            driver,
            json!({ "measure": "interval" }),
            || (),
            |_, p, t| Ok(serde_json::to_value(interval_trial(sc, i, p, t)?)?),
        ),
    }
}

/// Builds the output tables from every unit's record.
fn tables(sc: &FaultsScenario, raw: &RawResult) -> Result<Outcome> {
    match &sc.measure {
        FaultsMeasure::Wallclock(w) => {
            let ctx: ModelContext =
                serde_json::from_value(raw.context.clone()).context("malformed faults context")?;
            let runs: Vec<PsRun> = decode(sc, raw)?;
            let n = w.grid_points();
            if let Some(u) = runs
                .iter()
                .position(|r| r.grid_loss.len() != n || r.grid_accuracy.len() != n)
            {
                anyhow::bail!(
                    "malformed record of unit {u}: its curves have {} points, the grid {n}",
                    runs[u].grid_loss.len()
                );
            }
            Ok(wallclock_tables(sc, w, &runs, &ctx))
        }
        FaultsMeasure::Iterations(i) => {
            let ctx: IterationsContext =
                serde_json::from_value(raw.context.clone()).context("malformed faults context")?;
            Ok(iterations_tables(sc, i, &decode(sc, raw)?, &ctx))
        }
        FaultsMeasure::Interval(i) => {
            let runs: Vec<IntervalTrial> = decode(sc, raw)?;
            let n = i.factors.len();
            if let Some(u) = runs
                .iter()
                .position(|r| r.splits.len() != n || r.failures.len() != n)
            {
                anyhow::bail!(
                    "malformed record of unit {u}: it has {} time splits for the {n} intervals",
                    runs[u].splits.len()
                );
            }
            Ok(interval_tables(sc, i, &runs))
        }
    }
}
