//! Trials computed once and shared: within a run, units with the same
//! [`TrialKey`] run once ([`share_identical`]); across the scenarios of one
//! process (`scarsim reproduce`), [`SharedOutcomes`] hands a unit the outcome
//! another scenario computed from exactly the same inputs.
//!
//! The cross-scenario key is deliberately wider than [`TrialKey`]: it names
//! the inputs themselves, not a canonical form of them. A [`RunKey`] holds
//! everything the unperturbed run and the model depend on (model spec with
//! its dataset, partitioning, hyper-parameters and metric settings; the
//! scenario seed, which also seeds stand-ins, model builds and every trial
//! stream; the data used, real or stand-in, its scale and provenance; the
//! data order; the convergence test as resolved and as written; the PS nodes
//! and block count; the program version). A unit key adds the trial's own
//! inputs: trial index, unperturbed run and its seed, the point's whole
//! configuration (failure distribution, loss, checkpoint policy with
//! selector, budget and event order, recovery policy), the failure
//! iteration and the lost blocks. Two units of different scenarios are
//! shared only if all of that is equal; units of one run with equal
//! [`TrialKey`]s are grouped first, and a group takes a cached outcome when
//! any of its members' keys is cached.
//!
//! One narrower key: a unit that restores every block from one iteration c
//! (full recovery from a full checkpoint, or partial recovery with every
//! block lost) recovers to x(c)'s parameters whole, whatever the blocks. It
//! is keyed by [`RunKey::whole_state`] (the model's training spec, which
//! leaves out how the parameters are cut into blocks, and no block count)
//! and by what [`TrialKey`] names (its unperturbed run and data order, T and
//! c). So the CNN's by-layer and by-shard panels compute their
//! full-recovery trials once.
//!
//! The long-run optimum x* = x(N) of the perturbation and precision kinds
//! (`theory.optimum_iterations = N`) is shared the same way
//! ([`SharedOutcomes::long_run`]): it is the unperturbed run continued to N,
//! fixed by the model, its data, the scenario seed, the run's data order and
//! N, so two scenarios that differ only in ε or their series (SCAR
//! Figure 5(b) at iteration 10 and at the paper's settings) compute it once.
//!
//! Left out on purpose: names, titles, trial counts (a trial's outcome does
//! not depend on how many others run), the sweep and series (the point's
//! configuration stands for them), and the engine options: forking from the
//! unperturbed run and certifying "not converged" are exact (tested to give
//! bit-identical outcomes), so they cannot change an outcome.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use serde::Serialize;

use super::recovery::{Prepared, baseline_index, run_seed};
use super::tasks::{Encoded, encode};
use super::units::Driver;
use crate::data::DataOptions;
use crate::engine::{Convergence, TrialOutcome};
use crate::model::DataUsed;
use crate::scenario::{
    RecoveryScenario,
    recovery::{Point, PointConfig},
};

/// Everything a trial's run after its failure depends on: two units with
/// equal keys converge at the same iteration (their [`TrialOutcome`]s
/// differ at most in what each reports about its own recovery, which each
/// unit computes itself: [`Prepared::restoration`]), so one is run and the
/// others share its result.
///
/// After recovery a trial is deterministic: it steps with the unperturbed
/// run's data order (`run_seed`, [`IterCtx`](crate::model::IterCtx)) from the
/// recovered state. That state is x(T) with each restored block replaced by
/// the unperturbed run's value of that block at the iteration it was last
/// saved ([`Restoration`](crate::policy::Restoration)), so it is fixed by
/// the unperturbed run, T and those (block, iteration) pairs, whatever the
/// checkpoint policy and selector that chose them. So full recovery from
/// the same full checkpoint shares (under geometric T with a shared data
/// order many trials fail at the same T), and so do the partial-recovery
/// points of one trial whose lost blocks were last saved at the same
/// iterations under different selectors or fractions: every one of them
/// when T comes before the first checkpoint (x(0)'s blocks restored).
#[derive(Debug, PartialEq)]
pub(super) struct TrialKey<'a> {
    baseline: usize,
    failure_iteration: usize,
    /// (block, iteration saved) of every restored block.
    restored: &'a [(u32, u32)],
}

impl<'a> TrialKey<'a> {
    /// The key of a unit whose restoration was found
    /// ([`Prepared::restoration`]).
    pub(super) fn new(baseline: usize, prepared: &'a Prepared) -> TrialKey<'a> {
        TrialKey {
            baseline,
            failure_iteration: prepared.failure_iteration,
            restored: &prepared
                .restoration
                .as_ref()
                .expect("restorations are found before units are grouped")
                .blocks,
        }
    }
}

/// Groups `todo` by [`TrialKey`]: the first unit of each group is its
/// representative (run); `followers[r]` are the units that take
/// representative `r`'s outcome. `followers` has `units` entries.
pub(super) fn share_identical<'a>(
    todo: &[usize],
    units: usize,
    key: impl Fn(usize) -> TrialKey<'a>,
) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut followers: Vec<Vec<usize>> = vec![Vec::new(); units];
    let mut representatives = Vec::new();
    let mut keys: Vec<(TrialKey<'a>, usize)> = Vec::new();
    for &u in todo {
        let k = key(u);
        match keys.iter().find(|(other, _)| *other == k) {
            Some(&(_, r)) => followers[r].push(u),
            None => {
                keys.push((k, u));
                representatives.push(u);
            }
        }
    }
    (representatives, followers)
}

/// Outcomes of recovery trials computed (or resumed from a journal) by the
/// scenarios of this process, by [`RunKey`] and unit key (see the module
/// documentation). Scenarios running at the same time may both compute an
/// outcome neither found; it is the same outcome, so the second insert
/// changes nothing. Also the long-run optima, by [`LongRunKey`], and the
/// unperturbed runs of recovery scenarios, by [`BaselinesKey`].
///
/// A handle: [`SharedOutcomes::chain`] gives another handle on the same
/// store whose own pins keep the unperturbed runs its scenarios used alive
/// until it is dropped (see [`SharedOutcomes::baselines`]).
#[derive(Default)]
pub struct SharedOutcomes {
    store: Arc<Store>,
    /// The unperturbed runs this handle's scenarios used, kept alive while
    /// the handle lives.
    pins: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
}

#[derive(Default)]
struct Store {
    runs: Mutex<HashMap<String, HashMap<String, TrialOutcome>>>,
    /// x(N) by [`LongRunKey`]; each slot's lock is held while its state is
    /// computed, so a second scenario asking for it waits instead of
    /// computing it again.
    long_runs: Mutex<HashMap<String, LongRunSlot>>,
    /// Long-run states handed to a scenario that did not compute them.
    long_runs_taken: AtomicUsize,
    /// Unperturbed runs by [`BaselinesKey`], held weakly: alive while a
    /// scenario or a handle's pins hold them. Each slot's lock is held while
    /// they are computed.
    baselines: Mutex<HashMap<String, BaselinesSlot>>,
    /// Unperturbed runs handed to a scenario that did not compute them.
    baselines_taken: AtomicUsize,
}

type LongRunSlot = Arc<Mutex<Option<Arc<dyn Any + Send + Sync>>>>;
type BaselinesSlot = Arc<Mutex<Option<std::sync::Weak<dyn Any + Send + Sync>>>>;

impl std::fmt::Debug for SharedOutcomes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedOutcomes({} outcomes)", self.len())
    }
}

impl SharedOutcomes {
    /// An empty cache.
    pub(crate) fn new() -> SharedOutcomes {
        SharedOutcomes::default()
    }

    /// Another handle on the same store, with pins of its own: the
    /// unperturbed runs that scenarios run through it use stay alive until
    /// it is dropped, so the next scenario of a chain run one after another
    /// (`reproduce` runs a per-trial partial panel and its priority panel so)
    /// takes them instead of computing them again, and no longer.
    pub(crate) fn chain(&self) -> SharedOutcomes {
        SharedOutcomes {
            store: Arc::clone(&self.store),
            pins: Mutex::default(),
        }
    }

    /// The unperturbed runs `key` names: those another scenario of this
    /// process computed, if a scenario or a chain still holds them, else
    /// `compute()`'s. Either way this handle pins them. A failed
    /// computation stores nothing.
    pub(crate) fn baselines<T: Send + Sync + 'static>(
        &self,
        key: &BaselinesKey,
        compute: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        let slot = {
            let mut map = self
                .store
                .baselines
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            map.retain(|_, s| Arc::strong_count(s) > 1 || live(s));
            Arc::clone(map.entry(key.0.clone()).or_default())
        };
        let mut held = slot.lock().unwrap_or_else(|e| e.into_inner());
        // The key names the model's type, so a live entry holds a `T`.
        let found = held
            .as_ref()
            .and_then(std::sync::Weak::upgrade)
            .and_then(|any| any.downcast::<T>().ok());
        let runs = match found {
            Some(runs) => {
                self.store.baselines_taken.fetch_add(1, Ordering::Relaxed);
                runs
            }
            None => {
                let runs = Arc::new(compute()?);
                let any: Arc<dyn Any + Send + Sync> = runs.clone();
                *held = Some(Arc::downgrade(&any));
                runs
            }
        };
        self.pins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(runs.clone());
        Ok(runs)
    }

    /// Unperturbed runs ([`SharedOutcomes::baselines`]) a scenario took
    /// instead of computing them.
    pub(crate) fn baselines_taken(&self) -> usize {
        self.store.baselines_taken.load(Ordering::Relaxed)
    }

    /// Outcomes held.
    pub(crate) fn len(&self) -> usize {
        self.lock().values().map(HashMap::len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<String, TrialOutcome>>> {
        // A panic elsewhere while holding the lock leaves the map consistent
        // (every change is one insert).
        self.store.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// x(N) of the run `key` names: the stored state if another scenario of
    /// this process computed it, else `compute()`'s, stored for the next.
    /// A failed computation stores nothing.
    pub(crate) fn long_run<S: Clone + Send + Sync + 'static>(
        &self,
        key: &LongRunKey,
        compute: impl FnOnce() -> Result<S>,
    ) -> Result<S> {
        let slot = {
            let mut map = self
                .store
                .long_runs
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            Arc::clone(map.entry(key.0.clone()).or_default())
        };
        let mut held = slot.lock().unwrap_or_else(|e| e.into_inner());
        // The key names the model's type, so a stored state has type `S`.
        if let Some(state) = held.as_ref().and_then(|s| s.downcast_ref::<S>()) {
            self.store.long_runs_taken.fetch_add(1, Ordering::Relaxed);
            return Ok(state.clone());
        }
        let state = compute()?;
        *held = Some(Arc::new(state.clone()));
        Ok(state)
    }

    /// Long-run states ([`SharedOutcomes::long_run`]) a scenario took
    /// instead of computing them.
    pub(crate) fn long_runs_taken(&self) -> usize {
        self.store.long_runs_taken.load(Ordering::Relaxed)
    }

    /// Stores `outcomes` (unit key, outcome) of `run`.
    pub(super) fn insert(
        &self,
        run: &RunKey,
        outcomes: impl IntoIterator<Item = (String, TrialOutcome)>,
    ) {
        let mut runs = self.lock();
        let m = runs.entry(run.0.clone()).or_default();
        for (k, o) in outcomes {
            m.insert(k, o);
        }
    }
}

/// One run's view of [`SharedOutcomes`]: its two [`RunKey`]s and the key of
/// every unit it is responsible for.
pub(super) struct RunShare<'a> {
    cache: &'a SharedOutcomes,
    /// The run's key ([`RunKey::new`]) and its whole-state key
    /// ([`RunKey::whole_state`]).
    runs: [RunKey; 2],
    keys: Vec<Option<UnitKey>>,
}

/// A unit's key within one of its run's two keys.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct UnitKey {
    /// Whether the unit restores the whole state from one iteration, keyed
    /// within [`RunKey::whole_state`] ([`unit_key`]).
    whole_state: bool,
    key: String,
}

impl<'a> RunShare<'a> {
    /// `keys[u]`: unit `u`'s key ([`unit_key`]), `None` for units of other shards.
    pub(super) fn new(
        cache: &'a SharedOutcomes,
        runs: [RunKey; 2],
        keys: Vec<Option<UnitKey>>,
    ) -> Self {
        RunShare { cache, runs, keys }
    }

    fn run_of(&self, key: &UnitKey) -> &RunKey {
        &self.runs[usize::from(key.whole_state)]
    }

    /// A stored outcome for one of the units `group` (identical units).
    pub(super) fn lookup(&self, mut group: impl Iterator<Item = usize>) -> Option<TrialOutcome> {
        let runs = self.cache.lock();
        group.find_map(|u| {
            let k = self.keys.get(u)?.as_ref()?;
            runs.get(&self.run_of(k).0)?.get(&k.key).copied()
        })
    }

    /// Stores the outcomes of units (those without a key are skipped).
    pub(super) fn store(&self, outcomes: impl IntoIterator<Item = (usize, TrialOutcome)>) {
        let mut keyed: [Vec<(String, TrialOutcome)>; 2] = Default::default();
        for (u, o) in outcomes {
            if let Some(Some(k)) = self.keys.get(u) {
                keyed[usize::from(k.whole_state)].push((k.key.clone(), o));
            }
        }
        for (run, keyed) in self.runs.iter().zip(keyed) {
            if !keyed.is_empty() {
                self.cache.insert(run, keyed);
            }
        }
    }
}

/// What every trial of one recovery run depends on (see the module
/// documentation), as a canonical JSON string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RunKey(String);

/// What both keys start from: the program, the model as written, the
/// scenario seed and the data actually used (and how it was obtained).
/// Floats are keyed by their bits.
#[derive(Serialize)]
struct DataIdentity<'a> {
    version: &'static str,
    model: &'a crate::model::ModelSpec,
    seed: u64,
    dataset: crate::data::DatasetName,
    provenance: &'a crate::data::Provenance,
    size_ratio: u64,
    synthetic: bool,
    synthetic_scale: u64,
    data_dir: &'a [u8],
}

impl<'a> DataIdentity<'a> {
    fn new(
        model: &'a crate::model::ModelSpec,
        seed: u64,
        data: &'a DataUsed,
        data_opts: &'a DataOptions,
    ) -> DataIdentity<'a> {
        DataIdentity {
            version: env!("CARGO_PKG_VERSION"),
            model,
            seed,
            dataset: data.dataset,
            provenance: &data.provenance,
            size_ratio: data.size_ratio.to_bits(),
            synthetic: data_opts.synthetic,
            synthetic_scale: data_opts.synthetic_scale.to_bits(),
            data_dir: data_opts.data_dir.as_os_str().as_encoded_bytes(),
        }
    }
}

/// The parts of a [`RunKey`]. Floats are keyed by their bits.
#[derive(Serialize)]
struct RunParts<'a> {
    #[serde(flatten)]
    identity: DataIdentity<'a>,
    data_order: crate::scenario::DataOrderMode,
    criterion_used: u64,
    max_iterations: usize,
    criterion_written: u64,
    max_iterations_written: usize,
    synthetic_criterion: Option<crate::scenario::recovery::SyntheticCriterion>,
    ps_nodes: usize,
    /// `None` in a whole-state key, which does not depend on the blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    blocks: Option<usize>,
}

impl RunKey {
    /// The key of running `sc` on `data` (obtained with `data_opts`) with
    /// the convergence test `convergence` and a model of `blocks` blocks.
    pub(super) fn new(
        sc: &RecoveryScenario,
        data: &DataUsed,
        data_opts: &DataOptions,
        convergence: &Convergence,
        blocks: usize,
    ) -> Result<RunKey> {
        RunKey::from_parts(sc, &sc.model, data, data_opts, convergence, Some(blocks))
    }

    /// The key of the trials of `sc` that restore every block from one
    /// iteration c ([`Restoration::whole_state_from`](crate::policy::Restoration::whole_state_from)):
    /// as [`RunKey::new`], but with the model's training spec
    /// ([`ModelSpec::training_spec`](crate::model::ModelSpec::training_spec))
    /// and no block count. Such a trial recovers to x(c)'s parameters whole,
    /// whatever the blocks, so the CNN's by-layer and by-shard panels share
    /// their full-recovery trials.
    pub(super) fn whole_state(
        sc: &RecoveryScenario,
        data: &DataUsed,
        data_opts: &DataOptions,
        convergence: &Convergence,
    ) -> Result<RunKey> {
        let training = sc.model.training_spec();
        RunKey::from_parts(sc, &training, data, data_opts, convergence, None)
    }

    fn from_parts(
        sc: &RecoveryScenario,
        model: &crate::model::ModelSpec,
        data: &DataUsed,
        data_opts: &DataOptions,
        convergence: &Convergence,
        blocks: Option<usize>,
    ) -> Result<RunKey> {
        let parts = RunParts {
            identity: DataIdentity::new(model, sc.meta.seed, data, data_opts),
            data_order: sc.data_order,
            criterion_used: convergence.criterion.to_bits(),
            max_iterations: convergence.max_iterations,
            criterion_written: sc.convergence.criterion.to_bits(),
            max_iterations_written: sc.convergence.max_iterations,
            synthetic_criterion: sc.synthetic_criterion,
            ps_nodes: sc.ps_nodes,
            blocks,
        };
        serde_json::to_string(&parts)
            .map(RunKey)
            .with_context(|| format!("scenario `{}`: cannot key its trials", sc.meta.name))
    }
}

/// What x(N), the unperturbed run continued to N iterations, depends on:
/// the model's type and spec, the scenario seed (stand-ins, model builds),
/// the data used, the run's data order and N. Not ε: the run's states do not
/// depend on where it is said to converge. Nor B, the state the continuation
/// starts from: a state forked from a snapshot of the run steps exactly as
/// the run did ([`Model::snapshot`](crate::model::Model::snapshot)'s
/// contract, which the fork shortcut's tests check against reruns), so any
/// x(B) continued to N gives the same x(N).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LongRunKey(String);

#[derive(Serialize)]
struct LongRunParts<'a> {
    #[serde(flatten)]
    identity: DataIdentity<'a>,
    model_type: &'static str,
    run_seed: u64,
    iterations: usize,
}

impl LongRunKey {
    /// The key of x(`iterations`) of a `M` built from `model` with scenario
    /// seed `seed` on `data` (obtained with `data_opts`), stepped with the
    /// data order of `run_seed`.
    pub(crate) fn new<M>(
        model: &crate::model::ModelSpec,
        seed: u64,
        data: &DataUsed,
        data_opts: &DataOptions,
        run_seed: u64,
        iterations: usize,
    ) -> Result<LongRunKey> {
        let parts = LongRunParts {
            identity: DataIdentity::new(model, seed, data, data_opts),
            model_type: std::any::type_name::<M>(),
            run_seed,
            iterations,
        };
        serde_json::to_string(&parts)
            .map(LongRunKey)
            .context("cannot key the long run")
    }
}

/// Whether a baselines slot still holds live runs (a slot nobody waits on
/// and whose runs are gone is dropped from the map).
fn live(slot: &BaselinesSlot) -> bool {
    slot.try_lock()
        .map(|held| held.as_ref().is_some_and(|w| w.strong_count() > 0))
        .unwrap_or(true)
}

/// What a recovery scenario's unperturbed runs depend on: the model's type
/// and spec, the scenario seed, the data used, the convergence test as
/// resolved, and each run's seed (one for a shared data order, one per trial
/// for a per-trial order). Not the scenario's points, checkpoints or
/// failures: an unperturbed run has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BaselinesKey(String);

#[derive(Serialize)]
struct BaselinesParts<'a> {
    #[serde(flatten)]
    identity: DataIdentity<'a>,
    model_type: &'static str,
    criterion_used: u64,
    max_iterations: usize,
    run_seeds: &'a [u64],
}

impl BaselinesKey {
    /// The key of the runs of a `M` built from `sc`'s model on `data`
    /// (obtained with `data_opts`) to `convergence`, one per seed of
    /// `run_seeds`.
    pub(super) fn new<M>(
        sc: &RecoveryScenario,
        data: &DataUsed,
        data_opts: &DataOptions,
        convergence: &Convergence,
        run_seeds: &[u64],
    ) -> Result<BaselinesKey> {
        let parts = BaselinesParts {
            identity: DataIdentity::new(&sc.model, sc.meta.seed, data, data_opts),
            model_type: std::any::type_name::<M>(),
            criterion_used: convergence.criterion.to_bits(),
            max_iterations: convergence.max_iterations,
            run_seeds,
        };
        serde_json::to_string(&parts)
            .map(BaselinesKey)
            .with_context(|| {
                format!(
                    "scenario `{}`: cannot key its unperturbed runs",
                    sc.meta.name
                )
            })
    }
}

/// The parts of a unit key.
#[derive(Serialize)]
struct UnitParts<'a> {
    trial: usize,
    baseline: usize,
    run_seed: u64,
    config: &'a PointConfig,
    failure_iteration: usize,
    lost: &'a [usize],
}

/// The parts of the key of a unit that restores the whole state from one
/// iteration: what [`TrialKey`] names, with the restored blocks as that
/// iteration. Nothing of the point's configuration: after its recovery a
/// trial's run depends on its recovered state, T and its run's data order
/// alone (see [`TrialKey`]).
#[derive(Serialize)]
struct WholeStateParts {
    baseline: usize,
    run_seed: u64,
    failure_iteration: usize,
    restored_from: u32,
}

/// The key of trial `trial` of `sc` at `point` with its draws `prepared`:
/// within [`RunKey::whole_state`] when its restoration (if found) restores
/// every one of the model's `blocks` blocks from one iteration, else within
/// its run's [`RunKey`].
pub(super) fn unit_key(
    sc: &RecoveryScenario,
    point: &Point,
    trial: usize,
    prepared: &Prepared,
    blocks: usize,
) -> Result<UnitKey> {
    let whole = prepared
        .restoration
        .as_ref()
        .and_then(|r| r.whole_state_from(blocks));
    let key = match whole {
        Some(restored_from) => serde_json::to_string(&WholeStateParts {
            baseline: baseline_index(sc, trial),
            run_seed: run_seed(sc, trial),
            failure_iteration: prepared.failure_iteration,
            restored_from,
        }),
        None => serde_json::to_string(&UnitParts {
            trial,
            baseline: baseline_index(sc, trial),
            run_seed: run_seed(sc, trial),
            config: &point.config,
            failure_iteration: prepared.failure_iteration,
            lost: &prepared.lost,
        }),
    };
    Ok(UnitKey {
        whole_state: whole.is_some(),
        key: key.context("cannot key a trial")?,
    })
}

/// Across scenarios (`reproduce`): offers the outcomes this run resumed to
/// `share`, then lets each group of identical units (a representative and
/// its `followers`) take the outcome another scenario computed for one of
/// its members. Returns the representatives still to run and the records
/// taken (`own(u, o)`: the shared outcome `o` with what unit u reports of
/// its own failure, the fields identical units may differ in).
pub(super) fn take_shared(
    share: &RunShare<'_>,
    driver: &Driver<'_>,
    mine: &[usize],
    representatives: Vec<usize>,
    followers: &[Vec<usize>],
    own: impl Fn(usize, TrialOutcome) -> TrialOutcome,
) -> Result<(Vec<usize>, Encoded)> {
    let resumed = driver.resumed();
    share.store(mine.iter().filter_map(|&u| {
        let o = serde_json::from_value(resumed.get(&u)?.clone()).ok()?;
        Some((u, o))
    }));
    let mut run = Vec::with_capacity(representatives.len());
    let mut taken = Vec::new();
    for r in representatives {
        let group = || std::iter::once(r).chain(followers[r].iter().copied());
        let Some(o) = share.lookup(group()) else {
            run.push(r);
            continue;
        };
        let outcomes: Vec<(usize, TrialOutcome)> = group().map(|u| (u, own(u, o))).collect();
        share.store(outcomes.iter().copied());
        taken.extend(encode(outcomes)?);
    }
    Ok((run, taken))
}

#[cfg(test)]
mod tests;
