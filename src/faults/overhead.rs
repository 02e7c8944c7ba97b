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

use crate::engine::{Baseline, Convergence, TrialHook, run_hooked};
use crate::model::Model;
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

/// One timeline of the §5.5 runs as a hook of the engine's trial loop
/// ([`run_hooked`]): the loop checks the metric and steps; the hook keeps the
/// clock, takes and writes the checkpoints, and strikes the failure.
struct Timeline<'a, M: Model> {
    policy: &'a CheckpointPolicy,
    recovery: RecoveryPolicy,
    costs: &'a IterationCosts,
    failure: Option<&'a IterationFailure>,
    rng: &'a mut SimRng,
    committed: RunningCheckpoint<M::State>,
    cache: M::State,
    selector: SelectorState,
    pending: Writes<usize, M::State>,
    t: f64,
    split: TimeSplit,
    checkpoints: usize,
    failed: bool,
    unpersisted_lost: usize,
    perturbation_norm: f64,
    /// The iteration of the last check.
    k: usize,
    curve_time: Vec<f64>,
    curve_metric: Vec<f64>,
}

impl<M: Model> TrialHook<M> for Timeline<'_, M> {
    fn start(
        &mut self,
        model: &M,
        _: &Baseline<M::State>,
        _: &mut M::Workspace,
    ) -> (usize, M::State) {
        (0, model.init())
    }

    fn observe(&mut self, k: usize, metric: f64) {
        self.k = k;
        self.curve_time.push(self.t);
        self.curve_metric.push(metric);
    }

    /// The failure strikes `offset` of the way through iteration k + 1; the
    /// recovered state is checked again before iteration k + 1 is rerun.
    fn strike(&mut self, model: &M, k: usize, state: &mut M::State) -> bool {
        let Some(f) = self
            .failure
            .filter(|f| !self.failed && k + 1 == f.iteration)
        else {
            return false;
        };
        self.failed = true;
        let costs = self.costs;
        let wasted = f.offset * costs.iteration_time;
        let t_fail = self.t + wasted;
        commit_until(model, &mut self.pending, &mut self.committed, t_fail);
        self.unpersisted_lost += self.pending.abort(&f.lost);
        let out = self
            .recovery
            .apply(model, state, &self.committed, &f.lost, k);
        self.perturbation_norm = out.perturbation_norm;
        // The restored blocks' cache holds the saved values again.
        for b in 0..model.block_count() {
            if self.recovery == RecoveryPolicy::Full || f.lost.binary_search(&b).is_ok() {
                model.copy_block(&self.committed.state, &mut self.cache, b);
            }
        }
        self.split.rework += wasted;
        self.split.restart += costs.detection + costs.restart;
        self.t = t_fail + costs.detection + costs.restart;
        true
    }

    /// Iteration k + 1 is done: its time, and the checkpoint due after it.
    fn after_step(&mut self, model: &M, k: usize, state: &M::State) {
        let costs = self.costs;
        let done = k + 1;
        self.t += costs.iteration_time;
        if done.is_multiple_of(self.policy.period()) {
            let chosen: Vec<usize> = self
                .selector
                .select(model, self.policy, state, &self.cache, self.rng)
                .to_vec();
            // A checkpoint's cache and write times are its share of the parameters.
            let share = self.selector.share_of(&chosen);
            for &b in &chosen {
                model.copy_block(state, &mut self.cache, b);
            }
            self.checkpoints += 1;
            let values = model.snapshot(state);
            let (pause, finish) = if costs.asynchronous {
                let pause = share * costs.cache_time;
                (pause, self.t + pause + share * costs.write_time)
            } else {
                let pause = share * costs.write_time;
                (pause, self.t + pause)
            };
            self.t += pause;
            self.split.dump += pause;
            self.pending.push(finish, done, chosen, values);
        }
        commit_until(model, &mut self.pending, &mut self.committed, self.t);
    }
}

/// Runs one timeline of `model` from x(0) to `criterion` (at most
/// `max_iterations`) on the engine's trial loop ([`run_hooked`], the metric
/// evaluated at every iteration).
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
    let x0 = model.init();
    let mut timeline = Timeline {
        policy,
        recovery,
        costs,
        failure,
        rng,
        committed: RunningCheckpoint {
            state: model.snapshot(&x0),
            saved_at: vec![0; model.block_count()],
        },
        cache: model.snapshot(&x0),
        selector: SelectorState::new(model),
        pending: Writes::default(),
        t: 0.0,
        split: TimeSplit::default(),
        checkpoints: 0,
        failed: false,
        unpersisted_lost: 0,
        perturbation_norm: 0.0,
        k: 0,
        curve_time: Vec::new(),
        curve_metric: Vec::new(),
    };
    let finish = run_hooked(
        model,
        &Baseline::starting(run_seed),
        &Convergence {
            criterion,
            max_iterations,
        },
        std::slice::from_mut(&mut timeline),
        false,
        ws,
        &|| false,
    )
    .and_then(|f| f.first().copied())
    .expect("a run that is never stopped finishes");
    // A run that diverges ends at the iteration whose metric is not finite.
    let k = timeline.k;
    let mut split = timeline.split;
    split.solve = baseline_iterations as f64 * costs.iteration_time;
    split.rework += (k as f64 - baseline_iterations as f64) * costs.iteration_time;
    IterationRun {
        iterations: k,
        converged: finish.converged,
        wall_time: timeline.t,
        split,
        curve_time: timeline.curve_time,
        curve_metric: timeline.curve_metric,
        checkpoints: timeline.checkpoints,
        unpersisted_lost: timeline.unpersisted_lost,
        perturbation_norm: timeline.perturbation_norm,
    }
}
