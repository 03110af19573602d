//! Synthetic traces of a producer/consumer stage pair, for tests and `cusync trace demo`.
//!
//! The model is the wave simulator's ([`crate::sim::schedule`]), in nanoseconds and with every
//! tile recorded: `sms * blocks_per_sm` CTA slots; tiles are dispatched from one FIFO, all
//! producer tiles (row major) then all consumer tiles, each to the slot that frees first
//! (ties: the first wave spreads over SMs before doubling up). Producer grid
//! `[rows, producer_cols, 1]`, consumer grid `[rows, consumer_cols, 1]`; consumer tile `(x, y)`
//! reads the whole producer row `x` (as the second GeMM of an MLP does).

use crate::shared::layout::TraceEvent;
use crate::shared::Grid;

use super::model::{StageMeta, Trace, TraceMeta};

/// How the consumer is synchronized with the producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyntheticSync {
    /// Stream synchronization: the consumer kernel starts `post_ns` after the last producer
    /// tile ends; no tile waits.
    Stream,
    /// Row synchronization (CuSync's RowSync): a consumer tile is dispatched as soon as a slot
    /// frees and waits until its producer row is posted (`post_ns` after the row's last tile).
    Row,
}

/// Parameters of a synthetic two-stage run.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticTwoStage {
    /// Run label.
    pub label: String,
    /// SMs.
    pub sms: u32,
    /// CTAs per SM (both stages).
    pub blocks_per_sm: u32,
    /// Row tiles of both grids.
    pub rows: u32,
    /// Column tiles of the producer grid.
    pub producer_cols: u32,
    /// Column tiles of the consumer grid.
    pub consumer_cols: u32,
    /// Main-loop time of a producer tile.
    pub producer_tile_ns: u64,
    /// Main-loop time of a consumer tile.
    pub consumer_tile_ns: u64,
    /// Tile times vary by up to this fraction either way (deterministic in `seed`).
    pub jitter: f64,
    /// From a slot freeing to the next tile's dispatch.
    pub dispatch_ns: u64,
    /// From `t_ready` to the main loop's start (prologue).
    pub setup_ns: u64,
    /// From a producer post to a consumer seeing it (or, under stream synchronization, from
    /// the producer kernel's end to the consumer kernel's first dispatch).
    pub post_ns: u64,
    /// Synchronization.
    pub sync: SyntheticSync,
    /// Seed of the jitter.
    pub seed: u64,
}

impl Default for SyntheticTwoStage {
    /// 16 SMs, one CTA each; 24 producer tiles (1.5 waves) of 10 us and 24 consumer tiles of
    /// 8 us, 5% jitter, row synchronization.
    fn default() -> Self {
        Self {
            label: "synthetic producer -> consumer".into(),
            sms: 16,
            blocks_per_sm: 1,
            rows: 4,
            producer_cols: 6,
            consumer_cols: 6,
            producer_tile_ns: 10_000,
            consumer_tile_ns: 8_000,
            jitter: 0.05,
            dispatch_ns: 300,
            setup_ns: 400,
            post_ns: 500,
            sync: SyntheticSync::Row,
            seed: 1,
        }
    }
}

/// Arbitrary `%globaltimer` origin, so that absolute and relative times differ.
const ORIGIN_NS: u64 = 1_700_000_000_000_000_000;

impl Trace {
    /// The trace of a synthetic producer/consumer run (see [`super::synthetic`]).
    pub fn synthetic_two_stage(spec: &SyntheticTwoStage) -> Trace {
        let sms = spec.sms.max(1);
        let slots = (sms * spec.blocks_per_sm.max(1)) as usize;
        let producer = Grid::new(spec.rows, spec.producer_cols, 1);
        let consumer = Grid::new(spec.rows, spec.consumer_cols, 1);
        let jitter = |stage: u64, tile: u32, base: u64| {
            let u = unit(spec.seed ^ (stage << 32) ^ u64::from(tile));
            (base as f64 * (1.0 + spec.jitter * (2.0 * u - 1.0))).round().max(1.0) as u64
        };
        // Slot k is CTA slot k / sms of SM k % sms; free[k] = when it frees.
        let mut free = vec![ORIGIN_NS; slots];
        let mut events = Vec::new();
        let mut row_posted = vec![0u64; spec.rows as usize];
        for tile in 0..producer.count() {
            let (k, at) = take(&free, ORIGIN_NS);
            let d = if at == ORIGIN_NS { at } else { at + spec.dispatch_ns };
            let s = d + spec.setup_ns;
            let end = s + jitter(0, tile, spec.producer_tile_ns);
            free[k] = end;
            let row = producer.tile(tile).x as usize;
            row_posted[row] = row_posted[row].max(end + spec.post_ns);
            events.push(event(0, tile, k, sms, tile, d, d, s, end));
        }
        let producers_done = events.iter().map(|e| e.t_end).max().unwrap_or(ORIGIN_NS);
        for tile in 0..consumer.count() {
            let earliest = match spec.sync {
                SyntheticSync::Stream => producers_done + spec.post_ns,
                SyntheticSync::Row => ORIGIN_NS,
            };
            let (k, at) = take(&free, earliest);
            let d = if at == earliest { at } else { at + spec.dispatch_ns };
            let r = match spec.sync {
                SyntheticSync::Stream => d,
                SyntheticSync::Row => d.max(row_posted[consumer.tile(tile).x as usize]),
            };
            let s = r + spec.setup_ns;
            let end = s + jitter(1, tile, spec.consumer_tile_ns);
            free[k] = end;
            events.push(event(1, tile, k, sms, tile, d, r, s, end));
        }
        let stage = |id, name: &str, grid| StageMeta {
            id,
            name: name.into(),
            grid: Some(grid),
            blocks_per_sm: Some(spec.blocks_per_sm.max(1)),
        };
        let meta = TraceMeta {
            label: spec.label.clone(),
            device: "synthetic GPU".into(),
            sm_count: Some(sms),
            stages: vec![stage(0, "producer", producer), stage(1, "consumer", consumer)],
        };
        Trace { meta, events }
    }
}

/// The slot that can take a tile first, no earlier than `earliest`, and when.
fn take(free: &[u64], earliest: u64) -> (usize, u64) {
    let k = (0..free.len()).min_by_key(|&k| (free[k].max(earliest), k)).unwrap_or(0);
    (k, free[k].max(earliest))
}

#[allow(clippy::too_many_arguments)]
fn event(stage: u32, tile: u32, slot: usize, sms: u32, cta: u32, d: u64, r: u64, s: u64, e: u64) -> TraceEvent {
    TraceEvent {
        stage,
        tile,
        sm: slot as u32 % sms,
        cta,
        t_dispatch: d,
        t_ready: r,
        t_start: s,
        t_end: e,
    }
}

/// A deterministic value in `[0, 1)` from `x` (splitmix64).
fn unit(x: u64) -> f64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}
