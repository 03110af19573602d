//! Soundness of a policy for a dependency: every producer tile a consumer reads is covered by
//! a wait made before the read, and what one launch posts to a semaphore is what is waited for.
//!
//! [`validate`] is the cheap up-front check (grids and parameters, O(1)); [`check_soundness`]
//! is the exhaustive one (every consumer tile, every step, no allocation), used by tests and
//! available to planners for small grids.

use core::fmt;

use super::{Dependency, PolicyKind, SyncPolicy, Wait};
use crate::tile::{Grid, TileIdx};

/// Why a (policy, dependency, grids) combination is rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyError {
    /// A grid has a zero dimension.
    EmptyGrid {
        /// The producer grid.
        producer: Grid,
        /// The consumer grid.
        consumer: Grid,
    },
    /// Consumer row `x` must be producer row `x` (same M and tile height), but the grids
    /// have different numbers of row tiles.
    RowTilingMismatch {
        /// Producer row tiles.
        producer_rows: u32,
        /// Consumer row tiles.
        consumer_rows: u32,
    },
    /// A stride of 0.
    ZeroStride,
    /// The stride does not divide the producer's column tiles, so the strided groups are
    /// uneven (and the attention slices would not line up with tiles).
    StrideDoesNotDivideColumns {
        /// The stride.
        stride: u32,
        /// Producer column tiles.
        columns: u32,
    },
    /// StridedSync's stride differs from the strided dependency's.
    StrideMismatch {
        /// The policy's stride.
        policy: u32,
        /// The dependency's stride.
        dependency: u32,
    },
    /// A filter with 0 taps.
    ZeroTaps,
    /// The policy waits once per `policy` steps but the dependency has `dependency` filter
    /// taps per channel tile (TileSync counts as 1 tap; GeMM dependencies have 1 tap).
    TapsMismatch {
        /// The policy's taps.
        policy: u32,
        /// The dependency's taps.
        dependency: u32,
    },
    /// The policy cannot cover this dependency (NoSync on a real dependency; StridedSync on
    /// an im2col loop).
    Unsupported {
        /// The policy.
        policy: PolicyKind,
        /// The dependency.
        dependency: Dependency,
    },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PolicyError::EmptyGrid { producer, consumer } => write!(
                f,
                "empty grid: producer {}x{}x{}, consumer {}x{}x{}",
                producer.x, producer.y, producer.z, consumer.x, consumer.y, consumer.z
            ),
            PolicyError::RowTilingMismatch {
                producer_rows,
                consumer_rows,
            } => write!(
                f,
                "row tiling differs: producer has {producer_rows} row tiles, consumer \
                 {consumer_rows}; use the same M and tile height for both stages"
            ),
            PolicyError::ZeroStride => write!(f, "stride must be at least 1"),
            PolicyError::StrideDoesNotDivideColumns { stride, columns } => write!(
                f,
                "stride {stride} does not divide the producer's {columns} column tiles"
            ),
            PolicyError::StrideMismatch { policy, dependency } => write!(
                f,
                "StridedSync stride {policy} differs from the dependency's stride {dependency}"
            ),
            PolicyError::ZeroTaps => write!(f, "a convolution needs at least 1 filter tap"),
            PolicyError::TapsMismatch { policy, dependency } => write!(
                f,
                "the policy waits every {policy} steps but the dependency has {dependency} \
                 filter taps per channel tile"
            ),
            PolicyError::Unsupported { policy, dependency } => {
                write!(f, "{} cannot synchronize a {:?} dependency", policy.name(), dependency)
            }
        }
    }
}

impl core::error::Error for PolicyError {}

/// Checks that `policy` can synchronize `dependency` between grids `producer` and `consumer`.
///
/// Rules: grids non-empty; every dependency but `Independent` needs equal row tiling
/// (`producer.x == consumer.x`); strides non-zero and dividing `producer.y`; taps non-zero and
/// equal between a Conv2D dependency and its policy; NoSync only on independent stages;
/// StridedSync not on a Conv2D dependency with more than one tap.
pub fn validate(policy: PolicyKind, dependency: Dependency, producer: Grid, consumer: Grid) -> Result<(), PolicyError> {
    if producer.count() == 0 || consumer.count() == 0 {
        return Err(PolicyError::EmptyGrid { producer, consumer });
    }
    let dependency_taps = match dependency {
        Dependency::Independent => return Ok(()),
        Dependency::GemmRow => 1,
        Dependency::Strided { stride } => {
            check_stride(stride, producer.y)?;
            1
        }
        Dependency::Conv2D { taps, .. } => {
            if taps == 0 {
                return Err(PolicyError::ZeroTaps);
            }
            taps
        }
    };
    if producer.x != consumer.x {
        return Err(PolicyError::RowTilingMismatch {
            producer_rows: producer.x,
            consumer_rows: consumer.x,
        });
    }
    let unsupported = Err(PolicyError::Unsupported { policy, dependency });
    match policy {
        PolicyKind::NoSync => unsupported,
        PolicyKind::RowSync => Ok(()),
        PolicyKind::TileSync => check_taps(1, dependency_taps),
        PolicyKind::Conv2DTileSync { taps } => {
            if taps == 0 {
                return Err(PolicyError::ZeroTaps);
            }
            check_taps(taps, dependency_taps)
        }
        PolicyKind::StridedSync { stride } => {
            check_stride(stride, producer.y)?;
            match dependency {
                Dependency::Conv2D { .. } if dependency_taps != 1 => unsupported,
                Dependency::Strided { stride: d } if d != stride => Err(PolicyError::StrideMismatch {
                    policy: stride,
                    dependency: d,
                }),
                _ => Ok(()),
            }
        }
    }
}

fn check_stride(stride: u32, columns: u32) -> Result<(), PolicyError> {
    if stride == 0 {
        Err(PolicyError::ZeroStride)
    } else if !columns.is_multiple_of(stride) {
        Err(PolicyError::StrideDoesNotDivideColumns { stride, columns })
    } else {
        Ok(())
    }
}

fn check_taps(policy: u32, dependency: u32) -> Result<(), PolicyError> {
    if policy == dependency {
        Ok(())
    } else {
        Err(PolicyError::TapsMismatch { policy, dependency })
    }
}

/// A way a policy fails a dependency, found by [`check_soundness`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A producer tile posts to a semaphore outside the array.
    PostOutOfRange {
        /// The producer tile.
        producer_tile: TileIdx,
        /// The semaphore it posts to.
        semaphore: u32,
    },
    /// A consumer waits on a semaphore outside the array.
    WaitOutOfRange {
        /// The consumer tile.
        consumer_tile: TileIdx,
        /// The semaphore it waits on.
        semaphore: u32,
    },
    /// A consumer waits for a value other than what one producer launch posts (too little:
    /// the wait may return early; too much: it never returns, or returns a launch late).
    WaitValueMismatch {
        /// The consumer tile.
        consumer_tile: TileIdx,
        /// The semaphore.
        semaphore: u32,
        /// The value waited for per launch.
        waits_for: u32,
        /// The total one producer launch posts.
        posted: u32,
    },
    /// A consumer reads a producer tile that no earlier wait covers.
    Uncovered {
        /// The consumer tile.
        consumer_tile: TileIdx,
        /// The producer output tile it reads unprotected.
        producer_tile: TileIdx,
    },
}

/// Total that one producer launch posts to `semaphore` (all tiles, all split-K slices).
pub fn total_posted<P: SyncPolicy + ?Sized>(policy: &P, producer: Grid, consumer: Grid, semaphore: u32) -> u32 {
    let mut total = 0u32;
    for id in 0..producer.count() {
        if let Some(p) = policy.post(producer, consumer, producer.tile(id)) {
            if p.semaphore == semaphore {
                total = total.wrapping_add(p.amount);
            }
        }
    }
    total
}

/// Whether `wait` covers producer output tile `tile` (any `z`): every split-K slice of the
/// tile posts to the waited semaphore. (That the wait also waits for everything posted there
/// is the other half of soundness, [`total_posted`].)
pub fn wait_covers<P: SyncPolicy + ?Sized>(
    policy: &P,
    producer: Grid,
    consumer: Grid,
    wait: Wait,
    tile: TileIdx,
) -> bool {
    (0..producer.z).all(|z| {
        let slice = TileIdx::new(tile.x, tile.y, z);
        matches!(policy.post(producer, consumer, slice), Some(p) if p.semaphore == wait.semaphore)
    })
}

/// Calls `f` with every producer output tile (`z = 0`) that `wait` covers.
pub fn for_each_covered<P: SyncPolicy + ?Sized>(
    policy: &P,
    producer: Grid,
    consumer: Grid,
    wait: Wait,
    mut f: impl FnMut(TileIdx),
) {
    for x in 0..producer.x {
        for y in 0..producer.y {
            let tile = TileIdx::new(x, y, 0);
            if wait_covers(policy, producer, consumer, wait, tile) {
                f(tile);
            }
        }
    }
}

/// Calls `f` with every producer output tile (`z = 0`) consumer tile `tile` reads, in the
/// order of its steps (a tile read by several steps is reported once per step).
pub fn for_each_read(dependency: Dependency, producer: Grid, tile: TileIdx, mut f: impl FnMut(TileIdx)) {
    for i in 0..dependency.step_count(producer, tile) {
        f(dependency.reads(dependency.step(producer, tile, i)));
    }
}

/// Whether consumer tile `tile` waits at all under `policy`.
pub fn consumer_waits<P: SyncPolicy + ?Sized>(
    policy: &P,
    dependency: Dependency,
    producer: Grid,
    consumer: Grid,
    tile: TileIdx,
) -> bool {
    (0..dependency.step_count(producer, tile)).any(|i| {
        let step = dependency.step(producer, tile, i);
        policy.wait(producer, consumer, tile, step).is_some()
    })
}

/// Checks, for every consumer tile and every step, that the producer tile the step reads is
/// covered by a wait at or before that step, that every wait is for exactly what one producer
/// launch posts to its semaphore, and that all semaphores are in range. Returns the first
/// violation found. Cost: O(consumer tiles * steps * (steps + producer tiles)); meant for
/// tests and small grids.
pub fn check_soundness<P: SyncPolicy + ?Sized>(
    policy: &P,
    dependency: Dependency,
    producer: Grid,
    consumer: Grid,
) -> Result<(), Violation> {
    let semaphores = policy.semaphore_count(producer, consumer);
    for id in 0..producer.count() {
        let t = producer.tile(id);
        if let Some(p) = policy.post(producer, consumer, t) {
            if p.semaphore >= semaphores {
                return Err(Violation::PostOutOfRange {
                    producer_tile: t,
                    semaphore: p.semaphore,
                });
            }
        }
    }
    for id in 0..consumer.count() {
        check_consumer_tile(policy, dependency, producer, consumer, consumer.tile(id), semaphores)?;
    }
    Ok(())
}

fn check_consumer_tile<P: SyncPolicy + ?Sized>(
    policy: &P,
    dependency: Dependency,
    producer: Grid,
    consumer: Grid,
    tile: TileIdx,
    semaphores: u32,
) -> Result<(), Violation> {
    let wait_at = |i: u32| policy.wait(producer, consumer, tile, dependency.step(producer, tile, i));
    for i in 0..dependency.step_count(producer, tile) {
        if let Some(w) = wait_at(i) {
            if w.semaphore >= semaphores {
                return Err(Violation::WaitOutOfRange {
                    consumer_tile: tile,
                    semaphore: w.semaphore,
                });
            }
            let posted = total_posted(policy, producer, consumer, w.semaphore);
            if posted != w.value {
                return Err(Violation::WaitValueMismatch {
                    consumer_tile: tile,
                    semaphore: w.semaphore,
                    waits_for: w.value,
                    posted,
                });
            }
        }
        let read = dependency.reads(dependency.step(producer, tile, i));
        let covered =
            (0..=i).any(|j| matches!(wait_at(j), Some(w) if wait_covers(policy, producer, consumer, w, read)));
        if !covered {
            return Err(Violation::Uncovered {
                consumer_tile: tile,
                producer_tile: read,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Conv2DTileSync, NoSync, RowSync, StridedSync, TileSync};

    const P: Grid = Grid::new(3, 6, 2);
    const C: Grid = Grid::new(3, 4, 1);

    #[test]
    fn builtin_policies_are_sound_for_their_dependencies() {
        let gemm = Dependency::GemmRow;
        assert_eq!(check_soundness(&TileSync, gemm, P, C), Ok(()));
        assert_eq!(check_soundness(&RowSync, gemm, P, C), Ok(()));
        assert_eq!(check_soundness(&StridedSync { stride: 3 }, gemm, P, C), Ok(()));
        let strided = Dependency::Strided { stride: 2 };
        assert_eq!(
            check_soundness(&StridedSync { stride: 2 }, strided, P, Grid::new(3, 2, 1)),
            Ok(())
        );
        assert_eq!(check_soundness(&TileSync, strided, P, Grid::new(3, 2, 1)), Ok(()));
        let conv = Dependency::Conv2D { taps: 9, halo: 1 };
        assert_eq!(check_soundness(&Conv2DTileSync { taps: 9 }, conv, P, C), Ok(()));
        assert_eq!(check_soundness(&RowSync, conv, P, C), Ok(()));
    }

    #[test]
    fn unsound_combinations_are_caught() {
        let r = check_soundness(&NoSync, Dependency::GemmRow, P, C);
        assert!(matches!(r, Err(Violation::Uncovered { .. })), "{r:?}");
        // TileSync on an im2col loop waits on the wrong (and out-of-range) semaphores.
        let conv = Dependency::Conv2D { taps: 9, halo: 0 };
        assert!(check_soundness(&TileSync, conv, P, C).is_err());
        // Conv2DTileSync without the halo rows misses the neighbours' tiles.
        struct NoHalo;
        impl SyncPolicy for NoHalo {
            fn semaphore_count(&self, p: Grid, c: Grid) -> u32 {
                Conv2DTileSync { taps: 9 }.semaphore_count(p, c)
            }
            fn post(&self, p: Grid, c: Grid, t: TileIdx) -> Option<crate::policy::Post> {
                Conv2DTileSync { taps: 9 }.post(p, c, t)
            }
            fn wait(&self, p: Grid, c: Grid, t: TileIdx, s: crate::policy::Step) -> Option<Wait> {
                // Waits only on its own row, like the reference implementation.
                (s.row == t.x)
                    .then(|| Conv2DTileSync { taps: 9 }.wait(p, c, t, s))
                    .flatten()
            }
        }
        let r = check_soundness(&NoHalo, Dependency::Conv2D { taps: 9, halo: 1 }, P, C);
        assert!(matches!(r, Err(Violation::Uncovered { .. })), "{r:?}");
    }

    #[test]
    fn a_wait_for_too_little_is_a_value_mismatch() {
        struct HalfRow;
        impl SyncPolicy for HalfRow {
            fn semaphore_count(&self, p: Grid, c: Grid) -> u32 {
                RowSync.semaphore_count(p, c)
            }
            fn post(&self, p: Grid, c: Grid, t: TileIdx) -> Option<crate::policy::Post> {
                RowSync.post(p, c, t)
            }
            fn wait(&self, p: Grid, c: Grid, t: TileIdx, s: crate::policy::Step) -> Option<Wait> {
                RowSync.wait(p, c, t, s).map(|w| Wait {
                    value: w.value / 2,
                    ..w
                })
            }
        }
        let r = check_soundness(&HalfRow, Dependency::GemmRow, P, C);
        assert_eq!(
            r,
            Err(Violation::WaitValueMismatch {
                consumer_tile: TileIdx::new(0, 0, 0),
                semaphore: 0,
                waits_for: 6,
                posted: 12
            })
        );
    }

    #[test]
    fn validate_names_the_problem() {
        use PolicyKind as K;
        let gemm = Dependency::GemmRow;
        assert_eq!(validate(K::RowSync, gemm, P, C), Ok(()));
        assert_eq!(
            validate(K::RowSync, gemm, P, Grid::new(2, 4, 1)),
            Err(PolicyError::RowTilingMismatch {
                producer_rows: 3,
                consumer_rows: 2
            })
        );
        assert_eq!(
            validate(K::StridedSync { stride: 4 }, gemm, P, C),
            Err(PolicyError::StrideDoesNotDivideColumns { stride: 4, columns: 6 })
        );
        assert_eq!(
            validate(K::StridedSync { stride: 0 }, gemm, P, C),
            Err(PolicyError::ZeroStride)
        );
        assert_eq!(
            validate(K::StridedSync { stride: 3 }, Dependency::Strided { stride: 2 }, P, C),
            Err(PolicyError::StrideMismatch {
                policy: 3,
                dependency: 2
            })
        );
        let conv = Dependency::Conv2D { taps: 9, halo: 1 };
        assert_eq!(
            validate(K::TileSync, conv, P, C),
            Err(PolicyError::TapsMismatch {
                policy: 1,
                dependency: 9
            })
        );
        assert_eq!(validate(K::Conv2DTileSync { taps: 9 }, conv, P, C), Ok(()));
        assert_eq!(
            validate(K::Conv2DTileSync { taps: 0 }, conv, P, C),
            Err(PolicyError::ZeroTaps)
        );
        assert_eq!(
            validate(K::NoSync, gemm, P, C),
            Err(PolicyError::Unsupported {
                policy: K::NoSync,
                dependency: gemm
            })
        );
        assert_eq!(validate(K::NoSync, Dependency::Independent, P, C), Ok(()));
        assert!(matches!(
            validate(K::TileSync, gemm, Grid::new(0, 1, 1), C),
            Err(PolicyError::EmptyGrid { .. })
        ));
    }

    #[test]
    fn coverage_and_reads_enumerate_tiles() {
        let mut covered = 0;
        let w = RowSync.wait(
            P,
            C,
            TileIdx::new(1, 0, 0),
            Dependency::GemmRow.step(P, TileIdx::new(1, 0, 0), 0),
        );
        for_each_covered(&RowSync, P, C, w.unwrap(), |t| {
            assert_eq!(t.x, 1);
            covered += 1;
        });
        assert_eq!(covered, 6);
        let mut reads = 0;
        for_each_read(Dependency::GemmRow, P, TileIdx::new(2, 3, 0), |t| {
            assert_eq!(t, TileIdx::new(2, reads, 0));
            reads += 1;
        });
        assert_eq!(reads, 6);
        assert!(consumer_waits(
            &TileSync,
            Dependency::GemmRow,
            P,
            C,
            TileIdx::new(0, 0, 0)
        ));
        assert!(!consumer_waits(
            &NoSync,
            Dependency::GemmRow,
            P,
            C,
            TileIdx::new(0, 0, 0)
        ));
    }
}
