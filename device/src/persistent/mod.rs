//! Persistent mode on one GPU (issue 5; CTA-pipelining paper, section III): one launch of
//! co-resident blocks runs every stage of a DAG, pulling *ready* tiles from per-stage
//! workqueues and posting finished ones to their consumers' scoreboards. The protocol itself
//! (queues, scoreboards, dependency arrays, epochs) is `cusync_shared::protocol`, run here over
//! the PTX atomics ([`memory`]); the scheduler's queue polling is
//! `cusync_shared::persistent`.
//!
//! # Structure
//!
//! * [`megakernel::megakernel`]: the loop, generic over a [`protocol::Protocol`] (the
//!   CTA-pipelining queues, or the no-protocol ticket counter of the overhead baseline) and a
//!   [`worker::WorkerSet`] (what a tile computes: scalar f32 GeMM, f32 sum, bf16 tensor-core
//!   GeMM; a new stage kind is a new [`worker::TileWorker`]).
//! * [`control`]: the block's scheduler state, all in shared memory: a ring of two tile slots
//!   (plus a late slot) through which thread 0 hands tiles to the block.
//! * [`hooks::TileHooks`]: the `StageHooks` the workers run under: one tile, no waits (a tile
//!   is only popped once its producers posted), and the hidden protocol work at the worker's
//!   hide step.
//! * [`steps`]: the protocol's steps (start, hidden work, post, wait), out of line so the tile
//!   workers' register allocation does not carry them.
//! * [`prefill`]: the per-launch queue prefill kernel body.
//! * `sm90` (sm_90a builds only): the path-2 megakernel, the warp-specialized TMA + `wgmma`
//!   GeMM body (`kernels::gemm::sm90::gemm_ws`) over per-tile stage parameters, with a
//!   scheduler thread, consumer warpgroups and a post warp that hides the protocol's posts
//!   (see its module docs for its post ring and memory ordering).
//!
//! # Scheduling and the hidden protocol work (paper section III.C)
//!
//! Thread 0 of the block is the scheduler and warp 0 the poster. The tile workers synchronize
//! with `bar.sync 0` over the whole block, so a dedicated scheduler warp would need named
//! barriers in every worker; instead the protocol work runs where the block waits for memory
//! anyway: at the worker's *hide step* (`TileWorker::HIDE_STEP`, e.g. the last prologue stage
//! of the tensor-core GeMM, when its first loads are in flight), warp 0 posts the previous
//! tile and thread 0 prefetches the next one into the other ring slot. So a block ends a tile
//! with one barrier and starts the next at once; only when no tile was ready does it post
//! what it holds and then wait (bounded) for work.
//!
//! Priority: thread 0 tries the stages' queues last stage first (downstream first), so a
//! pipeline drains instead of filling up with producer tiles.
//!
//! # Termination (counted, not guessed)
//!
//! Every queue receives exactly `tiles` pushes per launch; its head reaches `(e + 1) * tiles`
//! by a bounded CAS, or past it by one fetch-add per popper once all are pushed (the prefill
//! resets it). A scheduler marks a stage finished there (`try_pop` says `Finished`); when every stage is
//! finished the block posts what it holds and exits. The kernel ends when every block exited:
//! every tile was taken, run and posted. Each post also adds 1 to the launch's tiles-done
//! counter (count-up-for-ever), which the host checks against `(e + 1) * total_tiles`.
//!
//! # The prefill and the megakernel: programmatic on sm_90
//!
//! Each launch is the prefill kernel, then the megakernel, on one stream. On sm_90 (the sm_90a
//! build) the host launches the megakernel programmatically: the prefill's blocks issue
//! `griddepcontrol.launch_dependents` first, so the megakernel's blocks start and set up while
//! the prefill writes the queues, instead of after its end. Before the first access to a
//! queue, every thread that makes one (the scheduler thread, the posting warp) issues
//! `griddepcontrol.wait`, which returns once the prefill completed and its stores are visible
//! (the prefill reads nothing the megakernel writes, and it starts only after the previous
//! megakernel completed, in stream order). In plain stream order the wait returns at once.
//!
//! # Errors and timeouts (no block spins for ever)
//!
//! Every wait is bounded by the launch's `timeout_ns`: a scheduler that finds nothing ready for
//! longer reports `QueueTimeout` with the most upstream unfinished stage, its queue's `tail`
//! address, the tail it saw and `head + 1` (the tail the next pop needs); a slot whose pusher
//! stalls between its ticket and its `seq` store is a `QueueTimeout` on the slot's `seq` word.
//! Protocol violations (`SlotOverwritten`, `StaleCounter`, `QueueFull`, `TooManyPushes`,
//! `ExcessArrival`, `OutOfRange`) and a stage naming a worker the kernel does not have
//! (`BadWorker`) are reported with their own codes (`shared::layout::ErrorCode`). The first
//! reporter wins the error slot; its block stops, and every other block stops at its next
//! wait, when it sees the slot taken. The host then rewrites the protocol state (epoch 0).
//!
//! # Memory ordering
//!
//! A tile's stores precede the block barrier that ends it; each lane of warp 0 then issues
//! `fence.acq_rel.gpu` before its scoreboard arrivals (`atom.acq_rel.gpu`), and the push's
//! `st.release.gpu` of the slot's `seq` publishes them; the popping thread 0 reads `seq` with
//! `ld.acquire.gpu` and hands the tile to its block through shared memory and a block barrier,
//! after which every thread's loads of the producer's output (`ld` or `cp.async`, generic
//! proxy) see it: no further fence is needed. A worker that read producer data with TMA
//! (`cp.async.bulk`, the async proxy) would need `fence.proxy.async.global` after the barrier.
//! Deferring a post to the next tile's hide step keeps this chain: the barrier still precedes
//! the fence.

pub mod asm;
pub mod control;
#[cfg(target_feature = "sm_90a")]
pub mod handoff;
pub mod hooks;
pub mod megakernel;
pub mod memory;
pub mod prefill;
pub mod protocol;
#[cfg(target_feature = "sm_90a")]
pub mod sm90;
pub mod steps;
pub mod worker;
