//! The command line end to end: run, list, validate, determinism across
//! thread counts, and every kind of bad input.

use crate::common;

use common::{
    assert_same_bytes_as_brute_force, assert_same_bytes_on_every_kernel_level,
    assert_same_bytes_on_one_and_two_threads, scarsim, small_recovery, stderr, tmpdir,
};

#[test]
fn run_writes_tidy_results() {
    let dir = tmpdir("run");
    std::fs::write(dir.join("s.toml"), small_recovery("small", 4)).unwrap();
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
    let res = dir.join("out/small");
    let summary = std::fs::read_to_string(res.join("summary.csv")).unwrap();
    let header = summary.lines().next().unwrap();
    for col in [
        "scenario",
        "series",
        "x_name",
        "x",
        "trials",
        "mean",
        "std",
        "ci95_low",
        "ci95_high",
    ] {
        assert!(
            header.split(',').any(|c| c == col),
            "summary lacks {col}: {header}"
        );
    }
    assert_eq!(
        summary.lines().count(),
        1 + 4,
        "2 series x 2 lost fractions"
    );
    let trials = std::fs::read_to_string(res.join("trials.csv")).unwrap();
    let header = trials.lines().next().unwrap();
    for col in [
        "series",
        "x",
        "trial",
        "failure_iteration",
        "lost_blocks",
        "baseline_iterations",
        "iterations_to_converge",
        "rework_iterations",
        "perturbation_norm",
    ] {
        assert!(
            header.split(',').any(|c| c == col),
            "trials lacks {col}: {header}"
        );
    }
    assert_eq!(trials.lines().count(), 1 + 16);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(res.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["seed"], 7);
    assert_eq!(manifest["data"]["provenance"]["kind"], "synthetic");
    assert_eq!(manifest["program"]["name"], "scarsim");
    assert!(manifest["wall_time_seconds"].as_f64().unwrap() > 0.0);
    assert!(
        summary.contains(",synthetic,"),
        "data column says synthetic"
    );
}

#[test]
fn same_seed_same_bytes_on_one_and_two_threads() {
    let dir = tmpdir("determinism");
    std::fs::write(dir.join("s.toml"), small_recovery("det", 6)).unwrap();
    assert_same_bytes_on_one_and_two_threads(
        &dir,
        "s.toml",
        "det",
        &["summary.csv", "trials.csv", "baseline.csv"],
    );
    // A different seed gives different trials.
    let o = scarsim(
        &dir,
        &[
            "run",
            "s.toml",
            "--synthetic",
            "--scale",
            "0.02",
            "--seed",
            "8",
            "--out",
            "other",
            "--quiet",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_ne!(
        std::fs::read(dir.join("one/det/trials.csv")).unwrap(),
        std::fs::read(dir.join("other/det/trials.csv")).unwrap()
    );
}

#[test]
fn rerunning_the_prefix_gives_the_same_results_as_forking() {
    let dir = tmpdir("fork");
    std::fs::write(dir.join("s.toml"), small_recovery("fork", 3)).unwrap();
    for (extra, out) in [(None, "fork"), (Some("--rerun"), "rerun")] {
        let mut args = vec![
            "run",
            "s.toml",
            "--synthetic",
            "--scale",
            "0.02",
            "--out",
            out,
            "--quiet",
        ];
        args.extend(extra);
        let o = scarsim(&dir, &args);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(
        std::fs::read(dir.join("fork/fork/trials.csv")).unwrap(),
        std::fs::read(dir.join("rerun/fork/trials.csv")).unwrap()
    );
}

#[test]
fn sharing_identical_trials_gives_the_same_results_as_running_each() {
    // Full recovery at every lost fraction, and partial recovery of a failure
    // that loses every block, are computed once per failure iteration.
    let dir = tmpdir("share");
    let scenario = small_recovery("share", 12).replace(
        "lost_fraction = [0.25, 0.75]",
        "lost_fraction = [0.25, 0.75, 1.0]",
    );
    assert!(scenario.contains("1.0]"), "{scenario}");
    std::fs::write(dir.join("partial.toml"), scenario).unwrap();
    // Full checkpoints are shared across selectors; a partial `random`
    // checkpoint draws from its own trial's stream, so trials failing at the
    // same T (with every block lost) share only where their draws left every
    // block saved at the same iteration (before the first checkpoint).
    let priority = small_recovery("share-priority", 12)
        .replace("lost = { fraction = 0.5 }", "lost = { fraction = 1.0 }")
        .replace("[checkpoint]", "[checkpoint]\nselector = \"priority\"")
        .replace(
            "[sweep]\nlost_fraction = [0.25, 0.75]",
            "[sweep]\ncheckpoint_fraction = [1.0, 0.25]",
        )
        .replace(
            "name = \"full\"\nrecovery = \"full\"",
            "name = \"random\"\nselector = \"random\"\nrecovery = \"partial\"",
        );
    assert!(
        priority.contains("checkpoint_fraction") && priority.contains("fraction = 1.0 }"),
        "{priority}"
    );
    std::fs::write(dir.join("priority.toml"), priority).unwrap();
    for (extra, out) in [(None, "shared"), (Some("--no-sharing"), "each")] {
        let mut args = vec![
            "run",
            "partial.toml",
            "priority.toml",
            "--synthetic",
            "--scale",
            "0.02",
            "--out",
            out,
            "--quiet",
            "--no-plot",
        ];
        args.extend(extra);
        let o = scarsim(&dir, &args);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    for file in [
        "share/trials.csv",
        "share/summary.csv",
        "share-priority/trials.csv",
    ] {
        assert_eq!(
            std::fs::read_to_string(dir.join("shared").join(file)).unwrap(),
            std::fs::read_to_string(dir.join("each").join(file)).unwrap(),
            "{file}"
        );
    }
    // --plan counts only the trials that run.
    let plan = |extra: Option<&str>| -> (String, f64) {
        let mut args = vec![
            "run",
            "partial.toml",
            "--synthetic",
            "--scale",
            "0.02",
            "--plan",
        ];
        args.extend(extra);
        let o = scarsim(&dir, &args);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        let iterations = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("trial iterations"))
            .and_then(|l| l.rsplit(": ").next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no trial iterations in {out}"));
        (out, iterations)
    };
    let (shared, fewer) = plan(None);
    let (each, all) = plan(Some("--no-sharing"));
    assert!(shared.contains("identical trials: "), "{shared}");
    assert!(!each.contains("identical trials"), "{each}");
    assert!(fewer > 0.0 && fewer < all, "{fewer} vs {all}");
}

#[test]
fn list_and_validate_bundled_scenarios() {
    let dir = tmpdir("list");
    let o = scarsim(&dir, &["list"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for name in ["scar-partial-mlr-mnist", "scar-priority-mlr-covtype"] {
        assert!(out.contains(name), "{out}");
    }
    assert!(
        out.contains("Fig. 6(a)") && !out.contains("INVALID"),
        "{out}"
    );
    let scenarios = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<String> = std::fs::read_dir(&scenarios)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".toml"))
        .collect();
    files.sort();
    let mut args = vec!["validate".to_string()];
    args.extend(files);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = scarsim(&dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = scarsim(&dir, &["validate", "scar-partial-mlr-mnist"]);
    assert!(o.status.success(), "bundled names validate: {}", stderr(&o));
}

/// Runs `scarsim validate` and `run` on `text`; both must fail with a
/// message containing every `needle`, and no result folder may appear.
fn rejects(name: &str, text: &str, needles: &[&str]) {
    let dir = tmpdir(name);
    std::fs::write(dir.join("bad.toml"), text).unwrap();
    for cmd in ["validate", "run"] {
        let mut args = vec![cmd, "bad.toml"];
        if cmd == "run" {
            args.extend(["--synthetic", "--scale", "0.02", "--out", "out"]);
        }
        let o = scarsim(&dir, &args);
        assert!(!o.status.success(), "{cmd} accepted {name}");
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{err}");
        for n in needles {
            assert!(err.contains(n), "{name}: `{n}` missing from:\n{err}");
        }
    }
    assert!(
        !dir.join("out").exists(),
        "{name}: no results for a rejected scenario"
    );
}

#[test]
fn bad_scenarios_are_rejected_clearly() {
    let good = small_recovery("bad", 2);
    rejects(
        "syntax",
        &good.replace("trials = 2", "trials = = 2"),
        &["bad.toml", "line 5", "column"],
    );
    rejects(
        "unknown",
        &good.replace("seed = 7", "seed = 7\nsede = 8"),
        &["unknown field `sede`", "line 7"],
    );
    rejects(
        "fraction",
        &good.replace("[0.25, 0.75]", "[0.25, 1.5]"),
        &["lost_fraction", "1.5", "(0, 1]"],
    );
    rejects(
        "zero-fraction",
        &good.replace("lost = { fraction = 0.5 }", "lost = { fraction = 0.0 }"),
        &["failure.lost.fraction", "(0, 1]"],
    );
    rejects(
        "p",
        &good.replace("p = 0.05", "p = 0"),
        &["failure.iteration.p", "(0, 1]"],
    );
    rejects(
        "p-big",
        &good.replace("p = 0.05", "p = 1.2"),
        &["failure.iteration.p", "(0, 1]"],
    );
    rejects(
        "interval",
        &good.replace("interval = 8", "interval = 0"),
        &["checkpoint.interval", "C = 0"],
    );
    rejects(
        "trials",
        &good.replace("trials = 2", "trials = 0"),
        &["trials", "at least 1"],
    );
    rejects(
        "kind",
        &good.replace("kind = \"recovery\"", "kind = \"recoveri\""),
        &["unknown scenario kind `recoveri`"],
    );
    rejects(
        "model",
        &good.replace("kind = \"mlr\"", "kind = \"svm\""),
        &["model.kind", "unknown model `svm`"],
    );
    rejects(
        "dataset",
        &good.replace("dataset = \"mnist\"", "dataset = \"cifar\""),
        &["unknown variant `cifar`"],
    );
}

#[test]
fn command_line_errors() {
    let dir = tmpdir("cli-errors");
    std::fs::write(dir.join("s.toml"), small_recovery("s", 2)).unwrap();
    let o = scarsim(
        &dir,
        &[
            "run",
            "s.toml",
            "--synthetic",
            "--trials",
            "0",
            "--out",
            "out",
        ],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("--trials"),
        "{}",
        stderr(&o)
    );
    let o = scarsim(&dir, &["run", "no-such-scenario"]);
    assert!(
        !o.status.success() && stderr(&o).contains("scarsim list"),
        "{}",
        stderr(&o)
    );
    let o = scarsim(&dir, &["run", "missing.toml"]);
    assert!(
        !o.status.success() && stderr(&o).contains("missing.toml"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("out").exists());
}

#[test]
fn missing_and_corrupt_datasets() {
    let dir = tmpdir("data");
    std::fs::write(dir.join("s.toml"), small_recovery("d", 2)).unwrap();
    let run = |data: &str| {
        scarsim(
            &dir,
            &[
                "run",
                "s.toml",
                "--data-dir",
                data,
                "--out",
                "out",
                "--quiet",
            ],
        )
    };

    // Missing: names the expected file and suggests --synthetic.
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let o = run("empty");
    let e = stderr(&o);
    assert!(!o.status.success());
    assert!(
        e.contains("train-images-idx3-ubyte") && e.contains("--synthetic") && e.contains("empty"),
        "{e}"
    );

    // Bad magic number.
    let mnist = dir.join("bad-magic/mnist");
    scarsim::data::mnist::write_idx(&mnist, &[0u8; 4 * 784], &[1, 2, 3, 4], 28, 28).unwrap();
    let p = mnist.join("train-images-idx3-ubyte");
    let mut b = std::fs::read(&p).unwrap();
    b[2] = 0x77;
    std::fs::write(&p, &b).unwrap();
    let e = stderr(&run("bad-magic"));
    assert!(
        e.contains("bad magic number") && e.contains("train-images-idx3-ubyte"),
        "{e}"
    );

    // Truncated gzip.
    let mnist = dir.join("trunc/mnist");
    scarsim::data::mnist::write_idx(&mnist, &[9u8; 4 * 784], &[1, 2, 3, 4], 28, 28).unwrap();
    for f in ["train-images-idx3-ubyte", "train-labels-idx1-ubyte"] {
        let raw = std::fs::read(mnist.join(f)).unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut enc, &raw).unwrap();
        let gz = enc.finish().unwrap();
        let gz = if f.starts_with("train-images") {
            gz[..gz.len() / 2].to_vec()
        } else {
            gz
        };
        std::fs::write(mnist.join(format!("{f}.gz")), gz).unwrap();
        std::fs::remove_file(mnist.join(f)).unwrap();
    }
    let e = stderr(&run("trunc"));
    assert!(
        e.contains("truncated") && e.contains("train-images-idx3-ubyte.gz"),
        "{e}"
    );

    // CoverType row of the wrong length.
    let cov = dir.join("covbad/covtype");
    std::fs::create_dir_all(&cov).unwrap();
    let row: Vec<String> = (0..55)
        .map(|i| if i == 54 { "2".into() } else { i.to_string() })
        .collect();
    std::fs::write(
        cov.join("covtype.data"),
        format!("{}\n{}\n", row.join(","), row[..50].join(",")),
    )
    .unwrap();
    let text = small_recovery("c", 2).replace("dataset = \"mnist\"", "dataset = \"covtype\"");
    std::fs::write(dir.join("c.toml"), text).unwrap();
    let o = scarsim(
        &dir,
        &[
            "run",
            "c.toml",
            "--data-dir",
            "covbad",
            "--out",
            "out",
            "--quiet",
        ],
    );
    let e = stderr(&o);
    assert!(
        e.contains("covtype.data line 2") && e.contains("found 50"),
        "{e}"
    );
    assert!(!dir.join("out").exists(), "no half-written results");
}

#[test]
fn unconvergeable_baseline_is_explained() {
    let dir = tmpdir("noconv");
    let text = small_recovery("n", 2).replace("criterion = 2.5e4", "criterion = 1.0");
    std::fs::write(dir.join("s.toml"), text).unwrap();
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
    let e = stderr(&o);
    assert!(
        !o.status.success()
            && e.contains("did not reach the criterion")
            && e.contains("max_iterations"),
        "{e}"
    );
    assert!(!dir.join("out").exists());
}

#[test]
fn a_closed_output_pipe_ends_quietly() {
    use std::process::{Command, Stdio};
    // Like `scarsim list | head -0`: the reader is gone before the first line.
    let mut child = Command::new(env!("CARGO_BIN_EXE_scarsim"))
        .arg("list")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

/// Under a per-trial data order the unperturbed runs advance side by side
/// and step from the deltas their stacked metric pass kept
/// (`Model::metric_apart`, `Model::step_apart`): the portable kernels give
/// the same bytes as the best level.
#[test]
fn mlr_per_trial_order_matches_on_every_kernel_level() {
    let dir = tmpdir("mlr-per-trial");
    let scenario = small_recovery("pertrial", 4)
        .replace("seed = 7\n", "seed = 7\ndata_order = \"per-trial\"\n")
        .replace("batch_size = 10000", "batch_size = 200")
        .replace("learning_rate = 1e-5", "learning_rate = 3e-6")
        .replace("criterion = 2.5e4", "criterion = 4e4");
    assert!(
        scenario.contains("data_order = \"per-trial\"") && scenario.contains("criterion = 4e4")
    );
    std::fs::write(dir.join("pertrial.toml"), scenario).unwrap();
    let standin = ["--synthetic", "--scale", "0.02"];
    assert_same_bytes_on_every_kernel_level(&dir, "pertrial.toml", "pertrial", &standin);
}

/// MLR's certified convergence check is exact: with a minibatch that divides
/// the stand-in's rows (so the bound is active), the results equal the
/// brute-force path's (every metric evaluated, nothing shared) trial by
/// trial, and the portable kernels give the same bytes as the best level.
#[test]
fn mlr_certified_check_and_kernel_levels_match_brute_force() {
    let dir = tmpdir("mlr-certified");
    // 1,200 stand-in rows at scale 0.02: batch 200 = six batches an epoch.
    // (A smaller step and a looser criterion keep this run short: the
    // portable kernels' fused multiply-adds are library calls.)
    let scenario = small_recovery("certified", 8)
        .replace("batch_size = 10000", "batch_size = 200")
        .replace("learning_rate = 1e-5", "learning_rate = 3e-6")
        .replace("criterion = 2.5e4", "criterion = 4e4");
    assert!(scenario.contains("batch_size = 200") && scenario.contains("criterion = 4e4"));
    std::fs::write(dir.join("certified.toml"), scenario).unwrap();
    let standin = ["--synthetic", "--scale", "0.02"];
    assert_same_bytes_on_every_kernel_level(&dir, "certified.toml", "certified", &standin);
    assert_same_bytes_as_brute_force(&dir, "certified.toml", "certified", &standin);
    let read = |run: &str, f: &str| std::fs::read(dir.join(run).join("certified").join(f)).unwrap();
    // Every trial converges inside the horizon (otherwise little was tested).
    let summary = String::from_utf8(read("best", "summary.csv")).unwrap();
    let mut lines = summary.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "unconverged").unwrap();
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 4, "{summary}");
    for row in rows {
        assert_eq!(row.split(',').nth(col), Some("0"), "{summary}");
    }
}

/// Shell completions and manual pages come from the clap definitions: every
/// subcommand appears in them, the manual hides the hidden flags, and an
/// unknown page is a clear error.
#[test]
fn completions_and_manual_pages() {
    let dir = tmpdir("completions");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = scarsim(&dir, &["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let text = String::from_utf8(o.stdout).unwrap();
        for sub in ["run", "merge", "reproduce", "bench", "completions"] {
            assert!(text.contains(sub), "{shell} lacks {sub}");
        }
    }
    let o = scarsim(&dir, &["completions", "tcsh"]);
    assert!(!o.status.success());
    let main = String::from_utf8(scarsim(&dir, &["man"]).stdout).unwrap();
    assert!(main.contains(".TH scarsim 1"), "{main}");
    assert!(
        main.contains("reproduce") && main.contains("merge"),
        "{main}"
    );
    let o = scarsim(&dir, &["man", "run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = String::from_utf8(o.stdout).unwrap();
    assert!(
        run.contains(".TH scarsim-run 1") && run.contains("resume"),
        "{run}"
    );
    assert!(!run.contains("exact"), "{run}");
    let o = scarsim(&dir, &["man", "nope"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("pages exist for: run"),
        "{}",
        stderr(&o)
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "wrote into the working folder"
    );
}

/// `scarsim bench` lists a kernel of every family and measures one on the
/// spot: the machine's limits and the event loop's rate, also as JSON.
#[test]
fn bench_lists_every_family_and_measures_the_event_loop() {
    let dir = tmpdir("bench");
    let o = scarsim(&dir, &["bench", "--list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list = String::from_utf8(o.stdout).unwrap();
    for name in [
        "mlr-forward-cohort",
        "mf-als-movielens-cohort",
        "lda-sweep-cohort",
        "cnn-train-step-1",
        "events-k-async",
    ] {
        assert!(list.contains(name), "{list}");
    }
    let o = scarsim(
        &dir,
        &[
            "bench",
            "--kernel",
            "events",
            "--seconds",
            "0.05",
            "--json",
            "b.json",
            "--synthetic",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(
        table.contains("f32 GEMM") && table.contains("f64 GEMM") && table.contains("events-k-sync"),
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("b.json")).unwrap()).unwrap();
    let rows = json["kernels"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{json}");
    for row in rows {
        assert_eq!(row["unit"], "events");
        assert!(row["rate"].as_f64().unwrap() > 1e3, "{row}");
    }
    let o = scarsim(&dir, &["bench", "--seconds", "0"]);
    assert!(!o.status.success(), "a zero-second bench was accepted");
}
