//! The columns of a `recovery` scenario's `summary.csv` and `trials.csv`
//! (see docs/OUTPUT.md).

crate::csv_row! {
    /// A row of `summary.csv`: one point (series × x) and the rework of its
    /// trials.
    pub(crate) struct SummaryRow / SummaryColumns {
        /// Scenario name.
        scenario: String,
        /// Series name.
        series: String,
        /// The swept field (`lost_fraction`, `checkpoint_fraction`, …).
        x_name: &'static str,
        /// The swept field's value.
        x: f64,
        /// What `mean` and the CI summarise: always `rework_iterations`.
        metric: &'static str,
        /// Trials of the point.
        trials: usize,
        /// Mean rework iterations.
        mean: f64,
        /// Their standard deviation.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
        /// Trials that did not converge within `max_iterations`.
        unconverged: usize,
        /// Mean failure iteration T.
        mean_failure_iteration: f64,
        /// Mean ‖x_T − recovered‖ of the recovery.
        mean_perturbation_norm: f64,
        /// Mean of what full recovery's perturbation would have been.
        mean_full_recovery_norm: f64,
        /// Mean iterations of the unperturbed runs.
        baseline_iterations: f64,
        /// Model kind.
        model: &'static str,
        /// Dataset name.
        dataset: String,
        /// Real data or a stand-in.
        data: String,
        /// Parameter-server nodes.
        ps_nodes: usize,
        /// Expected fraction of the blocks lost.
        lost_fraction: f64,
        /// PS nodes lost (empty when a fraction is lost).
        lost_ps_nodes: Option<usize>,
        /// Checkpoint interval C.
        checkpoint_interval: usize,
        /// Fraction r of the blocks each partial checkpoint saves.
        checkpoint_fraction: f64,
        /// Block selector of the partial checkpoints.
        selector: &'static str,
        /// `[checkpoint] event_order`: `failure-first` (the checkpoint due at
        /// T is lost) or `checkpoint-first`.
        event_order: &'static str,
        /// `[checkpoint] budget` of partial checkpoints: `parameters` (§4.2)
        /// or `blocks`.
        checkpoint_budget: &'static str,
        /// `full` or `partial` recovery.
        recovery: &'static str,
        /// `geometric`, `geometric-of-run` or `fixed`.
        failure_distribution: &'static str,
        /// p of a geometric failure time.
        failure_p: Option<f64>,
        /// The iteration of a fixed failure time.
        failure_fixed_iteration: Option<usize>,
        /// The mean failure time as a fraction of the run (`geometric-of-run`).
        failure_mean_of_run: Option<f64>,
        /// Convergence criterion used.
        criterion: f64,
        /// Fraction of trials whose rework Theorem 1 bounds.
        predicted_bounds_fraction: f64,
        /// Median of rework / predicted rework.
        median_rework_to_predicted: f64,
    }
}

crate::csv_row! {
    /// A row of `trials.csv`: one trial of one point.
    pub(crate) struct TrialRow / TrialColumns {
        /// Series name.
        series: String,
        /// The swept field's value.
        x: f64,
        /// Trial index.
        trial: usize,
        /// Failure iteration T.
        failure_iteration: usize,
        /// Blocks lost.
        lost_blocks: usize,
        /// Lost blocks restored from a checkpoint.
        restored_blocks: usize,
        /// Iterations of the unperturbed run.
        baseline_iterations: usize,
        /// Iterations of the perturbed run.
        iterations_to_converge: usize,
        /// Perturbed minus unperturbed iterations.
        rework_iterations: i64,
        /// Whether the perturbed run converged.
        converged: bool,
        /// ‖x_T − recovered‖.
        perturbation_norm: f64,
        /// What full recovery's perturbation would have been.
        full_recovery_norm: f64,
        /// Mean age of the restored blocks' checkpoints.
        mean_restored_age: f64,
        /// Theorem 1's rework with the online estimates (empty: too early).
        predicted_rework: f64,
    }
}

crate::csv_row! {
    /// A row of `baseline.csv`: one iteration of one unperturbed run.
    pub(crate) struct BaselineRow / BaselineColumns {
        /// Unperturbed run (one per trial with a per-trial data order).
        run: usize,
        /// k.
        iteration: usize,
        /// The convergence metric at x(k).
        metric: f64,
    }
}
