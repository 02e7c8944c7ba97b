//! The network: a LeNet-5-style CNN, the layout of its parameters in one
//! flat vector, and its forward and backward passes over a batch.
//!
//! SCAR §5.1 says only "2 convolution layers with ReLU activations and max
//! pooling followed by 3 fully-connected layers with ReLU activations".
//! Choice: the classic LeNet-5 sizes (as in the PyTorch tutorial network the
//! description matches), for 28×28 MNIST input:
//!
//! | layer | tensor shapes (first dimension = output) | output |
//! |---|---|---|
//! | conv1 5×5, 1→6, ReLU, max-pool 2×2 | w (6, 5, 5), b (6) | 12×12×6 |
//! | conv2 5×5, 6→16, ReLU, max-pool 2×2 | w (16, 5, 5, 6), b (16) | 4×4×16 = 256 |
//! | fc1 256→120, ReLU | w (120, 256), b (120) | 120 |
//! | fc2 120→84, ReLU | w (84, 120), b (84) | 84 |
//! | fc3 84→10 | w (10, 84), b (10) | logits |
//!
//! 44,426 parameters. The loss is the softmax cross-entropy averaged over the
//! batch (PyTorch's default). The flattening before fc1 is in (row, column,
//! channel) order (NHWC), which only permutes the columns of fc1's weight.

use std::ops::Range;

use super::layers::{
    Codes, ConvShape, LANES, P1_LEN, P1_SIDE, P2_SIDE, PAIRS_LEN, PLANE, Scalar, TAPS2, W2_PADDED,
    conv1_backward, conv1_pool, conv2_backward, conv2_pool, fc_bias_grad, fc_forward_t,
    fc_input_grad, fc_weight_grad, pad_conv2, pad_rows, rows_from_t, softmax_t, split_columns,
    transpose_conv2,
};
#[cfg(target_arch = "x86_64")]
use super::vector::{Avx2, Avx512};
use super::vector::{Portable, Vector};
use crate::simd::{self, Level};

/// Input side the network is built for (MNIST).
pub(crate) const SIDE: usize = 28;
/// Output side of conv1 (`SIDE − KERNEL + 1`).
pub(crate) const CONV1_OUT: usize = SIDE - KERNEL + 1;

/// Kernel side of both convolutions.
pub(crate) const KERNEL: usize = 5;
/// Output channels of conv1.
pub(crate) const CONV1_CHANNELS: usize = 6;
/// Output channels of conv2.
pub(crate) const CONV2_CHANNELS: usize = 16;
/// Width of fc1.
pub(crate) const FC1_UNITS: usize = 120;
/// Width of fc2.
pub(crate) const FC2_UNITS: usize = 84;

/// One parameter tensor: its name, shape and place in the flat vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tensor {
    /// e.g. `conv1.weight`, `fc3.bias`.
    pub(crate) name: &'static str,
    /// Size of the first dimension (output channels or units).
    pub(crate) rows: usize,
    /// Values per row (product of the other dimensions; 1 for a bias).
    pub(crate) row_len: usize,
    /// Fan-in of the layer the tensor belongs to (for initialisation).
    pub(crate) fan_in: usize,
    /// Offset in the flat parameter vector.
    pub(crate) offset: usize,
}

impl Tensor {
    /// Number of values.
    pub(crate) fn len(&self) -> usize {
        self.rows * self.row_len
    }
    /// Its range in the flat parameter vector.
    pub(crate) fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.len()
    }
}

/// The shapes of the network for a given input side and class count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Arch {
    /// Input side (28 for MNIST).
    pub(crate) side: usize,
    /// Number of classes.
    pub(crate) classes: usize,
    /// conv1.
    pub(crate) conv1: ConvShape,
    /// conv2.
    pub(crate) conv2: ConvShape,
    /// Side after the second pooling.
    pub(crate) pool2_side: usize,
    /// Inputs of fc1 (`pool2_side² · 16`).
    pub(crate) flat: usize,
    /// The ten tensors in order: conv1.w, conv1.b, conv2.w, conv2.b, fc1.w, …, fc3.b.
    pub(crate) tensors: Vec<Tensor>,
}

impl Arch {
    /// The architecture for `side × side` single-channel images and `classes`
    /// classes; `None` unless `side` is [`SIDE`] (28, MNIST) and there are
    /// at least two classes.
    pub(crate) fn new(side: usize, classes: usize) -> Option<Arch> {
        if side != SIDE || classes < 2 {
            return None;
        }
        let p1 = CONV1_OUT / 2;
        let p2 = (p1 + 1 - KERNEL) / 2;
        let conv1 = ConvShape {
            side,
            cin: 1,
            cout: CONV1_CHANNELS,
            k: KERNEL,
        };
        let conv2 = ConvShape {
            side: p1,
            cin: CONV1_CHANNELS,
            cout: CONV2_CHANNELS,
            k: KERNEL,
        };
        let flat = p2 * p2 * CONV2_CHANNELS;
        let specs: [(&'static str, usize, usize, usize); 10] = [
            ("conv1.weight", CONV1_CHANNELS, conv1.taps(), conv1.taps()),
            ("conv1.bias", CONV1_CHANNELS, 1, conv1.taps()),
            ("conv2.weight", CONV2_CHANNELS, conv2.taps(), conv2.taps()),
            ("conv2.bias", CONV2_CHANNELS, 1, conv2.taps()),
            ("fc1.weight", FC1_UNITS, flat, flat),
            ("fc1.bias", FC1_UNITS, 1, flat),
            ("fc2.weight", FC2_UNITS, FC1_UNITS, FC1_UNITS),
            ("fc2.bias", FC2_UNITS, 1, FC1_UNITS),
            ("fc3.weight", classes, FC2_UNITS, FC2_UNITS),
            ("fc3.bias", classes, 1, FC2_UNITS),
        ];
        let mut offset = 0;
        let tensors = specs
            .iter()
            .map(|&(name, rows, row_len, fan_in)| {
                let t = Tensor {
                    name,
                    rows,
                    row_len,
                    fan_in,
                    offset,
                };
                offset += t.len();
                t
            })
            .collect();
        Some(Arch {
            side,
            classes,
            conv1,
            conv2,
            pool2_side: p2,
            flat,
            tensors,
        })
    }

    /// Total number of parameters.
    pub(crate) fn parameters(&self) -> usize {
        self.tensors.last().map_or(0, |t| t.offset + t.len())
    }

    /// Nominal floating-point operations of the forward pass per image (a
    /// multiply-add counts two): both convolutions over every output and the
    /// three fully connected layers.
    pub(crate) fn forward_flops(&self) -> f64 {
        let (c1, c2) = (self.conv1, self.conv2);
        let macs = c1.out_len() * c1.taps()
            + c2.out_len() * c2.taps()
            + self.flat * FC1_UNITS
            + FC1_UNITS * FC2_UNITS
            + FC2_UNITS * self.classes;
        2.0 * macs as f64
    }

    /// Nominal floating-point operations of a training step's forward and
    /// backward pass per image: the forward pass, the fully connected layers'
    /// weight and input gradients (each as many multiply-adds as the forward
    /// product), and the convolutions' sparse backward passes (one kernel's
    /// taps per pooled output: weight gradients of both, conv2's input
    /// gradient).
    pub(crate) fn train_flops(&self) -> f64 {
        let (c1, c2) = (self.conv1, self.conv2);
        let fc = self.flat * FC1_UNITS + FC1_UNITS * FC2_UNITS + FC2_UNITS * self.classes;
        let pooled1 = c2.in_len();
        let macs = 2 * fc + 2 * self.flat * c2.taps() + pooled1 * c1.taps();
        self.forward_flops() + 2.0 * macs as f64
    }

    /// Nominal floating-point operations of one Adam update of every
    /// parameter (about ten per parameter, a square root and a division
    /// among them).
    pub(crate) fn adam_flops(&self) -> f64 {
        10.0 * self.parameters() as f64
    }

    /// Input values per image.
    pub(crate) fn input_len(&self) -> usize {
        self.side * self.side
    }

    fn p(&self, i: usize) -> Range<usize> {
        self.tensors[i].range()
    }
}

/// Window-code words of conv1's pooling per image (one per pooled row and channel).
const A1: usize = P1_SIDE * CONV1_CHANNELS;
/// Window-code words of conv2's pooling per image (one per pooled position).
const A2: usize = P2_SIDE * P2_SIDE;

/// Stride of fc1's output rows (120 units, padded to [`LANES`]).
const H1S: usize = FC1_UNITS.div_ceil(LANES) * LANES;
/// Stride of fc2's output rows (84 units, padded).
const H2S: usize = FC2_UNITS.div_ceil(LANES) * LANES;

/// Activation and gradient buffers for batches of up to `capacity` images.
pub(crate) struct Net<T> {
    arch: Arch,
    capacity: usize,
    /// Images per transposed row: `capacity` rounded up to [`LANES`].
    ld: usize,
    /// Input images, planar (`capacity × side²`, then [`LANES`] values of
    /// padding); the caller fills it. A caller that writes it after
    /// [`Net::split_input`] calls that again (or the forward pass would
    /// read the old images' split).
    pub(crate) input: Vec<T>,
    /// One image's column split ([`split_columns`]), for passes that split
    /// image by image.
    xs: Vec<T>,
    /// The column splits of the first `split_images` images of `input`
    /// ([`Net::split_input`]): split once when several members of a cohort
    /// step from the same minibatch.
    split: Vec<T>,
    split_images: usize,
    p1: Vec<T>,
    arg1: Vec<Codes>,
    p2: Vec<T>,
    arg2: Vec<Codes>,
    p2t: Vec<T>,
    h1t: Vec<T>,
    h2t: Vec<T>,
    zt: Vec<T>,
    h1: Vec<T>,
    h2: Vec<T>,
    d3: Vec<T>,
    dh2: Vec<T>,
    dh1: Vec<T>,
    dp2: Vec<T>,
    dp1: Vec<T>,
    w2t: Vec<T>,
    grads2: Vec<T>,
    pairs: Vec<T>,
    w2c: Vec<T>,
    w2p: Vec<T>,
    w3p: Vec<T>,
}

impl<T: Scalar> Net<T> {
    /// Buffers for batches of up to `capacity` images.
    pub(crate) fn new(arch: &Arch, capacity: usize) -> Net<T> {
        let n = capacity.max(1);
        let ld = n.div_ceil(LANES) * LANES;
        let z = T::zero();
        let k = arch.classes;
        let ks = k.div_ceil(LANES) * LANES;
        Net {
            arch: arch.clone(),
            capacity: n,
            ld,
            input: vec![z; n * arch.input_len() + LANES],
            xs: vec![z; 2 * PLANE],
            split: Vec::new(),
            split_images: 0,
            p1: vec![z; n * P1_LEN + LANES],
            arg1: vec![0; n * P1_SIDE * CONV1_CHANNELS],
            p2: vec![z; n * arch.flat],
            arg2: vec![0; n * P2_SIDE * P2_SIDE],
            p2t: vec![z; arch.flat * ld],
            h1t: vec![z; FC1_UNITS * ld],
            h2t: vec![z; FC2_UNITS * ld],
            zt: vec![z; k * ld],
            h1: vec![z; n * H1S],
            h2: vec![z; n * H2S],
            d3: vec![z; n * ks],
            dh2: vec![z; n * H2S],
            dh1: vec![z; n * H1S],
            dp2: vec![z; n * arch.flat],
            dp1: vec![z; n * P1_LEN + LANES],
            w2t: vec![z; TAPS2 * CONV2_CHANNELS],
            grads2: vec![z; CONV2_CHANNELS * n * A2],
            pairs: vec![z; PAIRS_LEN],
            w2c: vec![z; W2_PADDED],
            w2p: vec![z; FC2_UNITS * H1S],
            w3p: vec![z; k * H2S],
        }
    }

    /// The largest batch these buffers hold.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Forward pass of the first `n` images in `input` under parameters `w`.
    #[cfg(test)]
    pub(crate) fn forward(&mut self, w: &[T], n: usize) {
        T::forward_at(simd::level(), self, w, None, n);
    }

    /// Splits the first `n` images of `input` once for every following pass
    /// over them (each image's split is the same values, so passes give the
    /// same bits either way).
    pub(crate) fn split_input(&mut self, n: usize) {
        let n = n.min(self.capacity);
        let side2 = self.arch.input_len();
        if side2 != SIDE * SIDE {
            self.split_images = 0;
            return;
        }
        self.split.resize(n * 2 * PLANE, T::zero());
        T::split_at(simd::level(), self);
        self.split_images = n;
    }

    /// The body of [`Net::split_input`] (compiled for each kernel level, so
    /// that the copies are vectorised): every image `split` has room for.
    #[inline(always)]
    fn split_impl(&mut self) {
        let side2 = SIDE * SIDE;
        for (img, xs) in self.split.chunks_exact_mut(2 * PLANE).enumerate() {
            split_columns(&self.input[img * side2..(img + 1) * side2], xs);
        }
    }

    /// Forward pass of the first `n` images of `x` (planar, like `input`).
    pub(crate) fn forward_from(&mut self, w: &[T], x: &[T], n: usize) {
        T::forward_at(simd::level(), self, w, Some(x), n);
    }

    /// The forward pass (the body every kernel level compiles).
    #[inline(always)]
    pub(crate) fn forward_impl<V: Vector<T>>(&mut self, w: &[T], x: Option<&[T]>, n: usize) {
        assert!(n <= self.capacity, "batch larger than the buffers");
        let a = &self.arch;
        let (ld, flat) = (self.ld, a.flat);
        // `input`'s images already split by `split_input`.
        let presplit = x.is_none() && self.split_images >= n;
        let x = x.unwrap_or(&self.input);
        let side2 = a.input_len();
        assert!(x.len() >= n * side2, "fewer images than the batch");
        transpose_conv2(&w[a.p(2)], &mut self.w2t);
        let (w1, b1) = (&w[a.p(0)], &w[a.p(1)]);
        let b2 = &w[a.p(3)];
        for img in 0..n {
            let xs = if presplit {
                &self.split[img * 2 * PLANE..(img + 1) * 2 * PLANE]
            } else {
                split_columns(&x[img * side2..(img + 1) * side2], &mut self.xs);
                &self.xs
            };
            let p1 = &mut self.p1[img * P1_LEN..(img + 1) * P1_LEN];
            conv1_pool::<T, V>(xs, w1, b1, p1, &mut self.arg1[img * A1..(img + 1) * A1]);
            let p2 = &mut self.p2[img * flat..(img + 1) * flat];
            conv2_pool::<T, V>(
                p1,
                &self.w2t,
                b2,
                p2,
                &mut self.arg2[img * A2..(img + 1) * A2],
            );
            for (f, &v) in p2.iter().enumerate() {
                self.p2t[f * ld + img] = v;
            }
        }
        let vectors = n.div_ceil(LANES);
        fc_forward_t::<T, V>(
            &self.p2t,
            flat,
            ld,
            vectors,
            &w[a.p(4)],
            &w[a.p(5)],
            &mut self.h1t,
            true,
        );
        fc_forward_t::<T, V>(
            &self.h1t,
            FC1_UNITS,
            ld,
            vectors,
            &w[a.p(6)],
            &w[a.p(7)],
            &mut self.h2t,
            true,
        );
        fc_forward_t::<T, V>(
            &self.h2t,
            FC2_UNITS,
            ld,
            vectors,
            &w[a.p(8)],
            &w[a.p(9)],
            &mut self.zt,
            false,
        );
    }

    /// Summed cross-entropy of the last forward pass over `n` images.
    #[cfg(test)]
    pub(crate) fn loss(&self, n: usize, labels: &[u8]) -> f64 {
        self.add_loss(n, labels, 0.0)
    }

    /// `total` plus the cross-entropy of each of the last forward pass's `n`
    /// images, added image by image (so a sum over several passes does not
    /// depend on how the images were split into passes).
    pub(crate) fn add_loss(&self, n: usize, labels: &[u8], total: f64) -> f64 {
        let k = self.arch.classes;
        softmax_t(&self.zt, k, self.ld, n, labels, T::one(), None, None, total)
    }

    /// Each of the last forward pass's `n` images' cross-entropy into
    /// `out[i]`: the terms [`Net::add_loss`] adds, with the same bits.
    pub(crate) fn losses(&self, n: usize, labels: &[u8], out: &mut [f64]) {
        let k = self.arch.classes;
        softmax_t(
            &self.zt,
            k,
            self.ld,
            n,
            labels,
            T::one(),
            None,
            Some(out),
            0.0,
        );
    }

    /// How many of the last forward pass's `n` images are classified as
    /// `labels` says (arg-max logit; ties to the lower class).
    pub(crate) fn correct(&self, n: usize, labels: &[u8]) -> usize {
        let k = self.arch.classes;
        (0..n)
            .filter(|&i| {
                let mut best = 0;
                for c in 1..k {
                    if self.zt[c * self.ld + i] > self.zt[best * self.ld + i] {
                        best = c;
                    }
                }
                best == usize::from(labels[i])
            })
            .count()
    }

    /// Forward and backward pass: writes the gradient of the *mean*
    /// cross-entropy over the `n` images into `grad` (same layout as `w`)
    /// and returns the summed cross-entropy.
    pub(crate) fn gradient(&mut self, w: &[T], n: usize, labels: &[u8], grad: &mut [T]) -> f64 {
        self.gradient_at(simd::level(), w, n, labels, grad)
    }

    /// [`Net::gradient`] with the kernels of an explicit level (capped at
    /// what the CPU supports): every level gives the same bits.
    pub(crate) fn gradient_at(
        &mut self,
        level: Level,
        w: &[T],
        n: usize,
        labels: &[u8],
        grad: &mut [T],
    ) -> f64 {
        T::gradient_at(level, self, w, n, labels, grad)
    }

    /// The forward and backward pass (the body every kernel level compiles).
    #[inline(always)]
    fn gradient_impl<V: Vector<T>>(
        &mut self,
        w: &[T],
        n: usize,
        labels: &[u8],
        grad: &mut [T],
    ) -> f64 {
        self.forward_impl::<V>(w, None, n);
        let a = &self.arch;
        let (ld, flat, k) = (self.ld, a.flat, a.classes);
        let ks = k.div_ceil(LANES) * LANES;
        let scale = T::one() / T::of(n as f64);
        let loss = softmax_t(
            &self.zt,
            k,
            ld,
            n,
            labels,
            scale,
            Some((&mut self.d3, ks)),
            None,
            0.0,
        );
        rows_from_t(&self.h1t, FC1_UNITS, ld, n, &mut self.h1, H1S);
        rows_from_t(&self.h2t, FC2_UNITS, ld, n, &mut self.h2, H2S);
        pad_rows(&w[a.p(6)], FC2_UNITS, FC1_UNITS, &mut self.w2p, H1S);
        pad_rows(&w[a.p(8)], k, FC2_UNITS, &mut self.w3p, H2S);
        pad_conv2(&w[a.p(2)], &mut self.w2c);
        let g = |i: usize| a.tensors[i].range();
        // fc3
        fc_weight_grad::<T, V>(
            &self.d3,
            ks,
            k,
            &self.h2,
            H2S,
            FC2_UNITS,
            n,
            &mut grad[g(8)],
        );
        fc_bias_grad(&self.d3, ks, n, &mut grad[g(9)]);
        fc_input_grad::<T, V>(
            &self.d3,
            ks,
            k,
            &self.w3p,
            H2S,
            Some(&self.h2),
            n,
            &mut self.dh2,
        );
        // fc2
        fc_weight_grad::<T, V>(
            &self.dh2,
            H2S,
            FC2_UNITS,
            &self.h1,
            H1S,
            FC1_UNITS,
            n,
            &mut grad[g(6)],
        );
        fc_bias_grad(&self.dh2, H2S, n, &mut grad[g(7)]);
        fc_input_grad::<T, V>(
            &self.dh2,
            H2S,
            FC2_UNITS,
            &self.w2p,
            H1S,
            Some(&self.h1),
            n,
            &mut self.dh1,
        );
        // fc1
        fc_weight_grad::<T, V>(
            &self.dh1,
            H1S,
            FC1_UNITS,
            &self.p2,
            flat,
            flat,
            n,
            &mut grad[g(4)],
        );
        fc_bias_grad(&self.dh1, H1S, n, &mut grad[g(5)]);
        fc_input_grad::<T, V>(
            &self.dh1,
            H1S,
            FC1_UNITS,
            &w[a.p(4)],
            flat,
            None,
            n,
            &mut self.dp2,
        );
        // pool2 + ReLU + conv2
        let (gw2, gb2) = grad[g(2).start..g(3).end].split_at_mut(g(2).len());
        conv2_backward::<T, V>(
            n,
            &self.p1,
            &self.p2,
            &self.arg2,
            &self.dp2,
            &self.w2c,
            gw2,
            gb2,
            &mut self.dp1,
            &mut self.grads2,
        );
        // pool1 + ReLU + conv1
        let (gw1, gb1) = grad[g(0).start..g(1).end].split_at_mut(g(0).len());
        conv1_backward::<T, V>(
            n,
            &self.input,
            &self.p1,
            &self.arg1,
            &self.dp1,
            gw1,
            gb1,
            &mut self.pairs,
        );
        loss
    }
}

/// A float type's entry points into the passes compiled for each kernel
/// level (the dispatch of [`crate::simd::kernel!`], with each level's own
/// [`Vector`] type: `f32` uses the portable, AVX2 and AVX-512 vectors; `f64`,
/// the gradient check's type, uses the portable vectors at every level).
pub(crate) trait Kernels: Sized {
    /// The forward pass at `level`.
    fn forward_at(level: Level, net: &mut Net<Self>, w: &[Self], x: Option<&[Self]>, n: usize);
    /// The forward and backward pass at `level`.
    fn gradient_at(
        level: Level,
        net: &mut Net<Self>,
        w: &[Self],
        n: usize,
        labels: &[u8],
        grad: &mut [Self],
    ) -> f64;
    /// [`Net::split_input`]'s copies at `level` (copies only: the same
    /// values at every level).
    fn split_at(level: Level, net: &mut Net<Self>);
}

macro_rules! kernels_for {
    ($t:ty, $portable:ty, $avx2:ty, $avx512:ty) => {
        impl Kernels for $t {
            fn split_at(level: Level, net: &mut Net<$t>) {
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                    fn avx512(net: &mut Net<$t>) {
                        net.split_impl()
                    }
                    #[target_feature(enable = "avx2,fma")]
                    fn avx2(net: &mut Net<$t>) {
                        net.split_impl()
                    }
                    match level.min(simd::detected()) {
                        // SAFETY: `detected()` reports only features this CPU has.
                        Level::Avx512 => return unsafe { avx512(net) },
                        // SAFETY: as above.
                        Level::Avx2 => return unsafe { avx2(net) },
                        Level::Portable => {}
                    }
                }
                let _ = level;
                net.split_impl()
            }
            fn forward_at(level: Level, net: &mut Net<$t>, w: &[$t], x: Option<&[$t]>, n: usize) {
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                    fn avx512(net: &mut Net<$t>, w: &[$t], x: Option<&[$t]>, n: usize) {
                        net.forward_impl::<$avx512>(w, x, n)
                    }
                    #[target_feature(enable = "avx2,fma")]
                    fn avx2(net: &mut Net<$t>, w: &[$t], x: Option<&[$t]>, n: usize) {
                        net.forward_impl::<$avx2>(w, x, n)
                    }
                    match level.min(simd::detected()) {
                        // SAFETY: `detected()` reports only features this CPU has.
                        Level::Avx512 => return unsafe { avx512(net, w, x, n) },
                        // SAFETY: as above.
                        Level::Avx2 => return unsafe { avx2(net, w, x, n) },
                        Level::Portable => {}
                    }
                }
                let _ = level;
                net.forward_impl::<$portable>(w, x, n)
            }
            fn gradient_at(
                level: Level,
                net: &mut Net<$t>,
                w: &[$t],
                n: usize,
                labels: &[u8],
                grad: &mut [$t],
            ) -> f64 {
                #[cfg(target_arch = "x86_64")]
                {
                    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                    fn avx512(
                        net: &mut Net<$t>,
                        w: &[$t],
                        n: usize,
                        labels: &[u8],
                        grad: &mut [$t],
                    ) -> f64 {
                        net.gradient_impl::<$avx512>(w, n, labels, grad)
                    }
                    #[target_feature(enable = "avx2,fma")]
                    fn avx2(
                        net: &mut Net<$t>,
                        w: &[$t],
                        n: usize,
                        labels: &[u8],
                        grad: &mut [$t],
                    ) -> f64 {
                        net.gradient_impl::<$avx2>(w, n, labels, grad)
                    }
                    match level.min(simd::detected()) {
                        // SAFETY: `detected()` reports only features this CPU has.
                        Level::Avx512 => return unsafe { avx512(net, w, n, labels, grad) },
                        // SAFETY: as above.
                        Level::Avx2 => return unsafe { avx2(net, w, n, labels, grad) },
                        Level::Portable => {}
                    }
                }
                let _ = level;
                net.gradient_impl::<$portable>(w, n, labels, grad)
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
kernels_for!(f32, Portable<f32>, Avx2, Avx512);
#[cfg(target_arch = "x86_64")]
kernels_for!(f64, Portable<f64>, Portable<f64>, Portable<f64>);
#[cfg(not(target_arch = "x86_64"))]
kernels_for!(f32, Portable<f32>, Portable<f32>, Portable<f32>);
#[cfg(not(target_arch = "x86_64"))]
kernels_for!(f64, Portable<f64>, Portable<f64>, Portable<f64>);
