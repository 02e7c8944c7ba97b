//! Reading one member of a `.zip` archive (MovieLens and Jester ship as zips
//! and are read straight from them, without unpacking).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result, bail};

use super::DatasetName;

/// The error for a dataset archive that is not there, with what to do next.
pub(crate) fn missing_archive_error(dataset: DatasetName, expected: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "dataset `{dataset}`: file not found: expected {}.\n\
         Point --data-dir at a folder laid out like ../shared/data (one subfolder per dataset), \
         or pass --synthetic to use the generated stand-in.",
        expected.display()
    )
}

/// Reads member `member` of the zip archive at `path` into memory.
///
/// Errors name the archive: missing file (with the `--synthetic` hint), not a
/// zip or truncated (no readable central directory), missing member (listing
/// the members there are), and corrupt compressed data (a deflate or CRC-32
/// error while reading the member).
pub(crate) fn read_zip_member(dataset: DatasetName, path: &Path, member: &str) -> Result<Vec<u8>> {
    if !path.is_file() {
        return Err(missing_archive_error(dataset, path));
    }
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| {
        anyhow::anyhow!(
            "{}: not a readable zip archive ({e}); the file is corrupt or truncated, re-copy it",
            path.display()
        )
    })?;
    let names: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.ok().map(|n| n.to_string()))
        .collect();
    let mut entry = match zip.by_name(member) {
        Ok(e) => e,
        Err(zip::result::ZipError::FileNotFound) => {
            let mut shown: Vec<&str> = names.iter().map(String::as_str).take(10).collect();
            shown.sort_unstable();
            bail!(
                "{}: the archive has no member `{member}` (it has: {}{})",
                path.display(),
                shown.join(", "),
                if names.len() > 10 { ", ..." } else { "" }
            );
        }
        Err(e) => bail!(
            "{}: cannot read member `{member}`: {e}; the archive is corrupt, re-copy it",
            path.display()
        ),
    };
    let mut out = Vec::with_capacity(entry.size().min(1 << 30) as usize);
    entry.read_to_end(&mut out).map_err(|e| {
        anyhow::anyhow!(
            "{}: member `{member}` has corrupt compressed data ({e}); re-copy the file",
            path.display()
        )
    })?;
    Ok(out)
}

/// Writes a zip archive at `path` with the given (name, contents) members,
/// deflate-compressed. Used by tests and examples that need a small archive.
pub fn write_zip(path: &Path, members: &[(&str, &[u8])]) -> Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create folder {}", dir.display()))?;
    }
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in members {
        zip.start_file(*name, options)
            .with_context(|| format!("{}: cannot add member {name}", path.display()))?;
        zip.write_all(data)
            .with_context(|| format!("{}: cannot write member {name}", path.display()))?;
    }
    zip.finish()
        .with_context(|| format!("{}: cannot finish the archive", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("scarsim-zip-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&d).ok();
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_members_and_explains_failures() {
        let dir = tmp("a");
        let z = dir.join("a.zip");
        let body = "hello,world\n".repeat(2000);
        write_zip(&z, &[("x/a.csv", body.as_bytes()), ("b.txt", b"b")]).unwrap();
        assert_eq!(
            read_zip_member(DatasetName::Jester, &z, "x/a.csv").unwrap(),
            body.as_bytes()
        );

        let e = format!(
            "{:#}",
            read_zip_member(DatasetName::Jester, &z, "nope.csv").unwrap_err()
        );
        assert!(
            e.contains("no member `nope.csv`") && e.contains("x/a.csv"),
            "{e}"
        );

        let e = format!(
            "{:#}",
            read_zip_member(DatasetName::Jester, &dir.join("none.zip"), "a").unwrap_err()
        );
        assert!(e.contains("none.zip") && e.contains("--synthetic"), "{e}");

        let bytes = std::fs::read(&z).unwrap();
        let trunc = dir.join("t.zip");
        std::fs::write(&trunc, &bytes[..bytes.len() / 2]).unwrap();
        let e = format!(
            "{:#}",
            read_zip_member(DatasetName::Jester, &trunc, "x/a.csv").unwrap_err()
        );
        assert!(e.contains("t.zip") && e.contains("corrupt"), "{e}");

        // Flip a byte inside the compressed data: deflate or CRC error.
        let mut bad = bytes.clone();
        let at = 60.min(bad.len() / 4);
        bad[at] ^= 0xff;
        let badp = dir.join("c.zip");
        std::fs::write(&badp, &bad).unwrap();
        let e = format!(
            "{:#}",
            read_zip_member(DatasetName::Jester, &badp, "x/a.csv").unwrap_err()
        );
        assert!(e.contains("c.zip") && e.contains("corrupt"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
