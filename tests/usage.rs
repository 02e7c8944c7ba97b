//! Resource use of wall-clock runs with PS failures (Cao et al.'s cost
//! comparison), on the scripted runs of `faults.rs`.

use crate::faults::{KILL, run_join, sync_ck};
use scarsim::faults::Strategy;

/// Resource use: the worker's busy and idle node-seconds fill the window, and
/// the PS is down exactly during its outage (billing: `faults::usage`).
#[test]
fn usage_accounts_node_seconds() {
    let u = run_join(
        Strategy::CheckpointRestart,
        1,
        sync_ck(),
        &KILL,
        f64::INFINITY,
    )
    .usage;
    assert!((u.worker_busy + u.worker_idle - 10.0).abs() < 1e-9, "{u:?}");
    // The worker waits while the PS is down or restoring (4.5 s to 7 s).
    assert!(u.worker_busy > 5.0 && u.worker_busy < 9.0, "{u:?}");
    assert_eq!(
        (u.ps_down, u.ps_up, u.down),
        (1.5, 8.5, vec![(0, 4.5, 6.0)])
    );
    let quiet = run_join(
        Strategy::CheckpointRestart,
        1,
        sync_ck(),
        &[],
        f64::INFINITY,
    )
    .usage;
    assert_eq!((quiet.ps_down, quiet.worker_busy), (0.0, 10.0));
}
