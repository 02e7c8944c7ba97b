//! `scarsim reproduce`: run every bundled scenario (on real data where its
//! files are in the data folder, on the synthetic stand-in otherwise), draw
//! every figure and the papers' multi-panel grids, and write `REPORT.md`:
//! per paper figure, the panels produced, the measured numbers the paper
//! states claims about next to the claims, the data used and the wall time.
//!
//! `--quick` runs `QUICK_TRIALS` trials per point and stand-ins at
//! `QUICK_SCALE` of the real datasets' size, so that the bundled scenarios
//! finish in a few minutes on two cores; without it every scenario runs with
//! its own trial count (100 in the paper) and full-size stand-ins.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use indicatif::ProgressBar;

use crate::data::{DataCache, DataOptions, DatasetName, presence};
use crate::engine::ForkMode;
use crate::experiment::execute::{self, Execution};
use crate::experiment::shared_outcomes::SharedOutcomes;
use crate::experiment::units::Shard;
use crate::experiment::{self, RunOptions};
use crate::report::figures::{self, Claim, Picture, Results, paper};
use crate::scenario::{self, Scenario, bundled};

mod plan;
mod report;
mod robustness;
mod shard;

use report::report_text;
use shard::{gather_one, run_shard};

/// The shard of a scenario that task `task` of a `reproduce --shard` run
/// executes: every scenario's units are split into `min(count, units)`
/// shards balanced by expected cost (the scenario kinds' costs are relative
/// within a scenario, not comparable across scenarios), and the tasks are
/// rotated by the scenario's position so that the heaviest shard of each
/// scenario (shard 0 of the balancing) falls on a different task. `None`:
/// this task has no share of the scenario (it has fewer units than tasks).
pub(crate) fn shard_of(task: Shard, position: usize, units: usize) -> Option<Shard> {
    let count = task.count.clamp(1, units.max(1));
    let index = (task.index + position) % task.count.max(1);
    (index < count).then_some(Shard { index, count })
}

/// The bundled scenarios `--only` selects (every one when it is empty), in
/// the bundled order; an unknown or repeated name is an error.
pub fn selected_names(only: &[String]) -> Result<Vec<&'static str>> {
    if let Some(n) = only.iter().find(|n| !bundled::names().any(|b| b == *n)) {
        bail!("--only {n}: no bundled scenario has that name (`scarsim list` shows them)");
    }
    if let Some(n) = first_repeat(only) {
        bail!("--only {n} is given twice");
    }
    Ok(bundled::names()
        .filter(|b| only.is_empty() || only.iter().any(|n| n == b))
        .collect())
}

/// The first element of `xs` that an earlier one equals: a command-line
/// list given an entry twice (`--only`, `--reading`).
pub(crate) fn first_repeat<T: PartialEq>(xs: &[T]) -> Option<&T> {
    xs.iter()
        .enumerate()
        .find(|&(i, x)| xs[..i].contains(x))
        .map(|(_, x)| x)
}

/// One scenario of a reproduction: a bundled scenario as written or, with
/// `--robustness`, one of its variants ([`robustness`]).
#[derive(Clone, Debug)]
pub(crate) struct Job {
    /// The scenario's name, which names its results folder.
    pub(crate) name: String,
    /// Where its text came from (`bundled:<name>`, with the variant's
    /// setting for a robustness variant), for messages and the manifest.
    origin: String,
    /// Its TOML text.
    text: String,
}

impl Job {
    /// Bundled scenario `name` as written.
    fn bundled(name: &'static str) -> Job {
        Job {
            name: name.to_string(),
            origin: format!("bundled:{name}"),
            text: bundled::find(name)
                .expect("selected_names gives bundled names")
                .to_string(),
        }
    }
}

/// Trials per point with `--quick`.
pub(crate) const QUICK_TRIALS: usize = 10;
/// Size of the stand-ins relative to the real datasets with `--quick`.
pub(crate) const QUICK_SCALE: f64 = 0.05;
/// File name of the report.
pub(crate) const REPORT_FILE: &str = "REPORT.md";

/// How to reproduce.
#[derive(Clone, Debug)]
pub(crate) struct ReproduceOptions {
    /// Fewer trials and smaller stand-ins.
    pub(crate) quick: bool,
    /// Folder with the real datasets (one subfolder per dataset).
    pub(crate) data_dir: PathBuf,
    /// Use the stand-ins even where real data is present.
    pub(crate) synthetic: bool,
    /// Output folder: a subfolder per scenario, the grids and `REPORT.md`.
    pub(crate) out_dir: PathBuf,
    /// Trials per point, overriding the scenarios' and `--quick`'s.
    pub(crate) trials: Option<usize>,
    /// Size of the stand-ins, overriding 1 (or [`QUICK_SCALE`] with `--quick`).
    pub(crate) scale: Option<f64>,
    /// Worker threads.
    pub(crate) threads: usize,
    /// Scenarios run at the same time, each in its own pool of `threads`
    /// workers (at least 1). Two keep both cores busy while one scenario is
    /// in a serial phase (a reference run, loading data, writing tables);
    /// results do not depend on it, and each scenario's CPU time counts its
    /// own pool's threads only.
    pub(crate) at_once: usize,
    /// Keep scenarios whose results folder is complete and was made from the
    /// same inputs (manifest fingerprint); finish interrupted ones from their
    /// journal; run the rest.
    pub(crate) resume: bool,
    /// Only these bundled scenarios (empty: every one).
    pub(crate) only: Vec<String>,
    /// Run only this shard of every scenario's units (see [`shard_of`]) and
    /// write shard folders instead of results, figures and a report.
    pub(crate) shard: Option<Shard>,
    /// Gather the shards of an earlier `--shard` run found in these folders
    /// instead of running the scenarios.
    pub(crate) merge: Vec<PathBuf>,
    /// Let a recovery trial take the outcome another scenario of this run
    /// computed from exactly the same inputs instead of running it again
    /// ([`experiment::shared_outcomes`]; the CSV files are the same either
    /// way). `false`: every scenario computes all its units
    /// (`--no-share-across`).
    pub(crate) share_across: bool,
    /// Run the robustness study ([`robustness`]) of the selected scenarios
    /// instead of the scenarios as written.
    pub(crate) robustness: bool,
    /// With `robustness`, only these readings of each panel (0: as bundled;
    /// `i`: its `i`-th `[[robustness]]` table); every reading when empty.
    pub(crate) readings: Vec<usize>,
}

impl ReproduceOptions {
    /// Trials per point: `--trials`, else [`QUICK_TRIALS`] with `--quick`,
    /// else the scenario's own.
    pub(crate) fn trials(&self) -> Option<usize> {
        self.trials
            .or(if self.quick { Some(QUICK_TRIALS) } else { None })
    }

    /// Size of the stand-ins: `--scale`, else [`QUICK_SCALE`] with `--quick`, else 1.
    pub(crate) fn scale(&self) -> f64 {
        self.scale
            .unwrap_or(if self.quick { QUICK_SCALE } else { 1.0 })
    }

    /// The command line that reproduces this run.
    pub(crate) fn command_line(&self) -> String {
        let mut s = String::from("scarsim reproduce");
        if self.robustness {
            s.push_str(" --robustness");
            for r in &self.readings {
                write!(s, " --reading {r}").expect("write to String");
            }
        }
        if self.quick {
            s.push_str(" --quick");
        }
        if let Some(t) = self.trials {
            write!(s, " --trials {t}").expect("write to String");
        }
        if self.synthetic {
            s.push_str(" --synthetic");
        }
        if let Some(f) = self.scale {
            write!(s, " --scale {f}").expect("write to String");
        }
        if self.resume {
            s.push_str(" --resume");
        }
        for name in &self.only {
            write!(s, " --only {name}").expect("write to String");
        }
        if !self.share_across {
            s.push_str(" --no-share-across");
        }
        write!(
            s,
            " --data-dir {} --out {}",
            self.data_dir.display(),
            self.out_dir.display()
        )
        .expect("write to String");
        s
    }
}

/// The datasets a scenario trains on.
pub fn datasets_of(sc: &Scenario) -> Vec<DatasetName> {
    crate::experiment::of(sc).datasets()
}

/// Real data or a stand-in, and why.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum DataChoice {
    /// The scenario trains on no dataset (a runtime-only or quadratic scenario).
    NoData,
    /// Every dataset's files are in the data folder.
    Real,
    /// Some are missing (listed); the stand-in runs at this scale.
    StandIn {
        /// Size relative to the real dataset.
        scale: f64,
        /// The files that were not found.
        missing: Vec<PathBuf>,
    },
}

/// Real data if every dataset of the scenario is present under `data_dir`.
pub(crate) fn choose_data(datasets: &[DatasetName], data_dir: &Path, scale: f64) -> DataChoice {
    let missing: Vec<PathBuf> = datasets
        .iter()
        .flat_map(|d| presence::missing_files(*d, data_dir))
        .collect();
    if missing.is_empty() {
        DataChoice::Real
    } else {
        DataChoice::StandIn { scale, missing }
    }
}

/// What the scenarios of one reproduction share: loaded datasets and, unless
/// `--no-share-across`, the outcomes of recovery trials.
struct Caches {
    data: DataCache,
    outcomes: Option<Arc<SharedOutcomes>>,
}

impl Caches {
    /// `run_opts` with this reproduction's shared outcomes, through a handle
    /// of the scenario's own ([`SharedOutcomes::chain`]): the unperturbed
    /// runs it pins go when the scenario's options do.
    fn options(&self, run_opts: RunOptions) -> RunOptions {
        RunOptions {
            shared_outcomes: self.outcomes.as_ref().map(|o| Arc::new(o.chain())),
            ..run_opts
        }
    }
}

/// One bundled scenario's fate.
struct Entry {
    name: String,
    paper: Option<String>,
    choice: Option<DataChoice>,
    results: Result<Results, String>,
    figure_error: Option<String>,
}

impl Entry {
    /// The error that made this scenario fail, if any.
    fn error(&self) -> Option<String> {
        match (&self.results, &self.figure_error) {
            (Err(e), _) => Some(e.clone()),
            (Ok(_), Some(f)) => Some(format!("the run finished but its figure failed: {f}")),
            (Ok(_), None) => None,
        }
    }
}

/// The scenarios among `entries` that failed, with their errors.
fn failures(entries: &[Entry]) -> Vec<(String, String)> {
    entries
        .iter()
        .filter_map(|e| e.error().map(|m| (e.name.clone(), m)))
        .collect()
}

/// What `reproduce` did.
pub(crate) struct Reproduction {
    /// Path of `REPORT.md` (none for a `--shard` run).
    pub(crate) report: Option<PathBuf>,
    /// The shard folders a `--shard` run wrote.
    pub(crate) shards: Vec<PathBuf>,
    /// Figure files written (per scenario and grids).
    pub(crate) figures: Vec<PathBuf>,
    /// Scenarios that failed, with their errors.
    pub(crate) failed: Vec<(String, String)>,
    /// Seconds from start to report.
    pub(crate) wall_time_seconds: f64,
}

/// Runs every bundled scenario, draws every figure and writes `REPORT.md`.
/// A scenario that fails is reported (in the report and in the result) and
/// the others still run. `progress(name, units)` makes a progress bar for a
/// scenario; `log` receives one line per step.
pub(crate) fn reproduce(
    opts: &ReproduceOptions,
    progress: &(dyn Fn(&str, u64) -> ProgressBar + Sync),
    log: &(dyn Fn(&str) + Sync),
) -> Result<Reproduction> {
    let scale = checked_scale(opts)?;
    let started = Instant::now();
    if opts.resume {
        let stale = crate::report::outdir::remove_stale_temporaries(&opts.out_dir)?;
        if stale > 0 {
            log(&format!(
                "removed {stale} temporary file(s) left in {} by a process that stopped while writing",
                opts.out_dir.display()
            ));
        }
    }
    let cache = Caches {
        data: DataCache::new(),
        outcomes: opts.share_across.then(|| Arc::new(SharedOutcomes::new())),
    };
    let (jobs, study) = jobs(opts, log)?;
    if let Some(task) = opts.shard {
        let pool = worker_pool(opts.threads, None)?;
        return run_shard(task, &jobs, opts, scale, &pool, &cache, progress, log);
    }
    let (entries, figure_files) = if opts.merge.is_empty() {
        let done = run_all(&jobs, opts, scale, &cache, progress, log)?;
        // Not in REPORT.md, which a merge of shards must write the same.
        let taken = cache.outcomes.as_ref().map_or(0, |o| o.long_runs_taken());
        if taken > 0 {
            log(&format!(
                "long-run optima shared: {taken} scenario(s) took x* = x(N) from another scenario \
                 of this run (same model, data, seed, data order and N)"
            ));
        }
        let taken = cache.outcomes.as_ref().map_or(0, |o| o.baselines_taken());
        if taken > 0 {
            log(&format!(
                "unperturbed runs shared: {taken} scenario(s) took their unperturbed runs from \
                 another scenario of this run (same model, data, seed, convergence test and data \
                 orders)"
            ));
        }
        done
    } else {
        let done: Vec<(Entry, Vec<PathBuf>)> = jobs
            .iter()
            .map(|job| with_figures(gather_one(job, opts, scale, log), log))
            .collect();
        done.into_iter().unzip()
    };
    if let Some(study) = &study {
        return study.report(opts, &entries, figure_files, started, log);
    }
    let mut figure_files: Vec<PathBuf> = figure_files.into_iter().flatten().collect();
    let ok: Vec<Results> = entries
        .iter()
        .filter_map(|e| e.results.as_ref().ok().cloned())
        .collect();
    let mut grids = Vec::new();
    for (key, members) in figures::paper_groups(&ok) {
        let rs: Vec<&Results> = members.iter().map(|&i| &ok[i]).collect();
        let stem = paper::stem_of(&key);
        let grid = figures::grid(&rs, None)?;
        let files = figures::write_picture(&opts.out_dir, &stem, Picture::Grid(&grid))
            .with_context(|| format!("drawing the grid of {key}"))?;
        log(&format!("{}: {}", grid.title, files[1].display()));
        figure_files.extend(files);
        grids.push((key, stem, members));
    }
    let seconds = started.elapsed().as_secs_f64();
    let text = report_text(opts, &entries, &ok, &grids, seconds)?;
    crate::report::outdir::ensure_root(&opts.out_dir, &mut crate::report::outdir::Created::new())?;
    let report = crate::report::outdir::file(&opts.out_dir, REPORT_FILE)?;
    crate::report::outdir::write_file(&report, text.as_bytes())?;
    Ok(Reproduction {
        report: Some(report),
        shards: Vec::new(),
        figures: figure_files,
        failed: failures(&entries),
        wall_time_seconds: seconds,
    })
}

/// Checks the options every reproduction shares; returns the stand-ins' scale.
fn checked_scale(opts: &ReproduceOptions) -> Result<f64> {
    experiment::budget::check_threads(Some(opts.threads))?;
    let scale = opts.scale();
    if !(scale > 0.0 && scale <= 10.0) {
        bail!("--scale {scale} is outside (0, 10]");
    }
    if opts.trials == Some(0) {
        bail!("--trials must be at least 1");
    }
    Ok(scale)
}

/// The scenarios a reproduction runs: the selected bundled scenarios, or
/// with `--robustness` the variants of those that check a SCAR claim (and
/// the study that reports them).
fn jobs(
    opts: &ReproduceOptions,
    log: &(dyn Fn(&str) + Sync),
) -> Result<(Vec<Job>, Option<robustness::Study>)> {
    let names = selected_names(&opts.only)?;
    if !opts.robustness {
        return Ok((names.iter().map(|n| Job::bundled(n)).collect(), None));
    }
    let study = robustness::Study::of_readings(&names, &opts.readings)?;
    for name in &study.skipped {
        log(&format!(
            "{name}: not a panel of SCAR Figure 6 or 7; --robustness leaves it out"
        ));
    }
    Ok((study.jobs(), Some(study)))
}

/// `reproduce --plan`: the cost of every scenario the reproduction would
/// run (see [`plan`]), as a table; nothing is run or written.
pub(crate) fn plan(opts: &ReproduceOptions, log: &(dyn Fn(&str) + Sync)) -> Result<String> {
    let scale = checked_scale(opts)?;
    let (jobs, _) = jobs(opts, log)?;
    plan::plan_text(&jobs, opts, scale, log)
}

/// A pool of `threads` workers; with `clock`, each worker's CPU clock is
/// added to it (see [`experiment::cpu`]).
fn worker_pool(
    threads: usize,
    clock: Option<Arc<experiment::cpu::PoolClock>>,
) -> Result<rayon::ThreadPool> {
    let mut builder = rayon::ThreadPoolBuilder::new().num_threads(threads);
    if let Some(clock) = clock {
        builder = builder.start_handler(move |_| clock.register_current_thread());
    }
    builder
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start {threads} worker threads: {e}"))
}

/// Draws `entry`'s figure (noting in it why one could not be drawn).
fn with_figures(mut entry: Entry, log: &(dyn Fn(&str) + Sync)) -> (Entry, Vec<PathBuf>) {
    let mut files = Vec::new();
    if let Ok(r) = &entry.results {
        match figures::draw_loaded(r) {
            Ok(f) => files = f,
            Err(e) => {
                log(&format!("{}: figure not drawn: {e:#}", entry.name));
                entry.figure_error = Some(format!("{e:#}"));
            }
        }
    }
    (entry, files)
}

/// `jobs` in the chains [`run_all`] runs them in: each chain is run one job
/// after another by one pool, in the order of its first job, so that a
/// later member finds what an earlier one computed (two scenarios running
/// at the same time would each compute it). A chain holds the recovery
/// scenarios that share work:
/// - with a per-trial data order, the same unperturbed runs (the same
///   training spec, seed, trial count and convergence test as written: a
///   partial panel and its priority panel), which the chain keeps alive
///   ([`SharedOutcomes::chain`]) for the next member to take;
/// - with a shared order, the same scenario but for its names and how the
///   model is cut into blocks (the CNN's by-layer and by-shard panels),
///   whose full-recovery trials are the same.
///
/// Every other job is a chain of its own. The grouping only decides the
/// order; what is shared is decided by the exact keys
/// ([`experiment::shared_outcomes`]).
fn chains(jobs: &[Job], opts: &ReproduceOptions) -> Vec<Vec<usize>> {
    let partner = |job: &Job| {
        let Scenario::Recovery(mut r) = scenario::parse(&job.text, &job.origin).ok()? else {
            return None;
        };
        r.meta.trials = opts.trials().unwrap_or(r.meta.trials);
        r.model = r.model.training_spec();
        Some(match r.data_order {
            scenario::DataOrderMode::PerTrial => format!(
                "runs|{:?}|{}|{}|{:?}|{:?}",
                r.model, r.meta.seed, r.meta.trials, r.convergence, r.synthetic_criterion,
            ),
            scenario::DataOrderMode::Shared => {
                r.meta.name.clear();
                r.meta.title.clear();
                r.meta.paper = None;
                r.alternatives.clear();
                format!("blocks|{r:?}")
            }
        })
    };
    let mut chains: Vec<(Option<String>, Vec<usize>)> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let key = partner(job);
        match chains.iter_mut().find(|(k, _)| key.is_some() && *k == key) {
            Some((_, members)) => members.push(i),
            None => chains.push((key, vec![i])),
        }
    }
    chains.into_iter().map(|(_, members)| members).collect()
}

/// Runs `jobs` ([`ReproduceOptions::at_once`] at a time, each in its own
/// pool, in [`chains`]) and draws their figures; the entries come back in
/// `jobs`' order.
fn run_all(
    jobs: &[Job],
    opts: &ReproduceOptions,
    scale: f64,
    cache: &Caches,
    progress: &(dyn Fn(&str, u64) -> ProgressBar + Sync),
    log: &(dyn Fn(&str) + Sync),
) -> Result<(Vec<Entry>, Vec<Vec<PathBuf>>)> {
    let chains = chains(jobs, opts);
    let lanes = opts.at_once.clamp(1, chains.len().max(1));
    let pools = (0..lanes)
        .map(|_| worker_pool(opts.threads, Some(experiment::cpu::PoolClock::new())))
        .collect::<Result<Vec<_>>>()?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    type Drawn = (Entry, Vec<PathBuf>);
    let done: std::sync::Mutex<Vec<Option<Drawn>>> =
        std::sync::Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for pool in &pools {
            let (next, done, chains) = (&next, &done, &chains);
            scope.spawn(move || {
                loop {
                    let c = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(chain) = chains.get(c) else { break };
                    // Dropped after the chain: its pinned unperturbed runs go.
                    let outcomes = cache.outcomes.as_ref().map(|o| Arc::new(o.chain()));
                    for &i in chain {
                        let entry =
                            run_one(&jobs[i], opts, scale, pool, cache, &outcomes, progress, log);
                        let drawn = with_figures(entry, log);
                        done.lock().expect("entries")[i] = Some(drawn);
                    }
                }
            });
        }
    });
    let done = done.into_inner().expect("entries");
    Ok(done
        .into_iter()
        .map(|d| d.expect("every scenario ran"))
        .unzip())
}

/// A bundled scenario loaded and resolved for this reproduction.
struct Resolved {
    sc: Scenario,
    origin: scenario::Origin,
    text: String,
    paper: Option<String>,
    choice: DataChoice,
    run_opts: RunOptions,
}

/// Loads `job`'s scenario with the reproduction's trials and picks its data
/// (real where present, else the stand-in); or the entry that reports why
/// it cannot run.
fn resolve(
    job: &Job,
    opts: &ReproduceOptions,
    scale: f64,
    log: &(dyn Fn(&str) + Sync),
) -> Result<Resolved, Box<Entry>> {
    let name = job.name.as_str();
    let failed = |paper, choice, e: anyhow::Error| Entry {
        name: name.to_string(),
        paper,
        choice,
        results: Err(format!("{e:#}")),
        figure_error: None,
    };
    let origin = scenario::Origin {
        label: job.origin.clone(),
        path: None,
    };
    let parsed = scenario::parse(&job.text, &origin.label).map(|sc| (sc, origin, job.text.clone()));
    let (mut sc, origin, text) = match parsed {
        Ok(x) => x,
        Err(e) => {
            log(&format!("{name}: invalid: {e:#}"));
            return Err(Box::new(failed(None, None, e)));
        }
    };
    let paper = sc.meta().paper.clone();
    if let Err(e) = sc
        .override_trials_and_seed(opts.trials(), None)
        .and_then(|()| experiment::budget::check(&sc).map(|_| ()))
    {
        return Err(Box::new(failed(paper, None, e)));
    }
    let datasets = datasets_of(&sc);
    let choice = if datasets.is_empty() {
        DataChoice::NoData
    } else if opts.synthetic {
        DataChoice::StandIn {
            scale,
            missing: Vec::new(),
        }
    } else {
        choose_data(&datasets, &opts.data_dir, scale)
    };
    match &choice {
        DataChoice::NoData => log(&format!("{name}: needs no dataset")),
        DataChoice::Real => log(&format!(
            "{name}: real data from {}",
            opts.data_dir.display()
        )),
        DataChoice::StandIn { scale, missing } if missing.is_empty() => log(&format!(
            "{name}: synthetic stand-in at scale {scale} (--synthetic)"
        )),
        DataChoice::StandIn { scale, missing } => log(&format!(
            "{name}: synthetic stand-in at scale {scale} ({} not found)",
            missing
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
    let stand_in = matches!(choice, DataChoice::StandIn { .. });
    let run_opts = RunOptions {
        data: DataOptions {
            data_dir: opts.data_dir.clone(),
            synthetic: stand_in,
            synthetic_scale: if stand_in { scale } else { 1.0 },
        },
        out_dir: opts.out_dir.clone(),
        threads: opts.threads,
        fork_mode: ForkMode::Fork,
        certify_metric: true,
        share_identical_trials: true,
        shared_outcomes: None,
    };
    Ok(Resolved {
        sc,
        origin,
        text,
        paper,
        choice,
        run_opts,
    })
}

fn failed_entry(
    name: &str,
    paper: Option<String>,
    choice: Option<DataChoice>,
    e: &anyhow::Error,
) -> Entry {
    Entry {
        name: name.to_string(),
        paper,
        choice,
        results: Err(format!("{e:#}")),
        figure_error: None,
    }
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    job: &Job,
    opts: &ReproduceOptions,
    scale: f64,
    pool: &rayon::ThreadPool,
    cache: &Caches,
    outcomes: &Option<Arc<SharedOutcomes>>,
    progress: &(dyn Fn(&str, u64) -> ProgressBar + Sync),
    log: &(dyn Fn(&str) + Sync),
) -> Entry {
    let Resolved {
        sc,
        origin,
        text,
        paper,
        choice,
        run_opts,
    } = match resolve(job, opts, scale, log) {
        Ok(r) => r,
        Err(entry) => return *entry,
    };
    let name = job.name.as_str();
    let units = experiment::unit_count(&sc) as u64;
    if opts.resume {
        match kept_results(&sc, &run_opts) {
            Ok(Some(r)) => {
                log(&format!(
                    "{name}: kept the finished results in {} (same inputs; --resume)",
                    r.dir.display()
                ));
                return Entry {
                    name: name.to_string(),
                    paper,
                    choice: Some(choice),
                    results: Ok(r),
                    figure_error: None,
                };
            }
            Ok(None) => {}
            Err(e) => log(&format!("{name}: running again: {e:#}")),
        }
    }
    let bar = progress(name, units);
    let outcome = pool.install(|| {
        experiment::run_and_write(
            &sc,
            &origin,
            &text,
            &RunOptions {
                shared_outcomes: outcomes.clone(),
                ..run_opts.clone()
            },
            &cache.data,
            &bar,
            opts.resume,
        )
    });
    bar.finish_and_clear();
    let results = outcome.and_then(|dir| Results::load(&dir));
    match results {
        Ok(r) => {
            let shared = match r.units_from_other_scenarios() {
                Some(n) if n > 0 => format!(" ({n} taken from other scenarios)"),
                _ => String::new(),
            };
            log(&format!(
                "{name}: {units} trials{shared} in {:.1} s -> {}",
                r.wall_time_seconds().unwrap_or(f64::NAN),
                r.dir.display()
            ));
            Entry {
                name: name.to_string(),
                paper,
                choice: Some(choice),
                results: Ok(r),
                figure_error: None,
            }
        }
        Err(e) => {
            log(&format!("{name}: failed: {e:#}"));
            failed_entry(name, paper, Some(choice), &e)
        }
    }
}

/// The finished results of `sc` in its folder under `run_opts.out_dir`, if
/// they were made from the same inputs: the manifest's fingerprint (program
/// version, resolved scenario with its trial count and seed, real data or
/// stand-in and scale) equals this run's, and the folder is finished (its
/// manifest lists every file with a matching checksum, see
/// [`crate::report::manifest::read_finished`]). `None` when there is no
/// manifest; an error says why a folder that has one cannot be kept.
fn kept_results(sc: &Scenario, run_opts: &RunOptions) -> Result<Option<Results>> {
    let dir = crate::report::outdir::join(&run_opts.out_dir, &sc.meta().name)?;
    if std::fs::symlink_metadata(dir.join(crate::report::manifest::MANIFEST_FILE)).is_err() {
        return Ok(None);
    }
    crate::report::outdir::remove_stale_temporaries(&dir)?;
    let r = Results::load(&dir)?;
    let want = experiment::fingerprint(sc, &run_opts.data)?;
    if r.manifest["fingerprint"].as_str() != Some(want.as_str()) {
        bail!(
            "{} was made from other inputs (program version, scenario, trials, seed or data differ)",
            dir.display()
        );
    }
    Ok(Some(r))
}

#[cfg(test)]
mod tests;
