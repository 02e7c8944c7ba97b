//! The checkpoint/restart time model of Daly (2006), *A higher order estimate
//! of the optimum checkpoint interval for restart dumps*, which SCAR §4 uses
//! to split the running time: `T = T_solve + T_dump + T_rework + T_restart`.
//!
//! Notation (Daly 2006, §2): `T_s` solve time (work without failures or
//! checkpoints), `τ` compute time between checkpoints, `δ` time to write one
//! checkpoint, `R` restart time, `M` mean time between failures (failures form
//! a Poisson process that can also strike during checkpoints and restarts).
//!
//! [`simulate_checkpoint_restart`] plays one timeline against a given
//! sequence of failure times; its mean over many timelines is what the
//! formulas predict ([`expected_wall_time`] exactly, `daly_wall_time` in
//! Daly's closed form).

use serde::{Deserialize, Serialize};

/// Young's first-order optimum checkpoint interval √(2δM) (Young 1974).
pub(crate) fn young_interval(delta: f64, mtbf: f64) -> f64 {
    (2.0 * delta * mtbf).sqrt()
}

/// Daly's first-order optimum √(2δM) − δ (the form quoted in the issue).
pub(crate) fn daly_first_order_interval(delta: f64, mtbf: f64) -> f64 {
    (young_interval(delta, mtbf) - delta).max(0.0)
}

/// Daly's higher-order optimum (Daly 2006, the higher-order estimate):
/// τ_opt = √(2δM)·[1 + ⅓·√(δ/2M) + (1/9)·(δ/2M)] − δ for δ < 2M, and M otherwise.
pub fn daly_interval(delta: f64, mtbf: f64) -> f64 {
    if delta >= 2.0 * mtbf {
        return mtbf;
    }
    let x = delta / (2.0 * mtbf);
    young_interval(delta, mtbf) * (1.0 + x.sqrt() / 3.0 + x / 9.0) - delta
}

/// Daly's expected wall time (Daly 2006, the complete model with failures during restarts):
/// T_w(τ) = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ.
pub(crate) fn daly_wall_time(solve: f64, tau: f64, delta: f64, restart: f64, mtbf: f64) -> f64 {
    mtbf * (restart / mtbf).exp() * (((tau + delta) / mtbf).exp() - 1.0) * solve / tau
}

/// The exact expected wall time of [`simulate_checkpoint_restart`]: the work
/// is cut into ⌈T_s/τ⌉ segments (the last one shorter), each followed by a
/// checkpoint, and a segment of length L = compute + δ takes
/// M·e^{R/M}·(e^{L/M} − 1) in expectation. Equals `daly_wall_time` when τ divides T_s.
pub fn expected_wall_time(solve: f64, tau: f64, delta: f64, restart: f64, mtbf: f64) -> f64 {
    let seg = |l: f64| mtbf * (restart / mtbf).exp() * ((l / mtbf).exp() - 1.0);
    let full = (solve / tau + 1e-9).floor();
    let rest = solve - full * tau;
    let mut t = full * seg(tau + delta);
    if rest > 1e-9 * tau {
        t += seg(rest + delta);
    }
    t
}

/// The τ in `[lo, hi]` minimising [`expected_wall_time`] (golden-section
/// search on the smooth envelope [`daly_wall_time`]).
pub(crate) fn numeric_optimum(delta: f64, restart: f64, mtbf: f64, lo: f64, hi: f64) -> f64 {
    let f = |t: f64| daly_wall_time(1.0, t, delta, restart, mtbf);
    let (mut a, mut b) = (lo, hi);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..200 {
        let c = b - g * (b - a);
        let d = a + g * (b - a);
        if f(c) < f(d) {
            b = d;
        } else {
            a = c;
        }
    }
    (a + b) / 2.0
}

/// Where one timeline's wall time went (SCAR §4, after Daly).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSplit {
    /// T_solve: useful compute that was kept.
    #[serde(with = "crate::report::json_f64")]
    pub solve: f64,
    /// T_dump: time spent writing checkpoints that completed.
    #[serde(with = "crate::report::json_f64")]
    pub dump: f64,
    /// T_rework: compute and checkpoint time lost to failures (redone later).
    #[serde(with = "crate::report::json_f64")]
    pub rework: f64,
    /// T_restart: time from each failure until work resumes.
    #[serde(with = "crate::report::json_f64")]
    pub restart: f64,
}

impl TimeSplit {
    /// T = T_solve + T_dump + T_rework + T_restart.
    pub fn total(&self) -> f64 {
        self.solve + self.dump + self.rework + self.restart
    }
}

/// One checkpoint/restart timeline (Daly's model): the work `solve` is done in
/// segments of `tau` (the last one shorter), each followed by a checkpoint of
/// `delta`; a failure at any moment (computing, checkpointing or restarting)
/// loses everything since the last completed checkpoint and costs a restart
/// of `restart` before work resumes. `next_failure(t)` gives the first failure
/// time strictly after `t` (a Poisson process or a trace; `f64::INFINITY` for none).
/// Returns the time split and the number of failures that struck, or
/// [`TooManySteps`] once more than `max_steps` segments and failures have
/// been played (failures that come faster than a segment and its checkpoint
/// take would otherwise never let the timeline finish).
pub fn simulate_checkpoint_restart(
    solve: f64,
    tau: f64,
    delta: f64,
    restart: f64,
    max_steps: usize,
    mut next_failure: impl FnMut(f64) -> f64,
) -> Result<(TimeSplit, usize), TooManySteps> {
    let mut split = TimeSplit::default();
    let mut t = 0.0;
    let mut done = 0.0;
    let mut failures = 0;
    let mut steps = 0usize;
    let mut fail_at = next_failure(0.0);
    let mut step = |t: f64, done: f64| {
        steps += 1;
        if steps > max_steps {
            Err(TooManySteps {
                steps: max_steps,
                time: t,
                done,
            })
        } else {
            Ok(())
        }
    };
    while done < solve - 1e-12 * solve.max(1.0) {
        step(t, done)?;
        let compute = tau.min(solve - done);
        let end = t + compute + delta;
        if fail_at >= end {
            t = end;
            done += compute;
            split.solve += compute;
            split.dump += delta;
            continue;
        }
        // A failure during this segment: its work and checkpoint are lost.
        failures += 1;
        split.rework += fail_at - t;
        t = fail_at;
        fail_at = next_failure(t);
        // Restart; a failure during the restart starts it again.
        while fail_at < t + restart {
            step(t, done)?;
            failures += 1;
            split.restart += fail_at - t;
            t = fail_at;
            fail_at = next_failure(t);
        }
        split.restart += restart;
        t += restart;
    }
    Ok((split, failures))
}

/// A timeline that did not finish within its step limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TooManySteps {
    /// The limit of segments and failures that was reached.
    pub steps: usize,
    /// Simulated time by then.
    pub(crate) time: f64,
    /// Work kept by then.
    pub(crate) done: f64,
}

impl std::fmt::Display for TooManySteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the checkpoint/restart timeline did not finish within {} segments and failures \
             (after {:.3e} s of simulated time only {:.3e} s of work was kept): failures come faster \
             than a segment and its checkpoint complete",
            self.steps, self.time, self.done
        )
    }
}

impl std::error::Error for TooManySteps {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_agree_with_each_other() {
        // δ = 60 s, M = 1 day: δ/2M is tiny, all optima are close to √(2δM).
        let (d, m) = (60.0, 86_400.0);
        let y = young_interval(d, m);
        assert!((y - 3219.94).abs() < 0.01, "{y}");
        let h = daly_interval(d, m);
        assert!(h > y - d && h < y, "{h}");
        let n = numeric_optimum(d, 0.0, m, 1.0, 10.0 * m);
        assert!((h - n).abs() / n < 1e-3, "Daly {h} vs numeric {n}");
        // δ ≥ 2M: checkpoint every M.
        assert_eq!(daly_interval(3.0, 1.0), 1.0);
        // Whole segments: the exact sum equals the closed form.
        let a = expected_wall_time(100.0, 10.0, 1.0, 2.0, 50.0);
        let b = daly_wall_time(100.0, 10.0, 1.0, 2.0, 50.0);
        assert!((a - b).abs() < 1e-9 * b);
    }

    #[test]
    fn hand_traced_timeline() {
        // Work 10 in segments of 4 (4, 4, 2), δ = 1, R = 2, failures at 7 and 8.
        // [0,5): seg 1 + ckpt, kept. [5,7): seg 2 computing, fails at 7 →
        // rework 2. Restart [7,9) is hit at 8 → restart 1, restart again [8,10).
        // [10,15): seg 2 + ckpt. [15,18): seg 3 (2) + ckpt. Total 18.
        let fails = [7.0, 8.0];
        let (s, n) = simulate_checkpoint_restart(10.0, 4.0, 1.0, 2.0, 100, |t| {
            fails
                .iter()
                .copied()
                .find(|&f| f > t)
                .unwrap_or(f64::INFINITY)
        })
        .unwrap();
        assert_eq!(n, 2);
        assert_eq!(s.solve, 10.0);
        assert_eq!(s.dump, 3.0);
        assert_eq!(s.rework, 2.0);
        assert_eq!(s.restart, 3.0);
        assert_eq!(s.total(), 18.0);
    }

    #[test]
    fn no_failures_costs_solve_plus_dumps() {
        let (s, n) =
            simulate_checkpoint_restart(9.0, 4.0, 0.5, 2.0, 100, |_| f64::INFINITY).unwrap();
        assert_eq!(n, 0);
        assert_eq!(s.total(), 9.0 + 3.0 * 0.5);
    }

    #[test]
    fn failures_faster_than_a_segment_end_in_an_error() {
        // A failure every second against a 60 s checkpoint: never finishes.
        let e = simulate_checkpoint_restart(100.0, 1.0, 60.0, 0.0, 1000, |t| t.floor() + 1.0)
            .unwrap_err();
        assert_eq!(e.steps, 1000);
        assert_eq!(e.done, 0.0);
        assert!(e.to_string().contains("did not finish"), "{e}");
    }
}
