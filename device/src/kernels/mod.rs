//! Kernels. Each is `#[no_mangle] pub unsafe extern "ptx-kernel"`, so its PTX `.entry` name is
//! its Rust name; the host loads them by those names (host/src/kernels.rs lists them).

#[macro_use]
pub mod gemm;
pub mod microbench;
pub mod persistent;
pub mod protocol_test;
pub mod read_probe;
pub mod selftest;
pub mod stream_mode;
#[cfg(target_feature = "sm_90a")]
pub mod tma_probe;
