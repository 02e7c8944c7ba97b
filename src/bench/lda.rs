//! LDA's hot kernels: the collapsed Gibbs sweep (one trial alone, and a
//! cohort of trials stepped together as the recovery experiments do) and the
//! negative log-likelihood metric evaluated every iteration, on 20 Newsgroups
//! (real where the data folder has it, else the full-size stand-in) with the
//! bundled scenarios' settings (K = 20, α = β = 1).

use std::sync::Arc;

use anyhow::Result;

use super::{BenchContext, HotKernel, Prepared, Work};
use crate::data::corpus::{Corpus, cached_corpus};
use crate::data::{DataOptions, DatasetName};
use crate::model::lda::{Lda, LdaConfig, LdaState};
use crate::model::{IterCtx, Model};

/// Trials stepped together in the cohort kernels (the engine's cohorts hold
/// up to `Lda::cohort_size` of them).
const MEMBERS: usize = 32;
/// Topics of the bundled scenarios (SCAR Appendix D).
const TOPICS: usize = 20;
/// Sweeps run before timing, so the counts look like a run on the steep part
/// of its curve (where the recovery trials spend their iterations).
const BURN_IN: usize = 10;

/// The LDA kernels.
pub(crate) fn kernels() -> Vec<Box<dyn HotKernel>> {
    vec![
        Box::new(Sweep { members: 1 }),
        Box::new(Sweep { members: MEMBERS }),
        Box::new(Metric { members: 1 }),
        Box::new(Metric { members: MEMBERS }),
    ]
}

/// 20 Newsgroups as the bench uses it: real where the data folder has it,
/// else the full-size stand-in.
fn news20(ctx: &BenchContext) -> Result<Arc<Corpus>> {
    match cached_corpus(&ctx.cache, DatasetName::News20, &ctx.data, 0) {
        Ok(c) => Ok(c),
        Err(e) if !ctx.data.synthetic => {
            eprintln!("bench: 20news: using the stand-in ({e:#})");
            let stand_in = DataOptions {
                synthetic: true,
                synthetic_scale: 1.0,
                ..ctx.data.clone()
            };
            cached_corpus(&ctx.cache, DatasetName::News20, &stand_in, 0)
        }
        Err(e) => Err(e),
    }
}

/// The model and `members` states after [`BURN_IN`] sweeps; member m > 0 has
/// every (m + 1)-th document reset to x(0), so the members differ as forked
/// recovery trials do.
fn prepared_states(ctx: &BenchContext, members: usize) -> Result<(Lda, Vec<LdaState>)> {
    let corpus = news20(ctx)?;
    let model = Lda::new(
        corpus,
        &LdaConfig {
            topics: TOPICS,
            alpha: 1.0,
            beta: 1.0,
            init_seed: 1,
        },
    );
    let mut ws = model.workspace();
    let x0 = model.init();
    let mut s = x0.clone();
    for k in 0..BURN_IN {
        model.step(&mut s, ctx_at(k), &mut ws);
    }
    let states = (0..members)
        .map(|m| {
            let mut t = s.clone();
            if m > 0 {
                for d in (0..model.block_count()).step_by(m + 1) {
                    model.copy_block(&x0, &mut t, d);
                }
                model.rebuild_derived(&mut t);
            }
            t
        })
        .collect();
    Ok((model, states))
}

fn ctx_at(k: usize) -> IterCtx {
    IterCtx {
        iteration: k,
        run_seed: 7,
    }
}

fn describe_corpus(members: usize, what: &str) -> String {
    let who = if members == 1 {
        "one trial".to_string()
    } else {
        format!("a cohort of {members} trials (step_many/metric_many)")
    };
    format!("{what} of {who}, 20 Newsgroups, K = {TOPICS}")
}

struct Sweep {
    members: usize,
}

impl HotKernel for Sweep {
    fn name(&self) -> &'static str {
        if self.members == 1 {
            "lda-sweep-1"
        } else {
            "lda-sweep-cohort"
        }
    }
    fn model(&self) -> &'static str {
        "lda"
    }
    fn unit(&self) -> &'static str {
        "tokens"
    }
    fn describe(&self) -> String {
        describe_corpus(self.members, "one collapsed Gibbs sweep")
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let (model, states) = prepared_states(ctx, self.members)?;
        let ws = model.workspace();
        Ok(Box::new(SweepRun {
            active: vec![true; states.len()],
            model,
            states,
            ws,
            k: BURN_IN,
        }))
    }
}

struct SweepRun {
    model: Lda,
    states: Vec<LdaState>,
    active: Vec<bool>,
    ws: <Lda as Model>::Workspace,
    k: usize,
}

/// Work of one sweep over `tokens` tokens for `members` trials: per token
/// and topic two additions and two multiplications for the weight, one
/// addition each for the total and the prefix sum; the corpus (word id) and
/// every member's assignments, doc-topic and word-topic counts read and
/// written once.
fn sweep_work(model: &Lda, members: usize) -> Work {
    let c = model.corpus();
    let (n, k) = (c.total_tokens() as f64, model.topics() as f64);
    let m = members as f64;
    let counts = 4.0 * k * (c.docs() + c.vocab_size()) as f64;
    Work {
        units: n * m,
        flops: 6.0 * k * n * m,
        bytes: 4.0 * n + m * (2.0 * n + 2.0 * counts),
    }
}

impl Prepared for SweepRun {
    fn run(&mut self) -> Work {
        let ctx = ctx_at(self.k);
        if self.states.len() == 1 {
            self.model.step(&mut self.states[0], ctx, &mut self.ws);
        } else {
            self.model
                .step_many(&mut self.states, &self.active, ctx, &mut self.ws);
        }
        self.k += 1;
        sweep_work(&self.model, self.states.len())
    }
}

struct Metric {
    members: usize,
}

impl HotKernel for Metric {
    fn name(&self) -> &'static str {
        if self.members == 1 {
            "lda-metric-1"
        } else {
            "lda-metric-cohort"
        }
    }
    fn model(&self) -> &'static str {
        "lda"
    }
    fn unit(&self) -> &'static str {
        "tokens"
    }
    fn describe(&self) -> String {
        describe_corpus(
            self.members,
            "-log p(w, z) from the lnΓ tables (every word-topic and doc-topic count)",
        )
    }
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>> {
        let (model, states) = prepared_states(ctx, self.members)?;
        let ws = model.workspace();
        Ok(Box::new(MetricRun {
            active: vec![true; states.len()],
            out: vec![0.0; states.len()],
            model,
            states,
            ws,
        }))
    }
}

struct MetricRun {
    model: Lda,
    states: Vec<LdaState>,
    active: Vec<bool>,
    out: Vec<f64>,
    ws: <Lda as Model>::Workspace,
}

impl Prepared for MetricRun {
    fn run(&mut self) -> Work {
        if self.states.len() == 1 {
            self.out[0] = self.model.metric(&self.states[0], &mut self.ws);
        } else {
            self.model.metric_many(
                &self.states,
                &self.active,
                ctx_at(BURN_IN),
                &mut self.ws,
                &mut self.out,
            );
        }
        std::hint::black_box(&self.out);
        let c = self.model.corpus();
        let entries = (self.model.topics() * (c.docs() + c.vocab_size())) as f64;
        let m = self.states.len() as f64;
        Work {
            units: c.total_tokens() as f64 * m,
            flops: entries * m,
            bytes: 4.0 * entries * m,
        }
    }
}
