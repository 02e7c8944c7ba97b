//! The CNN scenarios end to end on the MNIST stand-in: a run, the bundled
//! scenarios, and bad `[model]` tables.

use crate::common;

use common::{
    assert_listed_with_panels, assert_same_bytes_as_brute_force,
    assert_same_bytes_on_every_kernel_level, assert_same_bytes_on_one_and_two_threads, run_ok,
    scarsim, stderr, tmpdir,
};

/// A small CNN recovery scenario (use with --synthetic --scale 0.02). The
/// criterion is loose so that the stand-in converges in a few dozen
/// iterations and the test stays fast.
fn small_cnn(name: &str, model_extra: &str) -> String {
    format!(
        r#"
kind = "recovery"
name = "{name}"
title = "small CNN test scenario"
trials = 3
seed = 11

[model]
kind = "cnn"
dataset = "mnist"
batch_size = 64
learning_rate = 0.001
{model_extra}

[convergence]
criterion = 0.6
max_iterations = 2000

[failure]
iteration = {{ distribution = "geometric", p = 0.05 }}
lost = {{ fraction = 0.5 }}

[checkpoint]
interval = 8

[sweep]
lost_fraction = [0.5, 1.0]

[[series]]
name = "full"
recovery = "full"

[[series]]
name = "partial"
recovery = "partial"
"#
    )
}

fn column(csv: &str, name: &str) -> Vec<String> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header.iter().position(|c| *c == name).unwrap();
    lines
        .map(|l| l.split(',').nth(i).unwrap().to_string())
        .collect()
}

#[test]
fn cnn_scenario_runs_on_the_stand_in_for_both_partitionings() {
    for (part, blocks) in [
        (
            "partitioning = \"by-layer\"\nmetric = \"running-mean\"\nwindow = 10",
            10,
        ),
        (
            "partitioning = \"by-shard\"\nshards = 4\nmetric = \"subset\"\neval_examples = 100",
            40,
        ),
    ] {
        let dir = tmpdir(&format!("cnn-{blocks}"));
        std::fs::write(dir.join("s.toml"), small_cnn("cnn", part)).unwrap();
        let o = scarsim(
            &dir,
            &[
                "run",
                "s.toml",
                "--synthetic",
                "--scale",
                "0.02",
                "--out",
                "out",
                "--quiet",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let summary = std::fs::read_to_string(dir.join("out/cnn/summary.csv")).unwrap();
        assert_eq!(summary.lines().count(), 1 + 4);
        assert!(column(&summary, "model").iter().all(|m| m == "cnn"));
        // The criterion is a per-example mean: not scaled on the stand-in.
        assert!(column(&summary, "criterion").iter().all(|c| c == "0.6"));
        assert!(column(&summary, "unconverged").iter().all(|u| u == "0"));
        let b: f64 = column(&summary, "baseline_iterations")[0].parse().unwrap();
        assert!(b > 5.0, "baseline converged suspiciously fast: {b}");
        let trials = std::fs::read_to_string(dir.join("out/cnn/trials.csv")).unwrap();
        let lost = column(&trials, "lost_blocks");
        let series = column(&trials, "series");
        let x = column(&trials, "x");
        let rework = column(&trials, "rework_iterations");
        for i in 0..lost.len() {
            let expect = if x[i] == "1" { blocks } else { blocks / 2 };
            assert_eq!(lost[i], expect.to_string(), "lost blocks of row {i}");
        }
        // Losing every block, partial recovery restores what full recovery does.
        let at_one = |s: &str| -> Vec<&String> {
            (0..x.len())
                .filter(|&i| x[i] == "1" && series[i] == s)
                .map(|i| &rework[i])
                .collect()
        };
        assert_eq!(at_one("full"), at_one("partial"));
    }
}

#[test]
fn cnn_results_are_byte_identical_on_one_and_two_threads() {
    let dir = tmpdir("cnn-threads");
    let text = small_cnn(
        "cnn",
        "partitioning = \"by-shard\"\nmetric = \"running-mean\"\nwindow = 10",
    )
    .replace("lost_fraction = [0.5, 1.0]", "lost_fraction = [0.25]");
    std::fs::write(dir.join("s.toml"), text).unwrap();
    assert_same_bytes_on_one_and_two_threads(
        &dir,
        "s.toml",
        "cnn",
        &["summary.csv", "trials.csv", "baseline.csv"],
    );
}

#[test]
fn bundled_cnn_scenarios_are_listed_with_their_panels() {
    let dir = tmpdir("cnn-list");
    assert_listed_with_panels(
        &dir,
        &[
            ("scar-partial-cnn-bylayer-mnist", "Fig. 6(d)"),
            ("scar-priority-cnn-bylayer-mnist", "Fig. 7(d)"),
            ("scar-partial-cnn-byshard-mnist", "Fig. 6(h)"),
            ("scar-priority-cnn-byshard-mnist", "Fig. 7(h)"),
        ],
    );
}

/// `validate` must fail with a message containing every needle.
fn rejects(name: &str, model_extra: &str, needles: &[&str]) {
    let dir = tmpdir(name);
    std::fs::write(dir.join("bad.toml"), small_cnn("bad", model_extra)).unwrap();
    let o = scarsim(&dir, &["validate", "bad.toml"]);
    assert_eq!(o.status.code(), Some(1), "accepted {name}");
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "{name}: `{n}` missing from:\n{err}");
    }
}

#[test]
fn bad_cnn_models_are_rejected_clearly() {
    let ok = "partitioning = \"by-layer\"\nmetric = \"running-mean\"\nwindow = 10";
    rejects(
        "cnn-shards",
        "partitioning = \"by-layer\"\nshards = 4\nmetric = \"running-mean\"\nwindow = 10",
        &["bad.toml", "model.shards", "by-shard"],
    );
    rejects(
        "cnn-partitioning",
        "partitioning = \"by-row\"\nmetric = \"running-mean\"\nwindow = 10",
        &["unknown variant `by-row`", "by-layer", "by-shard"],
    );
    rejects(
        "cnn-window",
        "partitioning = \"by-layer\"\nmetric = \"running-mean\"",
        &["model.window", "running-mean"],
    );
    rejects(
        "cnn-subset",
        "partitioning = \"by-layer\"\nmetric = \"subset\"\nwindow = 3",
        &["model.eval_examples", "subset"],
    );
    rejects(
        "cnn-beta",
        &format!("{ok}\nbeta2 = 1.0"),
        &["model.beta2", "[0, 1)"],
    );
    rejects(
        "cnn-lr",
        &ok.replace("window = 10", "window = 10\nepsilon = -1"),
        &["model.epsilon", "positive"],
    );
    rejects(
        "cnn-unknown",
        &format!("{ok}\nmomentum = 0.9"),
        &["unknown field `momentum`"],
    );
    let dir = tmpdir("cnn-dataset");
    let text = small_cnn("bad", ok).replace("dataset = \"mnist\"", "dataset = \"covtype\"");
    std::fs::write(dir.join("bad.toml"), text).unwrap();
    let o = scarsim(&dir, &["validate", "bad.toml"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cnn trains on `mnist`"),
        "{}",
        stderr(&o)
    );
}

/// A protocol scenario (Dutta et al.) training the CNN inside the wall-clock
/// simulation, on the stand-in.
fn cnn_protocol(model_extra: &str) -> String {
    format!(
        r#"
kind = "protocol"
name = "cnnproto"
title = "CNN under the protocols"
trials = 2
seed = 9

[cluster]
workers = 4
compute_time = {{ distribution = "shifted-exponential", shift = 0.5, rate = 2.0 }}

[model]
kind = "cnn"
dataset = "mnist"
batch_size = 16
learning_rate = 0.2
{model_extra}

[training]
horizon = 60.0
grid_step = 20.0
loss_subsample = 200
loss_every = 5
record_trials = 1

[[series]]
protocol = "k-sync"
k = [1, 4]

[[series]]
protocol = "k-async"
k = 1
"#
    )
}

#[test]
fn cnn_trains_under_the_protocols_deterministically() {
    let dir = tmpdir("cnn-protocol");
    std::fs::write(dir.join("p.toml"), cnn_protocol("")).unwrap();
    for (out, threads) in [("one", "1"), ("two", "2")] {
        let o = scarsim(
            &dir,
            &[
                "run",
                "p.toml",
                "--synthetic",
                "--scale",
                "0.02",
                "--threads",
                threads,
                "--out",
                out,
                "--quiet",
                "--no-plot",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    for f in ["summary.csv", "loss_vs_time.csv", "updates.csv"] {
        assert_eq!(
            std::fs::read(dir.join("one/cnnproto").join(f)).unwrap(),
            std::fs::read(dir.join("two/cnnproto").join(f)).unwrap(),
            "{f} differs between 1 and 2 threads"
        );
    }
    // Every series' mean loss falls from time 0 (≈ ln 10) to the horizon.
    let curve = std::fs::read_to_string(dir.join("one/cnnproto/loss_vs_time.csv")).unwrap();
    let (series, time, mean) = (
        column(&curve, "series"),
        column(&curve, "time"),
        column(&curve, "mean"),
    );
    let mut checked = 0;
    for i in 0..series.len() {
        if time[i] == "60" {
            let j = (0..series.len())
                .find(|&j| series[j] == series[i] && time[j] == "0")
                .unwrap();
            let (a, b): (f64, f64) = (mean[j].parse().unwrap(), mean[i].parse().unwrap());
            assert!((a - 10f64.ln()).abs() < 0.1, "{}: start {a}", series[i]);
            assert!(b < a - 0.05, "{}: {a} -> {b}", series[i]);
            checked += 1;
        }
    }
    assert_eq!(checked, 3);
    let manifest = std::fs::read_to_string(dir.join("one/cnnproto/manifest.json")).unwrap();
    assert!(manifest.contains("\"cnn\""), "{manifest}");
}

#[test]
fn scar_only_cnn_keys_are_rejected_in_protocol_scenarios() {
    for key in ["partitioning = \"by-layer\"", "beta1 = 0.9", "window = 5"] {
        let dir = tmpdir("cnn-protocol-bad");
        std::fs::write(dir.join("bad.toml"), cnn_protocol(key)).unwrap();
        let o = scarsim(&dir, &["validate", "bad.toml"]);
        assert_eq!(o.status.code(), Some(1), "accepted {key}");
        let err = stderr(&o);
        let field = key.split(' ').next().unwrap();
        assert!(
            err.contains(&format!("model.{field}")) && err.contains("protocol scenarios"),
            "{key}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn cnn_results_are_byte_identical_on_the_portable_kernels() {
    // The CNN's kernels are compiled for every level; SCARSIM_KERNELS caps
    // the level, and the portable body must give the vector levels' bits.
    let dir = tmpdir("cnn-kernels");
    let text = small_cnn(
        "cnn",
        "partitioning = \"by-shard\"\nshards = 4\nmetric = \"subset\"\neval_examples = 37",
    )
    .replace("lost_fraction = [0.5, 1.0]", "lost_fraction = [0.5]")
    .replace("trials = 3", "trials = 2");
    std::fs::write(dir.join("s.toml"), text).unwrap();
    assert_same_bytes_on_every_kernel_level(
        &dir,
        "s.toml",
        "cnn",
        &["--synthetic", "--scale", "0.02"],
    );
}

/// The subset metric's early answer ("the images seen already put the mean
/// over the criterion") is exact: the results equal the brute-force path's
/// (the whole subset evaluated at every check, nothing shared), trial by
/// trial. 150 images: passes of 64, 64 and 22, so two places to stop.
#[test]
fn cnn_subset_check_matches_brute_force() {
    let dir = tmpdir("cnn-subset-check");
    let text = small_cnn(
        "cnn",
        "partitioning = \"by-layer\"\nmetric = \"subset\"\neval_examples = 150",
    );
    std::fs::write(dir.join("s.toml"), text).unwrap();
    let standin = ["--synthetic", "--scale", "0.02"];
    let mut best = vec!["run", "s.toml", "--out", "best", "--quiet", "--no-plot"];
    best.extend(standin);
    run_ok(&dir, &best);
    assert_same_bytes_as_brute_force(&dir, "s.toml", "cnn", &standin);
    let read = |run: &str, f: &str| std::fs::read(dir.join(run).join("cnn").join(f)).unwrap();
    // Every trial converged, after a rework (otherwise little was checked).
    let summary = String::from_utf8(read("best", "summary.csv")).unwrap();
    assert!(
        column(&summary, "unconverged").iter().all(|u| u == "0"),
        "{summary}"
    );
    let trials = String::from_utf8(read("best", "trials.csv")).unwrap();
    assert_eq!(column(&trials, "converged").len(), 12, "{trials}");
}
