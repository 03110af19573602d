//! The CPU wave simulator: how many waves dependent kernels take with stream synchronization
//! and with tile-granularity synchronization, and an event-driven schedule of both kernels
//! under each policy. Runs anywhere, no GPU needed.
//!
//! * [`workload`]: GPUs ([`V100`], [`H200`]), GeMM and Conv2D shapes, tilings.
//! * [`waves`]: the paper's wave arithmetic ([`KernelWaves`], [`PairWaves`]).
//! * [`schedule`]: the event-driven schedule ([`simulate_stream_sync`],
//!   [`simulate_fine_grained`]); policies and dependencies are `cusync_shared::policy`'s, the
//!   very functions the device kernels call.
//! * [`presets`]: the configurations that reproduce the CuSync paper's tables (and how they
//!   were recovered), and the H200 configurations we predict.
//! * [`tables`]: one row per configuration: waves plus simulated StreamSync and policies.
//! * [`report`]: plain-text rendering; [`default_report`] is what `cusync` prints without a GPU.
//! * [`orders`]: host-side tile-order buffers for user-defined orders.
//! * [`dynamic_k`]: dynamic K-chunks (the shared claim protocol) on SMs of unequal speed,
//!   against the static one-tile-per-block launch.
//! * [`persistent`]: the persistent megakernel's schedule of a planned graph (the shared
//!   protocol run on the host under a discrete event clock); [`stacks`]: issue 5's GeMM stacks
//!   in it, against separate kernels, the bound of whole waves and [`microbatch`]ing.

pub mod dynamic_k;
pub mod microbatch;
pub mod orders;
pub mod persistent;
pub mod presets;
pub mod report;
pub mod schedule;
pub mod stacks;
pub mod tables;
pub mod waves;
pub mod workload;

#[cfg(test)]
mod persistent_tests;
#[cfg(test)]
mod tests;

pub use dynamic_k::{b64_gemm2_case, simulate_dynamic_k, DynKCase, DynKOutcome};
pub use orders::{check_order, order_buffer, OrderError};
pub use persistent::{simulate_persistent, PersistentSimError, PersistentSimOptions, PersistentSimOutcome};
pub use presets::{h200_mlp, paper_v100_conv128, paper_v100_mlp, ConvCase, MlpCase};
pub use report::default_report;
pub use schedule::{simulate_fine_grained, simulate_stream_sync, ScheduleError, ScheduleStats, StageSpec};
pub use stacks::{render_stacks, render_stacks_with};
pub use tables::{
    conv_table, mlp_table, predict_pair, KernelSpec, PairPrediction, PolicyOutcome, SimOptions, TileTimes,
    GEMM_CANDIDATES, H200_WAIT_COST, V100_WAIT_COST,
};
pub use waves::{KernelWaves, PairWaves};
pub use workload::{GemmShape, Gpu, Tiling, H200, V100};
