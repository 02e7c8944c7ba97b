//! The integration suite, one crate so that it links once: one module per
//! concern (`cargo test --test tests <module>::` runs one).

mod common;

mod adversarial;
mod cli;
mod cnn;
mod faults;
mod figures;
mod k_rule;
mod knobs;
mod lda;
mod mf;
mod module_graph;
mod protocol_cli;
mod protocols;
mod recipes;
mod robustness;
mod shards;
mod sharing;
mod theorems;
mod theory;
mod usage;
