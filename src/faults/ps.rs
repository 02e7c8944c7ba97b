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

use super::daly::TimeSplit;
use super::failures::Outage;
use crate::cluster::DelaySource;
use crate::engine::EventQueue;
use crate::model::gradient::{GradientDraw, GradientModel};

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
    pub const ALL: [RestoreFrom; 2] = [RestoreFrom::Checkpoint, RestoreFrom::Workers];

    /// The value a scenario names `name`, if any.
    pub fn parse(name: &str) -> Option<RestoreFrom> {
        RestoreFrom::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The name used in scenarios.
    pub fn name(self) -> &'static str {
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
    pub const ALL: [Replication; 2] = [Replication::EveryUpdate, Replication::Checkpoint];

    /// The value a scenario names `name`, if any.
    pub fn parse(name: &str) -> Option<Replication> {
        Replication::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The name used in scenarios.
    pub fn name(self) -> &'static str {
        match self {
            Replication::EveryUpdate => "every-update",
            Replication::Checkpoint => "checkpoint",
        }
    }
}

impl Strategy {
    /// The name used in scenarios and CSV files.
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::CheckpointRestart => "checkpoint-restart",
            Strategy::Scar { .. } => "scar",
            Strategy::ChainReplication { .. } => "chain-replication",
            Strategy::StatelessPs { .. } => "stateless-ps",
        }
    }

    /// Physical nodes per shard.
    pub fn chain(&self) -> usize {
        match self {
            Strategy::ChainReplication { chain, .. } => *chain,
            _ => 1,
        }
    }

    /// Whether a takeover by a chain's successor rolls the shard back to its
    /// last checkpoint.
    fn failover_rolls_back(&self) -> bool {
        matches!(
            self,
            Strategy::ChainReplication {
                replicate: Replication::Checkpoint,
                ..
            }
        )
    }

    /// Whether a recovery takes every block from the workers' freshest copy.
    fn restores_from_workers(&self) -> bool {
        matches!(
            self,
            Strategy::StatelessPs {
                restore_from: RestoreFrom::Workers,
                ..
            }
        )
    }

    /// Whether a recovery rolls every block back (not only the lost ones).
    fn global_rollback(&self) -> bool {
        matches!(
            self,
            Strategy::CheckpointRestart | Strategy::StatelessPs { .. }
        )
    }

    /// Fraction of the blocks one checkpoint saves.
    pub fn checkpoint_fraction(&self) -> f64 {
        match self {
            Strategy::Scar { fraction } => *fraction,
            _ => 1.0,
        }
    }
}

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
    pub grid_accuracy: Vec<f64>,
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
    pending: Option<(u64, Vec<usize>, Vec<f32>, f64)>,
    persist_id: u64,
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
        pending: None,
        persist_id: 0,
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
    while let Some(t) = sim.q.peek_time() {
        if t > setup.horizon {
            break;
        }
        sim.evaluate_grid(|g| g < t);
        let (t, ev) = sim.q.pop().expect("peeked");
        sim.handle(t, ev, delays);
    }
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

impl<M: GradientModel> Sim<'_, M> {
    fn period(&self) -> f64 {
        self.s.checkpoint.interval * self.s.strategy.checkpoint_fraction()
    }

    fn available(&self) -> bool {
        self.shards.iter().all(|s| *s == ShardState::Serving)
    }

    fn blocks(&self) -> usize {
        self.s.placement.len()
    }

    fn copy_block(&self, src: &[f32], dst: &mut [f32], b: usize) {
        let r = b * self.block_len..(b + 1) * self.block_len;
        dst[r.clone()].copy_from_slice(&src[r]);
    }

    /// Rate applied to the stateless PS's queue of `n` gradients.
    fn queue_rate(&self, n: u64) -> f32 {
        match self.s.strategy {
            Strategy::StatelessPs {
                damping_threshold,
                damped_learning_rate,
                ..
            } if n > damping_threshold as u64 => damped_learning_rate as f32,
            _ => self.s.eta as f32,
        }
    }

    /// The parameters a recovery completed now would give (the PS parameters
    /// when nothing is lost) into `self.scratch`.
    fn recoverable(&mut self) {
        let rolls_back = self.s.strategy.failover_rolls_back();
        let lost: Vec<usize> = (0..self.shards.len())
            .filter(|&s| match self.shards[s] {
                ShardState::Lost { .. } | ShardState::Restoring => true,
                ShardState::FailingOver => rolls_back,
                ShardState::Serving => false,
            })
            .collect();
        let mut out = std::mem::take(&mut self.scratch);
        if lost.is_empty() {
            out.copy_from_slice(&self.params);
        } else if self.s.strategy.global_rollback() {
            if self.s.strategy.restores_from_workers() {
                out.copy_from_slice(&self.held[self.freshest]);
            } else {
                out.copy_from_slice(&self.committed);
            }
            if self.queue_len > 0 {
                let r = self.queue_rate(self.queue_len);
                for (w, g) in out.iter_mut().zip(&self.queue_sum) {
                    *w -= r * g;
                }
            }
        } else {
            out.copy_from_slice(&self.params);
            for b in 0..self.blocks() {
                if lost.contains(&self.s.placement[b]) {
                    self.copy_block(&self.committed, &mut out, b);
                }
            }
        }
        self.scratch = out;
    }

    fn evaluate_grid(&mut self, due: impl Fn(f64) -> bool) {
        while let Some(&g) = self.s.grid.get(self.out.grid_loss.len()) {
            if !due(g) {
                break;
            }
            self.recoverable();
            let (loss, acc) = self.model.loss_and_accuracy(&self.scratch, self.ws);
            let acc = acc.unwrap_or(f64::NAN);
            self.out.grid_loss.push(loss);
            self.out.grid_accuracy.push(acc);
        }
    }

    /// Worker `w` starts a gradient at `t`, pulling the parameters first if `pull`.
    fn start(&mut self, w: usize, t: f64, delays: &mut dyn DelaySource, pull: bool) {
        if pull {
            self.held[w].copy_from_slice(&self.params);
            self.freshest = w;
        }
        self.idle[w] = false;
        self.draw_of[w] = self.next_draw;
        self.next_draw += 1;
        let d = delays.draw(w);
        let h = self.s.horizon;
        self.out.usage.worker_busy += ((t + d).min(h) - t.min(h)).max(0.0);
        self.q.schedule(
            t + d,
            Ev::Done {
                worker: w,
                epoch: self.epoch,
            },
        );
    }

    fn compute_gradient(&mut self, w: usize) {
        self.model.gradient(
            &self.held[w],
            GradientDraw {
                run_seed: self.s.run_seed,
                index: self.draw_of[w],
            },
            &mut self.grad,
            self.ws,
        );
    }

    fn set_unavailable(&mut self, t: f64) {
        if self.unavailable_since.is_none() {
            self.unavailable_since = Some(t);
        }
    }

    fn handle(&mut self, t: f64, ev: Ev, delays: &mut dyn DelaySource) {
        match ev {
            Ev::Done { worker, epoch } => self.on_done(t, worker, epoch, delays),
            Ev::Resume { worker } => {
                if self.available() {
                    self.start(worker, t, delays, true);
                } else {
                    self.idle[worker] = true;
                }
            }
            Ev::Tick => {
                self.q.schedule(t + self.period(), Ev::Tick);
                self.checkpoint(t);
            }
            Ev::PauseEnd { id } => {
                if self.paused && self.persist_id == id {
                    self.paused = false;
                    self.out.split.dump += t - self.pause_started;
                    if !self.s.checkpoint.asynchronous
                        && let Some((id, ..)) = &self.pending
                    {
                        let id = *id;
                        self.commit(id);
                    }
                }
            }
            Ev::PersistDone { id } => self.commit(id),
            Ev::Down { node } => self.on_down(t, node),
            Ev::Up { node } => {
                self.alive[node] = true;
                let shard = node / self.s.strategy.chain();
                if self.shards[shard] == (ShardState::Lost { detected: true }) {
                    self.begin_restore(t, shard);
                }
            }
            Ev::Detected { shard, incident } => {
                if self.shard_incident[shard] != incident {
                    return;
                }
                self.shards[shard] = ShardState::Lost { detected: true };
                if self.host_available(shard) {
                    self.begin_restore(t, shard);
                } else if self.s.join.is_finite() {
                    self.q
                        .schedule(t + self.s.join, Ev::Join { shard, incident });
                }
            }
            Ev::Join { shard, incident } => {
                if self.shard_incident[shard] == incident
                    && self.shards[shard] == (ShardState::Lost { detected: true })
                {
                    self.begin_restore(t, shard);
                }
            }
            Ev::Failover { shard, incident } => {
                if self.shard_incident[shard] == incident
                    && self.shards[shard] == ShardState::FailingOver
                {
                    if self.s.strategy.failover_rolls_back() {
                        // The successor holds the shard's last checkpoint.
                        self.restore(t, shard, incident);
                    } else {
                        self.shards[shard] = ShardState::Serving;
                        self.out.incidents[incident].recovered = t;
                    }
                    self.after_recovery(t, delays);
                }
            }
            Ev::Restored { shard, incident } => {
                if self.shard_incident[shard] == incident {
                    self.restore(t, shard, incident);
                    self.after_recovery(t, delays);
                }
            }
        }
    }

    fn on_done(&mut self, t: f64, w: usize, epoch: u64, delays: &mut dyn DelaySource) {
        let stateless = matches!(self.s.strategy, Strategy::StatelessPs { .. });
        if self.available() {
            if self.paused {
                // The PS is writing a checkpoint: the push waits until it resumes.
                self.q.schedule(
                    self.pause_started + self.pause_length(),
                    Ev::Done { worker: w, epoch },
                );
                return;
            }
            if !stateless && epoch != self.epoch {
                // Computed on parameters a rollback has since replaced.
                self.out.discarded += 1;
                self.start(w, t, delays, true);
                return;
            }
            self.compute_gradient(w);
            let eta = self.s.eta as f32;
            for (p, g) in self.params.iter_mut().zip(&self.grad) {
                *p -= eta * g;
            }
            self.out.applied += 1;
            let ack = match self.s.strategy {
                Strategy::ChainReplication {
                    chain,
                    hop_time,
                    replicate: Replication::EveryUpdate,
                } => (chain - 1) as f64 * hop_time,
                _ => 0.0,
            };
            if ack > 0.0 {
                self.q.schedule(t + ack, Ev::Resume { worker: w });
            } else {
                self.start(w, t, delays, true);
            }
        } else if stateless {
            // Keep training through the outage: queue and compute again on
            // the same (last pulled) parameters.
            self.compute_gradient(w);
            for (s, g) in self.queue_sum.iter_mut().zip(&self.grad) {
                *s += g;
            }
            self.queue_len += 1;
            self.out.queued += 1;
            self.start(w, t, delays, false);
        } else {
            self.out.discarded += 1;
            self.idle[w] = true;
        }
    }

    /// Length of the pause of the checkpoint now being taken.
    fn pause_length(&self) -> f64 {
        let n = self
            .pending
            .as_ref()
            .map_or(0, |(_, blocks, _, _)| blocks.len()) as f64;
        let share = n / self.blocks() as f64;
        let c = &self.s.checkpoint;
        if c.asynchronous {
            share * c.cache_time
        } else {
            share * c.write_time
        }
    }

    fn checkpoint(&mut self, t: f64) {
        if !self.available() || self.paused || self.pending.is_some() {
            self.out.checkpoints_skipped += 1;
            return;
        }
        let n = self.blocks();
        let r = self.s.strategy.checkpoint_fraction();
        let chosen: Vec<usize> = if r >= 1.0 {
            (0..n).collect()
        } else {
            // Priority: the blocks that moved most since they were cached
            // (ties to the lower index).
            let count = ((r * n as f64 - 1e-9).ceil() as usize).clamp(1, n);
            let mut scored: Vec<(f64, usize)> = (0..n)
                .map(|b| {
                    let r = b * self.block_len..(b + 1) * self.block_len;
                    let d: f64 = self.params[r.clone()]
                        .iter()
                        .zip(&self.cache[r])
                        .map(|(a, c)| ((a - c) as f64).powi(2))
                        .sum();
                    (d, b)
                })
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut c: Vec<usize> = scored[..count].iter().map(|s| s.1).collect();
            c.sort_unstable();
            c
        };
        let mut values = Vec::with_capacity(chosen.len() * self.block_len);
        for &b in &chosen {
            let r = b * self.block_len..(b + 1) * self.block_len;
            values.extend_from_slice(&self.params[r.clone()]);
            self.cache[r.clone()].copy_from_slice(&self.params[r]);
        }
        self.persist_id += 1;
        let id = self.persist_id;
        self.pending = Some((id, chosen, values, t));
        self.paused = true;
        self.pause_started = t;
        let pause = self.pause_length();
        self.q.schedule(t + pause, Ev::PauseEnd { id });
        if self.s.checkpoint.asynchronous {
            let share = self.pending.as_ref().map_or(0, |p| p.1.len()) as f64 / n as f64;
            self.q.schedule(
                t + pause + share * self.s.checkpoint.write_time,
                Ev::PersistDone { id },
            );
        }
    }

    fn commit(&mut self, id: u64) {
        if self.pending.as_ref().map(|p| p.0) != Some(id) {
            return;
        }
        let (_, blocks, values, taken) = self.pending.take().expect("checked");
        let l = self.block_len;
        for (i, &b) in blocks.iter().enumerate() {
            self.committed[b * l..(b + 1) * l].copy_from_slice(&values[i * l..(i + 1) * l]);
            self.saved_at[b] = taken;
        }
        self.out.checkpoints += 1;
    }

    fn on_down(&mut self, t: f64, node: usize) {
        self.alive[node] = false;
        let chain = self.s.strategy.chain();
        let shard = node / chain;
        if !matches!(
            self.shards[shard],
            ShardState::Serving | ShardState::FailingOver
        ) {
            return;
        }
        let survivor = (shard * chain..(shard + 1) * chain).any(|n| self.alive[n]);
        // A failure aborts the checkpoint being written (its previous saved
        // values stay) and any sync dump in progress.
        if self.pending.is_some() {
            self.pending = None;
        }
        if self.paused {
            self.paused = false;
            self.out.split.dump += t - self.pause_started;
        }
        self.set_unavailable(t);
        let failing_over = self.shards[shard] == ShardState::FailingOver;
        if survivor {
            if failing_over {
                return;
            }
            let incident = self.out.incidents.len();
            self.shards[shard] = ShardState::FailingOver;
            self.shard_incident[shard] = incident;
            self.out.incidents.push(Incident {
                shard,
                failed: t,
                recovered: f64::NAN,
                lost: false,
                restored_blocks: 0,
                queued_applied: 0,
            });
            self.q
                .schedule(t + self.s.detection, Ev::Failover { shard, incident });
        } else {
            // The last live node of the shard: its parameters are lost (a
            // takeover in progress becomes a loss of the same incident).
            let incident = if failing_over {
                let i = self.shard_incident[shard];
                self.out.incidents[i].lost = true;
                i
            } else {
                self.out.incidents.push(Incident {
                    shard,
                    failed: t,
                    recovered: f64::NAN,
                    lost: true,
                    restored_blocks: 0,
                    queued_applied: 0,
                });
                self.out.incidents.len() - 1
            };
            self.shards[shard] = ShardState::Lost { detected: false };
            self.shard_incident[shard] = incident;
            self.q
                .schedule(t + self.s.detection, Ev::Detected { shard, incident });
        }
    }

    /// Whether shard `shard` can be restored now: one of its own nodes is up,
    /// or (SCAR, several shards) a surviving PS node can take its blocks.
    fn host_available(&self, shard: usize) -> bool {
        let chain = self.s.strategy.chain();
        if (shard * chain..(shard + 1) * chain).any(|n| self.alive[n]) {
            return true;
        }
        matches!(self.s.strategy, Strategy::Scar { .. })
            && (0..self.shards.len()).any(|o| o != shard && self.shards[o] == ShardState::Serving)
    }

    fn begin_restore(&mut self, t: f64, shard: usize) {
        self.shards[shard] = ShardState::Restoring;
        let incident = self.shard_incident[shard];
        self.q
            .schedule(t + self.s.restart, Ev::Restored { shard, incident });
    }

    /// Progress lost on block `b` by restoring it after a failure at
    /// `failed`: the age of its saved value, or 0 if the block had not
    /// changed since (e.g. MNIST's always-blank border pixels).
    fn lost_age(&self, b: usize, failed: f64) -> f64 {
        let r = b * self.block_len..(b + 1) * self.block_len;
        if self.params[r.clone()] == self.committed[r] {
            0.0
        } else {
            (failed - self.saved_at[b]).max(0.0)
        }
    }

    fn restore(&mut self, t: f64, shard: usize, incident: usize) {
        let n = self.blocks();
        let failed = self.out.incidents[incident].failed;
        let mut age = 0.0;
        let mut restored = 0;
        if self.s.strategy.global_rollback() {
            self.shards[shard] = ShardState::Serving;
            if self.shards.iter().any(|s| *s != ShardState::Serving) {
                // Another shard is still lost: the rollback of every block
                // waits until the last one has a host again.
                self.out.incidents[incident].recovered = t;
                return;
            }
            if self.s.strategy.restores_from_workers() {
                // Nothing is lost: the freshest pull holds every update applied
                // before the outage (each push is followed by its pull).
                self.params.copy_from_slice(&self.held[self.freshest]);
            } else {
                for b in 0..n {
                    age += self.lost_age(b, failed);
                }
                self.params.copy_from_slice(&self.committed);
            }
            restored = n;
        } else {
            for b in 0..n {
                if self.s.placement[b] == shard {
                    age += self.lost_age(b, failed);
                    let r = b * self.block_len..(b + 1) * self.block_len;
                    self.params[r.clone()].copy_from_slice(&self.committed[r]);
                    restored += 1;
                }
            }
            self.shards[shard] = ShardState::Serving;
        }
        // The cache of the restored blocks died with them: it holds the saved values again.
        for b in 0..n {
            if restored == n || self.s.placement[b] == shard {
                let r = b * self.block_len..(b + 1) * self.block_len;
                self.cache[r.clone()].copy_from_slice(&self.committed[r]);
            }
        }
        let mut queued_applied = 0;
        if self.queue_len > 0 {
            let r = self.queue_rate(self.queue_len);
            for (w, g) in self.params.iter_mut().zip(&self.queue_sum) {
                *w -= r * g;
            }
            self.out.applied += self.queue_len;
            queued_applied = self.queue_len;
            self.queue_sum.fill(0.0);
            self.queue_len = 0;
        }
        self.out.split.rework += age / n as f64;
        let inc = &mut self.out.incidents[incident];
        inc.recovered = t;
        inc.restored_blocks = restored;
        inc.queued_applied = queued_applied;
        if !matches!(self.s.strategy, Strategy::StatelessPs { .. }) {
            self.epoch += 1;
        }
    }

    fn after_recovery(&mut self, t: f64, delays: &mut dyn DelaySource) {
        if !self.available() {
            return;
        }
        if let Some(since) = self.unavailable_since.take() {
            self.out.split.restart += t - since;
        }
        for w in 0..self.idle.len() {
            if self.idle[w] {
                self.start(w, t, delays, true);
            }
        }
    }
}
