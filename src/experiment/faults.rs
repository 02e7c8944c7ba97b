//! Runs a `faults` scenario (PS failures in wall-clock time).
//!
//! Units are (point, trial). Trial `t` draws the same worker delays, failure
//! times, block placement and minibatch order at every point (common random
//! numbers), so strategies are compared on the same randomness.
//!
//! - `[wallclock]`: one [`run_ps`] per unit; curves of loss and accuracy on a
//!   common time grid with 95% CIs across trials (`curves.csv`), failures and
//!   recoveries (`incidents.csv`), the time split and the currency cost.
//! - `[iterations]`: the unperturbed run (context) sets the criterion and B;
//!   one failure timeline per unit; `comparison.csv` gives the rework and total
//!   time each series saves against the first full-recovery series (paired by trial).
//! - `[interval]`: one unit runs every interval on the same failure times;
//!   `optimum.csv` puts the simulated best interval next to Young's and Daly's.

use anyhow::{Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::units::Driver;
use super::{Outcome, RawResult, RunOptions};
use crate::cluster::WorkerDelays;
use crate::data::DataCache;
use crate::faults::daly::{self, TimeSplit};
use crate::faults::overhead::{IterationCosts, IterationFailure, IterationRun, run_iterations};
use crate::faults::{PsRun, PsSetup, run_ps};
use crate::model::gradient::{
    GradientData, GradientModel, GradientVisitor, build_gradient_and_visit,
};
use crate::model::{DataUsed, Model, ModelVisitor, build_and_visit};
use crate::policy::{Placement, RecoveryPolicy};
use crate::report::{Table, fmt_f64};
use crate::rng::{Purpose, stream, stream_key};
use crate::scenario::faults::{
    FaultsMeasure, FaultsScenario, IntervalConfig, IterationsConfig, WallclockConfig,
};
use crate::stats::Summary;

/// Columns of a wall-clock scenario's `summary.csv`.
pub const WALLCLOCK_SUMMARY_COLUMNS: &[&str] = &[
    "scenario",
    "series",
    "strategy",
    "workers",
    "failures",
    "x_name",
    "x",
    "metric",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "reached",
    "final_loss",
    "final_accuracy",
    "final_accuracy_ci95_low",
    "final_accuracy_ci95_high",
    "accuracy_after_recovery",
    "accuracy_after_recovery_ci95_low",
    "accuracy_after_recovery_ci95_high",
    "recovery_time",
    "gradients_applied",
    "gradients_discarded",
    "gradients_queued",
    "checkpoints",
    "checkpoints_skipped",
    "solve",
    "dump",
    "rework",
    "restart",
    "nodes",
    "cost_on_demand",
    "cost_spot",
    "worker_busy_node_s",
    "worker_idle_node_s",
    "ps_up_node_s",
    "ps_down_node_s",
    "cost_hourly_on_demand",
    "cost_hourly_spot",
    "persist",
    "model",
    "dataset",
    "data",
];

/// Columns of `curves.csv`.
pub const CURVE_COLUMNS: &[&str] = &[
    "scenario",
    "series",
    "strategy",
    "workers",
    "failures",
    "time",
    "trials",
    "loss_mean",
    "loss_ci95_low",
    "loss_ci95_high",
    "accuracy_mean",
    "accuracy_ci95_low",
    "accuracy_ci95_high",
];

/// Columns of `incidents.csv`.
pub const INCIDENT_COLUMNS: &[&str] = &[
    "series",
    "workers",
    "trial",
    "shard",
    "failed",
    "recovered",
    "lost",
    "restored_blocks",
    "queued_applied",
];

/// Columns of an iterations scenario's `summary.csv`.
pub const ITERATIONS_SUMMARY_COLUMNS: &[&str] = &[
    "scenario",
    "series",
    "recovery",
    "checkpoint_interval",
    "checkpoint_fraction",
    "persist",
    "x_name",
    "x",
    "metric",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "iterations",
    "baseline_iterations",
    "rework_iterations",
    "solve",
    "dump",
    "rework",
    "restart",
    "no_failure_wall_time",
    "checkpoints",
    "perturbation_norm",
    "unpersisted_lost",
    "converged",
    "criterion",
    "model",
    "dataset",
    "data",
];

/// Columns of `comparison.csv`.
pub const COMPARISON_COLUMNS: &[&str] = &[
    "series",
    "reference",
    "quantity",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
];

/// Columns of an interval scenario's `summary.csv`.
pub const INTERVAL_SUMMARY_COLUMNS: &[&str] = &[
    "scenario",
    "series",
    "mtbf",
    "x_name",
    "x",
    "factor",
    "metric",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "expected_exact",
    "daly_closed_form",
    "failures",
    "solve",
    "dump",
    "rework",
    "restart",
];

/// Columns of `optimum.csv`.
pub const OPTIMUM_COLUMNS: &[&str] = &[
    "mtbf",
    "checkpoint_time",
    "restart_time",
    "solve_time",
    "young",
    "daly_first_order",
    "daly_higher_order",
    "formula_minimum",
    "simulated_best",
    "simulated_best_wall",
    "simulated_best_ci95_low",
    "simulated_best_ci95_high",
    "wall_at_daly",
    "wall_at_daly_ci95_low",
    "wall_at_daly_ci95_high",
    "paired_excess_at_daly",
    "paired_excess_ci95_low",
    "paired_excess_ci95_high",
    "daly_agrees",
];

/// Readable unit names, in unit order.
pub fn unit_names(sc: &FaultsScenario) -> Vec<String> {
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
pub fn unit_costs(sc: &FaultsScenario) -> Vec<f64> {
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
    let done: Vec<Vec<(usize, serde_json::Value)>> = todo
        .par_chunks(2)
        .map_init(
            &init,
            |ws, chunk| -> Result<Vec<(usize, serde_json::Value)>> {
                if driver.cancelled() {
                    return Ok(Vec::new());
                }
                let records = chunk
                    .iter()
                    .map(|&u| Ok((u, unit(ws, units[u].0, units[u].1)?)))
                    .collect::<Result<Vec<_>>>()?;
                driver.finished(&records)?;
                Ok(records)
            },
        )
        .collect::<Result<_>>()?;
    let records = driver.collect(done, &mine)?;
    Ok(RawResult { context, records })
}

fn decode<T: serde::de::DeserializeOwned>(sc: &FaultsScenario, raw: &RawResult) -> Result<Vec<T>> {
    let n = units(sc).len();
    if let Some(missing) = (0..n).find(|u| !raw.records.contains_key(u)) {
        anyhow::bail!(
            "{} of {n} units have no result, e.g. {}",
            (0..n).filter(|u| !raw.records.contains_key(u)).count(),
            unit_names(sc)[missing]
        );
    }
    (0..n)
        .map(|u| {
            serde_json::from_value(raw.records[&u].clone())
                .with_context(|| format!("malformed record of unit {u}"))
        })
        .collect()
}

/// Runs the units of `sc` that `driver` assigns to this run.
pub fn run_raw(
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
            WallclockVisitor { sc, w, driver },
        )?,
        FaultsMeasure::Iterations(i) => build_and_visit(
            &i.model,
            cache,
            &opts.data,
            sc.meta.seed,
            IterationsVisitor { sc, cfg: i, driver },
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
pub fn tables(sc: &FaultsScenario, raw: &RawResult) -> Result<Outcome> {
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

/// Seed of trial `t`'s minibatches (shared by every point: common random numbers).
pub fn run_seed(sc: &FaultsScenario, trial: usize) -> u64 {
    stream_key(sc.meta.seed, Purpose::DataOrder, trial as u64, 0)
}

// ------------------------------------------------------------ wall clock

#[derive(Clone, Debug, Serialize, Deserialize)]
struct ModelContext {
    name: String,
    dataset: String,
    data_label: String,
    data_details: serde_json::Value,
    info: serde_json::Value,
}

struct WallclockVisitor<'a> {
    sc: &'a FaultsScenario,
    w: &'a WallclockConfig,
    driver: &'a Driver<'a>,
}

impl GradientVisitor for WallclockVisitor<'_> {
    type Output = Result<RawResult>;

    fn visit<M: GradientModel>(self, model: &M, data: &GradientData) -> Result<RawResult> {
        let (sc, w) = (self.sc, self.w);
        let points = w.points();
        let grid = w.grid();
        let blocks = model.dim() / model.block_len().max(1);
        let info = model.info();
        let context = ModelContext {
            name: info.name.to_string(),
            dataset: data.dataset.clone(),
            data_label: data.label.to_string(),
            data_details: data.details.clone(),
            info: serde_json::to_value(&info)?,
        };
        run_units(
            sc,
            self.driver,
            serde_json::to_value(context)?,
            || model.workspace(),
            |ws, p, t| {
                let (si, workers, with_failures) = points[p];
                let series = &w.series[si];
                let chain = series.strategy.chain();
                let outages = if with_failures {
                    w.failure.outages(
                        w.ps_nodes * chain,
                        w.horizon,
                        &mut stream(sc.meta.seed, Purpose::FailureTime, t as u64, 0),
                    )
                } else {
                    Vec::new()
                };
                let placement = Placement::random(
                    blocks,
                    w.ps_nodes,
                    &mut stream(sc.meta.seed, Purpose::Placement, t as u64, 0),
                );
                let shard_of: Vec<usize> = (0..blocks).map(|b| placement.node_of(b)).collect();
                let mut delays = WorkerDelays::new(
                    &w.compute_time,
                    w.communication_time.as_ref(),
                    sc.meta.seed,
                    t as u64,
                    workers,
                );
                let mut checkpoint = w.checkpoint;
                checkpoint.asynchronous = series.asynchronous;
                let setup = PsSetup {
                    workers,
                    ps_nodes: w.ps_nodes,
                    strategy: series.strategy,
                    checkpoint,
                    detection: w.detection,
                    restart: w.restart,
                    join: w.join,
                    eta: w.eta,
                    run_seed: run_seed(sc, t),
                    grid: &grid,
                    horizon: w.horizon,
                    outages: &outages,
                    placement: &shard_of,
                };
                Ok(serde_json::to_value(run_ps(
                    model,
                    ws,
                    &mut delays,
                    &setup,
                ))?)
            },
        )
    }
}

/// First grid time at which `loss ≤ criterion` (NaN if never).
fn time_to(grid: &[f64], loss: &[f64], criterion: f64) -> f64 {
    grid.iter()
        .zip(loss)
        .find(|(_, l)| **l <= criterion)
        .map_or(f64::NAN, |(g, _)| *g)
}

fn wallclock_tables(
    sc: &FaultsScenario,
    w: &WallclockConfig,
    runs: &[PsRun],
    ctx: &ModelContext,
) -> Outcome {
    let trials = sc.meta.trials;
    let grid = w.grid();
    let mut summary = Table::new(WALLCLOCK_SUMMARY_COLUMNS.iter().copied());
    let mut curves = Table::new(CURVE_COLUMNS.iter().copied());
    let mut trial_table = Table::new([
        "series",
        "strategy",
        "workers",
        "failures",
        "trial",
        "time_to_criterion",
        "final_loss",
        "final_accuracy",
        "gradients_applied",
        "gradients_discarded",
        "gradients_queued",
        "checkpoints",
        "solve",
        "dump",
        "rework",
        "restart",
    ]);
    let mut incidents = Table::new(INCIDENT_COLUMNS.iter().copied());
    for (pi, &(si, workers, failures)) in w.points().iter().enumerate() {
        let series = &w.series[si];
        let rs = &runs[pi * trials..(pi + 1) * trials];
        let fl = if failures { "on" } else { "off" };
        let ttc: Vec<f64> = rs
            .iter()
            .map(|r| time_to(&grid, &r.grid_loss, w.criterion))
            .collect();
        let reached: Vec<f64> = ttc.iter().copied().filter(|v| v.is_finite()).collect();
        let s = Summary::of(&reached);
        let last = |v: &Vec<f64>| v.last().copied().unwrap_or(f64::NAN);
        let final_loss = Summary::of(&rs.iter().map(|r| last(&r.grid_loss)).collect::<Vec<_>>());
        let final_acc = Summary::of(
            &rs.iter()
                .map(|r| last(&r.grid_accuracy))
                .collect::<Vec<_>>(),
        );
        // Accuracy at the first grid time at or after the first recovery.
        let after: Vec<f64> = rs
            .iter()
            .filter_map(|r| {
                let rec = r.incidents.first()?.recovered;
                let i = grid.iter().position(|&g| g >= rec)?;
                Some(r.grid_accuracy[i])
            })
            .collect();
        let after_s = Summary::of(&after);
        let recovery: Vec<f64> = rs
            .iter()
            .filter_map(|r| r.incidents.first().map(|i| i.recovered))
            .filter(|v| v.is_finite())
            .collect();
        let mean =
            |f: &dyn Fn(&PsRun) -> f64| rs.iter().map(f).sum::<f64>() / rs.len().max(1) as f64;
        let nodes = workers + w.ps_nodes * series.strategy.chain();
        // Billed until the criterion (the horizon for runs that never reach it).
        let billed_hours = mean(&|r| {
            let t = time_to(&grid, &r.grid_loss, w.criterion);
            if t.is_finite() { t } else { w.horizon }
        }) / 3600.0;
        let (cost_od, cost_spot) = w.prices.map_or((f64::NAN, f64::NAN), |p| {
            (
                nodes as f64 * billed_hours * p.on_demand,
                nodes as f64 * billed_hours * p.spot,
            )
        });
        // Per-hour billing: whole hours per node and up interval, until the
        // criterion (the horizon for runs that never reach it).
        let ps_members = w.ps_nodes * series.strategy.chain();
        let hourly = mean(&|r| {
            let t = time_to(&grid, &r.grid_loss, w.criterion);
            let end = if t.is_finite() { t } else { w.horizon };
            r.usage.billed_hours_rounded_up(workers, ps_members, end)
        });
        let (hourly_od, hourly_spot) = w.prices.map_or((f64::NAN, f64::NAN), |p| {
            (hourly * p.on_demand, hourly * p.spot)
        });
        summary.push(vec![
            sc.meta.name.clone(),
            series.name.clone(),
            series.strategy.name().into(),
            workers.to_string(),
            fl.into(),
            "workers".into(),
            workers.to_string(),
            "time_to_criterion".into(),
            rs.len().to_string(),
            fmt_f64(s.mean),
            fmt_f64(s.std),
            fmt_f64(s.ci95_low),
            fmt_f64(s.ci95_high),
            reached.len().to_string(),
            fmt_f64(final_loss.mean),
            fmt_f64(final_acc.mean),
            fmt_f64(final_acc.ci95_low),
            fmt_f64(final_acc.ci95_high),
            fmt_f64(after_s.mean),
            fmt_f64(after_s.ci95_low),
            fmt_f64(after_s.ci95_high),
            fmt_f64(Summary::of(&recovery).mean),
            fmt_f64(mean(&|r| r.applied as f64)),
            fmt_f64(mean(&|r| r.discarded as f64)),
            fmt_f64(mean(&|r| r.queued as f64)),
            fmt_f64(mean(&|r| r.checkpoints as f64)),
            fmt_f64(mean(&|r| r.checkpoints_skipped as f64)),
            fmt_f64(mean(&|r| r.split.solve)),
            fmt_f64(mean(&|r| r.split.dump)),
            fmt_f64(mean(&|r| r.split.rework)),
            fmt_f64(mean(&|r| r.split.restart)),
            nodes.to_string(),
            fmt_f64(cost_od),
            fmt_f64(cost_spot),
            fmt_f64(mean(&|r| r.usage.worker_busy)),
            fmt_f64(mean(&|r| r.usage.worker_idle)),
            fmt_f64(mean(&|r| r.usage.ps_up)),
            fmt_f64(mean(&|r| r.usage.ps_down)),
            fmt_f64(hourly_od),
            fmt_f64(hourly_spot),
            if series.asynchronous { "async" } else { "sync" }.into(),
            ctx.name.clone(),
            ctx.dataset.clone(),
            ctx.data_label.clone(),
        ]);
        for (gi, &g) in grid.iter().enumerate() {
            let l = Summary::of(&rs.iter().map(|r| r.grid_loss[gi]).collect::<Vec<_>>());
            let a = Summary::of(&rs.iter().map(|r| r.grid_accuracy[gi]).collect::<Vec<_>>());
            curves.push(vec![
                sc.meta.name.clone(),
                series.name.clone(),
                series.strategy.name().into(),
                workers.to_string(),
                fl.into(),
                fmt_f64(g),
                rs.len().to_string(),
                fmt_f64(l.mean),
                fmt_f64(l.ci95_low),
                fmt_f64(l.ci95_high),
                fmt_f64(a.mean),
                fmt_f64(a.ci95_low),
                fmt_f64(a.ci95_high),
            ]);
        }
        for (t, r) in rs.iter().enumerate() {
            trial_table.push(vec![
                series.name.clone(),
                series.strategy.name().into(),
                workers.to_string(),
                fl.into(),
                t.to_string(),
                fmt_f64(ttc[t]),
                fmt_f64(last(&r.grid_loss)),
                fmt_f64(last(&r.grid_accuracy)),
                r.applied.to_string(),
                r.discarded.to_string(),
                r.queued.to_string(),
                r.checkpoints.to_string(),
                fmt_f64(r.split.solve),
                fmt_f64(r.split.dump),
                fmt_f64(r.split.rework),
                fmt_f64(r.split.restart),
            ]);
            for i in &r.incidents {
                incidents.push(vec![
                    series.name.clone(),
                    workers.to_string(),
                    t.to_string(),
                    i.shard.to_string(),
                    fmt_f64(i.failed),
                    fmt_f64(i.recovered),
                    i.lost.to_string(),
                    i.restored_blocks.to_string(),
                    i.queued_applied.to_string(),
                ]);
            }
        }
    }
    Outcome {
        summary,
        trials: trial_table,
        extra: vec![
            ("curves.csv".into(), curves),
            ("incidents.csv".into(), incidents),
        ],
        data: ctx.data_details.clone(),
        details: json!({
            "measure": "wallclock",
            "model": ctx.info,
            "criterion": w.criterion,
            "failure": w.failure.describe(),
        }),
    }
}

// ------------------------------------------------------------ iterations

#[derive(Clone, Debug, Serialize, Deserialize)]
struct IterationsContext {
    #[serde(with = "crate::report::json_f64")]
    criterion: f64,
    baseline_iterations: usize,
    no_failure: Vec<IterationRun>,
    name: String,
    dataset: String,
    data_label: String,
    data_details: serde_json::Value,
}

struct IterationsVisitor<'a> {
    sc: &'a FaultsScenario,
    cfg: &'a IterationsConfig,
    driver: &'a Driver<'a>,
}

fn costs_of(cfg: &IterationsConfig, asynchronous: bool) -> IterationCosts {
    IterationCosts {
        iteration_time: cfg.iteration_time,
        write_time: cfg.write_time,
        cache_time: cfg.cache_time,
        asynchronous,
        detection: cfg.detection,
        restart: cfg.restart,
    }
}

impl ModelVisitor for IterationsVisitor<'_> {
    type Output = Result<RawResult>;

    fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Result<RawResult> {
        let (sc, cfg) = (self.sc, self.cfg);
        // The unperturbed run (shared data order): the criterion is its metric
        // at `criterion_iteration`; B is the first iteration that meets it.
        let seed = run_seed(sc, 0);
        let mut ws = model.workspace();
        let mut state = model.init();
        let mut metrics = Vec::with_capacity(cfg.criterion_iteration + 1);
        for k in 0..=cfg.criterion_iteration {
            metrics.push(model.metric(&state, &mut ws));
            if k < cfg.criterion_iteration {
                model.step(
                    &mut state,
                    crate::model::IterCtx {
                        iteration: k,
                        run_seed: seed,
                    },
                    &mut ws,
                );
            }
        }
        let criterion = metrics[cfg.criterion_iteration];
        let baseline_iterations = metrics
            .iter()
            .position(|&m| m <= criterion)
            .unwrap_or(cfg.criterion_iteration);
        let no_failure = cfg
            .series
            .iter()
            .map(|s| {
                run_iterations(
                    model,
                    &mut ws,
                    seed,
                    &s.checkpoint,
                    s.recovery,
                    &costs_of(cfg, s.asynchronous),
                    None,
                    criterion,
                    cfg.max_iterations,
                    baseline_iterations,
                    &mut stream(sc.meta.seed, Purpose::CheckpointSelection, u64::MAX, 0),
                )
            })
            .collect();
        let context = IterationsContext {
            criterion,
            baseline_iterations,
            no_failure,
            name: model.info().name.to_string(),
            dataset: data.dataset.to_string(),
            data_label: data.provenance.label().to_string(),
            data_details: json!({ "dataset": data.dataset, "provenance": data.provenance, "size_ratio": data.size_ratio }),
        };
        let blocks = model.block_count();
        let lost_nodes =
            ((cfg.lost_fraction * cfg.ps_nodes as f64).round() as usize).clamp(1, cfg.ps_nodes);
        run_units(
            sc,
            self.driver,
            serde_json::to_value(context)?,
            || model.workspace(),
            |ws, p, t| {
                let s = &cfg.series[p];
                // The same lost blocks for every series of trial t.
                let placement = Placement::random(
                    blocks,
                    cfg.ps_nodes,
                    &mut stream(sc.meta.seed, Purpose::Placement, t as u64, 0),
                );
                let nodes: Vec<usize> = (0..lost_nodes).collect();
                let failure = IterationFailure {
                    iteration: cfg.failure_iteration,
                    offset: cfg.failure_offset,
                    lost: placement.blocks_on(&nodes),
                };
                let run = run_iterations(
                    model,
                    ws,
                    seed,
                    &s.checkpoint,
                    s.recovery,
                    &costs_of(cfg, s.asynchronous),
                    Some(&failure),
                    criterion,
                    cfg.max_iterations,
                    baseline_iterations,
                    &mut stream(sc.meta.seed, Purpose::CheckpointSelection, t as u64, 0),
                );
                Ok(serde_json::to_value(run)?)
            },
        )
    }
}

fn iterations_tables(
    sc: &FaultsScenario,
    cfg: &IterationsConfig,
    runs: &[IterationRun],
    ctx: &IterationsContext,
) -> Outcome {
    let trials = sc.meta.trials;
    let mut summary = Table::new(ITERATIONS_SUMMARY_COLUMNS.iter().copied());
    let mut trial_table = Table::new([
        "series",
        "trial",
        "wall_time",
        "iterations",
        "converged",
        "solve",
        "dump",
        "rework",
        "restart",
        "checkpoints",
        "perturbation_norm",
        "unpersisted_lost",
    ]);
    let mut curves = Table::new([
        "scenario",
        "series",
        "iteration",
        "trials",
        "time_mean",
        "metric_mean",
        "metric_ci95_low",
        "metric_ci95_high",
    ]);
    for (si, s) in cfg.series.iter().enumerate() {
        let rs = &runs[si * trials..(si + 1) * trials];
        let wall = Summary::of(&rs.iter().map(|r| r.wall_time).collect::<Vec<_>>());
        let mean = |f: &dyn Fn(&IterationRun) -> f64| {
            rs.iter().map(f).sum::<f64>() / rs.len().max(1) as f64
        };
        let it = mean(&|r| r.iterations as f64);
        summary.push(vec![
            sc.meta.name.clone(),
            s.name.clone(),
            s.recovery.name().into(),
            s.checkpoint.interval.to_string(),
            fmt_f64(s.checkpoint.fraction),
            if s.asynchronous { "async" } else { "sync" }.into(),
            "checkpoint_fraction".into(),
            fmt_f64(s.checkpoint.fraction),
            "wall_time".into(),
            wall.n.to_string(),
            fmt_f64(wall.mean),
            fmt_f64(wall.std),
            fmt_f64(wall.ci95_low),
            fmt_f64(wall.ci95_high),
            fmt_f64(it),
            ctx.baseline_iterations.to_string(),
            fmt_f64(it - ctx.baseline_iterations as f64),
            fmt_f64(mean(&|r| r.split.solve)),
            fmt_f64(mean(&|r| r.split.dump)),
            fmt_f64(mean(&|r| r.split.rework)),
            fmt_f64(mean(&|r| r.split.restart)),
            fmt_f64(ctx.no_failure[si].wall_time),
            fmt_f64(mean(&|r| r.checkpoints as f64)),
            fmt_f64(mean(&|r| r.perturbation_norm)),
            fmt_f64(mean(&|r| r.unpersisted_lost as f64)),
            rs.iter().filter(|r| r.converged).count().to_string(),
            fmt_f64(ctx.criterion),
            ctx.name.clone(),
            ctx.dataset.clone(),
            ctx.data_label.clone(),
        ]);
        for (t, r) in rs.iter().enumerate() {
            trial_table.push(vec![
                s.name.clone(),
                t.to_string(),
                fmt_f64(r.wall_time),
                r.iterations.to_string(),
                r.converged.to_string(),
                fmt_f64(r.split.solve),
                fmt_f64(r.split.dump),
                fmt_f64(r.split.rework),
                fmt_f64(r.split.restart),
                r.checkpoints.to_string(),
                fmt_f64(r.perturbation_norm),
                r.unpersisted_lost.to_string(),
            ]);
        }
        // Mean curve by iteration (while every trial still has that iteration).
        let len = rs.iter().map(|r| r.curve_time.len()).min().unwrap_or(0);
        for k in 0..len {
            let m = Summary::of(&rs.iter().map(|r| r.curve_metric[k]).collect::<Vec<_>>());
            curves.push(vec![
                sc.meta.name.clone(),
                s.name.clone(),
                k.to_string(),
                rs.len().to_string(),
                fmt_f64(rs.iter().map(|r| r.curve_time[k]).sum::<f64>() / rs.len() as f64),
                fmt_f64(m.mean),
                fmt_f64(m.ci95_low),
                fmt_f64(m.ci95_high),
            ]);
        }
    }
    // Paired by trial against the first full-recovery series.
    let mut comparison = Table::new(COMPARISON_COLUMNS.iter().copied());
    if let Some(reference) = cfg
        .series
        .iter()
        .position(|s| s.recovery == RecoveryPolicy::Full)
    {
        let refs = &runs[reference * trials..(reference + 1) * trials];
        for (si, s) in cfg.series.iter().enumerate() {
            if si == reference {
                continue;
            }
            let rs = &runs[si * trials..(si + 1) * trials];
            let quantities: [(&str, Quantity); 4] = [
                ("rework_time_saved", &|r| r.split.rework),
                ("total_time_saved", &|r| r.wall_time),
                ("dump_time_saved", &|r| r.split.dump),
                ("iterations_saved", &|r| r.iterations as f64),
            ];
            for (q, f) in quantities {
                let d: Vec<f64> = refs.iter().zip(rs).map(|(a, b)| f(a) - f(b)).collect();
                let x = Summary::of(&d);
                comparison.push(vec![
                    s.name.clone(),
                    cfg.series[reference].name.clone(),
                    q.into(),
                    x.n.to_string(),
                    fmt_f64(x.mean),
                    fmt_f64(x.std),
                    fmt_f64(x.ci95_low),
                    fmt_f64(x.ci95_high),
                ]);
            }
        }
    }
    Outcome {
        summary,
        trials: trial_table,
        extra: vec![
            ("curves.csv".into(), curves),
            ("comparison.csv".into(), comparison),
        ],
        data: ctx.data_details.clone(),
        details: json!({
            "measure": "iterations",
            "criterion": ctx.criterion,
            "baseline_iterations": ctx.baseline_iterations,
        }),
    }
}

/// One per-run quantity compared between series.
type Quantity = &'static dyn Fn(&IterationRun) -> f64;

// ------------------------------------------------------------ interval

/// One (MTBF, trial) unit: every interval on the same failure times.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct IntervalTrial {
    splits: Vec<TimeSplit>,
    failures: Vec<usize>,
}

/// Failure times of a Poisson process, drawn once and shared by every interval.
struct PoissonTimes {
    rng: crate::rng::SimRng,
    mean: f64,
    times: Vec<f64>,
}

impl PoissonTimes {
    fn after(&mut self, t: f64) -> f64 {
        while self.times.last().is_none_or(|&l| l <= t) {
            let last = self.times.last().copied().unwrap_or(0.0);
            let next = last + crate::faults::failures::exponential(&mut self.rng, self.mean);
            self.times.push(next);
        }
        let i = self.times.partition_point(|&x| x <= t);
        self.times[i]
    }
}

/// τ of factor `f` at MTBF `m`: f × Daly's higher-order optimum.
pub fn interval_tau(cfg: &IntervalConfig, m: f64, f: f64) -> f64 {
    f * daly::daly_interval(cfg.checkpoint_time, m)
}

/// Most segments and failures one simulated timeline may take (ten times
/// the expected number the scenario is allowed, see
/// [`crate::scenario::faults::MAX_TIMELINE_STEPS`]).
const TIMELINE_STEP_LIMIT: usize = 100_000_000;

fn interval_trial(
    sc: &FaultsScenario,
    cfg: &IntervalConfig,
    p: usize,
    t: usize,
) -> Result<IntervalTrial> {
    let m = cfg.mtbf[p];
    let mut times = PoissonTimes {
        rng: stream(sc.meta.seed, Purpose::FailureTime, t as u64, p as u64),
        mean: m,
        times: Vec::new(),
    };
    let mut splits = Vec::new();
    let mut failures = Vec::new();
    for &f in &cfg.factors {
        let tau = interval_tau(cfg, m, f);
        let (s, n) = daly::simulate_checkpoint_restart(
            cfg.solve_time,
            tau,
            cfg.checkpoint_time,
            cfg.restart_time,
            TIMELINE_STEP_LIMIT,
            |x| times.after(x),
        )
        .map_err(|e| anyhow::anyhow!("MTBF {m} s, interval {tau} s, trial {t}: {e}"))?;
        splits.push(s);
        failures.push(n);
    }
    Ok(IntervalTrial { splits, failures })
}

fn interval_tables(sc: &FaultsScenario, cfg: &IntervalConfig, runs: &[IntervalTrial]) -> Outcome {
    let trials = sc.meta.trials;
    let mut summary = Table::new(INTERVAL_SUMMARY_COLUMNS.iter().copied());
    let mut optimum = Table::new(OPTIMUM_COLUMNS.iter().copied());
    let mut trial_table = Table::new([
        "mtbf",
        "trial",
        "factor",
        "interval",
        "wall_time",
        "failures",
    ]);
    let (d, r, w) = (cfg.checkpoint_time, cfg.restart_time, cfg.solve_time);
    for (p, &m) in cfg.mtbf.iter().enumerate() {
        let rs = &runs[p * trials..(p + 1) * trials];
        let name = format!("MTBF {}", fmt_duration(m));
        let mut means = Vec::new();
        let mut sums = Vec::new();
        for (fi, &f) in cfg.factors.iter().enumerate() {
            let tau = interval_tau(cfg, m, f);
            let walls: Vec<f64> = rs.iter().map(|x| x.splits[fi].total()).collect();
            let s = Summary::of(&walls);
            let mean = |g: &dyn Fn(&TimeSplit) -> f64| {
                rs.iter().map(|x| g(&x.splits[fi])).sum::<f64>() / rs.len() as f64
            };
            summary.push(vec![
                sc.meta.name.clone(),
                name.clone(),
                fmt_f64(m),
                "interval".into(),
                fmt_f64(tau),
                fmt_f64(f),
                "wall_time".into(),
                s.n.to_string(),
                fmt_f64(s.mean),
                fmt_f64(s.std),
                fmt_f64(s.ci95_low),
                fmt_f64(s.ci95_high),
                fmt_f64(daly::expected_wall_time(w, tau, d, r, m)),
                fmt_f64(daly::daly_wall_time(w, tau, d, r, m)),
                fmt_f64(rs.iter().map(|x| x.failures[fi] as f64).sum::<f64>() / rs.len() as f64),
                fmt_f64(mean(&|s| s.solve)),
                fmt_f64(mean(&|s| s.dump)),
                fmt_f64(mean(&|s| s.rework)),
                fmt_f64(mean(&|s| s.restart)),
            ]);
            for (t, x) in rs.iter().enumerate() {
                trial_table.push(vec![
                    fmt_f64(m),
                    t.to_string(),
                    fmt_f64(f),
                    fmt_f64(tau),
                    fmt_f64(x.splits[fi].total()),
                    x.failures[fi].to_string(),
                ]);
            }
            means.push(s.mean);
            sums.push(s);
        }
        let best = (0..means.len())
            .min_by(|&a, &b| means[a].total_cmp(&means[b]))
            .unwrap_or(0);
        let at_daly = cfg
            .factors
            .iter()
            .position(|&f| (f - 1.0).abs() < 1e-12)
            .unwrap_or(best);
        // Paired excess of Daly's interval over the best one found (same failure times).
        let excess: Vec<f64> = rs
            .iter()
            .map(|x| x.splits[at_daly].total() - x.splits[best].total())
            .collect();
        let e = Summary::of(&excess);
        let agrees = e.ci95_low <= 0.0 || at_daly == best;
        optimum.push(vec![
            fmt_f64(m),
            fmt_f64(d),
            fmt_f64(r),
            fmt_f64(w),
            fmt_f64(daly::young_interval(d, m)),
            fmt_f64(daly::daly_first_order_interval(d, m)),
            fmt_f64(daly::daly_interval(d, m)),
            fmt_f64(daly::numeric_optimum(d, r, m, 1e-3 * d, 20.0 * m)),
            fmt_f64(interval_tau(cfg, m, cfg.factors[best])),
            fmt_f64(sums[best].mean),
            fmt_f64(sums[best].ci95_low),
            fmt_f64(sums[best].ci95_high),
            fmt_f64(sums[at_daly].mean),
            fmt_f64(sums[at_daly].ci95_low),
            fmt_f64(sums[at_daly].ci95_high),
            fmt_f64(e.mean),
            fmt_f64(e.ci95_low),
            fmt_f64(e.ci95_high),
            agrees.to_string(),
        ]);
    }
    Outcome {
        summary,
        trials: trial_table,
        extra: vec![("optimum.csv".into(), optimum)],
        data: json!({ "dataset": "none" }),
        details: json!({ "measure": "interval" }),
    }
}

/// `600` → `10 min`, `86400` → `1 day`, for legends.
pub fn fmt_duration(s: f64) -> String {
    if s >= 86_400.0 && (s / 86_400.0).fract() == 0.0 {
        let d = s / 86_400.0;
        format!("{d} day{}", if d == 1.0 { "" } else { "s" })
    } else if s >= 3600.0 && (s / 3600.0).fract() == 0.0 {
        format!("{} h", s / 3600.0)
    } else if s >= 60.0 && (s / 60.0).fract() == 0.0 {
        format!("{} min", s / 60.0)
    } else {
        format!("{s} s")
    }
}
