//! Deterministic random streams.
//!
//! Every random draw in a simulation comes from a stream derived from
//! `(scenario seed, purpose, a, b)` — typically `a` is a trial index and `b` a
//! sub-index (a worker, an iteration). Streams are independent of thread count
//! and of the order in which work is scheduled, which is what makes results
//! byte-identical on any machine.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

/// The generator used everywhere in the simulator.
pub(crate) type SimRng = Pcg64Mcg;

/// What a stream is used for. Distinct purposes never share random numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum Purpose {
    /// Minibatch order of a training run (shared by all trials of a point, or per trial).
    DataOrder = 1,
    /// Randomness inside one iteration of a stochastic algorithm (e.g. a Gibbs sweep).
    Iteration = 2,
    /// The iteration at which a trial's failure strikes.
    FailureTime = 3,
    /// Which blocks (or PS nodes) a failure takes down.
    LostBlocks = 4,
    /// Random placement of blocks on parameter-server nodes.
    Placement = 5,
    /// Random block selection of the `random` partial-checkpoint selector.
    CheckpointSelection = 6,
    /// Generation of a synthetic stand-in dataset.
    SyntheticData = 7,
    /// Random model initialisation (e.g. MF factors drawn from U[0, 1)).
    ModelInit = 8,
    /// Perturbations injected by perturbation experiments.
    Perturbation = 9,
    /// Worker compute and communication delays in wall-clock simulations.
    Delay = 10,
    /// Anything a model or experiment needs that has no purpose of its own.
    Other = 11,
}

/// SplitMix64 finaliser: a bijective mixing of 64 bits (Steele et al., 2014).
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Derives a 64-bit stream key from `(seed, purpose, a, b)`.
pub(crate) fn stream_key(seed: u64, purpose: Purpose, a: u64, b: u64) -> u64 {
    let mut h = mix64(seed ^ 0x5CA5_17A1_0000_0000);
    h = mix64(h ^ (purpose as u64));
    h = mix64(h ^ a);
    mix64(h ^ b.rotate_left(17))
}

/// Seed of training run `run`'s own randomness (its minibatch order, and
/// gradient noise where a model has it): every kind derives a run's
/// [`crate::model::IterCtx::run_seed`] here, so trial `t` of any kind draws
/// the same minibatches (common random numbers across points and series).
pub(crate) fn run_seed(seed: u64, run: u64) -> u64 {
    stream_key(seed, Purpose::DataOrder, run, 0)
}

/// A generator for stream `(seed, purpose, a, b)`.
pub fn stream(seed: u64, purpose: Purpose, a: u64, b: u64) -> SimRng {
    let key = stream_key(seed, purpose, a, b);
    // Pcg64Mcg takes a 128-bit state; expand the key deterministically.
    let hi = mix64(key ^ 0xA5A5_A5A5_A5A5_A5A5);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&key.to_le_bytes());
    bytes[8..].copy_from_slice(&hi.to_le_bytes());
    SimRng::from_seed(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(stream(7, Purpose::FailureTime, 3, 0), |r, _| {
                Some(r.random::<u64>())
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(stream(7, Purpose::FailureTime, 3, 0), |r, _| {
                Some(r.random::<u64>())
            })
            .collect();
        assert_eq!(a, b);
        let c: u64 = stream(7, Purpose::FailureTime, 4, 0).random();
        let d: u64 = stream(7, Purpose::LostBlocks, 3, 0).random();
        let e: u64 = stream(8, Purpose::FailureTime, 3, 0).random();
        assert_ne!(a[0], c);
        assert_ne!(a[0], d);
        assert_ne!(a[0], e);
    }

    #[test]
    fn a_and_b_are_not_interchangeable() {
        assert_ne!(
            stream_key(1, Purpose::Other, 2, 3),
            stream_key(1, Purpose::Other, 3, 2)
        );
    }
}
