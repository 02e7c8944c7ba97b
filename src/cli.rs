//! Command-line arguments as the user typed them (clap derive). Validation
//! and resolution happen in [`crate::commands`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// scarsim: simulate failures and relaxed consistency in distributed ML
/// training, with real training in the loop.
#[derive(Debug, Parser)]
#[command(name = "scarsim", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run scenarios and write summary.csv, trials.csv and manifest.json for each.
    Run(RunArgs),
    /// List the bundled scenarios and the paper panel each reproduces.
    List,
    /// Check scenario files without running them.
    Validate {
        /// Scenario files or bundled scenario names.
        #[arg(required = true)]
        scenarios: Vec<String>,
        /// Also print every field of each validated scenario as the run will
        /// use it, defaults and per-series values included (`path = value`).
        #[arg(long)]
        resolved: bool,
    },
    /// Combine the results of the shards of a sharded run (`run --shard i/n`)
    /// into exactly the files one unsharded run writes.
    Merge {
        /// Shard result folders (`<out>/<scenario>.shard-<i>-of-<n>`).
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Output folder; results go to <OUT>/<scenario name>/.
        #[arg(long, default_value = "results")]
        out: PathBuf,
    },
    /// Draw the figures of results folders as SVG and PNG next to their CSV.
    Plot(PlotArgs),
    /// Run every bundled scenario, draw every figure and write REPORT.md.
    Reproduce(ReproduceArgs),
    /// Measure this machine's limits (GEMM, memory bandwidth) and each model's
    /// hot kernel as a fraction of them.
    Bench(BenchArgs),
    /// Print the unperturbed run's metric at every iteration (for calibrating criteria).
    Baseline {
        /// Scenario file or bundled scenario name.
        scenario: String,
        /// Where the data comes from.
        #[command(flatten)]
        data: DataArgs,
    },
    /// Print a shell completion script to standard output
    /// (e.g. `scarsim completions bash > /etc/bash_completion.d/scarsim`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff) to standard output
    /// (e.g. `scarsim man > scarsim.1; man ./scarsim.1`).
    Man {
        /// A subcommand's own page (`scarsim-run.1`, …) instead of the main one.
        subcommand: Option<String>,
    },
}

/// Options of `scarsim run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario files (`.toml`) or bundled scenario names.
    #[arg(required = true)]
    pub scenarios: Vec<String>,
    /// Trials per point (overrides the scenario's `trials`).
    #[arg(long)]
    pub(crate) trials: Option<usize>,
    /// Seed (overrides the scenario's `seed`).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Output folder; each scenario writes into <OUT>/<scenario name>/.
    #[arg(long, default_value = "results")]
    pub(crate) out: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Where the data comes from.
    #[command(flatten)]
    pub(crate) data: DataArgs,
    /// No progress bar or per-scenario messages.
    #[arg(long, short)]
    pub quiet: bool,
    /// Run only shard INDEX of COUNT (0-based), balanced by expected cost,
    /// into <OUT>/<scenario>.shard-<INDEX>-of-<COUNT>/; combine shards with
    /// `scarsim merge`. INDEX may be `env`: read from SLURM_ARRAY_TASK_ID or
    /// JOB_COMPLETION_INDEX.
    #[arg(long, value_name = "INDEX/COUNT")]
    pub shard: Option<String>,
    /// Continue an interrupted run: skip the units already in its journal.
    #[arg(long)]
    pub resume: bool,
    /// Print the plan (units, estimated time and memory) without running it.
    #[arg(long)]
    pub(crate) plan: bool,
    /// Do not draw the figures after the run (`scarsim plot` draws them later).
    #[arg(long)]
    pub(crate) no_plot: bool,
    /// Re-run each trial from iteration 0 instead of forking it from the
    /// unperturbed run (same results, slower; for benchmarking).
    #[arg(long, hide = true)]
    pub(crate) rerun: bool,
    /// Run every trial even when another trial of the run has exactly the
    /// same inputs, step every trial restored to one of the unperturbed
    /// run's states, and run every failure-free wall-clock run and every
    /// trial of a trial-free overhead series of a faults scenario and every
    /// K = 1 run of a protocol scenario (same results, slower; for
    /// benchmarking and testing).
    #[arg(long, hide = true)]
    pub(crate) no_sharing: bool,
    /// Evaluate the convergence metric at every iteration instead of letting
    /// a model certify "not converged yet" without it (same results, slower;
    /// for benchmarking and testing).
    #[arg(long, hide = true)]
    pub(crate) exact_metric: bool,
}

/// Options of `scarsim plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Results folders (each with summary.csv and manifest.json), or folders
    /// holding them (e.g. `results`).
    #[arg(required = true)]
    pub(crate) dirs: Vec<PathBuf>,
    /// Also assemble the figures into one multi-panel figure NAME.svg and
    /// NAME.png (in the paper's layout when they are panels of one paper figure).
    #[arg(long, value_name = "NAME")]
    pub(crate) grid: Option<String>,
    /// Folder for the --grid figure (default: the parent of the first results folder).
    #[arg(long, requires = "grid")]
    pub(crate) out: Option<PathBuf>,
}

/// Options of `scarsim reproduce`.
#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// A few minutes on 2 cores: 10 trials per point, stand-ins at 5% of the real size.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Folder laid out like ../shared/data; scenarios whose dataset files are
    /// missing there run on the synthetic stand-ins.
    #[arg(long, default_value = "data")]
    pub(crate) data_dir: PathBuf,
    /// Use the synthetic stand-ins even where real data is present.
    #[arg(long)]
    pub(crate) synthetic: bool,
    /// Output folder: a subfolder per scenario, the paper's multi-panel figures and REPORT.md.
    #[arg(long, default_value = "results")]
    pub(crate) out: PathBuf,
    /// Trials per point (overrides the scenarios' and --quick's).
    #[arg(long)]
    pub(crate) trials: Option<usize>,
    /// Size of the stand-ins relative to the real datasets (default 1; 0.05 with --quick).
    #[arg(long)]
    pub(crate) scale: Option<f64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Scenarios run at the same time, each with its own --threads workers
    /// (default: 2 when --threads is at least 2, else 1). Two keep the cores
    /// busy through one scenario's serial phases; results do not depend on it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=8))]
    pub(crate) scenarios_at_once: Option<u64>,
    /// Keep the scenarios already finished in --out with the same inputs
    /// (program version, scenario, trials, seed, data), finish interrupted
    /// ones from their journal, run the rest; then draw and report them all.
    #[arg(long)]
    pub resume: bool,
    /// No progress bars or per-scenario messages.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Only this bundled scenario (repeatable; default: every one).
    #[arg(long = "only", value_name = "SCENARIO")]
    pub only: Vec<String>,
    /// Run only shard INDEX of COUNT (0-based) of every scenario's units,
    /// balanced by expected cost within each scenario, into
    /// <OUT>/<scenario>.shard-<i>-of-<n>/ (no figures, no report); gather
    /// the shards with `reproduce --merge`. INDEX may be `env`: read from
    /// SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX.
    #[arg(long, value_name = "INDEX/COUNT", conflicts_with = "merge")]
    pub shard: Option<String>,
    /// Gather the shards of `reproduce --shard` found in these folders
    /// (their --out) instead of running: merge every scenario's shards into
    /// <OUT>/<scenario>/, then draw every figure and write REPORT.md as an
    /// unsharded reproduce does. Give the same options as the shards had.
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with = "resume")]
    pub merge: Vec<PathBuf>,
    /// Run every recovery trial in every scenario, even when another scenario
    /// of this reproduction already computed one with exactly the same
    /// inputs (same CSV files, slower; for benchmarking and testing).
    #[arg(long)]
    pub(crate) no_share_across: bool,
    /// Instead of the scenarios as written, run the robustness study of the
    /// selected ones that check a SCAR claim (Figures 6 and 7): each under
    /// every setting of the knobs the paper leaves unstated (event order ×
    /// C × failure mean), into <OUT>/<scenario>.<setting>/; then write
    /// robustness.csv, the claim × setting map and a REPORT.md that says in
    /// how many settings each claim holds. Shards and merges like any run.
    #[arg(long)]
    pub(crate) robustness: bool,
    /// With --robustness, only reading N of each panel (repeatable): 0 is
    /// the panel as bundled, 1, 2, … its `[[robustness]]` tables in order
    /// (e.g. the CNN panels' loss on fixed images). Default: every reading.
    #[arg(long, value_name = "N", requires = "robustness")]
    pub(crate) reading: Vec<usize>,
    /// Print what every scenario of this reproduction (or of its robustness
    /// study) will cost on this machine (units, setup, trial CPU seconds,
    /// estimated wall time, memory) and the total, without running it.
    /// Each scenario's unperturbed run is run to time it.
    #[arg(long, conflicts_with_all = ["merge", "shard", "resume"])]
    pub(crate) plan: bool,
}

/// Options of `scarsim bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Seconds to time each kernel and each limit.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) seconds: f64,
    /// Only the kernels whose name contains this (repeatable).
    #[arg(long = "kernel", value_name = "NAME")]
    pub(crate) kernels: Vec<String>,
    /// List the kernels without running them.
    #[arg(long)]
    pub(crate) list: bool,
    /// Also write the table as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Where the data comes from (real where present, else the stand-ins).
    #[command(flatten)]
    pub(crate) data: DataArgs,
}

/// Data options shared by the subcommands that train.
#[derive(Debug, Args)]
pub struct DataArgs {
    /// Folder laid out like ../shared/data: one subfolder per dataset.
    #[arg(long, default_value = "data")]
    pub(crate) data_dir: PathBuf,
    /// Use the generated stand-ins instead of real data files.
    #[arg(long)]
    pub(crate) synthetic: bool,
    /// Size of the stand-ins relative to the real datasets (with --synthetic).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scale: f64,
}
