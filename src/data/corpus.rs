//! Text corpora for LDA: documents as sequences of word ids, the tokenizer
//! that turns raw text into them, and the loader that picks the real archive
//! or the synthetic stand-in.
//!
//! # Tokenization (deterministic, the same for every corpus)
//! 1. Bytes are read as Latin-1; only the ASCII letters `A–Z a–z` form words.
//!    Every other byte (digits, punctuation, apostrophes, non-ASCII letters,
//!    white space) separates words, so `don't` gives `don` + `t` and `win32`
//!    gives `win`.
//! 2. Words are lower-cased.
//! 3. Words shorter than `MIN_WORD_LEN` (3) or longer than `MAX_WORD_LEN`
//!    (20) letters are dropped (the long ones are mostly uuencoded or base64
//!    debris in 20 Newsgroups posts).
//! 4. Stop words are dropped: the Glasgow Information Retrieval Group's
//!    English stop-word list (<http://ir.dcs.gla.ac.uk/resources/linguistic_utils/stop_words>,
//!    the list scikit-learn ships as `ENGLISH_STOP_WORDS`), in
//!    `STOP_WORDS`, plus any corpus-specific words the loader names
//!    (Reuters: its `reuter` sign-off).
//! 5. Rare words are dropped: a word is kept only if it occurs in at least
//!    `MIN_DOC_FREQ` documents of the corpus.
//! 6. Documents left with no token are dropped.
//!
//! Word ids are assigned by decreasing corpus frequency (ties by the word
//! itself), so frequent words have small ids; documents keep the order in
//! which the loader produced them.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Result, bail};

use super::{DataCache, DataOptions, DatasetName, Provenance, lda_standin, news20, reuters};

/// Shortest word kept, in letters.
pub(crate) const MIN_WORD_LEN: usize = 3;
/// Longest word kept, in letters.
pub(crate) const MAX_WORD_LEN: usize = 20;
/// A word is kept only if at least this many documents contain it.
pub(crate) const MIN_DOC_FREQ: usize = 5;

/// The Glasgow IR Group English stop-word list (the words made of letters
/// only; its multi-word and apostrophe entries cannot match a token).
pub(crate) const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "across",
    "after",
    "afterwards",
    "again",
    "against",
    "all",
    "almost",
    "alone",
    "along",
    "already",
    "also",
    "although",
    "always",
    "am",
    "among",
    "amongst",
    "amount",
    "an",
    "and",
    "another",
    "any",
    "anyhow",
    "anyone",
    "anything",
    "anyway",
    "anywhere",
    "are",
    "around",
    "as",
    "at",
    "back",
    "be",
    "became",
    "because",
    "become",
    "becomes",
    "becoming",
    "been",
    "before",
    "beforehand",
    "behind",
    "being",
    "below",
    "beside",
    "besides",
    "between",
    "beyond",
    "bill",
    "both",
    "bottom",
    "but",
    "by",
    "call",
    "can",
    "cannot",
    "cant",
    "co",
    "con",
    "could",
    "couldnt",
    "cry",
    "de",
    "describe",
    "detail",
    "do",
    "done",
    "down",
    "due",
    "during",
    "each",
    "eg",
    "eight",
    "either",
    "eleven",
    "else",
    "elsewhere",
    "empty",
    "enough",
    "etc",
    "even",
    "ever",
    "every",
    "everyone",
    "everything",
    "everywhere",
    "except",
    "few",
    "fifteen",
    "fifty",
    "fill",
    "find",
    "fire",
    "first",
    "five",
    "for",
    "former",
    "formerly",
    "forty",
    "found",
    "four",
    "from",
    "front",
    "full",
    "further",
    "get",
    "give",
    "go",
    "had",
    "has",
    "hasnt",
    "have",
    "he",
    "hence",
    "her",
    "here",
    "hereafter",
    "hereby",
    "herein",
    "hereupon",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "however",
    "hundred",
    "i",
    "ie",
    "if",
    "in",
    "inc",
    "indeed",
    "interest",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "keep",
    "last",
    "latter",
    "latterly",
    "least",
    "less",
    "ltd",
    "made",
    "many",
    "may",
    "me",
    "meanwhile",
    "might",
    "mill",
    "mine",
    "more",
    "moreover",
    "most",
    "mostly",
    "move",
    "much",
    "must",
    "my",
    "myself",
    "name",
    "namely",
    "neither",
    "never",
    "nevertheless",
    "next",
    "nine",
    "no",
    "nobody",
    "none",
    "noone",
    "nor",
    "not",
    "nothing",
    "now",
    "nowhere",
    "of",
    "off",
    "often",
    "on",
    "once",
    "one",
    "only",
    "onto",
    "or",
    "other",
    "others",
    "otherwise",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "part",
    "per",
    "perhaps",
    "please",
    "put",
    "rather",
    "re",
    "same",
    "see",
    "seem",
    "seemed",
    "seeming",
    "seems",
    "serious",
    "several",
    "she",
    "should",
    "show",
    "side",
    "since",
    "sincere",
    "six",
    "sixty",
    "so",
    "some",
    "somehow",
    "someone",
    "something",
    "sometime",
    "sometimes",
    "somewhere",
    "still",
    "such",
    "system",
    "take",
    "ten",
    "than",
    "that",
    "the",
    "their",
    "them",
    "themselves",
    "then",
    "thence",
    "there",
    "thereafter",
    "thereby",
    "therefore",
    "therein",
    "thereupon",
    "these",
    "they",
    "thick",
    "thin",
    "third",
    "this",
    "those",
    "though",
    "three",
    "through",
    "throughout",
    "thru",
    "thus",
    "to",
    "together",
    "too",
    "top",
    "toward",
    "towards",
    "twelve",
    "twenty",
    "two",
    "un",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "very",
    "via",
    "was",
    "we",
    "well",
    "were",
    "what",
    "whatever",
    "when",
    "whence",
    "whenever",
    "where",
    "whereafter",
    "whereas",
    "whereby",
    "wherein",
    "whereupon",
    "wherever",
    "whether",
    "which",
    "while",
    "whither",
    "who",
    "whoever",
    "whole",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "would",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// A bag-of-words corpus in document order: the tokens of document `d` are
/// `tokens[offsets[d]..offsets[d + 1]]`, each a word id into `vocab`.
#[derive(Clone, Debug)]
pub struct Corpus {
    /// Which dataset this is.
    pub(crate) name: DatasetName,
    /// Word of each id (ids by decreasing corpus frequency).
    pub vocab: Vec<String>,
    /// Start of each document in `tokens`, plus the end (`docs + 1` entries).
    pub(crate) offsets: Vec<usize>,
    /// Word ids of all documents, concatenated.
    pub(crate) tokens: Vec<u32>,
    /// Real files or synthetic stand-in.
    pub(crate) provenance: Provenance,
}

impl Corpus {
    /// Number of documents D.
    pub(crate) fn docs(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Vocabulary size V.
    pub(crate) fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// Total number of tokens N.
    pub fn total_tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Word ids of document `d`.
    #[inline]
    #[cfg(test)]
    pub(crate) fn doc(&self, d: usize) -> &[u32] {
        &self.tokens[self.offsets[d]..self.offsets[d + 1]]
    }

    /// Length (tokens) of document `d`.
    #[inline]
    pub(crate) fn doc_len(&self, d: usize) -> usize {
        self.offsets[d + 1] - self.offsets[d]
    }

    /// Length of the longest document.
    pub(crate) fn max_doc_len(&self) -> usize {
        (0..self.docs()).map(|d| self.doc_len(d)).max().unwrap_or(0)
    }

    /// Corpus frequency of each word id.
    pub(crate) fn word_counts(&self) -> Vec<usize> {
        let mut c = vec![0usize; self.vocab.len()];
        for &w in &self.tokens {
            c[w as usize] += 1;
        }
        c
    }

    /// Checks the invariants every loader promises: offsets increasing from 0
    /// to N, no empty document, word ids inside the vocabulary.
    pub(crate) fn validate(&self) -> Result<()> {
        let name = self.name;
        anyhow::ensure!(self.docs() > 0, "corpus {name} has no documents");
        anyhow::ensure!(
            self.offsets[0] == 0 && *self.offsets.last().expect("non-empty") == self.tokens.len(),
            "corpus {name}: document offsets do not span the tokens"
        );
        if let Some(d) = (0..self.docs()).find(|&d| self.offsets[d + 1] <= self.offsets[d]) {
            bail!("corpus {name}: document {d} is empty or out of order");
        }
        let v = self.vocab.len();
        if let Some(i) = self.tokens.iter().position(|&w| w as usize >= v) {
            bail!(
                "corpus {name}: token {i} has word id {} outside the vocabulary of {v}",
                self.tokens[i]
            );
        }
        Ok(())
    }

    /// One line describing the corpus size.
    pub fn describe(&self) -> String {
        format!(
            "{} documents, {} tokens, vocabulary {}",
            self.docs(),
            self.total_tokens(),
            self.vocab_size()
        )
    }
}

/// Splits raw text into the words kept by the rules in the module docs
/// (before the document-frequency filter).
pub(crate) struct Tokenizer {
    stop: std::collections::HashSet<&'static str>,
}

impl Tokenizer {
    /// A tokenizer with [`STOP_WORDS`] plus `extra_stop_words`.
    pub(crate) fn new(extra_stop_words: &[&'static str]) -> Tokenizer {
        Tokenizer {
            stop: STOP_WORDS.iter().chain(extra_stop_words).copied().collect(),
        }
    }

    /// Calls `emit` with every kept word of `text` (lower-case ASCII), in order.
    pub(crate) fn for_each_word(&self, text: &[u8], mut emit: impl FnMut(&str)) {
        let mut word = [0u8; MAX_WORD_LEN];
        let mut len = 0usize;
        let mut too_long = false;
        // A trailing separator flushes the last word.
        for &b in text.iter().chain(std::iter::once(&b' ')) {
            if b.is_ascii_alphabetic() {
                if len < MAX_WORD_LEN {
                    word[len] = b.to_ascii_lowercase();
                    len += 1;
                } else {
                    too_long = true;
                }
                continue;
            }
            if len >= MIN_WORD_LEN && !too_long {
                let w = std::str::from_utf8(&word[..len]).expect("ASCII letters");
                if !self.stop.contains(w) {
                    emit(w);
                }
            }
            len = 0;
            too_long = false;
        }
    }
}

/// Collects tokenized documents and builds a [`Corpus`] with the
/// document-frequency filter and frequency-ordered word ids.
pub(crate) struct CorpusBuilder {
    tokenizer: Tokenizer,
    ids: HashMap<String, u32>,
    words: Vec<String>,
    docs: Vec<Vec<u32>>,
    doc_freq: Vec<usize>,
    seen_in_doc: Vec<u32>,
}

impl CorpusBuilder {
    /// A builder whose tokenizer also drops `extra_stop_words`.
    pub(crate) fn new(extra_stop_words: &[&'static str]) -> CorpusBuilder {
        CorpusBuilder {
            tokenizer: Tokenizer::new(extra_stop_words),
            ids: HashMap::new(),
            words: Vec::new(),
            docs: Vec::new(),
            doc_freq: Vec::new(),
            seen_in_doc: Vec::new(),
        }
    }

    /// Adds one document given as raw text (which may be several pieces,
    /// e.g. a title and a body).
    pub(crate) fn add_document(&mut self, pieces: &[&[u8]]) {
        let mut doc = Vec::new();
        let doc_index = self.docs.len() as u32 + 1;
        for piece in pieces {
            let CorpusBuilder {
                tokenizer,
                ids,
                words,
                doc_freq,
                seen_in_doc,
                ..
            } = self;
            tokenizer.for_each_word(piece, |w| {
                let id = match ids.get(w) {
                    Some(&id) => id,
                    None => {
                        let id = words.len() as u32;
                        ids.insert(w.to_string(), id);
                        words.push(w.to_string());
                        doc_freq.push(0);
                        seen_in_doc.push(0);
                        id
                    }
                };
                if seen_in_doc[id as usize] != doc_index {
                    seen_in_doc[id as usize] = doc_index;
                    doc_freq[id as usize] += 1;
                }
                doc.push(id);
            });
        }
        self.docs.push(doc);
    }

    /// Applies the document-frequency filter, renumbers words by decreasing
    /// frequency and drops documents left empty.
    pub(crate) fn build(self, name: DatasetName, provenance: Provenance) -> Result<Corpus> {
        let n_words = self.words.len();
        let mut freq = vec![0usize; n_words];
        for d in &self.docs {
            for &w in d {
                freq[w as usize] += 1;
            }
        }
        let mut kept: Vec<u32> = (0..n_words as u32)
            .filter(|&w| self.doc_freq[w as usize] >= MIN_DOC_FREQ)
            .collect();
        kept.sort_by(|&a, &b| {
            freq[b as usize]
                .cmp(&freq[a as usize])
                .then_with(|| self.words[a as usize].cmp(&self.words[b as usize]))
        });
        let mut new_id = vec![u32::MAX; n_words];
        for (i, &w) in kept.iter().enumerate() {
            new_id[w as usize] = i as u32;
        }
        let vocab: Vec<String> = kept
            .iter()
            .map(|&w| self.words[w as usize].clone())
            .collect();
        let mut offsets = vec![0usize];
        let mut tokens = Vec::new();
        for d in &self.docs {
            let before = tokens.len();
            tokens.extend(
                d.iter()
                    .map(|&w| new_id[w as usize])
                    .filter(|&w| w != u32::MAX),
            );
            if tokens.len() > before {
                offsets.push(tokens.len());
            }
        }
        if tokens.is_empty() {
            bail!(
                "corpus {name}: no word occurs in {MIN_DOC_FREQ} or more of its {} documents",
                self.docs.len()
            );
        }
        let corpus = Corpus {
            name,
            vocab,
            offsets,
            tokens,
            provenance,
        };
        corpus.validate()?;
        Ok(corpus)
    }
}

/// Shape of a real corpus under this tokenizer, measured on the files in
/// `../shared/data/`: the stand-ins copy it, and the ratio of token counts
/// scales the criteria of stand-in runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CorpusShape {
    /// Documents D.
    pub(crate) docs: usize,
    /// Vocabulary size V.
    pub(crate) vocab: usize,
    /// Total tokens N.
    pub(crate) tokens: usize,
    /// Mean of ln(document length).
    pub(crate) log_len_mean: f64,
    /// Standard deviation of ln(document length).
    pub(crate) log_len_std: f64,
    /// Longest document.
    pub(crate) max_len: usize,
}

impl Corpus {
    /// The shape of this corpus.
    pub fn shape(&self) -> CorpusShape {
        let d = self.docs();
        let logs: Vec<f64> = (0..d).map(|i| (self.doc_len(i) as f64).ln()).collect();
        let mean = logs.iter().sum::<f64>() / d as f64;
        let var = logs.iter().map(|l| (l - mean) * (l - mean)).sum::<f64>() / d as f64;
        CorpusShape {
            docs: d,
            vocab: self.vocab_size(),
            tokens: self.total_tokens(),
            log_len_mean: mean,
            log_len_std: var.sqrt(),
            max_len: self.max_doc_len(),
        }
    }
}

/// The shape of the real corpus `name` (see `news20::SHAPE`, `reuters::SHAPE`).
pub fn real_shape(name: DatasetName) -> Result<CorpusShape> {
    match name {
        DatasetName::News20 => Ok(news20::SHAPE),
        DatasetName::Reuters => Ok(reuters::SHAPE),
        other => bail!("dataset `{other}` is not a text corpus (expected `20news` or `reuters`)"),
    }
}

/// Loads (or generates) the corpus `name` without caching. Stand-ins are
/// generated from `seed`.
pub fn load_corpus(name: DatasetName, opts: &DataOptions, seed: u64) -> Result<Corpus> {
    let shape = real_shape(name)?;
    let corpus = if opts.synthetic {
        lda_standin::generate(name, &shape, seed, opts.synthetic_scale)
    } else {
        let dir = opts.data_dir.join(name.folder());
        match name {
            DatasetName::News20 => news20::load(&dir)?,
            _ => reuters::load(&dir)?,
        }
    };
    corpus.validate()?;
    Ok(corpus)
}

/// The corpus `name` through `cache` (loaded once per process).
pub(crate) fn cached_corpus(
    cache: &DataCache,
    name: DatasetName,
    opts: &DataOptions,
    seed: u64,
) -> Result<Arc<Corpus>> {
    let key = if opts.synthetic {
        format!(
            "corpus:{name}:synthetic:{:016x}:{seed}",
            opts.synthetic_scale.to_bits()
        )
    } else {
        format!("corpus:{name}:real:{}", opts.data_dir.display())
    };
    cache.get_or_load(&key, || load_corpus(name, opts, seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        Tokenizer::new(&["reuter"]).for_each_word(text.as_bytes(), |w| out.push(w.to_string()));
        out
    }

    #[test]
    fn tokenizer_rules() {
        assert_eq!(
            words("The QUICK brown-fox doesn't jump over win32 at 10:30; Reuter"),
            vec!["quick", "brown", "fox", "doesn", "jump", "win"]
        );
        // Too long words are dropped entirely, not cut.
        assert_eq!(words("abcdefghijklmnopqrstuvwxyz ok yes"), vec!["yes"]);
        // Non-ASCII (Latin-1) bytes separate words.
        assert_eq!(words("caf\u{e9}s na\u{ef}vely"), vec!["caf", "vely"]);
        assert!(
            STOP_WORDS.windows(2).all(|w| w[0] < w[1]),
            "sorted, no duplicates"
        );
    }

    #[test]
    fn builder_filters_rare_words_and_orders_by_frequency() {
        let mut b = CorpusBuilder::new(&[]);
        for i in 0..6 {
            let text = format!("apple banana apple unique{i} cherry");
            let text = text.replace(char::is_numeric, "");
            b.add_document(&[text.as_bytes()]);
        }
        // "uniquex" words differ only by a digit, which is a separator:
        // they all become "unique" (6 documents) and are kept.
        b.add_document(&[b"rareword"]); // one document: dropped, and so is the document
        let c = b
            .build(DatasetName::News20, Provenance::Real { files: vec![] })
            .unwrap();
        assert_eq!(c.vocab, vec!["apple", "banana", "cherry", "unique"]);
        assert_eq!(c.docs(), 6);
        assert_eq!(c.doc(0), &[0, 1, 0, 3, 2]);
        assert_eq!(c.total_tokens(), 30);
        c.validate().unwrap();
    }
}
