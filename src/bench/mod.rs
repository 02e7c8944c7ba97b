//! `scarsim bench`: this machine's limits, measured on the spot, and each
//! model's hot kernel as a fraction of them.
//!
//! The limits (`machine`) are a dense f32 matrix product through the
//! `matrixmultiply` crate (the compute ceiling a well-tuned library reaches
//! here) and the bandwidth of a STREAM-style triad over arrays far larger
//! than the caches (the memory ceiling). A hot kernel reports the work it
//! did — units (examples, tokens, images, ALS solves, events), floating-point
//! operations and the bytes it must move at the least — and its fraction is
//! the achieved rate over the roofline `min(compute peak, bandwidth ×
//! flops/byte)`, both measured on one core, the way a trial runs.
//!
//! A hot kernel is one `HotKernel` impl in a file of this folder and one
//! line in `kernels`.

pub(crate) mod cnn;
pub(crate) mod events;
pub(crate) mod lda;
pub(crate) mod machine;
pub(crate) mod mf;
pub(crate) mod mlr;

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::data::{DataCache, DataOptions};
use crate::simd;

pub(crate) use machine::Limits;

/// What a bench run may use: the data, and how long to time each kernel.
pub(crate) struct BenchContext {
    /// Datasets (real where `data` finds them, else the stand-ins).
    pub(crate) cache: DataCache,
    /// Where the data comes from.
    pub(crate) data: DataOptions,
    /// Seconds to time each kernel (after one untimed warm-up call).
    pub(crate) seconds: f64,
}

/// The work one call of a prepared kernel did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Work {
    /// Units of the kernel's own rate (examples, tokens, images, solves, events).
    pub(crate) units: f64,
    /// Floating-point operations (a multiply-add counts two; 0 if the kernel is not arithmetic).
    pub(crate) flops: f64,
    /// Bytes the kernel must move from memory at the least (0 if it works in cache).
    pub(crate) bytes: f64,
}

impl std::ops::AddAssign for Work {
    fn add_assign(&mut self, o: Work) {
        self.units += o.units;
        self.flops += o.flops;
        self.bytes += o.bytes;
    }
}

/// A kernel made ready to run: data loaded, buffers allocated.
pub(crate) trait Prepared {
    /// Runs the kernel once and says how much work that was.
    fn run(&mut self) -> Work;
}

/// One model's hot kernel.
pub(crate) trait HotKernel {
    /// Short name, e.g. `mlr-forward`.
    fn name(&self) -> &'static str;
    /// The model it belongs to (`mlr`, `mf`, `lda`, `cnn`, `sim`).
    fn model(&self) -> &'static str;
    /// What one unit of its rate is, e.g. `examples`.
    fn unit(&self) -> &'static str;
    /// One line saying what is measured (shape, width, data).
    fn describe(&self) -> String;
    /// Loads the data and builds the buffers.
    fn prepare(&self, ctx: &BenchContext) -> Result<Box<dyn Prepared>>;
    /// Whether its arithmetic is f64 (MF's ALS): then its ceilings are the
    /// f64 GEMM and half the f32 FMA peak (the same instructions, half the
    /// lanes), not the f32 ones.
    fn f64_arithmetic(&self) -> bool {
        false
    }
}

/// Every hot kernel, in the order the table lists them.
pub(crate) fn kernels() -> Vec<Box<dyn HotKernel>> {
    let mut v: Vec<Box<dyn HotKernel>> = Vec::new();
    v.extend(mlr::kernels());
    v.extend(mf::kernels());
    v.extend(lda::kernels());
    v.extend(cnn::kernels());
    v.extend(events::kernels());
    v
}

/// One row of the bench table.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Row {
    /// Model.
    pub(crate) model: &'static str,
    /// Kernel name.
    pub(crate) kernel: &'static str,
    /// What was measured.
    pub(crate) description: String,
    /// Units per second (one core).
    pub(crate) rate: f64,
    /// Unit of `rate`.
    pub(crate) unit: &'static str,
    /// GFLOP/s (one core).
    pub(crate) gflops: f64,
    /// GB/s of essential traffic (one core).
    pub(crate) gbytes: f64,
    /// The roofline for this kernel's arithmetic intensity, GFLOP/s (NaN if not arithmetic).
    pub(crate) roofline_gflops: f64,
    /// `compute` or `memory`: which ceiling bounds the kernel.
    pub(crate) bound: &'static str,
    /// Achieved over the roofline (NaN if not arithmetic).
    pub(crate) fraction: f64,
    /// Achieved over the hard roofline: min(FMA peak, bandwidth × intensity)
    /// (NaN if not arithmetic).
    pub(crate) peak_fraction: f64,
}

/// CPU seconds this process has run, all threads (NaN where the platform
/// has no process clock): the CPU time a run reports in its manifest.
pub(crate) fn process_seconds() -> f64 {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid timespec to write into.
        if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) } == 0 {
            return t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9;
        }
    }
    f64::NAN
}

/// CPU seconds this thread has run (wall seconds where the platform has no
/// thread clock). Rates are taken per CPU second so that other processes on
/// a shared machine do not count against a kernel.
pub(crate) fn thread_seconds() -> f64 {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid timespec to write into.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0 {
            return t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9;
        }
    }
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Times `p` for about `seconds` of wall time (after one warm-up call);
/// returns the work and CPU seconds of the fastest of several timed batches
/// of calls (the machine is shared: the fastest batch is the least disturbed).
pub(crate) fn time(p: &mut dyn Prepared, seconds: f64) -> (Work, f64) {
    let warm = thread_seconds();
    p.run();
    let one = (thread_seconds() - warm).max(1e-6);
    let calls = ((seconds / 5.0) / one).ceil().max(1.0) as usize;
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut best: Option<(Work, f64)> = None;
    loop {
        let t = thread_seconds();
        let mut w = Work::default();
        for _ in 0..calls {
            w += p.run();
        }
        let s = (thread_seconds() - t).max(1e-9);
        if best.is_none_or(|(bw, bs)| w.units / s > bw.units / bs) {
            best = Some((w, s));
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    best.expect("timed at least once")
}

/// Measures one kernel against `limits`.
pub(crate) fn measure(k: &dyn HotKernel, ctx: &BenchContext, limits: &Limits) -> Result<Row> {
    let mut p = k.prepare(ctx)?;
    let (w, s) = time(p.as_mut(), ctx.seconds);
    let gflops = w.flops / s / 1e9;
    let gbytes = w.bytes / s / 1e9;
    let (gemm, fma) = if k.f64_arithmetic() {
        (limits.gemm_f64_one_core, limits.fma_one_core / 2.0)
    } else {
        (limits.gemm_one_core, limits.fma_one_core)
    };
    let (roofline, bound) = if w.flops > 0.0 {
        let mem = if w.bytes > 0.0 {
            limits.bandwidth_one_core * w.flops / w.bytes
        } else {
            f64::INFINITY
        };
        if mem < gemm {
            (mem, "memory")
        } else {
            (gemm, "compute")
        }
    } else {
        (f64::NAN, "-")
    };
    let peak_fraction = if w.flops > 0.0 {
        let mem = if w.bytes > 0.0 {
            limits.bandwidth_one_core * w.flops / w.bytes
        } else {
            f64::INFINITY
        };
        gflops / mem.min(fma)
    } else {
        f64::NAN
    };
    Ok(Row {
        model: k.model(),
        kernel: k.name(),
        description: k.describe(),
        rate: w.units / s,
        unit: k.unit(),
        gflops,
        gbytes,
        roofline_gflops: roofline,
        bound,
        fraction: gflops / roofline,
        peak_fraction,
    })
}

/// The bench table as text: the limits, then one line per kernel.
pub(crate) fn render(limits: &Limits, rows: &[Row]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "kernel level: {} ({}={})",
        simd::level().name(),
        simd::ENV,
        std::env::var(simd::ENV).unwrap_or_else(|_| "unset".into())
    );
    let _ = writeln!(s, "{}", limits.describe());
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<6} {:<22} {:>14} {:<10} {:>8} {:>8} {:>9} {:<7} {:>6} {:>6}",
        "model", "kernel", "rate/s", "unit", "GFLOP/s", "GB/s", "roofline", "bound", "frac", "peak"
    );
    for r in rows {
        let frac = if r.fraction.is_finite() {
            format!("{:.0}%", 100.0 * r.fraction)
        } else {
            "-".into()
        };
        let peak = if r.peak_fraction.is_finite() {
            format!("{:.0}%", 100.0 * r.peak_fraction)
        } else {
            "-".into()
        };
        let roof = if r.roofline_gflops.is_finite() {
            format!("{:.1}", r.roofline_gflops)
        } else {
            "-".into()
        };
        let _ = writeln!(
            s,
            "{:<6} {:<22} {:>14} {:<10} {:>8.1} {:>8.2} {:>9} {:<7} {:>6} {:>6}",
            r.model,
            r.kernel,
            fmt_rate(r.rate),
            r.unit,
            r.gflops,
            r.gbytes,
            roof,
            r.bound,
            frac,
            peak
        );
    }
    let _ = writeln!(
        s,
        "(frac: of min(GEMM, bandwidth × intensity); peak: of min(FMA peak, bandwidth × intensity); \
         f64 kernels (mf) against the f64 GEMM and half the f32 FMA peak)"
    );
    let _ = writeln!(s);
    for r in rows {
        let _ = writeln!(s, "{}: {}", r.kernel, r.description);
    }
    s
}

fn fmt_rate(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2} G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} k", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

/// A classification dataset for a bench kernel: the real files where the
/// data folder has them, else the full-size stand-in.
pub(crate) fn classification(
    ctx: &BenchContext,
    name: crate::data::DatasetName,
) -> Result<std::sync::Arc<crate::data::Classification>> {
    match ctx.cache.classification(name, &ctx.data, 0) {
        Ok(d) => Ok(d),
        Err(e) if !ctx.data.synthetic => {
            eprintln!("bench: {name}: using the stand-in ({e:#})");
            let stand_in = DataOptions {
                synthetic: true,
                synthetic_scale: 1.0,
                ..ctx.data.clone()
            };
            ctx.cache.classification(name, &stand_in, 0)
        }
        Err(e) => Err(e),
    }
}
