//! `[interval]` faults scenarios: every checkpoint interval on the same Poisson
//! failure times; the simulated best interval next to Young's and Daly's.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::experiment::Outcome;
use crate::report::columns::faults::{IntervalSummaryRow, IntervalTrialRow, OptimumRow};
use crate::report::row::Row;
use crate::rng::{Purpose, stream};
use crate::scenario::faults::{FaultsScenario, IntervalConfig};
use crate::stats::Summary;
use crate::theory::daly::{self, TimeSplit};

/// One (MTBF, trial) unit: every interval on the same failure times.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct IntervalTrial {
    pub(super) splits: Vec<TimeSplit>,
    pub(super) failures: Vec<usize>,
}

/// Failure times of a Poisson process, drawn once and shared by every interval.
struct PoissonTimes {
    rng: crate::rng::SimRng,
    mean: f64,
    times: Vec<f64>,
}

impl PoissonTimes {
    fn after(&mut self, t: f64) -> f64 {
        while self.times.last().is_none_or(|&l| l <= t) {
            let last = self.times.last().copied().unwrap_or(0.0);
            let next = last + crate::policy::failure::exponential(&mut self.rng, self.mean);
            self.times.push(next);
        }
        let i = self.times.partition_point(|&x| x <= t);
        self.times[i]
    }
}

/// τ of factor `f` at MTBF `m`: f × Daly's higher-order optimum.
pub(crate) fn interval_tau(cfg: &IntervalConfig, m: f64, f: f64) -> f64 {
    f * daly::daly_interval(cfg.checkpoint_time, m)
}

/// Most segments and failures one simulated timeline may take (ten times
/// the expected number the scenario is allowed, see
/// [`crate::scenario::faults::MAX_TIMELINE_STEPS`]).
const TIMELINE_STEP_LIMIT: usize = 100_000_000;

pub(super) fn interval_trial(
    sc: &FaultsScenario,
    cfg: &IntervalConfig,
    p: usize,
    t: usize,
) -> Result<IntervalTrial> {
    let m = cfg.mtbf[p];
    let mut times = PoissonTimes {
        rng: stream(sc.meta.seed, Purpose::FailureTime, t as u64, p as u64),
        mean: m,
        times: Vec::new(),
    };
    let mut splits = Vec::new();
    let mut failures = Vec::new();
    for &f in &cfg.factors {
        let tau = interval_tau(cfg, m, f);
        let (s, n) = daly::simulate_checkpoint_restart(
            cfg.solve_time,
            tau,
            cfg.checkpoint_time,
            cfg.restart_time,
            TIMELINE_STEP_LIMIT,
            |x| times.after(x),
        )
        .map_err(|e| anyhow::anyhow!("MTBF {m} s, interval {tau} s, trial {t}: {e}"))?;
        splits.push(s);
        failures.push(n);
    }
    Ok(IntervalTrial { splits, failures })
}

pub(super) fn interval_tables(
    sc: &FaultsScenario,
    cfg: &IntervalConfig,
    runs: &[IntervalTrial],
) -> Outcome {
    let trials = sc.meta.trials;
    let mut summary = IntervalSummaryRow::table();
    let mut optimum = OptimumRow::table();
    let mut trial_table = IntervalTrialRow::table();
    let (d, r, w) = (cfg.checkpoint_time, cfg.restart_time, cfg.solve_time);
    for (p, &m) in cfg.mtbf.iter().enumerate() {
        let rs = &runs[p * trials..(p + 1) * trials];
        let name = format!("MTBF {}", fmt_duration(m));
        let mut means = Vec::new();
        let mut sums = Vec::new();
        for (fi, &f) in cfg.factors.iter().enumerate() {
            let tau = interval_tau(cfg, m, f);
            let walls: Vec<f64> = rs.iter().map(|x| x.splits[fi].total()).collect();
            let s = Summary::of(&walls);
            let mean = |g: &dyn Fn(&TimeSplit) -> f64| {
                rs.iter().map(|x| g(&x.splits[fi])).sum::<f64>() / rs.len() as f64
            };
            summary.add(&IntervalSummaryRow {
                scenario: sc.meta.name.clone(),
                series: name.clone(),
                mtbf: m,
                x_name: "interval",
                x: tau,
                factor: f,
                metric: "wall_time",
                trials: s.n,
                mean: s.mean,
                std: s.std,
                ci95_low: s.ci95_low,
                ci95_high: s.ci95_high,
                expected_exact: daly::expected_wall_time(w, tau, d, r, m),
                daly_closed_form: daly::daly_wall_time(w, tau, d, r, m),
                failures: rs.iter().map(|x| x.failures[fi] as f64).sum::<f64>() / rs.len() as f64,
                solve: mean(&|s| s.solve),
                dump: mean(&|s| s.dump),
                rework: mean(&|s| s.rework),
                restart: mean(&|s| s.restart),
            });
            for (t, x) in rs.iter().enumerate() {
                trial_table.add(&IntervalTrialRow {
                    mtbf: m,
                    trial: t,
                    factor: f,
                    interval: tau,
                    wall_time: x.splits[fi].total(),
                    failures: x.failures[fi],
                });
            }
            means.push(s.mean);
            sums.push(s);
        }
        let best = (0..means.len())
            .min_by(|&a, &b| means[a].total_cmp(&means[b]))
            .unwrap_or(0);
        let at_daly = cfg
            .factors
            .iter()
            .position(|&f| (f - 1.0).abs() < 1e-12)
            .unwrap_or(best);
        // Paired excess of Daly's interval over the best one found (same failure times).
        let excess: Vec<f64> = rs
            .iter()
            .map(|x| x.splits[at_daly].total() - x.splits[best].total())
            .collect();
        let e = Summary::of(&excess);
        let agrees = e.ci95_low <= 0.0 || at_daly == best;
        optimum.add(&OptimumRow {
            mtbf: m,
            checkpoint_time: d,
            restart_time: r,
            solve_time: w,
            young: daly::young_interval(d, m),
            daly_first_order: daly::daly_first_order_interval(d, m),
            daly_higher_order: daly::daly_interval(d, m),
            formula_minimum: daly::numeric_optimum(d, r, m, 1e-3 * d, 20.0 * m),
            simulated_best: interval_tau(cfg, m, cfg.factors[best]),
            simulated_best_wall: sums[best].mean,
            simulated_best_ci95_low: sums[best].ci95_low,
            simulated_best_ci95_high: sums[best].ci95_high,
            wall_at_daly: sums[at_daly].mean,
            wall_at_daly_ci95_low: sums[at_daly].ci95_low,
            wall_at_daly_ci95_high: sums[at_daly].ci95_high,
            paired_excess_at_daly: e.mean,
            paired_excess_ci95_low: e.ci95_low,
            paired_excess_ci95_high: e.ci95_high,
            daly_agrees: agrees,
        });
    }
    Outcome {
        summary,
        trials: trial_table,
        extra: vec![("optimum.csv".into(), optimum)],
        data: json!({ "dataset": "none" }),
        details: json!({ "measure": "interval" }),
    }
}

/// `600` → `10 min`, `86400` → `1 day`, for legends.
pub(crate) fn fmt_duration(s: f64) -> String {
    if s >= 86_400.0 && (s / 86_400.0).fract() == 0.0 {
        let d = s / 86_400.0;
        format!("{d} day{}", if d == 1.0 { "" } else { "s" })
    } else if s >= 3600.0 && (s / 3600.0).fract() == 0.0 {
        format!("{} h", s / 3600.0)
    } else if s >= 60.0 && (s / 60.0).fract() == 0.0 {
        format!("{} min", s / 60.0)
    } else {
        format!("{s} s")
    }
}
