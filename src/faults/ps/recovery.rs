//! The fault side of the wall-clock PS simulation: checkpoints and their
//! pauses, PS node failures, and the restore of lost shards.

use super::{Ev, Incident, ShardState, Sim, Strategy};
use crate::cluster::DelaySource;
use crate::model::gradient::GradientModel;
use crate::policy::checkpoint::{blocks_per_checkpoint, most_moved};

impl<M: GradientModel> Sim<'_, M> {
    /// Length of the pause of the checkpoint now being taken.
    pub(super) fn pause_length(&self) -> f64 {
        let n = self.writes.oldest().map_or(0, |w| w.blocks.len());
        self.pause_for(n)
    }

    /// Length of the pause of a checkpoint of `n` blocks.
    fn pause_for(&self, n: usize) -> f64 {
        let share = n as f64 / self.blocks() as f64;
        let c = &self.s.checkpoint;
        if c.asynchronous {
            share * c.cache_time
        } else {
            share * c.write_time
        }
    }

    pub(super) fn checkpoint(&mut self, t: f64) {
        if !self.available() || self.paused || !self.writes.is_empty() {
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
            most_moved(&mut scored, blocks_per_checkpoint(r, n))
        };
        let mut values = Vec::with_capacity(chosen.len() * self.block_len);
        for &b in &chosen {
            let r = b * self.block_len..(b + 1) * self.block_len;
            values.extend_from_slice(&self.params[r.clone()]);
            self.cache[r.clone()].copy_from_slice(&self.params[r]);
        }
        let pause = self.pause_for(chosen.len());
        let persisted = if self.s.checkpoint.asynchronous {
            let share = chosen.len() as f64 / n as f64;
            t + pause + share * self.s.checkpoint.write_time
        } else {
            t + pause
        };
        let id = self.writes.push(persisted, t, chosen, values);
        self.paused = true;
        self.pause_started = t;
        self.q.schedule(t + pause, Ev::PauseEnd { id });
        if self.s.checkpoint.asynchronous {
            self.q.schedule(persisted, Ev::PersistDone { id });
        }
    }

    pub(super) fn commit(&mut self, id: u64) {
        let Some(w) = self.writes.take(id) else {
            return;
        };
        let l = self.block_len;
        for (i, &b) in w.blocks.iter().enumerate() {
            self.committed[b * l..(b + 1) * l].copy_from_slice(&w.values[i * l..(i + 1) * l]);
            self.saved_at[b] = w.taken;
        }
        self.out.checkpoints += 1;
    }

    pub(super) fn on_down(&mut self, t: f64, node: usize) {
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
        self.writes.abort(&[]);
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
    pub(super) fn host_available(&self, shard: usize) -> bool {
        let chain = self.s.strategy.chain();
        if (shard * chain..(shard + 1) * chain).any(|n| self.alive[n]) {
            return true;
        }
        matches!(self.s.strategy, Strategy::Scar { .. })
            && (0..self.shards.len()).any(|o| o != shard && self.shards[o] == ShardState::Serving)
    }

    pub(super) fn begin_restore(&mut self, t: f64, shard: usize) {
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

    pub(super) fn restore(&mut self, t: f64, shard: usize, incident: usize) {
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

    pub(super) fn after_recovery(&mut self, t: f64, delays: &mut dyn DelaySource) {
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
