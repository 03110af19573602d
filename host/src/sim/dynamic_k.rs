//! A model of dynamic K-chunks (`cusync_shared::dynamic_k`) on SMs of unequal speed: the
//! shared claim protocol itself, run over host atomics in simulated-time order, against the
//! static one-tile-per-block launch it replaces.
//!
//! Inputs are what session 27's traces measured for the MLP's B = 64 GeMM2 on the H200 (96
//! tiles of 128 x 64 over K = 6144, one block each; the median tile 38.7 µs; 12 SMs streaming
//! at 0.83 of the others' speed) and assumed costs of a run (a pipeline refill at each run's
//! start, a partial write and count-in at a split run's end, one slot read per extra run for
//! the run that sums). It predicts; it measures nothing. Two simplifications, both in the
//! steals' favour or outside its scope: a block claims a chunk when it starts computing it
//! (the device's producer claims up to a pipeline's depth, 9 stages, earlier, so a slow tile
//! has fewer chunks left to steal), and an SM's speed does not depend on how many others
//! stream (no aggregate bandwidth cap: grids larger than the tiles are outside the model).

use std::sync::atomic::AtomicU32;

use cusync_shared::dynamic_k::{chunk_range, count_in, leave, take_slot, DynClaims, DynLaunch, DynLayout};
use cusync_shared::protocol::AtomicWords;

/// One launch to model.
#[derive(Clone, Debug, PartialEq)]
pub struct DynKCase {
    /// Output tiles.
    pub tiles: u32,
    /// K-steps per tile.
    pub k_steps: u32,
    /// Chunks per tile (0: the static launch, one whole tile per block).
    pub chunks: u32,
    /// Speed of each block's SM (1.0: the median SM); one block per entry.
    pub speeds: Vec<f64>,
    /// A tile's time on a speed-1.0 SM, µs.
    pub tile_us: f64,
    /// What a block's first run costs beyond its chunks (the pipeline's first fill), µs.
    pub fill_us: f64,
    /// What each later run's start costs (the victim scan and claim on the producer thread;
    /// its loads follow the previous run's without a refill, since the producer runs a
    /// pipeline's depth ahead of the consumers), µs.
    pub steal_us: f64,
    /// What a split run's end costs (its partial written and counted in), µs.
    pub partial_us: f64,
    /// What each other run's partial costs the run that sums the tile, µs.
    pub slot_read_us: f64,
    /// How many K-steps before a chunk's end the claim of the run's next chunk goes out
    /// (`u32::MAX`: at the chunk's start, as `DynClaims::next` does; the device must have the
    /// result back by the chunk's last stage).
    pub claim_lead_steps: u32,
}

/// What the model predicts for a [`DynKCase`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DynKOutcome {
    /// When the last tile is stored, µs after the launch's first loads.
    pub makespan_us: f64,
    /// Runs that did not cover their tile (stolen chunks and the runs they split).
    pub split_runs: u32,
    /// Tiles summed from more than one run.
    pub split_tiles: u32,
}

/// Runs the case: the static launch (each block its tile, `chunks == 0`), or every block
/// claiming through the shared protocol, the block whose next event (take a chunk, claim the
/// run's next one, finish the chunk) comes first always moving next.
/// `None` where the case is empty or has fewer blocks than tiles without chunks.
pub fn simulate_dynamic_k(case: &DynKCase) -> Option<DynKOutcome> {
    let blocks = case.speeds.len() as u32;
    if case.tiles == 0 || blocks == 0 || case.k_steps == 0 || case.speeds.iter().any(|&s| s <= 0.0) {
        return None;
    }
    if case.chunks == 0 {
        if blocks < case.tiles {
            return None;
        }
        let makespan_us = case.speeds[..case.tiles as usize]
            .iter()
            .map(|s| case.fill_us + case.tile_us / s)
            .fold(0.0, f64::max);
        return Some(DynKOutcome {
            makespan_us,
            split_runs: 0,
            split_tiles: 0,
        });
    }
    let chunks = case.chunks.min(case.k_steps);
    let words: Vec<AtomicU32> = (0..DynLayout { tiles: case.tiles }.words())
        .map(|_| AtomicU32::new(0))
        .collect();
    let mem = AtomicWords::new(0, &words);
    let launch = DynLaunch {
        counters: 0,
        tiles: case.tiles,
        chunks,
    };
    /// A block's next event: take a chunk, issue its claim ahead, or finish the chunk.
    #[derive(Clone, Copy, PartialEq)]
    enum Next {
        Take,
        ClaimAhead { ends_at: f64, tile: u32, steps: u32 },
        Finish { tile: u32, steps: u32 },
        Done,
    }
    struct Block {
        claims: DynClaims,
        at: f64,
        next: Next,
        /// K-steps of the current run's finished chunks (0: the next take starts a run).
        steps: u32,
        /// Whether the block's first run has started (its fill paid).
        filled: bool,
    }
    let mut state: Vec<Block> = (0..blocks)
        .map(|b| Block {
            claims: DynClaims::new(b, case.tiles),
            at: 0.0,
            next: Next::Take,
            steps: 0,
            filled: false,
        })
        .collect();
    let step_us = case.tile_us / case.k_steps as f64;
    let mut out = DynKOutcome {
        makespan_us: 0.0,
        split_runs: 0,
        split_tiles: 0,
    };
    while let Some(b) = (0..state.len())
        .filter(|&b| state[b].next != Next::Done)
        .min_by(|&x, &y| state[x].at.total_cmp(&state[y].at))
    {
        let speed = case.speeds[b];
        let st = &mut state[b];
        match st.next {
            Next::Done => {}
            Next::Take => {
                let Some((tile, chunk)) = st.claims.take(&mem, &launch) else {
                    leave(&mem, &launch, blocks);
                    st.next = Next::Done;
                    continue;
                };
                if st.steps == 0 {
                    st.at += if st.filled { case.steal_us } else { case.fill_us };
                    st.filled = true;
                }
                let (kb, ke) = chunk_range(case.k_steps, chunk, chunks);
                let steps = ke - kb;
                let ends_at = st.at + steps as f64 * step_us / speed;
                // The claim ahead goes out `claim_lead_steps` K-steps before the chunk's end
                // (at its start when the chunk is shorter).
                let lead = case.claim_lead_steps.min(steps);
                st.at += (steps - lead) as f64 * step_us / speed;
                st.next = Next::ClaimAhead { ends_at, tile, steps };
            }
            Next::ClaimAhead { ends_at, tile, steps } => {
                st.claims.claim_ahead(&mem, &launch);
                st.at = ends_at;
                st.next = Next::Finish { tile, steps };
            }
            Next::Finish { tile, steps } => {
                st.steps += steps;
                st.next = Next::Take;
                if st.claims.continues(chunks) {
                    continue;
                }
                if st.steps < case.k_steps {
                    out.split_runs += 1;
                    st.at += case.partial_us;
                    let run = take_slot(&mem, &launch, tile);
                    if let Some(runs) = count_in(&mem, &launch, tile, st.steps, case.k_steps) {
                        debug_assert!(run < runs);
                        out.split_tiles += 1;
                        st.at += (runs - 1) as f64 * case.slot_read_us;
                        out.makespan_us = out.makespan_us.max(st.at);
                    }
                } else {
                    out.makespan_us = out.makespan_us.max(st.at);
                }
                st.steps = 0;
            }
        }
    }
    Some(out)
}

/// The B = 64 GeMM2 launch as session 27 traced it (96 tiles of 96 K-steps, one block per
/// tile, 12 of the blocks on SMs at `slow` of the median speed, a 38.7 µs median tile), with
/// `chunks` chunks per tile (0: static) and assumed costs: a 2 µs first fill, 0.5 µs per
/// later run's scan and claim, 1 µs per split run's partial, 0.5 µs per extra slot read; the
/// claim ahead at each chunk's start (`DynClaims::next`).
pub fn b64_gemm2_case(chunks: u32, slow: f64) -> DynKCase {
    let mut speeds = vec![1.0; 96];
    for s in speeds.iter_mut().step_by(8) {
        *s = slow;
    }
    DynKCase {
        tiles: 96,
        k_steps: 96,
        chunks,
        speeds,
        tile_us: 38.7,
        fill_us: 2.0,
        steal_us: 0.5,
        partial_us: 1.0,
        slot_read_us: 0.5,
        claim_lead_steps: u32::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_launch_ends_with_its_slowest_sm() {
        let o = simulate_dynamic_k(&b64_gemm2_case(0, 0.83)).unwrap();
        assert!((o.makespan_us - (2.0 + 38.7 / 0.83)).abs() < 1e-9, "{o:?}");
        assert_eq!((o.split_runs, o.split_tiles), (0, 0));
    }

    #[test]
    fn stealing_shortens_the_slow_sms_tail_and_equal_sms_split_nothing() {
        let fixed = simulate_dynamic_k(&b64_gemm2_case(0, 0.83)).unwrap();
        let stolen = simulate_dynamic_k(&b64_gemm2_case(16, 0.83)).unwrap();
        assert!(stolen.makespan_us < fixed.makespan_us, "{stolen:?} vs {fixed:?}");
        assert!(stolen.split_tiles > 0 && stolen.split_tiles <= 12, "{stolen:?}");
        // Never faster than every SM's share of the total work.
        let ideal = 96.0 * 38.7 / (84.0 + 12.0 * 0.83);
        assert!(stolen.makespan_us > ideal, "{stolen:?} below the ideal {ideal}");
        // A later claim ahead leaves more of a slow tile to steal.
        let mut late = b64_gemm2_case(16, 0.83);
        late.claim_lead_steps = 2;
        let late = simulate_dynamic_k(&late).unwrap();
        assert!(late.makespan_us < stolen.makespan_us, "{late:?} vs {stolen:?}");
        let even = simulate_dynamic_k(&b64_gemm2_case(16, 1.0)).unwrap();
        assert_eq!((even.split_runs, even.split_tiles), (0, 0), "{even:?}");
        assert!((even.makespan_us - 40.7).abs() < 1e-9, "{even:?}");
    }

    #[test]
    fn report_rows_stay_under_perfect_balance() {
        let text = crate::sim::report::render_dynamic_k();
        let ratios: Vec<f64> = text
            .lines()
            .skip(2)
            .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_suffix('x')?.parse().ok()))
            .collect();
        assert_eq!(ratios.len(), 9, "{text}");
        let balanced = ratios[8];
        assert!(
            text.lines()
                .last()
                .is_some_and(|l| l.trim_start().starts_with("balanced")),
            "{text}"
        );
        assert!((ratios[0] - 1.0).abs() < 1e-9, "{text}");
        assert!(ratios.iter().all(|&r| r >= 1.0 && r <= balanced), "{text}");
    }

    #[test]
    fn more_blocks_than_tiles_and_degenerate_cases() {
        let mut c = b64_gemm2_case(8, 1.0);
        c.speeds = vec![1.0; 132];
        let o = simulate_dynamic_k(&c).unwrap();
        // 36 blocks steal from the start: tiles are split, and no block beats its share.
        assert!(o.split_tiles > 0 && o.makespan_us >= 96.0 * 38.7 / 132.0, "{o:?}");
        c.chunks = 0;
        assert!(simulate_dynamic_k(&c).is_some());
        c.speeds = vec![1.0; 10];
        assert!(simulate_dynamic_k(&c).is_none(), "fewer blocks than tiles, static");
        c.speeds.clear();
        assert!(simulate_dynamic_k(&c).is_none());
    }
}
