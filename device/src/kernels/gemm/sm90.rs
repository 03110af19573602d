//! Tensor-core GeMM, path 2 (sm_90a): TMA loads into `mbarrier`-tracked shared-memory stages,
//! `wgmma` warpgroups, warp specialization, persistent blocks, `setmaxnreg`.
//!
//! Same problem as path 1 (`C[M,N] = epilogue(A[M,K] x B[K,N])`, bf16/f16 in, f32 accumulate,
//! bf16/f16/f32 out, four layouts, none/bias/GeLU/bias+GeLU, any `M, N, K >= 1`), with the
//! launch facts in `cusync_shared::gemm_sm90`:
//!
//! * **Warpgroup 0, producer.** Gives registers back (`setmaxnreg.dec`); one thread walks the
//!   block's tiles and K stages: waits for stage `s` to be empty, announces its bytes on
//!   `full[s]` and issues the TMA loads of A's and B's boxes (zero-filled past the edges).
//! * **Warpgroups 1 and 2, consumers.** Take registers (`setmaxnreg.inc`); each owns 64 rows of
//!   the 128-row tile: waits on `full[s]`, issues four `wgmma.m64nBNk16` (one per k16 of the
//!   64-wide stage), keeps one group in flight and releases the previous stage to the producer
//!   (`empty[s]`, one arrival per warp), then stores its rows straight from the accumulators
//!   with the path-1 epilogue (bias, GeLU, conversion, edge guards).
//!
//! Shared memory per stage: A's 128 x 64 tile then B's `BN` x 64 tile, each in the 128-byte
//! swizzle layout TMA writes and `wgmma` reads (K-major operands as one box of 128-byte rows;
//! MN-major operands as boxes of 64 columns x 64 K-rows, 8 KiB apart). Every pipeline wait is
//! bounded by `timeout_ns` and reported as [`ErrorCode::PipelineTimeout`].

use super::epilogue::store_acc_row;
use crate::ptx::{barrier, ids, mbarrier, smem, time, tma, wgmma};
use crate::sync::{report, WaitSite};
use cusync_shared::gemm_sm90::{
    raster_tile, TmaGemmParams, WgTileShape, WG_BK, WG_BM, WG_BOX_BYTES, WG_CONSUMER_REGS, WG_PRODUCER_REGS,
    WG_SMEM_ALIGN, WG_TILE_128X128, WG_TILE_128X256,
};
use cusync_shared::layout::{ErrorCode, ErrorSlot};

/// Element types `wgmma` multiplies.
pub trait WgElem {
    /// bf16 (else f16).
    const BF16: bool;
}

impl WgElem for super::Bf16 {
    const BF16: bool = true;
}

impl WgElem for super::F16 {
    const BF16: bool = false;
}

/// Waits until `bar`'s phase of parity `parity` completed, bounded by `p.timeout_ns`; on
/// timeout reports [`ErrorCode::PipelineTimeout`] for `tile` and returns `false`.
///
/// # Safety
/// `bar` is an initialised barrier; `p.error` is 0 or a valid [`ErrorSlot`].
#[inline(always)]
unsafe fn wait_phase(bar: u32, parity: u32, p: &TmaGemmParams, tile: u32) -> bool {
    // SAFETY: the caller's contract.
    if unsafe { mbarrier::try_wait_parity(bar, parity) } {
        return true;
    }
    let start = time::global_timer_ns();
    loop {
        // SAFETY: as above (`try_wait` suspends the thread a while before answering false).
        if unsafe { mbarrier::try_wait_parity(bar, parity) } {
            return true;
        }
        if time::global_timer_ns().wrapping_sub(start) > p.timeout_ns {
            let site = WaitSite {
                stage: 0,
                tile,
                error: p.error as *mut ErrorSlot,
                timeout_ns: p.timeout_ns,
            };
            // SAFETY: `p.error` is 0 (ignored) or a valid slot.
            unsafe { report(&site, ErrorCode::PipelineTimeout, bar as u64, parity ^ 1, parity) };
            return false;
        }
    }
}

/// Issues `wgmma.m64n{2R}k16` for the element type and layouts (`AT`: A MN-major, `BT`: B
/// K-major); `R` is 64 or 128 accumulator registers.
///
/// # Safety
/// As for the `wgmma` wrappers.
#[inline(always)]
unsafe fn mma<E: WgElem, const R: usize, const AT: bool, const BT: bool>(
    acc: &mut [f32; R],
    da: u64,
    db: u64,
    scale_d: u32,
) {
    // trans-a = AT (A MN-major); trans-b = !BT (B stored [K, N] is MN-major).
    // SAFETY: the casts only rename `[f32; R]` as the same-sized array of the branch taken.
    unsafe {
        if R == 64 {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 64]);
            match (E::BF16, AT, BT) {
                (true, false, false) => wgmma::mma_bf16_m64n128k16_t01(d, da, db, scale_d),
                (true, false, true) => wgmma::mma_bf16_m64n128k16_t00(d, da, db, scale_d),
                (true, true, false) => wgmma::mma_bf16_m64n128k16_t11(d, da, db, scale_d),
                (true, true, true) => wgmma::mma_bf16_m64n128k16_t10(d, da, db, scale_d),
                (false, false, false) => wgmma::mma_f16_m64n128k16_t01(d, da, db, scale_d),
                (false, false, true) => wgmma::mma_f16_m64n128k16_t00(d, da, db, scale_d),
                (false, true, false) => wgmma::mma_f16_m64n128k16_t11(d, da, db, scale_d),
                (false, true, true) => wgmma::mma_f16_m64n128k16_t10(d, da, db, scale_d),
            }
        } else {
            let d = &mut *(acc as *mut [f32; R] as *mut [f32; 128]);
            match (E::BF16, AT, BT) {
                (true, false, false) => wgmma::mma_bf16_m64n256k16_t01(d, da, db, scale_d),
                (true, false, true) => wgmma::mma_bf16_m64n256k16_t00(d, da, db, scale_d),
                (true, true, false) => wgmma::mma_bf16_m64n256k16_t11(d, da, db, scale_d),
                (true, true, true) => wgmma::mma_bf16_m64n256k16_t10(d, da, db, scale_d),
                (false, false, false) => wgmma::mma_f16_m64n256k16_t01(d, da, db, scale_d),
                (false, false, true) => wgmma::mma_f16_m64n256k16_t00(d, da, db, scale_d),
                (false, true, false) => wgmma::mma_f16_m64n256k16_t11(d, da, db, scale_d),
                (false, true, true) => wgmma::mma_f16_m64n256k16_t10(d, da, db, scale_d),
            }
        }
    }
}

/// Shared addresses of the block's pipeline: 1024-aligned stage base, stage size, barriers.
struct Pipeline {
    base: u32,
    stage_bytes: u32,
    a_bytes: u32,
    bars: u32,
    stages: u32,
}

impl Pipeline {
    #[inline(always)]
    fn new(shape: WgTileShape) -> Self {
        let base = (smem::dynamic_addr() + WG_SMEM_ALIGN - 1) & !(WG_SMEM_ALIGN - 1);
        Self {
            base,
            stage_bytes: shape.stage_bytes(),
            a_bytes: shape.a_bytes(),
            bars: base + shape.barrier_offset(),
            stages: shape.stages,
        }
    }
    #[inline(always)]
    fn a(&self, s: u32) -> u32 {
        self.base + s * self.stage_bytes
    }
    #[inline(always)]
    fn b(&self, s: u32) -> u32 {
        self.a(s) + self.a_bytes
    }
    #[inline(always)]
    fn full(&self, s: u32) -> u32 {
        self.bars + 8 * s
    }
    #[inline(always)]
    fn empty(&self, s: u32) -> u32 {
        self.bars + 8 * (self.stages + s)
    }
}

/// The kernel body for one layout pair; `R = BN / 2` accumulator registers.
///
/// # Safety
/// Launched with `WG_THREADS` threads, at least `SHAPE.smem_bytes()` of dynamic shared memory,
/// a 1-D grid, and `p` describing valid operands and tensor maps (the host's `Gemm` checks).
#[inline(always)]
unsafe fn gemm_ws<E: WgElem, const BN: u32, const STAGES: u32, const R: usize, const AT: bool, const BT: bool>(
    p: &TmaGemmParams,
) {
    let shape = WgTileShape { bn: BN, stages: STAGES };
    let pipe = Pipeline::new(shape);
    let tid = ids::tid_x();
    let g = &p.gemm;
    let map_a = p.tensor_maps;
    let map_b = p.tensor_maps + 128;
    if tid == 0 {
        for s in 0..STAGES {
            // SAFETY: the barriers lie inside the dynamic area after the stages; nobody uses
            // them before the block barrier below.
            unsafe {
                mbarrier::init(pipe.full(s), 1);
                mbarrier::init(pipe.empty(s), 8);
            }
        }
        mbarrier::fence_init();
        // SAFETY: the host wrote two tensor maps at `tensor_maps`.
        unsafe {
            tma::prefetch_map(map_a);
            tma::prefetch_map(map_b);
        }
    }
    barrier::sync_threads();

    let (tiles_m, tiles_n) = shape.tiles(g.m, g.n);
    let tiles = tiles_m * tiles_n;
    let k_steps = shape.k_steps(g.k);
    let group = p.raster_group;
    let first = ids::ctaid_x();
    let stride = ids::nctaid_x();
    let wg = tid / 128;

    if wg == 0 {
        wgmma::dec_max_regs::<WG_PRODUCER_REGS>();
        if tid != 0 {
            return;
        }
        let (mut s, mut phase) = (0u32, 0u32);
        let mut t = first;
        while t < tiles {
            let (tm, tn) = raster_tile(t, tiles_m, tiles_n, group);
            for kt in 0..k_steps {
                // A fresh barrier counts its (virtual) previous phase, parity 1, as complete.
                // SAFETY: initialised barriers; `p.error` checked by the host.
                if !unsafe { wait_phase(pipe.empty(s), phase ^ 1, p, t) } {
                    return;
                }
                let full = pipe.full(s);
                let k0 = kt * WG_BK;
                // SAFETY: the stage is free (its consumers released it); the boxes fill exactly
                // `stage_bytes`, the count announced; the tensor maps are the host's.
                unsafe {
                    mbarrier::arrive_expect_tx(full, shape.stage_bytes());
                    if AT {
                        tma::load_2d(pipe.a(s), map_a, tm * WG_BM, k0, full);
                        tma::load_2d(pipe.a(s) + WG_BOX_BYTES, map_a, tm * WG_BM + 64, k0, full);
                    } else {
                        tma::load_2d(pipe.a(s), map_a, k0, tm * WG_BM, full);
                    }
                    if BT {
                        tma::load_2d(pipe.b(s), map_b, k0, tn * BN, full);
                    } else {
                        for j in 0..BN / 64 {
                            tma::load_2d(pipe.b(s) + j * WG_BOX_BYTES, map_b, tn * BN + 64 * j, k0, full);
                        }
                    }
                }
                s += 1;
                if s == STAGES {
                    s = 0;
                    phase ^= 1;
                }
            }
            t += stride;
        }
        return;
    }

    wgmma::inc_max_regs::<WG_CONSUMER_REGS>();
    let cw = wg - 1;
    let warp_in_wg = (tid / 32) % 4;
    let lane = tid % 32;
    // Operand descriptors (module docs): K-major tiles advance 32 bytes per k16, MN-major
    // tiles 16 rows of 128 bytes; MN-major boxes of 64 columns are 8 KiB apart (LBO).
    let (a_kk, a_lbo) = if AT { (2048, WG_BOX_BYTES) } else { (32, 16) };
    let (b_kk, b_lbo) = if BT { (32, 16) } else { (2048, WG_BOX_BYTES) };
    let (mut s, mut phase) = (0u32, 0u32);
    let mut t = first;
    while t < tiles {
        let (tm, tn) = raster_tile(t, tiles_m, tiles_n, group);
        // Zeroed through a memset, not `[0.0; R]`: rustc lowers a long repeat expression to a
        // loop with a run-time index, which keeps the 128-float array out of registers.
        // SAFETY: all-zero bits are a valid `[f32; R]`.
        let mut acc: [f32; R] = unsafe { core::mem::zeroed() };
        let mut prev = STAGES;
        for kt in 0..k_steps {
            // SAFETY: initialised barrier.
            if !unsafe { wait_phase(pipe.full(s), phase, p, t) } {
                return;
            }
            let a0 = pipe.a(s) + cw * WG_BOX_BYTES;
            let b0 = pipe.b(s);
            wgmma::fence();
            for kk in 0..WG_BK / 16 {
                let da = wgmma::desc_sw128(a0 + kk * a_kk, a_lbo, 1024);
                let db = wgmma::desc_sw128(b0 + kk * b_kk, b_lbo, 1024);
                // SAFETY: the stage's data landed (`full` completed); it stays until this
                // warpgroup releases the stage after the group is waited.
                unsafe { mma::<E, R, AT, BT>(&mut acc, da, db, (kt > 0 || kk > 0) as u32) };
            }
            wgmma::commit_group();
            // The previous stage's group is done: hand its buffers back to the producer.
            wgmma::wait_group::<1>();
            if prev < STAGES && lane == 0 {
                // SAFETY: initialised barrier; one arrival per consumer warp (8 in all).
                unsafe { mbarrier::arrive(pipe.empty(prev)) };
            }
            prev = s;
            s += 1;
            if s == STAGES {
                s = 0;
                phase ^= 1;
            }
        }
        wgmma::wait_group::<0>();
        if lane == 0 {
            // SAFETY: as above.
            unsafe { mbarrier::arrive(pipe.empty(prev)) };
        }
        let m_base = tm * WG_BM + cw * 64 + warp_in_wg * 16;
        // SAFETY: `[f32; R]` and `[[[f32; 4]; 8]; R / 32]` are the same floats in the same order
        // (the wgmma fragment is the m16n8 C fragment repeated along N); the store guards edges.
        unsafe {
            if R == 64 {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 8]; 2]);
                store_acc_row::<2>(a, g, m_base, tn * BN, lane);
            } else {
                let a = &*(&acc as *const [f32; R] as *const [[[f32; 4]; 8]; 4]);
                store_acc_row::<4>(a, g, m_base, tn * BN, lane);
            }
        }
        t += stride;
    }
}

/// Dispatches on the layouts in `p.gemm.flags`.
///
/// # Safety
/// As for [`gemm_ws`].
#[inline(always)]
unsafe fn gemm_sm90<E: WgElem, const BN: u32, const STAGES: u32, const R: usize>(p: &TmaGemmParams) {
    // SAFETY: forwarded contract.
    unsafe {
        match (p.gemm.a_trans(), p.gemm.b_trans()) {
            (false, false) => gemm_ws::<E, BN, STAGES, R, false, false>(p),
            (false, true) => gemm_ws::<E, BN, STAGES, R, false, true>(p),
            (true, false) => gemm_ws::<E, BN, STAGES, R, true, false>(p),
            (true, true) => gemm_ws::<E, BN, STAGES, R, true, true>(p),
        }
    }
}

macro_rules! sm90_entry {
    ($(#[$doc:meta])* $name:ident, $elem:ty, $shape:ident, $bn:literal, $stages:literal, $r:literal) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: TmaGemmParams) {
            const _: () = assert!($shape.bn == $bn && $shape.stages == $stages && $shape.acc_regs() == $r);
            // SAFETY: the host launches it with the shape's threads and shared memory.
            unsafe { gemm_sm90::<$elem, $bn, $stages, $r>(&p) }
        }
    };
}

sm90_entry!(
    /// bf16 inputs, 128 x 256 x 64 tiles, 4 stages, persistent (module docs).
    gemm_sm90_bf16_128x256, super::Bf16, WG_TILE_128X256, 256, 4, 128
);
sm90_entry!(
    /// f16 inputs, 128 x 256 x 64 tiles, 4 stages, persistent.
    gemm_sm90_f16_128x256, super::F16, WG_TILE_128X256, 256, 4, 128
);
sm90_entry!(
    /// bf16 inputs, 128 x 128 x 64 tiles, 6 stages, persistent.
    gemm_sm90_bf16_128x128, super::Bf16, WG_TILE_128X128, 128, 6, 64
);
sm90_entry!(
    /// f16 inputs, 128 x 128 x 64 tiles, 6 stages, persistent.
    gemm_sm90_f16_128x128, super::F16, WG_TILE_128X128, 128, 6, 64
);
