//! UCI Covertype (`covtype.data`, gzipped or not): 581,012 rows of 54 integer
//! features and a cover-type label 1..=7, comma-separated, no header.
//!
//! Features are used as they are in the file (no scaling). SCAR's Appendix D
//! learning rate of 1e-7 with a summed minibatch gradient only makes sense for
//! raw features (elevations in the thousands of metres); with it the
//! unperturbed run reaches the 6.7e5 criterion in about 60 iterations.

use std::path::Path;

use anyhow::{Result, bail};

use super::{Classification, DatasetName, Provenance, files};

/// File name of the data (before any `.gz`).
pub(crate) const DATA_FILE: &str = "covtype.data";
/// Number of feature columns.
pub(crate) const FEATURES: usize = 54;
/// Number of classes (labels 1..=7 in the file, 0..=6 in memory).
pub(crate) const CLASSES: usize = 7;

/// Loads Covertype from `dir` (the `covtype/` folder).
pub(crate) fn load(dir: &Path) -> Result<Classification> {
    let path = files::find(DatasetName::Covtype, dir, DATA_FILE)?;
    let bytes = files::read_maybe_gz(&path)?;
    let (x, y) = parse(&bytes, &path)?;
    Ok(Classification {
        name: DatasetName::Covtype,
        rows: y.len(),
        features: FEATURES,
        classes: CLASSES,
        x,
        y,
        provenance: Provenance::Real { files: vec![path] },
    })
}

/// Parses the CSV text: returns features (row-major) and 0-based labels.
pub(crate) fn parse(bytes: &[u8], path: &Path) -> Result<(Vec<f32>, Vec<u8>)> {
    let mut x = Vec::with_capacity(bytes.len() / 130 * FEATURES);
    let mut y = Vec::with_capacity(bytes.len() / 130);
    for (lineno, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let mut fields = 0usize;
        for (col, field) in line.split(|&b| b == b',').enumerate() {
            fields += 1;
            if col > FEATURES {
                continue;
            }
            let value = parse_int(field).ok_or_else(|| {
                anyhow::anyhow!(
                    "{} line {}: field {} is {:?}, expected an integer",
                    path.display(),
                    lineno + 1,
                    col + 1,
                    String::from_utf8_lossy(field)
                )
            })?;
            if col < FEATURES {
                x.push(value as f32);
            } else if (1..=CLASSES as i64).contains(&value) {
                y.push((value - 1) as u8);
            } else {
                bail!(
                    "{} line {}: cover type {} is outside 1..=7",
                    path.display(),
                    lineno + 1,
                    value
                );
            }
        }
        if fields != FEATURES + 1 {
            bail!(
                "{} line {}: expected {} comma-separated fields (54 features and the label), found {}",
                path.display(),
                lineno + 1,
                FEATURES + 1,
                fields
            );
        }
    }
    if y.is_empty() {
        bail!("{}: no data rows", path.display());
    }
    Ok((x, y))
}

fn parse_int(field: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(field).ok()?.trim();
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: u8) -> String {
        let mut v: Vec<String> = (0..FEATURES).map(|i| i.to_string()).collect();
        v.push(label.to_string());
        v.join(",")
    }

    #[test]
    fn parses_rows_and_labels() {
        let text = format!("{}\n{}\n", row(1), row(7));
        let (x, y) = parse(text.as_bytes(), Path::new("covtype.data")).unwrap();
        assert_eq!(y, vec![0, 6]);
        assert_eq!(x.len(), 2 * FEATURES);
        assert_eq!(x[FEATURES + 3], 3.0);
    }

    #[test]
    fn wrong_row_length_names_line() {
        let short: String = row(2).rsplit_once(',').unwrap().0.to_string();
        let text = format!("{}\n{}\n", row(1), short);
        let e = parse(text.as_bytes(), Path::new("covtype.data"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("found 54"), "{e}");
    }

    #[test]
    fn bad_label_and_bad_number() {
        let e = parse(row(9).as_bytes(), Path::new("c"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside 1..=7"), "{e}");
        let text = row(1).replacen("3", "x", 1);
        let e = parse(text.as_bytes(), Path::new("c"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected an integer"), "{e}");
    }
}
