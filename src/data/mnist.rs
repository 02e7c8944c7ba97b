//! MNIST in its canonical IDX format (LeCun et al.), gzipped or not.
//!
//! Only the 60,000 training images are used: the SCAR criteria (e.g. 2.5e4
//! cross-entropy for MLR) are sums over the training set. Pixels keep their
//! raw intensities 0..=255: with them, Appendix D's learning rate of 1e-5 on
//! the batch-mean gradient converges in the ~60 iterations the paper reports
//! (pixels scaled to [0, 1] would need ~220).

use std::path::Path;

use anyhow::{Result, bail};

use super::{Classification, DatasetName, Provenance, files};

/// File name of the training images (before any `.gz`).
pub(crate) const TRAIN_IMAGES: &str = "train-images-idx3-ubyte";
/// File name of the training labels (before any `.gz`).
pub(crate) const TRAIN_LABELS: &str = "train-labels-idx1-ubyte";
/// IDX magic number of an unsigned-byte 3-D array (images).
pub(crate) const IMAGES_MAGIC: u32 = 0x0000_0803;
/// IDX magic number of an unsigned-byte 1-D array (labels).
pub(crate) const LABELS_MAGIC: u32 = 0x0000_0801;

/// Loads the MNIST training set from `dir` (the `mnist/` folder).
pub(crate) fn load(dir: &Path) -> Result<Classification> {
    let img_path = files::find(DatasetName::Mnist, dir, TRAIN_IMAGES)?;
    let lbl_path = files::find(DatasetName::Mnist, dir, TRAIN_LABELS)?;
    let images = files::read_maybe_gz(&img_path)?;
    let labels = files::read_maybe_gz(&lbl_path)?;
    let (count, rows, cols, pixels) = parse_images(&images, &img_path)?;
    let y = parse_labels(&labels, &lbl_path)?;
    if y.len() != count {
        bail!(
            "{} holds {} labels but {} holds {} images; the two files must come from the same set",
            lbl_path.display(),
            y.len(),
            img_path.display(),
            count
        );
    }
    if let Some(i) = y.iter().position(|&l| l > 9) {
        bail!(
            "{}: label {} at index {} is outside 0..=9",
            lbl_path.display(),
            y[i],
            i
        );
    }
    let x = pixels.iter().map(|&p| p as f32).collect();
    Ok(Classification {
        name: DatasetName::Mnist,
        rows: count,
        features: rows * cols,
        classes: 10,
        x,
        y: y.to_vec(),
        provenance: Provenance::Real {
            files: vec![img_path, lbl_path],
        },
    })
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Parses an IDX image file: `(count, rows, cols, pixel bytes)`.
pub(crate) fn parse_images<'a>(
    bytes: &'a [u8],
    path: &Path,
) -> Result<(usize, usize, usize, &'a [u8])> {
    if bytes.len() < 16 {
        bail!(
            "{}: too short for an IDX image header ({} bytes, need 16)",
            path.display(),
            bytes.len()
        );
    }
    let magic = be_u32(bytes, 0);
    if magic != IMAGES_MAGIC {
        bail!(
            "{}: bad magic number {magic:#010x}, expected {IMAGES_MAGIC:#010x} (IDX unsigned-byte images)",
            path.display()
        );
    }
    let count = be_u32(bytes, 4) as usize;
    let rows = be_u32(bytes, 8) as usize;
    let cols = be_u32(bytes, 12) as usize;
    let need = count
        .checked_mul(rows)
        .and_then(|v| v.checked_mul(cols))
        .unwrap_or(usize::MAX);
    let have = bytes.len() - 16;
    if have != need {
        bail!(
            "{}: header says {count} images of {rows}×{cols} = {need} pixel bytes but the file holds {have}; \
             the file is truncated or corrupt",
            path.display()
        );
    }
    Ok((count, rows, cols, &bytes[16..]))
}

/// Parses an IDX label file.
pub(crate) fn parse_labels<'a>(bytes: &'a [u8], path: &Path) -> Result<&'a [u8]> {
    if bytes.len() < 8 {
        bail!(
            "{}: too short for an IDX label header ({} bytes, need 8)",
            path.display(),
            bytes.len()
        );
    }
    let magic = be_u32(bytes, 0);
    if magic != LABELS_MAGIC {
        bail!(
            "{}: bad magic number {magic:#010x}, expected {LABELS_MAGIC:#010x} (IDX unsigned-byte labels)",
            path.display()
        );
    }
    let count = be_u32(bytes, 4) as usize;
    let have = bytes.len() - 8;
    if have != count {
        bail!(
            "{}: header says {count} labels but the file holds {have}; the file is truncated or corrupt",
            path.display()
        );
    }
    Ok(&bytes[8..])
}

/// Writes a tiny MNIST-format pair of files (for tests and examples).
pub fn write_idx(dir: &Path, images: &[u8], labels: &[u8], rows: u32, cols: u32) -> Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let count = labels.len() as u32;
    let mut img = Vec::with_capacity(16 + images.len());
    for v in [IMAGES_MAGIC, count, rows, cols] {
        img.extend_from_slice(&v.to_be_bytes());
    }
    img.extend_from_slice(images);
    let mut lbl = Vec::with_capacity(8 + labels.len());
    for v in [LABELS_MAGIC, count] {
        lbl.extend_from_slice(&v.to_be_bytes());
    }
    lbl.extend_from_slice(labels);
    let p = dir.join(TRAIN_IMAGES);
    std::fs::write(&p, img).with_context(|| format!("cannot write {}", p.display()))?;
    let p = dir.join(TRAIN_LABELS);
    std::fs::write(&p, lbl).with_context(|| format!("cannot write {}", p.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("scarsim-mnist-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&d).ok();
        d
    }

    #[test]
    fn round_trip_small_files() {
        let dir = tmp("ok");
        let images: Vec<u8> = (0..3 * 4).map(|i| (i * 20) as u8).collect();
        write_idx(&dir, &images, &[1, 2, 9], 2, 2).unwrap();
        let d = load(&dir).unwrap();
        assert_eq!((d.rows, d.features, d.classes), (3, 4, 10));
        assert_eq!(d.y, vec![1, 2, 9]);
        assert_eq!(d.x[1], 20.0);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn bad_magic_and_truncation_are_named() {
        let dir = tmp("bad");
        write_idx(&dir, &[0u8; 8], &[1, 2], 2, 2).unwrap();
        let p = dir.join(TRAIN_IMAGES);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[3] = 0x99;
        std::fs::write(&p, &bytes).unwrap();
        let e = format!("{:#}", load(&dir).unwrap_err());
        assert!(
            e.contains("bad magic number") && e.contains(TRAIN_IMAGES),
            "{e}"
        );

        bytes[3] = 0x03;
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&p, &bytes).unwrap();
        let e = format!("{:#}", load(&dir).unwrap_err());
        assert!(e.contains("truncated"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn missing_files_suggest_synthetic() {
        let dir = tmp("missing");
        let e = format!("{:#}", load(&dir).unwrap_err());
        assert!(e.contains("--synthetic") && e.contains(TRAIN_IMAGES), "{e}");
    }
}
