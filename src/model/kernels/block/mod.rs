//! Block-sparse products for MLR: the data regrouped into chunks of
//! [`CHUNK`] rows and groups of [`GROUP`] adjacent features, each (chunk,
//! group) storing only the rows that have a non-zero in the group, with the
//! group's [`GROUP`] values (zeros included).
//!
//! Why: with one row at a time (CSR), every non-zero reloads a tile of the
//! stacked weights from L2, so the product runs at the cache's bandwidth,
//! not the multiply-adds'. With a group of four features, one tile of four
//! weight rows sits in registers while the chunk's rows stream past (forward
//! pass), or one tile of four gradient rows accumulates while the chunk's
//! deltas stream past (gradient pass): four fused multiply-adds per load.
//! The price is the zeros inside a group (on MNIST about a third of the
//! multiply-adds, as strokes cover neighbouring pixels).
//!
//! Exactness: a zero value contributes `fma(0, w, acc) = acc` exactly (for
//! finite `w`), so every output is the chain of fused multiply-adds over the
//! row's non-zeros in increasing feature order (forward), or over the
//! chunk's rows in order and then the chunks in order (gradient), and its
//! bits depend neither on the width (one trial or a stacked cohort) nor on
//! the kernel level.

use super::Csr;

/// Features per group. The products' inner loops are written out for four
/// values per entry (a loop over `GROUP` gave the same bits but measured 3%
/// slower for one trial's width; groups of two, tried through that loop,
/// are slower in the forward product: docs/PERFORMANCE.md, twenty-second
/// pass).
pub(crate) const GROUP: usize = 4;
const _: () = assert!(GROUP == 4, "the products' loops are written for four");
/// Rows per chunk (positions within a chunk fit a byte).
pub(crate) const CHUNK: usize = 64;
/// The forward product's output columns are processed in tiles of up to
/// this many: 64 (four AVX-512 registers per row) with 32 vector
/// registers, 32 (four AVX2 registers) with 16. A tile changes which
/// outputs are computed side by side, never an output's chain.
const fn tile(regs: usize) -> usize {
    if regs >= 32 { 64 } else { 32 }
}

/// The gradient product's tiles: as [`tile`], but 16 columns with 16
/// registers, where 32 columns' four accumulator rows (16 ymm registers)
/// would leave none for the deltas and values, and spill. Measured with
/// `scarsim bench --kernel mlr` at AVX2, alternating binaries in one run:
/// `mlr-gradient-cohort` 24.7–26.9 → 28.9–29.9 GFLOP/s.
const fn gradient_tile_width(regs: usize) -> usize {
    if regs >= 32 { 64 } else { 16 }
}

/// Every row of a [`Csr`] as its feature groups: for row r, the groups with
/// a non-zero, in increasing order, each with its [`GROUP`] values. Built
/// once per dataset, so that regrouping a minibatch ([`BlockCsc::rebuild`])
/// moves whole groups instead of single non-zeros.
#[derive(Clone, Debug, Default)]
pub(crate) struct RowGroups {
    /// `ptr[r]..ptr[r+1]` indexes row r's groups.
    ptr: Vec<u32>,
    /// Group of each entry.
    group: Vec<u16>,
    /// Values of each entry (zeros where the row has none).
    val: GroupValues,
    /// Non-zeros of each row.
    nnz: Vec<u32>,
    /// ⌈features / GROUP⌉.
    groups: usize,
}

/// The values of a [`RowGroups`]' entries. Data whose every value is an
/// integer in 0..=255 (MNIST's raw pixels) keeps them as bytes: a quarter
/// of the bytes that regrouping a minibatch reads from scattered rows, and
/// each byte converts to exactly the `f32` it stands for, so the products'
/// bits do not change.
#[derive(Clone, Debug, PartialEq)]
enum GroupValues {
    /// Every value an integer in 0..=255.
    Bytes(Vec<[u8; GROUP]>),
    /// Any other values.
    Floats(Vec<[f32; GROUP]>),
}

impl Default for GroupValues {
    fn default() -> Self {
        GroupValues::Floats(Vec::new())
    }
}

/// `BYTE_F32[b] = b as f32`, exactly: the products widen a byte by a load
/// from this table, which the compiler folds into the broadcast that feeds
/// the multiply-adds (a conversion would take a shuffle-port slot from them).
static BYTE_F32: [f32; 256] = {
    let mut t = [0f32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i as f32;
        i += 1;
    }
    t
};

/// One stored group of values, widened to the `f32`s the products use.
trait GroupValue: Copy {
    /// The group's values as the products use them.
    fn widen(&self) -> [f32; GROUP];
    /// The zero group.
    const ZERO: Self;
    /// `values` as their [`GroupValues`] variant.
    fn wrap(values: Vec<Self>) -> GroupValues;
    /// The buffer of `values` if it is `Self`'s variant.
    fn buffer(values: &mut GroupValues) -> Option<&mut Vec<Self>>;

    /// `b`'s value buffer as one of `Self`, emptied (replaced first if it
    /// held the other type).
    fn cleared(b: &mut BlockCsc) -> &mut Vec<Self> {
        if Self::buffer(&mut b.entry_val).is_none() {
            b.entry_val = Self::wrap(Vec::new());
        }
        let v = Self::buffer(&mut b.entry_val).expect("set above");
        v.clear();
        v
    }
}

impl GroupValue for [u8; GROUP] {
    #[inline(always)]
    fn widen(&self) -> [f32; GROUP] {
        // Each byte read on its own: one load and one broadcast from the
        // table per value, no shifts on the multiply-add ports.
        std::array::from_fn(|q| BYTE_F32[self[q] as usize])
    }
    const ZERO: Self = [0; GROUP];
    fn wrap(values: Vec<Self>) -> GroupValues {
        GroupValues::Bytes(values)
    }
    fn buffer(values: &mut GroupValues) -> Option<&mut Vec<Self>> {
        match values {
            GroupValues::Bytes(v) => Some(v),
            GroupValues::Floats(_) => None,
        }
    }
}

impl GroupValue for [f32; GROUP] {
    #[inline(always)]
    fn widen(&self) -> [f32; GROUP] {
        *self
    }
    const ZERO: Self = [0.0; GROUP];
    fn wrap(values: Vec<Self>) -> GroupValues {
        GroupValues::Floats(values)
    }
    fn buffer(values: &mut GroupValues) -> Option<&mut Vec<Self>> {
        match values {
            GroupValues::Floats(v) => Some(v),
            GroupValues::Bytes(_) => None,
        }
    }
}

impl RowGroups {
    /// The groups of every row of `x`.
    pub(crate) fn of(x: &Csr) -> RowGroups {
        let groups = x.cols.div_ceil(GROUP);
        assert!(groups <= u16::MAX as usize + 1, "too many feature groups");
        let mut rg = RowGroups {
            ptr: Vec::with_capacity(x.rows + 1),
            groups,
            ..RowGroups::default()
        };
        let mut val: Vec<[f32; GROUP]> = Vec::new();
        rg.ptr.push(0);
        for r in 0..x.rows {
            let (cols, vals) = x.row(r);
            let mut prev = usize::MAX;
            for (&j, &v) in cols.iter().zip(vals) {
                let (g, q) = (j as usize / GROUP, j as usize % GROUP);
                if g != prev {
                    rg.group.push(g as u16);
                    val.push([0.0; GROUP]);
                    prev = g;
                }
                val.last_mut().expect("pushed above")[q] = v;
            }
            rg.ptr.push(rg.group.len() as u32);
            rg.nnz.push(cols.len() as u32);
        }
        // `to_bits` equality: -0.0 stays a float (its sign would be lost).
        let byte =
            |v: f32| (0.0..=255.0).contains(&v) && f32::from(v as u8).to_bits() == v.to_bits();
        // Regrouping a minibatch reads rows scattered over these arrays (tens
        // of megabytes for MNIST): on huge pages a row costs no page walk.
        rg.group = on_huge_pages(&rg.group);
        rg.val = if val.iter().flatten().all(|&v| byte(v)) {
            let bytes: Vec<[u8; GROUP]> = val.iter().map(|g| g.map(|v| v as u8)).collect();
            GroupValues::Bytes(on_huge_pages(&bytes))
        } else {
            GroupValues::Floats(on_huge_pages(&val))
        };
        rg
    }

    /// Bytes each stored entry takes (its group and its values).
    pub(crate) fn entry_bytes(&self) -> usize {
        2 + match &self.val {
            GroupValues::Bytes(_) => GROUP,
            GroupValues::Floats(_) => 4 * GROUP,
        }
    }
}

/// A copy of `v` in memory marked for huge pages
/// ([`crate::data::huge_pages`]): the same values, only where they sit.
fn on_huge_pages<T: Copy>(v: &[T]) -> Vec<T> {
    let mut out = crate::data::huge_pages::with_capacity(v.len());
    out.extend_from_slice(v);
    out
}

/// Rows of a [`Csr`] (a list, e.g. a minibatch in batch order, or all rows)
/// regrouped by chunk and feature group.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct BlockCsc {
    /// Number of rows listed (positions).
    pub(crate) positions: usize,
    /// Feature groups (⌈features / GROUP⌉); products need `groups · GROUP`
    /// rows of weights or gradients (the last ones padding).
    pub(crate) groups: usize,
    /// Non-zeros stored (without the zeros inside groups).
    pub(crate) nnz: usize,
    /// `chunk_ptr[c]..chunk_ptr[c+1]` indexes the runs of chunk c.
    chunk_ptr: Vec<u32>,
    /// Group of each run (runs of a chunk in increasing group order).
    run_group: Vec<u16>,
    /// `entry_ptr[r]..entry_ptr[r+1]` indexes the entries of run r.
    entry_ptr: Vec<u32>,
    /// Position within the chunk of each entry (increasing within a run).
    entry_pos: Vec<u8>,
    /// The group's values in that row, stored as the dataset's
    /// [`RowGroups`] stores them (bytes for MNIST's integer pixels: a
    /// quarter of the bytes a regrouping writes and the products read).
    entry_val: GroupValues,
}

impl BlockCsc {
    /// Regroups `rows` (indices into `rg`).
    pub(crate) fn build(rg: &RowGroups, rows: &[u32]) -> BlockCsc {
        let mut b = BlockCsc::default();
        b.rebuild(rg, rows);
        b
    }

    /// [`BlockCsc::build`] into existing buffers.
    pub(crate) fn rebuild(&mut self, rg: &RowGroups, rows: &[u32]) {
        match &rg.val {
            GroupValues::Bytes(val) => self.rebuild_from(rg, val, rows),
            GroupValues::Floats(val) => self.rebuild_from(rg, val, rows),
        }
    }

    /// [`BlockCsc::rebuild`] with `rg`'s values `val` in their stored type.
    fn rebuild_from<V: GroupValue>(&mut self, rg: &RowGroups, val: &[V], rows: &[u32]) {
        let mut out = std::mem::take(V::cleared(self));
        let groups = rg.groups;
        self.positions = rows.len();
        self.groups = groups;
        self.nnz = 0;
        self.chunk_ptr.clear();
        self.run_group.clear();
        self.entry_ptr.clear();
        self.entry_pos.clear();
        self.entry_ptr.push(0);
        // Per group: entries in this chunk, then the next slot to fill.
        let mut count = vec![0u32; groups];
        let mut next = vec![0u32; groups];
        // The rows of a minibatch are scattered over a dataset far larger
        // than the caches: while row i is counted, fetch the entries of row
        // i + AHEAD and the row pointers of row i + 2·AHEAD.
        const AHEAD: usize = 8;
        let fetch = |i: usize| {
            if let Some(&r) = rows.get(i + AHEAD) {
                let e = rg.ptr[r as usize] as usize..rg.ptr[r as usize + 1] as usize;
                crate::simd::prefetch(&rg.group[e.clone()]);
                crate::simd::prefetch(&val[e]);
            }
            if let Some(&r) = rows.get(i + 2 * AHEAD) {
                crate::simd::prefetch(&rg.ptr[r as usize..r as usize + 2]);
                crate::simd::prefetch(&rg.nnz[r as usize..r as usize + 1]);
            }
        };
        for &r in rows.iter().take(2 * AHEAD) {
            crate::simd::prefetch(&rg.ptr[r as usize..r as usize + 2]);
        }
        for &r in rows.iter().take(AHEAD) {
            let r = r as usize;
            let e = rg.ptr[r] as usize..rg.ptr[r + 1] as usize;
            crate::simd::prefetch(&rg.group[e.clone()]);
            crate::simd::prefetch(&val[e]);
        }
        let mut nnz = 0;
        for (ci, chunk) in rows.chunks(CHUNK).enumerate() {
            self.chunk_ptr.push(self.run_group.len() as u32);
            for (o, &r) in chunk.iter().enumerate() {
                fetch(ci * CHUNK + o);
                let r = r as usize;
                for &g in &rg.group[rg.ptr[r] as usize..rg.ptr[r + 1] as usize] {
                    count[g as usize] += 1;
                }
            }
            let mut at = self.entry_pos.len() as u32;
            for (g, cnt) in count.iter_mut().enumerate() {
                if *cnt > 0 {
                    next[g] = at;
                    at += *cnt;
                    self.run_group.push(g as u16);
                    self.entry_ptr.push(at);
                    *cnt = 0;
                }
            }
            // Zero-filling the chunk's slots brings their lines into the
            // cache before the scattered writes below (faster than writing
            // into stale slots: measured with `scarsim bench --kernel mlr-regroup`).
            self.entry_pos.resize(at as usize, 0);
            out.resize(at as usize, V::ZERO);
            for (p, &r) in chunk.iter().enumerate() {
                let r = r as usize;
                let e = rg.ptr[r] as usize..rg.ptr[r + 1] as usize;
                for (&g, &v) in rg.group[e.clone()].iter().zip(&val[e]) {
                    let slot = next[g as usize] as usize;
                    next[g as usize] += 1;
                    self.entry_pos[slot] = p as u8;
                    out[slot] = v;
                }
                nnz += rg.nnz[r] as usize;
            }
        }
        self.nnz = nnz;
        self.chunk_ptr.push(self.run_group.len() as u32);
        *V::cleared(self) = out;
    }

    /// Number of chunks.
    pub(crate) fn chunks(&self) -> usize {
        self.chunk_ptr.len().saturating_sub(1)
    }

    /// Rows of the weights or gradients a product needs: `groups · GROUP`.
    pub(crate) fn padded_features(&self) -> usize {
        self.groups * GROUP
    }

    /// Multiply-adds a product of width `width` performs (zeros included).
    pub(crate) fn stored(&self) -> usize {
        self.entry_pos.len() * GROUP
    }

    /// Bytes each stored entry takes (its position and its values).
    pub(crate) fn entry_bytes(&self) -> usize {
        1 + match &self.entry_val {
            GroupValues::Bytes(_) => GROUP,
            GroupValues::Floats(_) => 4 * GROUP,
        }
    }

    /// The most roundings any element of [`block_gradient`]'s result passes
    /// through: a chunk's chain plus one addition per chunk.
    pub(crate) fn accumulation_terms(&self) -> usize {
        CHUNK.min(self.positions) + self.chunks()
    }
}

/// Logits of the rows of chunk `chunk`: `z[p·stride..][0..width] = Σ_f
/// x[row p][f] · w[f][0..width]` for the chunk's positions p (local), `w`
/// row-major `padded_features × width`, `width` a multiple of 16. A `stride`
/// a little above `width` (see [`stride_for`]) keeps the rows of `z` from
/// competing for the same L1 sets.
pub(crate) fn block_forward(
    b: &BlockCsc,
    chunk: usize,
    w: &[f32],
    width: usize,
    z: &mut [f32],
    stride: usize,
) {
    block_forward_at(crate::simd::level(), b, chunk, w, width, z, stride);
}

/// A row stride for `width` columns that does not alias in L1: `width`
/// plus one cache line.
pub(crate) fn stride_for(width: usize) -> usize {
    width + 16
}

/// [`block_forward`] at an explicit kernel level.
#[allow(clippy::too_many_arguments)]
pub(crate) fn block_forward_at(
    level: crate::simd::Level,
    b: &BlockCsc,
    chunk: usize,
    w: &[f32],
    width: usize,
    z: &mut [f32],
    stride: usize,
) {
    assert!(
        width.is_multiple_of(16),
        "block_forward: width {width} is not a multiple of 16"
    );
    assert!(stride >= width, "block_forward: stride below width");
    assert!(
        w.len() >= b.padded_features() * width,
        "block_forward: w is too short"
    );
    assert!(chunk < b.chunks(), "block_forward: no chunk {chunk}");
    assert!(
        z.len() >= (CHUNK - 1) * stride + width,
        "block_forward: z is too short"
    );
    forward_level(level, b, chunk, w, width, z, stride);
}

crate::simd::kernel! {
    fn forward_dispatch, forward_level(b: &BlockCsc, chunk: usize, w: &[f32], width: usize, z: &mut [f32], stride: usize) = forward_body::<REGS>;
}

#[inline(always)]
fn forward_body<const REGS: usize>(
    b: &BlockCsc,
    chunk: usize,
    w: &[f32],
    width: usize,
    z: &mut [f32],
    stride: usize,
) {
    let rows = (b.positions - chunk * CHUNK).min(CHUNK);
    for p in 0..rows {
        z[p * stride..p * stride + width].fill(0.0);
    }
    match &b.entry_val {
        GroupValues::Bytes(v) => forward_tiles::<REGS, _>(b, v, chunk, w, width, z, stride),
        GroupValues::Floats(v) => forward_tiles::<REGS, _>(b, v, chunk, w, width, z, stride),
    }
}

#[inline(always)]
fn forward_tiles<const REGS: usize, V: GroupValue>(
    b: &BlockCsc,
    val: &[V],
    chunk: usize,
    w: &[f32],
    width: usize,
    z: &mut [f32],
    stride: usize,
) {
    let mut t0 = 0;
    while t0 < width {
        match (width - t0).min(tile(REGS)) {
            64 => forward_tile::<64, V>(b, val, chunk, w, width, t0, z, stride),
            48 => forward_tile::<48, V>(b, val, chunk, w, width, t0, z, stride),
            32 => forward_tile::<32, V>(b, val, chunk, w, width, t0, z, stride),
            _ => forward_tile::<16, V>(b, val, chunk, w, width, t0, z, stride),
        }
        t0 += (width - t0).min(tile(REGS));
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn forward_tile<const L: usize, V: GroupValue>(
    b: &BlockCsc,
    val: &[V],
    chunk: usize,
    w: &[f32],
    width: usize,
    t0: usize,
    z: &mut [f32],
    stride: usize,
) {
    let runs = b.chunk_ptr[chunk] as usize..b.chunk_ptr[chunk + 1] as usize;
    for r in runs {
        let f0 = b.run_group[r] as usize * GROUP;
        let mut wg = [[0f32; L]; GROUP];
        for (q, wq) in wg.iter_mut().enumerate() {
            let at = (f0 + q) * width + t0;
            wq.copy_from_slice(&w[at..at + L]);
        }
        let e = b.entry_ptr[r] as usize..b.entry_ptr[r + 1] as usize;
        for (&p, v) in b.entry_pos[e.clone()].iter().zip(&val[e]) {
            let v = v.widen();
            let at = p as usize * stride + t0;
            debug_assert!((p as usize) < CHUNK && at + L <= z.len());
            // SAFETY: a stored position is below `CHUNK` (`rebuild` writes
            // positions within their chunk, and nothing else writes them),
            // `t0 + L ≤ width`, and `block_forward_at` checked `z.len() ≥
            // (CHUNK − 1)·stride + width`: the tile lies inside `z`. (The
            // slice's two checks per entry were a tenth of its µops.)
            let zp: &mut [f32; L] = unsafe { &mut *z.as_mut_ptr().add(at).cast::<[f32; L]>() };
            for l in 0..L {
                let mut acc = zp[l];
                acc = v[0].mul_add(wg[0][l], acc);
                acc = v[1].mul_add(wg[1][l], acc);
                acc = v[2].mul_add(wg[2][l], acc);
                acc = v[3].mul_add(wg[3][l], acc);
                zp[l] = acc;
            }
        }
    }
}

/// The minibatch gradient product `g[f][0..width] += Σ_p x[row p][f] ·
/// d[p·stride..][0..width]` over every listed row p (`g` row-major
/// `padded_features × width`, `width` a multiple of 16, `stride` as in
/// [`block_forward`]): per chunk a chain of fused multiply-adds in position
/// order from zero, added to `g` chunk after chunk.
pub(crate) fn block_gradient(b: &BlockCsc, d: &[f32], stride: usize, width: usize, g: &mut [f32]) {
    block_gradient_at(crate::simd::level(), b, d, stride, width, g);
}

/// [`block_gradient`] at an explicit kernel level.
pub(crate) fn block_gradient_at(
    level: crate::simd::Level,
    b: &BlockCsc,
    d: &[f32],
    stride: usize,
    width: usize,
    g: &mut [f32],
) {
    assert!(
        width.is_multiple_of(16),
        "block_gradient: width {width} is not a multiple of 16"
    );
    assert!(stride >= width, "block_gradient: stride below width");
    assert!(
        b.positions == 0 || d.len() >= (b.positions - 1) * stride + width,
        "block_gradient: d is too short"
    );
    assert!(
        g.len() >= b.padded_features() * width,
        "block_gradient: g is too short"
    );
    gradient_level(level, b, d, stride, width, g);
}

crate::simd::kernel! {
    fn gradient_dispatch, gradient_level(b: &BlockCsc, d: &[f32], stride: usize, width: usize, g: &mut [f32]) = gradient_body::<REGS>;
}

/// One chunk's share of [`block_gradient`]: `g[f][..] += Σ_{p in chunk}
/// x[row p][f] · d[(d_row0 + p_local)·stride..][..]`, where `d_row0` is the
/// row of `d` holding the chunk's first position (`chunk · CHUNK` for the
/// whole minibatch's deltas, 0 for one chunk's). Applying the chunks in
/// order gives [`block_gradient`]'s bits exactly.
#[allow(clippy::too_many_arguments)]
pub(crate) fn block_gradient_chunk(
    b: &BlockCsc,
    chunk: usize,
    d: &[f32],
    d_row0: usize,
    stride: usize,
    width: usize,
    g: &mut [f32],
) {
    assert!(
        width.is_multiple_of(16),
        "block_gradient_chunk: width {width} is not a multiple of 16"
    );
    assert!(stride >= width, "block_gradient_chunk: stride below width");
    assert!(chunk < b.chunks(), "block_gradient_chunk: no chunk {chunk}");
    let rows = (b.positions - chunk * CHUNK).min(CHUNK);
    assert!(
        d.len() >= (d_row0 + rows - 1) * stride + width,
        "block_gradient_chunk: d is too short"
    );
    assert!(
        g.len() >= b.padded_features() * width,
        "block_gradient_chunk: g is too short"
    );
    gradient_chunk_level(crate::simd::level(), b, chunk, d, d_row0, stride, width, g);
}

crate::simd::kernel! {
    fn gradient_chunk_dispatch, gradient_chunk_level(b: &BlockCsc, chunk: usize, d: &[f32], d_row0: usize, stride: usize, width: usize, g: &mut [f32]) = gradient_chunk_body::<REGS>;
}

#[inline(always)]
fn gradient_chunk_body<const REGS: usize>(
    b: &BlockCsc,
    chunk: usize,
    d: &[f32],
    d_row0: usize,
    stride: usize,
    width: usize,
    g: &mut [f32],
) {
    match &b.entry_val {
        GroupValues::Bytes(v) => {
            gradient_chunk_tiles::<REGS, _>(b, v, chunk, d, d_row0, stride, width, g)
        }
        GroupValues::Floats(v) => {
            gradient_chunk_tiles::<REGS, _>(b, v, chunk, d, d_row0, stride, width, g)
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn gradient_chunk_tiles<const REGS: usize, V: GroupValue>(
    b: &BlockCsc,
    val: &[V],
    chunk: usize,
    d: &[f32],
    d_row0: usize,
    stride: usize,
    width: usize,
    g: &mut [f32],
) {
    let mut t0 = 0;
    while t0 < width {
        let n = (width - t0).min(gradient_tile_width(REGS));
        match n {
            64 => gradient_tile::<64, V>(b, val, chunk, d, d_row0, stride, width, t0, g),
            48 => gradient_tile::<48, V>(b, val, chunk, d, d_row0, stride, width, t0, g),
            32 => gradient_tile::<32, V>(b, val, chunk, d, d_row0, stride, width, t0, g),
            _ => gradient_tile::<16, V>(b, val, chunk, d, d_row0, stride, width, t0, g),
        }
        t0 += n;
    }
}

#[inline(always)]
fn gradient_body<const REGS: usize>(
    b: &BlockCsc,
    d: &[f32],
    stride: usize,
    width: usize,
    g: &mut [f32],
) {
    match &b.entry_val {
        GroupValues::Bytes(v) => gradient_tiles::<REGS, _>(b, v, d, stride, width, g),
        GroupValues::Floats(v) => gradient_tiles::<REGS, _>(b, v, d, stride, width, g),
    }
}

#[inline(always)]
fn gradient_tiles<const REGS: usize, V: GroupValue>(
    b: &BlockCsc,
    val: &[V],
    d: &[f32],
    stride: usize,
    width: usize,
    g: &mut [f32],
) {
    let mut t0 = 0;
    while t0 < width {
        let n = (width - t0).min(gradient_tile_width(REGS));
        for chunk in 0..b.chunks() {
            let row0 = chunk * CHUNK;
            match n {
                64 => gradient_tile::<64, V>(b, val, chunk, d, row0, stride, width, t0, g),
                48 => gradient_tile::<48, V>(b, val, chunk, d, row0, stride, width, t0, g),
                32 => gradient_tile::<32, V>(b, val, chunk, d, row0, stride, width, t0, g),
                _ => gradient_tile::<16, V>(b, val, chunk, d, row0, stride, width, t0, g),
            }
        }
        t0 += n;
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn gradient_tile<const L: usize, V: GroupValue>(
    b: &BlockCsc,
    val: &[V],
    chunk: usize,
    d: &[f32],
    base: usize,
    stride: usize,
    width: usize,
    t0: usize,
    g: &mut [f32],
) {
    let runs = b.chunk_ptr[chunk] as usize..b.chunk_ptr[chunk + 1] as usize;
    for r in runs {
        let f0 = b.run_group[r] as usize * GROUP;
        let mut acc = [[0f32; L]; GROUP];
        let e = b.entry_ptr[r] as usize..b.entry_ptr[r + 1] as usize;
        for (&p, v) in b.entry_pos[e.clone()].iter().zip(&val[e]) {
            let v = v.widen();
            let at = (base + p as usize) * stride + t0;
            debug_assert!(chunk * CHUNK + (p as usize) < b.positions && at + L <= d.len());
            // SAFETY: position p of chunk `chunk` is a listed row (`rebuild`
            // writes positions of rows within their chunk), so `base + p` is
            // at most the last row of `d` the callers checked for (
            // `block_gradient_at`: `(positions − 1)·stride + width`;
            // `block_gradient_chunk`: `(d_row0 + rows − 1)·stride + width`),
            // and `t0 + L ≤ width`.
            let dp: &[f32; L] = unsafe { &*d.as_ptr().add(at).cast::<[f32; L]>() };
            for l in 0..L {
                acc[0][l] = v[0].mul_add(dp[l], acc[0][l]);
                acc[1][l] = v[1].mul_add(dp[l], acc[1][l]);
                acc[2][l] = v[2].mul_add(dp[l], acc[2][l]);
                acc[3][l] = v[3].mul_add(dp[l], acc[3][l]);
            }
        }
        for (q, aq) in acc.iter().enumerate() {
            let at = (f0 + q) * width + t0;
            for (gv, &a) in g[at..at + L].iter_mut().zip(aq) {
                *gv += a;
            }
        }
    }
}

#[cfg(test)]
mod tests;
