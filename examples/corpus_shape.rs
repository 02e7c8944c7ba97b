//! Prints the shape of the real text corpora under scarsim's tokenizer (the
//! numbers behind `news20::SHAPE` and `reuters::SHAPE`), and the load time.
//!
//! `cargo run --release --example corpus_shape -- <data dir>`

use std::time::Instant;

use scarsim::data::{DataOptions, DatasetName, corpus};

fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "data".to_string());
    let opts = DataOptions {
        data_dir: dir.into(),
        ..DataOptions::default()
    };
    for name in [DatasetName::News20, DatasetName::Reuters] {
        let started = Instant::now();
        let c = corpus::load_corpus(name, &opts, 0)?;
        let secs = started.elapsed().as_secs_f64();
        println!("{name}: {} (loaded in {secs:.2} s)", c.describe());
        println!("{:#?}", c.shape());
        let top: Vec<&str> = c.vocab.iter().take(30).map(|s| s.as_str()).collect();
        println!("most frequent words: {}", top.join(" "));
    }
    Ok(())
}
