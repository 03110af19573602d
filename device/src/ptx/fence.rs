//! Memory fences. `fence.acq_rel.gpu` orders this thread's accesses for observers on the same
//! GPU; `fence.sc.sys` and `fence.acq_rel.sys` for observers on other GPUs and the host;
//! `fence.proxy.async.global` (sm_90) orders generic-proxy accesses before async-proxy ones
//! (TMA / `cp.async.bulk`) on global memory.

/// `fence.acq_rel.gpu`.
#[inline(always)]
pub fn acq_rel_gpu() {
    // SAFETY: a fence only orders memory; memory clobber keeps the compiler from moving accesses across it.
    unsafe { core::arch::asm!("fence.acq_rel.gpu;") };
}

/// `fence.acq_rel.sys`.
#[inline(always)]
pub fn acq_rel_sys() {
    // SAFETY: as above.
    unsafe { core::arch::asm!("fence.acq_rel.sys;") };
}

/// `fence.sc.sys` (`__threadfence_system`).
#[inline(always)]
pub fn sc_sys() {
    // SAFETY: as above.
    unsafe { core::arch::asm!("fence.sc.sys;") };
}

/// `fence.sc.gpu` (`__threadfence`).
#[inline(always)]
pub fn sc_gpu() {
    // SAFETY: as above.
    unsafe { core::arch::asm!("fence.sc.gpu;") };
}

/// `fence.proxy.async.global` (sm_90 and up).
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub fn proxy_async_global() {
    // SAFETY: as above.
    unsafe { core::arch::asm!("fence.proxy.async.global;") };
}
