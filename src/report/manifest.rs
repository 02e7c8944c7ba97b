//! `manifest.json`: everything needed to know how a result was produced.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::outdir;

/// File name of a results folder's manifest.
pub(crate) const MANIFEST_FILE: &str = "manifest.json";

/// FNV-1a over bytes, as 16 hex digits (checksums and fingerprints).
pub fn fnv64(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The manifest written next to each scenario's CSV files.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Manifest {
    /// Program name and version.
    pub(crate) program: Program,
    /// Where the scenario came from (path or `bundled:<name>`).
    pub(crate) source: String,
    /// The resolved, validated scenario (after command-line overrides).
    pub(crate) scenario: serde_json::Value,
    /// The scenario file's text as read.
    pub(crate) scenario_toml: String,
    /// Identity of the run's inputs (program version, resolved scenario,
    /// stand-in or real data and scale): `reproduce --resume` keeps a
    /// finished folder only when this matches.
    pub(crate) fingerprint: String,
    /// The seed every random stream was derived from.
    pub(crate) seed: u64,
    /// Trials per point.
    pub(crate) trials: usize,
    /// The data used: dataset, real files or synthetic stand-in.
    pub(crate) data: serde_json::Value,
    /// Facts about the run specific to the scenario kind (e.g. the unperturbed run).
    pub(crate) details: serde_json::Value,
    /// Worker threads used.
    pub(crate) threads: usize,
    /// Wall-clock seconds spent on this scenario.
    pub(crate) wall_time_seconds: f64,
    /// Files written next to this manifest.
    pub(crate) files: Vec<String>,
    /// [`fnv64`] of each file's bytes, by file name: the manifest is written
    /// last, and a folder counts as finished only when every file it lists
    /// is there with these bytes ([`read_finished`]).
    pub(crate) checksums: BTreeMap<String, String>,
}

/// Program identity.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Program {
    /// `scarsim`.
    pub(crate) name: &'static str,
    /// Cargo package version.
    pub(crate) version: &'static str,
}

impl Program {
    /// This build.
    pub(crate) fn current() -> Program {
        Program {
            name: env!("CARGO_PKG_NAME"),
            version: env!("CARGO_PKG_VERSION"),
        }
    }
}

impl Manifest {
    /// Writes the manifest atomically as pretty JSON into the results
    /// folder `dir` (which must exist).
    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)?;
        bytes.push(b'\n');
        outdir::write_file(&outdir::file(dir, MANIFEST_FILE)?, &bytes)
    }
}

/// Removes `dir`'s manifest, if any: from then on the folder counts as
/// unfinished until a new manifest is written, last.
pub(crate) fn remove(dir: &Path) -> Result<()> {
    // A link is removed itself, never followed.
    let path = outdir::file(dir, MANIFEST_FILE)?;
    match std::fs::remove_file(&path) {
        Ok(()) => {
            outdir::sync_dir(dir);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

/// Reads a file inside a results folder (never through a link).
pub(crate) fn read_in(dir: &Path, name: &str) -> Result<Vec<u8>> {
    let path = outdir::join(dir, name)?;
    let mut bytes = Vec::new();
    outdir::open_read(&path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(bytes)
}

/// The manifest of a *finished* results folder: `manifest.json` is there
/// and every file it lists is present with the checksum it records. This is
/// the only test of completeness that readers (`plot`, `reproduce --resume`)
/// trust: a folder whose run stopped while writing (a full disk, a kill) has
/// no manifest, or files that do not match it.
pub(crate) fn read_finished(dir: &Path) -> Result<serde_json::Value> {
    if !dir.is_dir() {
        bail!("results folder {} does not exist", dir.display());
    }
    let path = outdir::join(dir, MANIFEST_FILE)?;
    if std::fs::symlink_metadata(&path).is_err() {
        let hint = if dir.join("units.jsonl").exists() {
            "; its run did not finish (finish it with the same command and --resume)"
        } else {
            " (written by `scarsim run` last, once every result file is complete)"
        };
        bail!(
            "{} is not a finished scarsim results folder: it has no {MANIFEST_FILE}{hint}",
            dir.display()
        );
    }
    let text = read_in(dir, MANIFEST_FILE)?;
    let manifest: serde_json::Value = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    let files = manifest["files"]
        .as_array()
        .with_context(|| format!("{}: no list of `files`", path.display()))?;
    let sums = manifest["checksums"].as_object().with_context(|| {
        format!(
            "{}: no `checksums` of its files (written by an older scarsim); run the scenario again",
            path.display()
        )
    })?;
    if files.is_empty() {
        bail!("{}: lists no files", path.display());
    }
    for f in files {
        let name = f
            .as_str()
            .with_context(|| format!("{}: `files` holds {f}, not a file name", path.display()))?;
        outdir::check_name(name, "file name in a manifest")
            .with_context(|| format!("{}", path.display()))?;
        let want = sums
            .get(name)
            .and_then(|v| v.as_str())
            .with_context(|| format!("{}: no checksum for {name}", path.display()))?;
        let bytes = read_in(dir, name).with_context(|| {
            format!(
                "{} is not a finished results folder: {name} is missing",
                dir.display()
            )
        })?;
        if fnv64(&bytes) != want {
            bail!(
                "{}/{name} does not match {MANIFEST_FILE} (it was changed, or its run stopped while                  rewriting it); run the scenario again",
                dir.display()
            );
        }
    }
    Ok(manifest)
}
