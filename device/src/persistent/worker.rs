//! Tile workers: what one tile of a stage computes. A worker is a [`TileWorker`] (a code the
//! host names the stage with, a hide step, and a body generic over [`StageHooks`]); a
//! [`WorkerSet`] dispatches on the code once per tile. A new kind of stage (Conv2D, attention)
//! is a new `TileWorker` and one more name in a `worker_set!` (or a new set and entry point):
//! the scheduler and the epilogue do not change.

use super::hooks::TileHooks;
use super::protocol::Protocol;
use crate::kernels::gemm::{gemm_128x128, Bf16};
use crate::kernels::stream_mode::scalar_gemm_tile;
use crate::ptx::ids;
use crate::stage::StageHooks;
use cusync_shared::gemm::{GemmParams, TILE_128X128};
use cusync_shared::persistent::worker;
use cusync_shared::Grid;

/// One kind of tile.
pub trait TileWorker {
    /// The code stages name it by (`cusync_shared::persistent::worker`).
    const CODE: u32;
    /// The first `wait_dependent` K-step at which the block's hidden protocol work runs:
    /// where the block waits for memory anyway (after issuing its first loads).
    const HIDE_STEP: u32;

    /// Computes every tile `hooks` hands out (one, in persistent mode) from the stage's
    /// operands `p`, calling `hooks.wait_dependent` before its dependent loads and
    /// `hooks.post` after its stores.
    ///
    /// # Safety
    /// Every thread of a block of `BLOCK_THREADS` threads calls it, with the dynamic shared
    /// memory the worker needs; `p` describes valid device memory for its shapes.
    unsafe fn run<H: StageHooks>(p: &GemmParams, hooks: &mut H);
}

/// The scalar f32 GeMM tile of stream mode (`scalar_gemm_tile`): same code, same summation
/// order, so persistent outputs are bitwise equal to StreamSync's. No shared memory.
pub struct ScalarGemmF32;

impl TileWorker for ScalarGemmF32 {
    const CODE: u32 = worker::SCALAR_GEMM_F32;
    const HIDE_STEP: u32 = 0;

    #[inline(always)]
    unsafe fn run<H: StageHooks>(p: &GemmParams, hooks: &mut H) {
        // SAFETY: forwarded contract (256 threads, valid f32 operands).
        unsafe {
            scalar_gemm_tile(
                hooks,
                p.a as *const f32,
                p.b as *const f32,
                p.c as *mut f32,
                p.m,
                p.n,
                p.k,
            )
        }
    }
}

/// `C = A + B` elementwise (f32, row-major `[m, n]`), 32 x 32 tiles: a stage with two
/// producers (fan-in). No shared memory.
pub struct SumF32;

/// Output tile of [`SumF32`].
pub const SUM_TILE: u32 = 32;

impl TileWorker for SumF32 {
    const CODE: u32 = worker::SUM_F32;
    const HIDE_STEP: u32 = 0;

    #[inline(always)]
    unsafe fn run<H: StageHooks>(p: &GemmParams, hooks: &mut H) {
        // SAFETY: forwarded contract.
        unsafe { sum_tile(hooks, p.a as *const f32, p.b as *const f32, p.c as *mut f32, p.m, p.n) }
    }
}

/// `C[m,n] = A[m,n] + B[m,n]` for every tile the hooks hand out; 256 threads, 4 elements each
/// of a 32 x 32 tile. Both operands are dependent: `wait_dependent(tile, 0)` before the loads.
///
/// # Safety
/// Pointers are valid for `m * n` elements; every thread of a 256-thread block calls it.
#[inline(always)]
pub unsafe fn sum_tile<H: StageHooks>(hooks: &mut H, a: *const f32, b: *const f32, c: *mut f32, m: u32, n: u32) {
    let grid = Grid::covering(m, n, SUM_TILE, SUM_TILE, 1);
    let t = ids::thread_linear();
    let col = t % SUM_TILE;
    let row0 = (t / SUM_TILE) * 4;
    // SAFETY: every index is bounds-checked against `m` and `n`.
    unsafe {
        while let Some(tile) = hooks.next_tile(grid) {
            if !hooks.wait_dependent(tile, 0) {
                return;
            }
            let gc = tile.y * SUM_TILE + col;
            for r in 0..4 {
                let gr = tile.x * SUM_TILE + row0 + r;
                if gr < m && gc < n {
                    let i = (gr * n + gc) as usize;
                    *c.add(i) = *a.add(i) + *b.add(i);
                }
            }
            hooks.post(tile);
        }
    }
}

/// The tensor-core GeMM (`gemm_128x128`, bf16 inputs): the same mainloop and epilogue as the
/// `gemm_bf16_128x128` kernel. Needs `TILE_128X128.smem_bytes()` of dynamic shared memory.
pub struct GemmBf16x128;

impl TileWorker for GemmBf16x128 {
    const CODE: u32 = worker::GEMM_BF16_128X128;
    /// The last prologue stage: the B tiles of the first `stages - 1` K-steps and the A tiles
    /// of the first `stages - 2` are in flight; the block's next step is waiting for them.
    const HIDE_STEP: u32 = TILE_128X128.stages - 2;

    #[inline(always)]
    unsafe fn run<H: StageHooks>(p: &GemmParams, hooks: &mut H) {
        // SAFETY: forwarded contract (256 threads, 64 KiB of dynamic shared memory).
        unsafe { gemm_128x128::<H, Bf16>(p, hooks) }
    }
}

/// A set of tile workers one entry point instantiates.
pub trait WorkerSet {
    /// Runs the worker with code `code` on the hooks' tile; `false` if the set has no such
    /// worker (nothing ran).
    ///
    /// # Safety
    /// As for [`TileWorker::run`], for the worker the code names.
    unsafe fn dispatch<P: Protocol>(code: u32, p: &GemmParams, hooks: &mut TileHooks<P>) -> bool;
}

/// Declares a [`WorkerSet`] of the given [`TileWorker`]s.
macro_rules! worker_set {
    ($(#[$doc:meta])* $name:ident: $($w:ty),+) => {
        $(#[$doc])*
        pub struct $name;

        impl WorkerSet for $name {
            #[inline(always)]
            unsafe fn dispatch<P: Protocol>(code: u32, p: &GemmParams, hooks: &mut TileHooks<P>) -> bool {
                $(
                    if code == <$w>::CODE {
                        hooks.set_hide_step(<$w>::HIDE_STEP);
                        // SAFETY: forwarded contract.
                        unsafe { <$w>::run(p, hooks) };
                        return true;
                    }
                )+
                false
            }
        }
    };
}

worker_set!(
    /// The f32 test workers: [`ScalarGemmF32`] and [`SumF32`] (no dynamic shared memory).
    F32Workers: ScalarGemmF32, SumF32
);
worker_set!(
    /// The tensor-core workers: [`GemmBf16x128`] (64 KiB of dynamic shared memory).
    Bf16Workers: GemmBf16x128
);
