//! Shards of a reproduction: one task's share of every scenario (`--shard`),
//! and gathering the tasks' folders into one run's (`--merge`).

use super::*;

/// The shard folders of scenario `name` in `dirs`: every
/// `<dir>/<name>.shard-<i>-of-<n>` (sorted).
fn shard_dirs(name: &str, dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let prefix = format!("{name}.shard-");
    let mut found = Vec::new();
    for dir in dirs {
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("--merge {}: cannot read the folder", dir.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("--merge {}", dir.display()))?;
            let file = e.file_name();
            let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
                continue;
            };
            let shard = rest
                .split_once("-of-")
                .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)));
            if shard.is_some() && e.path().is_dir() {
                found.push(e.path());
            }
        }
    }
    found.sort();
    Ok(found)
}

/// `reproduce --merge`: scenario `name`'s results from the shards of a
/// `reproduce --shard` run, merged into its results folder under `--out`.
pub(super) fn gather_one(
    job: &Job,
    opts: &ReproduceOptions,
    scale: f64,
    log: &(dyn Fn(&str) + Sync),
) -> Entry {
    let Resolved {
        sc,
        paper,
        choice,
        run_opts,
        ..
    } = match resolve(job, opts, scale, log) {
        Ok(r) => r,
        Err(entry) => return *entry,
    };
    let name = job.name.as_str();
    let merged = (|| {
        let dirs = shard_dirs(name, &opts.merge)?;
        if dirs.is_empty() {
            bail!(
                "no shard folders `{name}.shard-<i>-of-<n>` in {}; did every `reproduce --shard` task finish?",
                opts.merge
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let want = experiment::fingerprint(&sc, &run_opts.data)?;
        let m = execute::merge_shards(&dirs, &opts.out_dir, Some(&want))?;
        log(&format!(
            "{name}: merged {} shards -> {}",
            m.shards,
            m.dir.display()
        ));
        Results::load(&m.dir)
    })();
    match merged {
        Ok(r) => Entry {
            name: name.to_string(),
            paper,
            choice: Some(choice),
            results: Ok(r),
            figure_error: None,
        },
        Err(e) => {
            log(&format!("{name}: failed: {e:#}"));
            failed_entry(name, paper, Some(choice), &e)
        }
    }
}

/// `reproduce --shard`: this task's shard of every selected scenario (see
/// [`shard_of`]), each into `<out>/<scenario>.shard-<i>-of-<n>/`. Every
/// scenario is attempted; the first failure is returned at the end.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_shard(
    task: Shard,
    jobs: &[Job],
    opts: &ReproduceOptions,
    scale: f64,
    pool: &rayon::ThreadPool,
    cache: &Caches,
    progress: &(dyn Fn(&str, u64) -> ProgressBar + Sync),
    log: &(dyn Fn(&str) + Sync),
) -> Result<Reproduction> {
    let started = Instant::now();
    let mut shards = Vec::new();
    let mut failed = Vec::new();
    for (position, job) in jobs.iter().enumerate() {
        let name = job.name.as_str();
        let r = match resolve(job, opts, scale, log) {
            Ok(r) => r,
            Err(entry) => {
                failed.push((name.to_string(), entry.error().unwrap_or_default()));
                continue;
            }
        };
        let units = experiment::unit_count(&r.sc);
        let Some(shard) = shard_of(task, position, units) else {
            log(&format!(
                "{name}: nothing for task {}/{} ({units} units)",
                task.index, task.count
            ));
            continue;
        };
        let bar = progress(name, units as u64);
        let exec = Execution {
            shard: Some(shard),
            resume: opts.resume,
            cancel: &crate::experiment::units::CANCEL,
            log: &|line| log(&format!("{name}: {line}")),
        };
        let done = pool.install(|| {
            let run_opts = cache.options(r.run_opts.clone());
            execute::execute(
                &r.sc,
                &r.origin,
                &r.text,
                &run_opts,
                &cache.data,
                &bar,
                &exec,
            )
        });
        bar.finish_and_clear();
        match done {
            Ok(execute::Executed::Shard {
                dir,
                units,
                seconds,
            }) => {
                log(&format!(
                    "{name}: shard {}/{}: {units} units in {seconds:.1} s -> {}",
                    shard.index,
                    shard.count,
                    dir.display()
                ));
                shards.push(dir);
            }
            Ok(execute::Executed::Results { dir, .. }) => shards.push(dir),
            Err(e) => {
                log(&format!("{name}: failed: {e:#}"));
                failed.push((name.to_string(), format!("{e:#}")));
            }
        }
    }
    Ok(Reproduction {
        report: None,
        shards,
        figures: Vec::new(),
        failed,
        wall_time_seconds: started.elapsed().as_secs_f64(),
    })
}
