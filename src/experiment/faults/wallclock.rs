//! `[wallclock]` faults scenarios: one [`run_ps`] per unit; loss and accuracy
//! curves on a common time grid, incidents, the time split and the cost.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{CURVE_COLUMNS, INCIDENT_COLUMNS, WALLCLOCK_SUMMARY_COLUMNS, run_units};
use crate::cluster::WorkerDelays;
use crate::experiment::units::Driver;
use crate::experiment::{Outcome, RawResult};
use crate::faults::{PsRun, PsSetup, run_ps};
use crate::model::gradient::{GradientData, GradientModel, GradientVisitor};
use crate::policy::Placement;
use crate::report::{Table, fmt_f64};
use crate::rng::run_seed;
use crate::rng::{Purpose, stream};
use crate::scenario::faults::{FaultsScenario, WallclockConfig};
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
                    run_seed: run_seed(sc.meta.seed, t as u64),
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

pub(super) fn wallclock_tables(
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
