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
pub const W: usize = 8;

/// One value for each of the [`W`] trials of a group, as stored in a lane
/// buffer (aligned to a cache line, so a vector load never splits one).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(64))]
pub struct V(pub [f64; W]);

impl V {
    /// Every lane `x`.
    pub const fn splat(x: f64) -> V {
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

/// Ratings summed per pass over a row's Gram tiles: the factors they point
/// at (`CHUNK · p` lane vectors) stay in L1 while every tile reads them.
const CHUNK: usize = 16;

/// Gram tiles are `TILE × TILE` blocks of the upper triangle.
const TILE: usize = 4;

/// The operations on a register holding one [`V`], at one kernel level.
/// Every implementation computes each lane with the correctly rounded IEEE
/// operation of the scalar code, so all levels give the same bits.
pub trait Simd {
    /// The register type.
    type R: Copy;
    /// Every lane `x`.
    fn splat(x: f64) -> Self::R;
    /// Loads a lane vector.
    fn load(v: &V) -> Self::R;
    /// Stores a lane vector.
    fn store(r: Self::R, v: &mut V);
    /// `a + b` per lane.
    fn add(a: Self::R, b: Self::R) -> Self::R;
    /// `a − b` per lane.
    fn sub(a: Self::R, b: Self::R) -> Self::R;
    /// `a · b` per lane.
    fn mul(a: Self::R, b: Self::R) -> Self::R;
    /// `a / b` per lane.
    fn div(a: Self::R, b: Self::R) -> Self::R;
    /// `a · b + c` per lane, rounded once (`f64::mul_add`).
    fn fma(a: Self::R, b: Self::R, c: Self::R) -> Self::R;
    /// `c − a · b` per lane, rounded once (`(-a).mul_add(b, c)`).
    fn fnma(a: Self::R, b: Self::R, c: Self::R) -> Self::R;
    /// `sqrt(max(x, MIN_POSITIVE))` per lane (`f64::max`: a NaN gives
    /// MIN_POSITIVE): the Cholesky pivot of [`super::single::cholesky_solve_upper`].
    fn pivot(x: Self::R) -> Self::R;
    /// Asks for `v`'s cache line ahead of its use (no effect on results).
    fn prefetch(v: &V);
}

/// Plain Rust, one lane after the other.
pub struct Portable;

impl Simd for Portable {
    type R = [f64; W];
    #[inline(always)]
    fn splat(x: f64) -> [f64; W] {
        [x; W]
    }
    #[inline(always)]
    fn load(v: &V) -> [f64; W] {
        v.0
    }
    #[inline(always)]
    fn store(r: [f64; W], v: &mut V) {
        v.0 = r;
    }
    #[inline(always)]
    fn add(a: [f64; W], b: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l] + b[l])
    }
    #[inline(always)]
    fn sub(a: [f64; W], b: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l] - b[l])
    }
    #[inline(always)]
    fn mul(a: [f64; W], b: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l] * b[l])
    }
    #[inline(always)]
    fn div(a: [f64; W], b: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l] / b[l])
    }
    #[inline(always)]
    fn fma(a: [f64; W], b: [f64; W], c: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l].mul_add(b[l], c[l]))
    }
    #[inline(always)]
    fn fnma(a: [f64; W], b: [f64; W], c: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| (-a[l]).mul_add(b[l], c[l]))
    }
    #[inline(always)]
    fn pivot(x: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| x[l].max(f64::MIN_POSITIVE).sqrt())
    }
    #[inline(always)]
    fn prefetch(_: &V) {}
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The vector levels. Their methods are only ever inlined into the
    //! `#[target_feature]` entry points of [`lane_kernel!`], which run only
    //! where [`crate::simd::detected`] found the features.
    use std::arch::x86_64::*;

    use super::{Simd, V, W};

    /// AVX-512: one register per lane vector.
    pub struct Avx512;

    impl Simd for Avx512 {
        type R = __m512d;
        #[inline(always)]
        fn splat(x: f64) -> __m512d {
            // SAFETY: only reached from AVX-512 code (see the module doc).
            unsafe { _mm512_set1_pd(x) }
        }
        #[inline(always)]
        fn load(v: &V) -> __m512d {
            // SAFETY: as above; `V` is 64 aligned and holds 8 f64.
            unsafe { _mm512_load_pd(v.0.as_ptr()) }
        }
        #[inline(always)]
        fn store(r: __m512d, v: &mut V) {
            // SAFETY: as above.
            unsafe { _mm512_store_pd(v.0.as_mut_ptr(), r) }
        }
        #[inline(always)]
        fn add(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_add_pd(a, b) }
        }
        #[inline(always)]
        fn sub(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_sub_pd(a, b) }
        }
        #[inline(always)]
        fn mul(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_mul_pd(a, b) }
        }
        #[inline(always)]
        fn div(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_div_pd(a, b) }
        }
        #[inline(always)]
        fn fma(a: __m512d, b: __m512d, c: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_fmadd_pd(a, b, c) }
        }
        #[inline(always)]
        fn fnma(a: __m512d, b: __m512d, c: __m512d) -> __m512d {
            // −(a·b) + c rounded once: the same as (−a)·b + c.
            // SAFETY: as above.
            unsafe { _mm512_fnmadd_pd(a, b, c) }
        }
        #[inline(always)]
        fn pivot(x: __m512d) -> __m512d {
            // `max_pd(x, m)` returns m when x is NaN, as `f64::max` does.
            // SAFETY: as above.
            unsafe { _mm512_sqrt_pd(_mm512_max_pd(x, _mm512_set1_pd(f64::MIN_POSITIVE))) }
        }
        #[inline(always)]
        fn prefetch(v: &V) {
            // SAFETY: a prefetch never faults; SSE is part of x86-64.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(v.0.as_ptr().cast()) }
        }
    }

    /// AVX2: two registers per lane vector.
    pub struct Avx2;

    const H: usize = W / 2;

    impl Simd for Avx2 {
        type R = [__m256d; 2];
        #[inline(always)]
        fn splat(x: f64) -> [__m256d; 2] {
            // SAFETY: only reached from AVX2 code (see the module doc).
            unsafe { [_mm256_set1_pd(x); 2] }
        }
        #[inline(always)]
        fn load(v: &V) -> [__m256d; 2] {
            // SAFETY: as above; `V` is 64 aligned and holds 8 f64.
            unsafe {
                [
                    _mm256_load_pd(v.0.as_ptr()),
                    _mm256_load_pd(v.0.as_ptr().add(H)),
                ]
            }
        }
        #[inline(always)]
        fn store(r: [__m256d; 2], v: &mut V) {
            // SAFETY: as above.
            unsafe {
                _mm256_store_pd(v.0.as_mut_ptr(), r[0]);
                _mm256_store_pd(v.0.as_mut_ptr().add(H), r[1]);
            }
        }
        #[inline(always)]
        fn add(a: [__m256d; 2], b: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe { [_mm256_add_pd(a[0], b[0]), _mm256_add_pd(a[1], b[1])] }
        }
        #[inline(always)]
        fn sub(a: [__m256d; 2], b: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe { [_mm256_sub_pd(a[0], b[0]), _mm256_sub_pd(a[1], b[1])] }
        }
        #[inline(always)]
        fn mul(a: [__m256d; 2], b: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe { [_mm256_mul_pd(a[0], b[0]), _mm256_mul_pd(a[1], b[1])] }
        }
        #[inline(always)]
        fn div(a: [__m256d; 2], b: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe { [_mm256_div_pd(a[0], b[0]), _mm256_div_pd(a[1], b[1])] }
        }
        #[inline(always)]
        fn fma(a: [__m256d; 2], b: [__m256d; 2], c: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above (FMA is enabled with AVX2).
            unsafe {
                [
                    _mm256_fmadd_pd(a[0], b[0], c[0]),
                    _mm256_fmadd_pd(a[1], b[1], c[1]),
                ]
            }
        }
        #[inline(always)]
        fn fnma(a: [__m256d; 2], b: [__m256d; 2], c: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe {
                [
                    _mm256_fnmadd_pd(a[0], b[0], c[0]),
                    _mm256_fnmadd_pd(a[1], b[1], c[1]),
                ]
            }
        }
        #[inline(always)]
        fn pivot(x: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe {
                let m = _mm256_set1_pd(f64::MIN_POSITIVE);
                [
                    _mm256_sqrt_pd(_mm256_max_pd(x[0], m)),
                    _mm256_sqrt_pd(_mm256_max_pd(x[1], m)),
                ]
            }
        }
        #[inline(always)]
        fn prefetch(v: &V) {
            // SAFETY: a prefetch never faults; SSE is part of x86-64.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(v.0.as_ptr().cast()) }
        }
    }
}

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
        pub fn $name($($a: $t),*) $(-> $r)? {
            $at($crate::simd::level(), $($a),*)
        }

        /// The same kernel at an explicit [`Level`](crate::simd::Level), capped
        /// at what the CPU supports.
        #[allow(clippy::too_many_arguments)]
        pub fn $at(level: $crate::simd::Level, $($a: $t),*) $(-> $r)? {
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
pub fn zeros(len: usize) -> Vec<V> {
    vec![V::splat(0.0); len]
}

/// Interleaves `srcs` (one trial's factor matrix each, all of the same
/// length) into `dst`: `dst[k][l] = srcs[l][k]`; lanes past `srcs.len()`
/// become zero.
pub fn pack(dst: &mut [V], srcs: &[&[f64]]) {
    debug_assert!(srcs.len() <= W);
    const BLOCK: usize = 256;
    for (b, out) in dst.chunks_mut(BLOCK).enumerate() {
        let base = b * BLOCK;
        if srcs.len() < W {
            for v in out.iter_mut() {
                *v = V::splat(0.0);
            }
        }
        for (l, src) in srcs.iter().enumerate() {
            let src = &src[base..base + out.len()];
            for (v, &x) in out.iter_mut().zip(src) {
                v.0[l] = x;
            }
        }
    }
}

/// The inverse of [`pack`] for rows `rows` (of `p` entries each): lane `l` of
/// `src` into `dsts[l]`.
pub fn unpack_rows(src: &[V], p: usize, rows: std::ops::Range<usize>, dsts: &mut [&mut [f64]]) {
    const BLOCK: usize = 256;
    let (lo, hi) = (rows.start * p, rows.end * p);
    let mut base = lo;
    while base < hi {
        let end = (base + BLOCK).min(hi);
        let src = &src[base..end];
        for (l, dst) in dsts.iter_mut().enumerate() {
            for (x, v) in dst[base..end].iter_mut().zip(src) {
                *x = v.0[l];
            }
        }
        base = end;
    }
}

lane_kernel! {
    /// The ALS half-step for every row of one side and every lane: row `i`
    /// (ratings `ptr[i]..ptr[i+1]` of `idx`/`values`, pointing at rows of
    /// `other`) gets `out[i·p..(i+1)·p] ← (Σ x xᵀ + λI)⁻¹ Σ a x` (SCAR §5.1),
    /// lane by lane exactly as [`super::single::half_step`] computes it.
    /// With `block` > 0 the other side is swept `block` rows at a time for
    /// all rows at once (see [`sweep_block`]; the same result). `scratch`
    /// and `cursor` are reused buffers.
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
    ) = half_step_body;
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
) {
    // The factor counts of the bundled scenarios get code compiled for their
    // p (the same operations in the same order as the general code).
    match p {
        5 => half_step_p::<S, 5>(lambda, ptr, idx, values, other, out, block, scratch, cursor),
        10 => half_step_p::<S, 10>(lambda, ptr, idx, values, other, out, block, scratch, cursor),
        20 => half_step_p::<S, 20>(lambda, ptr, idx, values, other, out, block, scratch, cursor),
        _ => half_step_general::<S>(p, lambda, ptr, idx, values, other, out, scratch),
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
pub fn sweep_block(rows: usize, other_rows: usize, p: usize) -> usize {
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
) {
    let rows = out.len() / P;
    let other_rows = other.len() / P;
    let per = P * P + P;
    let zero = V::splat(0.0);
    if block > 0 {
        scratch.clear();
        scratch.resize(rows * per, zero);
        cursor.clear();
        cursor.extend_from_slice(&ptr[..rows]);
        let mut start = 0;
        while start < other_rows {
            let end = (start + block).min(other_rows) as u32;
            for (i, sys) in scratch.chunks_exact_mut(per).enumerate() {
                let lo = cursor[i];
                let hi = lo + idx[lo..ptr[i + 1]].partition_point(|&k| k < end);
                if hi > lo {
                    let (g, b) = system::<P>(sys);
                    accumulate_p::<S, P>(&idx[lo..hi], &values[lo..hi], other, g, b);
                }
                cursor[i] = hi;
            }
            start = end as usize;
        }
        for (sys, row_out) in scratch.chunks_exact_mut(per).zip(out.chunks_exact_mut(P)) {
            let (g, b) = system::<P>(sys);
            finish_p::<S, P>(lambda, g, b);
            row_out.copy_from_slice(b);
        }
    } else {
        scratch.clear();
        scratch.resize(per, zero);
        let (g, b) = system::<P>(scratch);
        for (i, row_out) in out.chunks_exact_mut(P).enumerate() {
            let rg = ptr[i]..ptr[i + 1];
            for (s, row) in g.iter_mut().enumerate() {
                for v in &mut row[s..] {
                    *v = zero;
                }
            }
            *b = [zero; P];
            accumulate_p::<S, P>(&idx[rg.clone()], &values[rg], other, g, b);
            finish_p::<S, P>(lambda, g, b);
            row_out.copy_from_slice(b);
        }
    }
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

/// Adds λ to the diagonal and solves: `b` becomes the row's new factors.
#[inline(always)]
fn finish_p<S: Simd, const P: usize>(lambda: f64, g: &mut [[V; P]; P], b: &mut [V; P]) {
    let lam = S::splat(lambda);
    for (s, row) in g.iter_mut().enumerate() {
        S::store(S::add(S::load(&row[s]), lam), &mut row[s]);
    }
    cholesky_solve_p::<S, P>(g, b);
}

/// Adds the ratings `idx`/`values` to the upper triangle of `g` (Σ x xᵀ)
/// and to `b` (Σ a x), each entry in rating order.
#[inline(always)]
fn accumulate_p<S: Simd, const P: usize>(
    idx: &[u32],
    values: &[f32],
    other: &[V],
    g: &mut [[V; P]; P],
    b: &mut [V; P],
) {
    if P <= 5 {
        // Every accumulator fits in registers: one pass over the ratings.
        let mut acc: [[S::R; P]; P] = std::array::from_fn(|s| {
            std::array::from_fn(|t| {
                if t >= s {
                    S::load(&g[s][t])
                } else {
                    S::splat(0.0)
                }
            })
        });
        let mut rb: [S::R; P] = std::array::from_fn(|s| S::load(&b[s]));
        for (&k, &a) in idx.iter().zip(values) {
            let x: &[V; P] = other[k as usize * P..(k as usize + 1) * P]
                .try_into()
                .expect("P entries");
            let x: [S::R; P] = std::array::from_fn(|s| S::load(&x[s]));
            let a = S::splat(a as f64);
            for s in 0..P {
                rb[s] = S::fma(a, x[s], rb[s]);
                for t in s..P {
                    acc[s][t] = S::fma(x[s], x[t], acc[s][t]);
                }
            }
        }
        for s in 0..P {
            for t in s..P {
                S::store(acc[s][t], &mut g[s][t]);
            }
            S::store(rb[s], &mut b[s]);
        }
        return;
    }
    let g = g.as_flattened_mut();
    let mut chunks = idx.chunks(CHUNK).zip(values.chunks(CHUNK)).peekable();
    while let Some((idx, values)) = chunks.next() {
        // The rows of the next chunk are fetched while this one is summed.
        if let Some((next, _)) = chunks.peek() {
            for &k in *next {
                for v in &other[k as usize * P..(k as usize + 1) * P] {
                    S::prefetch(v);
                }
            }
        }
        let mut s0 = 0;
        while s0 < P {
            let rs = TILE.min(P - s0);
            let mut t0 = s0;
            while t0 < P {
                let cs = TILE.min(P - t0);
                tile_dispatch::<S>(rs, cs, t0 == s0, idx, other, P, s0, t0, g);
                t0 += cs;
            }
            s0 += rs;
        }
        rhs_blocks::<S>(idx, values, other, P, b);
    }
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
) {
    scratch.clear();
    scratch.resize(p * p + p, V::splat(0.0));
    let (gram, rhs) = scratch.split_at_mut(p * p);
    let lam = S::splat(lambda);
    for (i, row_out) in out.chunks_exact_mut(p).enumerate() {
        let rg = ptr[i]..ptr[i + 1];
        let (idx, values) = (&idx[rg.clone()], &values[rg]);
        for s in 0..p {
            for t in s..p {
                gram[s * p + t] = V::splat(0.0);
            }
            rhs[s] = V::splat(0.0);
        }
        for (idx, values) in idx.chunks(CHUNK).zip(values.chunks(CHUNK)) {
            let mut s0 = 0;
            while s0 < p {
                let rs = TILE.min(p - s0);
                let mut t0 = s0;
                while t0 < p {
                    let cs = TILE.min(p - t0);
                    tile_dispatch::<S>(rs, cs, t0 == s0, idx, other, p, s0, t0, gram);
                    t0 += cs;
                }
                s0 += rs;
            }
            rhs_blocks::<S>(idx, values, other, p, rhs);
        }
        for s in 0..p {
            let d = &mut gram[s * p + s];
            S::store(S::add(S::load(d), lam), d);
        }
        cholesky_solve::<S>(p, gram, rhs);
        row_out.copy_from_slice(rhs);
    }
}

/// Adds `Σ_k a_k x_k` over the ratings to `rhs`, eight entries at a time.
#[inline(always)]
fn rhs_blocks<S: Simd>(idx: &[u32], values: &[f32], other: &[V], p: usize, rhs: &mut [V]) {
    let mut s0 = 0;
    while s0 < p {
        let cs = 8.min(p - s0);
        match cs {
            8 => rhs_block::<S, 8>(idx, values, other, p, s0, rhs),
            7 => rhs_block::<S, 7>(idx, values, other, p, s0, rhs),
            6 => rhs_block::<S, 6>(idx, values, other, p, s0, rhs),
            5 => rhs_block::<S, 5>(idx, values, other, p, s0, rhs),
            4 => rhs_block::<S, 4>(idx, values, other, p, s0, rhs),
            3 => rhs_block::<S, 3>(idx, values, other, p, s0, rhs),
            2 => rhs_block::<S, 2>(idx, values, other, p, s0, rhs),
            _ => rhs_block::<S, 1>(idx, values, other, p, s0, rhs),
        }
        s0 += cs;
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn tile_dispatch<S: Simd>(
    rs: usize,
    cs: usize,
    diag: bool,
    idx: &[u32],
    other: &[V],
    p: usize,
    s0: usize,
    t0: usize,
    gram: &mut [V],
) {
    macro_rules! go {
        ($r:literal, $c:literal) => {
            if diag {
                tile::<S, $r, $c, true>(idx, other, p, s0, t0, gram)
            } else {
                tile::<S, $r, $c, false>(idx, other, p, s0, t0, gram)
            }
        };
    }
    match (rs, cs) {
        (4, 4) => go!(4, 4),
        (4, 3) => go!(4, 3),
        (4, 2) => go!(4, 2),
        (4, 1) => go!(4, 1),
        (3, 4) => go!(3, 4),
        (3, 3) => go!(3, 3),
        (3, 2) => go!(3, 2),
        (3, 1) => go!(3, 1),
        (2, 4) => go!(2, 4),
        (2, 3) => go!(2, 3),
        (2, 2) => go!(2, 2),
        (2, 1) => go!(2, 1),
        (1, 4) => go!(1, 4),
        (1, 3) => go!(1, 3),
        (1, 2) => go!(1, 2),
        _ => go!(1, 1),
    }
}

/// Adds `Σ_k x_k[s0+a] · x_k[t0+b]` over the ratings `idx` to the tile of
/// `gram` at rows `s0..s0+RS`, columns `t0..t0+CS` (on a diagonal tile only
/// the entries with `t ≥ s`).
#[inline(always)]
fn tile<S: Simd, const RS: usize, const CS: usize, const DIAG: bool>(
    idx: &[u32],
    other: &[V],
    p: usize,
    s0: usize,
    t0: usize,
    gram: &mut [V],
) {
    let mut acc = [[S::splat(0.0); CS]; RS];
    for (a, row) in acc.iter_mut().enumerate() {
        for (b, v) in row.iter_mut().enumerate() {
            if !DIAG || b >= a {
                *v = S::load(&gram[(s0 + a) * p + t0 + b]);
            }
        }
    }
    for &k in idx {
        let x = &other[k as usize * p..(k as usize + 1) * p];
        let xs: &[V; RS] = x[s0..s0 + RS].try_into().expect("RS entries");
        let xt: &[V; CS] = x[t0..t0 + CS].try_into().expect("CS entries");
        let xs: [S::R; RS] = std::array::from_fn(|a| S::load(&xs[a]));
        let xt: [S::R; CS] = std::array::from_fn(|b| S::load(&xt[b]));
        for a in 0..RS {
            for b in 0..CS {
                if !DIAG || b >= a {
                    acc[a][b] = S::fma(xs[a], xt[b], acc[a][b]);
                }
            }
        }
    }
    for (a, row) in acc.iter().enumerate() {
        for (b, v) in row.iter().enumerate() {
            if !DIAG || b >= a {
                S::store(*v, &mut gram[(s0 + a) * p + t0 + b]);
            }
        }
    }
}

/// Adds `Σ_k a_k x_k[s0+c]` over the ratings to `rhs[s0..s0+CS]`.
#[inline(always)]
fn rhs_block<S: Simd, const CS: usize>(
    idx: &[u32],
    values: &[f32],
    other: &[V],
    p: usize,
    s0: usize,
    rhs: &mut [V],
) {
    let rhs: &mut [V; CS] = (&mut rhs[s0..s0 + CS]).try_into().expect("CS entries");
    let mut acc: [S::R; CS] = std::array::from_fn(|c| S::load(&rhs[c]));
    for (&k, &a) in idx.iter().zip(values) {
        let x = &other[k as usize * p..(k as usize + 1) * p];
        let xs: &[V; CS] = x[s0..s0 + CS].try_into().expect("CS entries");
        let a = S::splat(a as f64);
        for c in 0..CS {
            acc[c] = S::fma(a, S::load(&xs[c]), acc[c]);
        }
    }
    for c in 0..CS {
        S::store(acc[c], &mut rhs[c]);
    }
}

/// Solves `g · x = b` lane by lane (`g` symmetric positive definite, its
/// upper triangle used); `b` becomes x and the upper triangle of `g` the
/// Cholesky factor U (A = UᵀU). U is computed row by row, each entry
/// accumulated in registers: entry (j, c) is `A_jc − U_0j·U_0c − U_1j·U_1c −
/// …` in that order, then scaled by 1 / U_jj — exactly the sequence of
/// updates the right-looking scalar factorization
/// ([`super::single::cholesky_solve_upper`]) applies to it, so the bits are
/// the same.
#[inline(always)]
fn cholesky_solve_p<S: Simd, const P: usize>(g: &mut [[V; P]; P], b: &mut [V; P]) {
    for j in 0..P {
        let mut inv = S::splat(0.0);
        let mut c0 = j;
        while c0 < P {
            let cs = 8.min(P - c0);
            inv = match cs {
                8 => chol_block_p::<S, P, 8>(g, j, c0, inv),
                7 => chol_block_p::<S, P, 7>(g, j, c0, inv),
                6 => chol_block_p::<S, P, 6>(g, j, c0, inv),
                5 => chol_block_p::<S, P, 5>(g, j, c0, inv),
                4 => chol_block_p::<S, P, 4>(g, j, c0, inv),
                3 => chol_block_p::<S, P, 3>(g, j, c0, inv),
                2 => chol_block_p::<S, P, 2>(g, j, c0, inv),
                _ => chol_block_p::<S, P, 1>(g, j, c0, inv),
            };
            c0 += cs;
        }
    }
    let mut x: [S::R; P] = std::array::from_fn(|s| S::load(&b[s]));
    // Uᵀ y = b: y_j = b_j / U_jj, then b_i −= U_ji · y_j for i > j.
    for j in 0..P {
        let y = S::div(x[j], S::load(&g[j][j]));
        x[j] = y;
        for i in j + 1..P {
            x[i] = S::fnma(S::load(&g[j][i]), y, x[i]);
        }
    }
    // U x = y: x_j = (y_j − Σ_{t>j} U_jt x_t) / U_jj, the sum from −0 in t order.
    for j in (0..P).rev() {
        let mut s = S::splat(-0.0);
        for t in j + 1..P {
            s = S::fma(S::load(&g[j][t]), x[t], s);
        }
        x[j] = S::div(S::sub(x[j], s), S::load(&g[j][j]));
    }
    for s in 0..P {
        S::store(x[s], &mut b[s]);
    }
}

/// Row j of U, columns `c0..c0+CS`. The block with c0 = j holds the pivot
/// and returns 1 / U_jj; later blocks scale by `inv` and return it.
#[inline(always)]
fn chol_block_p<S: Simd, const P: usize, const CS: usize>(
    g: &mut [[V; P]; P],
    j: usize,
    c0: usize,
    inv: S::R,
) -> S::R {
    let row: &[V; CS] = g[j][c0..c0 + CS].try_into().expect("CS entries");
    let mut t: [S::R; CS] = std::array::from_fn(|c| S::load(&row[c]));
    for gk in &g[..j] {
        let f = S::load(&gk[j]);
        let u: &[V; CS] = gk[c0..c0 + CS].try_into().expect("CS entries");
        for c in 0..CS {
            t[c] = S::fnma(f, S::load(&u[c]), t[c]);
        }
    }
    let inv = if c0 == j {
        let d = S::pivot(t[0]);
        t[0] = d;
        let inv = S::div(S::splat(1.0), d);
        for v in t.iter_mut().skip(1) {
            *v = S::mul(*v, inv);
        }
        inv
    } else {
        for v in t.iter_mut() {
            *v = S::mul(*v, inv);
        }
        inv
    };
    let row: &mut [V; CS] = (&mut g[j][c0..c0 + CS]).try_into().expect("CS entries");
    for c in 0..CS {
        S::store(t[c], &mut row[c]);
    }
    inv
}

/// [`cholesky_solve_p`] for a p known only at run time.
#[inline(always)]
fn cholesky_solve<S: Simd>(p: usize, gram: &mut [V], rhs: &mut [V]) {
    for j in 0..p {
        let mut inv = S::splat(0.0);
        for c in j..p {
            let mut t = S::load(&gram[j * p + c]);
            for k in 0..j {
                t = S::fnma(S::load(&gram[k * p + j]), S::load(&gram[k * p + c]), t);
            }
            if c == j {
                t = S::pivot(t);
                inv = S::div(S::splat(1.0), t);
            } else {
                t = S::mul(t, inv);
            }
            S::store(t, &mut gram[j * p + c]);
        }
    }
    for j in 0..p {
        let y = S::div(S::load(&rhs[j]), S::load(&gram[j * p + j]));
        S::store(y, &mut rhs[j]);
        for i in j + 1..p {
            let b = S::fnma(S::load(&gram[j * p + i]), y, S::load(&rhs[i]));
            S::store(b, &mut rhs[i]);
        }
    }
    for j in (0..p).rev() {
        let mut s = S::splat(-0.0);
        for t in j + 1..p {
            s = S::fma(S::load(&gram[j * p + t]), S::load(&rhs[t]), s);
        }
        let x = S::div(S::sub(S::load(&rhs[j]), s), S::load(&gram[j * p + j]));
        S::store(x, &mut rhs[j]);
    }
}

lane_kernel! {
    /// Σ_{(i,j)∈Ω} (A_ij − l_i·r_j)² per lane, summed user by user in index
    /// order exactly as [`super::single::squared_error`] sums one trial.
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
    /// Ratings whose dot products are formed side by side (independent
    /// chains); their squared residuals are then added in order.
    const Q: usize = 4;
    let mut total = S::splat(0.0);
    for (i, li) in l.chunks_exact(p).enumerate() {
        let rg = ptr[i]..ptr[i + 1];
        let (idx, values) = (&idx[rg.clone()], &values[rg]);
        let mut user = S::splat(0.0);
        let mut qi = idx.chunks_exact(Q);
        let mut qv = values.chunks_exact(Q);
        for (ks, vs) in (&mut qi).zip(&mut qv) {
            let rows: [&[V]; Q] =
                std::array::from_fn(|q| &r[ks[q] as usize * p..(ks[q] as usize + 1) * p]);
            let mut dots = [S::splat(-0.0); Q];
            for t in 0..p {
                let lt = S::load(&li[t]);
                for q in 0..Q {
                    dots[q] = S::fma(lt, S::load(&rows[q][t]), dots[q]);
                }
            }
            for q in 0..Q {
                let d = S::sub(S::splat(vs[q] as f64), dots[q]);
                user = S::fma(d, d, user);
            }
        }
        for (&k, &a) in qi.remainder().iter().zip(qv.remainder()) {
            let rj = &r[k as usize * p..(k as usize + 1) * p];
            let mut dot = S::splat(-0.0);
            for t in 0..p {
                dot = S::fma(S::load(&li[t]), S::load(&rj[t]), dot);
            }
            let d = S::sub(S::splat(a as f64), dot);
            user = S::fma(d, d, user);
        }
        total = S::add(total, user);
    }
    let mut out = V::splat(0.0);
    S::store(total, &mut out);
    out
}
