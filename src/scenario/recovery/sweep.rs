//! The `[sweep]` table of a `recovery` scenario: the parameter swept
//! ([`SweepAxis`]) and its values.

use std::ops::Range;

use anyhow::Result;
use serde::Serialize;

use super::PointConfig;
use crate::policy::{FailureTime, LossSpec};
use crate::scenario::{SourceText, limits};

/// A parameter a scenario can sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepAxis {
    /// Fraction of blocks a failure loses.
    LostFraction,
    /// Number of PS nodes a failure takes down.
    LostPsNodes,
    /// r: fraction of blocks per checkpoint (saved every r·C iterations).
    CheckpointFraction,
    /// C: the full-checkpoint interval.
    CheckpointInterval,
    /// p: per-iteration failure probability of the geometric failure time.
    FailureProbability,
}

impl SweepAxis {
    /// The axis name (TOML key and `x_name` column).
    pub(crate) fn name(self) -> &'static str {
        match self {
            SweepAxis::LostFraction => "lost_fraction",
            SweepAxis::LostPsNodes => "lost_ps_nodes",
            SweepAxis::CheckpointFraction => "checkpoint_fraction",
            SweepAxis::CheckpointInterval => "checkpoint_interval",
            SweepAxis::FailureProbability => "failure_probability",
        }
    }

    const ALL: [SweepAxis; 5] = [
        SweepAxis::LostFraction,
        SweepAxis::LostPsNodes,
        SweepAxis::CheckpointFraction,
        SweepAxis::CheckpointInterval,
        SweepAxis::FailureProbability,
    ];

    /// The value of this axis in `cfg` (NaN if the configuration has no such value).
    pub(crate) fn value_in(self, cfg: &PointConfig) -> f64 {
        match self {
            SweepAxis::LostFraction => match cfg.loss {
                LossSpec::Fraction(f) => f,
                LossSpec::PsNodes(_) => f64::NAN,
            },
            SweepAxis::LostPsNodes => match cfg.loss {
                LossSpec::PsNodes(k) => k as f64,
                LossSpec::Fraction(_) => f64::NAN,
            },
            SweepAxis::CheckpointFraction => cfg.checkpoint.fraction,
            SweepAxis::CheckpointInterval => cfg.checkpoint.interval as f64,
            SweepAxis::FailureProbability => match cfg.failure_time {
                FailureTime::Geometric { p } => p,
                FailureTime::Fixed { .. } | FailureTime::GeometricOfRun { .. } => f64::NAN,
            },
        }
    }

    /// `cfg` with this axis set to `v`.
    pub(super) fn set(self, cfg: &PointConfig, v: f64) -> PointConfig {
        let mut c = *cfg;
        match self {
            SweepAxis::LostFraction => c.loss = LossSpec::Fraction(v),
            SweepAxis::LostPsNodes => c.loss = LossSpec::PsNodes(v as usize),
            SweepAxis::CheckpointFraction => c.checkpoint.fraction = v,
            SweepAxis::CheckpointInterval => c.checkpoint.interval = v as usize,
            SweepAxis::FailureProbability => c.failure_time = FailureTime::Geometric { p: v },
        }
        c
    }
}

/// A sweep: one axis and its values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sweep {
    /// The swept parameter.
    pub(crate) axis: SweepAxis,
    /// Its values, in the order given.
    pub values: Vec<f64>,
}

pub(super) fn parse_sweep(src: &SourceText, span: Range<usize>, t: &toml::Table) -> Result<Sweep> {
    if t.len() != 1 {
        return Err(src.error_at(
            span,
            "sweep",
            format!(
                "give exactly one axis; expected one of: {}",
                SweepAxis::ALL.map(|a| a.name()).join(", ")
            ),
        ));
    }
    let (key, value) = t.iter().next().expect("one entry");
    let axis = SweepAxis::ALL
        .into_iter()
        .find(|a| a.name() == key)
        .ok_or_else(|| {
            src.error_at(
                span.clone(),
                "sweep",
                format!(
                    "unknown axis `{key}`; expected one of: {}",
                    SweepAxis::ALL.map(|a| a.name()).join(", ")
                ),
            )
        })?;
    let arr = value.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
        src.error_at(
            span.clone(),
            &format!("sweep.{key}"),
            "must be a non-empty array of numbers",
        )
    })?;
    limits::list_len(src, &span, &format!("sweep.{key}"), arr.len())?;
    let mut values = Vec::new();
    for v in arr {
        let x = match v {
            toml::Value::Float(f) => *f,
            toml::Value::Integer(i) => *i as f64,
            other => {
                return Err(src.error_at(
                    span.clone(),
                    &format!("sweep.{key}"),
                    format!("{other} is not a number"),
                ));
            }
        };
        let integral = matches!(axis, SweepAxis::LostPsNodes | SweepAxis::CheckpointInterval);
        if integral && (x.fract() != 0.0 || x < 0.0) {
            return Err(src.error_at(
                span.clone(),
                &format!("sweep.{key}"),
                format!("{x} must be a whole number"),
            ));
        }
        if axis == SweepAxis::CheckpointInterval {
            limits::iterations(src, &span, &format!("sweep.{key}"), x as usize)?;
        }
        values.push(x);
    }
    limits::distinct_f64(src, &span, &format!("sweep.{key}"), &values)?;
    Ok(Sweep { axis, values })
}
