//! The wall-clock event loop of a parameter server and P workers under one
//! of the four protocols.
//!
//! The loop only decides *when* things happen and *which* gradients an update
//! uses; what a pull, a push and an update do to a model is up to the
//! [`Handler`] (training, or just timing). Events live in the deterministic
//! `EventQueue`: a gradient arrival at time t is processed after every
//! event of time < t, and events of equal time in the order they were
//! scheduled. Cancelled work is removed from the queue at once.
//!
//! Conventions where the paper is silent:
//! - All P workers pull w_0 and start at time 0, in worker order.
//! - A gradient's time is its compute time plus its communication time (one
//!   draw of each per gradient); the push reaches the PS when it ends.
//! - When a push completes an update, the update happens at that instant;
//!   workers that restart then do so in worker order (sync variants) or in
//!   the order their gradients reached the PS (K-async).
//! - K-batch-async: the pushing worker pulls *after* the update its push may
//!   have triggered, so with K = 1 it always restarts on the newest parameters.
//! - K-batch-sync: a worker whose push does not trigger the update starts its
//!   next minibatch on the same parameters at once.
//! - Staleness of a gradient = j − v, where w_v is the version it was
//!   computed on and the update maps w_j to w_{j+1}.
//! - When the schedule changes K, the PS re-checks at once: if it already
//!   holds ≥ K gradients it updates with all of them.
//! - A handler may choose K itself ([`Handler::k_override`], the adaptive
//!   rule of `super::adaptive`): the loop asks it before every event, so a
//!   K the handler sets while handling a push applies from the next event.
//!   Such a K only rises, so no waiting gradient has to be released.

use std::ops::ControlFlow;

use super::protocol::{KSchedule, Protocol};
use crate::engine::{EventQueue, Events, run_events};

/// Where the per-gradient times come from.
pub trait DelaySource {
    /// Time of the next gradient (compute + communication) of `worker`.
    fn draw(&mut self, worker: usize) -> f64;
}

/// Delays given in advance, per worker, for hand-traced tests. A worker whose
/// script is used up never finishes again (infinite delay).
#[derive(Clone, Debug)]
pub struct ScriptedDelays {
    scripts: Vec<std::collections::VecDeque<f64>>,
}

impl ScriptedDelays {
    /// `scripts[w]` are worker w's successive gradient times.
    pub fn new(scripts: Vec<Vec<f64>>) -> ScriptedDelays {
        ScriptedDelays {
            scripts: scripts.into_iter().map(Into::into).collect(),
        }
    }
}

impl DelaySource for ScriptedDelays {
    fn draw(&mut self, worker: usize) -> f64 {
        self.scripts[worker].pop_front().unwrap_or(f64::INFINITY)
    }
}

/// One gradient computation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Job {
    /// The worker computing it.
    pub(crate) worker: usize,
    /// Version v of the parameters w_v it is computed on.
    pub(crate) version: u64,
    /// Global index of the computation in this run (0, 1, …, in start
    /// order); models derive the minibatch from it.
    pub(crate) seq: u64,
    /// Start time.
    pub(crate) started: f64,
}

/// A gradient used by an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Worker that computed it.
    pub(crate) worker: usize,
    /// Version it was computed on.
    pub(crate) version: u64,
    /// Its computation index ([`Job::seq`]).
    pub(crate) seq: u64,
    /// Updates between its version and the update that applies it.
    pub staleness: u64,
}

/// What an update did.
#[derive(Debug)]
pub struct UpdateInfo<'a> {
    /// The new version j + 1 (the first update is 1).
    pub version: u64,
    /// When it happened.
    pub time: f64,
    /// The gradients it averaged, in the order they reached the PS.
    pub gradients: &'a [Applied],
}

/// What the simulation does besides keeping time: the model side.
pub trait Handler {
    /// Time is about to advance to `t`: every event before `t` has been
    /// processed (called before each event; `t` never decreases).
    fn advance_to(&mut self, _t: f64) {}
    /// `worker` copies the PS's current parameters (version `version`).
    fn pull(&mut self, _worker: usize, _version: u64) {}
    /// `job` starts.
    fn start(&mut self, _job: &Job) {}
    /// `job`'s gradient reaches the PS, whose version is `ps_version`; it is
    /// computed on the worker's pulled copy (which the worker still holds).
    fn push(&mut self, _job: &Job, _ps_version: u64) {}
    /// The PS updates with the gradients pushed since the last update.
    fn update(&mut self, _info: &UpdateInfo<'_>) {}
    /// `job` is cancelled before it finished.
    fn cancel(&mut self, _job: &Job, _time: f64) {}
    /// K chosen by the handler from what the PS has observed (an adaptive
    /// rule), in place of the schedule's; `None` (the default): the schedule.
    fn k_override(&self) -> Option<usize> {
        None
    }
}

/// A handler that does nothing (timing only).
pub struct NoModel;
impl Handler for NoModel {}

/// When a run ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// Right after this many updates.
    Updates(u64),
    /// At this simulated time: events after it are not processed.
    Time(f64),
}

/// Counters of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunStats {
    /// Updates done.
    pub(crate) updates: u64,
    /// Simulated time at the end (the last update for `Stop::Updates`, the
    /// horizon for `Stop::Time`).
    #[serde(with = "crate::report::json_f64")]
    pub end_time: f64,
    /// Events popped from the queue.
    pub events: u64,
    /// Gradient computations started.
    pub(crate) started: u64,
    /// Gradients that reached the PS.
    pub(crate) pushed: u64,
    /// Computations cancelled.
    pub(crate) cancelled: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Event {
    /// The current job of this worker finishes (gradient reaches the PS).
    Done(usize),
    /// The schedule changes K.
    KChange,
}

/// Runs the protocol with `workers` workers until `stop`.
pub fn simulate<D: DelaySource, H: Handler>(
    workers: usize,
    protocol: Protocol,
    schedule: &KSchedule,
    stop: Stop,
    delays: &mut D,
    handler: &mut H,
) -> RunStats {
    let mut sim = Sim {
        protocol,
        queue: EventQueue::new(),
        jobs: vec![None; workers],
        held: vec![0; workers],
        version: 0,
        buffer: Vec::with_capacity(schedule.max_k().max(workers)),
        applied: Vec::with_capacity(schedule.max_k().max(workers)),
        next_seq: 0,
        stats: RunStats::default(),
    };
    for t in schedule.change_times() {
        if let Stop::Time(h) = stop
            && t > h
        {
            break;
        }
        sim.queue.schedule(t, Event::KChange);
    }
    handler.advance_to(0.0);
    for w in 0..workers {
        sim.pull(w, handler);
    }
    for w in 0..workers {
        sim.start(w, 0.0, delays, handler);
    }
    if !sim.done(stop) {
        let horizon = match stop {
            Stop::Time(h) => h,
            Stop::Updates(_) => f64::INFINITY,
        };
        let mut running = Running {
            sim: &mut sim,
            schedule,
            stop,
            delays,
            handler,
        };
        run_events(&mut running, horizon);
    }
    sim.stats.updates = sim.version;
    sim.stats.end_time = match stop {
        Stop::Time(h) => h,
        Stop::Updates(_) => sim.queue.now(),
    };
    sim.stats
}

struct Sim {
    protocol: Protocol,
    queue: EventQueue<Event>,
    /// Current computation of each worker (`None`: waiting or idle).
    jobs: Vec<Option<Job>>,
    /// Version each worker last pulled.
    held: Vec<u64>,
    /// PS version j.
    version: u64,
    /// Gradients pushed since the last update, in arrival order.
    buffer: Vec<Job>,
    applied: Vec<Applied>,
    next_seq: u64,
    stats: RunStats,
}

/// A protocol run as the event loop runs it: the simulation, its K
/// schedule and stop, the workers' delays and the model's handler.
struct Running<'r, D, H> {
    sim: &'r mut Sim,
    schedule: &'r KSchedule,
    stop: Stop,
    delays: &'r mut D,
    handler: &'r mut H,
}

impl<D: DelaySource, H: Handler> Events for Running<'_, D, H> {
    type Event = Event;

    fn queue(&mut self) -> &mut EventQueue<Event> {
        &mut self.sim.queue
    }

    fn before(&mut self, t: f64) {
        self.handler.advance_to(t);
    }

    fn handle(&mut self, t: f64, ev: Event) -> ControlFlow<()> {
        let sim = &mut *self.sim;
        sim.stats.events += 1;
        let k = self
            .handler
            .k_override()
            .unwrap_or_else(|| self.schedule.k_at(t));
        match ev {
            Event::Done(w) => sim.on_push(w, t, k, self.delays, self.handler),
            Event::KChange => {
                if !sim.buffer.is_empty() && sim.buffer.len() >= k {
                    sim.update(t, self.delays, self.handler);
                }
            }
        }
        if sim.done(self.stop) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

impl Sim {
    /// Whether a run with this `stop` has done its updates.
    fn done(&self, stop: Stop) -> bool {
        matches!(stop, Stop::Updates(n) if self.version >= n)
    }

    fn pull<H: Handler>(&mut self, w: usize, handler: &mut H) {
        self.held[w] = self.version;
        handler.pull(w, self.version);
    }

    fn start<D: DelaySource, H: Handler>(
        &mut self,
        w: usize,
        t: f64,
        delays: &mut D,
        handler: &mut H,
    ) {
        let job = Job {
            worker: w,
            version: self.held[w],
            seq: self.next_seq,
            started: t,
        };
        self.next_seq += 1;
        self.stats.started += 1;
        handler.start(&job);
        self.jobs[w] = Some(job);
        let d = delays.draw(w);
        self.queue.schedule(t + d, Event::Done(w));
    }

    fn on_push<D: DelaySource, H: Handler>(
        &mut self,
        w: usize,
        t: f64,
        k: usize,
        delays: &mut D,
        handler: &mut H,
    ) {
        let job = self.jobs[w]
            .take()
            .expect("a finishing worker has a job (cancelled jobs leave the queue)");
        self.stats.pushed += 1;
        handler.push(&job, self.version);
        self.buffer.push(job);
        let updated = self.buffer.len() >= k;
        if updated {
            self.update(t, delays, handler);
        }
        match self.protocol {
            // Wait for the update (K-async) or for the update and restart (K-sync).
            Protocol::KSync | Protocol::KAsync => {}
            Protocol::KBatchSync => {
                if !updated {
                    self.start(w, t, delays, handler);
                }
            }
            Protocol::KBatchAsync => {
                self.pull(w, handler);
                self.start(w, t, delays, handler);
            }
        }
    }

    fn update<D: DelaySource, H: Handler>(&mut self, t: f64, delays: &mut D, handler: &mut H) {
        let j = self.version;
        self.applied.clear();
        self.applied.extend(self.buffer.iter().map(|g| Applied {
            worker: g.worker,
            version: g.version,
            seq: g.seq,
            staleness: j - g.version,
        }));
        self.buffer.clear();
        self.version += 1;
        handler.update(&UpdateInfo {
            version: self.version,
            time: t,
            gradients: &self.applied,
        });
        match self.protocol {
            Protocol::KSync | Protocol::KBatchSync => {
                for w in 0..self.jobs.len() {
                    if let Some(job) = self.jobs[w].take() {
                        self.stats.cancelled += 1;
                        handler.cancel(&job, t);
                    }
                }
                self.queue.retain(|e| !matches!(e, Event::Done(_)));
                for w in 0..self.jobs.len() {
                    self.pull(w, handler);
                }
                for w in 0..self.jobs.len() {
                    self.start(w, t, delays, handler);
                }
            }
            Protocol::KAsync => {
                for i in 0..self.applied.len() {
                    let w = self.applied[i].worker;
                    self.pull(w, handler);
                    self.start(w, t, delays, handler);
                }
            }
            Protocol::KBatchAsync => {}
        }
    }
}

#[cfg(test)]
mod tests {
    //! Hand-traced timelines. Each comment gives the trace worked out on paper.
    use super::*;

    /// (new version, time, [(worker, staleness)]) of one update.
    type Traced = (u64, f64, Vec<(usize, u64)>);

    /// Records everything as text lines.
    #[derive(Default)]
    struct Trace {
        lines: Vec<String>,
        updates: Vec<Traced>,
        cancelled: Vec<(usize, u64, f64)>,
    }
    impl Handler for Trace {
        fn pull(&mut self, w: usize, v: u64) {
            self.lines.push(format!("pull w{w} v{v}"));
        }
        fn push(&mut self, job: &Job, ps: u64) {
            self.lines
                .push(format!("push w{} v{} ps{}", job.worker, job.version, ps));
        }
        fn update(&mut self, u: &UpdateInfo<'_>) {
            self.updates.push((
                u.version,
                u.time,
                u.gradients
                    .iter()
                    .map(|g| (g.worker, g.staleness))
                    .collect(),
            ));
        }
        fn cancel(&mut self, job: &Job, t: f64) {
            self.cancelled.push((job.worker, job.version, t));
        }
    }

    fn run(p: Protocol, k: usize, scripts: Vec<Vec<f64>>, updates: u64) -> (Trace, RunStats) {
        let workers = scripts.len();
        let mut tr = Trace::default();
        let st = simulate(
            workers,
            p,
            &KSchedule::fixed(k),
            Stop::Updates(updates),
            &mut ScriptedDelays::new(scripts),
            &mut tr,
        );
        (tr, st)
    }

    #[test]
    fn k_sync_uses_the_first_k_and_cancels_the_rest() {
        // P = 3, K = 2. t=0: all start on w0 (done at 1, 2, 4).
        // t=1 w0 pushes and waits; t=2 w1 pushes -> update 1 with {w0, w1},
        // w2's computation (started 0, on v0) is cancelled; all restart on v1:
        // w0 done 2+5=7, w1 2+1=3, w2 2+1=3. t=3: w1 then w2 (w1 was
        // scheduled first) -> update 2 with {w1, w2}; w0 (v1) cancelled.
        let (tr, st) = run(
            Protocol::KSync,
            2,
            vec![
                vec![1.0, 5.0, 9.0],
                vec![2.0, 1.0, 9.0],
                vec![4.0, 1.0, 9.0],
            ],
            2,
        );
        assert_eq!(
            tr.updates,
            vec![
                (1, 2.0, vec![(0, 0), (1, 0)]),
                (2, 3.0, vec![(1, 0), (2, 0)])
            ]
        );
        assert_eq!(tr.cancelled, vec![(2, 0, 2.0), (0, 1, 3.0)]);
        assert_eq!(st.cancelled, 2);
        assert_eq!(st.pushed, 4);
        assert_eq!(st.started, 9, "3 at t=0, 3 at each update");
        assert_eq!(st.end_time, 3.0);
    }

    #[test]
    fn fully_synchronous_waits_for_the_slowest() {
        // K = P = 2: update when the slower worker is done.
        let (tr, st) = run(Protocol::KSync, 2, vec![vec![1.0, 1.0], vec![3.0, 0.5]], 2);
        assert_eq!(tr.updates[0].1, 3.0);
        assert_eq!(tr.updates[1].1, 4.0);
        assert_eq!(st.cancelled, 0);
    }

    #[test]
    fn k_batch_sync_counts_gradients_not_workers() {
        // P = 2, K = 2. w0 finishes at 1, pushes (v0) and restarts on v0
        // (done at 2); at t=2 its second gradient completes the batch ->
        // update 1 with {w0, w0}, both fresh; w1 (started 0, due 3) is
        // cancelled. Both restart on v1: w0 done 2+1=3, w1 done 2+0.5=2.5.
        // t=2.5 w1 pushes (v1), restarts on v1 (done 2.5+4=6.5); t=3 w0
        // pushes -> update 2 with {w1, w0}; w1 cancelled.
        let (tr, st) = run(
            Protocol::KBatchSync,
            2,
            vec![vec![1.0, 1.0, 1.0, 9.0], vec![3.0, 0.5, 4.0, 9.0]],
            2,
        );
        assert_eq!(
            tr.updates,
            vec![
                (1, 2.0, vec![(0, 0), (0, 0)]),
                (2, 3.0, vec![(1, 0), (0, 0)])
            ]
        );
        assert_eq!(tr.cancelled, vec![(1, 0, 2.0), (1, 1, 3.0)]);
        assert_eq!(st.cancelled, 2);
    }

    #[test]
    fn k_async_waits_for_distinct_workers_and_keeps_stale_work() {
        // P = 3, K = 2. t=1 w0 pushes (v0) and waits; t=2 w1 pushes ->
        // update 1 {w0 s0, w1 s0}; w0, w1 pull v1 (done 3 and 4); w2 keeps
        // computing on v0. t=2.5 w2 pushes v0 (ps at v1); t=3 w0 pushes v1 ->
        // update 2 {w2 s1, w0 s0}; w2, w0 pull v2 (done 13, 4). t=4: w1
        // (scheduled at t=2) before w0 (scheduled at t=3): update 3
        // {w1 s1 (computed on v1, applied by the update v2 -> v3), w0 s0}.
        let (tr, st) = run(
            Protocol::KAsync,
            2,
            vec![
                vec![1.0, 1.0, 1.0, 9.0],
                vec![2.0, 2.0, 9.0],
                vec![2.5, 10.0],
            ],
            3,
        );
        assert_eq!(
            tr.updates,
            vec![
                (1, 2.0, vec![(0, 0), (1, 0)]),
                (2, 3.0, vec![(2, 1), (0, 0)]),
                (3, 4.0, vec![(1, 1), (0, 0)]),
            ]
        );
        assert!(tr.cancelled.is_empty());
        assert_eq!(st.cancelled, 0);
        assert!(tr.lines.contains(&"push w2 v0 ps1".to_string()));
    }

    #[test]
    fn k_async_does_not_take_two_gradients_from_one_worker() {
        // P = 2, K = 2: the fast w0 pushes at 1 and waits until the slow w1
        // pushes at 5.
        let (tr, _) = run(
            Protocol::KAsync,
            2,
            vec![vec![1.0, 1.0, 1.0], vec![5.0, 9.0]],
            1,
        );
        assert_eq!(tr.updates, vec![(1, 5.0, vec![(0, 0), (1, 0)])]);
    }

    #[test]
    fn k_batch_async_never_waits_or_cancels() {
        // P = 2, K = 2. w0 pushes at 1 (v0), pulls v0, restarts; pushes at 2
        // (v0) -> update 1 {w0 s0, w0 s0}, then pulls v1. t=3 push (v1),
        // t=4 push (v1) -> update 2 {w0, w0}; w0 pulls v2 (due 5). t=5: w1
        // (scheduled at 0) first: its v0 gradient waits in the buffer, w1
        // pulls v2; then w0 (v2) -> update 3 {w1 s2, w0 s0}.
        let (tr, st) = run(
            Protocol::KBatchAsync,
            2,
            vec![vec![1.0; 6], vec![5.0, 9.0]],
            3,
        );
        assert_eq!(
            tr.updates,
            vec![
                (1, 2.0, vec![(0, 0), (0, 0)]),
                (2, 4.0, vec![(0, 0), (0, 0)]),
                (3, 5.0, vec![(1, 2), (0, 0)]),
            ]
        );
        assert_eq!(st.cancelled, 0);
        // The pusher pulls after the update it triggered.
        let i = tr.lines.iter().position(|l| l == "push w0 v0 ps0").unwrap();
        assert_eq!(tr.lines[i + 1], "pull w0 v0");
        assert!(tr.lines.contains(&"pull w0 v1".to_string()));
        assert!(tr.lines.contains(&"pull w1 v2".to_string()));
    }

    #[test]
    fn async_k1_is_the_same_in_both_async_variants() {
        use crate::cluster::delay::{Delay, WorkerDelays};
        let d = Delay::ShiftedExponential {
            shift: 0.3,
            rate: 1.0,
        };
        let times = |p: Protocol| {
            #[derive(Default)]
            struct T(Vec<(f64, usize, u64)>);
            impl Handler for T {
                fn update(&mut self, u: &UpdateInfo<'_>) {
                    let g = u.gradients[0];
                    self.0.push((u.time, g.worker, g.staleness));
                }
            }
            let mut h = T::default();
            simulate(
                5,
                p,
                &KSchedule::fixed(1),
                Stop::Updates(300),
                &mut WorkerDelays::new(&d, None, 3, 0, 5),
                &mut h,
            );
            h.0
        };
        assert_eq!(times(Protocol::KAsync), times(Protocol::KBatchAsync));
    }

    /// `Protocol::run_at_k_one`: at K = 1 throughout, K-batch-sync runs as
    /// K-sync and K-batch-async as K-async — every pull, push, update and
    /// cancellation the handler sees, and the run's counts, under random
    /// delays — so the experiments run one of each pair once; at K = 2 the
    /// pairs differ.
    #[test]
    fn at_k_one_the_batch_variants_run_as_k_sync_and_k_async() {
        use crate::cluster::delay::{Delay, WorkerDelays};
        let d = Delay::ShiftedExponential {
            shift: 0.3,
            rate: 1.0,
        };
        let trace = |p: Protocol, k: usize| {
            let mut tr = Trace::default();
            let st = simulate(
                5,
                p,
                &KSchedule::fixed(k),
                Stop::Time(200.0),
                &mut WorkerDelays::new(&d, None, 3, 0, 5),
                &mut tr,
            );
            format!("{:?} {:?} {:?} {st:?}", tr.lines, tr.updates, tr.cancelled)
        };
        for p in Protocol::ALL {
            assert_eq!(
                trace(p, 1),
                trace(p.run_at_k_one(), 1),
                "{} at K = 1",
                p.name()
            );
        }
        assert_eq!(Protocol::KBatchSync.run_at_k_one(), Protocol::KSync);
        assert_eq!(Protocol::KBatchAsync.run_at_k_one(), Protocol::KAsync);
        for (a, b) in [
            (Protocol::KSync, Protocol::KBatchSync),
            (Protocol::KAsync, Protocol::KBatchAsync),
        ] {
            assert_ne!(
                trace(a, 2),
                trace(b, 2),
                "{} and {} at K = 2",
                a.name(),
                b.name()
            );
        }
    }

    #[test]
    fn lowering_k_releases_waiting_gradients_at_the_change() {
        // K-async, K = 2 until t = 1.5, then 1. w0 pushes at 1 and waits; at
        // 1.5 the PS already holds K = 1 gradient and updates with it.
        let mut tr = Trace::default();
        simulate(
            2,
            Protocol::KAsync,
            &KSchedule::steps(vec![(0.0, 2), (1.5, 1)]).unwrap(),
            Stop::Updates(2),
            &mut ScriptedDelays::new(vec![vec![1.0, 1.0], vec![5.0]]),
            &mut tr,
        );
        assert_eq!(
            tr.updates,
            vec![(1, 1.5, vec![(0, 0)]), (2, 2.5, vec![(0, 0)])]
        );
    }

    #[test]
    fn time_stop_leaves_later_events_unprocessed() {
        let mut tr = Trace::default();
        let st = simulate(
            1,
            Protocol::KSync,
            &KSchedule::fixed(1),
            Stop::Time(2.5),
            &mut ScriptedDelays::new(vec![vec![1.0; 5]]),
            &mut tr,
        );
        assert_eq!(st.updates, 2);
        assert_eq!(st.end_time, 2.5);
    }
}
