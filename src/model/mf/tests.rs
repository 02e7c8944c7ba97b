//! Tests of MF: the one-trial kernels, ALS itself, and the lane kernels and
//! cohort stepping against the one-trial path bit for bit at every kernel level.

use super::single::{
    cholesky_solve_upper, dot, normal_equations, normal_equations_fixed, normal_equations_tiled,
};
use super::*;
use crate::data::synthetic_ratings;

fn small(p: usize) -> Mf {
    let data = Arc::new(synthetic_ratings::movielens_like(5, 0.05));
    Mf::new(
        data,
        &MfConfig {
            factors: p,
            regularization: 0.1,
            init_seed: 9,
        },
    )
}

fn ctx(k: usize) -> IterCtx {
    IterCtx {
        iteration: k,
        run_seed: 0,
    }
}

#[test]
fn fixed_size_normal_equations_equal_the_general_ones() {
    let data = synthetic_ratings::movielens_like(5, 0.05);
    for p in [5usize, 10, 20] {
        let other: Vec<f64> = (0..data.items * p)
            .map(|v| ((v * 37) % 101) as f64 / 50.0 - 1.0)
            .collect();
        let (idx, values) = data.user(0);
        let (mut g1, mut b1) = (vec![0.0; p * p], vec![0.0; p]);
        let (mut g2, mut b2) = (vec![0.0; p * p], vec![0.0; p]);
        normal_equations(p, idx, values, &other, &mut g1, &mut b1);
        match p {
            5 => normal_equations_fixed::<5>(idx, values, &other, &mut g2, &mut b2),
            10 => normal_equations_fixed::<10>(idx, values, &other, &mut g2, &mut b2),
            _ => normal_equations_fixed::<20>(idx, values, &other, &mut g2, &mut b2),
        }
        assert_eq!(b1, b2);
        for s in 0..p {
            assert_eq!(g1[s * p + s..(s + 1) * p], g2[s * p + s..(s + 1) * p]);
        }
        if p == 20 {
            let (mut g3, mut b3) = (vec![0.0; p * p], vec![0.0; p]);
            let mut gathered = Vec::new();
            normal_equations_tiled::<20>(idx, values, &other, &mut gathered, &mut g3, &mut b3);
            assert_eq!(b1, b3);
            for s in 0..p {
                assert_eq!(g1[s * p + s..(s + 1) * p], g3[s * p + s..(s + 1) * p]);
            }
        }
    }
}

#[test]
fn cholesky_solves_a_known_system() {
    // A = [[4, 2, 0], [2, 5, 1], [0, 1, 3]], x = [1, -1, 2].
    let mut a = vec![4.0, 2.0, 0.0, 0.0, 5.0, 1.0, 0.0, 0.0, 3.0];
    let mut b = vec![2.0, -1.0, 5.0];
    cholesky_solve_upper(&mut a, &mut b, 3);
    for (x, want) in b.iter().zip([1.0, -1.0, 2.0]) {
        assert!((x - want).abs() < 1e-12, "{b:?}");
    }
}

#[test]
fn training_lowers_the_loss_and_the_objective_never_rises() {
    let m = small(5);
    let mut s = m.init();
    let mut ws = m.workspace();
    let l0 = m.metric(&s, &mut ws);
    let mut j = m.objective(&s);
    for k in 0..15 {
        m.step(&mut s, ctx(k), &mut ws);
        let j1 = m.objective(&s);
        assert!(
            j1 <= j * (1.0 + 1e-12),
            "objective rose at {k}: {j} -> {j1}"
        );
        j = j1;
    }
    let l1 = m.metric(&s, &mut ws);
    assert!(l1 < 0.1 * l0, "loss {l0} -> {l1}");
}

#[test]
fn a_half_step_solves_the_normal_equations() {
    let m = small(4);
    let mut s = m.init();
    let mut ws = m.workspace();
    m.step(&mut s, ctx(0), &mut ws);
    // Gradient of J with respect to l_0 vanishes after the user half-step
    // only if R did not move afterwards; check the item half-step instead:
    // for item 3, Σ_i (A_i3 − l_i·r_3) l_i − λ r_3 = 0.
    let p = m.factors();
    let (users, values) = m.data().item(3);
    let r3 = &s.r[3 * p..4 * p];
    let mut g = vec![0.0; p];
    for (&i, &a) in users.iter().zip(values) {
        let li = &s.l[i as usize * p..(i as usize + 1) * p];
        let e = a as f64 - dot(li, r3);
        for t in 0..p {
            g[t] += e * li[t];
        }
    }
    for t in 0..p {
        g[t] -= 0.1 * r3[t];
        assert!(g[t].abs() < 1e-9, "gradient {g:?}");
    }
}

#[test]
fn init_is_uniform_and_deterministic() {
    let m = small(3);
    let a = m.init();
    assert_eq!(a, m.init());
    assert!(a.l.iter().chain(&a.r).all(|v| (0.0..1.0).contains(v)));
    let mean = a.r.iter().sum::<f64>() / a.r.len() as f64;
    assert!((mean - 0.5).abs() < 0.05, "{mean}");
}

#[test]
fn block_copy_restores_exactly() {
    let m = small(3);
    let mut ws = m.workspace();
    let x0 = m.init();
    let mut x = x0.clone();
    m.step(&mut x, ctx(0), &mut ws);
    let users = m.data().users;
    let blocks = m.block_count();
    assert_eq!(blocks, users + m.data().items);
    for b in [0, users - 1, users, blocks - 1] {
        assert!(m.block_distance(&x, &x0, b) > 0.0);
        let mut y = x.clone();
        m.copy_block(&x0, &mut y, b);
        assert_eq!(m.block_distance(&y, &x0, b), 0.0);
        // Only that block changed, and copying back round-trips bit for bit.
        for other in [0, users - 1, users, blocks - 1] {
            if other != b {
                assert_eq!(m.block_distance(&y, &x, other), 0.0);
            }
        }
        m.copy_block(&x, &mut y, b);
        assert_eq!(y, x);
    }
    let total: f64 = (0..blocks)
        .map(|b| m.block_distance(&x, &x0, b).powi(2))
        .sum::<f64>()
        .sqrt();
    let direct: f64 =
        x.l.iter()
            .chain(&x.r)
            .zip(x0.l.iter().chain(&x0.r))
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            .sqrt();
    assert!((m.distance(&x, &x0) - direct).abs() < 1e-9 * direct);
    assert!((total - direct).abs() < 1e-9 * direct);
}

/// A model on a small stand-in with `p` factors and `lambda`.
fn model(movielens: bool, p: usize, lambda: f64) -> Mf {
    let data = if movielens {
        synthetic_ratings::movielens_like(3, 0.04)
    } else {
        synthetic_ratings::jester_like(3, 0.01)
    };
    Mf::new(
        Arc::new(data),
        &MfConfig {
            factors: p,
            regularization: lambda,
            init_seed: 4,
        },
    )
}

/// `count` different states: x(0) stepped `1 + i` times, then nudged so
/// that no two states are the same.
fn distinct_states(m: &Mf, count: usize) -> Vec<MfState> {
    let mut ws = m.workspace();
    let mut s = m.init();
    (0..count)
        .map(|i| {
            m.step(&mut s, ctx(i), &mut ws);
            let mut t = s.clone();
            t.l_mut()[i % 7] += 0.25 * (i as f64 + 1.0);
            t.r_mut()[(3 * i) % 11] -= 0.125;
            t
        })
        .collect()
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// One half-step of every state in `states` as lanes (the item side if
/// `items`), swept in blocks of `block` rows of the other side (0: row
/// by row), and each lane's squared error afterwards. Checks on the way
/// that what the half-step hands over for each solved row ([`lanes::Solved`])
/// equals the separate passes bit for bit: the rows unpacked into each
/// trial, and the rows' squared residuals added in order.
fn lane_half_step(
    m: &Mf,
    states: &[MfState],
    items: bool,
    block: usize,
    level: crate::simd::Level,
) -> (Vec<V>, V) {
    let (d, p) = (m.data(), m.factors());
    let (mut l, mut r) = (lanes::zeros(d.users * p), lanes::zeros(d.items * p));
    lanes::pack(&mut l, &states.iter().map(|s| s.l()).collect::<Vec<_>>());
    lanes::pack(&mut r, &states.iter().map(|s| s.r()).collect::<Vec<_>>());
    let (mut scratch, mut cursor) = (Vec::new(), Vec::new());
    let (ptr, idx, values, other, out) = if items {
        (&d.item_ptr, &d.item_users, &d.item_values, &l, &mut r)
    } else {
        (&d.user_ptr, &d.user_items, &d.user_values, &r, &mut l)
    };
    let mut unpacked: Vec<Vec<f64>> = vec![vec![f64::NAN; out.len()]; states.len()];
    let mut row_sse = Vec::new();
    {
        let mut trials: Vec<&mut [f64]> = unpacked.iter_mut().map(|u| &mut u[..]).collect();
        lanes::half_step_at(
            level,
            p,
            m.regularization(),
            ptr,
            idx,
            values,
            other,
            out,
            block,
            &mut scratch,
            &mut cursor,
            &mut lanes::Solved {
                trials: &mut trials,
                row_sse: Some(&mut row_sse),
            },
        );
    }
    for (lane, u) in unpacked.iter().enumerate() {
        let want: Vec<f64> = out.iter().map(|v| v[lane]).collect();
        assert_eq!(bits(u), bits(&want), "unpacked lane {lane}, {level:?}");
    }
    let separate = lanes::squared_error_at(level, p, ptr, idx, values, out, other);
    let mut summed = V::splat(0.0);
    for row in &row_sse {
        for (t, v) in summed.0.iter_mut().zip(&row.0) {
            *t += v;
        }
    }
    assert_eq!(bits(&summed.0), bits(&separate.0), "row sums, {level:?}");
    let (ptr, idx, values, rows, other) = m.sse_order(&l, &r);
    let sse = lanes::squared_error_at(level, p, ptr, idx, values, rows, other);
    (if items { r } else { l }, sse)
}

#[test]
fn squared_error_is_summed_over_the_larger_side_the_same_way_at_every_level() {
    use crate::simd::Level;
    // The MovieLens stand-in has more items than users, the Jester one
    // more users than items.
    for (movielens, p) in [(true, 20), (true, 10), (true, 7), (false, 5), (false, 1)] {
        let m = model(movielens, p, 0.5);
        let d = m.data();
        assert_eq!(d.items > d.users, movielens);
        for count in [1usize, 3, W] {
            let states = distinct_states(&m, count);
            let (mut l, mut r) = (lanes::zeros(d.users * p), lanes::zeros(d.items * p));
            lanes::pack(&mut l, &states.iter().map(|s| s.l()).collect::<Vec<_>>());
            lanes::pack(&mut r, &states.iter().map(|s| s.r()).collect::<Vec<_>>());
            let (ptr, idx, values, rows, other) = m.sse_order(&l, &r);
            for level in Level::supported() {
                let got = lanes::squared_error_at(level, p, ptr, idx, values, rows, other);
                for (lane, s) in states.iter().enumerate() {
                    // The larger side's rows, named explicitly.
                    let want = if movielens {
                        single::squared_error_at(
                            Level::Portable,
                            p,
                            &d.item_ptr,
                            &d.item_users,
                            &d.item_values,
                            s.r(),
                            s.l(),
                        )
                    } else {
                        single::squared_error_at(
                            Level::Portable,
                            p,
                            &d.user_ptr,
                            &d.user_items,
                            &d.user_values,
                            s.l(),
                            s.r(),
                        )
                    };
                    assert_eq!(got[lane].to_bits(), want.to_bits(), "p = {p}, {level:?}");
                    assert_eq!(m.squared_error(s).to_bits(), want.to_bits());
                    // The other order sums the same terms: equal up to rounding.
                    let by_user = single::squared_error(
                        p,
                        &d.user_ptr,
                        &d.user_items,
                        &d.user_values,
                        s.l(),
                        s.r(),
                    );
                    assert!(
                        (by_user - want).abs() <= 1e-12 * want,
                        "{by_user} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn lane_kernels_equal_the_one_trial_kernels_bit_for_bit() {
    let level = crate::simd::level();
    for (movielens, p, lambda) in [
        (true, 20, 0.1),
        (true, 10, 1.0),
        (true, 7, 0.5),
        (false, 5, 10.0),
        (false, 1, 2.0),
    ] {
        let m = model(movielens, p, lambda);
        let d = m.data();
        for count in [1usize, 3, W] {
            let states = distinct_states(&m, count);
            for items in [false, true] {
                for block in [0, 1, 7, 1000] {
                    let (got, sse) = lane_half_step(&m, &states, items, block, level);
                    for (lane, s) in states.iter().enumerate() {
                        let mut alone = s.clone();
                        let (ptr, idx, values, other, out) = if items {
                            (
                                &d.item_ptr,
                                &d.item_users,
                                &d.item_values,
                                &s.l,
                                &mut alone.r,
                            )
                        } else {
                            (
                                &d.user_ptr,
                                &d.user_items,
                                &d.user_values,
                                &s.r,
                                &mut alone.l,
                            )
                        };
                        let (mut g, mut b, mut gathered) =
                            (vec![0.0; p * p], vec![0.0; p], Vec::new());
                        single::half_step(
                            p,
                            lambda,
                            ptr,
                            idx,
                            values,
                            other,
                            out,
                            &mut g,
                            &mut b,
                            &mut gathered,
                        );
                        let want = if items { alone.r() } else { alone.l() };
                        let lane_bits: Vec<f64> = got.iter().map(|v| v[lane]).collect();
                        assert_eq!(
                            bits(&lane_bits),
                            bits(want),
                            "p = {p}, items {items}, block {block}, lane {lane} of {count}"
                        );
                        assert_eq!(sse[lane].to_bits(), m.squared_error(&alone).to_bits());
                    }
                    // Unused lanes stay zero.
                    for lane in count..W {
                        assert!(got.iter().all(|v| v[lane] == 0.0));
                    }
                }
            }
        }
    }
}

#[test]
fn every_kernel_level_gives_the_portable_bits() {
    use crate::simd::Level;
    for (movielens, p, lambda) in [(true, 20, 0.1), (false, 5, 10.0), (true, 6, 1.0)] {
        let m = model(movielens, p, lambda);
        let d = m.data();
        let states = distinct_states(&m, 5);
        let lanes_at = |level: Level| {
            let mut flat = Vec::new();
            for (items, block) in [(false, 0), (true, 0), (true, 9)] {
                let (x, sse) = lane_half_step(&m, &states, items, block, level);
                flat.extend(x.iter().flat_map(|v| v.0));
                flat.extend(sse.0);
            }
            bits(&flat)
        };
        let s = &states[2];
        let single_at = |level: Level| {
            let mut r = s.r().to_vec();
            let (mut g, mut b, mut gathered) = (vec![0.0; p * p], vec![0.0; p], Vec::new());
            single::half_step_at(
                level,
                p,
                lambda,
                &d.item_ptr,
                &d.item_users,
                &d.item_values,
                s.l(),
                &mut r,
                &mut g,
                &mut b,
                &mut gathered,
            );
            let sse = single::squared_error_at(
                level,
                p,
                &d.user_ptr,
                &d.user_items,
                &d.user_values,
                s.l(),
                &r,
            );
            r.push(sse);
            bits(&r)
        };
        let (lanes0, single0) = (lanes_at(Level::Portable), single_at(Level::Portable));
        for level in Level::supported() {
            assert_eq!(lanes_at(level), lanes0, "lanes, p = {p}, {level:?}");
            assert_eq!(single_at(level), single0, "one trial, p = {p}, {level:?}");
        }
    }
}

/// Cohorts of several lane groups, members joining and leaving: every
/// member's metrics and states equal its run alone, bit for bit.
#[test]
fn cohort_members_match_single_runs() {
    for (movielens, p, lambda) in [(true, 20, 0.1), (false, 5, 10.0)] {
        let m = model(movielens, p, lambda);
        let n = W + 3;
        let starts = distinct_states(&m, n);
        // Member i is active at iterations join(i)..leave(i).
        let join = |i: usize| if i % 3 == 1 { 2 + i % 4 } else { 0 };
        let leave = |i: usize| if i % 4 == 2 { 4 } else { 7 };
        let mut alone_metrics = vec![Vec::new(); n];
        let mut alone_states = starts.clone();
        for i in 0..n {
            let mut ws = m.workspace();
            for k in join(i)..leave(i) {
                alone_metrics[i].push(m.metric(&alone_states[i], &mut ws));
                m.step(&mut alone_states[i], ctx(k), &mut ws);
            }
            alone_metrics[i].push(m.squared_error(&alone_states[i]));
        }
        let mut states = starts.clone();
        let mut ws = m.workspace();
        let mut metrics = vec![Vec::new(); n];
        for k in 0..8 {
            let active: Vec<bool> = (0..n).map(|i| join(i) <= k && k <= leave(i)).collect();
            let mut out = vec![f64::NAN; n];
            m.metric_many(&states, &active, ctx(k), &mut ws, &mut out);
            for i in 0..n {
                if active[i] {
                    metrics[i].push(out[i]);
                }
            }
            let stepping: Vec<bool> = (0..n).map(|i| active[i] && k < leave(i)).collect();
            m.step_many(&mut states, &stepping, ctx(k), &mut ws);
        }
        for i in 0..n {
            assert_eq!(
                bits(&metrics[i]),
                bits(&alone_metrics[i]),
                "metrics of member {i}, p = {p}"
            );
            assert_eq!(bits(states[i].l()), bits(alone_states[i].l()), "L of {i}");
            assert_eq!(bits(states[i].r()), bits(alone_states[i].r()), "R of {i}");
        }
    }
}

#[test]
fn the_cached_metric_is_the_metric_and_block_writes_forget_it() {
    let m = model(true, 20, 0.1);
    let mut ws = m.workspace();
    let mut s = m.init();
    assert!(s.sse.is_none());
    m.step(&mut s, ctx(0), &mut ws);
    let cached = s.sse.expect("a step caches its metric");
    assert_eq!(cached.to_bits(), m.squared_error(&s).to_bits());
    assert_eq!(m.metric(&s, &mut ws).to_bits(), cached.to_bits());
    let x0 = m.init();
    let mut t = s.clone();
    m.copy_block(&x0, &mut t, 0);
    assert!(t.sse.is_none());
    assert_eq!(
        m.metric(&t, &mut ws).to_bits(),
        m.squared_error(&t).to_bits()
    );
    assert_ne!(m.metric(&t, &mut ws), cached);
    let mut u = s.clone();
    u.r_mut()[0] += 1.0;
    assert!(u.sse.is_none());
    let mut states = vec![s.clone(), t.clone(), u.clone()];
    m.step_many(&mut states, &[true, true, true], ctx(1), &mut ws);
    for st in &states {
        assert_eq!(
            st.sse.expect("cached").to_bits(),
            m.squared_error(st).to_bits()
        );
    }
}

/// Rows with fewer ratings than factors are solved in the dual form
/// (`Xᵀ (XXᵀ + λI)⁻¹ a`): the ridge solution the normal equations give, to
/// rounding. The p = 20 stand-in has such rows (as MovieLens has).
#[test]
fn the_dual_form_gives_the_normal_equations_solution() {
    let (p, lambda) = (20, 0.1);
    let m = model(true, p, lambda);
    let d = m.data();
    let s = distinct_states(&m, 2).remove(1);
    let mut dual_rows = 0;
    for j in 0..d.items {
        let (users, values) = d.item(j);
        if !single::uses_dual(users.len(), p) {
            continue;
        }
        dual_rows += 1;
        let (mut out, mut g, mut b, mut gathered) =
            (vec![0.0; p], vec![0.0; p * p], vec![0.0; p], Vec::new());
        single::solve_one(
            p,
            lambda,
            users,
            values,
            &s.l,
            &mut out,
            &mut g,
            &mut b,
            &mut gathered,
        );
        normal_equations(p, users, values, &s.l, &mut g, &mut b);
        for t in 0..p {
            g[t * p + t] += lambda;
        }
        cholesky_solve_upper(&mut g, &mut b, p);
        for t in 0..p {
            assert!(
                (out[t] - b[t]).abs() <= 1e-9 * (1.0 + b[t].abs()),
                "item {j} ({} ratings), factor {t}: dual {} vs normal equations {}",
                users.len(),
                out[t],
                b[t]
            );
        }
    }
    assert!(dual_rows >= 10, "only {dual_rows} rows in the dual form");
}

/// Packing and unpacking (register transposes at the vector levels) move
/// every entry where the definition says, at every level, for full and
/// partial groups and lengths that are not a multiple of the block.
#[test]
fn pack_and_unpack_are_transposes_at_every_level() {
    use crate::simd::Level;
    for (trials, len) in [(W, 8 * 7), (W, 61), (3, 45), (1, 5)] {
        let srcs: Vec<Vec<f64>> = (0..trials)
            .map(|l| (0..len).map(|k| (l * 1000 + k) as f64 + 0.5).collect())
            .collect();
        let refs: Vec<&[f64]> = srcs.iter().map(|s| &s[..]).collect();
        for level in Level::supported() {
            let mut packed = lanes::zeros(len);
            lanes::pack_at(level, &mut packed, &refs);
            for (k, v) in packed.iter().enumerate() {
                for (l, &x) in v.0.iter().enumerate() {
                    let want = srcs.get(l).map_or(0.0, |s| s[k]);
                    assert_eq!(x, want, "pack entry {k} lane {l}, {level:?}");
                }
            }
            // Rows of 5 entries; unpack rows 1..len/5 only.
            let rows = 1..len / 5;
            let mut outs: Vec<Vec<f64>> = vec![vec![-1.0; len]; trials];
            let mut dsts: Vec<&mut [f64]> = outs.iter_mut().map(|o| &mut o[..]).collect();
            lanes::unpack_rows_at(level, &packed, 5, rows.clone(), &mut dsts);
            for (l, out) in outs.iter().enumerate() {
                for (k, &x) in out.iter().enumerate() {
                    let inside = (rows.start * 5..rows.end * 5).contains(&k);
                    let want = if inside { srcs[l][k] } else { -1.0 };
                    assert_eq!(x, want, "unpack entry {k} lane {l}, {level:?}");
                }
            }
        }
    }
}
