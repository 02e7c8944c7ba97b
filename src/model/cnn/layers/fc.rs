//! The fully connected layers (register-tiled over images) and the softmax
//! cross-entropy.

use super::*;

/// The second dimension of the fully connected layers' register tiles: 6 × 4
/// vectors where 32 fit the register file (AVX-512), 6 × 1 where 8 do
/// (AVX2: 12 of 16 registers accumulate, as in a 6 × 16 GEMM microkernel),
/// so that no accumulator spills.
#[inline(always)]
fn wide<T: Scalar, V: Vector<T>>() -> usize {
    if V::REGS >= 32 { 4 } else { 1 }
}

/// One tile of [`fc_forward_t`]: outputs `o0..o0 + OT`, image vectors
/// `v0..v0 + RV`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fc_forward_tile<T: Scalar, V: Vector<T>, const OT: usize, const RV: usize>(
    xt: &[T],
    inp: usize,
    ld: usize,
    w: &[T],
    b: &[T],
    o0: usize,
    v0: usize,
    yt: &mut [T],
    relu_out: bool,
) {
    let mut acc = [[V::splat(T::zero()); RV]; OT];
    for (o, a) in acc.iter_mut().enumerate() {
        *a = [V::splat(b[o0 + o]); RV];
    }
    // Each output's weight row as a slice of length `inp`, so that indexing
    // it by `i < inp` needs no bounds check in the loop (with six checks
    // per input the AVX2 loop ran out of registers and spilled accumulators).
    // (Plain loops, not `array::from_fn`: inside the one large pass function
    // the closures were not inlined and the checks came back.)
    let mut wr: [&[T]; OT] = [&[]; OT];
    for (o, w1) in wr.iter_mut().enumerate() {
        *w1 = &w[(o0 + o) * inp..][..inp];
    }
    for i in 0..inp {
        let xr = &xt[i * ld + v0 * LANES..][..RV * LANES];
        let mut x = [V::splat(T::zero()); RV];
        for (v, xv) in x.iter_mut().enumerate() {
            *xv = V::load(&xr[v * LANES..]);
        }
        for (a, w1) in acc.iter_mut().zip(&wr) {
            let wv = V::splat(w1[i]);
            for (av, xv) in a.iter_mut().zip(&x) {
                *av = wv.mul_add(*xv, *av);
            }
        }
    }
    for (o, a) in acc.iter().enumerate() {
        for (v, &av) in a.iter().enumerate() {
            let y = if relu_out { relu(av) } else { av };
            y.store(&mut yt[(o0 + o) * ld + (v0 + v) * LANES..]);
        }
    }
}

/// Fully connected forward pass on transposed activations:
/// `yt[o][r] = b[o] + Σ_i w[o][i] · xt[i][r]` (then ReLU if `relu`) for the
/// `vectors · LANES` images `r`; `xt` is `inp × ld`, `yt` is `out × ld`,
/// `w` is `(out, inp)` row-major.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn fc_forward_t<T: Scalar, V: Vector<T>>(
    xt: &[T],
    inp: usize,
    ld: usize,
    vectors: usize,
    w: &[T],
    b: &[T],
    yt: &mut [T],
    relu: bool,
) {
    let out = b.len();
    let mut v0 = 0;
    while v0 < vectors {
        let rv = (vectors - v0).min(wide::<T, V>());
        let mut o0 = 0;
        while o0 < out {
            let ot = if out - o0 >= 6 { 6 } else { 1 };
            macro_rules! tile {
                ($ot:literal, $rv:literal) => {
                    fc_forward_tile::<T, V, $ot, $rv>(xt, inp, ld, w, b, o0, v0, yt, relu)
                };
            }
            match (ot, rv) {
                (6, 4) => tile!(6, 4),
                (6, 3) => tile!(6, 3),
                (6, 2) => tile!(6, 2),
                (6, _) => tile!(6, 1),
                (_, 4) => tile!(1, 4),
                (_, 3) => tile!(1, 3),
                (_, 2) => tile!(1, 2),
                _ => tile!(1, 1),
            }
            o0 += ot;
        }
        v0 += rv;
    }
}

/// `dst[r·ds + f] = src[f·ld + r]` for `f < feats`, `r < n`: transposed
/// activations back to rows.
#[inline(always)]
pub(crate) fn rows_from_t<T: Scalar>(
    src: &[T],
    feats: usize,
    ld: usize,
    n: usize,
    dst: &mut [T],
    ds: usize,
) {
    for r in 0..n {
        for f in 0..feats {
            dst[r * ds + f] = src[f * ld + r];
        }
    }
}

/// Softmax cross-entropy of the first `n` images of the transposed logits
/// `zt` (`classes × ld`). Adds each image's loss
/// `max + ln Σ_c e^(z_c − max) − z_label` (in `f64`, image by image) to
/// `total` and returns it; if `delta` is given (rows of stride `ds`), writes
/// `scale · (softmax(z) − e_label)` into it (the gradient of `scale ×` the
/// summed loss with respect to the logits); if `terms` is given, writes
/// each image's loss (the term added to `total`) into `terms[r]`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn softmax_t<T: Scalar>(
    zt: &[T],
    classes: usize,
    ld: usize,
    n: usize,
    labels: &[u8],
    scale: T,
    mut delta: Option<(&mut [T], usize)>,
    mut terms: Option<&mut [f64]>,
    mut total: f64,
) -> f64 {
    let mut v0 = 0;
    while v0 < n {
        let mut max = [T::neg_infinity(); LANES];
        for c in 0..classes {
            let z = load_row(zt, c * ld + v0);
            for l in 0..LANES {
                max[l] = max[l].max(z[l]);
            }
        }
        let mut sum = [T::zero(); LANES];
        for c in 0..classes {
            let z = load_row(zt, c * ld + v0);
            for l in 0..LANES {
                sum[l] = sum[l] + (z[l] - max[l]).exp_p();
            }
        }
        let lanes = (n - v0).min(LANES);
        for l in 0..lanes {
            let r = v0 + l;
            let y = labels[r] as usize;
            let term = max[l].to64() + ln_f64(sum[l].to64()) - zt[y * ld + r].to64();
            if let Some(t) = terms.as_mut() {
                t[r] = term;
            }
            total += term;
        }
        if let Some((d, ds)) = delta.as_mut() {
            let mut inv = [T::zero(); LANES];
            for l in 0..LANES {
                inv[l] = scale / sum[l];
            }
            for c in 0..classes {
                let z = load_row(zt, c * ld + v0);
                for l in 0..lanes {
                    d[(v0 + l) * *ds + c] = (z[l] - max[l]).exp_p() * inv[l];
                }
            }
            for l in 0..lanes {
                let r = v0 + l;
                let y = labels[r] as usize;
                d[r * *ds + y] = d[r * *ds + y] - scale;
            }
        }
        v0 += LANES;
    }
    total
}

/// One tile of [`fc_weight_grad`]: outputs `o0..o0 + OT`, input vectors
/// `i0/LANES..+IV`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fc_weight_grad_tile<T: Scalar, V: Vector<T>, const OT: usize, const IV: usize>(
    dy: &[T],
    dys: usize,
    x: &[T],
    xs: usize,
    inp: usize,
    n: usize,
    o0: usize,
    i0: usize,
    dw: &mut [T],
) {
    let mut acc = [[V::splat(T::zero()); IV]; OT];
    // Whole rows of fixed length: the checks of the slices below do not
    // depend on the row, so none is left in the loop (with one per row the
    // compiler wrote 16 of the 24 accumulators to the stack every row).
    let rows = x[..n * xs]
        .chunks_exact(xs)
        .zip(dy[..n * dys].chunks_exact(dys));
    for (xrow, dyrow) in rows {
        // Fixed-length row slices: no bounds check per output or vector.
        let xr = &xrow[i0..i0 + IV * LANES];
        let dyr = &dyrow[o0..o0 + OT];
        let mut xv = [V::splat(T::zero()); IV];
        for (v, x1) in xv.iter_mut().enumerate() {
            *x1 = V::load(&xr[v * LANES..]);
        }
        for (a, &g) in acc.iter_mut().zip(dyr) {
            let g = V::splat(g);
            for (av, x1) in a.iter_mut().zip(&xv) {
                *av = g.mul_add(*x1, *av);
            }
        }
    }
    for (o, a) in acc.iter().enumerate() {
        for (v, av) in a.iter().enumerate() {
            let i = i0 + v * LANES;
            let valid = inp.saturating_sub(i).min(LANES);
            if valid == LANES {
                av.store(&mut dw[(o0 + o) * inp + i..]);
            } else {
                av.store_first(&mut dw[(o0 + o) * inp + i..], valid);
            }
        }
    }
}

/// Weight gradient of a fully connected layer on row-major activations:
/// `dw[o][i] = Σ_r dy[r][o] · x[r][i]` over the `n` images, `dy` rows of
/// stride `dys` (`out` used), `x` rows of stride `xs` (a multiple of
/// [`LANES`], `inp` used), each holding `n` whole rows; `dw` is
/// `(out, inp)`. Overwrites `dw`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn fc_weight_grad<T: Scalar, V: Vector<T>>(
    dy: &[T],
    dys: usize,
    out: usize,
    x: &[T],
    xs: usize,
    inp: usize,
    n: usize,
    dw: &mut [T],
) {
    let vecs = inp.div_ceil(LANES);
    let mut o0 = 0;
    while o0 < out {
        let ot = if out - o0 >= 6 { 6 } else { 1 };
        let mut v = 0;
        while v < vecs {
            let iv = (vecs - v).min(wide::<T, V>());
            let i0 = v * LANES;
            macro_rules! tile {
                ($ot:literal, $iv:literal) => {
                    fc_weight_grad_tile::<T, V, $ot, $iv>(dy, dys, x, xs, inp, n, o0, i0, dw)
                };
            }
            match (ot, iv) {
                (6, 4) => tile!(6, 4),
                (6, 3) => tile!(6, 3),
                (6, 2) => tile!(6, 2),
                (6, _) => tile!(6, 1),
                (_, 4) => tile!(1, 4),
                (_, 3) => tile!(1, 3),
                (_, 2) => tile!(1, 2),
                _ => tile!(1, 1),
            }
            v += iv;
        }
        o0 += ot;
    }
}

/// Bias gradient: `db[o] = Σ_r dy[r][o]` over the `n` images (rows of
/// stride `dys`). Overwrites `db`.
#[inline(always)]
pub(crate) fn fc_bias_grad<T: Scalar>(dy: &[T], dys: usize, n: usize, db: &mut [T]) {
    db.fill(T::zero());
    for r in 0..n {
        for (d, &g) in db.iter_mut().zip(&dy[r * dys..]) {
            *d = *d + g;
        }
    }
}

/// One tile of [`fc_input_grad`]: images `r0..r0 + RT`, input vectors
/// `i0/LANES..+IV`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fc_input_grad_tile<T: Scalar, V: Vector<T>, const RT: usize, const IV: usize>(
    dy: &[T],
    dys: usize,
    out: usize,
    w: &[T],
    ws: usize,
    mask: Option<&[T]>,
    r0: usize,
    i0: usize,
    dx: &mut [T],
) {
    let mut acc = [[V::splat(T::zero()); IV]; RT];
    // Each image's output-gradient row as a slice of length `out`, so that
    // indexing it by `o < out` needs no bounds check in the loop.
    let mut dyr: [&[T]; RT] = [&[]; RT];
    for (r, d1) in dyr.iter_mut().enumerate() {
        *d1 = &dy[(r0 + r) * dys..][..out];
    }
    // As in `fc_weight_grad_tile`: whole rows, so the check of `wr` does
    // not depend on the row.
    for (o, wrow) in w[..out * ws].chunks_exact(ws).enumerate() {
        let wr = &wrow[i0..i0 + IV * LANES];
        let mut wv = [V::splat(T::zero()); IV];
        for (v, w1) in wv.iter_mut().enumerate() {
            *w1 = V::load(&wr[v * LANES..]);
        }
        for (a, d1) in acc.iter_mut().zip(&dyr) {
            let g = V::splat(d1[o]);
            for (av, w1) in a.iter_mut().zip(&wv) {
                *av = g.mul_add(*w1, *av);
            }
        }
    }
    let z = V::splat(T::zero());
    for (r, a) in acc.iter().enumerate() {
        for (v, &av) in a.iter().enumerate() {
            let at = (r0 + r) * ws + i0 + v * LANES;
            let d = match mask {
                Some(h) => V::select(V::load(&h[at..]).gt(z), av, z),
                None => av,
            };
            d.store(&mut dx[at..]);
        }
    }
}

/// Input gradient of a fully connected layer on row-major activations:
/// `dx[r][i] = Σ_o dy[r][o] · w[o][i]` for the `n` images, with `w` rows
/// of stride `ws` (a multiple of [`LANES`], zero past the layer's inputs)
/// and `dx` rows of the same stride; where `mask` (the layer's input
/// activations after ReLU, same layout) is not positive, `dx` is 0 (ReLU's
/// backward). Overwrites `dx`'s first `n` rows.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn fc_input_grad<T: Scalar, V: Vector<T>>(
    dy: &[T],
    dys: usize,
    out: usize,
    w: &[T],
    ws: usize,
    mask: Option<&[T]>,
    n: usize,
    dx: &mut [T],
) {
    let vecs = ws / LANES;
    let mut r0 = 0;
    while r0 < n {
        let rt = if n - r0 >= 6 { 6 } else { 1 };
        let mut v = 0;
        while v < vecs {
            let iv = (vecs - v).min(wide::<T, V>());
            let i0 = v * LANES;
            macro_rules! tile {
                ($rt:literal, $iv:literal) => {
                    fc_input_grad_tile::<T, V, $rt, $iv>(dy, dys, out, w, ws, mask, r0, i0, dx)
                };
            }
            match (rt, iv) {
                (6, 4) => tile!(6, 4),
                (6, 3) => tile!(6, 3),
                (6, 2) => tile!(6, 2),
                (6, _) => tile!(6, 1),
                (_, 4) => tile!(1, 4),
                (_, 3) => tile!(1, 3),
                (_, 2) => tile!(1, 2),
                _ => tile!(1, 1),
            }
            v += iv;
        }
        r0 += rt;
    }
}

/// `dst[o·ds + i] = src[o·inp + i]` (`i < inp`), zero up to the stride `ds`:
/// a weight matrix with rows padded to a multiple of [`LANES`].
#[inline(always)]
pub(crate) fn pad_rows<T: Scalar>(src: &[T], out: usize, inp: usize, dst: &mut [T], ds: usize) {
    for o in 0..out {
        dst[o * ds..o * ds + inp].copy_from_slice(&src[o * inp..(o + 1) * inp]);
        dst[o * ds + inp..(o + 1) * ds].fill(T::zero());
    }
}
