//! The GeMM kernels' launch facts, read by both sides: the by-value kernel parameter
//! [`GemmParams`] (layout asserted below), its flag bits, and the tile shapes the device
//! instantiates ([`GemmTileShape`]: block tile, warps, stages, shared memory, grid).
//!
//! C\[M,N\] = epilogue(A\[M,K\] x B\[K,N\]). A is stored row-major `[M, K]` (`lda >= K`) or, with
//! [`flags::A_TRANS`], as its transpose `[K, M]` (`lda >= M`); B is stored `[K, N]` (`ldb >= N`)
//! or, with [`flags::B_TRANS`], `[N, K]` (`ldb >= K`); C is row-major `[M, N]` (`ldc >= N`).
//! Leading dimensions are in elements.

use crate::layout::DevAddr;
use crate::tile::Grid;
use bytemuck::{Pod, Zeroable};

/// Bits of [`GemmParams::flags`].
pub mod flags {
    /// A is stored transposed: `[K, M]`, M contiguous.
    pub const A_TRANS: u32 = 1 << 0;
    /// B is stored transposed: `[N, K]`, K contiguous.
    pub const B_TRANS: u32 = 1 << 1;
    /// Epilogue adds `bias[n]` (f32, one per output column) to every element of column n.
    pub const BIAS: u32 = 1 << 2;
    /// Epilogue applies GeLU (tanh approximation), after the bias if both are set.
    pub const GELU: u32 = 1 << 3;
    /// Output element type, two bits: see [`OUT_BF16`], [`OUT_F16`], [`OUT_F32`].
    pub const OUT_SHIFT: u32 = 4;
    /// Mask of the output type bits (after shifting by [`OUT_SHIFT`]).
    pub const OUT_MASK: u32 = 3;
    /// Output bf16 (value of the output type bits).
    pub const OUT_BF16: u32 = 0;
    /// Output f16.
    pub const OUT_F16: u32 = 1;
    /// Output f32.
    pub const OUT_F32: u32 = 2;
    /// A may be loaded with 16-byte `cp.async` (its base is 16-byte aligned and `lda` a
    /// multiple of 8); without it the kernel loads A element by element (any shape).
    pub const A_VEC: u32 = 1 << 6;
    /// B may be loaded with 16-byte `cp.async` (as [`A_VEC`], for B and `ldb`).
    pub const B_VEC: u32 = 1 << 7;
    /// C may be stored two elements at a time (`ldc` even, base aligned to two elements).
    pub const C_VEC: u32 = 1 << 8;
    /// C is stored transposed: `[N, M]`, element `(m, n)` at `n * ldc + m` (`ldc >= M`), and
    /// the bias (with [`BIAS`]) holds one f32 per row `m`, so it still runs along the stored
    /// matrix's columns. Only path 2's 128 x 64 tile honours it, and only through
    /// [`super::GemmParams::swap_ab`]: the host computes a skinny `C = A B` as `C^T = B^T A^T`.
    pub const C_TRANS: u32 = 1 << 9;
}

/// The kernel parameter of every GeMM entry point, passed by value (`.param` space).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct GemmParams {
    /// Address of A (bf16 or f16, per the entry point).
    pub a: DevAddr,
    /// Address of B (same type as A).
    pub b: DevAddr,
    /// Address of C (bf16, f16 or f32, per the output type bits).
    pub c: DevAddr,
    /// Address of `n` f32 biases (0 unless [`flags::BIAS`]).
    pub bias: DevAddr,
    /// Rows of C and of A.
    pub m: u32,
    /// Columns of C and of B.
    pub n: u32,
    /// The reduction dimension.
    pub k: u32,
    /// Leading dimension of A's storage, in elements.
    pub lda: u32,
    /// Leading dimension of B's storage, in elements.
    pub ldb: u32,
    /// Leading dimension of C, in elements.
    pub ldc: u32,
    /// [`flags`] bits.
    pub flags: u32,
    /// Padding; always 0.
    pub _pad: u32,
    /// Plain (unsynchronized) kernels only: address of one [`crate::layout::TraceEvent`] per
    /// output tile, indexed by the tile's linear id `tm * tiles_n + tn` (0: tracing off, one
    /// predicated branch per tile). The kernel writes `stage = 0`; the host names the stage.
    /// Stream-mode and persistent stages trace through their own descriptors instead.
    pub trace: DevAddr,
}

/// Size of one element of an output type code ([`flags::OUT_BF16`], ...).
pub const fn out_elem_bytes(out: u32) -> u64 {
    if out == flags::OUT_F32 {
        4
    } else {
        2
    }
}

impl GemmParams {
    /// The parameters for dense matrices (`lda`, `ldb`, `ldc` the natural ones for the layouts
    /// in `layout_flags`), with the vector-path bits derived from the addresses and leading
    /// dimensions. `layout_flags` holds [`flags::A_TRANS`], [`flags::B_TRANS`], [`flags::BIAS`],
    /// [`flags::GELU`] and the output type bits; any `*_VEC` bits in it are recomputed.
    #[allow(clippy::too_many_arguments)]
    pub const fn dense(
        a: DevAddr,
        b: DevAddr,
        c: DevAddr,
        bias: DevAddr,
        m: u32,
        n: u32,
        k: u32,
        layout_flags: u32,
    ) -> Self {
        let lda = if layout_flags & flags::A_TRANS != 0 { m } else { k };
        let ldb = if layout_flags & flags::B_TRANS != 0 { k } else { n };
        Self::strided(a, b, c, bias, m, n, k, lda, ldb, n, layout_flags)
    }

    /// As [`GemmParams::dense`], with explicit leading dimensions.
    #[allow(clippy::too_many_arguments)]
    pub const fn strided(
        a: DevAddr,
        b: DevAddr,
        c: DevAddr,
        bias: DevAddr,
        m: u32,
        n: u32,
        k: u32,
        lda: u32,
        ldb: u32,
        ldc: u32,
        layout_flags: u32,
    ) -> Self {
        let mut p = Self {
            a,
            b,
            c,
            bias,
            m,
            n,
            k,
            lda,
            ldb,
            ldc,
            flags: layout_flags & !(flags::A_VEC | flags::B_VEC | flags::C_VEC),
            _pad: 0,
            trace: 0,
        };
        p.flags |= p.vector_flags();
        p
    }

    /// The `*_VEC` bits these addresses and leading dimensions allow (16-bit inputs).
    pub const fn vector_flags(&self) -> u32 {
        let mut f = 0;
        if self.a.is_multiple_of(16) && self.lda.is_multiple_of(8) {
            f |= flags::A_VEC;
        }
        if self.b.is_multiple_of(16) && self.ldb.is_multiple_of(8) {
            f |= flags::B_VEC;
        }
        let out_bytes = out_elem_bytes(self.out_type());
        if self.c.is_multiple_of(2 * out_bytes) && self.ldc.is_multiple_of(2) {
            f |= flags::C_VEC;
        }
        f
    }

    /// The output type code ([`flags::OUT_BF16`], [`flags::OUT_F16`] or [`flags::OUT_F32`]).
    pub const fn out_type(&self) -> u32 {
        (self.flags >> flags::OUT_SHIFT) & flags::OUT_MASK
    }

    /// Whether A is stored transposed (`[K, M]`).
    pub const fn a_trans(&self) -> bool {
        self.flags & flags::A_TRANS != 0
    }

    /// Whether B is stored transposed (`[N, K]`).
    pub const fn b_trans(&self) -> bool {
        self.flags & flags::B_TRANS != 0
    }

    /// Whether C is stored transposed ([`flags::C_TRANS`]).
    pub const fn c_trans(&self) -> bool {
        self.flags & flags::C_TRANS != 0
    }

    /// The same product with the operands swapped: `C^T[N, M] = B^T[N, K] A^T[K, M]`, on the
    /// same buffers. B's storage read as the new A (`[K, N]` is the transposed storage of
    /// `B^T`, so A is transposed exactly when B was not), A's as the new B, and C written
    /// transposed ([`flags::C_TRANS`] toggled), so the result lands where the original
    /// product's would, the bias still indexed by the original column. Path 2 runs a skinny
    /// product (M of 1 to 64 rows, the MLP's small batches) this way: the wide dimension fills
    /// the 128-row tiles of both consumer warpgroups and the small one is the `wgmma`'s N. The
    /// epilogue, vector and output bits carry over (`A_VEC` and `B_VEC` trade places); applying
    /// it twice gives `self` back.
    pub const fn swap_ab(&self) -> Self {
        let keep = self.flags & !(flags::A_TRANS | flags::B_TRANS | flags::A_VEC | flags::B_VEC | flags::C_TRANS);
        let mut f = keep;
        if !self.b_trans() {
            f |= flags::A_TRANS;
        }
        if !self.a_trans() {
            f |= flags::B_TRANS;
        }
        if self.flags & flags::B_VEC != 0 {
            f |= flags::A_VEC;
        }
        if self.flags & flags::A_VEC != 0 {
            f |= flags::B_VEC;
        }
        if !self.c_trans() {
            f |= flags::C_TRANS;
        }
        Self {
            a: self.b,
            b: self.a,
            m: self.n,
            n: self.m,
            lda: self.ldb,
            ldb: self.lda,
            flags: f,
            ..*self
        }
    }
}

/// A GeMM block-tile shape the device instantiates. `bm = warps_m * mi * 16` and
/// `bn = warps_n * ni * 8`, where each warp owns `mi` x `ni` `mma.m16n8k16` tiles; a pipeline
/// stage holds `bk` columns of K (the unit of `StageHooks::wait_dependent`'s `k_step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmTileShape {
    /// Rows of C per block.
    pub bm: u32,
    /// Columns of C per block.
    pub bn: u32,
    /// K per pipeline stage (32 or 64).
    pub bk: u32,
    /// Warps along M.
    pub warps_m: u32,
    /// Warps along N.
    pub warps_n: u32,
    /// Shared-memory pipeline depth (at least 2).
    pub stages: u32,
}

/// 256 x 128 x 32, 8 warps (4 x 2, each 64 x 64), 4 stages: 96 KiB of shared memory.
pub const TILE_256X128: GemmTileShape = GemmTileShape {
    bm: 256,
    bn: 128,
    bk: 32,
    warps_m: 4,
    warps_n: 2,
    stages: 4,
};

/// 128 x 128 x 32, 8 warps (2 x 4, each 64 x 32), 4 stages: 64 KiB of shared memory.
pub const TILE_128X128: GemmTileShape = GemmTileShape {
    bm: 128,
    bn: 128,
    bk: 32,
    warps_m: 2,
    warps_n: 4,
    stages: 4,
};

/// 64 x 64 x 32, 4 warps (2 x 2, each 32 x 32), 4 stages: 32 KiB of shared memory.
pub const TILE_64X64: GemmTileShape = GemmTileShape {
    bm: 64,
    bn: 64,
    bk: 32,
    warps_m: 2,
    warps_n: 2,
    stages: 4,
};

impl GemmTileShape {
    /// Threads per block.
    pub const fn threads(&self) -> u32 {
        self.warps_m * self.warps_n * 32
    }

    /// `mma.m16n8k16` tiles per warp along M.
    pub const fn mi(&self) -> u32 {
        self.bm / self.warps_m / 16
    }

    /// `mma.m16n8k16` tiles per warp along N.
    pub const fn ni(&self) -> u32 {
        self.bn / self.warps_n / 8
    }

    /// k16 steps per stage.
    pub const fn kk(&self) -> u32 {
        self.bk / 16
    }

    /// Bytes of one pipeline stage (A tile then B tile, 16-bit elements).
    pub const fn stage_bytes(&self) -> u32 {
        (self.bm + self.bn) * self.bk * 2
    }

    /// Dynamic shared memory per block, in bytes.
    pub const fn smem_bytes(&self) -> u32 {
        self.stages * self.stage_bytes()
    }

    /// The tile grid over an `m` x `n` output (x: row tiles, y: column tiles).
    pub const fn grid(&self, m: u32, n: u32) -> Grid {
        Grid::covering(m, n, self.bm, self.bn, 1)
    }

    /// Number of K steps (of `bk`) for a reduction of `k`.
    pub const fn k_steps(&self, k: u32) -> u32 {
        k.div_ceil(self.bk)
    }

    /// Whether the device code can instantiate this shape: whole mma tiles per warp, an even
    /// number of n8 tiles per warp (B fragments are loaded in pairs), `bk` 32 or 64, every
    /// thread copying whole 16-byte chunks of both operands, M/N extents that are multiples of
    /// 64 (MN-major rows of whole 128-byte lines for the swizzle), at least 2 stages, and
    /// at most 8 mma tiles per warp in each direction.
    pub const fn is_valid(&self) -> bool {
        let t = self.threads();
        self.bm.is_multiple_of(self.warps_m * 16)
            && self.bn.is_multiple_of(self.warps_n * 16)
            && self.ni().is_multiple_of(2)
            && self.mi() <= 8
            && self.ni() <= 8
            && (self.bk == 32 || self.bk == 64)
            && (self.bm * self.bk / 8).is_multiple_of(t)
            && (self.bn * self.bk / 8).is_multiple_of(t)
            && self.bm.is_multiple_of(64)
            && self.bn.is_multiple_of(64)
            && self.stages >= 2
    }
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<GemmParams>() == 72);
    assert!(offset_of!(GemmParams, trace) == 64);
    assert!(offset_of!(GemmParams, b) == 8);
    assert!(offset_of!(GemmParams, c) == 16);
    assert!(offset_of!(GemmParams, bias) == 24);
    assert!(offset_of!(GemmParams, m) == 32);
    assert!(offset_of!(GemmParams, n) == 36);
    assert!(offset_of!(GemmParams, k) == 40);
    assert!(offset_of!(GemmParams, lda) == 44);
    assert!(offset_of!(GemmParams, ldb) == 48);
    assert!(offset_of!(GemmParams, ldc) == 52);
    assert!(offset_of!(GemmParams, flags) == 56);
    // The tile shapes the device instantiates.
    assert!(TILE_256X128.is_valid() && TILE_128X128.is_valid() && TILE_64X64.is_valid());
};

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::{vec, vec::Vec};

    /// Element `(i, j)` of an `[rows, cols]` operand as the kernel reads it: row-major with
    /// leading dimension `ld`, or (`trans`) from its transpose's storage.
    fn at(x: &[f64], ld: u32, trans: bool, i: usize, j: usize) -> f64 {
        if trans {
            x[j * ld as usize + i]
        } else {
            x[i * ld as usize + j]
        }
    }

    /// C as the kernel would write it for `p` (A, B and C in one index space each).
    fn product(p: &GemmParams, a: &[f64], b: &[f64], c_len: usize) -> Vec<f64> {
        let mut c = vec![f64::NAN; c_len];
        for i in 0..p.m as usize {
            for j in 0..p.n as usize {
                let v: f64 = (0..p.k as usize)
                    .map(|k| at(a, p.lda, p.a_trans(), i, k) * at(b, p.ldb, p.b_trans(), k, j))
                    .sum();
                let idx = if p.c_trans() {
                    j * p.ldc as usize + i
                } else {
                    i * p.ldc as usize + j
                };
                c[idx] = v;
            }
        }
        c
    }

    #[test]
    fn swapped_operands_write_the_same_c_in_every_layout() {
        let (m, n, k) = (3usize, 5usize, 4usize);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.71).cos()).collect();
        for layout in [0, flags::A_TRANS, flags::B_TRANS, flags::A_TRANS | flags::B_TRANS] {
            let p = GemmParams::dense(
                0x1000,
                0x2000,
                0x3000,
                0,
                m as u32,
                n as u32,
                k as u32,
                layout | flags::GELU,
            );
            let s = p.swap_ab();
            assert_eq!((s.m, s.n, s.k, s.a, s.b, s.c), (p.n, p.m, p.k, p.b, p.a, p.c));
            assert!(s.c_trans() && !p.c_trans());
            assert_eq!(s.a_trans(), !p.b_trans());
            assert_eq!(s.b_trans(), !p.a_trans());
            assert_eq!(s.flags & flags::GELU, flags::GELU);
            assert_eq!(s.swap_ab(), p, "swapping twice gives the problem back");
            // The swapped product reads B's storage as A and A's as B and lands on C unchanged.
            assert_eq!(
                product(&s, &b, &a, m * n),
                product(&p, &a, &b, m * n),
                "layout {layout:#x}"
            );
        }
        // The vector bits follow their operands.
        let p = GemmParams::strided(0x1000, 0x2008, 0x3000, 0, 8, 8, 8, 8, 8, 8, 0);
        assert_eq!(p.flags & (flags::A_VEC | flags::B_VEC), flags::A_VEC);
        assert_eq!(p.swap_ab().flags & (flags::A_VEC | flags::B_VEC), flags::B_VEC);
    }

    #[test]
    fn dense_params_pick_leading_dims_and_vector_bits() {
        let p = GemmParams::dense(
            0x1000,
            0x2000,
            0x3000,
            0,
            100,
            64,
            40,
            flags::OUT_F32 << flags::OUT_SHIFT,
        );
        assert_eq!((p.lda, p.ldb, p.ldc), (40, 64, 64));
        assert_eq!(
            p.flags & (flags::A_VEC | flags::B_VEC | flags::C_VEC),
            flags::A_VEC | flags::B_VEC | flags::C_VEC
        );
        assert_eq!(p.out_type(), flags::OUT_F32);
        let t = GemmParams::dense(0x1000, 0x2000, 0x3000, 0, 100, 64, 41, flags::A_TRANS | flags::B_TRANS);
        assert_eq!((t.lda, t.ldb), (100, 41));
        assert!(t.a_trans() && t.b_trans());
        // lda = 100 is not a multiple of 8, ldb = 41 neither: element loads for both.
        assert_eq!(t.flags & (flags::A_VEC | flags::B_VEC), 0);
        // An odd ldc, or a C base aligned only to one element, forbids pair stores.
        let odd = GemmParams::dense(0x1000, 0x2000, 0x3002, 0, 8, 8, 8, 0);
        assert_eq!(odd.flags & flags::C_VEC, 0);
        let f32_out = GemmParams::dense(0x1000, 0x2000, 0x3004, 0, 8, 8, 8, flags::OUT_F32 << flags::OUT_SHIFT);
        assert_eq!(f32_out.flags & flags::C_VEC, 0);
    }

    #[test]
    fn tile_shapes_agree_with_their_warps() {
        assert_eq!(
            (TILE_128X128.mi(), TILE_128X128.ni(), TILE_128X128.threads()),
            (4, 4, 256)
        );
        assert_eq!((TILE_64X64.mi(), TILE_64X64.ni(), TILE_64X64.threads()), (2, 4, 128));
        assert_eq!(TILE_128X128.smem_bytes(), 64 * 1024);
        assert_eq!(TILE_64X64.smem_bytes(), 32 * 1024);
        assert_eq!(
            (TILE_256X128.mi(), TILE_256X128.ni(), TILE_256X128.threads()),
            (4, 8, 256)
        );
        assert_eq!(TILE_256X128.smem_bytes(), 96 * 1024);
        assert_eq!(TILE_128X128.grid(129, 1), Grid::new(2, 1, 1));
        assert_eq!(TILE_64X64.k_steps(33), 2);
        assert!(!GemmTileShape { bk: 48, ..TILE_64X64 }.is_valid());
    }
}
