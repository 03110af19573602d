//! Tile indices and tile grids: the coordinates every policy, order and queue speaks in.
//!
//! A stage's output is cut into tiles laid out on a 3-D grid: `x` = row tiles (M / tile_m),
//! `y` = column tiles (N / tile_n), `z` = split-K slices (or batch). This follows the CuSync
//! paper's convention (grid `[rows, cols, splitk]`, Table "waves:mlp").

use bytemuck::{Pod, Zeroable};

/// A 3-D tile grid (`x` row tiles, `y` column tiles, `z` split-K slices).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
pub struct Grid {
    /// Row tiles.
    pub x: u32,
    /// Column tiles.
    pub y: u32,
    /// Split-K slices (1 when K is not split).
    pub z: u32,
    /// Padding so the layout is 16 bytes; always 0.
    pub _pad: u32,
}

/// One tile's coordinates in its stage's grid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Pod, Zeroable)]
pub struct TileIdx {
    /// Row tile.
    pub x: u32,
    /// Column tile.
    pub y: u32,
    /// Split-K slice.
    pub z: u32,
    /// Padding so the layout is 16 bytes; always 0.
    pub _pad: u32,
}

impl Grid {
    /// A grid of `x` row tiles, `y` column tiles and `z` split-K slices.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Self { x, y, z, _pad: 0 }
    }

    /// The grid that covers an `m` x `n` output with `tile_m` x `tile_n` tiles (edges rounded up).
    pub const fn covering(m: u32, n: u32, tile_m: u32, tile_n: u32, split_k: u32) -> Self {
        Self::new(m.div_ceil(tile_m), n.div_ceil(tile_n), split_k)
    }

    /// Number of tiles in the grid.
    pub const fn count(&self) -> u32 {
        self.x * self.y * self.z
    }

    /// Linear index of `t` in row-major order (x slowest within a z slice, y fastest),
    /// z slices last. This is the canonical tile id used by scoreboards and queues.
    pub const fn linear(&self, t: TileIdx) -> u32 {
        (t.z * self.x + t.x) * self.y + t.y
    }

    /// Inverse of [`Grid::linear`].
    pub const fn tile(&self, id: u32) -> TileIdx {
        let y = id % self.y;
        let rest = id / self.y;
        TileIdx::new(rest % self.x, y, rest / self.x)
    }

    /// Whether `t` lies inside the grid.
    pub const fn contains(&self, t: TileIdx) -> bool {
        t.x < self.x && t.y < self.y && t.z < self.z
    }
}

impl TileIdx {
    /// The tile at row tile `x`, column tile `y`, split-K slice `z`.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Self { x, y, z, _pad: 0 }
    }
}

const _: () = {
    assert!(core::mem::size_of::<Grid>() == 16);
    assert!(core::mem::size_of::<TileIdx>() == 16);
    assert!(core::mem::offset_of!(Grid, y) == 4);
    assert!(core::mem::offset_of!(Grid, z) == 8);
    assert!(core::mem::offset_of!(TileIdx, z) == 8);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_round_trips_every_tile() {
        let g = Grid::new(3, 5, 2);
        for id in 0..g.count() {
            let t = g.tile(id);
            assert!(g.contains(t));
            assert_eq!(g.linear(t), id);
        }
        assert_eq!(g.linear(TileIdx::new(1, 0, 0)), 5);
        assert_eq!(g.linear(TileIdx::new(0, 0, 1)), 15);
    }

    #[test]
    fn covering_rounds_edges_up() {
        assert_eq!(Grid::covering(1024, 6144, 256, 128, 1), Grid::new(4, 48, 1));
        assert_eq!(Grid::covering(1, 129, 128, 128, 1), Grid::new(1, 2, 1));
    }
}
