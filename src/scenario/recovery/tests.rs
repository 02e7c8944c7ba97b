//! Tests of the `recovery` scenario kind: points expand, errors name the
//! field and the line.

use super::*;

pub(crate) const GOOD: &str = r#"
kind = "recovery"
name = "t"
title = "test"
trials = 3
seed = 1
recovery = "partial"

[model]
kind = "mlr"
dataset = "mnist"
batch_size = 100
learning_rate = 1e-5

[convergence]
criterion = 100.0
max_iterations = 50

[failure]
iteration = { distribution = "geometric", p = 0.1 }
lost = { fraction = 0.5 }

[checkpoint]
interval = 8

[sweep]
lost_fraction = [0.25, 0.5]

[[series]]
name = "full"
recovery = "full"

[[series]]
name = "partial"

[[series]]
name = "ref"
checkpoint_fraction = 1.0
reference = true
"#;

fn parse_str(t: &str) -> Result<RecoveryScenario> {
    parse(&SourceText::new(t, "test.toml"))
}

#[test]
fn parses_and_expands_points() {
    let s = parse_str(GOOD).unwrap();
    assert_eq!(s.meta.trials, 3);
    assert_eq!(s.ps_nodes, 8);
    let pts = s.points();
    assert_eq!(pts.len(), 5);
    assert_eq!(pts[0].config.recovery, RecoveryPolicy::Full);
    assert_eq!(pts[1].config.loss, LossSpec::Fraction(0.5));
    assert_eq!(
        pts[4].x, 0.5,
        "reference series sits at its own lost fraction"
    );
}

#[test]
fn errors_name_the_field_and_line() {
    let e = parse_str(&GOOD.replace("p = 0.1", "p = 1.5"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("failure.iteration.p")
            && e.contains("outside (0, 1]")
            && e.contains("test.toml:"),
        "{e}"
    );
    let e = parse_str(&GOOD.replace("interval = 8", "interval = 0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("C = 0"), "{e}");
    let e = parse_str(&GOOD.replace("trials = 3", "trials = 0"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("test.toml:5:10") && e.contains("at least 1"),
        "{e}"
    );
    let e = parse_str(&GOOD.replace("[0.25, 0.5]", "[0.25, 1.5]"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("1.5") && e.contains("lost_fraction = 1.5"),
        "{e}"
    );
    let e = parse_str(&GOOD.replace("seed = 1", "seed = 1\ncolour = 2"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown field `colour`") && e.contains("line 7"),
        "{e}"
    );
    let e = parse_str(&GOOD.replace("batch_size", "batchsize"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `batchsize`"), "{e}");
    let e = parse_str(&GOOD.replace(
        "[checkpoint]\ninterval = 8",
        "[checkpoint]\ninterval = 4\nfraction = 0.125",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("whole number"), "{e}");
}
