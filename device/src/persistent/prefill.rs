//! The per-launch queue prefill, on the device in the launch's stream (so nothing is cleared
//! or copied from the host between launches): for every stage, the slots of its ready tiles
//! (`shared::protocol::prefill_slot`, in the stage's order) and the queue's `tail`
//! (`prefill_tail`) for the launch's epoch. The kernel boundary orders it before the megakernel.

use super::asm;
use super::protocol::stage;
use crate::ptx::ids;
use cusync_shared::layout::{WorkQueueCounters, WorkQueueSlot};
use cusync_shared::persistent::{PersistentDesc, MAX_STAGES};
use cusync_shared::protocol::{prefill_slot, prefill_tail, slot_addr, LaunchWindow};

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
        if desc.withhold_prefill & (1 << i) != 0 {
            continue;
        }
        // SAFETY: `i < num_stages`; the host sized `ready` and the queue's slots.
        unsafe {
            let st = stage(desc, i);
            let q = st.queue;
            let window = LaunchWindow::new(desc.epoch, st.grid.count());
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
