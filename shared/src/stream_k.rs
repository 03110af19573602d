//! How a plain path-2 GeMM launch divides its work among persistent blocks: whole tiles,
//! split-K, or stream-K. Both sides call [`k_segment`]: the host to size the workspace, the
//! producer and the consumers of a block to agree on which K-steps a work unit covers, which
//! partial-tile slot it writes and how many slots its tile sums.
//!
//! **Stream-K** (Osama et al., PPoPP'23, the "data-parallel + stream-K" hybrid): the first
//! `dp_tiles` tiles of the order (a whole number of waves) are data-parallel units, one tile
//! each; the K-steps of the remaining tiles, laid end to end, are cut into `sk_units` equal
//! ranges, one per block. A range may end inside a tile, so a tile can be computed by two or
//! more units: each writes its f32 partial to a slot, and the last to arrive (counted in
//! K-steps on the tile's counter) sums the slots in slot order, so results do not depend on
//! timing. Every block runs the same number of data-parallel tiles and exactly one stream-K
//! range, so no SM idles in a partial last wave.

/// A launch's stream-K plan (all zero: no stream-K). A plan has at least one K-step per
/// stream-K range (the slot numbering of [`StreamKPlan::segment`] assumes it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamKPlan {
    /// Tiles of the launch.
    pub tiles: u32,
    /// K-steps per tile.
    pub k_steps: u32,
    /// Leading tiles of the order computed whole (a multiple of `sk_units`).
    pub dp_tiles: u32,
    /// Stream-K ranges (one per block); 0: stream-K off.
    pub sk_units: u32,
}

/// What one work unit computes of one tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KSegment {
    /// First K-step.
    pub k_begin: u32,
    /// One past the last K-step.
    pub k_end: u32,
    /// Workspace slot of the tile's first partial ([`KSegment::slots`] consecutive slots).
    pub first_slot: u32,
    /// This unit's slot among them (0-based).
    pub slot: u32,
    /// Units that compute the tile; 1: this one computes it whole and stores it directly.
    pub slots: u32,
}

impl StreamKPlan {
    /// Work units: the data-parallel tiles, then the stream-K ranges.
    pub const fn units(&self) -> u32 {
        self.dp_tiles + self.sk_units
    }

    /// K-steps of all stream-K tiles together.
    const fn sk_iters(&self) -> u64 {
        (self.tiles - self.dp_tiles) as u64 * self.k_steps as u64
    }

    /// The K-step range `[begin, end)` of stream-K range `j`, counted over the stream-K tiles
    /// laid end to end.
    pub const fn range(&self, j: u32) -> (u64, u64) {
        let i = self.sk_iters();
        let g = self.sk_units as u64;
        (j as u64 * i / g, (j as u64 + 1) * i / g)
    }

    /// The stream-K range that covers end-to-end K-step `x`.
    const fn range_of(&self, x: u64) -> u32 {
        (((x + 1) * self.sk_units as u64 - 1) / self.sk_iters()) as u32
    }

    /// The tiles `[first, last]` (ids in the order) that work unit `unit` touches, or `None`
    /// for an empty stream-K range (more ranges than K-steps).
    pub const fn unit_tiles(&self, unit: u32) -> Option<(u32, u32)> {
        if unit < self.dp_tiles {
            return Some((unit, unit));
        }
        let (b, e) = self.range(unit - self.dp_tiles);
        if b == e {
            return None;
        }
        let k = self.k_steps as u64;
        Some((self.dp_tiles + (b / k) as u32, self.dp_tiles + ((e - 1) / k) as u32))
    }

    /// Slots per stream-K tile in the workspace: the most units any one tile is split over.
    pub const fn slots_per_tile(&self) -> u32 {
        if self.sk_units == 0 || self.tiles == self.dp_tiles {
            return 1;
        }
        // Ranges differ in length by at most one K-step, so a tile meets at most
        // ceil(k_steps / shortest) + 1 of them.
        let shortest = self.sk_iters() / self.sk_units as u64;
        let bound = if shortest == 0 {
            // Ranges of one K-step or none: a tile meets at most one per K-step.
            self.k_steps
        } else {
            (self.k_steps as u64).div_ceil(shortest) as u32 + 1
        };
        if bound < self.sk_units {
            bound
        } else {
            self.sk_units
        }
    }

    /// What unit `unit` computes of tile `tile` (one of [`StreamKPlan::unit_tiles`]).
    pub const fn segment(&self, unit: u32, tile: u32) -> KSegment {
        if tile < self.dp_tiles {
            return KSegment {
                k_begin: 0,
                k_end: self.k_steps,
                first_slot: 0,
                slot: 0,
                slots: 1,
            };
        }
        let k = self.k_steps as u64;
        let t0 = (tile - self.dp_tiles) as u64 * k;
        let first = self.range_of(t0);
        let last = self.range_of(t0 + k - 1);
        let (b, e) = self.range(unit - self.dp_tiles);
        let b = if b > t0 { b } else { t0 };
        let e = if e < t0 + k { e } else { t0 + k };
        KSegment {
            k_begin: (b - t0) as u32,
            k_end: (e - t0) as u32,
            first_slot: (tile - self.dp_tiles) * self.slots_per_tile(),
            slot: unit - self.dp_tiles - first,
            slots: last - first + 1,
        }
    }
}

/// The segment a work unit computes in a launch with split-K factor `split_k` (0 or 1: none)
/// or stream-K plan `sk` (`sk.sk_units == 0`: none): `tile` is the tile's id in the order and
/// `split` the record's split field (the split index with split-K, the unit with stream-K).
pub const fn k_segment(tile: u32, split: u32, k_steps: u32, split_k: u32, sk: &StreamKPlan) -> KSegment {
    if sk.sk_units != 0 {
        return sk.segment(split, tile);
    }
    let splits = if split_k == 0 { 1 } else { split_k };
    let (k_begin, k_end) = crate::gemm_sm90::split_range(k_steps, split, splits);
    KSegment {
        k_begin,
        k_end,
        first_slot: tile * splits,
        slot: split,
        slots: splits,
    }
}

/// The stream-K plan for `tiles` tiles of `k_steps` K-steps on `sms` one-block-per-SM units:
/// all but the last partial wave and one full wave stay data-parallel (so stream-K covers
/// between one and two waves of tiles). `None` when a range would be shorter than 4 K-steps
/// (the pipeline's fill and the partial's write would dominate).
pub const fn stream_k_plan(tiles: u32, k_steps: u32, sms: u32) -> Option<StreamKPlan> {
    if tiles == 0 || sms == 0 || k_steps == 0 {
        return None;
    }
    let full = tiles / sms;
    let dp_tiles = if full >= 2 { (full - 1) * sms } else { 0 };
    let plan = StreamKPlan {
        tiles,
        k_steps,
        dp_tiles,
        sk_units: sms,
    };
    if plan.sk_iters() < 4 * sms as u64 {
        return None;
    }
    Some(plan)
}

/// [`stream_k_plan`] where it pays: problems of one row tile (M <= 128), which stream their
/// weights (the bytes, not the FLOPs, set their floor) and have too few tiles to give every SM
/// a share. Measured on the H200 (docs/perf-notes.md, session 5, after the wgmma-serialization
/// and epilogue fixes): 1.0x to 1.75x faster than whole tiles for M <= 64; at M = 256 whole
/// tiles are as fast (GeMM1, 128 x 128) or 1.35x faster (GeMM2, 128 x 256), and from M = 512
/// up stream-K is up to 1.69x slower (the ranges' staggered K positions lose the L2 reuse of
/// tiles that walk K in step).
///
/// Where the tiles fit the SMs at least twice over, the ranges are [`tile_aligned_units`]:
/// each tile cut into the same number of ranges, none crossing a tile's edge. Measured on the
/// H200 (docs/perf-notes.md, session 30 run 3, `run gemm --stream-k-ranges`): the GPT-3 MLP's
/// B = 128 GeMM2 (64 tiles of 128 x 192) at 0.794 of cuBLAS on 128 ranges against 0.723 on
/// 132, GeMM1 (32 tiles) at 0.838 against 0.780.
pub const fn choose_stream_k(tiles_m: u32, tiles: u32, k_steps: u32, sms: u32) -> Option<StreamKPlan> {
    if tiles_m != 1 {
        return None;
    }
    stream_k_plan(tiles, k_steps, tile_aligned_units(tiles, sms))
}

/// Stream-K ranges for `tiles` tiles on `sms` blocks such that every tile is cut into the same
/// number of ranges and no range crosses a tile's edge: `tiles` times `sms / tiles` when that
/// is at least two ranges a tile; otherwise `sms` (one range per block, ranges crossing
/// tiles).
pub const fn tile_aligned_units(tiles: u32, sms: u32) -> u32 {
    if tiles == 0 || sms / tiles < 2 {
        sms
    } else {
        tiles * (sms / tiles)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    /// Every (tile, K-step) is computed by exactly one unit; slots stay in range and are
    /// distinct per tile; every segment is non-empty.
    fn check_cover(plan: StreamKPlan) {
        let mut seen = vec![0u32; (plan.tiles * plan.k_steps) as usize];
        let mut slots_seen = std::collections::HashSet::new();
        let per = plan.slots_per_tile();
        for u in 0..plan.units() {
            let Some((first, last)) = plan.unit_tiles(u) else {
                continue;
            };
            assert!(first <= last && last < plan.tiles, "{plan:?} unit {u}");
            for t in first..=last {
                let s = plan.segment(u, t);
                assert!(s.k_begin < s.k_end && s.k_end <= plan.k_steps, "{plan:?} {u} {t} {s:?}");
                assert!(s.slot < s.slots && s.slots <= per, "{plan:?} {u} {t} {s:?}");
                assert!(slots_seen.insert((t, s.slot)), "{plan:?}: slot reused");
                if t >= plan.dp_tiles {
                    assert!(s.first_slot + s.slots <= (plan.tiles - plan.dp_tiles) * per);
                }
                for k in s.k_begin..s.k_end {
                    seen[(t * plan.k_steps + k) as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "{plan:?}: not covered exactly once");
        // The slots of each tile are 0..slots, all used.
        for t in 0..plan.tiles {
            let n = slots_seen.iter().filter(|(tt, _)| *tt == t).count() as u32;
            let any = (0..plan.units())
                .find(|&u| plan.unit_tiles(u).is_some_and(|(f, l)| f <= t && t <= l))
                .unwrap();
            assert_eq!(n, plan.segment(any, t).slots, "{plan:?} tile {t}");
        }
    }

    #[test]
    fn stream_k_covers_every_k_step_once() {
        for tiles in [1, 5, 24, 96, 131, 133, 192, 300, 2048] {
            for k_steps in [1, 3, 64, 96, 192] {
                for sms in [7, 132] {
                    for dp_waves in 0..3 {
                        let dp_tiles = (dp_waves * sms).min(tiles / sms * sms);
                        if (tiles - dp_tiles) * k_steps < sms {
                            continue; // plans keep every range non-empty
                        }
                        check_cover(StreamKPlan {
                            tiles,
                            k_steps,
                            dp_tiles,
                            sk_units: sms,
                        });
                    }
                }
            }
        }
    }

    #[test]
    fn chosen_plans_cover_and_skip_full_waves() {
        // 8192^3 on 128x256 tiles: 2048 tiles = 15.5 waves of 132: whole tiles unless
        // forced, then stream-K over the last 1.5 waves.
        assert_eq!(choose_stream_k(64, 2048, 128, 132), None);
        let p = stream_k_plan(2048, 128, 132).unwrap();
        assert_eq!(p.dp_tiles, 14 * 132);
        check_cover(p);
        // GPT-3 MLP B = 1024, GeMM1 (128x256): 192 tiles, 1.45 waves, 8 row tiles: whole tiles;
        // forced: all stream-K, each tile over at most 2 ranges.
        assert_eq!(choose_stream_k(8, 192, 192, 132), None);
        let p = stream_k_plan(192, 192, 132).unwrap();
        assert_eq!(p.dp_tiles, 0);
        assert_eq!(p.slots_per_tile(), 2);
        check_cover(p);
        // GPT-3 MLP B = 64, GeMM1 (128x128): 48 tiles of 192 K-steps, one row tile: stream-K.
        let p = choose_stream_k(1, 48, 192, 132).unwrap();
        assert_eq!(p.dp_tiles, 0);
        check_cover(p);
        // GPT-3 MLP B = 128 on 128x192 tiles: GeMM2's 64 tiles in halves, GeMM1's 32 in
        // quarters, 128 ranges, each inside one tile.
        for (tiles, k_steps, per_tile) in [(64, 96, 2), (32, 192, 4)] {
            let p = choose_stream_k(1, tiles, k_steps, 132).unwrap();
            assert_eq!((p.dp_tiles, p.sk_units), (0, 128));
            for u in 0..p.units() {
                let (first, last) = p.unit_tiles(u).unwrap();
                assert_eq!(first, last, "range {u} crosses a tile's edge");
                let seg = p.segment(u, first);
                assert_eq!((seg.k_end - seg.k_begin, seg.slots), (k_steps / per_tile, per_tile));
            }
            check_cover(p);
        }
        // Fewer than two ranges a tile: one range per block.
        assert_eq!(tile_aligned_units(96, 132), 132);
        assert_eq!(tile_aligned_units(66, 132), 132);
        assert_eq!(tile_aligned_units(65, 132), 130);
        assert_eq!(tile_aligned_units(0, 132), 132);
        // Two row tiles (B = 256): whole tiles.
        assert_eq!(choose_stream_k(2, 96, 192, 132), None);
        // Too little work to cut.
        assert_eq!(choose_stream_k(1, 1, 1, 132), None);
    }

    #[test]
    fn split_k_segments_are_the_balanced_splits() {
        let none = StreamKPlan::default();
        let s = k_segment(5, 2, 100, 4, &none);
        assert_eq!((s.k_begin, s.k_end, s.first_slot, s.slot, s.slots), (50, 75, 20, 2, 4));
        let s = k_segment(5, 0, 100, 1, &none);
        assert_eq!((s.k_begin, s.k_end, s.slots), (0, 100, 1));
    }
}
