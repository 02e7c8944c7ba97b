//! A deterministic event queue over simulated time.
//!
//! Events pop in order of time; events at the same time pop in the order they
//! were scheduled (a sequence number breaks ties), never by hash order or
//! thread timing.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ops::ControlFlow;

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

/// A wall-clock simulation as the event loop ([`run_events`]) sees it: a
/// queue of its events and what to do at each. Both wall-clock simulations
/// (the protocols' `cluster::sim` and the PS's `faults::ps`) are one impl.
pub(crate) trait Events {
    /// The simulation's event type.
    type Event;
    /// Its queue.
    fn queue(&mut self) -> &mut EventQueue<Self::Event>;
    /// Runs before the event at time `t` is popped (with every earlier
    /// event handled): e.g. move a clock, evaluate a loss grid up to `t`.
    fn before(&mut self, _t: f64) {}
    /// Handles the event at time `t`; `Break` ends the run after it.
    fn handle(&mut self, t: f64, event: Self::Event) -> ControlFlow<()>;
}

/// The wall-clock event loop: pops the events of `sim` in order of time
/// (ties in the order they were scheduled) and handles each, until the queue
/// is empty, the next event lies past `horizon`, or a handler breaks.
pub(crate) fn run_events<S: Events>(sim: &mut S, horizon: f64) {
    while let Some(t) = sim.queue().peek_time() {
        if t > horizon {
            break;
        }
        sim.before(t);
        let (t, ev) = sim.queue().pop().expect("peeked");
        if sim.handle(t, ev).is_break() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulation that records what it saw and schedules a follow-up.
    struct Echo {
        q: EventQueue<u32>,
        seen: Vec<(f64, u32)>,
        before: Vec<f64>,
        stop_at: u32,
    }

    impl Events for Echo {
        type Event = u32;
        fn queue(&mut self) -> &mut EventQueue<u32> {
            &mut self.q
        }
        fn before(&mut self, t: f64) {
            self.before.push(t);
        }
        fn handle(&mut self, t: f64, e: u32) -> ControlFlow<()> {
            self.seen.push((t, e));
            if e < 3 {
                self.q.schedule(t + 1.0, e + 10);
            }
            if e == self.stop_at {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }

    fn echo(stop_at: u32) -> Echo {
        let mut q = EventQueue::new();
        q.schedule(0.5, 1);
        q.schedule(0.5, 2);
        q.schedule(3.0, 5);
        Echo {
            q,
            seen: Vec::new(),
            before: Vec::new(),
            stop_at,
        }
    }

    #[test]
    fn the_loop_runs_to_the_horizon_or_a_break() {
        let mut e = echo(u32::MAX);
        run_events(&mut e, 2.0);
        assert_eq!(e.seen, [(0.5, 1), (0.5, 2), (1.5, 11), (1.5, 12)]);
        assert_eq!(e.before, [0.5, 0.5, 1.5, 1.5]);
        // The event past the horizon stays queued.
        assert_eq!(e.q.peek_time(), Some(3.0));
        let mut e = echo(11);
        run_events(&mut e, f64::INFINITY);
        assert_eq!(e.seen, [(0.5, 1), (0.5, 2), (1.5, 11)]);
    }

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
