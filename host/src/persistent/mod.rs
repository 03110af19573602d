//! Persistent mode on one GPU (issue 5): one launch of co-resident blocks runs a whole DAG of
//! stages; ready tiles are popped from per-stage workqueues, finished ones posted through
//! dependency arrays to their consumers' scoreboards (CTA-pipelining paper, section III).
//!
//! * [`PersistentSpec`]: stages, each a [`StageWork`] (a device tile worker and its buffers:
//!   path 1's `gemm_bf16`, or path 2's `gemm_sm90_bf16`, whose stages run on the
//!   warp-specialized TMA + `wgmma` megakernel with a post warp), and edges with policies; the planner (`crate::plan`) turns the policies into dependency
//!   arrays, scoreboard targets and prefills.
//! * [`PersistentGraph`]: the planned graph on a device: protocol state uploaded once, block
//!   count from the occupancy API, launches (prefill kernel + megakernel, on its own stream)
//!   that count epochs up instead of clearing anything, checks after every synchronized launch
//!   (error slot, tiles-done counter) and a reset after an error. Its no-protocol twin and the
//!   "no dependencies" option ([`PersistentOptions::no_dependencies`]) measure the protocol's
//!   overhead.
//! * [`mod@bench`]: timing helpers for the GeMM-stack benchmarks.
//! * [`persistent_trace`]: a traced launch as a `trace::Trace`; [`trace_layers`] is
//!   `cusync run layers --trace DIR`; [`BlockSummary`]: a traced path-2 launch's time outside
//!   its tiles (block entry, setup, first pop, drain), from its blocks' stamps.
//!
//! The device side, its termination and error protocol and its memory ordering are documented
//! in `device/src/persistent/mod.rs`.

pub mod bench;
mod blocks;
mod graph;
mod knobs;
pub mod report;
mod spec;
mod trace;
mod work;

#[cfg(test)]
mod tests;

pub use bench::{
    default_stack_worker, pick_stack_worker, time_persistent_2layer, time_persistent_chain, time_persistent_chain_on,
    time_persistent_variants, time_persistent_variants_on, PersistentTimes, PersistentVariant,
};
pub use blocks::BlockSummary;
pub use graph::{starved_tile, PersistentGraph, PersistentRun};
pub use knobs::{ABLATE_ENV, DEFAULT_POST_WAIT_NS, MAX_POST_WAIT_NS, POST_WAIT_ENV};
pub use spec::{
    device_order, full_order, resident_ctas, total_tiles, upstream_masks, PersistentOptions, PersistentSpec,
    SchedulePriority,
};
pub use trace::{persistent_trace, resident_blocks_per_sm, trace_layers};
pub use work::{Family, StageWork, WorkerKind, F32_TILE};
