//! The four synchronization protocols of Dutta et al. 2018 (§2,
//! Algorithms 1–4) and a schedule of K over wall-clock time (§6's adaptive
//! synchrony).

use serde::{Deserialize, Serialize};

/// How the parameter server (PS) combines the gradients of P workers.
///
/// In every variant the PS applies `w_{j+1} = w_j − (η/K) Σ_{l=1}^{K} g_l`,
/// the mean of the K gradients it waited for (Dutta et al. 2018, eq. 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// K-sync SGD: every worker computes one gradient on w_j; the PS waits for
    /// the first K of the P workers, cancels the other P−K computations, and
    /// every worker restarts on w_{j+1}. K = P is fully synchronous SGD.
    KSync,
    /// K-batch-sync SGD: every worker starts on w_j; a worker that finishes
    /// pushes and at once starts another minibatch on the same w_j; the PS
    /// updates after the first K gradients from any workers, then cancels all
    /// unfinished work and every worker restarts on w_{j+1}.
    KBatchSync,
    /// K-async SGD: the PS updates after K *distinct* workers have pushed
    /// since the last update (a worker that has pushed waits); those K
    /// workers pull w_{j+1} and restart, the others keep computing on their
    /// stale parameters and push later. K = 1 is asynchronous SGD.
    KAsync,
    /// K-batch-async SGD: every worker pushes, pulls the current parameters
    /// and restarts at once; the PS updates after any K gradients; nothing
    /// is cancelled and no one waits.
    KBatchAsync,
}

impl Protocol {
    /// All protocols, in the paper's order.
    pub const ALL: [Protocol; 4] = [
        Protocol::KSync,
        Protocol::KBatchSync,
        Protocol::KAsync,
        Protocol::KBatchAsync,
    ];

    /// The name used in scenarios and CSV files.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::KSync => "k-sync",
            Protocol::KBatchSync => "k-batch-sync",
            Protocol::KAsync => "k-async",
            Protocol::KBatchAsync => "k-batch-async",
        }
    }

    /// The protocol whose runs are exactly this one's when K = 1 throughout:
    /// every push then completes an update, so K-batch-sync runs as K-sync
    /// (nothing is left to cancel but the others' work, and every worker
    /// restarts on the new parameters) and K-batch-async as K-async (the
    /// pusher pulls and restarts; no one waits). The same calls reach the
    /// handler in the same order with the same delays drawn (`sim.rs`'s
    /// `on_push` and `update`), so the runs match bit for bit.
    pub(crate) fn run_at_k_one(self) -> Protocol {
        match self {
            Protocol::KSync | Protocol::KBatchSync => Protocol::KSync,
            Protocol::KAsync | Protocol::KBatchAsync => Protocol::KAsync,
        }
    }

    /// Whether K may not exceed P (one gradient per worker per update).
    pub(crate) fn needs_distinct_workers(self) -> bool {
        matches!(self, Protocol::KSync | Protocol::KAsync)
    }
}

/// K as a step function of simulated time: `steps[i] = (from, k)` means K = k
/// from time `from` on. The first step starts at time 0.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KSchedule {
    steps: Vec<(f64, usize)>,
}

impl KSchedule {
    /// The same K at all times.
    pub fn fixed(k: usize) -> KSchedule {
        KSchedule {
            steps: vec![(0.0, k)],
        }
    }

    /// A schedule from `(from, k)` steps. Errors (as text) unless the first
    /// step is at 0, times strictly increase and every k ≥ 1.
    pub(crate) fn steps(steps: Vec<(f64, usize)>) -> Result<KSchedule, String> {
        if steps.is_empty() {
            return Err("a schedule needs at least one step".into());
        }
        if steps[0].0 != 0.0 {
            return Err(format!(
                "the first step must start at time 0, not {}",
                steps[0].0
            ));
        }
        for w in steps.windows(2) {
            if !(w[1].0 > w[0].0 && w[1].0.is_finite()) {
                return Err(format!(
                    "step times must strictly increase: {} then {}",
                    w[0].0, w[1].0
                ));
            }
        }
        if let Some(s) = steps.iter().find(|s| s.1 == 0) {
            return Err(format!("k = 0 at time {}: K must be at least 1", s.0));
        }
        Ok(KSchedule { steps })
    }

    /// K in force at time `t`.
    #[inline]
    pub(crate) fn k_at(&self, t: f64) -> usize {
        let mut k = self.steps[0].1;
        for &(from, kk) in &self.steps[1..] {
            if t >= from {
                k = kk;
            } else {
                break;
            }
        }
        k
    }

    /// Times after 0 at which K changes.
    pub(crate) fn change_times(&self) -> impl Iterator<Item = f64> + '_ {
        self.steps[1..].iter().map(|s| s.0)
    }

    /// The constant K, if the schedule has one step.
    #[cfg(test)]
    pub(crate) fn constant(&self) -> Option<usize> {
        (self.steps.len() == 1).then(|| self.steps[0].1)
    }

    /// The largest K of the schedule.
    pub(crate) fn max_k(&self) -> usize {
        self.steps.iter().map(|s| s.1).max().unwrap_or(1)
    }

    /// `0:1;200:2;400:4` — for CSV cells.
    pub(crate) fn describe(&self) -> String {
        self.steps
            .iter()
            .map(|(t, k)| format!("{t}:{k}"))
            .collect::<Vec<_>>()
            .join(";")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules() {
        let s = KSchedule::steps(vec![(0.0, 1), (10.0, 2), (20.0, 8)]).unwrap();
        assert_eq!(s.k_at(0.0), 1);
        assert_eq!(s.k_at(9.99), 1);
        assert_eq!(s.k_at(10.0), 2);
        assert_eq!(s.k_at(1e9), 8);
        assert_eq!(s.max_k(), 8);
        assert_eq!(s.describe(), "0:1;10:2;20:8");
        assert_eq!(s.constant(), None);
        assert_eq!(KSchedule::fixed(3).constant(), Some(3));
        assert!(KSchedule::steps(vec![(1.0, 1)]).is_err());
        assert!(KSchedule::steps(vec![(0.0, 1), (0.0, 2)]).is_err());
        assert!(KSchedule::steps(vec![(0.0, 0)]).is_err());
    }
}
