//! PTX intrinsics, one small module each. Every function is a thin `asm!` wrapper whose
//! clobbers are stated: blocks that touch memory leave the default (memory clobber), blocks
//! that only read special registers say `nomem, nostack` (and `pure` where re-reading would
//! give the same value within a thread).

pub mod atomics;
pub mod barrier;
pub mod copy;
pub mod fence;
pub mod global;
pub mod griddep;
pub mod ids;
pub mod mbarrier;
pub mod mma;
pub mod smem;
pub mod time;
#[cfg(target_feature = "sm_90a")]
pub mod tma;
#[cfg(target_feature = "sm_90a")]
pub mod wgmma;
