//! Sequential tests of the protocol on [`AtomicWords`] (the concurrent ones are loom models in
//! `tests/loom_protocol.rs` and threaded property tests in `tests/protocol_props.rs`).

use core::cell::Cell;
use core::sync::atomic::AtomicU32;

use super::*;
use crate::layout::{DependencyArray, DevAddr, Scoreboard, WorkQueue};

const BASE: DevAddr = 0x1000;
const WORDS: usize = 512;

/// A word arena with a bump allocator, so tests lay out queues and CSR arrays like the host.
struct Arena {
    words: [AtomicU32; WORDS],
    next: Cell<usize>,
}

impl Arena {
    fn new() -> Self {
        Self {
            words: core::array::from_fn(|_| AtomicU32::new(0)),
            next: Cell::new(0),
        }
    }

    fn mem(&self) -> AtomicWords<'_> {
        AtomicWords::new(BASE, &self.words)
    }

    /// `n` words, starting on a 128-byte line.
    fn alloc(&self, n: usize) -> DevAddr {
        let start = self.next.get().next_multiple_of(32);
        self.next.set(start + n);
        assert!(start + n <= WORDS);
        BASE + 4 * start as u64
    }

    fn array(&self, values: &[u32]) -> DevAddr {
        let addr = self.alloc(values.len());
        let mem = self.mem();
        for (i, &v) in values.iter().enumerate() {
            mem.store_relaxed(addr + 4 * i as u64, v);
        }
        addr
    }

    fn queue(&self, capacity: u32) -> WorkQueue {
        WorkQueue {
            counters: self.alloc(64),
            slots: self.alloc(2 * capacity as usize),
            capacity,
            stage: 0,
        }
    }
}

const TIMEOUT: u64 = 1_000;

#[test]
fn tile_counter_hands_out_each_ticket_once_and_stops_at_the_window_end() {
    let arena = Arena::new();
    let mem = arena.mem();
    let counter = arena.alloc(1);
    for epoch in 0..3 {
        let w = LaunchWindow::new(epoch, 4);
        for n in 0..4 {
            assert_eq!(take_tile(&mem, counter, w), Ok(Some(n)));
        }
        // Asking again (every persistent block does once) leaves the counter where it is.
        assert_eq!(take_tile(&mem, counter, w), Ok(None));
        assert_eq!(take_tile(&mem, counter, w), Ok(None));
        assert_eq!(mem.get(counter), w.end());
    }
    // A counter left short by an aborted launch is reported, not silently reused.
    let short = arena.alloc(1);
    mem.store_relaxed(short, 2);
    assert_eq!(
        take_tile(&mem, short, LaunchWindow::new(1, 4)),
        Err(ProtocolError::StaleCounter {
            addr: short,
            seen: 2,
            window_start: 4
        })
    );
}

#[test]
fn queue_is_fifo_within_a_launch_and_reuses_slots_across_launches() {
    let arena = Arena::new();
    let mem = arena.mem();
    let q = arena.queue(3);
    for epoch in 0..4 {
        let w = LaunchWindow::new(epoch, 3);
        // The per-launch prefill's head (the last launch's fetch-add pop left it one past).
        mem.store_relaxed(q.counters, prefill_head(w));
        for tile in [7, 8, 9] {
            push(&mem, &q, w, tile + epoch).unwrap();
        }
        for tile in [7, 8, 9] {
            assert_eq!(pop_blocking(&mem, &q, w, TIMEOUT), Ok(Some(tile + epoch)));
        }
        assert_eq!(pop_blocking(&mem, &q, w, TIMEOUT), Ok(None));
        assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Finished));
        // Every ticket was pushed, so that pop was a fetch-add: one past the window's end.
        assert_eq!(mem.load_relaxed(q.counters), w.end().wrapping_add(1));
    }
}

#[test]
fn a_launch_whose_tickets_wrap_past_u32_max_keeps_every_tile() {
    // Launch 1431655765 of a 3-tile queue owns tickets 2^32 - 1, 0 and 1: slot `t % 3` would
    // put the first two in slot 0; slot = position keeps them apart.
    let arena = Arena::new();
    let mem = arena.mem();
    let q = arena.queue(3);
    let w = LaunchWindow::new(u32::MAX / 3, 3);
    assert_eq!(w.start, u32::MAX);
    mem.store_relaxed(q.counters, w.start);
    mem.store_relaxed(q.counters + 128, w.start);
    for tile in [4, 5, 6] {
        push(&mem, &q, w, tile).unwrap();
    }
    let popped: [_; 4] = core::array::from_fn(|_| pop_blocking(&mem, &q, w, TIMEOUT));
    assert_eq!(popped, [Ok(Some(4)), Ok(Some(5)), Ok(Some(6)), Ok(None)]);
}

#[test]
fn try_pop_does_not_take_unpushed_tickets() {
    let arena = Arena::new();
    let mem = arena.mem();
    let q = arena.queue(2);
    let w = LaunchWindow::new(0, 2);
    assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Empty));
    push(&mem, &q, w, 5).unwrap();
    assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Tile(5)));
    assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Empty));
    push(&mem, &q, w, 6).unwrap();
    assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Tile(6)));
    assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Finished));
}

/// [`AtomicWords`] that answers the first `stale` relaxed loads of `tail` with `stale_value`
/// (a popper that read `tail` before the last pushes landed) and counts CASes.
struct StaleTail<'a> {
    inner: AtomicWords<'a>,
    tail: DevAddr,
    stale: Cell<u32>,
    stale_value: u32,
    cases: Cell<u32>,
}

impl ProtocolMemory for StaleTail<'_> {
    fn load_acquire(&self, addr: DevAddr) -> u32 {
        self.inner.load_acquire(addr)
    }
    fn load_relaxed(&self, addr: DevAddr) -> u32 {
        if addr == self.tail && self.stale.get() > 0 {
            self.stale.set(self.stale.get() - 1);
            return self.stale_value;
        }
        self.inner.load_relaxed(addr)
    }
    fn store_relaxed(&self, addr: DevAddr, value: u32) {
        self.inner.store_relaxed(addr, value)
    }
    fn store_release(&self, addr: DevAddr, value: u32) {
        self.inner.store_release(addr, value)
    }
    fn fetch_add_relaxed(&self, addr: DevAddr, value: u32) -> u32 {
        self.inner.fetch_add_relaxed(addr, value)
    }
    fn fetch_add_acq_rel(&self, addr: DevAddr, value: u32) -> u32 {
        self.inner.fetch_add_acq_rel(addr, value)
    }
    fn cas_acq_rel(&self, addr: DevAddr, expected: u32, new: u32) -> u32 {
        self.cases.set(self.cases.get() + 1);
        self.inner.cas_acq_rel(addr, expected, new)
    }
    fn red_release_add(&self, addr: DevAddr, value: u32) {
        self.inner.red_release_add(addr, value)
    }
    fn fence_acq_rel(&self) {
        self.inner.fence_acq_rel()
    }
    fn backoff(&self, attempt: u32) {
        self.inner.backoff(attempt)
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
}

/// A pop that entered the CAS path (it saw the burst half pushed) and then finds every ticket
/// pushed takes its ticket with the fetch-add, not the CAS loop, and still gets each tile once.
#[test]
fn a_pop_that_sees_the_last_push_leaves_the_cas_loop() {
    let arena = Arena::new();
    let mem = arena.mem();
    let q = arena.queue(4);
    let w = LaunchWindow::new(0, 4);
    for t in [10, 11, 12, 13] {
        push(&mem, &q, w, t).unwrap();
    }
    assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Tile(10)));
    // The popper's first look at `tail` saw one ticket pushed (position 1 then is past it and
    // `tail` is read again: now at the window's end).
    let stale = StaleTail {
        inner: arena.mem(),
        tail: q.counters + 128,
        stale: Cell::new(1),
        stale_value: 1,
        cases: Cell::new(0),
    };
    assert_eq!(try_pop(&stale, &q, w, TIMEOUT), Ok(Pop::Tile(11)));
    assert_eq!(stale.cases.get(), 0, "the pop went through the CAS loop");
    assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Tile(12)));
    assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Tile(13)));
    assert_eq!(try_pop(&mem, &q, w, TIMEOUT), Ok(Pop::Finished));
}

#[test]
fn a_pop_of_a_tile_never_pushed_times_out_naming_the_slot() {
    let arena = Arena::new();
    let mem = arena.mem();
    let q = arena.queue(2);
    let w = LaunchWindow::new(5, 2);
    arena.mem().store_relaxed(q.counters, w.start); // head at the window start
    arena.mem().store_relaxed(q.counters + 128, w.start); // tail too
    let err = pop_blocking(&mem, &q, w, TIMEOUT).unwrap_err();
    assert_eq!(
        err,
        ProtocolError::Timeout {
            addr: slot_addr(&q, 0) + 4,
            seen: 0,
            expected: 11
        }
    );
    assert_eq!((err.addr(), err.seen(), err.expected()), (slot_addr(&q, 0) + 4, 0, 11));
}

#[test]
fn pushes_beyond_capacity_or_tiles_per_launch_are_errors() {
    let arena = Arena::new();
    let mem = arena.mem();
    let small = arena.queue(1);
    let w = LaunchWindow::new(0, 2);
    push(&mem, &small, w, 1).unwrap();
    assert!(matches!(
        push(&mem, &small, w, 2),
        Err(ProtocolError::QueueFull {
            position: 1,
            capacity: 1,
            ..
        })
    ));
    let q = arena.queue(4);
    let w = LaunchWindow::new(0, 1);
    push(&mem, &q, w, 1).unwrap();
    assert!(matches!(
        push(&mem, &q, w, 1),
        Err(ProtocolError::TooManyPushes {
            position: 1,
            per_launch: 1,
            ..
        })
    ));
}

#[test]
fn overlapping_launches_are_detected_as_an_overwritten_slot() {
    let arena = Arena::new();
    let mem = arena.mem();
    let q = arena.queue(1);
    let (e0, e1) = (LaunchWindow::new(0, 1), LaunchWindow::new(1, 1));
    push(&mem, &q, e0, 10).unwrap();
    // The next launch's producer pushes before launch 0's consumer read its slot.
    push(&mem, &q, e1, 11).unwrap();
    assert_eq!(
        wait_slot(&mem, &q, e0, 0, TIMEOUT),
        Err(ProtocolError::SlotOverwritten {
            addr: slot_addr(&q, 0) + 4,
            seen: 2,
            expected: 1
        })
    );
}

#[test]
fn prefilled_slots_pop_in_order_and_producers_push_after_them() {
    let arena = Arena::new();
    let mem = arena.mem();
    let q = arena.queue(4);
    for epoch in 0..3 {
        let w = LaunchWindow::new(epoch, 4);
        for (i, tile) in [3u32, 1].into_iter().enumerate() {
            let slot = prefill_slot(w, i as u32, tile);
            let addr = slot_addr(&q, i as u32);
            mem.store_relaxed(addr, slot.tile);
            mem.store_relaxed(addr + 4, slot.seq);
        }
        mem.store_relaxed(q.counters + 128, prefill_tail(w, 2));
        push(&mem, &q, w, 0).unwrap();
        push(&mem, &q, w, 2).unwrap();
        let popped: [_; 5] = core::array::from_fn(|_| pop_blocking(&mem, &q, w, TIMEOUT));
        assert_eq!(popped, [Ok(Some(3)), Ok(Some(1)), Ok(Some(0)), Ok(Some(2)), Ok(None)]);
    }
}

#[test]
fn exactly_one_arrival_completes_each_launch_even_across_the_wrap() {
    let arena = Arena::new();
    let mem = arena.mem();
    let counters = arena.alloc(2);
    let sb = Scoreboard {
        counters,
        len: 2,
        _pad: 0,
    };
    for epoch in 0..5 {
        let wins: [_; 3] = core::array::from_fn(|_| arrive(&mem, &sb, 1, 3, epoch));
        assert_eq!(wins, [Ok(false), Ok(false), Ok(true)]);
    }
    // Launch 1431655765 of a 3-arrival entry straddles 2^32 (start 4294967295).
    let epoch = u32::MAX / 3;
    mem.store_relaxed(counters, LaunchWindow::new(epoch, 3).start);
    let wins: [_; 3] = core::array::from_fn(|_| arrive(&mem, &sb, 0, 3, epoch));
    assert_eq!(wins, [Ok(false), Ok(false), Ok(true)]);
    assert!(matches!(
        arrive(&mem, &sb, 0, 3, epoch),
        Err(ProtocolError::ExcessArrival { .. })
    ));
    assert!(matches!(
        arrive(&mem, &sb, 2, 3, 0),
        Err(ProtocolError::OutOfRange { index: 2, len: 2, .. })
    ));
}

/// Producers 0, 1, 2 feed consumers {0}, {0, 1}, {1}.
fn three_to_two(arena: &Arena) -> PersistentEdge {
    PersistentEdge {
        deps: DependencyArray {
            offsets: arena.array(&[0, 1, 3, 4]),
            consumers: arena.array(&[0, 0, 1, 1]),
            num_producers: 3,
            num_edges: 4,
        },
        scoreboard: Scoreboard {
            counters: arena.alloc(2),
            len: 2,
            _pad: 0,
        },
        needed: arena.array(&[2, 2]),
        queue: arena.queue(2),
    }
}

#[test]
fn posts_push_each_consumer_once_when_its_last_producer_posts() {
    let arena = Arena::new();
    let mem = arena.mem();
    let edge = three_to_two(&arena);
    for (epoch, order) in [[0, 1, 2], [2, 1, 0], [1, 0, 2]].into_iter().enumerate() {
        let epoch = epoch as u32;
        let w = LaunchWindow::new(epoch, 2);
        let mut pushed = [0u32; 3];
        for (i, &p) in order.iter().enumerate() {
            pushed[i] = post_producer_tile(&mem, &edge, p, epoch).unwrap();
        }
        // In each of these orders the first poster completes nothing and each later one
        // completes exactly one consumer.
        assert_eq!(pushed, [0, 1, 1], "order {order:?}");
        let first = pop_blocking(&mem, &edge.queue, w, TIMEOUT).unwrap();
        let second = pop_blocking(&mem, &edge.queue, w, TIMEOUT).unwrap();
        let mut got = [first.unwrap(), second.unwrap()];
        got.sort_unstable();
        assert_eq!(got, [0, 1]);
        assert_eq!(pop_blocking(&mem, &edge.queue, w, TIMEOUT), Ok(None));
    }
    assert!(matches!(
        post_producer_tile(&mem, &edge, 3, 0),
        Err(ProtocolError::OutOfRange { index: 3, len: 3, .. })
    ));
}

#[test]
fn posting_over_lanes_equals_posting_from_one_thread() {
    let arena = Arena::new();
    let mem = arena.mem();
    let edge = three_to_two(&arena);
    let w = LaunchWindow::new(0, 2);
    let mut pushed = 0;
    for p in 0..3 {
        for lane in 0..2 {
            pushed += post_producer_tile_lanes(&mem, &edge, p, 0, lane, 2).unwrap();
        }
    }
    assert_eq!(pushed, 2);
    assert_eq!(
        post_producer_tile_lanes(&mem, &edge, 1, 0, 2, 2),
        Ok(0),
        "lane 2 of 2 does nothing"
    );
    let mut got = [0u32; 2];
    for g in &mut got {
        *g = pop_blocking(&mem, &edge.queue, w, TIMEOUT).unwrap().unwrap();
    }
    got.sort_unstable();
    assert_eq!(got, [0, 1]);
}

/// Producers 0 and 1 each feed all of `CONSUMERS` consumer tiles (a band: every consumer
/// needs both), listed in reverse so the queue order shows the CSR order.
const CONSUMERS: u32 = 11;

fn two_to_band(arena: &Arena) -> PersistentEdge {
    let consumers: [u32; 2 * CONSUMERS as usize] = core::array::from_fn(|i| CONSUMERS - 1 - (i as u32 % CONSUMERS));
    PersistentEdge {
        deps: DependencyArray {
            offsets: arena.array(&[0, CONSUMERS, 2 * CONSUMERS]),
            consumers: arena.array(&consumers),
            num_producers: 2,
            num_edges: 2 * CONSUMERS,
        },
        scoreboard: Scoreboard {
            counters: arena.alloc(CONSUMERS as usize),
            len: CONSUMERS,
            _pad: 0,
        },
        needed: arena.array(&[2; CONSUMERS as usize]),
        queue: arena.queue(CONSUMERS),
    }
}

#[test]
fn a_row_longer_than_a_batch_pushes_every_consumer_once() {
    assert!(CONSUMERS as usize > 2 * POST_BATCH, "the row spans several batches");
    let arena = Arena::new();
    let mem = arena.mem();
    let edge = two_to_band(&arena);
    for (epoch, lanes) in [1u32, 3, 32, 1].into_iter().enumerate() {
        let epoch = epoch as u32;
        let post = |p: u32| -> u32 {
            (0..lanes)
                .map(|lane| post_producer_tile_lanes(&mem, &edge, p, epoch, lane, lanes).unwrap())
                .sum()
        };
        assert_eq!(post(1), 0, "epoch {epoch}: the first producer completes nothing");
        assert_eq!(post(0), CONSUMERS, "epoch {epoch}: the second completes the band");
        let w = LaunchWindow::new(epoch, CONSUMERS);
        let mut got = [0u32; CONSUMERS as usize];
        for g in &mut got {
            *g = pop_blocking(&mem, &edge.queue, w, TIMEOUT).unwrap().unwrap();
        }
        if lanes == 1 {
            let row: [u32; CONSUMERS as usize] = core::array::from_fn(|i| CONSUMERS - 1 - i as u32);
            assert_eq!(got, row, "one lane pushes in CSR order");
        } else {
            let mut sorted = got;
            sorted.sort_unstable();
            let all: [u32; CONSUMERS as usize] = core::array::from_fn(|i| i as u32);
            assert_eq!(sorted, all, "lanes {lanes}: {got:?}");
        }
        assert_eq!(pop_blocking(&mem, &edge.queue, w, TIMEOUT), Ok(None));
        for c in 0..CONSUMERS {
            assert_eq!(
                mem.load_relaxed(edge.scoreboard.counters + 4 * c as u64),
                2 * (epoch + 1)
            );
        }
    }
}

/// Pushes every tile of `tiles` in chunks of [`POST_BATCH`] through [`push_batch`] (each chunk
/// checked whole before any of its tickets is published); how many it pushed.
fn push_all<M: ProtocolMemory + ?Sized>(
    mem: &M,
    queue: &WorkQueue,
    window: LaunchWindow,
    tiles: &[u32],
) -> Result<u32, ProtocolError> {
    let mut count = 0;
    for chunk in tiles.chunks(POST_BATCH) {
        let mut batch = [0u32; POST_BATCH];
        batch[..chunk.len()].copy_from_slice(chunk);
        count += push_batch(mem, queue, window, &batch, (1 << chunk.len()) - 1)?;
    }
    Ok(count)
}

#[test]
fn push_all_publishes_in_ticket_order_and_stops_at_the_window() {
    let arena = Arena::new();
    let mem = arena.mem();
    let q = arena.queue(8);
    let w = LaunchWindow::new(0, 7);
    let tiles = [9, 3, 7, 1, 5, 2];
    assert!(tiles.len() > POST_BATCH, "two chunks");
    assert_eq!(push_all(&mem, &q, w, &tiles), Ok(6));
    assert_eq!(push_all(&mem, &q, w, &[]), Ok(0));
    for &t in &tiles {
        assert_eq!(pop_blocking(&mem, &q, w, TIMEOUT), Ok(Some(t)));
    }
    assert!(matches!(
        push_all(&mem, &q, w, &[4, 6]),
        Err(ProtocolError::TooManyPushes {
            position: 7,
            per_launch: 7,
            ..
        })
    ));
    let small = arena.queue(2);
    assert!(matches!(
        push_all(&mem, &small, LaunchWindow::new(0, 4), &[1, 2, 3]),
        Err(ProtocolError::QueueFull {
            position: 2,
            capacity: 2,
            ..
        })
    ));
}

#[test]
fn a_corrupt_dependency_row_is_reported() {
    let arena = Arena::new();
    let mem = arena.mem();
    let mut edge = three_to_two(&arena);
    edge.deps.num_edges = 3; // row 2 ends at 4 > 3
    assert!(matches!(
        post_producer_tile(&mem, &edge, 2, 0),
        Err(ProtocolError::OutOfRange { index: 4, len: 3, .. })
    ));
}

#[test]
fn semaphore_wait_sees_posts_and_times_out_without_them() {
    let arena = Arena::new();
    let mem = arena.mem();
    let sem = arena.alloc(1);
    assert_eq!(
        wait_reached(&mem, sem, 2, TIMEOUT),
        Err(ProtocolError::Timeout {
            addr: sem,
            seen: 0,
            expected: 2
        })
    );
    post_semaphore(&mem, sem, 1);
    post_semaphore(&mem, sem, 1);
    assert_eq!(wait_reached(&mem, sem, 2, TIMEOUT), Ok(2));
}
