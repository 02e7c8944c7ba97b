//! One perturbation trial: when it is first perturbed, how it forks from the
//! unperturbed run, and the perturbations it draws and applies.

use rand::RngExt;
use rand_distr::StandardNormal;

use super::TrialResult;
use crate::engine::{Baseline, Convergence, ForkMode, TrialHook, run_hooked, trial::rerun};
use crate::model::{FlatParams, Model};
use crate::rng::{Purpose, SimRng, stream};
use crate::scenario::perturbation::{NormScale, PerturbationKind, PerturbationSeries, Schedule};

pub(super) struct Buffers {
    pub(super) params: Vec<f64>,
    pub(super) noise: Vec<f64>,
    pub(super) blocks: Vec<usize>,
}

/// Everything a trial reads.
pub(super) struct Ctx<'a, M: Model> {
    pub(super) model: &'a M,
    /// x(0), …, x(B).
    pub(super) baseline: &'a Baseline<M::State>,
    /// x*, when a series perturbs relative to it (else it is computed
    /// beside the trials, see [`super::needs_optimum`]).
    pub(super) optimum: Option<&'a M::State>,
    pub(super) flat: Option<&'a dyn FlatParams<M::State>>,
    pub(super) optimum_flat: Vec<f64>,
    pub(super) init: M::State,
    /// Fork trials from the unperturbed run, or re-run their prefix.
    pub(super) fork: ForkMode,
}

/// When trial `trial` of `series` is first perturbed (`None`: not before the
/// unperturbed run converges at `b`), and its timing stream after drawing it.
pub(super) fn first_perturbation(
    series: &PerturbationSeries,
    seed: u64,
    trial: usize,
    b: usize,
) -> (Option<usize>, SimRng) {
    let mut timing = stream(seed, Purpose::Perturbation, trial as u64, 0);
    let first = match series.schedule {
        Schedule::EachIteration { probability } => {
            (0..b).find(|_| timing.random::<f64>() < probability)
        }
        ref once => once.once_at(b),
    };
    (first, timing)
}

/// One perturbation trial in the engine's trial loop: it forks from the
/// unperturbed run at its first perturbation iteration ℓ and, after each
/// convergence check of y(k), perturbs when its schedule says so.
pub(super) struct Trial<'c, 'a, M: Model> {
    ctx: &'c Ctx<'a, M>,
    series: &'a PerturbationSeries,
    first: usize,
    timing: SimRng,
    values: SimRng,
    buf: Buffers,
    /// (ℓ, ‖δ_ℓ‖) of every perturbation so far.
    perturbations: Vec<(usize, f64)>,
    reset_fraction: f64,
}

impl<M: Model> TrialHook<M> for Trial<'_, '_, M> {
    fn start(
        &mut self,
        model: &M,
        baseline: &Baseline<M::State>,
        ws: &mut M::Workspace,
    ) -> (usize, M::State) {
        let mut state = match self.ctx.fork {
            ForkMode::Fork => baseline.states[self.first].clone(),
            ForkMode::Rerun => rerun(model, self.first, baseline.run_seed, ws)
                .pop()
                .expect("x(ℓ)"),
        };
        model.rebuild_derived(&mut state);
        (self.first, state)
    }

    fn before_step(&mut self, _model: &M, k: usize, state: &mut M::State) {
        let now = k == self.first
            || match self.series.schedule {
                Schedule::Once { .. } | Schedule::AtRunFraction { .. } => false,
                Schedule::EachIteration { probability } => {
                    self.timing.random::<f64>() < probability
                }
            };
        if now {
            let (norm, fraction) =
                self.ctx
                    .perturb(self.series, state, &mut self.values, &mut self.buf);
            if self.perturbations.is_empty() {
                self.reset_fraction = fraction;
            }
            self.perturbations.push((k, norm));
        }
    }
}

impl<'a, M: Model> Ctx<'a, M> {
    /// Trial `trial` of `series`, first perturbed at `first` (its timing
    /// stream as [`first_perturbation`] left it).
    pub(super) fn trial<'c>(
        &'c self,
        series: &'a PerturbationSeries,
        first: usize,
        timing: SimRng,
        seed: u64,
        trial: usize,
    ) -> Trial<'c, 'a, M> {
        Trial {
            ctx: self,
            series,
            first,
            timing,
            values: stream(seed, Purpose::Perturbation, trial as u64, 1),
            buf: self.buffers(),
            perturbations: Vec::new(),
            reset_fraction: f64::NAN,
        }
    }

    /// Runs `trials` as one cohort of the engine's trial loop.
    pub(super) fn run_cohort(
        &self,
        mut trials: Vec<Trial<'_, 'a, M>>,
        convergence: &Convergence,
        certify: bool,
        ws: &mut M::Workspace,
        stop: &dyn Fn() -> bool,
    ) -> Option<Vec<TrialResult>> {
        let finished = run_hooked(
            self.model,
            self.baseline,
            convergence,
            &mut trials,
            certify,
            ws,
            stop,
        )?;
        Some(
            trials
                .into_iter()
                .zip(finished)
                .map(|(t, f)| TrialResult {
                    perturbations: t.perturbations,
                    reset_fraction: t.reset_fraction,
                    iterations: f.iterations,
                    converged: f.converged,
                })
                .collect(),
        )
    }

    /// Fresh per-trial buffers.
    fn buffers(&self) -> Buffers {
        let params = self.flat.map_or(0, |f| f.param_count());
        Buffers {
            params: vec![0.0; params],
            noise: vec![0.0; params],
            blocks: Vec::with_capacity(self.model.block_count()),
        }
    }

    /// Applies one perturbation of `series` to `state`; returns the measured
    /// ‖δ‖ and the reset fraction (NaN unless a reset).
    pub(super) fn perturb(
        &self,
        series: &PerturbationSeries,
        state: &mut M::State,
        rng: &mut SimRng,
        buf: &mut Buffers,
    ) -> (f64, f64) {
        let before = state.clone();
        let u: f64 = rng.random();
        let mut fraction = f64::NAN;
        match series.kind {
            PerturbationKind::Random | PerturbationKind::Adversarial => {
                let spec = series
                    .norm
                    .expect("validated: random/adversarial have a norm");
                let flat = self.flat.expect("checked before the trials");
                let scale = match spec.relative_to {
                    NormScale::Absolute => 1.0,
                    NormScale::OptimumDistance => self.model.distance(
                        state,
                        self.optimum
                            .expect("x* comes before the trials of a series scaled by it"),
                    ),
                };
                let target = spec.draw.at(u) * scale;
                flat.read_params(state, &mut buf.params);
                if series.kind == PerturbationKind::Random {
                    for z in buf.noise.iter_mut() {
                        *z = rng.sample(StandardNormal);
                    }
                } else {
                    assert_eq!(
                        self.optimum_flat.len(),
                        buf.params.len(),
                        "x* comes before the trials of an adversarial series"
                    );
                    for ((d, p), o) in buf
                        .noise
                        .iter_mut()
                        .zip(&buf.params)
                        .zip(&self.optimum_flat)
                    {
                        *d = p - o;
                    }
                }
                let len = buf.noise.iter().map(|v| v * v).sum::<f64>().sqrt();
                if len > 0.0 {
                    let s = target / len;
                    for (p, d) in buf.params.iter_mut().zip(&buf.noise) {
                        *p += s * d;
                    }
                    flat.write_params(state, &buf.params);
                }
            }
            PerturbationKind::Reset => {
                let draw = series.fraction.expect("validated: reset has a fraction");
                let f = draw.at(u);
                let n = self.model.block_count();
                let count = ((f * n as f64).round() as usize).clamp(1, n);
                fraction = f;
                buf.blocks.clear();
                buf.blocks.extend(0..n);
                // Partial Fisher–Yates: the first `count` entries are a uniform subset.
                for i in 0..count {
                    let j = rng.random_range(i..n);
                    buf.blocks.swap(i, j);
                }
                for &blk in &buf.blocks[..count] {
                    self.model.copy_block(&self.init, state, blk);
                }
            }
        }
        self.model.rebuild_derived(state);
        (self.model.distance(&before, state), fraction)
    }
}
