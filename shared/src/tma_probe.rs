//! The TMA streaming probe (issue 3): how fast blocks stream a row-major weight `[K, N]` through
//! the same machinery as the path-2 GeMM (TMA boxes into `mbarrier`-tracked shared-memory
//! stages), with no arithmetic, under a chosen cut of the weight. It separates what the memory
//! system gives a pattern from what the GeMM kernel does with it: strip width, box width and
//! swizzle, stages in flight, a batch operand's box beside the weight's (of 64 or 128 rows,
//! the rows past the batch zero-filled as the 128-row tiles load them), L2 promotion, and how
//! the strips are divided among blocks (whole strips, split along K, or stream-K ranges that
//! cross strip edges, exactly the GeMM's `cusync_shared::stream_k` ranges).
//!
//! Facts both sides read: the kernel parameter [`TmaProbeParams`], a block's work list
//! ([`ProbeSegment`]), its result ([`ProbeBlock`]), the stage layout ([`ProbeStage`]) and the
//! expected checksum of a segment ([`segment_checksum`]). The device kernel is
//! `bench_tma_stream` (device/src/kernels/tma_probe.rs); the host plans, launches and checks it
//! (host/src/ops/tma_probe.rs, `cusync run tma-probe`).
//!
//! **Checksum.** Every consumer thread XORs the 32-bit words of the stage bytes it reads; the
//! block's words XOR to one value. The swizzles permute 16-byte chunks, never split a word,
//! so the value is the XOR of every 32-bit word of every box the block loaded, in any layout:
//! for 16-bit elements at even column offsets, the low half is the XOR of the even columns'
//! elements and the high half the odd columns'. Out-of-bounds rows are zero and add nothing.

use crate::layout::DevAddr;
use bytemuck::{Pod, Zeroable};

/// K-rows per stage (one 128-byte swizzle row of 16-bit elements, as the GeMM's `WG_BK`).
pub const PROBE_BK: u32 = 64;
/// Consumer warps per block (warps 0 to 3): each reads a quarter of every stage.
pub const PROBE_CONSUMER_WARPS: u32 = 4;
/// Threads per block: the consumer warps, then one warp whose lane 0 issues the loads.
pub const PROBE_THREADS: u32 = 32 * (PROBE_CONSUMER_WARPS + 1);
/// The most pipeline stages a launch may ask for.
pub const PROBE_MAX_STAGES: u32 = 16;
/// Alignment of the stage base (the 128-byte swizzle's 1024-byte atoms).
pub const PROBE_SMEM_ALIGN: u32 = 1024;
/// Bytes a stage's size must be a multiple of: every consumer thread reads whole 16-byte
/// vectors, `PROBE_CONSUMER_WARPS * 32 * 16` bytes a round.
pub const PROBE_STAGE_QUANTUM: u32 = PROBE_CONSUMER_WARPS * 32 * 16;
/// The error slot's stage field for a probe wait that timed out.
pub const PROBE_STAGE_ID: u32 = 0x7072_6f62; // "prob"

/// The kernel parameter of `bench_tma_stream`, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct TmaProbeParams {
    /// Three tensor maps (128 bytes each, 64-byte aligned): the weight in boxes of
    /// `wide_cols` x [`PROBE_BK`], the weight in boxes of `narrow_cols` x [`PROBE_BK`], the
    /// batch operand `[rows, K]` in boxes of [`PROBE_BK`] x `batch_box_rows`. Unused maps are
    /// zero.
    pub maps: DevAddr,
    /// The segments of every block, block by block ([`ProbeSegment`]).
    pub segments: DevAddr,
    /// `blocks + 1` offsets into `segments`: block `b` runs `[offsets[b], offsets[b + 1])`.
    pub block_segments: DevAddr,
    /// One [`ProbeBlock`] per block.
    pub out: DevAddr,
    /// The launch's `ErrorSlot` (0: none) for a stage wait that times out.
    pub error: DevAddr,
    /// Bound on every stage wait, in nanoseconds.
    pub timeout_ns: u64,
    /// The stage layout.
    pub stage: ProbeStage,
    /// Pipeline stages (2 to [`PROBE_MAX_STAGES`]).
    pub stages: u32,
}

/// What one stage holds: `wide_boxes` weight boxes of `wide_cols` columns, then
/// `narrow_boxes` of `narrow_cols`, then (if `batch_box_rows` is not 0) one box of the batch
/// operand, each [`PROBE_BK`] K-rows, back to back.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ProbeStage {
    /// Weight boxes of `wide_cols` columns per stage.
    pub wide_boxes: u32,
    /// Columns of a wide box: 16, 32 or 64 (32-, 64- or 128-byte swizzle rows).
    pub wide_cols: u32,
    /// Weight boxes of `narrow_cols` columns after the wide ones (0 or 1).
    pub narrow_boxes: u32,
    /// Columns of a narrow box: 0, 16 or 32.
    pub narrow_cols: u32,
    /// Rows of the batch operand's box (0: none, else 64 or 128; rows past the batch are
    /// zero-filled and still count as loaded bytes).
    pub batch_box_rows: u32,
}

impl ProbeStage {
    /// Weight columns a stage covers (the strip width).
    pub const fn strip_cols(&self) -> u32 {
        self.wide_boxes * self.wide_cols + self.narrow_boxes * self.narrow_cols
    }

    /// Bytes of one wide weight box.
    pub const fn wide_box_bytes(&self) -> u32 {
        self.wide_cols * 2 * PROBE_BK
    }

    /// Bytes of one narrow weight box.
    pub const fn narrow_box_bytes(&self) -> u32 {
        self.narrow_cols * 2 * PROBE_BK
    }

    /// Bytes of the weight per stage.
    pub const fn weight_bytes(&self) -> u32 {
        self.wide_boxes * self.wide_box_bytes() + self.narrow_boxes * self.narrow_box_bytes()
    }

    /// Bytes of the batch box per stage.
    pub const fn batch_bytes(&self) -> u32 {
        self.batch_box_rows * PROBE_BK * 2
    }

    /// Bytes of one stage (its barrier's transaction count).
    pub const fn stage_bytes(&self) -> u32 {
        self.weight_bytes() + self.batch_bytes()
    }

    /// Offset of narrow box `j` in a stage.
    pub const fn narrow_offset(&self, j: u32) -> u32 {
        self.wide_boxes * self.wide_box_bytes() + j * self.narrow_box_bytes()
    }

    /// Offset of the batch box in a stage.
    pub const fn batch_offset(&self) -> u32 {
        self.weight_bytes()
    }

    /// Dynamic shared memory of a launch with `stages` stages: the stages, their `full` and
    /// `empty` barriers, the consumers' checksum words, and slack to align the base.
    pub const fn smem_bytes(&self, stages: u32) -> u32 {
        stages * self.stage_bytes() + 16 * stages + 4 * PROBE_CONSUMER_WARPS * 32 + PROBE_SMEM_ALIGN
    }

    /// Offset (from the aligned base) of the barriers: `full[s]` at `8 s`, `empty[s]` at
    /// `8 (stages + s)`.
    pub const fn barrier_offset(&self, stages: u32) -> u32 {
        stages * self.stage_bytes()
    }

    /// Offset (from the aligned base) of the consumers' checksum words, one per thread.
    pub const fn checksum_offset(&self, stages: u32) -> u32 {
        self.barrier_offset(stages) + 16 * stages
    }
}

/// One piece of a block's work: weight columns `[col0, col0 + strip_cols)` over K-steps
/// `[k_begin, k_end)` (of [`PROBE_BK`] rows).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ProbeSegment {
    /// First weight column.
    pub col0: u32,
    /// First K-step.
    pub k_begin: u32,
    /// One past the last K-step.
    pub k_end: u32,
    /// Padding; always 0.
    pub _pad: u32,
}

/// What one block reports (written once, by thread 0, after the block's last stage).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ProbeBlock {
    /// XOR of every 32-bit word the block loaded (module docs).
    pub checksum: u32,
    /// Stages the block's consumers took (the sum of its segments' K-steps unless a wait
    /// timed out).
    pub steps: u32,
    /// SM the block ran on.
    pub sm: u32,
    /// 1 once written.
    pub written: u32,
    /// `%globaltimer` after the block's setup barrier.
    pub t_start: u64,
    /// `%globaltimer` when its first stage had landed (its first load's latency).
    pub t_first: u64,
    /// `%globaltimer` after its last stage was read.
    pub t_end: u64,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<ProbeStage>() == 20);
    assert!(size_of::<TmaProbeParams>() == 72);
    assert!(offset_of!(TmaProbeParams, stage) == 48);
    assert!(size_of::<ProbeSegment>() == 16);
    assert!(size_of::<ProbeBlock>() == 40);
};

/// The checksum word of 16-bit elements `row` (a weight row, or a batch row for the batch
/// box): columns `[col0, col0 + cols)` of `row`, where `col0` is even: the even columns' XOR in
/// the low half, the odd columns' in the high half.
pub fn row_checksum(row: &[u16], col0: usize, cols: usize) -> u32 {
    debug_assert!(col0.is_multiple_of(2));
    let mut lo = 0u16;
    let mut hi = 0u16;
    for (i, &v) in row[col0..col0 + cols].iter().enumerate() {
        if i % 2 == 0 {
            lo ^= v;
        } else {
            hi ^= v;
        }
    }
    lo as u32 | (hi as u32) << 16
}

/// The checksum of one segment's loads (module docs): the weight `w` (`k` rows of `n`
/// elements) in columns `[seg.col0, seg.col0 + stage.strip_cols())` of the segment's K-rows,
/// and with a batch box, rows `0..min(batch_rows, batch_box_rows)` of `x` (`batch_rows` rows
/// of `k` elements) at the same K-columns. Rows or columns past the matrices are zero.
pub fn segment_checksum(
    w: &[u16],
    k: usize,
    n: usize,
    x: &[u16],
    batch_rows: usize,
    stage: &ProbeStage,
    seg: &ProbeSegment,
) -> u32 {
    let mut sum = 0u32;
    let cols = stage.strip_cols() as usize;
    let col0 = seg.col0 as usize;
    let cols_in = cols.min(n.saturating_sub(col0));
    for kt in seg.k_begin..seg.k_end {
        let r0 = kt as usize * PROBE_BK as usize;
        for r in r0..(r0 + PROBE_BK as usize).min(k) {
            if cols_in > 0 {
                sum ^= row_checksum(&w[r * n..(r + 1) * n], col0, cols_in);
            }
        }
        if stage.batch_box_rows != 0 {
            let rows = batch_rows.min(stage.batch_box_rows as usize);
            let kc = (PROBE_BK as usize).min(k.saturating_sub(r0));
            for b in 0..rows {
                sum ^= row_checksum(&x[b * k..(b + 1) * k], r0, kc);
            }
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn stage(wide_cols: u32, wide_boxes: u32, narrow_cols: u32, batch_box_rows: u32) -> ProbeStage {
        ProbeStage {
            wide_boxes,
            wide_cols,
            narrow_boxes: (narrow_cols != 0) as u32,
            narrow_cols,
            batch_box_rows,
        }
    }

    #[test]
    fn stage_layouts_add_up() {
        // The GeMM2 whole-tile pattern: two 64-column boxes and a 64-row batch box.
        let s = stage(64, 2, 0, 64);
        assert_eq!(s.strip_cols(), 128);
        assert_eq!(s.stage_bytes(), 16384 + 8192);
        assert_eq!(s.batch_offset(), 16384);
        // 96 columns as 64 + 32, with a 128-row batch box (half of it past a 64-row batch).
        let s = stage(64, 1, 32, 128);
        assert_eq!(s.strip_cols(), 96);
        assert_eq!(s.narrow_offset(0), 8192);
        assert_eq!(s.stage_bytes(), 8192 + 4096 + 16384);
        assert_eq!(s.stage_bytes() % PROBE_STAGE_QUANTUM, 0);
        // 9 stages of 24 KiB fit the 227 KiB an H200 block may take.
        assert!(stage(64, 2, 0, 64).smem_bytes(9) <= 232_448);
        assert_eq!(s.checksum_offset(4), 4 * s.stage_bytes() + 64);
    }

    /// The box-by-box checksum the device computes, simulated word by word in a permuted
    /// (swizzled) order, equals [`segment_checksum`].
    #[test]
    fn checksum_is_the_xor_of_every_loaded_word_in_any_order() {
        let (k, n, batch) = (200usize, 96usize, 3usize);
        let mut seed = 0x1234_5678u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as u16
        };
        let w: Vec<u16> = (0..k * n).map(|_| next()).collect();
        let x: Vec<u16> = (0..batch * k).map(|_| next()).collect();
        for st in [stage(32, 3, 0, 0), stage(64, 1, 32, 128), stage(16, 2, 0, 64)] {
            let cols = st.strip_cols() as usize;
            let seg = ProbeSegment {
                col0: (n - cols) as u32,
                k_begin: 1,
                k_end: 4, // rows 64..256, past K = 200: zero-filled
                _pad: 0,
            };
            // Words as TMA would write them: boxes row by row, then reversed (any permutation).
            let mut words = Vec::new();
            for kt in seg.k_begin..seg.k_end {
                for r in kt as usize * 64..kt as usize * 64 + 64 {
                    for c in (0..cols).step_by(2) {
                        let at = |cc: usize| if r < k { w[r * n + seg.col0 as usize + cc] } else { 0 };
                        words.push(at(c) as u32 | (at(c + 1) as u32) << 16);
                    }
                }
                for b in 0..st.batch_box_rows as usize {
                    for c in (0..64).step_by(2) {
                        let at = |cc: usize| {
                            let kk = kt as usize * 64 + cc;
                            if b < batch && kk < k {
                                x[b * k + kk]
                            } else {
                                0
                            }
                        };
                        words.push(at(c) as u32 | (at(c + 1) as u32) << 16);
                    }
                }
            }
            words.reverse();
            let device = words.iter().fold(0, |a, w| a ^ w);
            assert_eq!(device, segment_checksum(&w, k, n, &x, batch, &st, &seg), "{st:?}");
            assert_ne!(device, 0);
        }
    }
}
