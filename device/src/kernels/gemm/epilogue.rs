//! The GeMM epilogue: bias, GeLU, conversion to the output type and guarded stores of a
//! warp's accumulators straight from registers.
//!
//! GeLU is the **tanh approximation** (Megatron-LM's `bias_gelu`, PyTorch's
//! `gelu(approximate="tanh")`): `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, computed as the
//! identical `x / (1 + exp(-2u))` with `ex2.approx.f32` (relative error ~2^-22) and an IEEE
//! division, so it is accurate to f32 rounding, not to `tanh.approx`'s 2^-11.

use super::mainloop::Acc;
use cusync_shared::gemm::{flags, GemmParams};

/// `ex2.approx.f32`: 2^x.
#[inline(always)]
fn ex2(x: f32) -> f32 {
    let y: f32;
    // SAFETY: register-only arithmetic.
    unsafe { core::arch::asm!("ex2.approx.f32 {}, {};", out(reg32) y, in(reg32) x, options(pure, nomem, nostack)) };
    y
}

/// `div.full.f32`: `x / y` to 2 ulp over the whole range, without the IEEE division's slow-path
/// subroutine (a call and a check per element in the SASS of the epilogue).
#[inline(always)]
fn div_full(x: f32, y: f32) -> f32 {
    let q: f32;
    // SAFETY: register-only arithmetic.
    unsafe {
        core::arch::asm!("div.full.f32 {}, {}, {};", out(reg32) q, in(reg32) x, in(reg32) y, options(pure, nomem, nostack))
    };
    q
}

/// GeLU, tanh approximation: `x * sigmoid(2u) = 0.5 x (1 + tanh(u))`, `u = sqrt(2/pi)(x + 0.044715 x^3)`.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    // -2 * sqrt(2/pi) * log2(e): exp(-2u) = 2^(C x (1 + 0.044715 x^2)).
    const C: f32 = -2.0 * 0.797_884_6 * core::f32::consts::LOG2_E;
    // 1 + 2^(..) overflows to +inf for very negative x: x / inf = -0, GeLU's limit.
    div_full(x, 1.0 + ex2(C * x * (1.0 + 0.044_715 * x * x)))
}

/// `cvt.rn.bf16x2.f32`: `lo` in bits 0..16, `hi` in bits 16..32, round to nearest even.
#[inline(always)]
fn pack_bf16x2(lo: f32, hi: f32) -> u32 {
    let r: u32;
    // SAFETY: register-only conversion (sm_80+); PTX puts the first source in the upper half.
    unsafe {
        core::arch::asm!("cvt.rn.bf16x2.f32 {}, {}, {};", out(reg32) r, in(reg32) hi, in(reg32) lo, options(pure, nomem, nostack))
    };
    r
}

/// `cvt.rn.f16x2.f32`: as [`pack_bf16x2`], to f16.
#[inline(always)]
fn pack_f16x2(lo: f32, hi: f32) -> u32 {
    let r: u32;
    // SAFETY: as for `pack_bf16x2`.
    unsafe {
        core::arch::asm!("cvt.rn.f16x2.f32 {}, {}, {};", out(reg32) r, in(reg32) hi, in(reg32) lo, options(pure, nomem, nostack))
    };
    r
}

/// Two f32 stored with one 8-byte store.
#[repr(C, align(8))]
struct F32x2([f32; 2]);

/// Stores `v0` at element `idx` of C and `v1` at `idx + 1` if `both` (else only `v0`), as the
/// output type `out`; `pair` allows one 2-element store (aligned, see [`flags::C_VEC`]).
///
/// # Safety
/// The elements stored lie inside C.
#[inline(always)]
pub(super) unsafe fn store_pair(c: u64, idx: usize, v0: f32, v1: f32, both: bool, out: u32, pair: bool) {
    if out == flags::OUT_F32 {
        let p = (c as *mut f32).wrapping_add(idx);
        // SAFETY: the caller's contract; `pair` means `p` is 8-byte aligned.
        unsafe {
            if both && pair {
                (p as *mut F32x2).write(F32x2([v0, v1]));
            } else {
                p.write(v0);
                if both {
                    p.add(1).write(v1);
                }
            }
        }
    } else {
        let w = if out == flags::OUT_F16 {
            pack_f16x2(v0, v1)
        } else {
            pack_bf16x2(v0, v1)
        };
        let p = (c as *mut u16).wrapping_add(idx);
        // SAFETY: the caller's contract; `pair` means `p` is 4-byte aligned.
        unsafe {
            if both && pair {
                (p as *mut u32).write(w);
            } else {
                p.write(w as u16);
                if both {
                    p.add(1).write((w >> 16) as u16);
                }
            }
        }
    }
}

/// Writes a warp's accumulators: tile `(i, j)` covers C rows `m_base + 16 i ..+16` and columns
/// `n_base + 8 j ..+8`; lane `4g + t` holds rows `g`, `g + 8` and columns `2t`, `2t + 1`
/// (PTX C/D fragment). Applies bias then GeLU per `p.flags`; skips elements outside M x N.
///
/// # Safety
/// `p` describes writable C (and readable bias when [`flags::BIAS`]).
#[inline(always)]
pub unsafe fn store_acc<const MI: usize, const NI: usize>(
    acc: &Acc<MI, NI>,
    p: &GemmParams,
    m_base: u32,
    n_base: u32,
    lane: u32,
) {
    unroll!(j < NI, {
        unroll!(i < MI, {
            // SAFETY: forwarded contract.
            unsafe { store_fragment(&acc[i][j], p, m_base + 16 * i as u32, n_base + 8 * j as u32, lane) };
        });
    });
}

/// As [`store_acc`] for one row of `G * NO` m16n8 tiles in `NO` groups of `G` (`G` 8, 4 or
/// 2, `NO` at most 8), the fragment of a `wgmma.m64nNk16` warp (`N = 8 G NO`): tile `j` covers
/// columns `n_base + 8 j ..+8`. The wide tiles pass groups of 8 (64 columns); the 96-column
/// tile three groups of 4; the 16-column tile one group of 2.
///
/// # Safety
/// As for [`store_acc`].
#[inline(always)]
pub unsafe fn store_acc_row<const NO: usize, const G: usize>(
    acc: &[[[f32; 4]; G]; NO],
    p: &GemmParams,
    m_base: u32,
    n_base: u32,
    lane: u32,
) {
    const { assert!((G == 8 || G == 4 || G == 2) && NO <= 8) };
    // Only the 64- and 16-column tiles (`NO == 1`, `G` 8 or 2) run swapped launches: the other
    // tiles' kernels carry no transposed-store code (it would add a third of their PTX).
    if NO == 1 && (G == 8 || G == 2) && p.flags & flags::C_TRANS != 0 {
        unroll!(jo < NO, {
            unroll!(ji < G, {
                let col = n_base + (8 * G) as u32 * jo as u32 + 8 * ji as u32;
                // SAFETY: forwarded contract.
                unsafe { store_fragment_transposed(&acc[jo][ji], p, m_base, col, lane) };
            });
        });
        return;
    }
    let out = p.out_type();
    let interior = m_base + 16 <= p.m && n_base + (8 * G * NO) as u32 <= p.n && p.flags & flags::C_VEC != 0;
    // The interior paths store whole groups of four blocks (16-byte stores); the 16-column
    // tile, which runs swapped, takes the guarded path below when it is not.
    if interior && out != flags::OUT_F32 && G >= 4 {
        let (bias, gelu) = (p.flags & flags::BIAS != 0, p.flags & flags::GELU != 0);
        // 16-byte stores when C's base and row pitch allow them (`n_base` is a multiple of 32),
        // without GeLU: GeLU's epilogue is bound by its arithmetic, and the transposes' shuffles
        // made GeMM1 B = 1024 (+GeLU) 2% slower (docs/perf-notes.md, session 26).
        if !gelu && p.c.is_multiple_of(16) && p.ldc.is_multiple_of(8) {
            // SAFETY: forwarded contract; inside C as below, and every row's 8-element groups
            // from `n_base` are 16-byte aligned (checked).
            unsafe {
                if out == flags::OUT_F16 {
                    store_row_interior_wide::<NO, G, true>(acc, p, m_base, n_base, lane, bias)
                } else {
                    store_row_interior_wide::<NO, G, false>(acc, p, m_base, n_base, lane, bias)
                }
            }
            return;
        }
        // SAFETY: forwarded contract; the warp's 16 rows and 8 G NO columns lie inside C, and
        // C_VEC makes every pair 4-byte aligned.
        unsafe {
            match (out == flags::OUT_F16, gelu) {
                (false, false) => store_row_interior::<NO, G, false, false>(acc, p, m_base, n_base, lane, bias),
                (false, true) => store_row_interior::<NO, G, false, true>(acc, p, m_base, n_base, lane, bias),
                (true, false) => store_row_interior::<NO, G, true, false>(acc, p, m_base, n_base, lane, bias),
                (true, true) => store_row_interior::<NO, G, true, true>(acc, p, m_base, n_base, lane, bias),
            }
        }
        return;
    }
    unroll!(jo < NO, {
        unroll!(ji < G, {
            let col = n_base + (8 * G) as u32 * jo as u32 + 8 * ji as u32;
            // SAFETY: forwarded contract.
            unsafe { store_fragment(&acc[jo][ji], p, m_base, col, lane) };
        });
    });
}

/// [`store_acc_row`] for a warp whose 16 rows and `8 G NO` columns all lie inside C, with a
/// 16-bit output (`F16`, else bf16) and pair-aligned C: GeLU chosen at compile time (the bias,
/// `has_bias`, by a warp-uniform branch) and no per-element guard, so each fragment is its arithmetic, one conversion and one 4-byte
/// store at a constant offset from the row's base. Same arithmetic, in the same order, as
/// [`store_fragment`] (results are bitwise those of the guarded path).
///
/// # Safety
/// As for [`store_acc`], and the rows `m_base..m_base + 16` and columns
/// `n_base..n_base + 8 G NO` are inside C, whose base and `ldc` allow 4-byte pair stores.
#[inline(always)]
unsafe fn store_row_interior<const NO: usize, const G: usize, const F16: bool, const GELU: bool>(
    acc: &[[[f32; 4]; G]; NO],
    p: &GemmParams,
    m_base: u32,
    n_base: u32,
    lane: u32,
    has_bias: bool,
) {
    let (g, t2) = (lane >> 2, (lane & 3) * 2);
    let col0 = n_base + t2;
    // Element offsets of this lane's first pair in its two rows (`g`, `g + 8`).
    let row_lo = (m_base + g) as usize * p.ldc as usize + col0 as usize;
    let row_hi = row_lo + 8 * p.ldc as usize;
    let c = p.c as *mut u16;
    let bias = (p.bias as *const f32).wrapping_add(col0 as usize);
    unroll!(jo < NO, {
        unroll!(ji < G, {
            let j = G * jo + ji;
            let frag = &acc[jo][ji];
            let (b0, b1) = if has_bias {
                // SAFETY: `bias` holds `n` floats; columns `col0 + 8 j`, `+1` are inside.
                unsafe { (*bias.add(8 * j), *bias.add(8 * j + 1)) }
            } else {
                (0.0, 0.0)
            };
            unroll!(h < 2, {
                let mut v0 = frag[2 * h] + b0;
                let mut v1 = frag[2 * h + 1] + b1;
                if GELU {
                    v0 = gelu_tanh(v0);
                    v1 = gelu_tanh(v1);
                }
                let w = if F16 { pack_f16x2(v0, v1) } else { pack_bf16x2(v0, v1) };
                let at = if h == 0 { row_lo } else { row_hi } + 8 * j;
                // SAFETY: inside C (the caller's contract), 4-byte aligned (C_VEC, even column).
                unsafe { (c.wrapping_add(at) as *mut u32).write(w) };
            });
        });
    });
}

/// Four 32-bit words stored with one 16-byte store.
#[repr(C, align(16))]
struct U32x4([u32; 4]);

/// Within each quad of lanes (`4g .. 4g + 4`), a 4 x 4 transpose of 32-bit words: lane `4g + t`
/// passes `w[k]`, its word of 8-column block `k`, and gets back block `t`'s four words in
/// column order (word `s` from lane `4g + s`). Two butterfly rounds of two shuffles; every lane
/// of the warp calls it.
#[inline(always)]
fn quad_transpose(w: [u32; 4], lane: u32) -> [u32; 4] {
    // Round 1 (lanes t, t ^ 2): swap the off-diagonal 2 x 2 blocks.
    let hi = lane & 2 != 0;
    let (s0, s1) = if hi { (w[0], w[1]) } else { (w[2], w[3]) };
    let (r0, r1) = (
        crate::ptx::barrier::shfl_xor(s0, 2),
        crate::ptx::barrier::shfl_xor(s1, 2),
    );
    let x = if hi { [r0, r1, w[2], w[3]] } else { [w[0], w[1], r0, r1] };
    // Round 2 (lanes t, t ^ 1): transpose within the 2 x 2 blocks.
    let odd = lane & 1 != 0;
    let (s0, s1) = if odd { (x[0], x[2]) } else { (x[1], x[3]) };
    let (r0, r1) = (
        crate::ptx::barrier::shfl_xor(s0, 1),
        crate::ptx::barrier::shfl_xor(s1, 1),
    );
    if odd {
        [r0, x[1], r1, x[3]]
    } else {
        [x[0], r0, x[2], r1]
    }
}

/// [`store_row_interior`] without GeLU, with 16-byte stores: each group of four 8-column blocks is
/// transposed within the quads ([`quad_transpose`]), so lane `4g + t` writes block `t`'s eight
/// consecutive elements of its row in one store (a warp's store covers 8 rows x 64 bytes, whole
/// 32-byte sectors, instead of 8 rows x 16 bytes). Same arithmetic, in the same order: the
/// results are bitwise those of [`store_row_interior`].
///
/// # Safety
/// As for [`store_row_interior`], and C's base is 16-byte aligned and `ldc` a multiple of 8.
#[inline(always)]
unsafe fn store_row_interior_wide<const NO: usize, const G: usize, const F16: bool>(
    acc: &[[[f32; 4]; G]; NO],
    p: &GemmParams,
    m_base: u32,
    n_base: u32,
    lane: u32,
    has_bias: bool,
) {
    let (g, t) = (lane >> 2, lane & 3);
    let col0 = n_base + 2 * t;
    let row_lo = (m_base + g) as usize * p.ldc as usize + n_base as usize;
    let row_hi = row_lo + 8 * p.ldc as usize;
    let c = p.c as *mut u16;
    let bias = (p.bias as *const f32).wrapping_add(col0 as usize);
    unroll!(jo < NO, {
        unroll!(q < G / 4, {
            let (mut lo, mut hi) = ([0u32; 4], [0u32; 4]);
            unroll!(k < 4, {
                let j = G * jo + 4 * q + k;
                let frag = &acc[jo][4 * q + k];
                let (b0, b1) = if has_bias {
                    // SAFETY: `bias` holds `n` floats; columns `col0 + 8 j`, `+1` are inside.
                    unsafe { (*bias.add(8 * j), *bias.add(8 * j + 1)) }
                } else {
                    (0.0, 0.0)
                };
                unroll!(h < 2, {
                    let (v0, v1) = (frag[2 * h] + b0, frag[2 * h + 1] + b1);
                    let w = if F16 { pack_f16x2(v0, v1) } else { pack_bf16x2(v0, v1) };
                    if h == 0 {
                        lo[k] = w;
                    } else {
                        hi[k] = w;
                    }
                });
            });
            // This lane's block of the four: columns `8 (G jo + 4 q + t)` from `n_base`.
            let block = 8 * (G * jo + 4 * q) + 8 * t as usize;
            let (lo, hi) = (quad_transpose(lo, lane), quad_transpose(hi, lane));
            // SAFETY: inside C (the caller's contract); 16-byte aligned (C's base, `ldc` a
            // multiple of 8, `n_base` and `block` multiples of 8 elements).
            unsafe {
                (c.wrapping_add(row_lo + block) as *mut U32x4).write(U32x4(lo));
                (c.wrapping_add(row_hi + block) as *mut U32x4).write(U32x4(hi));
            }
        });
    });
}

/// Stores `v` at element `idx` of C as the output type `out`.
///
/// # Safety
/// Element `idx` lies inside C.
#[inline(always)]
unsafe fn store_one(c: u64, idx: usize, v: f32, out: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        if out == flags::OUT_F32 {
            (c as *mut f32).wrapping_add(idx).write(v);
        } else {
            let w = if out == flags::OUT_F16 {
                pack_f16x2(v, 0.0)
            } else {
                pack_bf16x2(v, 0.0)
            };
            (c as *mut u16).wrapping_add(idx).write(w as u16);
        }
    }
}

/// As [`store_fragment`] for a C stored transposed ([`flags::C_TRANS`]: element `(row, col)`
/// at `col * ldc + row`, the bias one per row), the epilogue of a swapped product
/// (`GemmParams::swap_ab`). The eight lanes of a column write eight consecutive elements.
/// Same arithmetic, in the same order, as the other paths: `acc + bias`, then GeLU.
///
/// # Safety
/// As for [`store_acc`] (the bias holds `m` floats).
#[inline(always)]
unsafe fn store_fragment_transposed(frag: &[f32; 4], p: &GemmParams, row0: u32, col0: u32, lane: u32) {
    let out = p.out_type();
    let has_bias = p.flags & flags::BIAS != 0;
    let gelu = p.flags & flags::GELU != 0;
    let (g, t2) = (lane >> 2, (lane & 3) * 2);
    let col = col0 + t2;
    if col >= p.n {
        return;
    }
    let both = col + 1 < p.n;
    unroll!(h < 2, {
        let row = row0 + 8 * h as u32 + g;
        if row < p.m {
            let b = if has_bias {
                // SAFETY: the bias holds `m` floats (one per row of the stored C's columns) and `row < m`.
                unsafe { *(p.bias as *const f32).add(row as usize) }
            } else {
                0.0
            };
            let mut v0 = frag[2 * h] + b;
            let mut v1 = frag[2 * h + 1] + b;
            if gelu {
                v0 = gelu_tanh(v0);
                v1 = gelu_tanh(v1);
            }
            let idx = col as usize * p.ldc as usize + row as usize;
            // SAFETY: `row < m` and `col < n` (`col + 1 < n` for the second): inside the
            // `[n, ldc]` storage of the transposed C.
            unsafe {
                store_one(p.c, idx, v0, out);
                if both {
                    store_one(p.c, idx + p.ldc as usize, v1, out);
                }
            }
        }
    });
}

/// Writes one m16n8 C fragment whose tile starts at row `row0`, column `col0`.
///
/// # Safety
/// As for [`store_acc`].
#[inline(always)]
unsafe fn store_fragment(frag: &[f32; 4], p: &GemmParams, row0: u32, col0: u32, lane: u32) {
    let out = p.out_type();
    let has_bias = p.flags & flags::BIAS != 0;
    let gelu = p.flags & flags::GELU != 0;
    let pair = p.flags & flags::C_VEC != 0;
    let (g, t2) = (lane >> 2, (lane & 3) * 2);
    let bias = p.bias as *const f32;
    let col = col0 + t2;
    if col < p.n {
        let both = col + 1 < p.n;
        let (b0, b1) = if has_bias {
            // SAFETY: `bias` holds `n` floats and `col < n` (`col + 1 < n` for the second).
            unsafe {
                (
                    *bias.add(col as usize),
                    if both { *bias.add(col as usize + 1) } else { 0.0 },
                )
            }
        } else {
            (0.0, 0.0)
        };
        unroll!(h < 2, {
            let row = row0 + 8 * h as u32 + g;
            if row < p.m {
                let mut v0 = frag[2 * h] + b0;
                let mut v1 = frag[2 * h + 1] + b1;
                if gelu {
                    v0 = gelu_tanh(v0);
                    v1 = gelu_tanh(v1);
                }
                let idx = row as usize * p.ldc as usize + col as usize;
                // SAFETY: `row < m`, `col < n` (`col + 1 < n` when `both`): inside C.
                unsafe { store_pair(p.c, idx, v0, v1, both, out, pair) };
            }
        });
    }
}
