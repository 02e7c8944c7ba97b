//! A noisy quadratic with known smoothness L, strong convexity c and gradient
//! noise σ², the setting of Dutta et al. 2018's error analysis (§5,
//! Assumptions 1–3 with M_G = 0), so simulated error floors can be checked
//! against theory ([`crate::theory::dutta::quadratic_floor_exact`]).
//!
//! F(w) = ½ Σ_i h_i (w_i − w*_i)² over d coordinates, with the Hessian's
//! eigenvalues h_i spaced evenly from c to L (h = c when d = 1), w* = 0 and
//! F* = 0. A minibatch gradient of m samples is ∇F(w) + ξ with ξ ~ N(0,
//! σ²/(m d) · I), so E‖ξ‖² = σ²/m; ξ is drawn from the stream of
//! (run seed, computation index). The loss is F(w) − F*. The start w_0 has
//! all coordinates equal and ‖w_0 − w*‖ = `init_distance`.
//!
//! The minibatch loss reported with a gradient (for the adaptive rule) is
//! f(w; ξ) = F(w) + ξᵀw, the sample loss whose gradient is exactly the noisy
//! gradient ∇F(w) + ξ, with E f = F (our choice: the model specifies only
//! the gradient noise, and this is the loss consistent with it).

use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::model::gradient::{GradientDraw, GradientInfo, GradientModel, KnownConstants};
use crate::rng::{Purpose, stream};

/// Parameters of the noisy quadratic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuadraticConfig {
    /// d: number of coordinates.
    pub dimension: usize,
    /// L: largest Hessian eigenvalue (smoothness).
    pub l: f64,
    /// c: smallest Hessian eigenvalue (strong convexity).
    pub c: f64,
    /// σ²: noise variance of a one-sample gradient.
    pub sigma2: f64,
    /// m: samples per minibatch.
    pub batch_size: usize,
    /// η: the PS learning rate.
    pub learning_rate: f64,
    /// ‖w_0 − w*‖.
    #[serde(default = "one")]
    pub init_distance: f64,
}

fn one() -> f64 {
    1.0
}

/// The noisy quadratic as a [`GradientModel`].
pub struct NoisyQuadratic {
    config: QuadraticConfig,
    h: Vec<f64>,
    noise_std: f64,
}

impl NoisyQuadratic {
    /// The model of `config`.
    pub fn new(config: &QuadraticConfig) -> NoisyQuadratic {
        let d = config.dimension;
        let h = (0..d)
            .map(|i| {
                if d == 1 {
                    config.c
                } else {
                    config.c + (config.l - config.c) * i as f64 / (d - 1) as f64
                }
            })
            .collect();
        NoisyQuadratic {
            config: config.clone(),
            h,
            noise_std: (config.sigma2 / (config.batch_size as f64 * d as f64)).sqrt(),
        }
    }

    /// The Hessian's eigenvalues h_i.
    pub fn eigenvalues(&self) -> &[f64] {
        &self.h
    }
}

impl GradientModel for NoisyQuadratic {
    type Workspace = ();

    fn info(&self) -> GradientInfo {
        GradientInfo {
            name: "quadratic",
            parameters: self.config.dimension,
            loss: "F(w) - F* of the quadratic (exact)".into(),
            batch_size: self.config.batch_size,
        }
    }

    fn dim(&self) -> usize {
        self.config.dimension
    }

    fn init_params(&self) -> Vec<f32> {
        let v = self.config.init_distance / (self.config.dimension as f64).sqrt();
        vec![v as f32; self.config.dimension]
    }

    fn workspace(&self) {}

    fn gradient(&self, params: &[f32], draw: GradientDraw, out: &mut [f32], _ws: &mut ()) {
        let mut rng = stream(draw.run_seed, Purpose::Iteration, draw.index, 0);
        for ((o, &w), &h) in out.iter_mut().zip(params).zip(&self.h) {
            let z: f64 = StandardNormal.sample(&mut rng);
            *o = (h * w as f64 + self.noise_std * z) as f32;
        }
    }

    /// The gradient and the sample loss F(w) + ξᵀw (see the module documentation).
    fn gradient_and_loss(
        &self,
        params: &[f32],
        draw: GradientDraw,
        out: &mut [f32],
        _ws: &mut (),
    ) -> f64 {
        let mut rng = stream(draw.run_seed, Purpose::Iteration, draw.index, 0);
        let mut loss = 0.0;
        for ((o, &w), &h) in out.iter_mut().zip(params).zip(&self.h) {
            let z: f64 = StandardNormal.sample(&mut rng);
            let (w, xi) = (w as f64, self.noise_std * z);
            *o = (h * w + xi) as f32;
            loss += 0.5 * h * w * w + xi * w;
        }
        loss
    }

    fn loss(&self, params: &[f32], _ws: &mut ()) -> f64 {
        0.5 * params
            .iter()
            .zip(&self.h)
            .map(|(&w, &h)| h * (w as f64) * (w as f64))
            .sum::<f64>()
    }

    fn known_constants(&self) -> Option<KnownConstants> {
        Some(KnownConstants {
            l: self.config.l,
            c: self.config.c,
            sigma2: self.config.sigma2,
            batch_size: self.config.batch_size,
            hessian_eigenvalues: self.h.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> QuadraticConfig {
        QuadraticConfig {
            dimension: 4,
            l: 2.0,
            c: 0.5,
            sigma2: 3.0,
            batch_size: 2,
            learning_rate: 0.1,
            init_distance: 2.0,
        }
    }

    #[test]
    fn gradient_noise_has_the_stated_variance_and_mean() {
        let q = NoisyQuadratic::new(&cfg());
        assert_eq!(q.eigenvalues(), &[0.5, 1.0, 1.5, 2.0]);
        let w = q.init_params();
        assert!((q.loss(&w, &mut ()) - 0.5 * (0.5 + 1.0 + 1.5 + 2.0)).abs() < 1e-6);
        let mut g = vec![0f32; 4];
        let n = 40_000;
        let (mut mean, mut sq) = (vec![0f64; 4], 0f64);
        for i in 0..n {
            q.gradient(
                &w,
                GradientDraw {
                    run_seed: 1,
                    index: i,
                },
                &mut g,
                &mut (),
            );
            for j in 0..4 {
                let dev = g[j] as f64 - q.eigenvalues()[j];
                mean[j] += g[j] as f64 / n as f64;
                sq += dev * dev / n as f64;
            }
        }
        // E‖ξ‖² = σ²/m = 1.5; the mean is ∇F(w) = h ⊙ w (w = 1).
        assert!((sq - 1.5).abs() < 0.05, "{sq}");
        for (m, h) in mean.iter().zip(q.eigenvalues()) {
            assert!((m - h).abs() < 0.02);
        }
        // Same draw, same bits.
        let mut g2 = vec![0f32; 4];
        let d = GradientDraw {
            run_seed: 1,
            index: 7,
        };
        q.gradient(&w, d, &mut g, &mut ());
        q.gradient(&w, d, &mut g2, &mut ());
        assert_eq!(g, g2);
    }

    #[test]
    fn the_sample_loss_comes_with_the_same_gradient_and_averages_to_f() {
        let q = NoisyQuadratic::new(&cfg());
        let w = q.init_params();
        let (mut g, mut g2) = (vec![0f32; 4], vec![0f32; 4]);
        let n = 40_000;
        let mut mean = 0.0;
        for i in 0..n {
            let d = GradientDraw {
                run_seed: 2,
                index: i,
            };
            q.gradient(&w, d, &mut g, &mut ());
            let l = q.gradient_and_loss(&w, d, &mut g2, &mut ());
            assert_eq!(g, g2);
            // f(w; ξ) = F(w) + ξᵀw with ξ = g − ∇F(w).
            let xi_w: f64 = (0..4)
                .map(|j| (g[j] as f64 - q.eigenvalues()[j]) * w[j] as f64)
                .sum();
            assert!((l - q.loss(&w, &mut ()) - xi_w).abs() < 1e-5);
            mean += l / n as f64;
        }
        // E f = F(w) = 2.5; the s.e. of the mean is sqrt(1.5·|w|²/4 / n) ≈ 0.006.
        assert!((mean - 2.5).abs() < 0.03, "{mean}");
    }
}
