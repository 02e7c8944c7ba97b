//! Results on disk: tidy CSV tables, the manifest, atomic file writes, and
//! the figures drawn from them.

pub(crate) mod atomic;
pub(crate) mod columns;
pub mod figures;
pub(crate) mod guard;
pub(crate) mod json_f64;
pub mod manifest;
pub(crate) mod outdir;
pub(crate) mod row;
pub(crate) mod table;

pub(crate) use manifest::Manifest;
pub use table::{Table, fmt_f64};
