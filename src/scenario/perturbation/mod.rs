//! The `perturbation` scenario kind: SCAR's iteration-cost experiments
//! (§3, Figures 3–5). A perturbation is injected into the training state —
//! once at a chosen iteration, or in every iteration with probability ρ —
//! and the run continues to convergence; each trial records ‖δ‖, Δ_T, the
//! measured iteration cost and Theorem 1's bound.
//!
//! ```toml
//! kind = "perturbation"
//! name = "scar-bound-qp-single"
//! title = "Iteration cost of one random perturbation: 4-D QP"
//! paper = "SCAR Fig. 3(a,b)"
//! trials = 1000
//! seed = 20181017
//!
//! [model]
//! kind = "qp"
//! step_size = 0.01
//!
//! [convergence]
//! unperturbed_iterations = 1000   # ε just below ‖x(999) − x*‖, or: criterion = 8.7e-5
//! max_iterations = 20000
//!
//! [theory]
//! optimum = "analytic"            # x* known (qp), or: optimum_iterations = N (x* := x(N))
//! rate = "max-ratio"              # max-ratio | fitted | analytic (qp only)
//!
//! [[series]]
//! name = "random"
//! perturbation = "random"         # random | adversarial | reset
//! at = { iteration = 500 }        # or { probability = 0.001 } (each iteration)
//! norm = { distribution = "log-uniform", min = 1e-4, max = 1.0 }   # random, adversarial
//! # fraction = { distribution = "uniform", min = 0.0, max = 1.0 }  # reset
//! ```

use anyhow::Result;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::series::{self, NameRule};
use super::{Meta, SourceText, check_name, limits};
use crate::model::ModelSpec;

/// What a perturbation does to the state (SCAR §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum PerturbationKind {
    /// δ = s·g/‖g‖ with g ~ N(0, I) over the flat parameter vector and s the
    /// drawn target norm (Figure 3, Figure 4(a)).
    Random,
    /// δ = s·(y − x*)/‖y − x*‖: away from the (estimated) optimum, the
    /// direction that increases the distance most (Figure 4(b)).
    Adversarial,
    /// A uniformly random set of round(f·n) of the n blocks (at least one) is
    /// set back to its value in x(0), f drawn per perturbation (Figure 5).
    Reset,
}

impl PerturbationKind {
    /// The name used in scenarios and CSV files.
    pub(crate) fn name(self) -> &'static str {
        match self {
            PerturbationKind::Random => "random",
            PerturbationKind::Adversarial => "adversarial",
            PerturbationKind::Reset => "reset",
        }
    }
}

/// When perturbations are injected.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// Once, into the state x(T) of the unperturbed run: y(T+1) = f(x(T) + δ_T).
    Once {
        /// T.
        iteration: usize,
    },
    /// Once, at T = ⌊f·B⌋ with B the unperturbed run's iteration count
    /// (`at = { run_fraction = f }`): Figure 4 perturbs at iteration 50 of a
    /// run that meets ε after ~100, i.e. halfway. Unlike a fixed T it stays
    /// before B on any data, stand-ins included.
    AtRunFraction {
        /// f, in (0, 1).
        fraction: f64,
    },
    /// Independently in every iteration with probability ρ, until the
    /// perturbed run converges (Figure 3(c)).
    EachIteration {
        /// ρ.
        probability: f64,
    },
}

impl Schedule {
    /// The iteration of the one perturbation of a run whose unperturbed
    /// counterpart converges at iteration `b`; `None` for ρ per iteration.
    pub(crate) fn once_at(&self, b: usize) -> Option<usize> {
        match *self {
            Schedule::Once { iteration } => Some(iteration),
            Schedule::AtRunFraction { fraction } => Some((fraction * b as f64).floor() as usize),
            Schedule::EachIteration { .. } => None,
        }
    }
}

/// A distribution for a positive number drawn once per perturbation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "distribution", rename_all = "kebab-case")]
pub(crate) enum Draw {
    /// Always `value`.
    Fixed {
        /// The value.
        value: f64,
    },
    /// Uniform on [min, max].
    Uniform {
        /// Lower end.
        min: f64,
        /// Upper end.
        max: f64,
    },
    /// exp(U[ln min, ln max]): every decade equally likely.
    LogUniform {
        /// Lower end (> 0).
        min: f64,
        /// Upper end.
        max: f64,
    },
}

impl Draw {
    /// One draw from `u`, a uniform number in [0, 1).
    pub(crate) fn at(&self, u: f64) -> f64 {
        match *self {
            Draw::Fixed { value } => value,
            Draw::Uniform { min, max } => min + (max - min) * u,
            Draw::LogUniform { min, max } => (min.ln() + (max.ln() - min.ln()) * u).exp(),
        }
    }
}

/// What a drawn perturbation norm is measured in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum NormScale {
    /// The norm is ‖δ‖ itself (default).
    #[default]
    Absolute,
    /// The norm is a multiple of the perturbed state's distance to the
    /// estimated optimum, ‖y(ℓ) − x*‖ (scale-free across datasets).
    OptimumDistance,
}

/// The size of random and adversarial perturbations.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct NormSpec {
    /// Distribution of the norm.
    pub(crate) draw: Draw,
    /// Unit of the drawn number.
    pub(crate) relative_to: NormScale,
}

/// How the linear rate c used in the bound is obtained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RateMethod {
    /// max_k ‖x(k+1) − x*‖/‖x(k) − x*‖ over the unperturbed run k = 0..B
    /// (default): the smallest c for which assumption (3) holds at every
    /// step of the measured run.
    #[default]
    MaxRatio,
    /// e^slope of the least-squares line through ln‖x(k) − x*‖ over the
    /// unperturbed run k = 0..=B: the average contraction. Below the
    /// max-ratio rate when the run decelerates (MLR by SGD), so assumption
    /// (3) fails late in the run.
    Fitted,
    /// The known rate of the model (QP: max|1 − αλ_i|).
    Analytic,
}

impl RateMethod {
    /// The name used in scenarios and CSV files.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RateMethod::Fitted => "fitted",
            RateMethod::MaxRatio => "max-ratio",
            RateMethod::Analytic => "analytic",
        }
    }
}

/// How the convergence criterion ε is set.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CriterionSpec {
    /// ε itself (for a scaled-down stand-in it is scaled like the recovery kind).
    Value(f64),
    /// ε = (1 − 10⁻⁹)·metric(x(n−1)): the unperturbed run converges at
    /// iteration n (for a decreasing metric), and its last unconverged iterate
    /// sits just above ε, so the integer count n − 1 equals the continuous
    /// count log(‖x(0) − x*‖/ε)/log(1/c) of an exactly geometric run (the
    /// baseline of SCAR eq. 4) without rounding slack.
    UnperturbedIterations(usize),
}

/// How the optimum x* is obtained.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OptimumSpec {
    /// x* := x(N), the unperturbed run continued (same data order) to N
    /// iterations ("x* estimated by running to convergence").
    LongRun {
        /// N.
        iterations: usize,
    },
    /// The model's known optimum (QP: x* = A⁻¹b).
    Analytic,
}

/// The theory settings: how x* and c are estimated.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct TheorySpec {
    /// How x* is obtained.
    pub(crate) optimum: OptimumSpec,
    /// How c is obtained.
    pub(crate) rate: RateMethod,
}

/// One series: a perturbation kind, schedule and size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PerturbationSeries {
    /// Series name (legend, `series` column).
    pub(crate) name: String,
    /// What the perturbation does.
    pub(crate) kind: PerturbationKind,
    /// When it strikes.
    pub schedule: Schedule,
    /// Norm of random/adversarial perturbations.
    pub(crate) norm: Option<NormSpec>,
    /// Fraction of blocks reset (reset perturbations).
    pub(crate) fraction: Option<Draw>,
}

/// A validated `perturbation` scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PerturbationScenario {
    /// Name, title, paper panel, trials, seed.
    pub(crate) meta: Meta,
    /// The model.
    pub(crate) model: ModelSpec,
    /// ε.
    pub(crate) criterion: CriterionSpec,
    /// Perturbed runs are censored here.
    pub(crate) max_iterations: usize,
    /// How x* and c are estimated.
    pub(crate) theory: TheorySpec,
    /// The series (at least one); every series runs `meta.trials` trials.
    pub series: Vec<PerturbationSeries>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[allow(dead_code)]
    kind: String,
    name: Spanned<String>,
    title: String,
    paper: Option<String>,
    #[serde(default = "super::default_trials")]
    trials: Spanned<usize>,
    seed: u64,
    model: Spanned<toml::Table>,
    convergence: Spanned<RawConvergence>,
    theory: Spanned<RawTheory>,
    series: Spanned<Vec<Spanned<RawSeries>>>,
}

/// `[convergence]` of the perturbation and precision kinds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConvergence {
    criterion: Option<f64>,
    unperturbed_iterations: Option<usize>,
    max_iterations: usize,
}

/// `[theory]` of the perturbation and precision kinds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTheory {
    optimum_iterations: Option<usize>,
    optimum: Option<RawOptimum>,
    #[serde(default)]
    rate: RateMethod,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum RawOptimum {
    Analytic,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeries {
    name: String,
    perturbation: PerturbationKind,
    at: RawAt,
    norm: Option<RawDraw>,
    fraction: Option<RawDraw>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAt {
    iteration: Option<usize>,
    run_fraction: Option<f64>,
    probability: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDraw {
    distribution: String,
    value: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    relative_to: Option<NormScale>,
}

/// Validates `[convergence]`: returns (ε spec, max_iterations).
pub(crate) fn parse_convergence(
    src: &SourceText,
    raw: &Spanned<RawConvergence>,
) -> Result<(CriterionSpec, usize)> {
    let span = raw.span();
    let c = raw.get_ref();
    let criterion = match (c.criterion, c.unperturbed_iterations) {
        (Some(e), None) if e.is_finite() && e > 0.0 => CriterionSpec::Value(e),
        (Some(e), None) => {
            return Err(src.error_at(
                span,
                "convergence.criterion",
                format!("{e} must be a positive number"),
            ));
        }
        (None, Some(n)) if n >= 1 => CriterionSpec::UnperturbedIterations(n),
        (None, Some(_)) => {
            return Err(src.error_at(
                span,
                "convergence.unperturbed_iterations",
                "must be at least 1",
            ));
        }
        _ => {
            return Err(src.error_at(
                span,
                "convergence",
                "give exactly one of `criterion` (ε) or `unperturbed_iterations` \
                 (ε set so that the unperturbed run converges at that iteration)",
            ));
        }
    };
    if c.max_iterations == 0 {
        return Err(src.error_at(span, "convergence.max_iterations", "must be at least 1"));
    }
    limits::iterations(src, &span, "convergence.max_iterations", c.max_iterations)?;
    if let CriterionSpec::UnperturbedIterations(n) = criterion
        && n > c.max_iterations
    {
        return Err(src.error_at(
            span,
            "convergence.unperturbed_iterations",
            format!("{n} exceeds max_iterations = {}", c.max_iterations),
        ));
    }
    Ok((criterion, c.max_iterations))
}

/// Validates `[theory]` for `model`.
pub(crate) fn parse_theory(
    src: &SourceText,
    raw: &Spanned<RawTheory>,
    model: &ModelSpec,
) -> Result<TheorySpec> {
    let t = raw.get_ref();
    let optimum = match (t.optimum_iterations, &t.optimum) {
        (Some(0), None) => {
            return Err(src.error_at(
                raw.span(),
                "theory.optimum_iterations",
                "must be at least 1",
            ));
        }
        (Some(iterations), None) => OptimumSpec::LongRun {
            iterations: limits::iterations(
                src,
                &raw.span(),
                "theory.optimum_iterations",
                iterations,
            )?,
        },
        (None, Some(RawOptimum::Analytic)) => {
            if analytic_optimum(model).is_none() {
                return Err(src.error_at(
                    raw.span(),
                    "theory.optimum",
                    format!(
                        "`analytic` needs a model with a known optimum (qp); estimate `{}`'s with \
                         `optimum_iterations = N` (x* := x(N))",
                        model.kind_name()
                    ),
                ));
            }
            OptimumSpec::Analytic
        }
        _ => {
            return Err(src.error_at(
                raw.span(),
                "theory",
                "give exactly one of `optimum_iterations = N` (x* := x(N) of the unperturbed run \
                 continued) or `optimum = \"analytic\"` (the model's known optimum)",
            ));
        }
    };
    if t.rate == RateMethod::Analytic && analytic_rate(model).is_none() {
        return Err(src.error_at(
            raw.span(),
            "theory.rate",
            format!(
                "`analytic` needs a model with a known rate (qp); `{}` has none: use `fitted` or `max-ratio`",
                model.kind_name()
            ),
        ));
    }
    Ok(TheorySpec {
        optimum,
        rate: t.rate,
    })
}

/// The model's known optimum as flat parameters, where it is known (QP: A⁻¹b).
pub(crate) fn analytic_optimum(model: &ModelSpec) -> Option<Vec<f64>> {
    match model {
        ModelSpec::Qp { .. } => Some(crate::model::quadratic::qp::OPTIMUM.to_vec()),
        _ => None,
    }
}

/// The model's analytic linear rate c, where it is known (QP: max|1 − αλ_i|).
pub(crate) fn analytic_rate(model: &ModelSpec) -> Option<f64> {
    match model {
        ModelSpec::Qp { step_size, .. } => {
            Some(crate::model::quadratic::qp::contraction_rate(*step_size))
        }
        _ => None,
    }
}

fn parse_draw(
    src: &SourceText,
    span: std::ops::Range<usize>,
    field: &str,
    raw: &RawDraw,
    unit_interval: bool,
) -> Result<Draw> {
    let err = |msg: String| src.error_at(span.clone(), field, msg);
    let draw = match (raw.distribution.as_str(), raw.value, raw.min, raw.max) {
        ("fixed", Some(value), None, None) => Draw::Fixed { value },
        ("uniform", None, Some(min), Some(max)) => Draw::Uniform { min, max },
        ("log-uniform", None, Some(min), Some(max)) => Draw::LogUniform { min, max },
        ("fixed", ..) => return Err(err("a fixed draw takes exactly `value`".into())),
        ("uniform" | "log-uniform", ..) => {
            return Err(err(format!(
                "a {} draw takes exactly `min` and `max`",
                raw.distribution
            )));
        }
        (other, ..) => {
            return Err(err(format!(
                "unknown distribution `{other}`; expected `fixed`, `uniform` or `log-uniform`"
            )));
        }
    };
    let (lo, hi) = match draw {
        Draw::Fixed { value } => (value, value),
        Draw::Uniform { min, max } | Draw::LogUniform { min, max } => (min, max),
    };
    if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
        return Err(err(format!("need finite min ≤ max, got {lo} and {hi}")));
    }
    let positive_low = matches!(draw, Draw::LogUniform { .. } | Draw::Fixed { .. });
    if lo < 0.0 || (positive_low && lo <= 0.0) {
        return Err(err(format!(
            "{lo} must be positive{}",
            if matches!(draw, Draw::Uniform { .. }) {
                " or zero"
            } else {
                ""
            }
        )));
    }
    if unit_interval && hi > 1.0 {
        return Err(err(format!("{hi} is a fraction and must be at most 1")));
    }
    if hi <= 0.0 {
        return Err(err("the draw must be able to exceed zero".into()));
    }
    Ok(draw)
}

/// Parses and validates a `perturbation` scenario.
pub(crate) fn parse(src: &SourceText) -> Result<PerturbationScenario> {
    let raw: Raw = toml::from_str(src.text)
        .map_err(|e| anyhow::anyhow!("{}: {}", src.origin, e.to_string().trim_end()))?;
    check_name(src, &raw.name)?;
    let trials = limits::trials(src, raw.trials.span(), *raw.trials.get_ref())?;
    let model = ModelSpec::parse(src, raw.model.span(), raw.model.get_ref())?;
    let (criterion, max_iterations) = parse_convergence(src, &raw.convergence)?;
    let theory = parse_theory(src, &raw.theory, &model)?;
    series::check_list(src, &raw.series.span(), raw.series.get_ref().len())?;
    let mut series: Vec<PerturbationSeries> = Vec::new();
    for rs in raw.series.get_ref() {
        let span = rs.span();
        let rs = rs.get_ref();
        series::check_name(src, span.clone(), &rs.name, NameRule::Stated)?;
        series::check_new(
            src,
            span.clone(),
            &rs.name,
            series.iter().map(|s| s.name.as_str()),
        )?;
        let schedule = parse_schedule(src, span.clone(), rs)?;
        let (norm, fraction) = parse_size(src, span.clone(), rs)?;
        series.push(PerturbationSeries {
            name: rs.name.clone(),
            kind: rs.perturbation,
            schedule,
            norm,
            fraction,
        });
    }
    Ok(PerturbationScenario {
        meta: Meta::new(
            "perturbation",
            &raw.name,
            &raw.title,
            &raw.paper,
            trials,
            raw.seed,
        ),
        model,
        criterion,
        max_iterations,
        theory,
        series,
    })
}

/// A series' `at`: one perturbation at an iteration or at a fraction of the
/// unperturbed run, or one with probability ρ at every iteration.
fn parse_schedule(
    src: &SourceText,
    span: std::ops::Range<usize>,
    rs: &RawSeries,
) -> Result<Schedule> {
    Ok(
        match (rs.at.iteration, rs.at.run_fraction, rs.at.probability) {
            (Some(iteration), None, None) => Schedule::Once {
                iteration: limits::iterations(src, &span, "series.at.iteration", iteration)?,
            },
            (None, Some(f), None) if f > 0.0 && f < 1.0 => Schedule::AtRunFraction { fraction: f },
            (None, Some(f), None) => {
                return Err(src.error_at(
                    span,
                    "series.at.run_fraction",
                    format!(
                        "{f} is outside (0, 1): the perturbation must come before the run converges"
                    ),
                ));
            }
            (None, None, Some(p)) if p > 0.0 && p <= 1.0 => {
                Schedule::EachIteration { probability: p }
            }
            (None, None, Some(p)) => {
                return Err(src.error_at(
                    span,
                    "series.at.probability",
                    format!("{p} is outside (0, 1]"),
                ));
            }
            _ => {
                return Err(src.error_at(
                    span,
                    "series.at",
                    "give exactly one of `iteration` (one perturbation), `run_fraction` (one \
                 perturbation at that fraction of the unperturbed run) or `probability` (ρ per \
                 iteration)",
                ));
            }
        },
    )
}

/// A series' size: the norm of a random or adversarial perturbation, or the
/// fraction of the blocks a reset perturbation resets.
fn parse_size(
    src: &SourceText,
    span: std::ops::Range<usize>,
    rs: &RawSeries,
) -> Result<(Option<NormSpec>, Option<Draw>)> {
    Ok(match rs.perturbation {
        PerturbationKind::Random | PerturbationKind::Adversarial => {
            if rs.fraction.is_some() {
                return Err(src.error_at(
                    span,
                    "series.fraction",
                    format!(
                        "only reset perturbations take a fraction; a {} perturbation takes `norm`",
                        rs.perturbation.name()
                    ),
                ));
            }
            let Some(n) = &rs.norm else {
                return Err(src.error_at(
                    span,
                    "series.norm",
                    format!(
                        "a {} perturbation needs `norm = {{ distribution = ..., ... }}`",
                        rs.perturbation.name()
                    ),
                ));
            };
            let draw = parse_draw(src, span.clone(), "series.norm", n, false)?;
            (
                Some(NormSpec {
                    draw,
                    relative_to: n.relative_to.unwrap_or_default(),
                }),
                None,
            )
        }
        PerturbationKind::Reset => {
            if rs.norm.is_some() {
                return Err(src.error_at(
                    span,
                    "series.norm",
                    "a reset perturbation takes `fraction` (of the blocks), not `norm`",
                ));
            }
            let Some(f) = &rs.fraction else {
                return Err(src.error_at(
                    span,
                    "series.fraction",
                    "a reset perturbation needs `fraction = { distribution = ..., ... }`",
                ));
            };
            if f.relative_to.is_some() {
                return Err(src.error_at(
                    span,
                    "series.fraction.relative_to",
                    "only norms are relative to something",
                ));
            }
            (
                None,
                Some(parse_draw(src, span.clone(), "series.fraction", f, true)?),
            )
        }
    })
}

#[cfg(test)]
mod tests;
