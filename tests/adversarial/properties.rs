//! Property tests: hostile values in scenario fields and command-line
//! arguments end in a result or a clear error.

use super::*;

/// Numbers a careless or hostile user may put in a field.
fn hostile_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-1.0),
        Just(1e-300),
        Just(1e-9),
        Just(1.0),
        Just(60.0),
        Just(1e12),
        Just(1e13),
        Just(1e300),
        Just(f64::MAX),
        1e-3..1e6f64,
    ]
}

fn hostile_count() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(3),
        Just(10_000_000),
        Just(10_000_001),
        Just(1_000_000_000_000),
        Just(i64::MAX as u64),
        1..1000u64,
    ]
}

fn toml_f64(v: f64) -> String {
    format!("{v:?}")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Parsing and budgeting any checkpoint-interval scenario returns (no
    /// panic, no hang), and what is accepted has timelines of bounded length
    /// and a footprint that counts exactly its units.
    #[test]
    fn interval_fields_are_bounded_or_refused(
        mtbf in prop::collection::vec(hostile_f64(), 1..4),
        checkpoint in hostile_f64(),
        solve in hostile_f64(),
        trials in hostile_count(),
    ) {
        let mtbf: Vec<String> = mtbf.iter().map(|&m| toml_f64(m)).collect();
        let text = daly(&mtbf.join(", "), checkpoint, solve, &trials.to_string());
        let Ok(sc) = scarsim::scenario::parse(&text, "p.toml") else { return Ok(()) };
        prop_assert!(trials >= 1 && trials <= scarsim::scenario::limits::MAX_TRIALS as u64);
        if let scarsim::scenario::Scenario::Faults(f) = &sc
            && let scarsim::scenario::faults::FaultsMeasure::Interval(i) = &f.measure
        {
            prop_assert!(i.mtbf.iter().all(|m| m.is_finite() && *m > 0.0));
            // Distinct MTBFs only (else repeated (series, x) rows).
            for (k, m) in i.mtbf.iter().enumerate() {
                prop_assert!(!i.mtbf[..k].contains(m));
            }
        }
        if let Ok(f) = scarsim::experiment::budget::check(&sc) {
            prop_assert_eq!(f.units as u64, scarsim::experiment::budget::unit_count(&sc));
        }
    }

    /// The checkpoint/restart timeline ends within its step limit whatever
    /// the failure times, and a finished one accounts for all its work.
    #[test]
    fn timelines_end_within_their_step_limit(
        solve in 1e-3..1e6f64,
        tau in 1e-3..1e5f64,
        delta in 0.0..1e3f64,
        restart in 0.0..1e3f64,
        gap in 1e-3..1e4f64,
    ) {
        use scarsim::theory::daly::simulate_checkpoint_restart;
        let limit = 20_000;
        match simulate_checkpoint_restart(solve, tau, delta, restart, limit, |t| t + gap) {
            Ok((split, _)) => {
                prop_assert!((split.solve - solve).abs() <= 1e-9 * solve.max(1.0));
                prop_assert!(split.total().is_finite());
            }
            Err(e) => prop_assert_eq!(e.steps, limit),
        }
    }

    /// Any protocol runtime scenario is parsed, budgeted, or refused; an
    /// accepted one has distinct worker counts and delays that cannot
    /// overflow simulated times.
    #[test]
    fn protocol_fields_are_bounded_or_refused(
        workers in prop::collection::vec(0u64..70, 1..5),
        updates in hostile_count(),
        trials in hostile_count(),
        shape in hostile_f64(),
        scale in hostile_f64(),
    ) {
        let w: Vec<String> = workers.iter().map(u64::to_string).collect();
        let delay = format!(
            "{{ distribution = \"pareto\", scale = {}, shape = {} }}",
            toml_f64(scale),
            toml_f64(shape)
        );
        let text = runtime(&w.join(", "), &updates.to_string(), &delay, &trials.to_string());
        let Ok(sc) = scarsim::scenario::parse(&text, "p.toml") else { return Ok(()) };
        if let scarsim::scenario::Scenario::Protocol(p) = &sc {
            for (k, x) in p.workers.iter().enumerate() {
                prop_assert!(!p.workers[..k].contains(x));
            }
            // The largest draw, scale·2^(53/shape), stays far from overflow.
            prop_assert!(scale.log10() + 53.0 / shape * 2f64.log10() <= 100.0);
        }
        let _ = scarsim::experiment::budget::check(&sc);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Command-line sizes (`--threads`, `--shard`, `--trials`) on `run
    /// --plan` and `run`: a result or a clean error, quickly, and a refused
    /// run leaves nothing behind in an `--out` that already existed.
    #[test]
    fn command_line_sizes_end_cleanly(
        threads in prop_oneof![Just(0u64), Just(1), Just(2), Just(100_000), Just(u32::MAX as u64)],
        shard in prop_oneof![
            Just(None),
            Just(Some("0/1".to_string())),
            Just(Some("1/2".to_string())),
            Just(Some("5/2".to_string())),
            Just(Some("0/99999999999".to_string())),
            Just(Some("x/y".to_string())),
        ],
        trials in prop_oneof![Just(1u64), Just(2), Just(10_000_001), Just(1_000_000_000_000)],
        plan in any::<bool>(),
    ) {
        let dir = tmpdir("adv-cli");
        write(&dir, "d.toml", &daly("600.0", 60.0, 36000.0, "2"));
        std::fs::create_dir_all(dir.join("out")).unwrap();
        let t = threads.to_string();
        let n = trials.to_string();
        let mut args = vec!["run", "d.toml", "--out", "out", "--quiet", "--no-plot",
                            "--threads", &t, "--trials", &n];
        if let Some(s) = &shard {
            args.extend(["--shard", s.as_str()]);
        }
        if plan {
            args.push("--plan");
        }
        let o = bounded(&dir, &args, &[], 120);
        let e = stderr(&o);
        prop_assert!(!e.contains("panicked"), "{}", e);
        prop_assert!(o.status.code() == Some(0) || o.status.code() == Some(1), "{:?}: {}", o.status, e);
        if o.status.success() {
            prop_assert!((1..100_000).contains(&threads) && trials <= 10_000_000);
        } else {
            // The existing --out stays, and nothing is left in it.
            prop_assert!(dir.join("out").is_dir());
            prop_assert!(tree(&dir.join("out")).is_empty(), "{:?}", tree(&dir.join("out")));
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
