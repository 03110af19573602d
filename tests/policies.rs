//! Property tests of the synchronization policies and tile orders in `cusync_shared`, on random
//! grids: orders are permutations, every validated policy is sound for its dependency (every
//! producer tile a consumer reads is covered by an earlier wait), and what one producer launch
//! posts to each semaphore is exactly what is waited for.

use std::collections::{HashMap, HashSet};

use cusync_shared::order::{nth, position, TileOrder};
use cusync_shared::policy::{
    check_soundness, validate, Dependency, PolicyKind, Step, SyncPolicy, Violation, WaitSchedule,
};
use cusync_shared::{Grid, TileIdx};
use proptest::prelude::*;

/// A producer/consumer pair with compatible row tiling, plus the parameters policies take.
#[derive(Clone, Copy, Debug)]
struct Case {
    producer: Grid,
    consumer: Grid,
    stride: u32,
    taps: u32,
    halo: u32,
}

/// Producer grids whose columns are `stride * groups`, consumers with the same row tiles.
fn cases() -> impl Strategy<Value = Case> {
    (
        1u32..5,
        1u32..5,
        1u32..4,
        1u32..4,
        1u32..6,
        1u32..3,
        prop_oneof![Just(1u32), Just(4), Just(9)],
        0u32..3,
    )
        .prop_map(|(rows, groups, stride, pz, cy, cz, taps, halo)| Case {
            producer: Grid::new(rows, stride * groups, pz),
            consumer: Grid::new(rows, cy, cz),
            stride,
            taps,
            halo,
        })
}

/// Every dependency and policy a case can be asked about.
fn dependencies(c: &Case) -> [Dependency; 4] {
    [
        Dependency::Independent,
        Dependency::GemmRow,
        Dependency::Strided { stride: c.stride },
        Dependency::Conv2D {
            taps: c.taps,
            halo: c.halo,
        },
    ]
}

fn policies(c: &Case) -> [PolicyKind; 6] {
    [
        PolicyKind::NoSync,
        PolicyKind::TileSync,
        PolicyKind::RowSync,
        PolicyKind::StridedSync { stride: c.stride },
        PolicyKind::Conv2DTileSync { taps: c.taps },
        PolicyKind::Conv2DTileSync { taps: 1 },
    ]
}

/// The pairs the policies are designed for; each must validate.
fn intended(c: &Case, d: Dependency, p: PolicyKind) -> bool {
    use PolicyKind as K;
    match d {
        Dependency::Independent => true,
        Dependency::GemmRow | Dependency::Strided { .. } => matches!(
            p,
            K::TileSync | K::RowSync | K::StridedSync { .. } | K::Conv2DTileSync { taps: 1 }
        ),
        Dependency::Conv2D { .. } => match p {
            K::RowSync => true,
            K::Conv2DTileSync { taps } => taps == c.taps,
            K::TileSync | K::StridedSync { .. } => c.taps == 1,
            K::NoSync => false,
        },
    }
}

/// Total posted per semaphore by one launch of the producer.
fn posted_per_semaphore(p: &impl SyncPolicy, producer: Grid, consumer: Grid) -> HashMap<u32, u32> {
    let mut totals = HashMap::new();
    for id in 0..producer.count() {
        if let Some(post) = p.post(producer, consumer, producer.tile(id)) {
            *totals.entry(post.semaphore).or_insert(0) += post.amount;
        }
    }
    totals
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn builtin_orders_are_permutations(
        x in 1u32..7, y in 1u32..13, z in 1u32..4, stride in 0u32..14,
    ) {
        let grid = Grid::new(x, y, z);
        for order in [TileOrder::RowMajor, TileOrder::ColumnMajor, TileOrder::StridedRowMajor { stride }] {
            let mut seen = HashSet::new();
            for n in 0..grid.count() {
                let t = nth(order, grid, n);
                prop_assert!(grid.contains(t), "{order:?}: {t:?} outside {grid:?}");
                prop_assert!(seen.insert(t), "{order:?}: {t:?} twice");
                prop_assert_eq!(position(order, grid, t), n);
            }
            prop_assert_eq!(seen.len() as u32, grid.count());
        }
    }

    #[test]
    fn strided_order_computes_each_semaphore_group_back_to_back(
        x in 1u32..4, groups in 1u32..5, stride in 1u32..5, z in 1u32..3,
    ) {
        let producer = Grid::new(x, stride * groups, z);
        let policy = PolicyKind::StridedSync { stride };
        let order = policy.producer_order();
        let group_len = groups * z;
        for n in 0..producer.count() {
            let first = nth(order, producer, n - n % group_len);
            let this = nth(order, producer, n);
            let sem = |t: TileIdx| policy.post(producer, producer, t).unwrap().semaphore;
            prop_assert_eq!(sem(first), sem(this), "ticket {} leaves its group", n);
        }
    }

    #[test]
    fn intended_pairs_validate_and_are_sound(c in cases()) {
        for d in dependencies(&c) {
            for p in policies(&c) {
                if !intended(&c, d, p) {
                    continue;
                }
                prop_assert_eq!(validate(p, d, c.producer, c.consumer), Ok(()), "{:?} {:?}", p, d);
                prop_assert_eq!(check_soundness(&p, d, c.producer, c.consumer), Ok(()), "{:?} {:?}", p, d);
            }
        }
    }

    #[test]
    fn whatever_validates_is_sound(c in cases(), other_rows in 1u32..5) {
        let consumers = [c.consumer, Grid::new(other_rows, c.consumer.y, c.consumer.z)];
        for consumer in consumers {
            for d in dependencies(&c) {
                for p in policies(&c) {
                    if validate(p, d, c.producer, consumer).is_ok() {
                        prop_assert_eq!(check_soundness(&p, d, c.producer, consumer), Ok(()), "{:?} {:?}", p, d);
                    }
                }
            }
        }
    }

    #[test]
    fn posts_per_launch_equal_the_values_waited_for(c in cases()) {
        for d in dependencies(&c) {
            for p in policies(&c) {
                if validate(p, d, c.producer, c.consumer).is_err() {
                    continue;
                }
                let posted = posted_per_semaphore(&p, c.producer, c.consumer);
                for id in 0..c.consumer.count() {
                    let tile = c.consumer.tile(id);
                    for i in 0..d.step_count(c.producer, tile) {
                        let step = d.step(c.producer, tile, i);
                        if let Some(w) = p.wait(c.producer, c.consumer, tile, step) {
                            let total = posted.get(&w.semaphore).copied().unwrap_or(0);
                            prop_assert_eq!(total, w.value, "{:?} {:?} tile {:?} step {:?}", p, d, tile, step);
                            prop_assert_eq!(w.target(2), 3 * total);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn no_sync_never_covers_a_real_dependency(c in cases()) {
        let r = check_soundness(&PolicyKind::NoSync, Dependency::GemmRow, c.producer, c.consumer);
        let uncovered = matches!(r, Err(Violation::Uncovered { .. }));
        prop_assert!(uncovered);
    }

    /// The stream-mode wait walk, K-step by K-step, as the device makes it (`StreamStage` in
    /// device/src/stream.rs): with the host's affine schedule, every wait is made at the same
    /// K-step, on the same semaphore, for the same value as the policy's column-by-column walk,
    /// for producer tiles narrower or wider than the K-step and for split-K units that start
    /// mid-row.
    #[test]
    fn the_affine_schedule_waits_where_the_policy_walk_does(
        c in cases(),
        tile_n in prop_oneof![Just(32u32), Just(64), Just(96), Just(192), Just(200)],
        k_tile in prop_oneof![Just(32u32), Just(64)],
        start_frac in 0u32..4,
    ) {
        let k_steps = (c.producer.y * tile_n).div_ceil(k_tile);
        let kb = k_steps * start_frac / 4;
        for policy in policies(&c) {
            let schedule = WaitSchedule::derive(&policy, c.producer, c.consumer, tile_n);
            if !schedule.is_some() {
                continue;
            }
            for row in 0..c.consumer.x {
                let tile = TileIdx::new(row, 0, 0);
                let walked = generic_walk(&policy, c.producer, c.consumer, tile, tile_n, k_tile, kb, k_steps);
                let scheduled = scheduled_walk(&schedule, row, k_tile, kb, k_steps);
                prop_assert_eq!(walked, scheduled, "{:?} row {} tile_n {} k_tile {} kb {}", policy, row, tile_n, k_tile, kb);
            }
        }
    }
}

/// `(K-step, semaphore, value)` of every wait of a unit covering K-steps `kb..ke`: the device's
/// generic walk (`StreamStage::wait_slow` without a schedule).
#[allow(clippy::too_many_arguments)]
fn generic_walk(
    policy: &PolicyKind,
    producer: Grid,
    consumer: Grid,
    tile: TileIdx,
    tile_n: u32,
    k_tile: u32,
    kb: u32,
    ke: u32,
) -> Vec<(u32, u32, u32)> {
    let (mut out, mut next, mut last_sem, mut fresh) = (Vec::new(), 0u32, u32::MAX, true);
    let step_of = |col: u32| Step {
        row: tile.x,
        k: col,
        first_in_row: col == 0,
    };
    for kt in kb..ke {
        if kt < next {
            continue;
        }
        let first = if std::mem::replace(&mut fresh, false) {
            0
        } else {
            kt * k_tile / tile_n
        };
        let last = (((kt + 1) * k_tile - 1) / tile_n).min(producer.y - 1);
        for col in first..=last {
            if let Some(w) = policy.wait(producer, consumer, tile, step_of(col)) {
                if w.semaphore != last_sem {
                    last_sem = w.semaphore;
                    out.push((kt, w.semaphore, w.value));
                }
            }
        }
        let mut c = last + 1;
        while c < producer.y {
            match policy.wait(producer, consumer, tile, step_of(c)) {
                Some(w) if w.semaphore != last_sem => break,
                _ => c += 1,
            }
        }
        next = if c >= producer.y { u32::MAX } else { c * tile_n / k_tile };
    }
    out
}

/// The same, on the edge's affine schedule (`StreamStage::wait_scheduled`).
fn scheduled_walk(s: &WaitSchedule, row: u32, k_tile: u32, kb: u32, ke: u32) -> Vec<(u32, u32, u32)> {
    let (mut out, mut next, mut i) = (Vec::new(), 0u32, 0u32);
    for kt in kb..ke {
        if kt < next {
            continue;
        }
        while i < s.waits && s.k_elem(i) < (kt + 1) * k_tile {
            let w = s.wait(row, i);
            out.push((kt, w.semaphore, w.value));
            i += 1;
        }
        next = if i < s.waits { s.k_elem(i) / k_tile } else { u32::MAX };
    }
    out
}
