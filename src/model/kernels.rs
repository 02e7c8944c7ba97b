//! Numeric kernels shared by the models: a sparse row matrix, the products
//! MLR needs, and portable `exp`/`ln`.
//!
//! Determinism: every output element is computed by the same sequence of
//! IEEE operations whatever the width of the right-hand side (one trial or a
//! cohort of stacked trials), the CPU's vector width, or the thread count.
//! There are no fused multiply-adds and no library transcendental functions,
//! whose last bits differ between platforms.

use std::ops::Range;

/// A sparse matrix in compressed-row form with `u16` column indices.
#[derive(Clone, Debug, Default)]
pub struct Csr {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns (at most 65,536).
    pub cols: usize,
    /// `row_ptr[i]..row_ptr[i+1]` indexes row i's entries.
    pub row_ptr: Vec<u32>,
    /// Column of each entry (increasing within a row).
    pub col: Vec<u16>,
    /// Value of each entry.
    pub val: Vec<f32>,
}

impl Csr {
    /// The non-zeros of a dense row-major `rows × cols` matrix.
    pub fn from_dense(x: &[f32], rows: usize, cols: usize) -> Csr {
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
    pub fn nnz(&self) -> usize {
        self.val.len()
    }

    /// The entries of row `r` as (columns, values).
    #[inline]
    pub fn row(&self, r: usize) -> (&[u16], &[f32]) {
        let a = self.row_ptr[r] as usize;
        let b = self.row_ptr[r + 1] as usize;
        (&self.col[a..b], &self.val[a..b])
    }
}

/// Column tile width of [`spmm_rows`]: a `cols × TILE` slab of the dense
/// right-hand side (784 × 256 floats = 784 KiB for MNIST) stays in L2 while a
/// block of rows streams past it.
pub const TILE: usize = 256;

/// `out[i - rows.start][0..width] = Σ_j x[i][j] · w[j][0..width]` for the rows
/// `rows` of `x`; `w` is row-major `x.cols × width`, `out` row-major
/// `rows.len() × width`. The sum over j runs in increasing column order.
pub fn spmm_rows(x: &Csr, rows: Range<usize>, w: &[f32], width: usize, out: &mut [f32]) {
    debug_assert_eq!(w.len(), x.cols * width);
    debug_assert!(out.len() >= rows.len() * width);
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked above).
            unsafe { spmm_rows_avx512(x, rows, w, width, out) };
            return;
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked above).
            unsafe { spmm_rows_avx2(x, rows, w, width, out) };
            return;
        }
    }
    spmm_rows_body(x, rows, w, width, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn spmm_rows_avx512(x: &Csr, rows: Range<usize>, w: &[f32], width: usize, out: &mut [f32]) {
    spmm_rows_body(x, rows, w, width, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn spmm_rows_avx2(x: &Csr, rows: Range<usize>, w: &[f32], width: usize, out: &mut [f32]) {
    spmm_rows_body(x, rows, w, width, out);
}

#[inline(always)]
fn spmm_rows_body(x: &Csr, rows: Range<usize>, w: &[f32], width: usize, out: &mut [f32]) {
    let n = rows.len();
    out[..n * width].fill(0.0);
    let mut t0 = 0;
    while t0 < width {
        let t1 = (t0 + TILE).min(width);
        for (o, r) in rows.clone().enumerate() {
            let (cols, vals) = x.row(r);
            let dst = &mut out[o * width + t0..o * width + t1];
            for (&j, &v) in cols.iter().zip(vals) {
                let j = j as usize;
                axpy(dst, v, &w[j * width + t0..j * width + t1]);
            }
        }
        t0 = t1;
    }
}

/// `g[j][0..width] += Σ_{p} x[rows[p]][j] · d[p][0..width]`: the product
/// `X_Bᵀ D` for the rows `rows` of `x`, accumulated into `g` (row-major
/// `x.cols × width`), with `d` row-major `rows.len() × width`. Rows are taken
/// in the order given.
pub fn spmm_t_accumulate(x: &Csr, rows: &[u32], d: &[f32], width: usize, g: &mut [f32]) {
    debug_assert_eq!(g.len(), x.cols * width);
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked above).
            unsafe { spmm_t_accumulate_avx512(x, rows, d, width, g) };
            return;
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked above).
            unsafe { spmm_t_accumulate_avx2(x, rows, d, width, g) };
            return;
        }
    }
    spmm_t_accumulate_body(x, rows, d, width, g);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn spmm_t_accumulate_avx512(x: &Csr, rows: &[u32], d: &[f32], width: usize, g: &mut [f32]) {
    spmm_t_accumulate_body(x, rows, d, width, g);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn spmm_t_accumulate_avx2(x: &Csr, rows: &[u32], d: &[f32], width: usize, g: &mut [f32]) {
    spmm_t_accumulate_body(x, rows, d, width, g);
}

#[inline(always)]
fn spmm_t_accumulate_body(x: &Csr, rows: &[u32], d: &[f32], width: usize, g: &mut [f32]) {
    for (p, &r) in rows.iter().enumerate() {
        let (cols, vals) = x.row(r as usize);
        let src = &d[p * width..(p + 1) * width];
        for (&j, &v) in cols.iter().zip(vals) {
            let j = j as usize;
            axpy(&mut g[j * width..(j + 1) * width], v, src);
        }
    }
}

/// `dst[i] += a · src[i]`, multiplication then addition (no fused multiply-add,
/// so any vector width gives the same bits).
#[inline(always)]
pub fn axpy(dst: &mut [f32], a: f32, src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += a * *s;
    }
}

const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;

/// e^x in f32, portable (same bits on every platform), relative error below
/// 1e-6 on [−87, 88]; arguments are clamped to that range (so e^x ≥ 1.6e-38).
/// Range reduction x = n·ln2 + r with |r| ≤ ln2/2, a degree-6 Taylor
/// polynomial for e^r, then scaling by 2^n. Branch-free, so loops over it
/// vectorize.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round half away from zero by truncation (no libm call; exact everywhere).
    let t = x * std::f32::consts::LOG2_E;
    let n = (if t >= 0.0 { t + 0.5 } else { t - 0.5 }) as i32;
    let nf = n as f32;
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
pub fn ln_f64(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
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
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn softmax_cross_entropy(
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
    sumv.fill(0.0);
    for c in 0..classes {
        let zc = &z[c * a..(c + 1) * a];
        let ec = &mut e[c * a..(c + 1) * a];
        for ((ev, &zv), &m) in ec.iter_mut().zip(zc).zip(maxv.iter()) {
            *ev = exp_f32(zv - m);
        }
        for (sv, &ev) in sumv.iter_mut().zip(ec.iter()) {
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
        for c in 0..classes {
            let ec = &e[c * a..(c + 1) * a];
            for ((d, &ev), &sv) in delta[c * a..(c + 1) * a]
                .iter_mut()
                .zip(ec)
                .zip(sumv.iter())
            {
                *d = ev * (1.0 / sv);
            }
        }
        for d in delta[label * a..(label + 1) * a].iter_mut() {
            *d -= 1.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn sparse_products_match_dense() {
        let (rows, cols, width) = (7, 5, 300);
        let x: Vec<f32> = (0..rows * cols)
            .map(|i| {
                if i % 3 == 0 {
                    0.0
                } else {
                    (i % 7) as f32 - 2.0
                }
            })
            .collect();
        let csr = Csr::from_dense(&x, rows, cols);
        assert_eq!(csr.nnz(), x.iter().filter(|v| **v != 0.0).count());
        let w: Vec<f32> = (0..cols * width)
            .map(|i| (i % 11) as f32 * 0.5 - 2.0)
            .collect();
        let mut out = vec![0f32; 4 * width];
        spmm_rows(&csr, 2..6, &w, width, &mut out);
        for (o, r) in (2..6).enumerate() {
            for c in 0..width {
                let want: f32 = (0..cols).map(|j| x[r * cols + j] * w[j * width + c]).sum();
                assert!((out[o * width + c] - want).abs() < 1e-4);
            }
        }
        let d: Vec<f32> = (0..2 * width).map(|i| (i % 5) as f32).collect();
        let mut g = vec![0f32; cols * width];
        spmm_t_accumulate(&csr, &[4, 1], &d, width, &mut g);
        for j in 0..cols {
            for c in 0..width {
                let want = x[4 * cols + j] * d[c] + x[cols + j] * d[width + c];
                assert!((g[j * width + c] - want).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn column_results_do_not_depend_on_the_width() {
        // One column computed alone and inside a wide stack gives the same bits.
        let (rows, cols) = (50, 40);
        let x: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919) % 13) as f32 * 0.37)
            .collect();
        let csr = Csr::from_dense(&x, rows, cols);
        let wide = 700;
        let w: Vec<f32> = (0..cols * wide)
            .map(|i| ((i * 31) % 17) as f32 * 0.013 - 0.1)
            .collect();
        let mut out_wide = vec![0f32; rows * wide];
        spmm_rows(&csr, 0..rows, &w, wide, &mut out_wide);
        let c = 613;
        let w1: Vec<f32> = (0..cols).map(|j| w[j * wide + c]).collect();
        let mut out1 = vec![0f32; rows];
        spmm_rows(&csr, 0..rows, &w1, 1, &mut out1);
        for r in 0..rows {
            assert_eq!(out1[r].to_bits(), out_wide[r * wide + c].to_bits());
        }
    }
}
