//! [`MlpKernel`]: which GeMM kernel family the MLP's two stages run. Path 1 (`cp.async` +
//! `mma.sync`, one block per tile) runs everywhere; path 2 (sm_90a: TMA + `wgmma`,
//! warp-specialized, persistent blocks taking tiles from the stage's order) is the default
//! where the device runs it; the skinny kernels (the weight streamed through a `cp.async` ring, one
//! balanced range of it per resident block, sm_80+) are the default for batches up to 16.
//! Both GeMMs use the same kernel, so their row tiles line up for RowSync.

use crate::error::Result;
use crate::ops::gemm::{Epilogue, GemmConfig};
use crate::ops::gemm::{InputType, TileConfig};
use crate::ops::gemm_skinny;
use crate::ops::gemm_sm90::{self, choose_pair_wg_tile, WgTile};
use crate::runtime::{Context, DeviceInfo};
use cusync_shared::gemm_sm90::WG_THREADS;
use cusync_shared::skinny::{SKINNY_STAGE_SHAPE, SKINNY_THREADS};
use cusync_shared::Grid;

/// The GeMM kernel family and tile both MLP stages use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MlpKernel {
    /// Path 1 with this tile: one block per tile.
    Path1(TileConfig),
    /// Path 2 with this tile: persistent blocks.
    Path2(WgTile),
    /// The skinny kernels (`M <= 16`, bf16, row-major; `crate::ops::gemm_skinny`): each
    /// resident block streams one balanced range of the weight; a stage's tiles are the
    /// output's 64-column blocks, posted by whichever block completes one.
    Skinny,
}

/// The devices whose MLP stages at small batches run the 128 x 16 tile in the skinny
/// kernels' place ([`MlpKernel::tile16_stages_are_default`]), by a word of their name
/// (`gemm_sm90::device_named`). Measured on an H100 (docs/perf-notes.md, session 34 runs 5–6,
/// side by side, RowSync): the GPT-3 MLP at B = 1 in 109.7 µs at depth 5 (0.990 of cuBLAS under
/// a CUDA graph) and 117.4 µs on the whole ring, against the skinny stages' 122.7 / 122.9 µs
/// (0.906); B = 16 110.8 µs (0.984) against 124.1 (0.889). Measured on the H200 (session 37
/// run 2, `scripts/exp/session35b.sh`, one round, side by side per batch): StreamSync on the
/// 128 x 16 stages 83.0–84.5 µs against the skinny stages' 88.6–91.6 at B = 1, 8 and 16, and
/// the faster policy 84.4–86.3 µs against 85.4–88.2 (0.7–2.7% ahead at each batch).
pub const TILE16_STAGE_DEVICES: &[&str] = &["H100", "H200"];

/// The largest batch the MLP's skinny stages take (their stream-mode entry point is the
/// one-`m16`-tile kernel).
pub const SKINNY_STAGE_MAX_BATCH: usize = 16;

impl From<TileConfig> for MlpKernel {
    fn from(t: TileConfig) -> Self {
        MlpKernel::Path1(t)
    }
}

impl From<WgTile> for MlpKernel {
    fn from(t: WgTile) -> Self {
        MlpKernel::Path2(t)
    }
}

impl MlpKernel {
    /// The default for `batch x ffn` on `cx`: the 128 x 16 tile's swapped stages where the
    /// device was measured for them ([`MlpKernel::tile16_stages_are_default`]), else the
    /// skinny kernels where both GeMMs default to them ([`MlpKernel::skinny_is_default`]),
    /// else path 2 where the device runs it ([`MlpKernel::default_path2`]), else path 1's
    /// heuristic tile.
    pub fn default_for(cx: &Context, batch: usize, ffn: usize, hidden: usize) -> Self {
        let sms = cx.info().sm_count;
        let path2 = gemm_sm90::device_supports(cx);
        if path2 && Self::tile16_stages_are_default(cx.info(), batch, ffn, hidden) {
            MlpKernel::Path2(WgTile::T128x16)
        } else if Self::skinny_is_default(batch, ffn, hidden) {
            MlpKernel::Skinny
        } else if path2 {
            Self::default_path2(batch, ffn, hidden, sms)
        } else {
            MlpKernel::Path1(crate::ops::gemm::GemmConfig::new(batch, ffn, hidden).resolve_tile(sms))
        }
    }

    /// Whether the MLP's stages on `device` run the 128 x 16 tile swapped by default (at the
    /// device's measured streaming depth, `gemm_sm90::default_pipeline_depth`): the device is
    /// one of [`TILE16_STAGE_DEVICES`] and plain launches of both GeMMs take the tile
    /// ([`gemm_sm90::choose_tile16`], where the skinny kernels would be the default).
    pub fn tile16_stages_are_default(device: &DeviceInfo, batch: usize, ffn: usize, hidden: usize) -> bool {
        let listed = gemm_sm90::device_listed(device, TILE16_STAGE_DEVICES);
        let cfg1 = GemmConfig::new(batch, ffn, hidden).epilogue(Epilogue::Gelu);
        let cfg2 = GemmConfig::new(batch, hidden, ffn);
        listed
            && batch <= SKINNY_STAGE_MAX_BATCH
            && gemm_sm90::choose_tile16(&cfg1, device).is_some()
            && gemm_sm90::choose_tile16(&cfg2, device).is_some()
    }

    /// Whether the skinny kernels are the default for the MLP's two GeMMs: batch at most
    /// [`SKINNY_STAGE_MAX_BATCH`] and both GeMMs' plain launches default to them
    /// ([`gemm_skinny::is_default_for`]).
    pub fn skinny_is_default(batch: usize, ffn: usize, hidden: usize) -> bool {
        let cfg1 = GemmConfig::new(batch, ffn, hidden).epilogue(Epilogue::Gelu);
        let cfg2 = GemmConfig::new(batch, hidden, ffn);
        batch <= SKINNY_STAGE_MAX_BATCH && gemm_skinny::is_default_for(&cfg1) && gemm_skinny::is_default_for(&cfg2)
    }

    /// The path-2 default: both stages swapped on the skinny tile (`wg128x64`) where a plain
    /// launch of both GeMMs would swap ([`gemm_sm90::choose_swap_ab`]: batch at most 64), else the
    /// pair's tile ([`choose_pair_wg_tile`]). Measured on the H200 (docs/perf-notes.md, session
    /// 10, run 2): the GPT-3 MLP's best policy at B = 1 / 8 / 64 takes 109.8 / 101.4 / 99.8 µs
    /// swapped against 151.5 / 145.1 / 121.7 on the 128 x 128 tile; at B = 128 swapped loses
    /// (167.6 against 106.1).
    ///
    /// From B = 17 to 64, where plain launches of both GeMMs take the 64 x 96 tile
    /// ([`gemm_sm90::choose_tile96`]), both stages run it (`wg64x96`). Measured on an H100
    /// (docs/perf-notes.md, session 33 run 2, two rounds): the GPT-3 MLP's RowSync at B = 64
    /// 120.0 / 120.6 µs against the swapped stages' 129.7 / 129.8 (0.937 / 0.935 of cuBLAS
    /// against 0.870 / 0.869), at B = 32 121.4 / 122.2 against 126.6 / 126.7.
    pub fn default_path2(batch: usize, ffn: usize, hidden: usize, sm_count: u32) -> Self {
        let tile96 = |m, n, k| gemm_sm90::choose_tile96(&GemmConfig::new(m, n, k), sm_count).is_some();
        if tile96(batch, ffn, hidden) && tile96(batch, hidden, ffn) {
            return MlpKernel::Path2(WgTile::T64x96);
        }
        if gemm_sm90::choose_swap_ab(batch, ffn) && gemm_sm90::choose_swap_ab(batch, hidden) {
            MlpKernel::Path2(WgTile::T128x64)
        } else {
            MlpKernel::Path2(choose_pair_wg_tile(batch, ffn, hidden, sm_count))
        }
    }

    /// Parses `256x128`, `128x128`, `64x64` (path 1), `wg128x256`, `wg128x192`, `wg128x128`,
    /// `wg64x96`, `wg128x64`, `wg128x16` (path 2) or `skinny`.
    pub fn parse(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        if lower == "skinny" {
            return Ok(MlpKernel::Skinny);
        }
        if !lower.starts_with("wg") {
            return TileConfig::parse(&lower).map(MlpKernel::Path1);
        }
        let tile = WgTile::parse(&lower, "wg")?;
        if tile.stream_kernel_name(crate::ops::gemm::InputType::Bf16).is_none() {
            let stages: Vec<String> = WgTile::ALL
                .iter()
                .filter(|t| t.stream_kernel_name(crate::ops::gemm::InputType::Bf16).is_some())
                .map(|t| format!("wg{}", t.name()))
                .collect();
            return Err(crate::error::Error::InvalidArgument(format!(
                "path-2 tile `{s}` has no stream-mode stage: use {}",
                stages.join(", ")
            )));
        }
        Ok(MlpKernel::Path2(tile))
    }

    /// "256x128" (path 1), "wg128x256" (path 2) or "skinny".
    pub fn name(self) -> String {
        match self {
            MlpKernel::Path1(t) => t.name().to_string(),
            MlpKernel::Path2(t) => format!("wg{}", t.name()),
            MlpKernel::Skinny => "skinny".to_string(),
        }
    }

    /// Whether this is the skinny family.
    pub fn is_skinny(self) -> bool {
        self == MlpKernel::Skinny
    }

    /// Whether this is path 2.
    pub fn is_path2(self) -> bool {
        matches!(self, MlpKernel::Path2(_))
    }

    /// Whether both GeMMs run swapped (`C^T = B^T A^T` on the 128 x 64 tile, or the 128 x 16
    /// one for batches of at most 16 rows, as the plain small-batch products do): the kernel's
    /// tile `(tm, tn)` covers the stage's (untransposed) tile `(tn, tm)`, of 64 (or 16) rows of
    /// X by 128 columns of W.
    pub fn is_swapped(self) -> bool {
        matches!(self, MlpKernel::Path2(WgTile::T128x64 | WgTile::T128x16))
    }

    /// The stage's block tile `(bm, bn)` in C's rows and columns (a swapped kernel's tile
    /// transposed: 64 x 128).
    pub fn tile_dims(self) -> (u32, u32) {
        match self {
            MlpKernel::Path1(t) => (t.shape().bm, t.shape().bn),
            MlpKernel::Path2(t) if self.is_swapped() => (t.shape().bn, cusync_shared::gemm_sm90::WG_BM),
            MlpKernel::Path2(t) => (cusync_shared::gemm_sm90::WG_BM, t.shape().bn),
            MlpKernel::Skinny => (SKINNY_STAGE_MAX_BATCH as u32, SKINNY_STAGE_SHAPE.cols()),
        }
    }

    /// The tile grid of an `m x n` output (x: row tiles, y: column tiles).
    pub fn grid(self, m: u32, n: u32) -> Grid {
        let (bm, bn) = self.tile_dims();
        Grid::covering(m, n, bm, bn, 1)
    }

    /// The stream-mode stage entry point (bf16).
    pub fn stream_kernel(self) -> &'static str {
        match self {
            MlpKernel::Path1(t) => super::stream_kernel(t),
            MlpKernel::Path2(t) => t
                .stream_kernel_name(InputType::Bf16)
                .expect("every path-2 tile has a bf16 stream entry"),
            MlpKernel::Skinny => "gemm_skinny_bf16_m16_stream",
        }
    }

    /// Threads per block.
    pub fn threads(self) -> u32 {
        match self {
            MlpKernel::Path1(t) => t.shape().threads(),
            MlpKernel::Path2(_) => WG_THREADS,
            MlpKernel::Skinny => SKINNY_THREADS,
        }
    }

    /// Dynamic shared memory per block.
    pub fn smem_bytes(self) -> u32 {
        match self {
            MlpKernel::Path1(t) => t.shape().smem_bytes(),
            MlpKernel::Path2(t) => t.shape().smem_bytes(),
            MlpKernel::Skinny => SKINNY_STAGE_SHAPE.smem_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_batches_run_swapped_by_default() {
        let pick = |b| MlpKernel::default_path2(b, 6144, 12288, 132);
        for b in [1, 8, 16] {
            assert_eq!(pick(b), MlpKernel::Path2(WgTile::T128x64), "B = {b}");
            assert!(pick(b).is_swapped());
        }
        // B = 17 to 64: the 64 x 96 tile, as plain launches of both GeMMs take it.
        for b in [17, 32, 64] {
            assert_eq!(pick(b), MlpKernel::Path2(WgTile::T64x96), "B = {b}");
            assert!(!pick(b).is_swapped());
        }
        // Too few 64 x 96 tiles to fill the SMs (a narrow MLP): the swapped tile stays.
        assert_eq!(
            MlpKernel::default_path2(32, 1024, 776, 132),
            MlpKernel::Path2(WgTile::T128x64)
        );
        assert_eq!(pick(65), MlpKernel::Path2(WgTile::T128x128));
        assert_eq!(pick(128), MlpKernel::Path2(WgTile::T128x128));
        assert_eq!(pick(1024), MlpKernel::Path2(WgTile::T128x192));
        // A narrow layer (under one 128-row tile of the weight's columns) is not swapped.
        assert_eq!(
            MlpKernel::default_path2(8, 64, 4096, 132),
            MlpKernel::Path2(choose_pair_wg_tile(8, 64, 4096, 132))
        );
    }

    #[test]
    fn small_batches_take_the_16_column_stages_on_the_devices_measured() {
        let (h100, h200) = (
            DeviceInfo::hopper_for_tests("NVIDIA H100 80GB HBM3"),
            DeviceInfo::hopper_for_tests("NVIDIA H200"),
        );
        let other = DeviceInfo::hopper_for_tests("NVIDIA GH100 engineering sample");
        for b in [1, 8, 16] {
            assert!(MlpKernel::tile16_stages_are_default(&h100, b, 6144, 12288), "B = {b}");
            assert!(MlpKernel::tile16_stages_are_default(&h200, b, 6144, 12288), "B = {b}");
            // A device not measured keeps the skinny stages.
            assert!(!MlpKernel::tile16_stages_are_default(&other, b, 6144, 12288), "B = {b}");
        }
        // Past 16 rows, or a narrow MLP whose weight tiles fill under half the SMs: not.
        assert!(!MlpKernel::tile16_stages_are_default(&h100, 17, 6144, 12288));
        assert!(!MlpKernel::tile16_stages_are_default(&h100, 8, 1024, 776));
        assert!(MlpKernel::Path2(WgTile::T128x16).is_swapped());
        assert_eq!(MlpKernel::Path2(WgTile::T128x16).tile_dims(), (16, 128));
    }

    #[test]
    fn names_parse_back() {
        for k in [
            MlpKernel::Path1(TileConfig::T256x128),
            MlpKernel::Path1(TileConfig::T64x64),
            MlpKernel::Path2(WgTile::T128x256),
            MlpKernel::Path2(WgTile::T128x128),
            MlpKernel::Path2(WgTile::T128x192),
            MlpKernel::Path2(WgTile::T128x64),
        ] {
            assert_eq!(MlpKernel::parse(&k.name()).unwrap(), k);
        }
        assert!(MlpKernel::parse("wg64x64").is_err());
        assert_eq!(MlpKernel::parse("Skinny").unwrap(), MlpKernel::Skinny);
        assert_eq!(MlpKernel::parse(&MlpKernel::Skinny.name()).unwrap(), MlpKernel::Skinny);
        // The skinny tile's stage runs swapped: its stage tiles are 64 rows by 128 columns.
        let swapped = MlpKernel::parse("wg128x64").unwrap();
        assert!(swapped.is_swapped() && !MlpKernel::Path2(WgTile::T128x128).is_swapped());
        assert_eq!(swapped.tile_dims(), (64, 128));
        assert_eq!(swapped.grid(100, 6144), Grid::new(2, 48, 1));
        assert_eq!(swapped.stream_kernel(), "gemm_sm90_bf16_128x64_stream");
        assert_eq!(MlpKernel::Path2(WgTile::T128x256).grid(300, 6144), Grid::new(3, 24, 1));
        assert_eq!(MlpKernel::Path2(WgTile::T128x128).tile_dims(), (128, 128));
        assert_eq!(MlpKernel::Path2(WgTile::T128x192).grid(512, 6144), Grid::new(4, 32, 1));
        assert_eq!(
            MlpKernel::Path2(WgTile::T128x256).stream_kernel(),
            "gemm_sm90_bf16_128x256_stream"
        );
    }

    #[test]
    fn the_skinny_stages_are_the_default_up_to_batch_16_and_tile_column_blocks() {
        for b in [1, 8, 16] {
            assert!(MlpKernel::skinny_is_default(b, 6144, 12288), "B = {b}");
        }
        for b in [17, 64, 1024] {
            assert!(!MlpKernel::skinny_is_default(b, 6144, 12288), "B = {b}");
        }
        // A weight under 2^20 elements stays on the tiled kernels.
        assert!(!MlpKernel::skinny_is_default(8, 256, 1024));
        let k = MlpKernel::Skinny;
        assert!(k.is_skinny() && !k.is_path2() && !k.is_swapped());
        assert_eq!(
            k.grid(8, 6144),
            cusync_shared::skinny::stage_grid(6144, SKINNY_STAGE_SHAPE)
        );
        assert_eq!(k.grid(16, 12288), Grid::new(1, 192, 1));
        assert_eq!(k.stream_kernel(), "gemm_skinny_bf16_m16_stream");
    }
}
