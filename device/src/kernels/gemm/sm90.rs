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
//! Shared memory per stage: A's 128 x 64 tile (the 96-column tile: 64 x 64,
//! `WgTileShape::a_rows`) then B's `BN` x 64 tile, each in the 128-byte
//! swizzle layout TMA writes and `wgmma` reads (K-major operands as one box of 128-byte rows;
//! MN-major operands as boxes of 64 columns x 64 K-rows, 8 KiB apart), except a row-major B
//! of the 96-column tile: three boxes of 32 columns x 64 K-rows, 4 KiB apart, in the 64-byte
//! swizzle (`WgTileShape::b_box_cols`). Every pipeline wait is
//! bounded by `timeout_ns` and reported as [`ErrorCode::PipelineTimeout`].

use super::epilogue::store_acc_row;
use crate::ptx::{atomics, barrier, fence, global, ids, mbarrier, smem, time, tma, wgmma};
use crate::stage::{WsHooks, WsTile, WS_STOP};
use crate::stream::StreamStage;
use crate::sync::{report, WaitSite};
use cusync_shared::gemm_sm90::{
    raster_tile, ring_stages, wg_wide_tile, TmaGemmParams, WgTileShape, WG_BK, WG_BM, WG_BOX_BYTES, WG_CONSUMER_REGS,
    WG_PERSISTENT_CONSUMER_REGS, WG_PERSISTENT_PRODUCER_REGS, WG_PRODUCER_REGS, WG_SMEM_ALIGN, WG_TILE_128X128,
    WG_TILE_128X16, WG_TILE_128X192, WG_TILE_128X256, WG_TILE_128X64, WG_TILE_64X96,
};
use cusync_shared::layout::{ErrorCode, ErrorSlot, StageDesc, TraceEvent};
use cusync_shared::stream_k::{k_segment, KSegment, StreamKPlan};

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
/// K-major); `R` is 8, 32, 48, 64, 96 or 128 accumulator registers.
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
        if R == 8 {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 8]);
            wgmma::mma_m64n16k16(E::BF16, AT, !BT, d, da, db, scale_d);
        } else if R == 32 {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 32]);
            wgmma::mma_m64n64k16(E::BF16, AT, !BT, d, da, db, scale_d);
        } else if R == 48 {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 48]);
            wgmma::mma_m64n96k16(E::BF16, AT, !BT, d, da, db, scale_d);
        } else if R == 64 {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 64]);
            wgmma::mma_m64n128k16(E::BF16, AT, !BT, d, da, db, scale_d);
        } else if R == 96 {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 96]);
            wgmma::mma_m64n192k16(E::BF16, AT, !BT, d, da, db, scale_d);
        } else {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 128]);
            wgmma::mma_m64n256k16(E::BF16, AT, !BT, d, da, db, scale_d);
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
    /// Shared-window address of the first stage's tile record.
    records_addr: u32,
    stages: u32,
    /// Stages of the ring in use: the launch's `pipeline_depth` ([`ring_stages`]); the
    /// producer and the consumers wrap their stage index here.
    ring: u32,
}

impl Pipeline {
    #[inline(always)]
    fn new(shape: WgTileShape, depth: u32) -> Self {
        let dynamic = smem::dynamic_addr();
        let base = (dynamic + WG_SMEM_ALIGN - 1) & !(WG_SMEM_ALIGN - 1);
        Self {
            base,
            stage_bytes: shape.stage_bytes(),
            a_bytes: shape.a_bytes(),
            bars: base + shape.barrier_offset(),
            records_addr: base + shape.record_offset(),
            stages: shape.stages,
            ring: ring_stages(depth, shape.stages),
        }
    }
    /// The next stage of the ring after `s` (and its phase parity, flipped on the wrap).
    #[inline(always)]
    fn advance(&self, s: &mut u32, phase: &mut u32) {
        *s += 1;
        if *s == self.ring {
            *s = 0;
            *phase ^= 1;
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
    /// Shared-window address of stage `s`'s tile record (8-byte aligned: the records start
    /// 16-byte aligned after the barriers, 40 bytes apart).
    #[inline(always)]
    fn record_addr(&self, s: u32) -> u32 {
        self.records_addr + s * core::mem::size_of::<WsTile>() as u32
    }
    /// Writes stage `s`'s tile record field by field with shared-memory stores (`STS`). A
    /// volatile write of the struct through a generic pointer was built on the stack, read
    /// back from local memory and stored with `ST.E.STRONG.SYS` on the generic path: about
    /// 2 µs of every block's setup, which wrote all the records (perf-notes, session 22).
    ///
    /// # Safety
    /// The record is this thread's to write: its stage is free (the producer, after the
    /// stage's `empty` phase), or the block's setup before its barrier.
    #[inline(always)]
    unsafe fn write_record(&self, s: u32, t: &WsTile) {
        let at = self.record_addr(s);
        // SAFETY: the caller's contract; each field's offset inside the record, aligned to
        // its size (the record is 8-byte aligned).
        unsafe {
            smem::st_volatile_u32(at + core::mem::offset_of!(WsTile, tm) as u32, t.tm);
            smem::st_volatile_u32(at + core::mem::offset_of!(WsTile, tn) as u32, t.tn);
            smem::st_volatile_u32(at + core::mem::offset_of!(WsTile, id) as u32, t.id);
            smem::st_volatile_u32(at + core::mem::offset_of!(WsTile, split) as u32, t.split);
            smem::st_volatile_u32(at + core::mem::offset_of!(WsTile, stage) as u32, t.stage);
            smem::st_volatile_u32(at + core::mem::offset_of!(WsTile, _pad) as u32, t._pad);
            smem::st_volatile_u64(at + core::mem::offset_of!(WsTile, t_dispatch) as u32, t.t_dispatch);
            smem::st_volatile_u64(at + core::mem::offset_of!(WsTile, t_ready) as u32, t.t_ready);
        }
    }
    /// Reads stage `s`'s tile record with shared-memory loads (`LDS`; a volatile read through
    /// the generic pointer was eight `LD.E.STRONG.SYS` per consumer thread and tile).
    ///
    /// # Safety
    /// Read after the stage's `full` phase completed (the producer wrote the record before
    /// its arrival).
    #[inline(always)]
    unsafe fn read_record(&self, s: u32) -> WsTile {
        let at = self.record_addr(s);
        // SAFETY: the caller's contract; offsets as in `write_record`.
        unsafe {
            WsTile {
                tm: smem::ld_volatile_u32(at + core::mem::offset_of!(WsTile, tm) as u32),
                tn: smem::ld_volatile_u32(at + core::mem::offset_of!(WsTile, tn) as u32),
                id: smem::ld_volatile_u32(at + core::mem::offset_of!(WsTile, id) as u32),
                split: smem::ld_volatile_u32(at + core::mem::offset_of!(WsTile, split) as u32),
                stage: smem::ld_volatile_u32(at + core::mem::offset_of!(WsTile, stage) as u32),
                _pad: 0,
                t_dispatch: smem::ld_volatile_u64(at + core::mem::offset_of!(WsTile, t_dispatch) as u32),
                t_ready: smem::ld_volatile_u64(at + core::mem::offset_of!(WsTile, t_ready) as u32),
            }
        }
    }
    /// Stage `s`'s record's row field (a stop record's mark), as one `LDS` (a volatile read
    /// through the generic pointer was an `LD.E.STRONG.SYS`): the consumers read it once per
    /// tile, after its last stage ([`tile_stopped`]).
    ///
    /// # Safety
    /// Read after the stage's `full` phase completed (the producer wrote it before arriving).
    #[inline(always)]
    unsafe fn stop_mark(&self, s: u32) -> u32 {
        let at = self.record_addr(s) + core::mem::offset_of!(WsTile, tm) as u32;
        // SAFETY: inside the dynamic area's record array, 4-byte aligned (the caller's contract
        // orders it after the producer's write).
        unsafe { smem::ld_volatile_u32(at) }
    }
}

/// The plain kernel's hooks: block `b` computes work units `b, b + gridDim.x, ...` of the
/// grouped raster order ([`raster_tile`]): whole tiles, a tile's splits (split-K), or with
/// stream-K the data-parallel tiles and then the block's one stream-K range, tile by tile
/// (`cusync_shared::stream_k`). Never waits; posts only to write its trace (`gemm.trace`).
///
/// `CLUSTER = 2`: the blocks of a cluster pair take the two row tiles `2 pm, 2 pm + 1` of one
/// column tile together (cluster `c` walks pairs `c, c + clusters, ...`), so each loads half of
/// B's stage and multicasts it to both (whole tiles only: no split-K, no stream-K).
pub struct RasterHooks<const CLUSTER: u32 = 1> {
    /// Next work unit of this block (of its cluster with `CLUSTER = 2`).
    next: u32,
    /// Stream-K: next tile of the current unit (past `last`: take the next unit).
    tile: u32,
    /// Stream-K: last tile of the current unit.
    last: u32,
    /// Stream-K: the current unit.
    unit: u32,
    group: u32,
    /// Column tiles of the launch (trace index).
    tiles_n: u32,
    /// Row tiles of the launch (a cluster's second block may have none: no trace).
    tiles_m: u32,
    /// `gemm.trace`: one `TraceEvent` per tile (0: off).
    trace: u64,
    /// Tracing: `%globaltimer` at block entry, the `t_dispatch` of the block's first tile (so
    /// its `t_ready - t_dispatch` is the block's setup); 0 once used.
    t_entry: u64,
}

impl<const CLUSTER: u32> RasterHooks<CLUSTER> {
    /// Starts at this block's (or cluster's) index, for the launch `p` of `bn`-column tiles.
    #[inline(always)]
    pub fn new(p: &TmaGemmParams, bn: u32) -> Self {
        Self {
            next: if CLUSTER > 1 {
                ids::clusterid_x()
            } else {
                ids::ctaid_x()
            },
            tile: 1,
            last: 0,
            unit: 0,
            group: p.raster_group,
            tiles_n: p.gemm.n.div_ceil(bn),
            tiles_m: p.gemm.m.div_ceil(WG_BM),
            trace: p.gemm.trace,
            t_entry: if p.gemm.trace != 0 { time::global_timer_ns() } else { 0 },
        }
    }
}

impl<const CLUSTER: u32> WsHooks for RasterHooks<CLUSTER> {
    const POSTS: bool = false;
    const STREAM_K: bool = CLUSTER == 1;
    const CLUSTER: u32 = CLUSTER;
    const FREE_WAIT_IN_K_LOOP: bool = true;

    #[inline(always)]
    unsafe fn next_tile(&mut self, p: &TmaGemmParams, tiles_m: u32, tiles_n: u32, splits: u32) -> Option<WsTile> {
        // Traced: the block took the tile at `t_ready`; its first tile was dispatched at entry.
        let t_ready = if self.trace != 0 { time::global_timer_ns() } else { 0 };
        let t_dispatch = if self.t_entry != 0 {
            core::mem::replace(&mut self.t_entry, 0)
        } else {
            t_ready
        };
        if CLUSTER > 1 {
            // Pairs of row tiles: both blocks of the cluster take the same pair.
            let pairs_m = tiles_m.div_ceil(CLUSTER);
            let unit = self.next;
            if unit >= pairs_m * tiles_n {
                return None;
            }
            self.next += ids::nclusterid_x();
            let group = if self.group >= 2 * CLUSTER {
                self.group / CLUSTER
            } else {
                1
            };
            let (pm, tn) = raster_tile(unit, pairs_m, tiles_n, group);
            let tm = pm * CLUSTER + ids::cluster_ctarank();
            return Some(WsTile {
                tm,
                tn,
                id: tm * tiles_n + tn,
                t_dispatch,
                t_ready,
                ..WsTile::default()
            });
        }
        let (id, split) = if p.sk_units != 0 {
            let plan = p.stream_k(tiles_m * tiles_n);
            while self.tile > self.last {
                let unit = self.next;
                if unit >= plan.units() {
                    return None;
                }
                self.next += ids::nctaid_x();
                if let Some((first, last)) = plan.unit_tiles(unit) {
                    (self.tile, self.last, self.unit) = (first, last, unit);
                }
            }
            self.tile += 1;
            (self.tile - 1, self.unit)
        } else {
            let unit = self.next;
            if unit >= tiles_m * tiles_n * splits {
                return None;
            }
            self.next += ids::nctaid_x();
            (unit / splits, unit % splits)
        };
        let (tm, tn) = raster_tile(id, tiles_m, tiles_n, self.group);
        Some(WsTile {
            tm,
            tn,
            id,
            split,
            t_dispatch,
            t_ready,
            ..WsTile::default()
        })
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, _tile: &mut WsTile, _k_step: u32) -> bool {
        true
    }

    #[inline(always)]
    fn traces(&self) -> bool {
        self.trace != 0
    }

    /// Writes the tile's trace event (called only when tracing).
    #[inline(always)]
    unsafe fn post(&mut self, tile: &WsTile, t_start: u64) {
        if tile.tm >= self.tiles_m {
            return; // a cluster's second block past the last row tile: no tile
        }
        let index = tile.tm * self.tiles_n + tile.tn;
        let e = TraceEvent {
            stage: 0,
            tile: index,
            sm: ids::sm_id(),
            cta: ids::block_linear(),
            t_dispatch: tile.t_dispatch,
            t_ready: tile.t_ready,
            t_start,
            t_end: time::global_timer_ns(),
        };
        // SAFETY: the host sized `gemm.trace` for every tile of the launch (GemmParams docs);
        // one thread writes each tile's event once (the unit that stores it).
        unsafe { *(self.trace as *mut TraceEvent).add(index as usize) = e };
    }
}

/// The launch's stream-K plan where the hooks follow it ([`WsHooks::STREAM_K`]), else none.
#[inline(always)]
fn stream_k_plan<H: WsHooks>(p: &TmaGemmParams, tiles: u32) -> StreamKPlan {
    if H::STREAM_K {
        p.stream_k(tiles)
    } else {
        StreamKPlan::default()
    }
}

/// A consumer warp's release of a stage: one arrival on its `empty` barrier in every block of
/// the cluster (with multicast, both blocks' producers write the stage).
///
/// # Safety
/// `empty` is an initialised barrier's offset (in every block of the cluster).
#[inline(always)]
unsafe fn release_stage<H: WsHooks>(empty: u32) {
    if H::CLUSTER > 1 {
        for rank in 0..H::CLUSTER {
            // SAFETY: the contract; the cluster's blocks stay alive until its final barrier.
            unsafe { mbarrier::arrive_cluster(empty, rank) };
        }
    } else {
        // SAFETY: the contract.
        unsafe { mbarrier::arrive(empty) };
    }
}

/// The hooks' register split for a tile `BN` columns wide: [`WsHooks::REGS_WIDE`] past 192
/// columns (the consumers' 128 accumulators per thread), else [`WsHooks::REGS`].
const fn regs<H: WsHooks, const BN: u32>() -> (u32, u32) {
    if wg_wide_tile(BN) {
        H::REGS_WIDE
    } else {
        H::REGS
    }
}

/// `setmaxnreg.dec` to the hooks' producer count (an immediate: one of the shared splits).
#[inline(always)]
fn dec_regs<H: WsHooks, const BN: u32>() {
    let producer = const { regs::<H, BN>().0 };
    const { assert!(regs::<H, BN>().0 == WG_PRODUCER_REGS || regs::<H, BN>().0 == WG_PERSISTENT_PRODUCER_REGS) };
    if producer == WG_PERSISTENT_PRODUCER_REGS {
        wgmma::dec_max_regs::<WG_PERSISTENT_PRODUCER_REGS>();
    } else {
        wgmma::dec_max_regs::<WG_PRODUCER_REGS>();
    }
}

/// `setmaxnreg.inc` to the hooks' consumer count.
#[inline(always)]
fn inc_regs<H: WsHooks, const BN: u32>() {
    let consumer = const { regs::<H, BN>().1 };
    const { assert!(regs::<H, BN>().1 == WG_CONSUMER_REGS || regs::<H, BN>().1 == WG_PERSISTENT_CONSUMER_REGS) };
    if consumer == WG_PERSISTENT_CONSUMER_REGS {
        wgmma::inc_max_regs::<WG_PERSISTENT_CONSUMER_REGS>();
    } else {
        wgmma::inc_max_regs::<WG_CONSUMER_REGS>();
    }
}

/// Named barrier the two consumer warpgroups meet at before a tile's post.
const CONSUMERS_BARRIER: u32 = 1;

crate::static_shared!(fn split_last_flag() -> *mut u32, cusync_sm90_split_last, 16);

/// Split-K and stream-K: this unit's partial tile goes to its workspace slot
/// (`seg.first_slot + seg.slot`); the unit that completes the tile's `k_steps` K-steps on its
/// counter (each adds the K-steps it computed) sums the tile's `seg.slots` slots in slot order
/// into `acc` (its own from `acc` itself where it is slot 0 or 1) and returns `true` (it stores
/// and posts the tile); the others return `false`.
/// Called by all 256 consumer threads (`ct` is this thread's index among them); a thread
/// whose 16-row warp slice starts at `m_base` past
/// the output's rows moves no data (those rows are never stored).
///
/// # Safety
/// `p.split_workspace` holds slot `seg.first_slot + seg.slots - 1` (slots of `128 * 2R * 4`
/// bytes) and `p.split_counters` one zeroed `u32` per tile; `tile_index < tiles`.
#[inline(always)]
unsafe fn reduce_split<const R: usize>(
    acc: &mut [f32; R],
    p: &TmaGemmParams,
    tile_index: u32,
    seg: &KSegment,
    k_steps: u32,
    ct: u32,
    m_base: u32,
) -> bool {
    let slot_floats = 256 * R;
    let ws = p.split_workspace as *mut f32;
    let slot = |s: u32| ws.wrapping_add((seg.first_slot + s) as usize * slot_floats);
    let rows_valid = m_base < p.gemm.m;
    // Layout [R / 4][256 threads][4]: each float4 store and load of a warp is contiguous.
    let at = |base: *mut f32, q: usize| base.wrapping_add((q * 256 + ct as usize) * 4);
    if rows_valid {
        let mine = slot(seg.slot);
        // Quads `8 i + j` (`unroll!` takes at most 8 iterations; the guard folds away).
        unroll!(i < 4, {
            unroll!(j < 8, {
                let q = i * 8 + j;
                if q < R / 4 {
                    // SAFETY: inside this unit's slot (the caller's contract), 16-byte aligned.
                    unsafe {
                        global::st_v4_f32(
                            at(mine, q),
                            [acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]],
                        )
                    };
                }
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
        let done = seg.k_end - seg.k_begin;
        let old = unsafe { atomics::atom_add_gpu(counter, done) };
        let last = old + done == k_steps;
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
        // The tile's sum in slot order, `s0 + s1 + ...`. This unit's partial is still in
        // `acc`: where it is slot 0 or 1 the sum starts from the registers (`own + s0` is
        // `s0 + own` bit for bit: IEEE addition commutes) and its own slot is not read back,
        // one slot fewer on the tile's critical path (a split-K pair reads one slot, not two).
        let own_first = seg.slot <= 1;
        for s in 0..seg.slots {
            if own_first && s == seg.slot {
                continue;
            }
            let base = slot(s);
            let first = !own_first && s == 0;
            unroll!(i < 4, {
                unroll!(j < 8, {
                    let q = i * 8 + j;
                    if q < R / 4 {
                        // SAFETY: inside slot `s`; written by its unit before its release.
                        let v = unsafe { global::ld_cg_v4_f32(at(base, q)) };
                        if first {
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
    let pipe = Pipeline::new(shape, if H::PIPELINE_DEPTH { p.pipeline_depth } else { 0 });
    let tid = ids::tid_x();
    if tid == 0 {
        // SAFETY: the producer thread, before its first `next_tile`.
        unsafe { hooks.at_entry() };
        for s in 0..STAGES {
            // SAFETY: the barriers lie inside the dynamic area after the stages; nobody uses
            // them before the block (cluster) barrier below. A stage is free again when every
            // consumer warp of every block that reads it (the cluster's, with multicast) left.
            unsafe {
                mbarrier::init(pipe.full(s), 1);
                mbarrier::init(pipe.empty(s), 8 * H::CLUSTER);
                // Records are written with a tile's first stage only: the others must not
                // hold a stop mark left in shared memory by an earlier kernel.
                pipe.write_record(s, &WsTile::default());
            }
        }
        mbarrier::fence_init();
        // SAFETY: the host wrote two tensor maps at `tensor_maps`.
        unsafe {
            tma::prefetch_map(p.tensor_maps);
            tma::prefetch_map(p.tensor_maps + 128);
        }
    }
    if H::CLUSTER > 1 {
        // The other block's producer multicasts into this block's stages and its consumers
        // arrive on this block's barriers: both blocks' barriers are initialised first.
        barrier::cluster_sync();
    } else {
        barrier::sync_threads();
    }

    if tid / 128 == 0 {
        dec_regs::<H, BN>();
        if tid == 0 {
            // SAFETY: the producer thread; forwarded contract.
            unsafe {
                produce::<H, BN, STAGES, AT, BT>(p, hooks, &pipe);
                hooks.producer_done();
            }
        } else if H::POST_WARP && tid / 32 == 1 {
            // SAFETY: all of warp 1, after the setup barrier.
            unsafe { hooks.serve_posts(tid % 32) };
        } else if H::SCHED_WARP && tid / 32 == 2 {
            const { assert!(!(H::SCHED_WARP && H::POLL_WARP)) };
            // SAFETY: all of warp 2, after the setup barrier.
            unsafe { hooks.serve_schedule(tid % 32) };
        } else if H::POLL_WARP && !wg_wide_tile(BN) && tid / 32 == 2 {
            // (128 x 256 tiles keep the plain 56-register producer warpgroup, under which the
            // poll raised ptxas's spills from 16 / 76 / 76 to 48 / 164 / 220 bytes; their
            // producer finds no slot written and makes its own waits.)
            // SAFETY: all of warp 2, after the setup barrier; `p` is the kernel's.
            unsafe { hooks.serve_polls(p, tid % 32) };
        }
    } else {
        inc_regs::<H, BN>();
        // SAFETY: a consumer thread; forwarded contract.
        unsafe { consume::<E, H, BN, STAGES, R, AT, BT>(p, hooks, &pipe, tid) };
        if tid == 128 {
            // SAFETY: the posting thread, after its last post.
            unsafe { hooks.consumers_done() };
        }
    }
    if H::CLUSTER > 1 {
        // Neither block exits while the other may still arrive on its barriers (every wait
        // is bounded, so every thread gets here).
        barrier::cluster_sync_divergent();
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
    // The hooks' choice, up to 128 x 192 tiles: at 128 x 256 the loop's single wait site
    // raised ptxas's spills (12 / 180 to 96 / 128 bytes) and the plain kernels ran 0.1-0.5%
    // slower (perf-notes, session 18 run 1), so they keep the wait first.
    let wait_in_loop = H::FREE_WAIT_IN_K_LOOP && !wg_wide_tile(BN);
    loop {
        // SAFETY: the producer thread.
        let next = unsafe { hooks.next_tile(p, tiles_m, tiles_n, splits) };
        if !wait_in_loop {
            let (stage, id) = next.as_ref().map_or((u32::MAX, u32::MAX), |t| (t.stage, t.id));
            // A fresh barrier counts its (virtual) previous phase, parity 1, as complete.
            // SAFETY: initialised barriers; `p.error` checked by the host.
            if !unsafe { wait_phase(pipe.empty(s), phase ^ 1, p, hooks, stage, id) } {
                return;
            }
        }
        let Some(mut tile) = next else {
            // No more tiles: a stage with no data whose record says so.
            // SAFETY: as above (with the wait in the K loop, none was made for this stage).
            if wait_in_loop && !unsafe { wait_phase(pipe.empty(s), phase ^ 1, p, hooks, u32::MAX, u32::MAX) } {
                return;
            }
            // SAFETY: the stage is free; the record is this thread's to write until the
            // arrival publishes it.
            unsafe {
                pipe.write_record(
                    s,
                    &WsTile {
                        tm: WS_STOP,
                        ..WsTile::default()
                    },
                );
                mbarrier::arrive(pipe.full(s));
            }
            return;
        };
        // SAFETY: a tile of these hooks.
        let tp = unsafe { hooks.params(p, &tile) };
        let (map_a, map_b) = (tp.tensor_maps, tp.tensor_maps + 128);
        let k_steps = shape.k_steps(tp.gemm.k);
        let seg = k_segment(
            tile.id,
            tile.split,
            k_steps,
            p.split_k,
            &stream_k_plan::<H>(p, tiles_m * tiles_n),
        );
        let (kb, ke) = (seg.k_begin, seg.k_end);
        let prefetch_at = kb + (ke - kb) / 2;
        for kt in kb..ke {
            // The tile's first stage was waited for above unless the hooks wait here.
            if wait_in_loop || kt > kb {
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
            let (tm, tn) = (tile.tm, tile.tn);
            // B's boxes of this K-step (with clusters, this block's half, to both blocks).
            // SAFETY (both closures): the stage is free (its consumers released it); A's and
            // B's boxes fill exactly `stage_bytes`, the count announced in two parts (the
            // first operand's bytes, then the second's with the arrival); the tensor maps are
            // the host's.
            let load_b = || unsafe {
                if H::CLUSTER == 2 && !BT {
                    // This block's half of B's boxes, to both blocks of the pair (the
                    // barrier expects all of B: the other half comes from the other block).
                    let half = BN / 128;
                    let first = ids::cluster_ctarank() * half;
                    for j in first..first + half {
                        tma::load_2d_multicast(pipe.b(s) + j * WG_BOX_BYTES, map_b, tn * BN + 64 * j, k0, full, 0b11);
                    }
                } else if BT {
                    tma::load_2d(pipe.b(s), map_b, k0, tn * BN, full);
                } else {
                    // Boxes of `b_box_cols` columns back to back (64-byte swizzle for 32).
                    let cols = const { WgTileShape { bn: BN, stages: 1 }.b_box_cols() };
                    let bytes = const { WgTileShape { bn: BN, stages: 1 }.b_box_bytes() };
                    for j in 0..BN / cols {
                        tma::load_2d(pipe.b(s) + j * bytes, map_b, tn * BN + cols * j, k0, full);
                    }
                }
            };
            let load_a = || unsafe {
                if AT {
                    // Boxes of 64 rows (columns of the stored A), as many as a stage carries.
                    tma::load_2d(pipe.a(s), map_a, tm * WG_BM, k0, full);
                    if const { WgTileShape { bn: BN, stages: 1 }.a_rows() } > 64 {
                        tma::load_2d(pipe.a(s) + WG_BOX_BYTES, map_a, tm * WG_BM + 64, k0, full);
                    }
                } else {
                    tma::load_2d(pipe.a(s), map_a, k0, tm * WG_BM, full);
                }
            };
            // The independent operand first (optimization R), then the wait, then the
            // dependent one: B before A, or A before B when the hooks' dependent operand is B.
            let (first_bytes, second_bytes) = if H::DEPENDENT_B {
                (shape.a_bytes(), shape.b_bytes())
            } else {
                (shape.b_bytes(), shape.a_bytes())
            };
            // SAFETY (block): as for the closures above.
            unsafe {
                mbarrier::expect_tx(full, first_bytes);
                if H::DEPENDENT_B {
                    load_a();
                } else {
                    load_b();
                }
                if !hooks.wait_dependent(&mut tile, kt) {
                    // Timed out (reported): publish a stop record once the first operand's
                    // bytes land, so the consumers leave instead of waiting for the second. At
                    // the tile's first stage they see it before the tile; later, they check
                    // once per tile, after its last stage: the rest of the tile's stages carry
                    // the stop record and no data.
                    pipe.write_record(
                        s,
                        &WsTile {
                            tm: WS_STOP,
                            ..WsTile::default()
                        },
                    );
                    mbarrier::arrive(full);
                    if kt > kb {
                        stop_rest_of_tile::<H>(pipe, (s, phase), ke - kt - 1, p, hooks, &tile);
                    }
                    return;
                }
                if kt == kb {
                    // The tile's record travels with its first stage only (the consumers read
                    // it there; later stages' records are only checked for a stop): one
                    // 40-byte shared write per tile, not per K-step (the producer thread is
                    // on the pipeline's critical path, and the record sat in local memory).
                    pipe.write_record(s, &tile);
                }
                mbarrier::arrive_expect_tx(full, second_bytes);
                if H::DEPENDENT_B {
                    load_b();
                } else {
                    load_a();
                }
            }
            pipe.advance(&mut s, &mut phase);
        }
    }
}

/// The producer gave up on `tile` mid-tile at stage `at` (which holds a stop record): the
/// tile's `left` later stages get the stop record too, with no data, so the consumers run the
/// tile to its end without waiting long and find the stop once, after its last stage
/// ([`tile_stopped`]). A free-stage wait that times out is reported and ends it (the consumers'
/// own waits are bounded as well).
///
/// # Safety
/// The producer thread, right after publishing the stop record of stage `at.0` (phase `at.1`).
#[inline(always)]
unsafe fn stop_rest_of_tile<H: WsHooks>(
    pipe: &Pipeline,
    at: (u32, u32),
    left: u32,
    p: &TmaGemmParams,
    hooks: &H,
    tile: &WsTile,
) {
    let (mut s, mut phase) = at;
    for _ in 0..left {
        pipe.advance(&mut s, &mut phase);
        // SAFETY: initialised barriers; the stage's record is this thread's once it is free.
        unsafe {
            if !wait_phase(pipe.empty(s), phase ^ 1, p, hooks, tile.stage, tile.id) {
                return;
            }
            pipe.write_record(
                s,
                &WsTile {
                    tm: WS_STOP,
                    ..WsTile::default()
                },
            );
            mbarrier::arrive(pipe.full(s));
        }
    }
}

/// Whether the producer gave up on the tile whose last stage is `last` (landed, not yet
/// released): it then left a stop record there ([`stop_rest_of_tile`]). One `LDS` per tile,
/// with posting hooks only (the plain kernels' producer never stops mid-tile); the consumers
/// no longer read a mark before every K-step's `wgmma`.
///
/// # Safety
/// A consumer thread, after `last`'s `full` phase completed and before it releases `last`.
#[inline(always)]
unsafe fn tile_stopped<H: WsHooks>(pipe: &Pipeline, last: u32) -> bool {
    // SAFETY: the caller's contract orders the read after the producer's write.
    H::POSTS && unsafe { pipe.stop_mark(last) } >= WS_STOP
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
    let cw = tid / 128 - 1;
    let warp_in_wg = (tid / 32) % 4;
    let lane = tid % 32;
    // Operand descriptors (module docs): K-major tiles advance 32 bytes per k16, MN-major
    // tiles 16 rows of 128 bytes; MN-major boxes of 64 columns are 8 KiB apart (LBO). B's
    // strides, narrower boxes in the 64- and 32-byte swizzles included, are
    // `WgTileShape::b_strides` (CPU-checked against the PTX ISA's canonical layouts).
    let (a_kk, a_lbo) = if AT { (2048, WG_BOX_BYTES) } else { (32, 16) };
    let b_st = const { WgTileShape { bn: BN, stages: STAGES }.b_strides(BT) };
    let (b_kk, b_lbo, b_sbo, b_swizzle) = (b_st.k16_bytes, b_st.lbo, b_st.sbo, b_st.swizzle_bytes);
    let (mut s, mut phase) = (0u32, 0u32);
    loop {
        // SAFETY: initialised barrier.
        if !unsafe { wait_phase(pipe.full(s), phase, p, hooks, u32::MAX, u32::MAX) } {
            return;
        }
        // SAFETY: the producer wrote the record before its arrival completed this phase.
        let tile = unsafe { pipe.read_record(s) };
        if tile.tm >= WS_STOP {
            return;
        }
        let posts = (H::POSTS && hooks.posts_now()) || hooks.traces();
        let t_start = if posts { time::global_timer_ns() } else { 0 };
        // SAFETY: a tile of these hooks (its record came through the pipeline).
        let g0 = unsafe { &hooks.params(p, &tile).gemm };
        let k_steps = shape.k_steps(g0.k);
        // Whether any of this warpgroup's 64 rows lies inside C. With M <= 64 (the MLP's small
        // batches) the second warpgroup's rows are all past the edge: it only keeps the
        // pipeline's protocol (waits and releases) and leaves the tensor cores to the first.
        let rows_here = tile.tm * WG_BM + cw * 64 < g0.m;
        let (tiles_m, tiles_n) = shape.tiles(p.gemm.m, p.gemm.n);
        let seg = k_segment(
            tile.id,
            tile.split,
            k_steps,
            p.split_k,
            &stream_k_plan::<H>(p, tiles_m * tiles_n),
        );
        let (kb, ke) = (seg.k_begin, seg.k_end);
        // False once a pipeline wait timed out (reported) or the producer gave up mid-tile (a
        // stop record: a timed-out dependency wait, reported). The mainloop then runs to the
        // tile's end without waiting (on stale stages) and the tile is dropped after the last
        // `wait_group 0`: leaving the loop with a group in flight, on a branch ptxas cannot
        // prove warpgroup-uniform, makes ptxas serialize every `wgmma` of the kernel
        // (`C7518`, a `WARPGROUP.DEPBAR` after each HGMMA; measured with ptxas 13.0).
        let mut live = true;
        if !rows_here {
            // No `wgmma` and no accumulator here: a path of its own up to the next tile, so
            // the MMA loop's accumulators never merge with another definition (ptxas would
            // serialize every `wgmma`: C7515). Each stage is released as soon as it landed.
            for kt in kb..ke {
                if kt > kb && live {
                    // SAFETY: initialised barrier, in this consumer's stage order.
                    live = unsafe { wait_phase(pipe.full(s), phase, p, hooks, tile.stage, tile.id) };
                }
                // SAFETY: the tile's last stage landed (or the wait failed) and is not released.
                if kt + 1 == ke && live && unsafe { tile_stopped::<H>(pipe, s) } {
                    live = false;
                }
                if lane == 0 {
                    // SAFETY: initialised barrier; one arrival per consumer warp.
                    unsafe { release_stage::<H>(pipe.empty(s)) };
                }
                pipe.advance(&mut s, &mut phase);
            }
            if !live {
                return;
            }
            // The split-K reduction's and the post's barriers (this warpgroup moves no data;
            // thread 128, which counts the split and posts, is in the first warpgroup).
            if seg.slots > 1 {
                barrier::named_sync(CONSUMERS_BARRIER, 256);
                barrier::named_sync(CONSUMERS_BARRIER, 256);
                // SAFETY: as in `reduce_split` (written before the second barrier).
                if unsafe { split_last_flag().read_volatile() } == 0 {
                    continue; // not the unit that stores and posts the tile
                }
            }
            if posts {
                barrier::named_sync(CONSUMERS_BARRIER, 256);
            }
            continue;
        }
        // Zeroed through a memset, not `[0.0; R]`: rustc lowers a long repeat expression to a
        // loop with a run-time index, which keeps the 128-float array out of registers.
        // SAFETY: all-zero bits are a valid `[f32; R]`.
        let mut acc: [f32; R] = unsafe { core::mem::zeroed() };
        let mut prev = STAGES;
        for kt in kb..ke {
            if kt > kb && live {
                // SAFETY: initialised barrier, in this consumer's stage order (a stop mark is
                // read once, after the tile's last stage: `tile_stopped`).
                live = unsafe { wait_phase(pipe.full(s), phase, p, hooks, tile.stage, tile.id) };
            }
            let a0 = pipe.a(s) + cw * WG_BOX_BYTES;
            let b0 = pipe.b(s);
            wgmma::fence();
            for kk in 0..WG_BK / 16 {
                let da = wgmma::desc_sw128(a0 + kk * a_kk, a_lbo, 1024);
                let db = wgmma::desc(b0 + kk * b_kk, b_lbo, b_sbo, b_swizzle);
                // SAFETY: the stage's data landed (`full` completed); it stays until this
                // warpgroup releases the stage after the group is waited.
                unsafe { mma::<E, R, AT, BT>(&mut acc, da, db, (kt > kb || kk > 0) as u32) };
            }
            wgmma::commit_group();
            // The previous stage's group is done: hand its buffers back to the producer.
            wgmma::wait_group::<1>();
            if prev < STAGES && lane == 0 {
                // SAFETY: initialised barrier; one arrival per consumer warp (8 per block).
                unsafe { release_stage::<H>(pipe.empty(prev)) };
            }
            prev = s;
            pipe.advance(&mut s, &mut phase);
        }
        wgmma::wait_group::<0>();
        // SAFETY: `prev`, the tile's last stage, landed and is released only below.
        if live && unsafe { tile_stopped::<H>(pipe, prev) } {
            live = false;
        }
        if !live {
            // Nothing of this tile is stored or posted; the producer has stopped (or will
            // time out on its own bounded waits) and the failure is in the error slot.
            return;
        }
        if lane == 0 {
            // SAFETY: as above.
            unsafe { release_stage::<H>(pipe.empty(prev)) };
        }
        // The tile's parameters again (not kept in registers across the mainloop).
        // SAFETY: as above.
        let tp = unsafe { hooks.params(p, &tile) };
        let g = &tp.gemm;
        let m_base = tile.tm * WG_BM + cw * 64 + warp_in_wg * 16;
        if seg.slots > 1 {
            let tiles_n = shape.tiles(g.m, g.n).1;
            // SAFETY: the host sized the workspace and counters for the launch's split-K
            // factor or stream-K plan (params docs).
            if !unsafe {
                reduce_split::<R>(
                    &mut acc,
                    tp,
                    tile.tm * tiles_n + tile.tn,
                    &seg,
                    k_steps,
                    tid - 128,
                    m_base,
                )
            } {
                continue;
            }
        }
        // SAFETY: `[f32; R]` and `[[[f32; 4]; G]; R / 4 G]` are the same floats in the same
        // order (the wgmma fragment is the m16n8 C fragment repeated along N); the store guards
        // edges.
        unsafe {
            if R == 8 {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 2]; 1]);
                store_acc_row::<1, 2>(a, g, m_base, tile.tn * BN, lane);
            } else if R == 32 {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 8]; 1]);
                store_acc_row::<1, 8>(a, g, m_base, tile.tn * BN, lane);
            } else if R == 48 {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 4]; 3]);
                store_acc_row::<3, 4>(a, g, m_base, tile.tn * BN, lane);
            } else if R == 64 {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 8]; 2]);
                store_acc_row::<2, 8>(a, g, m_base, tile.tn * BN, lane);
            } else if R == 96 {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 8]; 3]);
                store_acc_row::<3, 8>(a, g, m_base, tile.tn * BN, lane);
            } else {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 8]; 4]);
                store_acc_row::<4, 8>(a, g, m_base, tile.tn * BN, lane);
            }
        }
        if posts {
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
        sm90_entry!($(#[$doc])* $name, $elem, $shape, $bn, $stages, $r, 1);
    };
    ($(#[$doc:meta])* $name:ident, $elem:ty, $shape:ident, $bn:literal, $stages:literal, $r:literal, $cluster:literal) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: TmaGemmParams) {
            const _: () = assert!($shape.bn == $bn && $shape.stages == $stages && $shape.acc_regs() == $r);
            // SAFETY: the host launches it with the shape's threads and shared memory (and
            // the cluster size its PTX requires, `cusync_shared::gemm_sm90::CLUSTER_ENTRIES`).
            unsafe {
                gemm_sm90::<$elem, RasterHooks<$cluster>, $bn, $stages, $r>(&p, &mut RasterHooks::<$cluster>::new(&p, $bn))
            }
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
    /// bf16 inputs, 128 x 256 x 64 tiles, 4 stages, persistent, in clusters of two blocks that
    /// take a column tile's row tiles in pairs and multicast B (whole tiles; B row-major).
    gemm_sm90_bf16_128x256_c2, super::Bf16, WG_TILE_128X256, 256, 4, 128, 2
);
sm90_entry!(
    /// f16 inputs, 128 x 256 x 64 tiles, 4 stages, clusters of two (as the bf16 one).
    gemm_sm90_f16_128x256_c2, super::F16, WG_TILE_128X256, 256, 4, 128, 2
);
sm90_entry!(
    /// bf16 inputs, 128 x 128 x 64 tiles, 6 stages, persistent.
    gemm_sm90_bf16_128x128, super::Bf16, WG_TILE_128X128, 128, 6, 64
);
sm90_entry!(
    /// f16 inputs, 128 x 128 x 64 tiles, 6 stages, persistent.
    gemm_sm90_f16_128x128, super::F16, WG_TILE_128X128, 128, 6, 64
);
sm90_entry!(
    /// bf16 inputs, 128 x 192 x 64 tiles, 5 stages, persistent.
    gemm_sm90_bf16_128x192, super::Bf16, WG_TILE_128X192, 192, 5, 96
);
sm90_entry!(
    /// f16 inputs, 128 x 192 x 64 tiles, 5 stages, persistent.
    gemm_sm90_f16_128x192, super::F16, WG_TILE_128X192, 192, 5, 96
);
sm90_entry!(
    /// bf16 inputs, 128 x 64 x 64 tiles, 9 stages, persistent: the skinny products, run
    /// swapped by the host (`GemmParams::swap_ab`, C stored transposed).
    gemm_sm90_bf16_128x64, super::Bf16, WG_TILE_128X64, 64, 9, 32
);
sm90_entry!(
    /// f16 inputs, 128 x 64 x 64 tiles, 9 stages, persistent.
    gemm_sm90_f16_128x64, super::F16, WG_TILE_128X64, 64, 9, 32
);
sm90_entry!(
    /// bf16 inputs, 128 x 16 x 64 tiles, 12 stages, persistent: products with M <= 16, run
    /// swapped by the host (`cusync_shared::gemm_sm90::WG_TILE_128X16`; C stored transposed).
    gemm_sm90_bf16_128x16, super::Bf16, WG_TILE_128X16, 16, 12, 8
);
sm90_entry!(
    /// f16 inputs, 128 x 16 x 64 tiles, 12 stages, persistent.
    gemm_sm90_f16_128x16, super::F16, WG_TILE_128X16, 16, 12, 8
);
sm90_entry!(
    /// bf16 inputs, 64 x 96 x 64 tiles (A's 64 rows a stage), 11 stages, persistent: small
    /// batches unswapped, M <= 64 (`cusync_shared::gemm_sm90::WG_TILE_64X96`; row-major B in
    /// 32-column boxes).
    gemm_sm90_bf16_64x96, super::Bf16, WG_TILE_64X96, 96, 11, 48
);
sm90_entry!(
    /// f16 inputs, 64 x 96 x 64 tiles, 11 stages, persistent.
    gemm_sm90_f16_64x96, super::F16, WG_TILE_64X96, 96, 11, 48
);

macro_rules! sm90_stream_entry {
    ($(#[$doc:meta])* $name:ident, $elem:ty, $shape:ident, $bn:literal, $stages:literal, $r:literal) => {
        sm90_stream_entry!($(#[$doc])* $name, $elem, $shape, $bn, $stages, $r, false);
    };
    ($(#[$doc:meta])* $name:ident, $elem:ty, $shape:ident, $bn:literal, $stages:literal, $r:literal, $transposed:literal) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(desc: StageDesc, p: TmaGemmParams) {
            const _: () = assert!($shape.bn == $bn && $shape.stages == $stages && $shape.acc_regs() == $r);
            // SAFETY: the host launches it with the shape's threads and shared memory, a
            // persistent 1-D grid, and `desc` describing this launch of the stage (its grid is
            // the kernel's tile grid; the K step of its waits is `WG_BK`).
            unsafe {
                let mut hooks = StreamStage::<$transposed>::start(&desc, WG_BK);
                gemm_sm90::<$elem, StreamStage<$transposed>, $bn, $stages, $r>(&p, &mut hooks)
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
sm90_stream_entry!(
    /// bf16 inputs, 128 x 192 x 64 tiles, as a stream-mode stage.
    gemm_sm90_bf16_128x192_stream, super::Bf16, WG_TILE_128X192, 192, 5, 96
);
sm90_stream_entry!(
    /// bf16 inputs, 128 x 64 x 64 tiles, as a stream-mode stage of a skinny product run
    /// swapped (the host launches `GemmParams::swap_ab`: C^T = B^T A^T, stored transposed):
    /// the stage's tile `(x, y)` is the kernel's `(y, x)`, and the producer loads A (the
    /// weights) before the wait and B (the stage's dependent input) after it.
    gemm_sm90_bf16_128x64_stream, super::Bf16, WG_TILE_128X64, 64, 9, 32, true
);
sm90_stream_entry!(
    /// bf16 inputs, 128 x 16 x 64 tiles, 12 stages, as a stream-mode stage of a batch of at most
    /// 16 rows run swapped (as the 128 x 64 stage: the stage's tile `(x, y)` is the kernel's
    /// `(y, x)`; the weights load before the wait, the stage's dependent input after it).
    gemm_sm90_bf16_128x16_stream, super::Bf16, WG_TILE_128X16, 16, 12, 8, true
);
sm90_stream_entry!(
    /// bf16 inputs, 64 x 96 x 64 tiles (A's 64 rows a stage), as a stream-mode stage of a small
    /// batch (M <= 64) run unswapped: the producer loads B (the weights) before the wait and A
    /// (the stage's dependent input) after it.
    gemm_sm90_bf16_64x96_stream, super::Bf16, WG_TILE_64X96, 96, 11, 48
);
