//! Tests of the perturbation runner: the drawn perturbations have their norms,
//! and an adversarial QP trial sits at the theorem's bound.

use super::tables::derive;
use super::trial::Buffers;
use super::*;
use crate::experiment::reference::reference;
use crate::model::ModelSpec;
use crate::model::quadratic::qp::{OPTIMUM, Qp, QpConfig};
use crate::rng::{Purpose, stream};
use crate::scenario::perturbation::{CriterionSpec, Draw, NormSpec, RateMethod, TheorySpec};
use crate::scenario::perturbation::{NormScale, PerturbationSeries, Schedule};
use approx::assert_abs_diff_eq;

fn qp_reference(qp: &Qp) -> Reference<crate::model::quadratic::qp::QpState> {
    reference(
        qp,
        &ModelSpec::Qp {
            step_size: 0.01,
            x0: [0.0; 4],
        },
        CriterionSpec::UnperturbedIterations(300),
        2000,
        &TheorySpec {
            optimum: crate::scenario::perturbation::OptimumSpec::Analytic,
            rate: RateMethod::Analytic,
        },
        1.0,
        0,
        None,
    )
    .unwrap()
}

fn series(kind: PerturbationKind, norm: f64, fraction: f64) -> PerturbationSeries {
    PerturbationSeries {
        name: kind.name().into(),
        kind,
        schedule: Schedule::Once { iteration: 100 },
        norm: (kind != PerturbationKind::Reset).then_some(NormSpec {
            draw: Draw::Fixed { value: norm },
            relative_to: NormScale::Absolute,
        }),
        fraction: (kind == PerturbationKind::Reset).then_some(Draw::Fixed { value: fraction }),
    }
}

/// Each perturbation kind has the norm it was asked for, measured as the
/// change of the state, and the direction its definition says.
#[test]
fn perturbation_kinds_have_their_norms() {
    let qp = Qp::new(&QpConfig {
        step_size: 0.01,
        x0: [0.0; 4],
    });
    let r = qp_reference(&qp);
    assert_eq!(r.baseline_iterations(), 300);
    assert_abs_diff_eq!(r.rate, 0.99);
    assert_abs_diff_eq!(r.initial_distance, 2.0, epsilon = 1e-12);
    let ctx = Ctx {
        model: &qp,
        baseline: &r.baseline,
        optimum: Some(&r.optimum),
        flat: qp.flat_params(),
        optimum_flat: OPTIMUM.to_vec(),
        init: qp.init(),
        fork: ForkMode::Fork,
    };
    let mut buf = Buffers {
        params: vec![0.0; 4],
        noise: vec![0.0; 4],
        blocks: Vec::new(),
    };
    let x = r.baseline.states[100];
    let before = qp.metric(&x, &mut ());
    // Random: ‖δ‖ = 0.3 exactly, directions differ between draws.
    let mut rng = stream(1, Purpose::Perturbation, 0, 1);
    let mut a = x;
    let (n, f) = ctx.perturb(
        &series(PerturbationKind::Random, 0.3, 0.0),
        &mut a,
        &mut rng,
        &mut buf,
    );
    assert_abs_diff_eq!(n, 0.3, epsilon = 1e-14);
    assert!(f.is_nan());
    let mut b = x;
    ctx.perturb(
        &series(PerturbationKind::Random, 0.3, 0.0),
        &mut b,
        &mut rng,
        &mut buf,
    );
    assert!(qp.distance(&a, &b) > 1e-3, "two random directions");
    // Adversarial: straight away from x*, so the distance grows by ‖δ‖.
    let mut c = x;
    let (n, _) = ctx.perturb(
        &series(PerturbationKind::Adversarial, 0.3, 0.0),
        &mut c,
        &mut rng,
        &mut buf,
    );
    assert_abs_diff_eq!(n, 0.3, epsilon = 1e-14);
    assert_abs_diff_eq!(qp.metric(&c, &mut ()), before + 0.3, epsilon = 1e-12);
    // Reset half of the 4 coordinates to x(0) = 0: ‖δ‖ = √2·x_i(100).
    let mut d = x;
    let (n, f) = ctx.perturb(
        &series(PerturbationKind::Reset, 0.0, 0.5),
        &mut d,
        &mut rng,
        &mut buf,
    );
    assert_eq!(f, 0.5);
    assert_eq!(d.x.iter().filter(|v| **v == 0.0).count(), 2);
    assert_abs_diff_eq!(n, 2f64.sqrt() * x.x[0], epsilon = 1e-12);
    assert_abs_diff_eq!(x.x[0], 1.0 - 0.99f64.powi(100), epsilon = 1e-12);
}

/// An adversarial perturbation on the QP (x(0) − x* on the slowest
/// eigenvector) attains Theorem 1's bound up to integer rounding.
#[test]
fn adversarial_qp_trial_sits_at_the_bound() {
    let qp = Qp::new(&QpConfig {
        step_size: 0.01,
        x0: [0.0; 4],
    });
    let r = qp_reference(&qp);
    let ctx = Ctx {
        model: &qp,
        baseline: &r.baseline,
        optimum: Some(&r.optimum),
        flat: qp.flat_params(),
        optimum_flat: OPTIMUM.to_vec(),
        init: qp.init(),
        fork: ForkMode::Fork,
    };
    let convergence = Convergence {
        criterion: r.criterion,
        max_iterations: 2000,
    };
    for norm in [1e-3, 0.05, 0.7] {
        let s = series(PerturbationKind::Adversarial, norm, 0.0);
        let (first, timing) = first_perturbation(&s, 5, 0, r.baseline_iterations());
        let trial = ctx.trial(&s, first.expect("once"), timing, 5, 0);
        let t = ctx
            .run_cohort(vec![trial], &convergence, true, &mut (), &|| false)
            .expect("not stopped")
            .remove(0);
        let row = derive(&t, &r.facts(), &r.predictor);
        assert!(t.converged);
        assert!(row.cost <= row.bound, "{} > {}", row.cost, row.bound);
        assert!(row.cost > row.bound - 1.0, "{} vs {}", row.cost, row.bound);
    }
}

/// x* comes before the trials when a series perturbs relative to it, or when
/// `--plan` times the setup apart (it would otherwise be timed as part of
/// the sample unit and scaled up); resets alone compute it beside them.
#[test]
fn x_star_comes_first_when_a_series_needs_it_or_a_plan_times_the_setup() {
    let load = |name: &str| match crate::scenario::load(name).expect("bundled").0 {
        crate::scenario::Scenario::Perturbation(p) => p,
        _ => panic!("{name} is a perturbation scenario"),
    };
    let (bar, cancel) = (
        indicatif::ProgressBar::hidden(),
        std::sync::atomic::AtomicBool::new(false),
    );
    let run = || Driver::new(None, Default::default(), None, &bar, &cancel);
    let reset = load("scar-reset-lda");
    assert!(!optimum_first(&reset, &run()));
    assert!(optimum_first(&reset, &run().timing_setup()));
    let adversarial = load("scar-bound-mlr-adversarial");
    assert!(optimum_first(&adversarial, &run()));
}
