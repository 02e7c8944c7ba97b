//! conv1 (5×5, 1 → 6 channels) with ReLU and 2×2 max pooling: forward
//! and weight gradient.

use super::*;

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
    const _: () = assert!(C.is_multiple_of(3));
    // Three channels at a time, their chains interleaved (each channel's
    // terms still in order) so that 15 independent accumulators hide the
    // latency of the fused multiply-adds; acc[j][kh]: lanes kw < 5 are kept.
    for c0 in (0..C).step_by(3) {
        let (l0, l1, l2) = (
            &terms[c0 * per_channel..][..count[c0]],
            &terms[(c0 + 1) * per_channel..][..count[c0 + 1]],
            &terms[(c0 + 2) * per_channel..][..count[c0 + 2]],
        );
        let zero = ([V::splat(T::zero()); KERNEL], T::zero());
        let (mut s0, mut s1, mut s2) = (zero, zero, zero);
        let common = l0.len().min(l1.len()).min(l2.len());
        for ((&t0, &t1), &t2) in l0.iter().zip(l1).zip(l2) {
            s0 = conv1_term::<T, V>(s0, t0, x);
            s1 = conv1_term::<T, V>(s1, t1, x);
            s2 = conv1_term::<T, V>(s2, t2, x);
        }
        for (j, (mut st, rest)) in [(s0, l0), (s1, l1), (s2, l2)].into_iter().enumerate() {
            for &t in &rest[common..] {
                st = conv1_term::<T, V>(st, t, x);
            }
            let c = c0 + j;
            db[c] = st.1;
            for (kh, a) in st.0.iter().enumerate() {
                dw[c * KERNEL * KERNEL + kh * KERNEL..][..KERNEL]
                    .copy_from_slice(&a.to_array()[..KERNEL]);
            }
        }
    }
}

/// One weight-gradient term of conv1 added to a channel's accumulators
/// (`acc[kh]`, lanes kw) and bias sum.
#[inline(always)]
fn conv1_term<T: Scalar, V: Vector<T>>(
    (mut acc, bias): ([V; KERNEL], T),
    t: Term<T>,
    x: &[T],
) -> ([V; KERNEL], T) {
    const SPAN: usize = (KERNEL - 1) * SIDE + LANES;
    let at = t.at as usize;
    let xi: &[T; SPAN] = x[at..at + SPAN].try_into().expect("a patch of the input");
    let gv = V::splat(t.g);
    for (kh, a) in acc.iter_mut().enumerate() {
        *a = gv.mul_add(V::load(&xi[kh * SIDE..]), *a);
    }
    (acc, bias + t.g)
}
