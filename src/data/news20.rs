//! 20 Newsgroups, "bydate" version (`20newsgroups/20news-bydate.tar.gz`),
//! read straight from the archive.
//!
//! Members are `20news-bydate-{train,test}/<group>/<message number>`, each a
//! raw Usenet message: headers, a blank line, the body. Choices (the paper
//! says only "20 Newsgroups"):
//! - all 18,846 messages, train and test, are used;
//! - the headers (everything before the first blank line, including
//!   `Subject:`) are dropped; the body is kept whole, quoted replies and
//!   signatures included;
//! - document order: train before test, then group name, then message number;
//! - the body is tokenized by the rules of [`super::corpus`].

use std::path::Path;

use anyhow::{Result, bail};

use super::corpus::{Corpus, CorpusBuilder, CorpusShape};
use super::{DatasetName, Provenance, files, tarball};

/// Archive name (before any `.gz`).
pub(crate) const ARCHIVE: &str = "20news-bydate.tar";

/// The real corpus under the tokenizer of [`super::corpus`], as measured by
/// `cargo run --release --example corpus_shape -- <data dir>` on the files in
/// `../shared/data/`.
pub(crate) const SHAPE: CorpusShape = CorpusShape {
    docs: 18_805,
    vocab: 28_857,
    tokens: 2_239_111,
    log_len_mean: 4.270309417810265,
    log_len_std: 0.9365367177415503,
    max_len: 5_990,
};

/// One message found in the archive.
struct Message {
    /// 0 = train, 1 = test.
    split: u8,
    group: String,
    number: u64,
    body: Vec<u8>,
}

/// Loads 20 Newsgroups from `dir` (the `20newsgroups/` folder).
pub(crate) fn load(dir: &Path) -> Result<Corpus> {
    let path = files::find(DatasetName::News20, dir, ARCHIVE)?;
    let mut messages = Vec::new();
    tarball::for_each_file(&path, |name, data| {
        if let Some(m) = parse_member(name, data, &path)? {
            messages.push(m);
        }
        Ok(())
    })?;
    for (split, folder) in [(0u8, "20news-bydate-train"), (1, "20news-bydate-test")] {
        if !messages.iter().any(|m| m.split == split) {
            bail!(
                "{}: no messages under {folder}/; expected the 20news-bydate layout \
                 {folder}/<group>/<message number> (archive incomplete or a different file?)",
                path.display()
            );
        }
    }
    messages.sort_by(|a, b| (a.split, &a.group, a.number).cmp(&(b.split, &b.group, b.number)));
    let mut builder = CorpusBuilder::new(&[]);
    for m in &messages {
        builder.add_document(&[&m.body]);
    }
    builder.build(
        DatasetName::News20,
        Provenance::Real {
            files: vec![path.clone()],
        },
    )
}

/// Reads one archive member; `None` for members outside the two split folders.
fn parse_member(name: &str, data: &[u8], archive: &Path) -> Result<Option<Message>> {
    let parts: Vec<&str> = name.trim_start_matches("./").split('/').collect();
    let split = match parts.first() {
        Some(&"20news-bydate-train") => 0,
        Some(&"20news-bydate-test") => 1,
        _ => return Ok(None),
    };
    let (group, number) = match parts.as_slice() {
        [_, group, number] => match number.parse::<u64>() {
            Ok(n) => (group.to_string(), n),
            Err(_) => bail!(
                "{}: member {name}: expected <split>/<group>/<message number>, \
                 but `{number}` is not a number",
                archive.display()
            ),
        },
        _ => bail!(
            "{}: member {name}: expected <split>/<group>/<message number>",
            archive.display()
        ),
    };
    let body = match find_blank_line(data) {
        Some(start) => data[start..].to_vec(),
        None => bail!(
            "{}: member {name}: no blank line after the headers; not a raw Usenet message",
            archive.display()
        ),
    };
    Ok(Some(Message {
        split,
        group,
        number,
        body,
    }))
}

/// Offset just after the first empty line (LF or CRLF line ends).
fn find_blank_line(data: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    for (i, &b) in data.iter().enumerate() {
        if b == b'\n' {
            let line = &data[line_start..i];
            if line.is_empty() || line == b"\r" {
                return Some(i + 1);
            }
            line_start = i + 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::tarball::tests::tar_gz;

    fn msg(subject: &str, body: &str) -> Vec<u8> {
        format!("From: someone@example.org\nSubject: {subject}\n\n{body}").into_bytes()
    }

    #[test]
    fn loads_bodies_in_order_without_headers() {
        let dir = std::env::temp_dir().join(format!("scarsim-news20-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let body = "engine wheels brakes engine wheels";
        let m: Vec<Vec<u8>> = (0..6).map(|i| msg(&format!("subject{i}"), body)).collect();
        let gz = tar_gz(&[
            ("20news-bydate-test/rec.autos/10", &m[0]),
            ("20news-bydate-train/rec.autos/9", &m[1]),
            ("20news-bydate-train/rec.autos/100", &m[2]),
            ("20news-bydate-train/alt.atheism/5", &m[3]),
            ("20news-bydate-test/alt.atheism/7", &m[4]),
            ("20news-bydate-train/sci.space/1", &msg("x", "orbit")),
            ("20news-bydate-train/sci.space/2", &m[5]),
        ]);
        std::fs::write(dir.join("20news-bydate.tar.gz"), gz).unwrap();
        let c = load(&dir).unwrap();
        // "orbit" occurs in one document only: dropped, with its document.
        assert_eq!(c.docs(), 6);
        assert_eq!(c.vocab, vec!["engine", "wheels", "brakes"]);
        assert!(!c.vocab.iter().any(|w| w.starts_with("subject")));
        assert_eq!(c.doc(0), &[0, 1, 2, 0, 1]);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn bad_archives_get_clear_errors() {
        let dir = std::env::temp_dir().join(format!("scarsim-news20-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(
            err.contains("20news-bydate.tar.gz") && err.contains("--synthetic"),
            "{err}"
        );
        let gz = tar_gz(&[("20news-bydate-train/rec.autos/1", b"From: x\nno body")]);
        std::fs::write(dir.join("20news-bydate.tar.gz"), &gz).unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(
            err.contains("rec.autos/1") && err.contains("blank line"),
            "{err}"
        );
        let gz = tar_gz(&[("20news-bydate-train/rec.autos/1", &msg("a", "b"))]);
        std::fs::write(dir.join("20news-bydate.tar.gz"), &gz).unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains("20news-bydate-test/"), "{err}");
        std::fs::write(dir.join("20news-bydate.tar.gz"), &gz[..gz.len() / 2]).unwrap();
        let err = format!("{:#}", load(&dir).unwrap_err());
        assert!(err.contains("truncated"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
