//! Datasets: loaders for the real files (laid out as in `../shared/data/`) and
//! deterministic synthetic stand-ins of the same shapes.
//!
//! A data folder (`--data-dir`, default `data/`) holds one subfolder per
//! dataset with the files under their canonical names, e.g.
//! `mnist/train-images-idx3-ubyte.gz`. Compressed and uncompressed copies are
//! both accepted. With `--synthetic` (or a scenario that asks for it) the
//! stand-in is generated instead; every output says which was used.

pub mod archive;
pub mod corpus;
pub(crate) mod covtype;
pub(crate) mod files;
pub(crate) mod huge_pages;
pub(crate) mod jester;
pub mod lda_standin;
pub mod mnist;
pub(crate) mod movielens;
pub(crate) mod news20;
pub(crate) mod presence;
pub mod ratings;
pub(crate) mod reuters;
pub mod synthetic;
pub mod synthetic_ratings;
pub(crate) mod tarball;

pub use ratings::Ratings;

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use serde::{Deserialize, Serialize};

/// The datasets scarsim knows how to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DatasetName {
    /// MNIST handwritten digits, 60,000 training images of 28×28 pixels, 10 classes.
    Mnist,
    /// UCI Covertype, 581,012 rows, 54 features, 7 classes.
    Covtype,
    /// MovieLens `ml-latest-small`, October 2016 release (671 users, 100,004 ratings).
    #[serde(rename = "movielens")]
    Movielens,
    /// Jester dataset 1, part 1 (24,983 users × 100 jokes).
    Jester,
    /// 20 Newsgroups "bydate" (18,846 documents).
    #[serde(rename = "20news")]
    News20,
    /// Reuters-21578, Distribution 1.0.
    Reuters,
    /// No dataset: the model's objective is defined in code (the quadratic
    /// program of `model::qp`). Never loaded.
    None,
}

impl DatasetName {
    /// The folder name under the data directory.
    pub(crate) fn folder(self) -> &'static str {
        match self {
            DatasetName::Mnist => "mnist",
            DatasetName::Covtype => "covtype",
            DatasetName::Movielens => "movielens-small",
            DatasetName::Jester => "jester",
            DatasetName::News20 => "20newsgroups",
            DatasetName::Reuters => "reuters",
            DatasetName::None => "none",
        }
    }
}

impl DatasetName {
    /// The name used in scenarios and CSV files.
    pub(crate) fn name(self) -> &'static str {
        match self {
            DatasetName::Mnist => "mnist",
            DatasetName::Covtype => "covtype",
            DatasetName::Movielens => "movielens",
            DatasetName::Jester => "jester",
            DatasetName::News20 => "20news",
            DatasetName::Reuters => "reuters",
            DatasetName::None => "none",
        }
    }
}

impl fmt::Display for DatasetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a dataset came from; written into every manifest and figure title.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum Provenance {
    /// Read from real files.
    Real {
        /// The files that were read.
        files: Vec<PathBuf>,
    },
    /// Generated stand-in.
    Synthetic {
        /// What the generator did, in one sentence.
        description: String,
        /// Fraction of the real dataset's size that was generated.
        scale: f64,
    },
}

impl Provenance {
    /// `"real"` or `"synthetic"`, the value of the `data` CSV column.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Provenance::Real { .. } => "real",
            Provenance::Synthetic { .. } => "synthetic",
        }
    }
}

/// A dense labelled dataset for classification: `rows × features` in row-major
/// order, labels in `0..classes`.
#[derive(Clone, Debug)]
pub struct Classification {
    /// Which dataset this is.
    pub(crate) name: DatasetName,
    /// Number of examples.
    pub rows: usize,
    /// Number of features per example.
    pub features: usize,
    /// Number of classes.
    pub classes: usize,
    /// Features, row-major, `rows * features` values.
    pub(crate) x: Vec<f32>,
    /// Labels in `0..classes`.
    pub(crate) y: Vec<u8>,
    /// Real files or synthetic stand-in.
    pub(crate) provenance: Provenance,
}

impl Classification {
    /// Feature vector of example `i`.
    #[inline]
    pub(crate) fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.features..(i + 1) * self.features]
    }

    /// Fraction of feature values that are non-zero.
    #[cfg(test)]
    pub(crate) fn density(&self) -> f64 {
        self.x.iter().filter(|v| **v != 0.0).count() as f64 / self.x.len().max(1) as f64
    }

    /// Checks the invariants every loader promises (shape, finite values, labels in range).
    pub(crate) fn validate(&self) -> Result<()> {
        anyhow::ensure!(
            self.x.len() == self.rows * self.features && self.y.len() == self.rows,
            "dataset {}: inconsistent shape",
            self.name
        );
        anyhow::ensure!(self.rows > 0, "dataset {} has no rows", self.name);
        if let Some(bad) = self.y.iter().position(|&c| c as usize >= self.classes) {
            anyhow::bail!(
                "dataset {}: label {} of example {} is outside 0..{}",
                self.name,
                self.y[bad],
                bad,
                self.classes
            );
        }
        if let Some(bad) = self.x.iter().position(|v| !v.is_finite()) {
            anyhow::bail!(
                "dataset {}: non-finite feature value at example {}",
                self.name,
                bad / self.features
            );
        }
        Ok(())
    }
}

/// How to obtain datasets: real files from a folder, or generated stand-ins.
#[derive(Clone, Debug, PartialEq)]
pub struct DataOptions {
    /// Folder laid out like `../shared/data/` (one subfolder per dataset).
    pub data_dir: PathBuf,
    /// Generate stand-ins instead of reading files.
    pub synthetic: bool,
    /// Size of a stand-in relative to the real dataset (1.0 = same shape).
    pub synthetic_scale: f64,
}

impl Default for DataOptions {
    fn default() -> Self {
        DataOptions {
            data_dir: PathBuf::from("data"),
            synthetic: false,
            synthetic_scale: 1.0,
        }
    }
}

/// Loads each dataset once per process and hands out shared references, so a
/// run over many scenarios reads MNIST once.
#[derive(Default)]
pub struct DataCache {
    classification: Mutex<HashMap<CacheKey, Arc<Classification>>>,
    other: Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>,
}

/// (dataset, synthetic?, scale bits, seed of a stand-in).
type CacheKey = (DatasetName, bool, u64, u64);

impl DataCache {
    /// A new, empty cache.
    pub fn new() -> DataCache {
        DataCache::default()
    }

    /// The classification dataset `name`, real or synthetic per `opts`.
    /// Stand-ins are generated from `seed`.
    pub(crate) fn classification(
        &self,
        name: DatasetName,
        opts: &DataOptions,
        seed: u64,
    ) -> Result<Arc<Classification>> {
        let key = (
            name,
            opts.synthetic,
            opts.synthetic_scale.to_bits(),
            if opts.synthetic { seed } else { 0 },
        );
        if let Some(d) = self.classification.lock().expect("cache lock").get(&key) {
            return Ok(d.clone());
        }
        let data = Arc::new(load_classification(name, opts, seed)?);
        self.classification
            .lock()
            .expect("cache lock")
            .insert(key, data.clone());
        Ok(data)
    }

    /// Any other dataset type: the value cached under `key`, or `load()`'s
    /// result, cached. The key must identify the data completely (dataset,
    /// real or synthetic, scale, and the seed of a stand-in).
    pub(crate) fn get_or_load<T: Any + Send + Sync>(
        &self,
        key: &str,
        load: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        let cached = self.other.lock().expect("cache lock").get(key).cloned();
        if let Some(Ok(t)) = cached.map(|v| v.downcast::<T>()) {
            return Ok(t);
        }
        let value = Arc::new(load()?);
        self.other
            .lock()
            .expect("cache lock")
            .insert(key.to_string(), value.clone());
        Ok(value)
    }
}

/// Loads (or generates) a classification dataset without caching.
pub(crate) fn load_classification(
    name: DatasetName,
    opts: &DataOptions,
    seed: u64,
) -> Result<Classification> {
    let data = if opts.synthetic {
        match name {
            DatasetName::Mnist => synthetic::mnist_like(seed, opts.synthetic_scale),
            DatasetName::Covtype => synthetic::covtype_like(seed, opts.synthetic_scale),
            other => anyhow::bail!("dataset `{other}` is not a classification dataset"),
        }
    } else {
        let dir = opts.data_dir.join(name.folder());
        match name {
            DatasetName::Mnist => mnist::load(&dir)?,
            DatasetName::Covtype => covtype::load(&dir)?,
            other => anyhow::bail!("dataset `{other}` is not a classification dataset"),
        }
    };
    data.validate()?;
    Ok(data)
}

/// The error for a dataset file that is not there, with what to do next.
pub(crate) fn missing_file_error(dataset: DatasetName, expected: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "dataset `{dataset}`: file not found: expected {} (or the same name without .gz).\n\
         Point --data-dir at a folder laid out like ../shared/data (one subfolder per dataset), \
         or pass --synthetic to use the generated stand-in.",
        expected.display()
    )
}
