//! Figures drawn from results folders: each scenario's paper figure as SVG
//! and PNG next to its CSV, and the papers' multi-panel grids assembled from
//! several scenarios.
//!
//! The pipeline is results folder → [`Results`] → [`Layout`] → `Chart` →
//! `render`. `layout_for` is the one place that decides how a scenario
//! kind is drawn; to draw a new kind, write a type implementing [`Layout`]
//! (a chart and, optionally, the paper's claims it can check) and add one
//! match arm there. Kinds without a layout fall back to `generic::Generic`,
//! which draws any tidy `series, x, mean, ci95_low, ci95_high` summary.

pub(crate) mod chart;
pub(crate) mod claims;
pub mod faults;
pub(crate) mod generic;
pub(crate) mod paper;
pub mod protocol;
pub(crate) mod recovery;
pub(crate) mod render;
pub mod results;
pub(crate) mod theory;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub(crate) use chart::{Cell, Chart, Grid, Picture};
pub(crate) use claims::Claim;
pub(crate) use results::Results;

use crate::report::manifest::MANIFEST_FILE;
use crate::report::outdir;

/// File stem of a scenario's own figure (`figure.svg`, `figure.png`).
pub(crate) const FIGURE_STEM: &str = "figure";

/// How one scenario kind (or one layout within a kind) becomes a figure.
pub trait Layout {
    /// A short description for messages.
    fn name(&self) -> &'static str;
    /// The chart for these results.
    fn chart(&self, r: &Results) -> Result<Chart>;
    /// The measured numbers the paper states claims about (none by default).
    fn claims(&self, _r: &Results) -> Result<Vec<Claim>> {
        Ok(Vec::new())
    }
    /// A multi-panel figure of this one scenario, if its layout has one
    /// (e.g. one panel per number of workers); `figure.*` is then the grid
    /// and [`Layout::chart`] is the panel used in papers' grids.
    fn grid(&self, _r: &Results) -> Result<Option<Grid>> {
        Ok(None)
    }
    /// Measured findings in words for the reproduction report, for kinds
    /// whose papers state no percentage claims (e.g. simulated means against
    /// closed forms). One Markdown bullet's text per finding.
    fn findings(&self, _r: &Results) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
}

/// The layout for a results folder, from its scenario kind and swept axis.
/// This is the one place that maps kinds to figures.
pub(crate) fn layout_for(r: &Results) -> Box<dyn Layout> {
    match (r.kind().as_str(), r.x_name().as_deref()) {
        ("recovery", Some("lost_fraction")) => Box::new(recovery::PartialRecovery),
        ("recovery", Some("checkpoint_fraction")) => Box::new(recovery::PriorityCheckpoint),
        ("recovery", _) => Box::new(recovery::RecoverySweep),
        ("protocol", _) if protocol::is_training(r) => Box::new(protocol::ErrorRuntime),
        ("protocol", _) => Box::new(protocol::Runtime),
        ("perturbation", _) => Box::new(theory::IterationCostBound),
        ("precision", _) => Box::new(theory::PrecisionFloor),
        ("faults", _) => Box::new(faults::Faults),
        _ => Box::new(generic::Generic),
    }
}

/// `rework_iterations` → `Rework iterations`.
pub(crate) fn humanize(name: &str) -> String {
    let s = name.replace('_', " ");
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => s,
    }
}

/// Writes `<dir>/<stem>.svg` and `<dir>/<stem>.png` atomically (creating
/// `dir`; `stem` must be a plain name, see [`outdir::check_name`]); returns
/// their paths.
pub(crate) fn write_picture(dir: &Path, stem: &str, picture: Picture<'_>) -> Result<Vec<PathBuf>> {
    outdir::ensure_root(dir, &mut outdir::Created::new())?;
    let svg_path = outdir::file(dir, &format!("{stem}.svg"))?;
    let png_path = outdir::file(dir, &format!("{stem}.png"))?;
    let svg = render::to_svg(picture).with_context(|| format!("drawing {}", svg_path.display()))?;
    outdir::write_file(&svg_path, svg.as_bytes())?;
    let png = render::to_png(picture).with_context(|| format!("drawing {}", png_path.display()))?;
    outdir::write_file(&png_path, &png)?;
    Ok(vec![svg_path, png_path])
}

/// Draws a results folder's figure as `figure.svg` and `figure.png` in it.
pub(crate) fn draw_results(dir: &Path) -> Result<Vec<PathBuf>> {
    let r = Results::load(dir)?;
    draw_loaded(&r)
}

/// Draws already loaded results into their folder.
pub(crate) fn draw_loaded(r: &Results) -> Result<Vec<PathBuf>> {
    let layout = layout_for(r);
    let context = || format!("{}: cannot draw a {}", r.dir.display(), layout.name());
    if let Some(grid) = layout.grid(r).with_context(context)? {
        return write_picture(&r.dir, FIGURE_STEM, Picture::Grid(&grid));
    }
    let chart = layout.chart(r).with_context(context)?;
    write_picture(&r.dir, FIGURE_STEM, Picture::Single(&chart))
}

/// The folders under `dir` to draw: `dir` itself if it holds results,
/// otherwise its immediate subfolders that do (sorted by name; links are
/// not followed).
pub(crate) fn expand_results_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.join(MANIFEST_FILE).is_file() || !dir.is_dir() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| p.join(MANIFEST_FILE).is_file())
        .collect();
    found.sort();
    if found.is_empty() {
        return Ok(vec![dir.to_path_buf()]);
    }
    Ok(found)
}

/// A scenario's chart as a grid panel, with a shorter subtitle. In a grid of
/// one paper figure (`in_paper_figure`) it is titled by its panel letter and
/// the paper's caption; otherwise by its own title, and the subtitle names
/// its paper panel.
pub(crate) fn panel_chart(r: &Results, in_paper_figure: bool) -> Result<Chart> {
    let mut chart = layout_for(r).chart(r)?;
    let panel = r.paper().and_then(|p| paper::parse_panel(&p));
    let mut sub = Vec::new();
    chart.title = match &panel {
        Some(paper::PanelRef {
            figure,
            panel: Some(l),
        }) if in_paper_figure => match paper::panel_caption(figure, *l) {
            Some(caption) => format!("({l}) {caption}"),
            None => format!("({l}) {}", r.title()),
        },
        _ => {
            if let Some(p) = r.paper() {
                sub.push(p);
            }
            r.title()
        }
    };
    sub.push(r.data().describe());
    if let Some(n) = r.trials_per_point() {
        sub.push(format!("{n} trials per point"));
    }
    chart.subtitle = sub.join(" · ");
    Ok(chart)
}

/// Groups results by the paper figure their `paper` field names, known
/// figures first in the papers' order, then others by name. Results that
/// name no figure are left out.
pub(crate) fn paper_groups(results: &[Results]) -> Vec<(String, Vec<usize>)> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let Some(p) = r.paper().and_then(|p| paper::parse_panel(&p)) else {
            continue;
        };
        match groups.iter_mut().find(|(k, _)| *k == p.figure) {
            Some((_, v)) => v.push(i),
            None => groups.push((p.figure, vec![i])),
        }
    }
    // Panels in letter order within each figure.
    for (_, members) in &mut groups {
        members.sort_by_key(|&i| {
            results[i]
                .paper()
                .and_then(|p| paper::parse_panel(&p))
                .and_then(|p| p.panel)
        });
    }
    let rank = |k: &str| {
        paper::FIGURES
            .iter()
            .position(|f| f.key == k)
            .unwrap_or(usize::MAX)
    };
    groups.sort_by(|a, b| rank(&a.0).cmp(&rank(&b.0)).then(a.0.cmp(&b.0)));
    groups
}

/// Assembles a grid from several scenarios' results. If they all belong to
/// one figure of [`paper::FIGURES`] with distinct panel letters, each goes to
/// its panel's place in the paper's layout (absent panels are marked);
/// otherwise panels are laid out in the given order, four per row.
pub(crate) fn grid(results: &[&Results], title: Option<&str>) -> Result<Grid> {
    let refs: Vec<Option<paper::PanelRef>> = results
        .iter()
        .map(|r| r.paper().and_then(|p| paper::parse_panel(&p)))
        .collect();
    let figure = refs
        .first()
        .and_then(|r| r.as_ref())
        .map(|r| r.figure.clone());
    let same_figure = figure.is_some()
        && refs.iter().all(|r| {
            r.as_ref().map(|r| &r.figure) == figure.as_ref()
                && r.as_ref().is_some_and(|r| r.panel.is_some())
        });
    let letters: Vec<char> = refs.iter().flatten().filter_map(|r| r.panel).collect();
    let distinct = {
        let mut l = letters.clone();
        l.sort_unstable();
        l.dedup();
        l.len() == letters.len()
    };
    let known = figure.as_deref().and_then(paper::known);
    let real = results
        .iter()
        .filter(|r| r.data().real == Some(true))
        .count();
    let (rows, cols, cells, name) = match known {
        Some(f) if same_figure && distinct => {
            let mut cells = Vec::new();
            for (letter, caption) in f.panels {
                let at = refs
                    .iter()
                    .position(|r| r.as_ref().and_then(|r| r.panel) == Some(*letter));
                cells.push(match at {
                    Some(i) => Cell::Chart(Box::new(panel_chart(results[i], true)?)),
                    None => Cell::Missing(format!("({letter}) {caption}\nnot in these results")),
                });
            }
            (f.rows, f.cols, cells, f.title.to_string())
        }
        _ => {
            let (rows, cols) = paper::auto_shape(results.len());
            let mut cells = Vec::new();
            for r in results {
                cells.push(Cell::Chart(Box::new(panel_chart(r, same_figure)?)));
            }
            while cells.len() < rows * cols {
                cells.push(Cell::Missing(String::new()));
            }
            let name = match (&figure, same_figure) {
                (Some(f), true) => f.clone(),
                _ => format!("{} scenarios", results.len()),
            };
            (rows, cols, cells, name)
        }
    };
    let drawn = cells.iter().filter(|c| matches!(c, Cell::Chart(_))).count();
    Ok(Grid {
        title: title.map_or(name, str::to_string),
        subtitle: format!(
            "{drawn} of {} panels · {real} on real data, {} on synthetic stand-ins · error bars: 95% CI of the mean",
            rows * cols,
            results.len() - real
        ),
        rows,
        cols,
        cells,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_well() {
        assert_eq!(humanize("rework_iterations"), "Rework iterations");
        assert_eq!(humanize(""), "");
    }
}
