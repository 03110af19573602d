//! The per-launch queue prefill, on the device in the launch's stream (so nothing is cleared
//! or copied from the host between launches): for every stage, the slots of its ready tiles
//! (`shared::protocol::prefill_slot`, in the stage's order) and the queue's `tail`
//! (`prefill_tail`) and `head` (`prefill_head`) for the launch's epoch. The kernel boundary orders it before the megakernel.
//! The path-2 megakernel's last block to leave writes the same for the next epoch
//! ([`prefill_epoch`], `FLAG_PREFILL_NEXT`).

use super::asm;
use super::protocol::stage;
use crate::ptx::ids;
use cusync_shared::layout::{WorkQueueCounters, WorkQueueSlot};
use cusync_shared::persistent::{PersistentDesc, MAX_STAGES};
use cusync_shared::protocol::{prefill_head, prefill_slot, prefill_tail, slot_addr, LaunchWindow};

/// Writes every stage's prefill for launch `desc.epoch` (grid-stride over any 1-D grid),
/// except the stages `desc.withhold_prefill` names (a fault test: their tiles never become
/// ready).
///
/// # Safety
/// `desc` describes the launch; nothing else touches the queues while it runs.
#[inline(always)]
pub unsafe fn prefill(desc: &PersistentDesc) {
    let threads = ids::nctaid_x() * ids::ntid_x();
    let me = ids::ctaid_x() * ids::ntid_x() + ids::tid_x();
    // SAFETY: forwarded contract.
    unsafe { prefill_epoch(desc, desc.epoch, me, threads) }
}

/// Thread `me` of `threads` writing its share of launch `epoch`'s prefill for the queues
/// `desc` describes: every stage's `head` (thread 0), and for each stage not withheld its
/// ready tiles' slots (strided over the threads) and its `tail` (thread 0); a withheld stage's
/// `tail` is set empty, whatever an earlier prefill of this epoch wrote (the previous launch's
/// last block, `FLAG_PREFILL_NEXT`).
///
/// # Safety
/// `desc` describes the graph's queues; nothing else touches them while the `threads` threads
/// write (the caller's ordering: a kernel boundary, or the exit counter's last block).
#[inline(always)]
pub unsafe fn prefill_epoch(desc: &PersistentDesc, epoch: u32, me: u32, threads: u32) {
    let stages = desc.num_stages.min(MAX_STAGES);
    for i in 0..stages {
        // SAFETY: `i < num_stages`.
        let (q, window) = unsafe {
            let st = stage(desc, i);
            (st.queue, LaunchWindow::new(epoch, st.grid.count()))
        };
        let tail = q.counters + core::mem::offset_of!(WorkQueueCounters, tail) as u64;
        if me == 0 {
            // Every stage's head, withheld or not: the previous launch's fetch-add pops may
            // have left it past that launch's window (`shared::protocol::try_pop`).
            let head = q.counters + core::mem::offset_of!(WorkQueueCounters, head) as u64;
            // SAFETY: the queue's counters word; nothing else touches it while this runs.
            unsafe { asm::st_relaxed_gpu(head as *mut u32, prefill_head(window)) };
        }
        if desc.withhold_prefill & (1 << i) != 0 {
            if me == 0 {
                // SAFETY: as above.
                unsafe { asm::st_relaxed_gpu(tail as *mut u32, prefill_tail(window, 0)) };
            }
            continue;
        }
        // SAFETY: `i < num_stages`; the host sized `ready` and the queue's slots.
        unsafe {
            let st = stage(desc, i);
            let count = st.ready_count.min(q.capacity);
            let ready = st.ready as *const u32;
            let mut j = me;
            while j < count {
                let slot = prefill_slot(window, j, *ready.add(j as usize));
                let at = slot_addr(&q, j) as *mut WorkQueueSlot;
                (*at).tile = slot.tile;
                (*at).seq = slot.seq;
                j += threads;
            }
            if me == 0 {
                asm::st_relaxed_gpu(tail as *mut u32, prefill_tail(window, count));
            }
        }
    }
}
