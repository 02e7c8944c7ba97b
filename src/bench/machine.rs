//! This machine's limits, measured on the spot: the f32 fused multiply-add
//! throughput of the widest vector level (the hard compute ceiling), a dense
//! f32 matrix product through `matrixmultiply` (via ndarray: what a
//! well-kept library reaches) and a STREAM-style triad.

use std::time::Instant;

use ndarray::Array2;
use ndarray::LinalgScalar;
use ndarray::linalg::general_mat_mul;

/// The ceilings the hot kernels are compared with.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Limits {
    /// f32 fused multiply-adds from registers on one core (the widest level
    /// this CPU has), GFLOP/s: no kernel can exceed it.
    pub(crate) fma_one_core: f64,
    /// The same on every core at once, GFLOP/s.
    pub(crate) fma_all_cores: f64,
    /// Dense f32 GEMM on one core, GFLOP/s.
    pub(crate) gemm_one_core: f64,
    /// Dense f32 GEMM on every core at once (one product per core), GFLOP/s.
    pub(crate) gemm_all_cores: f64,
    /// Dense f64 GEMM on one core, GFLOP/s: the ceiling of f64 kernels (MF).
    pub(crate) gemm_f64_one_core: f64,
    /// Triad bandwidth of one core, GB/s.
    pub(crate) bandwidth_one_core: f64,
    /// Triad bandwidth of every core at once, GB/s.
    pub(crate) bandwidth_all_cores: f64,
    /// Cores used for the "all cores" figures.
    pub(crate) cores: usize,
}

/// Side of the square GEMM: 3 · 512² · 4 B = 3 MiB, a cache-blocked product
/// that runs at the library's peak.
const GEMM_SIDE: usize = 512;
/// Floats per triad array: 3 × 64 Mi × 4 B = 768 MiB, far past any cache.
const TRIAD_LEN: usize = 64 << 20;

impl Limits {
    /// Measures the limits, spending about `seconds` on each of the four figures.
    pub(crate) fn measure(seconds: f64) -> Limits {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let fma_one_core = fma_rate(seconds);
        let fma_all_cores = on_every_core(cores, || fma_rate(seconds));
        let gemm_one_core = gemm_rate(seconds, |v| v as f32);
        let gemm_all_cores = on_every_core(cores, || gemm_rate(seconds, |v| v as f32));
        let gemm_f64_one_core = gemm_rate(seconds, |v| v);
        let bandwidth_one_core = triad_rate(seconds, TRIAD_LEN);
        let bandwidth_all_cores = on_every_core(cores, || triad_rate(seconds, TRIAD_LEN / cores));
        Limits {
            fma_one_core,
            fma_all_cores,
            gemm_one_core,
            gemm_all_cores,
            gemm_f64_one_core,
            bandwidth_one_core,
            bandwidth_all_cores,
            cores,
        }
    }

    /// One line per limit.
    pub(crate) fn describe(&self) -> String {
        format!(
            "limits: f32 FMA peak ({}) {:.1} GFLOP/s on one core, {:.1} on {} cores; \
             f32 GEMM {GEMM_SIDE}³ (matrixmultiply) {:.1} GFLOP/s on one core, {:.1} on {} cores; \
             f64 GEMM {GEMM_SIDE}³ {:.1} GFLOP/s on one core; \
             triad bandwidth {:.1} GB/s on one core, {:.1} on {} cores",
            crate::simd::detected().name(),
            self.fma_one_core,
            self.fma_all_cores,
            self.cores,
            self.gemm_one_core,
            self.gemm_all_cores,
            self.cores,
            self.gemm_f64_one_core,
            self.bandwidth_one_core,
            self.bandwidth_all_cores,
            self.cores
        )
    }
}

/// Runs `f` on `cores` threads at once and sums their rates.
fn on_every_core(cores: usize, f: impl Fn() -> f64 + Sync) -> f64 {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..cores).map(|_| s.spawn(&f)).collect();
        hs.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
    })
}

/// Independent accumulator registers of the FMA peak loop: enough to cover
/// the latency of every FMA pipe (4 cycles × 2 pipes on current x86 cores).
/// 16 where 32 vector registers exist (AVX-512; the portable loop's scalars
/// are not register-limited either).
const FMA_CHAINS: usize = 16;
/// The AVX2 loop's chains: 12, so that the chains and the two operands fit
/// the 16 `ymm` registers. With 16 chains the loop spilled to the stack and
/// measured a "peak" below what a GEMM reaches (52 against 72 GFLOP/s).
const FMA_CHAINS_AVX2: usize = 12;
/// FMA-loop iterations per timed call.
const FMA_ITERS: usize = 1 << 20;

/// GFLOP/s of the fastest of repeated runs of independent (see [`FMA_CHAINS`])
/// chains of f32 fused multiply-adds held in registers, at the widest
/// vector level this CPU has, within `seconds`.
fn fma_rate(seconds: f64) -> f64 {
    let level = crate::simd::detected();
    best_rate(seconds, || {
        let per_iter = fma_loop(level, FMA_ITERS);
        2.0 * (FMA_ITERS * per_iter) as f64 / 1e9
    })
}

/// Runs the FMA loop at `level`; returns the f32 multiply-adds per
/// iteration (chains × lanes of one register of that level).
fn fma_loop(level: crate::simd::Level, iters: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::Level;
        match level {
            // SAFETY: `level` comes from `detected()`, which reports only
            // features this CPU has.
            Level::Avx512 => return unsafe { fma_avx512(iters) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { fma_avx2(iters) },
            Level::Portable => {}
        }
    }
    let _ = level;
    let mut acc = [0f32; FMA_CHAINS];
    for (i, a) in acc.iter_mut().enumerate() {
        *a = i as f32;
    }
    let (b, c) = std::hint::black_box((0.999_999_9f32, 1e-7f32));
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = a.mul_add(b, c);
        }
    }
    std::hint::black_box(acc);
    FMA_CHAINS
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_avx512(iters: usize) -> usize {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_ps(); FMA_CHAINS];
    for (i, a) in acc.iter_mut().enumerate() {
        *a = _mm512_set1_ps(i as f32);
    }
    let (b, c) = std::hint::black_box((0.999_999_9f32, 1e-7f32));
    let (b, c) = (_mm512_set1_ps(b), _mm512_set1_ps(c));
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm512_fmadd_ps(*a, b, c);
        }
    }
    std::hint::black_box(acc);
    FMA_CHAINS * 16
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_avx2(iters: usize) -> usize {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_ps(); FMA_CHAINS_AVX2];
    for (i, a) in acc.iter_mut().enumerate() {
        *a = _mm256_set1_ps(i as f32);
    }
    let (b, c) = std::hint::black_box((0.999_999_9f32, 1e-7f32));
    let (b, c) = (_mm256_set1_ps(b), _mm256_set1_ps(c));
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, b, c);
        }
    }
    std::hint::black_box(acc);
    FMA_CHAINS_AVX2 * 8
}

/// GFLOP/s of the fastest of repeated 512³ products in `T` (f32 or f64)
/// within `seconds`; `from` converts the inputs' values.
fn gemm_rate<T: LinalgScalar>(seconds: f64, from: fn(f64) -> T) -> f64 {
    let n = GEMM_SIDE;
    let a = Array2::from_shape_fn((n, n), |(i, j)| from(((i * 7 + j * 3) % 17) as f64 * 0.01));
    let b = Array2::from_shape_fn((n, n), |(i, j)| from(((i * 5 + j * 11) % 13) as f64 * 0.01));
    let mut c = Array2::<T>::zeros((n, n));
    general_mat_mul(T::one(), &a, &b, T::zero(), &mut c);
    let flops = 2.0 * (n * n * n) as f64;
    best_rate(seconds, || {
        general_mat_mul(T::one(), &a, &b, T::zero(), &mut c);
        std::hint::black_box(&c);
        flops / 1e9
    })
}

/// GB/s of the fastest triad `a = b + s·c` over `len` floats within `seconds`
/// (12 bytes per element: two reads and one write).
fn triad_rate(seconds: f64, len: usize) -> f64 {
    let mut a = vec![0f32; len];
    let b = vec![1f32; len];
    let c = vec![2f32; len];
    let s = std::hint::black_box(0.5f32);
    best_rate(seconds, || {
        for ((x, &y), &z) in a.iter_mut().zip(&b).zip(&c) {
            *x = y + s * z;
        }
        std::hint::black_box(&a);
        12.0 * len as f64 / 1e9
    })
}

/// The best of repeated calls of `f` (which returns the giga-units it did)
/// per CPU second of the calling thread, for about `seconds` of wall time.
fn best_rate(seconds: f64, mut f: impl FnMut() -> f64) -> f64 {
    let start = Instant::now();
    let mut best = 0.0f64;
    loop {
        let t = super::thread_seconds();
        let work = f();
        let rate = work / (super::thread_seconds() - t).max(1e-9);
        best = best.max(rate);
        if start.elapsed().as_secs_f64() >= seconds {
            return best;
        }
    }
}
