//! Random delays of workers: the time one gradient computation (and,
//! optionally, its communication) takes (Dutta et al. 2018, §2: the
//! computation time X of a learner is i.i.d. across learners and iterations).
//!
//! Every draw comes from a stream owned by one worker of one trial, so a
//! trial is deterministic whatever the thread count, and trial `t` of every
//! protocol sees the same sequence of delays per worker (common random
//! numbers: comparisons between protocols are paired).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use rand::RngExt;
use rand_distr::{Distribution, Exp1};
use serde::Serialize;
use statrs::function::gamma::ln_gamma;

use crate::rng::SimRng;

/// A delay distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum Delay {
    /// Exponential with rate μ (mean 1/μ): the paper's main model.
    Exponential {
        /// μ.
        rate: f64,
    },
    /// Δ + Exponential(μ): a minimum time plus an exponential tail (paper §4).
    ShiftedExponential {
        /// Δ ≥ 0.
        shift: f64,
        /// μ.
        rate: f64,
    },
    /// Pareto (type I) with scale x_m and shape α: P(X > x) = (x_m/x)^α for x ≥ x_m.
    Pareto {
        /// x_m > 0.
        scale: f64,
        /// α > 0 (the mean is finite only for α > 1).
        shape: f64,
    },
    /// Uniform on [low, high).
    Uniform {
        /// Lower end.
        low: f64,
        /// Upper end.
        high: f64,
    },
    /// Always the same value.
    Constant {
        /// The delay.
        value: f64,
    },
    /// Resampling (uniformly, with replacement) of measured times read from a CSV file.
    Empirical(Arc<Empirical>),
}

/// Measured times for [`Delay::Empirical`].
#[derive(Clone, Debug, PartialEq)]
pub struct Empirical {
    /// The file they were read from.
    pub(crate) path: PathBuf,
    /// The column that was read (`None`: the first column).
    pub(crate) column: Option<String>,
    /// The values, sorted ascending.
    pub(crate) sorted: Vec<f64>,
}

impl Empirical {
    /// Reads non-negative times from column `column` (by header name) or from
    /// the first column of a CSV file. A header row is optional when no
    /// column is named (a first row whose first cell is not a number is a header).
    pub(crate) fn read(path: &Path, column: Option<&str>) -> Result<Empirical> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read delay file {}", path.display()))?;
        let mut r = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let mut values = Vec::new();
        let mut col_index = 0usize;
        for (i, rec) in r.records().enumerate() {
            let line = i + 1;
            let rec = rec.with_context(|| format!("{}: bad CSV at line {line}", path.display()))?;
            if rec.iter().all(|c| c.is_empty()) {
                continue;
            }
            if i == 0 {
                if let Some(name) = column {
                    col_index = rec.iter().position(|h| h == name).ok_or_else(|| {
                        anyhow::anyhow!(
                            "{}: no column named `{name}` in the header (found: {})",
                            path.display(),
                            rec.iter().collect::<Vec<_>>().join(", ")
                        )
                    })?;
                    continue;
                }
                if rec.get(0).is_some_and(|c| c.parse::<f64>().is_err()) {
                    continue; // header row
                }
            }
            let cell = rec.get(col_index).ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: line {line} has no column {}",
                    path.display(),
                    col_index + 1
                )
            })?;
            let v: f64 = cell.parse().map_err(|_| {
                anyhow::anyhow!(
                    "{}: line {line}: `{cell}` is not a number (expected a time in seconds)",
                    path.display()
                )
            })?;
            if !(v.is_finite() && v >= 0.0) {
                bail!(
                    "{}: line {line}: {v} is not a finite non-negative time",
                    path.display()
                );
            }
            values.push(v);
        }
        if values.is_empty() {
            bail!("{}: no measured times found", path.display());
        }
        values.sort_by(f64::total_cmp);
        Ok(Empirical {
            path: path.to_path_buf(),
            column: column.map(String::from),
            sorted: values,
        })
    }

    /// Mean of the measured times.
    pub(crate) fn mean(&self) -> f64 {
        self.sorted.iter().sum::<f64>() / self.sorted.len() as f64
    }
}

impl Serialize for Delay {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("distribution", self.name())?;
        match self {
            Delay::Exponential { rate } => m.serialize_entry("rate", rate)?,
            Delay::ShiftedExponential { shift, rate } => {
                m.serialize_entry("shift", shift)?;
                m.serialize_entry("rate", rate)?;
            }
            Delay::Pareto { scale, shape } => {
                m.serialize_entry("scale", scale)?;
                m.serialize_entry("shape", shape)?;
            }
            Delay::Uniform { low, high } => {
                m.serialize_entry("low", low)?;
                m.serialize_entry("high", high)?;
            }
            Delay::Constant { value } => m.serialize_entry("value", value)?,
            Delay::Empirical(e) => {
                m.serialize_entry("file", &e.path)?;
                m.serialize_entry("column", &e.column)?;
                m.serialize_entry("count", &e.sorted.len())?;
                m.serialize_entry("mean", &e.mean())?;
            }
        }
        m.end()
    }
}

impl Delay {
    /// The distribution's name as written in scenarios.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Delay::Exponential { .. } => "exponential",
            Delay::ShiftedExponential { .. } => "shifted-exponential",
            Delay::Pareto { .. } => "pareto",
            Delay::Uniform { .. } => "uniform",
            Delay::Constant { .. } => "constant",
            Delay::Empirical(_) => "empirical",
        }
    }

    /// A compact description for CSV columns, e.g. `shifted-exponential(shift=1,rate=0.5)`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Delay::Exponential { rate } => format!("exponential(rate={rate})"),
            Delay::ShiftedExponential { shift, rate } => {
                format!("shifted-exponential(shift={shift};rate={rate})")
            }
            Delay::Pareto { scale, shape } => format!("pareto(scale={scale};shape={shape})"),
            Delay::Uniform { low, high } => format!("uniform(low={low};high={high})"),
            Delay::Constant { value } => format!("constant(value={value})"),
            Delay::Empirical(e) => format!(
                "empirical(file={};n={})",
                e.path
                    .file_name()
                    .map_or_else(String::new, |f| f.to_string_lossy().to_string()),
                e.sorted.len()
            ),
        }
    }

    /// One draw.
    #[inline]
    pub(crate) fn sample(&self, rng: &mut SimRng) -> f64 {
        match self {
            Delay::Exponential { rate } => {
                let e: f64 = Exp1.sample(rng);
                e / rate
            }
            Delay::ShiftedExponential { shift, rate } => {
                let e: f64 = Exp1.sample(rng);
                shift + e / rate
            }
            Delay::Pareto { scale, shape } => {
                // Inverse CDF with 1 − U ∈ (0, 1].
                let u: f64 = rng.random::<f64>();
                scale * (1.0 - u).powf(-1.0 / shape)
            }
            Delay::Uniform { low, high } => low + (high - low) * rng.random::<f64>(),
            Delay::Constant { value } => *value,
            Delay::Empirical(e) => e.sorted[rng.random_range(0..e.sorted.len())],
        }
    }

    /// E[X] (infinite for a Pareto with α ≤ 1).
    pub(crate) fn mean(&self) -> f64 {
        match self {
            Delay::Exponential { rate } => 1.0 / rate,
            Delay::ShiftedExponential { shift, rate } => shift + 1.0 / rate,
            Delay::Pareto { scale, shape } => {
                if *shape > 1.0 {
                    shape * scale / (shape - 1.0)
                } else {
                    f64::INFINITY
                }
            }
            Delay::Uniform { low, high } => 0.5 * (low + high),
            Delay::Constant { value } => *value,
            Delay::Empirical(e) => e.mean(),
        }
    }

    /// Whether the distribution is *new-better-than-used* (NBU):
    /// P(X > s + t | X > s) ≤ P(X > t) for all s, t ≥ 0. True for the
    /// exponential (with equality), the shifted exponential, the uniform and
    /// constants; false for the Pareto (new-worse-than-used); unknown, and so
    /// reported as false, for measured times. Dutta et al. (§4) bound K-async's
    /// runtime by K-sync's for NBU delays. Adding a constant keeps NBU.
    pub(crate) fn is_nbu(&self) -> bool {
        matches!(
            self,
            Delay::Exponential { .. }
                | Delay::ShiftedExponential { .. }
                | Delay::Uniform { .. }
                | Delay::Constant { .. }
        )
    }

    /// E[X_{K:P}], the expected K-th smallest of P i.i.d. draws (Dutta et
    /// al. 2018, Lemma 1: the expected runtime per iteration of K-sync SGD).
    /// `None` if it is infinite or K ∉ 1..=P.
    ///
    /// - exponential(μ): (1/μ) Σ_{i=P−K+1}^{P} 1/i (Rényi's representation;
    ///   ≈ (1/μ) log(P/(P−K)) for large P)
    /// - shifted exponential: Δ + (1/μ) Σ_{i=P−K+1}^{P} 1/i
    /// - uniform[a, b): a + (b − a) K/(P + 1)
    /// - constant c: c
    /// - Pareto(x_m, α): x_m · P!/(P−K)! · Γ(P−K+1−1/α)/Γ(P+1−1/α), finite iff α(P−K+1) > 1
    /// - empirical (n atoms v_(1) ≤ … ≤ v_(n) of mass 1/n):
    ///   Σ_i v_(i) [G(i/n) − G((i−1)/n)] with G(u) = P(Binomial(P, u) ≥ K)
    pub(crate) fn order_stat_mean(&self, k: usize, p: usize) -> Option<f64> {
        if k == 0 || k > p {
            return None;
        }
        let h = harmonic(p) - harmonic(p - k);
        let v = match self {
            Delay::Exponential { rate } => h / rate,
            Delay::ShiftedExponential { shift, rate } => shift + h / rate,
            Delay::Uniform { low, high } => low + (high - low) * k as f64 / (p + 1) as f64,
            Delay::Constant { value } => *value,
            Delay::Pareto { scale, shape } => {
                let (pf, kf, a) = (p as f64, k as f64, *shape);
                if a * (pf - kf + 1.0) <= 1.0 {
                    return None;
                }
                scale
                    * (ln_gamma(pf + 1.0) - ln_gamma(pf - kf + 1.0)
                        + ln_gamma(pf - kf + 1.0 - 1.0 / a)
                        - ln_gamma(pf + 1.0 - 1.0 / a))
                    .exp()
            }
            Delay::Empirical(e) => {
                let n = e.sorted.len();
                let mut prev = 0.0;
                let mut sum = 0.0;
                for (i, v) in e.sorted.iter().enumerate() {
                    let g = binomial_tail(p, k, (i + 1) as f64 / n as f64);
                    sum += v * (g - prev);
                    prev = g;
                }
                sum
            }
        };
        Some(v)
    }
}

/// H_n = Σ_{i=1}^{n} 1/i (H_0 = 0).
pub(crate) fn harmonic(n: usize) -> f64 {
    (1..=n).map(|i| 1.0 / i as f64).sum()
}

/// P(Binomial(n, u) ≥ k), summed in log space so that large n does not overflow.
pub(crate) fn binomial_tail(n: usize, k: usize, u: f64) -> f64 {
    if k == 0 || u >= 1.0 {
        return if k <= n { 1.0 } else { 0.0 };
    }
    if u <= 0.0 {
        return 0.0;
    }
    let (lu, l1u) = (u.ln(), (1.0 - u).ln());
    let lnf = |m: usize| ln_gamma(m as f64 + 1.0);
    (k..=n)
        .map(|j| (lnf(n) - lnf(j) - lnf(n - j) + j as f64 * lu + (n - j) as f64 * l1u).exp())
        .sum::<f64>()
        .min(1.0)
}

/// Draws of one worker's per-gradient time: a compute time plus an optional
/// communication time, each from the worker's own stream.
#[derive(Clone, Debug)]
pub struct WorkerDelays {
    compute: Delay,
    communication: Option<Delay>,
    compute_rng: Vec<SimRng>,
    communication_rng: Vec<SimRng>,
}

impl WorkerDelays {
    /// Delays for `workers` workers of trial `trial`: worker `w` draws compute
    /// times from `rng::stream(seed, Delay, trial, w)` and communication
    /// times from `rng::stream(seed, Delay, trial, 2^32 + w)`.
    pub fn new(
        compute: &Delay,
        communication: Option<&Delay>,
        seed: u64,
        trial: u64,
        workers: usize,
    ) -> WorkerDelays {
        use crate::rng::{Purpose, stream};
        WorkerDelays {
            compute: compute.clone(),
            communication: communication.cloned(),
            compute_rng: (0..workers as u64)
                .map(|w| stream(seed, Purpose::Delay, trial, w))
                .collect(),
            communication_rng: (0..workers as u64)
                .map(|w| stream(seed, Purpose::Delay, trial, (1 << 32) + w))
                .collect(),
        }
    }
}

impl super::sim::DelaySource for WorkerDelays {
    #[inline]
    fn draw(&mut self, worker: usize) -> f64 {
        let c = self.compute.sample(&mut self.compute_rng[worker]);
        match &self.communication {
            None => c,
            Some(d) => c + d.sample(&mut self.communication_rng[worker]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, stream};
    use approx::assert_relative_eq;

    fn sample_order_stat_mean(d: &Delay, k: usize, p: usize, n: usize) -> f64 {
        let mut rng = stream(5, Purpose::Other, 1, 2);
        let mut buf = vec![0.0; p];
        let mut sum = 0.0;
        for _ in 0..n {
            for b in buf.iter_mut() {
                *b = d.sample(&mut rng);
            }
            buf.sort_by(f64::total_cmp);
            sum += buf[k - 1];
        }
        sum / n as f64
    }

    #[test]
    fn order_statistics_match_monte_carlo() {
        let emp = Delay::Empirical(Arc::new(Empirical {
            path: "x.csv".into(),
            column: None,
            sorted: vec![0.5, 1.0, 1.0, 2.0, 7.0],
        }));
        for d in [
            Delay::Exponential { rate: 2.0 },
            Delay::ShiftedExponential {
                shift: 1.0,
                rate: 0.5,
            },
            Delay::Uniform {
                low: 1.0,
                high: 3.0,
            },
            Delay::Pareto {
                scale: 1.0,
                shape: 3.0,
            },
            emp,
        ] {
            for (k, p) in [(1, 4), (2, 4), (4, 4), (3, 8)] {
                let exact = d.order_stat_mean(k, p).unwrap();
                let mc = sample_order_stat_mean(&d, k, p, 200_000);
                assert_relative_eq!(exact, mc, max_relative = 0.01);
            }
        }
    }

    #[test]
    fn closed_forms_by_hand() {
        let e = Delay::Exponential { rate: 1.0 };
        // E[X_{2:4}] = 1/4 + 1/3
        assert_relative_eq!(e.order_stat_mean(2, 4).unwrap(), 0.25 + 1.0 / 3.0);
        assert_relative_eq!(e.order_stat_mean(1, 1).unwrap(), 1.0);
        let p = Delay::Pareto {
            scale: 2.0,
            shape: 3.0,
        };
        assert_relative_eq!(p.order_stat_mean(1, 1).unwrap(), p.mean(), epsilon = 1e-12);
        // max of 2 Pareto(α=1): α(P−K+1) = 1 is not > 1, infinite.
        assert!(
            Delay::Pareto {
                scale: 1.0,
                shape: 1.0
            }
            .order_stat_mean(2, 2)
            .is_none()
        );
        assert!(e.order_stat_mean(5, 4).is_none());
        assert_relative_eq!(binomial_tail(4, 2, 0.5), 11.0 / 16.0, epsilon = 1e-12);
        assert_eq!(binomial_tail(4, 0, 0.3), 1.0);
    }

    #[test]
    fn empirical_files_are_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("scarsim-delay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.csv");
        std::fs::write(&p, "seconds,host\n1.5,a\n0.5,b\n\n2,c\n").unwrap();
        let e = Empirical::read(&p, None).unwrap();
        assert_eq!(e.sorted, vec![0.5, 1.5, 2.0]);
        let e = Empirical::read(&p, Some("seconds")).unwrap();
        assert_eq!(e.sorted.len(), 3);
        let err = Empirical::read(&p, Some("secs")).unwrap_err().to_string();
        assert!(err.contains("no column named `secs`"), "{err}");
        std::fs::write(&p, "1.0\n-2\n").unwrap();
        let err = Empirical::read(&p, None).unwrap_err().to_string();
        assert!(
            err.contains("line 2") && err.contains("non-negative"),
            "{err}"
        );
        std::fs::write(&p, "1.0\nfast\n").unwrap();
        let err = Empirical::read(&p, None).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("`fast`"), "{err}");
        let err = Empirical::read(&dir.join("none.csv"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("none.csv"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
