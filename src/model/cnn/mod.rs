//! A convolutional neural network trained by Adam on MNIST (SCAR §5.1,
//! Appendix D), with by-layer or by-shard partitioning into blocks.
//!
//! - **Network**: LeNet-5 style, two 5×5 convolutions with ReLU and 2×2 max
//!   pooling, then three fully connected layers (ReLU on the first two);
//!   44,426 parameters in ten tensors (`net` has the table). Forward and
//!   backward passes are hand-written (`layers`: register-blocked kernels
//!   with one fixed order of fused multiply-adds per output, the same bits on
//!   every CPU), checked
//!   against finite differences in `f64` by the tests.
//! - **Input**: pixels scaled to [0, 1] (raw 0..=255 intensities divided by
//!   255 as the minibatch is gathered), the usual CNN input. (The MLR keeps raw
//!   pixels because its Appendix D learning rate was tuned for them.)
//! - **Initialisation**: PyTorch's default for `Conv2d`/`Linear`, which the
//!   paper's implementation presumably used: every weight and bias drawn
//!   from U(−1/√fan_in, 1/√fan_in) (Kaiming-uniform with a = √5), from
//!   `rng::stream(seed, Purpose::ModelInit, tensor, 0)`.
//! - **Optimiser**: Adam (Kingma & Ba) on the gradient of the batch-mean
//!   cross-entropy, α = 0.001, β1 = 0.9, β2 = 0.999, ε = 1e-8 and batch 64
//!   (Appendix D), in PyTorch's form
//!   `w ← w − α/(1 − β1^t) · m / (√v/√(1 − β2^t) + ε)`.
//! - **Adam step counter t**: choice (the paper is silent): *per block*,
//!   carried with the block like its moments. t counts the Adam updates the
//!   block's moments have absorbed, so a block restored from a checkpoint
//!   saved at iteration C resumes with t = C and bias corrections that match
//!   its moments (a block restored to x(0) restarts Adam exactly as at
//!   iteration 0). In the unperturbed run every block has t = k at x(k).
//! - **Blocks** ([`Partitioning`]): by-layer, each of the ten weight and
//!   bias tensors is one block (weights and biases are lost independently,
//!   Appendix D); by-shard, each tensor is split along its first dimension
//!   (output channels or units) into min(rows, S) shards of near-equal row
//!   counts (⌊·⌋ splits, sizes differ by at most one row). A block is a
//!   contiguous range of the flat parameter vector and carries its Adam
//!   first and second moments and its step counter. Block distance is the
//!   L2 distance of the block's parameters (not its moments).
//! - **Data order**: minibatch k is batch k mod (rows / b) of the epoch
//!   permutation `rng::stream(run_seed, Purpose::DataOrder, epoch, 0)`, as in
//!   the MLR, so a perturbed run sees the baseline's batches.
//! - **Convergence metric** ([`CnnMetric`]; the paper says only "0.08 in
//!   cross-entropy loss"). Two choices, both evaluated at every iteration so
//!   that the iteration count at convergence has the one-iteration
//!   resolution the rework counts need:
//!   - `running-mean` (the bundled scenarios, window W = 50): the mean
//!     cross-entropy of the last W minibatches, each evaluated on the
//!     parameters it was drawn for, before their update. It costs nothing
//!     (the step computes those losses) and averages away most of Adam's
//!     iteration-to-iteration oscillation of the loss (about ±0.02 at 0.1 on
//!     real MNIST). The window is part of the state as run state, not a block:
//!     failures do not lose it and recovery does not restore it, as a
//!     training driver's loss log would survive a PS failure. It starts
//!     filled with ln(classes), the loss of a uniform prediction. Its price
//!     is a lag: a failure's loss spike stays in the window for W
//!     iterations.
//!   - `subset`: the mean cross-entropy of the current parameters over a
//!     fixed subset of the training set (`examples` images chosen once from
//!     `rng::stream(seed, Purpose::Other, EVAL_SUBSET_STREAM, 0)`): a function
//!     of the parameters alone, without lag, but a forward pass costs about
//!     16 µs per image against about 2.4 ms per training step of 64 images
//!     (one core), so 256 images already cost 1.7 steps per iteration. A
//!     trial's convergence check stops its pass as soon as the images seen
//!     put the mean over the criterion ([`Model::check_many`], exact: see
//!     `Cnn::subset_check`); the unperturbed run's metric, which
//!     `baseline.csv` reports, is always the whole pass.
//!
//!   Either way the metric is a deterministic function of the state, as the
//!   engine requires.

pub(crate) mod gradient;
pub(crate) mod layers;
pub(crate) mod net;
pub(crate) mod vector;

use std::ops::Range;
use std::sync::Arc;

use anyhow::{Result, bail};
use rand::RngExt;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use super::{Check, CnnSpec, IterCtx, Model, ModelInfo};
use crate::data::Classification;
use crate::rng::{Purpose, stream};
use net::{Arch, Net};

/// Raw pixel intensities (0..=255) are multiplied by this: inputs in [0, 1].
pub(crate) const PIXEL_SCALE: f32 = 1.0 / 255.0;

crate::simd::kernel! {
    /// `dst[i] = f32(src[i]) · PIXEL_SCALE`: a gathered row of pixel bytes,
    /// scaled (compiled per kernel level so that it runs sixteen at a time;
    /// one rounded product each, the same at every level).
    fn widen_pixels, widen_pixels_at(dst: &mut [f32], src: &[u8]) = widen_pixels_body;
}

#[inline(always)]
fn widen_pixels_body(dst: &mut [f32], src: &[u8]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = f32::from(s) * PIXEL_SCALE;
    }
}

/// How many images ahead of the one being copied the minibatch gather
/// prefetches (the rows are scattered over the dataset, mostly out of cache).
const PREFETCH_ROWS: usize = 4;

/// Asks the CPU to bring `row` into cache (a hint: no effect on results).
#[inline(always)]
fn prefetch<T>(row: &[T]) {
    #[cfg(target_arch = "x86_64")]
    for chunk in row.chunks(64 / std::mem::size_of::<T>().max(1)) {
        // SAFETY: a prefetch only hints the cache, and the address is in bounds.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                chunk.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// The largest bound on the logits' magnitude under which the subset
/// metric's check may stop its pass early ([`Cnn::subset_check`]): far below
/// f32's largest value (3.4·10³⁸), so no partial sum of the pass overflows.
const FINITE_LOGITS: f64 = 1e30;

/// Sub-stream (`a`) of `Purpose::Other` that picks the evaluation subset.
pub(crate) const EVAL_SUBSET_STREAM: u64 = 0x00C0_FFEE_0CAA;

/// How the parameters are split into blocks (SCAR §5.1, Appendix D).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Partitioning {
    /// Each weight tensor and each bias tensor is one block.
    ByLayer,
    /// Each tensor is split along its first dimension into `min(rows, shards)`
    /// near-equal shards; the shards are the blocks.
    ByShard {
        /// S: the most shards a tensor is split into.
        shards: usize,
    },
}

/// The CNN as a scenario specifies it ([`CnnSpec`]: partitioning, minibatch,
/// Adam's hyper-parameters, convergence metric) and the seed of its
/// initialisation and evaluation subset.
#[derive(Clone, Debug, PartialEq)]
pub struct CnnConfig {
    /// The scenario's `[model]` fields (its `dataset` names the data passed
    /// to [`Cnn::new`] beside it).
    pub spec: CnnSpec,
    /// Seed of the initialisation and of the evaluation subset.
    pub seed: u64,
}

/// The convergence metric of the CNN (see the module documentation for
/// the choice).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "metric", rename_all = "kebab-case")]
pub enum CnnMetric {
    /// Mean cross-entropy of the last `window` minibatches, each evaluated on
    /// the parameters it was drawn for (before that iteration's update). The
    /// window lives in the state and starts filled with ln(classes), the
    /// loss of a uniform prediction.
    RunningMean {
        /// W: minibatches averaged.
        window: usize,
    },
    /// Mean cross-entropy of the current parameters over a fixed subset of
    /// the training set.
    Subset {
        /// Images in the subset (clamped to the number of rows).
        examples: usize,
    },
}

/// One block: a contiguous range of the flat parameter vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    /// Index of the tensor in [`Arch::tensors`].
    pub(crate) tensor: usize,
    /// Rows (first-dimension indices) of the tensor it covers.
    pub(crate) rows: Range<usize>,
    /// Its range in the flat parameter vector.
    pub(crate) range: Range<usize>,
}

/// The blocks of `arch` under `partitioning`, tensor by tensor.
pub(crate) fn blocks_of(arch: &Arch, partitioning: Partitioning) -> Vec<Block> {
    let mut out = Vec::new();
    for (ti, t) in arch.tensors.iter().enumerate() {
        let shards = match partitioning {
            Partitioning::ByLayer => 1,
            Partitioning::ByShard { shards } => shards.clamp(1, t.rows),
        };
        for s in 0..shards {
            let (r0, r1) = (s * t.rows / shards, (s + 1) * t.rows / shards);
            out.push(Block {
                tensor: ti,
                rows: r0..r1,
                range: t.offset + r0 * t.row_len..t.offset + r1 * t.row_len,
            });
        }
    }
    out
}

/// The CNN on a classification dataset of square single-channel images.
pub struct Cnn {
    data: Arc<Classification>,
    config: CnnConfig,
    arch: Arch,
    blocks: Vec<Block>,
    batch: usize,
    eval_x: Vec<f32>,
    eval_y: Vec<u8>,
    /// The largest |x| over `eval_x` (scaled pixels), for the bound behind
    /// [`Cnn::subset_check`]'s early answer.
    eval_max_abs: f64,
    /// The dataset's features as bytes, where every value is a whole number
    /// in 0..=255 (raw pixel intensities, as real MNIST's are): the same
    /// values, a quarter of the bytes for the minibatch gather to read from
    /// memory, on huge pages where the system allows (`None` otherwise, and the
    /// gather reads the `f32` features).
    pixels: Option<Vec<u8>>,
}

/// The features of `data` as bytes, if every one is a whole number in
/// 0..=255 that converts back to the same `f32` bits (not −0).
fn pixel_bytes(data: &Classification) -> Option<Vec<u8>> {
    let whole = |v: f32| (0.0..=255.0).contains(&v) && f32::from(v as u8).to_bits() == v.to_bits();
    data.x.iter().all(|&v| whole(v)).then(|| {
        let mut bytes = crate::data::huge_pages::with_capacity(data.x.len());
        bytes.extend(data.x.iter().map(|&v| v as u8));
        bytes
    })
}

/// CNN state: parameters and the Adam state that travels with them.
#[derive(Clone, Debug, PartialEq)]
pub struct CnnState {
    /// All parameters, tensor after tensor (layout in [`Arch::tensors`]).
    pub(crate) w: Vec<f32>,
    /// Adam first moments, same layout.
    pub(crate) m: Vec<f32>,
    /// Adam second moments, same layout.
    pub(crate) v: Vec<f32>,
    /// Adam step counter t of each block.
    pub(crate) steps: Vec<u32>,
    /// Running-mean metric: the last W minibatch losses (a ring; empty for
    /// the subset metric). Run state, not part of any block: a failure does
    /// not lose it and recovery does not restore it.
    pub(crate) losses: Vec<f64>,
    /// Where the next minibatch loss goes in `losses`.
    pub(crate) next_loss: usize,
}

/// Buffers reused across iterations of one run.
pub struct CnnWorkspace {
    net: Net<f32>,
    grad: Vec<f32>,
    labels: Vec<u8>,
    perm: Vec<u32>,
    perm_key: Option<(u64, usize)>,
    /// The (run seed, iteration) whose minibatch `net.input` and `labels`
    /// hold: the members of a cohort at one iteration share it, so it is
    /// gathered once for all of them (nothing else writes `net.input`).
    batch_key: Option<(u64, usize)>,
    /// The subset check's buffers and ranking of the images.
    eval: EvalScratch,
}

/// What [`Cnn::subset_check`] keeps between checks: only its speed depends
/// on it (any order of the passes gives the same answers).
#[derive(Default)]
struct EvalScratch {
    /// Images of the subset in the order the check evaluates them.
    order: Vec<u32>,
    /// Each image's loss at its last evaluation (the ranking of `order`).
    score: Vec<f64>,
    /// This check's losses in subset order, 0 where not evaluated yet.
    terms: Vec<f64>,
    /// One pass's losses.
    pass: Vec<f64>,
    /// One pass's images and labels.
    x: Vec<f32>,
    y: Vec<u8>,
}

/// The subset's losses `terms` summed in subset order from +0, as
/// [`Net::add_loss`] sums them.
fn subset_sum(terms: &[f64]) -> f64 {
    terms.iter().fold(0.0, |s, &t| s + t)
}

impl Cnn {
    /// A model over `data` (square single-channel images, e.g. MNIST).
    pub fn new(data: Arc<Classification>, config: &CnnConfig) -> Result<Cnn> {
        let side = (data.features as f64).sqrt().round() as usize;
        if side * side != data.features {
            bail!(
                "the CNN needs square images; dataset {} has {} features per example",
                data.name,
                data.features
            );
        }
        let Some(arch) = Arch::new(side, data.classes) else {
            bail!(
                "the CNN needs {side}x{side} images that survive two 5x5 convolutions and 2x2 poolings evenly (28x28 does)"
            );
        };
        if let Partitioning::ByShard { shards: 0 } = config.spec.partitioning {
            bail!("by-shard partitioning needs at least one shard per tensor");
        }
        let blocks = blocks_of(&arch, config.spec.partitioning);
        let batch = config.spec.batch_size.clamp(1, data.rows);
        let eval_n = match config.spec.metric {
            CnnMetric::Subset { examples } => examples.clamp(1, data.rows),
            CnnMetric::RunningMean { window: 0 } => {
                bail!("the running-mean metric needs a window of at least one minibatch")
            }
            CnnMetric::RunningMean { .. } => 0,
        };
        let mut rows: Vec<u32> = (0..data.rows as u32).collect();
        rows.shuffle(&mut stream(
            config.seed,
            Purpose::Other,
            EVAL_SUBSET_STREAM,
            0,
        ));
        let mut chosen = rows[..eval_n].to_vec();
        chosen.sort_unstable();
        let mut eval_x = Vec::with_capacity(eval_n * data.features);
        let mut eval_y = Vec::with_capacity(eval_n);
        for &i in &chosen {
            eval_x.extend(data.row(i as usize).iter().map(|&p| p * PIXEL_SCALE));
            eval_y.push(data.y[i as usize]);
        }
        let pixels = pixel_bytes(&data);
        // Infinite if any value is not finite: then no check stops early.
        let eval_max_abs = eval_x.iter().fold(0.0f64, |m, &v| {
            if v.is_finite() {
                m.max(f64::from(v.abs()))
            } else {
                f64::INFINITY
            }
        });
        Ok(Cnn {
            data,
            config: config.clone(),
            arch,
            blocks,
            batch,
            eval_x,
            eval_y,
            eval_max_abs,
            pixels,
        })
    }

    /// The dataset this model trains on.
    #[cfg(test)]
    pub(crate) fn data(&self) -> &Classification {
        &self.data
    }

    /// The network's shapes.
    pub(crate) fn arch(&self) -> &Arch {
        &self.arch
    }

    /// The blocks, in block-index order.
    #[cfg(test)]
    pub(crate) fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Effective minibatch size.
    pub fn batch_size(&self) -> usize {
        self.batch
    }

    /// Number of examples in the subset metric's evaluation set (0 for the running mean).
    pub fn eval_examples(&self) -> usize {
        self.eval_y.len()
    }

    /// Minibatches per epoch (examples past the last full batch are skipped in that epoch).
    #[cfg(test)]
    pub(crate) fn batches_per_epoch(&self) -> usize {
        (self.data.rows / self.batch).max(1)
    }

    /// Makes `perm` the row order of the epoch holding iteration `ctx.iteration`
    /// and returns the range of `perm` that is that iteration's minibatch.
    fn batch_range(
        &self,
        ctx: IterCtx,
        perm: &mut Vec<u32>,
        perm_key: &mut Option<(u64, usize)>,
    ) -> Range<usize> {
        super::epoch_minibatch(ctx, self.data.rows, self.batch, perm, perm_key)
    }

    /// The example indices of minibatch `ctx.iteration` of run `ctx.run_seed`.
    #[cfg(test)]
    pub(crate) fn batch_rows<'w>(&self, ctx: IterCtx, ws: &'w mut CnnWorkspace) -> &'w [u32] {
        let range = self.batch_range(ctx, &mut ws.perm, &mut ws.perm_key);
        &ws.perm[range]
    }

    /// Loads minibatch `ctx.iteration` (scaled pixels, labels) into the
    /// workspace and computes the gradient of its mean cross-entropy at `w`
    /// into `ws.grad`. Returns the batch's summed cross-entropy.
    fn batch_gradient(&self, w: &[f32], ctx: IterCtx, ws: &mut CnnWorkspace) -> f64 {
        let key = Some((ctx.run_seed, ctx.iteration));
        if ws.batch_key != key {
            self.gather_batch(ctx, ws);
            ws.batch_key = key;
        }
        ws.net
            .gradient(w, self.batch, &ws.labels[..self.batch], &mut ws.grad)
    }

    /// Gathers minibatch `ctx.iteration` (pixels scaled as they are copied,
    /// labels) into `ws.net.input` and `ws.labels`.
    fn gather_batch(&self, ctx: IterCtx, ws: &mut CnnWorkspace) {
        let range = self.batch_range(ctx, &mut ws.perm, &mut ws.perm_key);
        let f = self.data.features;
        let rows = &ws.perm[range];
        for (slot, &i) in rows.iter().enumerate() {
            let i = i as usize;
            let input = &mut ws.net.input[slot * f..(slot + 1) * f];
            match &self.pixels {
                Some(bytes) => {
                    if let Some(&ahead) = rows.get(slot + PREFETCH_ROWS) {
                        prefetch(&bytes[ahead as usize * f..(ahead as usize + 1) * f]);
                    }
                    widen_pixels(input, &bytes[i * f..(i + 1) * f]);
                }
                None => {
                    if let Some(&ahead) = rows.get(slot + PREFETCH_ROWS) {
                        prefetch(self.data.row(ahead as usize));
                    }
                    for (d, &s) in input.iter_mut().zip(self.data.row(i)) {
                        *d = s * PIXEL_SCALE;
                    }
                }
            }
            ws.labels[slot] = self.data.y[i];
        }
        ws.net.split_input(rows.len());
    }

    /// The gradient of the mean cross-entropy of minibatch `ctx.iteration`
    /// (of run `ctx.run_seed`'s data order) at parameters `w`, written into
    /// `out` (length [`Arch::parameters`]); returns the minibatch's mean
    /// cross-entropy. This is what a worker of the wall-clock protocol
    /// simulations computes on the parameters it pulled
    /// ([`gradient`]).
    pub(crate) fn minibatch_gradient(
        &self,
        w: &[f32],
        ctx: IterCtx,
        ws: &mut CnnWorkspace,
        out: &mut [f32],
    ) -> f64 {
        let loss = self.batch_gradient(w, ctx, ws);
        out.copy_from_slice(&ws.grad);
        loss / self.batch as f64
    }

    /// Mean cross-entropy of parameters `w` over the fixed evaluation subset
    /// of the `subset` metric (NaN with the running-mean metric, which has
    /// no subset).
    pub(crate) fn subset_loss(&self, w: &[f32], ws: &mut CnnWorkspace) -> f64 {
        let cap = ws.net.capacity();
        let f = self.data.features;
        let mut total = 0.0;
        for (xs, ys) in self.eval_x.chunks(cap * f).zip(self.eval_y.chunks(cap)) {
            ws.net.forward_from(w, xs, ys.len());
            total = ws.net.add_loss(ys.len(), ys, total);
        }
        total / self.eval_y.len() as f64
    }

    /// The convergence check of the `subset` metric against criterion `c`
    /// ([`Model::check_many`]): [`Check::Above`] as soon as the images
    /// evaluated so far put the mean over c, else the metric with the bits
    /// of [`Cnn::subset_loss`].
    ///
    /// The images are evaluated a pass of [`Net::capacity`] at a time,
    /// those with the largest loss at their last evaluation (by any state
    /// this workspace checked) first, so that a few passes usually settle
    /// "not yet"; each image's loss has the same bits whichever pass it is
    /// in. After each pass the losses are summed in subset order with 0 for
    /// the images not yet evaluated.
    ///
    /// Why stopping early is exact. Every image's loss
    /// `fl(fl(max + ln Σ) − z_y)` is ≥ 0 whenever the logits are finite:
    /// Σ is an f32 sum of non-negative exponentials, one of which is
    /// `exp_f32(0) = 1` exactly (the largest logit's), so Σ ≥ 1 and
    /// `ln_f64(Σ) ≥ 0`; `max ≥ z_y`; rounding to nearest is monotone. So
    /// each step of the sum in subset order is monotone in its term, and
    /// with the missing terms at 0 the sum S_j is at most the metric's sum
    /// S: `fl(S/n) ≥ fl(S_j/n) > c`, unconverged, as the full pass would
    /// find. The logits are certainly finite when
    /// [`Cnn::logits_certainly_finite`] says so (otherwise the pass is
    /// always completed, so that a non-finite metric is reported as the
    /// brute force reports it). Unit tests compare both answers at many
    /// states and criteria, and check `exp_f32(0) = 1` and `ln_f64(x) ≥ 0`
    /// for x ≥ 1; a CLI test compares whole runs with the brute force.
    fn subset_check(&self, w: &[f32], ws: &mut CnnWorkspace, c: f64) -> Check {
        let cap = ws.net.capacity();
        let f = self.data.features;
        let n = self.eval_y.len();
        let mut e = std::mem::take(&mut ws.eval);
        if e.order.len() != n {
            e.order = (0..n as u32).collect();
            e.score = vec![0.0; n];
        }
        e.terms.clear();
        e.terms.resize(n, 0.0);
        e.pass.resize(cap, 0.0);
        let mut finite = None;
        let (mut seen, mut above) = (0, false);
        for pass in e.order.chunks(cap) {
            let m = pass.len();
            e.x.clear();
            e.y.clear();
            for &i in pass {
                let i = i as usize;
                e.x.extend_from_slice(&self.eval_x[i * f..(i + 1) * f]);
                e.y.push(self.eval_y[i]);
            }
            ws.net.forward_from(w, &e.x, m);
            ws.net.losses(m, &e.y, &mut e.pass[..m]);
            for (&i, &t) in pass.iter().zip(&e.pass) {
                e.terms[i as usize] = t;
                e.score[i as usize] = t;
            }
            seen += m;
            if seen < n
                && subset_sum(&e.terms) / n as f64 > c
                && *finite.get_or_insert_with(|| self.logits_certainly_finite(w))
            {
                above = true;
                break;
            }
        }
        let check = if above {
            Check::Above
        } else {
            Check::Exact(subset_sum(&e.terms) / n as f64)
        };
        let score = &e.score;
        e.order.sort_unstable_by(|&a, &b| {
            score[b as usize]
                .total_cmp(&score[a as usize])
                .then(a.cmp(&b))
        });
        ws.eval = e;
        check
    }

    /// Whether every logit, and every partial sum on the way to it, of a
    /// forward pass of `w` over the evaluation subset is certainly finite:
    /// every parameter is finite, and the bound A_l = fan_in·W·A_(l−1) + W
    /// on the magnitude of layer l's outputs and partial sums (W the
    /// largest |w|, A_0 the largest |x| of the subset; ReLU and max pooling
    /// do not grow it) stays below [`FINITE_LOGITS`], far inside f32's
    /// range.
    fn logits_certainly_finite(&self, w: &[f32]) -> bool {
        // The largest magnitude's bits: for finite values they order as
        // the values do, and infinities and NaNs lie above (an integer
        // maximum, which vectorises).
        let bits = w.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff));
        if bits >= f32::INFINITY.to_bits() {
            return false;
        }
        let big = f64::from(f32::from_bits(bits));
        let bound = self
            .arch
            .tensors
            .iter()
            .filter(|t| t.name.ends_with(".weight"))
            .fold(self.eval_max_abs, |a, t| t.fan_in as f64 * big * a + big);
        bound <= FINITE_LOGITS
    }

    /// [`Cnn::subset_loss`] and the classification accuracy over the same
    /// subset, from one forward pass.
    pub(crate) fn subset_loss_and_accuracy(&self, w: &[f32], ws: &mut CnnWorkspace) -> (f64, f64) {
        let cap = ws.net.capacity();
        let f = self.data.features;
        let (mut total, mut correct) = (0.0, 0);
        for (xs, ys) in self.eval_x.chunks(cap * f).zip(self.eval_y.chunks(cap)) {
            ws.net.forward_from(w, xs, ys.len());
            total = ws.net.add_loss(ys.len(), ys, total);
            correct += ws.net.correct(ys.len(), ys);
        }
        let n = self.eval_y.len() as f64;
        (total / n, correct as f64 / n)
    }

    /// One Adam update of every block from the gradient `g`, each block with
    /// its own step counter (see the module documentation).
    fn adam(&self, state: &mut CnnState, g: &[f32]) {
        let c = &self.config.spec;
        for (blk, steps) in self.blocks.iter().zip(state.steps.iter_mut()) {
            *steps += 1;
            let r = blk.range.clone();
            layers::adam(
                &mut state.w[r.clone()],
                &mut state.m[r.clone()],
                &mut state.v[r.clone()],
                &g[r],
                adam_step(c, *steps),
            );
        }
    }
}

/// The scalars of the Adam update of a block at its step `t` (≥ 1).
fn adam_step(c: &CnnSpec, t: u32) -> layers::AdamStep {
    let t = t as i32;
    let bc1 = 1.0 - c.beta1.powi(t);
    let bc2 = 1.0 - c.beta2.powi(t);
    layers::AdamStep {
        b1: c.beta1 as f32,
        c1: (1.0 - c.beta1) as f32,
        b2: c.beta2 as f32,
        c2: (1.0 - c.beta2) as f32,
        step: (c.learning_rate / bc1) as f32,
        inv_sqrt_bc2: (1.0 / bc2.sqrt()) as f32,
        eps: c.epsilon as f32,
    }
}

impl Model for Cnn {
    type State = CnnState;
    type Workspace = CnnWorkspace;

    fn info(&self) -> ModelInfo {
        let block_description = match self.config.spec.partitioning {
            Partitioning::ByLayer => {
                "one weight or bias tensor of the LeNet-5-style CNN (by-layer), with its Adam state"
                    .to_string()
            }
            Partitioning::ByShard { shards } => format!(
                "one of min(rows, {shards}) shards of a weight or bias tensor along its first dimension (by-shard), with its Adam state"
            ),
        };
        ModelInfo {
            name: "cnn",
            blocks: self.blocks.len(),
            parameters: self.arch.parameters(),
            block_description,
            metric: match self.config.spec.metric {
                CnnMetric::RunningMean { .. } => {
                    "mean cross-entropy of the last W minibatches (running mean)"
                }
                CnnMetric::Subset { .. } => {
                    "mean cross-entropy over a fixed subset of the training set"
                }
            },
        }
    }

    fn block_count(&self) -> usize {
        self.blocks.len()
    }

    fn init(&self) -> CnnState {
        let n = self.arch.parameters();
        let mut w = vec![0f32; n];
        for (ti, t) in self.arch.tensors.iter().enumerate() {
            let bound = 1.0 / (t.fan_in as f64).sqrt();
            let mut rng = stream(self.config.seed, Purpose::ModelInit, ti as u64, 0);
            for v in &mut w[t.range()] {
                *v = rng.random_range(-bound..bound) as f32;
            }
        }
        CnnState {
            w,
            m: vec![0.0; n],
            v: vec![0.0; n],
            steps: vec![0; self.blocks.len()],
            losses: match self.config.spec.metric {
                CnnMetric::RunningMean { window } => {
                    vec![(self.data.classes as f64).ln(); window]
                }
                CnnMetric::Subset { .. } => Vec::new(),
            },
            next_loss: 0,
        }
    }

    fn workspace(&self) -> CnnWorkspace {
        CnnWorkspace {
            net: Net::new(&self.arch, self.batch),
            grad: vec![0.0; self.arch.parameters()],
            labels: vec![0; self.batch],
            perm: Vec::with_capacity(self.data.rows),
            perm_key: None,
            batch_key: None,
            eval: EvalScratch::default(),
        }
    }

    fn metric(&self, state: &CnnState, ws: &mut CnnWorkspace) -> f64 {
        if let CnnMetric::RunningMean { window } = self.config.spec.metric {
            return state.losses.iter().sum::<f64>() / window as f64;
        }
        self.subset_loss(&state.w, ws)
    }

    /// With the `subset` metric, each active state's pass over the
    /// evaluation subset stops as soon as the images seen put the mean over
    /// `criterion` (`Cnn::subset_check`: exact); the running mean is read
    /// as it is.
    fn check_many(
        &self,
        states: &[CnnState],
        active: &[bool],
        _next: IterCtx,
        criterion: f64,
        ws: &mut CnnWorkspace,
        out: &mut [Check],
    ) {
        for ((s, &a), o) in states.iter().zip(active).zip(out.iter_mut()) {
            if !a {
                continue;
            }
            *o = match self.config.spec.metric {
                CnnMetric::RunningMean { .. } => Check::Exact(self.metric(s, ws)),
                CnnMetric::Subset { .. } => self.subset_check(&s.w, ws, criterion),
            };
        }
    }

    fn step(&self, state: &mut CnnState, ctx: IterCtx, ws: &mut CnnWorkspace) {
        let loss = self.batch_gradient(&state.w, ctx, ws) / self.batch as f64;
        if !state.losses.is_empty() {
            state.losses[state.next_loss] = loss;
            state.next_loss = (state.next_loss + 1) % state.losses.len();
        }
        let g = std::mem::take(&mut ws.grad);
        self.adam(state, &g);
        ws.grad = g;
    }

    fn copy_block(&self, src: &CnnState, dst: &mut CnnState, block: usize) {
        let r = self.blocks[block].range.clone();
        dst.w[r.clone()].copy_from_slice(&src.w[r.clone()]);
        dst.m[r.clone()].copy_from_slice(&src.m[r.clone()]);
        dst.v[r.clone()].copy_from_slice(&src.v[r]);
        dst.steps[block] = src.steps[block];
    }

    fn block_params(&self, block: usize) -> usize {
        self.blocks[block].range.len()
    }

    fn block_distance(&self, a: &CnnState, b: &CnnState, block: usize) -> f64 {
        let r = self.blocks[block].range.clone();
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
}

#[cfg(test)]
mod tests;
