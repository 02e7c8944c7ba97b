//! Runtime scenarios: time per iteration per trial, its summary next to the
//! closed forms and bounds, and the sync/async ratios.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{constant_shift, describe_comm};
use crate::cluster::sim::{Handler, UpdateInfo};
use crate::cluster::{Protocol, RunStats, Stop, WorkerDelays, simulate};
use crate::experiment::Outcome;
use crate::report::Table;
use crate::report::columns::protocol::{RatioRow, RuntimeSummaryRow, RuntimeTrialRow};
use crate::report::row::Row;
use crate::scenario::protocol::{Point, ProtocolScenario, RuntimeConfig};
use crate::stats::Summary;
use crate::theory::dutta::{self, GradientTime, Theory};

/// Watches updates: the clock at the end of the warm-up and staleness of the measured updates.
struct RuntimeProbe {
    warmup: u64,
    t_warm: f64,
    staleness_sum: f64,
    staleness_n: u64,
    staleness_max: u64,
}

impl Handler for RuntimeProbe {
    fn update(&mut self, u: &UpdateInfo<'_>) {
        if u.version == self.warmup {
            self.t_warm = u.time;
        }
        if u.version > self.warmup {
            for g in u.gradients {
                self.staleness_sum += g.staleness as f64;
                self.staleness_n += 1;
                self.staleness_max = self.staleness_max.max(g.staleness);
            }
        }
    }
}

/// One runtime trial.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct RuntimeTrial {
    #[serde(with = "crate::report::json_f64")]
    pub(super) time_per_iteration: f64,
    #[serde(with = "crate::report::json_f64")]
    mean_staleness: f64,
    max_staleness: u64,
    stats: RunStats,
}

pub(super) fn runtime_trial(
    sc: &ProtocolScenario,
    rt: &RuntimeConfig,
    p: &Point,
    t: usize,
) -> RuntimeTrial {
    let protocol = sc.series[p.series].protocol;
    let mut delays = WorkerDelays::new(
        &sc.compute_time,
        sc.communication_time.as_ref(),
        sc.meta.seed,
        t as u64,
        p.workers,
    );
    let mut probe = RuntimeProbe {
        warmup: rt.warmup_updates,
        t_warm: 0.0,
        staleness_sum: 0.0,
        staleness_n: 0,
        staleness_max: 0,
    };
    let stats = simulate(
        p.workers,
        protocol,
        &p.schedule,
        Stop::Updates(rt.warmup_updates + rt.updates),
        &mut delays,
        &mut probe,
    );
    RuntimeTrial {
        time_per_iteration: (stats.end_time - probe.t_warm) / rt.updates as f64,
        mean_staleness: probe.staleness_sum / probe.staleness_n.max(1) as f64,
        max_staleness: probe.staleness_max,
        stats,
    }
}

/// The theory for a runtime point (empty when the communication time is random).
fn runtime_theory(sc: &ProtocolScenario, p: &Point) -> Theory {
    let (Some(shift), Some(k)) = (constant_shift(sc), p.k) else {
        return Theory {
            source: "no closed form (random communication time or K schedule)".into(),
            ..Theory::default()
        };
    };
    let x = GradientTime {
        compute: &sc.compute_time,
        shift,
    };
    dutta::time_per_iteration(sc.series[p.series].protocol, &x, p.workers, k)
}

pub(super) fn runtime_tables(
    sc: &ProtocolScenario,
    rt: &RuntimeConfig,
    results: &[RuntimeTrial],
) -> Outcome {
    let points = sc.points();
    let trials = sc.meta.trials;
    let by_point: Vec<&[RuntimeTrial]> = results.chunks(trials).collect();

    let mut trial_table = RuntimeTrialRow::table();
    let mut summary = RuntimeSummaryRow::table();
    let mut theories = Vec::new();
    for (pi, p) in points.iter().enumerate() {
        let protocol = sc.series[p.series].protocol;
        let rs = by_point[pi];
        for (t, r) in rs.iter().enumerate() {
            let st = &r.stats;
            trial_table.add(&RuntimeTrialRow {
                series: p.label.clone(),
                protocol: protocol.name(),
                workers: p.workers,
                k: p.k,
                trial: t,
                time_per_iteration: r.time_per_iteration,
                mean_staleness: r.mean_staleness,
                max_staleness: r.max_staleness,
                cancelled_per_update: st.cancelled as f64 / st.updates.max(1) as f64,
                gradients_per_update: st.pushed as f64 / st.updates.max(1) as f64,
                events: st.events,
            });
        }
        let times: Vec<f64> = rs.iter().map(|r| r.time_per_iteration).collect();
        let s = Summary::of(&times);
        let th = runtime_theory(sc, p);
        let se = s.std / (s.n as f64).sqrt();
        let (z, rel, check) = match (th.exact, th.lower, th.upper) {
            (Some(e), _, _) => (
                (s.mean - e) / se,
                (s.mean - e) / e,
                if s.ci95_low <= e && e <= s.ci95_high {
                    "agrees"
                } else {
                    "outside_ci"
                },
            ),
            (None, lo, hi) if lo.is_some() || hi.is_some() => {
                let ok = lo.is_none_or(|l| s.ci95_high >= l) && hi.is_none_or(|h| s.ci95_low <= h);
                (
                    f64::NAN,
                    f64::NAN,
                    if ok {
                        "within_bounds"
                    } else {
                        "outside_bounds"
                    },
                )
            }
            _ => (f64::NAN, f64::NAN, ""),
        };
        let mean_of = |f: &dyn Fn(&RuntimeTrial) -> f64| {
            rs.iter().map(f).sum::<f64>() / rs.len().max(1) as f64
        };
        summary.add(&RuntimeSummaryRow {
            scenario: sc.meta.name.clone(),
            series: p.label.clone(),
            protocol: protocol.name(),
            x_name: "k",
            x: p.k,
            metric: "time_per_iteration",
            workers: p.workers,
            k: p.k,
            trials: s.n,
            mean: s.mean,
            std: s.std,
            ci95_low: s.ci95_low,
            ci95_high: s.ci95_high,
            theory_exact: th.exact,
            theory_lower: th.lower,
            theory_upper: th.upper,
            theory_z: z,
            theory_rel_error: rel,
            theory_check: check,
            theory_source: th.source.clone(),
            mean_staleness: mean_of(&|r| r.mean_staleness),
            staleness_theory: p.k.map(|k| dutta::mean_staleness(protocol, p.workers, k)),
            max_staleness: rs.iter().map(|r| r.max_staleness).max().unwrap_or(0),
            cancelled_per_update: mean_of(&|r| {
                r.stats.cancelled as f64 / r.stats.updates.max(1) as f64
            }),
            gradients_per_update: mean_of(&|r| {
                r.stats.pushed as f64 / r.stats.updates.max(1) as f64
            }),
            compute_time: sc.compute_time.describe(),
            communication_time: describe_comm(sc),
            warmup_updates: rt.warmup_updates,
            updates: rt.updates,
        });
        theories.push(th);
    }
    let ratios = ratio_table(sc, &points, &by_point, &theories);
    let events: u64 = results.iter().map(|r| r.stats.events).sum();
    Outcome {
        summary,
        trials: trial_table,
        extra: vec![("ratios.csv".into(), ratios)],
        data: json!({ "dataset": "none" }),
        details: json!({
            "measure": "runtime",
            "simulated_events": events,
        }),
    }
}

/// Sync/async ratios of the mean time per iteration: K-sync over K-async and
/// K-batch-sync over K-batch-async at the same (P, K), and fully synchronous
/// (K-sync, K = P) over asynchronous (K = 1 of K-async, else K-batch-async)
/// SGD. Per-trial ratios (trial t of both, which share their delays) give the
/// mean and CI; theory is the ratio of the exact values where both exist
/// (for exponential delays fully-sync/async = P·H_P).
fn ratio_table(
    sc: &ProtocolScenario,
    points: &[Point],
    by_point: &[&[RuntimeTrial]],
    theories: &[Theory],
) -> Table {
    let mut t = RatioRow::table();
    let find = |proto: Protocol, p: usize, k: usize| {
        points.iter().position(|pt| {
            sc.series[pt.series].protocol == proto && pt.workers == p && pt.k == Some(k)
        })
    };
    let mut push = |num: usize, den: usize, k_label: String| {
        let a = by_point[num];
        let b = by_point[den];
        let r: Vec<f64> = a
            .iter()
            .zip(b)
            .map(|(x, y)| x.time_per_iteration / y.time_per_iteration)
            .collect();
        let s = Summary::of(&r);
        let mean = |v: &[RuntimeTrial]| {
            v.iter().map(|x| x.time_per_iteration).sum::<f64>() / v.len() as f64
        };
        let th = match (theories[num].exact, theories[den].exact) {
            (Some(x), Some(y)) => Some(x / y),
            _ => None,
        };
        t.add(&RatioRow {
            scenario: sc.meta.name.clone(),
            workers: points[num].workers,
            k: k_label,
            numerator: points[num].label.clone(),
            denominator: points[den].label.clone(),
            trials: s.n,
            mean: s.mean,
            std: s.std,
            ci95_low: s.ci95_low,
            ci95_high: s.ci95_high,
            ratio_of_means: mean(a) / mean(b),
            theory_exact: th,
        });
    };
    for &p in &sc.workers {
        if let (Some(num), Some(den)) = (
            find(Protocol::KSync, p, p),
            find(Protocol::KAsync, p, 1).or_else(|| find(Protocol::KBatchAsync, p, 1)),
        ) {
            push(num, den, "P/1".into());
        }
        for k in crate::scenario::protocol::divisors(p) {
            for (sync, asy) in [
                (Protocol::KSync, Protocol::KAsync),
                (Protocol::KBatchSync, Protocol::KBatchAsync),
            ] {
                if let (Some(num), Some(den)) = (find(sync, p, k), find(asy, p, k)) {
                    push(num, den, k.to_string());
                }
            }
        }
    }
    t
}
