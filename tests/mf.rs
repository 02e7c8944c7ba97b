//! Matrix factorization (ALS) end to end on the MovieLens and Jester
//! stand-ins: trials, recovery mechanics, determinism, the bundled scenarios,
//! and clear errors for bad rating files and bad `[model]` tables.

use crate::common;

use common::{
    assert_listed_with_panels, assert_same_bytes_as_brute_force,
    assert_same_bytes_on_every_kernel_level, assert_same_bytes_on_one_and_two_threads, run_ok,
    scarsim, stderr, tmpdir,
};
use indicatif::ProgressBar;
use scarsim::data::archive::write_zip;
use scarsim::data::{DataCache, DataOptions};
use scarsim::engine::ForkMode;
use scarsim::experiment::{self, RunOptions};
use scarsim::report::Table;
use scarsim::scenario;
use scarsim::stats::Summary;

/// A small MF recovery scenario. Use MovieLens at `--scale 0.1` (criterion
/// 3e3 → ~20 iterations) or Jester at `--scale 0.02` (6.5e6 → ~9).
fn mf_scenario(name: &str, dataset: &str, trials: usize) -> String {
    let (factors, lambda, criterion) = match dataset {
        "movielens" => (20, 0.1, 3.0e3),
        _ => (5, 10.0, 6.5e6),
    };
    format!(
        r#"
kind = "recovery"
name = "{name}"
title = "small MF test scenario"
trials = {trials}
seed = 11

[model]
kind = "mf"
dataset = "{dataset}"
factors = {factors}
regularization = {lambda}

[convergence]
criterion = {criterion}
max_iterations = 300

[failure]
iteration = {{ distribution = "geometric", p = 0.1 }}
lost = {{ fraction = 0.5 }}

[checkpoint]
interval = 4

[sweep]
lost_fraction = [0.25, 0.75]

[[series]]
name = "full"
recovery = "full"

[[series]]
name = "partial"
recovery = "partial"
"#
    )
}

fn run(text: &str, scale: f64) -> experiment::Outcome {
    let sc = scenario::parse(text, "test").expect("valid scenario");
    let opts = RunOptions {
        data: DataOptions {
            data_dir: "data".into(),
            synthetic: true,
            synthetic_scale: scale,
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

/// ALS is deterministic, so full recovery from a checkpoint taken at c
/// replays the unperturbed run from x(c): the rework is exactly T − c in
/// every trial. Partial recovery never moves the state further than full
/// recovery would (Theorem 3.1), and costs less on average.
#[test]
fn movielens_stand_in_recovery_mechanics() {
    let out = run(&mf_scenario("mf-ml", "movielens", 30), 0.1);
    let t = &out.trials;
    assert_eq!(t.rows.len(), 2 * 2 * 30);
    let b = num(t, &t.rows[0], "baseline_iterations");
    assert!((8.0..=60.0).contains(&b), "baseline iterations {b}");
    let rework = |series: &str, lost: f64| -> Vec<f64> {
        t.rows
            .iter()
            .filter(|r| col(t, r, "series") == series && num(t, r, "x") == lost)
            .map(|r| num(t, r, "rework_iterations"))
            .collect()
    };
    let full = rework("full", 0.25);
    let partial = rework("partial", 0.25);
    for r in &t.rows {
        assert_eq!(col(t, r, "converged"), "true");
        if col(t, r, "series") == "full" {
            assert_eq!(
                num(t, r, "rework_iterations"),
                num(t, r, "mean_restored_age"),
                "full recovery replays the baseline from the checkpoint"
            );
        } else {
            let (p, f) = (
                num(t, r, "perturbation_norm"),
                num(t, r, "full_recovery_norm"),
            );
            assert!(p <= f * (1.0 + 1e-12), "Theorem 3.1: {p} > {f}");
        }
    }
    let (f, p) = (Summary::of(&full), Summary::of(&partial));
    assert!(f.mean > 0.5, "full recovery costs iterations: {}", f.mean);
    assert!(
        p.mean < f.mean,
        "partial ({}) should cost less than full ({}) at 1/4 lost",
        p.mean,
        f.mean
    );
    let s = &out.summary;
    for r in &s.rows {
        assert_eq!(col(s, r, "model"), "mf");
        assert_eq!(col(s, r, "dataset"), "movielens");
        assert_eq!(col(s, r, "data"), "synthetic");
    }
}

#[test]
fn jester_stand_in_runs_and_partial_recovery_helps() {
    let out = run(&mf_scenario("mf-j", "jester", 12), 0.02);
    let s = &out.summary;
    let mean = |series: &str, lost: f64| {
        s.rows
            .iter()
            .find(|r| col(s, r, "series") == series && num(s, r, "x") == lost)
            .map(|r| num(s, r, "mean"))
            .unwrap()
    };
    assert!(mean("partial", 0.25) <= mean("full", 0.25));
    assert!(mean("partial", 0.25) <= mean("partial", 0.75) + 1e-9);
    assert_eq!(out.data["dataset"], "jester");
    let desc = out.data["provenance"]["description"].as_str().unwrap();
    assert!(desc.contains("Jester dataset 1"), "{desc}");
}

#[test]
fn same_bytes_on_one_and_two_threads() {
    let dir = tmpdir("mf-det");
    std::fs::write(dir.join("s.toml"), mf_scenario("det", "jester", 4)).unwrap();
    assert_same_bytes_on_one_and_two_threads(
        &dir,
        "s.toml",
        "det",
        &["summary.csv", "trials.csv", "baseline.csv"],
    );
}

/// Full-recovery trials restore one of the unperturbed run's states, and
/// ALS's step depends on the state alone, so the engine finishes them from
/// the run's metrics (`Model::same_state`): the CSV bytes are the brute-force
/// path's (every metric evaluated, nothing shared, every trial stepped).
#[test]
fn trials_that_rejoin_the_unperturbed_run_match_the_brute_force_path() {
    let dir = tmpdir("mf-rejoin");
    std::fs::write(dir.join("s.toml"), mf_scenario("rejoin", "jester", 8)).unwrap();
    let args = ["--synthetic", "--scale", "0.02"];
    let mut best = vec!["run", "s.toml", "--out", "best", "--quiet", "--no-plot"];
    best.extend(args);
    run_ok(&dir, &best);
    assert_same_bytes_as_brute_force(&dir, "s.toml", "rejoin", &args);
}

/// The portable kernels (`SCARSIM_KERNELS=portable`) give the CSV bytes of
/// the best kernel level this CPU has, for the cohort lanes and the
/// one-trial ALS alike (MovieLens at p = 20, Jester at p = 5).
#[test]
fn same_bytes_on_every_kernel_level() {
    let dir = tmpdir("mf-kernels");
    for (name, dataset, scale) in [("kml", "movielens", "0.1"), ("kj", "jester", "0.02")] {
        let file = format!("{name}.toml");
        std::fs::write(dir.join(&file), mf_scenario(name, dataset, 6)).unwrap();
        assert_same_bytes_on_every_kernel_level(
            &dir,
            &file,
            name,
            &["--synthetic", "--scale", scale],
        );
    }
}

#[test]
fn bundled_mf_scenarios_are_listed_with_their_panels() {
    let dir = tmpdir("mf-list");
    assert_listed_with_panels(
        &dir,
        &[
            ("scar-partial-mf-movielens", "Fig. 6(b)"),
            ("scar-priority-mf-movielens", "Fig. 7(b)"),
            ("scar-partial-mf-jester", "Fig. 6(f)"),
            ("scar-priority-mf-jester", "Fig. 7(f)"),
        ],
    );
}

/// Runs `scenario` on `data_dir` and returns stderr; the run must fail
/// without writing results.
fn fails_on(dir: &std::path::Path, scenario: &str, data_dir: &str) -> String {
    let o = scarsim(
        dir,
        &[
            "run",
            scenario,
            "--data-dir",
            data_dir,
            "--out",
            "out",
            "--quiet",
        ],
    );
    assert!(!o.status.success());
    assert_eq!(o.status.code(), Some(1));
    assert!(!dir.join("out").exists(), "no half-written results");
    let e = stderr(&o);
    assert!(!e.contains("panicked"), "{e}");
    e
}

#[test]
fn missing_corrupt_and_malformed_rating_files() {
    let dir = tmpdir("mf-data");
    std::fs::write(dir.join("ml.toml"), mf_scenario("ml", "movielens", 2)).unwrap();
    std::fs::write(dir.join("j.toml"), mf_scenario("j", "jester", 2)).unwrap();
    std::fs::create_dir_all(dir.join("empty")).unwrap();

    // Missing: names the expected archive and suggests --synthetic.
    let e = fails_on(&dir, "ml.toml", "empty");
    assert!(
        e.contains("movielens-small/ml-latest-small.zip") && e.contains("--synthetic"),
        "{e}"
    );
    let e = fails_on(&dir, "j.toml", "empty");
    assert!(
        e.contains("jester/jester-data-1.zip") && e.contains("--synthetic"),
        "{e}"
    );

    // Not a zip at all.
    let bad = dir.join("notzip/movielens-small");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("ml-latest-small.zip"), b"userId,movieId\n").unwrap();
    let e = fails_on(&dir, "ml.toml", "notzip");
    assert!(
        e.contains("ml-latest-small.zip") && e.contains("not a readable zip archive"),
        "{e}"
    );

    // A zip without the ratings member.
    write_zip(
        &dir.join("nomember/movielens-small/ml-latest-small.zip"),
        &[("ml-latest-small/movies.csv", b"movieId,title,genres\n")],
    )
    .unwrap();
    let e = fails_on(&dir, "ml.toml", "nomember");
    assert!(
        e.contains("no member `ml-latest-small/ratings.csv`") && e.contains("movies.csv"),
        "{e}"
    );

    // A bad MovieLens row: line number and field.
    let csv = "userId,movieId,rating,timestamp\r\n1,31,2.5,1260759144\r\n1,32,9.5,1260759144\r\n";
    write_zip(
        &dir.join("badrow/movielens-small/ml-latest-small.zip"),
        &[("ml-latest-small/ratings.csv", csv.as_bytes())],
    )
    .unwrap();
    let e = fails_on(&dir, "ml.toml", "badrow");
    assert!(
        e.contains("ratings.csv line 3") && e.contains("rating is \"9.5\""),
        "{e}"
    );

    // A bad Jester row: wrong count in field 1.
    let mut cells = vec!["99".to_string(); 100];
    cells[0] = "3.5".into();
    let good = format!("1,{}", cells.join(","));
    let bad_count = format!("2,{}", cells.join(","));
    write_zip(
        &dir.join("badjester/jester/jester-data-1.zip"),
        &[(
            "jester-data-1.csv",
            format!("{good}\n{bad_count}\n").as_bytes(),
        )],
    )
    .unwrap();
    let e = fails_on(&dir, "j.toml", "badjester");
    assert!(
        e.contains("jester-data-1.csv line 2") && e.contains("says 2 jokes"),
        "{e}"
    );
}

/// A tiny but well-formed archive of each dataset trains end to end.
#[test]
fn tiny_real_format_archives_train() {
    let dir = tmpdir("mf-tiny");
    // 30 users × 40 movies, every user rates 25 movies.
    let mut csv = String::from("userId,movieId,rating,timestamp\r\n");
    for u in 1..=30u32 {
        for k in 0..25u32 {
            let m = 1 + (u * 7 + k * 3) % 40;
            let r = 0.5 * (1 + (u + 2 * m) % 10) as f32;
            csv.push_str(&format!("{u},{},{r:.1},1260759144\r\n", m * 10));
        }
    }
    write_zip(
        &dir.join("d/movielens-small/ml-latest-small.zip"),
        &[("ml-latest-small/ratings.csv", csv.as_bytes())],
    )
    .unwrap();
    let text = mf_scenario("tiny", "movielens", 2)
        .replace("criterion = 3000", "criterion = 4e5")
        .replace("factors = 20", "factors = 3");
    std::fs::write(dir.join("t.toml"), text).unwrap();
    let o = scarsim(&dir, &["baseline", "t.toml", "--data-dir", "d"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}\n{out}", stderr(&o));
    assert!(
        out.contains("mf on movielens (real)") && out.contains("converged at iteration"),
        "{out}"
    );
}

#[test]
fn bad_mf_model_tables_are_rejected() {
    let dir = tmpdir("mf-bad");
    let good = mf_scenario("bad", "movielens", 2);
    for (name, text, needle) in [
        (
            "factors",
            good.replace("factors = 20", "factors = 0"),
            "model.factors",
        ),
        (
            "lambda",
            good.replace("regularization = 0.1", "regularization = 0.0"),
            "model.regularization",
        ),
        (
            "dataset",
            good.replace("dataset = \"movielens\"", "dataset = \"mnist\""),
            "mf trains on `movielens` or `jester`",
        ),
        (
            "unknown",
            good.replace("factors = 20", "factors = 20\nlearning_rate = 0.1"),
            "unknown field `learning_rate`",
        ),
    ] {
        std::fs::write(dir.join("bad.toml"), &text).unwrap();
        let o = scarsim(&dir, &["validate", "bad.toml"]);
        assert!(!o.status.success(), "{name} accepted");
        let e = stderr(&o);
        assert!(e.contains(needle) && e.contains("bad.toml"), "{name}: {e}");
    }
}
