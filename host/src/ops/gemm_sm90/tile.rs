//! [`WgTile`]: the path-2 block tiles and their entry points (plain, clusters of two,
//! stream-mode stages).

use crate::error::{Error, Result};
use crate::ops::gemm::InputType;
use cusync_shared::gemm_sm90::{
    WgTileShape, WG_TILE_128X128, WG_TILE_128X16, WG_TILE_128X192, WG_TILE_128X256, WG_TILE_128X64, WG_TILE_64X96,
};

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
    /// 128 x 64 x 64, 9 stages: skinny products (M <= 64) run swapped ([`super::choose_swap_ab`]),
    /// the batch as the tile's 64 columns.
    T128x64,
    /// 64 x 96 x 64, 11 stages: small batches (M <= 64) unswapped, 96 weight columns a tile (the GPT-3
    /// MLP's widths give 128 tiles or 64 tiles of two K splits); the plain default from 17 rows
    /// where its units fill the SMs ([`super::choose_tile96`],
    /// [`cusync_shared::gemm_sm90::WG_TILE_64X96`]).
    T64x96,
    /// 128 x 16 x 64, 12 stages: products with M <= 16 run swapped, the batch as the tile's
    /// 16 columns (a deeper pipeline than the 128 x 64 tile's); the plain default on the devices
    /// measured for it ([`super::choose_tile16`],
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
            // The small batches unswapped (M <= 64): the MLP's stages from B = 17 to 64.
            (InputType::Bf16, WgTile::T64x96) => Some("gemm_sm90_bf16_64x96_stream"),
            // Batches of at most 16 rows, swapped like the 128 x 64 stage: the MLP's stages
            // on the devices `crate::mlp::kernel::TILE16_STAGE_DEVICES` lists.
            (InputType::Bf16, WgTile::T128x16) => Some("gemm_sm90_bf16_128x16_stream"),
            (InputType::F16, _) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_are_in_the_entry_list() {
        for t in WgTile::ALL {
            for i in [InputType::Bf16, InputType::F16] {
                assert!(crate::kernels::GEMM_SM90_KERNELS.contains(&t.kernel_name(i)));
            }
        }
    }
}
