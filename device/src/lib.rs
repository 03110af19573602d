//! cusync-device: the GPU side of cusync, compiled to PTX by `host/build.rs`.
//!
//! Everything here is `#![no_std]` and exists only for `nvptx64` (on the host target the crate
//! is an empty shell). `ptx` holds the intrinsics, each one PTX `asm!` with honest clobbers;
//! `sync` the protocol's memory operations (bounded waits, posts); `kernels` the kernels.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
#![allow(clippy::missing_safety_doc)]

#[cfg(target_arch = "nvptx64")]
pub mod kernels;
#[cfg(target_arch = "nvptx64")]
pub mod persistent;
#[cfg(target_arch = "nvptx64")]
pub mod ptx;
#[cfg(target_arch = "nvptx64")]
pub mod stage;
#[cfg(target_arch = "nvptx64")]
pub mod stream;
#[cfg(target_arch = "nvptx64")]
pub mod sync;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch failure instead of a hang.
    unsafe { core::arch::asm!("trap;", options(noreturn)) }
}
