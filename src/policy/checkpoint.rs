//! Checkpoint policies and the running checkpoint (SCAR §4.2).
//!
//! The running checkpoint starts as x(0). A policy with interval C and
//! fraction r saves ⌈r·n⌉ of the n blocks every r·C iterations, so every
//! policy writes the same number of blocks per C iterations; r = 1 is the
//! traditional full checkpoint every C iterations. Which blocks a partial
//! checkpoint saves is the [`Selector`]'s job.

use rand::RngExt;
use serde::Serialize;

use crate::model::Model;
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
    /// The name used in scenarios.
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
    pub fn checkpoints_before(self, t: usize) -> usize {
        match self {
            EventOrder::FailureFirst => t,
            EventOrder::CheckpointFirst => t + 1,
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
}

impl CheckpointPolicy {
    /// Iterations between two checkpoints, r·C (validated to be a whole number ≥ 1).
    pub fn period(&self) -> usize {
        ((self.fraction * self.interval as f64).round() as usize).max(1)
    }

    /// Whether r·C is a whole number of iterations ≥ 1.
    pub fn period_is_whole(&self) -> bool {
        let p = self.fraction * self.interval as f64;
        p >= 1.0 - 1e-9 && (p - p.round()).abs() < 1e-9
    }

    /// Blocks saved per checkpoint, ⌈r·n⌉ (so 1/r checkpoints can cover every block).
    pub fn blocks_per_checkpoint(&self, blocks: usize) -> usize {
        ((self.fraction * blocks as f64 - 1e-9).ceil() as usize).clamp(1, blocks.max(1))
    }

    /// Whether every checkpoint saves every block.
    pub fn is_full(&self) -> bool {
        self.fraction >= 1.0
    }

    /// The iteration of the last checkpoint strictly before `t` (0 if none:
    /// the running checkpoint then still holds x(0)).
    pub fn last_before(&self, t: usize) -> usize {
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
        let mut selector = SelectorState::new(n);
        let count = policy.blocks_per_checkpoint(n);
        let period = policy.period();
        let mut k = period;
        while k < failure {
            let current = &trajectory[k];
            let chosen = selector.select(model, policy.selector, current, &ckpt.state, count, rng);
            for &b in chosen {
                model.copy_block(current, &mut ckpt.state, b);
                ckpt.saved_at[b] = k;
            }
            k += period;
        }
        ckpt
    }
}

/// Buffers and the round-robin cursor of a selector.
pub struct SelectorState {
    cursor: usize,
    scored: Vec<(f64, usize)>,
    chosen: Vec<usize>,
    pool: Vec<usize>,
}

impl SelectorState {
    /// Buffers for a model with `blocks` blocks.
    pub fn new(blocks: usize) -> SelectorState {
        SelectorState {
            cursor: 0,
            scored: Vec::with_capacity(blocks),
            chosen: Vec::with_capacity(blocks),
            pool: (0..blocks).collect(),
        }
    }

    /// Chooses `count` blocks to save from `current` into `saved`.
    pub fn select<M: Model>(
        &mut self,
        model: &M,
        selector: Selector,
        current: &M::State,
        saved: &M::State,
        count: usize,
        rng: &mut SimRng,
    ) -> &[usize] {
        let n = model.block_count();
        self.chosen.clear();
        match selector {
            Selector::Priority => {
                self.scored.clear();
                self.scored
                    .extend((0..n).map(|b| (model.block_distance(current, saved, b), b)));
                // Largest distance first; ties go to the lower block index.
                let order =
                    |a: &(f64, usize), b: &(f64, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
                if count < n {
                    self.scored.select_nth_unstable_by(count, order);
                }
                self.chosen.extend(self.scored[..count].iter().map(|s| s.1));
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
        self.chosen.sort_unstable();
        &self.chosen
    }
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

    #[test]
    fn random_selects_distinct_blocks() {
        let m = Toy(10);
        let traj = trajectory(&m, 3);
        let mut sel = SelectorState::new(10);
        let mut rng = stream(5, Purpose::CheckpointSelection, 0, 0);
        let chosen = sel
            .select(&m, Selector::Random, &traj[1], &traj[0], 4, &mut rng)
            .to_vec();
        assert_eq!(chosen.len(), 4);
        assert!(chosen.windows(2).all(|w| w[0] < w[1]));
    }
}
