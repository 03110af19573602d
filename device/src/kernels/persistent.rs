//! Persistent-mode entry points (`crate::persistent`): the megakernel per worker set, its
//! no-protocol twin (the overhead baseline), and the per-launch queue prefill.
//!
//! | entry point                            | workers               | block | dynamic smem | grid |
//! |----------------------------------------|-----------------------|-------|--------------|------|
//! | `persistent_f32`                       | scalar GeMM, f32 sum  | 256   | 0            | co-resident blocks (occupancy x SMs), at most the tiles |
//! | `persistent_f32_noprotocol`            | scalar GeMM, f32 sum  | 256   | 0            | same |
//! | `persistent_bf16_128x128`              | bf16 GeMM 128 x 128   | 256   | 64 KiB       | same |
//! | `persistent_bf16_128x128_noprotocol`   | bf16 GeMM 128 x 128   | 256   | 64 KiB       | same |
//! | `persistent_prefill`                   | (queue prefill)       | any   | 0            | any 1-D grid |
//!
//! Each takes one `PersistentDesc` by value. Launch order per epoch on one stream:
//! `persistent_prefill`, then the megakernel (the no-protocol twin needs no prefill).

use crate::persistent::megakernel::megakernel;
use crate::persistent::prefill::prefill;
use crate::persistent::protocol::{CounterProtocol, QueueProtocol};
use crate::persistent::worker::{Bf16Workers, F32Workers};
use cusync_shared::persistent::PersistentDesc;

/// The megakernel over the f32 test workers (scalar GeMM, sum), with the CTA-pipelining
/// protocol.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn persistent_f32(desc: PersistentDesc) {
    // SAFETY: the host launches 256-thread blocks, at most the co-resident count, with a
    // descriptor written for this launch.
    unsafe { megakernel::<QueueProtocol, F32Workers>(&desc) }
}

/// [`persistent_f32`] without any protocol (tickets from one counter, nothing posted): only
/// for measuring the protocol's overhead; it ignores dependencies.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn persistent_f32_noprotocol(desc: PersistentDesc) {
    // SAFETY: as above.
    unsafe { megakernel::<CounterProtocol, F32Workers>(&desc) }
}

/// The megakernel over the bf16 tensor-core GeMM (128 x 128 tiles), with the CTA-pipelining
/// protocol. 64 KiB of dynamic shared memory.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn persistent_bf16_128x128(desc: PersistentDesc) {
    // SAFETY: as above, with `TILE_128X128.smem_bytes()` of dynamic shared memory.
    unsafe { megakernel::<QueueProtocol, Bf16Workers>(&desc) }
}

/// [`persistent_bf16_128x128`] without any protocol (the overhead baseline).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn persistent_bf16_128x128_noprotocol(desc: PersistentDesc) {
    // SAFETY: as above.
    unsafe { megakernel::<CounterProtocol, Bf16Workers>(&desc) }
}

/// Writes every stage's queue prefill for launch `desc.epoch`; launch it before the
/// megakernel on the same stream.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn persistent_prefill(desc: PersistentDesc) {
    // SAFETY: the host launches it alone on the graph's stream, between megakernel launches.
    unsafe { prefill(&desc) }
}
