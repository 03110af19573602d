//! Host runtime on cudarc (dynamic loading): device discovery, the PTX module, streams,
//! events and typed device buffers.

mod buffer;
pub mod clocks;
mod context;
mod error_slot;
mod launch;

pub use buffer::{DeviceBuffer, Element};
pub use context::{driver_present, is_loaded, Context, DeviceInfo, Event, Stream, TIMING_HOLD_NS};
pub use error_slot::{slot_to_result, ErrorSlotBuffer};
pub use launch::{kernel_arg, launch_ordered, programmatic_supported, KernelArgs, StreamOrder};
