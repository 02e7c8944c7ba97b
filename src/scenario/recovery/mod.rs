//! The `recovery` scenario kind: SCAR's partial-recovery (Figure 6) and
//! priority-checkpoint (Figure 7) experiments.
//!
//! ```toml
//! kind = "recovery"
//! name = "scar-partial-mlr-mnist"
//! title = "Partial vs full recovery: MLR on MNIST"
//! paper = "SCAR Figure 6(a)"
//! trials = 100
//! seed = 2018
//! data_order = "shared"          # or "per-trial"
//!
//! [model]
//! kind = "mlr"
//! dataset = "mnist"
//! batch_size = 10000
//! learning_rate = 1e-5
//!
//! [convergence]
//! criterion = 2.5e4
//! max_iterations = 600
//!
//! [cluster]
//! ps_nodes = 8
//!
//! [failure]
//! iteration = { distribution = "geometric", p = 0.05 }   # or { distribution = "fixed", iteration = 20 }
//! lost = { fraction = 0.5 }                               # or { ps_nodes = 4 }
//!
//! [checkpoint]
//! interval = 8          # C
//! fraction = 1.0        # r: a partial checkpoint every r·C iterations
//! selector = "priority" # priority | round | random
//! budget = "parameters" # or "blocks": each partial checkpoint writes r of the
//!                       # parameters, credit carried (SCAR §4.2, default), or ⌈r·n⌉ blocks
//! event_order = "failure-first" # or "checkpoint-first": a failure at an iteration
//!                               # with a checkpoint due destroys it (default) or follows it
//!
//! recovery = "partial"  # full | partial   (must come before the tables above)
//!
//! [sweep]
//! lost_fraction = [0.125, 0.25, 0.5, 0.75, 1.0]
//!
//! [[series]]
//! name = "full"
//! recovery = "full"
//! ```

use anyhow::Result;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::series::{self, NameRule};
use super::{Meta, SourceText, check_name, limits};
use crate::engine::Convergence;

/// Most PS nodes of a recovery scenario.
pub(crate) const MAX_PS_NODES: usize = 1_000_000;
use crate::model::ModelSpec;
use crate::policy::{
    CheckpointPolicy, EventOrder, FailureTime, LossSpec, RecoveryPolicy, Selector, WriteBudget,
};

mod alternatives;
mod check;
mod sweep;

pub(crate) use alternatives::Alternative;
use check::check_point;
use sweep::parse_sweep;
pub use sweep::{Sweep, SweepAxis};

/// Whether the trials of a scenario share one minibatch order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataOrderMode {
    /// One data order for every trial: one unperturbed run per scenario (default).
    #[default]
    Shared,
    /// A data order per trial index: one unperturbed run per trial, shared
    /// across series and points (common random numbers).
    PerTrial,
}

/// The fault-tolerance configuration of one point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PointConfig {
    /// When the failure strikes.
    pub(crate) failure_time: FailureTime,
    /// What it takes down.
    pub(crate) loss: LossSpec,
    /// Checkpoint policy before the failure.
    pub(crate) checkpoint: CheckpointPolicy,
    /// Whether a checkpoint due at the failure iteration is written before
    /// the failure (`[checkpoint] event_order`; default: the failure first).
    #[serde(rename = "event_order")]
    pub(crate) order: EventOrder,
    /// Recovery policy.
    pub(crate) recovery: RecoveryPolicy,
}

/// One series to compare: the base configuration with some values replaced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesSpec {
    /// Series name (legend, `series` column).
    pub name: String,
    /// The configuration before the sweep is applied.
    pub(crate) config: PointConfig,
    /// A reference series is not swept: it is evaluated once, at its own
    /// value of the sweep axis (e.g. the traditional full checkpoint drawn as
    /// a dashed line in the priority figures).
    pub(crate) reference: bool,
}

/// A validated `recovery` scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecoveryScenario {
    /// Name, title, paper panel, trials, seed.
    pub(crate) meta: Meta,
    /// The model and its hyper-parameters.
    pub(crate) model: ModelSpec,
    /// Convergence criterion and censoring limit.
    pub(crate) convergence: Convergence,
    /// With a synthetic stand-in, set the criterion from the stand-in's own
    /// curve instead of scaling the real criterion by the data size.
    pub(crate) synthetic_criterion: Option<SyntheticCriterion>,
    /// Shared or per-trial minibatch order.
    pub(crate) data_order: DataOrderMode,
    /// Number of PS nodes blocks are placed on.
    pub(crate) ps_nodes: usize,
    /// The sweep, if any.
    pub sweep: Option<Sweep>,
    /// The series to compare (at least one).
    pub series: Vec<SeriesSpec>,
    /// Other readings of model-specific knobs for `reproduce --robustness`
    /// (`[[robustness]]`; none by default, and then left out of the
    /// resolved scenario so that its fingerprint is unchanged).
    #[serde(skip_serializing_if = "Vec::is_empty", rename = "robustness")]
    pub(crate) alternatives: Vec<Alternative>,
}

/// One (series, x) point of the plan.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Point {
    /// Index into `series`.
    pub(crate) series: usize,
    /// Value of the sweep axis (0 when there is no sweep).
    pub(crate) x: f64,
    /// The full configuration at this point.
    pub(crate) config: PointConfig,
}

impl RecoveryScenario {
    /// The `x_name` column: the swept parameter, or `point`.
    pub(crate) fn x_name(&self) -> &'static str {
        self.sweep.as_ref().map_or("point", |s| s.axis.name())
    }

    /// Expands series × sweep values into points, series-major.
    pub(crate) fn points(&self) -> Vec<Point> {
        let mut out = Vec::new();
        for (si, s) in self.series.iter().enumerate() {
            match &self.sweep {
                Some(sw) if !s.reference => {
                    for &v in &sw.values {
                        out.push(Point {
                            series: si,
                            x: v,
                            config: sw.axis.set(&s.config, v),
                        });
                    }
                }
                Some(sw) => out.push(Point {
                    series: si,
                    x: sw.axis.value_in(&s.config),
                    config: s.config,
                }),
                None => out.push(Point {
                    series: si,
                    x: 0.0,
                    config: s.config,
                }),
            }
        }
        out
    }
}

impl Serialize for Convergence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Convergence", 2)?;
        st.serialize_field("criterion", &self.criterion)?;
        st.serialize_field("max_iterations", &self.max_iterations)?;
        st.end()
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
    #[serde(default)]
    data_order: DataOrderMode,
    recovery: Option<RecoveryPolicy>,
    model: Spanned<toml::Table>,
    convergence: RawConvergence,
    #[serde(default)]
    cluster: RawCluster,
    failure: RawFailure,
    checkpoint: RawCheckpoint,
    sweep: Option<Spanned<toml::Table>>,
    series: Spanned<Vec<RawSeries>>,
    robustness: Option<Spanned<Vec<alternatives::RawAlternative>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConvergence {
    criterion: Spanned<f64>,
    max_iterations: Spanned<usize>,
    synthetic_criterion: Option<Spanned<RawSyntheticCriterion>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSyntheticCriterion {
    descent: f64,
    plateau_iteration: usize,
}

/// How a synthetic stand-in's criterion is set when the real criterion,
/// scaled by the data size, does not fit the stand-in's curve (LDA): the
/// criterion sits `descent` of the way from the metric of x(0) to the metric
/// after `plateau_iteration` iterations of the unperturbed stand-in run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct SyntheticCriterion {
    /// Fraction of the descent, in (0, 1).
    pub(crate) descent: f64,
    /// Iteration whose metric stands for the plateau.
    pub(crate) plateau_iteration: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    ps_nodes: Spanned<usize>,
}

impl Default for RawCluster {
    fn default() -> Self {
        RawCluster {
            ps_nodes: Spanned::new(0..0, 8),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFailure {
    iteration: Spanned<RawFailureTime>,
    lost: Spanned<RawLoss>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFailureTime {
    distribution: String,
    p: Option<f64>,
    mean_of_run: Option<f64>,
    iteration: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoss {
    fraction: Option<f64>,
    ps_nodes: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheckpoint {
    interval: Spanned<usize>,
    #[serde(default = "one")]
    fraction: Spanned<f64>,
    #[serde(default = "priority")]
    selector: Selector,
    #[serde(default)]
    event_order: EventOrder,
    #[serde(default)]
    budget: WriteBudget,
}

fn one() -> Spanned<f64> {
    Spanned::new(0..0, 1.0)
}
fn priority() -> Selector {
    Selector::Priority
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeries {
    name: String,
    recovery: Option<RecoveryPolicy>,
    selector: Option<Selector>,
    event_order: Option<EventOrder>,
    checkpoint_fraction: Option<f64>,
    checkpoint_budget: Option<WriteBudget>,
    checkpoint_interval: Option<usize>,
    #[serde(default)]
    reference: bool,
}

/// Parses and validates a `recovery` scenario.
pub(crate) fn parse(src: &SourceText) -> Result<RecoveryScenario> {
    let raw: Raw = toml::from_str(src.text)
        .map_err(|e| anyhow::anyhow!("{}: {}", src.origin, e.to_string().trim_end()))?;
    check_name(src, &raw.name)?;
    let trials = limits::trials(src, raw.trials.span(), *raw.trials.get_ref())?;
    let model = ModelSpec::parse(src, raw.model.span(), raw.model.get_ref())?;
    let (convergence, synthetic_criterion) = parse_convergence(src, &raw)?;
    let ps_nodes = *raw.cluster.ps_nodes.get_ref();
    if ps_nodes == 0 || ps_nodes > MAX_PS_NODES {
        return Err(src.error_at(
            raw.cluster.ps_nodes.span(),
            "cluster.ps_nodes",
            format!("{ps_nodes} must be between 1 and {MAX_PS_NODES}"),
        ));
    }

    let (failure_time, loss) = parse_failure(src, &raw)?;
    let checkpoint = CheckpointPolicy {
        interval: limits::iterations(
            src,
            &raw.checkpoint.interval.span(),
            "checkpoint.interval",
            *raw.checkpoint.interval.get_ref(),
        )?,
        fraction: *raw.checkpoint.fraction.get_ref(),
        selector: raw.checkpoint.selector,
        budget: raw.checkpoint.budget,
    };
    let base = PointConfig {
        failure_time,
        loss,
        checkpoint,
        order: raw.checkpoint.event_order,
        recovery: raw.recovery.unwrap_or(RecoveryPolicy::Partial),
    };
    check_point(src, &base, ps_nodes, "the base configuration", Some(&raw))?;

    let sweep = match &raw.sweep {
        None => None,
        Some(t) => Some(parse_sweep(src, t.span(), t.get_ref())?),
    };

    series::check_list(src, &raw.series.span(), raw.series.get_ref().len())?;
    let series = parse_series(src, &raw, base)?;
    let point_count: u128 = series
        .iter()
        .map(|s| match &sweep {
            Some(sw) if !s.reference => sw.values.len() as u128,
            _ => 1,
        })
        .sum();
    limits::points(src, &raw.series.span(), "series", point_count)?;
    let alternatives = match &raw.robustness {
        None => Vec::new(),
        Some(r) => alternatives::parse(src, r.span(), r.get_ref(), |text| {
            let origin = format!("{} with the reading applied", src.origin);
            parse(&SourceText::new(text, &origin)).map(|_| ())
        })?,
    };
    let scenario = RecoveryScenario {
        meta: Meta::new(
            "recovery", &raw.name, &raw.title, &raw.paper, trials, raw.seed,
        ),
        model,
        convergence,
        synthetic_criterion,
        data_order: raw.data_order,
        ps_nodes,
        sweep,
        series,
        alternatives,
    };
    for p in scenario.points() {
        let what = format!(
            "series `{}` at {} = {}",
            scenario.series[p.series].name,
            scenario.x_name(),
            p.x
        );
        check_point(src, &p.config, ps_nodes, &what, None)?;
    }
    Ok(scenario)
}

/// The `[convergence]` table: the criterion, the iteration cap and the
/// stand-ins' synthetic criterion.
fn parse_convergence(
    src: &SourceText,
    raw: &Raw,
) -> Result<(Convergence, Option<SyntheticCriterion>)> {
    let criterion = *raw.convergence.criterion.get_ref();
    if !(criterion.is_finite() && criterion > 0.0) {
        return Err(src.error_at(
            raw.convergence.criterion.span(),
            "convergence.criterion",
            format!("{criterion} must be a positive number"),
        ));
    }
    let max_iterations = limits::iterations(
        src,
        &raw.convergence.max_iterations.span(),
        "convergence.max_iterations",
        *raw.convergence.max_iterations.get_ref(),
    )?;
    if max_iterations == 0 {
        return Err(src.error_at(
            raw.convergence.max_iterations.span(),
            "convergence.max_iterations",
            "must be at least 1",
        ));
    }
    let synthetic_criterion = match &raw.convergence.synthetic_criterion {
        None => None,
        Some(sp) => {
            let c = sp.get_ref();
            if !(c.descent > 0.0 && c.descent < 1.0) {
                return Err(src.error_at(
                    sp.span(),
                    "convergence.synthetic_criterion.descent",
                    format!("{} is outside (0, 1)", c.descent),
                ));
            }
            limits::iterations(
                src,
                &sp.span(),
                "convergence.synthetic_criterion.plateau_iteration",
                c.plateau_iteration,
            )?;
            if c.plateau_iteration == 0 {
                return Err(src.error_at(
                    sp.span(),
                    "convergence.synthetic_criterion.plateau_iteration",
                    "must be at least 1",
                ));
            }
            Some(SyntheticCriterion {
                descent: c.descent,
                plateau_iteration: c.plateau_iteration,
            })
        }
    };
    Ok((
        Convergence {
            criterion,
            max_iterations,
        },
        synthetic_criterion,
    ))
}

/// The `[failure]` table: when the failure strikes and what it loses.
fn parse_failure(src: &SourceText, raw: &Raw) -> Result<(FailureTime, LossSpec)> {
    let ft = raw.failure.iteration.get_ref();
    let ft_span = raw.failure.iteration.span();
    let failure_time = match (ft.distribution.as_str(), ft.p, ft.mean_of_run, ft.iteration) {
        ("geometric", Some(p), None, None) => FailureTime::Geometric { p },
        ("geometric", None, Some(mean_of_run), None) => FailureTime::GeometricOfRun { mean_of_run },
        ("fixed", None, None, Some(iteration)) => FailureTime::Fixed {
            iteration: limits::iterations(src, &ft_span, "failure.iteration.iteration", iteration)?,
        },
        ("geometric", _, _, _) => {
            return Err(src.error_at(
                ft_span,
                "failure.iteration",
                "a geometric failure time takes exactly one of `p` (per-iteration probability) or \
                 `mean_of_run` (its mean as a fraction of the unperturbed run's length B)",
            ));
        }
        ("fixed", _, _, _) => {
            return Err(src.error_at(
                ft_span,
                "failure.iteration",
                "a fixed failure time takes exactly `iteration`",
            ));
        }
        (other, _, _, _) => {
            return Err(src.error_at(
                ft_span,
                "failure.iteration.distribution",
                format!("unknown distribution `{other}`; expected `geometric` or `fixed`"),
            ));
        }
    };
    let lost = raw.failure.lost.get_ref();
    let loss = match (lost.fraction, lost.ps_nodes) {
        (Some(f), None) => LossSpec::Fraction(f),
        (None, Some(k)) => LossSpec::PsNodes(k),
        _ => {
            return Err(src.error_at(
                raw.failure.lost.span(),
                "failure.lost",
                "give exactly one of `fraction` (of the blocks) or `ps_nodes` (number of PS nodes)",
            ));
        }
    };
    Ok((failure_time, loss))
}

/// The `[[series]]` tables: each a name and its overrides of the base
/// configuration `base`.
fn parse_series(src: &SourceText, raw: &Raw, base: PointConfig) -> Result<Vec<SeriesSpec>> {
    let mut series = Vec::new();
    for rs in raw.series.get_ref() {
        series::check_name(src, raw.series.span(), &rs.name, NameRule::Stated)?;
        series::check_new(
            src,
            raw.series.span(),
            &rs.name,
            series.iter().map(|s: &SeriesSpec| s.name.as_str()),
        )?;
        let mut cfg = base;
        if let Some(r) = rs.recovery {
            cfg.recovery = r;
        }
        if let Some(s) = rs.selector {
            cfg.checkpoint.selector = s;
        }
        if let Some(o) = rs.event_order {
            cfg.order = o;
        }
        if let Some(f) = rs.checkpoint_fraction {
            cfg.checkpoint.fraction = f;
        }
        if let Some(b) = rs.checkpoint_budget {
            cfg.checkpoint.budget = b;
        }
        if let Some(c) = rs.checkpoint_interval {
            cfg.checkpoint.interval =
                limits::iterations(src, &raw.series.span(), "series.checkpoint_interval", c)?;
        }
        let spec = SeriesSpec {
            name: rs.name.clone(),
            config: cfg,
            reference: rs.reference,
        };
        series.push(spec);
    }
    Ok(series)
}

#[cfg(test)]
mod tests;
