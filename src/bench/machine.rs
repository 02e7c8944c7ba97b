//! This machine's limits, measured on the spot: a dense f32 matrix product
//! through `matrixmultiply` (via ndarray) and a STREAM-style triad.

use std::time::Instant;

use ndarray::Array2;
use ndarray::linalg::general_mat_mul;

/// The ceilings the hot kernels are compared with.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Limits {
    /// Dense f32 GEMM on one core, GFLOP/s.
    pub gemm_one_core: f64,
    /// Dense f32 GEMM on every core at once (one product per core), GFLOP/s.
    pub gemm_all_cores: f64,
    /// Triad bandwidth of one core, GB/s.
    pub bandwidth_one_core: f64,
    /// Triad bandwidth of every core at once, GB/s.
    pub bandwidth_all_cores: f64,
    /// Cores used for the "all cores" figures.
    pub cores: usize,
}

/// Side of the square GEMM: 3 · 512² · 4 B = 3 MiB, a cache-blocked product
/// that runs at the library's peak.
const GEMM_SIDE: usize = 512;
/// Floats per triad array: 3 × 64 Mi × 4 B = 768 MiB, far past any cache.
const TRIAD_LEN: usize = 64 << 20;

impl Limits {
    /// Measures the limits, spending about `seconds` on each of the four figures.
    pub fn measure(seconds: f64) -> Limits {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let gemm_one_core = gemm_rate(seconds);
        let gemm_all_cores = on_every_core(cores, || gemm_rate(seconds));
        let bandwidth_one_core = triad_rate(seconds, TRIAD_LEN);
        let bandwidth_all_cores = on_every_core(cores, || triad_rate(seconds, TRIAD_LEN / cores));
        Limits {
            gemm_one_core,
            gemm_all_cores,
            bandwidth_one_core,
            bandwidth_all_cores,
            cores,
        }
    }

    /// One line per limit.
    pub fn describe(&self) -> String {
        format!(
            "limits: f32 GEMM {GEMM_SIDE}³ (matrixmultiply) {:.1} GFLOP/s on one core, {:.1} on {} cores; \
             triad bandwidth {:.1} GB/s on one core, {:.1} on {} cores",
            self.gemm_one_core,
            self.gemm_all_cores,
            self.cores,
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

/// GFLOP/s of the fastest of repeated 512³ products within `seconds`.
fn gemm_rate(seconds: f64) -> f64 {
    let n = GEMM_SIDE;
    let a = Array2::from_shape_fn((n, n), |(i, j)| ((i * 7 + j * 3) % 17) as f32 * 0.01);
    let b = Array2::from_shape_fn((n, n), |(i, j)| ((i * 5 + j * 11) % 13) as f32 * 0.01);
    let mut c = Array2::<f32>::zeros((n, n));
    general_mat_mul(1.0, &a, &b, 0.0, &mut c);
    let flops = 2.0 * (n * n * n) as f64;
    best_rate(seconds, || {
        general_mat_mul(1.0, &a, &b, 0.0, &mut c);
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
