//! Microbenchmark kernels for the protocol's primitives (issue 7). Each times itself with
//! `%globaltimer` where launch overhead must stay out of the number, and writes nanoseconds to
//! `out`; every spin is bounded and reports to the error slot like any other wait.

use crate::ptx::{atomics, barrier, fence, ids, time};
use crate::sync::{self, WaitSite};
use cusync_shared::layout::ErrorSlot;

/// Ping-pong between two parties through two flags: `side` 0 posts `a` then waits for `b`,
/// side 1 waits for `a` then posts `b`, `iters` times (round `i` waits for value `i + 1`).
/// Thread 0 of the block does the protocol (release add, acquire spin), the block syncs around
/// it like a real post and wait. Side 0 writes the elapsed ns of all rounds to `out[0]`.
#[inline(always)]
unsafe fn ping_pong(side: u32, a: *mut u32, b: *mut u32, iters: u32, out: *mut u64, error: *mut ErrorSlot) {
    let site = WaitSite {
        stage: side,
        tile: 0,
        error,
        timeout_ns: 2_000_000_000,
    };
    let t0 = time::global_timer_ns();
    for i in 0..iters {
        let (post, wait) = if side == 0 { (a, b) } else { (b, a) };
        if side == 0 {
            unsafe { sync::block_post_gpu(post, 1) };
            if !unsafe { sync::block_wait_gpu(wait, i + 1, &site) } {
                return;
            }
        } else {
            if !unsafe { sync::block_wait_gpu(wait, i + 1, &site) } {
                return;
            }
            unsafe { sync::block_post_gpu(post, 1) };
        }
    }
    if side == 0 && ids::thread_linear() == 0 {
        unsafe { *out = time::global_timer_ns() - t0 };
    }
}

/// Post-to-wait within one kernel: blocks 0 and 1 ping-pong `iters` rounds (launch 2 blocks).
/// One-way latency = out[0] / (2 * iters).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bench_pingpong_in_kernel(
    flags: *mut u32,
    iters: u32,
    out: *mut u64,
    error: *mut ErrorSlot,
) {
    let side = ids::ctaid_x();
    unsafe { ping_pong(side, flags, flags.add(32), iters, out, error) };
}

/// Post-to-wait between two kernels on different streams: launch once with `side` 0 and once
/// with `side` 1 (one block each). One-way latency = out[0] / (2 * iters).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bench_pingpong_kernel(
    side: u32,
    flags: *mut u32,
    iters: u32,
    out: *mut u64,
    error: *mut ErrorSlot,
) {
    unsafe { ping_pong(side, flags, flags.add(32), iters, out, error) };
}

/// Fence cost: thread 0 of each block stores to its own word then issues a fence, `iters`
/// times. `kind` 0: `fence.acq_rel.gpu`, 1: `fence.sc.sys`, 2: `fence.proxy.async.global`
/// (sm_90a; a plain store loop elsewhere), 3: no fence (the loop's own cost). out[block] = ns.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bench_fence(words: *mut u32, iters: u32, kind: u32, out: *mut u64) {
    if ids::thread_linear() != 0 {
        return;
    }
    let b = ids::block_linear() as usize;
    let w = unsafe { words.add(b * 32) };
    let t0 = time::global_timer_ns();
    for i in 0..iters {
        unsafe { core::ptr::write_volatile(w, i) };
        match kind {
            0 => fence::acq_rel_gpu(),
            1 => fence::sc_sys(),
            #[cfg(target_feature = "sm_90a")]
            2 => fence::proxy_async_global(),
            _ => {}
        }
    }
    unsafe { *out.add(b) = time::global_timer_ns() - t0 };
}

/// `tile()`-counter contention: thread 0 of every block takes `iters` tickets with a relaxed
/// `atom.add` (what `StreamStage::next_tile` does). out[block] = ns for its `iters` tickets.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bench_tile_counter(counter: *mut u32, iters: u32, out: *mut u64) {
    if ids::thread_linear() != 0 {
        return;
    }
    let t0 = time::global_timer_ns();
    for _ in 0..iters {
        // The asm is volatile: every ticket is taken even though its value is unused.
        unsafe { atomics::atom_add_relaxed_gpu(counter, 1) };
    }
    unsafe { *out.add(ids::block_linear() as usize) = time::global_timer_ns() - t0 };
}

/// An empty kernel (launch-overhead reference).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bench_empty() {
    barrier::sync_threads();
}
