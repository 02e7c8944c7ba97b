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

use super::*;
use crate::policy::EventOrder;
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
    #[cfg(test)]
    pub(crate) fn of(names: &[&'static str]) -> Result<Study> {
        Study::of_readings(names, &[])
    }

    /// [`Study::of`] under only the readings `readings` (`--reading`; 0: the
    /// panel as bundled, `i`: its `i`-th `[[robustness]]` table; every
    /// reading when empty). A panel without reading `i` runs none of its
    /// variants under it; an error when no selected panel has it, or when
    /// a reading is given twice.
    pub(crate) fn of_readings(names: &[&'static str], readings: &[usize]) -> Result<Study> {
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
                if !readings.is_empty() && !readings.contains(&reading) {
                    continue;
                }
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
        if let Some(r) = super::first_repeat(readings) {
            bail!("--reading {r} is given twice");
        }
        for &r in readings {
            if !panels.iter().any(|p| r <= p.readings.len()) {
                let most = panels.iter().map(|p| p.readings.len()).max().unwrap_or(0);
                bail!(
                    "--reading {r}: no selected panel has that reading (0 is each panel as \
                     bundled, 1..={most} its `[[robustness]]` tables in order, as in the \
                     panel's scenario file)"
                );
            }
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
            failed: failures(entries),
            wall_time_seconds: seconds,
        })
    }
}

mod report;

use report::{Finding, claims_of, distinct_claims, map_of, report_text, rows_csv};

#[cfg(test)]
mod tests;
