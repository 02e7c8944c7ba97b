//! Whether a dataset's files are in a data folder, without loading them
//! (`scarsim reproduce` uses real data where it is present and stand-ins
//! otherwise).
//!
//! The file names are the canonical ones of `../shared/data/` (see its
//! README). MNIST and CoverType are accepted gzipped or not, as their loaders
//! accept them; the other datasets are looked for as the archives they ship
//! in. A loader that learns to read another layout should list it here too.

use std::path::{Path, PathBuf};

use super::{DatasetName, covtype, mnist};

/// The files dataset `name` needs, relative to its folder under the data directory.
pub(crate) fn required_files(name: DatasetName) -> &'static [&'static str] {
    match name {
        DatasetName::Mnist => &[mnist::TRAIN_IMAGES, mnist::TRAIN_LABELS],
        DatasetName::Covtype => &[covtype::DATA_FILE],
        DatasetName::Movielens => &["ml-latest-small.zip"],
        DatasetName::Jester => &["jester-data-1.zip"],
        DatasetName::News20 => &["20news-bydate.tar.gz"],
        DatasetName::Reuters => &["reuters21578.tar.gz"],
        DatasetName::None => &[],
    }
}

/// The files of dataset `name` that are not under `data_dir` (empty when the
/// dataset is present). A file counts as present as `<file>` or `<file>.gz`.
pub(crate) fn missing_files(name: DatasetName, data_dir: &Path) -> Vec<PathBuf> {
    let dir = data_dir.join(name.folder());
    required_files(name)
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| {
            let gz = PathBuf::from(format!("{}.gz", p.display()));
            !p.is_file() && !gz.is_file()
        })
        .collect()
}

/// Whether every file of dataset `name` is under `data_dir`.
#[cfg(test)]
pub(crate) fn is_present(name: DatasetName, data_dir: &Path) -> bool {
    missing_files(name, data_dir).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn present_only_with_every_file() {
        let dir = std::env::temp_dir().join(format!("scarsim-presence-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(dir.join("mnist")).unwrap();
        assert!(!is_present(DatasetName::Mnist, &dir));
        assert_eq!(missing_files(DatasetName::Mnist, &dir).len(), 2);
        std::fs::write(dir.join("mnist/train-images-idx3-ubyte.gz"), b"x").unwrap();
        assert_eq!(missing_files(DatasetName::Mnist, &dir).len(), 1);
        std::fs::write(dir.join("mnist/train-labels-idx1-ubyte"), b"x").unwrap();
        assert!(is_present(DatasetName::Mnist, &dir));
        assert!(!is_present(DatasetName::Covtype, &dir));
        std::fs::remove_dir_all(&dir).ok();
    }
}
