//! Unit tests of the `protocol` scenario parser.

use super::*;

const RUNTIME: &str = r#"
kind = "protocol"
name = "rt"
title = "runtime"
trials = 4
seed = 1

[cluster]
workers = [2, 4]
compute_time = { distribution = "exponential", rate = 1.0 }

[runtime]
updates = 50

[[series]]
protocol = "k-sync"
k = "divisors"

[[series]]
protocol = "k-batch-async"
k = 3
"#;

const TRAINING: &str = r#"
kind = "protocol"
name = "tr"
title = "training"
trials = 2
seed = 1

[cluster]
workers = 4
compute_time = { distribution = "shifted-exponential", shift = 0.5, rate = 1 }
communication_time = { distribution = "uniform", low = 0.0, high = 0.1 }

[model]
kind = "quadratic"
dimension = 10
l = 2.0
c = 0.5
sigma2 = 1.0
batch_size = 1
learning_rate = 0.1

[training]
horizon = 100.0
grid_step = 10.0

[[series]]
protocol = "k-async"
k = [1, 4]

[[series]]
name = "adaptive"
protocol = "k-async"
k_schedule = [{ from = 0.0, k = 1 }, { from = 50.0, k = 4 }]

[[series]]
name = "aware"
protocol = "k-async"
k = 1
staleness_aware = { c = 0.01 }
"#;

fn p(t: &str) -> Result<ProtocolScenario> {
    parse(&SourceText::new(t, "test.toml"))
}

#[test]
fn runtime_points() {
    let s = p(RUNTIME).unwrap();
    let pts = s.points();
    let labels: Vec<(String, usize)> = pts.iter().map(|p| (p.label.clone(), p.workers)).collect();
    assert_eq!(
        labels,
        vec![
            ("k-sync K=1".into(), 2),
            ("k-sync K=2".into(), 2),
            ("k-sync K=1".into(), 4),
            ("k-sync K=2".into(), 4),
            ("k-sync K=4".into(), 4),
            ("k-batch-async K=3".into(), 2),
            ("k-batch-async K=3".into(), 4),
        ]
    );
    assert!(matches!(
        s.measure,
        Measure::Runtime(RuntimeConfig {
            warmup_updates: 100,
            updates: 50
        })
    ));
}

#[test]
fn training_points_and_defaults() {
    let s = p(TRAINING).unwrap();
    let t = s.training().unwrap();
    assert_eq!(t.eta, 0.1);
    assert_eq!(t.grid().len(), 11);
    assert_eq!(t.loss_subsample, 2000);
    let pts = s.points();
    assert_eq!(pts.len(), 4);
    assert_eq!(pts[2].label, "adaptive");
    assert_eq!(pts[2].k, None);
    assert_eq!(pts[2].schedule.k_at(60.0), 4);
    assert_eq!(
        s.series[2].staleness_aware,
        Some(StalenessAware {
            c: 0.01,
            eta_max: 0.1
        })
    );
}

#[test]
fn bad_values_are_reported_with_their_place() {
    let e = |t: String| p(&t).unwrap_err().to_string();
    let m = e(RUNTIME.replace("k = 3", "k = 0"));
    assert!(
        m.contains("series.k") && m.contains("not a whole number"),
        "{m}"
    );
    let m = e(RUNTIME.replace(
        "protocol = \"k-sync\"\nk = \"divisors\"",
        "protocol = \"k-sync\"\nk = 3",
    ));
    assert!(m.contains("K = 3 exceeds P = 2"), "{m}");
    let m = e(RUNTIME.replace("rate = 1.0", "rate = -1.0"));
    assert!(
        m.contains("cluster.compute_time") && m.contains("positive"),
        "{m}"
    );
    let m = e(RUNTIME.replace("rate = 1.0", "rate = 1.0, shift = 2.0"));
    assert!(m.contains("`shift` does not apply"), "{m}");
    let m = e(RUNTIME.replace("\"exponential\"", "\"gamma\""));
    assert!(m.contains("unknown distribution `gamma`"), "{m}");
    let m = e(RUNTIME.replace("\"k-sync\"", "\"k-synch\""));
    assert!(m.contains("k-synch") && m.contains("line"), "{m}");
    let m = e(RUNTIME.replace("[runtime]\nupdates = 50\n", ""));
    assert!(m.contains("[runtime]") && m.contains("[training]"), "{m}");
    let m = e(TRAINING.replace(
        "staleness_aware = { c = 0.01 }",
        "staleness_aware = { c = 0.0 }",
    ));
    assert!(m.contains("staleness_aware.c"), "{m}");
    let m = e(TRAINING.replace("{ from = 0.0, k = 1 }, ", ""));
    assert!(m.contains("time 0"), "{m}");
    let m = e(TRAINING.replace("horizon = 100.0", "horizon = -1.0"));
    assert!(m.contains("training.horizon"), "{m}");
    let m = e(TRAINING.replace("kind = \"quadratic\"", "kind = \"svm\""));
    assert!(
        m.contains("unknown model `svm`") && m.contains("quadratic"),
        "{m}"
    );
    let m = e(RUNTIME.replace("k = 3", "k = 3\nstaleness_aware = { c = 1.0 }"));
    assert!(m.contains("only applies to [training]"), "{m}");
    let m = e(RUNTIME.replace(
        "\"exponential\", rate = 1.0",
        "\"empirical\", file = \"nope.csv\"",
    ));
    assert!(
        m.contains("nope.csv") && m.contains("cluster.compute_time"),
        "{m}"
    );
    let m = e(RUNTIME.replace("workers = [2, 4]", "workers = []"));
    assert!(m.contains("cluster.workers"), "{m}");
    let m = e(RUNTIME.replace(
        "protocol = \"k-batch-async\"\nk = 3",
        "protocol = \"k-sync\"\nk = 1\nname = \"k-sync K=1\"",
    ));
    assert!(m.contains("appears twice"), "{m}");
}

#[test]
fn k_rules_take_defaults_and_max_defaults_to_p() {
    let s = p(&TRAINING.replace(
        "k_schedule = [{ from = 0.0, k = 1 }, { from = 50.0, k = 4 }]",
        "k_rule = { kind = \"plateau\" }",
    ))
    .unwrap();
    let pts = s.points();
    assert_eq!(pts[2].label, "adaptive");
    assert_eq!(pts[2].k, None);
    assert_eq!(
        pts[2].rule,
        Some(PlateauRule {
            start: 1,
            factor: 2,
            max: 4,
            window: 50,
            tolerance: 0.0
        })
    );
    assert_eq!(pts[2].schedule, KSchedule::fixed(1));
    assert_eq!(pts[2].max_k(), 4);
    assert_eq!(
        pts[2].describe_k(),
        "plateau:start=1;factor=2;max=4;window=50;tolerance=0"
    );
    // Without a name: "<protocol> plateau rule".
    let s = p(&TRAINING.replace(
        "name = \"adaptive\"\nprotocol = \"k-async\"\nk_schedule = [{ from = 0.0, k = 1 }, { from = 50.0, k = 4 }]",
        "protocol = \"k-batch-async\"\nk_rule = { kind = \"plateau\", start = 2, factor = 4, max = 16, window = 7, tolerance = 0.25 }",
    ))
    .unwrap();
    let pt = &s.points()[2];
    assert_eq!(pt.label, "k-batch-async plateau rule");
    assert_eq!(pt.rule.unwrap().max, 16, "batch variants may exceed P");
    assert_eq!(pt.rule.unwrap().tolerance, 0.25);
    // Neither k, nor k_schedule, nor k_rule.
    let m = p(&TRAINING.replace(
        "k_schedule = [{ from = 0.0, k = 1 }, { from = 50.0, k = 4 }]\n",
        "",
    ))
    .unwrap_err()
    .to_string();
    assert!(m.contains("`k_rule`") && m.contains("missing"), "{m}");
}
