//! Closed forms and bounds for the runtime per iteration and the staleness of
//! the four protocols (Dutta et al. 2018, §4 "Runtime analysis"), and the
//! error floor of K-sync SGD on a noisy quadratic (§5 "Error analysis").
//!
//! X is one gradient's time (compute + communication); the communication
//! time must be absent or constant (a constant c turns X into X + c) for any
//! of these to apply, otherwise nothing is claimed.
//!
//! | protocol | exponential(μ) | other delays |
//! |---|---|---|
//! | K-sync | E[X_{K:P}] = (1/μ) Σ_{i=P−K+1}^{P} 1/i (Lemma 1) | E[X_{K:P}] exact (see `Delay::order_stat_mean`) |
//! | K-batch-sync | K/(Pμ): memorylessness makes the P workers one Poisson process of rate Pμ | ≤ E[X_{K:P}]: the K-th gradient arrives no later than the K-th distinct worker's first |
//! | K-async | E[X_{K:P}]: at each update the P−K busy workers' residual times are again exponential(μ) | ≥ K·E\[X\]/P (long run, a worker finishes at most one gradient per E\[X\] on average); ≤ E[X_{K:P}] for new-better-than-used X (the paper's K-async bound) |
//! | K-batch-async | K/(Pμ) | K·E\[X\]/P: by the elementary renewal theorem the P renewal processes deliver P/E\[X\] gradients per unit time in the long run |
//!
//! Three edge cases are exact for any delay distribution, because the
//! protocols coincide there: K-batch-sync with K = 1 is K-sync with K = 1
//! (E[X_{1:P}]); K-async with K = 1 is K-batch-async with K = 1, i.e.
//! asynchronous SGD (E\[X\]/P); K-async with K = P waits for every worker and
//! restarts all of them, i.e. fully synchronous SGD (E[X_{P:P}]).
//!
//! Staleness (long-run mean per gradient; derived here by counting, the paper
//! does not state it): at every K-async update exactly P−K workers are
//! computing on older parameters and each of them gains one unit of
//! staleness, so the K gradients of an update carry P−K in total: mean
//! (P−K)/K. K-batch-async: every worker but the pusher is computing, so P−1
//! per update: mean (P−1)/K. Both sync variants: 0.

use serde::Serialize;

use crate::cluster::delay::Delay;
use crate::cluster::protocol::Protocol;

/// What theory says about a quantity: an exact value and/or bounds, and where it comes from.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Theory {
    /// The exact expected value, where a closed form exists.
    pub exact: Option<f64>,
    /// A lower bound on the expected value.
    pub lower: Option<f64>,
    /// An upper bound on the expected value.
    pub upper: Option<f64>,
    /// The formula(s), for the CSV and the report.
    pub(crate) source: String,
}

/// The total time of one gradient: a compute delay plus a constant communication time.
#[derive(Clone, Debug, PartialEq)]
pub struct GradientTime<'a> {
    /// Compute-time distribution.
    pub compute: &'a Delay,
    /// Constant communication time (0 if there is none).
    pub shift: f64,
}

impl GradientTime<'_> {
    fn order_stat(&self, k: usize, p: usize) -> Option<f64> {
        self.compute.order_stat_mean(k, p).map(|v| v + self.shift)
    }
    fn mean(&self) -> f64 {
        self.compute.mean() + self.shift
    }
    fn exponential_rate(&self) -> Option<f64> {
        match self.compute {
            Delay::Exponential { rate } if self.shift == 0.0 => Some(*rate),
            _ => None,
        }
    }
    fn finite_mean(&self) -> Option<f64> {
        Some(self.mean()).filter(|m| m.is_finite())
    }
}

/// Expected wall-clock time per iteration (per PS update) of `protocol` with
/// P = `p` workers and K = `k` (long-run average for the async variants).
pub fn time_per_iteration(protocol: Protocol, x: &GradientTime<'_>, p: usize, k: usize) -> Theory {
    let exp_rate = x.exponential_rate();
    let kp = k as f64 / p as f64;
    match protocol {
        Protocol::KSync => Theory {
            exact: x.order_stat(k, p),
            source: match exp_rate {
                Some(_) => "E[X_{K:P}] = (1/mu) sum_{i=P-K+1}^{P} 1/i (Lemma 1)".into(),
                None => "E[X_{K:P}] (Lemma 1)".into(),
            },
            ..Theory::default()
        },
        Protocol::KBatchSync if k == 1 => Theory {
            exact: x.order_stat(1, p),
            source: "E[X_{1:P}]: with K = 1 K-batch-sync is K-sync".into(),
            ..Theory::default()
        },
        Protocol::KAsync if k == 1 => Theory {
            exact: x.finite_mean().map(|m| m / p as f64),
            source: "E[X]/P: with K = 1 K-async is K-batch-async (renewal theorem)".into(),
            ..Theory::default()
        },
        Protocol::KAsync if k == p => Theory {
            exact: x.order_stat(p, p),
            source: "E[X_{P:P}]: with K = P K-async is fully synchronous SGD".into(),
            ..Theory::default()
        },
        Protocol::KBatchSync => match exp_rate {
            Some(mu) => Theory {
                exact: Some(kp / mu),
                source: "K/(P mu): P memoryless workers form one Poisson process of rate P mu".into(),
                ..Theory::default()
            },
            None => Theory {
                upper: x.order_stat(k, p),
                source: "upper bound E[X_{K:P}]; no closed form".into(),
                ..Theory::default()
            },
        },
        Protocol::KAsync => match exp_rate {
            Some(_) => Theory {
                exact: x.order_stat(k, p),
                source: "E[X_{K:P}] = (1/mu) sum_{i=P-K+1}^{P} 1/i: residual times are exponential again (memoryless)".into(),
                ..Theory::default()
            },
            None => {
                let nbu = x.compute.is_nbu();
                Theory {
                    lower: x.finite_mean().map(|m| kp * m),
                    upper: if nbu { x.order_stat(k, p) } else { None },
                    source: if nbu {
                        "K E[X]/P <= E[T] <= E[X_{K:P}] (renewal throughput; new-better-than-used bound); no closed form".into()
                    } else {
                        "lower bound K E[X]/P (renewal throughput); no closed form".into()
                    },
                    ..Theory::default()
                }
            }
        },
        Protocol::KBatchAsync => Theory {
            exact: x.finite_mean().map(|m| kp * m),
            source: match exp_rate {
                Some(_) => "K/(P mu) (Poisson superposition)".into(),
                None => "K E[X]/P (elementary renewal theorem, long run)".into(),
            },
            ..Theory::default()
        },
    }
}

/// Long-run mean staleness of a gradient under `protocol` with P workers and K.
pub fn mean_staleness(protocol: Protocol, p: usize, k: usize) -> f64 {
    match protocol {
        Protocol::KSync | Protocol::KBatchSync => 0.0,
        Protocol::KAsync => (p as f64 - k as f64) / k as f64,
        Protocol::KBatchAsync => (p as f64 - 1.0) / k as f64,
    }
}

/// Error floor of K-sync (and K-batch-sync) SGD on the noisy quadratic
/// F(w) = ½ Σ_i h_i (w_i − w*_i)² whose minibatch gradient (m samples) has
/// isotropic noise of total variance σ²/m.
///
/// Each update averages K independent gradients at the same point, so
/// coordinate i follows e_{j+1} = (1 − η h_i) e_j − η ξ with Var ξ =
/// σ²/(K m d): the stationary variance is η σ² / (K m d h_i (2 − η h_i)) and
///
///   lim E[F(w_j)] − F* = (η σ² / (2 K m d)) Σ_i 1 / (2 − η h_i)   (needs η h_i < 2),
///
/// which lies below the paper's bound η L σ² / (2 c K m) (Dutta et al. 2018,
/// Theorem 1 with M_G = 0, i.e. the K-sync error floor).
pub fn quadratic_floor_exact(eta: f64, sigma2: f64, k: usize, m: usize, h: &[f64]) -> Option<f64> {
    if h.iter().any(|&hi| eta * hi >= 2.0) {
        return None;
    }
    let d = h.len() as f64;
    Some(
        eta * sigma2 / (2.0 * k as f64 * m as f64 * d)
            * h.iter().map(|hi| 1.0 / (2.0 - eta * hi)).sum::<f64>(),
    )
}

/// The paper's K-sync error-floor bound η L σ² / (2 c K m) (Theorem 1, M_G = 0).
pub fn k_sync_floor_bound(eta: f64, l: f64, c: f64, sigma2: f64, k: usize, m: usize) -> f64 {
    eta * l * sigma2 / (2.0 * c * k as f64 * m as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn exponential_closed_forms() {
        let e = Delay::Exponential { rate: 2.0 };
        let x = GradientTime {
            compute: &e,
            shift: 0.0,
        };
        let t = |p| time_per_iteration(p, &x, 8, 2);
        let h = (1.0 / 8.0 + 1.0 / 7.0) / 2.0;
        assert_relative_eq!(t(Protocol::KSync).exact.unwrap(), h);
        assert_relative_eq!(t(Protocol::KAsync).exact.unwrap(), h);
        assert_relative_eq!(t(Protocol::KBatchSync).exact.unwrap(), 2.0 / 16.0);
        assert_relative_eq!(t(Protocol::KBatchAsync).exact.unwrap(), 2.0 / 16.0);
        // Fully sync over async: P H_P.
        let sync = time_per_iteration(Protocol::KSync, &x, 8, 8).exact.unwrap();
        let asy = time_per_iteration(Protocol::KAsync, &x, 8, 1)
            .exact
            .unwrap();
        assert_relative_eq!(
            sync / asy,
            8.0 * crate::cluster::delay::harmonic(8),
            epsilon = 1e-12
        );
    }

    #[test]
    fn shifted_exponential_bounds() {
        let d = Delay::ShiftedExponential {
            shift: 1.0,
            rate: 1.0,
        };
        let x = GradientTime {
            compute: &d,
            shift: 0.5,
        };
        let one = time_per_iteration(Protocol::KAsync, &x, 4, 1);
        assert_relative_eq!(one.exact.unwrap(), 2.5 / 4.0);
        let all = time_per_iteration(Protocol::KAsync, &x, 4, 4);
        assert_relative_eq!(all.exact.unwrap(), 1.5 + crate::cluster::delay::harmonic(4));
        let a = time_per_iteration(Protocol::KAsync, &x, 4, 2);
        assert_eq!(a.exact, None);
        assert_relative_eq!(a.lower.unwrap(), 2.0 * 2.5 / 4.0);
        assert_relative_eq!(a.upper.unwrap(), 1.5 + 0.25 + 1.0 / 3.0);
        let b = time_per_iteration(Protocol::KBatchAsync, &x, 4, 2);
        assert_relative_eq!(b.exact.unwrap(), 1.25);
        let s = time_per_iteration(Protocol::KBatchSync, &x, 4, 2);
        assert!(s.exact.is_none() && s.upper.is_some());
    }

    #[test]
    fn staleness_and_floor() {
        assert_eq!(mean_staleness(Protocol::KAsync, 8, 1), 7.0);
        assert_eq!(mean_staleness(Protocol::KBatchAsync, 8, 4), 7.0 / 4.0);
        assert_eq!(mean_staleness(Protocol::KAsync, 8, 8), 0.0);
        let h = [1.0, 1.0];
        // eta h = 0.1: each coordinate's stationary loss share is eta s^2 / (2 (2 - 0.1)).
        let f = quadratic_floor_exact(0.1, 2.0, 1, 1, &h).unwrap();
        assert_relative_eq!(f, 0.1 * 2.0 / (2.0 * 2.0) * (2.0 / 1.9));
        assert!(f <= k_sync_floor_bound(0.1, 1.0, 1.0, 2.0, 1, 1));
        assert!(quadratic_floor_exact(2.5, 1.0, 1, 1, &h).is_none());
    }
}
