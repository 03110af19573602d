//! The paper's wave arithmetic (Background, "Thread block Wave Execution"; Table 1).
//!
//! A kernel of `T` thread blocks with occupancy `o` on `S` SMs runs `o * S` blocks per wave:
//! it takes `T / (o * S)` waves (fractional, as the paper's tables print them), really
//! `ceil` of that, and uses `T / (o * S * ceil(T / (o * S)))` of the machine (Table 1's
//! "Utilization"). Two dependent kernels under stream synchronization take the sum of their
//! whole waves; under fine-grained synchronization their blocks share waves, so they take the
//! sum of their fractional waves (the paper's "CuSync waves"), `ceil` of it when whole.

use crate::shared::Grid;

use super::workload::Gpu;

/// Waves of one kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelWaves {
    /// The launch grid.
    pub grid: Grid,
    /// Thread blocks (`grid.count()`).
    pub thread_blocks: u32,
    /// Thread blocks per SM.
    pub occupancy: u32,
    /// Thread blocks per wave (`occupancy * SMs`).
    pub capacity: u32,
}

impl KernelWaves {
    /// The waves of a `grid` launch with `occupancy` blocks per SM on `gpu`.
    pub const fn new(grid: Grid, occupancy: u32, gpu: Gpu) -> Self {
        Self {
            grid,
            thread_blocks: grid.count(),
            occupancy,
            capacity: occupancy * gpu.sms,
        }
    }

    /// Fractional waves `thread_blocks / capacity`.
    pub fn waves(&self) -> f64 {
        f64::from(self.thread_blocks) / f64::from(self.capacity)
    }

    /// Whole waves `ceil(thread_blocks / capacity)`.
    pub const fn whole_waves(&self) -> u32 {
        self.thread_blocks.div_ceil(self.capacity)
    }

    /// Thread blocks in the last wave.
    pub const fn last_wave_blocks(&self) -> u32 {
        self.thread_blocks - (self.whole_waves().saturating_sub(1)) * self.capacity
    }

    /// Fraction of the machine the kernel uses over its whole waves.
    pub fn utilization(&self) -> f64 {
        f64::from(self.thread_blocks) / f64::from(self.capacity * self.whole_waves())
    }
}

/// Waves of a producer/consumer kernel pair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairWaves {
    /// The first kernel.
    pub producer: KernelWaves,
    /// The second kernel, which reads the first's output.
    pub consumer: KernelWaves,
}

impl PairWaves {
    /// Whole waves under stream synchronization: each kernel's whole waves, one after the other.
    pub const fn stream_sync_waves(&self) -> u32 {
        self.producer.whole_waves() + self.consumer.whole_waves()
    }

    /// Fractional waves under fine-grained synchronization: both kernels' blocks share waves
    /// (the paper's "CuSync waves"). With equal capacities this is `(T1 + T2) / capacity`.
    pub fn fine_grained_waves(&self) -> f64 {
        self.producer.waves() + self.consumer.waves()
    }

    /// Whole waves under fine-grained synchronization: `ceil` of the shared fractional waves,
    /// a lower bound no schedule beats (the paper's "4 instead of 5 waves" argument).
    pub fn fine_grained_whole_waves(&self) -> u32 {
        if self.producer.capacity == self.consumer.capacity {
            (self.producer.thread_blocks + self.consumer.thread_blocks).div_ceil(self.producer.capacity)
        } else {
            self.fine_grained_waves().ceil() as u32
        }
    }

    /// Whether both kernels' blocks fit in one wave together, so the consumer cannot be
    /// scheduled ahead of unscheduled producer blocks and the wait kernel can be skipped
    /// (the paper's optimization W: blocks of both kernels at most the smaller capacity).
    pub fn fits_one_wave(&self) -> bool {
        self.producer.thread_blocks + self.consumer.thread_blocks <= self.producer.capacity.min(self.consumer.capacity)
    }
}
