//! Programmatic dependent launch (sm_90 and up): `griddepcontrol.launch_dependents` lets the
//! grid launched after this one on the same stream with the programmatic-serialization
//! attribute start once every block of this grid has issued it (or exited); the dependent's
//! `griddepcontrol.wait` then holds each of its threads until this grid has completed and its
//! memory is visible. Without such a dependent, or on an sm_80 build, both do nothing.

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

/// `griddepcontrol.wait`: blocks the calling thread until every prerequisite grid (the grid
/// before this one on its stream, when this one was launched programmatically) has completed
/// and its memory operations are performed and visible to this grid. Without a prerequisite
/// in flight (a launch in plain stream order) it returns at once. On an sm_80 build it does
/// nothing: the host launches such code in stream order only.
#[inline(always)]
pub fn wait() {
    #[cfg(target_feature = "sm_90a")]
    // SAFETY: the instruction only waits; it writes no memory and no register. It orders the
    // memory operations after it (so no `nomem`: the compiler must not move loads above it).
    unsafe {
        core::arch::asm!("griddepcontrol.wait;", options(nostack))
    };
}
