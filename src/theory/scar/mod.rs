//! The iteration-cost theory of SCAR §3 and Appendix B.
//!
//! - `bound`: Theorem 1's bound on the iteration cost of perturbations,
//!   Δ_T, the unperturbed iteration count T(x, ε), and the irreducible error
//!   and cost bound of perturbations in every iteration (Example 3.3,
//!   Appendix B.1).
//! - `rate`: estimating the linear rate c of assumption (3) from a run.
//! - `precision`: rounding to a p-bit mantissa (Example 2.1).
//! - `predictor`: the online iteration-cost predictor the paper proposes as
//!   future work (§6): estimate c and ‖x(0) − x*‖ from the iterates while
//!   training runs, and predict the cost of a perturbation before it happens.

pub(crate) mod bound;
pub(crate) mod precision;
pub(crate) mod predictor;
pub(crate) mod rate;
