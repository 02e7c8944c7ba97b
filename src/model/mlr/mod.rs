//! Multinomial logistic regression trained by minibatch SGD (SCAR §5.1,
//! Appendix D).
//!
//! Parameters: an M×N weight matrix `W` (M features, N classes, no separate
//! bias), initialised to zero. A block is one row of `W` (the weights of one
//! feature for all classes), so MNIST has 784 blocks and CoverType 54.
//!
//! One iteration k uses minibatch k of the run's data order:
//! `W ← W − η · (1/b) Σ_{i∈batch} x_i (softmax(x_i W) − e_{y_i})ᵀ`,
//! the gradient of the mean cross-entropy over the batch (applied as one
//! fused multiply-add per weight). The convergence metric is the
//! cross-entropy summed over the whole training set. With raw features
//! (MNIST pixels 0..=255) and the paper's η = 1e-5, b = 10,000, this reaches
//! the 2.5e4 criterion in 60 iterations, as Appendix D reports; a summed
//! gradient or [0, 1] pixels would not (see docs/SCENARIOS.md, "Choices where
//! the paper is silent").
//!
//! Speed:
//! - The data is stored sparse (MNIST is 19% non-zero) and the products are
//!   register-blocked fused multiply-add kernels (`super::kernels`).
//! - A cohort of trials at the same iteration is advanced together
//!   ([`Model::check_many`], [`Model::metric_many`], [`Model::step_many`]):
//!   their weight matrices are stacked side by side, so one pass over the
//!   data serves them all. Every trial gets exactly the bits it would get
//!   alone.
//! - The full-data metric, five times the work of an SGD step, only decides
//!   whether a run has converged. `bound` carries a certified lower bound on
//!   it from the losses and gradients the SGD steps of the last epoch
//!   computed anyway, so [`Model::check_many`] evaluates the metric only in
//!   the few iterations where the bound cannot rule out convergence. The
//!   iteration at which a run converges is exactly what an evaluation at
//!   every iteration finds (a test compares the two trial by trial).

mod apart;
mod bound;
pub(crate) mod gradient;
mod pass;

use std::sync::Arc;

use super::kernels::block::CHUNK;
use super::kernels::{
    BlockCsc, Csr, RowGroups, block_forward, block_gradient, block_gradient_chunk,
};
use super::{Check, IterCtx, Model, ModelInfo};
use crate::data::Classification;
pub(crate) use bound::Bound;
use bound::{Anchor, Weights, gamma};
use pass::{
    RowDelta, SoftmaxScratch, fingerprint, padded_width, prints, softmax_chunk, stride,
    sum_positions,
};

/// Hyper-parameters of MLR.
#[derive(Clone, Debug, PartialEq)]
pub struct MlrConfig {
    /// Minibatch size b (clamped to the number of rows).
    pub batch_size: usize,
    /// Learning rate η applied to the batch-mean gradient.
    pub learning_rate: f64,
}

/// Multinomial logistic regression on a classification dataset.
pub struct Mlr {
    data: Arc<Classification>,
    batch: usize,
    lr: f32,
    /// Every row index, in order (the rows of a full-data pass).
    all_rows: Vec<u32>,
    /// Every row as its feature groups (for regrouping minibatches).
    groups: RowGroups,
    /// Every row, in order, regrouped for the products.
    full: BlockCsc,
    /// Margin weights of the certified bound; `None` when the minibatches of
    /// an epoch do not cover the data (then the metric is always evaluated).
    weights: Option<Weights>,
}

/// MLR state: the weight matrix, row-major `features × classes`, and the
/// bookkeeping of the certified lower bound on the metric.
#[derive(Clone, Debug, PartialEq)]
pub struct MlrState {
    /// Weights; row j (block j) is `w[j*N..(j+1)*N]`.
    pub(crate) w: Vec<f32>,
    /// Run state, not a block: a failure does not lose it and recovery does
    /// not restore it (the bound it carries holds for any weights).
    pub(crate) bound: Bound,
}

/// The batch structures of one minibatch, shared by a cohort.
#[derive(Default)]
struct BatchInfo {
    /// (run seed, iteration) they belong to.
    key: Option<(u64, usize)>,
    /// The minibatch's rows (batch order) regrouped for the products.
    block: BlockCsc,
    /// Position of each row in the minibatch (u32::MAX if absent).
    pos: Vec<u32>,
}

/// Buffers reused across iterations of one run or cohort.
pub struct MlrWorkspace {
    /// Row order of the current epoch.
    perm: Vec<u32>,
    /// (run seed, epoch) that `perm` belongs to.
    perm_key: Option<(u64, usize)>,
    /// The current minibatch's structures.
    info: BatchInfo,
    /// Per-member scratch of the softmax.
    scratch: SoftmaxScratch,
    /// Logits of one chunk of rows, `CHUNK × stride` ([`stride`]).
    block_logits: Vec<f32>,
    /// Stacked weights of the members of a pass, class-major and padded:
    /// `w_stack[j][c*a + s]`, `padded_features × width` ([`padded_width`]).
    w_stack: Vec<f32>,
    /// Softmax-minus-one-hot rows of a minibatch, `batch × stride` (class-major
    /// per row, padded width), when a full-data pass prepared them.
    delta: Vec<f32>,
    /// One chunk's softmax-minus-one-hot rows (`CHUNK × stride`), in the fused pass.
    delta_chunk: Vec<f32>,
    /// What a convergence check prepared for the step that follows.
    prepared: Option<Prepared>,
    /// Batch loss of each prepared member, in slot order: the sum of
    /// `pos_loss` in minibatch order, whichever pass computed it.
    batch_loss: Vec<f64>,
    /// Computed loss of each minibatch position (row-major `batch × a`).
    pos_loss: Vec<f64>,
    /// Full-data loss of each member of a pass, in slot order.
    losses: Vec<f64>,
    /// Gradient accumulator, `padded_features × width`.
    grad: Vec<f32>,
    /// One member's gradient, `features × classes`.
    member_grad: Vec<f32>,
    /// Single run: the full-data logits (`rows × padded_width(1)`) of the
    /// state whose fingerprint is `logits_of`.
    logits: Vec<f32>,
    logits_of: Option<u64>,
    /// What a pass over runs without a shared data order kept for their steps.
    apart: apart::Apart,
}

/// The work a convergence check did for the step of the same iteration.
struct Prepared {
    /// The iteration.
    ctx: IterCtx,
    /// Fingerprint of each state's weights (0: not prepared).
    prints: Vec<u64>,
    /// The prepared states, in slot order.
    slots: Vec<usize>,
    /// `true`: `grad` holds X_Bᵀ D for the slots; `false`: `delta` holds D.
    gradient: bool,
}

impl Mlr {
    /// A model over `data` with the given hyper-parameters.
    pub fn new(data: Arc<Classification>, config: &MlrConfig) -> Mlr {
        let batch = config.batch_size.clamp(1, data.rows);
        let x = Csr::from_dense(&data.x, data.rows, data.features);
        let weights = Weights::new(&x, batch, data.classes);
        let all: Vec<u32> = (0..data.rows as u32).collect();
        let groups = RowGroups::of(&x);
        Mlr {
            full: BlockCsc::build(&groups, &all),
            groups,
            all_rows: all,
            data,
            batch,
            lr: config.learning_rate as f32,
            weights,
        }
    }

    /// The dataset this model trains on.
    pub(crate) fn data(&self) -> &Classification {
        &self.data
    }

    /// Effective minibatch size.
    pub(crate) fn batch_size(&self) -> usize {
        self.batch
    }

    /// Minibatches per epoch (examples past the last full batch are skipped in that epoch).
    #[cfg(test)]
    pub(crate) fn batches_per_epoch(&self) -> usize {
        (self.data.rows / self.batch).max(1)
    }

    /// Whether [`Model::check_many`] can certify iterations without the
    /// metric (the minibatches of an epoch cover every row).
    #[cfg(test)]
    pub(crate) fn certifies(&self) -> bool {
        self.weights.is_some()
    }

    /// The example indices of minibatch `ctx.iteration` of the run `ctx.run_seed`.
    pub(crate) fn batch_rows<'w>(&self, ctx: IterCtx, ws: &'w mut MlrWorkspace) -> &'w [u32] {
        let range = self.batch_range(ctx, &mut ws.perm, &mut ws.perm_key);
        &ws.perm[range]
    }

    /// Makes `perm` the row order of the epoch holding iteration `ctx.iteration`
    /// and returns the range of `perm` that is that iteration's minibatch.
    fn batch_range(
        &self,
        ctx: IterCtx,
        perm: &mut Vec<u32>,
        perm_key: &mut Option<(u64, usize)>,
    ) -> std::ops::Range<usize> {
        super::epoch_minibatch(ctx, self.data.rows, self.batch, perm, perm_key)
    }

    /// Brings the workspace's minibatch structures up to `ctx`.
    fn prepare_batch(&self, ctx: IterCtx, ws: &mut MlrWorkspace) {
        let range = self.batch_range(ctx, &mut ws.perm, &mut ws.perm_key);
        let key = Some((ctx.run_seed, ctx.iteration));
        if ws.info.key == key {
            return;
        }
        let rows = &ws.perm[range];
        ws.info.block.rebuild(&self.groups, rows);
        ws.info.pos.clear();
        ws.info.pos.resize(self.data.rows, u32::MAX);
        for (p, &r) in rows.iter().enumerate() {
            ws.info.pos[r as usize] = p as u32;
        }
        ws.info.key = key;
    }

    /// Scratch for a pass over `a` stacked members.
    fn ensure_scratch(&self, a: usize, ws: &mut MlrWorkspace) {
        let c = self.data.classes;
        // Room for the softmax's blocks of members.
        let (e, m) = super::kernels::softmax_scratch(a, c);
        ws.scratch.exps.resize(e, 0.0);
        ws.scratch.maxv.resize(m, 0.0);
        ws.scratch.sumv.resize(m, 0.0);
        ws.scratch.row_loss.resize(a, 0.0);
        ws.block_logits.resize(CHUNK * stride(a, c), 0.0);
    }

    /// Stacks the weights of `members` of `states`, class-major, padded to
    /// `padded_features × padded_width(a, classes)` with zeros.
    fn stack<'s>(&self, members: impl Iterator<Item = &'s MlrState>, a: usize, out: &mut Vec<f32>) {
        let (m, c) = (self.data.features, self.data.classes);
        let width = padded_width(a, c);
        out.clear();
        out.resize(self.full.padded_features() * width, 0.0);
        for (slot, s) in members.enumerate() {
            for j in 0..m {
                for k in 0..c {
                    out[j * width + k * a + slot] = s.w[j * c + k];
                }
            }
        }
    }

    /// The forward product of the full data at the width of `a` stacked
    /// members (`w_stack`), chunk by chunk of [`CHUNK`] rows in index order:
    /// `each(chunk index, the chunk's rows, their logits)` consumes each
    /// chunk's logits (`stride(a, classes)` per row) before the next chunk
    /// overwrites them. The metric passes ([`Mlr::full_pass`], the side-by-side
    /// unperturbed runs' pass in `apart.rs`) differ only in `each`.
    pub(super) fn full_chunks(
        &self,
        a: usize,
        w_stack: &[f32],
        block_logits: &mut [f32],
        mut each: impl FnMut(usize, &[u32], &[f32]),
    ) {
        let c = self.data.classes;
        let (width, zs) = (padded_width(a, c), stride(a, c));
        for (ci, chunk) in self.all_rows.chunks(CHUNK).enumerate() {
            block_forward(&self.full, ci, w_stack, width, block_logits, zs);
            each(ci, chunk, block_logits);
        }
    }

    /// A full-data forward pass of `a` stacked members (`ws.w_stack`), rows
    /// in index order: adds each row's computed loss to `ws.losses` (per
    /// member, in row order); with `batch`, also writes the softmax deltas of
    /// that minibatch's rows to `ws.delta` (by minibatch position) and sums
    /// their losses into `ws.batch_loss` (in minibatch order); copies every
    /// row's logits into `keep` if given.
    fn full_pass(
        &self,
        a: usize,
        batch: bool,
        mut keep: Option<&mut Vec<f32>>,
        ws: &mut MlrWorkspace,
    ) {
        let c = self.data.classes;
        let (width, zs) = (padded_width(a, c), stride(a, c));
        self.ensure_scratch(a, ws);
        if batch {
            ws.delta.resize(self.batch * zs, 0.0);
            ws.pos_loss.clear();
            ws.pos_loss.resize(self.batch * a, 0.0);
        }
        let MlrWorkspace {
            scratch,
            block_logits,
            w_stack,
            delta,
            pos_loss,
            losses,
            info,
            ..
        } = ws;
        if let Some(k) = keep.as_deref_mut() {
            k.resize(self.data.rows * width, 0.0);
        }
        let mut pos = [u32::MAX; CHUNK];
        self.full_chunks(a, w_stack, block_logits, |ci, chunk, block_logits| {
            if let Some(k) = keep.as_deref_mut() {
                for o in 0..chunk.len() {
                    let at = (ci * CHUNK + o) * width;
                    k[at..at + width].copy_from_slice(&block_logits[o * zs..o * zs + width]);
                }
            }
            for (o, &r) in chunk.iter().enumerate() {
                pos[o] = if batch {
                    info.pos[r as usize]
                } else {
                    u32::MAX
                };
            }
            softmax_chunk(
                block_logits,
                zs,
                chunk,
                &self.data.y,
                a,
                c,
                &pos[..chunk.len()],
                0,
                scratch,
                losses,
                delta,
                pos_loss,
            );
        });
        if batch {
            sum_positions(&ws.pos_loss, a, &mut ws.batch_loss);
        }
    }

    /// The fused minibatch pass of `a` stacked members (`ws.w_stack`) at the
    /// minibatch `ws.info` holds: chunk by chunk, the logits, the losses and
    /// softmax deltas, and their share of the gradient X_Bᵀ D, which ends in
    /// `ws.grad`; the batch losses in `ws.batch_loss`.
    fn batch_pass(&self, a: usize, ctx: IterCtx, ws: &mut MlrWorkspace) {
        let c = self.data.classes;
        let (width, zs) = (padded_width(a, c), stride(a, c));
        self.ensure_scratch(a, ws);
        ws.delta_chunk.resize(CHUNK * zs, 0.0);
        ws.pos_loss.clear();
        ws.pos_loss.resize(self.batch * a, 0.0);
        ws.grad.clear();
        ws.grad.resize(ws.info.block.padded_features() * width, 0.0);
        ws.losses.clear();
        ws.losses.resize(a, 0.0);
        let range = self.batch_range(ctx, &mut ws.perm, &mut ws.perm_key);
        let MlrWorkspace {
            scratch,
            block_logits,
            w_stack,
            delta_chunk,
            pos_loss,
            losses,
            info,
            grad,
            perm,
            ..
        } = ws;
        let rows = &perm[range];
        let mut pos = [u32::MAX; CHUNK];
        for (ci, chunk) in rows.chunks(CHUNK).enumerate() {
            block_forward(&info.block, ci, w_stack, width, block_logits, zs);
            for (o, p) in pos.iter_mut().enumerate().take(chunk.len()) {
                *p = (ci * CHUNK + o) as u32;
            }
            softmax_chunk(
                block_logits,
                zs,
                chunk,
                &self.data.y,
                a,
                c,
                &pos[..chunk.len()],
                ci * CHUNK,
                scratch,
                losses,
                delta_chunk,
                pos_loss,
            );
            block_gradient_chunk(&info.block, ci, delta_chunk, 0, zs, width, grad);
        }
        sum_positions(&ws.pos_loss, a, &mut ws.batch_loss);
    }

    /// Applies the prepared gradient (columns of slot `slot` of `a` prepared
    /// members in `ws.grad`) to `state`: records the anchor of the certified
    /// bound, then `W ← W − (η/b)·ĝ` with fused multiply-adds.
    fn apply(
        &self,
        state: &mut MlrState,
        slot: usize,
        a: usize,
        ctx: IterCtx,
        ws: &mut MlrWorkspace,
    ) {
        let (m, c) = (self.data.features, self.data.classes);
        let width = padded_width(a, c);
        ws.member_grad.resize(m * c, 0.0);
        for j in 0..m {
            for k in 0..c {
                ws.member_grad[j * c + k] = ws.grad[j * width + k * a + slot];
            }
        }
        if let Some(wts) = &self.weights {
            state.bound.record(
                wts,
                &Anchor {
                    iteration: ctx.iteration,
                    batch_loss: ws.batch_loss[slot],
                    gradient: &ws.member_grad,
                    w: &state.w,
                    rows: self.batch,
                    gamma_acc: gamma(ws.info.block.accumulation_terms()),
                },
            );
        }
        let scale = -(self.lr / self.batch as f32);
        for (w, &g) in state.w.iter_mut().zip(&ws.member_grad) {
            *w = scale.mul_add(g, *w);
        }
    }

    /// The fused minibatch pass for `slots` of `states` at iteration `ctx`,
    /// recorded as prepared.
    fn prepare_gradient(
        &self,
        states: &[MlrState],
        slots: Vec<usize>,
        ctx: IterCtx,
        ws: &mut MlrWorkspace,
    ) {
        let a = slots.len();
        self.prepare_batch(ctx, ws);
        self.stack(slots.iter().map(|&i| &states[i]), a, &mut ws.w_stack);
        self.batch_pass(a, ctx, ws);
        ws.prepared = Some(Prepared {
            ctx,
            prints: prints(states, &slots),
            slots,
            gradient: true,
        });
    }

    /// The full-data metric of `members` of `states` into `out[member]`.
    /// With `ctx`, also prepares the minibatch deltas of iteration `ctx` for
    /// exactly these members; `keep` receives every row's logits.
    fn full_metric(
        &self,
        states: &[MlrState],
        members: &[usize],
        ctx: Option<IterCtx>,
        keep: Option<&mut Vec<f32>>,
        ws: &mut MlrWorkspace,
        out: &mut [f64],
    ) {
        let a = members.len();
        self.stack(members.iter().map(|&i| &states[i]), a, &mut ws.w_stack);
        ws.losses.clear();
        ws.losses.resize(a, 0.0);
        if let Some(ctx) = ctx {
            self.prepare_batch(ctx, ws);
        }
        self.full_pass(a, ctx.is_some(), keep, ws);
        if let Some(ctx) = ctx {
            ws.prepared = Some(Prepared {
                ctx,
                prints: prints(states, members),
                slots: members.to_vec(),
                gradient: false,
            });
        }
        for (slot, &i) in members.iter().enumerate() {
            out[i] = ws.losses[slot];
        }
    }

    /// Whether `ws` holds work prepared for iteration `ctx` from exactly the
    /// current weights of every active state.
    fn prepared_for(
        &self,
        states: &[MlrState],
        active: &[bool],
        ctx: IterCtx,
        ws: &MlrWorkspace,
    ) -> bool {
        match &ws.prepared {
            Some(p) if p.ctx == ctx && p.prints.len() == states.len() => states
                .iter()
                .zip(active)
                .zip(&p.prints)
                .all(|((s, &a), &f)| !a || (f != 0 && f == fingerprint(&s.w))),
            _ => false,
        }
    }

    /// Steps the prepared members that are active: the gradient product if
    /// only deltas were prepared, then [`Mlr::apply`] for each.
    fn step_prepared(&self, states: &mut [MlrState], active: &[bool], ws: &mut MlrWorkspace) {
        let p = ws.prepared.take().expect("prepared");
        let a = p.slots.len();
        let c = self.data.classes;
        if !p.gradient {
            let width = padded_width(a, c);
            ws.grad.clear();
            ws.grad.resize(ws.info.block.padded_features() * width, 0.0);
            block_gradient(&ws.info.block, &ws.delta, stride(a, c), width, &mut ws.grad);
        }
        for (slot, &i) in p.slots.iter().enumerate() {
            if active[i] {
                self.apply(&mut states[i], slot, a, p.ctx, ws);
            }
        }
    }
}

impl Model for Mlr {
    type State = MlrState;
    type Workspace = MlrWorkspace;

    fn info(&self) -> ModelInfo {
        let (m, c) = (self.data.features, self.data.classes);
        ModelInfo {
            name: "mlr",
            blocks: m,
            parameters: m * c,
            block_description: format!("one row (feature) of the {m}x{c} weight matrix"),
            metric: "cross-entropy summed over the training set",
        }
    }

    fn block_count(&self) -> usize {
        self.data.features
    }

    fn init(&self) -> MlrState {
        MlrState {
            w: vec![0.0; self.data.features * self.data.classes],
            bound: Bound::default(),
        }
    }

    fn workspace(&self) -> MlrWorkspace {
        MlrWorkspace {
            perm: Vec::with_capacity(self.data.rows),
            perm_key: None,
            info: BatchInfo::default(),
            scratch: SoftmaxScratch::default(),
            block_logits: Vec::new(),
            w_stack: Vec::new(),
            delta: Vec::new(),
            delta_chunk: Vec::new(),
            prepared: None,
            batch_loss: Vec::new(),
            pos_loss: Vec::new(),
            losses: Vec::new(),
            grad: Vec::new(),
            member_grad: Vec::new(),
            logits: Vec::new(),
            logits_of: None,
            apart: apart::Apart::default(),
        }
    }

    fn metric(&self, state: &MlrState, ws: &mut MlrWorkspace) -> f64 {
        // Keep every row's logits for a `step` of the same state that may follow.
        let mut out = [0.0];
        let mut logits = std::mem::take(&mut ws.logits);
        self.full_metric(
            std::slice::from_ref(state),
            &[0],
            None,
            Some(&mut logits),
            ws,
            &mut out,
        );
        ws.logits = logits;
        ws.logits_of = Some(fingerprint(&state.w));
        out[0]
    }

    fn step(&self, state: &mut MlrState, ctx: IterCtx, ws: &mut MlrWorkspace) {
        let c = self.data.classes;
        let states = std::slice::from_mut(state);
        if ws.logits_of == Some(fingerprint(&states[0].w)) {
            // Deltas and batch loss from the logits `metric` computed, in
            // minibatch order as a cohort's pass has them.
            let (width, ds) = (padded_width(1, c), stride(1, c));
            self.ensure_scratch(1, ws);
            self.prepare_batch(ctx, ws);
            ws.delta.resize(self.batch * ds, 0.0);
            ws.batch_loss.clear();
            ws.batch_loss.push(0.0);
            let range = self.batch_range(ctx, &mut ws.perm, &mut ws.perm_key);
            for (p, &r) in ws.perm[range].iter().enumerate() {
                let r = r as usize;
                ws.scratch.row(
                    &ws.logits[r * width..r * width + c],
                    1,
                    c,
                    self.data.y[r] as usize,
                    &mut ws.batch_loss,
                    RowDelta::Into(&mut ws.delta[p * ds..p * ds + c]),
                );
            }
            ws.prepared = Some(Prepared {
                ctx,
                prints: vec![fingerprint(&states[0].w)],
                slots: vec![0],
                gradient: false,
            });
        } else {
            self.prepare_gradient(states, vec![0], ctx, ws);
        }
        self.step_prepared(states, &[true], ws);
        ws.logits_of = None;
    }

    fn cohort_size(&self) -> usize {
        // Stack up to ~512 logit columns: wide enough to amortise reading the
        // data, narrow enough for the stacked weights to stay in cache.
        (512 / self.data.classes).max(1)
    }

    fn metric_many(
        &self,
        states: &[MlrState],
        active: &[bool],
        next: IterCtx,
        ws: &mut MlrWorkspace,
        out: &mut [f64],
    ) {
        let members: Vec<usize> = (0..states.len()).filter(|&i| active[i]).collect();
        if members.is_empty() {
            return;
        }
        self.full_metric(states, &members, Some(next), None, ws, out);
    }

    fn metric_apart(
        &self,
        states: &[MlrState],
        active: &[bool],
        next: &[IterCtx],
        ws: &mut MlrWorkspace,
        out: &mut [f64],
    ) {
        // One stacked full-data pass; it keeps each member's minibatch
        // deltas for `step_apart` (`apart`).
        let members: Vec<usize> = (0..states.len()).filter(|&i| active[i]).collect();
        if !members.is_empty() {
            self.metric_apart_prepared(states, &members, next, ws, out);
        }
    }

    fn step_apart(
        &self,
        states: &mut [MlrState],
        active: &[bool],
        next: &[IterCtx],
        ws: &mut MlrWorkspace,
    ) {
        self.step_apart_prepared(states, active, next, ws);
    }

    fn check_many(
        &self,
        states: &[MlrState],
        active: &[bool],
        next: IterCtx,
        criterion: f64,
        ws: &mut MlrWorkspace,
        out: &mut [Check],
    ) {
        let Some(wts) = &self.weights else {
            let mut m = vec![0.0; states.len()];
            self.metric_many(states, active, next, ws, &mut m);
            for (i, &a) in active.iter().enumerate() {
                if a {
                    out[i] = Check::Exact(m[i]);
                }
            }
            return;
        };
        let members: Vec<usize> = (0..states.len()).filter(|&i| active[i]).collect();
        if members.is_empty() {
            return;
        }
        // The fused minibatch pass the step needs anyway gives each member's
        // fresh batch loss; the bound decides who needs the full metric.
        self.prepare_gradient(states, members.clone(), next, ws);
        let mut exact = Vec::new();
        for (slot, &i) in members.iter().enumerate() {
            let lb =
                states[i]
                    .bound
                    .lower_bound(wts, next.iteration, &states[i].w, ws.batch_loss[slot]);
            if lb > criterion {
                out[i] = Check::Above;
            } else {
                exact.push(i);
            }
        }
        if !exact.is_empty() {
            // A full-data pass without a minibatch leaves the prepared
            // gradient and batch losses alone.
            let mut m = vec![0.0; states.len()];
            self.full_metric(states, &exact, None, None, ws, &mut m);
            for &i in &exact {
                out[i] = Check::Exact(m[i]);
            }
        }
    }

    fn step_many(
        &self,
        states: &mut [MlrState],
        active: &[bool],
        ctx: IterCtx,
        ws: &mut MlrWorkspace,
    ) {
        if !self.prepared_for(states, active, ctx, ws) {
            let members: Vec<usize> = (0..states.len()).filter(|&i| active[i]).collect();
            if members.is_empty() {
                return;
            }
            self.prepare_gradient(states, members, ctx, ws);
        }
        self.step_prepared(states, active, ws);
        ws.logits_of = None;
    }

    fn copy_block(&self, src: &MlrState, dst: &mut MlrState, block: usize) {
        let c = self.data.classes;
        let r = block * c..(block + 1) * c;
        dst.w[r.clone()].copy_from_slice(&src.w[r]);
    }

    fn block_distance(&self, a: &MlrState, b: &MlrState, block: usize) -> f64 {
        let c = self.data.classes;
        let r = block * c..(block + 1) * c;
        a.w[r.clone()]
            .iter()
            .zip(&b.w[r])
            .map(|(x, y)| {
                let d = (*x as f64) - (*y as f64);
                d * d
            })
            .sum::<f64>()
            .sqrt()
    }

    fn flat_params(&self) -> Option<&dyn super::FlatParams<MlrState>> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;
