//! Measured numbers next to the papers' claims about them, for the
//! reproduction report (e.g. SCAR §5.3: partial recovery reduces the
//! iteration cost by 59%–89% when 1/4 of the parameters are lost).

use crate::stats::t_quantile_975;

/// A measured value with its 95% confidence interval (NaN ends when unknown).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Estimate {
    /// Point estimate.
    pub(crate) value: f64,
    /// Lower end of the 95% CI.
    pub(crate) lo: f64,
    /// Upper end of the 95% CI.
    pub(crate) hi: f64,
    /// Number of paired trials behind it.
    pub(crate) n: usize,
}

/// One measured quantity the paper states a claim about.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// The paper figure the claim is about (`SCAR Fig. 6`).
    pub(crate) figure: String,
    /// What was measured, in words.
    pub(crate) quantity: String,
    /// The measurement, in percent; `None` when it is undefined (e.g. the
    /// comparison's baseline has no rework to reduce).
    pub(crate) measured: Option<Estimate>,
    /// The paper's range for it, in percent.
    pub(crate) paper_range: (f64, f64),
    /// The numbers it was computed from, for the reader.
    pub(crate) detail: String,
}

/// Where a measurement falls relative to the paper's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The point estimate is inside the range.
    Inside,
    /// Below the range.
    Below,
    /// Above the range.
    Above,
    /// Nothing measured.
    Undefined,
}

impl Claim {
    /// Whether the point estimate lies in the paper's range.
    pub(crate) fn verdict(&self) -> Verdict {
        match self.measured {
            None => Verdict::Undefined,
            Some(e) if e.value < self.paper_range.0 => Verdict::Below,
            Some(e) if e.value > self.paper_range.1 => Verdict::Above,
            Some(_) => Verdict::Inside,
        }
    }
}

impl Verdict {
    /// A word for the report.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Verdict::Inside => "inside",
            Verdict::Below => "below",
            Verdict::Above => "above",
            Verdict::Undefined => "n/a",
        }
    }
}

/// Relative reduction of the mean, `1 − mean(new) / mean(old)`, in percent,
/// over trials paired by index (common random numbers: trial `t` of both
/// series saw the same failure), with a 95% CI.
///
/// The CI is the ratio estimator's delta-method interval (Cochran,
/// *Sampling Techniques*, §6.4): with R = ā/b̄ and dᵢ = aᵢ − R·bᵢ,
/// se(R) = sd(d) / (√n · b̄), and R ± t₀.₉₇₅,ₙ₋₁ · se(R). `None` when fewer
/// than two trials pair up or the old mean is not positive (no rework to
/// reduce).
pub(crate) fn paired_reduction(new: &[(u64, f64)], old: &[(u64, f64)]) -> Option<Estimate> {
    let pairs = paired(new, old);
    let n = pairs.len();
    if n < 2 {
        return None;
    }
    let a_mean = pairs.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let b_mean = pairs.iter().map(|p| p.1).sum::<f64>() / n as f64;
    if b_mean <= 0.0 || !b_mean.is_finite() {
        return None;
    }
    let r = a_mean / b_mean;
    let d: Vec<f64> = pairs.iter().map(|(a, b)| a - r * b).collect();
    let d_mean = d.iter().sum::<f64>() / n as f64;
    let var = d.iter().map(|x| (x - d_mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = var.sqrt() / ((n as f64).sqrt() * b_mean);
    let half = t_quantile_975(n - 1) * se;
    Some(Estimate {
        value: 100.0 * (1.0 - r),
        lo: 100.0 * (1.0 - r - half),
        hi: 100.0 * (1.0 - r + half),
        n,
    })
}

/// Mean paired difference `mean(aᵢ − bᵢ)` over trials paired by index
/// (common random numbers: trial `t` of both series saw the same failure),
/// with the paired t interval `d̄ ± t₀.₉₇₅,ₙ₋₁ · sd(d)/√n`. Pairing removes
/// the failure-to-failure variance both series share, so a difference can be
/// significant while the two series' own CIs overlap. `None` when fewer than
/// two trials pair up.
pub(crate) fn paired_difference(a: &[(u64, f64)], b: &[(u64, f64)]) -> Option<Estimate> {
    let d: Vec<f64> = paired(a, b).iter().map(|(x, y)| x - y).collect();
    let n = d.len();
    if n < 2 {
        return None;
    }
    let mean = d.iter().sum::<f64>() / n as f64;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_quantile_975(n - 1) * var.sqrt() / (n as f64).sqrt();
    Some(Estimate {
        value: mean,
        lo: mean - half,
        hi: mean + half,
        n,
    })
}

/// The values of the trials present in both `a` and `b`, as (a, b) pairs.
fn paired(a: &[(u64, f64)], b: &[(u64, f64)]) -> Vec<(f64, f64)> {
    a.iter()
        .filter_map(|(t, x)| b.iter().find(|(u, _)| u == t).map(|(_, y)| (*x, *y)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trials(v: &[f64]) -> Vec<(u64, f64)> {
        v.iter().enumerate().map(|(i, x)| (i as u64, *x)).collect()
    }

    #[test]
    fn reduction_of_a_proportional_sample_is_exact() {
        // new = old / 4 in every trial: a 75% reduction with no spread.
        let old = trials(&[4.0, 8.0, 12.0, 16.0]);
        let new = trials(&[1.0, 2.0, 3.0, 4.0]);
        let e = paired_reduction(&new, &old).unwrap();
        assert!((e.value - 75.0).abs() < 1e-12);
        assert!((e.hi - e.lo).abs() < 1e-9);
        assert_eq!(e.n, 4);
    }

    #[test]
    fn reduction_interval_covers_the_ratio_of_means() {
        let old = trials(&[10.0, 12.0, 8.0, 11.0, 9.0]);
        let new = trials(&[3.0, 6.0, 2.0, 5.0, 4.0]);
        let e = paired_reduction(&new, &old).unwrap();
        assert!((e.value - 60.0).abs() < 1e-9, "{}", e.value);
        assert!(e.lo < 60.0 && e.hi > 60.0);
    }

    #[test]
    fn undefined_without_rework_to_reduce() {
        let old = trials(&[0.0, 0.0, 0.0]);
        let new = trials(&[1.0, 0.0, 0.0]);
        assert_eq!(paired_reduction(&new, &old), None);
        assert_eq!(paired_reduction(&trials(&[1.0]), &trials(&[2.0])), None);
    }

    #[test]
    fn paired_difference_removes_the_shared_variance() {
        // b = a + 1 exactly: the difference is −1 with no spread, although
        // each series alone varies widely.
        let a = trials(&[0.0, 10.0, 3.0, 7.0]);
        let b = trials(&[1.0, 11.0, 4.0, 8.0]);
        let e = paired_difference(&a, &b).unwrap();
        assert_eq!((e.value, e.lo, e.hi, e.n), (-1.0, -1.0, -1.0, 4));
        // d = (1, −1, 1, −1): mean 0, sd 2/√3, half = t(3) · sd / √4.
        let e = paired_difference(
            &trials(&[2.0, 0.0, 2.0, 0.0]),
            &trials(&[1.0, 1.0, 1.0, 1.0]),
        )
        .unwrap();
        assert!(e.value.abs() < 1e-12);
        let half = crate::stats::t_quantile_975(3) * (4.0f64 / 3.0).sqrt() / 2.0;
        assert!(
            (e.hi - half).abs() < 1e-12 && (e.lo + half).abs() < 1e-12,
            "{e:?}"
        );
        // Trials pair by index, not by position.
        let shifted = vec![(1, 5.0), (0, 2.0)];
        let e = paired_difference(&shifted, &[(0, 1.0), (1, 1.0)]).unwrap();
        assert!((e.value - 2.5).abs() < 1e-12);
        assert!(paired_difference(&[(0, 1.0)], &[(0, 2.0)]).is_none());
    }

    #[test]
    fn verdicts() {
        let mut c = Claim {
            figure: "f".into(),
            quantity: "q".into(),
            measured: Some(Estimate {
                value: 60.0,
                lo: 50.0,
                hi: 70.0,
                n: 10,
            }),
            paper_range: (59.0, 89.0),
            detail: String::new(),
        };
        assert_eq!(c.verdict(), Verdict::Inside);
        c.paper_range = (78.0, 95.0);
        assert_eq!(c.verdict(), Verdict::Below);
        c.measured = None;
        assert_eq!(c.verdict().word(), "n/a");
    }
}
