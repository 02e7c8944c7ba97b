//! Outcomes shared across the scenarios of one `reproduce`: the bundled
//! partial-recovery and priority-checkpoint pairs have units with exactly
//! the same inputs; the second scenario takes them from the first, and every
//! CSV file is the same as when each scenario computes all its units.

use crate::common;

use std::path::{Path, PathBuf};

use common::{QUICK_REPRODUCE, scarsim, stderr, tmpdir};

/// Every CSV file under `dir`, relative to it, sorted.
fn csv_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else if p.extension().is_some_and(|x| x == "csv") {
                out.push(p.strip_prefix(base).unwrap().to_path_buf());
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v.sort();
    v
}

/// Units scenario `name` took from other scenarios, from its manifest.
fn shared_units(out: &Path, name: &str) -> u64 {
    let text = std::fs::read_to_string(out.join(name).join("manifest.json")).unwrap();
    let m: serde_json::Value = serde_json::from_str(&text).unwrap();
    m["details"]["units_from_other_scenarios"]
        .as_u64()
        .unwrap_or_else(|| panic!("{name}: no units_from_other_scenarios in {m}"))
}

/// Every bundled recovery scenario (the kind whose trials are shared),
/// reproduced on the stand-ins with sharing across scenarios (one scenario
/// at a time, so each partial scenario finishes before its priority
/// counterpart starts) and without it (two at a time): byte-identical CSV
/// files for every scenario, and every priority scenario took units from
/// its partial counterpart.
#[test]
fn sharing_across_scenarios_changes_no_byte() {
    let dir = tmpdir("share-across");
    let names: Vec<&str> = scarsim::scenario::bundled::names()
        .filter(|n| {
            let (sc, _, _) = scarsim::scenario::load(n).unwrap();
            sc.meta().kind == "recovery"
        })
        .collect();
    assert!(names.len() >= 16, "{names:?}");
    let mut args = QUICK_REPRODUCE.to_vec();
    args.extend(["--threads", "2", "--data-dir", "none"]);
    for n in &names {
        args.extend(["--only", n]);
    }
    let on = [&args[..], &["--scenarios-at-once", "1", "--out", "on"]].concat();
    let off = [
        &args[..],
        &[
            "--quiet",
            "--scenarios-at-once",
            "2",
            "--no-share-across",
            "--out",
            "off",
        ],
    ]
    .concat();
    let mut logs = Vec::new();
    for a in [&on, &off] {
        let o = scarsim(&dir, a);
        assert!(o.status.success(), "scarsim {a:?}: {}", stderr(&o));
        logs.push(stderr(&o));
    }
    // The per-trial LDA panels (Reuters, 20 Newsgroups): each priority panel
    // runs right after its partial panel and takes its 2 unperturbed runs.
    assert!(
        logs[0].contains("unperturbed runs shared: 2 scenario(s)"),
        "{}",
        logs[0]
    );
    let (a, b) = (dir.join("on"), dir.join("off"));
    let files = csv_files(&a);
    assert!(files.len() >= 3 * names.len(), "{files:?}");
    assert_eq!(files, csv_files(&b));
    for f in &files {
        assert!(
            std::fs::read(a.join(f)).unwrap() == std::fs::read(b.join(f)).unwrap(),
            "{} differs with and without sharing across scenarios",
            f.display()
        );
    }
    let mut total = 0;
    let mut beyond_r_one = 0;
    for n in &names {
        let shared = shared_units(&a, n);
        assert_eq!(shared_units(&b, n), 0, "{n}: nothing is shared when off");
        if let Some(model) = n.strip_prefix("scar-priority-")
            && names.contains(&format!("scar-partial-{model}").as_str())
        {
            // At r = 1 (three selectors) and the traditional series, both
            // trials: the partial scenario's full and partial series at 1/2
            // lost; and with them the r < 1 points that restore the same
            // blocks from the same iterations (all 13 points: 26).
            assert!((8..=26).contains(&shared), "{n}: {shared}");
            beyond_r_one += usize::from(shared > 8);
        }
        total += shared;
    }
    assert!(total > 0);
    assert!(beyond_r_one > 0, "no r < 1 point joined an r = 1 one");
    // The CNN's two partial panels differ only in how the parameters are cut
    // into blocks: the one run second takes every trial that restores the
    // whole state from one checkpoint from the other (on the stand-ins the
    // failure precedes the first checkpoint, so x(0)): the full series at
    // five lost fractions and partial recovery with every block lost, both
    // trials.
    let cnn: u64 = ["bylayer", "byshard"]
        .iter()
        .map(|p| shared_units(&a, &format!("scar-partial-cnn-{p}-mnist")))
        .sum();
    assert_eq!(
        cnn, 12,
        "whole-state units shared between the CNN's partitionings"
    );
    let report = std::fs::read_to_string(a.join("REPORT.md")).unwrap();
    assert!(
        report.contains(&format!(
            "Units shared from other scenarios: {total} recovery trials"
        )),
        "{report}"
    );
    assert!(report.contains("| units shared from other scenarios |"));
    let report = std::fs::read_to_string(b.join("REPORT.md")).unwrap();
    assert!(report.contains("(`--no-share-across`)"), "{report}");
    assert!(report.contains(" --no-share-across "), "{report}");
}

/// SCAR Figure 5(b)'s two bundled panels (reset at iteration 10, and at the
/// paper's settings) estimate x* as the same run continued to 1,000
/// iterations: with sharing across scenarios one takes it from the other
/// (two at a time, so the second may wait for the first), and every CSV
/// file is the same as when each computes it.
#[test]
fn sharing_the_long_run_optimum_changes_no_byte() {
    let dir = tmpdir("share-optimum");
    let args = [
        &QUICK_REPRODUCE[..],
        &[
            "--threads",
            "1",
            "--scenarios-at-once",
            "2",
            "--data-dir",
            "none",
            "--only",
            "scar-reset-lda",
            "--only",
            "scar-reset-lda-paper",
        ],
    ]
    .concat();
    let on = [&args[..], &["--out", "on"]].concat();
    let off = [&args[..], &["--no-share-across", "--out", "off"]].concat();
    let mut logs = Vec::new();
    for a in [&on, &off] {
        let o = scarsim(&dir, a);
        assert!(o.status.success(), "scarsim {a:?}: {}", stderr(&o));
        logs.push(stderr(&o));
    }
    let shared = "long-run optima shared: 1 scenario(s) took x*";
    assert!(logs[0].contains(shared), "{}", logs[0]);
    assert!(!logs[1].contains("long-run optima shared"), "{}", logs[1]);
    let (a, b) = (dir.join("on"), dir.join("off"));
    let files = csv_files(&a);
    assert!(files.len() >= 6, "{files:?}");
    assert_eq!(files, csv_files(&b));
    for f in &files {
        assert!(
            std::fs::read(a.join(f)).unwrap() == std::fs::read(b.join(f)).unwrap(),
            "{} differs with and without sharing x*",
            f.display()
        );
    }
}
