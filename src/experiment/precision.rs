//! Runs a `precision` scenario: gradient descent (or any model with flat
//! parameters) whose state is stored with a p-bit mantissa (SCAR Example
//! 2.1), i.e. a perturbation in every iteration (Example 3.3, Appendix B.1).
//!
//! In SCAR's notation (eq. 2), `y(k)` is the exact output of an iteration
//! and the stored state is `y(k) + δ_k = round_p(y(k))`, so
//! `y(k+1) = f(round_p(y(k)))` and `δ_k = round_p(y(k)) − y(k)`
//! (y(0) = x(0)). Appendix B.1 bounds the error of `y(k)`:
//! `‖y(k) − x*‖ ≤ c^k‖x(0) − x*‖ + c/(1−c)·Δ` when every ‖δ_k‖ ≤ Δ, so the
//! floor is at most `c/(1−c)·Δ` once the transient `c^k‖x(0) − x*‖` has
//! died out. A run records:
//! - the **error floor**: max ‖y(k) − x*‖ over the last `tail` iterations
//!   (and the same for the stored state, whose bound is one Δ higher,
//!   Δ/(1−c));
//! - Δ two ways: the paper's a-priori `2^{−(p−1)}·max_k‖y(k)‖` (Example
//!   2.1) and the measured `max_k ‖δ_k‖`; the predicted floor is
//!   `c/(1−c)·Δ` for each;
//! - the iterations to ε and Appendix B.1's cost bound.
//!
//! The rounding is [`round_to_mantissa`] (round to nearest, ties to even).
//! The model's own arithmetic is f64 (53 bits), whose rounding is a further
//! perturbation of about 2^{−53}|y| per operation that the prediction does not
//! count: at p close to 53 it is of the same size as the rounding studied.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::budget::{CURVE_POINT_BYTES, mul};
use super::kind::Experiment;
use super::reference::{ReferenceFacts, Sharing, reference};
use super::tasks::decode_records;
use super::units::Driver;
use super::{Outcome, RawResult, RunOptions};
use crate::data::{DataCache, DatasetName, Provenance};
use crate::engine::{Baseline, Convergence, TrialHook, run_hooked};
use crate::model::{DataUsed, FlatParams, Model, ModelVisitor, build_and_visit};
use crate::report::columns::precision::{BaselineRow, SummaryRow, TraceRow, TrialRow};
use crate::report::row::Row as _;
use crate::rng::run_seed;
use crate::scenario::PrecisionScenario;
use crate::theory::scar::precision::round_all;
use crate::theory::{
    infinite_perturbation_cost_bound, irreducible_error, rounding_perturbation_bound,
};

impl Experiment for PrecisionScenario {
    fn points_and_trials(&self) -> (u64, u64) {
        // One deterministic run per mantissa width.
        (self.precision.mantissa_bits.len() as u64, 1)
    }

    fn unit_names(&self) -> Vec<String> {
        unit_names(self)
    }

    fn unit_costs(&self) -> Vec<f64> {
        vec![1.0; self.precision.mantissa_bits.len()]
    }

    fn datasets(&self) -> Vec<DatasetName> {
        Some(self.model.dataset())
            .filter(|d| *d != DatasetName::None)
            .into_iter()
            .collect()
    }

    fn extra_bytes(&self) -> u64 {
        // A trace of at most 1,000 iterations per width, and the reference
        // run's curves.
        let widths = self.precision.mantissa_bits.len() as u64;
        mul(widths, mul(1000, 4 * CURVE_POINT_BYTES))
            .saturating_add(mul(self.max_iterations as u64, 32))
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
        let spec = &mut self.precision;
        let factor = (spec.iterations as f64 / work).max(1.0);
        if factor > 1.0 {
            spec.iterations = work as usize;
            spec.tail = spec.tail.min(spec.iterations / 2).max(1);
        }
        factor
    }
}

/// A readable name for every unit (one per mantissa width): `mantissa_bits=<p>`.
pub(crate) fn unit_names(scenario: &PrecisionScenario) -> Vec<String> {
    scenario
        .precision
        .mantissa_bits
        .iter()
        .map(|p| format!("mantissa_bits={p}"))
        .collect()
}

/// Facts shared by all units of a run: the reference quantities and the
/// unperturbed run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PrecisionContext {
    /// c, ‖x(0) − x*‖, ε, B, … (see `experiment::reference`).
    pub(crate) reference: ReferenceFacts,
    /// Metric of x(k), k = 0..=B.
    #[serde(with = "crate::report::json_f64::vec")]
    pub(crate) baseline_metrics: Vec<f64>,
    /// ‖x(k) − x*‖, k = 0..=B.
    #[serde(with = "crate::report::json_f64::vec")]
    pub(crate) distances: Vec<f64>,
    /// The dataset.
    pub(crate) dataset: DatasetName,
    /// Real files or stand-in.
    pub(crate) provenance: Provenance,
    /// Examples used relative to the real dataset.
    pub(crate) size_ratio: f64,
}

/// Runs the mantissa widths of `scenario` that `driver` assigns to this run.
fn run_raw(
    scenario: &PrecisionScenario,
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
            driver,
            opts,
        },
    )?
}

struct Visitor<'a> {
    scenario: &'a PrecisionScenario,
    driver: &'a Driver<'a>,
    opts: &'a RunOptions,
}

/// One reduced-precision run (the record of a unit).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PrecisionRun {
    /// p.
    pub(crate) bits: u32,
    /// Measured Δ = max_k ‖δ_k‖.
    pub(crate) max_rounding: f64,
    /// max_k ‖y(k)‖ (flat parameters).
    pub(crate) max_state_norm: f64,
    /// max ‖y(k) − x*‖ over the tail.
    pub(crate) floor: f64,
    /// max ‖round_p(y(k)) − x*‖ over the tail.
    pub(crate) stored_floor: f64,
    /// First k with metric(y(k)) ≤ ε.
    pub(crate) converged_at: Option<usize>,
    /// (k, ‖y(k) − x*‖, ‖δ_k‖) at evenly spaced k.
    pub(crate) trace: Vec<(usize, f64, f64)>,
}

/// A reduced-precision run as a trial of the engine's iteration loop
/// ([`run_hooked`]): it starts at x(0) and, before each step, measures the
/// exact iterate y(k) and stores it rounded to a p-bit mantissa (SCAR
/// Ex. 2.1: y(k+1) = f(round_p(y(k)))). It runs past convergence to the
/// last iteration, to measure the error floor over the tail.
struct Rounded<'a, M: Model> {
    flat: &'a dyn FlatParams<M::State>,
    optimum: &'a M::State,
    bits: u32,
    tail_start: usize,
    stride: usize,
    params: Vec<f64>,
    run: PrecisionRun,
}

impl<M: Model> TrialHook<M> for Rounded<'_, M> {
    fn start(
        &mut self,
        model: &M,
        _baseline: &Baseline<M::State>,
        _ws: &mut M::Workspace,
    ) -> (usize, M::State) {
        (0, model.init())
    }

    fn before_step(&mut self, model: &M, k: usize, y: &mut M::State) {
        // y holds y(k), the exact output of the last iteration.
        let run = &mut self.run;
        let error = model.distance(y, self.optimum);
        self.flat.read_params(y, &mut self.params);
        let norm = self.params.iter().map(|v| v * v).sum::<f64>().sqrt();
        run.max_state_norm = run.max_state_norm.max(norm);
        let exact = y.clone();
        round_all(&mut self.params, self.bits);
        self.flat.write_params(y, &self.params);
        model.rebuild_derived(y);
        let rounding = model.distance(&exact, y);
        run.max_rounding = run.max_rounding.max(rounding);
        if k >= self.tail_start {
            run.floor = run.floor.max(error);
            run.stored_floor = run.stored_floor.max(model.distance(y, self.optimum));
        }
        if k.is_multiple_of(self.stride) {
            run.trace.push((k, error, rounding));
        }
    }

    fn runs_past_convergence(&self) -> bool {
        true
    }
}

impl ModelVisitor for Visitor<'_> {
    type Output = Result<RawResult>;

    fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Result<RawResult> {
        let sc = self.scenario;
        let driver = self.driver;
        let Some(flat) = model.flat_params() else {
            bail!(
                "reduced precision needs a model with real-valued parameters (qp, mlr); `{}` has none",
                sc.model.kind_name()
            );
        };
        let run_seed = run_seed(sc.meta.seed, 0);
        let reference = reference(
            model,
            &sc.model,
            sc.criterion,
            sc.max_iterations,
            &sc.theory,
            data.size_ratio,
            run_seed,
            self.opts.shared_outcomes.as_deref().map(|cache| Sharing {
                cache,
                seed: sc.meta.seed,
                data,
                data_opts: &self.opts.data,
            }),
        )?;
        let spec = &sc.precision;
        let n = flat.param_count();
        let stride = spec.iterations.div_ceil(1000).max(1);
        let (mine, todo) = driver.assign(&vec![1.0; spec.mantissa_bits.len()]);
        // Every width runs to `iterations`, past convergence (see `Rounded`).
        let convergence = Convergence {
            criterion: reference.criterion,
            max_iterations: spec.iterations,
        };
        let certify = self.opts.certify_metric;
        // One width per task, each with its own workspace.
        let done = driver.run_units(
            &todo,
            1,
            || (),
            |_, u| {
                let mut ws = model.workspace();
                let mut hook = [Rounded {
                    flat,
                    optimum: &reference.optimum,
                    bits: spec.mantissa_bits[u],
                    tail_start: spec.iterations - spec.tail,
                    stride,
                    params: vec![0.0; n],
                    run: PrecisionRun {
                        bits: spec.mantissa_bits[u],
                        max_rounding: 0.0,
                        max_state_norm: 0.0,
                        floor: 0.0,
                        stored_floor: 0.0,
                        converged_at: None,
                        trace: Vec::new(),
                    },
                }];
                let finish = run_hooked(
                    model,
                    &reference.baseline,
                    &convergence,
                    &mut hook,
                    certify,
                    &mut ws,
                    &|| false,
                )
                .and_then(|f| f.first().copied())
                .expect("a run that is never stopped finishes");
                let [Rounded { mut run, .. }] = hook;
                // The loop also checks y(iterations), which the run does
                // not count: it measures y(0), …, y(iterations − 1).
                run.converged_at = (finish.converged && finish.iterations < spec.iterations)
                    .then_some(finish.iterations);
                Ok(run)
            },
        )?;
        let records = driver.collect(done, &mine)?;
        let context = PrecisionContext {
            reference: reference.facts(),
            baseline_metrics: reference.baseline.metrics.clone(),
            distances: reference.distances.clone(),
            dataset: data.dataset,
            provenance: data.provenance.clone(),
            size_ratio: data.size_ratio,
        };
        Ok(RawResult {
            context: serde_json::to_value(context)?,
            records,
        })
    }
}

/// Builds the output tables from the records of every unit.
fn tables(sc: &PrecisionScenario, raw: &RawResult) -> Result<Outcome> {
    let ctx: PrecisionContext = serde_json::from_value(raw.context.clone())
        .context("malformed precision context (was it written by another version?)")?;
    let runs: Vec<PrecisionRun> = decode_records(&unit_names(sc), raw)?;
    let reference = &ctx.reference;
    let spec = &sc.precision;
    let c = reference.rate;
    let r0 = reference.initial_distance;
    let b = reference.baseline_iterations;
    let transient = r0 * c.powf((spec.iterations - spec.tail) as f64);
    let mut trials = TrialRow::table();
    let mut summary = SummaryRow::table();
    let mut trace = TraceRow::table();
    for r in &runs {
        let predicted_delta = rounding_perturbation_bound(r.bits, r.max_state_norm);
        let predicted_floor = irreducible_error(c, predicted_delta);
        let measured_floor = irreducible_error(c, r.max_rounding);
        let within = r.floor <= predicted_floor + transient;
        let cost = r.converged_at.map(|k| k as f64 - b as f64);
        let cost_bound =
            infinite_perturbation_cost_bound(c, predicted_delta, r0, reference.criterion);
        trials.add(&TrialRow {
            mantissa_bits: r.bits,
            iterations: spec.iterations,
            tail: spec.tail,
            max_rounding_norm: r.max_rounding,
            predicted_delta,
            error_floor: r.floor,
            stored_error_floor: r.stored_floor,
            predicted_floor,
            predicted_floor_measured_delta: measured_floor,
            transient,
            floor_within_prediction: within,
            iterations_to_converge: r.converged_at,
            iteration_cost: cost,
            cost_bound,
            rate: c,
            initial_distance: r0,
            criterion: reference.criterion,
            baseline_iterations: b,
        });
        summary.add(&SummaryRow {
            scenario: sc.meta.name.clone(),
            series: "round-to-nearest",
            x_name: "mantissa_bits",
            x: r.bits,
            metric: "error_floor",
            trials: 1,
            mean: r.floor,
            std: None,
            ci95_low: None,
            ci95_high: None,
            predicted_floor,
            predicted_floor_measured_delta: measured_floor,
            floor_within_prediction: within,
            iteration_cost: cost,
            cost_bound,
            rate: c,
            rate_method: reference.rate_method.name(),
            rate_analytic: reference.rate_analytic,
            model: sc.model.kind_name(),
            dataset: ctx.dataset.to_string(),
            data: ctx.provenance.label().to_string(),
        });
        for &(k, d, rd) in &r.trace {
            trace.add(&TraceRow {
                mantissa_bits: r.bits,
                iteration: k,
                distance_to_optimum: d,
                rounding_norm: rd,
            });
        }
    }
    let mut curve = BaselineRow::table();
    for (k, m) in ctx.baseline_metrics.iter().enumerate() {
        curve.add(&BaselineRow {
            iteration: k,
            metric: *m,
            distance_to_optimum: ctx.distances[k],
        });
    }
    Ok(Outcome {
        summary,
        trials,
        extra: vec![
            ("trace.csv".to_string(), trace),
            ("baseline.csv".to_string(), curve),
        ],
        data: json!({
            "dataset": ctx.dataset,
            "provenance": ctx.provenance,
            "size_ratio": ctx.size_ratio,
        }),
        details: reference.details(),
    })
}
