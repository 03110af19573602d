//! The persistent megakernel's loop, generic over its [`Protocol`] (where tiles come from and
//! how they are posted) and its [`WorkerSet`] (what a tile computes).
//!
//! Per block of [`BLOCK_THREADS`](cusync_shared::persistent::BLOCK_THREADS) threads:
//!
//! ```text
//! thread 0: copy the descriptor to shared memory; slot[0] = wait()   // first tile, DONE or ABORT
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
//! never waits while it holds an unposted tile, so deferral cannot deadlock, and every tile
//! is posted at most one tile later, and before its block exits.

use super::control::{Ctl, Slot, DONE, LATE, NONE};
use super::hooks::TileHooks;
use super::protocol::{stage, stamp, Protocol};
use super::steps;
use super::worker::WorkerSet;
use crate::ptx::{barrier, griddep, ids};
use cusync_shared::persistent::PersistentDesc;

/// Runs the launch `desc` describes until every tile is handed out (or an error stops it).
///
/// # Safety
/// Every thread of a 1-D block of `BLOCK_THREADS` threads calls it, with the dynamic shared
/// memory `W`'s workers need, and `desc` written by the host for this launch; the grid is at
/// most the co-resident block count (the host's rule).
#[inline(always)]
pub unsafe fn megakernel<P: Protocol, W: WorkerSet>(desc: &PersistentDesc) {
    let tid = ids::tid_x();
    let warp0 = tid < 32;
    let ctl = Ctl::get();
    if P::POSTS && warp0 {
        // The scheduler thread and the posting warp touch the queues the prefill writes: wait
        // for its end when launched programmatically behind it (module docs).
        griddep::wait();
    }
    if tid == 0 {
        ctl.set_desc(desc);
        // SAFETY: thread 0, once, before the first barrier.
        unsafe { steps::start::<P>() };
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
        let mut hooks = TileHooks::<P>::new(item.tile, tid);
        // SAFETY: every thread runs the same worker on the same tile (block-uniform item).
        let known = unsafe { W::dispatch(code, &params, &mut hooks) };
        let (hidden, bad) = (hooks.hidden(), hooks.failed() || !known);
        if !hidden && warp0 {
            // SAFETY: all of warp 0, after the previous tile's barrier.
            unsafe { steps::hidden_work::<P>(tid) };
        }
        let other = cur ^ 1;
        if tid == 0 {
            // Re-read rather than keep the item in registers across the worker.
            let item = ctl.slot(src);
            if bad {
                // SAFETY: thread 0; the item came from the scheduler.
                unsafe { steps::report_bad_worker(item, if known { item.tile } else { code }) };
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
            if P::POSTS && warp0 {
                // SAFETY: all of warp 0, after the barrier that follows the tile's stores.
                unsafe { steps::flush::<P>(tid) };
            }
            if tid == 0 {
                // SAFETY: thread 0.
                unsafe { steps::wait_late::<P>() };
            }
            barrier::sync_threads();
        }
        late = !fast;
        cur = other;
    };
    if P::POSTS && last.stage == DONE && warp0 {
        // SAFETY: all of warp 0, after the last tile's barrier.
        unsafe { steps::flush::<P>(tid) };
    }
}
