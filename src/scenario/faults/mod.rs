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

use super::protocol::RawDelay;
use super::{Meta, SourceText, check_name, limits};
use crate::cluster::Delay;
use crate::faults::{CheckpointCost, Strategy};
use crate::model::ModelSpec;
use crate::model::gradient::GradientSpec;
use crate::policy::failure::FailureProcess;
use crate::policy::{CheckpointPolicy, RecoveryPolicy, WriteBudget};

mod failures;
mod interval;
mod iterations;
mod wallclock;

use interval::interval;
use iterations::iterations;
use wallclock::wallclock;

/// A validated `faults` scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FaultsScenario {
    /// Name, title, paper, trials, seed.
    pub(crate) meta: Meta,
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
pub(crate) struct Prices {
    /// On-demand price per node-hour.
    pub(crate) on_demand: f64,
    /// Spot price per node-hour.
    pub(crate) spot: f64,
}

/// One strategy series of a wall-clock scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct WallclockSeries {
    /// Legend name.
    pub(crate) name: String,
    /// The strategy.
    pub(crate) strategy: Strategy,
    /// Whether its checkpoints persist asynchronously.
    pub(crate) asynchronous: bool,
}

/// `[wallclock]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WallclockConfig {
    /// The gradient model.
    pub(crate) model: GradientSpec,
    /// η.
    pub(crate) eta: f64,
    /// Values of P.
    pub(crate) workers: Vec<usize>,
    /// PS shards.
    pub(crate) ps_nodes: usize,
    /// Gradient compute time.
    pub(crate) compute_time: Delay,
    /// Communication time per gradient.
    pub(crate) communication_time: Option<Delay>,
    /// Simulated seconds per run.
    pub(crate) horizon: f64,
    /// Grid spacing of the curves.
    pub(crate) grid_step: f64,
    /// Loss subsample size (MLR).
    pub(crate) loss_subsample: usize,
    /// Loss criterion for the time-to-criterion metric.
    pub(crate) criterion: f64,
    /// Detection delay.
    pub(crate) detection: f64,
    /// Restore time.
    pub(crate) restart: f64,
    /// Replacement join time (INFINITY: none).
    pub(crate) join: f64,
    /// Also run each series without failures.
    pub(crate) without_failure: bool,
    /// Checkpoint costs (persist mode per series).
    pub(crate) checkpoint: CheckpointCost,
    /// The failure process.
    pub(crate) failure: FailureProcess,
    /// Prices, if given.
    pub(crate) prices: Option<Prices>,
    /// The strategies.
    pub(crate) series: Vec<WallclockSeries>,
}

impl WallclockConfig {
    /// The grid times 0, step, … ≤ horizon.
    pub(crate) fn grid(&self) -> Vec<f64> {
        (0..self.grid_points())
            .map(|i| i as f64 * self.grid_step)
            .collect()
    }

    /// How many grid times [`WallclockConfig::grid`] has.
    pub(crate) fn grid_points(&self) -> usize {
        (self.horizon / self.grid_step + 1e-9).floor() as usize + 1
    }

    /// Points: (series, P, with failures), series-major, then P, then failures first.
    pub(crate) fn points(&self) -> Vec<(usize, usize, bool)> {
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
pub(crate) struct IterationsSeries {
    /// Legend name.
    pub(crate) name: String,
    /// Checkpoint policy (C in iterations, r, selector).
    pub(crate) checkpoint: CheckpointPolicy,
    /// Recovery policy.
    pub(crate) recovery: RecoveryPolicy,
    /// Persist asynchronously.
    pub(crate) asynchronous: bool,
}

/// `[iterations]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IterationsConfig {
    /// The block model.
    pub(crate) model: ModelSpec,
    /// Seconds per iteration.
    pub(crate) iteration_time: f64,
    /// Seconds to persist every block.
    pub(crate) write_time: f64,
    /// Seconds to choose and cache every block.
    pub(crate) cache_time: f64,
    /// Detection delay.
    pub(crate) detection: f64,
    /// Restore time.
    pub(crate) restart: f64,
    /// The criterion is the unperturbed run's metric at this iteration.
    pub(crate) criterion_iteration: usize,
    /// Iteration cap.
    pub(crate) max_iterations: usize,
    /// T (1-based).
    pub(crate) failure_iteration: usize,
    /// Fraction of iteration T done when the failure strikes.
    pub(crate) failure_offset: f64,
    /// PS nodes the blocks are placed on.
    pub(crate) ps_nodes: usize,
    /// Fraction of the PS nodes the failure takes down.
    pub(crate) lost_fraction: f64,
    /// The policies.
    pub(crate) series: Vec<IterationsSeries>,
}

/// `[interval]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntervalConfig {
    /// T_s: work in seconds.
    pub(crate) solve_time: f64,
    /// δ.
    pub(crate) checkpoint_time: f64,
    /// R.
    pub(crate) restart_time: f64,
    /// System MTBFs swept (one series each).
    pub mtbf: Vec<f64>,
    /// Intervals as multiples of Daly's higher-order optimum.
    pub(crate) factors: Vec<f64>,
}

impl FaultsScenario {
    /// Number of points (units per trial).
    pub(crate) fn point_count(&self) -> usize {
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
pub(crate) fn parse(src: &SourceText) -> Result<FaultsScenario> {
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
    let meta = Meta::new(
        "faults", &raw.name, &raw.title, &raw.paper, trials, raw.seed,
    );
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
