//! Recovery policies (SCAR §4.1): restore every block from the running
//! checkpoint (traditional, "full") or only the blocks the failure lost
//! ("partial").

use serde::Serialize;

use super::RunningCheckpoint;
use crate::model::Model;

/// How a failure is recovered from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryPolicy {
    /// Traditional checkpoint recovery: every block is reloaded from the
    /// checkpoint, δ = x(C) − x(T) on all coordinates (Example 2.3).
    Full,
    /// SCAR partial recovery: only the lost blocks are reloaded; the
    /// surviving PS nodes keep their current values (Theorems 3.1, 3.2).
    Partial,
}

impl RecoveryPolicy {
    /// The name used in scenarios and CSV files.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RecoveryPolicy::Full => "full",
            RecoveryPolicy::Partial => "partial",
        }
    }
}

/// What one recovery did to the state.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct RecoveryOutcome {
    /// Blocks reloaded from the checkpoint.
    pub(crate) restored_blocks: usize,
    /// ‖δ‖: norm of the change recovery made to the state (the perturbation).
    pub(crate) perturbation_norm: f64,
    /// ‖x(C) − x(T)‖ over all blocks: the perturbation full recovery would
    /// have made for the same failure (equal to `perturbation_norm` for full).
    pub(crate) full_recovery_norm: f64,
    /// Mean over restored blocks of (T − iteration the block was saved).
    pub(crate) mean_restored_age: f64,
}

impl RecoveryPolicy {
    /// Recovers `state` = x(T) from `checkpoint` after losing `lost`
    /// (sorted block indices), then rebuilds derived state.
    pub(crate) fn apply<M: Model>(
        self,
        model: &M,
        state: &mut M::State,
        checkpoint: &RunningCheckpoint<M::State>,
        lost: &[usize],
        failure: usize,
    ) -> RecoveryOutcome {
        let r = self.restoration(model, checkpoint, state, lost, failure);
        for &(b, _) in &r.blocks {
            model.copy_block(&checkpoint.state, state, b as usize);
        }
        model.rebuild_derived(state);
        r.outcome
    }

    /// What [`RecoveryPolicy::apply`] would do to `state` = x(T), without
    /// doing it: the blocks it restores with the iteration each was saved
    /// at, and the outcome it reports.
    pub(crate) fn restoration<M: Model>(
        self,
        model: &M,
        checkpoint: &RunningCheckpoint<M::State>,
        state: &M::State,
        lost: &[usize],
        failure: usize,
    ) -> Restoration {
        let n = model.block_count();
        let norm = model.norm_kind();
        let dist: Vec<f64> = (0..n)
            .map(|b| model.block_distance(&checkpoint.state, state, b))
            .collect();
        let full_recovery_norm = norm.combine(dist.iter().copied());
        let restore: Vec<usize> = match self {
            RecoveryPolicy::Full => (0..n).collect(),
            RecoveryPolicy::Partial => lost.to_vec(),
        };
        let perturbation_norm = match self {
            RecoveryPolicy::Full => full_recovery_norm,
            RecoveryPolicy::Partial => norm.combine(restore.iter().map(|&b| dist[b])),
        };
        let mut age = 0.0;
        let mut blocks = Vec::with_capacity(restore.len());
        for &b in &restore {
            let saved = checkpoint.saved_at[b];
            blocks.push((narrow(b), narrow(saved)));
            age += (failure - saved.min(failure)) as f64;
        }
        Restoration {
            blocks,
            outcome: RecoveryOutcome {
                restored_blocks: restore.len(),
                perturbation_norm,
                full_recovery_norm,
                mean_restored_age: if restore.is_empty() {
                    0.0
                } else {
                    age / restore.len() as f64
                },
            },
        }
    }
}

/// Block indices and iterations are far below 2³² (checked).
fn narrow(x: usize) -> u32 {
    u32::try_from(x).expect("a block index or iteration beyond 2^32")
}

/// What one recovery restores, as [`RecoveryPolicy::restoration`] found it:
/// the recovered state is x(T) with each of `blocks`' block b replaced by
/// block b of x(saved) (a running checkpoint's block b is x(saved)'s, by
/// [`Model::copy_block`]'s contract), so two failures at the same T with
/// equal `blocks` recover to the same state bit for bit, whatever the
/// policies that led there.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Restoration {
    /// (block, iteration its restored value was saved at), in block order.
    pub(crate) blocks: Vec<(u32, u32)>,
    /// What the recovery reports.
    pub(crate) outcome: RecoveryOutcome,
}

impl Restoration {
    /// The iteration c when this restores every one of a model's `blocks`
    /// blocks from x(c): the recovered state is then x(c)'s parameters
    /// whole, however the model is cut into blocks.
    pub(crate) fn whole_state_from(&self, blocks: usize) -> Option<u32> {
        let (&(_, saved), _) = self.blocks.split_first()?;
        // `blocks` increasing indices below `blocks` name every block.
        let every_block = self.blocks.len() == blocks
            && self.blocks.windows(2).all(|w| w[0].0 < w[1].0)
            && self.blocks.iter().all(|&(b, _)| (b as usize) < blocks);
        (every_block && self.blocks.iter().all(|&(_, s)| s == saved)).then_some(saved)
    }

    /// `state` = x(T) (a copy of `trajectory[T]`) recovered: each restored
    /// block copied from the trajectory's state it was saved at, derived
    /// state rebuilt. Exactly what [`RecoveryPolicy::apply`] leaves.
    pub(crate) fn restore<M: Model>(
        &self,
        model: &M,
        trajectory: &[M::State],
        state: &mut M::State,
    ) {
        for &(b, saved) in &self.blocks {
            model.copy_block(&trajectory[saved as usize], state, b as usize);
        }
        model.rebuild_derived(state);
    }
}
