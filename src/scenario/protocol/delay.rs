//! Delay distributions of a scenario's `[cluster]` (also used by `faults` scenarios).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use crate::cluster::{Delay, Empirical};
use crate::scenario::{SourceText, limits};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDelay {
    distribution: String,
    rate: Option<f64>,
    shift: Option<f64>,
    scale: Option<f64>,
    shape: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
    value: Option<f64>,
    file: Option<String>,
    column: Option<String>,
}

/// The folder relative paths in `src` are resolved against: the scenario
/// file's folder, or the current folder for bundled scenarios.
fn base_dir(src: &SourceText) -> PathBuf {
    if src.origin.starts_with("bundled:") {
        return PathBuf::from(".");
    }
    Path::new(src.origin)
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Largest delay a distribution may draw, as a power of ten (seconds).
const MAX_DRAW_LOG10: f64 = 100.0;

/// `r` names a known distribution and gives exactly the parameters it
/// takes (`err` turns a message into the field's error).
fn check_parameters<E>(r: &RawDelay, err: &impl Fn(String) -> E) -> Result<(), E> {
    let given: Vec<(&str, bool)> = vec![
        ("rate", r.rate.is_some()),
        ("shift", r.shift.is_some()),
        ("scale", r.scale.is_some()),
        ("shape", r.shape.is_some()),
        ("low", r.low.is_some()),
        ("high", r.high.is_some()),
        ("value", r.value.is_some()),
        ("file", r.file.is_some()),
        ("column", r.column.is_some()),
    ];
    let d = r.distribution.as_str();
    let (needs, optional): (&[&str], &[&str]) = match d {
        "exponential" => (&["rate"], &[]),
        "shifted-exponential" => (&["shift", "rate"], &[]),
        "pareto" => (&["scale", "shape"], &[]),
        "uniform" => (&["low", "high"], &[]),
        "constant" => (&["value"], &[]),
        "empirical" => (&["file"], &["column"]),
        other => {
            return Err(err(format!(
                "unknown distribution `{other}`; expected one of: exponential, shifted-exponential, pareto, uniform, constant, empirical"
            )));
        }
    };
    for (name, set) in &given {
        if *set && !needs.contains(name) && !optional.contains(name) {
            return Err(err(format!(
                "`{name}` does not apply to distribution `{d}`, which takes {}",
                needs
                    .iter()
                    .chain(optional)
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            )));
        }
        if !*set && needs.contains(name) {
            return Err(err(format!("distribution `{d}` needs `{name}`")));
        }
    }
    Ok(())
}

pub(crate) fn parse_delay(
    src: &SourceText,
    raw: &Spanned<RawDelay>,
    field: &str,
    positive_mean: bool,
) -> Result<Delay> {
    let span = raw.span();
    let r = raw.get_ref();
    let err = |msg: String| src.error_at(span.clone(), field, msg);
    check_parameters(r, &err)?;
    let d = r.distribution.as_str();
    let max = limits::MAX_SECONDS;
    let positive = |name: &str, v: f64| -> Result<f64> {
        if v > 0.0 && v.is_finite() && v <= max {
            Ok(v)
        } else {
            Err(err(format!(
                "{name} = {v} must be a positive number of at most {max:e}"
            )))
        }
    };
    let non_negative = |name: &str, v: f64| -> Result<f64> {
        if v >= 0.0 && v.is_finite() && v <= max {
            Ok(v)
        } else {
            Err(err(format!(
                "{name} = {v} must be a non-negative number of at most {max:e}"
            )))
        }
    };
    let rate = |v: f64| -> Result<f64> {
        let r = positive("rate", v)?;
        if 1.0 / r > max {
            return Err(err(format!(
                "rate = {v} gives a mean delay 1/rate above {max:e} s"
            )));
        }
        Ok(r)
    };
    let delay = match d {
        "exponential" => Delay::Exponential {
            rate: rate(r.rate.unwrap_or_default())?,
        },
        "shifted-exponential" => Delay::ShiftedExponential {
            shift: non_negative("shift", r.shift.unwrap_or_default())?,
            rate: rate(r.rate.unwrap_or_default())?,
        },
        "pareto" => {
            let scale = positive("scale", r.scale.unwrap_or_default())?;
            let shape = positive("shape", r.shape.unwrap_or_default())?;
            // The largest draw is scale·2^(53/shape) (1 − U ≥ 2^−53): keep it,
            // and sums and squares of many draws, finite.
            let largest_log10 = scale.log10() + 53.0 / shape * 2f64.log10();
            if largest_log10 > MAX_DRAW_LOG10 {
                return Err(err(format!(
                    "pareto(scale = {scale}, shape = {shape}) can draw delays up to 1e{largest_log10:.0} s, \
                     beyond the limit of 1e{MAX_DRAW_LOG10} s where simulated times overflow; raise the shape"
                )));
            }
            Delay::Pareto { scale, shape }
        }
        "uniform" => {
            let low = non_negative("low", r.low.unwrap_or_default())?;
            let high = non_negative("high", r.high.unwrap_or_default())?;
            if high <= low {
                return Err(err(format!(
                    "high = {high} must be greater than low = {low}"
                )));
            }
            Delay::Uniform { low, high }
        }
        "constant" => {
            let v = r.value.unwrap_or_default();
            Delay::Constant {
                value: if positive_mean {
                    positive("value", v)?
                } else {
                    non_negative("value", v)?
                },
            }
        }
        _ => {
            let file = r.file.clone().unwrap_or_default();
            let path = base_dir(src).join(&file);
            let e =
                Empirical::read(&path, r.column.as_deref()).map_err(|e| err(format!("{e:#}")))?;
            if let Some(&big) = e.sorted.last()
                && big > max
            {
                return Err(err(format!(
                    "{} holds the time {big} s, more than the limit of {max:e} s",
                    path.display()
                )));
            }
            if positive_mean && e.mean() <= 0.0 {
                return Err(err(format!(
                    "every measured time in {} is 0: a gradient must take time",
                    path.display()
                )));
            }
            Delay::Empirical(Arc::new(e))
        }
    };
    Ok(delay)
}
