//! The hot kernel of the wall-clock simulations: the event loop itself
//! (Dutta et al.'s protocols with no model in the loop), in simulated
//! events per CPU second. An event is one popped gradient arrival or K
//! change, as `cargo bench --bench protocol` counts them.

use anyhow::Result;

use super::{BenchContext, HotKernel, Prepared, Work};
use crate::cluster::{Delay, KSchedule, NoModel, Protocol, Stop, WorkerDelays, simulate};

/// The `events` kernels.
pub(crate) fn kernels() -> Vec<Box<dyn HotKernel>> {
    vec![
        Box::new(EventLoop {
            name: "events-k-async",
            protocol: Protocol::KAsync,
            k: 1,
        }),
        Box::new(EventLoop {
            name: "events-k-sync",
            protocol: Protocol::KSync,
            k: 16,
        }),
    ]
}

/// Workers of the benchmarked cluster.
const WORKERS: usize = 32;
/// Parameter updates of one run.
const UPDATES: u64 = 2_000;

struct EventLoop {
    name: &'static str,
    protocol: Protocol,
    k: usize,
}

impl HotKernel for EventLoop {
    fn name(&self) -> &'static str {
        self.name
    }
    fn model(&self) -> &'static str {
        "sim"
    }
    fn unit(&self) -> &'static str {
        "events"
    }
    fn describe(&self) -> String {
        format!(
            "the protocol event loop alone: {} with P = {WORKERS}, K = {}, shifted-exponential delays, {UPDATES} updates per run",
            self.protocol.name(),
            self.k
        )
    }
    fn prepare(&self, _ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        Ok(Box::new(Run {
            protocol: self.protocol,
            k: self.k,
            seed: 0,
        }))
    }
}

struct Run {
    protocol: Protocol,
    k: usize,
    seed: u64,
}

impl Prepared for Run {
    fn run(&mut self) -> Work {
        let d = Delay::ShiftedExponential {
            shift: 1.0,
            rate: 1.0,
        };
        self.seed += 1;
        let out = simulate(
            WORKERS,
            self.protocol,
            &KSchedule::fixed(self.k),
            Stop::Updates(UPDATES),
            &mut WorkerDelays::new(&d, None, self.seed, 0, WORKERS),
            &mut NoModel,
        );
        Work {
            units: out.events as f64,
            flops: 0.0,
            bytes: 0.0,
        }
    }
}
