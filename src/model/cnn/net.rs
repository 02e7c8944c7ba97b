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
    ConvShape, Scalar, conv_im2col_backward, conv_single_channel, conv_single_channel_backward,
    im2col, linear_backward, linear_forward, pool_relu_nhwc, pool_relu_planar_to_nhwc, relu,
    relu_backward, softmax_cross_entropy,
};

/// Input side the network is built for (MNIST).
pub const SIDE: usize = 28;
/// Output side of conv1 (`SIDE − KERNEL + 1`).
pub const CONV1_OUT: usize = SIDE - KERNEL + 1;

/// Kernel side of both convolutions.
pub const KERNEL: usize = 5;
/// Output channels of conv1.
pub const CONV1_CHANNELS: usize = 6;
/// Output channels of conv2.
pub const CONV2_CHANNELS: usize = 16;
/// Width of fc1.
pub const FC1_UNITS: usize = 120;
/// Width of fc2.
pub const FC2_UNITS: usize = 84;

/// One parameter tensor: its name, shape and place in the flat vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// e.g. `conv1.weight`, `fc3.bias`.
    pub name: &'static str,
    /// Size of the first dimension (output channels or units).
    pub rows: usize,
    /// Values per row (product of the other dimensions; 1 for a bias).
    pub row_len: usize,
    /// Fan-in of the layer the tensor belongs to (for initialisation).
    pub fan_in: usize,
    /// Offset in the flat parameter vector.
    pub offset: usize,
}

impl Tensor {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.rows * self.row_len
    }
    /// Whether the tensor is empty (never, for this architecture).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Its range in the flat parameter vector.
    pub fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.len()
    }
}

/// The shapes of the network for a given input side and class count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arch {
    /// Input side (28 for MNIST).
    pub side: usize,
    /// Number of classes.
    pub classes: usize,
    /// conv1.
    pub conv1: ConvShape,
    /// conv2.
    pub conv2: ConvShape,
    /// Side after the second pooling.
    pub pool2_side: usize,
    /// Inputs of fc1 (`pool2_side² · 16`).
    pub flat: usize,
    /// The ten tensors in order: conv1.w, conv1.b, conv2.w, conv2.b, fc1.w, …, fc3.b.
    pub tensors: Vec<Tensor>,
}

impl Arch {
    /// The architecture for `side × side` single-channel images and `classes`
    /// classes; `None` unless `side` is [`SIDE`] (28, MNIST) and there are
    /// at least two classes.
    pub fn new(side: usize, classes: usize) -> Option<Arch> {
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
    pub fn parameters(&self) -> usize {
        self.tensors.last().map_or(0, |t| t.offset + t.len())
    }

    /// Input values per image.
    pub fn input_len(&self) -> usize {
        self.side * self.side
    }

    fn p(&self, i: usize) -> Range<usize> {
        self.tensors[i].range()
    }
}

/// Whether this CPU runs the AVX2 build of the passes (cached by std).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Activation and gradient buffers for batches of up to `capacity` images.
pub struct Net<T> {
    arch: Arch,
    capacity: usize,
    /// Input images, NHWC (`capacity × side²`); the caller fills it.
    pub input: Vec<T>,
    a1: Vec<T>,
    p1: Vec<T>,
    arg1: Vec<u32>,
    cols2: Vec<T>,
    a2: Vec<T>,
    p2: Vec<T>,
    arg2: Vec<u32>,
    h1: Vec<T>,
    h2: Vec<T>,
    logits: Vec<T>,
    d3: Vec<T>,
    dh2: Vec<T>,
    dh1: Vec<T>,
    dp2: Vec<T>,
    dp1: Vec<T>,
}

impl<T: Scalar> Net<T> {
    /// Buffers for batches of up to `capacity` images.
    pub fn new(arch: &Arch, capacity: usize) -> Net<T> {
        let n = capacity.max(1);
        let z = T::zero();
        let (c1, c2) = (arch.conv1, arch.conv2);
        Net {
            arch: arch.clone(),
            capacity: n,
            input: vec![z; n * arch.input_len()],
            a1: vec![z; n * c1.out_len()],
            p1: vec![z; n * c2.in_len()],
            arg1: vec![0; n * c2.in_len()],
            cols2: vec![z; n * c2.positions() * c2.taps()],
            a2: vec![z; n * c2.out_len()],
            p2: vec![z; n * arch.flat],
            arg2: vec![0; n * arch.flat],
            h1: vec![z; n * FC1_UNITS],
            h2: vec![z; n * FC2_UNITS],
            logits: vec![z; n * arch.classes],
            d3: vec![z; n * arch.classes],
            dh2: vec![z; n * FC2_UNITS],
            dh1: vec![z; n * FC1_UNITS],
            dp2: vec![z; n * arch.flat],
            dp1: vec![z; n * c2.in_len()],
        }
    }

    /// The largest batch these buffers hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Logits of the last forward pass (`n × classes`).
    pub fn logits(&self, n: usize) -> &[T] {
        &self.logits[..n * self.arch.classes]
    }

    /// Forward pass of the first `n` images in `input` under parameters `w`.
    pub fn forward(&mut self, w: &[T], n: usize) {
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU supports AVX2 (checked at run time).
            return unsafe { self.forward_avx2(w, None, n) };
        }
        self.forward_impl(w, None, n);
    }

    /// Forward pass of the first `n` images of `x` (planar, like `input`).
    pub fn forward_from(&mut self, w: &[T], x: &[T], n: usize) {
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU supports AVX2 (checked at run time).
            return unsafe { self.forward_avx2(w, Some(x), n) };
        }
        self.forward_impl(w, Some(x), n);
    }

    /// [`Net::forward_impl`] compiled for AVX2: the kernels are
    /// `#[inline(always)]`, so they are vectorised 8 floats wide here. The
    /// result is bit for bit the baseline build's: the kernels use only
    /// element-wise IEEE operations and fixed summation orders, and without
    /// FMA nothing is contracted.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn forward_avx2(&mut self, w: &[T], x: Option<&[T]>, n: usize) {
        self.forward_impl(w, x, n);
    }

    #[inline(always)]
    fn forward_impl(&mut self, w: &[T], x: Option<&[T]>, n: usize) {
        assert!(n <= self.capacity, "batch larger than the buffers");
        let a = &self.arch;
        let (c1, c2) = (a.conv1, a.conv2);
        // conv1 (direct, planar) + fused ReLU and pooling (to NHWC)
        let x = x.unwrap_or(&self.input);
        conv_single_channel::<T, KERNEL, CONV1_OUT>(
            x,
            n,
            SIDE,
            &w[a.p(0)],
            &w[a.p(1)],
            &mut self.a1,
        );
        pool_relu_planar_to_nhwc(
            &self.a1,
            n,
            c1.cout,
            CONV1_OUT,
            &mut self.p1,
            &mut self.arg1,
        );
        // conv2 (im2col + GEMM, NHWC) + fused ReLU and pooling
        im2col(&c2, &self.p1, n, &mut self.cols2);
        let rows2 = n * c2.positions();
        linear_forward(&self.cols2, rows2, &w[a.p(2)], &w[a.p(3)], &mut self.a2);
        pool_relu_nhwc(
            &self.a2,
            n,
            c2.out_side(),
            c2.cout,
            &mut self.p2,
            &mut self.arg2,
        );
        // fully connected
        linear_forward(&self.p2, n, &w[a.p(4)], &w[a.p(5)], &mut self.h1);
        relu(&mut self.h1[..n * FC1_UNITS]);
        linear_forward(&self.h1, n, &w[a.p(6)], &w[a.p(7)], &mut self.h2);
        relu(&mut self.h2[..n * FC2_UNITS]);
        linear_forward(&self.h2, n, &w[a.p(8)], &w[a.p(9)], &mut self.logits);
    }

    /// Summed cross-entropy of the last forward pass over `n` images.
    pub fn loss(&self, n: usize, labels: &[u8]) -> f64 {
        softmax_cross_entropy(&self.logits, n, self.arch.classes, labels, T::one(), None)
    }

    /// How many of the last forward pass's `n` images are classified as
    /// `labels` says (arg-max logit; ties to the lower class).
    pub fn correct(&self, n: usize, labels: &[u8]) -> usize {
        let k = self.arch.classes;
        self.logits[..n * k]
            .chunks_exact(k)
            .zip(labels)
            .filter(|(row, y)| {
                let mut best = 0;
                for (c, v) in row.iter().enumerate() {
                    if *v > row[best] {
                        best = c;
                    }
                }
                best == usize::from(**y)
            })
            .count()
    }

    /// Forward and backward pass: writes the gradient of the *mean*
    /// cross-entropy over the `n` images into `grad` (same layout as `w`)
    /// and returns the summed cross-entropy.
    pub fn gradient(&mut self, w: &[T], n: usize, labels: &[u8], grad: &mut [T]) -> f64 {
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU supports AVX2 (checked at run time).
            return unsafe { self.gradient_avx2(w, n, labels, grad) };
        }
        self.gradient_impl(w, n, labels, grad)
    }

    /// [`Net::gradient_impl`] compiled for AVX2 (see [`Net::forward_avx2`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn gradient_avx2(&mut self, w: &[T], n: usize, labels: &[u8], grad: &mut [T]) -> f64 {
        self.gradient_impl(w, n, labels, grad)
    }

    /// The portable gradient (also the body of the AVX2 build).
    #[inline(always)]
    pub(crate) fn gradient_impl(
        &mut self,
        w: &[T],
        n: usize,
        labels: &[u8],
        grad: &mut [T],
    ) -> f64 {
        self.forward_impl(w, None, n);
        let a = &self.arch;
        let c2 = a.conv2;
        let scale = T::one() / T::of(n as f64);
        let loss = softmax_cross_entropy(
            &self.logits,
            n,
            a.classes,
            labels,
            scale,
            Some(&mut self.d3),
        );
        let (g01, rest) = grad.split_at_mut(a.tensors[2].offset);
        let (gw1, gb1) = g01.split_at_mut(a.tensors[1].offset);
        let (g23, rest) = rest.split_at_mut(a.tensors[4].offset - a.tensors[2].offset);
        let (gw2, gb2) = g23.split_at_mut(a.tensors[3].offset - a.tensors[2].offset);
        let (g45, rest) = rest.split_at_mut(a.tensors[6].offset - a.tensors[4].offset);
        let (gw3, gb3) = g45.split_at_mut(a.tensors[5].offset - a.tensors[4].offset);
        let (g67, g89) = rest.split_at_mut(a.tensors[8].offset - a.tensors[6].offset);
        let (gw4, gb4) = g67.split_at_mut(a.tensors[7].offset - a.tensors[6].offset);
        let (gw5, gb5) = g89.split_at_mut(a.tensors[9].offset - a.tensors[8].offset);
        // fc3
        linear_backward(
            &self.h2,
            n,
            &w[a.p(8)],
            &self.d3,
            gw5,
            gb5,
            Some(&mut self.dh2),
        );
        relu_backward(&self.h2[..n * FC2_UNITS], &mut self.dh2[..n * FC2_UNITS]);
        // fc2
        linear_backward(
            &self.h1,
            n,
            &w[a.p(6)],
            &self.dh2,
            gw4,
            gb4,
            Some(&mut self.dh1),
        );
        relu_backward(&self.h1[..n * FC1_UNITS], &mut self.dh1[..n * FC1_UNITS]);
        // fc1
        linear_backward(
            &self.p2,
            n,
            &w[a.p(4)],
            &self.dh1,
            gw3,
            gb3,
            Some(&mut self.dp2),
        );
        // pool2 + ReLU + conv2 (sparse): weight gradient and dp1.
        let pooled2 = n * a.flat;
        let pooled1 = n * c2.in_len();
        conv_im2col_backward(
            &c2,
            n,
            &self.cols2,
            &w[a.p(2)],
            &self.p2[..pooled2],
            &self.arg2[..pooled2],
            &self.dp2[..pooled2],
            gw2,
            gb2,
            &mut self.dp1,
        );
        // pool1 + ReLU + conv1 (sparse): weight gradient.
        conv_single_channel_backward::<T, KERNEL, CONV1_OUT>(
            &self.input,
            n,
            SIDE,
            &self.p1[..pooled1],
            &self.arg1[..pooled1],
            &self.dp1[..pooled1],
            gw1,
            gb1,
        );
        loss
    }
}
