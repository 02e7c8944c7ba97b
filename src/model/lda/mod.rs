//! Latent Dirichlet allocation by collapsed Gibbs sampling (SCAR §5.1,
//! Appendix D; Griffiths & Steyvers 2004).
//!
//! State: the topic z_i of every token, and the counts derived from it:
//! doc-topic counts n_dk, word-topic counts n_wk and topic totals n_k.
//! A block is one document: its doc-topic counts together with its tokens'
//! topic assignments (Appendix D: the document-topic distribution is
//! co-located with its document, so losing one loses the other). All three
//! counts are derived state, rebuilt from the assignments by
//! [`Model::rebuild_derived`] after any restore, and left out of snapshots
//! (a document's doc-topic counts are its assignments' counts, so a
//! snapshot's block is its assignments alone).
//!
//! One iteration is one sequential Gibbs sweep: documents in index order,
//! tokens in document order. Token i of document d (word w, current topic
//! z_i) is removed from the counts (superscript ¬i) and redrawn from
//!
//! p(z_i = k | z_¬i, w) ∝ (n_dk^¬i + α) · (n_wk^¬i + β) / (n_k^¬i + Vβ),
//!
//! the standard collapsed conditional. The uniform numbers of document d in
//! iteration k come from `rng::stream(run_seed, Iteration, k, d)`, one per
//! token in order, so a perturbed run and its baseline draw the same numbers
//! at the same iteration (common random numbers).
//!
//! Initialisation ("randinit" in the paper's figure names): every z_i is drawn
//! uniformly from the K topics, document d from
//! `rng::stream(init_seed, ModelInit, d, 0)` with the scenario seed.
//!
//! Metric: the negative collapsed joint log-likelihood −log p(w, z) with
//! symmetric Dirichlet priors α, β (Griffiths & Steyvers 2004, eq. 2–3):
//!
//! log p(w | z) = Σ_k [ lnΓ(Vβ) − lnΓ(n_k + Vβ) + Σ_w (lnΓ(n_wk + β) − lnΓ(β)) ]
//! log p(z)     = Σ_d [ lnΓ(Kα) − lnΓ(N_d + Kα) + Σ_k (lnΓ(n_dk + α) − lnΓ(α)) ]
//!
//! The lnΓ differences over counts are read from tables built once.
//!
//! Block distance (Appendix D): total variation between a document's
//! doc-topic distributions θ̂_d = n_d·/N_d in the two states, scaled by the
//! document length N_d: N_d · ½ Σ_k |θ̂_dk − θ̂'_dk| = ½ Σ_k |n_dk − n'_dk|.
//! Block distances combine by summation ([`NormKind::Sum`]), a positive
//! linear combination of total-variation norms.

mod lanes;
mod sweep;

use std::sync::Arc;

use rand::RngExt;
use statrs::function::gamma::ln_gamma;

use super::{IterCtx, Model, ModelInfo, NormKind};
use crate::data::corpus::Corpus;
use crate::rng::{Purpose, stream};
use crate::simd;

pub use lanes::LANES;

/// Largest number of topics: assignments are stored as one byte per token.
pub(crate) const MAX_TOPICS: usize = 256;

/// Hyper-parameters of LDA.
#[derive(Clone, Debug, PartialEq)]
pub struct LdaConfig {
    /// Number of topics K (2..=256).
    pub topics: usize,
    /// Symmetric Dirichlet prior on the doc-topic distributions.
    pub alpha: f64,
    /// Symmetric Dirichlet prior on the topic-word distributions.
    pub beta: f64,
    /// Seed of the random initial assignments (the scenario seed).
    pub init_seed: u64,
}

/// Groups of [`LANES`] runs swept together in one pass over the corpus.
pub(crate) const PASS_GROUPS: usize = 2;

/// Runs per cohort ([`Model::cohort_size`]): four groups of [`LANES`].
pub const COHORT: usize = 4 * LANES;

/// K, α and β: what the Gibbs kernels need of the hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Prior {
    /// Number of topics K.
    pub(crate) topics: usize,
    /// Doc-topic prior α.
    pub(crate) alpha: f64,
    /// Topic-word prior β.
    pub(crate) beta: f64,
}

/// LDA on a corpus.
pub struct Lda {
    corpus: Arc<Corpus>,
    topics: usize,
    alpha: f64,
    beta: f64,
    init_seed: u64,
    /// lnΓ(n + α) − lnΓ(α) for n = 0..=longest document.
    ln_gamma_alpha: Vec<f64>,
    /// lnΓ(n + β) − lnΓ(β) for n = 0..=largest word frequency.
    ln_gamma_beta: Vec<f64>,
    /// Σ_d [lnΓ(Kα) − lnΓ(N_d + Kα)]: the part of log p(z) that does not depend on z.
    doc_norm: f64,
    /// 1/(n + Vβ) for n = 0..=N: the reciprocal topic totals, each the
    /// correctly rounded quotient a division gives.
    inv_table: Vec<f64>,
    /// The count type of each word's row in a group's stacked counts.
    row_classes: lanes::RowClasses,
}

/// The uniform numbers of document `d`'s `n` tokens in the sweep `ctx`
/// (module docs: `rng::stream(run_seed, Iteration, k, d)`, one per token in
/// order), into `out`. [`Lda::step_reference`] draws the same numbers one
/// by one.
fn doc_uniforms(ctx: IterCtx, d: usize, n: usize, out: &mut Vec<f64>) {
    let mut rng = stream(
        ctx.run_seed,
        Purpose::Iteration,
        ctx.iteration as u64,
        d as u64,
    );
    out.clear();
    out.extend((0..n).map(|_| rng.random::<f64>()));
}

/// LDA state. Snapshots (see [`Model::snapshot`]) keep only the
/// assignments: `doc_topic`, `word_topic` and `topic_total` are counts of
/// them, empty there until [`Model::rebuild_derived`] fills them (the
/// doc-topic counts took more memory than the assignments on Reuters).
#[derive(Clone, Debug, PartialEq)]
pub struct LdaState {
    /// Topic of every token, in corpus order.
    pub(crate) assignments: Vec<u8>,
    /// n_dk, row-major `docs × topics` (derived; empty in snapshots).
    pub(crate) doc_topic: Vec<u32>,
    /// n_wk, row-major `vocabulary × topics` (derived).
    pub(crate) word_topic: Vec<u32>,
    /// n_k (derived).
    pub topic_total: Vec<u32>,
}

impl LdaState {
    /// A state with no tokens (a placeholder to be overwritten).
    #[cfg(test)]
    pub(crate) fn empty() -> LdaState {
        LdaState {
            assignments: Vec::new(),
            doc_topic: Vec::new(),
            word_topic: Vec::new(),
            topic_total: Vec::new(),
        }
    }

    /// Bytes held by this state's vectors.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.assignments.len()
            + 4 * (self.doc_topic.len() + self.word_topic.len() + self.topic_total.len())
    }
}

/// Buffers of one run or cohort: the unnormalised weights of a token's
/// topics, the reciprocals 1/(n_k + Vβ), one document's uniform numbers, and
/// the lane layout of a group of cohort members.
pub struct LdaWorkspace {
    weights: Vec<f64>,
    inv_total: Vec<f64>,
    uniforms: Vec<f64>,
    lanes: lanes::LaneBuffers,
}

impl LdaWorkspace {}

/// Σ_k |#{i : a_i = k} − #{i : b_i = k}| over one document's assignments in
/// two states, for topics below `N`.
fn count_difference<const N: usize>(a: &[u8], b: &[u8]) -> u64 {
    // Four tables (a and b, even and odd tokens), so consecutive updates
    // rarely wait for one another.
    let mut t = [[0i32; N]; 4];
    let (a2, b2) = (a.chunks_exact(2), b.chunks_exact(2));
    let (ra, rb) = (a2.remainder(), b2.remainder());
    for (x, y) in a2.zip(b2) {
        t[0][x[0] as usize] += 1;
        t[1][x[1] as usize] += 1;
        t[2][y[0] as usize] += 1;
        t[3][y[1] as usize] += 1;
    }
    for (&x, &y) in ra.iter().zip(rb) {
        t[0][x as usize] += 1;
        t[2][y as usize] += 1;
    }
    (0..N)
        .map(|k| (t[0][k] + t[1][k]).abs_diff(t[2][k] + t[3][k]) as u64)
        .sum()
}

/// lnΓ(n + a) − lnΓ(a) for n = 0..=max, by the recurrence Γ(x + 1) = xΓ(x).
fn ln_gamma_table(a: f64, max: usize) -> Vec<f64> {
    let mut t = Vec::with_capacity(max + 1);
    let mut acc = 0.0;
    t.push(0.0);
    for n in 0..max {
        acc += (n as f64 + a).ln();
        t.push(acc);
    }
    t
}

impl Lda {
    /// A model over `corpus` with the given hyper-parameters (`topics` must
    /// be in 2..=256, `alpha` and `beta` positive: the registry checks).
    pub fn new(corpus: Arc<Corpus>, config: &LdaConfig) -> Lda {
        assert!(
            (2..=MAX_TOPICS).contains(&config.topics),
            "topics out of range"
        );
        assert!(
            corpus.total_tokens() < i32::MAX as usize,
            "counts must fit in an i32"
        );
        let k = config.topics as f64;
        let word_counts = corpus.word_counts();
        let max_word = word_counts.iter().copied().max().unwrap_or(0);
        let v_beta = corpus.vocab_size() as f64 * config.beta;
        let inv_table = (0..=corpus.total_tokens())
            .map(|n| 1.0 / (n as f64 + v_beta))
            .collect();
        let doc_norm = (0..corpus.docs())
            .map(|d| {
                ln_gamma(k * config.alpha) - ln_gamma(corpus.doc_len(d) as f64 + k * config.alpha)
            })
            .sum();
        Lda {
            ln_gamma_alpha: ln_gamma_table(config.alpha, corpus.max_doc_len()),
            ln_gamma_beta: ln_gamma_table(config.beta, max_word),
            doc_norm,
            inv_table,
            row_classes: lanes::RowClasses::new(&word_counts),
            topics: config.topics,
            alpha: config.alpha,
            beta: config.beta,
            init_seed: config.init_seed,
            corpus,
        }
    }

    /// The corpus this model samples.
    pub fn corpus(&self) -> &Corpus {
        &self.corpus
    }

    /// Number of topics K.
    pub(crate) fn topics(&self) -> usize {
        self.topics
    }

    /// (log p(w | z), log p(z)) of `state` (module docs). Needs the derived counts.
    pub fn log_likelihood_parts(&self, state: &LdaState) -> (f64, f64) {
        let v_beta = self.corpus.vocab_size() as f64 * self.beta;
        let mut words = 0.0;
        for &n in &state.topic_total {
            words += ln_gamma(v_beta) - ln_gamma(n as f64 + v_beta);
        }
        let tb = &self.ln_gamma_beta;
        // A zero count adds lnΓ(β) − lnΓ(β) = +0.0, which leaves the sum
        // unchanged (it is never −0.0), so no branch is needed.
        for &n in &state.word_topic {
            words += tb[n as usize];
        }
        let ta = &self.ln_gamma_alpha;
        let mut topics = self.doc_norm;
        for &n in &state.doc_topic {
            topics += ta[n as usize];
        }
        (words, topics)
    }

    /// One Gibbs sweep exactly as first written: a division per reciprocal
    /// and a loop that stops at the drawn topic. Kept as the reference the
    /// vectorised sweeps ([`Model::step`], [`Model::step_many`]) are tested
    /// and benchmarked against; they give the same bits.
    pub fn step_reference(&self, state: &mut LdaState, ctx: IterCtx, ws: &mut LdaWorkspace) {
        let c = &*self.corpus;
        let k = self.topics;
        let (alpha, beta) = (self.alpha, self.beta);
        let v_beta = c.vocab_size() as f64 * beta;
        let LdaState {
            assignments,
            doc_topic,
            word_topic,
            topic_total,
        } = state;
        let LdaWorkspace {
            weights, inv_total, ..
        } = ws;
        let weights = &mut weights[..k];
        let inv_total = &mut inv_total[..k];
        let topic_total = &mut topic_total[..k];
        for (inv, &n) in inv_total.iter_mut().zip(topic_total.iter()) {
            *inv = 1.0 / (n as f64 + v_beta);
        }
        for d in 0..c.docs() {
            let mut rng = stream(
                ctx.run_seed,
                Purpose::Iteration,
                ctx.iteration as u64,
                d as u64,
            );
            let (lo, hi) = (c.offsets[d], c.offsets[d + 1]);
            let nd = &mut doc_topic[d * k..(d + 1) * k];
            for (z, &w) in assignments[lo..hi].iter_mut().zip(&c.tokens[lo..hi]) {
                let w = w as usize;
                let nw = &mut word_topic[w * k..(w + 1) * k];
                let old = *z as usize;
                nd[old] -= 1;
                nw[old] -= 1;
                topic_total[old] -= 1;
                inv_total[old] = 1.0 / (topic_total[old] as f64 + v_beta);
                // Unnormalised conditional of every topic. Counts are far
                // below 2^31, so the i32 route converts exactly (and vectorises).
                for (((p, &a), &b), &inv) in weights
                    .iter_mut()
                    .zip(nd.iter())
                    .zip(nw.iter())
                    .zip(inv_total.iter())
                {
                    *p = (a as i32 as f64 + alpha) * (b as i32 as f64 + beta) * inv;
                }
                let u = rng.random::<f64>() * sweep::sum4(weights);
                let mut acc = 0.0;
                let mut new = k - 1;
                for (t, &p) in weights[..k - 1].iter().enumerate() {
                    acc += p;
                    if acc > u {
                        new = t;
                        break;
                    }
                }
                *z = new as u8;
                nd[new] += 1;
                nw[new] += 1;
                topic_total[new] += 1;
                inv_total[new] = 1.0 / (topic_total[new] as f64 + v_beta);
            }
        }
    }

    /// [`Model::step`] at an explicit kernel level (tests compare the levels).
    pub(crate) fn step_at(
        &self,
        level: simd::Level,
        state: &mut LdaState,
        ctx: IterCtx,
        ws: &mut LdaWorkspace,
    ) {
        let c = &*self.corpus;
        let k = self.topics;
        let prior = self.prior();
        let LdaState {
            assignments,
            doc_topic,
            word_topic,
            topic_total,
        } = state;
        let LdaWorkspace {
            weights,
            inv_total,
            uniforms,
            ..
        } = ws;
        weights.resize(k, 0.0);
        inv_total.resize(k, 0.0);
        for (inv, &n) in inv_total.iter_mut().zip(&topic_total[..k]) {
            *inv = self.inv_table[n as usize];
        }
        for d in 0..c.docs() {
            let (lo, hi) = (c.offsets[d], c.offsets[d + 1]);
            doc_uniforms(ctx, d, hi - lo, uniforms);
            sweep::sweep_doc_at(
                level,
                &c.tokens[lo..],
                uniforms,
                &mut assignments[lo..hi],
                &mut doc_topic[d * k..(d + 1) * k],
                word_topic,
                topic_total,
                inv_total,
                weights,
                &self.inv_table,
                prior,
            );
        }
    }

    /// [`Model::step_many`] at an explicit kernel level: the active runs
    /// are stepped in groups of up to [`LANES`] lanes.
    pub(crate) fn step_many_at(
        &self,
        level: simd::Level,
        states: &mut [LdaState],
        active: &[bool],
        ctx: IterCtx,
        ws: &mut LdaWorkspace,
    ) {
        let next = vec![ctx; states.len()];
        self.step_apart_at(level, states, active, &next, ws);
    }

    /// [`Model::step_apart`] at an explicit kernel level: the active runs,
    /// each at its own `next[i]`, are stepped in groups of up to [`LANES`]
    /// lanes (every lane reads the same corpus in the same order; only the
    /// uniform numbers are the lane's own).
    pub(crate) fn step_apart_at(
        &self,
        level: simd::Level,
        states: &mut [LdaState],
        active: &[bool],
        next: &[IterCtx],
        ws: &mut LdaWorkspace,
    ) {
        let c = &*self.corpus;
        let input = lanes::SweepInput {
            offsets: &c.offsets,
            tokens: &c.tokens,
            inv_table: &self.inv_table,
            classes: &self.row_classes,
            prior: self.prior(),
        };
        let (mut members, ctxs): (Vec<&mut LdaState>, Vec<IterCtx>) = states
            .iter_mut()
            .zip(active)
            .zip(next)
            .filter(|((_, a), _)| **a)
            .map(|((s, _), &c)| (s, c))
            .unzip();
        for (pass, ctxs) in members
            .chunks_mut(PASS_GROUPS * LANES)
            .zip(ctxs.chunks(PASS_GROUPS * LANES))
        {
            lanes::sweep_groups(&input, pass, ctxs, &mut ws.lanes, level);
        }
    }

    fn prior(&self) -> Prior {
        Prior {
            topics: self.topics,
            alpha: self.alpha,
            beta: self.beta,
        }
    }

    /// The metric of up to [`LANES`] states at once, into `out[..states.len()]`:
    /// each lane's sums in the order of [`Lda::log_likelihood_parts`], the
    /// lanes interleaved so that their dependency chains overlap.
    fn metric_group(&self, states: &[&LdaState], out: &mut [f64; LANES]) {
        let lanes = states.len();
        assert!(lanes <= LANES);
        let v_beta = self.corpus.vocab_size() as f64 * self.beta;
        let (nw, nd) = (
            self.corpus.vocab_size() * self.topics,
            self.corpus.docs() * self.topics,
        );
        let mut words = [0.0f64; LANES];
        let mut topics = [self.doc_norm; LANES];
        for (w, s) in words.iter_mut().zip(states) {
            for &n in &s.topic_total {
                *w += ln_gamma(v_beta) - ln_gamma(n as f64 + v_beta);
            }
        }
        let tb = &self.ln_gamma_beta;
        let ta = &self.ln_gamma_alpha;
        let wt: Vec<&[u32]> = states.iter().map(|s| &s.word_topic[..nw]).collect();
        let dt: Vec<&[u32]> = states.iter().map(|s| &s.doc_topic[..nd]).collect();
        for j in 0..nw {
            for s in 0..lanes {
                words[s] += tb[wt[s][j] as usize];
            }
        }
        for j in 0..nd {
            for s in 0..lanes {
                topics[s] += ta[dt[s][j] as usize];
            }
        }
        for s in 0..lanes {
            out[s] = -(words[s] + topics[s]);
        }
    }

    /// Checks that the counts agree with the assignments: n_dk, n_wk and n_k
    /// equal the counts of z, and Σ_k n_k equals the number of tokens.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self, state: &LdaState) -> Result<(), String> {
        let c = &self.corpus;
        let k = self.topics;
        if state.assignments.len() != c.total_tokens() {
            return Err(format!(
                "{} assignments for {} tokens",
                state.assignments.len(),
                c.total_tokens()
            ));
        }
        let mut doc_topic = vec![0u32; c.docs() * k];
        let mut word_topic = vec![0u32; c.vocab_size() * k];
        let mut total = vec![0u32; k];
        for d in 0..c.docs() {
            for i in c.offsets[d]..c.offsets[d + 1] {
                let z = state.assignments[i] as usize;
                if z >= k {
                    return Err(format!("token {i} has topic {z} outside 0..{k}"));
                }
                doc_topic[d * k + z] += 1;
                word_topic[c.tokens[i] as usize * k + z] += 1;
                total[z] += 1;
            }
        }
        if doc_topic != state.doc_topic {
            return Err("doc-topic counts differ from the assignments".into());
        }
        if word_topic != state.word_topic {
            return Err("word-topic counts differ from the assignments".into());
        }
        if total != state.topic_total {
            return Err("topic totals differ from the assignments".into());
        }
        if total.iter().map(|&n| n as usize).sum::<usize>() != c.total_tokens() {
            return Err("topic totals do not add up to the number of tokens".into());
        }
        Ok(())
    }
}

impl Model for Lda {
    type State = LdaState;
    type Workspace = LdaWorkspace;

    fn info(&self) -> ModelInfo {
        let (d, v, k) = (self.corpus.docs(), self.corpus.vocab_size(), self.topics);
        ModelInfo {
            name: "lda",
            blocks: d,
            parameters: d * k + v * k,
            block_description: format!(
                "one document: its {k} doc-topic counts and its tokens' topic assignments"
            ),
            metric: "negative joint log-likelihood -log p(w, z) (collapsed)",
        }
    }

    fn block_count(&self) -> usize {
        self.corpus.docs()
    }

    fn init(&self) -> LdaState {
        let c = &self.corpus;
        let k = self.topics;
        let mut assignments = vec![0u8; c.total_tokens()];
        let mut doc_topic = vec![0u32; c.docs() * k];
        for d in 0..c.docs() {
            let mut rng = stream(self.init_seed, Purpose::ModelInit, d as u64, 0);
            let row = &mut doc_topic[d * k..(d + 1) * k];
            for z in &mut assignments[c.offsets[d]..c.offsets[d + 1]] {
                let t = rng.random_range(0..k);
                *z = t as u8;
                row[t] += 1;
            }
        }
        let mut state = LdaState {
            assignments,
            doc_topic,
            word_topic: Vec::new(),
            topic_total: Vec::new(),
        };
        self.rebuild_derived(&mut state);
        state
    }

    fn workspace(&self) -> LdaWorkspace {
        LdaWorkspace {
            weights: vec![0.0; self.topics],
            inv_total: vec![0.0; self.topics],
            uniforms: Vec::new(),
            lanes: lanes::LaneBuffers::default(),
        }
    }

    fn metric(&self, state: &LdaState, _ws: &mut LdaWorkspace) -> f64 {
        let (words, topics) = self.log_likelihood_parts(state);
        -(words + topics)
    }

    fn step(&self, state: &mut LdaState, ctx: IterCtx, ws: &mut LdaWorkspace) {
        self.step_at(simd::level(), state, ctx, ws);
    }

    fn cohort_size(&self) -> usize {
        COHORT
    }

    fn cohorts_span_data_orders(&self) -> bool {
        true
    }

    fn metric_many(
        &self,
        states: &[LdaState],
        active: &[bool],
        _next: IterCtx,
        _ws: &mut LdaWorkspace,
        out: &mut [f64],
    ) {
        let members: Vec<usize> = (0..states.len()).filter(|&i| active[i]).collect();
        for group in members.chunks(LANES) {
            let refs: Vec<&LdaState> = group.iter().map(|&i| &states[i]).collect();
            let mut values = [0.0; LANES];
            self.metric_group(&refs, &mut values);
            for (&i, &m) in group.iter().zip(&values) {
                out[i] = m;
            }
        }
    }

    fn step_many(
        &self,
        states: &mut [LdaState],
        active: &[bool],
        ctx: IterCtx,
        ws: &mut LdaWorkspace,
    ) {
        self.step_many_at(simd::level(), states, active, ctx, ws);
    }

    /// The metric reads nothing but the state: [`Model::metric_many`]'s lanes.
    fn metric_apart(
        &self,
        states: &[LdaState],
        active: &[bool],
        next: &[IterCtx],
        ws: &mut LdaWorkspace,
        out: &mut [f64],
    ) {
        let ctx = next.first().copied().unwrap_or(IterCtx {
            iteration: 0,
            run_seed: 0,
        });
        self.metric_many(states, active, ctx, ws, out);
    }

    /// Runs of different run seeds (or iterations) share the lanes: each
    /// lane draws its own uniform numbers ([`Lda::step_apart_at`]).
    fn step_apart(
        &self,
        states: &mut [LdaState],
        active: &[bool],
        next: &[IterCtx],
        ws: &mut LdaWorkspace,
    ) {
        self.step_apart_at(simd::level(), states, active, next, ws);
    }

    /// Copies the document's assignments; a live `dst` (one with doc-topic
    /// counts) has its row recounted from them, so its counts stay exact.
    fn copy_block(&self, src: &LdaState, dst: &mut LdaState, block: usize) {
        let c = &self.corpus;
        let k = self.topics;
        let tokens = c.offsets[block]..c.offsets[block + 1];
        dst.assignments[tokens.clone()].copy_from_slice(&src.assignments[tokens.clone()]);
        if !dst.doc_topic.is_empty() {
            let row = &mut dst.doc_topic[block * k..(block + 1) * k];
            row.fill(0);
            for &z in &dst.assignments[tokens] {
                row[z as usize] += 1;
            }
        }
    }

    /// A document's parameters are its tokens' topic assignments (its K
    /// doc-topic counts are derived from them).
    fn block_params(&self, block: usize) -> usize {
        self.corpus.offsets[block + 1] - self.corpus.offsets[block]
    }

    /// ½ Σ_k |n_dk − n'_dk|, from the doc-topic counts of live states, or
    /// counted from the document's assignments when either is a snapshot
    /// (the same integers, so the same value).
    fn block_distance(&self, a: &LdaState, b: &LdaState, block: usize) -> f64 {
        let k = self.topics;
        let row = block * k..(block + 1) * k;
        let l1: u64 = if a.doc_topic.is_empty() || b.doc_topic.is_empty() {
            let tokens = self.corpus.offsets[block]..self.corpus.offsets[block + 1];
            let (a, b) = (&a.assignments[tokens.clone()], &b.assignments[tokens]);
            // Topics are u8 (K ≤ 256); a small K keeps the counts in a few
            // registers' worth of stack, cleared per document.
            if k <= 32 {
                count_difference::<32>(a, b)
            } else {
                count_difference::<256>(a, b)
            }
        } else {
            a.doc_topic[row.clone()]
                .iter()
                .zip(&b.doc_topic[row])
                .map(|(&x, &y)| x.abs_diff(y) as u64)
                .sum()
        };
        0.5 * l1 as f64
    }

    fn norm_kind(&self) -> NormKind {
        NormKind::Sum
    }

    fn rebuild_derived(&self, state: &mut LdaState) {
        let c = &self.corpus;
        let k = self.topics;
        let LdaState {
            assignments,
            doc_topic,
            word_topic,
            topic_total,
        } = state;
        for (counts, len) in [
            (&mut *doc_topic, c.docs() * k),
            (&mut *word_topic, c.vocab_size() * k),
            (&mut *topic_total, k),
        ] {
            counts.clear();
            counts.resize(len, 0);
        }
        // One pass over the tokens, document by document, fills all three.
        for (d, row) in doc_topic.chunks_exact_mut(k).enumerate() {
            let tokens = c.offsets[d]..c.offsets[d + 1];
            for (&z, &w) in assignments[tokens.clone()].iter().zip(&c.tokens[tokens]) {
                row[z as usize] += 1;
                word_topic[w as usize * k + z as usize] += 1;
                topic_total[z as usize] += 1;
            }
        }
    }

    fn snapshot(&self, state: &LdaState) -> LdaState {
        LdaState {
            assignments: state.assignments.clone(),
            doc_topic: Vec::new(),
            word_topic: Vec::new(),
            topic_total: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
