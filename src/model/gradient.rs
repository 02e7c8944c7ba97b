//! Gradient models: what the wall-clock protocol simulations need from a
//! model. Unlike [`super::Model`], which owns its update rule, a gradient
//! model only evaluates minibatch gradients at *given* parameters (possibly
//! stale ones a worker pulled long ago) and a loss; the parameter server of
//! [`crate::cluster`] applies the updates.
//!
//! Parameters are one flat `f32` vector, so any model (MLR's weight matrix, a
//! CNN's layer tensors laid end to end, a quadratic's coordinates) fits.
//! To add one: implement [`GradientModel`], add a `GradientSpec` variant
//! (and, for a registry model, its arm in `GradientSpec`'s `TryFrom<ModelSpec>`)
//! and an arm in `build_gradient_and_visit`.

use anyhow::Result;
use serde::Serialize;

use super::cnn::gradient::{self as cnn_gradient, CnnGradient};
use super::cnn::{Cnn, CnnConfig};
use super::mlr::gradient::MlrGradient;
use super::mlr::{Mlr, MlrConfig};
use super::quadratic::{NoisyQuadratic, QuadraticConfig};
use super::{CnnSpec, MlrSpec, ModelSpec};
use crate::data::{DataCache, DataOptions, DatasetName};

/// Which minibatch (and noise) one gradient computation uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GradientDraw {
    /// Seed of the run's data order and gradient noise.
    pub(crate) run_seed: u64,
    /// Index of the computation in its run (0, 1, 2, … in start order).
    pub(crate) index: u64,
}

/// Constants of a model whose smoothness, strong convexity and gradient noise
/// are known, so the error floor can be computed (Dutta et al. 2018, §5).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KnownConstants {
    /// L: the gradient is L-Lipschitz.
    pub(crate) l: f64,
    /// c: strong-convexity constant.
    pub(crate) c: f64,
    /// σ²: a one-sample gradient's noise variance E‖g − ∇F‖² (a minibatch of m has σ²/m).
    pub(crate) sigma2: f64,
    /// m: samples per minibatch.
    pub(crate) batch_size: usize,
    /// The Hessian's eigenvalues (for the exact floor of a quadratic; not
    /// written to manifests).
    #[serde(skip)]
    pub(crate) hessian_eigenvalues: Vec<f64>,
}

/// What a gradient model tells the outputs about itself.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GradientInfo {
    /// Short name (`mlr`, `quadratic`, …).
    pub name: &'static str,
    /// Number of parameters (length of the flat vector).
    pub parameters: usize,
    /// What [`GradientModel::loss`] measures.
    pub loss: String,
    /// Samples per minibatch gradient (m).
    pub batch_size: usize,
}

crate::simd::kernel! {
    /// `sum[i] += rate · g[i]` (a multiply, then an add: not fused).
    pub(crate) fn add_scaled, add_scaled_at(sum: &mut [f32], rate: f32, g: &[f32]) = add_scaled_body;
}

#[inline(always)]
fn add_scaled_body(sum: &mut [f32], rate: f32, g: &[f32]) {
    for (s, g) in sum.iter_mut().zip(g) {
        *s += rate * g;
    }
}

/// A model trained by SGD whose gradients can be computed at any parameters.
///
/// Contract: [`GradientModel::gradient`] is a pure function of the
/// parameters and the [`GradientDraw`] (same inputs, same bits), so a
/// simulation is deterministic; [`GradientModel::loss`] is deterministic.
pub trait GradientModel: Send + Sync {
    /// Reusable buffers of one run.
    type Workspace: Send;

    /// Name, size and loss description.
    fn info(&self) -> GradientInfo;
    /// Length of the parameter vector.
    fn dim(&self) -> usize;
    /// The initial parameters w_0 (deterministic).
    fn init_params(&self) -> Vec<f32>;
    /// Fresh buffers.
    fn workspace(&self) -> Self::Workspace;
    /// Writes the minibatch gradient at `params` for `draw` into `out`
    /// (the mean over the minibatch, length [`GradientModel::dim`]).
    fn gradient(
        &self,
        params: &[f32],
        draw: GradientDraw,
        out: &mut [f32],
        ws: &mut Self::Workspace,
    );
    /// [`GradientModel::gradient`], and the loss of the same minibatch at
    /// `params` (the loss whose gradient `out` is): what a worker can report
    /// with its gradient at no extra pass, for a PS that watches the training
    /// loss (the adaptive rule of `crate::cluster::adaptive`). `out` gets
    /// the same bits as from [`GradientModel::gradient`]. Default: the loss of
    /// the error curve at `params` ([`GradientModel::loss`]), exact but as
    /// costly as a loss evaluation; models override it with the minibatch loss.
    fn gradient_and_loss(
        &self,
        params: &[f32],
        draw: GradientDraw,
        out: &mut [f32],
        ws: &mut Self::Workspace,
    ) -> f64 {
        self.gradient(params, draw, out, ws);
        self.loss(params, ws)
    }
    /// Adds `rate · g` to `sum`, entry by entry as `sum[i] + rate · g[i]`,
    /// where g is [`GradientModel::gradient`]'s output for `params` and
    /// `draw`; with `with_loss`, also returns
    /// [`GradientModel::gradient_and_loss`]'s loss. This is how a PS folds a
    /// pushed gradient into its update (`crate::cluster::training`), and a
    /// model may override it to skip the dense intermediate passes; `sum`
    /// must get the same bits as the default. `scratch` has length
    /// [`GradientModel::dim`] and may be left holding anything.
    #[allow(clippy::too_many_arguments)]
    fn add_gradient(
        &self,
        params: &[f32],
        draw: GradientDraw,
        rate: f32,
        sum: &mut [f32],
        scratch: &mut [f32],
        ws: &mut Self::Workspace,
        with_loss: bool,
    ) -> Option<f64> {
        let loss = if with_loss {
            Some(self.gradient_and_loss(params, draw, scratch, ws))
        } else {
            self.gradient(params, draw, scratch, ws);
            None
        };
        add_scaled(sum, rate, scratch);
        loss
    }
    /// The loss of the error curve at `params` (lower is better).
    fn loss(&self, params: &[f32], ws: &mut Self::Workspace) -> f64;
    /// Classification accuracy at `params`, for models that classify
    /// (MLR: on the loss subsample). Default: none.
    fn accuracy(&self, _params: &[f32], _ws: &mut Self::Workspace) -> Option<f64> {
        None
    }
    /// [`GradientModel::loss`] and [`GradientModel::accuracy`] together
    /// (a model may compute both in one pass). Default: one call each.
    fn loss_and_accuracy(&self, params: &[f32], ws: &mut Self::Workspace) -> (f64, Option<f64>) {
        (self.loss(params, ws), self.accuracy(params, ws))
    }
    /// Length of one parameter block (the unit placed on a PS shard, lost and
    /// saved; MLR: a row of the weight matrix). Default: 1 (one coordinate).
    fn block_len(&self) -> usize {
        1
    }
    /// L, c, σ² where they are known (the noisy quadratic). Default: unknown.
    fn known_constants(&self) -> Option<KnownConstants> {
        None
    }
}

/// A gradient model and its hyper-parameters, as a scenario's `[model]` names it.
///
/// Only models with a gradient implementation are representable: the MLR and
/// the CNN carry the same fields as their [`ModelSpec`] variants (so
/// [`GradientSpec::model_spec`] gives the registry spec back, field for field,
/// and a manifest writes the same table), and the noisy quadratic, which has
/// no registry spec, carries its [`QuadraticConfig`]. A [`ModelSpec`] becomes
/// a `GradientSpec` through [`TryFrom`], which hands back the kinds without
/// a gradient implementation (QP, LDA, MF).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GradientSpec {
    /// Multinomial logistic regression ([`MlrGradient`]).
    Mlr(MlrSpec),
    /// The LeNet-5-style CNN ([`CnnGradient`]). The PS applies SGD with
    /// `learning_rate`; the Adam constants and `metric` are kept so the spec
    /// round-trips to its registry form.
    Cnn(CnnSpec),
    /// The noisy quadratic ([`NoisyQuadratic`]).
    Quadratic(QuadraticConfig),
}

impl TryFrom<ModelSpec> for GradientSpec {
    /// The spec itself, when its model has no gradient implementation.
    type Error = ModelSpec;

    fn try_from(spec: ModelSpec) -> Result<GradientSpec, ModelSpec> {
        match spec {
            ModelSpec::Mlr(m) => Ok(GradientSpec::Mlr(m)),
            ModelSpec::Cnn(c) => Ok(GradientSpec::Cnn(c)),
            other @ (ModelSpec::Qp { .. } | ModelSpec::Lda { .. } | ModelSpec::Mf { .. }) => {
                Err(other)
            }
        }
    }
}

impl Serialize for GradientSpec {
    /// The MLR and the CNN as their [`ModelSpec`] (same table, same `kind`);
    /// the quadratic as its config with `kind = "quadratic"`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// The quadratic's table with its `kind`, as a scenario writes it.
        #[derive(Serialize)]
        struct Tagged<'a> {
            kind: &'static str,
            #[serde(flatten)]
            config: &'a QuadraticConfig,
        }
        match self {
            GradientSpec::Mlr(_) | GradientSpec::Cnn(_) => self.model_spec().serialize(s),
            GradientSpec::Quadratic(config) => Tagged {
                kind: "quadratic",
                config,
            }
            .serialize(s),
        }
    }
}

impl GradientSpec {
    /// The model's short name.
    #[cfg(test)]
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            GradientSpec::Mlr(_) => "mlr",
            GradientSpec::Cnn(_) => "cnn",
            GradientSpec::Quadratic(_) => "quadratic",
        }
    }

    /// The learning rate η of the PS update.
    pub(crate) fn learning_rate(&self) -> f64 {
        match self {
            GradientSpec::Mlr(MlrSpec { learning_rate, .. })
            | GradientSpec::Cnn(CnnSpec { learning_rate, .. }) => *learning_rate,
            GradientSpec::Quadratic(q) => q.learning_rate,
        }
    }

    /// The registry spec of the same model (MLR, CNN); `None` for the
    /// quadratic, which is not in the registry.
    pub(crate) fn model_spec(&self) -> Option<ModelSpec> {
        match *self {
            GradientSpec::Mlr(m) => Some(ModelSpec::Mlr(m)),
            GradientSpec::Cnn(c) => Some(ModelSpec::Cnn(c)),
            GradientSpec::Quadratic(_) => None,
        }
    }

    /// The dataset the model trains on; `None` for the quadratic.
    pub(crate) fn dataset(&self) -> Option<DatasetName> {
        match self {
            GradientSpec::Mlr(MlrSpec { dataset, .. })
            | GradientSpec::Cnn(CnnSpec { dataset, .. }) => Some(*dataset),
            GradientSpec::Quadratic(_) => None,
        }
    }
}

/// Where a gradient model's data came from (for the manifest and CSV).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GradientData {
    /// Dataset name (`none` for the quadratic).
    pub(crate) dataset: String,
    /// `real`, `synthetic`, or `none`.
    pub(crate) label: &'static str,
    /// Provenance details for the manifest.
    pub(crate) details: serde_json::Value,
}

/// Code that runs generically over any gradient model.
pub(crate) trait GradientVisitor {
    /// What the visit returns.
    type Output;
    /// Called with the live model.
    fn visit<M: GradientModel>(self, model: &M, data: &GradientData) -> Self::Output;
}

/// Builds the gradient model of `spec` and hands it to `visitor`. The MLR's
/// and the CNN's losses are evaluated on a fixed subsample of `loss_rows`
/// training examples drawn from `seed`.
pub(crate) fn build_gradient_and_visit<V: GradientVisitor>(
    spec: &GradientSpec,
    cache: &DataCache,
    opts: &DataOptions,
    seed: u64,
    loss_rows: usize,
    visitor: V,
) -> Result<V::Output> {
    match spec {
        GradientSpec::Quadratic(cfg) => {
            let model = NoisyQuadratic::new(cfg);
            let data = GradientData {
                dataset: "none".into(),
                label: "none",
                details: serde_json::json!({ "dataset": "none" }),
            };
            Ok(visitor.visit(&model, &data))
        }
        GradientSpec::Mlr(MlrSpec {
            dataset,
            batch_size,
            learning_rate,
        }) => {
            let d = cache.classification(*dataset, opts, seed)?;
            let data = GradientData {
                dataset: dataset.to_string(),
                label: d.provenance.label(),
                details: serde_json::json!({
                    "dataset": dataset,
                    "provenance": d.provenance,
                    "rows": d.rows,
                }),
            };
            // The per-worker minibatch m is used as given (not scaled with a
            // stand-in's size): SGD noise depends on m, not on m/n.
            let mlr = Mlr::new(
                d,
                &MlrConfig {
                    batch_size: *batch_size,
                    learning_rate: *learning_rate,
                },
            );
            let model = MlrGradient::new(mlr, loss_rows, seed);
            Ok(visitor.visit(&model, &data))
        }
        GradientSpec::Cnn(spec) => {
            let dataset = &spec.dataset;
            let d = cache.classification(*dataset, opts, seed)?;
            let data = GradientData {
                dataset: dataset.to_string(),
                label: d.provenance.label(),
                details: serde_json::json!({
                    "dataset": dataset,
                    "provenance": d.provenance,
                    "rows": d.rows,
                }),
            };
            // The minibatch is used as given, as for the MLR; the PS applies
            // SGD with `learning_rate` (see cnn::gradient).
            let cnn = Cnn::new(
                d,
                &CnnConfig {
                    spec: CnnSpec {
                        metric: cnn_gradient::loss_metric(loss_rows),
                        ..*spec
                    },
                    seed,
                },
            )?;
            let model = CnnGradient::new(cnn)?;
            Ok(visitor.visit(&model, &data))
        }
    }
}
