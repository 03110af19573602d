//! Programmatic dependent launch (sm_90 and up): `griddepcontrol.launch_dependents` lets the
//! grid launched after this one on the same stream with the programmatic-serialization
//! attribute start once every block of this grid has issued it (or exited). Without such a
//! dependent, or on an sm_80 build, it does nothing.

/// `griddepcontrol.launch_dependents`: this block no longer holds back the stream's
/// programmatic dependent. One thread per block is enough (later calls in the block have no
/// further effect); it publishes no data, so it orders no memory.
#[inline(always)]
pub fn launch_dependents() {
    #[cfg(target_feature = "sm_90a")]
    // SAFETY: the instruction only signals the launch hardware; it reads and writes no memory
    // the program sees, and leaves every register as it was.
    unsafe {
        core::arch::asm!("griddepcontrol.launch_dependents;", options(nostack))
    };
}
