//! Scoreboard arrivals and the producer's post through the dependency array.

use bytemuck::{Pod, Zeroable};

use super::memory::word;
use super::{push_batch, LaunchWindow, Position, ProtocolError, ProtocolMemory};
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
    arrival_completes(addr, old, needed, epoch)
}

/// Whether the arrival that read `old` from the counter at `addr` is the one that completes a
/// consumer needing `needed` arrivals in launch `epoch` (the counter then reaches `(epoch + 1)
/// * needed`); an `old` behind or past the launch's window is an error.
fn arrival_completes(addr: DevAddr, old: u32, needed: u32, epoch: u32) -> Result<bool, ProtocolError> {
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

/// Arrivals one lane of a post issues before it reads any of their results: the lane's
/// fetch-adds of a batch are in flight together (relaxed, so nothing orders one behind the
/// other), then one fence and the batch's pushes. The band policies' rows are hundreds of
/// entries long (RowBandSync over 8 rows of 32 tiles: 256, 8 per lane), and one round trip per
/// arrival and per push made the post that completes a band take about 16 round trips.
pub const POST_BATCH: usize = 4;
const _: () = assert!(POST_BATCH <= 32, "lane masks are u32");

/// A producer block's post of finished tile `producer` (its linear tile id) in launch
/// `epoch`, along one edge: makes the block's output visible, arrives at every consumer tile of
/// the producer's CSR row, and pushes each consumer tile whose arrival completed it. Returns
/// how many it pushed.
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
///
/// # Memory ordering
///
/// The fences make the arrivals what [`arrive`]'s acquire-release fetch-add is, without one
/// round trip each (PTX's release and acquire patterns; C++'s fence synchronization):
/// * `fence_acq_rel`, then relaxed fetch-adds: a release pattern, so every arrival carries the
///   block's output (the caller's block barrier has ordered it before this lane's fence);
/// * relaxed fetch-adds, then `fence_acq_rel` ([`push_batch`]'s): an acquire pattern. The
///   arrival that completes a consumer read the counter's value through the chain of earlier
///   fetch-adds on it (an RMW chain is a release sequence), so after the fence this lane has
///   acquired every producer's output; the same fence, then the `seq` stores, publish it to
///   the poppers.
///
/// Each batch of [`POST_BATCH`] entries takes one round trip for its arrivals and, when any
/// completed, one for their queue tickets and one fence, whatever their number.
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
    // Every loop below runs exactly POST_BATCH times over lane masks, so the compiler unrolls
    // it and the batch stays in registers (a runtime index put it in local memory: ptxas gave
    // the scoreboard benchmark an 80-byte stack frame).
    while entry < end {
        let (mut consumer, mut needed, mut old) = ([0u32; POST_BATCH], [0u32; POST_BATCH], [0u32; POST_BATCH]);
        let mut issued = 0u32;
        for i in 0..POST_BATCH {
            if entry < end {
                let c = mem.load_readonly(word(deps.consumers, entry));
                if c >= edge.scoreboard.len {
                    return Err(ProtocolError::OutOfRange {
                        addr: edge.scoreboard.counters,
                        index: c,
                        len: edge.scoreboard.len,
                    });
                }
                consumer[i] = c;
                needed[i] = mem.load_readonly(word(edge.needed, c));
                old[i] = mem.fetch_add_relaxed(word(edge.scoreboard.counters, c), 1);
                issued |= 1 << i;
                entry = entry.saturating_add(step);
            }
        }
        let mut ready = 0u32;
        for i in 0..POST_BATCH {
            if issued & (1 << i) != 0
                && arrival_completes(word(edge.scoreboard.counters, consumer[i]), old[i], needed[i], epoch)?
            {
                ready |= 1 << i;
            }
        }
        if ready != 0 {
            pushed += push_batch(mem, &edge.queue, window, &consumer, ready)?;
        }
    }
    Ok(pushed)
}
