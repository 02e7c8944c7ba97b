//! Unit tests of the block-sparse products and the regrouping.

use super::*;
use crate::simd::Level;

fn sample(rows: usize, cols: usize) -> (Vec<f32>, Csr) {
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| {
            if (i * 7919) % 5 < 3 {
                0.0
            } else {
                ((i * 31) % 13) as f32 * 0.37 - 1.1
            }
        })
        .collect();
    let csr = Csr::from_dense(&x, rows, cols);
    (x, csr)
}

/// Integer pixel-like values 0..=255 (and zeros): kept as bytes.
fn byte_sample(rows: usize, cols: usize) -> Csr {
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| {
            if (i * 7919) % 5 < 3 {
                0.0
            } else {
                ((i * 31) % 256) as f32
            }
        })
        .collect();
    Csr::from_dense(&x, rows, cols)
}

#[test]
fn products_match_the_sparse_chains_bit_for_bit_at_every_level() {
    let (rows, cols) = (150, 41);
    let (_, floats) = sample(rows, cols);
    let bytes = byte_sample(rows, cols);
    assert!(matches!(RowGroups::of(&floats).val, GroupValues::Floats(_)));
    assert!(matches!(RowGroups::of(&bytes).val, GroupValues::Bytes(_)));
    for csr in [floats, bytes] {
        let b = BlockCsc::build(&RowGroups::of(&csr), &list_of(rows));
        assert_eq!(
            std::mem::discriminant(&b.entry_val),
            std::mem::discriminant(&RowGroups::of(&csr).val),
            "the regrouped values are stored as the dataset's"
        );
        check_products(&csr, cols);
    }
}

fn list_of(rows: usize) -> Vec<u32> {
    (0..rows as u32).rev().step_by(2).chain([3, 7]).collect()
}

/// Every level's products of `csr`'s regrouped rows against one fused
/// chain per output over the non-zeros, bit for bit.
fn check_products(csr: &Csr, cols: usize) {
    let (rows, width) = (csr.rows, 80);
    let list = list_of(rows);
    let b = BlockCsc::build(&RowGroups::of(csr), &list);
    assert_eq!(
        b.nnz,
        list.iter()
            .map(|&r| csr.row(r as usize).0.len())
            .sum::<usize>()
    );
    let pf = b.padded_features();
    let w: Vec<f32> = (0..pf * width)
        .map(|i| {
            if i >= cols * width {
                0.0
            } else {
                ((i * 31) % 17) as f32 * 0.013 - 0.1
            }
        })
        .collect();
    let d: Vec<f32> = (0..list.len() * width)
        .map(|i| ((i * 17) % 23) as f32 * 0.07 - 0.8)
        .collect();
    // The reference: one fused chain per output over the non-zeros.
    let mut z_ref = vec![0f32; list.len() * width];
    for (p, &r) in list.iter().enumerate() {
        let (cs, vs) = csr.row(r as usize);
        for c in 0..width {
            let mut acc = 0f32;
            for (&j, &v) in cs.iter().zip(vs) {
                acc = v.mul_add(w[j as usize * width + c], acc);
            }
            z_ref[p * width + c] = acc;
        }
    }
    let mut g_ref = vec![0f32; pf * width];
    for chunk in list.chunks(CHUNK).enumerate() {
        let (ci, rows_c) = chunk;
        let mut part = vec![0f32; pf * width];
        for (pl, &r) in rows_c.iter().enumerate() {
            let p = ci * CHUNK + pl;
            let (cs, vs) = csr.row(r as usize);
            for (&j, &v) in cs.iter().zip(vs) {
                for c in 0..width {
                    let i = j as usize * width + c;
                    part[i] = v.mul_add(d[p * width + c], part[i]);
                }
            }
        }
        for (gv, pv) in g_ref.iter_mut().zip(&part) {
            *gv += pv;
        }
    }
    for level in Level::supported() {
        let stride = stride_for(width);
        let mut z = vec![0f32; CHUNK * stride];
        for ch in 0..b.chunks() {
            block_forward_at(level, &b, ch, &w, width, &mut z, stride);
            let n = (list.len() - ch * CHUNK).min(CHUNK);
            for p in 0..n {
                for c in 0..width {
                    assert_eq!(
                        z[p * stride + c].to_bits(),
                        z_ref[(ch * CHUNK + p) * width + c].to_bits(),
                        "{level:?} chunk {ch} row {p} column {c}"
                    );
                }
            }
        }
        let mut g = vec![0f32; pf * width];
        block_gradient_at(level, &b, &d, width, width, &mut g);
        for i in 0..pf * width {
            assert_eq!(g[i].to_bits(), g_ref[i].to_bits(), "{level:?} gradient {i}");
        }
    }
    // Chunk by chunk from chunk-local deltas: the same bits.
    let mut g = vec![0f32; pf * width];
    for ch in 0..b.chunks() {
        let n = (list.len() - ch * CHUNK).min(CHUNK);
        let local = &d[ch * CHUNK * width..(ch * CHUNK + n) * width];
        block_gradient_chunk(&b, ch, local, 0, width, width, &mut g);
    }
    for i in 0..pf * width {
        assert_eq!(g[i].to_bits(), g_ref[i].to_bits(), "chunked gradient {i}");
    }
}

#[test]
fn byte_valued_data_regroups_to_the_same_floats() {
    // Integer pixels 0..=255 (and zeros) are kept as bytes.
    let (rows, cols) = (200, 37);
    let csr = byte_sample(rows, cols);
    let x: Vec<f32> = (0..rows)
        .flat_map(|r| {
            let mut d = vec![0f32; cols];
            let (cs, vs) = csr.row(r);
            for (&j, &v) in cs.iter().zip(vs) {
                d[j as usize] = v;
            }
            d
        })
        .collect();
    let bytes = RowGroups::of(&csr);
    assert!(matches!(bytes.val, GroupValues::Bytes(_)));
    assert_eq!(bytes.entry_bytes(), 2 + GROUP);
    let floats = RowGroups {
        val: match &bytes.val {
            GroupValues::Bytes(v) => GroupValues::Floats(v.iter().map(|g| g.widen()).collect()),
            GroupValues::Floats(_) => unreachable!("checked above"),
        },
        ..bytes.clone()
    };
    let list: Vec<u32> = (0..rows as u32)
        .rev()
        .step_by(3)
        .chain([5, 11, 0])
        .collect();
    let (b, f) = (
        BlockCsc::build(&bytes, &list),
        BlockCsc::build(&floats, &list),
    );
    // The same entries; the byte copy's values widen to the floats.
    assert!(matches!(b.entry_val, GroupValues::Bytes(_)));
    let widened = BlockCsc {
        entry_val: match &b.entry_val {
            GroupValues::Bytes(v) => GroupValues::Floats(v.iter().map(|g| g.widen()).collect()),
            GroupValues::Floats(_) => unreachable!("checked above"),
        },
        ..b.clone()
    };
    assert_eq!(widened, f);
    assert!(BYTE_F32.iter().enumerate().all(|(i, &v)| v == i as f32));
    assert_eq!(
        b.nnz,
        list.iter()
            .map(|&r| csr.row(r as usize).0.len())
            .sum::<usize>()
    );
    // A value off the byte grid (or negative) keeps the data as floats.
    for odd in [0.5f32, -1.0, 256.0] {
        let mut y = x.clone();
        y[1] = odd;
        let rg = RowGroups::of(&Csr::from_dense(&y, rows, cols));
        assert!(matches!(rg.val, GroupValues::Floats(_)), "{odd}");
    }
}
