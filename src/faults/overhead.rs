//! SCAR §5.5 in the iteration domain with time costs: a block model (LDA)
//! trains iteration by iteration; checkpoints cost time; a failure during
//! one iteration loses some blocks; recovery restores them from the running
//! checkpoint; the run continues until the convergence criterion.
//!
//! Time model (SCAR §4, after Daly): every iteration takes `iteration_time`.
//! A checkpoint after iteration k saves a fraction r of the blocks (SCAR's
//! priority selector when r < 1). Synchronous persist pauses training for
//! r·`write_time`; asynchronous persist pauses it for r·`cache_time` (choose
//! blocks, update the in-memory cache) and writes in the background for
//! r·`write_time`; blocks whose write has not finished when the failure
//! strikes keep their previous saved values. A failure `failure_offset` of
//! the way through iteration T (1-based) wastes that part of the iteration;
//! after `detection` and `restart` seconds the lost blocks (partial recovery)
//! or all blocks (full recovery) are restored, and iteration T is run again
//! on the recovered state with the same data order (as in the trial engine).
//!
//! Split (SCAR §4): T_solve = B·iteration_time (B: iterations of the
//! unperturbed run); T_dump = checkpoint pauses; T_rework = (iterations to
//! converge − B)·iteration_time + the wasted part of the failed iteration;
//! T_restart = detection + restart.

use serde::{Deserialize, Serialize};

use crate::model::{IterCtx, Model};
use crate::policy::checkpoint::SelectorState;
use crate::policy::persist::Writes;
use crate::policy::{CheckpointPolicy, RecoveryPolicy, RunningCheckpoint};
use crate::rng::SimRng;
use crate::theory::daly::TimeSplit;

/// Time costs of one run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterationCosts {
    /// Seconds per iteration.
    pub iteration_time: f64,
    /// Seconds to persist every block (a fraction costs its share).
    pub write_time: f64,
    /// Seconds to choose and cache every block (asynchronous persist; a fraction costs its share).
    pub cache_time: f64,
    /// Persist in the background once the cache is updated.
    pub asynchronous: bool,
    /// Failure detection delay.
    pub detection: f64,
    /// Time to restore the lost blocks.
    pub restart: f64,
}

/// Where and what a failure strikes.
#[derive(Clone, Debug, PartialEq)]
pub struct IterationFailure {
    /// T: the failure strikes during iteration T (1-based; x(T−1) is the state).
    pub iteration: usize,
    /// Fraction of iteration T done when it strikes, in [0, 1).
    pub offset: f64,
    /// The blocks it loses (sorted).
    pub lost: Vec<usize>,
}

/// One run's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterationRun {
    /// Iterations to reach the criterion (counted as in the trial engine).
    pub iterations: usize,
    /// Whether the criterion was met within the iteration cap.
    pub converged: bool,
    /// Wall time at which the criterion was met.
    #[serde(with = "crate::report::json_f64")]
    pub wall_time: f64,
    /// The split of `wall_time` (given B, the unperturbed iterations).
    pub split: TimeSplit,
    /// Wall time after every iteration, starting at 0 (x(0)).
    #[serde(with = "crate::report::json_f64::vec")]
    pub(crate) curve_time: Vec<f64>,
    /// The metric at those times.
    #[serde(with = "crate::report::json_f64::vec")]
    pub curve_metric: Vec<f64>,
    /// Checkpoints taken.
    pub checkpoints: usize,
    /// Lost blocks whose restored value came from a write still unfinished at the failure
    /// (they got the older saved value).
    pub unpersisted_lost: usize,
    /// ‖δ‖ of the recovery (0 without a failure).
    #[serde(with = "crate::report::json_f64")]
    pub perturbation_norm: f64,
}

/// Commits every write of `pending` finished by `until` to `committed`, in
/// order.
fn commit_until<M: Model>(
    model: &M,
    pending: &mut Writes<usize, M::State>,
    committed: &mut RunningCheckpoint<M::State>,
    until: f64,
) {
    for w in pending.finished(until) {
        for b in w.blocks {
            model.copy_block(&w.values, &mut committed.state, b);
            committed.saved_at[b] = w.taken;
        }
    }
}

/// Runs one timeline of `model` from x(0) to `criterion` (at most `max_iterations`).
#[allow(clippy::too_many_arguments)]
pub fn run_iterations<M: Model>(
    model: &M,
    ws: &mut M::Workspace,
    run_seed: u64,
    policy: &CheckpointPolicy,
    recovery: RecoveryPolicy,
    costs: &IterationCosts,
    failure: Option<&IterationFailure>,
    criterion: f64,
    max_iterations: usize,
    baseline_iterations: usize,
    rng: &mut SimRng,
) -> IterationRun {
    let n = model.block_count();
    let mut state = model.init();
    let mut committed = RunningCheckpoint {
        state: model.snapshot(&state),
        saved_at: vec![0; n],
    };
    let mut cache = model.snapshot(&state);
    let mut selector = SelectorState::new(model);
    let mut pending = Writes::<usize, M::State>::default();
    let period = policy.period();
    let mut t = 0.0;
    let mut split = TimeSplit::default();
    let mut checkpoints = 0;
    let mut failed = false;
    let mut unpersisted_lost = 0;
    let mut perturbation_norm = 0.0;
    let mut k = 0;
    let mut curve_time = Vec::new();
    let mut curve_metric = Vec::new();
    let converged = loop {
        let m = model.metric(&state, ws);
        curve_time.push(t);
        curve_metric.push(m);
        if m <= criterion {
            break true;
        }
        if k >= max_iterations || !m.is_finite() {
            break false;
        }
        if let Some(f) = failure.filter(|f| !failed && k + 1 == f.iteration) {
            failed = true;
            let wasted = f.offset * costs.iteration_time;
            let t_fail = t + wasted;
            commit_until(model, &mut pending, &mut committed, t_fail);
            unpersisted_lost += pending.abort(&f.lost);
            let out = recovery.apply(model, &mut state, &committed, &f.lost, k);
            perturbation_norm = out.perturbation_norm;
            // The restored blocks' cache holds the saved values again.
            for b in 0..n {
                if recovery == RecoveryPolicy::Full || f.lost.binary_search(&b).is_ok() {
                    model.copy_block(&committed.state, &mut cache, b);
                }
            }
            split.rework += wasted;
            split.restart += costs.detection + costs.restart;
            t = t_fail + costs.detection + costs.restart;
            continue;
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
        t += costs.iteration_time;
        if k.is_multiple_of(period) {
            let chosen: Vec<usize> = selector.select(model, policy, &state, &cache, rng).to_vec();
            // A checkpoint's cache and write times are its share of the parameters.
            let share = selector.share_of(&chosen);
            for &b in &chosen {
                model.copy_block(&state, &mut cache, b);
            }
            checkpoints += 1;
            let values = model.snapshot(&state);
            if costs.asynchronous {
                let pause = share * costs.cache_time;
                t += pause;
                split.dump += pause;
                pending.push(t + share * costs.write_time, k, chosen, values);
            } else {
                let pause = share * costs.write_time;
                t += pause;
                split.dump += pause;
                pending.push(t, k, chosen, values);
                commit_until(model, &mut pending, &mut committed, t);
            }
        }
        commit_until(model, &mut pending, &mut committed, t);
    };
    split.solve = baseline_iterations as f64 * costs.iteration_time;
    split.rework += (k as f64 - baseline_iterations as f64) * costs.iteration_time;
    IterationRun {
        iterations: k,
        converged,
        wall_time: t,
        split,
        curve_time,
        curve_metric,
        checkpoints,
        unpersisted_lost,
        perturbation_norm,
    }
}
