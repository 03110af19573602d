//! The TMA streaming probe (issue 3; `cusync_shared::tma_probe`): each block streams its
//! segments of a row-major weight through TMA boxes into `mbarrier`-tracked shared-memory
//! stages, as the path-2 GeMM's producer does, and its consumer warps read every stage back
//! (XOR of its words) instead of multiplying. So the time is what the memory system gives
//! that cut of the weight, with the GeMM's machinery and none of its arithmetic.
//!
//! Roles: warps 0 to 3 consume (each thread reads `stage_bytes / 2048` 16-byte vectors a
//! stage, then lane 0 of each warp arrives on the stage's `empty` barrier); lane 0 of warp 4
//! produces (waits for a free stage, announces the stage's bytes and issues its boxes). Every
//! wait is bounded by `timeout_ns` and reported as `PipelineTimeout` with stage
//! [`PROBE_STAGE_ID`], the block as the tile, and the barrier's address; a thread whose wait
//! timed out stops, and the block still writes its result (with fewer steps than planned,
//! which the host reports).

use crate::ptx::{barrier, ids, mbarrier, smem, time, tma};
use crate::sync::{report, WaitSite};
use cusync_shared::layout::{ErrorCode, ErrorSlot};
use cusync_shared::tma_probe::{
    ProbeBlock, ProbeSegment, TmaProbeParams, PROBE_BK, PROBE_CONSUMER_WARPS, PROBE_SMEM_ALIGN, PROBE_STAGE_ID,
};

/// Consumer threads (warps 0 to 3).
const CONSUMERS: u32 = 32 * PROBE_CONSUMER_WARPS;

/// Waits for phase `parity` of `bar` to complete, bounded by `p.timeout_ns`; on timeout
/// reports it for block `block` and returns `false`.
///
/// # Safety
/// `bar` is an initialised barrier; `p.error` is 0 or a valid [`ErrorSlot`].
#[inline(always)]
unsafe fn wait(bar: u32, parity: u32, p: &TmaProbeParams, block: u32) -> bool {
    // SAFETY: the caller's contract.
    if unsafe { mbarrier::wait_parity_bounded(bar, parity, p.timeout_ns) } {
        return true;
    }
    core::hint::cold_path();
    let site = WaitSite {
        stage: PROBE_STAGE_ID,
        tile: block,
        error: p.error as *mut ErrorSlot,
        timeout_ns: p.timeout_ns,
    };
    // SAFETY: `p.error` is 0 (ignored) or a valid slot.
    unsafe { report(&site, ErrorCode::PipelineTimeout, bar as u64, parity ^ 1, parity) };
    false
}

/// Block `b`'s segments.
///
/// # Safety
/// `p.block_segments` holds `gridDim.x + 1` offsets into `p.segments` (the host's plan).
#[inline(always)]
unsafe fn block_segments(p: &TmaProbeParams, b: u32) -> (*const ProbeSegment, u32, u32) {
    let offsets = p.block_segments as *const u32;
    // SAFETY: the caller's contract.
    unsafe {
        (
            p.segments as *const ProbeSegment,
            *offsets.add(b as usize),
            *offsets.add(b as usize + 1),
        )
    }
}

/// The producer: for every K-step of every segment, waits for the stage to be free, announces
/// its bytes and issues its boxes. Returns `false` after a wait timed out (reported).
///
/// # Safety
/// Lane 0 of warp 4, after the setup barrier; `base` is the 1024-aligned stage base and `bars`
/// the barriers' address; the params are the host's (module docs).
#[inline(always)]
unsafe fn produce(p: &TmaProbeParams, base: u32, bars: u32, block: u32) -> bool {
    let st = &p.stage;
    let stage_bytes = st.stage_bytes();
    let (map_wide, map_narrow, map_batch) = (p.maps, p.maps + 128, p.maps + 256);
    // SAFETY: the caller's contract.
    let (segs, first, last) = unsafe { block_segments(p, block) };
    let (mut s, mut phase) = (0u32, 0u32);
    for i in first..last {
        // SAFETY: `i` is inside the block's range of the host's array.
        let seg = unsafe { *segs.add(i as usize) };
        for kt in seg.k_begin..seg.k_end {
            // A fresh barrier counts its (virtual) previous phase, parity 1, as complete.
            // SAFETY: initialised barrier.
            if !unsafe { wait(bars + 8 * (p.stages + s), phase ^ 1, p, block) } {
                return false;
            }
            let full = bars + 8 * s;
            let dst = base + s * stage_bytes;
            let k0 = kt * PROBE_BK;
            // SAFETY: the stage is free (its consumers released it); its boxes fill exactly
            // `stage_bytes`, announced first; destinations keep their swizzle's alignment (every
            // box is a multiple of 1024 bytes from the 1024-aligned base); the maps are the host's.
            unsafe {
                mbarrier::arrive_expect_tx(full, stage_bytes);
                for j in 0..st.wide_boxes {
                    tma::load_2d(
                        dst + j * st.wide_box_bytes(),
                        map_wide,
                        seg.col0 + j * st.wide_cols,
                        k0,
                        full,
                    );
                }
                let narrow0 = seg.col0 + st.wide_boxes * st.wide_cols;
                for j in 0..st.narrow_boxes {
                    tma::load_2d(
                        dst + st.narrow_offset(j),
                        map_narrow,
                        narrow0 + j * st.narrow_cols,
                        k0,
                        full,
                    );
                }
                if st.batch_box_rows != 0 {
                    tma::load_2d(dst + st.batch_offset(), map_batch, k0, 0, full);
                }
            }
            s += 1;
            if s == p.stages {
                s = 0;
                phase ^= 1;
            }
        }
    }
    true
}

/// A consumer thread: for every stage the producer fills, waits for it, XORs its share of the
/// stage's words and releases it. Returns the XOR and the stages taken (fewer than planned
/// after a wait timed out, reported).
///
/// # Safety
/// A thread of warps 0 to 3, after the setup barrier; as for [`produce`].
#[inline(always)]
unsafe fn consume(p: &TmaProbeParams, base: u32, bars: u32, block: u32, tid: u32) -> (u32, u32, u64) {
    let stage_bytes = p.stage.stage_bytes();
    let rounds = stage_bytes / (16 * CONSUMERS);
    // SAFETY: the caller's contract.
    let (segs, first, last) = unsafe { block_segments(p, block) };
    let (mut s, mut phase) = (0u32, 0u32);
    let (mut acc, mut steps, mut t_first) = (0u32, 0u32, 0u64);
    for i in first..last {
        // SAFETY: as in `produce`.
        let seg = unsafe { *segs.add(i as usize) };
        for _ in seg.k_begin..seg.k_end {
            // SAFETY: initialised barrier.
            if !unsafe { wait(bars + 8 * s, phase, p, block) } {
                return (acc, steps, t_first);
            }
            if steps == 0 {
                t_first = time::global_timer_ns();
            }
            let at = base + s * stage_bytes + 16 * tid;
            for r in 0..rounds {
                // SAFETY: inside the stage, whose bytes landed (`full` completed); 16-byte
                // aligned (the stage size is a multiple of 2048).
                let v = unsafe { smem::ld_v4_u32(at + r * 16 * CONSUMERS) };
                acc ^= v[0] ^ v[1] ^ v[2] ^ v[3];
            }
            // Every lane's reads of the stage are done before lane 0 frees it.
            barrier::sync_warp();
            if tid.is_multiple_of(32) {
                // SAFETY: initialised barrier; one arrival per consumer warp.
                unsafe { mbarrier::arrive(bars + 8 * (p.stages + s)) };
            }
            steps += 1;
            s += 1;
            if s == p.stages {
                s = 0;
                phase ^= 1;
            }
        }
    }
    (acc, steps, t_first)
}

/// The TMA streaming probe (`cusync_shared::tma_probe`): block `b` streams its segments and
/// writes `out[b]`.
///
/// # Safety
/// Launched with [`cusync_shared::tma_probe::PROBE_THREADS`] threads a block and
/// `p.stage.smem_bytes(p.stages)` bytes of dynamic shared memory; `p` as the host plans it:
/// `2 <= stages <= PROBE_MAX_STAGES`, the stage size a multiple of `PROBE_STAGE_QUANTUM`, the
/// maps encoded for the boxes the stage names, `gridDim.x + 1` segment offsets and one
/// `ProbeBlock` per block.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bench_tma_stream(p: TmaProbeParams) {
    let tid = ids::tid_x();
    let block = ids::block_linear();
    let dynamic = smem::dynamic_addr();
    let base = (dynamic + PROBE_SMEM_ALIGN - 1) & !(PROBE_SMEM_ALIGN - 1);
    let bars = base + p.stage.barrier_offset(p.stages);
    let sums = base + p.stage.checksum_offset(p.stages);
    if tid == 0 {
        for s in 0..p.stages {
            // SAFETY: the barriers lie inside the dynamic area after the stages; nobody uses
            // them before the barrier below.
            unsafe {
                mbarrier::init(bars + 8 * s, 1);
                mbarrier::init(bars + 8 * (p.stages + s), PROBE_CONSUMER_WARPS);
            }
        }
        mbarrier::fence_init();
    }
    barrier::sync_threads();
    let t_start = time::global_timer_ns();
    let mut result = (0u32, 0u32, 0u64);
    if tid < CONSUMERS {
        // SAFETY: a consumer thread after the setup barrier; the launch's contract.
        result = unsafe { consume(&p, base, bars, block, tid) };
        // SAFETY: this thread's word of the checksum area (inside the dynamic area).
        unsafe { smem::st_volatile_u32(sums + 4 * tid, result.0) };
    } else if tid == CONSUMERS {
        // SAFETY: lane 0 of warp 4 after the setup barrier; the launch's contract.
        unsafe { produce(&p, base, bars, block) };
    }
    barrier::sync_threads();
    if tid == 0 {
        let mut checksum = 0u32;
        for t in 0..CONSUMERS {
            // SAFETY: written by consumer `t` before the barrier above.
            checksum ^= unsafe { smem::ld_volatile_u32(sums + 4 * t) };
        }
        let out = ProbeBlock {
            checksum,
            steps: result.1,
            sm: ids::sm_id(),
            written: 1,
            t_start,
            t_first: result.2,
            t_end: time::global_timer_ns(),
        };
        // SAFETY: the host sized `out` for one `ProbeBlock` per block; one thread writes it.
        unsafe { *(p.out as *mut ProbeBlock).add(block as usize) = out };
    }
}
