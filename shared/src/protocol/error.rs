//! [`ProtocolError`]: what a protocol operation can report instead of hanging or panicking.

use core::fmt;

use crate::layout::DevAddr;

/// Why a protocol operation gave up. Every variant names the word it was looking at, so the
/// device can fill an [`ErrorSlot`](crate::layout::ErrorSlot) (`address`, `seen`, `expected`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// A spin-wait ran past its bound.
    Timeout {
        /// The word polled.
        addr: DevAddr,
        /// Its last value.
        seen: u32,
        /// The value waited for.
        expected: u32,
    },
    /// A popper's slot holds a later ticket than its own: a push of a later launch overwrote
    /// it before it was read (launches overlapped; see the module docs, rule 3).
    SlotOverwritten {
        /// The slot's `seq` word.
        addr: DevAddr,
        /// The `seq` found.
        seen: u32,
        /// The `seq` of the popper's ticket.
        expected: u32,
    },
    /// A counter is behind the launch's window: an earlier launch stopped before taking all
    /// its tickets or arrivals, and the protocol state must be rewritten.
    StaleCounter {
        /// The counter.
        addr: DevAddr,
        /// Its value.
        seen: u32,
        /// The window's start (`epoch * per_launch`).
        window_start: u32,
    },
    /// A push got a ticket past the queue's capacity in this launch (the capacity is smaller
    /// than the tiles per launch; the planner prevents this).
    QueueFull {
        /// The queue's `tail` counter.
        addr: DevAddr,
        /// The ticket's position in the launch.
        position: u32,
        /// The queue's capacity.
        capacity: u32,
    },
    /// More pushes than the launch has tiles: some tile was pushed twice.
    TooManyPushes {
        /// The queue's `tail` counter.
        addr: DevAddr,
        /// The ticket's position in the launch.
        position: u32,
        /// Tiles per launch.
        per_launch: u32,
    },
    /// A consumer tile received more arrivals in this launch than it needs (duplicate
    /// dependency-array entries, or a target of 0).
    ExcessArrival {
        /// The scoreboard counter.
        addr: DevAddr,
        /// Its value before the arrival.
        seen: u32,
        /// The launch's target (`(epoch + 1) * needed`).
        expected: u32,
    },
    /// An index past the end of its array (a corrupt descriptor or dependency array).
    OutOfRange {
        /// The array's base address.
        addr: DevAddr,
        /// The index.
        index: u32,
        /// The array's length.
        len: u32,
    },
}

impl ProtocolError {
    /// The word the operation was looking at (an [`ErrorSlot`](crate::layout::ErrorSlot)'s
    /// `address`).
    pub const fn addr(&self) -> DevAddr {
        match *self {
            ProtocolError::Timeout { addr, .. }
            | ProtocolError::SlotOverwritten { addr, .. }
            | ProtocolError::StaleCounter { addr, .. }
            | ProtocolError::QueueFull { addr, .. }
            | ProtocolError::TooManyPushes { addr, .. }
            | ProtocolError::ExcessArrival { addr, .. }
            | ProtocolError::OutOfRange { addr, .. } => addr,
        }
    }

    /// The value found (an error slot's `seen`): the word's value, or the offending
    /// position or index.
    pub const fn seen(&self) -> u32 {
        match *self {
            ProtocolError::Timeout { seen, .. }
            | ProtocolError::SlotOverwritten { seen, .. }
            | ProtocolError::StaleCounter { seen, .. }
            | ProtocolError::ExcessArrival { seen, .. } => seen,
            ProtocolError::QueueFull { position, .. } | ProtocolError::TooManyPushes { position, .. } => position,
            ProtocolError::OutOfRange { index, .. } => index,
        }
    }

    /// The value or bound expected (an error slot's `expected`).
    pub const fn expected(&self) -> u32 {
        match *self {
            ProtocolError::Timeout { expected, .. }
            | ProtocolError::SlotOverwritten { expected, .. }
            | ProtocolError::ExcessArrival { expected, .. } => expected,
            ProtocolError::StaleCounter { window_start, .. } => window_start,
            ProtocolError::QueueFull { capacity, .. } => capacity,
            ProtocolError::TooManyPushes { per_launch, .. } => per_launch,
            ProtocolError::OutOfRange { len, .. } => len,
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (addr, seen, expected) = (self.addr(), self.seen(), self.expected());
        match self {
            ProtocolError::Timeout { .. } => {
                write!(f, "spin-wait timed out at {addr:#x}: saw {seen}, waited for {expected}")
            }
            ProtocolError::SlotOverwritten { .. } => write!(
                f,
                "queue slot {addr:#x} overwritten before it was read (seq {seen}, wanted {expected}): \
                 launches overlapped"
            ),
            ProtocolError::StaleCounter { .. } => write!(
                f,
                "counter at {addr:#x} is {seen}, behind this launch's start {expected}: \
                 an earlier launch did not finish; reset the protocol state"
            ),
            ProtocolError::QueueFull { .. } => write!(
                f,
                "queue with tail {addr:#x} full: push position {seen} >= capacity {expected}"
            ),
            ProtocolError::TooManyPushes { .. } => write!(
                f,
                "queue with tail {addr:#x}: push position {seen} >= {expected} tiles per launch \
                 (a tile was pushed twice)"
            ),
            ProtocolError::ExcessArrival { .. } => write!(
                f,
                "scoreboard entry {addr:#x} at {seen} received an arrival past its target {expected}"
            ),
            ProtocolError::OutOfRange { .. } => {
                write!(
                    f,
                    "index {seen} out of range of the {expected}-entry array at {addr:#x}"
                )
            }
        }
    }
}
