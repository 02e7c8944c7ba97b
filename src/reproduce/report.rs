//! `REPORT.md`: per scenario the data, trials, wall and CPU time; per paper
//! figure the panels and each measured claim beside the paper's.

use super::*;

/// A path relative to the report's folder, with `/` separators, for links.
pub(super) fn link(out_dir: &Path, path: &Path) -> String {
    path.strip_prefix(out_dir)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect::<Vec<_>>()
        .join("/")
}

fn fmt_pct(v: f64) -> String {
    format!("{v:.0}%")
}

pub(super) fn report_text(
    opts: &ReproduceOptions,
    entries: &[Entry],
    ok: &[Results],
    grids: &[(String, String, Vec<usize>)],
    seconds: f64,
) -> Result<String> {
    let mut md = String::new();
    let w = &mut md;
    header(w, opts, entries, seconds)?;
    scenarios(w, opts, entries)?;
    for (key, stem, members) in grids {
        figure(w, opts, ok, key, stem, members)?;
    }
    failures(w, entries)?;
    Ok(md)
}

/// The command, mode, threads, total times and data of the run.
fn header(w: &mut String, opts: &ReproduceOptions, entries: &[Entry], seconds: f64) -> Result<()> {
    writeln!(w, "# scarsim reproduction report\n")?;
    let mode = match (opts.quick, opts.trials()) {
        (true, Some(t)) => format!(
            "quick: {t} trials per point, stand-ins at {} of the real size",
            opts.scale()
        ),
        (false, Some(t)) => format!(
            "full: {t} trials per point, stand-ins at {} of the real size",
            opts.scale()
        ),
        (_, None) => format!(
            "full: each scenario's own trial count, stand-ins at {} of the real size",
            opts.scale()
        ),
    };
    writeln!(w, "- Command: `{}`", opts.command_line())?;
    writeln!(w, "- Mode: {mode}")?;
    writeln!(
        w,
        "- scarsim {}, {} worker threads, {} scenario(s) at a time (each its own pool; a \
         scenario's wall time overlaps others', its CPU time counts its own pool's threads); \
         total wall time {:.1} s, CPU time {:.1} s",
        env!("CARGO_PKG_VERSION"),
        opts.threads,
        opts.at_once.max(1),
        seconds,
        entries
            .iter()
            .filter_map(|e| e.results.as_ref().ok().and_then(|r| r.cpu_time_seconds()))
            .sum::<f64>()
    )?;
    let real = entries
        .iter()
        .filter(|e| e.choice == Some(DataChoice::Real))
        .count();
    let no_data = entries
        .iter()
        .filter(|e| e.choice == Some(DataChoice::NoData))
        .count();
    writeln!(
        w,
        "- Data: {real} of {} scenarios on real data from `{}`; {no_data} need no dataset; the \
         others on synthetic stand-ins ({}). Stand-ins show the mechanisms, not the paper's \
         numbers: compare their measurements with the paper's claims with that in mind.",
        entries.len() - no_data,
        opts.data_dir.display(),
        if opts.synthetic {
            "`--synthetic` was given"
        } else {
            "real data is used wherever its files are present"
        }
    )?;
    writeln!(
        w,
        "- Every number below is read from the results folders next to this file \
         (`summary.csv`, `trials.csv`, `manifest.json`); `scarsim plot <folder>` redraws any figure.\n"
    )?;

    Ok(())
}

/// One row per scenario: panel, data, trials, wall and CPU time, units
/// taken from other scenarios, figure.
fn scenarios(w: &mut String, opts: &ReproduceOptions, entries: &[Entry]) -> Result<()> {
    writeln!(w, "## Scenarios\n")?;
    let shared: u64 = entries
        .iter()
        .filter_map(|e| e.results.as_ref().ok())
        .filter_map(Results::units_from_other_scenarios)
        .sum();
    if opts.share_across {
        writeln!(
            w,
            "Units shared from other scenarios: {shared} recovery trials had exactly the inputs \
             of a trial another scenario of this run had computed (same model, data, seed, \
             convergence test, failure, checkpoint and lost blocks; or, for a trial that restores \
             every block from one checkpoint, the same model up to its blocks, data, seed, \
             convergence test, failure and checkpoint iteration) and took its outcome instead \
             of running; the CSV files are the same as with `--no-share-across`, which runs them \
             all. A scenario's CPU time does not include the trials it took.\n"
        )?;
    } else {
        writeln!(
            w,
            "Every scenario computed all its units (`--no-share-across`).\n"
        )?;
    }
    writeln!(
        w,
        "| scenario | paper panel | data | trials per point | wall time | CPU time | units shared from other scenarios | figure |"
    )?;
    writeln!(w, "|---|---|---|---|---|---|---|---|")?;
    for e in entries {
        let paper = e.paper.as_deref().unwrap_or("–");
        match &e.results {
            Ok(r) => {
                let fig = r.dir.join(format!("{}.png", figures::FIGURE_STEM));
                writeln!(
                    w,
                    "| `{}` | {} | {} | {} | {:.1} s | {} | {} | [png]({}) · [svg]({}) |",
                    e.name,
                    paper,
                    r.data().describe(),
                    r.trials_per_point()
                        .map_or_else(|| "?".to_string(), |n| n.to_string()),
                    r.wall_time_seconds().unwrap_or(f64::NAN),
                    r.cpu_time_seconds()
                        .map_or_else(|| "–".to_string(), |s| format!("{s:.1} s")),
                    r.units_from_other_scenarios()
                        .map_or_else(|| "–".to_string(), |n| n.to_string()),
                    link(&opts.out_dir, &fig),
                    link(&opts.out_dir, &fig.with_extension("svg")),
                )?;
            }
            Err(msg) => {
                writeln!(
                    w,
                    "| `{}` | {} | – | – | – | – | – | **failed**: {} |",
                    e.name,
                    paper,
                    msg.replace('|', "\\|").replace('\n', " ")
                )?;
            }
        }
    }
    writeln!(w)?;

    Ok(())
}

/// One paper figure: its grid, the panels produced and absent, each panel's
/// findings, and the claims measured beside the paper's.
fn figure(
    w: &mut String,
    opts: &ReproduceOptions,
    ok: &[Results],
    key: &str,
    stem: &str,
    members: &[usize],
) -> Result<()> {
    let known = paper::known(key);
    let title = known.map_or(key, |f| f.title);
    writeln!(w, "## {title}\n")?;
    writeln!(w, "![{title}]({stem}.png)\n")?;
    writeln!(
        w,
        "Multi-panel figure: [{stem}.png]({stem}.png) · [{stem}.svg]({stem}.svg).\n"
    )?;
    let mut produced = Vec::new();
    for &i in members {
        let r = &ok[i];
        let letter = panel_of(r);
        let caption = letter
            .and_then(|l| paper::panel_caption(key, l))
            .map_or_else(|| r.title(), str::to_string);
        let fig = r.dir.join(format!("{}.png", figures::FIGURE_STEM));
        produced.push(format!(
            "{}[{caption}]({}) ({}, {} trials per point)",
            letter.map_or_else(String::new, |l| format!("({l}) ")),
            link(&opts.out_dir, &fig),
            r.data().short(),
            r.trials_per_point()
                .map_or_else(|| "?".to_string(), |n| n.to_string())
        ));
    }
    writeln!(w, "Panels produced: {}.\n", produced.join("; "))?;
    if let Some(f) = known {
        let have: Vec<char> = members.iter().filter_map(|&i| panel_of(&ok[i])).collect();
        let absent: Vec<String> = f
            .panels
            .iter()
            .filter(|(l, _)| !have.contains(l))
            .map(|(l, c)| format!("({l}) {c}"))
            .collect();
        if !absent.is_empty() {
            writeln!(
                w,
                "Panels not produced (no bundled scenario for them in this build): {}.\n",
                absent.join(", ")
            )?;
        }
        if let Some(claim) = f.claim {
            writeln!(w, "The paper: \"{claim}\"\n")?;
        }
    }
    for &i in members {
        let r = &ok[i];
        match figures::layout_for(r).findings(r) {
            Ok(found) => {
                for f in &found {
                    writeln!(w, "- {f}")?;
                }
                if !found.is_empty() {
                    writeln!(w)?;
                }
            }
            Err(e) => writeln!(w, "- `{}`: findings not computed: {e:#}\n", r.name())?,
        }
    }
    claims(w, ok, key, members)
}

/// The claims the figure's panels measure, beside the paper's ranges.
fn claims(w: &mut String, ok: &[Results], key: &str, members: &[usize]) -> Result<()> {
    let mut claims: Vec<(&Results, Claim)> = Vec::new();
    for &i in members {
        let r = &ok[i];
        match figures::layout_for(r).claims(r) {
            Ok(cs) => claims.extend(cs.into_iter().map(|c| (r, c))),
            Err(e) => writeln!(w, "- `{}`: claims not computed: {e:#}", r.name())?,
        }
    }
    if !claims.is_empty() {
        writeln!(
            w,
            "| panel | data | measured | measured value (95% CI) | paper | vs paper | from (mean rework [95% CI]) |"
        )?;
        writeln!(w, "|---|---|---|---|---|---|---|")?;
        for (r, c) in &claims {
            let panel = panel_of(r).map_or_else(
                || r.name(),
                |l| {
                    paper::panel_caption(key, l)
                        .map_or_else(|| format!("({l})"), |cap| format!("({l}) {cap}"))
                },
            );
            let measured = match c.measured {
                Some(e) => format!(
                    "{} [{}, {}] (n = {})",
                    fmt_pct(e.value),
                    fmt_pct(e.lo),
                    fmt_pct(e.hi),
                    e.n
                ),
                None => "undefined (no rework to reduce)".to_string(),
            };
            writeln!(
                w,
                "| {panel} | {} | {} | {measured} | {}–{} | {} | {} |",
                r.data().short(),
                c.quantity,
                fmt_pct(c.paper_range.0),
                fmt_pct(c.paper_range.1),
                c.verdict().word(),
                c.detail
            )?;
        }
        writeln!(
            w,
            "\nReduction = 1 − mean(new)/mean(old) over the trials of the two series, paired by \
             trial index (both saw the same failure); the 95% CI is the ratio estimator's \
             delta-method interval. \"vs paper\" compares the point estimate with the paper's range.\n"
        )?;
    }
    Ok(())
}

/// The paper panel letter of a result, if its `paper` names one.
fn panel_of(r: &Results) -> Option<char> {
    r.paper()
        .and_then(|p| paper::parse_panel(&p))
        .and_then(|p| p.panel)
}

/// The scenarios that failed, with their errors.
fn failures(w: &mut String, entries: &[Entry]) -> Result<()> {
    let failed: Vec<(&str, String)> = entries
        .iter()
        .filter_map(|e| e.error().map(|m| (e.name.as_str(), m)))
        .collect();
    if !failed.is_empty() {
        writeln!(w, "## Failed scenarios\n")?;
        for (name, error) in failed {
            writeln!(w, "- `{name}`: {error}")?;
        }
        writeln!(w)?;
    }
    Ok(())
}
