//! Quadratic objectives whose constants are known exactly, so simulated runs
//! can be checked against theory:
//!
//! - [`qp`]: SCAR Figure 3's 4-dimensional strongly convex QP, trained by
//!   gradient descent in the iteration domain (a [`crate::model::Model`]),
//!   where Theorem 1's rate c is known analytically;
//! - [`noisy`]: Dutta et al.'s noisy quadratic with known smoothness, strong
//!   convexity and gradient noise, for the wall-clock protocols (a
//!   [`crate::model::gradient::GradientModel`]).

pub mod noisy;
pub(crate) mod qp;

pub use noisy::{NoisyQuadratic, QuadraticConfig};
