//! The GeMM mainloop's pieces: the swizzled shared-memory layout of one pipeline stage, the
//! global -> shared copies of one K-step (16-byte `cp.async` with zero-fill, or element loads
//! for operands that are not 16-byte aligned), and the warp's `ldmatrix` + `mma.sync` over one
//! stage.
//!
//! # Shared layout of a stage
//!
//! A stage holds the A tile (`bm` x `bk`) then the B tile (`bk` x `bn`), 16-bit elements
//! (`bk` = 32 or 64). Each operand tile is stored the way its global storage is contiguous, in
//! 16-byte chunks of 8 elements:
//!
//! * **K-major** (K contiguous: A row-major, B transposed): `[R][bk]`, `2 bk`-byte rows.
//!   With `bk = 32` (64-byte rows), chunk `c` (0..4) of row `r` lives at
//!   `r * 64 + ((c ^ ((r >> 1) & 3)) << 4)`: the eight rows an `ldmatrix` phase reads
//!   (`r0..r0+8`, one logical chunk) land in eight distinct 16-byte bank groups (`(r & 1) * 4`
//!   picks the half of the 128-byte line, `(r >> 1) & 3` the chunk). With `bk = 64` (128-byte
//!   rows), chunk `c` (0..8) of row `r` lives at `r * 128 + ((c ^ (r & 7)) << 4)`.
//! * **MN-major** (M or N contiguous: A transposed, B row-major): `[bk][R]`, `2R`-byte rows
//!   (`R` a multiple of 64, so rows are whole 128-byte lines); chunk `c` (0..R/8) of row `k`
//!   lives at `k * 2R + ((c ^ (k & 7)) << 4)`. Eight consecutive rows with one logical chunk
//!   map to the eight chunk positions of a 128-byte line.
//!
//! # Fragments (PTX ISA "Matrix fragments for mma.m16n8k16"; lane = 4g + t)
//!
//! A (16x16, row): a0 = A[g][2t..2t+2], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..].
//! B (16x8, col): b0 = B[2t..2t+2][g], b1 = B[2t+8..2t+10][g]. `ldmatrix` gives lane (g, t) the
//! stored row g, columns 2t, 2t+1 of each 8x8 matrix; with `.trans`, stored rows 2t, 2t+1 of
//! column g. So K-major tiles are read without `.trans` (stored rows are M or N) and MN-major
//! tiles with `.trans` (stored rows are K). Lanes 8j..8j+8 address the rows of matrix j.

use crate::ptx::{copy, mma};

/// Byte offset of 16-byte chunk `c` (0..bk/8) of row `r` in a K-major `[R][bk]` tile
/// (`bk` 32 or 64, a constant after inlining).
#[inline(always)]
pub fn kmajor_offset(r: u32, c: u32, bk: u32) -> u32 {
    if bk == 32 {
        r * 64 + ((c ^ ((r >> 1) & 3)) << 4)
    } else {
        r * (2 * bk) + ((c ^ (r & 7)) << 4)
    }
}

/// Byte offset of 16-byte chunk `c` (0..R/8) of row `k` in an MN-major `[bk][R]` tile.
#[inline(always)]
pub fn mnmajor_offset(k: u32, c: u32, r: u32) -> u32 {
    k * (2 * r) + ((c ^ (k & 7)) << 4)
}

/// One operand's global storage, as the loaders see it.
#[derive(Clone, Copy)]
pub struct Operand {
    /// Element 0 (16-bit elements).
    pub base: *const u16,
    /// Leading dimension of the storage, in elements.
    pub ld: usize,
    /// The operand's non-K extent (M for A, N for B).
    pub extent: u32,
    /// The reduction extent K.
    pub k: u32,
    /// 16-byte `cp.async` allowed (base 16-byte aligned, `ld % 8 == 0`); else element loads.
    pub vec: bool,
}

/// `st.shared.v4.b32`: the element-load path's 16-byte store into the stage.
///
/// # Safety
/// `addr` is a 16-byte aligned shared-window address.
#[inline(always)]
unsafe fn st_shared_v4(addr: u32, v: [u32; 4]) {
    // SAFETY: see the contract; writes 16 bytes of shared memory.
    unsafe {
        core::arch::asm!(
            "st.shared.v4.b32 [{}], {{{}, {}, {}, {}}};",
            in(reg32) addr, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
            options(nostack)
        )
    };
}

/// Copies the 8 contiguous elements at `src`, of which the first `valid` (0..=8) exist, into
/// the 16-byte shared chunk `dst`, zero-filling the rest.
///
/// # Safety
/// `src .. src + valid` readable (16-byte aligned when `vec`); `dst` 16-byte aligned shared.
#[inline(always)]
unsafe fn copy_chunk(dst: u32, src: *const u16, valid: u32, vec: bool) {
    if vec {
        // SAFETY: the caller's contract; `valid = 0` reads nothing.
        unsafe { copy::cp_async_16(dst, src as *const u8, valid * 2) };
    } else {
        let mut w = [0u32; 4];
        for (e, word) in w.iter_mut().enumerate() {
            let e = 2 * e as u32;
            // SAFETY: only elements below `valid` are read.
            let lo = if e < valid { unsafe { *src.add(e as usize) } } else { 0 };
            let hi = if e + 1 < valid {
                unsafe { *src.add(e as usize + 1) }
            } else {
                0
            };
            *word = lo as u32 | ((hi as u32) << 16);
        }
        // SAFETY: the caller's contract.
        unsafe { st_shared_v4(dst, w) };
    }
}

/// Issues the copies of K-step `kt` (of `bk` elements) of an operand tile of `rows` rows (M or
/// N) starting at row `r0` into the shared tile at `dst`; `kmajor` selects the layout (module
/// docs). `kmajor`, `rows`, `bk` and `threads` are constants after inlining. Out-of-range
/// elements are zero-filled. Every one of the block's `threads` threads calls it (`tid` its
/// index); each copies `rows * bk / 8 / threads` chunks.
///
/// # Safety
/// `op` describes readable global memory; `dst` is the tile's 16-byte aligned shared address
/// with `rows * bk * 2` bytes; `rows * bk / 8` is a multiple of `threads`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn load_tile(
    op: &Operand,
    kmajor: bool,
    dst: u32,
    r0: u32,
    rows: u32,
    bk: u32,
    kt: u32,
    tid: u32,
    threads: u32,
) {
    let per_thread = rows * bk / 8 / threads;
    for it in 0..per_thread {
        let q = it * threads + tid;
        let (offset, g_row, g_col, valid) = if kmajor {
            // Storage rows are M (or N), columns K.
            let chunks = bk / 8;
            let (r, c) = (q / chunks, q % chunks);
            let (gr, gk) = (r0 + r, kt * bk + c * 8);
            let valid = if gr < op.extent && gk < op.k {
                (op.k - gk).min(8)
            } else {
                0
            };
            (kmajor_offset(r, c, bk), gr, gk, valid)
        } else {
            // Storage rows are K, columns M (or N).
            let chunks = rows / 8;
            let (k, c) = (q / chunks, q % chunks);
            let (gk, gc) = (kt * bk + k, r0 + c * 8);
            let valid = if gk < op.k && gc < op.extent {
                (op.extent - gc).min(8)
            } else {
                0
            };
            (mnmajor_offset(k, c, rows), gk, gc, valid)
        };
        let src = if valid > 0 {
            op.base.wrapping_add(g_row as usize * op.ld + g_col as usize)
        } else {
            op.base
        };
        // SAFETY: `src .. src + valid` lies inside the operand (the bounds above); the
        // 16-byte path's alignment is what `op.vec` promises (row starts aligned, columns
        // multiples of 8).
        unsafe { copy_chunk(dst + offset, src, valid, op.vec) };
    }
}

/// Input element type of a GeMM: selects the `mma` instruction.
pub trait InputElem {
    /// `D = A x B + C` on one m16n8k16 tile.
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
}

/// bf16 inputs.
pub struct Bf16;
/// f16 inputs.
pub struct F16;

impl InputElem for Bf16 {
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        mma::mma_bf16_m16n8k16(a, b, c)
    }
}

impl InputElem for F16 {
    #[inline(always)]
    fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        mma::mma_f16_m16n8k16(a, b, c)
    }
}

/// A warp's `MI` x `NI` m16n8 accumulator tiles.
pub type Acc<const MI: usize, const NI: usize> = [[[f32; 4]; NI]; MI];

/// The warp's share of one stage: for each of the stage's `KK` k16 steps, `ldmatrix` its A rows
/// `wm0 .. wm0 + 16 MI` and B columns `wn0 .. wn0 + 8 NI` (tile coordinates) and accumulate
/// `MI x NI` mmas. `sa`/`sb` are the stage's A and B tile addresses, `bm`/`bn` the tile extents.
/// `AT`: A is MN-major (transposed storage); `BT`: B is K-major (transposed storage).
///
/// # Safety
/// The stage's copies have landed and are visible to the block; the whole warp calls it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn mma_stage<
    E: InputElem,
    const MI: usize,
    const NI: usize,
    const KK: usize,
    const AT: bool,
    const BT: bool,
>(
    acc: &mut Acc<MI, NI>,
    sa: u32,
    sb: u32,
    bm: u32,
    bn: u32,
    wm0: u32,
    wn0: u32,
    lane: u32,
) {
    let bk = 16 * KK as u32;
    unroll!(kk < KK, {
        let kk = kk as u32;
        let mut a = [[0u32; 4]; MI];
        unroll!(i < MI, {
            let m = wm0 + 16 * i as u32;
            a[i] = if AT {
                // Matrix j = lane / 8: k half j / 2, m half j % 2.
                let k = kk * 16 + ((lane >> 4) << 3) + (lane & 7);
                let col = m + (((lane >> 3) & 1) << 3);
                // SAFETY: inside the stage's A tile; the warp is converged.
                unsafe { mma::ldmatrix_x4_trans(sa + mnmajor_offset(k, col >> 3, bm)) }
            } else {
                // Matrix j: m half j % 2 (lane & 15 covers both), k half j / 2.
                let row = m + (lane & 15);
                let c = kk * 2 + (lane >> 4);
                // SAFETY: as above.
                unsafe { mma::ldmatrix_x4(sa + kmajor_offset(row, c, bk)) }
            };
        });
        let mut b = [[0u32; 2]; NI];
        unroll!(jp < NI / 2, {
            let n = wn0 + 16 * jp as u32;
            let r = if BT {
                // Matrix j: n half j / 2, k half j % 2 -> b0, b1 of n-tile 2jp, then of 2jp + 1.
                let row = n + ((lane >> 4) << 3) + (lane & 7);
                let c = kk * 2 + ((lane >> 3) & 1);
                // SAFETY: inside the stage's B tile; the warp is converged.
                unsafe { mma::ldmatrix_x4(sb + kmajor_offset(row, c, bk)) }
            } else {
                // Matrix j: k half j % 2 (lane & 15 covers both), n half j / 2.
                let k = kk * 16 + (lane & 15);
                let col = n + ((lane >> 4) << 3);
                // SAFETY: as above.
                unsafe { mma::ldmatrix_x4_trans(sb + mnmajor_offset(k, col >> 3, bn)) }
            };
            b[2 * jp] = [r[0], r[1]];
            b[2 * jp + 1] = [r[2], r[3]];
        });
        unroll!(i < MI, {
            unroll!(j < NI, {
                acc[i][j] = E::mma(a[i], b[j], acc[i][j]);
            });
        });
    });
}
