//! The CPU time of one run when several runs share the process.
//!
//! A run's manifest reports the CPU seconds it used. Alone in a process that
//! is the process clock's advance; when `reproduce` runs two scenarios at
//! once, each in its own worker pool, it is the advance of the clocks of
//! that pool's threads. [`PoolClock`] keeps those clocks: a pool registers
//! each worker as it starts ([`PoolClock::register_current_thread`]), and
//! [`run_seconds`], called on a worker, reads its own pool's sum.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// The CPU clocks of one worker pool's threads.
#[derive(Default)]
pub(crate) struct PoolClock {
    #[cfg(unix)]
    clocks: Mutex<Vec<libc::clockid_t>>,
    #[cfg(not(unix))]
    clocks: Mutex<Vec<()>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<PoolClock>>> = const { RefCell::new(None) };
}

impl PoolClock {
    /// A clock with no threads yet.
    pub(crate) fn new() -> Arc<PoolClock> {
        Arc::new(PoolClock::default())
    }

    /// Adds the calling thread's CPU clock and makes this the clock
    /// [`run_seconds`] reads on it (a pool's `start_handler`).
    pub(crate) fn register_current_thread(self: &Arc<Self>) {
        #[cfg(unix)]
        {
            let mut id: libc::clockid_t = 0;
            // SAFETY: `id` is a valid place to write the calling thread's clock id.
            if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) } == 0 {
                self.clocks.lock().expect("clock list").push(id);
            }
        }
        CURRENT.with(|c| *c.borrow_mut() = Some(self.clone()));
    }

    /// CPU seconds the registered threads have run (NaN where a clock cannot
    /// be read). The threads must still be alive: read it while the pool is.
    pub(crate) fn seconds(&self) -> f64 {
        #[cfg(unix)]
        {
            let mut sum = 0.0;
            for &id in self.clocks.lock().expect("clock list").iter() {
                let mut t = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: `t` is a valid timespec to write into.
                if unsafe { libc::clock_gettime(id, &mut t) } != 0 {
                    return f64::NAN;
                }
                sum += t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9;
            }
            sum
        }
        #[cfg(not(unix))]
        f64::NAN
    }
}

/// CPU seconds of the run the calling thread works for: its pool's
/// [`PoolClock`] where it has one, else the whole process's.
pub(crate) fn run_seconds() -> f64 {
    CURRENT
        .with(|c| c.borrow().as_ref().map(|p| p.seconds()))
        .unwrap_or_else(crate::bench::process_seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_counts_its_own_threads_only() {
        let clock = PoolClock::new();
        let c = clock.clone();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .start_handler(move |_| c.register_current_thread())
            .build()
            .unwrap();
        let spin = |secs: f64| {
            let t = std::time::Instant::now();
            let mut x = 1u64;
            while t.elapsed().as_secs_f64() < secs {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            x
        };
        let before = pool.install(run_seconds);
        // Busy work outside the pool does not count.
        spin(0.2);
        let outside = pool.install(run_seconds) - before;
        pool.install(|| spin(0.2));
        let inside = pool.install(run_seconds) - before - outside;
        assert!(outside < 0.1, "outside work counted: {outside}");
        // On a loaded machine the spinning thread may get less than its wall time.
        assert!(inside > 0.02, "pool work not counted: {inside}");
        assert_eq!(clock.clocks.lock().unwrap().len(), 2);
    }
}
