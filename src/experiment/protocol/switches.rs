//! `k_switches.csv`: what the adaptive K rule did in every trial.

use crate::cluster::Switch;
use crate::report::Table;
use crate::report::columns::protocol::SwitchRow;
use crate::report::row::Row;
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
    let mut table = SwitchRow::table();
    for (p, trials) in points.iter().zip(switches) {
        let Some(rule) = p.rule else { continue };
        let protocol = sc.series[p.series].protocol.name();
        for (t, sw) in trials.iter().enumerate() {
            let row = |i: usize, time: f64, from: Option<usize>, to: usize, seen: u64| SwitchRow {
                series: p.label.clone(),
                protocol,
                workers: p.workers,
                trial: t,
                switch: i,
                time,
                k_from: from,
                k_to: to,
                losses_observed: seen,
            };
            table.add(&row(0, 0.0, None, rule.start.min(rule.max), 0));
            for (i, s) in sw.iter().enumerate() {
                table.add(&row(i + 1, s.time, Some(s.from), s.to, s.observed));
            }
        }
    }
    Some(table)
}
