//! Running one scenario to files: journal, resume, shard, tables, manifest.
//! Used by `scarsim run` and `scarsim reproduce`.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use super::units::{Driver, Interrupted, Journal, JournalHeader, Records, Shard};
use super::{RunFacts, RunOptions};
use crate::data::DataCache;
use crate::report::manifest::Program;
use crate::report::manifest::{fnv64, read_in};
use crate::report::outdir::{self, Created};
use crate::scenario::{Origin, Scenario};

/// File name of a run's journal inside its results folder.
pub const JOURNAL: &str = "units.jsonl";
/// File name of a shard's description inside its results folder.
pub const SHARD_FILE: &str = "shard.json";

/// How to execute a scenario beyond [`RunOptions`].
pub struct Execution<'a> {
    /// Run only this shard of the units.
    pub shard: Option<Shard>,
    /// Skip the units already in the journal of an earlier run.
    pub resume: bool,
    /// Set (e.g. by Ctrl-C) to stop early with the journal intact.
    pub cancel: &'a AtomicBool,
    /// Where to say what is happening (resumed units, dropped lines).
    pub log: &'a (dyn Fn(&str) + Sync),
}

/// What an execution produced.
#[derive(Debug)]
pub enum Executed {
    /// Complete results: CSV files and manifest in `dir`.
    Results {
        /// The results folder.
        dir: PathBuf,
        /// Wall-clock seconds.
        seconds: f64,
    },
    /// One shard: its journal and `shard.json` in `dir`.
    Shard {
        /// The shard folder.
        dir: PathBuf,
        /// Units in the shard.
        units: usize,
        /// Wall-clock seconds.
        seconds: f64,
    },
}

/// What a shard writes next to its journal, last, and `merge` checks.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardManifest {
    /// Program version.
    pub program: String,
    /// Scenario name.
    pub scenario: String,
    /// Fingerprint of the resolved scenario and data options.
    pub fingerprint: String,
    /// Seed used.
    pub seed: u64,
    /// Trials per point used.
    pub trials: usize,
    /// Synthetic stand-ins or real data.
    pub synthetic: bool,
    /// Stand-in scale.
    pub scale: f64,
    /// Which shard.
    pub shard: Shard,
    /// Units of the whole scenario.
    pub units_total: usize,
    /// The units of this shard.
    pub units: Vec<usize>,
    /// Where the scenario came from.
    pub source: String,
    /// The scenario file's text.
    pub scenario_toml: String,
    /// The context shared by every unit (identical across shards).
    pub context: serde_json::Value,
    /// Wall-clock seconds of this shard.
    pub wall_time_seconds: f64,
    /// Threads used.
    pub threads: usize,
    /// [`fnv64`] of the journal's bytes when the shard finished: `merge`
    /// takes the journal only if it still has them.
    pub journal_checksum: String,
}

/// Runs `scenario` into `<out>/<name>/` (or its shard folder), journalling
/// every finished unit, and writes the results atomically.
pub fn execute(
    scenario: &Scenario,
    origin: &Origin,
    text: &str,
    opts: &RunOptions,
    cache: &DataCache,
    progress: &ProgressBar,
    exec: &Execution<'_>,
) -> Result<Executed> {
    let started = Instant::now();
    let cpu_started = crate::bench::process_seconds();
    let name = &scenario.meta().name;
    // Every check before anything is created.
    let units = super::budget::check(scenario)?.units;
    if let Some(s) = exec.shard {
        s.check_units(units)?;
    }
    let header = JournalHeader {
        version: env!("CARGO_PKG_VERSION").to_string(),
        scenario: name.clone(),
        fingerprint: super::fingerprint(scenario, &opts.data)?,
        shard: exec.shard,
    };
    let dir_name = match exec.shard {
        Some(s) => format!("{name}.{}", s.suffix()),
        None => name.clone(),
    };
    let mut created = Created::new();
    let dir = outdir::ensure_dir(&opts.out_dir, &dir_name, &mut created)?;
    let journal_path = outdir::join(&dir, JOURNAL)?;
    let stale = outdir::remove_stale_temporaries(&dir)?;
    if stale > 0 {
        (exec.log)(&format!(
            "removed {stale} temporary file(s) left by a process that stopped while writing"
        ));
    }
    let existing = std::fs::symlink_metadata(&journal_path).is_ok();
    let (journal, resumed) = if exec.resume && existing {
        let (h, records, dropped) = Journal::read(&journal_path, true)?;
        if h != header {
            bail!(
                "{} belongs to a different run (scenario, options, seed, shard or program version differ); \
                 delete it or run without --resume",
                journal_path.display()
            );
        }
        if dropped > 0 {
            (exec.log)(&format!(
                "dropped {dropped} torn or corrupt journal line(s); those units will be recomputed"
            ));
        }
        (exec.log)(&format!(
            "resuming with {} units already done",
            records.len()
        ));
        (Journal::append_to(&journal_path)?, records)
    } else {
        if exec.resume {
            (exec.log)(&format!(
                "no journal at {}; starting from the beginning",
                journal_path.display()
            ));
        }
        match Journal::create(&journal_path, &header) {
            Ok(j) => (j, Records::new()),
            Err(e) => {
                // A full disk at the start: leave no empty folder behind.
                created.remove_empty();
                return Err(e.context(format!("scenario `{name}` ({})", origin.label)));
            }
        }
    };
    let resumed_count = resumed.len();
    let driver = Driver::new(exec.shard, resumed, Some(journal), progress, exec.cancel);
    let raw = match super::run_raw(scenario, opts, cache, &driver) {
        Ok(raw) => raw,
        Err(e) => {
            if e.downcast_ref::<Interrupted>().is_none()
                && driver.finished_count() == 0
                && resumed_count == 0
            {
                // Nothing worth resuming: leave no trace of the failed run,
                // and remove only the folders this run created.
                std::fs::remove_file(&journal_path).ok();
                created.remove_empty();
            }
            return Err(e.context(format!("scenario `{name}` ({})", origin.label)));
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    match exec.shard {
        Some(s) => {
            let manifest = ShardManifest {
                program: Program::current().version.to_string(),
                scenario: name.clone(),
                fingerprint: header.fingerprint.clone(),
                seed: scenario.meta().seed,
                trials: scenario.meta().trials,
                synthetic: opts.data.synthetic,
                scale: opts.data.synthetic_scale,
                shard: s,
                units_total: units,
                units: raw.records.keys().copied().collect(),
                source: origin.label.clone(),
                scenario_toml: text.to_string(),
                context: raw.context.clone(),
                wall_time_seconds: seconds,
                threads: opts.threads,
                journal_checksum: fnv64(&read_in(&dir, JOURNAL)?),
            };
            let mut bytes = serde_json::to_vec_pretty(&manifest)?;
            bytes.push(b'\n');
            outdir::write_file(&outdir::file(&dir, SHARD_FILE)?, &bytes)?;
            Ok(Executed::Shard {
                dir,
                units: raw.records.len(),
                seconds,
            })
        }
        None => {
            let outcome = super::tables(scenario, &raw)
                .with_context(|| format!("scenario `{name}`: cannot build the tables"))?;
            let facts = RunFacts {
                origin,
                text,
                threads: opts.threads,
                seconds,
                cpu_seconds: Some(crate::bench::process_seconds() - cpu_started),
                units_computed: raw.records.len().saturating_sub(resumed_count),
                fingerprint: &header.fingerprint,
                extra: serde_json::Value::Null,
            };
            super::write_outcome(&dir, scenario, &outcome, &facts)?;
            std::fs::remove_file(&journal_path).ok();
            Ok(Executed::Results { dir, seconds })
        }
    }
}

/// Runs every unit of `scenario` and writes its results folder (no shard).
/// With `resume`, units already in the journal of an interrupted run are
/// kept. Returns the folder.
pub fn run_and_write(
    scenario: &Scenario,
    origin: &Origin,
    text: &str,
    opts: &RunOptions,
    cache: &DataCache,
    progress: &ProgressBar,
    resume: bool,
) -> Result<PathBuf> {
    let exec = Execution {
        shard: None,
        resume,
        cancel: &super::units::CANCEL,
        log: &|_| {},
    };
    match execute(scenario, origin, text, opts, cache, progress, &exec)? {
        Executed::Results { dir, .. } | Executed::Shard { dir, .. } => Ok(dir),
    }
}
