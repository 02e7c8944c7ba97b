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

use std::sync::Arc;

use rand::RngExt;

use super::{IterCtx, Model, ModelInfo};
use crate::data::Ratings;
use crate::rng::{Purpose, stream};

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

/// MF state: the two factor matrices.
#[derive(Clone, Debug, PartialEq)]
pub struct MfState {
    /// L, m×p row-major: row i (block i) is `l[i*p..(i+1)*p]`.
    pub l: Vec<f64>,
    /// R stored by column, n×p: column j (block m + j) is `r[j*p..(j+1)*p]`.
    pub r: Vec<f64>,
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
}

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

    /// The regularized objective J(L, R) (what ALS decreases monotonically).
    pub fn objective(&self, state: &MfState) -> f64 {
        let reg: f64 = state.l.iter().chain(&state.r).map(|v| v * v).sum();
        self.squared_error(state) + self.lambda * reg
    }

    /// Σ_{(i,j)∈Ω} (A_ij − l_i·r_j)², summed user by user in index order.
    pub fn squared_error(&self, state: &MfState) -> f64 {
        let p = self.p;
        let mut total = 0.0;
        for i in 0..self.data.users {
            let li = &state.l[i * p..(i + 1) * p];
            let (items, values) = self.data.user(i);
            let mut user = 0.0;
            for (&j, &a) in items.iter().zip(values) {
                let rj = &state.r[j as usize * p..(j as usize + 1) * p];
                let d = a as f64 - dot(li, rj);
                user += d * d;
            }
            total += user;
        }
        total
    }

    /// The half-step for one row: `out ← (Σ_k x_k x_kᵀ + λI)⁻¹ Σ_k a_k x_k`
    /// where x_k = `other[idx_k]` (SCAR §5.1, ALS).
    fn solve_one(
        &self,
        idx: &[u32],
        values: &[f32],
        other: &[f64],
        out: &mut [f64],
        ws: &mut MfWorkspace,
    ) {
        let p = self.p;
        let MfWorkspace {
            gram,
            rhs,
            gathered,
        } = ws;
        // Common factor counts get code specialised for their p (the sums
        // and their order are the same as in the general code).
        match p {
            5 => solve_fixed::<5>(idx, values, other, self.lambda, gram, rhs),
            10 => solve_fixed::<10>(idx, values, other, self.lambda, gram, rhs),
            20 => {
                normal_equations_tiled::<20>(idx, values, other, gathered, gram, rhs);
                for s in 0..20 {
                    gram[s * 20 + s] += self.lambda;
                }
                cholesky_solve_upper(gram, rhs, 20);
            }
            _ => {
                normal_equations(p, idx, values, other, gram, rhs);
                for s in 0..p {
                    gram[s * p + s] += self.lambda;
                }
                cholesky_solve_upper(gram, rhs, p);
            }
        }
        out.copy_from_slice(rhs);
    }
}

/// Accumulates the normal equations of one row: the upper triangle of
/// `gram = Σ_k x_k x_kᵀ` (row-major p×p) and `rhs = Σ_k a_k x_k`, where
/// x_k = `other[idx_k·p..(idx_k+1)·p]`, for any p.
fn normal_equations(
    p: usize,
    idx: &[u32],
    values: &[f32],
    other: &[f64],
    gram: &mut [f64],
    rhs: &mut [f64],
) {
    gram.fill(0.0);
    rhs.fill(0.0);
    for (&k, &a) in idx.iter().zip(values) {
        let x = &other[k as usize * p..(k as usize + 1) * p];
        let a = a as f64;
        for s in 0..p {
            let xs = x[s];
            rhs[s] += a * xs;
            let row = &mut gram[s * p + s..(s + 1) * p];
            for (g, &xt) in row.iter_mut().zip(&x[s..]) {
                *g += xs * xt;
            }
        }
    }
}

/// [`normal_equations`] for a p known at compile time: the upper triangle is
/// accumulated in a stack array (known trip counts unroll and vectorize),
/// then stored. Same sums in the same order per entry, so the result
/// equals the general version bit for bit.
fn normal_equations_fixed<const P: usize>(
    idx: &[u32],
    values: &[f32],
    other: &[f64],
    gram: &mut [f64],
    rhs: &mut [f64],
) {
    let mut g = [[0.0f64; P]; P];
    let mut b = [0.0f64; P];
    for (&k, &a) in idx.iter().zip(values) {
        let start = k as usize * P;
        let x: &[f64; P] = other[start..start + P].try_into().expect("P entries");
        let a = a as f64;
        for s in 0..P {
            let xs = x[s];
            b[s] += a * xs;
            for t in s..P {
                g[s][t] += xs * x[t];
            }
        }
    }
    for s in 0..P {
        gram[s * P + s..(s + 1) * P].copy_from_slice(&g[s][s..]);
    }
    rhs.copy_from_slice(&b);
}

/// [`normal_equations`] for a compile-time p divisible by 4, register-blocked:
/// the factors are gathered into `gathered`, then each 2×4 tile of the upper
/// triangle is summed over all ratings in registers. Every entry is still the
/// same sum in the same order, so the result equals the general version bit
/// for bit; only loads and stores are saved.
fn normal_equations_tiled<const P: usize>(
    idx: &[u32],
    values: &[f32],
    other: &[f64],
    gathered: &mut Vec<f64>,
    gram: &mut [f64],
    rhs: &mut [f64],
) {
    debug_assert!(P.is_multiple_of(4));
    gathered.clear();
    for &k in idx {
        let start = k as usize * P;
        gathered.extend_from_slice(&other[start..start + P]);
    }
    let mut b = [0.0f64; P];
    for (x, &a) in gathered.chunks_exact(P).zip(values) {
        let a = a as f64;
        for s in 0..P {
            b[s] += a * x[s];
        }
    }
    rhs.copy_from_slice(&b);
    for s0 in (0..P).step_by(2) {
        for t0 in ((s0 & !3)..P).step_by(4) {
            let mut acc = [[0.0f64; 4]; 2];
            for x in gathered.chunks_exact(P) {
                let x: &[f64; P] = x.try_into().expect("P entries");
                let (x0, x1) = (x[s0], x[s0 + 1]);
                for j in 0..4 {
                    acc[0][j] += x0 * x[t0 + j];
                    acc[1][j] += x1 * x[t0 + j];
                }
            }
            for (i, row) in acc.iter().enumerate() {
                let s = s0 + i;
                for (j, &v) in row.iter().enumerate() {
                    if t0 + j >= s {
                        gram[s * P + t0 + j] = v;
                    }
                }
            }
        }
    }
}

/// The whole regularized solve of one row for a compile-time p.
fn solve_fixed<const P: usize>(
    idx: &[u32],
    values: &[f32],
    other: &[f64],
    lambda: f64,
    gram: &mut [f64],
    rhs: &mut [f64],
) {
    normal_equations_fixed::<P>(idx, values, other, gram, rhs);
    for s in 0..P {
        gram[s * P + s] += lambda;
    }
    cholesky_solve_upper(gram, rhs, P);
}

#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Solves A x = b for a symmetric positive definite p×p matrix A given by its
/// upper triangle (row-major in `a`); `b` is overwritten with x and the upper
/// triangle of `a` with the Cholesky factor U (A = UᵀU).
///
/// Right-looking: after row j of U is formed, the trailing upper triangle is
/// updated row by row, so every inner loop runs over contiguous memory.
#[inline(always)]
pub fn cholesky_solve_upper(a: &mut [f64], b: &mut [f64], p: usize) {
    let a = &mut a[..p * p];
    let b = &mut b[..p];
    for j in 0..p {
        let (head, tail) = a.split_at_mut((j + 1) * p);
        let row = &mut head[j * p..];
        // λ > 0 makes A positive definite; guard against round-off only.
        let d = row[j].max(f64::MIN_POSITIVE).sqrt();
        row[j] = d;
        let inv = 1.0 / d;
        for u in &mut row[j + 1..] {
            *u *= inv;
        }
        let row = &row[j + 1..];
        for (k, trailing) in tail.chunks_exact_mut(p).enumerate() {
            let f = row[k];
            for (t, &u) in trailing[j + 1 + k..].iter_mut().zip(&row[k..]) {
                *t -= f * u;
            }
        }
    }
    // Uᵀ y = b, column by column of Uᵀ (= row by row of U).
    for j in 0..p {
        let row = &a[j * p..(j + 1) * p];
        let y = b[j] / row[j];
        b[j] = y;
        for (bi, &u) in b[j + 1..].iter_mut().zip(&row[j + 1..]) {
            *bi -= u * y;
        }
    }
    // U x = y.
    for j in (0..p).rev() {
        let row = &a[j * p..(j + 1) * p];
        let s: f64 = row[j + 1..]
            .iter()
            .zip(&b[j + 1..])
            .map(|(u, x)| u * x)
            .sum();
        b[j] = (b[j] - s) / row[j];
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
        MfState { l, r }
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
        }
    }

    fn metric(&self, state: &MfState, _ws: &mut MfWorkspace) -> f64 {
        self.squared_error(state)
    }

    fn step(&self, state: &mut MfState, _ctx: IterCtx, ws: &mut MfWorkspace) {
        let p = self.p;
        let MfState { l, r } = state;
        for (i, li) in l.chunks_exact_mut(p).enumerate() {
            let (items, values) = self.data.user(i);
            self.solve_one(items, values, r, li, ws);
        }
        for (j, rj) in r.chunks_exact_mut(p).enumerate() {
            let (users, values) = self.data.item(j);
            self.solve_one(users, values, l, rj, ws);
        }
    }

    fn copy_block(&self, src: &MfState, dst: &mut MfState, block: usize) {
        let p = self.p;
        let m = self.data.users;
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
}
