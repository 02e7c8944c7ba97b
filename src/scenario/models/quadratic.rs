//! A `[model] kind = "quadratic"` table → [`QuadraticConfig`].

use std::ops::Range;

use anyhow::Result;
use serde::Deserialize;

use crate::model::quadratic::QuadraticConfig;

use crate::scenario::SourceText;

impl QuadraticConfig {
    /// Reads and checks a `[model] kind = "quadratic"` table.
    pub(crate) fn parse(src: &SourceText, span: Range<usize>, table: &toml::Table) -> Result<Self> {
        let mut t = table.clone();
        t.remove("kind");
        let cfg: QuadraticConfig = QuadraticConfig::deserialize(toml::Value::Table(t))
            .map_err(|e| src.error_at(span.clone(), "model", e.message().trim().to_string()))?;
        let bad = |field: &str, msg: String| src.error_at(span.clone(), field, msg);
        if cfg.dimension == 0 || cfg.dimension > 10_000_000 {
            return Err(bad(
                "model.dimension",
                format!("{} must be between 1 and 10,000,000", cfg.dimension),
            ));
        }
        if !(cfg.c > 0.0 && cfg.c.is_finite()) {
            return Err(bad(
                "model.c",
                format!("{} must be a positive number", cfg.c),
            ));
        }
        if !(cfg.l >= cfg.c && cfg.l.is_finite()) {
            return Err(bad(
                "model.l",
                format!("L = {} must be a number ≥ c = {}", cfg.l, cfg.c),
            ));
        }
        if !(cfg.sigma2 >= 0.0 && cfg.sigma2.is_finite()) {
            return Err(bad(
                "model.sigma2",
                format!("{} must be a non-negative number", cfg.sigma2),
            ));
        }
        if cfg.batch_size == 0 {
            return Err(bad("model.batch_size", "must be at least 1".into()));
        }
        if !(cfg.learning_rate > 0.0 && cfg.learning_rate.is_finite()) {
            return Err(bad(
                "model.learning_rate",
                format!("{} must be a positive number", cfg.learning_rate),
            ));
        }
        if !(cfg.init_distance >= 0.0 && cfg.init_distance.is_finite()) {
            return Err(bad(
                "model.init_distance",
                format!("{} must be a non-negative number", cfg.init_distance),
            ));
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_tables_are_rejected() {
        let src_text = "[model]\nkind = \"quadratic\"\n";
        let src = SourceText::new(src_text, "q.toml");
        let mut t: toml::Table = toml::from_str(
            "kind = \"quadratic\"\ndimension = 4\nl = 2.0\nc = 0.5\nsigma2 = 1.0\nbatch_size = 1\nlearning_rate = 0.1\n",
        )
        .unwrap();
        assert!(QuadraticConfig::parse(&src, 0..7, &t).is_ok());
        t.insert("l".into(), toml::Value::Float(0.1));
        let e = QuadraticConfig::parse(&src, 0..7, &t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("model.l") && e.contains("≥ c"), "{e}");
        t.insert("colour".into(), toml::Value::Integer(1));
        let e = QuadraticConfig::parse(&src, 0..7, &t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `colour`"), "{e}");
    }
}
