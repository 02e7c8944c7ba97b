//! The checks on one resolved point configuration of a `recovery` scenario
//! (the base configuration and every swept point): failure time, loss and
//! checkpoint period.

use std::ops::Range;

use anyhow::Result;

use super::{PointConfig, Raw};
use crate::policy::{FailureTime, LossSpec};
use crate::scenario::SourceText;

/// Validates one fully-resolved configuration; `raw` (for the base
/// configuration) lets errors point at the offending line.
pub(super) fn check_point(
    src: &SourceText,
    c: &PointConfig,
    ps_nodes: usize,
    what: &str,
    raw: Option<&Raw>,
) -> Result<()> {
    let at = |span: Option<Range<usize>>, field: &str, msg: String| match span {
        Some(s) if s.end > 0 => src.error_at(s, field, msg),
        _ => src.error(field, msg),
    };
    let ft_span = raw.map(|r| r.failure.iteration.span());
    let lost_span = raw.map(|r| r.failure.lost.span());
    let frac_span = raw.map(|r| r.checkpoint.fraction.span());
    let int_span = raw.map(|r| r.checkpoint.interval.span());
    match c.failure_time {
        FailureTime::Geometric { p } if !(p > 0.0 && p <= 1.0) => {
            return Err(at(
                ft_span,
                "failure.iteration.p",
                format!("{p} in {what} is outside (0, 1]"),
            ));
        }
        FailureTime::GeometricOfRun { mean_of_run }
            if !(mean_of_run > 0.0 && mean_of_run <= 1e6) =>
        {
            return Err(at(
                ft_span,
                "failure.iteration.mean_of_run",
                format!(
                    "{mean_of_run} in {what} is outside (0, 1e6] (a fraction of the run's length)"
                ),
            ));
        }
        FailureTime::Fixed { iteration: 0 } => {
            return Err(at(
                ft_span,
                "failure.iteration.iteration",
                format!("must be at least 1 in {what}"),
            ));
        }
        _ => {}
    }
    match c.loss {
        LossSpec::Fraction(f) if !(f > 0.0 && f <= 1.0) => {
            return Err(at(
                lost_span,
                "failure.lost.fraction",
                format!("{f} in {what} is outside (0, 1]"),
            ));
        }
        LossSpec::PsNodes(k) if k == 0 || k > ps_nodes => {
            return Err(at(
                lost_span,
                "failure.lost.ps_nodes",
                format!("{k} in {what} must be between 1 and cluster.ps_nodes = {ps_nodes}"),
            ));
        }
        _ => {}
    }
    let ck = &c.checkpoint;
    if ck.interval == 0 {
        return Err(at(
            int_span,
            "checkpoint.interval",
            format!("C = 0 in {what}: must be at least 1 iteration"),
        ));
    }
    if !(ck.fraction > 0.0 && ck.fraction <= 1.0) {
        return Err(at(
            frac_span,
            "checkpoint.fraction",
            format!("{} in {what} is outside (0, 1]", ck.fraction),
        ));
    }
    if !ck.period_is_whole() {
        return Err(at(
            frac_span,
            "checkpoint.fraction",
            format!(
                "in {what}: the checkpoint period r·C = {}·{} = {} must be a whole number of iterations ≥ 1; \
                 choose C as a multiple of 1/r",
                ck.fraction,
                ck.interval,
                ck.fraction * ck.interval as f64
            ),
        ));
    }
    Ok(())
}
