//! The columns of a `precision` scenario's `trials.csv`, `summary.csv`,
//! `trace.csv` and `baseline.csv` (see docs/OUTPUT.md).

crate::csv_row! {
    /// A row of `trials.csv`: the run at one mantissa width p.
    pub(crate) struct TrialRow / TrialColumns {
        /// p.
        mantissa_bits: u32,
        /// Run length.
        iterations: usize,
        /// Iterations at the end over which the floor is measured.
        tail: usize,
        /// Measured Δ = max_k ‖δ_k‖.
        max_rounding_norm: f64,
        /// Example 2.1's Δ = 2^{−(p−1)}·max_k ‖y(k)‖.
        predicted_delta: f64,
        /// max ‖y(k) − x*‖ over the last `tail` iterations.
        error_floor: f64,
        /// The same for the rounded state round_p(y(k)).
        stored_error_floor: f64,
        /// c/(1−c)·predicted_delta (Appendix B.1).
        predicted_floor: f64,
        /// c/(1−c)·max_rounding_norm.
        predicted_floor_measured_delta: f64,
        /// c^{iterations−tail}·‖x(0) − x*‖, the part of the Appendix B.1
        /// bound not yet decayed at the start of the tail.
        transient: f64,
        /// error_floor ≤ predicted_floor + transient.
        floor_within_prediction: bool,
        /// First k with metric(y(k)) ≤ ε (empty if never within the run).
        iterations_to_converge: Option<usize>,
        /// That minus the unperturbed run's B.
        iteration_cost: Option<f64>,
        /// Appendix B.1's bound with predicted_delta (empty where the paper
        /// calls it uninformative, c/(1−c)Δ ≥ ε).
        cost_bound: Option<f64>,
        /// c.
        rate: f64,
        /// ‖x(0) − x*‖.
        initial_distance: f64,
        /// ε.
        criterion: f64,
        /// B.
        baseline_iterations: usize,
    }
}

crate::csv_row! {
    /// A row of `summary.csv`: one mantissa width p (one deterministic run,
    /// so `std` and the interval are empty).
    pub(crate) struct SummaryRow / SummaryColumns {
        /// Scenario name.
        scenario: String,
        /// `round-to-nearest`.
        series: &'static str,
        /// `mantissa_bits`.
        x_name: &'static str,
        /// p.
        x: u32,
        /// `error_floor`.
        metric: &'static str,
        /// 1.
        trials: usize,
        /// The floor.
        mean: f64,
        /// Empty.
        std: Option<f64>,
        /// Empty.
        ci95_low: Option<f64>,
        /// Empty.
        ci95_high: Option<f64>,
        /// As in `trials.csv`.
        predicted_floor: f64,
        /// As in `trials.csv`.
        predicted_floor_measured_delta: f64,
        /// As in `trials.csv`.
        floor_within_prediction: bool,
        /// As in `trials.csv`.
        iteration_cost: Option<f64>,
        /// As in `trials.csv`.
        cost_bound: Option<f64>,
        /// c.
        rate: f64,
        /// How c was found.
        rate_method: &'static str,
        /// c from the model's known spectrum.
        rate_analytic: f64,
        /// Model kind.
        model: &'static str,
        /// Dataset name.
        dataset: String,
        /// Real data or a stand-in.
        data: String,
    }
}

crate::csv_row! {
    /// A row of `trace.csv`: at most 1,000 evenly spaced iterations per p.
    pub(crate) struct TraceRow / TraceColumns {
        /// p.
        mantissa_bits: u32,
        /// k.
        iteration: usize,
        /// ‖y(k) − x*‖.
        distance_to_optimum: f64,
        /// ‖δ_k‖.
        rounding_norm: f64,
    }
}

crate::csv_row! {
    /// A row of `baseline.csv`: one iteration k of the unrounded run.
    pub(crate) struct BaselineRow / BaselineColumns {
        /// k.
        iteration: usize,
        /// The metric at x(k).
        metric: f64,
        /// ‖x(k) − x*‖.
        distance_to_optimum: f64,
    }
}
