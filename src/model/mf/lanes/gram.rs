//! The normal equations of a row, lane by lane: the upper triangle of
//! `Σ x xᵀ` in register tiles and `Σ a x`, each entry summed in rating order.

use super::V;
use super::simd::Simd;

/// Ratings summed per pass over a row's Gram tiles: the factors they point
/// at (`CHUNK · p` lane vectors) stay in L1 while every tile reads them.
pub(super) const CHUNK: usize = 16;

/// Gram tiles are 4 × 4 blocks of the upper triangle where 32
/// registers hold a tile's 16 sums and its 8 factors (AVX-512), 2 × 2 where
/// 8 do (AVX2); each sum runs over the ratings in order either way.
#[inline(always)]
pub(super) fn tile_len<S: Simd>() -> usize {
    if S::REGS >= 32 { 4 } else { 2 }
}

/// Adds the ratings `idx`/`values` to the upper triangle of `g` (Σ x xᵀ)
/// and to `b` (Σ a x), each entry in rating order. With `fresh` the sums
/// start from +0 instead (what `g` and `b` held is ignored, so they need no
/// zeroing first; the same bits as adding to zeroed ones).
#[inline(always)]
pub(super) fn accumulate_p<S: Simd, const P: usize>(
    idx: &[u32],
    values: &[f32],
    other: &[V],
    g: &mut [[V; P]; P],
    b: &mut [V; P],
    fresh: bool,
) {
    if fresh && idx.is_empty() {
        for (s, row) in g.iter_mut().enumerate() {
            for v in &mut row[s..] {
                *v = V::splat(0.0);
            }
        }
        *b = [V::splat(0.0); P];
        return;
    }
    if P <= 5 && S::REGS >= 32 {
        // Every accumulator fits in registers: one pass over the ratings
        // (the tiles below sum each entry in the same order).
        // (Plain loops, not `std::array::from_fn`: a closure is compiled
        // without the kernel's target features, and where it is not inlined
        // its intrinsics become calls.)
        let mut acc = [[S::splat(0.0); P]; P];
        let mut rb = [S::splat(0.0); P];
        if !fresh {
            for s in 0..P {
                for t in s..P {
                    acc[s][t] = S::load(&g[s][t]);
                }
                rb[s] = S::load(&b[s]);
            }
        }
        for (&k, &a) in idx.iter().zip(values) {
            let row: &[V; P] = other[k as usize * P..(k as usize + 1) * P]
                .try_into()
                .expect("P entries");
            let mut x = [S::splat(0.0); P];
            for s in 0..P {
                x[s] = S::load(&row[s]);
            }
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
    // No software prefetch of the next chunk's rows: measured on AVX-512
    // and AVX2, the 20 prefetches per rating (p = 20) cost more load slots
    // than the misses they hid (`scarsim bench --kernel mf-als`, 2026-12-05).
    let mut first = fresh;
    let unused = [V::splat(0.0); P];
    for (idx, values) in idx.chunks(CHUNK).zip(values.chunks(CHUNK)) {
        // The chunk's rows, looked up (and bounds-checked) once for all
        // tiles: the tiles' loops then only load and multiply.
        let mut rows: [&[V; P]; CHUNK] = [&unused; CHUNK];
        for (r, &k) in rows.iter_mut().zip(idx) {
            *r = other[k as usize * P..(k as usize + 1) * P]
                .try_into()
                .expect("P entries");
        }
        let rows = &rows[..idx.len()];
        let mut s0 = 0;
        while s0 < P {
            let rs = tile_len::<S>().min(P - s0);
            let mut t0 = s0;
            while t0 < P {
                let cs = tile_len::<S>().min(P - t0);
                tile_dispatch::<S, _>(rs, cs, t0 == s0, rows, P, s0, t0, g, first);
                t0 += cs;
            }
            s0 += rs;
        }
        rhs_blocks::<S, _>(rows, values, P, b, first);
        first = false;
    }
}

/// A chunk's rows of the other side (`p` lane vectors each), as
/// [`accumulate_p`] (`&[V; P]`) or the general-`p` code (`&[V]`) holds them.
pub(super) trait Row: AsRef<[V]> + Copy {}
impl<T: AsRef<[V]> + Copy> Row for T {}

/// Adds (`fresh`: sets to +0 plus) `Σ_k a_k x_k` over the ratings (rows
/// `rows`, values `values`) to `rhs`, eight entries at a time.
#[inline(always)]
pub(super) fn rhs_blocks<S: Simd, X: Row>(
    rows: &[X],
    values: &[f32],
    p: usize,
    rhs: &mut [V],
    fresh: bool,
) {
    let mut s0 = 0;
    // Eight sums per pass where 32 registers fit, four at AVX2.
    let width = if S::REGS >= 32 { 8 } else { 4 };
    while s0 < p {
        let cs = width.min(p - s0);
        match cs {
            8 => rhs_block::<S, X, 8>(rows, values, s0, rhs, fresh),
            7 => rhs_block::<S, X, 7>(rows, values, s0, rhs, fresh),
            6 => rhs_block::<S, X, 6>(rows, values, s0, rhs, fresh),
            5 => rhs_block::<S, X, 5>(rows, values, s0, rhs, fresh),
            4 => rhs_block::<S, X, 4>(rows, values, s0, rhs, fresh),
            3 => rhs_block::<S, X, 3>(rows, values, s0, rhs, fresh),
            2 => rhs_block::<S, X, 2>(rows, values, s0, rhs, fresh),
            _ => rhs_block::<S, X, 1>(rows, values, s0, rhs, fresh),
        }
        s0 += cs;
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn tile_dispatch<S: Simd, X: Row>(
    rs: usize,
    cs: usize,
    diag: bool,
    rows: &[X],
    p: usize,
    s0: usize,
    t0: usize,
    gram: &mut [V],
    fresh: bool,
) {
    macro_rules! go {
        ($r:literal, $c:literal) => {
            if diag {
                tile::<S, X, $r, $c, true>(rows, p, s0, t0, gram, fresh)
            } else {
                tile::<S, X, $r, $c, false>(rows, p, s0, t0, gram, fresh)
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

/// Adds (`fresh`: sets to +0 plus) `Σ_k x_k[s0+a] · x_k[t0+b]` over the rows `rows` (one per
/// rating, in order) to the tile of `gram` at rows `s0..s0+RS`, columns
/// `t0..t0+CS` (on a diagonal tile only the entries with `t ≥ s`).
#[inline(always)]
fn tile<S: Simd, X: Row, const RS: usize, const CS: usize, const DIAG: bool>(
    rows: &[X],
    p: usize,
    s0: usize,
    t0: usize,
    gram: &mut [V],
    fresh: bool,
) {
    let mut acc = [[S::splat(0.0); CS]; RS];
    for (a, row) in acc.iter_mut().enumerate() {
        for (b, v) in row.iter_mut().enumerate() {
            if !fresh && (!DIAG || b >= a) {
                *v = S::load(&gram[(s0 + a) * p + t0 + b]);
            }
        }
    }
    for x in rows {
        let x = x.as_ref();
        let (rs, rt): (&[V; RS], &[V; CS]) = (
            x[s0..s0 + RS].try_into().expect("RS entries"),
            x[t0..t0 + CS].try_into().expect("CS entries"),
        );
        // (Plain loops: see `accumulate_p`.)
        let (mut xs, mut xt) = ([S::splat(0.0); RS], [S::splat(0.0); CS]);
        for a in 0..RS {
            xs[a] = S::load(&rs[a]);
        }
        for b in 0..CS {
            xt[b] = S::load(&rt[b]);
        }
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

/// Adds (`fresh`: sets to +0 plus) `Σ_k a_k x_k[s0+c]` over the ratings to `rhs[s0..s0+CS]`.
#[inline(always)]
fn rhs_block<S: Simd, X: Row, const CS: usize>(
    rows: &[X],
    values: &[f32],
    s0: usize,
    rhs: &mut [V],
    fresh: bool,
) {
    let rhs: &mut [V; CS] = (&mut rhs[s0..s0 + CS]).try_into().expect("CS entries");
    let mut acc = [S::splat(0.0); CS];
    if !fresh {
        for c in 0..CS {
            acc[c] = S::load(&rhs[c]);
        }
    }
    for (x, &a) in rows.iter().zip(values) {
        let xs: &[V; CS] = x.as_ref()[s0..s0 + CS].try_into().expect("CS entries");
        let a = S::splat(a as f64);
        for c in 0..CS {
            acc[c] = S::fma(a, S::load(&xs[c]), acc[c]);
        }
    }
    for c in 0..CS {
        S::store(acc[c], &mut rhs[c]);
    }
}
