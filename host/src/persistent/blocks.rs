//! What a traced path-2 megakernel launch spends outside its tiles: each block's
//! [`BlockStamps`] (entry, ready to pop, consumers done, last post done) read beside its tiles'
//! trace events and the launch's CUDA-event time.
//!
//! The per-tile events see a launch from its first tile's dispatch to its last post; the event
//! time also holds the launch latency, the prefill kernel, each block's setup, the first pops
//! and the drain. [`BlockSummary`] splits that fixed cost into its parts, so a megakernel's
//! overhead against its no-protocol twin can be told apart into "per launch" and "per tile".

use std::fmt;

use cusync_shared::layout::TraceEvent;
use cusync_shared::persistent::BlockStamps;

use crate::trace::Stats;

/// A traced launch's block lifetimes, summarised (microseconds; medians over the blocks that
/// recorded the stamps concerned).
#[derive(Clone, Debug, PartialEq)]
pub struct BlockSummary {
    /// Blocks that recorded an entry stamp.
    pub blocks: usize,
    /// The launch's CUDA-event time (prefill and megakernel).
    pub elapsed_us: f64,
    /// First block entry to last block exit.
    pub span_us: f64,
    /// Last block entry minus first: how far apart the blocks started.
    pub entry_spread_us: f64,
    /// Entry to ready (setup, and the prefill's end awaited), median.
    pub setup_us: f64,
    /// Ready to the block's first tile's main loop start (first pop, first loads), median.
    pub first_tile_us: f64,
    /// The block's last tile's consumers done to its last post done (the post warp's drain),
    /// median.
    pub drain_us: f64,
    /// Last block exit minus the block's own exit: how long a block sat done while others
    /// still ran (the tail's imbalance), median.
    pub idle_at_end_us: f64,
    /// The blocks' mean time in tiles (first tile start to last tile end) over the span.
    pub busy_fraction: f64,
}

impl BlockSummary {
    /// Summarises `blocks` (one per block, by linear block index) with the launch's tile
    /// `events` (their `cta` field is the block index) and its event time `elapsed_ms`; `None`
    /// when no block recorded an entry (an untraced or path-1 launch).
    pub fn of(blocks: &[BlockStamps], events: &[TraceEvent], elapsed_ms: f64) -> Option<Self> {
        let live: Vec<(usize, &BlockStamps)> = blocks.iter().enumerate().filter(|(_, b)| b.entry != 0).collect();
        let first_entry = live.iter().map(|(_, b)| b.entry).min()?;
        let last_entry = live.iter().map(|(_, b)| b.entry).max()?;
        let last_exit = live.iter().map(|(_, b)| b.exit).max().filter(|&t| t > first_entry)?;
        // Each block's first tile start and last tile end.
        let mut tiles = vec![(u64::MAX, 0u64); blocks.len()];
        for e in events.iter().filter(|e| e.t_end != 0) {
            if let Some(t) = tiles.get_mut(e.cta as usize) {
                t.0 = t.0.min(e.t_start);
                t.1 = t.1.max(e.t_end);
            }
        }
        let us = |ns: u64| ns as f64 / 1e3;
        // Median in µs of durations in ns (NaN for none).
        let median = |v: Vec<u64>| {
            if v.is_empty() {
                f64::NAN
            } else {
                Stats::of(v).median_ns / 1e3
            }
        };
        let setup = live
            .iter()
            .filter(|(_, b)| b.ready >= b.entry)
            .map(|(_, b)| b.ready - b.entry);
        let first_tile = live
            .iter()
            .filter(|&&(i, b)| b.ready != 0 && tiles[i].0 != u64::MAX && tiles[i].0 >= b.ready)
            .map(|&(i, b)| tiles[i].0 - b.ready);
        let drain = live
            .iter()
            .filter(|(_, b)| b.consumers_done != 0 && b.exit >= b.consumers_done)
            .map(|(_, b)| b.exit - b.consumers_done);
        let idle = live
            .iter()
            .filter(|(_, b)| b.exit != 0)
            .map(|(_, b)| last_exit - b.exit.min(last_exit));
        let span = last_exit - first_entry;
        let busy: u64 = live
            .iter()
            .filter(|&&(i, _)| tiles[i].0 != u64::MAX)
            .map(|&(i, _)| tiles[i].1.saturating_sub(tiles[i].0))
            .sum();
        Some(Self {
            blocks: live.len(),
            elapsed_us: elapsed_ms * 1e3,
            span_us: us(span),
            entry_spread_us: us(last_entry - first_entry),
            setup_us: median(setup.collect()),
            first_tile_us: median(first_tile.collect()),
            drain_us: median(drain.collect()),
            idle_at_end_us: median(idle.collect()),
            busy_fraction: busy as f64 / (span as f64 * live.len() as f64),
        })
    }
}

impl fmt::Display for BlockSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "blocks: {} · launch {:.1} us (CUDA events), blocks' span {:.1} us (first entry to last exit): {:.1} us \
             outside the blocks",
            self.blocks,
            self.elapsed_us,
            self.span_us,
            self.elapsed_us - self.span_us
        )?;
        writeln!(
            f,
            "  medians per block, us: entry spread {:.2} · entry -> ready {:.2} · ready -> first tile start {:.2} · \
             consumers done -> last post {:.2} · idle at the end {:.2} · in tiles {:.1}% of the span",
            self.entry_spread_us,
            self.setup_us,
            self.first_tile_us,
            self.drain_us,
            self.idle_at_end_us,
            100.0 * self.busy_fraction
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(cta: u32, t_start: u64, t_end: u64) -> TraceEvent {
        TraceEvent {
            cta,
            t_dispatch: t_start,
            t_ready: t_start,
            t_start,
            t_end,
            ..TraceEvent::default()
        }
    }

    #[test]
    fn block_summary_splits_a_launch_into_entry_setup_tiles_and_drain() {
        // Block 0: enters at 1 µs, ready at 3, tiles 4..10 and 10..20, consumers done 20, exit 21.
        // Block 1: enters at 2 µs, ready at 5, one tile 7..15, consumers done 15, exit 17.
        // Block 2 never ran (zero stamps): ignored.
        let blocks = [
            BlockStamps {
                entry: 1_000,
                ready: 3_000,
                consumers_done: 20_000,
                exit: 21_000,
            },
            BlockStamps {
                entry: 2_000,
                ready: 5_000,
                consumers_done: 15_000,
                exit: 17_000,
            },
            BlockStamps::default(),
        ];
        let events = [
            event(0, 4_000, 10_000),
            event(0, 10_000, 20_000),
            event(1, 7_000, 15_000),
        ];
        let s = BlockSummary::of(&blocks, &events, 0.025).unwrap();
        assert_eq!(s.blocks, 2);
        assert!((s.elapsed_us - 25.0).abs() < 1e-9);
        assert!((s.span_us - 20.0).abs() < 1e-9, "{s:?}");
        assert!((s.entry_spread_us - 1.0).abs() < 1e-9);
        assert!((s.setup_us - 2.5).abs() < 1e-9, "median of 2 and 3: {s:?}");
        assert!((s.first_tile_us - 1.5).abs() < 1e-9, "median of 1 and 2: {s:?}");
        assert!((s.drain_us - 1.5).abs() < 1e-9, "median of 1 and 2: {s:?}");
        assert!((s.idle_at_end_us - 2.0).abs() < 1e-9, "median of 0 and 4: {s:?}");
        assert!((s.busy_fraction - 24.0 / 40.0).abs() < 1e-9, "{s:?}");
        let text = s.to_string();
        assert!(
            text.contains("launch 25.0 us (CUDA events), blocks' span 20.0 us"),
            "{text}"
        );
        assert!(text.contains("5.0 us outside the blocks"), "{text}");
        assert!(text.contains("entry -> ready 2.50"), "{text}");
    }

    #[test]
    fn block_summary_is_none_without_stamps() {
        assert_eq!(BlockSummary::of(&[BlockStamps::default(); 4], &[], 1.0), None);
        assert_eq!(BlockSummary::of(&[], &[], 1.0), None);
    }
}
