//! The PS fault-tolerance strategies compared ([`Strategy`]) and their
//! options: where a stateless PS restores from, what a chain replicates.

use serde::{Deserialize, Serialize};

/// A PS fault-tolerance strategy (one series to compare).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "strategy", rename_all = "kebab-case")]
pub enum Strategy {
    /// Full checkpoints; on failure everything rolls back.
    CheckpointRestart,
    /// Partial recovery + prioritized partial checkpoints of a fraction of the blocks.
    Scar {
        /// r: fraction of the blocks each checkpoint saves (every r·interval).
        fraction: f64,
    },
    /// Each shard replicated on a chain of nodes.
    ChainReplication {
        /// n: nodes per chain.
        chain: usize,
        /// Time of one replication hop (an update waits (n − 1) hops;
        /// `every-update` replication only).
        hop_time: f64,
        /// What the chain's other nodes receive.
        #[serde(default)]
        replicate: Replication,
    },
    /// Workers keep computing through an outage; the PS applies the queue on return.
    StatelessPs {
        /// Q: above this many queued gradients the damped rate is used.
        damping_threshold: usize,
        /// Learning rate applied to the queue's sum when more than Q were queued.
        damped_learning_rate: f64,
        /// Where the returning PS gets its parameters before applying the queue.
        #[serde(default)]
        restore_from: RestoreFrom,
    },
}

/// Where the stateless PS's parameters come from when it returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestoreFrom {
    /// Its last checkpoint: every block rolls back, then the queue is applied.
    #[default]
    Checkpoint,
    /// The freshest copy a worker holds (the parameters of the last pull before
    /// the outage): nothing rolls back. The PS keeps no state of its own that
    /// the workers cannot give back, which is what makes it *stateless*; Cao et
    /// al. report that only checkpointing and chain replication "suffer
    /// setbacks in accuracy due to restarting from old checkpoints".
    Workers,
}

impl RestoreFrom {
    /// Every value, in the order error messages list them.
    pub(crate) const ALL: [RestoreFrom; 2] = [RestoreFrom::Checkpoint, RestoreFrom::Workers];

    /// The value a scenario names `name`, if any.
    pub(crate) fn parse(name: &str) -> Option<RestoreFrom> {
        RestoreFrom::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The name used in scenarios.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RestoreFrom::Checkpoint => "checkpoint",
            RestoreFrom::Workers => "workers",
        }
    }
}

/// What a chain's successor nodes hold (`chain-replication`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Replication {
    /// Every update is applied down the chain before it is acknowledged:
    /// a takeover loses nothing (van Renesse and Schneider's chain replication).
    #[default]
    EveryUpdate,
    /// Only the checkpoints are copied down the chain: a takeover resumes the
    /// shard from the last checkpoint (Cao et al. 2024: chain replication
    /// "suffers setbacks in accuracy due to restarting from old checkpoints").
    Checkpoint,
}

impl Replication {
    /// Every value, in the order error messages list them.
    pub(crate) const ALL: [Replication; 2] = [Replication::EveryUpdate, Replication::Checkpoint];

    /// The value a scenario names `name`, if any.
    pub(crate) fn parse(name: &str) -> Option<Replication> {
        Replication::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The name used in scenarios.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Replication::EveryUpdate => "every-update",
            Replication::Checkpoint => "checkpoint",
        }
    }
}

impl Strategy {
    /// The name used in scenarios and CSV files.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Strategy::CheckpointRestart => "checkpoint-restart",
            Strategy::Scar { .. } => "scar",
            Strategy::ChainReplication { .. } => "chain-replication",
            Strategy::StatelessPs { .. } => "stateless-ps",
        }
    }

    /// Physical nodes per shard.
    pub(crate) fn chain(&self) -> usize {
        match self {
            Strategy::ChainReplication { chain, .. } => *chain,
            _ => 1,
        }
    }

    /// Whether a takeover by a chain's successor rolls the shard back to its
    /// last checkpoint.
    pub(super) fn failover_rolls_back(&self) -> bool {
        matches!(
            self,
            Strategy::ChainReplication {
                replicate: Replication::Checkpoint,
                ..
            }
        )
    }

    /// Whether a recovery takes every block from the workers' freshest copy.
    pub(super) fn restores_from_workers(&self) -> bool {
        matches!(
            self,
            Strategy::StatelessPs {
                restore_from: RestoreFrom::Workers,
                ..
            }
        )
    }

    /// Whether a recovery rolls every block back (not only the lost ones).
    pub(super) fn global_rollback(&self) -> bool {
        matches!(
            self,
            Strategy::CheckpointRestart | Strategy::StatelessPs { .. }
        )
    }

    /// How long a push waits for its acknowledgement before the worker
    /// pulls again: the chain's hops when every update is replicated, else 0.
    pub(super) fn ack_time(&self) -> f64 {
        match *self {
            Strategy::ChainReplication {
                chain,
                hop_time,
                replicate: Replication::EveryUpdate,
            } => (chain - 1) as f64 * hop_time,
            _ => 0.0,
        }
    }

    /// Fraction of the blocks one checkpoint saves.
    pub(crate) fn checkpoint_fraction(&self) -> f64 {
        match self {
            Strategy::Scar { fraction } => *fraction,
            _ => 1.0,
        }
    }
}
