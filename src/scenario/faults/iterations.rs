//! The `[iterations]` measure of a `faults` scenario (SCAR §5.5): a failure
//! during iteration T, each series a checkpoint and recovery policy with time costs.

use anyhow::Result;
use toml::Spanned;

use super::{
    IterationsConfig, IterationsSeries, Raw, RawIterations, RawSeries, non_negative, persist_mode,
    positive,
};
use crate::model::ModelSpec;
use crate::policy::{CheckpointPolicy, Selector};
use crate::scenario::series::{self, NameRule};
use crate::scenario::{SourceText, limits};

pub(super) fn iterations(
    src: &SourceText,
    raw: &Raw,
    i: &Spanned<RawIterations>,
) -> Result<IterationsConfig> {
    let span = i.span();
    let r = i.get_ref();
    let Some(model) = &raw.model else {
        return Err(src.error_at(
            span,
            "model",
            "[iterations] needs a [model] table (kind = \"lda\" or \"mlr\")",
        ));
    };
    let spec = ModelSpec::parse(src, model.span(), model.get_ref())?;
    let Some(ck) = &raw.checkpoint else {
        return Err(src.error_at(
            span,
            "checkpoint",
            "[iterations] needs a [checkpoint] table (write_time, cache_time)",
        ));
    };
    let c = ck.get_ref();
    if c.interval.is_some() {
        return Err(src.error_at(
            ck.span(),
            "checkpoint.interval",
            "in [iterations] scenarios each series gives its `checkpoint_interval` (iterations)",
        ));
    }
    if raw.failure.is_some() || raw.cost.is_some() {
        return Err(src.error_at(span, "failure", "[iterations] scenarios set the failure in [iterations] (failure_iteration, lost_fraction); [failure] and [cost] are for [wallclock]"));
    }
    let default_async = persist_mode(src, ck.span(), "checkpoint.persist", &c.persist)?;
    limits::iterations(src, &span, "iterations.max_iterations", r.max_iterations)?;
    if r.criterion_iteration == 0 || r.criterion_iteration > r.max_iterations {
        return Err(src.error_at(
            span,
            "iterations.criterion_iteration",
            "must be between 1 and max_iterations",
        ));
    }
    if r.failure_iteration == 0 || r.failure_iteration > r.criterion_iteration {
        return Err(src.error_at(
            span,
            "iterations.failure_iteration",
            format!(
                "must be between 1 and criterion_iteration = {}",
                r.criterion_iteration
            ),
        ));
    }
    if !(0.0..1.0).contains(&r.failure_offset) {
        return Err(src.error_at(
            span,
            "iterations.failure_offset",
            format!("{} is outside [0, 1)", r.failure_offset),
        ));
    }
    if r.ps_nodes == 0 || r.ps_nodes > 1_000_000 {
        return Err(src.error_at(
            span,
            "iterations.ps_nodes",
            format!("{} must be between 1 and 1,000,000", r.ps_nodes),
        ));
    }
    if !(r.lost_fraction > 0.0 && r.lost_fraction <= 1.0) {
        return Err(src.error_at(
            span,
            "iterations.lost_fraction",
            format!("{} is outside (0, 1]", r.lost_fraction),
        ));
    }
    if raw.series.as_deref().unwrap_or(&[]).is_empty() {
        return Err(src.error("series", "at least one [[series]] is needed"));
    }
    let mut series = Vec::new();
    for rs in raw.series.as_deref().unwrap_or(&[]) {
        series.push(iterations_series(src, rs, default_async, &series)?);
    }
    Ok(IterationsConfig {
        model: spec,
        iteration_time: positive(
            src,
            span.clone(),
            "iterations.iteration_time",
            r.iteration_time,
        )?,
        write_time: non_negative(src, ck.span(), "checkpoint.write_time", c.write_time)?,
        cache_time: non_negative(src, ck.span(), "checkpoint.cache_time", c.cache_time)?,
        detection: non_negative(src, span.clone(), "iterations.detection", r.detection)?,
        restart: non_negative(src, span.clone(), "iterations.restart", r.restart)?,
        criterion_iteration: r.criterion_iteration,
        max_iterations: r.max_iterations,
        failure_iteration: r.failure_iteration,
        failure_offset: r.failure_offset,
        ps_nodes: r.ps_nodes,
        lost_fraction: r.lost_fraction,
        series,
    })
}

/// One `[[series]]` table of an `[iterations]` scenario: its checkpoint
/// policy (C, r, budget; priority selection), its recovery, its persist mode
/// (default: the `[checkpoint]` table's) and a name distinct from the
/// `earlier` series'.
fn iterations_series(
    src: &SourceText,
    rs: &Spanned<RawSeries>,
    default_async: bool,
    earlier: &[IterationsSeries],
) -> Result<IterationsSeries> {
    let s = rs.span();
    let x = rs.get_ref();
    let at = |field: &str, msg: String| src.error_at(s.clone(), field, msg);
    if x.strategy.is_some()
        || x.chain.is_some()
        || x.hop_time.is_some()
        || x.damping_threshold.is_some()
        || x.damped_learning_rate.is_some()
        || x.fraction.is_some()
    {
        return Err(at("series", "[iterations] series take name, recovery, checkpoint_interval, checkpoint_fraction, checkpoint_budget and persist".into()));
    }
    let interval = x.checkpoint_interval.unwrap_or(0);
    limits::iterations(src, &s, "series.checkpoint_interval", interval)?;
    if interval == 0 {
        return Err(at(
            "series.checkpoint_interval",
            "missing or 0: iterations between full checkpoints".into(),
        ));
    }
    let fraction = x.checkpoint_fraction.unwrap_or(1.0);
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(at(
            "series.checkpoint_fraction",
            format!("{fraction} is outside (0, 1]"),
        ));
    }
    let policy = CheckpointPolicy {
        interval,
        fraction,
        selector: Selector::Priority,
        budget: x.checkpoint_budget.unwrap_or_default(),
    };
    if !policy.period_is_whole() {
        return Err(at(
            "series.checkpoint_fraction",
            format!(
                "r·C = {} must be a whole number of iterations ≥ 1",
                fraction * interval as f64
            ),
        ));
    }
    let Some(recovery) = x.recovery else {
        return Err(at("series.recovery", "missing: `full` or `partial`".into()));
    };
    let name = x
        .name
        .clone()
        .unwrap_or_else(|| format!("{} r={fraction}", recovery.name()));
    series::check_name(src, s.clone(), &name, NameRule::Unstated)?;
    if earlier.iter().any(|x| x.name == name) {
        return Err(at(
            "series.name",
            format!("`{name}` appears twice; give the series distinct names"),
        ));
    }
    Ok(IterationsSeries {
        name,
        checkpoint: policy,
        recovery,
        asynchronous: match &x.persist {
            Some(p) => persist_mode(src, s.clone(), "series.persist", p)?,
            None => default_async,
        },
    })
}
