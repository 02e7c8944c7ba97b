//! Units of work, shards and the journal.
//!
//! A scenario is a list of independent units (one trial at one point). A run
//! may be responsible for all of them or for one shard (`--shard i/n`,
//! balanced by expected cost). Every finished unit is appended to a journal
//! (`units.jsonl`, one checksummed JSON line per unit, flushed), so an
//! interrupted run resumes where it stopped (`--resume`), and a finished
//! shard's journal is its result, which `scarsim merge` combines into exactly
//! the files an unsharded run writes.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::report::outdir;

/// Longest journal line read back (a longer one counts as torn).
const MAX_LINE_BYTES: u64 = 1 << 30;

/// Set by Ctrl-C (see `commands`): running cohorts stop and the run exits
/// with its journal intact.
pub(crate) static CANCEL: AtomicBool = AtomicBool::new(false);

/// Records of finished units, by unit index.
pub(crate) type Records = BTreeMap<usize, serde_json::Value>;

/// One slice of a sharded run: shard `index` of `count` (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard, in `0..count`.
    pub(crate) index: usize,
    /// Number of shards.
    pub(crate) count: usize,
}

/// Environment variables that batch engines set to a job's array index.
pub(crate) const INDEX_VARIABLES: &[&str] = &["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"];

impl Shard {
    /// Parses `i/n`; `i` may be `env` to read the index from
    /// `SLURM_ARRAY_TASK_ID` (Slurm job arrays) or `JOB_COMPLETION_INDEX`
    /// (Kubernetes indexed jobs).
    pub fn parse(text: &str) -> Result<Shard> {
        let Some((i, n)) = text.split_once('/') else {
            bail!("--shard {text:?}: expected INDEX/COUNT, e.g. 0/4 (0-based) or env/4");
        };
        let count: usize = n
            .trim()
            .parse()
            .ok()
            .filter(|&c| c >= 1)
            .with_context(|| format!("--shard {text:?}: COUNT must be a whole number ≥ 1"))?;
        let index = if i.trim() == "env" {
            let (var, value) = INDEX_VARIABLES
                .iter()
                .find_map(|v| std::env::var(v).ok().map(|x| (*v, x)))
                .with_context(|| {
                    format!(
                        "--shard env/{count}: none of {} is set",
                        INDEX_VARIABLES.join(", ")
                    )
                })?;
            value.trim().parse().with_context(|| {
                format!("--shard env/{count}: {var}={value:?} is not a whole number")
            })?
        } else {
            i.trim()
                .parse()
                .with_context(|| format!("--shard {text:?}: INDEX must be a whole number"))?
        };
        if index >= count {
            bail!("--shard {index}/{count}: INDEX must be in 0..{count} (0-based)");
        }
        Ok(Shard { index, count })
    }

    /// Checks the shard against a scenario of `units` units: a shard count
    /// above the number of units would leave shards with nothing to do.
    pub(crate) fn check_units(&self, units: usize) -> Result<()> {
        if self.count == 0 || self.index >= self.count {
            bail!(
                "shard {}/{}: INDEX must be in 0..COUNT (0-based)",
                self.index,
                self.count
            );
        }
        if self.count > units.max(1) {
            bail!(
                "--shard {}/{}: the scenario has only {units} units, so use at most {} shards",
                self.index,
                self.count,
                units.max(1)
            );
        }
        Ok(())
    }

    /// Folder suffix of this shard's results: `shard-<i>-of-<n>`.
    pub(crate) fn suffix(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.count)
    }
}

/// Assigns units to `count` shards balancing their total expected cost
/// (longest-processing-time first; ties go to the lower index), and returns
/// the units of shard `index`, in increasing order. The least loaded shard
/// is kept in a heap, so this takes O(units · log count) (a shard count is
/// at most the number of units: [`Shard::check_units`]).
pub(crate) fn assign(costs: &[f64], shard: Shard) -> Vec<usize> {
    use std::cmp::{Ordering as CmpOrdering, Reverse};
    use std::collections::BinaryHeap;
    /// A shard's load, ordered as `total_cmp` then by index.
    #[derive(PartialEq)]
    struct Load(f64, usize);
    impl Eq for Load {}
    impl PartialOrd for Load {
        fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Load {
        fn cmp(&self, other: &Self) -> CmpOrdering {
            self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
        }
    }
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by(|&a, &b| costs[b].total_cmp(&costs[a]).then(a.cmp(&b)));
    let count = shard.count.clamp(1, costs.len().max(1));
    let mut heap: BinaryHeap<Reverse<Load>> = (0..count).map(|i| Reverse(Load(0.0, i))).collect();
    let mut mine = Vec::new();
    for u in order {
        let Reverse(Load(load, target)) = heap.pop().expect("at least one shard");
        if target == shard.index {
            mine.push(u);
        }
        heap.push(Reverse(Load(load + costs[u].max(0.0), target)));
    }
    mine.sort_unstable();
    mine
}

pub(crate) use crate::report::manifest::fnv64;

/// The first line of a journal: what it belongs to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalHeader {
    /// Program version that wrote it.
    pub version: String,
    /// Scenario name.
    pub scenario: String,
    /// Fingerprint of the resolved scenario and data options.
    pub fingerprint: String,
    /// The shard, if the run is sharded.
    pub shard: Option<Shard>,
}

#[derive(Serialize, Deserialize)]
struct UnitLine {
    unit: usize,
    record: serde_json::Value,
}

/// An append-only, checksummed journal of finished units.
pub struct Journal {
    file: File,
    path: PathBuf,
}

fn line_for<T: Serialize>(value: &T) -> Result<String> {
    let json = serde_json::to_string(value)?;
    Ok(format!("{}\t{json}\n", fnv64(json.as_bytes())))
}

/// Lines (complete or not) left in `r`, read in chunks (a hostile journal
/// may hold one enormous line).
fn count_lines(r: &mut impl BufRead) -> std::io::Result<usize> {
    let mut lines = 0;
    let mut open = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(lines + usize::from(open));
        }
        let n = buf.len();
        let newlines = buf.iter().filter(|&&b| b == b'\n').count();
        lines += newlines;
        open = buf[n - 1] != b'\n';
        r.consume(n);
    }
}

fn parse_line(line: &str) -> Option<&str> {
    let (sum, json) = line.split_once('\t')?;
    (fnv64(json.as_bytes()) == sum).then_some(json)
}

impl Journal {
    /// Starts a new journal at `path` (replacing any old one; its folder is
    /// created if missing): the header goes to a temporary file created
    /// exclusively in the same folder, which is then renamed over `path`, so
    /// a link planted there is replaced, never written through, and a
    /// failed start (a full disk) leaves no journal behind.
    pub fn create(path: &Path, header: &JournalHeader) -> Result<Journal> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create folder {}", dir.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let line = line_for(header)?;
        let (mut file, tmp) = outdir::create_temp(dir, &name)?;
        let written = (|| -> Result<()> {
            outdir::injected_failure(&name)
                .and_then(|_| file.write_all(line.as_bytes()))
                .and_then(|_| file.sync_all())
                .with_context(|| format!("cannot write journal {}", path.display()))?;
            std::fs::rename(&tmp, path)
                .with_context(|| format!("cannot create journal {}", path.display()))
        })();
        if let Err(e) = written {
            std::fs::remove_file(&tmp).ok();
            return Err(e);
        }
        outdir::sync_dir(dir);
        Ok(Journal {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Reads the journal at `path`: its header and every intact unit line.
    /// Reading stops at the first torn or corrupt line (a crash mid-write);
    /// with `truncate` the file is cut there so appends continue cleanly.
    /// Returns the records and the number of lines dropped. A link at
    /// `path` is refused.
    pub fn read(path: &Path, truncate: bool) -> Result<(JournalHeader, Records, usize)> {
        let file = outdir::open_read(path).with_context(|| {
            format!(
                "cannot open journal {} (it must be a plain file)",
                path.display()
            )
        })?;
        let mut reader = BufReader::new(file);
        let mut line = String::new();
        let mut good_bytes = 0u64;
        let mut header: Option<JournalHeader> = None;
        let mut records = Records::new();
        let mut dropped = 0;
        loop {
            line.clear();
            let n = (&mut reader)
                .take(MAX_LINE_BYTES)
                .read_line(&mut line)
                .with_context(|| format!("cannot read journal {}", path.display()))?;
            if n == 0 {
                break;
            }
            let intact = line.ends_with('\n') && parse_line(line.trim_end_matches('\n')).is_some();
            if !intact {
                dropped = 1 + count_lines(&mut reader)
                    .with_context(|| format!("cannot read journal {}", path.display()))?;
                break;
            }
            let json = parse_line(line.trim_end_matches('\n')).expect("checked");
            if header.is_none() {
                header = Some(serde_json::from_str(json).with_context(|| {
                    format!("{}: the first line is not a journal header", path.display())
                })?);
            } else {
                let u: UnitLine = serde_json::from_str(json)
                    .with_context(|| format!("{}: malformed unit line", path.display()))?;
                records.insert(u.unit, u.record);
            }
            good_bytes += n as u64;
        }
        let Some(header) = header else {
            bail!(
                "{}: no intact journal header; delete the file and run without --resume",
                path.display()
            );
        };
        if truncate && dropped > 0 {
            let f = outdir::open_existing(path, false)
                .with_context(|| format!("cannot open journal {}", path.display()))?;
            f.set_len(good_bytes)
                .with_context(|| format!("cannot truncate journal {}", path.display()))?;
        }
        Ok((header, records, dropped))
    }

    /// Opens an existing journal for appending (after [`Journal::read`]);
    /// a link at `path` is refused.
    pub(crate) fn append_to(path: &Path) -> Result<Journal> {
        let file = outdir::open_existing(path, true).with_context(|| {
            format!(
                "cannot open journal {} (it must be a plain file)",
                path.display()
            )
        })?;
        Ok(Journal {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Appends finished units (one line each) and flushes them to the OS.
    pub fn append(&mut self, units: &[(usize, serde_json::Value)]) -> Result<()> {
        let mut text = String::new();
        for (unit, record) in units {
            text.push_str(&line_for(&UnitLine {
                unit: *unit,
                record: record.clone(),
            })?);
        }
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        outdir::injected_failure(&name)
            .and_then(|_| self.file.write_all(text.as_bytes()))
            .and_then(|_| self.file.flush())
            .with_context(|| format!("cannot append to journal {}", self.path.display()))
    }

    /// Where the journal lives.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Raised when a run is stopped (Ctrl-C) before its units are all done.
#[derive(Debug)]
pub(crate) struct Interrupted {
    /// Units finished and journalled.
    pub(crate) done: usize,
    /// Units this run is responsible for.
    pub(crate) total: usize,
    /// The journal holding the finished units.
    pub(crate) journal: PathBuf,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "interrupted: {} of {} units are done and journalled in {}; \
             run the same command again with --resume to finish",
            self.done,
            self.total,
            self.journal.display()
        )
    }
}

impl std::error::Error for Interrupted {}

/// What a run must do with its units: which shard, what is already done,
/// where to journal, and whether to stop.
pub(crate) struct Driver<'a> {
    shard: Option<Shard>,
    resumed: Records,
    journal: Option<Mutex<Journal>>,
    progress: &'a ProgressBar,
    cancel: &'a AtomicBool,
    finished: Mutex<usize>,
    shared_across: std::sync::atomic::AtomicUsize,
    /// When [`Driver::assign`] was first called: the end of the run's
    /// one-time setup (data, unperturbed run, x*), which `--plan` times apart
    /// from the units.
    assigned_at: std::sync::OnceLock<std::time::Instant>,
    /// The expected cost of every unit, as given to [`Driver::assign`]:
    /// [`Driver::run_units`] starts the most expensive first.
    costs: std::sync::OnceLock<Vec<f64>>,
    /// `--plan` times the setup apart ([`Driver::timing_setup`]).
    setup_apart: bool,
}

impl<'a> Driver<'a> {
    /// A driver for a run; `resumed` are units finished by an earlier run.
    pub(crate) fn new(
        shard: Option<Shard>,
        resumed: Records,
        journal: Option<Journal>,
        progress: &'a ProgressBar,
        cancel: &'a AtomicBool,
    ) -> Driver<'a> {
        Driver {
            shard,
            resumed,
            journal: journal.map(Mutex::new),
            progress,
            cancel,
            finished: Mutex::new(0),
            shared_across: std::sync::atomic::AtomicUsize::new(0),
            assigned_at: std::sync::OnceLock::new(),
            costs: std::sync::OnceLock::new(),
            setup_apart: false,
        }
    }

    /// This driver times the run's setup apart from its units (`--plan`):
    /// the run does all of its one-time work before [`Driver::assign`],
    /// including what it would otherwise do beside the units (a
    /// perturbation run's x*).
    pub(crate) fn timing_setup(self) -> Driver<'a> {
        Driver {
            setup_apart: true,
            ..self
        }
    }

    /// Whether the one-time work must all come before [`Driver::assign`]
    /// ([`Driver::timing_setup`]).
    pub(crate) fn times_setup(&self) -> bool {
        self.setup_apart
    }

    /// When the run first asked for its units ([`Driver::assign`]), if it has.
    pub(crate) fn assigned_at(&self) -> Option<std::time::Instant> {
        self.assigned_at.get().copied()
    }

    /// `units` from the most expensive down (by the costs given to
    /// [`Driver::assign`]; ties and units without a cost keep their order).
    pub(crate) fn by_cost(&self, units: &[usize]) -> Vec<usize> {
        let mut sorted = units.to_vec();
        if let Some(costs) = self.costs.get() {
            let cost = |u: usize| costs.get(u).copied().unwrap_or(0.0);
            sorted.sort_by(|&a, &b| cost(b).total_cmp(&cost(a)));
        }
        sorted
    }

    /// A driver that runs everything and journals nothing (library use, tests).
    pub(crate) fn all(progress: &'a ProgressBar, cancel: &'a AtomicBool) -> Driver<'a> {
        Driver::new(None, Records::new(), None, progress, cancel)
    }

    /// Given every unit's expected cost, the units this run is responsible
    /// for (`mine`, sorted) and those of them it still has to run (`todo`).
    pub(crate) fn assign(&self, costs: &[f64]) -> (Vec<usize>, Vec<usize>) {
        self.assigned_at.get_or_init(std::time::Instant::now);
        let _ = self.costs.set(costs.to_vec());
        let mine = match self.shard {
            Some(s) => assign(costs, s),
            None => (0..costs.len()).collect(),
        };
        let todo = mine
            .iter()
            .copied()
            .filter(|u| !self.resumed.contains_key(u))
            .collect();
        self.progress.set_length(mine.len() as u64);
        self.progress
            .set_position((mine.len() - self.todo_len(&mine)) as u64);
        (mine, todo)
    }

    fn todo_len(&self, mine: &[usize]) -> usize {
        mine.iter()
            .filter(|u| !self.resumed.contains_key(u))
            .count()
    }

    /// Records finished units: journal them and advance the progress bar.
    pub(crate) fn finished(&self, units: &[(usize, serde_json::Value)]) -> Result<()> {
        if let Some(j) = &self.journal {
            j.lock().expect("journal lock").append(units)?;
        }
        *self.finished.lock().expect("counter lock") += units.len();
        self.progress.inc(units.len() as u64);
        Ok(())
    }

    /// Units finished (and journalled) by this run so far.
    pub(crate) fn finished_count(&self) -> usize {
        *self.finished.lock().expect("counter lock")
    }

    /// Notes that `n` of the finished units took their outcome from another
    /// scenario of this process instead of running (see
    /// [`super::shared_outcomes`]).
    pub(crate) fn shared_across(&self, n: usize) {
        self.shared_across.fetch_add(n, Ordering::Relaxed);
    }

    /// Units of this run that took their outcome from another scenario.
    pub(crate) fn shared_across_count(&self) -> usize {
        self.shared_across.load(Ordering::Relaxed)
    }

    /// Whether the run should stop now.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Units finished by an earlier run (from the journal).
    pub(crate) fn resumed(&self) -> &Records {
        &self.resumed
    }

    /// The records of this run's units `mine`: those just computed (`done`,
    /// in any grouping) together with those resumed from the journal; or,
    /// if the run was cancelled, the error that says how to resume.
    pub(crate) fn collect<I>(
        &self,
        done: impl IntoIterator<Item = I>,
        mine: &[usize],
    ) -> Result<Records>
    where
        I: IntoIterator<Item = (usize, serde_json::Value)>,
    {
        if self.cancelled() {
            return Err(self.interrupted(mine.len()));
        }
        let mut records: Records = done.into_iter().flatten().collect();
        for u in mine {
            if let Some(r) = self.resumed.get(u) {
                records.entry(*u).or_insert_with(|| r.clone());
            }
        }
        Ok(records)
    }

    /// The error to return when stopped early.
    pub(crate) fn interrupted(&self, total: usize) -> anyhow::Error {
        let done = self.resumed.len() + *self.finished.lock().expect("counter lock");
        let journal = self
            .journal
            .as_ref()
            .map(|j| j.lock().expect("journal lock").path().to_path_buf())
            .unwrap_or_default();
        anyhow::Error::new(Interrupted {
            done: done.min(total),
            total,
            journal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_marks_the_end_of_the_setup_once() {
        let (bar, cancel) = (ProgressBar::hidden(), AtomicBool::new(false));
        let driver = Driver::all(&bar, &cancel);
        assert!(driver.assigned_at().is_none(), "no units asked for yet");
        let (mine, todo) = driver.assign(&[1.0, 2.0]);
        assert_eq!((mine, todo), (vec![0, 1], vec![0, 1]));
        let first = driver.assigned_at().expect("set by assign");
        driver.assign(&[1.0, 2.0]);
        assert_eq!(driver.assigned_at(), Some(first), "the first call counts");
    }

    #[test]
    fn shards_partition_and_balance() {
        let costs: Vec<f64> = (0..100).map(|u| 1.0 + (u % 7) as f64).collect();
        let mut seen = vec![0; 100];
        let mut loads = Vec::new();
        for i in 0..3 {
            let mine = assign(&costs, Shard { index: i, count: 3 });
            loads.push(mine.iter().map(|&u| costs[u]).sum::<f64>());
            for u in mine {
                seen[u] += 1;
            }
        }
        assert!(seen.iter().all(|&s| s == 1));
        let (lo, hi) = (
            loads.iter().cloned().fold(f64::MAX, f64::min),
            loads.iter().cloned().fold(0.0, f64::max),
        );
        assert!(hi - lo <= 7.0, "balanced loads {loads:?}");
    }

    /// The heap gives exactly the assignment of a linear scan for the least
    /// loaded shard (the former implementation).
    #[test]
    fn heap_assignment_matches_the_linear_scan() {
        fn linear(costs: &[f64], shard: Shard) -> Vec<usize> {
            let mut order: Vec<usize> = (0..costs.len()).collect();
            order.sort_by(|&a, &b| costs[b].total_cmp(&costs[a]).then(a.cmp(&b)));
            let mut load = vec![0.0f64; shard.count];
            let mut mine = Vec::new();
            for u in order {
                let target = (0..shard.count)
                    .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
                    .unwrap();
                load[target] += costs[u].max(0.0);
                if target == shard.index {
                    mine.push(u);
                }
            }
            mine.sort_unstable();
            mine
        }
        let costs: Vec<f64> = (0..257)
            .map(|u| match u % 5 {
                0 => 1.0,
                1 => 0.5 + (u % 13) as f64,
                2 => 1.0,
                3 => 0.1 * u as f64,
                _ => -1.0,
            })
            .collect();
        for count in [1, 2, 3, 7, 64, 257] {
            for index in 0..count {
                let s = Shard { index, count };
                assert_eq!(assign(&costs, s), linear(&costs, s), "{index}/{count}");
            }
        }
    }

    #[test]
    fn shard_counts_are_bounded_by_the_units() {
        let s = Shard::parse("0/99999999999").unwrap();
        let e = s.check_units(28).unwrap_err().to_string();
        assert!(e.contains("at most 28 shards"), "{e}");
        Shard {
            index: 3,
            count: 28,
        }
        .check_units(28)
        .unwrap();
        assert!(Shard { index: 5, count: 2 }.check_units(28).is_err());
    }

    #[test]
    fn shard_parsing() {
        assert_eq!(Shard::parse("2/5").unwrap(), Shard { index: 2, count: 5 });
        assert!(
            Shard::parse("5/5")
                .unwrap_err()
                .to_string()
                .contains("0..5")
        );
        assert!(Shard::parse("x").is_err());
        assert!(Shard::parse("1/0").is_err());
    }

    #[test]
    fn journal_survives_a_torn_last_line() {
        let dir = std::env::temp_dir().join(format!("scarsim-journal-{}", std::process::id()));
        let path = dir.join("units.jsonl");
        let header = JournalHeader {
            version: "v".into(),
            scenario: "s".into(),
            fingerprint: "f".into(),
            shard: None,
        };
        let mut j = Journal::create(&path, &header).unwrap();
        j.append(&[
            (3, serde_json::json!({"a": 0.1})),
            (1, serde_json::json!({"a": 2})),
        ])
        .unwrap();
        drop(j);
        // A torn line (no newline) and a corrupt checksum.
        let mut text = std::fs::read_to_string(&path).unwrap();
        let good_len = text.len();
        text.push_str("0000\t{\"unit\":7,\"rec");
        std::fs::write(&path, &text).unwrap();
        let (h, recs, dropped) = Journal::read(&path, true).unwrap();
        assert_eq!(h, header);
        assert_eq!(recs.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(recs[&3]["a"], 0.1);
        assert_eq!(dropped, 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap().len(), good_len);
        // A corrupt complete line is dropped as well.
        let mut bad = std::fs::read_to_string(&path).unwrap();
        bad.push_str("ffffffffffffffff\t{\"unit\":9,\"record\":1}\n");
        std::fs::write(&path, &bad).unwrap();
        let (_, recs, dropped) = Journal::read(&path, false).unwrap();
        assert_eq!((recs.len(), dropped), (2, 1));
        std::fs::remove_dir_all(&dir).ok();
    }
}
