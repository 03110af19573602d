//! The few PTX instructions persistent mode needs beyond `crate::ptx`: relaxed stores, the
//! non-coherent read-only load, and a warp vote. Each is one `asm!` with its clobbers stated.

/// `st.relaxed.gpu.global.u32`.
///
/// # Safety
/// `p` is a valid, aligned global address.
#[inline(always)]
pub unsafe fn st_relaxed_gpu(p: *mut u32, v: u32) {
    // SAFETY: the caller guarantees `p` is a valid, aligned global address.
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; st.relaxed.gpu.global.u32 [g], {v}; }}",
            p = in(reg64) p, v = in(reg32) v, options(nostack)
        )
    };
}

/// `st.relaxed.sys.global.u32`.
///
/// # Safety
/// `p` is a valid, aligned global address.
#[inline(always)]
pub unsafe fn st_relaxed_sys(p: *mut u32, v: u32) {
    // SAFETY: the caller guarantees `p` is a valid, aligned global address.
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; st.relaxed.sys.global.u32 [g], {v}; }}",
            p = in(reg64) p, v = in(reg32) v, options(nostack)
        )
    };
}

/// `ld.global.nc.u32`: a load through the read-only path, for words nobody writes while the
/// kernel runs (dependency arrays, scoreboard targets).
///
/// # Safety
/// `p` is a valid, aligned global address that no thread writes during the launch.
#[inline(always)]
pub unsafe fn ld_global_nc(p: *const u32) -> u32 {
    let v: u32;
    // SAFETY: the caller guarantees `p` is a valid, aligned, read-only global address; the
    // block reads memory only (`readonly`).
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.global.nc.u32 {v}, [g]; }}",
            p = in(reg64) p, v = out(reg32) v, options(nostack, readonly)
        )
    };
    v
}

/// `vote.sync.any.pred` over the full warp: whether `pred` holds in any lane. All 32 lanes
/// must call it.
#[inline(always)]
pub fn vote_any(pred: bool) -> bool {
    let r: u32;
    // SAFETY: register-only warp vote; every lane of the warp participates (full mask).
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p, q; setp.ne.u32 p, {v}, 0; vote.sync.any.pred q, p, -1; selp.u32 {r}, 1, 0, q; }}",
            v = in(reg32) pred as u32, r = out(reg32) r, options(nomem, nostack)
        )
    };
    r != 0
}
