//! The weight-streaming ceiling (issue 3): how fast one wave of blocks can read a `[K, N]`
//! row-major matrix once, as the skinny GeMM must, when each block reads runs of `run_bytes`
//! per row. No arithmetic but an XOR, so what it measures is the memory system under that
//! access pattern: the skinny kernel's (64-column blocks: 128-byte runs) against wider runs.
//!
//! The matrix is cut like the skinny plan: column blocks of `run_bytes` x 256-row chunks,
//! laid end to end column block by column block or chunk by chunk ([`ORDER_CHUNK_MAJOR`]), and
//! one balanced range of those units per block. Thread `tid` loads 16-byte vectors
//! `tid + 256 j` of each unit (row-major in the unit), or, with [`ORDER_ROW_BLOCKED`], one
//! column down `run / 16` consecutive rows (the skinny GeMM's rows per lane), `D` loads at a time,
//! the next `D` issued before the previous ones are folded in. Addresses advance by adds (a
//! division per load would make the probe instruction-bound, not memory-bound).

use super::gemm::skinny::ld_stream_v4;
use crate::ptx::{copy, ids, smem};
use cusync_shared::read_probe::{ORDER_CHUNK_MAJOR, ORDER_ROW_BLOCKED};

/// Rows per unit (the skinny plan's chunk: 8 warps x 32 rows).
const PROBE_CHUNK_ROWS: u32 = 256;
/// Threads per block.
const PROBE_THREADS: u32 = 256;

/// The probe's geometry, from the launch's arguments.
struct Probe {
    row_bytes: u32,
    run_bytes: u32,
    col_blocks: u32,
    chunks: u32,
    chunk_major: bool,
    /// A thread's loads of a unit run down consecutive rows ([`ORDER_ROW_BLOCKED`]).
    row_blocked: bool,
}

/// Where a thread's next load is: unit `(cb, ch)`, its load `j` of the unit, at `at` bytes;
/// `thread_at` is the thread's first vector's offset in any unit.
struct Cursor {
    cb: u32,
    ch: u32,
    j: u32,
    at: usize,
    thread_at: usize,
}

impl Probe {
    /// 16-byte vectors per unit row.
    #[inline(always)]
    fn vectors_per_row(&self) -> u32 {
        self.run_bytes / 16
    }

    /// Loads per thread and unit (a unit is 256 rows of `vectors_per_row` vectors).
    #[inline(always)]
    fn loads_per_unit(&self) -> u32 {
        self.vectors_per_row()
    }

    /// Bytes between a thread's consecutive loads of a unit: one row when row-blocked;
    /// otherwise thread `tid` loads vectors `tid + 256 j`: with at most 256 vectors a row (a
    /// power of two) that is `256 / vpr` rows on, and with whole rows (the unit one contiguous
    /// run) 4096 bytes on.
    #[inline(always)]
    fn step(&self) -> usize {
        let vpr = self.vectors_per_row();
        if self.row_blocked {
            self.row_bytes as usize
        } else if self.run_bytes == self.row_bytes {
            16 * PROBE_THREADS as usize
        } else {
            (PROBE_THREADS / vpr) as usize * self.row_bytes as usize
        }
    }

    /// The cursor at unit `u` (in the launch's order), load 0 of thread `tid`.
    #[inline(always)]
    fn cursor(&self, u: u32, tid: u32) -> Cursor {
        let (cb, ch) = if self.chunk_major {
            (u % self.col_blocks, u / self.col_blocks)
        } else {
            (u / self.chunks, u % self.chunks)
        };
        let vpr = self.vectors_per_row();
        // Thread `tid`'s first vector of any unit, from the unit's start (computed once: a
        // division per unit would cost more than the loads' issue).
        let thread_at = if self.row_blocked {
            // Group `tid / vpr` of `vpr` threads owns `vpr` consecutive rows of the unit.
            (tid / vpr * vpr) as usize * self.row_bytes as usize + 16 * (tid % vpr) as usize
        } else if self.run_bytes == self.row_bytes {
            16 * tid as usize
        } else {
            (tid / vpr) as usize * self.row_bytes as usize + 16 * (tid % vpr) as usize
        };
        let mut c = Cursor {
            cb,
            ch,
            j: 0,
            at: 0,
            thread_at,
        };
        self.place(&mut c);
        c
    }

    /// Sets `c.at` to the thread's first vector of unit `(c.cb, c.ch)`.
    #[inline(always)]
    fn place(&self, c: &mut Cursor) {
        c.at = c.ch as usize * (PROBE_CHUNK_ROWS * self.row_bytes) as usize
            + (c.cb * self.run_bytes) as usize
            + c.thread_at;
    }

    /// Moves `c` to the thread's next load: the next vector of the unit, or the first of the
    /// next unit in the launch's order.
    #[inline(always)]
    fn advance(&self, c: &mut Cursor) {
        c.j += 1;
        if c.j < self.loads_per_unit() {
            c.at += self.step();
            return;
        }
        c.j = 0;
        if self.chunk_major {
            c.cb += 1;
            if c.cb == self.col_blocks {
                c.cb = 0;
                c.ch += 1;
            }
        } else {
            c.ch += 1;
            if c.ch == self.chunks {
                c.ch = 0;
                c.cb += 1;
            }
        }
        self.place(c);
    }
}

/// Streams this block's range with `D` (a multiple of 8) loads in flight per thread (two
/// groups of `D` at the turn), and returns the XOR of everything it read.
///
/// # Safety
/// `base` holds `rows x row_bytes` readable bytes, 16-byte aligned, unwritten during the
/// launch, `rows` a multiple of 256.
#[inline(always)]
unsafe fn stream_range<const D: usize>(base: *const u8, probe: &Probe) -> u32 {
    let units = probe.col_blocks * probe.chunks;
    let (bid, grid) = (ids::block_linear(), ids::nctaid_x());
    let first = (units as u64 * bid as u64 / grid as u64) as u32;
    let last = (units as u64 * (bid as u64 + 1) / grid as u64) as u32;
    let total = (last - first) * probe.loads_per_unit();
    let tid = ids::thread_linear();
    let mut cursor = probe.cursor(first, tid);
    // Load `i` of the thread's sequence (`i < total`: inside the matrix by the contract), then
    // the cursor moves on.
    let mut load = |i: u32| -> [u32; 4] {
        let live = i < total;
        // SAFETY: inside the matrix when `live` (the caller's contract), 16-byte aligned
        // (row_bytes and run_bytes multiples of 16); predicated off otherwise.
        let v = unsafe { ld_stream_v4(base.wrapping_add(cursor.at) as *const u32, live) };
        if live {
            probe.advance(&mut cursor);
        }
        v
    };
    let mut acc = 0u32;
    let mut cur = [[0u32; 4]; D];
    unroll!(h < D / 8, {
        unroll!(d < 8, {
            cur[8 * h + d] = load((8 * h + d) as u32);
        });
    });
    let mut i = 0u32;
    while i < total {
        let mut next = [[0u32; 4]; D];
        unroll!(h < D / 8, {
            unroll!(d < 8, {
                next[8 * h + d] = load(i + (D + 8 * h + d) as u32);
            });
        });
        unroll!(h < D / 8, {
            unroll!(d < 8, {
                let v = cur[8 * h + d];
                acc ^= v[0] ^ v[1] ^ v[2] ^ v[3];
            });
        });
        cur = next;
        i += D as u32;
    }
    acc
}

/// A thread's `cp.async` ring: its loads `0 .. total` of the matrix at `base`, into its slots
/// of the ring at shared address `ring`.
struct AsyncCopies {
    base: *const u8,
    ring: u32,
    tid: u32,
    total: u32,
}

impl AsyncCopies {
    /// Slot `s` of the thread: 16 bytes at `ring + 16 (256 s + tid)` (a warp's slots adjacent).
    #[inline(always)]
    fn slot(&self, s: u32) -> u32 {
        self.ring + 16 * (PROBE_THREADS * s + self.tid)
    }

    /// Issues group `n` (loads `8 n .. 8 n + 8`, from `cursor` on) into ring group `n % G`,
    /// and commits it.
    ///
    /// # Safety
    /// As for [`stream_range_async`].
    #[inline(always)]
    unsafe fn issue<const G: usize>(&self, probe: &Probe, cursor: &mut Cursor, n: u32) {
        let g = n % G as u32;
        unroll!(d < 8, {
            let i = 8 * n + d as u32;
            let live = i < self.total;
            // SAFETY: inside the matrix when `live` (the caller's contract), 16-byte aligned;
            // a dead copy reads nothing (0 source bytes) and zero-fills the slot.
            unsafe {
                copy::cp_async_16(
                    self.slot(8 * g + d as u32),
                    self.base.wrapping_add(cursor.at),
                    16 * live as u32,
                )
            };
            if live {
                probe.advance(cursor);
            }
        });
        copy::commit_group();
    }
}

/// [`stream_range`] through `cp.async` instead of registers: each thread keeps `G` groups of 8
/// 16-byte copies in flight into its own shared-memory slots (`G x 32 KiB` a block), waits for
/// the oldest group and folds it in. A thread reads back only what it copied, so its own
/// `cp.async.wait_group` is all the ordering it needs.
///
/// # Safety
/// As for [`stream_range`]; `G1 = G - 1`; the launch has `G x 32 KiB` of dynamic shared memory.
#[inline(always)]
unsafe fn stream_range_async<const G: usize, const G1: u32>(base: *const u8, probe: &Probe) -> u32 {
    let units = probe.col_blocks * probe.chunks;
    let (bid, grid) = (ids::block_linear(), ids::nctaid_x());
    let first = (units as u64 * bid as u64 / grid as u64) as u32;
    let last = (units as u64 * (bid as u64 + 1) / grid as u64) as u32;
    let total = (last - first) * probe.loads_per_unit();
    let tid = ids::thread_linear();
    let mut cursor = probe.cursor(first, tid);
    let ring = smem::dynamic_addr();
    let copies = AsyncCopies { base, ring, tid, total };
    unroll!(n < G - 1, {
        // SAFETY: the caller's contract.
        unsafe { copies.issue::<G>(probe, &mut cursor, n as u32) };
    });
    let mut acc = 0u32;
    let mut n = 0u32;
    while 8 * n < total {
        // SAFETY: the caller's contract.
        unsafe { copies.issue::<G>(probe, &mut cursor, n + G as u32 - 1) };
        copy::wait_group::<G1>();
        let g = n % G as u32;
        unroll!(d < 8, {
            // SAFETY: the thread's own slot, its copy complete (the wait above).
            let v = unsafe { smem::ld_v4_u32(copies.slot(8 * g + d as u32)) };
            acc ^= v[0] ^ v[1] ^ v[2] ^ v[3];
        });
        n += 1;
    }
    copy::wait_all();
    acc
}

macro_rules! probe_entry {
    ($(#[$doc:meta])* $name:ident, $body:path) => {
        $(#[$doc])*
        ///
        /// Launch one block of 256 threads per SM (one wave); `out[block * 256 + thread]` gets
        /// the XOR of what the thread read (so nothing is optimised away).
        ///
        /// # Safety
        /// `base` holds `rows x row_bytes` readable bytes (16-byte aligned, unwritten during the
        /// launch), `rows` a multiple of 256; `run_bytes` is `row_bytes` (a multiple of 4096) or
        /// a power of two from 128 to 4096 dividing it; `order` is a set of the
        /// `cusync_shared::read_probe` flags, without [`ORDER_ROW_BLOCKED`] for whole rows;
        /// `out` holds `grid x 256` words.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            base: *const u8,
            rows: u32,
            row_bytes: u32,
            run_bytes: u32,
            order: u32,
            out: *mut u32,
        ) {
            let probe = Probe {
                row_bytes,
                run_bytes,
                col_blocks: row_bytes / run_bytes,
                chunks: rows.div_ceil(PROBE_CHUNK_ROWS),
                chunk_major: order & ORDER_CHUNK_MAJOR != 0,
                row_blocked: order & ORDER_ROW_BLOCKED != 0,
            };
            // SAFETY: the caller's contract.
            let acc = unsafe { $body(base, &probe) };
            let at = (ids::block_linear() * PROBE_THREADS + ids::thread_linear()) as usize;
            // SAFETY: `out` holds grid x 256 words.
            unsafe { *out.add(at) = acc };
        }
    };
}

probe_entry!(
    /// The read probe with 8 loads (128 bytes) in flight per thread, 16 at the turn.
    bench_read_runs_d8,
    stream_range::<8>
);
probe_entry!(
    /// The read probe with 16 loads (256 bytes) in flight per thread, 32 at the turn.
    bench_read_runs_d16,
    stream_range::<16>
);
probe_entry!(
    /// The read probe through `cp.async`, 4 groups of 8 copies (128 KiB a block) in flight.
    bench_read_async_g4,
    stream_range_async::<4, 3>
);
probe_entry!(
    /// The read probe through `cp.async`, 6 groups of 8 copies (192 KiB a block) in flight.
    bench_read_async_g6,
    stream_range_async::<6, 5>
);
