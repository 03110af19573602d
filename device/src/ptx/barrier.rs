//! Block barriers: `bar.sync` (all threads, or a named barrier over a thread count) and
//! `bar.arrive` (signal without waiting). All carry a memory clobber: they order shared and
//! global accesses of the participating threads.

/// `bar.sync 0`: every thread of the block waits here (`__syncthreads`).
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: a block-wide barrier; every thread of the block must reach it.
    unsafe { core::arch::asm!("bar.sync 0;") };
}

/// `bar.red.and.pred`: a block-wide barrier that also returns whether `pred` held in every
/// thread of the block.
#[inline(always)]
pub fn sync_threads_and(pred: bool) -> bool {
    let all: u32;
    // SAFETY: a block-wide barrier; every thread of the block must reach it.
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p, q; setp.ne.u32 p, {x}, 0; bar.red.and.pred q, 0, p; selp.u32 {r}, 1, 0, q; }}",
            x = in(reg32) pred as u32,
            r = out(reg32) all,
        )
    };
    all != 0
}

/// `bar.sync id, count`: waits on named barrier `id` (1..16) until `count` threads (a multiple
/// of 32) have arrived or synced on it.
#[inline(always)]
pub fn named_sync(id: u32, count: u32) {
    // SAFETY: callers pass a barrier id and a warp-multiple count that the participating warps agree on.
    unsafe { core::arch::asm!("bar.sync {}, {};", in(reg32) id, in(reg32) count) };
}

/// `bar.arrive id, count`: counts this warp in on named barrier `id` without waiting.
#[inline(always)]
pub fn named_arrive(id: u32, count: u32) {
    // SAFETY: as for `named_sync`; arriving never blocks.
    unsafe { core::arch::asm!("bar.arrive {}, {};", in(reg32) id, in(reg32) count) };
}

/// `bar.warp.sync 0xffffffff`: reconverges the full warp.
#[inline(always)]
pub fn sync_warp() {
    // SAFETY: all 32 lanes must execute it.
    unsafe { core::arch::asm!("bar.warp.sync -1;") };
}

/// `vote.sync.ballot.b32` over the full warp: bit `l` is lane `l`'s `pred`.
#[inline(always)]
pub fn ballot(pred: bool) -> u32 {
    let r: u32;
    // SAFETY: register-only warp vote; all 32 lanes participate.
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {}, 0; vote.sync.ballot.b32 {}, p, -1; }}",
            in(reg32) pred as u32, out(reg32) r, options(nomem, nostack)
        )
    };
    r
}

/// `shfl.sync.bfly.b32` over the full warp: returns `value` from lane `lane ^ mask`.
#[inline(always)]
pub fn shfl_xor(value: u32, mask: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only warp shuffle; all 32 lanes participate.
    unsafe {
        core::arch::asm!("shfl.sync.bfly.b32 {}, {}, {}, 0x1f, -1;", out(reg32) r, in(reg32) value, in(reg32) mask, options(nomem, nostack))
    };
    r
}

/// `shfl.sync.idx.b32` over the full warp: returns `value` from lane `src`.
#[inline(always)]
pub fn shfl_idx(value: u32, src: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only warp shuffle; all 32 lanes participate.
    unsafe {
        core::arch::asm!("shfl.sync.idx.b32 {}, {}, {}, 0x1f, -1;", out(reg32) r, in(reg32) value, in(reg32) src, options(nomem, nostack))
    };
    r
}

/// `barrier.cluster.arrive.release` + `barrier.cluster.wait.acquire` (sm_90): every thread of
/// every block of the cluster meets here (a block must not exit while another block of its
/// cluster may still write its shared memory or arrive on its barriers).
///
/// Every thread of the block calls it, converged per warp.
#[inline(always)]
pub fn cluster_sync() {
    // SAFETY: a barrier; no memory operands.
    unsafe {
        core::arch::asm!(
            "barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;",
            options(nostack)
        )
    };
}

/// As [`cluster_sync`], for threads that arrive divergently (no `.aligned`): every thread of
/// every block of the cluster meets here.
#[inline(always)]
pub fn cluster_sync_divergent() {
    // SAFETY: a barrier; no memory operands.
    unsafe {
        core::arch::asm!(
            "barrier.cluster.arrive.release; barrier.cluster.wait.acquire;",
            options(nostack)
        )
    };
}
