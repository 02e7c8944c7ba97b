//! A cohort of LDA runs stepped as SIMD lanes ("structure of arrays across
//! trials").
//!
//! The runs of a cohort sample the same corpus with the same uniform number
//! per token (common random numbers, see the module docs of [`super`]), so at
//! every token they read the same document d and word w and differ only in
//! their counts. Up to [`LANES`] runs form a group: their topic totals and
//! the current document's n_dk + α are laid out `[topic][lane]`, their
//! word-topic counts `[word][topic][lane]`, and one pass over the corpus
//! computes every lane's conditional with vector operations across lanes.
//! Lane s does exactly the scalar computation of its run — the weights
//! ((n_dk + α)(n_wk + β))·1/(n_k + Vβ) topic by topic, the same
//! four-accumulator total, the prefix sum over topics in topic order — so a
//! run's bits do not depend on the cohort it is stepped in, nor on the lane
//! it occupies. Nothing is ever reduced across lanes; lanes past the active
//! runs compute on zero counts and are never written back.
//!
//! The draw itself is branch-free: the prefix sums acc_t are non-decreasing
//! (the weights are non-negative and rounding is monotone), so the first t
//! with acc_t > u, or K − 1 if there is none, is the number of t < K − 1 with
//! acc_t ≤ u.
//!
//! Memory: a group's word-topic counts are eight times one run's and do not
//! fit in the core's cache, so each word's row is stored in the narrowest
//! unsigned type that holds the word's corpus frequency (no n_wk can exceed
//! it): `u8` for the many rare words, `u16` for most others, `u32` for the
//! few most frequent ones ([`RowClasses`]). Rows of the next tokens are
//! prefetched.

use super::Prior;
use crate::model::IterCtx;

mod groups;

pub(super) use groups::{SweepInput, sweep_groups};

/// Runs per group: eight f64 lanes fill one AVX-512 register (two AVX2 ones).
pub const LANES: usize = 8;

/// Tokens ahead whose word-topic rows are fetched into the cache.
const PREFETCH: usize = 4;

/// Which table holds each word's stacked row: the narrowest count type that
/// holds the word's corpus frequency.
#[derive(Clone, Debug, Default)]
pub(super) struct RowClasses {
    /// Per word: class (0 = `u8`, 1 = `u16`, 2 = `u32`) in the top two bits,
    /// the row's index in that class's table below.
    slot: Vec<u32>,
    /// Rows per class.
    rows: [usize; 3],
}

const CLASS_SHIFT: u32 = 30;
const INDEX_MASK: u32 = (1 << CLASS_SHIFT) - 1;

impl RowClasses {
    /// Classes for words with these corpus frequencies.
    pub(super) fn new(word_counts: &[usize]) -> RowClasses {
        assert!(
            word_counts.len() <= INDEX_MASK as usize,
            "vocabulary too large"
        );
        let mut rows = [0usize; 3];
        let slot = word_counts
            .iter()
            .map(|&n| {
                let class = if n <= u8::MAX as usize {
                    0
                } else if n <= u16::MAX as usize {
                    1
                } else {
                    2
                };
                let idx = rows[class];
                rows[class] += 1;
                ((class as u32) << CLASS_SHIFT) | idx as u32
            })
            .collect();
        RowClasses { slot, rows }
    }

    #[inline(always)]
    fn of(&self, w: usize) -> (u32, usize) {
        let s = self.slot[w];
        (s >> CLASS_SHIFT, (s & INDEX_MASK) as usize)
    }
}

/// A count type of the stacked word-topic rows.
trait Count: Copy + Default {
    fn to_f64(self) -> f64;
    fn inc(&mut self);
    fn dec(&mut self);
    /// `n`, which fits because no n_wk exceeds its word's frequency.
    fn narrow(n: u32) -> Self;
    fn widen(self) -> u32;
}

macro_rules! count {
    ($t:ty) => {
        impl Count for $t {
            #[inline(always)]
            fn to_f64(self) -> f64 {
                // Counts are far below 2^31: the i32 route converts exactly
                // and vectorises on every level.
                self as i32 as f64
            }
            #[inline(always)]
            fn inc(&mut self) {
                *self += 1;
            }
            #[inline(always)]
            fn dec(&mut self) {
                *self -= 1;
            }
            #[inline(always)]
            fn narrow(n: u32) -> Self {
                <$t>::try_from(n).expect("a word-topic count exceeds its word's frequency")
            }
            #[inline(always)]
            fn widen(self) -> u32 {
                self as u32
            }
        }
    };
}
count!(u8);
count!(u16);
count!(u32);

/// The tables of one group, reused across iterations.
#[derive(Default)]
struct GroupBuffers {
    /// n_wk of the words of class `u8`, `[row][topic][lane]`.
    rows8: Vec<[u8; LANES]>,
    /// n_wk of the words of class `u16`.
    rows16: Vec<[u16; LANES]>,
    /// n_wk of the words of class `u32`.
    rows32: Vec<[u32; LANES]>,
    /// n_k, `[topic][lane]`.
    total: Vec<[u32; LANES]>,
    /// 1/(n_k + Vβ), `[topic][lane]`.
    inv_total: Vec<[f64; LANES]>,
    /// n_dk of the current document, `[topic][lane]`, as f64: whole numbers
    /// (exact), so the weight's n_dk + α is the scalar code's bits without a
    /// conversion per topic and token.
    nd: Vec<[f64; LANES]>,
    /// Prefix sums of one token's weights, `[topic][lane]`.
    prefix: Vec<[f64; LANES]>,
    /// Each lane's uniform numbers of the current document's tokens,
    /// `[token][lane]`.
    uniforms: Vec<[f64; LANES]>,
}

/// The buffers of the groups of one pass, reused across iterations.
#[derive(Default)]
pub(super) struct LaneBuffers {
    groups: Vec<GroupBuffers>,
    /// The current document's uniform numbers of each distinct
    /// (run seed, iteration) among the members, in [`LaneBuffers::ctxs`]'s order.
    streams: Vec<Vec<f64>>,
    /// The distinct contexts of the members of the current pass.
    ctxs: Vec<IterCtx>,
}

impl LaneBuffers {}

/// Asks the CPU to bring `data` into the cache (no effect on results).
#[inline(always)]
pub(super) fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        let start = data.as_ptr() as *const i8;
        let bytes = std::mem::size_of_val(data);
        let mut off = 0;
        while off < bytes {
            // SAFETY: prefetching never faults; the address is inside `data`.
            #[allow(unused_unsafe)]
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    start.wrapping_add(off),
                );
            }
            off += 64;
        }
        if bytes > 0 {
            // The last line, when `data` does not start on a line boundary.
            #[allow(unused_unsafe)]
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    start.wrapping_add(bytes - 1),
                );
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// One group's slices for one document: `z[s]` are lane s's topics of the
/// document's tokens (empty past `lanes`), `nd` every lane's n_dk of the
/// document, the rest the group's tables (see [`GroupBuffers`]).
pub(super) struct GroupDoc<'a> {
    pub(crate) z: [&'a mut [u8]; LANES],
    pub(crate) lanes: usize,
    pub(crate) nd: &'a mut [[f64; LANES]],
    pub(crate) rows8: &'a mut [[u8; LANES]],
    pub(crate) rows16: &'a mut [[u16; LANES]],
    pub(crate) rows32: &'a mut [[u32; LANES]],
    pub(crate) total: &'a mut [[u32; LANES]],
    pub(crate) inv_total: &'a mut [[f64; LANES]],
    pub(crate) prefix: &'a mut [[f64; LANES]],
    pub(crate) uniforms: &'a [[f64; LANES]],
}

/// A group's state the token updates of one document share. `z[s]` points
/// at lane s's topics of the document's tokens, each checked to be below K
/// (and `nd`, `total`, `inv_total`, `prefix` and every row hold K entries),
/// so the hot loop indexes them without bounds checks.
struct Group<'a> {
    z: [*mut u8; LANES],
    nd: &'a mut [[f64; LANES]],
    total: &'a mut [[u32; LANES]],
    inv_total: &'a mut [[f64; LANES]],
    prefix: &'a mut [[f64; LANES]],
    uniforms: &'a [[f64; LANES]],
    rows8: &'a mut [[u8; LANES]],
    rows16: &'a mut [[u16; LANES]],
    rows32: &'a mut [[u32; LANES]],
    inv_table: &'a [f64],
    prior: Prior,
    lanes: usize,
}

/// A group's count tables as raw pointers to their first entry, for the
/// per-lane count updates: held in registers, so that a store through one
/// table does not make the compiler reload the others' addresses, and
/// indexed by `t·LANES + s` (one index for every table, scaled by the
/// entry's size).
struct Counts<C> {
    z: [*mut u8; LANES],
    nd: *mut f64,
    row: *mut C,
    total: *mut u32,
    inv_total: *mut f64,
    inv_table: *const f64,
    inv_len: usize,
}

impl<C: Count> Counts<C> {
    /// Moves token `i` of lane `s` out of its topic (`ADD` false) or into
    /// topic `t` (`ADD` true).
    ///
    /// # Safety
    /// `i` is below the document's length and `z[s]` points at lane s's
    /// topics of it, each below K; `s` is a lane of the group, `t` below K;
    /// the tables hold K·[`LANES`] entries.
    #[inline(always)]
    unsafe fn shift<const ADD: bool>(&self, i: usize, s: usize, t: usize) {
        // SAFETY: the caller's contract.
        unsafe {
            let zp = self.z[s].add(i);
            let t = if ADD {
                *zp = t as u8;
                t
            } else {
                *zp as usize
            };
            let at = t * LANES + s;
            let n = self.total.add(at);
            if ADD {
                *self.nd.add(at) += 1.0;
                (*self.row.add(at)).inc();
                *n += 1;
            } else {
                *self.nd.add(at) -= 1.0;
                (*self.row.add(at)).dec();
                *n -= 1;
            }
            // A checked index: no n_k exceeds the corpus's token count.
            let n = *n as usize;
            assert!(n < self.inv_len, "a topic total exceeds the corpus");
            *self.inv_total.add(at) = *self.inv_table.add(n);
        }
    }
}

impl Group<'_> {
    /// The raw count tables of this group and its word's row `row`.
    #[inline(always)]
    fn counts<C: Count>(&mut self, row: &mut [[C; LANES]]) -> Counts<C> {
        Counts {
            z: self.z,
            nd: self.nd.as_mut_ptr().cast(),
            row: row.as_mut_ptr().cast(),
            total: self.total.as_mut_ptr().cast(),
            inv_total: self.inv_total.as_mut_ptr().cast(),
            inv_table: self.inv_table.as_ptr(),
            inv_len: self.inv_table.len(),
        }
    }

    /// The Gibbs update of token `i` of the document (lane s's uniform
    /// number `r[s]`) in every lane, with its word's stacked row `row` (K entries).
    ///
    /// # Safety
    /// `i` is below the document's length.
    // The loops over lanes and topics index several `[topic][lane]` tables
    // at once; plain index loops keep them one vector operation each.
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    unsafe fn token<C: Count>(&mut self, row: &mut [[C; LANES]], i: usize, r: [f64; LANES]) {
        let k = self.prior.topics;
        let (alpha, beta) = (self.prior.alpha, self.prior.beta);
        let row = &mut row[..k];
        let counts = self.counts(row);
        let full = self.lanes == LANES;
        // A full group's lanes in a loop of constant length (unrolled:
        // every lane's addresses are constant offsets of one index).
        if full {
            for s in 0..LANES {
                // SAFETY: `i` by the caller's contract, `s` a lane, the
                // tables K·LANES entries (checked by `lane_doc_body`).
                unsafe { counts.shift::<false>(i, s, 0) };
            }
        } else {
            for s in 0..self.lanes {
                // SAFETY: as above.
                unsafe { counts.shift::<false>(i, s, 0) };
            }
        }
        // Weights of every topic, the four-accumulator total (sum4) and the
        // running prefix sum, lane by lane in the scalar code's order.
        let nd = &self.nd[..k];
        let inv_total = &self.inv_total[..k];
        let prefix = &mut self.prefix[..k];
        let weight = |t: usize| {
            let (a, b, inv) = (&nd[t], &row[t], &inv_total[t]);
            let mut p = [0.0f64; LANES];
            for s in 0..LANES {
                p[s] = ((a[s] + alpha) * (b[s].to_f64() + beta)) * inv[s];
            }
            p
        };
        let chunks = k / 4;
        let mut acc4 = [[0.0f64; LANES]; 4];
        let mut run = [0.0f64; LANES];
        for c in 0..chunks {
            for j in 0..4 {
                let t = 4 * c + j;
                let p = weight(t);
                for s in 0..LANES {
                    acc4[j][s] += p[s];
                    run[s] += p[s];
                }
                prefix[t] = run;
            }
        }
        let mut sum = [0.0f64; LANES];
        for s in 0..LANES {
            sum[s] = (acc4[0][s] + acc4[1][s]) + (acc4[2][s] + acc4[3][s]);
        }
        for t in 4 * chunks..k {
            let p = weight(t);
            for s in 0..LANES {
                sum[s] += p[s];
                run[s] += p[s];
            }
            prefix[t] = run;
        }
        let mut u = [0.0f64; LANES];
        for s in 0..LANES {
            u[s] = r[s] * sum[s];
        }
        let new = count_at_most(&prefix[..k - 1], &u);
        // At most K − 1 comparisons hold, so each topic is below K.
        let top = (k - 1) as i32;
        let counts = self.counts(row);
        if full {
            for s in 0..LANES {
                // SAFETY: `i` by the caller's contract, `s` a lane, the
                // topic below K.
                unsafe { counts.shift::<true>(i, s, new[s].min(top) as usize) };
            }
        } else {
            for s in 0..self.lanes {
                // SAFETY: as above.
                unsafe { counts.shift::<true>(i, s, new[s].min(top) as usize) };
            }
        }
    }
}

/// Lane by lane, the number of `prefix[t]` (t in order) that are at most
/// `u`: the drawn topic of each lane (module docs).
///
/// Counted in f64 (exact for these small integers) in four accumulators,
/// unrolled by hand: a float sum in a fixed order keeps the compiler from
/// vectorising across topics (strided loads, gathers; integer counts, which
/// it may reorder, were vectorised that way and ran 12% slower), and
/// whole-array accumulators (no index computed at run time) stay in vector
/// registers, one compare and one masked add per topic. The counts are
/// returned as i32 (an f64 → u64 conversion per lane takes several
/// instructions below AVX-512), converted unchecked: two instructions per
/// lane where the saturating `as i32` took six.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn count_at_most(prefix: &[[f64; LANES]], u: &[f64; LANES]) -> [i32; LANES] {
    #[inline(always)]
    fn add(cnt: &mut [f64; LANES], pt: &[f64; LANES], u: &[f64; LANES]) {
        for s in 0..LANES {
            cnt[s] += if pt[s] <= u[s] { 1.0 } else { 0.0 };
        }
    }
    let mut c0 = [0.0f64; LANES];
    let mut c1 = [0.0f64; LANES];
    let mut c2 = [0.0f64; LANES];
    let mut c3 = [0.0f64; LANES];
    let chunks = prefix.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        add(&mut c0, &c[0], u);
        add(&mut c1, &c[1], u);
        add(&mut c2, &c[2], u);
        add(&mut c3, &c[3], u);
    }
    for pt in rest {
        add(&mut c0, pt, u);
    }
    let mut new = [0i32; LANES];
    for s in 0..LANES {
        let count = (c0[s] + c1[s]) + (c2[s] + c3[s]);
        // SAFETY: a count of at most `prefix.len()` ones, a whole number far
        // inside i32 (not NaN, not infinite). Unchecked, the conversion is
        // two instructions per lane (an extract and a convert); `as i32`
        // saturates, which took six per lane, on the draw's critical path.
        new[s] = unsafe { count.to_int_unchecked::<i32>() };
    }
    new
}

/// The Gibbs updates of one document's tokens for several groups of runs
/// (see the module docs), token by token so that the groups' dependency
/// chains overlap. `words` are the word ids from the document's first token
/// on (those past its end are only prefetched), `len` the number of its
/// tokens. With `SHARED`, `shared[..len]` are their uniform numbers, the
/// same in every lane of every group (a cohort of one data order at one
/// iteration); without, each group holds every lane's own.
/// `inv_table[n]` = 1/(n + Vβ).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn lane_doc_inner<const SHARED: bool>(
    words: &[u32],
    len: usize,
    shared: &[f64],
    groups: &mut [GroupDoc<'_>],
    classes: &RowClasses,
    inv_table: &[f64],
    prior: Prior,
) {
    let k = prior.topics;
    assert!(words.len() >= len);
    let shared = if SHARED { &shared[..len] } else { &[][..] };
    let mut gs: Vec<Group<'_>> = groups
        .iter_mut()
        .map(|gd| {
            assert!(gd.lanes <= LANES);
            assert!(
                gd.nd.len() >= k
                    && gd.total.len() >= k
                    && gd.inv_total.len() >= k
                    && gd.prefix.len() >= k
                    && (SHARED || gd.uniforms.len() >= len)
            );
            let mut ptrs = [std::ptr::null_mut(); LANES];
            for (p, zs) in ptrs.iter_mut().zip(gd.z.iter_mut()).take(gd.lanes) {
                assert!(
                    zs.len() >= len,
                    "a lane's topics are shorter than the document"
                );
                // The largest topic (a maximum vectorises; `all` with its
                // early exit ran byte by byte, 3% of an LDA panel).
                let top = zs[..len].iter().fold(0u8, |m, &t| m.max(t));
                assert!(
                    len == 0 || (top as usize) < k,
                    "a token's topic is not below K = {k}"
                );
                *p = zs.as_mut_ptr();
            }
            Group {
                z: ptrs,
                nd: &mut *gd.nd,
                total: &mut *gd.total,
                inv_total: &mut *gd.inv_total,
                prefix: &mut *gd.prefix,
                uniforms: gd.uniforms,
                rows8: &mut *gd.rows8,
                rows16: &mut *gd.rows16,
                rows32: &mut *gd.rows32,
                inv_table,
                prior,
                lanes: gd.lanes,
            }
        })
        .collect();
    for i in 0..len {
        if let Some(&ahead) = words.get(i + PREFETCH) {
            let (class, j) = classes.of(ahead as usize);
            for g in gs.iter() {
                match class {
                    0 => prefetch(&g.rows8[j * k..(j + 1) * k]),
                    1 => prefetch(&g.rows16[j * k..(j + 1) * k]),
                    _ => prefetch(&g.rows32[j * k..(j + 1) * k]),
                }
            }
        }
        let (class, j) = classes.of(words[i] as usize);
        let one = if SHARED { shared[i] } else { 0.0 };
        for g in gs.iter_mut() {
            // SAFETY: `i` is below the document's length (`len`, at most
            // the group's uniform numbers when there are no shared ones,
            // checked above), and every lane's topics were checked above
            // (updates keep them below K).
            unsafe {
                let r = if SHARED {
                    [one; LANES]
                } else {
                    *g.uniforms.as_ptr().add(i)
                };
                match class {
                    0 => {
                        let row: *mut [[u8; LANES]] = &mut g.rows8[j * k..(j + 1) * k];
                        g.token(&mut *row, i, r)
                    }
                    1 => {
                        let row: *mut [[u16; LANES]] = &mut g.rows16[j * k..(j + 1) * k];
                        g.token(&mut *row, i, r)
                    }
                    _ => {
                        let row: *mut [[u32; LANES]] = &mut g.rows32[j * k..(j + 1) * k];
                        g.token(&mut *row, i, r)
                    }
                }
            }
        }
    }
}

/// [`lane_doc_inner`] with one set of uniform numbers, `uniforms`, for
/// every lane.
#[inline(always)]
fn lane_doc_body(
    words: &[u32],
    uniforms: &[f64],
    groups: &mut [GroupDoc<'_>],
    classes: &RowClasses,
    inv_table: &[f64],
    prior: Prior,
) {
    let len = uniforms.len();
    lane_doc_inner::<true>(words, len, uniforms, groups, classes, inv_table, prior);
}

/// [`lane_doc_inner`] with each lane's own uniform numbers (in its group).
#[inline(always)]
fn lane_doc_apart_body(
    words: &[u32],
    len: usize,
    groups: &mut [GroupDoc<'_>],
    classes: &RowClasses,
    inv_table: &[f64],
    prior: Prior,
) {
    lane_doc_inner::<false>(words, len, &[], groups, classes, inv_table, prior);
}

crate::simd::kernel! {
    /// One document's Gibbs updates for several groups of runs that draw
    /// the same uniform numbers ([`lane_doc_body`]).
    #[allow(dead_code)]
    pub(super) fn lane_doc, lane_doc_at(
        words: &[u32],
        uniforms: &[f64],
        groups: &mut [GroupDoc<'_>],
        classes: &RowClasses,
        inv_table: &[f64],
        prior: Prior,
    ) = lane_doc_body;
}

crate::simd::kernel! {
    /// One document's Gibbs updates for several groups of runs, each lane
    /// with its own uniform numbers ([`lane_doc_apart_body`]).
    #[allow(dead_code)]
    pub(super) fn lane_doc_apart, lane_doc_apart_at(
        words: &[u32],
        len: usize,
        groups: &mut [GroupDoc<'_>],
        classes: &RowClasses,
        inv_table: &[f64],
        prior: Prior,
    ) = lane_doc_apart_body;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count_at_most` gives, lane by lane, the topic the scalar draw
    /// ([`super::super::sweep::draw`]) picks, for every K up to 33 (each
    /// remainder of the unrolled loop), with ties and u past every prefix sum.
    #[test]
    fn count_matches_the_scalar_draw() {
        let mut seed = 1u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for k in 2..=33 {
            for _ in 0..20 {
                // Weights with zeros (ties in the prefix sums) in some lanes.
                let w: Vec<[f64; LANES]> = (0..k)
                    .map(|_| std::array::from_fn(|_| if next() < 0.2 { 0.0 } else { next() }))
                    .collect();
                let mut prefix = vec![[0.0; LANES]; k];
                let mut run = [0.0f64; LANES];
                for (p, wt) in prefix.iter_mut().zip(&w) {
                    for s in 0..LANES {
                        run[s] += wt[s];
                    }
                    *p = run;
                }
                let u: [f64; LANES] = std::array::from_fn(|s| {
                    if s == 0 {
                        run[s] * 2.0
                    } else if s == 1 {
                        prefix[k / 2][s]
                    } else {
                        next() * run[s]
                    }
                });
                let got = count_at_most(&prefix[..k - 1], &u);
                for s in 0..LANES {
                    let col: Vec<f64> = w.iter().map(|wt| wt[s]).collect();
                    let want = super::super::sweep::draw(&col, u[s]);
                    assert_eq!(got[s] as usize, want, "K = {k}, lane {s}");
                }
            }
        }
    }
}
