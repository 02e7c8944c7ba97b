//! `run --plan` for the recovery kind: the unperturbed run and a few
//! cohort iterations, timed as the run steps them.

use anyhow::Result;

use super::super::RunOptions;
use super::*;
use crate::model::Check;

/// What `run --plan` measures: the unperturbed run, then a few cohort
/// iterations timed as the run steps them.
pub(super) fn plan(
    scenario: &RecoveryScenario,
    opts: &RunOptions,
    cache: &DataCache,
) -> Result<super::super::Plan> {
    build_and_visit(
        &scenario.model,
        cache,
        &opts.data,
        scenario.meta.seed,
        PlanVisitor { scenario, opts },
    )?
}

struct PlanVisitor<'a> {
    scenario: &'a RecoveryScenario,
    opts: &'a RunOptions,
}

impl ModelVisitor for PlanVisitor<'_> {
    type Output = Result<super::super::Plan>;

    fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Result<super::super::Plan> {
        let sc = self.scenario;
        let convergence = convergence_for(model, sc, data);
        let before = super::super::current_memory_bytes().unwrap_or(0);
        let started = std::time::Instant::now();
        let baseline = run_baseline(model, &convergence, run_seed(sc, 0))?;
        let one_baseline = started.elapsed().as_secs_f64();
        let runs = match sc.data_order {
            DataOrderMode::Shared => 1,
            DataOrderMode::PerTrial => sc.meta.trials,
        };
        let points = sc.points();
        check_failure_times(&points, std::slice::from_ref(&baseline))?;
        let units = units(sc);
        let costs: Vec<f64> = units
            .iter()
            .map(|&(p, t)| {
                (baseline.iterations() - failure_iteration(&baseline, &points[p], sc.meta.seed, t)
                    + 1) as f64
            })
            .collect();
        // What the run computes: units that share an outcome cost nothing
        // beyond their representative's (with a per-trial data order this one
        // unperturbed run stands in for each trial's). `costs` stays as the
        // run's shard balancing sees it.
        let mut computed = costs.clone();
        let mut shared_units = 0;
        if self.opts.share_identical_trials {
            let blocks = model.block_count();
            let mut prepared: Vec<Option<Prepared>> = units
                .iter()
                .map(|&(p, t)| {
                    Some(prepare(
                        baseline.iterations(),
                        &points[p],
                        sc.ps_nodes,
                        blocks,
                        sc.meta.seed,
                        t,
                    ))
                })
                .collect();
            let all: Vec<usize> = (0..units.len()).collect();
            // Along the one unperturbed run, which stands in for each
            // trial's under a per-trial data order.
            restorations(
                model,
                |_| &baseline,
                sc.meta.seed,
                (&units, &points),
                &mut prepared,
                &all,
            );
            let (_, followers) = share_identical(&all, units.len(), |u| {
                let p = prepared[u].as_ref().expect("prepared every unit");
                TrialKey::new(baseline_index(sc, units[u].1), p)
            });
            for f in followers.iter().flatten() {
                computed[*f] = 0.0;
                shared_units += 1;
            }
        }
        // A cohort's time per member and iteration, and its memory (read
        // while its states are alive).
        let after_baseline = super::super::current_memory_bytes().unwrap_or(0);
        // A cohort holds units of one unperturbed run: with a per-trial data
        // order, only the units of one trial that are still computed (all of
        // them for a model whose cohorts span data orders).
        let runs_apart = if model.cohorts_span_data_orders() {
            1
        } else {
            runs
        };
        let per_run = computed
            .iter()
            .filter(|&&c| c > 0.0)
            .count()
            .div_ceil(runs_apart);
        let size = model.cohort_size().max(1).min(per_run.max(1));
        let certify = self.opts.certify_metric.then_some(convergence.criterion);
        let (per_trial_iteration, states) = time_cohort(model, &baseline, size, certify);
        // A per-trial data order's unperturbed runs advance side by side in
        // groups ([`run_baselines`]).
        let baseline_seconds = if runs > 1 {
            let group = model.cohort_size().max(1).min(runs);
            let seeds: Vec<u64> = (0..group).map(|t| run_seed(sc, t)).collect();
            time_side_by_side(model, &baseline, &seeds) * (baseline.iterations() * runs) as f64
                / self.opts.threads as f64
        } else {
            one_baseline
        };
        let cohort_bytes = super::super::current_memory_bytes()
            .unwrap_or(0)
            .saturating_sub(after_baseline);
        drop(states);
        let baseline_bytes = after_baseline.saturating_sub(before);
        let threads = self.opts.threads as u64;
        Ok(super::super::Plan {
            baseline_iterations: baseline.iterations(),
            baseline_seconds,
            trial_seconds: computed.iter().sum::<f64>() * per_trial_iteration,
            trial_iterations: computed.iter().sum(),
            shared_units,
            memory_bytes: super::super::current_memory_bytes().unwrap_or(0)
                + baseline_bytes * (runs as u64 - 1)
                + cohort_bytes * threads.saturating_sub(1),
            unit_costs: costs,
        })
    }
}

/// Iterations the plan times after one warm-up iteration (which also gives a
/// certifying model the exact evaluation its bounds start from).
const PLAN_TIMED_ITERATIONS: usize = 2;

/// `n` copies of the unperturbed run's middle state, and that iteration.
fn mid_copies<M: Model>(
    model: &M,
    baseline: &Baseline<M::State>,
    n: usize,
) -> (Vec<M::State>, usize) {
    let k = baseline.iterations() / 2;
    let copies = (0..n)
        .map(|_| {
            let mut s = baseline.states[k].clone();
            model.rebuild_derived(&mut s);
            s
        })
        .collect();
    (copies, k)
}

/// Seconds per member and iteration of a cohort of `size` members stepped
/// from the middle of the unperturbed run through the run's convergence
/// test (certified against `criterion`, or the exact metric with `None`),
/// and the cohort's states (kept alive while the plan reads the memory).
fn time_cohort<M: Model>(
    model: &M,
    baseline: &Baseline<M::State>,
    size: usize,
    criterion: Option<f64>,
) -> (f64, Vec<M::State>) {
    let (mut states, mid) = mid_copies(model, baseline, size);
    let active = vec![true; size];
    let mut ws = model.workspace();
    let mut iterate = |states: &mut Vec<M::State>, k: usize| {
        let ctx = crate::model::IterCtx {
            iteration: k,
            run_seed: baseline.run_seed,
        };
        match criterion {
            Some(c) => {
                let mut checks = vec![Check::Above; size];
                model.check_many(states, &active, ctx, c, &mut ws, &mut checks);
            }
            None => {
                let mut out = vec![0.0; size];
                model.metric_many(states, &active, ctx, &mut ws, &mut out);
            }
        }
        model.step_many(states, &active, ctx, &mut ws);
    };
    iterate(&mut states, mid);
    let t0 = std::time::Instant::now();
    for k in 1..=PLAN_TIMED_ITERATIONS {
        iterate(&mut states, mid + k);
    }
    let seconds = t0.elapsed().as_secs_f64() / (PLAN_TIMED_ITERATIONS * size) as f64;
    (seconds, states)
}

/// Seconds per run and iteration of unperturbed runs with the data orders
/// of `seeds` stepped side by side from the middle of `baseline`, as
/// [`run_baselines`] steps them.
fn time_side_by_side<M: Model>(model: &M, baseline: &Baseline<M::State>, seeds: &[u64]) -> f64 {
    let n = seeds.len();
    let (mut states, mid) = mid_copies(model, baseline, n);
    let active = vec![true; n];
    let mut out = vec![0.0; n];
    let mut ws = model.workspace();
    let mut apart = |k: usize| {
        let next: Vec<crate::model::IterCtx> = seeds
            .iter()
            .map(|&run_seed| crate::model::IterCtx {
                iteration: k,
                run_seed,
            })
            .collect();
        model.metric_apart(&states, &active, &next, &mut ws, &mut out);
        model.step_apart(&mut states, &active, &next, &mut ws);
    };
    apart(mid);
    let t0 = std::time::Instant::now();
    for k in 1..=PLAN_TIMED_ITERATIONS {
        apart(mid + k);
    }
    t0.elapsed().as_secs_f64() / (PLAN_TIMED_ITERATIONS * n) as f64
}
