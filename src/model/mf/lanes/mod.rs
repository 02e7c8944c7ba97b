//! ALS for a cohort of trials at once, one trial per SIMD lane ("structure of
//! arrays across trials").
//!
//! ALS reads no data order, so every member of a cohort performs the same
//! sequence of operations on the same sparsity pattern; only the values
//! differ. A lane buffer stores the factors of up to [`W`] trials
//! interleaved: entry `k` (row or column `k / p`, factor `k % p`) is one
//! [`V`] whose lane `l` belongs to trial `l`. Every kernel here applies to
//! each lane exactly the scalar operations of the one-trial code in
//! [`super::single`] — the same Gram sums in the same order, the same
//! Cholesky factorization and substitutions, the same squared-error sum — so
//! each lane's bits equal the trial's bits alone and cannot depend on the
//! other lanes. Nothing ever reduces across lanes. Unused lanes hold zeros
//! (their systems are λI, their solutions zero).
//!
//! Each kernel is compiled once per [`crate::simd::Level`] (`lane_kernel!`,
//! the [`crate::kernel!`] pattern with a register type per level, [`Simd`]):
//! a lane operation is one AVX-512 instruction, two AVX2 instructions or
//! eight scalar ones, each lane the correctly rounded IEEE operation of the
//! scalar code (fused multiply-adds included: `f64::mul_add` on the portable
//! level), so every level gives the same bits.

/// Lanes per group: trials computed side by side (one AVX-512 register of f64).
pub(crate) const W: usize = 8;

/// One value for each of the [`W`] trials of a group, as stored in a lane
/// buffer (aligned to a cache line, so a vector load never splits one).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(64))]
pub(crate) struct V(pub [f64; W]);

impl V {
    /// Every lane `x`.
    pub(crate) const fn splat(x: f64) -> V {
        V([x; W])
    }
}

impl std::ops::Index<usize> for V {
    type Output = f64;
    fn index(&self, lane: usize) -> &f64 {
        &self.0[lane]
    }
}

impl std::ops::IndexMut<usize> for V {
    fn index_mut(&mut self, lane: usize) -> &mut f64 {
        &mut self.0[lane]
    }
}

mod cholesky;
mod gram;
pub(crate) mod simd;

use cholesky::{NB, cholesky_solve, cholesky_solve_many, cholesky_solve_p};
use gram::{CHUNK, accumulate_p, rhs_blocks, tile_dispatch, tile_len};
#[cfg(target_arch = "x86_64")]
use simd::x86;
pub(crate) use simd::{Portable, Simd};

/// Defines a lane kernel the way [`crate::kernel!`] does — `name` runs at
/// the process's [`crate::simd::level`], `name_at` at an explicit level — for
/// a body generic over the register type ([`Simd`]): the portable body uses
/// [`Portable`], the `#[target_feature]` entry points the AVX2 and AVX-512
/// intrinsics.
macro_rules! lane_kernel {
    ($(#[$m:meta])* pub fn $name:ident, $at:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? = $body:ident;) => {
        $(#[$m])*
        #[inline]
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn $name($($a: $t),*) $(-> $r)? {
            $at($crate::simd::level(), $($a),*)
        }

        /// The same kernel at an explicit [`Level`](crate::simd::Level), capped
        /// at what the CPU supports.
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn $at(level: $crate::simd::Level, $($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx512($($a: $t),*) $(-> $r)? { $body::<x86::Avx512>($($a),*) }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2($($a: $t),*) $(-> $r)? { $body::<x86::Avx2>($($a),*) }
                match level.min($crate::simd::detected()) {
                    // SAFETY: `detected()` reports only features this CPU has.
                    $crate::simd::Level::Avx512 => return unsafe { avx512($($a),*) },
                    // SAFETY: as above.
                    $crate::simd::Level::Avx2 => return unsafe { avx2($($a),*) },
                    $crate::simd::Level::Portable => {}
                }
            }
            let _ = level;
            $body::<Portable>($($a),*)
        }
    };
}

/// A zeroed lane buffer of `len` entries.
pub(crate) fn zeros(len: usize) -> Vec<V> {
    vec![V::splat(0.0); len]
}

lane_kernel! {
    /// Interleaves `srcs` (one trial's factor matrix each, all of the same
    /// length) into `dst`: `dst[k][l] = srcs[l][k]`; lanes past `srcs.len()`
    /// become zero.
    pub fn pack, pack_at(dst: &mut [V], srcs: &[&[f64]]) = pack_body;
}

/// [`unpack_rows_body`] as a kernel of its own, for the tests (the steps
/// unpack each row as it is solved, [`Solved::trials`]).
#[cfg(test)]
#[allow(dead_code)]
mod unpack {
    use super::*;

    lane_kernel! {
        /// The inverse of [`pack`] for rows `rows` (of `p` entries each): lane
        /// `l` of `src` into `dsts[l]`.
        pub fn unpack_rows, unpack_rows_at(
            src: &[V],
            p: usize,
            rows: std::ops::Range<usize>,
            dsts: &mut [&mut [f64]],
        ) = unpack_rows_body;
    }
}
#[cfg(test)]
pub(crate) use unpack::unpack_rows_at;

/// [`pack`]: [`W`] entries of every trial at a time, transposed in registers.
#[inline(always)]
fn pack_body<S: Simd>(dst: &mut [V], srcs: &[&[f64]]) {
    debug_assert!(srcs.len() <= W);
    let full = dst.len() / W * W;
    for k0 in (0..full).step_by(W) {
        let rows: [V; W] = std::array::from_fn(|l| match srcs.get(l) {
            Some(src) => V(src[k0..k0 + W].try_into().expect("W entries")),
            None => V::splat(0.0),
        });
        let block: &mut [V; W] = (&mut dst[k0..k0 + W]).try_into().expect("W entries");
        *block = S::transpose(&rows);
    }
    for (k, v) in dst.iter_mut().enumerate().skip(full) {
        *v = V(std::array::from_fn(|l| {
            srcs.get(l).map_or(0.0, |src| src[k])
        }));
    }
}

/// The inverse of [`pack`] for rows `rows` (of `p` entries each): lane `l`
/// of `src` into `dsts[l]`, [`W`] entries at a time, transposed in registers.
#[inline(always)]
fn unpack_rows_body<S: Simd>(
    src: &[V],
    p: usize,
    rows: std::ops::Range<usize>,
    dsts: &mut [&mut [f64]],
) {
    let (lo, hi) = (rows.start * p, rows.end * p);
    let mut k0 = lo;
    while k0 + W <= hi {
        let block: &[V; W] = src[k0..k0 + W].try_into().expect("W entries");
        let t = S::transpose(block);
        for (dst, row) in dsts.iter_mut().zip(&t) {
            dst[k0..k0 + W].copy_from_slice(&row.0);
        }
        k0 += W;
    }
    for k in k0..hi {
        for (l, dst) in dsts.iter_mut().enumerate() {
            dst[k] = src[k].0[l];
        }
    }
}

lane_kernel! {
    /// The ALS half-step for every row of one side and every lane: row `i`
    /// (ratings `ptr[i]..ptr[i+1]` of `idx`/`values`, pointing at rows of
    /// `other`) gets `out[i·p..(i+1)·p] ← (Σ x xᵀ + λI)⁻¹ Σ a x` (SCAR §5.1),
    /// lane by lane exactly as [`super::single::half_step`] computes it.
    /// With `block` > 0 the other side is swept `block` rows at a time for
    /// all rows at once (see [`sweep_block`]; the same result). `scratch`
    /// and `cursor` are reused buffers. Each row, once solved and still in
    /// cache, goes to `solved` (see [`Solved`]).
    pub fn half_step, half_step_at(
        p: usize,
        lambda: f64,
        ptr: &[usize],
        idx: &[u32],
        values: &[f32],
        other: &[V],
        out: &mut [V],
        block: usize,
        scratch: &mut Vec<V>,
        cursor: &mut Vec<usize>,
        solved: &mut Solved<'_, '_>,
    ) = half_step_body;
}

/// What [`half_step`] does with each row right after solving it, while the
/// row is still in cache (instead of a later pass that streams the whole
/// side from memory again). Either does the same arithmetic in the same
/// order as its separate pass, so the bits are the same.
pub(crate) struct Solved<'a, 'b> {
    /// Each trial's factors of this side: lane `l` of row `r` goes to
    /// `trials[l][r·p..(r+1)·p]`, as [`unpack_rows_body`] puts it (none
    /// when empty).
    pub(crate) trials: &'a mut [&'b mut [f64]],
    /// With `Some`, entry `r` gets row `r`'s squared residuals Σ (a − x_r ·
    /// other_k)² over its ratings, as [`squared_error`] sums one row; the
    /// caller adds the rows in order.
    pub(crate) row_sse: Option<&'a mut Vec<V>>,
}

/// The ratings of a half-step's rows: row `r`'s are
/// `idx`/`values[ptr[r]..ptr[r+1]]`, pointing at rows of `other`.
#[derive(Clone, Copy)]
struct RowRatings<'a> {
    ptr: &'a [usize],
    idx: &'a [u32],
    values: &'a [f32],
    other: &'a [V],
}

/// Hands row `r` of `out` (p entries, solved) to `solved`.
///
/// (A plain function, not a closure: a closure is compiled without the
/// kernel's target features, so its intrinsics would become calls.)
#[inline(always)]
fn hand_over<S: Simd>(
    p: usize,
    r: usize,
    out: &[V],
    ratings: &RowRatings<'_>,
    solved: &mut Solved<'_, '_>,
) {
    let RowRatings {
        ptr,
        idx,
        values,
        other,
    } = *ratings;
    if !solved.trials.is_empty() {
        unpack_rows_body::<S>(out, p, r..r + 1, solved.trials);
    }
    if let Some(sums) = solved.row_sse.as_deref_mut() {
        let rg = ptr[r]..ptr[r + 1];
        let row = &out[r * p..(r + 1) * p];
        let sum =
            add_squared_residuals::<S>(p, row, &idx[rg.clone()], &values[rg], other, S::splat(0.0));
        S::store(sum, &mut sums[r]);
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn half_step_body<S: Simd>(
    p: usize,
    lambda: f64,
    ptr: &[usize],
    idx: &[u32],
    values: &[f32],
    other: &[V],
    out: &mut [V],
    block: usize,
    scratch: &mut Vec<V>,
    cursor: &mut Vec<usize>,
    solved: &mut Solved<'_, '_>,
) {
    if let Some(sums) = solved.row_sse.as_deref_mut() {
        sums.clear();
        sums.resize(out.len() / p, V::splat(0.0));
    }
    // The factor counts of the bundled scenarios get code compiled for their
    // p (the same operations in the same order as the general code).
    match p {
        5 => half_step_p::<S, 5>(
            lambda, ptr, idx, values, other, out, block, scratch, cursor, solved,
        ),
        10 => half_step_p::<S, 10>(
            lambda, ptr, idx, values, other, out, block, scratch, cursor, solved,
        ),
        20 => half_step_p::<S, 20>(
            lambda, ptr, idx, values, other, out, block, scratch, cursor, solved,
        ),
        _ => half_step_general::<S>(p, lambda, ptr, idx, values, other, out, scratch, solved),
    }
}

/// Bytes of lane data that stay comfortably in one core's L2 cache.
const L2_SHARE: usize = 256 << 10;

/// The `block` argument of [`half_step`] for `rows` rows reading
/// `other_rows` rows of the other side (p factors): 0 (row after row) unless
/// the other side is far larger than the cache and the normal equations of
/// all rows are small together (Jester's 100 jokes against 24,983 users);
/// then the other side is swept in blocks that stay in L2 while all rows'
/// sums advance. Every entry is still one sum over its ratings in order, so
/// the result is the same either way.
pub(crate) fn sweep_block(rows: usize, other_rows: usize, p: usize) -> usize {
    let v = std::mem::size_of::<V>();
    // Only the sizes compiled for a fixed p sweep in blocks.
    if matches!(p, 5 | 10 | 20)
        && rows * (p * p + p) * v <= 2 * L2_SHARE
        && other_rows * p * v > 4 * L2_SHARE
    {
        (L2_SHARE / (p * v)).max(1)
    } else {
        0
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn half_step_p<S: Simd, const P: usize>(
    lambda: f64,
    ptr: &[usize],
    idx: &[u32],
    values: &[f32],
    other: &[V],
    out: &mut [V],
    block: usize,
    scratch: &mut Vec<V>,
    cursor: &mut Vec<usize>,
    solved: &mut Solved<'_, '_>,
) {
    let rows = out.len() / P;
    let ratings = RowRatings {
        ptr,
        idx,
        values,
        other,
    };
    let other_rows = other.len() / P;
    let per = P * P + P;
    let zero = V::splat(0.0);
    if block > 0 {
        // Every row's system, then room for one dual-form solve.
        scratch.clear();
        scratch.resize(rows * per + per, zero);
        let (systems, dual) = scratch.split_at_mut(rows * per);
        cursor.clear();
        cursor.extend_from_slice(&ptr[..rows]);
        let mut start = 0;
        while start < other_rows {
            let end = (start + block).min(other_rows) as u32;
            for (i, sys) in systems.chunks_exact_mut(per).enumerate() {
                let lo = cursor[i];
                let hi = lo + idx[lo..ptr[i + 1]].partition_point(|&k| k < end);
                // Rows solved in the dual form keep a zero system here.
                if hi > lo && !super::single::uses_dual(ptr[i + 1] - ptr[i], P) {
                    let (g, b) = system::<P>(sys);
                    accumulate_p::<S, P>(&idx[lo..hi], &values[lo..hi], other, g, b, false);
                }
                cursor[i] = hi;
            }
            start = end as usize;
        }
        finish_all::<S, P>(lambda, systems, out, |n| n, &ratings, solved);
        for i in 0..rows {
            let rg = ptr[i]..ptr[i + 1];
            if super::single::uses_dual(rg.len(), P) {
                let o = &mut out[i * P..(i + 1) * P];
                solve_dual::<S>(P, lambda, &idx[rg.clone()], &values[rg], other, o, dual);
                hand_over::<S>(P, i, out, &ratings, solved);
            }
        }
    } else {
        // NB rows at a time: their normal equations, then their solves side
        // by side (each row's arithmetic as alone). Rows with fewer ratings
        // than factors are solved alone in the dual form.
        scratch.clear();
        scratch.resize(NB * per + per, zero);
        let (systems, dual) = scratch.split_at_mut(NB * per);
        let mut batch = [0usize; NB];
        let mut nb = 0;
        for i in 0..rows {
            let rg = ptr[i]..ptr[i + 1];
            if super::single::uses_dual(rg.len(), P) {
                let o = &mut out[i * P..(i + 1) * P];
                solve_dual::<S>(P, lambda, &idx[rg.clone()], &values[rg], other, o, dual);
                hand_over::<S>(P, i, out, &ratings, solved);
                continue;
            }
            let (g, b) = system::<P>(&mut systems[nb * per..(nb + 1) * per]);
            // `fresh`: the sums start from zero, whatever `g` and `b` hold.
            accumulate_p::<S, P>(&idx[rg.clone()], &values[rg], other, g, b, true);
            batch[nb] = i;
            nb += 1;
            if nb == NB {
                finish_all::<S, P>(lambda, systems, out, |n| batch[n], &ratings, solved);
                nb = 0;
            }
        }
        let systems = &mut systems[..nb * per];
        finish_all::<S, P>(lambda, systems, out, |n| batch[n], &ratings, solved);
    }
}

/// Adds λ to the diagonals of the systems in `sys` (laid out as by
/// [`system`]) and solves them, [`NB`] side by side while that many remain,
/// then one by one; system `n`'s solution goes to row `row_of(n)` of `out`
/// (`out[r·P..(r+1)·P]`), then to `solved` ([`hand_over`]).
#[inline(always)]
fn finish_all<S: Simd, const P: usize>(
    lambda: f64,
    sys: &mut [V],
    out: &mut [V],
    row_of: impl Fn(usize) -> usize,
    ratings: &RowRatings<'_>,
    solved: &mut Solved<'_, '_>,
) {
    let per = P * P + P;
    let lam = S::splat(lambda);
    for s in sys.chunks_exact_mut(per) {
        let (g, _) = system::<P>(s);
        for (d, row) in g.iter_mut().enumerate() {
            S::store(S::add(S::load(&row[d]), lam), &mut row[d]);
        }
    }
    let full = sys.len() / per / NB * NB;
    let (groups, rest) = sys.split_at_mut(full * per);
    for (k, group) in groups.chunks_exact_mut(NB * per).enumerate() {
        cholesky_solve_many::<S, P>(group);
        for (n, s) in group.chunks_exact(per).enumerate() {
            let r = row_of(k * NB + n);
            out[r * P..(r + 1) * P].copy_from_slice(&s[P * P..]);
            hand_over::<S>(P, r, out, ratings, solved);
        }
    }
    for (n, s) in rest.chunks_exact_mut(per).enumerate() {
        let (g, b) = system::<P>(s);
        cholesky_solve_p::<S, P>(g, b);
        let r = row_of(full + n);
        out[r * P..(r + 1) * P].copy_from_slice(b);
        hand_over::<S>(P, r, out, ratings, solved);
    }
}

/// One row's solve in the dual form, lane by lane exactly as
/// [`super::single`]'s `solve_dual` (n < p ratings: `Xᵀ (XXᵀ + λI)⁻¹ a`),
/// into `out` (p entries); `scratch` holds at least n² + n entries.
#[inline(always)]
fn solve_dual<S: Simd>(
    p: usize,
    lambda: f64,
    idx: &[u32],
    values: &[f32],
    other: &[V],
    out: &mut [V],
    scratch: &mut [V],
) {
    let n = idx.len();
    let (gram, rest) = scratch.split_at_mut(n * n);
    let rhs = &mut rest[..n];
    let x = |a: usize| &other[idx[a] as usize * p..(idx[a] as usize + 1) * p];
    for a in 0..n {
        let xa = x(a);
        // Up to four entries of the row at a time: independent chains.
        let mut b = a;
        while b < n {
            let count = (n - b).min(4);
            let acc = match count {
                4 => dual_dots::<S, 4>(p, xa, b, &x),
                3 => pad::<S, 3>(dual_dots::<S, 3>(p, xa, b, &x)),
                2 => pad::<S, 2>(dual_dots::<S, 2>(p, xa, b, &x)),
                _ => pad::<S, 1>(dual_dots::<S, 1>(p, xa, b, &x)),
            };
            for (c, mut acc) in acc.into_iter().take(count).enumerate() {
                if b + c == a {
                    acc = S::add(acc, S::splat(lambda));
                }
                S::store(acc, &mut gram[a * n + b + c]);
            }
            b += count;
        }
        S::store(S::splat(values[a] as f64), &mut rhs[a]);
    }
    cholesky_solve::<S>(n, gram, rhs);
    // out_s = Σ_a z_a x_as, each a chain from −0 in a order; the rows of
    // X are taken one at a time, the p chains kept in `out`.
    for o in out.iter_mut() {
        *o = V::splat(-0.0);
    }
    for (a, z) in rhs.iter().enumerate() {
        let (z, xa) = (S::load(z), x(a));
        for (o, xas) in out.iter_mut().zip(xa) {
            S::store(S::fma(z, S::load(xas), S::load(o)), o);
        }
    }
}

/// The dot products of `xa` with rows `b..b + C` of the dual system (each
/// a chain over the factors from −0), side by side.
#[inline(always)]
fn dual_dots<'a, S: Simd, const C: usize>(
    p: usize,
    xa: &[V],
    b: usize,
    x: &impl Fn(usize) -> &'a [V],
) -> [S::R; C] {
    let mut xb: [&[V]; C] = [&[]; C];
    for (c, r) in xb.iter_mut().enumerate() {
        *r = x(b + c);
    }
    let mut acc = [S::splat(-0.0); C];
    for s in 0..p {
        let xs = S::load(&xa[s]);
        for c in 0..C {
            acc[c] = S::fma(xs, S::load(&xb[c][s]), acc[c]);
        }
    }
    acc
}

/// `acc` in the first entries of four (the rest −0).
#[inline(always)]
fn pad<S: Simd, const C: usize>(acc: [S::R; C]) -> [S::R; 4] {
    let mut out = [S::splat(-0.0); 4];
    out[..C].copy_from_slice(&acc);
    out
}

/// One row's normal equations in a scratch slice of `P² + P` entries: the
/// p×p matrix (row-major) and the right-hand side.
#[inline(always)]
fn system<const P: usize>(sys: &mut [V]) -> (&mut [[V; P]; P], &mut [V; P]) {
    let (g, b) = sys[..P * P + P].split_at_mut(P * P);
    let g: &mut [[V; P]; P] = g
        .as_chunks_mut::<P>()
        .0
        .try_into()
        .expect("P rows of P entries");
    (g, b.try_into().expect("P entries"))
}

/// [`half_step_p`] for a p known only at run time (the same operations in
/// the same order; slower).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn half_step_general<S: Simd>(
    p: usize,
    lambda: f64,
    ptr: &[usize],
    idx: &[u32],
    values: &[f32],
    other: &[V],
    out: &mut [V],
    scratch: &mut Vec<V>,
    solved: &mut Solved<'_, '_>,
) {
    scratch.clear();
    scratch.resize(p * p + p, V::splat(0.0));
    let (gram, rhs) = scratch.split_at_mut(p * p);
    let lam = S::splat(lambda);
    let ratings = RowRatings {
        ptr,
        idx,
        values,
        other,
    };
    for i in 0..out.len() / p {
        let row_out = &mut out[i * p..(i + 1) * p];
        let rg = ptr[i]..ptr[i + 1];
        let (idx, values) = (&idx[rg.clone()], &values[rg]);
        if super::single::uses_dual(idx.len(), p) {
            // n² + n < p² entries: the Gram scratch holds the dual system.
            solve_dual::<S>(p, lambda, idx, values, other, row_out, gram);
            hand_over::<S>(p, i, out, &ratings, solved);
            continue;
        }
        for s in 0..p {
            for t in s..p {
                gram[s * p + t] = V::splat(0.0);
            }
            rhs[s] = V::splat(0.0);
        }
        for (idx, values) in idx.chunks(CHUNK).zip(values.chunks(CHUNK)) {
            let mut rows: [&[V]; CHUNK] = [&[]; CHUNK];
            for (r, &k) in rows.iter_mut().zip(idx) {
                *r = &other[k as usize * p..(k as usize + 1) * p];
            }
            let rows = &rows[..idx.len()];
            let mut s0 = 0;
            while s0 < p {
                let rs = tile_len::<S>().min(p - s0);
                let mut t0 = s0;
                while t0 < p {
                    let cs = tile_len::<S>().min(p - t0);
                    tile_dispatch::<S, _>(rs, cs, t0 == s0, rows, p, s0, t0, gram, false);
                    t0 += cs;
                }
                s0 += rs;
            }
            rhs_blocks::<S, _>(rows, values, p, rhs, false);
        }
        for s in 0..p {
            let d = &mut gram[s * p + s];
            S::store(S::add(S::load(d), lam), d);
        }
        cholesky_solve::<S>(p, gram, rhs);
        row_out.copy_from_slice(rhs);
        hand_over::<S>(p, i, out, &ratings, solved);
    }
}

lane_kernel! {
    /// Σ_{(i,j)∈Ω} (A_ij − l_i·r_j)² per lane, summed row by row of `l` in
    /// index order exactly as [`super::single::squared_error`] sums one
    /// trial (either side can be `l`: the ratings by row of that side).
    pub fn squared_error, squared_error_at(
        p: usize,
        ptr: &[usize],
        idx: &[u32],
        values: &[f32],
        l: &[V],
        r: &[V],
    ) -> V = squared_error_body;
}

#[inline(always)]
fn squared_error_body<S: Simd>(
    p: usize,
    ptr: &[usize],
    idx: &[u32],
    values: &[f32],
    l: &[V],
    r: &[V],
) -> V {
    match p {
        5 => squared_error_p::<S, 5>(ptr, idx, values, l, r),
        10 => squared_error_p::<S, 10>(ptr, idx, values, l, r),
        20 => squared_error_p::<S, 20>(ptr, idx, values, l, r),
        _ => squared_error_general::<S>(p, ptr, idx, values, l, r),
    }
}

#[inline(always)]
fn squared_error_p<S: Simd, const P: usize>(
    ptr: &[usize],
    idx: &[u32],
    values: &[f32],
    l: &[V],
    r: &[V],
) -> V {
    squared_error_general::<S>(P, ptr, idx, values, l, r)
}

#[inline(always)]
fn squared_error_general<S: Simd>(
    p: usize,
    ptr: &[usize],
    idx: &[u32],
    values: &[f32],
    l: &[V],
    r: &[V],
) -> V {
    let mut total = S::splat(0.0);
    for (i, li) in l.chunks_exact(p).enumerate() {
        let rg = ptr[i]..ptr[i + 1];
        let user =
            add_squared_residuals::<S>(p, li, &idx[rg.clone()], &values[rg], r, S::splat(0.0));
        total = S::add(total, user);
    }
    let mut out = V::splat(0.0);
    S::store(total, &mut out);
    out
}

/// `user` plus `(a − l·r_j)²` for the ratings `idx`/`values` in order
/// (`li`: the row's factors), each dot product a chain over the factors
/// from −0 as [`super::single::dot`] forms it.
#[inline(always)]
fn add_squared_residuals<S: Simd>(
    p: usize,
    li: &[V],
    idx: &[u32],
    values: &[f32],
    r: &[V],
    mut user: S::R,
) -> S::R {
    // Eight ratings' dot products side by side (independent chains), then
    // what remains four, two and one at a time (most MovieLens movies have
    // only a few ratings); their squared residuals are added in order.
    let mut at = 0;
    while idx.len() - at >= 8 {
        user = add_group::<S, 8>(p, li, &idx[at..at + 8], &values[at..at + 8], r, user);
        at += 8;
    }
    if idx.len() - at >= 4 {
        user = add_group::<S, 4>(p, li, &idx[at..at + 4], &values[at..at + 4], r, user);
        at += 4;
    }
    if idx.len() - at >= 2 {
        user = add_group::<S, 2>(p, li, &idx[at..at + 2], &values[at..at + 2], r, user);
        at += 2;
    }
    if at < idx.len() {
        user = add_group::<S, 1>(p, li, &idx[at..], &values[at..], r, user);
    }
    user
}

/// [`add_squared_residuals`] for exactly `Q` ratings.
#[inline(always)]
fn add_group<S: Simd, const Q: usize>(
    p: usize,
    li: &[V],
    idx: &[u32],
    values: &[f32],
    r: &[V],
    mut user: S::R,
) -> S::R {
    let rows: [&[V]; Q] = std::array::from_fn(|q| {
        let k = idx[q] as usize;
        &r[k * p..(k + 1) * p]
    });
    let mut dots = [S::splat(-0.0); Q];
    for t in 0..p {
        let lt = S::load(&li[t]);
        for q in 0..Q {
            dots[q] = S::fma(lt, S::load(&rows[q][t]), dots[q]);
        }
    }
    for q in 0..Q {
        let d = S::sub(S::splat(values[q] as f64), dots[q]);
        user = S::fma(d, d, user);
    }
    user
}
