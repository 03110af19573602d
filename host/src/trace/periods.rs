//! Steady-state tile periods: how long a CTA takes per tile once it is running, from one tile's
//! end to its next tile's end. A persistent CTA takes its next tile before the current one
//! ends, so a tile's own span (`t_end - t_dispatch`) overlaps its neighbour's; the period does
//! not, and it holds everything a tile costs its CTA: the main loop, the epilogue, the post,
//! the ticket and the wait of the next tile. Comparing the periods of two launches of the same
//! kernels, one with the protocol and one without, gives the protocol's cost per tile as a
//! fraction of a tile's time, without the launch and the last wave's tail in it.

use super::TraceEvent;

/// The periods (ns) of stage `stage` in the events of one launch: for each CTA, its tiles of
/// that stage in order of `t_end`, and every `t_end[i] - t_end[i - 1]`. A CTA with one tile of
/// the stage gives none. Events of several launches must be passed one launch at a time (CTA
/// ids repeat across launches).
pub fn tile_periods(events: &[TraceEvent], stage: u32) -> Vec<u64> {
    tile_periods_at(events, stage)
        .into_iter()
        .map(|(_, period)| period)
        .collect()
}

/// As [`tile_periods`], each period with the `t_end` that closes it (ns), in order of CTA,
/// then time: where in the launch a period fell, to tell a clock that drifts over a stage from a
/// step between stages.
pub fn tile_periods_at(events: &[TraceEvent], stage: u32) -> Vec<(u64, u64)> {
    let mut ends: Vec<(u32, u64)> = events
        .iter()
        .filter(|e| e.stage == stage)
        .map(|e| (e.cta, e.t_end))
        .collect();
    ends.sort_unstable();
    ends.windows(2)
        .filter(|w| w[0].0 == w[1].0)
        .map(|w| (w[1].1, w[1].1.saturating_sub(w[0].1)))
        .collect()
}

/// The median periods (ns) of the first and the second half of stage `stage`'s periods in
/// time ([`tile_periods_at`], split at the middle period by end time); `None` with fewer than
/// two periods. A stage whose halves differ ran at a clock (or a pace) that drifted while it
/// ran.
pub fn period_halves(events: &[TraceEvent], stage: u32) -> Option<(f64, f64)> {
    let mut at = tile_periods_at(events, stage);
    if at.len() < 2 {
        return None;
    }
    at.sort_unstable();
    let mid = at.len() / 2;
    let median = |part: &[(u64, u64)]| super::Stats::of(part.iter().map(|&(_, p)| p).collect()).median_ns;
    Some((median(&at[..mid]), median(&at[mid..])))
}

/// The events of stage `stage`'s tiles in the events of one launch whose CTA has no other event
/// of that stage: where every CTA runs one tile (the GPT-3 MLP at B = 1) there is no period,
/// and each such tile's times from its CTA's entry (a path-2 CTA's first tile,
/// [`TraceEvent::t_dispatch`]) say what it cost. Events of several launches must be passed one
/// launch at a time.
pub fn single_tile_events(events: &[TraceEvent], stage: u32) -> Vec<&TraceEvent> {
    let mut by_cta: Vec<&TraceEvent> = events.iter().filter(|e| e.stage == stage).collect();
    by_cta.sort_unstable_by_key(|e| (e.cta, e.t_end));
    (0..by_cta.len())
        .filter(|&i| {
            let cta = by_cta[i].cta;
            (i == 0 || by_cta[i - 1].cta != cta) && by_cta.get(i + 1).is_none_or(|next| next.cta != cta)
        })
        .map(|i| by_cta[i])
        .collect()
}

/// The spans (ns, `t_end - t_dispatch`: the tile's whole time in its CTA, entry to posted) of
/// [`single_tile_events`].
pub fn single_tile_spans(events: &[TraceEvent], stage: u32) -> Vec<u64> {
    single_tile_events(events, stage)
        .iter()
        .map(|e| e.t_end.saturating_sub(e.t_dispatch))
        .collect()
}

/// The lead-ins (ns, `t_start - t_dispatch`: the CTA's entry to its main loop's start, setup and
/// first loads and any wait) of [`single_tile_events`].
pub fn single_tile_lead_ins(events: &[TraceEvent], stage: u32) -> Vec<u64> {
    single_tile_events(events, stage)
        .iter()
        .map(|e| e.t_start.saturating_sub(e.t_dispatch))
        .collect()
}

/// In the events of one launch, stage `consumer`'s first dispatch less stage `producer`'s last
/// end (ns; negative where the consumer's first block started before the producer's last tile
/// ended). `None` where either stage has no event.
pub fn boundary_gap(events: &[TraceEvent], producer: u32, consumer: u32) -> Option<i64> {
    let last_end = events.iter().filter(|e| e.stage == producer).map(|e| e.t_end).max()?;
    let first = events
        .iter()
        .filter(|e| e.stage == consumer)
        .map(|e| e.t_dispatch)
        .min()?;
    Some(first as i64 - last_end as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(stage: u32, cta: u32, t_end: u64) -> TraceEvent {
        TraceEvent {
            stage,
            tile: 0,
            sm: cta,
            cta,
            t_dispatch: 0,
            t_ready: 0,
            t_start: 0,
            t_end,
        }
    }

    #[test]
    fn periods_run_from_end_to_end_within_one_cta_and_stage() {
        let events = [
            // CTA 0: three tiles of stage 1, listed out of order; one of stage 0.
            event(1, 0, 300),
            event(1, 0, 100),
            event(1, 0, 220),
            event(0, 0, 50),
            // CTA 1: one tile of stage 1 (no period), two of stage 0.
            event(1, 1, 150),
            event(0, 1, 40),
            event(0, 1, 90),
        ];
        let mut stage1 = tile_periods(&events, 1);
        stage1.sort_unstable();
        assert_eq!(stage1, [80, 120]);
        assert_eq!(tile_periods(&events, 0), [50]);
        assert!(tile_periods(&events, 2).is_empty());
        assert!(tile_periods(&[], 0).is_empty());
    }

    #[test]
    fn spans_are_taken_only_from_ctas_that_ran_one_tile_of_the_stage() {
        let span = |stage, cta, t_dispatch, t_end| TraceEvent {
            t_dispatch,
            ..event(stage, cta, t_end)
        };
        let events = [
            // CTA 0: two tiles of stage 1 (periods, no span); one of stage 0 (a span).
            span(1, 0, 0, 100),
            span(1, 0, 90, 200),
            span(0, 0, 10, 50),
            // CTAs 1 and 2: one tile of stage 1 each.
            span(1, 2, 5, 405),
            span(1, 1, 0, 300),
        ];
        let mut stage1 = single_tile_spans(&events, 1);
        stage1.sort_unstable();
        assert_eq!(stage1, [300, 400]);
        assert_eq!(single_tile_spans(&events, 0), [40]);
        assert!(single_tile_spans(&events, 2).is_empty());
        // Lead-ins: entry to main loop (`t_start` 0 in `event`, so clamped at 0), and the
        // boundary between the stages: stage 1's first dispatch (0) less stage 0's last end (50).
        let mut started = events;
        for e in started.iter_mut() {
            e.t_start = e.t_dispatch + 7;
        }
        assert_eq!(single_tile_lead_ins(&started, 1), [7, 7]);
        assert_eq!(single_tile_lead_ins(&events, 0), [0]);
        assert_eq!(boundary_gap(&events, 0, 1), Some(-50));
        let later = [span(0, 0, 0, 100), span(1, 0, 130, 400)];
        assert_eq!(boundary_gap(&later, 0, 1), Some(30));
        assert_eq!(boundary_gap(&later, 0, 2), None);
    }
}
