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

lane_kernel! {
    /// The inverse of [`pack`] for rows `rows` (of `p` entries each): lane `l` of
    /// `src` into `dsts[l]`.
    pub fn unpack_rows, unpack_rows_at(
        src: &[V],
        p: usize,
        rows: std::ops::Range<usize>,
        dsts: &mut [&mut [f64]],
    ) = unpack_rows_body;
}

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

/// [`unpack_rows`]: [`W`] entries at a time, transposed in registers.
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
) {
    let rows = out.len() / P;
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
        finish_all::<S, P>(lambda, systems, out, |n| n);
        for i in 0..rows {
            let rg = ptr[i]..ptr[i + 1];
            if super::single::uses_dual(rg.len(), P) {
                let o = &mut out[i * P..(i + 1) * P];
                solve_dual::<S>(P, lambda, &idx[rg.clone()], &values[rg], other, o, dual);
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
                continue;
            }
            let (g, b) = system::<P>(&mut systems[nb * per..(nb + 1) * per]);
            // `fresh`: the sums start from zero, whatever `g` and `b` hold.
            accumulate_p::<S, P>(&idx[rg.clone()], &values[rg], other, g, b, true);
            batch[nb] = i;
            nb += 1;
            if nb == NB {
                finish_all::<S, P>(lambda, systems, out, |n| batch[n]);
                nb = 0;
            }
        }
        finish_all::<S, P>(lambda, &mut systems[..nb * per], out, |n| batch[n]);
    }
}

/// Adds λ to the diagonals of the systems in `sys` (laid out as by
/// [`system`]) and solves them, [`NB`] side by side while that many remain,
/// then one by one; system `n`'s solution goes to row `row_of(n)` of `out`
/// (`out[r·P..(r+1)·P]`).
#[inline(always)]
fn finish_all<S: Simd, const P: usize>(
    lambda: f64,
    sys: &mut [V],
    out: &mut [V],
    row_of: impl Fn(usize) -> usize,
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
        }
    }
    for (n, s) in rest.chunks_exact_mut(per).enumerate() {
        let (g, b) = system::<P>(s);
        cholesky_solve_p::<S, P>(g, b);
        let r = row_of(full + n);
        out[r * P..(r + 1) * P].copy_from_slice(b);
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
        for b in a..n {
            let xb = x(b);
            let mut acc = S::splat(-0.0);
            for s in 0..p {
                acc = S::fma(S::load(&xa[s]), S::load(&xb[s]), acc);
            }
            if b == a {
                acc = S::add(acc, S::splat(lambda));
            }
            S::store(acc, &mut gram[a * n + b]);
        }
        S::store(S::splat(values[a] as f64), &mut rhs[a]);
    }
    cholesky_solve::<S>(n, gram, rhs);
    for (s, o) in out.iter_mut().enumerate() {
        let mut acc = S::splat(-0.0);
        for (a, z) in rhs.iter().enumerate() {
            acc = S::fma(S::load(z), S::load(&x(a)[s]), acc);
        }
        S::store(acc, o);
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
        if super::single::uses_dual(idx.len(), p) {
            // n² + n < p² entries: the Gram scratch holds the dual system.
            solve_dual::<S>(p, lambda, idx, values, other, row_out, gram);
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
    }
}

/// Where each rating of the user-ordered lists sits in the item-ordered
/// ones, for [`squared_error_by_item`].
pub(crate) struct ItemOrder {
    /// `pos[k]`: the item-order position of user-order rating `k`.
    pos: Vec<u32>,
    /// `item[q]`: the item of item-order rating `q`.
    item: Vec<u32>,
}

impl ItemOrder {
    /// The map between `user_*` and `item_*` (both lists of the same
    /// ratings, each ascending within its user or item), or `None` when a
    /// rating of one has no counterpart of the same value at the expected
    /// place in the other (then [`squared_error`] is used instead), or when
    /// positions do not fit `u32`.
    pub(crate) fn new(
        user_ptr: &[usize],
        user_items: &[u32],
        user_values: &[f32],
        item_ptr: &[usize],
        item_users: &[u32],
        item_values: &[f32],
    ) -> Option<ItemOrder> {
        let len = user_items.len();
        if item_users.len() != len || u32::try_from(len).is_err() {
            return None;
        }
        let users = user_ptr.len().checked_sub(1)?;
        let mut cursor = user_ptr[..users].to_vec();
        let mut pos = vec![u32::MAX; len];
        let mut item = vec![0u32; len];
        for j in 0..item_ptr.len().saturating_sub(1) {
            for q in item_ptr[j]..item_ptr[j + 1] {
                let i = item_users[q] as usize;
                let k = *cursor.get(i)?;
                if k >= user_ptr[i + 1]
                    || user_items[k] as usize != j
                    || user_values[k].to_bits() != item_values[q].to_bits()
                {
                    return None;
                }
                cursor[i] += 1;
                pos[k] = q as u32;
                item[q] = j as u32;
            }
        }
        pos.iter()
            .all(|&q| q != u32::MAX)
            .then_some(ItemOrder { pos, item })
    }
}

lane_kernel! {
    /// [`squared_error`] with the same bits, its dot products formed in item
    /// order: each item's column of R is read once, in sequence, and the
    /// rows of L (the smaller side) are gathered instead, while the
    /// residuals go to `resid` (item order); they are then squared and
    /// summed user by user in index order, as [`squared_error`] sums them.
    pub fn squared_error_by_item, squared_error_by_item_at(
        p: usize,
        user_ptr: &[usize],
        item_values: &[f32],
        item_users: &[u32],
        order: &ItemOrder,
        l: &[V],
        r: &[V],
        resid: &mut Vec<V>,
    ) -> V = squared_error_by_item_body;
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn squared_error_by_item_body<S: Simd>(
    p: usize,
    user_ptr: &[usize],
    item_values: &[f32],
    item_users: &[u32],
    order: &ItemOrder,
    l: &[V],
    r: &[V],
    resid: &mut Vec<V>,
) -> V {
    by_item_residuals::<S>(p, item_values, item_users, order, l, r, resid);
    let mut total = S::splat(0.0);
    for i in 0..user_ptr.len() - 1 {
        let mut user = S::splat(0.0);
        for &q in &order.pos[user_ptr[i]..user_ptr[i + 1]] {
            let d = S::load(&resid[q as usize]);
            user = S::fma(d, d, user);
        }
        total = S::add(total, user);
    }
    let mut out = V::splat(0.0);
    S::store(total, &mut out);
    out
}

/// `resid[q] ← a_q − l_i·r_j` for every rating `q` (item order), each dot
/// product a chain over the factors from −0 as [`add_squared_residuals`]
/// forms it (`l_it · r_jt`, the product commutes exactly), eight ratings'
/// chains side by side.
#[inline(always)]
fn by_item_residuals<S: Simd>(
    p: usize,
    item_values: &[f32],
    item_users: &[u32],
    order: &ItemOrder,
    l: &[V],
    r: &[V],
    resid: &mut Vec<V>,
) {
    const Q: usize = 8;
    let len = item_users.len();
    resid.resize(len, V::splat(0.0));
    let mut q0 = 0;
    while q0 < len {
        let n = Q.min(len - q0);
        let mut lrows: [&[V]; Q] = [&[]; Q];
        let mut rrows: [&[V]; Q] = [&[]; Q];
        for q in 0..Q {
            // A last group of fewer repeats its first rating.
            let at = q0 + if q < n { q } else { 0 };
            let (i, j) = (item_users[at] as usize, order.item[at] as usize);
            lrows[q] = &l[i * p..(i + 1) * p];
            rrows[q] = &r[j * p..(j + 1) * p];
        }
        let mut dots = [S::splat(-0.0); Q];
        for t in 0..p {
            for q in 0..Q {
                dots[q] = S::fma(S::load(&lrows[q][t]), S::load(&rrows[q][t]), dots[q]);
            }
        }
        for q in 0..n {
            let a = S::splat(item_values[q0 + q] as f64);
            S::store(S::sub(a, dots[q]), &mut resid[q0 + q]);
        }
        q0 += n;
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
/// (`li`: the user's row of L), each dot product a chain over the factors
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
    /// Ratings whose dot products are formed side by side (independent
    /// chains); their squared residuals are then added in order. A last
    /// group of fewer repeats its first row in the unused slots and adds
    /// only its own.
    const Q: usize = 8;
    for (ks, vs) in idx.chunks(Q).zip(values.chunks(Q)) {
        let rows: [&[V]; Q] = std::array::from_fn(|q| {
            let k = ks.get(q).copied().unwrap_or(ks[0]) as usize;
            &r[k * p..(k + 1) * p]
        });
        let mut dots = [S::splat(-0.0); Q];
        for t in 0..p {
            let lt = S::load(&li[t]);
            for q in 0..Q {
                dots[q] = S::fma(lt, S::load(&rows[q][t]), dots[q]);
            }
        }
        for (q, &a) in vs.iter().enumerate() {
            let d = S::sub(S::splat(a as f64), dots[q]);
            user = S::fma(d, d, user);
        }
    }
    user
}
