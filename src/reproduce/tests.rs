//! Unit tests of `reproduce`.

use super::report::link;
use super::*;

fn options() -> ReproduceOptions {
    ReproduceOptions {
        quick: true,
        data_dir: "data".into(),
        synthetic: false,
        out_dir: "out".into(),
        trials: None,
        scale: None,
        threads: 1,
        at_once: 1,
        resume: false,
        only: Vec::new(),
        shard: None,
        merge: Vec::new(),
        share_across: true,
        robustness: false,
        readings: Vec::new(),
    }
}

#[test]
fn quick_defaults_and_overrides() {
    let mut o = options();
    assert_eq!(o.trials(), Some(QUICK_TRIALS));
    assert_eq!(o.scale(), QUICK_SCALE);
    o.quick = false;
    assert_eq!(o.trials(), None);
    assert_eq!(o.scale(), 1.0);
    o.trials = Some(3);
    o.scale = Some(0.02);
    assert_eq!(o.trials(), Some(3));
    assert_eq!(o.scale(), 0.02);
    assert_eq!(
        o.command_line(),
        "scarsim reproduce --trials 3 --scale 0.02 --data-dir data --out out"
    );
    o.resume = true;
    assert!(o.command_line().contains(" --resume "));
}

#[test]
fn stand_in_when_a_file_is_missing() {
    let dir = std::env::temp_dir().join(format!("scarsim-choose-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(dir.join("covtype")).unwrap();
    match choose_data(&[DatasetName::Covtype], &dir, 0.1) {
        DataChoice::StandIn { scale, missing } => {
            assert_eq!(scale, 0.1);
            assert_eq!(missing, vec![dir.join("covtype/covtype.data")]);
        }
        DataChoice::Real | DataChoice::NoData => panic!("nothing is there"),
    }
    std::fs::write(dir.join("covtype/covtype.data.gz"), b"x").unwrap();
    assert_eq!(
        choose_data(&[DatasetName::Covtype], &dir, 0.1),
        DataChoice::Real
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn links_are_relative() {
    assert_eq!(
        link(Path::new("out"), Path::new("out/a/figure.png")),
        "a/figure.png"
    );
}

#[test]
fn first_repeat_names_the_second_occurrence_of_the_earliest_repeat() {
    assert_eq!(first_repeat::<u32>(&[]), None);
    assert_eq!(first_repeat(&[1, 2, 3]), None);
    assert_eq!(first_repeat(&[1, 2, 2, 1]), Some(&2));
    assert_eq!(first_repeat(&[3, 1, 3]), Some(&3));
    let only = ["a".to_string(), "b".to_string(), "a".to_string()];
    assert_eq!(first_repeat(&only).map(String::as_str), Some("a"));
}

/// The bundled scenarios that share work run as chains: each per-trial LDA
/// partial panel with its priority panel (the same unperturbed runs), and
/// the CNN panels that differ only in their blocks (the same full-recovery
/// trials); every other scenario alone, and every scenario once.
#[test]
fn scenarios_that_share_work_run_as_chains() {
    let names: Vec<&'static str> = bundled::names().collect();
    let jobs: Vec<Job> = names.iter().map(|n| Job::bundled(n)).collect();
    let chains = chains(&jobs, &options());
    let mut seen: Vec<usize> = chains.iter().flatten().copied().collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..jobs.len()).collect::<Vec<_>>());
    let mut long: Vec<Vec<&str>> = chains
        .iter()
        .filter(|c| c.len() > 1)
        .map(|c| c.iter().map(|&i| names[i]).collect())
        .collect();
    long.sort();
    assert_eq!(
        long,
        [
            [
                "scar-partial-cnn-bylayer-mnist",
                "scar-partial-cnn-byshard-mnist"
            ],
            ["scar-partial-lda-20news", "scar-priority-lda-20news"],
            ["scar-partial-lda-reuters", "scar-priority-lda-reuters"],
            [
                "scar-priority-cnn-bylayer-mnist",
                "scar-priority-cnn-byshard-mnist"
            ],
        ]
    );
    // Chains start where their first member stands.
    let firsts: Vec<usize> = chains.iter().map(|c| c[0]).collect();
    assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
}
