//! [`ProtocolMemory`] on the device: the shared protocol state machine
//! (`cusync_shared::protocol`) over the PTX atomics of `crate::ptx::atomics`, one type per
//! scope: [`GpuMemory`] (`.gpu`: every reader on this GPU, persistent mode) and [`SysMemory`]
//! (`.sys`: readers on other GPUs, multi-GPU CTA-pipelining; its fence is `fence.sc.sys`).

use super::asm;
use crate::ptx::{atomics, fence, time};
use cusync_shared::layout::DevAddr;
use cusync_shared::protocol::ProtocolMemory;

/// Polls made back to back before [`ProtocolMemory::backoff`] sleeps: on the H200 even
/// `nanosleep 32` sleeps about a microsecond, longer than a push-to-pop handoff. (A failed CAS
/// never backs off: the shared protocol retries it at once with the value it returned.)
pub const SPIN_ROUNDS: u32 = 16;

/// The back-off both scopes share: nothing for [`SPIN_ROUNDS`] attempts, then short sleeps,
/// then longer ones (a waiting scheduler should not hammer the queue lines producers use).
#[inline(always)]
fn backoff(attempt: u32) {
    if attempt >= SPIN_ROUNDS {
        time::nanosleep(if attempt < 4 * SPIN_ROUNDS { 64 } else { 256 });
    }
}

macro_rules! scoped_memory {
    ($(#[$doc:meta])* $name:ident, $ld_acq:ident, $ld_rel:ident, $st_rel:ident, $st_relaxed:ident,
     $red:ident, $add:ident, $add_relaxed:ident, $cas:ident, $fence:path) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name {
            _private: (),
        }

        impl $name {
            /// The adapter.
            ///
            /// # Safety
            /// Every address the protocol hands it (queues, scoreboards, dependency arrays,
            /// targets, counters) must be a valid, 4-byte-aligned global `u32` for the whole
            /// launch; the words read through `load_readonly` must not be written during it.
            #[inline(always)]
            pub const unsafe fn new() -> Self {
                Self { _private: () }
            }
        }

        impl ProtocolMemory for $name {
            #[inline(always)]
            fn load_acquire(&self, addr: DevAddr) -> u32 {
                // SAFETY: `new`'s contract: `addr` is a valid global word.
                unsafe { atomics::$ld_acq(addr as *const u32) }
            }

            #[inline(always)]
            fn load_relaxed(&self, addr: DevAddr) -> u32 {
                // SAFETY: as above.
                unsafe { atomics::$ld_rel(addr as *const u32) }
            }

            #[inline(always)]
            fn load_readonly(&self, addr: DevAddr) -> u32 {
                // SAFETY: as above, and `new`'s contract: nobody writes it during the launch.
                unsafe { asm::ld_global_nc(addr as *const u32) }
            }

            #[inline(always)]
            fn store_relaxed(&self, addr: DevAddr, value: u32) {
                // SAFETY: as above.
                unsafe { asm::$st_relaxed(addr as *mut u32, value) }
            }

            #[inline(always)]
            fn store_release(&self, addr: DevAddr, value: u32) {
                // SAFETY: as above.
                unsafe { atomics::$st_rel(addr as *mut u32, value) }
            }

            #[inline(always)]
            fn fetch_add_relaxed(&self, addr: DevAddr, value: u32) -> u32 {
                // SAFETY: as above.
                unsafe { atomics::$add_relaxed(addr as *mut u32, value) }
            }

            #[inline(always)]
            fn fetch_add_acq_rel(&self, addr: DevAddr, value: u32) -> u32 {
                // SAFETY: as above.
                unsafe { atomics::$add(addr as *mut u32, value) }
            }

            #[inline(always)]
            fn cas_acq_rel(&self, addr: DevAddr, expected: u32, new: u32) -> u32 {
                // SAFETY: as above.
                unsafe { atomics::$cas(addr as *mut u32, expected, new) }
            }

            #[inline(always)]
            fn red_release_add(&self, addr: DevAddr, value: u32) {
                // SAFETY: as above.
                unsafe { atomics::$red(addr as *mut u32, value) }
            }

            #[inline(always)]
            fn fence_acq_rel(&self) {
                $fence()
            }

            #[inline(always)]
            fn backoff(&self, attempt: u32) {
                backoff(attempt)
            }

            #[inline(always)]
            fn now_ns(&self) -> u64 {
                time::global_timer_ns()
            }
        }
    };
}

scoped_memory!(
    /// Protocol memory at GPU scope (`ld.acquire.gpu`, `atom.acq_rel.gpu`, `fence.acq_rel.gpu`):
    /// producers and consumers on this GPU (persistent mode).
    GpuMemory,
    ld_acquire_gpu,
    ld_relaxed_gpu,
    st_release_gpu,
    st_relaxed_gpu,
    red_release_add_gpu,
    atom_add_gpu,
    atom_add_relaxed_gpu,
    atom_cas_gpu,
    fence::acq_rel_gpu
);
scoped_memory!(
    /// Protocol memory at system scope (`.sys` loads, stores and atomics, `fence.sc.sys`): a
    /// reader on another GPU of the NVLink domain (multi-GPU CTA-pipelining).
    SysMemory,
    ld_acquire_sys,
    ld_relaxed_sys,
    st_release_sys,
    st_relaxed_sys,
    red_release_add_sys,
    atom_add_sys,
    atom_add_relaxed_sys,
    atom_cas_sys,
    fence::sc_sys
);
