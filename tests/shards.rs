//! Sharded runs, merging, the journal and resuming after a kill.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{QUICK_REPRODUCE, run_ok, scarsim, small_recovery, stderr, tmpdir};

const OUTPUTS: [&str; 3] = ["summary.csv", "trials.csv", "baseline.csv"];

fn same_outputs(a: &Path, b: &Path) {
    for f in OUTPUTS {
        let x = std::fs::read(a.join(f)).unwrap_or_else(|e| panic!("{}: {e}", a.join(f).display()));
        let y = std::fs::read(b.join(f)).unwrap_or_else(|e| panic!("{}: {e}", b.join(f).display()));
        assert!(
            x == y,
            "{f} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
}

const SMALL: [&str; 4] = ["--synthetic", "--scale", "0.02", "--quiet"];

#[test]
fn three_shards_merge_into_the_bytes_of_one_run() {
    let dir = tmpdir("shards");
    std::fs::write(dir.join("s.toml"), small_recovery("sh", 7)).unwrap();
    run_ok(
        &dir,
        &[&["run", "s.toml", "--out", "whole"][..], &SMALL].concat(),
    );
    for i in 0..3 {
        let shard = format!("{i}/3");
        run_ok(
            &dir,
            &[
                &["run", "s.toml", "--out", "parts", "--shard", &shard][..],
                &SMALL,
            ]
            .concat(),
        );
    }
    // Shards are balanced and disjoint.
    let mut total = 0;
    for i in 0..3 {
        let m: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("parts/sh.shard-{i}-of-3/shard.json")))
                .unwrap(),
        )
        .unwrap();
        let n = m["units"].as_array().unwrap().len();
        assert!((7..=12).contains(&n), "shard {i} has {n} of 28 units");
        total += n;
    }
    assert_eq!(total, 28);
    run_ok(
        &dir,
        &[
            "merge",
            "parts/sh.shard-2-of-3",
            "parts/sh.shard-0-of-3",
            "parts/sh.shard-1-of-3",
            "--out",
            "merged",
        ],
    );
    same_outputs(&dir.join("whole/sh"), &dir.join("merged/sh"));
    // The merged manifest names the same inputs (`reproduce --resume` keeps it).
    let fingerprint = |d: &str| {
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(d)).unwrap()).unwrap();
        m["fingerprint"].as_str().unwrap().to_string()
    };
    let whole = fingerprint("whole/sh/manifest.json");
    assert!(!whole.is_empty());
    assert_eq!(fingerprint("merged/sh/manifest.json"), whole);
}

#[test]
fn merge_refuses_mismatched_missing_and_duplicate_shards() {
    let dir = tmpdir("merge-bad");
    std::fs::write(dir.join("s.toml"), small_recovery("mb", 3)).unwrap();
    for (i, seed) in [(0, "7"), (1, "7"), (1, "8")] {
        let out = format!("seed{seed}");
        let shard = format!("{i}/2");
        run_ok(
            &dir,
            &[
                &[
                    "run", "s.toml", "--out", &out, "--seed", seed, "--shard", &shard,
                ][..],
                &SMALL,
            ]
            .concat(),
        );
    }
    let merge = |dirs: &[&str]| {
        let mut args = vec!["merge"];
        args.extend(dirs);
        args.extend(["--out", "m"]);
        let o = scarsim(&dir, &args);
        assert!(!o.status.success());
        stderr(&o)
    };
    let e = merge(&["seed7/mb.shard-0-of-2", "seed8/mb.shard-1-of-2"]);
    assert!(
        e.contains("seed 8 vs 7") || e.contains("seed 7 vs 8"),
        "{e}"
    );
    let e = merge(&["seed7/mb.shard-0-of-2"]);
    assert!(e.contains("missing shard(s) 1/2"), "{e}");
    let e = merge(&[
        "seed7/mb.shard-0-of-2",
        "seed7/mb.shard-0-of-2",
        "seed7/mb.shard-1-of-2",
    ]);
    assert!(e.contains("given twice"), "{e}");
    let e = merge(&["seed7"]);
    assert!(e.contains("shard.json"), "{e}");
    assert!(!dir.join("m").exists());
}

/// Kill -9 a run part-way, tear the journal's last line, resume: the
/// results are the bytes of an uninterrupted run.
#[test]
fn killed_run_resumes_to_the_same_bytes() {
    let dir = tmpdir("kill");
    let text = small_recovery("k", 30);
    std::fs::write(dir.join("s.toml"), &text).unwrap();
    let args = [
        "run",
        "s.toml",
        "--synthetic",
        "--scale",
        "0.05",
        "--threads",
        "1",
        "--quiet",
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_scarsim"))
        .current_dir(&dir)
        .args(args)
        .args(["--out", "killed"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let journal = dir.join("killed/k/units.jsonl");
    let started = Instant::now();
    loop {
        let lines = std::fs::read_to_string(&journal)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if lines > 1 {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run finished before it could be killed"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no unit finished in time"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !dir.join("killed/k/summary.csv").exists(),
        "killed before the end"
    );
    let done = std::fs::read_to_string(&journal).unwrap().lines().count() - 1;
    assert!(done < 120, "only part of the 120 units were done ({done})");
    // A torn last line, as a crash in the middle of a write leaves.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap();
    std::io::Write::write_all(&mut f, b"0123456789abcdef\t{\"unit\":3,\"rec").unwrap();
    drop(f);
    run_ok(
        &dir,
        &[&args[..], &["--out", "killed", "--resume"]].concat(),
    );
    assert!(
        !journal.exists(),
        "the journal is removed once the results are written"
    );
    run_ok(&dir, &[&args[..], &["--out", "whole"]].concat());
    same_outputs(&dir.join("whole/k"), &dir.join("killed/k"));
    // Resuming from a journal of another run is refused.
    std::fs::write(
        dir.join("killed/k/units.jsonl"),
        std::fs::read(dir.join("whole/k/summary.csv")).unwrap(),
    )
    .unwrap();
    let o = scarsim(
        &dir,
        &[&args[..], &["--out", "killed", "--resume"]].concat(),
    );
    assert!(
        !o.status.success() && stderr(&o).contains("journal"),
        "{}",
        stderr(&o)
    );
}

/// The Slurm example, run as plain processes: each array task, then the merge.
#[test]
fn slurm_example_runs_locally() {
    let dir = tmpdir("slurm");
    std::fs::write(dir.join("s.toml"), small_recovery("slurmy", 5)).unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/slurm");
    let bin = env!("CARGO_BIN_EXE_scarsim");
    for i in 0..3 {
        let o = Command::new("bash")
            .arg(examples.join("scarsim-array.sbatch"))
            .current_dir(&dir)
            .env("SCARSIM", bin)
            .env("SCENARIO", "s.toml")
            .env("SHARDS", "3")
            .env("OUT", "shards")
            .env("EXTRA", "--synthetic --scale 0.02")
            .env("SLURM_ARRAY_TASK_ID", i.to_string())
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        assert!(o.status.success(), "array task {i}: {}", stderr(&o));
    }
    let o = Command::new("bash")
        .arg(examples.join("merge-shards.sbatch"))
        .current_dir(&dir)
        .env("SCARSIM", bin)
        .env("SCENARIO_NAME", "slurmy")
        .env("SHARDS", "3")
        .env("OUT", "shards")
        .env("FINAL", "final")
        .output()
        .unwrap();
    assert!(o.status.success(), "merge: {}", stderr(&o));
    run_ok(
        &dir,
        &[&["run", "s.toml", "--out", "whole"][..], &SMALL].concat(),
    );
    same_outputs(&dir.join("whole/slurmy"), &dir.join("final/slurmy"));
}

#[test]
fn plan_reports_units_time_and_memory() {
    let dir = tmpdir("plan");
    std::fs::write(dir.join("s.toml"), small_recovery("p", 5)).unwrap();
    let o = scarsim(
        &dir,
        &[&["run", "s.toml", "--plan", "--shard", "1/2"][..], &SMALL].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("units: 20") && out.contains("estimated time") && out.contains("MiB"),
        "{out}"
    );
    assert!(!dir.join("results").exists(), "a plan writes nothing");
}

/// Every CSV file under `dir`, relative to it, sorted.
fn csv_files(dir: &Path) -> Vec<std::path::PathBuf> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<std::path::PathBuf>) {
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

/// REPORT.md with every time (`12.3 s`) replaced by `T s`.
fn report_without_times(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let words: Vec<&str> = text.split(' ').collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let unit_next = words.get(i + 1).is_some_and(|n| {
            n.strip_prefix('s')
                .is_some_and(|r| !r.starts_with(char::is_alphanumeric))
        });
        let time = w.contains('.') && w.parse::<f64>().is_ok() && unit_next;
        out.push(if time { "T" } else { w });
    }
    out.join(" ")
}

/// `reproduce --shard i/3` three times, then `reproduce --merge`: every
/// scenario's CSV files are the bytes of one unsharded `reproduce`, and
/// REPORT.md is the same apart from wall and CPU times. One scenario
/// (scar-bound-qp-rho, 2 units) has fewer units than tasks, so one task has
/// no share of it.
#[test]
fn sharded_reproduce_merges_into_the_bytes_of_one_reproduce() {
    let dir = tmpdir("reproduce-shards");
    let common = [
        &QUICK_REPRODUCE[..],
        &[
            "--threads",
            "1",
            "--quiet",
            "--only",
            "daly-interval",
            "--only",
            "scar-priority-mlr-covtype",
            "--only",
            "scar-precision-qp",
            "--only",
            "scar-bound-qp-rho",
            "--data-dir",
            "none",
        ],
    ]
    .concat();
    std::fs::create_dir_all(dir.join("whole")).unwrap();
    std::fs::create_dir_all(dir.join("sharded")).unwrap();
    run_ok(
        &dir.join("whole"),
        &[&common[..], &["--out", "rep"]].concat(),
    );
    for i in 0..3 {
        let shard = format!("{i}/3");
        run_ok(
            &dir.join("sharded"),
            &[&common[..], &["--out", "parts", "--shard", &shard]].concat(),
        );
    }
    assert!(
        !dir.join("sharded/parts/REPORT.md").exists(),
        "a shard writes no report"
    );
    run_ok(
        &dir.join("sharded"),
        &[&common[..], &["--out", "rep", "--merge", "parts"]].concat(),
    );
    let (a, b) = (dir.join("whole/rep"), dir.join("sharded/rep"));
    let files = csv_files(&a);
    assert!(files.len() >= 6, "{files:?}");
    assert_eq!(files, csv_files(&b));
    for f in &files {
        assert!(
            std::fs::read(a.join(f)).unwrap() == std::fs::read(b.join(f)).unwrap(),
            "{} differs between the sharded and the unsharded reproduce",
            f.display()
        );
    }
    assert_eq!(
        report_without_times(&a.join("REPORT.md")),
        report_without_times(&b.join("REPORT.md"))
    );
    // A missing shard fails that scenario, by name.
    let gone = std::fs::read_dir(dir.join("sharded/parts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.to_string_lossy()
                .contains("scar-priority-mlr-covtype.shard-1-of-3")
        })
        .expect("shard 1 of the recovery scenario");
    std::fs::remove_dir_all(&gone).unwrap();
    let o = scarsim(
        &dir.join("sharded"),
        &[&common[..], &["--out", "rep2", "--merge", "parts"]].concat(),
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("scar-priority-mlr-covtype"),
        "{}",
        stderr(&o)
    );
    let report = std::fs::read_to_string(dir.join("sharded/rep2/REPORT.md")).unwrap();
    assert!(report.contains("missing shard(s) 1/3"), "{report}");
    // Options other than the shards' are refused.
    let o = scarsim(
        &dir.join("sharded"),
        &[
            &["reproduce", "--quick", "--trials", "3", "--scale", "0.02"][..],
            &[
                "--synthetic",
                "--only",
                "daly-interval",
                "--data-dir",
                "none",
            ],
            &["--out", "rep3", "--merge", "parts"],
        ]
        .concat(),
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("other inputs"), "{}", stderr(&o));
}
