//! cusync-device: the GPU side of cusync, compiled to PTX by `host/build.rs`.
//!
//! Everything here is `#![no_std]` and exists only for `nvptx64` (on the host target the crate
//! is an empty shell). `ptx` holds the intrinsics, each one PTX `asm!` with honest clobbers;
//! `sync` the protocol's memory operations (bounded waits, posts); `kernels` the kernels.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
#![allow(clippy::missing_safety_doc)]

/// `unroll!(i < N, { body })`: `body` once for each `i` in `0..N` (`N` a constant, at most 8),
/// written out rather than looped, so register arrays are only ever indexed by constants
/// (LLVM's unroller gives up on big loop bodies, and a dynamically indexed array goes to
/// local memory). Inside the body, skip with `if`, not `continue`. Every use expands all 8
/// copies before the constant condition folds them, so nest at most three deep (8^3 bodies).
macro_rules! unroll {
    ($i:ident < $n:expr, $body:block) => {
        unroll!(@ $i, $n, $body, 0 1 2 3 4 5 6 7)
    };
    (@ $i:ident, $n:expr, $body:block, $($k:literal)*) => {{
        // A constant condition: folded away (a generic `N` cannot go in a `const` assert).
        if $n > 8 {
            panic!("unroll! handles at most 8 iterations");
        }
        $(
            #[allow(clippy::identity_op, clippy::erasing_op, unused_comparisons)]
            if $k < $n {
                let $i: usize = $k;
                $body
            }
        )*
    }};
}

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
