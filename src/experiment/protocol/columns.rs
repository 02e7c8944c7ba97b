//! Column names of the `protocol` kind's CSV files (documented in docs/PROTOCOLS.md).

/// Columns of a runtime scenario's `summary.csv`.
pub(crate) const RUNTIME_SUMMARY_COLUMNS: &[&str] = &[
    "scenario",
    "series",
    "protocol",
    "x_name",
    "x",
    "metric",
    "workers",
    "k",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "theory_exact",
    "theory_lower",
    "theory_upper",
    "theory_z",
    "theory_rel_error",
    "theory_check",
    "theory_source",
    "mean_staleness",
    "staleness_theory",
    "max_staleness",
    "cancelled_per_update",
    "gradients_per_update",
    "compute_time",
    "communication_time",
    "warmup_updates",
    "updates",
];

/// Columns of a runtime scenario's `trials.csv`.
pub(crate) const RUNTIME_TRIAL_COLUMNS: &[&str] = &[
    "series",
    "protocol",
    "workers",
    "k",
    "trial",
    "time_per_iteration",
    "mean_staleness",
    "max_staleness",
    "cancelled_per_update",
    "gradients_per_update",
    "events",
];

/// Columns of `ratios.csv` (runtime scenarios).
pub(crate) const RATIO_COLUMNS: &[&str] = &[
    "scenario",
    "workers",
    "k",
    "numerator",
    "denominator",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "ratio_of_means",
    "theory_exact",
];

/// Columns of a training scenario's `summary.csv`.
pub const TRAINING_SUMMARY_COLUMNS: &[&str] = &[
    "scenario",
    "series",
    "protocol",
    "x_name",
    "x",
    "metric",
    "workers",
    "k",
    "k_schedule",
    "staleness_aware_c",
    "staleness_aware_eta_max",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "floor_mean",
    "floor_ci95_low",
    "floor_ci95_high",
    "floor_theory_exact",
    "floor_paper_bound",
    "updates",
    "time_per_update",
    "mean_staleness",
    "max_staleness",
    "mean_learning_rate",
    "mean_stale_distance2",
    "diverged",
    "model",
    "dataset",
    "data",
    "eta",
    "batch_size",
    "horizon",
    "compute_time",
    "communication_time",
];

/// Columns of `loss_vs_time.csv`.
pub(crate) const CURVE_COLUMNS: &[&str] = &[
    "scenario",
    "series",
    "protocol",
    "workers",
    "k",
    "time",
    "trials",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "updates_mean",
];

/// Columns of a training scenario's `trials.csv`.
pub(crate) const TRAINING_TRIAL_COLUMNS: &[&str] = &[
    "series",
    "protocol",
    "workers",
    "k",
    "trial",
    "final_loss",
    "floor",
    "updates",
    "time_per_update",
    "mean_staleness",
    "max_staleness",
    "mean_learning_rate",
    "gradients",
    "cancelled",
    "events",
];

/// Columns of `updates.csv`.
pub(crate) const UPDATE_COLUMNS: &[&str] = &[
    "series",
    "workers",
    "k",
    "trial",
    "update",
    "time",
    "gradients",
    "from_workers",
    "staleness",
    "staleness_mean",
    "staleness_max",
    "learning_rates",
    "stale_distance2",
    "loss",
];

/// Columns of `staleness.csv`.
pub(crate) const STALENESS_COLUMNS: &[&str] = &[
    "series",
    "workers",
    "k",
    "staleness",
    "or_more",
    "count",
    "fraction",
];

/// Columns of `k_switches.csv` (series with a `k_rule` only): per trial, K
/// at time 0 (`switch` = 0, empty `k_from`) and every change the rule made.
pub(crate) const SWITCH_COLUMNS: &[&str] = &[
    "series",
    "protocol",
    "workers",
    "trial",
    "switch",
    "time",
    "k_from",
    "k_to",
    "losses_observed",
];
