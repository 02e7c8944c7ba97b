//! Unit tests of the layer kernels.

use super::super::vector::Portable;
use super::adam::adam_at;
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

/// `n` images' pooled conv1 outputs and window codes from `x`.
fn conv1_outputs(n: usize, x: &[f32]) -> (Vec<f32>, Vec<Codes>) {
    let w: Vec<f32> = (0..6 * 25).map(|i| (i as f32 * 0.29).cos()).collect();
    let b = [0.5, -0.25, 0.125, 1.0, 0.0, -2.0];
    let mut xs = vec![0.0; 2 * PLANE];
    let mut p1 = vec![0.0; n * P1_LEN + LANES];
    let mut arg = vec![0; n * P1_SIDE * 6];
    for img in 0..n {
        split_columns(&x[img * SIDE * SIDE..(img + 1) * SIDE * SIDE], &mut xs);
        conv1_pool::<f32, Portable<f32>>(
            &xs,
            &w,
            &b,
            &mut p1[img * P1_LEN..(img + 1) * P1_LEN],
            &mut arg[img * P1_SIDE * 6..(img + 1) * P1_SIDE * 6],
        );
    }
    (p1, arg)
}

/// Gradients with zeros among them (every seventh value).
fn sparse_gradient(len: usize, phase: f32) -> Vec<f32> {
    (0..len)
        .map(|i| {
            if i % 7 == 3 {
                0.0
            } else {
                ((i as f32 + phase) * 0.37).cos()
            }
        })
        .collect()
}

/// The same bits, except that +0 and −0 count as equal.
fn same_value(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a == 0.0 && b == 0.0)
}

#[test]
fn conv1_backward_is_each_channels_chain_over_its_live_windows_in_order() {
    let n = 3;
    let x: Vec<f32> = (0..n * SIDE * SIDE + LANES)
        .map(|i| (i as f32 * 0.71).sin().abs())
        .collect();
    let (p1, arg) = conv1_outputs(n, &x);
    let dp1 = sparse_gradient(n * P1_LEN + LANES, 0.0);
    let (mut dw, mut db) = (vec![0.0f32; 150], vec![0.0f32; 6]);
    let mut pairs = vec![0.0f32; PAIRS_LEN];
    conv1_backward::<f32, Portable<f32>>(n, &x, &p1, &arg, &dp1, &mut dw, &mut db, &mut pairs);
    let mut dead = 0;
    for c in 0..6 {
        let (mut acc, mut bias) = ([0.0f32; 25], 0.0f32);
        for img in 0..n {
            for ph in 0..P1_SIDE {
                for pw in 0..P1_SIDE {
                    let j = img * P1_LEN + (ph * P1_SIDE + pw) * 6 + c;
                    let g = if p1[j] > 0.0 { dp1[j] } else { 0.0 };
                    if g == 0.0 {
                        dead += 1;
                        continue;
                    }
                    let (dh, dw_) = code_at(arg[(img * P1_SIDE + ph) * 6 + c], pw);
                    for kh in 0..5 {
                        for kw in 0..5 {
                            let xv = x
                                [img * SIDE * SIDE + (2 * ph + dh + kh) * SIDE + 2 * pw + dw_ + kw];
                            acc[kh * 5 + kw] = g.mul_add(xv, acc[kh * 5 + kw]);
                        }
                    }
                    bias += g;
                }
            }
        }
        assert_eq!(db[c].to_bits(), bias.to_bits(), "bias of channel {c}");
        for t in 0..25 {
            assert_eq!(
                dw[c * 25 + t].to_bits(),
                acc[t].to_bits(),
                "channel {c}, tap {t}"
            );
        }
    }
    assert!(dead > 100, "the case needs windows without gradient");
}

#[test]
fn conv2_backward_is_each_outputs_chain_over_its_live_windows_in_order() {
    let n = 3;
    let x: Vec<f32> = (0..n * SIDE * SIDE + LANES)
        .map(|i| (i as f32 * 0.53).sin().abs())
        .collect();
    let (p1, _) = conv1_outputs(n, &x);
    let w: Vec<f32> = (0..16 * TAPS2)
        .map(|i| (i as f32 * 0.13).cos() * 0.2)
        .collect();
    let b: Vec<f32> = (0..16).map(|i| i as f32 * 0.01 - 0.08).collect();
    let mut wt = vec![0.0; TAPS2 * 16];
    transpose_conv2(&w, &mut wt);
    let (mut p2, mut arg) = (vec![0.0f32; n * 256], vec![0; n * 16]);
    for img in 0..n {
        conv2_pool::<f32, Portable<f32>>(
            &p1[img * P1_LEN..],
            &wt,
            &b,
            &mut p2[img * 256..(img + 1) * 256],
            &mut arg[img * 16..(img + 1) * 16],
        );
    }
    let dp2 = sparse_gradient(n * 256, 0.5);
    let mut w2p = vec![0.0f32; W2_PADDED];
    pad_conv2(&w, &mut w2p);
    let (mut dw, mut db) = (vec![0.0f32; 16 * TAPS2], vec![0.0f32; 16]);
    let mut dp1 = vec![1.0f32; n * P1_LEN + LANES];
    let mut grads = vec![0.0f32; 16 * n * 16];
    conv2_backward::<f32, Portable<f32>>(
        n, &p1, &p2, &arg, &dp2, &w2p, &mut dw, &mut db, &mut dp1, &mut grads,
    );
    let live = |img: usize, win: usize, co: usize| {
        let j = (img * 16 + win) * 16 + co;
        let g = if p2[j] > 0.0 { dp2[j] } else { 0.0 };
        (g != 0.0).then(|| (g, code_at(arg[img * 16 + win], co)))
    };
    // Weights and biases: each output's chain over (image, window).
    let mut dead = 0;
    for co in 0..16 {
        let (mut acc, mut bias) = (vec![0.0f32; TAPS2], 0.0f32);
        for img in 0..n {
            for win in 0..16 {
                let Some((g, (dh, dw_))) = live(img, win, co) else {
                    dead += 1;
                    continue;
                };
                let (ph, pw) = (win / 4, win % 4);
                for kh in 0..5 {
                    for kw in 0..5 {
                        for ci in 0..6 {
                            let pv = p1[img * P1_LEN
                                + ((2 * ph + dh + kh) * P1_SIDE + 2 * pw + dw_ + kw) * 6
                                + ci];
                            let t = (kh * 5 + kw) * 6 + ci;
                            acc[t] = g.mul_add(pv, acc[t]);
                        }
                    }
                }
                bias += g;
            }
        }
        assert_eq!(db[co].to_bits(), bias.to_bits(), "bias of channel {co}");
        for t in 0..TAPS2 {
            assert_eq!(
                dw[co * TAPS2 + t].to_bits(),
                acc[t].to_bits(),
                "channel {co}, tap {t}"
            );
        }
    }
    assert!(dead > 50, "the case needs windows without gradient");
    // Input gradient: by window, then the maximum's position, then channel.
    let mut want = vec![0.0f32; n * P1_LEN];
    for img in 0..n {
        for win in 0..16 {
            let (ph, pw) = (win / 4, win % 4);
            for q in 0..4 {
                for co in 0..16 {
                    let Some((g, (dh, dw_))) = live(img, win, co) else {
                        continue;
                    };
                    if 2 * dh + dw_ != q {
                        continue;
                    }
                    for kh in 0..5 {
                        for kw in 0..5 {
                            for ci in 0..6 {
                                let j = img * P1_LEN
                                    + ((2 * ph + dh + kh) * P1_SIDE + 2 * pw + dw_ + kw) * 6
                                    + ci;
                                want[j] =
                                    g.mul_add(w[co * TAPS2 + (kh * 5 + kw) * 6 + ci], want[j]);
                            }
                        }
                    }
                }
            }
        }
    }
    for (j, (&got, &want)) in dp1.iter().zip(&want).enumerate() {
        assert!(same_value(got, want), "dp1[{j}] = {got}, want {want}");
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
    let l = softmax_t(&z, 10, ld, 2, &[3, 7], 1.0, Some((&mut d, 16)), None, 0.0);
    assert!((l - 2.0 * 10f64.ln()).abs() < 1e-6);
    assert!((d[3] + 0.9).abs() < 1e-6 && (d[4] - 0.1).abs() < 1e-6);
    assert!((d[16 + 7] + 0.9).abs() < 1e-6);
}

/// Adam's scalars at the paper's β1, β2, ε and step 3 of α = 10⁻³ (roughly).
fn typical_adam_step() -> AdamStep {
    AdamStep {
        b1: 0.9,
        c1: 0.1,
        b2: 0.999,
        c2: 1.0 - 0.999,
        step: 1e-3 / 0.271,
        inv_sqrt_bc2: 3.7,
        eps: 1e-8,
    }
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
    let p = typical_adam_step();
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

#[test]
fn adam_with_fading_moments_gives_the_reference_bits_at_every_level() {
    // Elements whose gradient is zero and whose first moment has decayed to
    // where β1·m or step·m is subnormal take the f64 path (`adam_fading`);
    // every element must equal the f32 reference `adam_one` bit for bit,
    // whichever path its chunk takes.
    let tiny = f32::MIN_POSITIVE;
    let specials = [
        tiny * 0.3,
        -tiny * 0.7,
        f32::from_bits(1),
        -f32::from_bits(1),
        tiny,
        tiny * 1.05,
        tiny * 900.0,
        -tiny * 1e3,
        1e-36,
        -3e-35,
        0.0,
        -0.0,
        1e-3,
        -2e-4,
    ];
    let n = 16 * 40 + 7;
    let mut m0 = Vec::with_capacity(n);
    let mut g = Vec::with_capacity(n);
    let mut w0 = Vec::with_capacity(n);
    for i in 0..n {
        // Chunks of every kind: none fading, some fading, fading beside
        // subnormal moments whose gradient is not zero.
        let chunk = i / 16;
        let s = specials[(i * 7 + chunk) % specials.len()];
        m0.push(if chunk % 3 == 0 {
            (i as f32 * 0.7).sin() * 1e-3
        } else {
            s
        });
        g.push(match (chunk % 4, i % 5) {
            (0, _) | (_, 0) => (i as f32 * 0.37).sin() * 1e-2,
            (_, 1) => -0.0,
            (3, 2) => tiny * 0.5,
            _ => 0.0,
        });
        w0.push(match i % 9 {
            0 => 0.0,
            1 => -0.0,
            2 => tiny * 0.25,
            _ => (i as f32 * 0.11).cos(),
        });
    }
    let v0: Vec<f32> = (0..n)
        .map(|i| (i as f32 * 0.3).sin().abs() * 1e-5)
        .collect();
    for p in [
        typical_adam_step(),
        AdamStep {
            b1: 0.5,
            c1: 0.5,
            b2: 0.9,
            c2: 0.1,
            step: 20.0,
            inv_sqrt_bc2: 1.0,
            eps: 1e-30,
        },
    ] {
        let (mut wr, mut mr, mut vr) = (w0.clone(), m0.clone(), v0.clone());
        for i in 0..n {
            super::adam::adam_one(&mut wr[i], &mut mr[i], &mut vr[i], g[i], p);
        }
        for level in std::iter::once(Level::Portable).chain(Level::supported()) {
            let (mut w, mut m, mut v) = (w0.clone(), m0.clone(), v0.clone());
            adam_at(level, &mut w, &mut m, &mut v, &g, p);
            for i in 0..n {
                assert_eq!(
                    (w[i].to_bits(), m[i].to_bits(), v[i].to_bits()),
                    (wr[i].to_bits(), mr[i].to_bits(), vr[i].to_bits()),
                    "{level:?}, element {i}: m {:e}, g {:e}, w {:e}",
                    m0[i],
                    g[i],
                    w0[i]
                );
            }
        }
        // The fading path was taken, and moments did fade to subnormals.
        assert!((0..n).any(|i| g[i] == 0.0 && mr[i] != 0.0 && mr[i].abs() < f32::MIN_POSITIVE));
    }
}
