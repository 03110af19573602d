//! [`AtomicWords`]: the host implementation of [`ProtocolMemory`] over a slice of `core`
//! atomics (the same types as `std::sync::atomic`), with a virtual clock. Not built for nvptx.

use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use super::ProtocolMemory;
use crate::layout::DevAddr;

/// Protocol memory on the host: word `i` of `words` has address `base + 4 * i`.
///
/// The clock is virtual: every [`ProtocolMemory::now_ns`] call advances it by `tick_ns`, so a
/// spin-wait with timeout `T` gives up after about `T / tick_ns` clock reads, whatever the
/// machine's load (deterministic timeouts in tests). An address outside the slice or not
/// 4-byte aligned panics: on the host that is a bug in the caller's layout.
pub struct AtomicWords<'a> {
    base: DevAddr,
    words: &'a [AtomicU32],
    ticks: AtomicU64,
    tick_ns: u64,
    relax: fn(u32),
}

fn spin_hint(_attempt: u32) {
    core::hint::spin_loop();
}

impl<'a> AtomicWords<'a> {
    /// Memory over `words`, the first at address `base` (4-byte aligned), with a clock that
    /// advances 1 ns per read and a spin hint as back-off.
    pub fn new(base: DevAddr, words: &'a [AtomicU32]) -> Self {
        assert!(base.is_multiple_of(4), "base address {base:#x} is not 4-byte aligned");
        Self {
            base,
            words,
            ticks: AtomicU64::new(0),
            tick_ns: 1,
            relax: spin_hint,
        }
    }

    /// Sets how far the virtual clock advances per read.
    pub fn with_tick_ns(mut self, tick_ns: u64) -> Self {
        self.tick_ns = tick_ns;
        self
    }

    /// Sets the back-off (e.g. `|_| std::thread::yield_now()` when threads outnumber cores).
    pub fn with_backoff(mut self, relax: fn(u32)) -> Self {
        self.relax = relax;
        self
    }

    /// The address of word `index`.
    pub fn addr(&self, index: usize) -> DevAddr {
        self.base + 4 * index as u64
    }

    /// The word at `addr` (for checks; a relaxed load).
    pub fn get(&self, addr: DevAddr) -> u32 {
        self.at(addr).load(Ordering::Relaxed)
    }

    fn at(&self, addr: DevAddr) -> &AtomicU32 {
        let offset = addr.wrapping_sub(self.base);
        assert!(offset.is_multiple_of(4), "address {addr:#x} is not 4-byte aligned");
        let index = (offset / 4) as usize;
        match self.words.get(index) {
            Some(w) => w,
            None => panic!(
                "address {addr:#x} outside the {} words at {:#x}",
                self.words.len(),
                self.base
            ),
        }
    }
}

impl ProtocolMemory for AtomicWords<'_> {
    fn load_acquire(&self, addr: DevAddr) -> u32 {
        self.at(addr).load(Ordering::Acquire)
    }

    fn load_relaxed(&self, addr: DevAddr) -> u32 {
        self.at(addr).load(Ordering::Relaxed)
    }

    fn store_relaxed(&self, addr: DevAddr, value: u32) {
        self.at(addr).store(value, Ordering::Relaxed)
    }

    fn store_release(&self, addr: DevAddr, value: u32) {
        self.at(addr).store(value, Ordering::Release)
    }

    fn fetch_add_relaxed(&self, addr: DevAddr, value: u32) -> u32 {
        self.at(addr).fetch_add(value, Ordering::Relaxed)
    }

    fn fetch_add_acq_rel(&self, addr: DevAddr, value: u32) -> u32 {
        self.at(addr).fetch_add(value, Ordering::AcqRel)
    }

    fn cas_acq_rel(&self, addr: DevAddr, expected: u32, new: u32) -> u32 {
        match self
            .at(addr)
            .compare_exchange(expected, new, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(old) | Err(old) => old,
        }
    }

    fn red_release_add(&self, addr: DevAddr, value: u32) {
        self.at(addr).fetch_add(value, Ordering::Release);
    }

    fn fence_acq_rel(&self) {
        fence(Ordering::AcqRel)
    }

    fn backoff(&self, attempt: u32) {
        (self.relax)(attempt)
    }

    fn now_ns(&self) -> u64 {
        self.ticks.fetch_add(1, Ordering::Relaxed).wrapping_mul(self.tick_ns)
    }
}
