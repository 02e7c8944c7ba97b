//! One failure trial: fork from the unperturbed run at the failure iteration,
//! recover, and train to convergence. The iteration cost ("rework
//! iterations", SCAR eq. 4) is the iterations to converge minus the
//! unperturbed run's.

use super::{Baseline, Convergence};
use crate::model::{IterCtx, Model};
use crate::policy::{CheckpointPolicy, RecoveryOutcome, RecoveryPolicy, RunningCheckpoint};
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

/// Everything that distinguishes one trial from another.
pub struct TrialSetup<'a> {
    /// T: the failure strikes after x(T) is computed.
    pub failure_iteration: usize,
    /// The blocks the failure loses (sorted).
    pub lost: &'a [usize],
    /// Checkpoint policy in force before the failure.
    pub checkpoint: &'a CheckpointPolicy,
    /// How the failure is recovered from.
    pub recovery: RecoveryPolicy,
    /// Randomness of the `random` checkpoint selector.
    pub checkpoint_rng: SimRng,
}

/// What happened in one trial.
#[derive(Clone, Copy, Debug, PartialEq)]
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
    mut setup: TrialSetup<'_>,
    mode: ForkMode,
    ws: &mut M::Workspace,
) -> TrialOutcome {
    let t = setup.failure_iteration;
    let run_seed = baseline.run_seed;
    let rerun_prefix;
    let prefix: &[M::State] = match mode {
        ForkMode::Fork => &baseline.states[..=t],
        ForkMode::Rerun => {
            let mut s = model.init();
            let mut states = Vec::with_capacity(t + 1);
            for k in 0..t {
                model.metric(&s, ws);
                states.push(s.clone());
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
            rerun_prefix = states;
            &rerun_prefix
        }
    };
    let checkpoint = RunningCheckpoint::replay(
        model,
        prefix,
        setup.checkpoint,
        t,
        &mut setup.checkpoint_rng,
    );
    let mut state = prefix[t].clone();
    let recovery = setup
        .recovery
        .apply(model, &mut state, &checkpoint, setup.lost, t);
    let mut k = t;
    let converged = loop {
        let m = model.metric(&state, ws);
        if m <= convergence.criterion {
            break true;
        }
        if k >= convergence.max_iterations || !m.is_finite() {
            break false;
        }
        model.step(
            &mut state,
            IterCtx {
                iteration: k,
                run_seed,
            },
            ws,
        );
        k += 1;
    };
    TrialOutcome {
        failure_iteration: t,
        lost_blocks: setup.lost.len(),
        baseline_iterations: baseline.iterations(),
        iterations_to_converge: if converged {
            k
        } else {
            convergence.max_iterations
        },
        converged,
        recovery,
    }
}
