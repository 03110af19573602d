//! Launch facts of GeMM path 2 (sm_90a: TMA + `wgmma`, warp-specialized, persistent), read by
//! both sides: the kernel parameter [`TmaGemmParams`], the tile shapes ([`WgTileShape`]), the
//! tile raster order of the persistent loop ([`raster_tile`]), the shared-memory plan, and the
//! launch bounds the build writes into the PTX ([`LAUNCH_BOUNDS`]).
//!
//! A block is three warpgroups: warpgroup 0 is the producer (one thread issues the TMA loads of
//! each pipeline stage), warpgroups 1 and 2 are the consumers (each computes 64 rows of the
//! 128-row block tile with `wgmma.m64nBNk16`, then stores its rows from registers). The grid is
//! at most one block per SM; each block walks tiles `blockIdx.x, + gridDim.x, ...` in
//! [`raster_tile`] order.

use crate::gemm::GemmParams;
use crate::layout::DevAddr;
use bytemuck::{Pod, Zeroable};

/// Rows of C per block tile (two consumer warpgroups of 64 rows).
pub const WG_BM: u32 = 128;
/// K per pipeline stage: one 128-byte swizzle row of 16-bit elements.
pub const WG_BK: u32 = 64;
/// Threads per block: producer warpgroup + two consumer warpgroups.
pub const WG_THREADS: u32 = 384;
/// Bytes of one 64 x 64 swizzled box (an MN-major operand is loaded as boxes of 64 columns).
pub const WG_BOX_BYTES: u32 = 64 * 64 * 2;
/// Alignment the 128-byte swizzle needs of each operand tile in shared memory.
pub const WG_SMEM_ALIGN: u32 = 1024;
/// Registers a producer warpgroup keeps (`setmaxnreg.dec`). 56, not CUTLASS's 40: measured
/// with ptxas on the H200 (session 4), the producer thread's tile walk (stream-K ranges,
/// stream-mode waits, the megakernel's queue pops) spills 184–644 bytes at 40 and 0–52 bytes
/// at 56 in the plain and stream-mode kernels, while the consumers still fit 224 without
/// spilling.
pub const WG_PRODUCER_REGS: u32 = 56;
/// Registers a consumer warpgroup takes (`setmaxnreg.inc`): 128 + 2 x 224 fills the 168 x 384
/// the launch bounds give.
pub const WG_CONSUMER_REGS: u32 = 224;
/// Registers of the persistent megakernel's producer warpgroup: its producer thread also pops
/// the workqueues and its warp 1 posts to the scoreboards, so at 56 it kept ~460 bytes of
/// loop state in local memory (ptxas 13.0: 80 `LDL`/`STL` in the K-loop's window of SASS,
/// 19 at 88; the consumers' mainloop stays free of local memory at 208, their epilogue
/// spills a few accumulators once per tile). 128 x 88 + 256 x 208 fits the 168 x 384 of the
/// launch bounds. Measured on the H200 against 56/224 in one run (docs/perf-notes.md, session
/// 5, run 8): 2 layers 9.688 -> 9.658 ms, 4 layers 19.437 -> 19.163 ms: the spills were not
/// what keeps the megakernel's tiles 1.6x the plain kernel's. The stream-mode stages with tiles
/// up to 128 x 192 take this split too (session 19): their producer thread's protocol code
/// spilled 80 / 276 bytes at 56 and none at 88, and the serialized MLP's protocol cost fell
/// from +5.0–5.3% to +3.3–3.7% (RowSync, B = 1024).
pub const WG_PERSISTENT_PRODUCER_REGS: u32 = 88;
/// Registers of each persistent-megakernel consumer warpgroup (see
/// [`WG_PERSISTENT_PRODUCER_REGS`]).
pub const WG_PERSISTENT_CONSUMER_REGS: u32 = 208;
const _: () = assert!(128 * WG_PRODUCER_REGS + 256 * WG_CONSUMER_REGS <= 168 * WG_THREADS);
const _: () = assert!(128 * WG_PERSISTENT_PRODUCER_REGS + 256 * WG_PERSISTENT_CONSUMER_REGS <= 168 * WG_THREADS);
/// Default group of row tiles walked together by [`raster_tile`] (L2 reuse of B).
pub const WG_RASTER_GROUP: u32 = 8;

/// Entry points that need a register cap at entry for `setmaxnreg`: host/build.rs writes
/// `.maxntid THREADS, 1, 1` and `.minnctapersm BLOCKS` into their PTX.
pub const LAUNCH_BOUNDS: &[(&str, u32, u32)] = &[
    ("gemm_sm90_bf16_128x256", WG_THREADS, 1),
    ("gemm_sm90_f16_128x256", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x256_c2", WG_THREADS, 1),
    ("gemm_sm90_f16_128x256_c2", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x128", WG_THREADS, 1),
    ("gemm_sm90_f16_128x128", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x192", WG_THREADS, 1),
    ("gemm_sm90_f16_128x192", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x64", WG_THREADS, 1),
    ("gemm_sm90_f16_128x64", WG_THREADS, 1),
    ("gemm_sm90_bf16_64x96", WG_THREADS, 1),
    ("gemm_sm90_f16_64x96", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x16", WG_THREADS, 1),
    ("gemm_sm90_f16_128x16", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x192_stream", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x256_stream", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x128_stream", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x64_stream", WG_THREADS, 1),
    ("gemm_sm90_bf16_64x96_stream", WG_THREADS, 1),
    ("gemm_sm90_bf16_128x16_stream", WG_THREADS, 1),
    ("persistent_sm90_bf16_128x256", WG_THREADS, 1),
    ("persistent_sm90_bf16_128x256_noprotocol", WG_THREADS, 1),
    ("persistent_sm90_bf16_128x128", WG_THREADS, 1),
    ("persistent_sm90_bf16_128x128_noprotocol", WG_THREADS, 1),
];

/// Entry points launched in clusters: (name, blocks per cluster along x). host/build.rs writes
/// `.reqnctapercluster N, 1, 1` into their PTX, so a plain launch forms the clusters (its grid
/// must be a multiple of N).
pub const CLUSTER_ENTRIES: &[(&str, u32)] = &[("gemm_sm90_bf16_128x256_c2", 2), ("gemm_sm90_f16_128x256_c2", 2)];

/// Bytes of the per-stage tile record (the device's `WsTile`: row tile, column tile, linear
/// id, split, stage index, padding, dispatch and ready times) the producer writes with every
/// pipeline stage it fills.
pub const WG_TILE_RECORD_BYTES: u32 = 40;

/// The kernel parameter of the path-2 entry points, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct TmaGemmParams {
    /// The problem, as for path 1 (the `*_VEC` bits are unused: TMA needs 16-byte aligned
    /// bases and leading dimensions, which the host checks).
    pub gemm: GemmParams,
    /// Global address of two tensor maps (`CUtensorMap`, 128 bytes each, 64-byte aligned):
    /// A's, then B's ([`a_map_dims`], [`b_map_dims`]).
    pub tensor_maps: DevAddr,
    /// The launch's `ErrorSlot` (0: none) for a pipeline wait that times out.
    pub error: DevAddr,
    /// Bound on every pipeline wait, in nanoseconds.
    pub timeout_ns: u64,
    /// Row tiles walked together by [`raster_tile`] (at least 1).
    pub raster_group: u32,
    /// K splits per output tile (split-K; 0 or 1: none). Work unit `u` is split `u % split_k`
    /// of tile `u / split_k`, over K-steps [`split_range`]; every unit writes its f32 partial
    /// tile to `split_workspace`, and the last of a tile's units to arrive on its counter sums
    /// all partials in split order (deterministic), stores and posts the tile.
    pub split_k: u32,
    /// Partial tiles: `tiles * split_k` slots of [`WgTileShape::partial_bytes`] (0 when
    /// `split_k <= 1`).
    pub split_workspace: DevAddr,
    /// One `u32` arrival counter per output tile, zero between launches (the last arrival
    /// resets it). Units count in the K-steps they computed; the one that completes the
    /// tile's K-steps sums the partials.
    pub split_counters: DevAddr,
    /// Stream-K ([`crate::stream_k`]), read by the plain kernels only (stream-mode stages use
    /// `split_k`; with stream-K on, plain kernels ignore it): leading tiles of the order
    /// computed whole.
    pub sk_dp_tiles: u32,
    /// Stream-K ranges, one per block (the grid); 0: stream-K off.
    pub sk_units: u32,
    /// Stages of the pipeline's ring in use ([`ring_stages`]; 0: all of the tile's). Fewer
    /// stages keep fewer bytes of the operands in flight per SM: the TMA probe
    /// (`run tma-probe`) streamed a weight's 96 strips 15% faster on the H100 with 4 stages than
    /// with 9 (docs/perf-notes.md, session 32). A launch choice, not a kernel one.
    pub pipeline_depth: u32,
    /// Padding; always 0.
    pub _pad: u32,
}

impl TmaGemmParams {
    /// The launch's stream-K plan over its `tiles` tiles (all zero when stream-K is off).
    pub const fn stream_k(&self, tiles: u32) -> crate::stream_k::StreamKPlan {
        let on = self.sk_units != 0;
        crate::stream_k::StreamKPlan {
            tiles: if on { tiles } else { 0 },
            k_steps: if on { self.gemm.k.div_ceil(WG_BK) } else { 0 },
            dp_tiles: self.sk_dp_tiles,
            sk_units: self.sk_units,
        }
    }
}

/// The stages of a `stages`-stage pipeline's ring a launch uses when it asks for `depth`
/// ([`TmaGemmParams::pipeline_depth`]): `depth` where `2 <= depth < stages`, else all of them
/// (0 asks for all; the host refuses other values outside `2..=stages` before launching:
/// [`pipeline_depth_ok`]). Producer and consumers wrap their stage index at it.
pub const fn ring_stages(depth: u32, stages: u32) -> u32 {
    if depth >= 2 && depth < stages {
        depth
    } else {
        stages
    }
}

/// Whether a launch may ask a `stages`-stage pipeline for `depth` stages: 0 (all) or
/// `2..=stages` (a single stage would serialize loads and `wgmma`s).
pub const fn pipeline_depth_ok(depth: u32, stages: u32) -> bool {
    depth == 0 || (depth >= 2 && depth <= stages)
}

/// The K-steps `[begin, end)` of split `split` of `splits` over `k_steps` (balanced; every
/// split non-empty when `splits <= k_steps`).
pub const fn split_range(k_steps: u32, split: u32, splits: u32) -> (u32, u32) {
    let splits = if splits == 0 { 1 } else { splits };
    (
        (split as u64 * k_steps as u64 / splits as u64) as u32,
        ((split as u64 + 1) * k_steps as u64 / splits as u64) as u32,
    )
}

/// The split-K factor for a `tiles`-tile problem of `k_steps` K-steps on `sms` SMs (one
/// persistent block each): the most splits whose units all run at once (`tiles * s <= sms`),
/// at most 16 and at most `k_steps / 8` (every unit keeps a pipeline's worth of K-steps); so
/// 1 once the tiles fill half the SMs. Measured on the H200 (docs/perf-notes.md): a second
/// round of units costs more than it saves (each SM streams its operands at a bounded rate,
/// so what counts is how many SMs stream at once), and every unit pays a pipeline fill and a
/// partial-tile write and read.
pub const fn choose_split_k(tiles: u32, k_steps: u32, sms: u32) -> u32 {
    if tiles == 0 || sms == 0 || 2 * tiles > sms {
        return 1;
    }
    let mut s = sms / tiles;
    if s > 16 {
        s = 16;
    }
    let by_k = k_steps / 8;
    if s > by_k {
        s = by_k;
    }
    if s == 0 {
        1
    } else {
        s
    }
}

/// A path-2 block tile: `WG_BM` x `bn` x `WG_BK`, `stages` pipeline stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgTileShape {
    /// Columns of C per block (64, 128, 192 or 256).
    pub bn: u32,
    /// Shared-memory pipeline depth.
    pub stages: u32,
}

/// 128 x 256 x 64, 4 stages (48 KiB each): the large-problem tile.
pub const WG_TILE_128X256: WgTileShape = WgTileShape { bn: 256, stages: 4 };
/// 128 x 128 x 64, 6 stages (32 KiB each).
pub const WG_TILE_128X128: WgTileShape = WgTileShape { bn: 128, stages: 6 };
/// 128 x 192 x 64, 5 stages (40 KiB each): three quarters of the large tile's work, so the
/// GPT-3 MLP's widths (6144 = 32 x 192, 12288 = 64 x 192) make 128 or 256 tiles at B = 256 to
/// 1024, one or two whole waves on 132 SMs where 128 x 256 leaves 96 or 192 (a partial wave).
pub const WG_TILE_128X192: WgTileShape = WgTileShape { bn: 192, stages: 5 };
/// 128 x 64 x 64, 9 stages (24 KiB each, 16 KiB of them A's): the skinny tile. A product with
/// M of 1 to 64 runs swapped (`GemmParams::swap_ab`: the wide dimension as the tile's 128
/// rows, the batch as the `wgmma`'s N of 64), so both consumer warpgroups multiply and nine
/// stages keep 144 KiB of the weight in flight per SM: bandwidth-bound products stream their
/// weight as fast as the memory allows.
pub const WG_TILE_128X64: WgTileShape = WgTileShape { bn: 64, stages: 9 };
/// 64 x 96 x 64, 11 stages (20 KiB each: 8 KiB of A's 64 rows, 12 KiB of B's): the small
/// batches unswapped (M <= 64 only; the host refuses more). A stage carries A's 64 rows, not
/// the 128 a block tile of two consumer warpgroups would: the first consumer warpgroup
/// multiplies, the second keeps the pipeline's protocol ([`WgTileShape::a_rows`]). The GPT-3
/// MLP's widths make 128 column tiles (12288 = 128 x 96; 6144 = 64 x 96, two K splits each),
/// so 128 SMs stream the weight whole-K, each a quarter less than the 96 swapped 128 x 64
/// tiles ask of theirs, with 132 KiB of it in flight (the 128 x 64 tile: 144 KiB). cuBLAS runs
/// GeMM2 at B = 64 this way (`nvjet_sm90_tst_96x64_64x8`, 128 CTAs, eight 20 KiB stages:
/// docs/perf-notes.md, sessions 7 and 29). Row-major B is loaded as boxes of 32 columns in the
/// 64-byte swizzle ([`WgTileShape::b_box_cols`]). (Its first form, with A's 128-row box and
/// 8 stages, ran 12% slower than the swapped 128 x 64 tile: session 30.)
pub const WG_TILE_64X96: WgTileShape = WgTileShape { bn: 96, stages: 11 };
/// 128 x 16 x 64, 12 stages (18 KiB each, 16 KiB of them A's): products with M <= 16 run
/// swapped (the weight's columns as the tile's 128 rows, the batch as the `wgmma`'s N of
/// 16), so a stage carries 2 KiB of the batch instead of the 128 x 64 tile's 8 KiB, and twelve
/// stages keep 192 KiB of the weight in flight per SM (the 128 x 64 tile: 144 KiB). cuBLAS
/// runs the B = 1 GeMMs this way (`nvjet_sm90_tst_128x8_64x12`, `192x8_64x8`: 8 columns, 12
/// and 8 stages; docs/perf-notes.md, session 12).
pub const WG_TILE_128X16: WgTileShape = WgTileShape { bn: 16, stages: 12 };

impl WgTileShape {
    /// Rows of A a stage carries: [`WG_BM`], except the 96-column tile's 64
    /// ([`WG_TILE_64X96`]: products of at most 64 rows, the second consumer warpgroup idle).
    pub const fn a_rows(&self) -> u32 {
        if self.bn == 96 {
            64
        } else {
            WG_BM
        }
    }

    /// Bytes of A's part of a stage.
    pub const fn a_bytes(&self) -> u32 {
        self.a_rows() * WG_BK * 2
    }

    /// Bytes of B's part of a stage.
    pub const fn b_bytes(&self) -> u32 {
        self.bn * WG_BK * 2
    }

    /// Bytes of one stage (the TMA transaction count of its barrier).
    pub const fn stage_bytes(&self) -> u32 {
        self.a_bytes() + self.b_bytes()
    }

    /// Offset of the barriers (after the stages): `full[s]` at `8 s`, `empty[s]` at
    /// `8 (stages + s)`.
    pub const fn barrier_offset(&self) -> u32 {
        self.stages * self.stage_bytes()
    }

    /// Bytes of one unit's f32 partial tile (split-K).
    pub const fn partial_bytes(&self) -> u32 {
        WG_BM * self.bn * 4
    }

    /// Offset of the per-stage tile records (after the barriers), [`WG_TILE_RECORD_BYTES`]
    /// apart.
    pub const fn record_offset(&self) -> u32 {
        self.barrier_offset() + 16 * self.stages
    }

    /// Dynamic shared memory per block: stages, barriers, tile records, and slack to align
    /// the base to [`WG_SMEM_ALIGN`].
    pub const fn smem_bytes(&self) -> u32 {
        self.record_offset() + WG_TILE_RECORD_BYTES * self.stages + WG_SMEM_ALIGN
    }

    /// `wgmma` accumulator registers per consumer thread (`bn / 2`).
    pub const fn acc_regs(&self) -> u32 {
        self.bn / 2
    }

    /// Row and column tiles over an `m` x `n` output.
    pub const fn tiles(&self, m: u32, n: u32) -> (u32, u32) {
        (m.div_ceil(WG_BM), n.div_ceil(self.bn))
    }

    /// Number of K stages for a reduction of `k`.
    pub const fn k_steps(&self, k: u32) -> u32 {
        k.div_ceil(WG_BK)
    }

    /// Columns of one box of B when B is row-major (`[K, N]`, MN-major for `wgmma`): 64 (one
    /// 128-byte swizzle row) where `bn` is a multiple of 64, else 32 (a 64-byte swizzle row:
    /// the 96-column tile's three boxes) where it is a multiple of 32, else 16 (a 32-byte
    /// swizzle row: the 16-column tile's one box). A transposed B is one box of `bn` rows.
    pub const fn b_box_cols(&self) -> u32 {
        if self.bn.is_multiple_of(64) {
            64
        } else if self.bn.is_multiple_of(32) {
            32
        } else {
            16
        }
    }

    /// Bytes of one row-major box of B ([`WgTileShape::b_box_cols`] x [`WG_BK`] 16-bit
    /// elements); the boxes of a stage lie back to back.
    pub const fn b_box_bytes(&self) -> u32 {
        self.b_box_cols() * WG_BK * 2
    }

    /// The swizzle span (bytes) of B's tile in shared memory, for TMA's tensor map and the
    /// `wgmma` descriptor alike: a row-major B's box row (128, 64 or 32 bytes:
    /// [`WgTileShape::b_box_cols`]). A transposed B (K-major: rows of [`WG_BK`] elements) is
    /// always 128.
    pub const fn b_swizzle_bytes(&self, b_trans: bool) -> u32 {
        if b_trans {
            128
        } else {
            2 * self.b_box_cols()
        }
    }

    /// The `wgmma` descriptor strides of B's tile in shared memory ([`OperandStrides`]): a
    /// transposed B is K-major (one box of 128-byte rows), a row-major B MN-major in boxes of
    /// [`WgTileShape::b_box_cols`] columns.
    pub const fn b_strides(&self, b_trans: bool) -> OperandStrides {
        if b_trans {
            OperandStrides {
                k16_bytes: 32,
                lbo: 16,
                sbo: 1024,
                swizzle_bytes: 128,
            }
        } else {
            let row = self.b_swizzle_bytes(false);
            OperandStrides {
                k16_bytes: 16 * row,
                lbo: self.b_box_bytes(),
                sbo: 8 * row,
                swizzle_bytes: row,
            }
        }
    }

    /// Whether the device instantiates this shape and it fits the H200's 227 KiB per block.
    pub const fn is_valid(&self) -> bool {
        (self.bn == 16 || self.bn == 64 || self.bn == 96 || self.bn == 128 || self.bn == 192 || self.bn == 256)
            && self.stages >= 2
            && self.smem_bytes() <= 232_448
    }
}

/// How `wgmma` walks an operand tile that TMA wrote into shared memory (PTX ISA, "Matrix
/// Descriptor Format" and "Canonical Layouts"): the bytes a `k16` step advances the start
/// address, the leading- and stride-dimension byte offsets, and the swizzle span.
///
/// An MN-major operand in boxes of `S / 2` 16-bit columns (`S` = 128, 64 or 32 bytes, the
/// swizzle) x [`WG_BK`] K-rows, the boxes back to back, is the canonical layout
/// `((8, S/16, m), (8, k)) : ((1, 8, LBO), (S/2, SBO))` in elements: columns run contiguously
/// within a box row, the next box is `LBO` = one box on, K-rows are `S` bytes apart and a group
/// of eight is `SBO` = `8 S` bytes; a `k16` step is sixteen rows, `16 S` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperandStrides {
    /// Start-address advance per `k16` step.
    pub k16_bytes: u32,
    /// Leading-dimension byte offset.
    pub lbo: u32,
    /// Stride-dimension byte offset.
    pub sbo: u32,
    /// Swizzle span in bytes (the descriptor's layout type: 128, 64 or 32).
    pub swizzle_bytes: u32,
}

/// The `(row tile, column tile)` of linear tile `id` of a `tiles_m` x `tiles_n` grid, walking
/// groups of `group` row tiles column by column (within a group, row tiles vary fastest), so
/// blocks running at the same time share B's columns and A's rows in L2.
pub const fn raster_tile(id: u32, tiles_m: u32, tiles_n: u32, group: u32) -> (u32, u32) {
    let group = if group == 0 { 1 } else { group };
    let per_group = group * tiles_n;
    let first_m = (id / per_group) * group;
    let rows = if tiles_m - first_m < group {
        tiles_m - first_m
    } else {
        group
    };
    let r = id % per_group;
    (first_m + r % rows, r / rows)
}

/// A's tensor map: `(dims, box)` innermost first, for A stored `[M, K]` (K-major: one box of
/// `WG_BK` x `WG_BM`) or transposed `[K, M]` (MN-major: boxes of 64 x `WG_BK`).
pub const fn a_map_dims(m: u32, k: u32, a_trans: bool) -> ([u32; 2], [u32; 2]) {
    a_map_dims_rows(m, k, a_trans, WG_BM)
}

/// [`a_map_dims`] for a tile whose stages carry `rows` rows of A ([`WgTileShape::a_rows`]):
/// a K-major A's one box is `rows` tall; an MN-major A's boxes stay 64 columns (the producer
/// loads `rows / 64` of them).
pub const fn a_map_dims_rows(m: u32, k: u32, a_trans: bool, rows: u32) -> ([u32; 2], [u32; 2]) {
    if a_trans {
        ([m, k], [64, WG_BK])
    } else {
        ([k, m], [WG_BK, rows])
    }
}

/// B's tensor map for tiles `bn` columns wide: for B stored `[K, N]` (MN-major: boxes of
/// [`WgTileShape::b_box_cols`] x `WG_BK`) or transposed `[N, K]` (K-major: one box of `WG_BK`
/// x `bn`). Its swizzle is [`WgTileShape::b_swizzle_bytes`].
pub const fn b_map_dims(n: u32, k: u32, b_trans: bool, bn: u32) -> ([u32; 2], [u32; 2]) {
    if b_trans {
        ([k, n], [WG_BK, bn])
    } else {
        let shape = WgTileShape { bn, stages: 1 };
        ([n, k], [shape.b_box_cols(), WG_BK])
    }
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<TmaGemmParams>() == 136);
    assert!(offset_of!(TmaGemmParams, sk_units) == 124);
    assert!(offset_of!(TmaGemmParams, split_k) == 100);
    assert!(offset_of!(TmaGemmParams, split_workspace) == 104);
    assert!(offset_of!(TmaGemmParams, split_counters) == 112);
    assert!(offset_of!(TmaGemmParams, tensor_maps) == 72);
    assert!(offset_of!(TmaGemmParams, error) == 80);
    assert!(offset_of!(TmaGemmParams, timeout_ns) == 88);
    assert!(offset_of!(TmaGemmParams, raster_group) == 96);
    assert!(offset_of!(TmaGemmParams, pipeline_depth) == 128);
    assert!(WG_TILE_128X256.is_valid() && WG_TILE_128X128.is_valid() && WG_TILE_128X192.is_valid());
    assert!(WG_TILE_128X64.is_valid() && WG_TILE_64X96.is_valid() && WG_TILE_128X16.is_valid());
    // Every operand tile stays aligned for the swizzle.
    assert!(WG_TILE_128X256.a_bytes().is_multiple_of(WG_SMEM_ALIGN));
    assert!(WG_TILE_64X96.a_bytes().is_multiple_of(WG_SMEM_ALIGN));
    assert!(WG_TILE_128X256.b_bytes().is_multiple_of(WG_SMEM_ALIGN));
    assert!(WG_TILE_128X128.b_bytes().is_multiple_of(WG_SMEM_ALIGN));
    assert!(WG_TILE_128X192.b_bytes().is_multiple_of(WG_SMEM_ALIGN));
    assert!(WG_TILE_128X64.b_bytes().is_multiple_of(WG_SMEM_ALIGN));
    assert!(WG_TILE_64X96.b_bytes().is_multiple_of(WG_SMEM_ALIGN));
    assert!(WG_TILE_128X16.b_bytes().is_multiple_of(WG_SMEM_ALIGN));
    // Registers: one producer and two consumer warpgroups fit the SM's 64 Ki.
    assert!(128 * WG_PRODUCER_REGS + 256 * WG_CONSUMER_REGS <= 65536);
};

/// Whether a path-2 tile `bn` columns wide is a wide one (128 x 256): its consumers hold 128
/// accumulators a thread, so the kernel keeps the hooks' wide register split
/// (`WsHooks::REGS_WIDE`), the free-stage wait before the K loop, and no poll warp (ptxas
/// spilled more in its 56-register producer warpgroup with each of the others).
pub const fn wg_wide_tile(bn: u32) -> bool {
    bn > 192
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_depth_picks_the_ring_and_refuses_what_it_cannot_run() {
        for stages in [4, 5, 9, 11, 12] {
            assert_eq!(ring_stages(0, stages), stages);
            assert!(pipeline_depth_ok(0, stages));
            assert!(!pipeline_depth_ok(1, stages) && !pipeline_depth_ok(stages + 1, stages));
            for depth in 2..=stages {
                assert!(pipeline_depth_ok(depth, stages));
                assert_eq!(ring_stages(depth, stages), depth);
            }
            // What the host refuses never reaches a kernel, but a kernel given it runs the
            // whole ring rather than a ring it has no barriers for.
            assert_eq!(ring_stages(1, stages), stages);
            assert_eq!(ring_stages(stages + 3, stages), stages);
        }
    }

    #[test]
    fn raster_visits_every_tile_once() {
        for (tm, tn, g) in [(1, 1, 8), (5, 3, 2), (64, 32, 8), (13, 7, 8), (9, 1, 4), (3, 11, 1)] {
            let mut seen = [false; 64 * 32];
            for id in 0..tm * tn {
                let (r, c) = raster_tile(id, tm, tn, g);
                assert!(r < tm && c < tn, "{id} -> ({r}, {c}) outside {tm}x{tn}");
                let i = (r * tn + c) as usize;
                assert!(!seen[i], "tile ({r}, {c}) visited twice");
                seen[i] = true;
            }
        }
    }

    #[test]
    fn raster_groups_rows_together() {
        // 16 x 4 tiles in groups of 8: ids 0..8 are rows 0..8 of column 0, 8..16 column 1.
        assert_eq!(raster_tile(0, 16, 4, 8), (0, 0));
        assert_eq!(raster_tile(7, 16, 4, 8), (7, 0));
        assert_eq!(raster_tile(8, 16, 4, 8), (0, 1));
        assert_eq!(raster_tile(32, 16, 4, 8), (8, 0));
        // A short last group (13 rows: 8 + 5).
        assert_eq!(raster_tile(8 * 4 + 5, 13, 4, 8), (8, 1));
    }

    #[test]
    fn split_ranges_tile_k_exactly() {
        for (k_steps, splits) in [(192, 8), (96, 4), (7, 3), (1, 1), (100, 16)] {
            let mut next = 0;
            for s in 0..splits {
                let (b, e) = split_range(k_steps, s, splits);
                assert_eq!(b, next);
                assert!(e > b, "{k_steps} {splits}: empty split {s}");
                next = e;
            }
            assert_eq!(next, k_steps);
        }
        assert_eq!(split_range(10, 0, 0), (0, 10));
    }

    #[test]
    fn split_k_fills_the_sms_only_when_tiles_do_not() {
        // Enough tiles: no split.
        assert_eq!(choose_split_k(132, 192, 132), 1);
        assert_eq!(choose_split_k(384, 192, 132), 1);
        // GPT-3 MLP at batch 64 on 132 SMs: 48 tiles of 128 x 128 over K = 12288 (192 steps):
        // two splits (96 units at once; three would need a second round).
        assert_eq!(choose_split_k(48, 192, 132), 2);
        // ... and its second GeMM: 96 tiles over K = 6144 (96 steps) fill most SMs already.
        assert_eq!(choose_split_k(96, 96, 132), 1);
        // Very few tiles: many splits, capped at 16 and at k_steps / 8.
        assert_eq!(choose_split_k(6, 1000, 132), 16);
        assert_eq!(choose_split_k(6, 40, 132), 5);
        // Short K: no split below 16 K-steps.
        assert_eq!(choose_split_k(10, 15, 132), 1);
        for tiles in 1..132 {
            for k_steps in [8, 64, 192, 1000] {
                let s = choose_split_k(tiles, k_steps, 132);
                assert!((1..=16).contains(&s) && s <= (k_steps / 8).max(1));
            }
        }
    }

    #[test]
    fn shapes_and_maps() {
        assert_eq!(WG_TILE_128X256.stage_bytes(), 48 * 1024);
        assert_eq!(WG_TILE_128X256.acc_regs(), 128);
        assert_eq!(WG_TILE_128X128.tiles(129, 128), (2, 1));
        assert_eq!(WG_TILE_128X128.k_steps(65), 2);
        assert_eq!(a_map_dims(100, 40, false), ([40, 100], [64, 128]));
        assert_eq!(b_map_dims(300, 40, false, 256), ([300, 40], [64, 64]));
        assert_eq!(b_map_dims(300, 40, true, 256), ([40, 300], [64, 256]));
        // The 96-column tile: 32-column boxes in the 64-byte swizzle when B is row-major.
        assert_eq!(b_map_dims(300, 40, false, 96), ([300, 40], [32, 64]));
        assert_eq!(b_map_dims(300, 40, true, 96), ([40, 300], [64, 96]));
        assert_eq!((WG_TILE_64X96.b_box_cols(), WG_TILE_64X96.b_box_bytes()), (32, 4096));
        assert_eq!(WG_TILE_64X96.b_swizzle_bytes(false), 64);
        assert_eq!(WG_TILE_64X96.b_swizzle_bytes(true), 128);
        assert_eq!(WG_TILE_128X256.b_swizzle_bytes(false), 128);
        assert_eq!(WG_TILE_64X96.acc_regs(), 48);
        assert_eq!(WG_TILE_64X96.stage_bytes(), 20 * 1024);
        assert_eq!((WG_TILE_64X96.a_rows(), WG_TILE_64X96.a_bytes()), (64, 8192));
        assert_eq!(WG_TILE_128X64.a_rows(), 128);
        assert_eq!(a_map_dims_rows(100, 40, false, 64), ([40, 100], [64, 64]));
        assert_eq!(a_map_dims_rows(100, 40, true, 64), ([100, 40], [64, 64]));
        assert!(WG_TILE_64X96.smem_bytes() <= 232_448);
        // Three boxes fill B's part of a stage exactly.
        assert_eq!(WG_TILE_64X96.b_bytes(), 3 * WG_TILE_64X96.b_box_bytes());
        // The row-major B strides of every tile against the canonical MN-major layout: the
        // byte offset (before the swizzle) the descriptor gives element (column n, K-row k),
        // `((8, S/16, m), (8, k)) : ((1, 8, LBO), (S/2, SBO))` in elements, must be where the
        // boxes put it: box `n / cols` at `lbo` apart, row `k` at `S` bytes, column `n % cols`.
        for shape in [
            WG_TILE_128X256,
            WG_TILE_128X192,
            WG_TILE_128X128,
            WG_TILE_64X96,
            WG_TILE_128X64,
            WG_TILE_128X16,
        ] {
            let st = shape.b_strides(false);
            let (cols, s) = (shape.b_box_cols(), st.swizzle_bytes);
            assert_eq!(2 * cols, s, "{shape:?}");
            for n in 0..shape.bn {
                for k in 0..WG_BK {
                    let (n0, n1, n2) = (n % 8, (n / 8) % (s / 16), n / (s / 2));
                    let (k0, k1) = (k % 8, k / 8);
                    let canonical = 2 * (n0 + 8 * n1) + st.lbo * n2 + s * k0 + st.sbo * k1;
                    let boxes = (n / cols) * shape.b_box_bytes() + k * s + 2 * (n % cols);
                    assert_eq!(canonical, boxes, "{shape:?} n {n} k {k}");
                }
            }
            // A k16 step is sixteen K-rows further; every step starts on a swizzle pattern
            // boundary (8 rows: base offset 0 in the descriptor).
            assert_eq!(st.k16_bytes, 16 * s);
            assert!(st.k16_bytes.is_multiple_of(8 * s));
        }
        // The wide tiles' strides are the ones they always used.
        assert_eq!(
            WG_TILE_128X256.b_strides(false),
            OperandStrides {
                k16_bytes: 2048,
                lbo: WG_BOX_BYTES,
                sbo: 1024,
                swizzle_bytes: 128
            }
        );
        assert_eq!(WG_TILE_64X96.b_strides(false).sbo, 512);
        assert_eq!(WG_TILE_128X16.b_strides(false).lbo, 2048);
        // The 16-column tile: one 16-column box (32-byte swizzle) or one K-major box of 16 rows.
        assert_eq!(b_map_dims(300, 40, false, 16), ([300, 40], [16, 64]));
        assert_eq!(b_map_dims(300, 40, true, 16), ([40, 300], [64, 16]));
        assert_eq!(WG_TILE_128X16.b_swizzle_bytes(false), 32);
        assert_eq!(WG_TILE_128X16.b_bytes(), WG_TILE_128X16.b_box_bytes());
        assert_eq!(
            (WG_TILE_128X16.acc_regs(), WG_TILE_128X16.stage_bytes()),
            (8, 18 * 1024)
        );
        assert!(WG_TILE_128X16.smem_bytes() <= 232_448);
    }
}
