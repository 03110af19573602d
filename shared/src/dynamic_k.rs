//! Dynamic K-chunks: work stealing along K for the plain path-2 kernels.
//!
//! Where a launch has one tile per block (the swapped skinny GeMMs of the GPT-3 MLP at
//! B = 64), some SMs stream their operands ~20% slower than the rest (perf-notes, session 27:
//! the SM decides, not the tile), and their tiles end 8-10 µs after the median one. A static
//! split (split-K, stream-K) cannot know which SMs are slow. Here each tile's K-steps are cut
//! into `chunks` equal chunks ([`chunk_range`]) handed out by a per-tile claim counter:
//!
//! - Block `b` starts on tile `b % tiles` and claims its chunks one by one (relaxed atomic
//!   adds; the claim of the next chunk is issued while the current one loads, so its round
//!   trip is hidden). Consecutive chunks a block claims on one tile form a *run*: its
//!   consumers keep accumulating in registers.
//! - A claim past the last chunk ends the run. The block then scans the claim counters and
//!   steals from the tile with the most unclaimed chunks, until none is left.
//! - A run that covers all of its tile's K-steps stores the tile directly (no workspace). Any
//!   other run takes the next slot of its tile (`runs` counter), writes its f32 partial there,
//!   and adds its K-steps to the tile's `done` counter; the run that completes the count sums
//!   the tile's slots (its own from registers), stores it, and zeroes `done` and `runs`.
//! - The last block to leave (the `exit` counter) zeroes the claim counters, so every launch
//!   starts from zero without a memset.
//!
//! The sum's grouping depends on which runs formed, so results are not bitwise repeatable
//! across launches (they agree with the f64 reference to the same tolerance); kernels that
//! must be bitwise equal to another launch (stream mode) never use it.
//!
//! The counters of one launch live in one `u32` array laid out by [`DynLayout`]. The counter
//! protocol is written here once, over [`ProtocolMemory`], for the plain path-2 kernels'
//! `_dyn` entry points to run on the PTX atomics (their device side lands once it has run on
//! the H200); the host's checks (tests/loom_dynamic_k.rs, the tests below) run it on loom's and
//! std's atomics.

use crate::layout::DevAddr;
use crate::protocol::ProtocolMemory;

/// Word offsets of a launch's dynamic-K counters (one `u32` array of [`DynLayout::words`]
/// words, zero between launches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DynLayout {
    /// Tiles of the launch.
    pub tiles: u32,
}

/// Claim counters are read in groups of this many words (two 16-byte loads) by the victim
/// scan, and the claim array is padded to a multiple of it.
pub const CLAIM_SCAN_WORDS: u32 = 8;

impl DynLayout {
    /// Per tile: K-steps of the runs that have added their partial.
    pub const fn done(&self) -> u32 {
        0
    }

    /// Per tile: partial slots taken.
    pub const fn runs(&self) -> u32 {
        self.tiles
    }

    /// Per tile: chunks claimed (or tried: a claim past the last chunk still counts), 16-byte
    /// aligned for the scan's vector loads.
    pub const fn claims(&self) -> u32 {
        (2 * self.tiles).div_ceil(4) * 4
    }

    /// Words of the claim array: the tiles rounded up to [`CLAIM_SCAN_WORDS`] (the padding
    /// words are never claimed; the scan skips them by index).
    pub const fn claim_words(&self) -> u32 {
        self.tiles.div_ceil(CLAIM_SCAN_WORDS) * CLAIM_SCAN_WORDS
    }

    /// Blocks that have left the launch.
    pub const fn exit(&self) -> u32 {
        self.claims() + self.claim_words()
    }

    /// Words of the whole array.
    pub const fn words(&self) -> u32 {
        self.exit() + 4
    }

    /// Byte address of word `word` of the array at `counters`.
    pub const fn addr(counters: DevAddr, word: u32) -> DevAddr {
        counters + 4 * word as u64
    }
}

/// The K-steps `[begin, end)` of chunk `chunk` of `chunks` over `k_steps` (balanced; every
/// chunk non-empty when `chunks <= k_steps`).
pub const fn chunk_range(k_steps: u32, chunk: u32, chunks: u32) -> (u32, u32) {
    crate::gemm_sm90::split_range(k_steps, chunk, chunks)
}

/// Partial-tile slot of run `run` of tile `tile` (each tile has `chunks` slots: a tile has at
/// most one run per chunk).
pub const fn slot(tile: u32, run: u32, chunks: u32) -> u32 {
    tile * chunks + run
}

/// K-steps before a chunk's end at which a device producer claims the run's next chunk
/// ([`DynClaims::claim_ahead`]): late enough that a slow tile's owner holds little more than
/// its current chunk when others come to steal, early enough (two pipeline stages, about
/// 1.2 µs at the B = 64 GeMMs' streaming rate) for the atomic's round trip to return before
/// the chunk's last stage needs its result.
pub const CLAIM_LEAD_STEPS: u32 = 2;

/// Default chunks per tile for `k_steps` K-steps: 16, and at least 4 K-steps a chunk (a run
/// keeps a few pipeline stages of one chunk in flight while it claims the next), at least 1.
pub const fn default_chunks(k_steps: u32) -> u32 {
    let by_k = k_steps / 4;
    if by_k == 0 {
        1
    } else if by_k < 16 {
        by_k
    } else {
        16
    }
}

/// One launch's dynamic-K facts as a block sees them: its counter array, tiles and chunks per
/// tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DynLaunch {
    /// Address of the [`DynLayout`] array.
    pub counters: DevAddr,
    /// Tiles of the launch.
    pub tiles: u32,
    /// Chunks per tile (at least 1).
    pub chunks: u32,
}

impl DynLaunch {
    fn word(&self, word: u32) -> DevAddr {
        DynLayout::addr(self.counters, word)
    }

    fn claim_addr(&self, tile: u32) -> DevAddr {
        self.word(DynLayout { tiles: self.tiles }.claims() + tile)
    }
}

/// A block's claims (the producer thread's state): the tile of its current run and what the
/// claim issued ahead for that tile's next chunk returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DynClaims {
    /// The tile of the current run (before the first claim: the block's first tile,
    /// `block % tiles`).
    pub tile: u32,
    /// What the claim issued ahead returned: the run's next chunk, or the tile's chunks or
    /// more (the run ends with the current chunk); [`DynClaims::FIRST`] before the first
    /// claim.
    pub ahead: u32,
}

impl DynClaims {
    /// `ahead` before the block's first claim.
    pub const FIRST: u32 = u32::MAX;

    /// `ahead` after [`DynClaims::take`], before [`DynClaims::claim_ahead`]: the run's next
    /// chunk is not claimed yet.
    pub const PENDING: u32 = u32::MAX - 1;

    /// Block `block`'s state for a launch of `tiles` tiles.
    pub const fn new(block: u32, tiles: u32) -> Self {
        Self {
            tile: if tiles > 0 { block % tiles } else { 0 },
            ahead: Self::FIRST,
        }
    }

    /// [`DynClaims::take`] then [`DynClaims::claim_ahead`]: the next chunk, with the claim of
    /// the run's next chunk issued at once (on the device its result is first read at the
    /// chunk's last stage, [`DynClaims::continues`], so the round trip overlaps the loads).
    #[inline(always)]
    pub fn next<M: ProtocolMemory>(&mut self, mem: &M, launch: &DynLaunch) -> Option<(u32, u32)> {
        let taken = self.take(mem, launch)?;
        self.claim_ahead(mem, launch);
        Some(taken)
    }

    /// The next chunk `(tile, chunk)` this block computes, or `None` when every chunk of every
    /// tile is claimed. Continues the current run where the claim ahead succeeded; else
    /// claims on the block's first tile, then on the tile with the fewest claimed chunks
    /// ([`victim`]). Claims are relaxed fetch-adds: they only decide who computes a chunk; the
    /// data travels through [`count_in`]'s release and acquire. The run goes on past this
    /// chunk only if [`DynClaims::claim_ahead`] is called (and succeeds) before the next take.
    #[inline(always)]
    pub fn take<M: ProtocolMemory>(&mut self, mem: &M, launch: &DynLaunch) -> Option<(u32, u32)> {
        let chunks = launch.chunks;
        let (tile, chunk) = if self.ahead < chunks {
            (self.tile, self.ahead)
        } else {
            let mut first = self.ahead == Self::FIRST;
            loop {
                let t = if first {
                    first = false;
                    self.tile
                } else {
                    victim(mem, launch)?
                };
                let c = mem.fetch_add_relaxed(launch.claim_addr(t), 1);
                if c < chunks {
                    break (t, c);
                }
            }
        };
        self.tile = tile;
        self.ahead = Self::PENDING;
        Some((tile, chunk))
    }

    /// Claims the run's next chunk (once per [`DynClaims::take`]). The later it is issued
    /// within a chunk, the less of a slow tile its owner holds when others come to steal, but
    /// its result must be back by the chunk's last stage.
    #[inline(always)]
    pub fn claim_ahead<M: ProtocolMemory>(&mut self, mem: &M, launch: &DynLaunch) {
        self.ahead = mem.fetch_add_relaxed(launch.claim_addr(self.tile), 1);
    }

    /// Whether the run continues past the chunk taken last (its claim ahead succeeded).
    #[inline(always)]
    pub fn continues(&self, chunks: u32) -> bool {
        self.ahead < chunks
    }
}

/// The tile with the fewest claimed chunks among those with one left, or `None`. Reads the
/// claim counters [`CLAIM_SCAN_WORDS`] at a time ([`ProtocolMemory::load_relaxed_x4`]); only
/// a hint: the claim that follows decides.
#[inline(always)]
pub fn victim<M: ProtocolMemory>(mem: &M, launch: &DynLaunch) -> Option<u32> {
    let mut best = u32::MAX;
    let mut least = launch.chunks;
    let mut i = 0;
    while i < launch.tiles {
        // Both loads go out before either result is used. The group is read by constant
        // indices: an iterator over it (`zip(group.iter().flatten())`) put it in local memory
        // on the device (a 32-byte stack frame in the `_dyn` kernels, ptxas 13.0).
        let group = [
            mem.load_relaxed_x4(launch.claim_addr(i)),
            mem.load_relaxed_x4(launch.claim_addr(i + 4)),
        ];
        let mut q = 0;
        while q < 2 {
            let mut j = 0;
            while j < 4 {
                let t = i + 4 * q as u32 + j as u32;
                if t < launch.tiles && group[q][j] < least {
                    least = group[q][j];
                    best = t;
                }
                j += 1;
            }
            q += 1;
        }
        i += CLAIM_SCAN_WORDS;
    }
    if best == u32::MAX {
        None
    } else {
        Some(best)
    }
}

/// A run that did not cover its tile: the tile's next partial slot (index among its runs;
/// [`slot`] gives the workspace slot). One thread, before the block writes the partial.
#[inline(always)]
pub fn take_slot<M: ProtocolMemory>(mem: &M, launch: &DynLaunch, tile: u32) -> u32 {
    mem.fetch_add_relaxed(launch.word(DynLayout { tiles: launch.tiles }.runs() + tile), 1)
}

/// A run's partial is written (by the whole block, before a block barrier): releases it and
/// counts the run's `run_steps` K-steps in on the tile's `done` counter. The run that
/// completes the tile's `k_steps` gets `Some(runs)`, the number of the tile's slots to sum
/// (the others' partials are visible to it), and zeroes the tile's counters for the next
/// launch; the others get `None`.
#[inline(always)]
pub fn count_in<M: ProtocolMemory>(
    mem: &M,
    launch: &DynLaunch,
    tile: u32,
    run_steps: u32,
    k_steps: u32,
) -> Option<u32> {
    let lay = DynLayout { tiles: launch.tiles };
    let done = launch.word(lay.done() + tile);
    let runs = launch.word(lay.runs() + tile);
    mem.fence_acq_rel();
    let old = mem.fetch_add_acq_rel(done, run_steps);
    if old + run_steps != k_steps {
        return None;
    }
    // Every run of the tile took its slot before counting in; nobody touches the tile's
    // counters again in this launch.
    let n = mem.load_relaxed(runs);
    mem.store_relaxed(done, 0);
    mem.store_relaxed(runs, 0);
    Some(n)
}

/// A block's producer thread, once, when it is done claiming (for any reason): counts the
/// block out of the `blocks` of the launch; the last one out zeroes the claim counters and the
/// exit count for the next launch (nobody claims after leaving, and the count's
/// acquire-release chain orders every block's claims before the reset). Returns whether this
/// block reset them.
#[inline(always)]
pub fn leave<M: ProtocolMemory>(mem: &M, launch: &DynLaunch, blocks: u32) -> bool {
    let lay = DynLayout { tiles: launch.tiles };
    let exit = launch.word(lay.exit());
    mem.fence_acq_rel();
    if mem.fetch_add_acq_rel(exit, 1) + 1 != blocks {
        return false;
    }
    let mut i = 0;
    while i < lay.claim_words() {
        mem.store_relaxed(launch.word(lay.claims() + i), 0);
        i += 1;
    }
    mem.store_relaxed(exit, 0);
    true
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::protocol::AtomicWords;
    use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
    use std::vec::Vec;

    #[test]
    fn layout_regions_do_not_overlap_and_claims_are_vector_aligned() {
        for tiles in [1u32, 3, 4, 15, 16, 17, 48, 96, 131, 1000] {
            let l = DynLayout { tiles };
            assert!(l.runs() >= l.done() + tiles);
            assert!(l.claims() >= l.runs() + tiles);
            assert_eq!(l.claims() % 4, 0, "tiles {tiles}");
            assert!(l.claim_words() >= tiles);
            assert_eq!(l.claim_words() % CLAIM_SCAN_WORDS, 0);
            assert_eq!(l.claim_words() % 8, 0, "the scan reads 8 words a round");
            assert!(l.exit() >= l.claims() + tiles);
            assert!(l.words() > l.exit());
        }
    }

    #[test]
    fn chunks_cover_k_exactly_once() {
        for k in 1..200u32 {
            let chunks = default_chunks(k);
            assert!((1..=16).contains(&chunks) && chunks <= k.max(1));
            let mut next = 0;
            for c in 0..chunks {
                let (b, e) = chunk_range(k, c, chunks);
                assert_eq!(b, next);
                assert!(e > b, "k {k} chunk {c}");
                next = e;
            }
            assert_eq!(next, k);
        }
    }

    #[test]
    fn slots_are_distinct_per_tile_and_run() {
        let chunks = 16;
        let mut seen = std::collections::HashSet::new();
        for t in 0..96 {
            for r in 0..chunks {
                assert!(seen.insert(slot(t, r, chunks)));
            }
        }
        assert_eq!(seen.len(), 96 * 16);
        assert_eq!(seen.iter().max(), Some(&(96 * 16 - 1)));
    }

    /// One block of a host model of a launch: claims chunks through the shared protocol,
    /// "computes" chunk `c` of tile `t` as `1 << c` (a chunk computed twice or never shows in
    /// the tile's sum), and finishes each run as the device's consumers do.
    struct Model<'a> {
        mem: &'a AtomicWords<'a>,
        launch: DynLaunch,
        k_steps: u32,
        slots: &'a [AtomicU64],
        outputs: &'a [AtomicU64],
        finals: &'a [AtomicU32],
    }

    impl Model<'_> {
        fn block(&self, block: u32, blocks: u32) {
            let (chunks, k_steps) = (self.launch.chunks, self.k_steps);
            let mut claims = DynClaims::new(block, self.launch.tiles);
            let (mut acc, mut steps, mut run_tile) = (0u64, 0u32, None);
            // Odd blocks issue the claim ahead late (after a yield), as a device producer may
            // a few stages before the chunk's end.
            while let Some((t, c)) = claims.take(self.mem, &self.launch) {
                if block % 2 == 1 {
                    std::thread::yield_now();
                }
                claims.claim_ahead(self.mem, &self.launch);
                assert!(run_tile.is_none_or(|r| r == t), "a run changed tile");
                run_tile = Some(t);
                let (b, e) = chunk_range(k_steps, c, chunks);
                acc += 1 << c;
                steps += e - b;
                if claims.continues(chunks) {
                    continue;
                }
                let done = if steps == k_steps {
                    Some(acc)
                } else {
                    let run = take_slot(self.mem, &self.launch, t);
                    assert!(run < chunks, "tile {t}: slot {run} past its {chunks}");
                    self.slots[slot(t, run, chunks) as usize].store(acc, Relaxed);
                    count_in(self.mem, &self.launch, t, steps, k_steps).map(|runs| {
                        (0..runs)
                            .filter(|&r| r != run)
                            .map(|r| self.slots[slot(t, r, chunks) as usize].load(Relaxed))
                            .sum::<u64>()
                            + acc
                    })
                };
                if let Some(sum) = done {
                    self.outputs[t as usize].store(sum, Relaxed);
                    self.finals[t as usize].fetch_add(1, Relaxed);
                }
                (acc, steps, run_tile) = (0, 0, None);
            }
            assert_eq!(steps, 0, "block {block} left a run unfinished");
            leave(self.mem, &self.launch, blocks);
        }
    }

    #[test]
    fn racing_blocks_compute_every_chunk_once_and_leave_the_counters_zeroed() {
        // (tiles, chunks, blocks, K-steps): one block per tile (the B = 64 launches), more
        // blocks than tiles (stealing from the first claim), fewer, one chunk, one K-step a
        // chunk, tiles past one 8-word scan group.
        for (tiles, chunks, blocks, k_steps) in [
            (1, 1, 1, 1),
            (1, 4, 6, 4),
            (3, 4, 5, 9),
            (7, 5, 3, 23),
            (16, 16, 16, 96),
            (13, 16, 40, 96),
            (40, 3, 64, 7),
        ] {
            let lay = DynLayout { tiles };
            let words: Vec<AtomicU32> = (0..lay.words()).map(|_| AtomicU32::new(0)).collect();
            let mem = AtomicWords::new(0x1000, &words).with_backoff(|_| std::thread::yield_now());
            let launch = DynLaunch {
                counters: 0x1000,
                tiles,
                chunks,
            };
            let slots: Vec<AtomicU64> = (0..tiles * chunks).map(|_| AtomicU64::new(0)).collect();
            for relaunch in 0..3 {
                let outputs: Vec<AtomicU64> = (0..tiles).map(|_| AtomicU64::new(0)).collect();
                let finals: Vec<AtomicU32> = (0..tiles).map(|_| AtomicU32::new(0)).collect();
                let model = Model {
                    mem: &mem,
                    launch,
                    k_steps,
                    slots: &slots,
                    outputs: &outputs,
                    finals: &finals,
                };
                std::thread::scope(|s| {
                    for b in 0..blocks {
                        let model = &model;
                        s.spawn(move || model.block(b, blocks));
                    }
                });
                let full = (1u64 << chunks) - 1;
                for t in 0..tiles as usize {
                    let what =
                        std::format!("{tiles} tiles, {chunks} chunks, {blocks} blocks, launch {relaunch}, tile {t}");
                    assert_eq!(
                        finals[t].load(Relaxed),
                        1,
                        "{what}: stored {} times",
                        finals[t].load(Relaxed)
                    );
                    assert_eq!(outputs[t].load(Relaxed), full, "{what}: a chunk lost or doubled");
                }
                let left: Vec<(usize, u32)> = words
                    .iter()
                    .map(|w| w.load(Relaxed))
                    .enumerate()
                    .filter(|&(_, v)| v != 0)
                    .collect();
                assert!(
                    left.is_empty(),
                    "{tiles}/{chunks}/{blocks}: counters left set: {left:?}"
                );
            }
        }
    }

    #[test]
    fn victim_is_the_tile_with_fewest_claims_and_none_when_all_are_claimed() {
        let tiles = 11;
        let lay = DynLayout { tiles };
        let words: Vec<AtomicU32> = (0..lay.words()).map(|_| AtomicU32::new(0)).collect();
        let mem = AtomicWords::new(0, &words);
        let launch = DynLaunch {
            counters: 0,
            tiles,
            chunks: 4,
        };
        let set = |t: u32, v: u32| words[(lay.claims() + t) as usize].store(v, Relaxed);
        for t in 0..tiles {
            set(t, 4 + t);
        }
        // Padding words past the tiles are never victims, whatever they hold.
        assert_eq!(victim(&mem, &launch), None);
        set(9, 2);
        set(3, 3);
        assert_eq!(victim(&mem, &launch), Some(9));
        set(3, 1);
        assert_eq!(victim(&mem, &launch), Some(3));
        // The first tile claims on its own tile first, then steals from the fewest claimed.
        let mut c = DynClaims::new(25, tiles);
        assert_eq!(c.tile, 3);
        set(3, 4);
        assert_eq!(c.next(&mem, &launch), Some((9, 2)));
        assert!(c.continues(4), "chunk 3 of tile 9 was still free");
        assert_eq!(c.next(&mem, &launch), Some((9, 3)));
        assert!(!c.continues(4));
        assert_eq!(c.next(&mem, &launch), None);
        // A take without its claim ahead ends the run: the next take steals.
        for t in 0..tiles {
            set(t, 0);
        }
        let mut c = DynClaims::new(0, tiles);
        assert_eq!(c.take(&mem, &launch), Some((0, 0)));
        assert!(!c.continues(4));
        set(5, 0);
        for t in (0..tiles).filter(|&t| t != 5) {
            set(t, 3);
        }
        assert_eq!(c.take(&mem, &launch), Some((5, 0)), "stole the least claimed tile");
        c.claim_ahead(&mem, &launch);
        assert!(c.continues(4));
        assert_eq!(c.take(&mem, &launch), Some((5, 1)));
    }
}
