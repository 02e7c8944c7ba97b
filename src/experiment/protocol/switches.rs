//! `k_switches.csv`: what the adaptive K rule did in every trial.

use super::columns::SWITCH_COLUMNS;
use crate::cluster::Switch;
use crate::report::{Table, fmt_f64};
use crate::scenario::protocol::{Point, ProtocolScenario};

/// File name of the table.
pub(crate) const SWITCHES_CSV: &str = "k_switches.csv";

/// One row per (rule point, trial, switch), switch 0 being K at time 0;
/// `None` when no point has a rule (the file is then not written).
/// `switches[pi][t]` are the switches of trial t of point pi.
pub(crate) fn switch_table(
    sc: &ProtocolScenario,
    points: &[Point],
    switches: &[Vec<&[Switch]>],
) -> Option<Table> {
    if points.iter().all(|p| p.rule.is_none()) {
        return None;
    }
    let mut table = Table::new(SWITCH_COLUMNS.iter().copied());
    for (p, trials) in points.iter().zip(switches) {
        let Some(rule) = p.rule else { continue };
        let protocol = sc.series[p.series].protocol.name();
        for (t, sw) in trials.iter().enumerate() {
            let row = |i: usize, time: f64, from: String, to: usize, seen: u64| {
                vec![
                    p.label.clone(),
                    protocol.to_string(),
                    p.workers.to_string(),
                    t.to_string(),
                    i.to_string(),
                    fmt_f64(time),
                    from,
                    to.to_string(),
                    seen.to_string(),
                ]
            };
            table.push(row(0, 0.0, String::new(), rule.start.min(rule.max), 0));
            for (i, s) in sw.iter().enumerate() {
                table.push(row(i + 1, s.time, s.from.to_string(), s.to, s.observed));
            }
        }
    }
    Some(table)
}
