//! Matrix factorization by alternating least squares (SCAR §5.1, Appendix D).
//!
//! The rating matrix A (m users × n items, observed entries Ω) is
//! approximated by L·R with L ∈ ℝ^{m×p} and R ∈ ℝ^{p×n}. ALS minimises the
//! regularized objective
//!
//! J(L, R) = Σ_{(i,j)∈Ω} (A_ij − l_i·r_j)² + λ (Σ_i ‖l_i‖² + Σ_j ‖r_j‖²)
//!
//! (l_i = row i of L, r_j = column j of R). One iteration first solves for
//! every row of L with R fixed, then for every column of R with the new L:
//!
//! l_i ← (Σ_{j∈Ω_i} r_j r_jᵀ + λI)⁻¹ Σ_{j∈Ω_i} A_ij r_j, and symmetrically for r_j,
//!
//! each a p×p system solved by Cholesky, users in index order then items in
//! index order. A row with fewer ratings than factors (0 < n < p: most
//! MovieLens movies at p = 20) is solved in the equivalent dual form
//! Xᵀ(XXᵀ + λI)⁻¹a, an n×n system (`single::solve_dual`): the same ridge
//! solution to rounding, at a fraction of the cost. Each half-step minimises J exactly over its half, so J never
//! increases. The regularization is the plain (unweighted) ridge λ·I, the
//! same for every row and column; the paper does not give one, and a λ > 0
//! keeps every system positive definite (items with fewer than p ratings).
//!
//! Initialization (Appendix D): every entry of L and R uniform in [0, 1),
//! drawn from `rng::stream(seed, ModelInit, 0, 0)`, L row by row, then R
//! column by column.
//!
//! Metric: the squared error **summed** over the observed ratings,
//! Σ_{(i,j)∈Ω} (A_ij − l_i·r_j)², without the regularization term (the
//! paper's "mean squared error loss"; its criteria only make sense as sums).
//!
//! Blocks (§5.1: "the rows of L and the columns of R are randomly
//! partitioned"): block `b < m` is row b of L (user b), block `m + j` is
//! column j of R (item j). Block distance: L2.

//! Speed: a cohort of trials is computed side by side, one trial per SIMD
//! lane (`lanes`); ALS reads no data order, so all members perform the same
//! operations and every lane reproduces its trial's scalar arithmetic
//! (`single`) bit for bit. A step also evaluates the metric of the state it
//! produces (while the factors are at hand) and keeps it in the state until
//! the state is next changed.

pub(crate) mod lanes;
pub(crate) mod single;

use std::sync::Arc;

use rand::RngExt;

use super::{IterCtx, Model, ModelInfo};
use crate::data::Ratings;
use crate::rng::{Purpose, stream};
use lanes::{Solved, V, W};

/// Hyper-parameters of MF.
#[derive(Clone, Debug, PartialEq)]
pub struct MfConfig {
    /// p: the number of factors (rank of L·R).
    pub factors: usize,
    /// λ > 0: ridge regularization of every row of L and column of R.
    pub regularization: f64,
    /// Seed of the U[0, 1) initialization.
    pub init_seed: u64,
}

/// Matrix factorization by ALS over a rating matrix.
pub struct Mf {
    data: Arc<Ratings>,
    p: usize,
    lambda: f64,
    init_seed: u64,
    /// Whether the squared error is summed item by item (else user by
    /// user); see [`Mf::squared_error`].
    sse_by_item: bool,
}

/// MF state: the two factor matrices, and the metric of exactly these
/// factors when the step that produced them computed it.
#[derive(Clone, Debug)]
pub struct MfState {
    /// L, m×p row-major: row i (block i) is `l[i*p..(i+1)*p]`.
    l: Vec<f64>,
    /// R stored by column, n×p: column j (block m + j) is `r[j*p..(j+1)*p]`.
    r: Vec<f64>,
    /// The squared error of (L, R); `None` once either may have changed.
    sse: Option<f64>,
}

impl PartialEq for MfState {
    /// States are equal when their factors are (the cached metric is derived).
    fn eq(&self, other: &MfState) -> bool {
        self.l == other.l && self.r == other.r
    }
}

impl MfState {
    /// A state from L (m×p row-major) and R (n×p, column j of R contiguous).
    pub(crate) fn new(l: Vec<f64>, r: Vec<f64>) -> MfState {
        MfState { l, r, sse: None }
    }

    /// L, m×p row-major: row i (block i) is `l()[i*p..(i+1)*p]`.
    #[cfg(test)]
    pub(crate) fn l(&self) -> &[f64] {
        &self.l
    }

    /// R by column, n×p: column j (block m + j) is `r()[j*p..(j+1)*p]`.
    pub fn r(&self) -> &[f64] {
        &self.r
    }

    /// L for writing (forgets the cached metric).
    #[cfg(test)]
    pub(crate) fn l_mut(&mut self) -> &mut [f64] {
        self.sse = None;
        &mut self.l
    }

    /// R for writing (forgets the cached metric).
    #[cfg(test)]
    pub(crate) fn r_mut(&mut self) -> &mut [f64] {
        self.sse = None;
        &mut self.r
    }
}

/// Buffers reused by every least-squares solve.
pub struct MfWorkspace {
    /// The p×p normal matrix, row-major; its upper triangle becomes the Cholesky factor.
    gram: Vec<f64>,
    /// Right-hand side, then the solution.
    rhs: Vec<f64>,
    /// The factors a row's ratings point at, gathered contiguously (capacity
    /// for the largest row or column, so it never grows).
    gathered: Vec<f64>,
    /// Lane buffers of a cohort group (allocated by the first cohort step).
    lanes: Option<LaneBuffers>,
}

/// The factors of up to [`W`] trials interleaved ([`lanes`]), and scratch.
struct LaneBuffers {
    l: Vec<V>,
    r: Vec<V>,
    scratch: Vec<V>,
    cursor: Vec<usize>,
    /// Each row's squared residuals ([`lanes::Solved::row_sse`]).
    row_sse: Vec<V>,
}

/// Groups of fewer active members than this are stepped one trial at a time
/// (a lane group costs about the same whatever its occupancy). Either way
/// gives the same bits.
const LANES_FROM: usize = 2;

impl Mf {
    /// A model over `data`. `config.factors` must be ≥ 1 and
    /// `config.regularization` > 0 (the registry checks both).
    pub fn new(data: Arc<Ratings>, config: &MfConfig) -> Mf {
        assert!(config.factors >= 1, "at least one factor");
        assert!(
            config.regularization > 0.0,
            "the regularization must be positive"
        );
        Mf {
            // The larger side's rows (see `squared_error`).
            sse_by_item: data.items > data.users,
            data,
            p: config.factors,
            lambda: config.regularization,
            init_seed: config.init_seed,
        }
    }

    /// The ratings this model factorizes.
    pub(crate) fn data(&self) -> &Ratings {
        &self.data
    }

    /// p.
    pub(crate) fn factors(&self) -> usize {
        self.p
    }

    /// λ.
    #[cfg(test)]
    pub(crate) fn regularization(&self) -> f64 {
        self.lambda
    }

    /// The regularized objective J(L, R) (what ALS decreases monotonically).
    #[cfg(test)]
    pub(crate) fn objective(&self, state: &MfState) -> f64 {
        let reg: f64 = state.l.iter().chain(&state.r).map(|v| v * v).sum();
        self.squared_error(state) + self.lambda * reg
    }

    /// Σ_{(i,j)∈Ω} (A_ij − l_i·r_j)² (always computed, never the cached
    /// value), summed row by row over the side with more rows — item by
    /// item where there are more items than users (MovieLens: 9,066 movies,
    /// 671 users), user by user otherwise (Jester: 24,983 users, 100 jokes)
    /// — each row's sum from 0 over its ratings in index order, each
    /// residual's dot product in factor order. The order fixes the bits;
    /// this one reads each row of the larger side once, in sequence, and
    /// gathers the rows of the smaller side, which stay in cache.
    pub fn squared_error(&self, state: &MfState) -> f64 {
        let (ptr, idx, values, rows, other) = self.sse_order(&state.l, &state.r);
        single::squared_error(self.p, ptr, idx, values, rows, other)
    }

    /// The arguments of the squared-error kernels for factors `l` and `r`
    /// in [`Mf::squared_error`]'s order: the ratings by row of the summed
    /// side, that side's factors, the other side's.
    #[allow(clippy::type_complexity)]
    fn sse_order<'a, T>(
        &'a self,
        l: &'a [T],
        r: &'a [T],
    ) -> (&'a [usize], &'a [u32], &'a [f32], &'a [T], &'a [T]) {
        let d = &*self.data;
        if self.sse_by_item {
            (&d.item_ptr, &d.item_users, &d.item_values, r, l)
        } else {
            (&d.user_ptr, &d.user_items, &d.user_values, l, r)
        }
    }

    /// One ALS iteration for up to [`W`] trials as the lanes of one group,
    /// each trial's metric computed alongside.
    fn step_group(&self, group: &mut [&mut MfState], buf: &mut LaneBuffers) {
        let (d, p, m, n) = (&*self.data, self.p, self.data.users, self.data.items);
        {
            let srcs: Vec<&[f64]> = group.iter().map(|s| &s.r[..]).collect();
            lanes::pack(&mut buf.r, &srcs);
        }
        // Each solved row goes straight to its trials (no unpacking pass);
        // where the squared error is summed item by item, each item's row
        // sum is formed right after its row of R is solved.
        {
            let mut trials: Vec<&mut [f64]> = group.iter_mut().map(|s| &mut s.l[..]).collect();
            lanes::half_step(
                p,
                self.lambda,
                &d.user_ptr,
                &d.user_items,
                &d.user_values,
                &buf.r,
                &mut buf.l,
                lanes::sweep_block(m, n, p),
                &mut buf.scratch,
                &mut buf.cursor,
                &mut Solved {
                    trials: &mut trials,
                    row_sse: None,
                },
            );
        }
        {
            let mut trials: Vec<&mut [f64]> = group.iter_mut().map(|s| &mut s.r[..]).collect();
            lanes::half_step(
                p,
                self.lambda,
                &d.item_ptr,
                &d.item_users,
                &d.item_values,
                &buf.l,
                &mut buf.r,
                lanes::sweep_block(n, m, p),
                &mut buf.scratch,
                &mut buf.cursor,
                &mut Solved {
                    trials: &mut trials,
                    row_sse: self.sse_by_item.then_some(&mut buf.row_sse),
                },
            );
        }
        let sse = if self.sse_by_item {
            // The rows' sums added in row order, as `squared_error` adds them.
            let mut total = V::splat(0.0);
            for row in &buf.row_sse {
                for (t, v) in total.0.iter_mut().zip(&row.0) {
                    *t += v;
                }
            }
            total
        } else {
            let (ptr, idx, values, rows, other) = self.sse_order(&buf.l, &buf.r);
            lanes::squared_error(p, ptr, idx, values, rows, other)
        };
        for (s, &v) in group.iter_mut().zip(&sse.0) {
            s.sse = Some(v);
        }
    }
}

impl Model for Mf {
    type State = MfState;
    type Workspace = MfWorkspace;

    fn info(&self) -> ModelInfo {
        let (m, n, p) = (self.data.users, self.data.items, self.p);
        ModelInfo {
            name: "mf",
            blocks: m + n,
            parameters: (m + n) * p,
            block_description: format!(
                "blocks 0..{m}: rows of L ({m}x{p}, one per user); blocks {m}..{}: columns of R ({p}x{n}, one per item)",
                m + n
            ),
            metric: "squared error summed over the observed ratings (without the regularization term)",
        }
    }

    fn block_count(&self) -> usize {
        self.data.users + self.data.items
    }

    fn init(&self) -> MfState {
        let mut rng = stream(self.init_seed, Purpose::ModelInit, 0, 0);
        let p = self.p;
        let l = (0..self.data.users * p)
            .map(|_| rng.random::<f64>())
            .collect();
        let r = (0..self.data.items * p)
            .map(|_| rng.random::<f64>())
            .collect();
        MfState::new(l, r)
    }

    fn workspace(&self) -> MfWorkspace {
        let widest = (0..self.data.users)
            .map(|i| self.data.user(i).0.len())
            .chain((0..self.data.items).map(|j| self.data.item(j).0.len()))
            .max()
            .unwrap_or(0);
        MfWorkspace {
            gram: vec![0.0; self.p * self.p],
            rhs: vec![0.0; self.p],
            gathered: Vec::with_capacity(widest * self.p),
            lanes: None,
        }
    }

    fn metric(&self, state: &MfState, _ws: &mut MfWorkspace) -> f64 {
        state.sse.unwrap_or_else(|| self.squared_error(state))
    }

    fn step(&self, state: &mut MfState, _ctx: IterCtx, ws: &mut MfWorkspace) {
        let (d, p) = (&*self.data, self.p);
        let MfState { l, r, sse } = state;
        let MfWorkspace {
            gram,
            rhs,
            gathered,
            ..
        } = ws;
        single::half_step(
            p,
            self.lambda,
            &d.user_ptr,
            &d.user_items,
            &d.user_values,
            r,
            l,
            gram,
            rhs,
            gathered,
        );
        single::half_step(
            p,
            self.lambda,
            &d.item_ptr,
            &d.item_users,
            &d.item_values,
            l,
            r,
            gram,
            rhs,
            gathered,
        );
        let (ptr, idx, values, rows, other) = self.sse_order(l, r);
        *sse = Some(single::squared_error(p, ptr, idx, values, rows, other));
    }

    /// Lane groups of `W` trials; a cohort of several groups keeps them
    /// full while members join and leave.
    fn cohort_size(&self) -> usize {
        4 * W
    }

    fn metric_many(
        &self,
        states: &[MfState],
        active: &[bool],
        _next: IterCtx,
        ws: &mut MfWorkspace,
        out: &mut [f64],
    ) {
        for ((s, &a), o) in states.iter().zip(active).zip(out.iter_mut()) {
            if a {
                *o = self.metric(s, ws);
            }
        }
    }

    fn step_many(
        &self,
        states: &mut [MfState],
        active: &[bool],
        ctx: IterCtx,
        ws: &mut MfWorkspace,
    ) {
        let mut members: Vec<&mut MfState> = states
            .iter_mut()
            .zip(active)
            .filter(|(_, a)| **a)
            .map(|(s, _)| s)
            .collect();
        for group in members.chunks_mut(W) {
            if group.len() < LANES_FROM {
                for s in group.iter_mut() {
                    self.step(s, ctx, ws);
                }
                continue;
            }
            let (m, n, p) = (self.data.users, self.data.items, self.p);
            let buf = ws.lanes.get_or_insert_with(|| LaneBuffers {
                l: lanes::zeros(m * p),
                r: lanes::zeros(n * p),
                scratch: Vec::new(),
                cursor: Vec::new(),
                row_sse: Vec::new(),
            });
            self.step_group(group, buf);
        }
    }

    /// ALS reads no data order and draws nothing: a step depends on (L, R)
    /// alone. Compared bit for bit (so −0 and +0 differ, and NaN equals
    /// itself).
    fn same_state(&self, a: &MfState, b: &MfState) -> Option<bool> {
        let bits = |x: &[f64], y: &[f64]| {
            x.len() == y.len() && x.iter().zip(y).all(|(u, v)| u.to_bits() == v.to_bits())
        };
        Some(bits(&a.l, &b.l) && bits(&a.r, &b.r))
    }

    fn copy_block(&self, src: &MfState, dst: &mut MfState, block: usize) {
        let p = self.p;
        let m = self.data.users;
        dst.sse = None;
        if block < m {
            let rg = block * p..(block + 1) * p;
            dst.l[rg.clone()].copy_from_slice(&src.l[rg]);
        } else {
            let rg = (block - m) * p..(block - m + 1) * p;
            dst.r[rg.clone()].copy_from_slice(&src.r[rg]);
        }
    }

    fn block_distance(&self, a: &MfState, b: &MfState, block: usize) -> f64 {
        let p = self.p;
        let m = self.data.users;
        let (x, y) = if block < m {
            let rg = block * p..(block + 1) * p;
            (&a.l[rg.clone()], &b.l[rg])
        } else {
            let rg = (block - m) * p..(block - m + 1) * p;
            (&a.r[rg.clone()], &b.r[rg])
        };
        x.iter()
            .zip(y)
            .map(|(u, v)| (u - v) * (u - v))
            .sum::<f64>()
            .sqrt()
    }
}

#[cfg(test)]
mod tests;
