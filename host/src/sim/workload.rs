//! What the simulator runs on and what it runs: GPUs, GeMM shapes, tilings, kernel configs.

use crate::shared::Grid;

/// A GPU as the wave model sees it: a number of SMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// Marketing name, for reports.
    pub name: &'static str,
    /// Streaming multiprocessors.
    pub sms: u32,
}

/// NVIDIA Tesla V100 (the CuSync paper's GPU): 80 SMs.
pub const V100: Gpu = Gpu {
    name: "Tesla V100",
    sms: 80,
};

/// NVIDIA H200: 132 SMs.
pub const H200: Gpu = Gpu { name: "H200", sms: 132 };

/// A GeMM `C[m, n] = A[m, k] * B[k, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// The reduction dimension.
    pub k: u32,
}

/// How a GeMM kernel cuts its output: thread-block tile and split-K slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiling {
    /// Rows of C per tile.
    pub tile_m: u32,
    /// Columns of C per tile.
    pub tile_n: u32,
    /// Split-K slices (grid `z`); 1 when K is not split.
    pub split_k: u32,
}

impl Tiling {
    /// A `tile_m x tile_n` tiling with `split_k` slices.
    pub const fn new(tile_m: u32, tile_n: u32, split_k: u32) -> Self {
        Self {
            tile_m,
            tile_n,
            split_k,
        }
    }
}

impl GemmShape {
    /// The grid `[ceil(m / tile_m), ceil(n / tile_n), split_k]`.
    pub const fn grid(&self, tiling: Tiling) -> Grid {
        Grid::covering(self.m, self.n, tiling.tile_m, tiling.tile_n, tiling.split_k)
    }

    /// Multiply-accumulates one thread block does: a full tile over its K slice.
    pub const fn macs_per_thread_block(&self, tiling: Tiling) -> u64 {
        tiling.tile_m as u64 * tiling.tile_n as u64 * self.k.div_ceil(tiling.split_k) as u64
    }
}

/// GPT-3's hidden size.
pub const GPT3_HIDDEN: u32 = 12288;

/// The two GeMMs of a GPT-3 MLP with 8-way tensor parallelism (paper, Figure "gpt-3:mlp"):
/// `X[B, H] x W1[H, 4H/8] -> [B, 4H/8]` (GeLU fused), then `x W2[4H/8, H] -> [B, H]`.
pub const fn mlp_gemms(batch: u32, hidden: u32) -> [GemmShape; 2] {
    let inner = 4 * hidden / 8;
    [
        GemmShape {
            m: batch,
            n: inner,
            k: hidden,
        },
        GemmShape {
            m: batch,
            n: hidden,
            k: inner,
        },
    ]
}

/// A 2-D convolution with stride 1 and "same" padding, as the implicit GeMM
/// `[B*P*Q, C_in*R*S] x [C_in*R*S, C_out]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dShape {
    /// Images.
    pub batch: u32,
    /// Image height (= output height P).
    pub height: u32,
    /// Image width (= output width Q).
    pub width: u32,
    /// Input channels.
    pub channels_in: u32,
    /// Output channels.
    pub channels_out: u32,
    /// Filter height R.
    pub filter_r: u32,
    /// Filter width S.
    pub filter_s: u32,
}

impl Conv2dShape {
    /// A ResNet layer's 3x3 convolution on `size x size x channels` images, channels kept.
    pub const fn resnet_3x3(batch: u32, size: u32, channels: u32) -> Self {
        Self {
            batch,
            height: size,
            width: size,
            channels_in: channels,
            channels_out: channels,
            filter_r: 3,
            filter_s: 3,
        }
    }

    /// The implicit GeMM this convolution is computed as.
    pub const fn implicit_gemm(&self) -> GemmShape {
        GemmShape {
            m: self.batch * self.height * self.width,
            n: self.channels_out,
            k: self.channels_in * self.filter_r * self.filter_s,
        }
    }

    /// Filter taps `R * S`.
    pub const fn taps(&self) -> u32 {
        self.filter_r * self.filter_s
    }
}
