//! Tensor-core fragments: `ldmatrix` (shared -> registers) and `mma.sync.m16n8k16`
//! (bf16 or f16 inputs, f32 accumulators). Fragment layouts are PTX ISA's
//! ("Matrix fragments for mma.m16n8k16"): A is 4 x b32 (8 halves), B 2 x b32, C/D 4 x f32.

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: lanes 8i..8i+7 give the row addresses of
/// matrix i; each lane receives one b32 (two b16) of each of the four 8x8 matrices.
///
/// # Safety
/// `addr` is this lane's 16-byte aligned shared-window row address; the whole warp calls it.
#[inline(always)]
pub unsafe fn ldmatrix_x4(addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: see the contract; reads shared memory only.
    unsafe {
        core::arch::asm!(
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{}, {}, {}, {}}}, [{}];",
            out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg32) addr, options(nostack, readonly)
        )
    };
    [a, b, c, d]
}

/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: as [`ldmatrix_x4`], each matrix transposed.
///
/// # Safety
/// As for [`ldmatrix_x4`].
#[inline(always)]
pub unsafe fn ldmatrix_x4_trans(addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: see the contract; reads shared memory only.
    unsafe {
        core::arch::asm!(
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{}, {}, {}, {}}}, [{}];",
            out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg32) addr, options(nostack, readonly)
        )
    };
    [a, b, c, d]
}

/// `ldmatrix.sync.aligned.m8n8.x2.shared.b16`: two 8x8 matrices (row addresses from lanes 0..16).
///
/// # Safety
/// As for [`ldmatrix_x4`] (lanes 16..32 pass any valid address).
#[inline(always)]
pub unsafe fn ldmatrix_x2(addr: u32) -> [u32; 2] {
    let (a, b): (u32, u32);
    // SAFETY: see the contract; reads shared memory only.
    unsafe {
        core::arch::asm!(
            "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{{}, {}}}, [{}];",
            out(reg32) a, out(reg32) b, in(reg32) addr, options(nostack, readonly)
        )
    };
    [a, b]
}

macro_rules! mma_m16n8k16 {
    ($(#[$doc:meta])* $name:ident, $ty:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
            let mut d = c;
            // SAFETY: register-only tensor-core op; the whole warp executes it converged.
            unsafe {
                core::arch::asm!(
                    concat!("mma.sync.aligned.m16n8k16.row.col.f32.", $ty, ".", $ty, ".f32 ",
                            "{{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{0}, {1}, {2}, {3}}};"),
                    inout(reg32) d[0], inout(reg32) d[1], inout(reg32) d[2], inout(reg32) d[3],
                    in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
                    in(reg32) b[0], in(reg32) b[1],
                    options(pure, nomem, nostack)
                )
            };
            d
        }
    };
}

mma_m16n8k16!(
    /// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: D = A(16x16, row) x B(16x8, col) + C.
    mma_bf16_m16n8k16, "bf16"
);
mma_m16n8k16!(
    /// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`: D = A(16x16, row) x B(16x8, col) + C.
    mma_f16_m16n8k16, "f16"
);
