//! MF's hot kernel: one ALS iteration (every row of L, then every column of
//! R, each a regularized p×p least-squares solve, and the squared error of
//! the result), for one trial and for a full lane group of trials, on
//! MovieLens (p = 20) and Jester (p = 5).

use std::sync::Arc;

use anyhow::Result;

use super::{BenchContext, HotKernel, Prepared, Work};
use crate::data::{DataOptions, DatasetName, Ratings, ratings};
use crate::model::mf::{Mf, MfConfig, MfState, MfWorkspace, lanes};
use crate::model::{IterCtx, Model};

/// The MF kernels.
pub(crate) fn kernels() -> Vec<Box<dyn HotKernel>> {
    let mut v: Vec<Box<dyn HotKernel>> = Vec::new();
    for dataset in [DatasetName::Movielens, DatasetName::Jester] {
        for members in [1, lanes::W] {
            v.push(Box::new(Als { dataset, members }));
        }
    }
    v
}

/// The factors and λ of the bundled scenarios.
fn settings(dataset: DatasetName) -> (usize, f64) {
    match dataset {
        DatasetName::Movielens => (20, 0.1),
        _ => (5, 10.0),
    }
}

/// A rating dataset: the real files where the data folder has them, else
/// the full-size stand-in.
pub(crate) fn rating_data(ctx: &BenchContext, name: DatasetName) -> Result<Arc<Ratings>> {
    match ratings::cached_ratings(&ctx.cache, name, &ctx.data, 0) {
        Ok(d) => Ok(d),
        Err(e) if !ctx.data.synthetic => {
            eprintln!("bench: {name}: using the stand-in ({e:#})");
            let stand_in = DataOptions {
                synthetic: true,
                synthetic_scale: 1.0,
                ..ctx.data.clone()
            };
            ratings::cached_ratings(&ctx.cache, name, &stand_in, 0)
        }
        Err(e) => Err(e),
    }
}

/// Work of one ALS iteration of one trial: (solves, flops). A multiply and an
/// add count one flop each; the ALS code keeps them separate.
pub(crate) fn iteration_work(data: &Ratings, p: usize) -> (f64, f64) {
    let pf = p as f64;
    // A Cholesky solve of size q: the factorization (for row j: j·(q−j)
    // multiply-subtracts, q−j−1 scalings, a square root and a reciprocal)
    // and two triangular substitutions (q(q−1) multiply-subtracts and q
    // divisions each).
    let cholesky = |q: usize| -> f64 {
        let factor: f64 = (0..q)
            .map(|j| 2.0 * (j * (q - j)) as f64 + (q - j - 1) as f64 + 2.0)
            .sum();
        let qf = q as f64;
        factor + 2.0 * (qf * (qf - 1.0) + qf)
    };
    // One row with n ratings: the upper triangle of x xᵀ and a·x per rating,
    // then a p×p solve; or, with fewer ratings than factors, the dual form's
    // n(n+1)/2 dot products, an n×n solve and Xᵀz.
    let row = |n: usize| -> f64 {
        let nf = n as f64;
        if crate::model::mf::single::uses_dual(n, p) {
            nf * (nf + 1.0) * pf + nf + cholesky(n) + 2.0 * nf * pf
        } else {
            nf * (pf * (pf + 1.0) + 2.0 * pf) + cholesky(p)
        }
    };
    let rows: f64 = (0..data.users)
        .map(|i| row(data.user(i).0.len()))
        .chain((0..data.items).map(|j| row(data.item(j).0.len())))
        .sum();
    let solves = (data.users + data.items) as f64;
    // The squared error of the result: a dot product, a subtraction, a square and a sum per rating.
    let metric = data.len() as f64 * (2.0 * pf + 3.0);
    (solves, rows + metric)
}

struct Als {
    dataset: DatasetName,
    members: usize,
}

impl HotKernel for Als {
    fn name(&self) -> &'static str {
        match (self.dataset, self.members) {
            (DatasetName::Movielens, 1) => "mf-als-movielens-1",
            (DatasetName::Movielens, _) => "mf-als-movielens-cohort",
            (_, 1) => "mf-als-jester-1",
            _ => "mf-als-jester-cohort",
        }
    }
    fn model(&self) -> &'static str {
        "mf"
    }
    fn unit(&self) -> &'static str {
        "solves"
    }
    fn describe(&self) -> String {
        let (p, lambda) = settings(self.dataset);
        format!(
            "one ALS iteration on {} (p = {p}, λ = {lambda}) and the squared error of its result, \
             {} (f64: measured against the f64 GEMM and half the f32 FMA peak)",
            self.dataset,
            if self.members == 1 {
                "one trial".to_string()
            } else {
                format!("{} trials as the lanes of one group", self.members)
            }
        )
    }
    fn f64_arithmetic(&self) -> bool {
        true
    }

    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let data = rating_data(ctx, self.dataset)?;
        let (factors, regularization) = settings(self.dataset);
        let model = Mf::new(
            data,
            &MfConfig {
                factors,
                regularization,
                init_seed: 1,
            },
        );
        let mut ws = model.workspace();
        // Distinct trained states, as the trials of a cohort hold.
        let mut s = model.init();
        let mut states = Vec::new();
        for k in 0..2 + self.members {
            model.step(&mut s, ctx_at(k), &mut ws);
            if k >= 2 {
                states.push(s.clone());
            }
        }
        let (solves, flops) = iteration_work(model.data(), model.factors());
        Ok(Box::new(AlsRun {
            model,
            ws,
            active: vec![true; states.len()],
            states,
            solves,
            flops,
        }))
    }
}

fn ctx_at(iteration: usize) -> IterCtx {
    IterCtx {
        iteration,
        run_seed: 0,
    }
}

struct AlsRun {
    model: Mf,
    ws: MfWorkspace,
    states: Vec<MfState>,
    active: Vec<bool>,
    /// [`iteration_work`] of one trial (computed once: it visits every row).
    solves: f64,
    flops: f64,
}

impl Prepared for AlsRun {
    fn run(&mut self) -> Work {
        if self.states.len() == 1 {
            self.model
                .step(&mut self.states[0], ctx_at(10), &mut self.ws);
        } else {
            self.model
                .step_many(&mut self.states, &self.active, ctx_at(10), &mut self.ws);
        }
        std::hint::black_box(&self.states);
        let data = self.model.data();
        let members = self.states.len() as f64;
        let state_bytes = 8.0 * ((data.users + data.items) * self.model.factors()) as f64;
        Work {
            units: self.solves * members,
            flops: self.flops * members,
            // Both index lists and values once per half-step, and every
            // member's factors read and written once.
            bytes: 2.0 * 8.0 * data.len() as f64 + 2.0 * state_bytes * members,
        }
    }
}
