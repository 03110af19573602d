//! The hooks a tile kernel calls on its stage, so one kernel body serves every mode:
//! unsynchronized (StreamSync baseline: [`NoHooks`], compiled out), stream mode (tile from the
//! stage's order through an atomic counter, waits on the policy's semaphores, posts after the
//! store) and persistent mode (tiles from a workqueue, posts through scoreboards).
//!
//! Every method is called by *all* threads of the block, in the same order; implementations do
//! the one-thread-then-`bar.sync` dance themselves.

use cusync_shared::{Grid, TileIdx};

/// What a tile kernel asks of its stage.
pub trait StageHooks {
    /// The next tile this block computes, or `None` when it has no more work.
    ///
    /// # Safety
    /// Called by every thread of the block.
    unsafe fn next_tile(&mut self, grid: Grid) -> Option<TileIdx>;

    /// Called before the loads of K-step `k_step` (in units of the kernel's K tile) of the
    /// *dependent* operand of `tile`. Returns `false` if the wait timed out (it was reported):
    /// the kernel must then stop working on the tile and return.
    ///
    /// # Safety
    /// Called by every thread of the block.
    unsafe fn wait_dependent(&mut self, tile: TileIdx, k_step: u32) -> bool;

    /// Called after every thread's stores of `tile` were issued.
    ///
    /// # Safety
    /// Called by every thread of the block.
    unsafe fn post(&mut self, tile: TileIdx);
}

/// No synchronization: each block computes the tile of its `blockIdx` once, never waits, never
/// posts. The unsynchronized kernels use it, so they are the same code with the hooks compiled out.
pub struct NoHooks {
    taken: bool,
}

impl NoHooks {
    /// Hooks for one tile per block, taken from `blockIdx`.
    #[inline(always)]
    pub fn new() -> Self {
        Self { taken: false }
    }
}

impl Default for NoHooks {
    fn default() -> Self {
        Self::new()
    }
}

impl StageHooks for NoHooks {
    #[inline(always)]
    unsafe fn next_tile(&mut self, grid: Grid) -> Option<TileIdx> {
        if self.taken {
            return None;
        }
        self.taken = true;
        let t = TileIdx::new(
            crate::ptx::ids::ctaid_x(),
            crate::ptx::ids::ctaid_y(),
            crate::ptx::ids::ctaid_z(),
        );
        if grid.contains(t) {
            Some(t)
        } else {
            None
        }
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, _tile: TileIdx, _k_step: u32) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn post(&mut self, _tile: TileIdx) {}
}
