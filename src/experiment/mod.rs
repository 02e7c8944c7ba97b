//! Running a validated scenario: plan its units, run them in parallel, and
//! gather tidy tables. One module per scenario kind.

pub mod perturbation;
pub mod precision;
pub mod recovery;
pub mod reference;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::ProgressBar;

use crate::data::{DataCache, DataOptions};
use crate::engine::ForkMode;
use crate::report::{Manifest, Table, manifest::Program};
use crate::scenario::{Origin, Scenario};

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
    pub details: serde_json::Value,
}

/// Number of trial units a scenario will run (for progress bars).
pub fn unit_count(scenario: &Scenario) -> usize {
    match scenario {
        Scenario::Recovery(s) => s.points().len() * s.meta.trials,
        Scenario::Perturbation(s) => s.series.len() * s.meta.trials,
        Scenario::Precision(s) => s.precision.mantissa_bits.len(),
    }
}

/// Runs one scenario and returns its tables.
pub fn run(
    scenario: &Scenario,
    opts: &RunOptions,
    cache: &DataCache,
    progress: &ProgressBar,
) -> Result<Outcome> {
    match scenario {
        Scenario::Recovery(s) => recovery::run(s, opts, cache, progress),
        Scenario::Perturbation(s) => perturbation::run(s, opts, cache, progress),
        Scenario::Precision(s) => precision::run(s, opts, cache, progress),
    }
}

/// Runs a scenario and writes `summary.csv`, `trials.csv`, any extra tables
/// and `manifest.json` into `<out_dir>/<name>/`. Returns that folder.
pub fn run_and_write(
    scenario: &Scenario,
    origin: &Origin,
    text: &str,
    opts: &RunOptions,
    cache: &DataCache,
    progress: &ProgressBar,
) -> Result<PathBuf> {
    let started = Instant::now();
    let name = &scenario.meta().name;
    let outcome = run(scenario, opts, cache, progress)
        .with_context(|| format!("scenario `{name}` ({})", origin.label))?;
    let dir = opts.out_dir.join(name);
    write_outcome(
        &dir,
        scenario,
        origin,
        text,
        opts,
        &outcome,
        started.elapsed().as_secs_f64(),
    )?;
    Ok(dir)
}

fn write_outcome(
    dir: &Path,
    scenario: &Scenario,
    origin: &Origin,
    text: &str,
    opts: &RunOptions,
    outcome: &Outcome,
    seconds: f64,
) -> Result<()> {
    let mut files = vec!["summary.csv".to_string(), "trials.csv".to_string()];
    outcome.summary.write(&dir.join("summary.csv"))?;
    outcome.trials.write(&dir.join("trials.csv"))?;
    for (file, table) in &outcome.extra {
        table.write(&dir.join(file))?;
        files.push(file.clone());
    }
    let meta = scenario.meta();
    let manifest = Manifest {
        program: Program::current(),
        source: origin.label.clone(),
        scenario: serde_json::to_value(scenario)?,
        scenario_toml: text.to_string(),
        seed: meta.seed,
        trials: meta.trials,
        data: outcome.data.clone(),
        details: outcome.details.clone(),
        threads: opts.threads,
        wall_time_seconds: seconds,
        files,
    };
    manifest.write(&dir.join("manifest.json"))
}
