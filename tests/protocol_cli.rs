//! `protocol` scenarios end to end: output tables, determinism across thread
//! counts, empirical delay files, and bad input.

use crate::common;

use common::{assert_sharing_changes_no_byte, scarsim, stderr, tmpdir};

fn runtime_scenario(name: &str, trials: usize) -> String {
    format!(
        r#"
kind = "protocol"
name = "{name}"
title = "small runtime scenario"
trials = {trials}
seed = 11

[cluster]
workers = [2, 4]
compute_time = {{ distribution = "exponential", rate = 1.0 }}

[runtime]
warmup_updates = 10
updates = 100

[[series]]
protocol = "k-sync"
k = "divisors"

[[series]]
protocol = "k-batch-sync"
k = "divisors"

[[series]]
protocol = "k-async"
k = "divisors"

[[series]]
protocol = "k-batch-async"
k = "divisors"
"#
    )
}

fn training_scenario(name: &str, model: &str) -> String {
    format!(
        r#"
kind = "protocol"
name = "{name}"
title = "small training scenario"
trials = 3
seed = 5

[cluster]
workers = 4
compute_time = {{ distribution = "shifted-exponential", shift = 0.5, rate = 2.0 }}
communication_time = {{ distribution = "uniform", low = 0.0, high = 0.1 }}

{model}

[training]
horizon = 40.0
grid_step = 5.0
loss_subsample = 200
loss_every = 5
record_trials = 1

[[series]]
protocol = "k-sync"
k = [1, 4]

[[series]]
protocol = "k-async"
k = 1

[[series]]
name = "adaptive"
protocol = "k-async"
k_schedule = [{{ from = 0.0, k = 1 }}, {{ from = 20.0, k = 4 }}]

[[series]]
name = "aware"
protocol = "k-batch-async"
k = 2
staleness_aware = {{ c = 1e-9 }}
"#
    )
}

const QUADRATIC: &str = r#"[model]
kind = "quadratic"
dimension = 10
l = 1.0
c = 0.2
sigma2 = 1.0
batch_size = 1
learning_rate = 0.05"#;

const MLR: &str = r#"[model]
kind = "mlr"
dataset = "mnist"
batch_size = 16
learning_rate = 2e-6"#;

fn run(dir: &std::path::Path, file: &str, out: &str, threads: &str) {
    let o = scarsim(
        dir,
        &[
            "run",
            file,
            "--synthetic",
            "--scale",
            "0.02",
            "--threads",
            threads,
            "--out",
            out,
            "--quiet",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

fn header(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .split(',')
        .map(String::from)
        .collect()
}

#[test]
fn runtime_scenario_writes_theory_next_to_simulation_deterministically() {
    let dir = tmpdir("protocol-runtime");
    std::fs::write(dir.join("r.toml"), runtime_scenario("rt", 5)).unwrap();
    run(&dir, "r.toml", "one", "1");
    run(&dir, "r.toml", "two", "2");
    for f in ["summary.csv", "trials.csv", "ratios.csv"] {
        assert_eq!(
            std::fs::read(dir.join("one/rt").join(f)).unwrap(),
            std::fs::read(dir.join("two/rt").join(f)).unwrap(),
            "{f} differs between 1 and 2 threads"
        );
    }
    let res = dir.join("one/rt");
    let h = header(&res.join("summary.csv"));
    for col in [
        "series",
        "protocol",
        "workers",
        "k",
        "mean",
        "ci95_low",
        "ci95_high",
        "theory_exact",
        "theory_upper",
        "mean_staleness",
        "staleness_theory",
    ] {
        assert!(h.iter().any(|c| c == col), "summary lacks {col}");
    }
    // (2 + 3 divisors) x 4 protocols.
    let summary = std::fs::read_to_string(res.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 1 + 20);
    assert_eq!(
        std::fs::read_to_string(res.join("trials.csv"))
            .unwrap()
            .lines()
            .count(),
        1 + 100
    );
    let ratios = std::fs::read_to_string(res.join("ratios.csv")).unwrap();
    assert!(ratios.contains("k-sync K=4,k-async K=1"), "{ratios}");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(res.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["details"]["simulated_events"].as_u64().unwrap() > 0);
}

#[test]
fn training_scenarios_write_loss_curves_and_logs_deterministically() {
    let dir = tmpdir("protocol-training");
    for (name, model) in [("quad", QUADRATIC), ("mlr", MLR)] {
        std::fs::write(
            dir.join(format!("{name}.toml")),
            training_scenario(name, model),
        )
        .unwrap();
        run(&dir, &format!("{name}.toml"), "one", "1");
        run(&dir, &format!("{name}.toml"), "two", "2");
        // The portable kernels (the PS's update and gradient fold, MLR's
        // sparse gradient and loss scoring) give the best level's bytes.
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_scarsim"))
            .current_dir(&dir)
            .env("SCARSIM_KERNELS", "portable")
            .args([
                "run",
                &format!("{name}.toml"),
                "--synthetic",
                "--scale",
                "0.02",
            ])
            .args([
                "--threads",
                "2",
                "--out",
                "portable",
                "--quiet",
                "--no-plot",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        for f in [
            "summary.csv",
            "trials.csv",
            "loss_vs_time.csv",
            "updates.csv",
            "staleness.csv",
        ] {
            let one = std::fs::read(dir.join("one").join(name).join(f)).unwrap();
            assert_eq!(
                one,
                std::fs::read(dir.join("two").join(name).join(f)).unwrap(),
                "{name}/{f} differs between 1 and 2 threads"
            );
            assert_eq!(
                one,
                std::fs::read(dir.join("portable").join(name).join(f)).unwrap(),
                "{name}/{f} differs between the portable and the best kernels"
            );
        }
        let res = dir.join("one").join(name);
        let curve = std::fs::read_to_string(res.join("loss_vs_time.csv")).unwrap();
        // 5 points x 9 grid times (0, 5, ..., 40).
        assert_eq!(curve.lines().count(), 1 + 5 * 9);
        let summary = std::fs::read_to_string(res.join("summary.csv")).unwrap();
        assert!(summary.contains("adaptive") && summary.contains("0:1;20:4"));
        // Training lowers the loss in every series.
        let t = scarsim::report::Table::read(&res.join("loss_vs_time.csv")).unwrap();
        let (s, time, mean) = (
            t.column("series").unwrap(),
            t.column("time").unwrap(),
            t.column("mean").unwrap(),
        );
        for r in t.rows.iter().filter(|r| r[time] == "40") {
            let first = t
                .rows
                .iter()
                .find(|q| q[s] == r[s] && q[time] == "0")
                .unwrap();
            let (a, b): (f64, f64) = (first[mean].parse().unwrap(), r[mean].parse().unwrap());
            assert!(b < a, "{name} {}: {a} -> {b}", r[s]);
        }
        let updates = std::fs::read_to_string(res.join("updates.csv")).unwrap();
        assert!(updates.lines().count() > 10);
        let h = header(&res.join("updates.csv"));
        for col in ["time", "from_workers", "staleness", "loss"] {
            assert!(h.iter().any(|c| c == col));
        }
    }
    // The quadratic's K-sync rows carry the floor theory.
    let t = scarsim::report::Table::read(&dir.join("one/quad/summary.csv")).unwrap();
    let (s, ex) = (
        t.column("series").unwrap(),
        t.column("floor_theory_exact").unwrap(),
    );
    for r in &t.rows {
        assert_eq!(
            r[s].starts_with("k-sync"),
            !r[ex].is_empty(),
            "floor theory only for fresh gradients: {r:?}"
        );
    }
}

/// At K = 1 the batch variants run as K-sync and K-async
/// (`Protocol::run_at_k_one`) and each such run is computed once: every CSV
/// byte equals what running every unit gives (`--no-sharing`), on one
/// thread and on two (where a unit may wait for another's run), with K = 2
/// points (not shared) beside them.
#[test]
fn runs_shared_at_k_one_give_the_bytes_of_every_run_alone() {
    let dir = tmpdir("protocol-k-one");
    let base = training_scenario("kone", MLR);
    let head = &base[..base.find("[[series]]").unwrap()];
    let text = format!(
        "{head}{}",
        ["k-sync", "k-batch-sync", "k-async", "k-batch-async"]
            .map(|p| format!("[[series]]\nprotocol = \"{p}\"\nk = [1, 2]\n\n"))
            .concat()
    );
    std::fs::write(dir.join("kone.toml"), text).unwrap();
    assert_sharing_changes_no_byte(
        &dir,
        "kone.toml",
        "kone",
        &[
            "summary.csv",
            "trials.csv",
            "loss_vs_time.csv",
            "updates.csv",
            "staleness.csv",
        ],
    );
    // The pairs' K = 1 trials are the same runs, their K = 2 trials not.
    let t = scarsim::report::Table::read(&dir.join("alone/kone/trials.csv")).unwrap();
    let c = |n: &str| t.column(n).unwrap();
    let runs = |series: &str| -> Vec<String> {
        t.rows
            .iter()
            .filter(|r| r[c("series")] == series)
            .map(|r| {
                format!(
                    "{} {} {}",
                    r[c("final_loss")],
                    r[c("updates")],
                    r[c("cancelled")]
                )
            })
            .collect()
    };
    for (a, b) in [("k-sync", "k-batch-sync"), ("k-async", "k-batch-async")] {
        assert_eq!(runs(&format!("{a} K=1")), runs(&format!("{b} K=1")));
        assert_ne!(runs(&format!("{a} K=2")), runs(&format!("{b} K=2")));
    }
}

#[test]
fn empirical_delays_are_read_relative_to_the_scenario() {
    let dir = tmpdir("protocol-empirical");
    std::fs::create_dir_all(dir.join("sc/measured")).unwrap();
    std::fs::write(
        dir.join("sc/measured/times.csv"),
        "host,seconds\na,1.0\nb,2.0\nc,1.5\nd,4.0\n",
    )
    .unwrap();
    let text = runtime_scenario("emp", 3).replace(
        r#"{ distribution = "exponential", rate = 1.0 }"#,
        r#"{ distribution = "empirical", file = "measured/times.csv", column = "seconds" }"#,
    );
    std::fs::write(dir.join("sc/e.toml"), text).unwrap();
    run(&dir, "sc/e.toml", "out", "2");
    let t = scarsim::report::Table::read(&dir.join("out/emp/summary.csv")).unwrap();
    let (s, ex) = (
        t.column("series").unwrap(),
        t.column("theory_exact").unwrap(),
    );
    let ksync = t
        .rows
        .iter()
        .find(|r| r[s] == "k-sync K=1")
        .expect("k-sync row");
    assert!(!ksync[ex].is_empty(), "order statistics of measured times");
}

fn rejects(name: &str, text: &str, needles: &[&str]) {
    let dir = tmpdir(name);
    std::fs::write(dir.join("bad.toml"), text).unwrap();
    for cmd in ["validate", "run"] {
        let mut args = vec![cmd, "bad.toml"];
        if cmd == "run" {
            args.extend(["--synthetic", "--scale", "0.02", "--out", "out"]);
        }
        let o = scarsim(&dir, &args);
        assert_eq!(o.status.code(), Some(1), "{cmd} accepted {name}");
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{err}");
        for n in needles {
            assert!(err.contains(n), "{name}: `{n}` missing from:\n{err}");
        }
    }
    assert!(!dir.join("out").exists());
}

#[test]
fn bad_protocol_scenarios_are_rejected_clearly() {
    let good = runtime_scenario("bad", 2);
    rejects(
        "proto-name",
        &good.replacen("\"k-sync\"", "\"ksync\"", 1),
        &["bad.toml", "ksync", "k-batch-sync"],
    );
    rejects(
        "proto-k",
        &good.replacen("k = \"divisors\"", "k = 8", 1),
        &["K = 8 exceeds P = 2", "series.k"],
    );
    rejects(
        "proto-dist",
        &good.replace("rate = 1.0", "rate = 0.0"),
        &["cluster.compute_time", "rate = 0 must be a positive number"],
    );
    rejects(
        "proto-file",
        &good.replace(
            r#"{ distribution = "exponential", rate = 1.0 }"#,
            r#"{ distribution = "empirical", file = "missing.csv" }"#,
        ),
        &["missing.csv", "cannot read"],
    );
    rejects(
        "proto-both",
        &format!(
            "{}\n{}\n[training]\nhorizon = 1.0\ngrid_step = 1.0\n",
            good, QUADRATIC
        ),
        &["not both"],
    );
    rejects(
        "proto-unknown",
        &good.replace("updates = 100", "updates = 100\nupdate = 3"),
        &["unknown field `update`"],
    );
    let training = training_scenario("bad", QUADRATIC);
    rejects(
        "proto-schedule",
        &training.replace("{ from = 20.0, k = 4 }", "{ from = 10.0, k = 5 }"),
        &["K = 5 exceeds P = 4"],
    );
    rejects(
        "proto-quadratic",
        &training.replace("l = 1.0", "l = 0.1"),
        &["model.l", "≥ c"],
    );
    // `baseline` is for recovery scenarios.
    let dir = tmpdir("proto-baseline");
    std::fs::write(dir.join("r.toml"), good).unwrap();
    let o = scarsim(&dir, &["baseline", "r.toml", "--synthetic"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("applies to `recovery` scenarios"));
}
