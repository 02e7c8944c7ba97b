//! A chart as data: titles, axes and series with their drawing style, before
//! any pixels. Layouts ([`super::Layout`]) build charts from results; the
//! renderer ([`super::render`]) draws them to SVG and PNG. Keeping the two
//! apart lets each scenario kind describe its paper figure in a few lines and
//! lets the tests inspect a chart without decoding images.

/// One figure panel.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// First title line (the scenario's title, or the paper panel's name).
    pub(crate) title: String,
    /// Second title line (scenario, paper panel, data and trial count).
    pub(crate) subtitle: String,
    /// Horizontal axis.
    pub(crate) x: Axis,
    /// Vertical axis.
    pub(crate) y: Axis,
    /// Series in drawing order; each gets a legend entry.
    pub(crate) series: Vec<Series>,
    /// Shift the series with error bars slightly apart horizontally so that
    /// equal means do not hide each other (each by under 1% of the x range).
    pub(crate) dodge: bool,
}

/// An axis: its label, scale and tick positions.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Axis {
    /// The label drawn along the axis.
    pub(crate) label: String,
    /// Linear or base-2 logarithmic.
    pub(crate) scale: Scale,
    /// Tick positions in data units; `None` lets the renderer choose.
    pub(crate) ticks: Option<Vec<f64>>,
    /// Whether the range must include 0 (counts such as rework iterations).
    pub(crate) include_zero: bool,
    /// Label ticks as fractions (1/8, 1/4, 3/4) where they are simple ones.
    pub(crate) fraction_labels: bool,
}

impl Axis {
    /// A linear axis with automatic ticks.
    pub(crate) fn linear(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            ticks: None,
            include_zero: false,
            fraction_labels: false,
        }
    }

    /// Sets the tick positions (data units).
    pub(crate) fn with_ticks(mut self, ticks: Vec<f64>) -> Axis {
        self.ticks = Some(ticks);
        self
    }

    /// Makes the range include 0.
    pub(crate) fn anchored_at_zero(mut self) -> Axis {
        self.include_zero = true;
        self
    }

    /// Labels ticks as simple fractions (1/8, 1/4, 1/2, 3/4, 1).
    pub(crate) fn fractions(mut self) -> Axis {
        self.fraction_labels = true;
        self
    }

    /// Uses a base-2 logarithmic scale (for frequencies 1, 2, 4, 8).
    pub(crate) fn log2(mut self) -> Axis {
        self.scale = Scale::Log2;
        self
    }
}

/// How data values map to positions along an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scale {
    /// Position proportional to the value.
    Linear,
    /// Position proportional to log2 of the value (values must be positive).
    Log2,
}

impl Scale {
    /// The position of value `v` along the axis (NaN for a non-positive value on a log axis).
    pub(crate) fn forward(self, v: f64) -> f64 {
        match self {
            Scale::Linear => v,
            Scale::Log2 if v > 0.0 => v.log2(),
            Scale::Log2 => f64::NAN,
        }
    }

    /// The value at position `p` (inverse of [`Scale::forward`]).
    pub(crate) fn inverse(self, p: f64) -> f64 {
        match self {
            Scale::Linear => p,
            Scale::Log2 => p.exp2(),
        }
    }
}

/// One observation: a mean and its 95% confidence interval (NaN when unknown).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Point {
    /// Horizontal value.
    pub(crate) x: f64,
    /// Mean (or the single value).
    pub(crate) y: f64,
    /// Lower end of the 95% CI.
    pub(crate) lo: f64,
    /// Upper end of the 95% CI.
    pub(crate) hi: f64,
}

impl Point {
    /// A point with a confidence interval.
    pub(crate) fn with_ci(x: f64, y: f64, lo: f64, hi: f64) -> Point {
        Point { x, y, lo, hi }
    }

    /// A point without an interval.
    pub(crate) fn plain(x: f64, y: f64) -> Point {
        Point {
            x,
            y,
            lo: f64::NAN,
            hi: f64::NAN,
        }
    }

    /// Whether the point carries a finite interval.
    pub(crate) fn has_ci(&self) -> bool {
        self.lo.is_finite() && self.hi.is_finite()
    }
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    /// Means joined by a line, with markers and 95% CI error bars (SCAR Figs. 6, 7).
    LinesWithErrorBars,
    /// A curve with a shaded 95% CI band (time series on a common grid).
    Band,
    /// Unjoined markers (one per trial: scatter plots of cost vs ‖δ‖).
    Markers,
    /// A plain solid line (a theoretical curve, e.g. the Theorem 1 bound in red).
    Line,
    /// A dashed horizontal line across the whole plot at the first point's
    /// mean, its CI shaded lightly (the traditional checkpoint in SCAR Fig. 7).
    HorizontalReference,
}

/// Colours: a palette slot, or a fixed meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Colour {
    /// The i-th colour of the categorical palette (it contains neither black nor red).
    Palette(usize),
    /// Black: references (the paper's dashed black line).
    Black,
    /// Red: theoretical bounds (the paper's red line).
    Red,
}

impl Colour {
    /// The colour's RGB value.
    pub(crate) fn rgb(self) -> (u8, u8, u8) {
        // Tableau 10 without its red, so red stays reserved for bounds.
        const PALETTE: [(u8, u8, u8); 9] = [
            (31, 119, 180),
            (255, 127, 14),
            (44, 160, 44),
            (148, 103, 189),
            (140, 86, 75),
            (227, 119, 194),
            (127, 127, 127),
            (188, 189, 34),
            (23, 190, 207),
        ];
        match self {
            Colour::Palette(i) => PALETTE[i % PALETTE.len()],
            Colour::Black => (0, 0, 0),
            Colour::Red => (214, 39, 40),
        }
    }
}

/// A named set of points drawn one way.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Series {
    /// Legend text.
    pub(crate) name: String,
    /// Drawing style.
    pub(crate) style: Style,
    /// Colour.
    pub(crate) colour: Colour,
    /// Points in drawing order.
    pub(crate) points: Vec<Point>,
}

/// A multi-panel figure: the paper's grids (e.g. SCAR Figure 6 is 2×4).
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// Figure title.
    pub(crate) title: String,
    /// Second title line.
    pub(crate) subtitle: String,
    /// Rows of panels.
    pub(crate) rows: usize,
    /// Columns of panels.
    pub(crate) cols: usize,
    /// `rows × cols` cells, row-major.
    pub(crate) cells: Vec<Cell>,
}

/// One cell of a grid.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    /// A drawn panel.
    Chart(Box<Chart>),
    /// A panel the results do not contain, with a note saying which.
    Missing(String),
}

/// How one cell of a [`Map`] came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    /// The claim holds and its 95% CI agrees (lies on the claim's side).
    Holds,
    /// The point estimate meets the claim; the CI also allows otherwise.
    Leans,
    /// The point estimate misses the claim; the CI still reaches it.
    Misses,
    /// The claim fails: its CI lies wholly outside.
    Fails,
    /// Not measured in this setting (not applicable, or undefined).
    Missing,
}

/// A map of verdicts: one row per claim, one column per setting (the
/// robustness study's claim × setting figure).
#[derive(Clone, Debug)]
pub(crate) struct Map {
    /// Title line.
    pub(crate) title: String,
    /// Line under the title.
    pub(crate) subtitle: String,
    /// Column header lines, top first: each a list of (label, columns spanned).
    pub(crate) header: Vec<Vec<(String, usize)>>,
    /// One label per row.
    pub(crate) rows: Vec<String>,
    /// Number of columns.
    pub(crate) cols: usize,
    /// Row-major marks, `rows.len() × cols`.
    pub(crate) marks: Vec<Mark>,
}

/// Something that can be rendered: one chart, a grid of them or a map.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Picture<'a> {
    /// One chart.
    Single(&'a Chart),
    /// A grid of charts.
    Grid(&'a Grid),
    /// A claim × setting map.
    Map(&'a Map),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_scale_round_trips() {
        for v in [0.125, 1.0, 2.0, 8.0] {
            assert!((Scale::Log2.inverse(Scale::Log2.forward(v)) - v).abs() < 1e-12);
        }
        assert!(Scale::Log2.forward(0.0).is_nan());
        assert_eq!(Scale::Linear.forward(-3.0), -3.0);
    }

    #[test]
    fn palette_never_gives_black_or_red() {
        for i in 0..20 {
            let c = Colour::Palette(i).rgb();
            assert_ne!(c, Colour::Black.rgb());
            assert_ne!(c, Colour::Red.rgb());
        }
    }
}
