//! Where each partial-checkpoint selector leaves MF's running checkpoint
//! relative to the live state x(T): distance on the rows of L, on the
//! columns of R, and on R weighted by each item's rating count (the part of
//! a perturbation that ALS's next half-step cannot erase: L is recomputed
//! from R, R is not); and, after a failure that loses a random half of the
//! blocks and partial recovery from that checkpoint, how much the squared
//! error one and five ALS iterations later exceeds the unperturbed run's.
//! Used to test why the priority selector does not beat round-robin on
//! MovieLens (docs/MODELS.md, "Matrix factorization").
//!
//! `cargo run --release --example mf_priority_probe -- <movielens|jester> [data dir]`
//!
//! Uses the bundled scenarios' p and λ, C = 8 and r = 1/8 (a checkpoint
//! every iteration), and the initialization seed 7 (not the scenario's).

use std::sync::Arc;

use rand::seq::SliceRandom;
use scarsim::data::{DataOptions, DatasetName, ratings};
use scarsim::model::mf::{Mf, MfConfig};
use scarsim::model::{IterCtx, Model};
use scarsim::policy::checkpoint::{CheckpointPolicy, RunningCheckpoint, Selector, WriteBudget};
use scarsim::rng::{Purpose, stream};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let name = match args.get(1).map(String::as_str) {
        Some("jester") => DatasetName::Jester,
        _ => DatasetName::Movielens,
    };
    let data_dir = args.get(2).cloned().unwrap_or_else(|| "data".into());
    let (factors, regularization) = match name {
        DatasetName::Jester => (5, 10.0),
        _ => (20, 0.1),
    };
    let opts = DataOptions {
        data_dir: data_dir.into(),
        ..DataOptions::default()
    };
    let data = Arc::new(ratings::load_ratings(name, &opts, 20181017)?);
    let model = Mf::new(
        data.clone(),
        &MfConfig {
            factors,
            regularization,
            init_seed: 7,
        },
    );
    let users = data.users;
    let mut state = model.init();
    let mut ws = model.workspace();
    let mut trajectory = vec![state.clone()];
    for iteration in 0..60 {
        let ctx = IterCtx {
            iteration,
            run_seed: 1,
        };
        model.step(&mut state, ctx, &mut ws);
        trajectory.push(state.clone());
    }
    let step = |s: &mut scarsim::model::mf::MfState, ws: &mut _, iteration| {
        let ctx = IterCtx {
            iteration,
            run_seed: 1,
        };
        model.step(s, ctx, ws);
    };
    println!(
        "dataset,T,selector,distance_L,distance_R,rating_weighted_distance_R,L_rows_saved_at_T-1,\
         excess_error_after_1,excess_error_after_5"
    );
    for t in [10, 20, 30, 45] {
        for selector in [Selector::Priority, Selector::Round, Selector::Random] {
            let policy = CheckpointPolicy {
                interval: 8,
                fraction: 0.125,
                selector,
                budget: WriteBudget::Parameters,
            };
            let mut rng = stream(1, Purpose::CheckpointSelection, 0, 0);
            let ckpt = RunningCheckpoint::replay(&model, &trajectory, &policy, t, &mut rng);
            let (mut on_l, mut on_r, mut weighted_r, mut recent_l) = (0.0, 0.0, 0.0, 0);
            for b in 0..model.block_count() {
                let d2 = model.block_distance(&trajectory[t], &ckpt.state, b).powi(2);
                if b < users {
                    on_l += d2;
                    recent_l += usize::from(ckpt.saved_at[b] + 1 >= t);
                } else {
                    on_r += d2;
                    weighted_r += d2 * data.item(b - users).0.len() as f64;
                }
            }
            // Lose a random half of the blocks (the same half for every
            // selector at this T), restore them from the checkpoint, train on.
            let mut order: Vec<usize> = (0..model.block_count()).collect();
            order.shuffle(&mut stream(2, Purpose::LostBlocks, t as u64, 0));
            let mut recovered = trajectory[t].clone();
            for &b in &order[..order.len() / 2] {
                model.copy_block(&ckpt.state, &mut recovered, b);
            }
            let mut excess = [0.0; 2];
            for k in 0..5 {
                step(&mut recovered, &mut ws, t + k);
                let gap =
                    model.squared_error(&recovered) - model.squared_error(&trajectory[t + k + 1]);
                match k {
                    0 => excess[0] = gap,
                    4 => excess[1] = gap,
                    _ => {}
                }
            }
            println!(
                "{name},{t},{},{:.3},{:.3},{:.3},{recent_l},{:.1},{:.1}",
                selector.name(),
                on_l.sqrt(),
                on_r.sqrt(),
                weighted_r.sqrt(),
                excess[0],
                excess[1]
            );
        }
    }
    Ok(())
}
