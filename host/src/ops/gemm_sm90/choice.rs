//! Path 2's choices for a problem: the tile, swapping A and B, split-K and stream-K, clusters,
//! and the pipeline depth, from each device's measurements (docs/perf-notes.md), with the
//! checks that refuse a forced choice a kernel cannot run.

use super::{L2Promotion, WgTile};
use crate::error::{Error, Result};
use crate::ops::gemm::GemmConfig;
use crate::runtime::DeviceInfo;
use cusync_shared::gemm_sm90::{choose_split_k, pipeline_depth_ok, WgTileShape, WG_TILE_64X96};

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
/// 64 x 96 tile instead ([`choose_tile96`], which [`crate::ops::gemm::Gemm::new`] asks first).
pub fn choose_swap_ab(m: usize, n: usize) -> bool {
    m <= SWAP_AB_MAX_M && n >= 128
}

/// Rows from which plain launches run on the 64 x 96 tile by default ([`choose_tile96`]);
/// below, the skinny kernels are the default ([`crate::ops::gemm_skinny::SKINNY_DEFAULT_MAX_M`]).
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
/// ([`crate::ops::gemm_skinny::choose_skinny`]: at most 16 rows), nothing picks a kernel family or
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
    if !listed || !free || !crate::ops::gemm_skinny::choose_skinny(cfg) || device.sm_count == 0 {
        return None;
    }
    let (tiles, splits) = tile16_units(cfg, device.sm_count)?;
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

/// The 128 x 16 tile's units of `cfg`'s swapped product on `sm_count` SMs: its tiles (the
/// weight's 128-row tiles) and the split-K factor of the default launch, the largest of
/// `1..=`[`TILE16_MAX_SPLIT_K`] whose units fit the SMs (`None` when whole tiles overfill them).
fn tile16_units(cfg: &GemmConfig, sm_count: u32) -> Option<(u32, u32)> {
    let shape = WgTile::T128x16.shape();
    let swapped = cfg.swapped();
    let (tm, tn) = shape.tiles(swapped.m as u32, swapped.n as u32);
    let tiles = tm * tn;
    let k_steps = shape.k_steps(cfg.k as u32).max(1);
    let splits = (1..=TILE16_MAX_SPLIT_K.min(k_steps))
        .rev()
        .find(|s| tiles * s <= sm_count)?;
    Some((tiles, splits))
}

/// `cfg` with the 128 x 16 tile pinned (`--kernel wg128x16`) and no work division forced: the
/// default launch's division ([`choose_tile16`]: split-K where its units fit the SMs, stream-K
/// off), so pinning the tile the library picks gives the library's launch. Without it a
/// pinned swapped tile takes stream-K over every SM ([`swapped_stream_k`]), which ran GeMM1 at
/// B = 1 (48 tiles) 6% slower on the H100 (docs/perf-notes.md, session 42 run 2: 0.0604 /
/// 0.0602 ms against split-K 2's 0.0567 / 0.0568). `cfg` is returned as it is where a division
/// is forced or whole tiles overfill the SMs.
pub fn pinned_tile16_division(cfg: &GemmConfig, sm_count: u32) -> GemmConfig {
    if cfg.split_k.is_some() || cfg.stream_k.is_some() || sm_count == 0 {
        return *cfg;
    }
    match tile16_units(cfg, sm_count) {
        Some((_, splits)) => cfg.split_k(splits).stream_k(false),
        None => *cfg,
    }
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

/// The pipeline depth (stages of the ring in use, [`cusync_shared::gemm_sm90::TmaGemmParams::pipeline_depth`]; 0 is the
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
    } else if cfg.b_layout == crate::ops::gemm::Layout::Transposed {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::InputType;

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
        use crate::ops::gemm::Layout;
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
        use crate::ops::gemm::Epilogue;
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
        // The tile pinned with nothing else forced: the default's division, not stream-K.
        for b in [1, 8, 16] {
            let g1 = GemmConfig::new(b, 6144, 12288).wg_tile(WgTile::T128x16);
            let pinned = pinned_tile16_division(&g1, 132);
            assert_eq!((pinned.split_k, pinned.stream_k), (Some(2), Some(false)), "B = {b}");
            assert!(!swapped_stream_k(&pinned));
            let g2 = pinned_tile16_division(&GemmConfig::new(b, 12288, 6144).wg_tile(WgTile::T128x16), 132);
            assert_eq!((g2.split_k, g2.stream_k), (Some(1), Some(false)), "B = {b}");
        }
        // A forced division, or whole tiles past the SMs (256 of a 32768-row weight): as given.
        let g1 = GemmConfig::new(1, 6144, 12288).wg_tile(WgTile::T128x16);
        for c in [
            g1.split_k(1),
            g1.stream_k(true),
            g1.stream_k_ranges(96),
            GemmConfig::new(1, 32768, 4096),
        ] {
            assert_eq!(pinned_tile16_division(&c, 132), c, "{c:?}");
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
        let cfg = GemmConfig::new(64, 6144, 12288)
            .layouts(crate::ops::gemm::Layout::Transposed, crate::ops::gemm::Layout::RowMajor);
        let s = cfg.swapped();
        assert_eq!((s.m, s.n, s.k), (6144, 64, 12288));
        assert_eq!(
            (s.a_layout, s.b_layout),
            (crate::ops::gemm::Layout::Transposed, crate::ops::gemm::Layout::RowMajor),
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
}
