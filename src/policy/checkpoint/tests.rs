use super::*;
use crate::model::{IterCtx, ModelInfo};
use crate::rng::{Purpose, stream};

/// A toy model: n scalar blocks; each step adds (k+1)·(b+1) to block b.
pub(crate) struct Toy(pub usize);
impl Model for Toy {
    type State = Vec<f64>;
    type Workspace = ();
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: "toy",
            blocks: self.0,
            parameters: self.0,
            block_description: "one scalar".into(),
            metric: "sum",
        }
    }
    fn block_count(&self) -> usize {
        self.0
    }
    fn init(&self) -> Vec<f64> {
        vec![0.0; self.0]
    }
    fn workspace(&self) {}
    fn metric(&self, s: &Vec<f64>, _: &mut ()) -> f64 {
        s.iter().sum()
    }
    fn step(&self, s: &mut Vec<f64>, ctx: IterCtx, _: &mut ()) {
        for (b, v) in s.iter_mut().enumerate() {
            *v += ((ctx.iteration + 1) * (b + 1)) as f64;
        }
    }
    fn copy_block(&self, src: &Vec<f64>, dst: &mut Vec<f64>, b: usize) {
        dst[b] = src[b];
    }
    fn block_distance(&self, a: &Vec<f64>, b: &Vec<f64>, blk: usize) -> f64 {
        (a[blk] - b[blk]).abs()
    }
}

fn trajectory(m: &Toy, len: usize) -> Vec<Vec<f64>> {
    let mut s = m.init();
    let mut out = vec![s.clone()];
    for k in 0..len {
        m.step(
            &mut s,
            IterCtx {
                iteration: k,
                run_seed: 0,
            },
            &mut (),
        );
        out.push(s.clone());
    }
    out
}

#[test]
fn periods_and_counts() {
    let p = CheckpointPolicy {
        interval: 8,
        fraction: 0.125,
        selector: Selector::Priority,
        budget: WriteBudget::Blocks,
    };
    assert_eq!(p.period(), 1);
    assert!(p.period_is_whole());
    assert_eq!(p.blocks_per_checkpoint(54), 7);
    assert_eq!(p.blocks_per_checkpoint(784), 98);
    let bad = CheckpointPolicy {
        interval: 4,
        fraction: 0.125,
        ..p
    };
    assert!(!bad.period_is_whole());
    let full = CheckpointPolicy {
        interval: 8,
        fraction: 1.0,
        ..p
    };
    assert_eq!(full.last_before(8), 0);
    assert_eq!(full.last_before(9), 8);
    assert_eq!(full.last_before(17), 16);
}

#[test]
fn full_checkpoint_is_the_state_at_the_last_checkpoint() {
    let m = Toy(4);
    let traj = trajectory(&m, 20);
    let p = CheckpointPolicy {
        interval: 8,
        fraction: 1.0,
        selector: Selector::Round,
        budget: WriteBudget::Parameters,
    };
    let mut rng = stream(0, Purpose::CheckpointSelection, 0, 0);
    let c = RunningCheckpoint::replay(&m, &traj, &p, 13, &mut rng);
    assert_eq!(c.state, traj[8]);
    assert_eq!(c.saved_at, vec![8; 4]);
}

#[test]
fn round_robin_and_priority_by_hand() {
    let m = Toy(4);
    let traj = trajectory(&m, 10);
    let mut rng = stream(0, Purpose::CheckpointSelection, 0, 0);
    // Half the blocks every 2 iterations (C = 4, r = 1/2); failure at 5:
    // checkpoints at 2 and 4.
    let round = CheckpointPolicy {
        interval: 4,
        fraction: 0.5,
        selector: Selector::Round,
        budget: WriteBudget::Parameters,
    };
    let c = RunningCheckpoint::replay(&m, &traj, &round, 5, &mut rng);
    assert_eq!(c.saved_at, vec![2, 2, 4, 4]);
    assert_eq!(
        c.state,
        vec![traj[2][0], traj[2][1], traj[4][2], traj[4][3]]
    );
    // Priority: block b grows ∝ (b+1), so blocks 2 and 3 always moved most.
    let prio = CheckpointPolicy {
        selector: Selector::Priority,
        ..round
    };
    let c = RunningCheckpoint::replay(&m, &traj, &prio, 5, &mut rng);
    assert_eq!(c.saved_at, vec![0, 0, 4, 4]);
}

/// A [`Restoration`](crate::policy::Restoration) rebuilds from the
/// trajectory exactly the state and outcome `apply` gives from the
/// replayed checkpoint; before the first checkpoint every selector and
/// fraction restores x(0)'s blocks, so their restorations are equal.
#[test]
fn a_restoration_rebuilds_what_recovery_applies() {
    use crate::policy::RecoveryPolicy;
    let m = Toy(8);
    let traj = trajectory(&m, 40);
    let lost = [1, 4, 5];
    let mut before_first = Vec::new();
    for selector in [Selector::Round, Selector::Priority, Selector::Random] {
        for fraction in [1.0, 0.5, 0.25] {
            let p = CheckpointPolicy {
                interval: 8,
                fraction,
                selector,
                budget: WriteBudget::Parameters,
            };
            for t in [1, 2, 3, 9, 17, 30] {
                for recovery in [RecoveryPolicy::Full, RecoveryPolicy::Partial] {
                    let mut rng = stream(3, Purpose::CheckpointSelection, t as u64, 0);
                    let c = RunningCheckpoint::replay(&m, &traj, &p, t, &mut rng);
                    let mut applied = traj[t].clone();
                    let outcome = recovery.apply(&m, &mut applied, &c, &lost, t);
                    let r = recovery.restoration(&m, &c, &traj[t], &lost, t);
                    let mut rebuilt = traj[t].clone();
                    r.restore(&m, &traj, &mut rebuilt);
                    let at = format!("{selector:?} r {fraction} t {t} {recovery:?}");
                    assert_eq!(rebuilt, applied, "{at}");
                    assert_eq!(r.outcome, outcome, "{at}");
                    if t <= p.period() && recovery == RecoveryPolicy::Partial {
                        before_first.push((t, r));
                    }
                }
            }
        }
    }
    for t in [1, 2] {
        let same: Vec<_> = before_first.iter().filter(|(u, _)| *u == t).collect();
        assert_eq!(same.len(), 9, "t {t}");
        assert!(same.iter().all(|(_, r)| r.blocks == same[0].1.blocks));
        assert_eq!(same[0].1.blocks, vec![(1, 0), (4, 0), (5, 0)]);
    }
    // Later, the selectors part: round robin and priority restore
    // different iterations at r = 1/2, t = 17.
    let at = |selector| {
        let p = CheckpointPolicy {
            interval: 8,
            fraction: 0.5,
            selector,
            budget: WriteBudget::Parameters,
        };
        let mut rng = stream(3, Purpose::CheckpointSelection, 17, 0);
        let c = RunningCheckpoint::replay(&m, &traj, &p, 17, &mut rng);
        RecoveryPolicy::Partial.restoration(&m, &c, &traj[17], &lost, 17)
    };
    assert_ne!(at(Selector::Round).blocks, at(Selector::Priority).blocks);
}

#[test]
fn random_selects_distinct_blocks() {
    let m = Toy(10);
    let traj = trajectory(&m, 3);
    let mut sel = SelectorState::new(&m);
    let mut rng = stream(5, Purpose::CheckpointSelection, 0, 0);
    let p = CheckpointPolicy {
        interval: 10,
        fraction: 0.4,
        selector: Selector::Random,
        budget: WriteBudget::Blocks,
    };
    let chosen = sel.select(&m, &p, &traj[1], &traj[0], &mut rng).to_vec();
    assert_eq!(chosen.len(), 4);
    assert!(chosen.windows(2).all(|w| w[0] < w[1]));
}

/// The toy with blocks of the given sizes (parameters per block).
struct Sized(Toy, Vec<usize>);
impl Model for Sized {
    type State = Vec<f64>;
    type Workspace = ();
    fn info(&self) -> ModelInfo {
        self.0.info()
    }
    fn block_count(&self) -> usize {
        self.0.block_count()
    }
    fn init(&self) -> Vec<f64> {
        self.0.init()
    }
    fn workspace(&self) {}
    fn metric(&self, s: &Vec<f64>, ws: &mut ()) -> f64 {
        self.0.metric(s, ws)
    }
    fn step(&self, s: &mut Vec<f64>, ctx: IterCtx, ws: &mut ()) {
        self.0.step(s, ctx, ws)
    }
    fn copy_block(&self, src: &Vec<f64>, dst: &mut Vec<f64>, b: usize) {
        self.0.copy_block(src, dst, b)
    }
    fn block_distance(&self, a: &Vec<f64>, b: &Vec<f64>, blk: usize) -> f64 {
        self.0.block_distance(a, b, blk)
    }
    fn block_params(&self, block: usize) -> usize {
        self.1[block]
    }
}

/// The blocks each of `checkpoints` successive checkpoints writes along
/// `traj` (each saved into a running copy, as a replay does).
fn writes<M: Model<State = Vec<f64>>>(
    m: &M,
    p: &CheckpointPolicy,
    traj: &[Vec<f64>],
    checkpoints: usize,
) -> Vec<Vec<usize>> {
    let mut sel = SelectorState::new(m);
    let mut rng = stream(3, Purpose::CheckpointSelection, 0, 0);
    let mut saved = traj[0].clone();
    (1..=checkpoints)
        .map(|k| {
            let chosen = sel.select(m, p, &traj[k], &saved, &mut rng).to_vec();
            for &b in &chosen {
                m.copy_block(&traj[k], &mut saved, b);
            }
            chosen
        })
        .collect()
}

#[test]
fn parameter_budget_is_the_block_count_when_blocks_are_equal_and_r_n_is_whole() {
    let m = Toy(16);
    let traj = trajectory(&m, 12);
    for selector in [Selector::Priority, Selector::Round, Selector::Random] {
        let blocks = CheckpointPolicy {
            interval: 8,
            fraction: 0.125,
            selector,
            budget: WriteBudget::Blocks,
        };
        let params = CheckpointPolicy {
            budget: WriteBudget::Parameters,
            ..blocks
        };
        assert_eq!(
            writes(&m, &blocks, &traj, 12),
            writes(&m, &params, &traj, 12)
        );
    }
    // r·n = 2.5: the half block is carried, 2 and 3 blocks alternate, so
    // every C = 4 checkpoints (4 iterations at r = 1/4) write 10 blocks.
    let m = Toy(10);
    let p = CheckpointPolicy {
        interval: 4,
        fraction: 0.25,
        selector: Selector::Round,
        budget: WriteBudget::Parameters,
    };
    let counts: Vec<usize> = writes(&m, &p, &trajectory(&m, 8), 8)
        .iter()
        .map(Vec::len)
        .collect();
    assert_eq!(counts, vec![2, 3, 2, 3, 2, 3, 2, 3]);
    let b = CheckpointPolicy {
        budget: WriteBudget::Blocks,
        ..p
    };
    assert!(
        writes(&m, &b, &trajectory(&m, 8), 8)
            .iter()
            .all(|w| w.len() == 3)
    );
}

#[test]
fn parameter_budget_writes_a_full_checkpoints_parameters_per_interval() {
    // One big block (like the CNN's fc1, 69% of the parameters) and small ones.
    let sizes = vec![69, 5, 5, 5, 4, 4, 4, 2, 1, 1];
    let total: usize = sizes.iter().sum();
    let m = Sized(Toy(10), sizes.clone());
    let traj = trajectory(&m.0, 64);
    for selector in [Selector::Priority, Selector::Round, Selector::Random] {
        let p = CheckpointPolicy {
            interval: 8,
            fraction: 0.125,
            selector,
            budget: WriteBudget::Parameters,
        };
        let w = writes(&m, &p, &traj, 64);
        let mut written = 0;
        for (i, chosen) in w.iter().enumerate() {
            written += chosen.iter().map(|&b| sizes[b]).sum::<usize>();
            // Never more than the credit earned so far.
            assert!(
                written * 8 <= (i + 1) * total,
                "{selector:?} {i}: {written}"
            );
        }
        // 64 checkpoints at r = 1/8 earn 8 full checkpoints; at most the
        // largest block's worth is still unspent.
        assert!(written + 69 >= 8 * total, "{selector:?}: {written}");
        // Round and random write the big block too (it waits for credit
        // and is not starved by the small ones); priority writes it only
        // once its change per parameter ranks first, which in this toy
        // (its parameters move least) takes longer than 64 checkpoints.
        if selector != Selector::Priority {
            assert!(w.iter().any(|c| c.contains(&0)), "{selector:?}");
        }
    }
    // Counting blocks instead writes ⌈1.25⌉ = 2 blocks per checkpoint.
    let b = CheckpointPolicy {
        interval: 8,
        fraction: 0.125,
        selector: Selector::Priority,
        budget: WriteBudget::Blocks,
    };
    let w = writes(&m, &b, &traj, 8);
    assert!(w.iter().all(|c| c.len() == 2));
    // Priority with the credit ranks by d²/size: the toy's block b moves
    // by ∝ b + 1, so at the first checkpoint the scores are
    // (b+1)²/size_b: 9 (100), 8 (81), 7 (32), 6 (12.25), 5 (9), 4 (6.25),
    // 3 (3.2), 2 (1.8), 1 (0.8), 0 (1/69); blocks 9, 8, 7, 6 and 5 take 12
    // of the 12.5 parameters earned and block 4 does not fit.
    let p = CheckpointPolicy {
        budget: WriteBudget::Parameters,
        ..b
    };
    let w = writes(&m, &p, &traj, 8);
    assert_eq!(w[0], vec![5, 6, 7, 8, 9]);
}
