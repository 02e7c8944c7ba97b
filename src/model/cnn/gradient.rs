//! The CNN ([`super`]) as a [`GradientModel`], for the wall-clock
//! protocol simulations (Dutta et al. 2018).
//!
//! The parameters are the CNN's flat vector (ten tensors end to end, layout
//! in [`super::net`]), initialised as in the SCAR scenarios (PyTorch's
//! default U(±1/√fan_in), from the scenario seed). Gradient computation
//! `index` of a run uses minibatch `index` of the run's data order (the
//! CNN's epoch permutations, as [`crate::model::mlr::gradient`] does for the MLR);
//! the gradient is that of the minibatch's mean cross-entropy at the
//! parameters the worker pulled. The loss of the error curve is the mean
//! cross-entropy over a fixed subsample of the training set (the CNN's
//! `subset` metric with `[training] loss_subsample` images, drawn once from
//! the scenario seed).
//!
//! The update is the protocols' SGD step (Dutta et al. 2018, eq. 2, applied
//! by [`crate::cluster::training`]), not Adam: Adam's per-coordinate
//! moments have no agreed meaning for gradients of mixed staleness, and the
//! paper analyses SGD. So in a protocol scenario the CNN's `learning_rate`
//! is the SGD step η, and Adam's `beta1`, `beta2`, `epsilon` and the SCAR
//! knobs (`partitioning`, `shards`, `metric`, `window`, `eval_examples`) are
//! rejected with a clear error (`scenario::models`).

use anyhow::{Result, bail};

use super::{Cnn, CnnMetric, CnnWorkspace};
use crate::model::gradient::{GradientDraw, GradientInfo, GradientModel};
use crate::model::{IterCtx, Model};

/// The CNN with a fixed loss-evaluation subsample.
pub(crate) struct CnnGradient {
    cnn: Cnn,
}

impl CnnGradient {
    /// Wraps `cnn`, which must use the `subset` metric: its evaluation
    /// subset is the loss subsample.
    pub(crate) fn new(cnn: Cnn) -> Result<CnnGradient> {
        if cnn.eval_examples() == 0 {
            bail!("the CNN's gradient model needs the `subset` metric (its loss subsample)");
        }
        Ok(CnnGradient { cnn })
    }
}

/// The metric a [`CnnGradient`]'s CNN is built with: the mean cross-entropy
/// over `loss_rows` training images.
pub(crate) fn loss_metric(loss_rows: usize) -> CnnMetric {
    CnnMetric::Subset {
        examples: loss_rows.max(1),
    }
}

impl GradientModel for CnnGradient {
    type Workspace = CnnWorkspace;

    fn info(&self) -> GradientInfo {
        GradientInfo {
            name: "cnn",
            parameters: self.cnn.arch().parameters(),
            loss: format!(
                "mean cross-entropy over a fixed subsample of {} training images",
                self.cnn.eval_examples()
            ),
            batch_size: self.cnn.batch_size(),
        }
    }

    fn dim(&self) -> usize {
        self.cnn.arch().parameters()
    }

    fn init_params(&self) -> Vec<f32> {
        self.cnn.init().w
    }

    fn workspace(&self) -> CnnWorkspace {
        self.cnn.workspace()
    }

    fn gradient(&self, params: &[f32], draw: GradientDraw, out: &mut [f32], ws: &mut CnnWorkspace) {
        self.cnn.minibatch_gradient(
            params,
            IterCtx {
                iteration: draw.index as usize,
                run_seed: draw.run_seed,
            },
            ws,
            out,
        );
    }

    /// The gradient, and the mean cross-entropy of its minibatch (from the
    /// same forward pass).
    fn gradient_and_loss(
        &self,
        params: &[f32],
        draw: GradientDraw,
        out: &mut [f32],
        ws: &mut CnnWorkspace,
    ) -> f64 {
        self.cnn.minibatch_gradient(
            params,
            IterCtx {
                iteration: draw.index as usize,
                run_seed: draw.run_seed,
            },
            ws,
            out,
        )
    }

    fn loss(&self, params: &[f32], ws: &mut CnnWorkspace) -> f64 {
        self.cnn.subset_loss(params, ws)
    }

    fn accuracy(&self, params: &[f32], ws: &mut CnnWorkspace) -> Option<f64> {
        Some(self.cnn.subset_loss_and_accuracy(params, ws).1)
    }

    fn loss_and_accuracy(&self, params: &[f32], ws: &mut CnnWorkspace) -> (f64, Option<f64>) {
        let (loss, accuracy) = self.cnn.subset_loss_and_accuracy(params, ws);
        (loss, Some(accuracy))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::data::synthetic;
    use crate::model::CnnSpec;
    use crate::model::cnn::{CnnConfig, Partitioning};

    /// A small by-layer CNN on the MNIST-like stand-in with `metric`.
    fn cnn(metric: CnnMetric) -> Cnn {
        let data = Arc::new(synthetic::mnist_like(11, 0.02));
        let spec = CnnSpec::mnist(Partitioning::ByLayer, 32, 0.05, metric);
        Cnn::new(data, &CnnConfig { spec, seed: 4 }).unwrap()
    }

    fn small(loss_rows: usize) -> CnnGradient {
        CnnGradient::new(cnn(loss_metric(loss_rows))).unwrap()
    }

    #[test]
    fn gradient_is_the_minibatch_gradient_and_deterministic() {
        let m = small(100);
        let mut ws = m.workspace();
        let w = m.init_params();
        let draw = GradientDraw {
            run_seed: 7,
            index: 3,
        };
        let mut g = vec![0f32; m.dim()];
        m.gradient(&w, draw, &mut g, &mut ws);
        // Same draw, fresh workspace: same bits.
        let mut g2 = vec![1f32; m.dim()];
        m.gradient(&w, draw, &mut g2, &mut m.workspace());
        assert_eq!(g, g2);
        // It is the gradient the SCAR model's step feeds to Adam: after one
        // Adam step from zero moments every coordinate with a non-zero
        // gradient moves by ≈ α against the gradient's sign.
        let mut state = m.cnn.init();
        let mut mws = m.cnn.workspace();
        m.cnn.step(
            &mut state,
            IterCtx {
                iteration: 3,
                run_seed: 7,
            },
            &mut mws,
        );
        let mut checked = 0;
        for ((a, b), gi) in state.w.iter().zip(&w).zip(&g) {
            if gi.abs() > 1e-4 {
                let moved = (a - b) as f64;
                assert!(
                    (moved + 0.05 * gi.signum() as f64).abs() < 1e-3,
                    "moved {moved} for gradient {gi}"
                );
                checked += 1;
            }
        }
        assert!(checked > 1000, "only {checked} coordinates checked");
        // Another minibatch gives another gradient.
        m.gradient(
            &w,
            GradientDraw {
                run_seed: 7,
                index: 4,
            },
            &mut g2,
            &mut ws,
        );
        assert_ne!(g, g2);
    }

    #[test]
    fn sgd_with_these_gradients_lowers_the_subsample_loss() {
        let m = small(200);
        let mut ws = m.workspace();
        let mut w = m.init_params();
        let l0 = m.loss(&w, &mut ws);
        // PyTorch-default initialisation: close to the uniform prediction.
        assert!((l0 - 10f64.ln()).abs() < 0.1, "{l0}");
        let mut g = vec![0f32; m.dim()];
        for i in 0..150 {
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
                *wi -= 0.1 * gi;
            }
        }
        let l1 = m.loss(&w, &mut ws);
        assert!(l1 < 0.7 * l0, "{l0} -> {l1}");
        // Accuracy on the same subsample: from one forward pass, the loss
        // identical to `loss`, and well above chance after training.
        let (l2, acc) = m.loss_and_accuracy(&w, &mut ws);
        assert_eq!(l2, l1);
        let acc = acc.expect("the CNN classifies");
        assert_eq!(m.accuracy(&w, &mut ws), Some(acc));
        assert!(acc > 0.3 && acc <= 1.0, "{acc}");
        let (_, acc0) = m.loss_and_accuracy(&m.init_params(), &mut ws);
        assert!(acc0.unwrap() < acc, "{acc0:?} -> {acc}");
        assert_eq!(m.info().parameters, 44_426);
        assert!(m.info().loss.contains("200 training images"));
    }

    #[test]
    fn running_mean_cnn_is_refused() {
        assert!(CnnGradient::new(cnn(CnnMetric::RunningMean { window: 5 })).is_err());
    }
}
