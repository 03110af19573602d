//! Scoreboard arrivals and the producer's post through the dependency array.

use bytemuck::{Pod, Zeroable};

use super::memory::word;
use super::{push, LaunchWindow, Position, ProtocolError, ProtocolMemory};
use crate::layout::{DependencyArray, DevAddr, Scoreboard, WorkQueue};

/// One producer stage -> consumer stage edge of a persistent-mode graph, as a producer block
/// reads it: where its finished tile arrives and where ready consumer tiles go.
///
/// Edges into one consumer stage (fan-in) share its `scoreboard`, `needed` and `queue`; a
/// producer stage with several consumer stages (fan-out) posts along each of its edges.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PersistentEdge {
    /// CSR rows indexed by the producer's linear tile id: the consumer tiles it feeds.
    pub deps: DependencyArray,
    /// The consumer stage's scoreboard (one counter per consumer tile).
    pub scoreboard: Scoreboard,
    /// Address of `scoreboard.len` `u32`s: producer tiles each consumer tile needs per launch
    /// (over all edges into the consumer stage). Written by the host, read-only on the device.
    pub needed: DevAddr,
    /// The consumer stage's workqueue; `scoreboard.len` tiles are pushed into it per launch.
    pub queue: WorkQueue,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<PersistentEdge>() == 72);
    assert!(offset_of!(PersistentEdge, scoreboard) == 24);
    assert!(offset_of!(PersistentEdge, needed) == 40);
    assert!(offset_of!(PersistentEdge, queue) == 48);
};

/// Records one producer tile's arrival at consumer tile `consumer` in launch `epoch`, where the
/// consumer needs `needed` arrivals per launch (the paper's "decrement", counting up for
/// ever). Returns `true` for exactly one arrival per launch: the one that brings the counter
/// to `(epoch + 1) * needed`. Acquire-release, so that arrival happens after every earlier
/// one, and whatever it publishes next carries all of their writes.
pub fn arrive<M: ProtocolMemory + ?Sized>(
    mem: &M,
    scoreboard: &Scoreboard,
    consumer: u32,
    needed: u32,
    epoch: u32,
) -> Result<bool, ProtocolError> {
    if consumer >= scoreboard.len {
        return Err(ProtocolError::OutOfRange {
            addr: scoreboard.counters,
            index: consumer,
            len: scoreboard.len,
        });
    }
    let addr = word(scoreboard.counters, consumer);
    let old = mem.fetch_add_acq_rel(addr, 1);
    let window = LaunchWindow::new(epoch, needed);
    match window.position(old) {
        Position::Within(arrived) => Ok(arrived + 1 == needed),
        Position::Behind => Err(ProtocolError::StaleCounter {
            addr,
            seen: old,
            window_start: window.start,
        }),
        Position::Done => Err(ProtocolError::ExcessArrival {
            addr,
            seen: old,
            expected: window.end(),
        }),
    }
}

/// A producer block's post of finished tile `producer` (its linear tile id) in launch
/// `epoch`, along one edge: makes the block's output visible ([`ProtocolMemory::fence_acq_rel`],
/// after the block barrier), arrives at every consumer tile of the producer's CSR row, and
/// pushes each consumer tile whose arrival completed it. Returns how many it pushed.
///
/// Over a launch, every consumer tile with a nonzero target is pushed exactly once, after all
/// its producers posted. Call it once per producer tile per edge (a second call is an excess
/// arrival); split-K slices are separate producer tiles.
pub fn post_producer_tile<M: ProtocolMemory + ?Sized>(
    mem: &M,
    edge: &PersistentEdge,
    producer: u32,
    epoch: u32,
) -> Result<u32, ProtocolError> {
    post_producer_tile_lanes(mem, edge, producer, epoch, 0, 1)
}

/// [`post_producer_tile`] spread over `lanes` threads (a warp): lane `lane` handles CSR entries
/// `lane, lane + lanes, ..` of the row. Each lane fences and returns the pushes it made; every
/// lane `0..lanes` must call it for the row to be complete, and a lane at or past `lanes` does
/// nothing (`lanes == 0` counts as 1).
pub fn post_producer_tile_lanes<M: ProtocolMemory + ?Sized>(
    mem: &M,
    edge: &PersistentEdge,
    producer: u32,
    epoch: u32,
    lane: u32,
    lanes: u32,
) -> Result<u32, ProtocolError> {
    let deps = &edge.deps;
    if producer >= deps.num_producers {
        return Err(ProtocolError::OutOfRange {
            addr: deps.offsets,
            index: producer,
            len: deps.num_producers,
        });
    }
    mem.fence_acq_rel();
    let begin = mem.load_readonly(word(deps.offsets, producer));
    let end = mem.load_readonly(word(deps.offsets, producer + 1));
    if end < begin || end > deps.num_edges {
        return Err(ProtocolError::OutOfRange {
            addr: deps.consumers,
            index: end,
            len: deps.num_edges,
        });
    }
    let window = LaunchWindow::new(epoch, edge.scoreboard.len);
    let step = if lanes == 0 { 1 } else { lanes };
    if lane >= step {
        return Ok(0);
    }
    let mut pushed = 0;
    let mut entry = begin.saturating_add(lane);
    while entry < end {
        let consumer = mem.load_readonly(word(deps.consumers, entry));
        if consumer >= edge.scoreboard.len {
            return Err(ProtocolError::OutOfRange {
                addr: edge.scoreboard.counters,
                index: consumer,
                len: edge.scoreboard.len,
            });
        }
        let needed = mem.load_readonly(word(edge.needed, consumer));
        if arrive(mem, &edge.scoreboard, consumer, needed, epoch)? {
            push(mem, &edge.queue, window, consumer)?;
            pushed += 1;
        }
        entry = entry.saturating_add(step);
    }
    Ok(pushed)
}
