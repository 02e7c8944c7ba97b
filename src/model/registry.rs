//! The one place that knows every model: how its `[model]` table is read from
//! a scenario, and how a [`ModelSpec`] becomes a live [`Model`] over its data.
//!
//! To add a model: implement [`Model`], add a variant to [`ModelSpec`], a
//! branch to [`ModelSpec::parse`] and one to [`build_and_visit`].

use std::ops::Range;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::Model;
use super::cnn::{Cnn, CnnConfig, CnnMetric, Partitioning};
use super::lda::{Lda, LdaConfig, MAX_TOPICS};
use super::mf::{Mf, MfConfig};
use super::mlr::{Mlr, MlrConfig};
use super::qp::{self, Qp, QpConfig};
use crate::data::{DataCache, DataOptions, DatasetName, Provenance, corpus, ratings, synthetic};
use crate::scenario::SourceText;

/// A model and its hyper-parameters, as a scenario names them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ModelSpec {
    /// Multinomial logistic regression by minibatch SGD ([`Mlr`]).
    Mlr {
        /// `mnist` or `covtype`.
        dataset: DatasetName,
        /// Minibatch size b.
        batch_size: usize,
        /// Learning rate η on the batch-mean gradient.
        learning_rate: f64,
    },
    /// Gradient descent on the 4-D quadratic program of [`qp`] (SCAR Figure 3).
    Qp {
        /// Step size α (0 < α < 2/8).
        step_size: f64,
        /// Starting point x(0).
        x0: [f64; qp::DIM],
    },
    /// LeNet-5-style CNN trained by Adam ([`Cnn`]).
    Cnn {
        /// `mnist`.
        dataset: DatasetName,
        /// By-layer or by-shard blocks.
        partitioning: Partitioning,
        /// Minibatch size b (not scaled for stand-ins).
        batch_size: usize,
        /// Adam step size α.
        learning_rate: f64,
        /// Adam β1.
        beta1: f64,
        /// Adam β2.
        beta2: f64,
        /// Adam ε.
        epsilon: f64,
        /// The convergence metric.
        metric: CnnMetric,
    },
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQp {
    #[allow(dead_code)]
    kind: String,
    step_size: f64,
    #[serde(default)]
    x0: [f64; qp::DIM],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLda {
    #[allow(dead_code)]
    kind: String,
    dataset: DatasetName,
    topics: usize,
    alpha: f64,
    beta: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMlr {
    #[allow(dead_code)]
    kind: String,
    dataset: DatasetName,
    batch_size: usize,
    learning_rate: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMf {
    #[allow(dead_code)]
    kind: String,
    dataset: DatasetName,
    factors: usize,
    regularization: f64,
}

/// The model kinds [`ModelSpec::parse`] accepts.
const MODEL_KINDS: &str = "mlr, mf, lda, qp, cnn";

/// `partitioning` as written in a `[model]` table.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RawPartitioning {
    ByLayer,
    ByShard,
}

/// Appendix D's Adam settings, the defaults of a `cnn` model.
const ADAM_BETA1: f64 = 0.9;
const ADAM_BETA2: f64 = 0.999;
const ADAM_EPSILON: f64 = 1e-8;
/// Default S of by-shard partitioning: one shard per PS node of the default
/// 8-node cluster, so a tensor can be spread over every node.
const DEFAULT_SHARDS: usize = 8;
/// `metric` as written in a `[model]` table.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RawCnnMetric {
    RunningMean,
    Subset,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCnn {
    #[allow(dead_code)]
    kind: String,
    dataset: DatasetName,
    partitioning: RawPartitioning,
    shards: Option<usize>,
    batch_size: usize,
    learning_rate: f64,
    beta1: Option<f64>,
    beta2: Option<f64>,
    epsilon: Option<f64>,
    metric: RawCnnMetric,
    window: Option<usize>,
    eval_examples: Option<usize>,
}

impl ModelSpec {
    /// Reads a scenario's `[model]` table (located at `span` in `src`).
    pub fn parse(src: &SourceText, span: Range<usize>, table: &toml::Table) -> Result<ModelSpec> {
        let kind = match table.get("kind").and_then(|k| k.as_str()) {
            Some(k) => k,
            None => {
                return Err(src.error_at(
                    span,
                    "model.kind",
                    format!("missing; expected one of: {MODEL_KINDS}"),
                ));
            }
        };
        let value = toml::Value::Table(table.clone());
        let bad = |e: toml::de::Error| {
            src.error_at(span.clone(), "model", e.message().trim().to_string())
        };
        match kind {
            "mlr" => {
                let raw: RawMlr = RawMlr::deserialize(value).map_err(bad)?;
                if !matches!(raw.dataset, DatasetName::Mnist | DatasetName::Covtype) {
                    return Err(src.error_at(
                        span,
                        "model.dataset",
                        "mlr trains on `mnist` or `covtype`",
                    ));
                }
                if raw.batch_size == 0 {
                    return Err(src.error_at(span, "model.batch_size", "must be at least 1"));
                }
                if !(raw.learning_rate > 0.0 && raw.learning_rate.is_finite()) {
                    return Err(src.error_at(
                        span,
                        "model.learning_rate",
                        format!("{} must be a positive number", raw.learning_rate),
                    ));
                }
                Ok(ModelSpec::Mlr {
                    dataset: raw.dataset,
                    batch_size: raw.batch_size,
                    learning_rate: raw.learning_rate,
                })
            }
            "qp" => {
                let raw: RawQp = RawQp::deserialize(value).map_err(bad)?;
                if !(raw.step_size > 0.0 && raw.step_size < qp::MAX_STEP_SIZE) {
                    return Err(src.error_at(
                        span,
                        "model.step_size",
                        format!(
                            "{} is outside (0, {}): gradient descent on the QP converges only for \
                             0 < α < 2/λ_max = 2/8",
                            raw.step_size,
                            qp::MAX_STEP_SIZE
                        ),
                    ));
                }
                if raw.x0.iter().any(|v| !v.is_finite()) {
                    return Err(src.error_at(span, "model.x0", "must be 4 finite numbers"));
                }
                Ok(ModelSpec::Qp {
                    step_size: raw.step_size,
                    x0: raw.x0,
                })
            }
            "cnn" => {
                let raw: RawCnn = RawCnn::deserialize(value).map_err(bad)?;
                if raw.dataset != DatasetName::Mnist {
                    return Err(src.error_at(span, "model.dataset", "cnn trains on `mnist`"));
                }
                let partitioning = match (raw.partitioning, raw.shards) {
                    (RawPartitioning::ByLayer, None) => Partitioning::ByLayer,
                    (RawPartitioning::ByLayer, Some(_)) => {
                        return Err(src.error_at(
                            span,
                            "model.shards",
                            "applies only to partitioning = \"by-shard\"",
                        ));
                    }
                    (RawPartitioning::ByShard, s) => {
                        let shards = s.unwrap_or(DEFAULT_SHARDS);
                        if shards == 0 {
                            return Err(src.error_at(span, "model.shards", "must be at least 1"));
                        }
                        Partitioning::ByShard { shards }
                    }
                };
                if raw.batch_size == 0 {
                    return Err(src.error_at(span, "model.batch_size", "must be at least 1"));
                }
                let positive = |name: &str, v: f64| {
                    if v > 0.0 && v.is_finite() {
                        Ok(v)
                    } else {
                        Err(src.error_at(
                            span.clone(),
                            name,
                            format!("{v} must be a positive number"),
                        ))
                    }
                };
                let beta = |name: &str, v: f64| {
                    if (0.0..1.0).contains(&v) {
                        Ok(v)
                    } else {
                        Err(src.error_at(span.clone(), name, format!("{v} must be in [0, 1)")))
                    }
                };
                let metric = match (raw.metric, raw.window, raw.eval_examples) {
                    (RawCnnMetric::RunningMean, Some(window), None) if window >= 1 => {
                        CnnMetric::RunningMean { window }
                    }
                    (RawCnnMetric::Subset, None, Some(examples)) if examples >= 1 => {
                        CnnMetric::Subset { examples }
                    }
                    (RawCnnMetric::RunningMean, _, _) => {
                        return Err(src.error_at(
                            span,
                            "model.window",
                            "metric = \"running-mean\" needs `window` (minibatches averaged, at least 1) and no `eval_examples`",
                        ));
                    }
                    (RawCnnMetric::Subset, _, _) => {
                        return Err(src.error_at(
                            span,
                            "model.eval_examples",
                            "metric = \"subset\" needs `eval_examples` (images, at least 1) and no `window`",
                        ));
                    }
                };
                Ok(ModelSpec::Cnn {
                    dataset: raw.dataset,
                    partitioning,
                    batch_size: raw.batch_size,
                    learning_rate: positive("model.learning_rate", raw.learning_rate)?,
                    beta1: beta("model.beta1", raw.beta1.unwrap_or(ADAM_BETA1))?,
                    beta2: beta("model.beta2", raw.beta2.unwrap_or(ADAM_BETA2))?,
                    epsilon: positive("model.epsilon", raw.epsilon.unwrap_or(ADAM_EPSILON))?,
                    metric,
                })
            }
            "lda" => {
                let raw: RawLda = RawLda::deserialize(value).map_err(bad)?;
                if !matches!(raw.dataset, DatasetName::News20 | DatasetName::Reuters) {
                    return Err(src.error_at(
                        span,
                        "model.dataset",
                        "lda trains on `20news` or `reuters`",
                    ));
                }
                if !(2..=MAX_TOPICS).contains(&raw.topics) {
                    return Err(src.error_at(
                        span,
                        "model.topics",
                        format!("{} is outside 2..={MAX_TOPICS}", raw.topics),
                    ));
                }
                for (field, v) in [("model.alpha", raw.alpha), ("model.beta", raw.beta)] {
                    if !(v > 0.0 && v.is_finite()) {
                        return Err(src.error_at(
                            span,
                            field,
                            format!("{v} must be a positive number"),
                        ));
                    }
                }
                Ok(ModelSpec::Lda {
                    dataset: raw.dataset,
                    topics: raw.topics,
                    alpha: raw.alpha,
                    beta: raw.beta,
                })
            }
            "mf" => {
                let raw: RawMf = RawMf::deserialize(value).map_err(bad)?;
                if !matches!(raw.dataset, DatasetName::Movielens | DatasetName::Jester) {
                    return Err(src.error_at(
                        span,
                        "model.dataset",
                        "mf trains on `movielens` or `jester`",
                    ));
                }
                if !(1..=1000).contains(&raw.factors) {
                    return Err(src.error_at(
                        span,
                        "model.factors",
                        format!("{} must be from 1 to 1000", raw.factors),
                    ));
                }
                if !(raw.regularization > 0.0 && raw.regularization.is_finite()) {
                    return Err(src.error_at(
                        span,
                        "model.regularization",
                        format!(
                            "{} must be a positive number (it keeps every least-squares system solvable)",
                            raw.regularization
                        ),
                    ));
                }
                Ok(ModelSpec::Mf {
                    dataset: raw.dataset,
                    factors: raw.factors,
                    regularization: raw.regularization,
                })
            }
            other => Err(src.error_at(
                span,
                "model.kind",
                format!("unknown model `{other}`; expected one of: {MODEL_KINDS}"),
            )),
        }
    }

    /// The model's short name.
    pub fn kind_name(&self) -> &'static str {
        match self {
            ModelSpec::Mlr { .. } => "mlr",
            ModelSpec::Qp { .. } => "qp",
            ModelSpec::Cnn { .. } => "cnn",
            ModelSpec::Lda { .. } => "lda",
            ModelSpec::Mf { .. } => "mf",
        }
    }

    /// The dataset the model trains on.
    pub fn dataset(&self) -> DatasetName {
        match self {
            ModelSpec::Mlr { dataset, .. } | ModelSpec::Cnn { dataset, .. } => *dataset,
            ModelSpec::Qp { .. } => DatasetName::None,
            ModelSpec::Lda { dataset, .. } => *dataset,
            ModelSpec::Mf { dataset, .. } => *dataset,
        }
    }
}

/// What was loaded for a model, beside the model itself.
#[derive(Clone, Debug, PartialEq)]
pub struct DataUsed {
    /// The dataset.
    pub dataset: DatasetName,
    /// Real files or stand-in.
    pub provenance: Provenance,
    /// Examples in the data used divided by examples in the real dataset
    /// (1 for real data); for text corpora, tokens in the corpus used divided
    /// by tokens in the real corpus; for MF, observed ratings |Ω| / |Ω_real|. Criteria that are sums over the training set, and
    /// minibatch sizes, are multiplied by it for scaled-down stand-ins.
    /// Models whose criterion is a per-example mean and whose minibatch is
    /// not scaled (the CNN) report 1, so that nothing is scaled.
    pub size_ratio: f64,
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
        ModelSpec::Mlr {
            dataset,
            batch_size,
            learning_rate,
        } => {
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
                    description: "no data: the 4-D quadratic objective of src/model/qp.rs".into(),
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
        ModelSpec::Cnn {
            dataset,
            partitioning,
            batch_size,
            learning_rate,
            beta1,
            beta2,
            epsilon,
            metric,
        } => {
            let data = cache.classification(*dataset, opts, seed)?;
            // The CNN's criterion is a per-example mean and its minibatch is
            // fixed, so nothing is scaled on a smaller stand-in.
            let used = DataUsed {
                dataset: *dataset,
                provenance: data.provenance.clone(),
                size_ratio: 1.0,
            };
            let model = Cnn::new(
                data,
                &CnnConfig {
                    partitioning: *partitioning,
                    batch_size: *batch_size,
                    learning_rate: *learning_rate,
                    beta1: *beta1,
                    beta2: *beta2,
                    epsilon: *epsilon,
                    metric: *metric,
                    seed,
                },
            )?;
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
