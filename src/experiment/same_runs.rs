//! Runs that a scenario's units would repeat, computed once: units whose
//! outcome is known to be the same (a key naming everything the run reads)
//! take it from the first to ask. Used where the equality is exact by the
//! model's or simulator's construction (each use documents why), and never
//! across scenarios (`shared_outcomes` does that for recovery trials).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Outcomes by key. One asking for a key while another computes it waits
/// for that outcome; a run that panics leaves the key to the next asker.
/// A run must not start work on the pool it runs in: a worker waiting
/// inside it could pick up a unit asking for the same key and wait on
/// itself (the runs sharing this way — a PS simulation, a protocol run, an
/// overhead timeline — are serial).
pub(crate) struct SameRuns<T> {
    slots: Mutex<HashMap<String, Arc<OnceLock<T>>>>,
}

impl<T: Clone> SameRuns<T> {
    pub(crate) fn new() -> SameRuns<T> {
        SameRuns {
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The outcome of `key`: computed by `run` if no one has yet.
    pub(crate) fn get_or_run(&self, key: String, run: impl FnOnce() -> T) -> T {
        let slot = Arc::clone(
            self.slots
                .lock()
                .expect("same runs")
                .entry(key)
                .or_default(),
        );
        slot.get_or_init(run).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Each key runs once, however many threads ask at once.
    #[test]
    fn each_key_runs_once_across_threads() {
        let runs = SameRuns::new();
        let calls = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for i in 0..8 {
                let (runs, calls) = (&runs, &calls);
                s.spawn(move || {
                    let key = format!("k{}", i % 2);
                    let got = runs.get_or_run(key.clone(), || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        key.clone()
                    });
                    assert_eq!(got, key);
                });
            }
        });
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
