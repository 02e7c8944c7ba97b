//! The subcommands: resolve raw arguments into options, then call the library.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{BenchArgs, Cli, Command, DataArgs, PlotArgs, ReproduceArgs, RunArgs};
use crate::data::{DataCache, DataOptions};
use crate::engine::ForkMode;
use crate::experiment::execute::{self, Executed, Execution};
use crate::experiment::units::{self, CANCEL, Shard};
use crate::experiment::{self, RunOptions, budget};
use crate::model::{DataUsed, Model, ModelVisitor, build_and_visit};
use crate::report::{Table, figures};
use crate::reproduce::{self, ReproduceOptions};
use crate::scenario::{self, Scenario, bundled};

/// Runs the subcommand `cli` asks for.
pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(args) => run(args),
        Command::List => list(),
        Command::Validate {
            scenarios,
            resolved,
        } => validate(&scenarios, resolved),
        Command::Merge { shards, out } => merge(&shards, &out),
        Command::Plot(args) => plot(args),
        Command::Reproduce(args) => reproduce(args),
        Command::Bench(args) => bench(args),
        Command::Baseline { scenario, data } => baseline(&scenario, &data),
        Command::Completions { shell } => completions(shell),
        Command::Man { subcommand } => man(subcommand.as_deref()),
    }
}

fn data_options(args: &DataArgs) -> Result<DataOptions> {
    if !(args.scale > 0.0 && args.scale <= 10.0) {
        bail!("--scale {} is outside (0, 10]", args.scale);
    }
    if args.scale != 1.0 && !args.synthetic {
        bail!("--scale only applies to the synthetic stand-ins; add --synthetic");
    }
    Ok(DataOptions {
        data_dir: args.data_dir.clone(),
        synthetic: args.synthetic,
        synthetic_scale: args.scale,
    })
}

fn install_ctrl_c() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            if CANCEL.swap(true, Ordering::SeqCst) {
                eprintln!("\nstopping now");
                std::process::exit(130);
            }
            eprintln!(
                "\nstopping: finished units are kept in the journal (Ctrl-C again to quit at once)"
            );
        });
    });
}

fn run(args: RunArgs) -> Result<()> {
    let threads = budget::check_threads(args.threads)?;
    let shard = args.shard.as_deref().map(Shard::parse).transpose()?;
    let opts = RunOptions {
        data: data_options(&args.data)?,
        out_dir: args.out.clone(),
        threads,
        fork_mode: if args.rerun {
            ForkMode::Rerun
        } else {
            ForkMode::Fork
        },
        share_identical_trials: !args.no_sharing,
        shared_outcomes: None,
        certify_metric: !args.exact_metric,
    };
    // Validate everything before running anything.
    let mut loaded = Vec::new();
    for arg in &args.scenarios {
        let (mut sc, origin, text) = scenario::load(arg)?;
        sc.override_trials_and_seed(args.trials, args.seed)?;
        let f = budget::check(&sc)?;
        if let Some(s) = shard {
            s.check_units(f.units)
                .with_context(|| format!("scenario `{}`", sc.meta().name))?;
        }
        if let Some((_, o, _)) =
            loaded
                .iter()
                .find(|(s, _, _): &&(Scenario, scenario::Origin, String)| {
                    s.meta().name == sc.meta().name
                })
        {
            bail!(
                "scenarios {} and {} are both named `{}` and would write the same folder",
                o.label,
                origin.label,
                sc.meta().name
            );
        }
        loaded.push((sc, origin, text));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start {threads} worker threads: {e}"))?;
    let cache = DataCache::new();
    if args.plan {
        for (sc, _, _) in &loaded {
            pool.install(|| plan(sc, &opts, &cache, shard))?;
        }
        return Ok(());
    }
    install_ctrl_c();
    for (sc, origin, text) in &loaded {
        let name = &sc.meta().name;
        let units = experiment::unit_count(sc) as u64;
        let bar = progress_bar(units, args.quiet, name);
        let log = |line: &str| {
            if !args.quiet {
                bar.suspend(|| eprintln!("{name}: {line}"));
            }
        };
        let exec = Execution {
            shard,
            resume: args.resume,
            cancel: &CANCEL,
            log: &log,
        };
        let done = pool.install(|| execute::execute(sc, origin, text, &opts, &cache, &bar, &exec));
        bar.finish_and_clear();
        match done? {
            Executed::Shard {
                dir,
                units,
                seconds,
            } => {
                if !args.quiet {
                    let s = shard.expect("a shard run");
                    eprintln!(
                        "{name}: shard {}/{}: {units} units in {seconds:.1} s -> {}",
                        s.index,
                        s.count,
                        dir.display()
                    );
                }
            }
            Executed::Results { dir, seconds } => {
                if !args.quiet {
                    eprintln!(
                        "{name}: {units} trials in {seconds:.1} s -> {}",
                        dir.display()
                    );
                    print_summary(&dir.join("summary.csv"))?;
                }
                if !args.no_plot {
                    let files = figures::draw_results(&dir).with_context(|| {
                        format!(
                            "the results are in {}, but drawing their figure failed",
                            dir.display()
                        )
                    })?;
                    if !args.quiet {
                        eprintln!("  figure: {}", files[1].display());
                    }
                }
            }
        }
    }
    Ok(())
}

fn plot(args: PlotArgs) -> Result<()> {
    let mut dirs = Vec::new();
    for d in &args.dirs {
        dirs.extend(figures::expand_results_dirs(d)?);
    }
    let mut loaded = Vec::new();
    for d in &dirs {
        let r = figures::Results::load(d)?;
        for f in figures::draw_loaded(&r)? {
            println!("{}", f.display());
        }
        loaded.push(r);
    }
    if let Some(name) = &args.grid {
        crate::report::outdir::check_name(&format!("{name}.svg"), "--grid name")
            .with_context(|| format!("--grid {name:?}"))?;
        let out = match &args.out {
            Some(o) => o.clone(),
            None => dirs[0]
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default(),
        };
        let rs: Vec<&figures::Results> = loaded.iter().collect();
        let grid = figures::grid(&rs, None)?;
        for f in figures::write_picture(&out, name, figures::Picture::Grid(&grid))? {
            println!("{}", f.display());
        }
    }
    Ok(())
}

fn reproduce(args: ReproduceArgs) -> Result<()> {
    let threads = budget::check_threads(args.threads)?;
    let shard = args.shard.as_deref().map(Shard::parse).transpose()?;
    let opts = ReproduceOptions {
        quick: args.quick,
        data_dir: args.data_dir,
        synthetic: args.synthetic,
        out_dir: args.out,
        trials: args.trials,
        scale: args.scale,
        threads,
        at_once: args
            .scenarios_at_once
            .map_or(if threads >= 2 { 2 } else { 1 }, |n| n as usize),
        resume: args.resume,
        only: args.only,
        shard,
        merge: args.merge,
        share_across: !args.no_share_across,
        robustness: args.robustness,
        readings: args.reading,
    };
    let quiet = args.quiet;
    // Scenarios may run two at a time: their bars share the terminal.
    let bars = indicatif::MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let bar = |name: &str, units: u64| {
        let b = progress_bar(units, quiet, name);
        if quiet { b } else { bars.add(b) }
    };
    let log = |line: &str| {
        if !quiet {
            bars.suspend(|| eprintln!("{line}"));
        }
    };
    if args.plan {
        print!("{}", reproduce::plan(&opts, &log)?);
        return Ok(());
    }
    install_ctrl_c();
    let done = reproduce::reproduce(&opts, &bar, &log)?;
    match &done.report {
        Some(report) => println!(
            "{} ({} figure files, {:.1} s)",
            report.display(),
            done.figures.len(),
            done.wall_time_seconds
        ),
        None => {
            for dir in &done.shards {
                println!("{}", dir.display());
            }
        }
    }
    if !done.failed.is_empty() {
        bail!(
            "{} of the bundled scenarios failed ({}){}",
            done.failed.len(),
            done.failed
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            match &done.report {
                Some(r) => format!("; see {}", r.display()),
                None => format!(
                    ": {}",
                    done.failed
                        .iter()
                        .map(|(n, e)| format!("{n}: {e}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            }
        );
    }
    Ok(())
}

fn merge(dirs: &[std::path::PathBuf], out: &std::path::Path) -> Result<()> {
    let merged = execute::merge_shards(dirs, out, None)?;
    eprintln!(
        "{}: merged {} shards -> {}",
        merged.scenario,
        merged.shards,
        merged.dir.display()
    );
    Ok(())
}

/// `run --plan`: how many units, and what they will cost on this machine.
fn plan(sc: &Scenario, opts: &RunOptions, cache: &DataCache, shard: Option<Shard>) -> Result<()> {
    let footprint = budget::check(sc)?;
    if let Some(s) = shard {
        s.check_units(footprint.units)?;
    }
    let names = experiment::unit_names(sc);
    let p = experiment::plan(sc, opts, cache)?;
    let mine = match shard {
        Some(s) => units::assign(&p.unit_costs, s).len(),
        None => names.len(),
    };
    let share = if names.is_empty() {
        0.0
    } else {
        let all: f64 = p.unit_costs.iter().sum();
        let own: f64 = match shard {
            Some(s) => units::assign(&p.unit_costs, s)
                .iter()
                .map(|&u| p.unit_costs[u])
                .sum(),
            None => all,
        };
        own / all.max(f64::MIN_POSITIVE)
    };
    let seconds = p.baseline_seconds + p.trial_seconds * share / opts.threads as f64;
    println!("scenario {}", sc.meta().name);
    println!("  units: {} ({} in this run)", names.len(), mine);
    if p.shared_units > 0 {
        println!(
            "  identical trials: {} units take another unit's outcome instead of running (--no-sharing runs them)",
            p.shared_units
        );
    }
    if p.baseline_iterations > 0 {
        println!(
            "  unperturbed run: {} iterations in {:.1} s",
            p.baseline_iterations, p.baseline_seconds
        );
    } else {
        println!(
            "  one-time setup (data; for perturbation runs the unperturbed run and x*): {:.1} s",
            p.baseline_seconds
        );
    }
    println!(
        "  trial iterations (failure to the unperturbed convergence point, before rework): {:.0}",
        p.trial_iterations * share
    );
    println!(
        "  estimated time on {} thread(s): {:.0} s ({:.1} min), plus the rework iterations",
        opts.threads,
        seconds,
        seconds / 60.0
    );
    let total = p.memory_bytes.saturating_add(footprint.bytes);
    println!(
        "  estimated memory: {} (model, data and unperturbed run as measured: {}; records and tables: {}){}",
        budget::human_bytes(total),
        budget::human_bytes(p.memory_bytes),
        budget::human_bytes(footprint.bytes),
        budget::machine_memory().map_or_else(String::new, |m| format!(
            "; this machine has {}",
            budget::human_bytes(m)
        ))
    );
    if let Some(m) = budget::machine_memory()
        && total > m
    {
        bail!(
            "scenario `{}` needs about {} of memory, more than the {} this machine has",
            sc.meta().name,
            budget::human_bytes(total),
            budget::human_bytes(m)
        );
    }
    Ok(())
}
fn progress_bar(len: u64, quiet: bool, name: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} trials, {elapsed} elapsed, eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(name.to_string());
    bar
}

/// Prints the mean and 95% CI of every (series, x) row of a summary.
fn print_summary(path: &std::path::Path) -> Result<()> {
    let t = Table::read(path)?;
    let col = |n: &str| t.column(n);
    let (Some(series), Some(x), Some(mean), Some(lo), Some(hi), Some(metric)) = (
        col("series"),
        col("x"),
        col("mean"),
        col("ci95_low"),
        col("ci95_high"),
        col("metric"),
    ) else {
        return Ok(());
    };
    let xname = col("x_name")
        .and_then(|c| t.rows.first().map(|r| r[c].clone()))
        .unwrap_or_default();
    // Protocol scenarios sweep P as well: show it when there is a `workers` column.
    let workers = col("workers");
    for r in &t.rows {
        let p = workers.map_or_else(String::new, |c| format!(" P={:<3}", r[c]));
        println!(
            "  {:<14}{p} {}={:<8} {} = {:>8} [{}, {}]",
            r[series],
            xname,
            r[x],
            r[metric],
            short(&r[mean]),
            short(&r[lo]),
            short(&r[hi])
        );
    }
    Ok(())
}

fn short(v: &str) -> String {
    v.parse::<f64>().map_or_else(
        |_| v.to_string(),
        // Losses and times below 1 need more than two decimals.
        |f| {
            if f.abs() < 1.0 {
                format!("{f:.4}")
            } else {
                format!("{f:.2}")
            }
        },
    )
}

/// A bundled scenario's `(paper panel, title)`, or why it does not parse.
type ListRow = std::result::Result<(String, String), String>;

fn list() -> Result<()> {
    let rows: Vec<(&str, ListRow)> = bundled::names()
        .map(|name| {
            let text = bundled::find(name).expect("listed");
            let row = scenario::parse(text, &format!("bundled:{name}"))
                .map(|sc| {
                    let m = sc.meta();
                    (
                        m.paper.clone().unwrap_or_else(|| "-".into()),
                        m.title.clone(),
                    )
                })
                .map_err(|e| e.to_string());
            (name, row)
        })
        .collect();
    let name_width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(8);
    let paper_width = rows
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().map(|(p, _)| p.chars().count()))
        .max()
        .unwrap_or(5);
    println!(
        "{:<name_width$}  {:<paper_width$}  title",
        "scenario", "paper"
    );
    for (name, row) in &rows {
        match row {
            Ok((paper, title)) => println!("{name:<name_width$}  {paper:<paper_width$}  {title}"),
            Err(e) => println!("{name:<name_width$}  INVALID: {e}"),
        }
    }
    println!(
        "\nkinds: {}",
        scenario::KINDS
            .iter()
            .map(|k| k.0)
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

fn validate(args: &[String], resolved: bool) -> Result<()> {
    let mut failed = 0;
    for arg in args {
        match scenario::load(arg).and_then(|(sc, origin, _)| {
            let f = budget::check(&sc)?;
            Ok((sc, origin, f))
        }) {
            Ok((sc, origin, f)) => {
                let trials = crate::experiment::of(&sc).points_and_trials().1;
                println!(
                    "ok: {} ({}: {} points x {} trials = {} units; records and tables about {} in memory, \
                     plus the model and its data)",
                    origin.label,
                    sc.meta().name,
                    f.points,
                    trials,
                    f.units,
                    budget::human_bytes(f.bytes)
                );
                if resolved {
                    let mut lines = Vec::new();
                    flatten("", &serde_json::to_value(&sc)?, &mut lines);
                    for l in lines {
                        println!("  {l}");
                    }
                }
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} scenarios are invalid", args.len());
    }
    Ok(())
}

/// `validate --resolved`: one `path = value` line per leaf of `v` (lists
/// of scalars on one line, lists of tables as `path[i].field`).
fn flatten(path: &str, v: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                flatten(&join(k), x, out);
            }
        }
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {
            for (i, x) in a.iter().enumerate() {
                flatten(&format!("{path}[{i}]"), x, out);
            }
        }
        _ => out.push(format!("{path} = {v}")),
    }
}

fn baseline(arg: &str, data: &DataArgs) -> Result<()> {
    let (sc, _, _) = scenario::load(arg)?;
    let Scenario::Recovery(r) = &sc else {
        bail!(
            "`baseline` applies to `recovery` scenarios; `{}` is a `{}` scenario",
            sc.meta().name,
            sc.meta().kind
        );
    };
    struct Print<'a>(&'a scenario::RecoveryScenario);
    impl ModelVisitor for Print<'_> {
        type Output = Result<()>;
        fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Result<()> {
            let conv = experiment::recovery::convergence_for(model, self.0, data);
            let seed = experiment::recovery::run_seed(self.0, 0);
            let info = model.info();
            println!(
                "# {} on {} ({}): {} blocks, {} parameters; criterion {}",
                info.name,
                data.dataset,
                data.provenance.label(),
                info.blocks,
                info.parameters,
                conv.criterion
            );
            let mut out = std::io::stdout().lock();
            writeln!(out, "iteration,metric")?;
            let started = Instant::now();
            let mut ws = model.workspace();
            let mut state = model.init();
            for k in 0..=conv.max_iterations {
                let m = model.metric(&state, &mut ws);
                writeln!(out, "{k},{m}")?;
                if m <= conv.criterion {
                    let secs = started.elapsed().as_secs_f64();
                    writeln!(
                        out,
                        "# converged at iteration {k} in {secs:.2} s ({:.1} ms per iteration)",
                        1e3 * secs / (k + 1) as f64
                    )?;
                    return Ok(());
                }
                if !m.is_finite() {
                    break;
                }
                model.step(
                    &mut state,
                    crate::model::IterCtx {
                        iteration: k,
                        run_seed: seed,
                    },
                    &mut ws,
                );
            }
            bail!(
                "the unperturbed run did not reach the criterion {} within {} iterations",
                conv.criterion,
                conv.max_iterations
            )
        }
    }
    build_and_visit(
        &r.model,
        &DataCache::new(),
        &data_options(data)?,
        r.meta.seed,
        Print(r),
    )?
}

fn bench(args: BenchArgs) -> Result<()> {
    use crate::bench;
    if !(args.seconds > 0.0 && args.seconds <= 600.0) {
        bail!("--seconds {} is outside (0, 600]", args.seconds);
    }
    crate::simd::check_env().map_err(|e| anyhow::anyhow!(e))?;
    let chosen: Vec<Box<dyn bench::HotKernel>> = bench::kernels()
        .into_iter()
        .filter(|k| {
            args.kernels.is_empty() || args.kernels.iter().any(|f| k.name().contains(f.as_str()))
        })
        .collect();
    if chosen.is_empty() {
        let names: Vec<&str> = bench::kernels().iter().map(|k| k.name()).collect();
        bail!(
            "no kernel matches --kernel {:?}; the kernels are: {}",
            args.kernels,
            names.join(", ")
        );
    }
    if args.list {
        for k in &chosen {
            println!("{:<24} {:<5} {}", k.name(), k.model(), k.describe());
        }
        return Ok(());
    }
    let ctx = bench::BenchContext {
        cache: DataCache::new(),
        data: data_options(&args.data)?,
        seconds: args.seconds,
    };
    eprintln!(
        "measuring this machine's limits ({} s each) ...",
        args.seconds
    );
    let limits = bench::Limits::measure(args.seconds);
    let mut rows = Vec::new();
    for k in &chosen {
        eprintln!("timing {} ...", k.name());
        rows.push(
            bench::measure(k.as_ref(), &ctx, &limits)
                .with_context(|| format!("kernel {}", k.name()))?,
        );
    }
    print!("{}", bench::render(&limits, &rows));
    if let Some(path) = &args.json {
        let v = serde_json::json!({ "level": crate::simd::level().name(), "limits": limits, "kernels": rows });
        crate::report::atomic::write_atomic(path, serde_json::to_string_pretty(&v)?.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `scarsim completions <shell>`: the completion script, from the clap
/// definitions, on standard output.
fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut cmd = <crate::cli::Cli as clap::CommandFactory>::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut cmd, "scarsim", &mut out);
    out.flush().context("cannot write the completion script")?;
    Ok(())
}

/// `scarsim man [subcommand]`: the manual page (roff) of scarsim or of one
/// subcommand, from the clap definitions, on standard output.
fn man(subcommand: Option<&str>) -> Result<()> {
    let cmd = <crate::cli::Cli as clap::CommandFactory>::command();
    let page = match subcommand {
        None => cmd,
        Some(name) => {
            let Some(sub) = cmd.find_subcommand(name) else {
                let known: Vec<&str> = cmd
                    .get_subcommands()
                    .map(|s| s.get_name())
                    .filter(|n| *n != "help")
                    .collect();
                bail!(
                    "no subcommand `{name}`; pages exist for: {}",
                    known.join(", ")
                );
            };
            // The page's title needs a 'static name; a page is made once per process.
            let title: &'static str = Box::leak(format!("scarsim-{name}").into_boxed_str());
            sub.clone().name(title)
        }
    };
    let mut out = std::io::stdout().lock();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .context("cannot write the manual page")?;
    out.flush().context("cannot write the manual page")?;
    Ok(())
}
