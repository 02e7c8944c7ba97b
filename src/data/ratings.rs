//! Sparse rating matrices for matrix factorization (MovieLens, Jester).
//!
//! A [`Ratings`] is an m×n matrix A with a set Ω of observed entries, stored
//! twice: by user (compressed rows) and by item (compressed columns), so that
//! both halves of an ALS iteration read their ratings contiguously. Users and
//! items are numbered densely in the order of their ids in the file; a user
//! or item with no ratings has no index at all (loaders drop them and say so).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};

use super::{
    DataCache, DataOptions, DatasetName, Provenance, jester, movielens, synthetic_ratings,
};

/// One observed rating as read from a file, before users and items are
/// numbered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Entry {
    /// User id as in the file.
    pub(crate) user: u64,
    /// Item id as in the file.
    pub(crate) item: u64,
    /// The rating (already rescaled if the dataset is).
    pub(crate) value: f32,
    /// 1-based line of the file it came from (for error messages).
    pub(crate) line: usize,
}

/// A sparse m×n rating matrix, by user and by item.
#[derive(Clone, Debug)]
pub struct Ratings {
    /// Which dataset this is.
    pub(crate) name: DatasetName,
    /// m: users with at least one rating.
    pub users: usize,
    /// n: items with at least one rating.
    pub(crate) items: usize,
    /// `user_ptr[i]..user_ptr[i+1]` indexes user i's ratings in `user_items`/`user_values`.
    pub(crate) user_ptr: Vec<usize>,
    /// Item index of each rating, grouped by user, ascending within a user.
    pub(crate) user_items: Vec<u32>,
    /// Rating values in the order of `user_items`.
    pub(crate) user_values: Vec<f32>,
    /// `item_ptr[j]..item_ptr[j+1]` indexes item j's ratings in `item_users`/`item_values`.
    pub(crate) item_ptr: Vec<usize>,
    /// User index of each rating, grouped by item, ascending within an item.
    pub(crate) item_users: Vec<u32>,
    /// Rating values in the order of `item_users`.
    pub(crate) item_values: Vec<f32>,
    /// Real files or synthetic stand-in.
    pub(crate) provenance: Provenance,
    /// What the loader did beyond reading (e.g. rescaling, removed users).
    #[expect(
        dead_code,
        reason = "built by the loaders, not yet shown in the manifest or `validate`"
    )]
    pub(crate) notes: String,
}

impl Ratings {
    /// |Ω|: the number of observed ratings.
    pub(crate) fn len(&self) -> usize {
        self.user_items.len()
    }

    /// The (item indices, values) of user `i`'s ratings.
    #[inline]
    pub(crate) fn user(&self, i: usize) -> (&[u32], &[f32]) {
        let r = self.user_ptr[i]..self.user_ptr[i + 1];
        (&self.user_items[r.clone()], &self.user_values[r])
    }

    /// The (user indices, values) of item `j`'s ratings.
    #[inline]
    pub fn item(&self, j: usize) -> (&[u32], &[f32]) {
        let r = self.item_ptr[j]..self.item_ptr[j + 1];
        (&self.item_users[r.clone()], &self.item_values[r])
    }

    /// Mean and population standard deviation of the ratings.
    #[cfg(test)]
    pub(crate) fn mean_std(&self) -> (f64, f64) {
        let n = self.len().max(1) as f64;
        let mean = self.user_values.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = self
            .user_values
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        (mean, var.sqrt())
    }

    /// Number of ratings of each user.
    pub(crate) fn user_degrees(&self) -> Vec<usize> {
        self.user_ptr.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Number of ratings of each item.
    pub(crate) fn item_degrees(&self) -> Vec<usize> {
        self.item_ptr.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Builds the matrix from dense (user, item, value) triples with
    /// `user < users`, `item < items`, no duplicates, and every user and
    /// item rated at least once (the stand-in generators guarantee this).
    pub(crate) fn from_dense(
        name: DatasetName,
        users: usize,
        items: usize,
        triples: &[(u32, u32, f32)],
        provenance: Provenance,
        notes: String,
    ) -> Result<Ratings> {
        let mut by_user: Vec<(u32, u32, f32)> = triples.to_vec();
        by_user.sort_unstable_by_key(|&(u, i, _)| (u, i));
        let (user_ptr, user_items, user_values) = compress(users, &by_user, |t| (t.0, t.1));
        let mut by_item = by_user;
        by_item.sort_unstable_by_key(|&(u, i, _)| (i, u));
        let (item_ptr, item_users, item_values) = compress(items, &by_item, |t| (t.1, t.0));
        let r = Ratings {
            name,
            users,
            items,
            user_ptr,
            user_items,
            user_values,
            item_ptr,
            item_users,
            item_values,
            provenance,
            notes,
        };
        r.validate()?;
        Ok(r)
    }

    /// Builds the matrix from entries read from `source`: numbers users and
    /// items densely in increasing id order (so ids with no rating get no
    /// index) and rejects a (user, item) pair that occurs twice, naming both
    /// lines.
    pub(crate) fn from_entries(
        name: DatasetName,
        mut entries: Vec<Entry>,
        source: &Path,
        provenance: Provenance,
        notes: String,
    ) -> Result<Ratings> {
        if entries.is_empty() {
            bail!("{}: no ratings", source.display());
        }
        entries.sort_by_key(|e| (e.user, e.item, e.line));
        if let Some(w) = entries
            .windows(2)
            .find(|w| w[0].user == w[1].user && w[0].item == w[1].item)
        {
            bail!(
                "{} line {}: user {} rated item {} again (first on line {}); each pair may occur once",
                source.display(),
                w[1].line,
                w[1].user,
                w[1].item,
                w[0].line
            );
        }
        let dense = |ids: &mut Vec<u64>| {
            ids.sort_unstable();
            ids.dedup();
        };
        let mut user_ids: Vec<u64> = entries.iter().map(|e| e.user).collect();
        dense(&mut user_ids);
        let mut item_ids: Vec<u64> = entries.iter().map(|e| e.item).collect();
        dense(&mut item_ids);
        let index = |ids: &[u64], id: u64| ids.binary_search(&id).expect("id was collected") as u32;
        let triples: Vec<(u32, u32, f32)> = entries
            .iter()
            .map(|e| (index(&user_ids, e.user), index(&item_ids, e.item), e.value))
            .collect();
        Ratings::from_dense(
            name,
            user_ids.len(),
            item_ids.len(),
            &triples,
            provenance,
            notes,
        )
    }

    /// Checks the invariants every loader and generator promises.
    pub(crate) fn validate(&self) -> Result<()> {
        let n = self.len();
        anyhow::ensure!(n > 0, "dataset {} has no ratings", self.name);
        anyhow::ensure!(
            self.user_ptr.len() == self.users + 1
                && self.item_ptr.len() == self.items + 1
                && self.user_values.len() == n
                && self.item_users.len() == n
                && self.item_values.len() == n
                && self.user_ptr[self.users] == n
                && self.item_ptr[self.items] == n,
            "dataset {}: inconsistent rating matrix",
            self.name
        );
        if let Some(i) = self.user_degrees().iter().position(|&d| d == 0) {
            bail!("dataset {}: user {i} has no ratings", self.name);
        }
        if let Some(j) = self.item_degrees().iter().position(|&d| d == 0) {
            bail!("dataset {}: item {j} has no ratings", self.name);
        }
        if self.user_values.iter().any(|v| !v.is_finite()) {
            bail!("dataset {}: non-finite rating", self.name);
        }
        Ok(())
    }
}

/// Compressed storage of triples sorted by `key(t).0` (the major index).
fn compress(
    majors: usize,
    sorted: &[(u32, u32, f32)],
    key: impl Fn(&(u32, u32, f32)) -> (u32, u32),
) -> (Vec<usize>, Vec<u32>, Vec<f32>) {
    let mut ptr = vec![0usize; majors + 1];
    for t in sorted {
        ptr[key(t).0 as usize + 1] += 1;
    }
    for k in 0..majors {
        ptr[k + 1] += ptr[k];
    }
    let minor = sorted.iter().map(|t| key(t).1).collect();
    let values = sorted.iter().map(|t| t.2).collect();
    (ptr, minor, values)
}

/// Ratings in the real dataset (the size a stand-in at scale 1 has, and the
/// denominator of [`crate::model::DataUsed::size_ratio`]).
pub(crate) fn real_ratings(name: DatasetName) -> Option<usize> {
    match name {
        DatasetName::Movielens => Some(movielens::RATINGS),
        DatasetName::Jester => Some(jester::RATINGS),
        _ => None,
    }
}

/// Loads (or generates) a rating dataset without caching.
pub fn load_ratings(name: DatasetName, opts: &DataOptions, seed: u64) -> Result<Ratings> {
    let data = if opts.synthetic {
        match name {
            DatasetName::Movielens => synthetic_ratings::movielens_like(seed, opts.synthetic_scale),
            DatasetName::Jester => synthetic_ratings::jester_like(seed, opts.synthetic_scale),
            other => bail!("dataset `{other}` is not a rating dataset (movielens, jester)"),
        }
    } else {
        let dir = opts.data_dir.join(name.folder());
        match name {
            DatasetName::Movielens => movielens::load(&dir)?,
            DatasetName::Jester => jester::load(&dir)?,
            other => bail!("dataset `{other}` is not a rating dataset (movielens, jester)"),
        }
    };
    data.validate()?;
    Ok(data)
}

/// The rating dataset `name`, real or synthetic per `opts`, loaded once per
/// process through `cache` (stand-ins are generated from `seed`).
pub(crate) fn cached_ratings(
    cache: &DataCache,
    name: DatasetName,
    opts: &DataOptions,
    seed: u64,
) -> Result<Arc<Ratings>> {
    let key = if opts.synthetic {
        format!(
            "ratings:{name}:synthetic:{}:{seed}",
            opts.synthetic_scale.to_bits()
        )
    } else {
        format!("ratings:{name}:real:{}", opts.data_dir.display())
    };
    cache.get_or_load(&key, || load_ratings(name, opts, seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(user: u64, item: u64, value: f32, line: usize) -> Entry {
        Entry {
            user,
            item,
            value,
            line,
        }
    }

    fn prov() -> Provenance {
        Provenance::Real { files: vec![] }
    }

    #[test]
    fn both_orientations_hold_the_same_ratings() {
        let entries = vec![
            e(10, 7, 1.0, 2),
            e(3, 7, 2.0, 3),
            e(3, 100, 3.0, 4),
            e(10, 5, 4.0, 5),
        ];
        let r = Ratings::from_entries(
            DatasetName::Movielens,
            entries,
            Path::new("r.csv"),
            prov(),
            String::new(),
        )
        .unwrap();
        // users 3 -> 0, 10 -> 1; items 5 -> 0, 7 -> 1, 100 -> 2
        assert_eq!((r.users, r.items, r.len()), (2, 3, 4));
        assert_eq!(r.user(0), (&[1u32, 2][..], &[2.0f32, 3.0][..]));
        assert_eq!(r.user(1), (&[0u32, 1][..], &[4.0f32, 1.0][..]));
        assert_eq!(r.item(1), (&[0u32, 1][..], &[2.0f32, 1.0][..]));
        assert_eq!(r.item(2), (&[0u32][..], &[3.0f32][..]));
        assert_eq!(r.user_degrees(), vec![2, 2]);
        assert_eq!(r.item_degrees(), vec![1, 2, 1]);
        let (m, s) = r.mean_std();
        assert!((m - 2.5).abs() < 1e-12 && (s - 1.25f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn duplicate_pairs_name_both_lines() {
        let entries = vec![e(1, 2, 1.0, 2), e(1, 3, 1.0, 3), e(1, 2, 5.0, 9)];
        let err = Ratings::from_entries(
            DatasetName::Movielens,
            entries,
            Path::new("r.csv"),
            prov(),
            String::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("r.csv line 9") && err.contains("line 2"),
            "{err}"
        );
    }
}
