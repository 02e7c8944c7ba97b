//! The sweep of a pass's groups: each member's counts stacked into its
//! group's lane layout, every document's tokens updated by the lane kernels
//! ([`super::lane_doc`], [`super::lane_doc_apart`]), the counts written back.

use super::{
    CLASS_SHIFT, Count, GroupBuffers, GroupDoc, INDEX_MASK, LANES, LaneBuffers, RowClasses,
    lane_doc_apart_at, lane_doc_at,
};
use crate::model::IterCtx;
use crate::model::lda::{LdaState, Prior, doc_uniforms};

/// The model data a group sweep needs.
pub(in crate::model::lda) struct SweepInput<'a> {
    /// Start of each document in `tokens`, plus the end.
    pub(crate) offsets: &'a [usize],
    /// Word ids of the corpus.
    pub(crate) tokens: &'a [u32],
    /// 1/(n + Vβ) for n = 0..=N.
    pub(crate) inv_table: &'a [f64],
    /// Row table of each word.
    pub(crate) classes: &'a RowClasses,
    /// K, α, β.
    pub(crate) prior: Prior,
}

/// Stacks `src` (each lane's `[word][topic]` counts) into the class tables.
fn stack<C: Count>(
    table: &mut Vec<[C; LANES]>,
    rows: usize,
    class: u32,
    classes: &RowClasses,
    k: usize,
    src: &[&[u32]],
) {
    table.clear();
    table.resize(rows * k, [C::default(); LANES]);
    for (w, &slot) in classes.slot.iter().enumerate() {
        if slot >> CLASS_SHIFT != class {
            continue;
        }
        let j = (slot & INDEX_MASK) as usize;
        let dst = &mut table[j * k..(j + 1) * k];
        for (s, col) in src.iter().enumerate() {
            for (d, &n) in dst.iter_mut().zip(&col[w * k..(w + 1) * k]) {
                d[s] = C::narrow(n);
            }
        }
    }
}

/// Writes the class table back into each lane's `[word][topic]` counts.
fn unstack<C: Count>(
    table: &[[C; LANES]],
    class: u32,
    classes: &RowClasses,
    k: usize,
    dst: &mut [&mut [u32]],
) {
    for (w, &slot) in classes.slot.iter().enumerate() {
        if slot >> CLASS_SHIFT != class {
            continue;
        }
        let j = (slot & INDEX_MASK) as usize;
        let row = &table[j * k..(j + 1) * k];
        for (s, col) in dst.iter_mut().enumerate() {
            for (d, e) in col[w * k..(w + 1) * k].iter_mut().zip(row) {
                *d = e[s].widen();
            }
        }
    }
}

/// One Gibbs sweep of the runs `members` (at most `groups × LANES`), as
/// the lanes of groups of [`LANES`] stepped together, at the kernel level
/// `level`; member i sweeps with its own `ctxs[i]` (its uniform numbers are
/// its run seed's at its iteration, so members need not share a data order
/// or an iteration: every lane reads the same corpus) and ends exactly
/// where [`super::super::Lda`]'s single-run step would take it.
pub(in crate::model::lda) fn sweep_groups(
    input: &SweepInput<'_>,
    members: &mut [&mut LdaState],
    ctxs: &[IterCtx],
    buf: &mut LaneBuffers,
    level: crate::simd::Level,
) {
    assert_eq!(members.len(), ctxs.len(), "one context per member");
    let k = input.prior.topics;
    let classes = input.classes;
    let n_groups = members.len().div_ceil(LANES);
    if n_groups == 0 {
        return;
    }
    if buf.groups.len() < n_groups {
        buf.groups.resize_with(n_groups, GroupBuffers::default);
    }
    let LaneBuffers {
        groups,
        streams,
        ctxs: distinct,
    } = buf;
    // Each member's stream: the index of its context among the distinct ones
    // (one for a cohort that shares a data order and an iteration).
    distinct.clear();
    let which: Vec<usize> = ctxs
        .iter()
        .map(|c| match distinct.iter().position(|d| d == c) {
            Some(j) => j,
            None => {
                distinct.push(*c);
                distinct.len() - 1
            }
        })
        .collect();
    if streams.len() < distinct.len() {
        streams.resize_with(distinct.len(), Vec::new);
    }
    for (gb, ms) in groups.iter_mut().zip(members.chunks(LANES)) {
        let src: Vec<&[u32]> = ms.iter().map(|m| &m.word_topic[..]).collect();
        stack(&mut gb.rows8, classes.rows[0], 0, classes, k, &src);
        stack(&mut gb.rows16, classes.rows[1], 1, classes, k, &src);
        stack(&mut gb.rows32, classes.rows[2], 2, classes, k, &src);
        gb.total.clear();
        gb.total.resize(k, [0; LANES]);
        gb.inv_total.clear();
        gb.inv_total.resize(k, [input.inv_table[0]; LANES]);
        for (s, m) in ms.iter().enumerate() {
            for t in 0..k {
                gb.total[t][s] = m.topic_total[t];
                gb.inv_total[t][s] = input.inv_table[m.topic_total[t] as usize];
            }
        }
        gb.nd.clear();
        gb.nd.resize(k, [0.0; LANES]);
        gb.prefix.resize(k, [0.0; LANES]);
    }
    let groups = &mut groups[..n_groups];
    let docs = input.offsets.len() - 1;
    for d in 0..docs {
        let (lo, hi) = (input.offsets[d], input.offsets[d + 1]);
        if hi == lo {
            continue;
        }
        for (ctx, uniforms) in distinct.iter().zip(streams.iter_mut()) {
            doc_uniforms(*ctx, d, hi - lo, uniforms);
        }
        let mut docs: Vec<GroupDoc<'_>> = groups
            .iter_mut()
            .zip(members.chunks_mut(LANES))
            .zip(which.chunks(LANES))
            .map(|((gb, ms), which)| {
                // Lanes past the members keep any numbers: they compute on
                // zero counts and are never written back.
                if distinct.len() > 1 {
                    gb.uniforms.resize(hi - lo, [0.0; LANES]);
                    for (s, &j) in which.iter().enumerate() {
                        for (u, &r) in gb.uniforms.iter_mut().zip(&streams[j][..hi - lo]) {
                            u[s] = r;
                        }
                    }
                }
                for (s, m) in ms.iter().enumerate() {
                    for (t, &n) in m.doc_topic[d * k..(d + 1) * k].iter().enumerate() {
                        gb.nd[t][s] = n as f64;
                    }
                }
                let lanes = ms.len();
                let mut z: [&mut [u8]; LANES] = Default::default();
                for (zs, m) in z.iter_mut().zip(ms.iter_mut()) {
                    *zs = &mut m.assignments[lo..hi];
                }
                GroupDoc {
                    z,
                    lanes,
                    nd: &mut gb.nd,
                    rows8: &mut gb.rows8,
                    rows16: &mut gb.rows16,
                    rows32: &mut gb.rows32,
                    total: &mut gb.total,
                    inv_total: &mut gb.inv_total,
                    prefix: &mut gb.prefix,
                    uniforms: &gb.uniforms,
                }
            })
            .collect();
        if distinct.len() == 1 {
            lane_doc_at(
                level,
                &input.tokens[lo..],
                &streams[0],
                &mut docs,
                classes,
                input.inv_table,
                input.prior,
            );
        } else {
            lane_doc_apart_at(
                level,
                &input.tokens[lo..],
                hi - lo,
                &mut docs,
                classes,
                input.inv_table,
                input.prior,
            );
        }
        drop(docs);
        for (gb, ms) in groups.iter().zip(members.chunks_mut(LANES)) {
            for (s, m) in ms.iter_mut().enumerate() {
                for (t, n) in m.doc_topic[d * k..(d + 1) * k].iter_mut().enumerate() {
                    *n = gb.nd[t][s] as u32;
                }
            }
        }
    }
    for (gb, ms) in groups.iter().zip(members.chunks_mut(LANES)) {
        for (s, m) in ms.iter_mut().enumerate() {
            for t in 0..k {
                m.topic_total[t] = gb.total[t][s];
            }
        }
        let mut dst: Vec<&mut [u32]> = ms.iter_mut().map(|m| &mut m.word_topic[..]).collect();
        unstack(&gb.rows8, 0, classes, k, &mut dst);
        unstack(&gb.rows16, 1, classes, k, &mut dst);
        unstack(&gb.rows32, 2, classes, k, &mut dst);
    }
}
