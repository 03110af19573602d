//! The persistent-mode planner: from a DAG of stages (tile grids) joined by dependencies and
//! policies, the protocol's host-side tables (CTA-pipelining paper, section III-A):
//!
//! * per edge, the **dependency array** in CSR form, indexed by the producer's linear tile id
//!   ([`Grid::linear`](cusync_shared::Grid::linear)): the consumer tiles it feeds, sorted,
//!   without duplicates ([`EdgePlan`]);
//! * per stage, the **scoreboard targets**: how many producer tiles each of its tiles needs per
//!   launch, over all its incoming edges ([`StagePlan::needed`]);
//! * per stage, the tiles ready before anything runs (a source stage's whole grid, or tiles
//!   that need no producer), in the stage's tile order: the **prefilled queue**
//!   ([`StagePlan::initial_ready`], written per launch by [`StagePlan::prefill`]);
//! * a topological order of the stages, or an error naming a cycle.
//!
//! Which producer tiles a consumer tile needs comes from the same policy functions stream mode
//! calls ([`SyncPolicy`](cusync_shared::policy::SyncPolicy)): a consumer tile needs every
//! producer tile that posts to a semaphore one of its steps waits on, which is exactly what
//! its stream-mode waits would wait for. Built-in policies are checked with
//! [`validate`](cusync_shared::policy::validate); custom ones are checked, tile by tile, to
//! cover every producer tile the consumer reads.
//!
//! [`ProtocolImage`] lays all of it out as one array of `u32` words (queues, scoreboards,
//! dependency arrays, tile counters) with the [`PersistentEdge`](cusync_shared::protocol::PersistentEdge)
//! descriptors the device reads, so the host can upload it as is, and CPU tests can run the
//! shared protocol over it.

mod build;
mod error;
mod image;
mod spec;
mod topo;

#[cfg(test)]
mod tests;

pub use build::{plan, EdgePlan, Plan, Prefill, StagePlan};
pub use error::PlanError;
pub use image::{ProtocolImage, StageMemory};
pub use spec::{EdgePolicy, EdgeSpec, PlanSpec, StageId, StageOrder, StageSpec};
