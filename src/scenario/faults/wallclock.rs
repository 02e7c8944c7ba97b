//! The `[wallclock]` measure of a `faults` scenario: workers, the PS, the
//! checkpoint costs, the prices and the strategy series.

use std::ops::Range;

use anyhow::Result;
use toml::Spanned;

use super::failures::{check_failure_nodes, failure_process};
use super::{
    Prices, Raw, RawSeries, RawWallclock, WallclockConfig, WallclockSeries, non_negative,
    persist_mode, positive,
};
use crate::faults::{CheckpointCost, Replication, RestoreFrom, Strategy};
use crate::model::gradient::GradientSpec;
use crate::scenario::protocol::parse_delay;
use crate::scenario::series::{self, NameRule};
use crate::scenario::{SourceText, limits};

pub(super) fn wallclock(
    src: &SourceText,
    raw: &Raw,
    w: &Spanned<RawWallclock>,
) -> Result<WallclockConfig> {
    let span = w.span();
    let r = w.get_ref();
    let spec = wallclock_model(src, raw, span.clone())?;
    if r.workers.is_empty() || r.workers.iter().any(|&p| p == 0 || p > 10_000) {
        return Err(src.error_at(
            span,
            "wallclock.workers",
            "give a list of worker counts between 1 and 10,000",
        ));
    }
    limits::list_len(src, &span, "wallclock.workers", r.workers.len())?;
    limits::distinct(src, &span, "wallclock.workers", &r.workers)?;
    if r.ps_nodes == 0 || r.ps_nodes > 10_000 {
        return Err(src.error_at(span, "wallclock.ps_nodes", "must be between 1 and 10,000"));
    }
    let compute_time = parse_delay(src, &r.compute_time, "wallclock.compute_time", true)?;
    let communication_time = r
        .communication_time
        .as_ref()
        .map(|d| parse_delay(src, d, "wallclock.communication_time", false))
        .transpose()?;
    let horizon = positive(src, span.clone(), "wallclock.horizon", r.horizon)?;
    limits::seconds(src, &span, "wallclock.horizon", horizon)?;
    let grid_step = positive(src, span.clone(), "wallclock.grid_step", r.grid_step)?;
    if horizon / grid_step > 100_000.0 {
        return Err(src.error_at(
            span,
            "wallclock.grid_step",
            "gives more than 100,000 grid points",
        ));
    }
    if r.loss_subsample == 0 {
        return Err(src.error_at(span, "wallclock.loss_subsample", "must be at least 1"));
    }
    let detection = non_negative(src, span.clone(), "wallclock.detection", r.detection)?;
    let restart = non_negative(src, span.clone(), "wallclock.restart", r.restart)?;
    let join = match r.join {
        None => f64::INFINITY,
        Some(j) => non_negative(src, span.clone(), "wallclock.join", j)?,
    };
    if !r.criterion.is_finite() {
        return Err(src.error_at(span, "wallclock.criterion", "must be a finite loss value"));
    }
    let checkpoint = checkpoint_cost(src, raw, span.clone())?;
    let default_async = checkpoint.asynchronous;
    let (failure, trace_lines) = failure_process(src, raw)?;
    let prices = prices(src, raw)?;
    if raw.series.as_deref().unwrap_or(&[]).is_empty() {
        return Err(src.error("series", "at least one [[series]] (a strategy) is needed"));
    }
    let mut series = Vec::new();
    for rs in raw.series.as_deref().unwrap_or(&[]) {
        series.push(wallclock_series(src, rs, default_async, &series)?);
    }
    check_failure_nodes(
        src,
        raw,
        &failure,
        &trace_lines,
        r.ps_nodes,
        &series,
        horizon,
    )?;
    let max_workers = r.workers.iter().copied().max().unwrap_or(1) as f64;
    let per_gradient = limits::typical_delay(&compute_time)
        + communication_time
            .as_ref()
            .map_or(0.0, limits::typical_delay);
    limits::events(
        src,
        &span,
        "wallclock.horizon",
        horizon / per_gradient.max(f64::MIN_POSITIVE) * max_workers,
        &format!(
            "the horizon of {horizon} s with gradients of about {per_gradient:.3e} s on up to {max_workers} workers"
        ),
    )?;
    Ok(WallclockConfig {
        eta: spec.learning_rate(),
        model: spec,
        workers: r.workers.clone(),
        ps_nodes: r.ps_nodes,
        compute_time,
        communication_time,
        horizon,
        grid_step,
        loss_subsample: r.loss_subsample,
        criterion: r.criterion,
        detection,
        restart,
        join,
        without_failure: r.without_failure,
        checkpoint,
        failure,
        prices,
        series,
    })
}

/// The `[model]` of a wall-clock scenario: a classifier with gradients and
/// blocks (`mlr` or `cnn`).
fn wallclock_model(src: &SourceText, raw: &Raw, span: Range<usize>) -> Result<GradientSpec> {
    let Some(model) = &raw.model else {
        return Err(src.error_at(
            span,
            "model",
            "[wallclock] needs a [model] table (kind = \"mlr\" or \"cnn\")",
        ));
    };
    let spec = GradientSpec::parse(src, model.span(), model.get_ref())?;
    if !matches!(spec, GradientSpec::Mlr(_) | GradientSpec::Cnn(_)) {
        return Err(src.error_at(
            model.span(),
            "model.kind",
            "[wallclock] trains `mlr` or `cnn` (a classifier with gradients and blocks)",
        ));
    }
    Ok(spec)
}

/// The optional `[cost]` table: prices per node-hour.
fn prices(src: &SourceText, raw: &Raw) -> Result<Option<Prices>> {
    raw.cost
        .as_ref()
        .map(|c| -> Result<Prices> {
            let s = c.span();
            Ok(Prices {
                on_demand: non_negative(src, s.clone(), "cost.on_demand", c.get_ref().on_demand)?,
                spot: non_negative(src, s, "cost.spot", c.get_ref().spot)?,
            })
        })
        .transpose()
}

/// The `[checkpoint]` table of a wall-clock scenario: the full checkpoint's
/// interval and costs, and the default persist mode of its series.
fn checkpoint_cost(
    src: &SourceText,
    raw: &Raw,
    span: std::ops::Range<usize>,
) -> Result<CheckpointCost> {
    let Some(ck) = &raw.checkpoint else {
        return Err(src.error_at(
            span,
            "checkpoint",
            "[wallclock] needs a [checkpoint] table (interval, write_time)",
        ));
    };
    let cspan = ck.span();
    let c = ck.get_ref();
    let interval = match c.interval {
        Some(i) => positive(src, cspan.clone(), "checkpoint.interval", i)?,
        None => {
            return Err(src.error_at(
                cspan,
                "checkpoint.interval",
                "missing (seconds between full checkpoints)",
            ));
        }
    };
    let asynchronous = persist_mode(src, cspan.clone(), "checkpoint.persist", &c.persist)?;
    Ok(CheckpointCost {
        interval,
        write_time: non_negative(src, cspan.clone(), "checkpoint.write_time", c.write_time)?,
        cache_time: non_negative(src, cspan.clone(), "checkpoint.cache_time", c.cache_time)?,
        asynchronous,
    })
}

/// One `[[series]]` table of a wall-clock scenario: its strategy and the
/// strategy's fields, its persist mode (default: the `[checkpoint]` table's)
/// and a name distinct from the `earlier` series'.
fn wallclock_series(
    src: &SourceText,
    rs: &Spanned<RawSeries>,
    default_async: bool,
    earlier: &[WallclockSeries],
) -> Result<WallclockSeries> {
    let s = rs.span();
    let r = rs.get_ref();
    let at = |field: &str, msg: String| src.error_at(s.clone(), field, msg);
    if r.recovery.is_some()
        || r.checkpoint_interval.is_some()
        || r.checkpoint_fraction.is_some()
        || r.checkpoint_budget.is_some()
    {
        return Err(at("series", "`recovery`, `checkpoint_interval`, `checkpoint_fraction` and `checkpoint_budget` belong to [iterations] scenarios; [wallclock] series take a `strategy`".into()));
    }
    let Some(name) = &r.strategy else {
        return Err(at(
            "series.strategy",
            "missing; expected one of: checkpoint-restart, scar, chain-replication, stateless-ps"
                .into(),
        ));
    };
    let strategy = strategy(src, rs, name)?;
    let asynchronous = match &r.persist {
        Some(p) => persist_mode(src, s.clone(), "series.persist", p)?,
        None => default_async,
    };
    let name = r
        .name
        .clone()
        .unwrap_or_else(|| strategy.name().to_string());
    series::check_name(src, s.clone(), &name, NameRule::Unstated)?;
    if earlier.iter().any(|x| x.name == name) {
        return Err(at(
            "series.name",
            format!("`{name}` appears twice; give the series distinct names"),
        ));
    }
    Ok(WallclockSeries {
        name,
        strategy,
        asynchronous,
    })
}

/// A series' `strategy` and the fields that belong to it (any other
/// strategy's field is an error).
fn strategy(src: &SourceText, rs: &Spanned<RawSeries>, name: &str) -> Result<Strategy> {
    let s = rs.span();
    let r = rs.get_ref();
    let at = |field: &str, msg: String| src.error_at(s.clone(), field, msg);
    let only = |allowed: &[&str]| -> Result<()> {
        for (f, set) in [
            ("fraction", r.fraction.is_some()),
            ("chain", r.chain.is_some()),
            ("hop_time", r.hop_time.is_some()),
            ("replicate", r.replicate.is_some()),
            ("restore_from", r.restore_from.is_some()),
            ("damping_threshold", r.damping_threshold.is_some()),
            ("damped_learning_rate", r.damped_learning_rate.is_some()),
        ] {
            if set && !allowed.contains(&f) {
                return Err(at(
                    &format!("series.{f}"),
                    format!("does not apply to strategy `{name}`"),
                ));
            }
        }
        Ok(())
    };
    Ok(match name {
        "checkpoint-restart" => {
            only(&[])?;
            Strategy::CheckpointRestart
        }
        "scar" => {
            only(&["fraction"])?;
            let f = r.fraction.unwrap_or(0.25);
            if !(f > 0.0 && f <= 1.0) {
                return Err(at("series.fraction", format!("{f} is outside (0, 1]")));
            }
            Strategy::Scar { fraction: f }
        }
        "chain-replication" => {
            only(&["chain", "hop_time", "replicate"])?;
            let chain = r.chain.unwrap_or(3);
            if !(1..=100).contains(&chain) {
                return Err(at("series.chain", format!("{chain} is outside 1..=100")));
            }
            let replicate = match r.replicate.as_deref() {
                None => Replication::default(),
                Some(name) => Replication::parse(name).ok_or_else(|| {
                    at(
                        "series.replicate",
                        format!("unknown `{name}`; expected every-update or checkpoint"),
                    )
                })?,
            };
            if replicate == Replication::Checkpoint && r.hop_time.is_some() {
                return Err(at(
                    "series.hop_time",
                    "applies to replicate = \"every-update\" only (with \"checkpoint\" the chain is fed by the checkpoint writes)".into(),
                ));
            }
            Strategy::ChainReplication {
                chain,
                replicate,
                hop_time: non_negative(
                    src,
                    s.clone(),
                    "series.hop_time",
                    r.hop_time.unwrap_or(0.0),
                )?,
            }
        }
        "stateless-ps" => {
            only(&["damping_threshold", "damped_learning_rate", "restore_from"])?;
            let restore_from = match r.restore_from.as_deref() {
                None => RestoreFrom::default(),
                Some(name) => RestoreFrom::parse(name).ok_or_else(|| {
                    at(
                        "series.restore_from",
                        format!("unknown `{name}`; expected checkpoint or workers"),
                    )
                })?,
            };
            Strategy::StatelessPs {
                restore_from,
                damping_threshold: r.damping_threshold.unwrap_or(10),
                damped_learning_rate: non_negative(
                    src,
                    s.clone(),
                    "series.damped_learning_rate",
                    r.damped_learning_rate.unwrap_or(1e-5),
                )?,
            }
        }
        other => {
            return Err(at(
                "series.strategy",
                format!(
                    "unknown strategy `{other}`; expected one of: checkpoint-restart, scar, chain-replication, stateless-ps"
                ),
            ));
        }
    })
}
