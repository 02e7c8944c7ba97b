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
pub(crate) const JOURNAL: &str = "units.jsonl";
/// File name of a shard's description inside its results folder.
pub(crate) const SHARD_FILE: &str = "shard.json";

/// How to execute a scenario beyond [`RunOptions`].
pub(crate) struct Execution<'a> {
    /// Run only this shard of the units.
    pub(crate) shard: Option<Shard>,
    /// Skip the units already in the journal of an earlier run.
    pub(crate) resume: bool,
    /// Set (e.g. by Ctrl-C) to stop early with the journal intact.
    pub(crate) cancel: &'a AtomicBool,
    /// Where to say what is happening (resumed units, dropped lines).
    pub(crate) log: &'a (dyn Fn(&str) + Sync),
}

/// What an execution produced.
#[derive(Debug)]
pub(crate) enum Executed {
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
pub(crate) struct ShardManifest {
    /// Program version.
    pub(crate) program: String,
    /// Scenario name.
    pub(crate) scenario: String,
    /// Fingerprint of the resolved scenario and data options.
    pub(crate) fingerprint: String,
    /// Seed used.
    pub(crate) seed: u64,
    /// Trials per point used.
    pub(crate) trials: usize,
    /// Synthetic stand-ins or real data.
    pub(crate) synthetic: bool,
    /// Stand-in scale.
    pub(crate) scale: f64,
    /// Which shard.
    pub(crate) shard: Shard,
    /// Units of the whole scenario.
    pub(crate) units_total: usize,
    /// The units of this shard.
    pub(crate) units: Vec<usize>,
    /// Where the scenario came from.
    pub(crate) source: String,
    /// The scenario file's text.
    pub(crate) scenario_toml: String,
    /// The context shared by every unit (identical across shards).
    pub(crate) context: serde_json::Value,
    /// Wall-clock seconds of this shard.
    pub(crate) wall_time_seconds: f64,
    /// CPU seconds of this shard's process over the shard, all threads
    /// (absent in shards of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cpu_time_seconds: Option<f64>,
    /// Threads used.
    pub(crate) threads: usize,
    /// Units of this shard that took their outcome from another scenario of
    /// the same process instead of running (absent in older shards: 0).
    #[serde(default)]
    pub(crate) units_shared_across: usize,
    /// [`fnv64`] of the journal's bytes when the shard finished: `merge`
    /// takes the journal only if it still has them.
    pub(crate) journal_checksum: String,
}

/// The run's journal at `journal_path`: with `--resume`, the one an
/// interrupted run of the same `header` left (and its finished units), else
/// a fresh one (an error creating it passes through `create_failed`).
fn open_journal(
    journal_path: &std::path::Path,
    header: &JournalHeader,
    exec: &Execution<'_>,
    create_failed: impl FnOnce(anyhow::Error) -> anyhow::Error,
) -> Result<(Journal, Records)> {
    let existing = std::fs::symlink_metadata(journal_path).is_ok();
    Ok(if exec.resume && existing {
        let (h, records, dropped) = Journal::read(journal_path, true)?;
        if h != *header {
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
        (Journal::append_to(journal_path)?, records)
    } else {
        if exec.resume {
            (exec.log)(&format!(
                "no journal at {}; starting from the beginning",
                journal_path.display()
            ));
        }
        let journal = Journal::create(journal_path, header).map_err(create_failed)?;
        (journal, Records::new())
    })
}

/// Runs `scenario` into `<out>/<name>/` (or its shard folder), journalling
/// every finished unit, and writes the results atomically.
pub(crate) fn execute(
    scenario: &Scenario,
    origin: &Origin,
    text: &str,
    opts: &RunOptions,
    cache: &DataCache,
    progress: &ProgressBar,
    exec: &Execution<'_>,
) -> Result<Executed> {
    let started = Instant::now();
    let cpu_started = super::cpu::run_seconds();
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
    let (journal, resumed) = open_journal(&journal_path, &header, exec, |e| {
        // A full disk at the start: leave no empty folder behind.
        created.remove_empty();
        e.context(format!("scenario `{name}` ({})", origin.label))
    })?;
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
                cpu_time_seconds: Some(super::cpu::run_seconds() - cpu_started),
                threads: opts.threads,
                units_shared_across: driver.shared_across_count(),
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
                cpu_seconds: Some(super::cpu::run_seconds() - cpu_started),
                units_computed: raw
                    .records
                    .len()
                    .saturating_sub(resumed_count + driver.shared_across_count()),
                units_shared_across: driver.shared_across_count(),
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
pub(crate) fn run_and_write(
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

/// Reads one shard folder: its `shard.json` (every field checked) and its
/// journal (which must still have the bytes `shard.json` recorded).
pub(crate) fn read_shard(dir: &std::path::Path) -> Result<(ShardManifest, Records)> {
    let path = dir.join(SHARD_FILE);
    let text = read_in(dir, SHARD_FILE).with_context(|| {
        format!(
            "is {} a finished shard folder (`run --shard`)?",
            dir.display()
        )
    })?;
    let m: ShardManifest = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not a shard description", path.display()))?;
    let bad = |what: String| anyhow::anyhow!("{}: {what}; re-run that shard", path.display());
    if m.program != env!("CARGO_PKG_VERSION") {
        return Err(bad(format!(
            "written by scarsim {}, this is {}",
            m.program,
            env!("CARGO_PKG_VERSION")
        )));
    }
    crate::report::outdir::check_name(&m.scenario, "scenario name")
        .map_err(|e| bad(format!("`scenario`: {e}")))?;
    if m.shard.count == 0 || m.shard.index >= m.shard.count {
        return Err(bad(format!(
            "shard {}/{}: the index must be below the count",
            m.shard.index, m.shard.count
        )));
    }
    if m.shard.count > m.units_total.max(1) {
        return Err(bad(format!(
            "{} shards of {} units",
            m.shard.count, m.units_total
        )));
    }
    if m.units.windows(2).any(|w| w[0] >= w[1]) {
        return Err(bad("`units` must be increasing unit numbers".into()));
    }
    if let Some(&u) = m.units.iter().find(|&&u| u >= m.units_total) {
        return Err(bad(format!(
            "unit {u} is beyond the {} units of the scenario",
            m.units_total
        )));
    }
    if m.trials == 0 || !(m.scale > 0.0 && m.scale <= 10.0) || m.threads == 0 {
        return Err(bad(format!(
            "trials = {}, scale = {}, threads = {}: out of range",
            m.trials, m.scale, m.threads
        )));
    }
    if !(m.wall_time_seconds.is_finite() && m.wall_time_seconds >= 0.0) {
        return Err(bad(format!("wall time {} s", m.wall_time_seconds)));
    }
    if let Some(c) = m.cpu_time_seconds
        && !(c.is_finite() && c >= 0.0)
    {
        return Err(bad(format!("CPU time {c} s")));
    }
    if m.source.len() > 4096 || m.source.chars().any(char::is_control) {
        return Err(bad("`source` is not a file name or bundled name".into()));
    }
    let journal = read_in(dir, JOURNAL)?;
    if fnv64(&journal) != m.journal_checksum {
        bail!(
            "{}: the journal does not match shard.json (changed since the shard finished); re-run that shard",
            dir.display()
        );
    }
    let (header, records, dropped) = Journal::read(&dir.join(JOURNAL), false)?;
    if dropped > 0 || header.fingerprint != m.fingerprint || header.shard != Some(m.shard) {
        bail!(
            "{}: the journal does not match shard.json; re-run that shard",
            dir.display()
        );
    }
    Ok((m, records))
}

/// What [`merge_shards`] wrote.
#[derive(Debug)]
pub(crate) struct Merged {
    /// The scenario's name.
    pub(crate) scenario: String,
    /// Shards combined.
    pub(crate) shards: usize,
    /// The results folder, `<out>/<scenario>/`.
    pub(crate) dir: PathBuf,
}

/// Every shard of `shards` ran the same scenario, seed, options and program
/// version as the first; else an error naming the first difference.
fn check_same_run(shards: &[(PathBuf, ShardManifest, Records)]) -> Result<()> {
    let (first_dir, first, _) = &shards[0];
    for (dir, m, _) in &shards[1..] {
        let what = if m.scenario != first.scenario {
            Some(format!("scenario `{}` vs `{}`", m.scenario, first.scenario))
        } else if m.program != first.program {
            Some(format!(
                "program version {} vs {}",
                m.program, first.program
            ))
        } else if m.seed != first.seed {
            Some(format!("seed {} vs {}", m.seed, first.seed))
        } else if m.shard.count != first.shard.count {
            Some(format!("{} shards vs {}", m.shard.count, first.shard.count))
        } else if m.fingerprint != first.fingerprint {
            Some("the resolved scenario or data options".to_string())
        } else if m.context != first.context {
            Some("their unperturbed runs or data".to_string())
        } else if m.units_total != first.units_total
            || m.scenario_toml != first.scenario_toml
            || m.trials != first.trials
            || m.synthetic != first.synthetic
            || m.scale != first.scale
        {
            Some("their scenario text, trials or data options".to_string())
        } else {
            None
        };
        if let Some(what) = what {
            bail!(
                "cannot merge {} with {}: they differ in {what}; every shard must come from the same scenario, \
                 seed, options and program version",
                dir.display(),
                first_dir.display()
            );
        }
    }
    Ok(())
}

/// The scenario exactly as the shards ran it (from the first shard's
/// manifest `first`, in `first_dir`), checked against what the manifest says
/// of it: its name, unit count and fingerprint.
fn rebuild_scenario(first_dir: &std::path::Path, first: &ShardManifest) -> Result<Scenario> {
    let mut sc = crate::scenario::parse(&first.scenario_toml, &first.source)?;
    sc.override_trials_and_seed(Some(first.trials), Some(first.seed))?;
    let footprint = super::budget::check(&sc)?;
    if sc.meta().name != first.scenario {
        bail!(
            "{}: shard.json names scenario `{}` but its scenario text is `{}`; re-run the shards",
            first_dir.display(),
            first.scenario,
            sc.meta().name
        );
    }
    if footprint.units != first.units_total {
        bail!(
            "{}: shard.json counts {} units but the scenario has {}; re-run the shards",
            first_dir.display(),
            first.units_total,
            footprint.units
        );
    }
    let data = crate::data::DataOptions {
        synthetic: first.synthetic,
        synthetic_scale: first.scale,
        ..crate::data::DataOptions::default()
    };
    if super::fingerprint(&sc, &data)? != first.fingerprint {
        bail!(
            "the shards were written by a different scenario definition or program version; re-run them"
        );
    }
    Ok(sc)
}

/// Every unit's record from the shard that owns it, checking that each of
/// the `names.len()` units is in exactly one shard and each shard is given
/// once.
fn collect_units(
    shards: &[(PathBuf, ShardManifest, Records)],
    names: &[String],
) -> Result<Records> {
    let count = shards[0].1.shard.count;
    let mut seen_shard = vec![None; count];
    let mut owner: Vec<Option<usize>> = vec![None; names.len()];
    let mut records = Records::new();
    for (i, (dir, m, recs)) in shards.iter().enumerate() {
        if let Some(j) = seen_shard[m.shard.index].replace(i) {
            bail!(
                "shard {}/{} is given twice: {} and {}",
                m.shard.index,
                m.shard.count,
                shards[j].0.display(),
                dir.display()
            );
        }
        for &u in &m.units {
            if u >= names.len() {
                bail!(
                    "{}: unit {u} does not exist in scenario `{}`",
                    dir.display(),
                    m.scenario
                );
            }
            if let Some(j) = owner[u].replace(i) {
                bail!(
                    "unit {} is in two shards: {} and {}",
                    names[u],
                    shards[j].0.display(),
                    dir.display()
                );
            }
            let r = recs.get(&u).with_context(|| {
                format!(
                    "{}: no result for unit {}; re-run that shard",
                    dir.display(),
                    names[u]
                )
            })?;
            records.insert(u, r.clone());
        }
    }
    let missing_shards: Vec<String> = seen_shard
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| format!("{i}/{count}"))
        .collect();
    if !missing_shards.is_empty() {
        bail!(
            "missing shard(s) {}; give every shard folder",
            missing_shards.join(", ")
        );
    }
    let missing: Vec<&str> = (0..names.len())
        .filter(|u| owner[*u].is_none())
        .map(|u| names[u].as_str())
        .collect();
    if !missing.is_empty() {
        bail!(
            "{} unit(s) are in no shard, e.g. {}",
            missing.len(),
            missing
                .iter()
                .take(5)
                .copied()
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(records)
}

/// Combines the shard folders `dirs` (every shard of one sharded run) into
/// exactly the files an unsharded run writes, in `<out>/<scenario>/`. With
/// `expect_fingerprint`, the shards must have run with that fingerprint
/// (scenario, trials, seed, data options and program version).
pub(crate) fn merge_shards(
    dirs: &[PathBuf],
    out: &std::path::Path,
    expect_fingerprint: Option<&str>,
) -> Result<Merged> {
    if dirs.is_empty() {
        bail!("no shard folders to merge");
    }
    let started = Instant::now();
    let mut shards: Vec<(PathBuf, ShardManifest, Records)> = Vec::new();
    for dir in dirs {
        let (m, records) = read_shard(dir)?;
        shards.push((dir.clone(), m, records));
    }
    let (first_dir, first, _) = &shards[0];
    if let Some(want) = expect_fingerprint
        && first.fingerprint != want
    {
        bail!(
            "{}: the shard ran with other inputs (program version, scenario, trials, seed or data \
             differ from this run's); re-run the shards with the same options",
            first_dir.display()
        );
    }
    check_same_run(&shards)?;
    let sc = rebuild_scenario(first_dir, first)?;
    let names = super::unit_names(&sc);
    let records = collect_units(&shards, &names)?;
    let raw = super::RawResult {
        context: first.context.clone(),
        records,
    };
    let outcome = super::tables(&sc, &raw)?;
    let origin = Origin {
        label: first.source.clone(),
        path: None,
    };
    let facts = RunFacts {
        origin: &origin,
        text: &first.scenario_toml,
        threads: first.threads,
        seconds: shards.iter().map(|s| s.1.wall_time_seconds).sum::<f64>()
            + started.elapsed().as_secs_f64(),
        // The shards' CPU time, when every shard measured it.
        cpu_seconds: shards
            .iter()
            .map(|s| s.1.cpu_time_seconds)
            .sum::<Option<f64>>(),
        units_computed: names.len(),
        units_shared_across: shards.iter().map(|s| s.1.units_shared_across).sum(),
        fingerprint: &first.fingerprint,
        extra: serde_json::json!({
            "merged_shards": shards.iter().map(|s| s.0.display().to_string()).collect::<Vec<_>>(),
            "shard_wall_time_seconds": shards.iter().map(|s| s.1.wall_time_seconds).collect::<Vec<_>>(),
        }),
    };
    let mut created = crate::report::outdir::Created::new();
    let dir = crate::report::outdir::ensure_dir(out, &sc.meta().name, &mut created)?;
    super::write_outcome(&dir, &sc, &outcome, &facts)?;
    Ok(Merged {
        scenario: sc.meta().name.clone(),
        shards: shards.len(),
        dir,
    })
}
