//! The fallback layout for scenario kinds without a layout of their own: any
//! tidy `summary.csv` with `series`, `x`, `mean` and (optionally)
//! `ci95_low`/`ci95_high` columns is drawn as one line per series. Series with
//! many points (time series on a common grid) get CI bands instead of error
//! bars; reference series (manifest `scenario.series[].reference`) are dashed.

use anyhow::Result;

use super::chart::{Axis, Chart, Colour, Point, Series, Style};
use super::results::Results;
use super::{Layout, humanize};

/// Series with more points than this are drawn as curves with CI bands.
pub(crate) const BAND_ABOVE_POINTS: usize = 20;

/// Lines (or bands) of `mean` against `x`, one per series.
pub(crate) struct Generic;

impl Layout for Generic {
    fn name(&self) -> &'static str {
        "generic series plot"
    }

    fn chart(&self, r: &Results) -> Result<Chart> {
        let rows = r.rows()?;
        let mut series = Vec::new();
        let mut slot = 0;
        for name in r.series_names()? {
            let mut points: Vec<Point> = rows
                .iter()
                .filter(|row| row.series == name)
                .map(|row| Point::with_ci(row.x, row.mean, row.lo, row.hi))
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            let (style, colour) = if r.is_reference(&name) {
                (Style::HorizontalReference, Colour::Black)
            } else if points.len() > BAND_ABOVE_POINTS {
                slot += 1;
                (Style::Band, Colour::Palette(slot - 1))
            } else {
                slot += 1;
                (Style::LinesWithErrorBars, Colour::Palette(slot - 1))
            };
            series.push(Series {
                name,
                style,
                colour,
                points,
            });
        }
        let x_name = r.x_name().unwrap_or_else(|| "x".into());
        let metric = r.first_value("metric").unwrap_or_else(|| "mean".into());
        Ok(Chart {
            title: r.title(),
            subtitle: r.subtitle(),
            x: Axis::linear(humanize(&x_name)),
            y: Axis::linear(humanize(&metric)),
            series,
            dodge: false,
        })
    }
}
