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
mod tests {
    use super::*;
    use crate::model::{IterCtx, ModelInfo};
    use crate::rng::{Purpose, stream};

    /// A toy model: n scalar blocks; each step adds (k+1)·(b+1) to block b.
    pub(crate) struct Toy(pub usize);
    impl Model for Toy {
        type State = Vec<f64>;
        type Workspace = ();
        fn info(&self) -> ModelInfo {
            ModelInfo {
                name: "toy",
                blocks: self.0,
                parameters: self.0,
                block_description: "one scalar".into(),
                metric: "sum",
            }
        }
        fn block_count(&self) -> usize {
            self.0
        }
        fn init(&self) -> Vec<f64> {
            vec![0.0; self.0]
        }
        fn workspace(&self) {}
        fn metric(&self, s: &Vec<f64>, _: &mut ()) -> f64 {
            s.iter().sum()
        }
        fn step(&self, s: &mut Vec<f64>, ctx: IterCtx, _: &mut ()) {
            for (b, v) in s.iter_mut().enumerate() {
                *v += ((ctx.iteration + 1) * (b + 1)) as f64;
            }
        }
        fn copy_block(&self, src: &Vec<f64>, dst: &mut Vec<f64>, b: usize) {
            dst[b] = src[b];
        }
        fn block_distance(&self, a: &Vec<f64>, b: &Vec<f64>, blk: usize) -> f64 {
            (a[blk] - b[blk]).abs()
        }
    }

    fn trajectory(m: &Toy, len: usize) -> Vec<Vec<f64>> {
        let mut s = m.init();
        let mut out = vec![s.clone()];
        for k in 0..len {
            m.step(
                &mut s,
                IterCtx {
                    iteration: k,
                    run_seed: 0,
                },
                &mut (),
            );
            out.push(s.clone());
        }
        out
    }

    #[test]
    fn periods_and_counts() {
        let p = CheckpointPolicy {
            interval: 8,
            fraction: 0.125,
            selector: Selector::Priority,
            budget: WriteBudget::Blocks,
        };
        assert_eq!(p.period(), 1);
        assert!(p.period_is_whole());
        assert_eq!(p.blocks_per_checkpoint(54), 7);
        assert_eq!(p.blocks_per_checkpoint(784), 98);
        let bad = CheckpointPolicy {
            interval: 4,
            fraction: 0.125,
            ..p
        };
        assert!(!bad.period_is_whole());
        let full = CheckpointPolicy {
            interval: 8,
            fraction: 1.0,
            ..p
        };
        assert_eq!(full.last_before(8), 0);
        assert_eq!(full.last_before(9), 8);
        assert_eq!(full.last_before(17), 16);
    }

    #[test]
    fn full_checkpoint_is_the_state_at_the_last_checkpoint() {
        let m = Toy(4);
        let traj = trajectory(&m, 20);
        let p = CheckpointPolicy {
            interval: 8,
            fraction: 1.0,
            selector: Selector::Round,
            budget: WriteBudget::Parameters,
        };
        let mut rng = stream(0, Purpose::CheckpointSelection, 0, 0);
        let c = RunningCheckpoint::replay(&m, &traj, &p, 13, &mut rng);
        assert_eq!(c.state, traj[8]);
        assert_eq!(c.saved_at, vec![8; 4]);
    }

    #[test]
    fn round_robin_and_priority_by_hand() {
        let m = Toy(4);
        let traj = trajectory(&m, 10);
        let mut rng = stream(0, Purpose::CheckpointSelection, 0, 0);
        // Half the blocks every 2 iterations (C = 4, r = 1/2); failure at 5:
        // checkpoints at 2 and 4.
        let round = CheckpointPolicy {
            interval: 4,
            fraction: 0.5,
            selector: Selector::Round,
            budget: WriteBudget::Parameters,
        };
        let c = RunningCheckpoint::replay(&m, &traj, &round, 5, &mut rng);
        assert_eq!(c.saved_at, vec![2, 2, 4, 4]);
        assert_eq!(
            c.state,
            vec![traj[2][0], traj[2][1], traj[4][2], traj[4][3]]
        );
        // Priority: block b grows ∝ (b+1), so blocks 2 and 3 always moved most.
        let prio = CheckpointPolicy {
            selector: Selector::Priority,
            ..round
        };
        let c = RunningCheckpoint::replay(&m, &traj, &prio, 5, &mut rng);
        assert_eq!(c.saved_at, vec![0, 0, 4, 4]);
    }

    /// A [`Restoration`](crate::policy::Restoration) rebuilds from the
    /// trajectory exactly the state and outcome `apply` gives from the
    /// replayed checkpoint; before the first checkpoint every selector and
    /// fraction restores x(0)'s blocks, so their restorations are equal.
    #[test]
    fn a_restoration_rebuilds_what_recovery_applies() {
        use crate::policy::RecoveryPolicy;
        let m = Toy(8);
        let traj = trajectory(&m, 40);
        let lost = [1, 4, 5];
        let mut before_first = Vec::new();
        for selector in [Selector::Round, Selector::Priority, Selector::Random] {
            for fraction in [1.0, 0.5, 0.25] {
                let p = CheckpointPolicy {
                    interval: 8,
                    fraction,
                    selector,
                    budget: WriteBudget::Parameters,
                };
                for t in [1, 2, 3, 9, 17, 30] {
                    for recovery in [RecoveryPolicy::Full, RecoveryPolicy::Partial] {
                        let mut rng = stream(3, Purpose::CheckpointSelection, t as u64, 0);
                        let c = RunningCheckpoint::replay(&m, &traj, &p, t, &mut rng);
                        let mut applied = traj[t].clone();
                        let outcome = recovery.apply(&m, &mut applied, &c, &lost, t);
                        let r = recovery.restoration(&m, &c, &traj[t], &lost, t);
                        let mut rebuilt = traj[t].clone();
                        r.restore(&m, &traj, &mut rebuilt);
                        let at = format!("{selector:?} r {fraction} t {t} {recovery:?}");
                        assert_eq!(rebuilt, applied, "{at}");
                        assert_eq!(r.outcome, outcome, "{at}");
                        if t <= p.period() && recovery == RecoveryPolicy::Partial {
                            before_first.push((t, r));
                        }
                    }
                }
            }
        }
        for t in [1, 2] {
            let same: Vec<_> = before_first.iter().filter(|(u, _)| *u == t).collect();
            assert_eq!(same.len(), 9, "t {t}");
            assert!(same.iter().all(|(_, r)| r.blocks == same[0].1.blocks));
            assert_eq!(same[0].1.blocks, vec![(1, 0), (4, 0), (5, 0)]);
        }
        // Later, the selectors part: round robin and priority restore
        // different iterations at r = 1/2, t = 17.
        let at = |selector| {
            let p = CheckpointPolicy {
                interval: 8,
                fraction: 0.5,
                selector,
                budget: WriteBudget::Parameters,
            };
            let mut rng = stream(3, Purpose::CheckpointSelection, 17, 0);
            let c = RunningCheckpoint::replay(&m, &traj, &p, 17, &mut rng);
            RecoveryPolicy::Partial.restoration(&m, &c, &traj[17], &lost, 17)
        };
        assert_ne!(at(Selector::Round).blocks, at(Selector::Priority).blocks);
    }

    #[test]
    fn random_selects_distinct_blocks() {
        let m = Toy(10);
        let traj = trajectory(&m, 3);
        let mut sel = SelectorState::new(&m);
        let mut rng = stream(5, Purpose::CheckpointSelection, 0, 0);
        let p = CheckpointPolicy {
            interval: 10,
            fraction: 0.4,
            selector: Selector::Random,
            budget: WriteBudget::Blocks,
        };
        let chosen = sel.select(&m, &p, &traj[1], &traj[0], &mut rng).to_vec();
        assert_eq!(chosen.len(), 4);
        assert!(chosen.windows(2).all(|w| w[0] < w[1]));
    }

    /// The toy with blocks of the given sizes (parameters per block).
    struct Sized(Toy, Vec<usize>);
    impl Model for Sized {
        type State = Vec<f64>;
        type Workspace = ();
        fn info(&self) -> ModelInfo {
            self.0.info()
        }
        fn block_count(&self) -> usize {
            self.0.block_count()
        }
        fn init(&self) -> Vec<f64> {
            self.0.init()
        }
        fn workspace(&self) {}
        fn metric(&self, s: &Vec<f64>, ws: &mut ()) -> f64 {
            self.0.metric(s, ws)
        }
        fn step(&self, s: &mut Vec<f64>, ctx: IterCtx, ws: &mut ()) {
            self.0.step(s, ctx, ws)
        }
        fn copy_block(&self, src: &Vec<f64>, dst: &mut Vec<f64>, b: usize) {
            self.0.copy_block(src, dst, b)
        }
        fn block_distance(&self, a: &Vec<f64>, b: &Vec<f64>, blk: usize) -> f64 {
            self.0.block_distance(a, b, blk)
        }
        fn block_params(&self, block: usize) -> usize {
            self.1[block]
        }
    }

    /// The blocks each of `checkpoints` successive checkpoints writes along
    /// `traj` (each saved into a running copy, as a replay does).
    fn writes<M: Model<State = Vec<f64>>>(
        m: &M,
        p: &CheckpointPolicy,
        traj: &[Vec<f64>],
        checkpoints: usize,
    ) -> Vec<Vec<usize>> {
        let mut sel = SelectorState::new(m);
        let mut rng = stream(3, Purpose::CheckpointSelection, 0, 0);
        let mut saved = traj[0].clone();
        (1..=checkpoints)
            .map(|k| {
                let chosen = sel.select(m, p, &traj[k], &saved, &mut rng).to_vec();
                for &b in &chosen {
                    m.copy_block(&traj[k], &mut saved, b);
                }
                chosen
            })
            .collect()
    }

    #[test]
    fn parameter_budget_is_the_block_count_when_blocks_are_equal_and_r_n_is_whole() {
        let m = Toy(16);
        let traj = trajectory(&m, 12);
        for selector in [Selector::Priority, Selector::Round, Selector::Random] {
            let blocks = CheckpointPolicy {
                interval: 8,
                fraction: 0.125,
                selector,
                budget: WriteBudget::Blocks,
            };
            let params = CheckpointPolicy {
                budget: WriteBudget::Parameters,
                ..blocks
            };
            assert_eq!(
                writes(&m, &blocks, &traj, 12),
                writes(&m, &params, &traj, 12)
            );
        }
        // r·n = 2.5: the half block is carried, 2 and 3 blocks alternate, so
        // every C = 4 checkpoints (4 iterations at r = 1/4) write 10 blocks.
        let m = Toy(10);
        let p = CheckpointPolicy {
            interval: 4,
            fraction: 0.25,
            selector: Selector::Round,
            budget: WriteBudget::Parameters,
        };
        let counts: Vec<usize> = writes(&m, &p, &trajectory(&m, 8), 8)
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(counts, vec![2, 3, 2, 3, 2, 3, 2, 3]);
        let b = CheckpointPolicy {
            budget: WriteBudget::Blocks,
            ..p
        };
        assert!(
            writes(&m, &b, &trajectory(&m, 8), 8)
                .iter()
                .all(|w| w.len() == 3)
        );
    }

    #[test]
    fn parameter_budget_writes_a_full_checkpoints_parameters_per_interval() {
        // One big block (like the CNN's fc1, 69% of the parameters) and small ones.
        let sizes = vec![69, 5, 5, 5, 4, 4, 4, 2, 1, 1];
        let total: usize = sizes.iter().sum();
        let m = Sized(Toy(10), sizes.clone());
        let traj = trajectory(&m.0, 64);
        for selector in [Selector::Priority, Selector::Round, Selector::Random] {
            let p = CheckpointPolicy {
                interval: 8,
                fraction: 0.125,
                selector,
                budget: WriteBudget::Parameters,
            };
            let w = writes(&m, &p, &traj, 64);
            let mut written = 0;
            for (i, chosen) in w.iter().enumerate() {
                written += chosen.iter().map(|&b| sizes[b]).sum::<usize>();
                // Never more than the credit earned so far.
                assert!(
                    written * 8 <= (i + 1) * total,
                    "{selector:?} {i}: {written}"
                );
            }
            // 64 checkpoints at r = 1/8 earn 8 full checkpoints; at most the
            // largest block's worth is still unspent.
            assert!(written + 69 >= 8 * total, "{selector:?}: {written}");
            // Round and random write the big block too (it waits for credit
            // and is not starved by the small ones); priority writes it only
            // once its change per parameter ranks first, which in this toy
            // (its parameters move least) takes longer than 64 checkpoints.
            if selector != Selector::Priority {
                assert!(w.iter().any(|c| c.contains(&0)), "{selector:?}");
            }
        }
        // Counting blocks instead writes ⌈1.25⌉ = 2 blocks per checkpoint.
        let b = CheckpointPolicy {
            interval: 8,
            fraction: 0.125,
            selector: Selector::Priority,
            budget: WriteBudget::Blocks,
        };
        let w = writes(&m, &b, &traj, 8);
        assert!(w.iter().all(|c| c.len() == 2));
        // Priority with the credit ranks by d²/size: the toy's block b moves
        // by ∝ b + 1, so at the first checkpoint the scores are
        // (b+1)²/size_b: 9 (100), 8 (81), 7 (32), 6 (12.25), 5 (9), 4 (6.25),
        // 3 (3.2), 2 (1.8), 1 (0.8), 0 (1/69); blocks 9, 8, 7, 6 and 5 take 12
        // of the 12.5 parameters earned and block 4 does not fit.
        let p = CheckpointPolicy {
            budget: WriteBudget::Parameters,
            ..b
        };
        let w = writes(&m, &p, &traj, 8);
        assert_eq!(w[0], vec![5, 6, 7, 8, 9]);
    }
}
