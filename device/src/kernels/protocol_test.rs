//! The first protocol test (issue 2, item 6): a consumer kernel, launched first on its own
//! stream, waits per block on semaphores that a producer kernel, launched second on another
//! stream, posts after writing its data. If the two streams were serialized the consumer would
//! time out (and report it) instead of finishing.

use crate::ptx::{ids, time};
use crate::sync::{self, WaitSite};
use cusync_shared::layout::ErrorSlot;

/// The value producer block `b` writes at element `i` in launch `epoch`.
#[inline(always)]
pub fn produced_value(b: u32, i: u32, epoch: u32) -> f32 {
    (b * 1000 + i % 1000) as f32 + 0.25 * epoch as f32
}

/// Producer: block b waits `delay_ns` (thread 0), writes `n` floats of tile b, then posts
/// `sems[b]` (+1, release, gpu scope).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn protocol_producer(data: *mut f32, sems: *mut u32, n: u32, epoch: u32, delay_ns: u64) {
    let b = ids::ctaid_x();
    let t = ids::thread_linear();
    if t == 0 && delay_ns > 0 {
        let until = time::global_timer_ns() + delay_ns;
        while time::global_timer_ns() < until {
            time::nanosleep(1000);
        }
    }
    let mut i = t;
    while i < n {
        unsafe { *data.add((b * n + i) as usize) = produced_value(b, i, epoch) };
        i += ids::ntid_x();
    }
    unsafe { sync::block_post_gpu(sems.add(b as usize), 1) };
}

/// Consumer: block c reads producer tile p = (c * perm_mul) % blocks, after waiting for
/// `sems[p] >= epoch + 1`; out[c*n + i] = 2 * data[p*n + i] + 1. On timeout the block records
/// the error and exits without writing.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn protocol_consumer(
    data: *const f32,
    sems: *const u32,
    out: *mut f32,
    n: u32,
    epoch: u32,
    perm_mul: u32,
    error: *mut ErrorSlot,
    timeout_ns: u64,
) {
    let c = ids::ctaid_x();
    let blocks = ids::nctaid_x();
    let p = (c * perm_mul) % blocks;
    let site = WaitSite {
        stage: 1,
        tile: c,
        error,
        timeout_ns,
    };
    if !unsafe { sync::block_wait_gpu(sems.add(p as usize), epoch + 1, &site) } {
        return;
    }
    let mut i = ids::thread_linear();
    while i < n {
        unsafe { *out.add((c * n + i) as usize) = 2.0 * *data.add((p * n + i) as usize) + 1.0 };
        i += ids::ntid_x();
    }
}
