//! Jester dataset 1, **part 1 only** (`jester-data-1.csv` inside
//! `jester/jester-data-1.zip`): 24,983 users × 100 jokes.
//!
//! SCAR Appendix D trains on "Jester 2+", which could not be obtained; part 1
//! of Jester dataset 1 is used instead and every output says so. As in
//! Appendix D, users with no ratings are removed (part 1 has none: every user
//! rated at least 36 jokes) and ratings are rescaled from [−10, 10] to
//! [0, 10] by `r ↦ (r + 10) / 2`.
//!
//! The CSV has no header; each row is one user: the number of jokes rated,
//! then the ratings of jokes 1..=100 (reals from −10 to 10, `99` = not rated).

use std::path::Path;

use anyhow::{Result, bail};

use super::ratings::{Entry, Ratings};
use super::{DatasetName, Provenance, archive};

/// The archive in the `jester/` folder.
pub(crate) const ARCHIVE: &str = "jester-data-1.zip";
/// The member holding the ratings.
pub(crate) const MEMBER: &str = "jester-data-1.csv";
/// Number of jokes (columns after the count).
pub(crate) const JOKES: usize = 100;
/// The "not rated" marker.
pub(crate) const NOT_RATED: f32 = 99.0;
/// Users in part 1.
pub(crate) const USERS: usize = 24_983;
/// Ratings in part 1.
pub(crate) const RATINGS: usize = 1_810_455;
/// Which data this is, for outputs.
pub(crate) const VERSION_NOTE: &str = "Jester dataset 1, part 1 (jester-data-1: 24,983 users x 100 jokes); \
     the paper's Jester 2+ is not available";

/// Rescales a Jester rating from [−10, 10] to [0, 10] (SCAR Appendix D).
#[inline]
pub(crate) fn rescale(r: f32) -> f32 {
    (r + 10.0) / 2.0
}

/// Loads part 1 from `dir` (the `jester/` folder).
pub(crate) fn load(dir: &Path) -> Result<Ratings> {
    let path = dir.join(ARCHIVE);
    let bytes = archive::read_zip_member(DatasetName::Jester, &path, MEMBER)?;
    let label = path.join(MEMBER);
    let (entries, rows, empty) = parse(&bytes, &label)?;
    let ratings = Ratings::from_entries(
        DatasetName::Jester,
        entries,
        &label,
        Provenance::Real { files: vec![path] },
        String::new(),
    )?;
    let notes = format!(
        "{VERSION_NOTE}; {rows} users in the file, {empty} with no ratings removed; \
         ratings rescaled from [-10, 10] to [0, 10]"
    );
    Ok(Ratings { notes, ..ratings })
}

/// Parses the CSV text. Returns the rescaled ratings (user id = 1-based
/// row, item id = joke 1..=100), the number of rows and the number of rows
/// with no rating (which are left out). `label` names the file in errors.
pub(crate) fn parse(bytes: &[u8], label: &Path) -> Result<(Vec<Entry>, usize, usize)> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{}: not UTF-8 text ({e})", label.display()))?;
    let mut out = Vec::with_capacity(text.len() / 7);
    let (mut rows, mut empty) = (0usize, 0usize);
    for (i, line) in text.split('\n').enumerate() {
        let lineno = i + 1;
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            continue;
        }
        rows += 1;
        let mut fields = line.split(',');
        let first = fields.next().unwrap_or("");
        let count: usize = match first.trim().parse::<f64>() {
            Ok(v) if v.fract() == 0.0 && (0.0..=JOKES as f64).contains(&v) => v as usize,
            _ => bail!(
                "{} line {lineno}: field 1 (number of jokes rated) is {:?}, expected an integer 0..=100",
                label.display(),
                first
            ),
        };
        let mut rated = 0usize;
        let mut fields_seen = 1usize;
        for (joke, field) in fields.enumerate() {
            fields_seen += 1;
            if joke >= JOKES {
                continue;
            }
            let v: f32 = match field.trim().parse::<f32>() {
                Ok(v) if v == NOT_RATED || (-10.0..=10.0).contains(&v) => v,
                _ => bail!(
                    "{} line {lineno}: field {} (joke {}) is {:?}, expected a rating from -10 to 10 or 99 (not rated)",
                    label.display(),
                    joke + 2,
                    joke + 1,
                    field
                ),
            };
            if v != NOT_RATED {
                rated += 1;
                out.push(Entry {
                    user: rows as u64,
                    item: joke as u64 + 1,
                    value: rescale(v),
                    line: lineno,
                });
            }
        }
        if fields_seen != JOKES + 1 {
            bail!(
                "{} line {lineno}: expected 101 comma-separated fields (the count and 100 jokes), found {fields_seen}",
                label.display()
            );
        }
        if rated != count {
            bail!(
                "{} line {lineno}: field 1 says {count} jokes were rated but {rated} fields are not 99",
                label.display()
            );
        }
        if rated == 0 {
            empty += 1;
        }
    }
    if out.is_empty() {
        bail!("{}: no ratings", label.display());
    }
    Ok((out, rows, empty))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ratings: &[(usize, f32)]) -> String {
        let mut v = vec!["99".to_string(); JOKES];
        for &(j, r) in ratings {
            v[j] = format!("{r}");
        }
        format!("{},{}", ratings.len(), v.join(","))
    }

    #[test]
    fn parses_rescales_and_drops_empty_users() {
        let text = format!(
            "{}\n{}\n{}\n",
            row(&[(0, -10.0), (99, 10.0)]),
            row(&[]),
            row(&[(5, 0.0), (6, 3.5), (0, -2.0)])
        );
        let (e, rows, empty) = parse(text.as_bytes(), Path::new("j.csv")).unwrap();
        assert_eq!((rows, empty, e.len()), (3, 1, 5));
        assert_eq!((e[0].user, e[0].item, e[0].value), (1, 1, 0.0));
        assert_eq!((e[1].item, e[1].value), (100, 10.0));
        assert_eq!((e[2].user, e[2].value, e[2].line), (3, 4.0, 3));
        let r = Ratings::from_entries(
            DatasetName::Jester,
            e,
            Path::new("j.csv"),
            Provenance::Real { files: vec![] },
            String::new(),
        )
        .unwrap();
        // The empty user is gone; jokes 1, 6, 7, 100 remain.
        assert_eq!((r.users, r.items, r.len()), (2, 4, 5));
    }

    #[test]
    fn bad_rows_name_their_line() {
        let good = row(&[(0, 1.0)]);
        let cases = [
            (row(&[(3, 12.0)]), "joke 4"),
            (good.replacen(",99", ",abc", 1), "expected a rating"),
            (good.replacen("1,", "2,", 1), "says 2 jokes"),
            (good.rsplit_once(',').unwrap().0.to_string(), "found 100"),
            (format!("x,{}", &good[2..]), "field 1"),
        ];
        for (bad, needle) in cases {
            let text = format!("{good}\n{bad}\n");
            let err = parse(text.as_bytes(), Path::new("j.csv"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("j.csv line 2") && err.contains(needle),
                "{needle}: {err}"
            );
        }
    }
}
