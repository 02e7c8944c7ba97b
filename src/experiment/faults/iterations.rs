//! `[iterations]` faults scenarios: one failure timeline per unit after the
//! unperturbed run; rework and total time compared between series.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::run_units;
use crate::experiment::same_runs::SameRuns;
use crate::experiment::units::Driver;
use crate::experiment::{Outcome, RawResult};
use crate::faults::overhead::{IterationCosts, IterationFailure, IterationRun, run_iterations};
use crate::model::{DataUsed, Model, ModelVisitor};
use crate::policy::{Placement, RecoveryPolicy};
use crate::report::Table;
use crate::report::columns::faults::{
    ComparisonRow, IterationsCurveRow, IterationsSummaryRow, IterationsTrialRow,
};
use crate::report::row::Row;
use crate::rng::run_seed;
use crate::rng::{Purpose, stream};
use crate::scenario::faults::{FaultsScenario, IterationsConfig};
use crate::stats::Summary;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct IterationsContext {
    #[serde(with = "crate::report::json_f64")]
    criterion: f64,
    baseline_iterations: usize,
    no_failure: Vec<IterationRun>,
    name: String,
    dataset: String,
    data_label: String,
    data_details: serde_json::Value,
}

pub(super) struct IterationsVisitor<'a> {
    pub(super) sc: &'a FaultsScenario,
    pub(super) cfg: &'a IterationsConfig,
    pub(super) driver: &'a Driver<'a>,
    /// Run a series' trials once when they cannot differ (see
    /// [`IterationsVisitor::visit`]); off with `--no-sharing`.
    pub(super) share: bool,
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
        let seed = run_seed(sc.meta.seed, 0);
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
        // A series that recovers everything from full checkpoints written
        // synchronously runs the same timeline in every trial: the trials
        // differ only in the lost blocks (full recovery restores every block;
        // a synchronous write has finished before any failure, so none is
        // lost unpersisted) and in the selection stream (a full checkpoint
        // draws nothing). Its trials run once (the first to ask; one asking
        // meanwhile waits); `--no-sharing` runs each.
        let trial_free = |p: usize| {
            let s = &cfg.series[p];
            self.share
                && s.recovery == RecoveryPolicy::Full
                && s.checkpoint.is_full()
                && !s.asynchronous
        };
        let shared: SameRuns<IterationRun> = SameRuns::new();
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
                let mut run = || {
                    run_iterations(
                        model,
                        &mut *ws,
                        seed,
                        &s.checkpoint,
                        s.recovery,
                        &costs_of(cfg, s.asynchronous),
                        Some(&failure),
                        criterion,
                        cfg.max_iterations,
                        baseline_iterations,
                        &mut stream(sc.meta.seed, Purpose::CheckpointSelection, t as u64, 0),
                    )
                };
                let run = if trial_free(p) {
                    shared.get_or_run(format!("series {p}"), run)
                } else {
                    run()
                };
                Ok(serde_json::to_value(run)?)
            },
        )
    }
}

pub(super) fn iterations_tables(
    sc: &FaultsScenario,
    cfg: &IterationsConfig,
    runs: &[IterationRun],
    ctx: &IterationsContext,
) -> Outcome {
    let trials = sc.meta.trials;
    let mut summary = IterationsSummaryRow::table();
    let mut trial_table = IterationsTrialRow::table();
    let mut curves = IterationsCurveRow::table();
    for (si, s) in cfg.series.iter().enumerate() {
        let rs = &runs[si * trials..(si + 1) * trials];
        let wall = Summary::of(&rs.iter().map(|r| r.wall_time).collect::<Vec<_>>());
        let mean = |f: &dyn Fn(&IterationRun) -> f64| {
            rs.iter().map(f).sum::<f64>() / rs.len().max(1) as f64
        };
        let it = mean(&|r| r.iterations as f64);
        summary.add(&IterationsSummaryRow {
            scenario: sc.meta.name.clone(),
            series: s.name.clone(),
            recovery: s.recovery.name(),
            checkpoint_interval: s.checkpoint.interval,
            checkpoint_fraction: s.checkpoint.fraction,
            persist: if s.asynchronous { "async" } else { "sync" },
            x_name: "checkpoint_fraction",
            x: s.checkpoint.fraction,
            metric: "wall_time",
            trials: wall.n,
            mean: wall.mean,
            std: wall.std,
            ci95_low: wall.ci95_low,
            ci95_high: wall.ci95_high,
            iterations: it,
            baseline_iterations: ctx.baseline_iterations,
            rework_iterations: it - ctx.baseline_iterations as f64,
            solve: mean(&|r| r.split.solve),
            dump: mean(&|r| r.split.dump),
            rework: mean(&|r| r.split.rework),
            restart: mean(&|r| r.split.restart),
            no_failure_wall_time: ctx.no_failure[si].wall_time,
            checkpoints: mean(&|r| r.checkpoints as f64),
            perturbation_norm: mean(&|r| r.perturbation_norm),
            unpersisted_lost: mean(&|r| r.unpersisted_lost as f64),
            converged: rs.iter().filter(|r| r.converged).count(),
            criterion: ctx.criterion,
            model: ctx.name.clone(),
            dataset: ctx.dataset.clone(),
            data: ctx.data_label.clone(),
        });
        for (t, r) in rs.iter().enumerate() {
            trial_table.add(&IterationsTrialRow {
                series: s.name.clone(),
                trial: t,
                wall_time: r.wall_time,
                iterations: r.iterations,
                converged: r.converged,
                solve: r.split.solve,
                dump: r.split.dump,
                rework: r.split.rework,
                restart: r.split.restart,
                checkpoints: r.checkpoints,
                perturbation_norm: r.perturbation_norm,
                unpersisted_lost: r.unpersisted_lost,
            });
        }
        mean_curve(&mut curves, &sc.meta.name, &s.name, rs);
    }
    Outcome {
        summary,
        trials: trial_table,
        extra: vec![
            ("curves.csv".into(), curves),
            ("comparison.csv".into(), paired_with_full(cfg, runs, trials)),
        ],
        data: ctx.data_details.clone(),
        details: json!({
            "measure": "iterations",
            "criterion": ctx.criterion,
            "baseline_iterations": ctx.baseline_iterations,
        }),
    }
}

/// A series' mean curve by iteration, while every trial still has that
/// iteration.
fn mean_curve(curves: &mut Table, scenario: &str, series: &str, rs: &[IterationRun]) {
    let len = rs.iter().map(|r| r.curve_time.len()).min().unwrap_or(0);
    for k in 0..len {
        let m = Summary::of(&rs.iter().map(|r| r.curve_metric[k]).collect::<Vec<_>>());
        curves.add(&IterationsCurveRow {
            scenario: scenario.to_string(),
            series: series.to_string(),
            iteration: k,
            trials: rs.len(),
            time_mean: rs.iter().map(|r| r.curve_time[k]).sum::<f64>() / rs.len() as f64,
            metric_mean: m.mean,
            metric_ci95_low: m.ci95_low,
            metric_ci95_high: m.ci95_high,
        });
    }
}

/// Every series paired by trial against the first full-recovery series
/// (empty when there is none): the time and iterations each saves.
fn paired_with_full(cfg: &IterationsConfig, runs: &[IterationRun], trials: usize) -> Table {
    let mut comparison = ComparisonRow::table();
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
            let quantities: [(&'static str, Quantity); 4] = [
                ("rework_time_saved", &|r| r.split.rework),
                ("total_time_saved", &|r| r.wall_time),
                ("dump_time_saved", &|r| r.split.dump),
                ("iterations_saved", &|r| r.iterations as f64),
            ];
            for (q, f) in quantities {
                let d: Vec<f64> = refs.iter().zip(rs).map(|(a, b)| f(a) - f(b)).collect();
                let x = Summary::of(&d);
                comparison.add(&ComparisonRow {
                    series: s.name.clone(),
                    reference: cfg.series[reference].name.clone(),
                    quantity: q,
                    trials: x.n,
                    mean: x.mean,
                    std: x.std,
                    ci95_low: x.ci95_low,
                    ci95_high: x.ci95_high,
                });
            }
        }
    }
    comparison
}

/// One per-run quantity compared between series.
type Quantity = &'static dyn Fn(&IterationRun) -> f64;
