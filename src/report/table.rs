//! A tidy table: named columns, one observation per row, written as CSV.

use std::path::Path;

use anyhow::{Context, Result};

/// Column names and rows of already-formatted cells.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows; each has one cell per column.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these columns.
    pub(crate) fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (must have one cell per column).
    pub(crate) fn push(&mut self, row: Vec<String>) {
        assert_eq!(
            row.len(),
            self.header.len(),
            "row width must match the header"
        );
        self.rows.push(row);
    }

    /// The CSV text (RFC 4180 quoting where needed, `\n` line ends).
    pub(crate) fn to_csv(&self) -> Result<Vec<u8>> {
        let mut w = csv::WriterBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        w.write_record(&self.header)?;
        for r in &self.rows {
            w.write_record(r)?;
        }
        w.into_inner().context("cannot finish CSV")
    }

    /// Writes the table atomically to `path`.
    #[cfg(test)]
    pub(crate) fn write(&self, path: &Path) -> Result<()> {
        let bytes = self
            .to_csv()
            .with_context(|| format!("cannot format {}", path.display()))?;
        super::atomic::write_atomic(path, &bytes)
    }

    /// Reads a CSV file written by `Table::write`.
    pub fn read(path: &Path) -> Result<Table> {
        let mut r = csv::Reader::from_path(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let header = r
            .headers()
            .with_context(|| format!("cannot read the header of {}", path.display()))?
            .iter()
            .map(String::from)
            .collect();
        let mut rows = Vec::new();
        for (i, rec) in r.records().enumerate() {
            let rec =
                rec.with_context(|| format!("{}: bad CSV record {}", path.display(), i + 2))?;
            rows.push(rec.iter().map(String::from).collect());
        }
        Ok(Table { header, rows })
    }

    /// Index of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }
}

/// Formats a number for CSV: shortest round-trip decimal; NaN as an empty cell.
pub fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip() {
        let mut t = Table::new(["a", "b"]);
        t.push(vec!["1".into(), "x,y".into()]);
        let bytes = t.to_csv().unwrap();
        assert_eq!(String::from_utf8(bytes).unwrap(), "a,b\n1,\"x,y\"\n");
        let dir = std::env::temp_dir().join(format!("scarsim-table-{}", std::process::id()));
        let p = dir.join("t.csv");
        t.write(&p).unwrap();
        assert_eq!(Table::read(&p).unwrap(), t);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn numbers() {
        assert_eq!(fmt_f64(0.1), "0.1");
        assert_eq!(fmt_f64(f64::NAN), "");
        assert_eq!(fmt_f64(3.0), "3");
    }
}
