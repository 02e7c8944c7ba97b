//! MovieLens `ml-latest-small`, October 2016 release (SCAR §5.1, Appendix D:
//! "671 users and 9,125 items"), read from `ratings.csv` inside
//! `movielens-small/ml-latest-small.zip`.
//!
//! `ratings.csv` is `userId,movieId,rating,timestamp` with a header line and
//! CRLF line endings; ratings are 0.5–5.0 stars in half-star steps. The 2016
//! file has 100,004 ratings by 671 users of 9,066 distinct movies: the other
//! 59 of the 9,125 movies in `movies.csv` have no rating and are not part of
//! the matrix (their factors could never change the loss). Ratings are used
//! as they are (no centring or rescaling).

use std::path::Path;

use anyhow::{Result, bail};

use super::ratings::{Entry, Ratings};
use super::{DatasetName, Provenance, archive};

/// The archive in the `movielens-small/` folder.
pub(crate) const ARCHIVE: &str = "ml-latest-small.zip";
/// The member holding the ratings.
pub(crate) const MEMBER: &str = "ml-latest-small/ratings.csv";
/// The header line of `ratings.csv`.
pub(crate) const HEADER: &str = "userId,movieId,rating,timestamp";
/// Users in the 2016 release.
pub(crate) const USERS: usize = 671;
/// Movies with at least one rating in the 2016 release.
pub(crate) const ITEMS: usize = 9_066;
/// Ratings in the 2016 release.
pub(crate) const RATINGS: usize = 100_004;

/// Loads the ratings from `dir` (the `movielens-small/` folder).
pub(crate) fn load(dir: &Path) -> Result<Ratings> {
    let path = dir.join(ARCHIVE);
    let bytes = archive::read_zip_member(DatasetName::Movielens, &path, MEMBER)?;
    let label = path.join(MEMBER);
    let entries = parse(&bytes, &label)?;
    let n = entries.len();
    let ratings = Ratings::from_entries(
        DatasetName::Movielens,
        entries,
        &label,
        Provenance::Real { files: vec![path] },
        String::new(),
    )?;
    let notes = format!(
        "MovieLens ml-latest-small (2016): {} users x {} rated movies, {n} ratings (movies without ratings are not in the matrix)",
        ratings.users, ratings.items
    );
    Ok(Ratings { notes, ..ratings })
}

/// Parses `ratings.csv`; `label` names the file in errors (e.g.
/// `…/ml-latest-small.zip/ml-latest-small/ratings.csv`).
pub(crate) fn parse(bytes: &[u8], label: &Path) -> Result<Vec<Entry>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{}: not UTF-8 text ({e})", label.display()))?;
    let mut lines = text.split('\n').enumerate();
    let header = lines
        .next()
        .map(|(_, l)| l.trim_end_matches('\r').trim_start_matches('\u{feff}'))
        .unwrap_or("");
    if header != HEADER {
        bail!(
            "{} line 1: expected the header `{HEADER}`, found {:?}",
            label.display(),
            header
        );
    }
    let mut out = Vec::with_capacity(text.len() / 24);
    for (i, line) in lines {
        let lineno = i + 1;
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != 4 {
            bail!(
                "{} line {lineno}: expected 4 comma-separated fields ({HEADER}), found {}",
                label.display(),
                fields.len()
            );
        }
        let id = |col: usize, name: &str| -> Result<u64> {
            match fields[col].trim().parse::<u64>() {
                Ok(v) if v > 0 => Ok(v),
                _ => bail!(
                    "{} line {lineno}: {name} is {:?}, expected a positive integer",
                    label.display(),
                    fields[col]
                ),
            }
        };
        let user = id(0, "userId")?;
        let item = id(1, "movieId")?;
        let value: f32 = match fields[2].trim().parse::<f32>() {
            Ok(v) if (0.5..=5.0).contains(&v) => v,
            _ => bail!(
                "{} line {lineno}: rating is {:?}, expected a number from 0.5 to 5.0",
                label.display(),
                fields[2]
            ),
        };
        if fields[3].trim().parse::<i64>().is_err() {
            bail!(
                "{} line {lineno}: timestamp is {:?}, expected an integer (Unix seconds)",
                label.display(),
                fields[3]
            );
        }
        out.push(Entry {
            user,
            item,
            value,
            line: lineno,
        });
    }
    if out.is_empty() {
        bail!("{}: no ratings after the header", label.display());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label() -> &'static Path {
        Path::new("ratings.csv")
    }

    #[test]
    fn parses_crlf_rows() {
        let text = "userId,movieId,rating,timestamp\r\n1,31,2.5,1260759144\r\n1,1029,3.0,1260759179\r\n2,31,5.0,1\r\n";
        let e = parse(text.as_bytes(), label()).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(
            (e[1].user, e[1].item, e[1].value, e[1].line),
            (1, 1029, 3.0, 3)
        );
        let r = Ratings::from_entries(
            DatasetName::Movielens,
            e,
            label(),
            Provenance::Real { files: vec![] },
            String::new(),
        )
        .unwrap();
        assert_eq!((r.users, r.items, r.len()), (2, 2, 3));
    }

    #[test]
    fn bad_rows_name_their_line() {
        let head = "userId,movieId,rating,timestamp\n1,31,2.5,1\n";
        for (row, needle) in [
            ("2,31,7.5,1", "rating"),
            ("2,x,1.0,1", "movieId"),
            ("0,3,1.0,1", "userId"),
            ("2,31,1.0", "found 3"),
            ("2,31,1.0,yesterday", "timestamp"),
        ] {
            let text = format!("{head}{row}\n");
            let err = parse(text.as_bytes(), label()).unwrap_err().to_string();
            assert!(
                err.contains("ratings.csv line 3") && err.contains(needle),
                "{row}: {err}"
            );
        }
        let err = parse(b"user,movie\n1,2\n", label())
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1") && err.contains("header"), "{err}");
    }
}
