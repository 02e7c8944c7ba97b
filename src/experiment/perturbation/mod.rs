//! Runs a `perturbation` scenario: SCAR's iteration-cost experiments
//! (§3 Figure 3, §5.2 Figures 4–5).
//!
//! A trial follows SCAR eq. (2), `y(k+1) = f(y(k) + δ_k)`: it forks from the
//! unperturbed run at the first perturbation iteration ℓ (x(ℓ) is kept by
//! the baseline), adds δ_ℓ, and trains on — with the same data order — until
//! `y(k)` meets ε; a ρ-per-iteration schedule keeps drawing perturbations in
//! every later iteration. Convergence is checked on `y(k)` (the iterate
//! before its perturbation), as in the theorem. The **iteration cost** is
//! `K − B`: iterations the perturbed run needs minus the unperturbed run's.
//!
//! Randomness: trial t draws its perturbation times from
//! `rng::stream(seed, Perturbation, t, 0)` and sizes and directions from
//! `stream(seed, Perturbation, t, 1)`, whatever its series, so the first
//! perturbation of trial t has the same drawn size in every series (random
//! and adversarial trials are paired).
//!
//! Perturbation norms ‖δ_ℓ‖ are measured as the change of the state in the
//! model's norm ([`Model::distance`]), after the model stored it (MLR rounds
//! to f32).

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::budget::mul;
use super::kind::Experiment;
use super::reference::{Reference, ReferenceFacts, Sharing, theory, unperturbed};
use super::tasks::encode;
use super::units::Driver;
use super::{Outcome, RawResult, RunOptions};
use crate::data::{DataCache, DatasetName, Provenance};
use crate::engine::{Convergence, ForkMode};
use crate::model::{DataUsed, Model, ModelVisitor, build_and_visit};
use crate::rng::{SimRng, run_seed};
use crate::scenario::perturbation::{NormScale, PerturbationKind, PerturbationScenario};
use crate::theory::PredictorTrack;

mod tables;
mod trial;

use tables::tables;
use trial::{Ctx, first_perturbation};

impl Experiment for PerturbationScenario {
    fn points_and_trials(&self) -> (u64, u64) {
        (self.series.len() as u64, self.meta.trials as u64)
    }

    fn unit_names(&self) -> Vec<String> {
        unit_names(self)
    }

    fn unit_costs(&self) -> Vec<f64> {
        unit_costs(self)
    }

    fn datasets(&self) -> Vec<DatasetName> {
        Some(self.model.dataset())
            .filter(|d| *d != DatasetName::None)
            .into_iter()
            .collect()
    }

    fn extra_bytes(&self) -> u64 {
        // The unperturbed run's metrics and distances, once.
        mul(self.max_iterations as u64, 32)
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
}

/// The units of a scenario in output order: (series index, trial).
pub(crate) fn units(scenario: &PerturbationScenario) -> Vec<(usize, usize)> {
    let trials = scenario.meta.trials;
    (0..scenario.series.len())
        .flat_map(|s| (0..trials).map(move |t| (s, t)))
        .collect()
}

/// A readable name for every unit: `series=<s>,trial=<t>`.
pub(crate) fn unit_names(scenario: &PerturbationScenario) -> Vec<String> {
    units(scenario)
        .into_iter()
        .map(|(s, t)| format!("series={},trial={t}", scenario.series[s].name))
        .collect()
}

/// Relative expected cost of every unit before the unperturbed run is
/// known (all equal; `run_raw` balances shards by the iterations from each
/// series' first perturbation to convergence instead).
pub(crate) fn unit_costs(scenario: &PerturbationScenario) -> Vec<f64> {
    vec![1.0; units(scenario).len()]
}

/// Facts shared by all units of a run: the reference quantities, the
/// unperturbed run and the online predictor's estimates along it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PerturbationContext {
    /// c, ‖x(0) − x*‖, ε, B, … (see `experiment::reference`).
    pub(crate) reference: ReferenceFacts,
    /// Metric of x(k), k = 0..=B.
    #[serde(with = "crate::report::json_f64::vec")]
    pub(crate) baseline_metrics: Vec<f64>,
    /// ‖x(k) − x*‖, k = 0..=B.
    #[serde(with = "crate::report::json_f64::vec")]
    pub(crate) distances: Vec<f64>,
    /// ‖x(k+1) − x(k)‖, k = 0..B.
    #[serde(with = "crate::report::json_f64::vec")]
    pub(crate) step_norms: Vec<f64>,
    /// The online predictor fed the unperturbed run.
    pub(crate) predictor: PredictorTrack,
    /// The dataset.
    pub(crate) dataset: DatasetName,
    /// Real files or stand-in.
    pub(crate) provenance: Provenance,
    /// Examples used relative to the real dataset.
    pub(crate) size_ratio: f64,
}

/// Runs the units of `scenario` that `driver` assigns to this run.
fn run_raw(
    scenario: &PerturbationScenario,
    opts: &RunOptions,
    cache: &DataCache,
    driver: &Driver<'_>,
) -> Result<RawResult> {
    build_and_visit(
        &scenario.model,
        cache,
        &opts.data,
        scenario.meta.seed,
        Visitor {
            scenario,
            opts,
            driver,
        },
    )?
}

struct Visitor<'a> {
    scenario: &'a PerturbationScenario,
    opts: &'a RunOptions,
    driver: &'a Driver<'a>,
}

/// What one trial did (the record of a unit).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct TrialResult {
    /// (ℓ, ‖δ_ℓ‖) of every perturbation.
    pub(crate) perturbations: Vec<(usize, f64)>,
    /// Fraction of blocks reset by the first perturbation (NaN if not a reset).
    #[serde(with = "crate::report::json_f64")]
    pub(crate) reset_fraction: f64,
    /// K (capped at max_iterations).
    pub(crate) iterations: usize,
    /// Whether the run met ε within max_iterations.
    pub(crate) converged: bool,
}

/// Per-worker buffers (no allocation per iteration).
impl ModelVisitor for Visitor<'_> {
    type Output = Result<RawResult>;

    fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Result<RawResult> {
        let sc = self.scenario;
        let driver = self.driver;
        // One data order, run 0's, for the unperturbed run and every trial.
        let run_seed = run_seed(sc.meta.seed, 0);
        let run = unperturbed(
            model,
            sc.criterion,
            sc.max_iterations,
            data.size_ratio,
            run_seed,
        )?;
        let b = run.baseline.iterations();
        let flat = model.flat_params();
        check_series(sc, flat.is_some(), b)?;
        let sharing = self.opts.shared_outcomes.as_deref().map(|cache| Sharing {
            cache,
            seed: sc.meta.seed,
            data,
            data_opts: &self.opts.data,
        });
        // x* before the trials only when a series perturbs relative to it
        // or `--plan` times the setup apart; otherwise it is computed beside
        // them (see `needs_optimum`), and an interruption stops it with the
        // trials.
        let early = if optimum_first(sc, driver) {
            Some(theory(
                model,
                &sc.model,
                &sc.theory,
                &run,
                sharing,
                &|| false,
            )?)
        } else {
            None
        };
        let params = flat.map_or(0, |f| f.param_count());
        let mut optimum_flat = Vec::new();
        if let (Some(f), Some(t)) = (flat, &early) {
            optimum_flat.resize(params, 0.0);
            f.read_params(t.optimum(), &mut optimum_flat);
        }
        let ctx = Ctx {
            model,
            baseline: &run.baseline,
            optimum: early.as_ref().map(|t| t.optimum()),
            flat,
            optimum_flat,
            init: model.init(),
            fork: self.opts.fork_mode,
        };
        let seed = sc.meta.seed;
        let units = units(sc);
        // Expected cost of a unit: the iterations from its first perturbation
        // (at the earliest, ℓ) to the unperturbed convergence point.
        let costs: Vec<f64> = units
            .iter()
            .map(|&(s, _)| match sc.series[s].schedule.once_at(b) {
                Some(iteration) => (b - iteration + 1) as f64,
                None => (b + 1) as f64,
            })
            .collect();
        let (mine, todo) = driver.assign(&costs);
        // A unit never perturbed before the run converges is the unperturbed
        // run; the others join cohorts in order of their first perturbation,
        // so the members of a cohort step together from nearby iterations.
        let (unperturbed_units, starts) = split_unperturbed(sc, &units, &todo, b);
        let unperturbed_units = encode(unperturbed_units)?;
        driver.finished(&unperturbed_units)?;
        // Cohorts of the model's size (a naive one-at-a-time loop with
        // `--rerun`); a task of one-trial cohorts takes several, so that tiny
        // trials (QP) are journalled together.
        let size = match self.opts.fork_mode {
            ForkMode::Fork => model.cohort_size().max(1),
            ForkMode::Rerun => 1,
        };
        let task = if size == 1 { JOURNAL_CHUNK } else { size };
        let convergence = Convergence {
            criterion: run.criterion,
            max_iterations: sc.max_iterations,
        };
        let certify = self.opts.certify_metric;
        // A failed x* (e.g. a rate outside (0, 1)) stops the trials: the
        // run reports that error.
        let failed = AtomicBool::new(false);
        let halted = || driver.cancelled() || failed.load(Ordering::Relaxed);
        let tasks: Vec<&[Start]> = starts.chunks(task).collect();
        let mut late = None;
        let done = rayon::scope(|s| {
            if early.is_none() {
                // On a worker of this run's pool (so its CPU time is the
                // run's); the trials take the others, and all of them once
                // it is done. Waiting for another scenario's x* blocks only
                // this job.
                let (late, failed) = (&mut late, &failed);
                let run = &run;
                s.spawn(move |_| {
                    let stop = || driver.cancelled();
                    let t = theory(model, &sc.model, &sc.theory, run, sharing, &stop);
                    failed.store(t.is_err(), Ordering::Relaxed);
                    *late = Some(t);
                });
            }
            driver.run_tasks(
                &tasks,
                || model.workspace(),
                |ws, chunk| {
                    let mut records = Vec::with_capacity(chunk.len());
                    for cohort in chunk.chunks(size) {
                        if halted() {
                            return Ok(None);
                        }
                        let trials = cohort
                            .iter()
                            .map(|(first, u, timing)| {
                                let (s, t) = units[*u];
                                ctx.trial(&sc.series[s], *first, timing.clone(), seed, t)
                            })
                            .collect();
                        let Some(results) =
                            ctx.run_cohort(trials, &convergence, certify, ws, &halted)
                        else {
                            return Ok(None);
                        };
                        records.extend(cohort.iter().map(|(_, u, _)| *u).zip(results));
                    }
                    Ok(Some(records))
                },
            )
        });
        drop(ctx);
        if driver.cancelled() {
            return Err(driver.interrupted(mine.len()));
        }
        let theory = match (early, late) {
            (Some(t), _) => t,
            (None, Some(t)) => t?,
            (None, None) => unreachable!("the scope joined the job computing x*"),
        };
        let done = done?;
        let reference = Reference::of(run, theory);
        let done = std::iter::once(unperturbed_units).chain(done);
        let records = driver.collect(done, &mine)?;
        let context = PerturbationContext::new(model, &reference, data);
        Ok(RawResult {
            context: serde_json::to_value(context)?,
            records,
        })
    }
}

/// Whether a series of `sc` perturbs relative to x* (adversarial
/// perturbations point away from it; a norm may be scaled by ‖x − x*‖), so
/// that x* must be known before the trials. Otherwise the trials need only
/// the unperturbed run, and x* (for `optimum_iterations = N`, N − B more
/// iterations of one run, serial) is computed on one worker beside them.
fn needs_optimum(sc: &PerturbationScenario) -> bool {
    sc.series.iter().any(|s| {
        s.kind == PerturbationKind::Adversarial
            || s.norm
                .is_some_and(|n| n.relative_to == NormScale::OptimumDistance)
    })
}

/// Whether x* is computed before the trials: when a series needs it
/// ([`needs_optimum`]), or when `--plan` times the setup apart from the
/// units (x* is setup, paid once; timed beside a sample unit it would be
/// scaled up with it).
fn optimum_first(sc: &PerturbationScenario, driver: &Driver<'_>) -> bool {
    needs_optimum(sc) || driver.times_setup()
}

/// Every series of `sc` can run on the model (`flat`: it has real-valued
/// parameters) and perturbs before the unperturbed run converges at `b`.
fn check_series(sc: &PerturbationScenario, flat: bool, b: usize) -> Result<()> {
    for s in &sc.series {
        if matches!(
            s.kind,
            PerturbationKind::Random | PerturbationKind::Adversarial
        ) && !flat
        {
            bail!(
                "series `{}`: a {} perturbation needs a model with real-valued parameters (qp, mlr); \
                 `{}` supports only `reset`",
                s.name,
                s.kind.name(),
                sc.model.kind_name()
            );
        }
        if let Some(iteration) = s.schedule.once_at(b)
            && iteration >= b
        {
            bail!(
                "series `{}`: the perturbation at iteration {iteration} is not before the unperturbed \
                 run converges (iteration {b}); choose an earlier iteration or a tighter criterion",
                s.name
            );
        }
    }
    Ok(())
}

/// A perturbed unit: its first perturbation's iteration, the unit, and the
/// stream that times its perturbations.
type Start = (usize, usize, SimRng);

/// The units `todo` (of `units`) split into those never perturbed before
/// the unperturbed run converges at `b` (their result is that run's) and
/// the others as (first perturbation, unit, timing stream), in order of
/// first perturbation so that a cohort's members step together from
/// nearby iterations.
fn split_unperturbed(
    sc: &PerturbationScenario,
    units: &[(usize, usize)],
    todo: &[usize],
    b: usize,
) -> (Vec<(usize, TrialResult)>, Vec<Start>) {
    let mut unperturbed: Vec<(usize, TrialResult)> = Vec::new();
    let mut starts: Vec<Start> = Vec::new();
    for &u in todo {
        let (s, t) = units[u];
        match first_perturbation(&sc.series[s], sc.meta.seed, t, b) {
            (Some(first), timing) => starts.push((first, u, timing)),
            (None, _) => unperturbed.push((
                u,
                TrialResult {
                    perturbations: Vec::new(),
                    reset_fraction: f64::NAN,
                    iterations: b,
                    converged: true,
                },
            )),
        }
    }
    starts.sort_by_key(|&(first, u, _)| (first, u));
    (unperturbed, starts)
}

/// Units journalled together (QP trials take microseconds each).
const JOURNAL_CHUNK: usize = 8;

impl PerturbationContext {
    /// The context of a run with reference quantities `reference` on `data`.
    pub(crate) fn new<M: Model>(
        model: &M,
        reference: &Reference<M::State>,
        data: &DataUsed,
    ) -> PerturbationContext {
        let states = &reference.baseline.states;
        PerturbationContext {
            reference: reference.facts(),
            baseline_metrics: reference.baseline.metrics.clone(),
            distances: reference.distances.clone(),
            step_norms: states
                .windows(2)
                .map(|w| model.distance(&w[0], &w[1]))
                .collect(),
            predictor: reference.predictor.clone(),
            dataset: data.dataset,
            provenance: data.provenance.clone(),
            size_ratio: data.size_ratio,
        }
    }
}

#[cfg(test)]
mod tests;
