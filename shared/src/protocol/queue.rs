//! The workqueue: multi-producer [`push`], multi-consumer [`pop_blocking`] / [`try_pop`], and
//! the host's [`prefill_slot`] / [`prefill_tail`] (module docs of [`super`]: the epoch and
//! capacity rules).

use core::mem::{offset_of, size_of};

use super::counter::{take_bounded, Taken};
use super::wait::{spin, Verdict};
use super::{LaunchWindow, Position, ProtocolError, ProtocolMemory, POST_BATCH};
use crate::layout::{DevAddr, WorkQueue, WorkQueueCounters, WorkQueueSlot};

const HEAD: u64 = offset_of!(WorkQueueCounters, head) as u64;
const TAIL: u64 = offset_of!(WorkQueueCounters, tail) as u64;
const SLOT_BYTES: u64 = size_of::<WorkQueueSlot>() as u64;
const SLOT_TILE: u64 = offset_of!(WorkQueueSlot, tile) as u64;
const SLOT_SEQ: u64 = offset_of!(WorkQueueSlot, seq) as u64;

/// Address of the slot that holds the ticket at `position` of a launch window (the ticket's
/// offset from the window's start, which is below the capacity).
pub const fn slot_addr(queue: &WorkQueue, position: u32) -> DevAddr {
    queue.slots.wrapping_add((position as u64).wrapping_mul(SLOT_BYTES))
}

/// The `seq` that publishes ticket `start + position`: the ticket plus one, so 0 means "never
/// written" and a slot left from an earlier launch is told apart by its smaller `seq`.
const fn seq_of(window: LaunchWindow, position: u32) -> u32 {
    window.start.wrapping_add(position).wrapping_add(1)
}

/// Pushes `tile` (multi-producer): takes a tail ticket with a fetch-add, writes the tile id
/// into the ticket's slot, then publishes it with a release store of its `seq`. Everything
/// this thread wrote (or acquired) before is visible to the popper of that ticket.
///
/// `window` is launch `epoch`'s window on the queue (`per_launch` = the stage's tiles). A
/// ticket past the capacity or past the launch's tile count is an error (it has been taken,
/// so the launch cannot complete: the host must reset the protocol state).
pub fn push<M: ProtocolMemory + ?Sized>(
    mem: &M,
    queue: &WorkQueue,
    window: LaunchWindow,
    tile: u32,
) -> Result<(), ProtocolError> {
    let tail = queue.counters.wrapping_add(TAIL);
    let ticket = mem.fetch_add_relaxed(tail, 1);
    let position = ticket_position(queue, window, tail, ticket)?;
    let slot = slot_addr(queue, position);
    mem.store_relaxed(slot.wrapping_add(SLOT_TILE), tile);
    mem.store_release(slot.wrapping_add(SLOT_SEQ), seq_of(window, position));
    Ok(())
}

/// Pushes `tiles[i]` for every bit `i` of `mask`, in order of `i`, with their round trips
/// overlapped: one fetch-add each on the tail (all in flight together), the tile ids into
/// their slots, one `fence_acq_rel`, then each slot's `seq` (relaxed: after the fence it is a
/// release). What this thread wrote or acquired before the fence is visible to every popper
/// of these tickets. Errors as [`push`]'s, all checked before any ticket is published.
/// Returns how many it pushed.
pub fn push_batch<M: ProtocolMemory + ?Sized>(
    mem: &M,
    queue: &WorkQueue,
    window: LaunchWindow,
    tiles: &[u32; POST_BATCH],
    mask: u32,
) -> Result<u32, ProtocolError> {
    let tail = queue.counters.wrapping_add(TAIL);
    let mut position = [0u32; POST_BATCH];
    // Loops of exactly POST_BATCH over the mask: unrolled, so the batch stays in registers.
    for (i, p) in position.iter_mut().enumerate() {
        if mask & (1 << i) != 0 {
            *p = mem.fetch_add_relaxed(tail, 1);
        }
    }
    for (i, p) in position.iter_mut().enumerate() {
        if mask & (1 << i) != 0 {
            *p = ticket_position(queue, window, tail, *p)?;
            mem.store_relaxed(slot_addr(queue, *p).wrapping_add(SLOT_TILE), tiles[i]);
        }
    }
    mem.fence_acq_rel();
    for (i, &p) in position.iter().enumerate() {
        if mask & (1 << i) != 0 {
            mem.store_relaxed(slot_addr(queue, p).wrapping_add(SLOT_SEQ), seq_of(window, p));
        }
    }
    Ok((mask & ((1 << POST_BATCH) - 1)).count_ones())
}

/// Where tail ticket `ticket` (read from `tail`) goes in `window`: its position, or the error
/// that it is stale, past the launch's pushes or past the capacity.
fn ticket_position(queue: &WorkQueue, window: LaunchWindow, tail: DevAddr, ticket: u32) -> Result<u32, ProtocolError> {
    let position = match window.position(ticket) {
        Position::Within(p) => p,
        Position::Behind => {
            return Err(ProtocolError::StaleCounter {
                addr: tail,
                seen: ticket,
                window_start: window.start,
            })
        }
        Position::Done => {
            return Err(ProtocolError::TooManyPushes {
                addr: tail,
                position: ticket.wrapping_sub(window.start),
                per_launch: window.len,
            })
        }
    };
    if position >= queue.capacity {
        return Err(ProtocolError::QueueFull {
            addr: tail,
            position,
            capacity: queue.capacity,
        });
    }
    Ok(position)
}

/// The slot of the ticket at `position` of `window`: its address, its `seq` word's address and
/// the `seq` that publishes the ticket; a position past the capacity is
/// [`ProtocolError::OutOfRange`].
fn ticket_slot(
    queue: &WorkQueue,
    window: LaunchWindow,
    position: u32,
) -> Result<(DevAddr, DevAddr, u32), ProtocolError> {
    if position >= queue.capacity {
        return Err(ProtocolError::OutOfRange {
            addr: queue.slots,
            index: position,
            len: queue.capacity,
        });
    }
    let slot = slot_addr(queue, position);
    Ok((slot, slot.wrapping_add(SLOT_SEQ), seq_of(window, position)))
}

/// What a slot's `seen` `seq` (at `seq_addr`) tells the owner of the ticket that `expected`
/// publishes: published, not yet, or overwritten by a later ticket.
fn judge_seq(seen: u32, expected: u32, seq_addr: DevAddr) -> Verdict<()> {
    let ahead = seen.wrapping_sub(expected) as i32;
    if ahead == 0 {
        Verdict::Done(Ok(()))
    } else if ahead > 0 {
        Verdict::Done(Err(ProtocolError::SlotOverwritten {
            addr: seq_addr,
            seen,
            expected,
        }))
    } else {
        Verdict::Again
    }
}

/// Waits (acquire) until the slot of the ticket at `position` of `window` is published and
/// returns its tile id. A slot holding a later ticket is [`ProtocolError::SlotOverwritten`].
pub fn wait_slot<M: ProtocolMemory + ?Sized>(
    mem: &M,
    queue: &WorkQueue,
    window: LaunchWindow,
    position: u32,
    timeout_ns: u64,
) -> Result<u32, ProtocolError> {
    let (slot, seq_addr, expected) = ticket_slot(queue, window, position)?;
    spin(mem, seq_addr, expected, timeout_ns, |seen| {
        judge_seq(seen, expected, seq_addr)
    })?;
    Ok(mem.load_relaxed(slot.wrapping_add(SLOT_TILE)))
}

/// Pops a tile (multi-consumer), waiting for it if it is not pushed yet: takes the next head
/// ticket of `window` (bounded CAS, so the head ends the launch at exactly `window.end()`),
/// then [`wait_slot`]. `Ok(None)`: every ticket of the launch is taken.
///
/// A taken ticket commits the caller to that slot: in a persistent kernel whose blocks serve
/// several stages, blocking here on a later stage while earlier stages' tiles are untaken can
/// deadlock. Such schedulers poll with [`try_pop`] instead.
pub fn pop_blocking<M: ProtocolMemory + ?Sized>(
    mem: &M,
    queue: &WorkQueue,
    window: LaunchWindow,
    timeout_ns: u64,
) -> Result<Option<u32>, ProtocolError> {
    let head = queue.counters.wrapping_add(HEAD);
    match take_bounded(mem, head, window, |_| Ok(true))? {
        Taken::Ticket(position) => wait_slot(mem, queue, window, position, timeout_ns).map(Some),
        Taken::Exhausted | Taken::NotYet => Ok(None),
    }
}

/// What [`try_pop`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pop {
    /// A tile id.
    Tile(u32),
    /// Nothing pushed beyond what is already taken; poll again later.
    Empty,
    /// Every ticket of the launch is taken: this queue has no more work this launch.
    Finished,
}

/// Pops a tile if one has been pushed (a producer holds a tail ticket past the head), without
/// committing to an unpushed ticket. The only wait is for a producer between its fetch-add
/// and its `seq` store, bounded by `timeout_ns`.
///
/// Once the launch's tickets are all pushed (`tail` at the window's end: a stage prefilled with
/// every tile, or one whose producers are done), no ticket can land on an unpushed slot, so the
/// pop takes one with a single fetch-add on `head` instead of the CAS loop: with 132 schedulers
/// popping at once the CAS loop serializes them on one L2 round trip each (a pop cost 126 µs
/// there, session 6), the fetch-add does not. A fetch-add past the window's end answers
/// [`Pop::Finished`] and leaves `head` up to one per popper past it (a scheduler stops polling
/// a finished queue), so the next launch's prefill resets `head` ([`prefill_head`]).
///
/// A pop already in the CAS loop switches to the fetch-add as soon as it sees `tail` at the
/// window's end: when the last producer tile pushes a burst of consumer tiles (a band, or a
/// whole stage) to schedulers that all wait for it, they would otherwise take the burst one
/// CAS round trip at a time (session 11: about 100 µs for 132 blocks).
pub fn try_pop<M: ProtocolMemory + ?Sized>(
    mem: &M,
    queue: &WorkQueue,
    window: LaunchWindow,
    timeout_ns: u64,
) -> Result<Pop, ProtocolError> {
    let head = queue.counters.wrapping_add(HEAD);
    let tail = queue.counters.wrapping_add(TAIL);
    // One copy of each path (the megakernel's producer thread runs this with few registers:
    // a second, inlined fetch-add path raised its spills by 80 bytes).
    let mut all_pushed = matches!(window.position(mem.load_relaxed(tail)), Position::Done);
    if !all_pushed {
        // Positions below `pushed` are known to be held by producers. `tail` only grows within
        // a launch, so a CAS retry (a larger position) reloads it only when it passes the value
        // loaded last: a retry then costs one CAS, not a `tail` load and a CAS (the load
        // widened the window in which the expected `head` goes stale).
        let mut pushed = 0u32;
        let pushed_past = |position: u32| {
            if position < pushed {
                return Ok(true);
            }
            let seen = mem.load_relaxed(tail);
            match window.position(seen) {
                Position::Behind => Err(ProtocolError::StaleCounter {
                    addr: tail,
                    seen,
                    window_start: window.start,
                }),
                Position::Within(p) => {
                    pushed = p;
                    Ok(position < p)
                }
                Position::Done => {
                    // Leave the CAS loop for the fetch-add below.
                    all_pushed = true;
                    Ok(false)
                }
            }
        };
        match take_bounded(mem, head, window, pushed_past)? {
            Taken::Ticket(position) => return wait_slot(mem, queue, window, position, timeout_ns).map(Pop::Tile),
            Taken::Exhausted => return Ok(Pop::Finished),
            Taken::NotYet if !all_pushed => return Ok(Pop::Empty),
            Taken::NotYet => {}
        }
    }
    // Every ticket of the window is pushed: the ticket's slot is written or being written.
    match take_ticket(mem, queue, window)? {
        Some(position) => wait_slot(mem, queue, window, position, timeout_ns).map(Pop::Tile),
        None => Ok(Pop::Finished),
    }
}

/// Takes the next head ticket of `window` with one fetch-add, pushed or not: `Some(position)`
/// commits the caller to that slot, `None` says every ticket of the launch is taken (the
/// fetch-add leaves `head` one past the window's end per such caller; the next prefill resets
/// it, [`prefill_head`]). Relaxed: the ticket only names a slot; the acquire of its `seq`
/// ([`try_slot`], [`wait_slot`], [`wait_ticket`]) orders the tile's reads after the push.
///
/// [`try_pop`] takes one this way once the whole window is pushed. A scheduler may also take
/// one from a queue still being pushed (the `committing` rounds of
/// [`crate::persistent::poll_queues`]) when every producer tile upstream of the stage is
/// already taken: every tile that will push this queue is then running (or committed) in
/// some block, so the slot will be published without the caller's help, provided the caller
/// never blocks on the slot while work of its own that others await is unfinished (the path-2
/// scheduler polls without blocking, [`try_slot`], and waits, [`wait_ticket`], only between
/// tiles). Under contention this is one L2 atomic per pop where [`try_pop`]'s CAS loop
/// serializes the poppers one round trip each.
pub fn take_ticket<M: ProtocolMemory + ?Sized>(
    mem: &M,
    queue: &WorkQueue,
    window: LaunchWindow,
) -> Result<Option<u32>, ProtocolError> {
    let head = queue.counters.wrapping_add(HEAD);
    let ticket = mem.fetch_add_relaxed(head, 1);
    match window.position(ticket) {
        Position::Within(position) => Ok(Some(position)),
        Position::Done => Ok(None),
        Position::Behind => Err(ProtocolError::StaleCounter {
            addr: head,
            seen: ticket,
            window_start: window.start,
        }),
    }
}

/// The tile of the ticket at `position` of `window` if its slot is published (one acquire load
/// of its `seq`), `None` if not yet; a slot holding a later ticket is
/// [`ProtocolError::SlotOverwritten`].
pub fn try_slot<M: ProtocolMemory + ?Sized>(
    mem: &M,
    queue: &WorkQueue,
    window: LaunchWindow,
    position: u32,
) -> Result<Option<u32>, ProtocolError> {
    let (slot, seq_addr, expected) = ticket_slot(queue, window, position)?;
    match judge_seq(mem.load_acquire(seq_addr), expected, seq_addr) {
        Verdict::Done(published) => published.map(|()| Some(mem.load_relaxed(slot.wrapping_add(SLOT_TILE)))),
        Verdict::Again => Ok(None),
    }
}

/// Waits (acquire, at most `timeout_ns`) for the slot of a ticket taken with [`take_ticket`]
/// and returns its tile. A timeout is reported as a starved pop's ([`ProtocolError::Timeout`]
/// on the queue's `tail`: `seen` the pushes so far, `expected` one more), not on the slot, so
/// a report names the queue whichever pop path starved.
pub fn wait_ticket<M: ProtocolMemory + ?Sized>(
    mem: &M,
    queue: &WorkQueue,
    window: LaunchWindow,
    position: u32,
    timeout_ns: u64,
) -> Result<u32, ProtocolError> {
    match wait_slot(mem, queue, window, position, timeout_ns) {
        Err(ProtocolError::Timeout { .. }) => {
            let tail = queue.counters.wrapping_add(TAIL);
            let seen = mem.load_relaxed(tail);
            Err(ProtocolError::Timeout {
                addr: tail,
                seen,
                expected: seen.wrapping_add(1),
            })
        }
        other => other,
    }
}

/// The slot the host writes before launch `window` so that `tile` is the ticket at `position`
/// (`position < capacity`; write it at [`slot_addr`]`(queue, position)`).
pub const fn prefill_slot(window: LaunchWindow, position: u32, tile: u32) -> WorkQueueSlot {
    WorkQueueSlot {
        tile,
        seq: seq_of(window, position),
    }
}

/// The `head` the prefill writes before launch `window`: the window's start. A launch whose
/// pops ran past the window's end (the fetch-add pop of [`try_pop`]) left `head` up to one per
/// popper beyond it; every other launch left it exactly there.
pub const fn prefill_head(window: LaunchWindow) -> u32 {
    window.start
}

/// The `tail` the host writes before launch `window` after prefilling `count` slots
/// (positions `0..count`); producers' pushes take the positions after them.
pub const fn prefill_tail(window: LaunchWindow, count: u32) -> u32 {
    window.start.wrapping_add(count)
}
