//! The GeMM problem: element types, layouts, epilogues, path 1's tiles and their heuristic,
//! and [`GemmConfig`] with its validation of shapes and limits.

use super::super::gemm_sm90::WgTile;
use crate::{Error, Result};
use cusync_shared::gemm::{flags, GemmTileShape, TILE_128X128, TILE_256X128, TILE_64X64};

/// Input element type (A and B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputType {
    /// bfloat16.
    Bf16,
    /// IEEE half.
    F16,
}

/// Output element type (C).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputType {
    /// bfloat16 (round to nearest even).
    Bf16,
    /// IEEE half (round to nearest even).
    F16,
    /// f32 (the accumulator, unrounded).
    F32,
}

/// How an operand is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// A as `[M, K]`, B as `[K, N]`, row-major.
    RowMajor,
    /// A stored as `[K, M]`, B stored as `[N, K]` (row-major storage of the transpose).
    Transposed,
}

/// What is applied to each accumulator before it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// `C = A B`.
    None,
    /// `C = A B + bias[n]` (f32 bias, one per column).
    Bias,
    /// `C = gelu(A B)`, tanh approximation.
    Gelu,
    /// `C = gelu(A B + bias[n])`.
    BiasGelu,
}

/// The block-tile configurations the device instantiates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileConfig {
    /// 256 x 128 x 32, 256 threads (8 warps of 64 x 64), 4 stages, 96 KiB shared memory.
    T256x128,
    /// 128 x 128 x 32, 256 threads (8 warps of 64 x 32), 4 stages, 64 KiB shared memory.
    T128x128,
    /// 64 x 64 x 32, 128 threads (4 warps of 32 x 32), 4 stages, 32 KiB shared memory.
    T64x64,
}

impl TileConfig {
    /// The block tile as text ("128x128").
    pub fn name(self) -> &'static str {
        match self {
            TileConfig::T256x128 => "256x128",
            TileConfig::T128x128 => "128x128",
            TileConfig::T64x64 => "64x64",
        }
    }

    /// Parses a [`TileConfig::name`] ("256x128", "128x128", "64x64").
    pub fn parse(s: &str) -> Result<Self> {
        [TileConfig::T256x128, TileConfig::T128x128, TileConfig::T64x64]
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| Error::InvalidArgument(format!("unknown path-1 tile `{s}`: use 256x128, 128x128 or 64x64")))
    }
}

impl InputType {
    /// The [`crate::runtime::Element::NAME`] of the matching buffer type.
    pub fn name(self) -> &'static str {
        match self {
            InputType::Bf16 => "bf16",
            InputType::F16 => "f16",
        }
    }
}

impl OutputType {
    /// The [`crate::runtime::Element::NAME`] of the matching buffer type.
    pub fn name(self) -> &'static str {
        match self {
            OutputType::Bf16 => "bf16",
            OutputType::F16 => "f16",
            OutputType::F32 => "f32",
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> usize {
        match self {
            OutputType::F32 => 4,
            _ => 2,
        }
    }

    fn code(self) -> u32 {
        match self {
            OutputType::Bf16 => flags::OUT_BF16,
            OutputType::F16 => flags::OUT_F16,
            OutputType::F32 => flags::OUT_F32,
        }
    }
}

impl Epilogue {
    /// Whether a bias vector is read.
    pub fn has_bias(self) -> bool {
        matches!(self, Epilogue::Bias | Epilogue::BiasGelu)
    }

    /// Whether GeLU is applied.
    pub fn has_gelu(self) -> bool {
        matches!(self, Epilogue::Gelu | Epilogue::BiasGelu)
    }
}

impl TileConfig {
    /// The shared shape facts (block tile, warps, shared memory, grid).
    pub fn shape(self) -> GemmTileShape {
        match self {
            TileConfig::T256x128 => TILE_256X128,
            TileConfig::T128x128 => TILE_128X128,
            TileConfig::T64x64 => TILE_64X64,
        }
    }

    /// The entry point for inputs of type `input`.
    pub fn kernel_name(self, input: InputType) -> &'static str {
        match (input, self) {
            (InputType::Bf16, TileConfig::T256x128) => "gemm_bf16_256x128",
            (InputType::F16, TileConfig::T256x128) => "gemm_f16_256x128",
            (InputType::Bf16, TileConfig::T128x128) => "gemm_bf16_128x128",
            (InputType::Bf16, TileConfig::T64x64) => "gemm_bf16_64x64",
            (InputType::F16, TileConfig::T128x128) => "gemm_f16_128x128",
            (InputType::F16, TileConfig::T64x64) => "gemm_f16_64x64",
        }
    }
}

/// The tile heuristic, from measurements of the three tiles on the H200 (2026-11-29):
///
/// * 64 x 64 for skinny outputs (`m <= 64` or `n <= 64`: a big tile would be mostly padding);
/// * 256 x 128 when its grid has at least two tiles per SM (it runs one block per SM: 255
///   registers per thread; best on large problems: 240-270 TFLOP/s at 4096^3-8192^3);
/// * 128 x 128 when its grid has at least one tile per SM (two blocks per SM fit);
/// * 64 x 64 otherwise (four times the blocks of 128 x 128: fills the SMs on small outputs).
pub fn choose_tile(m: usize, n: usize, sm_count: u32) -> TileConfig {
    if m <= 64 || n <= 64 {
        return TileConfig::T64x64;
    }
    let sms = sm_count as usize;
    let tiles = |bm: usize, bn: usize| m.div_ceil(bm) * n.div_ceil(bn);
    if tiles(256, 128) >= 2 * sms {
        TileConfig::T256x128
    } else if tiles(128, 128) >= sms {
        TileConfig::T128x128
    } else {
        TileConfig::T64x64
    }
}

/// One GeMM problem: shape, types, layouts, epilogue, and optionally a forced tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// The reduction dimension.
    pub k: usize,
    /// A and B element type.
    pub input: InputType,
    /// C element type.
    pub output: OutputType,
    /// How A is stored.
    pub a_layout: Layout,
    /// How B is stored.
    pub b_layout: Layout,
    /// The epilogue.
    pub epilogue: Epilogue,
    /// A forced path-1 tile configuration; `None` lets [`choose_tile`] pick (and lets path 2
    /// run where it applies). Forcing it forces path 1 (stream mode's kernels are path 1).
    pub tile: Option<TileConfig>,
    /// A forced path-2 tile; `None` lets [`crate::ops::gemm_sm90::choose_plain_wg_tile`] pick where path 2 applies.
    pub wg_tile: Option<WgTile>,
    /// Whether path 2 (sm_90a TMA + wgmma) may be used when no path-1 tile is forced.
    pub allow_path2: bool,
    /// Path 2's split-K factor forced (clamped to `1..=` the K-steps); `None` lets
    /// [`cusync_shared::gemm_sm90::choose_split_k`] pick (splits only when the tiles do not
    /// fill the SMs).
    pub split_k: Option<u32>,
    /// Path 2's stream-K forced on (`Some(true)`: wherever the tiles' K-steps can be cut into
    /// one range per block of at least 4 K-steps) or off; `None` lets
    /// [`cusync_shared::stream_k::choose_stream_k`] pick (problems of one row tile). A forced split-K factor turns stream-K off.
    pub stream_k: Option<bool>,
    /// Path 2's stream-K ranges forced: `Some(r)` runs stream-K over `r` ranges, one block each
    /// (clamped to the resident blocks), instead of one per resident block; set with
    /// [`GemmConfig::stream_k_ranges`], which also forces stream-K on. An error with a forced
    /// split-K factor or stream-K forced off. `None`: one range per resident block.
    pub stream_k_ranges: Option<u32>,
    /// Path 2's clusters of two blocks multicasting B forced on (an error where they cannot
    /// run: only the 128 x 256 tile with whole tiles and row-major B) or off; `None`: on where
    /// they can run and the tile has at least two row tiles.
    pub cluster: Option<bool>,
    /// Path 2 run swapped (`C^T = B^T A^T` on the 128 x 64 tile, C written transposed so the
    /// result is the same) forced on or off; `None`: on by [`crate::ops::gemm_sm90::choose_swap_ab`] (M <= 64,
    /// N >= 128) when no path-2 tile is forced. Plain launches only; an error on a problem
    /// without path 2 or with another path-2 tile forced.
    pub swap_ab: Option<bool>,
    /// The skinny kernels (`M <= 64`: the weight streamed once through a per-warp `cp.async`
    /// ring, no block pipeline; [`super::gemm_skinny`]) forced on (an error where they cannot
    /// run) or off; `None`: on where [`super::gemm_skinny::choose_skinny`] says so. Untraced
    /// launches whose operands fit only; traced launches run the path-1/path-2 kernel.
    pub skinny: Option<bool>,
    /// The skinny kernels' column block width, 64 or 128 (`M <= 16` only: 128-column blocks
    /// make each row of a block one 256-byte run); `None`: the library's
    /// ([`super::gemm_skinny::SKINNY_DEFAULT_COLS`]).
    pub skinny_cols: Option<u32>,
    /// Path 2's L2 promotion of both operands' tensor maps forced; `None`: 256 bytes (the
    /// fills a 128-byte-swizzled box row of 64 columns pairs with its neighbour's). An
    /// experiment's knob (`run gemm --l2-promotion`): the TMA probe measures what each
    /// promotion gives a weight's cut (`run tma-probe`).
    pub l2_promotion: Option<super::gemm_sm90::L2Promotion>,
    /// Path 2's pipeline depth forced: the stages of the tile's ring a launch uses, `2..=` the
    /// tile's stages ([`cusync_shared::gemm_sm90::TmaGemmParams::pipeline_depth`]); `None`: all
    /// of them. Fewer stages keep fewer of the weight's bytes in flight per SM; an
    /// experiment's knob (`run gemm --pipeline-depth`), refused on path 1 and the skinny
    /// kernels.
    pub pipeline_depth: Option<u32>,
}

/// The largest M, N or K accepted (indices are 32-bit on the device).
pub const MAX_DIM: usize = i32::MAX as usize;

impl GemmConfig {
    /// `m x n x k`, bf16 in and out, both operands row-major, no epilogue, heuristic tile.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Self {
            m,
            n,
            k,
            input: InputType::Bf16,
            output: OutputType::Bf16,
            a_layout: Layout::RowMajor,
            b_layout: Layout::RowMajor,
            epilogue: Epilogue::None,
            tile: None,
            wg_tile: None,
            allow_path2: true,
            split_k: None,
            stream_k: None,
            stream_k_ranges: None,
            cluster: None,
            swap_ab: None,
            skinny: None,
            skinny_cols: None,
            l2_promotion: None,
            pipeline_depth: None,
        }
    }

    /// The same product with the operands swapped (`C^T[N, M] = B^T A^T`): M and N traded,
    /// B's storage as the new A (transposed exactly when B was row-major), A's as the new B.
    /// The shape the path-2 kernel of a swapped launch is set up for
    /// ([`cusync_shared::gemm::GemmParams::swap_ab`] swaps each launch's parameters).
    pub fn swapped(&self) -> Self {
        let flip = |l: Layout| match l {
            Layout::RowMajor => Layout::Transposed,
            Layout::Transposed => Layout::RowMajor,
        };
        Self {
            m: self.n,
            n: self.m,
            a_layout: flip(self.b_layout),
            b_layout: flip(self.a_layout),
            ..*self
        }
    }

    /// With the skinny kernels forced on or off ([`GemmConfig::skinny`]).
    pub fn skinny(mut self, on: bool) -> Self {
        self.skinny = Some(on);
        self
    }

    /// With the skinny kernels' column blocks `cols` wide ([`GemmConfig::skinny_cols`]).
    pub fn skinny_cols(mut self, cols: u32) -> Self {
        self.skinny_cols = Some(cols);
        self
    }

    /// Whether nothing picks a kernel family or decomposition: no path-1 or path-2 tile, swap,
    /// split-K, stream-K, cluster or L2-promotion setting forced (the skinny kernels are then
    /// the default where [`super::gemm_skinny::choose_skinny`] says so).
    pub fn no_kernel_forced(&self) -> bool {
        self.no_path2_tile_or_division_forced() && self.l2_promotion.is_none() && self.pipeline_depth.is_none()
    }

    /// Whether path 2 is allowed and nothing picks its tile or division: no path-1 or path-2
    /// tile, swap, split-K, stream-K or cluster forced (an L2 promotion or pipeline depth may
    /// be). The small-batch tile rules (`gemm_sm90::choose_tile96`, `choose_tile16`) start here.
    pub fn no_path2_tile_or_division_forced(&self) -> bool {
        self.tile.is_none()
            && self.wg_tile.is_none()
            && self.swap_ab.is_none()
            && self.split_k.is_none()
            && self.stream_k.is_none()
            && self.cluster.is_none()
            && self.allow_path2
    }

    /// With input type `t`.
    pub fn input(mut self, t: InputType) -> Self {
        self.input = t;
        self
    }

    /// With output type `t`.
    pub fn output(mut self, t: OutputType) -> Self {
        self.output = t;
        self
    }

    /// With layouts `a` and `b`.
    pub fn layouts(mut self, a: Layout, b: Layout) -> Self {
        self.a_layout = a;
        self.b_layout = b;
        self
    }

    /// With epilogue `e`.
    pub fn epilogue(mut self, e: Epilogue) -> Self {
        self.epilogue = e;
        self
    }

    /// With the path-1 tile forced to `t` (and so path 1).
    pub fn tile(mut self, t: TileConfig) -> Self {
        self.tile = Some(t);
        self
    }

    /// With the path-2 tile forced to `t` ([`super::Gemm::new`] refuses it where path 2 cannot run).
    pub fn wg_tile(mut self, t: WgTile) -> Self {
        self.wg_tile = Some(t);
        self
    }

    /// With path 2's split-K factor forced to `splits` (1: no split).
    pub fn split_k(mut self, splits: u32) -> Self {
        self.split_k = Some(splits);
        self
    }

    /// With path 2's stream-K forced on or off.
    pub fn stream_k(mut self, on: bool) -> Self {
        self.stream_k = Some(on);
        self
    }

    /// With path 2's stream-K forced on over `ranges` ranges ([`GemmConfig::stream_k_ranges`]).
    pub fn stream_k_ranges(mut self, ranges: u32) -> Self {
        self.stream_k = Some(true);
        self.stream_k_ranges = Some(ranges);
        self
    }

    /// With path 2's swapped operands forced on or off ([`GemmConfig::swap_ab`]).
    pub fn swap_ab(mut self, on: bool) -> Self {
        self.swap_ab = Some(on);
        self
    }

    /// With path 2's tensor maps' L2 promotion forced to `p` ([`GemmConfig::l2_promotion`]).
    pub fn l2_promotion(mut self, p: super::gemm_sm90::L2Promotion) -> Self {
        self.l2_promotion = Some(p);
        self
    }

    /// With path 2's pipeline depth forced to `stages` ([`GemmConfig::pipeline_depth`]).
    pub fn pipeline_depth(mut self, stages: u32) -> Self {
        self.pipeline_depth = Some(stages);
        self
    }

    /// With path 2's clusters (B multicast) forced on or off.
    pub fn cluster(mut self, on: bool) -> Self {
        self.cluster = Some(on);
        self
    }

    /// Path 1 only (the heuristic's tile), even where path 2 could run.
    pub fn path1_only(mut self) -> Self {
        self.allow_path2 = false;
        self
    }

    /// Elements A's storage needs (`m * k`).
    pub fn a_len(&self) -> usize {
        self.m * self.k
    }

    /// Elements B's storage needs (`k * n`).
    pub fn b_len(&self) -> usize {
        self.k * self.n
    }

    /// Elements C needs (`m * n`).
    pub fn c_len(&self) -> usize {
        self.m * self.n
    }

    /// Floating-point operations of the product (`2 m n k`).
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Leading dimensions of A's and B's storage (elements).
    pub fn leading_dims(&self) -> (usize, usize) {
        let lda = match self.a_layout {
            Layout::RowMajor => self.k,
            Layout::Transposed => self.m,
        };
        let ldb = match self.b_layout {
            Layout::RowMajor => self.n,
            Layout::Transposed => self.k,
        };
        (lda, ldb)
    }

    /// The tile this problem runs with on a device of `sm_count` SMs.
    pub fn resolve_tile(&self, sm_count: u32) -> TileConfig {
        self.tile.unwrap_or_else(|| choose_tile(self.m, self.n, sm_count))
    }

    /// The layout/epilogue/output bits of [`cusync_shared::gemm::GemmParams::flags`] (the `*_VEC` bits depend on
    /// the buffers and are added by [`cusync_shared::gemm::GemmParams::dense`]).
    pub fn flags(&self) -> u32 {
        let mut f = self.output.code() << flags::OUT_SHIFT;
        if self.a_layout == Layout::Transposed {
            f |= flags::A_TRANS;
        }
        if self.b_layout == Layout::Transposed {
            f |= flags::B_TRANS;
        }
        if self.epilogue.has_bias() {
            f |= flags::BIAS;
        }
        if self.epilogue.has_gelu() {
            f |= flags::GELU;
        }
        f
    }

    /// Checks the shape alone: every dimension at least 1 and at most [`MAX_DIM`], element
    /// counts that fit the address space, and a grid the launch limits allow for `tile`.
    pub fn validate(&self, tile: TileConfig) -> Result<()> {
        for (name, v) in [("M", self.m), ("N", self.n), ("K", self.k)] {
            if v == 0 {
                return Err(Error::InvalidArgument(format!(
                    "GeMM dimension {name} is 0 (M={}, N={}, K={}); every dimension must be at least 1",
                    self.m, self.n, self.k
                )));
            }
            if v > MAX_DIM {
                return Err(Error::InvalidArgument(format!(
                    "GeMM dimension {name} = {v} exceeds the supported maximum {MAX_DIM}"
                )));
            }
        }
        for (name, a, b) in [
            ("M*K", self.m, self.k),
            ("K*N", self.k, self.n),
            ("M*N", self.m, self.n),
        ] {
            if a.checked_mul(b).and_then(|e| e.checked_mul(4)).is_none() {
                return Err(Error::InvalidArgument(format!(
                    "GeMM {name} = {a} x {b} overflows the address space"
                )));
            }
        }
        let grid = tile.shape().grid(self.m as u32, self.n as u32);
        if grid.y > 65_535 {
            return Err(Error::InvalidArgument(format!(
                "GeMM N = {} needs {} column tiles of {}, above the grid limit of 65535 (gridDim.y)",
                self.n,
                grid.y,
                tile.shape().bn
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cusync_shared::gemm::GemmParams;

    #[test]
    fn heuristic_uses_small_tiles_for_skinny_and_sub_wave_shapes() {
        assert_eq!(choose_tile(1, 4096, 132), TileConfig::T64x64);
        assert_eq!(choose_tile(64, 12288, 132), TileConfig::T64x64);
        assert_eq!(choose_tile(4096, 32, 132), TileConfig::T64x64);
        // 1024^2: 64 tiles of 128 x 128 < 132 SMs.
        assert_eq!(choose_tile(1024, 1024, 132), TileConfig::T64x64);
        // 256 x 6144: 96 tiles of 128 x 128.
        assert_eq!(choose_tile(256, 6144, 132), TileConfig::T64x64);
        // 2048^2: 256 tiles of 128 x 128, but only 128 of 256 x 128 (< 2 per SM).
        assert_eq!(choose_tile(2048, 2048, 132), TileConfig::T128x128);
        // 4096^2: 512 tiles of 256 x 128; the GPT-3 MLP at M = 2048: 384.
        assert_eq!(choose_tile(4096, 4096, 132), TileConfig::T256x128);
        assert_eq!(choose_tile(2048, 6144, 132), TileConfig::T256x128);
        assert_eq!(choose_tile(65, 65, 1), TileConfig::T128x128);
        assert_eq!(choose_tile(512, 256, 1), TileConfig::T256x128);
        // A forced tile wins.
        let c = GemmConfig::new(1, 1, 1).tile(TileConfig::T128x128);
        assert_eq!(c.resolve_tile(132), TileConfig::T128x128);
    }

    #[test]
    fn validation_refuses_empty_and_oversized_shapes() {
        let t = TileConfig::T64x64;
        for (m, n, k, word) in [(0, 1, 1, "M"), (1, 0, 1, "N"), (1, 1, 0, "K")] {
            let e = GemmConfig::new(m, n, k).validate(t).unwrap_err().to_string();
            assert!(e.contains(&format!("dimension {word} is 0")), "{e}");
        }
        let e = GemmConfig::new(1, 1, MAX_DIM + 1).validate(t).unwrap_err().to_string();
        assert!(e.contains("K = "), "{e}");
        let e = GemmConfig::new(1, 65_536 * 64 + 1, 1)
            .validate(t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("gridDim.y"), "{e}");
        assert!(GemmConfig::new(1, 1, 1).validate(t).is_ok());
        assert!(GemmConfig::new(4096, 4096, 4096).validate(TileConfig::T128x128).is_ok());
    }

    #[test]
    fn flags_and_leading_dims_follow_the_config() {
        let c = GemmConfig::new(100, 60, 40)
            .layouts(Layout::Transposed, Layout::Transposed)
            .epilogue(Epilogue::BiasGelu)
            .output(OutputType::F32);
        assert_eq!(c.leading_dims(), (100, 40));
        let f = c.flags();
        assert_eq!(f & (flags::A_TRANS | flags::B_TRANS), flags::A_TRANS | flags::B_TRANS);
        assert_eq!(f & (flags::BIAS | flags::GELU), flags::BIAS | flags::GELU);
        assert_eq!((f >> flags::OUT_SHIFT) & flags::OUT_MASK, flags::OUT_F32);
        let p = GemmParams::dense(0x100, 0x200, 0x300, 0x400, 100, 60, 40, f);
        assert_eq!((p.lda, p.ldb, p.ldc), (100, 40, 60));
        assert_eq!(GemmConfig::new(3, 5, 7).leading_dims(), (7, 5));
        assert_eq!(GemmConfig::new(3, 5, 7).flags(), flags::OUT_BF16 << flags::OUT_SHIFT);
    }
}
