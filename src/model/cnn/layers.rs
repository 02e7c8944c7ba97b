//! The layer kernels of the CNN, generic over the float type so that the
//! very same code runs in `f32` for training and in `f64` for the
//! finite-difference gradient check.
//!
//! **Arithmetic (the same bits on every CPU).** Every output is one chain of
//! fused multiply-adds (`mul_add`, correctly rounded everywhere) in a fixed
//! order, started from the bias where there is one; the kernels vectorise only
//! across independent outputs (16-wide rows of [`LANES`] values, one AVX-512
//! register of `f32`, two AVX2 registers), never across the terms of a sum,
//! and the softmax uses the portable `exp`/`ln` of [`crate::model::kernels`].
//! So the portable build, AVX2+FMA and AVX-512 give identical results, and a
//! tile size or vector width never changes a bit. The orders, per output:
//!
//! | output | chain |
//! |---|---|
//! | conv1 `(c, oh, ow)` | `b[c]`, then taps `(kh, kw)` |
//! | conv2 `(oh, ow, co)` | `b[co]`, then taps `(kh, kw, ci)` |
//! | fc `(r, o)` | `b[o]`, then inputs `i` |
//! | fc `dW[o, i]`, `db[o]` | images `r` |
//! | fc `dx[r, i]` | outputs `o` |
//! | conv `dW`, `db` of channel c | images, then pooling windows `(ph, pw)` |
//! | conv2 `dx` (pooled conv1 output) | windows `(ph, pw)`, then channels `co` |
//!
//! **Layouts.** Images are planar 28×28. conv1 reads them through an
//! even/odd column split (so its even and odd output columns are contiguous
//! 16-wide rows), pools in registers and writes NHWC (row, column, channel);
//! conv2 reads NHWC, keeps its 16 output channels as one row vector and pools
//! in registers too (no im2col buffer). The fully connected layers run
//! forward on transposed activations (feature-major, 16 images per vector)
//! and backward on row-major ones (image-major, 16 features per vector).
//! Convolution weights are stored output channel first, as in PyTorch:
//! conv1 `(out, kh, kw)`, conv2 `(out, kh, kw, in)`.
//!
//! **ReLU, pooling and the sparse backward.** ReLU and 2×2 max pooling are
//! fused (`relu(max(a)) = max(relu(a))`); a window's maximum is the first of
//! its four values in row-major order attaining it, recorded as a 2-bit code.
//! Backward, only a window's maximum receives its pooled value's gradient,
//! and only if the pooled value is positive (ReLU); the convolution gradients
//! are accumulated from the maxima alone — the dense products' sums without
//! their zero terms.

use std::fmt::Debug;

use num_traits::Float;

use super::net::{CONV1_CHANNELS, CONV1_OUT, CONV2_CHANNELS, KERNEL, Kernels, SIDE};
use super::vector::Vector;
use crate::model::kernels::{exp_f32, ln_f64};

/// Width of the row vectors of the internal layouts (one AVX-512 register of
/// `f32`). Layouts are padded to it; it is a property of the layout, not of
/// the CPU, so results never depend on it.
pub const LANES: usize = 16;

/// One row vector.
pub type Row<T> = [T; LANES];

/// The float types the network runs in (`f32` for training, `f64` for checks).
pub trait Scalar: Float + Debug + Default + Send + Sync + Kernels + 'static {
    /// Converts from `f64` (exact for the constants used here).
    fn of(v: f64) -> Self;
    /// Converts to `f64`.
    fn to64(self) -> f64;
    /// e^x, portable (the same bits on every platform).
    fn exp_p(self) -> Self;
}

impl Scalar for f32 {
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn to64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn exp_p(self) -> f32 {
        exp_f32(self)
    }
}

impl Scalar for f64 {
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn to64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn exp_p(self) -> f64 {
        exp_f64(self)
    }
}

/// e^x in f64, portable: x = n·ln2 + r, |r| ≤ ln2/2, a degree-13 Taylor
/// polynomial for e^r (relative error below 1e-15), then scaling by 2^n.
/// Arguments are clamped to [−708, 709]. (Used by the f64 gradient check.)
#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let x = x.clamp(-708.0, 709.0);
    let t = x * std::f64::consts::LOG2_E;
    let n = (if t >= 0.0 { t + 0.5 } else { t - 0.5 }) as i64;
    let nf = n as f64;
    let r = (x - nf * LN2_HI) - nf * LN2_LO;
    let mut p = 1.0;
    for k in (1..=13).rev() {
        p = 1.0 + p * r / k as f64;
    }
    p * f64::from_bits(((n + 1023) as u64) << 52)
}

/// The array at `s[at..at + LANES]`.
#[inline(always)]
fn load_row<T: Copy>(s: &[T], at: usize) -> [T; LANES] {
    let mut v = [s[at]; LANES];
    v.copy_from_slice(&s[at..at + LANES]);
    v
}

/// The lane-wise maximum of four row vectors (in the order given: the
/// row-major order of a 2×2 window) and the window code (0..=3) of the first
/// one attaining it in each lane, as a [`Codes`] word.
#[inline(always)]
fn max4<T: Scalar, V: Vector<T>>(a: [V; 4]) -> (V, u32) {
    let mut best = a[0];
    let (mut lo, mut hi) = (0u32, 0u32);
    for (k, &v) in a.iter().enumerate().skip(1) {
        let m = v.gt(best);
        best = V::select(m, v, best);
        let bits = V::bits(m);
        lo = if k & 1 == 1 { lo | bits } else { lo & !bits };
        hi = if k & 2 == 2 { hi | bits } else { hi & !bits };
    }
    (best, lo | (hi << LANES))
}

/// The window codes of one row of [`LANES`] pooled values: bit `l` is the
/// low bit of lane l's code (its column in the window), bit `16 + l` the
/// high bit (its row).
pub type Codes = u32;

/// Lane `l`'s window code from a [`Codes`] word: `(row, column)` in the window.
#[inline(always)]
fn code_at(codes: Codes, l: usize) -> (usize, usize) {
    (
        ((codes >> (LANES + l)) & 1) as usize,
        ((codes >> l) & 1) as usize,
    )
}

/// ReLU of each lane.
#[inline(always)]
fn relu<T: Scalar, V: Vector<T>>(v: V) -> V {
    let z = V::splat(T::zero());
    V::select(v.gt(z), v, z)
}

/// Shape of a valid (no padding), stride-1 square convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvShape {
    /// Side of the square input.
    pub side: usize,
    /// Input channels.
    pub cin: usize,
    /// Output channels.
    pub cout: usize,
    /// Side of the square kernel.
    pub k: usize,
}

impl ConvShape {
    /// Side of the output, `side − k + 1`.
    pub fn out_side(&self) -> usize {
        self.side + 1 - self.k
    }
    /// Taps per output channel, `k·k·cin` (a row of the weight tensor).
    pub fn taps(&self) -> usize {
        self.k * self.k * self.cin
    }
    /// Output positions per image.
    pub fn positions(&self) -> usize {
        self.out_side() * self.out_side()
    }
    /// Input values per image.
    pub fn in_len(&self) -> usize {
        self.side * self.side * self.cin
    }
    /// Output values per image.
    pub fn out_len(&self) -> usize {
        self.positions() * self.cout
    }
}

/// Row stride of the even/odd column planes of conv1's input (14 columns
/// used; the rest stays zero and feeds only discarded lanes).
pub const SPLIT: usize = 32;
/// Values in one even/odd plane.
pub const PLANE: usize = SIDE * SPLIT;
/// Side of conv1's pooled output.
pub const P1_SIDE: usize = CONV1_OUT / 2;
/// Values of conv1's pooled output per image (12 × 12 × 6, NHWC).
pub const P1_LEN: usize = P1_SIDE * P1_SIDE * CONV1_CHANNELS;
/// Output side of conv2.
pub const CONV2_OUT: usize = P1_SIDE + 1 - KERNEL;
/// Side of conv2's pooled output.
pub const P2_SIDE: usize = CONV2_OUT / 2;
/// Taps of a conv2 output channel (5 × 5 × 6).
pub const TAPS2: usize = KERNEL * KERNEL * CONV1_CHANNELS;
/// One kernel row of conv2's taps: 5 pixels × 6 channels, contiguous in NHWC.
const RUN2: usize = KERNEL * CONV1_CHANNELS;

/// Splits one 28×28 image into its even and odd columns:
/// `xs[p·PLANE + row·SPLIT + j] = x[row·28 + 2j + p]`.
#[inline(always)]
pub fn split_columns<T: Scalar>(x: &[T], xs: &mut [T]) {
    for row in 0..SIDE {
        let src = &x[row * SIDE..(row + 1) * SIDE];
        for j in 0..SIDE / 2 {
            xs[row * SPLIT + j] = src[2 * j];
            xs[PLANE + row * SPLIT + j] = src[2 * j + 1];
        }
    }
}

/// conv1 (direct 5×5, 1 → 6 channels) with fused ReLU and 2×2 max pooling
/// of one image given as its column split `xs` ([`split_columns`]); writes
/// the pooled NHWC output `p1` (12 × 12 × 6) and the window codes `arg1`
/// (one [`Codes`] word per pooled row and channel, `arg1[ph·6 + c]`, lanes =
/// columns). Weights `(out, kh, kw)`. Lanes 12..16 of each row are computed
/// from the split's zero padding and discarded.
#[inline(always)]
pub fn conv1_pool<T: Scalar, V: Vector<T>>(
    xs: &[T],
    w: &[T],
    b: &[T],
    p1: &mut [T],
    arg1: &mut [Codes],
) {
    const C: usize = CONV1_CHANNELS;
    const TAPS: usize = KERNEL * KERNEL;
    // Fixed-size views: every index below is provably in range, so the
    // inner loops carry no bounds checks.
    let xs: &[T; 2 * PLANE] = xs[..2 * PLANE].try_into().expect("a column split");
    let w: &[T; C * TAPS] = w[..C * TAPS].try_into().expect("conv1 weights");
    let b: &[T; C] = b[..C].try_into().expect("conv1 biases");
    for ph in 0..P1_SIDE {
        // acc[c][dr][parity]: conv rows 2ph + dr, even (0) or odd (1) columns.
        let mut acc = [[[V::splat(T::zero()); 2]; 2]; C];
        for (c, a) in acc.iter_mut().enumerate() {
            *a = [[V::splat(b[c]); 2]; 2];
        }
        for kh in 0..KERNEL {
            for dr in 0..2 {
                // The input row's even and odd columns from offsets 0, 1, 2
                // (each loaded once, shared by the five taps of the row).
                let row = 2 * ph + dr + kh;
                let even: [V; 3] = std::array::from_fn(|j| V::load(&xs[row * SPLIT + j..]));
                let odd: [V; 3] = std::array::from_fn(|j| V::load(&xs[PLANE + row * SPLIT + j..]));
                for kw in 0..KERNEL {
                    // Output column 2j (+1) reads input column 2j + kw (+1).
                    let (ve, vo) = if kw % 2 == 0 {
                        (even[kw / 2], odd[kw / 2])
                    } else {
                        (odd[kw / 2], even[kw.div_ceil(2)])
                    };
                    for (c, a) in acc.iter_mut().enumerate() {
                        let wv = V::splat(w[c * TAPS + kh * KERNEL + kw]);
                        a[dr][0] = wv.mul_add(ve, a[dr][0]);
                        a[dr][1] = wv.mul_add(vo, a[dr][1]);
                    }
                }
            }
        }
        for (c, a) in acc.iter().enumerate() {
            let (m, codes) = max4([a[0][0], a[0][1], a[1][0], a[1][1]]);
            let m = relu(m).to_array();
            for pw in 0..P1_SIDE {
                p1[(ph * P1_SIDE + pw) * C + c] = m[pw];
            }
            arg1[ph * C + c] = codes;
        }
    }
}

/// conv2's weights `(out, kh, kw, in)` transposed to `(tap, out)`: one row
/// vector of the 16 output channels per tap.
#[inline(always)]
pub fn transpose_conv2<T: Scalar>(w: &[T], wt: &mut [T]) {
    for co in 0..CONV2_CHANNELS {
        for t in 0..TAPS2 {
            wt[t * CONV2_CHANNELS + co] = w[co * TAPS2 + t];
        }
    }
}

/// conv2 (5×5, 6 → 16 channels, on NHWC input) with fused ReLU and 2×2 max
/// pooling of one image: from the pooled conv1 output `p1` and the
/// transposed weights `wt` ([`transpose_conv2`]), writes the pooled output
/// `p2` (4 × 4 × 16, NHWC: fc1's input order) and the window codes `arg2`
/// (one [`Codes`] word per pooled position, `arg2[ph·4 + pw]`, lanes =
/// channels).
#[inline(always)]
pub fn conv2_pool<T: Scalar, V: Vector<T>>(
    p1: &[T],
    wt: &[T],
    b: &[T],
    p2: &mut [T],
    arg2: &mut [Codes],
) {
    const _: () = assert!(CONV2_CHANNELS == LANES);
    const C: usize = CONV1_CHANNELS;
    let bias = V::load(b);
    for ph in 0..P2_SIDE {
        let mut acc = [[bias; CONV2_OUT]; 2];
        for kh in 0..KERNEL {
            for kw in 0..KERNEL {
                for ci in 0..C {
                    let wv = V::load(&wt[((kh * KERNEL + kw) * C + ci) * LANES..]);
                    for (dr, a) in acc.iter_mut().enumerate() {
                        let row = &p1[(2 * ph + dr + kh) * P1_SIDE * C + kw * C + ci..];
                        for (ow, o) in a.iter_mut().enumerate() {
                            *o = V::splat(row[ow * C]).mul_add(wv, *o);
                        }
                    }
                }
            }
        }
        for pw in 0..P2_SIDE {
            let (m, codes) = max4([
                acc[0][2 * pw],
                acc[0][2 * pw + 1],
                acc[1][2 * pw],
                acc[1][2 * pw + 1],
            ]);
            relu(m).store(&mut p2[(ph * P2_SIDE + pw) * LANES..]);
            arg2[ph * P2_SIDE + pw] = codes;
        }
    }
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
    for i in 0..inp {
        let mut x = [V::splat(T::zero()); RV];
        for (v, xv) in x.iter_mut().enumerate() {
            *xv = V::load(&xt[i * ld + (v0 + v) * LANES..]);
        }
        for (o, a) in acc.iter_mut().enumerate() {
            let wv = V::splat(w[(o0 + o) * inp + i]);
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
pub fn fc_forward_t<T: Scalar, V: Vector<T>>(
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
        let rv = (vectors - v0).min(4);
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
pub fn rows_from_t<T: Scalar>(
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
/// summed loss with respect to the logits).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn softmax_t<T: Scalar>(
    zt: &[T],
    classes: usize,
    ld: usize,
    n: usize,
    labels: &[u8],
    scale: T,
    mut delta: Option<(&mut [T], usize)>,
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
            total += max[l].to64() + ln_f64(sum[l].to64()) - zt[y * ld + r].to64();
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
    for r in 0..n {
        let mut xv = [V::splat(T::zero()); IV];
        for (v, x1) in xv.iter_mut().enumerate() {
            *x1 = V::load(&x[r * xs + i0 + v * LANES..]);
        }
        for (o, a) in acc.iter_mut().enumerate() {
            let g = V::splat(dy[r * dys + o0 + o]);
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
                dw[(o0 + o) * inp + i..][..valid].copy_from_slice(&av.to_array()[..valid]);
            }
        }
    }
}

/// Weight gradient of a fully connected layer on row-major activations:
/// `dw[o][i] = Σ_r dy[r][o] · x[r][i]` over the `n` images, `dy` rows of
/// stride `dys` (`out` used), `x` rows of stride `xs` (a multiple of
/// [`LANES`], `inp` used); `dw` is `(out, inp)`. Overwrites `dw`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn fc_weight_grad<T: Scalar, V: Vector<T>>(
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
            let iv = (vecs - v).min(4);
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
pub fn fc_bias_grad<T: Scalar>(dy: &[T], dys: usize, n: usize, db: &mut [T]) {
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
    for o in 0..out {
        let mut wv = [V::splat(T::zero()); IV];
        for (v, w1) in wv.iter_mut().enumerate() {
            *w1 = V::load(&w[o * ws + i0 + v * LANES..]);
        }
        for (r, a) in acc.iter_mut().enumerate() {
            let g = V::splat(dy[(r0 + r) * dys + o]);
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
pub fn fc_input_grad<T: Scalar, V: Vector<T>>(
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
            let iv = (vecs - v).min(4);
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
pub fn pad_rows<T: Scalar>(src: &[T], out: usize, inp: usize, dst: &mut [T], ds: usize) {
    for o in 0..out {
        dst[o * ds..o * ds + inp].copy_from_slice(&src[o * inp..(o + 1) * inp]);
        dst[o * ds + inp..(o + 1) * ds].fill(T::zero());
    }
}

/// The gradient a pooled value passes to its window's maximum: `g` if the
/// pooled value `v` is positive, else 0 (ReLU).
#[inline(always)]
fn through_relu<T: Scalar>(v: T, g: T) -> T {
    if v > T::zero() { g } else { T::zero() }
}

/// One term of a convolution's weight gradient: the gradient a window's
/// maximum receives and where that maximum's input patch starts.
#[derive(Clone, Copy, Debug, Default)]
pub struct Term<T> {
    /// Offset of the patch in the layer's input.
    pub at: u32,
    /// The gradient (non-zero).
    pub g: T,
}

/// conv2's weight and bias gradients and its input gradient, from the
/// gradient `dp2` with respect to the pooled outputs `p2` (window codes
/// `arg2`) of `n` images, the pooled conv1 outputs `p1` and the weights
/// `w2p` `(out, kh, kw, in)` padded by [`pad_conv2`]. Overwrites `dw`, `db`
/// and the first `n` images of `dp1` (NHWC, like `p1`); `terms` is scratch
/// (`16 × n·16` entries). `p1` and `dp1` must extend [`LANES`] values past
/// the last image (a kernel row's second vector reaches two values beyond
/// it). Windows whose gradient is zero add nothing and are skipped.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn conv2_backward<T: Scalar, V: Vector<T>>(
    n: usize,
    p1: &[T],
    p2: &[T],
    arg2: &[Codes],
    dp2: &[T],
    w2p: &[T],
    dw: &mut [T],
    db: &mut [T],
    dp1: &mut [T],
    terms: &mut [Term<T>],
) {
    const C2: usize = CONV2_CHANNELS;
    const WINDOWS: usize = P2_SIDE * P2_SIDE;
    const ROW: usize = P1_SIDE * CONV1_CHANNELS;
    let per_channel = n * WINDOWS;
    let mut count = [0usize; C2];
    // Input gradient: image by image, window by window; within a window, by
    // the position of the maximum (code order), then channel by channel. The
    // channels sharing a position add into the same 5×30 values, held in
    // registers meanwhile: two vectors per kernel row, [0, 16) and [16, 32),
    // whose last two lanes (the next pixel's) are written back unchanged.
    // The same pass lists each channel's weight-gradient terms in order.
    let keep = V::lanes_from(RUN2 - LANES);
    for img in 0..n {
        let d = &mut dp1[img * P1_LEN..];
        d[..P1_LEN].fill(T::zero());
        for ph in 0..P2_SIDE {
            for pw in 0..P2_SIDE {
                let win = img * WINDOWS + ph * P2_SIDE + pw;
                let j0 = win * C2;
                let codes = arg2[win];
                let mut by_code = [0usize; 4];
                let mut list = [[(0usize, T::zero()); C2]; 4];
                for co in 0..C2 {
                    let g = through_relu(p2[j0 + co], dp2[j0 + co]);
                    let (dh, dw_) = code_at(codes, co);
                    let q = 2 * dh + dw_;
                    let live = usize::from(g != T::zero());
                    list[q][by_code[q]] = (co, g);
                    by_code[q] += live;
                    let at = (img * P1_LEN + (2 * ph + dh) * ROW + (2 * pw + dw_) * CONV1_CHANNELS)
                        as u32;
                    terms[co * per_channel + count[co]] = Term { at, g };
                    count[co] += live;
                }
                for (q, list) in list.iter().enumerate() {
                    if by_code[q] == 0 {
                        continue;
                    }
                    let at = (2 * ph + q / 2) * ROW + (2 * pw + q % 2) * CONV1_CHANNELS;
                    let mut acc = [[V::splat(T::zero()); 2]; KERNEL];
                    for (kh, a) in acc.iter_mut().enumerate() {
                        let base = at + kh * ROW;
                        *a = [V::load(&d[base..]), V::load(&d[base + LANES..])];
                    }
                    for &(co, g) in &list[..by_code[q]] {
                        let gv = V::splat(g);
                        let wr = &w2p[co * KERNEL * 2 * LANES..];
                        for (kh, a) in acc.iter_mut().enumerate() {
                            let src = &wr[kh * 2 * LANES..];
                            a[0] = gv.mul_add(V::load(src), a[0]);
                            a[1] = gv.mul_add(V::load(&src[LANES..]), a[1]);
                        }
                    }
                    for (kh, a) in acc.iter().enumerate() {
                        let base = at + kh * ROW;
                        a[0].store(&mut d[base..]);
                        let old = V::load(&d[base + LANES..]);
                        V::select(keep, old, a[1]).store(&mut d[base + LANES..]);
                    }
                }
            }
        }
    }
    // Weight and bias gradients: channel by channel, accumulated in registers
    // over the channel's terms in (image, window) order (lanes 14 and 15 of
    // each kernel row's second vector are discarded).
    for co in 0..C2 {
        let mut acc = [[V::splat(T::zero()); 2]; KERNEL];
        let mut bias = T::zero();
        for t in &terms[co * per_channel..co * per_channel + count[co]] {
            bias = bias + t.g;
            let gv = V::splat(t.g);
            let x = &p1[t.at as usize..];
            for (kh, a) in acc.iter_mut().enumerate() {
                a[0] = gv.mul_add(V::load(&x[kh * ROW..]), a[0]);
                a[1] = gv.mul_add(V::load(&x[kh * ROW + LANES..]), a[1]);
            }
        }
        db[co] = bias;
        for (kh, a) in acc.iter().enumerate() {
            let d = &mut dw[co * TAPS2 + kh * RUN2..][..RUN2];
            a[0].store(d);
            d[LANES..].copy_from_slice(&a[1].to_array()[..RUN2 - LANES]);
        }
    }
}

/// conv2's weights `(out, kh, kw, in)` with each kernel row of 30 values
/// padded to two vectors (zeros in lanes 30, 31), for [`conv2_backward`].
#[inline(always)]
pub fn pad_conv2<T: Scalar>(w: &[T], wp: &mut [T]) {
    for co in 0..CONV2_CHANNELS {
        for kh in 0..KERNEL {
            let dst = &mut wp[(co * KERNEL + kh) * 2 * LANES..][..2 * LANES];
            dst[..RUN2].copy_from_slice(&w[co * TAPS2 + kh * RUN2..][..RUN2]);
            dst[RUN2..].fill(T::zero());
        }
    }
}

/// Values of [`pad_conv2`]'s output.
pub const W2_PADDED: usize = CONV2_CHANNELS * KERNEL * 2 * LANES;

/// conv1's weight and bias gradients from the gradient `dp1` with respect
/// to its pooled outputs `p1` (window codes `arg1`) of `n` images whose
/// input images are `x` (planar 28×28, extending [`LANES`] values past the
/// last image). Overwrites `dw` `(out, kh, kw)` and `db`; `terms` is scratch
/// (`6 × n·144` entries). Windows whose gradient is zero are skipped.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn conv1_backward<T: Scalar, V: Vector<T>>(
    n: usize,
    x: &[T],
    p1: &[T],
    arg1: &[Codes],
    dp1: &[T],
    dw: &mut [T],
    db: &mut [T],
    terms: &mut [Term<T>],
) {
    const C: usize = CONV1_CHANNELS;
    const WINDOWS: usize = P1_SIDE * P1_SIDE;
    let per_channel = n * WINDOWS;
    let mut count = [0usize; C];
    // Each channel's terms in (image, window) order.
    for img in 0..n {
        for ph in 0..P1_SIDE {
            let codes = &arg1[(img * P1_SIDE + ph) * C..][..C];
            for pw in 0..P1_SIDE {
                let j0 = img * P1_LEN + (ph * P1_SIDE + pw) * C;
                for c in 0..C {
                    let g = through_relu(p1[j0 + c], dp1[j0 + c]);
                    let (dh, dw_) = code_at(codes[c], pw);
                    let at = (img * SIDE * SIDE + (2 * ph + dh) * SIDE + 2 * pw + dw_) as u32;
                    terms[c * per_channel + count[c]] = Term { at, g };
                    count[c] += usize::from(g != T::zero());
                }
            }
        }
    }
    for c in 0..C {
        // acc[kh]: lanes kw < 5 are kept.
        let mut acc = [V::splat(T::zero()); KERNEL];
        let mut bias = T::zero();
        for t in &terms[c * per_channel..c * per_channel + count[c]] {
            bias = bias + t.g;
            let gv = V::splat(t.g);
            let xi = &x[t.at as usize..];
            for (kh, a) in acc.iter_mut().enumerate() {
                *a = gv.mul_add(V::load(&xi[kh * SIDE..]), *a);
            }
        }
        db[c] = bias;
        for (kh, a) in acc.iter().enumerate() {
            dw[c * KERNEL * KERNEL + kh * KERNEL..][..KERNEL]
                .copy_from_slice(&a.to_array()[..KERNEL]);
        }
    }
}

/// One Adam update (Kingma & Ba, in PyTorch's form) of a block's
/// parameters `w`, moments `m`, `v` from the gradient `g`:
/// `m ← β1·m + (1−β1)·g`, `v ← β2·v + ((1−β2)·g)·g`,
/// `w ← w − (step·m) / (√v · inv_sqrt_bc2 + ε)`, each multiply-add fused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    /// β1.
    pub b1: f32,
    /// 1 − β1.
    pub c1: f32,
    /// β2.
    pub b2: f32,
    /// 1 − β2.
    pub c2: f32,
    /// α / (1 − β1^t).
    pub step: f32,
    /// 1 / √(1 − β2^t).
    pub inv_sqrt_bc2: f32,
    /// ε.
    pub eps: f32,
}

/// The body of [`adam`] (same bits at every level: element-wise, fused).
#[inline(always)]
fn adam_body(w: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32], p: AdamStep) {
    let n = w.len();
    let (m, v, g) = (&mut m[..n], &mut v[..n], &g[..n]);
    for i in 0..n {
        let gi = g[i];
        let mi = p.b1.mul_add(m[i], p.c1 * gi);
        let vi = p.b2.mul_add(v[i], (p.c2 * gi) * gi);
        m[i] = mi;
        v[i] = vi;
        w[i] -= (p.step * mi) / vi.sqrt().mul_add(p.inv_sqrt_bc2, p.eps);
    }
}

crate::simd::kernel! {
    /// One Adam update of `w`, `m`, `v` (equal lengths) from `g` ([`AdamStep`]).
    pub fn adam, adam_at(w: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32], p: AdamStep) = adam_body;
}

#[cfg(test)]
mod tests {
    use super::super::vector::Portable;
    use super::*;
    use crate::simd::Level;

    #[test]
    fn exp_f64_is_accurate() {
        for i in -7000..=7000 {
            let x = i as f64 * 0.1;
            let (got, want) = (exp_f64(x), x.exp());
            assert!(
                ((got - want) / want).abs() < 4e-15,
                "exp({x}) = {got}, want {want}"
            );
        }
    }

    #[test]
    fn conv1_matches_a_direct_loop() {
        let x: Vec<f64> = (0..SIDE * SIDE).map(|i| (i as f64 * 0.71).sin()).collect();
        let w: Vec<f64> = (0..6 * 25).map(|i| (i as f64 * 0.29).cos()).collect();
        let b = vec![0.5, -0.25, 0.125, 1.0, 0.0, -2.0];
        let mut xs = vec![0.0; 2 * PLANE];
        split_columns(&x, &mut xs);
        let mut p1 = vec![0.0; P1_LEN];
        let mut arg = vec![0; P1_SIDE * 6];
        conv1_pool::<f64, Portable<f64>>(&xs, &w, &b, &mut p1, &mut arg);
        let conv = |c: usize, oh: usize, ow: usize| {
            let mut acc = b[c];
            for kh in 0..5 {
                for kw in 0..5 {
                    acc = w[c * 25 + kh * 5 + kw].mul_add(x[(oh + kh) * SIDE + ow + kw], acc);
                }
            }
            acc
        };
        for ph in 0..12 {
            for pw in 0..12 {
                for c in 0..6 {
                    let vals = [
                        conv(c, 2 * ph, 2 * pw),
                        conv(c, 2 * ph, 2 * pw + 1),
                        conv(c, 2 * ph + 1, 2 * pw),
                        conv(c, 2 * ph + 1, 2 * pw + 1),
                    ];
                    let mut k = 0;
                    for q in 1..4 {
                        if vals[q] > vals[k] {
                            k = q;
                        }
                    }
                    let j = (ph * 12 + pw) * 6 + c;
                    assert_eq!(p1[j].to_bits(), vals[k].max(0.0).to_bits());
                    let (dh, dw) = code_at(arg[ph * 6 + c], pw);
                    assert_eq!(2 * dh + dw, k);
                }
            }
        }
    }

    #[test]
    fn conv2_matches_a_direct_loop() {
        let p1: Vec<f64> = (0..P1_LEN).map(|i| (i as f64 * 0.37).sin().abs()).collect();
        let w: Vec<f64> = (0..16 * TAPS2)
            .map(|i| (i as f64 * 0.13).cos() * 0.2)
            .collect();
        let b: Vec<f64> = (0..16).map(|i| i as f64 * 0.01 - 0.08).collect();
        let mut wt = vec![0.0; TAPS2 * 16];
        transpose_conv2(&w, &mut wt);
        let mut p2 = vec![0.0; 256];
        let mut arg = vec![0; 16];
        conv2_pool::<f64, Portable<f64>>(&p1, &wt, &b, &mut p2, &mut arg);
        let conv = |co: usize, oh: usize, ow: usize| {
            let mut acc = b[co];
            for kh in 0..5 {
                for kw in 0..5 {
                    for ci in 0..6 {
                        acc = w[co * TAPS2 + (kh * 5 + kw) * 6 + ci]
                            .mul_add(p1[((oh + kh) * 12 + ow + kw) * 6 + ci], acc);
                    }
                }
            }
            acc
        };
        for ph in 0..4 {
            for pw in 0..4 {
                for co in 0..16 {
                    let vals = [
                        conv(co, 2 * ph, 2 * pw),
                        conv(co, 2 * ph, 2 * pw + 1),
                        conv(co, 2 * ph + 1, 2 * pw),
                        conv(co, 2 * ph + 1, 2 * pw + 1),
                    ];
                    let mut k = 0;
                    for q in 1..4 {
                        if vals[q] > vals[k] {
                            k = q;
                        }
                    }
                    let j = (ph * 4 + pw) * 16 + co;
                    assert_eq!(p2[j].to_bits(), vals[k].max(0.0).to_bits());
                    let (dh, dw) = code_at(arg[ph * 4 + pw], co);
                    assert_eq!(2 * dh + dw, k);
                }
            }
        }
    }

    #[test]
    fn fully_connected_kernels_follow_their_sums() {
        let (n, inp, out): (usize, usize, usize) = (21, 37, 13);
        let ld = n.div_ceil(LANES) * LANES;
        let xs = inp.div_ceil(LANES) * LANES;
        let x: Vec<f64> = (0..n * inp).map(|i| (i as f64 * 0.77).sin()).collect();
        let w: Vec<f64> = (0..out * inp).map(|i| (i as f64 * 0.31).cos()).collect();
        let b: Vec<f64> = (0..out).map(|i| i as f64 * 0.1).collect();
        let mut xt = vec![0.0; inp * ld];
        for r in 0..n {
            for i in 0..inp {
                xt[i * ld + r] = x[r * inp + i];
            }
        }
        let mut yt = vec![0.0; out * ld];
        fc_forward_t::<f64, Portable<f64>>(&xt, inp, ld, ld / LANES, &w, &b, &mut yt, true);
        for r in 0..n {
            for o in 0..out {
                let mut acc = b[o];
                for i in 0..inp {
                    acc = w[o * inp + i].mul_add(x[r * inp + i], acc);
                }
                assert_eq!(yt[o * ld + r].to_bits(), acc.max(0.0).to_bits());
            }
        }
        // Backward on rows.
        let mut xr = vec![0.0; n * xs];
        rows_from_t(&xt, inp, ld, n, &mut xr, xs);
        let dys = out.div_ceil(LANES) * LANES;
        let dy: Vec<f64> = (0..n * dys).map(|i| (i as f64 * 0.53).sin()).collect();
        let mut dw = vec![0.0; out * inp];
        fc_weight_grad::<f64, Portable<f64>>(&dy, dys, out, &xr, xs, inp, n, &mut dw);
        let mut db = vec![0.0; out];
        fc_bias_grad(&dy, dys, n, &mut db);
        for o in 0..out {
            let mut s = 0.0;
            for r in 0..n {
                s += dy[r * dys + o];
            }
            assert_eq!(db[o].to_bits(), s.to_bits());
            for i in 0..inp {
                let mut acc = 0.0;
                for r in 0..n {
                    acc = dy[r * dys + o].mul_add(x[r * inp + i], acc);
                }
                assert_eq!(dw[o * inp + i].to_bits(), acc.to_bits());
            }
        }
        let mut wp = vec![0.0; out * xs];
        pad_rows(&w, out, inp, &mut wp, xs);
        let mut dx = vec![0.0; n * xs];
        fc_input_grad::<f64, Portable<f64>>(&dy, dys, out, &wp, xs, Some(&xr), n, &mut dx);
        for r in 0..n {
            for i in 0..inp {
                let mut acc = 0.0;
                for o in 0..out {
                    acc = dy[r * dys + o].mul_add(w[o * inp + i], acc);
                }
                let want = if x[r * inp + i] > 0.0 { acc } else { 0.0 };
                assert_eq!(dx[r * xs + i].to_bits(), want.to_bits());
            }
        }
    }

    #[test]
    fn cross_entropy_of_uniform_logits_is_log_classes() {
        let ld = LANES;
        let z = vec![0.0f32; 10 * ld];
        let mut d = vec![0.0f32; 2 * 16];
        let l = softmax_t(&z, 10, ld, 2, &[3, 7], 1.0, Some((&mut d, 16)), 0.0);
        assert!((l - 2.0 * 10f64.ln()).abs() < 1e-6);
        assert!((d[3] + 0.9).abs() < 1e-6 && (d[4] - 0.1).abs() < 1e-6);
        assert!((d[16 + 7] + 0.9).abs() < 1e-6);
    }

    #[test]
    fn adam_is_the_same_at_every_level() {
        let n = 1000;
        let g: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 1e-2).collect();
        let w0: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
        let m0: Vec<f32> = (0..n).map(|i| (i as f32 * 0.7).sin() * 1e-3).collect();
        let v0: Vec<f32> = (0..n)
            .map(|i| (i as f32 * 0.3).sin().abs() * 1e-5)
            .collect();
        let p = AdamStep {
            b1: 0.9,
            c1: 0.1,
            b2: 0.999,
            c2: 1.0 - 0.999,
            step: 1e-3 / 0.271,
            inv_sqrt_bc2: 3.7,
            eps: 1e-8,
        };
        let run = |level: Level| {
            let (mut w, mut m, mut v) = (w0.clone(), m0.clone(), v0.clone());
            adam_at(level, &mut w, &mut m, &mut v, &g, p);
            (w, m, v)
        };
        let want = run(Level::Portable);
        for level in Level::supported() {
            let got = run(level);
            for (a, b) in [(&got.0, &want.0), (&got.1, &want.1), (&got.2, &want.2)] {
                assert!(
                    a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{level:?}"
                );
            }
        }
        assert_ne!(want.0, w0);
    }
}
