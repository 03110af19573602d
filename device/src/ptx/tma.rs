//! The tensor memory accelerator (sm_90): `cp.async.bulk.tensor` tile loads described by a
//! host-encoded tensor map (`CUtensorMap`, 128 bytes, 64-byte aligned, here in global memory),
//! completing on an `mbarrier` with a transaction count.

/// `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`: loads the
/// box at coordinates `(c0, c1)` (elements; `c0` the innermost dimension) of the tensor `map`
/// describes into shared memory at `dst`, in the map's swizzled layout; out-of-bounds elements
/// are zero-filled. The bytes count against `bar`'s expected transactions.
///
/// # Safety
/// `map` is the generic address of a valid tensor map in global memory, unchanged since the
/// launch began; `dst` a shared-window address aligned as the map's swizzle needs (1024 bytes
/// for 128-byte swizzle), with room for the box; `bar` an initialised barrier that expects
/// these bytes.
#[inline(always)]
pub unsafe fn load_2d(dst: u32, map: u64, c0: u32, c1: u32, bar: u32) {
    // SAFETY: see the contract; writes the box into shared memory asynchronously.
    unsafe {
        core::arch::asm!(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}}}], [{b}];",
            d = in(reg32) dst, m = in(reg64) map, x = in(reg32) c0, y = in(reg32) c1, b = in(reg32) bar,
            options(nostack)
        )
    };
}

/// As [`load_2d`], multicast (`.multicast::cluster`, sm_90): the box lands at the same
/// shared-memory offset `dst` in every block of the cluster whose rank bit is set in `mask`,
/// and its bytes count against the barrier at offset `bar` in each of them.
///
/// # Safety
/// As for [`load_2d`], in every block of `mask` (each has the same layout, and its barrier
/// expects these bytes); launched with clusters that contain those ranks, which stay alive
/// until the copy completed (a cluster barrier before exit).
#[inline(always)]
pub unsafe fn load_2d_multicast(dst: u32, map: u64, c0: u32, c1: u32, bar: u32, mask: u16) {
    // SAFETY: see the contract; writes the box into the shared memory of the masked blocks.
    unsafe {
        core::arch::asm!(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [{d}], [{m}, {{{x}, {y}}}], [{b}], {k};",
            d = in(reg32) dst, m = in(reg64) map, x = in(reg32) c0, y = in(reg32) c1, b = in(reg32) bar,
            k = in(reg16) mask, options(nostack)
        )
    };
}

/// `prefetch.tensormap`: brings the tensor map at `map` (generic global address) into the
/// descriptor cache.
///
/// # Safety
/// `map` is the generic address of a tensor map.
#[inline(always)]
pub unsafe fn prefetch_map(map: u64) {
    // SAFETY: a prefetch; reads nothing architecturally.
    unsafe { core::arch::asm!("prefetch.tensormap [{}];", in(reg64) map, options(nostack, readonly)) };
}
