//! Reading the regular files of a tar archive, gzip-compressed or not, in one
//! streaming pass (the `tar` and `flate2` crates).
//!
//! The text corpora (20 Newsgroups, Reuters-21578) are read straight from
//! their archives as they are distributed, without unpacking them to disk.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result, bail};
use flate2::read::MultiGzDecoder;

/// Calls `visit(member path, member bytes)` for every regular file of the
/// archive at `path`, in archive order. A gzip-compressed archive (gzip magic
/// bytes) is decompressed on the fly. Corrupt or truncated gzip or tar data
/// is an error naming the archive and the member being read.
pub(crate) fn for_each_file(
    path: &Path,
    mut visit: impl FnMut(&str, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut magic = [0u8; 2];
    let gz = matches!(file.read(&mut magic), Ok(2)) && magic == [0x1f, 0x8b];
    drop(file);
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    if !gz && path.extension().is_some_and(|e| e == "gz") {
        bail!(
            "{}: named .gz but is not gzip-compressed (no gzip magic bytes 1f 8b)",
            path.display()
        );
    }
    let reader: Box<dyn Read> = if gz {
        Box::new(MultiGzDecoder::new(BufReader::new(file)))
    } else {
        Box::new(BufReader::new(file))
    };
    let what = if gz { "gzip or tar" } else { "tar" };
    let broken = |member: Option<&str>| {
        let at = member.map_or_else(String::new, |m| format!(" (while reading member {m})"));
        format!(
            "{}: corrupt or truncated {what} data{at}; re-copy the archive",
            path.display()
        )
    };
    let mut archive = tar::Archive::new(reader);
    let mut buf = Vec::new();
    let mut members = 0usize;
    for entry in archive.entries().with_context(|| broken(None))? {
        let mut entry = entry.with_context(|| broken(None))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry
            .path()
            .with_context(|| broken(None))?
            .to_string_lossy()
            .into_owned();
        buf.clear();
        entry
            .read_to_end(&mut buf)
            .with_context(|| broken(Some(&name)))?;
        members += 1;
        visit(&name, &buf)?;
    }
    if members == 0 {
        bail!(
            "{}: not a tar archive, or an empty one (no files found)",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use flate2::{Compression, write::GzEncoder};
    use std::io::Write;

    /// A tar.gz (as bytes) holding `files` (name, content).
    pub(crate) fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, name, *data).unwrap();
        }
        let tar = builder.into_inner().unwrap();
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(&tar).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn reads_members_and_rejects_truncated_archives() {
        let dir = std::env::temp_dir().join(format!("scarsim-tar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let gz = tar_gz(&[("a/one.txt", b"hello"), ("a/two.bin", &big)]);
        let ok = dir.join("ok.tar.gz");
        std::fs::write(&ok, &gz).unwrap();
        let mut seen = Vec::new();
        for_each_file(&ok, |name, data| {
            seen.push((name.to_string(), data.len()));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                ("a/one.txt".to_string(), 5),
                ("a/two.bin".to_string(), 50_000)
            ]
        );

        let cut = dir.join("cut.tar.gz");
        std::fs::write(&cut, &gz[..gz.len() * 2 / 3]).unwrap();
        let err = format!("{:#}", for_each_file(&cut, |_, _| Ok(())).unwrap_err());
        assert!(
            err.contains("cut.tar.gz") && err.contains("truncated"),
            "{err}"
        );

        let fake = dir.join("fake.tar.gz");
        std::fs::write(&fake, b"not an archive at all").unwrap();
        let err = format!("{:#}", for_each_file(&fake, |_, _| Ok(())).unwrap_err());
        assert!(err.contains("not gzip"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
