//! Theorem 1 of SCAR (§3.2) and its extension to perturbations in every
//! iteration (Example 3.3, Appendix B.1).
//!
//! Setting (SCAR eq. 2): the perturbed sequence is `y(k+1) = f(y(k) + δ_k)`
//! with `y(0) = x(0)`; `f` contracts towards the optimum x* at a linear rate
//! `0 < c < 1` (assumptions (3) and (5)). Every function here takes that rate
//! `c` as `rate`.
//!
//! The sums `Σ c^{−ℓ}‖δ_ℓ‖` grow like `c^{−T}` and overflow `f64` for long
//! runs with a fast rate (0.5^{−1100} is out of range), so [`DeltaT`] keeps
//! the sum as a logarithm and [`iteration_cost_bound`] evaluates the bound
//! from it without forming `Δ_T` itself.

/// `ln(1 + e^z)` without overflow.
fn ln_1p_exp(z: f64) -> f64 {
    if z > 40.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

/// Whether `rate` is a contraction factor the theory accepts: `0 < c < 1`.
fn valid_rate(rate: f64) -> bool {
    rate > 0.0 && rate < 1.0
}

/// The aggregated perturbation of Theorem 1,
/// `Δ_T = Σ_{ℓ=0}^{T} c^{−ℓ} ‖δ_ℓ‖` (SCAR eq. 6, the definition under the
/// theorem), accumulated one perturbation at a time and stored as
/// `ln Δ_T` so that late perturbations with a small `c` do not overflow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeltaT {
    rate: f64,
    /// ln Δ_T; −∞ while no non-zero perturbation has been added.
    ln_sum: f64,
}

impl DeltaT {
    /// An empty sum (Δ_T = 0) for the rate `c` (must be in (0, 1)).
    pub(crate) fn new(rate: f64) -> DeltaT {
        debug_assert!(valid_rate(rate), "rate {rate} outside (0, 1)");
        DeltaT {
            rate,
            ln_sum: f64::NEG_INFINITY,
        }
    }

    /// Adds the term `c^{−ℓ}‖δ_ℓ‖` of a perturbation of norm `norm` injected at
    /// iteration `iteration` = ℓ.
    pub(crate) fn add(&mut self, iteration: usize, norm: f64) {
        if norm.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return;
        }
        let term = norm.ln() - iteration as f64 * self.rate.ln();
        self.ln_sum = if self.ln_sum == f64::NEG_INFINITY {
            term
        } else {
            let (hi, lo) = if term > self.ln_sum {
                (term, self.ln_sum)
            } else {
                (self.ln_sum, term)
            };
            hi + (lo - hi).exp().ln_1p()
        };
    }

    /// `Δ_T` (may be `+∞` when it exceeds the `f64` range; the bound is still finite).
    pub(crate) fn value(&self) -> f64 {
        self.ln_sum.exp()
    }

    /// Theorem 1's bound for the perturbations added so far:
    /// `log(1 + Δ_T / ‖x(0) − x*‖) / log(1/c)`.
    pub fn bound(&self, initial_distance: f64) -> f64 {
        bound_from_ln(self.ln_sum, initial_distance, self.rate)
    }

    /// Δ_T of a list of `(iteration ℓ, ‖δ_ℓ‖)` perturbations.
    pub fn of(rate: f64, perturbations: impl IntoIterator<Item = (usize, f64)>) -> DeltaT {
        let mut d = DeltaT::new(rate);
        for (l, n) in perturbations {
            d.add(l, n);
        }
        d
    }
}

fn bound_from_ln(ln_delta_t: f64, initial_distance: f64, rate: f64) -> f64 {
    if !valid_rate(rate) || initial_distance.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
    {
        return f64::NAN;
    }
    if ln_delta_t == f64::NEG_INFINITY {
        return 0.0;
    }
    ln_1p_exp(ln_delta_t - initial_distance.ln()) / (1.0 / rate).ln()
}

/// SCAR Theorem 1, eq. (6): an upper bound on the iteration cost of
/// perturbations δ_0, …, δ_T (none after T),
/// `cost(δ, ε) ≤ log(1 + Δ_T / ‖x(0) − x*‖) / log(1/c)`,
/// where `delta_t` = Δ_T = Σ c^{−ℓ}‖δ_ℓ‖ and `initial_distance` = ‖x(0) − x*‖.
/// It does not depend on ε. Returns NaN unless `0 < c < 1` and the distance is positive.
pub fn iteration_cost_bound(delta_t: f64, initial_distance: f64, rate: f64) -> f64 {
    let ln = if delta_t > 0.0 {
        delta_t.ln()
    } else {
        f64::NEG_INFINITY
    };
    bound_from_ln(ln, initial_distance, rate)
}

/// SCAR §3.1: iterations after which the unperturbed sequence is ε-optimal
/// under assumption (3), `T(x, ε) = log(‖x(0) − x*‖ / ε) / log(1/c)` (the
/// baseline the iteration cost is measured against, eq. 4).
pub fn unperturbed_iterations_bound(initial_distance: f64, epsilon: f64, rate: f64) -> f64 {
    if !valid_rate(rate) {
        return f64::NAN;
    }
    (initial_distance / epsilon).ln() / (1.0 / rate).ln()
}

/// SCAR Example 3.3 and Appendix B.1: with a perturbation of norm at most Δ
/// in every iteration, the error cannot fall below `c/(1−c)·Δ` (the limit of
/// eq. 11 as k → ∞).
pub fn irreducible_error(rate: f64, delta: f64) -> f64 {
    if !valid_rate(rate) {
        return f64::NAN;
    }
    rate / (1.0 - rate) * delta
}

/// SCAR Appendix B.1 (the bound after eq. 11): the iteration cost of
/// perturbations of norm at most Δ in every iteration,
/// `log[(1 − F/‖x(0) − x*‖) / (1 − F/ε)] / log(1/c)` with `F = c/(1−c)·Δ`.
/// `None` where the paper calls it uninformative: unless
/// `F < ‖x(0) − x*‖` and `F < ε` (ε-optimality is then out of reach).
pub fn infinite_perturbation_cost_bound(
    rate: f64,
    delta: f64,
    initial_distance: f64,
    epsilon: f64,
) -> Option<f64> {
    let floor = irreducible_error(rate, delta);
    if !(floor < initial_distance && floor < epsilon) {
        return None;
    }
    Some(((1.0 - floor / initial_distance) / (1.0 - floor / epsilon)).ln() / (1.0 / rate).ln())
}

/// SCAR Example 2.1: storing `y` with a p-bit mantissa perturbs it by
/// `|δ| < 2^{−(p−1)}|y|`; this returns that bound, `2^{−(p−1)}·norm`.
/// (Round-to-nearest, as `super::precision::round_to_mantissa` does,
/// achieves half of it.)
pub fn rounding_perturbation_bound(mantissa_bits: u32, norm: f64) -> f64 {
    norm * (-(mantissa_bits as f64 - 1.0)).exp2()
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    /// Hand-computed: c = 1/2, ‖x(0) − x*‖ = 1, one perturbation ‖δ‖ = 1/4 at
    /// ℓ = 2: Δ_T = 2²·¼ = 1 and the bound is log 2 / log 2 = 1 iteration.
    #[test]
    fn theorem_1_by_hand_single() {
        let d = DeltaT::of(0.5, [(2, 0.25)]);
        assert_abs_diff_eq!(d.value(), 1.0, epsilon = 1e-15);
        assert_abs_diff_eq!(d.bound(1.0), 1.0, epsilon = 1e-15);
        assert_abs_diff_eq!(iteration_cost_bound(1.0, 1.0, 0.5), 1.0, epsilon = 1e-15);
    }

    /// Hand-computed: c = 0.9, δ_0 = 0.1, δ_1 = 0.09, ‖x(0) − x*‖ = 0.2:
    /// Δ_T = 0.1 + 0.09/0.9 = 0.2 and the bound is ln 2 / ln(1/0.9)
    /// = 0.693147 / 0.105361 = 6.578813.
    #[test]
    fn theorem_1_by_hand_two_perturbations() {
        let d = DeltaT::of(0.9, [(0, 0.1), (1, 0.09)]);
        assert_abs_diff_eq!(d.value(), 0.2, epsilon = 1e-15);
        assert_abs_diff_eq!(d.bound(0.2), 6.578813, epsilon = 1e-6);
    }

    #[test]
    fn no_perturbation_costs_nothing() {
        let d = DeltaT::of(0.9, [(3, 0.0)]);
        assert_eq!(d.value(), 0.0);
        assert_eq!(d.bound(1.0), 0.0);
        assert_eq!(iteration_cost_bound(0.0, 1.0, 0.9), 0.0);
        assert!(iteration_cost_bound(1.0, 1.0, 1.0).is_nan());
        assert!(iteration_cost_bound(1.0, 0.0, 0.5).is_nan());
    }

    /// Late perturbations with a fast rate overflow Δ_T but not the bound:
    /// c = 1/2, ‖δ‖ = 1 at ℓ = 2000 costs ≈ 2000 iterations (log2(1 + 2^2000)).
    #[test]
    fn log_space_survives_overflow() {
        let d = DeltaT::of(0.5, [(2000, 1.0)]);
        assert!(d.value().is_infinite());
        assert_abs_diff_eq!(d.bound(1.0), 2000.0, epsilon = 1e-9);
        // Adding in either order gives the same sum.
        let a = DeltaT::of(0.8, [(5, 0.3), (9, 0.01), (1, 2.0)]);
        let b = DeltaT::of(0.8, [(1, 2.0), (9, 0.01), (5, 0.3)]);
        assert_abs_diff_eq!(a.value(), b.value(), epsilon = 1e-12);
        let direct = 0.3 * 0.8f64.powi(-5) + 0.01 * 0.8f64.powi(-9) + 2.0 / 0.8;
        assert_abs_diff_eq!(a.value(), direct, epsilon = 1e-12);
    }

    /// The bound is the difference of the two T(·, ε) of the proof of
    /// Theorem 1, whatever ε.
    #[test]
    fn bound_is_a_difference_of_iteration_counts() {
        let (c, r0, dt) = (0.95, 3.0, 0.7);
        for eps in [1e-6, 1e-3, 0.1] {
            let diff = unperturbed_iterations_bound(r0 + dt, eps, c)
                - unperturbed_iterations_bound(r0, eps, c);
            assert_abs_diff_eq!(diff, iteration_cost_bound(dt, r0, c), epsilon = 1e-9);
        }
    }

    /// Appendix B.1 by hand: c = 0.5, Δ = 0.1 gives F = 0.1; with
    /// ‖x(0) − x*‖ = 1 and ε = 0.2 the cost bound is log2(0.9 / 0.5) = 0.847997.
    #[test]
    fn infinite_perturbations_by_hand() {
        assert_abs_diff_eq!(irreducible_error(0.5, 0.1), 0.1, epsilon = 1e-15);
        assert_abs_diff_eq!(irreducible_error(0.99, 1.0), 99.0, epsilon = 1e-9);
        let b = infinite_perturbation_cost_bound(0.5, 0.1, 1.0, 0.2).unwrap();
        assert_abs_diff_eq!(b, (0.9f64 / 0.5).log2(), epsilon = 1e-12);
        assert!(infinite_perturbation_cost_bound(0.5, 0.1, 1.0, 0.05).is_none());
        // Δ → 0 recovers zero cost.
        assert_abs_diff_eq!(
            infinite_perturbation_cost_bound(0.5, 0.0, 1.0, 0.2).unwrap(),
            0.0
        );
    }

    #[test]
    fn rounding_bound() {
        assert_eq!(rounding_perturbation_bound(1, 3.0), 3.0);
        assert_eq!(rounding_perturbation_bound(24, 1.0), 2f64.powi(-23));
    }
}
