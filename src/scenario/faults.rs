//! The `faults` scenario kind: parameter-server failures in wall-clock time
//! (SCAR §4, §5.5; Cao et al. 2024). A scenario has exactly one of three
//! measurement tables:
//!
//! - `[wallclock]` with a gradient `[model]` (MLR): workers and a PS train in
//!   simulated time; a failure process kills PS nodes; each `[[series]]` is a
//!   fault-tolerance strategy. Loss and accuracy vs wall time, time to the
//!   criterion, the time split and the cost in currency.
//! - `[iterations]` with a block `[model]` (LDA or MLR): SCAR §5.5 — a
//!   failure during iteration T; each series is a checkpoint + recovery
//!   policy with time costs. Wall time to the criterion and its split.
//! - `[interval]` (no model): Daly's checkpoint-interval question — the
//!   expected wall time of checkpoint/restart under Poisson failures, swept
//!   over the interval, next to Young's and Daly's optima.
//!
//! ```toml
//! kind = "faults"
//! name = "cao-ps-kill"
//! title = "..."
//! trials = 20
//! seed = 2024
//!
//! [model]                          # [wallclock]: kind = "mlr" or "cnn" (SGD step = learning_rate)
//! kind = "mlr"
//! dataset = "mnist"
//! batch_size = 32
//! learning_rate = 2e-6
//!
//! [wallclock]
//! workers = [1, 2]
//! ps_nodes = 1                     # shards the blocks are placed on
//! compute_time = { distribution = "constant", value = 0.05 }   # as in protocol scenarios
//! horizon = 30.0
//! grid_step = 0.25
//! loss_subsample = 2000            # default 2000
//! criterion = 0.6                  # loss; time to reach it is reported
//! detection = 0.5                  # failure detection delay (s)
//! restart = 0.5                    # restore time once a host is available (s)
//! join = 3.0                       # replacement join time after detection (default: none)
//! without_failure = true           # also run every series without failures
//!
//! [checkpoint]                     # [wallclock] and [iterations]
//! interval = 4.0                   # s ([wallclock]); iterations come per series in [iterations]
//! write_time = 0.4                 # s to persist every block
//! cache_time = 0.04                # s to update the in-memory cache with every block
//! persist = "sync"                 # sync | async (series may override)
//!
//! [failure]
//! process = "fixed"                # fixed {nodes, at, back} | poisson {mtbf, repair} | trace {file}
//! nodes = [0]
//! at = 10.0
//! back = 15.0
//!
//! [cost]                           # optional: price per node-hour
//! on_demand = 0.10
//! spot = 0.03
//!
//! [[series]]
//! strategy = "checkpoint-restart"  # | scar {fraction} | chain-replication {chain, hop_time, replicate}
//!                                  # | stateless-ps {damping_threshold, damped_learning_rate, restore_from}
//! ```

use anyhow::Result;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::protocol::{RawDelay, parse_delay};
use super::series::{self, NameRule};
use super::{Meta, SourceText, check_name, limits};
use crate::cluster::Delay;
use crate::faults::failures::{FailureProcess, read_trace_rows};
use crate::faults::{CheckpointCost, Replication, RestoreFrom, Strategy};
use crate::model::ModelSpec;
use crate::model::gradient::GradientSpec;
use crate::policy::{CheckpointPolicy, RecoveryPolicy, Selector, WriteBudget};

/// A validated `faults` scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FaultsScenario {
    /// Name, title, paper, trials, seed.
    pub meta: Meta,
    /// What it measures.
    pub measure: FaultsMeasure,
}

/// The three measurements of the kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultsMeasure {
    /// Loss/accuracy vs wall time under PS failures.
    Wallclock(WallclockConfig),
    /// SCAR §5.5: time split of a failure in the iteration domain.
    Iterations(IterationsConfig),
    /// Daly: expected wall time vs checkpoint interval.
    Interval(IntervalConfig),
}

/// Prices per node-hour.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Prices {
    /// On-demand price per node-hour.
    pub on_demand: f64,
    /// Spot price per node-hour.
    pub spot: f64,
}

/// One strategy series of a wall-clock scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WallclockSeries {
    /// Legend name.
    pub name: String,
    /// The strategy.
    pub strategy: Strategy,
    /// Whether its checkpoints persist asynchronously.
    pub asynchronous: bool,
}

/// `[wallclock]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WallclockConfig {
    /// The gradient model.
    pub model: GradientSpec,
    /// η.
    pub eta: f64,
    /// Values of P.
    pub workers: Vec<usize>,
    /// PS shards.
    pub ps_nodes: usize,
    /// Gradient compute time.
    pub compute_time: Delay,
    /// Communication time per gradient.
    pub communication_time: Option<Delay>,
    /// Simulated seconds per run.
    pub horizon: f64,
    /// Grid spacing of the curves.
    pub grid_step: f64,
    /// Loss subsample size (MLR).
    pub loss_subsample: usize,
    /// Loss criterion for the time-to-criterion metric.
    pub criterion: f64,
    /// Detection delay.
    pub detection: f64,
    /// Restore time.
    pub restart: f64,
    /// Replacement join time (INFINITY: none).
    pub join: f64,
    /// Also run each series without failures.
    pub without_failure: bool,
    /// Checkpoint costs (persist mode per series).
    pub checkpoint: CheckpointCost,
    /// The failure process.
    pub failure: FailureProcess,
    /// Prices, if given.
    pub prices: Option<Prices>,
    /// The strategies.
    pub series: Vec<WallclockSeries>,
}

impl WallclockConfig {
    /// The grid times 0, step, … ≤ horizon.
    pub fn grid(&self) -> Vec<f64> {
        (0..self.grid_points())
            .map(|i| i as f64 * self.grid_step)
            .collect()
    }

    /// How many grid times [`WallclockConfig::grid`] has.
    pub fn grid_points(&self) -> usize {
        (self.horizon / self.grid_step + 1e-9).floor() as usize + 1
    }

    /// Points: (series, P, with failures), series-major, then P, then failures first.
    pub fn points(&self) -> Vec<(usize, usize, bool)> {
        let mut out = Vec::new();
        for s in 0..self.series.len() {
            for &p in &self.workers {
                out.push((s, p, true));
                if self.without_failure {
                    out.push((s, p, false));
                }
            }
        }
        out
    }
}

/// One policy series of an iteration-domain scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IterationsSeries {
    /// Legend name.
    pub name: String,
    /// Checkpoint policy (C in iterations, r, selector).
    pub checkpoint: CheckpointPolicy,
    /// Recovery policy.
    pub recovery: RecoveryPolicy,
    /// Persist asynchronously.
    pub asynchronous: bool,
}

/// `[iterations]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IterationsConfig {
    /// The block model.
    pub model: ModelSpec,
    /// Seconds per iteration.
    pub iteration_time: f64,
    /// Seconds to persist every block.
    pub write_time: f64,
    /// Seconds to choose and cache every block.
    pub cache_time: f64,
    /// Detection delay.
    pub detection: f64,
    /// Restore time.
    pub restart: f64,
    /// The criterion is the unperturbed run's metric at this iteration.
    pub criterion_iteration: usize,
    /// Iteration cap.
    pub max_iterations: usize,
    /// T (1-based).
    pub failure_iteration: usize,
    /// Fraction of iteration T done when the failure strikes.
    pub failure_offset: f64,
    /// PS nodes the blocks are placed on.
    pub ps_nodes: usize,
    /// Fraction of the PS nodes the failure takes down.
    pub lost_fraction: f64,
    /// The policies.
    pub series: Vec<IterationsSeries>,
}

/// `[interval]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalConfig {
    /// T_s: work in seconds.
    pub solve_time: f64,
    /// δ.
    pub checkpoint_time: f64,
    /// R.
    pub restart_time: f64,
    /// System MTBFs swept (one series each).
    pub mtbf: Vec<f64>,
    /// Intervals as multiples of Daly's higher-order optimum.
    pub factors: Vec<f64>,
}

impl FaultsScenario {
    /// Number of points (units per trial).
    pub fn point_count(&self) -> usize {
        match &self.measure {
            FaultsMeasure::Wallclock(w) => w.points().len(),
            FaultsMeasure::Iterations(i) => i.series.len(),
            FaultsMeasure::Interval(i) => i.mtbf.len(),
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
    model: Option<Spanned<toml::Table>>,
    wallclock: Option<Spanned<RawWallclock>>,
    iterations: Option<Spanned<RawIterations>>,
    interval: Option<Spanned<RawInterval>>,
    checkpoint: Option<Spanned<RawCheckpoint>>,
    failure: Option<Spanned<RawFailure>>,
    cost: Option<Spanned<RawCost>>,
    series: Option<Vec<Spanned<RawSeries>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWallclock {
    workers: Vec<usize>,
    #[serde(default = "one")]
    ps_nodes: usize,
    compute_time: Spanned<RawDelay>,
    communication_time: Option<Spanned<RawDelay>>,
    horizon: f64,
    grid_step: f64,
    #[serde(default = "default_subsample")]
    loss_subsample: usize,
    criterion: f64,
    detection: f64,
    restart: f64,
    join: Option<f64>,
    #[serde(default)]
    without_failure: bool,
}

fn one() -> usize {
    1
}
fn default_subsample() -> usize {
    2000
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIterations {
    iteration_time: f64,
    detection: f64,
    restart: f64,
    criterion_iteration: usize,
    max_iterations: usize,
    failure_iteration: usize,
    #[serde(default = "half")]
    failure_offset: f64,
    ps_nodes: usize,
    lost_fraction: f64,
}

fn half() -> f64 {
    0.5
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInterval {
    solve_time: f64,
    checkpoint_time: f64,
    restart_time: f64,
    mtbf: Vec<f64>,
    factors: RawFactors,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFactors {
    from: f64,
    to: f64,
    points: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheckpoint {
    interval: Option<f64>,
    write_time: f64,
    #[serde(default)]
    cache_time: f64,
    #[serde(default = "sync")]
    persist: String,
}

fn sync() -> String {
    "sync".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFailure {
    process: String,
    nodes: Option<Vec<usize>>,
    at: Option<f64>,
    back: Option<f64>,
    mtbf: Option<f64>,
    repair: Option<f64>,
    file: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCost {
    on_demand: f64,
    spot: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeries {
    name: Option<String>,
    // [wallclock]
    strategy: Option<String>,
    fraction: Option<f64>,
    chain: Option<usize>,
    hop_time: Option<f64>,
    replicate: Option<String>,
    restore_from: Option<String>,
    damping_threshold: Option<usize>,
    damped_learning_rate: Option<f64>,
    persist: Option<String>,
    // [iterations]
    recovery: Option<RecoveryPolicy>,
    checkpoint_interval: Option<usize>,
    checkpoint_fraction: Option<f64>,
    checkpoint_budget: Option<WriteBudget>,
}

fn non_negative(
    src: &SourceText,
    span: std::ops::Range<usize>,
    field: &str,
    v: f64,
) -> Result<f64> {
    if v >= 0.0 && v.is_finite() && v <= limits::MAX_SECONDS {
        Ok(v)
    } else {
        Err(src.error_at(
            span,
            field,
            format!(
                "{v} must be a finite number ≥ 0 and at most {:e}",
                limits::MAX_SECONDS
            ),
        ))
    }
}

fn positive(src: &SourceText, span: std::ops::Range<usize>, field: &str, v: f64) -> Result<f64> {
    if v > 0.0 && v.is_finite() && v <= limits::MAX_SECONDS {
        Ok(v)
    } else {
        Err(src.error_at(
            span,
            field,
            format!(
                "{v} must be a positive number of at most {:e}",
                limits::MAX_SECONDS
            ),
        ))
    }
}

/// Most outages a failure process may produce in one run (expected, for a
/// Poisson process).
pub const MAX_OUTAGES: f64 = 1e6;

/// Every node a failure names must exist in every series: shard `s`'s
/// chain is nodes `s·chain..(s+1)·chain` (chain 1 unless the strategy is
/// chain replication), so the nodes are `0..ps_nodes·chain` with the
/// shortest chain of the series. A Poisson process must not produce more
/// than [`MAX_OUTAGES`] outages per run.
fn check_failure_nodes(
    src: &SourceText,
    raw: &Raw,
    failure: &FailureProcess,
    trace_lines: &[usize],
    ps_nodes: usize,
    series: &[WallclockSeries],
    horizon: f64,
) -> Result<()> {
    let span = raw.failure.as_ref().map_or(0..0, |f| f.span());
    let (short, long) = series.iter().fold((usize::MAX, 1), |(lo, hi), s| {
        let c = s.strategy.chain();
        (lo.min(c), hi.max(c))
    });
    let short = short.min(long);
    let limit = ps_nodes.saturating_mul(short);
    let narrow = series
        .iter()
        .find(|s| s.strategy.chain() == short)
        .map_or_else(String::new, |s| s.name.clone());
    let missing = |node: usize| {
        format!(
            "node {node} does not exist: the PS nodes are 0..={} (cluster ps_nodes = {ps_nodes}{})",
            limit.saturating_sub(1),
            if short > 1 || long > 1 {
                format!(", chains of {short} node(s) in series `{narrow}`")
            } else {
                String::new()
            }
        )
    };
    match failure {
        FailureProcess::Fixed { nodes, .. } => {
            limits::list_len(src, &span, "failure.nodes", nodes.len())?;
            limits::distinct(src, &span, "failure.nodes", nodes)?;
            if let Some(&n) = nodes.iter().find(|&&n| n >= limit) {
                return Err(src.error_at(span, "failure.nodes", missing(n)));
            }
        }
        FailureProcess::Trace { file, outages } => {
            for (o, line) in outages.iter().zip(trace_lines) {
                if o.node >= limit {
                    return Err(src.error_at(
                        span,
                        "failure.file",
                        format!("failure trace {file} line {line}: {}", missing(o.node)),
                    ));
                }
            }
        }
        FailureProcess::Poisson { mtbf, repair } => {
            let expected = ps_nodes.saturating_mul(long) as f64 * horizon / (mtbf + repair);
            if expected.is_nan() || expected > MAX_OUTAGES {
                return Err(src.error_at(
                    span,
                    "failure.mtbf",
                    format!(
                        "{} nodes failing every {mtbf} s (+ {repair} s repair) over the horizon of {horizon} s \
                         make about {expected:.0} outages per run, more than the limit of {MAX_OUTAGES:e}",
                        ps_nodes.saturating_mul(long)
                    ),
                ));
            }
        }
        FailureProcess::None => {}
    }
    Ok(())
}

fn persist_mode(
    src: &SourceText,
    span: std::ops::Range<usize>,
    field: &str,
    p: &str,
) -> Result<bool> {
    match p {
        "sync" => Ok(false),
        "async" => Ok(true),
        other => Err(src.error_at(
            span,
            field,
            format!("`{other}`: expected `sync` or `async`"),
        )),
    }
}

/// Parses and validates a `faults` scenario.
pub fn parse(src: &SourceText) -> Result<FaultsScenario> {
    let raw: Raw = toml::from_str(src.text)
        .map_err(|e| anyhow::anyhow!("{}: {}", src.origin, e.to_string().trim_end()))?;
    check_name(src, &raw.name)?;
    let trials = limits::trials(src, raw.trials.span(), *raw.trials.get_ref())?;
    limits::list_len(
        src,
        &(0..0),
        "series",
        raw.series.as_deref().map_or(0, <[_]>::len),
    )?;
    let meta = Meta {
        kind: "faults".into(),
        name: raw.name.get_ref().clone(),
        title: raw.title.clone(),
        paper: raw.paper.clone(),
        trials,
        seed: raw.seed,
    };
    let measure = match (&raw.wallclock, &raw.iterations, &raw.interval) {
        (Some(w), None, None) => FaultsMeasure::Wallclock(wallclock(src, &raw, w)?),
        (None, Some(i), None) => FaultsMeasure::Iterations(iterations(src, &raw, i)?),
        (None, None, Some(i)) => FaultsMeasure::Interval(interval(src, &raw, i)?),
        _ => {
            return Err(src.error(
                "wallclock",
                "a faults scenario has exactly one of [wallclock], [iterations] or [interval]",
            ));
        }
    };
    Ok(FaultsScenario { meta, measure })
}

fn wallclock(src: &SourceText, raw: &Raw, w: &Spanned<RawWallclock>) -> Result<WallclockConfig> {
    let span = w.span();
    let r = w.get_ref();
    let Some(model) = &raw.model else {
        return Err(src.error_at(
            span,
            "model",
            "[wallclock] needs a [model] table (kind = \"mlr\" or \"cnn\")",
        ));
    };
    let spec = GradientSpec::parse(src, model.span(), model.get_ref())?;
    if !matches!(
        spec,
        GradientSpec::Registry(ModelSpec::Mlr { .. } | ModelSpec::Cnn { .. })
    ) {
        return Err(src.error_at(
            model.span(),
            "model.kind",
            "[wallclock] trains `mlr` or `cnn` (a classifier with gradients and blocks)",
        ));
    }
    if r.workers.is_empty() || r.workers.iter().any(|&p| p == 0 || p > 10_000) {
        return Err(src.error_at(
            span,
            "wallclock.workers",
            "give a list of worker counts between 1 and 10,000",
        ));
    }
    limits::list_len(src, &span, "wallclock.workers", r.workers.len())?;
    limits::distinct(src, &span, "wallclock.workers", &r.workers)?;
    if r.ps_nodes == 0 || r.ps_nodes > 10_000 {
        return Err(src.error_at(span, "wallclock.ps_nodes", "must be between 1 and 10,000"));
    }
    let compute_time = parse_delay(src, &r.compute_time, "wallclock.compute_time", true)?;
    let communication_time = r
        .communication_time
        .as_ref()
        .map(|d| parse_delay(src, d, "wallclock.communication_time", false))
        .transpose()?;
    let horizon = positive(src, span.clone(), "wallclock.horizon", r.horizon)?;
    limits::seconds(src, &span, "wallclock.horizon", horizon)?;
    let grid_step = positive(src, span.clone(), "wallclock.grid_step", r.grid_step)?;
    if horizon / grid_step > 100_000.0 {
        return Err(src.error_at(
            span,
            "wallclock.grid_step",
            "gives more than 100,000 grid points",
        ));
    }
    if r.loss_subsample == 0 {
        return Err(src.error_at(span, "wallclock.loss_subsample", "must be at least 1"));
    }
    let detection = non_negative(src, span.clone(), "wallclock.detection", r.detection)?;
    let restart = non_negative(src, span.clone(), "wallclock.restart", r.restart)?;
    let join = match r.join {
        None => f64::INFINITY,
        Some(j) => non_negative(src, span.clone(), "wallclock.join", j)?,
    };
    if !r.criterion.is_finite() {
        return Err(src.error_at(span, "wallclock.criterion", "must be a finite loss value"));
    }
    let Some(ck) = &raw.checkpoint else {
        return Err(src.error_at(
            span,
            "checkpoint",
            "[wallclock] needs a [checkpoint] table (interval, write_time)",
        ));
    };
    let cspan = ck.span();
    let c = ck.get_ref();
    let interval = match c.interval {
        Some(i) => positive(src, cspan.clone(), "checkpoint.interval", i)?,
        None => {
            return Err(src.error_at(
                cspan,
                "checkpoint.interval",
                "missing (seconds between full checkpoints)",
            ));
        }
    };
    let default_async = persist_mode(src, cspan.clone(), "checkpoint.persist", &c.persist)?;
    let checkpoint = CheckpointCost {
        interval,
        write_time: non_negative(src, cspan.clone(), "checkpoint.write_time", c.write_time)?,
        cache_time: non_negative(src, cspan.clone(), "checkpoint.cache_time", c.cache_time)?,
        asynchronous: default_async,
    };
    let (failure, trace_lines) = failure_process(src, raw)?;
    let prices = raw
        .cost
        .as_ref()
        .map(|c| -> Result<Prices> {
            let s = c.span();
            Ok(Prices {
                on_demand: non_negative(src, s.clone(), "cost.on_demand", c.get_ref().on_demand)?,
                spot: non_negative(src, s, "cost.spot", c.get_ref().spot)?,
            })
        })
        .transpose()?;
    if raw.series.as_deref().unwrap_or(&[]).is_empty() {
        return Err(src.error("series", "at least one [[series]] (a strategy) is needed"));
    }
    let mut series = Vec::new();
    for rs in raw.series.as_deref().unwrap_or(&[]) {
        let s = rs.span();
        let r = rs.get_ref();
        let at = |field: &str, msg: String| src.error_at(s.clone(), field, msg);
        if r.recovery.is_some()
            || r.checkpoint_interval.is_some()
            || r.checkpoint_fraction.is_some()
            || r.checkpoint_budget.is_some()
        {
            return Err(at("series", "`recovery`, `checkpoint_interval`, `checkpoint_fraction` and `checkpoint_budget` belong to [iterations] scenarios; [wallclock] series take a `strategy`".into()));
        }
        let Some(name) = &r.strategy else {
            return Err(at("series.strategy", "missing; expected one of: checkpoint-restart, scar, chain-replication, stateless-ps".into()));
        };
        let only = |allowed: &[&str]| -> Result<()> {
            for (f, set) in [
                ("fraction", r.fraction.is_some()),
                ("chain", r.chain.is_some()),
                ("hop_time", r.hop_time.is_some()),
                ("replicate", r.replicate.is_some()),
                ("restore_from", r.restore_from.is_some()),
                ("damping_threshold", r.damping_threshold.is_some()),
                ("damped_learning_rate", r.damped_learning_rate.is_some()),
            ] {
                if set && !allowed.contains(&f) {
                    return Err(at(
                        &format!("series.{f}"),
                        format!("does not apply to strategy `{name}`"),
                    ));
                }
            }
            Ok(())
        };
        let strategy = match name.as_str() {
            "checkpoint-restart" => {
                only(&[])?;
                Strategy::CheckpointRestart
            }
            "scar" => {
                only(&["fraction"])?;
                let f = r.fraction.unwrap_or(0.25);
                if !(f > 0.0 && f <= 1.0) {
                    return Err(at("series.fraction", format!("{f} is outside (0, 1]")));
                }
                Strategy::Scar { fraction: f }
            }
            "chain-replication" => {
                only(&["chain", "hop_time", "replicate"])?;
                let chain = r.chain.unwrap_or(3);
                if !(1..=100).contains(&chain) {
                    return Err(at("series.chain", format!("{chain} is outside 1..=100")));
                }
                let replicate = match r.replicate.as_deref() {
                    None => Replication::default(),
                    Some(name) => Replication::parse(name).ok_or_else(|| {
                        at(
                            "series.replicate",
                            format!("unknown `{name}`; expected every-update or checkpoint"),
                        )
                    })?,
                };
                if replicate == Replication::Checkpoint && r.hop_time.is_some() {
                    return Err(at(
                        "series.hop_time",
                        "applies to replicate = \"every-update\" only (with \"checkpoint\" the chain is fed by the checkpoint writes)".into(),
                    ));
                }
                Strategy::ChainReplication {
                    chain,
                    replicate,
                    hop_time: non_negative(
                        src,
                        s.clone(),
                        "series.hop_time",
                        r.hop_time.unwrap_or(0.0),
                    )?,
                }
            }
            "stateless-ps" => {
                only(&["damping_threshold", "damped_learning_rate", "restore_from"])?;
                let restore_from = match r.restore_from.as_deref() {
                    None => RestoreFrom::default(),
                    Some(name) => RestoreFrom::parse(name).ok_or_else(|| {
                        at(
                            "series.restore_from",
                            format!("unknown `{name}`; expected checkpoint or workers"),
                        )
                    })?,
                };
                Strategy::StatelessPs {
                    restore_from,
                    damping_threshold: r.damping_threshold.unwrap_or(10),
                    damped_learning_rate: non_negative(
                        src,
                        s.clone(),
                        "series.damped_learning_rate",
                        r.damped_learning_rate.unwrap_or(1e-5),
                    )?,
                }
            }
            other => {
                return Err(at(
                    "series.strategy",
                    format!(
                        "unknown strategy `{other}`; expected one of: checkpoint-restart, scar, chain-replication, stateless-ps"
                    ),
                ));
            }
        };
        let asynchronous = match &r.persist {
            Some(p) => persist_mode(src, s.clone(), "series.persist", p)?,
            None => default_async,
        };
        let name = r
            .name
            .clone()
            .unwrap_or_else(|| strategy.name().to_string());
        series::check_name(src, s.clone(), &name, NameRule::Unstated)?;
        if series.iter().any(|x: &WallclockSeries| x.name == name) {
            return Err(at(
                "series.name",
                format!("`{name}` appears twice; give the series distinct names"),
            ));
        }
        series.push(WallclockSeries {
            name,
            strategy,
            asynchronous,
        });
    }
    check_failure_nodes(
        src,
        raw,
        &failure,
        &trace_lines,
        r.ps_nodes,
        &series,
        horizon,
    )?;
    let max_workers = r.workers.iter().copied().max().unwrap_or(1) as f64;
    let per_gradient = limits::typical_delay(&compute_time)
        + communication_time
            .as_ref()
            .map_or(0.0, limits::typical_delay);
    limits::events(
        src,
        &span,
        "wallclock.horizon",
        horizon / per_gradient.max(f64::MIN_POSITIVE) * max_workers,
        &format!(
            "the horizon of {horizon} s with gradients of about {per_gradient:.3e} s on up to {max_workers} workers"
        ),
    )?;
    Ok(WallclockConfig {
        eta: spec.learning_rate(),
        model: spec,
        workers: r.workers.clone(),
        ps_nodes: r.ps_nodes,
        compute_time,
        communication_time,
        horizon,
        grid_step,
        loss_subsample: r.loss_subsample,
        criterion: r.criterion,
        detection,
        restart,
        join,
        without_failure: r.without_failure,
        checkpoint,
        failure,
        prices,
        series,
    })
}

/// The failure process, and for a trace the line of each outage.
fn failure_process(src: &SourceText, raw: &Raw) -> Result<(FailureProcess, Vec<usize>)> {
    let Some(f) = &raw.failure else {
        return Err(src.error(
            "failure",
            "missing [failure] table (process = fixed | poisson | trace)",
        ));
    };
    let span = f.span();
    let r = f.get_ref();
    let given = [
        ("nodes", r.nodes.is_some()),
        ("at", r.at.is_some()),
        ("back", r.back.is_some()),
        ("mtbf", r.mtbf.is_some()),
        ("repair", r.repair.is_some()),
        ("file", r.file.is_some()),
    ];
    let (allowed, needed): (&[&str], &[&str]) = match r.process.as_str() {
        "fixed" => (&["nodes", "at", "back"], &["at"]),
        "poisson" => (&["mtbf", "repair"], &["mtbf", "repair"]),
        "trace" => (&["file"], &["file"]),
        "none" => (&[], &[]),
        other => {
            return Err(src.error_at(
                span,
                "failure.process",
                format!("unknown process `{other}`; expected fixed, poisson, trace or none"),
            ));
        }
    };
    for (name, set) in given {
        if set && !allowed.contains(&name) {
            return Err(src.error_at(
                span,
                &format!("failure.{name}"),
                format!("does not apply to process `{}`", r.process),
            ));
        }
        if !set && needed.contains(&name) {
            return Err(src.error_at(
                span,
                &format!("failure.{name}"),
                format!("process `{}` needs it", r.process),
            ));
        }
    }
    let mut lines = Vec::new();
    let process = match r.process.as_str() {
        "fixed" => {
            let at = non_negative(src, span.clone(), "failure.at", r.at.unwrap_or(0.0))?;
            let back = r.back.unwrap_or(f64::INFINITY);
            if back.is_nan() || back < at {
                return Err(src.error_at(
                    span,
                    "failure.back",
                    format!("{back} must be ≥ at = {at}"),
                ));
            }
            FailureProcess::Fixed {
                nodes: r.nodes.clone().unwrap_or_else(|| vec![0]),
                at,
                back,
            }
        }
        "poisson" => FailureProcess::Poisson {
            mtbf: positive(src, span.clone(), "failure.mtbf", r.mtbf.unwrap_or(0.0))?,
            repair: non_negative(src, span.clone(), "failure.repair", r.repair.unwrap_or(0.0))?,
        },
        "trace" => {
            let file = r.file.clone().unwrap_or_default();
            let base = if src.origin.starts_with("bundled:") {
                std::path::PathBuf::from(".")
            } else {
                std::path::Path::new(src.origin).parent().map_or_else(
                    || std::path::PathBuf::from("."),
                    std::path::Path::to_path_buf,
                )
            };
            let rows = read_trace_rows(&base.join(&file))
                .map_err(|e| src.error_at(span.clone(), "failure.file", format!("{e:#}")))?;
            let outages = rows.iter().map(|(_, o)| *o).collect();
            lines = rows.iter().map(|(l, _)| *l).collect();
            FailureProcess::Trace { file, outages }
        }
        _ => FailureProcess::None,
    };
    Ok((process, lines))
}

fn iterations(src: &SourceText, raw: &Raw, i: &Spanned<RawIterations>) -> Result<IterationsConfig> {
    let span = i.span();
    let r = i.get_ref();
    let Some(model) = &raw.model else {
        return Err(src.error_at(
            span,
            "model",
            "[iterations] needs a [model] table (kind = \"lda\" or \"mlr\")",
        ));
    };
    let spec = ModelSpec::parse(src, model.span(), model.get_ref())?;
    let Some(ck) = &raw.checkpoint else {
        return Err(src.error_at(
            span,
            "checkpoint",
            "[iterations] needs a [checkpoint] table (write_time, cache_time)",
        ));
    };
    let c = ck.get_ref();
    if c.interval.is_some() {
        return Err(src.error_at(
            ck.span(),
            "checkpoint.interval",
            "in [iterations] scenarios each series gives its `checkpoint_interval` (iterations)",
        ));
    }
    if raw.failure.is_some() || raw.cost.is_some() {
        return Err(src.error_at(span, "failure", "[iterations] scenarios set the failure in [iterations] (failure_iteration, lost_fraction); [failure] and [cost] are for [wallclock]"));
    }
    let default_async = persist_mode(src, ck.span(), "checkpoint.persist", &c.persist)?;
    limits::iterations(src, &span, "iterations.max_iterations", r.max_iterations)?;
    if r.criterion_iteration == 0 || r.criterion_iteration > r.max_iterations {
        return Err(src.error_at(
            span,
            "iterations.criterion_iteration",
            "must be between 1 and max_iterations",
        ));
    }
    if r.failure_iteration == 0 || r.failure_iteration > r.criterion_iteration {
        return Err(src.error_at(
            span,
            "iterations.failure_iteration",
            format!(
                "must be between 1 and criterion_iteration = {}",
                r.criterion_iteration
            ),
        ));
    }
    if !(0.0..1.0).contains(&r.failure_offset) {
        return Err(src.error_at(
            span,
            "iterations.failure_offset",
            format!("{} is outside [0, 1)", r.failure_offset),
        ));
    }
    if r.ps_nodes == 0 || r.ps_nodes > 1_000_000 {
        return Err(src.error_at(
            span,
            "iterations.ps_nodes",
            format!("{} must be between 1 and 1,000,000", r.ps_nodes),
        ));
    }
    if !(r.lost_fraction > 0.0 && r.lost_fraction <= 1.0) {
        return Err(src.error_at(
            span,
            "iterations.lost_fraction",
            format!("{} is outside (0, 1]", r.lost_fraction),
        ));
    }
    if raw.series.as_deref().unwrap_or(&[]).is_empty() {
        return Err(src.error("series", "at least one [[series]] is needed"));
    }
    let mut series = Vec::new();
    for rs in raw.series.as_deref().unwrap_or(&[]) {
        let s = rs.span();
        let x = rs.get_ref();
        let at = |field: &str, msg: String| src.error_at(s.clone(), field, msg);
        if x.strategy.is_some()
            || x.chain.is_some()
            || x.hop_time.is_some()
            || x.damping_threshold.is_some()
            || x.damped_learning_rate.is_some()
            || x.fraction.is_some()
        {
            return Err(at("series", "[iterations] series take name, recovery, checkpoint_interval, checkpoint_fraction, checkpoint_budget and persist".into()));
        }
        let interval = x.checkpoint_interval.unwrap_or(0);
        limits::iterations(src, &s, "series.checkpoint_interval", interval)?;
        if interval == 0 {
            return Err(at(
                "series.checkpoint_interval",
                "missing or 0: iterations between full checkpoints".into(),
            ));
        }
        let fraction = x.checkpoint_fraction.unwrap_or(1.0);
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(at(
                "series.checkpoint_fraction",
                format!("{fraction} is outside (0, 1]"),
            ));
        }
        let policy = CheckpointPolicy {
            interval,
            fraction,
            selector: Selector::Priority,
            budget: x.checkpoint_budget.unwrap_or_default(),
        };
        if !policy.period_is_whole() {
            return Err(at(
                "series.checkpoint_fraction",
                format!(
                    "r·C = {} must be a whole number of iterations ≥ 1",
                    fraction * interval as f64
                ),
            ));
        }
        let Some(recovery) = x.recovery else {
            return Err(at("series.recovery", "missing: `full` or `partial`".into()));
        };
        let name = x
            .name
            .clone()
            .unwrap_or_else(|| format!("{} r={fraction}", recovery.name()));
        series::check_name(src, s.clone(), &name, NameRule::Unstated)?;
        if series.iter().any(|x: &IterationsSeries| x.name == name) {
            return Err(at(
                "series.name",
                format!("`{name}` appears twice; give the series distinct names"),
            ));
        }
        series.push(IterationsSeries {
            name,
            checkpoint: policy,
            recovery,
            asynchronous: match &x.persist {
                Some(p) => persist_mode(src, s.clone(), "series.persist", p)?,
                None => default_async,
            },
        });
    }
    Ok(IterationsConfig {
        model: spec,
        iteration_time: positive(
            src,
            span.clone(),
            "iterations.iteration_time",
            r.iteration_time,
        )?,
        write_time: non_negative(src, ck.span(), "checkpoint.write_time", c.write_time)?,
        cache_time: non_negative(src, ck.span(), "checkpoint.cache_time", c.cache_time)?,
        detection: non_negative(src, span.clone(), "iterations.detection", r.detection)?,
        restart: non_negative(src, span.clone(), "iterations.restart", r.restart)?,
        criterion_iteration: r.criterion_iteration,
        max_iterations: r.max_iterations,
        failure_iteration: r.failure_iteration,
        failure_offset: r.failure_offset,
        ps_nodes: r.ps_nodes,
        lost_fraction: r.lost_fraction,
        series,
    })
}

fn interval(src: &SourceText, raw: &Raw, i: &Spanned<RawInterval>) -> Result<IntervalConfig> {
    let span = i.span();
    let r = i.get_ref();
    if raw.model.is_some()
        || raw.checkpoint.is_some()
        || raw.failure.is_some()
        || !raw.series.as_deref().unwrap_or(&[]).is_empty()
    {
        return Err(src.error_at(span, "interval", "[interval] scenarios take no [model], [checkpoint], [failure] or [[series]]: δ, R and the MTBFs are set in [interval]"));
    }
    if r.mtbf.is_empty() {
        return Err(src.error_at(span, "interval.mtbf", "give at least one MTBF (seconds)"));
    }
    limits::list_len(src, &span, "interval.mtbf", r.mtbf.len())?;
    for &m in &r.mtbf {
        positive(src, span.clone(), "interval.mtbf", m)?;
    }
    limits::distinct_f64(src, &span, "interval.mtbf", &r.mtbf)?;
    let f = &r.factors;
    if !(f.from > 0.0 && f.to > f.from && f.to.is_finite() && (2..=1000).contains(&f.points)) {
        return Err(src.error_at(
            span,
            "interval.factors",
            "need 0 < from < to and 2 ≤ points ≤ 1000",
        ));
    }
    // Log-spaced factors of Daly's optimum, with 1 included.
    let mut factors: Vec<f64> = (0..f.points)
        .map(|k| f.from * (f.to / f.from).powf(k as f64 / (f.points - 1) as f64))
        .collect();
    if f.from < 1.0 && f.to > 1.0 && !factors.iter().any(|&x| (x - 1.0).abs() < 1e-12) {
        factors.push(1.0);
        factors.sort_by(f64::total_cmp);
    }
    let cfg = IntervalConfig {
        solve_time: positive(src, span.clone(), "interval.solve_time", r.solve_time)?,
        checkpoint_time: positive(
            src,
            span.clone(),
            "interval.checkpoint_time",
            r.checkpoint_time,
        )?,
        restart_time: non_negative(src, span.clone(), "interval.restart_time", r.restart_time)?,
        mtbf: r.mtbf.clone(),
        factors,
    };
    check_interval_steps(src, &span, &cfg)?;
    Ok(cfg)
}

/// Most steps (checkpoint segments plus failures) of one checkpoint/restart
/// timeline, expected; a timeline that needs more (failures far more often
/// than a segment and its checkpoint take) would practically never finish.
pub const MAX_TIMELINE_STEPS: f64 = 1e7;

/// Refuses intervals whose timelines would practically never finish: the
/// expected number of failures of one timeline is its expected wall time
/// ([`daly::expected_wall_time`], exact for the simulation) over the MTBF.
fn check_interval_steps(
    src: &SourceText,
    span: &std::ops::Range<usize>,
    c: &IntervalConfig,
) -> Result<()> {
    use crate::faults::daly;
    for &m in &c.mtbf {
        for &f in &c.factors {
            let tau = f * daly::daly_interval(c.checkpoint_time, m);
            let wall =
                daly::expected_wall_time(c.solve_time, tau, c.checkpoint_time, c.restart_time, m);
            let steps = wall / m + c.solve_time / tau;
            if steps.is_nan() || steps > MAX_TIMELINE_STEPS {
                return Err(src.error_at(
                    span.clone(),
                    "interval.mtbf",
                    format!(
                        "MTBF {m} s against checkpoints of {} s (interval {tau:.3e} s) would take about \
                         {steps:.1e} failures and segments per timeline to finish {} s of work, more than the \
                         limit of {MAX_TIMELINE_STEPS:e}: failures come far faster than a segment and its \
                         checkpoint can complete; raise the MTBF or shorten the checkpoint",
                        c.checkpoint_time, c.solve_time
                    ),
                ));
            }
        }
    }
    Ok(())
}
