//! A consumer tile's waits as an affine walk (stream mode), so a kernel's producer thread need
//! not evaluate the policy at every producer column.
//!
//! A stream-mode consumer tile reads the producer's columns in order; before the K-step that
//! enters producer column `c` it asks the policy for the wait of step
//! `Step { row: tile.x, k: c, first_in_row: c == 0 }` and waits when that names a semaphore other
//! than the one it waited on last ([`walk_waits`], what the device's generic walk does). For
//! every built-in policy that walk is affine: wait `i` of row `r` is on semaphore
//! `r * row_stride + i`, for the same value, at column `i * period`. The host derives that form
//! once per edge from the policy itself ([`WaitSchedule::derive`], which checks every consumer
//! tile) and passes it in the edge's descriptor; the device then makes each wait with one add
//! and one acquire ([`WaitSchedule::wait`]), and falls back to the generic walk when the host
//! found no such form ([`WaitSchedule::NONE`]).

use super::{Step, SyncPolicy, Wait};
use crate::tile::{Grid, TileIdx};
use bytemuck::{Pod, Zeroable};

/// Consumer tiles times producer columns above which [`WaitSchedule::derive`] does not check
/// (and returns [`WaitSchedule::NONE`]: the generic walk), to bound the host's work.
pub const MAX_CHECKED_STEPS: u64 = 1 << 24;

/// An edge's waits in affine form; `waits == 0` means none was derived (the device walks the
/// policy).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
pub struct WaitSchedule {
    /// Waits per consumer tile (0: no schedule).
    pub waits: u32,
    /// Semaphore distance between consecutive consumer rows' first waits.
    pub row_stride: u32,
    /// K elements between consecutive waits' first reads (producer columns between waits times
    /// the producer's tile width); 0 with a single wait.
    pub col_period: u32,
    /// What one producer launch posts to each waited semaphore ([`Wait::value`]).
    pub value: u32,
}

impl WaitSchedule {
    /// No schedule: the device walks the policy column by column.
    pub const NONE: Self = Self {
        waits: 0,
        row_stride: 0,
        col_period: 0,
        value: 0,
    };

    /// Whether a schedule was derived.
    pub const fn is_some(&self) -> bool {
        self.waits != 0
    }

    /// Wait `i` (`i < waits`) of a consumer tile in row `row`.
    pub const fn wait(&self, row: u32, i: u32) -> Wait {
        Wait {
            semaphore: row * self.row_stride + i,
            value: self.value,
        }
    }

    /// The value every wait of launch `epoch` waits for ([`Wait::target`]).
    pub const fn target(&self, epoch: u32) -> u32 {
        self.wait(0, 0).target(epoch)
    }

    /// The first K element (of the consumer's main loop) that wait `i` guards.
    pub const fn k_elem(&self, i: u32) -> u32 {
        i * self.col_period
    }

    /// Once a tile's first `made` waits are made: the first K-step (of `k_tile` elements) that
    /// may need the next one, or `u32::MAX` when none is left (the device's hot-path bound,
    /// set after a scheduled wait and after a producer's probe of the first).
    pub const fn next_wait_step(&self, made: u32, k_tile: u32) -> u32 {
        if made < self.waits {
            self.k_elem(made) / if k_tile == 0 { 1 } else { k_tile }
        } else {
            u32::MAX
        }
    }

    /// The affine form of `policy`'s walk over a `producer` -> `consumer` edge whose producer
    /// tiles are `producer_tile_n` K elements wide, checked against [`walk_waits`] for every
    /// consumer tile; [`WaitSchedule::NONE`] when the walk is not affine (or the grids are too
    /// large to check, [`MAX_CHECKED_STEPS`]).
    pub fn derive<P: SyncPolicy + ?Sized>(policy: &P, producer: Grid, consumer: Grid, producer_tile_n: u32) -> Self {
        let steps = consumer.x as u64 * consumer.y as u64 * producer.y as u64;
        if steps == 0 || steps > MAX_CHECKED_STEPS || producer_tile_n == 0 {
            return Self::NONE;
        }
        let Some(candidate) = Self::candidate(policy, producer, consumer, producer_tile_n) else {
            return Self::NONE;
        };
        for x in 0..consumer.x {
            for y in 0..consumer.y {
                let tile = TileIdx::new(x, y, 0);
                let mut i = 0u32;
                let ok = walk_waits(policy, producer, consumer, tile, |col, w| {
                    let ok = i < candidate.waits
                        && w == candidate.wait(x, i)
                        && col as u64 * producer_tile_n as u64 == candidate.k_elem(i) as u64;
                    i += 1;
                    ok
                });
                if !ok || i != candidate.waits {
                    return Self::NONE;
                }
            }
        }
        candidate
    }

    /// The form tile `(0, 0)`'s walk (and, for the row stride, tile `(1, 0)`'s) suggests.
    fn candidate<P: SyncPolicy + ?Sized>(
        policy: &P,
        producer: Grid,
        consumer: Grid,
        producer_tile_n: u32,
    ) -> Option<Self> {
        let (mut waits, mut value, mut second_col, mut first_ok) = (0u32, 0u32, None, true);
        walk_waits(policy, producer, consumer, TileIdx::new(0, 0, 0), |col, w| {
            if waits == 0 {
                value = w.value;
                first_ok = col == 0 && w.semaphore == 0;
            } else if waits == 1 {
                second_col = Some(col);
            }
            waits += 1;
            true
        });
        if waits == 0 || !first_ok {
            return None;
        }
        let col_period = match second_col {
            Some(c) => c.checked_mul(producer_tile_n)?,
            None => 0,
        };
        // The largest K element a wait guards must fit the device's u32 arithmetic.
        (waits - 1).checked_mul(col_period)?;
        let mut row_stride = 0;
        if consumer.x > 1 {
            let mut first = None;
            walk_waits(policy, producer, consumer, TileIdx::new(1, 0, 0), |_, w| {
                first = Some(w.semaphore);
                false
            });
            row_stride = first?;
            (consumer.x - 1).checked_mul(row_stride)?.checked_add(waits)?;
        }
        Some(Self {
            waits,
            row_stride,
            col_period,
            value,
        })
    }
}

/// The waits consumer tile `tile` makes in stream mode, in order: for each producer column `c`
/// whose step's wait names a semaphore other than the last one waited on, `f(c, wait)`.
/// Stops early (returning `false`) when `f` returns `false`. This is the device's generic walk
/// (`StreamStage::wait_slow` in the device crate) written once for the host's derivation and
/// tests.
pub fn walk_waits<P: SyncPolicy + ?Sized>(
    policy: &P,
    producer: Grid,
    consumer: Grid,
    tile: TileIdx,
    mut f: impl FnMut(u32, Wait) -> bool,
) -> bool {
    let mut last = u32::MAX;
    for col in 0..producer.y {
        let step = Step {
            row: tile.x,
            k: col,
            first_in_row: col == 0,
        };
        if let Some(w) = policy.wait(producer, consumer, tile, step) {
            if w.semaphore != last {
                last = w.semaphore;
                if !f(col, w) {
                    return false;
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Conv2DTileSync, NoSync, PolicyKind, RowSync, StridedSync, TileSync};

    #[test]
    fn next_wait_step_after_made_waits() {
        // RowSync's one wait a tile: nothing left once it is made.
        let row = WaitSchedule {
            waits: 1,
            row_stride: 1,
            col_period: 0,
            value: 32,
        };
        assert_eq!(row.next_wait_step(0, 64), 0);
        assert_eq!(row.next_wait_step(1, 64), u32::MAX);
        // TileSync over 192-wide producer tiles and a 64-element K step: every third step.
        let tile = WaitSchedule {
            waits: 32,
            row_stride: 32,
            col_period: 192,
            value: 1,
        };
        assert_eq!(tile.next_wait_step(1, 64), 3);
        assert_eq!(tile.next_wait_step(4, 64), 12);
        assert_eq!(tile.next_wait_step(31, 64), 93);
        assert_eq!(tile.next_wait_step(32, 64), u32::MAX);
        // A zero K step is taken as one element.
        assert_eq!(tile.next_wait_step(2, 0), 384);
    }

    const P: Grid = Grid::new(8, 32, 1);
    const C: Grid = Grid::new(8, 64, 1);

    #[test]
    fn tile_sync_waits_on_every_column_of_its_row() {
        let s = WaitSchedule::derive(&TileSync, P, C, 192);
        assert_eq!(
            s,
            WaitSchedule {
                waits: 32,
                row_stride: 32,
                col_period: 192,
                value: 1
            }
        );
        assert_eq!(s.wait(3, 5).semaphore, 3 * 32 + 5);
    }

    #[test]
    fn row_sync_waits_once_for_the_whole_row() {
        let s = WaitSchedule::derive(&RowSync, P, C, 192);
        assert_eq!(
            s,
            WaitSchedule {
                waits: 1,
                row_stride: 1,
                col_period: 0,
                value: 32
            }
        );
    }

    #[test]
    fn strided_sync_needs_a_stride_that_divides_the_columns() {
        let s = WaitSchedule::derive(&StridedSync { stride: 4 }, P, C, 64);
        assert_eq!(
            s,
            WaitSchedule {
                waits: 4,
                row_stride: 4,
                col_period: 64,
                value: 8
            }
        );
        // Groups of 11 and 10 tiles: the values differ, no affine form.
        let odd = Grid::new(8, 32, 1);
        assert!(!WaitSchedule::derive(&StridedSync { stride: 3 }, odd, C, 64).is_some());
    }

    #[test]
    fn conv_tile_sync_and_split_k_producers() {
        let s = WaitSchedule::derive(&Conv2DTileSync { taps: 3 }, P, C, 32);
        assert_eq!((s.waits, s.row_stride, s.col_period, s.value), (11, 32, 96, 1));
        let split = Grid::new(8, 32, 4);
        assert_eq!(WaitSchedule::derive(&TileSync, split, C, 192).value, 4);
    }

    #[test]
    fn no_waits_no_schedule() {
        assert!(!WaitSchedule::derive(&NoSync, P, C, 192).is_some());
        assert!(!WaitSchedule::derive(&TileSync, Grid::new(8, 0, 1), C, 192).is_some());
    }

    /// A policy whose rows are not evenly spaced: the derivation must refuse it.
    struct Uneven;
    impl SyncPolicy for Uneven {
        fn semaphore_count(&self, producer: Grid, _: Grid) -> u32 {
            producer.x * producer.y * 2
        }
        fn post(&self, _: Grid, _: Grid, _: TileIdx) -> Option<crate::policy::Post> {
            None
        }
        fn wait(&self, producer: Grid, _: Grid, _: TileIdx, step: Step) -> Option<Wait> {
            Some(Wait {
                semaphore: step.row * step.row * producer.y + step.k,
                value: 1,
            })
        }
    }

    #[test]
    fn a_walk_that_is_not_affine_has_no_schedule() {
        assert!(!WaitSchedule::derive(&Uneven, P, C, 192).is_some());
    }

    #[test]
    fn every_built_in_schedule_reproduces_the_walk() {
        let policies = [
            PolicyKind::TileSync,
            PolicyKind::RowSync,
            PolicyKind::StridedSync { stride: 2 },
            PolicyKind::StridedSync { stride: 8 },
            PolicyKind::Conv2DTileSync { taps: 9 },
        ];
        for policy in policies {
            for (p, c) in [
                (P, C),
                (Grid::new(3, 7, 2), Grid::new(3, 5, 1)),
                (Grid::new(1, 1, 1), Grid::new(1, 9, 1)),
            ] {
                let s = WaitSchedule::derive(&policy, p, c, 128);
                if !s.is_some() {
                    // Only StridedSync with a stride that does not divide the columns.
                    assert!(
                        matches!(policy, PolicyKind::StridedSync { stride } if p.y % stride != 0),
                        "{policy:?} {p:?}"
                    );
                    continue;
                }
                for x in 0..c.x {
                    let mut i = 0;
                    walk_waits(&policy, p, c, TileIdx::new(x, 0, 0), |col, w| {
                        assert_eq!(
                            (w, col * 128),
                            (s.wait(x, i), s.k_elem(i)),
                            "{policy:?} {p:?} row {x} wait {i}"
                        );
                        i += 1;
                        true
                    });
                    assert_eq!(i, s.waits);
                }
            }
        }
    }
}
