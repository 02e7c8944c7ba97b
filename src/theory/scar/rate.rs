//! Estimating the linear rate `c` of SCAR assumption (3),
//! `‖x(k+1) − x*‖ ≤ c‖x(k) − x*‖`, from a sequence that decays geometrically.
//!
//! Two estimators over a sequence `d_0, d_1, …` (distances to the optimum, or
//! step lengths, which decay at the same rate when the iterates converge
//! linearly):
//! - [`fit_geometric_rate`]: least squares of `ln d_k` on `k`; `c = e^slope`
//!   and `d_0 ≈ e^intercept`. This is the "measured" rate the bound scenarios
//!   use: the average contraction over the run.
//! - [`max_ratio_rate`]: `max_k d_{k+1}/d_k`, the smallest `c` for which
//!   assumption (3) holds at every step of the sequence (reported beside it).

/// Running sums for the least-squares line `ln d_k ≈ a + b·k`, one point at
/// a time (constant memory, so an online estimator can update it every
/// iteration).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct LogLinearSums {
    n: f64,
    sum_k: f64,
    sum_kk: f64,
    sum_y: f64,
    sum_ky: f64,
}

/// A fitted geometric decay `d_k ≈ initial · rate^k`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RateFit {
    /// c = e^slope.
    pub(crate) rate: f64,
    /// e^intercept: the fitted value at k = 0.
    pub(crate) initial: f64,
    /// Points used (positive, finite values).
    pub(crate) points: usize,
}

impl LogLinearSums {
    /// No points yet.
    pub(crate) fn new() -> LogLinearSums {
        LogLinearSums::default()
    }

    /// Adds the point `(k, d)`; values that are not positive and finite are skipped.
    pub(crate) fn add(&mut self, k: usize, d: f64) {
        if !(d > 0.0 && d.is_finite()) {
            return;
        }
        let (k, y) = (k as f64, d.ln());
        self.n += 1.0;
        self.sum_k += k;
        self.sum_kk += k * k;
        self.sum_y += y;
        self.sum_ky += k * y;
    }

    /// Number of points added.
    pub(crate) fn points(&self) -> usize {
        self.n as usize
    }

    /// The least-squares fit, if at least `min_points` points at two or more
    /// distinct `k` were added.
    pub(crate) fn fit(&self, min_points: usize) -> Option<RateFit> {
        if self.points() < min_points.max(2) {
            return None;
        }
        let denom = self.n * self.sum_kk - self.sum_k * self.sum_k;
        if denom.abs() <= f64::EPSILON * self.n * self.sum_kk {
            return None;
        }
        let slope = (self.n * self.sum_ky - self.sum_k * self.sum_y) / denom;
        let intercept = (self.sum_y - slope * self.sum_k) / self.n;
        Some(RateFit {
            rate: slope.exp(),
            initial: intercept.exp(),
            points: self.points(),
        })
    }
}

/// Least-squares geometric fit of `values[k] ≈ initial · rate^k` (on
/// `ln values[k]`, skipping values that are not positive and finite).
/// `None` with fewer than two usable points.
pub(crate) fn fit_geometric_rate(values: &[f64]) -> Option<RateFit> {
    let mut s = LogLinearSums::new();
    for (k, &d) in values.iter().enumerate() {
        s.add(k, d);
    }
    s.fit(2)
}

/// `max_k values[k+1] / values[k]` over consecutive positive values: the
/// smallest `c` with `values[k+1] ≤ c·values[k]` for every k. `None` with
/// fewer than two positive values.
pub(crate) fn max_ratio_rate(values: &[f64]) -> Option<f64> {
    values
        .windows(2)
        .filter(|w| w[0] > 0.0 && w[0].is_finite() && w[1].is_finite())
        .map(|w| w[1] / w[0])
        .reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    #[test]
    fn exact_geometric_sequence() {
        let v: Vec<f64> = (0..50).map(|k| 3.0 * 0.9f64.powi(k)).collect();
        let f = fit_geometric_rate(&v).unwrap();
        assert_abs_diff_eq!(f.rate, 0.9, epsilon = 1e-12);
        assert_abs_diff_eq!(f.initial, 3.0, epsilon = 1e-10);
        assert_eq!(f.points, 50);
        assert_abs_diff_eq!(max_ratio_rate(&v).unwrap(), 0.9, epsilon = 1e-12);
    }

    #[test]
    fn max_ratio_is_the_worst_step() {
        let v = [1.0, 0.5, 0.4, 0.1];
        assert_abs_diff_eq!(max_ratio_rate(&v).unwrap(), 0.8, epsilon = 1e-15);
        let f = fit_geometric_rate(&v).unwrap();
        assert!(f.rate < 0.8 && f.rate > 0.4, "{f:?}");
    }

    #[test]
    fn degenerate_inputs() {
        assert!(fit_geometric_rate(&[1.0]).is_none());
        assert!(fit_geometric_rate(&[0.0, 0.0, 1.0]).is_none());
        assert!(max_ratio_rate(&[1.0]).is_none());
        let mut s = LogLinearSums::new();
        s.add(3, 1.0);
        s.add(4, 0.5);
        assert!(s.fit(3).is_none());
        assert_abs_diff_eq!(s.fit(2).unwrap().rate, 0.5, epsilon = 1e-15);
    }
}
