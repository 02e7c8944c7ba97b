//! scarsim: a discrete-event simulator of failures and relaxed consistency in
//! distributed ML training, with real training in the loop.
//!
//! The pipeline: a scenario file ([`scenario`]) is validated into a typed
//! scenario; [`experiment`] expands it into (point, trial) units and runs
//! them in parallel on the trial [`engine`], which drives a real [`model`]
//! through failures and recoveries chosen by [`policy`]; [`stats`] aggregates
//! trials and [`report`] writes tidy CSV and a manifest. Datasets come from
//! [`data`]. All randomness flows from [`rng`] streams, so results are
//! byte-identical on any number of threads.
//!
//! Visibility: an item is `pub` only when the binary (`main.rs`), the
//! integration tests, the benches or the examples use it; everything else is
//! `pub(crate)`, so the compiler reports code nothing uses. A new scenario
//! kind is one `Experiment` implementation (`experiment/kind.rs`).

#![warn(missing_docs)]

pub mod bench;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod data;
pub mod engine;
pub mod experiment;
pub mod faults;
pub mod model;
pub mod policy;
pub mod report;
pub mod reproduce;
pub mod rng;
pub mod scenario;
pub mod simd;
pub mod stats;
pub mod theory;
