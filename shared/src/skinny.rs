//! The skinny GeMM (`M <= 64`, the MLP's small batches): how a launch divides the weight among
//! its blocks, read by both sides (the host sizes the grid and the workspace; the device walks
//! its range, numbers its partial slots and finds who sums a column block).
//!
//! The product is `C[M,N] = A[M,K] B[K,N]` with `M` small: streaming `B` (the weight) once from
//! memory is the whole cost. Each warp copies its part of `B` (16-byte vectors, 64 columns x
//! [`SkinnyShape::k_unit`] rows a step) with `cp.async` into its slots of a ring in shared
//! memory ([`SkinnyShape::ring_units`] steps ahead; a warp synchronizes with itself only),
//! reads them back into registers, builds `mma.sync.m16n8k16` fragments from them with byte
//! permutes, and keeps `M` as the MMA's rows.
//!
//! **Decomposition.** `B` is cut into column blocks of [`SkinnyShape::cols`] columns; each column
//! block's K rows into *chunks* of [`SKINNY_WARPS`] x [`SkinnyShape::k_unit`] rows (one K unit per
//! warp of a block, so the warps of a block always have equal work). The chunks of all column
//! blocks, laid end to end (column block major), are cut into one contiguous range per block
//! ([`SkinnyPlan::range`]), so every block streams the same number of bytes (±1 chunk) and the
//! grid is exactly the blocks that are resident at once: no partial last wave.
//!
//! A range may start or end inside a column block. A column block computed by one block is
//! stored directly; one computed by several ("contributors") has each contributor write its
//! f32 partial to a workspace slot ([`SkinnyPlan::slot`]) and count itself on the column
//! block's arrival counter. The last to arrive sums the slots in contributor order (so the
//! result does not depend on timing), applies the epilogue, stores, and sets the counter back
//! to zero for the next launch. Nobody ever waits for anybody: no spin-wait, no hang.

/// Columns of `B` (and `C`) one 16-byte vector per lane covers across a warp's 8 lane groups
/// (8 `n8` MMA tiles): a column block is [`SkinnyShape::col_vectors`] of these.
pub const SKINNY_VECTOR_COLS: u32 = 64;
/// Warps per block.
pub const SKINNY_WARPS: u32 = 8;
/// Threads per block.
pub const SKINNY_THREADS: u32 = 32 * SKINNY_WARPS;
/// The largest `M` the skinny kernels compute (four `m16` tiles).
pub const SKINNY_MAX_M: u32 = 64;

/// One skinny kernel's shape: `m_tiles` `m16` tiles (`M <= 16 m_tiles`) and `col_vectors`
/// 16-byte vectors per lane and row of `B` (a column block of `64 col_vectors` columns; with 2,
/// each row of a column block is one 256-byte run, read by two loads of the warp).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SkinnyShape {
    /// `m16` tiles: 1, 2 or 4.
    pub m_tiles: u32,
    /// 16-byte vectors per lane and row: 1 or 2.
    pub col_vectors: u32,
}

impl SkinnyShape {
    /// The shape for `m` rows (`m <= 64`): [`skinny_m_tiles`], and 128-column blocks when
    /// `wide` and one `m16` tile (the wider accumulators of more tiles leave too few registers).
    pub const fn for_m(m: u32, wide: bool) -> Self {
        let m_tiles = skinny_m_tiles(m);
        Self {
            m_tiles,
            col_vectors: if wide && m_tiles == 1 { 2 } else { 1 },
        }
    }

    /// Columns per column block.
    pub const fn cols(&self) -> u32 {
        SKINNY_VECTOR_COLS * self.col_vectors
    }

    /// Rows of `B` each thread loads per K unit: 8 (two `k16` MMAs a unit) for one or two
    /// `m16` tiles of 64 columns, 4 for four tiles (whose 128 accumulators leave fewer registers
    /// for loads in flight) or 128 columns (twice the vectors a row).
    pub const fn rows_per_thread(&self) -> u32 {
        if self.m_tiles >= 4 || self.col_vectors >= 2 {
            4
        } else {
            8
        }
    }

    /// Rows of `B` a warp covers per K unit (4 threads of a lane group each load
    /// [`SkinnyShape::rows_per_thread`] rows): 32 or 16.
    pub const fn k_unit(&self) -> u32 {
        4 * self.rows_per_thread()
    }

    /// Row stride (in f32) of a warp's accumulators in the block's reduction area: the columns
    /// plus 4 of padding, so the lanes of a fragment store fall in different banks.
    pub const fn red_stride(&self) -> u32 {
        self.cols() + 4
    }

    /// K units of `B` each warp keeps in flight: `cp.async` copies into the block's ring in
    /// shared memory (4: 128 KiB a block for one `m16` tile, where the read probe of session 14
    /// streamed 128-byte runs at 0.87 of 4.3 TB/s against 0.78 with 16 register loads a thread).
    /// Four `m16` tiles keep 2 (their A units, in flight in registers as deep as the ring, and
    /// their 128 accumulators would spill with more).
    pub const fn ring_units(&self) -> u32 {
        if self.m_tiles >= 4 {
            2
        } else {
            4
        }
    }

    /// Bytes of one ring stage: every warp's K unit of `B` (each lane's
    /// `rows_per_thread x col_vectors` 16-byte vectors).
    pub const fn ring_stage_bytes(&self) -> u32 {
        SKINNY_WARPS * 32 * self.rows_per_thread() * self.col_vectors * 16
    }

    /// Byte offset of the ring in the block's dynamic shared memory: after the reduction area
    /// and the 16-byte last-arrival flag, rounded up to 1024 bytes. Alignment matters here: at
    /// 16 mod 128 (right after the flag) every 128-byte run a quarter warp copies lands across
    /// two 128-byte rows of shared memory, and the SM requested every weight sector from L2
    /// twice (9.54 M sectors for a 4.72 M-sector weight, half of them hits, the kernel ~10%
    /// slower than registers: docs/perf-notes.md, sessions 14 and 15); aligned, once.
    pub const fn ring_offset(&self) -> u32 {
        (self.flag_offset() + 16).next_multiple_of(1024)
    }

    /// Byte offset of the 16-byte last-arrival flag in the block's dynamic shared memory: right
    /// after the cross-warp reduction area (every warp's accumulators, `16 m_tiles` rows of
    /// [`SkinnyShape::red_stride`] f32).
    pub const fn flag_offset(&self) -> u32 {
        SKINNY_WARPS * 16 * self.m_tiles * self.red_stride() * 4
    }

    /// Bytes of dynamic shared memory of a block: the cross-warp reduction area (every warp's
    /// accumulators, `16 m_tiles` rows of [`SkinnyShape::red_stride`] f32), 16 bytes for the
    /// last-arrival flag, then the weight's ring ([`SkinnyShape::ring_units`] stages).
    pub const fn smem_bytes(&self) -> u32 {
        self.ring_offset() + self.ring_units() * self.ring_stage_bytes()
    }

    /// f32 values of one workspace slot (one column block's partial: `16 m_tiles x cols`).
    pub const fn slot_floats(&self) -> u32 {
        16 * self.m_tiles * self.cols()
    }
}

/// `m16` tiles a kernel needs for `m` rows: 1, 2 or 4 (`m <= 64`).
pub const fn skinny_m_tiles(m: u32) -> u32 {
    if m <= 16 {
        1
    } else if m <= 32 {
        2
    } else {
        4
    }
}

/// The shape of the skinny stream-mode stage (`gemm_skinny_bf16_m16_stream`, the MLP's
/// `MlpKernel::Skinny`): one `m16` tile; its column blocks are the stage's tiles.
pub const SKINNY_STAGE_SHAPE: SkinnyShape = SkinnyShape::for_m(16, false);

/// The kernel parameter of the skinny entry points after the [`crate::gemm::GemmParams`]:
/// the launch's plan and its workspace.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SkinnyArgs {
    /// f32 partial slots, two per block ([`SkinnyPlan::slot`]), each
    /// [`SkinnyShape::slot_floats`] floats.
    pub workspace: u64,
    /// One u32 arrival counter per column block, zero between launches.
    pub counters: u64,
    /// Column blocks (`ceil(N / 64)`).
    pub col_blocks: u32,
    /// Chunks per column block (`ceil(K / (8 K units))`).
    pub chunks_per_block: u32,
    /// Blocks of the launch (its grid).
    pub ctas: u32,
    /// Padding; always 0.
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<SkinnyArgs>() == 32);

/// A launch's decomposition: column blocks, chunks, blocks (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkinnyPlan {
    /// Column blocks.
    pub col_blocks: u32,
    /// Chunks per column block.
    pub chunks_per_block: u32,
    /// Blocks.
    pub ctas: u32,
}

/// One block's share of one column block: chunks `[begin, end)` of it (counted within the
/// column block), the workspace slot it writes when it is not the only contributor, and the
/// contributors `[first_cta, last_cta]` whose slots the last arrival sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkinnySegment {
    /// The column block.
    pub col_block: u32,
    /// First chunk within the column block.
    pub begin: u32,
    /// One past the last chunk.
    pub end: u32,
    /// First block that computes part of the column block.
    pub first_cta: u32,
    /// Last block that computes part of it (equal to `first_cta`: stored directly).
    pub last_cta: u32,
}

impl SkinnySegment {
    /// Blocks that compute part of this column block (its arrival counter's target).
    pub const fn contributors(&self) -> u32 {
        self.last_cta - self.first_cta + 1
    }
}

impl SkinnyPlan {
    /// The plan of an `n`-column, `k`-deep product for a kernel of shape `shape` on `ctas`
    /// resident blocks (at most one block per chunk: a smaller problem gets fewer blocks).
    pub const fn new(n: u32, k: u32, shape: SkinnyShape, ctas: u32) -> Self {
        let col_blocks = n.div_ceil(shape.cols());
        let chunk_rows = SKINNY_WARPS * shape.k_unit();
        let chunks_per_block = if k == 0 { 1 } else { k.div_ceil(chunk_rows) };
        let chunks = col_blocks as u64 * chunks_per_block as u64;
        let ctas = if (ctas as u64) > chunks {
            chunks as u32
        } else if ctas == 0 {
            1
        } else {
            ctas
        };
        Self {
            col_blocks,
            chunks_per_block,
            ctas,
        }
    }

    /// The plan the device reads back from its [`SkinnyArgs`].
    pub const fn from_args(a: &SkinnyArgs) -> Self {
        Self {
            col_blocks: a.col_blocks,
            chunks_per_block: a.chunks_per_block,
            ctas: a.ctas,
        }
    }

    /// All chunks of the launch.
    pub const fn chunks(&self) -> u64 {
        self.col_blocks as u64 * self.chunks_per_block as u64
    }

    /// Block `cta`'s chunks `[begin, end)`, counted over the column blocks laid end to end.
    pub const fn range(&self, cta: u32) -> (u64, u64) {
        let (c, g) = (self.chunks(), self.ctas as u64);
        (cta as u64 * c / g, (cta as u64 + 1) * c / g)
    }

    /// The block whose range holds chunk `chunk` (`chunk < chunks()`).
    pub const fn cta_of(&self, chunk: u64) -> u32 {
        // The largest `cta` with `cta * C / G <= chunk`, i.e. `cta * C < (chunk + 1) * G`.
        let (c, g) = (self.chunks(), self.ctas as u64);
        (((chunk + 1) * g).div_ceil(c) - 1) as u32
    }

    /// The blocks `(first, last)` that compute part of `col_block` (`first == last`: one block
    /// computes it whole and stores it directly).
    pub const fn contributors(&self, col_block: u32) -> (u32, u32) {
        let begin = col_block as u64 * self.chunks_per_block as u64;
        (
            self.cta_of(begin),
            self.cta_of(begin + self.chunks_per_block as u64 - 1),
        )
    }

    /// The segment of block `cta` that starts at chunk `at` of its range (`at` inside the
    /// range): up to the end of the range or of the column block, whichever is first.
    pub const fn segment(&self, cta: u32, at: u64) -> SkinnySegment {
        let (_, end) = self.range(cta);
        let cpb = self.chunks_per_block as u64;
        let col_block = at / cpb;
        let block_begin = col_block * cpb;
        let block_end = block_begin + cpb;
        let seg_end = if end < block_end { end } else { block_end };
        let (first_cta, last_cta) = self.contributors(col_block as u32);
        SkinnySegment {
            col_block: col_block as u32,
            begin: (at - block_begin) as u32,
            end: (seg_end - block_begin) as u32,
            first_cta,
            last_cta,
        }
    }

    /// The workspace slot block `cta` writes its partial of `col_block` to: `2 cta` for the
    /// first column block of its range, `2 cta + 1` for its last (a range holds at most two
    /// partial column blocks: every one in between is whole, it alone computes it).
    pub const fn slot(&self, cta: u32, col_block: u32) -> u32 {
        let first_block = (self.range(cta).0 / self.chunks_per_block as u64) as u32;
        2 * cta + if col_block == first_block { 0 } else { 1 }
    }

    /// Workspace slots a launch needs.
    pub const fn slots(&self) -> u32 {
        2 * self.ctas
    }
}

/// The tile grid of a skinny GeMM of shape `shape` as a stream-mode stage over an `n`-column
/// output: one row tile (`M <= 64`) and one column tile per column block. Its tiles are what
/// the stage posts (a column block is complete once its sole contributor or last arrival
/// stored it).
pub const fn stage_grid(n: u32, shape: SkinnyShape) -> crate::Grid {
    crate::Grid::new(1, n.div_ceil(shape.cols()), 1)
}

/// Whether `policy`'s waits for a GeMM-row consumer of grid `consumer` depend only on the step,
/// never on the consumer's column tile: then the waits a skinny stage's block made for one
/// column block's K prefix cover the same prefix of every later column block, and the block
/// waits only on columns past it (`device/src/stream.rs`, the skinny hooks). The host refuses
/// a skinny consumer stage whose policy fails this.
pub fn waits_ignore_consumer_column(
    policy: crate::policy::PolicyKind,
    producer: crate::Grid,
    consumer: crate::Grid,
) -> bool {
    use crate::policy::{Step, SyncPolicy};
    (0..producer.y).all(|k| {
        let step = |y| {
            let tile = crate::TileIdx::new(0, y, 0);
            policy.wait(
                producer,
                consumer,
                tile,
                Step {
                    row: 0,
                    k,
                    first_in_row: k == 0,
                },
            )
        };
        let first = step(0);
        (1..consumer.y).all(|y| step(y) == first)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    /// Every kernel shape: one, two and four `m16` tiles of 64 columns, one of 128.
    const SHAPES: [SkinnyShape; 4] = [
        SkinnyShape::for_m(16, false),
        SkinnyShape::for_m(32, false),
        SkinnyShape::for_m(64, false),
        SkinnyShape::for_m(16, true),
    ];
    const M16: SkinnyShape = SkinnyShape::for_m(16, false);

    /// Walks every block's range segment by segment, as the kernel does.
    fn segments(plan: &SkinnyPlan) -> Vec<(u32, SkinnySegment)> {
        let mut out = Vec::new();
        for cta in 0..plan.ctas {
            let (mut at, end) = plan.range(cta);
            while at < end {
                let s = plan.segment(cta, at);
                assert!(s.begin < s.end, "empty segment {s:?}");
                out.push((cta, s));
                at += (s.end - s.begin) as u64;
            }
        }
        out
    }

    fn check(n: u32, k: u32, shape: SkinnyShape, ctas: u32) {
        let plan = SkinnyPlan::new(n, k, shape, ctas);
        let cpb = plan.chunks_per_block;
        // Every chunk of every column block is computed exactly once.
        let mut seen = vec![0u32; plan.chunks() as usize];
        let mut contributors = vec![Vec::new(); plan.col_blocks as usize];
        let mut slots = std::collections::HashSet::new();
        for (cta, s) in segments(&plan) {
            for c in s.begin..s.end {
                seen[(s.col_block * cpb + c) as usize] += 1;
            }
            contributors[s.col_block as usize].push((cta, s));
            if s.contributors() > 1 {
                assert!(slots.insert(plan.slot(cta, s.col_block)), "slot reused: {cta} {s:?}");
                assert!(plan.slot(cta, s.col_block) < plan.slots());
            }
        }
        assert!(seen.iter().all(|&x| x == 1), "n={n} k={k} ctas={ctas}: {seen:?}");
        for (cb, list) in contributors.iter().enumerate() {
            // The contributors are consecutive blocks, in order, and each segment names them.
            let ctas: Vec<u32> = list.iter().map(|(c, _)| *c).collect();
            let (first, last) = (ctas[0], *ctas.last().unwrap());
            assert_eq!(ctas, (first..=last).collect::<Vec<_>>(), "column block {cb}");
            for (_, s) in list {
                assert_eq!((s.first_cta, s.last_cta), (first, last), "column block {cb}");
            }
            assert_eq!(plan.contributors(cb as u32), (first, last), "column block {cb}");
            // Segments tile the column block in contributor order.
            assert_eq!(list[0].1.begin, 0);
            assert_eq!(list.last().unwrap().1.end, cpb);
            for w in list.windows(2) {
                assert_eq!(w[0].1.end, w[1].1.begin);
            }
        }
        // Ranges are balanced to within one chunk.
        let sizes: Vec<u64> = (0..plan.ctas).map(|c| plan.range(c).1 - plan.range(c).0).collect();
        assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        assert!(sizes.iter().all(|&s| s >= 1));
    }

    #[test]
    fn every_chunk_is_computed_once_and_partials_have_distinct_slots() {
        for &(n, k) in &[
            (6144, 12288),
            (12288, 6144),
            (64, 8),
            (8, 8),
            (200, 1000),
            (12288, 768),
            (1000, 24576),
        ] {
            for shape in SHAPES {
                for ctas in [1, 2, 7, 132, 264, 1000, 100_000] {
                    check(n, k, shape, ctas);
                }
            }
        }
    }

    #[test]
    fn the_owner_of_a_chunk_is_the_block_whose_range_holds_it() {
        let plan = SkinnyPlan::new(6144, 12288, M16, 132);
        for cta in 0..plan.ctas {
            let (b, e) = plan.range(cta);
            for chunk in b..e {
                assert_eq!(plan.cta_of(chunk), cta);
            }
        }
    }

    #[test]
    fn the_mlp_shapes_give_every_block_equal_work() {
        // GeMM1 and GeMM2 of the GPT-3 MLP at B <= 16, 132 blocks: 96 x 48 and 192 x 24 chunks.
        let g1 = SkinnyPlan::new(6144, 12288, M16, 132);
        assert_eq!((g1.col_blocks, g1.chunks_per_block), (96, 48));
        let g2 = SkinnyPlan::new(12288, 6144, M16, 132);
        assert_eq!((g2.col_blocks, g2.chunks_per_block), (192, 24));
        assert_eq!(g1.chunks(), g2.chunks());
        // B = 64 uses 16-row units: twice the chunks.
        let m64 = SkinnyShape::for_m(64, true);
        assert_eq!(m64.col_vectors, 1, "four m16 tiles stay 64 columns wide");
        assert_eq!(SkinnyPlan::new(6144, 12288, m64, 132).chunks_per_block, 96);
        // 128-column blocks of 16-row units: half the column blocks, twice the chunks each.
        let wide = SkinnyPlan::new(6144, 12288, SkinnyShape::for_m(1, true), 132);
        assert_eq!((wide.col_blocks, wide.chunks_per_block), (48, 96));
        assert_eq!(wide.chunks(), g1.chunks());
    }

    #[test]
    fn m_tiles_and_sizes_follow_m() {
        assert_eq!([1, 16, 17, 32, 33, 64].map(skinny_m_tiles), [1, 1, 2, 2, 4, 4]);
        assert_eq!(M16.k_unit(), 32);
        assert_eq!(SkinnyShape::for_m(33, false).k_unit(), 16);
        // Reduction area, flag, padding to 1024 bytes, then 4 ring stages of every lane's 8
        // vectors.
        assert_eq!(M16.ring_offset(), 35 * 1024);
        assert!(M16.ring_offset() >= 8 * 16 * 68 * 4 + 16);
        assert_eq!(M16.flag_offset(), 8 * 16 * 68 * 4);
        assert_eq!(M16.smem_bytes(), 35 * 1024 + 4 * 256 * 8 * 16);
        let wide = SkinnyShape::for_m(16, true);
        assert_eq!((wide.cols(), wide.k_unit(), wide.slot_floats()), (128, 16, 16 * 128));
        assert_eq!(wide.smem_bytes(), 67 * 1024 + 4 * 256 * 8 * 16);
        // Every shape fits the 227 KiB a block may have on sm_90 (and 163 KiB on sm_80 for the
        // m16 ones), its ring 1024-byte aligned.
        for m in [1, 17, 33] {
            for wide in [false, true] {
                let s = SkinnyShape::for_m(m, wide);
                assert!(s.smem_bytes() <= 227 * 1024, "{s:?}: {}", s.smem_bytes());
                assert_eq!(s.ring_offset() % 1024, 0);
            }
        }
        assert!(M16.smem_bytes() <= 163 * 1024);
        // A tiny problem gets one block per chunk at most.
        assert_eq!(SkinnyPlan::new(64, 8, M16, 132).ctas, 1);
    }

    #[test]
    fn the_built_in_gemm_policies_wait_alike_for_every_consumer_column() {
        use crate::policy::PolicyKind;
        let (producer, consumer) = (stage_grid(6144, M16), stage_grid(12288, M16));
        assert_eq!((producer.x, producer.y, consumer.y), (1, 96, 192));
        for policy in [
            PolicyKind::NoSync,
            PolicyKind::TileSync,
            PolicyKind::RowSync,
            PolicyKind::StridedSync { stride: 3 },
        ] {
            assert!(waits_ignore_consumer_column(policy, producer, consumer), "{policy:?}");
        }
    }
}
