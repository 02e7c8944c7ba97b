//! The checks every scenario kind makes on its `[[series]]` list: that it is
//! there and not too long, that each series name is usable as a CSV cell,
//! and that no name appears twice.

use std::ops::Range;

use anyhow::Result;

use super::{SourceText, limits};

/// Refuses an empty `[[series]]` list ("at least one [[series]] is needed")
/// and one longer than [`limits::MAX_LIST`]; `span` is the list's.
pub(crate) fn check_list(src: &SourceText, span: &Range<usize>, len: usize) -> Result<()> {
    if len == 0 {
        return Err(src.error_at(span.clone(), "series", "at least one [[series]] is needed"));
    }
    limits::list_len(src, span, "series", len)
}

/// Whether a refused series name's error states the rule it breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// "… is not a usable series name (non-empty, no commas or quotes)".
    Stated,
    /// "… is not a usable series name" (the `faults` kind's wording).
    Unstated,
}

/// Refuses a series name that is empty (or blank) or holds a comma or a
/// double quote: it becomes a cell of the CSV files. The error (field
/// `series.name`) points at `span`, which each caller chooses (the list's or
/// the entry's).
pub(crate) fn check_name(
    src: &SourceText,
    span: Range<usize>,
    name: &str,
    rule: NameRule,
) -> Result<()> {
    if name.trim().is_empty() || name.contains(',') || name.contains('"') {
        let explain = match rule {
            NameRule::Stated => " (non-empty, no commas or quotes)",
            NameRule::Unstated => "",
        };
        return Err(src.error_at(
            span,
            "series.name",
            format!("{name:?} is not a usable series name{explain}"),
        ));
    }
    Ok(())
}

/// Refuses a series name already among `earlier` ("series `…` appears
/// twice", field `series.name`, at `span`).
pub(crate) fn check_new<'a>(
    src: &SourceText,
    span: Range<usize>,
    name: &str,
    mut earlier: impl Iterator<Item = &'a str>,
) -> Result<()> {
    if earlier.any(|e| e == name) {
        return Err(src.error_at(
            span,
            "series.name",
            format!("series `{name}` appears twice"),
        ));
    }
    Ok(())
}
