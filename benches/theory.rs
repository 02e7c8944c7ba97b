//! Throughput of the iteration-cost experiments: a whole QP perturbation
//! scenario end to end (Figure 3's 1,000-trial scenarios must stay fast),
//! and one evaluation of Theorem 1's bound.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use indicatif::ProgressBar;
use scarsim::data::{DataCache, DataOptions};
use scarsim::engine::ForkMode;
use scarsim::experiment::{self, RunOptions};
use scarsim::scenario::{self, bundled};
use scarsim::theory::DeltaT;

fn qp_scenario(c: &mut Criterion) {
    let text = bundled::find("scar-bound-qp-single")
        .unwrap()
        .replace("trials = 1000", "trials = 200");
    let sc = scenario::parse(&text, "bench").unwrap();
    let opts = RunOptions {
        data: DataOptions {
            data_dir: "data".into(),
            synthetic: true,
            synthetic_scale: 1.0,
        },
        out_dir: std::env::temp_dir(),
        threads: 1,
        fork_mode: ForkMode::Fork,
        certify_metric: true,
        share_identical_trials: true,
        shared_outcomes: None,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    c.bench_function("qp_single_400_trials_1_thread", |b| {
        b.iter(|| {
            pool.install(|| {
                experiment::run(&sc, &opts, &DataCache::new(), &ProgressBar::hidden()).unwrap()
            })
        })
    });
}

fn bound(c: &mut Criterion) {
    c.bench_function("theorem_1_bound", |b| {
        b.iter(|| DeltaT::of(black_box(0.99), [(black_box(500), black_box(0.1))]).bound(2.0))
    });
}

criterion_group!(benches, qp_scenario, bound);
criterion_main!(benches);
