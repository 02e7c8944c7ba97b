//! A results folder read back from disk: `summary.csv`, `trials.csv` and
//! `manifest.json`. Figures and the reproduction report are drawn from these
//! files alone, so `scarsim plot` works on any results folder without
//! re-running anything.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::report::Table;

/// One scenario's results.
#[derive(Clone, Debug)]
pub struct Results {
    /// The folder.
    pub(crate) dir: PathBuf,
    /// `manifest.json`.
    pub(crate) manifest: Value,
    /// `summary.csv`: one row per (series, x).
    pub(crate) summary: Table,
    /// `trials.csv` (one row per trial), when the folder has one.
    pub(crate) trials: Option<Table>,
}

/// One row of `summary.csv`, as numbers.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SummaryRow {
    /// Series name.
    pub(crate) series: String,
    /// Value of the swept parameter.
    pub(crate) x: f64,
    /// Mean over trials.
    pub(crate) mean: f64,
    /// Lower end of the 95% CI (NaN if absent).
    pub(crate) lo: f64,
    /// Upper end of the 95% CI (NaN if absent).
    pub(crate) hi: f64,
}

/// The data a scenario ran on, as its manifest tells.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DataLabel {
    /// Dataset name (`mnist`, `covtype`, …), if known.
    pub(crate) dataset: Option<String>,
    /// `Some(true)` for real files, `Some(false)` for a synthetic stand-in.
    pub(crate) real: Option<bool>,
    /// Size of a stand-in relative to the real dataset.
    pub(crate) scale: Option<f64>,
}

impl DataLabel {
    /// "real MNIST", "synthetic stand-in for MNIST (scale 0.05)", …
    pub(crate) fn describe(&self) -> String {
        if self.dataset.as_deref() == Some("none") {
            return "no dataset (objective defined in code)".to_string();
        }
        let name = self
            .dataset
            .as_deref()
            .map(pretty_dataset)
            .unwrap_or_else(|| "the data".to_string());
        match (self.real, self.scale) {
            (Some(true), _) => format!("real {name}"),
            (Some(false), Some(s)) if s != 1.0 => {
                format!("synthetic stand-in for {name} (scale {s})")
            }
            (Some(false), _) => format!("synthetic stand-in for {name}"),
            (None, _) => name,
        }
    }

    /// "real" or "stand-in" (or "unknown").
    pub(crate) fn short(&self) -> &'static str {
        match self.real {
            Some(true) => "real",
            Some(false) => "stand-in",
            None => "unknown",
        }
    }
}

/// The paper's spelling of a dataset name.
pub(crate) fn pretty_dataset(name: &str) -> String {
    match name {
        "mnist" => "MNIST",
        "covtype" => "CoverType",
        "movielens" => "MovieLens",
        "jester" => "Jester",
        "20news" => "20 Newsgroups",
        "reuters" => "Reuters",
        other => other,
    }
    .to_string()
}

impl Results {
    /// Reads a finished results folder: its `manifest.json` (which must list
    /// every file with a matching checksum, see
    /// `crate::report::manifest::read_finished`), `summary.csv` (which
    /// must have rows) and, if the manifest lists it, `trials.csv`.
    pub fn load(dir: &Path) -> Result<Results> {
        let manifest = crate::report::manifest::read_finished(dir)?;
        let listed = |name: &str| {
            manifest["files"]
                .as_array()
                .is_some_and(|f| f.iter().any(|v| v.as_str() == Some(name)))
        };
        if !listed("summary.csv") {
            bail!(
                "{} is not a scarsim results folder: its manifest lists no summary.csv",
                dir.display()
            );
        }
        let summary_path = dir.join("summary.csv");
        let summary = Table::read(&summary_path)?;
        if summary.rows.is_empty() {
            bail!(
                "{} has a header but no rows: there is nothing to draw or report",
                summary_path.display()
            );
        }
        let trials = if listed("trials.csv") {
            Some(Table::read(&dir.join("trials.csv"))?)
        } else {
            None
        };
        Ok(Results {
            dir: dir.to_path_buf(),
            manifest,
            summary,
            trials,
        })
    }

    /// A field of the scenario's common metadata (`scenario.meta.<key>`).
    fn meta(&self, key: &str) -> Option<&Value> {
        let sc = &self.manifest["scenario"];
        sc.get("meta")
            .and_then(|m| m.get(key))
            .or_else(|| sc.get(key))
    }

    /// The scenario kind (`recovery`, …); empty if the manifest does not say.
    pub(crate) fn kind(&self) -> String {
        self.meta("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    /// The scenario name (the folder name if the manifest does not say).
    pub(crate) fn name(&self) -> String {
        self.meta("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| {
                self.dir
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default()
            })
    }

    /// The scenario's one-line title.
    pub(crate) fn title(&self) -> String {
        self.meta("title")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| self.name())
    }

    /// The paper panel it reproduces (`SCAR Fig. 6(a)`), if any.
    pub(crate) fn paper(&self) -> Option<String> {
        self.meta("paper")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// Trials per point.
    pub(crate) fn trials_per_point(&self) -> Option<u64> {
        self.manifest["trials"]
            .as_u64()
            .or_else(|| self.meta("trials").and_then(Value::as_u64))
    }

    /// Seconds the run took.
    pub(crate) fn wall_time_seconds(&self) -> Option<f64> {
        self.manifest["wall_time_seconds"].as_f64()
    }

    /// CPU seconds the run used, all threads (from the manifest; absent for
    /// merged shards and older manifests).
    pub(crate) fn cpu_time_seconds(&self) -> Option<f64> {
        self.manifest["details"]["cpu_time_seconds"].as_f64()
    }

    /// Units that took their outcome from another scenario of the same
    /// `reproduce` instead of running (absent in older manifests).
    pub(crate) fn units_from_other_scenarios(&self) -> Option<u64> {
        self.manifest["details"]["units_from_other_scenarios"].as_u64()
    }

    /// Real or synthetic data, from the manifest (or the `data` CSV column).
    pub(crate) fn data(&self) -> DataLabel {
        let d = &self.manifest["data"];
        let first = |col: &str| {
            self.summary
                .column(col)
                .and_then(|c| self.summary.rows.first().map(|r| r[c].clone()))
        };
        let kind = d["provenance"]["kind"]
            .as_str()
            .map(str::to_string)
            .or_else(|| first("data"));
        DataLabel {
            dataset: d["dataset"]
                .as_str()
                .map(str::to_string)
                .or_else(|| first("dataset")),
            real: kind.as_deref().and_then(|k| match k {
                "real" => Some(true),
                "synthetic" => Some(false),
                _ => None,
            }),
            scale: d["provenance"]["scale"].as_f64(),
        }
    }

    /// "scenario · paper panel · data · N trials per point".
    pub(crate) fn subtitle(&self) -> String {
        let mut parts = vec![self.name()];
        if let Some(p) = self.paper() {
            parts.push(p);
        }
        parts.push(self.data().describe());
        if let Some(n) = self.trials_per_point() {
            parts.push(format!("{n} trials per point"));
        }
        parts.join(" · ")
    }

    /// The first value of column `col` in `summary.csv`.
    pub(crate) fn first_value(&self, col: &str) -> Option<String> {
        let c = self.summary.column(col)?;
        self.summary.rows.first().map(|r| r[c].clone())
    }

    /// The swept parameter (`x_name` column), if the summary has one.
    pub(crate) fn x_name(&self) -> Option<String> {
        self.first_value("x_name")
    }

    /// The value of column `col` in the first summary row of `series`.
    pub(crate) fn series_value(&self, series: &str, col: &str) -> Option<String> {
        let s = self.summary.column("series")?;
        let c = self.summary.column(col)?;
        self.summary
            .rows
            .iter()
            .find(|r| r[s] == series)
            .map(|r| r[c].clone())
    }

    /// Summary rows as numbers. Needs `x` and `mean`; `series` defaults to
    /// the metric name and the CI columns to NaN.
    pub(crate) fn rows(&self) -> Result<Vec<SummaryRow>> {
        let path = self.dir.join("summary.csv");
        let t = &self.summary;
        let need = |name: &str| {
            t.column(name).with_context(|| {
                format!(
                    "{}: no `{name}` column; a figure needs `x` and `mean` (columns: {})",
                    path.display(),
                    t.header.join(", ")
                )
            })
        };
        let x = need("x")?;
        let mean = need("mean")?;
        let series = t.column("series");
        let lo = t.column("ci95_low");
        let hi = t.column("ci95_high");
        let metric = self.first_value("metric").unwrap_or_else(|| "mean".into());
        let num = |row: &[String], c: Option<usize>, line: usize| -> Result<f64> {
            let Some(c) = c else { return Ok(f64::NAN) };
            let cell = row[c].trim();
            if cell.is_empty() {
                return Ok(f64::NAN);
            }
            cell.parse::<f64>().with_context(|| {
                format!(
                    "{} line {line}: `{}` is {cell:?}, not a number",
                    path.display(),
                    t.header[c]
                )
            })
        };
        t.rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                Ok(SummaryRow {
                    series: series.map_or_else(|| metric.clone(), |c| r[c].clone()),
                    x: num(r, Some(x), i + 2)?,
                    mean: num(r, Some(mean), i + 2)?,
                    lo: num(r, lo, i + 2)?,
                    hi: num(r, hi, i + 2)?,
                })
            })
            .collect()
    }

    /// Series names in order of first appearance in `summary.csv`.
    pub(crate) fn series_names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = Vec::new();
        for r in self.rows()? {
            if !names.contains(&r.series) {
                names.push(r.series);
            }
        }
        Ok(names)
    }

    /// Whether the scenario marks `series` as a reference (not swept; drawn
    /// as a dashed line), from `scenario.series[].reference` in the manifest.
    pub(crate) fn is_reference(&self, series: &str) -> bool {
        self.manifest["scenario"]["series"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["name"].as_str() == Some(series) && s["reference"].as_bool() == Some(true))
    }

    /// Per-trial values of column `col` for (`series`, `x`) from
    /// `trials.csv`, keyed by trial index (sorted).
    pub(crate) fn trial_values(&self, series: &str, x: f64, col: &str) -> Result<Vec<(u64, f64)>> {
        let path = self.dir.join("trials.csv");
        let t = self
            .trials
            .as_ref()
            .with_context(|| format!("{} is missing", path.display()))?;
        let column = |name: &str| {
            t.column(name)
                .with_context(|| format!("{}: no `{name}` column", path.display()))
        };
        let (cs, cx, ct, cv) = (
            column("series")?,
            column("x")?,
            column("trial")?,
            column(col)?,
        );
        let mut out = Vec::new();
        for (i, r) in t.rows.iter().enumerate() {
            if r[cs] != series {
                continue;
            }
            let rx: f64 = r[cx].parse().unwrap_or(f64::NAN);
            if (rx - x).abs() > 1e-9 * x.abs().max(1.0) {
                continue;
            }
            let trial: u64 = r[ct].parse().with_context(|| {
                format!(
                    "{} line {}: bad trial index {:?}",
                    path.display(),
                    i + 2,
                    r[ct]
                )
            })?;
            let v: f64 = r[cv].parse().with_context(|| {
                format!("{} line {}: `{col}` is {:?}", path.display(), i + 2, r[cv])
            })?;
            out.push((trial, v));
        }
        out.sort_by_key(|p| p.0);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_labels() {
        let d = DataLabel {
            dataset: Some("covtype".into()),
            real: Some(false),
            scale: Some(0.05),
        };
        assert_eq!(
            d.describe(),
            "synthetic stand-in for CoverType (scale 0.05)"
        );
        let r = DataLabel {
            dataset: Some("mnist".into()),
            real: Some(true),
            scale: None,
        };
        assert_eq!(r.describe(), "real MNIST");
        assert_eq!(r.short(), "real");
    }

    #[test]
    fn missing_files_are_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("scarsim-results-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = Results::load(&dir).unwrap_err().to_string();
        assert!(e.contains("not a finished scarsim results folder"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
