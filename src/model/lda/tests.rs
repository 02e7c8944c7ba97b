//! Unit tests of the module.

use super::*;
use crate::data::corpus::real_shape;
use crate::data::{DatasetName, lda_standin};
use crate::policy::{RecoveryPolicy, RunningCheckpoint};

fn small(seed: u64) -> Lda {
    let shape = real_shape(DatasetName::Reuters).unwrap();
    let corpus = Arc::new(lda_standin::generate(DatasetName::Reuters, &shape, 5, 0.01));
    Lda::new(
        corpus,
        &LdaConfig {
            topics: 20,
            alpha: 1.0,
            beta: 1.0,
            init_seed: seed,
        },
    )
}

fn ctx(k: usize) -> IterCtx {
    IterCtx {
        iteration: k,
        run_seed: 42,
    }
}

/// x(0), …, x(n) as snapshots, and the live x(n).
fn trajectory(m: &Lda, n: usize) -> (Vec<LdaState>, LdaState) {
    let mut ws = m.workspace();
    let mut s = m.init();
    let mut out = vec![m.snapshot(&s)];
    for k in 0..n {
        m.step(&mut s, ctx(k), &mut ws);
        out.push(m.snapshot(&s));
    }
    (out, s)
}

/// The metric exactly as first written (zero counts skipped by a branch).
fn metric_reference(m: &Lda, state: &LdaState) -> f64 {
    let v_beta = m.corpus.vocab_size() as f64 * m.beta;
    let mut words = 0.0;
    for &n in &state.topic_total {
        words += ln_gamma(v_beta) - ln_gamma(n as f64 + v_beta);
    }
    for &n in &state.word_topic {
        if n != 0 {
            words += m.ln_gamma_beta[n as usize];
        }
    }
    let mut topics = m.doc_norm;
    for &n in &state.doc_topic {
        if n != 0 {
            topics += m.ln_gamma_alpha[n as usize];
        }
    }
    -(words + topics)
}

#[test]
fn sweep_matches_the_reference_at_every_level() {
    for topics in [20, 7, 2] {
        let mut m = small(6);
        m.topics = topics;
        let mut ws = m.workspace();
        let x0 = m.init();
        let mut reference = x0.clone();
        let mut fast: Vec<LdaState> = simd::Level::supported()
            .into_iter()
            .map(|_| x0.clone())
            .collect();
        for k in 0..6 {
            assert_eq!(
                m.metric(&reference, &mut ws).to_bits(),
                metric_reference(&m, &reference).to_bits()
            );
            m.step_reference(&mut reference, ctx(k), &mut ws);
            for (level, s) in simd::Level::supported().into_iter().zip(&mut fast) {
                m.step_at(level, s, ctx(k), &mut ws);
                assert_eq!(
                    *s, reference,
                    "K = {topics}, level {level:?}, iteration {k}"
                );
            }
        }
        m.check_invariants(&reference).unwrap();
    }
}

/// Members join a cohort at different iterations and leave at others;
/// every member's states and metrics equal those of its run alone, at
/// every kernel level.
#[test]
fn cohort_members_match_single_runs() {
    let m = small(7);
    let mut ws = m.workspace();
    let (traj, _) = trajectory(&m, 4);
    // 19 members: three groups, the last one partial; member i joins at
    // iteration i % 4 from a state reset in some documents, and leaves
    // after 3 + i % 5 iterations.
    let n = 19;
    let start: Vec<usize> = (0..n).map(|i| i % 4).collect();
    let stop: Vec<usize> = (0..n).map(|i| start[i] + 3 + i % 5).collect();
    let fork = |i: usize| {
        let mut s = traj[start[i]].clone();
        for d in (i..m.block_count()).step_by(5 + i) {
            m.copy_block(&traj[0], &mut s, d);
        }
        m.rebuild_derived(&mut s);
        s
    };
    // Each member alone, by the reference sweep.
    let alone: Vec<Vec<(f64, LdaState)>> = (0..n)
        .map(|i| {
            let mut s = fork(i);
            let mut out = Vec::new();
            for k in start[i]..stop[i] {
                out.push((metric_reference(&m, &s), s.clone()));
                m.step_reference(&mut s, ctx(k), &mut ws);
            }
            out.push((metric_reference(&m, &s), s));
            out
        })
        .collect();
    for level in simd::Level::supported() {
        let mut states: Vec<LdaState> = (0..n).map(|_| LdaState::empty()).collect();
        let mut metrics = vec![f64::NAN; n];
        for k in 0..=*stop.iter().max().unwrap() {
            let mut active = vec![false; n];
            for i in 0..n {
                if k == start[i] {
                    states[i] = fork(i);
                }
                active[i] = (start[i]..=stop[i]).contains(&k);
            }
            m.metric_many(&states, &active, ctx(k), &mut ws, &mut metrics);
            for i in 0..n {
                if !active[i] {
                    continue;
                }
                let (want, ref state) = alone[i][k - start[i]];
                assert_eq!(states[i], *state, "member {i}, iteration {k}, {level:?}");
                assert_eq!(
                    metrics[i].to_bits(),
                    want.to_bits(),
                    "member {i}, iteration {k}"
                );
                active[i] = k < stop[i];
            }
            m.step_many_at(level, &mut states, &active, ctx(k), &mut ws);
        }
    }
}

/// Runs of different run seeds, at different iterations, share the lanes
/// of one pass (`metric_apart`, then `step_apart`): 2·LANES + 3 members
/// (the last group partial, a pass of more than one group), members
/// leaving and one skipping a step; every state and metric equals its run
/// stepped alone by the reference sweep, at every kernel level.
#[test]
fn apart_members_match_single_runs() {
    let m = small(8);
    let n = 2 * LANES + 3;
    // Member i: seed 100 + i % 5 (some share a stream), iterations offset by i % 3.
    let seed = |i: usize| 100 + (i % 5) as u64;
    let at = |i: usize, k: usize| IterCtx {
        iteration: k + i % 3,
        run_seed: seed(i),
    };
    let stop = |i: usize| 2 + i % 4;
    let mut ws = m.workspace();
    let alone: Vec<Vec<(f64, LdaState)>> = (0..n)
        .map(|i| {
            let mut s = m.init();
            let mut out = Vec::new();
            for k in 0..stop(i) {
                out.push((metric_reference(&m, &s), s.clone()));
                if !(i == 4 && k == 1) {
                    m.step_reference(&mut s, at(i, k), &mut ws);
                }
            }
            out.push((metric_reference(&m, &s), s));
            out
        })
        .collect();
    let last = (0..n).map(stop).max().unwrap();
    for level in simd::Level::supported() {
        let mut states: Vec<LdaState> = (0..n).map(|_| m.init()).collect();
        let mut metrics = vec![f64::NAN; n];
        // Every member's record is read at step k (clippy: not a plain index loop).
        #[allow(clippy::needless_range_loop)]
        for k in 0..=last {
            let active: Vec<bool> = (0..n).map(|i| k <= stop(i)).collect();
            let next: Vec<IterCtx> = (0..n).map(|i| at(i, k)).collect();
            m.metric_apart(&states, &active, &next, &mut ws, &mut metrics);
            for i in (0..n).filter(|&i| active[i]) {
                let (want, ref state) = alone[i][k];
                assert_eq!(states[i], *state, "member {i}, step {k}, {level:?}");
                assert_eq!(metrics[i].to_bits(), want.to_bits(), "member {i}, step {k}");
            }
            let stepping: Vec<bool> = (0..n).map(|i| k < stop(i) && !(i == 4 && k == 1)).collect();
            m.step_apart_at(level, &mut states, &stepping, &next, &mut ws);
        }
    }
}

#[test]
fn training_lowers_the_loss_and_keeps_counts_consistent() {
    let m = small(1);
    let mut ws = m.workspace();
    let mut s = m.init();
    m.check_invariants(&s).unwrap();
    let l0 = m.metric(&s, &mut ws);
    for k in 0..15 {
        m.step(&mut s, ctx(k), &mut ws);
    }
    m.check_invariants(&s).unwrap();
    let l1 = m.metric(&s, &mut ws);
    let n = m.corpus().total_tokens() as f64;
    // Random assignments cost about ln K more per token in log p(z) than
    // a fitted model; require a drop of 0.2 nats per token.
    assert!(l1 < l0 - 0.2 * n, "loss {l0} -> {l1} over {n} tokens");
}

#[test]
fn likelihood_matches_direct_ln_gamma() {
    let m = small(2);
    let (_, s) = trajectory(&m, 3);
    let (words, topics) = m.log_likelihood_parts(&s);
    let (k, v) = (m.topics, m.corpus().vocab_size());
    let (a, b) = (m.alpha, m.beta);
    let mut w = 0.0;
    for t in 0..k {
        w += ln_gamma(v as f64 * b) - ln_gamma(s.topic_total[t] as f64 + v as f64 * b);
        for word in 0..v {
            w += ln_gamma(s.word_topic[word * k + t] as f64 + b) - ln_gamma(b);
        }
    }
    let mut z = 0.0;
    for d in 0..m.corpus().docs() {
        z += ln_gamma(k as f64 * a) - ln_gamma(m.corpus().doc_len(d) as f64 + k as f64 * a);
        for t in 0..k {
            z += ln_gamma(s.doc_topic[d * k + t] as f64 + a) - ln_gamma(a);
        }
    }
    assert!((words - w).abs() < 1e-9 * w.abs(), "{words} vs {w}");
    assert!((topics - z).abs() < 1e-9 * z.abs(), "{topics} vs {z}");
}

#[test]
fn block_copy_round_trips_exactly() {
    let m = small(3);
    let (traj, live) = trajectory(&m, 4);
    let mut a = live.clone();
    let d = 7;
    let before = a.clone();
    m.copy_block(&traj[0], &mut a, d);
    assert_eq!(m.block_distance(&a, &traj[0], d), 0.0);
    m.copy_block(&before, &mut a, d);
    m.rebuild_derived(&mut a);
    assert_eq!(a, before);
    // Distance is the length-scaled total variation: ½ Σ|Δn|, at most N_d.
    let dist = m.block_distance(&live, &traj[0], d);
    assert!(dist > 0.0 && dist <= m.corpus().doc_len(d) as f64);
}

#[test]
fn counts_hold_after_a_partial_restore_from_snapshots() {
    let m = small(4);
    let (traj, live) = trajectory(&m, 6);
    let policy = crate::policy::CheckpointPolicy {
        interval: 4,
        fraction: 0.5,
        selector: crate::policy::Selector::Priority,
        budget: crate::policy::WriteBudget::Blocks,
    };
    let mut rng = stream(0, Purpose::CheckpointSelection, 0, 0);
    let ckpt = RunningCheckpoint::replay(&m, &traj, &policy, 6, &mut rng);
    let mut state = traj[6].clone();
    let lost: Vec<usize> = (0..m.block_count()).step_by(3).collect();
    let out = RecoveryPolicy::Partial.apply(&m, &mut state, &ckpt, &lost, 6);
    assert_eq!(out.restored_blocks, lost.len());
    m.check_invariants(&state).unwrap();
    assert!(out.perturbation_norm > 0.0);
    assert!(out.perturbation_norm <= out.full_recovery_norm);
    // Blocks not lost are untouched; lost ones equal the checkpoint's.
    for d in 0..m.block_count() {
        let src = if lost.contains(&d) {
            &ckpt.state
        } else {
            &live
        };
        assert_eq!(m.block_distance(&state, src, d), 0.0, "block {d}");
    }
    // The forked state trains on.
    let mut ws = m.workspace();
    m.step(&mut state, ctx(6), &mut ws);
    m.check_invariants(&state).unwrap();
}

#[test]
fn steps_are_deterministic_and_use_common_random_numbers() {
    let m = small(5);
    let (traj, live) = trajectory(&m, 2);
    let mut again = traj[2].clone();
    m.rebuild_derived(&mut again);
    assert_eq!(again, live);
    let mut ws = m.workspace();
    let mut a = live.clone();
    let mut b = live.clone();
    m.step(&mut a, ctx(2), &mut ws);
    m.step(&mut b, ctx(2), &mut ws);
    assert_eq!(a, b);
    let mut c = live.clone();
    m.step(
        &mut c,
        IterCtx {
            iteration: 2,
            run_seed: 43,
        },
        &mut ws,
    );
    assert_ne!(a.assignments, c.assignments);
    // Snapshots leave out the derived counts.
    let snap = m.snapshot(&a);
    assert!(snap.word_topic.is_empty() && snap.doc_topic.is_empty());
    assert_eq!(snap.bytes(), a.assignments.len());
}

/// A snapshot holds only the assignments: its block distances, counted
/// from them, equal the live states' (from the doc-topic counts) for every
/// block, and a block copied into a live state keeps its counts exact.
#[test]
fn snapshots_measure_and_copy_blocks_as_live_states_do() {
    // K = 20 counts in the small table, K = 40 in the full one.
    let corpus = small(6).corpus.clone();
    for topics in [20, 40] {
        let config = LdaConfig {
            topics,
            alpha: 1.0,
            beta: 1.0,
            init_seed: 6,
        };
        snapshots_as_live_states(&Lda::new(corpus.clone(), &config));
    }
}

fn snapshots_as_live_states(m: &Lda) {
    let (traj, live) = trajectory(m, 3);
    let mut earlier = traj[1].clone();
    m.rebuild_derived(&mut earlier);
    let mut moved = 0;
    for d in 0..m.block_count() {
        let want = m.block_distance(&live, &earlier, d);
        assert_eq!(m.block_distance(&traj[3], &traj[1], d), want, "block {d}");
        assert_eq!(m.block_distance(&live, &traj[1], d), want, "block {d}");
        assert_eq!(m.block_distance(&traj[3], &earlier, d), want, "block {d}");
        moved += (want > 0.0) as usize;
    }
    assert!(moved > 0);
    assert_eq!(m.distance(&traj[3], &traj[1]), m.distance(&live, &earlier));
    let mut a = live.clone();
    for d in (0..m.block_count()).step_by(2) {
        m.copy_block(&traj[1], &mut a, d);
    }
    let counts = a.doc_topic.clone();
    m.rebuild_derived(&mut a);
    assert_eq!(a.doc_topic, counts);
    m.check_invariants(&a).unwrap();
}
