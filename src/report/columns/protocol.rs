//! The columns of a `protocol` scenario's CSV files (see docs/PROTOCOLS.md):
//! runtime scenarios write `summary.csv`, `trials.csv` and `ratios.csv`;
//! training scenarios `summary.csv`, `trials.csv`, `loss_vs_time.csv`,
//! `updates.csv`, `staleness.csv` and, with a `k_rule` series,
//! `k_switches.csv`.

crate::csv_row! {
    /// A row of a runtime scenario's `summary.csv`: one point (series × P ×
    /// K), the time per iteration over its trials next to the closed forms.
    pub(crate) struct RuntimeSummaryRow / RuntimeSummaryColumns {
        /// Scenario name.
        scenario: String,
        /// Series label (the series name, with " K=k" when it runs several K).
        series: String,
        /// Protocol (`k-sync`, `k-batch-sync`, `k-async`, `k-batch-async`).
        protocol: &'static str,
        /// The swept field: always `k`.
        x_name: &'static str,
        /// The swept field's value: K (empty for a K schedule).
        x: Option<usize>,
        /// What `mean` and the CI summarise: always `time_per_iteration`.
        metric: &'static str,
        /// Number of workers P.
        workers: usize,
        /// K (empty for a K schedule).
        k: Option<usize>,
        /// Trials of the point.
        trials: usize,
        /// Mean time per iteration.
        mean: f64,
        /// Its standard deviation over trials.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
        /// Closed-form time per iteration (empty where none exists).
        theory_exact: Option<f64>,
        /// Lower bound on the time per iteration (empty where none is known).
        theory_lower: Option<f64>,
        /// Upper bound on the time per iteration (empty where none is known).
        theory_upper: Option<f64>,
        /// (mean − exact)/s.e. (empty without a closed form).
        theory_z: f64,
        /// (mean − exact)/exact (empty without a closed form).
        theory_rel_error: f64,
        /// `agrees` (exact value inside the 95% CI), `outside_ci`,
        /// `within_bounds`, `outside_bounds`, or empty without theory.
        theory_check: &'static str,
        /// The formula the theory columns come from.
        theory_source: String,
        /// Mean staleness of the measured updates' gradients.
        mean_staleness: f64,
        /// The theory's mean staleness (empty for a K schedule).
        staleness_theory: Option<f64>,
        /// Largest staleness over the trials.
        max_staleness: u64,
        /// Cancelled computations per update.
        cancelled_per_update: f64,
        /// Gradients reaching the PS per update.
        gradients_per_update: f64,
        /// The compute-time distribution.
        compute_time: String,
        /// The communication-time distribution (`none` without one).
        communication_time: String,
        /// Warm-up updates W before the measurement.
        warmup_updates: u64,
        /// Measured updates N.
        updates: u64,
    }
}

crate::csv_row! {
    /// A row of a runtime scenario's `trials.csv`: one trial of one point.
    pub(crate) struct RuntimeTrialRow / RuntimeTrialColumns {
        /// Series label.
        series: String,
        /// Protocol.
        protocol: &'static str,
        /// Number of workers P.
        workers: usize,
        /// K (empty for a K schedule).
        k: Option<usize>,
        /// Trial index.
        trial: usize,
        /// (t_{W+N} − t_W)/N for W warm-up and N measured updates.
        time_per_iteration: f64,
        /// Mean staleness of the measured updates' gradients.
        mean_staleness: f64,
        /// Largest staleness of the measured updates' gradients.
        max_staleness: u64,
        /// Cancelled computations per update.
        cancelled_per_update: f64,
        /// Gradients reaching the PS per update.
        gradients_per_update: f64,
        /// Events the simulation popped.
        events: u64,
    }
}

crate::csv_row! {
    /// A row of `ratios.csv` (runtime scenarios): the time per iteration of a
    /// synchronous point over its asynchronous counterpart.
    pub(crate) struct RatioRow / RatioColumns {
        /// Scenario name.
        scenario: String,
        /// Number of workers P.
        workers: usize,
        /// K of both points, or `P/1` for fully synchronous (K-sync, K = P)
        /// over asynchronous (K = 1).
        k: String,
        /// Series label of the numerator (synchronous) point.
        numerator: String,
        /// Series label of the denominator (asynchronous) point.
        denominator: String,
        /// Trials (paired: trial t of both shares its delays).
        trials: usize,
        /// Mean of the per-trial ratios.
        mean: f64,
        /// Their standard deviation.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
        /// Ratio of the two points' mean times per iteration.
        ratio_of_means: f64,
        /// Ratio of the closed forms (empty unless both exist).
        theory_exact: Option<f64>,
    }
}

crate::csv_row! {
    /// A row of a training scenario's `summary.csv`: one point (series × P ×
    /// K), its loss at the horizon and error floor over trials.
    pub(crate) struct TrainingSummaryRow / TrainingSummaryColumns {
        /// Scenario name.
        scenario: String,
        /// Series label (the series name, with " K=k" when it runs several K).
        series: String,
        /// Protocol.
        protocol: &'static str,
        /// The swept field: always `k`.
        x_name: &'static str,
        /// The swept field's value: K (empty for a schedule or rule).
        x: Option<usize>,
        /// What `mean` and the CI summarise: always `final_loss`.
        metric: &'static str,
        /// Number of workers P.
        workers: usize,
        /// K (empty for a schedule or rule).
        k: Option<usize>,
        /// How K is chosen: the schedule (`0:1;200:2`) or the rule
        /// (`plateau:start=1;…`).
        k_schedule: String,
        /// C of the staleness-aware learning rate (empty without one).
        staleness_aware_c: Option<f64>,
        /// η_max of the staleness-aware learning rate (empty without one).
        staleness_aware_eta_max: Option<f64>,
        /// Trials of the point.
        trials: usize,
        /// Mean loss at the horizon.
        mean: f64,
        /// Its standard deviation over trials.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
        /// Mean error floor (mean loss over the last `floor_window` of the
        /// horizon).
        floor_mean: f64,
        /// Lower end of the floor's 95% CI.
        floor_ci95_low: f64,
        /// Upper end of the floor's 95% CI.
        floor_ci95_high: f64,
        /// The quadratic's exact K-sync floor (fresh-gradient points only).
        floor_theory_exact: Option<f64>,
        /// The paper's K-sync floor bound (fresh-gradient points with known
        /// constants only).
        floor_paper_bound: Option<f64>,
        /// Mean updates per trial.
        updates: f64,
        /// Mean time of the last update over the updates.
        time_per_update: f64,
        /// Mean staleness.
        mean_staleness: f64,
        /// Largest staleness over the trials.
        max_staleness: u64,
        /// Mean learning rate applied.
        mean_learning_rate: f64,
        /// Mean ‖w_j − w_τ‖² of the stale gradients (staleness-aware runs: the
        /// scale for choosing C).
        mean_stale_distance2: f64,
        /// Trials whose final loss is not finite.
        diverged: usize,
        /// Model name.
        model: String,
        /// Dataset name.
        dataset: String,
        /// Real data or a stand-in.
        data: String,
        /// Learning rate η.
        eta: f64,
        /// Minibatch size.
        batch_size: usize,
        /// Simulated time horizon.
        horizon: f64,
        /// The compute-time distribution.
        compute_time: String,
        /// The communication-time distribution (`none` without one).
        communication_time: String,
    }
}

crate::csv_row! {
    /// A row of `loss_vs_time.csv`: one grid time of one point, the loss
    /// across trials.
    pub(crate) struct CurveRow / CurveColumns {
        /// Scenario name.
        scenario: String,
        /// Series label.
        series: String,
        /// Protocol.
        protocol: &'static str,
        /// Number of workers P.
        workers: usize,
        /// K (empty for a schedule or rule).
        k: Option<usize>,
        /// Grid time.
        time: f64,
        /// Trials.
        trials: usize,
        /// Mean loss at the grid time.
        mean: f64,
        /// Its standard deviation over trials.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
        /// Mean updates done by the grid time.
        updates_mean: f64,
    }
}

crate::csv_row! {
    /// A row of a training scenario's `trials.csv`: one trial of one point.
    pub(crate) struct TrainingTrialRow / TrainingTrialColumns {
        /// Series label.
        series: String,
        /// Protocol.
        protocol: &'static str,
        /// Number of workers P.
        workers: usize,
        /// K (empty for a schedule or rule).
        k: Option<usize>,
        /// Trial index.
        trial: usize,
        /// Loss at the horizon.
        final_loss: f64,
        /// Error floor: mean loss over the last `floor_window` of the horizon.
        floor: f64,
        /// Updates done.
        updates: u64,
        /// Time of the last update over the updates.
        time_per_update: f64,
        /// Mean staleness.
        mean_staleness: f64,
        /// Largest staleness.
        max_staleness: u64,
        /// Mean learning rate applied.
        mean_learning_rate: f64,
        /// Gradients that reached the PS.
        gradients: u64,
        /// Computations cancelled.
        cancelled: u64,
        /// Events the simulation popped.
        events: u64,
    }
}

crate::csv_row! {
    /// A row of `updates.csv`: one update of a recorded trial.
    pub(crate) struct UpdateRow / UpdateColumns {
        /// Series label.
        series: String,
        /// Number of workers P.
        workers: usize,
        /// K (empty for a schedule or rule).
        k: Option<usize>,
        /// Trial index.
        trial: usize,
        /// New version j + 1.
        update: u64,
        /// Wall-clock time.
        time: f64,
        /// Gradients used.
        gradients: usize,
        /// Workers whose gradients were used, in arrival order (`;`-separated).
        from_workers: String,
        /// Staleness of each of those gradients (`;`-separated).
        staleness: String,
        /// Their mean staleness.
        staleness_mean: f64,
        /// Their largest staleness.
        staleness_max: u64,
        /// Learning rate applied to each gradient (`;`-separated).
        learning_rates: String,
        /// ‖w_j − w_τ‖² of each gradient (`;`-separated; staleness-aware rate
        /// only, else empty).
        stale_distance2: String,
        /// Loss after the update (empty when not evaluated at this update).
        loss: f64,
    }
}

crate::csv_row! {
    /// A row of `staleness.csv`: one non-empty bucket of a point's staleness
    /// histogram over its trials.
    pub(crate) struct StalenessRow / StalenessColumns {
        /// Series label.
        series: String,
        /// Number of workers P.
        workers: usize,
        /// K (empty for a schedule or rule).
        k: Option<usize>,
        /// Staleness.
        staleness: usize,
        /// Whether this is the last bucket, which collects the tail.
        or_more: bool,
        /// Gradients of this staleness.
        count: u64,
        /// Their fraction of all the point's gradients.
        fraction: f64,
    }
}

crate::csv_row! {
    /// A row of `k_switches.csv` (series with a `k_rule` only): per trial, K
    /// at time 0 (`switch` = 0, empty `k_from`) and every change the rule made.
    pub(crate) struct SwitchRow / SwitchColumns {
        /// Series label.
        series: String,
        /// Protocol.
        protocol: &'static str,
        /// Number of workers P.
        workers: usize,
        /// Trial index.
        trial: usize,
        /// Switch index (0: K at time 0).
        switch: usize,
        /// Simulated time of the gradient whose loss completed the window.
        time: f64,
        /// K before (empty for switch 0).
        k_from: Option<usize>,
        /// K after.
        k_to: usize,
        /// Losses the PS had observed in the run, this one included.
        losses_observed: u64,
    }
}
