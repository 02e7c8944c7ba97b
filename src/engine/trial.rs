//! One failure trial: fork from the unperturbed run at the failure iteration,
//! recover, and train to convergence. The iteration cost ("rework
//! iterations", SCAR eq. 4) is the iterations to converge minus the
//! unperturbed run's.

use super::{Baseline, Convergence};
use crate::model::{Check, IterCtx, Model};
use crate::policy::{
    CheckpointPolicy, EventOrder, RecoveryOutcome, RecoveryPolicy, RunningCheckpoint,
};
use crate::rng::SimRng;

/// How a trial obtains x(T).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForkMode {
    /// Copy x(T) (and the checkpoints before T) from the unperturbed run.
    Fork,
    /// Re-run iterations 0..T from x(0), evaluating the metric every
    /// iteration as a naive simulator would. Gives identical results; exists
    /// to measure what forking saves and to test that it is exact.
    Rerun,
}

/// How the engine runs trials (the same results either way; the choices
/// exist to measure what the shortcuts save and to test that they are exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineOptions {
    /// How a trial obtains x(T).
    pub fork: ForkMode,
    /// Let the model certify "not converged yet" without evaluating the
    /// metric ([`Model::check_many`]); `false` evaluates it at every
    /// iteration (the brute-force path).
    pub certify: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            fork: ForkMode::Fork,
            certify: true,
        }
    }
}

/// Everything that distinguishes one trial from another.
pub struct TrialSetup<'a> {
    /// T: the failure strikes after x(T) is computed.
    pub failure_iteration: usize,
    /// The blocks the failure loses (sorted).
    pub lost: &'a [usize],
    /// Checkpoint policy in force before the failure.
    pub checkpoint: &'a CheckpointPolicy,
    /// Whether a checkpoint due at T is written before the failure at T.
    pub order: EventOrder,
    /// How the failure is recovered from.
    pub recovery: RecoveryPolicy,
    /// Randomness of the `random` checkpoint selector.
    pub checkpoint_rng: SimRng,
}

/// What happened in one trial.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrialOutcome {
    /// T.
    pub failure_iteration: usize,
    /// Number of blocks the failure lost.
    pub lost_blocks: usize,
    /// B: iterations the unperturbed run needs.
    pub baseline_iterations: usize,
    /// Iterations the perturbed run needs (counted from x(0); capped at
    /// `max_iterations` when it does not converge).
    pub iterations_to_converge: usize,
    /// Whether the perturbed run met the criterion before `max_iterations`.
    pub converged: bool,
    /// What recovery did.
    pub recovery: RecoveryOutcome,
}

impl TrialOutcome {
    /// Iteration cost of the failure: iterations_to_converge − B (may be negative).
    pub fn rework_iterations(&self) -> i64 {
        self.iterations_to_converge as i64 - self.baseline_iterations as i64
    }
}

/// Runs one trial.
pub fn run_trial<M: Model>(
    model: &M,
    baseline: &Baseline<M::State>,
    convergence: &Convergence,
    setup: TrialSetup<'_>,
    opts: EngineOptions,
    ws: &mut M::Workspace,
) -> TrialOutcome {
    run_cohort(model, baseline, convergence, vec![setup], opts, ws, &|| {
        false
    })
    .and_then(|mut v| v.pop())
    .expect("one outcome per setup")
}

/// Runs several trials that fork from the same unperturbed run, advancing
/// them in lockstep by iteration so that the model can serve them together
/// ([`Model::metric_many`], [`Model::step_many`]). A trial joins at its
/// failure iteration and leaves when it converges. Each trial's outcome is
/// exactly what [`run_trial`] gives it alone. `stop` is polled every
/// iteration; when it returns true the cohort is abandoned (`None`).
pub fn run_cohort<M: Model>(
    model: &M,
    baseline: &Baseline<M::State>,
    convergence: &Convergence,
    setups: Vec<TrialSetup<'_>>,
    opts: EngineOptions,
    ws: &mut M::Workspace,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<TrialOutcome>> {
    let run_seed = baseline.run_seed;
    let n = setups.len();
    let mut states = Vec::with_capacity(n);
    let mut starts = Vec::with_capacity(n);
    let mut recoveries = Vec::with_capacity(n);
    let mut lost_blocks = Vec::with_capacity(n);
    for mut setup in setups {
        let t = setup.failure_iteration;
        let rerun_prefix;
        let prefix: &[M::State] = match opts.fork {
            ForkMode::Fork => &baseline.states[..=t],
            ForkMode::Rerun => {
                rerun_prefix = rerun(model, t, run_seed, ws);
                &rerun_prefix
            }
        };
        let checkpoint = RunningCheckpoint::replay(
            model,
            prefix,
            setup.checkpoint,
            setup.order.checkpoints_before(t),
            &mut setup.checkpoint_rng,
        );
        let mut state = prefix[t].clone();
        recoveries.push(
            setup
                .recovery
                .apply(model, &mut state, &checkpoint, setup.lost, t),
        );
        states.push(state);
        starts.push(t);
        lost_blocks.push(setup.lost.len());
    }
    // done[i] = (iterations to converge, converged)
    let mut done: Vec<Option<(usize, bool)>> = vec![None; n];
    let mut active = vec![false; n];
    let mut checks = vec![Check::Above; n];
    let mut metrics = vec![0.0; n];
    let mut k = starts.iter().copied().min().unwrap_or(0);
    while done.iter().any(Option::is_none) {
        if stop() {
            return None;
        }
        for i in 0..n {
            active[i] = done[i].is_none() && starts[i] <= k;
        }
        let ctx = IterCtx {
            iteration: k,
            run_seed,
        };
        if opts.certify {
            model.check_many(
                &states,
                &active,
                ctx,
                convergence.criterion,
                ws,
                &mut checks,
            );
        } else {
            model.metric_many(&states, &active, ctx, ws, &mut metrics);
            for i in 0..n {
                checks[i] = Check::Exact(metrics[i]);
            }
        }
        for i in 0..n {
            if !active[i] {
                continue;
            }
            let m = match checks[i] {
                Check::Exact(m) => m,
                // Not converged, and finite: only the iteration cap applies.
                Check::Above => {
                    if k >= convergence.max_iterations {
                        done[i] = Some((convergence.max_iterations, false));
                        active[i] = false;
                    }
                    continue;
                }
            };
            if m <= convergence.criterion {
                done[i] = Some((k, true));
                active[i] = false;
            } else if k >= convergence.max_iterations || !m.is_finite() {
                done[i] = Some((convergence.max_iterations, false));
                active[i] = false;
            }
        }
        if active.iter().any(|a| *a) {
            model.step_many(&mut states, &active, ctx, ws);
        }
        k += 1;
    }
    let outcomes = (0..n)
        .map(|i| {
            let (iterations_to_converge, converged) = done[i].expect("every trial finished");
            TrialOutcome {
                failure_iteration: starts[i],
                lost_blocks: lost_blocks[i],
                baseline_iterations: baseline.iterations(),
                iterations_to_converge,
                converged,
                recovery: recoveries[i],
            }
        })
        .collect();
    Some(outcomes)
}

/// x(0..=t) recomputed from x(0), evaluating the metric every iteration as a
/// naive simulator would ([`ForkMode::Rerun`]).
fn rerun<M: Model>(model: &M, t: usize, run_seed: u64, ws: &mut M::Workspace) -> Vec<M::State> {
    let mut s = model.init();
    let mut states = Vec::with_capacity(t + 1);
    for k in 0..t {
        model.metric(&s, ws);
        states.push(model.snapshot(&s));
        model.step(
            &mut s,
            IterCtx {
                iteration: k,
                run_seed,
            },
            ws,
        );
    }
    states.push(s);
    states
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::data::synthetic;
    use crate::engine::run_baseline;
    use crate::model::mlr::{Mlr, MlrConfig};
    use crate::policy::Selector;
    use crate::rng::{Purpose, stream};

    /// A failure at an iteration with a full checkpoint due: written first,
    /// the checkpoint is x(T) itself and full recovery costs nothing; the
    /// failure first leaves the checkpoint before it, and rework follows. One
    /// iteration later both orders restore the same checkpoint.
    #[test]
    fn event_order_decides_whether_the_checkpoint_due_at_t_survives() {
        let model = Mlr::new(
            Arc::new(synthetic::mnist_like(5, 0.02)),
            &MlrConfig {
                batch_size: 100,
                learning_rate: 1e-5,
            },
        );
        let mut ws = model.workspace();
        let mut probe = model.init();
        for k in 0..24 {
            model.step(
                &mut probe,
                IterCtx {
                    iteration: k,
                    run_seed: 3,
                },
                &mut ws,
            );
        }
        let convergence = Convergence {
            criterion: model.metric(&probe, &mut ws),
            max_iterations: 400,
        };
        let baseline = run_baseline(&model, &convergence, 3).expect("converges");
        assert!(baseline.iterations() > 10);
        let policy = CheckpointPolicy {
            interval: 8,
            fraction: 1.0,
            selector: Selector::Priority,
            budget: crate::policy::WriteBudget::Parameters,
        };
        let lost: Vec<usize> = (0..model.block_count()).collect();
        let run = |t: usize, order: EventOrder| {
            let setup = TrialSetup {
                failure_iteration: t,
                lost: &lost,
                checkpoint: &policy,
                order,
                recovery: RecoveryPolicy::Full,
                checkpoint_rng: stream(1, Purpose::CheckpointSelection, 0, 0),
            };
            let mut ws = model.workspace();
            run_trial(
                &model,
                &baseline,
                &convergence,
                setup,
                EngineOptions::default(),
                &mut ws,
            )
        };
        let first = run(8, EventOrder::CheckpointFirst);
        assert_eq!(first.rework_iterations(), 0);
        let lost_ckpt = run(8, EventOrder::FailureFirst);
        assert!(lost_ckpt.rework_iterations() > 0, "{lost_ckpt:?}");
        assert_eq!(
            run(9, EventOrder::CheckpointFirst),
            run(9, EventOrder::FailureFirst)
        );
    }
}
