//! What a run will hold in memory, estimated from the scenario alone before
//! anything is allocated, and the refusal of runs this machine cannot hold.
//!
//! Every size a user sets (trials, sweep lengths, series, workers, grid
//! points, iterations, updates) is already bounded when the scenario is
//! parsed (see [`crate::scenario::limits`]); their products are not, so the
//! number of units and the bytes their records, decoded results, tables and
//! curves take are estimated here, in saturating arithmetic, and compared
//! with the machine's memory. `validate` prints the estimate, `run --plan`
//! adds the measured model and data to it, and `run`, `reproduce` and
//! `merge` refuse a scenario whose estimate exceeds the machine's memory,
//! naming both numbers.
//!
//! The per-item byte counts are measured orders of magnitude (a unit's
//! record as a JSON value in memory, its decoded form, its `trials.csv` row
//! and CSV text), rounded up; the model's own state and the dataset come on
//! top and are what `run --plan` measures.

use anyhow::{Result, bail};

use crate::cluster::Delay;
use crate::scenario::Scenario;

/// Bytes one unit costs whatever its kind: its name, cost and shard slot,
/// its record as a JSON value, decoded, and its `trials.csv` row and text
/// (measured: about 5 KiB per recovery unit).
pub(crate) const UNIT_BYTES: u64 = 6144;
/// Bytes per number of a curve a unit records (a JSON value, decoded, and
/// its share of the tables drawn from it).
pub(crate) const CURVE_POINT_BYTES: u64 = 96;
/// Bytes per interval of a checkpoint-interval unit: its time split as a
/// JSON object, decoded, and its `trials.csv` row (measured: about 1.2 KiB).
pub(crate) const INTERVAL_BYTES: u64 = 1536;
/// Bytes per row of a per-point table (`summary.csv`, curves by time).
pub(crate) const ROW_BYTES: u64 = 1024;
/// Bytes per logged update of a recorded training trial (`updates.csv`).
pub(crate) const LOGGED_UPDATE_BYTES: u64 = 768;

/// The estimate for one scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// Points (series × swept values).
    pub(crate) points: u64,
    /// Units (points × trials).
    pub units: usize,
    /// Estimated bytes of the run's records, results and tables (the model
    /// and its data come on top).
    pub(crate) bytes: u64,
}

/// Bytes of physical memory of this machine (Linux `MemTotal`), if known.
pub(crate) fn machine_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// Worker threads per core at most (`--threads`).
pub(crate) const THREADS_PER_CORE: usize = 4;

/// Worker threads allowed whatever the core count (a machine may report
/// fewer cores than a job may use, e.g. under a CPU quota).
pub(crate) const MIN_MAX_THREADS: usize = 64;

/// The most worker threads a run may start: [`THREADS_PER_CORE`] per core
/// of this machine, at least [`MIN_MAX_THREADS`].
pub(crate) fn max_threads() -> usize {
    (std::thread::available_parallelism().map_or(1, |n| n.get()) * THREADS_PER_CORE)
        .max(MIN_MAX_THREADS)
}

/// `--threads`: the given count if it is between 1 and [`max_threads`],
/// else all cores when not given.
pub(crate) fn check_threads(threads: Option<usize>) -> Result<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match threads {
        None => Ok(cores),
        Some(0) => bail!("--threads must be at least 1"),
        Some(n) if n > max_threads() => bail!(
            "--threads {n} is more than the limit of {} (the larger of {MIN_MAX_THREADS} and \
             {THREADS_PER_CORE} per core of the {cores} cores here); more threads only slow the run down",
            max_threads()
        ),
        Some(n) => Ok(n),
    }
}

/// `1536 MiB`, `2.5 GiB`, `16 TiB`, … (binary units).
pub(crate) fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else if v < 10.0 {
        format!("{v:.1} {}", UNITS[i])
    } else {
        format!("{v:.0} {}", UNITS[i])
    }
}

pub(crate) fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// Number of units of a scenario, computed without listing them.
pub fn unit_count(sc: &Scenario) -> u64 {
    let (points, trials) = points_and_trials(sc);
    mul(points, trials)
}

fn points_and_trials(sc: &Scenario) -> (u64, u64) {
    super::kind::of(sc).points_and_trials()
}

use crate::scenario::limits::typical_delay as typical;

/// Estimated updates of one training run of `horizon` seconds with up to
/// `workers` workers: one per gradient (K = 1, the most).
pub(crate) fn expected_updates(
    horizon: f64,
    workers: u64,
    compute: &Delay,
    comm: Option<&Delay>,
) -> u64 {
    let per = typical(compute) + comm.map_or(0.0, typical);
    let n = horizon / per.max(f64::MIN_POSITIVE) * workers as f64;
    if n.is_finite() {
        n.min(u64::MAX as f64) as u64
    } else {
        u64::MAX
    }
}

/// Estimates what `sc` holds in memory (without allocating any of it).
pub(crate) fn footprint(sc: &Scenario) -> Footprint {
    let (points, trials) = points_and_trials(sc);
    let units = mul(points, trials);
    // What every kind has: one record per unit, one summary row per point.
    let mut bytes = mul(units, UNIT_BYTES).saturating_add(mul(points, ROW_BYTES));
    // What a kind holds on top.
    bytes = bytes.saturating_add(super::kind::of(sc).extra_bytes());
    Footprint {
        points,
        units: usize::try_from(units).unwrap_or(usize::MAX),
        bytes,
    }
}

/// The footprint of `sc`, or an error if this machine cannot hold it (the
/// estimate above its physical memory; 16 GiB is assumed when unknown).
pub fn check(sc: &Scenario) -> Result<Footprint> {
    let f = footprint(sc);
    let limit = machine_memory().unwrap_or(16 << 30);
    if f.bytes > limit {
        bail!(
            "scenario `{}` is too big for this machine: {} points × {} trials = {} units would hold about {} \
             of records and tables in memory (before the model and its data), more than the {} of memory \
             this machine has; use fewer trials, points or grid times",
            sc.meta().name,
            f.points,
            points_and_trials(sc).1,
            unit_count(sc),
            human_bytes(f.bytes),
            human_bytes(limit)
        );
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_well() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(16 << 40), "16 TiB");
        assert_eq!(human_bytes(u64::MAX), "16384 PiB");
    }

    #[test]
    fn bundled_scenarios_fit_and_count_their_units() {
        for name in crate::scenario::bundled::names() {
            let (sc, _, _) = crate::scenario::load(name).unwrap();
            let f = check(&sc).unwrap();
            assert_eq!(f.units, super::super::unit_names(&sc).len(), "{name}");
            assert!(f.bytes < 1 << 30, "{name}: {}", human_bytes(f.bytes));
        }
    }
}
