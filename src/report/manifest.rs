//! `manifest.json`: everything needed to know how a result was produced.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::write_atomic;

/// The manifest written next to each scenario's CSV files.
#[derive(Clone, Debug, Serialize)]
pub struct Manifest {
    /// Program name and version.
    pub program: Program,
    /// Where the scenario came from (path or `bundled:<name>`).
    pub source: String,
    /// The resolved, validated scenario (after command-line overrides).
    pub scenario: serde_json::Value,
    /// The scenario file's text as read.
    pub scenario_toml: String,
    /// Identity of the run's inputs (program version, resolved scenario,
    /// stand-in or real data and scale): `reproduce --resume` keeps a
    /// finished folder only when this matches.
    pub fingerprint: String,
    /// The seed every random stream was derived from.
    pub seed: u64,
    /// Trials per point.
    pub trials: usize,
    /// The data used: dataset, real files or synthetic stand-in.
    pub data: serde_json::Value,
    /// Facts about the run specific to the scenario kind (e.g. the unperturbed run).
    pub details: serde_json::Value,
    /// Worker threads used.
    pub threads: usize,
    /// Wall-clock seconds spent on this scenario.
    pub wall_time_seconds: f64,
    /// Files written next to this manifest.
    pub files: Vec<String>,
}

/// Program identity.
#[derive(Clone, Debug, Serialize)]
pub struct Program {
    /// `scarsim`.
    pub name: &'static str,
    /// Cargo package version.
    pub version: &'static str,
}

impl Program {
    /// This build.
    pub fn current() -> Program {
        Program {
            name: env!("CARGO_PKG_NAME"),
            version: env!("CARGO_PKG_VERSION"),
        }
    }
}

impl Manifest {
    /// Writes the manifest atomically as pretty JSON.
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)?;
        bytes.push(b'\n');
        write_atomic(path, &bytes)
    }
}
