//! Row vectors of [`LANES`] values for the CNN's kernels: one type per
//! kernel level, all with the same lane-wise semantics.
//!
//! The kernels in [`super::layers`] are generic over [`Vector`], so each
//! level compiles the same kernel code with its own vector type: [`Portable`]
//! (plain arrays, `mul_add` per lane, any platform and the `f64` check path),
//! and on x86-64 `Avx2` (two 256-bit registers) and `Avx512` (one 512-bit
//! register). Every operation is a lane-wise IEEE operation with the same
//! result at every level: fused multiply-add (`_mm*_fmadd_ps` is the correctly
//! rounded `a·b + c`, as `f32::mul_add`), ordered greater-than (false when a
//! lane is NaN, as Rust's `>`), selection, loads and stores. Nothing reduces
//! across lanes. Writing the vectors out (rather than leaving loops to the
//! auto-vectoriser) keeps the kernels' register tiles in registers.
//!
//! The x86 types may only be used inside functions compiled with their target
//! features (the dispatchers in [`super::net`]), which run only where
//! [`crate::simd::detected`] reports them.

use super::layers::{LANES, Scalar};

/// A row vector of [`LANES`] values of `S`, lane-wise operations only.
pub(crate) trait Vector<S: Scalar>: Copy {
    /// A lane mask.
    type Mask: Copy;
    /// How many vectors of this type the register file holds (32 at
    /// AVX-512, 16 / 2 = 8 at AVX2): the kernels size their register tiles by
    /// it. A tile decides which outputs are computed side by side, never an
    /// output's chain, so the bits do not depend on it.
    const REGS: usize;
    /// Every lane `s`.
    fn splat(s: S) -> Self;
    /// The first [`LANES`] values of `s`.
    fn load(s: &[S]) -> Self;
    /// Writes the lanes into the first [`LANES`] values of `d`.
    fn store(self, d: &mut [S]);
    /// `self · x + acc`, fused (one rounding).
    fn mul_add(self, x: Self, acc: Self) -> Self;
    /// `self > o` per lane (false where either is NaN).
    fn gt(self, o: Self) -> Self::Mask;
    /// `self != o` per lane (true where either is NaN, as Rust's `!=`).
    fn ne(self, o: Self) -> Self::Mask;
    /// `a` where `m`, else `b`.
    fn select(m: Self::Mask, a: Self, b: Self) -> Self;
    /// The mask of lanes `from..LANES`.
    fn lanes_from(from: usize) -> Self::Mask;
    /// The mask as bits (lane l is bit l).
    fn bits(m: Self::Mask) -> u32;
    /// Writes lanes `0..n` (`n` ≤ [`LANES`]) into the first `n` values of
    /// `d`. In registers at the SIMD levels: a kernel's accumulators written
    /// this way are never copied to the stack (the copy that
    /// [`Vector::to_array`] needs made the compiler store them at every
    /// iteration of the loop that sums them).
    fn store_first(self, d: &mut [S], n: usize) {
        let n = n.min(LANES);
        d[..n].copy_from_slice(&self.to_array()[..n]);
    }
    /// The lanes as an array.
    fn to_array(self) -> [S; LANES] {
        let mut a = [S::zero(); LANES];
        self.store(&mut a);
        a
    }
}

/// Plain arrays: the portable level (and every level of the `f64` path).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Portable<S>([S; LANES]);

impl<S: Scalar> Vector<S> for Portable<S> {
    type Mask = [bool; LANES];
    // The AVX-512 tiles: comparing the portable level with AVX2 (as the
    // tests do on any x86-64 machine) then compares both tilings.
    const REGS: usize = 32;
    #[inline(always)]
    fn splat(s: S) -> Self {
        Portable([s; LANES])
    }
    #[inline(always)]
    fn load(s: &[S]) -> Self {
        let mut a = [S::zero(); LANES];
        a.copy_from_slice(&s[..LANES]);
        Portable(a)
    }
    #[inline(always)]
    fn store(self, d: &mut [S]) {
        d[..LANES].copy_from_slice(&self.0);
    }
    #[inline(always)]
    fn mul_add(self, x: Self, acc: Self) -> Self {
        let mut r = acc.0;
        for (l, r) in r.iter_mut().enumerate() {
            *r = self.0[l].mul_add(x.0[l], *r);
        }
        Portable(r)
    }
    #[inline(always)]
    fn gt(self, o: Self) -> [bool; LANES] {
        let mut m = [false; LANES];
        for (l, m) in m.iter_mut().enumerate() {
            *m = self.0[l] > o.0[l];
        }
        m
    }
    #[inline(always)]
    fn ne(self, o: Self) -> [bool; LANES] {
        let mut m = [false; LANES];
        for (l, m) in m.iter_mut().enumerate() {
            *m = self.0[l] != o.0[l];
        }
        m
    }
    #[inline(always)]
    fn select(m: [bool; LANES], a: Self, b: Self) -> Self {
        let mut r = b.0;
        for l in 0..LANES {
            if m[l] {
                r[l] = a.0[l];
            }
        }
        Portable(r)
    }
    #[inline(always)]
    fn lanes_from(from: usize) -> [bool; LANES] {
        let mut m = [false; LANES];
        for (l, v) in m.iter_mut().enumerate() {
            *v = l >= from;
        }
        m
    }
    #[inline(always)]
    fn bits(m: [bool; LANES]) -> u32 {
        let mut b = 0;
        for (l, &v) in m.iter().enumerate() {
            b |= u32::from(v) << l;
        }
        b
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2, Avx512};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{LANES, Vector};

    /// Two 256-bit registers (AVX2 + FMA). Use only inside functions compiled
    /// with `avx2,fma`.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Avx2([__m256; 2]);

    // SAFETY (every `unsafe` block below): the type is only used inside
    // functions compiled with `avx2,fma`, which run only on CPUs that have
    // them; loads and stores go through slices checked to hold the values
    // they touch (LANES, or `store_first`'s n).
    impl Vector<f32> for Avx2 {
        type Mask = [__m256; 2];
        const REGS: usize = 8;
        #[inline(always)]
        fn splat(s: f32) -> Self {
            unsafe { Avx2([_mm256_set1_ps(s); 2]) }
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..LANES];
            unsafe {
                Avx2([
                    _mm256_loadu_ps(s.as_ptr()),
                    _mm256_loadu_ps(s.as_ptr().add(8)),
                ])
            }
        }
        #[inline(always)]
        fn store(self, d: &mut [f32]) {
            let d = &mut d[..LANES];
            unsafe {
                _mm256_storeu_ps(d.as_mut_ptr(), self.0[0]);
                _mm256_storeu_ps(d.as_mut_ptr().add(8), self.0[1]);
            }
        }
        #[inline(always)]
        fn store_first(self, d: &mut [f32], n: usize) {
            let n = n.min(LANES);
            let d = &mut d[..n];
            // Lane l of half h is written where 8h + l < n.
            let lane = unsafe { _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7) };
            // SAFETY: a masked store touches only the lanes its mask
            // selects, all inside `d` (the second half's address lies past
            // `d` when n ≤ 8, and its mask is then empty).
            unsafe {
                let m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), lane);
                let m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32 - 8), lane);
                _mm256_maskstore_ps(d.as_mut_ptr(), m0, self.0[0]);
                _mm256_maskstore_ps(d.as_mut_ptr().wrapping_add(8), m1, self.0[1]);
            }
        }
        #[inline(always)]
        fn mul_add(self, x: Self, acc: Self) -> Self {
            unsafe {
                Avx2([
                    _mm256_fmadd_ps(self.0[0], x.0[0], acc.0[0]),
                    _mm256_fmadd_ps(self.0[1], x.0[1], acc.0[1]),
                ])
            }
        }
        #[inline(always)]
        fn gt(self, o: Self) -> [__m256; 2] {
            unsafe {
                [
                    _mm256_cmp_ps::<_CMP_GT_OQ>(self.0[0], o.0[0]),
                    _mm256_cmp_ps::<_CMP_GT_OQ>(self.0[1], o.0[1]),
                ]
            }
        }
        #[inline(always)]
        fn ne(self, o: Self) -> [__m256; 2] {
            unsafe {
                [
                    _mm256_cmp_ps::<_CMP_NEQ_UQ>(self.0[0], o.0[0]),
                    _mm256_cmp_ps::<_CMP_NEQ_UQ>(self.0[1], o.0[1]),
                ]
            }
        }
        #[inline(always)]
        fn select(m: [__m256; 2], a: Self, b: Self) -> Self {
            unsafe {
                Avx2([
                    _mm256_blendv_ps(b.0[0], a.0[0], m[0]),
                    _mm256_blendv_ps(b.0[1], a.0[1], m[1]),
                ])
            }
        }
        #[inline(always)]
        fn lanes_from(from: usize) -> [__m256; 2] {
            let mut bits = [0f32; LANES];
            for (l, b) in bits.iter_mut().enumerate() {
                if l >= from {
                    *b = f32::from_bits(u32::MAX);
                }
            }
            let v = Avx2::load(&bits);
            v.0
        }
        #[inline(always)]
        fn bits(m: [__m256; 2]) -> u32 {
            unsafe { (_mm256_movemask_ps(m[0]) as u32) | ((_mm256_movemask_ps(m[1]) as u32) << 8) }
        }
    }

    /// One 512-bit register (AVX-512 F). Use only inside functions compiled
    /// with `avx512f`.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Avx512(__m512);

    // SAFETY (every `unsafe` block below): the type is only used inside
    // functions compiled with `avx512f`, which run only on CPUs that have
    // it; loads and stores go through slices checked to hold the values
    // they touch (LANES, or `store_first`'s n).
    impl Vector<f32> for Avx512 {
        type Mask = __mmask16;
        const REGS: usize = 32;
        #[inline(always)]
        fn splat(s: f32) -> Self {
            unsafe { Avx512(_mm512_set1_ps(s)) }
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..LANES];
            unsafe { Avx512(_mm512_loadu_ps(s.as_ptr())) }
        }
        #[inline(always)]
        fn store(self, d: &mut [f32]) {
            let d = &mut d[..LANES];
            unsafe { _mm512_storeu_ps(d.as_mut_ptr(), self.0) }
        }
        #[inline(always)]
        fn store_first(self, d: &mut [f32], n: usize) {
            let n = n.min(LANES);
            let d = &mut d[..n];
            let m = (u32::from(u16::MAX) >> (LANES - n)) as u16;
            // SAFETY: the store touches only lanes 0..n, inside `d`.
            unsafe { _mm512_mask_storeu_ps(d.as_mut_ptr(), m, self.0) }
        }
        #[inline(always)]
        fn mul_add(self, x: Self, acc: Self) -> Self {
            unsafe { Avx512(_mm512_fmadd_ps(self.0, x.0, acc.0)) }
        }
        #[inline(always)]
        fn gt(self, o: Self) -> __mmask16 {
            unsafe { _mm512_cmp_ps_mask::<_CMP_GT_OQ>(self.0, o.0) }
        }
        #[inline(always)]
        fn ne(self, o: Self) -> __mmask16 {
            unsafe { _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(self.0, o.0) }
        }
        #[inline(always)]
        fn select(m: __mmask16, a: Self, b: Self) -> Self {
            unsafe { Avx512(_mm512_mask_blend_ps(m, b.0, a.0)) }
        }
        #[inline(always)]
        fn lanes_from(from: usize) -> __mmask16 {
            (u32::from(u16::MAX) << from.min(LANES)) as u16
        }
        #[inline(always)]
        fn bits(m: __mmask16) -> u32 {
            u32::from(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::{Level, detected};

    fn ops<V: Vector<f32>>(a: &[f32], b: &[f32], c: &[f32]) -> Vec<[f32; LANES]> {
        let (va, vb, vc) = (V::load(a), V::load(b), V::load(c));
        let m = va.gt(vb);
        let mut bits = [0f32; LANES];
        bits[0] = V::bits(m) as f32;
        bits[1] = V::bits(V::lanes_from(5)) as f32;
        bits[2] = V::bits(va.ne(vb)) as f32;
        let mut out = vec![
            bits,
            va.mul_add(vb, vc).to_array(),
            V::select(m, va, vc).to_array(),
            V::select(V::lanes_from(5), va, vb).to_array(),
            V::splat(c[3]).to_array(),
        ];
        // `store_first` writes lanes 0..n and nothing past them (the slice
        // given is only n long where n < LANES).
        for n in [0, 1, 3, 7, 8, 9, 15, 16] {
            let mut d = [-7.0f32; LANES];
            va.store_first(&mut d[..n], n);
            out.push(d);
        }
        out
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn ops_avx2(a: &[f32], b: &[f32], c: &[f32]) -> Vec<[f32; LANES]> {
        ops::<Avx2>(a, b, c)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    fn ops_avx512(a: &[f32], b: &[f32], c: &[f32]) -> Vec<[f32; LANES]> {
        ops::<Avx512>(a, b, c)
    }

    #[test]
    fn every_vector_type_computes_the_portable_bits() {
        let mut a: Vec<f32> = (0..LANES).map(|i| (i as f32 * 0.77).sin() * 1e3).collect();
        let mut b: Vec<f32> = (0..LANES).map(|i| (i as f32 * 0.31).cos() * 1e-3).collect();
        let c: Vec<f32> = (0..LANES).map(|i| (i as f32 * 1.3).sin()).collect();
        a[2] = f32::NAN;
        a[4] = b[4];
        // Zeros of both signs are equal.
        (a[6], b[6]) = (-0.0, 0.0);
        let want = ops::<Portable<f32>>(&a, &b, &c);
        // The fused multiply-add rounds once.
        assert_eq!(want[1][1], a[1].mul_add(b[1], c[1]));
        assert_eq!(want[2][2].to_bits(), c[2].to_bits(), "NaN is not greater");
        assert_eq!(want[2][4].to_bits(), c[4].to_bits(), "equal is not greater");
        assert_eq!(want[0][1] as u32, 0xffe0);
        let gt = (0..LANES)
            .filter(|&l| a[l] > b[l])
            .fold(0u32, |m, l| m | 1 << l);
        assert_eq!(want[0][0] as u32, gt);
        let ne = (0..LANES)
            .filter(|&l| a[l] != b[l])
            .fold(0u32, |m, l| m | 1 << l);
        assert_eq!(want[0][2] as u32, ne);
        assert_eq!(
            ne & 0b101_0100,
            0b100,
            "NaN differs; equal values and ±0 do not"
        );
        for (d, n) in want[5..].iter().zip([0, 1, 3, 7, 8, 9, 15, 16]) {
            for l in 0..LANES {
                let x = if l < n { a[l] } else { -7.0 };
                assert_eq!(d[l].to_bits(), x.to_bits(), "store_first({n}), lane {l}");
            }
        }
        let same = |got: Vec<[f32; LANES]>| {
            for (g, w) in got.iter().zip(&want) {
                for (x, y) in g.iter().zip(w) {
                    assert_eq!(x.to_bits(), y.to_bits());
                }
            }
        };
        #[cfg(target_arch = "x86_64")]
        {
            if detected() >= Level::Avx2 {
                // SAFETY: the CPU has AVX2 and FMA.
                same(unsafe { ops_avx2(&a, &b, &c) });
            }
            if detected() >= Level::Avx512 {
                // SAFETY: the CPU has AVX-512 F.
                same(unsafe { ops_avx512(&a, &b, &c) });
            }
        }
        let _ = same;
    }
}
