//! The one place that knows every model: its [`ModelSpec`] (a plain config,
//! read from a scenario's `[model]` table by `scenario::models`), and how a
//! spec becomes a live [`Model`] over its data.
//!
//! To add a model: implement [`Model`], add a variant to [`ModelSpec`], a
//! `parse_<kind>` function with its arm in `ModelSpec::parse`
//! (`src/scenario/models/mod.rs`), and an arm in [`build_and_visit`].

use anyhow::Result;
use serde::Serialize;

use super::Model;
use super::cnn::{Cnn, CnnConfig, CnnMetric, Partitioning};
use super::lda::{Lda, LdaConfig};
use super::mf::{Mf, MfConfig};
use super::mlr::{Mlr, MlrConfig};
use super::quadratic::qp::{self, Qp, QpConfig};
use crate::data::{DataCache, DataOptions, DatasetName, Provenance, corpus, ratings, synthetic};

/// Multinomial logistic regression by minibatch SGD ([`Mlr`]): the fields
/// of a scenario's `[model]` with `kind = "mlr"`, held by both registries
/// ([`ModelSpec::Mlr`], and `GradientSpec::Mlr` for the wall-clock kinds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MlrSpec {
    /// `mnist` or `covtype`.
    pub(crate) dataset: DatasetName,
    /// Minibatch size b. The iteration-domain kinds scale it with a
    /// stand-in's size; the wall-clock kinds use it as given (SGD noise
    /// depends on b, not on b/n).
    pub(crate) batch_size: usize,
    /// Learning rate η on the batch-mean gradient (the PS's step in the
    /// wall-clock kinds).
    pub(crate) learning_rate: f64,
}

/// The LeNet-5-style CNN ([`Cnn`]): the fields of a scenario's `[model]`
/// with `kind = "cnn"`, held by both registries ([`ModelSpec::Cnn`], and
/// `GradientSpec::Cnn` for the wall-clock kinds) and, with a seed, by the
/// model's own [`CnnConfig`](crate::model::cnn::CnnConfig).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CnnSpec {
    /// `mnist`.
    pub dataset: DatasetName,
    /// By-layer or by-shard blocks.
    pub partitioning: Partitioning,
    /// Minibatch size b (not scaled for stand-ins).
    pub batch_size: usize,
    /// Adam step size α; in the wall-clock kinds the PS's plain SGD step η.
    pub learning_rate: f64,
    /// Adam β1.
    pub beta1: f64,
    /// Adam β2.
    pub beta2: f64,
    /// Adam ε.
    pub epsilon: f64,
    /// The convergence metric (the wall-clock kinds evaluate the loss on
    /// their own subsample instead).
    pub metric: CnnMetric,
}

impl CnnSpec {
    /// Adam's β1 in SCAR Appendix D (Kingma & Ba's default): a `cnn`
    /// model's default.
    pub const ADAM_BETA1: f64 = 0.9;
    /// Adam's β2 in SCAR Appendix D: a `cnn` model's default.
    pub const ADAM_BETA2: f64 = 0.999;
    /// Adam's ε in SCAR Appendix D: a `cnn` model's default.
    pub const ADAM_EPSILON: f64 = 1e-8;

    /// The CNN on MNIST with Appendix D's Adam moments ([`Self::ADAM_BETA1`],
    /// [`Self::ADAM_BETA2`], [`Self::ADAM_EPSILON`]) and the rest as given.
    pub fn mnist(
        partitioning: Partitioning,
        batch_size: usize,
        learning_rate: f64,
        metric: CnnMetric,
    ) -> CnnSpec {
        CnnSpec {
            dataset: DatasetName::Mnist,
            partitioning,
            batch_size,
            learning_rate,
            beta1: Self::ADAM_BETA1,
            beta2: Self::ADAM_BETA2,
            epsilon: Self::ADAM_EPSILON,
            metric,
        }
    }
}

/// A model and its hyper-parameters, as a scenario names them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ModelSpec {
    /// Multinomial logistic regression by minibatch SGD ([`Mlr`]).
    Mlr(MlrSpec),
    /// Gradient descent on the 4-D quadratic program of `qp` (SCAR Figure 3).
    Qp {
        /// Step size α (0 < α < 2/8).
        step_size: f64,
        /// Starting point x(0).
        x0: [f64; qp::DIM],
    },
    /// LeNet-5-style CNN trained by Adam ([`Cnn`]).
    Cnn(CnnSpec),
    /// Latent Dirichlet allocation by collapsed Gibbs sampling ([`Lda`]).
    Lda {
        /// `20news` or `reuters`.
        dataset: DatasetName,
        /// Number of topics K.
        topics: usize,
        /// Symmetric Dirichlet prior on the doc-topic distributions.
        alpha: f64,
        /// Symmetric Dirichlet prior on the topic-word distributions.
        beta: f64,
    },
    /// Matrix factorization by alternating least squares ([`Mf`]).
    Mf {
        /// `movielens` or `jester`.
        dataset: DatasetName,
        /// p: number of factors.
        factors: usize,
        /// λ > 0: ridge regularization of every row of L and column of R.
        regularization: f64,
    },
}

impl ModelSpec {
    /// The model's short name.
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            ModelSpec::Mlr(_) => "mlr",
            ModelSpec::Qp { .. } => "qp",
            ModelSpec::Cnn(_) => "cnn",
            ModelSpec::Lda { .. } => "lda",
            ModelSpec::Mf { .. } => "mf",
        }
    }

    /// The dataset the model trains on.
    pub(crate) fn dataset(&self) -> DatasetName {
        match self {
            ModelSpec::Mlr(MlrSpec { dataset, .. }) | ModelSpec::Cnn(CnnSpec { dataset, .. }) => {
                *dataset
            }
            ModelSpec::Qp { .. } => DatasetName::None,
            ModelSpec::Lda { dataset, .. } => *dataset,
            ModelSpec::Mf { dataset, .. } => *dataset,
        }
    }

    /// The spec with every knob that only cuts the parameters into blocks
    /// set to one fixed value: two specs with the same training spec build
    /// the same x(0) and step every whole state the same, bit for bit; only
    /// their blocks differ. So a trial that restores every block from one
    /// iteration c recovers to the same state under either, and runs the
    /// same from there (the cross-scenario key of such trials names this
    /// spec, not the spec as written).
    ///
    /// Only the CNN has such a knob, its [`Partitioning`]: its initialisation,
    /// data order, step and metric read the flat parameter vector, and the
    /// per-block Adam step counters are all c in a state restored whole from
    /// x(c) (a unit test trains both partitionings side by side and compares
    /// every value).
    pub(crate) fn training_spec(&self) -> ModelSpec {
        match self {
            ModelSpec::Cnn(spec) => ModelSpec::Cnn(CnnSpec {
                partitioning: Partitioning::ByLayer,
                ..*spec
            }),
            other => other.clone(),
        }
    }
}

/// What was loaded for a model, beside the model itself.
#[derive(Clone, Debug, PartialEq)]
pub struct DataUsed {
    /// The dataset.
    pub(crate) dataset: DatasetName,
    /// Real files or stand-in.
    pub(crate) provenance: Provenance,
    /// Examples in the data used divided by examples in the real dataset
    /// (1 for real data); for text corpora, tokens in the corpus used divided
    /// by tokens in the real corpus; for MF, observed ratings |Ω| / |Ω_real|. Criteria that are sums over the training set, and
    /// minibatch sizes, are multiplied by it for scaled-down stand-ins.
    /// Models whose criterion is a per-example mean and whose minibatch is
    /// not scaled (the CNN) report 1, so that nothing is scaled.
    pub(crate) size_ratio: f64,
}

/// Code that runs generically over any model (Rust has no generic closures).
pub trait ModelVisitor {
    /// What the visit returns.
    type Output;
    /// Called with the live model.
    fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Self::Output;
}

/// Loads the model's data (through `cache`), builds the model and hands it to `visitor`.
pub fn build_and_visit<V: ModelVisitor>(
    spec: &ModelSpec,
    cache: &DataCache,
    opts: &DataOptions,
    seed: u64,
    visitor: V,
) -> Result<V::Output> {
    match spec {
        ModelSpec::Mlr(MlrSpec {
            dataset,
            batch_size,
            learning_rate,
        }) => {
            let data = cache.classification(*dataset, opts, seed)?;
            let real_rows = match dataset {
                DatasetName::Covtype => synthetic::COVTYPE_ROWS,
                _ => synthetic::MNIST_ROWS,
            };
            let size_ratio = data.rows as f64 / real_rows as f64;
            let used = DataUsed {
                dataset: *dataset,
                provenance: data.provenance.clone(),
                size_ratio,
            };
            let batch = ((*batch_size as f64 * size_ratio).round() as usize).max(1);
            let model = Mlr::new(
                data,
                &MlrConfig {
                    batch_size: batch,
                    learning_rate: *learning_rate,
                },
            );
            Ok(visitor.visit(&model, &used))
        }
        ModelSpec::Qp { step_size, x0 } => {
            let used = DataUsed {
                dataset: DatasetName::None,
                provenance: Provenance::Synthetic {
                    description:
                        "no data: the 4-D quadratic objective of src/model/quadratic/qp.rs".into(),
                    scale: 1.0,
                },
                size_ratio: 1.0,
            };
            let model = Qp::new(&QpConfig {
                step_size: *step_size,
                x0: *x0,
            });
            Ok(visitor.visit(&model, &used))
        }
        ModelSpec::Cnn(spec) => {
            let dataset = &spec.dataset;
            let data = cache.classification(*dataset, opts, seed)?;
            // The CNN's criterion is a per-example mean and its minibatch is
            // fixed, so nothing is scaled on a smaller stand-in.
            let used = DataUsed {
                dataset: *dataset,
                provenance: data.provenance.clone(),
                size_ratio: 1.0,
            };
            let model = Cnn::new(data, &CnnConfig { spec: *spec, seed })?;
            Ok(visitor.visit(&model, &used))
        }
        ModelSpec::Lda {
            dataset,
            topics,
            alpha,
            beta,
        } => {
            let data = corpus::cached_corpus(cache, *dataset, opts, seed)?;
            let real = corpus::real_shape(*dataset)?;
            let used = DataUsed {
                dataset: *dataset,
                provenance: data.provenance.clone(),
                size_ratio: match data.provenance {
                    Provenance::Real { .. } => 1.0,
                    Provenance::Synthetic { .. } => data.total_tokens() as f64 / real.tokens as f64,
                },
            };
            let model = Lda::new(
                data,
                &LdaConfig {
                    topics: *topics,
                    alpha: *alpha,
                    beta: *beta,
                    init_seed: seed,
                },
            );
            Ok(visitor.visit(&model, &used))
        }
        ModelSpec::Mf {
            dataset,
            factors,
            regularization,
        } => {
            let data = ratings::cached_ratings(cache, *dataset, opts, seed)?;
            let real = ratings::real_ratings(*dataset).expect("mf datasets are rating datasets");
            // Criteria are sums over the observed ratings: scale by |Ω| / |Ω_real|.
            let used = DataUsed {
                dataset: *dataset,
                provenance: data.provenance.clone(),
                size_ratio: data.len() as f64 / real as f64,
            };
            let model = Mf::new(
                data,
                &MfConfig {
                    factors: *factors,
                    regularization: *regularization,
                    init_seed: seed,
                },
            );
            Ok(visitor.visit(&model, &used))
        }
    }
}
