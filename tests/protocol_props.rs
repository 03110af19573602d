//! Property tests of the persistent-mode protocol (`cusync_shared::protocol`) on the host:
//! the queue, tile counter and scoreboard against reference models over several launches
//! (sequential), and a planned graph run by racing std threads through the shared protocol.
//! The interleavings at the level of the memory model are loom's job (`loom_protocol.rs`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use cusync::plan::{PlanSpec, ProtocolImage, StageId, StageOrder};
use cusync_shared::layout::{Scoreboard, WorkQueue};
use cusync_shared::order::TileOrder;
use cusync_shared::policy::{for_each_read, Dependency, PolicyKind};
use cusync_shared::protocol::{
    arrive, pop_blocking, post_producer_tile, prefill_head, prefill_slot, prefill_tail, push, slot_addr, take_tile,
    try_pop, AtomicWords, LaunchWindow, Pop, ProtocolError, ProtocolMemory,
};
use cusync_shared::{Grid, TileIdx};
use proptest::prelude::*;

const BASE: u64 = 0x4000;
/// Polls (ticks of `AtomicWords`' virtual clock) before a wait gives up.
const TIMEOUT: u64 = 100_000;

/// Words for one queue of `capacity` slots: counters at word 0 (head) and 32 (tail), slots at
/// word 64.
fn queue_words(capacity: u32) -> (Vec<AtomicU32>, WorkQueue) {
    let words = (0..64 + 2 * capacity).map(|_| AtomicU32::new(0)).collect();
    let queue = WorkQueue {
        counters: BASE,
        slots: BASE + 256,
        capacity,
        stage: 0,
    };
    (words, queue)
}

/// One launch's operations on a queue of `tiles` tiles: the tiles in push order, and between
/// pushes, how many pops to try (`try_pop`, or `pop_blocking` when something is queued).
fn launch_ops(tiles: u32) -> impl Strategy<Value = (Vec<u32>, Vec<(u8, bool)>)> {
    let order = Just((0..tiles).collect::<Vec<_>>()).prop_shuffle();
    let pops = prop::collection::vec((0u8..3, any::<bool>()), tiles as usize..=tiles as usize);
    (order, pops)
}

proptest! {
    /// The queue behaves as a FIFO with a fixed number of tickets per launch, across launches
    /// that reuse its slots (each starting from the prefill's head): `try_pop` is `Empty`
    /// exactly when the FIFO is, `Finished` exactly when the launch's tiles are all popped, the
    /// tail ends every launch at its end and the head at or past it (pops of a fully pushed
    /// queue are fetch-adds).
    #[test]
    fn queue_matches_a_fifo_over_launches(
        tiles in 1u32..6,
        launches in prop::collection::vec(any::<u64>(), 1..4),
        seed_ops in launch_ops(5),
    ) {
        let (words, queue) = queue_words(tiles);
        let mem = AtomicWords::new(BASE, &words);
        for (epoch, salt) in launches.iter().enumerate() {
            let epoch = epoch as u32;
            let w = LaunchWindow::new(epoch, tiles);
            mem.store_relaxed(queue.counters, prefill_head(w));
            let (order, pops) = &seed_ops;
            let order: Vec<u32> = order.iter().copied().filter(|&t| t < tiles).collect();
            let mut fifo = VecDeque::new();
            let mut popped = 0;
            for (i, &tile) in order.iter().enumerate() {
                let tile = tile ^ (*salt as u32 & 0xf0); // different ids per launch
                push(&mem, &queue, w, tile).unwrap();
                fifo.push_back(tile);
                let (tries, blocking) = pops[i];
                for _ in 0..tries {
                    let got = if blocking && !fifo.is_empty() {
                        pop_blocking(&mem, &queue, w, TIMEOUT).unwrap().map_or(Pop::Finished, Pop::Tile)
                    } else {
                        try_pop(&mem, &queue, w, TIMEOUT).unwrap()
                    };
                    let expected = match fifo.pop_front() {
                        Some(t) => { popped += 1; Pop::Tile(t) }
                        None if popped == tiles => Pop::Finished,
                        None => Pop::Empty,
                    };
                    prop_assert_eq!(got, expected);
                }
            }
            while let Some(t) = fifo.pop_front() {
                prop_assert_eq!(try_pop(&mem, &queue, w, TIMEOUT).unwrap(), Pop::Tile(t));
            }
            prop_assert_eq!(try_pop(&mem, &queue, w, TIMEOUT).unwrap(), Pop::Finished);
            prop_assert_eq!(pop_blocking(&mem, &queue, w, TIMEOUT).unwrap(), None);
            prop_assert_eq!(w.position(mem.get(queue.counters)), cusync_shared::protocol::Position::Done);
            prop_assert_eq!(mem.get(queue.counters + 128), w.end());
        }
    }

    /// The tile counter hands out `0..tiles` in order once per launch, however many extra
    /// times blocks ask, and never moves past the launch's end.
    #[test]
    fn tile_counter_is_exact_per_launch(tiles in 0u32..8, extra in prop::collection::vec(0u32..4, 1..5)) {
        let words: Vec<AtomicU32> = (0..1).map(|_| AtomicU32::new(0)).collect();
        let mem = AtomicWords::new(BASE, &words);
        for (epoch, &asks) in extra.iter().enumerate() {
            let w = LaunchWindow::new(epoch as u32, tiles);
            for n in 0..tiles {
                prop_assert_eq!(take_tile(&mem, BASE, w), Ok(Some(n)));
            }
            for _ in 0..asks {
                prop_assert_eq!(take_tile(&mem, BASE, w), Ok(None));
            }
            prop_assert_eq!(mem.get(BASE), w.end());
        }
    }

    /// Arrivals in any interleaving complete each consumer exactly at its last arrival of the
    /// launch, every launch; one arrival too many is reported.
    #[test]
    fn scoreboard_completes_each_entry_at_its_last_arrival((needed, launches) in arrival_orders()) {
        let words: Vec<AtomicU32> = needed.iter().map(|_| AtomicU32::new(0)).collect();
        let mem = AtomicWords::new(BASE, &words);
        let sb = Scoreboard { counters: BASE, len: needed.len() as u32, _pad: 0 };
        for (epoch, arrivals) in launches.iter().enumerate() {
            let epoch = epoch as u32;
            let mut left = needed.clone();
            for &c in arrivals {
                left[c as usize] -= 1;
                let completed = arrive(&mem, &sb, c, needed[c as usize], epoch);
                prop_assert_eq!(completed, Ok(left[c as usize] == 0));
            }
        }
        let epoch = launches.len() as u32 - 1;
        let excess = arrive(&mem, &sb, 0, needed[0], epoch);
        prop_assert!(matches!(excess, Err(ProtocolError::ExcessArrival { .. })), "{:?}", excess);
    }
}

/// Targets for a few consumer tiles, and for 1 to 3 launches an order of all their arrivals
/// (consumer `c` appears `needed[c]` times), shuffled independently per launch.
fn arrival_orders() -> impl Strategy<Value = (Vec<u32>, Vec<Vec<u32>>)> {
    prop::collection::vec(1u32..5, 1..5).prop_flat_map(|needed| {
        let arrivals: Vec<u32> = (0..needed.len() as u32)
            .flat_map(|c| std::iter::repeat_n(c, needed[c as usize] as usize))
            .collect();
        let launches = prop::collection::vec(Just(arrivals).prop_shuffle(), 1..4);
        (Just(needed), launches)
    })
}

/// A diamond with split-K, a halo and fan-in, run by `workers` threads that each loop over
/// every stage's queue (`try_pop`) like persistent blocks of a megakernel, for several
/// launches with a join between launches. Each tile's completion is stamped with its launch;
/// before running a tile a worker checks (acquire) that every producer tile it reads carries
/// this launch's stamp, and each tile must run exactly once per launch.
fn run_threaded(workers: usize, launches: u32) {
    let mut g = PlanSpec::new();
    let a = g.stage("a", Grid::new(4, 3, 1));
    let b = g.stage("b", Grid::new(4, 4, 2));
    let c = g.stage("c", Grid::new(4, 2, 1));
    let d = g.stage("d", Grid::new(4, 2, 1));
    g.set_order(a, StageOrder::Builtin(TileOrder::ColumnMajor));
    g.edge(a, b, Dependency::GemmRow, PolicyKind::TileSync)
        .edge(
            a,
            c,
            Dependency::Conv2D { taps: 9, halo: 1 },
            PolicyKind::Conv2DTileSync { taps: 9 },
        )
        .edge(b, d, Dependency::GemmRow, PolicyKind::RowSync)
        .edge(
            c,
            d,
            Dependency::Strided { stride: 2 },
            PolicyKind::StridedSync { stride: 2 },
        );
    let plan = g.plan().unwrap();
    let image = ProtocolImage::new(&plan, 0x20_0000);
    let words: Vec<AtomicU32> = image.words.iter().map(|&w| AtomicU32::new(w)).collect();
    let mem = AtomicWords::new(image.base, &words)
        .with_tick_ns(1)
        .with_backoff(|_| std::thread::yield_now());
    let stamps: Vec<Vec<AtomicU32>> = plan
        .stages
        .iter()
        .map(|s| (0..s.tiles()).map(|_| AtomicU32::new(0)).collect())
        .collect();
    for epoch in 0..launches {
        for (addr, value) in image.prefill_writes(&plan, epoch) {
            mem.store_relaxed(addr, value);
        }
        let failed = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    let mut finished = vec![false; plan.stages.len()];
                    while !finished.iter().all(|&f| f) && !failed.load(Ordering::Relaxed) {
                        for s in 0..plan.stages.len() {
                            if finished[s] {
                                continue;
                            }
                            let w = LaunchWindow::new(epoch, plan.stages[s].tiles());
                            match try_pop(&mem, &image.stages[s].queue, w, TIMEOUT) {
                                Ok(Pop::Tile(t)) => {
                                    for &e in &plan.stages[s].incoming {
                                        let edge = &g.edges[e];
                                        let pg = plan.stages[edge.producer.0].grid;
                                        for_each_read(edge.dependency, pg, plan.stages[s].grid.tile(t), |r| {
                                            for z in 0..pg.z {
                                                let p = pg.linear(TileIdx::new(r.x, r.y, z)) as usize;
                                                let stamp = stamps[edge.producer.0][p].load(Ordering::Acquire);
                                                assert_eq!(stamp, epoch + 1, "stage {s} tile {t} ran early");
                                            }
                                        });
                                    }
                                    let before = stamps[s][t as usize].swap(epoch + 1, Ordering::Release);
                                    assert_eq!(before, epoch, "stage {s} tile {t} ran twice");
                                    for edge in image.outgoing(&plan, StageId(s)) {
                                        post_producer_tile(&mem, edge, t, epoch).unwrap();
                                    }
                                }
                                Ok(Pop::Empty) => std::thread::yield_now(),
                                Ok(Pop::Finished) => finished[s] = true,
                                Err(e) => {
                                    failed.store(true, Ordering::Relaxed);
                                    panic!("launch {epoch}, stage {s}: {e}");
                                }
                            }
                        }
                    }
                });
            }
        });
        for (s, stage) in stamps.iter().enumerate() {
            assert!(
                stage.iter().all(|x| x.load(Ordering::Relaxed) == epoch + 1),
                "stage {s} incomplete"
            );
        }
    }
}

#[test]
fn racing_workers_run_a_planned_diamond_once_per_launch() {
    for workers in [1, 2, 4, 8] {
        run_threaded(workers, 16);
    }
}

/// Pops of a fully pushed queue (the megakernel's prefilled first stage) are fetch-adds: 16
/// threads racing over a 500-tile queue, three launches in a row, hand out every tile exactly
/// once per launch; every popper's last pop says `Finished`, which leaves the head one past the
/// window per popper, and the next launch's prefilled head starts it clean.
#[test]
fn racing_pops_of_a_fully_pushed_queue_hand_out_each_tile_once() {
    let tiles = 500u32;
    let (words, q) = queue_words(tiles);
    let mem = AtomicWords::new(BASE, &words).with_backoff(|_| std::thread::yield_now());
    for epoch in 0..3 {
        let w = LaunchWindow::new(epoch, tiles);
        for p in 0..tiles {
            let slot = prefill_slot(w, p, tiles - 1 - p);
            mem.store_relaxed(slot_addr(&q, p), slot.tile);
            mem.store_relaxed(slot_addr(&q, p) + 4, slot.seq);
        }
        mem.store_relaxed(q.counters + 128, prefill_tail(w, tiles));
        mem.store_relaxed(q.counters, prefill_head(w));
        let seen: Vec<AtomicU32> = (0..tiles).map(|_| AtomicU32::new(0)).collect();
        std::thread::scope(|scope| {
            for _ in 0..16 {
                scope.spawn(|| loop {
                    match try_pop(&mem, &q, w, TIMEOUT).unwrap() {
                        Pop::Tile(t) => {
                            seen[t as usize].fetch_add(1, Ordering::Relaxed);
                        }
                        Pop::Finished => break,
                        Pop::Empty => panic!("a fully pushed queue is never empty"),
                    }
                });
            }
        });
        assert!(seen.iter().all(|c| c.load(Ordering::Relaxed) == 1), "launch {epoch}");
        assert_eq!(mem.load_relaxed(q.counters).wrapping_sub(w.end()), 16, "launch {epoch}");
    }
}
