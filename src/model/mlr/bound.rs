//! Certified lower bounds on MLR's convergence metric, so that most
//! iterations of a trial skip the full-data loss (the skipping is exact:
//! a run converges at exactly the iteration the brute-force check at every
//! iteration finds).
//!
//! # The bound
//!
//! The metric is the cross-entropy summed over the training set,
//! L(W) = Σ_i ℓ_i(W), and each ℓ_i is convex in W (log-sum-exp of linear
//! functions minus a linear function). For any point W_j and set of rows B,
//! convexity gives the global under-estimate
//!
//! L_B(W) ≥ L_B(W_j) + ⟨∇L_B(W_j), W − W_j⟩  for every W.
//!
//! SGD computes exactly these quantities at every iteration k for its
//! minibatch B_k: the batch loss at W_k (the forward pass) and the batch
//! gradient X_Bᵀ(P − Y) (the backward pass). The minibatches of one epoch
//! partition the rows when the batch size divides the row count (MNIST:
//! 6 × 10,000), so summing the under-estimates of one epoch's batches bounds
//! the whole metric at any W:
//!
//! L(W) ≥ C_e + ⟨G_e, W⟩,  C_e = Σ_j [L_{B_j}(W_j) − ⟨g_j, W_j⟩],  G_e = Σ_j g_j.
//!
//! A state carries (C_e, G_e) of its last complete epoch and of the epoch
//! in progress ([`Bound`]); one dot product then certifies "not converged
//! yet" whenever the bound, less the margins below, exceeds the criterion.
//! The anchors stay valid after a failure and recovery: the bound holds for
//! every W, so a restored state only makes it less tight.
//!
//! # Margins for rounding (all rigorous, u = 2⁻²⁴)
//!
//! The engine compares the *computed* metric M̂ with the criterion, so the
//! bound is made to hold for M̂, not only for the real L:
//! - logits: a row's logit is a chain of n_i fused multiply-adds, so
//!   |ẑ − z| ≤ γ_{n_i} Σ_f |x_if||w_fc| ≤ γ_{n_i} Σ_f |x_if| ‖W_f‖∞
//!   (γ_n = nu/(1 − nu)). Convexity is applied to ℓ as a function of the
//!   computed logits, whose error enters twice (anchor and target), each
//!   weighted by Σ_c |∂ℓ/∂z_c| ≤ 2: per-feature weights
//!   Σ_i 2γ_{n_i}|x_if| times ‖W_f‖∞ ([`Weights`], [`BatchWeights`]);
//! - loss of a row from its logits (portable `exp_f32` within 2·10⁻⁶,
//!   ten-term f32 sums, `ln_f64`, f64 adds): at most [`ROW_LOSS_ERROR`];
//! - softmax deltas: Σ_c |d̂_c − d_c| ≤ [`DELTA_ERROR`] per row, times the
//!   logit change Σ_f |x_if| max_c |W − W_j|_fc;
//! - the gradient product: each element passes through at most m roundings
//!   (`BlockCsc::accumulation_terms`), so |ĝ − X_Bᵀ D̂| ≤ γ_m Σ_i |x_if||d̂_ic|,
//!   and Σ_c |d̂_ic| ≤ 2 + DELTA_ERROR;
//! - the f64 arithmetic of the bound itself and of the metric's sum:
//!   a relative slack of 10⁻¹⁰ on the magnitudes involved.
//!
//! The distance terms |W − W_j| are bounded through the epoch's first anchor
//! W_ref: |W − W_j| ≤ |W − W_ref| + |W_ref − W_j|, so a state keeps only W_ref.
//!
//! The anchors' margins are per-feature weights of the batch's rows times a
//! per-feature magnitude of W_j (‖W_j,f‖∞, ‖W_j,f − W_ref,f‖∞). The batches
//! of an epoch are disjoint sets of rows and the weights are sums of
//! non-negative per-row terms, so Σ_j ew_{B_j}[f]·m_j[f] ≤ ew_all[f]·max_j
//! m_j[f]: an epoch keeps the per-feature maxima of its anchors and charges
//! them the weights over all rows ([`Weights::all`]), computed once per
//! dataset. No minibatch needs weights of its own (their cost was a pass
//! over the batch's rows per minibatch), and the margin is looser only by
//! how much W moves within one epoch.

use std::sync::Arc;

use super::super::kernels::Csr;

/// Unit roundoff of f32.
const U32: f64 = 1.0 / 16_777_216.0;
/// Bound on |ℓ̂_i − ℓ_i(ẑ_i)|: the computed loss of one row against the exact
/// cross-entropy of its computed logits (exp_f32 relative error ≤ 2·10⁻⁶,
/// the f32 sum of the exponentials, the argument rounding weighted by the
/// softmax (≤ u·classes/e), ln_f64 and the f64 additions).
pub(crate) const ROW_LOSS_ERROR: f64 = 5e-6;
/// Bound on Σ_c |d̂_c − (p_c − [c = y])| for one row (derived as ≈ 6.2·10⁻⁶).
pub(crate) const DELTA_ERROR: f64 = 1e-5;
/// Relative slack for the f64 arithmetic of the bound and of the metric's sum.
const F64_SLACK: f64 = 1e-10;

/// γ_n = n·u/(1 − n·u) for f32.
pub(crate) fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U32;
    nu / (1.0 - nu)
}

/// Per-feature weights of the margins over a set of rows:
/// `ew[f] = Σ_i (2γ_{n_i} + 2⁻⁵⁰)|x_if|` (logit rounding, with room for the
/// f64 additions of a row's loss) and `colabs[f] = Σ_i |x_if|`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct BatchWeights {
    /// Logit-rounding weight of ‖W_f‖∞.
    pub(crate) ew: Vec<f64>,
    /// Σ_i |x_if|.
    pub(crate) colabs: Vec<f64>,
    /// Number of rows.
    pub(crate) rows: usize,
}

impl BatchWeights {
    /// The weights of `rows` of `x`.
    pub(crate) fn of(x: &Csr, rows: impl Iterator<Item = usize>) -> BatchWeights {
        let mut b = BatchWeights {
            ew: vec![0.0; x.cols],
            colabs: vec![0.0; x.cols],
            rows: 0,
        };
        for r in rows {
            let (cols, vals) = x.row(r);
            let e = 2.0 * gamma(cols.len()) + 2f64.powi(-50);
            for (&j, &v) in cols.iter().zip(vals) {
                let a = (v as f64).abs();
                b.ew[j as usize] += e * a;
                b.colabs[j as usize] += a;
            }
            b.rows += 1;
        }
        b
    }
}

/// What certification needs to know about the data: how epochs split it and
/// the margin weights over all rows. `None` from [`Weights::new`] when the
/// minibatches of an epoch do not cover every row (then nothing is skipped).
#[derive(Clone, Debug)]
pub(crate) struct Weights {
    /// Minibatches per epoch.
    pub(crate) per_epoch: usize,
    /// Classes (columns of W).
    pub(crate) classes: usize,
    /// Weights over all rows.
    pub(crate) all: BatchWeights,
}

impl Weights {
    /// The weights of `x` for minibatches of `batch` rows, or `None` when the
    /// batches of an epoch leave rows out.
    pub(crate) fn new(x: &Csr, batch: usize, classes: usize) -> Option<Weights> {
        if batch == 0 || !x.rows.is_multiple_of(batch) {
            return None;
        }
        Some(Weights {
            per_epoch: x.rows / batch,
            classes,
            all: BatchWeights::of(x, 0..x.rows),
        })
    }

    /// Σ_f ‖W_f‖∞ ew[f] + rows · ROW_LOSS_ERROR: the target's share of the margin.
    fn target_margin(&self, w: &[f32]) -> f64 {
        let c = self.classes;
        let mut s = self.all.rows as f64 * ROW_LOSS_ERROR;
        for (row, &e) in w.chunks_exact(c).zip(&self.all.ew) {
            s += e * max_abs(row);
        }
        s
    }
}

/// The sums of one epoch's anchors (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EpochSum {
    /// The epoch.
    epoch: usize,
    /// Anchors recorded (batches 0..done of the epoch).
    done: usize,
    /// C_e = Σ_j [L̂_j − ⟨ĝ_j, W_j⟩].
    c: f64,
    /// G_e = Σ_j ĝ_j, row-major features × classes.
    g: Vec<f64>,
    /// W at the epoch's first anchor.
    w_ref: Vec<f32>,
    /// Per feature f: max over the anchors j of ‖W_j,f‖∞.
    max_w: Vec<f64>,
    /// Per feature f: max over the anchors j of ‖W_j,f − W_ref,f‖∞.
    max_drift: Vec<f64>,
    /// Rows of the anchors' batches.
    rows: usize,
    /// The anchors' share of the margin, including the |W_ref − W_j| parts:
    /// rows·ROW_LOSS_ERROR + Σ_f (ew_all[f]·max_w[f] + κ·colabs_all[f]·max_drift[f]).
    fixed: f64,
    /// The largest coefficient κ = DELTA_ERROR + γ_m(2 + DELTA_ERROR) of the
    /// epoch's batches, applied to the logit change.
    kappa: f64,
    /// Magnitudes for the f64 slack: Σ_j (|L̂_j| + Σ|ĝ_j||W_j|).
    abs: f64,
}

/// A state's lower-bound bookkeeping: run state, not a block (a failure does
/// not lose it and recovery does not restore it; it stays a valid bound).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Bound {
    /// The epoch in progress.
    current: Option<Box<EpochSum>>,
    /// The last complete epoch (shared by the states forked from one run).
    last: Option<Arc<EpochSum>>,
}

/// One anchor: what the SGD step of iteration k computed at W_k.
pub(crate) struct Anchor<'a> {
    /// k.
    pub(crate) iteration: usize,
    /// L̂_{B_k}(W_k): the batch's summed computed loss.
    pub(crate) batch_loss: f64,
    /// ĝ_k (features × classes, row-major), before the learning-rate scaling.
    pub(crate) gradient: &'a [f32],
    /// W_k.
    pub(crate) w: &'a [f32],
    /// Rows of the batch B_k.
    pub(crate) rows: usize,
    /// γ of the gradient accumulation (`gamma(accumulation_terms)`).
    pub(crate) gamma_acc: f64,
}

impl Bound {
    /// Adds the anchor of iteration `a.iteration` to the epoch in progress
    /// (starting a new epoch at its first batch); an epoch whose earlier
    /// batches are missing is dropped.
    pub(crate) fn record(&mut self, wts: &Weights, a: &Anchor<'_>) {
        let (e, j) = (a.iteration / wts.per_epoch, a.iteration % wts.per_epoch);
        let c = wts.classes;
        if j == 0 {
            let features = a.w.len() / c;
            self.current = Some(Box::new(EpochSum {
                epoch: e,
                done: 0,
                c: 0.0,
                g: vec![0.0; a.w.len()],
                w_ref: a.w.to_vec(),
                max_w: vec![0.0; features],
                max_drift: vec![0.0; features],
                rows: 0,
                fixed: 0.0,
                kappa: 0.0,
                abs: 0.0,
            }));
        }
        let Some(cur) = self.current.as_mut() else {
            return;
        };
        if cur.epoch != e || cur.done != j {
            self.current = None;
            return;
        }
        let kappa = DELTA_ERROR + a.gamma_acc * (2.0 + DELTA_ERROR);
        let mut dot = 0.0;
        let mut abs = a.batch_loss.abs();
        for ((gs, &g), &w) in cur.g.iter_mut().zip(a.gradient).zip(a.w) {
            let (g, w) = (g as f64, w as f64);
            *gs += g;
            dot += g * w;
            abs += (g * w).abs();
        }
        for (((wf, rf), mw), md) in
            a.w.chunks_exact(c)
                .zip(cur.w_ref.chunks_exact(c))
                .zip(cur.max_w.iter_mut())
                .zip(cur.max_drift.iter_mut())
        {
            *mw = mw.max(max_abs(wf));
            *md = md.max(max_abs_diff(wf, rf));
        }
        cur.c += a.batch_loss - dot;
        cur.rows += a.rows;
        cur.kappa = cur.kappa.max(kappa);
        let mut fixed = cur.rows as f64 * ROW_LOSS_ERROR;
        for (((&mw, &md), &ew), &ca) in cur
            .max_w
            .iter()
            .zip(&cur.max_drift)
            .zip(&wts.all.ew)
            .zip(&wts.all.colabs)
        {
            fixed += ew * mw + cur.kappa * ca * md;
        }
        cur.fixed = fixed;
        cur.abs += abs;
        cur.done += 1;
        if cur.done == wts.per_epoch {
            let done = self.current.take().expect("checked above");
            self.last = Some(Arc::new(*done));
        }
    }

    /// A lower bound on the metric [`super::Mlr`] computes at `w`, the state
    /// of iteration `iteration` (−∞ when there is none yet). `fresh` is the
    /// computed loss of that iteration's own minibatch at `w`, which
    /// completes the epoch in progress when it is the epoch's last batch.
    pub(crate) fn lower_bound(
        &self,
        wts: &Weights,
        iteration: usize,
        w: &[f32],
        fresh: f64,
    ) -> f64 {
        let mut best = f64::NEG_INFINITY;
        let target = || wts.target_margin(w);
        if let Some(last) = &self.last {
            best = best.max(epoch_bound(wts, last, w, 0.0, target()));
        }
        let (e, j) = (iteration / wts.per_epoch, iteration % wts.per_epoch);
        if let Some(cur) = &self.current
            && j + 1 == wts.per_epoch
            && cur.epoch == e
            && cur.done == j
        {
            best = best.max(epoch_bound(wts, cur, w, fresh, target()));
        }
        best
    }
}

/// C_e + ⟨G_e, W⟩ + fresh, less every margin (−∞ if anything is not finite).
fn epoch_bound(wts: &Weights, s: &EpochSum, w: &[f32], fresh: f64, target: f64) -> f64 {
    let c = wts.classes;
    let mut dot = 0.0;
    let mut abs = 0.0;
    for (&g, &x) in s.g.iter().zip(w) {
        let t = g * x as f64;
        dot += t;
        abs += t.abs();
    }
    let mut drift = 0.0;
    for ((wf, rf), &ca) in w
        .chunks_exact(c)
        .zip(s.w_ref.chunks_exact(c))
        .zip(&wts.all.colabs)
    {
        drift += ca * max_abs_diff(wf, rf);
    }
    let value = s.c + dot + fresh;
    let slack =
        F64_SLACK * (s.abs + abs + s.c.abs() + fresh.abs() + value.abs() + s.fixed + target) + 1e-9;
    let lb = value - s.fixed - target - s.kappa * drift - slack;
    if lb.is_finite() {
        lb
    } else {
        f64::NEG_INFINITY
    }
}

fn max_abs(v: &[f32]) -> f64 {
    v.iter().fold(0.0f64, |m, &x| m.max((x as f64).abs()))
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (&x, &y)| m.max((x as f64 - y as f64).abs()))
}
