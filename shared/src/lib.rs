//! cusync-shared: the facts both sides of cusync read.
//!
//! `#![no_std]` so the device crate (nvptx64) and the host crate compile the same code:
//! memory layouts (`#[repr(C)]`, [`bytemuck::Pod`], with compile-time size and offset
//! assertions), tile-grid arithmetic, and (in later modules) policies, tile orders and the
//! protocol state machine. A fact about layout or about which tile waits on which is written
//! here once and called from both sides.
#![no_std]
#![warn(missing_docs)]

pub mod dynamic_k;
pub mod gemm;
pub mod gemm_sm90;
pub mod lanes;
pub mod layout;
pub mod order;
pub mod persistent;
pub mod placement;
pub mod policy;
pub mod protocol;
pub mod read_probe;
pub mod skinny;
pub mod stream_k;
pub mod tile;
pub mod tma_probe;

pub use tile::{Grid, TileIdx};
