//! The built-in policies of the CuSync paper. Each is a few lines: where a producer tile
//! posts, and which consumer steps wait on which semaphore for which value.
//!
//! Every split-K slice of a producer tile posts 1, so a semaphore that collects `n` output
//! tiles of a producer with `producer.z` slices is waited for `n * producer.z`.

use super::{Post, Step, SyncPolicy, Wait};
use crate::order::TileOrder;
use crate::tile::{Grid, TileIdx};

/// No synchronization: nothing posts, nothing waits. Sound only for
/// [`super::Dependency::Independent`] stages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoSync;

impl SyncPolicy for NoSync {
    fn semaphore_count(&self, _producer: Grid, _consumer: Grid) -> u32 {
        0
    }

    fn post(&self, _producer: Grid, _consumer: Grid, _tile: TileIdx) -> Option<Post> {
        None
    }

    fn wait(&self, _: Grid, _: Grid, _: TileIdx, _: Step) -> Option<Wait> {
        None
    }
}

/// TileSync: one semaphore per producer output tile; a consumer waits on the tile each step
/// reads, just before reading it. Most concurrency, most synchronizations (`producer.y` per
/// consumer tile under a GeMM dependency).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TileSync;

impl SyncPolicy for TileSync {
    fn semaphore_count(&self, producer: Grid, _consumer: Grid) -> u32 {
        producer.x * producer.y
    }

    fn post(&self, producer: Grid, _consumer: Grid, tile: TileIdx) -> Option<Post> {
        Some(Post {
            semaphore: tile.x * producer.y + tile.y,
            amount: 1,
        })
    }

    fn wait(&self, producer: Grid, _: Grid, _: TileIdx, step: Step) -> Option<Wait> {
        Some(Wait {
            semaphore: step.row * producer.y + step.k,
            value: producer.z,
        })
    }
}

/// RowSync: one semaphore per producer row; a consumer waits once per row it reads, before
/// its first step in that row, for the whole row (`producer.y` tiles).
///
/// Requires equal row tiling of producer and consumer (same M and tile height, so
/// `producer.x == consumer.x`): consumer row `x` is producer row `x`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowSync;

impl SyncPolicy for RowSync {
    fn semaphore_count(&self, producer: Grid, _consumer: Grid) -> u32 {
        producer.x
    }

    fn post(&self, _producer: Grid, _consumer: Grid, tile: TileIdx) -> Option<Post> {
        Some(Post {
            semaphore: tile.x,
            amount: 1,
        })
    }

    fn wait(&self, producer: Grid, _: Grid, _: TileIdx, step: Step) -> Option<Wait> {
        step.first_in_row.then_some(Wait {
            semaphore: step.row,
            value: producer.y * producer.z,
        })
    }
}

/// RowBandSync: RowSync over bands of `rows` producer rows. One semaphore per band; a
/// consumer waits once per row it reads, before its first step in that row, for every tile of
/// the row's band (`rows x producer.y` tiles; the last band may hold fewer rows).
///
/// The band is a false dependency that buys a scheduling property: every consumer tile of a
/// band becomes ready at the same producer post, so a megakernel whose dependency arrays list
/// the consumers in the consumer stage's order pushes the whole band in that order (a grouped
/// raster walks L2 as the plain kernel does), where RowSync pushes one row at a time, in the
/// order the rows happen to complete. With a producer that computes a band's rows together
/// (the grouped raster of the same `rows`), those rows complete within the band's last wave
/// anyway, so the band delays little. With `rows <= 1` it is RowSync.
///
/// Requires equal row tiling of producer and consumer, as RowSync.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowBandSync {
    /// Producer rows per band (0 is taken as 1).
    pub rows: u32,
}

impl RowBandSync {
    const fn rows(&self) -> u32 {
        if self.rows == 0 {
            1
        } else {
            self.rows
        }
    }

    /// Rows of band `band` in a producer of `producer_rows` rows.
    const fn band_rows(&self, producer_rows: u32, band: u32) -> u32 {
        let first = band * self.rows();
        if first >= producer_rows {
            0
        } else if producer_rows - first < self.rows() {
            producer_rows - first
        } else {
            self.rows()
        }
    }
}

impl SyncPolicy for RowBandSync {
    fn semaphore_count(&self, producer: Grid, _consumer: Grid) -> u32 {
        producer.x.div_ceil(self.rows())
    }

    fn post(&self, _producer: Grid, _consumer: Grid, tile: TileIdx) -> Option<Post> {
        Some(Post {
            semaphore: tile.x / self.rows(),
            amount: 1,
        })
    }

    fn wait(&self, producer: Grid, _: Grid, _: TileIdx, step: Step) -> Option<Wait> {
        let band = step.row / self.rows();
        step.first_in_row.then_some(Wait {
            semaphore: band,
            value: self.band_rows(producer.x, band) * producer.y * producer.z,
        })
    }
}

/// StridedSync: producer tiles of one row whose columns are congruent modulo `stride` share a
/// semaphore (for attention, the `r`-th tiles of XQ, XK and XV). A consumer waits on a group
/// before the first step that reads it (`k < stride`). The producer should compute each group
/// back to back: [`TileOrder::StridedRowMajor`].
///
/// Requires `stride > 0` dividing `producer.y` (every group then holds `producer.y / stride`
/// tiles) and equal row tiling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridedSync {
    /// Column distance between tiles that share a semaphore.
    pub stride: u32,
}

impl StridedSync {
    const fn stride(&self) -> u32 {
        if self.stride == 0 {
            1
        } else {
            self.stride
        }
    }

    /// Output tiles in residue class `r` of a row of `columns` tiles.
    const fn group_size(&self, columns: u32, r: u32) -> u32 {
        if r < columns {
            (columns - r).div_ceil(self.stride())
        } else {
            0
        }
    }
}

impl SyncPolicy for StridedSync {
    fn semaphore_count(&self, producer: Grid, _consumer: Grid) -> u32 {
        producer.x * self.stride()
    }

    fn post(&self, _producer: Grid, _consumer: Grid, tile: TileIdx) -> Option<Post> {
        let s = self.stride();
        Some(Post {
            semaphore: tile.x * s + tile.y % s,
            amount: 1,
        })
    }

    fn wait(&self, producer: Grid, _: Grid, _: TileIdx, step: Step) -> Option<Wait> {
        let s = self.stride();
        (step.k < s).then(|| Wait {
            semaphore: step.row * s + step.k,
            value: self.group_size(producer.y, step.k) * producer.z,
        })
    }

    fn producer_order(&self) -> TileOrder {
        TileOrder::StridedRowMajor { stride: self.stride }
    }
}

/// Conv2DTileSync: one semaphore per producer output tile, as TileSync, but a consumer's
/// implicit-GeMM loop has `taps` (`R * S`) steps per input-channel tile, so it waits once
/// every `taps` steps, on input tile `[row, k / taps]` (the paper: "a tile `[i, j]` of the
/// output waits on tile `[i, j / (K*K)]` of the input image"), for every row of the halo
/// band its filter reaches ([`super::Dependency::Conv2D`]).
///
/// With `taps == 1` it is TileSync.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conv2DTileSync {
    /// Filter taps (`R * S`) per input-channel tile.
    pub taps: u32,
}

impl SyncPolicy for Conv2DTileSync {
    fn semaphore_count(&self, producer: Grid, _consumer: Grid) -> u32 {
        producer.x * producer.y
    }

    fn post(&self, producer: Grid, _consumer: Grid, tile: TileIdx) -> Option<Post> {
        Some(Post {
            semaphore: tile.x * producer.y + tile.y,
            amount: 1,
        })
    }

    fn wait(&self, producer: Grid, _: Grid, _: TileIdx, step: Step) -> Option<Wait> {
        let taps = if self.taps == 0 { 1 } else { self.taps };
        step.k.is_multiple_of(taps).then_some(Wait {
            semaphore: step.row * producer.y + step.k / taps,
            value: producer.z,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Grid = Grid::new(2, 6, 2);
    const C: Grid = Grid::new(2, 4, 1);

    fn step(row: u32, k: u32) -> Step {
        Step {
            row,
            k,
            first_in_row: k == 0,
        }
    }

    #[test]
    fn tile_sync_has_a_semaphore_per_tile_counting_slices() {
        assert_eq!(TileSync.semaphore_count(P, C), 12);
        assert_eq!(
            TileSync.post(P, C, TileIdx::new(1, 4, 1)),
            Some(Post {
                semaphore: 10,
                amount: 1
            })
        );
        let w = TileSync.wait(P, C, TileIdx::new(1, 0, 0), step(1, 4));
        assert_eq!(
            w,
            Some(Wait {
                semaphore: 10,
                value: 2
            })
        );
    }

    #[test]
    fn row_sync_waits_once_for_the_whole_row() {
        assert_eq!(RowSync.semaphore_count(P, C), 2);
        let t = TileIdx::new(1, 3, 0);
        assert_eq!(
            RowSync.wait(P, C, t, step(1, 0)),
            Some(Wait {
                semaphore: 1,
                value: 12
            })
        );
        assert_eq!(RowSync.wait(P, C, t, step(1, 1)), None);
    }

    #[test]
    fn row_band_sync_waits_for_the_whole_band() {
        let p = Grid::new(5, 6, 2);
        let band = RowBandSync { rows: 2 };
        assert_eq!(band.semaphore_count(p, C), 3);
        // Rows 2 and 3 share band 1: 2 rows x 6 tiles x 2 slices.
        assert_eq!(band.post(p, C, TileIdx::new(3, 5, 1)).unwrap().semaphore, 1);
        let t = TileIdx::new(3, 0, 0);
        assert_eq!(
            band.wait(p, C, t, step(3, 0)),
            Some(Wait {
                semaphore: 1,
                value: 24
            })
        );
        assert_eq!(band.wait(p, C, t, step(3, 1)), None);
        // The last band holds row 4 alone.
        assert_eq!(
            band.wait(p, C, TileIdx::new(4, 0, 0), step(4, 0)),
            Some(Wait {
                semaphore: 2,
                value: 12
            })
        );
        // One row per band is RowSync.
        let one = RowBandSync { rows: 1 };
        for row in 0..5 {
            assert_eq!(one.wait(p, C, t, step(row, 0)), RowSync.wait(p, C, t, step(row, 0)));
        }
        assert_eq!(RowBandSync { rows: 0 }.semaphore_count(p, C), 5);
    }

    #[test]
    fn strided_sync_groups_columns_by_residue() {
        let s = StridedSync { stride: 3 };
        assert_eq!(s.semaphore_count(P, C), 6);
        // Columns 1 and 4 of row 1 share semaphore 1 * 3 + 1.
        let a = s.post(P, C, TileIdx::new(1, 1, 0)).unwrap();
        let b = s.post(P, C, TileIdx::new(1, 4, 1)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.semaphore, 4);
        // The group holds 2 tiles of 2 slices each.
        let w = s.wait(P, C, TileIdx::new(1, 1, 0), step(1, 1)).unwrap();
        assert_eq!(w, Wait { semaphore: 4, value: 4 });
        assert_eq!(s.wait(P, C, TileIdx::new(1, 1, 0), step(1, 4)), None);
    }

    #[test]
    fn conv2d_tile_sync_waits_once_per_channel_tile() {
        let s = Conv2DTileSync { taps: 9 };
        let t = TileIdx::new(0, 0, 0);
        assert_eq!(s.wait(P, C, t, step(1, 18)), Some(Wait { semaphore: 8, value: 2 }));
        assert_eq!(s.wait(P, C, t, step(1, 19)), None);
        assert_eq!(s.post(P, C, TileIdx::new(1, 2, 0)).unwrap().semaphore, 8);
    }

    #[test]
    fn no_sync_does_nothing() {
        assert_eq!(NoSync.semaphore_count(P, C), 0);
        assert_eq!(NoSync.post(P, C, TileIdx::new(0, 0, 0)), None);
        assert_eq!(NoSync.wait(P, C, TileIdx::new(0, 0, 0), step(0, 0)), None);
    }
}
