use std::sync::Arc;

use super::*;
use crate::data::synthetic;
use crate::engine::run_baseline;
use crate::model::mlr::{Mlr, MlrConfig};
use crate::policy::Selector;
use crate::rng::{Purpose, stream};

/// The metric of x(`steps`) of the unperturbed run with `run_seed`: a
/// criterion that run meets after about that many iterations.
fn metric_after<M: Model>(model: &M, steps: usize, run_seed: u64) -> f64 {
    let mut ws = model.workspace();
    let mut probe = model.init();
    for iteration in 0..steps {
        model.step(
            &mut probe,
            IterCtx {
                iteration,
                run_seed,
            },
            &mut ws,
        );
    }
    model.metric(&probe, &mut ws)
}

/// A failure at an iteration with a full checkpoint due: written first,
/// the checkpoint is x(T) itself and full recovery costs nothing; the
/// failure first leaves the checkpoint before it, and rework follows. One
/// iteration later both orders restore the same checkpoint.
#[test]
fn event_order_decides_whether_the_checkpoint_due_at_t_survives() {
    let model = Mlr::new(
        Arc::new(synthetic::mnist_like(5, 0.02)),
        &MlrConfig {
            batch_size: 100,
            learning_rate: 1e-5,
        },
    );
    let convergence = Convergence {
        criterion: metric_after(&model, 24, 3),
        max_iterations: 400,
    };
    let baseline = run_baseline(&model, &convergence, 3).expect("converges");
    assert!(baseline.iterations() > 10);
    let policy = CheckpointPolicy {
        interval: 8,
        fraction: 1.0,
        selector: Selector::Priority,
        budget: crate::policy::WriteBudget::Parameters,
    };
    let lost: Vec<usize> = (0..model.block_count()).collect();
    let run = |t: usize, order: EventOrder| {
        let setup = TrialSetup {
            failure_iteration: t,
            lost: &lost,
            checkpoint: &policy,
            order,
            recovery: RecoveryPolicy::Full,
            checkpoint_rng: stream(1, Purpose::CheckpointSelection, 0, 0),
            restoration: None,
        };
        let mut ws = model.workspace();
        run_trial(
            &model,
            &baseline,
            &convergence,
            setup,
            EngineOptions::default(),
            &mut ws,
        )
    };
    let first = run(8, EventOrder::CheckpointFirst);
    assert_eq!(first.rework_iterations(), 0);
    let lost_ckpt = run(8, EventOrder::FailureFirst);
    assert!(lost_ckpt.rework_iterations() > 0, "{lost_ckpt:?}");
    assert_eq!(
        run(9, EventOrder::CheckpointFirst),
        run(9, EventOrder::FailureFirst)
    );
}

/// A full recovery from a full checkpoint restores one of the
/// unperturbed run's states; for ALS (a step depends on the state alone)
/// the loop finishes such a trial from the run's metrics, and the
/// outcome is what stepping it gives — for every failure iteration, both
/// event orders, and a cap that cuts the rework short. Partial recovery
/// restores a mixture no state of the run equals, so it is stepped; MLR
/// (a data order) never rejoins.
#[test]
fn a_trial_restored_to_an_unperturbed_state_finishes_from_its_metrics() {
    use crate::data::synthetic_ratings;
    use crate::model::mf::{Mf, MfConfig};
    let model = Mf::new(
        Arc::new(synthetic_ratings::movielens_like(3, 0.04)),
        &MfConfig {
            factors: 5,
            regularization: 0.1,
            init_seed: 4,
        },
    );
    let criterion = metric_after(&model, 30, 0);
    let mut ws = model.workspace();
    let baseline = run_baseline(
        &model,
        &Convergence {
            criterion,
            max_iterations: 400,
        },
        0,
    )
    .expect("converges");
    let b = baseline.iterations();
    assert!(b > 20, "{b}");
    let policy = CheckpointPolicy {
        interval: 8,
        fraction: 1.0,
        selector: Selector::Priority,
        budget: crate::policy::WriteBudget::Parameters,
    };
    let blocks = model.block_count();
    let all: Vec<usize> = (0..blocks).collect();
    let half: Vec<usize> = (0..blocks).step_by(2).collect();
    // The last half: columns of R only (the stand-in has more items
    // than users), so L is x(T)'s whatever is restored.
    let tail: Vec<usize> = (blocks / 2..blocks).collect();
    let (mut rejoined, mut stepped, mut capped) = (0, 0, false);
    for cap in [400, b + 3] {
        let convergence = Convergence {
            criterion,
            max_iterations: cap,
        };
        for t in [1, 7, 8, 9, 15, b - 1] {
            for order in [EventOrder::FailureFirst, EventOrder::CheckpointFirst] {
                for (recovery, lost) in [
                    (RecoveryPolicy::Full, &all),
                    (RecoveryPolicy::Full, &half),
                    (RecoveryPolicy::Partial, &half),
                    (RecoveryPolicy::Partial, &tail),
                ] {
                    let setup = || TrialSetup {
                        failure_iteration: t,
                        lost,
                        checkpoint: &policy,
                        order,
                        recovery,
                        checkpoint_rng: stream(1, Purpose::CheckpointSelection, 0, 0),
                        restoration: None,
                    };
                    let run = |rejoin: bool| {
                        let opts = EngineOptions {
                            rejoin,
                            ..EngineOptions::default()
                        };
                        let mut ws = model.workspace();
                        run_trial(&model, &baseline, &convergence, setup(), opts, &mut ws)
                    };
                    let (fast, brute) = (run(true), run(false));
                    assert_eq!(fast, brute, "t {t} {order:?} {recovery:?} cap {cap}");
                    let mut hook = Recovery {
                        setup: setup(),
                        fork: ForkMode::Fork,
                        rejoin: true,
                        outcome: None,
                    };
                    let (k0, x) = hook.start(&model, &baseline, &mut ws);
                    let along = along_unperturbed(&model, &baseline, &convergence, k0, &x);
                    // Partial recovery rejoins only where the checkpoint is x(T).
                    match (recovery, along) {
                        (RecoveryPolicy::Full, None) => panic!("t {t} {order:?} not rejoined"),
                        (RecoveryPolicy::Full, Some(_)) => rejoined += 1,
                        (_, None) => stepped += 1,
                        (_, Some(_)) => {}
                    }
                    if let Some(f) = along {
                        assert_eq!(
                            (f.iterations, f.converged),
                            (brute.iterations_to_converge, brute.converged)
                        );
                        capped |= !f.converged;
                    }
                }
            }
        }
    }
    assert_eq!(rejoined, 2 * 6 * 2 * 2);
    assert!(stepped > 0);
    // Under the smaller cap some rework runs past it.
    assert!(capped);
    let mlr = Mlr::new(
        Arc::new(synthetic::mnist_like(5, 0.02)),
        &MlrConfig {
            batch_size: 100,
            learning_rate: 1e-5,
        },
    );
    let x = mlr.init();
    assert_eq!(mlr.same_state(&x, &x), None);
}

/// A trial that runs past convergence reports the first iteration that
/// met the criterion, is stepped to the cap, and sees exactly the states
/// of the unperturbed run (the hook does not change them); a trial that
/// does not, in the same cohort, stops where the unperturbed run does.
#[test]
fn a_trial_can_run_past_convergence_to_the_cap() {
    struct Watch {
        past: bool,
        seen: Vec<(usize, f64)>,
    }
    impl<M: Model> TrialHook<M> for Watch {
        fn start(
            &mut self,
            model: &M,
            _: &Baseline<M::State>,
            _: &mut M::Workspace,
        ) -> (usize, M::State) {
            (0, model.init())
        }
        fn before_step(&mut self, model: &M, k: usize, state: &mut M::State) {
            let mut ws = model.workspace();
            self.seen.push((k, model.metric(state, &mut ws)));
        }
        fn runs_past_convergence(&self) -> bool {
            self.past
        }
    }
    let model = Mlr::new(
        Arc::new(synthetic::mnist_like(5, 0.02)),
        &MlrConfig {
            batch_size: 100,
            learning_rate: 1e-5,
        },
    );
    let criterion = metric_after(&model, 12, 3);
    let mut ws = model.workspace();
    let baseline = run_baseline(
        &model,
        &Convergence {
            criterion,
            max_iterations: 400,
        },
        3,
    )
    .expect("converges");
    let b = baseline.iterations();
    let cap = b + 7;
    let convergence = Convergence {
        criterion,
        max_iterations: cap,
    };
    for certify in [false, true] {
        let mut hooks = [
            Watch {
                past: true,
                seen: Vec::new(),
            },
            Watch {
                past: false,
                seen: Vec::new(),
            },
        ];
        let finish = run_hooked(
            &model,
            &baseline,
            &convergence,
            &mut hooks,
            certify,
            &mut ws,
            &|| false,
        )
        .expect("not stopped");
        let met = Finish {
            iterations: b,
            converged: true,
        };
        assert_eq!(finish, vec![met, met], "certify: {certify}");
        let ks = |h: &Watch| h.seen.iter().map(|s| s.0).collect::<Vec<_>>();
        assert_eq!(ks(&hooks[0]), (0..cap).collect::<Vec<_>>());
        assert_eq!(ks(&hooks[1]), (0..b).collect::<Vec<_>>());
        for (k, m) in &hooks[0].seen[..=b] {
            assert_eq!(m.to_bits(), baseline.metrics[*k].to_bits(), "x({k})");
        }
    }
}

/// Trials of different unperturbed runs (a per-trial data order) in one
/// cohort ([`run_cohort_on`], LDA's lanes each with its own run seed) get
/// exactly the outcomes each gets alone with its own run, the brute-force
/// path (every metric evaluated) included; a cohort of one run's trials
/// takes [`run_hooked`]'s shared path and agrees too.
#[test]
fn a_cohort_across_unperturbed_runs_matches_trials_alone() {
    use crate::data::corpus::real_shape;
    use crate::data::{DatasetName, lda_standin};
    use crate::model::lda::{Lda, LdaConfig};
    let shape = real_shape(DatasetName::Reuters).unwrap();
    let model = Lda::new(
        Arc::new(lda_standin::generate(DatasetName::Reuters, &shape, 5, 0.01)),
        &LdaConfig {
            topics: 20,
            alpha: 1.0,
            beta: 1.0,
            init_seed: 9,
        },
    );
    assert!(model.cohorts_span_data_orders());
    let convergence = Convergence {
        criterion: metric_after(&model, 12, 100),
        max_iterations: 60,
    };
    let baselines: Vec<Baseline<_>> = [100u64, 101, 102]
        .iter()
        .map(|&s| run_baseline(&model, &convergence, s).expect("converges"))
        .collect();
    let b = baselines.iter().map(|b| b.iterations()).min().unwrap();
    assert!(b > 4, "{b}");
    let policy = CheckpointPolicy {
        interval: 3,
        fraction: 1.0,
        selector: Selector::Priority,
        budget: crate::policy::WriteBudget::Parameters,
    };
    let blocks = model.block_count();
    let lost: Vec<Vec<usize>> = (0..4)
        .map(|j| (j..blocks).step_by(2 + j).collect())
        .collect();
    // Trial i: run i % 3, failure at 1 + i % (b − 1), lost set i % 4,
    // partial or full recovery.
    let n = 11;
    let setup = |i: usize| TrialSetup {
        failure_iteration: 1 + i % (b - 1),
        lost: &lost[i % 4],
        checkpoint: &policy,
        order: EventOrder::FailureFirst,
        recovery: if i.is_multiple_of(2) {
            RecoveryPolicy::Partial
        } else {
            RecoveryPolicy::Full
        },
        checkpoint_rng: stream(1, Purpose::CheckpointSelection, i as u64, 0),
        restoration: None,
    };
    let mut ws = model.workspace();
    let alone: Vec<TrialOutcome> = (0..n)
        .map(|i| {
            let brute = EngineOptions {
                certify: false,
                ..EngineOptions::default()
            };
            run_trial(
                &model,
                &baselines[i % 3],
                &convergence,
                setup(i),
                brute,
                &mut ws,
            )
        })
        .collect();
    let forks: Vec<&Baseline<_>> = (0..n).map(|i| &baselines[i % 3]).collect();
    let together = run_cohort_on(
        &model,
        &forks,
        &convergence,
        (0..n).map(setup).collect(),
        EngineOptions::default(),
        &mut ws,
        &|| false,
    )
    .expect("not stopped");
    assert_eq!(together, alone);
    assert!(
        alone.iter().any(|o| o.rework_iterations() != 0),
        "the failures cost something: {alone:?}"
    );
    // One run's trials: the shared path.
    let same: Vec<usize> = (0..n).filter(|i| i % 3 == 1).collect();
    let one = run_cohort(
        &model,
        &baselines[1],
        &convergence,
        same.iter().map(|&i| setup(i)).collect(),
        EngineOptions::default(),
        &mut ws,
        &|| false,
    )
    .expect("not stopped");
    let want: Vec<TrialOutcome> = same.iter().map(|&i| alone[i]).collect();
    assert_eq!(one, want);
}
