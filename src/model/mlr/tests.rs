//! Unit tests of the module.

use super::*;
use crate::data::synthetic;

fn small() -> Mlr {
    let data = Arc::new(synthetic::mnist_like(11, 0.02));
    Mlr::new(
        data,
        &MlrConfig {
            batch_size: 200,
            learning_rate: 1e-5,
        },
    )
}

fn ctx(k: usize) -> IterCtx {
    IterCtx {
        iteration: k,
        run_seed: 9,
    }
}

#[test]
fn training_lowers_the_loss() {
    let m = small();
    let mut s = m.init();
    let mut ws = m.workspace();
    let l0 = m.metric(&s, &mut ws);
    assert!((l0 - m.data().rows as f64 * 10f64.ln()).abs() < 1e-3 * l0);
    for k in 0..30 {
        m.metric(&s, &mut ws);
        m.step(&mut s, ctx(k), &mut ws);
    }
    let l1 = m.metric(&s, &mut ws);
    assert!(l1 < 0.6 * l0, "loss {l0} -> {l1}");
}

#[test]
fn step_without_fresh_metric_is_bit_identical() {
    let m = small();
    let mut ws = m.workspace();
    let mut a = m.init();
    for k in 0..3 {
        m.step(&mut a, ctx(k), &mut ws);
    }
    let mut b = a.clone();
    m.metric(&a, &mut ws);
    m.step(&mut a, ctx(3), &mut ws);
    let mut ws2 = m.workspace();
    m.step(&mut b, ctx(3), &mut ws2);
    assert_eq!(a, b);
}

/// A run advanced inside a cohort, with members joining and leaving,
/// gets exactly the bits it gets alone.
#[test]
fn cohort_members_match_single_runs() {
    let m = small();
    let mut ws = m.workspace();
    // Three different starting states.
    let mut starts = vec![m.init(), m.init(), m.init()];
    for (i, s) in starts.iter_mut().enumerate() {
        for k in 0..(i + 1) {
            m.step(s, ctx(k), &mut ws);
        }
    }
    // Alone: 6 iterations each from iteration 4.
    let mut alone = starts.clone();
    let mut alone_metrics = vec![vec![]; 3];
    for (s, ms) in alone.iter_mut().zip(alone_metrics.iter_mut()) {
        let mut ws = m.workspace();
        for k in 4..10 {
            ms.push(m.metric(s, &mut ws));
            m.step(s, ctx(k), &mut ws);
        }
    }
    // Together, member 1 joining at iteration 6 (it sits out 4 and 5 and
    // starts from its iteration-4 state then, so compare only members 0, 2).
    let mut states = starts.clone();
    let mut cws = m.workspace();
    let mut metrics = vec![vec![]; 3];
    for k in 4..10 {
        let active = [true, k >= 6, true];
        let mut out = vec![0.0; 3];
        m.metric_many(&states, &active, ctx(k), &mut cws, &mut out);
        for i in 0..3 {
            if active[i] {
                metrics[i].push(out[i]);
            }
        }
        m.step_many(&mut states, &active, ctx(k), &mut cws);
    }
    for i in [0, 2] {
        assert_eq!(states[i], alone[i], "member {i} state");
        assert_eq!(metrics[i], alone_metrics[i], "member {i} metrics");
    }
    // Member 1 ran iterations 6..10 from its start: same as alone over those.
    let mut one = starts[1].clone();
    let mut ws1 = m.workspace();
    for k in 6..10 {
        m.metric(&one, &mut ws1);
        m.step(&mut one, ctx(k), &mut ws1);
    }
    assert_eq!(states[1], one);
}

/// The certified check is sound and exact: at every iteration of a run
/// (including after a block is reset, as a recovery does), `Above` is
/// returned only when the exact metric is above the criterion, and
/// `Exact` carries the bits `metric` computes. It also skips: with a
/// criterion 20% below the metric (this small run's steps are large), most checks are
/// certified without the full pass.
#[test]
fn certified_checks_are_sound_and_skip_the_full_pass() {
    let m = small();
    assert!(m.certifies());
    let mut ws = m.workspace();
    let mut s = m.init();
    let (mut above, mut checks) = (0, 0);
    for k in 0..48 {
        if k == 20 {
            // A recovery that restores block 3 from the initial state.
            m.copy_block(&m.init(), &mut s, 3);
        }
        let exact = m.metric(&s, &mut ws);
        for (criterion, may_skip) in [(exact, false), (exact * 0.8, true)] {
            let mut out = [Check::Exact(f64::NAN)];
            let mut probe = [s.clone()];
            let mut cws = m.workspace();
            m.check_many(&probe, &[true], ctx(k), criterion, &mut cws, &mut out);
            match out[0] {
                Check::Exact(v) => assert_eq!(v.to_bits(), exact.to_bits(), "iteration {k}"),
                Check::Above => {
                    assert!(may_skip && exact > criterion, "unsound at iteration {k}");
                    above += 1;
                }
            }
            checks += may_skip as usize;
            // The step after a check equals the step after a metric.
            m.step_many(&mut probe, &[true], ctx(k), &mut cws);
            let mut alone = s.clone();
            m.step(&mut alone, ctx(k), &mut m.workspace());
            assert_eq!(probe[0], alone, "iteration {k}");
        }
        m.step(&mut s, ctx(k), &mut ws);
    }
    assert!(
        above * 2 > checks,
        "only {above} of {checks} checks certified"
    );
}

#[test]
fn block_copy_round_trips() {
    let m = small();
    let a = MlrState {
        w: (0..m.init().w.len()).map(|i| i as f32).collect(),
        bound: Bound::default(),
    };
    let mut b = m.init();
    m.copy_block(&a, &mut b, 5);
    assert_eq!(m.block_distance(&a, &b, 5), 0.0);
    assert!(m.block_distance(&a, &b, 6) > 0.0);
    assert_eq!(&b.w[50..60], &a.w[50..60]);
    assert!(b.w[..50].iter().all(|v| *v == 0.0));
}

#[test]
fn batches_cover_an_epoch_without_repeats() {
    let m = small();
    let mut ws = m.workspace();
    let mut seen = vec![false; m.data().rows];
    for k in 0..m.batches_per_epoch() {
        for &i in m.batch_rows(ctx(k), &mut ws) {
            assert!(!seen[i as usize]);
            seen[i as usize] = true;
        }
    }
}

/// Runs of different data orders advanced side by side (`metric_apart`,
/// then `step_apart`), members leaving as they would on convergence and one
/// metric not followed by its step, get exactly the metrics and states
/// (bound included) of runs stepped alone, across epochs.
#[test]
fn apart_runs_match_single_runs() {
    let m = small();
    let seeds = [3u64, 17, 29, 41, 57];
    let n = seeds.len();
    let mut ws = m.workspace();
    let mut states: Vec<MlrState> = (0..n).map(|_| m.init()).collect();
    let mut alone: Vec<MlrState> = states.clone();
    let mut ws_alone = m.workspace();
    let mut out = vec![0.0; n];
    assert!(m.batches_per_epoch() < 8, "the runs cross an epoch");
    for k in 0..14 {
        // Member i leaves after iteration 8 + i; member 1 skips its step at 5.
        let active: Vec<bool> = (0..n).map(|i| k <= 8 + i).collect();
        let next: Vec<IterCtx> = seeds
            .iter()
            .map(|&run_seed| IterCtx {
                iteration: k,
                run_seed,
            })
            .collect();
        m.metric_apart(&states, &active, &next, &mut ws, &mut out);
        let stepping: Vec<bool> = (0..n).map(|i| active[i] && !(i == 1 && k == 5)).collect();
        m.step_apart(&mut states, &stepping, &next, &mut ws);
        for i in (0..n).filter(|&i| active[i]) {
            let exact = m.metric(&alone[i], &mut m.workspace());
            assert_eq!(out[i].to_bits(), exact.to_bits(), "metric of {i} at {k}");
            if stepping[i] {
                m.step(&mut alone[i], next[i], &mut ws_alone);
            }
            assert_eq!(states[i], alone[i], "state of {i} after {k}");
        }
    }
}
