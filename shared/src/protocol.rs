//! The persistent-mode protocol (CTA-pipelining paper, section III): tile counters, workqueues,
//! scoreboards and the dependency array, written once over a [`ProtocolMemory`] so the device
//! (PTX atomics) and the host (std or loom atomics, for tests and the simulator) run the same
//! state machine.
//!
//! # The pieces
//!
//! * **Tile counter** ([`take_tile`]): a stage's blocks take tickets `0, 1, ..` of a launch
//!   from one `u32`; ticket `n` computes tile `order::nth(order, grid, n)`.
//! * **Workqueue** ([`push`], [`pop_blocking`], [`try_pop`]): a multi-producer,
//!   multi-consumer ring of [`WorkQueueSlot`](crate::layout::WorkQueueSlot)s with a `head`
//!   (pop tickets) and a `tail` (push tickets) counter
//!   ([`WorkQueueCounters`](crate::layout::WorkQueueCounters)). A pusher takes a tail ticket
//!   `t` with a fetch-add, writes the tile id into its slot, then publishes it with a release
//!   store of `seq = t + 1`; a popper takes a head ticket `t` and spins (acquire) until its
//!   slot's `seq == t + 1`, then reads the tile id.
//! * **Scoreboard** ([`arrive`]): one `u32` per consumer tile, counting producer tiles that
//!   posted. The arrival that completes the launch's count pushes the consumer tile.
//! * **Dependency array** ([`post_producer_tile`]): CSR rows indexed by producer tile; a
//!   producer that finished tile `p` arrives at every consumer tile of row `p` and pushes
//!   those it completed, each exactly once. A post issues [`POST_BATCH`] arrivals per lane
//!   before it reads their results (relaxed fetch-adds between fences, the same orderings as
//!   [`arrive`]'s acquire-release one), and pushes what they completed with [`push_batch`].
//!
//! # Epochs, capacity and re-launch (nothing is ever cleared)
//!
//! Every counter counts up for ever, modulo 2^32. A queue or tile counter that hands out `N`
//! tickets per launch gives launch `e` the tickets `e*N .. e*N + N` (a [`LaunchWindow`]); a
//! scoreboard entry that needs `k` arrivals per launch completes launch `e` when it reaches
//! `(e + 1) * k`. The rules that make this exact:
//!
//! 1. **Exactly `N` per launch.** Each queue receives exactly `N` pushes per launch (`N` =
//!    the consumer stage's tile count: every tile is pushed once, by the host's prefill for
//!    tiles that need no producer, by the producer that completes its scoreboard entry for the
//!    others), and its head, like a tile counter, is advanced only by a bounded CAS that never
//!    passes `e*N + N` ([`take_tile`]), so a block that asks once too often gets `None` and
//!    leaves the counter at exactly `(e + 1) * N`. (A plain fetch-add would overshoot by one
//!    per persistent block and shift every later launch.) `N` and every scoreboard target stay
//!    the same from launch to launch; a graph whose tile counts change needs fresh state.
//! 2. **Capacity `>= N`.** Ticket `t` of launch `e` lives in slot `t - e*N` (its position in
//!    the launch, which is below `N <= capacity`), with `seq = t + 1`. The layout's original
//!    rule, slot `t % capacity`, is the same when `capacity == N` but breaks when the `u32`
//!    ticket wraps and `capacity` does not divide 2^32 (two tickets of one launch would share
//!    a slot); the position rule is wrap-safe. `seq` tells launches apart, so a slot left
//!    from launch `e - 1` (`seq = t - N + 1`) is never mistaken for ticket `t`.
//! 3. **Launches do not overlap.** Nothing in the queue can stop a producer of launch `e + 1`
//!    from overwriting a slot that a consumer of launch `e` has not read yet, and a scoreboard
//!    entry that receives an arrival of launch `e + 1` before all of launch `e`'s would skip
//!    its target (nobody pushes). So the host must start launch `e + 1` of any stage only after
//!    launch `e` of every stage that shares its queues and scoreboards has finished: one
//!    stream gives that for a persistent launch; several streams need an event join between
//!    launches. What the protocol does detect: a popper that finds its slot holding a *later*
//!    ticket reports [`ProtocolError::SlotOverwritten`], a counter behind the launch's window
//!    (an aborted launch left it short) reports [`ProtocolError::StaleCounter`], and an
//!    arrival beyond a consumer's count reports [`ProtocolError::ExcessArrival`]. After any
//!    error the host must rewrite the protocol state (zero it, epoch 0) before the next launch.
//! 4. **Prefill per launch.** Tiles the host makes ready (a source stage's whole grid, in the
//!    chosen tile order, or tiles that need no producer) are written before launch `e` as
//!    [`prefill_slot`]`(window, i, tile)` for `i < k`, `tail = window.start + k`
//!    ([`prefill_tail`]) and `head = window.start` ([`prefill_head`]); producers' pushes then
//!    take tickets `k..N` of the window. (Pops of a queue whose `tail` reached the window's end
//!    are fetch-adds that may leave `head` past it: [`try_pop`].)
//!
//! # Memory ordering
//!
//! A producer's output is made visible by [`ProtocolMemory::fence_acq_rel`] (after the block
//! barrier) before its first arrival; arrivals are acquire-release fetch-adds, so the arrival
//! that completes an entry happens after every earlier arrival's output; the push's release
//! store of `seq` and the popper's acquire load of it carry all of that to the consumer. The
//! loom models in `tests/loom_protocol.rs` check exactly this chain.

mod counter;
mod error;
mod memory;
mod queue;
mod scoreboard;
mod wait;
mod window;

#[cfg(test)]
mod tests;

#[cfg(all(not(target_arch = "nvptx64"), target_has_atomic = "64"))]
mod atomic_words;

#[cfg(all(not(target_arch = "nvptx64"), target_has_atomic = "64"))]
pub use atomic_words::AtomicWords;
pub use counter::take_tile;
pub use error::ProtocolError;
pub use memory::ProtocolMemory;
pub use queue::{
    pop_blocking, prefill_head, prefill_slot, prefill_tail, push, push_batch, slot_addr, take_ticket, try_pop,
    try_slot, wait_slot, wait_ticket, Pop,
};
pub use scoreboard::{arrive, post_producer_tile, post_producer_tile_lanes, PersistentEdge, POST_BATCH};
pub use wait::{post_semaphore, wait_reached};
pub use window::{LaunchWindow, Position};
