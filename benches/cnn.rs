//! Throughput of the CNN (single thread): images per second of a training
//! step (forward + backward + Adam on a batch of 64) and of the convergence
//! metric (forward only, over the evaluation subset).
//!
//! `cargo bench --bench cnn`; criterion prints the throughput in elements
//! (images) per second.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use scarsim::data::synthetic;
use scarsim::model::cnn::{Cnn, CnnConfig, CnnMetric, Partitioning};
use scarsim::model::{CnnSpec, IterCtx, Model};

fn model(partitioning: Partitioning, eval_examples: usize) -> Cnn {
    let data = Arc::new(synthetic::mnist_like(1, 0.05));
    Cnn::new(
        data,
        &CnnConfig {
            spec: CnnSpec::mnist(
                partitioning,
                64,
                1e-3,
                CnnMetric::Subset {
                    examples: eval_examples,
                },
            ),
            seed: 1,
        },
    )
    .expect("28x28 stand-in")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cnn");
    for (name, part) in [
        ("by-layer", Partitioning::ByLayer),
        ("by-shard", Partitioning::ByShard { shards: 8 }),
    ] {
        let m = model(part, 1000);
        let mut ws = m.workspace();
        let mut s = m.init();
        let mut k = 0;
        g.throughput(Throughput::Elements(m.batch_size() as u64));
        g.bench_function(format!("train_step_b64/{name}"), |b| {
            b.iter(|| {
                m.step(
                    &mut s,
                    IterCtx {
                        iteration: k,
                        run_seed: 7,
                    },
                    &mut ws,
                );
                k += 1;
            })
        });
    }
    let m = model(Partitioning::ByLayer, 1000);
    let mut ws = m.workspace();
    let s = m.init();
    g.throughput(Throughput::Elements(m.eval_examples() as u64));
    g.bench_function("metric_eval_1000", |b| {
        b.iter(|| black_box(m.metric(&s, &mut ws)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    // No criterion plots: with the tree's plotters features they need system fonts.
    config = Criterion::default().sample_size(20).without_plots();
    targets = bench
}
criterion_main!(benches);
