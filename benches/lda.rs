//! Throughput of the LDA collapsed Gibbs sampler (tokens per second) and the
//! cost of the metric and of rebuilding derived counts, on the 20 Newsgroups
//! stand-in (scale 0.1: about 1,900 documents and 2,900 words).
//!
//! `cargo bench --bench lda`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use scarsim::data::corpus::real_shape;
use scarsim::data::{DatasetName, lda_standin};
use scarsim::model::lda::{Lda, LdaConfig};
use scarsim::model::{IterCtx, Model};

/// CPU time this thread has run, in nanoseconds (Linux `schedstat`), so that
/// throughput can be measured on a machine shared with other jobs; `None`
/// where the file does not exist.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn model() -> Lda {
    let shape = real_shape(DatasetName::News20).unwrap();
    let corpus = Arc::new(lda_standin::generate(DatasetName::News20, &shape, 1, 0.1));
    Lda::new(
        corpus,
        &LdaConfig {
            topics: 20,
            alpha: 1.0,
            beta: 1.0,
            init_seed: 1,
        },
    )
}

fn bench(c: &mut Criterion) {
    let m = model();
    let tokens = m.corpus().total_tokens() as u64;
    let mut ws = m.workspace();
    let mut state = m.init();
    // Burn in so the counts look like a run near convergence.
    for k in 0..20 {
        m.step(
            &mut state,
            IterCtx {
                iteration: k,
                run_seed: 7,
            },
            &mut ws,
        );
    }
    let mut g = c.benchmark_group("lda");
    g.throughput(Throughput::Elements(tokens));
    g.sample_size(20);
    let mut k = 20;
    g.bench_function("gibbs_sweep_tokens", |b| {
        b.iter(|| {
            m.step(
                &mut state,
                IterCtx {
                    iteration: k,
                    run_seed: 7,
                },
                &mut ws,
            );
            k += 1;
        })
    });
    // The same sweep timed by the thread's CPU time instead of wall time
    // (on a loaded machine wall time also counts time spent descheduled).
    if thread_cpu_ns().is_some() {
        g.bench_function("gibbs_sweep_tokens_cpu_time", |b| {
            b.iter_custom(|iters| {
                let start = thread_cpu_ns().unwrap_or(0);
                for _ in 0..iters {
                    m.step(
                        &mut state,
                        IterCtx {
                            iteration: k,
                            run_seed: 7,
                        },
                        &mut ws,
                    );
                    k += 1;
                }
                std::time::Duration::from_nanos(thread_cpu_ns().unwrap_or(0) - start)
            })
        });
    }
    g.bench_function("metric_neg_log_likelihood", |b| {
        b.iter(|| black_box(m.metric(&state, &mut ws)))
    });
    let snap = m.snapshot(&state);
    g.bench_function("rebuild_derived_from_snapshot", |b| {
        b.iter(|| {
            let mut s = snap.clone();
            m.rebuild_derived(&mut s);
            black_box(s.topic_total[0])
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
