//! Single-GPU micro-batching in the wave model: the rows are cut into chunks, each chunk runs
//! every layer as its own kernel on one of `streams` streams (chunks round robin, as
//! `cusync::baselines::microbatch` launches them), and the blocks of every kernel whose stream
//! predecessor has completed share the GPU.
//!
//! The model: kernels are launched chunk by chunk (chunk 0's layers, then chunk 1's, ...); a
//! kernel becomes eligible when the kernel before it on its stream has completed; a free block
//! takes the next tile of the earliest-launched eligible kernel with tiles left (the hardware
//! dispatches an earlier kernel's blocks first); every tile takes `tile_time`. Launch latency,
//! the chunks' smaller GeMMs' own efficiency and L2 are left out, as in
//! [`super::persistent`], so the two models compare schedules, not kernels.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One micro-batched run of a layer stack.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MicrobatchCase {
    /// Row tiles of the whole input.
    pub rows: u32,
    /// Column tiles of every layer.
    pub cols: u32,
    /// Layers.
    pub layers: u32,
    /// Row tiles per chunk (the last chunk may be smaller).
    pub chunk_rows: u32,
    /// Streams the chunks go round robin over.
    pub streams: u32,
    /// Blocks that run at once (one tile each).
    pub blocks: u32,
}

/// The makespan of `case` in tile times; `None` for a case with no rows, columns, layers,
/// streams, blocks or chunk rows.
pub fn simulate_microbatch(case: &MicrobatchCase) -> Option<f64> {
    let c = case;
    if [c.rows, c.cols, c.layers, c.chunk_rows, c.streams, c.blocks].contains(&0) {
        return None;
    }
    let chunks = c.rows.div_ceil(c.chunk_rows);
    // Kernels in launch order: chunk-major, each chunk's layers in order.
    let mut left: Vec<u32> = (0..chunks)
        .flat_map(|j| {
            let rows = c.chunk_rows.min(c.rows - j * c.chunk_rows);
            (0..c.layers).map(move |_| rows * c.cols)
        })
        .collect();
    let n = left.len();
    // The kernel before each one on its stream: the chunk's previous layer, or the last layer
    // of the chunk `streams` before.
    let before: Vec<Option<usize>> = (0..n)
        .map(|k| {
            let (j, l) = (k as u32 / c.layers, k as u32 % c.layers);
            if l > 0 {
                Some(k - 1)
            } else if j >= c.streams {
                Some(((j - c.streams) * c.layers + c.layers - 1) as usize)
            } else {
                None
            }
        })
        .collect();
    // `left`: tiles not yet dispatched; `running`: dispatched, not yet ended. A kernel has
    // completed when both are zero.
    let mut running = vec![0u32; n];
    let mut ends: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new(); // (end in ticks, kernel)
    let mut free = c.blocks;
    let mut now = 0u64;
    // Unit tiles: time is counted in whole tile times.
    loop {
        // Dispatch: free blocks take tiles of the earliest eligible kernels.
        for k in 0..n {
            if free == 0 {
                break;
            }
            if left[k] == 0 || before[k].is_some_and(|b| left[b] + running[b] > 0) {
                continue;
            }
            let take = free.min(left[k]);
            left[k] -= take;
            running[k] += take;
            free -= take;
            for _ in 0..take {
                ends.push(Reverse((now + 1, k)));
            }
        }
        let Some(Reverse((t, _))) = ends.peek().copied() else {
            break;
        };
        now = t;
        while let Some(Reverse((t, k))) = ends.peek().copied() {
            if t != now {
                break;
            }
            ends.pop();
            running[k] -= 1;
            free += 1;
        }
    }
    left.iter().all(|&l| l == 0).then_some(now as f64)
}

/// The best chunk of `candidates` (row tiles per chunk) for `case` (its `chunk_rows` ignored):
/// `(chunk_rows, makespan)`, the smallest chunk among equal makespans.
pub fn best_microbatch(case: &MicrobatchCase, candidates: &[u32]) -> Option<(u32, f64)> {
    candidates
        .iter()
        .filter_map(|&chunk_rows| simulate_microbatch(&MicrobatchCase { chunk_rows, ..*case }).map(|t| (chunk_rows, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
}
