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

/// # The poll warp's hand-over (GeMM path 2, stream mode)
///
/// A warp of the producer warpgroup walks its block's lane ahead of the producer thread and
/// reads the semaphores each unit's tile waits on (all of them at once, one per lane). It
/// publishes, per unit, how many of the tile's waits (a prefix of the edge's `WaitSchedule`)
/// it saw met, in one of two 64-bit shared-memory slots ([`poll_slot`]), released at block
/// scope; the producer's wait acquires the slot of its unit and skips the waits it covers.
/// The warp is at most one unit ahead: it moves past unit `u` only once the producer's
/// current unit (a shared word) reached `u`, so the slot of the producer's unit is never
/// overwritten while the producer is on it.
///
/// The slot (0 or 1) of `unit` in a lane of `blocks` blocks: consecutive units of a lane
/// take alternate slots.
#[inline(always)]
pub const fn poll_slot(unit: u32, blocks: u32) -> u32 {
    (unit / blocks) % 2
}

/// Whether a poll warp runs for an edge whose tiles make `waits` waits each: more than the
/// four the producer thread reads in one round trip (`ld.acquire.gpu.v4`). With one wait a
/// tile (RowSync) the warp cost the serialized GPT-3 MLP half a point (docs/perf-notes.md,
/// session 23); there the producer probes the unit's first wait as it takes the unit, under
/// its free-stage wait (session 25: +0.9–1.3% over StreamSync to +0.5–0.7%).
#[inline(always)]
pub const fn poll_pays(waits: u32) -> bool {
    waits > 4
}

/// The producer's current-unit word once the producer thread returned (for any reason).
pub const POLL_PRODUCER_DONE: u32 = u32::MAX;

/// A slot's word: `unit` in the high half, the number of its met waits in the low half.
#[inline(always)]
pub const fn pack_poll(unit: u32, met: u32) -> u64 {
    ((unit as u64) << 32) | met as u64
}

/// The `(unit, met)` of a slot's word ([`pack_poll`]'s inverse). A slot no poll wrote yet
/// holds unit [`POLL_PRODUCER_DONE`], which is never a unit.
#[inline(always)]
pub const fn unpack_poll(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// The producer's side: how many of unit `unit`'s waits are made once it read slot word
/// `word`, having made `made` itself. A word of another unit (a slot not yet written for
/// this one, or still holding an earlier unit's count) covers nothing.
#[inline(always)]
pub const fn covered_waits(word: u64, unit: u32, made: u32) -> u32 {
    let (polled, met) = unpack_poll(word);
    if polled == unit && met > made {
        met
    } else {
        made
    }
}

/// The poll warp's side: whether the producer's current-unit word `current` says the
/// producer returned or moved past `unit` (the warp stops polling `unit`).
#[inline(always)]
pub const fn producer_past(current: u32, unit: u32) -> bool {
    current == POLL_PRODUCER_DONE || current > unit
}

/// The met prefix after a warp polled waits `from .. from + 32` (lane `l` wait `from + l`;
/// bit `l` of `ballot` set when it was met or past the last wait), capped at `waits`.
#[inline(always)]
pub const fn met_prefix(from: u32, ballot: u32, waits: u32) -> u32 {
    let after = from.saturating_add(ballot.trailing_ones());
    if after < waits {
        after
    } else {
        waits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_units_of_a_lane_take_alternate_poll_slots() {
        for blocks in 1..9 {
            for lane in 0..blocks {
                let mut unit = lane;
                let mut slot = poll_slot(unit, blocks);
                while let Some(next) = next_in_lane(unit, blocks, 100) {
                    let s = poll_slot(next, blocks);
                    assert_ne!(s, slot, "blocks {blocks} unit {next}");
                    (unit, slot) = (next, s);
                }
            }
        }
    }

    #[test]
    fn poll_words_round_trip_and_prefixes_stop_at_the_first_unmet_wait() {
        assert_eq!(unpack_poll(pack_poll(7, 48)), (7, 48));
        assert_eq!(unpack_poll(pack_poll(POLL_PRODUCER_DONE, 0)).0, POLL_PRODUCER_DONE);
        // Waits 32..35 met, 36 not: the prefix ends at 36.
        assert_eq!(met_prefix(32, 0b1111, 48), 36);
        // All lanes met, past the last wait: capped.
        assert_eq!(met_prefix(32, u32::MAX, 48), 48);
        assert_eq!(met_prefix(0, u32::MAX, 48), 32);
        // Lane 0 not met: no progress.
        assert_eq!(met_prefix(5, 0b1110, 48), 5);
        // The producer takes a slot's count only for its own unit, and only forward.
        assert_eq!(covered_waits(pack_poll(9, 40), 9, 4), 40);
        assert_eq!(covered_waits(pack_poll(8, 40), 9, 4), 4);
        assert_eq!(covered_waits(pack_poll(9, 2), 9, 4), 4);
        assert_eq!(covered_waits(pack_poll(POLL_PRODUCER_DONE, 0), 9, 0), 0);
        assert!(producer_past(POLL_PRODUCER_DONE, 3) && producer_past(4, 3));
        assert!(!producer_past(3, 3) && !producer_past(2, 3));
        assert!(!poll_pays(1) && !poll_pays(4) && poll_pays(5) && poll_pays(48));
    }

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
