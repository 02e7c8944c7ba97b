//! Models: iterative-convergent training algorithms whose state is split into
//! blocks (SCAR §2, §5.1, Appendix D).
//!
//! A model is added by implementing [`Model`] and registering it in
//! `registry`. The engine only ever talks to this trait: it asks for `x(0)`,
//! runs iterations, evaluates the convergence metric, and copies or measures
//! single blocks when it checkpoints, fails and recovers.

pub mod cnn;
pub(crate) mod flat;
pub mod gradient;
pub(crate) mod kernels;
pub mod lda;
pub mod mf;
pub mod mlr;
pub mod quadratic;
pub(crate) mod registry;

pub(crate) use flat::FlatParams;

pub use registry::{CnnSpec, DataUsed, MlrSpec, ModelSpec, ModelVisitor, build_and_visit};

/// What a model tells the engine and the outputs about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    /// Short model name (`mlr`, `mf`, `lda`, `cnn`, `qp`).
    pub name: &'static str,
    /// Number of blocks: the unit placed on a PS node, lost, saved and restored.
    pub blocks: usize,
    /// Number of scalar trainable parameters (without optimizer state).
    pub parameters: usize,
    /// Human-readable description of one block (e.g. "row of the 784×10 weight matrix").
    pub block_description: String,
    /// Name of the convergence metric (e.g. "cross-entropy (sum over the training set)").
    pub metric: &'static str,
}

/// How per-block distances combine into the norm of a whole perturbation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    /// Euclidean: ‖δ‖ = sqrt(Σ_b d_b²), where d_b is the L2 distance of block b.
    L2,
    /// A positive linear combination of block norms: ‖δ‖ = Σ_b d_b (LDA's
    /// length-scaled total variation, SCAR Appendix D).
    Sum,
}

impl NormKind {
    /// Combines per-block distances into a norm.
    pub(crate) fn combine(self, distances: impl Iterator<Item = f64>) -> f64 {
        match self {
            NormKind::L2 => distances.map(|d| d * d).sum::<f64>().sqrt(),
            NormKind::Sum => distances.sum(),
        }
    }
}

/// The engine's convergence test of one state: the metric, or a proof that
/// the metric is above the criterion without computing it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// The metric, exactly as [`Model::metric`] computes it.
    Exact(f64),
    /// Certified: the metric [`Model::metric`] would compute is strictly
    /// above the criterion (the run has not converged), by a rigorous bound
    /// that accounts for the rounding of the computed metric.
    Above,
}

/// Where one iteration sits in its run. Stochastic algorithms derive all the
/// randomness of iteration `iteration` from `run_seed`, so a perturbed run and
/// its unperturbed baseline see the same minibatches and the same random
/// numbers at the same iteration ("same data order, same seed").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IterCtx {
    /// Index k of the iteration that maps x(k) to x(k+1).
    pub iteration: usize,
    /// Seed of the run's data order and per-iteration randomness.
    pub run_seed: u64,
}

/// Minibatch SGD's data order (MLR, the CNN): each epoch is a fresh
/// permutation of the `rows` examples drawn from `(run_seed, epoch)`, cut
/// into `max(rows / batch, 1)` minibatches of `batch`; iteration k uses
/// minibatch k mod that count of epoch k div it. Refreshes `perm` (cached
/// under `perm_key`) when the epoch changes and returns the range of `perm`
/// that is iteration `ctx.iteration`'s minibatch.
pub(crate) fn epoch_minibatch(
    ctx: IterCtx,
    rows: usize,
    batch: usize,
    perm: &mut Vec<u32>,
    perm_key: &mut Option<(u64, usize)>,
) -> std::ops::Range<usize> {
    use rand::seq::SliceRandom;
    let per_epoch = (rows / batch).max(1);
    let epoch = ctx.iteration / per_epoch;
    let j = ctx.iteration % per_epoch;
    if *perm_key != Some((ctx.run_seed, epoch)) {
        perm.clear();
        perm.extend(0..rows as u32);
        let mut rng = crate::rng::stream(
            ctx.run_seed,
            crate::rng::Purpose::DataOrder,
            epoch as u64,
            0,
        );
        perm.shuffle(&mut rng);
        *perm_key = Some((ctx.run_seed, epoch));
    }
    j * batch..(j + 1) * batch
}

/// An iterative-convergent training algorithm `x(k+1) = f(x(k))` over a
/// block-structured state (SCAR eq. 1).
///
/// Contract the engine relies on:
/// - [`Model::init`] is deterministic: every run starts from the same `x(0)`.
/// - [`Model::step`] depends only on the state, the [`IterCtx`] and the data:
///   two runs in the same state at the same iteration stay identical.
/// - The engine calls [`Model::metric`] on `x(k)` and then, unless converged,
///   [`Model::step`] on the same state; implementations may reuse work done by
///   `metric` in `step` (MLR reuses the full-data logits) but must stay
///   correct if `step` is called without a fresh `metric`.
/// - Block operations touch exactly one block and whatever optimizer state
///   travels with it (e.g. Adam moments); derived state (e.g. LDA word-topic
///   counts) is brought up to date by [`Model::rebuild_derived`].
pub trait Model: Send + Sync {
    /// The complete training state: parameters, the optimizer state that moves
    /// with them, and derived state.
    type State: Clone + Send + Sync + 'static;
    /// Reusable buffers for one run, so that iterations do not allocate.
    type Workspace: Send;

    /// Name, block count and metric of this model instance.
    fn info(&self) -> ModelInfo;
    /// Number of blocks (cheap; equals `info().blocks`).
    fn block_count(&self) -> usize;
    /// The initial state x(0).
    fn init(&self) -> Self::State;
    /// Fresh buffers for one run.
    fn workspace(&self) -> Self::Workspace;
    /// The convergence metric of `state` (lower is better; a run has converged
    /// once it is at or below the scenario's criterion).
    fn metric(&self, state: &Self::State, ws: &mut Self::Workspace) -> f64;
    /// One iteration: x(k) → x(k+1).
    fn step(&self, state: &mut Self::State, ctx: IterCtx, ws: &mut Self::Workspace);
    /// Copies block `block` (and its optimizer state) from `src` into `dst`.
    fn copy_block(&self, src: &Self::State, dst: &mut Self::State, block: usize);
    /// Distance between block `block` of `a` and of `b` (L2 unless the model says otherwise).
    fn block_distance(&self, a: &Self::State, b: &Self::State, block: usize) -> f64;
    /// Parameters in block `block`: what checkpointing it writes, for the
    /// `parameters` write budget (SCAR §4.2, [`crate::policy::WriteBudget`]).
    /// Only ratios matter. Default: every block the same size.
    fn block_params(&self, _block: usize) -> usize {
        1
    }
    /// How block distances combine into the norm of a perturbation.
    fn norm_kind(&self) -> NormKind {
        NormKind::L2
    }
    /// Recomputes derived state after blocks were restored. Default: nothing to do.
    fn rebuild_derived(&self, _state: &mut Self::State) {}

    /// The copy of a state kept in the unperturbed trajectory. It may leave
    /// out derived state to save memory: the engine only reads blocks from
    /// snapshots ([`Model::copy_block`], [`Model::block_distance`]) and calls
    /// [`Model::rebuild_derived`] on every state forked from one before
    /// stepping it. Default: a full clone.
    fn snapshot(&self, state: &Self::State) -> Self::State {
        state.clone()
    }

    /// Flat access to the real-valued parameters, for perturbations of the
    /// whole parameter vector (random, adversarial, reduced precision).
    /// Default: none (e.g. LDA's state is discrete token assignments).
    fn flat_params(&self) -> Option<&dyn FlatParams<Self::State>> {
        None
    }

    /// How many independent runs the engine should advance together with
    /// [`Model::metric_many`] and [`Model::step_many`] (1: one at a time).
    /// Runs in a cohort share the data order and stand at the same iteration,
    /// so a model can read its data once for all of them (MLR stacks the
    /// weight matrices of a cohort into one wide product). A run's results
    /// must not depend on which other runs share its cohort.
    fn cohort_size(&self) -> usize {
        1
    }

    /// Whether [`Model::metric_apart`] and [`Model::step_apart`] serve runs
    /// of different data orders about as cheaply as [`Model::metric_many`]
    /// and [`Model::step_many`] serve one (LDA: every lane reads the same
    /// corpus, only its uniform numbers are its own). The engine then forms
    /// the trial cohorts of a per-trial data order across trial indices
    /// instead of within one (at most a handful of units). Results do not
    /// depend on it. Default: `false`.
    fn cohorts_span_data_orders(&self) -> bool {
        false
    }

    /// The metric of every `states[i]` with `active[i]`, into `out[i]`.
    /// `next` is the iteration whose [`Model::step_many`] may follow on the
    /// same states, so its work can be prepared. Default: one [`Model::metric`] each.
    fn metric_many(
        &self,
        states: &[Self::State],
        active: &[bool],
        next: IterCtx,
        ws: &mut Self::Workspace,
        out: &mut [f64],
    ) {
        let _ = next;
        for ((s, &a), o) in states.iter().zip(active).zip(out.iter_mut()) {
            if a {
                *o = self.metric(s, ws);
            }
        }
    }

    /// The metric of every `states[i]` with `active[i]`, into `out[i]`, for
    /// states that need **not** share a data order or an iteration (the
    /// unperturbed runs of a per-trial data order, advanced side by side).
    /// `next[i]` is the iteration whose [`Model::step_apart`] may follow on
    /// `states[i]`, so its work can be prepared. Each `out[i]` has the bits
    /// of [`Model::metric`] of `states[i]`. Default: one [`Model::metric`] each.
    fn metric_apart(
        &self,
        states: &[Self::State],
        active: &[bool],
        next: &[IterCtx],
        ws: &mut Self::Workspace,
        out: &mut [f64],
    ) {
        let _ = next;
        for ((s, &a), o) in states.iter().zip(active).zip(out.iter_mut()) {
            if a {
                *o = self.metric(s, ws);
            }
        }
    }

    /// One iteration for every `states[i]` with `active[i]`, each at its own
    /// `next[i]` (states as in [`Model::metric_apart`]); each state ends
    /// with the bits of [`Model::step`]. Default: one [`Model::step`] each.
    fn step_apart(
        &self,
        states: &mut [Self::State],
        active: &[bool],
        next: &[IterCtx],
        ws: &mut Self::Workspace,
    ) {
        for ((s, &a), &ctx) in states.iter_mut().zip(active).zip(next) {
            if a {
                self.step(s, ctx, ws);
            }
        }
    }

    /// The convergence test of every `states[i]` with `active[i]`, into
    /// `out[i]`: [`Check::Above`] where the model can prove the metric is
    /// above `criterion` without computing it, else the exact metric.
    /// Either way the iteration at which a run first meets the criterion is
    /// exactly what [`Model::metric_many`] at every iteration gives (the
    /// brute-force path, which tests compare it with trial by trial). `next`
    /// is as in [`Model::metric_many`]. Default: the exact metric every time.
    fn check_many(
        &self,
        states: &[Self::State],
        active: &[bool],
        next: IterCtx,
        criterion: f64,
        ws: &mut Self::Workspace,
        out: &mut [Check],
    ) {
        let _ = criterion;
        let mut m = vec![0.0; states.len()];
        self.metric_many(states, active, next, ws, &mut m);
        for ((o, v), &a) in out.iter_mut().zip(m).zip(active) {
            if a {
                *o = Check::Exact(v);
            }
        }
    }

    /// One iteration for every `states[i]` with `active[i]`. Default: one
    /// [`Model::step`] each.
    fn step_many(
        &self,
        states: &mut [Self::State],
        active: &[bool],
        ctx: IterCtx,
        ws: &mut Self::Workspace,
    ) {
        for (s, &a) in states.iter_mut().zip(active) {
            if a {
                self.step(s, ctx, ws);
            }
        }
    }

    /// For a model whose step depends on the state alone — not on the
    /// iteration, a data order or a random draw (ALS) — whether `a` and `b`
    /// are the same state bit for bit; `None` (the default) for every other
    /// model. Equal states of such a model have equal futures, so the engine
    /// finishes a trial that starts at one of the unperturbed run's states
    /// from that run's recorded metrics instead of stepping it (full recovery
    /// from a full checkpoint: see `engine::trial`).
    fn same_state(&self, a: &Self::State, b: &Self::State) -> Option<bool> {
        let _ = (a, b);
        None
    }

    /// Norm of the difference between two states, over all blocks.
    fn distance(&self, a: &Self::State, b: &Self::State) -> f64 {
        let n = self.block_count();
        self.norm_kind()
            .combine((0..n).map(|blk| self.block_distance(a, b, blk)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norms_combine() {
        let d = [3.0, 4.0];
        assert_eq!(NormKind::L2.combine(d.iter().copied()), 5.0);
        assert_eq!(NormKind::Sum.combine(d.iter().copied()), 7.0);
    }
}
