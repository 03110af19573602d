//! Tensor-core GeMM, path 1 (sm_80+): `cp.async` multi-stage shared-memory pipeline,
//! XOR-swizzled shared tiles, `ldmatrix` and `mma.sync.m16n8k16`, f32 accumulation.
//!
//! `C[M,N] = epilogue(A[M,K] x B[K,N])` for bf16 or f16 inputs, bf16/f16/f32 output, A and B
//! each row-major or transposed, epilogue none / bias / GeLU (tanh approximation) / bias+GeLU,
//! any `M, N, K >= 1` (edges zero-filled on load and guarded on store). Everything but the
//! input type and the tile shape is a runtime field of [`GemmParams`]: the layouts select one
//! of four mainloops once per launch (so the mainloop is specialized, not branching), the
//! epilogue and output type branch per element pair in the epilogue (uniform branches).
//!
//! The kernel body [`gemm`] is generic over [`StageHooks`], so stream mode and persistent mode
//! instantiate the same code; the entry points here use [`PlainHooks`] ([`NoHooks`]: one tile
//! per block, tile = `(blockIdx.x, blockIdx.y)` = (row tile, column tile); plus the tile's
//! [`TraceEvent`] when [`GemmParams::trace`] is set).
//!
//! | entry point          | input | block tile    | warps (M x N, warp tile) | threads | dynamic smem |
//! |----------------------|-------|---------------|--------------------------|---------|--------------|
//! | `gemm_bf16_256x128`  | bf16  | 256 x 128 x 32 | 4 x 2 (64 x 64)          | 256     | 96 KiB       |
//! | `gemm_f16_256x128`   | f16   | 256 x 128 x 32 | 4 x 2 (64 x 64)          | 256     | 96 KiB       |
//! | `gemm_bf16_128x128`  | bf16  | 128 x 128 x 32 | 2 x 4 (64 x 32)          | 256     | 64 KiB       |
//! | `gemm_bf16_64x64`    | bf16  | 64 x 64 x 32   | 2 x 2 (32 x 32)          | 128     | 32 KiB       |
//! | `gemm_f16_128x128`   | f16   | 128 x 128 x 32 | 2 x 4 (64 x 32)          | 256     | 64 KiB       |
//! | `gemm_f16_64x64`     | f16   | 64 x 64 x 32   | 2 x 2 (32 x 32)          | 128     | 32 KiB       |
//!
//! All use 4 stages ([`GemmTileShape::stages`]). Launch: grid = `shape.grid(m, n)` as (x, y, 1), block =
//! `shape.threads()`, dynamic shared memory = `shape.smem_bytes()`, one [`GemmParams`] by value
//! (with [`GemmParams::trace`] set, one [`TraceEvent`] per tile: see [`PlainHooks`]).

/// `unroll!(i < N, { body })`: `body` once for each `i` in `0..N` (`N` a constant, at most 8),
/// written out rather than looped, so register arrays are only ever indexed by constants
/// (LLVM's unroller gives up on big loop bodies, and a dynamically indexed array goes to
/// local memory). Inside the body, skip with `if`, not `continue`. Every use expands all 8
/// copies before the constant condition folds them, so nest at most three deep (8^3 bodies).
macro_rules! unroll {
    ($i:ident < $n:expr, $body:block) => {
        unroll!(@ $i, $n, $body, 0 1 2 3 4 5 6 7)
    };
    (@ $i:ident, $n:expr, $body:block, $($k:literal)*) => {{
        // Checked when the code is monomorphized: a larger count is a compile error, not a
        // trap in the kernel (a runtime `panic!` here compiled a 32-block epilogue loop into one
        // that ptxas accepted and every launch would have trapped on; session 29).
        const { assert!($n <= 8, "unroll! handles at most 8 iterations") };
        $(
            #[allow(clippy::identity_op, clippy::erasing_op, unused_comparisons)]
            if $k < $n {
                let $i: usize = $k;
                $body
            }
        )*
    }};
}

pub mod epilogue;
pub mod mainloop;
pub mod skinny;
#[cfg(target_feature = "sm_90a")]
pub mod sm90;

use crate::ptx::{barrier, copy, ids, smem, time};
use crate::stage::{NoHooks, StageHooks};
use cusync_shared::gemm::{flags, GemmParams, GemmTileShape, TILE_128X128, TILE_256X128, TILE_64X64};
use cusync_shared::layout::TraceEvent;
use cusync_shared::{Grid, TileIdx};
use mainloop::{load_tile, mma_stage, Acc, Operand};
pub use mainloop::{Bf16, InputElem, F16};

/// Computes every tile `hooks` hands out, for a block of `WARPS_M * WARPS_N` warps whose warps
/// each own `MI x NI` m16n8 tiles (block tile `bm = 16 MI WARPS_M` x `bn = 8 NI WARPS_N`),
/// with `KK` k16 steps per pipeline stage (`bk = 16 KK`, 32 or 64) and `STAGES` stages.
/// `hooks.wait_dependent`'s `k_step` counts stages of `bk` K elements. Dispatches once on the
/// layouts in `p.flags` to the specialized [`gemm_tiles`].
///
/// Use the configurations ([`gemm_256x128`], [`gemm_128x128`], [`gemm_64x64`]) rather than
/// naming the constants: each matches a [`GemmTileShape`] the host knows.
///
/// # Safety
/// Every thread of a block of `32 * WARPS_M * WARPS_N` threads calls it, with at least
/// `GemmTileShape::smem_bytes()` bytes of dynamic shared memory; `p` describes valid device
/// memory for its shapes (the host's `Gemm` validates that).
#[inline(always)]
pub unsafe fn gemm<
    H: StageHooks,
    E: InputElem,
    const MI: usize,
    const NI: usize,
    const KK: usize,
    const WARPS_M: u32,
    const WARPS_N: u32,
    const STAGES: u32,
>(
    p: &GemmParams,
    hooks: &mut H,
) {
    // SAFETY: forwarded contract.
    unsafe {
        match (p.a_trans(), p.b_trans()) {
            (false, false) => gemm_tiles::<H, E, MI, NI, KK, WARPS_M, WARPS_N, STAGES, false, false>(p, hooks),
            (false, true) => gemm_tiles::<H, E, MI, NI, KK, WARPS_M, WARPS_N, STAGES, false, true>(p, hooks),
            (true, false) => gemm_tiles::<H, E, MI, NI, KK, WARPS_M, WARPS_N, STAGES, true, false>(p, hooks),
            (true, true) => gemm_tiles::<H, E, MI, NI, KK, WARPS_M, WARPS_N, STAGES, true, true>(p, hooks),
        }
    }
}

/// Instantiates [`gemm`] for a shared [`GemmTileShape`] constant, checking at compile time that
/// the literal generics are that shape's.
macro_rules! gemm_config {
    ($(#[$doc:meta])* $name:ident, $shape:ident, $mi:literal, $ni:literal, $kk:literal, $wm:literal, $wn:literal, $st:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As for [`gemm`], with the shape's `threads()` threads and `smem_bytes()` of dynamic
        /// shared memory.
        #[inline(always)]
        pub unsafe fn $name<H: StageHooks, E: InputElem>(p: &GemmParams, hooks: &mut H) {
            const S: GemmTileShape = $shape;
            const _: () = assert!(
                S.is_valid()
                    && S.mi() == $mi
                    && S.ni() == $ni
                    && S.kk() == $kk
                    && S.warps_m == $wm
                    && S.warps_n == $wn
                    && S.stages == $st
            );
            // SAFETY: forwarded contract.
            unsafe { gemm::<H, E, $mi, $ni, $kk, $wm, $wn, $st>(p, hooks) }
        }
    };
}

gemm_config!(
    /// The 256 x 128 configuration ([`TILE_256X128`]).
    gemm_256x128, TILE_256X128, 4, 8, 2, 4, 2, 4
);
gemm_config!(
    /// The 128 x 128 configuration ([`TILE_128X128`]). A stream-mode or persistent kernel is
    /// `gemm_128x128::<MyHooks, Bf16>(&p, &mut hooks)`.
    gemm_128x128, TILE_128X128, 4, 4, 2, 2, 4, 4
);
gemm_config!(
    /// The 64 x 64 configuration ([`TILE_64X64`]).
    gemm_64x64, TILE_64X64, 2, 4, 2, 2, 2, 4
);

/// `cp.async.wait_group STAGES - 2` (a generic constant expression cannot be a const argument).
#[inline(always)]
fn wait_stage<const STAGES: u32>() {
    match STAGES {
        2 => copy::wait_group::<0>(),
        3 => copy::wait_group::<1>(),
        4 => copy::wait_group::<2>(),
        5 => copy::wait_group::<3>(),
        6 => copy::wait_group::<4>(),
        _ => copy::wait_all(),
    }
}

/// The tile loop, specialized for the layouts: `AT` = A stored `[K, M]`, `BT` = B stored `[N, K]`.
///
/// Per tile: B copies of the prologue's stages first (independent operand), then for each
/// stage `hooks.wait_dependent(tile, k_step)` before that stage's A copies (the paper's
/// optimization R); in the steady state the B copies of K-step `kt + STAGES - 1` are issued,
/// then the wait, then its A copies, then the mma of K-step `kt`. A wait that returns `false`
/// ends the kernel (after draining this thread's copies). After the epilogue's stores,
/// `hooks.post(tile)`.
///
/// # Safety
/// As for [`gemm`].
#[inline(always)]
unsafe fn gemm_tiles<
    H: StageHooks,
    E: InputElem,
    const MI: usize,
    const NI: usize,
    const KK: usize,
    const WARPS_M: u32,
    const WARPS_N: u32,
    const STAGES: u32,
    const AT: bool,
    const BT: bool,
>(
    p: &GemmParams,
    hooks: &mut H,
) {
    let bm = WARPS_M * MI as u32 * 16;
    let bn = WARPS_N * NI as u32 * 8;
    let bk = KK as u32 * 16;
    let threads = WARPS_M * WARPS_N * 32;
    let stage_bytes = (bm + bn) * bk * 2;
    let tid = ids::tid_x();
    let lane = tid & 31;
    let warp = tid >> 5;
    let (wm0, wn0) = ((warp % WARPS_M) * MI as u32 * 16, (warp / WARPS_M) * NI as u32 * 8);
    let smem = smem::dynamic_addr();
    let f = p.flags;
    // The host sets the *_VEC bits; the device re-checks alignment so a wrong bit cannot fault.
    let vec_ok = |addr: u64, ld: u32| addr.is_multiple_of(16) && ld.is_multiple_of(8);
    let a = Operand {
        base: p.a as *const u16,
        ld: p.lda as usize,
        extent: p.m,
        k: p.k,
        vec: f & flags::A_VEC != 0 && vec_ok(p.a, p.lda),
    };
    let b = Operand {
        base: p.b as *const u16,
        ld: p.ldb as usize,
        extent: p.n,
        k: p.k,
        vec: f & flags::B_VEC != 0 && vec_ok(p.b, p.ldb),
    };
    let k_steps = p.k.div_ceil(bk);
    let grid = Grid::covering(p.m, p.n, bm, bn, 1);
    // A stage: A tile (bm x bk) at its start, B tile (bk x bn) after it.
    let sa = |s: u32| smem + s * stage_bytes;
    let sb = |s: u32| smem + s * stage_bytes + bm * bk * 2;

    while let Some(tile) = hooks.next_tile(grid) {
        let (m0, n0) = (tile.x * bm, tile.y * bn);
        // SAFETY (whole block): shared addresses stay inside `STAGES * stage_bytes`; global
        // reads are bounds-checked in `load_tile`; every thread runs the same sequence of
        // barriers and copies (the hooks' results are block-uniform).
        unsafe {
            // Prologue: B of the first STAGES-1 K-steps, then per stage wait + A, one commit group
            // per stage (the first group also holds every prologue B copy).
            for s in 0..STAGES - 1 {
                if s < k_steps {
                    load_tile(&b, BT, sb(s), n0, bn, bk, s, tid, threads);
                }
            }
            for s in 0..STAGES - 1 {
                if s < k_steps {
                    if !hooks.wait_dependent(tile, s) {
                        copy::wait_all();
                        return;
                    }
                    load_tile(&a, !AT, sa(s), m0, bm, bk, s, tid, threads);
                }
                copy::commit_group();
            }
            let mut acc: Acc<MI, NI> = [[[0.0; 4]; NI]; MI];
            for kt in 0..k_steps {
                // Groups committed so far: STAGES - 1 + kt; K-step kt's is done when at most
                // STAGES - 2 are pending. The barrier also retires the stage read at kt - 1.
                wait_stage::<STAGES>();
                barrier::sync_threads();
                let next = kt + STAGES - 1;
                if next < k_steps {
                    let s = next % STAGES;
                    load_tile(&b, BT, sb(s), n0, bn, bk, next, tid, threads);
                    if !hooks.wait_dependent(tile, next) {
                        copy::wait_all();
                        return;
                    }
                    load_tile(&a, !AT, sa(s), m0, bm, bk, next, tid, threads);
                }
                copy::commit_group();
                let s = kt % STAGES;
                mma_stage::<E, MI, NI, KK, AT, BT>(&mut acc, sa(s), sb(s), bm, bn, wm0, wn0, lane);
            }
            // Only empty groups can be pending; the barrier keeps the next tile's prologue
            // from overwriting stages other warps still read.
            copy::wait_all();
            barrier::sync_threads();
            epilogue::store_acc::<MI, NI>(&acc, p, m0 + wm0, n0 + wn0, lane);
            hooks.post(tile);
        }
    }
}

/// The plain (unsynchronized) kernels' hooks: [`NoHooks`] (the tile of this block's
/// `blockIdx`, no wait, no post), plus one [`TraceEvent`] per tile when
/// [`GemmParams::trace`] is not 0: thread 0 reads `%globaltimer` when the block takes its tile
/// (`t_dispatch = t_ready = t_start`: nothing is waited for) and, after a block barrier that
/// follows every thread's epilogue stores, writes the event at index `tm * tiles_n + tn`
/// (`stage = 0`: the host names the stage). Tracing off costs one uniform branch on a kernel
/// parameter where the tile is taken and one where it is posted: no timer read, no barrier.
pub struct PlainHooks {
    inner: NoHooks,
    /// [`GemmParams::trace`]: one [`TraceEvent`] per tile of the grid, 0 when off.
    trace: u64,
    /// The grid of the tile taken (set only when tracing).
    grid: Grid,
    /// When the tile was taken (thread 0, only when tracing).
    t_start: u64,
}

impl PlainHooks {
    /// Hooks for one tile per block, tracing into `p.trace` when it is not 0.
    #[inline(always)]
    pub fn new(p: &GemmParams) -> Self {
        Self {
            inner: NoHooks::new(),
            trace: p.trace,
            grid: Grid::new(0, 0, 0),
            t_start: 0,
        }
    }
}

impl StageHooks for PlainHooks {
    #[inline(always)]
    unsafe fn next_tile(&mut self, grid: Grid) -> Option<TileIdx> {
        // SAFETY: forwarded contract (every thread of the block calls it).
        let tile = unsafe { self.inner.next_tile(grid) };
        if self.trace != 0 {
            self.grid = grid;
            if ids::thread_linear() == 0 {
                self.t_start = time::global_timer_ns();
            }
        }
        tile
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, _tile: TileIdx, _k_step: u32) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn post(&mut self, tile: TileIdx) {
        if self.trace == 0 {
            return;
        }
        // `trace` is a kernel parameter, so the whole block takes this branch: the barrier
        // is reached by every thread. After it, every warp's epilogue stores were issued.
        barrier::sync_threads();
        if ids::thread_linear() == 0 {
            let id = self.grid.linear(tile);
            let e = TraceEvent {
                stage: 0,
                tile: id,
                sm: ids::sm_id(),
                cta: ids::block_linear(),
                t_dispatch: self.t_start,
                t_ready: self.t_start,
                t_start: self.t_start,
                t_end: time::global_timer_ns(),
            };
            // SAFETY: the host's `Gemm::launch_traced` checked that the buffer holds one event
            // per tile of this launch's grid, and `id` is a tile of that grid. A plain store:
            // the host reads the events after the launch.
            unsafe { *(self.trace as *mut TraceEvent).add(id as usize) = e };
        }
    }
}

macro_rules! gemm_entry {
    ($(#[$doc:meta])* $name:ident, $cfg:ident, $elem:ty) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
            // SAFETY: the host launches it with the configuration's block and shared memory
            // (and, when `p.trace` is set, a buffer of one event per tile).
            unsafe { $cfg::<PlainHooks, $elem>(&p, &mut PlainHooks::new(&p)) }
        }
    };
}

gemm_entry!(
    /// bf16 inputs, 256 x 128 x 32 tiles, one tile per block (module docs).
    gemm_bf16_256x128, gemm_256x128, Bf16
);
gemm_entry!(
    /// f16 inputs, 256 x 128 x 32 tiles, one tile per block.
    gemm_f16_256x128, gemm_256x128, F16
);
gemm_entry!(
    /// bf16 inputs, 128 x 128 x 32 tiles, one tile per block.
    gemm_bf16_128x128, gemm_128x128, Bf16
);
gemm_entry!(
    /// bf16 inputs, 64 x 64 x 32 tiles, one tile per block.
    gemm_bf16_64x64, gemm_64x64, Bf16
);
gemm_entry!(
    /// f16 inputs, 128 x 128 x 32 tiles, one tile per block.
    gemm_f16_128x128, gemm_128x128, F16
);
gemm_entry!(
    /// f16 inputs, 64 x 64 x 32 tiles, one tile per block.
    gemm_f16_64x64, gemm_64x64, F16
);

/// Test hooks: block `b` computes linear tiles `b, b + gridDim.x, ...` (y fastest, as
/// [`Grid::tile`]), never waits, never posts. Exercises the body's multi-tile path (the
/// shared stages reused across tiles) that persistent and stream modes rely on.
pub struct GridStrideHooks {
    next: u32,
}

impl GridStrideHooks {
    /// Starts at this block's index.
    #[inline(always)]
    pub fn new() -> Self {
        Self { next: ids::ctaid_x() }
    }
}

impl Default for GridStrideHooks {
    fn default() -> Self {
        Self::new()
    }
}

impl StageHooks for GridStrideHooks {
    #[inline(always)]
    unsafe fn next_tile(&mut self, grid: Grid) -> Option<TileIdx> {
        let id = self.next;
        if id >= grid.count() {
            return None;
        }
        self.next += ids::nctaid_x();
        Some(grid.tile(id))
    }

    #[inline(always)]
    unsafe fn wait_dependent(&mut self, _tile: TileIdx, _k_step: u32) -> bool {
        true
    }

    #[inline(always)]
    unsafe fn post(&mut self, _tile: TileIdx) {}
}

/// Test kernel: bf16, 64 x 64 tiles, any 1-D grid; each block loops over tiles with
/// [`GridStrideHooks`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gemm_test_grid_stride_bf16_64x64(p: GemmParams) {
    // SAFETY: the host launches it with 128 threads and `TILE_64X64.smem_bytes()`.
    unsafe { gemm_64x64::<GridStrideHooks, Bf16>(&p, &mut GridStrideHooks::new()) }
}
