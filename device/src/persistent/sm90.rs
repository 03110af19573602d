//! The path-2 persistent megakernel (sm_90a): the warp-specialized GeMM body of
//! `kernels::gemm::sm90` (TMA + `mbarrier` stages + `wgmma`, 384-thread blocks) running every
//! stage of a DAG of bf16 GeMMs in one launch, under a [`Protocol`] (the CTA-pipelining queues,
//! or the no-protocol baseline).
//!
//! # Roles (CTA-pipelining paper, section III.B)
//!
//! * **Lane 0 of warp 2, scheduler** ([`PersistentWs::serve_schedule`]): pops the next ready
//!   tile of any stage from the protocol (bounded waits) one tile ahead of the producer and
//!   hands it over through shared memory and an `mbarrier` pair ([`Handoff`]).
//! * **Thread 0, producer** ([`PersistentWs::next_tile`]): takes the handed tile, turns it
//!   into a tile record that carries the stage index, loads that stage's A and B boxes through
//!   that stage's tensor maps (`PersistentStage::tma_params`) and writes the record with every
//!   pipeline stage it fills; halfway through a tile's loads it releases the hand-off, so the
//!   scheduler pops the next tile then. `DONE` or `ABORT` becomes the stop record `gemm_ws`
//!   already publishes when its hooks run out of tiles. (The no-protocol twin has no
//!   scheduler warp: its producer takes tickets from its counter itself.)
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
//! A single-producer (thread 128), single-consumer (the post warp) ring of
//! [`SM90_POST_RING`] items in static shared memory, each slot with a `full` and an `empty`
//! `mbarrier` of one arrival ([`RingCursor`] tracks slot and phase parity on both sides). The
//! consumers push one item per finished tile and, when they leave, a stop item; the post warp
//! posts items in order and exits at the stop item, so every tile is posted before the block
//! exits. Both waits are bounded: the pusher waits for a free slot at most
//! [`sm90_pipeline_timeout_ns`], the post warp for an item at most [`sm90_post_timeout_ns`]
//! (it waits on consumers, which wait on the producer, which waits at most the launch's queue
//! timeout for a ready tile); a timeout is reported as `PipelineTimeout` with the stage and
//! tile concerned, and stops the block's scheduler. The post warp's `try_wait` takes the
//! launch's suspend-time hint (`PersistentDesc::post_wait_ns`; 0: the hardware's default
//! limit), so that a long sleep, which still ends when an item arrives, leaves the issue slots
//! of its SM sub-partition to the consumer warps there. A launch that posts nothing (the
//! no-posts benchmark ablation) sends the post warp home at once, as the twin's.
//!
//! # Memory ordering of a post
//!
//! 1. Every consumer thread issues its global stores of the tile (generic proxy, weak).
//! 2. `bar.sync 1, 256` among the consumers: each consumer's stores are ordered before
//!    everything thread 128 does after the barrier (a CTA-scope barrier synchronizes its
//!    participants).
//! 3. Thread 128 writes the item into the slot and arrives on the slot's `full` barrier:
//!    `mbarrier.arrive` is a release at CTA scope (its default semantics), and release is
//!    cumulative, so it covers the stores thread 128 observed through the barrier, not only
//!    its own.
//! 4. Each post-warp lane waits on `full` with `mbarrier.try_wait` (acquire at CTA scope by
//!    default): it synchronizes with that arrival, so the tile's stores happen before
//!    everything the lane does next.
//! 5. In `Protocol::post`, each lane issues `fence.acq_rel.gpu` and then its scoreboard
//!    `atom.acq_rel.gpu` / the push's `st.release.gpu` of the slot `seq` (GPU scope): a
//!    release pattern that, by the transitivity of causality order, carries the consumers'
//!    stores to any thread that acquires the scoreboard or the queue slot.
//! 6. The consumer stage's scheduler (lane 0 of warp 2 of some block) pops the tile with
//!    `ld.acquire.gpu` of the slot `seq` and hands it to its producer thread through the
//!    hand-off (an `mbarrier` release / acquire pair at CTA scope: [`Handoff`]), which, before
//!    issuing the TMA loads of the producer's output (async proxy), issues
//!    `fence.proxy.async.global` ([`PersistentWs::next_tile`]).
//!
//! The post warp then frees the slot: `bar.warp.sync` (every lane's reads of the item are
//! done) and one `mbarrier.arrive` on `empty` (release), which the pusher acquires before it
//! rewrites the slot.

use core::marker::PhantomData;

use super::asm;
use super::control::{Ctl, Slot, ABORT, DONE, NONE};
use super::handoff::Handoff;
use super::protocol::{report, stage, stamp, trace_posted, Protocol};
use crate::kernels::gemm::sm90::gemm_ws;
use crate::kernels::gemm::Bf16;
use crate::ptx::{barrier, fence, griddep, ids, mbarrier, smem, time, tma};
use crate::stage::{WsHooks, WsTile};
use cusync_shared::gemm_sm90::TmaGemmParams;
use cusync_shared::layout::ErrorCode;
use cusync_shared::persistent::{
    sm90_pipeline_timeout_ns, sm90_post_timeout_ns, BlockStamps, PersistentDesc, RingCursor, FLAG_ABLATE_NO_FENCE,
    FLAG_ABLATE_NO_POSTS, FLAG_ABLATE_NO_PREFETCH, FLAG_TRACE, MAX_STAGES, SM90_POST_RING,
};

const RING: usize = SM90_POST_RING as usize;
const _: () = assert!(RING.is_power_of_two());

/// One finished tile on its way to the post warp (or, with `stage == DONE`, the stop item).
#[repr(C)]
#[derive(Clone, Copy)]
struct PostItem {
    /// Stage index, or [`DONE`]: the consumers left.
    stage: u32,
    /// Linear tile id.
    tile: u32,
    /// When the scheduler took the tile (tracing).
    t_dispatch: u64,
    /// When the consumers began it (tracing).
    t_start: u64,
}

/// The block's post ring in static shared memory.
#[repr(C)]
struct PostRing {
    /// `full[i]`: one arrival (thread 128) publishes item `i`.
    full: [u64; RING],
    /// `empty[i]`: one arrival (post-warp lane 0) frees slot `i`.
    empty: [u64; RING],
    /// The items.
    items: [PostItem; RING],
    /// Thread 128's next slot and phase.
    push: RingCursor,
    /// Thread 128: a push timed out (reported); later pushes are dropped.
    push_dead: u32,
    /// Nonzero once the block must stop taking tiles (a post failed or a ring wait timed
    /// out; reported): the scheduler reads it before every tile.
    abort: u32,
}

const POST_RING_BYTES: usize = 176;
const _: () = assert!(core::mem::size_of::<PostRing>() == POST_RING_BYTES);

crate::static_shared!(fn post_ring_ptr() -> *mut PostRing, cusync_persistent_post_ring, 176);

/// Volatile accessors of the post ring (every field is shared between threads).
struct Ring(*mut PostRing);

impl Ring {
    #[inline(always)]
    fn get() -> Self {
        Self(post_ring_ptr())
    }

    /// Shared-window address of `full[slot]`.
    #[inline(always)]
    fn full(&self, slot: u32) -> u32 {
        smem::to_shared_addr(self.0) + 8 * slot
    }

    /// Shared-window address of `empty[slot]`.
    #[inline(always)]
    fn empty(&self, slot: u32) -> u32 {
        smem::to_shared_addr(self.0) + 8 * (SM90_POST_RING + slot)
    }

    /// Thread 0, before the block's setup barrier (whose `fence.mbarrier_init` the pipeline
    /// setup issues): initialises the barriers and the pusher's state.
    ///
    /// # Safety
    /// Thread 0 only, once, before anyone uses the ring.
    #[inline(always)]
    unsafe fn init(&self) {
        for i in 0..SM90_POST_RING {
            // SAFETY: 8-byte aligned barriers of this block's ring, unused so far.
            unsafe {
                mbarrier::init(self.full(i), 1);
                mbarrier::init(self.empty(i), 1);
            }
        }
        self.set_push(RingCursor::default());
        // SAFETY: fields of the block's ring.
        unsafe {
            core::ptr::addr_of_mut!((*self.0).push_dead).write_volatile(0);
            core::ptr::addr_of_mut!((*self.0).abort).write_volatile(0);
        }
    }

    #[inline(always)]
    fn item(&self, slot: u32) -> PostItem {
        // SAFETY: a field of the block's ring (the index masked into range; cursors stay below
        // `RING` anyway), read field by field (a volatile copy of the struct would go through
        // local memory).
        unsafe {
            let p = core::ptr::addr_of!((*self.0).items[slot as usize & (RING - 1)]);
            PostItem {
                stage: core::ptr::addr_of!((*p).stage).read_volatile(),
                tile: core::ptr::addr_of!((*p).tile).read_volatile(),
                t_dispatch: core::ptr::addr_of!((*p).t_dispatch).read_volatile(),
                t_start: core::ptr::addr_of!((*p).t_start).read_volatile(),
            }
        }
    }

    #[inline(always)]
    fn set_item(&self, slot: u32, item: PostItem) {
        // SAFETY: as for `item`.
        unsafe {
            let p = core::ptr::addr_of_mut!((*self.0).items[slot as usize & (RING - 1)]);
            core::ptr::addr_of_mut!((*p).stage).write_volatile(item.stage);
            core::ptr::addr_of_mut!((*p).tile).write_volatile(item.tile);
            core::ptr::addr_of_mut!((*p).t_dispatch).write_volatile(item.t_dispatch);
            core::ptr::addr_of_mut!((*p).t_start).write_volatile(item.t_start);
        }
    }

    #[inline(always)]
    fn push(&self) -> RingCursor {
        // SAFETY: fields of the block's ring.
        unsafe {
            RingCursor {
                slot: core::ptr::addr_of!((*self.0).push.slot).read_volatile(),
                phase: core::ptr::addr_of!((*self.0).push.phase).read_volatile(),
            }
        }
    }

    #[inline(always)]
    fn set_push(&self, c: RingCursor) {
        // SAFETY: fields of the block's ring.
        unsafe {
            core::ptr::addr_of_mut!((*self.0).push.slot).write_volatile(c.slot);
            core::ptr::addr_of_mut!((*self.0).push.phase).write_volatile(c.phase);
        }
    }

    #[inline(always)]
    fn push_dead(&self) -> bool {
        // SAFETY: a field of the block's ring.
        unsafe { core::ptr::addr_of!((*self.0).push_dead).read_volatile() != 0 }
    }

    #[inline(always)]
    fn set_push_dead(&self) {
        // SAFETY: a field of the block's ring.
        unsafe { core::ptr::addr_of_mut!((*self.0).push_dead).write_volatile(1) }
    }

    #[inline(always)]
    fn aborted(&self) -> bool {
        // SAFETY: a field of the block's ring.
        unsafe { core::ptr::addr_of!((*self.0).abort).read_volatile() != 0 }
    }

    #[inline(always)]
    fn set_abort(&self) {
        // SAFETY: a field of the block's ring.
        unsafe { core::ptr::addr_of_mut!((*self.0).abort).write_volatile(1) }
    }
}

/// Waits until `bar`'s phase of parity `parity` completed (`mbarrier.try_wait`, acquire at CTA
/// scope), at most `timeout_ns`; `false` on timeout (the caller reports). `suspend_ns` nonzero:
/// each `try_wait` may sleep that long (a suspend-time hint; the thread wakes when the phase
/// completes), else the hardware's default limit.
///
/// # Safety
/// `bar` is an initialised barrier of the post ring.
#[inline(always)]
unsafe fn ring_wait(bar: u32, parity: u32, timeout_ns: u64, suspend_ns: u32) -> bool {
    // SAFETY (closure): the caller's contract (`try_wait` suspends the thread a while before
    // answering false).
    let try_wait = || unsafe {
        if suspend_ns != 0 {
            mbarrier::try_wait_parity_suspend(bar, parity, suspend_ns)
        } else {
            mbarrier::try_wait_parity(bar, parity)
        }
    };
    if try_wait() {
        return true;
    }
    let start = time::global_timer_ns();
    loop {
        if try_wait() {
            return true;
        }
        if time::global_timer_ns().wrapping_sub(start) > timeout_ns {
            return false;
        }
    }
}

/// The launch descriptor (the block's shared-memory copy, written before the setup barrier).
#[inline(always)]
fn launch() -> &'static PersistentDesc {
    // SAFETY: thread 0 copied the descriptor into the control block before the block's setup
    // barrier; it is read-only afterwards.
    unsafe { &*Ctl::get().desc() }
}

/// Which [`BlockStamps`] field [`stamp_block`] writes.
#[derive(Clone, Copy)]
enum BlockEvent {
    Entry,
    Ready,
    ConsumersDone,
    Exit,
}

/// Writes `%globaltimer` into this block's [`BlockStamps`] field `event` when the launch
/// records block stamps (traced launches: `d.blocks` nonzero); nothing otherwise.
#[inline(always)]
fn stamp_block(d: &PersistentDesc, event: BlockEvent) {
    if d.flags & FLAG_TRACE == 0 || d.blocks == 0 {
        return;
    }
    let field = match event {
        BlockEvent::Entry => core::mem::offset_of!(BlockStamps, entry),
        BlockEvent::Ready => core::mem::offset_of!(BlockStamps, ready),
        BlockEvent::ConsumersDone => core::mem::offset_of!(BlockStamps, consumers_done),
        BlockEvent::Exit => core::mem::offset_of!(BlockStamps, exit),
    };
    let at = d.blocks as usize + ids::block_linear() as usize * core::mem::size_of::<BlockStamps>() + field;
    // SAFETY: the host sized `blocks` for one `BlockStamps` per block of the launch; each field
    // is written by one thread of its block (a plain store, read by the host after the launch).
    unsafe { (at as *mut u64).write_volatile(time::global_timer_ns()) }
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
/// expected of every stage), popped by the scheduler warp and handed to the producer thread
/// ([`Handoff`]), per-tile parameters from the stage descriptors, posts through the post ring
/// and the post warp (module docs). The consumers' registers carry nothing: everything shared
/// lives in shared memory (the control block, the hand-off, the post ring); the producer
/// thread keeps two words of hand-off state.
pub struct PersistentWs<P: Protocol, const CODE: u32> {
    /// Producer: it holds the hand-off slot (took a tile, not yet released).
    held: bool,
    /// Producer: parity of the hand-off's next `full` phase.
    full_phase: u32,
    /// Producer: the scheduler handed over its stop item (it has left).
    stopped: bool,
    _protocol: PhantomData<P>,
}

impl<P: Protocol, const CODE: u32> PersistentWs<P, CODE> {
    /// The hooks (every thread builds its own, all alike).
    #[inline(always)]
    pub fn new() -> Self {
        Self {
            held: false,
            full_phase: 0,
            stopped: false,
            _protocol: PhantomData,
        }
    }

    /// Producer: lets the scheduler pop the next tile (arrives on the hand-off's `empty`, a
    /// release at CTA scope that orders this thread's read of the slot before its rewrite).
    #[inline(always)]
    fn release_handoff(&mut self) {
        if self.held {
            self.held = false;
            // SAFETY: the block's hand-off barrier, initialised by thread 0; one arrival per
            // item taken.
            unsafe { mbarrier::arrive(Handoff::get().empty()) };
        }
    }

    /// Producer: the scheduler's next item (a tile, `DONE` or `ABORT`), waiting for it at most
    /// the pipeline timeout (which outlasts the scheduler's queue waits, so a starved queue is
    /// what gets reported); `None` after a timeout (reported).
    ///
    /// # Safety
    /// The producer thread, after the setup barrier, holding no slot.
    #[inline(always)]
    unsafe fn take_handed(&mut self) -> Option<Slot> {
        let h = Handoff::get();
        let d = launch();
        // SAFETY: the hand-off's barrier (the caller's contract).
        if !unsafe { ring_wait(h.full(), self.full_phase, sm90_pipeline_timeout_ns(d.timeout_ns), 0) } {
            core::hint::cold_path();
            Ring::get().set_abort();
            // SAFETY: the launch's error slot; after the setup barrier.
            unsafe {
                report(
                    d,
                    u32::MAX,
                    u32::MAX,
                    ErrorCode::PipelineTimeout,
                    h.full() as u64,
                    self.full_phase ^ 1,
                    self.full_phase,
                )
            };
            return None;
        }
        let item = h.item();
        self.full_phase ^= 1;
        if item.is_tile() {
            self.held = true;
        } else {
            self.stopped = true;
        }
        Some(item)
    }

    /// The scheduler's loop ([`WsHooks::serve_schedule`]), inlined with every pop it makes: a
    /// call from this warp (to this loop or to the out-of-line pops the producer used to call)
    /// made ptxas 13.0 fail the kernel's register allocation (C7600 at 208 registers).
    ///
    /// # Safety
    /// Lane 0 of warp 2, once, after the setup barrier.
    #[inline(always)]
    unsafe fn schedule() {
        griddep::wait();
        let d = launch();
        stamp_block(d, BlockEvent::Ready);
        let ctl = Ctl::get();
        // SAFETY: the control block holds the launch's descriptor.
        let proto = unsafe { P::at(ctl.desc()) };
        let h = Handoff::get();
        // Outlasts the producer's pipeline waits: a producer that holds the slot through a
        // stalled tile reports first.
        let timeout = sm90_post_timeout_ns(d.timeout_ns);
        let mut phase = 0u32;
        loop {
            // A fresh barrier counts its (virtual) phase before the first, parity 1, as complete.
            // SAFETY: the scheduler thread, after the setup barrier.
            if !unsafe { Self::wait_handoff_free(phase ^ 1, timeout) } || h.producer_gone() {
                return;
            }
            let item = if Ring::get().aborted() {
                Slot::mark(ABORT)
            } else {
                // SAFETY: the scheduler thread (the only one that pops); tickets come from this
                // launch's `poll_committing`.
                unsafe {
                    let polled = proto.poll_committing(&ctl);
                    let item = if polled.stage == NONE { proto.wait(&ctl) } else { polled };
                    proto.resolve(item, true)
                }
            };
            h.set_item(item);
            // Release at CTA scope: publishes the item and, cumulatively, what the pop acquired.
            // SAFETY: the hand-off's barrier, initialised by thread 0.
            unsafe { mbarrier::arrive(h.full()) };
            if !item.is_tile() {
                return;
            }
            phase ^= 1;
        }
    }

    /// Scheduler: waits until the producer released the hand-off (`empty`'s phase of parity
    /// `parity`), at most `timeout_ns`; `false` when the producer has gone instead, or on a
    /// timeout (reported).
    ///
    /// # Safety
    /// The scheduler thread, after the setup barrier.
    #[inline(always)]
    unsafe fn wait_handoff_free(parity: u32, timeout_ns: u64) -> bool {
        let h = Handoff::get();
        let start = time::global_timer_ns();
        loop {
            // SAFETY: the hand-off's barrier, initialised by thread 0.
            if unsafe { mbarrier::try_wait_parity(h.empty(), parity) } {
                return true;
            }
            if h.producer_gone() {
                return false;
            }
            if time::global_timer_ns().wrapping_sub(start) > timeout_ns {
                core::hint::cold_path();
                Ring::get().set_abort();
                // SAFETY: the launch's error slot; after the setup barrier.
                unsafe {
                    report(
                        launch(),
                        u32::MAX,
                        u32::MAX,
                        ErrorCode::PipelineTimeout,
                        h.empty() as u64,
                        parity ^ 1,
                        parity,
                    )
                };
                return false;
            }
        }
    }

    /// Thread 128: hands `item` to the post warp (waits, bounded, for a free slot).
    ///
    /// # Safety
    /// Thread 128 only, after the consumers' barrier that follows the item's stores (or, for
    /// the stop item, after its last tile).
    #[inline(always)]
    unsafe fn push(item: PostItem) {
        let ring = Ring::get();
        if ring.push_dead() {
            return;
        }
        let c = ring.push();
        let empty = ring.empty(c.slot);
        let d = launch();
        // A fresh barrier counts its (virtual) phase before the first, parity 1, as complete.
        // SAFETY: an initialised barrier of the ring.
        if !unsafe { ring_wait(empty, c.phase ^ 1, sm90_pipeline_timeout_ns(d.timeout_ns), 0) } {
            core::hint::cold_path();
            ring.set_push_dead();
            ring.set_abort();
            let tile = if item.stage == DONE { u32::MAX } else { item.tile };
            // SAFETY: the launch's error slot; after the setup barrier.
            unsafe {
                report(
                    d,
                    user_stage(item.stage),
                    tile,
                    ErrorCode::PipelineTimeout,
                    empty as u64,
                    c.phase,
                    c.phase ^ 1,
                )
            };
            return;
        }
        ring.set_item(c.slot, item);
        // Release at CTA scope (the default of `mbarrier.arrive`): publishes the item and,
        // cumulatively, the consumers' stores of the tile ordered before it by their barrier.
        // SAFETY: as above.
        unsafe { mbarrier::arrive(ring.full(c.slot)) };
        ring.set_push(c.next(SM90_POST_RING));
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
    const SCHED_WARP: bool = P::POSTS;
    const PIPELINE_DEPTH: bool = false;
    const REGS: (u32, u32) = (
        cusync_shared::gemm_sm90::WG_PERSISTENT_PRODUCER_REGS,
        cusync_shared::gemm_sm90::WG_PERSISTENT_CONSUMER_REGS,
    );

    /// Halfway through issuing the current tile's loads: releases the hand-off, so the
    /// scheduler warp pops the next tile while this one computes (a pop under contention
    /// costs microseconds, which would otherwise stall the pipeline between tiles). The
    /// producer's K loop thus makes one `mbarrier.arrive` here and no call (the pop, out of
    /// line, used to run here and kept the loop's state in local memory).
    #[inline(always)]
    unsafe fn prefetch(&mut self) {
        if P::POSTS && launch().flags & FLAG_ABLATE_NO_PREFETCH == 0 {
            self.release_handoff();
        }
    }

    #[inline(always)]
    unsafe fn next_tile(&mut self, _p: &TmaGemmParams, _tiles_m: u32, _tiles_n: u32, _splits: u32) -> Option<WsTile> {
        let item = if P::POSTS {
            if self.stopped || Ring::get().aborted() {
                return None; // `producer_done` lets the scheduler go
            }
            self.release_handoff();
            // SAFETY: the producer thread, holding no slot now.
            unsafe { self.take_handed() }?
        } else {
            let ctl = Ctl::get();
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
        // The queue protocol stamps a tile when it pops it (tracing); the twin's counter does not.
        let t_dispatch = if P::POSTS { item.t_dispatch } else { stamp(d) };
        if P::POSTS && d.flags & FLAG_ABLATE_NO_FENCE == 0 {
            // The scheduler's pop read the slot's `seq` with `ld.acquire.gpu`, and this thread
            // acquired the hand-off after it: the producer tiles' stores are visible to this
            // thread's generic-proxy accesses. Its TMA loads go through the async proxy: order
            // them after the acquire (DESIGN.md, memory ordering).
            fence::proxy_async_global();
        }
        Some(WsTile {
            tm: t.x,
            tn: t.y,
            id: item.tile,
            split: 0,
            stage: item.stage,
            _pad: 0,
            t_dispatch,
            t_ready: t_dispatch,
        })
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, _tile: &mut WsTile, _k_step: u32) -> bool {
        true // a tile is popped only once every producer tile it reads was posted
    }

    /// Posts unless the launch ablates them (`FLAG_ABLATE_NO_POSTS`, a benchmark of
    /// dependencies-met launches: the consumers then skip their barrier and the push).
    #[inline(always)]
    fn posts_now(&self) -> bool {
        P::POSTS && launch().flags & FLAG_ABLATE_NO_POSTS == 0
    }

    /// The no-protocol twin, traced, calls [`WsHooks::post`] only to write its tiles' trace
    /// events (the protocol variants trace from the post warp).
    #[inline(always)]
    fn traces(&self) -> bool {
        !P::POSTS && launch().flags & FLAG_TRACE != 0
    }

    #[inline(always)]
    unsafe fn post(&mut self, tile: &WsTile, t_start: u64) {
        if !P::POSTS {
            // The traced twin: its tile's event, from thread 128 (nothing is posted).
            // SAFETY: `tile.stage` came from the scheduler, a valid index of this launch.
            unsafe { trace_posted(launch(), Slot::tile(tile.stage, tile.id, tile.t_dispatch), t_start) };
            return;
        }
        // SAFETY: thread 128 after the consumers' barrier (the trait's contract).
        unsafe {
            Self::push(PostItem {
                stage: tile.stage,
                tile: tile.id,
                t_dispatch: tile.t_dispatch,
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

    /// The scheduler (lane 0 of warp 2): pops the block's tiles one ahead of the producer and
    /// hands each over ([`Handoff`]). It waits for the prefill's end first (its pops read the
    /// queues the prefill writes), then, per item: the producer's release of the previous one
    /// (halfway through that tile's loads), a non-blocking committing poll
    /// ([`Protocol::poll_committing`]: a stage whose upstream is all taken is popped with one
    /// fetch-add, so the pops of every block at a layer boundary do not queue on a CAS loop),
    /// else the blocking pop, and the wait for a committed ticket's push. Its waits for a
    /// ready tile block only this warp: the producer has issued every load of its tile before
    /// it asks for the next, so that tile finishes and is posted without the scheduler.
    unsafe fn serve_schedule(&mut self, lane: u32) {
        if P::POSTS && lane == 0 {
            // SAFETY: lane 0 of warp 2, after the setup barrier (the trait's contract).
            unsafe { Self::schedule() }
        }
    }

    /// The producer left: unless the scheduler handed over a stop item (and left), it is told
    /// so, and a slot still held is released so that it wakes.
    #[inline(always)]
    unsafe fn producer_done(&mut self) {
        if P::POSTS && !self.stopped {
            Handoff::get().set_producer_gone();
            self.release_handoff();
        }
    }

    unsafe fn serve_posts(&mut self, lane: u32) {
        if !self.posts_now() {
            return; // nothing to post: the warp leaves as the twin's does
        }
        // The posts push to the queues the prefill writes: as thread 0, wait for its end
        // (returns at once in plain stream order, or once thread 0's wait has returned).
        griddep::wait();
        let ring = Ring::get();
        let ctl = Ctl::get();
        let d = launch();
        // SAFETY: the control block holds the launch's descriptor.
        let proto = unsafe { P::at(ctl.desc()) };
        let timeout = sm90_post_timeout_ns(d.timeout_ns);
        let mut c = RingCursor::default();
        let mut healthy = true;
        let mut last = (u32::MAX, u32::MAX);
        loop {
            let full = ring.full(c.slot);
            // Every lane acquires the arrival itself (module docs, step 4).
            // SAFETY: an initialised barrier of the ring.
            let arrived = unsafe { ring_wait(full, c.phase, timeout, d.post_wait_ns) };
            if asm::vote_any(!arrived) {
                core::hint::cold_path();
                if lane == 0 {
                    ring.set_abort();
                    // SAFETY: the launch's error slot; names the last tile posted.
                    unsafe {
                        report(
                            d,
                            user_stage(last.0),
                            last.1,
                            ErrorCode::PipelineTimeout,
                            full as u64,
                            c.phase ^ 1,
                            c.phase,
                        )
                    };
                }
                return;
            }
            let item = ring.item(c.slot);
            if item.stage == DONE {
                if lane == 0 {
                    stamp_block(d, BlockEvent::Exit);
                }
                return; // the consumers left: every tile they finished is posted
            }
            if healthy {
                let slot = Slot::tile(item.stage, item.tile, item.t_dispatch);
                // SAFETY: all 32 lanes, after acquiring the tile's stores (module docs).
                let ok = unsafe { proto.post(slot, lane) };
                if asm::vote_any(!ok) {
                    // Reported by the failing lane: post nothing more, stop scheduling, but
                    // keep draining the ring so the consumers never block on it.
                    healthy = false;
                    if lane == 0 {
                        ring.set_abort();
                    }
                } else if lane == 0 && d.flags & FLAG_TRACE != 0 {
                    // SAFETY: a tile of this launch.
                    unsafe { trace_posted(d, slot, item.t_start) };
                }
            }
            last = (item.stage, item.tile);
            // Every lane's reads of the item are done before lane 0 frees the slot (release).
            barrier::sync_warp();
            if lane == 0 {
                // SAFETY: as above.
                unsafe { mbarrier::arrive(ring.empty(c.slot)) };
            }
            c = c.next(SM90_POST_RING);
        }
    }

    #[inline(always)]
    unsafe fn consumers_done(&mut self) {
        let d = launch();
        stamp_block(d, BlockEvent::ConsumersDone);
        if !self.posts_now() {
            // No post warp serves this launch: the block's last post is its consumers' end.
            stamp_block(d, BlockEvent::Exit);
        } else {
            // SAFETY: thread 128, after its last post.
            unsafe {
                Self::push(PostItem {
                    stage: DONE,
                    tile: 0,
                    t_dispatch: 0,
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
        stamp_block(desc, BlockEvent::Entry);
        let ctl = Ctl::get();
        ctl.set_desc(desc);
        // SAFETY: thread 0, first; the control block holds the descriptor now.
        unsafe { P::at(ctl.desc()).begin(&ctl) };
        if P::POSTS {
            // SAFETY: thread 0, before anyone uses the ring or the hand-off.
            unsafe {
                Ring::get().init();
                Handoff::get().init();
            }
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
        if !P::POSTS {
            // The twin pops here (its counter needs no prefill); the protocol's scheduler
            // warp stamps its readiness once the prefill it waits for has ended.
            stamp_block(desc, BlockEvent::Ready);
        }
    }
    // SAFETY: stage index 0 exists and its `tma_params` is valid (the host's checks).
    let base = unsafe { &*(stage(desc, 0).tma_params as *const TmaGemmParams) };
    let mut hooks = PersistentWs::<P, CODE>::new();
    // SAFETY: forwarded contract (layouts: the host admits only row-major A and B).
    unsafe { gemm_ws::<Bf16, PersistentWs<P, CODE>, BN, STAGES, R, false, false>(base, &mut hooks) }
}
