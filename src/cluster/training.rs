//! Real training inside the wall-clock simulation: a [`Handler`] that keeps
//! the PS parameters and each worker's pulled copy, computes each pushed
//! gradient on the copy the worker computed it on, and applies the updates.
//!
//! The update (Dutta et al. 2018, eq. 2) is `w_{j+1} = w_j − (1/K) Σ_l η_l g_l`
//! over the K gradients the PS waited for, with η_l = η, or with the
//! staleness-aware rate of the paper (§6) η_l = min(C / ‖w_j − w_τ(l)‖², η_max),
//! where w_τ(l) are the parameters gradient l was computed on (a fresh
//! gradient, ‖·‖ = 0, gets η_max). The paper states the rule for K = 1; for
//! K > 1 each gradient gets its own rate (our choice).
//!
//! The loss is evaluated on a common time grid: the value at grid time g is
//! the loss of the PS parameters after every update at time ≤ g. It can also
//! be logged every N updates.
//!
//! With an adaptive rule ([`TrainingSetup::k_rule`]) every pushed gradient
//! also carries its minibatch loss
//! ([`GradientModel::gradient_and_loss`]), which the rule watches; the
//! handler then chooses K ([`Handler::k_override`]).

use std::sync::Arc;

use serde::Serialize;

use super::adaptive::{PlateauRule, PlateauState, Switch};
use super::sim::{Handler, Job, UpdateInfo};
use crate::model::gradient::{GradientDraw, GradientModel};

/// The staleness-aware learning rate η_j = min(C/‖w_j − w_τ(j)‖², η_max) (Dutta et al. 2018, §6).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StalenessAware {
    /// C.
    pub(crate) c: f64,
    /// η_max.
    pub(crate) eta_max: f64,
}

/// One update of a logged run.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct UpdateLog {
    /// New version j + 1.
    pub(crate) version: u64,
    /// Wall-clock time.
    #[serde(with = "crate::report::json_f64")]
    pub(crate) time: f64,
    /// Workers whose gradients were used, in arrival order.
    pub(crate) workers: Vec<usize>,
    /// Staleness of each of those gradients.
    pub(crate) staleness: Vec<u64>,
    /// Learning rate applied to each gradient.
    #[serde(with = "crate::report::json_f64::vec")]
    pub(crate) rates: Vec<f64>,
    /// ‖w_j − w_τ‖² of each gradient (measured only with the staleness-aware rate; else empty).
    #[serde(with = "crate::report::json_f64::vec")]
    pub(crate) distances2: Vec<f64>,
    /// Loss after the update (NaN when not evaluated at this update).
    #[serde(with = "crate::report::json_f64")]
    pub(crate) loss: f64,
}

/// Settings of one training run.
#[derive(Clone, Debug)]
pub struct TrainingSetup<'a> {
    /// η.
    pub eta: f64,
    /// The staleness-aware rate, if used.
    pub staleness_aware: Option<StalenessAware>,
    /// Seed of the run's minibatches and gradient noise.
    pub run_seed: u64,
    /// Times at which to evaluate the loss (ascending).
    pub grid: &'a [f64],
    /// Log every update (`Some(n)`: with the loss every n updates; n = 0: no loss).
    pub log_updates: Option<u64>,
    /// Staleness values ≥ this are counted in the last histogram bucket.
    pub staleness_buckets: usize,
    /// The adaptive rule choosing K from the observed minibatch losses, if
    /// any (else K comes from the simulation's schedule).
    pub k_rule: Option<PlateauRule>,
}

/// The model side of a simulated training run.
pub struct Training<'a, M: GradientModel> {
    model: &'a M,
    ws: &'a mut M::Workspace,
    setup: TrainingSetup<'a>,
    /// The PS parameters: each version is written once, into a buffer of
    /// its own, and shared with the workers that pull it (a pull copies
    /// nothing).
    params: Arc<Vec<f32>>,
    /// The version each worker pulled last.
    held: Vec<Arc<Vec<f32>>>,
    /// Versions no one else holds any more, for the next updates to
    /// overwrite (no allocation per update).
    free: Vec<Arc<Vec<f32>>>,
    /// Σ η_l g_l of the gradients pushed since the last update.
    sum: Vec<f32>,
    /// Scratch of [`GradientModel::add_gradient`].
    grad: Vec<f32>,
    rates: Vec<f64>,
    distances2: Vec<f64>,
    /// Loss at each grid time reached so far.
    pub grid_loss: Vec<f64>,
    /// Updates done by each grid time reached so far.
    pub(crate) grid_updates: Vec<u64>,
    /// Count of gradients by staleness (last bucket: ≥ its index).
    pub(crate) staleness_histogram: Vec<u64>,
    /// Σ staleness and Σ staleness² over all applied gradients, and their number.
    pub(crate) staleness_sum: (f64, f64, u64),
    /// Largest staleness seen.
    pub(crate) staleness_max: u64,
    /// Per-update log, if requested.
    pub(crate) log: Vec<UpdateLog>,
    /// Σ of the learning rates applied, and their number (for the mean rate).
    pub(crate) rate_sum: (f64, u64),
    /// Σ ‖w_j − w_τ‖² over stale gradients and their number (staleness-aware runs only):
    /// the scale against which C is chosen.
    pub(crate) stale_distance2_sum: (f64, u64),
    updates: u64,
    last_update_time: f64,
    /// Simulated time of the event being handled.
    now: f64,
    rule: Option<PlateauState>,
}

impl<'a, M: GradientModel> Training<'a, M> {
    /// A run of `model` with `workers` workers, starting from w_0.
    pub fn new(
        model: &'a M,
        ws: &'a mut M::Workspace,
        workers: usize,
        setup: TrainingSetup<'a>,
    ) -> Self {
        let params = Arc::new(model.init_params());
        let dim = params.len();
        let buckets = setup.staleness_buckets.max(1);
        Training {
            model,
            ws,
            held: vec![Arc::clone(&params); workers],
            params,
            free: Vec::new(),
            sum: vec![0.0; dim],
            grad: vec![0.0; dim],
            rates: Vec::new(),
            distances2: Vec::new(),
            grid_loss: Vec::with_capacity(setup.grid.len()),
            grid_updates: Vec::with_capacity(setup.grid.len()),
            staleness_histogram: vec![0; buckets],
            staleness_sum: (0.0, 0.0, 0),
            staleness_max: 0,
            log: Vec::new(),
            rate_sum: (0.0, 0),
            stale_distance2_sum: (0.0, 0),
            updates: 0,
            last_update_time: 0.0,
            now: 0.0,
            rule: setup.k_rule.map(PlateauState::new),
            setup,
        }
    }

    /// The PS parameters.
    #[cfg(test)]
    pub(crate) fn params(&self) -> &[f32] {
        &self.params[..]
    }

    /// Keeps a version's buffer for reuse once nothing holds it.
    fn recycle(&mut self, version: Arc<Vec<f32>>) {
        if Arc::strong_count(&version) == 1 {
            self.free.push(version);
        }
    }

    /// Time of the last update (0 if none).
    pub(crate) fn last_update_time(&self) -> f64 {
        self.last_update_time
    }

    /// The adaptive rule's changes of K so far (empty without a rule).
    pub(crate) fn switches(&self) -> &[Switch] {
        self.rule.as_ref().map_or(&[], |r| r.switches())
    }

    /// Evaluates the remaining grid times ≤ `horizon` (call after the run).
    pub fn finish(&mut self, horizon: f64) {
        self.evaluate_grid(|g| g <= horizon);
    }

    fn evaluate_grid(&mut self, due: impl Fn(f64) -> bool) {
        while let Some(&g) = self.setup.grid.get(self.grid_loss.len()) {
            if !due(g) {
                break;
            }
            // Parameters do not change between grid times without updates:
            // reuse the previous value instead of re-evaluating.
            let reuse = self.grid_updates.last() == Some(&self.updates);
            let loss = if reuse {
                *self.grid_loss.last().expect("a previous grid value")
            } else {
                self.model.loss(&self.params[..], self.ws)
            };
            self.grid_loss.push(loss);
            self.grid_updates.push(self.updates);
        }
    }
}

impl<M: GradientModel> Handler for Training<'_, M> {
    fn advance_to(&mut self, t: f64) {
        self.evaluate_grid(|g| g < t);
        self.now = t;
    }

    fn k_override(&self) -> Option<usize> {
        self.rule.as_ref().map(PlateauState::k)
    }

    fn pull(&mut self, worker: usize, _version: u64) {
        let old = std::mem::replace(&mut self.held[worker], Arc::clone(&self.params));
        self.recycle(old);
    }

    fn push(&mut self, job: &Job, ps_version: u64) {
        let held = &self.held[job.worker][..];
        let draw = GradientDraw {
            run_seed: self.setup.run_seed,
            index: job.seq,
        };
        // The PS parameters cannot change between this push and the update
        // that applies it (every update uses all gradients pushed before it),
        // so ‖w_j − w_τ‖ can be measured now.
        let rate = match self.setup.staleness_aware {
            None => self.setup.eta,
            Some(sa) => {
                let d2: f64 = self
                    .params
                    .iter()
                    .zip(held)
                    .map(|(a, b)| {
                        let d = (*a - *b) as f64;
                        d * d
                    })
                    .sum();
                self.distances2.push(d2);
                if job.version < ps_version {
                    self.stale_distance2_sum.0 += d2;
                    self.stale_distance2_sum.1 += 1;
                }
                if d2 > 0.0 {
                    (sa.c / d2).min(sa.eta_max)
                } else {
                    sa.eta_max
                }
            }
        };
        self.rates.push(rate);
        let loss = self.model.add_gradient(
            held,
            draw,
            rate as f32,
            &mut self.sum,
            &mut self.grad,
            self.ws,
            self.rule.is_some(),
        );
        if let (Some(rule), Some(loss)) = (&mut self.rule, loss) {
            rule.observe(loss, self.now);
        }
    }

    fn update(&mut self, info: &UpdateInfo<'_>) {
        let k = info.gradients.len() as f32;
        // w_{j+1} into a buffer of its own: workers may hold w_j.
        let mut next = self
            .free
            .pop()
            .unwrap_or_else(|| Arc::new(vec![0.0; self.sum.len()]));
        let buffer = Arc::get_mut(&mut next).expect("a free version is held by no one");
        step(&self.params, &mut self.sum, k, buffer);
        let old = std::mem::replace(&mut self.params, next);
        self.recycle(old);
        self.updates = info.version;
        self.last_update_time = info.time;
        let last = self.staleness_histogram.len() - 1;
        for g in info.gradients {
            let s = g.staleness;
            self.staleness_histogram[(s as usize).min(last)] += 1;
            self.staleness_sum.0 += s as f64;
            self.staleness_sum.1 += (s * s) as f64;
            self.staleness_sum.2 += 1;
            self.staleness_max = self.staleness_max.max(s);
        }
        for r in &self.rates {
            self.rate_sum.0 += r;
            self.rate_sum.1 += 1;
        }
        if let Some(every) = self.setup.log_updates {
            let loss = if every > 0 && info.version.is_multiple_of(every) {
                self.model.loss(&self.params[..], self.ws)
            } else {
                f64::NAN
            };
            self.log.push(UpdateLog {
                version: info.version,
                time: info.time,
                workers: info.gradients.iter().map(|g| g.worker).collect(),
                staleness: info.gradients.iter().map(|g| g.staleness).collect(),
                rates: self.rates.clone(),
                distances2: self.distances2.clone(),
                loss,
            });
        }
        self.rates.clear();
        self.distances2.clear();
    }
}

crate::simd::kernel! {
    /// `next = w − sum/k` entry by entry, and `sum` cleared: the update
    /// `w_{j+1} = w_j − (1/K) Σ η_l g_l` (one division per entry, as written).
    fn step, step_at(w: &[f32], sum: &mut [f32], k: f32, next: &mut [f32]) = step_body;
}

#[inline(always)]
fn step_body(w: &[f32], sum: &mut [f32], k: f32, next: &mut [f32]) {
    for ((n, &w), s) in next.iter_mut().zip(w).zip(sum.iter_mut()) {
        *n = w - *s / k;
        *s = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::protocol::{KSchedule, Protocol};
    use crate::cluster::sim::{ScriptedDelays, Stop, simulate};
    use crate::model::gradient::{GradientInfo, GradientModel};

    /// F(w) = ½ w², gradient w exactly (no noise): easy to trace by hand.
    struct Half;
    impl GradientModel for Half {
        type Workspace = ();
        fn info(&self) -> GradientInfo {
            GradientInfo {
                name: "half",
                parameters: 1,
                loss: "w^2/2".into(),
                batch_size: 1,
            }
        }
        fn dim(&self) -> usize {
            1
        }
        fn init_params(&self) -> Vec<f32> {
            vec![1.0]
        }
        fn workspace(&self) {}
        fn gradient(&self, p: &[f32], _d: GradientDraw, out: &mut [f32], _ws: &mut ()) {
            out[0] = p[0];
        }
        fn loss(&self, p: &[f32], _ws: &mut ()) -> f64 {
            0.5 * (p[0] as f64).powi(2)
        }
    }

    #[test]
    fn stale_gradients_are_computed_on_the_pulled_copy() {
        // The K-async trace of sim.rs (P = 3, K = 2) with η = 0.5 on ½w²:
        // update 1 (t=2): both gradients on w0 = 1: w1 = 1 − 0.5·(1+1)/2 = 0.5.
        // update 2 (t=3): w2's gradient on w0 = 1 (stale), w0's on w1 = 0.5:
        //   w2 = 0.5 − 0.5·(1 + 0.5)/2 = 0.125.
        // update 3 (t=4): w1's on w1 = 0.5, w0's on w2 = 0.125:
        //   w3 = 0.125 − 0.5·(0.5 + 0.125)/2 = −0.03125.
        let grid = [0.0, 2.0, 2.5, 3.5, 10.0];
        let mut ws = ();
        let mut tr = Training::new(
            &Half,
            &mut ws,
            3,
            TrainingSetup {
                eta: 0.5,
                staleness_aware: None,
                run_seed: 0,
                grid: &grid,
                log_updates: Some(1),
                staleness_buckets: 4,
                k_rule: None,
            },
        );
        simulate(
            3,
            Protocol::KAsync,
            &KSchedule::fixed(2),
            Stop::Time(4.5),
            &mut ScriptedDelays::new(vec![
                vec![1.0, 1.0, 1.0, 9.0],
                vec![2.0, 2.0, 9.0],
                vec![2.5, 10.0],
            ]),
            &mut tr,
        );
        tr.finish(4.5);
        assert_eq!(tr.params(), &[-0.03125]);
        let ls: Vec<f64> = tr.log.iter().map(|l| l.loss).collect();
        assert_eq!(ls, vec![0.125, 0.0078125, 0.00048828125]);
        assert_eq!(tr.log[1].staleness, vec![1, 0]);
        assert_eq!(tr.log[1].workers, vec![2, 0]);
        // Grid: at 0 and up to 2 (the update at t = 2 counts at g = 2), 2.5, 3.5; 10 > horizon.
        assert_eq!(tr.grid_updates, vec![0, 1, 1, 2]);
        assert_eq!(tr.grid_loss, vec![0.5, 0.125, 0.125, 0.0078125]);
        assert_eq!(tr.staleness_histogram, vec![4, 2, 0, 0]);
        assert_eq!(tr.staleness_max, 1);
    }

    #[test]
    fn staleness_aware_rate_shrinks_with_distance() {
        // Same trace, C = 0.1, η_max = 0.5. Update 1: fresh gradients, η = 0.5:
        // w1 = 0.5. Update 2: w2's gradient on w0 = 1 while w = 0.5: ‖Δ‖² = 0.25,
        // η = min(0.1/0.25, 0.5) = 0.4; w0's is fresh: 0.5.
        // w2 = 0.5 − (0.4·1 + 0.5·0.5)/2 = 0.175.
        let grid = [];
        let mut ws = ();
        let mut tr = Training::new(
            &Half,
            &mut ws,
            3,
            TrainingSetup {
                eta: 0.5,
                staleness_aware: Some(StalenessAware {
                    c: 0.1,
                    eta_max: 0.5,
                }),
                run_seed: 0,
                grid: &grid,
                log_updates: Some(0),
                staleness_buckets: 2,
                k_rule: None,
            },
        );
        simulate(
            3,
            Protocol::KAsync,
            &KSchedule::fixed(2),
            Stop::Updates(2),
            &mut ScriptedDelays::new(vec![
                vec![1.0, 1.0, 1.0, 9.0],
                vec![2.0, 2.0, 9.0],
                vec![2.5, 10.0],
            ]),
            &mut tr,
        );
        assert!((tr.params()[0] - 0.175).abs() < 1e-7, "{}", tr.params()[0]);
        assert_eq!(tr.log[1].rates.len(), 2);
        assert!((tr.log[1].rates[0] - 0.4).abs() < 1e-7);
        assert_eq!(tr.log[1].rates[1], 0.5);
        assert!(tr.log[1].loss.is_nan());
    }

    /// F(w) = ½ (a constant loss, zero gradient): the loss is flat at once.
    struct Flat;
    impl GradientModel for Flat {
        type Workspace = ();
        fn info(&self) -> GradientInfo {
            GradientInfo {
                name: "flat",
                parameters: 1,
                loss: "1/2".into(),
                batch_size: 1,
            }
        }
        fn dim(&self) -> usize {
            1
        }
        fn init_params(&self) -> Vec<f32> {
            vec![1.0]
        }
        fn workspace(&self) {}
        fn gradient(&self, _p: &[f32], _d: GradientDraw, out: &mut [f32], _ws: &mut ()) {
            out[0] = 0.0;
        }
        fn loss(&self, _p: &[f32], _ws: &mut ()) -> f64 {
            0.5
        }
    }

    #[test]
    fn the_rule_raises_k_from_the_next_event_on() {
        // K-async, P = 2, rule: start 1, ×2, max 2, window 1. t=1 w0 pushes
        // (loss 0.5: the first window) -> update {w0}; w0 again due at 2.
        // t=2 w1 (scheduled first) pushes: window 0.5 is not lower than 0.5,
        // K becomes 2, but this push was handled under K = 1 -> update {w1}.
        // t=2 w0 pushes: K = 2 now, it waits; t=4 w1 -> update {w0, w1}.
        let grid = [];
        let mut ws = ();
        let mut tr = Training::new(
            &Flat,
            &mut ws,
            2,
            TrainingSetup {
                eta: 0.5,
                staleness_aware: None,
                run_seed: 0,
                grid: &grid,
                log_updates: Some(0),
                staleness_buckets: 2,
                k_rule: Some(PlateauRule {
                    start: 1,
                    factor: 2,
                    max: 2,
                    window: 1,
                    tolerance: 0.0,
                }),
            },
        );
        simulate(
            2,
            Protocol::KAsync,
            &KSchedule::fixed(1),
            Stop::Updates(3),
            &mut ScriptedDelays::new(vec![vec![1.0; 5], vec![2.0; 5]]),
            &mut tr,
        );
        let workers: Vec<Vec<usize>> = tr.log.iter().map(|l| l.workers.clone()).collect();
        assert_eq!(workers, vec![vec![0], vec![1], vec![0, 1]]);
        assert_eq!(tr.log[2].time, 4.0);
        assert_eq!(
            tr.switches(),
            &[Switch {
                time: 2.0,
                from: 1,
                to: 2,
                observed: 2
            }]
        );
    }

    /// The update and the fold of a gradient give the portable bits at every level.
    #[test]
    fn update_kernels_give_the_same_bits_at_every_level() {
        use crate::simd::Level;
        let w: Vec<f32> = (0..103).map(|i| (i % 11) as f32 * 0.37 - 1.5).collect();
        let g: Vec<f32> = (0..103).map(|i| (i % 5) as f32 * -0.71 + 0.2).collect();
        let run = |level| {
            let mut sum = g.clone();
            crate::model::gradient::add_scaled_at(level, &mut sum, 0.3, &w);
            let folded = sum.clone();
            let mut next = vec![9.0f32; w.len()];
            step_at(level, &w, &mut sum, 3.0, &mut next);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            (bits(&folded), bits(&next), bits(&sum))
        };
        let want = run(Level::Portable);
        assert!(want.2.iter().all(|&b| b == 0), "the sum is cleared");
        for level in Level::supported() {
            assert_eq!(run(level), want, "{level:?}");
        }
    }
}
