//! A protocol scenario's `[model] kind = "cnn"` table: the SCAR-only keys
//! are rejected (the protocols update the CNN by SGD, see
//! `model::cnn::gradient`).

use std::ops::Range;

use anyhow::Result;

use crate::scenario::SourceText;

/// Keys of a SCAR `[model] kind = "cnn"` table that mean nothing under the
/// protocols' SGD update.
const SCAR_ONLY_KEYS: [&str; 8] = [
    "partitioning",
    "shards",
    "metric",
    "window",
    "eval_examples",
    "beta1",
    "beta2",
    "epsilon",
];

/// Checks a protocol scenario's `[model] kind = "cnn"` table (located at
/// `span` in `src`) and returns it completed with the SCAR-only keys the
/// shared model parser requires (`partitioning = "by-layer"`, `metric =
/// "subset"`; neither changes the gradients), so that
/// [`ModelSpec::parse`](crate::model::ModelSpec::parse) can read it.
pub(crate) fn protocol_table(
    src: &SourceText,
    span: Range<usize>,
    table: &toml::Table,
) -> Result<toml::Table> {
    for key in SCAR_ONLY_KEYS {
        if table.contains_key(key) {
            return Err(src.error_at(
                span,
                &format!("model.{key}"),
                "does not apply in protocol scenarios: the PS updates the CNN by SGD with \
                 `learning_rate` as the step (Dutta et al. eq. 2); allowed keys are kind, \
                 dataset, batch_size, learning_rate",
            ));
        }
    }
    let mut t = table.clone();
    t.insert("partitioning".into(), "by-layer".into());
    t.insert("metric".into(), "subset".into());
    t.insert("eval_examples".into(), toml::Value::Integer(1));
    Ok(t)
}
