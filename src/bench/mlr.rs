//! MLR's hot kernels on MNIST: the block-sparse products of the forward pass
//! (logits, for the metric and the minibatch) and of the minibatch gradient,
//! for one trial and for a stacked cohort; and the protocol simulations'
//! minibatch gradient (Dutta et al.'s workers: 16 examples, sparse rows).

use std::sync::Arc;

use anyhow::Result;

use super::{BenchContext, HotKernel, Prepared, Work};
use crate::data::{Classification, DatasetName};
use crate::model::kernels::block::{CHUNK, stride_for};
use crate::model::kernels::{BlockCsc, Csr, RowGroups, block_forward, block_gradient};

/// Trials stacked side by side in the wide products (a cohort's width is
/// `members × classes` columns, rounded up to 16).
const MEMBERS: usize = 51;
/// Minibatch of the bundled MLR scenarios (SCAR Appendix D).
const BATCH: usize = 10_000;

/// The MLR kernels.
pub(crate) fn kernels() -> Vec<Box<dyn HotKernel>> {
    vec![
        Box::new(Forward { members: 1 }),
        Box::new(Forward { members: MEMBERS }),
        Box::new(Gradient { members: MEMBERS }),
        Box::new(Regroup),
        Box::new(Sgd),
    ]
}

/// MNIST as the bench uses it: real where the data folder has it, else the stand-in.
pub(crate) fn mnist(ctx: &BenchContext) -> Result<Arc<Classification>> {
    super::classification(ctx, DatasetName::Mnist)
}

fn width(members: usize) -> usize {
    (10 * members).div_ceil(16) * 16
}

/// A minibatch of MNIST rows in a scattered order, like an epoch's batch.
fn batch_rows(rows: usize) -> Vec<u32> {
    let n = BATCH.min(rows);
    (0..n as u64)
        .map(|i| ((i * 2_654_435_761) % rows as u64) as u32)
        .collect()
}

struct Forward {
    members: usize,
}

impl HotKernel for Forward {
    fn name(&self) -> &'static str {
        if self.members == 1 {
            "mlr-forward-1"
        } else {
            "mlr-forward-cohort"
        }
    }
    fn model(&self) -> &'static str {
        "mlr"
    }
    fn unit(&self) -> &'static str {
        "examples"
    }
    fn describe(&self) -> String {
        format!(
            "logits of a {BATCH}-example minibatch for {} stacked trial(s) (block-sparse X, width {}); \
             flops count the non-zeros only",
            self.members,
            width(self.members)
        )
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let data = mnist(ctx)?;
        let x = Csr::from_dense(&data.x, data.rows, data.features);
        let rows = batch_rows(data.rows);
        let b = BlockCsc::build(&RowGroups::of(&x), &rows);
        let width = width(self.members);
        let w: Vec<f32> = (0..b.padded_features() * width)
            .map(|i| ((i * 2_654_435_761) % 1000) as f32 * 1e-6)
            .collect();
        Ok(Box::new(ForwardRun {
            z: vec![0.0; CHUNK * stride_for(width)],
            b,
            w,
            width,
            members: self.members,
        }))
    }
}

struct ForwardRun {
    b: BlockCsc,
    w: Vec<f32>,
    z: Vec<f32>,
    width: usize,
    members: usize,
}

impl Prepared for ForwardRun {
    fn run(&mut self) -> Work {
        for chunk in 0..self.b.chunks() {
            block_forward(
                &self.b,
                chunk,
                &self.w,
                self.width,
                &mut self.z,
                stride_for(self.width),
            );
        }
        std::hint::black_box(&self.z);
        let nnz = self.b.nnz as f64;
        Work {
            units: (self.b.positions * self.members) as f64,
            flops: 2.0 * nnz * (10 * self.members) as f64,
            // The regrouped rows once (a position and four values per entry), W once.
            bytes: (self.b.stored() / 4 * self.b.entry_bytes()) as f64 + 4.0 * self.w.len() as f64,
        }
    }
}

/// Regrouping a minibatch's scattered rows for the products
/// (`BlockCsc::rebuild`): once per distinct minibatch, so once per run and
/// iteration under a per-trial data order. Memory bound: it reads each row
/// and writes its entries.
struct Regroup;

impl HotKernel for Regroup {
    fn name(&self) -> &'static str {
        "mlr-regroup"
    }
    fn model(&self) -> &'static str {
        "mlr"
    }
    fn unit(&self) -> &'static str {
        "examples"
    }
    fn describe(&self) -> String {
        format!(
            "regroup a scattered {BATCH}-example minibatch by chunk and feature group; \
             bytes: each row's entries read once (a 2-byte group and its values: 4 bytes for \
             MNIST's integer pixels, 16 for other data) and written once (a 1-byte position and \
             the same values)"
        )
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let data = mnist(ctx)?;
        let x = Csr::from_dense(&data.x, data.rows, data.features);
        let rows = batch_rows(data.rows);
        let groups = RowGroups::of(&x);
        let b = BlockCsc::build(&groups, &rows);
        Ok(Box::new(RegroupRun { groups, rows, b }))
    }
}

struct RegroupRun {
    groups: RowGroups,
    rows: Vec<u32>,
    b: BlockCsc,
}

impl Prepared for RegroupRun {
    fn run(&mut self) -> Work {
        self.b.rebuild(&self.groups, &self.rows);
        std::hint::black_box(&self.b);
        let entries = (self.b.stored() / 4) as f64;
        Work {
            units: self.b.positions as f64,
            flops: 0.0,
            bytes: entries * (self.groups.entry_bytes() + self.b.entry_bytes()) as f64,
        }
    }
}

struct Gradient {
    members: usize,
}

impl HotKernel for Gradient {
    fn name(&self) -> &'static str {
        "mlr-gradient-cohort"
    }
    fn model(&self) -> &'static str {
        "mlr"
    }
    fn unit(&self) -> &'static str {
        "examples"
    }
    fn describe(&self) -> String {
        format!(
            "gradient X_Bᵀ·D of a {BATCH}-example minibatch for {} stacked trials (width {}); \
             flops count the non-zeros only",
            self.members,
            width(self.members)
        )
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let data = mnist(ctx)?;
        let x = Csr::from_dense(&data.x, data.rows, data.features);
        let rows = batch_rows(data.rows);
        let b = BlockCsc::build(&RowGroups::of(&x), &rows);
        let width = width(self.members);
        let d: Vec<f32> = (0..rows.len() * stride_for(width))
            .map(|i| ((i * 40_503) % 1000) as f32 * 1e-3 - 0.5)
            .collect();
        Ok(Box::new(GradientRun {
            g: vec![0.0; b.padded_features() * width],
            b,
            d,
            width,
            members: self.members,
        }))
    }
}

struct GradientRun {
    b: BlockCsc,
    d: Vec<f32>,
    g: Vec<f32>,
    width: usize,
    members: usize,
}

impl Prepared for GradientRun {
    fn run(&mut self) -> Work {
        self.g.fill(0.0);
        block_gradient(
            &self.b,
            &self.d,
            stride_for(self.width),
            self.width,
            &mut self.g,
        );
        std::hint::black_box(&self.g);
        Work {
            units: (self.b.positions * self.members) as f64,
            flops: 2.0 * self.b.nnz as f64 * (10 * self.members) as f64,
            bytes: (self.b.stored() / 4 * self.b.entry_bytes()) as f64 + 4.0 * self.d.len() as f64,
        }
    }
}

/// Minibatch of the bundled Dutta et al. MLR scenario.
const SGD_BATCH: usize = 16;
/// Minibatch gradients per timed run.
const SGD_REPEAT: usize = 64;

/// One worker's minibatch gradient, as the wall-clock protocol runs compute
/// it ([`crate::model::mlr::gradient::MlrGradient`]).
struct Sgd;

impl HotKernel for Sgd {
    fn name(&self) -> &'static str {
        "mlr-sgd-16"
    }
    fn model(&self) -> &'static str {
        "mlr"
    }
    fn unit(&self) -> &'static str {
        "examples"
    }
    fn describe(&self) -> String {
        format!(
            "one worker's gradient on a {SGD_BATCH}-example minibatch (sparse rows, logits then \
             the outer products), folded into the PS's sum as in the protocol runs; flops count \
             the non-zeros only"
        )
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        use crate::model::gradient::GradientModel;
        use crate::model::mlr::gradient::MlrGradient;
        use crate::model::mlr::{Mlr, MlrConfig};
        let data = mnist(ctx)?;
        let x = Csr::from_dense(&data.x, data.rows, data.features);
        let model = MlrGradient::new(
            Mlr::new(
                data.clone(),
                &MlrConfig {
                    batch_size: SGD_BATCH,
                    learning_rate: 1e-5,
                },
            ),
            1,
            0,
        );
        let w: Vec<f32> = (0..model.dim())
            .map(|i| ((i * 2_654_435_761) % 1000) as f32 * 1e-6)
            .collect();
        // Each minibatch of an epoch once, in turn: the mean non-zeros per row.
        let nnz_per_row = x.nnz() as f64 / data.rows as f64;
        Ok(Box::new(SgdRun {
            ws: model.workspace(),
            g: vec![0.0; model.dim()],
            sum: vec![0.0; model.dim()],
            model,
            w,
            next: 0,
            nnz_per_row,
        }))
    }
}

struct SgdRun {
    model: crate::model::mlr::gradient::MlrGradient,
    ws: crate::model::mlr::gradient::MlrGradientWorkspace,
    w: Vec<f32>,
    g: Vec<f32>,
    sum: Vec<f32>,
    next: u64,
    nnz_per_row: f64,
}

impl Prepared for SgdRun {
    fn run(&mut self) -> Work {
        use crate::model::gradient::{GradientDraw, GradientModel};
        for _ in 0..SGD_REPEAT {
            let draw = GradientDraw {
                run_seed: 1,
                index: self.next,
            };
            self.next += 1;
            // Folded into the PS's sum, as the protocol runs do
            // (`Training::push`).
            self.model.add_gradient(
                &self.w,
                draw,
                1e-5,
                &mut self.sum,
                &mut self.g,
                &mut self.ws,
                false,
            );
        }
        std::hint::black_box(&self.sum);
        let examples = (SGD_REPEAT * SGD_BATCH) as f64;
        Work {
            units: examples,
            // Logits and outer products: two multiply-adds per non-zero and class.
            flops: 4.0 * examples * self.nnz_per_row * 10.0,
            // W in cache; the rows once.
            bytes: examples * self.nnz_per_row * 8.0,
        }
    }
}
