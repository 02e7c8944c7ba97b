//! Runs a fixed MLR workload for profiling under `perf stat` (cycles are far
//! less sensitive to other processes than wall time):
//! `cargo run --release --example mlr_kernel -- single|cohort [iterations]`.

use std::sync::Arc;

use scarsim::data::synthetic;
use scarsim::model::mlr::{Mlr, MlrConfig};
use scarsim::model::{IterCtx, Model};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("single");
    let iters: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let data = Arc::new(synthetic::mnist_like(1, 1.0));
    let m = Mlr::new(
        data,
        &MlrConfig {
            batch_size: 10_000,
            learning_rate: 1e-5,
        },
    );
    let mut ws = m.workspace();
    let t0 = std::time::Instant::now();
    match mode {
        "single" => {
            let mut s = m.init();
            for k in 0..iters {
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
        }
        _ => {
            let size = m.cohort_size();
            let mut st: Vec<_> = (0..size).map(|_| m.init()).collect();
            let active = vec![true; size];
            let mut out = vec![0.0; size];
            for k in 0..iters {
                let ctx = IterCtx {
                    iteration: k,
                    run_seed: 1,
                };
                m.metric_many(&st, &active, ctx, &mut ws, &mut out);
                m.step_many(&mut st, &active, ctx, &mut ws);
            }
        }
    }
    eprintln!(
        "{mode}: {iters} iterations in {:.3} s",
        t0.elapsed().as_secs_f64()
    );
}
