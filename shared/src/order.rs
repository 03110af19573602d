//! Tile orders: the order in which a stage's thread blocks take its tiles.
//!
//! A stage keeps one global counter; the thread block that draws ticket `n` computes tile
//! [`nth`]`(order, grid, n)` (CuSync paper, "Tile Processing Order"). The producer and the
//! consumer of a dependency should walk their tiles in matching orders, so that the tiles a
//! consumer waits for are the ones the producer finishes first.
//!
//! Every built-in order is a permutation of the grid: tickets `0..grid.count()` name every tile
//! exactly once. Within an output tile, split-K slices (`z`) are always adjacent, so an output
//! tile's slices finish together and its semaphore completes as early as possible.
//!
//! A user-defined order is a buffer the host builds (one [`TileIdx`] or one linear id per
//! ticket) and the device reads at `order[ticket]`; see [`OrderSource`].

use crate::tile::{Grid, TileIdx};

/// A built-in tile order.
#[repr(C, u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TileOrder {
    /// Row by row of the output (`x` slowest), column by column within a row, split-K slices
    /// of one tile adjacent (`z` fastest).
    #[default]
    RowMajor,
    /// Column by column (`y` slowest), row by row within a column, split-K slices adjacent.
    ColumnMajor,
    /// Row by row; within a row, the columns of one residue class modulo `stride` first
    /// (`r, r + stride, r + 2 * stride, ..`), classes in increasing `r`; split-K slices adjacent.
    ///
    /// This is the producer order of StridedSync: the tiles that share one semaphore are
    /// computed one after the other. (The paper writes it as
    /// `y = (p % stride) * stride + p / stride`, which is that permutation only when
    /// `grid.y == stride * stride`; this definition is a permutation for every grid.)
    /// `stride == 0` is read as 1, which is plain row-major.
    StridedRowMajor {
        /// Column distance between tiles of one group.
        stride: u32,
    },
}

impl TileOrder {
    /// The order as two words `[tag, parameter]` (for descriptors that must be `Pod`).
    pub const fn encode(&self) -> [u32; 2] {
        match *self {
            TileOrder::RowMajor => [0, 0],
            TileOrder::ColumnMajor => [1, 0],
            TileOrder::StridedRowMajor { stride } => [2, stride],
        }
    }

    /// Inverse of [`TileOrder::encode`]; `None` for an unknown tag.
    pub const fn decode(words: [u32; 2]) -> Option<Self> {
        match words {
            [0, _] => Some(TileOrder::RowMajor),
            [1, _] => Some(TileOrder::ColumnMajor),
            [2, stride] => Some(TileOrder::StridedRowMajor { stride }),
            _ => None,
        }
    }
}

/// The tile that ticket `n` computes under `order` on `grid`.
///
/// `n` must be below `grid.count()`; larger tickets wrap around modulo the grid (the result
/// is then meaningless, but never out of the grid). An empty grid yields tile `(0, 0, 0)`.
pub const fn nth(order: TileOrder, grid: Grid, n: u32) -> TileIdx {
    let count = grid.count();
    if count == 0 {
        return TileIdx::new(0, 0, 0);
    }
    let n = n % count;
    let z = n % grid.z;
    let rest = n / grid.z;
    match order {
        TileOrder::RowMajor => TileIdx::new(rest / grid.y, rest % grid.y, z),
        TileOrder::ColumnMajor => TileIdx::new(rest % grid.x, rest / grid.x, z),
        TileOrder::StridedRowMajor { stride } => {
            let x = rest / grid.y;
            let y = strided_column(grid.y, stride, rest % grid.y);
            TileIdx::new(x, y, z)
        }
    }
}

/// The ticket at which `order` computes `tile` on `grid` (the inverse of [`nth`]).
pub const fn position(order: TileOrder, grid: Grid, tile: TileIdx) -> u32 {
    let within = match order {
        TileOrder::RowMajor => tile.x * grid.y + tile.y,
        TileOrder::ColumnMajor => tile.y * grid.x + tile.x,
        TileOrder::StridedRowMajor { stride } => tile.x * grid.y + strided_position(grid.y, stride, tile.y),
    };
    within * grid.z + tile.z
}

/// Column visited at position `p` of a row of `columns` tiles in strided order.
///
/// Residue classes `r < columns % stride` hold `columns / stride + 1` columns, the others
/// `columns / stride`; classes are visited in increasing `r`.
const fn strided_column(columns: u32, stride: u32, p: u32) -> u32 {
    let stride = if stride == 0 { 1 } else { stride };
    let per_class = columns / stride;
    let long_classes = columns % stride;
    let long_span = long_classes * (per_class + 1);
    let (class, member) = if p < long_span {
        (p / (per_class + 1), p % (per_class + 1))
    } else {
        let q = p - long_span;
        (long_classes + q / per_class, q % per_class)
    };
    class + member * stride
}

/// Position of column `y` in a row of `columns` tiles in strided order (inverse of
/// [`strided_column`]).
const fn strided_position(columns: u32, stride: u32, y: u32) -> u32 {
    let stride = if stride == 0 { 1 } else { stride };
    let per_class = columns / stride;
    let long_classes = columns % stride;
    let class = y % stride;
    let member = y / stride;
    if class < long_classes {
        class * (per_class + 1) + member
    } else {
        long_classes * (per_class + 1) + (class - long_classes) * per_class + member
    }
}

/// Where a stage's tile order comes from: a built-in order, or a buffer the host filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderSource<'a> {
    /// A built-in order, computed on the fly.
    Builtin(TileOrder),
    /// A user-defined order: entry `n` is the tile of ticket `n`.
    Tiles(&'a [TileIdx]),
    /// A user-defined order as canonical linear ids ([`Grid::linear`]).
    LinearIds(&'a [u32]),
}

impl OrderSource<'_> {
    /// The tile that ticket `n` computes. A buffer shorter than `n + 1` entries yields `None`.
    pub fn nth(&self, grid: Grid, n: u32) -> Option<TileIdx> {
        match *self {
            OrderSource::Builtin(order) => (n < grid.count()).then(|| nth(order, grid, n)),
            OrderSource::Tiles(tiles) => tiles.get(n as usize).copied(),
            OrderSource::LinearIds(ids) => ids.get(n as usize).map(|&id| grid.tile(id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_round_trip_through_words() {
        for o in ORDERS {
            assert_eq!(TileOrder::decode(o.encode()), Some(o));
        }
        assert_eq!(TileOrder::decode([7, 0]), None);
    }

    const ORDERS: [TileOrder; 6] = [
        TileOrder::RowMajor,
        TileOrder::ColumnMajor,
        TileOrder::StridedRowMajor { stride: 0 },
        TileOrder::StridedRowMajor { stride: 1 },
        TileOrder::StridedRowMajor { stride: 3 },
        TileOrder::StridedRowMajor { stride: 7 },
    ];

    /// Marks every tile the order yields in a fixed-size bitmap and checks none repeats.
    fn assert_permutation(order: TileOrder, grid: Grid) {
        let mut seen = [false; 512];
        for n in 0..grid.count() {
            let t = nth(order, grid, n);
            assert!(grid.contains(t), "{order:?} {grid:?}: ticket {n} -> {t:?} outside");
            let id = grid.linear(t) as usize;
            assert!(!seen[id], "{order:?} {grid:?}: tile {t:?} twice");
            seen[id] = true;
            assert_eq!(position(order, grid, t), n, "{order:?} {grid:?}: position({t:?})");
        }
    }

    #[test]
    fn every_builtin_order_is_a_permutation() {
        for order in ORDERS {
            for x in 1..5 {
                for y in 1..10 {
                    for z in 1..4 {
                        assert_permutation(order, Grid::new(x, y, z));
                    }
                }
            }
        }
    }

    #[test]
    fn row_major_walks_rows_then_columns_with_slices_adjacent() {
        let g = Grid::new(2, 3, 2);
        let first: [TileIdx; 4] = core::array::from_fn(|n| nth(TileOrder::RowMajor, g, n as u32));
        assert_eq!(
            first,
            [
                TileIdx::new(0, 0, 0),
                TileIdx::new(0, 0, 1),
                TileIdx::new(0, 1, 0),
                TileIdx::new(0, 1, 1)
            ]
        );
        assert_eq!(nth(TileOrder::RowMajor, g, 6), TileIdx::new(1, 0, 0));
    }

    #[test]
    fn column_major_walks_columns_first() {
        let g = Grid::new(3, 2, 1);
        assert_eq!(nth(TileOrder::ColumnMajor, g, 1), TileIdx::new(1, 0, 0));
        assert_eq!(nth(TileOrder::ColumnMajor, g, 3), TileIdx::new(0, 1, 0));
    }

    #[test]
    fn strided_order_groups_tiles_stride_apart() {
        // XQKV with 6 column tiles split into Q|K|V of 2 each: stride 2 groups {0,2,4},{1,3,5}.
        let g = Grid::new(2, 6, 1);
        let row: [u32; 6] = core::array::from_fn(|p| nth(TileOrder::StridedRowMajor { stride: 2 }, g, p as u32).y);
        assert_eq!(row, [0, 2, 4, 1, 3, 5]);
        // Uneven classes: 7 columns, stride 3 -> {0,3,6},{1,4},{2,5}.
        let g = Grid::new(1, 7, 1);
        let row: [u32; 7] = core::array::from_fn(|p| nth(TileOrder::StridedRowMajor { stride: 3 }, g, p as u32).y);
        assert_eq!(row, [0, 3, 6, 1, 4, 2, 5]);
    }

    #[test]
    fn order_source_reads_buffers_and_bounds() {
        let g = Grid::new(2, 2, 1);
        let tiles = [TileIdx::new(1, 1, 0), TileIdx::new(0, 0, 0)];
        assert_eq!(OrderSource::Tiles(&tiles).nth(g, 0), Some(TileIdx::new(1, 1, 0)));
        assert_eq!(OrderSource::Tiles(&tiles).nth(g, 2), None);
        assert_eq!(OrderSource::LinearIds(&[3, 0]).nth(g, 0), Some(TileIdx::new(1, 1, 0)));
        assert_eq!(
            OrderSource::Builtin(TileOrder::RowMajor).nth(g, 3),
            Some(TileIdx::new(1, 1, 0))
        );
        assert_eq!(OrderSource::Builtin(TileOrder::RowMajor).nth(g, 4), None);
    }
}
