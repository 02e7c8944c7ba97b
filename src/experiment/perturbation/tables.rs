//! The output tables of a `perturbation` scenario, derived from the records
//! of every unit (iteration cost, bound, ΔT and the prediction per trial).

use anyhow::{Context, Result};
use serde_json::json;

use super::{
    BASELINE_COLUMNS, PerturbationContext, SUMMARY_COLUMNS, TRIAL_COLUMNS, TrialResult, unit_names,
    units,
};
use crate::experiment::reference::ReferenceFacts;
use crate::experiment::tasks::decode_records;
use crate::experiment::{Outcome, RawResult};
use crate::report::{Table, fmt_f64};
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
