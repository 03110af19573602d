//! Multi-GPU CTA-pipelining (DESIGN.md mode 3; CTA-pipelining paper, sections III and IV):
//! stages bound to GPUs of one NVLink domain, producers writing their output tiles straight into
//! the consumer GPU's memory and posting at system scope.
//!
//! * [`placement`]: the planner: stages bound to logical devices; per edge, the producer's
//!   output, the semaphores and the workqueue on the consumer's device, the scoreboard and the
//!   dependency array on the producer's ([`cusync_shared::placement`] holds the rule); device
//!   out of range, missing peer access and cycles refused before anything is allocated;
//! * [`DeviceSet`]: several devices opened together, peer access checked
//!   (`cuDeviceCanAccessPeer`) and enabled; repeated ordinals are *virtual devices* on one GPU,
//!   which share its context, so "peer" pointers are local ones and every code path runs on
//!   one GPU;
//! * [`MultiStreamGraph`]: stream mode across devices (one stream per stage on its device,
//!   system-scope fences, posts and acquire loads on cross-device edges);
//! * [`GemmChain`]: the paper's N-layer GeMM chain placed on devices, StreamSync and stream-mode
//!   CTA-pipelining on the same buffers, with GeMM path 2's persistent stages (sm_90a: TMA +
//!   `wgmma`) where every device runs them, else path 1's one-block-per-tile stages;
//! * [`compare`]: CTA-pipelining against micro-batching and tensor parallelism, per M
//!   (`cusync run multigpu`);
//! * [`tp_cta`]: tensor parallelism combined with CTA-pipelining (groups of two GPUs, each a
//!   pipelined chain, an all-reduce over the groups) against pure TP (`cusync run multigpu-tp`).
//!
//! Not here yet: the persistent megakernel per GPU (issue 9, item 2), CUDA-graph capture of a
//! multi-device launch.

pub mod chain;
pub mod compare;
pub mod devices;
pub mod placement;
pub mod stream;
pub mod tp_cta;

pub use chain::{ChainGraph, GemmChain};
pub use devices::DeviceSet;
pub use placement::{place, Link, Placement, PlacementError, StageBinding, Topology};
pub use stream::{MultiStageLaunch, MultiStreamGraph, MultiStreamRun};
