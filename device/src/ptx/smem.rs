//! Shared memory: the dynamic area (sized at launch) and static buffers, with generic and
//! 32-bit shared-window addresses (the latter for `ldmatrix`, `cp.async`, `mbarrier`).
//!
//! Verified on the H200 (DESIGN.md): `.extern .shared .align 16 .b8 NAME[];` for the dynamic
//! area, `.shared .align 16 .b8 NAME[N];` for a static one.

core::arch::global_asm!(".extern .shared .align 16 .b8 cusync_dynamic_smem[];");

/// Generic pointer to the start of the dynamic shared area (size given at launch).
#[inline(always)]
pub fn dynamic_ptr() -> *mut u8 {
    let p: u64;
    // SAFETY: takes the address of a symbol; touches no memory.
    unsafe {
        core::arch::asm!("cvta.shared.u64 {}, cusync_dynamic_smem;", out(reg64) p, options(pure, nomem, nostack))
    };
    p as *mut u8
}

/// 32-bit shared-window address of the start of the dynamic shared area.
#[inline(always)]
pub fn dynamic_addr() -> u32 {
    let p: u32;
    // SAFETY: takes the address of a symbol; touches no memory.
    unsafe { core::arch::asm!("mov.u32 {}, cusync_dynamic_smem;", out(reg32) p, options(pure, nomem, nostack)) };
    p
}

/// Converts a generic pointer into shared memory to its 32-bit shared-window address.
#[inline(always)]
#[allow(clippy::pointers_in_nomem_asm_block)] // address arithmetic: `p` is not dereferenced
pub fn to_shared_addr<T>(p: *const T) -> u32 {
    let a: u64;
    // SAFETY: address arithmetic only; `p` must point into shared memory for the result to mean anything.
    unsafe { core::arch::asm!("cvta.to.shared.u64 {}, {};", out(reg64) a, in(reg64) p, options(pure, nomem, nostack)) };
    a as u32
}

/// Declares a static shared buffer and a function returning its generic pointer.
///
/// `static_shared!(fn name() -> *mut T, SYMBOL, BYTES);` The symbol must be unique in the
/// module (the PTX is one module after LTO).
#[macro_export]
macro_rules! static_shared {
    (fn $name:ident() -> *mut $t:ty, $sym:ident, $bytes:literal) => {
        core::arch::global_asm!(concat!(".shared .align 16 .b8 ", stringify!($sym), "[", stringify!($bytes), "];"));
        #[inline(always)]
        fn $name() -> *mut $t {
            let p: u64;
            // SAFETY: takes the address of a shared symbol declared above; touches no memory.
            unsafe {
                core::arch::asm!(concat!("cvta.shared.u64 {}, ", stringify!($sym), ";"), out(reg64) p, options(pure, nomem, nostack))
            };
            p as *mut $t
        }
    };
}

/// `ld.volatile.shared.u32` at 32-bit shared-window address `addr`: a shared-memory load the
/// compiler neither caches nor drops. (A volatile read through a generic pointer becomes
/// `LD.E.STRONG.SYS` on sm_90, which goes the generic path; this stays an `LDS`.)
///
/// # Safety
/// `addr` is a 4-byte-aligned address inside this block's shared memory.
#[inline(always)]
pub unsafe fn ld_volatile_u32(addr: u32) -> u32 {
    let v: u32;
    // SAFETY: the caller's contract; reads shared memory only.
    unsafe {
        core::arch::asm!("ld.volatile.shared.u32 {}, [{}];", out(reg32) v, in(reg32) addr, options(nostack, readonly))
    };
    v
}

/// `ld.shared.v4.u32` at 32-bit shared-window address `addr`: 16 bytes of shared memory.
///
/// # Safety
/// `addr` is a 16-byte-aligned address inside this block's shared memory, whose bytes this
/// thread may read (written before, and ordered before this load: by a barrier, or by this
/// thread's own `cp.async.wait_group`).
#[inline(always)]
pub unsafe fn ld_v4_u32(addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller's contract; reads shared memory only.
    unsafe {
        core::arch::asm!(
            "ld.shared.v4.u32 {{{}, {}, {}, {}}}, [{}];",
            out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg32) addr,
            options(nostack, readonly)
        )
    };
    [a, b, c, d]
}

/// `st.shared.f32` at 32-bit shared-window address `addr` (an `STS`; a store through a generic
/// pointer into shared memory is an `ST.E` on the generic path).
///
/// # Safety
/// `addr` is a 4-byte-aligned address inside this block's shared memory that no other thread
/// accesses until a barrier orders this store before its access.
#[inline(always)]
pub unsafe fn st_f32(addr: u32, v: f32) {
    // SAFETY: the caller's contract; writes shared memory only.
    unsafe { core::arch::asm!("st.shared.f32 [{}], {};", in(reg32) addr, in(reg32) v.to_bits(), options(nostack)) };
}

/// `st.volatile.shared.u32` at 32-bit shared-window address `addr`: a shared-memory store the
/// compiler does not drop or merge (the pair of [`ld_volatile_u32`]).
///
/// # Safety
/// `addr` is a 4-byte-aligned address inside this block's shared memory.
#[inline(always)]
pub unsafe fn st_volatile_u32(addr: u32, v: u32) {
    // SAFETY: the caller's contract; writes shared memory only.
    unsafe { core::arch::asm!("st.volatile.shared.u32 [{}], {};", in(reg32) addr, in(reg32) v, options(nostack)) };
}

/// `ld.volatile.shared.u64` at 32-bit shared-window address `addr` (the 64-bit pair of
/// [`ld_volatile_u32`]).
///
/// # Safety
/// `addr` is an 8-byte-aligned address inside this block's shared memory.
#[inline(always)]
pub unsafe fn ld_volatile_u64(addr: u32) -> u64 {
    let v: u64;
    // SAFETY: the caller's contract; reads shared memory only.
    unsafe {
        core::arch::asm!("ld.volatile.shared.u64 {}, [{}];", out(reg64) v, in(reg32) addr, options(nostack, readonly))
    };
    v
}

/// `st.volatile.shared.u64` at 32-bit shared-window address `addr` (the 64-bit pair of
/// [`st_volatile_u32`]).
///
/// # Safety
/// `addr` is an 8-byte-aligned address inside this block's shared memory.
#[inline(always)]
pub unsafe fn st_volatile_u64(addr: u32, v: u64) {
    // SAFETY: the caller's contract; writes shared memory only.
    unsafe { core::arch::asm!("st.volatile.shared.u64 [{}], {};", in(reg32) addr, in(reg64) v, options(nostack)) };
}

/// `ld.acquire.cta.shared.u64` at 32-bit shared-window address `addr`: the reading half of a
/// release / acquire pair between two threads of one block (with [`st_release_cta_u64`]).
///
/// # Safety
/// `addr` is an 8-byte-aligned address inside this block's shared memory.
#[inline(always)]
pub unsafe fn ld_acquire_cta_u64(addr: u32) -> u64 {
    let v: u64;
    // SAFETY: the caller's contract; reads shared memory (the acquire orders later accesses).
    unsafe { core::arch::asm!("ld.acquire.cta.shared.u64 {}, [{}];", out(reg64) v, in(reg32) addr, options(nostack)) };
    v
}

/// `st.release.cta.shared.u64` at 32-bit shared-window address `addr`: publishes `v` and
/// everything this thread's accesses before it made visible (see [`ld_acquire_cta_u64`]).
///
/// # Safety
/// `addr` is an 8-byte-aligned address inside this block's shared memory.
#[inline(always)]
pub unsafe fn st_release_cta_u64(addr: u32, v: u64) {
    // SAFETY: the caller's contract; writes shared memory only.
    unsafe { core::arch::asm!("st.release.cta.shared.u64 [{}], {};", in(reg32) addr, in(reg64) v, options(nostack)) };
}
