//! cusync: tile-granularity synchronization of dependent GPU kernels.
#![warn(missing_docs)]

pub use cusync_shared as shared;
