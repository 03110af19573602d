//! The loom models' protocol memory ([`LoomWords`]: [`ProtocolMemory`] over loom atomics,
//! with a deliberate [`Weakness`] to show a model can fail), shared by the loom test files
//! through `#[path]` modules.
#![allow(dead_code)]

use cusync_shared::layout::DevAddr;
use cusync_shared::protocol::ProtocolMemory;
use loom::sync::atomic::{fence, AtomicU32, Ordering};
use loom::thread;

/// Address of word 0 of every model's memory.
pub const BASE: DevAddr = 0x1000;
/// A deliberate weakening of the memory, to check the models catch a missing edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weakness {
    /// The real orderings.
    None,
    /// Acquire-release read-modify-writes (scoreboard arrivals) become relaxed.
    RelaxedRmw,
    /// Release stores (queue `seq` publication) become relaxed.
    RelaxedStore,
    /// Acquire-release fences become release fences: a post's fence after its relaxed
    /// arrivals then publishes without having acquired the other producers' output.
    ReleaseOnlyFence,
}

/// Protocol memory over loom atomics: word `i` at address `BASE + 4 * i`. The clock counts
/// reads (a plain std atomic: loom runs one execution's threads one at a time, so it is
/// deterministic per schedule).
pub struct LoomWords {
    words: Vec<AtomicU32>,
    weakness: Weakness,
    clock: std::sync::atomic::AtomicU64,
}

impl LoomWords {
    /// Memory holding `image` (word `i` at `BASE + 4 * i`), weakened by `weakness`.
    pub fn new(image: &[u32], weakness: Weakness) -> Self {
        Self {
            words: image.iter().map(|&v| AtomicU32::new(v)).collect(),
            weakness,
            clock: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The word at `addr` (a relaxed load; for checks after the threads joined).
    pub fn get(&self, addr: DevAddr) -> u32 {
        self.at(addr).load(Ordering::Relaxed)
    }

    fn at(&self, addr: DevAddr) -> &AtomicU32 {
        &self.words[((addr - BASE) / 4) as usize]
    }

    fn rmw_order(&self) -> Ordering {
        if self.weakness == Weakness::RelaxedRmw {
            Ordering::Relaxed
        } else {
            Ordering::AcqRel
        }
    }
}

impl ProtocolMemory for LoomWords {
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
        let order = if self.weakness == Weakness::RelaxedStore {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        self.at(addr).store(value, order)
    }

    fn fetch_add_relaxed(&self, addr: DevAddr, value: u32) -> u32 {
        self.at(addr).fetch_add(value, Ordering::Relaxed)
    }

    fn fetch_add_acq_rel(&self, addr: DevAddr, value: u32) -> u32 {
        self.at(addr).fetch_add(value, self.rmw_order())
    }

    fn cas_acq_rel(&self, addr: DevAddr, expected: u32, new: u32) -> u32 {
        let failure = if self.weakness == Weakness::RelaxedRmw {
            Ordering::Relaxed
        } else {
            Ordering::Acquire
        };
        match self.at(addr).compare_exchange(expected, new, self.rmw_order(), failure) {
            Ok(old) | Err(old) => old,
        }
    }

    fn red_release_add(&self, addr: DevAddr, value: u32) {
        self.at(addr).fetch_add(value, Ordering::Release);
    }

    fn fence_acq_rel(&self) {
        // The weakened RMW variant also drops the post's fence: the fence alone would give the
        // relaxed arrivals release semantics and hide the weakening.
        match self.weakness {
            Weakness::RelaxedRmw => {}
            Weakness::ReleaseOnlyFence => fence(Ordering::Release),
            Weakness::None | Weakness::RelaxedStore => fence(Ordering::AcqRel),
        }
    }

    fn backoff(&self, _attempt: u32) {
        thread::yield_now()
    }

    fn now_ns(&self) -> u64 {
        self.clock.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}
