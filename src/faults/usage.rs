//! Resource use of a wall-clock run (node-seconds busy, idle, up and down)
//! and its billing per hour, for Cao et al.'s cost comparison.

use serde::{Deserialize, Serialize};

/// Node-seconds of one run over the simulated window [0, horizon], for
/// resource use and billing (Cao et al.'s cost comparison).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Workers computing gradients (a computation the horizon cuts counts
    /// up to the horizon).
    pub worker_busy: f64,
    /// Workers not computing: waiting while the PS is unavailable or writing
    /// a checkpoint. `worker_busy + worker_idle = workers · horizon`.
    pub worker_idle: f64,
    /// PS nodes (every member of every chain) up.
    pub ps_up: f64,
    /// PS nodes down (failed and not yet back).
    pub ps_down: f64,
    /// Each PS node's down intervals within the window: (node, from, to).
    pub down: Vec<(usize, f64, f64)>,
}

impl Usage {
    /// Node-seconds of PS nodes down before `end`.
    pub(crate) fn ps_down_before(&self, end: f64) -> f64 {
        self.down.iter().fold(0.0, |sum, &(_, a, b)| {
            sum + (b.min(end) - a.min(end)).max(0.0)
        })
    }

    /// Per-hour billing until `end` of `workers` workers and `ps_nodes` PS
    /// nodes: each node is billed whole hours for each of its up intervals
    /// (a node back from a failure is a new instance). Node-hours.
    pub(crate) fn billed_hours_rounded_up(&self, workers: usize, ps_nodes: usize, end: f64) -> f64 {
        let hours = |secs: f64| {
            if secs > 0.0 {
                (secs / 3600.0).ceil()
            } else {
                0.0
            }
        };
        let mut total = workers as f64 * hours(end);
        for node in 0..ps_nodes {
            let mut from = 0.0;
            let mut downs: Vec<(f64, f64)> = self
                .down
                .iter()
                .filter(|d| d.0 == node)
                .map(|d| (d.1, d.2))
                .collect();
            downs.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (a, b) in downs {
                if a >= end {
                    break;
                }
                total += hours(a - from);
                from = b;
            }
            if from < end {
                total += hours(end - from);
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PS node down from 4.5 s to 6 s, billed until `end`.
    fn outage() -> Usage {
        Usage {
            down: vec![(0, 4.5, 6.0)],
            ..Usage::default()
        }
    }

    #[test]
    fn hourly_billing_starts_a_new_instance_after_a_failure() {
        // One worker hour, and the PS billed for [0, 4.5) and again from 6 s.
        assert_eq!(outage().billed_hours_rounded_up(1, 1, 10.0), 3.0);
        // Billing that ends during the outage: the second instance never starts.
        assert_eq!(outage().billed_hours_rounded_up(1, 1, 5.0), 2.0);
        // A node without failures, and one that is never billed.
        assert_eq!(outage().billed_hours_rounded_up(1, 2, 10.0), 4.0);
        assert_eq!(Usage::default().billed_hours_rounded_up(0, 1, 7200.5), 3.0);
        assert_eq!(Usage::default().billed_hours_rounded_up(2, 0, 0.0), 0.0);
    }

    #[test]
    fn down_time_is_clipped_to_the_billing_end() {
        assert_eq!(outage().ps_down_before(5.0), 0.5);
        assert_eq!(outage().ps_down_before(10.0), 1.5);
        assert_eq!(outage().ps_down_before(4.0), 0.0);
        assert!(Usage::default().ps_down_before(1.0).is_sign_positive());
    }
}
