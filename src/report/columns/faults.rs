//! The columns of a `faults` scenario's CSV files (see docs/FAULTS.md).
//!
//! Each measure writes its own files: `[wallclock]` `summary.csv`,
//! `curves.csv`, `trials.csv` and `incidents.csv`; `[iterations]`
//! `summary.csv`, `trials.csv`, `curves.csv` and `comparison.csv`;
//! `[interval]` `summary.csv`, `trials.csv` and `optimum.csv`.

crate::csv_row! {
    /// A row of a wall-clock scenario's `summary.csv`: one point (series ×
    /// workers × with/without failures) over its trials.
    pub(crate) struct WallclockSummaryRow / WallclockSummaryColumns {
        /// Scenario name.
        scenario: String,
        /// Series name.
        series: String,
        /// The series' strategy (`checkpoint-restart`, `scar`,
        /// `chain-replication`, `stateless-ps`).
        strategy: &'static str,
        /// Workers P.
        workers: usize,
        /// `on` with the failures, `off` without them.
        failures: &'static str,
        /// The swept field: always `workers`.
        x_name: &'static str,
        /// The swept field's value (the workers).
        x: usize,
        /// What `mean` and the CI summarise: always `time_to_criterion`.
        metric: &'static str,
        /// Trials of the point.
        trials: usize,
        /// Mean time to the loss criterion, over the trials that reached it.
        mean: f64,
        /// Its standard deviation.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
        /// Trials that reached the criterion within the horizon.
        reached: usize,
        /// Mean loss at the last grid time.
        final_loss: f64,
        /// Mean accuracy at the last grid time (empty: the model has none).
        final_accuracy: f64,
        /// Lower end of its 95% CI.
        final_accuracy_ci95_low: f64,
        /// Upper end of its 95% CI.
        final_accuracy_ci95_high: f64,
        /// Mean accuracy at the first grid time at or after the first
        /// recovery (trials with a recovery on the grid).
        accuracy_after_recovery: f64,
        /// Lower end of its 95% CI.
        accuracy_after_recovery_ci95_low: f64,
        /// Upper end of its 95% CI.
        accuracy_after_recovery_ci95_high: f64,
        /// Mean time of the first recovery (trials that recovered).
        recovery_time: f64,
        /// Mean gradients applied to the PS parameters (queued ones included).
        gradients_applied: f64,
        /// Mean gradients computed and thrown away.
        gradients_discarded: f64,
        /// Mean gradients queued by stateless workers.
        gradients_queued: f64,
        /// Mean checkpoints completed (persisted).
        checkpoints: f64,
        /// Mean checkpoint ticks skipped (PS unavailable or a persist still
        /// running).
        checkpoints_skipped: f64,
        /// Mean solve time (the horizon less the other three).
        solve: f64,
        /// Mean time the PS was paused for checkpoints.
        dump: f64,
        /// Mean age of the restored values, averaged over all blocks.
        rework: f64,
        /// Mean time the PS was unavailable.
        restart: f64,
        /// Nodes billed: workers plus shards × chain length.
        nodes: usize,
        /// On-demand cost billed per second until the criterion (the horizon
        /// if never met; empty without prices).
        cost_on_demand: f64,
        /// Spot cost billed the same way.
        cost_spot: f64,
        /// Mean node-seconds the workers spent computing gradients.
        worker_busy_node_s: f64,
        /// Mean node-seconds the workers spent not computing.
        worker_idle_node_s: f64,
        /// Mean node-seconds the PS nodes (every chain member) were up.
        ps_up_node_s: f64,
        /// Mean node-seconds the PS nodes were down.
        ps_down_node_s: f64,
        /// On-demand cost billed in whole hours per node and up interval
        /// until the criterion (empty without prices).
        cost_hourly_on_demand: f64,
        /// Spot cost billed the same way.
        cost_hourly_spot: f64,
        /// `sync` or `async` checkpoint persistence.
        persist: &'static str,
        /// Model name.
        model: String,
        /// Dataset name.
        dataset: String,
        /// Real data or a stand-in.
        data: String,
    }
}

crate::csv_row! {
    /// A row of a wall-clock scenario's `curves.csv`: one grid time of one
    /// point, loss and accuracy across its trials.
    pub(crate) struct WallclockCurveRow / WallclockCurveColumns {
        /// Scenario name.
        scenario: String,
        /// Series name.
        series: String,
        /// The series' strategy.
        strategy: &'static str,
        /// Workers P.
        workers: usize,
        /// `on` with the failures, `off` without them.
        failures: &'static str,
        /// Grid time (s).
        time: f64,
        /// Trials of the point.
        trials: usize,
        /// Mean loss at that time.
        loss_mean: f64,
        /// Lower end of its 95% CI.
        loss_ci95_low: f64,
        /// Upper end of its 95% CI.
        loss_ci95_high: f64,
        /// Mean accuracy at that time (empty: the model has none).
        accuracy_mean: f64,
        /// Lower end of its 95% CI.
        accuracy_ci95_low: f64,
        /// Upper end of its 95% CI.
        accuracy_ci95_high: f64,
    }
}

crate::csv_row! {
    /// A row of a wall-clock scenario's `trials.csv`: one trial of one point.
    pub(crate) struct WallclockTrialRow / WallclockTrialColumns {
        /// Series name.
        series: String,
        /// The series' strategy.
        strategy: &'static str,
        /// Workers P.
        workers: usize,
        /// `on` with the failures, `off` without them.
        failures: &'static str,
        /// Trial index.
        trial: usize,
        /// First grid time with loss ≤ criterion (empty: never).
        time_to_criterion: f64,
        /// Loss at the last grid time.
        final_loss: f64,
        /// Accuracy at the last grid time (empty: the model has none).
        final_accuracy: f64,
        /// Gradients applied to the PS parameters (queued ones included).
        gradients_applied: u64,
        /// Gradients computed and thrown away.
        gradients_discarded: u64,
        /// Gradients queued by stateless workers.
        gradients_queued: u64,
        /// Checkpoints completed (persisted).
        checkpoints: u64,
        /// Solve time.
        solve: f64,
        /// Time the PS was paused for checkpoints.
        dump: f64,
        /// Age of the restored values, averaged over all blocks.
        rework: f64,
        /// Time the PS was unavailable.
        restart: f64,
    }
}

crate::csv_row! {
    /// A row of a wall-clock scenario's `incidents.csv`: one failure of one
    /// trial and its recovery.
    pub(crate) struct IncidentRow / IncidentColumns {
        /// Series name.
        series: String,
        /// Workers P.
        workers: usize,
        /// Trial index.
        trial: usize,
        /// The failed shard.
        shard: usize,
        /// When its parameters became unavailable (s).
        failed: f64,
        /// When it served again (empty: not by the horizon).
        recovered: f64,
        /// Whether parameters were lost (false: a chain took over).
        lost: bool,
        /// Blocks restored from the checkpoint.
        restored_blocks: usize,
        /// Gradients the stateless PS applied from its queue.
        queued_applied: u64,
    }
}

crate::csv_row! {
    /// A row of an iterations scenario's `summary.csv`: one series (recovery
    /// policy) over its trials.
    pub(crate) struct IterationsSummaryRow / IterationsSummaryColumns {
        /// Scenario name.
        scenario: String,
        /// Series name.
        series: String,
        /// `full` or `partial` recovery.
        recovery: &'static str,
        /// Checkpoint interval C (iterations).
        checkpoint_interval: usize,
        /// Fraction r of the blocks each checkpoint saves.
        checkpoint_fraction: f64,
        /// `sync` or `async` checkpoint persistence.
        persist: &'static str,
        /// The swept field: always `checkpoint_fraction`.
        x_name: &'static str,
        /// The swept field's value.
        x: f64,
        /// What `mean` and the CI summarise: always `wall_time`.
        metric: &'static str,
        /// Trials of the series.
        trials: usize,
        /// Mean wall time to the criterion.
        mean: f64,
        /// Its standard deviation.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
        /// Mean iterations to the criterion.
        iterations: f64,
        /// B: the unperturbed run's iterations to the criterion.
        baseline_iterations: usize,
        /// Mean iterations less B.
        rework_iterations: f64,
        /// Mean solve time.
        solve: f64,
        /// Mean checkpoint time.
        dump: f64,
        /// Mean rework time ((iterations − B)·T_iter plus the wasted part of
        /// the failed iteration).
        rework: f64,
        /// Mean restart time (detection and restore).
        restart: f64,
        /// Wall time to the criterion of the series' run without a failure.
        no_failure_wall_time: f64,
        /// Mean checkpoints taken.
        checkpoints: f64,
        /// Mean ‖δ‖ of the recovery.
        perturbation_norm: f64,
        /// Mean lost blocks whose write was still running at the failure.
        unpersisted_lost: f64,
        /// Trials that met the criterion within the iteration cap.
        converged: usize,
        /// The criterion: the unperturbed run's metric at
        /// `criterion_iteration`.
        criterion: f64,
        /// Model name.
        model: String,
        /// Dataset name.
        dataset: String,
        /// Real data or a stand-in.
        data: String,
    }
}

crate::csv_row! {
    /// A row of an iterations scenario's `trials.csv`: one failure timeline.
    pub(crate) struct IterationsTrialRow / IterationsTrialColumns {
        /// Series name.
        series: String,
        /// Trial index.
        trial: usize,
        /// Wall time at which the criterion was met.
        wall_time: f64,
        /// Iterations to the criterion.
        iterations: usize,
        /// Whether the criterion was met within the iteration cap.
        converged: bool,
        /// Solve time.
        solve: f64,
        /// Checkpoint time.
        dump: f64,
        /// Rework time.
        rework: f64,
        /// Restart time.
        restart: f64,
        /// Checkpoints taken.
        checkpoints: usize,
        /// ‖δ‖ of the recovery.
        perturbation_norm: f64,
        /// Lost blocks whose write was still running at the failure (they
        /// got the older saved value).
        unpersisted_lost: usize,
    }
}

crate::csv_row! {
    /// A row of an iterations scenario's `curves.csv`: one iteration of one
    /// series, while every trial still has it.
    pub(crate) struct IterationsCurveRow / IterationsCurveColumns {
        /// Scenario name.
        scenario: String,
        /// Series name.
        series: String,
        /// Iteration k (0: x(0)).
        iteration: usize,
        /// Trials of the series.
        trials: usize,
        /// Mean wall time after iteration k.
        time_mean: f64,
        /// Mean convergence metric at x(k).
        metric_mean: f64,
        /// Lower end of its 95% CI.
        metric_ci95_low: f64,
        /// Upper end of its 95% CI.
        metric_ci95_high: f64,
    }
}

crate::csv_row! {
    /// A row of `comparison.csv`: what one series saves against the first
    /// full-recovery series, paired by trial.
    pub(crate) struct ComparisonRow / ComparisonColumns {
        /// Series name.
        series: String,
        /// The reference series (the first with full recovery).
        reference: String,
        /// `rework_time_saved`, `total_time_saved`, `dump_time_saved` or
        /// `iterations_saved`: the reference's value less the series'.
        quantity: &'static str,
        /// Trial pairs.
        trials: usize,
        /// Mean saving.
        mean: f64,
        /// Its standard deviation.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
    }
}

crate::csv_row! {
    /// A row of an interval scenario's `summary.csv`: one (MTBF, interval)
    /// over its trials.
    pub(crate) struct IntervalSummaryRow / IntervalSummaryColumns {
        /// Scenario name.
        scenario: String,
        /// Series name (`MTBF 10 min`, …).
        series: String,
        /// System MTBF M (s).
        mtbf: f64,
        /// The swept field: always `interval`.
        x_name: &'static str,
        /// The checkpoint interval τ (s).
        x: f64,
        /// τ / Daly's higher-order optimum.
        factor: f64,
        /// What `mean` and the CI summarise: always `wall_time`.
        metric: &'static str,
        /// Trials.
        trials: usize,
        /// Mean simulated wall time.
        mean: f64,
        /// Its standard deviation.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
        /// The exact expected wall time.
        expected_exact: f64,
        /// Daly's closed-form wall time.
        daly_closed_form: f64,
        /// Mean failures.
        failures: f64,
        /// Mean solve time.
        solve: f64,
        /// Mean checkpoint time.
        dump: f64,
        /// Mean rework time.
        rework: f64,
        /// Mean restart time.
        restart: f64,
    }
}

crate::csv_row! {
    /// A row of an interval scenario's `trials.csv`: one interval of one
    /// trial.
    pub(crate) struct IntervalTrialRow / IntervalTrialColumns {
        /// System MTBF M (s).
        mtbf: f64,
        /// Trial index.
        trial: usize,
        /// τ / Daly's higher-order optimum.
        factor: f64,
        /// The checkpoint interval τ (s).
        interval: f64,
        /// Simulated wall time.
        wall_time: f64,
        /// Failures during the run.
        failures: usize,
    }
}

crate::csv_row! {
    /// A row of `optimum.csv`: one MTBF, the formulas' intervals next to the
    /// simulated best.
    pub(crate) struct OptimumRow / OptimumColumns {
        /// System MTBF M (s).
        mtbf: f64,
        /// Checkpoint time δ (s).
        checkpoint_time: f64,
        /// Restart time R (s).
        restart_time: f64,
        /// Solve time (s).
        solve_time: f64,
        /// Young's interval √(2δM).
        young: f64,
        /// Daly's first-order interval √(2δM) − δ.
        daly_first_order: f64,
        /// Daly's higher-order optimum.
        daly_higher_order: f64,
        /// The numerical minimum of Daly's T_w(τ).
        formula_minimum: f64,
        /// The simulated best τ on the grid.
        simulated_best: f64,
        /// Mean wall time at the simulated best τ.
        simulated_best_wall: f64,
        /// Lower end of its 95% CI.
        simulated_best_ci95_low: f64,
        /// Upper end of its 95% CI.
        simulated_best_ci95_high: f64,
        /// Mean wall time at Daly's τ (factor 1; the best τ without it).
        wall_at_daly: f64,
        /// Lower end of its 95% CI.
        wall_at_daly_ci95_low: f64,
        /// Upper end of its 95% CI.
        wall_at_daly_ci95_high: f64,
        /// Mean paired excess of the wall time at Daly's τ over the best
        /// (same failure times).
        paired_excess_at_daly: f64,
        /// Lower end of its 95% CI.
        paired_excess_ci95_low: f64,
        /// Upper end of its 95% CI.
        paired_excess_ci95_high: f64,
        /// Whether that CI reaches 0 (or Daly's τ is the best).
        daly_agrees: bool,
    }
}
