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
//! | conv2 `dx` (pooled conv1 output) | windows `(ph, pw)`, then the maximum's position in the window, then channels `co` |
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

mod adam;
mod conv1;
mod conv2;
mod fc;

pub(crate) use adam::{AdamStep, adam};
pub(crate) use conv1::{PAIRS_LEN, conv1_backward, conv1_pool, split_columns};
pub(crate) use conv2::{W2_PADDED, conv2_backward, conv2_pool, pad_conv2, transpose_conv2};
pub(crate) use fc::{
    fc_bias_grad, fc_forward_t, fc_input_grad, fc_weight_grad, pad_rows, rows_from_t, softmax_t,
};

/// Width of the row vectors of the internal layouts (one AVX-512 register of
/// `f32`). Layouts are padded to it; it is a property of the layout, not of
/// the CPU, so results never depend on it.
pub(crate) const LANES: usize = 16;

/// The float types the network runs in (`f32` for training, `f64` for checks).
pub(crate) trait Scalar: Float + Debug + Default + Send + Sync + Kernels + 'static {
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
pub(crate) fn exp_f64(x: f64) -> f64 {
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
pub(crate) type Codes = u32;

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
pub(crate) struct ConvShape {
    /// Side of the square input.
    pub(crate) side: usize,
    /// Input channels.
    pub(crate) cin: usize,
    /// Output channels.
    pub(crate) cout: usize,
    /// Side of the square kernel.
    pub(crate) k: usize,
}

impl ConvShape {
    /// Side of the output, `side − k + 1`.
    pub(crate) fn out_side(&self) -> usize {
        self.side + 1 - self.k
    }
    /// Taps per output channel, `k·k·cin` (a row of the weight tensor).
    pub(crate) fn taps(&self) -> usize {
        self.k * self.k * self.cin
    }
    /// Output positions per image.
    pub(crate) fn positions(&self) -> usize {
        self.out_side() * self.out_side()
    }
    /// Input values per image.
    pub(crate) fn in_len(&self) -> usize {
        self.side * self.side * self.cin
    }
    /// Output values per image.
    pub(crate) fn out_len(&self) -> usize {
        self.positions() * self.cout
    }
}

/// Row stride of the even/odd column planes of conv1's input (14 columns
/// used; the rest stays zero and feeds only discarded lanes).
pub(crate) const SPLIT: usize = 32;
/// Values in one even/odd plane.
pub(crate) const PLANE: usize = SIDE * SPLIT;
/// Side of conv1's pooled output.
pub(crate) const P1_SIDE: usize = CONV1_OUT / 2;
/// Values of conv1's pooled output per image (12 × 12 × 6, NHWC).
pub(crate) const P1_LEN: usize = P1_SIDE * P1_SIDE * CONV1_CHANNELS;
/// Output side of conv2.
pub(crate) const CONV2_OUT: usize = P1_SIDE + 1 - KERNEL;
/// Side of conv2's pooled output.
pub(crate) const P2_SIDE: usize = CONV2_OUT / 2;
/// Taps of a conv2 output channel (5 × 5 × 6).
pub(crate) const TAPS2: usize = KERNEL * KERNEL * CONV1_CHANNELS;
/// One kernel row of conv2's taps: 5 pixels × 6 channels, contiguous in NHWC.
const RUN2: usize = KERNEL * CONV1_CHANNELS;

/// The gradient a pooled value passes to its window's maximum: `g` if the
/// pooled value `v` is positive, else 0 (ReLU).
#[inline(always)]
fn through_relu<T: Scalar>(v: T, g: T) -> T {
    if v > T::zero() { g } else { T::zero() }
}

#[cfg(test)]
mod tests;
