//! The post ring: finished tiles handed from the consumer warpgroups of a warp-specialized
//! GeMM block (`crate::kernels::gemm::sm90`) to its post warp, which runs the protocol's post
//! (semaphore releases in stream mode, scoreboard decrements and queue pushes in the persistent
//! megakernel) so the warps that compute never wait on a `fence.acq_rel.gpu`.
//!
//! A single-producer (thread 128), single-consumer (the post warp) ring of
//! [`SM90_POST_RING`] items in static shared memory, each slot with a `full` and an `empty`
//! `mbarrier` of one arrival ([`RingCursor`] tracks slot and phase parity on both sides). The
//! consumers push one item per finished tile and, when they leave, a stop item; the post warp
//! posts items in order and leaves at the stop item, so every tile is posted before the block
//! exits. Both waits are bounded ([`Ring::push`], [`Ring::serve`]): a wait that times out is
//! handed back to the caller, who reports it, and sets the ring's abort flag (a scheduler that
//! reads it stops taking tiles).
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
//! 5. The post itself issues `fence.acq_rel.gpu` and then its GPU-scope release (a semaphore's
//!    `red.release.gpu`, a scoreboard's `atom.acq_rel.gpu`, a queue slot's `st.release.gpu`):
//!    a release pattern that, by the transitivity of causality order, carries the consumers'
//!    stores to any thread that acquires the semaphore, scoreboard or slot.
//! 6. That thread (a consumer stage's producer thread) issues `fence.proxy.async.global` after
//!    its acquire and before the TMA loads of the producer's output (async proxy).
//!
//! The post warp then frees the slot: `bar.warp.sync` (every lane's reads of the item are
//! done) and one `mbarrier.arrive` on `empty` (release), which the pusher acquires before it
//! rewrites the slot.

use crate::persistent::asm;
use crate::ptx::{barrier, mbarrier, smem, time};
use cusync_shared::persistent::{RingCursor, SM90_POST_RING};

const RING: usize = SM90_POST_RING as usize;
const _: () = assert!(RING.is_power_of_two());

/// [`PostItem::stage`] of the stop item: the consumers left.
pub const STOP: u32 = u32::MAX;

/// One finished tile on its way to the post warp (or, with `stage ==` [`STOP`], the stop
/// item).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PostItem {
    /// Stage index (the persistent megakernel's; 0 in stream mode), or [`STOP`].
    pub stage: u32,
    /// Linear tile id in the stage's grid.
    pub tile: u32,
    /// When the tile was handed out (tracing).
    pub t_dispatch: u64,
    /// When its dependencies were met (tracing).
    pub t_ready: u64,
    /// When the consumers began it (tracing).
    pub t_start: u64,
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
    /// out; reported): a scheduler reads it before every tile.
    abort: u32,
}

const POST_RING_BYTES: usize = 208;
const _: () = assert!(core::mem::size_of::<PostRing>() == POST_RING_BYTES);

crate::static_shared!(fn post_ring_ptr() -> *mut PostRing, cusync_post_ring, 208);

/// A ring wait that timed out: the barrier, the parity waited for and the other one (for the
/// error report's address, expected and seen fields).
#[derive(Clone, Copy)]
pub struct Stuck {
    /// Shared-window address of the barrier.
    pub barrier: u32,
    /// The phase parity the wait was for.
    pub expected: u32,
    /// The other parity (the barrier's phase when the wait gave up).
    pub seen: u32,
}

/// Volatile accessors of the block's post ring (every field is shared between threads).
pub struct Ring(*mut PostRing);

impl Ring {
    /// The block's ring.
    #[inline(always)]
    pub fn get() -> Self {
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
    pub unsafe fn init(&self) {
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
                t_ready: core::ptr::addr_of!((*p).t_ready).read_volatile(),
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
            core::ptr::addr_of_mut!((*p).t_ready).write_volatile(item.t_ready);
            core::ptr::addr_of_mut!((*p).t_start).write_volatile(item.t_start);
        }
    }

    #[inline(always)]
    fn push_cursor(&self) -> RingCursor {
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

    /// Whether a post failed or a ring wait timed out (the block should take no more tiles).
    #[inline(always)]
    pub fn aborted(&self) -> bool {
        // SAFETY: a field of the block's ring.
        unsafe { core::ptr::addr_of!((*self.0).abort).read_volatile() != 0 }
    }

    /// Marks the block aborted (a scheduler that reads [`Ring::aborted`] stops).
    #[inline(always)]
    pub fn set_abort(&self) {
        // SAFETY: a field of the block's ring.
        unsafe { core::ptr::addr_of_mut!((*self.0).abort).write_volatile(1) }
    }

    /// Thread 128: hands `item` to the post warp, waiting at most `timeout_ns` for a free
    /// slot. `Err` the first time that wait times out (the caller reports it): the ring is
    /// then aborted and every later push is dropped (`Ok`, nothing done).
    ///
    /// # Safety
    /// Thread 128 only, on an initialised ring, after the consumers' barrier that follows the
    /// item's stores (or, for the stop item, after its last tile).
    #[inline(always)]
    pub unsafe fn push(&self, item: PostItem, timeout_ns: u64) -> Result<(), Stuck> {
        if self.push_dead() {
            return Ok(());
        }
        let c = self.push_cursor();
        let empty = self.empty(c.slot);
        // A fresh barrier counts its (virtual) phase before the first, parity 1, as complete.
        // SAFETY: an initialised barrier of the ring.
        if !unsafe { ring_wait(empty, c.phase ^ 1, timeout_ns) } {
            core::hint::cold_path();
            self.set_push_dead();
            self.set_abort();
            return Err(Stuck {
                barrier: empty,
                expected: c.phase ^ 1,
                seen: c.phase,
            });
        }
        self.set_item(c.slot, item);
        // Release at CTA scope (the default of `mbarrier.arrive`): publishes the item and,
        // cumulatively, the consumers' stores of the tile ordered before it by their barrier.
        // SAFETY: as above.
        unsafe { mbarrier::arrive(self.full(c.slot)) };
        self.set_push(c.next(SM90_POST_RING));
        Ok(())
    }

    /// All 32 lanes of the post warp: serves the ring's items in order until the stop item.
    /// Every lane calls `post(item, lane)` for each tile (after acquiring the tile's stores,
    /// module docs); when it returns `false` in any lane (the failing lane reported), the
    /// ring is aborted and nothing more is posted, but items are still drained so the pusher
    /// never blocks. An item that does not arrive within `timeout_ns` aborts the ring and
    /// ends the loop with `Err`: the wait and the last item served (`None`: none yet), for
    /// the caller's report.
    ///
    /// # Safety
    /// Every lane of one warp calls it, once per launch, on an initialised ring; `post` may
    /// rely on the item's tile being stored.
    #[inline(always)]
    pub unsafe fn serve(
        &self,
        lane: u32,
        timeout_ns: u64,
        mut post: impl FnMut(&PostItem, u32) -> bool,
    ) -> Result<(), (Stuck, Option<PostItem>)> {
        let mut c = RingCursor::default();
        let mut healthy = true;
        let mut last = None;
        loop {
            let full = self.full(c.slot);
            // Every lane acquires the arrival itself (module docs, step 4).
            // SAFETY: an initialised barrier of the ring.
            let arrived = unsafe { ring_wait(full, c.phase, timeout_ns) };
            if asm::vote_any(!arrived) {
                core::hint::cold_path();
                if lane == 0 {
                    self.set_abort();
                }
                let stuck = Stuck {
                    barrier: full,
                    expected: c.phase,
                    seen: c.phase ^ 1,
                };
                return Err((stuck, last));
            }
            let item = self.item(c.slot);
            if item.stage == STOP {
                return Ok(()); // the consumers left: every tile they finished is posted
            }
            if healthy && asm::vote_any(!post(&item, lane)) {
                // Reported by the failing lane: post nothing more, stop scheduling, but
                // keep draining the ring so the consumers never block on it.
                healthy = false;
                if lane == 0 {
                    self.set_abort();
                }
            }
            last = Some(item);
            // Every lane's reads of the item are done before lane 0 frees the slot (release).
            barrier::sync_warp();
            if lane == 0 {
                // SAFETY: as above.
                unsafe { mbarrier::arrive(self.empty(c.slot)) };
            }
            c = c.next(SM90_POST_RING);
        }
    }
}

/// Waits until `bar`'s phase of parity `parity` completed (`mbarrier.try_wait`, acquire at CTA
/// scope), at most `timeout_ns`; `false` on timeout (the caller reports).
///
/// # Safety
/// `bar` is an initialised barrier of the post ring.
#[inline(always)]
unsafe fn ring_wait(bar: u32, parity: u32, timeout_ns: u64) -> bool {
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
        if time::global_timer_ns().wrapping_sub(start) > timeout_ns {
            return false;
        }
    }
}
