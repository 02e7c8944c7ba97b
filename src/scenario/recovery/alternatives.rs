//! `[[robustness]]`: other readings of a scenario's model-specific knobs
//! that `scarsim reproduce --robustness` tries besides the scenario's own
//! (issue 16: MF's λ, the iteration at which LDA's criterion is crossed, the
//! CNN's convergence metric). Each names the fields it sets and removes:
//!
//! ```toml
//! [[robustness]]
//! label = "λ = 1"
//! set = { "model.regularization" = 1.0, "convergence.criterion" = 13135 }
//! unset = []    # dotted paths to remove, e.g. "model.window"
//! ```
//!
//! A reading is checked when the scenario is parsed: the scenario with it
//! applied must itself be a valid scenario, so a typo fails `scarsim
//! validate`, not the study.

use std::ops::Range;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::scenario::SourceText;

/// Most readings one scenario may list.
const MAX_ALTERNATIVES: usize = 8;

/// Top-level fields a reading may not change (they name or shape the scenario).
const FIXED: [&str; 7] = [
    "kind",
    "name",
    "title",
    "trials",
    "seed",
    "sweep",
    "robustness",
];

/// One other reading: the values it sets and the fields it removes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Alternative {
    /// Its name in the study's report and map.
    pub(crate) label: String,
    /// Dotted path → value.
    pub(crate) set: toml::Table,
    /// Dotted paths to remove.
    pub(crate) unset: Vec<String>,
}

/// A `[[robustness]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAlternative {
    label: String,
    #[serde(default)]
    set: toml::Table,
    #[serde(default)]
    unset: Vec<String>,
}

impl Alternative {
    /// `scenario` (a scenario's TOML as a table) with this reading applied.
    /// An error names the path that does not lead to a table (for `set`) or
    /// to an existing field (for `unset`).
    pub(crate) fn apply(&self, scenario: &mut toml::Table) -> Result<(), String> {
        for (path, value) in &self.set {
            let (parent, key) = parent_of(scenario, path)?;
            parent.insert(key.to_string(), value.clone());
        }
        for path in &self.unset {
            let (parent, key) = parent_of(scenario, path)?;
            if parent.remove(key).is_none() {
                return Err(format!("`{path}` is not a field of the scenario"));
            }
        }
        Ok(())
    }
}

/// The table holding the last segment of dotted `path`, and that segment.
fn parent_of<'a, 'p>(
    t: &'a mut toml::Table,
    path: &'p str,
) -> Result<(&'a mut toml::Table, &'p str), String> {
    let mut segments: Vec<&str> = path.split('.').collect();
    let key = segments.pop().unwrap_or_default();
    if key.is_empty() || segments.iter().any(|s| s.is_empty()) {
        return Err(format!(
            "`{path}` is not a dotted path like `model.regularization`"
        ));
    }
    let top = segments.first().copied().unwrap_or(key);
    if FIXED.contains(&top) {
        return Err(format!(
            "`{path}`: a reading may not change `{top}` (fixed: {})",
            FIXED.join(", ")
        ));
    }
    let mut here = t;
    for s in segments {
        here = match here.get_mut(s) {
            Some(toml::Value::Table(next)) => next,
            _ => return Err(format!("`{path}`: the scenario has no table `{s}` there")),
        };
    }
    Ok((here, key))
}

/// Validates the `[[robustness]]` tables of the scenario in `src`: labels
/// present and distinct, at most [`MAX_ALTERNATIVES`], and each reading,
/// applied, a valid scenario (checked with `check`).
pub(super) fn parse(
    src: &SourceText,
    span: Range<usize>,
    raws: &[RawAlternative],
    check: impl Fn(&str) -> Result<()>,
) -> Result<Vec<Alternative>> {
    if raws.len() > MAX_ALTERNATIVES {
        return Err(src.error_at(
            span,
            "robustness",
            format!(
                "{} readings; at most {MAX_ALTERNATIVES} (each multiplies the study's runs)",
                raws.len()
            ),
        ));
    }
    let mut out: Vec<Alternative> = Vec::new();
    for raw in raws {
        let label = raw.label.trim();
        if label.is_empty() || label.chars().count() > 60 {
            return Err(src.error_at(
                span.clone(),
                "robustness.label",
                "give each reading a label of 1 to 60 characters",
            ));
        }
        if out.iter().any(|a| a.label == label) {
            return Err(src.error_at(
                span.clone(),
                "robustness.label",
                format!("`{label}` is given twice"),
            ));
        }
        if raw.set.is_empty() && raw.unset.is_empty() {
            return Err(src.error_at(
                span.clone(),
                "robustness",
                format!("reading `{label}` changes nothing: give `set` or `unset`"),
            ));
        }
        let alt = Alternative {
            label: label.to_string(),
            set: raw.set.clone(),
            unset: raw.unset.clone(),
        };
        let mut whole: toml::Table = toml::from_str(src.text)
            .map_err(|e| src.error("robustness", format!("malformed TOML: {e}")))?;
        whole.remove("robustness");
        alt.apply(&mut whole).map_err(|e| {
            src.error_at(
                span.clone(),
                "robustness",
                format!("reading `{label}`: {e}"),
            )
        })?;
        let text = toml::to_string(&whole)
            .map_err(|e| src.error("robustness", format!("reading `{label}`: {e}")))?;
        check(&text).map_err(|e| {
            src.error_at(
                span.clone(),
                "robustness",
                format!("reading `{label}` does not give a valid scenario: {e:#}"),
            )
        })?;
        out.push(alt);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alt(set: &str, unset: &[&str]) -> Alternative {
        Alternative {
            label: "x".into(),
            set: toml::from_str(set).unwrap(),
            unset: unset.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_reading_sets_and_removes_dotted_paths() {
        let mut t: toml::Table =
            toml::from_str("name = \"a\"\n[model]\nwindow = 50\nmetric = \"running-mean\"\n")
                .unwrap();
        alt(
            r#""model.metric" = "subset"
"model.eval_examples" = 512"#,
            &["model.window"],
        )
        .apply(&mut t)
        .unwrap();
        let model = t["model"].as_table().unwrap();
        assert_eq!(model["metric"].as_str(), Some("subset"));
        assert_eq!(model["eval_examples"].as_integer(), Some(512));
        assert!(!model.contains_key("window"));
    }

    #[test]
    fn a_reading_names_what_it_cannot_change() {
        let mut t: toml::Table = toml::from_str("name = \"a\"\n[model]\nk = 1\n").unwrap();
        let e = alt(r#""name" = "b""#, &[]).apply(&mut t).unwrap_err();
        assert!(e.contains("may not change `name`"), "{e}");
        let e = alt(r#""cluster.ps_nodes" = 4"#, &[])
            .apply(&mut t)
            .unwrap_err();
        assert!(e.contains("no table `cluster`"), "{e}");
        let e = alt("", &["model.window"]).apply(&mut t).unwrap_err();
        assert!(e.contains("`model.window` is not a field"), "{e}");
        let e = alt(r#""model." = 1"#, &[]).apply(&mut t).unwrap_err();
        assert!(e.contains("dotted path"), "{e}");
    }
}
