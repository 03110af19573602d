//! The persistent megakernel's loop, generic over its [`Protocol`] (where tiles come from and
//! how they are posted) and its [`WorkerSet`] (what a tile computes).
//!
//! Per block of [`BLOCK_THREADS`](cusync_shared::persistent::BLOCK_THREADS) threads:
//!
//! ```text
//! thread 0: slot[0] = wait()                                  // first tile, DONE or ABORT
//! bar.sync
//! loop i:
//!     item = slot[i % 2] (or the late slot)                   // every thread
//!     DONE / ABORT -> leave
//!     worker(item)   -- at its hide step, hidden work:         // all threads, same tile
//!                          warp 0: post the pending tile (i - 1)
//!                          thread 0: next = poll()             // prefetch, non-blocking
//!     (no hide step reached: the hidden work runs here)
//!     thread 0: pending = item; slot[(i + 1) % 2] = next (maybe NONE)
//!     bar.sync                                                 // item's stores all issued
//!     slot[(i + 1) % 2] == NONE (nothing was ready):           // every thread sees the same
//!         warp 0: post pending (item i); thread 0: late slot = wait()
//!         bar.sync
//! warp 0: post the pending tile (after DONE)
//! ```
//!
//! A finished tile's post is thus deferred into the next tile's hide step, where the block
//! waits for its first loads anyway, unless the block would otherwise wait for work: a block
//! never polls (blocks) while it holds an unposted tile, so deferral cannot deadlock, and
//! every tile is posted at most one tile later, and before its block exits.

use super::asm;
use super::control::{Ctl, Slot, ABORT, DONE, LATE, NONE};
use super::hooks::TileHooks;
use super::protocol::{report, stage, stamp, trace_posted, Protocol};
use super::worker::WorkerSet;
use crate::ptx::{barrier, ids};
use cusync_shared::layout::ErrorCode;
use cusync_shared::persistent::{PersistentDesc, FLAG_TRACE};

/// A block's view of its launch, shared by the loop and the tile hooks.
pub struct Block<'a, P: Protocol> {
    desc: &'a PersistentDesc,
    proto: &'a P,
    ctl: Ctl,
    tid: u32,
}

impl<P: Protocol> Block<'_, P> {
    /// The protocol work hidden under a tile: warp 0 posts the pending tile, then thread 0
    /// polls for the next one (unless it has one, or an error stopped the block).
    ///
    /// # Safety
    /// Every thread of the block calls it once per tile, at the same point.
    #[inline(always)]
    pub unsafe fn hidden_work(&self) {
        if P::POSTS && self.tid < 32 {
            // SAFETY: all of warp 0 is here.
            unsafe { self.flush_pending() };
        }
        if self.tid == 0 && self.ctl.next().stage == NONE {
            // SAFETY: thread 0.
            let next = unsafe { self.proto.poll(&self.ctl) };
            self.ctl.set_next(next);
        }
    }

    /// Warp 0: posts the pending tile, if any (every lane walks its share of the dependency
    /// array), writes its trace event, and clears it. A failed post makes thread 0's next item
    /// [`ABORT`].
    ///
    /// # Safety
    /// All 32 lanes of warp 0 call it; the pending tile's stores precede a block barrier that
    /// every lane passed.
    #[inline(always)]
    unsafe fn flush_pending(&self) {
        barrier::sync_warp(); // thread 0's write of `pending` is visible to every lane
        let item = self.ctl.pending();
        if !item.is_tile() {
            return;
        }
        let lane = self.tid & 31;
        // SAFETY: forwarded contract: warp 0, after the tile's barrier.
        let ok = unsafe { self.proto.post(item, lane) };
        let failed = asm::vote_any(!ok);
        if lane == 0 {
            if failed {
                self.ctl.set_next(Slot::mark(ABORT));
            } else if self.desc.flags & FLAG_TRACE != 0 {
                // SAFETY: `item` is a tile of this launch; its start time is the pending start.
                unsafe { trace_posted(self.desc, &self.ctl, item) };
            }
            self.ctl.set_pending(Slot::mark(NONE));
        }
        barrier::sync_warp();
    }
}

/// Runs the launch `desc` describes until every tile is handed out (or an error stops it).
///
/// # Safety
/// Every thread of a 1-D block of `BLOCK_THREADS` threads calls it, with the dynamic shared
/// memory `W`'s workers need; the grid is at most the co-resident block count (the host's
/// rule: nothing here waits for a block that is not running, but a block that is not resident
/// cannot help); `proto` was built from `desc`.
#[inline(always)]
pub unsafe fn megakernel<P: Protocol, W: WorkerSet>(desc: &PersistentDesc, proto: &P) {
    let tid = ids::tid_x();
    let block = Block {
        desc,
        proto,
        ctl: Ctl::get(),
        tid,
    };
    let ctl = &block.ctl;
    if tid == 0 {
        // SAFETY: thread 0, first.
        unsafe { proto.begin(ctl) };
        ctl.set_pending(Slot::mark(NONE));
        ctl.set_next(Slot::mark(NONE));
        // SAFETY: thread 0.
        let first = unsafe { proto.wait(ctl) };
        ctl.set_slot(0, first);
    }
    barrier::sync_threads();
    let mut cur = 0usize;
    let mut late = false;
    let last = loop {
        let src = if late { LATE } else { cur };
        let item = ctl.slot(src);
        if !item.is_tile() {
            break item;
        }
        if P::POSTS && tid == 0 {
            ctl.set_current_start(stamp(desc));
        }
        // SAFETY: the scheduler hands out indices below `num_stages`.
        let st = unsafe { stage(desc, item.stage) };
        let params = st.params;
        let code = st.worker;
        let mut hooks = TileHooks::new(&block, item.tile);
        // SAFETY: every thread runs the same worker on the same tile (block-uniform item).
        let known = unsafe { W::dispatch::<P>(code, &params, &mut hooks) };
        let (hidden, bad) = (hooks.hidden(), hooks.failed() || !known);
        if !hidden {
            // SAFETY: every thread reaches this point with the same `hidden`.
            unsafe { block.hidden_work() };
        }
        let other = cur ^ 1;
        if tid == 0 {
            // Re-read rather than keep the item in registers across the worker.
            let item = ctl.slot(src);
            if bad {
                // SAFETY: the launch's error slot; the stage index is valid.
                unsafe {
                    let st = stage(desc, item.stage);
                    let seen = if known { item.tile } else { code };
                    let addr = st as *const _ as u64;
                    report(
                        desc,
                        st.stage,
                        item.tile,
                        ErrorCode::BadWorker,
                        addr,
                        seen,
                        st.grid.count(),
                    );
                }
                ctl.set_next(Slot::mark(ABORT));
            } else if P::POSTS {
                ctl.set_pending(item);
                ctl.set_pending_start(ctl.current_start());
            }
            ctl.set_slot(other, ctl.next());
            ctl.set_next(Slot::mark(NONE));
        }
        barrier::sync_threads(); // the tile's stores are issued; the next slot is written
        let fast = ctl.slot_stage(other) != NONE;
        if !fast {
            // Nothing was ready: post what this block holds before waiting for work.
            if P::POSTS && tid < 32 {
                // SAFETY: all of warp 0, after the barrier that follows the tile's stores.
                unsafe { block.flush_pending() };
            }
            if tid == 0 {
                let next = ctl.next();
                let late_item = if next.stage == ABORT {
                    next
                } else {
                    // SAFETY: thread 0.
                    unsafe { proto.wait(ctl) }
                };
                ctl.set_slot(LATE, late_item);
                ctl.set_next(Slot::mark(NONE));
            }
            barrier::sync_threads();
        }
        late = !fast;
        cur = other;
    };
    if P::POSTS && last.stage == DONE && tid < 32 {
        // SAFETY: all of warp 0, after the last tile's barrier.
        unsafe { block.flush_pending() };
    }
}
