//! An adversarial corpus: property tests over scenario fields and command
//! line arguments, and hand-written hostile files (symbolic links, edited
//! shard files, injected write errors). Every case must end in a result or a
//! clear error: never a panic or an abort, never a hang, never a file written
//! outside `--out`, never a folder that looks finished when it is not.
//!
//! Classes (as in the issue that asked for this corpus):
//! 1. nothing outside `--out`; 2. no panics or aborts; 3. no hangs;
//! 4. inputs naming what does not exist, or silently wrong, are errors;
//! 5. a folder is finished only when its manifest says so.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{small_recovery, stderr, tmpdir};
use proptest::prelude::*;

mod classes;
mod properties;

/// Runs scarsim with `args` (and `env`) in `cwd`, killing it and failing the
/// test if it takes more than `secs` seconds (class 3: no hangs).
fn bounded(cwd: &Path, args: &[&str], env: &[(&str, &str)], secs: u64) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scarsim"));
    cmd.current_dir(cwd)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("scarsim starts");
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > Duration::from_secs(secs) {
            child.kill().ok();
            child.wait().ok();
            panic!("scarsim {args:?} did not finish within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts a clean refusal: exit code 1 (not a panic's 101, not a signal),
/// a message that contains every one of `needles`, and no panic text.
fn refused(o: &Output, needles: &[&str]) -> String {
    let e = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected a clean error, got {:?}: {e}",
        o.status
    );
    assert!(!e.contains("panicked"), "{e}");
    for n in needles {
        assert!(e.contains(n), "`{n}` not in: {e}");
    }
    e
}

/// Asserts success without a panic.
fn succeeded(o: &Output) {
    assert!(o.status.success(), "{:?}: {}", o.status, stderr(o));
}

/// Every file below `dir` (recursively, links not followed), relative names.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(d) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(base).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                walk(base, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A checkpoint-interval scenario (no model: fast).
fn daly(mtbf: &str, checkpoint: f64, solve: f64, trials: &str) -> String {
    format!(
        r#"
kind = "faults"
name = "dly"
title = "t"
trials = {trials}
seed = 5

[interval]
solve_time = {solve:?}
checkpoint_time = {checkpoint:?}
restart_time = 2.0
mtbf = [{mtbf}]
factors = {{ from = 0.5, to = 2.0, points = 3 }}
"#
    )
}

/// A runtime-only protocol scenario (no model: fast).
fn runtime(workers: &str, updates: &str, delay: &str, trials: &str) -> String {
    format!(
        r#"
kind = "protocol"
name = "rt"
title = "t"
trials = {trials}
seed = 2

[cluster]
workers = [{workers}]
compute_time = {delay}

[runtime]
warmup_updates = 5
updates = {updates}

[[series]]
protocol = "k-sync"
k = "divisors"
"#
    )
}

/// A precision scenario on the 4-D quadratic (no data).
fn precision(iterations: &str, bits: &str) -> String {
    format!(
        r#"
kind = "precision"
name = "pr"
title = "t"
seed = 1

[model]
kind = "qp"
step_size = 0.01
x0 = [0.0, 0.0, 0.0, 0.0]

[convergence]
unperturbed_iterations = 100
max_iterations = 2000

[theory]
optimum = "analytic"
rate = "max-ratio"

[precision]
mantissa_bits = [{bits}]
iterations = {iterations}
tail = 50
"#
    )
}

/// A wall-clock faults scenario on the MNIST stand-in with `failure` as its
/// `[failure]` table body and `series` as its series.
fn wallclock(failure: &str, series: &str) -> String {
    format!(
        r#"
kind = "faults"
name = "wc"
title = "t"
trials = 1
seed = 3

[model]
kind = "mlr"
dataset = "mnist"
batch_size = 8
learning_rate = 1e-6

[wallclock]
workers = [1]
ps_nodes = 2
compute_time = {{ distribution = "constant", value = 0.05 }}
horizon = 2.0
grid_step = 0.5
loss_subsample = 100
criterion = 1.5
detection = 0.1
restart = 0.1

[checkpoint]
interval = 0.5
write_time = 0.02

[failure]
{failure}

[cost]
on_demand = 0.2
spot = 0.05

{series}
"#
    )
}

/// An iteration-count faults scenario (LDA on the Reuters stand-in).
fn iterations_faults(series: &str) -> String {
    format!(
        r#"
kind = "faults"
name = "it"
title = "t"
trials = 2
seed = 4

[model]
kind = "lda"
dataset = "reuters"
topics = 5
alpha = 1.0
beta = 1.0

[iterations]
iteration_time = 1.0
detection = 1.0
restart = 1.0
criterion_iteration = 5
max_iterations = 20
failure_iteration = 3
failure_offset = 0.5
ps_nodes = 4
lost_fraction = 0.5

[checkpoint]
cache_time = 0.1
write_time = 0.1

{series}
"#
    )
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}
