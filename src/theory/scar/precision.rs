//! Reduced precision (SCAR Example 2.1): storing a value with a p-bit
//! mantissa is a perturbation `δ = round_p(y) − y` with `|δ| ≤ 2^{−p}|y|`
//! under round-to-nearest (the paper's bound, `2^{−(p−1)}|y|`, also covers
//! truncation).

/// Rounds `v` to the nearest `f64` whose significand has `mantissa_bits`
/// significant bits (the leading bit included, so 53 is `f64` itself and 24
/// is `f32`), ties to even. Zero, infinities and NaN are returned unchanged;
/// subnormal inputs are rounded at the same bit positions as the smallest
/// normal numbers. `mantissa_bits` is clamped to 1..=53.
pub(crate) fn round_to_mantissa(v: f64, mantissa_bits: u32) -> f64 {
    let p = mantissa_bits.clamp(1, 53);
    if p == 53 || v == 0.0 || !v.is_finite() {
        return v;
    }
    let drop = 53 - p; // low fraction bits to clear, 1..=52
    let bits = v.to_bits();
    let mask = (1u64 << drop) - 1;
    let half = 1u64 << (drop - 1);
    let rest = bits & mask;
    let kept = bits & !mask;
    let odd = (kept >> drop) & 1 == 1;
    let up = rest > half || (rest == half && odd);
    // Carrying into the exponent field is exactly the right result (the
    // significand overflows to the next power of two).
    f64::from_bits(if up { kept + (1u64 << drop) } else { kept })
}

/// Rounds every value of `values` in place to `mantissa_bits` bits (see
/// [`round_to_mantissa`]).
pub(crate) fn round_all(values: &mut [f64], mantissa_bits: u32) {
    for v in values {
        *v = round_to_mantissa(*v, mantissa_bits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, stream};
    use rand::RngExt;

    #[test]
    fn by_hand() {
        // 1 + 2^-10 needs 11 bits: kept at p = 11, rounded away below.
        let v = 1.0 + 2f64.powi(-10);
        assert_eq!(round_to_mantissa(v, 11), v);
        assert_eq!(round_to_mantissa(v, 8), 1.0);
        // 1.75 = 1.11b: p = 2 is a tie between 1.5 and 2.0 -> even (2.0).
        assert_eq!(round_to_mantissa(1.75, 2), 2.0);
        assert_eq!(round_to_mantissa(1.25, 2), 1.0);
        assert_eq!(round_to_mantissa(-1.75, 2), -2.0);
        assert_eq!(round_to_mantissa(0.0, 4), 0.0);
        assert_eq!(round_to_mantissa(3.0, 53), 3.0);
        assert!(round_to_mantissa(f64::NAN, 4).is_nan());
    }

    /// p = 24 is exactly a cast to `f32` (round to nearest, ties to even).
    #[test]
    fn p24_matches_f32() {
        let mut rng = stream(1, Purpose::Other, 0, 0);
        for _ in 0..10_000 {
            let v: f64 = (rng.random::<f64>() - 0.5) * 10f64.powi(rng.random_range(-20..20));
            assert_eq!(round_to_mantissa(v, 24), v as f32 as f64, "{v}");
        }
    }

    /// |round_p(y) − y| ≤ 2^{−p}|y| (so Example 2.1's 2^{−(p−1)}|y| holds).
    #[test]
    fn error_is_within_half_an_ulp() {
        let mut rng = stream(2, Purpose::Other, 0, 0);
        for p in [2u32, 5, 11, 24, 40, 52] {
            for _ in 0..2000 {
                let v: f64 = (rng.random::<f64>() - 0.5) * 1e3;
                let err = (round_to_mantissa(v, p) - v).abs();
                assert!(err <= v.abs() * 2f64.powi(-(p as i32)), "p {p} v {v}");
            }
        }
    }
}
