//! An adaptive-synchrony *rule*: K chosen during the run from what the
//! parameter server (PS) observes, not from a schedule read off pilot runs.
//!
//! Dutta et al. 2018 (§6) suggest starting asynchronous (fast descent, high
//! error floor) and raising K as training slows down (slower updates, lower
//! floor), but give no rule for when. The plateau rule:
//!
//! - K starts at `start`.
//! - The PS records the minibatch loss of every gradient it receives (the
//!   loss at the parameters the gradient was computed on, which the worker
//!   computes with the gradient; see
//!   [`crate::model::gradient::GradientModel::gradient_and_loss`]).
//! - The losses are cut into consecutive, non-overlapping windows of
//!   `window` losses. When a window is complete and a previous window exists
//!   (under the same K), the loss has *plateaued* if the new window's mean is
//!   not lower than `(1 − tolerance)` × the previous window's mean (with the
//!   absolute value of the previous mean, so a negative loss works too).
//! - On a plateau, K becomes `min(K × factor, max)`, and the windows start
//!   again from empty: losses seen under the old K say nothing about the
//!   level the new K settles at. Once K = max, nothing changes any more.
//! - The new K applies from the next event on (the gradient whose loss
//!   completed the window was already counted under the old K).
//!
//! Choices where the paper is silent (defaults in [`PlateauRule`]): the
//! observed signal is the minibatch loss (free with the gradient, no extra
//! pass over data); windows do not overlap, so each comparison uses fresh
//! losses (a sliding window would test nearly the same data after every
//! gradient and fire on noise far more often); K only ever rises.
//!
//! The rule draws no random numbers: given the same losses it switches at the
//! same gradients, so a run stays deterministic.

use serde::{Deserialize, Serialize};

/// Settings of the plateau rule (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlateauRule {
    /// K at time 0.
    pub(crate) start: usize,
    /// K is multiplied by this on a plateau (≥ 2).
    pub(crate) factor: usize,
    /// K never exceeds this.
    pub(crate) max: usize,
    /// Losses per window (≥ 1).
    pub(crate) window: usize,
    /// Relative decrease below which the loss counts as flat, in [0, 1).
    pub(crate) tolerance: f64,
}

impl PlateauRule {
    /// Default K at time 0: 1 (asynchronous, the fastest start).
    pub(crate) const DEFAULT_START: usize = 1;
    /// Default factor: 2 (K runs through the powers of two, as the paper's
    /// K ∈ {1, 2, 4, 8}).
    pub(crate) const DEFAULT_FACTOR: usize = 2;
    /// Default window: 50 losses.
    pub(crate) const DEFAULT_WINDOW: usize = 50;
    /// Default tolerance: 0 (switch as soon as a window is not lower at all).
    pub(crate) const DEFAULT_TOLERANCE: f64 = 0.0;

    /// `plateau:start=1;factor=2;max=8;window=50;tolerance=0` — for CSV cells.
    pub(crate) fn describe(&self) -> String {
        format!(
            "plateau:start={};factor={};max={};window={};tolerance={}",
            self.start, self.factor, self.max, self.window, self.tolerance
        )
    }
}

/// One change of K made by the rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Switch {
    /// Simulated time of the gradient whose loss completed the window.
    #[serde(with = "crate::report::json_f64")]
    pub(crate) time: f64,
    /// K before.
    pub(crate) from: usize,
    /// K after.
    pub(crate) to: usize,
    /// Losses the PS had observed in the run, this one included.
    pub(crate) observed: u64,
}

/// The rule's state during one run.
#[derive(Clone, Debug)]
pub struct PlateauState {
    rule: PlateauRule,
    k: usize,
    /// Σ of the losses of the window being filled, and their number.
    current: (f64, usize),
    /// Mean of the last complete window under the current K, if any.
    previous: Option<f64>,
    observed: u64,
    switches: Vec<Switch>,
}

impl PlateauState {
    /// The state at time 0: K = `rule.start` (capped at `rule.max`).
    pub(crate) fn new(rule: PlateauRule) -> PlateauState {
        PlateauState {
            k: rule.start.min(rule.max).max(1),
            rule,
            current: (0.0, 0),
            previous: None,
            observed: 0,
            switches: Vec::new(),
        }
    }

    /// K in force.
    pub(crate) fn k(&self) -> usize {
        self.k
    }

    /// The switches made so far, in time order.
    pub(crate) fn switches(&self) -> &[Switch] {
        &self.switches
    }

    /// Records one observed loss at `time`; returns whether K changed.
    pub(crate) fn observe(&mut self, loss: f64, time: f64) -> bool {
        self.observed += 1;
        if self.k >= self.rule.max {
            return false;
        }
        self.current.0 += loss;
        self.current.1 += 1;
        if self.current.1 < self.rule.window {
            return false;
        }
        let mean = self.current.0 / self.current.1 as f64;
        self.current = (0.0, 0);
        let flat = match self.previous {
            // NaN (a diverged run) compares false: never counted as flat.
            Some(prev) => mean >= prev - self.rule.tolerance * prev.abs(),
            None => false,
        };
        if !flat {
            self.previous = Some(mean);
            return false;
        }
        let to = self.k.saturating_mul(self.rule.factor).min(self.rule.max);
        self.switches.push(Switch {
            time,
            from: self.k,
            to,
            observed: self.observed,
        });
        self.k = to;
        self.previous = None;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(window: usize, tolerance: f64, max: usize) -> PlateauRule {
        PlateauRule {
            start: 1,
            factor: 2,
            max,
            window,
            tolerance,
        }
    }

    /// Feeds `losses` at times 0, 1, 2, …; returns the indices at which K changed.
    fn feed(s: &mut PlateauState, losses: &[f64]) -> Vec<usize> {
        let mut at = Vec::new();
        for (i, &l) in losses.iter().enumerate() {
            if s.observe(l, i as f64) {
                at.push(i);
            }
        }
        at
    }

    #[test]
    fn switches_exactly_when_a_window_is_not_lower_than_the_one_before() {
        // Windows of 3: [5,5,5] mean 5; [4,4,4] mean 4 < 5: keep;
        // [4,5,3] mean 4, not lower than 4: switch at index 8 (K 1 -> 2).
        // Then fresh windows: [3,3,3] 3; [2,2,2] 2 keep; [2,2,2.3] 2.1 >= 2:
        // switch at index 17 (K 2 -> 4).
        let mut s = PlateauState::new(rule(3, 0.0, 8));
        let losses = [
            5.0, 5.0, 5.0, 4.0, 4.0, 4.0, 4.0, 5.0, 3.0, // K=1
            3.0, 3.0, 3.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.3, // K=2
        ];
        assert_eq!(feed(&mut s, &losses), vec![8, 17]);
        assert_eq!(s.k(), 4);
        assert_eq!(
            s.switches(),
            &[
                Switch {
                    time: 8.0,
                    from: 1,
                    to: 2,
                    observed: 9
                },
                Switch {
                    time: 17.0,
                    from: 2,
                    to: 4,
                    observed: 18
                }
            ]
        );
    }

    #[test]
    fn a_window_just_below_the_previous_one_is_a_decrease() {
        let mut s = PlateauState::new(rule(2, 0.0, 8));
        // Means 10, 9.999, 9.998: always lower, never a switch.
        assert!(feed(&mut s, &[10.0, 10.0, 9.999, 9.999, 9.998, 9.998]).is_empty());
        assert_eq!(s.k(), 1);
    }

    #[test]
    fn tolerance_counts_small_decreases_as_flat() {
        // Means 10 then 9.5: a 5% decrease. Tolerance 0.1 calls it flat,
        // tolerance 0.01 does not.
        let l = [10.0, 10.0, 9.5, 9.5];
        let mut s = PlateauState::new(rule(2, 0.1, 8));
        assert_eq!(feed(&mut s, &l), vec![3]);
        let mut s = PlateauState::new(rule(2, 0.01, 8));
        assert!(feed(&mut s, &l).is_empty());
        // Negative losses: mean −10 then −9.9 (a rise) is flat at tolerance 0.
        let mut s = PlateauState::new(rule(1, 0.0, 8));
        assert_eq!(feed(&mut s, &[-10.0, -9.9]), vec![1]);
    }

    #[test]
    fn k_never_exceeds_max() {
        // A constant loss is a plateau at every second window: K 1 -> 3 -> 6
        // (max, not 9) and stays.
        let mut s = PlateauState::new(PlateauRule {
            start: 1,
            factor: 3,
            max: 6,
            window: 2,
            tolerance: 0.0,
        });
        let at = feed(&mut s, &[1.0; 100]);
        assert_eq!(at, vec![3, 7]);
        assert_eq!(s.k(), 6);
        assert!(s.switches().iter().all(|w| w.to <= 6));
        // start above max is capped.
        let s = PlateauState::new(PlateauRule {
            start: 16,
            ..rule(2, 0.0, 8)
        });
        assert_eq!(s.k(), 8);
    }

    #[test]
    fn nan_losses_never_switch() {
        let mut s = PlateauState::new(rule(1, 0.0, 8));
        assert!(feed(&mut s, &[f64::NAN; 10]).is_empty());
    }

    #[test]
    fn describes_itself() {
        assert_eq!(
            rule(50, 0.0, 8).describe(),
            "plateau:start=1;factor=2;max=8;window=50;tolerance=0"
        );
    }
}
