//! Per-iteration cost of MF (ALS) on the real-sized stand-ins: one ALS
//! iteration (all rows of L, then all columns of R) and one evaluation of the
//! metric, for MovieLens-like (p = 20) and Jester-like (p = 5) data.
//!
//! Run with `cargo bench --bench mf`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use scarsim::data::synthetic_ratings;
use scarsim::model::mf::{Mf, MfConfig};
use scarsim::model::{IterCtx, Model};

fn bench(c: &mut Criterion) {
    let cases = [
        (
            "movielens",
            synthetic_ratings::movielens_like(20181017, 1.0),
            20,
            0.1,
        ),
        (
            "jester",
            synthetic_ratings::jester_like(20181017, 1.0),
            5,
            10.0,
        ),
    ];
    let mut group = c.benchmark_group("mf");
    group.sample_size(20);
    for (name, data, factors, regularization) in cases {
        let model = Mf::new(
            Arc::new(data),
            &MfConfig {
                factors,
                regularization,
                init_seed: 1,
            },
        );
        let mut ws = model.workspace();
        let mut state = model.init();
        // Start from a trained state, as the trials do.
        for k in 0..5 {
            model.step(
                &mut state,
                IterCtx {
                    iteration: k,
                    run_seed: 0,
                },
                &mut ws,
            );
        }
        group.bench_function(format!("{name}/als_iteration"), |b| {
            b.iter(|| {
                let mut s = state.clone();
                model.step(
                    &mut s,
                    IterCtx {
                        iteration: 5,
                        run_seed: 0,
                    },
                    &mut ws,
                );
                black_box(s.r()[0])
            })
        });
        group.bench_function(format!("{name}/metric"), |b| {
            b.iter(|| black_box(model.metric(&state, &mut ws)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
