//! The `[interval]` measure of a `faults` scenario: Daly's checkpoint-interval
//! question, and the bound on how long one simulated timeline may take.

use anyhow::Result;
use toml::Spanned;

use super::{IntervalConfig, Raw, RawInterval, non_negative, positive};
use crate::scenario::{SourceText, limits};

pub(super) fn interval(
    src: &SourceText,
    raw: &Raw,
    i: &Spanned<RawInterval>,
) -> Result<IntervalConfig> {
    let span = i.span();
    let r = i.get_ref();
    if raw.model.is_some()
        || raw.checkpoint.is_some()
        || raw.failure.is_some()
        || !raw.series.as_deref().unwrap_or(&[]).is_empty()
    {
        return Err(src.error_at(span, "interval", "[interval] scenarios take no [model], [checkpoint], [failure] or [[series]]: δ, R and the MTBFs are set in [interval]"));
    }
    if r.mtbf.is_empty() {
        return Err(src.error_at(span, "interval.mtbf", "give at least one MTBF (seconds)"));
    }
    limits::list_len(src, &span, "interval.mtbf", r.mtbf.len())?;
    for &m in &r.mtbf {
        positive(src, span.clone(), "interval.mtbf", m)?;
    }
    limits::distinct_f64(src, &span, "interval.mtbf", &r.mtbf)?;
    let f = &r.factors;
    if !(f.from > 0.0 && f.to > f.from && f.to.is_finite() && (2..=1000).contains(&f.points)) {
        return Err(src.error_at(
            span,
            "interval.factors",
            "need 0 < from < to and 2 ≤ points ≤ 1000",
        ));
    }
    // Log-spaced factors of Daly's optimum, with 1 included.
    let mut factors: Vec<f64> = (0..f.points)
        .map(|k| f.from * (f.to / f.from).powf(k as f64 / (f.points - 1) as f64))
        .collect();
    if f.from < 1.0 && f.to > 1.0 && !factors.iter().any(|&x| (x - 1.0).abs() < 1e-12) {
        factors.push(1.0);
        factors.sort_by(f64::total_cmp);
    }
    let cfg = IntervalConfig {
        solve_time: positive(src, span.clone(), "interval.solve_time", r.solve_time)?,
        checkpoint_time: positive(
            src,
            span.clone(),
            "interval.checkpoint_time",
            r.checkpoint_time,
        )?,
        restart_time: non_negative(src, span.clone(), "interval.restart_time", r.restart_time)?,
        mtbf: r.mtbf.clone(),
        factors,
    };
    check_interval_steps(src, &span, &cfg)?;
    Ok(cfg)
}

/// Most steps (checkpoint segments plus failures) of one checkpoint/restart
/// timeline, expected; a timeline that needs more (failures far more often
/// than a segment and its checkpoint take) would practically never finish.
pub(crate) const MAX_TIMELINE_STEPS: f64 = 1e7;

/// Refuses intervals whose timelines would practically never finish: the
/// expected number of failures of one timeline is its expected wall time
/// ([`daly::expected_wall_time`], exact for the simulation) over the MTBF.
fn check_interval_steps(
    src: &SourceText,
    span: &std::ops::Range<usize>,
    c: &IntervalConfig,
) -> Result<()> {
    use crate::theory::daly;
    for &m in &c.mtbf {
        for &f in &c.factors {
            let tau = f * daly::daly_interval(c.checkpoint_time, m);
            let wall =
                daly::expected_wall_time(c.solve_time, tau, c.checkpoint_time, c.restart_time, m);
            let steps = wall / m + c.solve_time / tau;
            if steps.is_nan() || steps > MAX_TIMELINE_STEPS {
                return Err(src.error_at(
                    span.clone(),
                    "interval.mtbf",
                    format!(
                        "MTBF {m} s against checkpoints of {} s (interval {tau:.3e} s) would take about \
                         {steps:.1e} failures and segments per timeline to finish {} s of work, more than the \
                         limit of {MAX_TIMELINE_STEPS:e}: failures come far faster than a segment and its \
                         checkpoint can complete; raise the MTBF or shorten the checkpoint",
                        c.checkpoint_time, c.solve_time
                    ),
                ));
            }
        }
    }
    Ok(())
}
