//! The pieces of a stacked pass over the data: the softmax scratch and its
//! per-chunk kernel, and the small helpers that lay out `a` members side by
//! side (widths, strides, weight fingerprints).

use super::super::kernels::block::stride_for;
use super::super::kernels::softmax_cross_entropy;
use super::MlrState;

/// Scratch of the softmax over `a` members: exp(z − max), max and sum per
/// member, one row's losses and deltas.
#[derive(Default)]
pub(super) struct SoftmaxScratch {
    pub(super) exps: Vec<f32>,
    pub(super) maxv: Vec<f32>,
    pub(super) sumv: Vec<f32>,
    pub(super) row_loss: Vec<f64>,
    /// One row's deltas for every member ([`softmax_apart`]).
    pub(super) row_delta: Vec<f32>,
}

/// Where [`SoftmaxScratch::row`] writes a row's softmax deltas.
pub(super) enum RowDelta<'a> {
    /// Nowhere: the row is in no member's minibatch.
    Skip,
    /// Into the scratch's own `row_delta` (every member's, class-major).
    Scratch,
    /// Into this slice (`a · classes` values, class-major).
    Into(&'a mut [f32]),
}

impl SoftmaxScratch {
    /// The softmax cross-entropy of one row of `a` stacked members (logits
    /// `zr`, class-major, label `label`): its loss per member into
    /// `row_loss` and added to `losses`, its deltas where `delta` says. The
    /// one row prologue of every pass (chunked, apart, single-run step).
    #[inline(always)]
    pub(super) fn row(
        &mut self,
        zr: &[f32],
        a: usize,
        c: usize,
        label: usize,
        losses: &mut [f64],
        delta: RowDelta<'_>,
    ) {
        let SoftmaxScratch {
            exps,
            maxv,
            sumv,
            row_loss,
            row_delta,
        } = self;
        row_loss.fill(0.0);
        let d = match delta {
            RowDelta::Skip => None,
            RowDelta::Scratch => Some(&mut row_delta[..]),
            RowDelta::Into(d) => Some(d),
        };
        softmax_cross_entropy(zr, a, c, label, exps, maxv, sumv, row_loss, d);
        for (l, &v) in losses.iter_mut().zip(row_loss.iter()) {
            *l += v;
        }
    }
}

crate::simd::kernel! {
    /// Losses and deltas of one chunk of a pass: for each row o of `rows`
    /// (logits `z[o·stride..]`, `a` members class-major), adds its computed
    /// loss to `losses`, and if `pos[o]` is a minibatch position p, writes
    /// the softmax deltas to `delta[(p − delta_base)·stride..]` and the
    /// losses to `pos_loss[p·a..]`.
    pub(super) fn softmax_chunk, softmax_chunk_at(
        z: &[f32],
        stride: usize,
        rows: &[u32],
        y: &[u8],
        a: usize,
        c: usize,
        pos: &[u32],
        delta_base: usize,
        sc: &mut SoftmaxScratch,
        losses: &mut [f64],
        delta: &mut [f32],
        pos_loss: &mut [f64]
    ) = softmax_chunk_body;
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn softmax_chunk_body(
    z: &[f32],
    stride: usize,
    rows: &[u32],
    y: &[u8],
    a: usize,
    c: usize,
    pos: &[u32],
    delta_base: usize,
    sc: &mut SoftmaxScratch,
    losses: &mut [f64],
    delta: &mut [f32],
    pos_loss: &mut [f64],
) {
    for (o, (&r, &p)) in rows.iter().zip(pos).enumerate() {
        // The padded row: room for the softmax's blocks of members.
        let zr = &z[o * stride..z.len().min((o + 1) * stride)];
        let d = if p == u32::MAX {
            RowDelta::Skip
        } else {
            let at = (p as usize - delta_base) * stride;
            RowDelta::Into(&mut delta[at..at + a * c])
        };
        sc.row(zr, a, c, y[r as usize] as usize, losses, d);
        if p != u32::MAX {
            pos_loss[p as usize * a..(p as usize + 1) * a].copy_from_slice(&sc.row_loss);
        }
    }
}

/// The fingerprints of `members` of `states` (0 for the others).
pub(super) fn prints(states: &[MlrState], members: &[usize]) -> Vec<u64> {
    let mut key = vec![0u64; states.len()];
    for &i in members {
        key[i] = fingerprint(&states[i].w);
    }
    key
}

/// `out[s] = Σ_p pos_loss[p·a + s]` in position order.
pub(super) fn sum_positions(pos_loss: &[f64], a: usize, out: &mut Vec<f64>) {
    out.clear();
    out.resize(a, 0.0);
    for row in pos_loss.chunks_exact(a) {
        for (l, &v) in out.iter_mut().zip(row) {
            *l += v;
        }
    }
}

/// Columns of a pass over `a` stacked members of `classes` classes: `a·classes`
/// rounded up to a multiple of 16 (the kernels' tile unit; the padding
/// columns are zero weights and their results are ignored).
pub(super) fn padded_width(a: usize, classes: usize) -> usize {
    (a * classes).div_ceil(16) * 16
}

/// Row stride of the logits and deltas of a pass over `a` members (see
/// [`stride_for`]).
pub(super) fn stride(a: usize, classes: usize) -> usize {
    stride_for(padded_width(a, classes))
}

/// A cheap fingerprint of a weight vector (FNV-1a over the bit patterns).
pub(super) fn fingerprint(w: &[f32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in w {
        h ^= v.to_bits() as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h | 1
}

crate::simd::kernel! {
    /// [`softmax_chunk`] for members that do not share a minibatch (the
    /// unperturbed runs of a per-trial data order): for each row o of `rows`
    /// adds its computed loss to `losses`, and for each `(slot, position)`
    /// of `entries[row_ptr[r]..row_ptr[r+1]]` (row r in that slot's
    /// minibatch) writes the slot's softmax deltas to
    /// `delta[(slot·batch + position)·c..][..c]` and its loss to
    /// `pos_loss[slot·batch + position]` — per member the bits
    /// [`softmax_chunk`] gives it alone.
    pub(super) fn softmax_apart, softmax_apart_at(
        z: &[f32],
        stride: usize,
        rows: &[u32],
        y: &[u8],
        a: usize,
        c: usize,
        row_ptr: &[u32],
        entries: &[(u32, u32)],
        batch: usize,
        sc: &mut SoftmaxScratch,
        losses: &mut [f64],
        delta: &mut [f32],
        pos_loss: &mut [f64]
    ) = softmax_apart_body;
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn softmax_apart_body(
    z: &[f32],
    stride: usize,
    rows: &[u32],
    y: &[u8],
    a: usize,
    c: usize,
    row_ptr: &[u32],
    entries: &[(u32, u32)],
    batch: usize,
    sc: &mut SoftmaxScratch,
    losses: &mut [f64],
    delta: &mut [f32],
    pos_loss: &mut [f64],
) {
    sc.row_delta.resize(a * c, 0.0);
    for (o, &r) in rows.iter().enumerate() {
        let r = r as usize;
        let zr = &z[o * stride..z.len().min((o + 1) * stride)];
        let owners = &entries[row_ptr[r] as usize..row_ptr[r + 1] as usize];
        let d = if owners.is_empty() {
            RowDelta::Skip
        } else {
            RowDelta::Scratch
        };
        sc.row(zr, a, c, y[r] as usize, losses, d);
        for &(s, p) in owners {
            let at = s as usize * batch + p as usize;
            for (k, d) in delta[at * c..(at + 1) * c].iter_mut().enumerate() {
                *d = sc.row_delta[k * a + s as usize];
            }
            pos_loss[at] = sc.row_loss[s as usize];
        }
    }
}
