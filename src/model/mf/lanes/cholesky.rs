//! Cholesky solves of the lane systems, lane by lane in the scalar order of
//! [`crate::model::mf::single::cholesky_solve_upper`].

// Index loops over several `[system][row]` register arrays at once keep each
// one a plain register operation (no iterator adapters in the hot loops).
#![allow(clippy::needless_range_loop)]

use super::V;
use super::simd::Simd;

/// Solves `g · x = b` lane by lane (`g` symmetric positive definite, its
/// upper triangle used); `b` becomes x and the upper triangle of `g` the
/// Cholesky factor U (A = UᵀU). U is computed row by row, each entry
/// accumulated in registers: entry (j, c) is `A_jc − U_0j·U_0c − U_1j·U_1c −
/// …` in that order, then scaled by 1 / U_jj — exactly the sequence of
/// updates the right-looking scalar factorization
/// ([`super::single::cholesky_solve_upper`]) applies to it, so the bits are
/// the same.
#[inline(always)]
pub(super) fn cholesky_solve_p<S: Simd, const P: usize>(g: &mut [[V; P]; P], b: &mut [V; P]) {
    // Columns per block: 8 vectors fill half of AVX-512's 32 registers; at
    // AVX2 (8 whole vectors) 4. Blocks only group entries, each entry's
    // operations are the same, so the bits are too.
    let width = if S::REGS >= 32 { 8 } else { 4 };
    for j in 0..P {
        let mut inv = S::splat(0.0);
        let mut c0 = j;
        while c0 < P {
            let cs = width.min(P - c0);
            inv = match cs {
                8 => chol_block_p::<S, P, 8>(g, j, c0, inv),
                7 => chol_block_p::<S, P, 7>(g, j, c0, inv),
                6 => chol_block_p::<S, P, 6>(g, j, c0, inv),
                5 => chol_block_p::<S, P, 5>(g, j, c0, inv),
                4 => chol_block_p::<S, P, 4>(g, j, c0, inv),
                3 => chol_block_p::<S, P, 3>(g, j, c0, inv),
                2 => chol_block_p::<S, P, 2>(g, j, c0, inv),
                _ => chol_block_p::<S, P, 1>(g, j, c0, inv),
            };
            c0 += cs;
        }
    }
    // (Plain loops, not `std::array::from_fn`: see `cholesky_solve_many`.)
    let mut x = [S::splat(0.0); P];
    for s in 0..P {
        x[s] = S::load(&b[s]);
    }
    // Uᵀ y = b: y_j = b_j / U_jj, then b_i −= U_ji · y_j for i > j.
    for j in 0..P {
        let y = S::div(x[j], S::load(&g[j][j]));
        x[j] = y;
        for i in j + 1..P {
            x[i] = S::fnma(S::load(&g[j][i]), y, x[i]);
        }
    }
    // U x = y: x_j = (y_j − Σ_{t>j} U_jt x_t) / U_jj, the sum from −0 in t order.
    for j in (0..P).rev() {
        let mut s = S::splat(-0.0);
        for t in j + 1..P {
            s = S::fma(S::load(&g[j][t]), x[t], s);
        }
        x[j] = S::div(S::sub(x[j], s), S::load(&g[j][j]));
    }
    for s in 0..P {
        S::store(x[s], &mut b[s]);
    }
}

/// Row j of U, columns `c0..c0+CS`. The block with c0 = j holds the pivot
/// and returns 1 / U_jj; later blocks scale by `inv` and return it.
#[inline(always)]
fn chol_block_p<S: Simd, const P: usize, const CS: usize>(
    g: &mut [[V; P]; P],
    j: usize,
    c0: usize,
    inv: S::R,
) -> S::R {
    let row: &[V; CS] = g[j][c0..c0 + CS].try_into().expect("CS entries");
    let mut t = [S::splat(0.0); CS];
    for c in 0..CS {
        t[c] = S::load(&row[c]);
    }
    for gk in &g[..j] {
        let f = S::load(&gk[j]);
        let u: &[V; CS] = gk[c0..c0 + CS].try_into().expect("CS entries");
        for c in 0..CS {
            t[c] = S::fnma(f, S::load(&u[c]), t[c]);
        }
    }
    let inv = if c0 == j {
        let d = S::pivot(t[0]);
        t[0] = d;
        let inv = S::div(S::splat(1.0), d);
        for v in t.iter_mut().skip(1) {
            *v = S::mul(*v, inv);
        }
        inv
    } else {
        for v in t.iter_mut() {
            *v = S::mul(*v, inv);
        }
        inv
    };
    let row: &mut [V; CS] = (&mut g[j][c0..c0 + CS]).try_into().expect("CS entries");
    for c in 0..CS {
        S::store(t[c], &mut row[c]);
    }
    inv
}

/// [`cholesky_solve_p`] for a p known only at run time.
#[inline(always)]
pub(super) fn cholesky_solve<S: Simd>(p: usize, gram: &mut [V], rhs: &mut [V]) {
    for j in 0..p {
        let mut inv = S::splat(0.0);
        for c in j..p {
            let mut t = S::load(&gram[j * p + c]);
            for k in 0..j {
                t = S::fnma(S::load(&gram[k * p + j]), S::load(&gram[k * p + c]), t);
            }
            if c == j {
                t = S::pivot(t);
                inv = S::div(S::splat(1.0), t);
            } else {
                t = S::mul(t, inv);
            }
            S::store(t, &mut gram[j * p + c]);
        }
    }
    for j in 0..p {
        let y = S::div(S::load(&rhs[j]), S::load(&gram[j * p + j]));
        S::store(y, &mut rhs[j]);
        for i in j + 1..p {
            let b = S::fnma(S::load(&gram[j * p + i]), y, S::load(&rhs[i]));
            S::store(b, &mut rhs[i]);
        }
    }
    for j in (0..p).rev() {
        let mut s = S::splat(-0.0);
        for t in j + 1..p {
            s = S::fma(S::load(&gram[j * p + t]), S::load(&rhs[t]), s);
        }
        let x = S::div(S::sub(S::load(&rhs[j]), s), S::load(&gram[j * p + j]));
        S::store(x, &mut rhs[j]);
    }
}

/// Systems solved side by side by [`cholesky_solve_many`].
pub(super) const NB: usize = 4;

/// One system of [`cholesky_solve_many`]: the matrix and the right-hand side.
type Sys<'a, const P: usize> = (&'a mut [[V; P]; P], &'a mut [V; P]);

/// [`cholesky_solve_p`] for [`NB`] independent systems at once, `sys` holding
/// them one after the other (`P² + P` entries each: the matrix row-major, then
/// the right-hand side, as [`super::system`] lays them out).
///
/// One system alone is a chain of dependent operations (each entry of U a
/// sum in k order, each substitution a sum in t order, a square root and a
/// division per row), so it waits on latencies far more than on the FMA
/// units. Here every operation is issued for the `NB` systems in turn: each
/// system still gets exactly the operations of [`cholesky_solve_p`] in the
/// same order (so the same bits), but `NB` independent chains keep the units
/// busy.
#[inline(always)]
pub(super) fn cholesky_solve_many<S: Simd, const P: usize>(sys: &mut [V]) {
    let per = P * P + P;
    let mut it = sys[..NB * per].chunks_exact_mut(per).map(|s| {
        let (g, b) = s.split_at_mut(P * P);
        let g: &mut [[V; P]; P] = g
            .as_chunks_mut::<P>()
            .0
            .try_into()
            .expect("P rows of P entries");
        let b: &mut [V; P] = b.try_into().expect("P entries");
        (g, b)
    });
    let mut g: [Sys<'_, P>; NB] = std::array::from_fn(|_| it.next().expect("NB systems"));
    let g = &mut g;
    // Columns per block: NB × 4 running entries at AVX-512 (32 registers);
    // at AVX2 (8 whole vectors) NB × 1 (NB × 2 measured the same, NB × 4
    // spilled: 0.8× on MovieLens). Blocks only group entries, each entry's
    // operations are the same, so the bits are too.
    let width = if S::REGS >= 32 { 4 } else { 1 };
    for j in 0..P {
        let mut inv = [S::splat(0.0); NB];
        let mut c0 = j;
        while c0 < P {
            let cs = width.min(P - c0);
            inv = match cs {
                4 => chol_block_many::<S, P, 4>(g, j, c0, inv),
                3 => chol_block_many::<S, P, 3>(g, j, c0, inv),
                2 => chol_block_many::<S, P, 2>(g, j, c0, inv),
                _ => chol_block_many::<S, P, 1>(g, j, c0, inv),
            };
            c0 += cs;
        }
    }
    // (Plain loops, not `std::array::from_fn`: its closures are not always
    // inlined into the `#[target_feature]` entry points.)
    let mut x = [[S::splat(0.0); P]; NB];
    for n in 0..NB {
        for s in 0..P {
            x[n][s] = S::load(&g[n].1[s]);
        }
    }
    // Uᵀ y = b: y_j = b_j / U_jj, then b_i −= U_ji · y_j for i > j.
    for j in 0..P {
        let mut y = [S::splat(0.0); NB];
        for n in 0..NB {
            y[n] = S::div(x[n][j], S::load(&g[n].0[j][j]));
            x[n][j] = y[n];
        }
        for i in j + 1..P {
            for n in 0..NB {
                x[n][i] = S::fnma(S::load(&g[n].0[j][i]), y[n], x[n][i]);
            }
        }
    }
    // U x = y: x_j = (y_j − Σ_{t>j} U_jt x_t) / U_jj, the sum from −0 in t order.
    for j in (0..P).rev() {
        let mut s = [S::splat(-0.0); NB];
        for t in j + 1..P {
            for n in 0..NB {
                s[n] = S::fma(S::load(&g[n].0[j][t]), x[n][t], s[n]);
            }
        }
        for n in 0..NB {
            x[n][j] = S::div(S::sub(x[n][j], s[n]), S::load(&g[n].0[j][j]));
        }
    }
    for n in 0..NB {
        for s in 0..P {
            S::store(x[n][s], &mut g[n].1[s]);
        }
    }
}

/// [`chol_block_p`] for the [`NB`] systems of [`cholesky_solve_many`]: row j
/// of each U, columns `c0..c0+CS`, with the same operations per entry.
#[inline(always)]
fn chol_block_many<S: Simd, const P: usize, const CS: usize>(
    g: &mut [Sys<'_, P>; NB],
    j: usize,
    c0: usize,
    inv: [S::R; NB],
) -> [S::R; NB] {
    let mut t = [[S::splat(0.0); CS]; NB];
    for n in 0..NB {
        let row: &[V; CS] = g[n].0[j][c0..c0 + CS].try_into().expect("CS entries");
        for c in 0..CS {
            t[n][c] = S::load(&row[c]);
        }
    }
    for k in 0..j {
        for n in 0..NB {
            let gk = &g[n].0[k];
            let f = S::load(&gk[j]);
            let u: &[V; CS] = gk[c0..c0 + CS].try_into().expect("CS entries");
            for c in 0..CS {
                t[n][c] = S::fnma(f, S::load(&u[c]), t[n][c]);
            }
        }
    }
    let mut out = inv;
    for n in 0..NB {
        if c0 == j {
            let d = S::pivot(t[n][0]);
            t[n][0] = d;
            let inv = S::div(S::splat(1.0), d);
            for v in t[n].iter_mut().skip(1) {
                *v = S::mul(*v, inv);
            }
            out[n] = inv;
        } else {
            for v in t[n].iter_mut() {
                *v = S::mul(*v, inv[n]);
            }
        }
        let row: &mut [V; CS] = (&mut g[n].0[j][c0..c0 + CS])
            .try_into()
            .expect("CS entries");
        for c in 0..CS {
            S::store(t[n][c], &mut row[c]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::simd::Portable;
    use super::*;

    /// [`NB`] different positive definite systems of size `P` (lanes differ too).
    fn systems<const P: usize>() -> Vec<V> {
        let per = P * P + P;
        let mut sys = vec![V::splat(0.0); NB * per];
        for (n, s) in sys.chunks_exact_mut(per).enumerate() {
            for l in 0..super::super::W {
                let x = |i: usize| ((i * 37 + n * 11 + l * 5) % 23) as f64 / 7.0 - 1.5;
                for a in 0..P {
                    for c in a..P {
                        let v: f64 = (0..P + 2).map(|k| x(a * 31 + k) * x(c * 31 + k)).sum();
                        s[a * P + c][l] = v + if a == c { 0.3 } else { 0.0 };
                    }
                    s[P * P + a][l] = x(a * 13 + 7);
                }
            }
        }
        sys
    }

    fn solve_both<const P: usize>() {
        let per = P * P + P;
        let mut many = systems::<P>();
        let mut one = many.clone();
        cholesky_solve_many::<Portable, P>(&mut many);
        for s in one.chunks_exact_mut(per) {
            let (g, b) = s.split_at_mut(P * P);
            let g: &mut [[V; P]; P] = g.as_chunks_mut::<P>().0.try_into().unwrap();
            cholesky_solve_p::<Portable, P>(g, b.try_into().unwrap());
        }
        let bits = |v: &[V]| -> Vec<u64> {
            v.iter()
                .flat_map(|x| x.0.iter().map(|f| f.to_bits()))
                .collect()
        };
        // The factors (upper triangles) and the solutions agree bit for bit.
        for (a, b) in many.chunks_exact(per).zip(one.chunks_exact(per)) {
            for r in 0..P {
                assert_eq!(
                    bits(&a[r * P + r..(r + 1) * P]),
                    bits(&b[r * P + r..(r + 1) * P])
                );
            }
            assert_eq!(bits(&a[P * P..]), bits(&b[P * P..]), "P = {P}");
        }
    }

    #[test]
    fn systems_side_by_side_give_each_system_alone_bit_for_bit() {
        solve_both::<1>();
        solve_both::<5>();
        solve_both::<10>();
        solve_both::<20>();
    }
}
