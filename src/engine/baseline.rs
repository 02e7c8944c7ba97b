//! The unperturbed run: x(0), x(1), …, x(B) where B is the first iteration
//! whose metric meets the criterion. Trials fork from its states.

use anyhow::{Result, bail};
use rayon::prelude::*;

use super::Convergence;
use crate::model::{IterCtx, Model};

/// An unperturbed trajectory.
#[derive(Clone, Debug)]
pub struct Baseline<S> {
    /// `states[k]` = x(k) for k = 0..=B.
    pub(crate) states: Vec<S>,
    /// `metrics[k]` = metric of x(k).
    pub(crate) metrics: Vec<f64>,
    /// Seed of the run's data order (shared by every trial forked from it).
    pub(crate) run_seed: u64,
}

impl<S> Baseline<S> {
    /// A run with no recorded states, for trials that start from x(0)
    /// themselves ([`super::TrialHook::start`]): only its data order
    /// (`run_seed`) is shared.
    pub(crate) fn starting(run_seed: u64) -> Baseline<S> {
        Baseline {
            states: Vec::new(),
            metrics: Vec::new(),
            run_seed,
        }
    }

    /// B: iterations the unperturbed run needs to converge.
    pub(crate) fn iterations(&self) -> usize {
        self.states.len() - 1
    }

    /// Metric of the converged state x(B).
    pub(crate) fn final_metric(&self) -> f64 {
        *self.metrics.last().expect("non-empty baseline")
    }
}

/// Runs the model from x(0) until it meets the criterion, keeping every state.
/// Fails with advice if it does not converge within `max_iterations`.
pub(crate) fn run_baseline<M: Model>(
    model: &M,
    convergence: &Convergence,
    run_seed: u64,
) -> Result<Baseline<M::State>> {
    RunStart::new(model, run_seed).finish(model, convergence)
}

/// The first states of an unperturbed run, recorded before its criterion is
/// known (a criterion set from the run's own metric, SCAR §5.2's "converges
/// in n iterations"): x(0..=k) with their metrics, and the live x(k) with its
/// workspace. [`RunStart::finish`] continues it to the criterion, so the
/// prefix is stepped once; the result is exactly [`run_baseline`]'s (the same
/// steps and metrics in the same order on the same workspace).
pub(crate) struct RunStart<M: Model> {
    state: M::State,
    ws: M::Workspace,
    states: Vec<M::State>,
    metrics: Vec<f64>,
    run_seed: u64,
}

impl<M: Model> RunStart<M> {
    /// x(0), not yet measured.
    pub(crate) fn new(model: &M, run_seed: u64) -> RunStart<M> {
        RunStart {
            state: model.init(),
            ws: model.workspace(),
            states: Vec::new(),
            metrics: Vec::new(),
            run_seed,
        }
    }

    /// Steps to x(`k`) (if not there yet), recording each state and metric;
    /// returns the metric of x(`k`).
    pub(crate) fn advance_to(&mut self, model: &M, k: usize) -> f64 {
        while self.states.len() <= k {
            self.record_next(model);
        }
        self.metrics[k]
    }

    /// Records the next state: x(0) as built, else one step past the last.
    fn record_next(&mut self, model: &M) {
        if let Some(k) = self.states.len().checked_sub(1) {
            model.step(
                &mut self.state,
                IterCtx {
                    iteration: k,
                    run_seed: self.run_seed,
                },
                &mut self.ws,
            );
        }
        let m = model.metric(&self.state, &mut self.ws);
        self.states.push(model.snapshot(&self.state));
        self.metrics.push(m);
    }

    /// The run until its first state whose metric meets the criterion
    /// (states recorded past it are dropped). Fails with advice if it
    /// diverges or does not converge within `max_iterations`.
    pub(crate) fn finish(
        mut self,
        model: &M,
        convergence: &Convergence,
    ) -> Result<Baseline<M::State>> {
        let mut best = f64::INFINITY;
        for k in 0..=convergence.max_iterations {
            if k == self.states.len() {
                self.record_next(model);
            }
            let m = self.metrics[k];
            if !m.is_finite() {
                bail!(
                    "the unperturbed run diverged: the metric is {m} at iteration {k}; lower the learning rate"
                );
            }
            best = best.min(m);
            if m <= convergence.criterion {
                self.states.truncate(k + 1);
                self.metrics.truncate(k + 1);
                return Ok(Baseline {
                    states: self.states,
                    metrics: self.metrics,
                    run_seed: self.run_seed,
                });
            }
        }
        Err(not_converged(convergence, best))
    }
}

/// The unperturbed runs of several data orders (one per seed of `run_seeds`),
/// each exactly what [`run_baseline`] gives for its seed, in that order.
///
/// The runs advance side by side in groups of [`Model::cohort_size`]: at each
/// iteration the metrics of a group's unfinished runs come from one
/// [`Model::metric_apart`] (MLR stacks their weights into one wide product
/// over the training set, the cost of a per-trial data order's unperturbed
/// runs, and keeps each run's minibatch deltas), then each run takes its own
/// step with its own data order ([`Model::step_apart`]). Groups
/// run in parallel. When runs fail, the error of the first failing seed in
/// `run_seeds` order is returned.
pub(crate) fn run_baselines<M: Model>(
    model: &M,
    convergence: &Convergence,
    run_seeds: &[u64],
) -> Result<Vec<Baseline<M::State>>> {
    each_baseline(model, convergence, run_seeds)
        .into_iter()
        .collect()
}

/// [`run_baselines`], with each run's own result.
fn each_baseline<M: Model>(
    model: &M,
    convergence: &Convergence,
    run_seeds: &[u64],
) -> Vec<Result<Baseline<M::State>>> {
    let size = model.cohort_size().max(1);
    let groups: Vec<Vec<Result<Baseline<M::State>>>> = run_seeds
        .par_chunks(size)
        .map(|seeds| lockstep(model, convergence, seeds))
        .collect();
    groups.into_iter().flatten().collect()
}

/// [`run_baselines`] for one group of seeds.
fn lockstep<M: Model>(
    model: &M,
    convergence: &Convergence,
    run_seeds: &[u64],
) -> Vec<Result<Baseline<M::State>>> {
    let n = run_seeds.len();
    let mut ws = model.workspace();
    let mut states: Vec<M::State> = (0..n).map(|_| model.init()).collect();
    let mut runs: Vec<Option<Result<Baseline<M::State>>>> = (0..n).map(|_| None).collect();
    let mut kept: Vec<(Vec<M::State>, Vec<f64>, f64)> = (0..n)
        .map(|_| (Vec::new(), Vec::new(), f64::INFINITY))
        .collect();
    let mut out = vec![0.0; n];
    let mut stepping = vec![false; n];
    for k in 0..=convergence.max_iterations {
        let active: Vec<bool> = runs.iter().map(Option::is_none).collect();
        if !active.contains(&true) {
            break;
        }
        let next: Vec<IterCtx> = run_seeds
            .iter()
            .map(|&run_seed| IterCtx {
                iteration: k,
                run_seed,
            })
            .collect();
        model.metric_apart(&states, &active, &next, &mut ws, &mut out);
        stepping.fill(false);
        for i in (0..n).filter(|&i| active[i]) {
            let m = out[i];
            let (trajectory, metrics, best) = &mut kept[i];
            if !m.is_finite() {
                runs[i] = Some(Err(anyhow::anyhow!(
                    "the unperturbed run diverged: the metric is {m} at iteration {k}; lower the learning rate"
                )));
                continue;
            }
            *best = best.min(m);
            trajectory.push(model.snapshot(&states[i]));
            metrics.push(m);
            if m <= convergence.criterion {
                runs[i] = Some(Ok(Baseline {
                    states: std::mem::take(trajectory),
                    metrics: std::mem::take(metrics),
                    run_seed: run_seeds[i],
                }));
            } else {
                stepping[i] = k < convergence.max_iterations;
            }
        }
        model.step_apart(&mut states, &stepping, &next, &mut ws);
    }
    runs.into_iter()
        .zip(kept)
        .map(|(run, (_, _, best))| run.unwrap_or_else(|| Err(not_converged(convergence, best))))
        .collect()
}

/// The error of a run that did not meet the criterion in time.
fn not_converged(convergence: &Convergence, best: f64) -> anyhow::Error {
    anyhow::anyhow!(
        "the unperturbed run did not reach the criterion {} within max_iterations = {} (best metric {best}); \
         raise max_iterations or loosen the criterion (`scarsim baseline` prints the whole curve)",
        convergence.criterion,
        convergence.max_iterations
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::data::synthetic;
    use crate::model::mlr::{Mlr, MlrConfig};

    /// The unperturbed run written out: x(0), its metric, a step, its
    /// metric… to the first metric at or below `criterion` (at most
    /// `max_iterations` steps), on one state and workspace; `None` when it
    /// does not get there.
    fn brute_force_run<M: Model>(
        model: &M,
        criterion: f64,
        max_iterations: usize,
        run_seed: u64,
    ) -> Option<(Vec<M::State>, Vec<u64>)> {
        let mut ws = model.workspace();
        let mut state = model.init();
        let (mut states, mut metrics) = (Vec::new(), Vec::new());
        for k in 0..=max_iterations {
            if k > 0 {
                let ctx = IterCtx {
                    iteration: k - 1,
                    run_seed,
                };
                model.step(&mut state, ctx, &mut ws);
            }
            let m = model.metric(&state, &mut ws);
            states.push(state.clone());
            metrics.push(m.to_bits());
            if m <= criterion {
                return Some((states, metrics));
            }
        }
        None
    }

    /// A run whose first states were recorded before its criterion was known
    /// (`advance_to`, as a criterion set from the run's own metric does) ends
    /// exactly where and as the run written out does: prefixes shorter than
    /// the run, as long, longer (states past convergence dropped) and longer
    /// than `max_iterations` (not converged).
    #[test]
    fn a_run_continued_from_its_recorded_start_equals_the_run_written_out() {
        let data = Arc::new(synthetic::mnist_like(5, 0.02));
        let model = Mlr::new(
            data,
            &MlrConfig {
                batch_size: 100,
                learning_rate: 1e-5,
            },
        );
        let seed = 77;
        let mut probe = RunStart::new(&model, seed);
        let criterion = probe.advance_to(&model, 6) * (1.0 - 1e-9);
        let mut checked = 0;
        for max_iterations in [9, 4] {
            let expected = brute_force_run(&model, criterion, max_iterations, seed);
            for prefix in [0, 3, 6, 8, 11] {
                let mut start = RunStart::new(&model, seed);
                if prefix > 0 {
                    start.advance_to(&model, prefix);
                }
                let got = start.finish(
                    &model,
                    &Convergence {
                        criterion,
                        max_iterations,
                    },
                );
                match (&expected, got) {
                    (Some((states, metrics)), Ok(b)) => {
                        assert_eq!(&b.states, states, "prefix {prefix}");
                        let bits: Vec<u64> = b.metrics.iter().map(|m| m.to_bits()).collect();
                        assert_eq!(&bits, metrics, "prefix {prefix}");
                        assert_eq!(b.run_seed, seed);
                        checked += 1;
                    }
                    (None, Err(e)) => {
                        assert!(e.to_string().contains("did not reach"), "{e}");
                        checked += 1;
                    }
                    (e, g) => panic!(
                        "prefix {prefix}, max {max_iterations}: written out converges {}, continued {}",
                        e.is_some(),
                        g.is_ok()
                    ),
                }
            }
        }
        assert_eq!(checked, 10);
        // The criterion was chosen so that the run converges within 9 but
        // not within 4 steps, so both endings were compared.
        assert!(brute_force_run(&model, criterion, 9, seed).is_some());
        assert!(brute_force_run(&model, criterion, 4, seed).is_none());
    }

    /// Runs side by side give every run's states and metrics bit for bit as
    /// run alone, including runs that converge at different iterations and
    /// runs that do not converge at all.
    #[test]
    fn lockstep_baselines_equal_single_runs() {
        let data = Arc::new(synthetic::mnist_like(5, 0.02));
        let model = Mlr::new(
            data,
            &MlrConfig {
                batch_size: 100,
                learning_rate: 1e-5,
            },
        );
        let seeds: Vec<u64> = (0..9).map(|s| 1000 + 7 * s).collect();
        // The criterion: the median over the runs of the metric at iteration
        // 6, so that runs converge at different iterations or not by 9.
        let mut at6: Vec<f64> = seeds
            .iter()
            .map(|&seed| {
                let mut ws = model.workspace();
                let mut state = model.init();
                for k in 0..6 {
                    model.step(
                        &mut state,
                        IterCtx {
                            iteration: k,
                            run_seed: seed,
                        },
                        &mut ws,
                    );
                }
                model.metric(&state, &mut ws)
            })
            .collect();
        at6.sort_by(f64::total_cmp);
        let convergence = Convergence {
            criterion: at6[seeds.len() / 2],
            max_iterations: 9,
        };
        let together = run_baselines(&model, &convergence, &seeds);
        let alone: Vec<Result<Baseline<_>>> = seeds
            .iter()
            .map(|&seed| run_baseline(&model, &convergence, seed))
            .collect();
        // With any failure, the batch call reports the first failing seed's error.
        let first_error = alone
            .iter()
            .find_map(|r| r.as_ref().err().map(|e| e.to_string()));
        match (&together, first_error) {
            (Err(e), Some(first)) => assert_eq!(e.to_string(), first),
            (Ok(_), None) => {}
            (t, f) => panic!("batch {:?} but first single error {f:?}", t.as_ref().err()),
        }
        // Every run, converged or not.
        assert!(
            model.cohort_size() >= seeds.len(),
            "one group of every seed"
        );
        let each = each_baseline(&model, &convergence, &seeds);
        let mut lengths = Vec::new();
        for ((seed, a), b) in seeds.iter().zip(&alone).zip(each) {
            match (a, b) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.states, b.states);
                    let bits = |m: &[f64]| m.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&a.metrics), bits(&b.metrics));
                    assert_eq!(a.run_seed, b.run_seed);
                    lengths.push(a.iterations());
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!(
                    "seed {seed}: alone ok {} together ok {}",
                    a.is_ok(),
                    b.is_ok()
                ),
            }
        }
        lengths.sort();
        lengths.dedup();
        assert!(
            lengths.len() >= 2,
            "runs converge at different iterations: {lengths:?}"
        );
    }
}
