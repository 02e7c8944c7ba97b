//! Drawing one [`Chart`] into an area: its title block, legend, axes and
//! series.

use anyhow::Result;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{Keyed, axis_label, range, ticks};
use super::{Theme, centred_text, draw_error, font};
use crate::report::figures::chart::{Chart, Point, Series, Style};

/// Draws one chart (title block, legend, axes, series) into `area`.
pub(super) fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
    theme: &Theme,
) -> Result<()> {
    let (w, _) = area.dim_in_pixel();
    let mut y = 10;
    y += centred_text(area, &chart.title, theme.title, FontStyle::Bold, w, y)? + 6;
    if !chart.subtitle.is_empty() {
        y += centred_text(
            area,
            &chart.subtitle,
            theme.subtitle,
            FontStyle::Normal,
            w,
            y,
        )? + 8;
    }
    y += draw_legend(area, &chart.series, theme, w, y)?;
    let (_, plot_area) = area.split_vertically(y + 4);

    let (x0, x1) = range(&chart.x, &chart.series, true);
    let (y0, y1) = range(&chart.y, &chart.series, false);
    let x_ticks = ticks(&chart.x, x0, x1);
    let y_ticks = ticks(&chart.y, y0, y1);
    let mut cc = ChartBuilder::on(&plot_area)
        .margin_left(8)
        .margin_right(24)
        .margin_top(6)
        .margin_bottom(4)
        .x_label_area_size(theme.x_label_area)
        .y_label_area_size(theme.y_label_area)
        .build_cartesian_2d(
            Keyed {
                range: x0..x1,
                keys: x_ticks,
            },
            Keyed {
                range: y0..y1,
                keys: y_ticks,
            },
        )
        .map_err(draw_error)?;
    let x_scale = chart.x.scale;
    let y_scale = chart.y.scale;
    let x_frac = chart.x.fraction_labels;
    let y_frac = chart.y.fraction_labels;
    let x_fmt = move |v: &f64| axis_label(x_scale.inverse(*v), x_frac);
    let y_fmt = move |v: &f64| axis_label(y_scale.inverse(*v), y_frac);
    cc.configure_mesh()
        .x_desc(chart.x.label.as_str())
        .y_desc(chart.y.label.as_str())
        .axis_desc_style(font(theme.axis, FontStyle::Normal))
        .label_style(font(theme.tick, FontStyle::Normal))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .bold_line_style(RGBColor(228, 228, 228))
        .axis_style(ShapeStyle::from(BLACK).stroke_width(1))
        .draw()
        .map_err(draw_error)?;

    draw_backdrops(&mut cc, chart, theme, (x0, x1))?;
    draw_lines(&mut cc, chart, theme, (x0, x1))?;
    Ok(())
}

/// The chart's axes, with keyed ticks on both.
type Axes<'a, DB> = ChartContext<'a, DB, Cartesian2d<Keyed, Keyed>>;

/// Horizontal references and CI bands, drawn first so that lines and
/// markers stay on top; `(x0, x1)` is the plotted x range.
fn draw_backdrops<DB: DrawingBackend>(
    cc: &mut Axes<'_, DB>,
    chart: &Chart,
    theme: &Theme,
    (x0, x1): (f64, f64),
) -> Result<()> {
    let (x_scale, y_scale) = (chart.x.scale, chart.y.scale);
    let ty = |v: f64| y_scale.forward(v);
    // References and bands first, so lines and markers stay on top.
    for s in &chart.series {
        let (r, g, b) = s.colour.rgb();
        let colour = RGBColor(r, g, b);
        let tx = |p: &Point| x_scale.forward(p.x);
        match s.style {
            Style::HorizontalReference => {
                let Some(p) = s.points.iter().find(|p| p.y.is_finite()) else {
                    continue;
                };
                if p.has_ci() {
                    cc.draw_series(std::iter::once(Rectangle::new(
                        [(x0, ty(p.lo)), (x1, ty(p.hi))],
                        colour.mix(0.06).filled(),
                    )))
                    .map_err(draw_error)?;
                }
                cc.draw_series(std::iter::once(DashedPathElement::new(
                    vec![(x0, ty(p.y)), (x1, ty(p.y))],
                    12,
                    7,
                    colour.stroke_width(theme.stroke + 1),
                )))
                .map_err(draw_error)?;
            }
            Style::Band => {
                let pts: Vec<&Point> = s
                    .points
                    .iter()
                    .filter(|p| tx(p).is_finite() && p.has_ci())
                    .collect();
                if pts.len() >= 2 {
                    let mut poly: Vec<(f64, f64)> = pts.iter().map(|p| (tx(p), ty(p.hi))).collect();
                    poly.extend(pts.iter().rev().map(|p| (tx(p), ty(p.lo))));
                    cc.draw_series(std::iter::once(Polygon::new(
                        poly,
                        colour.mix(0.22).filled(),
                    )))
                    .map_err(draw_error)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every series' lines, error bars and markers; series with error bars are
/// dodged apart horizontally when the chart asks for it.
fn draw_lines<DB: DrawingBackend>(
    cc: &mut Axes<'_, DB>,
    chart: &Chart,
    theme: &Theme,
    (x0, x1): (f64, f64),
) -> Result<()> {
    let (x_scale, y_scale) = (chart.x.scale, chart.y.scale);
    let ty = |v: f64| y_scale.forward(v);
    // Horizontal offsets that keep series with error bars apart.
    let barred: Vec<usize> = (0..chart.series.len())
        .filter(|&i| chart.series[i].style == Style::LinesWithErrorBars)
        .collect();
    let offset = |i: usize| -> f64 {
        match barred.iter().position(|&b| b == i) {
            Some(k) if chart.dodge && barred.len() > 1 => {
                let step = (x1 - x0) * 0.018 / barred.len() as f64;
                (k as f64 - (barred.len() - 1) as f64 / 2.0) * step
            }
            _ => 0.0,
        }
    };
    // Error-bar caps: 1.2% of the x range on each side.
    let cap = (x1 - x0) * 0.012;
    for (i, s) in chart.series.iter().enumerate() {
        let (r, g, b) = s.colour.rgb();
        let colour = RGBColor(r, g, b);
        let shift = offset(i);
        let tx = |p: &Point| x_scale.forward(p.x) + shift;
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| p.y.is_finite() && tx(p).is_finite())
            .map(|p| (tx(p), ty(p.y)))
            .collect();
        match s.style {
            Style::LinesWithErrorBars => {
                for p in s.points.iter().filter(|p| p.has_ci() && tx(p).is_finite()) {
                    let x = tx(p);
                    let style = colour.stroke_width(theme.stroke);
                    let bars = [
                        vec![(x, ty(p.lo)), (x, ty(p.hi))],
                        vec![(x - cap, ty(p.lo)), (x + cap, ty(p.lo))],
                        vec![(x - cap, ty(p.hi)), (x + cap, ty(p.hi))],
                    ];
                    cc.draw_series(bars.into_iter().map(|b| PathElement::new(b, style)))
                        .map_err(draw_error)?;
                }
                cc.draw_series(std::iter::once(PathElement::new(
                    pts.clone(),
                    colour.stroke_width(theme.stroke),
                )))
                .map_err(draw_error)?;
                cc.draw_series(
                    pts.iter()
                        .map(|&c| Circle::new(c, theme.marker, colour.filled())),
                )
                .map_err(draw_error)?;
            }
            Style::Band | Style::Line => {
                cc.draw_series(std::iter::once(PathElement::new(
                    pts,
                    colour.stroke_width(theme.stroke + u32::from(s.style == Style::Line)),
                )))
                .map_err(draw_error)?;
            }
            Style::Markers => {
                cc.draw_series(
                    pts.iter()
                        .map(|&c| Circle::new(c, theme.marker - 1, colour.mix(0.55).filled())),
                )
                .map_err(draw_error)?;
            }
            Style::HorizontalReference => {}
        }
    }
    Ok(())
}

/// Draws the legend as rows of entries under the title. Returns its height.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[Series],
    theme: &Theme,
    width: u32,
    top: i32,
) -> Result<i32> {
    if series.is_empty() {
        return Ok(0);
    }
    const SAMPLE: i32 = 34;
    const GAP: i32 = 8;
    const SPACING: i32 = 22;
    let ts = font(theme.legend, FontStyle::Normal);
    let row_h = (theme.legend * 1.5).round() as i32;
    let avail = width as i32 - 24;
    // Lay the entries out in rows, then centre each row.
    let mut rows: Vec<Vec<(&Series, i32)>> = vec![Vec::new()];
    let mut row_w = 0;
    for s in series {
        let (tw, _) = area.estimate_text_size(&s.name, &ts).map_err(draw_error)?;
        let ew = SAMPLE + GAP + tw as i32;
        let last = rows.last_mut().expect("one row");
        if !last.is_empty() && row_w + SPACING + ew > avail {
            rows.push(Vec::new());
            row_w = 0;
        }
        let last = rows.last_mut().expect("one row");
        if !last.is_empty() {
            row_w += SPACING;
        }
        row_w += ew;
        last.push((s, ew));
    }
    for (i, row) in rows.iter().enumerate() {
        let total: i32 = row.iter().map(|(_, w)| w).sum::<i32>() + SPACING * (row.len() as i32 - 1);
        let mut x = (width as i32 - total) / 2;
        let cy = top + i as i32 * row_h + row_h / 2;
        for (s, ew) in row {
            legend_sample(area, s, theme, x, cy)?;
            area.draw(&Text::new(
                s.name.clone(),
                (x + SAMPLE + GAP, cy),
                ts.pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(draw_error)?;
            x += ew + SPACING;
        }
    }
    Ok(rows.len() as i32 * row_h + 4)
}

/// The legend's picture of a series: a short stretch of what the plot shows.
fn legend_sample<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    s: &Series,
    theme: &Theme,
    x: i32,
    cy: i32,
) -> Result<()> {
    let (r, g, b) = s.colour.rgb();
    let colour = RGBColor(r, g, b);
    let line = vec![(x, cy), (x + 34, cy)];
    match s.style {
        Style::LinesWithErrorBars => {
            area.draw(&PathElement::new(line, colour.stroke_width(theme.stroke)))
                .map_err(draw_error)?;
            area.draw(&PathElement::new(
                vec![(x + 17, cy - 7), (x + 17, cy + 7)],
                colour.stroke_width(theme.stroke),
            ))
            .map_err(draw_error)?;
            area.draw(&Circle::new((x + 17, cy), theme.marker, colour.filled()))
                .map_err(draw_error)?;
        }
        Style::Band => {
            area.draw(&Rectangle::new(
                [(x, cy - 7), (x + 34, cy + 7)],
                colour.mix(0.22).filled(),
            ))
            .map_err(draw_error)?;
            area.draw(&PathElement::new(line, colour.stroke_width(theme.stroke)))
                .map_err(draw_error)?;
        }
        Style::Line => {
            area.draw(&PathElement::new(
                line,
                colour.stroke_width(theme.stroke + 1),
            ))
            .map_err(draw_error)?;
        }
        Style::Markers => {
            for dx in [6, 17, 28] {
                area.draw(&Circle::new(
                    (x + dx, cy),
                    theme.marker - 1,
                    colour.mix(0.55).filled(),
                ))
                .map_err(draw_error)?;
            }
        }
        Style::HorizontalReference => {
            area.draw(&DashedPathElement::new(
                line,
                9,
                5,
                colour.stroke_width(theme.stroke + 1),
            ))
            .map_err(draw_error)?;
        }
    }
    Ok(())
}
