//! One failure trial: fork from the unperturbed run at the failure iteration,
//! recover, and train to convergence. The iteration cost ("rework
//! iterations", SCAR eq. 4) is the iterations to converge minus the
//! unperturbed run's.

use super::{Baseline, Convergence};
use crate::model::{Check, IterCtx, Model};
use crate::policy::{
    CheckpointPolicy, EventOrder, RecoveryOutcome, RecoveryPolicy, Restoration, RunningCheckpoint,
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
    pub(crate) fork: ForkMode,
    /// Let the model certify "not converged yet" without evaluating the
    /// metric ([`Model::check_many`]); `false` evaluates it at every
    /// iteration (the brute-force path).
    pub(crate) certify: bool,
    /// Finish a trial that starts at one of the unperturbed run's states,
    /// of a model whose step depends on the state alone, from the run's
    /// recorded metrics ([`Model::same_state`]); `false` steps it (the
    /// brute-force path).
    pub(crate) rejoin: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            fork: ForkMode::Fork,
            certify: true,
            rejoin: true,
        }
    }
}

/// Everything that distinguishes one trial from another.
pub struct TrialSetup<'a> {
    /// T: the failure strikes after x(T) is computed.
    pub(crate) failure_iteration: usize,
    /// The blocks the failure loses (sorted).
    pub(crate) lost: &'a [usize],
    /// Checkpoint policy in force before the failure.
    pub(crate) checkpoint: &'a CheckpointPolicy,
    /// Whether a checkpoint due at T is written before the failure at T.
    pub(crate) order: EventOrder,
    /// How the failure is recovered from.
    pub(crate) recovery: RecoveryPolicy,
    /// Randomness of the `random` checkpoint selector.
    pub(crate) checkpoint_rng: SimRng,
    /// What recovery restores, when already found from the same inputs
    /// ([`RecoveryPolicy::restoration`]): a forked trial then rebuilds its
    /// recovered state from the unperturbed run's states instead of
    /// replaying the checkpoints (the same state, bit for bit). `None`
    /// replays them.
    pub(crate) restoration: Option<&'a Restoration>,
}

/// What happened in one trial.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrialOutcome {
    /// T.
    pub(crate) failure_iteration: usize,
    /// Number of blocks the failure lost.
    pub(crate) lost_blocks: usize,
    /// B: iterations the unperturbed run needs.
    pub(crate) baseline_iterations: usize,
    /// Iterations the perturbed run needs (counted from x(0); capped at
    /// `max_iterations` when it does not converge).
    pub(crate) iterations_to_converge: usize,
    /// Whether the perturbed run met the criterion before `max_iterations`.
    pub(crate) converged: bool,
    /// What recovery did.
    pub(crate) recovery: RecoveryOutcome,
}

impl TrialOutcome {
    /// Iteration cost of the failure: iterations_to_converge − B (may be negative).
    pub(crate) fn rework_iterations(&self) -> i64 {
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

/// One trial of the iteration-domain loop ([`run_hooked`]): where it joins
/// the unperturbed run, and what happens to it between its convergence check
/// and its step. A recovery is a perturbation at the failure iteration
/// ([`run_cohort`]); the `perturbation` kind's schedules perturb in
/// [`TrialHook::before_step`], the reduced-precision runs round there; SCAR
/// §5.5's time-cost runs (`faults::overhead`) keep their clock and
/// checkpoints in [`TrialHook::observe`] and [`TrialHook::after_step`] and
/// strike their failure in [`TrialHook::strike`].
pub trait TrialHook<M: Model> {
    /// The iteration at which the trial joins and its state there (derived
    /// state up to date). Called once, before the loop.
    fn start(
        &mut self,
        model: &M,
        baseline: &Baseline<M::State>,
        ws: &mut M::Workspace,
    ) -> (usize, M::State);

    /// The metric of the trial's state at iteration `k`, each time the loop
    /// evaluates it (not when it certifies "not yet" without evaluating).
    fn observe(&mut self, k: usize, metric: f64) {
        let _ = (k, metric);
    }

    /// Iteration `k`: the check found the state unconverged (and `k` below
    /// the cap). A hook may change the state here and return `true`: the
    /// loop then checks it again at `k` (and asks again) before stepping —
    /// a failure during iteration k + 1 that recovery rolls back (SCAR §5.5's
    /// time-cost runs). The default changes nothing.
    fn strike(&mut self, model: &M, k: usize, state: &mut M::State) -> bool {
        let _ = (model, k, state);
        false
    }

    /// Iteration `k`: the check found the state unconverged (and `k` below
    /// the cap) and [`TrialHook::strike`] did not strike; called before the
    /// state's step of iteration `k`.
    fn before_step(&mut self, model: &M, k: usize, state: &mut M::State) {
        let _ = (model, k, state);
    }

    /// After the state's step of iteration `k` (it now holds x(k + 1)).
    fn after_step(&mut self, model: &M, k: usize, state: &M::State) {
        let _ = (model, k, state);
    }

    /// Whether the trial keeps stepping after its state first meets the
    /// criterion, without further checks, up to the iteration cap (its
    /// [`Finish`] is still that first iteration). The default, `false`, ends
    /// it there; reduced-precision runs measure the error floor after
    /// convergence.
    fn runs_past_convergence(&self) -> bool {
        false
    }

    /// Whether the trial's path is its start state's alone: the hook
    /// changes nothing after [`TrialHook::start`] (no strike, nothing before
    /// or after a step, nothing past convergence) and lets the loop finish
    /// it from the unperturbed run's metrics where its start state is one of
    /// that run's ([`Model::same_state`]). The default, `false`, always steps.
    fn may_rejoin(&self) -> bool {
        false
    }
}

/// How a trial of [`run_hooked`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finish {
    /// The first iteration whose state met the criterion, or the cap.
    pub(crate) iterations: usize,
    /// Whether it met the criterion before the cap.
    pub(crate) converged: bool,
}

/// The iteration-domain trial loop: runs the trials of `hooks`, which fork
/// from the same unperturbed run, in lockstep by iteration so that the
/// model can serve them together ([`Model::check_many`] or
/// [`Model::metric_many`], then [`Model::step_many`]); [`run_hooked_on`]
/// for trials of several unperturbed runs. A trial joins at its
/// start iteration and leaves when it converges, diverges or reaches
/// `convergence.max_iterations` (a trial that runs past convergence,
/// [`TrialHook::runs_past_convergence`], leaves at the cap). Each trial's result is exactly what it
/// gets alone with the metric evaluated at every iteration. `stop` is
/// polled every iteration; when it returns true the cohort is abandoned
/// (`None`).
pub fn run_hooked<M: Model, H: TrialHook<M>>(
    model: &M,
    baseline: &Baseline<M::State>,
    convergence: &Convergence,
    hooks: &mut [H],
    certify: bool,
    ws: &mut M::Workspace,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<Finish>> {
    let baselines = vec![baseline; hooks.len()];
    run_hooked_on(model, &baselines, convergence, hooks, certify, ws, stop)
}

/// [`run_hooked`] for trials that fork from unperturbed runs of their own:
/// `hooks[i]` from `baselines[i]`. Where those runs differ in their data
/// order, each trial steps with its own run's seed, the cohort served by
/// [`Model::metric_apart`] and [`Model::step_apart`] (every check exact, no
/// certificate); where they share one, exactly as [`run_hooked`]. Either
/// way each trial's result is what it gets alone.
pub fn run_hooked_on<M: Model, H: TrialHook<M>>(
    model: &M,
    baselines: &[&Baseline<M::State>],
    convergence: &Convergence,
    hooks: &mut [H],
    certify: bool,
    ws: &mut M::Workspace,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<Finish>> {
    let n = hooks.len();
    assert_eq!(baselines.len(), n, "one unperturbed run per trial");
    let seeds: Vec<u64> = baselines.iter().map(|b| b.run_seed).collect();
    let run_seed = seeds.first().copied().unwrap_or(0);
    let apart = seeds.iter().any(|&s| s != run_seed);
    let (starts, mut states): (Vec<usize>, Vec<M::State>) = hooks
        .iter_mut()
        .zip(baselines)
        .map(|(h, b)| h.start(model, b, ws))
        .unzip();
    let past: Vec<bool> = hooks.iter().map(|h| h.runs_past_convergence()).collect();
    let mut done: Vec<Option<Finish>> = vec![None; n];
    // The first iteration that met the criterion, for trials that run past it.
    let mut met: Vec<Option<Finish>> = vec![None; n];
    let mut active = vec![false; n];
    let mut checking = vec![false; n];
    let mut deciding = vec![false; n];
    let mut checks = vec![Check::Above; n];
    let mut metrics = vec![0.0; n];
    let unconverged = Finish {
        iterations: convergence.max_iterations,
        converged: false,
    };
    for i in 0..n {
        if hooks[i].may_rejoin() {
            done[i] = along_unperturbed(model, baselines[i], convergence, starts[i], &states[i]);
        }
    }
    let mut next: Vec<IterCtx> = Vec::new();
    let mut k = starts.iter().copied().min().unwrap_or(0);
    while done.iter().any(Option::is_none) {
        if stop() {
            return None;
        }
        for i in 0..n {
            active[i] = done[i].is_none() && starts[i] <= k;
            deciding[i] = active[i];
        }
        let ctx = IterCtx {
            iteration: k,
            run_seed,
        };
        if apart {
            next.clear();
            next.extend(seeds.iter().map(|&run_seed| IterCtx {
                iteration: k,
                run_seed,
            }));
        }
        // The checks at iteration k, again for the trials whose hook struck
        // (`TrialHook::strike`) until none does.
        while deciding.iter().any(|d| *d) {
            for i in 0..n {
                checking[i] = deciding[i] && met[i].is_none();
            }
            if apart {
                model.metric_apart(&states, &checking, &next, ws, &mut metrics);
                for i in 0..n {
                    checks[i] = Check::Exact(metrics[i]);
                }
            } else if certify {
                model.check_many(
                    &states,
                    &checking,
                    ctx,
                    convergence.criterion,
                    ws,
                    &mut checks,
                );
            } else {
                model.metric_many(&states, &checking, ctx, ws, &mut metrics);
                for i in 0..n {
                    checks[i] = Check::Exact(metrics[i]);
                }
            }
            for i in 0..n {
                if !deciding[i] {
                    continue;
                }
                deciding[i] = false;
                if let (true, Check::Exact(m)) = (checking[i], checks[i]) {
                    hooks[i].observe(k, m);
                }
                let cap = k >= convergence.max_iterations;
                let finish = match (met[i], checks[i]) {
                    (Some(first), _) => cap.then_some(first),
                    (None, Check::Exact(m)) if m <= convergence.criterion => Some(Finish {
                        iterations: k,
                        converged: true,
                    }),
                    (None, Check::Exact(m)) if !m.is_finite() => Some(unconverged),
                    // Not converged, and finite: only the iteration cap applies.
                    (None, _) => cap.then_some(unconverged),
                };
                match finish {
                    Some(f) if f.converged && past[i] && met[i].is_none() && !cap => {
                        met[i] = Some(f);
                        hooks[i].before_step(model, k, &mut states[i]);
                    }
                    Some(f) => {
                        done[i] = Some(f);
                        active[i] = false;
                    }
                    None if hooks[i].strike(model, k, &mut states[i]) => deciding[i] = true,
                    None => hooks[i].before_step(model, k, &mut states[i]),
                }
            }
        }
        if active.iter().any(|a| *a) {
            if apart {
                model.step_apart(&mut states, &active, &next, ws);
            } else {
                model.step_many(&mut states, &active, ctx, ws);
            }
            for i in 0..n {
                if active[i] {
                    hooks[i].after_step(model, k, &states[i]);
                }
            }
        }
        k += 1;
    }
    Some(
        done.into_iter()
            .map(|d| d.expect("every trial finished"))
            .collect(),
    )
}

/// How the loop of [`run_hooked`] ends a trial that joins at iteration `k0`
/// in state `x`, when `x` is bit for bit the unperturbed run's x(c) for some
/// c ≤ k0 and the model's step depends on the state alone
/// ([`Model::same_state`]): its state at k0 + j is x(c + j), so its check
/// there meets the run's recorded metric of c + j, and the loop's rules
/// (met, not finite, the cap) apply to those. `None` when no state of the
/// run matches (or the model cannot tell), or when the record ends first.
/// Full recovery from a full checkpoint restores such a state: SCAR eq. 4's
/// rework is then exactly T − c.
fn along_unperturbed<M: Model>(
    model: &M,
    baseline: &Baseline<M::State>,
    convergence: &Convergence,
    k0: usize,
    x: &M::State,
) -> Option<Finish> {
    let last = k0.min(baseline.states.len().checked_sub(1)?);
    let mut at = None;
    for c in (0..=last).rev() {
        match model.same_state(x, &baseline.states[c]) {
            // The model's step reads more than the state: never rejoins.
            None => return None,
            Some(true) => {
                at = Some(c);
                break;
            }
            Some(false) => {}
        }
    }
    let c = at?;
    for (j, &m) in baseline.metrics.get(c..)?.iter().enumerate() {
        let k = k0 + j;
        if m <= convergence.criterion {
            return Some(Finish {
                iterations: k,
                converged: true,
            });
        }
        if !m.is_finite() || k >= convergence.max_iterations {
            return Some(Finish {
                iterations: convergence.max_iterations,
                converged: false,
            });
        }
    }
    None
}

/// What recovery restores in the trial `setup` forked from `baseline`
/// ([`Restoration`]): its checkpoints replayed along the unperturbed run as
/// the trial itself replays them (with a copy of its selection stream).
pub(crate) fn restoration<M: Model>(
    model: &M,
    baseline: &Baseline<M::State>,
    setup: &TrialSetup<'_>,
) -> Restoration {
    let t = setup.failure_iteration;
    let mut rng = setup.checkpoint_rng.clone();
    let checkpoint = RunningCheckpoint::replay(
        model,
        &baseline.states[..=t],
        setup.checkpoint,
        setup.order.checkpoints_before(t),
        &mut rng,
    );
    setup
        .recovery
        .restoration(model, &checkpoint, &baseline.states[t], setup.lost, t)
}

/// A failure trial as a [`TrialHook`]: it joins at its failure iteration T
/// with the recovered state.
struct Recovery<'a> {
    setup: TrialSetup<'a>,
    fork: ForkMode,
    rejoin: bool,
    outcome: Option<RecoveryOutcome>,
}

impl<M: Model> TrialHook<M> for Recovery<'_> {
    fn start(
        &mut self,
        model: &M,
        baseline: &Baseline<M::State>,
        ws: &mut M::Workspace,
    ) -> (usize, M::State) {
        let setup = &mut self.setup;
        let t = setup.failure_iteration;
        if let (ForkMode::Fork, Some(r)) = (self.fork, setup.restoration) {
            let mut state = baseline.states[t].clone();
            r.restore(model, &baseline.states, &mut state);
            self.outcome = Some(r.outcome);
            return (t, state);
        }
        let rerun_prefix;
        let prefix: &[M::State] = match self.fork {
            ForkMode::Fork => &baseline.states[..=t],
            ForkMode::Rerun => {
                rerun_prefix = rerun(model, t, baseline.run_seed, ws);
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
        self.outcome = Some(
            setup
                .recovery
                .apply(model, &mut state, &checkpoint, setup.lost, t),
        );
        (t, state)
    }

    fn may_rejoin(&self) -> bool {
        self.rejoin
    }
}

/// Runs several failure trials that fork from the same unperturbed run in
/// one cohort ([`run_hooked`]). Each trial's outcome is exactly what
/// [`run_trial`] gives it alone. `stop` is polled every iteration; when it
/// returns true the cohort is abandoned (`None`).
pub fn run_cohort<M: Model>(
    model: &M,
    baseline: &Baseline<M::State>,
    convergence: &Convergence,
    setups: Vec<TrialSetup<'_>>,
    opts: EngineOptions,
    ws: &mut M::Workspace,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<TrialOutcome>> {
    let baselines = vec![baseline; setups.len()];
    run_cohort_on(model, &baselines, convergence, setups, opts, ws, stop)
}

/// [`run_cohort`] for trials that fork from unperturbed runs of their own:
/// `setups[i]` from `baselines[i]` ([`run_hooked_on`]; a per-trial data
/// order's trials in one cohort, for a model that steps runs of different
/// data orders together, [`Model::cohorts_span_data_orders`]). Each trial's
/// outcome is exactly what [`run_trial`] gives it alone with its own run.
pub fn run_cohort_on<M: Model>(
    model: &M,
    baselines: &[&Baseline<M::State>],
    convergence: &Convergence,
    setups: Vec<TrialSetup<'_>>,
    opts: EngineOptions,
    ws: &mut M::Workspace,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<TrialOutcome>> {
    let mut hooks: Vec<Recovery<'_>> = setups
        .into_iter()
        .map(|setup| Recovery {
            setup,
            fork: opts.fork,
            rejoin: opts.rejoin,
            outcome: None,
        })
        .collect();
    let finished = run_hooked_on(
        model,
        baselines,
        convergence,
        &mut hooks,
        opts.certify,
        ws,
        stop,
    )?;
    Some(
        hooks
            .iter()
            .zip(finished)
            .zip(baselines)
            .map(|((h, f), baseline)| TrialOutcome {
                failure_iteration: h.setup.failure_iteration,
                lost_blocks: h.setup.lost.len(),
                baseline_iterations: baseline.iterations(),
                iterations_to_converge: f.iterations,
                converged: f.converged,
                recovery: h.outcome.expect("started"),
            })
            .collect(),
    )
}

/// x(0..=t) recomputed from x(0), evaluating the metric every iteration as a
/// naive simulator would ([`ForkMode::Rerun`]).
pub(crate) fn rerun<M: Model>(
    model: &M,
    t: usize,
    run_seed: u64,
    ws: &mut M::Workspace,
) -> Vec<M::State> {
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
mod tests;
