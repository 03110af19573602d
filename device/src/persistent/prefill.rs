//! The per-launch queue prefill, on the device in the launch's stream (so nothing is cleared
//! or copied from the host between launches): for every stage, the slots of its ready tiles
//! (`shared::protocol::prefill_slot`, in the stage's order) and the queue's `tail`
//! (`prefill_tail`) and `head` (`prefill_head`) for the launch's epoch. The kernel boundary orders it before the megakernel.

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
    let stages = desc.num_stages.min(MAX_STAGES);
    for i in 0..stages {
        // SAFETY: `i < num_stages`.
        let (q, window) = unsafe {
            let st = stage(desc, i);
            (st.queue, LaunchWindow::new(desc.epoch, st.grid.count()))
        };
        if me == 0 {
            // Every stage's head, withheld or not: the previous launch's fetch-add pops may
            // have left it past that launch's window (`shared::protocol::try_pop`).
            let head = q.counters + core::mem::offset_of!(WorkQueueCounters, head) as u64;
            // SAFETY: the queue's counters word; nothing else touches it while this runs.
            unsafe { asm::st_relaxed_gpu(head as *mut u32, prefill_head(window)) };
        }
        if desc.withhold_prefill & (1 << i) != 0 {
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
                let tail = q.counters + core::mem::offset_of!(WorkQueueCounters, tail) as u64;
                asm::st_relaxed_gpu(tail as *mut u32, prefill_tail(window, count));
            }
        }
    }
}
