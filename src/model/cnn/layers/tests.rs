//! Unit tests of the layer kernels.

use super::super::vector::Portable;
use super::*;
use crate::simd::Level;

#[test]
fn exp_f64_is_accurate() {
    for i in -7000..=7000 {
        let x = i as f64 * 0.1;
        let (got, want) = (exp_f64(x), x.exp());
        assert!(
            ((got - want) / want).abs() < 4e-15,
            "exp({x}) = {got}, want {want}"
        );
    }
}

#[test]
fn conv1_matches_a_direct_loop() {
    let x: Vec<f64> = (0..SIDE * SIDE).map(|i| (i as f64 * 0.71).sin()).collect();
    let w: Vec<f64> = (0..6 * 25).map(|i| (i as f64 * 0.29).cos()).collect();
    let b = vec![0.5, -0.25, 0.125, 1.0, 0.0, -2.0];
    let mut xs = vec![0.0; 2 * PLANE];
    split_columns(&x, &mut xs);
    let mut p1 = vec![0.0; P1_LEN];
    let mut arg = vec![0; P1_SIDE * 6];
    conv1_pool::<f64, Portable<f64>>(&xs, &w, &b, &mut p1, &mut arg);
    let conv = |c: usize, oh: usize, ow: usize| {
        let mut acc = b[c];
        for kh in 0..5 {
            for kw in 0..5 {
                acc = w[c * 25 + kh * 5 + kw].mul_add(x[(oh + kh) * SIDE + ow + kw], acc);
            }
        }
        acc
    };
    for ph in 0..12 {
        for pw in 0..12 {
            for c in 0..6 {
                let vals = [
                    conv(c, 2 * ph, 2 * pw),
                    conv(c, 2 * ph, 2 * pw + 1),
                    conv(c, 2 * ph + 1, 2 * pw),
                    conv(c, 2 * ph + 1, 2 * pw + 1),
                ];
                let mut k = 0;
                for q in 1..4 {
                    if vals[q] > vals[k] {
                        k = q;
                    }
                }
                let j = (ph * 12 + pw) * 6 + c;
                assert_eq!(p1[j].to_bits(), vals[k].max(0.0).to_bits());
                let (dh, dw) = code_at(arg[ph * 6 + c], pw);
                assert_eq!(2 * dh + dw, k);
            }
        }
    }
}

#[test]
fn conv2_matches_a_direct_loop() {
    let p1: Vec<f64> = (0..P1_LEN).map(|i| (i as f64 * 0.37).sin().abs()).collect();
    let w: Vec<f64> = (0..16 * TAPS2)
        .map(|i| (i as f64 * 0.13).cos() * 0.2)
        .collect();
    let b: Vec<f64> = (0..16).map(|i| i as f64 * 0.01 - 0.08).collect();
    let mut wt = vec![0.0; TAPS2 * 16];
    transpose_conv2(&w, &mut wt);
    let mut p2 = vec![0.0; 256];
    let mut arg = vec![0; 16];
    conv2_pool::<f64, Portable<f64>>(&p1, &wt, &b, &mut p2, &mut arg);
    let conv = |co: usize, oh: usize, ow: usize| {
        let mut acc = b[co];
        for kh in 0..5 {
            for kw in 0..5 {
                for ci in 0..6 {
                    acc = w[co * TAPS2 + (kh * 5 + kw) * 6 + ci]
                        .mul_add(p1[((oh + kh) * 12 + ow + kw) * 6 + ci], acc);
                }
            }
        }
        acc
    };
    for ph in 0..4 {
        for pw in 0..4 {
            for co in 0..16 {
                let vals = [
                    conv(co, 2 * ph, 2 * pw),
                    conv(co, 2 * ph, 2 * pw + 1),
                    conv(co, 2 * ph + 1, 2 * pw),
                    conv(co, 2 * ph + 1, 2 * pw + 1),
                ];
                let mut k = 0;
                for q in 1..4 {
                    if vals[q] > vals[k] {
                        k = q;
                    }
                }
                let j = (ph * 4 + pw) * 16 + co;
                assert_eq!(p2[j].to_bits(), vals[k].max(0.0).to_bits());
                let (dh, dw) = code_at(arg[ph * 4 + pw], co);
                assert_eq!(2 * dh + dw, k);
            }
        }
    }
}

#[test]
fn fully_connected_kernels_follow_their_sums() {
    let (n, inp, out): (usize, usize, usize) = (21, 37, 13);
    let ld = n.div_ceil(LANES) * LANES;
    let xs = inp.div_ceil(LANES) * LANES;
    let x: Vec<f64> = (0..n * inp).map(|i| (i as f64 * 0.77).sin()).collect();
    let w: Vec<f64> = (0..out * inp).map(|i| (i as f64 * 0.31).cos()).collect();
    let b: Vec<f64> = (0..out).map(|i| i as f64 * 0.1).collect();
    let mut xt = vec![0.0; inp * ld];
    for r in 0..n {
        for i in 0..inp {
            xt[i * ld + r] = x[r * inp + i];
        }
    }
    let mut yt = vec![0.0; out * ld];
    fc_forward_t::<f64, Portable<f64>>(&xt, inp, ld, ld / LANES, &w, &b, &mut yt, true);
    for r in 0..n {
        for o in 0..out {
            let mut acc = b[o];
            for i in 0..inp {
                acc = w[o * inp + i].mul_add(x[r * inp + i], acc);
            }
            assert_eq!(yt[o * ld + r].to_bits(), acc.max(0.0).to_bits());
        }
    }
    // Backward on rows.
    let mut xr = vec![0.0; n * xs];
    rows_from_t(&xt, inp, ld, n, &mut xr, xs);
    let dys = out.div_ceil(LANES) * LANES;
    let dy: Vec<f64> = (0..n * dys).map(|i| (i as f64 * 0.53).sin()).collect();
    let mut dw = vec![0.0; out * inp];
    fc_weight_grad::<f64, Portable<f64>>(&dy, dys, out, &xr, xs, inp, n, &mut dw);
    let mut db = vec![0.0; out];
    fc_bias_grad(&dy, dys, n, &mut db);
    for o in 0..out {
        let mut s = 0.0;
        for r in 0..n {
            s += dy[r * dys + o];
        }
        assert_eq!(db[o].to_bits(), s.to_bits());
        for i in 0..inp {
            let mut acc = 0.0;
            for r in 0..n {
                acc = dy[r * dys + o].mul_add(x[r * inp + i], acc);
            }
            assert_eq!(dw[o * inp + i].to_bits(), acc.to_bits());
        }
    }
    let mut wp = vec![0.0; out * xs];
    pad_rows(&w, out, inp, &mut wp, xs);
    let mut dx = vec![0.0; n * xs];
    fc_input_grad::<f64, Portable<f64>>(&dy, dys, out, &wp, xs, Some(&xr), n, &mut dx);
    for r in 0..n {
        for i in 0..inp {
            let mut acc = 0.0;
            for o in 0..out {
                acc = dy[r * dys + o].mul_add(w[o * inp + i], acc);
            }
            let want = if x[r * inp + i] > 0.0 { acc } else { 0.0 };
            assert_eq!(dx[r * xs + i].to_bits(), want.to_bits());
        }
    }
}

#[test]
fn cross_entropy_of_uniform_logits_is_log_classes() {
    let ld = LANES;
    let z = vec![0.0f32; 10 * ld];
    let mut d = vec![0.0f32; 2 * 16];
    let l = softmax_t(&z, 10, ld, 2, &[3, 7], 1.0, Some((&mut d, 16)), 0.0);
    assert!((l - 2.0 * 10f64.ln()).abs() < 1e-6);
    assert!((d[3] + 0.9).abs() < 1e-6 && (d[4] - 0.1).abs() < 1e-6);
    assert!((d[16 + 7] + 0.9).abs() < 1e-6);
}

#[test]
fn adam_is_the_same_at_every_level() {
    let n = 1000;
    let g: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 1e-2).collect();
    let w0: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
    let m0: Vec<f32> = (0..n).map(|i| (i as f32 * 0.7).sin() * 1e-3).collect();
    let v0: Vec<f32> = (0..n)
        .map(|i| (i as f32 * 0.3).sin().abs() * 1e-5)
        .collect();
    let p = AdamStep {
        b1: 0.9,
        c1: 0.1,
        b2: 0.999,
        c2: 1.0 - 0.999,
        step: 1e-3 / 0.271,
        inv_sqrt_bc2: 3.7,
        eps: 1e-8,
    };
    let run = |level: Level| {
        let (mut w, mut m, mut v) = (w0.clone(), m0.clone(), v0.clone());
        adam_at(level, &mut w, &mut m, &mut v, &g, p);
        (w, m, v)
    };
    let want = run(Level::Portable);
    for level in Level::supported() {
        let got = run(level);
        for (a, b) in [(&got.0, &want.0), (&got.1, &want.1), (&got.2, &want.2)] {
            assert!(
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{level:?}"
            );
        }
    }
    assert_ne!(want.0, w0);
}
