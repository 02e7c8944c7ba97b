//! A scenario's `[model]` table → the model's plain config: the raw TOML
//! shapes of every model kind and their checks, with errors that name the
//! field. The configs themselves (`ModelSpec`, `GradientSpec`,
//! `QuadraticConfig`) live in `model/`, which knows nothing of scenarios.
//!
//! - `ModelSpec::parse` (here): the SCAR models (`mlr`, `mf`, `lda`, `qp`, `cnn`).
//! - `GradientSpec::parse` (`gradient.rs`): a protocol scenario's model,
//!   the registry's `mlr` and `cnn` or the noisy `quadratic`
//!   (`quadratic.rs`, for `model::quadratic::noisy`); a protocol CNN table is checked by `cnn.rs`.

mod cnn;
mod gradient;
mod quadratic;

use std::ops::Range;

use anyhow::Result;
use serde::Deserialize;

use crate::data::DatasetName;
use crate::model::cnn::{CnnMetric, Partitioning};
use crate::model::lda::MAX_TOPICS;
use crate::model::quadratic::qp;
use crate::model::{CnnSpec, MlrSpec, ModelSpec};

use crate::scenario::SourceText;

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
    pub(crate) fn parse(
        src: &SourceText,
        span: Range<usize>,
        table: &toml::Table,
    ) -> Result<ModelSpec> {
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
            "mlr" => parse_mlr(src, span.clone(), RawMlr::deserialize(value).map_err(bad)?),
            "qp" => parse_qp(src, span.clone(), RawQp::deserialize(value).map_err(bad)?),
            "cnn" => parse_cnn(src, span.clone(), RawCnn::deserialize(value).map_err(bad)?),
            "lda" => parse_lda(src, span.clone(), RawLda::deserialize(value).map_err(bad)?),
            "mf" => parse_mf(src, span.clone(), RawMf::deserialize(value).map_err(bad)?),
            other => Err(src.error_at(
                span,
                "model.kind",
                format!("unknown model `{other}`; expected one of: {MODEL_KINDS}"),
            )),
        }
    }
}

/// `kind = "mlr"`: Multinomial logistic regression: `mnist` or `covtype`, a positive minibatch and learning rate.
fn parse_mlr(src: &SourceText, span: Range<usize>, raw: RawMlr) -> Result<ModelSpec> {
    if !matches!(raw.dataset, DatasetName::Mnist | DatasetName::Covtype) {
        return Err(src.error_at(span, "model.dataset", "mlr trains on `mnist` or `covtype`"));
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
    Ok(ModelSpec::Mlr(MlrSpec {
        dataset: raw.dataset,
        batch_size: raw.batch_size,
        learning_rate: raw.learning_rate,
    }))
}

/// `kind = "qp"`: SCAR's 4-D quadratic program: a step size in (0, 2/8) and a starting point.
fn parse_qp(src: &SourceText, span: Range<usize>, raw: RawQp) -> Result<ModelSpec> {
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

/// `kind = "cnn"`: The CNN: `mnist`, its blocks (by layer or by shard), Adam and the convergence metric.
fn parse_cnn(src: &SourceText, span: Range<usize>, raw: RawCnn) -> Result<ModelSpec> {
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
            Err(src.error_at(span.clone(), name, format!("{v} must be a positive number")))
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
    Ok(ModelSpec::Cnn(CnnSpec {
        dataset: raw.dataset,
        partitioning,
        batch_size: raw.batch_size,
        learning_rate: positive("model.learning_rate", raw.learning_rate)?,
        beta1: beta("model.beta1", raw.beta1.unwrap_or(CnnSpec::ADAM_BETA1))?,
        beta2: beta("model.beta2", raw.beta2.unwrap_or(CnnSpec::ADAM_BETA2))?,
        epsilon: positive(
            "model.epsilon",
            raw.epsilon.unwrap_or(CnnSpec::ADAM_EPSILON),
        )?,
        metric,
    }))
}

/// `kind = "lda"`: LDA: `20news` or `reuters`, K topics and positive priors α, β.
fn parse_lda(src: &SourceText, span: Range<usize>, raw: RawLda) -> Result<ModelSpec> {
    if !matches!(raw.dataset, DatasetName::News20 | DatasetName::Reuters) {
        return Err(src.error_at(span, "model.dataset", "lda trains on `20news` or `reuters`"));
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
            return Err(src.error_at(span, field, format!("{v} must be a positive number")));
        }
    }
    Ok(ModelSpec::Lda {
        dataset: raw.dataset,
        topics: raw.topics,
        alpha: raw.alpha,
        beta: raw.beta,
    })
}

/// `kind = "mf"`: MF by ALS: `movielens` or `jester`, p factors and λ > 0.
fn parse_mf(src: &SourceText, span: Range<usize>, raw: RawMf) -> Result<ModelSpec> {
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
