//! [`MlpKernel`]: which GeMM kernel family the MLP's two stages run. Path 1 (`cp.async` +
//! `mma.sync`, one block per tile) runs everywhere; path 2 (sm_90a: TMA + `wgmma`,
//! warp-specialized, persistent blocks taking tiles from the stage's order) is the default
//! where the device runs it. Both GeMMs use the same kernel, so their row tiles line up for
//! RowSync.

use crate::error::Result;
use crate::ops::gemm::{InputType, TileConfig};
use crate::ops::gemm_sm90::{self, choose_pair_wg_tile, WgTile};
use crate::runtime::Context;
use cusync_shared::gemm_sm90::WG_THREADS;
use cusync_shared::Grid;

/// The GeMM kernel family and tile both MLP stages use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MlpKernel {
    /// Path 1 with this tile: one block per tile.
    Path1(TileConfig),
    /// Path 2 with this tile: persistent blocks.
    Path2(WgTile),
}

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
    /// The default for `batch x ffn` on `cx`: path 2 where the device runs it (the pair's tile,
    /// [`choose_pair_wg_tile`]), else path 1's heuristic tile.
    pub fn default_for(cx: &Context, batch: usize, ffn: usize, hidden: usize) -> Self {
        let sms = cx.info().sm_count;
        if gemm_sm90::device_supports(cx) {
            MlpKernel::Path2(choose_pair_wg_tile(batch, ffn, hidden, sms))
        } else {
            MlpKernel::Path1(crate::ops::gemm::GemmConfig::new(batch, ffn, hidden).resolve_tile(sms))
        }
    }

    /// Parses `256x128`, `128x128`, `64x64` (path 1) or `wg128x256`, `wg128x192`, `wg128x128`
    /// (path 2).
    pub fn parse(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
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

    /// "256x128" (path 1) or "wg128x256" (path 2).
    pub fn name(self) -> String {
        match self {
            MlpKernel::Path1(t) => t.name().to_string(),
            MlpKernel::Path2(t) => format!("wg{}", t.name()),
        }
    }

    /// Whether this is path 2.
    pub fn is_path2(self) -> bool {
        matches!(self, MlpKernel::Path2(_))
    }

    /// Block tile `(bm, bn)`.
    pub fn tile_dims(self) -> (u32, u32) {
        match self {
            MlpKernel::Path1(t) => (t.shape().bm, t.shape().bn),
            MlpKernel::Path2(t) => (cusync_shared::gemm_sm90::WG_BM, t.shape().bn),
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
        }
    }

    /// Threads per block.
    pub fn threads(self) -> u32 {
        match self {
            MlpKernel::Path1(t) => t.shape().threads(),
            MlpKernel::Path2(_) => WG_THREADS,
        }
    }

    /// Dynamic shared memory per block.
    pub fn smem_bytes(self) -> u32 {
        match self {
            MlpKernel::Path1(t) => t.shape().smem_bytes(),
            MlpKernel::Path2(t) => t.shape().smem_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for k in [
            MlpKernel::Path1(TileConfig::T256x128),
            MlpKernel::Path1(TileConfig::T64x64),
            MlpKernel::Path2(WgTile::T128x256),
            MlpKernel::Path2(WgTile::T128x128),
            MlpKernel::Path2(WgTile::T128x192),
        ] {
            assert_eq!(MlpKernel::parse(&k.name()).unwrap(), k);
        }
        assert!(MlpKernel::parse("wg64x64").is_err());
        // The skinny tile has no stream-mode stage.
        assert!(MlpKernel::parse("wg128x64")
            .unwrap_err()
            .to_string()
            .contains("no stream-mode stage"));
        assert_eq!(MlpKernel::Path2(WgTile::T128x256).grid(300, 6144), Grid::new(3, 24, 1));
        assert_eq!(MlpKernel::Path2(WgTile::T128x128).tile_dims(), (128, 128));
        assert_eq!(MlpKernel::Path2(WgTile::T128x192).grid(512, 6144), Grid::new(4, 32, 1));
        assert_eq!(
            MlpKernel::Path2(WgTile::T128x256).stream_kernel(),
            "gemm_sm90_bf16_128x256_stream"
        );
    }
}
