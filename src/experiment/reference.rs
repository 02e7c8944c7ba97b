//! The reference quantities of SCAR's iteration-cost theory for one model
//! run: the unperturbed run x(0), …, x(B) to ε, the estimated optimum x*,
//! the distances ‖x(k) − x*‖, and the linear rate c (§3, Theorem 1).
//! Shared by the `perturbation` and `precision` kinds.
//!
//! How each is obtained (the paper only says "c is determined empirically"):
//! - ε: given, or set just below the metric of x(n−1) so that the unperturbed
//!   run converges at iteration n ([`CriterionSpec`]).
//! - x*: `optimum = "analytic"` uses the model's known optimum (QP: A⁻¹b,
//!   exact in binary); `optimum_iterations = N` continues the unperturbed run
//!   (same data order) to N iterations and takes x* := x(N) — for MLR the
//!   model trained 20× longer than the run under study. (Continuing the QP
//!   run stops ~1e-14 short of x*: the f64 arithmetic of a gradient step has
//!   its own floor, which matters at p ≈ 52 in the precision kind.)
//! - c: `max-ratio` (default) = max_k ‖x(k+1) − x*‖/‖x(k) − x*‖ over the
//!   unperturbed run k = 0..B, the smallest c with which assumption (3)
//!   holds at every measured step; `fitted` = e^slope of the least-squares
//!   line through ln‖x(k) − x*‖ for k = 0..=B (the average rate; all three
//!   are reported); `analytic` = the model's known rate (QP).
//! - ‖x(0) − x*‖: the model's own norm ([`Model::distance`]) between x(0) and x*.

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::shared_outcomes::{LongRunKey, SharedOutcomes};
use crate::data::DataOptions;
use crate::engine::{Baseline, Convergence, RunStart};
use crate::model::DataUsed;
use crate::model::{IterCtx, Model, ModelSpec};
use crate::scenario::perturbation::{
    CriterionSpec, OptimumSpec, RateMethod, TheorySpec, analytic_optimum, analytic_rate,
};
use crate::theory::{PredictorTrack, fit_geometric_rate, max_ratio_rate};

/// Relative margin of ε below metric(x(n−1)) for `unperturbed_iterations = n`.
pub(crate) const CRITERION_MARGIN: f64 = 1e-9;

/// The unperturbed run and the theory's reference quantities.
pub(crate) struct Reference<S> {
    /// x(0), …, x(B).
    pub(crate) baseline: Baseline<S>,
    /// ε as used.
    pub(crate) criterion: f64,
    /// The optimum x* (known, or estimated as x(N)).
    pub(crate) optimum: S,
    /// N, when x* = x(N) (None: the known optimum).
    pub(crate) optimum_iterations: Option<usize>,
    /// The metric of x*.
    pub(crate) optimum_metric: f64,
    /// ‖x(k) − x*‖ for k = 0..=B.
    pub(crate) distances: Vec<f64>,
    /// The least-squares rate over `distances`.
    pub(crate) rate_fitted: f64,
    /// The largest one-step ratio over `distances`.
    pub(crate) rate_max_ratio: f64,
    /// The model's known rate (NaN if none).
    pub(crate) rate_analytic: f64,
    /// The rate used in the bounds (per `theory.rate`).
    pub(crate) rate: f64,
    /// How `rate` was chosen.
    pub(crate) rate_method: RateMethod,
    /// ‖x(0) − x*‖.
    pub(crate) initial_distance: f64,
    /// The online predictor fed the unperturbed run.
    pub(crate) predictor: PredictorTrack,
}

/// Where a long-run x* may have been computed already: the other scenarios
/// of this process (`reproduce`), and what keys the run besides the model.
#[derive(Clone, Copy)]
pub(crate) struct Sharing<'a> {
    /// The process's store of shared work.
    pub(crate) cache: &'a SharedOutcomes,
    /// The scenario seed (it also seeds stand-ins and model builds).
    pub(crate) seed: u64,
    /// The data the model was built on.
    pub(crate) data: &'a DataUsed,
    /// How that data was obtained.
    pub(crate) data_opts: &'a DataOptions,
}

/// The unperturbed run to ε: all a trial needs unless it is perturbed
/// relative to x*.
pub(crate) struct Unperturbed<S> {
    /// x(0), …, x(B).
    pub(crate) baseline: Baseline<S>,
    /// ε as used.
    pub(crate) criterion: f64,
}

/// x* and what the theory derives from it and the unperturbed run (the
/// fields of [`Reference`] of the same names).
pub(crate) struct Theory<S> {
    optimum: S,
    optimum_iterations: Option<usize>,
    optimum_metric: f64,
    distances: Vec<f64>,
    rate_fitted: f64,
    rate_max_ratio: f64,
    rate_analytic: f64,
    rate: f64,
    rate_method: RateMethod,
    initial_distance: f64,
    predictor: PredictorTrack,
}

impl<S> Theory<S> {
    /// The optimum x*.
    pub(crate) fn optimum(&self) -> &S {
        &self.optimum
    }
}

impl<S> Reference<S> {
    /// The unperturbed run and its theory as one.
    pub(crate) fn of(unperturbed: Unperturbed<S>, theory: Theory<S>) -> Reference<S> {
        Reference {
            baseline: unperturbed.baseline,
            criterion: unperturbed.criterion,
            optimum: theory.optimum,
            optimum_iterations: theory.optimum_iterations,
            optimum_metric: theory.optimum_metric,
            distances: theory.distances,
            rate_fitted: theory.rate_fitted,
            rate_max_ratio: theory.rate_max_ratio,
            rate_analytic: theory.rate_analytic,
            rate: theory.rate,
            rate_method: theory.rate_method,
            initial_distance: theory.initial_distance,
            predictor: theory.predictor,
        }
    }
}

/// Runs the unperturbed run to ε, continues it to estimate x*, and
/// estimates c (see the module docs): [`unperturbed`], then [`theory`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn reference<M: Model>(
    model: &M,
    spec: &ModelSpec,
    criterion: CriterionSpec,
    max_iterations: usize,
    theory_spec: &TheorySpec,
    size_ratio: f64,
    run_seed: u64,
    sharing: Option<Sharing<'_>>,
) -> Result<Reference<M::State>> {
    let u = unperturbed(model, criterion, max_iterations, size_ratio, run_seed)?;
    let t = theory(model, spec, theory_spec, &u, sharing, &|| false)?;
    Ok(Reference::of(u, t))
}

/// The unperturbed run to ε. `size_ratio` scales a given ε for scaled-down
/// stand-ins, as the recovery kind does.
pub(crate) fn unperturbed<M: Model>(
    model: &M,
    criterion: CriterionSpec,
    max_iterations: usize,
    size_ratio: f64,
    run_seed: u64,
) -> Result<Unperturbed<M::State>> {
    let mut start = RunStart::new(model, run_seed);
    let epsilon = criterion_value(model, &mut start, criterion, size_ratio)?;
    let baseline = start.finish(
        model,
        &Convergence {
            criterion: epsilon,
            max_iterations,
        },
    )?;
    Ok(Unperturbed {
        baseline,
        criterion: epsilon,
    })
}

/// x* (the run continued, or the model's known optimum), the distances
/// ‖x(k) − x*‖ along the unperturbed run and the rate c. With `sharing`, a
/// long-run x* another scenario computed from the same run is taken instead
/// of running it again (the same state: the run's steps do not depend on ε).
/// When `stop()` turns true the long run ends early with an error.
pub(crate) fn theory<M: Model>(
    model: &M,
    spec: &ModelSpec,
    theory: &TheorySpec,
    unperturbed: &Unperturbed<M::State>,
    sharing: Option<Sharing<'_>>,
    stop: &dyn Fn() -> bool,
) -> Result<Theory<M::State>> {
    let mut ws = model.workspace();
    let baseline = &unperturbed.baseline;
    let run_seed = baseline.run_seed;
    let b = baseline.iterations();
    let optimum = match (&theory.optimum, sharing) {
        (&OptimumSpec::LongRun { iterations }, Some(sh)) => {
            let key =
                LongRunKey::new::<M>(spec, sh.seed, sh.data, sh.data_opts, run_seed, iterations)?;
            sh.cache.long_run(&key, || {
                estimate_optimum(model, &mut ws, spec, theory, baseline, stop)
            })?
        }
        _ => estimate_optimum(model, &mut ws, spec, theory, baseline, stop)?,
    };
    let optimum_iterations = match theory.optimum {
        OptimumSpec::LongRun { iterations } => Some(iterations),
        OptimumSpec::Analytic => None,
    };
    let optimum_metric = model.metric(&optimum, &mut ws);
    let distances: Vec<f64> = baseline
        .states
        .iter()
        .map(|s| model.distance(s, &optimum))
        .collect();
    let initial_distance = distances[0];
    if !(initial_distance > 0.0 && initial_distance.is_finite()) {
        bail!("‖x(0) − x*‖ = {initial_distance}: the run starts at its estimated optimum");
    }
    let rate_fitted = fit_geometric_rate(&distances).map_or(f64::NAN, |f| f.rate);
    let rate_max_ratio = max_ratio_rate(&distances).unwrap_or(f64::NAN);
    let rate_analytic = analytic_rate(spec).unwrap_or(f64::NAN);
    let rate = match theory.rate {
        RateMethod::Fitted => rate_fitted,
        RateMethod::MaxRatio => rate_max_ratio,
        RateMethod::Analytic => rate_analytic,
    };
    if !(rate > 0.0 && rate < 1.0) {
        bail!(
            "the {} rate c = {rate} is not in (0, 1): the unperturbed run does not contract towards \
             the estimated optimum over its {b} iterations (fitted {rate_fitted}, max-ratio {rate_max_ratio}); \
             Theorem 1 needs 0 < c < 1 — estimate x* from a longer run or choose another theory.rate",
            theory.rate.name()
        );
    }
    let predictor = PredictorTrack::from_states(model, &baseline.states);
    Ok(Theory {
        optimum,
        optimum_iterations,
        optimum_metric,
        distances,
        rate_fitted,
        rate_max_ratio,
        rate_analytic,
        rate,
        rate_method: theory.rate,
        initial_distance,
        predictor,
    })
}

/// The criterion ε: the scenario's value scaled to the data's size, or the
/// metric the unperturbed run reaches after n − 1 iterations less
/// [`CRITERION_MARGIN`] (so that it converges at iteration n).
fn criterion_value<M: Model>(
    model: &M,
    start: &mut RunStart<M>,
    criterion: CriterionSpec,
    size_ratio: f64,
) -> Result<f64> {
    match criterion {
        CriterionSpec::Value(e) => Ok(e * size_ratio),
        CriterionSpec::UnperturbedIterations(n) => {
            let m = start.advance_to(model, n - 1);
            if !(m.is_finite() && m > 0.0) {
                bail!(
                    "cannot set ε from the unperturbed run: the metric of x({}) is {m}",
                    n - 1
                );
            }
            Ok(m * (1.0 - CRITERION_MARGIN))
        }
    }
}

/// x*: the unperturbed run continued well past convergence, or the model's
/// known optimum.
fn estimate_optimum<M: Model>(
    model: &M,
    ws: &mut M::Workspace,
    spec: &ModelSpec,
    theory: &TheorySpec,
    baseline: &Baseline<M::State>,
    stop: &dyn Fn() -> bool,
) -> Result<M::State> {
    let b = baseline.iterations();
    let run_seed = baseline.run_seed;
    match theory.optimum {
        OptimumSpec::LongRun { iterations: n } => {
            if n <= b {
                bail!(
                    "theory.optimum_iterations = {n} must exceed the {b} iterations the unperturbed run \
                     needs: x* is estimated by running well past convergence"
                );
            }
            let mut optimum = baseline.states[b].clone();
            model.rebuild_derived(&mut optimum);
            for k in b..n {
                if stop() {
                    bail!("stopped while estimating x* (iteration {k} of {n})");
                }
                model.step(
                    &mut optimum,
                    IterCtx {
                        iteration: k,
                        run_seed,
                    },
                    ws,
                );
            }
            Ok(optimum)
        }
        OptimumSpec::Analytic => {
            let (Some(values), Some(flat)) = (analytic_optimum(spec), model.flat_params()) else {
                bail!("`{}` has no known optimum", spec.kind_name());
            };
            let mut optimum = model.init();
            flat.write_params(&mut optimum, &values);
            model.rebuild_derived(&mut optimum);
            Ok(optimum)
        }
    }
}

impl<S> Reference<S> {
    /// B: iterations the unperturbed run needs.
    pub(crate) fn baseline_iterations(&self) -> usize {
        self.baseline.iterations()
    }

    /// The scalar facts, without the states (what a run's context keeps).
    pub(crate) fn facts(&self) -> ReferenceFacts {
        ReferenceFacts {
            criterion: self.criterion,
            baseline_iterations: self.baseline_iterations(),
            baseline_final_metric: self.baseline.final_metric(),
            optimum_iterations: self.optimum_iterations,
            optimum_metric: self.optimum_metric,
            initial_distance: self.initial_distance,
            rate: self.rate,
            rate_method: self.rate_method,
            rate_fitted: self.rate_fitted,
            rate_max_ratio: self.rate_max_ratio,
            rate_analytic: self.rate_analytic,
        }
    }
}

/// The scalar reference quantities of a run (see the module docs), as the
/// context of a sharded or resumed run stores them. NaN fields (a rate
/// that does not exist) are written as JSON `null`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ReferenceFacts {
    /// ε as used.
    pub(crate) criterion: f64,
    /// B.
    pub(crate) baseline_iterations: usize,
    /// Metric of x(B).
    pub(crate) baseline_final_metric: f64,
    /// N, when x* = x(N) (None: the known optimum).
    pub(crate) optimum_iterations: Option<usize>,
    /// The metric of x*.
    pub(crate) optimum_metric: f64,
    /// ‖x(0) − x*‖.
    pub(crate) initial_distance: f64,
    /// The rate used in the bounds.
    pub(crate) rate: f64,
    /// How `rate` was chosen.
    pub(crate) rate_method: RateMethod,
    /// The least-squares rate.
    #[serde(with = "crate::report::json_f64")]
    pub(crate) rate_fitted: f64,
    /// The largest one-step ratio.
    #[serde(with = "crate::report::json_f64")]
    pub(crate) rate_max_ratio: f64,
    /// The model's known rate (NaN if none).
    #[serde(with = "crate::report::json_f64")]
    pub(crate) rate_analytic: f64,
}

impl ReferenceFacts {
    /// The reference facts for a manifest.
    pub(crate) fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "criterion_used": self.criterion,
            "baseline_iterations": self.baseline_iterations,
            "baseline_final_metric": self.baseline_final_metric,
            "optimum": if self.optimum_iterations.is_some() { "long-run" } else { "analytic" },
            "optimum_iterations": self.optimum_iterations,
            "optimum_metric": self.optimum_metric,
            "initial_distance": self.initial_distance,
            "rate": self.rate,
            "rate_method": self.rate_method.name(),
            "rate_fitted": if self.rate_fitted.is_nan() { None } else { Some(self.rate_fitted) },
            "rate_max_ratio": if self.rate_max_ratio.is_nan() { None } else { Some(self.rate_max_ratio) },
            "rate_analytic": if self.rate_analytic.is_nan() { None } else { Some(self.rate_analytic) },
        })
    }
}
