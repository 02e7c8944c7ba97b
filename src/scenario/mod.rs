//! Scenario files: TOML in, a validated [`Scenario`] out.
//!
//! Like ripgrep's low-level/high-level arguments, parsing happens in two
//! steps: serde reads the file into raw structs that reject unknown fields
//! (with line and column), then one `resolve` function per scenario kind
//! checks every value and builds the typed configuration the rest of the
//! program trusts. A scenario argument is either a path to a `.toml` file or
//! the name of a bundled scenario (see `scarsim list`).

pub mod bundled;
pub mod faults;
pub mod limits;
mod models;
pub mod perturbation;
pub(crate) mod precision;
pub(crate) mod protocol;
pub(crate) mod recovery;
mod series;
mod source;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

pub use faults::FaultsScenario;
pub use perturbation::PerturbationScenario;
pub(crate) use precision::PrecisionScenario;
pub use protocol::ProtocolScenario;
pub use recovery::{DataOrderMode, PointConfig, RecoveryScenario, SeriesSpec, Sweep, SweepAxis};
pub(crate) use source::SourceText;

/// Fields every scenario has.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Meta {
    /// Kind of experiment (`recovery`, …).
    pub kind: String,
    /// Short name; also the name of the output folder.
    pub(crate) name: String,
    /// One-line title for figures and listings.
    pub(crate) title: String,
    /// The paper figure or panel this scenario reproduces, if any.
    pub(crate) paper: Option<String>,
    /// Trials per point.
    pub(crate) trials: usize,
    /// Seed from which every random stream is derived.
    pub(crate) seed: u64,
}

impl Meta {
    /// The common fields of a scenario of `kind`, from its file's `name`,
    /// `title`, `paper` and `seed` and its validated trial count.
    pub(crate) fn new(
        kind: &str,
        name: &toml::Spanned<String>,
        title: &str,
        paper: &Option<String>,
        trials: usize,
        seed: u64,
    ) -> Meta {
        Meta {
            kind: kind.into(),
            name: name.get_ref().clone(),
            title: title.into(),
            paper: paper.clone(),
            trials,
            seed,
        }
    }
}

/// A validated scenario of any kind.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Scenario {
    /// SCAR partial-recovery and priority-checkpoint experiments.
    Recovery(RecoveryScenario),
    /// SCAR iteration-cost experiments: perturbations against Theorem 1's bound.
    Perturbation(PerturbationScenario),
    /// Reduced precision: the error floor against the irreducible error c/(1−c)·Δ.
    Precision(PrecisionScenario),
    /// Dutta et al. K-sync/K-batch-sync/K-async/K-batch-async SGD in wall-clock time.
    Protocol(ProtocolScenario),
    /// Parameter-server failures in wall-clock time (SCAR §4, §5.5; Cao et al. 2024).
    Faults(FaultsScenario),
}

/// The scenario kinds this build understands, with a one-line description.
pub(crate) const KINDS: &[(&str, &str)] = &[
    (
        "recovery",
        "SCAR failure/recovery trials: rework iterations of full vs partial recovery and checkpoint policies",
    ),
    (
        "perturbation",
        "SCAR iteration-cost trials: random, adversarial or reset perturbations against Theorem 1's bound",
    ),
    (
        "precision",
        "reduced precision: error floor of a p-bit mantissa against the irreducible error c/(1-c)·Δ",
    ),
    (
        "protocol",
        "Dutta et al. straggler simulation: runtime per iteration and loss vs wall-clock time of K-sync/K-batch-sync/K-async/K-batch-async SGD",
    ),
    (
        "faults",
        "PS failures in wall-clock time: checkpoint-restart, SCAR, chain replication and the stateless PS; Daly's time split and checkpoint interval",
    ),
];

impl Scenario {
    /// The common fields.
    pub fn meta(&self) -> &Meta {
        match self {
            Scenario::Recovery(s) => &s.meta,
            Scenario::Perturbation(s) => &s.meta,
            Scenario::Precision(s) => &s.meta,
            Scenario::Protocol(s) => &s.meta,
            Scenario::Faults(s) => &s.meta,
        }
    }

    /// Replaces the trial count and seed (command-line overrides).
    pub fn override_trials_and_seed(
        &mut self,
        trials: Option<usize>,
        seed: Option<u64>,
    ) -> Result<()> {
        let meta = match self {
            Scenario::Recovery(s) => &mut s.meta,
            Scenario::Perturbation(s) => &mut s.meta,
            // Each mantissa width is one deterministic run: `--trials` does not apply.
            Scenario::Precision(s) => {
                if let Some(seed) = seed {
                    s.meta.seed = seed;
                }
                return Ok(());
            }
            Scenario::Protocol(s) => &mut s.meta,
            Scenario::Faults(s) => &mut s.meta,
        };
        if let Some(t) = trials {
            if t == 0 {
                bail!("--trials must be at least 1");
            }
            if t > limits::MAX_TRIALS {
                bail!(
                    "--trials {t} is more than the limit of {} trials per point",
                    limits::MAX_TRIALS
                );
            }
            meta.trials = t;
        }
        if let Some(s) = seed {
            meta.seed = s;
        }
        Ok(())
    }
}

/// Where a scenario came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Origin {
    /// A file path, or `bundled:<name>`.
    pub(crate) label: String,
    /// The file, when it was read from disk.
    pub(crate) path: Option<PathBuf>,
}

/// The trial count when a scenario file gives none (the papers' 100 trials
/// per point); serde's default for every kind's `trials` field.
pub(crate) fn default_trials() -> toml::Spanned<usize> {
    toml::Spanned::new(0..0, 100)
}

/// Reads and validates a scenario given as a path or a bundled name.
pub fn load(arg: &str) -> Result<(Scenario, Origin, String)> {
    let path = Path::new(arg);
    let looks_like_path = arg.ends_with(".toml") || arg.contains('/') || path.is_file();
    if looks_like_path {
        if let Ok(m) = std::fs::metadata(path)
            && m.len() > limits::MAX_SCENARIO_BYTES
        {
            bail!(
                "scenario file {} is {} bytes, more than the limit of {} (a scenario is a short TOML file)",
                path.display(),
                m.len(),
                limits::MAX_SCENARIO_BYTES
            );
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read scenario file {}", path.display()))?;
        let origin = Origin {
            label: path.display().to_string(),
            path: Some(path.to_path_buf()),
        };
        let scenario = parse(&text, &origin.label)?;
        return Ok((scenario, origin, text));
    }
    match bundled::find(arg) {
        Some(text) => {
            let origin = Origin {
                label: format!("bundled:{arg}"),
                path: None,
            };
            let scenario = parse(text, &origin.label)?;
            Ok((scenario, origin, text.to_string()))
        }
        None => bail!(
            "no scenario file `{arg}` and no bundled scenario of that name; `scarsim list` shows the bundled ones"
        ),
    }
}

/// Parses and validates scenario text; `origin` names it in error messages.
pub fn parse(text: &str, origin: &str) -> Result<Scenario> {
    if text.len() as u64 > limits::MAX_SCENARIO_BYTES {
        bail!(
            "{origin}: {} bytes, more than the limit of {} for a scenario",
            text.len(),
            limits::MAX_SCENARIO_BYTES
        );
    }
    let src = SourceText::new(text, origin);
    let table: toml::Table =
        toml::from_str(text).map_err(|e| anyhow::anyhow!("{origin}: malformed TOML: {e}"))?;
    let kind = match table.get("kind") {
        Some(toml::Value::String(k)) => k.clone(),
        Some(other) => bail!(
            "{origin}: `kind` must be a string, found {}",
            other.type_str()
        ),
        None => bail!(
            "{origin}: missing field `kind`; expected one of: {}",
            KINDS.iter().map(|k| k.0).collect::<Vec<_>>().join(", ")
        ),
    };
    match kind.as_str() {
        "recovery" => Ok(Scenario::Recovery(recovery::parse(&src)?)),
        "perturbation" => Ok(Scenario::Perturbation(perturbation::parse(&src)?)),
        "precision" => Ok(Scenario::Precision(precision::parse(&src)?)),
        "protocol" => Ok(Scenario::Protocol(protocol::parse(&src)?)),
        "faults" => Ok(Scenario::Faults(faults::parse(&src)?)),
        other => bail!(
            "{origin}: unknown scenario kind `{other}`; expected one of: {}",
            KINDS.iter().map(|k| k.0).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Checks that a scenario name is usable as a folder name.
pub(crate) fn check_name(src: &SourceText, name: &toml::Spanned<String>) -> Result<()> {
    let n = name.get_ref();
    let ok = !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c))
        && !n.starts_with('.');
    if !ok {
        return Err(src.error_at(
            name.span(),
            "name",
            format!("{n:?} is not a valid scenario name: use lowercase letters, digits, '-', '_' and '.' (it names the output folder)"),
        ));
    }
    Ok(())
}
