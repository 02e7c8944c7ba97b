//! Results on disk: tidy CSV tables, the manifest, and atomic file writes.

pub mod atomic;
pub mod manifest;
pub mod table;

pub use atomic::write_atomic;
pub use manifest::Manifest;
pub use table::{Table, fmt_f64};
