//! Host tests of the persistent scheduler's queue polling, timeout report and no-protocol
//! ticket arithmetic, on [`AtomicWords`].

extern crate std;

use core::sync::atomic::AtomicU32;

use super::*;
use crate::protocol::{prefill_head, prefill_slot, prefill_tail, push, slot_addr, AtomicWords};

const BASE: DevAddr = 0x2000;

/// Two queues of `tiles` slots each: counters on their own lines, then the slots.
struct TwoQueues {
    words: [AtomicU32; 512],
    tiles: [u32; 2],
}

impl TwoQueues {
    fn new(tiles: [u32; 2]) -> Self {
        assert!(tiles.iter().all(|&t| t <= 64));
        Self {
            words: core::array::from_fn(|_| AtomicU32::new(0)),
            tiles,
        }
    }

    fn mem(&self) -> AtomicWords<'_> {
        AtomicWords::new(BASE, &self.words)
    }

    fn queue(&self, i: u32) -> StageQueue {
        let at = BASE + 4 * 256 * i as u64;
        StageQueue {
            queue: WorkQueue {
                counters: at,
                slots: at + 256,
                capacity: self.tiles[i as usize],
                stage: i,
            },
            tiles: self.tiles[i as usize],
            // Stage 1 consumes stage 0.
            upstream: if i == 1 { 0b01 } else { 0 },
        }
    }

    /// What the prefill kernel writes before launch `epoch`: `ready` into stage `i`'s queue.
    fn prefill(&self, i: u32, epoch: u32, ready: &[u32]) {
        let mem = self.mem();
        let q = self.queue(i);
        let w = LaunchWindow::new(epoch, q.tiles);
        for (p, &tile) in ready.iter().enumerate() {
            let slot = prefill_slot(w, p as u32, tile);
            let at = slot_addr(&q.queue, p as u32);
            mem.store_relaxed(at, slot.tile);
            mem.store_relaxed(at + 4, slot.seq);
        }
        mem.store_relaxed(q.queue.counters + TAIL, prefill_tail(w, ready.len() as u32));
        mem.store_relaxed(q.queue.counters + HEAD, prefill_head(w));
    }
}

#[test]
fn rounds_pop_downstream_first_and_count_finished_stages() {
    let q = TwoQueues::new([2, 2]);
    let mem = q.mem();
    q.prefill(0, 0, &[1, 0]);
    let mut finished = 0;
    let mut poll = || poll_queues(&mem, 2, 0, 100, &mut finished, |i| q.queue(i));
    assert_eq!(poll(), Ok(Poll::Tile { stage: 0, tile: 1 }));
    // Stage 1's tile is pushed by a producer: it is taken before stage 0's next one.
    push(&mem, &q.queue(1).queue, LaunchWindow::new(0, 2), 1).unwrap();
    assert_eq!(poll(), Ok(Poll::Tile { stage: 1, tile: 1 }));
    assert_eq!(poll(), Ok(Poll::Tile { stage: 0, tile: 0 }));
    assert_eq!(poll(), Ok(Poll::Empty));
    push(&mem, &q.queue(1).queue, LaunchWindow::new(0, 2), 0).unwrap();
    assert_eq!(poll(), Ok(Poll::Tile { stage: 1, tile: 0 }));
    assert_eq!(poll(), Ok(Poll::Done));
    assert_eq!(finished, 0b11);
    // Both queues were fully pushed when their last pops came, so those were fetch-adds: each
    // head ends one past the window (the pop that found it finished); the next launch's
    // prefill writes the heads back to its window's start.
    assert_eq!(mem.get(q.queue(0).queue.counters + HEAD), 3);
    assert_eq!(mem.get(q.queue(1).queue.counters + HEAD), 3);
    q.prefill(0, 1, &[0, 1]);
    q.prefill(1, 1, &[]);
    assert_eq!(mem.get(q.queue(1).queue.counters + HEAD), 2);
    let mut finished = 0;
    let popped = poll_queues(&mem, 2, 1, 100, &mut finished, |i| q.queue(i));
    assert_eq!(popped, Ok(Poll::Tile { stage: 0, tile: 0 }));
}

#[test]
fn committing_rounds_fetch_add_a_stage_once_its_upstream_is_finished() {
    let q = TwoQueues::new([2, 3]);
    let mem = q.mem().with_tick_ns(10);
    q.prefill(0, 0, &[1, 0]);
    q.prefill(1, 0, &[]);
    let w1 = LaunchWindow::new(0, 3);
    let mut finished = 0;
    let poll = |finished: &mut u32| poll_queues_committing(&mem, 2, 0, 100, finished, |i| q.queue(i));
    // Stage 0 is not finished: stage 1 is polled with the CAS loop, which takes nothing
    // unpushed (no ticket, the head stays).
    assert_eq!(poll(&mut finished), Ok(Poll::Tile { stage: 0, tile: 1 }));
    assert_eq!(poll(&mut finished), Ok(Poll::Tile { stage: 0, tile: 0 }));
    assert_eq!(mem.get(q.queue(1).queue.counters + HEAD), 0);
    push(&mem, &q.queue(1).queue, w1, 2).unwrap();
    // This round finds stage 1's pushed tile first (CAS: stage 0 is not known finished yet).
    assert_eq!(poll(&mut finished), Ok(Poll::Tile { stage: 1, tile: 2 }));
    // Stage 1 is polled first (last index first) and has nothing pushed; stage 0 is then found
    // finished.
    assert_eq!(poll(&mut finished), Ok(Poll::Empty));
    assert_eq!(finished, 0b01);
    // Now stage 1's upstream is finished: its next ticket is taken unpushed, committed.
    assert_eq!(poll(&mut finished), Ok(Poll::Ticket { stage: 1, position: 1 }));
    assert_eq!(mem.get(q.queue(1).queue.counters + HEAD), 2);
    // Another scheduler's committing round takes the ticket after it.
    let mut other = 0b01;
    assert_eq!(poll(&mut other), Ok(Poll::Ticket { stage: 1, position: 2 }));
    let q1 = q.queue(1).queue;
    assert_eq!(crate::protocol::try_slot(&mem, &q1, w1, 1), Ok(None));
    // The pushes publish them in order; the owners read their tiles.
    push(&mem, &q1, w1, 0).unwrap();
    assert_eq!(crate::protocol::try_slot(&mem, &q1, w1, 1), Ok(Some(0)));
    push(&mem, &q1, w1, 1).unwrap();
    assert_eq!(crate::protocol::wait_ticket(&mem, &q1, w1, 2, 1_000), Ok(1));
    // Every ticket is taken: the next committing round finds stage 1 finished, and the launch done.
    assert_eq!(poll(&mut finished), Ok(Poll::Done));
    assert_eq!(finished, 0b11);
    assert_eq!(
        mem.get(q1.counters + HEAD),
        4,
        "one past the window: reset by the next prefill"
    );
    // A committed ticket whose push never comes times out naming the queue's tail, as a
    // starved CAS pop's wait does: the pushes seen, and one more awaited.
    let w2 = LaunchWindow::new(1, 3);
    q.prefill(1, 1, &[]);
    let mut finished = 0b01;
    let got = poll_queues_committing(&mem, 2, 1, 100, &mut finished, |i| q.queue(i));
    assert_eq!(got, Ok(Poll::Ticket { stage: 1, position: 0 }));
    assert_eq!(
        crate::protocol::wait_ticket(&mem, &q1, w2, 0, 1_000),
        Err(ProtocolError::Timeout {
            addr: q1.counters + TAIL,
            seen: 3,
            expected: 4
        })
    );
    // The plain round never commits: the same state answers Empty.
    assert_eq!(poll_queues(&mem, 2, 1, 100, &mut 0b01, |i| q.queue(i)), Ok(Poll::Empty));
}

#[test]
fn a_queue_never_filled_times_out_naming_the_most_upstream_stage() {
    let q = TwoQueues::new([3, 2]);
    let mem = q.mem().with_tick_ns(10);
    let mut finished = 0;
    // Epoch 2: both queues were left at the window start by the previous launch.
    for i in 0..2 {
        let c = q.queue(i).queue.counters;
        mem.store_relaxed(c + HEAD, 2 * q.tiles[i as usize]);
        mem.store_relaxed(c + TAIL, 2 * q.tiles[i as usize]);
    }
    let got = wait_queues(&mem, 2, 2, 1_000, &mut finished, |i| q.queue(i), || false);
    assert_eq!(
        got,
        Err(WaitError::Failed(StageError {
            stage: 0,
            error: ProtocolError::Timeout {
                addr: q.queue(0).queue.counters + TAIL,
                seen: 6,
                expected: 7,
            },
        }))
    );
    assert_eq!(
        error_code(&ProtocolError::Timeout {
            addr: 0,
            seen: 0,
            expected: 0
        }),
        ErrorCode::QueueTimeout
    );
    // Another block's report stops the wait without a second report.
    let mut calls = 0;
    let got = wait_queues(
        &mem,
        2,
        2,
        u64::MAX,
        &mut finished,
        |i| q.queue(i),
        || {
            calls += 1;
            calls == 3
        },
    );
    assert_eq!(got, Err(WaitError::Aborted));
    // A tile pushed while waiting is returned.
    push(&mem, &q.queue(1).queue, LaunchWindow::new(2, 2), 1).unwrap();
    let got = wait_queues(&mem, 2, 2, 1_000, &mut finished, |i| q.queue(i), || false);
    assert_eq!(got, Ok(Poll::Tile { stage: 1, tile: 1 }));
}

#[test]
fn a_stale_queue_is_reported_with_its_stage() {
    let q = TwoQueues::new([2, 2]);
    let mem = q.mem();
    let mut finished = 0;
    // Launch 1 while stage 1's head is still in launch 0's window (an aborted launch).
    q.prefill(0, 1, &[0, 1]);
    mem.store_relaxed(q.queue(0).queue.counters + HEAD, 2);
    mem.store_relaxed(q.queue(1).queue.counters + HEAD, 1);
    mem.store_relaxed(q.queue(1).queue.counters + TAIL, 2);
    let got = poll_queues(&mem, 2, 1, 100, &mut finished, |i| q.queue(i));
    assert!(
        matches!(
            got,
            Err(StageError {
                stage: 1,
                error: ProtocolError::StaleCounter {
                    seen: 1,
                    window_start: 2,
                    ..
                }
            })
        ),
        "{got:?}"
    );
}

#[test]
fn no_protocol_tickets_cover_every_tile_once_and_advance_exactly_per_launch() {
    let counts = [3u32, 5, 2];
    let total: u32 = counts.iter().sum();
    for ctas in [1u32, 4, 17] {
        let mut counter = 0u32;
        for epoch in 0..3u32 {
            let w = counter_window(epoch, total, ctas);
            let mut seen = [[0u32; 5]; 3];
            let (mut first, mut last) = (None, 0);
            // Every block takes tickets until it gets one past the launch's tiles.
            for _ in 0..ctas {
                loop {
                    let t = counter;
                    counter = counter.wrapping_add(1);
                    match counter_ticket(t, w, 3, |i| counts[i as usize]) {
                        Some((s, tile)) => {
                            seen[s as usize][tile as usize] += 1;
                            first.get_or_insert(s);
                            last = s;
                        }
                        None => break,
                    }
                }
            }
            for (s, &c) in counts.iter().enumerate() {
                assert!(
                    seen[s][..c as usize].iter().all(|&n| n == 1),
                    "{ctas} blocks, launch {epoch}"
                );
            }
            // Last stage first, as the queue scheduler prefers.
            assert_eq!((first, last), (Some(2), 0));
            assert_eq!(counter, w.start.wrapping_add(total + ctas));
        }
    }
    assert_eq!(locate_ticket(0, 3, |i| counts[i as usize]), Some((2, 0)));
    assert_eq!(locate_ticket(2, 3, |i| counts[i as usize]), Some((1, 0)));
    assert_eq!(locate_ticket(9, 3, |i| counts[i as usize]), Some((0, 2)));
    assert_eq!(locate_ticket(10, 3, |i| counts[i as usize]), None);
    // A counter behind the window (left by an aborted launch) hands out nothing.
    let w = counter_window(2, total, 4);
    assert_eq!(
        counter_ticket(w.start.wrapping_sub(1), w, 3, |i| counts[i as usize]),
        None
    );
}

#[test]
fn the_twin_walks_each_stage_in_the_plain_kernels_raster_order() {
    use crate::gemm_sm90::{raster_tile, WG_RASTER_GROUP};
    for grid in [Grid::new(128, 32, 1), Grid::new(13, 7, 1), Grid::new(1, 48, 1)] {
        let mut seen = std::vec![false; grid.count() as usize];
        for n in 0..grid.count() {
            let id = twin_tile(n, grid);
            let (tm, tn) = raster_tile(n, grid.x, grid.y, WG_RASTER_GROUP);
            assert_eq!(grid.tile(id), crate::tile::TileIdx::new(tm, tn, 0));
            assert!(!core::mem::replace(&mut seen[id as usize], true), "tile {id} twice");
        }
        assert!(seen.iter().all(|&s| s));
    }
    // The first 8 tickets of a 128 x 32 grid are column 0 of row tiles 0..8 (not row 0's
    // first 8 columns); split-K grids keep the linear order.
    assert_eq!(twin_tile(1, Grid::new(128, 32, 1)), 32);
    assert_eq!(twin_tile(5, Grid::new(4, 4, 2)), 5);
}

#[test]
fn every_protocol_error_has_its_own_code() {
    let errors = [
        ProtocolError::Timeout {
            addr: 0,
            seen: 0,
            expected: 0,
        },
        ProtocolError::SlotOverwritten {
            addr: 0,
            seen: 0,
            expected: 0,
        },
        ProtocolError::StaleCounter {
            addr: 0,
            seen: 0,
            window_start: 0,
        },
        ProtocolError::QueueFull {
            addr: 0,
            position: 0,
            capacity: 0,
        },
        ProtocolError::TooManyPushes {
            addr: 0,
            position: 0,
            per_launch: 0,
        },
        ProtocolError::ExcessArrival {
            addr: 0,
            seen: 0,
            expected: 0,
        },
        ProtocolError::OutOfRange {
            addr: 0,
            index: 0,
            len: 0,
        },
    ];
    let mut codes: [u32; 7] = core::array::from_fn(|i| error_code(&errors[i]) as u32);
    for &c in &codes {
        assert_eq!(ErrorCode::from_u32(c).map(|e| e as u32), Some(c));
        assert_ne!(c, ErrorCode::None as u32);
    }
    codes.sort_unstable();
    assert!(codes.windows(2).all(|w| w[0] != w[1]), "{codes:?}");
}

#[test]
fn stage_masks_cover_up_to_max_stages() {
    assert_eq!(all_stages(0), 0);
    assert_eq!(all_stages(3), 0b111);
    assert_eq!(all_stages(MAX_STAGES), u32::MAX);
    // No stage at all: the launch is done at once.
    let q = TwoQueues::new([1, 1]);
    let mut finished = 0;
    assert_eq!(
        poll_queues(&q.mem(), 0, 0, 10, &mut finished, |i| q.queue(i)),
        Ok(Poll::Done)
    );
}

#[test]
fn path2_waits_outlast_the_queue_wait_they_depend_on() {
    for queue in [0, 100_000_000, DEFAULT_QUEUE_TIMEOUT, u64::MAX / 2, u64::MAX] {
        let pipeline = sm90_pipeline_timeout_ns(queue);
        let post = sm90_post_timeout_ns(queue);
        assert!(pipeline >= queue && post >= pipeline, "{queue}: {pipeline} {post}");
        if queue < u64::MAX / 4 {
            assert_eq!(pipeline - queue, SM90_PIPELINE_MARGIN_NS);
            assert_eq!(post - pipeline, SM90_PIPELINE_MARGIN_NS);
        }
    }
}

const DEFAULT_QUEUE_TIMEOUT: u64 = crate::layout::DEFAULT_TIMEOUT_NS;

#[test]
fn ring_cursor_walks_the_slots_and_flips_the_phase_on_wrap() {
    let mut c = RingCursor::default();
    let mut seen = [[0u32; 2]; SM90_POST_RING as usize];
    for i in 0..5 * SM90_POST_RING {
        assert_eq!(c.slot, i % SM90_POST_RING);
        assert_eq!(c.phase, (i / SM90_POST_RING) & 1);
        seen[c.slot as usize][c.phase as usize] += 1;
        c = c.next(SM90_POST_RING);
    }
    assert!(seen.iter().flatten().all(|&n| n >= 2));
    assert_eq!(
        RingCursor { slot: 0, phase: 1 }.next(1),
        RingCursor { slot: 0, phase: 0 }
    );
}

/// An `mbarrier` of one expected arrival, as the post ring uses it: `completed` phases so far.
struct ModelBarrier(AtomicU32);

impl ModelBarrier {
    /// `mbarrier.try_wait.parity`: whether the phase of parity `parity` completed, i.e. the
    /// current phase has the other parity.
    fn try_wait_parity(&self, parity: u32) -> bool {
        self.0.load(core::sync::atomic::Ordering::Acquire) & 1 != parity
    }

    fn arrive(&self) {
        self.0.fetch_add(1, core::sync::atomic::Ordering::Release);
    }
}

/// The post ring's handoff (consumers push finished tiles, the post warp takes them) as two
/// threads over model barriers: every item arrives once, in order, and a slot is never
/// rewritten before the post side freed it; the pusher never blocks while a slot is free.
#[test]
fn post_ring_handoff_delivers_every_item_in_order_without_overwrites() {
    use core::sync::atomic::Ordering;
    const DEPTH: u32 = SM90_POST_RING;
    const ITEMS: u32 = 10_000;
    let full: [ModelBarrier; DEPTH as usize] = core::array::from_fn(|_| ModelBarrier(AtomicU32::new(0)));
    let empty: [ModelBarrier; DEPTH as usize] = core::array::from_fn(|_| ModelBarrier(AtomicU32::new(0)));
    let items: [AtomicU32; DEPTH as usize] = core::array::from_fn(|_| AtomicU32::new(u32::MAX));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut c = RingCursor::default();
            for i in 0..=ITEMS {
                while !empty[c.slot as usize].try_wait_parity(c.phase ^ 1) {
                    core::hint::spin_loop();
                }
                // The slot was taken (or never used): nobody reads it now.
                let old = items[c.slot as usize].swap(i, Ordering::Relaxed);
                assert_eq!(old, u32::MAX, "item {i}: slot {} still held {old}", c.slot);
                full[c.slot as usize].arrive();
                c = c.next(DEPTH);
            }
        });
        s.spawn(|| {
            let mut c = RingCursor::default();
            for want in 0..=ITEMS {
                while !full[c.slot as usize].try_wait_parity(c.phase) {
                    core::hint::spin_loop();
                }
                let got = items[c.slot as usize].swap(u32::MAX, Ordering::Relaxed);
                assert_eq!(got, want);
                empty[c.slot as usize].arrive();
                c = c.next(DEPTH);
            }
        });
    });
    // Every barrier completed one phase per item through its slot.
    let per_slot = (ITEMS + 1).div_ceil(DEPTH);
    for b in full.iter().chain(&empty) {
        let n = b.0.load(Ordering::Relaxed);
        assert!(n == per_slot || n == per_slot - 1, "{n}");
    }
}
