//! The `precision` scenario kind: reduced precision as a perturbation in
//! every iteration (SCAR Example 2.1, Example 3.3, Appendix B.1). The state
//! is rounded to a p-bit mantissa after every iteration; the run's error
//! floor is compared with the predicted irreducible error c/(1−c)·Δ.
//!
//! ```toml
//! kind = "precision"
//! name = "scar-precision-qp"
//! title = "Error floor of gradient descent with a p-bit mantissa: 4-D QP"
//! seed = 20181017
//!
//! [model]
//! kind = "qp"
//! step_size = 0.01
//!
//! [convergence]
//! unperturbed_iterations = 1000
//! max_iterations = 20000
//!
//! [theory]
//! optimum = "analytic"
//! rate = "max-ratio"
//!
//! [precision]
//! mantissa_bits = [4, 8, 12, 16, 20, 24, 32, 40, 48, 52]
//! iterations = 6000     # length of each reduced-precision run
//! tail = 1000           # the error floor is the largest error over the last `tail` iterations
//! ```
//!
//! Each mantissa width is one deterministic run (there is no `trials`).

use anyhow::Result;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::perturbation::{
    CriterionSpec, RawConvergence, RawTheory, TheorySpec, parse_convergence, parse_theory,
};
use super::{Meta, SourceText, check_name, limits};
use crate::model::ModelSpec;

/// The reduced-precision runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct PrecisionSpec {
    /// The mantissa widths p to run (significant bits, 1..=53).
    pub(crate) mantissa_bits: Vec<u32>,
    /// Iterations of each run.
    pub(crate) iterations: usize,
    /// The floor is measured over the last `tail` iterations.
    pub(crate) tail: usize,
}

/// A validated `precision` scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrecisionScenario {
    /// Name, title, paper panel, seed (trials is 1: each run is deterministic).
    pub(crate) meta: Meta,
    /// The model (it must have flat parameters).
    pub(crate) model: ModelSpec,
    /// ε, for the iteration cost of reduced precision.
    pub(crate) criterion: CriterionSpec,
    /// Censoring limit of the unperturbed run.
    pub(crate) max_iterations: usize,
    /// How x* and c are estimated.
    pub(crate) theory: TheorySpec,
    /// The reduced-precision runs.
    pub(crate) precision: PrecisionSpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[allow(dead_code)]
    kind: String,
    name: Spanned<String>,
    title: String,
    paper: Option<String>,
    seed: u64,
    model: Spanned<toml::Table>,
    convergence: Spanned<RawConvergence>,
    theory: Spanned<RawTheory>,
    precision: Spanned<RawPrecision>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrecision {
    mantissa_bits: Vec<u32>,
    iterations: usize,
    tail: usize,
}

/// Parses and validates a `precision` scenario.
pub(crate) fn parse(src: &SourceText) -> Result<PrecisionScenario> {
    let raw: Raw = toml::from_str(src.text)
        .map_err(|e| anyhow::anyhow!("{}: {}", src.origin, e.to_string().trim_end()))?;
    check_name(src, &raw.name)?;
    let model = ModelSpec::parse(src, raw.model.span(), raw.model.get_ref())?;
    let (criterion, max_iterations) = parse_convergence(src, &raw.convergence)?;
    let theory = parse_theory(src, &raw.theory, &model)?;
    let span = raw.precision.span();
    let p = raw.precision.get_ref();
    if p.mantissa_bits.is_empty() {
        return Err(src.error_at(span, "precision.mantissa_bits", "give at least one width"));
    }
    if let Some(b) = p.mantissa_bits.iter().find(|b| !(1..=53).contains(*b)) {
        return Err(src.error_at(
            span,
            "precision.mantissa_bits",
            format!("{b} is outside 1..=53 (significant bits of an f64, leading bit included)"),
        ));
    }
    limits::distinct(src, &span, "precision.mantissa_bits", &p.mantissa_bits)?;
    limits::iterations(src, &span, "precision.iterations", p.iterations)?;
    if p.tail == 0 || p.tail >= p.iterations {
        return Err(src.error_at(
            span,
            "precision.tail",
            format!(
                "must be between 1 and iterations − 1 = {}",
                p.iterations.saturating_sub(1)
            ),
        ));
    }
    Ok(PrecisionScenario {
        meta: Meta::new("precision", &raw.name, &raw.title, &raw.paper, 1, raw.seed),
        model,
        criterion,
        max_iterations,
        theory,
        precision: PrecisionSpec {
            mantissa_bits: p.mantissa_bits.clone(),
            iterations: p.iterations,
            tail: p.tail,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
kind = "precision"
name = "p"
title = "test"
seed = 1

[model]
kind = "qp"
step_size = 0.01

[convergence]
criterion = 1e-4
max_iterations = 5000

[theory]
optimum_iterations = 5000

[precision]
mantissa_bits = [8, 24]
iterations = 3000
tail = 500
"#;

    #[test]
    fn parses_and_checks() {
        let s = parse(&SourceText::new(GOOD, "p.toml")).unwrap();
        assert_eq!(s.precision.mantissa_bits, vec![8, 24]);
        assert_eq!(s.meta.trials, 1);
        for (from, to, want) in [
            ("[8, 24]", "[8, 60]", "outside 1..=53"),
            ("tail = 500", "tail = 3000", "precision.tail"),
            ("seed = 1", "seed = 1\ntrials = 4", "unknown field `trials`"),
        ] {
            let e = parse(&SourceText::new(&GOOD.replace(from, to), "p.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
