//! Scenario text with its origin, for error messages that point at a line.

use std::ops::Range;

/// The text of a scenario file and where it came from.
pub(crate) struct SourceText<'a> {
    /// The whole file.
    pub(crate) text: &'a str,
    /// Path or `bundled:<name>`.
    pub(crate) origin: &'a str,
}

impl<'a> SourceText<'a> {
    /// Wraps a file's text.
    pub(crate) fn new(text: &'a str, origin: &'a str) -> Self {
        SourceText { text, origin }
    }

    /// 1-based line and column of byte offset `at`.
    pub(crate) fn line_col(&self, at: usize) -> (usize, usize) {
        let before = &self.text[..at.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    }

    /// An error about `field`, located at `span`.
    pub(crate) fn error_at(
        &self,
        span: Range<usize>,
        field: &str,
        msg: impl std::fmt::Display,
    ) -> anyhow::Error {
        let (line, col) = self.line_col(span.start);
        anyhow::anyhow!("{}:{line}:{col}: `{field}`: {msg}", self.origin)
    }

    /// An error about `field` with no precise location.
    pub(crate) fn error(&self, field: &str, msg: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!("{}: `{field}`: {msg}", self.origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns() {
        let s = SourceText::new("a = 1\nbb = 2\n", "f.toml");
        assert_eq!(s.line_col(0), (1, 1));
        assert_eq!(s.line_col(6), (2, 1));
        assert_eq!(s.line_col(11), (2, 6));
        let e = s.error_at(6..8, "bb", "too big").to_string();
        assert_eq!(e, "f.toml:2:1: `bb`: too big");
    }
}
