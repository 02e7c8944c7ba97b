//! A parameter server in wall-clock time with PS failures and a
//! fault-tolerance strategy, training a real [`GradientModel`] (Cao et al.
//! 2024, *Training Through Failure*; SCAR §4).
//!
//! The cluster: `P` workers and a PS whose parameter blocks are placed
//! uniformly at random on `ps_nodes` shards (SCAR §4.3). Each shard runs on a
//! chain of `chain` physical nodes (1 unless the strategy is chain
//! replication); node `s·chain + i` is link `i` of shard `s`'s chain.
//! Workers run asynchronous SGD: pull the parameters, compute a minibatch
//! gradient (its time drawn from the straggler model), push it; the PS applies
//! `w ← w − η·g` at once. Only PS nodes fail (workers stay up).
//!
//! Time costs (SCAR §4, Daly): a checkpoint pauses the PS for the time to
//! write the saved blocks (`persist = sync`) or only to update the in-memory
//! cache, the write finishing in the background (`persist = async`); a
//! failure before the write finishes leaves the previous saved values. A lost
//! shard is noticed after the detection delay; it is then restored onto a host
//! (its own node when it returns, a replacement node after the join time, or,
//! for SCAR with several shards, a surviving PS node at once) in the restart time.
//!
//! Strategies (what a failure of shard `s` costs):
//! - `checkpoint-restart`: every block rolls back to the last full
//!   checkpoint; gradients computed before the recovery are discarded.
//! - `scar`: partial recovery (only the lost blocks are restored) from a running
//!   checkpoint fed by prioritized partial checkpoints (a fraction r of the
//!   blocks that moved most, every r·interval seconds).
//! - `chain-replication`: each shard on a chain of nodes; when a head fails
//!   the next live node takes over after the detection delay (pushes during
//!   the takeover are lost); only a failure of the whole chain loses the shard
//!   (then it is restored from the checkpoint). What the successor holds
//!   depends on [`Replication`]: with `every-update` (chain replication
//!   proper) every update waits for the chain's replication
//!   (`(chain − 1)·hop_time`) before the worker is acknowledged, and the
//!   successor has the same parameters; with `checkpoint` (Cao et al.'s
//!   setup, whose chain "restarts from old checkpoints") the chain receives
//!   only the checkpoints, and the successor resumes the shard from the last one.
//! - `stateless-ps`: while the PS is unavailable workers keep computing
//!   gradients on the parameters they last pulled and queue them; the PS,
//!   restored from its checkpoint (every block rolls back) or, with
//!   [`RestoreFrom::Workers`], from the freshest copy a worker holds, applies
//!   the queue's sum with η, or with the damped rate when more than Q were
//!   queued (the reference implementation: 10 and 1e-5).
//!
//! What the curves show during an outage: the parameters the PS will resume
//! from (the rollback target, plus the queue for the stateless PS), so a
//! rollback is visible when it becomes inevitable. Outside outages: the PS
//! parameters.

use serde::{Deserialize, Serialize};

pub use super::usage::Usage;

use crate::cluster::DelaySource;
use crate::engine::{EventQueue, Events, run_events};
use crate::model::gradient::GradientModel;
use crate::policy::failure::Outage;
use crate::policy::persist::Writes;
use crate::theory::daly::TimeSplit;

mod recovery;
mod sim;
mod strategy;

pub use strategy::{Replication, RestoreFrom, Strategy};

/// Checkpoint time costs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointCost {
    /// Seconds between full checkpoints (SCAR's C in time; partial ones come every r·C).
    pub interval: f64,
    /// Seconds to write every block to persistent storage (a fraction costs its share).
    pub write_time: f64,
    /// Seconds to update the in-memory cache with every block (asynchronous persist only).
    pub cache_time: f64,
    /// Persist in the background once the cache is updated (SCAR §4.3).
    pub asynchronous: bool,
}

/// Everything one wall-clock run needs besides the model and delays.
#[derive(Clone, Debug)]
pub struct PsSetup<'a> {
    /// P.
    pub workers: usize,
    /// PS shards.
    pub ps_nodes: usize,
    /// The strategy.
    pub strategy: Strategy,
    /// Checkpoint costs.
    pub checkpoint: CheckpointCost,
    /// Failure detection delay (heartbeat timeout).
    pub detection: f64,
    /// Time to restore a shard once a host is available.
    pub restart: f64,
    /// Time for a replacement node to join after detection (`INFINITY`: none).
    pub join: f64,
    /// η.
    pub eta: f64,
    /// Seed of the minibatches.
    pub run_seed: u64,
    /// Times at which loss and accuracy are evaluated (ascending).
    pub grid: &'a [f64],
    /// End of the run.
    pub horizon: f64,
    /// Outages of the physical PS nodes (0..ps_nodes·chain).
    pub outages: &'a [Outage],
    /// Shard of every block.
    pub placement: &'a [usize],
}

impl PsSetup<'_> {
    /// What a run of this setup without outages depends on besides the
    /// model and the workers' delays, as a canonical string (floats by their
    /// bits); `None` when there are outages. Of the strategy only the
    /// checkpoint fraction, the per-update acknowledgement time and the
    /// chain's length (the nodes whose uptime is counted) act when no node
    /// fails (detection, restores, rollbacks, takeovers and the stateless
    /// PS's queue act on failures), so e.g. checkpoint-restart and the
    /// stateless PS run the same failure-free run: [`run_ps`] with equal
    /// keys, the same model and the same delays gives the same [`PsRun`].
    pub(crate) fn failure_free_key(&self) -> Option<String> {
        #[derive(Serialize)]
        struct Key<'a> {
            workers: usize,
            ps_nodes: usize,
            checkpoint_fraction: u64,
            ack_time: u64,
            chain: usize,
            interval: u64,
            write_time: u64,
            cache_time: u64,
            asynchronous: bool,
            eta: u64,
            run_seed: u64,
            grid: Vec<u64>,
            horizon: u64,
            placement: &'a [usize],
        }
        if !self.outages.is_empty() {
            return None;
        }
        let c = &self.checkpoint;
        let key = Key {
            workers: self.workers,
            ps_nodes: self.ps_nodes,
            checkpoint_fraction: self.strategy.checkpoint_fraction().to_bits(),
            ack_time: self.strategy.ack_time().to_bits(),
            chain: self.strategy.chain(),
            interval: c.interval.to_bits(),
            write_time: c.write_time.to_bits(),
            cache_time: c.cache_time.to_bits(),
            asynchronous: c.asynchronous,
            eta: self.eta.to_bits(),
            run_seed: self.run_seed,
            grid: self.grid.iter().map(|g| g.to_bits()).collect(),
            horizon: self.horizon.to_bits(),
            placement: self.placement,
        };
        serde_json::to_string(&key).ok()
    }
}

/// One failure incident of a shard and its recovery.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    /// Shard.
    pub shard: usize,
    /// When its parameters became unavailable.
    #[serde(with = "crate::report::json_f64")]
    pub failed: f64,
    /// When it served again (`NaN`: not by the horizon).
    #[serde(with = "crate::report::json_f64")]
    pub recovered: f64,
    /// Whether parameters were lost (false: a chain took over).
    pub lost: bool,
    /// Blocks restored from the checkpoint.
    pub restored_blocks: usize,
    /// Gradients the stateless PS applied from its queue.
    pub queued_applied: u64,
}

/// What one run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PsRun {
    /// Loss at every grid time.
    #[serde(with = "crate::report::json_f64::vec")]
    pub grid_loss: Vec<f64>,
    /// Accuracy at every grid time (NaN if the model has none).
    #[serde(with = "crate::report::json_f64::vec")]
    pub(crate) grid_accuracy: Vec<f64>,
    /// Gradients applied to the PS parameters (including queued ones).
    pub applied: u64,
    /// Gradients computed and thrown away.
    pub discarded: u64,
    /// Gradients queued by stateless workers.
    pub queued: u64,
    /// Checkpoints completed (persisted).
    pub checkpoints: u64,
    /// Checkpoint ticks skipped (PS unavailable or a persist still running).
    pub checkpoints_skipped: u64,
    /// Time split: dump = PS paused for checkpoints; restart = PS unavailable;
    /// rework = age of the restored values (time since they were saved),
    /// averaged over all blocks, unchanged blocks counting 0; solve = the rest
    /// of the horizon.
    pub split: TimeSplit,
    /// Failures and recoveries.
    pub incidents: Vec<Incident>,
    /// Resource use over the simulated window (added 2026-12; absent in
    /// older journals).
    #[serde(default)]
    pub usage: Usage,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ShardState {
    Serving,
    /// A chain's next node takes over at the given time.
    FailingOver,
    /// Parameters lost; waiting for detection (`detected = false`) or a host.
    Lost {
        detected: bool,
    },
    /// Being restored.
    Restoring,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// Worker finished computing its gradient (started in `epoch`).
    Done {
        worker: usize,
        epoch: u64,
    },
    /// Worker got its acknowledgement and pulls again.
    Resume {
        worker: usize,
    },
    Tick,
    PauseEnd {
        id: u64,
    },
    PersistDone {
        id: u64,
    },
    Down {
        node: usize,
    },
    Up {
        node: usize,
    },
    Detected {
        shard: usize,
        incident: usize,
    },
    Failover {
        shard: usize,
        incident: usize,
    },
    Join {
        shard: usize,
        incident: usize,
    },
    Restored {
        shard: usize,
        incident: usize,
    },
}

struct Sim<'a, M: GradientModel> {
    model: &'a M,
    ws: &'a mut M::Workspace,
    s: &'a PsSetup<'a>,
    block_len: usize,
    params: Vec<f32>,
    held: Vec<Vec<f32>>,
    /// The worker whose copy was pulled last.
    freshest: usize,
    grad: Vec<f32>,
    scratch: Vec<f32>,
    /// In-memory checkpoint cache (what priority selection compares against).
    cache: Vec<f32>,
    /// Persisted checkpoint and when each block was saved.
    committed: Vec<f32>,
    saved_at: Vec<f64>,
    /// The checkpoint being written (at most one: a tick while it runs is skipped).
    writes: Writes<f64, Vec<f32>>,
    alive: Vec<bool>,
    shards: Vec<ShardState>,
    shard_incident: Vec<usize>,
    paused: bool,
    pause_started: f64,
    epoch: u64,
    idle: Vec<bool>,
    next_draw: u64,
    draw_of: Vec<u64>,
    queue_sum: Vec<f32>,
    queue_len: u64,
    unavailable_since: Option<f64>,
    q: EventQueue<Ev>,
    out: PsRun,
}

/// Runs one wall-clock training run with failures.
pub fn run_ps<M: GradientModel>(
    model: &M,
    ws: &mut M::Workspace,
    delays: &mut dyn DelaySource,
    setup: &PsSetup<'_>,
) -> PsRun {
    let params = model.init_params();
    let dim = params.len();
    let block_len = model.block_len().max(1);
    assert_eq!(
        setup.placement.len() * block_len,
        dim,
        "one shard per block"
    );
    let chain = setup.strategy.chain();
    let nodes = setup.ps_nodes * chain;
    let mut sim = Sim {
        model,
        ws,
        s: setup,
        block_len,
        held: vec![params.clone(); setup.workers],
        freshest: 0,
        grad: vec![0.0; dim],
        scratch: vec![0.0; dim],
        cache: params.clone(),
        committed: params.clone(),
        saved_at: vec![0.0; setup.placement.len()],
        writes: Writes::default(),
        params,
        alive: vec![true; nodes],
        shards: vec![ShardState::Serving; setup.ps_nodes],
        shard_incident: vec![usize::MAX; setup.ps_nodes],
        paused: false,
        pause_started: 0.0,
        epoch: 0,
        idle: vec![false; setup.workers],
        next_draw: 0,
        draw_of: vec![0; setup.workers],
        queue_sum: vec![0.0; dim],
        queue_len: 0,
        unavailable_since: None,
        q: EventQueue::new(),
        out: PsRun {
            grid_loss: Vec::with_capacity(setup.grid.len()),
            grid_accuracy: Vec::with_capacity(setup.grid.len()),
            applied: 0,
            discarded: 0,
            queued: 0,
            checkpoints: 0,
            checkpoints_skipped: 0,
            split: TimeSplit::default(),
            incidents: Vec::new(),
            usage: Usage::default(),
        },
    };
    for o in setup.outages {
        if o.node < nodes {
            sim.q.schedule(o.down, Ev::Down { node: o.node });
            if o.up.is_finite() {
                sim.q.schedule(o.up, Ev::Up { node: o.node });
            }
        }
    }
    if setup.checkpoint.interval.is_finite() {
        sim.q.schedule(sim.period(), Ev::Tick);
    }
    for w in 0..setup.workers {
        sim.start(w, 0.0, delays, true);
    }
    run_events(
        &mut Running {
            sim: &mut sim,
            delays,
        },
        setup.horizon,
    );
    sim.evaluate_grid(|g| g <= setup.horizon);
    if let Some(since) = sim.unavailable_since {
        sim.out.split.restart += setup.horizon - since;
    }
    if sim.paused {
        sim.out.split.dump += setup.horizon - sim.pause_started;
    }
    let s = &mut sim.out.split;
    s.solve = (setup.horizon - s.dump - s.restart - s.rework).max(0.0);
    let h = setup.horizon;
    let u = &mut sim.out.usage;
    u.worker_idle = (setup.workers as f64 * h - u.worker_busy).max(0.0);
    for o in setup
        .outages
        .iter()
        .filter(|o| o.node < nodes && o.down < h)
    {
        u.down.push((o.node, o.down, o.up.min(h)));
    }
    u.ps_down = u.ps_down_before(h);
    u.ps_up = nodes as f64 * h - u.ps_down;
    sim.out
}

/// A PS simulation and its workers' delays, as the event loop runs them.
struct Running<'s, 'a, M: GradientModel> {
    sim: &'s mut Sim<'a, M>,
    delays: &'s mut dyn DelaySource,
}

impl<M: GradientModel> Events for Running<'_, '_, M> {
    type Event = Ev;

    fn queue(&mut self) -> &mut EventQueue<Ev> {
        &mut self.sim.q
    }

    /// The loss grid's points before `t` see the parameters every earlier
    /// event left.
    fn before(&mut self, t: f64) {
        self.sim.evaluate_grid(|g| g < t);
    }

    fn handle(&mut self, t: f64, ev: Ev) -> std::ops::ControlFlow<()> {
        self.sim.handle(t, ev, self.delays);
        std::ops::ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup<'a>(strategy: Strategy, asynchronous: bool, outages: &'a [Outage]) -> PsSetup<'a> {
        const GRID: [f64; 3] = [0.0, 0.5, 1.0];
        const PLACEMENT: [usize; 4] = [0, 1, 0, 1];
        PsSetup {
            workers: 2,
            ps_nodes: 2,
            strategy,
            checkpoint: CheckpointCost {
                interval: 1.0,
                write_time: 0.2,
                cache_time: 0.02,
                asynchronous,
            },
            detection: 0.5,
            restart: 0.5,
            join: f64::INFINITY,
            eta: 0.1,
            run_seed: 9,
            grid: &GRID,
            horizon: 1.0,
            outages,
            placement: &PLACEMENT,
        }
    }

    /// The strategies that differ only in how they recover share a key; a
    /// strategy whose failure-free run differs (checkpoint fraction, an
    /// acknowledgement per update, a chain's nodes, an asynchronous persist)
    /// does not; a run with outages has none. (The CLI test
    /// `failure_free_runs_shared_give_the_bytes_of_each_run_alone` checks the
    /// runs themselves.)
    #[test]
    fn failure_free_keys_tell_apart_exactly_what_acts_without_failures() {
        let key = |s: Strategy, asynchronous: bool| {
            setup(s, asynchronous, &[])
                .failure_free_key()
                .expect("no outages")
        };
        let stateless = |restore_from| Strategy::StatelessPs {
            damping_threshold: 1,
            damped_learning_rate: 1e-4,
            restore_from,
        };
        let chain = |chain, replicate| Strategy::ChainReplication {
            chain,
            hop_time: 0.002,
            replicate,
        };
        let cr = key(Strategy::CheckpointRestart, false);
        assert_eq!(cr, key(stateless(RestoreFrom::Workers), false));
        assert_eq!(cr, key(stateless(RestoreFrom::Checkpoint), false));
        assert_eq!(cr, key(chain(1, Replication::EveryUpdate), false));
        for (what, other) in [
            (
                "a checkpoint fraction",
                key(Strategy::Scar { fraction: 0.25 }, false),
            ),
            (
                "a chain's nodes",
                key(chain(3, Replication::Checkpoint), false),
            ),
            (
                "an acknowledgement",
                key(chain(3, Replication::EveryUpdate), false),
            ),
            (
                "an asynchronous persist",
                key(Strategy::CheckpointRestart, true),
            ),
        ] {
            assert_ne!(cr, other, "{what}");
        }
        assert_eq!(
            key(chain(3, Replication::Checkpoint), false),
            key(chain(3, Replication::Checkpoint), false)
        );
        let kill = [Outage {
            node: 0,
            down: 0.4,
            up: 0.8,
        }];
        assert_eq!(
            setup(Strategy::CheckpointRestart, false, &kill).failure_free_key(),
            None
        );
    }
}
