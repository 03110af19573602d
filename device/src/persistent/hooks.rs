//! [`TileHooks`]: the [`StageHooks`] a tile worker runs under in persistent mode. The
//! megakernel hands it exactly one tile; dependencies are already satisfied (a tile is only
//! popped once every producer tile it reads has posted), so there is nothing to wait for, and
//! the post is the megakernel's epilogue. What the hooks do instead is run the block's
//! *hidden* protocol work ([`steps::hidden_work`]: post the previous tile, prefetch the next)
//! at the worker's hide step, while the block waits for its first loads.

use core::marker::PhantomData;

use super::protocol::Protocol;
use super::steps;
use crate::stage::StageHooks;
use cusync_shared::{Grid, TileIdx};

/// Hooks for one tile of a persistent launch.
pub struct TileHooks<P: Protocol> {
    tile: u32,
    tid: u32,
    hide_step: u32,
    taken: bool,
    hidden: bool,
    failed: bool,
    _protocol: PhantomData<P>,
}

impl<P: Protocol> TileHooks<P> {
    /// Hooks that hand linear tile `tile` once to the block (this thread is `tid`).
    #[inline(always)]
    pub fn new(tile: u32, tid: u32) -> Self {
        Self {
            tile,
            tid,
            hide_step: 0,
            taken: false,
            hidden: false,
            failed: false,
            _protocol: PhantomData,
        }
    }

    /// Sets the first `wait_dependent` K-step at which the hidden work runs (the worker's
    /// choice: where the block waits for memory anyway).
    #[inline(always)]
    pub fn set_hide_step(&mut self, step: u32) {
        self.hide_step = step;
    }

    /// Whether the hidden work ran during the tile (else the megakernel runs it after).
    #[inline(always)]
    pub fn hidden(&self) -> bool {
        self.hidden
    }

    /// Whether the tile lay outside the worker's grid (nothing was computed).
    #[inline(always)]
    pub fn failed(&self) -> bool {
        self.failed
    }
}

impl<P: Protocol> StageHooks for TileHooks<P> {
    #[inline(always)]
    unsafe fn next_tile(&mut self, grid: Grid) -> Option<TileIdx> {
        if self.taken {
            return None;
        }
        self.taken = true;
        if self.tile < grid.count() {
            Some(grid.tile(self.tile))
        } else {
            // The host checks grids before launching; a mismatch is reported, not computed.
            self.failed = true;
            None
        }
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, _tile: TileIdx, k_step: u32) -> bool {
        if !self.hidden && k_step >= self.hide_step {
            if self.tid < 32 {
                // SAFETY: every thread calls `wait_dependent` in the same order, so all of
                // warp 0 is here, after the barrier that ended the previous tile.
                unsafe { steps::hidden_work::<P>(self.tid) };
            }
            self.hidden = true;
        }
        true
    }

    #[inline(always)]
    unsafe fn post(&mut self, _tile: TileIdx) {}
}
