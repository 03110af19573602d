//! The path-2 persistent megakernel (sm_90a): the warp-specialized GeMM body of
//! `kernels::gemm::sm90` (TMA + `mbarrier` stages + `wgmma`, 384-thread blocks) running every
//! stage of a DAG of bf16 GeMMs in one launch, under a [`Protocol`] (the CTA-pipelining queues,
//! or the no-protocol baseline).
//!
//! # Roles (CTA-pipelining paper, section III.B)
//!
//! * **Thread 0, producer and scheduler** ([`PersistentWs::next_tile`]): takes the next ready
//!   tile of any stage from the protocol (`Protocol::wait`, bounded), turns it into a tile
//!   record that carries the stage index, loads that stage's A and B boxes through that stage's
//!   tensor maps (`PersistentStage::tma_params`) and writes the record with every pipeline
//!   stage it fills. `DONE` or `ABORT` becomes the stop record `gemm_ws` already publishes
//!   when its hooks run out of tiles.
//! * **Warpgroups 1 and 2, consumers**: compute each tile and store it with its stage's
//!   epilogue parameters ([`PersistentWs::params`] per tile). After the consumers' named
//!   barrier, thread 128 hands the finished tile to the post warp ([`PersistentWs::post`]) and
//!   goes on with the next tile at once.
//! * **Warp 1 of warpgroup 0, post warp** ([`PersistentWs::serve_posts`]): an otherwise idle
//!   warp (the producer warpgroup keeps only thread 0 busy) that runs `Protocol::post` with
//!   all 32 lanes: scoreboard decrements through the dependency arrays, pushes of consumer
//!   tiles that became ready, the tiles-done count, the trace event. The protocol's work is
//!   thus hidden in a warp that would otherwise wait (paper, section III.C), not in the
//!   consumer warps that compute.
//!
//! # The post ring
//!
//! Thread 128 hands each finished tile to the post warp through [`crate::post_ring`] (its
//! module docs give the memory ordering of a post). The pusher waits for a free slot at most
//! [`sm90_pipeline_timeout_ns`], the post warp for an item at most [`sm90_post_timeout_ns`]
//! (it waits on consumers, which wait on the producer, which waits at most the launch's queue
//! timeout for a ready tile); a timeout is reported as `PipelineTimeout` with the stage and
//! tile concerned, and stops the block's scheduler. In `Protocol::post`, each lane issues
//! `fence.acq_rel.gpu` and then its scoreboard `atom.acq_rel.gpu` / the push's
//! `st.release.gpu` of the slot `seq`; the consumer stage's scheduler pops the tile with
//! `ld.acquire.gpu` of the slot `seq` and issues `fence.proxy.async.global` before the TMA
//! loads of the producer's output ([`PersistentWs::next_tile`]).

use core::marker::PhantomData;

use super::asm;
use super::control::{Ctl, Slot, NONE};
use super::protocol::{report, stage, trace_posted, Protocol};
use crate::kernels::gemm::sm90::gemm_ws;
use crate::kernels::gemm::Bf16;
use crate::post_ring::{PostItem, Ring, STOP};
use crate::ptx::{fence, ids, tma};
use crate::stage::{WsHooks, WsTile};
use cusync_shared::gemm_sm90::TmaGemmParams;
use cusync_shared::layout::ErrorCode;
use cusync_shared::persistent::{
    sm90_pipeline_timeout_ns, sm90_post_timeout_ns, PersistentDesc, FLAG_TRACE, MAX_STAGES,
};

/// The launch descriptor (the block's shared-memory copy, written before the setup barrier).
#[inline(always)]
fn launch() -> &'static PersistentDesc {
    // SAFETY: thread 0 copied the descriptor into the control block before the block's setup
    // barrier; it is read-only afterwards.
    unsafe { &*Ctl::get().desc() }
}

/// The user's id of stage index `i` (`u32::MAX` for none).
///
/// # Safety
/// After the block's setup barrier.
#[inline(always)]
unsafe fn user_stage(i: u32) -> u32 {
    let d = launch();
    if i < d.num_stages {
        // SAFETY: a valid index.
        unsafe { stage(d, i).stage }
    } else {
        u32::MAX
    }
}

/// The path-2 persistent hooks: tiles of any stage from protocol `P` (worker code `CODE`
/// expected of every stage), per-tile parameters from the stage descriptors, posts through the
/// post ring and the post warp (module docs). Stateless: everything lives in shared memory
/// (the control block and the post ring), so the consumers' registers carry nothing.
pub struct PersistentWs<P: Protocol, const CODE: u32> {
    /// The producer's prefetched pop ([`WsHooks::prefetch`]): a tile, DONE or ABORT, or
    /// `NONE` when nothing was taken ahead.
    stash: Slot,
    _protocol: PhantomData<P>,
}

impl<P: Protocol, const CODE: u32> PersistentWs<P, CODE> {
    /// The hooks (every thread builds its own, all alike).
    #[inline(always)]
    pub fn new() -> Self {
        Self {
            stash: Slot::mark(NONE),
            _protocol: PhantomData,
        }
    }

    /// Thread 128: hands `item` to the post warp (waits, bounded, for a free slot; a timeout
    /// is reported and aborts the block's scheduling).
    ///
    /// # Safety
    /// Thread 128 only, after the consumers' barrier that follows the item's stores (or, for
    /// the stop item, after its last tile).
    #[inline(always)]
    unsafe fn push(item: PostItem) {
        let d = launch();
        // SAFETY: the ring was initialised before the setup barrier; the caller's contract.
        if let Err(stuck) = unsafe { Ring::get().push(item, sm90_pipeline_timeout_ns(d.timeout_ns)) } {
            core::hint::cold_path();
            let tile = if item.stage == STOP { u32::MAX } else { item.tile };
            // SAFETY: the launch's error slot; after the setup barrier.
            unsafe {
                report(
                    d,
                    user_stage(item.stage),
                    tile,
                    ErrorCode::PipelineTimeout,
                    stuck.barrier as u64,
                    stuck.seen,
                    stuck.expected,
                )
            };
        }
    }
}

impl<P: Protocol, const CODE: u32> Default for PersistentWs<P, CODE> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Protocol, const CODE: u32> WsHooks for PersistentWs<P, CODE> {
    const POSTS: bool = P::POSTS;
    const POST_WARP: bool = P::POSTS;
    const REGS: (u32, u32) = (
        cusync_shared::gemm_sm90::WG_PERSISTENT_PRODUCER_REGS,
        cusync_shared::gemm_sm90::WG_PERSISTENT_CONSUMER_REGS,
    );

    /// Takes the next ready tile ahead, without waiting (a non-blocking poll), while the
    /// current tile's loads are in flight: a pop under contention costs microseconds, which
    /// would otherwise stall the pipeline between tiles.
    #[inline(always)]
    unsafe fn prefetch(&mut self) {
        if self.stash.stage != NONE || (P::POSTS && Ring::get().aborted()) {
            return;
        }
        let ctl = Ctl::get();
        // SAFETY: thread 0 (the producer), as for `next_tile`.
        self.stash = unsafe { P::at(ctl.desc()).poll(&ctl) };
    }

    #[inline(always)]
    unsafe fn next_tile(&mut self, _p: &TmaGemmParams, _tiles_m: u32, _tiles_n: u32, _splits: u32) -> Option<WsTile> {
        if P::POSTS && Ring::get().aborted() {
            return None;
        }
        let ctl = Ctl::get();
        let item = if self.stash.stage != NONE {
            core::mem::replace(&mut self.stash, Slot::mark(NONE))
        } else {
            // SAFETY: the control block holds the launch's descriptor; thread 0 (the producer).
            unsafe { P::at(ctl.desc()).wait(&ctl) }
        };
        if !item.is_tile() {
            return None; // DONE or ABORT: the stop record
        }
        let d = launch();
        // SAFETY: the scheduler hands out indices below `num_stages`.
        let st = unsafe { stage(d, item.stage) };
        if st.worker != CODE || st.tma_params == 0 {
            core::hint::cold_path();
            // SAFETY: the launch's error slot.
            unsafe {
                report(
                    d,
                    st.stage,
                    item.tile,
                    ErrorCode::BadWorker,
                    st as *const _ as u64,
                    st.worker,
                    CODE,
                )
            };
            return None;
        }
        let t = st.grid.tile(item.tile);
        if P::POSTS {
            // The pop read the slot's `seq` with `ld.acquire.gpu` in this thread: the producer
            // tiles' stores are visible to its generic-proxy accesses. Its TMA loads go through
            // the async proxy: order them after the acquire (DESIGN.md, memory ordering).
            fence::proxy_async_global();
        }
        Some(WsTile {
            tm: t.x,
            tn: t.y,
            id: item.tile,
            split: 0,
            stage: item.stage,
            _pad: 0,
            t_dispatch: item.t_dispatch,
            t_ready: item.t_dispatch,
        })
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, _tile: &mut WsTile, _k_step: u32) -> bool {
        true // a tile is popped only once every producer tile it reads was posted
    }

    #[inline(always)]
    unsafe fn post(&mut self, tile: &WsTile, t_start: u64) {
        // SAFETY: thread 128 after the consumers' barrier (the trait's contract).
        unsafe {
            Self::push(PostItem {
                stage: tile.stage,
                tile: tile.id,
                t_dispatch: tile.t_dispatch,
                t_ready: tile.t_ready,
                t_start,
            })
        }
    }

    #[inline(always)]
    unsafe fn params<'a>(&self, _p: &'a TmaGemmParams, tile: &WsTile) -> &'a TmaGemmParams {
        // SAFETY: `tile.stage` came from the scheduler (a valid index) and the stage passed
        // the worker check, so `tma_params` is the host's `TmaGemmParams`, read-only during the
        // launch.
        unsafe { &*(stage(launch(), tile.stage).tma_params as *const TmaGemmParams) }
    }

    #[inline(always)]
    unsafe fn stage_id(&self, stage: u32) -> u32 {
        // SAFETY: after the setup barrier (every caller is).
        unsafe { user_stage(stage) }
    }

    unsafe fn serve_posts(&mut self, lane: u32) {
        if !P::POSTS {
            return;
        }
        let ctl = Ctl::get();
        let d = launch();
        // SAFETY: the control block holds the launch's descriptor.
        let proto = unsafe { P::at(ctl.desc()) };
        let post = |item: &PostItem, lane: u32| {
            let slot = Slot::tile(item.stage, item.tile, item.t_dispatch);
            // SAFETY: all 32 lanes, after acquiring the tile's stores (`Ring::serve`).
            let ok = unsafe { proto.post(slot, lane) };
            if !asm::vote_any(!ok) && lane == 0 && d.flags & FLAG_TRACE != 0 {
                // SAFETY: a tile of this launch.
                unsafe { trace_posted(d, slot, item.t_start) };
            }
            ok
        };
        // SAFETY: all 32 lanes of the post warp, once; the ring was initialised before the
        // setup barrier.
        if let Err((stuck, last)) = unsafe { Ring::get().serve(lane, sm90_post_timeout_ns(d.timeout_ns), post) } {
            if lane == 0 {
                let (stage, tile) = last.map_or((u32::MAX, u32::MAX), |i| (i.stage, i.tile));
                // SAFETY: the launch's error slot; names the last tile posted.
                unsafe {
                    report(
                        d,
                        user_stage(stage),
                        tile,
                        ErrorCode::PipelineTimeout,
                        stuck.barrier as u64,
                        stuck.seen,
                        stuck.expected,
                    )
                };
            }
        }
    }

    #[inline(always)]
    unsafe fn consumers_done(&mut self) {
        if P::POSTS {
            // SAFETY: thread 128, after its last post.
            unsafe {
                Self::push(PostItem {
                    stage: STOP,
                    tile: 0,
                    t_dispatch: 0,
                    t_ready: 0,
                    t_start: 0,
                })
            };
        }
    }
}

/// The path-2 megakernel: `gemm_ws` (row-major A and B, bf16) over [`PersistentWs`] for the
/// launch `desc` describes. Thread 0 first copies the descriptor into the control block,
/// resets the protocol's per-launch state, initialises the post ring and prefetches every
/// stage's tensor maps; `gemm_ws`'s setup (thread 0's `fence.mbarrier_init` and the block
/// barrier) publishes all of it. The kernel-wide parameters (error slot, pipeline timeout,
/// split-K 1) are stage index 0's `TmaGemmParams`: the host writes the same ones into every
/// stage's.
///
/// # Safety
/// Every thread of a 1-D block of `WG_THREADS` threads calls it, with
/// `WgTileShape { bn: BN, stages: STAGES }.smem_bytes()` of dynamic shared memory; `desc` was
/// written by the host for this launch (at least one stage, every stage a `CODE` worker with
/// valid `tma_params`); the grid is at most the co-resident block count.
#[inline(always)]
pub unsafe fn megakernel_sm90<P: Protocol, const BN: u32, const STAGES: u32, const R: usize, const CODE: u32>(
    desc: &PersistentDesc,
) {
    if ids::tid_x() == 0 {
        let ctl = Ctl::get();
        ctl.set_desc(desc);
        // SAFETY: thread 0, first; the control block holds the descriptor now.
        unsafe { P::at(ctl.desc()).begin(&ctl) };
        if P::POSTS {
            // SAFETY: thread 0, before anyone uses the ring.
            unsafe { Ring::get().init() };
        }
        let stages = if desc.num_stages < MAX_STAGES {
            desc.num_stages
        } else {
            MAX_STAGES
        };
        for i in 0..stages {
            // SAFETY: `i < num_stages`; a nonzero `tma_params` is a `TmaGemmParams` whose
            // `tensor_maps` holds two maps.
            unsafe {
                let tp = stage(desc, i).tma_params;
                if tp != 0 {
                    let maps = (*(tp as *const TmaGemmParams)).tensor_maps;
                    tma::prefetch_map(maps);
                    tma::prefetch_map(maps + 128);
                }
            }
        }
    }
    // SAFETY: stage index 0 exists and its `tma_params` is valid (the host's checks).
    let base = unsafe { &*(stage(desc, 0).tma_params as *const TmaGemmParams) };
    let mut hooks = PersistentWs::<P, CODE>::new();
    // SAFETY: forwarded contract (layouts: the host admits only row-major A and B).
    unsafe { gemm_ws::<Bf16, PersistentWs<P, CODE>, BN, STAGES, R, false, false>(base, &mut hooks) }
}
