//! GeMM path 2 on the host: the sm_90a kernels (TMA + `wgmma`, warp-specialized, persistent;
//! device/src/kernels/gemm/sm90.rs), their tile choice, the tensor maps they load through, and
//! when they apply (an H200/H100 running the sm_90a PTX, operands TMA can address).
//!
//! [`super::gemm::Gemm`] uses path 2 whenever it applies and no path-1 tile was forced, and
//! falls back to path 1 per launch for operands TMA cannot load (bases not 16-byte aligned, or
//! leading dimensions not multiples of 8 elements).

use super::gemm::{GemmConfig, InputType};
use crate::error::{Error, Result};
use crate::kernels::PTX_ARCH;
use crate::runtime::{Context, DeviceBuffer, DeviceInfo, ErrorSlotBuffer, Stream};
use cudarc::driver::sys;
use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use cusync_shared::gemm::GemmParams;
use cusync_shared::gemm_sm90::{
    a_map_dims_rows, b_map_dims, choose_split_k, pipeline_depth_ok, ring_stages, TmaGemmParams, WgTileShape,
    WG_RASTER_GROUP, WG_THREADS, WG_TILE_128X128, WG_TILE_128X16, WG_TILE_128X192, WG_TILE_128X256, WG_TILE_128X64,
    WG_TILE_64X96,
};
use cusync_shared::stream_k::{choose_stream_k, stream_k_plan, StreamKPlan};
use std::collections::HashMap;
use std::sync::Mutex;

/// Default bound on a path-2 pipeline wait (a wait that long means a kernel bug, not load).
pub const PIPELINE_TIMEOUT_NS: u64 = 2_000_000_000;

/// Tensor maps cached per kernel before the oldest are dropped (each is 256 bytes of device
/// memory; a cache miss costs one upload and a stream synchronization).
const MAP_CACHE_LIMIT: usize = 256;

/// The path-2 block tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WgTile {
    /// 128 x 256 x 64, 4 stages: large problems.
    T128x256,
    /// 128 x 128 x 64, 6 stages: problems with too few 128 x 256 tiles to fill the SMs.
    T128x128,
    /// 128 x 192 x 64, 5 stages: widths where 192-column tiles fill whole waves and 256-column
    /// ones leave a partial one (the GPT-3 MLP at B = 256 to 1024).
    T128x192,
    /// 128 x 64 x 64, 9 stages: skinny products (M <= 64) run swapped ([`choose_swap_ab`]),
    /// the batch as the tile's 64 columns.
    T128x64,
    /// 64 x 96 x 64, 11 stages: small batches (M <= 64) unswapped, 96 weight columns a tile (the GPT-3
    /// MLP's widths give 128 tiles or 64 tiles of two K splits); the plain default from 17 rows
    /// where its units fill the SMs ([`choose_tile96`],
    /// [`cusync_shared::gemm_sm90::WG_TILE_64X96`]).
    T64x96,
    /// 128 x 16 x 64, 12 stages: products with M <= 16 run swapped, the batch as the tile's
    /// 16 columns (a deeper pipeline than the 128 x 64 tile's: forced only until measured,
    /// [`cusync_shared::gemm_sm90::WG_TILE_128X16`]).
    T128x16,
}

impl WgTile {
    /// Every path-2 tile, largest first.
    pub const ALL: [WgTile; 6] = [
        WgTile::T128x256,
        WgTile::T128x192,
        WgTile::T128x128,
        WgTile::T64x96,
        WgTile::T128x64,
        WgTile::T128x16,
    ];

    /// The tile named `name` ("128x256", ...), if any.
    pub fn from_name(name: &str) -> Option<WgTile> {
        WgTile::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The tile written `prefix` + its name (`prefix` "" or "wg", as the command line spells
    /// path-2 tiles), or an error that lists every tile so spelled.
    pub fn parse(s: &str, prefix: &str) -> Result<WgTile> {
        s.strip_prefix(prefix).and_then(WgTile::from_name).ok_or_else(|| {
            let names: Vec<String> = WgTile::ALL.iter().map(|t| format!("{prefix}{}", t.name())).collect();
            Error::InvalidArgument(format!("unknown path-2 tile `{s}`: use {}", names.join(", ")))
        })
    }

    /// The block tile as text ("128x256").
    pub fn name(self) -> &'static str {
        match self {
            WgTile::T128x256 => "128x256",
            WgTile::T128x128 => "128x128",
            WgTile::T128x192 => "128x192",
            WgTile::T128x64 => "128x64",
            WgTile::T64x96 => "64x96",
            WgTile::T128x16 => "128x16",
        }
    }

    /// The shared shape facts.
    pub fn shape(self) -> WgTileShape {
        match self {
            WgTile::T128x256 => WG_TILE_128X256,
            WgTile::T128x128 => WG_TILE_128X128,
            WgTile::T128x192 => WG_TILE_128X192,
            WgTile::T128x64 => WG_TILE_128X64,
            WgTile::T64x96 => WG_TILE_64X96,
            WgTile::T128x16 => WG_TILE_128X16,
        }
    }

    /// The entry point for inputs of type `input`.
    pub fn kernel_name(self, input: InputType) -> &'static str {
        match (input, self) {
            (InputType::Bf16, WgTile::T128x256) => "gemm_sm90_bf16_128x256",
            (InputType::F16, WgTile::T128x256) => "gemm_sm90_f16_128x256",
            (InputType::Bf16, WgTile::T128x128) => "gemm_sm90_bf16_128x128",
            (InputType::F16, WgTile::T128x128) => "gemm_sm90_f16_128x128",
            (InputType::Bf16, WgTile::T128x192) => "gemm_sm90_bf16_128x192",
            (InputType::F16, WgTile::T128x192) => "gemm_sm90_f16_128x192",
            (InputType::Bf16, WgTile::T128x64) => "gemm_sm90_bf16_128x64",
            (InputType::F16, WgTile::T128x64) => "gemm_sm90_f16_128x64",
            (InputType::Bf16, WgTile::T64x96) => "gemm_sm90_bf16_64x96",
            (InputType::F16, WgTile::T64x96) => "gemm_sm90_f16_64x96",
            (InputType::Bf16, WgTile::T128x16) => "gemm_sm90_bf16_128x16",
            (InputType::F16, WgTile::T128x16) => "gemm_sm90_f16_128x16",
        }
    }

    /// The entry point launched in clusters of two blocks that multicast B (128 x 256 only).
    pub fn cluster_kernel_name(self, input: InputType) -> Option<&'static str> {
        match (input, self) {
            (InputType::Bf16, WgTile::T128x256) => Some("gemm_sm90_bf16_128x256_c2"),
            (InputType::F16, WgTile::T128x256) => Some("gemm_sm90_f16_128x256_c2"),
            (_, WgTile::T128x128 | WgTile::T128x192 | WgTile::T128x64 | WgTile::T64x96 | WgTile::T128x16) => None,
        }
    }

    /// The stream-mode stage entry point (bf16 inputs only: the MLP's and the chains'), taking
    /// `(StageDesc, TmaGemmParams)`.
    pub fn stream_kernel_name(self, input: InputType) -> Option<&'static str> {
        match (input, self) {
            (InputType::Bf16, WgTile::T128x256) => Some("gemm_sm90_bf16_128x256_stream"),
            (InputType::Bf16, WgTile::T128x128) => Some("gemm_sm90_bf16_128x128_stream"),
            (InputType::Bf16, WgTile::T128x192) => Some("gemm_sm90_bf16_128x192_stream"),
            // The skinny tile's stage runs swapped (its tiles are C^T's: the stage's
            // transposed, `crate::mlp::MlpKernel::tile_dims`).
            (InputType::Bf16, WgTile::T128x64) => Some("gemm_sm90_bf16_128x64_stream"),
            // The small batches unswapped (M <= 64; forced only until measured).
            (InputType::Bf16, WgTile::T64x96) => Some("gemm_sm90_bf16_64x96_stream"),
            // Batches of at most 16 rows, swapped like the 128 x 64 stage (forced only:
            // `run mlp --kernel wg128x16`, until measured).
            (InputType::Bf16, WgTile::T128x16) => Some("gemm_sm90_bf16_128x16_stream"),
            (InputType::F16, _) => None,
        }
    }
}

/// The path-2 tile for an `m x n` output on `sm_count` SMs: 128 x 256 when it has at least one
/// tile per SM, else 128 x 128 (twice the tiles, so more SMs stream operands).
pub fn choose_wg_tile(m: usize, n: usize, sm_count: u32) -> WgTile {
    let tiles = m.div_ceil(128) * n.div_ceil(256);
    if tiles >= sm_count as usize {
        WgTile::T128x256
    } else {
        WgTile::T128x128
    }
}

/// The path-2 tile of an unswapped plain launch (`Gemm`; M <= 64 runs swapped by default,
/// [`choose_swap_ab`]) of an `m x n x k` product: 128 x 192 for M <= 128 (one row tile: stream-K runs there; on the GPT-3 MLP's B = 1 and 64 GeMMs the
/// 192-wide tile's stream-K is as fast as the 128-wide one's or faster, up to 1.11x at GeMM2
/// B = 64, session 6 run 1), else the tile with the least modelled time: the waves of its work
/// units (tiles times the split-K factor [`choose_split_k`] gives it) times a unit's cost, a
/// tile's cost in 128 x 128 tiles ([`plain_tile_cost`]) over the splits. Ties go to the larger
/// tile. Stream-mode stages choose with [`choose_wg_tile`] or, for the MLP's pair,
/// [`choose_pair_wg_tile`].
pub fn choose_plain_wg_tile(m: usize, n: usize, k: usize, sm_count: u32) -> WgTile {
    if m <= 128 || sm_count == 0 {
        return WgTile::T128x192;
    }
    let modelled = |t: WgTile| {
        let shape = t.shape();
        let (tm, tn) = shape.tiles(m as u32, n as u32);
        let splits = choose_split_k(tm * tn, shape.k_steps(k as u32).max(1), sm_count).max(1);
        let waves = (tm * tn * splits).div_ceil(sm_count);
        waves as u64 * plain_tile_cost(t) as u64 * 100 / splits as u64
    };
    [WgTile::T128x256, WgTile::T128x192, WgTile::T128x128]
        .into_iter()
        .min_by_key(|&t| modelled(t))
        .unwrap_or(WgTile::T128x128)
}

/// Rows up to which a plain launch runs swapped by default ([`choose_swap_ab`]).
pub const SWAP_AB_MAX_M: usize = 64;

/// Whether a plain launch of an `m x n` product runs swapped (`C^T = B^T A^T`, through
/// [`cusync_shared::gemm::GemmParams::swap_ab`], on the 128 x 64 tile): where M is at most
/// [`SWAP_AB_MAX_M`] and N at least a 128-row tile. Unswapped, such a product has one row
/// tile, of which one consumer warpgroup (M <= 64) or a few rows (M = 1) do work, and its
/// weight streams at 1.9-2.8 TB/s (session 6); swapped, both warpgroups multiply 64-row
/// slices of the weight's columns against the batch as the `wgmma`'s N, the way cuBLAS's
/// kernels for these shapes run (ncu, session 7: `nvjet_sm90_tst_96x64`, `192x8`).
///
/// From [`TILE96_MIN_M`] rows, plain launches whose units fill the SMs run unswapped on the
/// 64 x 96 tile instead ([`choose_tile96`], which [`super::gemm::Gemm::new`] asks first).
pub fn choose_swap_ab(m: usize, n: usize) -> bool {
    m <= SWAP_AB_MAX_M && n >= 128
}

/// Rows from which plain launches run on the 64 x 96 tile by default ([`choose_tile96`]);
/// below, the skinny kernels are the default ([`super::gemm_skinny::SKINNY_DEFAULT_MAX_M`]).
pub const TILE96_MIN_M: usize = 17;

/// The 64 x 96 tile's setup of a plain launch of `cfg` where it is the default: nothing picks
/// a kernel family or decomposition (the L2 promotion and pipeline depth may be forced), M from
/// [`TILE96_MIN_M`] to [`SWAP_AB_MAX_M`], and the tiles times the split-K factor
/// [`choose_split_k`] gives them fill at least three quarters of `sm_count` SMs (every SM
/// streams a share of the weight; smaller products stay on the swapped 128 x 64 tile). It
/// runs split-K, not stream-K, and its tensor maps promote 128 bytes into L2 unless a
/// promotion is forced. Measured on an H100 (docs/perf-notes.md, session 32 run 2, two
/// rounds): the GPT-3 MLP's GeMM2 at B = 64 (128 whole tiles) at 0.968 / 0.965 of cuBLAS
/// against the swapped 128 x 64 tile's 0.875 / 0.872, GeMM1 (64 tiles split in two) at
/// 0.946 / 0.943 against 0.901 / 0.899, GeMM2 at B = 32 at 0.952 / 1.028 against 0.913 /
/// 0.895. With 256-byte promotion GeMM1 ran 0.892.
pub fn choose_tile96(cfg: &GemmConfig, sm_count: u32) -> Option<GemmConfig> {
    let free = cfg.no_path2_tile_or_division_forced() && cfg.skinny != Some(true);
    if !free || !(TILE96_MIN_M..=SWAP_AB_MAX_M).contains(&cfg.m) || sm_count == 0 {
        return None;
    }
    let shape = WG_TILE_64X96;
    let (tm, tn) = shape.tiles(cfg.m as u32, cfg.n as u32);
    let tiles = tm * tn;
    let splits = choose_split_k(tiles, shape.k_steps(cfg.k as u32).max(1), sm_count).max(1);
    if 4 * tiles * splits < 3 * sm_count {
        return None;
    }
    let mut c = cfg.wg_tile(WgTile::T64x96).split_k(splits).stream_k(false);
    c.l2_promotion = Some(cfg.l2_promotion.unwrap_or(L2Promotion::B128));
    Some(c)
}

/// Whether `device`'s name holds `model` as a whole word: "H200" names "NVIDIA H200" and
/// "NVIDIA H200 NVL", not "NVIDIA GH200 480GB" (a different memory system, not measured).
pub fn device_named(device: &DeviceInfo, model: &str) -> bool {
    device.name.split_whitespace().any(|w| w == model)
}

/// Whether `device` is one of `models` ([`device_named`]): the measured-device lists
/// ([`TILE16_DEFAULT_DEVICES`], the MLP's `TILE16_STAGE_DEVICES`) are read through this.
pub fn device_listed(device: &DeviceInfo, models: &[&str]) -> bool {
    models.iter().any(|m| device_named(device, m))
}

/// The devices whose plain small-batch launches run the 128 x 16 tile ([`choose_tile16`])
/// where the skinny kernels would otherwise be the default, by a word of their name
/// ([`device_named`]): measured side by side there (docs/perf-notes.md, session 34 runs 3–4,
/// the H200: the GPT-3 MLP's GeMM2 at B = 1, 8 and 16 on whole tiles at depth 6 ran 1.022–1.038 of cuBLAS against the
/// skinny kernels' 0.887–0.900, GeMM1 split in two 0.976–0.994 against 0.912–0.924; run 5, an
/// H100 at depth 5: GeMM2 1.004–1.087 against 0.837–0.847, GeMM1 1.005–1.017 against
/// 0.895–0.905).
pub const TILE16_DEFAULT_DEVICES: &[&str] = &["H100", "H200"];

/// The most K-slices [`choose_tile16`] splits the 128 x 16 tile's products into: the measured
/// factors (2; 3 put 144 units on 132 SMs and lost, 0.70 of cuBLAS).
pub const TILE16_MAX_SPLIT_K: u32 = 2;

/// Whether `device` is one of [`TILE16_DEFAULT_DEVICES`] (by a word of its name).
pub fn tile16_default_on(device: &DeviceInfo) -> bool {
    device_listed(device, TILE16_DEFAULT_DEVICES)
}

/// `cfg` as path 2's default launch with the skinny kernels left out: `cfg` itself where the
/// 128 x 16 tile takes their place ([`choose_tile16`]; switching them off would also switch it
/// off), else `cfg` with the skinny kernels off. What `gemm-table` and the criterion GeMM group
/// time as "path 2".
pub fn path2_default_config(cfg: &GemmConfig, device: &DeviceInfo) -> GemmConfig {
    if choose_tile16(cfg, device).is_some() {
        *cfg
    } else {
        cfg.skinny(false)
    }
}

/// The 128 x 16 tile's setup of a plain launch of `cfg` on `device`, where it is the default:
/// the device is one of [`TILE16_DEFAULT_DEVICES`], the shape is the skinny kernels'
/// ([`super::gemm_skinny::choose_skinny`]: at most 16 rows), nothing picks a kernel family or
/// decomposition (the L2 promotion and pipeline depth may be forced; the skinny kernels'
/// column width may not), and the tile's units fill at least half of the SMs and at most all of
/// them: the weight's 128-row tiles (the swapped product's M is the weight's N), split in
/// two along K where that still fits ([`TILE16_MAX_SPLIT_K`]). It runs swapped, split-K or
/// whole tiles, never stream-K (stream-K over 132 ranges ran 0.83–0.90 of cuBLAS on the H200),
/// at the device's measured depth ([`default_pipeline_depth`]). Elsewhere the skinny kernels
/// stay the default: they balance any weight over every SM.
pub fn choose_tile16(cfg: &GemmConfig, device: &DeviceInfo) -> Option<GemmConfig> {
    let listed = tile16_default_on(device);
    let free = cfg.no_path2_tile_or_division_forced() && cfg.skinny.is_none() && cfg.skinny_cols.is_none();
    if !listed || !free || !super::gemm_skinny::choose_skinny(cfg) || device.sm_count == 0 {
        return None;
    }
    let shape = WgTile::T128x16.shape();
    let swapped = cfg.swapped();
    let (tm, tn) = shape.tiles(swapped.m as u32, swapped.n as u32);
    let tiles = tm * tn;
    let k_steps = shape.k_steps(cfg.k as u32).max(1);
    let splits = (1..=TILE16_MAX_SPLIT_K.min(k_steps))
        .rev()
        .find(|s| tiles * s <= device.sm_count)?;
    if 2 * tiles * splits < device.sm_count {
        return None;
    }
    Some(
        cfg.wg_tile(WgTile::T128x16)
            .swap_ab(true)
            .split_k(splits)
            .stream_k(false),
    )
}

/// Stages of the ring a weight-streaming launch uses by default on the H100 at the batches of
/// [`H100_STREAMING_BATCHES`] ([`default_pipeline_depth`]).
pub const STREAMING_PIPELINE_DEPTH: u32 = 5;

/// The batches (rows: M, or N when swapped) at which the H100 runs [`STREAMING_PIPELINE_DEPTH`]
/// stages: 1 to 31 (the 128 x 16 tile at 1 to 16, measured; 17 to 31 not measured apart) and
/// 64 (the 64 x 96 and swapped 128 x 64 tiles, session 33).
pub const H100_STREAMING_BATCHES: &[std::ops::RangeInclusive<usize>] = &[1..=31, 64..=64];

/// Stages of the ring the H100's weight-streaming launches use at 32 to 63 rows
/// ([`H100_DEEPER_STREAMING_BATCHES`]): the 64 x 96 tile's measured best there.
pub const H100_DEEPER_STREAMING_DEPTH: u32 = 6;

/// The batches at which the H100 runs [`H100_DEEPER_STREAMING_DEPTH`] stages: session 35's
/// depth sweeps at 40, 48, 56 and 60 rows (and session 33's at 32) found depth 6 1.5–4.5% ahead
/// of depth 5 on the 64 x 96 tile, and level with or ahead of the whole ring.
pub const H100_DEEPER_STREAMING_BATCHES: &[std::ops::RangeInclusive<usize>] = &[32..=63];

/// Stages of the ring a weight-streaming launch uses by default on the H200 where it was
/// measured to win ([`H200_STREAMING_BATCHES`]).
pub const H200_STREAMING_PIPELINE_DEPTH: u32 = 6;

/// The batches (rows: M, or N when swapped) at which the H200 runs
/// [`H200_STREAMING_PIPELINE_DEPTH`] stages: 1 to 16 (the 128 x 16 tile) and 64 (the 64 x 96 and
/// swapped 128 x 64 tiles). At 32, 40 and 48 rows the 64 x 96 tile's whole ring was level or
/// faster (docs/perf-notes.md, session 34), and the batches between 49 and 63 were not measured.
pub const H200_STREAMING_BATCHES: &[std::ops::RangeInclusive<usize>] = &[1..=16, 64..=64];

/// One device's measured weight-streaming depth: a word of the device's name ([`device_named`]), the depth, and
/// the batches (rows: M, or N when swapped) it applies to.
#[derive(Clone, Copy, Debug)]
pub struct StreamingDepth {
    /// A word of the device's name ("H100", [`device_named`]).
    pub device: &'static str,
    /// Stages of the ring a launch uses.
    pub depth: u32,
    /// The batches it was measured to win at.
    pub batches: &'static [std::ops::RangeInclusive<usize>],
}

/// The devices whose weight-streaming depth was measured (`run gemm --depth-sweep`), each with
/// its depth and the batches it applies to (a device may have several entries; the first whose
/// batches hold the launch's applies); a device or batch not named here keeps the whole ring.
/// The H100: docs/perf-notes.md, session 33 run 2 and session 35; the H200: session 34, runs 2
/// to 4.
pub const MEASURED_STREAMING_DEPTHS: &[StreamingDepth] = &[
    StreamingDepth {
        device: "H100",
        depth: STREAMING_PIPELINE_DEPTH,
        batches: H100_STREAMING_BATCHES,
    },
    StreamingDepth {
        device: "H100",
        depth: H100_DEEPER_STREAMING_DEPTH,
        batches: H100_DEEPER_STREAMING_BATCHES,
    },
    StreamingDepth {
        device: "H200",
        depth: H200_STREAMING_PIPELINE_DEPTH,
        batches: H200_STREAMING_BATCHES,
    },
];

/// The pipeline depth (stages of the ring in use, [`TmaGemmParams::pipeline_depth`]; 0 is the
/// whole ring) of a path-2 launch of `cfg` (already swapped where the launch is) on `device`
/// when none is forced: the device's measured depth ([`MEASURED_STREAMING_DEPTHS`]) where the
/// product streams a weight past a batch (M or, swapped, N) the entry names and the tile's
/// ring is deeper; else the whole ring.
///
/// Measured on an H100 (docs/perf-notes.md, session 33 run 2, `run gemm --depth-sweep`, three
/// rotating rounds): the GPT-3 MLP's GeMMs at B = 64 on the 64 x 96 tile at depth 5 ran 0.987 /
/// 1.019 of cuBLAS against the whole 11-stage ring's 0.958 / 0.940, the swapped 128 x 64 tile
/// 0.954 / 0.979 against its 9 stages' 0.872 / 0.895, the 128 x 16 tile at B = 1 0.937 / 0.943
/// against 0.918 / 0.890; at B = 32 depth 5 was level with the whole ring (0.941 / 0.970
/// against 0.942 / 0.968). Depth 4 lost 3–13%. Session 35 (an H100, one call, three rotating
/// rounds a depth) swept the 64 x 96 tile between: depth 6 against depth 5 and the whole ring,
/// GeMM2 / GeMM1 — B = 40 0.995 / 0.994 against 0.976 / 0.963 and 0.987 / 0.967; B = 48 1.013 /
/// 1.010 against 0.986 / 0.983 and 1.003 / 0.983; B = 56 0.998 / 0.995 against 0.957 / 0.947
/// and 1.009 / 0.982; B = 60 0.902 / 0.877 against 0.868 / 0.843 and 0.925 / 0.873; so 32 to
/// 63 rows take depth 6 (session 33's B = 32: 0.942 / 0.991 against depth 5's 0.941 / 0.970);
/// timed side by side as defaults, depth 6 won every row at 40 to 60 by 1.5–6%. The TMA probe
/// (session 32) saw the same: a 9-stage stream left 17 SMs slow, a 4-stage one none.
///
/// Measured on the H200 (session 34, runs 2–4, `run gemm --depth-sweep` and side-by-side
/// rows): at B = 64 depth 6 ran the 64 x 96 tile at 0.989 / 1.013 of cuBLAS against the whole
/// ring's 0.964 / 0.954 and the swapped 128 x 64 tile at 0.916 / 0.951 against 0.835 / 0.877;
/// the 128 x 16 tile at B = 1, 8 and 16 at 1.02–1.04 (GeMM2, whole tiles) and 0.98–0.99 (GeMM1,
/// split in two) against 0.93–0.95 and 0.88–0.89 on the whole ring. At B = 32 the whole ring
/// won (GeMM2 0.931 against depth 6's 0.847), at 40 and 48 it was level. The MLP's and the
/// multi-GPU chains' stream-mode stages pin the whole ring ([`whole_ring`]), but for the MLP's
/// 128 x 16 stages, which take this depth.
pub fn default_pipeline_depth(device: &DeviceInfo, cfg: &GemmConfig, shape: &WgTileShape) -> u32 {
    let batch = cfg.m.min(cfg.n);
    MEASURED_STREAMING_DEPTHS
        .iter()
        .find(|e| device_named(device, e.device) && e.batches.iter().any(|b| b.contains(&batch)))
        .filter(|e| e.depth < shape.stages)
        .map_or(0, |e| e.depth)
}

/// Whether a launch may force `depth` stages of `tile`'s ring (`GemmConfig::pipeline_depth`):
/// 2 to the ring's stages ([`pipeline_depth_ok`]; 0, "all", is the unforced value, not an
/// answer); an error naming the tile and its ring otherwise. Plain launches and the MLP's
/// stages both ask it before anything is set up.
pub fn check_pipeline_depth(tile: WgTile, depth: u32) -> Result<()> {
    let stages = tile.shape().stages;
    if depth != 0 && pipeline_depth_ok(depth, stages) {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "GeMM path 2: pipeline depth {depth} asked of the {} tile, whose ring has {stages} stages \
         (a depth runs from 2 to the ring's stages)",
        tile.name()
    )))
}

/// `cfg` pinned to `tile`'s whole ring, for stream-mode stages and the StreamSync launches
/// beside them: inside the MLP the 64 x 96 stages at B = 64 ran 2–6% slower at depths 5 and 6
/// than on their whole ring (H200, session 34 run 2), although plain launches gain from
/// [`default_pipeline_depth`]'s shallower ring. The MLP's 128 x 16 stages are the exception:
/// they take the device's depth (H100, session 34: 109.7 µs at depth 5 against 117.4 whole).
pub fn whole_ring(cfg: GemmConfig, tile: WgTile) -> GemmConfig {
    cfg.pipeline_depth(tile.shape().stages)
}

/// Whether `tile` can run a swapped launch of an `m`-row product (the batch as its N): the
/// 128 x 64 tile for any M (the batch then spans several of its 64-column tiles, as the MLP's
/// swapped stream stages at B = 100 do), the 128 x 16 tile for M <= 16; an error that says
/// which otherwise.
pub fn check_swapped_tile(tile: WgTile, m: usize) -> Result<()> {
    match tile {
        WgTile::T128x64 => Ok(()),
        WgTile::T128x16 if m <= 16 => Ok(()),
        WgTile::T128x16 => Err(Error::InvalidArgument(format!(
            "GeMM path 2: the {} tile runs swapped products of at most {} rows, not {m}",
            tile.name(),
            tile.shape().bn
        ))),
        _ => Err(Error::InvalidArgument(format!(
            "GeMM path 2: swapped launches (swap-AB) run on the 128x64 tile (or 128x16 for M <= 16), not {}",
            tile.name()
        ))),
    }
}

/// Whether `tile` can run an unswapped launch of `m` rows: every tile but the 128 x 16 one,
/// which exists for swapped products only, and the 64 x 96 one past 64 rows (its stages carry
/// 64 rows of A).
pub fn check_unswapped_tile(tile: WgTile, m: usize) -> Result<()> {
    match tile {
        WgTile::T128x16 => Err(Error::InvalidArgument(
            "GeMM path 2: the 128x16 tile runs swapped products only (M <= 16: swap-AB on)".into(),
        )),
        WgTile::T64x96 if m > tile.shape().a_rows() as usize => Err(Error::InvalidArgument(format!(
            "GeMM path 2: the 64x96 tile runs products of at most 64 rows, not {m}"
        ))),
        _ => Ok(()),
    }
}

/// Rows up to which a swapped product takes stream-K by default ([`swapped_stream_k`]).
pub const SWAP_STREAM_K_MAX_M: usize = 16;

/// Whether a swapped launch of `cfg` (the unswapped problem) takes stream-K: when it forces
/// neither split-K nor stream-K and has at most [`SWAP_STREAM_K_MAX_M`] rows. Measured on the
/// H200 (session 7, runs 3 and 5, `gemm-table --modes`): at B = 1 the 128 x 64 tile's
/// stream-K beats the split-K factor [`choose_split_k`] gives (GeMM1 0.0549 / 0.0553 ms
/// against 0.0584 / 0.0589, GeMM2 0.0536 / 0.0535 against 0.0548 / 0.0548), at B = 64 it
/// loses (GeMM1 0.0594 / 0.0590 against 0.0563 / 0.0569, GeMM2 0.0550 / 0.0552 against
/// 0.0526 / 0.0523).
pub fn swapped_stream_k(cfg: &GemmConfig) -> bool {
    cfg.split_k.is_none() && cfg.stream_k.is_none() && cfg.m <= SWAP_STREAM_K_MAX_M
}

/// The stream-K ranges (one block each) of a plain launch with `slots` resident blocks:
/// [`GemmConfig::stream_k_ranges`] clamped to `slots`, or `slots` when it is unset; an error
/// where forced ranges contradict the rest of `cfg` (zero ranges, a forced split-K factor,
/// stream-K forced off).
pub fn stream_k_blocks(cfg: &GemmConfig, slots: u32) -> Result<u32> {
    let Some(ranges) = cfg.stream_k_ranges else {
        return Ok(slots);
    };
    let why = if ranges == 0 {
        Some("zero ranges")
    } else if cfg.split_k.is_some() {
        Some("a forced split-K factor")
    } else if cfg.stream_k == Some(false) {
        Some("stream-K forced off")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::InvalidArgument(format!(
            "GeMM path 2: {ranges} stream-K ranges forced with {why}"
        ))),
        None => Ok(ranges.min(slots)),
    }
}

/// A plain tile's time in hundredths of a 128 x 128 tile's, for the same K: the whole-tile
/// kernels at 8192³ in session 6's `gemm-table --modes` on the H200 (run 1: 1.9140, 1.6144 and
/// 1.4529 ms over 32, 21 and 16 waves, so 59.8, 76.9 and 90.8 µs a tile).
pub fn plain_tile_cost(t: WgTile) -> u32 {
    match t {
        WgTile::T128x128 => 100,
        WgTile::T128x192 => 129,
        WgTile::T128x256 => 152,
        // Not candidates of the unswapped rule (`choose_plain_wg_tile`); half and three
        // quarters of the 128-wide tile's work.
        WgTile::T128x64 => 50,
        WgTile::T64x96 => 75,
        WgTile::T128x16 => 13,
    }
}

/// The tile of a stream-mode pair of `m`-row GeMMs of widths `n1` and `n2` (the MLP's two
/// stages run one kernel, so their row tiles line up): 128 x 192 when `m > 128` and both
/// stages' 192-wide grids are at most four waves on `sm_count` SMs, else [`choose_wg_tile`]
/// for the first stage. Measured on the GPT-3 MLP (session 6 run 1, `sweep mlp`): StreamSync
/// 1.24x, 1.25x and 1.11x faster at B = 256, 512 and 1024 than on the previous tiles, the best
/// policy 1.00x, 1.18x and 1.00x.
pub fn choose_pair_wg_tile(m: usize, n1: usize, n2: usize, sm_count: u32) -> WgTile {
    let tiles = |n: usize| {
        let (tm, tn) = WgTile::T128x192.shape().tiles(m as u32, n as u32);
        tm * tn
    };
    let limit = 4 * sm_count;
    if m > 128 && tiles(n1) <= limit && tiles(n2) <= limit {
        WgTile::T128x192
    } else {
        choose_wg_tile(m, n1, sm_count)
    }
}

/// Whether a plain launch of `cfg` on `tile` (with `tm` row tiles, split-K factor `splits`,
/// stream-K on or off) runs in clusters of two: `Some(entry point)`, `None` (not forced, and
/// off by the default rule), or, when `cfg.cluster` forces it where it cannot run, an error
/// that says why. Device-independent; the caller still checks that a cluster fits.
pub fn cluster_choice(
    cfg: &GemmConfig,
    tile: WgTile,
    tm: u32,
    splits: u32,
    stream_k: bool,
) -> Result<Option<&'static str>> {
    let forced = cfg.cluster == Some(true);
    let name = match (cfg.cluster, tile.cluster_kernel_name(cfg.input)) {
        (Some(false), _) => return Ok(None),
        (_, None) if forced => {
            return Err(Error::InvalidArgument(format!(
                "GeMM path 2: clusters need the 128x256 tile, not {}",
                tile.name()
            )))
        }
        (_, None) => return Ok(None),
        (_, Some(name)) => name,
    };
    let why_not = if splits > 1 || stream_k {
        Some("split-K or stream-K (clusters run whole tiles; force them off)")
    } else if cfg.b_layout == super::gemm::Layout::Transposed {
        Some("a transposed B (clusters multicast row-major B's boxes)")
    } else if tm < 2 && !forced {
        Some("a single row tile")
    } else {
        None
    };
    match why_not {
        Some(why) if forced => Err(Error::InvalidArgument(format!(
            "GeMM path 2: clusters cannot run with {why}"
        ))),
        Some(_) => Ok(None),
        None => Ok(Some(name)),
    }
}

/// Whether `cx` can run path 2: the embedded PTX is the sm_90a build and the device is sm_90.
pub fn device_supports(cx: &Context) -> bool {
    PTX_ARCH == "sm_90a" && (cx.info().major, cx.info().minor) == (9, 0)
}

/// Whether TMA can load the operands `p` describes: 16-byte aligned bases and leading
/// dimensions that are multiples of 8 elements (16 bytes), within the tensor-map limits.
pub fn operands_fit(p: &GemmParams) -> bool {
    let stride_ok = |ld: u32| ld.is_multiple_of(8) && ld > 0 && (ld as u64) * 2 < (1 << 40);
    p.a.is_multiple_of(16) && p.b.is_multiple_of(16) && stride_ok(p.lda) && stride_ok(p.ldb)
}

/// The shared-memory swizzle of a tensor map's boxes: the width in bytes of a swizzled row
/// (a box's inner extent may not exceed it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapSwizzle {
    /// 32-byte rows (16 elements of 16 bits).
    B32,
    /// 64-byte rows (32 elements).
    B64,
    /// 128-byte rows (64 elements): every path-2 GeMM operand.
    B128,
}

impl MapSwizzle {
    /// The swizzle whose rows are `bytes` wide (32, 64 or 128).
    pub fn for_row_bytes(bytes: u32) -> Option<Self> {
        match bytes {
            32 => Some(Self::B32),
            64 => Some(Self::B64),
            128 => Some(Self::B128),
            _ => None,
        }
    }

    fn raw(self) -> sys::CUtensorMapSwizzle {
        match self {
            Self::B32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            Self::B64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            Self::B128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }
}

/// How far L2 widens a tensor map's fills past the bytes a box asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L2Promotion {
    /// Only the sectors asked for.
    None,
    /// To 64 bytes.
    B64,
    /// To 128 bytes.
    B128,
    /// To 256 bytes: every path-2 GeMM operand.
    B256,
}

impl L2Promotion {
    /// Parses `none`, `64`, `128` or `256`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "none" | "0" => Ok(Self::None),
            "64" => Ok(Self::B64),
            "128" => Ok(Self::B128),
            "256" => Ok(Self::B256),
            _ => Err(Error::InvalidArgument(format!(
                "L2 promotion {s:?}: expected none, 64, 128 or 256"
            ))),
        }
    }

    /// `none`, `64`, `128` or `256`.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::B64 => "64",
            Self::B128 => "128",
            Self::B256 => "256",
        }
    }

    fn raw(self) -> sys::CUtensorMapL2promotion {
        match self {
            Self::None => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            Self::B64 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
            Self::B128 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            Self::B256 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        }
    }
}

/// Encodes one 2-D tensor map of 16-bit elements: `dims` and `box_` innermost first, leading
/// dimension `ld` elements, the given swizzle and L2 promotion, zero fill out of bounds.
pub fn encode_map_2d(
    input: InputType,
    base: u64,
    dims: [u32; 2],
    box_: [u32; 2],
    ld: u32,
    swizzle: MapSwizzle,
    promotion: L2Promotion,
) -> Result<[u64; 16]> {
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let dtype = match input {
        InputType::Bf16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        InputType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    };
    let global_dim = [dims[0] as u64, dims[1] as u64];
    let global_strides = [ld as u64 * 2];
    let element_strides = [1u32, 1];
    // SAFETY: every pointer is to a live local array of the length the driver reads for rank 2;
    // `base` is only recorded in the map, not dereferenced.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            dtype,
            2,
            base as *mut std::ffi::c_void,
            global_dim.as_ptr(),
            global_strides.as_ptr(),
            box_.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle.raw(),
            promotion.raw(),
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::InvalidArgument(format!(
            "cuTensorMapEncodeTiled refused dims {dims:?}, box {box_:?}, leading dimension {ld}, swizzle \
             {swizzle:?}, L2 promotion {promotion:?} at {base:#x}: {r:?}"
        )));
    }
    Ok(map.opaque)
}

/// A path-2 GeMM operand's tensor map: [`encode_map_2d`] with a `swizzle_bytes` (128, 64 or
/// 32) swizzle.
fn encode_map(
    input: InputType,
    base: u64,
    dims: [u32; 2],
    box_: [u32; 2],
    ld: u32,
    swizzle_bytes: u32,
    promotion: L2Promotion,
) -> Result<[u64; 16]> {
    let swizzle = MapSwizzle::for_row_bytes(swizzle_bytes).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "GeMM path 2: no {swizzle_bytes}-byte swizzle tensor maps (128, 64 or 32)"
        ))
    })?;
    encode_map_2d(input, base, dims, box_, ld, swizzle, promotion)
}

/// A's and B's tensor maps for `p` with tile `tile`, as the 32 words the kernel reads (256-byte
/// L2 promotion).
pub fn encode_maps(p: &GemmParams, tile: WgTile, input: InputType) -> Result<[u64; 32]> {
    encode_maps_promoted(p, tile, input, L2Promotion::B256)
}

/// [`encode_maps`] with both maps' L2 promotion `promotion`.
pub fn encode_maps_promoted(
    p: &GemmParams,
    tile: WgTile,
    input: InputType,
    promotion: L2Promotion,
) -> Result<[u64; 32]> {
    let (a_dims, a_box) = a_map_dims_rows(p.m, p.k, p.a_trans(), tile.shape().a_rows());
    let (b_dims, b_box) = b_map_dims(p.n, p.k, p.b_trans(), tile.shape().bn);
    let a = encode_map(input, p.a, a_dims, a_box, p.lda, 128, promotion)?;
    let b = encode_map(
        input,
        p.b,
        b_dims,
        b_box,
        p.ldb,
        tile.shape().b_swizzle_bytes(p.b_trans()),
        promotion,
    )?;
    let mut words = [0u64; 32];
    words[..16].copy_from_slice(&a);
    words[16..].copy_from_slice(&b);
    Ok(words)
}

/// [`TmaGemmParams`] as a kernel argument (passed by value, 96 bytes).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct TmaGemmParamsArg(pub TmaGemmParams);

// SAFETY: TmaGemmParams is #[repr(C)] plain old data (Pod) with the layout the path-2 entry
// points take by value (asserted in shared/src/gemm_sm90.rs).
unsafe impl DeviceRepr for TmaGemmParamsArg {}

/// Split-K's and stream-K's device state.
#[derive(Debug)]
struct SplitState {
    /// Partial tiles of `partial_bytes`: `tiles * splits` with split-K, stream-K tiles times
    /// their slots with stream-K (only the device touches them).
    workspace: DeviceBuffer<u8>,
    /// One arrival counter per tile (zero between launches).
    counters: Mutex<DeviceBuffer<u32>>,
}

/// The cluster variant of a plain launch: its entry point and grid (a multiple of 2).
#[derive(Debug)]
struct ClusterKernel {
    name: &'static str,
    function: CudaFunction,
    grid: u32,
}

/// What identifies a set of tensor maps: the operands' addresses, shapes and layouts.
type MapKey = (u64, u64, u32, u32, u32, u32, u32, u32);

/// A path-2 kernel for one problem: its tile, entry point, error slot and tensor-map cache.
#[derive(Debug)]
pub struct Sm90Gemm {
    tile: WgTile,
    input: InputType,
    function: CudaFunction,
    grid: u32,
    /// Split-K factor (1: none).
    splits: u32,
    /// Stream-K plan (`None`: whole tiles or split-K).
    stream_k: Option<StreamKPlan>,
    /// Plain launches in clusters of two blocks multicasting B (`None`: single blocks).
    cluster: Option<ClusterKernel>,
    /// Split-K partial tiles and per-tile arrival counters (`None` without split-K). One
    /// launch at a time uses them: launches of one GeMM must not overlap.
    split_state: Option<SplitState>,
    errors: ErrorSlotBuffer,
    maps: Mutex<HashMap<MapKey, CudaSlice<u64>>>,
    /// Plain launches run `C^T = B^T A^T` ([`Sm90Gemm::new_swapped`]).
    swapped: bool,
    /// The tensor maps' L2 promotion ([`GemmConfig::l2_promotion`]).
    promotion: L2Promotion,
    /// Stages of the ring each launch uses ([`GemmConfig::pipeline_depth`]; 0: all).
    pipeline_depth: u32,
}

impl Sm90Gemm {
    /// As [`Sm90Gemm::new`] for the swapped product ([`GemmConfig::swapped`]): every plain
    /// launch of `cfg`'s parameters runs them through
    /// [`cusync_shared::gemm::GemmParams::swap_ab`] (C written transposed, so the result is
    /// `cfg`'s). Tiles, split-K and stream-K are those of the swapped shape.
    /// Only the 128 x 64 tile stores C transposed: another tile is an error.
    /// Unless split-K or stream-K is forced, products of at most [`SWAP_STREAM_K_MAX_M`] rows
    /// take stream-K ([`swapped_stream_k`]).
    pub fn new_swapped(cx: &Context, cfg: &GemmConfig, tile: WgTile) -> Result<Self> {
        check_swapped_tile(tile, cfg.m)?;
        let mut swapped = cfg.swapped();
        if swapped_stream_k(cfg) {
            swapped = swapped.stream_k(true);
        }
        let mut k = Self::new(cx, &swapped, tile)?;
        k.swapped = true;
        Ok(k)
    }

    /// The tensor maps' L2 promotion ([`GemmConfig::l2_promotion`]).
    pub fn promotion(&self) -> L2Promotion {
        self.promotion
    }

    /// Stages of the tile's ring each launch uses ([`GemmConfig::pipeline_depth`]): the tile's
    /// own count unless one was forced.
    pub fn pipeline_depth(&self) -> u32 {
        ring_stages(self.pipeline_depth, self.tile.shape().stages)
    }

    /// Whether plain launches run swapped ([`Sm90Gemm::new_swapped`]); their tiles (and trace
    /// events) are then those of `C^T`.
    pub fn swapped(&self) -> bool {
        self.swapped
    }

    /// Sets up path 2 for `cfg` on `cx` (which must [`device_supports`] it) with `tile`.
    pub fn new(cx: &Context, cfg: &GemmConfig, tile: WgTile) -> Result<Self> {
        if !device_supports(cx) {
            return Err(Error::UnsupportedArch {
                device: cx.info().name.clone(),
                major: cx.info().major,
                minor: cx.info().minor,
                ptx_arch: PTX_ARCH,
                hint: "GeMM path 2 (TMA + wgmma) needs an sm_90 device and the sm_90a build; \
                       leave the path-2 tile unset to fall back to path 1",
            });
        }
        let name = tile.kernel_name(cfg.input);
        let shape = tile.shape();
        if let Some(d) = cfg.pipeline_depth {
            check_pipeline_depth(tile, d)?;
        }
        let pipeline_depth = cfg
            .pipeline_depth
            .unwrap_or_else(|| default_pipeline_depth(cx.info(), cfg, &shape));
        cx.set_max_dynamic_smem(name, shape.smem_bytes())?;
        let (tm, tn) = shape.tiles(cfg.m as u32, cfg.n as u32);
        let tiles = tm * tn;
        let resident = cx.occupancy(name, WG_THREADS, shape.smem_bytes())?.max(1);
        let slots = cx.info().sm_count * resident;
        let k_steps = shape.k_steps(cfg.k as u32).max(1);
        // Stream-mode stages use the split-K factor (their tiles come from the stage's
        // order); plain launches use the stream-K plan when there is one.
        // Forced clusters run whole tiles: no split-K or stream-K unless also forced (then
        // refused below).
        let cluster_forced = cfg.cluster == Some(true);
        let splits = cfg
            .split_k
            .unwrap_or_else(|| {
                if cluster_forced {
                    1
                } else {
                    choose_split_k(tiles, k_steps, slots)
                }
            })
            .clamp(1, k_steps);
        let sk_blocks = stream_k_blocks(cfg, slots)?;
        let stream_k = match (cfg.stream_k, cfg.split_k) {
            (Some(true), _) => stream_k_plan(tiles, k_steps, sk_blocks),
            (None, None) if !cluster_forced => choose_stream_k(tm, tiles, k_steps, slots),
            _ => None,
        };
        let split_slots = if splits > 1 {
            tiles as usize * splits as usize
        } else {
            0
        };
        let sk_slots = stream_k.map_or(0, |k| (k.tiles - k.dp_tiles) as usize * k.slots_per_tile() as usize);
        let partial_slots = split_slots.max(sk_slots);
        let split_state = if partial_slots > 0 {
            Some(SplitState {
                workspace: cx.alloc_zeros::<u8>(partial_slots * shape.partial_bytes() as usize)?,
                counters: Mutex::new(cx.alloc_zeros::<u32>(tiles as usize)?),
            })
        } else {
            None
        };
        let grid = (tiles * splits).min(slots).max(1);
        let cluster = Self::cluster_kernel(cx, cfg, tile, (tm, tn), splits, stream_k.is_some())?;
        Ok(Self {
            tile,
            input: cfg.input,
            function: cx.function(name)?,
            grid,
            splits,
            stream_k,
            cluster,
            split_state,
            errors: ErrorSlotBuffer::new(cx)?,
            maps: Mutex::new(HashMap::new()),
            swapped: false,
            promotion: cfg.l2_promotion.unwrap_or(L2Promotion::B256),
            pipeline_depth,
        })
    }

    /// The cluster variant for `cfg` where it applies: forced (`cfg.cluster == Some(true)`, an
    /// error where it cannot run: the 128 x 128 tile, a transposed B, split-K or stream-K) or
    /// by default where the 128 x 256 tile has at least two row tiles, B is row-major and the
    /// launch runs whole tiles. Measured on the H200 (docs/perf-notes.md, session 4): 0.99x to
    /// 1.08x the speed of single blocks on every such shape of `gemm-table` (1.05x to 1.08x on
    /// the large ones).
    fn cluster_kernel(
        cx: &Context,
        cfg: &GemmConfig,
        tile: WgTile,
        (tm, tn): (u32, u32),
        splits: u32,
        stream_k: bool,
    ) -> Result<Option<ClusterKernel>> {
        let forced = cfg.cluster == Some(true);
        let Some(name) = cluster_choice(cfg, tile, tm, splits, stream_k)? else {
            return Ok(None);
        };
        let smem = tile.shape().smem_bytes();
        cx.set_max_dynamic_smem(name, smem)?;
        let resident = cx.max_active_clusters(name, 2, WG_THREADS, smem)?;
        if resident == 0 {
            return if forced {
                Err(Error::InvalidArgument(format!(
                    "GeMM path 2: no cluster of two `{name}` blocks fits this device"
                )))
            } else {
                Ok(None)
            };
        }
        let pairs = tm.div_ceil(2) * tn;
        Ok(Some(ClusterKernel {
            name,
            function: cx.function(name)?,
            grid: 2 * pairs.min(resident),
        }))
    }

    /// Whether plain launches run in clusters of two blocks that multicast B.
    pub fn clustered(&self) -> bool {
        self.cluster.is_some()
    }

    /// The tile in use.
    pub fn tile(&self) -> WgTile {
        self.tile
    }

    /// The entry point of plain launches.
    pub fn kernel_name(&self) -> &'static str {
        self.cluster
            .as_ref()
            .map_or_else(|| self.tile.kernel_name(self.input), |c| c.name)
    }

    /// Grid (persistent: at most the resident blocks; one per stream-K range with stream-K),
    /// block and shared memory of a plain launch.
    pub fn launch_config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (
                match (&self.cluster, self.stream_k) {
                    (Some(c), _) => c.grid,
                    (None, Some(k)) => k.sk_units,
                    (None, None) => self.grid,
                },
                1,
                1,
            ),
            block_dim: (WG_THREADS, 1, 1),
            shared_mem_bytes: self.tile.shape().smem_bytes(),
        }
    }

    /// The error slot: a pipeline wait that timed out (a kernel bug) is reported here.
    pub fn errors(&self) -> &ErrorSlotBuffer {
        &self.errors
    }

    /// The device copy of `p`'s tensor maps (encoded and uploaded on first use).
    fn maps_for(&self, stream: &Stream, p: &GemmParams) -> Result<u64> {
        let key = (p.a, p.b, p.m, p.n, p.k, p.lda, p.ldb, p.flags);
        let mut cache = self
            .maps
            .lock()
            .map_err(|_| Error::InvalidArgument("tensor-map cache poisoned".into()))?;
        if let Some(buf) = cache.get(&key) {
            return Ok(device_addr(stream, buf));
        }
        if cache.len() >= MAP_CACHE_LIMIT {
            // Launches still in flight may read the maps being dropped.
            stream.synchronize()?;
            cache.clear();
        }
        let words = encode_maps_promoted(p, self.tile, self.input, self.promotion)?;
        let buf = stream
            .raw()
            .clone_htod(&words)
            .map_err(Error::driver("uploading tensor maps"))?;
        // Other streams may launch with these maps next: make the copy complete first.
        stream.synchronize()?;
        let addr = device_addr(stream, &buf);
        cache.insert(key, buf);
        Ok(addr)
    }

    /// Persistent blocks of a stream-mode stage launch (at most the resident blocks, at most
    /// the work units; stream-mode stages split K by [`Sm90Gemm::split_k`], never stream-K).
    pub fn persistent_blocks(&self) -> u32 {
        self.grid
    }

    /// The split-K factor (1: none): each output tile is computed by this many work units
    /// over consecutive K ranges, reduced in a fixed order (results are deterministic).
    /// Plain launches use it only without a stream-K plan ([`Sm90Gemm::stream_k`]).
    pub fn split_k(&self) -> u32 {
        self.splits
    }

    /// The stream-K plan (`None`: whole tiles or split-K): the leading tiles computed whole,
    /// then the rest's K-steps cut into one range per block, partial tiles summed in a fixed
    /// order (results are deterministic).
    pub fn stream_k(&self) -> Option<StreamKPlan> {
        self.stream_k
    }

    /// Zeroes the split-K (and stream-K) arrival counters: needed after a launch that stopped early (a
    /// timed-out wait), which leaves some counted; a completed launch leaves them zeroed.
    pub fn reset_split_state(&self) -> Result<()> {
        if let Some(state) = &self.split_state {
            let mut counters = state
                .counters
                .lock()
                .map_err(|_| Error::InvalidArgument("split-K counters poisoned".into()))?;
            counters.fill(0)?;
        }
        Ok(())
    }

    /// The kernel parameter for `p`: its tensor maps (encoded and uploaded on `stream` on first
    /// use), this kernel's error slot, and `timeout_ns` on every pipeline wait. Stream-mode
    /// stages pass the graph's semaphore timeout plus [`PIPELINE_TIMEOUT_NS`], since their
    /// consumer warpgroups wait on the pipeline while the producer waits on a dependency.
    pub fn params(&self, stream: &Stream, p: &GemmParams, timeout_ns: u64) -> Result<TmaGemmParams> {
        if !operands_fit(p) {
            return Err(Error::InvalidArgument(
                "GeMM path 2: TMA cannot load these operands (bases must be 16-byte aligned, leading \
                 dimensions multiples of 8 elements)"
                    .into(),
            ));
        }
        Ok(TmaGemmParams {
            gemm: *p,
            tensor_maps: self.maps_for(stream, p)?,
            error: self.errors.addr(),
            timeout_ns,
            raster_group: WG_RASTER_GROUP,
            split_k: self.splits,
            split_workspace: self.split_state.as_ref().map_or(0, |s| s.workspace.addr()),
            split_counters: self
                .split_state
                .as_ref()
                .map_or(0, |s| s.counters.lock().map_or(0, |c| c.addr())),
            sk_dp_tiles: self.stream_k.map_or(0, |k| k.dp_tiles),
            sk_units: self.stream_k.map_or(0, |k| k.sk_units),
            pipeline_depth: self.pipeline_depth,
            _pad: 0,
        })
    }

    /// The kernel parameter this GeMM's kernel runs `p` (the unswapped problem) with:
    /// [`Sm90Gemm::params`] of `p`, or of `p.swap_ab()` for a swapped kernel
    /// ([`Sm90Gemm::swapped`]). Plain launches and stream-mode stages both take it.
    pub fn launch_params(&self, stream: &Stream, p: &GemmParams, timeout_ns: u64) -> Result<TmaGemmParams> {
        self.params(stream, &if self.swapped { p.swap_ab() } else { *p }, timeout_ns)
    }

    /// Launches `p` on `stream`.
    ///
    /// # Safety
    /// `p` describes live device memory of the problem's types and sizes until the launch
    /// completes, and [`operands_fit`] holds for it.
    /// A swapped kernel ([`Sm90Gemm::swapped`]) launches `p.swap_ab()`.
    pub unsafe fn launch(&self, stream: &Stream, p: &GemmParams) -> Result<()> {
        let arg = TmaGemmParamsArg(self.launch_params(stream, p, PIPELINE_TIMEOUT_NS)?);
        let function = self.cluster.as_ref().map_or(&self.function, |c| &c.function);
        let mut b = stream.raw().launch_builder(function);
        b.arg(&arg);
        // SAFETY: the entry point takes one TmaGemmParams by value; the launch config gives it
        // its threads and shared memory; the caller vouches for the operands, and the maps
        // and error slot live as long as `self`.
        unsafe { b.launch(self.launch_config()) }
            .map(|_| ())
            .map_err(Error::driver("launching a path-2 GeMM"))
    }
}

/// The device address of `buf` (for a kernel parameter).
fn device_addr(stream: &Stream, buf: &CudaSlice<u64>) -> u64 {
    use cudarc::driver::DevicePtr;
    let (ptr, _sync) = buf.device_ptr(stream.raw());
    ptr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile96_is_the_default_where_its_units_fill_the_sms() {
        use crate::ops::gemm::Epilogue;
        // The GPT-3 MLP at B = 64 and 32: GeMM2's 128 whole tiles, GeMM1's 64 split in two,
        // 128-byte L2 promotion, split-K rather than stream-K.
        for m in [17, 32, 64] {
            let c = choose_tile96(&GemmConfig::new(m, 12288, 6144), 132).unwrap();
            assert_eq!(
                (c.wg_tile, c.split_k, c.stream_k),
                (Some(WgTile::T64x96), Some(1), Some(false))
            );
            assert_eq!(c.l2_promotion, Some(L2Promotion::B128));
            let g1 = GemmConfig::new(m, 6144, 12288).epilogue(Epilogue::Gelu);
            let c = choose_tile96(&g1, 132).unwrap();
            assert_eq!((c.split_k, c.epilogue), (Some(2), Epilogue::Gelu));
        }
        // A forced promotion or depth is kept.
        let c = choose_tile96(
            &GemmConfig::new(64, 12288, 6144)
                .l2_promotion(L2Promotion::None)
                .pipeline_depth(4),
            132,
        )
        .unwrap();
        assert_eq!((c.l2_promotion, c.pipeline_depth), (Some(L2Promotion::None), Some(4)));
        // Outside its rows, on products too small to fill the SMs, or with a kernel family or
        // decomposition forced: no.
        for cfg in [
            GemmConfig::new(16, 12288, 6144),
            GemmConfig::new(65, 12288, 6144),
            GemmConfig::new(64, 520, 200),
            GemmConfig::new(64, 12288, 6144).split_k(2),
            GemmConfig::new(64, 12288, 6144).swap_ab(true),
            GemmConfig::new(64, 12288, 6144).stream_k(true),
            GemmConfig::new(64, 12288, 6144).wg_tile(WgTile::T128x64),
            GemmConfig::new(64, 12288, 6144).skinny(true),
        ] {
            assert!(choose_tile96(&cfg, 132).is_none(), "{cfg:?}");
        }
        assert!(choose_tile96(&GemmConfig::new(64, 12288, 6144), 0).is_none());
    }

    #[test]
    fn tile_choice_fills_the_sms() {
        assert_eq!(choose_wg_tile(8192, 8192, 132), WgTile::T128x256);
        assert_eq!(choose_wg_tile(1024, 6144, 132), WgTile::T128x256);
        assert_eq!(choose_wg_tile(256, 6144, 132), WgTile::T128x128);
        assert_eq!(choose_wg_tile(1, 12288, 132), WgTile::T128x128);
    }

    #[test]
    fn plain_tile_choice_follows_the_measured_best() {
        use WgTile::{T128x128 as Small, T128x192 as Mid, T128x256 as Large};
        // (M, N, K, the tile picked: the fastest whole-tile kernel in session 6's `gemm-table
        // --modes`, run 1, except 256 x 6144, where the 192-wide tile's split-K 2 (128 units,
        // one wave) is modelled faster than 128 x 128's 96 whole tiles).
        let measured = [
            (8192, 8192, 8192, Large),
            (16384, 8192, 8192, Large),
            (256, 6144, 12288, Mid),
            (256, 12288, 6144, Mid),
            (512, 6144, 12288, Mid),
            (512, 12288, 6144, Mid),
            (1024, 6144, 12288, Mid),
            (1024, 12288, 6144, Large),
            (2048, 6144, 12288, Large),
            (2048, 12288, 6144, Large),
        ];
        for (m, n, k, best) in measured {
            assert_eq!(choose_plain_wg_tile(m, n, k, 132), best, "{m} x {n} x {k}");
        }
        // Stream-K's one-row-tile region takes the 192-wide tile.
        for m in [1, 64, 128] {
            assert_eq!(choose_plain_wg_tile(m, 12288, 6144, 132), Mid);
        }
        // The small tile where neither wider one fills the SMs better.
        assert_eq!(choose_plain_wg_tile(200, 640, 4096, 132), Small);
    }

    #[test]
    fn the_mlp_pair_takes_the_192_tile_where_both_grids_are_at_most_four_waves() {
        let pair = |b| choose_pair_wg_tile(b, 6144, 12288, 132);
        for b in [256, 512, 1024] {
            assert_eq!(pair(b), WgTile::T128x192, "B = {b}");
        }
        assert_eq!(pair(2048), WgTile::T128x256);
        for b in [1, 64, 128] {
            assert_eq!(pair(b), WgTile::T128x128, "B = {b}");
        }
    }

    #[test]
    fn clusters_by_default_where_they_apply_and_refused_with_the_reason_when_forced() {
        use super::super::gemm::Layout;
        let big = GemmConfig::new(2048, 12288, 6144);
        let large = WgTile::T128x256;
        assert_eq!(
            cluster_choice(&big, large, 16, 1, false).unwrap(),
            Some("gemm_sm90_bf16_128x256_c2")
        );
        let f16 = big.input(InputType::F16);
        assert_eq!(
            cluster_choice(&f16, large, 16, 1, false).unwrap(),
            Some("gemm_sm90_f16_128x256_c2")
        );
        // Not by default: the small tile, one row tile, split-K, stream-K, transposed B, off.
        let t_b = big.layouts(Layout::RowMajor, Layout::Transposed);
        for (cfg, tile, tm, splits, sk) in [
            (big, WgTile::T128x128, 16, 1, false),
            (big, large, 1, 1, false),
            (big, large, 16, 2, false),
            (big, large, 16, 1, true),
            (t_b, large, 16, 1, false),
            (big.cluster(false), large, 16, 1, false),
        ] {
            assert_eq!(cluster_choice(&cfg, tile, tm, splits, sk).unwrap(), None);
        }
        // Forced: one row tile is allowed (the pair's second block idles); the rest are refused
        // with the reason.
        let forced = big.cluster(true);
        assert!(cluster_choice(&forced, large, 1, 1, false).unwrap().is_some());
        for (cfg, tile, splits, sk, why) in [
            (forced, WgTile::T128x128, 1, false, "128x256 tile"),
            (forced, large, 2, false, "split-K"),
            (forced, large, 1, true, "stream-K"),
            (t_b.cluster(true), large, 1, false, "transposed B"),
        ] {
            let e = cluster_choice(&cfg, tile, 16, splits, sk).unwrap_err().to_string();
            assert!(e.contains("cluster") && e.contains(why), "{e}");
        }
    }

    fn device(name: &str) -> DeviceInfo {
        DeviceInfo::hopper_for_tests(name)
    }

    #[test]
    fn weight_streaming_launches_take_each_devices_measured_depth() {
        let (h100, h200, other) = (
            device("NVIDIA H100 80GB HBM3"),
            device("NVIDIA H200"),
            device("NVIDIA GH200 480GB"),
        );
        let t96 = WgTile::T64x96.shape();
        let b64 = GemmConfig::new(64, 12288, 6144);
        assert_eq!(default_pipeline_depth(&h100, &b64, &t96), STREAMING_PIPELINE_DEPTH);
        // Swapped: the batch is N.
        let swapped = b64.swapped();
        assert_eq!(swapped.n, 64);
        assert_eq!(
            default_pipeline_depth(&h100, &swapped, &WgTile::T128x64.shape()),
            STREAMING_PIPELINE_DEPTH
        );
        // The H200: depth 6 at B = 64 and up to 16 rows, the whole ring between (B = 32 lost
        // there); a device measured nowhere keeps the whole ring.
        assert_eq!(default_pipeline_depth(&h200, &b64, &t96), H200_STREAMING_PIPELINE_DEPTH);
        let t16 = WgTile::T128x16.shape();
        for b in [1, 8, 16] {
            let c = GemmConfig::new(b, 12288, 6144).swapped();
            assert_eq!(default_pipeline_depth(&h200, &c, &t16), H200_STREAMING_PIPELINE_DEPTH);
            assert_eq!(default_pipeline_depth(&h100, &c, &t16), STREAMING_PIPELINE_DEPTH);
            assert_eq!(default_pipeline_depth(&other, &c, &t16), 0);
        }
        for b in [17, 32, 48, 63] {
            assert_eq!(default_pipeline_depth(&h200, &GemmConfig::new(b, 12288, 6144), &t96), 0);
        }
        // The H100: depth 5 up to 31 rows and at 64, depth 6 from 32 to 63 (session 35).
        for (b, depth) in [(17, 5), (31, 5), (32, 6), (40, 6), (56, 6), (63, 6), (64, 5)] {
            let c = GemmConfig::new(b, 12288, 6144);
            assert_eq!(default_pipeline_depth(&h100, &c, &t96), depth, "B = {b}");
        }
        assert_eq!(default_pipeline_depth(&other, &b64, &t96), 0);
        // Wider batches, and rings no deeper than the depth, keep the whole ring.
        assert_eq!(
            default_pipeline_depth(&h100, &GemmConfig::new(128, 12288, 6144), &t96),
            0
        );
        assert_eq!(default_pipeline_depth(&h100, &b64, &WgTile::T128x192.shape()), 0);
        // Stream-mode stages pin the whole ring, which the host accepts.
        let staged = whole_ring(b64, WgTile::T64x96);
        assert_eq!(staged.pipeline_depth, Some(t96.stages));
        assert!(pipeline_depth_ok(t96.stages, t96.stages));
    }

    #[test]
    fn path2_default_keeps_the_16_column_tile_where_it_is_the_default() {
        let (h200, gh200) = (device("NVIDIA H200"), device("NVIDIA GH200 480GB"));
        assert!(tile16_default_on(&h200) && !tile16_default_on(&gh200));
        let b1 = GemmConfig::new(1, 12288, 6144);
        assert_eq!(path2_default_config(&b1, &h200).skinny, None);
        assert_eq!(path2_default_config(&b1, &gh200).skinny, Some(false));
    }

    #[test]
    fn small_batches_take_the_16_column_tile_on_the_devices_measured() {
        use super::super::gemm::Epilogue;
        let (h200, h100) = (device("NVIDIA H200"), device("NVIDIA H100 80GB HBM3"));
        // The GPT-3 MLP: GeMM2's 96 weight tiles whole, GeMM1's 48 split in two.
        for b in [1, 8, 16] {
            let g2 = choose_tile16(&GemmConfig::new(b, 12288, 6144), &h200).expect("GeMM2");
            assert_eq!(
                (g2.wg_tile, g2.swap_ab, g2.split_k, g2.stream_k),
                (Some(WgTile::T128x16), Some(true), Some(1), Some(false))
            );
            let g1 = GemmConfig::new(b, 6144, 12288).epilogue(Epilogue::Gelu);
            assert_eq!(choose_tile16(&g1, &h200).expect("GeMM1").split_k, Some(2));
            assert_eq!(choose_tile16(&g1, &h100).expect("H100").split_k, Some(2));
            // A device measured nowhere keeps the skinny kernels.
            assert!(choose_tile16(&g1, &device("NVIDIA GH200 480GB")).is_none());
        }
        // Past 16 rows, with anything forced, with the skinny kernels' width asked for, or with
        // units that fill under half the SMs (one tile of a 64-wide weight) or over all of them:
        // not the default.
        let b1 = GemmConfig::new(1, 12288, 6144);
        for c in [
            GemmConfig::new(17, 12288, 6144),
            b1.skinny(false),
            b1.skinny(true),
            b1.split_k(2),
            b1.skinny_cols(128),
            GemmConfig::new(8, 64, 65536),
            GemmConfig::new(1, 32768, 4096),
        ] {
            assert!(choose_tile16(&c, &h200).is_none(), "{c:?}");
        }
        // A forced depth keeps the tile (a depth is not a kernel family).
        assert_eq!(
            choose_tile16(&b1.pipeline_depth(5), &h200).and_then(|c| c.wg_tile),
            Some(WgTile::T128x16)
        );
    }

    #[test]
    fn skinny_products_run_swapped_on_the_64_wide_tile() {
        // The GPT-3 MLP's B = 1 and 64 GeMMs (and anything up to 64 rows with a 128-row tile's
        // width to swap in); not B = 128 up, nor products too narrow to fill a swapped tile.
        for (m, n, swap) in [
            (1, 6144, true),
            (64, 12288, true),
            (37, 128, true),
            (65, 6144, false),
            (128, 12288, false),
            (64, 127, false),
            (8, 8, false),
        ] {
            assert_eq!(choose_swap_ab(m, n), swap, "{m} x {n}");
        }
        let cfg = GemmConfig::new(64, 6144, 12288).layouts(
            super::super::gemm::Layout::Transposed,
            super::super::gemm::Layout::RowMajor,
        );
        let s = cfg.swapped();
        assert_eq!((s.m, s.n, s.k), (6144, 64, 12288));
        assert_eq!(
            (s.a_layout, s.b_layout),
            (
                super::super::gemm::Layout::Transposed,
                super::super::gemm::Layout::RowMajor
            ),
            "A' = B^T from row-major B's storage; B' = A^T from transposed A's"
        );
        assert_eq!(s.swapped(), cfg);
        // Stream-K on the swapped tile for a single row, not for B = 64 or when forced.
        assert!(swapped_stream_k(&GemmConfig::new(1, 6144, 12288)));
        assert!(!swapped_stream_k(&GemmConfig::new(64, 6144, 12288)));
        assert!(!swapped_stream_k(&GemmConfig::new(1, 6144, 12288).split_k(2)));
        assert!(!swapped_stream_k(&GemmConfig::new(1, 6144, 12288).stream_k(false)));
        let cfg = GemmConfig::new(64, 12288, 6144);
        assert_eq!(stream_k_blocks(&cfg, 132).unwrap(), 132);
        assert_eq!(stream_k_blocks(&cfg.stream_k_ranges(128), 132).unwrap(), 128);
        assert_eq!(stream_k_blocks(&cfg.stream_k_ranges(500), 132).unwrap(), 132);
        assert_eq!(cfg.stream_k_ranges(96).stream_k, Some(true));
        for (bad, why) in [
            (cfg.stream_k_ranges(0), "zero ranges"),
            (cfg.stream_k_ranges(128).split_k(2), "split-K"),
            (cfg.stream_k_ranges(128).stream_k(false), "forced off"),
        ] {
            let e = stream_k_blocks(&bad, 132).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        assert_eq!(WgTile::from_name("128x64"), Some(WgTile::T128x64));
        assert_eq!(WgTile::from_name("64x64"), None);
        assert_eq!(WgTile::parse("wg128x64", "wg").unwrap(), WgTile::T128x64);
        let e = WgTile::parse("wg64x64", "wg").unwrap_err().to_string();
        assert!(
            e.contains("`wg64x64`") && e.contains("wg128x256, wg128x192, wg128x128, wg64x96, wg128x64, wg128x16"),
            "{e}"
        );
        assert!(WgTile::T128x64.shape().is_valid());
        assert_eq!(
            WgTile::T128x64.stream_kernel_name(InputType::Bf16),
            Some("gemm_sm90_bf16_128x64_stream")
        );
        assert_eq!(WgTile::T128x64.cluster_kernel_name(InputType::Bf16), None);
        // The 96-column tile: unswapped, 32-column boxes of B, a bf16 stream-mode stage.
        assert_eq!(WgTile::parse("wg64x96", "wg").unwrap(), WgTile::T64x96);
        assert!(WgTile::T64x96.shape().is_valid());
        assert_eq!(WgTile::T64x96.kernel_name(InputType::F16), "gemm_sm90_f16_64x96");
        assert_eq!(
            WgTile::T64x96.stream_kernel_name(InputType::Bf16),
            Some("gemm_sm90_bf16_64x96_stream")
        );
        assert_eq!(WgTile::T64x96.stream_kernel_name(InputType::F16), None);
        assert_eq!(WgTile::T64x96.cluster_kernel_name(InputType::Bf16), None);
        assert_eq!(WgTile::T64x96.shape().b_swizzle_bytes(false), 64);
        assert_eq!(WgTile::T64x96.shape().tiles(64, 12288), (1, 128));
        assert_eq!(WgTile::T64x96.shape().tiles(64, 6144), (1, 64));
        // The 16-column tile: swapped only, M <= 16.
        assert_eq!(WgTile::parse("wg128x16", "wg").unwrap(), WgTile::T128x16);
        assert_eq!(WgTile::T128x16.kernel_name(InputType::Bf16), "gemm_sm90_bf16_128x16");
        assert_eq!(
            WgTile::T128x16.stream_kernel_name(InputType::Bf16),
            Some("gemm_sm90_bf16_128x16_stream")
        );
        assert!(check_swapped_tile(WgTile::T128x16, 16).is_ok());
        assert!(check_swapped_tile(WgTile::T128x64, 64).is_ok());
        // Session 32's landing refused the 128 x 64 tile past 64 rows, which broke the MLP's
        // swapped stream stages at B = 100 (GPU test `mlp::path2_swapped…`, session 33).
        assert!(check_swapped_tile(WgTile::T128x64, 100).is_ok());
        let e = check_swapped_tile(WgTile::T128x16, 17).unwrap_err().to_string();
        assert!(e.contains("at most 16 rows, not 17"), "{e}");
        let e = check_swapped_tile(WgTile::T64x96, 8).unwrap_err().to_string();
        assert!(e.contains("not 64x96"), "{e}");
        let e = check_unswapped_tile(WgTile::T128x16, 8).unwrap_err().to_string();
        assert!(e.contains("swapped products only"), "{e}");
        assert!(check_unswapped_tile(WgTile::T64x96, 64).is_ok());
        let e = check_unswapped_tile(WgTile::T64x96, 65).unwrap_err().to_string();
        assert!(e.contains("at most 64 rows, not 65"), "{e}");
        // Never picked by the wide tiles' heuristics (the 64 x 96 tile has its own rule,
        // `choose_tile96`; the 128 x 16 tile is forced only).
        for (m, n, k) in [
            (64, 12288, 6144),
            (64, 6144, 12288),
            (256, 12288, 6144),
            (8192, 8192, 8192),
        ] {
            for t in [WgTile::T64x96, WgTile::T128x16] {
                assert_ne!(choose_plain_wg_tile(m, n, k, 132), t);
                assert_ne!(choose_wg_tile(m, n, 132), t);
            }
        }
    }

    #[test]
    fn tma_needs_aligned_operands() {
        let p = GemmParams::dense(0x1000, 0x2000, 0x3000, 0, 100, 64, 40, 0);
        assert!(operands_fit(&p));
        let odd_k = GemmParams::dense(0x1000, 0x2000, 0x3000, 0, 100, 64, 41, 0);
        assert!(!operands_fit(&odd_k));
        let unaligned = GemmParams::dense(0x1008, 0x2000, 0x3000, 0, 100, 64, 40, 0);
        assert!(!operands_fit(&unaligned));
    }

    #[test]
    fn kernel_names_are_in_the_entry_list() {
        for t in WgTile::ALL {
            for i in [InputType::Bf16, InputType::F16] {
                assert!(crate::kernels::GEMM_SM90_KERNELS.contains(&t.kernel_name(i)));
            }
        }
    }
}
