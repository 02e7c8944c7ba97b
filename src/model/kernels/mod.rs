//! Numeric kernels shared by the models: a sparse row matrix, the products
//! MLR needs, and portable `exp`/`ln`.
//!
//! Determinism: every output element is computed by the same sequence of
//! IEEE operations whatever the width of the right-hand side (one trial or a
//! cohort of stacked trials), the kernel level ([`crate::simd`]) or the
//! thread count. Multiply-adds are fused (`mul_add`, correctly rounded on
//! every platform, so the portable level gives the vector levels' bits);
//! there are no library transcendental functions, whose last bits differ
//! between platforms.

pub(crate) mod block;

pub(crate) use block::{BlockCsc, RowGroups, block_forward, block_gradient, block_gradient_chunk};

/// A sparse matrix in compressed-row form with `u16` column indices.
#[derive(Clone, Debug, Default)]
pub(crate) struct Csr {
    /// Number of rows.
    pub(crate) rows: usize,
    /// Number of columns (at most 65,536).
    pub(crate) cols: usize,
    /// `row_ptr[i]..row_ptr[i+1]` indexes row i's entries.
    pub(crate) row_ptr: Vec<u32>,
    /// Column of each entry (increasing within a row).
    pub(crate) col: Vec<u16>,
    /// Value of each entry.
    pub(crate) val: Vec<f32>,
}

impl Csr {
    /// The non-zeros of a dense row-major `rows × cols` matrix.
    pub(crate) fn from_dense(x: &[f32], rows: usize, cols: usize) -> Csr {
        assert!(cols <= 1 << 16, "Csr supports at most 65,536 columns");
        assert_eq!(x.len(), rows * cols);
        let nnz = x.iter().filter(|v| **v != 0.0).count();
        assert!(
            nnz <= u32::MAX as usize,
            "too many non-zeros for u32 row pointers"
        );
        let mut row_ptr = Vec::with_capacity(rows + 1);
        let mut col = Vec::with_capacity(nnz);
        let mut val = Vec::with_capacity(nnz);
        row_ptr.push(0);
        for r in 0..rows {
            for (j, &v) in x[r * cols..(r + 1) * cols].iter().enumerate() {
                if v != 0.0 {
                    col.push(j as u16);
                    val.push(v);
                }
            }
            row_ptr.push(col.len() as u32);
        }
        Csr {
            rows,
            cols,
            row_ptr,
            col,
            val,
        }
    }

    /// Number of stored entries.
    pub(crate) fn nnz(&self) -> usize {
        self.val.len()
    }

    /// The entries of row `r` as (columns, values).
    #[inline]
    pub(crate) fn row(&self, r: usize) -> (&[u16], &[f32]) {
        let a = self.row_ptr[r] as usize;
        let b = self.row_ptr[r + 1] as usize;
        (&self.col[a..b], &self.val[a..b])
    }
}

const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;

/// e^x in f32, portable (same bits on every platform and kernel level),
/// relative error below 1e-6 on [−87, 88]; arguments are clamped to that
/// range (so e^x ≥ 1.6e-38). Range reduction x = n·ln2 + r with n the
/// nearest integer to x·log2(e) (by the 1.5·2²³ rounding trick, ties to
/// even) and |r| ≤ ln2/2, a degree-6 Taylor polynomial for e^r, then
/// scaling by 2^n built from its bits. Branch-free and free of float-to-int
/// conversions, so loops over it vectorize.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23
    let x = x.clamp(-87.0, 88.0);
    let tm = x * std::f32::consts::LOG2_E + MAGIC;
    let nf = tm - MAGIC;
    let n = (tm.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = (x - nf * LN2_HI) - nf * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let bits = ((n + 127) as u32) << 23;
    p * f32::from_bits(bits)
}

/// ln(x) for x > 0 in f64, portable: x = m·2^e with m ∈ [1/√2, √2), then
/// ln m = 2·atanh(t), t = (m − 1)/(m + 1), by its series to t¹⁵
/// (|t| ≤ 0.172, error below 1e-14).
#[inline]
pub(crate) fn ln_f64(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
    ln_f64_lane(x)
}

/// [`ln_f64`] for one lane of a loop over many: the same operations in the
/// same order (so the same bits for every x > 0), with the halving of m as
/// a select instead of a branch, so that the loop vectorises. Defined for
/// any input (a meaningless value where x ≤ 0 or is not finite), for the
/// lanes of a block that are computed and then discarded.
#[inline(always)]
pub(crate) fn ln_f64_lane(x: f64) -> f64 {
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let big = m > std::f64::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = e + i64::from(big);
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let s = t
        * (1.0
            + t2 * (1.0 / 3.0
                + t2 * (1.0 / 5.0
                    + t2 * (1.0 / 7.0
                        + t2 * (1.0 / 9.0 + t2 * (1.0 / 11.0 + t2 * (1.0 / 13.0 + t2 / 15.0)))))));
    2.0 * s + e as f64 * std::f64::consts::LN_2
}

/// Cross-entropy and softmax for one example under `a` stacked models.
///
/// `z` holds the example's logits for `a` models in class-major order
/// (`z[c*a + s]` = logit of class c under model s, `classes` classes). For
/// each model s: `loss[s] += −log softmax(z_s)_label`, computed as
/// max + ln Σ exp(z − max) − z_label; and, if `delta` is given,
/// `delta[c*a + s] = softmax(z_s)_c − [c = label]`. `e`, `maxv`, `sumv` are
/// scratch of lengths `classes·a`, `a`, `a`. Every model's numbers are the
/// same bits whatever `a` is.
///
/// Where the buffers have room ([`softmax_blocks_fit`]: `z` readable
/// [`SOFTMAX_BLOCK`] values past its last member's start, as a padded row
/// of a stacked pass is, and the scratch sized by [`softmax_scratch`]), the
/// maxima, exponentials and sums run over blocks of [`SOFTMAX_BLOCK`]
/// members (whole vectors, whatever `a` is; the lanes past `a` read the
/// row's other values and are discarded), class by class as below: per
/// member the same operations in the same order, so the same bits (a test
/// compares the two ways).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn softmax_cross_entropy(
    z: &[f32],
    a: usize,
    classes: usize,
    label: usize,
    e: &mut [f32],
    maxv: &mut [f32],
    sumv: &mut [f32],
    loss: &mut [f64],
    delta: Option<&mut [f32]>,
) {
    if softmax_blocks_fit(z.len(), a, classes, e.len(), maxv.len().min(sumv.len())) {
        softmax_blocked(z, a, classes, label, e, maxv, sumv, loss, delta);
    } else {
        softmax_flat(z, a, classes, label, e, maxv, sumv, loss, delta);
    }
}

/// Members per block of [`softmax_cross_entropy`]'s blocked form (one
/// AVX-512 vector of `f32`).
pub(crate) const SOFTMAX_BLOCK: usize = 16;

/// Lengths of the scratch `(e, maxv and sumv)` that let
/// [`softmax_cross_entropy`] run in blocks for `a` members of `classes`.
pub(crate) fn softmax_scratch(a: usize, classes: usize) -> (usize, usize) {
    let a16 = a.next_multiple_of(SOFTMAX_BLOCK);
    (classes * a16, a16)
}

/// Whether buffers of these lengths let [`softmax_cross_entropy`] run in
/// blocks: `z` readable up to the last class's last block.
pub(crate) fn softmax_blocks_fit(
    z: usize,
    a: usize,
    classes: usize,
    e: usize,
    scratch: usize,
) -> bool {
    let (want_e, want_s) = softmax_scratch(a, classes);
    classes > 0 && z >= (classes - 1) * a + want_s && e >= want_e && scratch >= want_s
}

/// [`softmax_cross_entropy`] in blocks of [`SOFTMAX_BLOCK`] members; `e`
/// holds class c's block at `c·a16` (a16 = `a` rounded up to a block).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn softmax_blocked(
    z: &[f32],
    a: usize,
    classes: usize,
    label: usize,
    e: &mut [f32],
    maxv: &mut [f32],
    sumv: &mut [f32],
    loss: &mut [f64],
    delta: Option<&mut [f32]>,
) {
    const B: usize = SOFTMAX_BLOCK;
    let a16 = a.next_multiple_of(B);
    for s0 in (0..a).step_by(B) {
        let mut m: [f32; B] = z[s0..s0 + B].try_into().expect("a block");
        for c in 1..classes {
            let zc: &[f32; B] = z[c * a + s0..][..B].try_into().expect("a block");
            for l in 0..B {
                m[l] = m[l].max(zc[l]);
            }
        }
        let mut sum = [0f32; B];
        for c in 0..classes {
            let zc: &[f32; B] = z[c * a + s0..][..B].try_into().expect("a block");
            let ec: &mut [f32; B] = (&mut e[c * a16 + s0..][..B]).try_into().expect("a block");
            for l in 0..B {
                ec[l] = exp_f32(zc[l] - m[l]);
                sum[l] += ec[l];
            }
        }
        maxv[s0..s0 + B].copy_from_slice(&m);
        sumv[s0..s0 + B].copy_from_slice(&sum);
        // The block's losses in halves of eight `f64` lanes (one vector;
        // a half holding no member is skipped: its division would cost as
        // much as a member's scalar one several times over).
        let zy: &[f32; B] = z[label * a + s0..][..B].try_into().expect("a block");
        for h in (0..B).step_by(B / 2) {
            let live = (a - s0).saturating_sub(h).min(B / 2);
            if live == 0 {
                break;
            }
            let mut t = [0f64; B / 2];
            for (l, tl) in t.iter_mut().enumerate() {
                let k = h + l;
                *tl = m[k] as f64 + ln_f64_lane(sum[k] as f64) - zy[k] as f64;
            }
            for (lv, &tv) in loss[s0 + h..s0 + h + live].iter_mut().zip(&t) {
                *lv += tv;
            }
        }
    }
    if let Some(delta) = delta {
        for s0 in (0..a16).step_by(B) {
            let inv: &mut [f32; B] = (&mut sumv[s0..s0 + B]).try_into().expect("a block");
            for v in inv.iter_mut() {
                *v = 1.0 / *v;
            }
        }
        let delta = &mut delta[..classes * a];
        for (c, dc) in delta.chunks_exact_mut(a).enumerate() {
            for ((d, &iv), &ev) in dc.iter_mut().zip(&sumv[..a]).zip(&e[c * a16..c * a16 + a]) {
                *d = iv * ev;
            }
        }
        for d in delta[label * a..(label + 1) * a].iter_mut() {
            *d -= 1.0;
        }
    }
}

/// [`softmax_cross_entropy`] over the `classes·a` entries as they lie.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn softmax_flat(
    z: &[f32],
    a: usize,
    classes: usize,
    label: usize,
    e: &mut [f32],
    maxv: &mut [f32],
    sumv: &mut [f32],
    loss: &mut [f64],
    delta: Option<&mut [f32]>,
) {
    let (maxv, sumv, e) = (&mut maxv[..a], &mut sumv[..a], &mut e[..classes * a]);
    maxv.copy_from_slice(&z[..a]);
    for c in 1..classes {
        for (m, &v) in maxv.iter_mut().zip(&z[c * a..(c + 1) * a]) {
            *m = m.max(v);
        }
    }
    // exp(z − max) over the whole row at once (one flat loop over
    // `classes·a` entries vectorises whatever `a` is): `e` first holds each
    // entry's member max, then its exponential — per entry the same
    // operations as one member alone.
    for ec in e.chunks_exact_mut(a) {
        ec.copy_from_slice(maxv);
    }
    for (ev, &zv) in e.iter_mut().zip(z) {
        *ev = exp_f32(zv - *ev);
    }
    sumv.fill(0.0);
    for ec in e.chunks_exact(a) {
        for (sv, &ev) in sumv.iter_mut().zip(ec) {
            *sv += ev;
        }
    }
    let zy = &z[label * a..(label + 1) * a];
    for (((l, &m), &sv), &zv) in loss[..a]
        .iter_mut()
        .zip(maxv.iter())
        .zip(sumv.iter())
        .zip(zy)
    {
        *l += m as f64 + ln_f64(sv as f64) - zv as f64;
    }
    if let Some(delta) = delta {
        // The same flat loop: `delta` first holds each entry's 1/Σ.
        let delta = &mut delta[..classes * a];
        for sv in sumv.iter_mut() {
            *sv = 1.0 / *sv;
        }
        for dc in delta.chunks_exact_mut(a) {
            dc.copy_from_slice(sumv);
        }
        for (d, &ev) in delta.iter_mut().zip(e.iter()) {
            *d *= ev;
        }
        for d in delta[label * a..(label + 1) * a].iter_mut() {
            *d -= 1.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocked softmax gives the flat one's bits for every member count
    /// (one block, several, a partial last block), with ties, signed
    /// zeros and spreads past exp's range, losses and deltas alike.
    #[test]
    fn the_softmax_in_blocks_gives_the_flat_bits() {
        for classes in [7, 10] {
            for a in [1, 2, 5, 10, 15, 16, 17, 31, 33, 51] {
                let (ne, ns) = softmax_scratch(a, classes);
                // A padded row: a·classes logits, then a block of other values.
                let z: Vec<f32> = (0..a * classes + SOFTMAX_BLOCK)
                    .map(|i| match (i * 7919 + a) % 11 {
                        0 => 0.0,
                        1 => -0.0,
                        2 => 3.5,
                        3 => -120.0,
                        _ => ((i * 37 + classes) % 101) as f32 * 0.173 - 8.0,
                    })
                    .collect();
                assert!(softmax_blocks_fit(z.len(), a, classes, ne, ns));
                assert!(!softmax_blocks_fit(a * classes, a, classes, ne, ns) || a % 16 == 0);
                for label in [0, classes - 1] {
                    let (mut e, mut m, mut s) = (vec![0.0; ne], vec![0.0; ns], vec![0.0; ns]);
                    let (mut loss, mut delta) = (vec![0.25f64; a], vec![0f32; a * classes]);
                    softmax_blocked(
                        &z,
                        a,
                        classes,
                        label,
                        &mut e,
                        &mut m,
                        &mut s,
                        &mut loss,
                        Some(&mut delta),
                    );
                    let (mut e2, mut m2, mut s2) =
                        (vec![0.0; a * classes], vec![0.0; a], vec![0.0; a]);
                    let (mut loss2, mut delta2) = (vec![0.25f64; a], vec![0f32; a * classes]);
                    softmax_flat(
                        &z,
                        a,
                        classes,
                        label,
                        &mut e2,
                        &mut m2,
                        &mut s2,
                        &mut loss2,
                        Some(&mut delta2),
                    );
                    let bits32 = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    let bits64 = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits64(&loss),
                        bits64(&loss2),
                        "loss, a = {a}, {classes} classes"
                    );
                    assert_eq!(
                        bits32(&delta),
                        bits32(&delta2),
                        "delta, a = {a}, {classes} classes"
                    );
                    assert!(loss.iter().all(|l| l.is_finite() && *l > 0.25));
                }
            }
        }
    }

    #[test]
    fn exp_and_ln_are_accurate() {
        for i in -8700..=8800 {
            let x = i as f32 * 0.01;
            if x > 88.0 {
                break;
            }
            let want = (x as f64).exp();
            let got = exp_f32(x) as f64;
            assert!(
                ((got - want) / want).abs() < 1e-6,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert!(exp_f32(-100.0) < 1e-37 && exp_f32(-100.0) > 0.0);
        for i in 1..2000 {
            let x = i as f64 * 0.37;
            assert!((ln_f64(x) - x.ln()).abs() < 1e-13, "ln({x})");
        }
        assert!((ln_f64(1e-300) - 1e-300f64.ln()).abs() < 1e-10);
    }

    /// The lane form's select gives the bits of the branch it replaced
    /// (written out here as it was), on both sides of m = √2, at powers of
    /// two and over a spread of magnitudes.
    #[test]
    fn ln_in_lanes_gives_the_bits_of_the_branch() {
        fn branch(x: f64) -> f64 {
            let bits = x.to_bits();
            let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
            let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
            if m > std::f64::consts::SQRT_2 {
                m *= 0.5;
                e += 1;
            }
            let t = (m - 1.0) / (m + 1.0);
            let t2 = t * t;
            let s = t
                * (1.0
                    + t2 * (1.0 / 3.0
                        + t2 * (1.0 / 5.0
                            + t2 * (1.0 / 7.0
                                + t2 * (1.0 / 9.0
                                    + t2 * (1.0 / 11.0 + t2 * (1.0 / 13.0 + t2 / 15.0)))))));
            2.0 * s + e as f64 * std::f64::consts::LN_2
        }
        let root = std::f64::consts::SQRT_2;
        let mut xs = vec![1.0, 2.0, 0.5, 1e-300, 1e300, f64::MIN_POSITIVE, f64::MAX];
        for k in -60..60 {
            let p = 2f64.powi(k);
            for m in [
                1.0,
                root,
                f64::from_bits(root.to_bits() + 1),
                f64::from_bits(root.to_bits() - 1),
            ] {
                xs.push(m * p);
            }
        }
        xs.extend((1..20_000).map(|i| (i as f64 * 0.618_034).powf(1.7) * 1e-3));
        // And the f32 sums the softmax takes it of, widened.
        xs.extend((1..20_000).map(|i| (1.0 + i as f32 * 0.000_731) as f64));
        let lanes: Vec<f64> = xs.iter().map(|&x| ln_f64_lane(x)).collect();
        for (&x, &got) in xs.iter().zip(&lanes) {
            assert_eq!(got.to_bits(), branch(x).to_bits(), "ln({x})");
            assert_eq!(ln_f64(x).to_bits(), got.to_bits(), "ln({x})");
        }
    }

    #[test]
    fn exp_is_accurate_on_a_dense_grid_of_negative_arguments() {
        // Softmax arguments z − max are ≤ 0: every 64th f32 in [−87, 0].
        let mut bits = (-87.0f32).to_bits();
        let mut worst = 0.0f64;
        while bits > 0x8000_0000 {
            let x = f32::from_bits(bits);
            let want = (x as f64).exp();
            worst = worst.max(((exp_f32(x) as f64 - want) / want).abs());
            bits -= 64;
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
    }

    #[test]
    fn sparse_rows_round_trip() {
        let x = vec![0.0, 1.5, 0.0, -2.0, 0.0, 0.0, 3.0, 0.0];
        let csr = Csr::from_dense(&x, 2, 4);
        assert_eq!(csr.nnz(), 3);
        assert_eq!(csr.row(0), (&[1u16, 3][..], &[1.5f32, -2.0][..]));
        assert_eq!(csr.row(1), (&[2u16][..], &[3.0f32][..]));
    }
}
