//! cusync: tile-granularity synchronization of dependent GPU kernels.
//!
//! Three execution modes share one protocol (see DESIGN.md): stream mode (CuSync), a
//! persistent warp-specialized megakernel (CTA-pipelining on one GPU), and stages spread over
//! several GPUs. This crate is the face users import: the runtime ([`runtime::Context`],
//! [`runtime::DeviceBuffer`]), the one [`Error`] type, the embedded PTX ([`kernels`]), and the
//! shared protocol facts re-exported as [`shared`].
#![warn(missing_docs)]

pub mod baselines;
pub mod error;
pub mod kernels;
pub mod microbench;
pub mod mlp;
pub mod multigpu;
pub mod ops;
pub mod persistent;
pub mod plan;
pub mod plot;
pub mod runtime;
pub mod selfcheck;
pub mod sim;
pub mod stream;
pub mod trace;
pub mod verify;

pub use cudarc;
pub use cusync_shared as shared;
pub use error::{Error, Result};
pub use runtime::{Context, DeviceBuffer, DeviceInfo, Event, Stream};
