//! Global-memory atomics with explicit PTX memory semantics and scopes.
//!
//! `core::sync::atomic` orderings are not trusted on nvptx (a `fetch_add(Release)` was emitted
//! as a relaxed `atom.global.add.u32`), so every protocol access is written here as PTX.
//! Pointers are generic addresses of global memory (what `cuMemAlloc` returns); each block
//! converts with `cvta.to.global.u64` before the `.global` access.
//!
//! Scopes: `_gpu` functions order with observers on this GPU, `_sys` with other GPUs and the
//! host (multi-GPU CTA-pipelining).

macro_rules! scoped_u32_ops {
    ($scope:literal, $ld_acq:ident, $ld_rel:ident, $st_rel:ident, $red_add:ident, $red_add_relaxed:ident, $atom_add:ident, $atom_add_relaxed:ident, $atom_cas:ident, $atom_exch:ident) => {
        #[doc = concat!("`ld.acquire.", $scope, ".global.u32`: a load that later accesses cannot move before.")]
        #[inline(always)]
        pub unsafe fn $ld_acq(p: *const u32) -> u32 {
            let v: u32;
            // SAFETY: the caller guarantees `p` is a valid, aligned global address.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.acquire.", $scope, ".global.u32 {v}, [g]; }}"),
                    p = in(reg64) p, v = out(reg32) v, options(nostack)
                )
            };
            v
        }

        #[doc = concat!("`ld.relaxed.", $scope, ".global.u32`: a coherent load with no ordering.")]
        #[inline(always)]
        pub unsafe fn $ld_rel(p: *const u32) -> u32 {
            let v: u32;
            // SAFETY: the caller guarantees `p` is a valid, aligned global address.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.relaxed.", $scope, ".global.u32 {v}, [g]; }}"),
                    p = in(reg64) p, v = out(reg32) v, options(nostack)
                )
            };
            v
        }

        #[doc = concat!("`st.release.", $scope, ".global.u32`: a store that earlier accesses cannot move after.")]
        #[inline(always)]
        pub unsafe fn $st_rel(p: *mut u32, v: u32) {
            // SAFETY: the caller guarantees `p` is a valid, aligned global address.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; st.release.", $scope, ".global.u32 [g], {v}; }}"),
                    p = in(reg64) p, v = in(reg32) v, options(nostack)
                )
            };
        }

        #[doc = concat!("`red.release.", $scope, ".global.add.u32`: a fire-and-forget release increment.")]
        #[inline(always)]
        pub unsafe fn $red_add(p: *mut u32, v: u32) {
            // SAFETY: the caller guarantees `p` is a valid, aligned global address.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; red.release.", $scope, ".global.add.u32 [g], {v}; }}"),
                    p = in(reg64) p, v = in(reg32) v, options(nostack)
                )
            };
        }

        #[doc = concat!("`red.relaxed.", $scope, ".global.add.u32`: a fire-and-forget relaxed increment (after a")]
        #[doc = concat!("`fence.acq_rel` or `fence.sc`, a release pattern of the PTX memory model).")]
        #[inline(always)]
        pub unsafe fn $red_add_relaxed(p: *mut u32, v: u32) {
            // SAFETY: the caller guarantees `p` is a valid, aligned global address.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; red.relaxed.", $scope, ".global.add.u32 [g], {v}; }}"),
                    p = in(reg64) p, v = in(reg32) v, options(nostack)
                )
            };
        }

        #[doc = concat!("`atom.acq_rel.", $scope, ".global.add.u32`: returns the old value.")]
        #[inline(always)]
        pub unsafe fn $atom_add(p: *mut u32, v: u32) -> u32 {
            let old: u32;
            // SAFETY: the caller guarantees `p` is a valid, aligned global address.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; atom.acq_rel.", $scope, ".global.add.u32 {o}, [g], {v}; }}"),
                    p = in(reg64) p, v = in(reg32) v, o = out(reg32) old, options(nostack)
                )
            };
            old
        }

        #[doc = concat!("`atom.relaxed.", $scope, ".global.add.u32`: returns the old value, no ordering.")]
        #[inline(always)]
        pub unsafe fn $atom_add_relaxed(p: *mut u32, v: u32) -> u32 {
            let old: u32;
            // SAFETY: the caller guarantees `p` is a valid, aligned global address.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; atom.relaxed.", $scope, ".global.add.u32 {o}, [g], {v}; }}"),
                    p = in(reg64) p, v = in(reg32) v, o = out(reg32) old, options(nostack)
                )
            };
            old
        }

        #[doc = concat!("`atom.acq_rel.", $scope, ".global.cas.b32`: stores `new` if `*p == expected`; returns the old value.")]
        #[inline(always)]
        pub unsafe fn $atom_cas(p: *mut u32, expected: u32, new: u32) -> u32 {
            let old: u32;
            // SAFETY: the caller guarantees `p` is a valid, aligned global address.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; atom.acq_rel.", $scope, ".global.cas.b32 {o}, [g], {e}, {n}; }}"),
                    p = in(reg64) p, e = in(reg32) expected, n = in(reg32) new, o = out(reg32) old, options(nostack)
                )
            };
            old
        }

        #[doc = concat!("`atom.acq_rel.", $scope, ".global.exch.b32`: stores `v`; returns the old value.")]
        #[inline(always)]
        pub unsafe fn $atom_exch(p: *mut u32, v: u32) -> u32 {
            let old: u32;
            // SAFETY: the caller guarantees `p` is a valid, aligned global address.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; atom.acq_rel.", $scope, ".global.exch.b32 {o}, [g], {v}; }}"),
                    p = in(reg64) p, v = in(reg32) v, o = out(reg32) old, options(nostack)
                )
            };
            old
        }
    };
}

/// `ld.acquire.gpu.global.v4.u32`: four consecutive `u32`s, each read an acquire at GPU scope
/// (a vector access is four memory operations in the PTX memory model), in one round trip.
///
/// # Safety
/// `p` is a valid global address, 16-byte aligned, with four readable `u32`s.
#[inline(always)]
pub unsafe fn ld_acquire_gpu_v4(p: *const u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees `p` is a valid, 16-byte aligned global address.
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.acquire.gpu.global.v4.u32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
            p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, options(nostack)
        )
    };
    [a, b, c, d]
}

scoped_u32_ops!(
    "gpu",
    ld_acquire_gpu,
    ld_relaxed_gpu,
    st_release_gpu,
    red_release_add_gpu,
    red_relaxed_add_gpu,
    atom_add_gpu,
    atom_add_relaxed_gpu,
    atom_cas_gpu,
    atom_exch_gpu
);
scoped_u32_ops!(
    "sys",
    ld_acquire_sys,
    ld_relaxed_sys,
    st_release_sys,
    red_release_add_sys,
    red_relaxed_add_sys,
    atom_add_sys,
    atom_add_relaxed_sys,
    atom_cas_sys,
    atom_exch_sys
);
