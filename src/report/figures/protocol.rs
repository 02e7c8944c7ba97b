//! Figures of the `protocol` kind (Dutta et al. 2018): wall-clock time per
//! iteration against K for every protocol, next to its closed form, one panel
//! per number of workers P (the paper's runtime figures, §4); and loss against
//! wall-clock time with 95% CI bands, one panel per protocol family (the
//! error–runtime figures, §5–6).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};

use super::chart::{Axis, Chart, Colour, Grid, Point, Series, Style};
use super::results::Results;
use super::{Cell, Layout};
use crate::report::Table;
use crate::report::columns::protocol::{
    CurveColumns, CurveRow, RatioColumns, RatioRow, RuntimeSummaryColumns, RuntimeSummaryRow,
    TrainingSummaryColumns, TrainingSummaryRow,
};

mod adaptive;

/// Columns of a runtime scenario's `summary.csv`.
const RS: RuntimeSummaryColumns = RuntimeSummaryRow::NAMES;
/// Columns of `ratios.csv`.
const RA: RatioColumns = RatioRow::NAMES;
/// Columns of a training scenario's `summary.csv`.
const TS: TrainingSummaryColumns = TrainingSummaryRow::NAMES;
/// Columns of `loss_vs_time.csv`.
const C: CurveColumns = CurveRow::NAMES;

/// File with the loss-vs-time curves of a training protocol scenario.
pub(crate) const LOSS_VS_TIME: &str = "loss_vs_time.csv";

/// Whether the results are a protocol scenario with training in the loop.
pub(crate) fn is_training(r: &Results) -> bool {
    r.dir.join(LOSS_VS_TIME).is_file()
}

/// A CSV read as text cells, with numeric access that names file, line and column.
struct Csv<'a> {
    path: &'a Path,
    table: Table,
}

impl<'a> Csv<'a> {
    fn read(path: &'a Path) -> Result<Csv<'a>> {
        Ok(Csv {
            path,
            table: Table::read(path)?,
        })
    }

    fn col(&self, name: &str) -> Result<usize> {
        self.table.column(name).with_context(|| {
            format!(
                "{}: no `{name}` column (columns: {})",
                self.path.display(),
                self.table.header.join(", ")
            )
        })
    }

    /// The cell as a number; empty cells are NaN.
    fn num(&self, row: usize, col: usize) -> Result<f64> {
        let cell = self.table.rows[row][col].trim();
        if cell.is_empty() {
            return Ok(f64::NAN);
        }
        cell.parse().with_context(|| {
            format!(
                "{} line {}: `{}` is {cell:?}, not a number",
                self.path.display(),
                row + 2,
                self.table.header[col]
            )
        })
    }

    fn text(&self, row: usize, col: usize) -> &str {
        &self.table.rows[row][col]
    }
}

/// Wall-clock time per iteration against K, one panel per P (Dutta et al. §4).
pub(crate) struct Runtime;

/// One protocol's measured curve and closed form within one P.
struct RuntimeCurve {
    protocol: String,
    measured: Vec<Point>,
    theory: Vec<Point>,
}

impl Runtime {
    /// Curves per number of workers, in P order; protocols in file order.
    fn curves(r: &Results) -> Result<BTreeMap<u64, Vec<RuntimeCurve>>> {
        let path = r.dir.join("summary.csv");
        let csv = Csv::read(&path)?;
        let (cp, cw, ck) = (csv.col(RS.protocol)?, csv.col(RS.workers)?, csv.col(RS.k)?);
        let (cm, cl, ch) = (
            csv.col(RS.mean)?,
            csv.col(RS.ci95_low)?,
            csv.col(RS.ci95_high)?,
        );
        let ct = csv.table.column(RS.theory_exact);
        let mut by_p: BTreeMap<u64, Vec<RuntimeCurve>> = BTreeMap::new();
        for i in 0..csv.table.rows.len() {
            let p = csv.num(i, cw)?;
            if !(p >= 1.0 && p.fract() == 0.0) {
                bail!(
                    "{} line {}: `{}` must be a positive integer",
                    path.display(),
                    i + 2,
                    RS.workers
                );
            }
            let protocol = csv.text(i, cp).to_string();
            let k = csv.num(i, ck)?;
            let curves = by_p.entry(p as u64).or_default();
            let at = match curves.iter().position(|c| c.protocol == protocol) {
                Some(at) => at,
                None => {
                    curves.push(RuntimeCurve {
                        protocol,
                        measured: Vec::new(),
                        theory: Vec::new(),
                    });
                    curves.len() - 1
                }
            };
            let curve = &mut curves[at];
            curve.measured.push(Point::with_ci(
                k,
                csv.num(i, cm)?,
                csv.num(i, cl)?,
                csv.num(i, ch)?,
            ));
            if let Some(ct) = ct {
                let t = csv.num(i, ct)?;
                if t.is_finite() {
                    curve.theory.push(Point::plain(k, t));
                }
            }
        }
        if by_p.is_empty() {
            bail!("{} has no rows", path.display());
        }
        Ok(by_p)
    }

    fn panel(r: &Results, p: u64, curves: &[RuntimeCurve]) -> Chart {
        let mut series = Vec::new();
        for (slot, c) in curves.iter().enumerate() {
            let mut measured = c.measured.clone();
            measured.sort_by(|a, b| a.x.total_cmp(&b.x));
            series.push(Series {
                name: c.protocol.clone(),
                style: Style::LinesWithErrorBars,
                colour: Colour::Palette(slot),
                points: measured,
            });
        }
        for (slot, c) in curves.iter().enumerate() {
            if c.theory.len() >= 2 {
                let mut theory = c.theory.clone();
                theory.sort_by(|a, b| a.x.total_cmp(&b.x));
                series.push(Series {
                    name: format!("{} (closed form)", c.protocol),
                    style: Style::Line,
                    colour: Colour::Palette(slot),
                    points: theory,
                });
            }
        }
        let ks: Vec<f64> = {
            let mut ks: Vec<f64> = curves
                .iter()
                .flat_map(|c| c.measured.iter().map(|p| p.x))
                .collect();
            ks.sort_by(f64::total_cmp);
            ks.dedup();
            ks
        };
        Chart {
            title: format!("P = {p} workers"),
            subtitle: r.subtitle(),
            x: Axis::linear("K").log2().with_ticks(ks),
            y: Axis::linear("Wall-clock time per iteration").anchored_at_zero(),
            series,
            dodge: true,
        }
    }
}

impl Layout for Runtime {
    fn name(&self) -> &'static str {
        "runtime-per-iteration plot"
    }

    /// The panel of the largest P (the grid has them all).
    fn chart(&self, r: &Results) -> Result<Chart> {
        let curves = Self::curves(r)?;
        let (p, c) = curves.iter().next_back().expect("curves is never empty");
        let mut chart = Self::panel(r, *p, c);
        chart.title = format!("{} (P = {p})", r.title());
        Ok(chart)
    }

    /// How the simulated means compare with the closed forms (the
    /// `theory_check` column), and the fully-sync/fully-async ratios.
    fn findings(&self, r: &Results) -> Result<Vec<String>> {
        let path = r.dir.join("summary.csv");
        let csv = Csv::read(&path)?;
        let check = csv.col(RS.theory_check)?;
        let rel = csv.col(RS.theory_rel_error)?;
        let count = |what: &str| {
            (0..csv.table.rows.len())
                .filter(|&i| csv.text(i, check) == what)
                .count()
        };
        let mut worst: f64 = 0.0;
        for i in 0..csv.table.rows.len() {
            let e = csv.num(i, rel)?;
            if e.is_finite() && csv.text(i, check) != "within_bounds" {
                worst = worst.max(e.abs());
            }
        }
        let n = csv.table.rows.len();
        let mut out = vec![format!(
            "`{}`: of {n} (protocol, P, K) points, {} agree with their closed form (|z| ≤ 1.96 \
             for the trial mean), {} fall outside the 95% CI (about 5% are expected to), {} \
             without a closed form lie within its bounds; largest relative error against a closed \
             form {:.2}%.",
            r.name(),
            count("agrees"),
            count("outside_ci"),
            count("within_bounds"),
            100.0 * worst
        )];
        let ratios_path = r.dir.join("ratios.csv");
        if ratios_path.is_file() {
            let rt = Csv::read(&ratios_path)?;
            let (ck, cw) = (rt.col(RA.k)?, rt.col(RA.workers)?);
            let (cm, cl, ch, ct) = (
                rt.col(RA.mean)?,
                rt.col(RA.ci95_low)?,
                rt.col(RA.ci95_high)?,
                rt.col(RA.theory_exact)?,
            );
            let mut parts = Vec::new();
            for i in 0..rt.table.rows.len() {
                if rt.text(i, ck) == "P/1" {
                    parts.push(format!(
                        "P = {}: {:.2} [{:.2}, {:.2}] (closed form {:.2})",
                        rt.text(i, cw),
                        rt.num(i, cm)?,
                        rt.num(i, cl)?,
                        rt.num(i, ch)?,
                        rt.num(i, ct)?
                    ));
                }
            }
            if !parts.is_empty() {
                out.push(format!(
                    "`{}`: time per iteration of fully synchronous SGD (K-sync, K = P) over fully \
                     asynchronous SGD (K-async, K = 1): {}.",
                    r.name(),
                    parts.join("; ")
                ));
            }
        }
        Ok(out)
    }

    fn grid(&self, r: &Results) -> Result<Option<Grid>> {
        let curves = Self::curves(r)?;
        if curves.len() < 2 {
            return Ok(None);
        }
        let (rows, cols) = square_shape(curves.len());
        let mut cells: Vec<Cell> = curves
            .iter()
            .map(|(p, c)| {
                let mut panel = Self::panel(r, *p, c);
                panel.subtitle = String::new();
                Cell::Chart(Box::new(panel))
            })
            .collect();
        while cells.len() < rows * cols {
            cells.push(Cell::Missing(String::new()));
        }
        Ok(Some(Grid {
            title: r.title(),
            subtitle: format!(
                "{} · error bars: 95% CI of the mean; solid lines: closed forms",
                r.subtitle()
            ),
            rows,
            cols,
            cells,
        }))
    }
}

/// Rows × columns closest to a square for `n` panels (4 → 2×2).
fn square_shape(n: usize) -> (usize, usize) {
    let cols = (n as f64).sqrt().ceil().max(1.0) as usize;
    (n.div_ceil(cols), cols)
}

/// Loss against wall-clock time with CI bands (Dutta et al. §5–6).
pub struct ErrorRuntime;

/// One series' loss curve.
struct LossCurve {
    series: String,
    protocol: String,
    points: Vec<Point>,
}

impl ErrorRuntime {
    fn curves(r: &Results) -> Result<Vec<LossCurve>> {
        let path = r.dir.join(LOSS_VS_TIME);
        let csv = Csv::read(&path)?;
        let (cs, cp, ct) = (csv.col(C.series)?, csv.col(C.protocol)?, csv.col(C.time)?);
        let (cm, cl, ch) = (
            csv.col(C.mean)?,
            csv.col(C.ci95_low)?,
            csv.col(C.ci95_high)?,
        );
        let mut curves: Vec<LossCurve> = Vec::new();
        for i in 0..csv.table.rows.len() {
            let series = csv.text(i, cs);
            let point = Point::with_ci(
                csv.num(i, ct)?,
                csv.num(i, cm)?,
                csv.num(i, cl)?,
                csv.num(i, ch)?,
            );
            match curves.iter_mut().find(|c| c.series == series) {
                Some(c) => c.points.push(point),
                None => curves.push(LossCurve {
                    series: series.to_string(),
                    protocol: csv.text(i, cp).to_string(),
                    points: vec![point],
                }),
            }
        }
        if curves.is_empty() {
            bail!("{} has no rows", path.display());
        }
        for c in &mut curves {
            c.points.sort_by(|a, b| a.x.total_cmp(&b.x));
        }
        Ok(curves)
    }

    /// A fixed-K series is named `<protocol> K=<k>`; others (adaptive
    /// schedules, staleness-aware rates) are variants drawn in every panel.
    fn is_fixed_k(c: &LossCurve) -> bool {
        c.series
            .strip_prefix(&c.protocol)
            .and_then(|rest| rest.strip_prefix(" K="))
            .is_some_and(|k| k.parse::<u64>().is_ok())
    }

    fn chart_of(r: &Results, title: String, curves: &[&LossCurve]) -> Chart {
        let series = curves
            .iter()
            .enumerate()
            .map(|(slot, c)| Series {
                name: c.series.clone(),
                style: Style::Band,
                colour: Colour::Palette(slot),
                points: c.points.clone(),
            })
            .collect();
        // Losses span decades (2.3 at x(0) to ~0.05 floors): a log scale shows
        // the floors apart, as the paper's error–runtime plots do.
        let positive = curves.iter().all(|c| {
            c.points
                .iter()
                .all(|p| p.y > 0.0 && (p.lo.is_nan() || p.lo > 0.0))
        });
        let y = Axis::linear(loss_label(r));
        Chart {
            title,
            subtitle: r.subtitle(),
            x: Axis::linear("Wall-clock time").anchored_at_zero(),
            y: if positive { y.log2() } else { y },
            series,
            dodge: false,
        }
    }
}

/// The y label: the quadratic reports F(w) − F*, the trained models their loss.
fn loss_label(r: &Results) -> &'static str {
    let model = r.first_value(TS.model).unwrap_or_default();
    if model == "quadratic" {
        "Error F(w) − F*"
    } else {
        "Training loss"
    }
}

impl Layout for ErrorRuntime {
    fn name(&self) -> &'static str {
        "error-runtime plot"
    }

    /// Fully synchronous (the largest K of k-sync), fully asynchronous
    /// (k-async K=1) and every variant: the paper's headline comparison.
    fn chart(&self, r: &Results) -> Result<Chart> {
        let curves = Self::curves(r)?;
        let k_of = |c: &LossCurve| {
            c.series
                .rsplit_once("K=")
                .and_then(|(_, k)| k.parse::<u64>().ok())
        };
        let sync = curves
            .iter()
            .filter(|c| c.protocol == "k-sync" && Self::is_fixed_k(c))
            .max_by_key(|c| k_of(c));
        let chosen: Vec<&LossCurve> = curves
            .iter()
            .filter(|c| {
                !Self::is_fixed_k(c)
                    || sync.is_some_and(|s| std::ptr::eq(*c, s))
                    || (c.protocol == "k-async" && k_of(c) == Some(1))
            })
            .collect();
        let chosen = if chosen.is_empty() {
            curves.iter().collect()
        } else {
            chosen
        };
        Ok(Self::chart_of(r, r.title(), &chosen))
    }

    /// Final loss and error floor of every series, lowest floor first; then
    /// each adaptive K rule against the oracle schedule and the best fixed K.
    fn findings(&self, r: &Results) -> Result<Vec<String>> {
        let path = r.dir.join("summary.csv");
        let csv = Csv::read(&path)?;
        let (cs, cm, cf) = (
            csv.col(TS.series)?,
            csv.col(TS.mean)?,
            csv.col(TS.floor_mean)?,
        );
        let (cfl, cfh, ct) = (
            csv.col(TS.floor_ci95_low)?,
            csv.col(TS.floor_ci95_high)?,
            csv.col(TS.time_per_update)?,
        );
        let mut rows = Vec::new();
        for i in 0..csv.table.rows.len() {
            rows.push((
                csv.text(i, cs).to_string(),
                csv.num(i, cf)?,
                csv.num(i, cfl)?,
                csv.num(i, cfh)?,
                csv.num(i, cm)?,
                csv.num(i, ct)?,
            ));
        }
        rows.sort_by(|a, b| a.1.total_cmp(&b.1));
        let list: Vec<String> = rows
            .iter()
            .map(|(s, f, lo, hi, last, t)| {
                format!("{s} {f:.4} [{lo:.4}, {hi:.4}] (final {last:.4}, {t:.3} per update)")
            })
            .collect();
        let mut out = vec![format!(
            "`{}`: error floor (mean loss over the end of the horizon, 95% CI), lowest first: {}.",
            r.name(),
            list.join("; ")
        )];
        // An adaptive K rule beside the oracle schedule and the best fixed K.
        out.extend(adaptive::findings(r)?);
        Ok(out)
    }

    fn grid(&self, r: &Results) -> Result<Option<Grid>> {
        let curves = Self::curves(r)?;
        let mut families: Vec<&str> = Vec::new();
        for c in curves.iter().filter(|c| Self::is_fixed_k(c)) {
            if !families.contains(&c.protocol.as_str()) {
                families.push(&c.protocol);
            }
        }
        if families.len() < 2 {
            return Ok(None);
        }
        let variants: Vec<&LossCurve> = curves.iter().filter(|c| !Self::is_fixed_k(c)).collect();
        let (rows, cols) = square_shape(families.len());
        let mut cells: Vec<Cell> = families
            .iter()
            .map(|f| {
                let mut members: Vec<&LossCurve> = curves
                    .iter()
                    .filter(|c| c.protocol == *f && Self::is_fixed_k(c))
                    .collect();
                members.extend(variants.iter().copied());
                let mut panel = Self::chart_of(r, f.to_string(), &members);
                panel.subtitle = String::new();
                Cell::Chart(Box::new(panel))
            })
            .collect();
        while cells.len() < rows * cols {
            cells.push(Cell::Missing(String::new()));
        }
        Ok(Some(Grid {
            title: r.title(),
            subtitle: format!("{} · bands: 95% CI of the mean", r.subtitle()),
            rows,
            cols,
            cells,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_near_square() {
        assert_eq!(square_shape(4), (2, 2));
        assert_eq!(square_shape(3), (2, 2));
        assert_eq!(square_shape(1), (1, 1));
        assert_eq!(square_shape(5), (2, 3));
    }

    #[test]
    fn fixed_k_series_are_told_from_variants() {
        let c = |series: &str, protocol: &str| LossCurve {
            series: series.into(),
            protocol: protocol.into(),
            points: Vec::new(),
        };
        assert!(ErrorRuntime::is_fixed_k(&c("k-async K=4", "k-async")));
        assert!(!ErrorRuntime::is_fixed_k(&c("adaptive", "k-async")));
        assert!(!ErrorRuntime::is_fixed_k(&c(
            "k-async K=1 staleness-aware",
            "k-async"
        )));
    }
}
