//! Synchronization policies: which semaphore a producer tile posts to, and which semaphores a
//! consumer tile waits on before it reads the producer's output (CuSync paper, "Synchronization
//! Policies"; the reference's `policies.h`).
//!
//! # The model
//!
//! A dependency joins a *producer* stage (grid `producer`) to a *consumer* stage (grid
//! `consumer`). Each dependency owns an array of `u32` semaphores.
//!
//! * **Post.** When producer tile `t` (every split-K slice of it) has written its output, it
//!   adds [`Post::amount`] to semaphore [`Post::semaphore`] ([`SyncPolicy::post`]).
//! * **Wait.** A consumer tile's main loop reads the producer's output in [`Step`]s, in the
//!   order its [`Dependency`] gives. Before each step it asks [`SyncPolicy::wait`]; `None` means
//!   "read on", `Some(w)` means "spin until semaphore `w.semaphore` reaches `w.target(epoch)`".
//! * **Epochs.** Semaphores count up for ever and are never cleared: launch `epoch` (0-based)
//!   waits for `(epoch + 1) * value` ([`Wait::target`], compared with [`reached`], which is
//!   wrap-around safe).
//!
//! A policy is sound for a dependency when, for every consumer tile, every producer tile a step
//! reads is *covered* by a wait made at or before that step: the wait is on the semaphore that
//! producer tile posts to, and the value waited for equals everything one producer launch posts
//! to that semaphore (so the wait returns only after all of those tiles posted).
//! [`check_soundness`] checks exactly that; [`validate`] rejects the (policy, dependency,
//! grids) combinations that are known to break it, with a specific [`PolicyError`].
//!
//! # Writing a policy
//!
//! Implement [`SyncPolicy`]: three small methods (and optionally the tile orders it wants).
//! The built-in ones ([`TileSync`], [`RowSync`], [`StridedSync`], [`Conv2DTileSync`],
//! [`NoSync`]) are a few lines each; so is [`RowBandSync`], which the host's planner runs as a
//! custom policy (it has no [`PolicyKind`]: stream-mode kernels do not dispatch on it). The device dispatches on [`PolicyKind`], a `#[repr(C)]`
//! enum of the built-in policies with their parameters, so kernels need no trait objects.

mod builtin;
mod dependency;
mod schedule;
mod soundness;

pub use builtin::{Conv2DTileSync, NoSync, RowBandSync, RowSync, StridedSync, TileSync};
pub use dependency::{conv2d_halo_tiles, Dependency, Step};
pub use schedule::{walk_waits, WaitSchedule, MAX_CHECKED_STEPS};
pub use soundness::{
    check_soundness, consumer_waits, for_each_covered, for_each_read, total_posted, validate, wait_covers, PolicyError,
    Violation,
};

use crate::order::TileOrder;
use crate::tile::{Grid, TileIdx};

/// What a producer tile does when it is done: add `amount` to semaphore `semaphore`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Post {
    /// Index into the dependency's semaphore array.
    pub semaphore: u32,
    /// Amount added (the reference adds 1).
    pub amount: u32,
}

/// What a consumer step waits for: semaphore `semaphore` to reach `value` per launch.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Wait {
    /// Index into the dependency's semaphore array.
    pub semaphore: u32,
    /// Total one producer launch posts to the semaphore.
    pub value: u32,
}

impl Wait {
    /// The semaphore value launch `epoch` (0-based) waits for: `(epoch + 1) * value`,
    /// wrapping like the semaphore itself.
    pub const fn target(&self, epoch: u32) -> u32 {
        self.value.wrapping_mul(epoch.wrapping_add(1))
    }
}

/// Whether a semaphore that reads `seen` has reached `target`, counting modulo 2^32 (valid
/// while the two are less than 2^31 apart, which they are for any real launch).
pub const fn reached(seen: u32, target: u32) -> bool {
    (seen.wrapping_sub(target) as i32) >= 0
}

/// A synchronization policy.
///
/// Every method is a pure function of the two grids and a tile, so the same code runs in
/// device kernels and in host planning, simulation and tests.
pub trait SyncPolicy {
    /// How many semaphores the dependency needs.
    fn semaphore_count(&self, producer: Grid, consumer: Grid) -> u32;

    /// Where producer tile `tile` posts when it is done (`None`: it does not post).
    /// Every split-K slice of a tile posts; the policy's wait values count them.
    fn post(&self, producer: Grid, consumer: Grid, tile: TileIdx) -> Option<Post>;

    /// What consumer tile `tile` waits for before `step` of its main loop (`None`: nothing).
    fn wait(&self, producer: Grid, consumer: Grid, tile: TileIdx, step: Step) -> Option<Wait>;

    /// The order the producer stage should compute its tiles in.
    fn producer_order(&self) -> TileOrder {
        TileOrder::RowMajor
    }

    /// The order the consumer stage should compute its tiles in.
    fn consumer_order(&self) -> TileOrder {
        TileOrder::RowMajor
    }
}

/// The built-in policies with their parameters: what a kernel receives to dispatch on.
#[repr(C, u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    /// No synchronization ([`NoSync`]): for independent stages only.
    #[default]
    NoSync,
    /// One semaphore per producer tile ([`TileSync`]).
    TileSync,
    /// One semaphore per producer row ([`RowSync`]).
    RowSync,
    /// One semaphore per producer row and column residue class ([`StridedSync`]).
    StridedSync {
        /// Column distance between tiles that share a semaphore.
        stride: u32,
    },
    /// One semaphore per producer tile, waited once per `taps` implicit-GeMM steps
    /// ([`Conv2DTileSync`]).
    Conv2DTileSync {
        /// Filter taps (`R * S`) per input-channel tile.
        taps: u32,
    },
}

impl PolicyKind {
    /// The policy's name without parameters ("TileSync", "StridedSync", ...).
    pub fn name(&self) -> &'static str {
        match self {
            PolicyKind::NoSync => "NoSync",
            PolicyKind::TileSync => "TileSync",
            PolicyKind::RowSync => "RowSync",
            PolicyKind::StridedSync { .. } => "StridedSync",
            PolicyKind::Conv2DTileSync { .. } => "Conv2DTileSync",
        }
    }

    /// The policy as two words `[tag, parameter]` (for buffers that must be `Pod`).
    pub const fn encode(&self) -> [u32; 2] {
        match *self {
            PolicyKind::NoSync => [0, 0],
            PolicyKind::TileSync => [1, 0],
            PolicyKind::RowSync => [2, 0],
            PolicyKind::StridedSync { stride } => [3, stride],
            PolicyKind::Conv2DTileSync { taps } => [4, taps],
        }
    }

    /// Inverse of [`PolicyKind::encode`]; `None` for an unknown tag.
    pub const fn decode(words: [u32; 2]) -> Option<Self> {
        match words {
            [0, _] => Some(PolicyKind::NoSync),
            [1, _] => Some(PolicyKind::TileSync),
            [2, _] => Some(PolicyKind::RowSync),
            [3, stride] => Some(PolicyKind::StridedSync { stride }),
            [4, taps] => Some(PolicyKind::Conv2DTileSync { taps }),
            _ => None,
        }
    }
}

/// Forwards one [`SyncPolicy`] call to the built-in policy a [`PolicyKind`] names.
macro_rules! dispatch {
    ($kind:expr, $p:ident => $call:expr) => {
        match *$kind {
            PolicyKind::NoSync => {
                let $p = NoSync;
                $call
            }
            PolicyKind::TileSync => {
                let $p = TileSync;
                $call
            }
            PolicyKind::RowSync => {
                let $p = RowSync;
                $call
            }
            PolicyKind::StridedSync { stride } => {
                let $p = StridedSync { stride };
                $call
            }
            PolicyKind::Conv2DTileSync { taps } => {
                let $p = Conv2DTileSync { taps };
                $call
            }
        }
    };
}

impl SyncPolicy for PolicyKind {
    fn semaphore_count(&self, producer: Grid, consumer: Grid) -> u32 {
        dispatch!(self, p => p.semaphore_count(producer, consumer))
    }

    fn post(&self, producer: Grid, consumer: Grid, tile: TileIdx) -> Option<Post> {
        dispatch!(self, p => p.post(producer, consumer, tile))
    }

    fn wait(&self, producer: Grid, consumer: Grid, tile: TileIdx, step: Step) -> Option<Wait> {
        dispatch!(self, p => p.wait(producer, consumer, tile, step))
    }

    fn producer_order(&self) -> TileOrder {
        dispatch!(self, p => p.producer_order())
    }

    fn consumer_order(&self) -> TileOrder {
        dispatch!(self, p => p.consumer_order())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_grow_per_epoch_and_compare_across_wrap() {
        let w = Wait {
            semaphore: 0,
            value: 48,
        };
        assert_eq!(w.target(0), 48);
        assert_eq!(w.target(2), 144);
        assert!(reached(48, w.target(0)));
        assert!(!reached(47, w.target(0)));
        assert!(reached(200, w.target(2)));
        // Near the wrap: u32::MAX - 1 + 48 wraps to 46, still past u32::MAX - 1.
        assert!(reached(46, u32::MAX - 1));
        assert!(!reached(u32::MAX - 2, u32::MAX - 1));
    }

    #[test]
    fn policy_kind_round_trips_through_words() {
        let kinds = [
            PolicyKind::NoSync,
            PolicyKind::TileSync,
            PolicyKind::RowSync,
            PolicyKind::StridedSync { stride: 12 },
            PolicyKind::Conv2DTileSync { taps: 9 },
        ];
        for k in kinds {
            assert_eq!(PolicyKind::decode(k.encode()), Some(k));
        }
        assert_eq!(PolicyKind::decode([9, 0]), None);
    }

    #[test]
    fn policy_kind_dispatches_like_the_struct() {
        let (p, c) = (Grid::new(2, 6, 2), Grid::new(2, 4, 1));
        let t = TileIdx::new(1, 5, 1);
        let k = PolicyKind::StridedSync { stride: 3 };
        let s = StridedSync { stride: 3 };
        assert_eq!(k.post(p, c, t), s.post(p, c, t));
        assert_eq!(k.semaphore_count(p, c), s.semaphore_count(p, c));
        assert_eq!(k.producer_order(), TileOrder::StridedRowMajor { stride: 3 });
        let step = Step {
            row: 1,
            k: 2,
            first_in_row: false,
        };
        assert_eq!(
            k.wait(p, c, TileIdx::new(1, 0, 0), step),
            s.wait(p, c, TileIdx::new(1, 0, 0), step)
        );
    }
}
