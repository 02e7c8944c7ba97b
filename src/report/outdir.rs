//! Output folders: every path scarsim writes under a folder the user gave
//! (`--out`, a results folder) is built here, from a validated name, and
//! every file is written here, so that nothing lands outside that folder.
//!
//! - [`check_name`] accepts one path component of letters, digits, `-`, `_`
//!   and `.` that does not start with `.` (so no `..`, no separators, no
//!   absolute paths, nothing empty or hidden), at most [`MAX_NAME_BYTES`].
//! - [`join`] builds `<dir>/<name>` from a checked name and refuses it when
//!   that entry is a symbolic link: scarsim never reads or writes through a
//!   link inside its output folders; [`file`] builds the target of a new
//!   file, where a link is replaced instead. [`ensure_dir`] does the same for a
//!   subfolder and creates it, remembering what it created ([`Created`]) so
//!   that a run that fails early removes only what it made.
//! - [`write_file`] writes a new file as a temporary `.<name>.tmp-<pid>`
//!   created exclusively (`O_CREAT|O_EXCL`, and `O_NOFOLLOW` on Unix) in the
//!   same folder, flushes it and renames it over the final name; a link
//!   planted at the final name is replaced, never written through.
//! - [`remove_stale_temporaries`] deletes the temporaries left by processes
//!   that no longer run (a run killed mid-write), on resume.
//!
//! For tests, the environment variable `SCARSIM_FAIL_WRITE` injects a full
//! disk: a number `N` makes the N-th write of this process fail, a file name
//! (e.g. `baseline.csv`) makes every write of that file fail, each with
//! "No space left on device". It is read once, at the first write.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};

/// Longest accepted name (bytes); file systems allow 255.
pub(crate) const MAX_NAME_BYTES: usize = 200;

/// The environment variable that injects write failures (tests only).
pub(crate) const FAIL_WRITE_VARIABLE: &str = "SCARSIM_FAIL_WRITE";

/// Checks that `name` is usable as one file or folder name inside an output
/// folder; `what` says what it names, for the message.
pub(crate) fn check_name(name: &str, what: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !ok {
        bail!(
            "{name:?} is not a usable {what}: use 1 to {MAX_NAME_BYTES} letters, digits, '-', '_' and '.', \
             not starting with '.' (it names a file or folder inside the output folder)"
        );
    }
    Ok(())
}

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// `<dir>/<name>` for a checked `name`; refused when that entry is a
/// symbolic link.
pub(crate) fn join(dir: &Path, name: &str) -> Result<PathBuf> {
    check_name(name, "name")?;
    let path = dir.join(name);
    if is_link(&path) {
        bail!(
            "refusing to use {}: it is a symbolic link (scarsim never reads or writes through a link \
             inside its output folder); remove it",
            path.display()
        );
    }
    Ok(path)
}

/// `<dir>/<name>` for a checked `name`, as the target of [`write_file`]: a
/// link planted there is replaced by the new file, never written through.
pub(crate) fn file(dir: &Path, name: &str) -> Result<PathBuf> {
    check_name(name, "file name")?;
    Ok(dir.join(name))
}

/// Folders a run created, so that a run that fails before producing
/// anything can remove exactly those (never a folder that was already there).
#[derive(Debug, Default)]
pub(crate) struct Created {
    dirs: Vec<PathBuf>,
}

impl Created {
    /// Nothing created yet.
    pub(crate) fn new() -> Created {
        Created::default()
    }

    /// Removes the folders this run created, deepest first, if they are
    /// empty; a folder that holds anything is left alone.
    pub(crate) fn remove_empty(&mut self) {
        while let Some(d) = self.dirs.pop() {
            std::fs::remove_dir(&d).ok();
        }
    }
}

/// Creates `root` (and its parents) if missing, recording what it created.
pub(crate) fn ensure_root(root: &Path, created: &mut Created) -> Result<()> {
    if root.as_os_str().is_empty() {
        return Ok(());
    }
    if root.is_dir() {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut p = root;
    loop {
        if std::fs::symlink_metadata(p).is_ok() {
            break;
        }
        missing.push(p.to_path_buf());
        match p.parent() {
            Some(q) if !q.as_os_str().is_empty() => p = q,
            _ => break,
        }
    }
    std::fs::create_dir_all(root)
        .with_context(|| format!("cannot create folder {}", root.display()))?;
    created.dirs.extend(missing.into_iter().rev());
    Ok(())
}

/// The subfolder `<root>/<name>` (a checked name, not a link), created if
/// missing along with `root`; what was created is recorded in `created`.
pub(crate) fn ensure_dir(root: &Path, name: &str, created: &mut Created) -> Result<PathBuf> {
    ensure_root(root, created)?;
    let dir = join(root, name)?;
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!(
            "{} is in the way: it is a file, not a results folder",
            dir.display()
        ),
        Err(_) => match std::fs::create_dir(&dir) {
            Ok(()) => created.dirs.push(dir.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot create folder {}", dir.display()));
            }
        },
    }
    // Created or not, it must be a real folder now (not a link swapped in).
    if is_link(&dir) {
        bail!("refusing to use {}: it is a symbolic link", dir.display());
    }
    Ok(dir)
}

// ------------------------------------------------------------ writes

enum FailRule {
    Never,
    Nth(usize),
    Named(String),
}

fn fail_rule() -> &'static FailRule {
    static RULE: OnceLock<FailRule> = OnceLock::new();
    RULE.get_or_init(|| match std::env::var(FAIL_WRITE_VARIABLE) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<usize>() {
            Ok(n) => FailRule::Nth(n),
            Err(_) => FailRule::Named(v.trim().to_string()),
        },
        _ => FailRule::Never,
    })
}

/// Counts one write of the file `name` and fails it if `SCARSIM_FAIL_WRITE`
/// says so (tests inject a full disk this way).
pub(crate) fn injected_failure(name: &str) -> std::io::Result<()> {
    static WRITES: AtomicUsize = AtomicUsize::new(0);
    let n = WRITES.fetch_add(1, Ordering::SeqCst) + 1;
    let fail = match fail_rule() {
        FailRule::Never => false,
        FailRule::Nth(k) => n == *k,
        FailRule::Named(f) => f == name,
    };
    if fail {
        return Err(std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!("No space left on device (injected by {FAIL_WRITE_VARIABLE})"),
        ));
    }
    Ok(())
}

/// Opens an existing file for writing (`append` or not) without following a
/// symbolic link at its name.
pub(crate) fn open_existing(path: &Path, append: bool) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    if append {
        o.append(true);
    } else {
        o.write(true);
    }
    no_follow(&mut o);
    o.open(path)
}

/// Opens a file for reading without following a symbolic link at its name.
pub(crate) fn open_read(path: &Path) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    no_follow(&mut o);
    o.open(path)
}

#[cfg(unix)]
fn no_follow(o: &mut OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt;
    o.custom_flags(libc::O_NOFOLLOW);
}

#[cfg(not(unix))]
fn no_follow(_: &mut OpenOptions) {}

/// The temporary name of `name` for this process: `.<name>.tmp-<pid>`.
pub(crate) fn temp_name(name: &str) -> String {
    format!(".{name}.tmp-{}", std::process::id())
}

/// A new file `.<name>.tmp-<pid>` in `dir`, created exclusively (a stale
/// file or link of that name is removed first, never followed).
pub(crate) fn create_temp(dir: &Path, name: &str) -> Result<(File, PathBuf)> {
    let tmp = dir.join(temp_name(name));
    let create = || {
        let mut o = OpenOptions::new();
        o.write(true).create_new(true);
        no_follow(&mut o);
        o.open(&tmp)
    };
    let file = match create() {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // Left by an earlier process with our pid: unlink it (a link is
            // removed, not followed) and create afresh.
            std::fs::remove_file(&tmp)
                .with_context(|| format!("cannot remove the stale {}", tmp.display()))?;
            create().with_context(|| format!("cannot create {}", tmp.display()))?
        }
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", tmp.display())),
    };
    Ok((file, tmp))
}

/// Writes `bytes` to `path` atomically: a temporary file created exclusively
/// in the same folder, flushed, then renamed over `path` (which replaces a
/// link at `path` instead of writing through it). The folder must exist.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .with_context(|| format!("{} names no file", path.display()))?;
    let (mut f, tmp) = create_temp(dir, &name)?;
    let result = (|| -> Result<()> {
        injected_failure(&name).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(bytes)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.sync_all()
            .with_context(|| format!("cannot flush {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot move {} to {}", tmp.display(), path.display()))?;
        Ok(())
    })();
    if result.is_err() {
        std::fs::remove_file(&tmp).ok();
    } else {
        sync_dir(dir);
    }
    result
}

/// Flushes a folder's entries (a rename is durable only then); best effort.
pub(crate) fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        d.sync_all().ok();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

// ------------------------------------------------------------ stale temporaries

/// The process id in a temporary's name `.<name>.tmp-<pid>`, if it is one.
pub(crate) fn temp_owner(file_name: &str) -> Option<u32> {
    if !file_name.starts_with('.') {
        return None;
    }
    let (_, pid) = file_name.rsplit_once(".tmp-")?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether process `pid` is running (on Unix; elsewhere assumed running, so
/// nothing is removed).
pub(crate) fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(unix)]
    {
        let Ok(p) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if p <= 0 {
            return false;
        }
        // SAFETY: kill with signal 0 sends nothing; it only checks whether
        // the process exists.
        let r = unsafe { libc::kill(p, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// Removes the temporaries `.<name>.tmp-<pid>` in `dir` whose process no
/// longer runs (files and links only, never folders). Returns how many.
pub(crate) fn remove_stale_temporaries(dir: &Path) -> Result<usize> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = temp_owner(&name) else {
            continue;
        };
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() || process_alive(pid) {
            continue;
        }
        std::fs::remove_file(e.path())
            .with_context(|| format!("cannot remove the stale {}", e.path().display()))?;
        removed += 1;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("scarsim-outdir-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&d).ok();
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn names() {
        for good in ["scar-partial-mlr-mnist", "a.b_c-1", "summary.csv", "x"] {
            check_name(good, "name").unwrap();
        }
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        for bad in [
            "", ".", "..", "../x", "a/b", "/etc", ".hidden", "a b", "a\\b", "é", &long, "a\0b",
        ] {
            assert!(check_name(bad, "name").is_err(), "{bad:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn links_are_refused_and_replaced_never_followed() {
        let d = tmp("links");
        let target = d.join("target.txt");
        std::fs::write(&target, b"precious").unwrap();
        let out = d.join("out");
        std::fs::create_dir(&out).unwrap();
        std::os::unix::fs::symlink(&target, out.join("summary.csv")).unwrap();
        assert!(join(&out, "summary.csv").is_err());
        // Writing replaces the link; the target is untouched.
        write_file(&out.join("summary.csv"), b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        assert_eq!(std::fs::read(out.join("summary.csv")).unwrap(), b"new");
        assert!(!is_link(&out.join("summary.csv")));
        // A linked subfolder is refused.
        std::os::unix::fs::symlink(&d, out.join("sc")).unwrap();
        let mut c = Created::new();
        let e = ensure_dir(&out, "sc", &mut c).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // A planted link at the temporary name is removed, not followed.
        std::os::unix::fs::symlink(&target, out.join(temp_name("t.csv"))).unwrap();
        write_file(&out.join("t.csv"), b"t").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn created_folders_are_removed_and_existing_ones_kept() {
        let d = tmp("created");
        let existing = d.join("existing");
        std::fs::create_dir(&existing).unwrap();
        let mut c = Created::new();
        ensure_dir(&existing, "sc", &mut c).unwrap();
        c.remove_empty();
        assert!(existing.is_dir() && !existing.join("sc").exists());
        let mut c = Created::new();
        ensure_dir(&d.join("new/deeper"), "sc", &mut c).unwrap();
        c.remove_empty();
        assert!(!d.join("new").exists());
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn stale_temporaries_of_dead_processes_go() {
        let d = tmp("stale");
        assert_eq!(temp_owner(".summary.csv.tmp-123"), Some(123));
        assert_eq!(temp_owner("summary.csv"), None);
        assert_eq!(temp_owner(".a.tmp-x"), None);
        // A pid that cannot be running (beyond the kernel's pid limit).
        let dead = d.join(".summary.csv.tmp-4194304999");
        std::fs::write(&dead, b"x").unwrap();
        let mine = d.join(temp_name("trials.csv"));
        std::fs::write(&mine, b"x").unwrap();
        std::fs::write(d.join("summary.csv"), b"x").unwrap();
        let n = remove_stale_temporaries(&d).unwrap();
        if cfg!(unix) {
            assert_eq!(n, 1);
            assert!(!dead.exists());
        }
        assert!(mine.exists() && d.join("summary.csv").exists());
        std::fs::remove_dir_all(&d).ok();
    }
}
