//! Stream-mode kernels: the one-thread wait kernel, and a scalar f32 GeMM stage used by the
//! protocol tests (every policy and order, grids many waves deep) where bitwise equality with
//! the unsynchronized kernel is the check: same code, same summation order.

use crate::ptx::ids;
use crate::stage::{NoHooks, StageHooks};
use crate::stream::StreamStage;
use crate::sync::{self, WaitSite};
use cusync_shared::layout::{ErrorCode, ErrorSlot, StageDesc};
use cusync_shared::Grid;

/// The CuSync wait kernel: one thread waits until the producer stage's start count reaches
/// `target` (`cusync_shared::lanes::start_target`: every block of a persistent producer
/// resident, or the first of one with a block per tile), so the consumer launched after it on
/// the same stream cannot take the SMs the producer needs. Bounded like every wait; a timeout
/// is reported as `WaitKernelTimeout` for `stage`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn stream_wait_kernel(
    start_count: *const u32,
    target: u32,
    stage: u32,
    error: *mut ErrorSlot,
    timeout_ns: u64,
) {
    if ids::thread_linear() != 0 {
        return;
    }
    let site = WaitSite {
        stage,
        tile: u32::MAX,
        error,
        timeout_ns,
    };
    unsafe { sync::thread_wait(start_count, target, &site, false, ErrorCode::WaitKernelTimeout) };
}

/// Output tile of [`scalar_gemm_tile`]: `SCALAR_TILE x SCALAR_TILE`.
pub const SCALAR_TILE: u32 = 32;
/// K elements per `wait_dependent` step of [`scalar_gemm_tile`].
pub const SCALAR_K_TILE: u32 = 32;

/// `C[M,N] = A[M,K] x B[K,N]` (f32, row-major) for every tile the hooks hand out; 256 threads,
/// each computing 4 elements of a 32x32 tile, summing K in order. The A operand is the
/// dependent one: `wait_dependent` is called before each K-step of 32.
///
/// # Safety
/// Pointers are valid for the shapes given; every thread of the block calls it.
#[inline(always)]
pub unsafe fn scalar_gemm_tile<H: StageHooks>(
    hooks: &mut H,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: u32,
    n: u32,
    k: u32,
) {
    let grid = Grid::covering(m, n, SCALAR_TILE, SCALAR_TILE, 1);
    let t = ids::thread_linear();
    let col = t % SCALAR_TILE;
    let row0 = (t / SCALAR_TILE) * 4;
    while let Some(tile) = unsafe { hooks.next_tile(grid) } {
        let gc = tile.y * SCALAR_TILE + col;
        let mut acc = [0f32; 4];
        let steps = k.div_ceil(SCALAR_K_TILE);
        for s in 0..steps {
            if !unsafe { hooks.wait_dependent(tile, s) } {
                return;
            }
            let k_end = ((s + 1) * SCALAR_K_TILE).min(k);
            for kk in s * SCALAR_K_TILE..k_end {
                let bv = if gc < n {
                    unsafe { *b.add((kk * n + gc) as usize) }
                } else {
                    0.0
                };
                for (r, v) in acc.iter_mut().enumerate() {
                    let gr = tile.x * SCALAR_TILE + row0 + r as u32;
                    if gr < m {
                        *v += unsafe { *a.add((gr * k + kk) as usize) } * bv;
                    }
                }
            }
        }
        for (r, v) in acc.iter().enumerate() {
            let gr = tile.x * SCALAR_TILE + row0 + r as u32;
            if gr < m && gc < n {
                unsafe { *c.add((gr * n + gc) as usize) = *v };
            }
        }
        unsafe { hooks.post(tile) };
    }
}

/// The scalar GeMM with no synchronization (the StreamSync baseline: same code, hooks compiled
/// out). Grid: `covering(m, n, 32, 32)` blocks of 256 threads.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn scalar_gemm_nosync(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: u32,
    n: u32,
    k: u32,
) {
    let mut hooks = NoHooks::new();
    unsafe { scalar_gemm_tile(&mut hooks, a, b, c, m, n, k) };
}

/// The scalar GeMM as a stream-mode stage: tiles from the stage's order, waits and posts per
/// the stage descriptor. One tile per block.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn scalar_gemm_stream(
    desc: StageDesc,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    m: u32,
    n: u32,
    k: u32,
) {
    let mut hooks = unsafe { StreamStage::start(&desc, SCALAR_K_TILE) };
    unsafe { scalar_gemm_tile(&mut hooks, a, b, c, m, n, k) };
}

/// Tensor-core GeMM stages in stream mode: the same mainloop as the unsynchronized
/// `gemm_bf16_*` kernels, with [`StreamStage`] hooks (tiles from the stage's order, waits on the
/// A operand per the policy, posts after the store). One tile per block; the K step is 32.
macro_rules! gemm_stream_entry {
    ($(#[$doc:meta])* $name:ident, $cfg:ident, $elem:ty) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(desc: StageDesc, p: cusync_shared::gemm::GemmParams) {
            // SAFETY: the host launches one block per tile with the configuration's threads and
            // shared memory, and `desc` describes this launch.
            unsafe {
                let mut hooks = StreamStage::start(&desc, GEMM_K_TILE);
                crate::kernels::gemm::$cfg::<StreamStage, $elem>(&p, &mut hooks);
            }
        }
    };
}

/// K elements per `wait_dependent` step of the tensor-core GeMM (its pipeline stage depth in K).
pub const GEMM_K_TILE: u32 = 32;

gemm_stream_entry!(
    /// bf16 GeMM, 128 x 128 tiles, as a stream-mode stage.
    gemm_bf16_128x128_stream, gemm_128x128, crate::kernels::gemm::Bf16
);
gemm_stream_entry!(
    /// bf16 GeMM, 256 x 128 tiles, as a stream-mode stage.
    gemm_bf16_256x128_stream, gemm_256x128, crate::kernels::gemm::Bf16
);
gemm_stream_entry!(
    /// bf16 GeMM, 64 x 64 tiles, as a stream-mode stage.
    gemm_bf16_64x64_stream, gemm_64x64, crate::kernels::gemm::Bf16
);
