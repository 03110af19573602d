//! The block's scheduler state in shared memory (none of it lives in registers across a tile,
//! so the tile workers keep all theirs): the ring of tile slots through which thread 0 hands
//! tiles to the block, and thread 0's and warp 0's bookkeeping.
//!
//! # The ring
//!
//! Slots 0 and 1 alternate: the tile of iteration `i + 1` is written into slot `(i + 1) % 2`
//! before the barrier that ends iteration `i`, while every thread read iteration `i`'s slot
//! after the barrier that ended `i - 1`, so a slot is never rewritten before all threads read
//! it. Slot 2 ([`LATE`]) takes a tile found only after that barrier (when nothing was ready to
//! prefetch) and is read after a second barrier.

use cusync_shared::persistent::{PersistentDesc, MAX_STAGES};

crate::static_shared!(fn control_ptr() -> *mut Control, cusync_persistent_control, 192);

/// One handed-out item: a tile of a stage, or a sentinel in `stage`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Stage index, or [`NONE`], [`DONE`], [`ABORT`].
    pub stage: u32,
    /// Linear tile id (for a tile).
    pub tile: u32,
    /// `%globaltimer` when it was taken from its queue (0 when not tracing).
    pub t_dispatch: u64,
}

/// `Slot::stage`: nothing (no tile was ready when the scheduler polled).
pub const NONE: u32 = u32::MAX;
/// `Slot::stage`: every tile of the launch is handed out; exit.
pub const DONE: u32 = u32::MAX - 1;
/// `Slot::stage`: an error was reported (here or in another block); exit.
pub const ABORT: u32 = u32::MAX - 2;
/// `Slot::stage` bit of a committed ticket ([`Slot::ticket`]): stage index `stage & !TICKET`
/// owns position `tile` of its queue, whose slot was not pushed yet.
pub const TICKET: u32 = 1 << 30;

impl Slot {
    /// A sentinel.
    #[inline(always)]
    pub const fn mark(stage: u32) -> Self {
        Self {
            stage,
            tile: 0,
            t_dispatch: 0,
        }
    }

    /// Tile `tile` of stage index `stage`, taken at `t_dispatch`.
    #[inline(always)]
    pub const fn tile(stage: u32, tile: u32, t_dispatch: u64) -> Self {
        Self {
            stage,
            tile,
            t_dispatch,
        }
    }

    /// A committed ticket: position `position` of stage index `stage`'s queue, not pushed yet
    /// (`cusync_shared::persistent::Poll::Ticket`).
    #[inline(always)]
    pub const fn ticket(stage: u32, position: u32) -> Self {
        Self {
            stage: stage | TICKET,
            tile: position,
            t_dispatch: 0,
        }
    }

    /// Whether this is a tile (not a sentinel, not a ticket).
    #[inline(always)]
    pub const fn is_tile(&self) -> bool {
        self.stage < MAX_STAGES
    }

    /// Whether this is a committed ticket ([`Slot::ticket`]).
    #[inline(always)]
    pub const fn is_ticket(&self) -> bool {
        self.stage & TICKET != 0 && self.stage & !TICKET < MAX_STAGES
    }
}

/// Index of the late slot in [`Control::ring`].
pub const LATE: usize = 2;

/// The block's scheduler state (192 bytes of static shared memory).
#[repr(C)]
pub struct Control {
    /// Tile slots 0 and 1 (alternating) and the late slot.
    pub ring: [Slot; 3],
    /// Thread 0: the item it prefetched during the current tile ([`NONE`] when nothing).
    pub next: Slot,
    /// Warp 0: the finished tile not posted yet ([`NONE`] when nothing).
    pub pending: Slot,
    /// `%globaltimer` when the pending tile started (tracing).
    pub pending_start: u64,
    /// `%globaltimer` when the current tile started (tracing).
    pub current_start: u64,
    /// Thread 0: stages whose queues are finished this launch (bit per stage index).
    pub finished: u32,
    _pad: u32,
    /// The launch descriptor, copied by thread 0 at kernel start: the out-of-line protocol
    /// functions read it here (taking the kernel parameter's address would copy it to local
    /// memory).
    pub desc: PersistentDesc,
    _tail: [u32; 2],
}

const _: () = {
    assert!(core::mem::size_of::<Control>() == 192);
    assert!(core::mem::offset_of!(Control, desc) == 104);
};

/// Volatile accessors: every field is shared between threads or must stay out of registers.
/// Slots are read and written field by field (a volatile copy of the whole struct would go
/// through local memory).
pub struct Ctl(*mut Control);

/// Reads a slot field by field.
///
/// # Safety
/// `p` points into the block's control block.
#[inline(always)]
unsafe fn read_slot(p: *const Slot) -> Slot {
    // SAFETY: the caller's contract.
    unsafe {
        Slot {
            stage: core::ptr::addr_of!((*p).stage).read_volatile(),
            tile: core::ptr::addr_of!((*p).tile).read_volatile(),
            t_dispatch: core::ptr::addr_of!((*p).t_dispatch).read_volatile(),
        }
    }
}

/// Writes a slot field by field.
///
/// # Safety
/// `p` points into the block's control block.
#[inline(always)]
unsafe fn write_slot(p: *mut Slot, s: Slot) {
    // SAFETY: the caller's contract.
    unsafe {
        core::ptr::addr_of_mut!((*p).stage).write_volatile(s.stage);
        core::ptr::addr_of_mut!((*p).tile).write_volatile(s.tile);
        core::ptr::addr_of_mut!((*p).t_dispatch).write_volatile(s.t_dispatch);
    }
}

impl Ctl {
    /// The block's control block.
    #[inline(always)]
    pub fn get() -> Self {
        Self(control_ptr())
    }

    /// Reads ring slot `i` (0, 1 or [`LATE`]).
    #[inline(always)]
    pub fn slot(&self, i: usize) -> Slot {
        // SAFETY: `i < 3` (callers pass 0, 1 or LATE); the pointer is the block's shared block.
        unsafe { read_slot(core::ptr::addr_of!((*self.0).ring[i])) }
    }

    /// Reads only the `stage` of ring slot `i`.
    #[inline(always)]
    pub fn slot_stage(&self, i: usize) -> u32 {
        // SAFETY: as for `slot`.
        unsafe { core::ptr::addr_of!((*self.0).ring[i].stage).read_volatile() }
    }

    /// Writes ring slot `i`.
    #[inline(always)]
    pub fn set_slot(&self, i: usize, s: Slot) {
        // SAFETY: as for `slot`.
        unsafe { write_slot(core::ptr::addr_of_mut!((*self.0).ring[i]), s) }
    }

    /// Thread 0's prefetched item.
    #[inline(always)]
    pub fn next(&self) -> Slot {
        // SAFETY: a field of the block's shared control block.
        unsafe { read_slot(core::ptr::addr_of!((*self.0).next)) }
    }

    /// Sets thread 0's prefetched item.
    #[inline(always)]
    pub fn set_next(&self, s: Slot) {
        // SAFETY: as above.
        unsafe { write_slot(core::ptr::addr_of_mut!((*self.0).next), s) }
    }

    /// Warp 0's pending (finished, unposted) tile.
    #[inline(always)]
    pub fn pending(&self) -> Slot {
        // SAFETY: as above.
        unsafe { read_slot(core::ptr::addr_of!((*self.0).pending)) }
    }

    /// Sets the pending tile.
    #[inline(always)]
    pub fn set_pending(&self, s: Slot) {
        // SAFETY: as above.
        unsafe { write_slot(core::ptr::addr_of_mut!((*self.0).pending), s) }
    }

    /// Start time of the pending tile.
    #[inline(always)]
    pub fn pending_start(&self) -> u64 {
        // SAFETY: as above.
        unsafe { core::ptr::addr_of!((*self.0).pending_start).read_volatile() }
    }

    /// Sets the start time of the pending tile.
    #[inline(always)]
    pub fn set_pending_start(&self, t: u64) {
        // SAFETY: as above.
        unsafe { core::ptr::addr_of_mut!((*self.0).pending_start).write_volatile(t) }
    }

    /// Start time of the current tile.
    #[inline(always)]
    pub fn current_start(&self) -> u64 {
        // SAFETY: as above.
        unsafe { core::ptr::addr_of!((*self.0).current_start).read_volatile() }
    }

    /// Sets the start time of the current tile.
    #[inline(always)]
    pub fn set_current_start(&self, t: u64) {
        // SAFETY: as above.
        unsafe { core::ptr::addr_of_mut!((*self.0).current_start).write_volatile(t) }
    }

    /// The descriptor copy (valid after the kernel's first barrier).
    #[inline(always)]
    pub fn desc(&self) -> *const PersistentDesc {
        // SAFETY: address of a field of the block's shared control block; nothing is read.
        unsafe { core::ptr::addr_of!((*self.0).desc) }
    }

    /// Thread 0, before the kernel's first barrier: copies the launch descriptor.
    #[inline(always)]
    pub fn set_desc(&self, d: &PersistentDesc) {
        // SAFETY: a field of the block's shared control block; a plain copy (the barrier that
        // follows orders it for every thread).
        unsafe { core::ptr::addr_of_mut!((*self.0).desc).write(*d) }
    }

    /// The finished-stage mask.
    #[inline(always)]
    pub fn finished(&self) -> u32 {
        // SAFETY: as above.
        unsafe { core::ptr::addr_of!((*self.0).finished).read_volatile() }
    }

    /// Sets the finished-stage mask.
    #[inline(always)]
    pub fn set_finished(&self, m: u32) {
        // SAFETY: as above.
        unsafe { core::ptr::addr_of_mut!((*self.0).finished).write_volatile(m) }
    }
}
