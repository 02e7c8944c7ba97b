//! Benchmarks of the SCAR trial engine on the MNIST stand-in.
//!
//! - `mlr_iteration`: one MLR iteration (full-data metric + minibatch step)
//!   on the full-size MNIST stand-in; reports achieved GFLOP/s of the
//!   forward pass as a throughput.
//! - `trials_fork_vs_rerun`: trials of one point of scar-partial-mlr-mnist
//!   (lost fraction 1/4) on a reduced stand-in, forking from the unperturbed
//!   run vs re-running each trial's prefix from iteration 0.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use indicatif::ProgressBar;
use scarsim::data::{DataCache, DataOptions, synthetic};
use scarsim::engine::ForkMode;
use scarsim::experiment::{self, RunOptions};
use scarsim::model::mlr::{Mlr, MlrConfig};
use scarsim::model::{IterCtx, Model};
use scarsim::scenario;

fn mlr_iteration(c: &mut Criterion) {
    let data = std::sync::Arc::new(synthetic::mnist_like(1, 1.0));
    let flops = 2.0 * (data.rows * data.features * data.classes) as f64;
    let m = Mlr::new(
        data,
        &MlrConfig {
            batch_size: 10_000,
            learning_rate: 1e-5,
        },
    );
    let mut ws = m.workspace();
    let mut s = m.init();
    for k in 0..5 {
        m.metric(&s, &mut ws);
        m.step(
            &mut s,
            IterCtx {
                iteration: k,
                run_seed: 1,
            },
            &mut ws,
        );
    }
    let mut g = c.benchmark_group("mlr");
    g.sample_size(10);
    g.throughput(Throughput::Elements(flops as u64));
    g.bench_function("metric_full_forward_60000x784x10", |b| {
        b.iter(|| black_box(m.metric(&s, &mut ws)))
    });
    g.bench_function("iteration_metric_plus_step", |b| {
        b.iter(|| {
            let mut t = s.clone();
            m.metric(&t, &mut ws);
            m.step(
                &mut t,
                IterCtx {
                    iteration: 5,
                    run_seed: 1,
                },
                &mut ws,
            );
            black_box(t)
        })
    });
    let size = m.cohort_size();
    let states: Vec<_> = (0..size).map(|_| s.clone()).collect();
    let active = vec![true; size];
    let mut out = vec![0.0; size];
    g.throughput(Throughput::Elements((flops * size as f64) as u64));
    g.bench_function(format!("cohort_{size}_metric_plus_step"), |b| {
        b.iter(|| {
            let mut st = states.clone();
            let ctx = IterCtx {
                iteration: 5,
                run_seed: 1,
            };
            m.metric_many(&st, &active, ctx, &mut ws, &mut out);
            m.step_many(&mut st, &active, ctx, &mut ws);
            black_box(st)
        })
    });
    g.finish();
}

/// Options for a one-thread run on the stand-ins at `scale`.
fn stand_in_options(scale: f64, fork_mode: ForkMode, share_identical_trials: bool) -> RunOptions {
    RunOptions {
        data: DataOptions {
            data_dir: "data".into(),
            synthetic: true,
            synthetic_scale: scale,
        },
        out_dir: std::env::temp_dir(),
        threads: 1,
        fork_mode,
        certify_metric: true,
        share_identical_trials,
        shared_outcomes: None,
    }
}

fn trials(c: &mut Criterion) {
    let text = scenario::bundled::find("scar-partial-mlr-mnist").unwrap();
    let mut sc = scenario::parse(text, "bench").unwrap();
    sc.override_trials_and_seed(Some(16), None).unwrap();
    let scenario::Scenario::Recovery(r) = &mut sc else {
        unreachable!("a recovery scenario")
    };
    r.sweep.as_mut().unwrap().values = vec![0.25];
    r.series.retain(|s| s.name == "partial");
    let cache = DataCache::new();
    let mut g = c.benchmark_group("trials_16_partial_quarter_scale_0.1");
    g.sample_size(10);
    g.throughput(Throughput::Elements(16));
    for (name, mode) in [("fork", ForkMode::Fork), ("rerun", ForkMode::Rerun)] {
        let opts = stand_in_options(0.1, mode, true);
        bench_one_thread(&mut g, name, &sc, &opts, &cache);
    }
    g.finish();
}

/// Trials with identical inputs computed once and shared, against running
/// every trial: the full MF lost-fraction sweep (full recovery at five lost
/// fractions shares one trial per failure iteration).
fn shared_trials(c: &mut Criterion) {
    let text = scenario::bundled::find("scar-partial-mf-movielens").unwrap();
    let mut sc = scenario::parse(text, "bench").unwrap();
    sc.override_trials_and_seed(Some(10), None).unwrap();
    let cache = DataCache::new();
    let mut g = c.benchmark_group("mf_partial_sweep_10_trials_scale_0.25");
    g.sample_size(10);
    for (name, share) in [("shared", true), ("each", false)] {
        let opts = stand_in_options(0.25, ForkMode::Fork, share);
        bench_one_thread(&mut g, name, &sc, &opts, &cache);
    }
    g.finish();
}

/// Benchmarks one whole run of `sc` on a one-thread pool.
fn bench_one_thread(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    sc: &scenario::Scenario,
    opts: &RunOptions,
    cache: &DataCache,
) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    g.bench_function(name, |b| {
        b.iter(|| {
            pool.install(|| {
                black_box(experiment::run(sc, opts, cache, &ProgressBar::hidden()).unwrap())
            })
        })
    });
}

criterion_group!(benches, mlr_iteration, trials, shared_trials);
criterion_main!(benches);
