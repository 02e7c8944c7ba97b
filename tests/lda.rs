//! LDA scenarios end to end on tiny corpus stand-ins: results are written,
//! deterministic across thread counts, partial recovery never perturbs more
//! than full recovery, and bad LDA input is rejected clearly.

use crate::common;

use common::{
    assert_listed_with_panels, assert_same_bytes_as_brute_force,
    assert_same_bytes_on_every_kernel_level, run_ok, scarsim, stderr, tmpdir,
};

/// A small LDA recovery scenario for the Reuters stand-in at `--scale 0.01`
/// (216 documents, ~15,000 tokens). The criterion is scaled by the stand-in's
/// token ratio (~0.0103) to ~7.0e4, which the unperturbed run crosses after
/// about 10 iterations.
fn small_lda(name: &str, trials: usize) -> String {
    format!(
        r#"
kind = "recovery"
name = "{name}"
title = "small LDA test scenario"
trials = {trials}
seed = 7

[model]
kind = "lda"
dataset = "reuters"
topics = 20
alpha = 1.0
beta = 1.0

[convergence]
criterion = 6.8e6
max_iterations = 300

[failure]
iteration = {{ distribution = "geometric", p = 0.1 }}
lost = {{ fraction = 0.5 }}

[checkpoint]
interval = 4

[sweep]
lost_fraction = [0.25, 1.0]

[[series]]
name = "full"
recovery = "full"

[[series]]
name = "partial"
recovery = "partial"
"#
    )
}

fn run_small(dir: &std::path::Path, out: &str, threads: &str) {
    let o = scarsim(
        dir,
        &[
            "run",
            "s.toml",
            "--synthetic",
            "--scale",
            "0.01",
            "--threads",
            threads,
            "--out",
            out,
            "--quiet",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn lda_scenario_runs_deterministically_and_partial_perturbs_less() {
    let dir = tmpdir("lda-run");
    std::fs::write(dir.join("s.toml"), small_lda("lda", 6)).unwrap();
    run_small(&dir, "one", "1");
    run_small(&dir, "two", "2");
    for f in ["summary.csv", "trials.csv", "baseline.csv"] {
        let a = std::fs::read(dir.join("one/lda").join(f)).unwrap();
        let b = std::fs::read(dir.join("two/lda").join(f)).unwrap();
        assert_eq!(a, b, "{f} differs between 1 and 2 threads");
    }
    let summary = std::fs::read_to_string(dir.join("one/lda/summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 1 + 4);
    assert!(summary.contains(",lda,reuters,synthetic,"), "{summary}");
    // Trial by trial (same failure for both series): ‖δ'‖ ≤ ‖δ‖ (Theorem 3.1).
    let trials = std::fs::read_to_string(dir.join("one/lda/trials.csv")).unwrap();
    let mut lines = trials.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|c| *c == n).unwrap();
    let (norm, full, conv) = (
        col("perturbation_norm"),
        col("full_recovery_norm"),
        col("converged"),
    );
    let mut rows = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let p: f64 = f[norm].parse().unwrap();
        let q: f64 = f[full].parse().unwrap();
        assert!(p <= q + 1e-9, "partial norm {p} > full norm {q}: {line}");
        assert_eq!(f[conv], "true", "{line}");
        rows += 1;
    }
    assert_eq!(rows, 4 * 6);
    let manifest = std::fs::read_to_string(dir.join("one/lda/manifest.json")).unwrap();
    assert!(manifest.contains("LDA generative model"), "{manifest}");
}

/// The same scenario with shared data order (cohorts of trials stepped as
/// SIMD lanes) gives the same CSV bytes with the portable kernels forced
/// (`SCARSIM_KERNELS=portable`) as on the best level this CPU has.
#[test]
fn lda_csv_bytes_equal_on_every_kernel_level() {
    let dir = tmpdir("lda-kernels");
    let scenario =
        small_lda("lda", 12).replace("seed = 7\n", "seed = 7\ndata_order = \"shared\"\n");
    assert!(scenario.contains("data_order = \"shared\""));
    std::fs::write(dir.join("s.toml"), scenario).unwrap();
    assert_same_bytes_on_every_kernel_level(
        &dir,
        "s.toml",
        "lda",
        &["--synthetic", "--scale", "0.01", "--threads", "2"],
    );
}

/// Under a per-trial data order LDA's trials of different trial indices
/// share cohorts (each lane with its own run's uniform numbers): the CSV
/// bytes equal the portable kernels', the brute-force path's (every metric
/// evaluated, nothing shared, every trial rerun from x(0)) and those of
/// one thread.
#[test]
fn lda_per_trial_order_matches_on_every_kernel_level_and_by_brute_force() {
    let dir = tmpdir("lda-per-trial");
    let scenario =
        small_lda("lda", 6).replace("seed = 7\n", "seed = 7\ndata_order = \"per-trial\"\n");
    assert!(scenario.contains("data_order = \"per-trial\""));
    std::fs::write(dir.join("s.toml"), scenario).unwrap();
    let args = ["--synthetic", "--scale", "0.01", "--threads", "2"];
    assert_same_bytes_on_every_kernel_level(&dir, "s.toml", "lda", &args);
    assert_same_bytes_as_brute_force(&dir, "s.toml", "lda", &args);
    run_ok(
        &dir,
        &[
            "run",
            "s.toml",
            "--out",
            "one",
            "--quiet",
            "--no-plot",
            "--synthetic",
            "--scale",
            "0.01",
            "--threads",
            "1",
        ],
    );
    for f in ["summary.csv", "trials.csv", "baseline.csv"] {
        assert_eq!(
            std::fs::read(dir.join("best/lda").join(f)).unwrap(),
            std::fs::read(dir.join("one/lda").join(f)).unwrap(),
            "{f} differs between 1 and 2 threads"
        );
    }
    // The trials fork from unperturbed runs of their own (baseline.csv's
    // first column is the run).
    let baseline = std::fs::read_to_string(dir.join("best/lda/baseline.csv")).unwrap();
    let runs: std::collections::BTreeSet<&str> = baseline
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next())
        .collect();
    assert_eq!(runs.len(), 6, "{baseline}");
}

#[test]
fn lda_scenarios_are_listed() {
    let dir = tmpdir("lda-list");
    assert_listed_with_panels(
        &dir,
        &[
            ("scar-partial-lda-20news", "Fig. 6(c)"),
            ("scar-priority-lda-20news", "Fig. 7(c)"),
            ("scar-partial-lda-reuters", "Fig. 6(g)"),
            ("scar-priority-lda-reuters", "Fig. 7(g)"),
        ],
    );
}

#[test]
fn missing_corpus_archives_name_the_path_and_suggest_synthetic() {
    let dir = tmpdir("lda-missing");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    for (scenario, file) in [
        (
            "scar-partial-lda-20news",
            "20newsgroups/20news-bydate.tar.gz",
        ),
        ("scar-partial-lda-reuters", "reuters/reuters21578.tar.gz"),
    ] {
        let o = scarsim(
            &dir,
            &[
                "run",
                scenario,
                "--data-dir",
                "data",
                "--out",
                "out",
                "--quiet",
            ],
        );
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(
            err.contains(file) && err.contains("--synthetic") && !err.contains("panicked"),
            "{err}"
        );
    }
    // A truncated archive is reported as such, naming the file.
    std::fs::create_dir_all(dir.join("data/reuters")).unwrap();
    std::fs::write(
        dir.join("data/reuters/reuters21578.tar.gz"),
        [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3],
    )
    .unwrap();
    let o = scarsim(
        &dir,
        &[
            "run",
            "scar-partial-lda-reuters",
            "--data-dir",
            "data",
            "--out",
            "out",
            "--quiet",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("reuters21578.tar.gz") && err.contains("truncated"),
        "{err}"
    );
    assert!(!dir.join("out").join("scar-partial-lda-reuters").exists());
}

#[test]
fn bad_lda_model_tables_are_rejected() {
    let dir = tmpdir("lda-bad");
    for (from, to, needle) in [
        ("topics = 20", "topics = 1", "model.topics"),
        ("topics = 20", "topics = 300", "model.topics"),
        ("alpha = 1.0", "alpha = -1.0", "model.alpha"),
        (
            "dataset = \"reuters\"",
            "dataset = \"mnist\"",
            "lda trains on",
        ),
        ("beta = 1.0", "beta = 1.0\nbeeta = 2.0", "beeta"),
    ] {
        let text = small_lda("bad", 2).replace(from, to);
        std::fs::write(dir.join("bad.toml"), text).unwrap();
        let o = scarsim(&dir, &["validate", "bad.toml"]);
        assert_eq!(o.status.code(), Some(1), "{to} accepted");
        let err = stderr(&o);
        assert!(
            err.contains(needle) && !err.contains("panicked"),
            "{to}: {err}"
        );
    }
}
