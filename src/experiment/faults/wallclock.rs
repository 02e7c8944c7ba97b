//! `[wallclock]` faults scenarios: one [`run_ps`] per unit; loss and accuracy
//! curves on a common time grid, incidents, the time split and the cost.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::run_units;
use crate::cluster::WorkerDelays;
use crate::experiment::same_runs::SameRuns;
use crate::experiment::units::Driver;
use crate::experiment::{Outcome, RawResult};
use crate::faults::{PsRun, PsSetup, run_ps};
use crate::model::gradient::{GradientData, GradientModel, GradientVisitor};
use crate::policy::Placement;
use crate::report::Table;
use crate::report::columns::faults::{
    IncidentRow, WallclockCurveRow, WallclockSummaryRow, WallclockTrialRow,
};
use crate::report::row::Row;
use crate::rng::run_seed;
use crate::rng::{Purpose, stream};
use crate::scenario::faults::{FaultsScenario, WallclockConfig, WallclockSeries};
use crate::stats::Summary;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct ModelContext {
    name: String,
    dataset: String,
    data_label: String,
    data_details: serde_json::Value,
    info: serde_json::Value,
}

pub(super) struct WallclockVisitor<'a> {
    pub(super) sc: &'a FaultsScenario,
    pub(super) w: &'a WallclockConfig,
    pub(super) driver: &'a Driver<'a>,
    /// Run each distinct failure-free run once ([`PsSetup::failure_free_key`];
    /// off with `--no-sharing`).
    pub(super) share: bool,
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
        // Units whose runs have no outage and the same failure-free key run
        // once (the first to ask; one asking meanwhile waits) and the others
        // take its run: with `without_failure`, the strategies that differ
        // only in how they recover share their failure-free runs.
        let failure_free: Option<SameRuns<PsRun>> = self.share.then(SameRuns::new);
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
                    run_seed: run_seed(sc.meta.seed, t as u64),
                    grid: &grid,
                    horizon: w.horizon,
                    outages: &outages,
                    placement: &shard_of,
                };
                let key = failure_free
                    .as_ref()
                    .and_then(|_| setup.failure_free_key())
                    .map(|k| format!("trial {t}: {k}"));
                let run = match (&failure_free, key) {
                    (Some(runs), Some(key)) => {
                        runs.get_or_run(key, || run_ps(model, ws, &mut delays, &setup))
                    }
                    _ => run_ps(model, ws, &mut delays, &setup),
                };
                Ok(serde_json::to_value(run)?)
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

/// One point of a wall-clock scenario and its trials' runs.
struct PointRuns<'a> {
    series: &'a WallclockSeries,
    workers: usize,
    /// `on` with the failures, `off` without them.
    failures: &'static str,
    runs: &'a [PsRun],
    /// Each run's time to the criterion (NaN if never reached).
    time_to_criterion: Vec<f64>,
}

pub(super) fn wallclock_tables(
    sc: &FaultsScenario,
    w: &WallclockConfig,
    runs: &[PsRun],
    ctx: &ModelContext,
) -> Outcome {
    let trials = sc.meta.trials;
    let grid = w.grid();
    let mut summary = WallclockSummaryRow::table();
    let mut curves = WallclockCurveRow::table();
    let mut trial_table = WallclockTrialRow::table();
    let mut incidents = IncidentRow::table();
    for (pi, &(si, workers, failures)) in w.points().iter().enumerate() {
        let point = PointRuns {
            series: &w.series[si],
            workers,
            failures: if failures { "on" } else { "off" },
            runs: &runs[pi * trials..(pi + 1) * trials],
            time_to_criterion: runs[pi * trials..(pi + 1) * trials]
                .iter()
                .map(|r| time_to(&grid, &r.grid_loss, w.criterion))
                .collect(),
        };
        summary.add(&summary_row(sc, w, ctx, &grid, &point));
        add_curves(&mut curves, sc, &grid, &point);
        add_trials(&mut trial_table, &mut incidents, &point);
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

/// The last value of a curve (NaN if empty).
fn last(v: &[f64]) -> f64 {
    v.last().copied().unwrap_or(f64::NAN)
}

/// A point's `summary.csv` row: time to the criterion, final and
/// after-recovery accuracy, gradient and checkpoint counts, the time split,
/// resource use and cost, as means over its trials.
fn summary_row(
    sc: &FaultsScenario,
    w: &WallclockConfig,
    ctx: &ModelContext,
    grid: &[f64],
    point: &PointRuns<'_>,
) -> WallclockSummaryRow {
    let (series, workers, rs) = (point.series, point.workers, point.runs);
    let ttc = &point.time_to_criterion;
    let reached: Vec<f64> = ttc.iter().copied().filter(|v| v.is_finite()).collect();
    // Runs are billed until the criterion (the horizon for runs that never
    // reach it).
    let ends: Vec<f64> = ttc
        .iter()
        .map(|&t| if t.is_finite() { t } else { w.horizon })
        .collect();
    let s = Summary::of(&reached);
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
    let mean = |f: &dyn Fn(&PsRun) -> f64| rs.iter().map(f).sum::<f64>() / rs.len().max(1) as f64;
    let nodes = workers + w.ps_nodes * series.strategy.chain();
    let billed_hours = ends.iter().sum::<f64>() / rs.len().max(1) as f64 / 3600.0;
    let (cost_od, cost_spot) = w.prices.map_or((f64::NAN, f64::NAN), |p| {
        (
            nodes as f64 * billed_hours * p.on_demand,
            nodes as f64 * billed_hours * p.spot,
        )
    });
    // Per-hour billing: whole hours per node and up interval, until `ends`.
    let ps_members = w.ps_nodes * series.strategy.chain();
    let hourly = rs
        .iter()
        .zip(&ends)
        .map(|(r, &end)| r.usage.billed_hours_rounded_up(workers, ps_members, end))
        .sum::<f64>()
        / rs.len().max(1) as f64;
    let (hourly_od, hourly_spot) = w.prices.map_or((f64::NAN, f64::NAN), |p| {
        (hourly * p.on_demand, hourly * p.spot)
    });
    WallclockSummaryRow {
        scenario: sc.meta.name.clone(),
        series: series.name.clone(),
        strategy: series.strategy.name(),
        workers,
        failures: point.failures,
        x_name: "workers",
        x: workers,
        metric: "time_to_criterion",
        trials: rs.len(),
        mean: s.mean,
        std: s.std,
        ci95_low: s.ci95_low,
        ci95_high: s.ci95_high,
        reached: reached.len(),
        final_loss: final_loss.mean,
        final_accuracy: final_acc.mean,
        final_accuracy_ci95_low: final_acc.ci95_low,
        final_accuracy_ci95_high: final_acc.ci95_high,
        accuracy_after_recovery: after_s.mean,
        accuracy_after_recovery_ci95_low: after_s.ci95_low,
        accuracy_after_recovery_ci95_high: after_s.ci95_high,
        recovery_time: Summary::of(&recovery).mean,
        gradients_applied: mean(&|r| r.applied as f64),
        gradients_discarded: mean(&|r| r.discarded as f64),
        gradients_queued: mean(&|r| r.queued as f64),
        checkpoints: mean(&|r| r.checkpoints as f64),
        checkpoints_skipped: mean(&|r| r.checkpoints_skipped as f64),
        solve: mean(&|r| r.split.solve),
        dump: mean(&|r| r.split.dump),
        rework: mean(&|r| r.split.rework),
        restart: mean(&|r| r.split.restart),
        nodes,
        cost_on_demand: cost_od,
        cost_spot,
        worker_busy_node_s: mean(&|r| r.usage.worker_busy),
        worker_idle_node_s: mean(&|r| r.usage.worker_idle),
        ps_up_node_s: mean(&|r| r.usage.ps_up),
        ps_down_node_s: mean(&|r| r.usage.ps_down),
        cost_hourly_on_demand: hourly_od,
        cost_hourly_spot: hourly_spot,
        persist: if series.asynchronous { "async" } else { "sync" },
        model: ctx.name.clone(),
        dataset: ctx.dataset.clone(),
        data: ctx.data_label.clone(),
    }
}

/// A point's `curves.csv` rows: loss and accuracy across its trials at every
/// grid time.
fn add_curves(curves: &mut Table, sc: &FaultsScenario, grid: &[f64], point: &PointRuns<'_>) {
    let rs = point.runs;
    for (gi, &g) in grid.iter().enumerate() {
        let l = Summary::of(&rs.iter().map(|r| r.grid_loss[gi]).collect::<Vec<_>>());
        let a = Summary::of(&rs.iter().map(|r| r.grid_accuracy[gi]).collect::<Vec<_>>());
        curves.add(&WallclockCurveRow {
            scenario: sc.meta.name.clone(),
            series: point.series.name.clone(),
            strategy: point.series.strategy.name(),
            workers: point.workers,
            failures: point.failures,
            time: g,
            trials: rs.len(),
            loss_mean: l.mean,
            loss_ci95_low: l.ci95_low,
            loss_ci95_high: l.ci95_high,
            accuracy_mean: a.mean,
            accuracy_ci95_low: a.ci95_low,
            accuracy_ci95_high: a.ci95_high,
        });
    }
}

/// A point's `trials.csv` rows, and its trials' failures in `incidents.csv`.
fn add_trials(trial_table: &mut Table, incidents: &mut Table, point: &PointRuns<'_>) {
    let series = point.series;
    for (t, r) in point.runs.iter().enumerate() {
        trial_table.add(&WallclockTrialRow {
            series: series.name.clone(),
            strategy: series.strategy.name(),
            workers: point.workers,
            failures: point.failures,
            trial: t,
            time_to_criterion: point.time_to_criterion[t],
            final_loss: last(&r.grid_loss),
            final_accuracy: last(&r.grid_accuracy),
            gradients_applied: r.applied,
            gradients_discarded: r.discarded,
            gradients_queued: r.queued,
            checkpoints: r.checkpoints,
            solve: r.split.solve,
            dump: r.split.dump,
            rework: r.split.rework,
            restart: r.split.restart,
        });
        for i in &r.incidents {
            incidents.add(&IncidentRow {
                series: series.name.clone(),
                workers: point.workers,
                trial: t,
                shard: i.shard,
                failed: i.failed,
                recovered: i.recovered,
                lost: i.lost,
                restored_blocks: i.restored_blocks,
                queued_applied: i.queued_applied,
            });
        }
    }
}
