//! conv1 (5×5, 1 → 6 channels) with ReLU and 2×2 max pooling: forward
//! and weight gradient.

use super::*;

/// Splits one 28×28 image into its even and odd columns:
/// `xs[p·PLANE + row·SPLIT + j] = x[row·28 + 2j + p]`.
#[inline(always)]
pub(crate) fn split_columns<T: Scalar>(x: &[T], xs: &mut [T]) {
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
pub(crate) fn conv1_pool<T: Scalar, V: Vector<T>>(
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
    // Channels per register tile: three (12 accumulators) where 32 vectors
    // fit, one (4) at AVX2; each output's chain is the same. (All six, 24
    // accumulators, left the compiler too few registers for the inputs and
    // the hoisted weight broadcasts: 6% slower training steps at AVX-512.)
    if V::REGS >= 32 {
        conv1_pool_tiles::<T, V, 3>(xs, w, b, p1, arg1);
    } else {
        conv1_pool_tiles::<T, V, 1>(xs, w, b, p1, arg1);
    }
}

/// [`conv1_pool`] with `G` channels' accumulators at a time.
#[inline(always)]
fn conv1_pool_tiles<T: Scalar, V: Vector<T>, const G: usize>(
    xs: &[T; 2 * PLANE],
    w: &[T; CONV1_CHANNELS * KERNEL * KERNEL],
    b: &[T; CONV1_CHANNELS],
    p1: &mut [T],
    arg1: &mut [Codes],
) {
    const C: usize = CONV1_CHANNELS;
    const TAPS: usize = KERNEL * KERNEL;
    for ph in 0..P1_SIDE {
        for c0 in (0..C).step_by(G) {
            // acc[c][dr][parity]: conv rows 2ph + dr, even (0) or odd (1)
            // columns, of channel c0 + c.
            let mut acc = [[[V::splat(T::zero()); 2]; 2]; G];
            for (c, a) in acc.iter_mut().enumerate() {
                *a = [[V::splat(b[c0 + c]); 2]; 2];
            }
            for kh in 0..KERNEL {
                for dr in 0..2 {
                    // The input row's even and odd columns from offsets 0, 1,
                    // 2 (each loaded once, shared by the five taps of the row).
                    let row = 2 * ph + dr + kh;
                    let even: [V; 3] = std::array::from_fn(|j| V::load(&xs[row * SPLIT + j..]));
                    let odd: [V; 3] =
                        std::array::from_fn(|j| V::load(&xs[PLANE + row * SPLIT + j..]));
                    for kw in 0..KERNEL {
                        // Output column 2j (+1) reads input column 2j + kw (+1).
                        let (ve, vo) = if kw % 2 == 0 {
                            (even[kw / 2], odd[kw / 2])
                        } else {
                            (odd[kw / 2], even[kw.div_ceil(2)])
                        };
                        for (c, a) in acc.iter_mut().enumerate() {
                            let wv = V::splat(w[(c0 + c) * TAPS + kh * KERNEL + kw]);
                            a[dr][0] = wv.mul_add(ve, a[dr][0]);
                            a[dr][1] = wv.mul_add(vo, a[dr][1]);
                        }
                    }
                }
            }
            for (c, a) in acc.iter().enumerate() {
                let c = c0 + c;
                let (m, codes) = max4([a[0][0], a[0][1], a[1][0], a[1][1]]);
                let m = relu(m).to_array();
                for pw in 0..P1_SIDE {
                    p1[(ph * P1_SIDE + pw) * C + c] = m[pw];
                }
                arg1[ph * C + c] = codes;
            }
        }
    }
}

/// Rows of [`row_pairs`]' output: every input row a kernel-row pair starts at.
const PAIR_ROWS: usize = SIDE;
/// Columns of [`row_pairs`]' output: every column a window maximum's patch
/// starts at (0..=23).
const PAIR_COLS: usize = CONV1_OUT;
/// Values of [`row_pairs`]' output for one image.
pub(crate) const PAIRS_LEN: usize = PAIR_ROWS * PAIR_COLS * LANES;

/// One image's input as row pairs: `z[(r·24 + c)·16 ..]` holds row r's
/// columns c..c+8 in lanes 0..8 and row r + 1's in lanes 8..16 (zeros past
/// the last row), so that a 5×5 patch at (r, c) is three vectors, kernel rows
/// (0, 1), (2, 3) and (4, –), with its five columns in lanes 0..5 and 8..13.
/// `x` is the image and must extend [`LANES`] values past it.
#[inline(always)]
fn row_pairs<T: Scalar, V: Vector<T>>(x: &[T], z: &mut [T]) {
    let low = V::lanes_from(LANES / 2);
    let zero = V::splat(T::zero());
    for r in 0..PAIR_ROWS {
        for c in 0..PAIR_COLS {
            let top = V::load(&x[r * SIDE + c..]);
            let bottom = if r + 1 < SIDE {
                V::load(&x[(r + 1) * SIDE + c - LANES / 2..])
            } else {
                zero
            };
            V::select(low, bottom, top).store(&mut z[(r * PAIR_COLS + c) * LANES..]);
        }
    }
}

/// conv1's weight and bias gradients from the gradient `dp1` with respect
/// to its pooled outputs `p1` (window codes `arg1`) of `n` images whose
/// input images are `x` (planar 28×28, extending [`LANES`] values past the
/// last image). Overwrites `dw` `(out, kh, kw)` and `db`; `pairs` is scratch
/// ([`PAIRS_LEN`] values).
///
/// Each channel's chain runs over every pooling window in (image, window)
/// order, a window adding its maximum's patch times the gradient that
/// reaches it through the ReLU. The six channels' chains run side by side
/// (18 independent accumulators, three per channel: the patch read as row
/// pairs, see [`row_pairs`]). A window whose gradient is zero adds
/// `±0 · x = ±0` (the input pixels are finite), which leaves every partial
/// sum as it is (a sum started from +0 is never −0), so the result has the
/// bits of the sum over the non-zero windows alone, without branches or
/// term lists.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn conv1_backward<T: Scalar, V: Vector<T>>(
    n: usize,
    x: &[T],
    p1: &[T],
    arg1: &[Codes],
    dp1: &[T],
    dw: &mut [T],
    db: &mut [T],
    pairs: &mut [T],
) {
    const C: usize = CONV1_CHANNELS;
    const PAIRS: usize = KERNEL.div_ceil(2);
    let z: &mut [T; PAIRS_LEN] = (&mut pairs[..PAIRS_LEN]).try_into().expect("row pairs");
    let mut acc = [[V::splat(T::zero()); PAIRS]; C];
    let mut bias = [T::zero(); C];
    for img in 0..n {
        row_pairs::<T, V>(&x[img * SIDE * SIDE..], z);
        let p1i: &[T; P1_LEN] = p1[img * P1_LEN..][..P1_LEN].try_into().expect("p1 image");
        let dp1i: &[T; P1_LEN] = dp1[img * P1_LEN..][..P1_LEN].try_into().expect("dp1 image");
        let codes: &[Codes; P1_SIDE * C] = arg1[img * P1_SIDE * C..][..P1_SIDE * C]
            .try_into()
            .expect("window codes");
        // Channels per register tile: all six (18 accumulators) where 32
        // vectors fit, two (6) at AVX2; each channel's chain runs over the
        // image's windows in the same order either way.
        if V::REGS >= 32 {
            conv1_backward_image::<T, V, C>(z, p1i, dp1i, codes, 0, &mut acc, &mut bias);
        } else {
            for c0 in (0..C).step_by(2) {
                conv1_backward_image::<T, V, 2>(z, p1i, dp1i, codes, c0, &mut acc, &mut bias);
            }
        }
    }
    for c in 0..C {
        db[c] = bias[c];
        for (k, a) in acc[c].iter().enumerate() {
            let v = a.to_array();
            for (half, kh) in [2 * k, 2 * k + 1].into_iter().enumerate() {
                if kh < KERNEL {
                    dw[c * KERNEL * KERNEL + kh * KERNEL..][..KERNEL]
                        .copy_from_slice(&v[half * LANES / 2..][..KERNEL]);
                }
            }
        }
    }
}

/// One image's windows of [`conv1_backward`] for channels `c0..c0 + G`,
/// continuing their accumulators `acc` and bias sums.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn conv1_backward_image<T: Scalar, V: Vector<T>, const G: usize>(
    z: &[T; PAIRS_LEN],
    p1i: &[T; P1_LEN],
    dp1i: &[T; P1_LEN],
    codes: &[Codes; P1_SIDE * CONV1_CHANNELS],
    c0: usize,
    acc: &mut [[V; KERNEL.div_ceil(2)]; CONV1_CHANNELS],
    bias: &mut [T; CONV1_CHANNELS],
) {
    const C: usize = CONV1_CHANNELS;
    // Plain loops, not `array::from_fn`: inside the one large pass function
    // its closure was called out of line, which kept `t` in memory and made
    // every multiply-add of the loop below a load, an FMA and a store.
    let mut t = [[V::splat(T::zero()); KERNEL.div_ceil(2)]; G];
    let mut tb = [T::zero(); G];
    // (Nor `copy_from_slice`: measured 8% slower steps.)
    #[allow(clippy::manual_memcpy)]
    for c in 0..G {
        t[c] = acc[c0 + c];
        tb[c] = bias[c0 + c];
    }
    for ph in 0..P1_SIDE {
        for pw in 0..P1_SIDE {
            let j0 = (ph * P1_SIDE + pw) * C + c0;
            // The window's top-left patch; a maximum's row and column in the
            // window add one pair row or one column (no multiplies per channel).
            let corner = (2 * ph * PAIR_COLS + 2 * pw) * LANES;
            for (c, (a, bc)) in t.iter_mut().zip(tb.iter_mut()).enumerate() {
                let g = through_relu(p1i[j0 + c], dp1i[j0 + c]);
                let (dh, dw_) = code_at(codes[ph * C + c0 + c], pw);
                let at = corner + dh * (PAIR_COLS * LANES) + dw_ * LANES;
                let gv = V::splat(g);
                for (k, ak) in a.iter_mut().enumerate() {
                    *ak = gv.mul_add(V::load(&z[at + 2 * k * PAIR_COLS * LANES..]), *ak);
                }
                *bc = *bc + g;
            }
        }
    }
    acc[c0..c0 + G].copy_from_slice(&t);
    bias[c0..c0 + G].copy_from_slice(&tb);
}
