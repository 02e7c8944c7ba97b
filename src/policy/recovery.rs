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
        for &b in &restore {
            model.copy_block(&checkpoint.state, state, b);
            age += (failure - checkpoint.saved_at[b].min(failure)) as f64;
        }
        model.rebuild_derived(state);
        RecoveryOutcome {
            restored_blocks: restore.len(),
            perturbation_norm,
            full_recovery_norm,
            mean_restored_age: if restore.is_empty() {
                0.0
            } else {
                age / restore.len() as f64
            },
        }
    }
}
