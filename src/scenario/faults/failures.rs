//! The `[failure]` table of a `faults` scenario: the failure process (none,
//! fixed outages, Poisson or a trace) and the checks on the nodes it names.

use anyhow::Result;

use super::{Raw, WallclockSeries, non_negative, positive};
use crate::policy::failure::{FailureProcess, read_trace_rows};
use crate::scenario::{SourceText, limits};

/// Most outages a failure process may produce in one run (expected, for a
/// Poisson process).
pub(crate) const MAX_OUTAGES: f64 = 1e6;

/// Every node a failure names must exist in every series: shard `s`'s
/// chain is nodes `s·chain..(s+1)·chain` (chain 1 unless the strategy is
/// chain replication), so the nodes are `0..ps_nodes·chain` with the
/// shortest chain of the series. A Poisson process must not produce more
/// than [`MAX_OUTAGES`] outages per run.
pub(super) fn check_failure_nodes(
    src: &SourceText,
    raw: &Raw,
    failure: &FailureProcess,
    trace_lines: &[usize],
    ps_nodes: usize,
    series: &[WallclockSeries],
    horizon: f64,
) -> Result<()> {
    let span = raw.failure.as_ref().map_or(0..0, |f| f.span());
    let (short, long) = series.iter().fold((usize::MAX, 1), |(lo, hi), s| {
        let c = s.strategy.chain();
        (lo.min(c), hi.max(c))
    });
    let short = short.min(long);
    let limit = ps_nodes.saturating_mul(short);
    let narrow = series
        .iter()
        .find(|s| s.strategy.chain() == short)
        .map_or_else(String::new, |s| s.name.clone());
    let missing = |node: usize| {
        format!(
            "node {node} does not exist: the PS nodes are 0..={} (cluster ps_nodes = {ps_nodes}{})",
            limit.saturating_sub(1),
            if short > 1 || long > 1 {
                format!(", chains of {short} node(s) in series `{narrow}`")
            } else {
                String::new()
            }
        )
    };
    match failure {
        FailureProcess::Fixed { nodes, .. } => {
            limits::list_len(src, &span, "failure.nodes", nodes.len())?;
            limits::distinct(src, &span, "failure.nodes", nodes)?;
            if let Some(&n) = nodes.iter().find(|&&n| n >= limit) {
                return Err(src.error_at(span, "failure.nodes", missing(n)));
            }
        }
        FailureProcess::Trace { file, outages } => {
            for (o, line) in outages.iter().zip(trace_lines) {
                if o.node >= limit {
                    return Err(src.error_at(
                        span,
                        "failure.file",
                        format!("failure trace {file} line {line}: {}", missing(o.node)),
                    ));
                }
            }
        }
        FailureProcess::Poisson { mtbf, repair } => {
            let expected = ps_nodes.saturating_mul(long) as f64 * horizon / (mtbf + repair);
            if expected.is_nan() || expected > MAX_OUTAGES {
                return Err(src.error_at(
                    span,
                    "failure.mtbf",
                    format!(
                        "{} nodes failing every {mtbf} s (+ {repair} s repair) over the horizon of {horizon} s \
                         make about {expected:.0} outages per run, more than the limit of {MAX_OUTAGES:e}",
                        ps_nodes.saturating_mul(long)
                    ),
                ));
            }
        }
        FailureProcess::None => {}
    }
    Ok(())
}

/// The failure process, and for a trace the line of each outage.
pub(super) fn failure_process(src: &SourceText, raw: &Raw) -> Result<(FailureProcess, Vec<usize>)> {
    let Some(f) = &raw.failure else {
        return Err(src.error(
            "failure",
            "missing [failure] table (process = fixed | poisson | trace)",
        ));
    };
    let span = f.span();
    let r = f.get_ref();
    let given = [
        ("nodes", r.nodes.is_some()),
        ("at", r.at.is_some()),
        ("back", r.back.is_some()),
        ("mtbf", r.mtbf.is_some()),
        ("repair", r.repair.is_some()),
        ("file", r.file.is_some()),
    ];
    let (allowed, needed): (&[&str], &[&str]) = match r.process.as_str() {
        "fixed" => (&["nodes", "at", "back"], &["at"]),
        "poisson" => (&["mtbf", "repair"], &["mtbf", "repair"]),
        "trace" => (&["file"], &["file"]),
        "none" => (&[], &[]),
        other => {
            return Err(src.error_at(
                span,
                "failure.process",
                format!("unknown process `{other}`; expected fixed, poisson, trace or none"),
            ));
        }
    };
    for (name, set) in given {
        if set && !allowed.contains(&name) {
            return Err(src.error_at(
                span,
                &format!("failure.{name}"),
                format!("does not apply to process `{}`", r.process),
            ));
        }
        if !set && needed.contains(&name) {
            return Err(src.error_at(
                span,
                &format!("failure.{name}"),
                format!("process `{}` needs it", r.process),
            ));
        }
    }
    let mut lines = Vec::new();
    let process = match r.process.as_str() {
        "fixed" => {
            let at = non_negative(src, span.clone(), "failure.at", r.at.unwrap_or(0.0))?;
            let back = r.back.unwrap_or(f64::INFINITY);
            if back.is_nan() || back < at {
                return Err(src.error_at(
                    span,
                    "failure.back",
                    format!("{back} must be ≥ at = {at}"),
                ));
            }
            FailureProcess::Fixed {
                nodes: r.nodes.clone().unwrap_or_else(|| vec![0]),
                at,
                back,
            }
        }
        "poisson" => FailureProcess::Poisson {
            mtbf: positive(src, span.clone(), "failure.mtbf", r.mtbf.unwrap_or(0.0))?,
            repair: non_negative(src, span.clone(), "failure.repair", r.repair.unwrap_or(0.0))?,
        },
        "trace" => {
            let file = r.file.clone().unwrap_or_default();
            let base = if src.origin.starts_with("bundled:") {
                std::path::PathBuf::from(".")
            } else {
                std::path::Path::new(src.origin).parent().map_or_else(
                    || std::path::PathBuf::from("."),
                    std::path::Path::to_path_buf,
                )
            };
            let rows = read_trace_rows(&base.join(&file))
                .map_err(|e| src.error_at(span.clone(), "failure.file", format!("{e:#}")))?;
            let outages = rows.iter().map(|(_, o)| *o).collect();
            lines = rows.iter().map(|(l, _)| *l).collect();
            FailureProcess::Trace { file, outages }
        }
        _ => FailureProcess::None,
    };
    Ok((process, lines))
}
