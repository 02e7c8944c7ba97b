//! ALS for one trial: the per-row normal equations, the Cholesky solve and
//! the squared error, in plain scalar order. These define the bits every
//! other path (the lane kernels of [`super::lanes`], every kernel level)
//! must reproduce.
//!
//! Every multiply-add is fused (`f64::mul_add`, one rounding), the sums of a
//! dot product start from −0 and run in factor order. The kernels are
//! compiled once per [`crate::simd::Level`] through [`crate::kernel!`]; they
//! vectorise only across independent entries (Gram entries, trailing-matrix
//! entries), so every level gives the same bits.

crate::kernel! {
    /// The ALS half-step for every row of one side of one trial: row `i`
    /// (ratings `ptr[i]..ptr[i+1]` of `idx`/`values`, pointing at rows of
    /// `other`) gets `out[i·p..(i+1)·p] ← (Σ x xᵀ + λI)⁻¹ Σ a x` (SCAR
    /// §5.1). `gram` (p²), `rhs` (p) and `gathered` are scratch.
    #[allow(clippy::too_many_arguments)]
    pub fn half_step, half_step_at(
        p: usize,
        lambda: f64,
        ptr: &[usize],
        idx: &[u32],
        values: &[f32],
        other: &[f64],
        out: &mut [f64],
        gram: &mut [f64],
        rhs: &mut [f64],
        gathered: &mut Vec<f64>,
    ) = half_step_body;
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn half_step_body(
    p: usize,
    lambda: f64,
    ptr: &[usize],
    idx: &[u32],
    values: &[f32],
    other: &[f64],
    out: &mut [f64],
    gram: &mut [f64],
    rhs: &mut [f64],
    gathered: &mut Vec<f64>,
) {
    for (i, row_out) in out.chunks_exact_mut(p).enumerate() {
        let rg = ptr[i]..ptr[i + 1];
        solve_one(
            p,
            lambda,
            &idx[rg.clone()],
            &values[rg],
            other,
            row_out,
            gram,
            rhs,
            gathered,
        );
    }
}

/// The half-step for one row: `out ← (Σ_k x_k x_kᵀ + λI)⁻¹ Σ_k a_k x_k`
/// where x_k = `other[idx_k]` (SCAR §5.1, ALS).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn solve_one(
    p: usize,
    lambda: f64,
    idx: &[u32],
    values: &[f32],
    other: &[f64],
    out: &mut [f64],
    gram: &mut [f64],
    rhs: &mut [f64],
    gathered: &mut Vec<f64>,
) {
    if uses_dual(idx.len(), p) {
        solve_dual(p, lambda, idx, values, other, out, gram, rhs);
        return;
    }
    // Common factor counts get code specialised for their p (the sums
    // and their order are the same as in the general code).
    match p {
        5 => solve_fixed::<5>(idx, values, other, lambda, gram, rhs),
        10 => solve_fixed::<10>(idx, values, other, lambda, gram, rhs),
        20 => {
            normal_equations_tiled::<20>(idx, values, other, gathered, gram, rhs);
            for s in 0..20 {
                gram[s * 20 + s] += lambda;
            }
            cholesky_solve_upper(gram, rhs, 20);
        }
        _ => {
            normal_equations(p, idx, values, other, gram, rhs);
            for s in 0..p {
                gram[s * p + s] += lambda;
            }
            cholesky_solve_upper(gram, rhs, p);
        }
    }
    out.copy_from_slice(&rhs[..p]);
}

/// Whether a row with `n` ratings is solved in the dual form
/// ([`solve_dual`]): when it has at least one rating and fewer than `p`.
#[inline(always)]
pub(crate) fn uses_dual(n: usize, p: usize) -> bool {
    n > 0 && n < p
}

/// The half-step for a row with n < p ratings, in the dual form: with X the
/// n×p matrix of the factors its ratings point at,
///
/// (XᵀX + λI)⁻¹ Xᵀa = Xᵀ (XXᵀ + λI)⁻¹ a
///
/// (push-through identity; both sides are the ridge solution), so an n×n
/// system replaces the p×p one: n²p/2 + n³/6 multiply-adds instead of
/// np²/2 + p³/6. Most MovieLens movies have fewer ratings than its 20
/// factors. Each entry of XXᵀ is a dot product in factor order from −0, λ
/// added to the diagonal, the system solved by [`cholesky_solve_upper`], and
/// each output a sum over the ratings in order from −0.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn solve_dual(
    p: usize,
    lambda: f64,
    idx: &[u32],
    values: &[f32],
    other: &[f64],
    out: &mut [f64],
    gram: &mut [f64],
    rhs: &mut [f64],
) {
    let n = idx.len();
    let x = |a: usize| &other[idx[a] as usize * p..(idx[a] as usize + 1) * p];
    for a in 0..n {
        for b in a..n {
            gram[a * n + b] = dot(x(a), x(b));
        }
        gram[a * n + a] += lambda;
        rhs[a] = values[a] as f64;
    }
    cholesky_solve_upper(gram, rhs, n);
    for (s, o) in out.iter_mut().enumerate() {
        *o = (0..n).fold(-0.0, |acc, a| rhs[a].mul_add(x(a)[s], acc));
    }
}

crate::kernel! {
    /// Σ_{(i,j)∈Ω} (A_ij − l_i·r_j)² of one trial, summed row by row of `l`
    /// in index order (each row's sum from 0, each dot product in factor
    /// order). Either side can be `l`: `ptr`/`idx`/`values` are the ratings
    /// by row of that side, pointing at rows of `r` ([`super::Mf::squared_error`]
    /// picks the side).
    pub fn squared_error, squared_error_at(
        p: usize,
        ptr: &[usize],
        idx: &[u32],
        values: &[f32],
        l: &[f64],
        r: &[f64],
    ) -> f64 = squared_error_body;
}

#[inline(always)]
fn squared_error_body(
    p: usize,
    ptr: &[usize],
    idx: &[u32],
    values: &[f32],
    l: &[f64],
    r: &[f64],
) -> f64 {
    let mut total = 0.0;
    for (i, li) in l.chunks_exact(p).enumerate() {
        let rg = ptr[i]..ptr[i + 1];
        let mut user = 0.0;
        for (&j, &a) in idx[rg.clone()].iter().zip(&values[rg]) {
            let rj = &r[j as usize * p..(j as usize + 1) * p];
            let d = a as f64 - dot(li, rj);
            user = d.mul_add(d, user);
        }
        total += user;
    }
    total
}

/// Accumulates the normal equations of one row: the upper triangle of
/// `gram = Σ_k x_k x_kᵀ` (row-major p×p) and `rhs = Σ_k a_k x_k`, where
/// x_k = `other[idx_k·p..(idx_k+1)·p]`, for any p.
#[inline(always)]
pub(super) fn normal_equations(
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
            rhs[s] = a.mul_add(xs, rhs[s]);
            let row = &mut gram[s * p + s..(s + 1) * p];
            for (g, &xt) in row.iter_mut().zip(&x[s..]) {
                *g = xs.mul_add(xt, *g);
            }
        }
    }
}

/// [`normal_equations`] for a p known at compile time: the upper triangle is
/// accumulated in a stack array (known trip counts unroll and vectorize),
/// then stored. Same sums in the same order per entry, so the result
/// equals the general version bit for bit.
#[inline(always)]
pub(super) fn normal_equations_fixed<const P: usize>(
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
            b[s] = a.mul_add(xs, b[s]);
            for t in s..P {
                g[s][t] = xs.mul_add(x[t], g[s][t]);
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
#[inline(always)]
pub(super) fn normal_equations_tiled<const P: usize>(
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
            b[s] = a.mul_add(x[s], b[s]);
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
                    acc[0][j] = x0.mul_add(x[t0 + j], acc[0][j]);
                    acc[1][j] = x1.mul_add(x[t0 + j], acc[1][j]);
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
#[inline(always)]
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

#[inline(always)]
pub(super) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).fold(-0.0, |s, (x, y)| x.mul_add(*y, s))
}

/// Solves A x = b for a symmetric positive definite p×p matrix A given by its
/// upper triangle (row-major in `a`); `b` is overwritten with x and the upper
/// triangle of `a` with the Cholesky factor U (A = UᵀU).
///
/// Right-looking: after row j of U is formed, the trailing upper triangle is
/// updated row by row, so every inner loop runs over contiguous memory.
#[inline(always)]
pub(crate) fn cholesky_solve_upper(a: &mut [f64], b: &mut [f64], p: usize) {
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
                *t = (-f).mul_add(u, *t);
            }
        }
    }
    // Uᵀ y = b, column by column of Uᵀ (= row by row of U).
    for j in 0..p {
        let row = &a[j * p..(j + 1) * p];
        let y = b[j] / row[j];
        b[j] = y;
        for (bi, &u) in b[j + 1..].iter_mut().zip(&row[j + 1..]) {
            *bi = (-u).mul_add(y, *bi);
        }
    }
    // U x = y.
    for j in (0..p).rev() {
        let row = &a[j * p..(j + 1) * p];
        let s = row[j + 1..]
            .iter()
            .zip(&b[j + 1..])
            .fold(-0.0, |s, (u, x)| u.mul_add(*x, s));
        b[j] = (b[j] - s) / row[j];
    }
}
