//! [`LaunchWindow`]: the tickets (or arrivals) one launch owns on a count-up-forever counter.

/// Launch `epoch`'s share of a counter that receives `len` increments per launch: the values
/// `start .. start + len` (modulo 2^32), `start = epoch * len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchWindow {
    /// Counter value at the start of the launch (`epoch * len`, wrapping).
    pub start: u32,
    /// Increments per launch (tiles per launch, or arrivals a consumer tile needs).
    pub len: u32,
}

/// Where a counter value lies relative to a [`LaunchWindow`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// Before the window: an earlier launch did not finish its increments.
    Behind,
    /// Inside the window, at this offset from its start (`< len`).
    Within(u32),
    /// At or past the window's end: the launch's increments are all taken.
    Done,
}

impl LaunchWindow {
    /// The window of launch `epoch` (0-based) on a counter that receives `len` per launch.
    pub const fn new(epoch: u32, len: u32) -> Self {
        Self {
            start: epoch.wrapping_mul(len),
            len,
        }
    }

    /// The counter value at the end of the launch (`(epoch + 1) * len`, wrapping).
    pub const fn end(&self) -> u32 {
        self.start.wrapping_add(self.len)
    }

    /// Where `value` lies. Counting is modulo 2^32: values up to 2^31 behind `start` are
    /// [`Position::Behind`], so `len` must stay below 2^31 (any real grid does).
    pub const fn position(&self, value: u32) -> Position {
        let offset = value.wrapping_sub(self.start);
        if (offset as i32) < 0 {
            Position::Behind
        } else if offset < self.len {
            Position::Within(offset)
        } else {
            Position::Done
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_across_the_window_and_the_wrap() {
        let w = LaunchWindow::new(2, 5);
        assert_eq!((w.start, w.end()), (10, 15));
        assert_eq!(w.position(9), Position::Behind);
        assert_eq!(w.position(10), Position::Within(0));
        assert_eq!(w.position(14), Position::Within(4));
        assert_eq!(w.position(15), Position::Done);
        let wrapped = LaunchWindow {
            start: u32::MAX - 1,
            len: 4,
        };
        assert_eq!(wrapped.position(u32::MAX), Position::Within(1));
        assert_eq!(wrapped.position(1), Position::Within(3));
        assert_eq!(wrapped.position(2), Position::Done);
        assert_eq!(wrapped.position(u32::MAX - 2), Position::Behind);
        assert_eq!(LaunchWindow::new(7, 0).position(0), Position::Done);
    }
}
