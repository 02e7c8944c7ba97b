//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh temporary folder for one test.
pub fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("scarsim-it-{name}-{}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the scarsim binary with `args` in `cwd`.
pub fn scarsim(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scarsim"))
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("scarsim runs")
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
