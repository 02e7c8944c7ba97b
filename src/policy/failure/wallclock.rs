//! Failure processes in wall-clock time: which nodes fail, when, and when
//! they return.
//!
//! - [`FailureProcess::Fixed`]: listed nodes killed at a fixed time and back at
//!   another (Cao et al.: the PS killed at t = 10 s, back at t = 15 s);
//! - [`FailureProcess::Poisson`]: every node fails independently with
//!   exponential inter-arrival times of mean `mtbf` (counted while it is up)
//!   and returns `repair` seconds later;
//! - [`FailureProcess::Trace`]: outages read from a CSV file with columns
//!   `time,node,down_for`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use rand::RngExt;
use serde::Serialize;

use crate::rng::SimRng;

/// One node outage.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Outage {
    /// The failed node.
    pub node: usize,
    /// When it fails.
    pub down: f64,
    /// When it is back (`f64::INFINITY`: never).
    pub up: f64,
}

/// When nodes fail and return.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "process", rename_all = "kebab-case")]
pub enum FailureProcess {
    /// No failures.
    None,
    /// `nodes` fail at `at` and return at `back` (`f64::INFINITY`: never).
    Fixed {
        /// Node indices.
        nodes: Vec<usize>,
        /// Failure time.
        at: f64,
        /// Return time.
        back: f64,
    },
    /// Independent exponential failures per node.
    Poisson {
        /// Mean time between failures of one node (while it is up).
        mtbf: f64,
        /// Time a failed node stays down.
        repair: f64,
    },
    /// Outages from a trace file.
    Trace {
        /// The file (for the manifest).
        file: String,
        /// Its outages, by failure time.
        outages: Vec<Outage>,
    },
}

impl FailureProcess {
    /// The outages of nodes `0..nodes` that begin before `horizon`, sorted by
    /// (time, node). `rng` drives the Poisson process only; each node draws its
    /// own inter-arrival times in node order, so adding nodes does not change
    /// the failures of the others.
    pub(crate) fn outages(&self, nodes: usize, horizon: f64, rng: &mut SimRng) -> Vec<Outage> {
        let mut out = Vec::new();
        match self {
            FailureProcess::None => {}
            FailureProcess::Fixed {
                nodes: ns,
                at,
                back,
            } => {
                for &n in ns {
                    if n < nodes && *at < horizon {
                        out.push(Outage {
                            node: n,
                            down: *at,
                            up: *back,
                        });
                    }
                }
            }
            FailureProcess::Poisson { mtbf, repair } => {
                for n in 0..nodes {
                    let mut t = 0.0;
                    loop {
                        t += exponential(rng, *mtbf);
                        if t >= horizon {
                            break;
                        }
                        out.push(Outage {
                            node: n,
                            down: t,
                            up: t + repair,
                        });
                        t += repair;
                    }
                }
            }
            FailureProcess::Trace { outages, .. } => {
                out.extend(
                    outages
                        .iter()
                        .filter(|o| o.node < nodes && o.down < horizon),
                );
            }
        }
        out.sort_by(|a, b| a.down.total_cmp(&b.down).then(a.node.cmp(&b.node)));
        out
    }

    /// A one-line description for tables.
    pub(crate) fn describe(&self) -> String {
        match self {
            FailureProcess::None => "none".into(),
            FailureProcess::Fixed { nodes, at, back } => {
                format!("fixed(nodes={nodes:?},at={at},back={back})")
            }
            FailureProcess::Poisson { mtbf, repair } => {
                format!("poisson(mtbf={mtbf},repair={repair})")
            }
            FailureProcess::Trace { file, outages } => {
                format!("trace({file},{} outages)", outages.len())
            }
        }
    }
}

/// An exponential draw with the given mean (inverse transform).
pub fn exponential(rng: &mut SimRng, mean: f64) -> f64 {
    let u: f64 = rng.random();
    -mean * (1.0 - u).ln()
}

/// Most rows of a failure trace.
pub(crate) const MAX_TRACE_ROWS: usize = 1_000_000;

/// Reads a failure trace: a CSV file with a header `time,node,down_for`
/// (seconds, node index, seconds; `inf` for never back).
#[cfg(test)]
pub(crate) fn read_trace(path: &Path) -> Result<Vec<Outage>> {
    Ok(read_trace_rows(path)?.into_iter().map(|(_, o)| o).collect())
}

/// [`read_trace`] with the 1-based line of each outage (for errors that
/// point at a row, e.g. a node that does not exist).
pub(crate) fn read_trace_rows(path: &Path) -> Result<Vec<(usize, Outage)>> {
    let text = crate::data::files::read_maybe_gz(path)
        .with_context(|| format!("cannot read failure trace {}", path.display()))?;
    let text = String::from_utf8(text)
        .with_context(|| format!("failure trace {} is not UTF-8 text", path.display()))?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        bail!("failure trace {} is empty", path.display());
    };
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    if cols != ["time", "node", "down_for"] {
        bail!(
            "failure trace {}: the header must be `time,node,down_for`, found `{header}`",
            path.display()
        );
    }
    let mut out = Vec::new();
    for (i, line) in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let bad = |what: &str| {
            anyhow::anyhow!(
                "failure trace {} line {}: {what} (expected `time,node,down_for`, e.g. `10.0,0,5.0`)",
                path.display(),
                i + 1
            )
        };
        if f.len() != 3 {
            return Err(bad(&format!("{} fields", f.len())));
        }
        let time: f64 = f[0].parse().map_err(|_| bad("time is not a number"))?;
        let node: usize = f[1]
            .parse()
            .map_err(|_| bad("node is not a whole number"))?;
        let down_for: f64 = f[2].parse().map_err(|_| bad("down_for is not a number"))?;
        if !(time >= 0.0 && time.is_finite()) || down_for.is_nan() || down_for < 0.0 {
            return Err(bad("time must be finite and ≥ 0, down_for ≥ 0"));
        }
        if out.len() == MAX_TRACE_ROWS {
            return Err(bad(&format!(
                "more than the limit of {MAX_TRACE_ROWS} outages"
            )));
        }
        out.push((
            i + 1,
            Outage {
                node,
                down: time,
                up: time + down_for,
            },
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, stream};

    #[test]
    fn fixed_and_poisson() {
        let mut rng = stream(1, Purpose::FailureTime, 0, 0);
        let f = FailureProcess::Fixed {
            nodes: vec![0, 5],
            at: 10.0,
            back: 15.0,
        };
        let o = f.outages(3, 100.0, &mut rng);
        assert_eq!(
            o,
            vec![Outage {
                node: 0,
                down: 10.0,
                up: 15.0
            }]
        );
        // Poisson: the mean number of failures of one node over a long
        // horizon is horizon / (mtbf + repair).
        let p = FailureProcess::Poisson {
            mtbf: 10.0,
            repair: 0.0,
        };
        let o = p.outages(1, 100_000.0, &mut rng);
        let n = o.len() as f64;
        // Poisson count: sd = √10000 = 100; allow 4 sd.
        assert!((n - 10_000.0).abs() < 400.0, "{n}");
        assert!(o.windows(2).all(|w| w[0].down <= w[1].down));
    }

    #[test]
    fn trace_errors_name_the_line() {
        let dir = std::env::temp_dir().join(format!("scarsim-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.csv");
        std::fs::write(&p, "time,node,down_for\n1.0,0,2.0\n3.0,x,1\n").unwrap();
        let e = read_trace(&p).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("node"), "{e}");
        std::fs::write(&p, "time,node,down_for\n1.0,0,2.0\n4,1,inf\n").unwrap();
        let o = read_trace(&p).unwrap();
        assert_eq!(o.len(), 2);
        assert_eq!(o[1].up, f64::INFINITY);
        std::fs::remove_dir_all(&dir).ok();
    }
}
