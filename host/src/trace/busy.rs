//! SM busy and occupied fractions, over the whole run and bucketed over time.
//!
//! * **Busy**: an SM is busy at time `t` when a tile of any stage on it has `t` in
//!   `[t_start, t_end)`: a main loop is running. Dispatch and waiting are not work, so they
//!   are not busy; this is the number that says how much of the machine did useful work.
//! * **Occupied**: an SM is occupied at `t` when a tile on it has `t` in `[t_dispatch, t_end)`:
//!   a CTA holds a tile, possibly spinning on its dependencies. `occupied - busy` is the
//!   occupied-but-idle share (waits, prologues).
//!
//! Both are per SM, not per CTA slot: with two CTAs per SM, one running tile makes the SM busy.
//! A fraction over `[a, b)` is the covered SM-time divided by `SMs * (b - a)`, SMs that ran
//! nothing included.

use crate::shared::layout::TraceEvent;

/// The busy and occupied fractions of one time bucket `[start_ns, end_ns)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimelineBucket {
    /// Bucket start, ns since the first dispatch.
    pub start_ns: u64,
    /// Bucket end (exclusive), ns since the first dispatch.
    pub end_ns: u64,
    /// Fraction of SM-time in the bucket with a main loop running (`[t_start, t_end)`).
    pub busy: f64,
    /// Fraction of SM-time in the bucket with a tile held (`[t_dispatch, t_end)`).
    pub occupied: f64,
}

/// Per SM, the merged busy and occupied intervals of a set of events.
#[derive(Clone, Debug, Default)]
pub(crate) struct SmCoverage {
    busy: Vec<Vec<(u64, u64)>>,
    occupied: Vec<Vec<(u64, u64)>>,
    sms: u32,
}

impl SmCoverage {
    /// Coverage of `events` on `sms` SMs (every event's `sm` must be below `sms`).
    pub(crate) fn new(events: &[TraceEvent], sms: u32) -> Self {
        let mut busy = vec![Vec::new(); sms as usize];
        let mut occupied = vec![Vec::new(); sms as usize];
        for e in events {
            busy[e.sm as usize].push((e.t_start, e.t_end));
            occupied[e.sm as usize].push((e.t_dispatch, e.t_end));
        }
        Self {
            busy: busy.into_iter().map(merge).collect(),
            occupied: occupied.into_iter().map(merge).collect(),
            sms,
        }
    }

    /// SM-nanoseconds covered in `[a, b)`.
    pub(crate) fn total(&self, a: u64, b: u64, occupied: bool) -> u64 {
        let per_sm = if occupied { &self.occupied } else { &self.busy };
        per_sm.iter().map(|iv| covered(iv, a, b)).sum()
    }

    /// Covered fraction of SM-time in `[a, b)` (0 for an empty interval or no SMs).
    pub(crate) fn fraction(&self, a: u64, b: u64, occupied: bool) -> f64 {
        if b <= a || self.sms == 0 {
            return 0.0;
        }
        self.total(a, b, occupied) as f64 / (f64::from(self.sms) * (b - a) as f64)
    }

    /// `[a, b)` cut into `buckets` equal buckets (fewer when shorter than `buckets` ns).
    pub(crate) fn timeline(&self, a: u64, b: u64, buckets: usize) -> Vec<TimelineBucket> {
        let span = b.saturating_sub(a);
        let n = (buckets as u64).min(span);
        (0..n)
            .map(|i| {
                let start = a + (u128::from(span) * u128::from(i) / u128::from(n)) as u64;
                let end = a + (u128::from(span) * u128::from(i + 1) / u128::from(n)) as u64;
                TimelineBucket {
                    start_ns: start,
                    end_ns: end,
                    busy: self.fraction(start, end, false),
                    occupied: self.fraction(start, end, true),
                }
            })
            .collect()
    }
}

/// Sorted, disjoint intervals covering the same points as `v` (empty intervals dropped).
fn merge(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.retain(|&(a, b)| a < b);
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Length of `[a, b)` covered by sorted disjoint `intervals`.
fn covered(intervals: &[(u64, u64)], a: u64, b: u64) -> u64 {
    let first = intervals.partition_point(|&(_, end)| end <= a);
    intervals[first..]
        .iter()
        .take_while(|&&(start, _)| start < b)
        .map(|&(start, end)| end.min(b) - start.max(a))
        .sum()
}
