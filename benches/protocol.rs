//! Simulated events per second of the wall-clock protocol simulation.
//!
//! `cargo bench --bench protocol` reports, per configuration, the time of one
//! run and (as criterion's throughput) the simulated events per second: an
//! event is one popped gradient arrival or K change. Runtime-only runs
//! measure the event loop itself; the quadratic run adds real gradients of a
//! 100-dimensional model in the loop.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use scarsim::cluster::training::{Training, TrainingSetup};
use scarsim::cluster::{Delay, KSchedule, NoModel, Protocol, Stop, WorkerDelays, simulate};
use scarsim::model::gradient::GradientModel;
use scarsim::model::quadratic::{NoisyQuadratic, QuadraticConfig};

fn runtime_only(c: &mut Criterion) {
    let d = Delay::ShiftedExponential {
        shift: 1.0,
        rate: 1.0,
    };
    let mut g = c.benchmark_group("protocol-runtime");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    for (proto, p, k) in [
        (Protocol::KSync, 32, 16),
        (Protocol::KBatchSync, 32, 16),
        (Protocol::KAsync, 32, 1),
        (Protocol::KBatchAsync, 32, 4),
        (Protocol::KAsync, 8, 2),
    ] {
        let run = || {
            simulate(
                p,
                proto,
                &KSchedule::fixed(k),
                Stop::Updates(2_000),
                &mut WorkerDelays::new(&d, None, 1, 0, p),
                &mut NoModel,
            )
        };
        g.throughput(Throughput::Elements(run().events));
        g.bench_function(format!("{} P={p} K={k}", proto.name()), |b| {
            b.iter(|| black_box(run()))
        });
    }
    g.finish();
}

fn with_quadratic(c: &mut Criterion) {
    let q = NoisyQuadratic::new(&QuadraticConfig {
        dimension: 100,
        l: 1.0,
        c: 0.2,
        sigma2: 1.0,
        batch_size: 1,
        learning_rate: 0.05,
        init_distance: 2.0,
    });
    let d = Delay::ShiftedExponential {
        shift: 1.0,
        rate: 1.0,
    };
    let grid: Vec<f64> = (0..=100).map(|i| i as f64 * 5.0).collect();
    #[allow(clippy::let_unit_value)] // the quadratic needs no buffers
    let mut ws = q.workspace();
    let mut run = || {
        let mut tr = Training::new(
            &q,
            &mut ws,
            8,
            TrainingSetup {
                eta: 0.05,
                staleness_aware: None,
                run_seed: 3,
                grid: &grid,
                log_updates: None,
                staleness_buckets: 33,
                k_rule: None,
            },
        );
        let s = simulate(
            8,
            Protocol::KAsync,
            &KSchedule::fixed(1),
            Stop::Time(500.0),
            &mut WorkerDelays::new(&d, None, 1, 0, 8),
            &mut tr,
        );
        tr.finish(500.0);
        s
    };
    let events = run().events;
    let mut g = c.benchmark_group("protocol-training");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(events));
    g.bench_function("k-async P=8 K=1 quadratic d=100", |b| {
        b.iter(|| black_box(run()))
    });
    g.finish();
}

criterion_group!(benches, runtime_only, with_quadratic);
criterion_main!(benches);
