//! The online iteration-cost predictor SCAR proposes as future work (§6):
//! "by approximating c and ‖x(0) − x*‖, we may obtain a predictive model
//! which can be evaluated on-the-fly to inform decisions made by a system
//! during run-time".
//!
//! While training runs, the predictor sees only the iterates so far. It
//! never knows x*, so it estimates both unknowns of Theorem 1 from the step
//! lengths `s_k = ‖x(k+1) − x(k)‖`: if the iterates converge linearly,
//! `x(k) − x* ≈ r0·c^k·u` for a fixed direction u, then
//! `s_k ≈ r0·(1 − c)·c^k`, so a least-squares line through `ln s_k`
//! ([`LogLinearSums`]) gives `ĉ = e^slope` and
//! `r̂0 = ‖x(0) − x*‖ ≈ e^intercept / (1 − ĉ)`. Step lengths only need the
//! model's own norm ([`Model::distance`]), so this works for every model
//! (MLR, QP, LDA with its scaled total variation, …).
//!
//! At a failure at iteration T (after the first T steps were observed), a
//! recovery that perturbs the state by `‖δ‖` is predicted to cost
//! Theorem 1's bound with the estimates:
//! `log(1 + ĉ^{−T}‖δ‖ / r̂0) / log(1/ĉ)` — i.e. `log(1 + ‖δ‖/d̂_T)/log(1/ĉ)`
//! with `d̂_T = r̂0·ĉ^T` the estimated distance to the optimum at T. The
//! perturbation norms of full and of partial recovery are both known before
//! recovering (the running checkpoint and the lost blocks are), so a system
//! can compare the two predictions before choosing.

use serde::{Deserialize, Serialize};

use super::bound::DeltaT;
use super::rate::LogLinearSums;
use crate::engine::Baseline;
use crate::model::Model;

/// Fewest step lengths the predictor needs before it predicts.
pub(crate) const MIN_STEPS: usize = 3;

/// The predictor's current estimates of the two unknowns of Theorem 1.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Estimate {
    /// ĉ: the estimated linear rate.
    pub(crate) rate: f64,
    /// r̂0: the estimated ‖x(0) − x*‖.
    pub(crate) initial_distance: f64,
}

impl Estimate {
    /// Estimated distance to the optimum at iteration k, `r̂0·ĉ^k`.
    #[cfg(test)]
    pub(crate) fn distance_at(&self, k: usize) -> f64 {
        self.initial_distance * self.rate.powf(k as f64)
    }

    /// Theorem 1 with the estimates: the predicted iteration cost of one
    /// perturbation of norm `perturbation_norm` at iteration `iteration`.
    pub(crate) fn predict(&self, perturbation_norm: f64, iteration: usize) -> f64 {
        DeltaT::of(self.rate, [(iteration, perturbation_norm)]).bound(self.initial_distance)
    }

    /// Theorem 1 with the estimates for several perturbations `(ℓ, ‖δ_ℓ‖)`.
    pub(crate) fn predict_all(&self, perturbations: impl IntoIterator<Item = (usize, f64)>) -> f64 {
        DeltaT::of(self.rate, perturbations).bound(self.initial_distance)
    }
}

/// Estimates c and ‖x(0) − x*‖ from the step lengths of a run, one
/// iteration at a time (constant memory and O(1) work per iteration).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct OnlinePredictor {
    sums: LogLinearSums,
    observed: usize,
}

impl OnlinePredictor {
    /// A predictor that has seen nothing.
    pub(crate) fn new() -> OnlinePredictor {
        OnlinePredictor::default()
    }

    /// Feeds the next step length `‖x(k+1) − x(k)‖`, where k is the number
    /// of steps observed so far.
    pub(crate) fn observe_step(&mut self, step_norm: f64) {
        self.sums.add(self.observed, step_norm);
        self.observed += 1;
    }

    /// The current estimates, once at least [`MIN_STEPS`] positive step
    /// lengths were seen and they shrink (ĉ < 1); `None` before that.
    pub(crate) fn estimate(&self) -> Option<Estimate> {
        let fit = self.sums.fit(MIN_STEPS)?;
        if !(fit.rate > 0.0 && fit.rate < 1.0) {
            return None;
        }
        let initial_distance = fit.initial / (1.0 - fit.rate);
        initial_distance.is_finite().then_some(Estimate {
            rate: fit.rate,
            initial_distance,
        })
    }

    /// The predicted iteration cost of a perturbation of norm
    /// `perturbation_norm` at iteration `iteration` (see the module docs), or
    /// `None` when there is no estimate yet.
    #[cfg(test)]
    pub(crate) fn predict(&self, perturbation_norm: f64, iteration: usize) -> Option<f64> {
        self.estimate()
            .map(|e| e.predict(perturbation_norm, iteration))
    }
}

/// The predictor's estimate at every iteration of one unperturbed run:
/// `estimates[T]` is what it knew after observing x(0), …, x(T), i.e. the
/// prediction a system would make at a failure at T.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PredictorTrack {
    estimates: Vec<Option<Estimate>>,
}

impl PredictorTrack {
    /// Feeds the predictor the run `states` (x(0), x(1), …) in order.
    pub(crate) fn from_states<M: Model>(model: &M, states: &[M::State]) -> PredictorTrack {
        let mut p = OnlinePredictor::new();
        let mut estimates = Vec::with_capacity(states.len());
        estimates.push(None);
        for w in states.windows(2) {
            p.observe_step(model.distance(&w[0], &w[1]));
            estimates.push(p.estimate());
        }
        PredictorTrack { estimates }
    }

    /// The estimate after observing the run up to iteration `iteration`
    /// (the last one if the run is shorter).
    pub(crate) fn estimate_at(&self, iteration: usize) -> Option<Estimate> {
        let i = iteration.min(self.estimates.len().saturating_sub(1));
        self.estimates.get(i).copied().flatten()
    }

    /// The predicted iteration cost of a perturbation of norm
    /// `perturbation_norm` at iteration `iteration`, from the iterates up to
    /// it; NaN when the predictor has no estimate yet.
    pub(crate) fn predict(&self, perturbation_norm: f64, iteration: usize) -> f64 {
        self.estimate_at(iteration)
            .map_or(f64::NAN, |e| e.predict(perturbation_norm, iteration))
    }
}

/// Predictions for the trials of a recovery scenario: one track per
/// unperturbed run (one run shared by all trials, or one per trial index).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecoveryPredictor {
    tracks: Vec<PredictorTrack>,
}

impl RecoveryPredictor {
    /// Feeds the predictor every unperturbed run.
    pub(crate) fn new<M: Model>(model: &M, baselines: &[Baseline<M::State>]) -> RecoveryPredictor {
        RecoveryPredictor {
            tracks: baselines
                .iter()
                .map(|b| PredictorTrack::from_states(model, &b.states))
                .collect(),
        }
    }

    /// The predicted rework iterations of trial `trial` whose failure at
    /// iteration `failure_iteration` is recovered with a perturbation of norm
    /// `perturbation_norm`; NaN (an empty CSV cell) when the run so far is too
    /// short to estimate from.
    pub(crate) fn predict(
        &self,
        trial: usize,
        perturbation_norm: f64,
        failure_iteration: usize,
    ) -> f64 {
        let track = if self.tracks.len() == 1 {
            self.tracks.first()
        } else {
            self.tracks.get(trial)
        };
        track.map_or(f64::NAN, |t| {
            t.predict(perturbation_norm, failure_iteration)
        })
    }
}

/// How well predictions matched outcomes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PredictionAccuracy {
    /// Trials with a prediction.
    pub(crate) predicted: usize,
    /// Fraction of those whose outcome was at most the prediction.
    pub(crate) bounded_fraction: f64,
    /// Median of outcome / prediction over trials with a positive prediction.
    pub(crate) median_ratio: f64,
    /// Largest outcome / prediction over trials with a positive prediction.
    pub(crate) max_ratio: f64,
}

impl PredictionAccuracy {
    /// Compares `(outcome, prediction)` pairs; NaN predictions are skipped.
    pub(crate) fn of(pairs: impl IntoIterator<Item = (f64, f64)>) -> PredictionAccuracy {
        let mut predicted = 0usize;
        let mut bounded = 0usize;
        let mut ratios = Vec::new();
        for (outcome, prediction) in pairs {
            if prediction.is_nan() {
                continue;
            }
            predicted += 1;
            if outcome <= prediction {
                bounded += 1;
            }
            if prediction > 0.0 {
                ratios.push(outcome / prediction);
            }
        }
        PredictionAccuracy {
            predicted,
            bounded_fraction: if predicted == 0 {
                f64::NAN
            } else {
                bounded as f64 / predicted as f64
            },
            median_ratio: crate::stats::quantile(&ratios, 0.5),
            max_ratio: ratios.iter().copied().reduce(f64::max).unwrap_or(f64::NAN),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    /// On an exactly geometric run x(k) − x* = r0·c^k·u the predictor
    /// recovers c and r0, and its prediction equals Theorem 1's bound.
    #[test]
    fn recovers_rate_and_distance_from_steps() {
        let (c, r0): (f64, f64) = (0.9, 5.0);
        let mut p = OnlinePredictor::new();
        assert!(p.estimate().is_none());
        for k in 0..20 {
            let step = r0 * c.powi(k) * (1.0 - c);
            p.observe_step(step);
            if k + 1 < MIN_STEPS as i32 {
                assert!(p.estimate().is_none());
            }
        }
        let e = p.estimate().unwrap();
        assert_abs_diff_eq!(e.rate, c, epsilon = 1e-12);
        assert_abs_diff_eq!(e.initial_distance, r0, epsilon = 1e-9);
        assert_abs_diff_eq!(e.distance_at(10), r0 * c.powi(10), epsilon = 1e-9);
        let want = crate::theory::iteration_cost_bound(0.3 * c.powi(-12), r0, c);
        assert_abs_diff_eq!(p.predict(0.3, 12).unwrap(), want, epsilon = 1e-9);
    }

    #[test]
    fn no_estimate_while_steps_grow() {
        let mut p = OnlinePredictor::new();
        for k in 0..10 {
            p.observe_step(1.0 + k as f64);
        }
        assert!(p.estimate().is_none());
        assert!(p.predict(1.0, 10).is_none());
    }

    #[test]
    fn accuracy_counts_and_ratios() {
        let a = PredictionAccuracy::of([(1.0, 2.0), (3.0, 2.0), (0.0, 4.0), (5.0, f64::NAN)]);
        assert_eq!(a.predicted, 3);
        assert_abs_diff_eq!(a.bounded_fraction, 2.0 / 3.0);
        assert_abs_diff_eq!(a.median_ratio, 0.5);
        assert_abs_diff_eq!(a.max_ratio, 1.5);
        let none = PredictionAccuracy::of([(1.0, f64::NAN)]);
        assert_eq!(none.predicted, 0);
        assert!(none.bounded_fraction.is_nan() && none.median_ratio.is_nan());
    }
}
