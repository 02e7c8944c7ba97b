//! A protocol scenario's `[model]` table → [`GradientSpec`].

use std::ops::Range;

use anyhow::Result;

use crate::model::ModelSpec;
use crate::model::gradient::GradientSpec;
use crate::model::quadratic::QuadraticConfig;

use crate::scenario::SourceText;

impl GradientSpec {
    /// Reads a `[model]` table (located at `span` in `src`).
    pub fn parse(
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
        #[allow(unreachable_patterns)]
        match spec {
            ModelSpec::Mlr { .. } | ModelSpec::Cnn { .. } => Ok(GradientSpec::Registry(spec)),
            other => Err(src.error_at(
                span,
                "model.kind",
                format!(
                    "model `{}` has no gradient implementation yet; protocol scenarios take `mlr`, `cnn` or `quadratic`",
                    other.kind_name()
                ),
            )),
        }
    }
}
