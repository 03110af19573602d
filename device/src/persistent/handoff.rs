//! The path-2 megakernel's tile hand-off: one slot in static shared memory through which the
//! block's scheduler warp ([`super::sm90`]'s `serve_schedule`) gives the producer thread its
//! next tile (CTA-pipelining paper, section III.B: a scheduler warp pops ready tiles and hands
//! them to the worker warps through shared memory and an `mbarrier`).
//!
//! # Protocol
//!
//! Two `mbarrier`s of one arrival each: `full` (the scheduler wrote the slot) and `empty` (the
//! producer let it go). The scheduler waits for `empty`, pops, writes the item and arrives on
//! `full`; the producer waits for `full`, reads the item, and arrives on `empty` halfway through
//! issuing that tile's loads (the prefetch point: the scheduler then pops the next tile while
//! the current one computes) or, at the latest, when it asks for the next tile. A fresh
//! barrier counts its virtual phase before the first (parity 1) as complete, so the scheduler's
//! first pop needs no release.
//!
//! # Memory ordering
//!
//! The scheduler's pop reads the queue slot with `ld.acquire.gpu`; its `mbarrier.arrive` on
//! `full` is a release at CTA scope and the producer's `try_wait` an acquire at CTA scope, so
//! (causality order is transitive) the producer tiles' stores the pop acquired are visible to
//! the producer thread. It then issues `fence.proxy.async.global` before the tile's TMA loads,
//! exactly as when it popped itself. The producer's arrival on `empty` (release) orders its
//! read of the slot before the scheduler's next write (acquire).
//!
//! # Leaving
//!
//! The scheduler leaves after handing over a stop item (`DONE` or `ABORT`), or when the
//! producer has gone ([`Handoff::producer_gone`]: set by the producer when it returns for any
//! other reason, which then also releases the slot if it holds it; the scheduler reads the flag
//! while it waits for the slot), so neither side waits for the other past its own bounded
//! waits.

use super::control::Slot;
use crate::ptx::{mbarrier, smem};

/// The hand-off's shared state.
#[repr(C)]
struct HandoffState {
    /// One arrival (the scheduler): the item is written.
    full: u64,
    /// One arrival (the producer): the item is read, the slot free.
    empty: u64,
    /// The item: a tile, or `DONE` / `ABORT`.
    item: Slot,
    /// Nonzero once the producer returned without a stop item (a timed-out pipeline wait, a
    /// failed post seen): the scheduler leaves instead of popping.
    producer_gone: u32,
    _pad: u32,
}

const HANDOFF_BYTES: usize = 40;
const _: () = assert!(core::mem::size_of::<HandoffState>() == HANDOFF_BYTES);

crate::static_shared!(fn handoff_ptr() -> *mut HandoffState, cusync_persistent_handoff, 40);

/// Accessors of the block's hand-off slot (every field is shared between two threads).
pub struct Handoff(*mut HandoffState);

impl Handoff {
    /// The block's hand-off.
    #[inline(always)]
    pub fn get() -> Self {
        Self(handoff_ptr())
    }

    /// Shared-window address of the `full` barrier.
    #[inline(always)]
    pub fn full(&self) -> u32 {
        smem::to_shared_addr(self.0)
    }

    /// Shared-window address of the `empty` barrier.
    #[inline(always)]
    pub fn empty(&self) -> u32 {
        smem::to_shared_addr(self.0) + 8
    }

    /// Thread 0, before the block's setup barrier (whose `fence.mbarrier_init` the pipeline
    /// setup issues): initialises both barriers and the flag.
    ///
    /// # Safety
    /// Thread 0 only, once, before anyone uses the hand-off.
    #[inline(always)]
    pub unsafe fn init(&self) {
        // SAFETY: 8-byte aligned barriers of this block's hand-off, unused so far.
        unsafe {
            mbarrier::init(self.full(), 1);
            mbarrier::init(self.empty(), 1);
            core::ptr::addr_of_mut!((*self.0).producer_gone).write_volatile(0);
        }
    }

    /// The item (read field by field: a volatile copy of the struct would go through local
    /// memory).
    #[inline(always)]
    pub fn item(&self) -> Slot {
        // SAFETY: fields of the block's hand-off.
        unsafe {
            let p = core::ptr::addr_of!((*self.0).item);
            Slot {
                stage: core::ptr::addr_of!((*p).stage).read_volatile(),
                tile: core::ptr::addr_of!((*p).tile).read_volatile(),
                t_dispatch: core::ptr::addr_of!((*p).t_dispatch).read_volatile(),
            }
        }
    }

    /// Writes the item (the scheduler, while it owns the slot).
    #[inline(always)]
    pub fn set_item(&self, s: Slot) {
        // SAFETY: fields of the block's hand-off.
        unsafe {
            let p = core::ptr::addr_of_mut!((*self.0).item);
            core::ptr::addr_of_mut!((*p).stage).write_volatile(s.stage);
            core::ptr::addr_of_mut!((*p).tile).write_volatile(s.tile);
            core::ptr::addr_of_mut!((*p).t_dispatch).write_volatile(s.t_dispatch);
        }
    }

    /// Whether the producer returned without a stop item.
    #[inline(always)]
    pub fn producer_gone(&self) -> bool {
        // SAFETY: a field of the block's hand-off.
        unsafe { core::ptr::addr_of!((*self.0).producer_gone).read_volatile() != 0 }
    }

    /// The producer: it returned without a stop item (set before it releases a slot it
    /// holds; the scheduler reads it between its `try_wait`s on `empty`).
    #[inline(always)]
    pub fn set_producer_gone(&self) {
        // SAFETY: a field of the block's hand-off.
        unsafe { core::ptr::addr_of_mut!((*self.0).producer_gone).write_volatile(1) }
    }
}
