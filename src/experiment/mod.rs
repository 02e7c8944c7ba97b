//! Running a validated scenario: plan its units, run them in parallel, and
//! gather tidy tables. One module per scenario kind, each an
//! `Experiment` implementation that `kind::of` finds for a scenario;
//! `tasks` is the one unit loop and record codec, [`units`] handles
//! shards, the journal and resuming.
//!
//! Every kind follows the same two steps, so sharding and resuming work the
//! same way for all of them: `Experiment::run_raw` computes the records of
//! the units a run is responsible for (plus a context shared by all units,
//! such as the unperturbed runs), and `Experiment::tables` turns the
//! records of *all* units into the output tables.

pub mod budget;
pub(crate) mod cpu;
pub(crate) mod execute;
pub(crate) mod faults;
pub(crate) mod kind;
pub(crate) mod perturbation;
pub(crate) mod precision;
pub mod protocol;
pub(crate) mod recovery;
pub(crate) mod reference;
pub(crate) mod same_runs;
pub(crate) mod shared_outcomes;
pub(crate) mod tasks;
pub mod units;

pub(crate) use execute::run_and_write;
pub(crate) use kind::of;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::data::{DataCache, DataOptions};
use crate::engine::ForkMode;
use crate::report::{Manifest, Table, manifest::Program, outdir};
use crate::scenario::{Origin, Scenario};
use units::{Driver, Records};

/// How to run scenarios (from the command line).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Where the data comes from.
    pub data: DataOptions,
    /// Results go to `<out_dir>/<scenario name>/`.
    pub out_dir: PathBuf,
    /// Worker threads (the rayon pool the run is installed in).
    pub threads: usize,
    /// Fork trials from the unperturbed run (default) or re-run their prefix.
    pub fork_mode: ForkMode,
    /// Let models certify "not converged yet" without evaluating the metric
    /// (`Model::check_many`); `false` evaluates it at every iteration (same
    /// results, slower; for benchmarking and testing).
    pub certify_metric: bool,
    /// Compute trials whose outcome is fully determined by the same inputs
    /// once and share the result (recovery: `TrialKey`; faults: the
    /// failure-free runs, `PsSetup::failure_free_key`, and the trial-free
    /// series of `[iterations]`; protocol: the K = 1
    /// runs, `Protocol::run_at_k_one`); `false` runs every trial (same
    /// results, slower; for benchmarking and testing).
    pub share_identical_trials: bool,
    /// Outcomes of recovery trials computed by other scenarios of this
    /// process (`reproduce`): a unit whose inputs are exactly those of a
    /// stored outcome takes it instead of running, and the outcomes this run
    /// computes are stored (see `shared_outcomes`). `None`: nothing is
    /// shared across scenarios (`run`, `reproduce --no-share-across`).
    pub shared_outcomes: Option<std::sync::Arc<shared_outcomes::SharedOutcomes>>,
}

/// The tables and facts a scenario produced, before they are written.
pub struct Outcome {
    /// One row per (series, x).
    pub summary: Table,
    /// One row per trial.
    pub trials: Table,
    /// Further tables, by file name (e.g. `baseline.csv`).
    pub extra: Vec<(String, Table)>,
    /// Data provenance for the manifest.
    pub data: serde_json::Value,
    /// Kind-specific facts for the manifest.
    pub(crate) details: serde_json::Value,
}

/// The raw results of a run: the records of its units and the context they
/// share. This is what a shard writes and `merge` reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RawResult {
    /// Facts shared by every unit (identical in every shard of a run).
    pub(crate) context: serde_json::Value,
    /// Records of the units this run is responsible for, by unit index.
    pub(crate) records: Records,
}

/// Number of units (point × trial) of a scenario, counted without listing
/// them (saturating: [`budget::check`] refuses scenarios that large).
pub(crate) fn unit_count(scenario: &Scenario) -> usize {
    usize::try_from(budget::unit_count(scenario)).unwrap_or(usize::MAX)
}

/// A readable name for every unit, in unit order.
pub(crate) fn unit_names(scenario: &Scenario) -> Vec<String> {
    kind::of(scenario).unit_names()
}

/// Runs the units `driver` assigns to this run.
pub(crate) fn run_raw(
    scenario: &Scenario,
    opts: &RunOptions,
    cache: &DataCache,
    driver: &Driver<'_>,
) -> Result<RawResult> {
    kind::of(scenario).run_raw(opts, cache, driver)
}

/// Builds the output tables from the records of every unit.
///
/// Records come back from journals and shards, files a user can edit; a
/// record that decodes but does not fit the scenario (e.g. a curve of the
/// wrong length) is an error here, never a panic.
pub(crate) fn tables(scenario: &Scenario, raw: &RawResult) -> Result<Outcome> {
    let build = || kind::of(scenario).tables(raw);
    crate::report::guard::without_panics(build).unwrap_or_else(|message| {
        Err(anyhow::anyhow!(
            "the unit records do not fit scenario `{}` ({message}): a journal or shard was edited, \
             or comes from another build; run it again",
            scenario.meta().name
        ))
    })
}

/// Runs every unit of a scenario and returns its tables (no journal).
pub fn run(
    scenario: &Scenario,
    opts: &RunOptions,
    cache: &DataCache,
    progress: &ProgressBar,
) -> Result<Outcome> {
    let never = AtomicBool::new(false);
    let driver = Driver::all(progress, &never);
    let raw = run_raw(scenario, opts, cache, &driver)?;
    tables(scenario, &raw)
}

/// Fingerprint of what determines a run's results: program version, the
/// resolved scenario (after overrides) and the data options that change the
/// data (real or synthetic, and the stand-in scale).
pub(crate) fn fingerprint(scenario: &Scenario, data: &DataOptions) -> Result<String> {
    let canonical = serde_json::to_string(&serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "scenario": scenario,
        "synthetic": data.synthetic,
        "scale": if data.synthetic { data.synthetic_scale } else { 1.0 },
    }))?;
    Ok(units::fnv64(canonical.as_bytes()))
}

/// Facts for the manifest beyond the tables.
pub(crate) struct RunFacts<'a> {
    /// Where the scenario came from.
    pub(crate) origin: &'a Origin,
    /// The scenario file's text.
    pub(crate) text: &'a str,
    /// Worker threads.
    pub(crate) threads: usize,
    /// Wall-clock seconds.
    pub(crate) seconds: f64,
    /// CPU seconds of this process over the run, all threads (None when
    /// unknown, e.g. for a merge of shards).
    pub(crate) cpu_seconds: Option<f64>,
    /// Units computed by this process (excluding resumed or merged ones,
    /// and those taken from other scenarios).
    pub(crate) units_computed: usize,
    /// Units that took their outcome from another scenario of this process
    /// instead of running ([`RunOptions::shared_outcomes`]).
    pub(crate) units_shared_across: usize,
    /// [`fingerprint`] of the scenario and data options the units ran with.
    pub(crate) fingerprint: &'a str,
    /// Extra manifest fields (e.g. the shards a merge combined).
    pub(crate) extra: serde_json::Value,
}

/// Writes `summary.csv`, `trials.csv`, extra tables and `manifest.json` into
/// the existing results folder `dir`, each atomically. The old manifest is
/// removed first and the new one, with every file's checksum, is written
/// last: until then the folder counts as unfinished (see
/// [`crate::report::manifest::read_finished`]).
pub(crate) fn write_outcome(
    dir: &Path,
    scenario: &Scenario,
    outcome: &Outcome,
    facts: &RunFacts<'_>,
) -> Result<()> {
    crate::report::manifest::remove(dir)?;
    let mut files = Vec::new();
    let mut checksums = std::collections::BTreeMap::new();
    let tables = [
        ("summary.csv", &outcome.summary),
        ("trials.csv", &outcome.trials),
    ]
    .into_iter()
    .chain(outcome.extra.iter().map(|(f, t)| (f.as_str(), t)));
    for (file, table) in tables {
        let path = outdir::file(dir, file)?;
        let bytes = table
            .to_csv()
            .with_context(|| format!("cannot format {}", path.display()))?;
        outdir::write_file(&path, &bytes)?;
        checksums.insert(file.to_string(), units::fnv64(&bytes));
        files.push(file.to_string());
    }
    let meta = scenario.meta();
    let units = unit_count(scenario);
    let mut details = outcome.details.clone();
    if let serde_json::Value::Object(map) = &mut details {
        map.insert("units".into(), units.into());
        map.insert("units_computed".into(), facts.units_computed.into());
        map.insert(
            "units_from_other_scenarios".into(),
            facts.units_shared_across.into(),
        );
        map.insert(
            "thread_seconds_per_unit".into(),
            serde_json::json!(if facts.units_computed > 0 {
                facts.seconds * facts.threads as f64 / facts.units_computed as f64
            } else {
                f64::NAN
            }),
        );
        if let Some(cpu) = facts.cpu_seconds {
            map.insert("cpu_time_seconds".into(), serde_json::json!(cpu));
        }
        map.insert(
            "peak_memory_bytes".into(),
            serde_json::json!(peak_memory_bytes()),
        );
        if !facts.extra.is_null() {
            map.insert("run".into(), facts.extra.clone());
        }
    }
    let manifest = Manifest {
        program: Program::current(),
        source: facts.origin.label.clone(),
        scenario: serde_json::to_value(scenario)?,
        scenario_toml: facts.text.to_string(),
        fingerprint: facts.fingerprint.to_string(),
        seed: meta.seed,
        trials: meta.trials,
        data: outcome.data.clone(),
        details,
        threads: facts.threads,
        wall_time_seconds: facts.seconds,
        files,
        checksums,
    };
    manifest.write(dir)
}

/// Peak resident memory of this process (Linux `VmHWM`), if known.
pub(crate) fn peak_memory_bytes() -> Option<u64> {
    proc_status_kb("VmHWM:").map(|kb| kb * 1024)
}

/// Current resident memory of this process (Linux `VmRSS`), if known.
pub(crate) fn current_memory_bytes() -> Option<u64> {
    proc_status_kb("VmRSS:").map(|kb| kb * 1024)
}

fn proc_status_kb(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A dry run's measurements (`run --plan`).
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Expected cost of every unit (iterations from its failure to the
    /// unperturbed convergence point), used to balance shards.
    pub(crate) unit_costs: Vec<f64>,
    /// Iterations of the unperturbed run.
    pub(crate) baseline_iterations: usize,
    /// Seconds for the unperturbed run(s).
    pub(crate) baseline_seconds: f64,
    /// Trial iterations the run computes (without rework): the sum of the
    /// costs of the units that are run, not of those that take an identical
    /// unit's outcome.
    pub(crate) trial_iterations: f64,
    /// Units that take an identical unit's outcome instead of running.
    pub(crate) shared_units: usize,
    /// Single-thread seconds for all trial iterations (without rework).
    pub(crate) trial_seconds: f64,
    /// Estimated peak memory of the run.
    pub(crate) memory_bytes: u64,
}

/// Measures what running `scenario` will cost, without running its trials.
pub(crate) fn plan(scenario: &Scenario, opts: &RunOptions, cache: &DataCache) -> Result<Plan> {
    match kind::of(scenario).plan(opts, cache) {
        Some(plan) => plan,
        None => plan_by_sample(scenario, opts, cache),
    }
}

/// Work of a sample unit in [`plan_by_sample`] (iterations, updates,
/// expected events): larger units are timed on a copy cut down to this much
/// work and the time is scaled up, so `--plan` never runs a huge unit.
const PLAN_SAMPLE_WORK: f64 = 20_000.0;

/// A plan for kinds without an unperturbed run: time the costliest unit
/// (cut down to a small sample of its work, see [`Experiment::cut_work`]) and
/// extrapolate by the units' relative costs.
fn plan_by_sample(scenario: &Scenario, opts: &RunOptions, cache: &DataCache) -> Result<Plan> {
    let units = unit_count(scenario);
    let never = AtomicBool::new(false);
    let hidden = ProgressBar::hidden();
    let mut sample = scenario.clone();
    let factor = kind::of_mut(&mut sample).cut_work(PLAN_SAMPLE_WORK);
    // With one shard per unit, shard 0 holds exactly the costliest unit.
    let one = units::Shard {
        index: 0,
        count: unit_count(&sample).max(1),
    };
    let driver = Driver::new(Some(one), Records::new(), None, &hidden, &never).timing_setup();
    let started = std::time::Instant::now();
    run_raw(&sample, opts, cache, &driver)?;
    let total = started.elapsed().as_secs_f64();
    // The one-time setup before the units (data, and for perturbation runs
    // the unperturbed run and x*) is paid once, not per unit.
    let setup = driver
        .assigned_at()
        .map_or(0.0, |t| t.duration_since(started).as_secs_f64())
        .min(total);
    let sample_seconds = (total - setup) * factor;
    // Unit costs are what the kind uses to balance shards (e.g. workers per
    // protocol unit); the costliest one was timed.
    let costs = kind::of(scenario).unit_costs();
    debug_assert_eq!(costs.len(), units);
    let max = costs.iter().cloned().fold(f64::MIN_POSITIVE, f64::max);
    Ok(Plan {
        baseline_iterations: 0,
        baseline_seconds: setup,
        trial_seconds: sample_seconds * costs.iter().sum::<f64>() / max,
        trial_iterations: costs.iter().sum(),
        shared_units: 0,
        memory_bytes: peak_memory_bytes().unwrap_or(0),
        unit_costs: costs,
    })
}
