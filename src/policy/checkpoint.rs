//! Checkpoint policies and the running checkpoint (SCAR §4.2).
//!
//! The running checkpoint starts as x(0). A policy with interval C and
//! fraction r writes a partial checkpoint every r·C iterations; r = 1 is the
//! traditional full checkpoint every C iterations. How much each partial
//! checkpoint writes is the [`WriteBudget`]'s job (by default §4.2's rule:
//! every policy writes the same number of parameters per C iterations), and
//! which blocks it saves is the [`Selector`]'s.

use rand::RngExt;
use serde::Serialize;

use crate::model::{Model, NormKind};
use crate::rng::SimRng;

/// Which blocks a partial checkpoint saves (SCAR §5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selector {
    /// The blocks that moved most since they were last saved: largest block
    /// distance between the current value and the running checkpoint.
    Priority,
    /// Round-robin over the blocks in index order.
    Round,
    /// A uniformly random subset.
    Random,
}

impl Selector {
    /// The name used in scenarios and CSV files.
    pub fn name(self) -> &'static str {
        match self {
            Selector::Priority => "priority",
            Selector::Round => "round",
            Selector::Random => "random",
        }
    }
}

/// Which comes first when a failure strikes at an iteration T at which a
/// checkpoint is due (SCAR does not say; §4.2 only fixes the period).
///
/// The default, [`EventOrder::FailureFirst`], is the reading every bundled
/// scenario has used: the failure strikes after x(T) is computed but before
/// the checkpoint due at T is written, so that checkpoint is lost and the
/// running checkpoint holds the values of earlier checkpoints only.
/// [`EventOrder::CheckpointFirst`] writes the checkpoint due at T first: a
/// full checkpoint every C iterations then restores x(T) itself when T is a
/// multiple of C (no rework), and every rework is about one iteration
/// shorter on average. Scenarios choose with `[checkpoint] event_order`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventOrder {
    /// The failure at T destroys the checkpoint due at T (the default).
    #[default]
    FailureFirst,
    /// The checkpoint due at T is written before the failure at T strikes.
    CheckpointFirst,
}

impl EventOrder {
    /// The name used in scenarios and CSV files.
    pub fn name(self) -> &'static str {
        match self {
            EventOrder::FailureFirst => "failure-first",
            EventOrder::CheckpointFirst => "checkpoint-first",
        }
    }

    /// For a failure at iteration `t`: the running checkpoint holds the
    /// checkpoints taken at iterations strictly before the returned one (the
    /// `failure` argument of [`RunningCheckpoint::replay`] and
    /// [`CheckpointPolicy::last_before`]): `t`, or `t + 1` when the
    /// checkpoint due at `t` is written first.
    pub(crate) fn checkpoints_before(self, t: usize) -> usize {
        match self {
            EventOrder::FailureFirst => t,
            EventOrder::CheckpointFirst => t + 1,
        }
    }
}

/// How much a partial checkpoint (r < 1) writes.
///
/// SCAR §4.2: "the checkpoint period rC is chosen so that the number of
/// parameters saved every C iterations remains roughly constant across
/// different values of r". With blocks of one size (MLR's feature rows, MF's
/// factor rows, the QP's coordinates) counting blocks is counting parameters;
/// with unequal blocks (the CNN's layers, LDA's documents) it is not: r = 1/8
/// of the CNN's 10 by-layer blocks is ⌈1.25⌉ = 2 blocks per checkpoint, about
/// 1.6× a full checkpoint's bytes per C iterations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteBudget {
    /// The paper's rule, and the default: each checkpoint earns r·P
    /// parameters of credit (P: all the model's parameters,
    /// [`Model::block_params`]); the selector's blocks are written in its
    /// order while the credit covers them, and what is left carries over.
    /// Over every C iterations a policy then writes P parameters, as a full
    /// checkpoint does, give or take one block. *Choice (the paper is
    /// silent):* the selector's next block waits for enough credit rather
    /// than being skipped for a smaller one (nothing is starved), and
    /// `priority` ranks blocks by what saving them takes off the norm of the
    /// perturbation per parameter written (d²/size under the L2 norm) — with
    /// blocks of one size, the plain distance order. With blocks of one size
    /// the budget is r·n blocks per checkpoint, the remainder carried (r·n
    /// whole: exactly r·n every time, as [`WriteBudget::Blocks`] gives).
    #[default]
    Parameters,
    /// ⌈r·n⌉ blocks per checkpoint, whatever their sizes (the reading of
    /// every bundled scenario before 2026-12).
    Blocks,
}

impl WriteBudget {
    /// The name used in scenarios and CSV files.
    pub fn name(self) -> &'static str {
        match self {
            WriteBudget::Parameters => "parameters",
            WriteBudget::Blocks => "blocks",
        }
    }
}

/// A checkpoint policy: save a fraction of the blocks at a fixed period.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CheckpointPolicy {
    /// C: iterations between full checkpoints (the reference interval).
    pub interval: usize,
    /// r ∈ (0, 1]: fraction of the blocks saved by each checkpoint.
    pub fraction: f64,
    /// How the saved blocks are chosen when r < 1.
    pub selector: Selector,
    /// How much each partial checkpoint writes (`[checkpoint] budget`).
    pub budget: WriteBudget,
}

impl CheckpointPolicy {
    /// Iterations between two checkpoints, r·C (validated to be a whole number ≥ 1).
    pub(crate) fn period(&self) -> usize {
        ((self.fraction * self.interval as f64).round() as usize).max(1)
    }

    /// Whether r·C is a whole number of iterations ≥ 1.
    pub(crate) fn period_is_whole(&self) -> bool {
        let p = self.fraction * self.interval as f64;
        p >= 1.0 - 1e-9 && (p - p.round()).abs() < 1e-9
    }

    /// Blocks saved per checkpoint, ⌈r·n⌉ (so 1/r checkpoints can cover every block).
    pub(crate) fn blocks_per_checkpoint(&self, blocks: usize) -> usize {
        blocks_per_checkpoint(self.fraction, blocks)
    }

    /// Whether every checkpoint saves every block.
    pub(crate) fn is_full(&self) -> bool {
        self.fraction >= 1.0
    }

    /// The iteration of the last checkpoint strictly before `t` (0 if none:
    /// the running checkpoint then still holds x(0)).
    pub(crate) fn last_before(&self, t: usize) -> usize {
        let p = self.period();
        if t == 0 { 0 } else { (t - 1) / p * p }
    }
}

/// The running checkpoint: a full model state assembled from blocks saved at
/// different iterations, plus when each block was saved.
#[derive(Clone, Debug)]
pub struct RunningCheckpoint<S> {
    /// The saved values (only block contents are meaningful; derived state is not).
    pub state: S,
    /// Iteration at which each block was last saved (0 = initial value).
    pub saved_at: Vec<usize>,
}

impl<S: Clone> RunningCheckpoint<S> {
    /// Replays `policy` along an unperturbed trajectory (`trajectory[k]` =
    /// x(k)) and returns the running checkpoint as it stands when a failure
    /// strikes at iteration `failure` (checkpoints at iterations < `failure`).
    /// `rng` drives the `random` selector only.
    pub fn replay<M: Model<State = S>>(
        model: &M,
        trajectory: &[S],
        policy: &CheckpointPolicy,
        failure: usize,
        rng: &mut SimRng,
    ) -> RunningCheckpoint<S> {
        let n = model.block_count();
        if policy.is_full() {
            let last = policy.last_before(failure);
            return RunningCheckpoint {
                state: trajectory[last].clone(),
                saved_at: vec![last; n],
            };
        }
        let mut ckpt = RunningCheckpoint {
            state: trajectory[0].clone(),
            saved_at: vec![0; n],
        };
        let mut selector = SelectorState::new(model);
        let period = policy.period();
        let mut k = period;
        while k < failure {
            let current = &trajectory[k];
            let chosen = selector.select(model, policy, current, &ckpt.state, rng);
            for &b in chosen {
                model.copy_block(current, &mut ckpt.state, b);
                ckpt.saved_at[b] = k;
            }
            k += period;
        }
        ckpt
    }
}

/// Buffers, the round-robin cursor and the write credit of a selector.
pub(crate) struct SelectorState {
    cursor: usize,
    scored: Vec<(f64, usize)>,
    chosen: Vec<usize>,
    pool: Vec<usize>,
    /// [`Model::block_params`] of every block.
    sizes: Vec<usize>,
    /// Σ sizes: P.
    total: usize,
    /// Whether every block has the same size (counting blocks is then
    /// counting parameters).
    uniform: bool,
    /// Unspent write credit of [`WriteBudget::Parameters`]: parameters, or
    /// blocks when `uniform`.
    credit: f64,
    /// The `random` selector's block drawn but not yet covered by the credit.
    waiting: Option<usize>,
}

impl SelectorState {
    /// Buffers for `model`'s blocks.
    pub(crate) fn new<M: Model>(model: &M) -> SelectorState {
        let n = model.block_count();
        let sizes: Vec<usize> = (0..n).map(|b| model.block_params(b)).collect();
        SelectorState {
            cursor: 0,
            scored: Vec::with_capacity(n),
            chosen: Vec::with_capacity(n),
            pool: (0..n).collect(),
            total: sizes.iter().sum(),
            uniform: sizes.windows(2).all(|w| w[0] == w[1]),
            sizes,
            credit: 0.0,
            waiting: None,
        }
    }

    /// The fraction of the model's parameters that `blocks` hold.
    pub(crate) fn share_of(&self, blocks: &[usize]) -> f64 {
        if self.uniform {
            blocks.len() as f64 / self.sizes.len().max(1) as f64
        } else {
            blocks.iter().map(|&b| self.sizes[b]).sum::<usize>() as f64 / self.total.max(1) as f64
        }
    }

    /// Chooses the blocks one checkpoint of `policy` saves from `current`
    /// into `saved` (sorted by index). A full policy (r = 1) saves every block.
    pub(crate) fn select<M: Model>(
        &mut self,
        model: &M,
        policy: &CheckpointPolicy,
        current: &M::State,
        saved: &M::State,
        rng: &mut SimRng,
    ) -> &[usize] {
        let n = model.block_count();
        self.chosen.clear();
        if policy.is_full() {
            self.chosen.extend(0..n);
            return &self.chosen;
        }
        match policy.budget {
            WriteBudget::Blocks => {
                let count = policy.blocks_per_checkpoint(n);
                self.take(model, policy.selector, current, saved, count, rng);
            }
            WriteBudget::Parameters if self.uniform => {
                self.credit += policy.fraction * n as f64;
                // The tolerance absorbs r·n's rounding (r·n = 98 must give 98).
                let count = ((self.credit + 1e-9).floor() as usize).min(n);
                self.credit = (self.credit - count as f64).max(0.0);
                self.take(model, policy.selector, current, saved, count, rng);
            }
            WriteBudget::Parameters => {
                self.credit += policy.fraction * self.total as f64;
                self.take_while_covered(model, policy.selector, current, saved, rng);
            }
        }
        self.chosen.sort_unstable();
        &self.chosen
    }

    /// Pushes the `count` blocks `selector` ranks first.
    fn take<M: Model>(
        &mut self,
        model: &M,
        selector: Selector,
        current: &M::State,
        saved: &M::State,
        count: usize,
        rng: &mut SimRng,
    ) {
        let n = model.block_count();
        if count == 0 {
            return;
        }
        match selector {
            Selector::Priority => {
                self.score(model, current, saved);
                let chosen = most_moved(&mut self.scored, count);
                self.chosen.extend(chosen);
            }
            Selector::Round => {
                for i in 0..count {
                    self.chosen.push((self.cursor + i) % n);
                }
                self.cursor = (self.cursor + count) % n;
            }
            Selector::Random => {
                // Partial Fisher–Yates over a persistent pool.
                for i in 0..count {
                    let j = rng.random_range(i..n);
                    self.pool.swap(i, j);
                    self.chosen.push(self.pool[i]);
                }
            }
        }
    }

    /// Pushes blocks in `selector`'s order while the credit covers them,
    /// spending it; stops at the first block it does not cover.
    fn take_while_covered<M: Model>(
        &mut self,
        model: &M,
        selector: Selector,
        current: &M::State,
        saved: &M::State,
        rng: &mut SimRng,
    ) {
        let n = model.block_count();
        if selector == Selector::Priority {
            // Per parameter written: what saving the block takes off the norm
            // of the perturbation a failure would leave (d² under the L2 norm,
            // d under LDA's sum), over its size: the greedy choice for a byte
            // budget. With blocks of one size this is the distance order.
            let kind = model.norm_kind();
            self.score(model, current, saved);
            for (v, b) in &mut self.scored {
                let gain = match kind {
                    NormKind::L2 => *v * *v,
                    NormKind::Sum => *v,
                };
                *v = gain / self.sizes[*b] as f64;
            }
            self.scored.sort_unstable_by(by_priority);
        }
        // Sizes are whole numbers; the tolerance absorbs r·P's rounding.
        let slack = 1e-9 * self.total as f64;
        let sizes = &self.sizes;
        let credit = &mut self.credit;
        let mut covers = |b: usize| {
            let size = sizes[b] as f64;
            if size <= *credit + slack {
                *credit = (*credit - size).max(0.0);
                true
            } else {
                false
            }
        };
        match selector {
            Selector::Priority => {
                for &(_, b) in &self.scored {
                    if !covers(b) {
                        break;
                    }
                    self.chosen.push(b);
                }
            }
            Selector::Round => {
                for _ in 0..n {
                    if !covers(self.cursor) {
                        break;
                    }
                    self.chosen.push(self.cursor);
                    self.cursor = (self.cursor + 1) % n;
                }
            }
            Selector::Random => {
                // A uniformly random order (partial Fisher–Yates over the
                // persistent pool) taken while the credit covers it; the
                // block drawn but not covered comes first next time, so a
                // large block is not starved by small ones.
                let mut i = 0;
                if let Some(b) = self.waiting {
                    let at = self.pool.iter().position(|&p| p == b).expect("a block");
                    self.pool.swap(0, at);
                    if !covers(b) {
                        return;
                    }
                    self.chosen.push(b);
                    self.waiting = None;
                    i = 1;
                }
                while i < n {
                    let j = rng.random_range(i..n);
                    self.pool.swap(i, j);
                    let b = self.pool[i];
                    if !covers(b) {
                        self.waiting = Some(b);
                        break;
                    }
                    self.chosen.push(b);
                    i += 1;
                }
            }
        }
    }

    fn score<M: Model>(&mut self, model: &M, current: &M::State, saved: &M::State) {
        self.scored.clear();
        self.scored
            .extend((0..model.block_count()).map(|b| (model.block_distance(current, saved, b), b)));
    }
}

/// Blocks a partial checkpoint of fraction r saves out of `blocks`: ⌈r·n⌉,
/// at least one (SCAR §4.2; the tolerance keeps r·n = 98 at 98).
pub(crate) fn blocks_per_checkpoint(fraction: f64, blocks: usize) -> usize {
    ((fraction * blocks as f64 - 1e-9).ceil() as usize).clamp(1, blocks.max(1))
}

/// The prioritized selector's choice (SCAR §4.2): the `count` blocks of
/// `scored` (distance from the saved copy, block index) that moved most,
/// ties to the lower index, by increasing index. Reorders `scored`.
pub(crate) fn most_moved(scored: &mut [(f64, usize)], count: usize) -> Vec<usize> {
    let count = count.min(scored.len());
    if count == 0 {
        return Vec::new();
    }
    if count < scored.len() {
        scored.select_nth_unstable_by(count, by_priority);
    }
    let mut chosen: Vec<usize> = scored[..count].iter().map(|s| s.1).collect();
    chosen.sort_unstable();
    chosen
}

/// Largest distance first; ties go to the lower block index.
fn by_priority(a: &(f64, usize), b: &(f64, usize)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

#[cfg(test)]
mod tests;
