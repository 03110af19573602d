//! The protocol's memory operations on the device (DESIGN.md, "Memory ordering").
//!
//! * post: `bar.sync` (every thread's stores issued) -> one thread: `fence.acq_rel.gpu`, then
//!   `red.relaxed.gpu.global.add.u32` (`.sys` when the reader is on another GPU; the fence and
//!   the relaxed add are a release pattern);
//! * wait: one thread spins on `ld.acquire.gpu.global.u32` with `nanosleep` backoff and a
//!   timeout -> `bar.sync`. On timeout the CTA records where it was stuck in the launch's
//!   [`ErrorSlot`] and every thread of the block learns it, so the kernel can exit cleanly.
//!
//! Counters count up for ever, so "reached" means `seen - expected` is non-negative as a
//! wrapping signed difference.

use crate::ptx::{atomics, barrier, fence, ids, time};
use cusync_shared::layout::{ErrorCode, ErrorSlot};

crate::static_shared!(fn block_flag() -> *mut u32, cusync_sync_block_flag, 16);

/// Polls a wait makes before it starts sleeping between polls.
pub const SPIN_POLLS: u32 = 64;

/// Where a wait happens, for the error report if it times out.
#[derive(Clone, Copy)]
pub struct WaitSite {
    /// Stage id that waits.
    pub stage: u32,
    /// Linear tile id it works on.
    pub tile: u32,
    /// The launch's error slot (may be null: then a timeout is only returned).
    pub error: *mut ErrorSlot,
    /// Bound on the wait in nanoseconds.
    pub timeout_ns: u64,
}

/// Whether a counter that counts up for ever has reached `expected`: the protocol fact lives
/// once, in `cusync_shared::policy`.
pub use cusync_shared::policy::reached;

/// One thread spins until `*sem` reaches `expected` (acquire, gpu scope) or the timeout passes.
/// Returns `true` when reached; on timeout records the error and returns `false`.
///
/// # Safety
/// `sem` is a valid global `u32`; `site.error`, if not null, a valid [`ErrorSlot`].
#[inline(always)]
pub unsafe fn thread_wait_gpu(sem: *const u32, expected: u32, site: &WaitSite) -> bool {
    unsafe { thread_wait(sem, expected, site, false, ErrorCode::SemaphoreTimeout) }
}

/// As [`thread_wait_gpu`], at system scope (producer on another GPU).
///
/// # Safety
/// As for [`thread_wait_gpu`].
#[inline(always)]
pub unsafe fn thread_wait_sys(sem: *const u32, expected: u32, site: &WaitSite) -> bool {
    unsafe { thread_wait(sem, expected, site, true, ErrorCode::SemaphoreTimeout) }
}

/// As [`thread_wait_gpu`], reporting a timeout as `code` (the wait kernel reports
/// [`ErrorCode::WaitKernelTimeout`]).
///
/// # Safety
/// As for [`thread_wait_gpu`].
#[inline(always)]
pub unsafe fn thread_wait(sem: *const u32, expected: u32, site: &WaitSite, sys: bool, code: ErrorCode) -> bool {
    let load = |p| unsafe {
        if sys {
            atomics::ld_acquire_sys(p)
        } else {
            atomics::ld_acquire_gpu(p)
        }
    };
    let mut seen = load(sem);
    if reached(seen, expected) {
        return true;
    }
    let start = time::global_timer_ns();
    // Poll without sleeping first: on the H200 `nanosleep` of a few ns sleeps about a
    // microsecond, which would be the whole post-to-wait latency. Back off only after
    // `SPIN_POLLS` polls (a few microseconds), so long waits do not hammer L2.
    let mut polls = 0u32;
    let mut backoff = 32u32;
    loop {
        if polls < SPIN_POLLS {
            polls += 1;
        } else {
            time::nanosleep(backoff);
            if backoff < 256 {
                backoff *= 2;
            }
        }
        seen = load(sem);
        if reached(seen, expected) {
            return true;
        }
        if time::global_timer_ns().wrapping_sub(start) > site.timeout_ns {
            unsafe { report(site, code, sem as u64, seen, expected) };
            return false;
        }
    }
}

/// Records a timeout in the launch's error slot; only the first reporter writes its fields.
///
/// # Safety
/// `site.error`, if not null, is a valid [`ErrorSlot`] in global memory.
pub unsafe fn report(site: &WaitSite, code: ErrorCode, address: u64, seen: u32, expected: u32) {
    let slot = site.error;
    if slot.is_null() {
        return;
    }
    unsafe {
        let code_ptr = core::ptr::addr_of_mut!((*slot).code);
        if atomics::atom_cas_gpu(code_ptr, 0, code as u32) != 0 {
            return; // another CTA reported first
        }
        (*slot).stage = site.stage;
        (*slot).tile = site.tile;
        (*slot).seen = seen;
        (*slot).expected = expected;
        (*slot).cta = ids::block_linear();
        (*slot).sm = ids::sm_id();
        (*slot).address = address;
        (*slot).time_ns = time::global_timer_ns();
        fence::acq_rel_gpu();
        atomics::st_release_gpu(core::ptr::addr_of_mut!((*slot).complete), 1);
    }
}

/// Block-wide wait: thread 0 waits (gpu scope), then the block synchronizes. Every thread gets
/// the same answer; `false` means the wait timed out (and was reported): exit the tile.
///
/// # Safety
/// As for [`thread_wait_gpu`]; every thread of the block calls it.
#[inline(always)]
pub unsafe fn block_wait_gpu(sem: *const u32, expected: u32, site: &WaitSite) -> bool {
    unsafe { block_wait(sem, expected, site, false) }
}

/// As [`block_wait_gpu`], with thread 0's acquire loads at system scope when `sys` (the
/// producer is on another GPU: [`cusync_shared::placement::Scope::Sys`]).
///
/// # Safety
/// As for [`block_wait_gpu`].
#[inline(always)]
pub unsafe fn block_wait(sem: *const u32, expected: u32, site: &WaitSite, sys: bool) -> bool {
    let flag = block_flag();
    if ids::thread_linear() == 0 {
        let ok = unsafe { thread_wait(sem, expected, site, sys, ErrorCode::SemaphoreTimeout) };
        unsafe { flag.write_volatile(ok as u32) };
    }
    barrier::sync_threads();
    let ok = unsafe { flag.read_volatile() } != 0;
    barrier::sync_threads(); // the flag may be rewritten by the next wait
    ok
}

/// Block-wide post: the block synchronizes (every thread's stores issued), then thread 0 makes
/// them visible (`fence.acq_rel.gpu`) and adds `value` to `*sem` ([`thread_post_gpu`]: the
/// fence and the add are a release pattern).
///
/// # Safety
/// `sem` is a valid global `u32`; every thread of the block calls it.
#[inline(always)]
pub unsafe fn block_post_gpu(sem: *mut u32, value: u32) {
    barrier::sync_threads();
    if ids::thread_linear() == 0 {
        unsafe { thread_post_gpu(sem, value) };
    }
}

/// One thread's post, after a barrier that every writer of the tile passed (block-wide or a
/// named barrier over the writers): `fence.acq_rel.gpu`, then a relaxed add of `value`.
///
/// The fence followed by a strong (relaxed) write is a release pattern of the PTX memory
/// model, so the add publishes everything the fence orders. A `red.release` after the fence
/// would order it all a second time: ptxas emits the release as its own `MEMBAR.ALL.GPU`,
/// which followed the fence's on every post (sm_90a SASS).
///
/// # Safety
/// `sem` is a valid global `u32`; the tile's writers synchronized with this thread first.
#[inline(always)]
pub unsafe fn thread_post_gpu(sem: *mut u32, value: u32) {
    fence::acq_rel_gpu();
    unsafe { atomics::red_relaxed_add_gpu(sem, value) };
}

/// As [`thread_post_gpu`] for a reader on another GPU: `fence.sc.sys` and a `.sys` relaxed add
/// (a release pattern, as there).
///
/// # Safety
/// As for [`thread_post_gpu`].
#[inline(always)]
pub unsafe fn thread_post_sys(sem: *mut u32, value: u32) {
    fence::sc_sys();
    unsafe { atomics::red_relaxed_add_sys(sem, value) };
}

/// As [`block_post_gpu`] for a reader on another GPU: `fence.sc.sys` and a `.sys` release add.
///
/// # Safety
/// As for [`block_post_gpu`].
#[inline(always)]
pub unsafe fn block_post_sys(sem: *mut u32, value: u32) {
    barrier::sync_threads();
    if ids::thread_linear() == 0 {
        unsafe { thread_post_sys(sem, value) };
    }
}
