//! The one error type of cusync. Every entry point returns [`Result`]; nothing panics for lack
//! of a driver, a device or valid input.

use cudarc::driver::DriverError;

/// cusync's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in cusync, each with a message that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CUDA driver library (libcuda.so) could not be loaded.
    #[error("no CUDA driver: libcuda.so could not be loaded (is an NVIDIA driver installed?)")]
    NoDriver,
    /// The driver loaded but reports no device (or not the one asked for).
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// The device cannot run the kernels this build embeds.
    #[error("unsupported architecture: device {device} is sm_{major}{minor}, but this build's PTX targets {ptx_arch}; {hint}")]
    UnsupportedArch {
        /// Device name.
        device: String,
        /// Compute capability, major.
        major: i32,
        /// Compute capability, minor.
        minor: i32,
        /// The target the embedded PTX was built for.
        ptx_arch: &'static str,
        /// What to do about it.
        hint: &'static str,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver error in {op}: {source}")]
    Driver {
        /// What cusync was doing.
        op: &'static str,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// A device spin-wait ran past its timeout; the fields say where it was stuck.
    #[error(
        "synchronization timed out: stage {stage}, tile {tile}, cta {cta} on SM {sm} waited on {what} at {address:#x}: saw {seen}, expected {expected}"
    )]
    SyncTimeout {
        /// Stage id that waited.
        stage: u32,
        /// Linear tile id it was working on.
        tile: u32,
        /// Linear block index.
        cta: u32,
        /// SM it ran on.
        sm: u32,
        /// What kind of wait ("semaphore", "workqueue", "wait kernel").
        what: &'static str,
        /// Device address polled.
        address: u64,
        /// Last value seen.
        seen: u32,
        /// Value waited for.
        expected: u32,
    },
    /// The device detected a protocol violation (not a timeout): a workqueue slot overwritten by
    /// an overlapping launch, a counter behind its launch window, an arrival beyond a
    /// consumer's count, a full queue. The protocol state must be reset before the next launch
    /// (the graphs do it themselves).
    #[error(
        "protocol violation: {what} (stage {stage}, tile {tile}, cta {cta} on SM {sm}, at {address:#x}: saw {seen}, expected {expected})"
    )]
    ProtocolViolation {
        /// What went wrong.
        what: &'static str,
        /// Stage id.
        stage: u32,
        /// Linear tile id.
        tile: u32,
        /// Linear block index.
        cta: u32,
        /// SM it ran on.
        sm: u32,
        /// Device address involved.
        address: u64,
        /// Value seen.
        seen: u32,
        /// Value expected.
        expected: u32,
    },
    /// A result did not match its reference (self-checks and verification runs).
    #[error("verification failed: {0}")]
    Verification(String),
    /// An argument is invalid (shape, dtype, alignment, size, device); checked before launch.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// Wraps a driver error with the operation that failed.
    pub fn driver(op: &'static str) -> impl FnOnce(DriverError) -> Error {
        move |source| Error::Driver { op, source }
    }
}
