//! The skinny GeMM (`M <= 64`, sm_80+): `C[M,N] = epilogue(A[M,K] B[K,N])` for the MLP's small
//! batches, where streaming `B` once is the whole cost. The decomposition (column blocks,
//! chunks, one balanced range per block, partial slots, last-arrival sums) is
//! `cusync_shared::skinny`'s; this file is the warp's arithmetic.
//!
//! **A per-warp ring, no block pipeline.** Lane `4g + t` of a warp needs, per K unit, `R` rows
//! of `B` (rows `k0 + R t .. + R`) at its 8 columns of each of the column block's `CV` 64-column
//! vectors (`n0 + 64 c + 8 g ..+8`). The warp copies them as `R CV` 16-byte `cp.async.cg`
//! copies a lane (L1 bypassed) into its slots of a shared-memory ring, `NB` units ahead, one commit group per unit; it waits
//! for its oldest group, the warp synchronizes, and each lane reads its unit back into
//! registers (consecutive lanes copy consecutive bytes: see `Ring`). No block barrier, no
//! mbarrier. (Session 12 loaded `B` straight into registers; the registers held only ~96 KiB
//! in flight a block, and the read probe streamed 128-byte runs at 0.78 of 4.3 TB/s that way
//! against 0.87 through `cp.async`: docs/perf-notes.md, session 14. With the ring aligned,
//! session 15 measured this kernel at 0.88-0.90x cuBLAS at B = 1-16, and 0.0462 ms against the
//! register kernel's 0.0467 ms at B = 1 in the same run: the weight still streams at 0.76 of
//! the floor, against the probe's 0.87.)
//! With `CV = 2` a row of the column block is one 256-byte run. An `mma.sync.m16n8k16` wants
//! each lane's B values in pairs along K at one column; the warp gets them with byte permutes, because the MMA
//! lets any permutation of K (the same for A) and of N (undone at the store) through:
//!
//! * MMA `h` (`R / 4` of them a unit) maps its K slots `2t, 2t+1, 2t+8, 2t+9` to rows
//!   `R t + 4h + 0, 1, 2, 3`, so lane `(g, t)` holds all four of its rows;
//! * MMA `(c, j)` (8 along N per vector `c`) maps column slot `g` to column `n0 + 64 c + 8 g + j`:
//!   word `j / 2` of the lane's 16-byte vectors of `c`, low or high half.
//!
//! A (the activations, small and read by every block: L1-cached loads) is loaded the same way,
//! `R` consecutive K elements of rows `16 i + g` and `16 i + g + 8` per lane, which are exactly
//! the A fragments of those K slots. The 8 warps of a block take the 8 K units of a chunk; at
//! the end of a column block's segment they add their accumulators in shared memory in warp
//! order, and the block stores the tile or its partial (module docs of `cusync_shared::skinny`).

use super::epilogue::{gelu_tanh, store_pair};
use super::mainloop::InputElem;
use crate::ptx::{atomics, barrier, copy, fence, global, ids, smem, time};
use crate::stage::{NoHooks, SkinnyHooks};
use crate::stream::StreamStage;
use cusync_shared::gemm::{flags, GemmParams};
use cusync_shared::layout::StageDesc;
use cusync_shared::skinny::{
    SkinnyArgs, SkinnyPlan, SkinnySegment, SkinnyShape, SKINNY_STAGE_SHAPE, SKINNY_THREADS, SKINNY_VECTOR_COLS,
    SKINNY_WARPS,
};

/// The shape of the kernel with `MT` `m16` tiles and `CV` column vectors.
const fn shape(mt: usize, cv: usize) -> SkinnyShape {
    SkinnyShape {
        m_tiles: mt as u32,
        col_vectors: cv as u32,
    }
}

/// `prmt.b32 d, a, b, sel`: byte permute of the pair `(b:a)`.
#[inline(always)]
fn prmt(a: u32, b: u32, sel: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only arithmetic.
    unsafe {
        core::arch::asm!("prmt.b32 {}, {}, {}, {};", out(reg32) d, in(reg32) a, in(reg32) b, in(reg32) sel,
                         options(pure, nomem, nostack))
    };
    d
}

/// The streaming load of `B`: not allocated in L1 where the PTX ISA has the hint (7.4+, the
/// sm_90a build); the sm_80 build's PTX 7.0 gets the plain non-coherent load.
#[cfg(target_feature = "sm_90a")]
macro_rules! ld_stream_op {
    () => {
        "ld.global.nc.L1::no_allocate.v4.u32"
    };
}
#[cfg(not(target_feature = "sm_90a"))]
macro_rules! ld_stream_op {
    () => {
        "ld.global.nc.v4.u32"
    };
}

/// Defines `$name(p, pred) -> [u32; 4]`: 16 bytes at `p` when `pred`, else zeros, loaded with
/// `$op` (a predicated `ld.global` of four words).
macro_rules! predicated_ld_v4 {
    ($(#[$doc:meta])* $name:ident, $op:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// When `pred`, `p` is a 16-byte aligned global address of 16 readable bytes that no
        /// thread writes during the launch.
        #[inline(always)]
        pub(crate) unsafe fn $name(p: *const u32, pred: bool) -> [u32; 4] {
            let (a, b, c, d): (u32, u32, u32, u32);
            // SAFETY: see the contract; the load is predicated off otherwise.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred q; .reg .u64 g; setp.ne.u32 q, {pr}, 0; cvta.to.global.u64 g, {p};",
                    "mov.b32 {a}, 0; mov.b32 {b}, 0; mov.b32 {c}, 0; mov.b32 {d}, 0;",
                    concat!("@q ", $op, " {{{a}, {b}, {c}, {d}}}, [g]; }}"),
                    p = in(reg64) p, pr = in(reg32) pred as u32,
                    a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                    options(nostack, readonly)
                )
            };
            [a, b, c, d]
        }
    };
}

predicated_ld_v4!(
    /// 16 bytes of `B` (the weight, streamed once: kept out of L1 where the ISA allows).
    ld_stream_v4,
    ld_stream_op!()
);
predicated_ld_v4!(
    /// 16 bytes of `A` (read by every block: L1-cached).
    ld_nc_v4,
    "ld.global.nc.v4.u32"
);
predicated_ld_v4!(
    /// 16 bytes of `A` written while the launch runs (a stream-mode consumer's input: through
    /// L2, after the stage's wait).
    ld_cg_v4,
    "ld.global.cg.v4.u32"
);

/// Defines `$name(p, pred) -> [u32; 2]`: 8 bytes at `p` when `pred`, else zeros, loaded with
/// `$op` (a predicated `ld.global` of two words).
macro_rules! predicated_ld_v2 {
    ($(#[$doc:meta])* $name:ident, $op:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// When `pred`, `p` is an 8-byte aligned global address of 8 readable bytes that no
        /// thread writes during the launch (or that were published to this thread before the load).
        #[inline(always)]
        unsafe fn $name(p: *const u32, pred: bool) -> [u32; 2] {
            let (a, b): (u32, u32);
            // SAFETY: see the contract; the load is predicated off otherwise.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred q; .reg .u64 g; setp.ne.u32 q, {pr}, 0; cvta.to.global.u64 g, {p};",
                    "mov.b32 {a}, 0; mov.b32 {b}, 0;",
                    concat!("@q ", $op, " {{{a}, {b}}}, [g]; }}"),
                    p = in(reg64) p, pr = in(reg32) pred as u32,
                    a = out(reg32) a, b = out(reg32) b,
                    options(nostack, readonly)
                )
            };
            [a, b]
        }
    };
}

predicated_ld_v2!(
    /// 8 bytes of `A` (L1-cached).
    ld_nc_v2,
    "ld.global.nc.v2.u32"
);
predicated_ld_v2!(
    /// 8 bytes of `A` written while the launch runs (through L2).
    ld_cg_v2,
    "ld.global.cg.v2.u32"
);

/// `W` words (2 or 4) of `A` at `p` when `pred`, else zeros: `ld.global.nc.v2/v4.u32`, or
/// `ld.global.cg.v2/v4.u32` when `coherent` (A is written while the launch runs; a constant
/// after inlining).
///
/// # Safety
/// When `pred`, `p` is a `4 W`-byte aligned global address of readable bytes that no thread
/// writes during the launch (or, when `coherent`, that were published to this thread before
/// the load).
#[inline(always)]
unsafe fn ld_a<const W: usize>(p: *const u32, pred: bool, coherent: bool) -> [u32; W] {
    // SAFETY (every arm): forwarded contract.
    let v = match (W == 4, coherent) {
        (true, true) => unsafe { ld_cg_v4(p, pred) },
        (true, false) => unsafe { ld_nc_v4(p, pred) },
        (false, true) => {
            let [a, b] = unsafe { ld_cg_v2(p, pred) };
            [a, b, 0, 0]
        }
        (false, false) => {
            let [a, b] = unsafe { ld_nc_v2(p, pred) };
            [a, b, 0, 0]
        }
    };
    let mut r = [0u32; W];
    unroll!(i < W, {
        r[i] = v[i & 3];
    });
    r
}

/// One K unit's `B` in registers (read back from the ring just before its MMAs): `R` 16-byte
/// vectors per column vector.
type UnitB<const R: usize, const CV: usize> = [[[u32; 4]; R]; CV];

/// One K unit's `A` in flight in registers: per `m16` tile, `R / 2` words of A for each of the
/// lane's two rows. `XW` is `R / 2`.
#[derive(Clone, Copy)]
struct UnitA<const MT: usize, const XW: usize> {
    a: [[[u32; XW]; 2]; MT],
}

impl<const MT: usize, const XW: usize> UnitA<MT, XW> {
    const ZERO: Self = Self {
        a: [[[0u32; XW]; 2]; MT],
    };
}

/// A warp's slots of the block's weight ring in shared memory. Stage `s` holds one K unit of
/// every warp; vector `(c, r)` of the unit (row `r` of each lane group's rows, column vector
/// `c`) is 512 bytes at `warp_base + s stage_bytes + 512 (R c + r)`, one 16-byte slot per lane.
///
/// **Copies by consecutive lanes.** The MMA's lane `4 g + t` needs row `R t + r` at columns
/// `8 g ..+8`. Lane `L = 8 t + i` copies `(i ^ 2 t, t)`'s vector (the 8 lanes of a quarter warp
/// on one 128-byte run, in 32-byte pairs) into slot `L` (consecutive lanes, consecutive slots:
/// a copy instruction writes 512 contiguous bytes of the 1024-byte aligned ring), and lane
/// `4 g + t` reads it back from slot `8 t + (g ^ 2 t)`. The XOR keeps the reads' quarter warps
/// (`g` in `{2p, 2p+1}`, every `t`) on 8 different 16-byte bank groups. A lane reads slots other
/// lanes copied, so the warp synchronizes after its wait and before a stage's refill. (Session
/// 14 blamed the lane order for every weight sector reaching L2 twice; session 15 found the
/// cause in the ring's alignment: [`cusync_shared::skinny::SkinnyShape::ring_offset`].)
#[derive(Clone, Copy)]
struct Ring {
    warp_base: u32,
    stage_bytes: u32,
    /// The lane's copy: its lane group and row within the group (`L % 8`, `L / 8`).
    copy_g: u32,
    copy_t: u32,
    /// Byte offset of the lane's copy slot within a 512-byte vector.
    copy_at: u32,
    /// Byte offset of the slot the lane reads back (its own `(g, t)`'s).
    read_at: u32,
}

impl Ring {
    /// The ring at shared address `base` (stages of `stage_bytes`), for `lane`.
    #[inline(always)]
    fn new<const R: usize, const CV: usize>(base: u32, stage_bytes: u32, lane: &Lane) -> Self {
        let lane_id = 4 * lane.g + lane.t;
        // Lane `8 t + i` copies `(i ^ 2 t, t)`'s vector into slot `8 t + i`: its own.
        let copy_t = lane_id / 8;
        let copy_g = (lane_id % 8) ^ (2 * copy_t);
        Self {
            warp_base: base + lane.warp * (R * CV) as u32 * 512,
            stage_bytes,
            copy_g,
            copy_t,
            copy_at: 16 * lane_id,
            read_at: 16 * (8 * lane.t + (lane.g ^ (2 * lane.t))),
        }
    }

    /// The shared address of vector `(c, r)` of stage `s`, plus `at`.
    #[inline(always)]
    fn vector<const R: usize>(&self, s: usize, c: usize, r: usize, at: u32) -> u32 {
        self.warp_base + s as u32 * self.stage_bytes + 512 * (R * c + r) as u32 + at
    }
}

/// Waits until at most `NB - 1` of the thread's `cp.async` groups are in flight: the oldest of
/// `NB` ring stages has landed.
#[inline(always)]
fn wait_ring<const NB: usize>() {
    match NB {
        1 => copy::wait_group::<0>(),
        2 => copy::wait_group::<1>(),
        3 => copy::wait_group::<2>(),
        4 => copy::wait_group::<3>(),
        5 => copy::wait_group::<4>(),
        6 => copy::wait_group::<5>(),
        _ => copy::wait_all(),
    }
}

/// A warp's accumulators: `acc[i][c][j]`, `m16` tile `i`, MMA `j` of column vector `c` (column
/// slot `g` is column `64 c + 8 g + j`).
type Acc<const MT: usize, const CV: usize> = [[[[f32; 4]; 8]; CV]; MT];

/// A lane's place in the block: lane `4 g + t` of warp `warp`. It loads columns `8 g ..+8` of
/// a column block and rows `R t ..+R` of a K unit of B, and A rows `g` and `g + 8` of each
/// `m16` tile.
struct Lane {
    /// The lane's group (`lane / 4`): its columns, its A rows, its MMA column slot.
    g: u32,
    /// The lane within its group (`lane % 4`): its rows of a K unit, its MMA K slots.
    t: u32,
    /// The warp's index in the block (its K unit within each chunk).
    warp: u32,
}

/// The first K row of the lane's part of K unit `chunk * 8 + warp` of a column block.
#[inline(always)]
const fn unit_k0<const R: usize>(lane: &Lane, chunk: u32) -> u32 {
    (chunk * SKINNY_WARPS + lane.warp) * (4 * R as u32) + R as u32 * lane.t
}

/// Copies the lane's share of the `B` part of K unit `chunk * 8 + warp` (the warp's unit of
/// chunk `chunk`) of column block `n0 / 64` into ring stage `stage` with `cp.async`, when `live`
/// (nothing otherwise); vectors outside `B` are zero-filled. The caller commits the group.
///
/// # Safety
/// `p` describes the launch's readable B (row-major, 16-byte aligned, `ldb`, `K` multiples of
/// 8); no lane of the warp still reads the stage (every lane's last read of it is ordered
/// before this call: `sync_warp` after the reads).
#[inline(always)]
unsafe fn issue_b<const R: usize, const CV: usize>(
    p: &GemmParams,
    lane: &Lane,
    ring: &Ring,
    stage: usize,
    n0: u32,
    chunk: u32,
    live: bool,
) {
    if !live {
        return;
    }
    // The lane copies for `(ring.copy_g, ring.copy_t)` ([`Ring`]).
    let copier = Lane {
        g: ring.copy_g,
        t: ring.copy_t,
        warp: lane.warp,
    };
    let k0 = unit_k0::<R>(&copier, chunk);
    let b = p.b as *const u16;
    // A row's vectors back to back: the CV copies of row r read one run of 128 CV bytes.
    unroll!(r < R, {
        unroll!(c < CV, {
            let col = n0 + SKINNY_VECTOR_COLS * c as u32 + 8 * copier.g;
            // K and N are multiples of 8: a lane's R rows are all inside K or all outside, its
            // 8 columns all inside N or all outside.
            let ok_b = k0 < p.k && col < p.n;
            let at = (k0 + r as u32) as usize * p.ldb as usize + col as usize;
            // SAFETY: inside B when `ok_b` (the caller's contract), 16-byte aligned (ldb and col
            // multiples of 8 elements); otherwise 0 source bytes: nothing read, zeros written.
            // The warp's stage is not being read (the caller's contract).
            unsafe {
                copy::cp_async_16(
                    ring.vector::<R>(stage, c, r, ring.copy_at),
                    b.wrapping_add(at) as *const u8,
                    16 * ok_b as u32,
                )
            };
        });
    });
}

/// Reads the lane's `B` vectors of ring stage `stage` back into registers.
///
/// # Safety
/// The stage's copies of every lane of the warp have landed and are ordered before this read
/// (each lane's `wait_ring`, then `sync_warp`).
#[inline(always)]
unsafe fn read_b<const R: usize, const CV: usize>(ring: &Ring, stage: usize) -> UnitB<R, CV> {
    let mut b = [[[0u32; 4]; R]; CV];
    unroll!(r < R, {
        unroll!(c < CV, {
            // SAFETY: the lane's slot of the warp's stage, its copy complete and ordered (the
            // caller's contract).
            b[c][r] = unsafe { smem::ld_v4_u32(ring.vector::<R>(stage, c, r, ring.read_at)) };
        });
    });
    b
}

/// Loads the `A` part of the same unit into `u` (through L2 when `coherent`).
///
/// # Safety
/// `p` describes the launch's readable A (row-major, 16-byte aligned, `lda`, `K` multiples of
/// 8); when `coherent`, the K range was published to this thread (the stage's wait).
#[inline(always)]
unsafe fn load_a<const R: usize, const MT: usize, const XW: usize>(
    p: &GemmParams,
    lane: &Lane,
    chunk: u32,
    live: bool,
    coherent: bool,
    u: &mut UnitA<MT, XW>,
) {
    let k0 = unit_k0::<R>(lane, chunk);
    let a = p.a as *const u16;
    let ok_k = live && k0 < p.k;
    unroll!(i < MT, {
        unroll!(h < 2, {
            let row = 16 * i as u32 + lane.g + 8 * h as u32;
            let at = row as usize * p.lda as usize + k0 as usize;
            // SAFETY: inside A when the row and the K range are (the caller's contract);
            // aligned to 2 R bytes (lda and k0 multiples of R).
            u.a[i][h] = unsafe { ld_a::<XW>(a.wrapping_add(at) as *const u32, ok_k && row < p.m, coherent) };
        });
    });
}

/// Adds one K unit's products to the warp's accumulators ([`Acc`]).
#[inline(always)]
fn mma_unit<E: InputElem, const R: usize, const MT: usize, const XW: usize, const CV: usize>(
    b: &UnitB<R, CV>,
    u: &UnitA<MT, XW>,
    acc: &mut Acc<MT, CV>,
) {
    unroll!(h < 2, {
        if h < R / 4 {
            unroll!(c < CV, {
                unroll!(j < 8, {
                    let (word, sel) = (j / 2, if j & 1 == 0 { 0x5410 } else { 0x7632 });
                    let v = &b[c];
                    let bf = [
                        prmt(v[4 * h][word], v[4 * h + 1][word], sel),
                        prmt(v[4 * h + 2][word], v[4 * h + 3][word], sel),
                    ];
                    unroll!(i < MT, {
                        let af = [
                            u.a[i][0][2 * h],
                            u.a[i][1][2 * h],
                            u.a[i][0][2 * h + 1],
                            u.a[i][1][2 * h + 1],
                        ];
                        acc[i][c][j] = E::mma(af, bf, acc[i][c][j]);
                    });
                });
            });
        }
    });
}

/// The skinny GeMM kernel body: `MT` `m16` tiles (`M <= 16 MT`), `CV` 64-column vectors per
/// column block, `R` rows of B per lane and K unit, `NB` K units in flight per warp, `XW = R / 2`.
///
/// Each column-block segment of the block's range is streamed with `NB` K units in flight per
/// warp (ring stage `b` and A buffer `b` holding chunk `c + b`); a segment's main loop stops
/// loading at its end, and
/// the next segment's first `NB` weight units are issued before the finished one is reduced
/// and stored. Measured (docs/perf-notes.md): letting every load run on across column blocks
/// made the launch ~15% slower (session 12); issuing the next segment's first units early is
/// neutral on the plain kernels (-0.2% against stopping, within the noise; session 13, run 2)
/// and keeps the stream-mode stage free of spills (the stopping loop spilled 84 bytes there).
///
/// The stage's hooks ([`SkinnyHooks`]) give the block its range, wait before a segment's A
/// loads (issued after the segment's first `B` loads: optimization R) and post each column
/// block its sole contributor or last arrival stored; [`crate::stage::NoHooks`] compiles them
/// out (the range is `blockIdx.x`).
///
/// # Safety
/// Launched by the host's `SkinnyGemm` (or its stream-mode stage) with [`SKINNY_THREADS`]
/// threads, the grid `args.ctas`, the shape's `smem_bytes` of dynamic shared memory, and `p`,
/// `args` describing live buffers: A `[M, K]` and B `[K, N]` row-major, 16-byte aligned, `lda`,
/// `ldb`, `K`, `N` multiples of 8, `M <= 16 MT`; the workspace and the zeroed counters of
/// `args`' plan. Launches sharing a workspace do not overlap.
#[inline(always)]
pub unsafe fn skinny_gemm<
    E: InputElem,
    H: SkinnyHooks,
    const MT: usize,
    const CV: usize,
    const R: usize,
    const XW: usize,
    const NB: usize,
>(
    p: &GemmParams,
    args: &SkinnyArgs,
    hooks: &mut H,
) {
    let plan = SkinnyPlan::from_args(args);
    // SAFETY: every thread calls it, once.
    let Some(cta) = (unsafe { hooks.range(plan.ctas) }) else {
        return;
    };
    let tid = ids::thread_linear();
    let lane_id = tid % 32;
    let lane = Lane {
        g: lane_id / 4,
        t: lane_id % 4,
        warp: tid / 32,
    };
    // The reduction area and the last-arrival flag, as shared-window addresses (`STS`/`LDS`,
    // not the generic path).
    let red = smem::dynamic_addr();
    let flag = red + shape(MT, CV).flag_offset();
    let (mut at, end) = plan.range(cta);
    if at >= end {
        return;
    }
    let (cols, chunk_rows) = (shape(MT, CV).cols(), SKINNY_WARPS * 4 * R as u32);
    let mut seg = plan.segment(cta, at);
    at += (seg.end - seg.begin) as u64;
    // NB units in flight: ring stage b (and A buffer b) holds chunk `c + b` of the segment.
    // Every stage's copies are one `cp.async` group, committed even when empty, so the oldest
    // stage has landed when at most NB - 1 groups are in flight.
    let ring = Ring::new::<R, CV>(
        smem::dynamic_addr() + shape(MT, CV).ring_offset(),
        shape(MT, CV).ring_stage_bytes(),
        &lane,
    );
    let mut abufs = [UnitA::<MT, XW>::ZERO; NB];
    // The weight's first units before the wait on A (optimization R), A's after it.
    // SAFETY: the kernel's contract; the ring is unread.
    unsafe { issue_first_b::<R, CV, NB>(p, &lane, &ring, &seg, cols) };
    loop {
        let k_end = (seg.end * chunk_rows).min(p.k);
        // SAFETY: every thread calls it.
        if !unsafe { hooks.wait_k(seg.col_block, seg.begin * chunk_rows, k_end) } {
            // No copy may still be landing in shared memory when the block exits.
            copy::wait_all();
            return;
        }
        // A traced segment's main loop starts after its wait.
        let t_start = if hooks.traced() { time::global_timer_ns() } else { 0 };
        unroll!(b < NB, {
            let chunk = seg.begin + b as u32;
            // SAFETY: the kernel's contract; the stage's wait published A's K range.
            unsafe { load_a::<R, MT, XW>(p, &lane, chunk, chunk < seg.end, H::A_IN_FLIGHT, &mut abufs[b]) };
        });
        let n0 = seg.col_block * cols;
        let mut acc: Acc<MT, CV> = [[[[0f32; 4]; 8]; CV]; MT];
        let mut c = seg.begin;
        while c < seg.end {
            unroll!(b < NB, {
                let chunk = c + b as u32;
                if chunk < seg.end {
                    // Every lane's copies of stage b have landed, and the warp's are ordered
                    // before its reads.
                    wait_ring::<NB>();
                    barrier::sync_warp();
                    // SAFETY: as just said.
                    let ub = unsafe { read_b::<R, CV>(&ring, b) };
                    mma_unit::<E, R, MT, XW, CV>(&ub, &abufs[b], &mut acc);
                    // Every lane's reads of stage b come before any lane's refill of it.
                    barrier::sync_warp();
                    let (next, live) = (chunk + NB as u32, chunk + (NB as u32) < seg.end);
                    // SAFETY: as above; no lane reads stage b any more.
                    unsafe {
                        issue_b::<R, CV>(p, &lane, &ring, b, n0, next, live);
                        copy::commit_group();
                        load_a::<R, MT, XW>(p, &lane, next, live, H::A_IN_FLIGHT, &mut abufs[b]);
                    }
                }
            });
            c += NB as u32;
        }
        // The next segment's first weight units go out before this one's reduction and
        // stores, which then run under their latency instead of the pipeline draining.
        let next = if at < end {
            let ns = plan.segment(cta, at);
            at += (ns.end - ns.begin) as u64;
            // SAFETY: as above; every stage of the ring was read (the segment's last NB chunks).
            unsafe { issue_first_b::<R, CV, NB>(p, &lane, &ring, &ns, cols) };
            Some(ns)
        } else {
            None
        };
        // SAFETY: the kernel's contract (shared memory and buffers).
        unsafe { finish_segment::<MT, CV, H>(p, args, &plan, &seg, cta, &acc, &lane, red, flag, hooks, t_start) };
        match next {
            Some(ns) => seg = ns,
            None => return,
        }
    }
}

/// Copies the `B` parts of segment `seg`'s first `NB` units into ring stages `0..NB` (column
/// blocks of `cols`), one committed group per stage (empty past the segment's end).
///
/// # Safety
/// As for [`issue_b`], for every stage.
#[inline(always)]
unsafe fn issue_first_b<const R: usize, const CV: usize, const NB: usize>(
    p: &GemmParams,
    lane: &Lane,
    ring: &Ring,
    seg: &SkinnySegment,
    cols: u32,
) {
    unroll!(b < NB, {
        let chunk = seg.begin + b as u32;
        // SAFETY: forwarded contract.
        unsafe { issue_b::<R, CV>(p, lane, ring, b, seg.col_block * cols, chunk, chunk < seg.end) };
        copy::commit_group();
    });
}

/// The end of a segment: the warps' accumulators added in shared memory in warp order, then
/// the column block stored (sole contributor), or this block's partial written to its slot and
/// counted, the last arrival summing every contributor's slot in order and storing.
///
/// # Safety
/// As for [`skinny_gemm`]; every thread of the block calls it.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn finish_segment<const MT: usize, const CV: usize, H: SkinnyHooks>(
    p: &GemmParams,
    args: &SkinnyArgs,
    plan: &SkinnyPlan,
    seg: &SkinnySegment,
    cta: u32,
    acc: &Acc<MT, CV>,
    lane: &Lane,
    red: u32,
    flag: u32,
    hooks: &mut H,
    t_start: u64,
) {
    let stride = shape(MT, CV).red_stride() as usize;
    let warp_base = red + 4 * (lane.warp as usize * 16 * MT * stride) as u32;
    // The previous segment's readers are done with the area.
    barrier::sync_threads();
    unroll!(i < MT, {
        unroll!(c < CV, {
            unroll!(j < 8, {
                unroll!(e < 4, {
                    let row = 16 * i + lane.g as usize + 8 * (e / 2);
                    let col = SKINNY_VECTOR_COLS as usize * c + 16 * lane.t as usize + 8 * (e % 2) + j;
                    // SAFETY: inside this warp's part of the reduction area (the launch's
                    // `smem_bytes`).
                    unsafe { smem::st_f32(warp_base + 4 * (row * stride + col) as u32, acc[i][c][j][e]) };
                });
            });
        });
    });
    barrier::sync_threads();
    // Each thread owns `MT CV` quads of the 16 MT x 64 CV tile ([`quad_at`]).
    let tid = ids::thread_linear();
    let mut quads: Quads<MT, CV> = [[[0f32; 4]; CV]; MT];
    unroll!(i < MT, {
        unroll!(c < CV, {
            let (row, col) = quad_at::<CV>(tid, i, c);
            let mut v = [0f32; 4];
            let mut w = 0;
            while w < SKINNY_WARPS as usize {
                let src = red + 4 * ((w * 16 * MT + row as usize) * stride + col as usize) as u32;
                // SAFETY: inside the reduction area, 16-byte aligned (stride and col multiples
                // of 4), written before the barrier.
                let q = unsafe { smem::ld_v4_u32(src) };
                unroll!(x < 4, {
                    v[x] += f32::from_bits(q[x]);
                });
                w += 1;
            }
            quads[i][c] = v;
        });
    });
    let n0 = seg.col_block * shape(MT, CV).cols();
    if seg.contributors() == 1 {
        // SAFETY: the kernel's contract; every thread stores, then posts.
        unsafe {
            store_quads::<MT, CV>(p, &quads, n0);
            hooks.post_col_block(seg.col_block, t_start);
        }
        return;
    }
    let slot_floats = shape(MT, CV).slot_floats() as usize;
    let ws = args.workspace as *mut f32;
    let mine = ws.wrapping_add(plan.slot(cta, seg.col_block) as usize * slot_floats);
    unroll!(i < MT, {
        unroll!(c < CV, {
            let (row, col) = quad_at::<CV>(tid, i, c);
            let at = (row * shape(MT, CV).cols() + col) as usize;
            // SAFETY: this block's slot (the plan numbers a slot per block and partial column
            // block; the host allocated `plan.slots()`), 16-byte aligned.
            unsafe { global::st_v4_f32(mine.add(at), quads[i][c]) };
        });
    });
    // Every thread's partial stores are issued; one thread publishes them and counts.
    barrier::sync_threads();
    if tid == 0 {
        fence::acq_rel_gpu();
        let counter = (args.counters as *mut u32).wrapping_add(seg.col_block as usize);
        // SAFETY: one counter per column block (the host allocated `col_blocks` of them).
        let old = unsafe { atomics::atom_add_gpu(counter, 1) };
        let last = old + 1 == seg.contributors();
        if last {
            // Every contributor has counted: set it back for the next launch (stream-ordered
            // after this one).
            // SAFETY: as above.
            unsafe { atomics::st_release_gpu(counter, 0) };
        }
        // SAFETY: the flag word after the reduction area.
        unsafe { smem::st_volatile_u32(flag, last as u32) };
    }
    barrier::sync_threads();
    // SAFETY: written by thread 0 before the barrier.
    if unsafe { smem::ld_volatile_u32(flag) } == 0 {
        return;
    }
    // The last arrival: thread 0's acquire (the atom) and the barrier order the other blocks'
    // slots before these L2 reads.
    let mut sums: Quads<MT, CV> = [[[0f32; 4]; CV]; MT];
    let mut from = seg.first_cta;
    while from <= seg.last_cta {
        let slot = ws.wrapping_add(plan.slot(from, seg.col_block) as usize * slot_floats);
        unroll!(i < MT, {
            unroll!(c < CV, {
                let (row, col) = quad_at::<CV>(tid, i, c);
                let at = (row * shape(MT, CV).cols() + col) as usize;
                // SAFETY: contributor `from`'s slot, published before its count.
                let v = unsafe { global::ld_cg_v4_f32(slot.add(at)) };
                unroll!(x < 4, {
                    sums[i][c][x] += v[x];
                });
            });
        });
        from += 1;
    }
    // SAFETY: the kernel's contract; every thread of the last arrival stores, then posts.
    unsafe {
        store_quads::<MT, CV>(p, &sums, n0);
        hooks.post_col_block(seg.col_block, t_start);
    }
}

/// A thread's quads of a column block's `16 MT x 64 CV` tile: `quads[i][c]`.
type Quads<const MT: usize, const CV: usize> = [[[f32; 4]; CV]; MT];

/// Where quad `(i, c)` of thread `tid` lies in the column block: quad `q = tid + 256 (i CV + c)`
/// is row `q / (16 CV)`, columns `4 (q % (16 CV)) ..+4` (a row's 16 CV quads are consecutive
/// threads: coalesced stores).
#[inline(always)]
const fn quad_at<const CV: usize>(tid: u32, i: usize, c: usize) -> (u32, u32) {
    let q = tid + SKINNY_THREADS * (i * CV + c) as u32;
    let per_row = 16 * CV as u32;
    (q / per_row, 4 * (q % per_row))
}

/// Stores this thread's quads of the column block at `n0` ([`quad_at`]): bias, then GeLU, per
/// `p.flags`; rows at or past M skipped (N is a multiple of 8, so a quad is inside N or outside
/// it whole).
///
/// # Safety
/// `p` describes writable C and, with [`flags::BIAS`], a readable bias of N floats.
#[inline(always)]
unsafe fn store_quads<const MT: usize, const CV: usize>(p: &GemmParams, quads: &Quads<MT, CV>, n0: u32) {
    let tid = ids::thread_linear();
    let (out, pair) = (p.out_type(), p.flags & flags::C_VEC != 0);
    unroll!(s < MT * CV, {
        let (row, col) = quad_at::<CV>(tid, s / CV, s % CV);
        let col = n0 + col;
        if row < p.m && col < p.n {
            let mut v = quads[s / CV][s % CV];
            unroll!(x < 4, {
                if p.flags & flags::BIAS != 0 {
                    // SAFETY: the bias holds N floats and `col + x < N`.
                    v[x] += unsafe { *(p.bias as *const f32).add((col as usize) + x) };
                }
                if p.flags & flags::GELU != 0 {
                    v[x] = gelu_tanh(v[x]);
                }
            });
            let idx = row as usize * p.ldc as usize + col as usize;
            // SAFETY: elements `idx .. idx + 4` lie inside C (row < M, col + 3 < N).
            unsafe {
                store_pair(p.c, idx, v[0], v[1], true, out, pair);
                store_pair(p.c, idx + 2, v[2], v[3], true, out, pair);
            }
        }
    });
}

macro_rules! skinny_entry {
    ($(#[$doc:meta])* $name:ident, $elem:ty, $mt:literal, $cv:literal) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: GemmParams, args: SkinnyArgs) {
            const R: usize = shape($mt, $cv).rows_per_thread() as usize;
            const NB: usize = shape($mt, $cv).ring_units() as usize;
            // SAFETY: the host's `SkinnyGemm` launches it as `skinny_gemm` requires.
            unsafe { skinny_gemm::<$elem, NoHooks, $mt, $cv, R, { R / 2 }, NB>(&p, &args, &mut NoHooks::new()) }
        }
    };
}

use super::mainloop::{Bf16, F16};

skinny_entry!(
    /// bf16, `M <= 16`.
    gemm_skinny_bf16_m16, Bf16, 1, 1
);
skinny_entry!(
    /// bf16, `M <= 16`, 128-column blocks.
    gemm_skinny_bf16_m16_w128, Bf16, 1, 2
);
skinny_entry!(
    /// bf16, `M <= 32`.
    gemm_skinny_bf16_m32, Bf16, 2, 1
);
skinny_entry!(
    /// bf16, `M <= 64`.
    gemm_skinny_bf16_m64, Bf16, 4, 1
);
skinny_entry!(
    /// f16, `M <= 16`.
    gemm_skinny_f16_m16, F16, 1, 1
);
skinny_entry!(
    /// f16, `M <= 16`, 128-column blocks.
    gemm_skinny_f16_m16_w128, F16, 1, 2
);
skinny_entry!(
    /// f16, `M <= 32`.
    gemm_skinny_f16_m32, F16, 2, 1
);
skinny_entry!(
    /// f16, `M <= 64`.
    gemm_skinny_f16_m64, F16, 4, 1
);

/// The MLP's small-batch stages in stream mode: the skinny kernel of
/// [`SKINNY_STAGE_SHAPE`] (bf16) with [`StreamStage`] hooks (the block's range from the stage's
/// counter, waits on A's producer column tiles before a segment's A loads, a post per output
/// column block).
///
/// # Safety
/// As for [`skinny_gemm`], launched by the host's stream graph with `args.ctas` blocks (each
/// draws one ticket) and `desc` describing this launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gemm_skinny_bf16_m16_stream(desc: StageDesc, p: GemmParams, args: SkinnyArgs) {
    const MT: usize = SKINNY_STAGE_SHAPE.m_tiles as usize;
    const CV: usize = SKINNY_STAGE_SHAPE.col_vectors as usize;
    const R: usize = SKINNY_STAGE_SHAPE.rows_per_thread() as usize;
    const NB: usize = SKINNY_STAGE_SHAPE.ring_units() as usize;
    // SAFETY: the host launches it as `skinny_gemm` requires; `desc` describes this launch.
    unsafe {
        let mut hooks = StreamStage::start(&desc, SKINNY_WARPS * SKINNY_STAGE_SHAPE.k_unit());
        skinny_gemm::<Bf16, StreamStage, MT, CV, R, { R / 2 }, NB>(&p, &args, &mut hooks);
    }
}
