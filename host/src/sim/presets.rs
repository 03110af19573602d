//! The kernel configurations behind the CuSync paper's tables, and the H200 ones we predict.
//!
//! # How the paper's configurations were recovered
//!
//! The paper prints grids and waves, not tile sizes or occupancies; these are the
//! configurations that reproduce every printed grid and wave cell with one definition
//! (`waves = thread blocks / (occupancy * 80 SMs)`):
//!
//! * **Table `waves:mlp` and Table 1 (`tab:intro`), V100.** Batches 256 and up use CUTLASS
//!   tiles of 256 rows with occupancy 2 (160 blocks per wave, as Table 1 states); the first
//!   GeMM is `256x64` split-K 2 at B = 256 (`[1, 96, 2]`), `256x128` split-K 2 at B = 512
//!   (`[2, 48, 2]`) and `256x128` unsplit from B = 1024; the second GeMM is always `256x128`
//!   unsplit. Batches 1-64 and 128 use occupancy **3** (240 blocks per wave: Table
//!   `impact-opt:mlp` says so, and its "TBs" column, 120 and 192, is the two GeMMs' blocks
//!   summed): `64x256` tiles, first GeMM split-K 3 (`[1, 24, 3]`, 72 blocks, 0.3 waves; with
//!   160 blocks per wave it would be 0.45) for 1-64, and `128x128` tiles, first GeMM split-K 2,
//!   for 128. The tile height for 1-64 is only bounded below by 64 (one row tile for every
//!   batch up to 64); 64 is what the reference's tile database uses at B = 64.
//! * **Table `waves:conv-128`, V100.** ResNet's 28x28x128 3x3 convolution as an implicit GeMM
//!   (`M = 784 B`, `N = 128`, `K = 1152`) with `64x64` tiles and occupancy 4 (320 blocks per
//!   wave, Table `impact-opt:resnet`; its 156 "TBs" at B = 1 are 2 x 78 = 2 x 13x2x3): grid
//!   `[ceil(784 B / 64), 2, split_k]` with split-K 3 at B = 1, 2 at B = 4, 1 otherwise.

use super::workload::Tiling;

/// One batch size of a two-GeMM MLP: each GeMM's tiling and the shared occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlpCase {
    /// Smallest batch size the row stands for (the paper's "1-64" row covers 1 to 64).
    pub first_batch: u32,
    /// The batch size simulated (the largest the row stands for).
    pub batch: u32,
    /// First GeMM (`X W1`) tiling.
    pub gemm1: Tiling,
    /// Second GeMM (`H W2`) tiling.
    pub gemm2: Tiling,
    /// Thread blocks per SM, both GeMMs.
    pub occupancy: u32,
}

impl MlpCase {
    /// The row label: "64", or "1-64" for a range.
    pub fn label(&self) -> String {
        if self.first_batch == self.batch {
            self.batch.to_string()
        } else {
            format!("{}-{}", self.first_batch, self.batch)
        }
    }
}

/// One batch size of a pair of equal convolutions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvCase {
    /// Images.
    pub batch: u32,
    /// Implicit-GeMM tiling (both convolutions).
    pub tiling: Tiling,
    /// Thread blocks per SM.
    pub occupancy: u32,
}

/// The rows of the paper's Table `waves:mlp` (GPT-3 MLP on a V100); Table 1 is its rows
/// 256, 512 and 1024.
pub fn paper_v100_mlp() -> Vec<MlpCase> {
    let case = |first_batch, batch, gemm1, gemm2, occupancy| MlpCase {
        first_batch,
        batch,
        gemm1,
        gemm2,
        occupancy,
    };
    vec![
        case(1, 64, Tiling::new(64, 256, 3), Tiling::new(64, 256, 1), 3),
        case(128, 128, Tiling::new(128, 128, 2), Tiling::new(128, 128, 1), 3),
        case(256, 256, Tiling::new(256, 64, 2), Tiling::new(256, 128, 1), 2),
        case(512, 512, Tiling::new(256, 128, 2), Tiling::new(256, 128, 1), 2),
        case(1024, 1024, Tiling::new(256, 128, 1), Tiling::new(256, 128, 1), 2),
        case(2048, 2048, Tiling::new(256, 128, 1), Tiling::new(256, 128, 1), 2),
    ]
}

/// Batch sizes of the H200 predictions.
pub const H200_MLP_BATCHES: [u32; 8] = [1, 8, 64, 128, 256, 512, 1024, 2048];

/// GPT-3 MLP on an H200 with one `tile_m x tile_n` tile for both GeMMs, no split-K and one
/// block per SM (a Hopper warp-specialized GeMM fills an SM). A prediction, not a measurement.
pub fn h200_mlp(tile_m: u32, tile_n: u32) -> Vec<MlpCase> {
    H200_MLP_BATCHES
        .iter()
        .map(|&batch| MlpCase {
            first_batch: batch,
            batch,
            gemm1: Tiling::new(tile_m, tile_n, 1),
            gemm2: Tiling::new(tile_m, tile_n, 1),
            occupancy: 1,
        })
        .collect()
}

/// The rows of the paper's Table `waves:conv-128` (two 28x28x128 3x3 convolutions, V100).
pub fn paper_v100_conv128() -> Vec<ConvCase> {
    [1, 4, 8, 12, 16, 20, 24, 28, 32]
        .into_iter()
        .map(|batch| ConvCase {
            batch,
            tiling: Tiling::new(64, 64, conv128_split_k(batch)),
            occupancy: 4,
        })
        .collect()
}

/// Split-K of the paper's 128-channel convolutions: more slices when the batch gives few tiles.
const fn conv128_split_k(batch: u32) -> u32 {
    match batch {
        1 => 3,
        4 => 2,
        _ => 1,
    }
}
