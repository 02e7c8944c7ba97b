//! Unit tests of the robustness study.

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
fn a_study_runs_only_the_readings_asked_for() {
    let names = ["scar-partial-mf-movielens", "scar-partial-mlr-mnist"];
    let bundled = Study::of_readings(&names, &[0]).unwrap();
    assert_eq!(bundled.jobs().len(), 48);
    assert!(bundled.jobs().iter().all(|j| !j.name.contains(".r1.")));
    let first = Study::of_readings(&names, &[1]).unwrap();
    // The MLR panel has no reading 1: only MovieLens' λ = 1 variants run.
    let jobs = first.jobs();
    assert_eq!(jobs.len(), 24);
    assert!(
        jobs.iter()
            .all(|j| j.name.starts_with("scar-partial-mf-movielens.r1."))
    );
    assert_eq!(
        Study::of_readings(&names, &[0, 1]).unwrap().jobs().len(),
        Study::of(&names).unwrap().jobs().len()
    );
    let e = Study::of_readings(&["scar-partial-mlr-mnist"], &[1])
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("--reading 1"), "{e:#}");
    let e = Study::of_readings(&names, &[0, 0]).err().unwrap();
    assert!(format!("{e:#}").contains("given twice"), "{e:#}");
}
