//! The layer kernels of the CNN, generic over the float type so that the
//! very same code runs in `f32` for training and in `f64` for the
//! finite-difference gradient check.
//!
//! Layouts (row-major): the input and conv1's output are planar (image,
//! channel, row, column), as conv1 is a direct convolution of a single-channel
//! image; pooling writes NHWC (image, row, column, channel), so conv2 is an
//! im2col gather of contiguous `k·cin` runs followed by one matrix product
//! (`ndarray::linalg::general_mat_mul`, i.e. `matrixmultiply`). A convolution
//! weight tensor is stored with its output channel first, as in PyTorch:
//! conv1 `(out, kh, kw)`, conv2 `(out, kh, kw, in)` (each output channel's row
//! lists its taps in im2col order).
//!
//! ReLU and 2×2 max pooling are fused (`relu(max(a)) = max(relu(a))`), and the
//! backward passes of both convolutions are sparse: only a pooling window's
//! maximum with a positive value receives a gradient, so at most a quarter
//! of the convolution outputs do, and the weight gradients and conv2's input
//! gradient are accumulated from those alone (exactly the same sums as the
//! dense products, without the zero terms). Every kernel writes into
//! caller-provided buffers; nothing allocates (apart from `matrixmultiply`'s
//! internal packing buffers).

use std::fmt::Debug;

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, LinalgScalar};
use num_traits::Float;

/// The float types the network runs in (`f32` for training, `f64` for checks).
pub trait Scalar: LinalgScalar + Float + Debug + Send + Sync + 'static {
    /// Converts from `f64` (exact for the constants used here).
    fn of(v: f64) -> Self;
    /// Converts to `f64`.
    fn to64(self) -> f64;
}

impl Scalar for f32 {
    #[inline]
    fn of(v: f64) -> f32 {
        v as f32
    }
    #[inline]
    fn to64(self) -> f64 {
        self as f64
    }
}

impl Scalar for f64 {
    #[inline]
    fn of(v: f64) -> f64 {
        v
    }
    #[inline]
    fn to64(self) -> f64 {
        self
    }
}

/// `c = a · b` (`beta = 0`) or `c += a · b` (`beta = 1`), with `a` of shape
/// `(m, k)` and `b` of shape `(k, n)` given as row-major slices, `b`
/// optionally transposed (`b_t`: the slice holds `bᵀ`, shape `(n, k)`) and
/// `a` optionally transposed (`a_t`: the slice holds `aᵀ`, shape `(k, m)`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn gemm<T: Scalar>(
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    a_t: bool,
    b: &[T],
    b_t: bool,
    beta: T,
    c: &mut [T],
) {
    let av = if a_t {
        ArrayView2::from_shape((k, m), &a[..m * k])
            .expect("gemm: a shape")
            .reversed_axes()
    } else {
        ArrayView2::from_shape((m, k), &a[..m * k]).expect("gemm: a shape")
    };
    let bv = if b_t {
        ArrayView2::from_shape((n, k), &b[..k * n])
            .expect("gemm: b shape")
            .reversed_axes()
    } else {
        ArrayView2::from_shape((k, n), &b[..k * n]).expect("gemm: b shape")
    };
    let mut cv = ArrayViewMut2::from_shape((m, n), &mut c[..m * n]).expect("gemm: c shape");
    general_mat_mul(T::one(), &av, &bv, beta, &mut cv);
}

/// Shape of a valid (no padding), stride-1 square convolution on NHWC input.
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

/// im2col: `cols[(img, oh, ow), (kh, kw, ci)] = x[img, oh + kh, ow + kw, ci]`
/// for `n` images; `cols` has `n·positions` rows of `taps` values.
#[inline(always)]
pub fn im2col<T: Scalar>(s: &ConvShape, x: &[T], n: usize, cols: &mut [T]) {
    let (side, cin, k, o) = (s.side, s.cin, s.k, s.out_side());
    let run = k * cin; // one kernel row: k pixels × cin channels, contiguous in x
    let taps = s.taps();
    let mut row = 0;
    for img in 0..n {
        let xi = &x[img * s.in_len()..(img + 1) * s.in_len()];
        for oh in 0..o {
            for ow in 0..o {
                let dst = &mut cols[row * taps..(row + 1) * taps];
                for kh in 0..k {
                    let src = ((oh + kh) * side + ow) * cin;
                    dst[kh * run..(kh + 1) * run].copy_from_slice(&xi[src..src + run]);
                }
                row += 1;
            }
        }
    }
}

/// `y[r, :] += b` for each of the `rows` rows of width `b.len()`.
#[inline(always)]
pub fn add_bias<T: Scalar>(y: &mut [T], rows: usize, b: &[T]) {
    let w = b.len();
    for r in y[..rows * w].chunks_exact_mut(w) {
        for (v, &bb) in r.iter_mut().zip(b) {
            *v = *v + bb;
        }
    }
}

/// `db = Σ_r dy[r, :]` (overwrites `db`).
#[inline(always)]
pub fn bias_grad<T: Scalar>(dy: &[T], rows: usize, db: &mut [T]) {
    let w = db.len();
    db.fill(T::zero());
    for r in dy[..rows * w].chunks_exact(w) {
        for (d, &g) in db.iter_mut().zip(r) {
            *d = *d + g;
        }
    }
}

/// Fully connected (or convolution-as-GEMM) forward pass:
/// `y (rows×out) = x (rows×in) · Wᵀ + b` with `W` stored `(out, in)`.
#[inline(always)]
pub fn linear_forward<T: Scalar>(x: &[T], rows: usize, w: &[T], b: &[T], y: &mut [T]) {
    let out = b.len();
    let inp = w.len() / out;
    gemm(rows, inp, out, x, false, w, true, T::zero(), y);
    add_bias(y, rows, b);
}

/// Backward pass of [`linear_forward`]: `dW = dyᵀ · x`, `db = Σ dy` and, if
/// `dx` is given, `dx = dy · W`.
#[inline(always)]
pub fn linear_backward<T: Scalar>(
    x: &[T],
    rows: usize,
    w: &[T],
    dy: &[T],
    dw: &mut [T],
    db: &mut [T],
    dx: Option<&mut [T]>,
) {
    let out = db.len();
    let inp = w.len() / out;
    gemm(out, rows, inp, dy, true, x, false, T::zero(), dw);
    bias_grad(dy, rows, db);
    if let Some(dx) = dx {
        gemm(rows, out, inp, dy, false, w, false, T::zero(), dx);
    }
}

/// ReLU in place.
#[inline(always)]
pub fn relu<T: Scalar>(a: &mut [T]) {
    let z = T::zero();
    for v in a {
        if *v < z {
            *v = z;
        }
    }
}

/// ReLU backward in place: `d[i] = 0` where the activation `a[i]` (after
/// ReLU) is not positive.
#[inline(always)]
pub fn relu_backward<T: Scalar>(a: &[T], d: &mut [T]) {
    let z = T::zero();
    for (g, &v) in d.iter_mut().zip(a) {
        if v <= z {
            *g = z;
        }
    }
}

/// Direct valid convolution of single-channel planar images (`side × side`)
/// with `cout` kernels of `K × K` (weights `(out, kh, kw)`), writing the
/// pre-activations planar (`n × cout × o × o`, `o = side − K + 1`) into `y`.
/// `O` must equal `o`: the row accumulator lives in registers.
#[inline(always)]
pub fn conv_single_channel<T: Scalar, const K: usize, const O: usize>(
    x: &[T],
    n: usize,
    side: usize,
    w: &[T],
    b: &[T],
    y: &mut [T],
) {
    assert_eq!(side + 1 - K, O, "conv_single_channel: output side");
    let cout = b.len();
    for img in 0..n {
        let xi = &x[img * side * side..(img + 1) * side * side];
        for c in 0..cout {
            let wc = &w[c * K * K..(c + 1) * K * K];
            let plane = &mut y[(img * cout + c) * O * O..(img * cout + c + 1) * O * O];
            for (oh, out) in plane.chunks_exact_mut(O).enumerate() {
                let mut acc = [b[c]; O];
                for kh in 0..K {
                    let xr = &xi[(oh + kh) * side..(oh + kh) * side + side];
                    for kw in 0..K {
                        let wv = wc[kh * K + kw];
                        let xs = &xr[kw..kw + O];
                        for (a, &xv) in acc.iter_mut().zip(xs) {
                            *a = *a + wv * xv;
                        }
                    }
                }
                out.copy_from_slice(&acc);
            }
        }
    }
}

/// The maximum of four values and the index of the first one attaining it.
#[inline(always)]
fn max4<T: Scalar>(x: &[T], i: [usize; 4]) -> (T, usize) {
    let (mut best, mut at) = (x[i[0]], i[0]);
    for &j in &i[1..] {
        let v = x[j];
        if v > best {
            best = v;
            at = j;
        }
    }
    (best, at)
}

/// Fused ReLU and 2×2/stride-2 max pooling of planar input (`n × c × side ×
/// side` pre-activations), writing NHWC output `y` (`n × side/2 × side/2 ×
/// c`) = relu(window maximum) and in `arg` the index into `x` of each
/// window's maximum (first in row-major window order on ties).
#[inline(always)]
pub fn pool_relu_planar_to_nhwc<T: Scalar>(
    x: &[T],
    n: usize,
    c: usize,
    side: usize,
    y: &mut [T],
    arg: &mut [u32],
) {
    let half = side / 2;
    let z = T::zero();
    for img in 0..n {
        for ch in 0..c {
            let base = (img * c + ch) * side * side;
            for ph in 0..half {
                for pw in 0..half {
                    let i00 = base + 2 * ph * side + 2 * pw;
                    let (v, at) = max4(x, [i00, i00 + 1, i00 + side, i00 + side + 1]);
                    let j = ((img * half + ph) * half + pw) * c + ch;
                    y[j] = if v > z { v } else { z };
                    arg[j] = at as u32;
                }
            }
        }
    }
}

/// Fused ReLU and 2×2/stride-2 max pooling of NHWC input (`n × side × side ×
/// c` pre-activations) into NHWC output; `arg` as in
/// [`pool_relu_planar_to_nhwc`].
#[inline(always)]
pub fn pool_relu_nhwc<T: Scalar>(
    x: &[T],
    n: usize,
    side: usize,
    c: usize,
    y: &mut [T],
    arg: &mut [u32],
) {
    let half = side / 2;
    let z = T::zero();
    let mut j = 0;
    for img in 0..n {
        let base = img * side * side * c;
        for ph in 0..half {
            for pw in 0..half {
                let i00 = base + ((2 * ph) * side + 2 * pw) * c;
                let (i01, i10) = (i00 + c, i00 + side * c);
                for ch in 0..c {
                    let (v, at) = max4(x, [i00 + ch, i01 + ch, i10 + ch, i10 + c + ch]);
                    y[j] = if v > z { v } else { z };
                    arg[j] = at as u32;
                    j += 1;
                }
            }
        }
    }
}

/// Weight and bias gradients of [`conv_single_channel`] followed by
/// [`pool_relu_planar_to_nhwc`], from the gradient `dy` with respect to the
/// pooled NHWC outputs `y` (`arg` from the pooling; `cout` channels, conv
/// output side `O`). Only windows whose pooled value is positive pass a
/// gradient, to their maximum. Overwrites `dw`, `db`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn conv_single_channel_backward<T: Scalar, const K: usize, const O: usize>(
    x: &[T],
    n: usize,
    side: usize,
    y: &[T],
    arg: &[u32],
    dy: &[T],
    dw: &mut [T],
    db: &mut [T],
) {
    let cout = db.len();
    let half = O / 2;
    dw.fill(T::zero());
    db.fill(T::zero());
    let z = T::zero();
    let mut j = 0;
    for img in 0..n {
        let xi = &x[img * side * side..(img + 1) * side * side];
        for _ph in 0..half {
            for _pw in 0..half {
                for c in 0..cout {
                    let (g, v) = (dy[j], y[j]);
                    let at = arg[j] as usize;
                    j += 1;
                    if v <= z || g == z {
                        continue;
                    }
                    // Position of the maximum inside conv output plane (img, c).
                    let p = at - (img * cout + c) * O * O;
                    let (oh, ow) = (p / O, p % O);
                    db[c] = db[c] + g;
                    let wc = &mut dw[c * K * K..(c + 1) * K * K];
                    for kh in 0..K {
                        let xr = &xi[(oh + kh) * side + ow..(oh + kh) * side + ow + K];
                        let wr = &mut wc[kh * K..(kh + 1) * K];
                        for kw in 0..K {
                            wr[kw] = wr[kw] + g * xr[kw];
                        }
                    }
                }
            }
        }
    }
}

/// Backward pass of an im2col convolution (`s`, NHWC, weights `(out, kh, kw,
/// in)`) followed by [`pool_relu_nhwc`]: from the gradient `dy` with respect
/// to the pooled outputs `y` (`arg` indexing the convolution's NHWC output),
/// accumulates the weight and bias gradients (using the im2col matrix `cols`
/// of the forward pass) and the gradient `dx` with respect to the
/// convolution's NHWC input. Overwrites `dw`, `db` and `dx`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn conv_im2col_backward<T: Scalar>(
    s: &ConvShape,
    n: usize,
    cols: &[T],
    w: &[T],
    y: &[T],
    arg: &[u32],
    dy: &[T],
    dw: &mut [T],
    db: &mut [T],
    dx: &mut [T],
) {
    let (taps, cout, o) = (s.taps(), s.cout, s.out_side());
    let run = s.k * s.cin;
    let in_len = s.in_len();
    dw.fill(T::zero());
    db.fill(T::zero());
    dx[..n * in_len].fill(T::zero());
    let z = T::zero();
    for ((&g, &v), &at) in dy.iter().zip(y).zip(arg) {
        if v <= z || g == z {
            continue;
        }
        let at = at as usize;
        let (pos, co) = (at / cout, at % cout);
        db[co] = db[co] + g;
        let wr = &w[co * taps..(co + 1) * taps];
        let cr = &cols[pos * taps..(pos + 1) * taps];
        let dwr = &mut dw[co * taps..(co + 1) * taps];
        for t in 0..taps {
            dwr[t] = dwr[t] + g * cr[t];
        }
        let (img, p) = (pos / (o * o), pos % (o * o));
        let (oh, ow) = (p / o, p % o);
        let xi = &mut dx[img * in_len..(img + 1) * in_len];
        for kh in 0..s.k {
            let at = ((oh + kh) * s.side + ow) * s.cin;
            let d = &mut xi[at..at + run];
            let wk = &wr[kh * run..(kh + 1) * run];
            for t in 0..run {
                d[t] = d[t] + g * wk[t];
            }
        }
    }
}

/// Softmax cross-entropy over `rows` rows of `classes` logits. Returns the
/// summed loss Σ_i (log Σ_c exp z_ic − z_i,y_i) in `f64`; if `delta` is
/// given, writes `scale · (softmax(z_i) − e_{y_i})` into it (the gradient of
/// `scale ×` the summed loss with respect to the logits).
#[inline(always)]
pub fn softmax_cross_entropy<T: Scalar>(
    z: &[T],
    rows: usize,
    classes: usize,
    labels: &[u8],
    scale: T,
    mut delta: Option<&mut [T]>,
) -> f64 {
    let mut total = 0.0f64;
    for r in 0..rows {
        let zr = &z[r * classes..(r + 1) * classes];
        let y = labels[r] as usize;
        let max = zr.iter().fold(T::neg_infinity(), |a, &b| a.max(b));
        let mut sum = T::zero();
        for &v in zr {
            sum = sum + (v - max).exp();
        }
        total += (max + sum.ln() - zr[y]).to64();
        if let Some(d) = delta.as_deref_mut() {
            let dr = &mut d[r * classes..(r + 1) * classes];
            let inv = scale / sum;
            for (o, &v) in dr.iter_mut().zip(zr) {
                *o = (v - max).exp() * inv;
            }
            dr[y] = dr[y] - scale;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn im2col_convolution_matches_a_direct_loop() {
        let s = ConvShape {
            side: 7,
            cin: 3,
            cout: 4,
            k: 3,
        };
        let n = 2;
        let x: Vec<f64> = (0..n * s.in_len())
            .map(|i| (i as f64 * 0.71).sin())
            .collect();
        let w: Vec<f64> = (0..s.cout * s.taps())
            .map(|i| (i as f64 * 0.29).cos())
            .collect();
        let b = vec![0.5, -0.25, 0.125, 1.0];
        let mut cols = vec![0.0; n * s.positions() * s.taps()];
        im2col(&s, &x, n, &mut cols);
        let mut y = vec![0.0; n * s.out_len()];
        linear_forward(&cols, n * s.positions(), &w, &b, &mut y);
        let o = s.out_side();
        for img in 0..n {
            for oh in 0..o {
                for ow in 0..o {
                    for co in 0..s.cout {
                        let mut acc = b[co];
                        for kh in 0..s.k {
                            for kw in 0..s.k {
                                for ci in 0..s.cin {
                                    let xv = x[((img * s.side + oh + kh) * s.side + ow + kw)
                                        * s.cin
                                        + ci];
                                    let wv = w[co * s.taps() + (kh * s.k + kw) * s.cin + ci];
                                    acc += xv * wv;
                                }
                            }
                        }
                        let got = y[((img * o + oh) * o + ow) * s.cout + co];
                        assert!((got - acc).abs() < 1e-12, "{got} vs {acc}");
                    }
                }
            }
        }
    }

    #[test]
    fn direct_convolution_matches_im2col() {
        let n = 2;
        let side = 8;
        let x: Vec<f64> = (0..n * side * side)
            .map(|i| (i as f64 * 0.41).sin())
            .collect();
        let w: Vec<f64> = (0..3 * 9).map(|i| (i as f64 * 0.13).cos()).collect();
        let b = vec![0.1, -0.2, 0.3];
        let mut direct = vec![0.0; n * 3 * 36];
        conv_single_channel::<f64, 3, 6>(&x, n, side, &w, &b, &mut direct);
        let s = ConvShape {
            side,
            cin: 1,
            cout: 3,
            k: 3,
        };
        let mut cols = vec![0.0; n * 36 * 9];
        im2col(&s, &x, n, &mut cols);
        let mut nhwc = vec![0.0; n * 36 * 3];
        linear_forward(&cols, n * 36, &w, &b, &mut nhwc);
        for img in 0..n {
            for c in 0..3 {
                for p in 0..36 {
                    let a = direct[(img * 3 + c) * 36 + p];
                    let e = nhwc[(img * 36 + p) * 3 + c];
                    assert!((a - e).abs() < 1e-12, "{a} vs {e}");
                }
            }
        }
    }

    #[test]
    fn pooling_takes_relu_of_window_maxima_in_both_layouts() {
        // One image 4×4, one channel: planar and NHWC coincide.
        let x: Vec<f64> = vec![
            1., 2., 0., 0., //
            3., 4., 0., 9., //
            -1., -2., 5., 5., //
            -3., -4., 5., 6.,
        ];
        for planar in [true, false] {
            let mut y = vec![0.0; 4];
            let mut arg = vec![0u32; 4];
            if planar {
                pool_relu_planar_to_nhwc(&x, 1, 1, 4, &mut y, &mut arg);
            } else {
                pool_relu_nhwc(&x, 1, 4, 1, &mut y, &mut arg);
            }
            assert_eq!(y, vec![4., 9., 0., 6.]);
            assert_eq!(arg, vec![5, 7, 8, 15]);
        }
        // Two channels: planar input, NHWC output.
        let x2: Vec<f64> = (0..32).map(|i| i as f64).collect();
        let mut y = vec![0.0; 8];
        let mut arg = vec![0u32; 8];
        pool_relu_planar_to_nhwc(&x2, 1, 2, 4, &mut y, &mut arg);
        assert_eq!(y, vec![5., 21., 7., 23., 13., 29., 15., 31.]);
    }

    #[test]
    fn cross_entropy_of_uniform_logits_is_log_classes() {
        let z = vec![0.0f32; 20];
        let mut d = vec![0.0f32; 20];
        let l = softmax_cross_entropy(&z, 2, 10, &[3, 7], 1.0, Some(&mut d));
        assert!((l - 2.0 * 10f64.ln()).abs() < 1e-5);
        assert!((d[3] + 0.9).abs() < 1e-6 && (d[4] - 0.1).abs() < 1e-6);
    }
}
