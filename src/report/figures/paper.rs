//! The papers' multi-panel figures: which panel sits where, so results from
//! several scenarios can be assembled into the paper's grid (SCAR Figures 6
//! and 7 are 2×4). A scenario names its panel in its `paper` field, e.g.
//! `paper = "SCAR Fig. 6(e)"`; figures not listed here get an automatic
//! layout from the panel letters.

/// A figure of one of the papers, as laid out there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PaperFigure {
    /// The prefix scenarios use in their `paper` field (`SCAR Fig. 6`).
    pub(crate) key: &'static str,
    /// File name stem of the assembled grid (`scar-fig6`).
    pub(crate) stem: &'static str,
    /// Title of the assembled grid.
    pub(crate) title: &'static str,
    /// Rows of panels.
    pub(crate) rows: usize,
    /// Columns of panels.
    pub(crate) cols: usize,
    /// Panel letters in row-major order, with the paper's panel captions.
    pub(crate) panels: &'static [(char, &'static str)],
    /// The paper's quantitative claim about this figure, quoted, if any.
    pub(crate) claim: Option<&'static str>,
}

/// SCAR (arXiv 1810.07354) Figures 3–7, with the panel captions of the paper.
pub(crate) const FIGURES: &[PaperFigure] = &[
    PaperFigure {
        key: "SCAR Fig. 3",
        stem: "scar-fig3",
        title: "SCAR Figure 3: iteration cost on a 4-D quadratic program",
        rows: 1,
        cols: 3,
        panels: &[
            ('a', "Cost vs ‖δ‖, one perturbation at iteration 500"),
            ('b', "Cost vs Δ_T, one perturbation at iteration 500"),
            ('c', "Cost vs Δ_T, perturbations with p = 0.001"),
        ],
        claim: None,
    },
    PaperFigure {
        key: "SCAR Fig. 4",
        stem: "scar-fig4",
        title: "SCAR Figure 4: iteration cost of MLR on MNIST",
        rows: 1,
        cols: 2,
        panels: &[
            ('a', "Random perturbations"),
            ('b', "Adversarial perturbations"),
        ],
        claim: None,
    },
    PaperFigure {
        key: "SCAR Fig. 5",
        stem: "scar-fig5",
        title: "SCAR Figure 5: resetting parameters to their initial values",
        rows: 1,
        cols: 2,
        panels: &[('a', "MLR on MNIST"), ('b', "LDA on 20 Newsgroups")],
        claim: None,
    },
    PaperFigure {
        key: "SCAR Fig. 6",
        stem: "scar-fig6",
        title: "SCAR Figure 6: partial vs full recovery",
        rows: 2,
        cols: 4,
        panels: &[
            ('a', "MLR on MNIST"),
            ('b', "MF on MovieLens"),
            ('c', "LDA on 20 Newsgroups"),
            ('d', "CNN-bylayer on MNIST"),
            ('e', "MLR on CoverType"),
            ('f', "MF on Jester"),
            ('g', "LDA on Reuters"),
            ('h', "CNN-byshard on MNIST"),
        ],
        claim: Some(
            "Across all models and datasets tested, SCAR with partial recovery reduces the \
             iteration cost by 12%–42% for 3/4 failures, 31%–62% for 1/2 failures, and 59%–89% \
             for 1/4 failures. (§5.3)",
        ),
    },
    PaperFigure {
        key: "SCAR Fig. 7",
        stem: "scar-fig7",
        title: "SCAR Figure 7: prioritized partial checkpoints",
        rows: 2,
        cols: 4,
        panels: &[
            ('a', "MLR on MNIST"),
            ('b', "MF on MovieLens"),
            ('c', "LDA on 20 Newsgroups"),
            ('d', "CNN-bylayer on MNIST"),
            ('e', "MLR on CoverType"),
            ('f', "MF on Jester"),
            ('g', "LDA on Reuters"),
            ('h', "CNN-byshard on MNIST"),
        ],
        claim: Some(
            "Across all models and datasets tested, combining partial recovery with prioritized \
             1/8th checkpoints at 8× frequency reduces the iteration cost of losing 1/2 of all \
             model parameters by 78%–95% when compared with traditional checkpoint recovery. (§5.4)",
        ),
    },
];

/// A scenario's place in a paper figure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PanelRef {
    /// The figure (`SCAR Fig. 6`).
    pub(crate) figure: String,
    /// The panel letter, if the `paper` field names one.
    pub(crate) panel: Option<char>,
}

/// Parses a `paper` field: `"SCAR Fig. 6(e)"` → figure `SCAR Fig. 6`, panel `e`.
pub(crate) fn parse_panel(paper: &str) -> Option<PanelRef> {
    let p = paper.trim();
    if p.is_empty() {
        return None;
    }
    if let Some(open) = p.rfind('(') {
        let inner = &p[open + 1..];
        let mut chars = inner.chars();
        if let (Some(letter), Some(')'), None) = (chars.next(), chars.next(), chars.next())
            && letter.is_ascii_lowercase()
        {
            return Some(PanelRef {
                figure: p[..open].trim().to_string(),
                panel: Some(letter),
            });
        }
    }
    Some(PanelRef {
        figure: p.to_string(),
        panel: None,
    })
}

/// The known figure with this key.
pub(crate) fn known(key: &str) -> Option<&'static PaperFigure> {
    FIGURES.iter().find(|f| f.key == key)
}

/// The paper's caption of panel `letter` of `figure`, if known.
pub(crate) fn panel_caption(figure: &str, letter: char) -> Option<&'static str> {
    known(figure)?
        .panels
        .iter()
        .find(|(l, _)| *l == letter)
        .map(|(_, c)| *c)
}

/// A file-name stem for a figure key: the known stem, or a slug
/// (`Dutta Fig. 3` → `dutta-fig-3`).
pub(crate) fn stem_of(key: &str) -> String {
    if let Some(f) = known(key) {
        return f.stem.to_string();
    }
    let mut s = String::new();
    for c in key.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
    }
    s.trim_end_matches('-').to_string()
}

/// Rows and columns for `n` panels of a figure not listed in [`FIGURES`]:
/// one row up to four, then rows of four.
pub(crate) fn auto_shape(n: usize) -> (usize, usize) {
    let cols = n.clamp(1, 4);
    (n.div_ceil(cols).max(1), cols)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_parse() {
        assert_eq!(
            parse_panel("SCAR Fig. 6(e)"),
            Some(PanelRef {
                figure: "SCAR Fig. 6".into(),
                panel: Some('e')
            })
        );
        assert_eq!(
            parse_panel("Dutta Fig. 4"),
            Some(PanelRef {
                figure: "Dutta Fig. 4".into(),
                panel: None
            })
        );
        assert_eq!(parse_panel("  "), None);
        assert_eq!(panel_caption("SCAR Fig. 7", 'e'), Some("MLR on CoverType"));
    }

    #[test]
    fn grids_have_a_cell_per_panel() {
        for f in FIGURES {
            assert_eq!(f.rows * f.cols, f.panels.len(), "{}", f.key);
        }
        assert_eq!(stem_of("SCAR Fig. 6"), "scar-fig6");
        assert_eq!(stem_of("Dutta et al. Fig. 3"), "dutta-et-al-fig-3");
        assert_eq!(auto_shape(2), (1, 2));
        assert_eq!(auto_shape(6), (2, 4));
    }
}
