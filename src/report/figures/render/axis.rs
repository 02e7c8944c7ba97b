//! Axis ranges, tick positions and tick labels.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

use crate::report::figures::chart::{Axis, Scale, Series, Style};

/// The axis range (in axis positions) covering every point, CI and
/// reference of the series, padded so markers and error bars stay inside.
pub(super) fn range(axis: &Axis, series: &[Series], horizontal: bool) -> (f64, f64) {
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
pub(super) struct Keyed {
    pub(super) range: Range<f64>,
    pub(super) keys: Vec<f64>,
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
pub(super) fn ticks(axis: &Axis, lo: f64, hi: f64) -> Vec<f64> {
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
pub(crate) fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
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
pub(crate) fn axis_label(v: f64, fractions: bool) -> String {
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
pub(crate) fn tick_label(v: f64) -> String {
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
