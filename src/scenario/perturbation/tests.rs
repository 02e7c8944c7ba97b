//! Unit tests of the perturbation scenario parser.

use super::*;

const GOOD: &str = r#"
kind = "perturbation"
name = "t"
title = "test"
trials = 5
seed = 3

[model]
kind = "qp"
step_size = 0.01

[convergence]
unperturbed_iterations = 100
max_iterations = 1000

[theory]
optimum = "analytic"
rate = "analytic"

[[series]]
name = "random"
perturbation = "random"
at = { iteration = 50 }
norm = { distribution = "log-uniform", min = 1e-3, max = 1.0 }

[[series]]
name = "reset"
perturbation = "reset"
at = { probability = 0.01 }
fraction = { distribution = "uniform", min = 0.0, max = 1.0 }
"#;

fn parse_str(t: &str) -> Result<PerturbationScenario> {
    parse(&SourceText::new(t, "p.toml"))
}

#[test]
fn parses() {
    let s = parse_str(GOOD).unwrap();
    assert_eq!(s.series.len(), 2);
    assert_eq!(s.criterion, CriterionSpec::UnperturbedIterations(100));
    assert_eq!(s.theory.rate, RateMethod::Analytic);
    assert_eq!(s.series[0].schedule, Schedule::Once { iteration: 50 });
    assert_eq!(
        s.series[1].schedule,
        Schedule::EachIteration { probability: 0.01 }
    );
    assert_eq!(s.series[0].norm.unwrap().relative_to, NormScale::Absolute);
    assert!(s.series[1].fraction.is_some() && s.series[1].norm.is_none());
    let d = s.series[0].norm.unwrap().draw;
    assert!((d.at(0.0) - 1e-3).abs() < 1e-15 && (d.at(0.5) - 10f64.powf(-1.5)).abs() < 1e-12);
}

#[test]
fn a_run_fraction_places_the_perturbation_within_the_run() {
    let s =
        parse_str(&GOOD.replace("at = { iteration = 50 }", "at = { run_fraction = 0.5 }")).unwrap();
    assert_eq!(
        s.series[0].schedule,
        Schedule::AtRunFraction { fraction: 0.5 }
    );
    assert_eq!(s.series[0].schedule.once_at(100), Some(50));
    assert_eq!(s.series[0].schedule.once_at(21), Some(10));
    assert_eq!(Schedule::Once { iteration: 7 }.once_at(3), Some(7));
    assert_eq!(s.series[1].schedule.once_at(100), None);
}

#[test]
fn errors_name_the_field() {
    let cases = [
        ("min = 1e-3", "min = 0.0", "must be positive"),
        (
            "min = 0.0, max = 1.0 }",
            "min = 0.0, max = 1.5 }",
            "at most 1",
        ),
        ("probability = 0.01", "probability = 1.5", "outside (0, 1]"),
        (
            "at = { iteration = 50 }",
            "at = { run_fraction = 1.0 }",
            "outside (0, 1): the perturbation must come before",
        ),
        (
            "at = { iteration = 50 }",
            "at = { iteration = 50, run_fraction = 0.5 }",
            "exactly one of `iteration`",
        ),
        (
            "at = { iteration = 50 }",
            "at = { iteration = 50, probability = 0.1 }",
            "exactly one of `iteration`",
        ),
        (
            "unperturbed_iterations = 100\n",
            "unperturbed_iterations = 100\ncriterion = 1.0\n",
            "exactly one of `criterion`",
        ),
        ("step_size = 0.01", "step_size = 0.3", "model.step_size"),
        (
            "\"log-uniform\"",
            "\"normal\"",
            "unknown distribution `normal`",
        ),
        (
            "perturbation = \"random\"",
            "perturbation = \"noise\"",
            "unknown variant",
        ),
        ("seed = 3", "seed = 3\nextra = 1", "unknown field `extra`"),
        (
            "optimum = \"analytic\"",
            "optimum = \"analytic\"\noptimum_iterations = 5",
            "exactly one of `optimum_iterations",
        ),
        (
            "fraction = { distribution",
            "norm = { distribution = \"fixed\", value = 1.0 }\nfraction = { distribution",
            "takes `fraction`",
        ),
    ];
    for (from, to, want) in cases {
        let text = GOOD.replacen(from, to, 1);
        assert_ne!(text, GOOD, "{from}");
        let e = format!("{:#}", parse_str(&text).unwrap_err());
        assert!(e.contains(want), "{from} -> {to}: {e}");
        assert!(e.contains("p.toml"), "{e}");
    }
    let mlr = GOOD.replace(
        "kind = \"qp\"\nstep_size = 0.01",
        "kind = \"mlr\"\ndataset = \"mnist\"\nbatch_size = 10\nlearning_rate = 1e-5",
    );
    let e = parse_str(&mlr).unwrap_err().to_string();
    assert!(
        e.contains("`analytic` needs a model with a known optimum"),
        "{e}"
    );
    let e = parse_str(&mlr.replace("optimum = \"analytic\"", "optimum_iterations = 50"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`analytic` needs a model with a known rate"),
        "{e}"
    );
}
