//! Tensor-core GeMM: `C[M,N] = epilogue(A[M,K] x B[K,N])`. Path 1 (`cp.async` + `ldmatrix` +
//! `mma.sync`, device/src/kernels/gemm, sm_80+) and path 2 (TMA + `wgmma`, warp-specialized and
//! persistent, sm_90a: [`super::gemm_sm90`]) compute the same thing; [`Gemm`] uses path 2 where
//! it applies unless a path-1 tile is forced. For M <= 16 with row-major operands the skinny
//! kernels ([`super::gemm_skinny`]: the weight streamed through a `cp.async` ring, sm_80+) are the
//! default for untraced launches ([`GemmConfig::skinny`]).
//!
//! * inputs bf16 or f16 ([`InputType`]), f32 accumulation, output bf16, f16 or f32 ([`OutputType`]);
//! * A row-major `[M, K]` or transposed (stored `[K, M]`), B row-major `[K, N]` or transposed
//!   (stored `[N, K]`) ([`Layout`]); C row-major `[M, N]`; all dense (leading dimension = the
//!   stored row length);
//! * epilogue none, bias (f32, one per column of C), GeLU (tanh approximation, as Megatron-LM's
//!   `bias_gelu`), or bias then GeLU ([`Epilogue`]);
//! * any `M, N, K >= 1`. Operands whose rows are 16-byte aligned (K, or M/N for the transposed
//!   layouts, a multiple of 8) take the 16-byte `cp.async` path; others are loaded element by
//!   element (correct, slower). Edges are zero-filled on load and guarded on store.
//!
//! [`Gemm`] validates a [`GemmConfig`] once (shapes, grid limits, shared memory) and then each
//! launch's buffers (dtype, length, device, alignment, stream) before anything is launched;
//! every refusal is an [`Error::InvalidArgument`] that names what is wrong.
//!
//! Tile choice ([`choose_tile`]): 256 x 128 (8 warps of 64 x 64) for large outputs, 128 x 128
//! (8 warps of 64 x 32) for medium ones, 64 x 64 (4 warps of 32 x 32) for skinny (M or N at
//! most 64) and small ones.
//!
//! [`reference_gemm`] / [`reference_gemm_at`] are the f64 CPU reference (tests, benches);
//! [`time_gemm`] times one configuration with CUDA events.
//!
//! Tracing: [`Gemm::launch_traced`] has the plain kernel (either path) write one
//! [`TraceEvent`] per output tile into a buffer from [`crate::stream::trace_buffer`]
//! ([`Gemm::trace_tiles`] says how many); [`Gemm::trace_events`] reads them back, checked, as
//! one stage of a [`crate::trace::Trace`] (StreamSync's timeline beside a pipelined one).

use super::gemm_skinny::{self, SkinnyGemm};
use super::gemm_sm90::{self, choose_plain_wg_tile, choose_swap_ab, Sm90Gemm, WgTile};
use crate::runtime::Element;
use crate::{Context, DeviceBuffer, Error, Result, Stream};
use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};
use cusync_shared::gemm::{flags, GemmParams, GemmTileShape, TILE_128X128, TILE_256X128, TILE_64X64};
use cusync_shared::layout::TraceEvent;
use cusync_shared::Grid;
use rand::{Rng, SeedableRng};

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
    /// The [`Element::NAME`] of the matching buffer type.
    pub fn name(self) -> &'static str {
        match self {
            InputType::Bf16 => "bf16",
            InputType::F16 => "f16",
        }
    }
}

impl OutputType {
    /// The [`Element::NAME`] of the matching buffer type.
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
    /// A forced path-2 tile; `None` lets [`choose_plain_wg_tile`] pick where path 2 applies.
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
    /// result is the same) forced on or off; `None`: on by [`choose_swap_ab`] (M <= 64,
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

    /// With the path-2 tile forced to `t` ([`Gemm::new`] refuses it where path 2 cannot run).
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

    /// The layout/epilogue/output bits of [`GemmParams::flags`] (the `*_VEC` bits depend on
    /// the buffers and are added by [`GemmParams::dense`]).
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

/// [`GemmParams`] as a kernel argument (passed by value, 72 bytes).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct GemmParamsArg(pub GemmParams);

// SAFETY: GemmParams is #[repr(C)] plain old data (Pod); every GeMM entry point takes it by value
// with the same layout (shared/src/gemm.rs asserts size and offsets).
unsafe impl DeviceRepr for GemmParamsArg {}

/// A validated GeMM on one device: the problem, its tile configuration and its kernel.
#[derive(Debug)]
pub struct Gemm {
    cfg: GemmConfig,
    tile: TileConfig,
    function: CudaFunction,
    ordinal: usize,
    path2: Option<Sm90Gemm>,
    skinny: Option<SkinnyGemm>,
}

impl Gemm {
    /// Validates `cfg` for `cx`'s device, picks the tile (unless forced) and allows the kernel
    /// its dynamic shared memory.
    ///
    /// Path 2 (sm_90a: TMA + wgmma) is set up when no path-1 tile is forced, path 2 is allowed
    /// and the device runs it, or when a path-2 tile is forced (an error where it cannot run);
    /// launches whose operands TMA cannot load fall back to path 1. Unforced, path 2's tile is
    /// the 128 x 16 one for small batches on the devices measured for it
    /// ([`gemm_sm90::choose_tile16`]: in the skinny kernels' place), else the 64 x 96 one
    /// ([`gemm_sm90::choose_tile96`]), else the swapped 128 x 64 one for up to 64 rows, else
    /// the modelled tile; the skinny kernels are set up where they are the default and the
    /// 128 x 16 tile did not take their place.
    pub fn new(cx: &Context, cfg: GemmConfig) -> Result<Self> {
        let tile = cfg.resolve_tile(cx.info().sm_count);
        cfg.validate(tile)?;
        let name = tile.kernel_name(cfg.input);
        cx.set_max_dynamic_smem(name, tile.shape().smem_bytes())?;
        // Unforced: the library's rule; a forced tile runs unswapped, but for the 128 x 16 tile,
        // which exists for swapped products only.
        let swap = cfg.swap_ab.unwrap_or(match cfg.wg_tile {
            None => choose_swap_ab(cfg.m, cfg.n),
            Some(t) => t == WgTile::T128x16,
        });
        let path2 = match (cfg.tile, cfg.wg_tile) {
            (Some(_), Some(_)) => {
                return Err(Error::InvalidArgument(
                    "GeMM config forces both a path-1 tile and a path-2 tile; force one".into(),
                ))
            }
            (None, Some(t)) if swap => Some(Sm90Gemm::new_swapped(cx, &cfg, t)?),
            (None, Some(t)) => {
                gemm_sm90::check_unswapped_tile(t, cfg.m)?;
                Some(Sm90Gemm::new(cx, &cfg, t)?)
            }
            (None, None) if cfg.allow_path2 && gemm_sm90::device_supports(cx) => {
                if let Some(tile16) = gemm_sm90::choose_tile16(&cfg, cx.info()) {
                    Some(Sm90Gemm::new_swapped(cx, &tile16, WgTile::T128x16)?)
                } else if let Some(tile96) = gemm_sm90::choose_tile96(&cfg, cx.info().sm_count) {
                    Some(Sm90Gemm::new(cx, &tile96, WgTile::T64x96)?)
                } else if swap {
                    Some(Sm90Gemm::new_swapped(cx, &cfg, WgTile::T128x64)?)
                } else {
                    let t = choose_plain_wg_tile(cfg.m, cfg.n, cfg.k, cx.info().sm_count);
                    Some(Sm90Gemm::new(cx, &cfg, t)?)
                }
            }
            _ => None,
        };
        if cfg.swap_ab == Some(true) && path2.is_none() {
            return Err(Error::InvalidArgument(
                "GeMM swap-AB (C^T = B^T A^T) runs on path 2 only; this problem runs on path 1 \
                 (a path-1 tile forced, path 2 disallowed, or a device without sm_90a)"
                    .into(),
            ));
        }
        // The skinny kernels where they are the default, but for the devices whose small
        // batches run the 128 x 16 tile in their place (`gemm_sm90::choose_tile16`).
        let tile16 = path2.as_ref().is_some_and(|k| k.tile() == WgTile::T128x16);
        let skinny = match cfg.skinny {
            Some(true) => Some(SkinnyGemm::new(cx, &cfg)?),
            Some(false) => None,
            None if gemm_skinny::is_default_for(&cfg) && !tile16 => Some(SkinnyGemm::new(cx, &cfg)?),
            None => None,
        };
        Ok(Self {
            cfg,
            tile,
            function: cx.function(name)?,
            ordinal: cx.info().ordinal,
            path2,
            skinny,
        })
    }

    /// The skinny kernel, when this GeMM uses it for untraced launches whose operands fit.
    pub fn skinny(&self) -> Option<&SkinnyGemm> {
        self.skinny.as_ref()
    }

    /// Whether a launch with `p` runs the skinny kernel: set up, untraced, operands aligned.
    pub fn uses_skinny(&self, p: &GemmParams) -> bool {
        self.skinny.is_some() && p.trace == 0 && gemm_skinny::operands_fit(p)
    }

    /// The path-2 kernel, when this GeMM uses path 2 for operands TMA can load.
    pub fn path2(&self) -> Option<&Sm90Gemm> {
        self.path2.as_ref()
    }

    /// Which kernel a launch with `p` runs: path 2's when set up and the operands fit TMA.
    pub fn uses_path2(&self, p: &GemmParams) -> bool {
        self.path2.is_some() && gemm_sm90::operands_fit(p)
    }

    /// The problem.
    pub fn config(&self) -> &GemmConfig {
        &self.cfg
    }

    /// The path-1 tile configuration (used for every launch when path 2 is not set up).
    pub fn tile(&self) -> TileConfig {
        self.tile
    }

    /// The path-1 entry point.
    pub fn kernel_name(&self) -> &'static str {
        self.tile.kernel_name(self.cfg.input)
    }

    /// The entry point an untraced launch with aligned operands runs (the skinny kernel's, else
    /// path 2's when set up).
    pub fn preferred_kernel_name(&self) -> &'static str {
        if let Some(s) = &self.skinny {
            return s.kernel_name();
        }
        self.path2
            .as_ref()
            .map_or_else(|| self.kernel_name(), Sm90Gemm::kernel_name)
    }

    /// The entry point a launch with `p` runs ([`Gemm::uses_skinny`], [`Gemm::uses_path2`]).
    pub fn kernel_name_for(&self, p: &GemmParams) -> &'static str {
        if let Some(s) = self.skinny.as_ref().filter(|_| self.uses_skinny(p)) {
            return s.kernel_name();
        }
        match self.path2.as_ref().filter(|_| self.uses_path2(p)) {
            Some(k) => k.kernel_name(),
            None => self.kernel_name(),
        }
    }

    /// The output-tile grid of the kernel a launch with `p` runs: path 2's tiles when
    /// [`Gemm::uses_path2`] (split-K units are not tiles: one event per output tile; a swapped
    /// launch's are the tiles of `C^T`, [`Sm90Gemm::swapped`]), else path 1's. A traced launch writes the event of tile `(tm, tn)` at index
    /// [`Grid::linear`] = `tm * tiles_n + tn`.
    pub fn trace_grid(&self, p: &GemmParams) -> Grid {
        let (m, n) = (self.cfg.m as u32, self.cfg.n as u32);
        match self.path2.as_ref().filter(|_| self.uses_path2(p)) {
            Some(k) => {
                let (m, n) = if k.swapped() { (n, m) } else { (m, n) };
                let (tm, tn) = k.tile().shape().tiles(m, n);
                Grid::new(tm, tn, 1)
            }
            None => self.tile.shape().grid(m, n),
        }
    }

    /// Output tiles of the kernel a launch with `p` runs: the [`TraceEvent`]s a traced
    /// launch writes (its buffer holds at least this many, [`crate::stream::trace_buffer`]).
    pub fn trace_tiles(&self, p: &GemmParams) -> usize {
        self.trace_grid(p).count() as usize
    }

    /// The events of a [`Gemm::launch_traced`] with `p` (after the launch completed): one per
    /// tile of [`Gemm::trace_grid`], relabelled as stage `stage`, each checked written by the
    /// kernel ([`plain_trace_events`]). Downloads `trace` (synchronizes its stream).
    pub fn trace_events(&self, p: &GemmParams, trace: &DeviceBuffer<u8>, stage: u32) -> Result<Vec<TraceEvent>> {
        let events = crate::stream::download_trace(trace)?;
        plain_trace_events(events, self.trace_tiles(p), stage, self.kernel_name_for(p))
    }

    /// Grid, block and dynamic shared memory of a path-1 launch.
    pub fn launch_config(&self) -> LaunchConfig {
        let s = self.tile.shape();
        let g = s.grid(self.cfg.m as u32, self.cfg.n as u32);
        LaunchConfig {
            grid_dim: (g.x, g.y, 1),
            block_dim: (s.threads(), 1, 1),
            shared_mem_bytes: s.smem_bytes(),
        }
    }

    /// The kernel parameter for buffers at these device addresses (`bias` 0 when unused).
    pub fn params(&self, a: u64, b: u64, c: u64, bias: u64) -> GemmParams {
        let c_ = &self.cfg;
        GemmParams::dense(a, b, c, bias, c_.m as u32, c_.n as u32, c_.k as u32, c_.flags())
    }

    /// Checks the buffers of a launch against the problem ([`validate_buffers`]) and returns
    /// the kernel parameter.
    pub fn check<I: Element, O: Element>(
        &self,
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &DeviceBuffer<O>,
        bias: Option<&DeviceBuffer<f32>>,
    ) -> Result<GemmParams> {
        let bias_addr = validate_buffers(&self.cfg, self.ordinal, a, b, c, bias)?;
        Ok(self.params(a.addr(), b.addr(), c.addr(), bias_addr))
    }

    /// Checks the buffers ([`Gemm::check`]) and launches `C = epilogue(A B)` on `stream`.
    /// Asynchronous: synchronize the stream (or download C) to see the result.
    pub fn launch<I: Element, O: Element>(
        &self,
        stream: &Stream,
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &mut DeviceBuffer<O>,
        bias: Option<&DeviceBuffer<f32>>,
    ) -> Result<()> {
        self.launch_with_trace(stream, a, b, c, bias, None)
    }

    /// As [`Gemm::launch`], with the kernel writing one [`TraceEvent`] per output tile into
    /// `trace` (`stage` 0, index `tm * tiles_n + tn`; path 1: `t_dispatch = t_ready = t_start`
    /// when the block took the tile; path 2: `t_ready` when the block took the tile, `t_start`
    /// when its first stage landed, `t_dispatch = t_ready` but at block entry for a block's first
    /// tile (so `t_ready - t_dispatch` is the block's setup); `t_end` after its stores). `trace` must hold
    /// [`Gemm::trace_tiles`] events (allocate it with [`crate::stream::trace_buffer`]) on this
    /// GeMM's device; it is checked, with the other buffers, before anything is launched.
    /// Read the events back with [`Gemm::trace_events`].
    pub fn launch_traced<I: Element, O: Element>(
        &self,
        stream: &Stream,
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &mut DeviceBuffer<O>,
        bias: Option<&DeviceBuffer<f32>>,
        trace: &mut DeviceBuffer<u8>,
    ) -> Result<()> {
        self.launch_with_trace(stream, a, b, c, bias, Some(trace))
    }

    /// [`Gemm::launch`] (`trace` `None`) or [`Gemm::launch_traced`] (`Some`).
    pub fn launch_with_trace<I: Element, O: Element>(
        &self,
        stream: &Stream,
        a: &DeviceBuffer<I>,
        b: &DeviceBuffer<I>,
        c: &mut DeviceBuffer<O>,
        bias: Option<&DeviceBuffer<f32>>,
        trace: Option<&mut DeviceBuffer<u8>>,
    ) -> Result<()> {
        let mut p = self.check(a, b, c, bias)?;
        if let Some(t) = trace {
            let tiles = self.trace_tiles(&p);
            check_trace_buffer(
                tiles,
                t.len(),
                t.device(),
                t.addr(),
                self.ordinal,
                self.kernel_name_for(&p),
            )?;
            p.trace = t.addr();
        }
        // SAFETY: `check` verified types, lengths, devices and alignment of every buffer the
        // parameters point to, and `check_trace_buffer` the trace buffer against the tiles of
        // the kernel that runs; the borrows keep them alive until this call returns, and the
        // caller synchronizes before dropping them (as for every launch in cusync).
        unsafe { self.launch_params(stream, &p) }
    }

    /// Launches with a caller-built parameter (e.g. sub-buffers, other leading dimensions).
    /// Checks the stream's device and the shape fields against the problem.
    ///
    /// # Safety
    /// `p`'s addresses and leading dimensions must describe live device memory of the right
    /// types and sizes for this problem until the launch completes; `p.trace`, when not 0,
    /// one [`TraceEvent`] per tile of [`Gemm::trace_grid`] (8-byte aligned).
    pub unsafe fn launch_params(&self, stream: &Stream, p: &GemmParams) -> Result<()> {
        let c = &self.cfg;
        if stream.raw().context().ordinal() != self.ordinal {
            return Err(Error::InvalidArgument(format!(
                "GeMM stream is on device {}, but the GeMM was set up on device {}",
                stream.raw().context().ordinal(),
                self.ordinal
            )));
        }
        if (p.m as usize, p.n as usize, p.k as usize) != (c.m, c.n, c.k) {
            return Err(Error::InvalidArgument(format!(
                "GeMM parameters are for M={}, N={}, K={}, but the GeMM was set up for M={}, N={}, K={}",
                p.m, p.n, p.k, c.m, c.n, c.k
            )));
        }
        if p.c_trans() {
            return Err(Error::InvalidArgument(
                "GeMM parameters set C_TRANS, which only a swapped path-2 launch sets internally; \
                 store C row-major (GemmConfig::swap_ab runs the transposed product)"
                    .into(),
            ));
        }
        if let Some(s) = self.skinny.as_ref().filter(|_| self.uses_skinny(p)) {
            // SAFETY: forwarded contract; `uses_skinny` checked the operands' alignment.
            return unsafe { s.launch(stream, p) };
        }
        if let Some(k) = self.path2.as_ref().filter(|_| gemm_sm90::operands_fit(p)) {
            // SAFETY: forwarded contract; `operands_fit` holds.
            return unsafe { k.launch(stream, p) };
        }
        let arg = GemmParamsArg(*p);
        let mut b = stream.raw().launch_builder(&self.function);
        b.arg(&arg);
        // SAFETY: the entry point takes exactly one GemmParams by value; the launch config
        // matches the tile the kernel was compiled for; the caller vouches for the memory.
        unsafe { b.launch(self.launch_config()) }
            .map(|_| ())
            .map_err(Error::driver("launching a GeMM"))
    }
}

/// Checks a launch's buffers against `cfg` on device `ordinal`: element types (A and B of
/// the input type, C of the output type), lengths (at least the dense storage of each
/// operand), devices, element alignment, and a bias exactly when the epilogue reads one.
/// Returns the bias address (0 without one).
pub fn validate_buffers<I: Element, O: Element>(
    cfg: &GemmConfig,
    ordinal: usize,
    a: &DeviceBuffer<I>,
    b: &DeviceBuffer<I>,
    c: &DeviceBuffer<O>,
    bias: Option<&DeviceBuffer<f32>>,
) -> Result<u64> {
    if I::NAME != cfg.input.name() {
        return Err(Error::InvalidArgument(format!(
            "GeMM dtype mismatch: configured for {} inputs, but A and B are {} buffers",
            cfg.input.name(),
            I::NAME
        )));
    }
    if O::NAME != cfg.output.name() {
        return Err(Error::InvalidArgument(format!(
            "GeMM dtype mismatch: configured for {} output, but C is a {} buffer",
            cfg.output.name(),
            O::NAME
        )));
    }
    let (a_shape, b_shape) = storage_shapes(cfg);
    check_buffer(
        "A",
        a_shape,
        a.len(),
        cfg.a_len(),
        a.device(),
        a.addr(),
        I::NAME,
        ordinal,
    )?;
    check_buffer(
        "B",
        b_shape,
        b.len(),
        cfg.b_len(),
        b.device(),
        b.addr(),
        I::NAME,
        ordinal,
    )?;
    let c_shape = format!("[M, N] = [{}, {}]", cfg.m, cfg.n);
    check_buffer(
        "C",
        c_shape,
        c.len(),
        cfg.c_len(),
        c.device(),
        c.addr(),
        O::NAME,
        ordinal,
    )?;
    match (cfg.epilogue.has_bias(), bias) {
        (true, Some(v)) => {
            let shape = format!("[N] = [{}]", cfg.n);
            check_buffer("bias", shape, v.len(), cfg.n, v.device(), v.addr(), "f32", ordinal)?;
            Ok(v.addr())
        }
        (true, None) => Err(Error::InvalidArgument(format!(
            "GeMM epilogue {:?} reads a bias vector of N = {} f32, but none was given",
            cfg.epilogue, cfg.n
        ))),
        (false, Some(_)) => Err(Error::InvalidArgument(format!(
            "a bias vector was given, but the GeMM epilogue {:?} does not read one (use Bias or BiasGelu)",
            cfg.epilogue
        ))),
        (false, None) => Ok(0),
    }
}

fn storage_shapes(c: &GemmConfig) -> (String, String) {
    let a = match c.a_layout {
        Layout::RowMajor => format!("[M, K] = [{}, {}]", c.m, c.k),
        Layout::Transposed => format!("[K, M] = [{}, {}] (transposed)", c.k, c.m),
    };
    let b = match c.b_layout {
        Layout::RowMajor => format!("[K, N] = [{}, {}]", c.k, c.n),
        Layout::Transposed => format!("[N, K] = [{}, {}] (transposed)", c.n, c.k),
    };
    (a, b)
}

#[allow(clippy::too_many_arguments)]
fn check_buffer(
    what: &str,
    shape: String,
    len: usize,
    need: usize,
    device: usize,
    addr: u64,
    elem: &str,
    ordinal: usize,
) -> Result<()> {
    if len < need {
        return Err(Error::InvalidArgument(format!(
            "GeMM {what} buffer too small: {what} {shape} needs {need} {elem} elements, the buffer holds {len}"
        )));
    }
    if device != ordinal {
        return Err(Error::InvalidArgument(format!(
            "GeMM {what} buffer is on device {device}, but the GeMM runs on device {ordinal}"
        )));
    }
    let size = if elem == "f32" { 4 } else { 2 };
    if !addr.is_multiple_of(size) {
        return Err(Error::InvalidArgument(format!(
            "GeMM {what} buffer address {addr:#x} is not aligned to its {elem} element size ({size} bytes)"
        )));
    }
    Ok(())
}

/// Checks the trace buffer of a traced launch of `kernel` running `tiles` output tiles on
/// device `ordinal`: `len` bytes, at least one [`TraceEvent`] per tile, on that device,
/// aligned for the events' 8-byte fields.
fn check_trace_buffer(tiles: usize, len: usize, device: usize, addr: u64, ordinal: usize, kernel: &str) -> Result<()> {
    let event = std::mem::size_of::<TraceEvent>();
    let need = tiles * event;
    if len < need {
        return Err(Error::InvalidArgument(format!(
            "GeMM trace buffer too small: `{kernel}` runs {tiles} output tiles, one {event}-byte TraceEvent each \
             = {need} bytes, but the buffer holds {len} (allocate it with cusync::stream::trace_buffer(cx, \
             gemm.trace_tiles(&p)))"
        )));
    }
    if device != ordinal {
        return Err(Error::InvalidArgument(format!(
            "GeMM trace buffer is on device {device}, but the GeMM runs on device {ordinal}"
        )));
    }
    if !addr.is_multiple_of(8) {
        return Err(Error::InvalidArgument(format!(
            "GeMM trace buffer address {addr:#x} is not aligned to 8 bytes (TraceEvent's u64 times)"
        )));
    }
    Ok(())
}

/// The events of a traced plain launch of `kernel` over `tiles` output tiles (the buffer's
/// first `tiles` events; see [`Gemm::launch_traced`]), relabelled as stage `stage`. Event `i`
/// must be tile `i`'s as the kernel writes it (`tile == i`, stage 0, a timestamp), so a tile
/// the kernel did not trace (a zeroed or poisoned slot) is an error that says how many are
/// missing, never a stray event.
pub fn plain_trace_events(
    mut events: Vec<TraceEvent>,
    tiles: usize,
    stage: u32,
    kernel: &str,
) -> Result<Vec<TraceEvent>> {
    if events.len() < tiles {
        return Err(Error::InvalidArgument(format!(
            "GeMM trace of `{kernel}`: {} events read back for {tiles} tiles",
            events.len()
        )));
    }
    events.truncate(tiles);
    let written = |i: usize, e: &TraceEvent| e.tile as usize == i && e.stage == 0 && e.t_dispatch != 0;
    let missing = events.iter().enumerate().filter(|(i, e)| !written(*i, e)).count();
    if let Some((i, e)) = events.iter().enumerate().find(|(i, e)| !written(*i, e)) {
        return Err(Error::Verification(format!(
            "GeMM trace of `{kernel}`: {missing} of {tiles} tiles have no event (first: slot {i} holds \
             stage {} tile {} t_dispatch {}); does this kernel write traces?",
            e.stage, e.tile, e.t_dispatch
        )));
    }
    for e in &mut events {
        e.stage = stage;
    }
    Ok(events)
}

/// The problem's operands on the host in f64, in their storage layouts (what the device reads).
fn row_major_a(cfg: &GemmConfig, a: &[f64]) -> Vec<f64> {
    match cfg.a_layout {
        Layout::RowMajor => a[..cfg.a_len()].to_vec(),
        Layout::Transposed => transpose(a, cfg.k, cfg.m),
    }
}

/// B as `[N, K]` (each column of B contiguous).
fn column_major_b(cfg: &GemmConfig, b: &[f64]) -> Vec<f64> {
    match cfg.b_layout {
        Layout::RowMajor => transpose(b, cfg.k, cfg.n),
        Layout::Transposed => b[..cfg.b_len()].to_vec(),
    }
}

/// `rows x cols` row-major -> `cols x rows` row-major.
fn transpose(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = x[r * cols + c];
        }
    }
    t
}

/// GeLU, tanh approximation, in f64 (what the device's epilogue approximates in f32):
/// `0.5 x (1 + tanh(u))`, `u = sqrt(2/pi) (x + 0.044715 x^3)`, evaluated as the identical
/// `x / (1 + exp(-2u))`, which keeps its relative accuracy for very negative `x` (where
/// `1 + tanh(u)` cancels catastrophically).
pub fn gelu_tanh(x: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    x / (1.0 + (-2.0 * u).exp())
}

/// f64 reference of `C = epilogue(A B)` at the given `(row, col)` points of C, in order.
/// `a` and `b` are the operands' values in their storage layouts (as the device reads them,
/// e.g. bf16 converted exactly to f64); `bias` has `n` entries when the epilogue reads it.
/// Spreads the points over the host's cores.
pub fn reference_gemm_at(
    cfg: &GemmConfig,
    a: &[f64],
    b: &[f64],
    bias: Option<&[f64]>,
    points: &[(usize, usize)],
) -> Vec<f64> {
    assert!(
        a.len() >= cfg.a_len() && b.len() >= cfg.b_len(),
        "operands smaller than the problem"
    );
    assert!(
        !cfg.epilogue.has_bias() || bias.is_some_and(|v| v.len() >= cfg.n),
        "bias missing"
    );
    let ar = row_major_a(cfg, a);
    let bc = column_major_b(cfg, b);
    let k = cfg.k;
    let eval = |&(r, c): &(usize, usize)| -> f64 {
        let x = &ar[r * k..(r + 1) * k];
        let y = &bc[c * k..(c + 1) * k];
        let mut acc = x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>();
        if cfg.epilogue.has_bias() {
            acc += bias.map_or(0.0, |v| v[c]);
        }
        if cfg.epilogue.has_gelu() {
            acc = gelu_tanh(acc);
        }
        acc
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64);
    let chunk = points.len().div_ceil(threads).max(1024);
    let mut out = vec![0.0; points.len()];
    std::thread::scope(|s| {
        for (o, p) in out.chunks_mut(chunk).zip(points.chunks(chunk)) {
            s.spawn(move || {
                for (dst, pt) in o.iter_mut().zip(p) {
                    *dst = eval(pt);
                }
            });
        }
    });
    out
}

/// f64 reference of the whole of C (`m x n`, row-major); see [`reference_gemm_at`].
pub fn reference_gemm(cfg: &GemmConfig, a: &[f64], b: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
    let points: Vec<(usize, usize)> = (0..cfg.m).flat_map(|r| (0..cfg.n).map(move |c| (r, c))).collect();
    reference_gemm_at(cfg, a, b, bias, &points)
}

/// Options of [`time_gemm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimingOptions {
    /// Untimed launches first.
    pub warmup: usize,
    /// Timed launches (the median is reported).
    pub iters: usize,
    /// Rotate through copies of A, B and C whose total is about twice the L2 size when one
    /// set fits in L2, so the timed launches do not read operands left in L2 by the last one.
    pub rotate: bool,
}

impl Default for TimingOptions {
    fn default() -> Self {
        Self {
            warmup: 10,
            iters: 50,
            rotate: true,
        }
    }
}

/// How many operand sets [`time_gemm`] rotates through for `bytes` per set and an L2 of `l2`.
pub fn rotation_copies(bytes: usize, l2: usize, rotate: bool) -> usize {
    if !rotate || bytes == 0 || bytes > l2 {
        1
    } else {
        (2 * l2).div_ceil(bytes).clamp(1, 32)
    }
}

/// Device addresses of one operand set of a timing run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperandAddrs {
    /// A (input type, dense storage).
    pub a: u64,
    /// B (input type, dense storage).
    pub b: u64,
    /// C (output type).
    pub c: u64,
    /// Bias (`n` f32), 0 unless the epilogue reads it.
    pub bias: u64,
}

/// Per-launch device times (ms, sorted ascending) of `cfg` with this library's kernel and
/// random inputs: see [`time_launches`].
pub fn time_gemm_samples(cx: &Context, cfg: &GemmConfig, opts: TimingOptions) -> Result<Vec<f32>> {
    let gemm = Gemm::new(cx, *cfg)?;
    let stream = cx.new_stream()?;
    time_launches(cx, cfg, opts, &stream, |s, o| {
        let p = gemm.params(o.a, o.b, o.c, o.bias);
        // SAFETY: `time_launches` allocated the operands for exactly this problem and keeps
        // them alive until the stream is synchronized.
        unsafe { gemm.launch_params(s, &p) }
    })
}

/// The median of [`time_gemm_samples`], in milliseconds.
pub fn time_gemm(cx: &Context, cfg: &GemmConfig, opts: TimingOptions) -> Result<f64> {
    let s = time_gemm_samples(cx, cfg, opts)?;
    Ok(median(&s))
}

/// Times any implementation of `cfg`: allocates random operand sets (A, B uniform in
/// [-1, 1) of the input type, C of the output type, a bias when the epilogue reads one),
/// as many as [`rotation_copies`] asks, then `launch`es `warmup` times untimed and `iters`
/// times each between two CUDA events on `stream`, rotating sets. Returns the per-launch
/// times in ms, sorted ascending.
pub fn time_launches(
    cx: &Context,
    cfg: &GemmConfig,
    opts: TimingOptions,
    stream: &Stream,
    launch: impl FnMut(&Stream, &OperandAddrs) -> Result<()>,
) -> Result<Vec<f32>> {
    match cfg.input {
        InputType::Bf16 => time_typed::<half::bf16>(cx, cfg, opts, stream, launch),
        InputType::F16 => time_typed::<half::f16>(cx, cfg, opts, stream, launch),
    }
}

/// Median of samples (0 when empty); the statistics live in [`crate::microbench::Stats`].
pub fn median(samples: &[f32]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut v: Vec<f64> = samples.iter().map(|&x| x as f64).collect();
    crate::microbench::Stats::of(&mut v).median
}

/// A host element type for random operands.
pub trait RandomInput: Element {
    /// The value nearest `x`.
    fn from_f32(x: f32) -> Self;
}

impl RandomInput for half::bf16 {
    fn from_f32(x: f32) -> Self {
        half::bf16::from_f32(x)
    }
}

impl RandomInput for half::f16 {
    fn from_f32(x: f32) -> Self {
        half::f16::from_f32(x)
    }
}

fn time_typed<I: RandomInput>(
    cx: &Context,
    cfg: &GemmConfig,
    opts: TimingOptions,
    stream: &Stream,
    mut launch: impl FnMut(&Stream, &OperandAddrs) -> Result<()>,
) -> Result<Vec<f32>> {
    let tile = cfg.resolve_tile(cx.info().sm_count);
    cfg.validate(tile)?;
    let c_bytes = cfg.output.bytes() * cfg.c_len();
    let set_bytes = 2 * (cfg.a_len() + cfg.b_len()) + c_bytes;
    let copies = rotation_copies(set_bytes, cx.info().l2_bytes as usize, opts.rotate);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6e6d_6d00 ^ (cfg.m * 31 + cfg.n * 17 + cfg.k) as u64);
    let mut random = |n: usize| -> Vec<I> { (0..n).map(|_| I::from_f32(rng.random_range(-1.0f32..1.0))).collect() };
    let bias = if cfg.epilogue.has_bias() {
        let v: Vec<f32> = (0..cfg.n).map(|i| (i % 7) as f32 * 0.125 - 0.375).collect();
        Some(cx.upload(&v)?)
    } else {
        None
    };
    let bias_addr = bias.as_ref().map_or(0, |v| v.addr());
    let mut sets = Vec::with_capacity(copies);
    for _ in 0..copies {
        let a = cx.upload(&random(cfg.a_len()))?;
        let b = cx.upload(&random(cfg.b_len()))?;
        // C as raw bytes: only the kernel cares about its type.
        let c = cx.alloc_zeros::<u8>(c_bytes)?;
        sets.push((a, b, c));
    }
    let addrs: Vec<OperandAddrs> = sets
        .iter()
        .map(|(a, b, c)| OperandAddrs {
            a: a.addr(),
            b: b.addr(),
            c: c.addr(),
            bias: bias_addr,
        })
        .collect();
    let run = |launch: &mut dyn FnMut(&Stream, &OperandAddrs) -> Result<()>| -> Result<Vec<f32>> {
        for i in 0..opts.warmup {
            launch(stream, &addrs[i % copies])?;
        }
        let mut events = Vec::with_capacity(opts.iters);
        for i in 0..opts.iters {
            let (start, end) = (cx.new_event()?, cx.new_event()?);
            stream.record(&start)?;
            launch(stream, &addrs[(opts.warmup + i) % copies])?;
            stream.record(&end)?;
            events.push((start, end));
        }
        stream.synchronize()?;
        events.iter().map(|(s, e)| s.elapsed_ms(e)).collect()
    };
    let result = run(&mut launch);
    // Whatever happened, nothing may still read the operands when they are freed.
    let synced = stream.synchronize();
    let mut samples = result?;
    synced?;
    samples.sort_by(f32::total_cmp);
    drop(sets);
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn buffer_checks_name_the_problem() {
        let e = check_buffer("A", "[M, K] = [4, 8]".into(), 31, 32, 0, 0x1000, "bf16", 0).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("A buffer too small") && msg.contains("needs 32 bf16") && msg.contains("holds 31"),
            "{msg}"
        );
        let msg = check_buffer("B", "[K, N]".into(), 64, 32, 1, 0x1000, "bf16", 0)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("B buffer is on device 1") && msg.contains("device 0"),
            "{msg}"
        );
        let msg = check_buffer("C", "[M, N]".into(), 64, 32, 0, 0x1002, "f32", 0)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("not aligned") && msg.contains("4 bytes"), "{msg}");
        assert!(check_buffer("C", "[M, N]".into(), 32, 32, 0, 0x1000, "f32", 0).is_ok());
    }

    #[test]
    fn trace_buffer_checks_name_the_problem() {
        let k = "gemm_bf16_128x128";
        let msg = check_trace_buffer(10, 479, 0, 0x1000, 0, k).unwrap_err().to_string();
        assert!(
            msg.contains("trace buffer too small")
                && msg.contains("10 output tiles")
                && msg.contains("480 bytes")
                && msg.contains("holds 479")
                && msg.contains(k),
            "{msg}"
        );
        let msg = check_trace_buffer(10, 480, 1, 0x1000, 0, k).unwrap_err().to_string();
        assert!(msg.contains("on device 1") && msg.contains("device 0"), "{msg}");
        let msg = check_trace_buffer(10, 480, 0, 0x1004, 0, k).unwrap_err().to_string();
        assert!(msg.contains("0x1004") && msg.contains("8 bytes"), "{msg}");
        assert!(check_trace_buffer(10, 480, 0, 0x1000, 0, k).is_ok());
        assert!(check_trace_buffer(10, 4800, 0, 0x1000, 0, k).is_ok());
    }

    #[test]
    fn plain_trace_events_are_checked_and_relabelled() {
        let event = |tile: u32| TraceEvent {
            tile,
            sm: 3,
            cta: tile,
            t_dispatch: 100 + u64::from(tile),
            t_ready: 100 + u64::from(tile),
            t_start: 100 + u64::from(tile),
            t_end: 200 + u64::from(tile),
            ..TraceEvent::default()
        };
        let poison: TraceEvent = bytemuck::cast([0xFFu8; 48]);
        let mut all: Vec<TraceEvent> = (0..4).map(event).collect();
        all.push(poison); // past the tiles: ignored
        let got = plain_trace_events(all.clone(), 4, 1, "k").unwrap();
        assert_eq!(got.len(), 4);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, e)| e.stage == 1 && e.tile as usize == i));
        assert_eq!(got[2].t_end, 202);
        // A poisoned slot, a zeroed one (tile 0 included), a misplaced one.
        let mut holes = all.clone();
        holes[1] = poison;
        holes[3] = TraceEvent::default();
        let msg = plain_trace_events(holes, 4, 0, "k").unwrap_err().to_string();
        assert!(
            msg.contains("2 of 4 tiles have no event") && msg.contains("slot 1"),
            "{msg}"
        );
        let mut zero = all.clone();
        zero[0] = TraceEvent::default();
        let msg = plain_trace_events(zero, 4, 0, "k").unwrap_err().to_string();
        assert!(msg.contains("1 of 4") && msg.contains("slot 0"), "{msg}");
        let mut swapped = all.clone();
        swapped.swap(0, 2);
        assert!(plain_trace_events(swapped, 4, 0, "k").is_err());
        let msg = plain_trace_events(all, 6, 0, "k").unwrap_err().to_string();
        assert!(msg.contains("5 events read back for 6 tiles"), "{msg}");
    }

    #[test]
    fn reference_matches_a_hand_computed_product_in_every_layout() {
        // A = [[1, 2, 3], [4, 5, 6]] (2x3), B = [[1, 0], [0, 1], [1, 1]] (3x2): AB = [[4, 5], [10, 11]].
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let at = transpose(&a, 2, 3);
        let bt = transpose(&b, 3, 2);
        let want = [4.0, 5.0, 10.0, 11.0];
        for (al, bl) in [
            (Layout::RowMajor, Layout::RowMajor),
            (Layout::Transposed, Layout::RowMajor),
            (Layout::RowMajor, Layout::Transposed),
            (Layout::Transposed, Layout::Transposed),
        ] {
            let cfg = GemmConfig::new(2, 2, 3).layouts(al, bl);
            let aa = if al == Layout::RowMajor { &a[..] } else { &at[..] };
            let bb = if bl == Layout::RowMajor { &b[..] } else { &bt[..] };
            assert_eq!(reference_gemm(&cfg, aa, bb, None), want, "{al:?} {bl:?}");
        }
        let cfg = GemmConfig::new(2, 2, 3).epilogue(Epilogue::BiasGelu);
        let bias = [1.0, -20.0];
        let got = reference_gemm_at(&cfg, &a, &b, Some(&bias), &[(0, 0), (1, 1)]);
        assert!((got[0] - gelu_tanh(5.0)).abs() < 1e-12 && (got[0] - 5.0).abs() < 1e-5);
        assert!((got[1] - gelu_tanh(-9.0)).abs() < 1e-12 && got[1].abs() < 1e-10);
    }

    #[test]
    fn gelu_tanh_matches_known_values() {
        assert_eq!(gelu_tanh(0.0), 0.0);
        assert!((gelu_tanh(1.0) - 0.841_191_990_608_276_8).abs() < 1e-12);
        assert!((gelu_tanh(-1.0) + 0.158_808_009_391_723_2).abs() < 1e-12);
        // Far in the negative tail the value is tiny but still accurate (no cancellation):
        // x * sigmoid(2u) ~ x * exp(2u) for 2u << 0.
        let x: f64 = -7.0;
        let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
        let tail = x * (2.0 * u).exp() / (1.0 + (2.0 * u).exp());
        assert!(((gelu_tanh(x) - tail) / tail).abs() < 1e-12);
    }

    #[test]
    fn rotation_fills_twice_the_l2_when_a_set_fits() {
        let l2 = 50 << 20;
        assert_eq!(rotation_copies(100 << 20, l2, true), 1);
        assert_eq!(rotation_copies(25 << 20, l2, true), 4);
        assert_eq!(rotation_copies(1 << 10, l2, true), 32);
        assert_eq!(rotation_copies(1 << 10, l2, false), 1);
        assert_eq!(median(&[1.0, 2.0, 4.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 8.0]), 3.0);
    }
}
