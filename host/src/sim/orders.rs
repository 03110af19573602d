//! Host-side tile-order buffers: what a stage with a user-defined order hands the device
//! (which reads `order[ticket]`), and what the simulator dispatches from.

use crate::shared::order::{nth, TileOrder};
use crate::shared::{Grid, TileIdx};

/// Every tile of `grid` in `order`, one entry per ticket.
pub fn order_buffer(order: TileOrder, grid: Grid) -> Vec<TileIdx> {
    (0..grid.count()).map(|n| nth(order, grid, n)).collect()
}

/// The buffer of canonical linear ids ([`Grid::linear`]) for `order`.
pub fn linear_order_buffer(order: TileOrder, grid: Grid) -> Vec<u32> {
    (0..grid.count()).map(|n| grid.linear(nth(order, grid, n))).collect()
}

/// Why a user-defined order buffer cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    /// The buffer does not have one entry per tile.
    #[error("order has {len} entries but the grid has {tiles} tiles")]
    WrongLength {
        /// Entries in the buffer.
        len: usize,
        /// Tiles in the grid.
        tiles: u32,
    },
    /// An entry lies outside the grid.
    #[error("order entry {position} = {tile:?} lies outside the grid")]
    OutOfGrid {
        /// Ticket of the entry.
        position: usize,
        /// The entry.
        tile: TileIdx,
    },
    /// A tile appears twice (so another never appears).
    #[error("order entry {position} repeats tile {tile:?}")]
    Repeated {
        /// Ticket of the second occurrence.
        position: usize,
        /// The repeated tile.
        tile: TileIdx,
    },
}

/// Checks that `order` names every tile of `grid` exactly once.
pub fn check_order(order: &[TileIdx], grid: Grid) -> Result<(), OrderError> {
    if order.len() != grid.count() as usize {
        return Err(OrderError::WrongLength {
            len: order.len(),
            tiles: grid.count(),
        });
    }
    let mut seen = vec![false; order.len()];
    for (position, &tile) in order.iter().enumerate() {
        if !grid.contains(tile) {
            return Err(OrderError::OutOfGrid { position, tile });
        }
        let id = grid.linear(tile) as usize;
        if std::mem::replace(&mut seen[id], true) {
            return Err(OrderError::Repeated { position, tile });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_buffers_pass_the_check_and_bad_ones_fail() {
        let g = Grid::new(3, 4, 2);
        for order in [
            TileOrder::RowMajor,
            TileOrder::ColumnMajor,
            TileOrder::StridedRowMajor { stride: 2 },
        ] {
            assert_eq!(check_order(&order_buffer(order, g), g), Ok(()));
            let ids = linear_order_buffer(order, g);
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..g.count()).collect::<Vec<_>>());
        }
        let mut bad = order_buffer(TileOrder::RowMajor, g);
        bad[5] = bad[0];
        assert_eq!(
            check_order(&bad, g),
            Err(OrderError::Repeated {
                position: 5,
                tile: bad[0]
            })
        );
        bad[5] = TileIdx::new(3, 0, 0);
        assert!(matches!(
            check_order(&bad, g),
            Err(OrderError::OutOfGrid { position: 5, .. })
        ));
        assert!(matches!(check_order(&bad[1..], g), Err(OrderError::WrongLength { .. })));
    }
}
