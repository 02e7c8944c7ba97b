//! Deterministic synthetic stand-ins with the shapes and rough statistics of
//! the real datasets, so that every scenario runs on a fresh machine.
//!
//! They are generated from the scenario seed; `scale` shrinks the number of
//! rows (1.0 = the real size). They are *stand-ins*: the numbers they produce
//! show the mechanisms, not the paper's values, and every output is labelled
//! `synthetic`.

use rand::RngExt;
use rand_distr::{Distribution, Normal};

use super::{Classification, DatasetName, Provenance};
use crate::rng::{Purpose, SimRng, stream};

/// Rows of the real MNIST training set.
pub(crate) const MNIST_ROWS: usize = 60_000;
/// Rows of the real Covertype file.
pub(crate) const COVTYPE_ROWS: usize = 581_012;

/// Number of rows of a stand-in at `scale` (at least 100).
pub(crate) fn scaled_rows(real_rows: usize, scale: f64) -> usize {
    ((real_rows as f64 * scale).round() as usize).max(100)
}

/// MNIST-like digits: 28×28 images with integer intensities 0..=255, 10
/// classes, about 19% non-zero pixels (as real MNIST).
///
/// Each class has a prototype made of three thick random strokes; an example
/// is its class prototype shifted by up to ±2 pixels, with each stroke's ink
/// jittered, plus with probability 1/2 a random distractor stroke. A linear
/// classifier separates the classes well but not perfectly, like real MNIST.
pub fn mnist_like(seed: u64, scale: f64) -> Classification {
    const SIDE: usize = 28;
    const PIXELS: usize = SIDE * SIDE;
    let rows = scaled_rows(MNIST_ROWS, scale);
    let mut proto_rng = stream(seed, Purpose::SyntheticData, 0, 1);
    // Class prototypes: three strokes each, endpoints in the central area.
    let protos: Vec<[Stroke; 3]> = (0..10)
        .map(|_| std::array::from_fn(|_| Stroke::random(&mut proto_rng, 5.0, 22.0)))
        .collect();
    let mut x = vec![0f32; rows * PIXELS];
    let mut y = vec![0u8; rows];
    // Rows are generated in fixed chunks, each from its own stream, so the
    // result does not depend on how the work is split.
    const CHUNK: usize = 1024;
    x.chunks_mut(CHUNK * PIXELS)
        .zip(y.chunks_mut(CHUNK))
        .enumerate()
        .for_each(|(c, (xs, ys))| {
            let mut rng = stream(seed, Purpose::SyntheticData, 1, c as u64);
            for (img, label) in xs.chunks_mut(PIXELS).zip(ys.iter_mut()) {
                let class = rng.random_range(0..10usize);
                *label = class as u8;
                let dx = rng.random_range(-2i32..=2) as f32;
                let dy = rng.random_range(-2i32..=2) as f32;
                let mut strokes: Vec<Stroke> = protos[class]
                    .iter()
                    .map(|s| s.jittered(&mut rng, dx, dy))
                    .collect();
                if rng.random::<f32>() < 0.5 {
                    strokes.push(Stroke::random(&mut rng, 4.0, 23.0));
                }
                let ink = rng.random_range(0.75f32..1.0);
                for (p, v) in img.iter_mut().enumerate() {
                    let (px, py) = ((p % SIDE) as f32, (p / SIDE) as f32);
                    let mut best = f32::INFINITY;
                    for s in &strokes {
                        best = best.min(s.distance(px, py));
                    }
                    // Thick pen: full ink within 1 px, fading to zero at 2.2 px.
                    let t = ((2.2 - best) / 1.2).clamp(0.0, 1.0);
                    if t > 0.0 {
                        *v = (255.0 * ink * t).round();
                    }
                }
            }
        });
    Classification {
        name: DatasetName::Mnist,
        rows,
        features: PIXELS,
        classes: 10,
        x,
        y,
        provenance: Provenance::Synthetic {
            description: format!(
                "MNIST-like stand-in: {rows} generated 28x28 stroke digits (seed {seed})"
            ),
            scale,
        },
    }
}

/// A pen stroke: a line segment in pixel coordinates.
#[derive(Clone, Copy, Debug)]
struct Stroke {
    a: (f32, f32),
    b: (f32, f32),
}

impl Stroke {
    fn random(rng: &mut SimRng, lo: f32, hi: f32) -> Stroke {
        let mut p = || (rng.random_range(lo..hi), rng.random_range(lo..hi));
        Stroke { a: p(), b: p() }
    }

    fn jittered(&self, rng: &mut SimRng, dx: f32, dy: f32) -> Stroke {
        let mut j = || rng.random_range(-1.5f32..1.5);
        Stroke {
            a: (self.a.0 + dx + j(), self.a.1 + dy + j()),
            b: (self.b.0 + dx + j(), self.b.1 + dy + j()),
        }
    }

    fn distance(&self, px: f32, py: f32) -> f32 {
        let (ax, ay) = self.a;
        let (bx, by) = self.b;
        let (vx, vy) = (bx - ax, by - ay);
        let len2 = vx * vx + vy * vy;
        let t = if len2 > 0.0 {
            (((px - ax) * vx + (py - ay) * vy) / len2).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let (cx, cy) = (ax + t * vx - px, ay + t * vy - py);
        (cx * cx + cy * cy).sqrt()
    }
}

/// Class priors of the real Covertype file (cover types 1..=7).
const COVTYPE_PRIOR: [f64; 7] = [0.3646, 0.4876, 0.0615, 0.0047, 0.0163, 0.0299, 0.0353];

/// Per-class mean and standard deviation of the 10 quantitative Covertype
/// columns (elevation, aspect, slope, horizontal and vertical distance to
/// hydrology, distance to roadways, three hillshades, distance to fire
/// points), measured on the real file and rounded.
const COVTYPE_MOMENTS: [[(f32, f32); 10]; 7] = [
    [
        (3129., 158.),
        (156., 117.),
        (13., 7.),
        (271., 217.),
        (42., 57.),
        (2615., 1498.),
        (212., 25.),
        (223., 18.),
        (144., 36.),
        (2009., 1235.),
    ],
    [
        (2921., 187.),
        (152., 108.),
        (14., 7.),
        (280., 210.),
        (46., 57.),
        (2430., 1619.),
        (214., 25.),
        (225., 19.),
        (143., 36.),
        (2168., 1424.),
    ],
    [
        (2395., 197.),
        (176., 108.),
        (21., 9.),
        (210., 142.),
        (62., 59.),
        (944., 615.),
        (202., 41.),
        (216., 28.),
        (140., 52.),
        (911., 527.),
    ],
    [
        (2224., 103.),
        (137., 87.),
        (19., 9.),
        (107., 140.),
        (41., 59.),
        (914., 366.),
        (228., 24.),
        (217., 21.),
        (111., 49.),
        (859., 481.),
    ],
    [
        (2787., 97.),
        (139., 92.),
        (17., 8.),
        (212., 179.),
        (51., 58.),
        (1350., 1045.),
        (223., 23.),
        (219., 25.),
        (122., 49.),
        (1578., 996.),
    ],
    [
        (2419., 189.),
        (181., 134.),
        (19., 8.),
        (160., 124.),
        (45., 47.),
        (1037., 571.),
        (193., 34.),
        (210., 24.),
        (148., 45.),
        (1055., 576.),
    ],
    [
        (3362., 107.),
        (153., 111.),
        (14., 7.),
        (357., 295.),
        (69., 80.),
        (2738., 1201.),
        (217., 23.),
        (222., 20.),
        (135., 39.),
        (2070., 1087.),
    ],
];

/// Valid range of each quantitative column (values are clipped into it).
const COVTYPE_RANGE: [(f32, f32); 10] = [
    (1859., 3858.),
    (0., 360.),
    (0., 66.),
    (0., 1397.),
    (-173., 601.),
    (0., 7117.),
    (0., 254.),
    (0., 254.),
    (0., 254.),
    (0., 7173.),
];

/// Probability that a stand-in row's features are drawn as if it were of a
/// random other class (calibrated so MLR needs about as many iterations as on
/// the real file to reach the Appendix D criterion).
const COVTYPE_CONFUSION: f64 = 0.1;

/// Per-class probability of each of the 4 wilderness areas (real file).
const COVTYPE_WILDERNESS: [[f64; 4]; 7] = [
    [0.499, 0.088, 0.413, 0.0],
    [0.516, 0.032, 0.442, 0.011],
    [0.0, 0.0, 0.4, 0.6],
    [0.0, 0.0, 0.0, 1.0],
    [0.398, 0.0, 0.602, 0.0],
    [0.0, 0.0, 0.439, 0.561],
    [0.249, 0.112, 0.639, 0.0],
];

/// Number of soil types per class that carry most of the mass in the real
/// file, as (soil index 0..40, weight); the rest of the mass is spread evenly.
const COVTYPE_SOIL: [&[(usize, f64)]; 7] = [
    &[
        (21, 0.122),
        (22, 0.168),
        (23, 0.053),
        (28, 0.198),
        (30, 0.056),
        (31, 0.101),
        (32, 0.086),
        (37, 0.041),
        (38, 0.037),
    ],
    &[
        (9, 0.038),
        (11, 0.096),
        (12, 0.047),
        (22, 0.073),
        (28, 0.252),
        (29, 0.071),
        (30, 0.047),
        (31, 0.104),
        (32, 0.089),
    ],
    &[
        (0, 0.059),
        (1, 0.14),
        (2, 0.067),
        (3, 0.21),
        (5, 0.112),
        (9, 0.323),
        (10, 0.038),
    ],
    &[
        (0, 0.065),
        (2, 0.371),
        (3, 0.061),
        (5, 0.116),
        (9, 0.082),
        (13, 0.056),
        (16, 0.159),
    ],
    &[
        (3, 0.062),
        (10, 0.072),
        (12, 0.139),
        (16, 0.063),
        (22, 0.074),
        (28, 0.119),
        (29, 0.222),
        (32, 0.055),
    ],
    &[
        (0, 0.043),
        (1, 0.075),
        (3, 0.036),
        (5, 0.078),
        (9, 0.51),
        (16, 0.041),
        (32, 0.031),
    ],
    &[
        (22, 0.034),
        (28, 0.039),
        (31, 0.041),
        (34, 0.046),
        (37, 0.298),
        (38, 0.271),
        (39, 0.175),
    ],
];

fn categorical(rng: &mut SimRng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let mut u = rng.random::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if u < *w {
            return i;
        }
        u -= w;
    }
    weights.len() - 1
}

/// Covertype-like rows: 54 integer features (10 quantitative, 4 one-hot
/// wilderness areas, 40 one-hot soil types) and 7 classes, drawn from
/// class-conditional distributions whose priors, means, spreads and one-hot
/// frequencies were measured on the real file.
pub(crate) fn covtype_like(seed: u64, scale: f64) -> Classification {
    const F: usize = 54;
    let rows = scaled_rows(COVTYPE_ROWS, scale);
    let mut x = vec![0f32; rows * F];
    let mut y = vec![0u8; rows];
    let soil_weights: Vec<Vec<f64>> = COVTYPE_SOIL
        .iter()
        .map(|major| {
            let mass: f64 = major.iter().map(|(_, w)| w).sum();
            let mut w = vec![(1.0 - mass).max(0.0) / 40.0; 40];
            for (i, p) in major.iter() {
                w[*i] += p;
            }
            w
        })
        .collect();
    const CHUNK: usize = 4096;
    let std_normal = Normal::new(0.0f32, 1.0).expect("valid normal");
    x.chunks_mut(CHUNK * F)
        .zip(y.chunks_mut(CHUNK))
        .enumerate()
        .for_each(|(c, (xs, ys))| {
            let mut rng = stream(seed, Purpose::SyntheticData, 2, c as u64);
            for (row, label) in xs.chunks_mut(F).zip(ys.iter_mut()) {
                let class = categorical(&mut rng, &COVTYPE_PRIOR);
                *label = class as u8;
                // A share of rows look like another cover type (the real
                // classes overlap more than independent Gaussians would).
                let look = if rng.random::<f64>() < COVTYPE_CONFUSION {
                    categorical(&mut rng, &COVTYPE_PRIOR)
                } else {
                    class
                };
                for (j, &(mean, sd)) in COVTYPE_MOMENTS[look].iter().enumerate() {
                    let v = mean + sd * std_normal.sample(&mut rng);
                    let (lo, hi) = COVTYPE_RANGE[j];
                    row[j] = v.clamp(lo, hi).round();
                }
                let w = categorical(&mut rng, &COVTYPE_WILDERNESS[look]);
                row[10 + w] = 1.0;
                let s = categorical(&mut rng, &soil_weights[look]);
                row[14 + s] = 1.0;
            }
        });
    Classification {
        name: DatasetName::Covtype,
        rows,
        features: F,
        classes: 7,
        x,
        y,
        provenance: Provenance::Synthetic {
            description: format!(
                "Covertype-like stand-in: {rows} rows from class-conditional distributions fitted to the real file (seed {seed})"
            ),
            scale,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mnist_like_shape_density_and_determinism() {
        let a = mnist_like(3, 0.02);
        assert_eq!((a.rows, a.features, a.classes), (1200, 784, 10));
        a.validate().unwrap();
        let dens = a.density();
        assert!((0.08..0.35).contains(&dens), "density {dens}");
        assert!(
            a.x.iter()
                .all(|v| v.fract() == 0.0 && (0.0..=255.0).contains(v))
        );
        let b = mnist_like(3, 0.02);
        assert_eq!(a.x, b.x);
        assert_eq!(a.y, b.y);
        let c = mnist_like(4, 0.02);
        assert_ne!(a.x, c.x);
    }

    #[test]
    fn covtype_like_shape_and_one_hots() {
        let d = covtype_like(5, 0.002);
        assert_eq!((d.features, d.classes), (54, 7));
        d.validate().unwrap();
        for i in 0..d.rows {
            let r = d.row(i);
            assert_eq!(r[10..14].iter().sum::<f32>(), 1.0);
            assert_eq!(r[14..54].iter().sum::<f32>(), 1.0);
            assert!((1859.0..=3858.0).contains(&r[0]));
        }
        // Class 2 (lodgepole pine) is the most frequent, as in the real file.
        let mut counts = [0usize; 7];
        d.y.iter().for_each(|&c| counts[c as usize] += 1);
        assert_eq!(counts.iter().enumerate().max_by_key(|c| c.1).unwrap().0, 1);
    }
}
