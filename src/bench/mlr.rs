//! MLR's hot kernels: the sparse products of the full-data forward pass (the
//! convergence metric) and of the minibatch gradient, on MNIST.

use std::sync::Arc;

use anyhow::Result;

use super::{BenchContext, HotKernel, Prepared, Work};
use crate::data::{Classification, DatasetName};
use crate::model::kernels::{Csr, spmm_rows, spmm_t_accumulate};

/// Trials stacked side by side in the wide products (a cohort's width is
/// `members × classes` columns).
const MEMBERS: usize = 51;
/// Minibatch of the bundled MLR scenarios (SCAR Appendix D).
const BATCH: usize = 10_000;

/// The MLR kernels.
pub fn kernels() -> Vec<Box<dyn HotKernel>> {
    vec![
        Box::new(Forward { members: 1 }),
        Box::new(Forward { members: MEMBERS }),
        Box::new(Backward { members: MEMBERS }),
    ]
}

/// MNIST as the bench uses it: real where the data folder has it, else the stand-in.
pub fn mnist(ctx: &BenchContext) -> Result<Arc<Classification>> {
    super::classification(ctx, DatasetName::Mnist)
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
            "logits X·W of every MNIST example for {} stacked trial(s) (sparse X, width {})",
            self.members,
            10 * self.members
        )
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let data = mnist(ctx)?;
        let x = Csr::from_dense(&data.x, data.rows, data.features);
        let width = data.classes * self.members;
        let w: Vec<f32> = (0..data.features * width)
            .map(|i| ((i * 2_654_435_761) % 1000) as f32 * 1e-6)
            .collect();
        Ok(Box::new(ForwardRun {
            out: vec![0.0; 64 * width],
            x,
            w,
            width,
            members: self.members,
        }))
    }
}

struct ForwardRun {
    x: Csr,
    w: Vec<f32>,
    out: Vec<f32>,
    width: usize,
    members: usize,
}

impl Prepared for ForwardRun {
    fn run(&mut self) -> Work {
        let n = self.x.rows;
        let mut r0 = 0;
        while r0 < n {
            let r1 = (r0 + 64).min(n);
            spmm_rows(&self.x, r0..r1, &self.w, self.width, &mut self.out);
            r0 = r1;
        }
        std::hint::black_box(&self.out);
        let nnz = self.x.nnz() as f64;
        Work {
            units: (n * self.members) as f64,
            flops: 2.0 * nnz * self.width as f64,
            // X once (value + column index), the row pointers, W once.
            bytes: nnz * 6.0 + 4.0 * n as f64 + 4.0 * self.w.len() as f64,
        }
    }
}

struct Backward {
    members: usize,
}

impl HotKernel for Backward {
    fn name(&self) -> &'static str {
        "mlr-backward-cohort"
    }
    fn model(&self) -> &'static str {
        "mlr"
    }
    fn unit(&self) -> &'static str {
        "examples"
    }
    fn describe(&self) -> String {
        format!(
            "gradient X_Bᵀ·D of a {BATCH}-example minibatch for {} stacked trials (width {})",
            self.members,
            10 * self.members
        )
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let data = mnist(ctx)?;
        let x = Csr::from_dense(&data.x, data.rows, data.features);
        let width = data.classes * self.members;
        let batch = BATCH.min(data.rows);
        let rows: Vec<u32> = (0..batch as u32)
            .map(|i| (i * 7) % data.rows as u32)
            .collect();
        let d: Vec<f32> = (0..batch * width)
            .map(|i| ((i * 40_503) % 1000) as f32 * 1e-3 - 0.5)
            .collect();
        Ok(Box::new(BackwardRun {
            g: vec![0.0; data.features * width],
            x,
            rows,
            d,
            width,
            members: self.members,
        }))
    }
}

struct BackwardRun {
    x: Csr,
    rows: Vec<u32>,
    d: Vec<f32>,
    g: Vec<f32>,
    width: usize,
    members: usize,
}

impl Prepared for BackwardRun {
    fn run(&mut self) -> Work {
        self.g.fill(0.0);
        spmm_t_accumulate(&self.x, &self.rows, &self.d, self.width, &mut self.g);
        std::hint::black_box(&self.g);
        let nnz: usize = self
            .rows
            .iter()
            .map(|&r| self.x.row(r as usize).0.len())
            .sum();
        Work {
            units: (self.rows.len() * self.members) as f64,
            flops: 2.0 * nnz as f64 * self.width as f64,
            bytes: nnz as f64 * 6.0 + 4.0 * self.d.len() as f64,
        }
    }
}
