//! The launch error slot: where a timed-out device wait says where it was stuck.

use super::{Context, DeviceBuffer};
use crate::error::{Error, Result};
use cusync_shared::layout::{ErrorCode, ErrorSlot};

const WORDS: usize = std::mem::size_of::<ErrorSlot>() / 4;

/// A device-resident [`ErrorSlot`] that kernels report timeouts into.
#[derive(Debug)]
pub struct ErrorSlotBuffer {
    words: DeviceBuffer<u32>,
}

impl ErrorSlotBuffer {
    /// A cleared slot on `cx`'s device.
    pub fn new(cx: &Context) -> Result<Self> {
        Ok(Self {
            words: cx.alloc_zeros::<u32>(WORDS)?,
        })
    }

    /// Device address to pass to kernels (`*mut ErrorSlot`).
    pub fn addr(&self) -> u64 {
        self.words.addr()
    }

    /// Reads the slot (after the launch's stream was synchronized).
    pub fn read(&self) -> Result<ErrorSlot> {
        let words = self.words.download()?;
        Ok(bytemuck::pod_read_unaligned(bytemuck::cast_slice(&words)))
    }

    /// `Ok(())` if no kernel reported, else the [`Error::SyncTimeout`] it reported.
    pub fn check(&self) -> Result<()> {
        slot_to_result(&self.read()?)
    }

    /// Clears the slot for the next launch.
    pub fn clear(&mut self) -> Result<()> {
        self.words.fill(0)
    }
}

/// Turns a slot read back from the device into a result.
pub fn slot_to_result(slot: &ErrorSlot) -> Result<()> {
    let violation = |what: &'static str| Error::ProtocolViolation {
        what,
        stage: slot.stage,
        tile: slot.tile,
        cta: slot.cta,
        sm: slot.sm,
        address: slot.address,
        seen: slot.seen,
        expected: slot.expected,
    };
    let what = match ErrorCode::from_u32(slot.code) {
        Some(ErrorCode::None) => return Ok(()),
        Some(ErrorCode::SemaphoreTimeout) => "semaphore",
        Some(ErrorCode::QueueTimeout) => "workqueue",
        Some(ErrorCode::WaitKernelTimeout) => "wait kernel",
        Some(ErrorCode::PipelineTimeout) => "GeMM shared-memory pipeline barrier",
        Some(ErrorCode::SlotOverwritten) => {
            return Err(violation(
                "workqueue slot overwritten by a later ticket (launches overlapped)",
            ))
        }
        Some(ErrorCode::StaleCounter) => {
            return Err(violation(
                "counter behind its launch window (an aborted launch left it short)",
            ))
        }
        Some(ErrorCode::QueueFull) => return Err(violation("workqueue full")),
        Some(ErrorCode::TooManyPushes) => return Err(violation("more pushes than the stage has tiles in one launch")),
        Some(ErrorCode::ExcessArrival) => return Err(violation("scoreboard arrival beyond the consumer's count")),
        Some(ErrorCode::OutOfRange) => return Err(violation("tile or queue index out of range")),
        Some(ErrorCode::BadWorker) => return Err(violation("no tile worker for this stage")),
        None => return Err(violation("unknown error code (corrupt error slot)")),
    };
    Err(Error::SyncTimeout {
        stage: slot.stage,
        tile: slot.tile,
        cta: slot.cta,
        sm: slot.sm,
        what,
        address: slot.address,
        seen: slot.seen,
        expected: slot.expected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_slot_is_ok_and_filled_slot_names_the_wait() {
        assert!(slot_to_result(&ErrorSlot::default()).is_ok());
        let slot = ErrorSlot {
            code: ErrorCode::SemaphoreTimeout as u32,
            stage: 1,
            tile: 7,
            seen: 0,
            expected: 1,
            cta: 3,
            sm: 5,
            complete: 1,
            address: 0x1000,
            time_ns: 9,
        };
        let err = slot_to_result(&slot).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("stage 1") && msg.contains("tile 7") && msg.contains("expected 1"),
            "{msg}"
        );
        assert!(matches!(
            err,
            Error::SyncTimeout {
                what: "semaphore",
                address: 0x1000,
                ..
            }
        ));
    }
}
