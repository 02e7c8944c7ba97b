//! The theory each paper states, as code, one file or folder per source:
//!
//! - `scar`: the iteration-cost theory of SCAR §3 and Appendix B:
//!   Theorem 1's bound (`scar/bound.rs`), estimating the linear rate c of
//!   assumption (3) (`scar/rate.rs`), rounding to a p-bit mantissa
//!   (`scar/precision.rs`, Example 2.1) and the online iteration-cost
//!   predictor the paper proposes as future work (`scar/predictor.rs`, §6);
//! - [`dutta`]: the runtime per iteration, staleness and K-sync error floor
//!   of Dutta et al. (2018), §4–§5;
//! - [`daly`]: the checkpoint/restart time model of Daly (2006) that SCAR
//!   §4 uses to split the running time.

pub mod daly;
pub mod dutta;
pub(crate) mod scar;

pub use scar::bound::{
    DeltaT, infinite_perturbation_cost_bound, irreducible_error, iteration_cost_bound,
    rounding_perturbation_bound, unperturbed_iterations_bound,
};
pub(crate) use scar::predictor::{PredictionAccuracy, PredictorTrack, RecoveryPredictor};
pub(crate) use scar::rate::{fit_geometric_rate, max_ratio_rate};
