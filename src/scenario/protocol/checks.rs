//! The checks that need the whole protocol scenario: its size within the
//! limits, and every point's K against its protocol and P.

use std::ops::Range;

use anyhow::Result;

use super::{KChoice, Measure, ProtocolScenario, ProtocolSeries, Raw};
use crate::cluster::Delay;
use crate::scenario::{SourceText, limits};

/// The run's size within the limits: the number of points, and the events
/// one trial simulates (`limits`).
pub(super) fn check_size(
    src: &SourceText,
    raw: &Raw,
    workers: &[usize],
    compute_time: &Delay,
    communication_time: Option<&Delay>,
    measure: &Measure,
    series: &[ProtocolSeries],
) -> Result<()> {
    let point_count: u128 = series
        .iter()
        .map(|s| {
            workers
                .iter()
                .map(|&p| match &s.k {
                    KChoice::Schedule(_) | KChoice::Rule(_) => 1,
                    KChoice::Values(v) => v.len() as u128,
                    KChoice::Divisors => limits::divisor_count(p) as u128,
                })
                .sum::<u128>()
        })
        .sum();
    limits::points(src, &raw.series.span(), "series", point_count)?;
    let max_workers = workers.iter().copied().max().unwrap_or(1) as f64;
    let per_gradient =
        limits::typical_delay(compute_time) + communication_time.map_or(0.0, limits::typical_delay);
    match measure {
        Measure::Training(t) => limits::events(
            src,
            &raw.training.as_ref().map_or(0..0, |t| t.span()),
            "training.horizon",
            t.horizon / per_gradient.max(f64::MIN_POSITIVE) * max_workers,
            &format!(
                "the horizon of {} s with gradients of about {per_gradient:.3e} s on up to {max_workers} workers",
                t.horizon
            ),
        )?,
        Measure::Runtime(r) => {
            // Every update takes up to K gradients (K ≤ 64·P is checked below).
            let max_k = series
                .iter()
                .map(|s| match &s.k {
                    KChoice::Values(v) => v.iter().copied().max().unwrap_or(1),
                    KChoice::Divisors => workers.iter().copied().max().unwrap_or(1),
                    KChoice::Schedule(sch) => sch.max_k(),
                    KChoice::Rule(r) => r.max.unwrap_or(workers.iter().copied().max().unwrap_or(1)),
                })
                .max()
                .unwrap_or(1) as f64;
            limits::events(
                src,
                &raw.runtime.as_ref().map_or(0..0, |r| r.span()),
                "runtime.updates",
                (r.warmup_updates + r.updates) as f64 * max_k.max(max_workers),
                &format!(
                    "{} updates of up to {} gradients each",
                    r.warmup_updates + r.updates,
                    max_k.max(max_workers)
                ),
            )?;
        }
    }
    Ok(())
}

/// Every point of the scenario: distinct names per P, a K rule's start at
/// most its max, and K within what the protocol allows.
pub(super) fn check_points(src: &SourceText, raw: &Raw, scenario: &ProtocolScenario) -> Result<()> {
    let points = scenario.points();
    let spans: Vec<Range<usize>> = raw.series.get_ref().iter().map(|s| s.span()).collect();
    let mut seen = std::collections::HashSet::new();
    for p in &points {
        let s = &scenario.series[p.series];
        let at = |field: &str, msg: String| src.error_at(spans[p.series].clone(), field, msg);
        if !seen.insert((p.label.clone(), p.workers)) {
            return Err(at(
                "series.name",
                format!(
                    "series `{}` appears twice at P = {}; give the series distinct names",
                    p.label, p.workers
                ),
            ));
        }
        let field = if p.rule.is_some() {
            "series.k_rule.max"
        } else {
            "series.k"
        };
        if let Some(rule) = p.rule
            && rule.start > rule.max
        {
            return Err(at(
                "series.k_rule.start",
                format!(
                    "start = {} is above max = {} (max defaults to P = {}); K only rises, so start ≤ max",
                    rule.start, rule.max, p.workers
                ),
            ));
        }
        if s.protocol.needs_distinct_workers() && p.max_k() > p.workers {
            return Err(at(
                field,
                format!(
                    "K = {} exceeds P = {} workers: {} takes one gradient per worker, so K ≤ P",
                    p.max_k(),
                    p.workers,
                    s.protocol.name()
                ),
            ));
        }
        if p.max_k() > 64 * p.workers {
            return Err(at(
                field,
                format!(
                    "K = {} is more than 64·P; that is surely a mistake",
                    p.max_k()
                ),
            ));
        }
    }
    Ok(())
}
