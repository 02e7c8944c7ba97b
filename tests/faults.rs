//! PS failures in wall-clock time: hand-traced tiny timelines for every
//! strategy (who holds which parameters when, what is lost, what is
//! replayed), the SCAR §5.5 time split, Daly's formula against simulation,
//! and the `faults` scenarios end to end.

use crate::common;

use common::{assert_sharing_changes_no_byte, scarsim, stderr, tmpdir};
use scarsim::cluster::sim::ScriptedDelays;
use scarsim::faults::overhead::{IterationCosts, IterationFailure, run_iterations};
use scarsim::faults::{CheckpointCost, PsRun, PsSetup, Replication, RestoreFrom, Strategy, run_ps};
use scarsim::model::gradient::{GradientDraw, GradientInfo, GradientModel};
use scarsim::model::{IterCtx, Model, ModelInfo};
use scarsim::policy::failure::Outage;
use scarsim::policy::{CheckpointPolicy, RecoveryPolicy, Selector, WriteBudget};
use scarsim::rng::{Purpose, stream};
use scarsim::theory::daly::{self, simulate_checkpoint_restart};

/// Every applied gradient adds 1 to each coordinate (η = 1, gradient −1), so
/// a coordinate's value counts the updates it holds. Loss = −Σ coordinates.
struct Counter;

impl GradientModel for Counter {
    type Workspace = ();
    fn info(&self) -> GradientInfo {
        GradientInfo {
            name: "counter",
            parameters: 2,
            loss: "-sum".into(),
            batch_size: 1,
        }
    }
    fn dim(&self) -> usize {
        2
    }
    fn init_params(&self) -> Vec<f32> {
        vec![0.0, 0.0]
    }
    fn workspace(&self) {}
    fn gradient(&self, _p: &[f32], _d: GradientDraw, out: &mut [f32], _ws: &mut ()) {
        out.fill(-1.0);
    }
    fn loss(&self, p: &[f32], _ws: &mut ()) -> f64 {
        -(p[0] as f64 + p[1] as f64)
    }
}

fn grid() -> Vec<f64> {
    (0..=10).map(f64::from).collect()
}

/// One worker taking exactly 1 s per gradient; a checkpoint every 2.5 s
/// (SCAR: every r·2.5 s); detection 0.5 s, restore 1 s, no spare node.
fn run(strategy: Strategy, ps_nodes: usize, ck: CheckpointCost, outages: &[Outage]) -> PsRun {
    run_join(strategy, ps_nodes, ck, outages, f64::INFINITY)
}

pub(crate) fn run_join(
    strategy: Strategy,
    ps_nodes: usize,
    ck: CheckpointCost,
    outages: &[Outage],
    join: f64,
) -> PsRun {
    let grid = grid();
    let placement: Vec<usize> = (0..2).map(|b| b % ps_nodes).collect();
    let setup = PsSetup {
        workers: 1,
        ps_nodes,
        strategy,
        checkpoint: ck,
        detection: 0.5,
        restart: 1.0,
        join,
        eta: 1.0,
        run_seed: 0,
        grid: &grid,
        horizon: 10.0,
        outages,
        placement: &placement,
    };
    let mut delays = ScriptedDelays::new(vec![vec![1.0; 40]]);
    run_ps(&Counter, &mut (), &mut delays, &setup)
}

pub(crate) fn sync_ck() -> CheckpointCost {
    CheckpointCost {
        interval: 2.5,
        write_time: 0.0,
        cache_time: 0.0,
        asynchronous: false,
    }
}

pub(crate) const KILL: [Outage; 1] = [Outage {
    node: 0,
    down: 4.5,
    up: 6.0,
}];

fn loss(run: &PsRun) -> Vec<f64> {
    run.grid_loss.clone()
}

#[test]
fn checkpoint_restart_rolls_everything_back() {
    // Updates at t = 1..4 (value 4). Checkpoint at 2.5 holds 2. Kill at 4.5:
    // the push at 5 is lost; detected at 5; the node is back at 6, restored
    // at 7 to 2 (the 2 updates of 3 and 4 are lost and redone); updates at
    // 8, 9, 10 give 5. During the outage the curve shows the rollback target 2.
    let r = run(Strategy::CheckpointRestart, 1, sync_ck(), &KILL);
    let v = |x: f64| -2.0 * x;
    assert_eq!(
        loss(&r),
        [0., 1., 2., 3., 4., 2., 2., 2., 3., 4., 5.].map(v).to_vec()
    );
    assert_eq!(r.applied, 7);
    assert_eq!(r.discarded, 1);
    assert_eq!(r.queued, 0);
    // Checkpoints at 2.5, 7.5 and 10; the one at 5 is skipped (PS down).
    assert_eq!((r.checkpoints, r.checkpoints_skipped), (3, 1));
    assert_eq!(r.incidents.len(), 1);
    let i = r.incidents[0];
    assert_eq!(
        (i.failed, i.recovered, i.lost, i.restored_blocks),
        (4.5, 7.0, true, 2)
    );
    // Restart: unavailable 4.5..7; rework: both blocks were saved at 2.5.
    assert_eq!(r.split.restart, 2.5);
    assert_eq!(r.split.rework, 2.0);
    assert_eq!(r.split.dump, 0.0);
    assert_eq!(r.split.solve, 5.5);
}

#[test]
fn a_global_rollback_waits_for_every_lost_shard() {
    // Two shards, both lost: node 0 at 4.5 (back at 6, restored at 7), node 1
    // at 5 (back at 8, restored at 9). The rollback to the checkpoint (2)
    // happens once, at 9, when the PS is whole again; the worker resumes
    // then and pushes at 10.
    let outages = [
        KILL[0],
        Outage {
            node: 1,
            down: 5.0,
            up: 8.0,
        },
    ];
    let r = run(Strategy::CheckpointRestart, 2, sync_ck(), &outages);
    let v = |x: f64| -2.0 * x;
    assert_eq!(
        loss(&r),
        [0., 1., 2., 3., 4., 2., 2., 2., 2., 2., 3.].map(v).to_vec()
    );
    let rec: Vec<f64> = r.incidents.iter().map(|i| i.recovered).collect();
    assert_eq!(rec, vec![7.0, 9.0]);
    assert_eq!(r.split.restart, 9.0 - 4.5);
    assert_eq!(r.incidents[1].restored_blocks, 2);
}

#[test]
fn a_replacement_node_joins_when_the_failed_one_never_returns() {
    // The PS node never comes back; a replacement joins 1 s after detection
    // (5 → 6) and is restored by 7: the same timeline as the node returning at 6.
    let gone = [Outage {
        node: 0,
        down: 4.5,
        up: f64::INFINITY,
    }];
    let r = run_join(Strategy::CheckpointRestart, 1, sync_ck(), &gone, 1.0);
    let v = |x: f64| -2.0 * x;
    assert_eq!(
        loss(&r),
        [0., 1., 2., 3., 4., 2., 2., 2., 3., 4., 5.].map(v).to_vec()
    );
    assert_eq!(r.incidents[0].recovered, 7.0);
    // Without a spare node the PS stays down to the horizon.
    let r = run(Strategy::CheckpointRestart, 1, sync_ck(), &gone);
    assert!(r.incidents[0].recovered.is_nan());
    assert_eq!(r.split.restart, 10.0 - 4.5);
    assert_eq!(r.applied, 4);
}

#[test]
fn stateless_ps_queues_through_the_outage_and_applies_the_queue() {
    // As above, but the worker keeps computing on its last pulled parameters
    // (value 4): gradients at 5 and 6 are queued. Restored at 7 to the
    // checkpoint (2), the PS applies the queue: 2 > Q = 1 gradients, so with
    // the damped rate 0.5: 2 + 0.5·2 = 3. Then 7 → 4, 8 → 5, 9 → 6, 10 → 7.
    // During the outage the curve shows checkpoint + queue: at 5, one queued
    // (≤ Q: rate 1) → 3; at 6, two (rate 0.5) → 3.
    let s = Strategy::StatelessPs {
        damping_threshold: 1,
        damped_learning_rate: 0.5,
        restore_from: RestoreFrom::Checkpoint,
    };
    let r = run(s, 1, sync_ck(), &KILL);
    let v = |x: f64| -2.0 * x;
    assert_eq!(
        loss(&r),
        [0., 1., 2., 3., 4., 3., 3., 4., 5., 6., 7.].map(v).to_vec()
    );
    assert_eq!(r.queued, 2);
    assert_eq!(r.discarded, 0);
    assert_eq!(r.applied, 10);
    assert_eq!(r.incidents[0].queued_applied, 2);
    assert_eq!(r.incidents[0].recovered, 7.0);
}

#[test]
fn stateless_ps_restored_from_the_workers_loses_nothing() {
    // As above, but the returning PS takes the worker's copy (4, pulled at 4)
    // instead of the checkpoint (2): the curve is 4 + the queue: 5 at 5 and
    // 6; restored at 7 to 4 + 0.5·2 = 5, then 7 → 6, …, 10 → 9. No rework.
    let s = Strategy::StatelessPs {
        damping_threshold: 1,
        damped_learning_rate: 0.5,
        restore_from: RestoreFrom::Workers,
    };
    let r = run(s, 1, sync_ck(), &KILL);
    let v = |x: f64| -2.0 * x;
    assert_eq!(
        loss(&r),
        [0., 1., 2., 3., 4., 5., 5., 6., 7., 8., 9.].map(v).to_vec()
    );
    assert_eq!((r.queued, r.discarded, r.applied), (2, 0, 10));
    let i = r.incidents[0];
    assert_eq!(
        (i.recovered, i.restored_blocks, i.queued_applied),
        (7.0, 2, 2)
    );
    assert_eq!(r.split.rework, 0.0);
    assert_eq!(r.split.restart, 2.5);
}

#[test]
fn chain_replication_fails_over_without_loss() {
    // Chain of 2: node 0 (head) dies at 4.5; node 1 holds the same values
    // (4) and takes over at 5 after detection. The push arriving at 5 during
    // the takeover is lost; the worker pulls 4 at 5 and pushes at 6, 7, … 10.
    let s = Strategy::ChainReplication {
        chain: 2,
        hop_time: 0.0,
        replicate: Replication::EveryUpdate,
    };
    let r = run(s, 1, sync_ck(), &KILL);
    let v = |x: f64| -2.0 * x;
    assert_eq!(
        loss(&r),
        [0., 1., 2., 3., 4., 4., 5., 6., 7., 8., 9.].map(v).to_vec()
    );
    assert_eq!((r.applied, r.discarded), (9, 1));
    let i = r.incidents[0];
    assert_eq!((i.recovered, i.lost, i.restored_blocks), (5.0, false, 0));
    assert_eq!(r.split.rework, 0.0);
    assert_eq!(r.split.restart, 0.5);

    // Losing the whole chain falls back to the checkpoint, like checkpoint-restart.
    let both = [
        KILL[0],
        Outage {
            node: 1,
            down: 4.5,
            up: 6.0,
        },
    ];
    let r = run(s, 1, sync_ck(), &both);
    assert_eq!(
        loss(&r),
        [0., 1., 2., 3., 4., 2., 2., 2., 3., 4., 5.].map(v).to_vec()
    );
    assert!(r.incidents[0].lost);
}

#[test]
fn chain_fed_by_checkpoints_resumes_from_the_last_one() {
    // Cao et al.'s chain: node 1 holds only the checkpoint of 2.5 (value 2).
    // Head dies at 4.5; the push at 5 is lost; at 5 (detection) node 1 takes
    // over with 2, both blocks restored; the worker pulls 2 at 5 and pushes
    // at 6 … 10 (3 … 7). No replication wait: 1 s per update before the kill.
    let s = Strategy::ChainReplication {
        chain: 2,
        hop_time: 0.0,
        replicate: Replication::Checkpoint,
    };
    let r = run(s, 1, sync_ck(), &KILL);
    let v = |x: f64| -2.0 * x;
    assert_eq!(
        loss(&r),
        [0., 1., 2., 3., 4., 2., 3., 4., 5., 6., 7.].map(v).to_vec()
    );
    assert_eq!((r.applied, r.discarded), (9, 1));
    let i = r.incidents[0];
    assert_eq!((i.recovered, i.lost, i.restored_blocks), (5.0, false, 2));
    // Both blocks lose the 2 s since the checkpoint; unavailable 4.5..5.
    assert_eq!(r.split.rework, 2.0);
    assert_eq!(r.split.restart, 0.5);
}

#[test]
fn chain_replication_pays_the_replication_on_every_update() {
    // Chain of 3, 0.25 s per hop: each update is acknowledged 0.5 s after it
    // is applied, so the worker's cycle is 1.5 s: updates at 1, 2.5, 4, 5.5, 7, 8.5, 10.
    let s = Strategy::ChainReplication {
        chain: 3,
        hop_time: 0.25,
        replicate: Replication::EveryUpdate,
    };
    let r = run(s, 1, sync_ck(), &[]);
    assert_eq!(r.applied, 7);
    assert_eq!(r.grid_loss[3], -4.0);
}

#[test]
fn scar_restores_only_the_lost_shard_from_its_running_checkpoint() {
    // Two shards: block 0 on shard 0, block 1 on shard 1. SCAR with r = 1/2
    // and C = 5: one block every 2.5 s, asynchronous, writing all blocks takes
    // 1 s (one block 0.5 s). At 2.5 both blocks moved equally (2): the lower
    // index, block 0, is saved (persisted at 3.0). Shard 1 dies at 4.5 for
    // good; the 5.0 tick is skipped; at 5.0 (detection) shard 0's node hosts
    // block 1, restored at 6.0 to its saved value 0 (never saved). Block 0
    // keeps its 4. Updates at 7, 8, 9, 10 (the push at 5 was lost).
    let ck = CheckpointCost {
        interval: 5.0,
        write_time: 1.0,
        cache_time: 0.0,
        asynchronous: true,
    };
    let kill1 = [Outage {
        node: 1,
        down: 4.5,
        up: f64::INFINITY,
    }];
    let r = run(Strategy::Scar { fraction: 0.5 }, 2, ck, &kill1);
    let sums = [0., 2., 4., 6., 8., 4., 4., 6., 8., 10., 12.];
    assert_eq!(loss(&r), sums.map(|x: f64| -x).to_vec());
    let i = r.incidents[0];
    assert_eq!((i.shard, i.recovered, i.restored_blocks), (1, 6.0, 1));
    // Rework: block 1 lost 4.5 s of progress, block 0 none: 4.5 / 2 blocks.
    assert_eq!(r.split.rework, 2.25);
    assert_eq!(r.split.restart, 1.5);
}

#[test]
fn a_failure_during_an_asynchronous_persist_keeps_the_previous_saved_values() {
    // As above, but shard 0 dies at 2.75 while block 0's write (2.5 → 3.0)
    // is still running: the write is abandoned, block 0 restores to 0, the
    // surviving shard's block 1 keeps 2. Restored at 2.75 + 0.5 + 1 = 4.25.
    let ck = CheckpointCost {
        interval: 5.0,
        write_time: 1.0,
        cache_time: 0.0,
        asynchronous: true,
    };
    let kill0 = [Outage {
        node: 0,
        down: 2.75,
        up: f64::INFINITY,
    }];
    let r = run(Strategy::Scar { fraction: 0.5 }, 2, ck, &kill0);
    // The write started at 2.5 was abandoned; those started at 5 and 7.5
    // finished; the one at 10 is still running at the horizon.
    assert_eq!(r.checkpoints, 2);
    // t = 3: the curve shows the restore target: block 0 → 0, block 1 = 2.
    assert_eq!(r.grid_loss[3], -2.0);
    assert_eq!(r.incidents[0].recovered, 4.25);
    // The push at 3 is lost; the worker pulls at 4.25 → pushes 5.25 … 9.25.
    assert_eq!(r.grid_loss[10], -(5.0 + 7.0));
}

#[test]
fn synchronous_checkpoints_pause_the_ps() {
    // Synchronous checkpoints of 0.8 s at 2.5, 5, 7.5 and 10: a push that
    // arrives during a pause waits until it ends, shifting the worker.
    let ck = CheckpointCost {
        interval: 2.5,
        write_time: 0.8,
        cache_time: 0.0,
        asynchronous: false,
    };
    let r = run(Strategy::CheckpointRestart, 1, ck, &[]);
    // Pushes at 1, 2, 3.3, 4.3, 5.3 (tick at 5.0 pauses until 5.8: the push at
    // 5.3 waits until 5.8), 6.8, 7.8 (tick 7.5 → 8.3: waits), 8.3, 9.3.
    assert_eq!(r.grid_loss[3], -4.0, "the push at 3 waits for the pause");
    assert_eq!(r.grid_loss[4], -6.0);
    // Paused 2.5–3.3, 5–5.8, 7.5–8.3 and from 10 (the horizon).
    assert!((r.split.dump - 2.4).abs() < 1e-9, "{}", r.split.dump);
    assert_eq!(r.checkpoints, 3, "the one at 10 is still being written");
}

// ------------------------------------------------------------ iterations

/// Four blocks that halve every iteration; metric = Σ blocks.
struct Halving;

impl Model for Halving {
    type State = Vec<f64>;
    type Workspace = ();
    fn info(&self) -> ModelInfo {
        ModelInfo {
            name: "halving",
            blocks: 4,
            parameters: 4,
            block_description: "one number".into(),
            metric: "sum",
        }
    }
    fn block_count(&self) -> usize {
        4
    }
    fn init(&self) -> Vec<f64> {
        vec![8.0; 4]
    }
    fn workspace(&self) {}
    fn metric(&self, s: &Vec<f64>, _ws: &mut ()) -> f64 {
        s.iter().sum()
    }
    fn step(&self, s: &mut Vec<f64>, _ctx: IterCtx, _ws: &mut ()) {
        for x in s.iter_mut() {
            *x /= 2.0;
        }
    }
    fn copy_block(&self, src: &Vec<f64>, dst: &mut Vec<f64>, b: usize) {
        dst[b] = src[b];
    }
    fn block_distance(&self, a: &Vec<f64>, b: &Vec<f64>, blk: usize) -> f64 {
        (a[blk] - b[blk]).abs()
    }
}

fn costs(asynchronous: bool) -> IterationCosts {
    IterationCosts {
        iteration_time: 1.0,
        write_time: 0.4,
        cache_time: 0.2,
        asynchronous,
        detection: 0.1,
        restart: 0.2,
    }
}

fn iter_run(
    policy: CheckpointPolicy,
    recovery: RecoveryPolicy,
    asynchronous: bool,
    offset: f64,
) -> scarsim::faults::overhead::IterationRun {
    let failure = IterationFailure {
        iteration: 4,
        offset,
        lost: vec![0, 1],
    };
    run_iterations(
        &Halving,
        &mut (),
        0,
        &policy,
        recovery,
        &costs(asynchronous),
        Some(&failure),
        1.0,
        100,
        5,
        &mut stream(1, Purpose::CheckpointSelection, 0, 0),
    )
}

fn policy(interval: usize, fraction: f64) -> CheckpointPolicy {
    CheckpointPolicy {
        interval,
        fraction,
        selector: Selector::Priority,
        budget: WriteBudget::Parameters,
    }
}

#[test]
fn traditional_full_checkpoints_replay_from_the_last_one() {
    // Criterion Σ ≤ 1: B = 5 iterations. Full checkpoints after iterations 2,
    // 4, 6 (0.4 s each, synchronous). The failure 0.5 s into iteration 4
    // (state x(3), t = 3.9) restores x(2) to every block; after 0.3 s of
    // detection + restore, 3 more iterations reach the criterion at k = 6.
    let r = iter_run(policy(2, 1.0), RecoveryPolicy::Full, false, 0.5);
    assert_eq!(r.iterations, 6);
    assert!(r.converged);
    assert!((r.wall_time - 8.0).abs() < 1e-9, "{}", r.wall_time);
    assert_eq!(r.split.solve, 5.0);
    assert!((r.split.dump - 1.2).abs() < 1e-12);
    assert!((r.split.rework - 1.5).abs() < 1e-12);
    assert!((r.split.restart - 0.3).abs() < 1e-12);
    assert!((r.split.total() - r.wall_time).abs() < 1e-12);
    assert_eq!(r.checkpoints, 3);
}

#[test]
fn scar_partial_checkpoints_every_iteration_lose_nothing_here() {
    // r = 1/2, C = 2: half the blocks every iteration, by priority, async
    // (0.1 s pause, 0.2 s write). Saved: after 1 blocks {0,1} = 4; after 2
    // blocks {2,3} = 2 (they moved more); after 3 blocks {0,1} = 1, written
    // by 3.5 < the failure at 3.8. Lost blocks {0,1} are restored to 1 = their
    // current value: no perturbation, no rework beyond the wasted half iteration.
    let r = iter_run(policy(2, 0.5), RecoveryPolicy::Partial, true, 0.5);
    assert_eq!(r.iterations, 5);
    assert_eq!(r.perturbation_norm, 0.0);
    assert_eq!(r.unpersisted_lost, 0);
    assert!((r.wall_time - 6.3).abs() < 1e-9, "{}", r.wall_time);
    assert!((r.split.rework - 0.5).abs() < 1e-12);
    assert!((r.split.dump - 0.5).abs() < 1e-12);
}

#[test]
fn a_failure_before_the_write_finishes_restores_the_older_values() {
    // Failure 0.1 s into iteration 4 (t = 3.4): the write of blocks {0,1}
    // started at 3.3 finishes at 3.5, too late. They restore to 4 (saved
    // after iteration 1): state [4, 4, 1, 1], Σ = 10 → the criterion needs
    // k = 7: rework (7 − 5) + 0.1 = 2.1 s.
    let r = iter_run(policy(2, 0.5), RecoveryPolicy::Partial, true, 0.1);
    assert_eq!(r.unpersisted_lost, 2);
    assert_eq!(r.iterations, 7);
    assert!((r.perturbation_norm - 3.0_f64.hypot(3.0)).abs() < 1e-12);
    assert!((r.wall_time - 8.1).abs() < 1e-9, "{}", r.wall_time);
    assert!((r.split.rework - 2.1).abs() < 1e-12);
    assert_eq!(r.curve_metric[4], 10.0);
}

// ------------------------------------------------------------ Daly

#[test]
fn simulated_checkpoint_restart_matches_daly_and_its_optimum() {
    // δ = 60 s, R = 60 s, M = 1 h, T_s = 50 h. Common random numbers: every
    // interval sees the same failure times.
    let (d, r, m, w) = (60.0, 60.0, 3600.0, 50.0 * 3600.0);
    let tau_daly = daly::daly_interval(d, m);
    let factors = [0.4, 0.6, 0.8, 1.0, 1.25, 1.6, 2.5];
    let trials = 300;
    let mut walls = vec![Vec::new(); factors.len()];
    for t in 0..trials {
        let mut rng = stream(99, Purpose::FailureTime, t, 0);
        let mut times: Vec<f64> = Vec::new();
        for (fi, f) in factors.iter().enumerate() {
            let (s, _) = simulate_checkpoint_restart(w, f * tau_daly, d, r, usize::MAX, |x| {
                while times.last().is_none_or(|&l| l <= x) {
                    let last = times.last().copied().unwrap_or(0.0);
                    times.push(last + scarsim::policy::failure::exponential(&mut rng, m));
                }
                times[times.partition_point(|&y| y <= x)]
            })
            .unwrap();
            walls[fi].push(s.total());
        }
    }
    let mut means = Vec::new();
    for (fi, f) in factors.iter().enumerate() {
        let s = scarsim::stats::Summary::of(&walls[fi]);
        let expected = daly::expected_wall_time(w, f * tau_daly, d, r, m);
        // Within 4 standard errors of the exact expectation.
        let se = s.std / (s.n as f64).sqrt();
        assert!(
            (s.mean - expected).abs() < 4.0 * se,
            "factor {f}: simulated {} vs expected {expected} (se {se})",
            s.mean
        );
        means.push(s.mean);
    }
    // The simulated optimum is Daly's interval or a neighbour, and Daly's
    // interval is not significantly worse than the best found.
    let best = (0..means.len())
        .min_by(|&a, &b| means[a].total_cmp(&means[b]))
        .unwrap();
    assert!((2..=4).contains(&best), "best factor {}", factors[best]);
    let excess: Vec<f64> = walls[3]
        .iter()
        .zip(&walls[best])
        .map(|(a, b)| a - b)
        .collect();
    let e = scarsim::stats::Summary::of(&excess);
    assert!(
        e.ci95_low <= 1e-9 * w,
        "Daly's τ is worse than the best: {e:?}"
    );
    // And the far ends are clearly worse.
    assert!(means[0] > means[3] && means[6] > means[3]);
}

// ------------------------------------------------------------ CLI

fn small_wallclock(strategy_lines: &str) -> String {
    format!(
        r#"
kind = "faults"
name = "tiny-kill"
title = "tiny"
trials = 2
seed = 3

[model]
kind = "mlr"
dataset = "mnist"
batch_size = 8
learning_rate = 1e-6

[wallclock]
workers = [1]
compute_time = {{ distribution = "constant", value = 0.05 }}
horizon = 3.0
grid_step = 0.5
loss_subsample = 200
criterion = 1.5
detection = 0.1
restart = 0.1
without_failure = true

[checkpoint]
interval = 0.5
write_time = 0.02

[failure]
process = "fixed"
at = 1.0
back = 1.5

[cost]
on_demand = 0.2
spot = 0.05

{strategy_lines}
"#
    )
}

#[test]
fn faults_scenarios_run_and_are_deterministic() {
    let dir = tmpdir("faults-run");
    let text = small_wallclock(
        "[[series]]\nstrategy = \"checkpoint-restart\"\n\n[[series]]\nstrategy = \"stateless-ps\"\n",
    );
    std::fs::write(dir.join("k.toml"), &text).unwrap();
    for (out, threads) in [("a", "1"), ("b", "2")] {
        let o = scarsim(
            &dir,
            &[
                "run",
                "k.toml",
                "--synthetic",
                "--scale",
                "0.02",
                "--out",
                out,
                "--threads",
                threads,
                "--quiet",
                "--no-plot",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    for f in ["summary.csv", "curves.csv", "trials.csv", "incidents.csv"] {
        let a = std::fs::read(dir.join("a/tiny-kill").join(f)).unwrap();
        let b = std::fs::read(dir.join("b/tiny-kill").join(f)).unwrap();
        assert_eq!(a, b, "{f} differs between 1 and 2 threads");
    }
    let summary = std::fs::read_to_string(dir.join("a/tiny-kill/summary.csv")).unwrap();
    assert_eq!(
        summary.lines().count(),
        1 + 4,
        "2 strategies × with/without the kill"
    );
    // Currency: every node billed until the criterion (or the horizon):
    // on-demand / spot = 0.2 / 0.05, and one worker + one PS = 2 nodes.
    let t = scarsim::report::Table::read(&dir.join("a/tiny-kill/summary.csv")).unwrap();
    let c = |n: &str| t.column(n).unwrap();
    for row in &t.rows {
        let (od, spot): (f64, f64) = (
            row[c("cost_on_demand")].parse().unwrap(),
            row[c("cost_spot")].parse().unwrap(),
        );
        assert!((od / spot - 4.0).abs() < 1e-9, "{od} {spot}");
        assert_eq!(row[c("nodes")], "2");
        assert!(od > 0.0 && od <= 2.0 * 3.0 / 3600.0 * 0.2 + 1e-12);
    }
    let incidents = std::fs::read_to_string(dir.join("a/tiny-kill/incidents.csv")).unwrap();
    // One incident per trial of each strategy with the kill: failed 1, recovered 1.5 + 0.1.
    assert_eq!(incidents.lines().count(), 1 + 4);
    assert!(incidents.contains(",1,1.6,true,"), "{incidents}");
}

/// Without failures, checkpoint-restart and both stateless PSs run the same
/// run, which is computed once (`PsSetup::failure_free_key`); every CSV byte
/// equals what running each unit alone gives (`--no-sharing`), with the
/// strategies whose failure-free runs differ (a partial checkpoint fraction
/// and an asynchronous persist, a chain's nodes, an acknowledgement per
/// update) beside them, on one thread and on two (where one unit may wait for
/// another's run).
#[test]
fn failure_free_runs_shared_give_the_bytes_of_each_run_alone() {
    let dir = tmpdir("faults-failure-free");
    let text = small_wallclock(
        r#"[[series]]
strategy = "checkpoint-restart"

[[series]]
strategy = "scar"
fraction = 0.25
persist = "async"

[[series]]
strategy = "chain-replication"
chain = 3
replicate = "checkpoint"

[[series]]
name = "chain-every-update"
strategy = "chain-replication"
chain = 3
replicate = "every-update"
hop_time = 0.002

[[series]]
strategy = "stateless-ps"
restore_from = "workers"
damping_threshold = 1
damped_learning_rate = 1e-7

[[series]]
name = "stateless-from-checkpoint"
strategy = "stateless-ps"
restore_from = "checkpoint"
damping_threshold = 1
damped_learning_rate = 1e-7
"#,
    )
    .replace("[checkpoint]\n", "[checkpoint]\ncache_time = 0.002\n");
    std::fs::write(dir.join("k.toml"), &text).unwrap();
    assert_sharing_changes_no_byte(
        &dir,
        "k.toml",
        "tiny-kill",
        &["summary.csv", "curves.csv", "trials.csv", "incidents.csv"],
    );
    // The shared runs are the same run: the three strategies' failure-free
    // rows agree apart from their names, and differ from the others'.
    let t = scarsim::report::Table::read(&dir.join("alone/tiny-kill/trials.csv")).unwrap();
    let c = |n: &str| t.column(n).unwrap();
    let named = [c("series"), c("strategy")];
    let run_of = |series: &str| -> Vec<Vec<String>> {
        t.rows
            .iter()
            .filter(|r| r[c("series")] == series && r[c("failures")] == "off")
            .map(|r| {
                (0..r.len())
                    .filter(|i| !named.contains(i))
                    .map(|i| r[i].clone())
                    .collect()
            })
            .collect()
    };
    let cr = run_of("checkpoint-restart");
    assert_eq!(cr.len(), 2, "2 trials");
    assert_eq!(cr, run_of("stateless-ps"));
    assert_eq!(cr, run_of("stateless-from-checkpoint"));
    assert_ne!(cr, run_of("scar"));
    assert_ne!(cr, run_of("chain-every-update"));
}

/// SCAR §5.5's overhead panel: its traditional series (full recovery from
/// full synchronous checkpoints) runs the same timeline in every trial, so it
/// is run once; a series recovering from full asynchronous checkpoints (a
/// write still unfinished at the failure holds lost blocks, which the
/// placement decides) and SCAR's partial series (its lost blocks and its
/// partial checkpoints) are run per trial. Every CSV byte equals what running each trial gives
/// (`--no-sharing`), on one thread and on two.
#[test]
fn trial_free_overhead_series_run_once_with_the_bytes_of_each_trial() {
    let dir = tmpdir("faults-trial-free");
    let (_, _, text) = scarsim::scenario::load("scar-overhead-lda").unwrap();
    let text = format!(
        "{}\n[[series]]\nname = \"full-async\"\nrecovery = \"full\"\ncheckpoint_interval = 1\ncheckpoint_fraction = 1.0\npersist = \"async\"\n",
        text.replace("trials = 20", "trials = 3")
            .replace("write_time = 52.0", "write_time = 300.0")
    );
    std::fs::write(dir.join("o.toml"), &text).unwrap();
    assert_sharing_changes_no_byte(
        &dir,
        "o.toml",
        "scar-overhead-lda",
        &["summary.csv", "trials.csv", "curves.csv", "comparison.csv"],
    );
    // Run alone, the traditional trials agree; SCAR's do not.
    let t = scarsim::report::Table::read(&dir.join("alone/scar-overhead-lda/trials.csv")).unwrap();
    let c = |n: &str| t.column(n).unwrap();
    let distinct = |series: &str| {
        let rows: std::collections::BTreeSet<String> = t
            .rows
            .iter()
            .filter(|r| r[c("series")] == series)
            .map(|r| format!("{} {}", r[c("wall_time")], r[c("perturbation_norm")]))
            .collect();
        rows.len()
    };
    assert_eq!(distinct("traditional"), 1);
    assert!(distinct("scar") > 1);
    // A write of 300 s is still unfinished when the failure strikes, so
    // the asynchronous series loses unpersisted blocks (as many in every
    // trial here: the placement balances the blocks over the nodes).
    assert!(
        t.rows
            .iter()
            .filter(|r| r[c("series")] == "full-async")
            .all(|r| r[c("unpersisted_lost")] != "0")
    );
}

#[test]
fn poisson_and_trace_failure_processes_drive_the_ps() {
    let dir = tmpdir("faults-processes");
    // A trace: node 0 down at 0.5 for 0.5 s, and at 2.0 for good.
    std::fs::write(
        dir.join("trace.csv"),
        "time,node,down_for\n0.5,0,0.5\n2.0,0,inf\n",
    )
    .unwrap();
    let trace = small_wallclock("[[series]]\nstrategy = \"checkpoint-restart\"\n")
        .replace("name = \"tiny-kill\"", "name = \"tiny-trace\"")
        .replace(
            "process = \"fixed\"\nat = 1.0\nback = 1.5",
            "process = \"trace\"\nfile = \"trace.csv\"",
        );
    std::fs::write(dir.join("t.toml"), trace).unwrap();
    // Poisson: MTBF 1 s per node, repaired after 0.2 s, a chain of 2.
    let poisson = small_wallclock("[[series]]\nstrategy = \"chain-replication\"\nchain = 2\n")
        .replace("name = \"tiny-kill\"", "name = \"tiny-poisson\"")
        .replace(
            "process = \"fixed\"\nat = 1.0\nback = 1.5",
            "process = \"poisson\"\nmtbf = 1.0\nrepair = 0.2",
        );
    std::fs::write(dir.join("p.toml"), poisson).unwrap();
    let o = scarsim(
        &dir,
        &[
            "run",
            "t.toml",
            "p.toml",
            "--synthetic",
            "--scale",
            "0.02",
            "--out",
            "o",
            "--quiet",
            "--no-plot",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let inc = std::fs::read_to_string(dir.join("o/tiny-trace/incidents.csv")).unwrap();
    // Per trial: the first outage (0.5 → back 1.0, restored 1.1) and the last (never restored).
    assert!(inc.contains(",0,0.5,1.1,true,"), "{inc}");
    assert!(
        inc.contains(",0,2,NaN,true,") || inc.contains(",0,2,,true,"),
        "{inc}"
    );
    let inc = std::fs::read_to_string(dir.join("o/tiny-poisson/incidents.csv")).unwrap();
    // Over 3 s two nodes with MTBF 1 s fail several times; most failures are
    // take-overs (the other link of the chain alive).
    let rows: Vec<&str> = inc.lines().skip(1).collect();
    assert!(rows.len() >= 4, "{inc}");
    assert!(rows.iter().any(|r| r.contains(",false,")), "{inc}");
}

#[test]
fn bad_faults_scenarios_are_rejected_with_the_line() {
    let dir = tmpdir("faults-bad");
    let cases = [
        (
            small_wallclock("[[series]]\nstrategy = \"raft\"\n"),
            vec!["unknown strategy `raft`", "checkpoint-restart"],
        ),
        (
            small_wallclock("[[series]]\nstrategy = \"scar\"\nchain = 3\n"),
            vec!["series.chain", "does not apply to strategy `scar`"],
        ),
        (
            small_wallclock("[[series]]\nstrategy = \"scar\"\n")
                .replace("process = \"fixed\"", "process = \"poisson\""),
            vec!["failure.at", "poisson"],
        ),
        (
            small_wallclock("[[series]]\nstrategy = \"scar\"\nfraction = 1.5\n"),
            vec!["series.fraction", "outside (0, 1]"],
        ),
        (
            small_wallclock(
                "[[series]]\nstrategy = \"chain-replication\"\nreplicate = \"gossip\"\n",
            ),
            vec![
                "series.replicate",
                "unknown `gossip`",
                "every-update or checkpoint",
            ],
        ),
        (
            small_wallclock(
                "[[series]]\nstrategy = \"chain-replication\"\nreplicate = \"checkpoint\"\nhop_time = 0.1\n",
            ),
            vec!["series.hop_time", "every-update"],
        ),
        (
            small_wallclock("[[series]]\nstrategy = \"stateless-ps\"\nrestore_from = \"disk\"\n"),
            vec!["series.restore_from", "checkpoint or workers"],
        ),
        (
            small_wallclock("[[series]]\nstrategy = \"scar\"\nrestore_from = \"workers\"\n"),
            vec!["series.restore_from", "does not apply to strategy `scar`"],
        ),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        let f = format!("bad{i}.toml");
        std::fs::write(dir.join(&f), text).unwrap();
        let o = scarsim(&dir, &["validate", &f]);
        assert!(!o.status.success());
        let e = stderr(&o);
        assert!(e.contains(&format!("bad{i}.toml:")), "{e}");
        for n in needles {
            assert!(e.contains(n), "{n:?} not in {e}");
        }
    }
}
