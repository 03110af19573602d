//! Bounded tickets: [`take_tile`] and the queue head share one CAS loop that never moves a
//! counter past its launch window, so every launch leaves it at exactly `(epoch + 1) * N`.

use super::{LaunchWindow, Position, ProtocolError, ProtocolMemory};
use crate::layout::DevAddr;

/// Takes the next ticket of `window` from the counter at `addr` with a CAS loop.
///
/// `allowed` is asked before each CAS with the position about to be taken; `false` stops
/// without taking anything ([`Taken::NotYet`]: the queue's "nothing pushed there yet"). It
/// runs between learning the counter's value and the CAS that expects it, so it should be
/// cheap (the queue's caches the `tail` it loaded: see `try_pop`).
///
/// A failed CAS retries at once with the value it returned, without [`ProtocolMemory::backoff`]:
/// it failed because another taker took a ticket (the loop is lock-free), and that returned
/// value is the freshest one this thread can have. Sleeping first made the expected value
/// stale by the sleep, so under contention a taker that had started to back off lost every
/// later CAS to the takers that had not, and starved (docs/notes/workqueue-contention.md).
pub(crate) fn take_bounded<M: ProtocolMemory + ?Sized>(
    mem: &M,
    addr: DevAddr,
    window: LaunchWindow,
    mut allowed: impl FnMut(u32) -> Result<bool, ProtocolError>,
) -> Result<Taken, ProtocolError> {
    let mut seen = mem.load_relaxed(addr);
    loop {
        let position = match window.position(seen) {
            Position::Behind => {
                return Err(ProtocolError::StaleCounter {
                    addr,
                    seen,
                    window_start: window.start,
                })
            }
            Position::Done => return Ok(Taken::Exhausted),
            Position::Within(p) => p,
        };
        if !allowed(position)? {
            return Ok(Taken::NotYet);
        }
        let old = mem.cas_acq_rel(addr, seen, seen.wrapping_add(1));
        if old == seen {
            return Ok(Taken::Ticket(position));
        }
        seen = old;
    }
}

/// What [`take_bounded`] got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// The ticket at this position of the window.
    Ticket(u32),
    /// Every ticket of the window is taken.
    Exhausted,
    /// The next ticket exists but `allowed` refused it.
    NotYet,
}

/// Takes the next tile ticket of launch `window` from the stage's tile counter at `counter`:
/// `Some(n)` means "compute the tile of ticket `n`" (`n < window.len`, see `order::nth`),
/// `None` means the launch's tiles are all handed out. Each `n` goes to exactly one caller,
/// and the counter never passes `window.end()` however often blocks ask (bounded CAS), so the
/// next launch's window starts where this one ends.
pub fn take_tile<M: ProtocolMemory + ?Sized>(
    mem: &M,
    counter: DevAddr,
    window: LaunchWindow,
) -> Result<Option<u32>, ProtocolError> {
    match take_bounded(mem, counter, window, |_| Ok(true))? {
        Taken::Ticket(n) => Ok(Some(n)),
        Taken::Exhausted | Taken::NotYet => Ok(None),
    }
}
