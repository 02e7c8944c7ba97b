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
