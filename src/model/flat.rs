//! Flat access to a model's real-valued parameters, for perturbations that
//! act on the parameter vector as a whole (SCAR §5.2: random and adversarial
//! perturbations, rounding to a p-bit mantissa).
//!
//! A model offers it through [`super::Model::flat_params`]. Values cross the
//! boundary as `f64`; a model that stores `f32` (MLR) rounds on the way back,
//! so the perturbation a run really suffers is the change of the state, which
//! callers measure with [`super::Model::distance`].

use super::mlr::{Mlr, MlrState};

/// Reads and writes the trainable parameters of a state as one flat vector.
pub trait FlatParams<S>: Send + Sync {
    /// Length of the flat vector.
    fn param_count(&self) -> usize;
    /// Copies the parameters of `state` into `out` (length [`FlatParams::param_count`]).
    fn read_params(&self, state: &S, out: &mut [f64]);
    /// Overwrites the parameters of `state` with `values` (length
    /// [`FlatParams::param_count`]), in the model's own precision.
    fn write_params(&self, state: &mut S, values: &[f64]);
}

/// MLR: the weight matrix, row-major (`f32`, so writes round to `f32`).
impl FlatParams<MlrState> for Mlr {
    fn param_count(&self) -> usize {
        self.data().features * self.data().classes
    }

    fn read_params(&self, state: &MlrState, out: &mut [f64]) {
        for (o, w) in out.iter_mut().zip(&state.w) {
            *o = *w as f64;
        }
    }

    fn write_params(&self, state: &mut MlrState, values: &[f64]) {
        for (w, v) in state.w.iter_mut().zip(values) {
            *w = *v as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::data::synthetic;
    use crate::model::Model;
    use crate::model::mlr::MlrConfig;

    #[test]
    fn mlr_round_trips_through_f64() {
        let m = Mlr::new(
            Arc::new(synthetic::mnist_like(3, 0.01)),
            &MlrConfig {
                batch_size: 10,
                learning_rate: 1e-5,
            },
        );
        let flat = m.flat_params().expect("mlr has flat parameters");
        let mut s = m.init();
        let n = flat.param_count();
        assert_eq!(n, s.w.len());
        let values: Vec<f64> = (0..n).map(|i| i as f64 * 0.25).collect();
        flat.write_params(&mut s, &values);
        let mut back = vec![0.0; n];
        flat.read_params(&s, &mut back);
        assert_eq!(back, values);
    }
}
