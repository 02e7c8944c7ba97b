//! When a failure strikes (in iterations) and what it takes down.

use rand::RngExt;
use rand::seq::SliceRandom;
use serde::Serialize;

use crate::policy::Placement;
use crate::rng::SimRng;

/// The iteration T at which a trial's failure strikes: after x(T) has been
/// computed and before a checkpoint due at T is taken.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "distribution", rename_all = "kebab-case")]
pub(crate) enum FailureTime {
    /// Every iteration fails independently with probability `p`, so T is
    /// geometric on {1, 2, …} with P(T = t) = (1 − p)^(t−1) p (SCAR §5.3:
    /// "we sample the failure iteration from a geometric distribution").
    /// Choice: T is drawn *conditioned on striking before the unperturbed run
    /// converges* (T < B), by inverting the truncated CDF, so every trial has
    /// a failure to recover from.
    Geometric {
        /// Per-iteration failure probability, in (0, 1].
        p: f64,
    },
    /// Geometric like [`FailureTime::Geometric`], with its mean given as a
    /// fraction of the trial's own unperturbed run: p = 1 / (`mean_of_run` · B)
    /// (capped at 1), where B is the iteration the unperturbed run converges
    /// at. The robustness study (issue 16's "failure mean ∈ {B/4, B/2, B}")
    /// sets the failure rate this way so that one setting means the same
    /// thing on a 60-iteration MLR run and a 1,300-iteration CNN run. Like
    /// `Geometric`, T is conditioned on T < B.
    GeometricOfRun {
        /// The geometric distribution's mean (before truncation), as a
        /// fraction of B; > 0.
        mean_of_run: f64,
    },
    /// The failure always strikes at this iteration (≥ 1).
    Fixed {
        /// The failure iteration T.
        iteration: usize,
    },
}

impl FailureTime {
    /// Draws T given that the unperturbed run converges at iteration
    /// `baseline` (T ∈ [1, baseline − 1]). Returns `None` for a fixed T that
    /// is not before convergence, or when `baseline < 2`.
    pub(crate) fn sample(&self, baseline: usize, rng: &mut SimRng) -> Option<usize> {
        if baseline < 2 {
            return None;
        }
        let last = baseline - 1;
        match *self {
            FailureTime::Fixed { iteration } => {
                (1..=last).contains(&iteration).then_some(iteration)
            }
            FailureTime::Geometric { p } => Some(truncated_geometric(p, last, rng)),
            FailureTime::GeometricOfRun { mean_of_run } => {
                let p = (1.0 / (mean_of_run * baseline as f64)).min(1.0);
                Some(truncated_geometric(p, last, rng))
            }
        }
    }
}

/// Geometric(p) on {1, …, max} by inverse CDF: F(t) = 1 − (1 − p)^t.
fn truncated_geometric(p: f64, max: usize, rng: &mut SimRng) -> usize {
    if p >= 1.0 {
        return 1;
    }
    let q = 1.0 - p;
    let f_max = 1.0 - q.powf(max as f64);
    let v = rng.random::<f64>() * f_max;
    // Smallest t with F(t) > v.
    let t = ((1.0 - v).ln() / q.ln()).floor() as usize + 1;
    t.clamp(1, max)
}

/// What a failure takes down.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum LossSpec {
    /// A uniformly random fraction of the blocks (SCAR §5.3: "the set of
    /// failed parameters are selected uniformly at random"); round(f·n)
    /// blocks, at least one.
    Fraction(f64),
    /// `k` PS nodes chosen uniformly at random, with every block they hold.
    PsNodes(usize),
}

impl LossSpec {
    /// The blocks lost, sorted. `order` is the trial's random permutation of
    /// the blocks (shared by all points of a trial, so that a larger lost
    /// fraction loses a superset of the blocks a smaller one loses);
    /// `placement` and `node_rng` are used for PS-node losses.
    pub(crate) fn lost_blocks(
        &self,
        order: &[usize],
        placement: &Placement,
        node_rng: &mut SimRng,
    ) -> Vec<usize> {
        let mut lost = match *self {
            LossSpec::Fraction(f) => {
                let n = order.len();
                let k = ((f * n as f64).round() as usize).clamp(1, n);
                order[..k].to_vec()
            }
            LossSpec::PsNodes(k) => {
                let mut nodes: Vec<usize> = (0..placement.nodes()).collect();
                nodes.shuffle(node_rng);
                placement.blocks_on(&nodes[..k.min(nodes.len())])
            }
        };
        lost.sort_unstable();
        lost
    }

    /// The expected fraction of blocks lost, given `ps_nodes` nodes.
    pub(crate) fn expected_fraction(&self, ps_nodes: usize) -> f64 {
        match *self {
            LossSpec::Fraction(f) => f,
            LossSpec::PsNodes(k) => k as f64 / ps_nodes as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, stream};

    #[test]
    fn geometric_is_truncated_and_has_the_right_shape() {
        let mut rng = stream(3, Purpose::FailureTime, 0, 0);
        let ft = FailureTime::Geometric { p: 0.1 };
        let draws: Vec<usize> = (0..20000)
            .map(|_| ft.sample(60, &mut rng).unwrap())
            .collect();
        assert!(draws.iter().all(|&t| (1..60).contains(&t)));
        // P(T = 1 | T ≤ 59) = p / (1 − 0.9^59)
        let p1 = draws.iter().filter(|&&t| t == 1).count() as f64 / draws.len() as f64;
        let expect = 0.1 / (1.0 - 0.9f64.powi(59));
        assert!((p1 - expect).abs() < 0.01, "{p1} vs {expect}");
        // Untruncated mean ≈ 1/p when truncation is negligible.
        let mut rng = stream(4, Purpose::FailureTime, 0, 0);
        let ft = FailureTime::Geometric { p: 0.25 };
        let mean = (0..20000)
            .map(|_| ft.sample(1000, &mut rng).unwrap() as f64)
            .sum::<f64>()
            / 20000.0;
        assert!((mean - 4.0).abs() < 0.1, "mean {mean}");
    }

    #[test]
    fn a_mean_relative_to_the_run_is_the_geometric_with_that_mean() {
        // B = 80: mean B/4 is p = 1/20, drawn from the same stream the same way.
        for (b, f) in [(80usize, 0.25), (80, 1.0), (7, 0.5), (2, 0.01)] {
            let p = (1.0 / (f * b as f64)).min(1.0);
            let mut r1 = stream(9, Purpose::FailureTime, b as u64, 0);
            let mut r2 = stream(9, Purpose::FailureTime, b as u64, 0);
            for _ in 0..200 {
                assert_eq!(
                    FailureTime::GeometricOfRun { mean_of_run: f }.sample(b, &mut r1),
                    FailureTime::Geometric { p }.sample(b, &mut r2)
                );
            }
        }
        // B = 1000, mean B/4: T | T ≤ 999 has mean 1/p − m·qᵐ/(1 − qᵐ) ≈ 231.4.
        let (p, m) = (1.0 / 250.0, 999.0);
        let qm = (1.0f64 - p).powf(m);
        let expect = 1.0 / p - m * qm / (1.0 - qm);
        let mut rng = stream(5, Purpose::FailureTime, 0, 0);
        let ft = FailureTime::GeometricOfRun { mean_of_run: 0.25 };
        let mean = (0..20000)
            .map(|_| ft.sample(1000, &mut rng).unwrap() as f64)
            .sum::<f64>()
            / 20000.0;
        assert!((mean - expect).abs() < 5.0, "mean {mean} vs {expect}");
    }

    #[test]
    fn fixed_time_must_precede_convergence() {
        let mut rng = stream(3, Purpose::FailureTime, 0, 0);
        let ft = FailureTime::Fixed { iteration: 10 };
        assert_eq!(ft.sample(11, &mut rng), Some(10));
        assert_eq!(ft.sample(10, &mut rng), None);
        assert_eq!(FailureTime::Geometric { p: 0.5 }.sample(1, &mut rng), None);
    }

    #[test]
    fn lost_fractions_are_nested() {
        let order: Vec<usize> = vec![4, 2, 7, 0, 1, 3, 5, 6];
        let mut rng = stream(1, Purpose::LostBlocks, 0, 0);
        let placement = Placement::random(8, 2, &mut rng);
        let quarter = LossSpec::Fraction(0.25).lost_blocks(&order, &placement, &mut rng);
        let half = LossSpec::Fraction(0.5).lost_blocks(&order, &placement, &mut rng);
        assert_eq!(quarter, vec![2, 4]);
        assert_eq!(half, vec![0, 2, 4, 7]);
        let node = LossSpec::PsNodes(1).lost_blocks(&order, &placement, &mut rng);
        assert_eq!(node.len(), 4);
        let n0 = placement.node_of(node[0]);
        assert!(node.iter().all(|&b| placement.node_of(b) == n0));
    }
}
