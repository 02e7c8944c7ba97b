//! The `protocol` scenario kind: P workers and a parameter server in
//! simulated wall-clock time, with random straggler delays, under the K-sync,
//! K-batch-sync, K-async and K-batch-async SGD protocols (Dutta et al. 2018).
//!
//! A scenario either measures the **runtime** per iteration (no model; `[runtime]`)
//! or **trains** a gradient model and records its loss against wall-clock
//! time (`[training]` and `[model]`).
//!
//! ```toml
//! kind = "protocol"
//! name = "dutta-runtime-exp"
//! title = "Runtime per iteration, exponential delays"
//! paper = "Dutta et al. 2018, Lemma 1, Theorems 3-5"
//! trials = 100
//! seed = 2018
//!
//! [cluster]
//! workers = [4, 8, 16, 32]                                  # P; a list sweeps P
//! compute_time = { distribution = "exponential", rate = 1.0 }
//! # exponential{rate} | shifted-exponential{shift, rate} | pareto{scale, shape}
//! # | uniform{low, high} | constant{value} | empirical{file, column?}
//! communication_time = { distribution = "constant", value = 0.0 }   # optional, added to each gradient
//!
//! [runtime]                       # either this ...
//! warmup_updates = 100            # updates discarded before measuring (default 100)
//! updates = 2000                  # updates measured per trial
//!
//! # [training]                    # ... or this, with a [model]
//! # horizon = 2000.0              # simulated time per run
//! # grid_step = 20.0              # loss evaluated at 0, step, 2·step, … ≤ horizon
//! # loss_subsample = 2000         # MLR: examples of the loss subsample (default 2000)
//! # loss_every = 0                # updates.csv: loss every N updates (0: never)
//! # record_trials = 1             # trials whose every update goes to updates.csv
//! # floor_window = 0.25           # error floor = mean loss over the last quarter of the horizon
//!
//! [[series]]
//! protocol = "k-sync"             # k-sync | k-batch-sync | k-async | k-batch-async
//! k = "divisors"                  # a number, a list, or every K that divides P
//! # name = "..."                  # default: the protocol (and " K=k" per K)
//! # k_schedule = [{ from = 0.0, k = 1 }, { from = 500.0, k = 8 }]   # instead of k
//! # k_rule = { kind = "plateau", start = 1, factor = 2, max = 8, window = 50, tolerance = 0.0 }
//! #   # instead of k: K ×factor (up to max, default P) when the mean of the last `window`
//! #   # minibatch losses the PS received is not below (1 − tolerance) × the window before
//! # staleness_aware = { c = 1e-3, eta_max = 0.1 }   # training only; eta_max defaults to η
//! ```

use std::ops::Range;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::series::{self, NameRule};
use super::{Meta, SourceText, check_name, limits};
use crate::cluster::training::StalenessAware;
use crate::cluster::{Delay, KSchedule, PlateauRule, Protocol};
use crate::model::gradient::GradientSpec;
use checks::{check_points, check_size};

mod checks;
mod delay;
mod k_rule;
pub(crate) use delay::{RawDelay, parse_delay};
pub(crate) use k_rule::KRule;

/// Which Ks a series runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum KChoice {
    /// These values.
    Values(Vec<usize>),
    /// Every K that divides P.
    Divisors,
    /// K changes over time (the adaptive schedule).
    Schedule(KSchedule),
    /// K chosen during the run by a rule (training only).
    Rule(KRule),
}

/// One series to compare.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ProtocolSeries {
    /// Name (legend; `series` column, with " K=k" appended when it runs several K).
    pub(crate) name: String,
    /// The protocol.
    pub(crate) protocol: Protocol,
    /// Which K.
    pub(crate) k: KChoice,
    /// The staleness-aware learning rate, if used.
    pub(crate) staleness_aware: Option<StalenessAware>,
}

/// Settings of a runtime measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct RuntimeConfig {
    /// Updates run before the clock starts (lets asynchronous runs reach steady state).
    pub(crate) warmup_updates: u64,
    /// Updates measured.
    pub(crate) updates: u64,
}

/// Settings of an error-vs-wall-clock measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct TrainingConfig {
    /// The model.
    pub(crate) model: GradientSpec,
    /// η (from the model table).
    pub(crate) eta: f64,
    /// Simulated time of each run.
    pub(crate) horizon: f64,
    /// Spacing of the common time grid.
    pub(crate) grid_step: f64,
    /// MLR: examples in the loss subsample.
    pub(crate) loss_subsample: usize,
    /// updates.csv: loss every N updates (0: not evaluated per update).
    pub(crate) loss_every: u64,
    /// Trials (0..n) whose every update is written to updates.csv.
    pub(crate) record_trials: usize,
    /// Fraction of the horizon at its end over which the error floor is averaged.
    pub(crate) floor_window: f64,
}

impl TrainingConfig {
    /// The grid times 0, step, 2·step, … ≤ horizon.
    pub(crate) fn grid(&self) -> Vec<f64> {
        (0..self.grid_points())
            .map(|i| i as f64 * self.grid_step)
            .collect()
    }

    /// How many grid times [`TrainingConfig::grid`] has.
    pub(crate) fn grid_points(&self) -> usize {
        (self.horizon / self.grid_step + 1e-9).floor() as usize + 1
    }
}

/// What a scenario measures.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Measure {
    /// Wall-clock time per iteration, no model.
    Runtime(RuntimeConfig),
    /// Loss against wall-clock time, with a model in the loop.
    Training(TrainingConfig),
}

/// A validated `protocol` scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProtocolScenario {
    /// Name, title, paper panel, trials, seed.
    pub(crate) meta: Meta,
    /// The values of P.
    pub workers: Vec<usize>,
    /// Compute-time distribution of one gradient.
    pub(crate) compute_time: Delay,
    /// Communication time added to each gradient, if any.
    pub(crate) communication_time: Option<Delay>,
    /// Runtime or training.
    pub(crate) measure: Measure,
    /// The series (at least one).
    pub(crate) series: Vec<ProtocolSeries>,
}

/// One (series, P, K) point.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Point {
    /// Index into `series`.
    pub(crate) series: usize,
    /// The `series` column: the series name, with " K=k" when the series runs several K.
    pub(crate) label: String,
    /// P.
    pub(crate) workers: usize,
    /// K (`None` for a schedule).
    pub(crate) k: Option<usize>,
    /// K over time (constant unless the series has a schedule; with a rule,
    /// the rule's start).
    pub(crate) schedule: KSchedule,
    /// The rule choosing K during the run, if the series has one.
    pub(crate) rule: Option<PlateauRule>,
}

impl Point {
    /// The largest K the point can use.
    pub(crate) fn max_k(&self) -> usize {
        self.rule.map_or_else(|| self.schedule.max_k(), |r| r.max)
    }

    /// How K is chosen, for the `k_schedule` column: the schedule
    /// (`0:1;200:2`) or the rule (`plateau:start=1;…`).
    pub(crate) fn describe_k(&self) -> String {
        self.rule
            .map_or_else(|| self.schedule.describe(), |r| r.describe())
    }
}

/// The divisors of `p`, ascending.
pub(crate) fn divisors(p: usize) -> Vec<usize> {
    (1..=p).filter(|k| p.is_multiple_of(*k)).collect()
}

impl ProtocolScenario {
    /// Expands series × P × K into points (series-major, then P, then K).
    pub(crate) fn points(&self) -> Vec<Point> {
        let mut out = Vec::new();
        for (si, s) in self.series.iter().enumerate() {
            for &p in &self.workers {
                match &s.k {
                    KChoice::Schedule(sch) => out.push(Point {
                        series: si,
                        label: s.name.clone(),
                        workers: p,
                        k: None,
                        schedule: sch.clone(),
                        rule: None,
                    }),
                    KChoice::Rule(r) => {
                        let rule = r.at(p);
                        out.push(Point {
                            series: si,
                            label: s.name.clone(),
                            workers: p,
                            k: None,
                            schedule: KSchedule::fixed(rule.start),
                            rule: Some(rule),
                        })
                    }
                    choice => {
                        let (ks, several) = match choice {
                            KChoice::Values(v) => (v.clone(), v.len() > 1),
                            _ => (divisors(p), true),
                        };
                        for k in ks {
                            out.push(Point {
                                series: si,
                                label: if several {
                                    format!("{} K={k}", s.name)
                                } else {
                                    s.name.clone()
                                },
                                workers: p,
                                k: Some(k),
                                schedule: KSchedule::fixed(k),
                                rule: None,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// The training settings, if this is an error-vs-time scenario.
    #[cfg(test)]
    pub(crate) fn training(&self) -> Option<&TrainingConfig> {
        match &self.measure {
            Measure::Training(t) => Some(t),
            Measure::Runtime(_) => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[allow(dead_code)]
    kind: String,
    name: Spanned<String>,
    title: String,
    paper: Option<String>,
    #[serde(default = "super::default_trials")]
    trials: Spanned<usize>,
    seed: u64,
    cluster: RawCluster,
    runtime: Option<Spanned<RawRuntime>>,
    training: Option<Spanned<RawTraining>>,
    model: Option<Spanned<toml::Table>>,
    series: Spanned<Vec<Spanned<RawSeries>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    workers: Spanned<toml::Value>,
    compute_time: Spanned<RawDelay>,
    communication_time: Option<Spanned<RawDelay>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRuntime {
    #[serde(default = "default_warmup")]
    warmup_updates: u64,
    updates: Spanned<u64>,
}

fn default_warmup() -> u64 {
    100
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTraining {
    horizon: Spanned<f64>,
    grid_step: Spanned<f64>,
    #[serde(default = "default_subsample")]
    loss_subsample: Spanned<usize>,
    #[serde(default)]
    loss_every: u64,
    #[serde(default = "default_record")]
    record_trials: usize,
    #[serde(default = "default_floor_window")]
    floor_window: Spanned<f64>,
}

fn default_subsample() -> Spanned<usize> {
    Spanned::new(0..0, 2000)
}
fn default_record() -> usize {
    1
}
fn default_floor_window() -> Spanned<f64> {
    Spanned::new(0..0, 0.25)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeries {
    name: Option<String>,
    protocol: Protocol,
    k: Option<Spanned<toml::Value>>,
    k_schedule: Option<Vec<RawStep>>,
    k_rule: Option<Spanned<k_rule::RawKRule>>,
    staleness_aware: Option<RawStalenessAware>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    from: f64,
    k: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStalenessAware {
    c: f64,
    eta_max: Option<f64>,
}

fn positive_ints(
    src: &SourceText,
    span: Range<usize>,
    field: &str,
    v: &toml::Value,
) -> Result<Vec<usize>> {
    let one = |x: &toml::Value| match x {
        toml::Value::Integer(i) if *i >= 1 && *i <= 1_000_000 => Ok(*i as usize),
        other => Err(src.error_at(
            span.clone(),
            field,
            format!("{other} is not a whole number between 1 and 1,000,000"),
        )),
    };
    match v {
        toml::Value::Array(a) if !a.is_empty() => {
            limits::list_len(src, &span, field, a.len())?;
            let values = a.iter().map(one).collect::<Result<Vec<usize>>>()?;
            limits::distinct(src, &span, field, &values)?;
            Ok(values)
        }
        toml::Value::Array(_) => Err(src.error_at(span.clone(), field, "the list is empty")),
        other => Ok(vec![one(other)?]),
    }
}

/// Parses and validates a `protocol` scenario.
pub(crate) fn parse(src: &SourceText) -> Result<ProtocolScenario> {
    let raw: Raw = toml::from_str(src.text)
        .map_err(|e| anyhow::anyhow!("{}: {}", src.origin, e.to_string().trim_end()))?;
    check_name(src, &raw.name)?;
    let trials = limits::trials(src, raw.trials.span(), *raw.trials.get_ref())?;
    let workers = positive_ints(
        src,
        raw.cluster.workers.span(),
        "cluster.workers",
        raw.cluster.workers.get_ref(),
    )?;
    let compute_time = parse_delay(src, &raw.cluster.compute_time, "cluster.compute_time", true)?;
    let communication_time = raw
        .cluster
        .communication_time
        .as_ref()
        .map(|d| parse_delay(src, d, "cluster.communication_time", false))
        .transpose()?;

    let measure = parse_measure(src, &raw)?;
    let eta = match &measure {
        Measure::Training(t) => Some(t.eta),
        Measure::Runtime(_) => None,
    };

    series::check_list(src, &raw.series.span(), raw.series.get_ref().len())?;
    let mut series: Vec<ProtocolSeries> = Vec::new();
    for rs in raw.series.get_ref() {
        series.push(parse_series(src, rs, eta)?);
    }

    check_size(
        src,
        &raw,
        &workers,
        &compute_time,
        communication_time.as_ref(),
        &measure,
        &series,
    )?;
    let scenario = ProtocolScenario {
        meta: Meta::new(
            "protocol", &raw.name, &raw.title, &raw.paper, trials, raw.seed,
        ),
        workers,
        compute_time,
        communication_time,
        measure,
        series,
    };
    check_points(src, &raw, &scenario)?;
    Ok(scenario)
}

/// The `[runtime]` or `[training]` + `[model]` tables: what the scenario
/// measures (time per update, or the loss against time of a trained model).
fn parse_measure(src: &SourceText, raw: &Raw) -> Result<Measure> {
    Ok(match (&raw.runtime, &raw.training, &raw.model) {
        (Some(rt), None, None) => {
            let r = rt.get_ref();
            if *r.updates.get_ref() == 0 {
                return Err(src.error_at(
                    r.updates.span(),
                    "runtime.updates",
                    "must be at least 1",
                ));
            }
            let total = r.warmup_updates.saturating_add(*r.updates.get_ref());
            if total > limits::MAX_UPDATES {
                return Err(src.error_at(
                    r.updates.span(),
                    "runtime.updates",
                    format!(
                        "warmup_updates + updates = {total} is more than the limit of {} updates",
                        limits::MAX_UPDATES
                    ),
                ));
            }
            Measure::Runtime(RuntimeConfig {
                warmup_updates: r.warmup_updates,
                updates: *r.updates.get_ref(),
            })
        }
        (Some(rt), _, _) => {
            return Err(src.error_at(
                rt.span(),
                "runtime",
                "a scenario has either [runtime] (no model) or [training] with a [model], not both",
            ));
        }
        (None, Some(tr), Some(model)) => {
            let t = tr.get_ref();
            let spec = GradientSpec::parse(src, model.span(), model.get_ref())?;
            let horizon = *t.horizon.get_ref();
            if !(horizon > 0.0 && horizon.is_finite()) {
                return Err(src.error_at(
                    t.horizon.span(),
                    "training.horizon",
                    format!("{horizon} must be a positive number"),
                ));
            }
            limits::seconds(src, &t.horizon.span(), "training.horizon", horizon)?;
            let step = *t.grid_step.get_ref();
            if !(step > 0.0 && step.is_finite()) || horizon / step > 100_000.0 {
                return Err(src.error_at(
                    t.grid_step.span(),
                    "training.grid_step",
                    format!(
                        "{step} must be positive and give at most 100,000 grid points over the horizon {horizon}"
                    ),
                ));
            }
            if *t.loss_subsample.get_ref() == 0 {
                return Err(src.error_at(
                    t.loss_subsample.span(),
                    "training.loss_subsample",
                    "must be at least 1",
                ));
            }
            let fw = *t.floor_window.get_ref();
            if !(fw > 0.0 && fw <= 1.0) {
                return Err(src.error_at(
                    t.floor_window.span(),
                    "training.floor_window",
                    format!("{fw} is outside (0, 1]"),
                ));
            }
            Measure::Training(TrainingConfig {
                eta: spec.learning_rate(),
                model: spec,
                horizon,
                grid_step: step,
                loss_subsample: *t.loss_subsample.get_ref(),
                loss_every: t.loss_every,
                record_trials: t.record_trials,
                floor_window: fw,
            })
        }
        (None, Some(tr), None) => {
            return Err(src.error_at(
                tr.span(),
                "model",
                "a [training] scenario needs a [model] table (kind = \"mlr\", \"cnn\" or \"quadratic\")",
            ));
        }
        (None, None, Some(m)) => {
            return Err(src.error_at(
                m.span(),
                "training",
                "a scenario with a [model] needs a [training] table (horizon, grid_step)",
            ));
        }
        (None, None, None) => {
            return Err(src.error(
                "runtime",
                "give [runtime] (time per iteration, no model) or [training] with a [model] (loss vs time)",
            ));
        }
    })
}

/// One `[[series]]` table: its protocol, its K (fixed values, a schedule or
/// a rule), its name and the staleness-aware learning rate. `eta` is the
/// model's learning rate in a `[training]` scenario (`None` for `[runtime]`).
fn parse_series(
    src: &SourceText,
    rs: &Spanned<RawSeries>,
    eta: Option<f64>,
) -> Result<ProtocolSeries> {
    let span = rs.span();
    let r = rs.get_ref();
    let at = |field: &str, msg: String| src.error_at(span.clone(), field, msg);
    let given: Vec<&str> = [
        ("k", r.k.is_some()),
        ("k_schedule", r.k_schedule.is_some()),
        ("k_rule", r.k_rule.is_some()),
    ]
    .iter()
    .filter(|g| g.1)
    .map(|g| g.0)
    .collect();
    if given.len() > 1 {
        return Err(at(
            &format!("series.{}", given[1]),
            format!(
                "give only one of `k` (fixed K), `k_schedule` (K over time) and `k_rule` \
                 (K chosen by a rule during the run); this series gives {}",
                given
                    .iter()
                    .map(|g| format!("`{g}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        ));
    }
    if let Some(rule) = &r.k_rule
        && eta.is_none()
    {
        return Err(src.error_at(
            rule.span(),
            "series.k_rule",
            "a K rule watches the training loss, so it only applies to [training] scenarios; \
             give `k` or `k_schedule` for [runtime]",
        ));
    }
    let k = parse_k(src, &span, r)?;
    let name = match (&r.name, &k) {
        (Some(n), _) => n.clone(),
        (None, KChoice::Values(v)) if v.len() == 1 => {
            format!("{} K={}", r.protocol.name(), v[0])
        }
        (None, KChoice::Schedule(_)) => format!("{} adaptive", r.protocol.name()),
        (None, KChoice::Rule(_)) => format!("{} plateau rule", r.protocol.name()),
        (None, _) => r.protocol.name().to_string(),
    };
    series::check_name(src, span.clone(), &name, NameRule::Stated)?;
    let staleness_aware = match (&r.staleness_aware, eta) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(at(
                "series.staleness_aware",
                "the staleness-aware learning rate only applies to [training] scenarios".into(),
            ));
        }
        (Some(sa), Some(eta)) => {
            let eta_max = sa.eta_max.unwrap_or(eta);
            if !(sa.c > 0.0 && sa.c.is_finite()) {
                return Err(at(
                    "series.staleness_aware.c",
                    format!("{} must be a positive number", sa.c),
                ));
            }
            if !(eta_max > 0.0 && eta_max.is_finite()) {
                return Err(at(
                    "series.staleness_aware.eta_max",
                    format!("{eta_max} must be a positive number"),
                ));
            }
            Some(StalenessAware { c: sa.c, eta_max })
        }
    };
    Ok(ProtocolSeries {
        name,
        protocol: r.protocol,
        k,
        staleness_aware,
    })
}

/// A series' K: fixed values (or every divisor of P), a schedule over time,
/// or a rule; exactly one of `k`, `k_schedule` and `k_rule` is given
/// (checked by the caller).
fn parse_k(src: &SourceText, span: &Range<usize>, r: &RawSeries) -> Result<KChoice> {
    let at = |field: &str, msg: String| src.error_at(span.clone(), field, msg);
    Ok(match (&r.k, &r.k_schedule) {
        _ if r.k_rule.is_some() => {
            let rule = r.k_rule.as_ref().expect("checked");
            KChoice::Rule(k_rule::parse(src, rule.span(), rule.get_ref())?)
        }
        (Some(v), None) => match v.get_ref() {
            toml::Value::String(s) if s == "divisors" => KChoice::Divisors,
            toml::Value::String(s) => {
                return Err(src.error_at(
                    v.span(),
                    "series.k",
                    format!("`{s}`: give a number, a list of numbers, or \"divisors\""),
                ));
            }
            other => KChoice::Values(positive_ints(src, v.span(), "series.k", other)?),
        },
        (None, Some(steps)) if steps.len() > limits::MAX_LIST => {
            return Err(at(
                "series.k_schedule",
                format!(
                    "{} steps are more than the limit of {}",
                    steps.len(),
                    limits::MAX_LIST
                ),
            ));
        }
        (None, Some(steps)) => KChoice::Schedule(
            KSchedule::steps(steps.iter().map(|s| (s.from, s.k)).collect())
                .map_err(|e| at("series.k_schedule", e))?,
        ),
        (Some(_), Some(_)) => {
            return Err(at(
                "series.k",
                "give either `k` or `k_schedule`, not both".into(),
            ));
        }
        (None, None) => {
            return Err(at(
                "series.k",
                "missing: give `k` (a number, a list or \"divisors\"), a `k_schedule` or a `k_rule`"
                    .into(),
            ));
        }
    })
}

#[cfg(test)]
mod tests;
