//! Figures of `faults` scenarios (PS failures in wall-clock time):
//!
//! - `[wallclock]`: accuracy (or loss) against wall time, one band (95% CI
//!   across trials) per strategy with the failure, a plain line per strategy
//!   without it, at the first worker count; black and red vertical lines mark
//!   the PS kill and its (mean) recovery;
//! - `[iterations]`: the convergence metric against wall time (mean time of
//!   each iteration across trials), one band per policy;
//! - `[interval]`: T_wall / T_solve against τ / τ_Daly (log scale), one line
//!   with 95% CI per MTBF, a vertical line at Daly's optimum.

use anyhow::{Context, Result};

use super::Layout;
use super::chart::{Axis, Chart, Colour, Point, Series, Style};
use super::results::Results;
use crate::report::Table;
use crate::report::columns::faults::{
    IncidentColumns, IncidentRow, IntervalSummaryColumns, IntervalSummaryRow,
    IterationsCurveColumns, IterationsCurveRow, OptimumColumns, OptimumRow, WallclockCurveColumns,
    WallclockCurveRow, WallclockSummaryColumns, WallclockSummaryRow,
};

/// Columns of a wall-clock scenario's `summary.csv`.
const W: WallclockSummaryColumns = WallclockSummaryRow::NAMES;
/// Columns of a wall-clock scenario's `curves.csv`.
const C: WallclockCurveColumns = WallclockCurveRow::NAMES;
/// Columns of `incidents.csv`.
const I: IncidentColumns = IncidentRow::NAMES;
/// Columns of an iterations scenario's `curves.csv`.
const K: IterationsCurveColumns = IterationsCurveRow::NAMES;
/// Columns of an interval scenario's `summary.csv`.
const V: IntervalSummaryColumns = IntervalSummaryRow::NAMES;
/// Columns of `optimum.csv`.
const O: OptimumColumns = OptimumRow::NAMES;

/// Axis labels (checked by the tests).
pub const WALLCLOCK_X: &str = "Wall time (s)";
/// Y label of wall-clock figures with accuracy.
pub const WALLCLOCK_Y_ACCURACY: &str = "Accuracy (loss subsample)";
/// Y label of wall-clock figures without accuracy.
pub(crate) const WALLCLOCK_Y_LOSS: &str = "Loss (loss subsample)";
/// X label of interval figures.
pub const INTERVAL_X: &str = "Checkpoint interval / Daly's optimum";
/// Y label of interval figures.
pub const INTERVAL_Y: &str = "Wall time / solve time";
/// Y label of iteration figures.
pub const ITERATIONS_Y: &str = "Convergence metric";

/// The `faults` kind's layouts.
pub(crate) struct Faults;

fn read(r: &Results, file: &str) -> Result<Table> {
    Table::read(&r.dir.join(file)).with_context(|| format!("{} needs {file}", r.dir.display()))
}

fn col(t: &Table, name: &str) -> Result<usize> {
    t.column(name)
        .with_context(|| format!("no `{name}` column (columns: {})", t.header.join(", ")))
}

fn num(s: &str) -> f64 {
    s.trim().parse().unwrap_or(f64::NAN)
}

/// A vertical line across `[lo, hi]` at `x`.
fn vertical(name: String, x: f64, lo: f64, hi: f64, colour: Colour) -> Series {
    Series {
        name,
        style: Style::Line,
        colour,
        points: vec![Point::plain(x, lo), Point::plain(x, hi)],
    }
}

impl Layout for Faults {
    fn name(&self) -> &'static str {
        "faults figure"
    }

    fn chart(&self, r: &Results) -> Result<Chart> {
        match r.manifest["details"]["measure"].as_str() {
            Some("wallclock") => wallclock(r),
            Some("iterations") => iterations(r),
            Some("interval") => interval(r),
            other => anyhow::bail!("unknown faults measure {other:?} in the manifest"),
        }
    }

    fn findings(&self, r: &Results) -> Result<Vec<String>> {
        match r.manifest["details"]["measure"].as_str() {
            Some("wallclock") => {
                let mut found = wallclock_findings(r)?;
                found.extend(cost_findings(r)?);
                Ok(found)
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// Per worker count: each strategy's accuracy at the last grid time
/// strictly before the first failure, right after its recovery (with CI) and at the
/// horizon, so that "kept improving through the outage", "leads right after
/// the recovery" and "final accuracies converge" can be read off.
fn wallclock_findings(r: &Results) -> Result<Vec<String>> {
    let curves = read(r, "curves.csv")?;
    let summary = read(r, "summary.csv")?;
    let Some(inc) = read(r, "incidents.csv").ok().filter(|t| !t.rows.is_empty()) else {
        return Ok(Vec::new());
    };
    let failed = {
        let fc = col(&inc, I.failed)?;
        inc.rows
            .iter()
            .map(|row| num(&row[fc]))
            .fold(f64::INFINITY, f64::min)
    };
    let acc = col(&curves, C.accuracy_mean)?;
    let use_acc = curves.rows.iter().any(|row| num(&row[acc]).is_finite());
    if !use_acc {
        // summary.csv reports the value after the recovery for accuracy only.
        return Ok(Vec::new());
    }
    let what = "accuracy";
    let (gs, gw, gf, gt) = (
        col(&curves, C.series)?,
        col(&curves, C.workers)?,
        col(&curves, C.failures)?,
        col(&curves, C.time)?,
    );
    let gm = col(&curves, C.accuracy_mean)?;
    let (ss, sw, sf) = (
        col(&summary, W.series)?,
        col(&summary, W.workers)?,
        col(&summary, W.failures)?,
    );
    let after = col(&summary, W.accuracy_after_recovery)?;
    let (alo, ahi) = (
        col(&summary, W.accuracy_after_recovery_ci95_low)?,
        col(&summary, W.accuracy_after_recovery_ci95_high)?,
    );
    let rt = col(&summary, W.recovery_time)?;
    let fin = col(&summary, W.final_accuracy)?;
    let mut workers: Vec<String> = Vec::new();
    for row in &summary.rows {
        if !workers.contains(&row[sw]) {
            workers.push(row[sw].clone());
        }
    }
    let mut out = Vec::new();
    for p in &workers {
        let mut parts = Vec::new();
        let mut finals = Vec::new();
        let mut final_off = Vec::new();
        for row in summary.rows.iter().filter(|row| row[sw] == *p) {
            if row[sf] != "on" {
                final_off.push(num(&row[fin]));
                continue;
            }
            let name = &row[ss];
            let at_kill = curves
                .rows
                .iter()
                .filter(|c| c[gs] == *name && c[gw] == *p && c[gf] == "on" && num(&c[gt]) < failed)
                .max_by(|a, b| num(&a[gt]).total_cmp(&num(&b[gt])))
                .map_or(f64::NAN, |c| num(&c[gm]));
            finals.push(num(&row[fin]));
            parts.push(format!(
                "{name} {at_kill:.3} just before the failure → {:.3} [{:.3}, {:.3}] right after \
                 its recovery (first grid time after {:.2} s) → {:.3} at the horizon",
                num(&row[after]),
                num(&row[alo]),
                num(&row[ahi]),
                num(&row[rt]),
                num(&row[fin]),
            ));
        }
        if parts.is_empty() {
            continue;
        }
        let range = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!("{lo:.3}–{hi:.3}")
        };
        let mut line = format!(
            "`{}`, P = {p}, {what} (failure at {failed} s): {}. At the horizon the strategies \
             span {} with the failure",
            r.name(),
            parts.join("; "),
            range(&finals)
        );
        if !final_off.is_empty() {
            line.push_str(&format!(" and {} without it", range(&final_off)));
        }
        line.push('.');
        out.push(line);
    }
    Ok(out)
}

/// How much more the stateless PS may cost and still count as "similar" in
/// the check of Cao et al.'s cost claim (choice: the paper gives no
/// tolerance; a lower cost satisfies the claim too).
const SIMILAR_COST: f64 = 0.10;

/// Cao et al.'s claim that the stateless PS, "despite higher resource usage",
/// costs about what checkpoint-restart costs: per worker count, with the
/// failure, the workers' busy node-seconds and the costs under per-second
/// and per-hour billing of the first `stateless-ps` and `checkpoint-restart`
/// series (nothing when either is absent or the summary predates the
/// resource columns).
fn cost_findings(r: &Results) -> Result<Vec<String>> {
    let summary = read(r, "summary.csv")?;
    let Some(busy) = summary.column(W.worker_busy_node_s) else {
        return Ok(Vec::new());
    };
    let (st, sw, sf) = (
        col(&summary, W.strategy)?,
        col(&summary, W.workers)?,
        col(&summary, W.failures)?,
    );
    let (second, hour) = (
        col(&summary, W.cost_on_demand)?,
        col(&summary, W.cost_hourly_on_demand)?,
    );
    let mut workers: Vec<&str> = Vec::new();
    for row in &summary.rows {
        if !workers.contains(&row[sw].as_str()) {
            workers.push(&row[sw]);
        }
    }
    let mut out = Vec::new();
    for p in workers {
        let find = |strategy: &str| {
            summary
                .rows
                .iter()
                .find(|row| row[st] == strategy && row[sw] == p && row[sf] == "on")
        };
        let (Some(stateless), Some(ckpt)) = (find("stateless-ps"), find("checkpoint-restart"))
        else {
            continue;
        };
        let ratio = |c: usize| num(&stateless[c]) / num(&ckpt[c]);
        let similar = |c: usize| ratio(c) <= 1.0 + SIMILAR_COST;
        let more_use = ratio(busy) > 1.0;
        let verdict = |c: usize| {
            if more_use && similar(c) {
                "holds"
            } else {
                "does not hold"
            }
        };
        out.push(format!(
            "`{}`, P = {p}, Cao et al.'s cost claim (stateless PS against checkpoint-restart, \
             with the failure): workers busy {:.1} vs {:.1} node-s ({:.2}×, {} resource use); \
             on-demand cost billed per second {:.5} vs {:.5} ({:.2}×), per hour {:.2} vs {:.2} \
             ({:.2}×). \"Similar cost despite higher resource use\" (similar: at most {:.0}% more) {} \
             under per-second billing and {} under per-hour billing.",
            r.name(),
            num(&stateless[busy]),
            num(&ckpt[busy]),
            ratio(busy),
            if more_use { "higher" } else { "no higher" },
            num(&stateless[second]),
            num(&ckpt[second]),
            ratio(second),
            num(&stateless[hour]),
            num(&ckpt[hour]),
            ratio(hour),
            SIMILAR_COST * 100.0,
            verdict(second),
            verdict(hour),
        ));
    }
    Ok(out)
}

/// From `incidents.csv` (when present and not empty): the first failure
/// time (NaN without one) and, per series of `names` that recovered, its
/// mean recovery time.
fn incident_times(r: &Results, names: &[String]) -> Result<(f64, Vec<(String, f64)>)> {
    let mut failed = f64::NAN;
    let mut recoveries: Vec<(String, f64)> = Vec::new();
    let incidents = read(r, "incidents.csv").ok().filter(|t| !t.rows.is_empty());
    if let Some(inc) = &incidents {
        let (sc, fc, rc) = (
            col(inc, I.series)?,
            col(inc, I.failed)?,
            col(inc, I.recovered)?,
        );
        failed = inc
            .rows
            .iter()
            .map(|row| num(&row[fc]))
            .fold(f64::INFINITY, f64::min);
        for name in names {
            let rec: Vec<f64> = inc
                .rows
                .iter()
                .filter(|row| row[sc] == *name)
                .map(|row| num(&row[rc]))
                .filter(|v| v.is_finite())
                .collect();
            if !rec.is_empty() {
                recoveries.push((name.clone(), rec.iter().sum::<f64>() / rec.len() as f64));
            }
        }
    }
    Ok((failed, recoveries))
}

/// A black vertical line at the failure and one red line per distinct
/// recovery time, naming its strategies, spanning `(lo, hi)`.
fn incident_lines(
    failed: f64,
    recoveries: Vec<(String, f64)>,
    (lo, hi): (f64, f64),
) -> Vec<Series> {
    let mut lines = vec![vertical(
        format!("PS killed (t = {failed} s)"),
        failed,
        lo,
        hi,
        Colour::Black,
    )];
    let mut times: Vec<(f64, Vec<String>)> = Vec::new();
    for (name, t) in recoveries {
        match times.iter_mut().find(|(x, _)| (x - t).abs() < 1e-6) {
            Some((_, v)) => v.push(name),
            None => times.push((t, vec![name])),
        }
    }
    for (t, who) in times {
        lines.push(vertical(
            format!("recovered (t = {t:.2} s): {}", who.join(", ")),
            t,
            lo,
            hi,
            Colour::Red,
        ));
    }
    lines
}

fn wallclock(r: &Results) -> Result<Chart> {
    let t = read(r, "curves.csv")?;
    let (cs, cw, cf, ct) = (
        col(&t, C.series)?,
        col(&t, C.workers)?,
        col(&t, C.failures)?,
        col(&t, C.time)?,
    );
    let acc = col(&t, C.accuracy_mean)?;
    let use_acc = t.rows.iter().any(|row| num(&row[acc]).is_finite());
    let (mean, low, high) = if use_acc {
        (C.accuracy_mean, C.accuracy_ci95_low, C.accuracy_ci95_high)
    } else {
        (C.loss_mean, C.loss_ci95_low, C.loss_ci95_high)
    };
    let (cm, clo, chi) = (col(&t, mean)?, col(&t, low)?, col(&t, high)?);
    let workers = t
        .rows
        .first()
        .map(|row| row[cw].clone())
        .unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    for row in &t.rows {
        if !names.contains(&row[cs]) {
            names.push(row[cs].clone());
        }
    }
    // Failures and recoveries (from the incidents): the plot starts halfway
    // to the first failure, to show the outage at a readable scale.
    let (failed, recoveries) = incident_times(r, &names)?;
    let from = if failed.is_finite() {
        failed / 2.0
    } else {
        f64::NEG_INFINITY
    };
    let mut series = Vec::new();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (i, name) in names.iter().enumerate() {
        for failures in ["on", "off"] {
            let points: Vec<Point> = t
                .rows
                .iter()
                .filter(|row| row[cs] == *name && row[cw] == workers && row[cf] == failures)
                .filter(|row| num(&row[ct]) >= from)
                .map(|row| {
                    Point::with_ci(num(&row[ct]), num(&row[cm]), num(&row[clo]), num(&row[chi]))
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            for p in &points {
                if p.y.is_finite() {
                    lo = lo.min(p.y);
                    hi = hi.max(p.y);
                }
            }
            series.push(Series {
                name: if failures == "on" {
                    format!("{name}, PS killed")
                } else {
                    format!("{name}, no failure")
                },
                style: if failures == "on" {
                    Style::Band
                } else {
                    Style::Line
                },
                colour: Colour::Palette(i),
                points,
            });
        }
    }
    if failed.is_finite() && lo.is_finite() {
        series.extend(incident_lines(failed, recoveries, (lo, hi)));
    }
    Ok(Chart {
        title: r.title(),
        subtitle: format!("{} · {workers} worker(s)", r.subtitle()),
        x: Axis::linear(WALLCLOCK_X),
        y: Axis::linear(if use_acc {
            WALLCLOCK_Y_ACCURACY
        } else {
            WALLCLOCK_Y_LOSS
        }),
        series,
        dodge: false,
    })
}

fn iterations(r: &Results) -> Result<Chart> {
    let t = read(r, "curves.csv")?;
    let (cs, ct, cm, clo, chi) = (
        col(&t, K.series)?,
        col(&t, K.time_mean)?,
        col(&t, K.metric_mean)?,
        col(&t, K.metric_ci95_low)?,
        col(&t, K.metric_ci95_high)?,
    );
    let mut names: Vec<String> = Vec::new();
    for row in &t.rows {
        if !names.contains(&row[cs]) {
            names.push(row[cs].clone());
        }
    }
    // Large metrics (LDA's −log-likelihood) are drawn in units of 10^k so
    // the tick labels stay short.
    let biggest = t
        .rows
        .iter()
        .map(|row| num(&row[cm]).abs())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let k = if biggest >= 1e5 {
        biggest.log10().floor() as i32
    } else {
        0
    };
    let unit = 10f64.powi(k);
    let series = names
        .iter()
        .enumerate()
        .map(|(i, name)| Series {
            name: name.clone(),
            style: Style::Band,
            colour: Colour::Palette(i),
            points: t
                .rows
                .iter()
                .filter(|row| row[cs] == *name)
                .map(|row| {
                    Point::with_ci(
                        num(&row[ct]),
                        num(&row[cm]) / unit,
                        num(&row[clo]) / unit,
                        num(&row[chi]) / unit,
                    )
                })
                .collect(),
        })
        .collect();
    let y = if k == 0 {
        ITERATIONS_Y.to_string()
    } else {
        format!("{ITERATIONS_Y} (x 1e{k})")
    };
    Ok(Chart {
        title: r.title(),
        subtitle: r.subtitle(),
        x: Axis::linear(WALLCLOCK_X).anchored_at_zero(),
        y: Axis::linear(y),
        series,
        dodge: false,
    })
}

fn interval(r: &Results) -> Result<Chart> {
    let t = &r.summary;
    let (cs, cf, cm, clo, chi) = (
        col(t, V.series)?,
        col(t, V.factor)?,
        col(t, V.mean)?,
        col(t, V.ci95_low)?,
        col(t, V.ci95_high)?,
    );
    let opt = read(r, "optimum.csv")?;
    let solve = opt
        .rows
        .first()
        .map(|row| num(&row[col(&opt, O.solve_time).unwrap_or(0)]))
        .unwrap_or(1.0);
    let mut names: Vec<String> = Vec::new();
    for row in &t.rows {
        if !names.contains(&row[cs]) {
            names.push(row[cs].clone());
        }
    }
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut series: Vec<Series> = names
        .iter()
        .enumerate()
        .map(|(i, name)| Series {
            name: name.clone(),
            style: Style::LinesWithErrorBars,
            colour: Colour::Palette(i),
            points: t
                .rows
                .iter()
                .filter(|row| row[cs] == *name)
                .map(|row| {
                    let y = num(&row[cm]) / solve;
                    lo = lo.min(y);
                    hi = hi.max(y);
                    Point::with_ci(
                        num(&row[cf]),
                        y,
                        num(&row[clo]) / solve,
                        num(&row[chi]) / solve,
                    )
                })
                .collect(),
        })
        .collect();
    if lo.is_finite() {
        series.push(vertical(
            "Daly's higher-order optimum".into(),
            1.0,
            lo,
            hi,
            Colour::Black,
        ));
    }
    Ok(Chart {
        title: r.title(),
        subtitle: r.subtitle(),
        x: Axis::linear(INTERVAL_X).log2(),
        y: Axis::linear(INTERVAL_Y),
        series,
        dodge: false,
    })
}
