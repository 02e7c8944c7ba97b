//! Checkpoint writes still in flight: the persist queue both time-cost
//! simulations share — SCAR §5.5's iteration-domain runs
//! ([`crate::faults::overhead`]) and the wall-clock PS simulation
//! ([`crate::faults::ps`]).
//!
//! A write holds the values of the blocks a checkpoint chose, taken at one
//! moment; it becomes the saved copy of those blocks when it finishes (a
//! synchronous dump when its pause ends, an asynchronous persist later),
//! and a failure before that loses it. What "finishes" means is the
//! caller's: by time ([`Writes::finished`]) or by the event that names it
//! ([`Writes::take`]).

use std::collections::VecDeque;

/// One checkpoint write in flight.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Write<A, V> {
    /// Its number, from 1 in the order the writes started.
    pub(crate) id: u64,
    /// When it finishes (seconds of the simulated run).
    pub(crate) finish: f64,
    /// When its values were taken (an iteration, or a time).
    pub(crate) taken: A,
    /// The blocks it writes.
    pub(crate) blocks: Vec<usize>,
    /// Their values (a whole model state, or the blocks' values end to end).
    pub(crate) values: V,
}

/// The writes in flight, oldest first.
#[derive(Clone, Debug)]
pub(crate) struct Writes<A, V> {
    queue: VecDeque<Write<A, V>>,
    last_id: u64,
}

impl<A, V> Default for Writes<A, V> {
    fn default() -> Self {
        Writes {
            queue: VecDeque::new(),
            last_id: 0,
        }
    }
}

impl<A, V> Writes<A, V> {
    /// Starts a write of `blocks` (values `values`, taken at `taken`) that
    /// finishes at `finish`; returns its id.
    pub(crate) fn push(&mut self, finish: f64, taken: A, blocks: Vec<usize>, values: V) -> u64 {
        self.last_id += 1;
        self.queue.push_back(Write {
            id: self.last_id,
            finish,
            taken,
            blocks,
            values,
        });
        self.last_id
    }

    /// The id of the latest write started (0 before the first).
    pub(crate) fn last_id(&self) -> u64 {
        self.last_id
    }

    /// Whether no write is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The oldest write in flight.
    pub(crate) fn oldest(&self) -> Option<&Write<A, V>> {
        self.queue.front()
    }

    /// Removes the writes that finish by `until` from the front of the
    /// queue, oldest first (a write that finishes later holds back the ones
    /// behind it: they are written in order).
    pub(crate) fn finished(&mut self, until: f64) -> impl Iterator<Item = Write<A, V>> + '_ {
        std::iter::from_fn(move || {
            if self.queue.front().is_some_and(|w| w.finish <= until) {
                self.queue.pop_front()
            } else {
                None
            }
        })
    }

    /// Removes write `id` if it is still in flight.
    pub(crate) fn take(&mut self, id: u64) -> Option<Write<A, V>> {
        let at = self.queue.iter().position(|w| w.id == id)?;
        self.queue.remove(at)
    }

    /// A failure strikes: every write in flight is lost (the failed nodes'
    /// part for sure; choice: all of them, the conservative reading).
    /// Returns how many of the `lost` blocks those writes held.
    pub(crate) fn abort(&mut self, lost: &[usize]) -> usize {
        let held = self
            .queue
            .iter()
            .map(|w| w.blocks.iter().filter(|b| lost.contains(b)).count())
            .sum();
        self.queue.clear();
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_finish_in_order_and_a_failure_loses_the_rest() {
        let mut w: Writes<usize, &str> = Writes::default();
        assert_eq!(w.last_id(), 0);
        assert_eq!(w.push(5.0, 1, vec![0, 1], "a"), 1);
        assert_eq!(w.push(3.0, 2, vec![2], "b"), 2);
        assert_eq!(w.push(9.0, 3, vec![1, 3], "c"), 3);
        assert_eq!(w.oldest().map(|x| x.id), Some(1));
        // Nothing is due before the oldest finishes; the second, due
        // earlier, waits behind it.
        assert_eq!(w.finished(4.0).count(), 0);
        let done: Vec<u64> = w.finished(6.0).map(|x| x.id).collect();
        assert_eq!(done, [1, 2]);
        assert_eq!(w.last_id(), 3);
        // The third is lost with the failure; it held block 3 and 1.
        assert_eq!(w.abort(&[1, 3, 4]), 2);
        assert!(w.is_empty());
    }

    #[test]
    fn a_write_is_taken_by_its_id_once() {
        let mut w: Writes<f64, Vec<f32>> = Writes::default();
        let a = w.push(1.0, 0.5, vec![0], vec![1.0]);
        let b = w.push(2.0, 1.5, vec![1], vec![2.0]);
        let got = w.take(b).expect("in flight");
        assert_eq!(
            (got.taken, got.blocks, got.values),
            (1.5, vec![1], vec![2.0])
        );
        assert!(w.take(b).is_none());
        assert_eq!(w.take(a).map(|x| x.id), Some(a));
        assert!(w.is_empty());
        assert_eq!(w.abort(&[0]), 0);
    }
}
