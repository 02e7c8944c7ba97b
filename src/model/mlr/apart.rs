//! Runs side by side that share no data order (the unperturbed runs of a
//! per-trial data order, [`Model::metric_apart`] then
//! [`Model::step_apart`]).
//!
//! Their metric is one stacked full-data pass; the logits it computes for
//! the rows of each run's next minibatch are exactly the logits that run's
//! step would compute (each logit is the same sum in the same order,
//! whatever the width of the pass), so the pass keeps each run's softmax
//! deltas and minibatch loss, and the step only regroups its minibatch and
//! forms the gradient. Each run's epoch permutation is cached per run (the
//! runs' orders differ, so one shared cache would reshuffle at every step).
//! A test compares every state bit for bit with runs stepped alone.

use super::pass::{fingerprint, softmax_apart, stride};
use super::{Mlr, MlrState, MlrWorkspace, Prepared};
use crate::model::{IterCtx, Model};

/// One run's epoch permutation and the (run seed, epoch) it is of.
type PermCache = (Vec<u32>, Option<(u64, usize)>);

/// What a [`Model::metric_apart`](crate::model::Model::metric_apart) pass
/// prepared for the steps that follow.
#[derive(Default)]
pub(super) struct Apart {
    /// Per state: its slot in the pass, the iteration prepared and the
    /// fingerprint of the weights it was prepared from.
    prepared: Vec<Option<(usize, IterCtx, u64)>>,
    /// Per state: its epoch permutation.
    perms: Vec<PermCache>,
    /// `row_ptr[r]..row_ptr[r+1]` indexes the `(slot, position)` entries of
    /// data row r: the slots whose minibatch holds it, and where.
    row_ptr: Vec<u32>,
    entries: Vec<(u32, u32)>,
    /// Softmax deltas, slot-major, `batch × classes` per slot by position.
    delta: Vec<f32>,
    /// Row losses, `slot · batch + position`.
    pos_loss: Vec<f64>,
    /// Each slot's minibatch loss (its row losses summed in minibatch order).
    batch_loss: Vec<f64>,
}

impl Mlr {
    /// The full-data metric of `members` of `states` into `out[member]`,
    /// keeping for each member the deltas and loss of its minibatch at
    /// `next[member]`.
    pub(super) fn metric_apart_prepared(
        &self,
        states: &[MlrState],
        members: &[usize],
        next: &[IterCtx],
        ws: &mut MlrWorkspace,
        out: &mut [f64],
    ) {
        let (a, c, rows, batch) = (members.len(), self.data.classes, self.data.rows, self.batch);
        let mut ap = std::mem::take(&mut ws.apart);
        ap.prepared.clear();
        ap.prepared.resize(states.len(), None);
        ap.perms.resize_with(states.len(), Default::default);
        // Which slots' minibatches hold each row, and where (counting sort by row).
        ap.row_ptr.clear();
        ap.row_ptr.resize(rows + 1, 0);
        let ranges: Vec<std::ops::Range<usize>> = members
            .iter()
            .map(|&i| {
                let (perm, key) = &mut ap.perms[i];
                let range = self.batch_range(next[i], perm, key);
                for &r in &perm[range.clone()] {
                    ap.row_ptr[r as usize + 1] += 1;
                }
                range
            })
            .collect();
        for r in 0..rows {
            ap.row_ptr[r + 1] += ap.row_ptr[r];
        }
        let mut fill: Vec<u32> = ap.row_ptr[..rows].to_vec();
        ap.entries.clear();
        ap.entries.resize(a * batch, (0, 0));
        for ((slot, &i), range) in members.iter().enumerate().zip(ranges) {
            for (p, &r) in ap.perms[i].0[range].iter().enumerate() {
                let f = &mut fill[r as usize];
                ap.entries[*f as usize] = (slot as u32, p as u32);
                *f += 1;
            }
            ap.prepared[i] = Some((slot, next[i], fingerprint(&states[i].w)));
        }
        ap.delta.clear();
        ap.delta.resize(a * batch * c, 0.0);
        ap.pos_loss.clear();
        ap.pos_loss.resize(a * batch, 0.0);

        // The full pass, keeping each slot's minibatch rows' deltas and losses.
        self.stack(members.iter().map(|&i| &states[i]), a, &mut ws.w_stack);
        ws.losses.clear();
        ws.losses.resize(a, 0.0);
        self.ensure_scratch(a, ws);
        let zs = stride(a, c);
        let MlrWorkspace {
            w_stack,
            block_logits,
            scratch,
            losses,
            ..
        } = ws;
        self.full_chunks(a, w_stack, block_logits, |_, chunk, block_logits| {
            softmax_apart(
                block_logits,
                zs,
                chunk,
                &self.data.y,
                a,
                c,
                &ap.row_ptr,
                &ap.entries,
                batch,
                scratch,
                losses,
                &mut ap.delta,
                &mut ap.pos_loss,
            );
        });
        ap.batch_loss.clear();
        ap.batch_loss.extend(
            ap.pos_loss
                .chunks_exact(batch)
                .map(|l| l.iter().fold(0.0, |s, &v| s + v)),
        );
        for (slot, &i) in members.iter().enumerate() {
            out[i] = ws.losses[slot];
        }
        ws.apart = ap;
    }

    /// One step of each active state at its own `next[i]`: from the work
    /// [`Mlr::metric_apart_prepared`] kept when it was prepared for exactly
    /// this iteration and these weights, else an ordinary step.
    pub(super) fn step_apart_prepared(
        &self,
        states: &mut [MlrState],
        active: &[bool],
        next: &[IterCtx],
        ws: &mut MlrWorkspace,
    ) {
        let (c, batch) = (self.data.classes, self.batch);
        let ds = stride(1, c);
        let mut ap = std::mem::take(&mut ws.apart);
        ap.perms.resize_with(states.len(), Default::default);
        for i in (0..states.len()).filter(|&i| active[i]) {
            let ctx = next[i];
            // This run's own permutation cache.
            let (perm, key) = &mut ap.perms[i];
            std::mem::swap(&mut ws.perm, perm);
            std::mem::swap(&mut ws.perm_key, key);
            let state = std::slice::from_mut(&mut states[i]);
            let print = fingerprint(&state[0].w);
            match ap.prepared.get(i).copied().flatten() {
                Some((slot, at, f)) if at == ctx && f == print => {
                    self.prepare_batch(ctx, ws);
                    ws.delta.clear();
                    ws.delta.resize(batch * ds, 0.0);
                    let kept = &ap.delta[slot * batch * c..(slot + 1) * batch * c];
                    for (row, d) in ws.delta.chunks_exact_mut(ds).zip(kept.chunks_exact(c)) {
                        row[..c].copy_from_slice(d);
                    }
                    ws.batch_loss.clear();
                    ws.batch_loss.push(ap.batch_loss[slot]);
                    ws.prepared = Some(Prepared {
                        ctx,
                        prints: vec![print],
                        slots: vec![0],
                        gradient: false,
                    });
                    self.step_prepared(state, &[true], ws);
                }
                _ => <Mlr as Model>::step(self, &mut state[0], ctx, ws),
            }
            let (perm, key) = &mut ap.perms[i];
            std::mem::swap(&mut ws.perm, perm);
            std::mem::swap(&mut ws.perm_key, key);
        }
        ap.prepared.clear();
        ws.apart = ap;
        ws.logits_of = None;
    }
}
