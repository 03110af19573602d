//! The path-2 post ring: finished tiles handed from the consumer warpgroups (thread 128) to
//! the post warp (warp 1 of the producer warpgroup) through shared memory, so that a tile's
//! post (a GPU-scope fence and the protocol's atomics) runs in a warp that would otherwise
//! sit idle and never holds up the next tile's `wgmma` (CTA-pipelining paper, section III.C).
//! The persistent megakernel (`crate::persistent::sm90`) and the stream-mode stages
//! (`crate::stream::StreamStage`) both post through it.
//!
//! A single-producer, single-consumer ring of [`SM90_POST_RING`] items in static shared
//! memory, each slot with a `full` and an `empty` `mbarrier` of one arrival ([`RingCursor`]
//! tracks slot and phase parity on both sides). The consumers push one item per finished tile
//! and, when they leave, a stop item ([`PostItem::DONE`]); the post warp serves items in
//! order and exits at the stop item, so every tile is posted before the block exits. Both
//! sides' waits are bounded; a timeout is the caller's to report.
//!
//! # Memory ordering of a post
//!
//! 1. Every consumer thread issues its global stores of the tile (generic proxy, weak).
//! 2. `bar.sync 1, 256` among the consumers: each consumer's stores are ordered before
//!    everything thread 128 does after the barrier (a CTA-scope barrier synchronizes its
//!    participants).
//! 3. Thread 128 writes the item into the slot and arrives on the slot's `full` barrier
//!    ([`Ring::push`]): `mbarrier.arrive` is a release at CTA scope (its default semantics),
//!    and release is cumulative, so it covers the stores thread 128 observed through the
//!    barrier, not only its own.
//! 4. A post-warp lane waits on `full` with `mbarrier.try_wait` ([`Ring::wait_item`], acquire
//!    at CTA scope by default): it synchronizes with that arrival, so the tile's stores happen
//!    before everything the lane does next.
//! 5. The lane issues `fence.acq_rel.gpu` (`fence.sc.sys` for a reader on another GPU) and
//!    then its release atomics at GPU (system) scope: a release pattern that, by the
//!    transitivity of causality order, carries the consumers' stores to any thread that
//!    acquires what it wrote.
//!
//! The post warp then frees the slot ([`Ring::free`]: one `mbarrier.arrive` on `empty`,
//! release), which the pusher acquires before it rewrites the slot.

use crate::ptx::{mbarrier, smem, time};
use cusync_shared::persistent::{RingCursor, SM90_POST_RING};

const RING: usize = SM90_POST_RING as usize;
const _: () = assert!(RING.is_power_of_two());

/// One finished tile on its way to the post warp (or, with `stage == DONE`, the stop item).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PostItem {
    /// Stage index (0 for a stream-mode stage), or [`PostItem::DONE`]: the consumers left.
    pub stage: u32,
    /// Linear tile id.
    pub tile: u32,
    /// When the producer took the tile (tracing).
    pub t_dispatch: u64,
    /// When its first dependency wait returned (tracing).
    pub t_ready: u64,
    /// When the consumers began it (tracing).
    pub t_start: u64,
}

impl PostItem {
    /// [`PostItem::stage`] of the stop item (the persistent scheduler's `DONE` mark too).
    pub const DONE: u32 = u32::MAX - 1;
}

/// The block's post ring in static shared memory.
#[repr(C)]
struct PostRing {
    /// `full[i]`: one arrival (thread 128) publishes item `i`.
    full: [u64; RING],
    /// `empty[i]`: one arrival (a post-warp lane) frees slot `i`.
    empty: [u64; RING],
    /// The items.
    items: [PostItem; RING],
    /// Thread 128's next slot and phase.
    push: RingCursor,
    /// Thread 128: a push timed out (reported); later pushes are dropped.
    push_dead: u32,
    /// Nonzero once the block must stop taking tiles (a post failed or a ring wait timed
    /// out; reported): the producer reads it before every tile.
    abort: u32,
}

const POST_RING_BYTES: usize = 208;
const _: () = assert!(core::mem::size_of::<PostRing>() == POST_RING_BYTES);

crate::static_shared!(fn post_ring_ptr() -> *mut PostRing, cusync_sm90_post_ring, 208);

/// A push that did not go through ([`Ring::push`]).
#[derive(Clone, Copy)]
pub enum PushError {
    /// An earlier push timed out (already reported): the item was dropped.
    Dead,
    /// No slot was freed within the timeout: `empty` barrier `bar`, waited for its phase of
    /// parity `parity`. The ring is now dead and aborted; the caller reports.
    TimedOut {
        /// Shared-window address of the slot's `empty` barrier.
        bar: u32,
        /// Parity waited for.
        parity: u32,
    },
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
    pub fn full(&self, slot: u32) -> u32 {
        smem::to_shared_addr(self.0) + 8 * slot
    }

    /// Shared-window address of `empty[slot]`.
    #[inline(always)]
    pub fn empty(&self, slot: u32) -> u32 {
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

    /// The item in `slot` (after [`Ring::wait_item`] returned `true` for it).
    #[inline(always)]
    pub fn item(&self, slot: u32) -> PostItem {
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

    /// Whether the block must stop taking tiles (a post or a ring wait failed; reported).
    #[inline(always)]
    pub fn aborted(&self) -> bool {
        // SAFETY: a field of the block's ring.
        unsafe { core::ptr::addr_of!((*self.0).abort).read_volatile() != 0 }
    }

    /// Tells the producer to stop taking tiles.
    #[inline(always)]
    pub fn set_abort(&self) {
        // SAFETY: a field of the block's ring.
        unsafe { core::ptr::addr_of_mut!((*self.0).abort).write_volatile(1) }
    }

    /// Thread 128: hands `item` to the post warp, waiting at most `timeout_ns` for a free
    /// slot (module docs, step 3). On a timeout the ring is dead (later pushes are dropped)
    /// and aborted, and the caller reports.
    ///
    /// # Safety
    /// Thread 128 only, after the consumers' barrier that follows the item's stores (or, for
    /// the stop item, after its last tile); the ring was initialised.
    #[inline(always)]
    pub unsafe fn push(&self, item: PostItem, timeout_ns: u64) -> Result<(), PushError> {
        if self.push_dead() {
            return Err(PushError::Dead);
        }
        let c = self.push_cursor();
        let empty = self.empty(c.slot);
        // A fresh barrier counts its (virtual) phase before the first, parity 1, as complete.
        // SAFETY: an initialised barrier of the ring.
        if !unsafe { wait(empty, c.phase ^ 1, timeout_ns) } {
            core::hint::cold_path();
            // SAFETY: a field of the block's ring.
            unsafe { core::ptr::addr_of_mut!((*self.0).push_dead).write_volatile(1) };
            self.set_abort();
            return Err(PushError::TimedOut {
                bar: empty,
                parity: c.phase ^ 1,
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

    /// A post-warp lane: waits (acquire at CTA scope, at most `timeout_ns`) for the item at
    /// `c` (module docs, step 4); `false` on timeout (the caller reports).
    ///
    /// # Safety
    /// A post-warp lane, serving the ring's items in order from the first; the ring was
    /// initialised.
    #[inline(always)]
    pub unsafe fn wait_item(&self, c: RingCursor, timeout_ns: u64) -> bool {
        // SAFETY: an initialised barrier of the ring.
        unsafe { wait(self.full(c.slot), c.phase, timeout_ns) }
    }

    /// One post-warp lane: frees `c`'s slot for the pusher (release), once every lane that
    /// read the item is done with it.
    ///
    /// # Safety
    /// After [`Ring::wait_item`] for `c`, once per item.
    #[inline(always)]
    pub unsafe fn free(&self, c: RingCursor) {
        // SAFETY: an initialised barrier of the ring.
        unsafe { mbarrier::arrive(self.empty(c.slot)) };
    }
}

/// Waits until `bar`'s phase of parity `parity` completed (`mbarrier.try_wait`, acquire at CTA
/// scope), at most `timeout_ns`; `false` on timeout. The thread is suspended meanwhile
/// ([`mbarrier::WAIT_SUSPEND_NS`]): the post warp waits a whole tile for each item, and a warp
/// that spins on `try_wait` and `%globaltimer` takes issue slots from the consumer warps on its
/// scheduler.
///
/// # Safety
/// `bar` is an initialised barrier of the post ring.
#[inline(always)]
unsafe fn wait(bar: u32, parity: u32, timeout_ns: u64) -> bool {
    // SAFETY: the caller's contract.
    if unsafe { mbarrier::try_wait_parity(bar, parity) } {
        return true;
    }
    let start = time::global_timer_ns();
    loop {
        // SAFETY: as above.
        if unsafe { mbarrier::try_wait_parity_suspend(bar, parity, mbarrier::WAIT_SUSPEND_NS) } {
            return true;
        }
        if time::global_timer_ns().wrapping_sub(start) > timeout_ns {
            return false;
        }
    }
}
