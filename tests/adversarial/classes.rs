//! Hand-written hostile cases, by class (see the module above).

use super::*;

// ------------------------------------------------------------ class 1: nothing outside --out

#[test]
fn a_linked_journal_or_results_folder_is_refused_and_its_target_untouched() {
    let dir = tmpdir("adv-links");
    write(&dir, "d.toml", &daly("600.0", 60.0, 36000.0, "2"));
    write(&dir, "victim.txt", "precious\n");
    // A link at the journal's name.
    std::fs::create_dir_all(dir.join("out/dly")).unwrap();
    std::os::unix::fs::symlink(dir.join("victim.txt"), dir.join("out/dly/units.jsonl")).unwrap();
    let o = bounded(
        &dir,
        &["run", "d.toml", "--out", "out", "--quiet", "--no-plot"],
        &[],
        120,
    );
    refused(&o, &["link"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("victim.txt")).unwrap(),
        "precious\n"
    );
    assert!(std::fs::symlink_metadata(dir.join("out/dly/units.jsonl")).is_ok());
    // A link at the results folder's name.
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    std::fs::create_dir_all(dir.join("out2")).unwrap();
    std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("out2/dly")).unwrap();
    let o = bounded(
        &dir,
        &["run", "d.toml", "--out", "out2", "--quiet", "--no-plot"],
        &[],
        120,
    );
    refused(&o, &["link"]);
    assert!(tree(&dir.join("elsewhere")).is_empty());
    // A link planted at a result file's name is replaced, never written through.
    std::fs::create_dir_all(dir.join("out3/dly")).unwrap();
    std::os::unix::fs::symlink(dir.join("victim.txt"), dir.join("out3/dly/summary.csv")).unwrap();
    let o = bounded(
        &dir,
        &["run", "d.toml", "--out", "out3", "--quiet", "--no-plot"],
        &[],
        120,
    );
    succeeded(&o);
    assert_eq!(
        std::fs::read_to_string(dir.join("victim.txt")).unwrap(),
        "precious\n"
    );
    let m = std::fs::symlink_metadata(dir.join("out3/dly/summary.csv")).unwrap();
    assert!(m.file_type().is_file());
}

#[test]
fn a_run_that_fails_early_keeps_an_existing_empty_out() {
    let dir = tmpdir("adv-keep-out");
    // Valid scenario, but the data it needs is not there (no --synthetic).
    write(&dir, "s.toml", &small_recovery("keep", 2));
    std::fs::create_dir_all(dir.join("mine")).unwrap();
    let o = bounded(
        &dir,
        &[
            "run",
            "s.toml",
            "--out",
            "mine",
            "--data-dir",
            "nowhere",
            "--quiet",
        ],
        &[],
        120,
    );
    refused(&o, &[]);
    assert!(dir.join("mine").is_dir(), "the existing --out was deleted");
    assert!(
        tree(&dir.join("mine")).is_empty(),
        "{:?}",
        tree(&dir.join("mine"))
    );
    // One it created itself is removed again.
    let o = bounded(
        &dir,
        &[
            "run",
            "s.toml",
            "--out",
            "fresh",
            "--data-dir",
            "nowhere",
            "--quiet",
        ],
        &[],
        120,
    );
    refused(&o, &[]);
    assert!(!dir.join("fresh").exists());
}

/// Two shards of a small checkpoint-interval scenario into `dir/parts`.
fn two_shards(dir: &Path) {
    write(dir, "d.toml", &daly("600.0, 1800.0", 60.0, 36000.0, "3"));
    for i in 0..2 {
        let s = format!("{i}/2");
        let o = bounded(
            dir,
            &["run", "d.toml", "--out", "parts", "--shard", &s, "--quiet"],
            &[],
            120,
        );
        succeeded(&o);
    }
}

/// An edit of a shard.json.
type Edit = Box<dyn Fn(&mut serde_json::Value)>;

fn edit_shard(dir: &Path, shard: usize, edit: impl Fn(&mut serde_json::Value)) {
    let p = dir.join(format!("parts/dly.shard-{shard}-of-2/shard.json"));
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn edited_shard_files_are_refused_and_nothing_lands_outside_out() {
    let dir = tmpdir("adv-shards");
    two_shards(&dir);
    let pristine = dir.join("pristine");
    std::fs::create_dir_all(&pristine).unwrap();
    for i in 0..2 {
        let d = format!("parts/dly.shard-{i}-of-2");
        std::fs::create_dir_all(pristine.join(&d)).unwrap();
        for f in ["shard.json", "units.jsonl"] {
            std::fs::copy(dir.join(&d).join(f), pristine.join(&d).join(f)).unwrap();
        }
    }
    let restore = || {
        for i in 0..2 {
            let d = format!("parts/dly.shard-{i}-of-2");
            for f in ["shard.json", "units.jsonl"] {
                std::fs::copy(pristine.join(&d).join(f), dir.join(&d).join(f)).unwrap();
            }
        }
    };
    let merge = || {
        bounded(
            &dir,
            &[
                "merge",
                "parts/dly.shard-0-of-2",
                "parts/dly.shard-1-of-2",
                "--out",
                "m/out",
            ],
            &[],
            120,
        )
    };
    let before = tree(&dir);
    let hostile: Vec<(&str, Edit)> = vec![
        (
            "scenario",
            Box::new(|v| v["scenario"] = "../../escaped".into()),
        ),
        (
            "scenario",
            Box::new(|v| v["scenario"] = "/tmp/escaped".into()),
        ),
        ("shard", Box::new(|v| v["shard"]["index"] = 7.into())),
        (
            "shard",
            Box::new(|v| v["shard"]["count"] = 99_999_999_999u64.into()),
        ),
        (
            "units",
            Box::new(|v| v["units"] = serde_json::json!([0, 1, 2, 99_999])),
        ),
        ("unknown", Box::new(|v| v["surprise"] = 1.into())),
    ];
    for (what, edit) in &hostile {
        restore();
        edit_shard(&dir, 1, edit);
        let o = merge();
        let e = refused(&o, &[]);
        assert!(e.contains("shard"), "{what}: {e}");
        assert_eq!(tree(&dir), before, "{what}: merge left files behind");
        assert!(!Path::new("/tmp/escaped").exists());
    }
    // An edited journal no longer has the checksum shard.json recorded.
    restore();
    let j = dir.join("parts/dly.shard-0-of-2/units.jsonl");
    let text = std::fs::read_to_string(&j).unwrap();
    std::fs::write(&j, text.replacen("\"failures\"", "\"failures\" ", 1)).unwrap();
    refused(&merge(), &[]);
    assert_eq!(tree(&dir), before);
    // The untouched shards merge.
    restore();
    succeeded(&merge());
    assert!(dir.join("m/out/dly/manifest.json").is_file());
}

// ------------------------------------------------------------ class 2: no panics or aborts

#[test]
fn sizes_beyond_the_limits_are_refused_with_the_limit_in_the_message() {
    let dir = tmpdir("adv-sizes");
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            daly("600.0", 60.0, 36000.0, "1000000000000"),
            vec!["trials", "10000000"],
        ),
        (
            runtime(
                "4",
                "100",
                "{ distribution = \"constant\", value = 1.0 }",
                "1000000000000",
            ),
            vec!["trials"],
        ),
        (
            small_recovery("big", 1_000_000_000_000),
            vec!["trials", "10000000"],
        ),
        (
            runtime(
                "4",
                "1000000000000",
                "{ distribution = \"constant\", value = 1.0 }",
                "2",
            ),
            vec!["updates", "1000000000"],
        ),
        (
            precision("1000000000000", "8"),
            vec!["iterations", "1000000000"],
        ),
        (precision("6000", "8, 8"), vec!["appears twice"]),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        let f = format!("s{i}.toml");
        write(&dir, &f, text);
        let o = bounded(&dir, &["validate", &f], &[], 60);
        refused(&o, needles);
        let o = bounded(
            &dir,
            &["run", &f, "--plan", "--synthetic", "--scale", "0.02"],
            &[],
            60,
        );
        refused(&o, needles);
    }
    // A sweep of 20,000 values (a list limit), quickly.
    let values: Vec<String> = (0..20_000)
        .map(|i| format!("{}", (i as f64 + 0.5) / 20_001.0))
        .collect();
    let text = small_recovery("sweep", 2).replace(
        "lost_fraction = [0.25, 0.75]",
        &format!("lost_fraction = [{}]", values.join(",")),
    );
    write(&dir, "sweep.toml", &text);
    refused(
        &bounded(&dir, &["validate", "sweep.toml"], &[], 30),
        &["10000"],
    );
    // Units × trials too big for memory: the estimate and the machine's memory named.
    let big = small_recovery("mem", 10_000_000).replace(
        "lost_fraction = [0.25, 0.75]",
        &format!("lost_fraction = [{}]", values[..5000].join(",")),
    );
    write(&dir, "mem.toml", &big);
    refused(
        &bounded(&dir, &["validate", "mem.toml"], &[], 30),
        &["too big", "memory"],
    );
    // validate reports what a run holds in memory.
    write(&dir, "ok.toml", &daly("600.0", 60.0, 36000.0, "2"));
    let o = bounded(&dir, &["validate", "ok.toml"], &[], 30);
    succeeded(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("in memory"));
}

#[test]
fn huge_shard_and_thread_counts_are_refused_before_anything_is_written() {
    let dir = tmpdir("adv-shard-count");
    write(&dir, "d.toml", &daly("600.0", 60.0, 36000.0, "2"));
    let o = bounded(
        &dir,
        &[
            "run",
            "d.toml",
            "--out",
            "out",
            "--shard",
            "0/99999999999",
            "--quiet",
        ],
        &[],
        60,
    );
    refused(&o, &["at most"]);
    assert!(!dir.join("out").exists(), "{:?}", tree(&dir));
    let o = bounded(
        &dir,
        &[
            "run",
            "d.toml",
            "--out",
            "out",
            "--threads",
            "100000",
            "--quiet",
        ],
        &[],
        60,
    );
    refused(&o, &["--threads"]);
    assert!(!dir.join("out").exists());
}

// ------------------------------------------------------------ class 3: no hangs

#[test]
fn failures_faster_than_a_checkpoint_are_refused_not_simulated_forever() {
    let dir = tmpdir("adv-hang");
    // MTBF 1 s against a 60 s checkpoint: a timeline would never finish.
    write(&dir, "d.toml", &daly("1.0", 60.0, 2592000.0, "2"));
    refused(
        &bounded(&dir, &["validate", "d.toml"], &[], 30),
        &["MTBF", "limit"],
    );
    refused(
        &bounded(&dir, &["run", "d.toml", "--plan"], &[], 30),
        &["MTBF"],
    );
    refused(
        &bounded(&dir, &["run", "d.toml", "--out", "o", "--quiet"], &[], 30),
        &["MTBF"],
    );
    assert!(!dir.join("o").exists());
}

#[test]
fn plan_of_huge_units_times_a_sample_only() {
    let dir = tmpdir("adv-plan");
    // 10^9 iterations per width and 10^9 updates per trial: a plan in seconds.
    write(&dir, "p.toml", &precision("1000000000", "8, 16"));
    let o = bounded(&dir, &["run", "p.toml", "--plan"], &[], 60);
    succeeded(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("estimated memory"));
    write(
        &dir,
        "r.toml",
        &runtime(
            "4",
            "999999990",
            "{ distribution = \"constant\", value = 1.0 }",
            "2",
        ),
    );
    let o = bounded(&dir, &["run", "r.toml", "--plan"], &[], 60);
    succeeded(&o);
}

// ------------------------------------------------------------ class 4: silently wrong → errors

#[test]
fn names_of_things_that_do_not_exist_and_repeats_are_errors() {
    let dir = tmpdir("adv-names");
    let cr = "[[series]]\nstrategy = \"checkpoint-restart\"\n";
    // [failure] nodes naming a PS node beyond ps_nodes = 2.
    write(
        &dir,
        "n.toml",
        &wallclock("process = \"fixed\"\nnodes = [5]\nat = 1.0\nback = 1.5", cr),
    );
    refused(
        &bounded(&dir, &["validate", "n.toml"], &[], 30),
        &["node 5 does not exist"],
    );
    // The same node is fine with a chain of 3 per shard (nodes 0..=5).
    let chain =
        "[[series]]\nstrategy = \"chain-replication\"\nchain = 3\nreplicate = \"checkpoint\"\n";
    write(
        &dir,
        "c.toml",
        &wallclock(
            "process = \"fixed\"\nnodes = [5]\nat = 1.0\nback = 1.5",
            chain,
        ),
    );
    succeeded(&bounded(&dir, &["validate", "c.toml"], &[], 30));
    // A failure-trace row naming a node that does not exist, with its line.
    write(
        &dir,
        "trace.csv",
        "time,node,down_for\n0.5,1,0.2\n1.0,9,0.5\n",
    );
    write(
        &dir,
        "t.toml",
        &wallclock("process = \"trace\"\nfile = \"trace.csv\"", cr),
    );
    refused(
        &bounded(&dir, &["validate", "t.toml"], &[], 30),
        &["line 3", "node 9"],
    );
    // Duplicate series names in an [iterations] scenario.
    let twice = "[[series]]\nname = \"a\"\nrecovery = \"full\"\ncheckpoint_interval = 2\ncheckpoint_fraction = 1.0\npersist = \"sync\"\n\n\
                 [[series]]\nname = \"a\"\nrecovery = \"partial\"\ncheckpoint_interval = 2\ncheckpoint_fraction = 0.5\npersist = \"sync\"\n";
    write(&dir, "i.toml", &iterations_faults(twice));
    refused(
        &bounded(&dir, &["validate", "i.toml"], &[], 30),
        &["appears twice"],
    );
    // Duplicate sweep values, worker counts and MTBFs.
    write(
        &dir,
        "sw.toml",
        &small_recovery("dup", 2).replace("[0.25, 0.75]", "[0.25, 0.75, 0.25]"),
    );
    refused(
        &bounded(&dir, &["validate", "sw.toml"], &[], 30),
        &["appears twice"],
    );
    write(
        &dir,
        "w.toml",
        &runtime(
            "4, 8, 4",
            "10",
            "{ distribution = \"constant\", value = 1.0 }",
            "2",
        ),
    );
    refused(
        &bounded(&dir, &["validate", "w.toml"], &[], 30),
        &["appears twice"],
    );
    write(&dir, "m.toml", &daly("600.0, 600.0", 60.0, 36000.0, "2"));
    refused(
        &bounded(&dir, &["validate", "m.toml"], &[], 30),
        &["appears twice"],
    );
    // Delays whose sums overflow (NaN means) are refused before the run.
    let pareto = "{ distribution = \"pareto\", scale = 1.0, shape = 0.01 }";
    write(&dir, "o.toml", &runtime("4", "100", pareto, "2"));
    refused(
        &bounded(&dir, &["validate", "o.toml"], &[], 30),
        &["overflow"],
    );
    let huge = "{ distribution = \"constant\", value = 1e300 }";
    write(&dir, "h.toml", &runtime("4", "100", huge, "2"));
    refused(
        &bounded(&dir, &["validate", "h.toml"], &[], 30),
        &["at most"],
    );
}

#[test]
fn plot_refuses_a_summary_without_rows() {
    let dir = tmpdir("adv-plot");
    write(&dir, "d.toml", &daly("600.0", 60.0, 36000.0, "2"));
    succeeded(&bounded(
        &dir,
        &["run", "d.toml", "--out", "o", "--quiet", "--no-plot"],
        &[],
        120,
    ));
    let res = dir.join("o/dly");
    succeeded(&bounded(&dir, &["plot", "o/dly"], &[], 120));
    // Cut summary.csv to its header: the manifest's checksum no longer matches.
    let s = std::fs::read_to_string(res.join("summary.csv")).unwrap();
    std::fs::write(
        res.join("summary.csv"),
        format!("{}\n", s.lines().next().unwrap()),
    )
    .unwrap();
    refused(
        &bounded(&dir, &["plot", "o/dly"], &[], 60),
        &["summary.csv"],
    );
    // Even with a manifest whose checksum fits the header-only summary.
    let header = std::fs::read(res.join("summary.csv")).unwrap();
    let mp = res.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&mp).unwrap()).unwrap();
    m["checksums"]["summary.csv"] = scarsim::report::manifest::fnv64(&header).into();
    std::fs::write(&mp, m.to_string()).unwrap();
    refused(&bounded(&dir, &["plot", "o/dly"], &[], 60), &["no rows"]);
}

// ------------------------------------------------------------ class 5: finished only by the manifest

#[test]
fn a_write_error_leaves_no_folder_that_looks_finished() {
    let dir = tmpdir("adv-full-disk");
    write(&dir, "d.toml", &daly("600.0", 60.0, 36000.0, "2"));
    let run = |out: &str, fail: &str| {
        bounded(
            &dir,
            &["run", "d.toml", "--out", out, "--quiet", "--no-plot"],
            &[("SCARSIM_FAIL_WRITE", fail)],
            120,
        )
    };
    // Full disk at the very first write (the journal): nothing left behind.
    refused(&run("first", "1"), &["No space left"]);
    assert!(
        !dir.join("first").exists(),
        "{:?}",
        tree(&dir.join("first"))
    );
    // Full disk at each result file in turn: never a manifest, plot refuses,
    // and a resume finishes with the bytes of an undisturbed run.
    succeeded(&run("clean", "none-such-file"));
    let files: Vec<String> = tree(&dir.join("clean/dly"))
        .into_iter()
        .filter(|f| f != "manifest.json")
        .collect();
    assert!(files.iter().any(|f| f == "summary.csv"), "{files:?}");
    for f in files
        .iter()
        .chain(std::iter::once(&"manifest.json".to_string()))
    {
        let out = format!("full-{}", f.replace('.', "-"));
        refused(&run(&out, f), &["No space left"]);
        let res = dir.join(&out).join("dly");
        assert!(
            !res.join("manifest.json").exists(),
            "{f}: a manifest was written"
        );
        let o = bounded(&dir, &["plot", res.to_str().unwrap()], &[], 60);
        refused(&o, &["finished"]);
        let o = bounded(
            &dir,
            &[
                "run",
                "d.toml",
                "--out",
                &out,
                "--quiet",
                "--no-plot",
                "--resume",
            ],
            &[],
            120,
        );
        succeeded(&o);
        for g in &files {
            if g.ends_with(".csv") {
                assert_eq!(
                    std::fs::read(res.join(g)).unwrap(),
                    std::fs::read(dir.join("clean/dly").join(g)).unwrap(),
                    "{f}: {g} differs after the resume"
                );
            }
        }
    }
}

#[test]
fn resume_removes_temporaries_of_dead_processes_only() {
    let dir = tmpdir("adv-stale");
    write(&dir, "d.toml", &daly("600.0", 60.0, 36000.0, "2"));
    let res = dir.join("o/dly");
    std::fs::create_dir_all(&res).unwrap();
    // A process id that cannot be running, and this test's own (alive).
    let dead = res.join(".summary.csv.tmp-2147483646");
    let alive = res.join(format!(".trials.csv.tmp-{}", std::process::id()));
    std::fs::write(&dead, "half").unwrap();
    std::fs::write(&alive, "busy").unwrap();
    let o = bounded(
        &dir,
        &[
            "run",
            "d.toml",
            "--out",
            "o",
            "--quiet",
            "--no-plot",
            "--resume",
        ],
        &[],
        120,
    );
    succeeded(&o);
    assert!(!dead.exists(), "a dead process's temporary stayed");
    assert!(alive.exists(), "a live process's temporary was removed");
    assert!(res.join("manifest.json").is_file());
}
