//! Microbenchmark kernels for the protocol's primitives (issue 7). Each times itself with
//! `%globaltimer` where launch overhead must stay out of the number, and writes nanoseconds to
//! `out`; every spin is bounded and reports to the error slot like any other wait.

use crate::persistent::asm::vote_any;
use crate::persistent::memory::GpuMemory;
use crate::ptx::{atomics, barrier, fence, ids, time};
use crate::sync::{self, WaitSite};
use cusync_shared::layout::{ErrorSlot, WorkQueue};
use cusync_shared::persistent::{error_code, wait_queues, Poll, StageQueue, WaitError};
use cusync_shared::protocol::{post_producer_tile_lanes, push, LaunchWindow, PersistentEdge, ProtocolError};

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

/// Keeps its stream busy for `ns` nanoseconds of `%globaltimer` (one thread; it cannot hang:
/// it waits on nothing but the clock). Launched before a timed region's start event, it lets
/// the host queue the whole region while the GPU is busy, so the events time the GPU's work
/// and not the host's submission of it (METHOD.md: time the device).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn hold_stream(ns: u64) {
    let t0 = time::global_timer_ns();
    while time::global_timer_ns().wrapping_sub(t0) < ns {
        time::nanosleep(1_000);
    }
}

// ---------------------------------------------------------------------------------------------
// Persistent-mode protocol under contention: the workqueue and the scoreboard, run through the
// same code the megakernel runs (`cusync_shared::protocol` over `persistent::memory::GpuMemory`).

crate::static_shared!(fn queue_bench_last() -> *mut u32, cusync_bench_queue_last, 16);

/// Reports a protocol error of a microbenchmark into the launch's error slot (first wins).
///
/// # Safety
/// `error` is null or a valid [`ErrorSlot`].
#[inline(always)]
unsafe fn report_protocol(error: *mut ErrorSlot, stage: u32, tile: u32, e: &ProtocolError) {
    let site = WaitSite {
        stage,
        tile,
        error,
        timeout_ns: 0,
    };
    // SAFETY: forwarded contract.
    unsafe { sync::report(&site, error_code(e), e.addr(), e.seen(), e.expected()) };
}

/// Workqueue push and pop under contention, through the persistent megakernel's own protocol
/// code: producers call `cusync_shared::protocol::push`, consumers the scheduler's
/// `cusync_shared::persistent::wait_queues` (bounded `try_pop` rounds) on a one-stage queue,
/// both over [`GpuMemory`], in launch window 0 of `producers * per_producer` items.
///
/// Blocks `0..producers` are producers: thread 0 pushes tiles `b * per_producer ..
/// (b + 1) * per_producer`, then adds 1 to `*done` (release). The other blocks are consumers:
/// thread 0 pops until every ticket of the launch is taken, storing `seen[tile] = 1` for each
/// tile it gets. With `phased != 0` a consumer first waits (bounded) until every producer is
/// done, so its pops measure contention among poppers alone; with `phased == 0` consumers race
/// the producers and a pop includes any wait for its push. `out[b]` = ns of block `b`'s pushes
/// or pops, `ops[b]` = how many.
///
/// Exactly-once check, on the device: each consumer adds its pops to `check[0]`; the last
/// consumer to finish (counted on `*finished`, acquire-release) counts, with its whole warp,
/// the distinct tiles in `seen` into `check[1]`, then writes `check[2]` = 1 when both equal the
/// items pushed, 2 otherwise. Protocol errors and timeouts go to the error slot.
///
/// Launch: `producers + consumers` blocks (at least one of each) of 32 threads, all
/// co-resident; queue counters, slots (capacity >= items), `seen`, `done`, `finished` and
/// `check` zeroed.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // a kernel's parameters, each a scalar or a buffer the host owns
pub unsafe extern "ptx-kernel" fn bench_queue(
    counters: u64,
    slots: u64,
    capacity: u32,
    producers: u32,
    per_producer: u32,
    phased: u32,
    seen: *mut u32,
    done: *mut u32,
    finished: *mut u32,
    check: *mut u32,
    out: *mut u64,
    ops: *mut u32,
    error: *mut ErrorSlot,
    timeout_ns: u64,
) {
    let b = ids::block_linear();
    let lane = ids::thread_linear();
    let items = producers.wrapping_mul(per_producer);
    let queue = WorkQueue {
        counters,
        slots,
        capacity,
        stage: 0,
    };
    let window = LaunchWindow::new(0, items);
    // SAFETY: the host passes a zeroed queue of `capacity` slots and zeroed counters.
    let mem = unsafe { GpuMemory::new() };
    if b < producers {
        if lane != 0 {
            return;
        }
        let t0 = time::global_timer_ns();
        let mut pushed = 0u32;
        while pushed < per_producer {
            let tile = b * per_producer + pushed;
            if let Err(e) = push(&mem, &queue, window, tile) {
                // SAFETY: `error` is the launch's slot.
                unsafe { report_protocol(error, 0, tile, &e) };
                break;
            }
            pushed += 1;
        }
        let t1 = time::global_timer_ns();
        // SAFETY: `out` and `ops` hold one entry per block; `done` is a valid word.
        unsafe {
            *out.add(b as usize) = t1 - t0;
            *ops.add(b as usize) = pushed;
            // Release: the pushes' slot stores are visible to a consumer that sees the count.
            atomics::red_release_add_gpu(done, 1);
        }
        return;
    }
    let consumers = ids::nctaid_x() - producers;
    let flag = queue_bench_last();
    if lane == 0 {
        let site = WaitSite {
            stage: 1,
            tile: u32::MAX,
            error,
            timeout_ns,
        };
        // SAFETY: `done` is a valid word; `error` the launch's slot.
        let ready = phased == 0 || unsafe { sync::thread_wait_gpu(done, producers, &site) };
        let code = error as *const u32;
        // SAFETY (closure): `error` is null or the launch's slot, whose first word is the code.
        let aborted = || !code.is_null() && unsafe { atomics::ld_relaxed_gpu(code) } != 0;
        let t0 = time::global_timer_ns();
        let mut popped = 0u32;
        let mut stage_done = 0u32;
        if ready {
            loop {
                let got = wait_queues(
                    &mem,
                    1,
                    0,
                    timeout_ns,
                    &mut stage_done,
                    |_| StageQueue {
                        queue,
                        tiles: items,
                        upstream: 0,
                    },
                    aborted,
                );
                match got {
                    Ok(Poll::Tile { tile, .. }) if tile < items => {
                        // A plain store: published by the release below, read after the acquire.
                        // SAFETY: `seen` holds `items` words and `tile < items`.
                        unsafe { seen.add(tile as usize).write_volatile(1) };
                        popped += 1;
                    }
                    Ok(Poll::Tile { tile, .. }) => {
                        let e = ProtocolError::OutOfRange {
                            addr: slots,
                            index: tile,
                            len: items,
                        };
                        // SAFETY: `error` is the launch's slot.
                        unsafe { report_protocol(error, 1, tile, &e) };
                        break;
                    }
                    Ok(Poll::Done | Poll::Empty | Poll::Ticket { .. }) | Err(WaitError::Aborted) => break,
                    Err(WaitError::Failed(se)) => {
                        // SAFETY: as above.
                        unsafe { report_protocol(error, 1, u32::MAX, &se.error) };
                        break;
                    }
                }
            }
        }
        let t1 = time::global_timer_ns();
        // SAFETY: `out`, `ops` hold one entry per block; `check` three words; `finished` one.
        let last = unsafe {
            *out.add(b as usize) = t1 - t0;
            *ops.add(b as usize) = popped;
            atomics::atom_add_relaxed_gpu(check, popped);
            // Release this consumer's `seen` stores; acquire every earlier consumer's.
            fence::acq_rel_gpu();
            atomics::atom_add_gpu(finished, 1) == consumers - 1
        };
        // SAFETY: the block's shared flag word.
        unsafe { flag.write_volatile(last as u32) };
    }
    barrier::sync_threads();
    // SAFETY: written by thread 0 before the barrier.
    if unsafe { flag.read_volatile() } == 0 {
        return;
    }
    // The last consumer: every consumer's `seen` stores happen before its acquire (thread 0),
    // and the barrier orders them before this warp's loads.
    let mut distinct = 0u32;
    let mut i = lane;
    while i < items {
        // SAFETY: `i < items`, the length of `seen`.
        if unsafe { atomics::ld_relaxed_gpu(seen.add(i as usize)) } != 0 {
            distinct += 1;
        }
        i += ids::ntid_x();
    }
    // SAFETY: `check` holds three words.
    unsafe { atomics::atom_add_relaxed_gpu(check.add(1), distinct) };
    barrier::sync_threads();
    if lane == 0 {
        // SAFETY: as above; the barrier orders every lane's add before these loads.
        unsafe {
            let popped = atomics::ld_relaxed_gpu(check);
            let distinct = atomics::ld_relaxed_gpu(check.add(1));
            let verdict = if popped == items && distinct == items { 1 } else { 2 };
            atomics::st_release_gpu(check.add(2), verdict);
        }
    }
}

/// Scoreboard decrement through a dependency array (CSR), with the pushes of the consumer
/// tiles whose counters complete: every block (one warp) posts producer tiles `b, b + blocks,
/// ..` of `*edge` for launch `epoch` exactly as the megakernel's epilogue does (a block barrier,
/// then `cusync_shared::protocol::post_producer_tile_lanes` over the warp's 32 lanes: fence,
/// acquire-release arrivals, push). `out[b]` = ns of block `b`'s posts (lane 0's clock, from
/// before its first barrier to after the barrier that follows its last post), `ops[b]` = posts;
/// every lane adds the pushes it made to `*pushed`. Errors go to the error slot (and stop the
/// block). Nothing here waits.
///
/// Launch: any number of blocks of 32 threads; the edge's scoreboard, queue and targets as the
/// planner laid them out (`ProtocolImage`), counters zeroed for epoch 0 (or left by earlier
/// launches for later epochs).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bench_scoreboard(
    edge: *const PersistentEdge,
    epoch: u32,
    pushed: *mut u32,
    out: *mut u64,
    ops: *mut u32,
    error: *mut ErrorSlot,
) {
    let b = ids::block_linear();
    let blocks = ids::nctaid_x();
    let lane = ids::thread_linear();
    // SAFETY: the host uploaded one edge descriptor; it is read-only during the launch.
    let edge = unsafe { *edge };
    // SAFETY: the edge's addresses are the planner's image, valid for the launch.
    let mem = unsafe { GpuMemory::new() };
    let mut posts = 0u32;
    let mut mine = 0u32;
    let t0 = time::global_timer_ns();
    let mut producer = b;
    while producer < edge.deps.num_producers {
        barrier::sync_threads();
        let failed = match post_producer_tile_lanes(&mem, &edge, producer, epoch, lane, 32) {
            Ok(n) => {
                mine += n;
                false
            }
            Err(e) => {
                // SAFETY: `error` is the launch's slot.
                unsafe { report_protocol(error, 0, producer, &e) };
                true
            }
        };
        if vote_any(failed) {
            break;
        }
        posts += 1;
        producer += blocks;
    }
    barrier::sync_threads();
    let t1 = time::global_timer_ns();
    // SAFETY: `pushed` is a valid word; `out` and `ops` hold one entry per block.
    unsafe {
        atomics::atom_add_relaxed_gpu(pushed, mine);
        if lane == 0 {
            *out.add(b as usize) = t1 - t0;
            *ops.add(b as usize) = posts;
        }
    }
}
