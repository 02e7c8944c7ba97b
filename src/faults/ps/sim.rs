//! The training side of the wall-clock PS simulation: workers pull, compute
//! and push gradients; the PS applies them, or queues or discards them while
//! it is unavailable; the curves are evaluated on the time grid.

use super::{Ev, ShardState, Sim, Strategy};
use crate::cluster::DelaySource;
use crate::model::gradient::{GradientDraw, GradientModel};

impl<M: GradientModel> Sim<'_, M> {
    pub(super) fn period(&self) -> f64 {
        self.s.checkpoint.interval * self.s.strategy.checkpoint_fraction()
    }

    pub(super) fn available(&self) -> bool {
        self.shards.iter().all(|s| *s == ShardState::Serving)
    }

    pub(super) fn blocks(&self) -> usize {
        self.s.placement.len()
    }

    fn copy_block(&self, src: &[f32], dst: &mut [f32], b: usize) {
        let r = b * self.block_len..(b + 1) * self.block_len;
        dst[r.clone()].copy_from_slice(&src[r]);
    }

    /// Rate applied to the stateless PS's queue of `n` gradients.
    pub(super) fn queue_rate(&self, n: u64) -> f32 {
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

    pub(super) fn evaluate_grid(&mut self, due: impl Fn(f64) -> bool) {
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
    pub(super) fn start(&mut self, w: usize, t: f64, delays: &mut dyn DelaySource, pull: bool) {
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

    pub(super) fn set_unavailable(&mut self, t: f64) {
        if self.unavailable_since.is_none() {
            self.unavailable_since = Some(t);
        }
    }

    pub(super) fn handle(&mut self, t: f64, ev: Ev, delays: &mut dyn DelaySource) {
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
                if self.paused && self.writes.last_id() == id {
                    self.paused = false;
                    self.out.split.dump += t - self.pause_started;
                    if !self.s.checkpoint.asynchronous
                        && let Some(id) = self.writes.oldest().map(|w| w.id)
                    {
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
            let ack = self.s.strategy.ack_time();
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
}
