//! Figures and reproduction end to end: `run` draws each scenario's figure,
//! `plot` redraws results folders and assembles grids, `reproduce` runs every
//! bundled scenario and writes REPORT.md. Every figure file is checked: the
//! SVG parses as XML and carries the title, the PNG decodes at the expected
//! size with ink on the page and text in the title band.

use crate::common;

use std::path::Path;

use common::{QUICK_REPRODUCE, scarsim, small_recovery, stderr, tmpdir};

/// Pixel size of a single-scenario figure (render::SINGLE_SIZE).
const SINGLE: (u32, u32) = (1000, 680);
/// A 2×2 grid: panels of 620×470 under an 86-pixel title.
const GRID_2X2: (u32, u32) = (2 * 620, 86 + 2 * 470);
/// `reproduce` at CI size (2 trials, stand-ins at 2%) into `rep/`.
const QUICK: [&str; 8] = [
    "reproduce",
    "--quick",
    "--trials",
    "2",
    "--scale",
    "0.02",
    "--out",
    "rep",
];

/// Decodes a PNG into (width, height, RGB bytes).
fn decode_png(path: &Path) -> (u32, u32, Vec<u8>) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap_or_else(|e| panic!("{} is not a PNG: {e}", path.display()));
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb, "{}", path.display());
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// Checks a PNG figure: expected size, mostly white page with a fair amount
/// of non-white (axes, lines, text), and dark text pixels in the title band.
fn check_png(path: &Path, size: (u32, u32)) {
    let (w, h, rgb) = decode_png(path);
    assert_eq!((w, h), size, "{}", path.display());
    let px = |x: u32, y: u32| {
        let i = ((y * w + x) * 3) as usize;
        (rgb[i], rgb[i + 1], rgb[i + 2])
    };
    let total = (w * h) as usize;
    let non_white = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .filter(|&(x, y)| px(x, y) != (255, 255, 255))
        .count();
    assert!(
        non_white > total / 100 && non_white < total * 85 / 100,
        "{}: {non_white} of {total} pixels drawn",
        path.display()
    );
    // The title is centred in the top 40 rows: dark glyph pixels there.
    let title_ink = (8..40)
        .flat_map(|y| (w / 4..3 * w / 4).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let (r, g, b) = px(x, y);
            r < 90 && g < 90 && b < 90
        })
        .count();
    assert!(
        title_ink > 200,
        "{}: only {title_ink} dark pixels in the title band",
        path.display()
    );
}

/// Checks an SVG figure: well-formed XML, an <svg> root, and `texts` present
/// among its text elements.
fn check_svg(path: &Path, texts: &[&str]) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not well-formed XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let all: String = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "text")
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("\n");
    for t in texts {
        assert!(
            all.contains(t),
            "{}: no text {t:?} in {all:?}",
            path.display()
        );
    }
}

fn run_small(dir: &Path, name: &str, extra: &[&str]) {
    std::fs::write(dir.join(format!("{name}.toml")), small_recovery(name, 3)).unwrap();
    let file = format!("{name}.toml");
    let mut args = vec![
        "run",
        &file,
        "--synthetic",
        "--scale",
        "0.02",
        "--out",
        "out",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let o = scarsim(dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn run_draws_the_figure_next_to_the_csv() {
    let dir = tmpdir("fig-run");
    run_small(&dir, "small", &[]);
    let res = dir.join("out/small");
    check_png(&res.join("figure.png"), SINGLE);
    check_svg(
        &res.join("figure.svg"),
        &[
            "small test scenario",
            "Fraction of failed parameters",
            "Rework iterations",
            "full",
            "partial",
            "3 trials per point",
            "synthetic stand-in for MNIST (scale 0.02)",
        ],
    );
    let leftovers: Vec<_> = std::fs::read_dir(&res)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn no_plot_then_plot_and_grid() {
    let dir = tmpdir("fig-plot");
    run_small(&dir, "one", &["--no-plot"]);
    run_small(&dir, "two", &["--no-plot"]);
    assert!(
        !dir.join("out/one/figure.png").exists(),
        "--no-plot draws nothing"
    );
    // `plot` on the parent folder draws every results folder in it, and the grid.
    let o = scarsim(&dir, &["plot", "out", "--grid", "both"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for name in ["one", "two"] {
        check_png(&dir.join(format!("out/{name}/figure.png")), SINGLE);
        check_svg(
            &dir.join(format!("out/{name}/figure.svg")),
            &["Rework iterations"],
        );
    }
    // Two scenarios of no paper figure: one row of two 620×470 panels under an 86-pixel title.
    check_png(&dir.join("out/both.png"), (1240, 86 + 470));
    check_svg(
        &dir.join("out/both.svg"),
        &["2 scenarios", "small test scenario"],
    );
    // Redrawing gives the same bytes (figures are deterministic).
    let before = std::fs::read(dir.join("out/one/figure.png")).unwrap();
    let o = scarsim(&dir, &["plot", "out/one"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        before,
        std::fs::read(dir.join("out/one/figure.png")).unwrap()
    );
}

#[test]
fn plot_rejects_what_is_not_a_results_folder() {
    let dir = tmpdir("fig-bad");
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let o = scarsim(&dir, &["plot", "empty"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("empty") && e.contains("not a finished scarsim results folder"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
    // A summary without the columns a figure needs.
    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let summary = "a,b\n1,2\n";
    std::fs::write(bad.join("summary.csv"), summary).unwrap();
    let manifest = serde_json::json!({
        "files": ["summary.csv"],
        "checksums": { "summary.csv": scarsim::report::manifest::fnv64(summary.as_bytes()) },
    });
    std::fs::write(bad.join("manifest.json"), manifest.to_string()).unwrap();
    let o = scarsim(&dir, &["plot", "bad"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("summary.csv") && e.contains("`x`"), "{e}");
    assert!(!bad.join("figure.png").exists(), "no figure from bad input");
}

#[test]
fn reproduce_quick_runs_every_bundled_scenario_and_reports() {
    let dir = tmpdir("fig-reproduce");
    let o = scarsim(&dir, &[&QUICK[..], &["--quiet"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let rep = dir.join("rep");
    let report = std::fs::read_to_string(rep.join("REPORT.md")).unwrap();
    let names: Vec<&str> = scarsim::scenario::bundled::names().collect();
    assert!(!names.is_empty());
    for name in &names {
        assert!(
            report.contains(&format!("`{name}`")),
            "REPORT.md does not list {name}"
        );
        let (sc, _, _) = scarsim::scenario::load(name).unwrap();
        let text = scarsim::scenario::bundled::find(name).unwrap();
        // What each kind's figure must show: its paper axes, and its size
        // (protocol scenarios draw a 2×2 grid of panels).
        let mut size = SINGLE;
        use scarsim::report::figures::faults as ff;
        let expect: Vec<&str> = match sc.meta().kind.as_str() {
            "recovery" => vec!["Rework iterations"],
            // SCAR Figures 3-5: cost against ‖δ‖ (one perturbation at ℓ) or
            // Δ_T (perturbations at random iterations), the bound in red.
            "perturbation" => {
                let x = match &sc {
                    scarsim::scenario::Scenario::Perturbation(p)
                        if p.series.iter().all(|s| {
                            matches!(
                                s.schedule,
                                scarsim::scenario::perturbation::Schedule::Once { .. }
                                    | scarsim::scenario::perturbation::Schedule::AtRunFraction { .. }
                            )
                        }) =>
                    {
                        "Perturbation size ‖δ‖"
                    }
                    _ => "Δ_T = Σ_ℓ c^−ℓ·‖δ_ℓ‖",
                };
                vec![name, "Iteration cost (iterations)", "Theorem 1 bound", x]
            }
            "precision" => vec![
                name,
                "Mantissa bits p",
                "log10 of the error floor",
                "predicted c/(1−c)·Δ",
            ],
            "protocol" if text.contains("[training]") => {
                size = GRID_2X2;
                vec!["Wall-clock time", "k-async", "adaptive"]
            }
            "protocol" => {
                size = GRID_2X2;
                vec!["Wall-clock time per iteration", "k-sync (closed form)"]
            }
            "faults" if text.contains("[wallclock]") => {
                vec![name, ff::WALLCLOCK_X, ff::WALLCLOCK_Y_ACCURACY, "PS killed"]
            }
            "faults" if text.contains("[iterations]") => {
                vec![name, ff::WALLCLOCK_X, ff::ITERATIONS_Y]
            }
            "faults" if text.contains("[interval]") => vec![name, ff::INTERVAL_X, ff::INTERVAL_Y],
            _ => vec![name],
        };
        check_png(&rep.join(name).join("figure.png"), size);
        check_svg(&rep.join(name).join("figure.svg"), &expect);
    }
    // No data folder here: every scenario ran on a stand-in, and says so.
    let need_data = names
        .iter()
        .filter(|n| {
            let (sc, _, _) = scarsim::scenario::load(n).unwrap();
            !scarsim::reproduce::datasets_of(&sc).is_empty()
        })
        .count();
    assert!(need_data >= 8 && need_data < names.len());
    assert!(report.contains(&format!(
        "0 of {need_data} scenarios on real data from `data`; {} need no dataset",
        names.len() - need_data
    )));
    assert!(report.contains("synthetic stand-in for MNIST (scale 0.02)"));
    // The paper grids (2×4 panels of 620×470 under an 86-pixel title) and their claims.
    for (stem, title) in [
        ("scar-fig6", "SCAR Figure 6: partial vs full recovery"),
        (
            "scar-fig7",
            "SCAR Figure 7: prioritized partial checkpoints",
        ),
    ] {
        check_png(&rep.join(format!("{stem}.png")), (4 * 620, 86 + 2 * 470));
        check_svg(
            &rep.join(format!("{stem}.svg")),
            &[title, "(a) MLR on MNIST"],
        );
        assert!(report.contains(&format!("## {title}")), "{title}");
        assert!(report.contains(&format!("({stem}.png)")));
    }
    for claim in [
        "partial vs full recovery, 1/4 lost",
        "partial vs full recovery, 1/2 lost",
        "partial vs full recovery, 3/4 lost",
        "priority 1/8 checkpoints + partial recovery vs traditional",
        "59%–89%",
        "78%–95%",
    ] {
        assert!(report.contains(claim), "REPORT.md lacks {claim:?}");
    }
    assert!(report.contains("total wall time"));
    // Each scenario's row gives its wall and CPU time, read from its manifest.
    assert!(report.contains("| wall time | CPU time |"), "{report}");
    assert!(!report.contains("CPU time 0.0 s"), "{report}");
    // The protocol scenarios' findings: simulation against closed forms, and floors.
    for finding in [
        "agree with their closed form",
        "fully synchronous SGD (K-sync, K = P) over fully asynchronous",
        "`dutta-error-runtime-mlr`: error floor",
        // The PS-kill scenario's accuracy at the failure, after recovery, at the end.
        "`cao-ps-kill`, P = 1, accuracy (failure at 10 s): checkpoint-restart",
        "right after its recovery (first grid time after 15.50 s)",
        "stateless-ps ",
        // Cao et al.'s cost claim, under both billings.
        "`cao-ps-kill`, P = 1, Cao et al.'s cost claim (stateless PS against checkpoint-restart",
        "under per-second billing and",
        // Theorem 1's bound from the chosen and a generic x(0).
        "`random` series: the cost exceeds Theorem 1's bound in 0 of",
        "the bound uses c = 0.990000 (max-ratio) and ‖x(0) − x*‖ = 3.0414",
    ] {
        assert!(report.contains(finding), "REPORT.md lacks {finding:?}");
    }
}

#[test]
fn reproduce_uses_real_data_where_present_and_reports_failures() {
    let dir = tmpdir("fig-reproduce-real");
    // The eight partial-recovery panels (SCAR Fig. 6, checked below): the
    // whole set runs in `reproduce_quick_runs_every_bundled_scenario_and_reports`.
    let partial: Vec<&str> = scarsim::scenario::bundled::names()
        .filter(|n| n.starts_with("scar-partial-"))
        .flat_map(|n| ["--only", n])
        .collect();
    assert_eq!(partial.len(), 16, "{partial:?}");
    let quick = [&QUICK[..], &partial[..]].concat();
    // A CoverType file that is present (so it is chosen) but broken.
    std::fs::create_dir_all(dir.join("data/covtype")).unwrap();
    std::fs::write(dir.join("data/covtype/covtype.data"), "not,numbers\n").unwrap();
    let o = scarsim(&dir, &quick);
    assert!(
        !o.status.success(),
        "a failed scenario makes the command fail"
    );
    let err = stderr(&o);
    assert!(
        err.contains("scar-partial-mlr-covtype: real data from data"),
        "{err}"
    );
    assert!(
        err.contains("scar-partial-mlr-mnist: synthetic stand-in at scale 0.02"),
        "{err}"
    );
    assert!(err.contains("scenarios failed"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let report = std::fs::read_to_string(dir.join("rep/REPORT.md")).unwrap();
    assert!(report.contains("## Failed scenarios"), "{report}");
    assert!(
        report.contains("covtype.data line 1"),
        "the loader's error is quoted"
    );
    // The others still ran and were drawn, in the paper's grid.
    check_png(&dir.join("rep/scar-partial-mlr-mnist/figure.png"), SINGLE);
    check_png(&dir.join("rep/scar-fig6.png"), (4 * 620, 86 + 2 * 470));
    // With --synthetic the present file is ignored and everything runs.
    let o = scarsim(
        &dir,
        &QUICK_REPRODUCE
            .iter()
            .chain(&["--out", "syn", "--quiet"])
            .chain(&partial)
            .copied()
            .collect::<Vec<&str>>(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let report = std::fs::read_to_string(dir.join("syn/REPORT.md")).unwrap();
    assert!(report.contains("`--synthetic` was given"));
    assert!(!report.contains("## Failed scenarios"));
    // --resume after mending the data: the finished scenarios are kept as
    // they are (their manifests, with this run's wall time, are untouched),
    // the failed one runs, and the report covers all of them.
    std::fs::remove_dir_all(dir.join("data/covtype")).unwrap();
    let kept = dir.join("rep/scar-partial-mlr-mnist/manifest.json");
    let before = std::fs::read(&kept).unwrap();
    let o = scarsim(&dir, &[&quick[..], &["--resume"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("scar-partial-mlr-mnist: kept the finished results"),
        "{err}"
    );
    assert!(
        err.contains("scar-partial-mlr-covtype: synthetic stand-in at scale 0.02"),
        "{err}"
    );
    assert!(!err.contains("scar-partial-mlr-covtype: kept"), "{err}");
    assert_eq!(std::fs::read(&kept).unwrap(), before, "not recomputed");
    let report = std::fs::read_to_string(dir.join("rep/REPORT.md")).unwrap();
    assert!(!report.contains("## Failed scenarios"), "{report}");
    assert!(report.contains("`scar-partial-mlr-covtype`"));
    // A folder made from other inputs (here: a manifest whose fingerprint
    // differs, as after a change of trials, seed, data or version) is run again.
    let text = String::from_utf8(before).unwrap();
    let fingerprint = |t: &str| -> String {
        let v: serde_json::Value = serde_json::from_str(t).unwrap();
        v["fingerprint"].as_str().unwrap().to_string()
    };
    let original = fingerprint(&text);
    let changed = text.replace(&original, "not-this-run");
    std::fs::write(&kept, &changed).unwrap();
    let o = scarsim(&dir, &[&quick[..], &["--resume"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("scar-partial-mlr-mnist: running again:") && err.contains("other inputs"),
        "{err}"
    );
    assert!(
        err.contains("scar-partial-mlr-covtype: kept the finished results"),
        "{err}"
    );
    let rerun = std::fs::read_to_string(&kept).unwrap();
    assert_eq!(
        fingerprint(&rerun),
        original,
        "the rerun writes this run's fingerprint"
    );
}
