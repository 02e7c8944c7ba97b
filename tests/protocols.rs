//! Statistical checks of the wall-clock protocol simulation against Dutta et
//! al. 2018's runtime results and the K-sync error floor, with fixed seeds and
//! tolerances derived from the trials' confidence intervals.

use scarsim::cluster::sim::{Handler, UpdateInfo};
use scarsim::cluster::training::{Training, TrainingSetup};
use scarsim::cluster::{Delay, KSchedule, Protocol, Stop, WorkerDelays, simulate};
use scarsim::model::gradient::GradientModel;
use scarsim::model::quadratic::{NoisyQuadratic, QuadraticConfig};
use scarsim::stats::Summary;
use scarsim::theory::dutta::{self, GradientTime};

/// Time per iteration after `warmup` updates over `updates` more, and mean staleness.
#[derive(Default)]
struct Probe {
    warmup: u64,
    t_warm: f64,
    staleness: (f64, u64),
}
impl Handler for Probe {
    fn update(&mut self, u: &UpdateInfo<'_>) {
        if u.version == self.warmup {
            self.t_warm = u.time;
        }
        if u.version > self.warmup {
            for g in u.gradients {
                self.staleness.0 += g.staleness as f64;
                self.staleness.1 += 1;
            }
        }
    }
}

/// (time per iteration, mean staleness) over `trials` runs.
fn measure(d: &Delay, p: Protocol, workers: usize, k: usize, trials: usize) -> (Summary, f64) {
    let (warmup, updates) = (50, 400);
    let mut times = Vec::new();
    let mut st = (0.0, 0u64);
    for t in 0..trials {
        let mut probe = Probe {
            warmup,
            ..Probe::default()
        };
        let s = simulate(
            workers,
            p,
            &KSchedule::fixed(k),
            Stop::Updates(warmup + updates),
            &mut WorkerDelays::new(d, None, 77, t as u64, workers),
            &mut probe,
        );
        times.push((s.end_time - probe.t_warm) / updates as f64);
        st.0 += probe.staleness.0;
        st.1 += probe.staleness.1;
    }
    (Summary::of(&times), st.0 / st.1 as f64)
}

/// |mean − value| within 4 standard errors (a fixed-seed check that a
/// correct simulation fails with probability ~6e-5).
fn assert_close(s: &Summary, value: f64, what: &str) {
    let se = s.std / (s.n as f64).sqrt();
    assert!(
        (s.mean - value).abs() <= 4.0 * se,
        "{what}: simulated {} ± {} (se), theory {value}",
        s.mean,
        se
    );
}

#[test]
fn exponential_runtimes_match_the_closed_forms() {
    let d = Delay::Exponential { rate: 2.0 };
    let x = GradientTime {
        compute: &d,
        shift: 0.0,
    };
    for (p, k) in [(4, 1), (4, 2), (6, 3), (8, 8)] {
        for proto in Protocol::ALL {
            let (s, stale) = measure(&d, proto, p, k, 60);
            let th = dutta::time_per_iteration(proto, &x, p, k);
            let exact = th.exact.expect("exponential delays have closed forms");
            assert_close(&s, exact, &format!("{} P={p} K={k}", proto.name()));
            let st = dutta::mean_staleness(proto, p, k);
            assert!(
                (stale - st).abs() < 0.02 * st.max(1.0),
                "staleness {} P={p} K={k}: {stale} vs {st}",
                proto.name()
            );
        }
    }
}

#[test]
fn shifted_exponential_runtimes_respect_the_renewal_results_and_bounds() {
    let d = Delay::ShiftedExponential {
        shift: 1.0,
        rate: 0.5,
    };
    let x = GradientTime {
        compute: &d,
        shift: 0.0,
    };
    let (p, k) = (8, 2);
    // K-sync: E[X_{K:P}] exactly; K-batch-async: K E[X]/P (renewal).
    for proto in [Protocol::KSync, Protocol::KBatchAsync] {
        let (s, _) = measure(&d, proto, p, k, 60);
        let exact = dutta::time_per_iteration(proto, &x, p, k).exact.unwrap();
        assert_close(&s, exact, proto.name());
    }
    // K-async: between K E[X]/P and E[X_{K:P}], and strictly faster than
    // K-sync (partial work is kept and the shifted exponential is NBU).
    let (asy, stale) = measure(&d, Protocol::KAsync, p, k, 60);
    let th = dutta::time_per_iteration(Protocol::KAsync, &x, p, k);
    assert!(asy.ci95_high >= th.lower.unwrap() && asy.ci95_low <= th.upper.unwrap());
    assert!(asy.ci95_high < th.upper.unwrap() * 0.9, "{asy:?} vs {th:?}");
    assert!((stale - 3.0).abs() < 0.02);
    // K-batch-sync: at most E[X_{K:P}].
    let (bs, _) = measure(&d, Protocol::KBatchSync, p, k, 60);
    let th = dutta::time_per_iteration(Protocol::KBatchSync, &x, p, k);
    assert!(bs.ci95_low <= th.upper.unwrap());
}

/// One quadratic training run; returns (grid losses, final floor estimate).
fn quadratic_run(
    q: &NoisyQuadratic,
    proto: Protocol,
    k: usize,
    trial: u64,
    grid: &[f64],
    horizon: f64,
    eta: f64,
) -> Vec<f64> {
    let d = Delay::ShiftedExponential {
        shift: 1.0,
        rate: 1.0,
    };
    #[allow(clippy::let_unit_value)] // the quadratic needs no buffers
    let mut ws = q.workspace();
    let mut tr = Training::new(
        q,
        &mut ws,
        8,
        TrainingSetup {
            eta,
            staleness_aware: None,
            run_seed: 1000 + trial,
            grid,
            log_updates: None,
            staleness_buckets: 8,
            k_rule: None,
        },
    );
    simulate(
        8,
        proto,
        &KSchedule::fixed(k),
        Stop::Time(horizon),
        &mut WorkerDelays::new(&d, None, 5, trial, 8),
        &mut tr,
    );
    tr.finish(horizon);
    tr.grid_loss.clone()
}

#[test]
fn k_sync_error_floor_matches_the_exact_stationary_loss() {
    let cfg = QuadraticConfig {
        dimension: 20,
        l: 1.0,
        c: 0.2,
        sigma2: 1.0,
        batch_size: 1,
        learning_rate: 0.1,
        init_distance: 1.0,
    };
    let q = NoisyQuadratic::new(&cfg);
    let horizon = 1500.0;
    let grid: Vec<f64> = (0..=150).map(|i| i as f64 * 10.0).collect();
    let k = 2;
    // Floor per trial: mean loss over the second half of the horizon.
    let floors: Vec<f64> = (0..40)
        .map(|t| {
            let l = quadratic_run(&q, Protocol::KSync, k, t, &grid, horizon, cfg.learning_rate);
            l[75..].iter().sum::<f64>() / l[75..].len() as f64
        })
        .collect();
    let s = Summary::of(&floors);
    let exact =
        dutta::quadratic_floor_exact(cfg.learning_rate, cfg.sigma2, k, 1, q.eigenvalues()).unwrap();
    assert_close(&s, exact, "K-sync floor");
    let bound = dutta::k_sync_floor_bound(cfg.learning_rate, cfg.l, cfg.c, cfg.sigma2, k, 1);
    assert!(s.ci95_high < bound);
}

#[test]
fn async_falls_faster_and_flattens_higher_than_sync() {
    // The paper's qualitative error–runtime trade-off on the noisy quadratic.
    let cfg = QuadraticConfig {
        dimension: 20,
        l: 1.0,
        c: 0.2,
        sigma2: 1.0,
        batch_size: 1,
        learning_rate: 0.05,
        init_distance: 2.0,
    };
    let q = NoisyQuadratic::new(&cfg);
    let grid: Vec<f64> = (0..=200).map(|i| i as f64 * 10.0).collect();
    let runs = |proto, k| -> Vec<Vec<f64>> {
        (0..20)
            .map(|t| quadratic_run(&q, proto, k, t, &grid, 2000.0, cfg.learning_rate))
            .collect()
    };
    let at = |rs: &[Vec<f64>], i: usize| Summary::of(&rs.iter().map(|r| r[i]).collect::<Vec<_>>());
    let floor = |rs: &[Vec<f64>]| {
        Summary::of(
            &rs.iter()
                .map(|r| r[150..].iter().sum::<f64>() / 51.0)
                .collect::<Vec<_>>(),
        )
    };
    let asy = runs(Protocol::KAsync, 1);
    let sync = runs(Protocol::KSync, 8);
    // At t = 20 async is far ahead ...
    assert!(at(&asy, 2).ci95_high < at(&sync, 2).ci95_low);
    // ... but its floor is higher.
    assert!(floor(&asy).ci95_low > floor(&sync).ci95_high);
}
