//! The columns of a `perturbation` scenario's `trials.csv`, `summary.csv`
//! and `baseline.csv` (see docs/OUTPUT.md).

crate::csv_row! {
    /// A row of `trials.csv`: one trial of one series.
    pub(crate) struct TrialRow / TrialColumns {
        /// Series name.
        series: String,
        /// Trial index.
        trial: usize,
        /// random | adversarial | reset.
        perturbation: &'static str,
        /// Perturbations injected before the run converged.
        perturbations: usize,
        /// ℓ of the first perturbation (empty if none).
        first_perturbation_iteration: Option<usize>,
        /// ℓ of the last perturbation (empty if none).
        last_perturbation_iteration: Option<usize>,
        /// Σ_ℓ ‖δ_ℓ‖ (= ‖δ‖ for a single perturbation).
        perturbation_norm: f64,
        /// Fraction of the blocks reset by the first perturbation (reset only).
        reset_fraction: f64,
        /// Δ_T = Σ_ℓ c^{−ℓ}‖δ_ℓ‖ with the c in `rate`.
        delta_t: f64,
        /// B, the unperturbed run's iterations.
        baseline_iterations: usize,
        /// K, capped at max_iterations.
        iterations_to_converge: usize,
        /// K − B.
        iteration_cost: f64,
        /// Whether the perturbed run converged.
        converged: bool,
        /// Theorem 1: log(1 + Δ_T/‖x(0) − x*‖)/log(1/c).
        bound: f64,
        /// c in `bound`.
        rate: f64,
        /// ‖x(0) − x*‖ in `bound`.
        initial_distance: f64,
        /// The online predictor's bound, from the unperturbed iterates up to
        /// the first perturbation only (ĉ, r̂0 from step lengths).
        predicted_cost: f64,
    }
}

crate::csv_row! {
    /// A row of `summary.csv`: one series.
    pub(crate) struct SummaryRow / SummaryColumns {
        /// Scenario name.
        scenario: String,
        /// Series name.
        series: String,
        /// random | adversarial | reset.
        perturbation: &'static str,
        /// Iteration of a single perturbation (empty for a probability).
        perturbation_iteration: Option<usize>,
        /// ρ per iteration (empty for a single perturbation).
        perturbation_probability: Option<f64>,
        /// What `mean` and the CI summarise: always `iteration_cost`.
        metric: &'static str,
        /// Trials.
        trials: usize,
        /// Mean iteration cost.
        mean: f64,
        /// Its standard deviation.
        std: f64,
        /// Lower end of the mean's 95% CI.
        ci95_low: f64,
        /// Upper end of the mean's 95% CI.
        ci95_high: f64,
        /// Trials censored at max_iterations.
        unconverged: usize,
        /// Trials with at least one perturbation.
        perturbed_trials: usize,
        /// Trials whose cost exceeds their bound.
        bound_violations: usize,
        /// Max over trials of cost − bound (≤ 0 when none does).
        max_excess: f64,
        /// Median of cost/bound over trials with a positive bound.
        median_cost_to_bound: f64,
        /// Max of cost/bound (1 = the bound is attained).
        max_cost_to_bound: f64,
        /// Mean perturbation norm.
        mean_perturbation_norm: f64,
        /// Mean Δ_T.
        mean_delta_t: f64,
        /// Mean bound.
        mean_bound: f64,
        /// Share of perturbed trials with cost ≤ predicted_cost.
        predicted_bounds_fraction: f64,
        /// Median cost/predicted_cost.
        median_cost_to_predicted: f64,
        /// c (see `experiment::reference`).
        rate: f64,
        /// How c was found.
        rate_method: &'static str,
        /// c fitted to the unperturbed run.
        rate_fitted: f64,
        /// c as the largest step ratio.
        rate_max_ratio: f64,
        /// c from the model's known spectrum.
        rate_analytic: f64,
        /// ‖x(0) − x*‖.
        initial_distance: f64,
        /// Iterations run to find x* (empty: the model's known optimum).
        optimum_iterations: Option<usize>,
        /// Iterations of the unperturbed run.
        baseline_iterations: usize,
        /// Convergence criterion used.
        criterion: f64,
        /// Model kind.
        model: &'static str,
        /// Dataset name.
        dataset: String,
        /// Real data or a stand-in.
        data: String,
    }
}

crate::csv_row! {
    /// A row of `baseline.csv`: one iteration k of the unperturbed run.
    pub(crate) struct BaselineRow / BaselineColumns {
        /// k.
        iteration: usize,
        /// The metric at x(k).
        metric: f64,
        /// ‖x(k) − x*‖.
        distance_to_optimum: f64,
        /// ‖x(k+1) − x(k)‖.
        step_norm: f64,
        /// The online predictor's ĉ after seeing x(0..=k).
        predicted_rate: f64,
        /// Its r̂0.
        predicted_initial_distance: f64,
    }
}
