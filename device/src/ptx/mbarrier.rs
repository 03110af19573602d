//! `mbarrier` (sm_80+; transaction counts sm_90): shared-memory barriers that count thread
//! arrivals and, on Hopper, bytes delivered by the bulk-copy (TMA) engine. A barrier's phase
//! completes when its pending arrivals reach zero and its pending transaction bytes reach zero;
//! waiters name the phase by its parity.

/// `mbarrier.init.shared::cta.b64 [bar], count`: `count` arrivals complete a phase.
///
/// # Safety
/// `bar` is an 8-byte aligned shared-window address no other thread uses yet.
#[inline(always)]
pub unsafe fn init(bar: u32, count: u32) {
    // SAFETY: see the contract; writes the barrier's 8 bytes.
    unsafe {
        core::arch::asm!("mbarrier.init.shared::cta.b64 [{}], {};", in(reg32) bar, in(reg32) count, options(nostack))
    };
}

/// `fence.mbarrier_init.release.cluster`: makes barrier initialisations visible to the async
/// proxy (TMA) and to other threads, before the block-wide barrier that follows it.
#[inline(always)]
pub fn fence_init() {
    // SAFETY: a fence; no operands.
    unsafe { core::arch::asm!("fence.mbarrier_init.release.cluster;", options(nostack)) };
}

/// `mbarrier.arrive.shared::cta.b64`: one arrival on `bar`'s current phase.
///
/// # Safety
/// `bar` is an initialised barrier's shared-window address.
#[inline(always)]
pub unsafe fn arrive(bar: u32) {
    // SAFETY: see the contract.
    unsafe {
        core::arch::asm!(
            "{{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [{}]; }}",
            in(reg32) bar, options(nostack)
        )
    };
}

/// One arrival on the barrier at shared offset `bar` of the block of rank `cta` in this
/// cluster (`mapa` then `mbarrier.arrive.shared::cluster.b64`, sm_90, the default release at
/// CTA scope, as CUTLASS's `ClusterBarrier::arrive`): tells the other block's producer that
/// this warp is done reading a stage (its `wgmma` reads completed before). Measured in
/// session 4: `.release.cluster` here costs a cluster-wide fence per K-step (the clustered
/// GeMM ran at 60% of the unclustered one).
///
/// # Safety
/// `bar` is an initialised barrier's offset in every block of the cluster; launched with
/// clusters containing rank `cta`, which is alive.
#[inline(always)]
pub unsafe fn arrive_cluster(bar: u32, cta: u32) {
    // SAFETY: see the contract.
    unsafe {
        core::arch::asm!(
            "{{ .reg .b32 r; mapa.shared::cluster.u32 r, {b}, {c}; mbarrier.arrive.shared::cluster.b64 _, [r]; }}",
            b = in(reg32) bar, c = in(reg32) cta, options(nostack)
        )
    };
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64`: one arrival that also announces `bytes` of
/// transactions (bulk copies completing on this barrier) for the current phase.
///
/// # Safety
/// `bar` is an initialised barrier's shared-window address.
#[inline(always)]
pub unsafe fn arrive_expect_tx(bar: u32, bytes: u32) {
    // SAFETY: see the contract.
    unsafe {
        core::arch::asm!(
            "{{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [{}], {}; }}",
            in(reg32) bar, in(reg32) bytes, options(nostack)
        )
    };
}

/// `mbarrier.try_wait.parity.shared::cta.b64`: whether the phase of parity `parity` has
/// completed (the hardware may suspend the thread for a while before answering `false`).
/// Acquire at CTA scope: shared memory written before the phase completed (TMA data) is
/// visible afterwards.
///
/// # Safety
/// `bar` is an initialised barrier's shared-window address.
#[inline(always)]
pub unsafe fn try_wait_parity(bar: u32, parity: u32) -> bool {
    let done: u32;
    // SAFETY: see the contract; reads the barrier.
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {ph}; selp.u32 {d}, 1, 0, p; }}",
            b = in(reg32) bar, ph = in(reg32) parity, d = out(reg32) done, options(nostack)
        )
    };
    done != 0
}

/// [`try_wait_parity`] with a suspend-time hint: the thread may sleep up to about
/// `suspend_ns` (instead of the hardware's default, shorter, limit) and wakes when the phase
/// completes. For waits off the critical path (the megakernel's post warp), which then cost
/// their SM sub-partition fewer issue slots while they wait.
///
/// # Safety
/// As for [`try_wait_parity`].
#[inline(always)]
pub unsafe fn try_wait_parity_suspend(bar: u32, parity: u32, suspend_ns: u32) -> bool {
    let done: u32;
    // SAFETY: see the contract; reads the barrier.
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {ph}, {t}; selp.u32 {d}, 1, 0, p; }}",
            b = in(reg32) bar, ph = in(reg32) parity, t = in(reg32) suspend_ns, d = out(reg32) done,
            options(nostack)
        )
    };
    done != 0
}

/// Waits until `bar`'s phase of parity `parity` completed ([`try_wait_parity`], acquire at CTA
/// scope), at most about `timeout_ns` (`%globaltimer`); `false` on timeout (the caller
/// reports where it was waiting). The TMA probe's waits use it; the path-2 GeMM's
/// `wait_phase` and the megakernel's `ring_wait` keep their own copies of this loop for now:
/// calling it from them reshuffles those kernels' SASS (ptxas 13.0: the 128 x 256 kernel's
/// local-memory loads from 15 to 31), which wants a GPU run before it lands.
///
/// # Safety
/// As for [`try_wait_parity`].
#[inline(always)]
pub unsafe fn wait_parity_bounded(bar: u32, parity: u32, timeout_ns: u64) -> bool {
    // SAFETY: the caller's contract.
    if unsafe { try_wait_parity(bar, parity) } {
        return true;
    }
    let start = crate::ptx::time::global_timer_ns();
    loop {
        // SAFETY: as above (`try_wait` suspends the thread a while before answering false).
        if unsafe { try_wait_parity(bar, parity) } {
            return true;
        }
        if crate::ptx::time::global_timer_ns().wrapping_sub(start) > timeout_ns {
            return false;
        }
    }
}

/// `mbarrier.expect_tx.relaxed.cta.shared::cta.b64`: announces `bytes` more of transactions for
/// the current phase without arriving (the arrival comes later, e.g. with more bytes).
///
/// # Safety
/// `bar` is an initialised barrier's shared-window address.
#[inline(always)]
pub unsafe fn expect_tx(bar: u32, bytes: u32) {
    // SAFETY: see the contract.
    unsafe {
        core::arch::asm!(
            "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{}], {};",
            in(reg32) bar, in(reg32) bytes, options(nostack)
        )
    };
}
