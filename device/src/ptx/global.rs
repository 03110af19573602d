//! Vector global loads and stores that bypass the non-coherent L1: what split-K partial tiles
//! (written by one block, read by another of the same launch) need.

/// `st.global.v4.f32`: stores four floats at `p`.
///
/// # Safety
/// `p` is a valid, 16-byte aligned global address of four `f32`.
#[inline(always)]
pub unsafe fn st_v4_f32(p: *mut f32, v: [f32; 4]) {
    // SAFETY: see the contract.
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; st.global.v4.f32 [g], {{{a}, {b}, {c}, {d}}}; }}",
            p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3],
            options(nostack)
        )
    };
}

/// `ld.global.cg.v4.f32`: loads four floats at `p`, cached in L2 only (never a stale L1 line
/// of data another block wrote).
///
/// # Safety
/// `p` is a valid, 16-byte aligned global address of four `f32`.
#[inline(always)]
pub unsafe fn ld_cg_v4_f32(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: see the contract.
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.global.cg.v4.f32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
            p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
            options(nostack)
        )
    };
    [a, b, c, d]
}
