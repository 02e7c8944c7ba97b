//! `reproduce --plan`: what the reproduction (or its robustness study) will
//! cost on this machine, without running a trial. Each scenario is planned
//! as `run --plan` plans it ([`experiment::plan`]: its unperturbed run is run
//! and a few of its trial iterations are timed), with the data this
//! reproduction would choose for it.

use std::fmt::Write as _;

use anyhow::Result;

use super::{Job, ReproduceOptions, resolve, worker_pool};
use crate::data::DataCache;
use crate::experiment;

/// One scenario's plan, as [`plan_text`] reports it.
struct Planned {
    name: String,
    units: usize,
    /// Serial seconds before the units: data and the unperturbed run(s).
    setup: f64,
    /// Single-thread seconds of all trial iterations (without rework).
    trials: f64,
    memory_bytes: u64,
}

/// Plans every job of the reproduction `opts` describes and returns the
/// table `reproduce --plan` prints. A scenario that cannot be planned (an
/// invalid variant, a missing file) is listed with the reason; the others
/// are still planned.
pub(crate) fn plan_text(
    jobs: &[Job],
    opts: &ReproduceOptions,
    scale: f64,
    log: &(dyn Fn(&str) + Sync),
) -> Result<String> {
    let pool = worker_pool(opts.threads, None)?;
    let cache = DataCache::new();
    let mut planned = Vec::new();
    let mut failed = Vec::new();
    for job in jobs {
        let outcome = match resolve(job, opts, scale, log) {
            Ok(r) => pool.install(|| experiment::plan(&r.sc, &r.run_opts, &cache)),
            Err(entry) => Err(anyhow::anyhow!(
                "{}",
                entry.results.err().unwrap_or_default()
            )),
        };
        match outcome {
            Ok(p) => {
                let planned_one = Planned {
                    name: job.name.clone(),
                    units: p.unit_costs.len(),
                    setup: p.baseline_seconds,
                    trials: p.trial_seconds,
                    memory_bytes: p.memory_bytes,
                };
                log(&format!(
                    "{}: planned, {:.0} s on {} thread(s)",
                    job.name,
                    planned_one.wall(opts.threads),
                    opts.threads
                ));
                planned.push(planned_one);
            }
            Err(e) => failed.push((job.name.clone(), format!("{e:#}"))),
        }
    }
    Ok(table(&planned, &failed, opts))
}

impl Planned {
    /// Estimated wall seconds alone on `threads` workers.
    fn wall(&self, threads: usize) -> f64 {
        self.setup + self.trials / threads.max(1) as f64
    }

    /// Estimated CPU seconds.
    fn cpu(&self) -> f64 {
        self.setup + self.trials
    }
}

/// The printed plan: one line per scenario, then the totals.
fn table(planned: &[Planned], failed: &[(String, String)], opts: &ReproduceOptions) -> String {
    let mut s = String::new();
    let width = planned
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(8)
        .max(8);
    let _ = writeln!(
        s,
        "{:width$}  {:>6}  {:>8}  {:>11}  {:>9}",
        "scenario", "units", "setup s", "trial CPU-s", "wall s"
    );
    for p in planned {
        let _ = writeln!(
            s,
            "{:width$}  {:>6}  {:>8.1}  {:>11.0}  {:>9.0}",
            p.name,
            p.units,
            p.setup,
            p.trials,
            p.wall(opts.threads),
        );
    }
    for (name, why) in failed {
        let _ = writeln!(s, "{name:width$}  cannot be planned: {why}");
    }
    let cpu: f64 = planned.iter().map(Planned::cpu).sum();
    let longest = planned
        .iter()
        .map(|p| p.wall(opts.threads))
        .fold(0.0, f64::max);
    // Scenarios run `at_once` at a time, each on `threads` workers: the
    // cores bound the whole, the longest scenario bounds it from below.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy = (opts.threads * opts.at_once.max(1)).min(cores).max(1);
    let wall = (cpu / busy as f64).max(longest);
    let _ = writeln!(
        s,
        "total: {} scenario(s), {:.0} CPU-s; estimated {:.0} s ({:.1} min) of wall time on {} thread(s), {} scenario(s) at once",
        planned.len(),
        cpu,
        wall,
        wall / 60.0,
        opts.threads,
        opts.at_once
    );
    let memory = planned.iter().map(|p| p.memory_bytes).max().unwrap_or(0);
    let _ = writeln!(
        s,
        "memory: {} MiB at the planner's peak (the reproduction keeps every dataset it loads, as the planner does)",
        memory >> 20
    );
    let _ = writeln!(
        s,
        "(each scenario is planned alone: trials that another scenario of the reproduction computes and shares are counted, rework iterations are not)"
    );
    s
}
