//! `cp.async` (sm_80+): asynchronous 16-byte global->shared copies with commit/wait groups.

/// `cp.async.cg.shared.global [dst], [src], 16, src_bytes`: copies `src_bytes` (0..=16) bytes
/// and zero-fills the rest of the 16-byte shared destination. `src_bytes = 0` writes zeros
/// without reading `src` (predicated edge tiles).
///
/// # Safety
/// `dst` is a 16-byte aligned shared-window address; `src` a 16-byte aligned global pointer,
/// readable for `src_bytes` bytes.
#[inline(always)]
pub unsafe fn cp_async_16(dst: u32, src: *const u8, src_bytes: u32) {
    // SAFETY: see the function's contract.
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {s}; cp.async.cg.shared.global [{d}], [g], 16, {n}; }}",
            d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes, options(nostack)
        )
    };
}

/// `cp.async.commit_group`: closes the group of copies issued since the last commit.
#[inline(always)]
pub fn commit_group() {
    // SAFETY: bookkeeping of this thread's async copies.
    unsafe { core::arch::asm!("cp.async.commit_group;") };
}

/// `cp.async.wait_group N`: waits until at most `N` committed groups are still in flight.
#[inline(always)]
pub fn wait_group<const N: u32>() {
    // SAFETY: waits on this thread's own copies; memory clobber makes their results visible to later code.
    unsafe { core::arch::asm!("cp.async.wait_group {};", const N) };
}

/// `cp.async.wait_all`: waits for every copy this thread issued.
#[inline(always)]
pub fn wait_all() {
    // SAFETY: as for `wait_group`.
    unsafe { core::arch::asm!("cp.async.wait_all;") };
}
