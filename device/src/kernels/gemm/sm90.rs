//! Tensor-core GeMM, path 2 (sm_90a): TMA loads into `mbarrier`-tracked shared-memory stages,
//! `wgmma` warpgroups, warp specialization, persistent blocks, `setmaxnreg`.
//!
//! Same problem as path 1 (`C[M,N] = epilogue(A[M,K] x B[K,N])`, bf16/f16 in, f32 accumulate,
//! bf16/f16/f32 out, four layouts, none/bias/GeLU/bias+GeLU, any `M, N, K >= 1`), with the
//! launch facts in `cusync_shared::gemm_sm90`:
//!
//! * **Warpgroup 0, producer.** Gives registers back (`setmaxnreg.dec`); one thread walks the
//!   block's tiles and K stages: waits for stage `s` to be empty, announces its bytes on
//!   `full[s]` and issues the TMA loads of A's and B's boxes (zero-filled past the edges).
//! * **Warpgroups 1 and 2, consumers.** Take registers (`setmaxnreg.inc`); each owns 64 rows of
//!   the 128-row tile: waits on `full[s]`, issues four `wgmma.m64nBNk16` (one per k16 of the
//!   64-wide stage), keeps one group in flight and releases the previous stage to the producer
//!   (`empty[s]`, one arrival per warp), then stores its rows straight from the accumulators
//!   with the path-1 epilogue (bias, GeLU, conversion, edge guards).
//!
//! * **Hooks.** The body [`gemm_ws`] takes its tiles from a [`WsHooks`]: the plain kernels'
//!   [`RasterHooks`] (grouped raster order, nothing waited or posted), stream mode's
//!   `StreamStage`, and the persistent megakernel's `crate::persistent::sm90::PersistentWs`,
//!   whose tiles belong to different stages: the producer and the consumers read each tile's
//!   operands, tensor maps and epilogue through `WsHooks::params` (the kernel parameter itself
//!   for single-stage hooks), and warp 1 of warpgroup 0 stays alive as the post warp.
//!
//! Shared memory per stage: A's 128 x 64 tile then B's `BN` x 64 tile, each in the 128-byte
//! swizzle layout TMA writes and `wgmma` reads (K-major operands as one box of 128-byte rows;
//! MN-major operands as boxes of 64 columns x 64 K-rows, 8 KiB apart). Every pipeline wait is
//! bounded by `timeout_ns` and reported as [`ErrorCode::PipelineTimeout`].

use super::epilogue::store_acc_row;
use crate::ptx::{atomics, barrier, fence, global, ids, mbarrier, smem, time, tma, wgmma};
use crate::stage::{WsHooks, WsTile, WS_STOP};
use crate::stream::StreamStage;
use crate::sync::{report, WaitSite};
use cusync_shared::gemm_sm90::{
    raster_tile, split_range, TmaGemmParams, WgTileShape, WG_BK, WG_BM, WG_BOX_BYTES, WG_CONSUMER_REGS,
    WG_PRODUCER_REGS, WG_SMEM_ALIGN, WG_TILE_128X128, WG_TILE_128X256,
};
use cusync_shared::layout::{ErrorCode, ErrorSlot, StageDesc};

/// Element types `wgmma` multiplies.
pub trait WgElem {
    /// bf16 (else f16).
    const BF16: bool;
}

impl WgElem for super::Bf16 {
    const BF16: bool = true;
}

impl WgElem for super::F16 {
    const BF16: bool = false;
}

/// Waits until `bar`'s phase of parity `parity` completed, bounded by `p.timeout_ns`; on
/// timeout reports [`ErrorCode::PipelineTimeout`] for tile `tile` of stage index `stage`
/// (`u32::MAX` for none; the report names the stage by [`WsHooks::stage_id`]) and returns
/// `false`.
///
/// # Safety
/// `bar` is an initialised barrier; `p.error` is 0 or a valid [`ErrorSlot`].
#[inline(always)]
unsafe fn wait_phase<H: WsHooks>(bar: u32, parity: u32, p: &TmaGemmParams, hooks: &H, stage: u32, tile: u32) -> bool {
    // SAFETY: the caller's contract.
    if unsafe { mbarrier::try_wait_parity(bar, parity) } {
        return true;
    }
    let start = time::global_timer_ns();
    loop {
        // SAFETY: as above (`try_wait` suspends the thread a while before answering false).
        if unsafe { mbarrier::try_wait_parity(bar, parity) } {
            return true;
        }
        if time::global_timer_ns().wrapping_sub(start) > p.timeout_ns {
            core::hint::cold_path();
            let site = WaitSite {
                // SAFETY: the hooks' own lookup (cold path).
                stage: unsafe { hooks.stage_id(stage) },
                tile,
                error: p.error as *mut ErrorSlot,
                timeout_ns: p.timeout_ns,
            };
            // SAFETY: `p.error` is 0 (ignored) or a valid slot.
            unsafe { report(&site, ErrorCode::PipelineTimeout, bar as u64, parity ^ 1, parity) };
            return false;
        }
    }
}

/// Issues `wgmma.m64n{2R}k16` for the element type and layouts (`AT`: A MN-major, `BT`: B
/// K-major); `R` is 64 or 128 accumulator registers.
///
/// # Safety
/// As for the `wgmma` wrappers.
#[inline(always)]
unsafe fn mma<E: WgElem, const R: usize, const AT: bool, const BT: bool>(
    acc: &mut [f32; R],
    da: u64,
    db: u64,
    scale_d: u32,
) {
    // trans-a = AT (A MN-major); trans-b = !BT (B stored [K, N] is MN-major).
    // SAFETY: the casts only rename `[f32; R]` as the same-sized array of the branch taken.
    unsafe {
        if R == 64 {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 64]);
            match (E::BF16, AT, BT) {
                (true, false, false) => wgmma::mma_bf16_m64n128k16_t01(d, da, db, scale_d),
                (true, false, true) => wgmma::mma_bf16_m64n128k16_t00(d, da, db, scale_d),
                (true, true, false) => wgmma::mma_bf16_m64n128k16_t11(d, da, db, scale_d),
                (true, true, true) => wgmma::mma_bf16_m64n128k16_t10(d, da, db, scale_d),
                (false, false, false) => wgmma::mma_f16_m64n128k16_t01(d, da, db, scale_d),
                (false, false, true) => wgmma::mma_f16_m64n128k16_t00(d, da, db, scale_d),
                (false, true, false) => wgmma::mma_f16_m64n128k16_t11(d, da, db, scale_d),
                (false, true, true) => wgmma::mma_f16_m64n128k16_t10(d, da, db, scale_d),
            }
        } else {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 128]);
            match (E::BF16, AT, BT) {
                (true, false, false) => wgmma::mma_bf16_m64n256k16_t01(d, da, db, scale_d),
                (true, false, true) => wgmma::mma_bf16_m64n256k16_t00(d, da, db, scale_d),
                (true, true, false) => wgmma::mma_bf16_m64n256k16_t11(d, da, db, scale_d),
                (true, true, true) => wgmma::mma_bf16_m64n256k16_t10(d, da, db, scale_d),
                (false, false, false) => wgmma::mma_f16_m64n256k16_t01(d, da, db, scale_d),
                (false, false, true) => wgmma::mma_f16_m64n256k16_t00(d, da, db, scale_d),
                (false, true, false) => wgmma::mma_f16_m64n256k16_t11(d, da, db, scale_d),
                (false, true, true) => wgmma::mma_f16_m64n256k16_t10(d, da, db, scale_d),
            }
        }
    }
}

/// Shared addresses of the block's pipeline: 1024-aligned stage base, stage size, barriers,
/// tile records.
struct Pipeline {
    base: u32,
    stage_bytes: u32,
    a_bytes: u32,
    bars: u32,
    /// Generic pointer to the first stage's tile record.
    records: *mut WsTile,
    stages: u32,
}

impl Pipeline {
    #[inline(always)]
    fn new(shape: WgTileShape) -> Self {
        let dynamic = smem::dynamic_addr();
        let base = (dynamic + WG_SMEM_ALIGN - 1) & !(WG_SMEM_ALIGN - 1);
        let record_offset = base - dynamic + shape.record_offset();
        Self {
            base,
            stage_bytes: shape.stage_bytes(),
            a_bytes: shape.a_bytes(),
            bars: base + shape.barrier_offset(),
            records: smem::dynamic_ptr().wrapping_add(record_offset as usize) as *mut WsTile,
            stages: shape.stages,
        }
    }
    #[inline(always)]
    fn a(&self, s: u32) -> u32 {
        self.base + s * self.stage_bytes
    }
    #[inline(always)]
    fn b(&self, s: u32) -> u32 {
        self.a(s) + self.a_bytes
    }
    #[inline(always)]
    fn full(&self, s: u32) -> u32 {
        self.bars + 8 * s
    }
    #[inline(always)]
    fn empty(&self, s: u32) -> u32 {
        self.bars + 8 * (self.stages + s)
    }
    /// Stage `s`'s tile record.
    #[inline(always)]
    fn record(&self, s: u32) -> *mut WsTile {
        self.records.wrapping_add(s as usize)
    }
}

/// The plain kernel's hooks: block `b` computes tiles `b, b + gridDim.x, ...` of the grouped
/// raster order ([`raster_tile`]), never waits, never posts.
pub struct RasterHooks {
    next: u32,
    group: u32,
}

impl RasterHooks {
    /// Starts at this block's index; `group` row tiles per raster group.
    #[inline(always)]
    pub fn new(group: u32) -> Self {
        Self {
            next: ids::ctaid_x(),
            group,
        }
    }
}

impl WsHooks for RasterHooks {
    const POSTS: bool = false;

    #[inline(always)]
    unsafe fn next_tile(&mut self, tiles_m: u32, tiles_n: u32, splits: u32) -> Option<WsTile> {
        let unit = self.next;
        if unit >= tiles_m * tiles_n * splits {
            return None;
        }
        self.next += ids::nctaid_x();
        let id = unit / splits;
        let (tm, tn) = raster_tile(id, tiles_m, tiles_n, self.group);
        Some(WsTile {
            tm,
            tn,
            id,
            split: unit % splits,
            ..WsTile::default()
        })
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, _tile: &mut WsTile, _k_step: u32) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn post(&mut self, _tile: &WsTile, _t_start: u64) {}
}

/// Named barrier the two consumer warpgroups meet at before a tile's post.
const CONSUMERS_BARRIER: u32 = 1;

crate::static_shared!(fn split_last_flag() -> *mut u32, cusync_sm90_split_last, 16);

/// Split-K: this unit's partial tile goes to its workspace slot; the last of the tile's units
/// to arrive sums every slot in split order into `acc` and returns `true` (it stores and
/// posts the tile); the others return `false`. Called by all 256 consumer threads (`ct` is
/// this thread's index among them); a thread whose 16-row warp slice starts at `m_base` past
/// the output's rows moves no data (those rows are never stored).
///
/// # Safety
/// `p.split_workspace` holds `tiles * p.split_k` slots of `128 * 2R * 4` bytes and
/// `p.split_counters` one zeroed `u32` per tile; `tile_index < tiles`.
#[inline(always)]
unsafe fn reduce_split<const R: usize>(
    acc: &mut [f32; R],
    p: &TmaGemmParams,
    tile_index: u32,
    split: u32,
    ct: u32,
    m_base: u32,
) -> bool {
    let splits = p.split_k;
    let slot_floats = 256 * R;
    let ws = p.split_workspace as *mut f32;
    let slot = |s: u32| ws.wrapping_add((tile_index * splits + s) as usize * slot_floats);
    let rows_valid = m_base < p.gemm.m;
    // Layout [R / 4][256 threads][4]: each float4 store and load of a warp is contiguous.
    let at = |base: *mut f32, q: usize| base.wrapping_add((q * 256 + ct as usize) * 4);
    if rows_valid {
        let mine = slot(split);
        unroll!(i < R / 32, {
            unroll!(j < 8, {
                let q = i * 8 + j;
                // SAFETY: inside this unit's slot (the caller's contract), 16-byte aligned.
                unsafe {
                    global::st_v4_f32(
                        at(mine, q),
                        [acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]],
                    )
                };
            });
        });
    }
    barrier::named_sync(CONSUMERS_BARRIER, 256);
    let flag = split_last_flag();
    if ct == 0 {
        let counter = (p.split_counters as *mut u32).wrapping_add(tile_index as usize);
        // Release every consumer thread's partial (they passed the barrier), then count in;
        // the acquire half makes the other units' partials visible to the last one.
        fence::acq_rel_gpu();
        // SAFETY: the counter is the caller's.
        let old = unsafe { atomics::atom_add_gpu(counter, 1) };
        let last = old + 1 == splits;
        if last {
            // Nobody else touches this tile's counter in this launch: ready for the next.
            // SAFETY: as above.
            unsafe { counter.write_volatile(0) };
        }
        // SAFETY: a 16-byte shared symbol of this kernel.
        unsafe { flag.write_volatile(last as u32) };
    }
    barrier::named_sync(CONSUMERS_BARRIER, 256);
    // SAFETY: written before the barrier; rewritten only after the next tile's first barrier,
    // which every thread reaches after this read.
    if unsafe { flag.read_volatile() } == 0 {
        return false;
    }
    if rows_valid {
        for s in 0..splits {
            let base = slot(s);
            unroll!(i < R / 32, {
                unroll!(j < 8, {
                    let q = i * 8 + j;
                    // SAFETY: inside slot `s`; written by its unit before its release.
                    let v = unsafe { global::ld_cg_v4_f32(at(base, q)) };
                    if s == 0 {
                        acc[4 * q] = v[0];
                        acc[4 * q + 1] = v[1];
                        acc[4 * q + 2] = v[2];
                        acc[4 * q + 3] = v[3];
                    } else {
                        acc[4 * q] += v[0];
                        acc[4 * q + 1] += v[1];
                        acc[4 * q + 2] += v[2];
                        acc[4 * q + 3] += v[3];
                    }
                });
            });
        }
    }
    true
}

/// The kernel body for one layout pair; `R = BN / 2` accumulator registers. Tiles come from
/// `hooks` (the producer thread asks, and writes each stage's tile record); each tile's
/// operands, tensor maps and epilogue are `hooks.params(p, tile)` (`p` itself for single-stage
/// hooks); the producer calls `hooks.wait_dependent` before each K-step's A loads (after
/// issuing its B loads: the CuSync paper's optimization R); after a tile's stores the consumers
/// meet at a named barrier and one of them (thread 128) calls `hooks.post`, and
/// `hooks.consumers_done` when they leave. With `H::POST_WARP`, warp 1 of the producer
/// warpgroup runs `hooks.serve_posts` instead of exiting.
///
/// `p` supplies what is per launch: the pipeline's error slot and timeout, the split-K factor
/// (and the raster grid single-stage hooks walk).
///
/// # Safety
/// Launched with `WG_THREADS` threads, at least `SHAPE.smem_bytes()` of dynamic shared memory,
/// a 1-D grid, and `p` (and every tile's `hooks.params`) describing valid operands and tensor
/// maps of this layout pair (the host's `Gemm` checks).
#[inline(always)]
pub(crate) unsafe fn gemm_ws<
    E: WgElem,
    H: WsHooks,
    const BN: u32,
    const STAGES: u32,
    const R: usize,
    const AT: bool,
    const BT: bool,
>(
    p: &TmaGemmParams,
    hooks: &mut H,
) {
    let shape = WgTileShape { bn: BN, stages: STAGES };
    let pipe = Pipeline::new(shape);
    let tid = ids::tid_x();
    if tid == 0 {
        for s in 0..STAGES {
            // SAFETY: the barriers lie inside the dynamic area after the stages; nobody uses
            // them before the block barrier below.
            unsafe {
                mbarrier::init(pipe.full(s), 1);
                mbarrier::init(pipe.empty(s), 8);
            }
        }
        mbarrier::fence_init();
        // SAFETY: the host wrote two tensor maps at `tensor_maps`.
        unsafe {
            tma::prefetch_map(p.tensor_maps);
            tma::prefetch_map(p.tensor_maps + 128);
        }
    }
    barrier::sync_threads();

    if tid / 128 == 0 {
        wgmma::dec_max_regs::<WG_PRODUCER_REGS>();
        if tid == 0 {
            // SAFETY: the producer thread; forwarded contract.
            unsafe { produce::<H, BN, STAGES, AT, BT>(p, hooks, &pipe) };
        } else if H::POST_WARP && tid / 32 == 1 {
            // SAFETY: all of warp 1, after the setup barrier.
            unsafe { hooks.serve_posts(tid % 32) };
        }
        return;
    }

    wgmma::inc_max_regs::<WG_CONSUMER_REGS>();
    // SAFETY: a consumer thread; forwarded contract.
    unsafe { consume::<E, H, BN, STAGES, R, AT, BT>(p, hooks, &pipe, tid) };
    if tid == 128 {
        // SAFETY: the posting thread, after its last post.
        unsafe { hooks.consumers_done() };
    }
}

/// The producer thread's loop: takes tiles from `hooks`, and for each K-step waits for a free
/// pipeline stage, issues B's TMA loads, waits for the dependency, writes the tile record and
/// issues A's loads. Returns after publishing a stop record (no more tiles, or a failed
/// dependency wait), or after a pipeline wait that timed out (reported).
///
/// # Safety
/// Thread 0 of a [`gemm_ws`] block, after its setup barrier.
#[inline(always)]
unsafe fn produce<H: WsHooks, const BN: u32, const STAGES: u32, const AT: bool, const BT: bool>(
    p: &TmaGemmParams,
    hooks: &mut H,
    pipe: &Pipeline,
) {
    let shape = WgTileShape { bn: BN, stages: STAGES };
    let (tiles_m, tiles_n) = shape.tiles(p.gemm.m, p.gemm.n);
    let splits = if p.split_k > 1 { p.split_k } else { 1 };
    let (mut s, mut phase) = (0u32, 0u32);
    loop {
        // SAFETY: the producer thread.
        let next = unsafe { hooks.next_tile(tiles_m, tiles_n, splits) };
        let (stage, id) = next.as_ref().map_or((u32::MAX, u32::MAX), |t| (t.stage, t.id));
        // A fresh barrier counts its (virtual) previous phase, parity 1, as complete.
        // SAFETY: initialised barriers; `p.error` checked by the host.
        if !unsafe { wait_phase(pipe.empty(s), phase ^ 1, p, hooks, stage, id) } {
            return;
        }
        let Some(mut tile) = next else {
            // No more tiles: a stage with no data whose record says so.
            // SAFETY: the stage is free; the record is this thread's to write until the
            // arrival publishes it.
            unsafe {
                pipe.record(s).write_volatile(WsTile {
                    tm: WS_STOP,
                    ..WsTile::default()
                });
                mbarrier::arrive(pipe.full(s));
            }
            return;
        };
        // SAFETY: a tile of these hooks.
        let tp = unsafe { hooks.params(p, &tile) };
        let (map_a, map_b) = (tp.tensor_maps, tp.tensor_maps + 128);
        let k_steps = shape.k_steps(tp.gemm.k);
        let (kb, ke) = split_range(k_steps, tile.split, splits);
        let prefetch_at = kb + (ke - kb) / 2;
        for kt in kb..ke {
            if kt > kb {
                // SAFETY: as above.
                if !unsafe { wait_phase(pipe.empty(s), phase ^ 1, p, hooks, tile.stage, tile.id) } {
                    return;
                }
            }
            if kt == prefetch_at {
                // SAFETY: the producer thread.
                unsafe { hooks.prefetch() };
            }
            let full = pipe.full(s);
            let k0 = kt * WG_BK;
            // SAFETY (block): the stage is free (its consumers released it); the boxes
            // fill exactly `stage_bytes`, the count announced in two parts (B's bytes,
            // then A's with the arrival); the tensor maps are the host's.
            unsafe {
                mbarrier::expect_tx(full, shape.b_bytes());
                if BT {
                    tma::load_2d(pipe.b(s), map_b, k0, tile.tn * BN, full);
                } else {
                    for j in 0..BN / 64 {
                        tma::load_2d(pipe.b(s) + j * WG_BOX_BYTES, map_b, tile.tn * BN + 64 * j, k0, full);
                    }
                }
                if !hooks.wait_dependent(&mut tile, kt) {
                    // Timed out (reported): publish a stop record once B's bytes land,
                    // so the consumers leave instead of waiting for A.
                    pipe.record(s).write_volatile(WsTile {
                        tm: WS_STOP,
                        ..WsTile::default()
                    });
                    mbarrier::arrive(full);
                    return;
                }
                pipe.record(s).write_volatile(tile);
                mbarrier::arrive_expect_tx(full, shape.a_bytes());
                if AT {
                    tma::load_2d(pipe.a(s), map_a, tile.tm * WG_BM, k0, full);
                    tma::load_2d(pipe.a(s) + WG_BOX_BYTES, map_a, tile.tm * WG_BM + 64, k0, full);
                } else {
                    tma::load_2d(pipe.a(s), map_a, k0, tile.tm * WG_BM, full);
                }
            }
            s += 1;
            if s == STAGES {
                s = 0;
                phase ^= 1;
            }
        }
    }
}

/// A consumer thread's loop (`tid` in `128..384`): per tile, the `wgmma` mainloop over the
/// pipeline stages, the stores, and (with posting hooks) the consumers' barrier and the post.
/// Returns on a stop record or a failed wait.
///
/// # Safety
/// A consumer thread of a [`gemm_ws`] block, after its setup barrier and `setmaxnreg.inc`.
#[inline(always)]
unsafe fn consume<
    E: WgElem,
    H: WsHooks,
    const BN: u32,
    const STAGES: u32,
    const R: usize,
    const AT: bool,
    const BT: bool,
>(
    p: &TmaGemmParams,
    hooks: &mut H,
    pipe: &Pipeline,
    tid: u32,
) {
    let shape = WgTileShape { bn: BN, stages: STAGES };
    let splits = if p.split_k > 1 { p.split_k } else { 1 };
    let cw = tid / 128 - 1;
    let warp_in_wg = (tid / 32) % 4;
    let lane = tid % 32;
    // Operand descriptors (module docs): K-major tiles advance 32 bytes per k16, MN-major
    // tiles 16 rows of 128 bytes; MN-major boxes of 64 columns are 8 KiB apart (LBO).
    let (a_kk, a_lbo) = if AT { (2048, WG_BOX_BYTES) } else { (32, 16) };
    let (b_kk, b_lbo) = if BT { (32, 16) } else { (2048, WG_BOX_BYTES) };
    let (mut s, mut phase) = (0u32, 0u32);
    loop {
        // SAFETY: initialised barrier.
        if !unsafe { wait_phase(pipe.full(s), phase, p, hooks, u32::MAX, u32::MAX) } {
            return;
        }
        // SAFETY: the producer wrote the record before its arrival completed this phase.
        let tile = unsafe { pipe.record(s).read_volatile() };
        if tile.tm >= WS_STOP {
            return;
        }
        let t_start = if H::POSTS { time::global_timer_ns() } else { 0 };
        // Zeroed through a memset, not `[0.0; R]`: rustc lowers a long repeat expression to a
        // loop with a run-time index, which keeps the 128-float array out of registers.
        // SAFETY: all-zero bits are a valid `[f32; R]`.
        let mut acc: [f32; R] = unsafe { core::mem::zeroed() };
        let mut prev = STAGES;
        // SAFETY: a tile of these hooks (its record came through the pipeline).
        let k_steps = shape.k_steps(unsafe { hooks.params(p, &tile) }.gemm.k);
        let (kb, ke) = split_range(k_steps, tile.split, splits);
        for kt in kb..ke {
            if kt > kb {
                // SAFETY: initialised barrier.
                if !unsafe { wait_phase(pipe.full(s), phase, p, hooks, tile.stage, tile.id) } {
                    return;
                }
                // SAFETY: as above. A stop record mid-tile: the producer gave up (a timed-out
                // dependency wait, reported); leave without storing or posting.
                if H::POSTS && unsafe { pipe.record(s).read_volatile() }.tm >= WS_STOP {
                    wgmma::wait_group::<0>();
                    return;
                }
            }
            let a0 = pipe.a(s) + cw * WG_BOX_BYTES;
            let b0 = pipe.b(s);
            wgmma::fence();
            for kk in 0..WG_BK / 16 {
                let da = wgmma::desc_sw128(a0 + kk * a_kk, a_lbo, 1024);
                let db = wgmma::desc_sw128(b0 + kk * b_kk, b_lbo, 1024);
                // SAFETY: the stage's data landed (`full` completed); it stays until this
                // warpgroup releases the stage after the group is waited.
                unsafe { mma::<E, R, AT, BT>(&mut acc, da, db, (kt > kb || kk > 0) as u32) };
            }
            wgmma::commit_group();
            // The previous stage's group is done: hand its buffers back to the producer.
            wgmma::wait_group::<1>();
            if prev < STAGES && lane == 0 {
                // SAFETY: initialised barrier; one arrival per consumer warp (8 in all).
                unsafe { mbarrier::arrive(pipe.empty(prev)) };
            }
            prev = s;
            s += 1;
            if s == STAGES {
                s = 0;
                phase ^= 1;
            }
        }
        wgmma::wait_group::<0>();
        if lane == 0 {
            // SAFETY: as above.
            unsafe { mbarrier::arrive(pipe.empty(prev)) };
        }
        // The tile's parameters again (not kept in registers across the mainloop).
        // SAFETY: as above.
        let tp = unsafe { hooks.params(p, &tile) };
        let g = &tp.gemm;
        let m_base = tile.tm * WG_BM + cw * 64 + warp_in_wg * 16;
        if splits > 1 {
            let tiles_n = shape.tiles(g.m, g.n).1;
            // SAFETY: the host sized the workspace and counters for `splits` (params docs).
            if !unsafe { reduce_split::<R>(&mut acc, tp, tile.tm * tiles_n + tile.tn, tile.split, tid - 128, m_base) } {
                continue;
            }
        }
        // SAFETY: `[f32; R]` and `[[[f32; 4]; 8]; R / 32]` are the same floats in the same order
        // (the wgmma fragment is the m16n8 C fragment repeated along N); the store guards edges.
        unsafe {
            if R == 64 {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 8]; 2]);
                store_acc_row::<2>(a, g, m_base, tile.tn * BN, lane);
            } else {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 8]; 4]);
                store_acc_row::<4>(a, g, m_base, tile.tn * BN, lane);
            }
        }
        if H::POSTS {
            // Every consumer thread's stores of the tile are issued past this barrier.
            barrier::named_sync(CONSUMERS_BARRIER, 256);
            if tid == 128 {
                // SAFETY: one thread, once per tile, after the consumers' barrier.
                unsafe { hooks.post(&tile, t_start) };
            }
        }
    }
}

/// Dispatches on the layouts in `p.gemm.flags`.
///
/// # Safety
/// As for [`gemm_ws`].
#[inline(always)]
unsafe fn gemm_sm90<E: WgElem, H: WsHooks, const BN: u32, const STAGES: u32, const R: usize>(
    p: &TmaGemmParams,
    hooks: &mut H,
) {
    // SAFETY: forwarded contract.
    unsafe {
        match (p.gemm.a_trans(), p.gemm.b_trans()) {
            (false, false) => gemm_ws::<E, H, BN, STAGES, R, false, false>(p, hooks),
            (false, true) => gemm_ws::<E, H, BN, STAGES, R, false, true>(p, hooks),
            (true, false) => gemm_ws::<E, H, BN, STAGES, R, true, false>(p, hooks),
            (true, true) => gemm_ws::<E, H, BN, STAGES, R, true, true>(p, hooks),
        }
    }
}

macro_rules! sm90_entry {
    ($(#[$doc:meta])* $name:ident, $elem:ty, $shape:ident, $bn:literal, $stages:literal, $r:literal) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: TmaGemmParams) {
            const _: () = assert!($shape.bn == $bn && $shape.stages == $stages && $shape.acc_regs() == $r);
            // SAFETY: the host launches it with the shape's threads and shared memory.
            unsafe { gemm_sm90::<$elem, RasterHooks, $bn, $stages, $r>(&p, &mut RasterHooks::new(p.raster_group)) }
        }
    };
}

sm90_entry!(
    /// bf16 inputs, 128 x 256 x 64 tiles, 4 stages, persistent (module docs).
    gemm_sm90_bf16_128x256, super::Bf16, WG_TILE_128X256, 256, 4, 128
);
sm90_entry!(
    /// f16 inputs, 128 x 256 x 64 tiles, 4 stages, persistent.
    gemm_sm90_f16_128x256, super::F16, WG_TILE_128X256, 256, 4, 128
);
sm90_entry!(
    /// bf16 inputs, 128 x 128 x 64 tiles, 6 stages, persistent.
    gemm_sm90_bf16_128x128, super::Bf16, WG_TILE_128X128, 128, 6, 64
);
sm90_entry!(
    /// f16 inputs, 128 x 128 x 64 tiles, 6 stages, persistent.
    gemm_sm90_f16_128x128, super::F16, WG_TILE_128X128, 128, 6, 64
);

macro_rules! sm90_stream_entry {
    ($(#[$doc:meta])* $name:ident, $elem:ty, $shape:ident, $bn:literal, $stages:literal, $r:literal) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(desc: StageDesc, p: TmaGemmParams) {
            const _: () = assert!($shape.bn == $bn && $shape.stages == $stages && $shape.acc_regs() == $r);
            // SAFETY: the host launches it with the shape's threads and shared memory, a
            // persistent 1-D grid, and `desc` describing this launch of the stage (its grid is
            // the kernel's tile grid; the K step of its waits is `WG_BK`).
            unsafe {
                let mut hooks = StreamStage::start(&desc, WG_BK);
                gemm_sm90::<$elem, StreamStage, $bn, $stages, $r>(&p, &mut hooks)
            }
        }
    };
}

sm90_stream_entry!(
    /// bf16 inputs, 128 x 256 x 64 tiles, as a stream-mode stage (persistent blocks take tiles
    /// from the stage's order, the producer waits on the policy's semaphores before each
    /// K-step's A loads, one consumer thread posts after the tile's stores).
    gemm_sm90_bf16_128x256_stream, super::Bf16, WG_TILE_128X256, 256, 4, 128
);
sm90_stream_entry!(
    /// bf16 inputs, 128 x 128 x 64 tiles, as a stream-mode stage.
    gemm_sm90_bf16_128x128_stream, super::Bf16, WG_TILE_128X128, 128, 6, 64
);
