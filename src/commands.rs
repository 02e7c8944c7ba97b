//! The subcommands: resolve raw arguments into options, then call the library.

use std::io::Write;
use std::time::Instant;

use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{Cli, Command, DataArgs, RunArgs};
use crate::data::{DataCache, DataOptions};
use crate::engine::{Convergence, ForkMode};
use crate::experiment::{self, RunOptions};
use crate::model::{DataUsed, Model, ModelVisitor, build_and_visit};
use crate::report::Table;
use crate::scenario::{self, Scenario, bundled};

/// Runs the subcommand `cli` asks for.
pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(args) => run(args),
        Command::List => list(),
        Command::Validate { scenarios } => validate(&scenarios),
        Command::Baseline { scenario, data } => baseline(&scenario, &data),
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

fn run(args: RunArgs) -> Result<()> {
    let threads = match args.threads {
        Some(0) => bail!("--threads must be at least 1"),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let opts = RunOptions {
        data: data_options(&args.data)?,
        out_dir: args.out.clone(),
        threads,
        fork_mode: if args.rerun {
            ForkMode::Rerun
        } else {
            ForkMode::Fork
        },
    };
    // Validate everything before running anything.
    let mut loaded = Vec::new();
    for arg in &args.scenarios {
        let (mut sc, origin, text) = scenario::load(arg)?;
        sc.override_trials_and_seed(args.trials, args.seed)?;
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
    for (sc, origin, text) in &loaded {
        let units = experiment::unit_count(sc) as u64;
        let bar = progress_bar(units, args.quiet, &sc.meta().name);
        let started = Instant::now();
        let dir =
            pool.install(|| experiment::run_and_write(sc, origin, text, &opts, &cache, &bar))?;
        bar.finish_and_clear();
        if !args.quiet {
            eprintln!(
                "{}: {} trials in {:.1} s -> {}",
                sc.meta().name,
                units,
                started.elapsed().as_secs_f64(),
                dir.display()
            );
            print_summary(&dir.join("summary.csv"))?;
        }
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
    for r in &t.rows {
        println!(
            "  {:<14} {}={:<8} {} = {:>8} [{}, {}]",
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
    v.parse::<f64>()
        .map_or_else(|_| v.to_string(), |f| format!("{f:.2}"))
}

fn list() -> Result<()> {
    println!("{:<34} {:<22} title", "scenario", "paper");
    for name in bundled::names() {
        let text = bundled::find(name).expect("listed");
        match scenario::parse(text, &format!("bundled:{name}")) {
            Ok(sc) => {
                let m = sc.meta();
                println!(
                    "{:<34} {:<22} {}",
                    name,
                    m.paper.as_deref().unwrap_or("-"),
                    m.title
                );
            }
            Err(e) => println!("{name:<34} INVALID: {e}"),
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

fn validate(args: &[String]) -> Result<()> {
    let mut failed = 0;
    for arg in args {
        match scenario::load(arg) {
            Ok((sc, origin, _)) => {
                let points = match &sc {
                    Scenario::Recovery(r) => r.points().len(),
                    Scenario::Perturbation(p) => p.series.len(),
                    Scenario::Precision(p) => p.precision.mantissa_bits.len(),
                };
                println!(
                    "ok: {} ({}: {} points x {} trials)",
                    origin.label,
                    sc.meta().name,
                    points,
                    sc.meta().trials
                );
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

fn baseline(arg: &str, data: &DataArgs) -> Result<()> {
    let (sc, _, _) = scenario::load(arg)?;
    let Scenario::Recovery(r) = &sc else {
        bail!(
            "`baseline` prints the unperturbed run of a recovery scenario; `{}` is a {} scenario \
             (its unperturbed run is written to baseline.csv by `scarsim run`)",
            sc.meta().name,
            sc.meta().kind
        );
    };
    struct Print<'a>(&'a scenario::RecoveryScenario);
    impl ModelVisitor for Print<'_> {
        type Output = Result<()>;
        fn visit<M: Model>(self, model: &M, data: &DataUsed) -> Result<()> {
            let conv = Convergence {
                criterion: self.0.convergence.criterion * data.size_ratio,
                max_iterations: self.0.convergence.max_iterations,
            };
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
