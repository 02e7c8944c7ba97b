//! Results on disk: tidy CSV tables, the manifest, atomic file writes, and
//! the figures drawn from them.

pub mod atomic;
pub mod figures;
pub mod guard;
pub mod json_f64;
pub mod manifest;
pub mod outdir;
pub mod table;

pub use atomic::write_atomic;
pub use manifest::Manifest;
pub use table::{Table, fmt_f64};
