//! Which vector instructions the numeric kernels use, chosen at run time.
//!
//! Every kernel in scarsim has one portable body and, on x86-64, the same
//! body compiled for AVX2+FMA and for AVX-512 (`#[target_feature]`
//! functions selected here at run time — never build flags tied to the build
//! machine's CPU). The bodies only vectorise across independent outputs and
//! keep every sum in one fixed order; multiply-adds are fused everywhere,
//! including the portable body (`f32::mul_add` is correctly rounded on every
//! platform), so every level computes the same bits and a run's CSV does not
//! depend on the CPU it ran on.
//!
//! `SCARSIM_KERNELS=portable` (or `avx2`, `avx512`) caps the level, so the
//! portable path can be run on any machine and its output compared with the
//! vector paths' (the CLI tests do so). The variable is read once per
//! process; an unknown value is an error the first time a kernel runs (see
//! `level`).

use std::sync::OnceLock;

/// An instruction-set level, from the least to the most capable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Level {
    /// Plain Rust, no target features (the scalar body the vector levels
    /// must match bit for bit).
    Portable,
    /// AVX2 with FMA (x86-64).
    Avx2,
    /// AVX-512 F, BW, DQ and VL (x86-64).
    Avx512,
}

impl Level {
    /// The name used by `SCARSIM_KERNELS` and `scarsim bench`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Level::Portable => "portable",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }

    /// Parses a `SCARSIM_KERNELS` value.
    pub(crate) fn parse(s: &str) -> Option<Level> {
        match s.trim().to_ascii_lowercase().as_str() {
            "portable" | "scalar" => Some(Level::Portable),
            "avx2" => Some(Level::Avx2),
            "avx512" | "avx-512" => Some(Level::Avx512),
            _ => None,
        }
    }

    /// Every level this CPU supports, from [`Level::Portable`] up.
    #[cfg(test)]
    pub(crate) fn supported() -> Vec<Level> {
        let best = detected();
        [Level::Portable, Level::Avx2, Level::Avx512]
            .into_iter()
            .filter(|l| *l <= best)
            .collect()
    }
}

/// The most capable level this CPU supports (detected once per process).
pub(crate) fn detected() -> Level {
    static DETECTED: OnceLock<Level> = OnceLock::new();
    *DETECTED.get_or_init(detect)
}

fn detect() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512dq")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("fma")
        {
            return Level::Avx512;
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return Level::Avx2;
        }
    }
    Level::Portable
}

/// The environment variable that caps the level.
pub(crate) const ENV: &str = "SCARSIM_KERNELS";

static LEVEL: OnceLock<Level> = OnceLock::new();

/// The level the kernels use in this process: the CPU's best, capped by
/// `SCARSIM_KERNELS` when it is set. An unknown value of the variable is
/// reported on standard error once and ignored (the CLI checks it up front
/// with [`check_env`], so a run never starts with a misspelt value).
pub(crate) fn level() -> Level {
    *LEVEL.get_or_init(|| {
        let best = detected();
        match std::env::var(ENV) {
            Ok(v) => match Level::parse(&v) {
                Some(cap) => cap.min(best),
                None => {
                    eprintln!("warning: {ENV}={v:?} is not portable, avx2 or avx512; ignored");
                    best
                }
            },
            Err(_) => best,
        }
    })
}

/// Checks `SCARSIM_KERNELS`: `Err` with a message naming the allowed values
/// when it is set to something else.
pub(crate) fn check_env() -> Result<(), String> {
    match std::env::var(ENV) {
        Ok(v) if Level::parse(&v).is_none() => Err(format!(
            "{ENV}={v:?} is not a kernel level; allowed: portable, avx2, avx512"
        )),
        _ => Ok(()),
    }
}

/// Defines a kernel that runs one `#[inline(always)]` body compiled for the
/// process's `level`, and a twin that takes the level explicitly (for
/// tests and `scarsim bench`, which compare the levels).
///
/// ```ignore
/// simd::kernel! {
///     /// Doc comment of the kernel.
///     pub fn axpy, axpy_at(dst: &mut [f32], a: f32, src: &[f32]) = axpy_body;
/// }
/// ```
///
/// The body must give the same bits at every level: vectorise across
/// independent outputs only, keep each sum in one order, and fuse
/// multiply-adds with `mul_add` (which the portable level computes exactly
/// as the vector levels do). Argument types must not name lifetimes.
///
/// A body written `= body::<REGS>` is generic over `const REGS: usize`, the
/// vector registers of the level it is compiled for (`REGS_AVX512` = 32 at
/// AVX-512 and, so that tests comparing levels compare tilings too, at the
/// portable level; `REGS_AVX2` = 16 at AVX2), so that it can pick
/// tile sizes that stay in registers: a tile must not change an output's
/// chain, only how many outputs are computed side by side.
#[macro_export]
macro_rules! kernel {
    ($(#[$m:meta])* $vis:vis fn $name:ident, $at:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? = $body:ident::<REGS>;) => {
        $(#[$m])*
        #[inline]
        #[allow(dead_code, clippy::too_many_arguments)]
        $vis fn $name($($a: $t),*) $(-> $r)? {
            $at($crate::simd::level(), $($a),*)
        }

        /// The same kernel at an explicit [`Level`](crate::simd::Level), capped
        /// at what the CPU supports.
        #[allow(dead_code, clippy::too_many_arguments)]
        $vis fn $at(level: $crate::simd::Level, $($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx512($($a: $t),*) $(-> $r)? { $body::<{ $crate::simd::REGS_AVX512 }>($($a),*) }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2($($a: $t),*) $(-> $r)? { $body::<{ $crate::simd::REGS_AVX2 }>($($a),*) }
                match level.min($crate::simd::detected()) {
                    // SAFETY: `detected()` reports only features this CPU has.
                    $crate::simd::Level::Avx512 => return unsafe { avx512($($a),*) },
                    // SAFETY: as above.
                    $crate::simd::Level::Avx2 => return unsafe { avx2($($a),*) },
                    $crate::simd::Level::Portable => {}
                }
            }
            let _ = level;
            // The AVX-512 tiles: comparing the portable level with AVX2 (as
            // the tests do on any x86-64 machine) then compares both tilings.
            $body::<{ $crate::simd::REGS_AVX512 }>($($a),*)
        }
    };
    ($(#[$m:meta])* $vis:vis fn $name:ident, $at:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? = $body:path;) => {
        $(#[$m])*
        #[inline]
        #[allow(dead_code, clippy::too_many_arguments)]
        $vis fn $name($($a: $t),*) $(-> $r)? {
            $at($crate::simd::level(), $($a),*)
        }

        /// The same kernel at an explicit [`Level`](crate::simd::Level), capped
        /// at what the CPU supports.
        #[allow(dead_code, clippy::too_many_arguments)]
        $vis fn $at(level: $crate::simd::Level, $($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx512($($a: $t),*) $(-> $r)? { $body($($a),*) }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2($($a: $t),*) $(-> $r)? { $body($($a),*) }
                match level.min($crate::simd::detected()) {
                    // SAFETY: `detected()` reports only features this CPU has.
                    $crate::simd::Level::Avx512 => return unsafe { avx512($($a),*) },
                    // SAFETY: as above.
                    $crate::simd::Level::Avx2 => return unsafe { avx2($($a),*) },
                    $crate::simd::Level::Portable => {}
                }
            }
            let _ = level;
            $body($($a),*)
        }
    };
}
pub(crate) use kernel;

/// Vector registers at AVX-512 (zmm0–zmm31), for [`kernel!`] bodies that
/// size their tiles by the register file.
pub(crate) const REGS_AVX512: usize = 32;
/// Vector registers at AVX2 (ymm0–ymm15).
pub(crate) const REGS_AVX2: usize = 16;

/// Asks the CPU to bring the cache lines of `data` into L1 (a hint: no
/// effect on results, nothing on targets without a prefetch instruction).
#[inline(always)]
pub(crate) fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = data.as_ptr().cast::<i8>();
        let bytes = std::mem::size_of_val(data);
        let mut off = 0;
        while off < bytes {
            // SAFETY: a prefetch never faults; the address is inside `data`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(off)) };
            off += 64;
        }
        if bytes > 0 {
            // The last line, when `data` does not start on a line boundary.
            // SAFETY: as above.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(bytes - 1)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_order() {
        assert_eq!(Level::parse("portable"), Some(Level::Portable));
        assert_eq!(Level::parse(" AVX2 "), Some(Level::Avx2));
        assert_eq!(Level::parse("avx512"), Some(Level::Avx512));
        assert_eq!(Level::parse("sse"), None);
        assert!(Level::Portable < Level::Avx2 && Level::Avx2 < Level::Avx512);
        let s = Level::supported();
        assert_eq!(s[0], Level::Portable);
        assert_eq!(*s.last().unwrap(), detected());
        assert!(level() <= detected());
    }
}
