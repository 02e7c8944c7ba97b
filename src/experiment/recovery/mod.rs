//! Runs a `recovery` scenario: SCAR failure trials over series × sweep points.
//!
//! Common random numbers: trial `t` draws its failure time, its lost blocks
//! and its block placement from streams keyed by `t` alone, so every series
//! and point sees the same failure (a larger lost fraction loses a superset
//! of the blocks). Comparisons between series are therefore paired, and
//! Theorem 3.1 (‖δ′‖ ≤ ‖δ‖) can be checked trial by trial.

mod plan;

use anyhow::{Context, Result, anyhow};
use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::budget::mul;
use super::kind::Experiment;
use super::shared_outcomes::{
    BaselinesKey, RunKey, RunShare, TrialKey, share_identical, take_shared, unit_key,
};
use super::tasks::decode_records;
use super::units::Driver;
use super::{Outcome, RawResult, RunOptions};
use crate::data::{DataCache, DatasetName, Provenance};
use crate::engine::{
    Baseline, Convergence, EngineOptions, TrialOutcome, TrialSetup, restoration, run_baseline,
    run_baselines, run_cohort_on,
};
use crate::model::{DataUsed, Model, ModelVisitor, build_and_visit};
use crate::policy::{FailureTime, LossSpec, Placement, Restoration};
use crate::report::columns::recovery::{BaselineRow, SummaryRow, TrialRow};
use crate::report::fmt_f64;
use crate::report::row::Row;
use crate::rng::{Purpose, stream};
use crate::scenario::{DataOrderMode, RecoveryScenario, recovery::Point};
use crate::stats::Summary;
use crate::theory::{PredictionAccuracy, RecoveryPredictor};

impl Experiment for RecoveryScenario {
    fn points_and_trials(&self) -> (u64, u64) {
        (self.points().len() as u64, self.meta.trials as u64)
    }

    fn unit_names(&self) -> Vec<String> {
        unit_names(self)
    }

    fn unit_costs(&self) -> Vec<f64> {
        // Balanced by each unit's failure iteration in `run_raw`, once the
        // unperturbed runs are known; `--plan` times those runs instead.
        vec![1.0; units(self).len()]
    }

    fn datasets(&self) -> Vec<DatasetName> {
        vec![self.model.dataset()]
    }

    fn extra_bytes(&self) -> u64 {
        // Per-trial data order: one unperturbed run's metrics per trial.
        match self.data_order {
            DataOrderMode::PerTrial => mul(
                self.meta.trials as u64,
                mul(self.convergence.max_iterations as u64, 16),
            ),
            DataOrderMode::Shared => 0,
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

    fn plan(&self, opts: &RunOptions, cache: &DataCache) -> Option<Result<super::Plan>> {
        Some(plan::plan(self, opts, cache))
    }
}

/// Seed of the data order of trial `trial` (all trials share trial 0's in
/// `shared` mode).
pub(crate) fn run_seed(scenario: &RecoveryScenario, trial: usize) -> u64 {
    crate::rng::run_seed(scenario.meta.seed, baseline_index(scenario, trial) as u64)
}

/// Which unperturbed run trial `trial` forks from: the one shared run, or
/// its own (`per-trial` data order).
pub(super) fn baseline_index(scenario: &RecoveryScenario, trial: usize) -> usize {
    match scenario.data_order {
        DataOrderMode::Shared => 0,
        DataOrderMode::PerTrial => trial,
    }
}

/// The units of a scenario in output order: (point index, trial).
pub(crate) fn units(scenario: &RecoveryScenario) -> Vec<(usize, usize)> {
    let trials = scenario.meta.trials;
    (0..scenario.points().len())
        .flat_map(|p| (0..trials).map(move |t| (p, t)))
        .collect()
}

/// A readable name for every unit: `series=<s>,x=<x>,trial=<t>`.
pub(crate) fn unit_names(scenario: &RecoveryScenario) -> Vec<String> {
    let points = scenario.points();
    units(scenario)
        .into_iter()
        .map(|(p, t)| {
            format!(
                "series={},{}={},trial={t}",
                scenario.series[points[p].series].name,
                scenario.x_name(),
                fmt_f64(points[p].x)
            )
        })
        .collect()
}

/// Facts shared by all units of a run: the unperturbed runs and the data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecoveryContext {
    /// Metric of every iteration of each unperturbed run (one per data order).
    pub(crate) baselines: Vec<Vec<f64>>,
    /// The dataset.
    pub(crate) dataset: DatasetName,
    /// Real files or stand-in.
    pub(crate) provenance: Provenance,
    /// Examples used relative to the real dataset.
    pub(crate) size_ratio: f64,
    /// The criterion as used (scaled by `size_ratio`).
    pub(crate) criterion: f64,
    /// The online iteration-cost predictor (SCAR §6) fed each unperturbed
    /// run: its estimates of c and ‖x(0) − x*‖ after every iteration, from
    /// which `tables` predicts each trial's rework before its recovery.
    pub(crate) predictor: RecoveryPredictor,
}

/// Runs the units of `scenario` that `driver` assigns to this run.
fn run_raw(
    scenario: &RecoveryScenario,
    opts: &RunOptions,
    cache: &DataCache,
    driver: &Driver<'_>,
) -> Result<RawResult> {
    build_and_visit(
        &scenario.model,
        cache,
        &opts.data,
        scenario.meta.seed,
        RecoveryVisitor {
            scenario,
            opts,
            driver,
        },
    )?
}

struct RecoveryVisitor<'a> {
    scenario: &'a RecoveryScenario,
    opts: &'a RunOptions,
    driver: &'a Driver<'a>,
}

impl RecoveryVisitor<'_> {
    /// Across scenarios (`reproduce`): the keys under which this run's units
    /// (`mine`) offer and take outcomes, so that a group of identical units
    /// takes the outcome another scenario computed for one of its members'
    /// keys. `None` without a shared cache, or for a run whose inputs cannot
    /// be keyed (a data path that is not text): such a run shares nothing.
    fn run_share<'s>(
        &'s self,
        data: &DataUsed,
        convergence: &Convergence,
        blocks: usize,
        (units, points): (&[(usize, usize)], &[Point]),
        mine: &[usize],
        prep: impl Fn(usize) -> &'s Prepared,
    ) -> Result<Option<RunShare<'s>>> {
        let sc = self.scenario;
        let Some(cache) = self.opts.shared_outcomes.as_deref() else {
            return Ok(None);
        };
        let (Ok(run), Ok(whole)) = (
            RunKey::new(sc, data, &self.opts.data, convergence, blocks),
            RunKey::whole_state(sc, data, &self.opts.data, convergence),
        ) else {
            return Ok(None);
        };
        let mut keys = vec![None; units.len()];
        for &u in mine {
            let (pi, t) = units[u];
            keys[u] = Some(unit_key(sc, &points[pi], t, prep(u), blocks)?);
        }
        Ok(Some(RunShare::new(cache, [run, whole], keys)))
    }

    /// The scenario's unperturbed runs ([`baselines_for`]); across scenarios
    /// (`reproduce`), taken from another scenario that computed exactly the
    /// same runs while it or its chain still holds them
    /// ([`SharedOutcomes::baselines`](super::shared_outcomes::SharedOutcomes::baselines)):
    /// a per-trial partial panel's 100 runs serve its priority panel too.
    fn baselines<M: Model>(
        &self,
        model: &M,
        data: &DataUsed,
        convergence: &Convergence,
    ) -> Result<std::sync::Arc<Vec<Baseline<M::State>>>> {
        let sc = self.scenario;
        let compute = || baselines_for(model, sc, convergence);
        let Some(cache) = self.opts.shared_outcomes.as_deref() else {
            return compute().map(std::sync::Arc::new);
        };
        let seeds = baseline_seeds(sc);
        match BaselinesKey::new::<M>(sc, data, &self.opts.data, convergence, &seeds) {
            Ok(key) => cache.baselines(&key, compute),
            // A run whose inputs cannot be keyed shares nothing.
            Err(_) => compute().map(std::sync::Arc::new),
        }
    }
}

impl ModelVisitor for RecoveryVisitor<'_> {
    type Output = Result<RawResult>;

    fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Result<RawResult> {
        let sc = self.scenario;
        let convergence = convergence_for(model, sc, data);
        let baselines = self.baselines(model, data, &convergence)?;
        let baseline_index = |t: usize| baseline_index(sc, t);
        let points = sc.points();
        check_failure_times(&points, &baselines)?;
        let seed = sc.meta.seed;
        let units = units(sc);
        let costs = expected_costs(&units, &points, &baselines, baseline_index, seed);
        let (mine, todo) = self.driver.assign(&costs);
        let blocks = model.block_count();
        // Every unit's random draws (resumed units' too: their keys offer
        // their outcomes to other scenarios), then one representative per set
        // of units with the same `TrialKey`: only representatives are run.
        let mut prepared: Vec<Option<Prepared>> = (0..units.len()).map(|_| None).collect();
        for &u in &mine {
            let (pi, t) = units[u];
            let b = &baselines[baseline_index(t)];
            prepared[u] = Some(prepare(
                b.iterations(),
                &points[pi],
                sc.ps_nodes,
                blocks,
                seed,
                t,
            ));
        }
        // What each unit to run restores: units that restore the same
        // blocks from the same iterations at the same T share their run.
        if self.opts.share_identical_trials {
            restorations(
                model,
                |t| &baselines[baseline_index(t)],
                seed,
                (&units, &points),
                &mut prepared,
                &todo,
            );
        }
        let prep = |u: usize| {
            prepared[u]
                .as_ref()
                .expect("prepared every unit of this run")
        };
        let key = |u: usize| TrialKey::new(baseline_index(units[u].1), prep(u));
        let (representatives, followers) = if self.opts.share_identical_trials {
            share_identical(&todo, units.len(), key)
        } else {
            (todo.clone(), vec![Vec::new(); units.len()])
        };
        let across = self.run_share(data, &convergence, blocks, (&units, &points), &mine, prep)?;
        let (representatives, taken) = match &across {
            None => (representatives, Vec::new()),
            Some(share) => take_shared(
                share,
                self.driver,
                &mine,
                representatives,
                &followers,
                |u, o| prep(u).own(o),
            )?,
        };
        if !taken.is_empty() {
            self.driver.finished(&taken)?;
            self.driver.shared_across(taken.len());
        }
        // A model that steps runs of different data orders together takes
        // a per-trial data order's units in cohorts across trial indices
        // (one group); otherwise a cohort holds units of one unperturbed run.
        let span = baselines.len() > 1 && model.cohorts_span_data_orders();
        let groups = cohort_groups(
            &representatives,
            if span { 1 } else { baselines.len() },
            |u| if span { 0 } else { baseline_index(units[u].1) },
            |u| prep(u).failure_iteration,
        );
        let cohorts = most_expensive_first(&groups, model.cohort_size().max(1), &costs);
        let driver = self.driver;
        let stop = || driver.cancelled();
        let done = driver.run_tasks(
            &cohorts,
            || model.workspace(),
            |ws, cohort| {
                let forks: Vec<&Baseline<M::State>> = cohort
                    .iter()
                    .map(|&u| &baselines[baseline_index(units[u].1)])
                    .collect();
                let setups = cohort
                    .iter()
                    .map(|&u| prep(u).setup(&points[units[u].0], seed, units[u].1))
                    .collect();
                let Some(outcomes) = run_cohort_on(
                    model,
                    &forks,
                    &convergence,
                    setups,
                    EngineOptions {
                        fork: self.opts.fork_mode,
                        certify: self.opts.certify_metric,
                        rejoin: self.opts.share_identical_trials,
                    },
                    ws,
                    &stop,
                ) else {
                    return Ok(None);
                };
                let computed = with_followers(cohort, outcomes, &followers, |f, o| prep(f).own(o));
                if let Some(share) = &across {
                    share.store(computed.iter().copied());
                }
                Ok(Some(computed))
            },
        )?;
        let records = driver.collect(done.into_iter().chain([taken]), &mine)?;
        let context = RecoveryContext {
            baselines: baselines.iter().map(|b| b.metrics.clone()).collect(),
            dataset: data.dataset,
            provenance: data.provenance.clone(),
            size_ratio: data.size_ratio,
            criterion: convergence.criterion,
            predictor: RecoveryPredictor::new(model, &baselines),
        };
        Ok(RawResult {
            context: serde_json::to_value(context)?,
            records,
        })
    }
}

/// The seeds of `sc`'s unperturbed runs' data orders: one for a shared
/// order, one per trial for a per-trial order.
fn baseline_seeds(sc: &RecoveryScenario) -> Vec<u64> {
    match sc.data_order {
        DataOrderMode::Shared => vec![run_seed(sc, 0)],
        DataOrderMode::PerTrial => (0..sc.meta.trials).map(|t| run_seed(sc, t)).collect(),
    }
}

/// The unperturbed runs of `sc`: one for a shared data order, one per trial
/// (its own order) for a per-trial one.
fn baselines_for<M: Model>(
    model: &M,
    sc: &RecoveryScenario,
    convergence: &Convergence,
) -> Result<Vec<Baseline<M::State>>> {
    Ok(match sc.data_order {
        DataOrderMode::Shared => vec![run_baseline(model, convergence, run_seed(sc, 0))?],
        DataOrderMode::PerTrial => run_baselines(model, convergence, &baseline_seeds(sc))?,
    })
}

/// Expected cost of each unit: the iterations from its failure to the
/// unperturbed convergence point (the rework on top is unknown yet).
fn expected_costs<S>(
    units: &[(usize, usize)],
    points: &[Point],
    baselines: &[Baseline<S>],
    baseline_index: impl Fn(usize) -> usize,
    seed: u64,
) -> Vec<f64> {
    units
        .iter()
        .map(|&(p, t)| {
            let b = &baselines[baseline_index(t)];
            let ft = failure_iteration(b, &points[p], seed, t);
            (b.iterations() - ft + 1) as f64
        })
        .collect()
}

/// The groups of [`cohort_groups`] cut into cohorts of at most `size`,
/// the most expensive (summed unit `costs`) first: `run_tasks` starts them
/// in this order, so the cheapest end the run (see its scheduling note).
fn most_expensive_first<'g>(
    groups: &'g [Vec<usize>],
    size: usize,
    costs: &[f64],
) -> Vec<&'g [usize]> {
    let mut cohorts: Vec<&[usize]> = groups.iter().flat_map(|g| g.chunks(size)).collect();
    let cost = |c: &[usize]| c.iter().map(|&u| costs[u]).sum::<f64>();
    cohorts.sort_by(|a, b| cost(b).total_cmp(&cost(a)));
    cohorts
}

/// The units to run, grouped by the unperturbed run they fork from
/// (`baseline_of`, below `baselines`; one group for a model whose cohorts
/// span data orders) and ordered by failure iteration, so
/// that the members of a cohort cut from a group join it at nearby
/// iterations and step together for most of their runs (a trial's outcome
/// does not depend on its cohort).
fn cohort_groups(
    units: &[usize],
    baselines: usize,
    baseline_of: impl Fn(usize) -> usize,
    failure_iteration: impl Fn(usize) -> usize,
) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); baselines];
    for &u in units {
        groups[baseline_of(u)].push(u);
    }
    for g in &mut groups {
        g.sort_by_key(|&u| (failure_iteration(u), u));
    }
    groups
}

/// The outcomes of a cohort's representatives, each followed by the same
/// outcome for the units that share its `TrialKey` (`followers`), with
/// what each reports of its own failure (`own`, [`Prepared::own`]).
fn with_followers(
    cohort: &[usize],
    outcomes: Vec<TrialOutcome>,
    followers: &[Vec<usize>],
    own: impl Fn(usize, TrialOutcome) -> TrialOutcome,
) -> Vec<(usize, TrialOutcome)> {
    let mut computed = Vec::with_capacity(cohort.len());
    for (&u, o) in cohort.iter().zip(outcomes) {
        for &f in &followers[u] {
            computed.push((f, own(f, o)));
        }
        computed.push((u, o));
    }
    computed
}

/// The convergence test a run of `scenario` uses on `data`: the scenario's
/// criterion (a sum over the training set) scaled by the data size; or, for a
/// synthetic stand-in with a `synthetic_criterion`, the metric `descent` of
/// the way from x(0)'s metric to the metric at `plateau_iteration` of the
/// unperturbed stand-in run.
pub(crate) fn convergence_for<M: Model>(
    model: &M,
    scenario: &RecoveryScenario,
    data: &DataUsed,
) -> Convergence {
    let scaled = Convergence {
        criterion: scenario.convergence.criterion * data.size_ratio,
        max_iterations: scenario.convergence.max_iterations,
    };
    let synthetic = matches!(data.provenance, Provenance::Synthetic { .. });
    match scenario.synthetic_criterion {
        Some(sc) if synthetic => {
            let mut ws = model.workspace();
            let mut state = model.init();
            let start = model.metric(&state, &mut ws);
            let run_seed = run_seed(scenario, 0);
            for k in 0..sc.plateau_iteration {
                model.step(
                    &mut state,
                    crate::model::IterCtx {
                        iteration: k,
                        run_seed,
                    },
                    &mut ws,
                );
            }
            let plateau = model.metric(&state, &mut ws);
            Convergence {
                criterion: start - sc.descent * (start - plateau),
                ..scaled
            }
        }
        _ => scaled,
    }
}

/// Fails early, with a clear message, if some point's failure cannot strike
/// before its unperturbed run converges.
fn check_failure_times<S>(points: &[Point], baselines: &[Baseline<S>]) -> Result<()> {
    for p in points {
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
                    FailureTime::Geometric { .. } | FailureTime::GeometricOfRun { .. } => anyhow!(
                        "the unperturbed run converges at iteration {}: there is no iteration to fail at; \
                         tighten the criterion",
                        b.iterations()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Trial `t`'s failure iteration at `point` (from the trial's own stream).
fn failure_iteration<S>(baseline: &Baseline<S>, point: &Point, seed: u64, t: usize) -> usize {
    point
        .config
        .failure_time
        .sample(
            baseline.iterations(),
            &mut stream(seed, Purpose::FailureTime, t as u64, 0),
        )
        .expect("checked before the trials started")
}

/// The random draws of trial `t` at one point: failure time and lost
/// blocks; and, once found, what recovery restores.
pub(super) struct Prepared {
    /// T.
    pub(super) failure_iteration: usize,
    /// The lost blocks (sorted).
    pub(super) lost: Vec<usize>,
    /// The blocks recovery restores and when each was saved, with what the
    /// recovery reports ([`restorations`]); `None` until found (and
    /// without trial sharing, where each trial replays its checkpoints).
    pub(super) restoration: Option<Restoration>,
}

impl Prepared {
    fn setup<'a>(&'a self, point: &'a Point, seed: u64, t: usize) -> TrialSetup<'a> {
        TrialSetup {
            failure_iteration: self.failure_iteration,
            lost: &self.lost,
            checkpoint: &point.config.checkpoint,
            order: point.config.order,
            recovery: point.config.recovery,
            checkpoint_rng: stream(seed, Purpose::CheckpointSelection, t as u64, 0),
            restoration: self.restoration.as_ref(),
        }
    }

    /// `o`, the outcome of a unit with the same [`TrialKey`], as this unit
    /// reports it: its own count of lost blocks and its own recovery's
    /// figures (a checkpoint's other blocks, which enter
    /// `full_recovery_norm`, may differ between units that restore the same
    /// blocks from the same iterations).
    pub(super) fn own(&self, o: TrialOutcome) -> TrialOutcome {
        TrialOutcome {
            lost_blocks: self.lost.len(),
            recovery: self.restoration.as_ref().map_or(o.recovery, |r| r.outcome),
            ..o
        }
    }
}

/// Finds what recovery restores for each unit of `todo` ([`Prepared::restoration`],
/// replaying its checkpoints along its unperturbed run), in parallel.
/// `baseline_of(t)` is trial t's unperturbed run.
pub(super) fn restorations<'b, M: Model>(
    model: &M,
    baseline_of: impl Fn(usize) -> &'b Baseline<M::State> + Sync,
    seed: u64,
    (units, points): (&[(usize, usize)], &[Point]),
    prepared: &mut [Option<Prepared>],
    todo: &[usize],
) {
    let found: Vec<(usize, Restoration)> = todo
        .par_iter()
        .filter_map(|&u| {
            let (pi, t) = units[u];
            let p = prepared[u].as_ref()?;
            let setup = p.setup(&points[pi], seed, t);
            Some((u, restoration(model, baseline_of(t), &setup)))
        })
        .collect();
    for (u, r) in found {
        if let Some(p) = prepared[u].as_mut() {
            p.restoration = Some(r);
        }
    }
}

/// Draws trial `t`'s failure at `point` from the trial's own streams, so
/// every series and point of the scenario sees the same failure.
pub(super) fn prepare(
    baseline_iterations: usize,
    point: &Point,
    ps_nodes: usize,
    blocks: usize,
    seed: u64,
    t: usize,
) -> Prepared {
    let t64 = t as u64;
    let cfg = &point.config;
    let failure_iteration = cfg
        .failure_time
        .sample(
            baseline_iterations,
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
    Prepared {
        failure_iteration,
        lost,
        restoration: None,
    }
}

/// Builds the output tables from the records of every unit.
fn tables(sc: &RecoveryScenario, raw: &RawResult) -> Result<Outcome> {
    let ctx: RecoveryContext = serde_json::from_value(raw.context.clone())
        .context("malformed recovery context (was it written by another version?)")?;
    let points = sc.points();
    let units = units(sc);
    let outcomes: Vec<TrialOutcome> = decode_records(&unit_names(sc), raw)?;
    // Theorem 1 with the online estimates of c and ‖x(0) − x*‖ at the failure,
    // for this trial's own recovery perturbation (NaN: too early to estimate).
    let predicted = |t: usize, o: &TrialOutcome| {
        ctx.predictor
            .predict(t, o.recovery.perturbation_norm, o.failure_iteration)
    };
    let mut trials = TrialRow::table();
    for (&(pi, t), o) in units.iter().zip(&outcomes) {
        let p = &points[pi];
        trials.add(&TrialRow {
            series: sc.series[p.series].name.clone(),
            x: p.x,
            trial: t,
            failure_iteration: o.failure_iteration,
            lost_blocks: o.lost_blocks,
            restored_blocks: o.recovery.restored_blocks,
            baseline_iterations: o.baseline_iterations,
            iterations_to_converge: o.iterations_to_converge,
            rework_iterations: o.rework_iterations(),
            converged: o.converged,
            perturbation_norm: o.recovery.perturbation_norm,
            full_recovery_norm: o.recovery.full_recovery_norm,
            mean_restored_age: o.recovery.mean_restored_age,
            predicted_rework: predicted(t, o),
        });
    }
    let mut summary = SummaryRow::table();
    let mean = |v: &mut dyn Iterator<Item = f64>| {
        let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        if n == 0 { f64::NAN } else { s / n as f64 }
    };
    let baseline_iterations: Vec<f64> =
        ctx.baselines.iter().map(|m| (m.len() - 1) as f64).collect();
    for (pi, p) in points.iter().enumerate() {
        let rs: Vec<&TrialOutcome> = units
            .iter()
            .zip(&outcomes)
            .filter(|((q, _), _)| *q == pi)
            .map(|(_, o)| o)
            .collect();
        let rework: Vec<f64> = rs.iter().map(|o| o.rework_iterations() as f64).collect();
        let s = Summary::of(&rework);
        let cfg = &p.config;
        let (failure_distribution, failure_p, failure_fixed_iteration, failure_mean_of_run) =
            failure_columns(cfg.failure_time);
        let lost_ps_nodes = match cfg.loss {
            LossSpec::PsNodes(k) => Some(k),
            LossSpec::Fraction(_) => None,
        };
        let accuracy = PredictionAccuracy::of(
            units
                .iter()
                .zip(&outcomes)
                .filter(|((q, _), _)| *q == pi)
                .map(|(&(_, t), o)| (o.rework_iterations() as f64, predicted(t, o))),
        );
        summary.add(&SummaryRow {
            scenario: sc.meta.name.clone(),
            series: sc.series[p.series].name.clone(),
            x_name: sc.x_name(),
            x: p.x,
            metric: "rework_iterations",
            trials: s.n,
            mean: s.mean,
            std: s.std,
            ci95_low: s.ci95_low,
            ci95_high: s.ci95_high,
            unconverged: rs.iter().filter(|o| !o.converged).count(),
            mean_failure_iteration: mean(&mut rs.iter().map(|o| o.failure_iteration as f64)),
            mean_perturbation_norm: mean(&mut rs.iter().map(|o| o.recovery.perturbation_norm)),
            mean_full_recovery_norm: mean(&mut rs.iter().map(|o| o.recovery.full_recovery_norm)),
            baseline_iterations: mean(&mut baseline_iterations.iter().copied()),
            model: sc.model.kind_name(),
            dataset: ctx.dataset.to_string(),
            data: ctx.provenance.label().to_string(),
            ps_nodes: sc.ps_nodes,
            lost_fraction: cfg.loss.expected_fraction(sc.ps_nodes),
            lost_ps_nodes,
            checkpoint_interval: cfg.checkpoint.interval,
            checkpoint_fraction: cfg.checkpoint.fraction,
            selector: cfg.checkpoint.selector.name(),
            event_order: cfg.order.name(),
            checkpoint_budget: cfg.checkpoint.budget.name(),
            recovery: cfg.recovery.name(),
            failure_distribution,
            failure_p,
            failure_fixed_iteration,
            failure_mean_of_run,
            criterion: ctx.criterion,
            predicted_bounds_fraction: accuracy.bounded_fraction,
            median_rework_to_predicted: accuracy.median_ratio,
        });
    }
    Ok(Outcome {
        summary,
        trials,
        extra: vec![("baseline.csv".to_string(), baseline_curves(&ctx.baselines))],
        data: json!({
            "dataset": ctx.dataset,
            "provenance": ctx.provenance,
            "size_ratio": ctx.size_ratio,
        }),
        details: json!({
            "criterion_used": ctx.criterion,
            "baseline_runs": ctx.baselines.len(),
            "baseline_iterations": baseline_iterations,
            "baseline_final_metric": ctx.baselines.iter().map(|m| m.last().copied()).collect::<Vec<_>>(),
        }),
    })
}

/// The summary's failure-time columns: the distribution's name, then its
/// one parameter in the column of its kind (the others empty).
fn failure_columns(f: FailureTime) -> (&'static str, Option<f64>, Option<usize>, Option<f64>) {
    match f {
        FailureTime::Geometric { p } => ("geometric", Some(p), None, None),
        FailureTime::GeometricOfRun { mean_of_run } => {
            ("geometric-of-run", None, None, Some(mean_of_run))
        }
        FailureTime::Fixed { iteration } => ("fixed", None, Some(iteration), None),
    }
}

/// `baseline.csv`: every unperturbed run's metric at every iteration.
fn baseline_curves(baselines: &[Vec<f64>]) -> crate::report::Table {
    let mut curve = BaselineRow::table();
    for (run, metrics) in baselines.iter().enumerate() {
        for (iteration, &metric) in metrics.iter().enumerate() {
            curve.add(&BaselineRow {
                run,
                iteration,
                metric,
            });
        }
    }
    curve
}
