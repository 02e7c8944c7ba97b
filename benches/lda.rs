//! Throughput of the LDA collapsed Gibbs sampler (tokens per second of one
//! run, lane-tokens per second of a cohort) against the reference sweep it
//! replaced, and the cost of the metric and of rebuilding derived counts, on
//! the full-size 20 Newsgroups stand-in (18,805 documents, 28,857 words,
//! 2.2 M tokens: the real corpus's shape, so the counts fall out of the
//! caches as they do in the real runs).
//!
//! Every figure is the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`; wall
//! time where that clock does not exist), so that old and new can be compared on a
//! machine shared with other jobs.
//!
//! `cargo bench --bench lda`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group};
use scarsim::data::corpus::real_shape;
use scarsim::data::{DatasetName, lda_standin};
use scarsim::model::lda::{COHORT, LANES, Lda, LdaConfig, LdaState};
use scarsim::model::{IterCtx, Model};

/// CPU time this thread has run, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`),
/// or `None` where the clock is not available.
fn thread_cpu_ns() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid timespec for the call to fill.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        (rc == 0).then(|| t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
    }
    #[cfg(not(unix))]
    None
}

/// Times `iters` calls of `f` by the thread's CPU time.
fn cpu_time(iters: u64, mut f: impl FnMut()) -> Duration {
    let wall = Instant::now();
    let start = thread_cpu_ns();
    for _ in 0..iters {
        f();
    }
    match (start, thread_cpu_ns()) {
        (Some(a), Some(b)) => Duration::from_nanos(b - a),
        _ => wall.elapsed(),
    }
}

fn model() -> Lda {
    let shape = real_shape(DatasetName::News20).unwrap();
    let corpus = Arc::new(lda_standin::generate(
        DatasetName::News20,
        &shape,
        1,
        std::env::var("LDA_SCALE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1.0),
    ));
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

fn ctx(k: usize) -> IterCtx {
    IterCtx {
        iteration: k,
        run_seed: 7,
    }
}

/// `n` states after the burn-in, member m > 0 with every (m + 1)-th
/// document reset to x(0), as forked recovery trials differ.
fn members(m: &Lda, burned: &LdaState, n: usize) -> Vec<LdaState> {
    let x0 = m.init();
    (0..n)
        .map(|i| {
            let mut s = burned.clone();
            if i > 0 {
                for d in (0..m.block_count()).step_by(i + 1) {
                    m.copy_block(&x0, &mut s, d);
                }
                m.rebuild_derived(&mut s);
            }
            s
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let m = model();
    let tokens = m.corpus().total_tokens() as u64;
    let mut ws = m.workspace();
    let mut state = m.init();
    // Burn in so the counts look like a run on the steep part of its curve.
    for k in 0..10 {
        m.step(&mut state, ctx(k), &mut ws);
    }
    let mut g = c.benchmark_group("lda");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(tokens));
    let mut k = 10;
    let mut s = state.clone();
    g.bench_function("sweep_reference_tokens", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                m.step_reference(&mut s, ctx(k), &mut ws);
                k += 1;
            })
        })
    });
    let mut s = state.clone();
    g.bench_function("sweep_tokens", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                m.step(&mut s, ctx(k), &mut ws);
                k += 1;
            })
        })
    });
    for n in [LANES, COHORT] {
        let mut cohort = members(&m, &state, n);
        let active = vec![true; n];
        g.throughput(Throughput::Elements(tokens * n as u64));
        g.bench_function(format!("cohort_{n}_lane_tokens"), |b| {
            b.iter_custom(|iters| {
                cpu_time(iters, || {
                    m.step_many(&mut cohort, &active, ctx(k), &mut ws);
                    k += 1;
                })
            })
        });
    }
    g.throughput(Throughput::Elements(tokens));
    g.bench_function("metric_neg_log_likelihood", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                black_box(m.metric(&state, &mut ws));
            })
        })
    });
    let cohort = members(&m, &state, LANES);
    let active = vec![true; LANES];
    let mut out = vec![0.0; LANES];
    g.throughput(Throughput::Elements(tokens * LANES as u64));
    g.bench_function(format!("metric_many_{LANES}"), |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                m.metric_many(&cohort, &active, ctx(0), &mut ws, &mut out);
                black_box(&out);
            })
        })
    });
    g.throughput(Throughput::Elements(tokens));
    let snap = m.snapshot(&state);
    g.bench_function("rebuild_derived_from_snapshot", |b| {
        b.iter_custom(|iters| {
            cpu_time(iters, || {
                let mut s = snap.clone();
                m.rebuild_derived(&mut s);
                black_box(s.topic_total[0]);
            })
        })
    });
    g.finish();
}

/// `LDA_QUICK=1`: instead of criterion, the fastest of several calls of
/// each kernel by CPU time (a quick A/B figure on a noisy machine), as
/// millions of (lane-)tokens per second.
fn quick() {
    let m = model();
    let tokens = m.corpus().total_tokens() as f64;
    let mut ws = m.workspace();
    let mut state = m.init();
    for k in 0..10 {
        m.step(&mut state, ctx(k), &mut ws);
    }
    let reps = 15;
    let best = |f: &mut dyn FnMut()| {
        (0..reps)
            .map(|_| cpu_time(1, &mut *f).as_secs_f64())
            .fold(f64::INFINITY, f64::min)
    };
    let mut k = 10;
    let mut s = state.clone();
    let t = best(&mut || {
        m.step_reference(&mut s, ctx(k), &mut ws);
        k += 1;
    });
    println!("sweep_reference   {:8.2} M tokens/s", tokens / t / 1e6);
    let mut s = state.clone();
    let t = best(&mut || {
        m.step(&mut s, ctx(k), &mut ws);
        k += 1;
    });
    println!("sweep             {:8.2} M tokens/s", tokens / t / 1e6);
    for n in [LANES, COHORT] {
        let mut cohort = members(&m, &state, n);
        let active = vec![true; n];
        let t = best(&mut || {
            m.step_many(&mut cohort, &active, ctx(k), &mut ws);
            k += 1;
        });
        println!(
            "cohort_{n:<2}         {:8.2} M lane-tokens/s",
            tokens * n as f64 / t / 1e6
        );
    }
    let t = best(&mut || {
        black_box(m.metric(&state, &mut ws));
    });
    println!("metric            {:8.2} M tokens/s", tokens / t / 1e6);
    let cohort = members(&m, &state, LANES);
    let active = vec![true; LANES];
    let mut out = vec![0.0; LANES];
    let t = best(&mut || m.metric_many(&cohort, &active, ctx(0), &mut ws, &mut out));
    println!(
        "metric_many_{LANES}     {:8.2} M lane-tokens/s",
        tokens * LANES as f64 / t / 1e6
    );
}

criterion_group!(benches, bench);

fn main() {
    if std::env::var_os("LDA_QUICK").is_some() {
        quick();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
