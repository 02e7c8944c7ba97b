//! Drawing a [`Map`]: row labels on the left, grouped column headers on
//! top, one coloured square per (row, column) and a legend underneath.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{centred_text, draw_error, fit_text, font};
use crate::report::figures::chart::{Map, Mark};

/// Width of the row-label column.
const LABEL_W: u32 = 560;
/// Side of a cell.
const CELL: u32 = 26;
/// Height of the title block.
const TITLE_H: u32 = 70;
/// Height of one column-header line.
const HEADER_LINE: u32 = 22;
/// Height of the legend block.
const LEGEND_H: u32 = 56;
/// Margin on the right.
const MARGIN: u32 = 20;

/// What each mark means in the legend, with its colour.
const LEGEND: [(Mark, &str); 5] = [
    (Mark::Holds, "holds (CI agrees)"),
    (Mark::Leans, "holds (point estimate)"),
    (Mark::Misses, "misses (CI reaches it)"),
    (Mark::Fails, "fails (CI excludes it)"),
    (Mark::Missing, "not measured"),
];

fn colour(m: Mark) -> RGBColor {
    match m {
        Mark::Holds => RGBColor(26, 135, 60),
        Mark::Leans => RGBColor(150, 210, 140),
        Mark::Misses => RGBColor(245, 190, 120),
        Mark::Fails => RGBColor(205, 50, 45),
        Mark::Missing => RGBColor(215, 215, 215),
    }
}

/// The pixel size `m` is drawn at.
pub(super) fn size(m: &Map) -> (u32, u32) {
    let w = (LABEL_W + CELL * m.cols as u32 + MARGIN).max(900);
    let h = TITLE_H + HEADER_LINE * m.header.len() as u32 + CELL * m.rows.len() as u32 + LEGEND_H;
    (w, h)
}

pub(super) fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, m: &Map) -> Result<()> {
    let (w, _) = size(m);
    let mut y = 10;
    y += centred_text(root, &m.title, 22.0, FontStyle::Bold, w, y)? + 8;
    centred_text(root, &m.subtitle, 14.0, FontStyle::Normal, w, y)?;
    let x0 = LABEL_W as i32;
    let mut top = TITLE_H as i32;
    for line in &m.header {
        let mut col = 0usize;
        for (label, span) in line {
            let left = x0 + (col * CELL as usize) as i32;
            let width = (*span * CELL as usize) as u32;
            let (text, size) = fit_text(
                root,
                label,
                13.0,
                FontStyle::Normal,
                width.saturating_sub(2),
            )?;
            let style = font(size, FontStyle::Normal).pos(Pos::new(HPos::Center, VPos::Center));
            root.draw(&Text::new(
                text,
                (left + width as i32 / 2, top + HEADER_LINE as i32 / 2),
                style,
            ))
            .map_err(draw_error)?;
            // A thin rule under each group shows its extent.
            root.draw(&PathElement::new(
                vec![
                    (left + 2, top + HEADER_LINE as i32 - 2),
                    (left + width as i32 - 2, top + HEADER_LINE as i32 - 2),
                ],
                BLACK.mix(0.4),
            ))
            .map_err(draw_error)?;
            col += span;
        }
        top += HEADER_LINE as i32;
    }
    for (r, label) in m.rows.iter().enumerate() {
        let y = top + (r as u32 * CELL) as i32;
        let (text, size) = fit_text(root, label, 13.0, FontStyle::Normal, LABEL_W - 16)?;
        let style = font(size, FontStyle::Normal).pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(text, (x0 - 8, y + CELL as i32 / 2), style))
            .map_err(draw_error)?;
        for c in 0..m.cols {
            let x = x0 + (c as u32 * CELL) as i32;
            let mark = m
                .marks
                .get(r * m.cols + c)
                .copied()
                .unwrap_or(Mark::Missing);
            root.draw(&Rectangle::new(
                [(x + 1, y + 1), (x + CELL as i32 - 1, y + CELL as i32 - 1)],
                colour(mark).filled(),
            ))
            .map_err(draw_error)?;
        }
    }
    let mut x = 20;
    let y = top + (m.rows.len() as u32 * CELL) as i32 + 18;
    for (mark, label) in LEGEND {
        root.draw(&Rectangle::new(
            [(x, y), (x + 18, y + 18)],
            colour(mark).filled(),
        ))
        .map_err(draw_error)?;
        let style = font(13.0, FontStyle::Normal).pos(Pos::new(HPos::Left, VPos::Center));
        root.draw(&Text::new(label.to_string(), (x + 24, y + 9), style))
            .map_err(draw_error)?;
        x += 24
            + root
                .estimate_text_size(label, &font(13.0, FontStyle::Normal))
                .map_err(draw_error)?
                .0 as i32
            + 24;
    }
    Ok(())
}
