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
//! index order. Each half-step minimises J exactly over its half, so J never
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
//! lane ([`lanes`]); ALS reads no data order, so all members perform the same
//! operations and every lane reproduces its trial's scalar arithmetic
//! ([`single`]) bit for bit. A step also evaluates the metric of the state it
//! produces (while the factors are at hand) and keeps it in the state until
//! the state is next changed.

pub mod lanes;
pub mod single;

use std::sync::Arc;

use rand::RngExt;

use super::{IterCtx, Model, ModelInfo};
use crate::data::Ratings;
use crate::rng::{Purpose, stream};
use lanes::{V, W};

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
    pub fn new(l: Vec<f64>, r: Vec<f64>) -> MfState {
        MfState { l, r, sse: None }
    }

    /// L, m×p row-major: row i (block i) is `l()[i*p..(i+1)*p]`.
    pub fn l(&self) -> &[f64] {
        &self.l
    }

    /// R by column, n×p: column j (block m + j) is `r()[j*p..(j+1)*p]`.
    pub fn r(&self) -> &[f64] {
        &self.r
    }

    /// L for writing (forgets the cached metric).
    pub fn l_mut(&mut self) -> &mut [f64] {
        self.sse = None;
        &mut self.l
    }

    /// R for writing (forgets the cached metric).
    pub fn r_mut(&mut self) -> &mut [f64] {
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
            data,
            p: config.factors,
            lambda: config.regularization,
            init_seed: config.init_seed,
        }
    }

    /// The ratings this model factorizes.
    pub fn data(&self) -> &Ratings {
        &self.data
    }

    /// p.
    pub fn factors(&self) -> usize {
        self.p
    }

    /// λ.
    pub fn regularization(&self) -> f64 {
        self.lambda
    }

    /// The regularized objective J(L, R) (what ALS decreases monotonically).
    pub fn objective(&self, state: &MfState) -> f64 {
        let reg: f64 = state.l.iter().chain(&state.r).map(|v| v * v).sum();
        self.squared_error(state) + self.lambda * reg
    }

    /// Σ_{(i,j)∈Ω} (A_ij − l_i·r_j)², summed user by user in index order
    /// (always computed, never the cached value).
    pub fn squared_error(&self, state: &MfState) -> f64 {
        let d = &*self.data;
        single::squared_error(
            self.p,
            &d.user_ptr,
            &d.user_items,
            &d.user_values,
            &state.l,
            &state.r,
        )
    }

    /// One ALS iteration for up to [`W`] trials as the lanes of one group,
    /// each trial's metric computed alongside.
    fn step_group(&self, group: &mut [&mut MfState], buf: &mut LaneBuffers) {
        let (d, p, m, n) = (&*self.data, self.p, self.data.users, self.data.items);
        {
            let srcs: Vec<&[f64]> = group.iter().map(|s| &s.r[..]).collect();
            lanes::pack(&mut buf.r, &srcs);
        }
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
        );
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
        );
        let sse = lanes::squared_error(
            p,
            &d.user_ptr,
            &d.user_items,
            &d.user_values,
            &buf.l,
            &buf.r,
        );
        {
            let mut dsts: Vec<&mut [f64]> = group.iter_mut().map(|s| &mut s.l[..]).collect();
            lanes::unpack_rows(&buf.l, p, 0..m, &mut dsts);
        }
        {
            let mut dsts: Vec<&mut [f64]> = group.iter_mut().map(|s| &mut s.r[..]).collect();
            lanes::unpack_rows(&buf.r, p, 0..n, &mut dsts);
        }
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
        *sse = Some(single::squared_error(
            p,
            &d.user_ptr,
            &d.user_items,
            &d.user_values,
            l,
            r,
        ));
    }

    /// Lane groups of [`W`] trials; a cohort of several groups keeps them
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
            });
            self.step_group(group, buf);
        }
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
mod tests {
    use super::single::{
        cholesky_solve_upper, dot, normal_equations, normal_equations_fixed, normal_equations_tiled,
    };
    use super::*;
    use crate::data::synthetic_ratings;

    fn small(p: usize) -> Mf {
        let data = Arc::new(synthetic_ratings::movielens_like(5, 0.05));
        Mf::new(
            data,
            &MfConfig {
                factors: p,
                regularization: 0.1,
                init_seed: 9,
            },
        )
    }

    fn ctx(k: usize) -> IterCtx {
        IterCtx {
            iteration: k,
            run_seed: 0,
        }
    }

    #[test]
    fn fixed_size_normal_equations_equal_the_general_ones() {
        let data = synthetic_ratings::movielens_like(5, 0.05);
        for p in [5usize, 10, 20] {
            let other: Vec<f64> = (0..data.items * p)
                .map(|v| ((v * 37) % 101) as f64 / 50.0 - 1.0)
                .collect();
            let (idx, values) = data.user(0);
            let (mut g1, mut b1) = (vec![0.0; p * p], vec![0.0; p]);
            let (mut g2, mut b2) = (vec![0.0; p * p], vec![0.0; p]);
            normal_equations(p, idx, values, &other, &mut g1, &mut b1);
            match p {
                5 => normal_equations_fixed::<5>(idx, values, &other, &mut g2, &mut b2),
                10 => normal_equations_fixed::<10>(idx, values, &other, &mut g2, &mut b2),
                _ => normal_equations_fixed::<20>(idx, values, &other, &mut g2, &mut b2),
            }
            assert_eq!(b1, b2);
            for s in 0..p {
                assert_eq!(g1[s * p + s..(s + 1) * p], g2[s * p + s..(s + 1) * p]);
            }
            if p == 20 {
                let (mut g3, mut b3) = (vec![0.0; p * p], vec![0.0; p]);
                let mut gathered = Vec::new();
                normal_equations_tiled::<20>(idx, values, &other, &mut gathered, &mut g3, &mut b3);
                assert_eq!(b1, b3);
                for s in 0..p {
                    assert_eq!(g1[s * p + s..(s + 1) * p], g3[s * p + s..(s + 1) * p]);
                }
            }
        }
    }

    #[test]
    fn cholesky_solves_a_known_system() {
        // A = [[4, 2, 0], [2, 5, 1], [0, 1, 3]], x = [1, -1, 2].
        let mut a = vec![4.0, 2.0, 0.0, 0.0, 5.0, 1.0, 0.0, 0.0, 3.0];
        let mut b = vec![2.0, -1.0, 5.0];
        cholesky_solve_upper(&mut a, &mut b, 3);
        for (x, want) in b.iter().zip([1.0, -1.0, 2.0]) {
            assert!((x - want).abs() < 1e-12, "{b:?}");
        }
    }

    #[test]
    fn training_lowers_the_loss_and_the_objective_never_rises() {
        let m = small(5);
        let mut s = m.init();
        let mut ws = m.workspace();
        let l0 = m.metric(&s, &mut ws);
        let mut j = m.objective(&s);
        for k in 0..15 {
            m.step(&mut s, ctx(k), &mut ws);
            let j1 = m.objective(&s);
            assert!(
                j1 <= j * (1.0 + 1e-12),
                "objective rose at {k}: {j} -> {j1}"
            );
            j = j1;
        }
        let l1 = m.metric(&s, &mut ws);
        assert!(l1 < 0.1 * l0, "loss {l0} -> {l1}");
    }

    #[test]
    fn a_half_step_solves_the_normal_equations() {
        let m = small(4);
        let mut s = m.init();
        let mut ws = m.workspace();
        m.step(&mut s, ctx(0), &mut ws);
        // Gradient of J with respect to l_0 vanishes after the user half-step
        // only if R did not move afterwards; check the item half-step instead:
        // for item 3, Σ_i (A_i3 − l_i·r_3) l_i − λ r_3 = 0.
        let p = m.factors();
        let (users, values) = m.data().item(3);
        let r3 = &s.r[3 * p..4 * p];
        let mut g = vec![0.0; p];
        for (&i, &a) in users.iter().zip(values) {
            let li = &s.l[i as usize * p..(i as usize + 1) * p];
            let e = a as f64 - dot(li, r3);
            for t in 0..p {
                g[t] += e * li[t];
            }
        }
        for t in 0..p {
            g[t] -= 0.1 * r3[t];
            assert!(g[t].abs() < 1e-9, "gradient {g:?}");
        }
    }

    #[test]
    fn init_is_uniform_and_deterministic() {
        let m = small(3);
        let a = m.init();
        assert_eq!(a, m.init());
        assert!(a.l.iter().chain(&a.r).all(|v| (0.0..1.0).contains(v)));
        let mean = a.r.iter().sum::<f64>() / a.r.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
    }

    #[test]
    fn block_copy_restores_exactly() {
        let m = small(3);
        let mut ws = m.workspace();
        let x0 = m.init();
        let mut x = x0.clone();
        m.step(&mut x, ctx(0), &mut ws);
        let users = m.data().users;
        let blocks = m.block_count();
        assert_eq!(blocks, users + m.data().items);
        for b in [0, users - 1, users, blocks - 1] {
            assert!(m.block_distance(&x, &x0, b) > 0.0);
            let mut y = x.clone();
            m.copy_block(&x0, &mut y, b);
            assert_eq!(m.block_distance(&y, &x0, b), 0.0);
            // Only that block changed, and copying back round-trips bit for bit.
            for other in [0, users - 1, users, blocks - 1] {
                if other != b {
                    assert_eq!(m.block_distance(&y, &x, other), 0.0);
                }
            }
            m.copy_block(&x, &mut y, b);
            assert_eq!(y, x);
        }
        let total: f64 = (0..blocks)
            .map(|b| m.block_distance(&x, &x0, b).powi(2))
            .sum::<f64>()
            .sqrt();
        let direct: f64 =
            x.l.iter()
                .chain(&x.r)
                .zip(x0.l.iter().chain(&x0.r))
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
        assert!((m.distance(&x, &x0) - direct).abs() < 1e-9 * direct);
        assert!((total - direct).abs() < 1e-9 * direct);
    }

    /// A model on a small stand-in with `p` factors and `lambda`.
    fn model(movielens: bool, p: usize, lambda: f64) -> Mf {
        let data = if movielens {
            synthetic_ratings::movielens_like(3, 0.04)
        } else {
            synthetic_ratings::jester_like(3, 0.01)
        };
        Mf::new(
            Arc::new(data),
            &MfConfig {
                factors: p,
                regularization: lambda,
                init_seed: 4,
            },
        )
    }

    /// `count` different states: x(0) stepped `1 + i` times, then nudged so
    /// that no two states are the same.
    fn distinct_states(m: &Mf, count: usize) -> Vec<MfState> {
        let mut ws = m.workspace();
        let mut s = m.init();
        (0..count)
            .map(|i| {
                m.step(&mut s, ctx(i), &mut ws);
                let mut t = s.clone();
                t.l_mut()[i % 7] += 0.25 * (i as f64 + 1.0);
                t.r_mut()[(3 * i) % 11] -= 0.125;
                t
            })
            .collect()
    }

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// One half-step of every state in `states` as lanes (the item side if
    /// `items`), swept in blocks of `block` rows of the other side (0: row
    /// by row), and each lane's squared error afterwards.
    fn lane_half_step(
        m: &Mf,
        states: &[MfState],
        items: bool,
        block: usize,
        level: crate::simd::Level,
    ) -> (Vec<V>, V) {
        let (d, p) = (m.data(), m.factors());
        let (mut l, mut r) = (lanes::zeros(d.users * p), lanes::zeros(d.items * p));
        lanes::pack(&mut l, &states.iter().map(|s| s.l()).collect::<Vec<_>>());
        lanes::pack(&mut r, &states.iter().map(|s| s.r()).collect::<Vec<_>>());
        let (mut scratch, mut cursor) = (Vec::new(), Vec::new());
        let (ptr, idx, values, other, out) = if items {
            (&d.item_ptr, &d.item_users, &d.item_values, &l, &mut r)
        } else {
            (&d.user_ptr, &d.user_items, &d.user_values, &r, &mut l)
        };
        lanes::half_step_at(
            level,
            p,
            m.regularization(),
            ptr,
            idx,
            values,
            other,
            out,
            block,
            &mut scratch,
            &mut cursor,
        );
        let sse =
            lanes::squared_error_at(level, p, &d.user_ptr, &d.user_items, &d.user_values, &l, &r);
        (if items { r } else { l }, sse)
    }

    #[test]
    fn lane_kernels_equal_the_one_trial_kernels_bit_for_bit() {
        let level = crate::simd::level();
        for (movielens, p, lambda) in [
            (true, 20, 0.1),
            (true, 10, 1.0),
            (true, 7, 0.5),
            (false, 5, 10.0),
            (false, 1, 2.0),
        ] {
            let m = model(movielens, p, lambda);
            let d = m.data();
            for count in [1usize, 3, W] {
                let states = distinct_states(&m, count);
                for items in [false, true] {
                    for block in [0, 1, 7, 1000] {
                        let (got, sse) = lane_half_step(&m, &states, items, block, level);
                        for (lane, s) in states.iter().enumerate() {
                            let mut alone = s.clone();
                            let (ptr, idx, values, other, out) = if items {
                                (
                                    &d.item_ptr,
                                    &d.item_users,
                                    &d.item_values,
                                    &s.l,
                                    &mut alone.r,
                                )
                            } else {
                                (
                                    &d.user_ptr,
                                    &d.user_items,
                                    &d.user_values,
                                    &s.r,
                                    &mut alone.l,
                                )
                            };
                            let (mut g, mut b, mut gathered) =
                                (vec![0.0; p * p], vec![0.0; p], Vec::new());
                            single::half_step(
                                p,
                                lambda,
                                ptr,
                                idx,
                                values,
                                other,
                                out,
                                &mut g,
                                &mut b,
                                &mut gathered,
                            );
                            let want = if items { alone.r() } else { alone.l() };
                            let lane_bits: Vec<f64> = got.iter().map(|v| v[lane]).collect();
                            assert_eq!(
                                bits(&lane_bits),
                                bits(want),
                                "p = {p}, items {items}, block {block}, lane {lane} of {count}"
                            );
                            assert_eq!(sse[lane].to_bits(), m.squared_error(&alone).to_bits());
                        }
                        // Unused lanes stay zero.
                        for lane in count..W {
                            assert!(got.iter().all(|v| v[lane] == 0.0));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_kernel_level_gives_the_portable_bits() {
        use crate::simd::Level;
        for (movielens, p, lambda) in [(true, 20, 0.1), (false, 5, 10.0), (true, 6, 1.0)] {
            let m = model(movielens, p, lambda);
            let d = m.data();
            let states = distinct_states(&m, 5);
            let lanes_at = |level: Level| {
                let mut flat = Vec::new();
                for (items, block) in [(false, 0), (true, 0), (true, 9)] {
                    let (x, sse) = lane_half_step(&m, &states, items, block, level);
                    flat.extend(x.iter().flat_map(|v| v.0));
                    flat.extend(sse.0);
                }
                bits(&flat)
            };
            let s = &states[2];
            let single_at = |level: Level| {
                let mut r = s.r().to_vec();
                let (mut g, mut b, mut gathered) = (vec![0.0; p * p], vec![0.0; p], Vec::new());
                single::half_step_at(
                    level,
                    p,
                    lambda,
                    &d.item_ptr,
                    &d.item_users,
                    &d.item_values,
                    s.l(),
                    &mut r,
                    &mut g,
                    &mut b,
                    &mut gathered,
                );
                let sse = single::squared_error_at(
                    level,
                    p,
                    &d.user_ptr,
                    &d.user_items,
                    &d.user_values,
                    s.l(),
                    &r,
                );
                r.push(sse);
                bits(&r)
            };
            let (lanes0, single0) = (lanes_at(Level::Portable), single_at(Level::Portable));
            for level in Level::supported() {
                assert_eq!(lanes_at(level), lanes0, "lanes, p = {p}, {level:?}");
                assert_eq!(single_at(level), single0, "one trial, p = {p}, {level:?}");
            }
        }
    }

    /// Cohorts of several lane groups, members joining and leaving: every
    /// member's metrics and states equal its run alone, bit for bit.
    #[test]
    fn cohort_members_match_single_runs() {
        for (movielens, p, lambda) in [(true, 20, 0.1), (false, 5, 10.0)] {
            let m = model(movielens, p, lambda);
            let n = W + 3;
            let starts = distinct_states(&m, n);
            // Member i is active at iterations join(i)..leave(i).
            let join = |i: usize| if i % 3 == 1 { 2 + i % 4 } else { 0 };
            let leave = |i: usize| if i % 4 == 2 { 4 } else { 7 };
            let mut alone_metrics = vec![Vec::new(); n];
            let mut alone_states = starts.clone();
            for i in 0..n {
                let mut ws = m.workspace();
                for k in join(i)..leave(i) {
                    alone_metrics[i].push(m.metric(&alone_states[i], &mut ws));
                    m.step(&mut alone_states[i], ctx(k), &mut ws);
                }
                alone_metrics[i].push(m.squared_error(&alone_states[i]));
            }
            let mut states = starts.clone();
            let mut ws = m.workspace();
            let mut metrics = vec![Vec::new(); n];
            for k in 0..8 {
                let active: Vec<bool> = (0..n).map(|i| join(i) <= k && k <= leave(i)).collect();
                let mut out = vec![f64::NAN; n];
                m.metric_many(&states, &active, ctx(k), &mut ws, &mut out);
                for i in 0..n {
                    if active[i] {
                        metrics[i].push(out[i]);
                    }
                }
                let stepping: Vec<bool> = (0..n).map(|i| active[i] && k < leave(i)).collect();
                m.step_many(&mut states, &stepping, ctx(k), &mut ws);
            }
            for i in 0..n {
                assert_eq!(
                    bits(&metrics[i]),
                    bits(&alone_metrics[i]),
                    "metrics of member {i}, p = {p}"
                );
                assert_eq!(bits(states[i].l()), bits(alone_states[i].l()), "L of {i}");
                assert_eq!(bits(states[i].r()), bits(alone_states[i].r()), "R of {i}");
            }
        }
    }

    #[test]
    fn the_cached_metric_is_the_metric_and_block_writes_forget_it() {
        let m = model(true, 20, 0.1);
        let mut ws = m.workspace();
        let mut s = m.init();
        assert!(s.sse.is_none());
        m.step(&mut s, ctx(0), &mut ws);
        let cached = s.sse.expect("a step caches its metric");
        assert_eq!(cached.to_bits(), m.squared_error(&s).to_bits());
        assert_eq!(m.metric(&s, &mut ws).to_bits(), cached.to_bits());
        let x0 = m.init();
        let mut t = s.clone();
        m.copy_block(&x0, &mut t, 0);
        assert!(t.sse.is_none());
        assert_eq!(
            m.metric(&t, &mut ws).to_bits(),
            m.squared_error(&t).to_bits()
        );
        assert_ne!(m.metric(&t, &mut ws), cached);
        let mut u = s.clone();
        u.r_mut()[0] += 1.0;
        assert!(u.sse.is_none());
        let mut states = vec![s.clone(), t.clone(), u.clone()];
        m.step_many(&mut states, &[true, true, true], ctx(1), &mut ws);
        for st in &states {
            assert_eq!(
                st.sse.expect("cached").to_bits(),
                m.squared_error(st).to_bits()
            );
        }
    }
}
