//! Clocks and sleeping.

/// `%globaltimer`: nanoseconds, shared by all SMs (updates about every microsecond).
#[inline(always)]
pub fn global_timer_ns() -> u64 {
    let t: u64;
    // SAFETY: reads a special register; volatile (not `pure`) so each call reads anew.
    unsafe { core::arch::asm!("mov.u64 {}, %globaltimer;", out(reg64) t, options(nomem, nostack)) };
    t
}

/// `%clock64`: this SM's cycle counter.
#[inline(always)]
pub fn clock64() -> u64 {
    let t: u64;
    // SAFETY: reads a special register.
    unsafe { core::arch::asm!("mov.u64 {}, %clock64;", out(reg64) t, options(nomem, nostack)) };
    t
}

/// `nanosleep.u32`: suspends the thread for about `ns` nanoseconds (at most 1 ms).
#[inline(always)]
pub fn nanosleep(ns: u32) {
    // SAFETY: only delays the calling thread.
    unsafe { core::arch::asm!("nanosleep.u32 {};", in(reg32) ns, options(nomem, nostack)) };
}
