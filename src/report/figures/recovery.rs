//! Figures of the `recovery` kind: SCAR Figure 6 (partial vs full recovery)
//! and Figure 7 (prioritized partial checkpoints), and a plain layout for
//! the other sweep axes.

use anyhow::Result;

use super::chart::{Axis, Chart, Colour, Point, Series, Style};
use super::claims::{Claim, Estimate, paired_difference, paired_reduction};
use super::paper::parse_panel;
use super::render::tick_label;
use super::results::{Results, SummaryRow};
use super::{Layout, humanize};
use crate::report::columns::recovery::{
    SummaryColumns, SummaryRow as Summary, TrialColumns, TrialRow,
};

/// Columns of a recovery scenario's `summary.csv`.
const SUMMARY: SummaryColumns = Summary::NAMES;
/// Columns of its `trials.csv`.
const TRIAL: TrialColumns = TrialRow::NAMES;

/// SCAR Figure 6: x = fraction of failed parameters, y = rework iterations,
/// one line per series (full, partial) with 95% CI error bars.
pub(crate) struct PartialRecovery;

/// SCAR Figure 7: x = checkpoint frequency relative to full checkpoints
/// (1/r for the CSV's checkpoint fraction r: 1, 2, 4, 8, evenly spaced on a
/// log axis), y = rework iterations, one line per selector with error bars,
/// and the traditional checkpoint (a reference series) as a dashed black line.
pub(crate) struct PriorityCheckpoint;

/// Any other recovery sweep (PS nodes lost, checkpoint interval, failure
/// probability): rework iterations against the swept value.
pub(crate) struct RecoverySweep;

/// The SCAR §5.3 claims about Figure 6: (lost fraction, label, paper's range in %).
pub(crate) const PARTIAL_CLAIMS: [(f64, &str, (f64, f64)); 3] = [
    (0.25, "1/4", (59.0, 89.0)),
    (0.5, "1/2", (31.0, 62.0)),
    (0.75, "3/4", (12.0, 42.0)),
];

/// The SCAR §5.4 claim about Figure 7: priority checkpoints of this fraction
/// (at 1/r = 8 times the frequency) vs traditional checkpoints, range in %.
pub(crate) const PRIORITY_CLAIM: (f64, (f64, f64)) = (0.125, (78.0, 95.0));

impl Layout for PartialRecovery {
    fn name(&self) -> &'static str {
        "partial vs full recovery (SCAR Fig. 6 layout)"
    }

    fn chart(&self, r: &Results) -> Result<Chart> {
        let rows = r.rows()?;
        let xs = distinct_x(&rows, r, |x| x);
        series_chart(
            r,
            &rows,
            Axis::linear("Fraction of failed parameters")
                .with_ticks(xs)
                .fractions(),
            |x| x,
        )
    }

    fn claims(&self, r: &Results) -> Result<Vec<Claim>> {
        let rows = r.rows()?;
        let Some(full) = find_series(r, &rows, |r, s| {
            r.series_value(s, SUMMARY.recovery).as_deref() == Some("full")
        }) else {
            return Ok(Vec::new());
        };
        let Some(partial) = find_series(r, &rows, |r, s| {
            r.series_value(s, SUMMARY.recovery).as_deref() == Some("partial")
        }) else {
            return Ok(Vec::new());
        };
        let figure = figure_key(r, "SCAR Fig. 6");
        let mut out = Vec::new();
        for (f, label, range) in PARTIAL_CLAIMS {
            let (Some(a), Some(b)) = (row_at(&rows, &partial, f), row_at(&rows, &full, f)) else {
                continue;
            };
            let new = r.trial_values(&partial, f, TRIAL.rework_iterations)?;
            let old = r.trial_values(&full, f, TRIAL.rework_iterations)?;
            out.push(Claim {
                figure: figure.clone(),
                quantity: format!("rework reduction, {partial} vs {full} recovery, {label} lost"),
                measured: paired_reduction(&new, &old),
                paper_range: range,
                detail: format!("{full} {}; {partial} {}", mean_ci(b), mean_ci(a)),
            });
        }
        Ok(out)
    }
}

impl Layout for PriorityCheckpoint {
    fn name(&self) -> &'static str {
        "prioritized checkpoints (SCAR Fig. 7 layout)"
    }

    fn chart(&self, r: &Results) -> Result<Chart> {
        let rows = r.rows()?;
        let xs = distinct_x(&rows, r, frequency);
        series_chart(
            r,
            &rows,
            Axis::linear("Checkpoint frequency relative to full checkpoints (1/r)")
                .log2()
                .with_ticks(xs),
            frequency,
        )
    }

    fn claims(&self, r: &Results) -> Result<Vec<Claim>> {
        let rows = r.rows()?;
        let Some(priority) = find_series(r, &rows, |r, s| partial_with(r, s, true)) else {
            return Ok(Vec::new());
        };
        let Some(traditional) = find_series(r, &rows, |r, s| r.is_reference(s)) else {
            return Ok(Vec::new());
        };
        let (fraction, range) = PRIORITY_CLAIM;
        let Some(a) = row_at(&rows, &priority, fraction) else {
            return Ok(Vec::new());
        };
        let Some(b) = rows.iter().find(|row| row.series == traditional) else {
            return Ok(Vec::new());
        };
        let new = r.trial_values(&priority, fraction, TRIAL.rework_iterations)?;
        let old = r.trial_values(&traditional, b.x, TRIAL.rework_iterations)?;
        Ok(vec![Claim {
            figure: figure_key(r, "SCAR Fig. 7"),
            quantity: format!(
                "rework reduction, {priority} 1/{} checkpoints + partial recovery vs {traditional}",
                tick_label(1.0 / fraction)
            ),
            measured: paired_reduction(&new, &old),
            paper_range: range,
            detail: format!("{traditional} {}; {priority} {}", mean_ci(b), mean_ci(a)),
        }])
    }

    /// SCAR §5.4's other claim: at r = 1/8 priority needs less rework than
    /// round-robin and random. Each comparison is a paired difference over
    /// the trials (every selector saw the same failures), with the mean
    /// perturbation ‖δ‖ each selector left behind — what the priority
    /// selector minimises (§4.2) and Theorem 1 bounds the rework by.
    fn findings(&self, r: &Results) -> Result<Vec<String>> {
        let rows = r.rows()?;
        let fraction = PRIORITY_CLAIM.0;
        let Some(priority) = find_series(r, &rows, |r, s| partial_with(r, s, true)) else {
            return Ok(Vec::new());
        };
        let others: Vec<String> = r
            .series_names()?
            .into_iter()
            .filter(|s| partial_with(r, s, false) && row_at(&rows, s, fraction).is_some())
            .collect();
        if others.is_empty() || row_at(&rows, &priority, fraction).is_none() {
            return Ok(Vec::new());
        }
        let rework = r.trial_values(&priority, fraction, TRIAL.rework_iterations)?;
        let mut comparisons = Vec::new();
        for other in &others {
            let theirs = r.trial_values(other, fraction, TRIAL.rework_iterations)?;
            if let Some(d) = paired_difference(&rework, &theirs) {
                comparisons.push(format!(
                    "{priority} − {other} {} ({})",
                    estimate(&d),
                    ordering(&d, &priority)
                ));
            }
        }
        if comparisons.is_empty() {
            return Ok(Vec::new());
        }
        let mut text = format!(
            "`{}` at r = 1/{} (rework iterations, paired over the trials): {}.",
            r.name(),
            tick_label(1.0 / fraction),
            comparisons.join("; ")
        );
        // Older results folders may lack the column; the comparison stands without it.
        let norms: Vec<(String, f64)> = std::iter::once(&priority)
            .chain(&others)
            .filter_map(|s| {
                let v = r.trial_values(s, fraction, TRIAL.perturbation_norm).ok()?;
                (!v.is_empty()).then(|| {
                    (
                        s.clone(),
                        v.iter().map(|p| p.1).sum::<f64>() / v.len() as f64,
                    )
                })
            })
            .collect();
        if norms.len() == others.len() + 1 {
            let smallest = norms
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|n| n.0.as_str());
            let list: Vec<String> = norms
                .iter()
                .map(|(s, v)| format!("{s} {}", tick_label(*v)))
                .collect();
            text.push_str(&format!(
                " Mean perturbation ‖δ‖ after recovery: {} ({}).",
                list.join(", "),
                if smallest == Some(priority.as_str()) {
                    "priority leaves the smallest, as §4.2 intends".to_string()
                } else {
                    format!("{} leaves the smallest", smallest.unwrap_or("?"))
                }
            ));
        }
        Ok(vec![text])
    }
}

/// SCAR §5.4's ordering at r = 1/8, priority < round-robin < random, as
/// the paired differences of rework iterations between neighbours: for each
/// of `priority − round` and `round − random` whose two series (swept,
/// partial recovery, that selector) are in `r` at r = 1/8, its label and
/// estimate (negative: the ordering holds at that step). `None` estimates
/// when fewer than two trials pair up.
pub(crate) fn selector_ordering(r: &Results) -> Result<Vec<(String, Option<Estimate>)>> {
    let rows = r.rows()?;
    let fraction = PRIORITY_CLAIM.0;
    let with = |selector: &str| {
        find_series(r, &rows, |r, s| {
            !r.is_reference(s)
                && r.series_value(s, SUMMARY.recovery).as_deref() == Some("partial")
                && r.series_value(s, SUMMARY.selector).as_deref() == Some(selector)
        })
        .filter(|s| row_at(&rows, s, fraction).is_some())
    };
    let mut out = Vec::new();
    for (a, b) in [("priority", "round"), ("round", "random")] {
        let (Some(sa), Some(sb)) = (with(a), with(b)) else {
            continue;
        };
        let d = paired_difference(
            &r.trial_values(&sa, fraction, TRIAL.rework_iterations)?,
            &r.trial_values(&sb, fraction, TRIAL.rework_iterations)?,
        );
        out.push((
            format!(
                "{sa} < {sb} at r = 1/{} (paired rework difference)",
                tick_label(1.0 / fraction)
            ),
            d,
        ));
    }
    Ok(out)
}

/// Whether `series` is a swept (not reference) series with partial recovery
/// whose selector is (`priority` = true) or is not (false) the priority one.
fn partial_with(r: &Results, series: &str, priority: bool) -> bool {
    !r.is_reference(series)
        && r.series_value(series, SUMMARY.recovery).as_deref() == Some("partial")
        && (r.series_value(series, SUMMARY.selector).as_deref() == Some("priority")) == priority
}

/// "−0.67 [−0.91, −0.43]".
fn estimate(e: &Estimate) -> String {
    format!("{:.2} [{:.2}, {:.2}]", e.value, e.lo, e.hi)
}

/// Which way a paired difference (`first` − other) points at 95%.
fn ordering(d: &Estimate, first: &str) -> String {
    if d.hi < 0.0 {
        format!("{first} lower")
    } else if d.lo > 0.0 {
        format!("{first} higher")
    } else {
        "no significant difference".to_string()
    }
}

impl Layout for RecoverySweep {
    fn name(&self) -> &'static str {
        "recovery sweep"
    }

    fn chart(&self, r: &Results) -> Result<Chart> {
        let rows = r.rows()?;
        let xs = distinct_x(&rows, r, |x| x);
        let label = match r.x_name().as_deref() {
            Some("lost_ps_nodes") => "PS nodes lost".to_string(),
            Some("checkpoint_interval") => "Full-checkpoint interval C (iterations)".to_string(),
            Some("failure_probability") => "Failure probability per iteration p".to_string(),
            Some(other) => humanize(other),
            None => "x".to_string(),
        };
        let axis = Axis::linear(label);
        let axis = if xs.len() <= 10 {
            axis.with_ticks(xs)
        } else {
            axis
        };
        series_chart(r, &rows, axis, |x| x)
    }
}

/// Checkpoint frequency relative to full checkpoints: 1/r.
fn frequency(r: f64) -> f64 {
    if r > 0.0 { 1.0 / r } else { f64::NAN }
}

/// Distinct x values of the non-reference series, mapped and sorted.
fn distinct_x(rows: &[SummaryRow], r: &Results, map: impl Fn(f64) -> f64) -> Vec<f64> {
    let mut xs: Vec<f64> = rows
        .iter()
        .filter(|row| !r.is_reference(&row.series))
        .map(|row| map(row.x))
        .filter(|x| x.is_finite())
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * a.abs().max(1.0));
    xs
}

/// The chart shared by the recovery layouts: rework iterations (mean and
/// 95% CI) per series against `map(x)`; reference series as dashed lines.
fn series_chart(
    r: &Results,
    rows: &[SummaryRow],
    x: Axis,
    map: impl Fn(f64) -> f64,
) -> Result<Chart> {
    let mut series = Vec::new();
    let mut slot = 0;
    for name in r.series_names()? {
        let mut points: Vec<Point> = rows
            .iter()
            .filter(|row| row.series == name)
            .map(|row| Point::with_ci(map(row.x), row.mean, row.lo, row.hi))
            .collect();
        points.sort_by(|a, b| a.x.total_cmp(&b.x));
        if r.is_reference(&name) {
            // E.g. "traditional (r = 1, full recovery)": what the dashed line is.
            let what: Vec<String> = [
                r.series_value(&name, SUMMARY.checkpoint_fraction)
                    .filter(|v| !v.is_empty())
                    .map(|v| format!("r = {v}")),
                r.series_value(&name, SUMMARY.recovery)
                    .filter(|v| !v.is_empty())
                    .map(|v| format!("{v} recovery")),
            ]
            .into_iter()
            .flatten()
            .collect();
            let label = if what.is_empty() {
                "reference".to_string()
            } else {
                what.join(", ")
            };
            series.push(Series {
                name: format!("{name} ({label})"),
                style: Style::HorizontalReference,
                colour: Colour::Black,
                points,
            });
        } else {
            series.push(Series {
                name,
                style: Style::LinesWithErrorBars,
                colour: Colour::Palette(slot),
                points,
            });
            slot += 1;
        }
    }
    let metric = r
        .first_value("metric")
        .unwrap_or_else(|| TRIAL.rework_iterations.into());
    Ok(Chart {
        title: r.title(),
        subtitle: r.subtitle(),
        x,
        y: Axis::linear(humanize(&metric)).anchored_at_zero(),
        series,
        dodge: true,
    })
}

/// The first series (in summary order) that satisfies `pred`.
fn find_series(
    r: &Results,
    rows: &[SummaryRow],
    pred: impl Fn(&Results, &str) -> bool,
) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for row in rows {
        if seen.contains(&row.series.as_str()) {
            continue;
        }
        seen.push(&row.series);
        if pred(r, &row.series) {
            return Some(row.series.clone());
        }
    }
    None
}

fn row_at<'a>(rows: &'a [SummaryRow], series: &str, x: f64) -> Option<&'a SummaryRow> {
    rows.iter()
        .find(|row| row.series == series && (row.x - x).abs() <= 1e-9)
}

/// The figure a claim belongs to: the scenario's own (`paper` field), or the default.
fn figure_key(r: &Results, default: &str) -> String {
    r.paper()
        .and_then(|p| parse_panel(&p))
        .map_or_else(|| default.to_string(), |p| p.figure)
}

/// "1.50 [0.59, 2.41]".
fn mean_ci(row: &SummaryRow) -> String {
    if row.lo.is_finite() && row.hi.is_finite() {
        format!("{:.2} [{:.2}, {:.2}]", row.mean, row.lo, row.hi)
    } else {
        format!("{:.2}", row.mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Table;
    use crate::report::figures::chart::Scale;
    use crate::report::figures::layout_for;
    use serde_json::json;

    /// Results of a handcrafted recovery scenario: `rows` are
    /// (series, x, recovery, selector, per-trial rework values).
    fn results(x_name: &str, rows: &[(&str, f64, &str, &str, &[f64])], reference: &str) -> Results {
        let mut summary = Table::new([
            "scenario",
            "series",
            "x_name",
            "x",
            "metric",
            "trials",
            "mean",
            "ci95_low",
            "ci95_high",
            "recovery",
            "selector",
            "data",
        ]);
        let mut trials = Table::new(["series", "x", "trial", "rework_iterations"]);
        for (series, x, recovery, selector, values) in rows {
            let s = crate::stats::Summary::of(values);
            summary.push(
                [
                    "t",
                    series,
                    x_name,
                    &x.to_string(),
                    "rework_iterations",
                    &values.len().to_string(),
                    &s.mean.to_string(),
                    &s.ci95_low.to_string(),
                    &s.ci95_high.to_string(),
                    recovery,
                    selector,
                    "synthetic",
                ]
                .map(String::from)
                .to_vec(),
            );
            for (t, v) in values.iter().enumerate() {
                trials.push(vec![
                    series.to_string(),
                    x.to_string(),
                    t.to_string(),
                    v.to_string(),
                ]);
            }
        }
        let names: Vec<&str> = rows.iter().map(|r| r.0).collect();
        let series: Vec<_> = names
            .iter()
            .map(|n| json!({"name": n, "reference": *n == reference}))
            .collect();
        Results {
            dir: "t".into(),
            manifest: json!({
                "scenario": {"meta": {"kind": "recovery", "name": "t", "title": "T",
                                      "paper": "SCAR Fig. 7(e)", "trials": 4},
                             "series": series},
                "trials": 4,
                "data": {"dataset": "covtype", "provenance": {"kind": "synthetic", "scale": 0.05}},
            }),
            summary,
            trials: Some(trials),
        }
    }

    #[test]
    fn partial_figure_and_its_claims() {
        let full: &[f64] = &[4.0, 8.0, 4.0, 8.0];
        let r = results(
            "lost_fraction",
            &[
                ("full", 0.25, "full", "priority", full),
                ("full", 0.5, "full", "priority", full),
                (
                    "partial",
                    0.25,
                    "partial",
                    "priority",
                    &[1.0, 2.0, 1.0, 2.0],
                ),
                ("partial", 0.5, "partial", "priority", &[3.0, 5.0, 2.0, 6.0]),
            ],
            "",
        );
        let layout = layout_for(&r);
        let chart = layout.chart(&r).unwrap();
        assert_eq!(chart.x.label, "Fraction of failed parameters");
        assert_eq!(chart.y.label, "Rework iterations");
        assert_eq!(chart.x.ticks, Some(vec![0.25, 0.5]));
        assert_eq!(chart.series.len(), 2);
        assert!(
            chart
                .series
                .iter()
                .all(|s| s.style == Style::LinesWithErrorBars)
        );
        assert!(chart.series[0].points.iter().all(|p| p.has_ci()));
        assert!(
            chart
                .subtitle
                .contains("synthetic stand-in for CoverType (scale 0.05)")
        );
        assert!(chart.subtitle.contains("4 trials per point"));
        let claims = layout.claims(&r).unwrap();
        assert_eq!(claims.len(), 2, "1/4 and 1/2 are in the sweep, 3/4 is not");
        assert_eq!(claims[0].paper_range, (59.0, 89.0));
        assert_eq!(claims[0].figure, "SCAR Fig. 7");
        let m = claims[0].measured.unwrap();
        assert!(
            (m.value - 75.0).abs() < 1e-9,
            "partial = full / 4: {}",
            m.value
        );
        let m = claims[1].measured.unwrap();
        assert!((m.value - (1.0 - 16.0 / 24.0) * 100.0).abs() < 1e-9);
    }

    #[test]
    fn priority_figure_plots_frequency_and_a_dashed_reference() {
        let r = results(
            "checkpoint_fraction",
            &[
                (
                    "priority",
                    1.0,
                    "partial",
                    "priority",
                    &[4.0, 4.0, 2.0, 2.0],
                ),
                (
                    "priority",
                    0.125,
                    "partial",
                    "priority",
                    &[1.0, 0.0, 1.0, 0.0],
                ),
                ("random", 1.0, "partial", "random", &[4.0, 4.0, 2.0, 2.0]),
                ("random", 0.125, "partial", "random", &[5.0, 4.0, 3.0, 4.0]),
                (
                    "traditional",
                    1.0,
                    "full",
                    "priority",
                    &[6.0, 4.0, 6.0, 4.0],
                ),
            ],
            "traditional",
        );
        let layout = layout_for(&r);
        let chart = layout.chart(&r).unwrap();
        assert_eq!(chart.x.scale, Scale::Log2);
        assert_eq!(chart.x.ticks, Some(vec![1.0, 8.0]), "1/r, not r");
        let refs: Vec<_> = chart
            .series
            .iter()
            .filter(|s| s.style == Style::HorizontalReference)
            .collect();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].colour, Colour::Black);
        assert_eq!(refs[0].points[0].y, 5.0);
        let prio = &chart.series[0];
        assert_eq!(
            prio.points.iter().map(|p| p.x).collect::<Vec<_>>(),
            vec![1.0, 8.0]
        );
        let claims = layout.claims(&r).unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].paper_range, (78.0, 95.0));
        let m = claims[0].measured.unwrap();
        assert!((m.value - 90.0).abs() < 1e-9, "0.5 vs 5: {}", m.value);
        // Paired: priority − random = (−4, −4, −2, −4) at 1/8; the reference is not compared.
        let found = layout.findings(&r).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("priority − random -3.50 [")
                && found[0].contains("(priority lower)")
                && !found[0].contains("traditional"),
            "{}",
            found[0]
        );
        // This fixture has no perturbation_norm column: no norms are claimed.
        assert!(!found[0].contains("‖δ‖"), "{}", found[0]);
    }

    #[test]
    fn priority_findings_say_when_the_selectors_do_not_differ() {
        let same: &[f64] = &[1.0, 3.0, 2.0, 2.0];
        let r = results(
            "checkpoint_fraction",
            &[
                ("priority", 0.125, "partial", "priority", same),
                ("round", 0.125, "partial", "round", &[2.0, 2.0, 2.0, 2.0]),
                ("random", 0.125, "partial", "random", &[0.0, 1.0, 1.0, 1.0]),
            ],
            "",
        );
        let found = layout_for(&r).findings(&r).unwrap();
        assert!(
            found[0].contains("priority − round 0.00 [")
                && found[0].contains("(no significant difference)")
                && found[0].contains("priority − random 1.25 [0.45, 2.05] (priority higher)"),
            "{}",
            found[0]
        );
    }

    #[test]
    fn other_kinds_fall_back_to_the_generic_layout() {
        let mut r = results("wall_time", &[("sync", 1.0, "", "", &[1.0, 2.0])], "");
        r.manifest["scenario"]["meta"]["kind"] = json!("wallclock");
        let layout = layout_for(&r);
        assert_eq!(layout.name(), "generic series plot");
        let chart = layout.chart(&r).unwrap();
        assert_eq!(chart.x.label, "Wall time");
        assert!(layout.claims(&r).unwrap().is_empty());
        // A long series (a time series on a grid) is drawn with a CI band.
        let values: Vec<f64> = vec![1.0, 2.0];
        let rows: Vec<(&str, f64, &str, &str, &[f64])> = (0..30)
            .map(|i| ("sync", i as f64, "", "", values.as_slice()))
            .collect();
        let mut r = results("wall_time", &rows, "");
        r.manifest["scenario"]["meta"]["kind"] = json!("wallclock");
        let chart = layout_for(&r).chart(&r).unwrap();
        assert_eq!(chart.series[0].style, Style::Band);
    }
}
