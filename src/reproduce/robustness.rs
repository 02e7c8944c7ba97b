//! `scarsim reproduce --robustness`: does each SCAR claim hold whatever the
//! reading of the knobs the paper leaves unstated?
//!
//! Every selected panel of SCAR Figures 6 and 7 (a `recovery` scenario that
//! sweeps `lost_fraction` or `checkpoint_fraction`) runs again under each
//! [`Setting`]: the event order at an iteration that is both a failure and a
//! checkpoint, the full-checkpoint interval C (½, 1, 2 and 4 times the
//! panel's own, so {4, 8, 16, 32} for the C = 8 panels) and the mean of the
//! geometric failure time (B/4, B/2 and B, where B is the trial's own
//! unperturbed run length: [`FailureTime::GeometricOfRun`]). That is 24
//! settings per panel. A variant is an ordinary scenario (its text is the
//! panel's with those three fields replaced, and every series takes them),
//! so it runs, resumes, shards and merges like any other; a setting the
//! scenario checks refuse (a 1/8 checkpoint every C/8 = ½ iteration) is
//! reported as not applicable with the checks' reason.
//!
//! Each variant's claims are the report's own ([`Layout::claims`]: the
//! partial-recovery reductions at 1/4, 1/2 and 3/4 lost, priority 1/8
//! against traditional checkpoints), plus §5.4's ordering priority < round <
//! random at r = 1/8 as paired differences ([`selector_ordering`]). The
//! study writes `robustness.csv` (one row per panel × claim × setting), the
//! claim × setting map `robustness.svg`/`.png` and a `REPORT.md` that says in
//! how many settings each claim holds and which reading holds the most.
//!
//! Choices where the issue is silent: a range claim *holds* when its point
//! estimate is inside the paper's range (the main report's verdict); an
//! ordering holds when the paired difference is negative. The map shades
//! each by whether the 95% CI agrees. C is scaled by the panel's own
//! interval rather than fixed at {4, 8, 16, 32} so the CNN panels (C = 160
//! on a ~1,300-iteration run) are swept around their own C.
//!
//! [`FailureTime::GeometricOfRun`]: crate::policy::FailureTime
//! [`Layout::claims`]: crate::report::figures::Layout
//! [`selector_ordering`]: crate::report::figures::recovery::selector_ordering

use serde::Serialize;

use super::report::link;
use super::*;
use crate::policy::EventOrder;
use crate::report::figures::chart::{Map, Mark};
use crate::report::figures::claims::Estimate;
use crate::report::figures::recovery::selector_ordering;
use crate::report::fmt_f64;
use crate::scenario::SweepAxis;
use crate::scenario::recovery::Alternative;

/// The event orders the study tries.
const ORDERS: [EventOrder; 2] = [EventOrder::FailureFirst, EventOrder::CheckpointFirst];
/// C as multiples of the panel's own interval.
const INTERVAL_FACTORS: [(f64, &str); 4] = [(0.5, "C/2"), (1.0, "C"), (2.0, "2C"), (4.0, "4C")];
/// The failure time's mean as fractions of the unperturbed run's length B.
const MEANS: [(f64, &str); 3] = [(0.25, "B/4"), (0.5, "B/2"), (1.0, "B")];

/// One reading of the knobs SCAR leaves unstated.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Setting {
    /// Failure or checkpoint first at an iteration that is both.
    order: EventOrder,
    /// Index into [`INTERVAL_FACTORS`].
    interval: usize,
    /// Index into [`MEANS`].
    mean: usize,
}

impl Setting {
    /// Every setting, event order first, then C, then the mean.
    fn all() -> Vec<Setting> {
        let mut out = Vec::new();
        for order in ORDERS {
            for interval in 0..INTERVAL_FACTORS.len() {
                for mean in 0..MEANS.len() {
                    out.push(Setting {
                        order,
                        interval,
                        mean,
                    });
                }
            }
        }
        out
    }

    fn order_name(self) -> &'static str {
        match self.order {
            EventOrder::FailureFirst => "failure-first",
            EventOrder::CheckpointFirst => "checkpoint-first",
        }
    }

    /// C for a panel whose own interval is `base`.
    fn interval_for(self, base: usize) -> usize {
        ((INTERVAL_FACTORS[self.interval].0 * base as f64).round() as usize).max(1)
    }

    /// The suffix of the variant's name: `ff.c8.b0.5`.
    fn tag(self, base: usize) -> String {
        let order = match self.order {
            EventOrder::FailureFirst => "ff",
            EventOrder::CheckpointFirst => "cf",
        };
        format!(
            "{order}.c{}.b{}",
            self.interval_for(base),
            fmt_f64(MEANS[self.mean].0)
        )
    }

    /// "failure first, C = 8, mean T = B/2".
    fn describe(self, base: usize) -> String {
        format!(
            "{}, C = {}, mean T = {}",
            self.order_name().replace('-', " "),
            self.interval_for(base),
            MEANS[self.mean].1
        )
    }

    /// The short form used across panels: "failure first, C, B/2".
    fn reading(self) -> String {
        format!(
            "{}, {}, {}",
            self.order_name().replace('-', " "),
            INTERVAL_FACTORS[self.interval].1,
            MEANS[self.mean].1
        )
    }
}

/// One panel of the study: a bundled scenario and its variants.
struct Panel {
    /// The bundled scenario.
    base: &'static str,
    /// Its own full-checkpoint interval C.
    interval: usize,
    /// The labels of its `[[robustness]]` readings (reading `i + 1`).
    readings: Vec<String>,
    /// Per reading (0: as bundled) and setting, the variant's job, or why
    /// the setting does not apply.
    variants: Vec<(usize, Setting, Result<Job, String>)>,
}

impl Panel {
    /// Reading `r`'s label.
    fn reading(&self, r: usize) -> &str {
        match r {
            0 => "as bundled",
            r => &self.readings[r - 1],
        }
    }
}

/// The study: its panels and their variants.
pub(crate) struct Study {
    panels: Vec<Panel>,
    /// Selected scenarios that are not Figure 6/7 panels (not studied).
    pub(crate) skipped: Vec<&'static str>,
}

/// Bundled scenario `sc` if it is a panel the study covers.
fn eligible(sc: &Scenario) -> Option<&crate::scenario::RecoveryScenario> {
    let Scenario::Recovery(r) = sc else {
        return None;
    };
    let axis = r.sweep.as_ref()?.axis;
    let covered = matches!(
        axis,
        SweepAxis::LostFraction | SweepAxis::CheckpointFraction
    );
    (covered && !r.series.is_empty()).then_some(r)
}

/// `base_text` with reading `alternative` applied and the setting's knobs
/// replaced (for every series).
fn variant_text(
    base_text: &str,
    name: &str,
    alternative: Option<&Alternative>,
    setting: Setting,
    interval: usize,
) -> Result<String> {
    use toml::Value;
    let mut t: toml::Table = toml::from_str(base_text).context("the bundled text")?;
    t.remove("robustness");
    if let Some(a) = alternative {
        a.apply(&mut t)
            .map_err(|e| anyhow::anyhow!("reading `{}`: {e}", a.label))?;
    }
    t.insert("name".into(), Value::String(name.to_string()));
    if let Some(Value::String(title)) = t.get_mut("title") {
        let reading = alternative.map_or(String::new(), |a| format!("{}; ", a.label));
        title.push_str(&format!(
            " [robustness: {reading}{}]",
            setting.describe(interval)
        ));
    }
    let table = |t: &mut toml::Table, key: &str| -> Result<toml::Table> {
        match t.remove(key) {
            Some(Value::Table(x)) => Ok(x),
            None => Ok(toml::Table::new()),
            Some(_) => bail!("`{key}` is not a table"),
        }
    };
    let mut checkpoint = table(&mut t, "checkpoint")?;
    checkpoint.insert(
        "interval".into(),
        Value::Integer(setting.interval_for(interval) as i64),
    );
    checkpoint.insert(
        "event_order".into(),
        Value::String(setting.order_name().to_string()),
    );
    t.insert("checkpoint".into(), Value::Table(checkpoint));
    let mut failure = table(&mut t, "failure")?;
    let mut iteration = toml::Table::new();
    iteration.insert("distribution".into(), Value::String("geometric".into()));
    iteration.insert("mean_of_run".into(), Value::Float(MEANS[setting.mean].0));
    failure.insert("iteration".into(), Value::Table(iteration));
    t.insert("failure".into(), Value::Table(failure));
    if let Some(Value::Array(series)) = t.get_mut("series") {
        for s in series {
            if let Value::Table(s) = s {
                s.remove("event_order");
                s.remove("checkpoint_interval");
            }
        }
    }
    toml::to_string(&t).context("writing the variant's TOML")
}

impl Study {
    /// The study of the selected bundled scenarios: those that are panels of
    /// SCAR Figures 6 and 7. An error when none is.
    pub(crate) fn of(names: &[&'static str]) -> Result<Study> {
        let mut panels = Vec::new();
        let mut skipped = Vec::new();
        for &base in names {
            let (sc, _, text) = scenario::load(base)?;
            let Some(r) = eligible(&sc) else {
                skipped.push(base);
                continue;
            };
            let interval = r.series[0].config.checkpoint.interval;
            let alternatives: Vec<Option<&Alternative>> = std::iter::once(None)
                .chain(r.alternatives.iter().map(Some))
                .collect();
            let mut variants = Vec::new();
            for (reading, alternative) in alternatives.iter().enumerate() {
                for setting in Setting::all() {
                    let name = match reading {
                        0 => format!("{base}.{}", setting.tag(interval)),
                        i => format!("{base}.r{i}.{}", setting.tag(interval)),
                    };
                    let origin = format!(
                        "bundled:{base} (robustness: {}{})",
                        alternative.map_or(String::new(), |a| format!("{}; ", a.label)),
                        setting.describe(interval)
                    );
                    let prefix = format!("{origin}: ");
                    let job = variant_text(&text, &name, *alternative, setting, interval)
                        .and_then(|text| {
                            scenario::parse(&text, &origin)?;
                            Ok(Job { name, origin, text })
                        })
                        .map_err(|e| format!("{e:#}").replace(&prefix, ""));
                    variants.push((reading, setting, job));
                }
            }
            panels.push(Panel {
                base,
                interval,
                readings: r.alternatives.iter().map(|a| a.label.clone()).collect(),
                variants,
            });
        }
        if panels.is_empty() {
            bail!(
                "--robustness: none of the selected scenarios is a panel of SCAR Figure 6 or 7 \
                 (a recovery scenario sweeping lost_fraction or checkpoint_fraction); \
                 e.g. --only scar-partial-mlr-mnist"
            );
        }
        Ok(Study { panels, skipped })
    }

    /// The variants to run, panel by panel, in setting order.
    pub(crate) fn jobs(&self) -> Vec<Job> {
        self.panels
            .iter()
            .flat_map(|p| {
                p.variants
                    .iter()
                    .filter_map(|(_, _, j)| j.as_ref().ok().cloned())
            })
            .collect()
    }

    /// Evaluates every claim of every variant in `entries` (in [`Self::jobs`]'
    /// order) and writes `robustness.csv`, the map and `REPORT.md`.
    pub(crate) fn report(
        &self,
        opts: &ReproduceOptions,
        entries: &[Entry],
        figure_files: Vec<Vec<PathBuf>>,
        started: Instant,
        log: &(dyn Fn(&str) + Sync),
    ) -> Result<Reproduction> {
        let mut findings = Vec::new();
        let mut problems = Vec::new();
        let mut next = entries.iter();
        for panel in &self.panels {
            for (reading, setting, job) in &panel.variants {
                let outcome = match job {
                    Err(why) => Err(format!("not applicable: {why}")),
                    Ok(job) => {
                        let entry = next.next().context("an entry per variant")?;
                        debug_assert_eq!(entry.name, job.name);
                        match &entry.results {
                            Ok(r) => {
                                claims_of(r).map_err(|e| format!("claims not computed: {e:#}"))
                            }
                            Err(e) => Err(format!("failed: {e}")),
                        }
                    }
                };
                match outcome {
                    Ok(cs) => {
                        findings.extend(cs.into_iter().map(|(claim, test, estimate)| Finding {
                            panel: panel.base,
                            reading: panel.reading(*reading).to_string(),
                            interval: panel.interval,
                            setting: *setting,
                            claim,
                            test,
                            estimate,
                        }))
                    }
                    Err(why) => problems.push((
                        panel.base,
                        format!(
                            "{}, {}",
                            panel.reading(*reading),
                            setting.describe(panel.interval)
                        ),
                        why,
                    )),
                }
            }
        }
        let claims = distinct_claims(&findings);
        let mut files: Vec<PathBuf> = figure_files.into_iter().flatten().collect();
        crate::report::outdir::ensure_root(
            &opts.out_dir,
            &mut crate::report::outdir::Created::new(),
        )?;
        let csv = crate::report::outdir::file(&opts.out_dir, "robustness.csv")?;
        crate::report::outdir::write_file(&csv, &rows_csv(&findings)?)?;
        let map = map_of(&claims, &findings);
        let pictures = figures::write_picture(&opts.out_dir, "robustness", Picture::Map(&map))
            .context("drawing the claim × setting map")?;
        log(&format!("robustness map: {}", pictures[1].display()));
        files.extend(pictures.iter().cloned());
        let seconds = started.elapsed().as_secs_f64();
        let text = report_text(
            opts, entries, &claims, &findings, &problems, &pictures, seconds,
        )?;
        let report = crate::report::outdir::file(&opts.out_dir, REPORT_FILE)?;
        crate::report::outdir::write_file(&report, text.as_bytes())?;
        Ok(Reproduction {
            report: Some(report),
            shards: Vec::new(),
            figures: files,
            failed: entries
                .iter()
                .filter_map(|e| e.error().map(|m| (e.name.clone(), m)))
                .collect(),
            wall_time_seconds: seconds,
        })
    }
}

/// What a claim asserts about its estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Test {
    /// The estimate (a reduction in %) lies in the paper's range.
    Range(f64, f64),
    /// The estimate (a paired difference) is negative.
    Negative,
}

/// One claim measured in one setting.
struct Finding {
    panel: &'static str,
    /// The `[[robustness]]` reading's label, or "as bundled".
    reading: String,
    /// The panel's own C.
    interval: usize,
    setting: Setting,
    claim: String,
    test: Test,
    estimate: Option<Estimate>,
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
fn claims_of(r: &Results) -> Result<Vec<(String, Test, Option<Estimate>)>> {
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
struct ClaimRow {
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
fn distinct_claims(findings: &[Finding]) -> Vec<ClaimRow> {
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
fn rows_csv(findings: &[Finding]) -> Result<Vec<u8>> {
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
fn map_of(claims: &[ClaimRow], findings: &[Finding]) -> Map {
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

/// The study's `REPORT.md`.
#[allow(clippy::too_many_arguments)]
fn report_text(
    opts: &ReproduceOptions,
    entries: &[Entry],
    claims: &[ClaimRow],
    findings: &[Finding],
    problems: &[(&'static str, String, String)],
    pictures: &[PathBuf],
    seconds: f64,
) -> Result<String> {
    let mut w = String::new();
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
        "{} variants ran in {:.1} min wall, {:.0} CPU-s; {} trials per point.\n",
        entries.len(),
        seconds / 60.0,
        cpu,
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
    writeln!(w, "## Claims\n")?;
    writeln!(
        w,
        "| panel | reading | claim | paper | holds in | and the CI agrees in |\n|---|---|---|---|---|---|"
    )?;
    for c in claims {
        let (panel, claim, test) = (c.panel, &c.claim, c.test);
        let of: Vec<&Finding> = findings.iter().filter(|f| c.of(f)).collect();
        let measured = of.iter().filter(|f| f.holds().is_some()).count();
        let held = of.iter().filter(|f| f.holds() == Some(true)).count();
        let strong = of.iter().filter(|f| f.mark() == Mark::Holds).count();
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
        let of: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.panel == c.panel && f.reading == c.reading)
            .collect();
        by_reading.push((
            c.panel,
            &c.reading,
            of.iter().filter(|f| f.holds() == Some(true)).count(),
            of.iter().filter(|f| f.holds().is_some()).count(),
        ));
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
    writeln!(w, "\n## Readings\n")?;
    writeln!(
        w,
        "Claims that hold (point estimate) under each reading, over every panel measured in it:\n"
    )?;
    let mut readings: Vec<(Setting, usize, usize)> = Setting::all()
        .into_iter()
        .map(|s| {
            let of: Vec<&Finding> = findings.iter().filter(|f| f.setting == s).collect();
            (
                s,
                of.iter().filter(|f| f.holds() == Some(true)).count(),
                of.iter().filter(|f| f.holds().is_some()).count(),
            )
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
             (a setting a panel's checks refuse is not measured there, see the end).\n"
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
    writeln!(w, "\n## Map\n")?;
    if let Some(png) = pictures.get(1) {
        writeln!(w, "![claims × settings]({})\n", link(&opts.out_dir, png))?;
    }
    if !problems.is_empty() {
        writeln!(w, "## Not measured\n")?;
        for (panel, setting, why) in problems {
            writeln!(w, "- `{panel}`, {setting}: {why}")?;
        }
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_of_a_partial_panel_validates_and_takes_its_setting() {
        let study = Study::of(&["scar-partial-mlr-mnist"]).unwrap();
        assert_eq!(study.panels.len(), 1);
        assert_eq!(study.panels[0].variants.len(), 24);
        for (_, setting, job) in &study.panels[0].variants {
            let job = job.as_ref().unwrap();
            let Scenario::Recovery(r) = scenario::parse(&job.text, &job.origin).unwrap() else {
                panic!("a recovery scenario")
            };
            assert_eq!(r.meta.name, job.name);
            for s in &r.series {
                assert_eq!(s.config.order, setting.order);
                assert_eq!(s.config.checkpoint.interval, setting.interval_for(8));
                assert_eq!(
                    s.config.failure_time,
                    crate::policy::FailureTime::GeometricOfRun {
                        mean_of_run: MEANS[setting.mean].0
                    }
                );
            }
        }
    }

    #[test]
    fn a_panel_with_readings_runs_every_setting_under_each() {
        let study = Study::of(&["scar-partial-mf-movielens"]).unwrap();
        let panel = &study.panels[0];
        assert_eq!(panel.readings, ["λ = 1"]);
        assert_eq!(panel.variants.len(), 48);
        for (reading, _, job) in &panel.variants {
            let job = job.as_ref().unwrap();
            assert_eq!(job.name.contains(".r1."), *reading == 1, "{}", job.name);
            let Scenario::Recovery(r) = scenario::parse(&job.text, &job.origin).unwrap() else {
                panic!("a recovery scenario")
            };
            assert!(
                r.alternatives.is_empty(),
                "a variant lists no readings of its own"
            );
            let criterion = r.convergence.criterion;
            assert_eq!(criterion == 13135.0, *reading == 1, "{criterion}");
        }
    }

    #[test]
    fn a_setting_the_checks_refuse_is_not_applicable() {
        // C/2 = 4 with 1/8 checkpoints would checkpoint every half iteration.
        let study = Study::of(&["scar-priority-mlr-mnist"]).unwrap();
        let refused: Vec<_> = study.panels[0]
            .variants
            .iter()
            .filter(|(_, _, j)| j.is_err())
            .collect();
        assert_eq!(refused.len(), 6);
        assert!(refused.iter().all(|(_, s, _)| s.interval == 0));
        assert_eq!(study.jobs().len(), 18);
    }

    #[test]
    fn scenarios_without_claims_are_refused() {
        let e = Study::of(&["dutta-runtime-exp"]).err().unwrap();
        assert!(format!("{e:#}").contains("Figure 6 or 7"), "{e:#}");
    }

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
}
