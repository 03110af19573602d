//! Lanes: how a persistent stream-mode stage (GeMM path 2) deals its work units to its blocks,
//! and the start count that makes that safe.
//!
//! # Lanes
//!
//! A launch of `blocks` blocks over `units` work units has `blocks` lanes. Block `b` runs lane
//! `b`: the units `b, b + blocks, b + 2 * blocks, ..` below `units`, the plain kernels' static
//! walk. Neighbouring tiles then run side by side on the same SMs in every round, as in the
//! plain kernel, and the stage reads what the plain kernel reads from L2. (Handing units out
//! by ticket in arrival order, the earlier design, scattered them over the SMs: 20% more L2
//! sectors read and +1.5-2% on the stage alone; lanes taken by ticket, or claimed per block
//! with stealing, did not help. docs/perf-notes.md, session 21.)
//!
//! # Why a static walk cannot stall: the start count
//!
//! A block owns its lane's units before it runs, so a stage's tiles are all computed only if
//! every block of the launch becomes resident. Nothing in a stage waits on its own stage, so
//! only a consumer's blocks holding the SMs could keep a producer block out. Every block of a
//! stream-mode stage adds one to its stage's start count at entry ([`start_target`] counts up
//! for ever, `blocks` per launch), and a consumer is launched only behind a wait kernel that
//! waits for the count to reach [`start_target`]: for a persistent producer, **every** block
//! started (all of them resident, since a persistent launch is at most one wave), so the
//! consumer's blocks can only take SMs the producer does not need. Without a wait kernel the
//! host has checked that both grids fit in one wave (optimization W), so every block of both
//! is resident at once. (A producer with a block per tile, many waves deep, keeps the
//! one-block-started target: its blocks take tiles by ticket, so a block that has not started
//! owns nothing.)

/// Launch `epoch`'s target for a stage's start count: the count a wait kernel waits for. A
/// stage of `blocks` blocks adds `blocks` per launch; `every_block` (persistent stages, whose
/// blocks own their lanes) waits for all of them, otherwise for the first.
#[inline(always)]
pub const fn start_target(epoch: u32, blocks: u32, every_block: bool) -> u32 {
    epoch
        .wrapping_mul(blocks)
        .wrapping_add(if every_block { blocks } else { 1 })
}

/// The unit after `unit` in its lane, if it is below `units`.
#[inline(always)]
pub const fn next_in_lane(unit: u32, blocks: u32, units: u32) -> Option<u32> {
    match unit.checked_add(blocks) {
        Some(next) if next < units => Some(next),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_cover_every_unit_once() {
        for blocks in 1..9 {
            for units in 0..40 {
                let mut seen = [0u32; 40];
                for lane in 0..blocks {
                    // A lane's first unit is its block index, if below `units`.
                    let mut unit = (lane < units).then_some(lane);
                    while let Some(u) = unit {
                        seen[u as usize] += 1;
                        unit = next_in_lane(u, blocks, units);
                    }
                }
                assert!(
                    seen[..units as usize].iter().all(|&c| c == 1),
                    "blocks {blocks} units {units}"
                );
            }
        }
        assert_eq!(next_in_lane(u32::MAX - 1, 5, u32::MAX), None);
    }

    #[test]
    fn start_targets_count_every_block_of_every_launch() {
        // 5 blocks a launch: launch 3 starts at count 15.
        assert_eq!(start_target(3, 5, true), 20);
        assert_eq!(start_target(3, 5, false), 16);
        assert_eq!(start_target(0, 132, true), 132);
        assert_eq!(start_target(0, 132, false), 1);
        // Launch 3's target is not reached by launch 2's blocks, however many there were.
        assert!(start_target(3, 5, false) > start_target(2, 5, true));
        // Wrapping: the count wraps with the target.
        assert_eq!(start_target(u32::MAX, 2, true), 0);
    }
}
