//! `[iterations]` faults scenarios: one failure timeline per unit after the
//! unperturbed run; rework and total time compared between series.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{COMPARISON_COLUMNS, ITERATIONS_SUMMARY_COLUMNS, run_units};
use crate::experiment::units::Driver;
use crate::experiment::{Outcome, RawResult};
use crate::faults::overhead::{IterationCosts, IterationFailure, IterationRun, run_iterations};
use crate::model::{DataUsed, Model, ModelVisitor};
use crate::policy::{Placement, RecoveryPolicy};
use crate::report::{Table, fmt_f64};
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

pub(super) fn iterations_tables(
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
