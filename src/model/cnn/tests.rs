use super::*;
use crate::data::synthetic;
use crate::model::NormKind;
use crate::simd::Level;
use net::{Arch, Net};

fn config(partitioning: Partitioning) -> CnnConfig {
    CnnConfig {
        spec: CnnSpec::mnist(partitioning, 64, 1e-3, CnnMetric::Subset { examples: 200 }),
        seed: 5,
    }
}

fn small(partitioning: Partitioning) -> Cnn {
    let data = Arc::new(synthetic::mnist_like(11, 0.02));
    Cnn::new(data, &config(partitioning)).unwrap()
}

fn ctx(iteration: usize) -> IterCtx {
    IterCtx {
        iteration,
        run_seed: 3,
    }
}

/// Random parameters and images for a gradient check. Weights are
/// He-uniform (U(±√(6/fan_in))) and biases small, so that activations vary
/// from image to image and few ReLU units are dead for the whole batch;
/// inputs are zero-mean for the same reason.
fn random_problem(arch: &Arch, n: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<u8>) {
    let mut rng = stream(seed, Purpose::Other, 1, 0);
    let mut w = vec![0.0; arch.parameters()];
    for t in &arch.tensors {
        let b = if t.row_len == 1 {
            0.1
        } else {
            (6.0 / t.fan_in as f64).sqrt()
        };
        for v in &mut w[t.range()] {
            *v = rng.random_range(-b..b);
        }
    }
    let x: Vec<f64> = (0..n * arch.input_len())
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let y: Vec<u8> = (0..n).map(|_| rng.random_range(0..10u8)).collect();
    (w, x, y)
}

/// Every layer type (convolution via im2col/col2im, ReLU, max pooling, fully
/// connected, softmax cross-entropy) is on the path from some tensor to the
/// loss, so checking coordinates of all ten tensors checks all of them.
#[test]
fn gradients_match_central_finite_differences_in_f64() {
    let arch = Arch::new(28, 10).unwrap();
    let n = 8;
    let (mut w, x, y) = random_problem(&arch, n, 1);
    let mut net: Net<f64> = Net::new(&arch, n);
    net.input[..x.len()].copy_from_slice(&x);
    let mut grad = vec![0.0; w.len()];
    net.gradient(&w, n, &y, &mut grad);
    let mut loss = |w: &[f64]| {
        net.forward(w, n);
        net.loss(n, &y) / n as f64
    };
    let h = 1e-6;
    let mut rng = stream(2, Purpose::Other, 0, 0);
    for t in &arch.tensors {
        let r = t.range();
        // Six coordinates at random (zeros included: they must be zero
        // numerically too) and six among those with a non-zero gradient,
        // so that every tensor's path through the network is exercised.
        let live: Vec<usize> = r.clone().filter(|&i| grad[i].abs() > 1e-7).collect();
        assert!(
            live.len() >= 6,
            "{}: only {} non-zero gradients",
            t.name,
            live.len()
        );
        let mut picks: Vec<usize> = (0..6).map(|_| rng.random_range(r.clone())).collect();
        picks.extend((0..6).map(|_| live[rng.random_range(0..live.len())]));
        for i in picks {
            let orig = w[i];
            w[i] = orig + h;
            let up = loss(&w);
            w[i] = orig - h;
            let down = loss(&w);
            w[i] = orig;
            let numeric = (up - down) / (2.0 * h);
            let err = (numeric - grad[i]).abs();
            assert!(
                err <= 1e-9 + 1e-6 * grad[i].abs(),
                "{} [{}]: analytic {} vs numeric {numeric}",
                t.name,
                i - t.offset,
                grad[i]
            );
        }
    }
}

#[test]
fn f32_gradient_agrees_with_f64() {
    let arch = Arch::new(28, 10).unwrap();
    let n = 5;
    let (w, x, y) = random_problem(&arch, n, 9);
    let mut net64: Net<f64> = Net::new(&arch, n);
    net64.input[..x.len()].copy_from_slice(&x);
    let mut g64 = vec![0.0; w.len()];
    let l64 = net64.gradient(&w, n, &y, &mut g64);
    let w32: Vec<f32> = w.iter().map(|&v| v as f32).collect();
    let mut net32: Net<f32> = Net::new(&arch, n);
    for (d, &s) in net32.input.iter_mut().zip(&x) {
        *d = s as f32;
    }
    let mut g32 = vec![0.0f32; w.len()];
    let l32 = net32.gradient(&w32, n, &y, &mut g32);
    assert!((l32 - l64).abs() < 1e-5 * l64.abs());
    for t in &arch.tensors {
        let r = t.range();
        let diff: f64 = r
            .clone()
            .map(|i| (g32[i] as f64 - g64[i]).powi(2))
            .sum::<f64>()
            .sqrt();
        let norm: f64 = r.map(|i| g64[i].powi(2)).sum::<f64>().sqrt();
        assert!(diff <= 1e-4 * norm, "{}: {diff} vs {norm}", t.name);
    }
}

#[test]
fn a_pass_over_presplit_input_gives_the_bits_of_splitting_image_by_image() {
    let arch = Arch::new(28, 10).unwrap();
    let n = 7;
    let (w, x, y) = random_problem(&arch, n, 4);
    let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
    let mut net: Net<f32> = Net::new(&arch, n);
    for (d, &s) in net.input.iter_mut().zip(&x) {
        *d = s as f32;
    }
    let bits = |g: &[f32]| g.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let mut alone = vec![0.0f32; w.len()];
    let l_alone = net.gradient(&w, n, &y, &mut alone);
    net.split_input(n);
    let mut pre = vec![0.0f32; w.len()];
    let l_pre = net.gradient(&w, n, &y, &mut pre);
    assert_eq!(l_alone.to_bits(), l_pre.to_bits());
    assert_eq!(bits(&alone), bits(&pre));
    // A split of fewer images than the pass is not used.
    net.split_input(n - 1);
    let mut fewer = vec![0.0f32; w.len()];
    assert_eq!(
        net.gradient(&w, n, &y, &mut fewer).to_bits(),
        l_alone.to_bits()
    );
    assert_eq!(bits(&alone), bits(&fewer));
}

#[test]
fn lenet_shapes() {
    let arch = Arch::new(28, 10).unwrap();
    assert_eq!(arch.parameters(), 44_426);
    assert_eq!(arch.flat, 256);
    let rows: Vec<usize> = arch.tensors.iter().map(|t| t.rows).collect();
    assert_eq!(rows, vec![6, 6, 16, 16, 120, 120, 84, 84, 10, 10]);
    assert!(Arch::new(27, 10).is_none());
    assert!(Arch::new(12, 10).is_none());
}

#[test]
fn partitions_cover_every_parameter_once() {
    let arch = Arch::new(28, 10).unwrap();
    let by_layer = blocks_of(&arch, Partitioning::ByLayer);
    assert_eq!(by_layer.len(), 10);
    for shards in [1, 3, 8, 200] {
        let blocks = blocks_of(&arch, Partitioning::ByShard { shards });
        let mut next = 0;
        for b in &blocks {
            assert_eq!(b.range.start, next, "contiguous, in order");
            assert!(!b.range.is_empty());
            next = b.range.end;
        }
        assert_eq!(next, arch.parameters());
        for (ti, t) in arch.tensors.iter().enumerate() {
            let sizes: Vec<usize> = blocks
                .iter()
                .filter(|b| b.tensor == ti)
                .map(|b| b.rows.len())
                .collect();
            assert_eq!(sizes.len(), shards.min(t.rows), "{}", t.name);
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(hi - lo <= 1, "{}: even shards {sizes:?}", t.name);
        }
    }
    assert_eq!(
        blocks_of(&arch, Partitioning::ByShard { shards: 8 }).len(),
        76
    );
}

#[test]
fn training_lowers_the_loss_on_the_stand_in() {
    let m = small(Partitioning::ByLayer);
    let mut s = m.init();
    let mut ws = m.workspace();
    let l0 = m.metric(&s, &mut ws);
    assert!((l0 - 10f64.ln()).abs() < 0.2, "initial loss {l0}");
    for k in 0..60 {
        m.step(&mut s, ctx(k), &mut ws);
    }
    let l1 = m.metric(&s, &mut ws);
    assert!(l1 < 0.5 * l0, "loss {l0} -> {l1}");
    assert!(s.steps.iter().all(|&t| t == 60));
}

#[test]
fn first_adam_step_moves_each_weight_by_about_alpha() {
    // With bias correction, step 1 is w -= α·g/(|g| + ε') ≈ α·sign(g).
    let m = small(Partitioning::ByShard { shards: 8 });
    let s0 = m.init();
    let mut s = s0.clone();
    let mut ws = m.workspace();
    m.step(&mut s, ctx(0), &mut ws);
    let g = &ws.grad;
    let mut checked = 0;
    for (i, &gi) in g.iter().enumerate() {
        if gi.abs() > 1e-4 {
            let moved = s0.w[i] - s.w[i];
            assert!(
                (moved - 1e-3 * gi.signum()).abs() < 1e-5,
                "{i}: moved {moved}, g {gi}"
            );
            checked += 1;
        }
    }
    assert!(checked > 10_000, "{checked}");
}

#[test]
fn block_copy_and_restore_round_trip_exactly() {
    for part in [Partitioning::ByLayer, Partitioning::ByShard { shards: 8 }] {
        let m = small(part);
        let mut ws = m.workspace();
        let x0 = m.init();
        let mut a = x0.clone();
        for k in 0..3 {
            m.step(&mut a, ctx(k), &mut ws);
        }
        // Copy one block: exactly that block (params, moments, t) changes.
        let blk = m.block_count() / 2;
        let mut b = x0.clone();
        m.copy_block(&a, &mut b, blk);
        assert_eq!(m.block_distance(&a, &b, blk), 0.0);
        let r = m.blocks()[blk].range.clone();
        for i in 0..b.w.len() {
            let src = if r.contains(&i) { &a } else { &x0 };
            assert_eq!(b.w[i].to_bits(), src.w[i].to_bits());
            assert_eq!(b.m[i].to_bits(), src.m[i].to_bits());
            assert_eq!(b.v[i].to_bits(), src.v[i].to_bits());
        }
        assert_eq!(b.steps[blk], 3);
        assert_eq!(
            b.steps.iter().filter(|&&t| t == 0).count(),
            m.block_count() - 1
        );
        // Restore it: back to x(0) bit for bit.
        m.copy_block(&x0, &mut b, blk);
        assert_eq!(b, x0);
        // Copying every block reproduces the source exactly.
        let mut c = x0.clone();
        for blk in 0..m.block_count() {
            m.copy_block(&a, &mut c, blk);
        }
        assert_eq!(c, a);
        assert_eq!(m.distance(&a, &c), 0.0);
        assert_eq!(m.norm_kind(), NormKind::L2);
    }
}

#[test]
fn runs_are_deterministic_and_restored_blocks_resume_their_own_adam_clock() {
    let m = small(Partitioning::ByLayer);
    let run = |m: &Cnn| {
        let mut ws = m.workspace();
        let mut s = m.init();
        for k in 0..4 {
            m.metric(&s, &mut ws);
            m.step(&mut s, ctx(k), &mut ws);
        }
        s
    };
    let a = run(&m);
    let b = run(&m);
    assert_eq!(a, b);
    // Restore block 0 to x(0) at iteration 4: its t restarts from 0.
    let mut s = a.clone();
    m.copy_block(&m.init(), &mut s, 0);
    let mut ws = m.workspace();
    m.step(&mut s, ctx(4), &mut ws);
    assert_eq!(s.steps[0], 1);
    assert_eq!(s.steps[1], 5);
}

#[test]
fn batches_cover_an_epoch_without_repeats_and_eval_subset_is_fixed() {
    let m = small(Partitioning::ByLayer);
    let mut ws = m.workspace();
    let mut seen = vec![false; m.data().rows];
    for k in 0..m.batches_per_epoch() {
        for &i in m.batch_rows(ctx(k), &mut ws) {
            assert!(!seen[i as usize]);
            seen[i as usize] = true;
        }
    }
    assert_eq!(m.eval_examples(), 200);
    let again = small(Partitioning::ByLayer);
    assert_eq!(m.eval_x, again.eval_x);
    assert!(m.eval_x.iter().all(|&p| (0.0..=1.0).contains(&p)));
    assert!(m.eval_x.iter().any(|&p| p > 0.9));
}

#[test]
fn rejects_images_that_are_not_square() {
    let mut d = synthetic::mnist_like(1, 0.002);
    d.features = 780;
    d.x.truncate(d.rows * 780);
    let e = Cnn::new(Arc::new(d), &config(Partitioning::ByLayer))
        .err()
        .unwrap();
    assert!(e.to_string().contains("square"), "{e}");
}

#[test]
fn running_mean_metric_averages_the_last_window_of_minibatch_losses() {
    let data = Arc::new(synthetic::mnist_like(11, 0.02));
    let base = config(Partitioning::ByLayer);
    let cfg = CnnConfig {
        spec: CnnSpec {
            metric: CnnMetric::RunningMean { window: 3 },
            ..base.spec
        },
        ..base
    };
    let m = Cnn::new(data, &cfg).unwrap();
    let mut s = m.init();
    let mut ws = m.workspace();
    // Cold start: the window holds the loss of a uniform prediction.
    assert!((m.metric(&s, &mut ws) - 10f64.ln()).abs() < 1e-12);
    let mut batch_losses = Vec::new();
    for k in 0..5 {
        // The loss of minibatch k at x(k), computed independently.
        let mut probe = m.workspace();
        let l = m.batch_gradient(&s.w, ctx(k), &mut probe) / m.batch_size() as f64;
        batch_losses.push(l);
        m.step(&mut s, ctx(k), &mut ws);
        let lo = batch_losses.len().saturating_sub(3);
        let pad = 3 - (batch_losses.len() - lo);
        let expect = (batch_losses[lo..].iter().sum::<f64>() + pad as f64 * 10f64.ln()) / 3.0;
        assert!(
            (m.metric(&s, &mut ws) - expect).abs() < 1e-12,
            "after step {k}"
        );
    }
    // The window is run state: restoring every block leaves it alone.
    let before = s.losses.clone();
    let x0 = m.init();
    for b in 0..m.block_count() {
        m.copy_block(&x0, &mut s, b);
    }
    assert_eq!(s.losses, before);
    assert_eq!(m.eval_examples(), 0);
}

#[test]
fn every_kernel_level_gives_the_portable_bits() {
    // The forward and backward passes are compiled for each kernel level;
    // they must give the portable body's bits, so results do not depend on
    // the machine's vector width. Odd batch sizes exercise the padded lanes.
    let arch = Arch::new(28, 10).unwrap();
    for n in [16, 7] {
        let (w, x, y) = random_problem(&arch, n, 4);
        let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
        let mut net: Net<f32> = Net::new(&arch, n);
        for (d, &s) in net.input.iter_mut().zip(&x) {
            *d = s as f32;
        }
        let mut want = vec![0f32; w.len()];
        let lw = net.gradient_at(Level::Portable, &w, n, &y, &mut want);
        for level in Level::supported() {
            let mut got = vec![1f32; w.len()];
            let l = net.gradient_at(level, &w, n, &y, &mut got);
            assert_eq!(l.to_bits(), lw.to_bits(), "{level:?}");
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(p, q)| p.to_bits() == q.to_bits()),
                "{level:?}"
            );
        }
    }
}

/// Members of a cohort at one iteration share the gathered minibatch: steps
/// through one workspace, at the same and at changing (seed, iteration),
/// give the bits of steps each through a fresh workspace.
#[test]
fn a_shared_workspace_gathers_each_minibatch_once_with_the_same_bits() {
    let m = small(Partitioning::ByLayer);
    let mut a = m.init();
    m.step(&mut a, ctx(0), &mut m.workspace());
    let b = a.clone();
    let other = |iteration| IterCtx {
        iteration,
        run_seed: 4,
    };
    let schedule = [
        ctx(1),
        ctx(1),
        other(1),
        ctx(1),
        ctx(2),
        other(2),
        other(2),
        ctx(1),
    ];
    let mut shared = m.workspace();
    let (mut s1, mut s2) = (a.clone(), b.clone());
    let (mut f1, mut f2) = (a, b);
    for (k, &c) in schedule.iter().enumerate() {
        // Two members at each step of the schedule, in one workspace.
        m.step(&mut s1, c, &mut shared);
        m.step(&mut s2, c, &mut shared);
        m.step(&mut f1, c, &mut m.workspace());
        m.step(&mut f2, c, &mut m.workspace());
        let bits = |s: &CnnState| s.w.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&s1), bits(&f1), "step {k}");
        assert_eq!(bits(&s2), bits(&f2), "step {k}");
    }
}

#[test]
fn the_gather_from_pixel_bytes_gives_the_bits_of_the_f32_features() {
    // Whole intensities in 0..=255, as real MNIST's and the stand-in's are:
    // the model keeps a byte copy and gathers from it. The same model
    // without the copy reads the f32 features; every step must give the
    // same bits.
    let data = Arc::new(synthetic::mnist_like(11, 0.02));
    let bytes = Cnn::new(data.clone(), &config(Partitioning::ByLayer)).unwrap();
    assert!(bytes.pixels.is_some(), "whole intensities make a byte copy");
    let mut floats = Cnn::new(data, &config(Partitioning::ByLayer)).unwrap();
    floats.pixels = None;
    let (mut a, mut b) = (bytes.init(), floats.init());
    let (mut wa, mut wb) = (bytes.workspace(), floats.workspace());
    for it in 0..4 {
        bytes.step(&mut a, ctx(it), &mut wa);
        floats.step(&mut b, ctx(it), &mut wb);
        let bits = |s: &CnnState| s.w.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b), "step {it}");
        assert_eq!(wa.net.input, wb.net.input, "step {it}");
    }
    // A fractional or out-of-range feature makes no copy.
    for bad in [0.5, 256.0, -1.0, -0.0, f32::NAN] {
        let mut d = synthetic::mnist_like(11, 0.02);
        d.x[100] = bad;
        let m = Cnn::new(Arc::new(d), &config(Partitioning::ByLayer)).unwrap();
        assert!(m.pixels.is_none(), "{bad}");
    }
}

/// The subset metric's convergence check (`check_many`) stops its passes
/// over the evaluation subset early only where the full pass finds the mean
/// above the criterion; otherwise it returns the metric's exact bits, though
/// it evaluates the images in its own order. Criteria on
/// both sides of the metric, at several stages of training, with parameters
/// the early answer must refuse (a non-finite or an enormous weight).
#[test]
fn the_subset_check_stops_early_only_where_the_metric_is_above_the_criterion() {
    // 200 images: passes of 64, 64, 64 and 8, so three places to stop.
    let m = small(Partitioning::ByLayer);
    assert_eq!(m.eval_examples(), 200);
    let mut ws = m.workspace();
    let mut s = m.init();
    let mut states = vec![s.clone()];
    for k in 0..40 {
        m.step(&mut s, ctx(k), &mut ws);
        if k == 4 || k == 39 {
            states.push(s.clone());
        }
    }
    let mut broken = s.clone();
    broken.w[3] = f32::NAN;
    states.push(broken);
    let mut huge = s.clone();
    huge.w[m.arch().tensors[4].offset] = 1e12;
    states.push(huge);
    let (mut early, mut exact) = (0, 0);
    for (i, st) in states.iter().enumerate() {
        let metric = m.metric(st, &mut ws);
        let mut criteria: Vec<f64> = [0.0, 0.3, 0.6, 0.9, 0.999, 1.0, 1.001, 2.0]
            .iter()
            .map(|f| f * metric)
            .collect();
        criteria.extend([f64::from_bits(metric.to_bits() - 1), 1e-300, 1e300]);
        for c in criteria {
            let mut out = [Check::Exact(-1.0)];
            m.check_many(
                std::slice::from_ref(st),
                &[true],
                ctx(0),
                c,
                &mut ws,
                &mut out,
            );
            match out[0] {
                Check::Above => {
                    assert!(
                        metric > c,
                        "state {i}: certified above {c}, metric {metric}"
                    );
                    assert!(i < 3, "state {i}: certified with unsafe parameters");
                    early += 1;
                }
                Check::Exact(v) => {
                    assert_eq!(v.to_bits(), metric.to_bits(), "state {i}, criterion {c}");
                    exact += 1;
                }
            }
        }
        // Inactive states are left alone.
        let mut out = [Check::Exact(-1.0)];
        m.check_many(
            std::slice::from_ref(st),
            &[false],
            ctx(0),
            0.0,
            &mut ws,
            &mut out,
        );
        assert_eq!(out[0], Check::Exact(-1.0));
    }
    // Stopping early happened (criteria well below the metric), and so did
    // completed passes, with the images in another order than the subset's
    // (so a loss's bits do not depend on the pass it is computed in).
    assert!(ws.eval.order.windows(2).any(|p| p[0] > p[1]));
    assert!(early >= 9, "{early} early answers");
    assert!(exact >= 15, "{exact} exact answers");
}

/// The facts the early answer rests on: the largest logit's exponential is
/// exactly 1, so the softmax sum is at least 1, and the logarithm of a
/// number at least 1 is not negative.
#[test]
fn the_softmax_terms_of_the_subset_loss_are_never_negative() {
    use crate::model::kernels::{exp_f32, ln_f64};
    assert_eq!(exp_f32(0.0).to_bits(), 1.0f32.to_bits());
    let mut x = 1.0f64;
    for _ in 0..2000 {
        assert!(ln_f64(x) >= 0.0, "ln({x}) = {}", ln_f64(x));
        x = f64::from_bits(x.to_bits() + 1);
    }
    let mut rng = stream(9, Purpose::Other, 2, 0);
    for _ in 0..100_000 {
        let x = 1.0 + rng.random_range(0.0..20.0f64);
        assert!(ln_f64(x) >= 0.0, "ln({x})");
        // Sums of f32 exponentials, widened.
        let x = f64::from(1.0f32 + rng.random_range(0.0..9.0f32));
        assert!(ln_f64(x) >= 0.0, "ln({x})");
    }
    // Just above √2, where the reduction halves m.
    let r2 = std::f64::consts::SQRT_2;
    for k in 0..1000u64 {
        let x = f64::from_bits(r2.to_bits() - 500 + k);
        assert!(ln_f64(x) > 0.3, "ln({x})");
    }
}

/// [`ModelSpec::training_spec`](crate::model::ModelSpec::training_spec)'s
/// claim: the partitioning only cuts the parameters into blocks. Both
/// partitionings build the same x(0), step it to the same states, and a
/// state with every block restored from x(c) steps on the same, bit for bit
/// (the cross-scenario sharing of whole-state trials rests on it).
#[test]
fn partitionings_train_whole_states_alike() {
    let flat = |s: &CnnState| {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        (
            bits(&s.w),
            bits(&s.m),
            bits(&s.v),
            s.losses.clone(),
            s.next_loss,
        )
    };
    let run = |part: Partitioning| {
        let m = small(part);
        let mut ws = m.workspace();
        let mut states = vec![m.init()];
        for k in 0..4 {
            let mut s = states[k].clone();
            m.step(&mut s, ctx(k), &mut ws);
            states.push(s);
        }
        // A failure at T = 4 restoring every block from x(2), then two steps.
        let mut s = states[4].clone();
        for b in 0..m.block_count() {
            m.copy_block(&states[2], &mut s, b);
        }
        m.rebuild_derived(&mut s);
        assert!(s.steps.iter().all(|&t| t == 2));
        let mut metrics = Vec::new();
        for k in 4..6 {
            m.step(&mut s, ctx(k), &mut ws);
            metrics.push(m.metric(&s, &mut ws).to_bits());
        }
        states.push(s);
        (
            m.block_count(),
            states.iter().map(flat).collect::<Vec<_>>(),
            metrics,
        )
    };
    let (n_layer, by_layer, m_layer) = run(Partitioning::ByLayer);
    let (n_shard, by_shard, m_shard) = run(Partitioning::ByShard { shards: 8 });
    assert!(n_shard > n_layer, "{n_layer} {n_shard}");
    assert_eq!(by_layer, by_shard);
    assert_eq!(m_layer, m_shard);
    // The restored state is not simply x(4) or x(2) stepped on.
    assert_ne!(by_layer[5], by_layer[4]);
}
