//! Persistent-mode entry points (`crate::persistent`): the megakernel per worker set, its
//! no-protocol twin (the overhead baseline), and the per-launch queue prefill.
//!
//! | entry point                            | workers               | block | dynamic smem | grid |
//! |----------------------------------------|-----------------------|-------|--------------|------|
//! | `persistent_f32`                       | scalar GeMM, f32 sum  | 256   | 0            | co-resident blocks (occupancy x SMs), at most the tiles |
//! | `persistent_f32_noprotocol`            | scalar GeMM, f32 sum  | 256   | 0            | same |
//! | `persistent_bf16_128x128`              | bf16 GeMM 128 x 128   | 256   | 64 KiB       | same |
//! | `persistent_bf16_128x128_noprotocol`   | bf16 GeMM 128 x 128   | 256   | 64 KiB       | same |
//! | `persistent_sm90_bf16_128x256`         | path-2 bf16 GeMM 128 x 256 | 384 | `WG_TILE_128X256.smem_bytes()` | co-resident blocks (1 per SM), at most the tiles |
//! | `persistent_sm90_bf16_128x256_noprotocol` | same               | 384   | same         | same |
//! | `persistent_sm90_bf16_128x128`         | path-2 bf16 GeMM 128 x 128 | 384 | `WG_TILE_128X128.smem_bytes()` | same |
//! | `persistent_sm90_bf16_128x128_noprotocol` | same               | 384   | same         | same |
//! | `persistent_prefill`                   | (queue prefill)       | any   | 0            | any 1-D grid |
//!
//! Each takes one `PersistentDesc` by value. Launch order per epoch on one stream:
//! `persistent_prefill`, then the megakernel (the no-protocol twin needs no prefill); on sm_90
//! the megakernel is launched programmatically behind the prefill (module docs of
//! `crate::persistent`). The
//! `persistent_sm90_*` entry points exist in sm_90a builds only (`crate::persistent::sm90`);
//! their stages are row-major bf16 GeMMs of one tile shape, each with its `TmaGemmParams` at
//! `PersistentStage::tma_params`.

use crate::persistent::megakernel::megakernel;
use crate::persistent::prefill::prefill;
use crate::persistent::protocol::{CounterProtocol, QueueProtocol};
use crate::persistent::worker::{Bf16Workers, F32Workers};
use crate::ptx::griddep;
use cusync_shared::persistent::PersistentDesc;
#[cfg(target_feature = "sm_90a")]
use {
    crate::persistent::sm90::megakernel_sm90,
    cusync_shared::gemm_sm90::{WG_TILE_128X128, WG_TILE_128X256},
    cusync_shared::persistent::worker,
};

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
/// megakernel on the same stream. Each block first lets the megakernel launch
/// (`griddepcontrol.launch_dependents`): on sm_90 the host launches the megakernel
/// programmatically, so its blocks start while the prefill runs and its protocol threads wait
/// for the prefill's end (`griddepcontrol.wait`) before touching a queue.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn persistent_prefill(desc: PersistentDesc) {
    griddep::launch_dependents();
    // SAFETY: the host launches it alone on the graph's stream, between megakernel launches
    // (a programmatically launched megakernel waits for its end before it reads a queue).
    unsafe { prefill(&desc) }
}

/// Declares a path-2 megakernel entry point and its no-protocol twin.
#[cfg(target_feature = "sm_90a")]
macro_rules! sm90_megakernel {
    ($(#[$doc:meta])* $name:ident, $twin:ident, $shape:ident, $bn:literal, $stages:literal, $r:literal, $code:path) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(desc: PersistentDesc) {
            const _: () = assert!($shape.bn == $bn && $shape.stages == $stages && $shape.acc_regs() == $r);
            // SAFETY: the host launches `WG_THREADS`-thread blocks (at most the co-resident
            // count) with the shape's dynamic shared memory and a descriptor whose stages are
            // all this worker's, with their `TmaGemmParams`.
            unsafe { megakernel_sm90::<QueueProtocol, $bn, $stages, $r, { $code }>(&desc) }
        }

        /// The no-protocol twin of the entry point above (tiles from one counter, nothing
        /// posted, dependencies ignored): the protocol-overhead baseline.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $twin(desc: PersistentDesc) {
            // SAFETY: as above.
            unsafe { megakernel_sm90::<CounterProtocol, $bn, $stages, $r, { $code }>(&desc) }
        }
    };
}

#[cfg(target_feature = "sm_90a")]
sm90_megakernel!(
    /// The path-2 megakernel (sm_90a: TMA + `wgmma`, warp-specialized; `crate::persistent::sm90`)
    /// over bf16 GeMM stages of 128 x 256 x 64 tiles, 4 pipeline stages, with the CTA-pipelining
    /// protocol: thread 0 schedules, two consumer warpgroups compute, a post warp posts.
    persistent_sm90_bf16_128x256,
    persistent_sm90_bf16_128x256_noprotocol,
    WG_TILE_128X256,
    256,
    4,
    128,
    worker::GEMM_SM90_BF16_128X256
);

#[cfg(target_feature = "sm_90a")]
sm90_megakernel!(
    /// The path-2 megakernel over bf16 GeMM stages of 128 x 128 x 64 tiles, 6 pipeline stages.
    persistent_sm90_bf16_128x128,
    persistent_sm90_bf16_128x128_noprotocol,
    WG_TILE_128X128,
    128,
    6,
    64,
    worker::GEMM_SM90_BF16_128X128
);
