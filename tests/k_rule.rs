//! The adaptive K rule (`k_rule` in a `[[series]]`) end to end on the noisy
//! quadratic: it runs under every protocol, gives the same bytes on 1 and 2
//! threads, switches on the stand-in, never passes its max, records its
//! switches in `k_switches.csv`, is reported beside the oracle schedule, and
//! bad rules are rejected clearly.

use crate::common;

use common::{assert_same_bytes_on_one_and_two_threads, scarsim, stderr, tmpdir};
use scarsim::report::Table;
use scarsim::report::figures::Layout;
use scarsim::report::figures::protocol::ErrorRuntime;
use scarsim::report::figures::results::Results;

const SCENARIO: &str = r#"
kind = "protocol"
name = "rule"
title = "adaptive K rule on the quadratic"
trials = 4
seed = 3

[cluster]
workers = 4
compute_time = { distribution = "shifted-exponential", shift = 0.5, rate = 2.0 }

[model]
kind = "quadratic"
dimension = 10
l = 1.0
c = 0.2
sigma2 = 1.0
batch_size = 1
learning_rate = 0.05

[training]
horizon = 100.0
grid_step = 5.0

[[series]]
protocol = "k-async"
k = [1, 4]

[[series]]
name = "oracle"
protocol = "k-async"
k_schedule = [{ from = 0.0, k = 1 }, { from = 30.0, k = 2 }, { from = 60.0, k = 4 }]

[[series]]
name = "rule"
protocol = "k-async"
k_rule = { kind = "plateau", window = 20 }

[[series]]
name = "rule sync"
protocol = "k-sync"
k_rule = { kind = "plateau", window = 20, max = 2 }

[[series]]
name = "rule batch-sync"
protocol = "k-batch-sync"
k_rule = { kind = "plateau", start = 2, factor = 3, max = 6, window = 10, tolerance = 0.05 }

[[series]]
name = "rule batch-async"
protocol = "k-batch-async"
k_rule = { kind = "plateau", window = 20 }
"#;

#[test]
fn a_rule_series_runs_deterministically_and_switches_on_the_stand_in() {
    let dir = tmpdir("k-rule");
    std::fs::write(dir.join("r.toml"), SCENARIO).unwrap();
    assert_same_bytes_on_one_and_two_threads(
        &dir,
        "r.toml",
        "rule",
        &[
            "summary.csv",
            "trials.csv",
            "loss_vs_time.csv",
            "updates.csv",
            "k_switches.csv",
        ],
    );
    let res = dir.join("one/rule");
    // summary.csv keeps its columns; the rule is described in `k_schedule`.
    let summary = Table::read(&res.join("summary.csv")).unwrap();
    assert_eq!(
        summary.header,
        scarsim::experiment::protocol::TRAINING_SUMMARY_COLUMNS
    );
    let (cs, ck, chow) = (
        summary.column("series").unwrap(),
        summary.column("k").unwrap(),
        summary.column("k_schedule").unwrap(),
    );
    let row = summary.rows.iter().find(|r| r[cs] == "rule").unwrap();
    assert_eq!(
        row[chow],
        "plateau:start=1;factor=2;max=4;window=20;tolerance=0"
    );
    assert!(row[ck].is_empty());

    let sw = Table::read(&res.join("k_switches.csv")).unwrap();
    let col = |n: &str| sw.column(n).unwrap();
    let (s, trial, i, time, from, to) = (
        col("series"),
        col("trial"),
        col("switch"),
        col("time"),
        col("k_from"),
        col("k_to"),
    );
    // Only rule series appear, every trial with its start row.
    for (name, start, max) in [
        ("rule", 1, 4),
        ("rule sync", 1, 2),
        ("rule batch-sync", 2, 6),
        ("rule batch-async", 1, 4),
    ] {
        let rows: Vec<&Vec<String>> = sw.rows.iter().filter(|r| r[s] == name).collect();
        for t in 0..4 {
            let mine: Vec<&&Vec<String>> =
                rows.iter().filter(|r| r[trial] == t.to_string()).collect();
            assert_eq!(mine[0][i], "0");
            assert_eq!(mine[0][to], start.to_string());
            assert!(mine.len() >= 2, "{name} trial {t} never switched");
            let mut last = (0.0, start);
            for r in &mine[1..] {
                let (at, k_from, k_to): (f64, usize, usize) = (
                    r[time].parse().unwrap(),
                    r[from].parse().unwrap(),
                    r[to].parse().unwrap(),
                );
                assert!(at >= last.0 && at <= 100.0);
                assert_eq!(k_from, last.1);
                assert!(k_to > k_from && k_to <= max, "{name}: {k_from} -> {k_to}");
                last = (at, k_to);
            }
        }
    }
    assert!(sw.rows.iter().all(|r| r[s].starts_with("rule")));
    // The ×3 rule from 2 with max 6: 2 -> 6 (not 18).
    assert!(
        sw.rows
            .iter()
            .filter(|r| r[s] == "rule batch-sync" && r[i] == "1")
            .all(|r| r[to] == "6")
    );

    // REPORT.md's finding: the rule beside the oracle and the best fixed K.
    let findings = ErrorRuntime
        .findings(&Results::load(&res).unwrap())
        .unwrap();
    let rule = findings
        .iter()
        .find(|f| f.contains("adaptive K rule `rule`"))
        .unwrap_or_else(|| panic!("{findings:#?}"));
    assert!(rule.contains("oracle schedule `oracle`"), "{rule}");
    assert!(rule.contains("best fixed K of k-async"), "{rule}");
    assert!(rule.contains("K 1→2 at mean time"), "{rule}");
    assert!(
        [
            "matches the oracle",
            "beats the oracle",
            "does worse than the oracle"
        ]
        .iter()
        .any(|v| rule.contains(v)),
        "{rule}"
    );
}

#[test]
fn a_scenario_without_a_rule_writes_no_switch_file() {
    let dir = tmpdir("k-rule-none");
    let text = SCENARIO
        .split("[[series]]\nname = \"rule\"")
        .next()
        .unwrap();
    std::fs::write(dir.join("r.toml"), text).unwrap();
    let o = scarsim(
        &dir,
        &["run", "r.toml", "--synthetic", "--out", "out", "--quiet"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("out/rule/summary.csv").is_file());
    assert!(!dir.join("out/rule/k_switches.csv").exists());
}

fn rejects(name: &str, text: &str, needles: &[&str]) {
    let dir = tmpdir(name);
    std::fs::write(dir.join("bad.toml"), text).unwrap();
    let o = scarsim(&dir, &["validate", "bad.toml"]);
    assert_eq!(o.status.code(), Some(1), "accepted {name}");
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "{name}: `{n}` missing from:\n{err}");
    }
}

#[test]
fn bad_rules_are_rejected_clearly() {
    let rule = "k_rule = { kind = \"plateau\", window = 20 }";
    rejects(
        "k-rule-both",
        &SCENARIO.replacen(rule, &format!("{rule}\nk = 2"), 1),
        &["series.k_rule", "give only one of `k`", "`k` and `k_rule`"],
    );
    rejects(
        "k-rule-schedule",
        &SCENARIO.replacen(
            rule,
            &format!("{rule}\nk_schedule = [{{ from = 0.0, k = 1 }}]"),
            1,
        ),
        &["`k_schedule` and `k_rule`"],
    );
    rejects(
        "k-rule-max",
        &SCENARIO.replacen("window = 20, max = 2", "window = 20, max = 8", 1),
        &["series.k_rule.max", "K = 8 exceeds P = 4", "k-sync"],
    );
    rejects(
        "k-rule-start",
        &SCENARIO.replacen(rule, "k_rule = { kind = \"plateau\", start = 5 }", 1),
        &["series.k_rule.start", "start = 5 is above max = 4"],
    );
    rejects(
        "k-rule-kind",
        &SCENARIO.replacen("kind = \"plateau\"", "kind = \"loss\"", 1),
        &["series.k_rule.kind", "`loss`", "\"plateau\""],
    );
    rejects(
        "k-rule-factor",
        &SCENARIO.replacen("factor = 3", "factor = 1", 1),
        &["series.k_rule.factor", "between 2 and"],
    );
    rejects(
        "k-rule-window",
        &SCENARIO.replacen("window = 10", "window = 0", 1),
        &["series.k_rule.window", "between 1 and"],
    );
    rejects(
        "k-rule-tolerance",
        &SCENARIO.replacen("tolerance = 0.05", "tolerance = 1.5", 1),
        &["series.k_rule.tolerance", "outside [0, 1)"],
    );
    rejects(
        "k-rule-key",
        &SCENARIO.replacen("window = 10", "windows = 10", 1),
        &["unknown field `windows`"],
    );
    let runtime = r#"
kind = "protocol"
name = "rt"
title = "runtime"
seed = 1
[cluster]
workers = 4
compute_time = { distribution = "exponential", rate = 1.0 }
[runtime]
updates = 10
[[series]]
protocol = "k-async"
k_rule = { kind = "plateau" }
"#;
    rejects(
        "k-rule-runtime",
        runtime,
        &["series.k_rule", "only applies to [training]"],
    );
}
