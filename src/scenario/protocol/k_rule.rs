//! The `k_rule` of a `[[series]]`: K chosen during the run by a rule
//! ([`crate::cluster::adaptive`]) instead of a fixed `k` or a `k_schedule`.
//!
//! ```toml
//! k_rule = { kind = "plateau", start = 1, factor = 2, max = 8, window = 50, tolerance = 0.0 }
//! ```
//!
//! Every key but `kind` is optional; the defaults are those of
//! [`PlateauRule`]'s constants, and `max` defaults to P (fully synchronous
//! at the end).

use std::ops::Range;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::cluster::PlateauRule;
use crate::scenario::SourceText;

/// A `k_rule` as the scenario gives it (`max` still open until P is known).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct KRule {
    /// K at time 0.
    pub(crate) start: usize,
    /// K is multiplied by this when the loss plateaus.
    pub(crate) factor: usize,
    /// Largest K (`None`: P).
    pub(crate) max: Option<usize>,
    /// Observed losses per window.
    pub(crate) window: usize,
    /// Relative decrease below which a window counts as flat.
    pub(crate) tolerance: f64,
}

impl KRule {
    /// The rule with P = `workers` workers.
    pub(crate) fn at(&self, workers: usize) -> PlateauRule {
        PlateauRule {
            start: self.start,
            factor: self.factor,
            max: self.max.unwrap_or(workers),
            window: self.window,
            tolerance: self.tolerance,
        }
    }
}

/// The TOML table of a `k_rule`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKRule {
    kind: String,
    start: Option<i64>,
    factor: Option<i64>,
    max: Option<i64>,
    window: Option<i64>,
    tolerance: Option<f64>,
}

/// Largest `start`, `max` and `window` accepted.
const LARGEST: i64 = 1_000_000;

/// Validates a `k_rule` (at `span` of `src`).
pub(super) fn parse(src: &SourceText, span: Range<usize>, raw: &RawKRule) -> Result<KRule> {
    let err = |field: &str, msg: String| {
        src.error_at(span.clone(), &format!("series.k_rule.{field}"), msg)
    };
    if raw.kind != "plateau" {
        return Err(src.error_at(
            span.clone(),
            "series.k_rule.kind",
            format!(
                "unknown rule `{}`; the only kind is \"plateau\" (raise K when the observed loss stops falling)",
                raw.kind
            ),
        ));
    }
    let whole = |field: &str, v: Option<i64>, default: i64, least: i64| -> Result<usize> {
        let v = v.unwrap_or(default);
        if (least..=LARGEST).contains(&v) {
            Ok(v as usize)
        } else {
            Err(err(
                field,
                format!("{v} is not a whole number between {least} and {LARGEST}"),
            ))
        }
    };
    let start = whole("start", raw.start, PlateauRule::DEFAULT_START as i64, 1)?;
    let factor = whole("factor", raw.factor, PlateauRule::DEFAULT_FACTOR as i64, 2)?;
    let window = whole("window", raw.window, PlateauRule::DEFAULT_WINDOW as i64, 1)?;
    let max = match raw.max {
        None => None,
        Some(m) => {
            let m = whole("max", Some(m), 1, 1)?;
            if m < start {
                return Err(err(
                    "max",
                    format!("max = {m} is below start = {start}; K only rises, so max ≥ start"),
                ));
            }
            Some(m)
        }
    };
    let tolerance = raw.tolerance.unwrap_or(PlateauRule::DEFAULT_TOLERANCE);
    if !(0.0..1.0).contains(&tolerance) {
        return Err(err(
            "tolerance",
            format!(
                "{tolerance} is outside [0, 1): a window is flat unless its mean is below (1 − tolerance) × the previous one"
            ),
        ));
    }
    Ok(KRule {
        start,
        factor,
        max,
        window,
        tolerance,
    })
}
