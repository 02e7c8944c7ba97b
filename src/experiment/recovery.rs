//! Runs a `recovery` scenario: SCAR failure trials over series × sweep points.
//!
//! Common random numbers: trial `t` draws its failure time, its lost blocks
//! and its block placement from streams keyed by `t` alone, so every series
//! and point sees the same failure (a larger lost fraction loses a superset
//! of the blocks). Comparisons between series are therefore paired, and
//! Theorem 3.1 (‖δ′‖ ≤ ‖δ‖) can be checked trial by trial.

use anyhow::{Result, anyhow};
use indicatif::ProgressBar;
use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde_json::json;

use super::{Outcome, RunOptions};
use crate::data::DataCache;
use crate::engine::{Baseline, Convergence, TrialOutcome, TrialSetup, run_baseline, run_trial};
use crate::model::{DataUsed, Model, ModelVisitor, build_and_visit};
use crate::policy::{FailureTime, LossSpec, Placement};
use crate::report::{Table, fmt_f64};
use crate::rng::{Purpose, stream, stream_key};
use crate::scenario::{DataOrderMode, RecoveryScenario, recovery::Point};
use crate::stats::Summary;

/// Columns of `summary.csv`.
pub const SUMMARY_COLUMNS: &[&str] = &[
    "scenario",
    "series",
    "x_name",
    "x",
    "metric",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "unconverged",
    "mean_failure_iteration",
    "mean_perturbation_norm",
    "mean_full_recovery_norm",
    "baseline_iterations",
    "model",
    "dataset",
    "data",
    "ps_nodes",
    "lost_fraction",
    "lost_ps_nodes",
    "checkpoint_interval",
    "checkpoint_fraction",
    "selector",
    "recovery",
    "failure_distribution",
    "failure_p",
    "failure_fixed_iteration",
    "criterion",
    "predicted_bounds_fraction",
    "median_rework_to_predicted",
];

/// Columns of `trials.csv`.
pub const TRIAL_COLUMNS: &[&str] = &[
    "series",
    "x",
    "trial",
    "failure_iteration",
    "lost_blocks",
    "restored_blocks",
    "baseline_iterations",
    "iterations_to_converge",
    "rework_iterations",
    "converged",
    "perturbation_norm",
    "full_recovery_norm",
    "mean_restored_age",
    "predicted_rework",
];

/// Seed of the data order of trial `trial` (all trials share trial 0's in
/// `shared` mode).
pub fn run_seed(scenario: &RecoveryScenario, trial: usize) -> u64 {
    let t = match scenario.data_order {
        DataOrderMode::Shared => 0,
        DataOrderMode::PerTrial => trial as u64,
    };
    stream_key(scenario.meta.seed, Purpose::DataOrder, t, 0)
}

/// Runs every trial of `scenario` and returns its tables.
pub fn run(
    scenario: &RecoveryScenario,
    opts: &RunOptions,
    cache: &DataCache,
    progress: &ProgressBar,
) -> Result<Outcome> {
    build_and_visit(
        &scenario.model,
        cache,
        &opts.data,
        scenario.meta.seed,
        RecoveryVisitor {
            scenario,
            opts,
            progress,
        },
    )?
}

struct RecoveryVisitor<'a> {
    scenario: &'a RecoveryScenario,
    opts: &'a RunOptions,
    progress: &'a ProgressBar,
}

/// One finished trial of one point.
struct Record {
    point: usize,
    trial: usize,
    outcome: TrialOutcome,
}

impl ModelVisitor for RecoveryVisitor<'_> {
    type Output = Result<Outcome>;

    fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Result<Outcome> {
        let sc = self.scenario;
        let trials = sc.meta.trials;
        let convergence = Convergence {
            criterion: sc.convergence.criterion * data.size_ratio,
            max_iterations: sc.convergence.max_iterations,
        };
        let baselines: Vec<Baseline<M::State>> = match sc.data_order {
            DataOrderMode::Shared => vec![run_baseline(model, &convergence, run_seed(sc, 0))?],
            DataOrderMode::PerTrial => (0..trials)
                .into_par_iter()
                .map(|t| run_baseline(model, &convergence, run_seed(sc, t)))
                .collect::<Result<_>>()?,
        };
        let baseline_of = |t: usize| match sc.data_order {
            DataOrderMode::Shared => &baselines[0],
            DataOrderMode::PerTrial => &baselines[t],
        };
        let points = sc.points();
        // Fail early, with a clear message, if a fixed failure time is not
        // before convergence.
        for p in &points {
            for (t, b) in baselines.iter().enumerate() {
                if p.config
                    .failure_time
                    .sample(b.iterations(), &mut stream(0, Purpose::Other, 0, 0))
                    .is_none()
                {
                    return Err(match p.config.failure_time {
                        FailureTime::Fixed { iteration } => anyhow!(
                            "failure.iteration = {iteration} is not before the unperturbed run converges \
                             (iteration {}{}); choose an earlier failure",
                            b.iterations(),
                            if baselines.len() > 1 {
                                format!(", trial {t}")
                            } else {
                                String::new()
                            }
                        ),
                        FailureTime::Geometric { .. } => anyhow!(
                            "the unperturbed run converges at iteration {}: there is no iteration to fail at; \
                             tighten the criterion",
                            b.iterations()
                        ),
                    });
                }
            }
        }
        // Online iteration-cost predictor (SCAR §6): fed each unperturbed run.
        let predictor = crate::theory::RecoveryPredictor::new(model, &baselines);
        let units: Vec<(usize, usize)> = (0..points.len())
            .flat_map(|p| (0..trials).map(move |t| (p, t)))
            .collect();
        let blocks = model.block_count();
        let seed = sc.meta.seed;
        let records: Vec<Record> = units
            .par_iter()
            .map_init(
                || model.workspace(),
                |ws, &(pi, t)| {
                    let point = &points[pi];
                    let baseline = baseline_of(t);
                    let outcome = run_unit(
                        model,
                        baseline,
                        &convergence,
                        point,
                        sc.ps_nodes,
                        blocks,
                        seed,
                        t,
                        self.opts,
                        ws,
                    );
                    self.progress.inc(1);
                    Record {
                        point: pi,
                        trial: t,
                        outcome,
                    }
                },
            )
            .collect();
        Ok(tables(sc, &points, &records, &baselines, data, &predictor))
    }
}

/// Runs trial `t` of `point`.
#[allow(clippy::too_many_arguments)]
fn run_unit<M: Model>(
    model: &M,
    baseline: &Baseline<M::State>,
    convergence: &Convergence,
    point: &Point,
    ps_nodes: usize,
    blocks: usize,
    seed: u64,
    t: usize,
    opts: &RunOptions,
    ws: &mut M::Workspace,
) -> TrialOutcome {
    let t64 = t as u64;
    let cfg = &point.config;
    let failure_iteration = cfg
        .failure_time
        .sample(
            baseline.iterations(),
            &mut stream(seed, Purpose::FailureTime, t64, 0),
        )
        .expect("checked before the trials started");
    let mut order: Vec<usize> = (0..blocks).collect();
    order.shuffle(&mut stream(seed, Purpose::LostBlocks, t64, 0));
    let placement = Placement::random(
        blocks,
        ps_nodes,
        &mut stream(seed, Purpose::Placement, t64, 0),
    );
    let lost = cfg.loss.lost_blocks(
        &order,
        &placement,
        &mut stream(seed, Purpose::LostBlocks, t64, 1),
    );
    let setup = TrialSetup {
        failure_iteration,
        lost: &lost,
        checkpoint: &cfg.checkpoint,
        recovery: cfg.recovery,
        checkpoint_rng: stream(seed, Purpose::CheckpointSelection, t64, 0),
    };
    run_trial(model, baseline, convergence, setup, opts.fork_mode, ws)
}

fn tables<S>(
    sc: &RecoveryScenario,
    points: &[Point],
    records: &[Record],
    baselines: &[Baseline<S>],
    data: &DataUsed,
    predictor: &crate::theory::RecoveryPredictor,
) -> Outcome {
    // Theorem 1 with the online estimates of c and ‖x(0) − x*‖ at the failure,
    // for this trial's own recovery perturbation (NaN: too early to estimate).
    let predicted = |r: &Record| {
        let o = &r.outcome;
        predictor.predict(r.trial, o.recovery.perturbation_norm, o.failure_iteration)
    };
    let mut trials = Table::new(TRIAL_COLUMNS.iter().copied());
    for r in records {
        let p = &points[r.point];
        let o = &r.outcome;
        trials.push(vec![
            sc.series[p.series].name.clone(),
            fmt_f64(p.x),
            r.trial.to_string(),
            o.failure_iteration.to_string(),
            o.lost_blocks.to_string(),
            o.recovery.restored_blocks.to_string(),
            o.baseline_iterations.to_string(),
            o.iterations_to_converge.to_string(),
            o.rework_iterations().to_string(),
            o.converged.to_string(),
            fmt_f64(o.recovery.perturbation_norm),
            fmt_f64(o.recovery.full_recovery_norm),
            fmt_f64(o.recovery.mean_restored_age),
            fmt_f64(predicted(r)),
        ]);
    }
    let mut summary = Table::new(SUMMARY_COLUMNS.iter().copied());
    let mean = |v: &mut dyn Iterator<Item = f64>| {
        let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        if n == 0 { f64::NAN } else { s / n as f64 }
    };
    for (pi, p) in points.iter().enumerate() {
        let rs: Vec<&TrialOutcome> = records
            .iter()
            .filter(|r| r.point == pi)
            .map(|r| &r.outcome)
            .collect();
        let rework: Vec<f64> = rs.iter().map(|o| o.rework_iterations() as f64).collect();
        let s = Summary::of(&rework);
        let cfg = &p.config;
        let (dist, fp, fixed) = match cfg.failure_time {
            FailureTime::Geometric { p } => ("geometric", fmt_f64(p), String::new()),
            FailureTime::Fixed { iteration } => ("fixed", String::new(), iteration.to_string()),
        };
        let lost_nodes = match cfg.loss {
            LossSpec::PsNodes(k) => k.to_string(),
            LossSpec::Fraction(_) => String::new(),
        };
        let accuracy = crate::theory::PredictionAccuracy::of(
            records
                .iter()
                .filter(|r| r.point == pi)
                .map(|r| (r.outcome.rework_iterations() as f64, predicted(r))),
        );
        summary.push(vec![
            sc.meta.name.clone(),
            sc.series[p.series].name.clone(),
            sc.x_name().to_string(),
            fmt_f64(p.x),
            "rework_iterations".to_string(),
            s.n.to_string(),
            fmt_f64(s.mean),
            fmt_f64(s.std),
            fmt_f64(s.ci95_low),
            fmt_f64(s.ci95_high),
            rs.iter().filter(|o| !o.converged).count().to_string(),
            fmt_f64(mean(&mut rs.iter().map(|o| o.failure_iteration as f64))),
            fmt_f64(mean(&mut rs.iter().map(|o| o.recovery.perturbation_norm))),
            fmt_f64(mean(&mut rs.iter().map(|o| o.recovery.full_recovery_norm))),
            fmt_f64(mean(&mut baselines.iter().map(|b| b.iterations() as f64))),
            sc.model.kind_name().to_string(),
            data.dataset.to_string(),
            data.provenance.label().to_string(),
            sc.ps_nodes.to_string(),
            fmt_f64(cfg.loss.expected_fraction(sc.ps_nodes)),
            lost_nodes,
            cfg.checkpoint.interval.to_string(),
            fmt_f64(cfg.checkpoint.fraction),
            cfg.checkpoint.selector.name().to_string(),
            cfg.recovery.name().to_string(),
            dist.to_string(),
            fp,
            fixed,
            fmt_f64(sc.convergence.criterion * data.size_ratio),
            fmt_f64(accuracy.bounded_fraction),
            fmt_f64(accuracy.median_ratio),
        ]);
    }
    let mut curve = Table::new(["run", "iteration", "metric"]);
    for (run, b) in baselines.iter().enumerate() {
        for (k, m) in b.metrics.iter().enumerate() {
            curve.push(vec![run.to_string(), k.to_string(), fmt_f64(*m)]);
        }
    }
    let iterations: Vec<usize> = baselines.iter().map(|b| b.iterations()).collect();
    Outcome {
        summary,
        trials,
        extra: vec![("baseline.csv".to_string(), curve)],
        data: json!({
            "dataset": data.dataset,
            "provenance": data.provenance,
            "size_ratio": data.size_ratio,
        }),
        details: json!({
            "criterion_used": sc.convergence.criterion * data.size_ratio,
            "baseline_runs": baselines.len(),
            "baseline_iterations": iterations,
            "baseline_final_metric": baselines.iter().map(|b| b.final_metric()).collect::<Vec<_>>(),
        }),
    }
}
