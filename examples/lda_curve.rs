//! Prints the unperturbed LDA curve on a corpus with both parts of the
//! collapsed log-likelihood, for calibrating convergence criteria.
//!
//! `cargo run --release --example lda_curve -- <20news|reuters> <data dir | synthetic:SCALE> [iterations] [alpha] [beta]`

use std::sync::Arc;
use std::time::Instant;

use scarsim::data::{DataOptions, DatasetName, corpus};
use scarsim::model::lda::{Lda, LdaConfig};
use scarsim::model::{IterCtx, Model};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let name = match args.get(1).map(String::as_str) {
        Some("reuters") => DatasetName::Reuters,
        _ => DatasetName::News20,
    };
    let src = args.get(2).cloned().unwrap_or_else(|| "data".into());
    let iters: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
    let alpha: f64 = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let beta: f64 = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let opts = match src.strip_prefix("synthetic:") {
        Some(scale) => DataOptions {
            synthetic: true,
            synthetic_scale: scale.parse()?,
            ..DataOptions::default()
        },
        None => DataOptions {
            data_dir: src.into(),
            ..DataOptions::default()
        },
    };
    let c = Arc::new(corpus::load_corpus(name, &opts, 20181017)?);
    println!("# {name}: {}", c.describe());
    let n = c.total_tokens() as f64;
    let m = Lda::new(
        c,
        &LdaConfig {
            topics: 20,
            alpha,
            beta,
            init_seed: 20181017,
        },
    );
    let mut ws = m.workspace();
    let mut s = m.init();
    println!("iteration,neg_log_p_w_given_z,neg_log_p_z,neg_log_p_wz,per_token,seconds");
    let started = Instant::now();
    for k in 0..=iters {
        let (w, z) = m.log_likelihood_parts(&s);
        println!(
            "{k},{:.6e},{:.6e},{:.6e},{:.4},{:.2}",
            -w,
            -z,
            -(w + z),
            -(w + z) / n,
            started.elapsed().as_secs_f64()
        );
        if k < iters {
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
    Ok(())
}
