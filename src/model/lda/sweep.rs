//! The Gibbs sweep of one run, document by document (the module docs of
//! [`super`] give the conditional).
//!
//! Per token: remove it from the counts, weigh every topic
//! ((n_dk + α)(n_wk + β))·1/(n_k + Vβ) (independent outputs, vectorised
//! across topics), total the weights with four accumulators ([`sum4`]),
//! scale the token's uniform number by the total and pick the first topic
//! whose prefix sum exceeds it, then add the token back under that topic.
//! The reciprocals 1/(n + Vβ) are read from a table computed once, which
//! holds exactly the quotients a division would give.

use super::Prior;

/// Sum with four independent accumulators (a fixed order, so deterministic;
/// shorter dependency chains than a left fold).
#[inline(always)]
pub(super) fn sum4(v: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let chunks = v.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        acc[0] += c[0];
        acc[1] += c[1];
        acc[2] += c[2];
        acc[3] += c[3];
    }
    let mut total = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for &x in rest {
        total += x;
    }
    total
}

/// The first t < K − 1 whose prefix sum of `weights` exceeds `u`, or K − 1.
/// The prefix sums are accumulated in topic order; since they never
/// decrease (non-negative weights, monotone rounding) the answer is the
/// number of t < K − 1 whose prefix sum is at most `u`, counted without
/// branches.
#[inline(always)]
pub(super) fn draw(weights: &[f64], u: f64) -> usize {
    let k = weights.len();
    let mut acc = 0.0;
    let mut new = 0usize;
    for &p in &weights[..k - 1] {
        acc += p;
        new += (acc <= u) as usize;
    }
    new
}

/// Tokens ahead whose word-topic rows are fetched into the cache.
const PREFETCH: usize = 4;

/// The Gibbs updates of one document's tokens in one run: `words` are the
/// word ids from its first token on (those past its end are only prefetched), `uniforms` their uniform numbers and `z` their topics; `doc` is
/// the document's n_dk, `word_topic` the run's n_wk (`[word][topic]`),
/// `total` its n_k, `inv_total` 1/(n_k + Vβ) and `inv_table[n]` = 1/(n + Vβ);
/// `weights` is scratch of K entries.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn sweep_doc_body(
    words: &[u32],
    uniforms: &[f64],
    z: &mut [u8],
    doc: &mut [u32],
    word_topic: &mut [u32],
    total: &mut [u32],
    inv_total: &mut [f64],
    weights: &mut [f64],
    inv_table: &[f64],
    prior: Prior,
) {
    let k = prior.topics;
    let (alpha, beta) = (prior.alpha, prior.beta);
    let doc = &mut doc[..k];
    let total = &mut total[..k];
    let inv_total = &mut inv_total[..k];
    let weights = &mut weights[..k];
    let n = z.len().min(uniforms.len());
    for (i, (zi, &r)) in z[..n].iter_mut().zip(uniforms).enumerate() {
        if let Some(&ahead) = words.get(i + PREFETCH) {
            let a = ahead as usize;
            super::lanes::prefetch(&word_topic[a * k..(a + 1) * k]);
        }
        let w = words[i] as usize;
        let nw = &mut word_topic[w * k..(w + 1) * k];
        let old = *zi as usize;
        doc[old] -= 1;
        nw[old] -= 1;
        total[old] -= 1;
        inv_total[old] = inv_table[total[old] as usize];
        // Counts are far below 2^31, so the i32 route converts exactly (and
        // vectorises).
        for (((p, &a), &b), &inv) in weights
            .iter_mut()
            .zip(doc.iter())
            .zip(nw.iter())
            .zip(inv_total.iter())
        {
            *p = ((a as i32 as f64 + alpha) * (b as i32 as f64 + beta)) * inv;
        }
        let u = r * sum4(weights);
        let new = draw(weights, u);
        *zi = new as u8;
        doc[new] += 1;
        nw[new] += 1;
        total[new] += 1;
        inv_total[new] = inv_table[total[new] as usize];
    }
}

crate::simd::kernel! {
    /// One document's Gibbs updates in one run ([`sweep_doc_body`]).
    #[allow(dead_code, clippy::too_many_arguments)]
    pub(super) fn sweep_doc, sweep_doc_at(
        words: &[u32],
        uniforms: &[f64],
        z: &mut [u8],
        doc: &mut [u32],
        word_topic: &mut [u32],
        total: &mut [u32],
        inv_total: &mut [f64],
        weights: &mut [f64],
        inv_table: &[f64],
        prior: Prior,
    ) = sweep_doc_body;
}
