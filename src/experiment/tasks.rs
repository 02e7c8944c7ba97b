//! The one unit loop every scenario kind runs through, and the one place unit
//! records are encoded and decoded.
//!
//! A kind hands [`Driver::run_tasks`] its work cut into tasks (a chunk of
//! units, or a cohort of trials that step together); the loop runs them in
//! parallel with one workspace per worker thread, stops when the run is
//! cancelled, encodes each task's records and journals them as soon as the
//! task ends. [`Driver::run_units`] is the common case of independent units.
//! [`decode_records`] turns every unit's record back into the kind's type,
//! with an error (never a panic) for a record that is missing, extra or
//! malformed: records come back from journals and shards a user can edit.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::RawResult;
use super::units::{Driver, Records};

/// Encoded records of units, `(unit, record)`, as the journal stores them.
pub(crate) type Encoded = Vec<(usize, serde_json::Value)>;

/// Records of the units a set of tasks finished, grouped by task: what
/// [`Driver::collect`] takes.
pub(crate) type Finished = Vec<Encoded>;

/// Encodes `(unit, record)` pairs as the journal stores them.
pub(crate) fn encode<R: Serialize>(
    records: impl IntoIterator<Item = (usize, R)>,
) -> Result<Encoded> {
    records
        .into_iter()
        .map(|(u, r)| Ok((u, serde_json::to_value(r)?)))
        .collect()
}

impl Driver<'_> {
    /// Runs `tasks` in parallel, each as `task(workspace, task)`, with one
    /// workspace from `init` per worker (a workspace is scratch memory: it
    /// never changes a result). A task returns the records of the units it
    /// finished, or `None` when it stopped because the run was cancelled.
    /// Each task's records are encoded and journalled as soon as it ends; a
    /// task that starts after a cancellation or an error is skipped.
    ///
    /// Scheduling: every worker takes the next task not yet started, in the
    /// order given, so a caller that lists its tasks from the most expensive
    /// down gets the greedy longest-first schedule: the last tasks to start
    /// are the cheapest, and no worker idles long at the end (a range split
    /// in halves, as `par_iter` does, can leave one worker the expensive
    /// front while the other runs out of work). The records are returned in
    /// task order whatever the schedule, and no result depends on it.
    pub(crate) fn run_tasks<T, W, R>(
        &self,
        tasks: &[T],
        init: impl Fn() -> W + Sync + Send,
        task: impl Fn(&mut W, &T) -> Result<Option<Vec<(usize, R)>>> + Sync + Send,
    ) -> Result<Finished>
    where
        T: Sync,
        R: Serialize,
    {
        let next = AtomicUsize::new(0);
        let done: Vec<OnceLock<Result<Encoded>>> = tasks.iter().map(|_| OnceLock::new()).collect();
        let run = |ws: &mut W, t: &T| -> Result<Encoded> {
            if self.cancelled() {
                return Ok(Vec::new());
            }
            let Some(records) = task(ws, t)? else {
                return Ok(Vec::new());
            };
            let records = encode(records)?;
            self.finished(&records)?;
            Ok(records)
        };
        rayon::broadcast(|_| {
            let mut ws = None;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(t) = tasks.get(i) else { break };
                let outcome = run(ws.get_or_insert_with(&init), t);
                if outcome.is_err() {
                    // No new task starts after an error.
                    next.store(tasks.len(), Ordering::Relaxed);
                }
                // Each index is taken once, so its slot is empty.
                let _ = done[i].set(outcome);
            }
        });
        // Tasks skipped after an error have no slot; the error is returned.
        done.into_iter()
            .map(|slot| slot.into_inner().unwrap_or_else(|| Ok(Vec::new())))
            .collect()
    }

    /// Runs the independent units `todo` in parallel tasks of `chunk` units
    /// (journalled together), each as `unit(workspace, u)`, the most
    /// expensive units first ([`Driver::by_cost`]: see [`Driver::run_tasks`]
    /// on scheduling).
    pub(crate) fn run_units<W, R>(
        &self,
        todo: &[usize],
        chunk: usize,
        init: impl Fn() -> W + Sync + Send,
        unit: impl Fn(&mut W, usize) -> Result<R> + Sync + Send,
    ) -> Result<Finished>
    where
        R: Serialize,
    {
        let todo = self.by_cost(todo);
        let tasks: Vec<&[usize]> = todo.chunks(chunk.max(1)).collect();
        self.run_tasks(&tasks, init, |ws, units| {
            let records = units
                .iter()
                .map(|&u| Ok((u, unit(ws, u)?)))
                .collect::<Result<Vec<_>>>()?;
            Ok(Some(records))
        })
    }
}

/// The records of every unit of a run, decoded, in unit order; `names` are
/// the units' readable names (for the error when some are missing).
pub(crate) fn decode_records<T: DeserializeOwned>(
    names: &[String],
    raw: &RawResult,
) -> Result<Vec<T>> {
    decode(names, &raw.records)
}

fn decode<T: DeserializeOwned>(names: &[String], records: &Records) -> Result<Vec<T>> {
    let n = names.len();
    let missing: Vec<usize> = (0..n).filter(|u| !records.contains_key(u)).collect();
    if !missing.is_empty() {
        bail!(
            "{} of {n} units have no result, e.g. {}",
            missing.len(),
            missing
                .iter()
                .take(5)
                .map(|&u| names[u].as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    if let Some(extra) = records.keys().find(|&&u| u >= n) {
        bail!("unit {extra} does not exist in this scenario ({n} units)");
    }
    (0..n)
        .map(|u| {
            serde_json::from_value(records[&u].clone())
                .with_context(|| format!("malformed record of unit {u} ({})", names[u]))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use indicatif::ProgressBar;

    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|u| format!("unit {u}")).collect()
    }

    #[test]
    fn runs_every_unit_once_and_journals_it() {
        let never = AtomicBool::new(false);
        let hidden = ProgressBar::hidden();
        let driver = Driver::all(&hidden, &never);
        let todo: Vec<usize> = (0..23).collect();
        let done = driver
            .run_units(
                &todo,
                4,
                || 0usize,
                |calls, u| {
                    *calls += 1;
                    Ok(u * u)
                },
            )
            .unwrap();
        assert_eq!(done.len(), 6, "23 units in tasks of 4");
        assert_eq!(driver.finished_count(), 23);
        let records = driver.collect(done, &todo).unwrap();
        let raw = RawResult {
            context: serde_json::Value::Null,
            records,
        };
        let squares: Vec<usize> = decode_records(&names(23), &raw).unwrap();
        assert_eq!(squares, (0..23).map(|u| u * u).collect::<Vec<_>>());
    }

    #[test]
    fn units_start_from_the_most_expensive_and_come_back_in_task_order() {
        let never = AtomicBool::new(false);
        let hidden = ProgressBar::hidden();
        let driver = Driver::all(&hidden, &never);
        let costs = [1.0, 5.0, 3.0, 5.0, 0.5, 2.0];
        let (mine, todo) = driver.assign(&costs);
        assert_eq!(mine, todo);
        assert_eq!(
            driver.by_cost(&todo),
            [1, 3, 2, 5, 0, 4],
            "ties keep unit order"
        );
        // One worker: the units start in that order.
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let started = std::sync::Mutex::new(Vec::new());
        let done = one
            .install(|| {
                driver.run_units(
                    &todo,
                    1,
                    || (),
                    |_, u| {
                        started.lock().unwrap().push(u);
                        Ok(u)
                    },
                )
            })
            .unwrap();
        assert_eq!(*started.lock().unwrap(), [1, 3, 2, 5, 0, 4]);
        let units: Vec<usize> = done.iter().flatten().map(|(u, _)| *u).collect();
        assert_eq!(units, [1, 3, 2, 5, 0, 4], "records in task order");
        // Two workers, tasks of uneven length: still every record, in task order.
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let tasks: Vec<usize> = (0..40).collect();
        let done = two
            .install(|| {
                driver.run_tasks(
                    &tasks,
                    || (),
                    |_, &t| {
                        std::thread::sleep(std::time::Duration::from_micros(50 * (t as u64 % 7)));
                        Ok(Some(vec![(t, t * 3)]))
                    },
                )
            })
            .unwrap();
        let got: Vec<(usize, serde_json::Value)> = done.into_iter().flatten().collect();
        let want: Vec<(usize, serde_json::Value)> = (0..40).map(|t| (t, (t * 3).into())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_cancelled_run_skips_its_tasks_and_says_how_to_resume() {
        let cancel = AtomicBool::new(true);
        let hidden = ProgressBar::hidden();
        let driver = Driver::all(&hidden, &cancel);
        let todo: Vec<usize> = (0..5).collect();
        let done = driver
            .run_units(
                &todo,
                1,
                || (),
                |_, _| -> Result<u8> { panic!("a cancelled run starts no unit") },
            )
            .unwrap();
        assert!(done.iter().all(Vec::is_empty));
        assert!(driver.collect(done, &todo).is_err());
    }

    #[test]
    fn a_unit_error_ends_the_run() {
        let never = AtomicBool::new(false);
        let hidden = ProgressBar::hidden();
        let driver = Driver::all(&hidden, &never);
        let err = driver
            .run_units(
                &[0, 1, 2],
                1,
                || (),
                |_, u| {
                    if u == 1 {
                        bail!("unit 1 failed")
                    } else {
                        Ok(u)
                    }
                },
            )
            .unwrap_err();
        assert!(err.to_string().contains("unit 1 failed"), "{err}");
    }

    #[test]
    fn decoding_names_missing_extra_and_malformed_records() {
        let raw = |pairs: &[(usize, serde_json::Value)]| RawResult {
            context: serde_json::Value::Null,
            records: pairs.iter().cloned().collect(),
        };
        let ok = raw(&[(0, 1.into()), (1, 2.into())]);
        assert_eq!(decode_records::<u32>(&names(2), &ok).unwrap(), [1, 2]);
        let missing = decode_records::<u32>(&names(3), &ok).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("1 of 3 units have no result, e.g. unit 2")
        );
        let extra = raw(&[(0, 1.into()), (1, 2.into()), (7, 3.into())]);
        let err = decode_records::<u32>(&names(2), &extra).unwrap_err();
        assert!(err.to_string().contains("unit 7 does not exist"), "{err}");
        let bad = raw(&[(0, 1.into()), (1, "two".into())]);
        let err = decode_records::<u32>(&names(2), &bad).unwrap_err();
        assert!(
            err.to_string()
                .contains("malformed record of unit 1 (unit 1)"),
            "{err}"
        );
    }
}
