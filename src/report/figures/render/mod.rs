//! Drawing [`Chart`](super::chart::Chart)s and [`Grid`]s to SVG text and PNG bytes with plotters.
//!
//! No system fonts or libraries: text is laid out and rasterised by
//! `ab_glyph` with DejaVu Sans compiled into the binary (the `dejavu` crate),
//! registered under the one family name the figures use. The PNG is drawn
//! into an in-memory RGB buffer and encoded with the `png` crate, so the
//! bytes can be written atomically like every other result file.

use std::sync::OnceLock;

use anyhow::{Result, anyhow};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::chart::{Cell, Grid, Picture};

mod axis;
mod map;
mod plot;

pub(crate) use axis::tick_label;
use plot::draw_chart;

/// The font family every figure uses (registered in [`ensure_fonts`]).
pub(crate) const FAMILY: &str = "sans-serif";

/// Registers DejaVu Sans (regular and bold) as [`FAMILY`], once per process.
///
/// plotters' `ab_glyph` text looks fonts up by family name; without this
/// every chart with text fails with `FontUnavailable`.
pub(crate) fn ensure_fonts() -> Result<()> {
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
pub(crate) const SINGLE_SIZE: (u32, u32) = (1000, 680);
/// Pixel size of one panel of a grid.
pub(crate) const PANEL_SIZE: (u32, u32) = (620, 470);
/// Height of a grid's title block.
const GRID_HEADER: u32 = 86;

/// The pixel size `picture` is drawn at.
pub(crate) fn size_of(picture: Picture<'_>) -> (u32, u32) {
    match picture {
        Picture::Single(_) => SINGLE_SIZE,
        Picture::Grid(g) => (
            PANEL_SIZE.0 * g.cols as u32,
            GRID_HEADER + PANEL_SIZE.1 * g.rows as u32,
        ),
        Picture::Map(m) => map::size(m),
    }
}

/// The picture as an SVG document.
pub(crate) fn to_svg(picture: Picture<'_>) -> Result<String> {
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
pub(crate) fn to_png(picture: Picture<'_>) -> Result<Vec<u8>> {
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
pub(crate) fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>> {
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
        Picture::Map(m) => map::draw(root, m),
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

#[cfg(test)]
mod tests;
