//! Reuters-21578, Distribution 1.0 (`reuters/reuters21578.tar.gz`), read
//! straight from the archive: the SGML files `reut2-000.sgm` …
//! `reut2-021.sgm` (SGML after `lewis.dtd`, Latin-1).
//!
//! Choices (the paper says only "Reuters"):
//! - every `<REUTERS>` document of the 22 files is used (all 21,578, no
//!   split), in file order;
//! - a document's text is the content of its `<TEXT>` element without the
//!   `<DATELINE>` element (place and date): `<TITLE>` and `<BODY>` for
//!   normal stories, the title alone for `TYPE="BRIEF"`, the unstructured
//!   text for `TYPE="UNPROC"`; tags are removed and character entities
//!   (`&lt;`, `&#3;`, …) act as word separators;
//! - the `Reuter` sign-off that ends almost every story is a stop word;
//! - documents left with no token (e.g. an empty brief) are dropped.

use std::path::Path;

use anyhow::{Result, bail};

use super::corpus::{Corpus, CorpusBuilder, CorpusShape};
use super::{DatasetName, Provenance, files, tarball};

/// Archive name (before any `.gz`).
pub(crate) const ARCHIVE: &str = "reuters21578.tar";
/// Number of SGML files `reut2-000.sgm` … `reut2-021.sgm`.
pub(crate) const SGML_FILES: usize = 22;
/// Corpus-specific stop word: the sign-off at the end of each story.
pub(crate) const EXTRA_STOP_WORDS: &[&str] = &["reuter"];

/// The real corpus under the tokenizer of [`super::corpus`], as measured by
/// `cargo run --release --example corpus_shape -- <data dir>` on the files in
/// `../shared/data/`.
pub(crate) const SHAPE: CorpusShape = CorpusShape {
    docs: 21_577,
    vocab: 12_998,
    tokens: 1_477_562,
    log_len_mean: 3.833207152990019,
    log_len_std: 0.8926424855990681,
    max_len: 753,
};

/// Loads Reuters-21578 from `dir` (the `reuters/` folder).
pub(crate) fn load(dir: &Path) -> Result<Corpus> {
    let path = files::find(DatasetName::Reuters, dir, ARCHIVE)?;
    let mut sgml: Vec<(String, Vec<u8>)> = Vec::new();
    tarball::for_each_file(&path, |name, data| {
        let base = name.rsplit('/').next().unwrap_or(name);
        if base.starts_with("reut2-") && base.ends_with(".sgm") {
            sgml.push((base.to_string(), data.to_vec()));
        }
        Ok(())
    })?;
    sgml.sort_by(|a, b| a.0.cmp(&b.0));
    let missing: Vec<String> = (0..SGML_FILES)
        .map(|i| format!("reut2-{i:03}.sgm"))
        .filter(|n| !sgml.iter().any(|(s, _)| s == n))
        .collect();
    if !missing.is_empty() {
        bail!(
            "{}: archive incomplete: missing {} (expected reut2-000.sgm … reut2-021.sgm)",
            path.display(),
            missing.join(", ")
        );
    }
    let mut builder = CorpusBuilder::new(EXTRA_STOP_WORDS);
    for (name, data) in &sgml {
        let label = format!("{}:{name}", path.display());
        for doc in parse_sgml(data, &label)? {
            builder.add_document(&doc.pieces(data));
        }
    }
    builder.build(
        DatasetName::Reuters,
        Provenance::Real {
            files: vec![path.clone()],
        },
    )
}

/// One `<REUTERS>` document: the byte ranges of its text pieces.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SgmlDoc {
    /// NEWID attribute.
    pub(crate) newid: u64,
    /// Byte ranges (into the file) of the text kept, in order.
    pub(crate) ranges: Vec<std::ops::Range<usize>>,
}

impl SgmlDoc {
    /// The text pieces of this document in `data`.
    pub(crate) fn pieces<'a>(&self, data: &'a [u8]) -> Vec<&'a [u8]> {
        self.ranges.iter().map(|r| &data[r.clone()]).collect()
    }
}

/// Line and column (1-based) of byte `offset`.
fn position(data: &[u8], offset: usize) -> String {
    let before = &data[..offset.min(data.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = offset
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    format!("line {line}, column {col}")
}

fn find(data: &[u8], from: usize, pat: &[u8]) -> Option<usize> {
    data.get(from..)?
        .windows(pat.len())
        .position(|w| w == pat)
        .map(|p| p + from)
}

/// Parses one SGML file into its documents. `label` names the file in
/// errors, which give the line and column of the problem.
pub(crate) fn parse_sgml(data: &[u8], label: &str) -> Result<Vec<SgmlDoc>> {
    let mut docs = Vec::new();
    let mut at = 0;
    while let Some(open) = find(data, at, b"<REUTERS") {
        let Some(tag_end) = find(data, open, b">") else {
            bail!(
                "{label}, {}: unterminated <REUTERS tag (no closing `>`)",
                position(data, open)
            );
        };
        let close = find(data, tag_end, b"</REUTERS>");
        let next_open = find(data, tag_end, b"<REUTERS");
        let close = match (close, next_open) {
            (Some(c), Some(n)) if n < c => bail!(
                "{label}, {}: <REUTERS> element is not closed before the next one at {}",
                position(data, open),
                position(data, n)
            ),
            (Some(c), _) => c,
            (None, _) => bail!(
                "{label}, {}: <REUTERS> element is never closed (missing </REUTERS>; truncated file?)",
                position(data, open)
            ),
        };
        let attrs = String::from_utf8_lossy(&data[open + 8..tag_end]);
        let newid = attribute(&attrs, "NEWID")
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{label}, {}: <REUTERS> tag has no numeric NEWID attribute",
                    position(data, open)
                )
            })?;
        let ranges = text_ranges(data, tag_end + 1, close, label, newid)?;
        docs.push(SgmlDoc { newid, ranges });
        at = close + 10;
    }
    if docs.is_empty() {
        bail!("{label}: no <REUTERS> documents found; not a Reuters-21578 SGML file");
    }
    Ok(docs)
}

/// Value of `name="value"` in a tag's attribute text.
fn attribute(attrs: &str, name: &str) -> Option<String> {
    let key = format!("{name}=\"");
    let start = attrs.find(&key)? + key.len();
    let end = attrs[start..].find('"')? + start;
    Some(attrs[start..end].to_string())
}

/// The text of the `<TEXT>` element inside `data[start..end]`, without the
/// DATELINE element, tags and entities.
fn text_ranges(
    data: &[u8],
    start: usize,
    end: usize,
    label: &str,
    newid: u64,
) -> Result<Vec<std::ops::Range<usize>>> {
    let inner = &data[..end];
    let Some(open) = find(inner, start, b"<TEXT") else {
        bail!(
            "{label}, {}: document NEWID={newid} has no <TEXT> element",
            position(data, start)
        );
    };
    let Some(open_end) = find(inner, open, b">") else {
        bail!("{label}, {}: unterminated <TEXT tag", position(data, open));
    };
    let Some(close) = find(inner, open_end, b"</TEXT>") else {
        bail!(
            "{label}, {}: <TEXT> element of document NEWID={newid} is never closed",
            position(data, open)
        );
    };
    let mut ranges = Vec::new();
    let mut i = open_end + 1;
    let mut piece = i;
    while i < close {
        match data[i] {
            b'<' => {
                if piece < i {
                    ranges.push(piece..i);
                }
                let Some(gt) = find(&data[..close], i, b">") else {
                    bail!("{label}, {}: unterminated tag", position(data, i));
                };
                if data[i..gt].starts_with(b"<DATELINE") {
                    let Some(dl_end) = find(&data[..close], gt, b"</DATELINE>") else {
                        bail!(
                            "{label}, {}: <DATELINE> element is never closed",
                            position(data, i)
                        );
                    };
                    i = dl_end + b"</DATELINE>".len();
                } else {
                    i = gt + 1;
                }
                piece = i;
            }
            b'&' => {
                // A character entity (`&lt;`, `&#3;`): a separator.
                let semi = data[i..close]
                    .iter()
                    .take(10)
                    .position(|&b| b == b';')
                    .map(|p| i + p);
                if let Some(semi) = semi {
                    if piece < i {
                        ranges.push(piece..i);
                    }
                    i = semi + 1;
                    piece = i;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    if piece < close {
        ranges.push(piece..close);
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::tarball::tests::tar_gz;

    const DOC: &str = "<REUTERS TOPICS=\"YES\" NEWID=\"7\">\n<DATE>26-FEB-1987</DATE>\n\
<UNKNOWN>&#5;reute</UNKNOWN>\n<TEXT>&#2;\n<TITLE>COCOA REVIEW</TITLE>\n\
<DATELINE>    SALVADOR, Feb 26 - </DATELINE><BODY>Showers &amp; cocoa &lt;zone>.\n Reuter\n&#3;</BODY></TEXT>\n</REUTERS>\n";

    #[test]
    fn extracts_title_and_body_without_dateline_or_entities() {
        let text = format!(
            "<!DOCTYPE lewis SYSTEM \"lewis.dtd\">\n{DOC}{}",
            DOC.replace("\"7\"", "\"8\"")
        );
        let docs = parse_sgml(text.as_bytes(), "x.sgm").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].newid, 8);
        let joined: Vec<u8> = docs[0].pieces(text.as_bytes()).join(&b'|');
        let joined = String::from_utf8(joined).unwrap();
        assert!(joined.contains("COCOA REVIEW"), "{joined}");
        assert!(
            joined.contains("Showers ") && joined.contains("zone>"),
            "{joined}"
        );
        assert!(
            !joined.contains("SALVADOR") && !joined.contains("amp") && !joined.contains("reute\n")
        );
        assert!(!joined.contains("26-FEB"));
    }

    #[test]
    fn malformed_sgml_names_file_and_position() {
        let unclosed = DOC.replace("</REUTERS>", "");
        let e = parse_sgml(unclosed.as_bytes(), "reut2-003.sgm")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("reut2-003.sgm, line 1, column 1") && e.contains("never closed"),
            "{e}"
        );
        let nested = format!("{}{DOC}", DOC.replace("</REUTERS>", ""));
        let e = parse_sgml(nested.as_bytes(), "f").unwrap_err().to_string();
        assert!(
            e.contains("not closed before the next one at line 10"),
            "{e}"
        );
        let no_id = DOC.replace("NEWID=\"7\"", "");
        let e = parse_sgml(no_id.as_bytes(), "f").unwrap_err().to_string();
        assert!(e.contains("NEWID"), "{e}");
        let no_text = DOC.replace("</TEXT>", "");
        let e = parse_sgml(no_text.as_bytes(), "f").unwrap_err().to_string();
        assert!(
            e.contains("line 4, column 1") && e.contains("<TEXT>"),
            "{e}"
        );
        let e = parse_sgml(b"hello", "f").unwrap_err().to_string();
        assert!(e.contains("no <REUTERS>"), "{e}");
    }

    #[test]
    fn loads_an_archive_and_reports_missing_files() {
        let dir = std::env::temp_dir().join(format!("scarsim-reuters-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(
            err.contains("reuters21578.tar.gz") && err.contains("--synthetic"),
            "{err}"
        );
        let file: String = (1..=6)
            .map(|i| DOC.replace("\"7\"", &format!("\"{i}\"")))
            .collect();
        let names: Vec<String> = (0..SGML_FILES)
            .map(|i| format!("reut2-{i:03}.sgm"))
            .collect();
        let members: Vec<(&str, &[u8])> = names
            .iter()
            .map(|n| (n.as_str(), file.as_bytes()))
            .collect();
        std::fs::write(dir.join("reuters21578.tar.gz"), tar_gz(&members)).unwrap();
        let c = load(&dir).unwrap();
        assert_eq!(c.docs(), 6 * SGML_FILES);
        assert!(c.vocab.contains(&"cocoa".to_string()));
        assert!(!c.vocab.contains(&"reuter".to_string()));
        assert!(!c.vocab.contains(&"salvador".to_string()));
        std::fs::write(dir.join("reuters21578.tar.gz"), tar_gz(&members[1..])).unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains("missing reut2-000.sgm"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
