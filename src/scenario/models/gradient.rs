//! A protocol scenario's `[model]` table → [`GradientSpec`].

use std::ops::Range;

use anyhow::Result;

use crate::model::ModelSpec;
use crate::model::gradient::GradientSpec;
use crate::model::quadratic::QuadraticConfig;

use crate::scenario::SourceText;

impl GradientSpec {
    /// Reads a `[model]` table (located at `span` in `src`). A registry kind
    /// goes through [`ModelSpec::parse`] (its checks and errors) and then
    /// becomes a [`GradientSpec`] if it has a gradient implementation (MLR,
    /// CNN); any other kind is an error at `model.kind`.
    pub(crate) fn parse(
        src: &SourceText,
        span: Range<usize>,
        table: &toml::Table,
    ) -> Result<GradientSpec> {
        if table.get("kind").and_then(|k| k.as_str()) == Some("quadratic") {
            return Ok(GradientSpec::Quadratic(QuadraticConfig::parse(
                src, span, table,
            )?));
        }
        let cnn_table;
        let table = if table.get("kind").and_then(|k| k.as_str()) == Some("cnn") {
            cnn_table = super::cnn::protocol_table(src, span.clone(), table)?;
            &cnn_table
        } else {
            table
        };
        let spec = ModelSpec::parse(src, span.clone(), table).map_err(|e| {
            let msg = e.to_string();
            if msg.contains("unknown model") || msg.contains("model.kind") {
                anyhow::anyhow!("{msg} (or `quadratic` in protocol scenarios)")
            } else {
                e
            }
        })?;
        GradientSpec::try_from(spec).map_err(|other| {
            src.error_at(
                span,
                "model.kind",
                format!(
                    "model `{}` has no gradient implementation yet; protocol scenarios take `mlr`, `cnn` or `quadratic`",
                    other.kind_name()
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DatasetName;
    use crate::model::cnn::{CnnMetric, Partitioning};
    use crate::model::{CnnSpec, MlrSpec};

    fn parse(text: &str) -> Result<GradientSpec> {
        let src = SourceText::new(text, "g.toml");
        let table: toml::Table = toml::from_str(text).unwrap();
        GradientSpec::parse(&src, 0..text.len(), &table)
    }

    #[test]
    fn registry_models_serialize_as_their_model_spec() {
        let mlr =
            parse("kind = \"mlr\"\ndataset = \"mnist\"\nbatch_size = 8\nlearning_rate = 0.5\n")
                .unwrap();
        let spec = ModelSpec::Mlr(MlrSpec {
            dataset: DatasetName::Mnist,
            batch_size: 8,
            learning_rate: 0.5,
        });
        assert_eq!(mlr.model_spec(), Some(spec.clone()));
        assert_eq!(mlr.learning_rate(), 0.5);
        assert_eq!(mlr.dataset(), Some(DatasetName::Mnist));
        assert_eq!(
            serde_json::to_string(&mlr).unwrap(),
            serde_json::to_string(&spec).unwrap()
        );
        assert_eq!(
            toml::to_string(&mlr).unwrap(),
            toml::to_string(&spec).unwrap()
        );

        let spec = ModelSpec::Cnn(CnnSpec::mnist(
            Partitioning::ByShard { shards: 3 },
            16,
            0.01,
            CnnMetric::Subset { examples: 64 },
        ));
        let cnn = GradientSpec::try_from(spec.clone()).unwrap();
        assert_eq!(cnn.kind_name(), "cnn");
        assert_eq!(cnn.model_spec(), Some(spec.clone()));
        assert_eq!(
            serde_json::to_string(&cnn).unwrap(),
            serde_json::to_string(&spec).unwrap()
        );
    }

    #[test]
    fn models_without_gradients_keep_their_error() {
        let e =
            parse("kind = \"lda\"\ndataset = \"reuters\"\ntopics = 5\nalpha = 1.0\nbeta = 1.0\n")
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("model `lda` has no gradient implementation yet; protocol scenarios take `mlr`, `cnn` or `quadratic`"),
            "{e}"
        );
        let qp = ModelSpec::Qp {
            step_size: 0.1,
            x0: [0.0; crate::model::quadratic::qp::DIM],
        };
        assert_eq!(GradientSpec::try_from(qp.clone()), Err(qp));
    }
}
