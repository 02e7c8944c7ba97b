//! REPORT.md findings of an adaptive K rule: its error floor beside the
//! oracle schedule's (K switched at times read off pilot runs) and the best
//! fixed K of the same protocol, and when the rule switched
//! (`k_switches.csv`).

use std::collections::BTreeMap;

use anyhow::Result;

use super::{Csv, TS};
use crate::report::columns::protocol::{SwitchColumns, SwitchRow};
use crate::report::figures::results::Results;

/// Columns of `k_switches.csv`.
const SW: SwitchColumns = SwitchRow::NAMES;

/// File the experiment writes the rule's switches to.
const SWITCHES: &str = "k_switches.csv";

/// One summary row: what a series is and its floor.
struct Row {
    series: String,
    protocol: String,
    workers: String,
    k: String,
    how: String,
    aware: bool,
    floor: (f64, f64, f64),
}

/// How a floor compares with another's, by their 95% CIs.
fn verdict(a: (f64, f64, f64), b: (f64, f64, f64)) -> &'static str {
    if a.2 < b.1 {
        "beats"
    } else if a.1 > b.2 {
        "does worse than"
    } else {
        "matches"
    }
}

/// `x` with four significant digits (floors span decades).
fn sig(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return format!("{x}");
    }
    let digits = (3 - x.abs().log10().floor() as i64).clamp(0, 12) as usize;
    format!("{x:.digits$}")
}

fn floor_text(r: &Row) -> String {
    let (f, lo, hi) = r.floor;
    format!("{} [{}, {}]", sig(f), sig(lo), sig(hi))
}

/// One finding per rule point; none when the scenario has no rule series.
pub(super) fn findings(r: &Results) -> Result<Vec<String>> {
    let path = r.dir.join("summary.csv");
    let csv = Csv::read(&path)?;
    let (Some(chow), Some(caware)) = (
        csv.table.column(TS.k_schedule),
        csv.table.column(TS.staleness_aware_c),
    ) else {
        return Ok(Vec::new());
    };
    let (cs, cp, cw, ck) = (
        csv.col(TS.series)?,
        csv.col(TS.protocol)?,
        csv.col(TS.workers)?,
        csv.col(TS.k)?,
    );
    let (cf, cl, ch) = (
        csv.col(TS.floor_mean)?,
        csv.col(TS.floor_ci95_low)?,
        csv.col(TS.floor_ci95_high)?,
    );
    let mut rows = Vec::new();
    for i in 0..csv.table.rows.len() {
        rows.push(Row {
            series: csv.text(i, cs).to_string(),
            protocol: csv.text(i, cp).to_string(),
            workers: csv.text(i, cw).to_string(),
            k: csv.text(i, ck).to_string(),
            how: csv.text(i, chow).to_string(),
            aware: !csv.text(i, caware).is_empty(),
            floor: (csv.num(i, cf)?, csv.num(i, cl)?, csv.num(i, ch)?),
        });
    }
    let switches = switch_times(r)?;
    let mut out = Vec::new();
    for rule in rows.iter().filter(|x| x.how.starts_with("plateau:")) {
        let same = |x: &&Row| x.workers == rule.workers && x.protocol == rule.protocol;
        let oracle = rows
            .iter()
            .filter(same)
            .find(|x| x.k.is_empty() && !x.how.starts_with("plateau:") && !x.aware);
        let best = rows
            .iter()
            .filter(same)
            .filter(|x| !x.k.is_empty() && !x.aware && x.floor.0.is_finite())
            .min_by(|a, b| a.floor.0.total_cmp(&b.floor.0));
        let mut s = format!(
            "`{}`, P = {}: error floor (95% CI) of the adaptive K rule `{}` ({}) {}",
            r.name(),
            rule.workers,
            rule.series,
            rule.how,
            floor_text(rule)
        );
        let mut verdicts = Vec::new();
        match oracle {
            Some(o) => {
                s.push_str(&format!(
                    "; of the oracle schedule `{}` ({}) {}",
                    o.series,
                    o.how,
                    floor_text(o)
                ));
                verdicts.push(format!("{} the oracle", verdict(rule.floor, o.floor)));
            }
            None => s.push_str("; no oracle schedule of the same protocol to compare with"),
        }
        if let Some(b) = best {
            s.push_str(&format!(
                "; of the best fixed K of {}, `{}`, {}",
                rule.protocol,
                b.series,
                floor_text(b)
            ));
            verdicts.push(format!("{} the best fixed K", verdict(rule.floor, b.floor)));
        }
        s.push('.');
        if !verdicts.is_empty() {
            s.push_str(&format!(
                " By the 95% CIs (matches: they overlap; beats: the rule's lies below) the rule {}.",
                verdicts.join(" and ")
            ));
        }
        if let Some(sw) = switches.get(&(rule.series.clone(), rule.workers.clone())) {
            s.push_str(&format!(" Switches ({SWITCHES}): {sw}."));
        }
        out.push(s);
    }
    Ok(out)
}

/// Per (series, P): "K 1→2 at mean time 120.0 (100 of 100 trials), …".
fn switch_times(r: &Results) -> Result<BTreeMap<(String, String), String>> {
    let path = r.dir.join(SWITCHES);
    if !path.is_file() {
        return Ok(BTreeMap::new());
    }
    let csv = Csv::read(&path)?;
    let (cs, cw, ct, ci) = (
        csv.col(SW.series)?,
        csv.col(SW.workers)?,
        csv.col(SW.trial)?,
        csv.col(SW.switch)?,
    );
    let (ctime, cfrom, cto) = (csv.col(SW.time)?, csv.col(SW.k_from)?, csv.col(SW.k_to)?);
    // (series, P) -> trials seen, and per switch index: (from, to, Σ time, n).
    type Acc = (
        std::collections::BTreeSet<String>,
        BTreeMap<u64, (String, String, f64, usize)>,
    );
    let mut acc: BTreeMap<(String, String), Acc> = BTreeMap::new();
    for i in 0..csv.table.rows.len() {
        let key = (csv.text(i, cs).to_string(), csv.text(i, cw).to_string());
        let e = acc.entry(key).or_default();
        e.0.insert(csv.text(i, ct).to_string());
        let idx = csv.num(i, ci)?;
        if idx >= 1.0 {
            let s = e.1.entry(idx as u64).or_insert_with(|| {
                (
                    csv.text(i, cfrom).to_string(),
                    csv.text(i, cto).to_string(),
                    0.0,
                    0,
                )
            });
            s.2 += csv.num(i, ctime)?;
            s.3 += 1;
        }
    }
    Ok(acc
        .into_iter()
        .map(|(key, (trials, sw))| {
            let text = if sw.is_empty() {
                format!("none in {} trials", trials.len())
            } else {
                sw.values()
                    .map(|(from, to, sum, n)| {
                        format!(
                            "K {from}→{to} at mean time {:.1} ({n} of {} trials)",
                            sum / *n as f64,
                            trials.len()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            (key, text)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_compare_confidence_intervals() {
        assert_eq!(verdict((1.0, 0.9, 1.1), (2.0, 1.8, 2.2)), "beats");
        assert_eq!(verdict((2.0, 1.8, 2.2), (1.0, 0.9, 1.1)), "does worse than");
        assert_eq!(verdict((1.0, 0.9, 1.1), (1.05, 1.0, 1.1)), "matches");
        assert_eq!(sig(0.0015764), "0.001576");
        assert_eq!(sig(2.30261), "2.303");
        assert_eq!(sig(1234.4), "1234");
    }
}
