//! Multinomial logistic regression as a [`GradientModel`], for the
//! wall-clock protocol simulations.
//!
//! The parameters are MLR's M×N weight matrix (row-major, as in
//! [`super`]), initialised to zero. Gradient computation `index` of a run
//! uses minibatch `index` of the run's data order (MLR's epoch permutations,
//! so minibatches are drawn without replacement within an epoch, in the order
//! the workers start their computations). The gradient is the mean
//! cross-entropy gradient over the minibatch. The loss of the error curve is
//! the mean cross-entropy over a fixed subsample of the training set, drawn
//! once from the scenario seed: evaluating all 60,000 MNIST images costs
//! 50–80 ms, a 2,000-image subsample about 1 ms.
//!
//! The features are kept a second time as compressed sparse rows (MNIST is
//! ~19% non-zero), so a gradient or loss touches only non-zero pixels instead
//! of scanning all 784 of every example.

use rand::seq::SliceRandom;

use super::{Mlr, MlrWorkspace};
use crate::model::gradient::{GradientDraw, GradientInfo, GradientModel};
use crate::model::kernels::{exp_f32, ln_f64};
use crate::model::{IterCtx, Model};
use crate::rng::{Purpose, stream};

/// MLR with a fixed loss-evaluation subsample.
pub(crate) struct MlrGradient {
    mlr: Mlr,
    eval_rows: Vec<u32>,
    /// Row i's non-zero features are entries `starts[i]..starts[i+1]` of `sparse`.
    starts: Vec<usize>,
    sparse: Sparse,
}

/// The non-zero features of every row (column index and value), in the
/// narrowest layout that holds them exactly. A minibatch's rows are scattered
/// over a data set larger than the caches, so a gradient waits mostly on
/// memory: the narrow layout touches 3 bytes per non-zero instead of 8 (raw
/// MNIST: 27 MB instead of 72 MB, which fits this machine's L3 cache).
/// Both give the same f32 values, so the same bits.
enum Sparse {
    /// Any values: u32 columns, f32 values.
    Wide { cols: Vec<u32>, vals: Vec<f32> },
    /// Every value a whole number in 1..=255 and fewer than 65,536 features
    /// (raw MNIST pixels): u16 columns, u8 values.
    Pixels { cols: Vec<u16>, vals: Vec<u8> },
}

impl Sparse {
    /// The narrowest layout of `cols`/`vals` (see [`Sparse`]).
    fn narrowest(features: usize, cols: Vec<u32>, vals: Vec<f32>) -> Sparse {
        let pixels = features <= 1 << 16
            && vals
                .iter()
                .all(|&v| (1.0..=255.0).contains(&v) && v == v.trunc());
        if pixels {
            Sparse::Pixels {
                cols: cols.iter().map(|&j| j as u16).collect(),
                vals: vals.iter().map(|&v| v as u8).collect(),
            }
        } else {
            Sparse::Wide { cols, vals }
        }
    }

    /// Asks for the cache lines of entries `r`.
    fn prefetch(&self, r: std::ops::Range<usize>) {
        match self {
            Sparse::Wide { cols, vals } => {
                crate::simd::prefetch(&cols[r.clone()]);
                crate::simd::prefetch(&vals[r]);
            }
            Sparse::Pixels { cols, vals } => {
                crate::simd::prefetch(&cols[r.clone()]);
                crate::simd::prefetch(&vals[r]);
            }
        }
    }
}

/// A column index of the sparse layouts.
trait Col: Copy {
    fn at(self) -> usize;
}
impl Col for u32 {
    #[inline(always)]
    fn at(self) -> usize {
        self as usize
    }
}
impl Col for u16 {
    #[inline(always)]
    fn at(self) -> usize {
        self as usize
    }
}

/// A feature value of the sparse layouts, as the f32 the arithmetic uses.
trait Val: Copy {
    fn f32(self) -> f32;
}
impl Val for f32 {
    #[inline(always)]
    fn f32(self) -> f32 {
        self
    }
}
impl Val for u8 {
    #[inline(always)]
    fn f32(self) -> f32 {
        self as f32
    }
}

/// Buffers of one run.
pub(crate) struct MlrGradientWorkspace {
    /// MLR's own buffers (its epoch permutation is what we need).
    inner: MlrWorkspace,
    /// Logits of one example, or of a block of examples (row-major).
    z: Vec<f32>,
    /// softmax(z) − e_y of one example.
    delta: Vec<f32>,
    /// The unscaled minibatch gradient of [`GradientModel::add_gradient`]:
    /// all zeros between calls (each call clears what it wrote).
    raw: Vec<f32>,
}

impl MlrGradient {
    /// Wraps `mlr`; the loss uses `loss_rows` examples (all if fewer) drawn from `seed`.
    pub(crate) fn new(mlr: Mlr, loss_rows: usize, seed: u64) -> MlrGradient {
        let rows = mlr.data().rows;
        let mut all: Vec<u32> = (0..rows as u32).collect();
        all.shuffle(&mut stream(seed, Purpose::Other, 0x4c4f_5353, 0));
        all.truncate(loss_rows.clamp(1, rows));
        all.sort_unstable();
        let data = mlr.data();
        let mut starts = Vec::with_capacity(rows + 1);
        let mut cols = Vec::new();
        let mut vals = Vec::new();
        starts.push(0);
        for i in 0..rows {
            for (j, &v) in data.row(i).iter().enumerate() {
                if v != 0.0 {
                    cols.push(j as u32);
                    vals.push(v);
                }
            }
            starts.push(cols.len());
        }
        let sparse = Sparse::narrowest(data.features, cols, vals);
        MlrGradient {
            mlr,
            eval_rows: all,
            starts,
            sparse,
        }
    }

    /// Non-zero features of example `i`: (column indices, values).
    #[cfg(test)]
    fn sparse_row(&self, i: usize) -> (Vec<u32>, Vec<f32>) {
        let r = self.starts[i]..self.starts[i + 1];
        match &self.sparse {
            Sparse::Wide { cols, vals } => (cols[r.clone()].to_vec(), vals[r].to_vec()),
            Sparse::Pixels { cols, vals } => (
                cols[r.clone()].iter().map(|&j| j as u32).collect(),
                vals[r].iter().map(|&v| v as f32).collect(),
            ),
        }
    }

    /// Adds the gradient of `rows` under `w` to `out` ([`gradient_rows`]).
    #[allow(clippy::too_many_arguments)]
    fn gradient_rows(
        &self,
        y: &[u8],
        rows: &[u32],
        w: &[f32],
        out: &mut [f32],
        z: &mut Vec<f32>,
        delta: &mut [f32],
    ) {
        let starts = &self.starts;
        match &self.sparse {
            Sparse::Wide { cols, vals } => {
                gradient_rows(starts, cols, vals, y, rows, w, out, z, delta)
            }
            Sparse::Pixels { cols, vals } => {
                gradient_rows_px(starts, cols, vals, y, rows, w, out, z, delta)
            }
        }
    }

    /// The logits of `rows` under `w` into `z` ([`forward_rows`]).
    fn forward_rows(&self, rows: &[u32], w: &[f32], classes: usize, z: &mut Vec<f32>) {
        let starts = &self.starts;
        match &self.sparse {
            Sparse::Wide { cols, vals } => forward_rows(starts, cols, vals, rows, w, classes, z),
            Sparse::Pixels { cols, vals } => {
                forward_rows_px(starts, cols, vals, rows, w, classes, z)
            }
        }
    }

    /// The examples the loss is evaluated on.
    #[cfg(test)]
    pub(crate) fn eval_rows(&self) -> &[u32] {
        &self.eval_rows
    }

    /// The mean gradient of the minibatch `draw` names, into `out`; with
    /// `with_loss`, also the minibatch's mean cross-entropy from the logits
    /// the gradient computed (the minibatch is drawn once for both).
    fn minibatch_gradient(
        &self,
        params: &[f32],
        draw: GradientDraw,
        out: &mut [f32],
        ws: &mut MlrGradientWorkspace,
        with_loss: bool,
    ) -> Option<f64> {
        out.fill(0.0);
        let MlrGradientWorkspace {
            inner, z, delta, ..
        } = ws;
        let (scale, loss) = self.unscaled_gradient(params, draw, out, inner, z, delta, with_loss);
        for g in out.iter_mut() {
            *g *= scale;
        }
        loss
    }

    /// Adds the minibatch's unscaled gradient Σ_i x_iᵀ(softmax(x_i W) − e_{y_i})
    /// to `out` and returns the scale 1/B that makes it the mean, and with
    /// `with_loss` the minibatch's mean cross-entropy.
    #[allow(clippy::too_many_arguments)]
    fn unscaled_gradient(
        &self,
        params: &[f32],
        draw: GradientDraw,
        out: &mut [f32],
        inner: &mut MlrWorkspace,
        z: &mut Vec<f32>,
        delta: &mut [f32],
        with_loss: bool,
    ) -> (f32, Option<f64>) {
        let data = self.mlr.data();
        let c = data.classes;
        let ctx = IterCtx {
            iteration: draw.index as usize,
            run_seed: draw.run_seed,
        };
        let rows = self.mlr.batch_rows(ctx, inner);
        debug_assert_eq!(delta.len(), c);
        self.gradient_rows(&data.y, rows, params, out, z, delta);
        let loss = with_loss.then(|| {
            let sum: f64 = rows
                .iter()
                .zip(z.chunks_exact(c))
                .map(|(&i, z)| cross_entropy(z, data.y[i as usize] as usize))
                .sum();
            sum / rows.len() as f64
        });
        (1.0 / rows.len() as f32, loss)
    }
}

impl GradientModel for MlrGradient {
    type Workspace = MlrGradientWorkspace;

    fn info(&self) -> GradientInfo {
        let d = self.mlr.data();
        GradientInfo {
            name: "mlr",
            parameters: d.features * d.classes,
            loss: format!(
                "mean cross-entropy over a fixed subsample of {} training examples",
                self.eval_rows.len()
            ),
            batch_size: self.mlr.batch_size(),
        }
    }

    fn dim(&self) -> usize {
        let d = self.mlr.data();
        d.features * d.classes
    }

    fn init_params(&self) -> Vec<f32> {
        self.mlr.init().w
    }

    fn workspace(&self) -> MlrGradientWorkspace {
        let c = self.mlr.data().classes;
        MlrGradientWorkspace {
            inner: self.mlr.workspace(),
            z: vec![0.0; c],
            delta: vec![0.0; c],
            raw: vec![0.0; self.dim()],
        }
    }

    fn gradient(
        &self,
        params: &[f32],
        draw: GradientDraw,
        out: &mut [f32],
        ws: &mut MlrGradientWorkspace,
    ) {
        self.minibatch_gradient(params, draw, out, ws, false);
    }

    /// The gradient, and the mean cross-entropy of its minibatch from the
    /// logits the gradient already computed.
    fn gradient_and_loss(
        &self,
        params: &[f32],
        draw: GradientDraw,
        out: &mut [f32],
        ws: &mut MlrGradientWorkspace,
    ) -> f64 {
        self.minibatch_gradient(params, draw, out, ws, true)
            .expect("the loss was asked for")
    }

    /// The default's bits in one pass instead of three: the unscaled
    /// gradient is summed into a buffer kept at zero, and each entry then
    /// becomes `sum + rate · (raw · (1/B))` (what the default computes from
    /// [`GradientModel::gradient`]'s `raw · (1/B)`) while the buffer is
    /// cleared; no fill, no separate scaling pass.
    fn add_gradient(
        &self,
        params: &[f32],
        draw: GradientDraw,
        rate: f32,
        sum: &mut [f32],
        _scratch: &mut [f32],
        ws: &mut MlrGradientWorkspace,
        with_loss: bool,
    ) -> Option<f64> {
        let MlrGradientWorkspace {
            inner,
            z,
            delta,
            raw,
        } = ws;
        let (scale, loss) = self.unscaled_gradient(params, draw, raw, inner, z, delta, with_loss);
        add_mean_and_clear(sum, rate, scale, raw);
        loss
    }

    fn loss(&self, params: &[f32], ws: &mut MlrGradientWorkspace) -> f64 {
        self.loss_and_accuracy(params, ws).0
    }

    fn accuracy(&self, params: &[f32], ws: &mut MlrGradientWorkspace) -> Option<f64> {
        self.loss_and_accuracy(params, ws).1
    }

    fn loss_and_accuracy(
        &self,
        params: &[f32],
        ws: &mut MlrGradientWorkspace,
    ) -> (f64, Option<f64>) {
        let data = self.mlr.data();
        let c = data.classes;
        let mut sum = 0.0;
        let mut right = 0usize;
        // Logits of a block of rows at a time (each row's own sum in feature
        // order, several rows interleaved), then each row in order.
        let n = self.eval_rows.len();
        for start in (0..n).step_by(EVAL_BLOCK) {
            let block = &self.eval_rows[start..(start + EVAL_BLOCK).min(n)];
            // The next block's rows, while this one computes.
            let next = (start + EVAL_BLOCK).min(n)..(start + 2 * EVAL_BLOCK).min(n);
            for &i in &self.eval_rows[next] {
                self.sparse
                    .prefetch(self.starts[i as usize]..self.starts[i as usize + 1]);
            }
            self.forward_rows(block, params, c, &mut ws.z);
            score_rows(&ws.z, c, block, &data.y, &mut sum, &mut right);
        }
        let n = self.eval_rows.len() as f64;
        (sum / n, Some(right as f64 / n))
    }

    fn block_len(&self) -> usize {
        self.mlr.data().classes
    }
}

crate::simd::kernel! {
    /// `sum[i] += rate · (raw[i] · scale)` and `raw[i] = 0` (multiplies and
    /// adds, not fused: the bits of scaling `raw` first, then adding).
    fn add_mean_and_clear, add_mean_and_clear_at(
        sum: &mut [f32],
        rate: f32,
        scale: f32,
        raw: &mut [f32],
    ) = add_mean_and_clear_body;
}

#[inline(always)]
fn add_mean_and_clear_body(sum: &mut [f32], rate: f32, scale: f32, raw: &mut [f32]) {
    for (s, g) in sum.iter_mut().zip(raw.iter_mut()) {
        *s += rate * (*g * scale);
        *g = 0.0;
    }
}

/// Cross-entropy of one example from its logits: log Σ exp(z − max) + max − z_y,
/// with the portable `exp_f32` and `ln_f64` (the same bits on every CPU).
/// The exponentials are computed sixteen classes at a time in one loop and
/// summed in class order in another, so that the first vectorises (the same
/// bits as one loop).
#[inline(always)]
fn cross_entropy(z: &[f32], label: usize) -> f64 {
    let max = z.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let mut sum = 0.0f64;
    for part in z.chunks(16) {
        let mut e = [0f32; 16];
        for (e, &v) in e.iter_mut().zip(part) {
            *e = exp_f32(v - max);
        }
        for &v in &e[..part.len()] {
            sum += v as f64;
        }
    }
    max as f64 + ln_f64(sum) - z[label] as f64
}

crate::simd::kernel! {
    /// Σ of [`cross_entropy`] over the rows of `z` (row-major, `c` classes
    /// each, labels `labels[rows[o]]`), in row order onto `sum`, and the
    /// number of rows whose largest logit (ties to the lowest class) is the
    /// label, onto `right`.
    fn score_rows, score_rows_at(
        z: &[f32],
        c: usize,
        rows: &[u32],
        labels: &[u8],
        sum: &mut f64,
        right: &mut usize,
    ) = score_rows_body;
}

#[inline(always)]
fn score_rows_body(
    z: &[f32],
    c: usize,
    rows: &[u32],
    labels: &[u8],
    sum: &mut f64,
    right: &mut usize,
) {
    for (&i, z) in rows.iter().zip(z.chunks_exact(c)) {
        let label = labels[i as usize] as usize;
        *sum += cross_entropy(z, label);
        // Ties go to the lowest class.
        let mut best = 0;
        for (k, &v) in z.iter().enumerate() {
            if v > z[best] {
                best = k;
            }
        }
        *right += usize::from(best == label);
    }
}

/// Writes softmax(z) − e_label into `out` (portable `exp_f32`).
#[inline(always)]
fn softmax_minus_onehot(z: &[f32], label: usize, out: &mut [f32]) {
    let max = z.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let mut sum = 0f32;
    for (o, &v) in out.iter_mut().zip(z) {
        *o = exp_f32(v - max);
        sum += *o;
    }
    let inv = 1.0 / sum;
    for o in out.iter_mut() {
        *o *= inv;
    }
    out[label] -= 1.0;
}

/// Rows whose logits [`MlrGradient::loss_and_accuracy`] computes at a time.
const EVAL_BLOCK: usize = 64;

/// z = Σ_f x_f · W_f over one example's non-zero features `cols`/`vals`
/// (W row-major features × classes, `z.len()` classes): one multiply and one
/// add per term, in feature order, so every kernel level gives the same bits.
#[inline(always)]
fn forward_sparse_body<C: Col, V: Val>(w: &[f32], cols: &[C], vals: &[V], z: &mut [f32]) {
    let c = z.len();
    z.fill(0.0);
    for (&j, &v) in cols.iter().zip(vals) {
        let (j, v) = (j.at(), v.f32());
        for (o, wv) in z.iter_mut().zip(&w[j * c..(j + 1) * c]) {
            *o += v * wv;
        }
    }
}

crate::simd::kernel! {
    /// The logits of every example of `rows` (CSR `starts`/`cols`/`vals`)
    /// under `w` (features × `classes`), into `z` (row-major, resized): each
    /// row's sum is [`forward_sparse_body`]'s, one multiply and one add per term
    /// in feature order (the same bits). With ten classes, four rows advance
    /// side by side, so that their independent sums overlap in the pipeline
    /// instead of each waiting on its own previous add.
    fn forward_rows, forward_rows_at(
        starts: &[usize],
        cols: &[u32],
        vals: &[f32],
        rows: &[u32],
        w: &[f32],
        classes: usize,
        z: &mut Vec<f32>,
    ) = forward_rows_body::<u32, f32>;
}

crate::simd::kernel! {
    /// [`forward_rows`] over the narrow layout ([`Sparse::Pixels`]).
    fn forward_rows_px, forward_rows_px_at(
        starts: &[usize],
        cols: &[u16],
        vals: &[u8],
        rows: &[u32],
        w: &[f32],
        classes: usize,
        z: &mut Vec<f32>,
    ) = forward_rows_body::<u16, u8>;
}

#[inline(always)]
fn forward_rows_body<C: Col, V: Val>(
    starts: &[usize],
    cols: &[C],
    vals: &[V],
    rows: &[u32],
    w: &[f32],
    classes: usize,
    z: &mut Vec<f32>,
) {
    z.clear();
    z.resize(rows.len() * classes, 0.0);
    let row = |i: u32| {
        let r = starts[i as usize]..starts[i as usize + 1];
        (&cols[r.clone()], &vals[r])
    };
    if classes != 10 {
        for (&i, zi) in rows.iter().zip(z.chunks_exact_mut(classes)) {
            let (c, v) = row(i);
            forward_sparse_body(w, c, v, zi);
        }
        return;
    }
    let mut groups = rows.chunks_exact(4);
    let mut outs = z.chunks_exact_mut(40);
    for (g, out) in (&mut groups).zip(&mut outs) {
        let mut acc = [[0f32; 10]; 4];
        let mut terms: [(&[C], &[V]); 4] = std::array::from_fn(|r| row(g[r]));
        interleave4(w, &mut terms, &mut acc);
        // The tails: two rows at a time while two remain, then one.
        let mut live: Vec<usize> = (0..4).filter(|&r| !terms[r].0.is_empty()).collect();
        while live.len() >= 2 {
            let (a, b) = (live[0], live[1]);
            let (mut ta, mut tb) = (terms[a], terms[b]);
            let (mut pa, mut pb) = (acc[a], acc[b]);
            interleave2(w, &mut ta, &mut tb, &mut pa, &mut pb);
            (terms[a], terms[b], acc[a], acc[b]) = (ta, tb, pa, pb);
            live.retain(|&r| !terms[r].0.is_empty());
        }
        for r in live {
            let (c, v) = terms[r];
            // A local copy, so that the sums stay in registers: indexed by
            // `r`, `acc[r]` lived on the stack, every term a load, add and
            // store of the same ten values (a chain through memory).
            let mut a = acc[r];
            accumulate10(w, c, v, &mut a);
            acc[r] = a;
        }
        for (o, a) in out.chunks_exact_mut(10).zip(&acc) {
            o.copy_from_slice(a);
        }
    }
    for (&i, zi) in groups
        .remainder()
        .iter()
        .zip(outs.into_remainder().chunks_exact_mut(10))
    {
        let (c, v) = row(i);
        let mut acc = [0f32; 10];
        accumulate10(w, c, v, &mut acc);
        zi.copy_from_slice(&acc);
    }
}

/// `acc += v · W_j` for one term of a row (ten classes).
#[inline(always)]
fn term10<C: Col, V: Val>(w: &[f32], j: C, v: V, acc: &mut [f32; 10]) {
    let (j, v) = (j.at(), v.f32());
    let wr: &[f32; 10] = w[j * 10..j * 10 + 10].try_into().expect("10 classes");
    for k in 0..10 {
        acc[k] += v * wr[k];
    }
}

/// Every remaining term of one row, in order.
#[inline(always)]
fn accumulate10<C: Col, V: Val>(w: &[f32], cols: &[C], vals: &[V], acc: &mut [f32; 10]) {
    for (&j, &v) in cols.iter().zip(vals) {
        term10(w, j, v, acc);
    }
}

/// Four rows' terms side by side until the shortest ends; `terms` keeps what
/// is left of each.
#[inline(always)]
fn interleave4<C: Col, V: Val>(w: &[f32], terms: &mut [(&[C], &[V]); 4], acc: &mut [[f32; 10]; 4]) {
    let n = terms.iter().map(|t| t.0.len()).min().unwrap_or(0);
    let [a0, a1, a2, a3] = acc;
    let (mut r0, mut r1, mut r2, mut r3) = (*a0, *a1, *a2, *a3);
    for t in 0..n {
        term10(w, terms[0].0[t], terms[0].1[t], &mut r0);
        term10(w, terms[1].0[t], terms[1].1[t], &mut r1);
        term10(w, terms[2].0[t], terms[2].1[t], &mut r2);
        term10(w, terms[3].0[t], terms[3].1[t], &mut r3);
    }
    (*a0, *a1, *a2, *a3) = (r0, r1, r2, r3);
    for t in terms.iter_mut() {
        *t = (&t.0[n..], &t.1[n..]);
    }
}

/// Two rows' terms side by side until the shorter ends.
#[inline(always)]
fn interleave2<'a, C: Col, V: Val>(
    w: &[f32],
    ta: &mut (&'a [C], &'a [V]),
    tb: &mut (&'a [C], &'a [V]),
    pa: &mut [f32; 10],
    pb: &mut [f32; 10],
) {
    let n = ta.0.len().min(tb.0.len());
    let (mut ra, mut rb) = (*pa, *pb);
    for t in 0..n {
        term10(w, ta.0[t], ta.1[t], &mut ra);
        term10(w, tb.0[t], tb.1[t], &mut rb);
    }
    (*pa, *pb) = (ra, rb);
    *ta = (&ta.0[n..], &ta.1[n..]);
    *tb = (&tb.0[n..], &tb.1[n..]);
}

crate::simd::kernel! {
    /// Adds Σ_{i ∈ rows} x_iᵀ (softmax(x_i W) − e_{y_i}) to `out` (features ×
    /// classes), rows in order: first every row's logits ([`forward_rows`],
    /// into `z`), then row after row its softmax and its outer product with
    /// the row, added to `out` (`delta`, one class each, is scratch). Each
    /// entry of `out` sums over the rows in order: the same bits on every level.
    fn gradient_rows, gradient_rows_at(
        starts: &[usize],
        cols: &[u32],
        vals: &[f32],
        y: &[u8],
        rows: &[u32],
        w: &[f32],
        out: &mut [f32],
        z: &mut Vec<f32>,
        delta: &mut [f32],
    ) = gradient_rows_body::<u32, f32>;
}

crate::simd::kernel! {
    /// [`gradient_rows`] over the narrow layout ([`Sparse::Pixels`]).
    fn gradient_rows_px, gradient_rows_px_at(
        starts: &[usize],
        cols: &[u16],
        vals: &[u8],
        y: &[u8],
        rows: &[u32],
        w: &[f32],
        out: &mut [f32],
        z: &mut Vec<f32>,
        delta: &mut [f32],
    ) = gradient_rows_body::<u16, u8>;
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gradient_rows_body<C: Col, V: Val>(
    starts: &[usize],
    cols: &[C],
    vals: &[V],
    y: &[u8],
    rows: &[u32],
    w: &[f32],
    out: &mut [f32],
    z: &mut Vec<f32>,
    delta: &mut [f32],
) {
    let c = delta.len();
    // The minibatch's rows are scattered over a data set larger than the
    // caches: ask for all of them at once, so that their misses overlap
    // instead of each row's first access waiting in turn.
    for &i in rows {
        let r = starts[i as usize]..starts[i as usize + 1];
        crate::simd::prefetch(&cols[r.clone()]);
        crate::simd::prefetch(&vals[r]);
    }
    forward_rows_body(starts, cols, vals, rows, w, c, z);
    for (&i, zi) in rows.iter().zip(z.chunks_exact(c)) {
        let i = i as usize;
        let r = starts[i]..starts[i + 1];
        let (cols, vals) = (&cols[r.clone()], &vals[r]);
        softmax_minus_onehot(zi, y[i] as usize, delta);
        if c == 10 {
            let d: &[f32; 10] = (&*delta).try_into().expect("10 classes");
            for (&j, &v) in cols.iter().zip(vals) {
                let (j, v) = (j.at(), v.f32());
                let g: &mut [f32; 10] = (&mut out[j * 10..(j + 1) * 10])
                    .try_into()
                    .expect("10 classes");
                for k in 0..10 {
                    g[k] += v * d[k];
                }
            }
        } else {
            for (&j, &v) in cols.iter().zip(vals) {
                let (j, v) = (j.at(), v.f32());
                for (g, d) in out[j * c..(j + 1) * c].iter_mut().zip(delta.iter()) {
                    *g += v * d;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
