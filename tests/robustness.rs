//! `reproduce --robustness`: the claim × setting study of SCAR's Figure 6
//! and 7 panels.

use crate::common;

use common::{run_ok, scarsim, stderr, tmpdir};

const STUDY: [&str; 14] = [
    "reproduce",
    "--robustness",
    "--quick",
    "--trials",
    "3",
    "--scale",
    "0.02",
    "--synthetic",
    "--threads",
    "1",
    "--quiet",
    "--only",
    "scar-partial-mlr-covtype",
    "--data-dir=none",
];

/// Drops the command line (its --out differs) and the wall/CPU-time sentence.
fn without_times(report: &str) -> String {
    report
        .lines()
        .filter(|l| !l.contains(" min wall, ") && !l.starts_with("Command: "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One partial-recovery panel: 24 settings × 3 claims, each a row of
/// robustness.csv with a verdict; every variant is a scenario that `scarsim
/// run` reproduces byte for byte from its manifest's TOML; two shards merged
/// give the same study.
#[test]
fn study_measures_every_claim_in_every_setting_and_shards() {
    let dir = tmpdir("robustness");
    run_ok(&dir, &[&STUDY[..], &["--out", "whole"]].concat());
    let csv = std::fs::read_to_string(dir.join("whole/robustness.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "panel,reading,claim,event_order,checkpoint_interval,failure_mean_of_run,value,ci95_low,ci95_high,trials,claim_low,claim_high,verdict"
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 24 * 3, "{csv}");
    for order in ["failure-first", "checkpoint-first"] {
        for c in ["4", "8", "16", "32"] {
            for b in ["0.25", "0.5", "1"] {
                let key = format!(",{order},{c},{b},");
                assert_eq!(
                    rows.iter().filter(|r| r.contains(&key)).count(),
                    3,
                    "{key} in {csv}"
                );
            }
        }
    }
    for r in &rows {
        let verdict = r.rsplit(',').next().unwrap();
        assert!(
            ["holds", "holds-point", "misses-point", "fails", "n/a"].contains(&verdict),
            "{r}"
        );
    }
    let report = std::fs::read_to_string(dir.join("whole/REPORT.md")).unwrap();
    // One line per claim, each counted over the settings where it was defined.
    let claims: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("| `scar-partial-mlr-covtype` | as bundled | rework reduction"))
        .collect();
    assert_eq!(claims.len(), 3, "{report}");
    assert!(
        report.contains("The reading that reproduces the most claims")
            || report.contains("No reading reproduced any claim"),
        "{report}"
    );
    assert!(dir.join("whole/robustness.png").is_file());
    assert!(dir.join("whole/robustness.svg").is_file());

    // A variant is an ordinary scenario: its TOML, run on its own, gives its CSVs.
    let variant = dir.join("whole/scar-partial-mlr-covtype.cf.c16.b0.5");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(variant.join("manifest.json")).unwrap()).unwrap();
    std::fs::write(
        dir.join("variant.toml"),
        manifest["scenario_toml"].as_str().unwrap(),
    )
    .unwrap();
    run_ok(
        &dir,
        &[
            "run",
            "variant.toml",
            "--synthetic",
            "--scale",
            "0.02",
            "--trials",
            "3",
            "--threads",
            "1",
            "--quiet",
            "--data-dir=none",
            "--out",
            "alone",
        ],
    );
    for f in ["summary.csv", "trials.csv"] {
        assert!(
            std::fs::read(variant.join(f)).unwrap()
                == std::fs::read(
                    dir.join("alone/scar-partial-mlr-covtype.cf.c16.b0.5")
                        .join(f)
                )
                .unwrap(),
            "{f} of the variant differs from running its TOML"
        );
    }

    // Two shards merged: the same study.
    for i in 0..2 {
        run_ok(
            &dir,
            &[
                &STUDY[..],
                &["--out", "parts", "--shard", &format!("{i}/2")],
            ]
            .concat(),
        );
    }
    run_ok(
        &dir,
        &[&STUDY[..], &["--out", "merged", "--merge", "parts"]].concat(),
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("merged/robustness.csv")).unwrap(),
        csv
    );
    assert_eq!(
        without_times(&std::fs::read_to_string(dir.join("merged/REPORT.md")).unwrap()),
        without_times(&report)
    );
}

#[test]
fn a_study_of_no_claim_panel_is_refused() {
    let dir = tmpdir("robustness-none");
    let o = scarsim(
        &dir,
        &[
            "reproduce",
            "--robustness",
            "--quick",
            "--only",
            "dutta-runtime-exp",
            "--out",
            "x",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("Figure 6 or 7"), "{}", stderr(&o));
    assert!(!dir.join("x").exists(), "nothing written");
}

/// `reproduce --robustness --plan` plans every variant of the panel (24
/// settings), one row each and the total, writes nothing, and refuses to
/// shard.
#[test]
fn a_study_is_planned_without_running_it() {
    let dir = tmpdir("robustness-plan");
    let o = scarsim(&dir, &[&STUDY[..], &["--out", "x", "--plan"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("scar-partial-mlr-covtype."))
        .collect();
    assert_eq!(rows.len(), 24, "{out}");
    for row in &rows {
        // units, setup s, trial CPU-s, wall s: numbers, units > 0.
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), 5, "{row}");
        assert!(cells[1].parse::<usize>().unwrap() > 0, "{row}");
        for c in &cells[2..] {
            assert!(c.parse::<f64>().unwrap() >= 0.0, "{row}");
        }
    }
    assert!(out.contains("total: 24 scenario(s)"), "{out}");
    assert!(!dir.join("x").exists(), "nothing written");
    let o = scarsim(
        &dir,
        &[&STUDY[..], &["--out", "x", "--plan", "--shard", "0/2"]].concat(),
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--shard"), "{}", stderr(&o));
}

/// `--reading N` keeps only that reading of each panel: a reading no
/// selected panel has is refused before anything is written, and the flag
/// means nothing without `--robustness`.
#[test]
fn a_reading_no_panel_has_is_refused() {
    let dir = tmpdir("robustness-reading");
    let o = scarsim(
        &dir,
        &[&STUDY[..], &["--out", "x", "--plan", "--reading", "1"]].concat(),
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--reading 1"), "{}", stderr(&o));
    let o = scarsim(
        &dir,
        &[&STUDY[..], &["--out", "x", "--plan", "--reading", "0"]].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("total: 24 scenario(s)"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = scarsim(
        &dir,
        &["reproduce", "--quick", "--reading", "0", "--out", "x"],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--robustness"), "{}", stderr(&o));
    assert!(!dir.join("x").exists(), "nothing written");
}
