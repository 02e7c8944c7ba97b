//! Reading dataset files that may or may not be gzip-compressed.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use flate2::read::MultiGzDecoder;

use super::{DatasetName, missing_file_error};

/// Finds `<dir>/<name>.gz` or `<dir>/<name>`, in that order.
pub(crate) fn find(dataset: DatasetName, dir: &Path, name: &str) -> Result<PathBuf> {
    let gz = dir.join(format!("{name}.gz"));
    if gz.is_file() {
        return Ok(gz);
    }
    let plain = dir.join(name);
    if plain.is_file() {
        return Ok(plain);
    }
    Err(missing_file_error(dataset, &gz))
}

/// Reads a whole file, decompressing it if it starts with the gzip magic bytes.
/// Errors name the file (e.g. a truncated gzip stream).
pub(crate) fn read_maybe_gz(path: &Path) -> Result<Vec<u8>> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut head = [0u8; 2];
    let n = read_up_to(&mut file, &mut head)
        .with_context(|| format!("cannot read {}", path.display()))?;
    drop(file);
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut out = Vec::new();
    if n == 2 && head == [0x1f, 0x8b] {
        MultiGzDecoder::new(BufReader::new(file))
            .read_to_end(&mut out)
            .with_context(|| {
                format!(
                    "{}: corrupt or truncated gzip data; re-copy the file",
                    path.display()
                )
            })?;
    } else {
        if path.extension().is_some_and(|e| e == "gz") {
            bail!(
                "{}: named .gz but is not gzip-compressed (no gzip magic bytes 1f 8b)",
                path.display()
            );
        }
        BufReader::new(file)
            .read_to_end(&mut out)
            .with_context(|| format!("cannot read {}", path.display()))?;
    }
    Ok(out)
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..])? {
            0 => break,
            k => filled += k,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compression, write::GzEncoder};
    use std::io::Write;

    #[test]
    fn reads_plain_and_gzip_and_rejects_truncated() {
        let dir = std::env::temp_dir().join(format!("scarsim-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plain = dir.join("a.txt");
        std::fs::write(&plain, b"hello world").unwrap();
        assert_eq!(read_maybe_gz(&plain).unwrap(), b"hello world");

        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(&vec![7u8; 10_000]).unwrap();
        let gz = enc.finish().unwrap();
        let gzp = dir.join("b.gz");
        std::fs::write(&gzp, &gz).unwrap();
        assert_eq!(read_maybe_gz(&gzp).unwrap(), vec![7u8; 10_000]);

        let trunc = dir.join("c.gz");
        std::fs::write(&trunc, &gz[..gz.len() / 2]).unwrap();
        let err = format!("{:#}", read_maybe_gz(&trunc).unwrap_err());
        assert!(err.contains("c.gz") && err.contains("truncated"), "{err}");

        let fake = dir.join("d.gz");
        std::fs::write(&fake, b"plain text").unwrap();
        let err = format!("{:#}", read_maybe_gz(&fake).unwrap_err());
        assert!(err.contains("not gzip"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
