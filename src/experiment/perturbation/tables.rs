//! The output tables of a `perturbation` scenario, derived from the records
//! of every unit (iteration cost, bound, ΔT and the prediction per trial).

use anyhow::{Context, Result};
use serde_json::json;

use super::{PerturbationContext, TrialResult, unit_names, units};
use crate::experiment::reference::ReferenceFacts;
use crate::experiment::tasks::decode_records;
use crate::experiment::{Outcome, RawResult};
use crate::report::columns::perturbation::{BaselineRow, SummaryRow, TrialRow};
use crate::report::row::Row as _;
use crate::scenario::perturbation::{PerturbationScenario, Schedule};
use crate::stats::{Summary, quantile};
use crate::theory::{DeltaT, PredictionAccuracy, PredictorTrack};

/// One trial's derived numbers.
pub(super) struct Row {
    pub(super) cost: f64,
    pub(super) bound: f64,
    pub(super) delta_t: f64,
    pub(super) norm: f64,
    pub(super) predicted: f64,
}

pub(super) fn derive(
    r: &TrialResult,
    reference: &ReferenceFacts,
    predictor: &PredictorTrack,
) -> Row {
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
/// `baseline.csv`: the unperturbed run's metric, distance to the optimum,
/// step norm and the online predictor's estimates at every iteration.
fn baseline_curve(ctx: &PerturbationContext) -> crate::report::Table {
    let mut curve = BaselineRow::table();
    for (k, m) in ctx.baseline_metrics.iter().enumerate() {
        let est = ctx.predictor.estimate_at(k);
        curve.add(&BaselineRow {
            iteration: k,
            metric: *m,
            distance_to_optimum: ctx.distances[k],
            step_norm: ctx.step_norms.get(k).copied().unwrap_or(f64::NAN),
            predicted_rate: est.map_or(f64::NAN, |e| e.rate),
            predicted_initial_distance: est.map_or(f64::NAN, |e| e.initial_distance),
        });
    }
    curve
}

pub(crate) fn tables(sc: &PerturbationScenario, raw: &RawResult) -> Result<Outcome> {
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
    let mut trials = TrialRow::table();
    for ((&(s, t), r), row) in units.iter().zip(&results).zip(&rows) {
        let series = &sc.series[s];
        trials.add(&TrialRow {
            series: series.name.clone(),
            trial: t,
            perturbation: series.kind.name(),
            perturbations: r.perturbations.len(),
            first_perturbation_iteration: r.perturbations.first().map(|p| p.0),
            last_perturbation_iteration: r.perturbations.last().map(|p| p.0),
            perturbation_norm: row.norm,
            reset_fraction: r.reset_fraction,
            delta_t: row.delta_t,
            baseline_iterations: b,
            iterations_to_converge: r.iterations,
            iteration_cost: row.cost,
            converged: r.converged,
            bound: row.bound,
            rate: reference.rate,
            initial_distance: reference.initial_distance,
            predicted_cost: row.predicted,
        });
    }
    let mut summary = SummaryRow::table();
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
        let (perturbation_iteration, perturbation_probability) = match series.schedule {
            Schedule::EachIteration { probability } => (None, Some(probability)),
            ref once => (once.once_at(b), None),
        };
        let over = |f: fn(&Row) -> f64| mean(&idx.iter().map(|&i| f(&rows[i])).collect::<Vec<_>>());
        summary.add(&SummaryRow {
            scenario: sc.meta.name.clone(),
            series: series.name.clone(),
            perturbation: series.kind.name(),
            perturbation_iteration,
            perturbation_probability,
            metric: "iteration_cost",
            trials: s.n,
            mean: s.mean,
            std: s.std,
            ci95_low: s.ci95_low,
            ci95_high: s.ci95_high,
            unconverged: idx.iter().filter(|&&i| !results[i].converged).count(),
            perturbed_trials: perturbed.len(),
            bound_violations: idx
                .iter()
                .filter(|&&i| rows[i].cost > rows[i].bound)
                .count(),
            max_excess: idx
                .iter()
                .map(|&i| rows[i].cost - rows[i].bound)
                .fold(f64::NEG_INFINITY, f64::max),
            median_cost_to_bound: quantile(&ratios, 0.5),
            max_cost_to_bound: ratios.iter().copied().reduce(f64::max).unwrap_or(f64::NAN),
            mean_perturbation_norm: over(|r| r.norm),
            mean_delta_t: over(|r| r.delta_t),
            mean_bound: over(|r| r.bound),
            predicted_bounds_fraction: accuracy.bounded_fraction,
            median_cost_to_predicted: accuracy.median_ratio,
            rate: reference.rate,
            rate_method: reference.rate_method.name(),
            rate_fitted: reference.rate_fitted,
            rate_max_ratio: reference.rate_max_ratio,
            rate_analytic: reference.rate_analytic,
            initial_distance: reference.initial_distance,
            optimum_iterations: reference.optimum_iterations,
            baseline_iterations: b,
            criterion: reference.criterion,
            model: sc.model.kind_name(),
            dataset: ctx.dataset.to_string(),
            data: ctx.provenance.label().to_string(),
        });
    }
    Ok(Outcome {
        summary,
        trials,
        extra: vec![("baseline.csv".to_string(), baseline_curve(&ctx))],
        data: json!({
            "dataset": ctx.dataset,
            "provenance": ctx.provenance,
            "size_ratio": ctx.size_ratio,
        }),
        details: reference.details(),
    })
}
