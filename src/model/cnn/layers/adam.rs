//! The Adam update of a block.

/// One Adam update (Kingma & Ba, in PyTorch's form) of a block's
/// parameters `w`, moments `m`, `v` from the gradient `g`:
/// `m ← β1·m + (1−β1)·g`, `v ← β2·v + ((1−β2)·g)·g`,
/// `w ← w − (step·m) / (√v · inv_sqrt_bc2 + ε)`, each multiply-add fused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AdamStep {
    /// β1.
    pub(crate) b1: f32,
    /// 1 − β1.
    pub(crate) c1: f32,
    /// β2.
    pub(crate) b2: f32,
    /// 1 − β2.
    pub(crate) c2: f32,
    /// α / (1 − β1^t).
    pub(crate) step: f32,
    /// 1 / √(1 − β2^t).
    pub(crate) inv_sqrt_bc2: f32,
    /// ε.
    pub(crate) eps: f32,
}

/// One element of [`adam`], in `f32` as [`AdamStep`] states it: the
/// reference every path equals bit for bit.
#[inline(always)]
pub(super) fn adam_one(w: &mut f32, m: &mut f32, v: &mut f32, gi: f32, p: AdamStep) {
    let mi = p.b1.mul_add(*m, p.c1 * gi);
    let vi = p.b2.mul_add(*v, (p.c2 * gi) * gi);
    *m = mi;
    *v = vi;
    *w -= (p.step * mi) / vi.sqrt().mul_add(p.inv_sqrt_bc2, p.eps);
}

/// Elements per chunk of [`adam_body`]: one AVX-512 vector.
const CHUNK: usize = 16;

/// Whether element (`m`, `g`) is "fading": its gradient is zero and its
/// first moment a non-zero value below `fade`. A parameter whose gradient
/// stays zero (a dead ReLU unit's weights) has m ← β1·m each step, which
/// reaches subnormal values after some 800 steps; the `f32` multiplies and
/// divisions of [`adam_one`] then take a microcode assist each (measured
/// 50× slower per vector on this machine's Xeon), and about 6% of a CNN
/// panel's elements are there (`scar-partial-cnn-bylayer-mnist`, real MNIST).
#[inline(always)]
fn fading(m: f32, g: f32, fade: f32) -> bool {
    g == 0.0 && m != 0.0 && m.abs() < fade
}

/// [`adam_one`] over a chunk with fading elements ([`fading`]). The others
/// run in `f32` as there; a fading element's `m` (kept out of the `f32`
/// chain, which then sees zeros) and its update run in `f64` instead,
/// which gives the same `f32` bits without subnormal `f32` operands:
/// - `m ← fma(β1, m, (1−β1)·0)` is the rounding of β1·m (m ≠ 0, so the
///   product is not zero and the zero addend changes nothing); in `f64` the
///   product of two `f32` is exact, and one conversion rounds it;
/// - `step·m` likewise;
/// - `(step·m) / d`: the `f64` quotient rounded to `f32` is the `f32`
///   quotient, since 53 ≥ 2·24 + 2 bits make the double rounding
///   innocuous (Figueroa, 1995), and at a subnormal result the grid is
///   coarser still;
/// - `v` and `d = √v·inv_sqrt_bc2 + ε` do not involve `m` and stay in `f32`.
#[inline(always)]
fn adam_fading(w: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32], p: AdamStep, fade: f32) {
    for i in 0..w.len() {
        let (gi, m0) = (g[i], m[i]);
        let fades = fading(m0, gi, fade);
        let mf = if fades { 0.0 } else { m0 };
        let mi32 = p.b1.mul_add(mf, p.c1 * gi);
        let vi = p.b2.mul_add(v[i], (p.c2 * gi) * gi);
        let d = vi.sqrt().mul_add(p.inv_sqrt_bc2, p.eps);
        let r32 = (p.step * mi32) / d;
        let mi64 = mul_in_f64(p.b1, m0);
        let num64 = mul_in_f64(p.step, mi64);
        let r64 = div_in_f64(num64, d);
        let (mi, r) = if fades { (mi64, r64) } else { (mi32, r32) };
        m[i] = mi;
        v[i] = vi;
        w[i] -= r;
    }
}

/// 2⁶⁴ and 2⁻⁶⁴: [`mul_in_f64`] and [`div_in_f64`] scale by them (exactly)
/// so that the compiler cannot narrow the `f64` operation back to the
/// `f32` one with subnormal operands (for a product or quotient of two
/// `f32` values rounded to `f32`, the narrowing is exact, so it may).
const UP: f64 = 18_446_744_073_709_551_616.0;
const DOWN: f64 = 1.0 / UP;

/// `a·b` rounded to `f32`, computed in `f64`: the product of two `f32` is
/// exact in `f64` (as are the scalings by powers of two, far inside `f64`'s
/// range), so the one rounding is the conversion's.
#[inline(always)]
fn mul_in_f64(a: f32, b: f32) -> f32 {
    ((f64::from(a) * (f64::from(b) * UP)) * DOWN) as f32
}

/// `a / b` rounded to `f32`, computed in `f64`: rounded to `f64`, then to
/// `f32`, which gives the `f32` quotient (53 ≥ 2·24 + 2 bits).
#[inline(always)]
fn div_in_f64(a: f32, b: f32) -> f32 {
    (((f64::from(a) * UP) / f64::from(b)) * DOWN) as f32
}

/// The body of [`adam`] (same bits at every level: element-wise, fused):
/// [`adam_one`] chunk by chunk, or [`adam_fading`] for a chunk that holds
/// a fading element (the same bits, see there).
#[inline(always)]
fn adam_body(w: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32], p: AdamStep) {
    let n = w.len();
    let (m, v, g) = (&mut m[..n], &mut v[..n], &g[..n]);
    // Below `fade`, β1·m or step·m can be subnormal.
    let fade = (f64::from(f32::MIN_POSITIVE) / f64::from(p.b1.min(p.step).min(1.0)))
        .min(f64::from(f32::MAX)) as f32;
    let mut at = 0;
    while at < n {
        let end = (at + CHUNK).min(n);
        let (w, m, v, g) = (
            &mut w[at..end],
            &mut m[at..end],
            &mut v[at..end],
            &g[at..end],
        );
        // Without an early exit, so that the check vectorises.
        let any = m
            .iter()
            .zip(g.iter())
            .fold(false, |any, (&mi, &gi)| any | fading(mi, gi, fade));
        if any {
            adam_fading(w, m, v, g, p, fade);
        } else {
            for i in 0..w.len() {
                adam_one(&mut w[i], &mut m[i], &mut v[i], g[i], p);
            }
        }
        at = end;
    }
}

crate::simd::kernel! {
    /// One Adam update of `w`, `m`, `v` (equal lengths) from `g` ([`AdamStep`]).
    pub fn adam, adam_at(w: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32], p: AdamStep) = adam_body;
}
