//! A deterministic event queue over simulated time.
//!
//! Events pop in order of time; events at the same time pop in the order they
//! were scheduled (a sequence number breaks ties), never by hash order or
//! thread timing.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One scheduled event.
#[derive(Debug)]
struct Entry<E> {
    time: f64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: invert so the earliest (time, seq) is on top.
        other
            .time
            .total_cmp(&self.time)
            .then(other.seq.cmp(&self.seq))
    }
}

/// A priority queue of events keyed by (time, sequence number).
#[derive(Debug)]
pub(crate) struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    now: f64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
            now: 0.0,
        }
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time 0.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at absolute time `time` (not before the current time).
    pub(crate) fn schedule(&mut self, time: f64, event: E) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { time, seq, event });
    }

    /// Schedules `event` `delay` after the current time.
    #[cfg(test)]
    pub(crate) fn schedule_in(&mut self, delay: f64, event: E) {
        self.schedule(self.now + delay, event);
    }

    /// Removes and returns the earliest event, advancing the clock to it.
    pub(crate) fn pop(&mut self) -> Option<(f64, E)> {
        let e = self.heap.pop()?;
        self.now = e.time;
        Some((e.time, e.event))
    }

    /// Time of the earliest pending event.
    pub(crate) fn peek_time(&self) -> Option<f64> {
        self.heap.peek().map(|e| e.time)
    }

    /// The current simulated time (time of the last popped event).
    pub(crate) fn now(&self) -> f64 {
        self.now
    }

    /// Number of pending events.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no events are pending.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Drops every pending event for which `keep` is false (e.g. cancelled work).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&E) -> bool) {
        self.heap.retain(|e| keep(&e.event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_schedule_order() {
        let mut q = EventQueue::new();
        q.schedule(2.0, "c");
        q.schedule(1.0, "a");
        q.schedule(2.0, "d");
        q.schedule(1.0, "b");
        q.schedule(0.5, "first");
        let order: Vec<&str> = std::iter::from_fn(|| q.pop().map(|e| e.1)).collect();
        assert_eq!(order, vec!["first", "a", "b", "c", "d"]);
        assert_eq!(q.now(), 2.0);
    }

    #[test]
    fn relative_scheduling_and_cancellation() {
        let mut q = EventQueue::new();
        q.schedule(1.0, 1);
        assert_eq!(q.pop(), Some((1.0, 1)));
        q.schedule_in(0.5, 2);
        q.schedule_in(0.25, 3);
        q.retain(|e| *e != 3);
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop(), Some((1.5, 2)));
        assert!(q.is_empty());
    }
}
