//! Bounds on every size a scenario sets, checked while it is parsed (before
//! anything is expanded or allocated), each error naming the limit and the
//! line. What the sizes *together* cost in memory is estimated, and refused
//! above the machine's memory, by [`crate::experiment::budget`].

use std::ops::Range;

use anyhow::Result;

use super::SourceText;

/// Largest scenario file read (bytes); bundled scenarios are a few KiB.
pub(crate) const MAX_SCENARIO_BYTES: u64 = 1 << 20;
/// Most trials per point.
pub const MAX_TRIALS: usize = 10_000_000;
/// Most values in one list (a sweep, the worker counts, the series, …).
pub(crate) const MAX_LIST: usize = 10_000;
/// Most points (series × swept values) of one scenario.
pub(crate) const MAX_POINTS: usize = 100_000;
/// Most iterations of any run (`max_iterations`, `iterations`, …).
pub(crate) const MAX_ITERATIONS: usize = 1_000_000_000;
/// Most updates of a runtime measurement (`updates` plus `warmup_updates`).
pub(crate) const MAX_UPDATES: u64 = 1_000_000_000;
/// Most simulated events of one run, expected (gradients, updates): a run
/// that needs more would not finish in any reasonable time.
pub(crate) const MAX_EVENTS: f64 = 1e10;

/// Refuses a run of about `events` simulated events above [`MAX_EVENTS`];
/// `what` explains where the number comes from.
pub(crate) fn events(
    src: &SourceText,
    span: &Range<usize>,
    field: &str,
    events: f64,
    what: &str,
) -> Result<()> {
    if events.is_nan() || events > MAX_EVENTS {
        return Err(at(
            src,
            span,
            field,
            format!(
                "{what} make about {events:.1e} simulated events per run, more than the limit of {MAX_EVENTS:e}"
            ),
        ));
    }
    Ok(())
}

/// A typical draw of a delay: its mean, or for an infinite-mean Pareto its
/// median (for estimates of how many events a run takes).
pub(crate) fn typical_delay(d: &crate::cluster::Delay) -> f64 {
    let m = d.mean();
    if m.is_finite() {
        return m;
    }
    match d {
        crate::cluster::Delay::Pareto { scale, shape } => scale * 2f64.powf(1.0 / shape),
        _ => 1.0,
    }
}

/// Longest simulated time and largest delay or time parameter (seconds):
/// about 31,700 years, far from where sums of simulated times overflow.
pub(crate) const MAX_SECONDS: f64 = 1e12;

fn at(src: &SourceText, span: &Range<usize>, field: &str, msg: String) -> anyhow::Error {
    if span.end > 0 {
        src.error_at(span.clone(), field, msg)
    } else {
        src.error(field, msg)
    }
}

/// `trials` between 1 and [`MAX_TRIALS`].
pub(crate) fn trials(src: &SourceText, span: Range<usize>, trials: usize) -> Result<usize> {
    if trials == 0 {
        return Err(at(src, &span, "trials", "must be at least 1".into()));
    }
    if trials > MAX_TRIALS {
        return Err(at(
            src,
            &span,
            "trials",
            format!("{trials} is more than the limit of {MAX_TRIALS} trials per point"),
        ));
    }
    Ok(trials)
}

/// A list of at most [`MAX_LIST`] values.
pub(crate) fn list_len(
    src: &SourceText,
    span: &Range<usize>,
    field: &str,
    len: usize,
) -> Result<()> {
    if len > MAX_LIST {
        return Err(at(
            src,
            span,
            field,
            format!("{len} values are more than the limit of {MAX_LIST}"),
        ));
    }
    Ok(())
}

/// At most [`MAX_POINTS`] points; `count` is computed without expanding them.
pub(crate) fn points(
    src: &SourceText,
    span: &Range<usize>,
    field: &str,
    count: u128,
) -> Result<()> {
    if count > MAX_POINTS as u128 {
        return Err(at(
            src,
            span,
            field,
            format!(
                "the series and their values make {count} points, more than the limit of {MAX_POINTS}"
            ),
        ));
    }
    Ok(())
}

/// An iteration count of at most [`MAX_ITERATIONS`].
pub(crate) fn iterations(
    src: &SourceText,
    span: &Range<usize>,
    field: &str,
    n: usize,
) -> Result<usize> {
    if n > MAX_ITERATIONS {
        return Err(at(
            src,
            span,
            field,
            format!("{n} is more than the limit of {MAX_ITERATIONS} iterations"),
        ));
    }
    Ok(n)
}

/// A time in seconds of at most [`MAX_SECONDS`] (the caller checks sign and finiteness).
pub(crate) fn seconds(src: &SourceText, span: &Range<usize>, field: &str, v: f64) -> Result<f64> {
    if v > MAX_SECONDS {
        return Err(at(
            src,
            span,
            field,
            format!("{v} s is more than the limit of {MAX_SECONDS:e} s"),
        ));
    }
    Ok(v)
}

/// Refuses a list in which a value appears twice (it would give repeated
/// (series, x) rows).
pub(crate) fn distinct<T: PartialEq + std::fmt::Display>(
    src: &SourceText,
    span: &Range<usize>,
    field: &str,
    values: &[T],
) -> Result<()> {
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            return Err(at(
                src,
                span,
                field,
                format!("{v} appears twice; give each value once"),
            ));
        }
    }
    Ok(())
}

/// Refuses a list of numbers in which a value appears twice (`-0` and `0` are one value).
pub(crate) fn distinct_f64(
    src: &SourceText,
    span: &Range<usize>,
    field: &str,
    values: &[f64],
) -> Result<()> {
    let mut sorted: Vec<f64> = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(at(
            src,
            span,
            field,
            format!("{} appears twice; give each value once", w[0]),
        ));
    }
    Ok(())
}

/// Number of divisors of `p` (without listing them).
pub(crate) fn divisor_count(p: usize) -> usize {
    let mut n = 0;
    let mut d = 1;
    while d * d <= p {
        if p.is_multiple_of(d) {
            n += if d * d == p { 1 } else { 2 };
        }
        d += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisors_are_counted() {
        for p in 1..200 {
            assert_eq!(
                divisor_count(p),
                super::super::protocol::divisors(p).len(),
                "{p}"
            );
        }
    }

    #[test]
    fn limits_name_themselves() {
        let src = SourceText::new("trials = 1\n", "t.toml");
        let e = trials(&src, 0..6, MAX_TRIALS + 1).unwrap_err().to_string();
        assert!(e.contains("10000000") && e.contains("t.toml:1:1"), "{e}");
        let e = distinct(&src, &(0..6), "workers", &[1, 2, 1])
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 appears twice"), "{e}");
        let e = distinct_f64(&src, &(0..6), "sweep", &[0.5, -0.0, 0.0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("appears twice"), "{e}");
        distinct_f64(&src, &(0..6), "sweep", &[0.5, 0.25]).unwrap();
    }
}
