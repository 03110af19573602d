//! Loom model checks of the persistent-mode protocol in `cusync_shared::protocol`: the same
//! functions the device runs, over a [`ProtocolMemory`] made of loom atomics.
//!
//! Each model explores every interleaving (up to a preemption bound) of a few threads and
//! checks: every tile handed out exactly once, no slot read before it is written, and a
//! consumer's reads of its producers' output ordered after their writes (the output is a loom
//! `UnsafeCell`, so a missing acquire/release edge is a reported data race). Relaunch without
//! clearing is part of every model: launch 0 runs first, single-threaded, and the concurrent
//! launch is launch 1 on the same words. Two models run with a deliberately weakened memory
//! and must fail, which shows the checks can fail.

use std::collections::BTreeSet;

use cusync_shared::layout::{DependencyArray, DevAddr, Scoreboard, WorkQueue};
use cusync_shared::protocol::{
    pop_blocking, post_producer_tile, push, take_ticket, take_tile, try_pop, try_slot, wait_slot, wait_ticket,
    LaunchWindow, PersistentEdge, Pop, ProtocolError, ProtocolMemory,
};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

#[path = "loom/words.rs"]
mod words;
use words::{LoomWords, Weakness, BASE};

/// A wait bound that never expires: a lost wake-up then shows as loom's "exceeded maximum
/// branches" (or a deadlock) instead of an error.
const NEVER: u64 = u64::MAX;
/// A wait bound of a few polls (the model clock ticks once per read). Two threads spinning
/// at once can pass the turn to each other for ever while the thread they wait for is
/// never scheduled; loom explores such paths until it runs out of branches. A bound cuts
/// them, as the device's timeout does: the waiter gives up, and the main thread finishes its
/// ticket after the joins, so the exactly-once checks still cover every execution (the
/// `Tally` lines printed with `--nocapture` say how many executions needed that).
const FEW_POLLS: u64 = 3;

/// The initial contents of a model's memory, laid out like the host lays out device memory.
#[derive(Default)]
struct Image {
    words: Vec<u32>,
}

impl Image {
    /// `n` zero words; counters get their own 32-word (128-byte) line.
    fn alloc(&mut self, n: usize) -> DevAddr {
        let start = self.words.len().next_multiple_of(32);
        self.words.resize(start + n, 0);
        BASE + 4 * start as u64
    }

    fn array(&mut self, values: &[u32]) -> DevAddr {
        let addr = self.alloc(values.len());
        let start = ((addr - BASE) / 4) as usize;
        self.words[start..start + values.len()].copy_from_slice(values);
        addr
    }

    fn queue(&mut self, capacity: u32) -> WorkQueue {
        WorkQueue {
            counters: self.alloc(64),
            slots: self.alloc(2 * capacity as usize),
            capacity,
            stage: 0,
        }
    }
}

/// Runs `f` under loom with at most `bound` preemptions per execution: 3 for the small
/// models, 2 for the queue model (2 producers + 2 consumers: about 65 000 executions at 2,
/// 1.2 million at 3), so the file stays within seconds on two cores.
fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound);
    builder.check(f);
}

/// Output "written" by a producer tile: loom tracks every access for races.
struct Outputs(Vec<UnsafeCell<u32>>);

impl Outputs {
    fn new(n: usize) -> Self {
        Self((0..n).map(|_| UnsafeCell::new(0)).collect())
    }

    fn write(&self, tile: u32, value: u32) {
        self.0[tile as usize].with_mut(|p| unsafe { *p = value });
    }

    fn read(&self, tile: u32) -> u32 {
        self.0[tile as usize].with(|p| unsafe { *p })
    }
}

/// How many executions a model ran and in how many some waiter gave up (and the main thread
/// finished its ticket): a model whose waiters always gave up would check little.
struct Tally {
    runs: std::sync::atomic::AtomicUsize,
    gave_up: std::sync::atomic::AtomicUsize,
}

impl Tally {
    const fn new() -> Self {
        Self {
            runs: std::sync::atomic::AtomicUsize::new(0),
            gave_up: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn record(&self, gave_up: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        self.runs.fetch_add(1, Relaxed);
        self.gave_up.fetch_add(gave_up as usize, Relaxed);
    }

    /// Prints the tally and checks most executions finished without giving up.
    fn check(&self, name: &str) {
        use std::sync::atomic::Ordering::Relaxed;
        let (runs, gave_up) = (self.runs.load(Relaxed), self.gave_up.load(Relaxed));
        eprintln!("{name}: {runs} executions, {gave_up} with a waiter that gave up");
        assert!(
            runs > 0 && gave_up * 2 < runs,
            "{name}: too few executions ran to completion"
        );
    }
}

/// The position of the slot whose `seq` word is at `seq_addr`.
fn position_of(queue: &WorkQueue, seq_addr: DevAddr) -> u32 {
    ((seq_addr - queue.slots) / 8) as u32
}

/// Launch 0 pushes and pops two tiles single-threaded; then two producers push one tile each
/// of launch 1 (writing the tile's output first) while two consumers pop until the launch is
/// finished and read each popped tile's output. A consumer that gives up waiting (see
/// [`FEW_POLLS`]) hands its ticket back to the main thread, which finishes it after the joins.
fn queue_model(weakness: Weakness, tally: &'static Tally) {
    const TILES: u32 = 2;
    let mut image = Image::default();
    let queue = image.queue(TILES);
    model(2, move || {
        let mem = Arc::new(LoomWords::new(&image.words, weakness));
        let out = Arc::new(Outputs::new(TILES as usize));
        let w0 = LaunchWindow::new(0, TILES);
        for t in 0..TILES {
            push(&*mem, &queue, w0, t).unwrap();
        }
        for _ in 0..TILES {
            pop_blocking(&*mem, &queue, w0, NEVER).unwrap().unwrap();
        }
        let w1 = LaunchWindow::new(1, TILES);
        let producers: Vec<_> = (0..TILES)
            .map(|t| {
                let (mem, out) = (mem.clone(), out.clone());
                thread::spawn(move || {
                    out.write(t, 100 + t);
                    push(&*mem, &queue, w1, t).unwrap();
                })
            })
            .collect();
        let consume = {
            let (mem, out) = (mem.clone(), out.clone());
            move || {
                let mut got = Vec::new();
                loop {
                    match pop_blocking(&*mem, &queue, w1, FEW_POLLS) {
                        Ok(Some(t)) => {
                            assert_eq!(out.read(t), 100 + t, "tile {t} popped before its output was visible");
                            got.push(t);
                        }
                        Ok(None) => return (got, None),
                        Err(ProtocolError::Timeout { addr, .. }) => return (got, Some(position_of(&queue, addr))),
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        };
        let other = thread::spawn(consume.clone());
        let (mut popped, stuck_here) = consume();
        let (theirs, stuck_there) = other.join().unwrap();
        popped.extend(theirs);
        for p in producers {
            p.join().unwrap();
        }
        tally.record(stuck_here.is_some() || stuck_there.is_some());
        for position in [stuck_here, stuck_there].into_iter().flatten() {
            popped.push(wait_slot(&*mem, &queue, w1, position, NEVER).unwrap());
        }
        while let Some(t) = pop_blocking(&*mem, &queue, w1, NEVER).unwrap() {
            popped.push(t);
        }
        popped.sort_unstable();
        assert_eq!(
            popped,
            (0..TILES).collect::<Vec<_>>(),
            "each pushed tile popped exactly once"
        );
        assert_eq!(
            mem.load_relaxed(queue.counters),
            w1.end(),
            "head ends at the window end"
        );
    });
}

#[test]
fn queue_two_producers_two_consumers_each_tile_once_after_its_write() {
    static TALLY: Tally = Tally::new();
    queue_model(Weakness::None, &TALLY);
    TALLY.check("queue model");
}

#[test]
#[should_panic(expected = "Causality violation")]
fn queue_model_catches_a_relaxed_publication() {
    static TALLY: Tally = Tally::new();
    queue_model(Weakness::RelaxedStore, &TALLY);
}

/// A producer pushes tile 0 while two consumers poll with `try_pop` a few times each. Tile 1
/// is pushed only after the joins, so a poller that took its ticket early (it must not: no
/// producer holds it) would be left waiting on slot 1. Then the main thread drains the queue:
/// each tile comes out exactly once.
#[test]
fn try_pop_takes_only_tickets_a_producer_holds() {
    static TALLY: Tally = Tally::new();
    const TILES: u32 = 2;
    let mut image = Image::default();
    let queue = image.queue(TILES);
    model(3, move || {
        let mem = Arc::new(LoomWords::new(&image.words, Weakness::None));
        let w = LaunchWindow::new(0, TILES);
        let producer = {
            let mem = mem.clone();
            thread::spawn(move || push(&*mem, &queue, w, 0).unwrap())
        };
        let poll = {
            let mem = mem.clone();
            move || {
                let (mut got, mut stuck) = (Vec::new(), None);
                for _ in 0..3 {
                    match try_pop(&*mem, &queue, w, FEW_POLLS) {
                        Ok(Pop::Tile(t)) => got.push(t),
                        Ok(Pop::Empty) => thread::yield_now(),
                        Ok(Pop::Finished) => unreachable!("tile 1 is not pushed yet"),
                        Err(ProtocolError::Timeout { addr, .. }) => {
                            stuck = Some(position_of(&queue, addr));
                            break;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                (got, stuck)
            }
        };
        let other = thread::spawn(poll.clone());
        let (mut got, stuck_here) = poll();
        let (theirs, stuck_there) = other.join().unwrap();
        got.extend(theirs);
        producer.join().unwrap();
        TALLY.record(stuck_here.is_some() || stuck_there.is_some());
        for position in [stuck_here, stuck_there].into_iter().flatten() {
            assert_eq!(position, 0, "try_pop took a ticket no producer held");
            got.push(wait_slot(&*mem, &queue, w, position, NEVER).unwrap());
        }
        push(&*mem, &queue, w, 1).unwrap();
        while let Pop::Tile(t) = try_pop(&*mem, &queue, w, NEVER).unwrap() {
            got.push(t);
        }
        assert_eq!(try_pop(&*mem, &queue, w, NEVER), Ok(Pop::Finished));
        got.sort_unstable();
        assert_eq!(got, vec![0, 1]);
    });
    TALLY.check("try_pop model");
}

/// Two producers push the launch's two tiles while two consumers poll with `try_pop`: a poll
/// that entered the CAS loop before the last push and sees it there switches to the fetch-add
/// pop. Each tile comes out exactly once, and no pop takes a ticket past the window.
#[test]
fn try_pop_switches_to_the_fetch_add_when_the_last_push_lands() {
    const TILES: u32 = 2;
    let mut image = Image::default();
    let queue = image.queue(TILES);
    model(2, move || {
        let mem = Arc::new(LoomWords::new(&image.words, Weakness::None));
        let w = LaunchWindow::new(0, TILES);
        let producers: Vec<_> = (0..TILES)
            .map(|t| {
                let mem = mem.clone();
                thread::spawn(move || push(&*mem, &queue, w, t).unwrap())
            })
            .collect();
        let poll = {
            let mem = mem.clone();
            move || {
                let mut got = Vec::new();
                for _ in 0..3 {
                    match try_pop(&*mem, &queue, w, NEVER) {
                        Ok(Pop::Tile(t)) => got.push(t),
                        Ok(Pop::Empty) => thread::yield_now(),
                        Ok(Pop::Finished) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
                got
            }
        };
        let other = thread::spawn(poll.clone());
        let mut got = poll();
        got.extend(other.join().unwrap());
        for p in producers {
            p.join().unwrap();
        }
        while let Pop::Tile(t) = try_pop(&*mem, &queue, w, NEVER).unwrap() {
            got.push(t);
        }
        got.sort_unstable();
        assert_eq!(got, vec![0, 1]);
    });
}

/// Two producers each write a tile's output and push the tile while two consumers pop with
/// committed tickets (the path-2 scheduler's committing rounds): `take_ticket` (one fetch-add,
/// pushed or not), `try_slot` (no wait), then `wait_ticket`, and read the output. Each tile
/// comes out exactly once and after its write, and the fetch-adds past the window say the
/// launch is finished. A consumer that gives up waiting hands its ticket to the main thread,
/// which waits for it after the joins (see [`FEW_POLLS`]).
#[test]
fn committed_tickets_pop_each_tile_once_after_its_write() {
    static TALLY: Tally = Tally::new();
    const TILES: u32 = 2;
    let mut image = Image::default();
    let queue = image.queue(TILES);
    model(2, move || {
        let mem = Arc::new(LoomWords::new(&image.words, Weakness::None));
        let out = Arc::new(Outputs::new(TILES as usize));
        let w = LaunchWindow::new(0, TILES);
        let producers: Vec<_> = (0..TILES)
            .map(|t| {
                let (mem, out) = (mem.clone(), out.clone());
                thread::spawn(move || {
                    out.write(t, 100 + t);
                    push(&*mem, &queue, w, t).unwrap();
                })
            })
            .collect();
        let consume = {
            let (mem, out) = (mem.clone(), out.clone());
            move || {
                let mut got = Vec::new();
                while let Some(position) = take_ticket(&*mem, &queue, w).unwrap() {
                    let tile = match try_slot(&*mem, &queue, w, position).unwrap() {
                        Some(t) => t,
                        None => match wait_ticket(&*mem, &queue, w, position, FEW_POLLS) {
                            Ok(t) => t,
                            Err(ProtocolError::Timeout { .. }) => return (got, Some(position)),
                            Err(e) => panic!("{e}"),
                        },
                    };
                    assert_eq!(
                        out.read(tile),
                        100 + tile,
                        "tile {tile} taken before its output was visible"
                    );
                    got.push(tile);
                }
                (got, None)
            }
        };
        let other = thread::spawn(consume.clone());
        let (mut popped, stuck_here) = consume();
        let (theirs, stuck_there) = other.join().unwrap();
        popped.extend(theirs);
        for p in producers {
            p.join().unwrap();
        }
        TALLY.record(stuck_here.is_some() || stuck_there.is_some());
        for position in [stuck_here, stuck_there].into_iter().flatten() {
            let tile = wait_ticket(&*mem, &queue, w, position, NEVER).unwrap();
            assert_eq!(out.read(tile), 100 + tile);
            popped.push(tile);
        }
        popped.sort_unstable();
        assert_eq!(
            popped,
            (0..TILES).collect::<Vec<_>>(),
            "each pushed tile taken exactly once"
        );
        assert_eq!(take_ticket(&*mem, &queue, w), Ok(None), "every ticket is taken");
    });
    TALLY.check("committed tickets model");
}

/// Producers 0, 1, 2 feed consumers {0}, {0, 1}, {1}: the scoreboard needs 2 arrivals each.
fn three_to_two(image: &mut Image) -> PersistentEdge {
    PersistentEdge {
        deps: DependencyArray {
            offsets: image.array(&[0, 1, 3, 4]),
            consumers: image.array(&[0, 0, 1, 1]),
            num_producers: 3,
            num_edges: 4,
        },
        scoreboard: Scoreboard {
            counters: image.alloc(2),
            len: 2,
            _pad: 0,
        },
        needed: image.array(&[2, 2]),
        queue: image.queue(2),
    }
}

/// The producers of each consumer tile of [`three_to_two`].
const FEEDS: [&[u32]; 2] = [&[0, 1], &[1, 2]];

/// Launch 0 runs single-threaded; in launch 1 three producer threads write their output and
/// post, while the main thread pops both consumer tiles and reads their producers' output.
fn scoreboard_model(weakness: Weakness) {
    let mut image = Image::default();
    let edge = three_to_two(&mut image);
    model(3, move || {
        let mem = Arc::new(LoomWords::new(&image.words, weakness));
        let out = Arc::new(Outputs::new(3));
        for p in 0..3 {
            post_producer_tile(&*mem, &edge, p, 0).unwrap();
        }
        let w0 = LaunchWindow::new(0, 2);
        for _ in 0..2 {
            pop_blocking(&*mem, &edge.queue, w0, NEVER).unwrap().unwrap();
        }
        let producers: Vec<_> = (0..3u32)
            .map(|p| {
                let (mem, out) = (mem.clone(), out.clone());
                thread::spawn(move || {
                    out.write(p, 10 + p);
                    post_producer_tile(&*mem, &edge, p, 1).unwrap()
                })
            })
            .collect();
        let w1 = LaunchWindow::new(1, 2);
        let mut ready = BTreeSet::new();
        while let Some(c) = pop_blocking(&*mem, &edge.queue, w1, NEVER).unwrap() {
            for &p in FEEDS[c as usize] {
                assert_eq!(out.read(p), 10 + p, "consumer {c} ran before producer {p} posted");
            }
            assert!(ready.insert(c), "consumer {c} pushed twice");
        }
        let pushes: u32 = producers.into_iter().map(|p| p.join().unwrap()).sum();
        assert_eq!(ready, BTreeSet::from([0, 1]));
        assert_eq!(pushes, 2, "each consumer pushed exactly once");
        for c in 0..2 {
            assert_eq!(
                mem.load_relaxed(edge.scoreboard.counters + 4 * c),
                4,
                "(epoch + 1) * needed"
            );
        }
    });
}

#[test]
fn scoreboard_three_producers_two_consumers_push_once_after_all_posts() {
    scoreboard_model(Weakness::None);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn scoreboard_model_catches_relaxed_arrivals() {
    scoreboard_model(Weakness::RelaxedRmw);
}

/// The post's arrivals are relaxed fetch-adds; what orders the other producers' output before
/// the push is the acquire half of the fence after them. With a release-only fence the popper
/// can read a producer's output before it was written.
#[test]
#[should_panic(expected = "Causality violation")]
fn scoreboard_model_catches_a_post_fence_without_acquire() {
    scoreboard_model(Weakness::ReleaseOnlyFence);
}

/// Three takers share a tile counter in launch 1 (after launch 0): each ticket goes to one
/// taker, and the counter stops at exactly the window's end although every taker asks once
/// more than it gets.
#[test]
fn tile_counter_three_takers_each_tile_once() {
    const TILES: u32 = 3;
    let mut image = Image::default();
    let counter = image.alloc(1);
    model(3, move || {
        let mem = Arc::new(LoomWords::new(&image.words, Weakness::None));
        let w0 = LaunchWindow::new(0, TILES);
        while take_tile(&*mem, counter, w0).unwrap().is_some() {}
        let w1 = LaunchWindow::new(1, TILES);
        let take_all = {
            let mem = mem.clone();
            move || {
                let mut got = Vec::new();
                while let Some(n) = take_tile(&*mem, counter, w1).unwrap() {
                    got.push(n);
                }
                got
            }
        };
        let takers: Vec<_> = (0..2).map(|_| thread::spawn(take_all.clone())).collect();
        let mut got = take_all();
        for t in takers {
            got.extend(t.join().unwrap());
        }
        got.sort_unstable();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(mem.load_relaxed(counter), w1.end());
    });
}
