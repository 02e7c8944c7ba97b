//! The study's verdicts and outputs: each claim's test, `robustness.csv`,
//! the claim × setting map and `REPORT.md`.

use serde::Serialize;

use super::super::report::link;
use super::super::*;
use super::{INTERVAL_FACTORS, MEANS, ORDERS, Setting};
use crate::report::figures::chart::{Map, Mark};
use crate::report::figures::claims::Estimate;
use crate::report::figures::recovery::selector_ordering;
use crate::report::fmt_f64;

/// What a claim asserts about its estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Test {
    /// The estimate (a reduction in %) lies in the paper's range.
    Range(f64, f64),
    /// The estimate (a paired difference) is negative.
    Negative,
}

/// One claim measured in one setting.
pub(super) struct Finding {
    pub(super) panel: &'static str,
    /// The `[[robustness]]` reading's label, or "as bundled".
    pub(super) reading: String,
    /// The panel's own C.
    pub(super) interval: usize,
    pub(super) setting: Setting,
    pub(super) claim: String,
    pub(super) test: Test,
    pub(super) estimate: Option<Estimate>,
}

impl Finding {
    fn mark(&self) -> Mark {
        let Some(e) = self.estimate else {
            return Mark::Missing;
        };
        if !e.value.is_finite() {
            return Mark::Missing;
        }
        match self.test {
            Test::Range(lo, hi) => {
                let inside = (lo..=hi).contains(&e.value);
                match (inside, e.lo >= lo && e.hi <= hi, e.hi < lo || e.lo > hi) {
                    (true, true, _) => Mark::Holds,
                    (true, false, _) => Mark::Leans,
                    (false, _, false) => Mark::Misses,
                    (false, _, true) => Mark::Fails,
                }
            }
            Test::Negative => {
                if e.hi < 0.0 {
                    Mark::Holds
                } else if e.value < 0.0 {
                    Mark::Leans
                } else if e.lo > 0.0 {
                    Mark::Fails
                } else {
                    Mark::Misses
                }
            }
        }
    }

    /// Whether the claim holds by its point estimate.
    fn holds(&self) -> Option<bool> {
        match self.mark() {
            Mark::Holds | Mark::Leans => Some(true),
            Mark::Misses | Mark::Fails => Some(false),
            Mark::Missing => None,
        }
    }
}

/// A variant's claims: (claim, test, estimate).
pub(super) fn claims_of(r: &Results) -> Result<Vec<(String, Test, Option<Estimate>)>> {
    let mut out: Vec<(String, Test, Option<Estimate>)> = figures::layout_for(r)
        .claims(r)?
        .into_iter()
        .map(|c| {
            let test = Test::Range(c.paper_range.0, c.paper_range.1);
            (c.quantity, test, c.measured)
        })
        .collect();
    if r.x_name().as_deref() == Some("checkpoint_fraction") {
        out.extend(
            selector_ordering(r)?
                .into_iter()
                .map(|(claim, d)| (claim, Test::Negative, d)),
        );
    }
    Ok(out)
}

/// A claim of one panel under one reading of its model-specific knobs.
pub(super) struct ClaimRow {
    panel: &'static str,
    reading: String,
    claim: String,
    test: Test,
}

impl ClaimRow {
    fn of(&self, f: &Finding) -> bool {
        f.panel == self.panel && f.reading == self.reading && f.claim == self.claim
    }
}

/// The distinct (panel, reading, claim) rows, in first-seen order.
pub(super) fn distinct_claims(findings: &[Finding]) -> Vec<ClaimRow> {
    let mut out: Vec<ClaimRow> = Vec::new();
    for f in findings {
        if !out.iter().any(|c| c.of(f)) {
            out.push(ClaimRow {
                panel: f.panel,
                reading: f.reading.clone(),
                claim: f.claim.clone(),
                test: f.test,
            });
        }
    }
    out
}

/// A row of `robustness.csv`.
#[derive(Serialize)]
struct Row<'a> {
    panel: &'a str,
    reading: &'a str,
    claim: &'a str,
    event_order: &'a str,
    checkpoint_interval: usize,
    failure_mean_of_run: String,
    value: String,
    ci95_low: String,
    ci95_high: String,
    trials: String,
    claim_low: String,
    claim_high: String,
    verdict: &'static str,
}

/// `robustness.csv`: one row per measured (panel, claim, setting).
pub(super) fn rows_csv(findings: &[Finding]) -> Result<Vec<u8>> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    for f in findings {
        let (lo, hi) = match f.test {
            Test::Range(lo, hi) => (fmt_f64(lo), fmt_f64(hi)),
            Test::Negative => (String::new(), "0".to_string()),
        };
        let e = f.estimate;
        w.serialize(Row {
            panel: f.panel,
            reading: &f.reading,
            claim: &f.claim,
            event_order: f.setting.order_name(),
            checkpoint_interval: f.setting.interval_for(f.interval),
            failure_mean_of_run: fmt_f64(MEANS[f.setting.mean].0),
            value: e.map_or_else(String::new, |e| fmt_f64(e.value)),
            ci95_low: e.map_or_else(String::new, |e| fmt_f64(e.lo)),
            ci95_high: e.map_or_else(String::new, |e| fmt_f64(e.hi)),
            trials: e.map_or_else(String::new, |e| e.n.to_string()),
            claim_low: lo,
            claim_high: hi,
            verdict: match f.mark() {
                Mark::Holds => "holds",
                Mark::Leans => "holds-point",
                Mark::Misses => "misses-point",
                Mark::Fails => "fails",
                Mark::Missing => "n/a",
            },
        })?;
    }
    w.into_inner().context("cannot finish robustness.csv")
}

/// The claim × setting map.
pub(super) fn map_of(claims: &[ClaimRow], findings: &[Finding]) -> Map {
    let settings = Setting::all();
    let per_order = INTERVAL_FACTORS.len() * MEANS.len();
    let header = vec![
        ORDERS
            .iter()
            .map(|o| {
                let s = Setting {
                    order: *o,
                    interval: 0,
                    mean: 0,
                };
                (s.order_name().replace('-', " "), per_order)
            })
            .collect(),
        settings
            .iter()
            .filter(|s| s.mean == 0)
            .map(|s| (INTERVAL_FACTORS[s.interval].1.to_string(), MEANS.len()))
            .collect(),
        settings
            .iter()
            .map(|s| (MEANS[s.mean].1.to_string(), 1))
            .collect(),
    ];
    let mut marks = Vec::new();
    for c in claims {
        for s in &settings {
            marks.push(
                findings
                    .iter()
                    .find(|f| c.of(f) && f.setting == *s)
                    .map_or(Mark::Missing, Finding::mark),
            );
        }
    }
    Map {
        title: "SCAR's claims under the knobs the paper leaves unstated".into(),
        subtitle: "rows: panel · claim; columns: event order, checkpoint interval C (panel's own = C), mean failure time (B = unperturbed run length)".into(),
        header,
        rows: claims
            .iter()
            .map(|c| {
                let reading = if c.reading == "as bundled" {
                    String::new()
                } else {
                    format!(" [{}]", c.reading)
                };
                format!(
                    "{}{reading} · {}",
                    c.panel.trim_start_matches("scar-"),
                    c.claim
                )
            })
            .collect(),
        cols: settings.len(),
        marks,
    }
}

/// The study's `REPORT.md`: what ran, each claim's tally, the readings
/// ranked, the map and what was not measured.
#[allow(clippy::too_many_arguments)]
pub(super) fn report_text(
    opts: &ReproduceOptions,
    entries: &[Entry],
    claims: &[ClaimRow],
    findings: &[Finding],
    problems: &[(&'static str, String, String)],
    pictures: &[PathBuf],
    seconds: f64,
) -> Result<String> {
    let mut w = String::new();
    intro(&mut w, opts, entries, seconds)?;
    claims_section(&mut w, claims, findings)?;
    readings_section(&mut w, findings)?;
    writeln!(w, "\n## Map\n")?;
    if let Some(png) = pictures.get(1) {
        writeln!(w, "![claims × settings]({})\n", link(&opts.out_dir, png))?;
    }
    not_measured(&mut w, problems, findings)?;
    Ok(w)
}

/// The settings a panel's checks refused, with why, and the claims that
/// ran but have no estimate (a `n/a` in `robustness.csv`).
fn not_measured(
    w: &mut String,
    problems: &[(&'static str, String, String)],
    findings: &[Finding],
) -> Result<()> {
    let missing: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.mark() == Mark::Missing)
        .collect();
    if problems.is_empty() && missing.is_empty() {
        return Ok(());
    }
    writeln!(w, "## Not measured\n")?;
    for (panel, setting, why) in problems {
        writeln!(w, "- `{panel}`, {setting}: {why}")?;
    }
    if !missing.is_empty() {
        if !problems.is_empty() {
            writeln!(w)?;
        }
        writeln!(
            w,
            "Claims that ran but have no estimate ({} of {}): a reduction is undefined where the \
             series it is relative to (full recovery, traditional checkpoints) has a mean rework \
             ≤ 0, and any estimate needs two paired trials. They count in no tally above.\n",
            missing.len(),
            findings.len()
        )?;
        for f in missing {
            writeln!(
                w,
                "- `{}` ({}), {}: {}",
                f.panel,
                f.reading,
                f.setting.reading(),
                f.claim
            )?;
        }
    }
    Ok(())
}

/// (claims held, claims measured) among `findings`.
fn tally<'a>(findings: impl Iterator<Item = &'a Finding>) -> (usize, usize) {
    findings.fold((0, 0), |(held, measured), f| match f.holds() {
        Some(h) => (held + usize::from(h), measured + 1),
        None => (held, measured),
    })
}

/// The title, the command, what ran on which data and what the study does.
fn intro(w: &mut String, opts: &ReproduceOptions, entries: &[Entry], seconds: f64) -> Result<()> {
    writeln!(
        w,
        "# SCAR's claims under the knobs the paper leaves unstated\n"
    )?;
    writeln!(w, "Command: `{}`\n", opts.command_line())?;
    let cpu: f64 = entries
        .iter()
        .filter_map(|e| e.results.as_ref().ok().and_then(|r| r.cpu_time_seconds()))
        .sum();
    let trials: Vec<u64> = entries
        .iter()
        .filter_map(|e| e.results.as_ref().ok().and_then(|r| r.trials_per_point()))
        .collect();
    let (tmin, tmax) = (
        trials.iter().min().copied().unwrap_or(0),
        trials.iter().max().copied().unwrap_or(0),
    );
    writeln!(
        w,
        "{} variants, {:.0} CPU-s in all; this run took {:.1} min wall, not counting variants finished by an earlier run it resumed; {} trials per point.\n",
        entries.len(),
        cpu,
        seconds / 60.0,
        if tmin == tmax {
            tmin.to_string()
        } else {
            format!("{tmin}–{tmax}")
        }
    )?;
    let mut data: Vec<String> = entries
        .iter()
        .filter_map(|e| e.results.as_ref().ok().map(|r| r.data().describe()))
        .collect();
    data.sort();
    data.dedup();
    writeln!(w, "Data: {}.\n", data.join("; "))?;
    writeln!(
        w,
        "Each panel of SCAR Figures 6 and 7 ran again under every setting of three knobs the paper \
         does not state: the event order when a failure strikes at a checkpoint iteration \
         (failure first: the checkpoint due then is lost; checkpoint first: it is written), the \
         full-checkpoint interval C (½, 1, 2 and 4 times the panel's own C), and the mean of the \
         geometric failure time (B/4, B/2 and B, with B each trial's unperturbed run length; T \
         is conditioned on T < B as in the panels). A range claim holds when the point estimate \
         lies in the paper's range; an ordering holds when the paired difference is negative. \
         `robustness.csv` has every estimate with its 95% CI.\n"
    )?;
    Ok(())
}

/// Per claim (and per `[[robustness]]` reading): in how many settings it holds.
fn claims_section(w: &mut String, claims: &[ClaimRow], findings: &[Finding]) -> Result<()> {
    writeln!(w, "## Claims\n")?;
    writeln!(
        w,
        "| panel | reading | claim | paper | holds in | and the CI agrees in |\n|---|---|---|---|---|---|"
    )?;
    for c in claims {
        let (panel, claim, test) = (c.panel, &c.claim, c.test);
        let (held, measured) = tally(findings.iter().filter(|f| c.of(f)));
        let strong = findings
            .iter()
            .filter(|f| c.of(f) && f.mark() == Mark::Holds)
            .count();
        let paper = match test {
            Test::Range(lo, hi) => format!("{lo:.0}–{hi:.0}%"),
            Test::Negative => "< 0".to_string(),
        };
        writeln!(
            w,
            "| `{panel}` | {} | {claim} | {paper} | {held} of {measured} | {strong} of {measured} |",
            c.reading
        )?;
    }
    let mut by_reading: Vec<(&'static str, &str, usize, usize)> = Vec::new();
    for c in claims {
        if by_reading
            .iter()
            .any(|r| r.0 == c.panel && r.1 == c.reading)
        {
            continue;
        }
        let (held, measured) = tally(
            findings
                .iter()
                .filter(|f| f.panel == c.panel && f.reading == c.reading),
        );
        by_reading.push((c.panel, &c.reading, held, measured));
    }
    if by_reading.iter().any(|r| r.1 != "as bundled") {
        writeln!(
            w,
            "\nThe model-specific readings (`[[robustness]]` in the panel's scenario), over every setting:\n"
        )?;
        writeln!(w, "| panel | reading | claims held |\n|---|---|---|")?;
        for (panel, reading, held, measured) in &by_reading {
            writeln!(w, "| `{panel}` | {reading} | {held} of {measured} |")?;
        }
    }
    Ok(())
}

/// The settings ranked by the fraction of claims they hold.
fn readings_section(w: &mut String, findings: &[Finding]) -> Result<()> {
    writeln!(w, "\n## Readings\n")?;
    writeln!(
        w,
        "Claims that hold (point estimate) under each reading, over every panel measured in it:\n"
    )?;
    let mut readings: Vec<(Setting, usize, usize)> = Setting::all()
        .into_iter()
        .map(|s| {
            let (held, measured) = tally(findings.iter().filter(|f| f.setting == s));
            (s, held, measured)
        })
        .filter(|r| r.2 > 0)
        .collect();
    readings.sort_by(|a, b| {
        let fa = a.1 as f64 / a.2 as f64;
        let fb = b.1 as f64 / b.2 as f64;
        fb.total_cmp(&fa)
    });
    if readings.iter().any(|r| r.2 != readings[0].2) {
        writeln!(
            w,
            "Readings are ranked by the fraction held; some measure fewer claims than others \
             (a setting a panel's checks refuse, or where a claim has no estimate, is not \
             measured there: see the end).\n"
        )?;
    }
    writeln!(
        w,
        "| reading (event order, C, mean T) | claims held |\n|---|---|"
    )?;
    for (s, held, measured) in &readings {
        writeln!(w, "| {} | {held} of {measured} |", s.reading())?;
    }
    if readings.first().is_some_and(|r| r.1 == 0) {
        writeln!(w, "\nNo reading reproduced any claim.")?;
    } else if let Some((best, held, measured)) = readings.first() {
        let ties: Vec<String> = readings
            .iter()
            .filter(|r| r.1 * measured == held * r.2)
            .map(|r| r.0.reading())
            .collect();
        writeln!(
            w,
            "\nThe reading that reproduces the most claims: {} ({held} of {measured}){}.",
            best.reading(),
            if ties.len() > 1 {
                format!("; tied with {}", ties[1..].join("; "))
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_follow_the_estimate_and_its_ci() {
        let f = |test, value, lo, hi| Finding {
            panel: "p",
            reading: "as bundled".into(),
            interval: 8,
            setting: Setting::all()[0],
            claim: "c".into(),
            test,
            estimate: Some(Estimate {
                value,
                lo,
                hi,
                n: 10,
            }),
        };
        let r = Test::Range(50.0, 80.0);
        assert_eq!(f(r, 60.0, 55.0, 70.0).mark(), Mark::Holds);
        assert_eq!(f(r, 60.0, 40.0, 70.0).mark(), Mark::Leans);
        assert_eq!(f(r, 45.0, 40.0, 52.0).mark(), Mark::Misses);
        assert_eq!(f(r, 30.0, 20.0, 40.0).mark(), Mark::Fails);
        assert_eq!(f(Test::Negative, -1.0, -2.0, -0.5).mark(), Mark::Holds);
        assert_eq!(f(Test::Negative, -1.0, -2.0, 0.5).mark(), Mark::Leans);
        assert_eq!(f(Test::Negative, 1.0, -2.0, 3.0).mark(), Mark::Misses);
        assert_eq!(f(Test::Negative, 1.0, 0.5, 3.0).mark(), Mark::Fails);
        assert_eq!(f(r, 60.0, 55.0, 70.0).holds(), Some(true));
        assert_eq!(f(r, 30.0, 20.0, 40.0).holds(), Some(false));
    }

    /// A claim without an estimate (or with a non-finite one) is listed
    /// under "Not measured" with its panel, reading and setting, beside the
    /// settings a panel refused; measured claims are not.
    #[test]
    fn claims_without_an_estimate_are_listed_as_not_measured() {
        let f = |claim: &str, setting: usize, estimate| Finding {
            panel: "p",
            reading: "as bundled".into(),
            interval: 8,
            setting: Setting::all()[setting],
            claim: claim.into(),
            test: Test::Range(50.0, 80.0),
            estimate,
        };
        let e = |value| {
            Some(Estimate {
                value,
                lo: value - 1.0,
                hi: value + 1.0,
                n: 10,
            })
        };
        let findings = [
            f("measured", 0, e(60.0)),
            f("none", 1, None),
            f("nan", 2, e(f64::NAN)),
        ];
        let mut w = String::new();
        not_measured(&mut w, &[], &findings).unwrap();
        assert!(w.starts_with("## Not measured"), "{w}");
        assert!(w.contains("(2 of 3)"), "{w}");
        for (claim, s) in [("none", 1), ("nan", 2)] {
            let line = format!(
                "- `p` (as bundled), {}: {claim}",
                Setting::all()[s].reading()
            );
            assert!(w.contains(&line), "{line} in {w}");
        }
        assert!(!w.contains(": measured"), "{w}");
        let mut w = String::new();
        not_measured(
            &mut w,
            &[("q", "a setting".into(), "refused".into())],
            &findings[..1],
        )
        .unwrap();
        assert_eq!(w, "## Not measured\n\n- `q`, a setting: refused\n");
        let mut w = String::new();
        not_measured(&mut w, &[], &findings[..1]).unwrap();
        assert!(w.is_empty());
    }
}
