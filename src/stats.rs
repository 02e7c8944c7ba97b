//! Summary statistics over trials: mean, sample standard deviation and the
//! Student-t 95% confidence interval of the mean.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Mean, spread and 95% confidence interval of a sample of trial outcomes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Number of observations.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divisor n − 1); `NaN` when n < 2.
    pub std: f64,
    /// Lower end of the two-sided 95% Student-t confidence interval of the mean.
    pub ci95_low: f64,
    /// Upper end of the two-sided 95% Student-t confidence interval of the mean.
    pub ci95_high: f64,
}

impl Summary {
    /// Summarises `values`. With fewer than two values the spread and the
    /// interval are `NaN` (written as empty CSV fields); with none, everything is `NaN`.
    pub fn of(values: &[f64]) -> Summary {
        let n = values.len();
        if n == 0 {
            return Summary {
                n,
                mean: f64::NAN,
                std: f64::NAN,
                ci95_low: f64::NAN,
                ci95_high: f64::NAN,
            };
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Summary {
                n,
                mean,
                std: f64::NAN,
                ci95_low: f64::NAN,
                ci95_high: f64::NAN,
            };
        }
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64;
        let std = var.sqrt();
        let half = t_quantile_975(n - 1) * std / (n as f64).sqrt();
        Summary {
            n,
            mean,
            std,
            ci95_low: mean - half,
            ci95_high: mean + half,
        }
    }
}

/// The 0.975 quantile of Student's t distribution with `dof` degrees of freedom
/// (1.984217 for 99, 2.262157 for 9).
pub(crate) fn t_quantile_975(dof: usize) -> f64 {
    assert!(dof >= 1, "Student-t needs at least one degree of freedom");
    StudentsT::new(0.0, 1.0, dof as f64)
        .expect("valid Student-t parameters")
        .inverse_cdf(0.975)
}

/// The `q`-quantile (0 ≤ q ≤ 1) of `values` by linear interpolation between
/// order statistics (type 7, the default of R and numpy). `NaN` if empty.
pub(crate) fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    #[test]
    fn t_quantiles_match_tables() {
        assert_abs_diff_eq!(t_quantile_975(99), 1.984217, epsilon = 1e-6);
        assert_abs_diff_eq!(t_quantile_975(9), 2.262157, epsilon = 1e-6);
    }

    #[test]
    fn summary_by_hand() {
        // mean 3, sample variance 2.5, std 1.5811, t(4) = 2.776445
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(s.n, 5);
        assert_abs_diff_eq!(s.mean, 3.0);
        assert_abs_diff_eq!(s.std, 2.5f64.sqrt(), epsilon = 1e-12);
        let half = 2.776445 * 2.5f64.sqrt() / 5f64.sqrt();
        assert_abs_diff_eq!(s.ci95_low, 3.0 - half, epsilon = 1e-5);
        assert_abs_diff_eq!(s.ci95_high, 3.0 + half, epsilon = 1e-5);
    }

    #[test]
    fn degenerate_samples() {
        assert!(Summary::of(&[]).mean.is_nan());
        let one = Summary::of(&[4.0]);
        assert_eq!(one.mean, 4.0);
        assert!(one.std.is_nan() && one.ci95_low.is_nan());
    }

    #[test]
    fn quantiles() {
        let v = [3.0, 1.0, 2.0, 4.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 4.0);
        assert_abs_diff_eq!(quantile(&v, 0.5), 2.5);
    }
}
