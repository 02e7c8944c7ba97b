//! The CNN's hot kernels on MNIST: a training step (forward, backward and
//! Adam on a minibatch of 64 images, SCAR Appendix D), for one trial and for
//! a cohort of trials stepped together by the engine's cohort hook, and the
//! forward pass of the loss over a fixed subset of 500 images (the loss curve
//! of the wall-clock kinds, e.g. `cao-ps-kill`).
//!
//! Flops are the network's nominal multiply-adds ([`Arch::train_flops`],
//! [`Arch::forward_flops`]); bytes are what a step must move at the least
//! (parameters, both Adam moments and the gradient, read and written, and
//! the minibatch): a step is compute bound.

use std::sync::Arc;

use anyhow::Result;

use super::{BenchContext, HotKernel, Prepared, Work};
use crate::data::{Classification, DatasetName};
use crate::model::cnn::net::Arch;
use crate::model::cnn::{Cnn, CnnConfig, CnnMetric, CnnState, CnnWorkspace, Partitioning};
use crate::model::{CnnSpec, IterCtx, Model};

/// Minibatch of the bundled CNN scenarios (SCAR Appendix D).
const BATCH: usize = 64;
/// Trials in the cohort kernel.
const COHORT: usize = 16;
/// Images of the subset loss (`cao-ps-kill`'s `loss_subsample`).
const SUBSET: usize = 500;

/// The CNN kernels.
pub(crate) fn kernels() -> Vec<Box<dyn HotKernel>> {
    vec![
        Box::new(Train { members: 1 }),
        Box::new(Train { members: COHORT }),
        Box::new(SubsetLoss),
    ]
}

fn model(data: Arc<Classification>, metric: CnnMetric) -> Result<Cnn> {
    Cnn::new(
        data,
        &CnnConfig {
            spec: CnnSpec::mnist(Partitioning::ByLayer, BATCH, 1e-3, metric),
            seed: 1,
        },
    )
}

struct Train {
    members: usize,
}

impl HotKernel for Train {
    fn name(&self) -> &'static str {
        if self.members == 1 {
            "cnn-train-step-1"
        } else {
            "cnn-train-step-cohort"
        }
    }
    fn model(&self) -> &'static str {
        "cnn"
    }
    fn unit(&self) -> &'static str {
        "images"
    }
    fn describe(&self) -> String {
        format!(
            "training step (forward, backward, Adam) on a minibatch of {BATCH} MNIST images for {} trial(s) \
             (the engine's step_many)",
            self.members
        )
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let data = super::classification(ctx, DatasetName::Mnist)?;
        let cnn = model(data, CnnMetric::RunningMean { window: 50 })?;
        let states = vec![cnn.init(); self.members];
        Ok(Box::new(TrainRun {
            ws: cnn.workspace(),
            active: vec![true; self.members],
            states,
            cnn,
            k: 0,
        }))
    }
}

struct TrainRun {
    cnn: Cnn,
    ws: CnnWorkspace,
    states: Vec<CnnState>,
    active: Vec<bool>,
    k: usize,
}

impl Prepared for TrainRun {
    fn run(&mut self) -> Work {
        let ctx = IterCtx {
            iteration: self.k,
            run_seed: 7,
        };
        self.k += 1;
        if self.states.len() == 1 {
            self.cnn.step(&mut self.states[0], ctx, &mut self.ws);
        } else {
            self.cnn
                .step_many(&mut self.states, &self.active, ctx, &mut self.ws);
        }
        std::hint::black_box(&self.states);
        let arch = self.cnn.arch();
        let b = self.cnn.batch_size() as f64;
        let members = self.states.len() as f64;
        let p = arch.parameters() as f64;
        Work {
            units: b * members,
            flops: (arch.train_flops() * b + arch.adam_flops()) * members,
            bytes: (7.0 * 4.0 * p + 4.0 * b * arch.input_len() as f64) * members,
        }
    }
}

struct SubsetLoss;

impl HotKernel for SubsetLoss {
    fn name(&self) -> &'static str {
        "cnn-subset-loss"
    }
    fn model(&self) -> &'static str {
        "cnn"
    }
    fn unit(&self) -> &'static str {
        "images"
    }
    fn describe(&self) -> String {
        format!("forward pass and cross-entropy over a fixed subset of {SUBSET} MNIST images")
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let data = super::classification(ctx, DatasetName::Mnist)?;
        let cnn = model(data, CnnMetric::Subset { examples: SUBSET })?;
        let state = cnn.init();
        Ok(Box::new(SubsetRun {
            ws: cnn.workspace(),
            state,
            cnn,
        }))
    }
}

struct SubsetRun {
    cnn: Cnn,
    ws: CnnWorkspace,
    state: CnnState,
}

impl Prepared for SubsetRun {
    fn run(&mut self) -> Work {
        std::hint::black_box(self.cnn.metric(&self.state, &mut self.ws));
        let arch: &Arch = self.cnn.arch();
        let n = self.cnn.eval_examples() as f64;
        Work {
            units: n,
            flops: arch.forward_flops() * n,
            bytes: 4.0 * (arch.parameters() as f64 + n * arch.input_len() as f64),
        }
    }
}
