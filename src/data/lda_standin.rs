//! Deterministic synthetic stand-ins for the text corpora: documents drawn
//! from the LDA generative model (Blei et al., 2003) with the vocabulary size,
//! document count and document-length distribution of the real corpus.
//!
//! Generator (all randomness from `rng::stream(seed, SyntheticData, …)`):
//! - `GEN_TOPICS` topics; topic k's word distribution is
//!   φ_k ~ Dirichlet(c·π), where π is a Zipf(1) base measure over the V words
//!   (word i has weight ∝ 1/(i + 10)) and c = `topic_concentration`·V, so
//!   every topic shares the frequent words and has its own rarer ones, like
//!   real text;
//! - document d has θ_d ~ Dirichlet(`DOC_ALPHA`) over the topics and a
//!   length drawn from the log-normal fitted to the real corpus
//!   (ln length ~ N(mean, std), rounded, clamped to 1..=the real maximum);
//! - each token draws a topic from θ_d and a word from that topic.
//!
//! `scale` multiplies the number of documents and the vocabulary size (so
//! tokens per word stay as in the real corpus). The generator constants were
//! chosen so that the unperturbed LDA run on the stand-in at scale 1 reaches
//! the real dataset's criterion scaled by the token ratio. Data drawn from the
//! LDA model itself is easier to fit than real text: the stand-in's curve
//! drops and flattens within about 20 iterations, where real text keeps
//! improving slowly for hundreds, so stand-in runs converge in fewer
//! iterations than the real ones.

use rand::RngExt;
use rand_distr::{Distribution, Gamma, Normal};

use super::corpus::{Corpus, CorpusShape};
use super::{DatasetName, Provenance};
use crate::rng::{Purpose, stream};

/// Topics of the generating model.
pub(crate) const GEN_TOPICS: usize = 20;
/// Concentration c/V of the topics' word distributions (per vocabulary
/// word): larger values give flatter, more similar topics and a higher
/// negative log-likelihood per token. Chosen so that the fitted stand-in's
/// −log p(w, z) per token settles a little below the real corpus's
/// criterion per token (20 Newsgroups 9.56, Reuters 8.49; measured plateau of
/// the Reuters stand-in: 8.39).
pub(crate) fn topic_concentration(name: DatasetName) -> f64 {
    match name {
        DatasetName::News20 => 0.035,
        _ => 0.025,
    }
}
/// Symmetric Dirichlet parameter of the documents' topic proportions.
pub(crate) const DOC_ALPHA: f64 = 0.1;

/// Generates the stand-in for corpus `name` of real shape `shape`.
pub fn generate(name: DatasetName, shape: &CorpusShape, seed: u64, scale: f64) -> Corpus {
    let docs = ((shape.docs as f64 * scale).round() as usize).max(20);
    let vocab = ((shape.vocab as f64 * scale).round() as usize).max(50);
    let tag = match name {
        DatasetName::News20 => 1,
        _ => 2,
    };
    // Topics: Dirichlet(c·π) by normalised Gamma draws, stored as cumulative sums.
    let base: Vec<f64> = (0..vocab).map(|i| 1.0 / (i as f64 + 10.0)).collect();
    let base_sum: f64 = base.iter().sum();
    let c = topic_concentration(name) * vocab as f64;
    let mut cumulative = vec![0f64; GEN_TOPICS * vocab];
    for k in 0..GEN_TOPICS {
        let mut rng = stream(seed, Purpose::SyntheticData, 100 + tag, k as u64);
        let row = &mut cumulative[k * vocab..(k + 1) * vocab];
        let mut acc = 0.0;
        for (w, cell) in row.iter_mut().enumerate() {
            let shape_w = (c * base[w] / base_sum).max(1e-300);
            let g: f64 = Gamma::new(shape_w, 1.0)
                .expect("positive shape")
                .sample(&mut rng);
            acc += g;
            *cell = acc;
        }
        if acc <= 0.0 {
            // Every draw underflowed (tiny vocabularies only): uniform topic.
            for (w, cell) in row.iter_mut().enumerate() {
                *cell = (w + 1) as f64;
            }
        }
    }
    let lengths = Normal::new(shape.log_len_mean, shape.log_len_std.max(1e-9)).expect("valid");
    let doc_gamma = Gamma::new(DOC_ALPHA, 1.0).expect("positive alpha");
    let mut offsets = Vec::with_capacity(docs + 1);
    offsets.push(0usize);
    let mut tokens = Vec::new();
    let mut theta = [0f64; GEN_TOPICS];
    for d in 0..docs {
        let mut rng = stream(seed, Purpose::SyntheticData, 200 + tag, d as u64);
        let len_f: f64 = lengths.sample(&mut rng).exp().round();
        let len = (len_f as usize).clamp(1, shape.max_len.max(1));
        let mut acc = 0.0;
        for t in theta.iter_mut() {
            acc += doc_gamma.sample(&mut rng);
            *t = acc;
        }
        if acc <= 0.0 {
            for (i, t) in theta.iter_mut().enumerate() {
                *t = (i + 1) as f64;
            }
        }
        for _ in 0..len {
            let u = rng.random::<f64>() * theta[GEN_TOPICS - 1];
            let k = theta.partition_point(|&c| c <= u).min(GEN_TOPICS - 1);
            let row = &cumulative[k * vocab..(k + 1) * vocab];
            let u = rng.random::<f64>() * row[vocab - 1];
            let w = row.partition_point(|&c| c <= u).min(vocab - 1);
            tokens.push(w as u32);
        }
        offsets.push(tokens.len());
    }
    let vocab_words = (0..vocab).map(|i| format!("w{i:05}")).collect();
    Corpus {
        name,
        vocab: vocab_words,
        offsets,
        tokens,
        provenance: Provenance::Synthetic {
            description: format!(
                "{docs} documents drawn from an LDA generative model ({GEN_TOPICS} topics, \
                 vocabulary {vocab}, log-normal lengths fitted to the real {name})"
            ),
            scale,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::corpus::real_shape;

    #[test]
    fn shape_and_determinism() {
        let shape = real_shape(DatasetName::Reuters).unwrap();
        let a = generate(DatasetName::Reuters, &shape, 3, 0.02);
        let b = generate(DatasetName::Reuters, &shape, 3, 0.02);
        let c = generate(DatasetName::Reuters, &shape, 4, 0.02);
        a.validate().unwrap();
        assert_eq!(a.tokens, b.tokens);
        assert_ne!(a.tokens, c.tokens);
        assert_eq!(a.docs(), (shape.docs as f64 * 0.02).round() as usize);
        // Mean length close to the log-normal's mean (5 standard errors).
        let s = a.shape();
        let mean_log = s.log_len_mean;
        let se = shape.log_len_std / (a.docs() as f64).sqrt();
        assert!(
            (mean_log - shape.log_len_mean).abs() < 5.0 * se + 0.05,
            "{mean_log}"
        );
        assert!(s.max_len <= shape.max_len);
    }
}
