//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A test's temporary folder: removed when the test ends, whether it passed
/// or not, unless `SCARSIM_KEEP_TEST_DIRS` is set (to inspect a failure).
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("SCARSIM_KEEP_TEST_DIRS").is_none() {
            std::fs::remove_dir_all(&self.0).ok();
        }
    }
}

/// A fresh temporary folder for one test.
pub fn tmpdir(name: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("scarsim-it-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// Runs the scarsim binary with `args` in `cwd`.
pub fn scarsim(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scarsim"))
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("scarsim runs")
}

/// Runs the scenario file `scenario` (in `dir`) on the stand-ins at scale
/// 0.02 with 1 and with 2 threads, into `dir/one` and `dir/two`, and asserts
/// that `files` of its results folder `name` are byte-identical.
pub fn assert_same_bytes_on_one_and_two_threads(
    dir: &Path,
    scenario: &str,
    name: &str,
    files: &[&str],
) {
    for (threads, out) in [("1", "one"), ("2", "two")] {
        let o = scarsim(
            dir,
            &[
                "run",
                scenario,
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
    for f in files {
        assert_eq!(
            std::fs::read(dir.join("one").join(name).join(f)).unwrap(),
            std::fs::read(dir.join("two").join(name).join(f)).unwrap(),
            "{f} differs between 1 and 2 threads"
        );
    }
}

/// Asserts that `scarsim list` shows each bundled scenario with its paper
/// panel (and none as INVALID), and that `validate` accepts each by name.
pub fn assert_listed_with_panels(dir: &Path, panels: &[(&str, &str)]) {
    let o = scarsim(dir, &["list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("INVALID"), "{out}");
    for (name, panel) in panels {
        let line = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{out}"));
        assert!(line.contains(panel), "{line}");
        let o = scarsim(dir, &["validate", name]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// `reproduce` at CI size: 2 trials per point, the stand-ins at 2% of the
/// real datasets' size, even where real data is present.
pub const QUICK_REPRODUCE: [&str; 7] = [
    "reproduce",
    "--quick",
    "--trials",
    "2",
    "--scale",
    "0.02",
    "--synthetic",
];

/// Runs the scenario file `file` in `dir` on the stand-ins at 2% with
/// sharing on 1 and 2 threads (into `one/`, `two/`) and with `--no-sharing`
/// (into `alone/`), and asserts that each of `files` of the scenario `name`
/// has the same bytes in all three.
pub fn assert_sharing_changes_no_byte(dir: &Path, file: &str, name: &str, files: &[&str]) {
    let args = |out: &'static str, threads: &'static str| {
        vec![
            "run",
            file,
            "--synthetic",
            "--scale",
            "0.02",
            "--out",
            out,
            "--threads",
            threads,
            "--quiet",
            "--no-plot",
        ]
    };
    let mut alone = args("alone", "2");
    alone.push("--no-sharing");
    for a in [args("one", "1"), args("two", "2"), alone] {
        run_ok(dir, &a);
    }
    for f in files {
        let alone = std::fs::read(dir.join("alone").join(name).join(f)).unwrap();
        for shared in ["one", "two"] {
            let bytes = std::fs::read(dir.join(shared).join(name).join(f)).unwrap();
            assert!(
                bytes == alone,
                "{f}: {shared} thread(s) with sharing differ from --no-sharing"
            );
        }
    }
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A small recovery scenario on the MNIST stand-in (use with --synthetic --scale 0.02).
pub fn small_recovery(name: &str, trials: usize) -> String {
    format!(
        r#"
kind = "recovery"
name = "{name}"
title = "small test scenario"
trials = {trials}
seed = 7

[model]
kind = "mlr"
dataset = "mnist"
batch_size = 10000
learning_rate = 1e-5

[convergence]
criterion = 2.5e4
max_iterations = 400

[failure]
iteration = {{ distribution = "geometric", p = 0.05 }}
lost = {{ fraction = 0.5 }}

[checkpoint]
interval = 8

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

/// Runs `scenario` (in `dir`) with `args` twice — at the best kernel level
/// the CPU has and with `SCARSIM_KERNELS=portable` — into `dir/best` and
/// `dir/portable`, and asserts that the CSV files of results folder `name`
/// are byte-identical.
pub fn assert_same_bytes_on_every_kernel_level(
    dir: &Path,
    scenario: &str,
    name: &str,
    args: &[&str],
) {
    for (level, out) in [(None, "best"), (Some("portable"), "portable")] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_scarsim"));
        cmd.current_dir(dir)
            .args(["run", scenario, "--out", out, "--quiet", "--no-plot"])
            .args(args);
        match level {
            Some(l) => cmd.env("SCARSIM_KERNELS", l),
            None => cmd.env_remove("SCARSIM_KERNELS"),
        };
        let o = cmd.output().expect("scarsim runs");
        assert!(o.status.success(), "{out}: {}", stderr(&o));
    }
    for f in ["summary.csv", "trials.csv", "baseline.csv"] {
        assert_eq!(
            std::fs::read(dir.join("best").join(name).join(f)).unwrap(),
            std::fs::read(dir.join("portable").join(name).join(f)).unwrap(),
            "{name}: {f} differs between the portable and the best kernels"
        );
    }
}

/// Runs `scenario` by the brute-force path (every metric evaluated, nothing
/// shared, every trial rerun from x(0): `--exact-metric --no-sharing
/// --rerun`) with `args` into `dir/brute`, and asserts that the CSV files of
/// results folder `name` equal those of the run already in `dir/best`.
pub fn assert_same_bytes_as_brute_force(dir: &Path, scenario: &str, name: &str, args: &[&str]) {
    let mut brute = vec![
        "run",
        scenario,
        "--out",
        "brute",
        "--quiet",
        "--no-plot",
        "--exact-metric",
        "--no-sharing",
        "--rerun",
    ];
    brute.extend(args);
    run_ok(dir, &brute);
    for f in ["summary.csv", "trials.csv", "baseline.csv"] {
        assert_eq!(
            std::fs::read(dir.join("best").join(name).join(f)).unwrap(),
            std::fs::read(dir.join("brute").join(name).join(f)).unwrap(),
            "{name}: {f} differs from the brute-force path's"
        );
    }
}

/// Runs the scarsim binary with `args` in `dir` and fails the test, with its
/// stderr, unless it succeeds.
pub fn run_ok(dir: &Path, args: &[&str]) {
    let o = scarsim(dir, args);
    assert!(o.status.success(), "scarsim {args:?}: {}", stderr(&o));
}
