//! Drawing [`Chart`]s and [`Grid`]s to SVG text and PNG bytes with plotters.
//!
//! No system fonts or libraries: text is laid out and rasterised by
//! `ab_glyph` with DejaVu Sans compiled into the binary (the `dejavu` crate),
//! registered under the one family name the figures use. The PNG is drawn
//! into an in-memory RGB buffer and encoded with the `png` crate, so the
//! bytes can be written atomically like every other result file.

use std::sync::OnceLock;

use anyhow::{Result, anyhow};
use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{Axis, Cell, Chart, Grid, Picture, Point, Scale, Series, Style};

/// The font family every figure uses (registered in [`ensure_fonts`]).
pub const FAMILY: &str = "sans-serif";

/// Registers DejaVu Sans (regular and bold) as [`FAMILY`], once per process.
///
/// plotters' `ab_glyph` text looks fonts up by family name; without this
/// every chart with text fails with `FontUnavailable`.
pub fn ensure_fonts() -> Result<()> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let fonts: [(FontStyle, &'static [u8]); 2] = [
                (FontStyle::Normal, dejavu::sans::regular()),
                (FontStyle::Bold, dejavu::sans::bold()),
            ];
            for (style, bytes) in fonts {
                plotters::style::register_font(FAMILY, style, bytes).map_err(|_| {
                    format!(
                        "the embedded DejaVu Sans font ({}) could not be parsed",
                        style.as_str()
                    )
                })?;
            }
            Ok(())
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

/// Text sizes and strokes, in pixels, for one panel size.
#[derive(Clone, Copy, Debug)]
struct Theme {
    title: f64,
    subtitle: f64,
    axis: f64,
    tick: f64,
    legend: f64,
    stroke: u32,
    marker: u32,
    x_label_area: u32,
    y_label_area: u32,
}

const SINGLE_THEME: Theme = Theme {
    title: 24.0,
    subtitle: 16.0,
    axis: 19.0,
    tick: 16.0,
    legend: 16.0,
    stroke: 2,
    marker: 5,
    x_label_area: 62,
    y_label_area: 82,
};

const PANEL_THEME: Theme = Theme {
    title: 20.0,
    subtitle: 14.0,
    axis: 16.0,
    tick: 14.0,
    legend: 14.0,
    stroke: 2,
    marker: 4,
    x_label_area: 54,
    y_label_area: 72,
};

/// Pixel size of a single chart.
pub const SINGLE_SIZE: (u32, u32) = (1000, 680);
/// Pixel size of one panel of a grid.
pub const PANEL_SIZE: (u32, u32) = (620, 470);
/// Height of a grid's title block.
const GRID_HEADER: u32 = 86;

/// The pixel size `picture` is drawn at.
pub fn size_of(picture: Picture<'_>) -> (u32, u32) {
    match picture {
        Picture::Single(_) => SINGLE_SIZE,
        Picture::Grid(g) => (
            PANEL_SIZE.0 * g.cols as u32,
            GRID_HEADER + PANEL_SIZE.1 * g.rows as u32,
        ),
    }
}

/// The picture as an SVG document.
pub fn to_svg(picture: Picture<'_>) -> Result<String> {
    ensure_fonts()?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size_of(picture)).into_drawing_area();
        paint(&root, picture)?;
        root.present().map_err(draw_error)?;
    }
    Ok(text)
}

/// The picture as a PNG image (8-bit RGB).
pub fn to_png(picture: Picture<'_>) -> Result<Vec<u8>> {
    ensure_fonts()?;
    let (w, h) = size_of(picture);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        paint(&root, picture)?;
        root.present().map_err(draw_error)?;
    }
    encode_png(&rgb, w, h)
}

/// Encodes an 8-bit RGB buffer as PNG.
pub fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc
        .write_header()
        .map_err(|e| anyhow!("cannot encode PNG: {e}"))?;
    writer
        .write_image_data(rgb)
        .map_err(|e| anyhow!("cannot encode PNG: {e}"))?;
    writer
        .finish()
        .map_err(|e| anyhow!("cannot encode PNG: {e}"))?;
    Ok(out)
}

fn draw_error<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the figure: {e}")
}

fn paint<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, picture: Picture<'_>) -> Result<()> {
    root.fill(&WHITE).map_err(draw_error)?;
    match picture {
        Picture::Single(chart) => draw_chart(root, chart, &SINGLE_THEME),
        Picture::Grid(grid) => draw_grid(root, grid),
    }
}

fn draw_grid<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, grid: &Grid) -> Result<()> {
    let (header, body) = root.split_vertically(GRID_HEADER);
    let (w, _) = header.dim_in_pixel();
    let mut y = 14;
    y += centred_text(&header, &grid.title, 28.0, FontStyle::Bold, w, y)? + 8;
    centred_text(&header, &grid.subtitle, 17.0, FontStyle::Normal, w, y)?;
    let cells = body.split_evenly((grid.rows, grid.cols));
    for (area, cell) in cells.iter().zip(&grid.cells) {
        match cell {
            Cell::Chart(chart) => draw_chart(area, chart, &PANEL_THEME)?,
            Cell::Missing(note) => {
                let (cw, ch) = area.dim_in_pixel();
                area.draw(&Rectangle::new(
                    [(12, 12), (cw as i32 - 12, ch as i32 - 12)],
                    ShapeStyle::from(RGBColor(200, 200, 200)).stroke_width(1),
                ))
                .map_err(draw_error)?;
                let mut y = ch as i32 / 2 - 24;
                for line in note.lines() {
                    y += centred_text(area, line, PANEL_THEME.subtitle, FontStyle::Normal, cw, y)?
                        + 6;
                }
            }
        }
    }
    Ok(())
}

fn font(size: f64, style: FontStyle) -> TextStyle<'static> {
    TextStyle::from((FAMILY, size).into_font().style(style)).color(&BLACK)
}

/// Draws `text` centred horizontally at `top`, shrinking it (down to 70%)
/// and then shortening it with "…" until it fits `width`. Returns its height.
fn centred_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    size: f64,
    style: FontStyle,
    width: u32,
    top: i32,
) -> Result<i32> {
    let avail = width.saturating_sub(24).max(40);
    let (fitted, size) = fit_text(area, text, size, style, avail)?;
    let ts = font(size, style).pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(fitted, (width as i32 / 2, top), ts))
        .map_err(draw_error)?;
    Ok(size.round() as i32)
}

fn fit_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    size: f64,
    style: FontStyle,
    avail: u32,
) -> Result<(String, f64)> {
    let width = |s: &str, size: f64| -> Result<u32> {
        Ok(area
            .estimate_text_size(s, &font(size, style))
            .map_err(draw_error)?
            .0)
    };
    let w = width(text, size)?;
    if w <= avail {
        return Ok((text.to_string(), size));
    }
    let size = (size * avail as f64 / w as f64).max(size * 0.7);
    let mut chars: Vec<char> = text.chars().collect();
    let mut s = text.to_string();
    while width(&s, size)? > avail && chars.len() > 1 {
        chars.pop();
        s = chars.iter().collect::<String>().trim_end().to_string() + "…";
    }
    Ok((s, size))
}

/// Draws one chart (title block, legend, axes, series) into `area`.
fn draw_chart<DB: DrawingBackend>(
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

/// The axis range (in axis positions) covering every point, CI and
/// reference of the series, padded so markers and error bars stay inside.
fn range(axis: &Axis, series: &[Series], horizontal: bool) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    let mut add = |v: f64| {
        let p = axis.scale.forward(v);
        if p.is_finite() {
            lo = lo.min(p);
            hi = hi.max(p);
        }
    };
    for s in series {
        // A horizontal reference spans whatever range the others give.
        if horizontal && s.style == Style::HorizontalReference {
            continue;
        }
        for p in &s.points {
            if horizontal {
                add(p.x);
            } else {
                add(p.y);
                if p.has_ci() {
                    add(p.lo);
                    add(p.hi);
                }
            }
        }
    }
    if let Some(t) = &axis.ticks {
        for &v in t {
            add(v);
        }
    }
    if axis.include_zero && axis.scale == Scale::Linear {
        add(0.0);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        let pad = if lo.abs() > 1e-12 {
            lo.abs() * 0.1
        } else {
            1.0
        };
        return (lo - pad, hi + pad);
    }
    let span = hi - lo;
    let (below, above) = if horizontal {
        (0.06, 0.06)
    } else {
        (0.04, 0.08)
    };
    let lo_p = if axis.include_zero && lo == 0.0 && !horizontal {
        0.0
    } else {
        lo - below * span
    };
    (lo_p, hi + above * span)
}

/// A linear f64 coordinate whose ticks and grid lines sit exactly at `keys`.
/// (plotters' `with_key_points` on an f64 range loses the label formatter.)
struct Keyed {
    range: Range<f64>,
    keys: Vec<f64>,
}

impl Ranged for Keyed {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let t = if span > 0.0 {
            (v - self.range.start) / span
        } else {
            0.5
        };
        let px = limit.0 as f64 + (limit.1 - limit.0) as f64 * t;
        px.round().clamp(-1e6, 1e6) as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// Tick positions (axis positions) inside `[lo, hi]`: the axis's own ticks,
/// or round numbers (1, 2 or 5 × 10^k steps, about six of them).
fn ticks(axis: &Axis, lo: f64, hi: f64) -> Vec<f64> {
    if let Some(t) = &axis.ticks {
        let v: Vec<f64> = t
            .iter()
            .map(|&v| axis.scale.forward(v))
            .filter(|p| p.is_finite() && *p >= lo - 1e-9 && *p <= hi + 1e-9)
            .collect();
        if !v.is_empty() {
            return v;
        }
    }
    nice_ticks(lo, hi, 6)
}

/// Round-number ticks covering `[lo, hi]` with about `target` steps.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater)
        || !lo.is_finite()
        || !hi.is_finite()
    {
        return vec![lo];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last)
        .map(|i| {
            let v = i as f64 * step;
            if v.abs() < step * 1e-9 { 0.0 } else { v }
        })
        .collect()
}

/// A tick label, as a simple fraction (denominator up to 16) if `fractions`
/// and the value is one, else as [`tick_label`] gives it.
pub fn axis_label(v: f64, fractions: bool) -> String {
    if fractions && v > 0.0 && v < 1.0 {
        for den in [2u32, 3, 4, 5, 8, 10, 16] {
            let num = v * den as f64;
            if (num - num.round()).abs() < 1e-9 {
                return format!("{}/{den}", num.round() as u32);
            }
        }
    }
    tick_label(v)
}

/// A tick label: integers without decimals, others with up to 4 significant
/// digits and no trailing zeros.
pub fn tick_label(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if (v - v.round()).abs() < 1e-9 * v.abs().max(1.0) && v.abs() < 1e15 {
        return format!("{}", v.round() as i64);
    }
    let digits = (4 - 1 - v.abs().log10().floor() as i32).clamp(0, 10) as usize;
    let s = format!("{v:.digits$}");
    if !s.contains('.') {
        // No decimals to trim: 230810 must keep its zeros.
        return s;
    }
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::figures::chart::Colour;

    #[test]
    fn nice_ticks_are_round_and_cover_the_range() {
        assert_eq!(nice_ticks(0.0, 1.0, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(nice_ticks(-0.3, 2.2, 5), vec![0.0, 0.5, 1.0, 1.5, 2.0]);
        let t = nice_ticks(3.0, 97.0, 6);
        assert_eq!(t, vec![20.0, 40.0, 60.0, 80.0]);
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(8.0), "8");
        assert_eq!(tick_label(0.125), "0.125");
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(2.50000001), "2.5");
        assert_eq!(tick_label(-1.0), "-1");
        assert_eq!(tick_label(1234.6), "1235");
        assert_eq!(tick_label(230810.24), "230810");
        assert_eq!(tick_label(1500.25), "1500");
        assert_eq!(axis_label(0.125, true), "1/8");
        assert_eq!(axis_label(0.75, true), "3/4");
        assert_eq!(axis_label(0.5, true), "1/2");
        assert_eq!(axis_label(1.0, true), "1");
        assert_eq!(axis_label(0.123, true), "0.123");
        assert_eq!(axis_label(0.125, false), "0.125");
    }

    fn sample_chart(title: &str) -> Chart {
        Chart {
            title: title.into(),
            subtitle: "subtitle".into(),
            x: Axis::linear("x"),
            y: Axis::linear("y").from_zero(),
            series: vec![Series {
                name: "s".into(),
                style: Style::LinesWithErrorBars,
                colour: Colour::Palette(0),
                points: vec![
                    Point::with_ci(0.0, 1.0, 0.5, 1.5),
                    Point::with_ci(1.0, 2.0, 1.5, 2.5),
                ],
            }],
            dodge: false,
        }
    }

    /// Counts dark pixels (all channels < 100) in rows `rows` of a decoded PNG.
    fn dark_pixels(png_bytes: &[u8], rows: std::ops::Range<usize>) -> usize {
        let dec = png::Decoder::new(std::io::Cursor::new(png_bytes));
        let mut reader = dec.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        let w = info.width as usize;
        rows.flat_map(|y| (0..w).map(move |x| (y * w + x) * 3))
            .filter(|&i| buf[i] < 100 && buf[i + 1] < 100 && buf[i + 2] < 100)
            .count()
    }

    #[test]
    fn text_is_drawn_with_real_glyphs() {
        // Different letters must give different amounts of ink: a missing
        // font draws nothing, and a fallback draws the same box for every glyph.
        let thin = to_png(Picture::Single(&sample_chart("iiiiiiiiiiii"))).unwrap();
        let wide = to_png(Picture::Single(&sample_chart("WWWWWWWWWWWW"))).unwrap();
        let a = dark_pixels(&thin, 0..40);
        let b = dark_pixels(&wide, 0..40);
        assert!(a > 20, "title row has ink ({a} dark pixels)");
        assert!(b as f64 > 2.0 * a as f64, "W is wider than i: {b} vs {a}");
    }

    #[test]
    fn bound_figures_draw_a_red_line_over_a_scatter() {
        // The primitives of SCAR Figures 3-5: one marker per trial and the
        // Theorem 1 bound as a red line.
        let scatter: Vec<Point> = (0..50)
            .map(|i| Point::plain(i as f64 / 10.0, (i % 7) as f64))
            .collect();
        let chart = Chart {
            title: "Cost vs perturbation".into(),
            subtitle: String::new(),
            x: Axis::linear("‖δ‖"),
            y: Axis::linear("Iteration cost"),
            series: vec![
                Series {
                    name: "trials".into(),
                    style: Style::Markers,
                    colour: Colour::Palette(0),
                    points: scatter,
                },
                Series {
                    name: "Theorem 1 bound".into(),
                    style: Style::Line,
                    colour: Colour::Red,
                    points: vec![Point::plain(0.0, 0.0), Point::plain(5.0, 9.0)],
                },
            ],
            dodge: false,
        };
        let bytes = to_png(Picture::Single(&chart)).unwrap();
        let dec = png::Decoder::new(std::io::Cursor::new(&bytes));
        let mut reader = dec.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut buf).unwrap();
        let (r, g, b) = Colour::Red.rgb();
        let red = buf
            .chunks(3)
            .filter(|p| p[0] == r && p[1] == g && p[2] == b)
            .count();
        assert!(red > 500, "{red} pure red pixels");
        let svg = to_svg(Picture::Single(&chart)).unwrap();
        assert!(svg.contains("Theorem 1 bound") && svg.contains("‖δ‖"));
    }

    #[test]
    fn svg_has_the_text_and_png_the_size() {
        let c = sample_chart("A title with <, > & \"quotes\"");
        let svg = to_svg(Picture::Single(&c)).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
        assert!(
            texts
                .iter()
                .any(|t| t.contains("A title with <, > & \"quotes\""))
        );
        assert!(texts.iter().any(|t| t.contains("subtitle")));
        let png_bytes = to_png(Picture::Single(&c)).unwrap();
        let dec = png::Decoder::new(std::io::Cursor::new(&png_bytes));
        let reader = dec.read_info().unwrap();
        assert_eq!((reader.info().width, reader.info().height), SINGLE_SIZE);
    }
}
