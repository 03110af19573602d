//! Memory layouts the host writes and the device reads (or the reverse).
//!
//! Every type is `#[repr(C)]` and [`Pod`], with its size and field offsets asserted at compile
//! time, so a change on one side that the other side does not see fails the build. Device
//! addresses are plain `u64` (what `cuMemAlloc` returns), so the structs are `Pod` on both sides.
//!
//! Counting rule (DESIGN.md): semaphores, tile counters and queue indices count up for ever.
//! Launch `epoch` (0-based) of a graph waits for `(epoch + 1) * expected` and posts add 1, so a
//! graph can be launched again without clearing anything.

use crate::tile::Grid;
use bytemuck::{Pod, Zeroable};

/// A device address (global memory), as returned by `cuMemAlloc`.
pub type DevAddr = u64;

/// Default bound on every device spin-wait, in nanoseconds (2 s). The host may set another.
pub const DEFAULT_TIMEOUT_NS: u64 = 2_000_000_000;

/// An array of `u32` semaphores in global memory (one per tile, row or group, per policy).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SemaphoreArray {
    /// Address of `len` `u32` counters.
    pub base: DevAddr,
    /// Number of semaphores.
    pub len: u32,
    /// Padding; always 0.
    pub _pad: u32,
}

/// Per consumer tile, how many producer tiles are still missing (persistent mode).
/// A producer decrements; the one that brings an entry to zero pushes the consumer tile.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Scoreboard {
    /// Address of `len` `u32` counters, one per consumer tile (linear tile id).
    pub counters: DevAddr,
    /// Number of consumer tiles.
    pub len: u32,
    /// Padding; always 0.
    pub _pad: u32,
}

/// Dependency array in CSR form, indexed by producer tile: the consumer tiles it feeds are
/// `consumers[offsets[p] .. offsets[p + 1]]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct DependencyArray {
    /// Address of `num_producers + 1` `u32` offsets.
    pub offsets: DevAddr,
    /// Address of `num_edges` `u32` consumer tile ids.
    pub consumers: DevAddr,
    /// Number of producer tiles.
    pub num_producers: u32,
    /// Number of (producer, consumer) edges.
    pub num_edges: u32,
}

/// The atomic counters of a workqueue ring buffer. `head` and `tail` sit on separate 128-byte
/// lines so that producers pushing and consumers popping do not contend on one line.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct WorkQueueCounters {
    /// Tickets taken by consumers (pops), counting up for ever.
    pub head: u32,
    /// Padding to the next 128-byte line.
    pub _pad_head: [u32; 31],
    /// Tickets taken by producers (pushes), counting up for ever.
    pub tail: u32,
    /// Padding to the end of the line.
    pub _pad_tail: [u32; 31],
}

impl Default for WorkQueueCounters {
    fn default() -> Self {
        Self::zeroed()
    }
}

/// One ring-buffer slot: the tile id and the ticket+1 that published it (0 = never written).
/// A popper holding ticket `t` of launch `e` (N pushes per launch) waits for `seq == t + 1` at
/// slot `t - e*N`, its position in the launch (see `protocol`: wrap-safe, unlike `t % capacity`), so a slot is
/// never read before its tile id is written, even with many pushers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct WorkQueueSlot {
    /// Linear tile id of the ready tile.
    pub tile: u32,
    /// Ticket + 1 of the push that wrote this slot.
    pub seq: u32,
}

/// A workqueue: ring buffer header (counters) and slots in global memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct WorkQueue {
    /// Address of the [`WorkQueueCounters`].
    pub counters: DevAddr,
    /// Address of `capacity` [`WorkQueueSlot`]s.
    pub slots: DevAddr,
    /// Number of slots (at least the number of tiles pushed per launch).
    pub capacity: u32,
    /// Stage whose tiles this queue holds.
    pub stage: u32,
}

/// One producer -> consumer edge as a stage sees it (stream mode): the semaphores, the policy
/// and the two grids the policy's pure functions take. `sems == 0` means "no such edge".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct EdgeDesc {
    /// Address of the edge's `u32` semaphores.
    pub sems: DevAddr,
    /// Number of semaphores.
    pub num_sems: u32,
    /// The consumer's main-loop K elements per producer output column tile (the producer's
    /// tile width): consumer K-step `s` of `k_tile` elements reads producer column tile
    /// `s * k_tile / producer_tile_n`.
    pub producer_tile_n: u32,
    /// `PolicyKind::encode()` of the edge's policy.
    pub policy: [u32; 2],
    /// `Dependency::encode()` of what the consumer reads.
    pub dependency: [u32; 4],
    /// The producer stage's grid.
    pub producer: Grid,
    /// The consumer stage's grid.
    pub consumer: Grid,
    /// [`Scope::encode`](crate::placement::Scope::encode) of the edge's posts and waits: GPU
    /// scope (0, what a zeroed descriptor means) or system scope when producer and consumer
    /// are on different devices ([`crate::placement`]).
    pub scope: u32,
    /// Padding; always 0.
    pub _pad: u32,
    /// The policy's waits in affine form
    /// ([`WaitSchedule::derive`](crate::policy::WaitSchedule::derive), by the host), or
    /// [`WaitSchedule::NONE`](crate::policy::WaitSchedule::NONE): the device then walks the
    /// policy column by column.
    pub schedule: crate::policy::WaitSchedule,
}

/// Everything a kernel needs to know about its stage (stream mode).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct StageDesc {
    /// The stage's tile grid.
    pub grid: Grid,
    /// Stage id in its graph.
    pub stage: u32,
    /// `TileOrder::encode()[0]`: the built-in order (ignored when `order_buf != 0`).
    pub order: u32,
    /// `TileOrder::encode()[1]`: its parameter (the stride for strided orders).
    pub order_param: u32,
    /// Launch epoch (0-based): waits expect `(epoch + 1) * expected`, tile counters hand out
    /// `epoch * tiles ..` and start counts reach `(epoch + 1) * blocks`.
    pub epoch: u32,
    /// Address of the `u32` tile counter `tile()` takes tiles from.
    pub tile_counter: DevAddr,
    /// Address of a user-defined order (`u32` linear tile ids, one per ticket), or 0 for the
    /// built-in order in `order`/`order_param`.
    pub order_buf: DevAddr,
    /// Address of this stage's `u32` start count (each block adds one at entry; the consumers'
    /// wait kernels poll it for `cusync_shared::lanes::start_target`).
    pub start_count: DevAddr,
    /// Address of this launch's [`ErrorSlot`].
    pub error: DevAddr,
    /// Bound on every spin-wait, in nanoseconds.
    pub timeout_ns: u64,
    /// Address of the trace buffer ([`TraceEvent`]s, one per tile), 0 when tracing is off.
    pub trace: DevAddr,
    /// The edge this stage posts to as a producer.
    pub post: EdgeDesc,
    /// The edge this stage waits on as a consumer.
    pub wait: EdgeDesc,
    /// Fault and delay injection for tests ([`DEBUG_SKIP_POST`], [`DEBUG_DELAY`]); 0 in production.
    pub debug_flags: u32,
    /// Parameter of the debug flags: the tile id that skips its post, or the largest injected delay in ns.
    pub debug_param: u32,
}

/// Debug flag: the tile whose linear id is `debug_param` does not post (a fault test: its
/// consumers must time out and report, never hang).
pub const DEBUG_SKIP_POST: u32 = 1;
/// Debug flag: every tile waits a pseudo-random 0..`debug_param` ns before posting (stress).
pub const DEBUG_DELAY: u32 = 2;

/// One traced tile: where and when it ran. Times are `%globaltimer` nanoseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct TraceEvent {
    /// Stage id.
    pub stage: u32,
    /// Linear tile id.
    pub tile: u32,
    /// SM (`%smid`).
    pub sm: u32,
    /// CTA (linear block index).
    pub cta: u32,
    /// When the tile was handed to the CTA (taken from the counter or queue). A path-2
    /// (warp-specialized) CTA's first tile, plain or stream-mode: the CTA's entry, so its
    /// `t_ready - t_dispatch` includes the block's setup, and a CTA that runs one tile is timed
    /// from the same point with the protocol and without.
    pub t_dispatch: u64,
    /// When its dependencies were satisfied (wait returned).
    pub t_ready: u64,
    /// When its main loop started.
    pub t_start: u64,
    /// When it was stored and posted.
    pub t_end: u64,
}

/// What went wrong on the device (stored in [`ErrorSlot::code`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// Nothing went wrong.
    None = 0,
    /// A semaphore wait ran past its timeout.
    SemaphoreTimeout = 1,
    /// A workqueue poll ran past its timeout.
    QueueTimeout = 2,
    /// The wait kernel ran past its timeout.
    WaitKernelTimeout = 3,
    /// Persistent mode: a queue slot held a later ticket than the popper's
    /// ([`ProtocolError::SlotOverwritten`](crate::protocol::ProtocolError::SlotOverwritten)).
    SlotOverwritten = 4,
    /// Persistent mode: a counter behind its launch window
    /// ([`ProtocolError::StaleCounter`](crate::protocol::ProtocolError::StaleCounter)).
    StaleCounter = 5,
    /// Persistent mode: a push past a queue's capacity
    /// ([`ProtocolError::QueueFull`](crate::protocol::ProtocolError::QueueFull)).
    QueueFull = 6,
    /// Persistent mode: more pushes than the launch has tiles
    /// ([`ProtocolError::TooManyPushes`](crate::protocol::ProtocolError::TooManyPushes)).
    TooManyPushes = 7,
    /// Persistent mode: a scoreboard entry past its target
    /// ([`ProtocolError::ExcessArrival`](crate::protocol::ProtocolError::ExcessArrival)).
    ExcessArrival = 8,
    /// Persistent mode: an index past its array
    /// ([`ProtocolError::OutOfRange`](crate::protocol::ProtocolError::OutOfRange)).
    OutOfRange = 9,
    /// Persistent mode: a stage names a tile worker the kernel does not have, or a tile outside
    /// the worker's grid (`seen` = the worker code or tile id, `expected` = the grid's tiles).
    BadWorker = 10,
    /// GeMM path 2: a shared-memory pipeline barrier (TMA stage full or empty) was not reached in
    /// time (`address` = the barrier's shared address, `seen`/`expected` = the phase parity waited
    /// for, `tile` = the linear tile).
    PipelineTimeout = 11,
}

impl ErrorCode {
    /// The code for a raw `u32`, if known.
    pub const fn from_u32(v: u32) -> Option<Self> {
        match v {
            0 => Some(Self::None),
            1 => Some(Self::SemaphoreTimeout),
            2 => Some(Self::QueueTimeout),
            3 => Some(Self::WaitKernelTimeout),
            4 => Some(Self::SlotOverwritten),
            5 => Some(Self::StaleCounter),
            6 => Some(Self::QueueFull),
            7 => Some(Self::TooManyPushes),
            8 => Some(Self::ExcessArrival),
            9 => Some(Self::OutOfRange),
            10 => Some(Self::BadWorker),
            11 => Some(Self::PipelineTimeout),
            _ => None,
        }
    }
}

/// The first error of a launch. The device claims the slot with a CAS on `code` (0 -> code),
/// so only the first failing CTA writes the rest; the host reads it after synchronizing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ErrorSlot {
    /// [`ErrorCode`] as `u32`; 0 = no error.
    pub code: u32,
    /// Stage that was waiting.
    pub stage: u32,
    /// Linear tile id it was working on.
    pub tile: u32,
    /// Value last seen at `address`.
    pub seen: u32,
    /// Value it waited for.
    pub expected: u32,
    /// Linear block index of the reporting CTA.
    pub cta: u32,
    /// SM of the reporting CTA.
    pub sm: u32,
    /// 1 once every field is written (the host trusts the fields only then).
    pub complete: u32,
    /// Address of the semaphore or queue word it was polling.
    pub address: DevAddr,
    /// `%globaltimer` when it gave up.
    pub time_ns: u64,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<SemaphoreArray>() == 16);
    assert!(size_of::<Scoreboard>() == 16);
    assert!(size_of::<DependencyArray>() == 24);
    assert!(offset_of!(DependencyArray, num_producers) == 16);
    assert!(size_of::<WorkQueueCounters>() == 256);
    assert!(offset_of!(WorkQueueCounters, tail) == 128);
    assert!(size_of::<WorkQueueSlot>() == 8);
    assert!(size_of::<WorkQueue>() == 24);
    assert!(offset_of!(WorkQueue, capacity) == 16);
    assert!(size_of::<EdgeDesc>() == 96);
    assert!(offset_of!(EdgeDesc, schedule) == 80);
    assert!(offset_of!(EdgeDesc, scope) == 72);
    assert!(offset_of!(EdgeDesc, policy) == 16);
    assert!(offset_of!(EdgeDesc, dependency) == 24);
    assert!(offset_of!(EdgeDesc, producer) == 40);
    assert!(offset_of!(EdgeDesc, consumer) == 56);
    assert!(size_of::<StageDesc>() == 280);
    assert!(offset_of!(StageDesc, debug_flags) == 272);
    assert!(offset_of!(StageDesc, stage) == 16);
    assert!(offset_of!(StageDesc, tile_counter) == 32);
    assert!(offset_of!(StageDesc, start_count) == 48);
    assert!(offset_of!(StageDesc, timeout_ns) == 64);
    assert!(offset_of!(StageDesc, trace) == 72);
    assert!(offset_of!(StageDesc, post) == 80);
    assert!(offset_of!(StageDesc, wait) == 176);
    assert!(size_of::<TraceEvent>() == 48);
    assert!(offset_of!(TraceEvent, t_dispatch) == 16);
    assert!(offset_of!(TraceEvent, t_end) == 40);
    assert!(size_of::<ErrorSlot>() == 48);
    assert!(offset_of!(ErrorSlot, address) == 32);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip() {
        for c in [
            ErrorCode::None,
            ErrorCode::SemaphoreTimeout,
            ErrorCode::QueueTimeout,
            ErrorCode::WaitKernelTimeout,
            ErrorCode::SlotOverwritten,
            ErrorCode::StaleCounter,
            ErrorCode::QueueFull,
            ErrorCode::TooManyPushes,
            ErrorCode::ExcessArrival,
            ErrorCode::OutOfRange,
            ErrorCode::BadWorker,
            ErrorCode::PipelineTimeout,
        ] {
            assert_eq!(ErrorCode::from_u32(c as u32), Some(c));
        }
        assert_eq!(ErrorCode::from_u32(99), None);
    }

    #[test]
    fn pod_round_trip_through_bytes() {
        let slot = ErrorSlot {
            code: 1,
            stage: 2,
            tile: 3,
            seen: 4,
            expected: 5,
            cta: 6,
            sm: 7,
            complete: 1,
            address: 0xdead_beef_0000,
            time_ns: 42,
        };
        let bytes = bytemuck::bytes_of(&slot);
        assert_eq!(bytes.len(), 48);
        let back: ErrorSlot = bytemuck::pod_read_unaligned(bytes);
        assert_eq!(back, slot);
        // Field offsets as the device sees them: `seen` at byte 12, `address` at byte 32.
        assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), 4);
        assert_eq!(u64::from_le_bytes(bytes[32..40].try_into().unwrap()), 0xdead_beef_0000);
    }

    #[test]
    fn queue_counters_start_empty() {
        let c = WorkQueueCounters::default();
        assert_eq!((c.head, c.tail), (0, 0));
    }
}
