//! The unperturbed run: x(0), x(1), …, x(B) where B is the first iteration
//! whose metric meets the criterion. Trials fork from its states.

use anyhow::{Result, bail};

use super::Convergence;
use crate::model::{IterCtx, Model};

/// An unperturbed trajectory.
#[derive(Clone, Debug)]
pub struct Baseline<S> {
    /// `states[k]` = x(k) for k = 0..=B.
    pub states: Vec<S>,
    /// `metrics[k]` = metric of x(k).
    pub metrics: Vec<f64>,
    /// Seed of the run's data order (shared by every trial forked from it).
    pub run_seed: u64,
}

impl<S> Baseline<S> {
    /// B: iterations the unperturbed run needs to converge.
    pub fn iterations(&self) -> usize {
        self.states.len() - 1
    }

    /// Metric of the converged state x(B).
    pub fn final_metric(&self) -> f64 {
        *self.metrics.last().expect("non-empty baseline")
    }
}

/// Runs the model from x(0) until it meets the criterion, keeping every state.
/// Fails with advice if it does not converge within `max_iterations`.
pub fn run_baseline<M: Model>(
    model: &M,
    convergence: &Convergence,
    run_seed: u64,
) -> Result<Baseline<M::State>> {
    let mut ws = model.workspace();
    let mut state = model.init();
    let mut states = Vec::new();
    let mut metrics = Vec::new();
    let mut best = f64::INFINITY;
    for k in 0..=convergence.max_iterations {
        let m = model.metric(&state, &mut ws);
        if !m.is_finite() {
            bail!(
                "the unperturbed run diverged: the metric is {m} at iteration {k}; lower the learning rate"
            );
        }
        best = best.min(m);
        states.push(model.snapshot(&state));
        metrics.push(m);
        if m <= convergence.criterion {
            return Ok(Baseline {
                states,
                metrics,
                run_seed,
            });
        }
        if k < convergence.max_iterations {
            model.step(
                &mut state,
                IterCtx {
                    iteration: k,
                    run_seed,
                },
                &mut ws,
            );
        }
    }
    bail!(
        "the unperturbed run did not reach the criterion {} within max_iterations = {} (best metric {best}); \
         raise max_iterations or loosen the criterion (`scarsim baseline` prints the whole curve)",
        convergence.criterion,
        convergence.max_iterations
    )
}
