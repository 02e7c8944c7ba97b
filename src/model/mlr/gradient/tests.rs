//! Unit tests of the MLR gradient model.

use super::*;
use crate::data::synthetic;
use crate::model::mlr::MlrConfig;
use std::sync::Arc;

fn small(batch: usize) -> MlrGradient {
    let data = Arc::new(synthetic::mnist_like(11, 0.02));
    MlrGradient::new(
        Mlr::new(
            data,
            &MlrConfig {
                batch_size: batch,
                learning_rate: 1e-5,
            },
        ),
        500,
        3,
    )
}

/// The sparse kernels give the same bits at every kernel level, for the
/// fixed ten-class path and the general one.
#[test]
fn kernels_give_the_same_bits_at_every_level() {
    let m = small(64);
    let d = m.mlr.data();
    let rows: Vec<u32> = (0..64).collect();
    for c in [10usize, 7] {
        let w: Vec<f32> = (0..d.features * c)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 1e-4)
            .collect();
        let y: Vec<u8> = d.y.iter().map(|&v| v % c as u8).collect();
        let run = |level| {
            let (mut out, mut z, mut delta) = (vec![0f32; w.len()], Vec::new(), vec![0f32; c]);
            // Logits of an odd number of rows in a shuffled order (four at
            // a time, then the rest).
            let some: Vec<u32> = (0..23).map(|r| (r * 17 % 64) as u32).collect();
            let st = &m.starts;
            match &m.sparse {
                Sparse::Wide { cols, vals } => {
                    gradient_rows_at(
                        level, st, cols, vals, &y, &rows, &w, &mut out, &mut z, &mut delta,
                    );
                    forward_rows_at(level, st, cols, vals, &some, &w, c, &mut z);
                }
                Sparse::Pixels { cols, vals } => {
                    gradient_rows_px_at(
                        level, st, cols, vals, &y, &rows, &w, &mut out, &mut z, &mut delta,
                    );
                    forward_rows_px_at(level, st, cols, vals, &some, &w, c, &mut z);
                }
            }
            (out, z)
        };
        let reference = run(crate::simd::Level::Portable);
        assert!(reference.0.iter().any(|&g| g != 0.0));
        // Each row's logits are the one-row sum in feature order.
        let some: Vec<u32> = (0..23).map(|r| (r * 17 % 64) as u32).collect();
        for (&i, zi) in some.iter().zip(reference.1.chunks_exact(c)) {
            let mut one = vec![0f32; c];
            let (cols, vals) = m.sparse_row(i as usize);
            forward_sparse_body(&w, &cols, &vals, &mut one);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(zi), bits(&one), "row {i}, {c} classes");
        }
        for level in crate::simd::Level::supported() {
            let got = run(level);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got.0),
                bits(&reference.0),
                "{level:?} gradient, {c} classes"
            );
            assert_eq!(
                bits(&got.1),
                bits(&reference.1),
                "{level:?} logits, {c} classes"
            );
        }
    }
}

/// Raw pixels (whole numbers 0..=255) take the narrow layout, and it
/// gives the wide layout's bits: gradients at every kernel level, for
/// ten classes and for seven, and the loss and accuracy.
#[test]
fn the_narrow_layout_gives_the_wide_layouts_bits() {
    let mut data = synthetic::mnist_like(11, 0.02);
    for v in data.x.iter_mut() {
        *v = (*v * 255.0).round().clamp(0.0, 255.0);
    }
    let data = Arc::new(data);
    let config = MlrConfig {
        batch_size: 16,
        learning_rate: 1e-5,
    };
    let pixels = MlrGradient::new(Mlr::new(data.clone(), &config), 300, 3);
    let mut wide = MlrGradient::new(Mlr::new(data, &config), 300, 3);
    let Sparse::Pixels { cols: pc, vals: pv } = &pixels.sparse else {
        panic!("whole-number pixels should take the narrow layout")
    };
    let wc: Vec<u32> = pc.iter().map(|&j| j as u32).collect();
    let wv: Vec<f32> = pv.iter().map(|&v| v as f32).collect();
    let d = pixels.mlr.data();
    let rows: Vec<u32> = (0..40).map(|r| (r * 29 % 200) as u32).collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for c in [10usize, 7] {
        let w: Vec<f32> = (0..d.features * c)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 1e-5)
            .collect();
        let y: Vec<u8> = d.y.iter().map(|&v| v % c as u8).collect();
        for level in crate::simd::Level::supported() {
            let (mut a, mut b) = (vec![0f32; w.len()], vec![0f32; w.len()]);
            let (mut z, mut delta) = (Vec::new(), vec![0f32; c]);
            gradient_rows_at(
                level,
                &pixels.starts,
                &wc,
                &wv,
                &y,
                &rows,
                &w,
                &mut a,
                &mut z,
                &mut delta,
            );
            gradient_rows_px_at(
                level,
                &pixels.starts,
                pc,
                pv,
                &y,
                &rows,
                &w,
                &mut b,
                &mut z,
                &mut delta,
            );
            assert!(a.iter().any(|&g| g != 0.0));
            assert_eq!(bits(&a), bits(&b), "{level:?}, {c} classes");
        }
    }
    // The loss and accuracy through the model's own dispatch.
    wide.sparse = Sparse::Wide { cols: wc, vals: wv };
    let w: Vec<f32> = (0..d.features * 10)
        .map(|i| ((i * 13 % 97) as f32 - 48.0) * 1e-5)
        .collect();
    let (mut wa, mut wb) = (pixels.workspace(), wide.workspace());
    let (la, aa) = pixels.loss_and_accuracy(&w, &mut wa);
    let (lb, ab) = wide.loss_and_accuracy(&w, &mut wb);
    assert_eq!(la.to_bits(), lb.to_bits());
    assert_eq!(aa, ab);
}

#[test]
fn accuracy_counts_argmax_hits_and_matches_the_combined_pass() {
    let m = small(100);
    let mut ws = m.workspace();
    // All-zero weights: every logit ties, class 0 is predicted.
    let w0 = m.init_params();
    let zeros = m
        .eval_rows()
        .iter()
        .filter(|&&i| m.mlr.data().y[i as usize] == 0)
        .count() as f64;
    let acc = m.accuracy(&w0, &mut ws).unwrap();
    assert_eq!(acc, zeros / m.eval_rows().len() as f64);
    // After some training the one-pass loss and accuracy equal the separate ones.
    let mut w = w0.clone();
    let mut g = vec![0f32; m.dim()];
    for k in 0..20 {
        let draw = GradientDraw {
            run_seed: 1,
            index: k,
        };
        m.gradient(&w, draw, &mut g, &mut ws);
        for (x, d) in w.iter_mut().zip(&g) {
            *x -= 1e-5 * d;
        }
    }
    let (l, a) = m.loss_and_accuracy(&w, &mut ws);
    assert_eq!(l, m.loss(&w, &mut ws));
    assert_eq!(a, m.accuracy(&w, &mut ws));
    assert!(a.unwrap() > acc, "training improves accuracy");
    assert_eq!(m.block_len(), m.mlr.data().classes);
}

#[test]
fn gradient_matches_mlr_step() {
    // One SGD step with this gradient equals MLR's own step on the same minibatch.
    let m = small(100);
    let mut ws = m.workspace();
    let mut g = vec![0f32; m.dim()];
    let w0 = m.init_params();
    let draw = GradientDraw {
        run_seed: 9,
        index: 4,
    };
    m.gradient(&w0, draw, &mut g, &mut ws);
    let mut state = m.mlr.init();
    let mut mws = m.mlr.workspace();
    m.mlr.step(
        &mut state,
        IterCtx {
            iteration: 4,
            run_seed: 9,
        },
        &mut mws,
    );
    let max = state
        .w
        .iter()
        .zip(&g)
        .map(|(s, gi)| (s - (-1e-5 * gi)).abs())
        .fold(0f32, f32::max);
    assert!(max < 1e-6, "max difference {max}");
    assert!(g.iter().any(|v| *v != 0.0));
}

#[test]
fn sgd_lowers_the_subsample_loss() {
    let m = small(50);
    let mut ws = m.workspace();
    let mut w = m.init_params();
    let l0 = m.loss(&w, &mut ws);
    assert!((l0 - 10f64.ln()).abs() < 1e-6);
    let mut g = vec![0f32; m.dim()];
    for i in 0..100 {
        m.gradient(
            &w,
            GradientDraw {
                run_seed: 1,
                index: i,
            },
            &mut g,
            &mut ws,
        );
        for (wi, gi) in w.iter_mut().zip(&g) {
            *wi -= 1e-5 * gi;
        }
    }
    let l1 = m.loss(&w, &mut ws);
    assert!(l1 < 0.5 * l0, "{l0} -> {l1}");
    assert_eq!(m.eval_rows().len(), 500);
}

/// The minibatch loss reported with a gradient is the mean cross-entropy of
/// that minibatch's rows, and the gradient's bits do not change.
#[test]
fn gradient_and_loss_reports_the_minibatch_cross_entropy() {
    let m = small(16);
    let d = m.mlr.data();
    let w: Vec<f32> = (0..m.dim())
        .map(|i| ((i * 13 % 29) as f32 - 14.0) * 1e-4)
        .collect();
    let draw = GradientDraw {
        run_seed: 5,
        index: 40,
    };
    let mut ws = m.workspace();
    let (mut g, mut g2) = (vec![0f32; m.dim()], vec![0f32; m.dim()]);
    m.gradient(&w, draw, &mut g, &mut ws);
    let loss = m.gradient_and_loss(&w, draw, &mut g2, &mut m.workspace());
    assert_eq!(g, g2);
    let rows: Vec<u32> = m
        .mlr
        .batch_rows(
            IterCtx {
                iteration: 40,
                run_seed: 5,
            },
            &mut ws.inner,
        )
        .to_vec();
    assert_eq!(rows.len(), 16);
    let c = d.classes;
    let brute: f64 = rows
        .iter()
        .map(|&i| {
            let mut z = vec![0f32; c];
            let (cols, vals) = m.sparse_row(i as usize);
            forward_sparse_body(&w, &cols, &vals, &mut z);
            cross_entropy(&z, d.y[i as usize] as usize)
        })
        .sum::<f64>()
        / 16.0;
    assert!((loss - brute).abs() < 1e-6, "{loss} vs {brute}");
    assert!(loss > 0.0);
}

/// `add_gradient`'s one-pass fold gives the bits of the default (the mean
/// gradient into a buffer, then `sum + rate · g`), call after call (its
/// buffer is left at zero), with and without the minibatch loss, at every
/// kernel level of the fold.
#[test]
fn add_gradient_matches_the_gradient_then_the_sum() {
    use crate::simd::Level;
    let m = small(16);
    let dim = m.dim();
    let w: Vec<f32> = (0..dim)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * 1e-4)
        .collect();
    let (mut ws_a, mut ws_b) = (m.workspace(), m.workspace());
    let mut sum_a: Vec<f32> = (0..dim).map(|i| (i % 7) as f32 * 1e-3).collect();
    let mut sum_b = sum_a.clone();
    let (mut g, mut scratch) = (vec![0f32; dim], vec![0f32; dim]);
    for index in 0..6u64 {
        let draw = GradientDraw { run_seed: 5, index };
        let rate = 0.5 + index as f32 * 0.25;
        let with_loss = index % 2 == 1;
        let loss_a = if with_loss {
            Some(m.gradient_and_loss(&w, draw, &mut g, &mut ws_a))
        } else {
            m.gradient(&w, draw, &mut g, &mut ws_a);
            None
        };
        for (s, g) in sum_a.iter_mut().zip(&g) {
            *s += rate * g;
        }
        let loss_b = m.add_gradient(
            &w,
            draw,
            rate,
            &mut sum_b,
            &mut scratch,
            &mut ws_b,
            with_loss,
        );
        assert_eq!(loss_a.map(f64::to_bits), loss_b.map(f64::to_bits));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&sum_a), bits(&sum_b), "draw {index}");
        assert!(
            ws_b.raw.iter().all(|&x| x.to_bits() == 0),
            "the buffer is cleared"
        );
    }
    // The fold itself at every level.
    let raw0: Vec<f32> = (0..dim).map(|i| (i % 13) as f32 - 6.0).collect();
    let run = |level| {
        let (mut s, mut raw) = (sum_a.clone(), raw0.clone());
        add_mean_and_clear_at(level, &mut s, 0.3, 1.0 / 16.0, &mut raw);
        (s.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), raw)
    };
    let want = run(Level::Portable);
    for level in Level::supported() {
        assert_eq!(run(level), want, "{level:?}");
    }
}

/// The loss subsample's scoring gives the same bits at every level, and the
/// one-row cross-entropy's.
#[test]
fn scoring_gives_the_same_bits_at_every_level() {
    use crate::simd::Level;
    for c in [10usize, 3, 16, 21] {
        let rows: Vec<u32> = (0..37).map(|r| (r * 5 % 37) as u32).collect();
        let labels: Vec<u8> = (0..37).map(|r| (r * 7 % c) as u8).collect();
        let z: Vec<f32> = (0..37 * c)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.37)
            .collect();
        let run = |level| {
            let (mut sum, mut right) = (0.25f64, 1usize);
            score_rows_at(level, &z, c, &rows, &labels, &mut sum, &mut right);
            (sum.to_bits(), right)
        };
        let want = run(Level::Portable);
        // The reference: each row's loss as one loop (exp, then add).
        let (mut sum, mut right) = (0.25f64, 1usize);
        for (&i, z) in rows.iter().zip(z.chunks_exact(c)) {
            let max = z.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            let mut s = 0.0f64;
            for &v in z {
                s += exp_f32(v - max) as f64;
            }
            let label = labels[i as usize] as usize;
            sum += max as f64 + ln_f64(s) - z[label] as f64;
            let best = (0..c).fold(0, |b, k| if z[k] > z[b] { k } else { b });
            right += usize::from(best == label);
        }
        assert_eq!(want, (sum.to_bits(), right), "c = {c}");
        for level in Level::supported() {
            assert_eq!(run(level), want, "{level:?}, c = {c}");
        }
    }
}
