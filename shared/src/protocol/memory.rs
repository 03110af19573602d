//! [`ProtocolMemory`]: the memory operations the protocol is written against.

use crate::layout::DevAddr;

/// How the protocol reads and writes its `u32` words, with the ordering each access needs.
///
/// Addresses are byte addresses of 4-byte-aligned `u32` words, exactly as the layouts in
/// [`crate::layout`] hold them (a device pointer on the GPU; an offset into a word arena on the
/// host). One thread calls these; block-wide barriers around them are the caller's business.
///
/// The device implementation is a thin adapter over the PTX in `device/src/ptx/atomics.rs`
/// (one type per scope, `.gpu` or `.sys`); the host ones use `core`/`std` atomics
/// ([`super::AtomicWords`]) or loom's (the model checks). The orderings are those of the C++ /
/// PTX memory models: *acquire* loads synchronize with the *release* writes they read from,
/// and a read-modify-write continues the release sequence of the value it reads.
pub trait ProtocolMemory {
    /// Acquire load (device: `ld.acquire.gpu.global.u32`).
    fn load_acquire(&self, addr: DevAddr) -> u32;

    /// Relaxed (coherent, unordered) load (device: `ld.relaxed.gpu.global.u32`).
    fn load_relaxed(&self, addr: DevAddr) -> u32;

    /// Four consecutive words from `addr` (16-byte aligned), each a relaxed load (device: one
    /// `ld.relaxed.gpu.global.v4.u32`, a single round trip). Default: four
    /// [`ProtocolMemory::load_relaxed`]s.
    fn load_relaxed_x4(&self, addr: DevAddr) -> [u32; 4] {
        [
            self.load_relaxed(addr),
            self.load_relaxed(addr + 4),
            self.load_relaxed(addr + 8),
            self.load_relaxed(addr + 12),
        ]
    }

    /// Load of a word the host wrote before the launch and nobody writes during it (the
    /// dependency array and the scoreboard targets). Device: `ld.global.nc.u32` may be used.
    fn load_readonly(&self, addr: DevAddr) -> u32 {
        self.load_relaxed(addr)
    }

    /// Relaxed store (device: `st.relaxed.gpu.global.u32`, or a volatile store).
    fn store_relaxed(&self, addr: DevAddr, value: u32);

    /// Release store (device: `st.release.gpu.global.u32`).
    fn store_release(&self, addr: DevAddr, value: u32);

    /// Relaxed fetch-add; returns the old value (device: `atom.relaxed.gpu.global.add.u32`).
    fn fetch_add_relaxed(&self, addr: DevAddr, value: u32) -> u32;

    /// Acquire-release fetch-add; returns the old value (device: `atom.acq_rel.gpu.global.add.u32`).
    fn fetch_add_acq_rel(&self, addr: DevAddr, value: u32) -> u32;

    /// Acquire-release compare-and-swap: stores `new` if the word is `expected`; returns the
    /// old value either way (device: `atom.acq_rel.gpu.global.cas.b32`).
    fn cas_acq_rel(&self, addr: DevAddr, expected: u32, new: u32) -> u32;

    /// Release add whose result nobody needs (device: `red.release.gpu.global.add.u32`).
    fn red_release_add(&self, addr: DevAddr, value: u32);

    /// Acquire-release fence: this thread's earlier writes (and, after a block barrier, the
    /// block's) are ordered before its later ones (device: `fence.acq_rel.gpu`; `fence.sc.sys`
    /// when the reader is another GPU).
    fn fence_acq_rel(&self);

    /// Called between two polls of a spin-wait (a wait for another party's write); `attempt`
    /// counts from 0 (device: `nanosleep` growing with `attempt`; host: a spin hint or a yield;
    /// loom: yield). A failed CAS does not back off: it retries at once with the value it read.
    fn backoff(&self, attempt: u32);

    /// A clock for spin-wait bounds, in nanoseconds (device: `%globaltimer`). Only differences
    /// are used, with wrapping arithmetic.
    fn now_ns(&self) -> u64;
}

impl<M: ProtocolMemory + ?Sized> ProtocolMemory for &M {
    fn load_acquire(&self, addr: DevAddr) -> u32 {
        (**self).load_acquire(addr)
    }

    fn load_relaxed(&self, addr: DevAddr) -> u32 {
        (**self).load_relaxed(addr)
    }

    fn load_readonly(&self, addr: DevAddr) -> u32 {
        (**self).load_readonly(addr)
    }

    fn load_relaxed_x4(&self, addr: DevAddr) -> [u32; 4] {
        (**self).load_relaxed_x4(addr)
    }

    fn store_relaxed(&self, addr: DevAddr, value: u32) {
        (**self).store_relaxed(addr, value)
    }

    fn store_release(&self, addr: DevAddr, value: u32) {
        (**self).store_release(addr, value)
    }

    fn fetch_add_relaxed(&self, addr: DevAddr, value: u32) -> u32 {
        (**self).fetch_add_relaxed(addr, value)
    }

    fn fetch_add_acq_rel(&self, addr: DevAddr, value: u32) -> u32 {
        (**self).fetch_add_acq_rel(addr, value)
    }

    fn cas_acq_rel(&self, addr: DevAddr, expected: u32, new: u32) -> u32 {
        (**self).cas_acq_rel(addr, expected, new)
    }

    fn red_release_add(&self, addr: DevAddr, value: u32) {
        (**self).red_release_add(addr, value)
    }

    fn fence_acq_rel(&self) {
        (**self).fence_acq_rel()
    }

    fn backoff(&self, attempt: u32) {
        (**self).backoff(attempt)
    }

    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

/// The address of element `index` of an array of `u32` at `base`.
pub(crate) const fn word(base: DevAddr, index: u32) -> DevAddr {
    base.wrapping_add((index as u64).wrapping_mul(4))
}
