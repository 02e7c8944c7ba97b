//! Runs a `protocol` scenario: wall-clock simulations of the K-sync,
//! K-batch-sync, K-async and K-batch-async protocols (Dutta et al. 2018).
//!
//! Every (point, trial) unit is one independent simulation. Trial `t` draws
//! worker w's delays from `rng::stream(seed, Delay, t, w)` and its minibatches
//! (or gradient noise) from the run seed of trial `t`, whatever the point:
//! common random numbers, so protocols and K are compared on the same
//! delays.
//!
//! - Runtime scenarios: time per iteration = (t_{W+N} − t_W)/N for W warm-up
//!   and N measured updates, averaged over trials with a Student-t 95% CI, next
//!   to the closed forms and bounds of [`crate::theory::dutta`].
//! - Training scenarios: the loss on a common time grid (mean and CI per grid
//!   time across trials), the error floor (mean loss over the last
//!   `floor_window` of the horizon) next to the K-sync theory where it exists,
//!   staleness histograms and a per-update log.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::budget::{CURVE_POINT_BYTES, LOGGED_UPDATE_BYTES, ROW_BYTES, expected_updates, mul};
use super::kind::Experiment;
use super::same_runs::SameRuns;
use super::tasks::decode_records;
use super::units::Driver;
use super::{Outcome, RawResult, RunOptions};
use crate::cluster::training::{Training, TrainingSetup, UpdateLog};
use crate::cluster::{Delay, Protocol, RunStats, Stop, Switch, WorkerDelays, simulate};
use crate::data::{DataCache, DatasetName};
use crate::model::gradient::{
    GradientData, GradientModel, GradientVisitor, build_gradient_and_visit,
};
use crate::report::columns::protocol::{
    CurveRow, StalenessRow, TrainingSummaryRow, TrainingTrialRow, UpdateRow,
};
use crate::report::row::Row;
use crate::report::{Table, fmt_f64};
use crate::rng::run_seed;
use crate::scenario::protocol::{Measure, Point, ProtocolScenario, TrainingConfig};
use crate::stats::Summary;
use crate::theory::dutta;

mod runtime;
mod switches;

/// Columns of a training scenario's `summary.csv`.
pub const TRAINING_SUMMARY_COLUMNS: &[&str] = TrainingSummaryRow::COLUMNS;
use runtime::{RuntimeTrial, runtime_tables, runtime_trial};

impl Experiment for ProtocolScenario {
    fn points_and_trials(&self) -> (u64, u64) {
        (self.points().len() as u64, self.meta.trials as u64)
    }

    fn unit_names(&self) -> Vec<String> {
        unit_names(self)
    }

    fn unit_costs(&self) -> Vec<f64> {
        unit_costs(self)
    }

    fn datasets(&self) -> Vec<DatasetName> {
        match &self.measure {
            Measure::Training(tc) => tc.model.dataset().into_iter().collect(),
            Measure::Runtime(_) => Vec::new(),
        }
    }

    fn extra_bytes(&self) -> u64 {
        let Measure::Training(t) = &self.measure else {
            return 0;
        };
        let (points, trials) = self.points_and_trials();
        let units = mul(points, trials);
        let grid = t.grid_points() as u64;
        // Loss and updates per grid time for every unit, and the curve
        // table's rows per point; the logged updates of the recorded trials.
        let workers = self.workers.iter().copied().max().unwrap_or(1) as u64;
        let logged = mul(points, (t.record_trials as u64).min(trials));
        let updates = expected_updates(
            t.horizon,
            workers,
            &self.compute_time,
            self.communication_time.as_ref(),
        );
        mul(units, mul(grid, 2 * CURVE_POINT_BYTES))
            .saturating_add(mul(points, mul(grid, ROW_BYTES)))
            .saturating_add(mul(logged, mul(updates, LOGGED_UPDATE_BYTES)))
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
        let workers = self.workers.iter().copied().max().unwrap_or(1) as f64;
        let per =
            self.compute_time.mean() + self.communication_time.as_ref().map_or(0.0, |d| d.mean());
        match &mut self.measure {
            Measure::Runtime(rt) => {
                let f = cut((rt.warmup_updates + rt.updates) as f64);
                if f > 1.0 {
                    rt.warmup_updates = (rt.warmup_updates as f64 / f) as u64;
                    rt.updates = ((rt.updates as f64 / f) as u64).max(1);
                }
                f
            }
            Measure::Training(t) => {
                let events = if per.is_finite() && per > 0.0 {
                    t.horizon / per * workers
                } else {
                    1.0
                };
                let f = cut(events);
                t.horizon /= f;
                f
            }
        }
    }
}

/// A readable name for every unit: `series=<label>,P=<p>,K=<k>,trial=<t>`.
pub(crate) fn unit_names(scenario: &ProtocolScenario) -> Vec<String> {
    let trials = scenario.meta.trials;
    scenario
        .points()
        .iter()
        .flat_map(|p| {
            (0..trials).map(move |t| {
                format!(
                    "series={},P={},K={},trial={t}",
                    p.label,
                    p.workers,
                    k_cell(p)
                )
            })
        })
        .collect()
}

/// Expected cost of every unit, for balancing shards: proportional to the
/// number of workers simulated.
pub(crate) fn unit_costs(scenario: &ProtocolScenario) -> Vec<f64> {
    let points = scenario.points();
    units(scenario)
        .iter()
        .map(|&(p, _)| points[p].workers as f64)
        .collect()
}

/// The units of a scenario in output order: (point index, trial).
fn units(scenario: &ProtocolScenario) -> Vec<(usize, usize)> {
    let trials = scenario.meta.trials;
    (0..scenario.points().len())
        .flat_map(|p| (0..trials).map(move |t| (p, t)))
        .collect()
}

/// Runs the units of `scenario` that `driver` assigns to this run.
fn run_raw(
    scenario: &ProtocolScenario,
    opts: &RunOptions,
    cache: &DataCache,
    driver: &Driver<'_>,
) -> Result<RawResult> {
    match &scenario.measure {
        Measure::Runtime(rt) => run_units(
            scenario,
            driver,
            serde_json::json!({ "measure": "runtime" }),
            |pi, t| {
                let points = scenario.points();
                let trial = runtime_trial(scenario, rt, &points[pi], t);
                if !trial.time_per_iteration.is_finite() {
                    anyhow::bail!(
                        "{} at P = {}, trial {t}: the simulated time overflowed ({} s per iteration); \
                         the delays are too long for f64 times",
                        points[pi].label,
                        points[pi].workers,
                        trial.time_per_iteration
                    );
                }
                Ok(serde_json::to_value(trial)?)
            },
        ),
        Measure::Training(tc) => build_gradient_and_visit(
            &tc.model,
            cache,
            &opts.data,
            scenario.meta.seed,
            tc.loss_subsample,
            TrainingVisitor {
                scenario,
                config: tc,
                driver,
                share: opts.share_identical_trials,
            },
        )?,
    }
}

/// Runs the units `driver` assigns with `unit(point, trial)`, journalling
/// them in chunks, and returns them with `context`.
fn run_units(
    scenario: &ProtocolScenario,
    driver: &Driver<'_>,
    context: serde_json::Value,
    unit: impl Fn(usize, usize) -> Result<serde_json::Value> + Sync,
) -> Result<RawResult> {
    let units = units(scenario);
    let (mine, todo) = driver.assign(&unit_costs(scenario));
    let done = driver.run_units(&todo, 8, || (), |_, u| unit(units[u].0, units[u].1))?;
    let records = driver.collect(done, &mine)?;
    Ok(RawResult { context, records })
}

/// The records of every unit, decoded, in unit order.
fn decode<T: serde::de::DeserializeOwned>(
    scenario: &ProtocolScenario,
    raw: &RawResult,
) -> Result<Vec<T>> {
    decode_records(&unit_names(scenario), raw)
}

/// Builds the output tables from the records of every unit.
fn tables(scenario: &ProtocolScenario, raw: &RawResult) -> Result<Outcome> {
    match &scenario.measure {
        Measure::Runtime(rt) => {
            let results: Vec<RuntimeTrial> = decode(scenario, raw)?;
            Ok(runtime_tables(scenario, rt, &results))
        }
        Measure::Training(tc) => {
            let ctx: TrainingContext = serde_json::from_value(raw.context.clone())
                .context("malformed protocol context (was it written by another version?)")?;
            let results: Vec<TrainingTrial> = decode(scenario, raw)?;
            let n = tc.grid_points();
            if let Some(u) = results
                .iter()
                .position(|r| r.grid_loss.len() != n || r.grid_updates.len() != n)
            {
                anyhow::bail!(
                    "malformed record of unit {u}: its curves have {} points, the grid {n}",
                    results[u].grid_loss.len()
                );
            }
            let points = scenario.points();
            Ok(training_tables(
                scenario,
                tc,
                &points,
                &results,
                &tc.grid(),
                &ctx,
            ))
        }
    }
}

/// Facts about the trained model shared by every unit (identical in every shard).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct TrainingContext {
    info: serde_json::Value,
    name: String,
    batch_size: usize,
    dataset: String,
    data_label: String,
    data_details: serde_json::Value,
    known_constants: serde_json::Value,
    hessian_eigenvalues: Option<Vec<f64>>,
    constants: Option<(f64, f64, f64, usize)>,
}

/// The constant communication time, if the communication delay is absent or
/// constant (theory needs it); `None` otherwise.
fn constant_shift(sc: &ProtocolScenario) -> Option<f64> {
    match &sc.communication_time {
        None => Some(0.0),
        Some(Delay::Constant { value }) => Some(*value),
        Some(_) => None,
    }
}

fn describe_comm(sc: &ProtocolScenario) -> String {
    sc.communication_time
        .as_ref()
        .map_or_else(|| "none".to_string(), Delay::describe)
}

fn k_cell(p: &Point) -> String {
    p.k.map_or_else(String::new, |k| k.to_string())
}

// ---------------------------------------------------------------- training

struct TrainingVisitor<'a> {
    scenario: &'a ProtocolScenario,
    config: &'a TrainingConfig,
    driver: &'a Driver<'a>,
    /// Run each distinct run once ([`Protocol::run_at_k_one`]; off with
    /// `--no-sharing`).
    share: bool,
}

/// One training trial.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct TrainingTrial {
    #[serde(with = "crate::report::json_f64::vec")]
    grid_loss: Vec<f64>,
    grid_updates: Vec<u64>,
    histogram: Vec<u64>,
    #[serde(with = "crate::report::json_f64")]
    staleness_mean: f64,
    staleness_max: u64,
    #[serde(with = "crate::report::json_f64")]
    mean_rate: f64,
    #[serde(with = "crate::report::json_f64")]
    stale_distance2: f64,
    #[serde(with = "crate::report::json_f64")]
    last_update_time: f64,
    #[serde(with = "crate::report::json_f64")]
    floor: f64,
    log: Vec<UpdateLog>,
    stats: RunStats,
    /// The K rule's switches (empty without a rule).
    #[serde(default)]
    switches: Vec<Switch>,
}

fn staleness_buckets(workers: usize) -> usize {
    (4 * workers + 1).max(16)
}

impl GradientVisitor for TrainingVisitor<'_> {
    type Output = Result<RawResult>;

    fn visit<M: GradientModel>(self, model: &M, data: &GradientData) -> Result<RawResult> {
        let sc = self.scenario;
        let tc = self.config;
        let points = sc.points();
        let trials = sc.meta.trials;
        let grid = tc.grid();
        let floor_from = tc.horizon * (1.0 - tc.floor_window);
        let _ = trials;
        let units = units(sc);
        let driver = self.driver;
        let (mine, todo) = driver.assign(&unit_costs(sc));
        let run_one = |ws: &mut M::Workspace, pi: usize, t: usize| -> TrainingTrial {
            let p = &points[pi];
            let series = &sc.series[p.series];
            let mut delays = WorkerDelays::new(
                &sc.compute_time,
                sc.communication_time.as_ref(),
                sc.meta.seed,
                t as u64,
                p.workers,
            );
            let mut tr = Training::new(
                model,
                ws,
                p.workers,
                TrainingSetup {
                    eta: tc.eta,
                    staleness_aware: series.staleness_aware,
                    run_seed: run_seed(sc.meta.seed, t as u64),
                    grid: &grid,
                    log_updates: (t < tc.record_trials).then_some(tc.loss_every),
                    staleness_buckets: staleness_buckets(p.workers),
                    k_rule: p.rule,
                },
            );
            let stats = simulate(
                p.workers,
                series.protocol,
                &p.schedule,
                Stop::Time(tc.horizon),
                &mut delays,
                &mut tr,
            );
            tr.finish(tc.horizon);
            let window: Vec<f64> = grid
                .iter()
                .zip(&tr.grid_loss)
                .filter(|(g, _)| **g >= floor_from)
                .map(|(_, l)| *l)
                .collect();
            let (ss, _, sn) = tr.staleness_sum;
            TrainingTrial {
                floor: window.iter().sum::<f64>() / window.len().max(1) as f64,
                grid_loss: std::mem::take(&mut tr.grid_loss),
                grid_updates: std::mem::take(&mut tr.grid_updates),
                histogram: std::mem::take(&mut tr.staleness_histogram),
                staleness_mean: ss / sn.max(1) as f64,
                staleness_max: tr.staleness_max,
                mean_rate: tr.rate_sum.0 / tr.rate_sum.1.max(1) as f64,
                stale_distance2: if tr.stale_distance2_sum.1 > 0 {
                    tr.stale_distance2_sum.0 / tr.stale_distance2_sum.1 as f64
                } else {
                    f64::NAN
                },
                last_update_time: tr.last_update_time(),
                log: std::mem::take(&mut tr.log),
                stats,
                switches: tr.switches().to_vec(),
            }
        };
        // Units that run the same run (K = 1 throughout: the batch variants
        // run as K-sync and K-async, see `Protocol::run_at_k_one`) run once:
        // the first to ask runs it, one asking meanwhile waits, the others
        // take it. Off with `--no-sharing`.
        let same_runs: Option<SameRuns<TrainingTrial>> = self.share.then(SameRuns::new);
        let run_key = |pi: usize, t: usize| -> Option<String> {
            let p = &points[pi];
            let series = &sc.series[p.series];
            if p.rule.is_some() || p.schedule.max_k() != 1 {
                return None;
            }
            // Everything else a run reads of its point and series.
            Some(format!(
                "{:?} {:?} P={} {:?} trial {t}",
                series.protocol.run_at_k_one(),
                series.staleness_aware,
                p.workers,
                p.schedule,
            ))
        };
        let done = driver.run_units(
            &todo,
            4,
            || model.workspace(),
            |ws, u| {
                let (pi, t) = (units[u].0, units[u].1);
                let trial = match (&same_runs, run_key(pi, t)) {
                    (Some(runs), Some(key)) => runs.get_or_run(key, || run_one(ws, pi, t)),
                    _ => run_one(ws, pi, t),
                };
                if !trial.last_update_time.is_finite() {
                    anyhow::bail!(
                        "unit {u}: the simulated time overflowed (last update at {} s); \
                         the delays are too long for f64 times",
                        trial.last_update_time
                    );
                }
                Ok(trial)
            },
        )?;
        let records = driver.collect(done, &mine)?;
        let info = model.info();
        let kc = model.known_constants();
        let context = TrainingContext {
            info: serde_json::to_value(&info)?,
            name: info.name.to_string(),
            batch_size: info.batch_size,
            dataset: data.dataset.clone(),
            data_label: data.label.to_string(),
            data_details: data.details.clone(),
            known_constants: serde_json::to_value(&kc)?,
            hessian_eigenvalues: kc.as_ref().map(|k| k.hessian_eigenvalues.clone()),
            constants: kc.as_ref().map(|k| (k.l, k.c, k.sigma2, k.batch_size)),
        };
        Ok(RawResult {
            context: serde_json::to_value(context)?,
            records,
        })
    }
}

/// The K-sync error-floor theory for point `p`, when the model's constants are
/// known and every gradient of the point is fresh (K-sync, K-batch-sync, or
/// K-async with K = P): (exact, paper bound).
fn floor_theory(
    sc: &ProtocolScenario,
    tc: &TrainingConfig,
    p: &Point,
    ctx: &TrainingContext,
) -> (Option<f64>, Option<f64>) {
    let series = &sc.series[p.series];
    let (Some((l, c, sigma2, batch_size)), Some(eigen), Some(k)) =
        (ctx.constants, ctx.hessian_eigenvalues.as_ref(), p.k)
    else {
        return (None, None);
    };
    let fresh = match series.protocol {
        Protocol::KSync | Protocol::KBatchSync => true,
        Protocol::KAsync => k == p.workers,
        Protocol::KBatchAsync => false,
    };
    if !fresh {
        return (None, None);
    }
    // With fresh gradients the staleness-aware rate is always η_max.
    let eta = series.staleness_aware.map_or(tc.eta, |s| s.eta_max);
    (
        dutta::quadratic_floor_exact(eta, sigma2, k, batch_size, eigen),
        Some(dutta::k_sync_floor_bound(eta, l, c, sigma2, k, batch_size)),
    )
}

/// The summary row of point `p` from its trials `rs` (final loss, error
/// floor and its theory, means of the run statistics).
fn summary_row(
    sc: &ProtocolScenario,
    tc: &TrainingConfig,
    p: &Point,
    rs: &[TrainingTrial],
    ctx: &TrainingContext,
) -> TrainingSummaryRow {
    let series = &sc.series[p.series];
    let protocol = series.protocol.name();
    let final_loss: Vec<f64> = rs
        .iter()
        .map(|r| r.grid_loss.last().copied().unwrap_or(f64::NAN))
        .collect();
    let s = Summary::of(&final_loss);
    let floors: Vec<f64> = rs.iter().map(|r| r.floor).collect();
    let f = Summary::of(&floors);
    let (exact, bound) = floor_theory(sc, tc, p, ctx);
    let mean_of =
        |g: &dyn Fn(&TrainingTrial) -> f64| rs.iter().map(g).sum::<f64>() / rs.len().max(1) as f64;
    let sa = series.staleness_aware;
    TrainingSummaryRow {
        scenario: sc.meta.name.clone(),
        series: p.label.clone(),
        protocol,
        x_name: "k",
        x: p.k,
        metric: "final_loss",
        workers: p.workers,
        k: p.k,
        k_schedule: p.describe_k(),
        staleness_aware_c: sa.map(|s| s.c),
        staleness_aware_eta_max: sa.map(|s| s.eta_max),
        trials: s.n,
        mean: s.mean,
        std: s.std,
        ci95_low: s.ci95_low,
        ci95_high: s.ci95_high,
        floor_mean: f.mean,
        floor_ci95_low: f.ci95_low,
        floor_ci95_high: f.ci95_high,
        floor_theory_exact: exact,
        floor_paper_bound: bound,
        updates: mean_of(&|r| r.stats.updates as f64),
        time_per_update: mean_of(&|r| r.last_update_time / r.stats.updates.max(1) as f64),
        mean_staleness: mean_of(&|r| r.staleness_mean),
        max_staleness: rs.iter().map(|r| r.staleness_max).max().unwrap_or(0),
        mean_learning_rate: mean_of(&|r| r.mean_rate),
        mean_stale_distance2: mean_of(&|r| r.stale_distance2),
        diverged: final_loss.iter().filter(|l| !l.is_finite()).count(),
        model: ctx.name.clone(),
        dataset: ctx.dataset.clone(),
        data: ctx.data_label.clone(),
        eta: tc.eta,
        batch_size: ctx.batch_size,
        horizon: tc.horizon,
        compute_time: sc.compute_time.describe(),
        communication_time: describe_comm(sc),
    }
}

/// Point `p`'s mean loss curve over the time `grid`, with its CIs.
fn add_curve(
    curve: &mut Table,
    sc: &ProtocolScenario,
    p: &Point,
    rs: &[TrainingTrial],
    grid: &[f64],
) {
    let protocol = sc.series[p.series].protocol.name();
    for (gi, &g) in grid.iter().enumerate() {
        let v: Vec<f64> = rs.iter().map(|r| r.grid_loss[gi]).collect();
        let s = Summary::of(&v);
        let u = rs.iter().map(|r| r.grid_updates[gi] as f64).sum::<f64>() / rs.len() as f64;
        curve.add(&CurveRow {
            scenario: sc.meta.name.clone(),
            series: p.label.clone(),
            protocol,
            workers: p.workers,
            k: p.k,
            time: g,
            trials: s.n,
            mean: s.mean,
            std: s.std,
            ci95_low: s.ci95_low,
            ci95_high: s.ci95_high,
            updates_mean: u,
        });
    }
}

/// Point `p`'s trial rows, and the update log of the trials that keep one.
fn add_trials(
    trial_table: &mut Table,
    updates: &mut Table,
    sc: &ProtocolScenario,
    p: &Point,
    rs: &[TrainingTrial],
) {
    let protocol = sc.series[p.series].protocol.name();
    for (t, r) in rs.iter().enumerate() {
        let st = &r.stats;
        trial_table.add(&TrainingTrialRow {
            series: p.label.clone(),
            protocol,
            workers: p.workers,
            k: p.k,
            trial: t,
            final_loss: r.grid_loss.last().copied().unwrap_or(f64::NAN),
            floor: r.floor,
            updates: st.updates,
            time_per_update: r.last_update_time / st.updates.max(1) as f64,
            mean_staleness: r.staleness_mean,
            max_staleness: r.staleness_max,
            mean_learning_rate: r.mean_rate,
            gradients: st.pushed,
            cancelled: st.cancelled,
            events: st.events,
        });
        let join = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(";");
        for u in &r.log {
            let n = u.staleness.len().max(1) as f64;
            updates.add(&UpdateRow {
                series: p.label.clone(),
                workers: p.workers,
                k: p.k,
                trial: t,
                update: u.version,
                time: u.time,
                gradients: u.workers.len(),
                from_workers: join(&mut u.workers.iter().map(|w| w.to_string())),
                staleness: join(&mut u.staleness.iter().map(|s| s.to_string())),
                staleness_mean: u.staleness.iter().sum::<u64>() as f64 / n,
                staleness_max: u.staleness.iter().max().copied().unwrap_or(0),
                learning_rates: join(&mut u.rates.iter().map(|r| fmt_f64(*r))),
                stale_distance2: join(&mut u.distances2.iter().map(|d| fmt_f64(*d))),
                loss: u.loss,
            });
        }
    }
}

/// Point `p`'s staleness histogram over its trials.
fn add_staleness(staleness: &mut Table, p: &Point, rs: &[TrainingTrial]) {
    let buckets = staleness_buckets(p.workers);
    let mut hist = vec![0u64; buckets];
    for r in rs {
        for (h, c) in hist.iter_mut().zip(&r.histogram) {
            *h += c;
        }
    }
    let total: u64 = hist.iter().sum();
    for (s, &c) in hist.iter().enumerate() {
        if c == 0 {
            continue;
        }
        staleness.add(&StalenessRow {
            series: p.label.clone(),
            workers: p.workers,
            k: p.k,
            staleness: s,
            or_more: s + 1 == buckets,
            count: c,
            fraction: c as f64 / total as f64,
        });
    }
}

#[allow(clippy::too_many_arguments)]
fn training_tables(
    sc: &ProtocolScenario,
    tc: &TrainingConfig,
    points: &[Point],
    results: &[TrainingTrial],
    grid: &[f64],
    ctx: &TrainingContext,
) -> Outcome {
    let trials = sc.meta.trials;
    let by_point: Vec<&[TrainingTrial]> = results.chunks(trials).collect();
    let mut summary = TrainingSummaryRow::table();
    let mut curve = CurveRow::table();
    let mut trial_table = TrainingTrialRow::table();
    let mut updates = UpdateRow::table();
    let mut staleness = StalenessRow::table();
    for (pi, p) in points.iter().enumerate() {
        let rs = by_point[pi];
        summary.add(&summary_row(sc, tc, p, rs, ctx));
        add_curve(&mut curve, sc, p, rs, grid);
        add_trials(&mut trial_table, &mut updates, sc, p, rs);
        add_staleness(&mut staleness, p, rs);
    }
    let events: u64 = results.iter().map(|r| r.stats.events).sum();
    let gradients: u64 = results.iter().map(|r| r.stats.pushed).sum();
    let mut extra = vec![
        ("loss_vs_time.csv".into(), curve),
        ("updates.csv".into(), updates),
        ("staleness.csv".into(), staleness),
    ];
    let sw: Vec<Vec<&[Switch]>> = by_point
        .iter()
        .map(|rs| rs.iter().map(|r| r.switches.as_slice()).collect())
        .collect();
    if let Some(t) = switches::switch_table(sc, points, &sw) {
        extra.push((switches::SWITCHES_CSV.into(), t));
    }
    Outcome {
        summary,
        trials: trial_table,
        extra,
        data: ctx.data_details.clone(),
        details: json!({
            "measure": "training",
            "model": ctx.info,
            "known_constants": ctx.known_constants,
            "grid_points": grid.len(),
            "floor_window_from": tc.horizon * (1.0 - tc.floor_window),
            "simulated_events": events,
            "gradients_computed": gradients,
        }),
    }
}
