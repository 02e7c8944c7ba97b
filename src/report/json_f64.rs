//! JSON for floating-point fields that may be NaN or infinite (JSON has no
//! such numbers): they are written as `null` and read back as NaN. Finite
//! values round-trip exactly (serde_json's `float_roundtrip`).

use serde::{Deserialize, Deserializer, Serializer};

/// `#[serde(with = "crate::report::json_f64")]` for an `f64` field.
pub(crate) fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

/// Reads a number or `null` (NaN).
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The same for `Vec<f64>` fields: `#[serde(with = "crate::report::json_f64::vec")]`.
pub(crate) mod vec {
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes each element as a number or `null`.
    pub(crate) fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for x in v {
            seq.serialize_element(&x.is_finite().then_some(*x))?;
        }
        seq.end()
    }

    /// Reads numbers, `null` as NaN.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Ok(Vec::<Option<f64>>::deserialize(d)?
            .into_iter()
            .map(|x| x.unwrap_or(f64::NAN))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    struct T {
        #[serde(with = "super")]
        a: f64,
        #[serde(with = "super::vec")]
        b: Vec<f64>,
    }

    #[test]
    fn nan_round_trips_as_null() {
        let t = T {
            a: f64::NAN,
            b: vec![0.1, f64::INFINITY, 2.5],
        };
        let j = serde_json::to_string(&t).unwrap();
        assert_eq!(j, r#"{"a":null,"b":[0.1,null,2.5]}"#);
        let back: T = serde_json::from_str(&j).unwrap();
        assert!(back.a.is_nan() && back.b[1].is_nan() && back.b[0] == 0.1);
    }
}
