//! conv2 (5×5, 6 → 16 channels) with ReLU and 2×2 max pooling: forward,
//! weight gradient and input gradient.

use super::*;

/// conv2's weights `(out, kh, kw, in)` transposed to `(tap, out)`: one row
/// vector of the 16 output channels per tap.
#[inline(always)]
pub(crate) fn transpose_conv2<T: Scalar>(w: &[T], wt: &mut [T]) {
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
pub(crate) fn conv2_pool<T: Scalar, V: Vector<T>>(
    p1: &[T],
    wt: &[T],
    b: &[T],
    p2: &mut [T],
    arg2: &mut [Codes],
) {
    const _: () = assert!(CONV2_CHANNELS == LANES);
    let bias = V::load(b);
    for ph in 0..P2_SIDE {
        let mut acc = [[bias; CONV2_OUT]; 2];
        // Register tiles: both conv rows × all eight columns (16
        // accumulators) where 32 vectors fit; at AVX2 both rows × three,
        // three and two columns (6 accumulators of two registers each: 12
        // of the 16, with the weight vector and a broadcast; one row × four
        // columns left only 8 chains in flight for two FMA pipes of
        // latency 4). Each output's chain is the same.
        if V::REGS >= 32 {
            conv2_tile::<T, V, 2, CONV2_OUT>(p1, wt, ph, 0, 0, &mut acc);
        } else {
            const _: () = assert!(CONV2_OUT == 8);
            conv2_tile::<T, V, 2, 3>(p1, wt, ph, 0, 0, &mut acc);
            conv2_tile::<T, V, 2, 3>(p1, wt, ph, 0, 3, &mut acc);
            conv2_tile::<T, V, 2, 2>(p1, wt, ph, 0, 6, &mut acc);
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

/// Conv rows `2ph + dr0..+DR`, columns `ow0..+OW` of [`conv2_pool`]'s
/// accumulators, each continued from `acc` over every (kh, kw, ci) in order.
#[inline(always)]
fn conv2_tile<T: Scalar, V: Vector<T>, const DR: usize, const OW: usize>(
    p1: &[T],
    wt: &[T],
    ph: usize,
    dr0: usize,
    ow0: usize,
    acc: &mut [[V; CONV2_OUT]; 2],
) {
    const C: usize = CONV1_CHANNELS;
    let mut t: [[V; OW]; DR] =
        std::array::from_fn(|d| std::array::from_fn(|o| acc[dr0 + d][ow0 + o]));
    // Fixed-length slices (a tap's weights, a tile row's inputs), so that
    // the loops over channels and columns index them without bounds checks.
    for kh in 0..KERNEL {
        let mut rows: [&[T]; DR] = [&[]; DR];
        for (d, r) in rows.iter_mut().enumerate() {
            *r = &p1[(2 * ph + dr0 + d + kh) * P1_SIDE * C + ow0 * C..][..(OW + KERNEL - 1) * C];
        }
        for kw in 0..KERNEL {
            let wk = &wt[(kh * KERNEL + kw) * C * LANES..][..C * LANES];
            let mut segs: [&[T]; DR] = [&[]; DR];
            for (s, r) in segs.iter_mut().zip(&rows) {
                *s = &r[kw * C..][..OW * C];
            }
            for ci in 0..C {
                let wv = V::load(&wk[ci * LANES..]);
                for (a, seg) in t.iter_mut().zip(&segs) {
                    for (o, v) in a.iter_mut().enumerate() {
                        *v = V::splat(seg[o * C + ci]).mul_add(wv, *v);
                    }
                }
            }
        }
    }
    for (d, a) in t.iter().enumerate() {
        acc[dr0 + d][ow0..ow0 + OW].copy_from_slice(a);
    }
}

/// conv2's weight and bias gradients and its input gradient, from the
/// gradient `dp2` with respect to the pooled outputs `p2` (window codes
/// `arg2`) of `n` images, the pooled conv1 outputs `p1` and the weights
/// `w2p` `(out, kh, kw, in)` laid out by [`pad_conv2`]. Overwrites `dw`,
/// `db` and the first `n` images of `dp1` (NHWC, like `p1`); `grads` is
/// scratch (`n·16 × 16` values: each window's gradients by channel). `p1`
/// and `dp1` must extend [`LANES`] values past the last image (a kernel
/// row's second vector reaches two values beyond it, a window patch's third
/// vector eight). Windows whose gradient is zero add nothing to the input
/// gradient and are skipped there; see below for the weight gradient.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn conv2_backward<T: Scalar, V: Vector<T>>(
    n: usize,
    p1: &[T],
    p2: &[T],
    arg2: &[Codes],
    dp2: &[T],
    w2p: &[T],
    dw: &mut [T],
    db: &mut [T],
    dp1: &mut [T],
    grads: &mut [T],
) {
    const C2: usize = CONV2_CHANNELS;
    const WINDOWS: usize = P2_SIDE * P2_SIDE;
    const ROW: usize = P1_SIDE * CONV1_CHANNELS;
    let grads = &mut grads[..n * WINDOWS * C2];
    // Input gradient: image by image, window by window; within a window, by
    // the position of the maximum (code order), then channel by channel. A
    // window's maxima read a 6 × 6-pixel patch of `dp1` (6 rows of 36
    // values), held in registers while the window's channels add into it and
    // written back once. The patch's rows are read as three vectors from a
    // column [`patch_base`] that depends only on the window's column, so
    // that neighbouring windows touch the same vectors (not overlapping
    // ones, which would stall the load on the store before it); each channel
    // adds its weights, read shifted to the maximum's column within the
    // patch from [`pad_conv2`]'s zero-gapped rows, to rows dh..dh + 5. Lanes a weight does not cover
    // add g·0 = ±0, which leaves every non-zero value as it is (only the
    // sign of a zero can differ, and conv1's backward adds a zero gradient's
    // ±0 terms without effect either way). The same pass keeps each
    // window's gradients in `grads` for the weight gradient.
    let zero = V::splat(T::zero());
    for img in 0..n {
        let d = &mut dp1[img * P1_LEN..];
        d[..P1_LEN].fill(T::zero());
        for ph in 0..P2_SIDE {
            for pw in 0..P2_SIDE {
                let win = img * WINDOWS + ph * P2_SIDE + pw;
                let j0 = win * C2;
                // The window's 16 channels at once: the gradients through
                // the ReLU, the live (non-zero) ones as a bit mask, split by
                // the maximum's position q = 2·dh + dw.
                let gv = V::select(V::load(&p2[j0..]).gt(zero), V::load(&dp2[j0..]), zero);
                gv.store(&mut grads[j0..]);
                let gs: &[T; LANES] = grads[j0..j0 + LANES].try_into().expect("a window");
                // Lanes whose gradient differs from ±0 (a NaN one included,
                // as `!=` has it).
                let live = V::bits(gv.ne(zero));
                let codes = arg2[win];
                let (dws, dhs) = (codes & 0xffff, codes >> LANES);
                let by_code = [
                    live & !dhs & !dws,
                    live & !dhs & dws,
                    live & dhs & !dws,
                    live & dhs & dws,
                ];
                if live == 0 {
                    continue;
                }
                let at = 2 * ph * ROW + patch_base(pw);
                let mut acc = [[V::splat(T::zero()); 3]; KERNEL + 1];
                for (r, a) in acc.iter_mut().enumerate() {
                    let base = at + r * ROW;
                    for (v, x) in a.iter_mut().enumerate() {
                        *x = V::load(&d[base + v * LANES..]);
                    }
                }
                let (s0, s1) = (patch_shift(2 * pw), patch_shift(2 * pw + 1));
                acc = window_input_grad::<T, V, 0>(acc, by_code[0], gs, w2p, s0);
                acc = window_input_grad::<T, V, 0>(acc, by_code[1], gs, w2p, s1);
                acc = window_input_grad::<T, V, 1>(acc, by_code[2], gs, w2p, s0);
                acc = window_input_grad::<T, V, 1>(acc, by_code[3], gs, w2p, s1);
                for (r, a) in acc.iter().enumerate() {
                    let base = at + r * ROW;
                    for (v, x) in a.iter().enumerate() {
                        x.store(&mut d[base + v * LANES..]);
                    }
                }
            }
        }
    }
    // Weight and bias gradients: channel by channel, accumulated in registers
    // over every window in (image, window) order (lanes 14 and 15 of each
    // kernel row's second vector are discarded). A window whose gradient is
    // ±0 (a fifth of them, measured on MNIST) adds ±0·x = ±0 to every sum,
    // which leaves it as it is (a sum started from +0 is never −0; `p1`,
    // pooled ReLU outputs of a finite forward pass, is finite): the bits of
    // the chain over the live windows alone, without the per-channel term
    // lists whose building, a data-dependent branch and store per live
    // channel, cost more than the dead windows' multiply-adds.
    for co in 0..C2 {
        let mut acc = [[V::splat(T::zero()); 2]; KERNEL];
        let mut bias = T::zero();
        for img in 0..n {
            // Fixed-size views: the offsets below are provably in range.
            let xi: &[T; P1_LEN + LANES] = p1[img * P1_LEN..][..P1_LEN + LANES]
                .try_into()
                .expect("a p1 image");
            let gi: &[T; WINDOWS * C2] = grads[img * WINDOWS * C2..][..WINDOWS * C2]
                .try_into()
                .expect("an image's window gradients");
            let ci: &[Codes; WINDOWS] = arg2[img * WINDOWS..][..WINDOWS]
                .try_into()
                .expect("an image's window codes");
            for ph in 0..P2_SIDE {
                for pw in 0..P2_SIDE {
                    let win = ph * P2_SIDE + pw;
                    let g = gi[win * C2 + co];
                    let (dh, dw_) = code_at(ci[win], co);
                    let at = (2 * ph + dh) * ROW + (2 * pw + dw_) * CONV1_CHANNELS;
                    bias = bias + g;
                    let gv = V::splat(g);
                    for (kh, a) in acc.iter_mut().enumerate() {
                        a[0] = gv.mul_add(V::load(&xi[at + kh * ROW..]), a[0]);
                        a[1] = gv.mul_add(V::load(&xi[at + kh * ROW + LANES..]), a[1]);
                    }
                }
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

/// Column (in values from the row start) of the three vectors through which
/// [`conv2_backward`] reads the `dp1` patch of the windows in pooled column
/// `pw`: the multiple of [`LANES`] at or below the patch's first value
/// (`12·pw`), so that the patch (36 values) still fits in three vectors.
#[inline(always)]
const fn patch_base(pw: usize) -> usize {
    (2 * pw * CONV1_CHANNELS) / LANES * LANES
}

/// Lane at which a kernel row's 30 values start within a window patch read
/// from [`patch_base`], for shift `k = 2·pw + dw` (window column `pw`, the
/// maximum's column `dw` within the window).
#[inline(always)]
const fn patch_shift(k: usize) -> usize {
    let (pw, dw) = (k / 2, k % 2);
    (2 * pw + dw) * CONV1_CHANNELS - patch_base(pw)
}

/// The input-gradient contributions of one pooling window's maxima in
/// patch row `DH` (`channels`: a bit per channel, taken in channel order;
/// `gs`: the window's gradients by channel) to the window's patch `acc` of
/// `dp1` (rows, three vectors per row; see [`conv2_backward`]), with the
/// weights `w2p` ([`pad_conv2`]) read shifted by `shift` lanes
/// ([`patch_shift`] of the maxima's column): each kernel row's three
/// vectors start `shift` values before the row, inside the zeros between
/// rows, so they hold the row's 30 values from lane `shift` on and zeros
/// elsewhere.
#[inline(always)]
fn window_input_grad<T: Scalar, V: Vector<T>, const DH: usize>(
    mut acc: [[V; 3]; KERNEL + 1],
    mut channels: u32,
    gs: &[T; LANES],
    w2p: &[T],
    shift: usize,
) -> [[V; 3]; KERNEL + 1] {
    const ROWS: usize = KERNEL * ROW2P;
    debug_assert!(shift <= GAP2);
    while channels != 0 {
        let co = channels.trailing_zeros() as usize;
        channels &= channels - 1;
        let gv = V::splat(gs[co]);
        let wr: &[T; ROWS] = w2p[GAP2 - shift + co * ROWS..][..ROWS]
            .try_into()
            .expect("a channel's padded weights");
        for (kh, a) in acc[DH..DH + KERNEL].iter_mut().enumerate() {
            for (v, x) in a.iter_mut().enumerate() {
                *x = gv.mul_add(V::load(&wr[kh * ROW2P + v * LANES..]), *x);
            }
        }
    }
    acc
}

/// Values per kernel row in [`pad_conv2`]'s layout: the row's 30 values and
/// the [`GAP2`] zeros after them (three vectors).
const ROW2P: usize = 3 * LANES;

/// Zeros before each kernel row in [`pad_conv2`]'s layout: the largest
/// [`patch_shift`], so that a row read from `shift` values before its start
/// sees zeros there.
const GAP2: usize = ROW2P - RUN2;
const _: () = {
    let mut k = 0;
    while k < 2 * P2_SIDE {
        assert!(patch_shift(k) <= GAP2);
        k += 1;
    }
};

/// conv2's weights `(out, kh, kw, in)` laid out for [`conv2_backward`]'s
/// input gradient: [`GAP2`] zeros, then for each output channel and kernel
/// row its 30 values followed by [`GAP2`] zeros (a stride of three vectors).
/// One copy serves every shift ([`window_input_grad`]); 15 KB at f32,
/// where eight pre-shifted copies (123 KB) did not fit in L1.
#[inline(always)]
pub(crate) fn pad_conv2<T: Scalar>(w: &[T], wp: &mut [T]) {
    wp[..W2_PADDED].fill(T::zero());
    for co in 0..CONV2_CHANNELS {
        for kh in 0..KERNEL {
            let at = GAP2 + (co * KERNEL + kh) * ROW2P;
            wp[at..at + RUN2].copy_from_slice(&w[co * TAPS2 + kh * RUN2..][..RUN2]);
        }
    }
}

/// Values of [`pad_conv2`]'s output.
pub(crate) const W2_PADDED: usize = GAP2 + CONV2_CHANNELS * KERNEL * ROW2P;
