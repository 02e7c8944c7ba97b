//! The knobs SCAR leaves unstated, as scenario fields (issue 16): each is
//! shown resolved by `validate --resolved`, defaults included, refused
//! clearly when wrong, and honoured by a run.

use std::path::Path;

use crate::common;

/// Writes `contents` as `dir/name` and returns what `validate --resolved`
/// prints for it (which must succeed).
fn resolved(dir: &Path, name: &str, contents: &str) -> String {
    std::fs::write(dir.join(name), contents).unwrap();
    let o = common::scarsim(dir, &["validate", "--resolved", name]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes `contents` as `dir/bad.toml` and returns the error `validate`
/// gives for it (which must fail).
fn refused(dir: &Path, contents: &str) -> String {
    std::fs::write(dir.join("bad.toml"), contents).unwrap();
    let o = common::scarsim(dir, &["validate", "bad.toml"]);
    assert!(!o.status.success());
    common::stderr(&o)
}

/// `[checkpoint] event_order` is a field (per series too): `validate
/// --resolved` shows it, defaults included; a bad value is an error naming
/// the allowed ones; and a run honours it: a failure at an iteration with a
/// full checkpoint due costs no rework when the checkpoint is written first.
#[test]
fn event_order_is_a_field_shown_resolved_and_honoured() {
    let dir = common::tmpdir("event-order");
    let sc = common::small_recovery("event-order", 3)
        .replace(
            "iteration = { distribution = \"geometric\", p = 0.05 }",
            "iteration = { distribution = \"fixed\", iteration = 8 }",
        )
        .replace("lost_fraction = [0.25, 0.75]", "lost_fraction = [1.0]")
        .replace(
            "name = \"partial\"\nrecovery = \"partial\"",
            "name = \"full-checkpoint-first\"\nrecovery = \"full\"\nevent_order = \"checkpoint-first\"",
        );
    let out = resolved(&dir, "order.toml", &sc);
    assert!(
        out.contains("series[0].config.event_order = \"failure-first\""),
        "{out}"
    );
    assert!(
        out.contains("series[1].config.event_order = \"checkpoint-first\""),
        "{out}"
    );

    let err = refused(
        &dir,
        &sc.replace(
            "interval = 8\n",
            "interval = 8\nevent_order = \"sometimes\"\n",
        ),
    );
    assert!(
        err.contains("bad.toml") && err.contains("sometimes") && err.contains("checkpoint-first"),
        "{err}"
    );

    let o = common::scarsim(
        &dir,
        &[
            "run",
            "order.toml",
            "--synthetic",
            "--scale",
            "0.02",
            "--quiet",
            "--no-plot",
            "--out",
            "out",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let trials = std::fs::read_to_string(dir.join("out/event-order/trials.csv")).unwrap();
    let mut lines = trials.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (series, rework) = (col("series"), col("rework_iterations"));
    let mut seen = [0, 0];
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let r: i64 = f[rework].parse().unwrap();
        if f[series] == "full-checkpoint-first" {
            assert_eq!(r, 0, "{l}");
            seen[1] += 1;
        } else {
            assert!(r > 0, "the checkpoint due at 8 is lost: {l}");
            seen[0] += 1;
        }
    }
    assert_eq!(seen, [3, 3]);
    // summary.csv names each point's order and write budget, defaults included.
    let summary = std::fs::read_to_string(dir.join("out/event-order/summary.csv")).unwrap();
    let mut lines = summary.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (series, order, budget) = (col("series"), col("event_order"), col("checkpoint_budget"));
    let rows: Vec<(String, String, String)> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[series].into(), f[order].into(), f[budget].into())
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("full".into(), "failure-first".into(), "parameters".into()),
            (
                "full-checkpoint-first".into(),
                "checkpoint-first".into(),
                "parameters".into()
            ),
        ]
    );
}

/// `[checkpoint] budget` (SCAR §4.2's equal parameters by default, or
/// ⌈r·n⌉ blocks) is a field with a per-series override, shown resolved, and
/// a wrong value is refused with the allowed ones.
#[test]
fn write_budget_is_a_field_shown_resolved() {
    let dir = common::tmpdir("write-budget");
    let sc = common::small_recovery("write-budget", 2).replace(
        "name = \"partial\"\nrecovery = \"partial\"",
        "name = \"partial\"\nrecovery = \"partial\"\ncheckpoint_fraction = 0.5\ncheckpoint_budget = \"blocks\"",
    );
    let out = resolved(&dir, "budget.toml", &sc);
    assert!(
        out.contains("series[0].config.checkpoint.budget = \"parameters\""),
        "{out}"
    );
    assert!(
        out.contains("series[1].config.checkpoint.budget = \"blocks\""),
        "{out}"
    );
    let err = refused(
        &dir,
        &sc.replace("interval = 8\n", "interval = 8\nbudget = \"bytes\"\n"),
    );
    assert!(
        err.contains("bad.toml") && err.contains("bytes") && err.contains("parameters"),
        "{err}"
    );
}
