//! Stream mode (the CuSync paper): every stage is its own kernel on its own stream; tiles
//! synchronize through semaphores with a policy per edge; a one-thread wait kernel orders
//! kernel start (skipped when both grids fit in one wave: optimization W). On sm_90 the
//! stages can instead go on one stream, each consumer launched programmatically
//! ([`WaitKernelPolicy::Programmatic`]): the hardware then orders kernel start.
//!
//! The graph owns the protocol state (tile counters, start counts, semaphores, error slot,
//! traces) and launches; what each stage computes is the caller's kernel, launched from a
//! closure that receives the stage's [`StageDesc`](cusync_shared::layout::StageDesc) and stream. Counters and semaphores count up
//! for ever (launch `e` waits for `(e + 1) * expected`), so a graph runs again without clearing.

mod graph;
mod launch_plan;
mod spec;

pub use graph::{
    download_trace, download_traces, trace_buffer, DebugInjection, StageDescArg, StageLaunch, StreamGraph, StreamRun,
};
pub use launch_plan::WaitKernelPolicy;
pub use spec::{persistent_blocks, Edge, GraphSpec, StageConfig, StageId};
