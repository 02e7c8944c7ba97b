//! Figures of the iteration-cost theory (SCAR §3, Figures 3–5, Example 2.1
//! and Appendix B.1): the `perturbation` and `precision` kinds.
//!
//! - [`IterationCostBound`] (perturbation): one marker per trial, measured
//!   iteration cost against the perturbation's size, with Theorem 1's bound
//!   `log(1 + Δ_T/‖x(0) − x*‖)/log(1/c)` as the paper's red line. When every
//!   series perturbs once at a fixed iteration ℓ, the x axis is ‖δ‖ (Figures
//!   3(a), 4, 5) and the bound is drawn through `Δ_T = c^{−ℓ}‖δ‖` (one line
//!   per distinct ℓ); with perturbations at random iterations (Figure 3(c))
//!   the x axis is Δ_T itself. Trials without a perturbation (Δ_T = 0) have no
//!   place on the logarithmic axis and are left out.
//! - [`PrecisionFloor`] (precision): the measured error floor against the
//!   mantissa width p, next to the predicted floor c/(1−c)·Δ (red) for
//!   Example 2.1's a-priori Δ and for the measured Δ.
//!
//! Everything is read from `summary.csv` and `trials.csv`: c from the `rate`
//! column, ‖x(0) − x*‖ from `initial_distance`.

use anyhow::{Context, Result, bail};

use super::Layout;
use super::chart::{Axis, Chart, Colour, Point, Series, Style};
use super::results::Results;
use crate::report::Table;
use crate::report::columns::perturbation::{SummaryColumns, SummaryRow, TrialColumns, TrialRow};
use crate::report::columns::precision;

/// Columns of a perturbation scenario's `summary.csv`.
const S: SummaryColumns = SummaryRow::NAMES;
/// Columns of its `trials.csv`.
const T: TrialColumns = TrialRow::NAMES;
/// Columns of a precision scenario's `trials.csv`.
const P: precision::TrialColumns = precision::TrialRow::NAMES;

/// Theorem 1 against measured iteration costs (SCAR Figures 3–5).
pub(crate) struct IterationCostBound;

/// The reduced-precision error floor against its prediction (Example 2.1,
/// Appendix B.1).
pub(crate) struct PrecisionFloor;

/// Points of the red bound line (log-spaced over the x range).
const BOUND_POINTS: usize = 200;

/// Decades outside which a logarithmic axis would get unreadable tick
/// labels; beyond them the axis shows log10 of the value instead.
const READABLE_DECADES: (i32, i32) = (-9, 9);

/// Theorem 1, SCAR eq. (4): `log(1 + Δ_T/r0)/log(1/c)`.
fn bound(delta_t: f64, r0: f64, c: f64) -> f64 {
    (delta_t / r0).ln_1p() / (1.0 / c).ln()
}

/// Column `name` of `t` (in file `file`), or a clear error.
fn column(t: &Table, name: &str, file: &str) -> Result<usize> {
    t.column(name).with_context(|| {
        format!(
            "{file}: no `{name}` column (columns: {})",
            t.header.join(", ")
        )
    })
}

/// A number from a cell; empty cells are NaN.
fn number(cell: &str, what: &str, file: &str, line: usize) -> Result<f64> {
    let cell = cell.trim();
    if cell.is_empty() {
        return Ok(f64::NAN);
    }
    cell.parse()
        .with_context(|| format!("{file} line {line}: `{what}` is {cell:?}, not a number"))
}

/// A logarithmic horizontal axis over `[lo, hi]` (positive), with a tick
/// per decade (or every few decades); `None` when the decades are beyond
/// [`READABLE_DECADES`].
fn log_axis(label: &str, lo: f64, hi: f64) -> Option<Axis> {
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    if first < READABLE_DECADES.0 || last > READABLE_DECADES.1 {
        return None;
    }
    let step = ((last - first) / 6 + 1).max(1);
    let ticks = (first..=last)
        .step_by(step as usize)
        .map(|d| 10f64.powi(d))
        .collect();
    Some(Axis::linear(label).log2().with_ticks(ticks))
}

/// The distinct iterations ℓ at which the summary's series perturb, and
/// whether every series perturbs once at a fixed ℓ (else some perturb on a
/// schedule, with an empty `perturbation_iteration`).
fn perturbation_iterations(s: &Table, sfile: &str) -> Result<(Vec<usize>, bool)> {
    let at = column(s, S.perturbation_iteration, sfile)?;
    let mut iterations: Vec<usize> = Vec::new();
    let mut once = true;
    for (i, row) in s.rows.iter().enumerate() {
        match row[at].trim() {
            "" => once = false,
            v => {
                let l: usize = v.parse().with_context(|| {
                    format!("{sfile} line {}: bad perturbation_iteration {v:?}", i + 2)
                })?;
                if !iterations.contains(&l) {
                    iterations.push(l);
                }
            }
        }
    }
    Ok((iterations, once))
}

/// Series names, and per series its (x, iteration cost) points.
type Measured = (Vec<String>, Vec<Vec<(f64, f64)>>);

/// Per series (in order of first appearance), its trials' (x, iteration
/// cost) with x from column `x_col`, leaving out trials with no positive,
/// finite x or no finite cost.
fn measured_points(t: &Table, tfile: &str, x_col: &str) -> Result<Measured> {
    let (cs, cx, cy) = (
        column(t, T.series, tfile)?,
        column(t, x_col, tfile)?,
        column(t, T.iteration_cost, tfile)?,
    );
    let mut names: Vec<String> = Vec::new();
    let mut points: Vec<Vec<(f64, f64)>> = Vec::new();
    for (i, row) in t.rows.iter().enumerate() {
        let x = number(&row[cx], x_col, tfile, i + 2)?;
        let y = number(&row[cy], T.iteration_cost, tfile, i + 2)?;
        if !(x > 0.0 && x.is_finite() && y.is_finite()) {
            continue;
        }
        let k = match names.iter().position(|n| *n == row[cs]) {
            Some(k) => k,
            None => {
                names.push(row[cs].clone());
                points.push(Vec::new());
                names.len() - 1
            }
        };
        points[k].push((x, y));
    }
    Ok((names, points))
}

impl Layout for IterationCostBound {
    fn name(&self) -> &'static str {
        "iteration cost vs Theorem 1 bound (SCAR Figs. 3-5 layout)"
    }

    fn chart(&self, r: &Results) -> Result<Chart> {
        let sfile = r.dir.join("summary.csv").display().to_string();
        let tfile = r.dir.join("trials.csv").display().to_string();
        let s = &r.summary;
        let t = r
            .trials
            .as_ref()
            .with_context(|| format!("{tfile} is missing"))?;
        let first = s
            .rows
            .first()
            .with_context(|| format!("{sfile} has no rows"))?;
        let c = number(&first[column(s, S.rate, &sfile)?], S.rate, &sfile, 2)?;
        let r0 = number(
            &first[column(s, S.initial_distance, &sfile)?],
            S.initial_distance,
            &sfile,
            2,
        )?;
        if !(c > 0.0 && c < 1.0 && r0 > 0.0) {
            bail!(
                "{sfile}: rate {c} and initial_distance {r0} do not define a bound (need 0 < c < 1, r0 > 0)"
            );
        }
        // One perturbation at a fixed ℓ in every series: x = ‖δ‖.
        let (iterations, once) = perturbation_iterations(s, &sfile)?;
        let x_col = if once { T.perturbation_norm } else { T.delta_t };
        let (names, points) = measured_points(t, &tfile, x_col)?;
        let all = points.iter().flatten();
        let mut lo = all.clone().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let mut hi = all.map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        if !lo.is_finite() {
            // No trial was perturbed (possible with few trials and a small
            // ρ): draw the bound alone, over ‖x(0) − x*‖·[10⁻³, 10²].
            (lo, hi) = (r0 * 1e-3, r0 * 1e2);
        }
        let label = if once {
            match iterations.as_slice() {
                [l] => format!(
                    "Perturbation size ‖δ‖ (Δ_T = c^−{l}·‖δ‖ = {}·‖δ‖)",
                    super::render::tick_label(c.powf(-(*l as f64)))
                ),
                _ => "Perturbation size ‖δ‖".to_string(),
            }
        } else {
            "Δ_T = Σ_ℓ c^−ℓ·‖δ_ℓ‖".to_string()
        };
        let (x_axis, to_x): (Axis, fn(f64) -> f64) = match log_axis(&label, lo, hi) {
            Some(a) => (a, |v| v),
            None => (Axis::linear(format!("log10 of {label}")), f64::log10),
        };
        let mut series: Vec<Series> = names
            .into_iter()
            .zip(points)
            .enumerate()
            .map(|(k, (name, pts))| Series {
                name: format!("{name} (measured, one per trial)"),
                style: Style::Markers,
                colour: Colour::Palette(k),
                points: pts
                    .into_iter()
                    .map(|(x, y)| Point::plain(to_x(x), y))
                    .collect(),
            })
            .collect();
        // The bound along a log-spaced grid of x.
        let scales: Vec<(String, f64)> = if once {
            iterations
                .iter()
                .map(|&l| {
                    let name = if iterations.len() == 1 {
                        "Theorem 1 bound".to_string()
                    } else {
                        format!("Theorem 1 bound, ℓ = {l}")
                    };
                    (name, c.powf(-(l as f64)))
                })
                .collect()
        } else {
            vec![("Theorem 1 bound".to_string(), 1.0)]
        };
        let (a, b) = (lo.ln(), hi.ln());
        for (name, scale) in scales {
            let pts = (0..BOUND_POINTS)
                .map(|i| {
                    let x = if b > a {
                        (a + (b - a) * i as f64 / (BOUND_POINTS - 1) as f64).exp()
                    } else {
                        lo
                    };
                    Point::plain(to_x(x), bound(scale * x, r0, c))
                })
                .collect();
            series.push(Series {
                name,
                style: Style::Line,
                colour: Colour::Red,
                points: pts,
            });
        }
        Ok(Chart {
            title: r.title(),
            subtitle: format!(
                "{} · c = {} · ‖x(0) − x*‖ = {}",
                r.subtitle(),
                super::render::tick_label(c),
                super::render::tick_label(r0)
            ),
            x: x_axis,
            y: Axis::linear("Iteration cost (iterations)").anchored_at_zero(),
            series,
            dodge: false,
        })
    }

    /// Per series, how many perturbed trials exceed Theorem 1's bound, with
    /// what the bound assumes (c, ‖x(0) − x*‖) beside it.
    fn findings(&self, r: &Results) -> Result<Vec<String>> {
        let sfile = r.dir.join("summary.csv").display().to_string();
        let s = &r.summary;
        let [series, perturbed, violations, excess, rate, method, r0] = [
            S.series,
            S.perturbed_trials,
            S.bound_violations,
            S.max_excess,
            S.rate,
            S.rate_method,
            S.initial_distance,
        ]
        .map(|c| column(s, c, &sfile));
        let (series, perturbed, violations, excess) = (series?, perturbed?, violations?, excess?);
        let (rate, method, r0) = (rate?, method?, r0?);
        let mut out = Vec::new();
        for (i, row) in s.rows.iter().enumerate() {
            let line = i + 2;
            let n = number(&row[perturbed], S.perturbed_trials, &sfile, line)?;
            let v = number(&row[violations], S.bound_violations, &sfile, line)?;
            let e = number(&row[excess], S.max_excess, &sfile, line)?;
            let c = number(&row[rate], S.rate, &sfile, line)?;
            let d0 = number(&row[r0], S.initial_distance, &sfile, line)?;
            out.push(format!(
                "`{}` series: the cost exceeds Theorem 1's bound in {v:.0} of {n:.0} perturbed \
                 trials (largest cost − bound: {e:.1} iterations); the bound uses c = {c:.6} ({}) \
                 and ‖x(0) − x*‖ = {}, and assumes the unperturbed run contracts by c at every \
                 iteration from there (assumption (3)), with ε only fixing where it stops.",
                row[series].trim(),
                row[method].trim(),
                if d0.abs() >= 1000.0 {
                    format!("{d0:.0}")
                } else {
                    format!("{d0:.4}")
                },
            ));
        }
        Ok(out)
    }
}

impl Layout for PrecisionFloor {
    fn name(&self) -> &'static str {
        "error floor vs mantissa bits (SCAR Example 2.1 layout)"
    }

    fn chart(&self, r: &Results) -> Result<Chart> {
        let file = r.dir.join("trials.csv").display().to_string();
        let t = r
            .trials
            .as_ref()
            .with_context(|| format!("{file} is missing"))?;
        let cp = column(t, P.mantissa_bits, &file)?;
        let cf = column(t, P.error_floor, &file)?;
        let cpred = column(t, P.predicted_floor, &file)?;
        let cmeas = column(t, P.predicted_floor_measured_delta, &file)?;
        let mut measured = Vec::new();
        let mut predicted = Vec::new();
        let mut from_measured = Vec::new();
        for (i, row) in t.rows.iter().enumerate() {
            let p = number(&row[cp], P.mantissa_bits, &file, i + 2)?;
            let log = |v: f64| if v > 0.0 { v.log10() } else { f64::NAN };
            measured.push(Point::plain(
                p,
                log(number(&row[cf], P.error_floor, &file, i + 2)?),
            ));
            predicted.push(Point::plain(
                p,
                log(number(&row[cpred], P.predicted_floor, &file, i + 2)?),
            ));
            from_measured.push(Point::plain(
                p,
                log(number(
                    &row[cmeas],
                    P.predicted_floor_measured_delta,
                    &file,
                    i + 2,
                )?),
            ));
        }
        for v in [&mut measured, &mut predicted, &mut from_measured] {
            v.sort_by(|a, b| a.x.total_cmp(&b.x));
        }
        let mut subtitle = vec![r.name()];
        subtitle.extend(r.paper());
        subtitle.push(r.data().describe());
        subtitle.push("one deterministic run per p".to_string());
        Ok(Chart {
            title: r.title(),
            subtitle: subtitle.join(" · "),
            x: Axis::linear("Mantissa bits p"),
            y: Axis::linear("log10 of the error floor max ‖y(k) − x*‖"),
            series: vec![
                Series {
                    name: "measured floor".into(),
                    style: Style::LinesWithErrorBars,
                    colour: Colour::Palette(0),
                    points: measured,
                },
                Series {
                    name: "predicted c/(1−c)·Δ, Δ = 2^−(p−1)·max‖y‖".into(),
                    style: Style::Line,
                    colour: Colour::Red,
                    points: predicted,
                },
                Series {
                    name: "c/(1−c)·Δ with the measured Δ".into(),
                    style: Style::Line,
                    colour: Colour::Palette(1),
                    points: from_measured,
                },
            ],
            dodge: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_matches_theorem_1() {
        // log(1 + 1.0/2.0)/log(1/0.99)
        let want = 1.5f64.ln() / (1.0 / 0.99f64).ln();
        assert!((bound(1.0, 2.0, 0.99) - want).abs() < 1e-12);
        assert_eq!(bound(0.0, 2.0, 0.99), 0.0);
    }

    #[test]
    fn log_axes_tick_every_decade_or_give_up() {
        let a = log_axis("x", 2e-4, 0.7).unwrap();
        assert_eq!(a.scale, crate::report::figures::chart::Scale::Log2);
        let ticks = a.ticks.unwrap();
        assert_eq!(ticks.len(), 5);
        for (t, d) in ticks.iter().zip(-4..=0) {
            assert!((t - 10f64.powi(d)).abs() < 1e-15 * t.max(1.0));
        }
        assert!(log_axis("x", 1e-3, 1e30).is_none());
        // Many decades: at most 7 ticks.
        assert!(log_axis("x", 1e-9, 1e9).unwrap().ticks.unwrap().len() <= 7);
    }
}
