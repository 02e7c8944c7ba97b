//! Unit tests of the shared outcomes: keys, whole-state keys, the shared
//! unperturbed runs' lifetime.

use super::super::recovery::{prepare, units};
use super::*;
use crate::data::Provenance;
use crate::model::ModelSpec;
use crate::scenario::Scenario;

fn load(name: &str) -> RecoveryScenario {
    match crate::scenario::load(name).expect("bundled").0 {
        Scenario::Recovery(r) => r,
        _ => panic!("{name} is a recovery scenario"),
    }
}

fn stand_in() -> DataUsed {
    DataUsed {
        dataset: crate::data::DatasetName::Mnist,
        provenance: Provenance::Synthetic {
            description: "stand-in".into(),
            scale: 0.02,
        },
        size_ratio: 0.02,
    }
}

/// Every unit key of `sc` (run key prefixed), with the unperturbed run
/// converging at iteration 60 and `blocks` blocks.
fn keys(sc: &RecoveryScenario, data: &DataUsed, opts: &DataOptions) -> Vec<String> {
    let conv = Convergence {
        criterion: sc.convergence.criterion * data.size_ratio,
        max_iterations: sc.convergence.max_iterations,
    };
    let blocks = 10;
    let run = RunKey::new(sc, data, opts, &conv, blocks).unwrap();
    let points = sc.points();
    units(sc)
        .into_iter()
        .map(|(p, t)| {
            let prep = prepare(60, &points[p], sc.ps_nodes, blocks, sc.meta.seed, t);
            let k = unit_key(sc, &points[p], t, &prep, blocks).unwrap();
            assert!(!k.whole_state, "no restoration found, so keyed in full");
            format!("{}|{}", run.0, k.key)
        })
        .collect()
}

fn disjoint(a: &[String], b: &[String], what: &str) {
    assert!(!a.is_empty());
    for k in a {
        assert!(!b.contains(k), "{what}: a key is unchanged: {k}");
    }
}

/// The bundled partial/priority pairs share keys exactly where their
/// configurations agree: full recovery and r = 1 partial recovery at
/// half the blocks lost.
#[test]
fn the_bundled_pairs_share_keys() {
    let opts = DataOptions::default();
    for model in ["mlr-mnist", "cnn-byshard-mnist", "lda-20news", "mf-jester"] {
        let partial = load(&format!("scar-partial-{model}"));
        let priority = load(&format!("scar-priority-{model}"));
        let a = keys(&partial, &stand_in(), &opts);
        let b = keys(&priority, &stand_in(), &opts);
        let common = b.iter().filter(|k| a.contains(k)).count();
        // traditional (full recovery) and priority at r = 1, per trial.
        assert_eq!(common, 2 * priority.meta.trials, "{model}");
    }
}

/// Keys differ when anything an outcome depends on differs.
#[test]
fn keys_differ_when_an_outcome_relevant_input_differs() {
    let opts = DataOptions::default();
    let base = load("scar-partial-mlr-mnist");
    let data = stand_in();
    let k0 = keys(&base, &data, &opts);
    // Stable: the same inputs give the same keys.
    assert_eq!(k0, keys(&base, &data, &opts));
    let mut seed = base.clone();
    seed.meta.seed += 1;
    disjoint(&keys(&seed, &data, &opts), &k0, "seed");
    let mut criterion = base.clone();
    criterion.convergence.criterion *= 1.0 + 1e-12;
    disjoint(&keys(&criterion, &data, &opts), &k0, "criterion");
    let mut cap = base.clone();
    cap.convergence.max_iterations += 1;
    disjoint(&keys(&cap, &data, &opts), &k0, "max_iterations");
    let mut lr = base.clone();
    match &mut lr.model {
        ModelSpec::Mlr(m) => m.learning_rate *= 2.0,
        m => panic!("not MLR: {m:?}"),
    }
    disjoint(&keys(&lr, &data, &opts), &k0, "learning rate");
    let mut order = base.clone();
    order.data_order = match base.data_order {
        crate::scenario::DataOrderMode::Shared => crate::scenario::DataOrderMode::PerTrial,
        crate::scenario::DataOrderMode::PerTrial => crate::scenario::DataOrderMode::Shared,
    };
    disjoint(&keys(&order, &data, &opts), &k0, "data order");
    let mut nodes = base.clone();
    nodes.ps_nodes += 1;
    disjoint(&keys(&nodes, &data, &opts), &k0, "ps nodes");
    // Real data, another stand-in scale, another data folder.
    let real = DataUsed {
        provenance: Provenance::Real {
            files: vec!["mnist/train-images-idx3-ubyte".into()],
        },
        size_ratio: 1.0,
        ..stand_in()
    };
    disjoint(&keys(&base, &real, &opts), &k0, "real data");
    let scaled = DataOptions {
        synthetic: true,
        synthetic_scale: 0.5,
        ..opts.clone()
    };
    disjoint(&keys(&base, &data, &scaled), &k0, "scale");
    // The lost blocks' draws: with 1/4 instead of 1/2 lost, the units of
    // the 1/2 point differ, the others keep their keys.
    let sweep = base.sweep.as_ref().expect("lost_fraction sweep");
    let half = sweep.values.iter().position(|&v| v == 0.5).unwrap();
    let mut lost = base.clone();
    lost.sweep.as_mut().unwrap().values[half] = 0.25;
    let k = keys(&lost, &data, &opts);
    let trials = base.meta.trials;
    let points = base.points().len();
    for p in 0..points {
        for t in 0..trials {
            let u = p * trials + t;
            let at_half = p % sweep.values.len() == half;
            assert_eq!(k[u] != k0[u], at_half, "point {p} trial {t}");
        }
    }
    // Another trial of the same point: other draws, other key.
    assert_ne!(k0[0], k0[1]);
    // The same trial and point with other draws: another failure
    // iteration, or other lost blocks of the same number.
    let point = &base.points()[0];
    let drawn = prepare(60, point, base.ps_nodes, 10, base.meta.seed, 0);
    let key = |p: &Prepared| unit_key(&base, point, 0, p, 10).unwrap();
    let other_t = Prepared {
        failure_iteration: drawn.failure_iteration + 1,
        lost: drawn.lost.clone(),
        restoration: None,
    };
    let mut lost = drawn.lost.clone();
    let free = (0..10)
        .find(|b| !lost.contains(b))
        .expect("a block survives");
    lost[0] = free;
    lost.sort_unstable();
    let other_lost = Prepared {
        failure_iteration: drawn.failure_iteration,
        lost,
        restoration: None,
    };
    assert_ne!(key(&drawn), key(&other_t));
    assert_ne!(key(&drawn), key(&other_lost));
    assert_eq!(
        key(&drawn),
        key(&prepare(60, point, base.ps_nodes, 10, base.meta.seed, 0))
    );
}
/// Units that restore every block from one iteration are keyed within
/// the whole-state run key, which names the training spec and not the
/// blocks: the CNN's by-layer and by-shard partial panels (76 and 10
/// blocks) share them, at any point of the sweep, and nothing else.
#[test]
fn whole_state_units_are_keyed_without_their_blocks() {
    use crate::policy::{RecoveryOutcome, Restoration};
    let opts = DataOptions::default();
    let data = stand_in();
    let restored = |blocks: usize, from: &dyn Fn(u32) -> u32| Restoration {
        blocks: (0..blocks as u32).map(|b| (b, from(b))).collect(),
        outcome: RecoveryOutcome {
            restored_blocks: blocks,
            perturbation_norm: 0.0,
            full_recovery_norm: 0.0,
            mean_restored_age: 0.0,
        },
    };
    // (run key, unit key) of trial `t`'s unit at point `p`, failing at
    // T = 30 and restoring `restoration` (`None`: not found).
    let key = |sc: &RecoveryScenario,
               blocks: usize,
               p: usize,
               t: usize,
               restoration: Option<Restoration>| {
        let conv = Convergence {
            criterion: 0.5,
            max_iterations: sc.convergence.max_iterations,
        };
        let points = sc.points();
        let mut prep = prepare(60, &points[p], sc.ps_nodes, blocks, sc.meta.seed, t);
        prep.failure_iteration = 30;
        prep.restoration = restoration;
        let k = unit_key(sc, &points[p], t, &prep, blocks).unwrap();
        let run = if k.whole_state {
            RunKey::whole_state(sc, &data, &opts, &conv)
        } else {
            RunKey::new(sc, &data, &opts, &conv, blocks)
        };
        (run.unwrap().0, k)
    };
    let layer = load("scar-partial-cnn-bylayer-mnist");
    let shard = load("scar-partial-cnn-byshard-mnist");
    let whole = |n: usize, c: u32| Some(restored(n, &|_| c));
    // Every block from x(20): the same key under both, at two points.
    let a = key(&layer, 10, 0, 1, whole(10, 20));
    assert!(a.1.whole_state);
    assert_eq!(a, key(&shard, 76, 0, 1, whole(76, 20)));
    assert_eq!(a, key(&shard, 76, 3, 1, whole(76, 20)));
    // Another iteration, another T, another trial's data order (per
    // trial): other keys.
    assert_ne!(a, key(&shard, 76, 0, 1, whole(76, 0)));
    let mut per_trial = shard.clone();
    per_trial.data_order = crate::scenario::DataOrderMode::PerTrial;
    assert_ne!(a, key(&per_trial, 76, 0, 1, whole(76, 20)));
    let b = key(&per_trial, 76, 0, 2, whole(76, 20));
    assert_ne!(key(&per_trial, 76, 0, 1, whole(76, 20)), b);
    // Not every block, or not from one iteration: keyed in full, and
    // the panels' keys differ.
    let most = Some(Restoration {
        blocks: restored(76, &|_| 20).blocks[1..].to_vec(),
        ..restored(76, &|_| 20)
    });
    let mixed = Some(restored(76, &|b| if b == 0 { 0 } else { 20 }));
    for r in [most, mixed] {
        let k = key(&shard, 76, 0, 1, r);
        assert!(!k.1.whole_state);
        assert_ne!(k, key(&layer, 10, 0, 1, whole(10, 20)));
        assert_ne!(k.0, a.0);
    }
    // Another model spec (learning rate): another whole-state run key.
    let mut lr = layer.clone();
    match &mut lr.model {
        ModelSpec::Cnn(m) => m.learning_rate *= 2.0,
        m => panic!("not a CNN: {m:?}"),
    }
    assert_ne!(a.0, key(&lr, 10, 0, 1, whole(10, 20)).0);
}
/// Unperturbed runs are computed once while a scenario or a chain holds
/// them, and go when none does; a failed computation stores nothing.
#[test]
fn unperturbed_runs_live_while_a_chain_pins_them() {
    let store = SharedOutcomes::new();
    let key = BaselinesKey("runs".into());
    let other = BaselinesKey("other runs".into());
    let computed = std::sync::atomic::AtomicUsize::new(0);
    let compute = |v: u32| {
        computed.fetch_add(1, Ordering::Relaxed);
        Ok(vec![v])
    };
    let chain = store.chain();
    let a = chain.baselines(&key, || compute(1)).unwrap();
    // Within the chain, after the scenario dropped its own handle.
    drop(a);
    let b = chain.baselines(&key, || compute(2)).unwrap();
    assert_eq!(*b, vec![1]);
    // Another chain, while the first lives; another key is computed.
    let second = store.chain();
    assert_eq!(*second.baselines(&key, || compute(3)).unwrap(), vec![1]);
    assert_eq!(*second.baselines(&other, || compute(4)).unwrap(), vec![4]);
    assert_eq!(computed.load(Ordering::Relaxed), 2);
    assert_eq!(store.baselines_taken(), 2);
    // Nobody holds them any more: computed again.
    drop((b, chain, second));
    let third = store.chain();
    assert_eq!(*third.baselines(&key, || compute(5)).unwrap(), vec![5]);
    assert_eq!(computed.load(Ordering::Relaxed), 3);
    // A failure stores nothing; the next request computes.
    let failed = third.baselines::<Vec<u32>>(&other, || anyhow::bail!("no data"));
    assert!(failed.is_err());
    assert_eq!(*third.baselines(&other, || compute(6)).unwrap(), vec![6]);
    // Dead slots leave the map.
    drop(third);
    let _ = store
        .chain()
        .baselines(&BaselinesKey("x".into()), || compute(7));
    assert!(store.store.baselines.lock().unwrap().len() <= 1);
}
