//! Atomic result files: written under a temporary name in the same folder,
//! flushed, then renamed over the final name, so a crash never leaves a
//! half-written file where a finished one is expected. The temporary is
//! created exclusively and a link at the final name is replaced, never
//! followed (see [`super::outdir::write_file`]).

use std::path::Path;

use anyhow::{Context, Result};

/// Writes `bytes` to `path` atomically (creating the parent folder).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create folder {}", dir.display()))?;
    super::outdir::write_file(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_replaces() {
        let dir = std::env::temp_dir().join(format!("scarsim-atomic-{}", std::process::id()));
        let p = dir.join("sub").join("a.csv");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let leftovers: Vec<_> = std::fs::read_dir(p.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary files left behind");
        std::fs::remove_dir_all(&dir).ok();
    }
}
