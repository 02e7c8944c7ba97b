//! Multinomial logistic regression as a [`GradientModel`], for the
//! wall-clock protocol simulations.
//!
//! The parameters are MLR's M×N weight matrix (row-major, as in
//! [`super::mlr`]), initialised to zero. Gradient computation `index` of a run
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

use super::gradient::{GradientDraw, GradientInfo, GradientModel};
use super::mlr::{Mlr, MlrWorkspace};
use super::{IterCtx, Model};
use crate::rng::{Purpose, stream};

/// MLR with a fixed loss-evaluation subsample.
pub struct MlrGradient {
    mlr: Mlr,
    eval_rows: Vec<u32>,
    /// Row i's non-zero features are `cols[starts[i]..starts[i+1]]` with values `vals[..]`.
    starts: Vec<usize>,
    cols: Vec<u32>,
    vals: Vec<f32>,
}

/// Buffers of one run.
pub struct MlrGradientWorkspace {
    /// MLR's own buffers (its epoch permutation is what we need).
    inner: MlrWorkspace,
    /// Logits of one example.
    z: Vec<f32>,
    /// softmax(z) − e_y of one example.
    delta: Vec<f32>,
}

impl MlrGradient {
    /// Wraps `mlr`; the loss uses `loss_rows` examples (all if fewer) drawn from `seed`.
    pub fn new(mlr: Mlr, loss_rows: usize, seed: u64) -> MlrGradient {
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
        MlrGradient {
            mlr,
            eval_rows: all,
            starts,
            cols,
            vals,
        }
    }

    /// Non-zero features of example `i`: (column indices, values).
    #[inline]
    fn sparse_row(&self, i: usize) -> (&[u32], &[f32]) {
        let r = self.starts[i]..self.starts[i + 1];
        (&self.cols[r.clone()], &self.vals[r])
    }

    /// The examples the loss is evaluated on.
    pub fn eval_rows(&self) -> &[u32] {
        &self.eval_rows
    }

    /// Logits of example `i` under `w`, over its non-zero features.
    #[inline]
    fn forward_row(&self, w: &[f32], i: usize, z: &mut [f32]) {
        let c = z.len();
        z.fill(0.0);
        let (cols, vals) = self.sparse_row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let j = j as usize;
            for (o, wv) in z.iter_mut().zip(&w[j * c..(j + 1) * c]) {
                *o += v * wv;
            }
        }
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
        }
    }

    fn gradient(
        &self,
        params: &[f32],
        draw: GradientDraw,
        out: &mut [f32],
        ws: &mut MlrGradientWorkspace,
    ) {
        let data = self.mlr.data();
        let c = data.classes;
        out.fill(0.0);
        let ctx = IterCtx {
            iteration: draw.index as usize,
            run_seed: draw.run_seed,
        };
        let MlrGradientWorkspace { inner, z, delta } = ws;
        let rows = self.mlr.batch_rows(ctx, inner);
        for &i in rows {
            let i = i as usize;
            self.forward_row(params, i, z);
            softmax_minus_onehot(z, data.y[i] as usize, delta);
            let (cols, vals) = self.sparse_row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                let j = j as usize;
                for (g, d) in out[j * c..(j + 1) * c].iter_mut().zip(delta.iter()) {
                    *g += v * d;
                }
            }
        }
        let scale = 1.0 / rows.len() as f32;
        for g in out.iter_mut() {
            *g *= scale;
        }
    }

    fn loss(&self, params: &[f32], ws: &mut MlrGradientWorkspace) -> f64 {
        let data = self.mlr.data();
        let mut sum = 0.0;
        for &i in &self.eval_rows {
            let i = i as usize;
            self.forward_row(params, i, &mut ws.z);
            sum += cross_entropy(&ws.z, data.y[i] as usize);
        }
        sum / self.eval_rows.len() as f64
    }

    fn accuracy(&self, params: &[f32], ws: &mut MlrGradientWorkspace) -> Option<f64> {
        let data = self.mlr.data();
        let mut right = 0usize;
        for &i in &self.eval_rows {
            let i = i as usize;
            self.forward_row(params, i, &mut ws.z);
            // Ties go to the lowest class.
            let mut best = 0;
            for (c, &v) in ws.z.iter().enumerate() {
                if v > ws.z[best] {
                    best = c;
                }
            }
            right += usize::from(best == data.y[i] as usize);
        }
        Some(right as f64 / self.eval_rows.len() as f64)
    }

    fn loss_and_accuracy(
        &self,
        params: &[f32],
        ws: &mut MlrGradientWorkspace,
    ) -> (f64, Option<f64>) {
        let data = self.mlr.data();
        let mut sum = 0.0;
        let mut right = 0usize;
        for &i in &self.eval_rows {
            let i = i as usize;
            self.forward_row(params, i, &mut ws.z);
            sum += cross_entropy(&ws.z, data.y[i] as usize);
            let mut best = 0;
            for (c, &v) in ws.z.iter().enumerate() {
                if v > ws.z[best] {
                    best = c;
                }
            }
            right += usize::from(best == data.y[i] as usize);
        }
        let n = self.eval_rows.len() as f64;
        (sum / n, Some(right as f64 / n))
    }

    fn block_len(&self) -> usize {
        self.mlr.data().classes
    }
}

/// Cross-entropy of one example from its logits: log Σ exp(z) − z_y.
#[inline]
fn cross_entropy(z: &[f32], label: usize) -> f64 {
    let max = z.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let sum: f64 = z.iter().map(|&v| ((v as f64) - max).exp()).sum();
    max + sum.ln() - z[label] as f64
}

/// Writes softmax(z) − e_label into `out`.
#[inline]
fn softmax_minus_onehot(z: &[f32], label: usize, out: &mut [f32]) {
    let max = z.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let mut sum = 0f32;
    for (o, &v) in out.iter_mut().zip(z) {
        *o = (v - max).exp();
        sum += *o;
    }
    let inv = 1.0 / sum;
    for o in out.iter_mut() {
        *o *= inv;
    }
    out[label] -= 1.0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic;
    use crate::model::mlr::MlrConfig;
    use std::sync::Arc;

    fn small(batch: usize) -> MlrGradient {
        let data = Arc::new(synthetic::mnist_like(11, 0.02));
        MlrGradient::new(
            Mlr::new(
                data,
                &MlrConfig {
                    batch_size: batch,
                    learning_rate: 1e-5,
                },
            ),
            500,
            3,
        )
    }

    #[test]
    fn accuracy_counts_argmax_hits_and_matches_the_combined_pass() {
        let m = small(100);
        let mut ws = m.workspace();
        // All-zero weights: every logit ties, class 0 is predicted.
        let w0 = m.init_params();
        let zeros = m
            .eval_rows()
            .iter()
            .filter(|&&i| m.mlr.data().y[i as usize] == 0)
            .count() as f64;
        let acc = m.accuracy(&w0, &mut ws).unwrap();
        assert_eq!(acc, zeros / m.eval_rows().len() as f64);
        // After some training the one-pass loss and accuracy equal the separate ones.
        let mut w = w0.clone();
        let mut g = vec![0f32; m.dim()];
        for k in 0..20 {
            let draw = GradientDraw {
                run_seed: 1,
                index: k,
            };
            m.gradient(&w, draw, &mut g, &mut ws);
            for (x, d) in w.iter_mut().zip(&g) {
                *x -= 1e-5 * d;
            }
        }
        let (l, a) = m.loss_and_accuracy(&w, &mut ws);
        assert_eq!(l, m.loss(&w, &mut ws));
        assert_eq!(a, m.accuracy(&w, &mut ws));
        assert!(a.unwrap() > acc, "training improves accuracy");
        assert_eq!(m.block_len(), m.mlr.data().classes);
    }

    #[test]
    fn gradient_matches_mlr_step() {
        // One SGD step with this gradient equals MLR's own step on the same minibatch.
        let m = small(100);
        let mut ws = m.workspace();
        let mut g = vec![0f32; m.dim()];
        let w0 = m.init_params();
        let draw = GradientDraw {
            run_seed: 9,
            index: 4,
        };
        m.gradient(&w0, draw, &mut g, &mut ws);
        let mut state = m.mlr.init();
        let mut mws = m.mlr.workspace();
        m.mlr.step(
            &mut state,
            IterCtx {
                iteration: 4,
                run_seed: 9,
            },
            &mut mws,
        );
        let max = state
            .w
            .iter()
            .zip(&g)
            .map(|(s, gi)| (s - (-1e-5 * gi)).abs())
            .fold(0f32, f32::max);
        assert!(max < 1e-6, "max difference {max}");
        assert!(g.iter().any(|v| *v != 0.0));
    }

    #[test]
    fn sgd_lowers_the_subsample_loss() {
        let m = small(50);
        let mut ws = m.workspace();
        let mut w = m.init_params();
        let l0 = m.loss(&w, &mut ws);
        assert!((l0 - 10f64.ln()).abs() < 1e-6);
        let mut g = vec![0f32; m.dim()];
        for i in 0..100 {
            m.gradient(
                &w,
                GradientDraw {
                    run_seed: 1,
                    index: i,
                },
                &mut g,
                &mut ws,
            );
            for (wi, gi) in w.iter_mut().zip(&g) {
                *wi -= 1e-5 * gi;
            }
        }
        let l1 = m.loss(&w, &mut ws);
        assert!(l1 < 0.5 * l0, "{l0} -> {l1}");
        assert_eq!(m.eval_rows().len(), 500);
    }
}
