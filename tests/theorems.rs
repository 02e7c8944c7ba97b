//! SCAR's partial-recovery theorems and headline effect, checked on the real
//! engine with the MNIST stand-in.

use crate::common;

use indicatif::ProgressBar;
use scarsim::data::{DataCache, DataOptions};
use scarsim::engine::ForkMode;
use scarsim::experiment::{self, RunOptions};
use scarsim::report::Table;
use scarsim::scenario;
use scarsim::stats::Summary;

fn run(text: &str) -> experiment::Outcome {
    let sc = scenario::parse(text, "test").expect("valid scenario");
    let opts = RunOptions {
        data: DataOptions {
            data_dir: "data".into(),
            synthetic: true,
            synthetic_scale: 0.02,
        },
        out_dir: std::env::temp_dir(),
        threads: 2,
        fork_mode: ForkMode::Fork,
        certify_metric: true,
        share_identical_trials: true,
        shared_outcomes: None,
    };
    experiment::run(&sc, &opts, &DataCache::new(), &ProgressBar::hidden()).expect("runs")
}

fn col<'a>(t: &'a Table, row: &'a [String], name: &str) -> &'a str {
    &row[t.column(name).unwrap_or_else(|| panic!("no column {name}"))]
}

fn num(t: &Table, row: &[String], name: &str) -> f64 {
    col(t, row, name).parse().unwrap()
}

/// Theorem 3.1 in every trial, Theorem 3.2 on average: with a uniformly random
/// lost fraction p, ‖δ′‖ ≤ ‖δ‖ and E‖δ′‖²/‖δ‖² = p.
#[test]
fn partial_recovery_perturbation_theorems() {
    let text = common::small_recovery("thm", 60).replace("[0.25, 0.75]", "[0.25, 0.5, 0.75]");
    let out = run(&text);
    let t = &out.trials;
    for lost in [0.25, 0.5, 0.75] {
        let mut ratios = Vec::new();
        for r in &t.rows {
            if col(t, r, "series") != "partial" || num(t, r, "x") != lost {
                continue;
            }
            let partial = num(t, r, "perturbation_norm");
            let full = num(t, r, "full_recovery_norm");
            assert!(
                partial <= full * (1.0 + 1e-12),
                "Theorem 3.1 violated: {partial} > {full}"
            );
            if full > 0.0 {
                ratios.push(partial * partial / (full * full));
            }
        }
        assert!(
            ratios.len() >= 50,
            "enough trials with a non-zero perturbation"
        );
        let s = Summary::of(&ratios);
        // 784 blocks: every lost fraction here is a whole number of blocks, so
        // E[ratio] = p exactly. Allow the 99.9% interval (3.3 standard errors).
        let tol = 3.3 * s.std / (s.n as f64).sqrt();
        assert!(
            (s.mean - lost).abs() <= tol.max(1e-9),
            "Theorem 3.2: mean ratio {} vs p = {lost} (tolerance {tol})",
            s.mean
        );
    }
}

/// Partial recovery needs fewer rework iterations than full recovery at 1/4
/// lost (SCAR Figure 6), paired trial by trial.
#[test]
fn partial_beats_full_at_a_quarter_lost() {
    let text = common::small_recovery("quarter", 40).replace("[0.25, 0.75]", "[0.25]");
    let out = run(&text);
    let s = &out.summary;
    let mean = |series: &str| {
        let r = s
            .rows
            .iter()
            .find(|r| col(s, r, "series") == series)
            .unwrap();
        (
            num(s, r, "mean"),
            num(s, r, "ci95_low"),
            num(s, r, "ci95_high"),
        )
    };
    let (full, full_lo, _) = mean("full");
    let (partial, _, partial_hi) = mean("partial");
    assert!(full > 0.0, "full recovery costs iterations ({full})");
    assert!(
        partial_hi < full_lo,
        "partial {partial} (CI high {partial_hi}) vs full {full} (CI low {full_lo})"
    );
    // Paired differences: partial never worse by more than noise, better on average.
    let t = &out.trials;
    let by = |series: &str| -> Vec<f64> {
        t.rows
            .iter()
            .filter(|r| col(t, r, "series") == series)
            .map(|r| num(t, r, "rework_iterations"))
            .collect()
    };
    let diffs: Vec<f64> = by("full")
        .iter()
        .zip(by("partial"))
        .map(|(f, p)| f - p)
        .collect();
    let d = Summary::of(&diffs);
    assert!(
        d.ci95_low > 0.0,
        "paired difference CI {:?}",
        (d.ci95_low, d.ci95_high)
    );
}

/// Full recovery's cost does not depend on how much was lost (the paper's
/// flat line): with common random numbers it is identical trial by trial.
#[test]
fn full_recovery_ignores_the_lost_fraction() {
    let out = run(&common::small_recovery("flat", 10));
    let t = &out.trials;
    let rework = |x: f64| -> Vec<String> {
        t.rows
            .iter()
            .filter(|r| col(t, r, "series") == "full" && num(t, r, "x") == x)
            .map(|r| col(t, r, "rework_iterations").to_string())
            .collect()
    };
    assert_eq!(rework(0.25), rework(0.75));
}
