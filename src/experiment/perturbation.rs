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

use anyhow::{Context, Result, bail};
use rand::RngExt;
use rand_distr::StandardNormal;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::reference::{Reference, ReferenceFacts, decode_records, reference};
use super::units::Driver;
use super::{Outcome, RawResult, RunOptions};
use crate::data::{DataCache, DatasetName, Provenance};
use crate::engine::{Baseline, Convergence, ForkMode, TrialHook, run_hooked, trial::rerun};
use crate::model::{DataUsed, FlatParams, Model, ModelVisitor, build_and_visit};
use crate::report::{Table, fmt_f64};
use crate::rng::{Purpose, SimRng, stream, stream_key};
use crate::scenario::perturbation::{
    NormScale, PerturbationKind, PerturbationScenario, PerturbationSeries, Schedule,
};
use crate::stats::{Summary, quantile};
use crate::theory::{DeltaT, PredictionAccuracy, PredictorTrack};

/// Columns of `trials.csv`, one row per trial:
/// - `series, trial`; `perturbation`: random | adversarial | reset.
/// - `perturbations`: number of perturbations injected before the run converged.
/// - `first_perturbation_iteration, last_perturbation_iteration`: ℓ of the
///   first and last (empty if none).
/// - `perturbation_norm`: Σ_ℓ ‖δ_ℓ‖ (= ‖δ‖ for a single perturbation).
/// - `reset_fraction`: fraction of the blocks reset by the first perturbation
///   (reset only).
/// - `delta_t`: Δ_T = Σ_ℓ c^{−ℓ}‖δ_ℓ‖ with the c in `rate`.
/// - `baseline_iterations` (B), `iterations_to_converge` (K, capped at
///   max_iterations), `iteration_cost` (K − B), `converged`.
/// - `bound`: Theorem 1, log(1 + Δ_T/‖x(0) − x*‖)/log(1/c).
/// - `rate` (c), `initial_distance` (‖x(0) − x*‖): the values in `bound`.
/// - `predicted_cost`: the online predictor's bound, from the unperturbed
///   iterates up to the first perturbation only (ĉ, r̂0 from step lengths).
pub const TRIAL_COLUMNS: &[&str] = &[
    "series",
    "trial",
    "perturbation",
    "perturbations",
    "first_perturbation_iteration",
    "last_perturbation_iteration",
    "perturbation_norm",
    "reset_fraction",
    "delta_t",
    "baseline_iterations",
    "iterations_to_converge",
    "iteration_cost",
    "converged",
    "bound",
    "rate",
    "initial_distance",
    "predicted_cost",
];

/// Columns of `summary.csv`, one row per series:
/// - `scenario, series, perturbation, perturbation_iteration` (one
///   perturbation) or `perturbation_probability` (ρ per iteration).
/// - `metric` (`iteration_cost`), `trials, mean, std, ci95_low, ci95_high`:
///   the iteration cost over trials.
/// - `unconverged`: trials censored at max_iterations; `perturbed_trials`:
///   trials with at least one perturbation.
/// - `bound_violations`: trials whose cost exceeds their bound;
///   `max_excess`: max over trials of cost − bound (≤ 0 when none does).
/// - `median_cost_to_bound, max_cost_to_bound`: tightness, cost/bound over
///   trials with a positive bound (1 = the bound is attained).
/// - `mean_perturbation_norm, mean_delta_t, mean_bound`.
/// - `predicted_bounds_fraction`: share of trials with cost ≤ predicted_cost;
///   `median_cost_to_predicted`: median cost/predicted_cost.
/// - `rate, rate_method, rate_fitted, rate_max_ratio, rate_analytic,
///   initial_distance, optimum_iterations, baseline_iterations, criterion`:
///   the reference quantities (see `experiment::reference`;
///   `optimum_iterations` is empty when x* is the model's known optimum).
/// - `model, dataset, data`.
pub const SUMMARY_COLUMNS: &[&str] = &[
    "scenario",
    "series",
    "perturbation",
    "perturbation_iteration",
    "perturbation_probability",
    "metric",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "unconverged",
    "perturbed_trials",
    "bound_violations",
    "max_excess",
    "median_cost_to_bound",
    "max_cost_to_bound",
    "mean_perturbation_norm",
    "mean_delta_t",
    "mean_bound",
    "predicted_bounds_fraction",
    "median_cost_to_predicted",
    "rate",
    "rate_method",
    "rate_fitted",
    "rate_max_ratio",
    "rate_analytic",
    "initial_distance",
    "optimum_iterations",
    "baseline_iterations",
    "criterion",
    "model",
    "dataset",
    "data",
];

/// Columns of `baseline.csv`, one row per iteration k of the unperturbed
/// run: `iteration, metric, distance_to_optimum` (‖x(k) − x*‖),
/// `step_norm` (‖x(k+1) − x(k)‖), and the online predictor's estimates after
/// seeing x(0..=k): `predicted_rate` (ĉ), `predicted_initial_distance` (r̂0).
pub const BASELINE_COLUMNS: &[&str] = &[
    "iteration",
    "metric",
    "distance_to_optimum",
    "step_norm",
    "predicted_rate",
    "predicted_initial_distance",
];

/// Seed of the data order shared by the unperturbed run and every trial.
pub fn run_seed(scenario: &PerturbationScenario) -> u64 {
    stream_key(scenario.meta.seed, Purpose::DataOrder, 0, 0)
}

/// The units of a scenario in output order: (series index, trial).
pub fn units(scenario: &PerturbationScenario) -> Vec<(usize, usize)> {
    let trials = scenario.meta.trials;
    (0..scenario.series.len())
        .flat_map(|s| (0..trials).map(move |t| (s, t)))
        .collect()
}

/// A readable name for every unit: `series=<s>,trial=<t>`.
pub fn unit_names(scenario: &PerturbationScenario) -> Vec<String> {
    units(scenario)
        .into_iter()
        .map(|(s, t)| format!("series={},trial={t}", scenario.series[s].name))
        .collect()
}

/// Relative expected cost of every unit before the unperturbed run is
/// known (all equal; `run_raw` balances shards by the iterations from each
/// series' first perturbation to convergence instead).
pub fn unit_costs(scenario: &PerturbationScenario) -> Vec<f64> {
    vec![1.0; units(scenario).len()]
}

/// Facts shared by all units of a run: the reference quantities, the
/// unperturbed run and the online predictor's estimates along it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PerturbationContext {
    /// c, ‖x(0) − x*‖, ε, B, … (see `experiment::reference`).
    pub reference: ReferenceFacts,
    /// Metric of x(k), k = 0..=B.
    #[serde(with = "crate::report::json_f64::vec")]
    pub baseline_metrics: Vec<f64>,
    /// ‖x(k) − x*‖, k = 0..=B.
    #[serde(with = "crate::report::json_f64::vec")]
    pub distances: Vec<f64>,
    /// ‖x(k+1) − x(k)‖, k = 0..B.
    #[serde(with = "crate::report::json_f64::vec")]
    pub step_norms: Vec<f64>,
    /// The online predictor fed the unperturbed run.
    pub predictor: PredictorTrack,
    /// The dataset.
    pub dataset: DatasetName,
    /// Real files or stand-in.
    pub provenance: Provenance,
    /// Examples used relative to the real dataset.
    pub size_ratio: f64,
}

/// Runs the units of `scenario` that `driver` assigns to this run.
pub fn run_raw(
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
pub struct TrialResult {
    /// (ℓ, ‖δ_ℓ‖) of every perturbation.
    pub perturbations: Vec<(usize, f64)>,
    /// Fraction of blocks reset by the first perturbation (NaN if not a reset).
    #[serde(with = "crate::report::json_f64")]
    pub reset_fraction: f64,
    /// K (capped at max_iterations).
    pub iterations: usize,
    /// Whether the run met ε within max_iterations.
    pub converged: bool,
}

/// Per-worker buffers (no allocation per iteration).
struct Buffers {
    params: Vec<f64>,
    noise: Vec<f64>,
    blocks: Vec<usize>,
}

/// Everything a trial reads.
struct Ctx<'a, M: Model> {
    model: &'a M,
    reference: &'a Reference<M::State>,
    flat: Option<&'a dyn FlatParams<M::State>>,
    optimum_flat: Vec<f64>,
    init: M::State,
    /// Fork trials from the unperturbed run, or re-run their prefix.
    fork: ForkMode,
}

/// When trial `trial` of `series` is first perturbed (`None`: not before the
/// unperturbed run converges at `b`), and its timing stream after drawing it.
fn first_perturbation(
    series: &PerturbationSeries,
    seed: u64,
    trial: usize,
    b: usize,
) -> (Option<usize>, SimRng) {
    let mut timing = stream(seed, Purpose::Perturbation, trial as u64, 0);
    let first = match series.schedule {
        Schedule::EachIteration { probability } => {
            (0..b).find(|_| timing.random::<f64>() < probability)
        }
        ref once => once.once_at(b),
    };
    (first, timing)
}

/// One perturbation trial in the engine's trial loop: it forks from the
/// unperturbed run at its first perturbation iteration ℓ and, after each
/// convergence check of y(k), perturbs when its schedule says so.
struct Trial<'c, 'a, M: Model> {
    ctx: &'c Ctx<'a, M>,
    series: &'a PerturbationSeries,
    first: usize,
    timing: SimRng,
    values: SimRng,
    buf: Buffers,
    /// (ℓ, ‖δ_ℓ‖) of every perturbation so far.
    perturbations: Vec<(usize, f64)>,
    reset_fraction: f64,
}

impl<M: Model> TrialHook<M> for Trial<'_, '_, M> {
    fn start(
        &mut self,
        model: &M,
        baseline: &Baseline<M::State>,
        ws: &mut M::Workspace,
    ) -> (usize, M::State) {
        let mut state = match self.ctx.fork {
            ForkMode::Fork => baseline.states[self.first].clone(),
            ForkMode::Rerun => rerun(model, self.first, baseline.run_seed, ws)
                .pop()
                .expect("x(ℓ)"),
        };
        model.rebuild_derived(&mut state);
        (self.first, state)
    }

    fn before_step(&mut self, _model: &M, k: usize, state: &mut M::State) {
        let now = k == self.first
            || match self.series.schedule {
                Schedule::Once { .. } | Schedule::AtRunFraction { .. } => false,
                Schedule::EachIteration { probability } => {
                    self.timing.random::<f64>() < probability
                }
            };
        if now {
            let (norm, fraction) =
                self.ctx
                    .perturb(self.series, state, &mut self.values, &mut self.buf);
            if self.perturbations.is_empty() {
                self.reset_fraction = fraction;
            }
            self.perturbations.push((k, norm));
        }
    }
}

impl<'a, M: Model> Ctx<'a, M> {
    /// Trial `trial` of `series`, first perturbed at `first` (its timing
    /// stream as [`first_perturbation`] left it).
    fn trial<'c>(
        &'c self,
        series: &'a PerturbationSeries,
        first: usize,
        timing: SimRng,
        seed: u64,
        trial: usize,
    ) -> Trial<'c, 'a, M> {
        Trial {
            ctx: self,
            series,
            first,
            timing,
            values: stream(seed, Purpose::Perturbation, trial as u64, 1),
            buf: self.buffers(),
            perturbations: Vec::new(),
            reset_fraction: f64::NAN,
        }
    }

    /// Runs `trials` as one cohort of the engine's trial loop.
    fn run_cohort(
        &self,
        mut trials: Vec<Trial<'_, 'a, M>>,
        convergence: &Convergence,
        certify: bool,
        ws: &mut M::Workspace,
        stop: &dyn Fn() -> bool,
    ) -> Option<Vec<TrialResult>> {
        let finished = run_hooked(
            self.model,
            &self.reference.baseline,
            convergence,
            &mut trials,
            certify,
            ws,
            stop,
        )?;
        Some(
            trials
                .into_iter()
                .zip(finished)
                .map(|(t, f)| TrialResult {
                    perturbations: t.perturbations,
                    reset_fraction: t.reset_fraction,
                    iterations: f.iterations,
                    converged: f.converged,
                })
                .collect(),
        )
    }

    /// Fresh per-trial buffers.
    fn buffers(&self) -> Buffers {
        let params = self.flat.map_or(0, |f| f.param_count());
        Buffers {
            params: vec![0.0; params],
            noise: vec![0.0; params],
            blocks: Vec::with_capacity(self.model.block_count()),
        }
    }

    /// Applies one perturbation of `series` to `state`; returns the measured
    /// ‖δ‖ and the reset fraction (NaN unless a reset).
    fn perturb(
        &self,
        series: &PerturbationSeries,
        state: &mut M::State,
        rng: &mut SimRng,
        buf: &mut Buffers,
    ) -> (f64, f64) {
        let before = state.clone();
        let u: f64 = rng.random();
        let mut fraction = f64::NAN;
        match series.kind {
            PerturbationKind::Random | PerturbationKind::Adversarial => {
                let spec = series
                    .norm
                    .expect("validated: random/adversarial have a norm");
                let flat = self.flat.expect("checked before the trials");
                let scale = match spec.relative_to {
                    NormScale::Absolute => 1.0,
                    NormScale::OptimumDistance => {
                        self.model.distance(state, &self.reference.optimum)
                    }
                };
                let target = spec.draw.at(u) * scale;
                flat.read_params(state, &mut buf.params);
                if series.kind == PerturbationKind::Random {
                    for z in buf.noise.iter_mut() {
                        *z = rng.sample(StandardNormal);
                    }
                } else {
                    for ((d, p), o) in buf
                        .noise
                        .iter_mut()
                        .zip(&buf.params)
                        .zip(&self.optimum_flat)
                    {
                        *d = p - o;
                    }
                }
                let len = buf.noise.iter().map(|v| v * v).sum::<f64>().sqrt();
                if len > 0.0 {
                    let s = target / len;
                    for (p, d) in buf.params.iter_mut().zip(&buf.noise) {
                        *p += s * d;
                    }
                    flat.write_params(state, &buf.params);
                }
            }
            PerturbationKind::Reset => {
                let draw = series.fraction.expect("validated: reset has a fraction");
                let f = draw.at(u);
                let n = self.model.block_count();
                let count = ((f * n as f64).round() as usize).clamp(1, n);
                fraction = f;
                buf.blocks.clear();
                buf.blocks.extend(0..n);
                // Partial Fisher–Yates: the first `count` entries are a uniform subset.
                for i in 0..count {
                    let j = rng.random_range(i..n);
                    buf.blocks.swap(i, j);
                }
                for &blk in &buf.blocks[..count] {
                    self.model.copy_block(&self.init, state, blk);
                }
            }
        }
        self.model.rebuild_derived(state);
        (self.model.distance(&before, state), fraction)
    }
}

impl ModelVisitor for Visitor<'_> {
    type Output = Result<RawResult>;

    fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Result<RawResult> {
        let sc = self.scenario;
        let driver = self.driver;
        let run_seed = run_seed(sc);
        let reference = reference(
            model,
            &sc.model,
            sc.criterion,
            sc.max_iterations,
            &sc.theory,
            data.size_ratio,
            run_seed,
        )?;
        let b = reference.baseline_iterations();
        let flat = model.flat_params();
        for s in &sc.series {
            if matches!(
                s.kind,
                PerturbationKind::Random | PerturbationKind::Adversarial
            ) && flat.is_none()
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
        let params = flat.map_or(0, |f| f.param_count());
        let mut optimum_flat = vec![0.0; params];
        if let Some(f) = flat {
            f.read_params(&reference.optimum, &mut optimum_flat);
        }
        let ctx = Ctx {
            model,
            reference: &reference,
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
        let mut records: Vec<(usize, serde_json::Value)> = Vec::new();
        let mut starts: Vec<(usize, usize, SimRng)> = Vec::new();
        for &u in &todo {
            let (s, t) = units[u];
            match first_perturbation(&sc.series[s], seed, t, b) {
                (Some(first), timing) => starts.push((first, u, timing)),
                (None, _) => records.push((
                    u,
                    serde_json::to_value(TrialResult {
                        perturbations: Vec::new(),
                        reset_fraction: f64::NAN,
                        iterations: b,
                        converged: true,
                    })?,
                )),
            }
        }
        driver.finished(&records)?;
        starts.sort_by_key(|&(first, u, _)| (first, u));
        // Cohorts of the model's size (a naive one-at-a-time loop with
        // `--rerun`); a task of one-trial cohorts takes several, so that tiny
        // trials (QP) are journalled together.
        let size = match self.opts.fork_mode {
            ForkMode::Fork => model.cohort_size().max(1),
            ForkMode::Rerun => 1,
        };
        let task = if size == 1 { JOURNAL_CHUNK } else { size };
        let convergence = Convergence {
            criterion: reference.criterion,
            max_iterations: sc.max_iterations,
        };
        let certify = self.opts.certify_metric;
        let stop = || driver.cancelled();
        let done: Vec<Vec<(usize, serde_json::Value)>> = starts
            .par_chunks(task)
            .map_init(
                || model.workspace(),
                |ws, chunk| -> Result<Vec<(usize, serde_json::Value)>> {
                    let mut records = Vec::with_capacity(chunk.len());
                    for cohort in chunk.chunks(size) {
                        if driver.cancelled() {
                            return Ok(Vec::new());
                        }
                        let trials = cohort
                            .iter()
                            .map(|(first, u, timing)| {
                                let (s, t) = units[*u];
                                ctx.trial(&sc.series[s], *first, timing.clone(), seed, t)
                            })
                            .collect();
                        let Some(results) =
                            ctx.run_cohort(trials, &convergence, certify, ws, &stop)
                        else {
                            return Ok(Vec::new());
                        };
                        for ((_, u, _), r) in cohort.iter().zip(results) {
                            records.push((*u, serde_json::to_value(r)?));
                        }
                    }
                    driver.finished(&records)?;
                    Ok(records)
                },
            )
            .collect::<Result<_>>()?;
        let done: Vec<Vec<(usize, serde_json::Value)>> =
            std::iter::once(records).chain(done).collect();
        let records = driver.collect(done, &mine)?;
        let context = PerturbationContext::new(model, &reference, data);
        Ok(RawResult {
            context: serde_json::to_value(context)?,
            records,
        })
    }
}

/// Units journalled together (QP trials take microseconds each).
const JOURNAL_CHUNK: usize = 8;

impl PerturbationContext {
    /// The context of a run with reference quantities `reference` on `data`.
    pub fn new<M: Model>(
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

/// One trial's derived numbers.
struct Row {
    cost: f64,
    bound: f64,
    delta_t: f64,
    norm: f64,
    predicted: f64,
}

fn derive(r: &TrialResult, reference: &ReferenceFacts, predictor: &PredictorTrack) -> Row {
    let b = reference.baseline_iterations;
    let dt = DeltaT::of(reference.rate, r.perturbations.iter().copied());
    let predicted = match r.perturbations.first() {
        None => 0.0,
        Some(&(first, _)) => predictor
            .estimate_at(first)
            .map_or(f64::NAN, |e| e.predict_all(r.perturbations.iter().copied())),
    };
    Row {
        cost: r.iterations as f64 - b as f64,
        bound: dt.bound(reference.initial_distance),
        delta_t: dt.value(),
        norm: r.perturbations.iter().map(|p| p.1).sum(),
        predicted,
    }
}

/// Builds the output tables from the records of every unit.
pub fn tables(sc: &PerturbationScenario, raw: &RawResult) -> Result<Outcome> {
    let ctx: PerturbationContext = serde_json::from_value(raw.context.clone())
        .context("malformed perturbation context (was it written by another version?)")?;
    let units = units(sc);
    let results: Vec<TrialResult> = decode_records(&unit_names(sc), raw)?;
    let reference = &ctx.reference;
    let b = reference.baseline_iterations;
    let rows: Vec<Row> = results
        .iter()
        .map(|r| derive(r, reference, &ctx.predictor))
        .collect();
    let mut trials = Table::new(TRIAL_COLUMNS.iter().copied());
    for ((&(s, t), r), row) in units.iter().zip(&results).zip(&rows) {
        let series = &sc.series[s];
        let opt = |v: Option<&(usize, f64)>| v.map_or(String::new(), |p| p.0.to_string());
        trials.push(vec![
            series.name.clone(),
            t.to_string(),
            series.kind.name().to_string(),
            r.perturbations.len().to_string(),
            opt(r.perturbations.first()),
            opt(r.perturbations.last()),
            fmt_f64(row.norm),
            fmt_f64(r.reset_fraction),
            fmt_f64(row.delta_t),
            b.to_string(),
            r.iterations.to_string(),
            fmt_f64(row.cost),
            r.converged.to_string(),
            fmt_f64(row.bound),
            fmt_f64(reference.rate),
            fmt_f64(reference.initial_distance),
            fmt_f64(row.predicted),
        ]);
    }
    let mut summary = Table::new(SUMMARY_COLUMNS.iter().copied());
    let mean = |v: &[f64]| {
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    for (si, series) in sc.series.iter().enumerate() {
        let idx: Vec<usize> = (0..units.len()).filter(|&i| units[i].0 == si).collect();
        let costs: Vec<f64> = idx.iter().map(|&i| rows[i].cost).collect();
        let s = Summary::of(&costs);
        let violations = idx
            .iter()
            .filter(|&&i| rows[i].cost > rows[i].bound)
            .count();
        let max_excess = idx
            .iter()
            .map(|&i| rows[i].cost - rows[i].bound)
            .fold(f64::NEG_INFINITY, f64::max);
        let ratios: Vec<f64> = idx
            .iter()
            .filter(|&&i| rows[i].bound > 0.0)
            .map(|&i| rows[i].cost / rows[i].bound)
            .collect();
        let perturbed: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| !results[i].perturbations.is_empty())
            .collect();
        let accuracy =
            PredictionAccuracy::of(perturbed.iter().map(|&i| (rows[i].cost, rows[i].predicted)));
        let (at, p) = match series.schedule {
            Schedule::EachIteration { probability } => (String::new(), fmt_f64(probability)),
            ref once => (
                once.once_at(b).map_or(String::new(), |i| i.to_string()),
                String::new(),
            ),
        };
        summary.push(vec![
            sc.meta.name.clone(),
            series.name.clone(),
            series.kind.name().to_string(),
            at,
            p,
            "iteration_cost".to_string(),
            s.n.to_string(),
            fmt_f64(s.mean),
            fmt_f64(s.std),
            fmt_f64(s.ci95_low),
            fmt_f64(s.ci95_high),
            idx.iter()
                .filter(|&&i| !results[i].converged)
                .count()
                .to_string(),
            perturbed.len().to_string(),
            violations.to_string(),
            fmt_f64(max_excess),
            fmt_f64(quantile(&ratios, 0.5)),
            fmt_f64(ratios.iter().copied().reduce(f64::max).unwrap_or(f64::NAN)),
            fmt_f64(mean(&idx.iter().map(|&i| rows[i].norm).collect::<Vec<_>>())),
            fmt_f64(mean(
                &idx.iter().map(|&i| rows[i].delta_t).collect::<Vec<_>>(),
            )),
            fmt_f64(mean(
                &idx.iter().map(|&i| rows[i].bound).collect::<Vec<_>>(),
            )),
            fmt_f64(accuracy.bounded_fraction),
            fmt_f64(accuracy.median_ratio),
            fmt_f64(reference.rate),
            reference.rate_method.name().to_string(),
            fmt_f64(reference.rate_fitted),
            fmt_f64(reference.rate_max_ratio),
            fmt_f64(reference.rate_analytic),
            fmt_f64(reference.initial_distance),
            reference
                .optimum_iterations
                .map_or(String::new(), |n| n.to_string()),
            b.to_string(),
            fmt_f64(reference.criterion),
            sc.model.kind_name().to_string(),
            ctx.dataset.to_string(),
            ctx.provenance.label().to_string(),
        ]);
    }
    let mut curve = Table::new(BASELINE_COLUMNS.iter().copied());
    for (k, m) in ctx.baseline_metrics.iter().enumerate() {
        let step = ctx.step_norms.get(k).copied().unwrap_or(f64::NAN);
        let est = ctx.predictor.estimate_at(k);
        curve.push(vec![
            k.to_string(),
            fmt_f64(*m),
            fmt_f64(ctx.distances[k]),
            fmt_f64(step),
            fmt_f64(est.map_or(f64::NAN, |e| e.rate)),
            fmt_f64(est.map_or(f64::NAN, |e| e.initial_distance)),
        ]);
    }
    Ok(Outcome {
        summary,
        trials,
        extra: vec![("baseline.csv".to_string(), curve)],
        data: json!({
            "dataset": ctx.dataset,
            "provenance": ctx.provenance,
            "size_ratio": ctx.size_ratio,
        }),
        details: reference.details(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelSpec;
    use crate::model::qp::{OPTIMUM, Qp, QpConfig};
    use crate::scenario::perturbation::{CriterionSpec, Draw, NormSpec, RateMethod, TheorySpec};
    use approx::assert_abs_diff_eq;

    fn qp_reference(qp: &Qp) -> Reference<crate::model::qp::QpState> {
        reference(
            qp,
            &ModelSpec::Qp {
                step_size: 0.01,
                x0: [0.0; 4],
            },
            CriterionSpec::UnperturbedIterations(300),
            2000,
            &TheorySpec {
                optimum: crate::scenario::perturbation::OptimumSpec::Analytic,
                rate: RateMethod::Analytic,
            },
            1.0,
            0,
        )
        .unwrap()
    }

    fn series(kind: PerturbationKind, norm: f64, fraction: f64) -> PerturbationSeries {
        PerturbationSeries {
            name: kind.name().into(),
            kind,
            schedule: Schedule::Once { iteration: 100 },
            norm: (kind != PerturbationKind::Reset).then_some(NormSpec {
                draw: Draw::Fixed { value: norm },
                relative_to: NormScale::Absolute,
            }),
            fraction: (kind == PerturbationKind::Reset).then_some(Draw::Fixed { value: fraction }),
        }
    }

    /// Each perturbation kind has the norm it was asked for, measured as the
    /// change of the state, and the direction its definition says.
    #[test]
    fn perturbation_kinds_have_their_norms() {
        let qp = Qp::new(&QpConfig {
            step_size: 0.01,
            x0: [0.0; 4],
        });
        let r = qp_reference(&qp);
        assert_eq!(r.baseline_iterations(), 300);
        assert_abs_diff_eq!(r.rate, 0.99);
        assert_abs_diff_eq!(r.initial_distance, 2.0, epsilon = 1e-12);
        let ctx = Ctx {
            model: &qp,
            reference: &r,
            flat: qp.flat_params(),
            optimum_flat: OPTIMUM.to_vec(),
            init: qp.init(),
            fork: ForkMode::Fork,
        };
        let mut buf = Buffers {
            params: vec![0.0; 4],
            noise: vec![0.0; 4],
            blocks: Vec::new(),
        };
        let x = r.baseline.states[100];
        let before = qp.metric(&x, &mut ());
        // Random: ‖δ‖ = 0.3 exactly, directions differ between draws.
        let mut rng = stream(1, Purpose::Perturbation, 0, 1);
        let mut a = x;
        let (n, f) = ctx.perturb(
            &series(PerturbationKind::Random, 0.3, 0.0),
            &mut a,
            &mut rng,
            &mut buf,
        );
        assert_abs_diff_eq!(n, 0.3, epsilon = 1e-14);
        assert!(f.is_nan());
        let mut b = x;
        ctx.perturb(
            &series(PerturbationKind::Random, 0.3, 0.0),
            &mut b,
            &mut rng,
            &mut buf,
        );
        assert!(qp.distance(&a, &b) > 1e-3, "two random directions");
        // Adversarial: straight away from x*, so the distance grows by ‖δ‖.
        let mut c = x;
        let (n, _) = ctx.perturb(
            &series(PerturbationKind::Adversarial, 0.3, 0.0),
            &mut c,
            &mut rng,
            &mut buf,
        );
        assert_abs_diff_eq!(n, 0.3, epsilon = 1e-14);
        assert_abs_diff_eq!(qp.metric(&c, &mut ()), before + 0.3, epsilon = 1e-12);
        // Reset half of the 4 coordinates to x(0) = 0: ‖δ‖ = √2·x_i(100).
        let mut d = x;
        let (n, f) = ctx.perturb(
            &series(PerturbationKind::Reset, 0.0, 0.5),
            &mut d,
            &mut rng,
            &mut buf,
        );
        assert_eq!(f, 0.5);
        assert_eq!(d.x.iter().filter(|v| **v == 0.0).count(), 2);
        assert_abs_diff_eq!(n, 2f64.sqrt() * x.x[0], epsilon = 1e-12);
        assert_abs_diff_eq!(x.x[0], 1.0 - 0.99f64.powi(100), epsilon = 1e-12);
    }

    /// An adversarial perturbation on the QP (x(0) − x* on the slowest
    /// eigenvector) attains Theorem 1's bound up to integer rounding.
    #[test]
    fn adversarial_qp_trial_sits_at_the_bound() {
        let qp = Qp::new(&QpConfig {
            step_size: 0.01,
            x0: [0.0; 4],
        });
        let r = qp_reference(&qp);
        let ctx = Ctx {
            model: &qp,
            reference: &r,
            flat: qp.flat_params(),
            optimum_flat: OPTIMUM.to_vec(),
            init: qp.init(),
            fork: ForkMode::Fork,
        };
        let convergence = Convergence {
            criterion: r.criterion,
            max_iterations: 2000,
        };
        for norm in [1e-3, 0.05, 0.7] {
            let s = series(PerturbationKind::Adversarial, norm, 0.0);
            let (first, timing) = first_perturbation(&s, 5, 0, r.baseline_iterations());
            let trial = ctx.trial(&s, first.expect("once"), timing, 5, 0);
            let t = ctx
                .run_cohort(vec![trial], &convergence, true, &mut (), &|| false)
                .expect("not stopped")
                .remove(0);
            let row = derive(&t, &r.facts(), &r.predictor);
            assert!(t.converged);
            assert!(row.cost <= row.bound, "{} > {}", row.cost, row.bound);
            assert!(row.cost > row.bound - 1.0, "{} vs {}", row.cost, row.bound);
        }
    }
}
