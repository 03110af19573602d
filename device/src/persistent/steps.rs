//! The protocol's steps, out of line. Each is a `#[inline(never)]` function of no more than a
//! lane index, reading the launch from the block's shared-memory copy of the descriptor: a
//! tile worker then carries only a call at its hide step, and its register allocation (the
//! GeMM's accumulators live across that call) is not burdened with the protocol's (inlined,
//! the posting code spilled inside the tensor-core mainloop).

use super::asm;
use super::control::{Ctl, Slot, ABORT, NONE};
use super::protocol::{report, stage, trace_posted, Protocol};
use crate::ptx::barrier;
use cusync_shared::layout::ErrorCode;
use cusync_shared::persistent::FLAG_TRACE;

/// Thread 0, at kernel start (after copying the descriptor): resets the scheduler state and
/// waits for the block's first tile, into ring slot 0.
///
/// # Safety
/// Thread 0 only, once, before the kernel's first barrier; the control block holds the
/// launch's descriptor.
#[inline(never)]
pub unsafe fn start<P: Protocol>() {
    let ctl = Ctl::get();
    // SAFETY: the descriptor copy is the launch's.
    let proto = unsafe { P::at(ctl.desc()) };
    // SAFETY: thread 0, first.
    unsafe { proto.begin(&ctl) };
    ctl.set_pending(Slot::mark(NONE));
    ctl.set_next(Slot::mark(NONE));
    // SAFETY: thread 0.
    let first = unsafe { proto.wait(&ctl) };
    ctl.set_slot(0, first);
}

/// Warp 0, every lane: the work hidden under a tile: post the pending tile, then (lane 0)
/// poll for the next one unless it has one or an error stopped the block.
///
/// # Safety
/// All 32 lanes of warp 0 call it, once per tile, after the barrier that followed the pending
/// tile's stores.
#[inline(never)]
pub unsafe fn hidden_work<P: Protocol>(lane: u32) {
    let ctl = Ctl::get();
    // SAFETY: the descriptor copy is the launch's.
    let proto = unsafe { P::at(ctl.desc()) };
    if P::POSTS {
        // SAFETY: forwarded contract.
        unsafe { flush_pending(&proto, &ctl, lane) };
    }
    if lane == 0 && ctl.next().stage == NONE {
        // SAFETY: lane 0 of warp 0 is thread 0.
        let next = unsafe { proto.poll(&ctl) };
        ctl.set_next(next);
    }
}

/// Warp 0, every lane: posts the pending tile, if any.
///
/// # Safety
/// As for [`hidden_work`].
#[inline(never)]
pub unsafe fn flush<P: Protocol>(lane: u32) {
    let ctl = Ctl::get();
    // SAFETY: the descriptor copy is the launch's; forwarded contract.
    unsafe { flush_pending(&P::at(ctl.desc()), &ctl, lane) };
}

/// Thread 0, when nothing was ready at the end of a tile (after the pending tile was posted):
/// waits for the next tile into the late slot ([`ABORT`] right away if an error stopped the
/// block), and clears the prefetch.
///
/// # Safety
/// Thread 0 only.
#[inline(never)]
pub unsafe fn wait_late<P: Protocol>() {
    let ctl = Ctl::get();
    let next = ctl.next();
    let item = if next.stage == ABORT {
        next
    } else {
        // SAFETY: the descriptor copy is the launch's; thread 0.
        unsafe { P::at(ctl.desc()).wait(&ctl) }
    };
    ctl.set_slot(super::control::LATE, item);
    ctl.set_next(Slot::mark(NONE));
}

/// Thread 0: reports a tile its stage's worker could not run (`seen` = the unknown worker code,
/// or the tile outside the worker's grid) and stops the block.
///
/// # Safety
/// Thread 0 only; `item` was handed out by the scheduler.
#[inline(never)]
pub unsafe fn report_bad_worker(item: Slot, seen: u32) {
    let ctl = Ctl::get();
    // SAFETY: the descriptor copy is the launch's; the stage index is valid.
    unsafe {
        let desc = &*ctl.desc();
        let st = stage(desc, item.stage);
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
}

/// Warp 0: posts the pending tile, if any (every lane walks its share of the dependency
/// arrays), writes its trace event, and clears it. A failed post makes thread 0's next item
/// [`ABORT`].
///
/// # Safety
/// All 32 lanes of warp 0 call it; the pending tile's stores precede a block barrier that
/// every lane passed.
#[inline(always)]
unsafe fn flush_pending<P: Protocol>(proto: &P, ctl: &Ctl, lane: u32) {
    barrier::sync_warp(); // thread 0's write of `pending` is visible to every lane
    let item = ctl.pending();
    if !item.is_tile() {
        return;
    }
    // SAFETY: forwarded contract: warp 0, after the tile's barrier.
    let ok = unsafe { proto.post(item, lane) };
    let failed = asm::vote_any(!ok);
    if lane == 0 {
        // SAFETY: the descriptor copy is the launch's.
        let desc = unsafe { &*ctl.desc() };
        if failed {
            ctl.set_next(Slot::mark(ABORT));
        } else if desc.flags & FLAG_TRACE != 0 {
            // SAFETY: `item` is a tile of this launch; its start time is the pending start.
            unsafe { trace_posted(desc, item, ctl.pending_start()) };
        }
        ctl.set_pending(Slot::mark(NONE));
    }
    barrier::sync_warp();
}
