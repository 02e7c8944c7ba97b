//! The register operations of the lane kernels, one implementation per
//! kernel level ([`Simd`]).

use super::{V, W};

/// The operations on a register holding one [`V`], at one kernel level.
/// Every implementation computes each lane with the correctly rounded IEEE
/// operation of the scalar code, so all levels give the same bits.
pub(crate) trait Simd {
    /// The register type.
    type R: Copy;
    /// How many `R` the register file holds (32 at AVX-512, 16 / 2 = 8 at
    /// AVX2): the kernels size their register tiles by it, which decides
    /// which sums run side by side, never a sum's order.
    const REGS: usize;
    /// Every lane `x`.
    fn splat(x: f64) -> Self::R;
    /// Loads a lane vector.
    fn load(v: &V) -> Self::R;
    /// Stores a lane vector.
    fn store(r: Self::R, v: &mut V);
    /// `a + b` per lane.
    fn add(a: Self::R, b: Self::R) -> Self::R;
    /// `a − b` per lane.
    fn sub(a: Self::R, b: Self::R) -> Self::R;
    /// `a · b` per lane.
    fn mul(a: Self::R, b: Self::R) -> Self::R;
    /// `a / b` per lane.
    fn div(a: Self::R, b: Self::R) -> Self::R;
    /// `a · b + c` per lane, rounded once (`f64::mul_add`).
    fn fma(a: Self::R, b: Self::R, c: Self::R) -> Self::R;
    /// `c − a · b` per lane, rounded once (`(-a).mul_add(b, c)`).
    fn fnma(a: Self::R, b: Self::R, c: Self::R) -> Self::R;
    /// `sqrt(max(x, MIN_POSITIVE))` per lane (`f64::max`: a NaN gives
    /// MIN_POSITIVE): the Cholesky pivot of [`super::single::cholesky_solve_upper`].
    fn pivot(x: Self::R) -> Self::R;
    /// The transpose of a [`W`] × [`W`] block: `out[l].0[k] = m[k].0[l]`
    /// (data movement only; register shuffles where the level has them).
    #[inline(always)]
    fn transpose(m: &[V; W]) -> [V; W] {
        std::array::from_fn(|l| V(std::array::from_fn(|k| m[k].0[l])))
    }
}

/// Plain Rust, one lane after the other.
pub(crate) struct Portable;

impl Simd for Portable {
    type R = [f64; W];
    // The AVX-512 tiles: comparing the portable level with AVX2 (as the
    // tests do on any x86-64 machine) then compares both tilings.
    const REGS: usize = 32;
    #[inline(always)]
    fn splat(x: f64) -> [f64; W] {
        [x; W]
    }
    #[inline(always)]
    fn load(v: &V) -> [f64; W] {
        v.0
    }
    #[inline(always)]
    fn store(r: [f64; W], v: &mut V) {
        v.0 = r;
    }
    #[inline(always)]
    fn add(a: [f64; W], b: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l] + b[l])
    }
    #[inline(always)]
    fn sub(a: [f64; W], b: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l] - b[l])
    }
    #[inline(always)]
    fn mul(a: [f64; W], b: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l] * b[l])
    }
    #[inline(always)]
    fn div(a: [f64; W], b: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l] / b[l])
    }
    #[inline(always)]
    fn fma(a: [f64; W], b: [f64; W], c: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| a[l].mul_add(b[l], c[l]))
    }
    #[inline(always)]
    fn fnma(a: [f64; W], b: [f64; W], c: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| (-a[l]).mul_add(b[l], c[l]))
    }
    #[inline(always)]
    fn pivot(x: [f64; W]) -> [f64; W] {
        std::array::from_fn(|l| x[l].max(f64::MIN_POSITIVE).sqrt())
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    //! The vector levels. Their methods are only ever inlined into the
    //! `#[target_feature]` entry points of `lane_kernel!`, which run only
    //! where [`crate::simd::detected`] found the features.
    use std::arch::x86_64::*;

    use super::{Simd, V, W};

    /// AVX-512: one register per lane vector.
    pub(crate) struct Avx512;

    impl Simd for Avx512 {
        type R = __m512d;
        const REGS: usize = 32;
        #[inline(always)]
        fn splat(x: f64) -> __m512d {
            // SAFETY: only reached from AVX-512 code (see the module doc).
            unsafe { _mm512_set1_pd(x) }
        }
        #[inline(always)]
        fn load(v: &V) -> __m512d {
            // SAFETY: as above; `V` is 64 aligned and holds 8 f64.
            unsafe { _mm512_load_pd(v.0.as_ptr()) }
        }
        #[inline(always)]
        fn store(r: __m512d, v: &mut V) {
            // SAFETY: as above.
            unsafe { _mm512_store_pd(v.0.as_mut_ptr(), r) }
        }
        #[inline(always)]
        fn add(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_add_pd(a, b) }
        }
        #[inline(always)]
        fn sub(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_sub_pd(a, b) }
        }
        #[inline(always)]
        fn mul(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_mul_pd(a, b) }
        }
        #[inline(always)]
        fn div(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_div_pd(a, b) }
        }
        #[inline(always)]
        fn fma(a: __m512d, b: __m512d, c: __m512d) -> __m512d {
            // SAFETY: as above.
            unsafe { _mm512_fmadd_pd(a, b, c) }
        }
        #[inline(always)]
        fn fnma(a: __m512d, b: __m512d, c: __m512d) -> __m512d {
            // −(a·b) + c rounded once: the same as (−a)·b + c.
            // SAFETY: as above.
            unsafe { _mm512_fnmadd_pd(a, b, c) }
        }
        #[inline(always)]
        fn pivot(x: __m512d) -> __m512d {
            // `max_pd(x, m)` returns m when x is NaN, as `f64::max` does.
            // SAFETY: as above.
            unsafe { _mm512_sqrt_pd(_mm512_max_pd(x, _mm512_set1_pd(f64::MIN_POSITIVE))) }
        }
        #[inline(always)]
        fn transpose(m: &[V; W]) -> [V; W] {
            // Three rounds of shuffles: pairs of rows interleaved within
            // 128-bit quarters, then quarters, then halves.
            // SAFETY: as above; every `V` is 64 aligned.
            unsafe {
                // (Plain loops, not `std::array::from_fn`: a closure is
                // compiled without the target features, and where it is not
                // inlined its intrinsics become calls.)
                let mut r = [_mm512_setzero_pd(); W];
                for k in 0..W {
                    r[k] = _mm512_load_pd(m[k].0.as_ptr());
                }
                let mut a = [_mm512_setzero_pd(); W];
                for k in 0..W {
                    let (x, y) = (r[k / 2 * 2], r[k / 2 * 2 + 1]);
                    a[k] = if k % 2 == 0 {
                        _mm512_unpacklo_pd(x, y)
                    } else {
                        _mm512_unpackhi_pd(x, y)
                    };
                }
                // b[0]: columns 0 and 4 of rows 0..4, b[1]: 2 and 6, b[2]: 1
                // and 5, b[3]: 3 and 7; b[4..8] the same of rows 4..8.
                let lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
                let hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
                let mut b = [_mm512_setzero_pd(); W];
                for k in 0..W {
                    let base = k / 4 * 4;
                    let (x, y) = (a[base + (k % 4) / 2], a[base + 2 + (k % 4) / 2]);
                    b[k] = if k % 2 == 0 {
                        _mm512_permutex2var_pd(x, lo, y)
                    } else {
                        _mm512_permutex2var_pd(x, hi, y)
                    };
                }
                // Column c: b[j] with its pair b[j + 4], low halves for c < 4.
                let source = [0, 2, 1, 3];
                let mut out = [V([0.0; W]); W];
                for (c, o) in out.iter_mut().enumerate() {
                    let j = source[c % 4];
                    let v = if c < 4 {
                        _mm512_shuffle_f64x2::<0x44>(b[j], b[j + 4])
                    } else {
                        _mm512_shuffle_f64x2::<0xEE>(b[j], b[j + 4])
                    };
                    _mm512_store_pd(o.0.as_mut_ptr(), v);
                }
                out
            }
        }
    }

    /// AVX2: two registers per lane vector.
    pub(crate) struct Avx2;

    const H: usize = W / 2;

    impl Simd for Avx2 {
        type R = [__m256d; 2];
        const REGS: usize = 8;
        #[inline(always)]
        fn splat(x: f64) -> [__m256d; 2] {
            // SAFETY: only reached from AVX2 code (see the module doc).
            unsafe { [_mm256_set1_pd(x); 2] }
        }
        #[inline(always)]
        fn load(v: &V) -> [__m256d; 2] {
            // SAFETY: as above; `V` is 64 aligned and holds 8 f64.
            unsafe {
                [
                    _mm256_load_pd(v.0.as_ptr()),
                    _mm256_load_pd(v.0.as_ptr().add(H)),
                ]
            }
        }
        #[inline(always)]
        fn store(r: [__m256d; 2], v: &mut V) {
            // SAFETY: as above.
            unsafe {
                _mm256_store_pd(v.0.as_mut_ptr(), r[0]);
                _mm256_store_pd(v.0.as_mut_ptr().add(H), r[1]);
            }
        }
        #[inline(always)]
        fn add(a: [__m256d; 2], b: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe { [_mm256_add_pd(a[0], b[0]), _mm256_add_pd(a[1], b[1])] }
        }
        #[inline(always)]
        fn sub(a: [__m256d; 2], b: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe { [_mm256_sub_pd(a[0], b[0]), _mm256_sub_pd(a[1], b[1])] }
        }
        #[inline(always)]
        fn mul(a: [__m256d; 2], b: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe { [_mm256_mul_pd(a[0], b[0]), _mm256_mul_pd(a[1], b[1])] }
        }
        #[inline(always)]
        fn div(a: [__m256d; 2], b: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe { [_mm256_div_pd(a[0], b[0]), _mm256_div_pd(a[1], b[1])] }
        }
        #[inline(always)]
        fn fma(a: [__m256d; 2], b: [__m256d; 2], c: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above (FMA is enabled with AVX2).
            unsafe {
                [
                    _mm256_fmadd_pd(a[0], b[0], c[0]),
                    _mm256_fmadd_pd(a[1], b[1], c[1]),
                ]
            }
        }
        #[inline(always)]
        fn fnma(a: [__m256d; 2], b: [__m256d; 2], c: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe {
                [
                    _mm256_fnmadd_pd(a[0], b[0], c[0]),
                    _mm256_fnmadd_pd(a[1], b[1], c[1]),
                ]
            }
        }
        #[inline(always)]
        fn pivot(x: [__m256d; 2]) -> [__m256d; 2] {
            // SAFETY: as above.
            unsafe {
                let m = _mm256_set1_pd(f64::MIN_POSITIVE);
                [
                    _mm256_sqrt_pd(_mm256_max_pd(x[0], m)),
                    _mm256_sqrt_pd(_mm256_max_pd(x[1], m)),
                ]
            }
        }
    }
}
