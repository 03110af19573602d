//! Bounded spin-waits and semaphore posts (stream mode uses these directly; the queue builds
//! on [`spin`]).

use super::{ProtocolError, ProtocolMemory};
use crate::layout::DevAddr;
use crate::policy::reached;

/// What a spin-wait makes of one value it loaded.
pub(crate) enum Verdict<T> {
    /// Stop with this result.
    Done(Result<T, ProtocolError>),
    /// Poll again.
    Again,
}

/// Polls `addr` with acquire loads until `judge` decides, or until more than `timeout_ns`
/// passed since the first poll ([`ProtocolError::Timeout`] with `expected`). The clock is
/// read only once the first poll failed, so a wait that is already satisfied costs one load.
pub(crate) fn spin<M: ProtocolMemory + ?Sized, T>(
    mem: &M,
    addr: DevAddr,
    expected: u32,
    timeout_ns: u64,
    mut judge: impl FnMut(u32) -> Verdict<T>,
) -> Result<T, ProtocolError> {
    let mut seen = mem.load_acquire(addr);
    if let Verdict::Done(result) = judge(seen) {
        return result;
    }
    let start = mem.now_ns();
    let mut attempt = 0u32;
    loop {
        mem.backoff(attempt);
        attempt = attempt.saturating_add(1);
        seen = mem.load_acquire(addr);
        if let Verdict::Done(result) = judge(seen) {
            return result;
        }
        if mem.now_ns().wrapping_sub(start) > timeout_ns {
            return Err(ProtocolError::Timeout { addr, seen, expected });
        }
    }
}

/// Waits until the count-up-forever semaphore at `addr` has reached `target` (wrap-safe, see
/// [`reached`]), with acquire semantics; returns the value seen. Stream mode's consumer wait.
pub fn wait_reached<M: ProtocolMemory + ?Sized>(
    mem: &M,
    addr: DevAddr,
    target: u32,
    timeout_ns: u64,
) -> Result<u32, ProtocolError> {
    spin(mem, addr, target, timeout_ns, |seen| {
        if reached(seen, target) {
            Verdict::Done(Ok(seen))
        } else {
            Verdict::Again
        }
    })
}

/// Makes this thread's earlier writes visible, then adds `amount` to the semaphore at `addr`
/// with release semantics (fence, then `red.release.add`): stream mode's producer post, as the
/// CPU models check it. The device (`cusync_device::sync::thread_post_gpu`) issues the add
/// relaxed after the fence, which the PTX memory model also makes a release pattern, and
/// which saves the release's second `MEMBAR.ALL.GPU`.
pub fn post_semaphore<M: ProtocolMemory + ?Sized>(mem: &M, addr: DevAddr, amount: u32) {
    mem.fence_acq_rel();
    mem.red_release_add(addr, amount);
}
