//! The analysis on small traces whose numbers are computed by hand in the comments.

use super::{events, hand_pipelined, meta, Row};
use crate::trace::{analyze, AnalysisOptions, Edge, SlowSms, Stats, Trace, TraceMeta};
use crate::Error;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// [`hand_pipelined`], by hand (us; span = first dispatch 0 to last end 31):
///
/// * producer: 6 tiles / (1 * 4 SMs) = 1.5 waves, 2 whole; in dispatch order p0..p3 | p4 p5,
///   wave ends max(10,10,10,11) = 11 and max(20,21) = 21. Tile times 10,10,10,10,10,11: mean
///   61/6, median 10, max 11; no waits. Rounds: SM0 {p0,p4} 2, SM1 2, SM2 1, SM3 1.
/// * consumer: 1.5 waves; dispatch order c0(10) c1(11) c5(19) c2(20) c4(20) | c3(21), wave ends
///   max(20,19,30,30) = 30 and max(31,29) = 31. Tile times 8,8,8,8,9,8: mean 49/6, median 8,
///   max 9. Waits 2,0,2,0,2,2: total 8, mean 4/3, 4 tiles waited. Rounds: SM0 1, SM1 1,
///   SM2 2, SM3 2.
/// * all stages: 3 tiles in a row on every SM: rounds 3/3/3.
/// * busy [t_start,t_end) per SM: SM0 [0,20)+[22,30) = 28, SM1 [0,29) = 29,
///   SM2 [0,10)+[12,20)+[22,31) = 27, SM3 [1,19)+[22,30) = 26: 110 / (4 * 31).
///   occupied [t_dispatch,t_end): 30 + 29 + 31 + 30 = 120 / 124.
/// * 2 buckets [0,15.5) [15.5,31): busy 15.5+15.5+13.5+14.5 = 59 / 62, then 51 / 62;
///   occupied 62 / 62, then 58 / 62.
/// * tail producer -> consumer: 31 - 21 = 10; busy inside [21,31): 8+8+9+8 = 33 / 40.
/// * critical path: c4 ends last (31). Its slot predecessor c0 ends at 20; the last producer
///   end by its t_ready 22 is p5 (21): dependency edge. p5's slot predecessor is p1 (10); p1 is
///   first in its slot: start. Steps p1 [gate 0: latency 0, work 10], p5 [gate 10: 0, 11],
///   c4 [gate 21, start 22: latency 1, work 9]: work 30 + latency 1 = span 31.
#[test]
fn hand_pipelined_numbers() {
    let a = analyze(&hand_pipelined(), &AnalysisOptions { buckets: 2 }).unwrap();
    assert_eq!(a.span_ns, 31_000);
    assert_eq!(a.t0_ns, super::BASE);
    assert_eq!((a.sm_count, a.slots_per_sm, a.tiles), (4, 1, 12));

    let p = &a.stages[0];
    assert_eq!(
        (p.id, p.tiles, p.blocks_per_sm, p.blocks_per_sm_observed),
        (0, 6, 1, false)
    );
    assert!(close(p.waves, 1.5));
    assert_eq!(p.whole_waves, 2);
    assert_eq!(p.wave_ends_ns, vec![11_000, 21_000]);
    assert!(close(p.tile_time.mean_ns, 61_000.0 / 6.0));
    assert!(close(p.tile_time.median_ns, 10_000.0));
    assert_eq!(p.tile_time.max_ns, 11_000);
    assert_eq!((p.wait.total_ns, p.waited_tiles), (0, 0));
    assert_eq!((p.rounds.min, p.rounds.max, p.rounds.sms_used), (1, 2, 4));
    assert!(close(p.rounds.mean, 1.5));
    assert_eq!((p.first_dispatch_ns, p.last_end_ns), (0, 21_000));

    let c = &a.stages[1];
    assert!(close(c.waves, 1.5));
    assert_eq!(c.wave_ends_ns, vec![30_000, 31_000]);
    assert!(close(c.tile_time.mean_ns, 49_000.0 / 6.0));
    assert!(close(c.tile_time.median_ns, 8_000.0));
    assert_eq!(c.tile_time.max_ns, 9_000);
    assert_eq!((c.wait.total_ns, c.waited_tiles), (8_000, 4));
    assert!(close(c.wait.mean_ns, 8_000.0 / 6.0));
    assert_eq!((c.rounds.min, c.rounds.max), (1, 2));

    assert_eq!((a.rounds.min, a.rounds.max), (3, 3));
    assert!(close(a.busy_fraction, 110.0 / 124.0));
    assert!(close(a.occupied_fraction, 120.0 / 124.0));

    assert_eq!(a.timeline.len(), 2);
    assert_eq!((a.timeline[0].start_ns, a.timeline[0].end_ns), (0, 15_500));
    assert!(close(a.timeline[0].busy, 59.0 / 62.0));
    assert!(close(a.timeline[1].busy, 51.0 / 62.0));
    assert!(close(a.timeline[0].occupied, 1.0));
    assert!(close(a.timeline[1].occupied, 58.0 / 62.0));

    assert_eq!(a.tails.len(), 1);
    let t = a.tails[0];
    assert_eq!(
        (t.producer, t.consumer, t.producer_end_ns, t.consumer_end_ns),
        (0, 1, 21_000, 31_000)
    );
    assert_eq!(t.tail_ns, 10_000);
    assert!(close(t.busy_fraction, 33.0 / 40.0));

    let cp = &a.critical_path;
    let steps: Vec<_> = cp
        .steps
        .iter()
        .map(|s| (s.stage, s.tile, s.via, s.latency_ns, s.work_ns))
        .collect();
    assert_eq!(
        steps,
        vec![
            (0, 1, Edge::Start, 0, 10_000),
            (0, 5, Edge::Slot, 0, 11_000),
            (1, 4, Edge::Dependency, 1_000, 9_000),
        ]
    );
    assert_eq!((cp.work_ns, cp.latency_ns), (30_000, 1_000));
    assert_eq!(cp.work_ns + cp.latency_ns, a.span_ns);
    assert_eq!((cp.slot_edges, cp.dependency_edges), (1, 1));
}

/// Stream synchronization on 2 SMs with 2 CTAs each, no SM count or blocks per SM in the
/// metadata (both inferred). In us:
///
/// ```text
/// SM0: p0 [0 0 0 10]  p1 [0 0 0 12]  p4 [10 10 10 18]  c0 [20 20 20 26]  c1 [20 20 20 27]
/// SM1: p2 [0 0 0 10]  p3 [0 0 1 11]                    c2 [20 20 21 30]
/// ```
///
/// * slots: SM0 slot0 = p0 p4 c0 (c0 takes the slot freed last, at 18), slot1 = p1 c1;
///   SM1 slot0 = p2, slot1 = p3 c2 (freed at 11 rather than 10). 2 SMs, 2 slots.
/// * observed blocks per SM: 2 for both stages (p1 overlaps p0 then p4; c0 overlaps c1).
///   waves: producer 5 / 4 = 1.25 (2 whole; ends 12, 18), consumer 3 / 4 = 0.75 (1; ends 30).
/// * rounds, all stages: SM0 3, SM1 2; producer only: SM0 2, SM1 1.
/// * busy: SM0 [0,18)+[20,27) = 25, SM1 [0,11)+[21,30) = 20: 45 / 60; occupied 25 + 21 = 46.
/// * tail 30 - 18 = 12, busy inside [18,30): 7 + 9 = 16 / 24.
/// * critical path: c2 (30): slot predecessor p3 ends 11, last producer end by t_ready 20 is
///   p4 (18): dependency (the kernel boundary). p4 <- p0 via slot. Steps p0 [0, 10],
///   p4 [0, 8], c2 [gate 18, start 21: latency 3, work 9]: 27 + 3 = 30.
#[test]
fn stream_sync_two_slots_inferred_metadata() {
    let rows: [Row; 8] = [
        (0, 0, 0, 0, [0, 0, 0, 10]),
        (0, 1, 0, 1, [0, 0, 0, 12]),
        (0, 2, 1, 2, [0, 0, 0, 10]),
        (0, 3, 1, 3, [0, 0, 1, 11]),
        (0, 4, 0, 4, [10, 10, 10, 18]),
        (1, 0, 0, 0, [20, 20, 20, 26]),
        (1, 1, 0, 1, [20, 20, 20, 27]),
        (1, 2, 1, 2, [20, 20, 21, 30]),
    ];
    let trace = Trace::new(TraceMeta::default(), events(&rows)).unwrap();
    let a = analyze(&trace, &AnalysisOptions::default()).unwrap();
    assert_eq!((a.sm_count, a.sm_count_known, a.slots_per_sm), (2, false, 2));
    let (p, c) = (&a.stages[0], &a.stages[1]);
    assert_eq!((p.name.as_str(), c.name.as_str()), ("stage 0", "stage 1"));
    assert_eq!((p.blocks_per_sm, p.blocks_per_sm_observed), (2, true));
    assert_eq!((c.blocks_per_sm, c.blocks_per_sm_observed), (2, true));
    assert!(close(p.waves, 1.25) && close(c.waves, 0.75));
    assert_eq!((p.whole_waves, c.whole_waves), (2, 1));
    assert_eq!(p.wave_ends_ns, vec![12_000, 18_000]);
    assert_eq!(c.wave_ends_ns, vec![30_000]);
    assert_eq!((a.rounds.min, a.rounds.max), (2, 3));
    assert_eq!((p.rounds.min, p.rounds.max), (1, 2));
    assert!(close(a.busy_fraction, 45.0 / 60.0));
    assert!(close(a.occupied_fraction, 46.0 / 60.0));
    assert_eq!(a.tails[0].tail_ns, 12_000);
    assert!(close(a.tails[0].busy_fraction, 16.0 / 24.0));

    let cp = &a.critical_path;
    let steps: Vec<_> = cp.steps.iter().map(|s| (s.stage, s.tile, s.slot, s.via)).collect();
    assert_eq!(
        steps,
        vec![
            (0, 0, 0, Edge::Start),
            (0, 4, 0, Edge::Slot),
            (1, 2, 1, Edge::Dependency)
        ]
    );
    assert_eq!((cp.work_ns, cp.latency_ns), (27_000, 3_000));
}

/// The producer half of [`hand_pipelined`] alone: no tails; the critical path is p1 -> p5
/// (21 us of work, no latency).
#[test]
fn single_stage() {
    let mut trace = hand_pipelined();
    trace.events.retain(|e| e.stage == 0);
    trace.meta.stages.truncate(1);
    let a = trace.analyze().unwrap();
    assert_eq!(a.stages.len(), 1);
    assert!(a.tails.is_empty());
    assert_eq!(a.span_ns, 21_000);
    let path: Vec<_> = a.critical_path.steps.iter().map(|s| s.tile).collect();
    assert_eq!(path, vec![1, 5]);
    assert_eq!((a.critical_path.work_ns, a.critical_path.latency_ns), (21_000, 0));
    let report = a.report();
    assert!(report.contains("0 producer"), "{report}");
    assert!(!report.contains("tails"), "{report}");
}

/// A stage listed in the metadata but absent from the events is reported, not analysed.
#[test]
fn stage_without_events() {
    let mut trace = hand_pipelined();
    trace.events.retain(|e| e.stage == 0);
    let a = trace.analyze().unwrap();
    assert_eq!(a.stages.len(), 1);
    assert_eq!(a.stages_without_events, vec!["consumer".to_string()]);
    assert!(a.report().contains("stages with no tiles traced: consumer"));
}

#[test]
fn empty_trace_is_an_error_not_a_panic() {
    let empty = Trace::new(meta("empty", Some(4), &[(0, "producer", Some(1))]), Vec::new()).unwrap();
    match analyze(&empty, &AnalysisOptions::default()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("no tile events"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(empty.to_svg(&Default::default()).is_err());
    assert!(Trace::default().analyze().is_err());
}

/// A trace whose only tile takes no time: span 0, fractions 0, no buckets, no panic.
#[test]
fn zero_length_trace() {
    let trace = Trace::new(TraceMeta::default(), events(&[(0, 0, 0, 0, [3, 3, 3, 3])])).unwrap();
    let a = trace.analyze().unwrap();
    assert_eq!(a.span_ns, 0);
    assert_eq!(a.busy_fraction, 0.0);
    assert!(a.timeline.is_empty());
    assert_eq!(a.critical_path.steps.len(), 1);
    let _ = a.report();
    let _ = trace.to_svg(&Default::default()).unwrap();
}

#[test]
fn stats_median_and_mean() {
    let s = Stats::of(vec![4, 1, 3, 2]);
    assert_eq!((s.count, s.total_ns, s.min_ns, s.max_ns), (4, 10, 1, 4));
    assert!(close(s.median_ns, 2.5) && close(s.mean_ns, 2.5));
    assert!(close(Stats::of(vec![5, 1, 9]).median_ns, 5.0));
    assert_eq!(Stats::of(Vec::new()), Stats::default());
}

/// The synthetic pair: row synchronization overlaps the consumer with the producer's last
/// wave, so it is shorter than stream synchronization, its consumer waits and its rounds
/// are 3 (48 tiles on 16 slots) against the stream's 2 + 2.
#[test]
fn synthetic_row_sync_beats_stream_sync() {
    let [(_, stream), (_, row)] = crate::trace::cli::demo_traces();
    let (s, r) = (stream.analyze().unwrap(), row.analyze().unwrap());
    assert!(r.span_ns < s.span_ns, "row {} vs stream {}", r.span_ns, s.span_ns);
    assert_eq!(s.stages[1].waited_tiles, 0);
    assert!(r.stages[1].waited_tiles > 0);
    assert_eq!((s.rounds.max, r.rounds.max), (4, 3));
    assert!(close(s.stages[0].waves, 1.5));
    assert!(r.busy_fraction > s.busy_fraction);
    assert_eq!(r.critical_path.work_ns + r.critical_path.latency_ns, r.span_ns);
}

/// GeMM path 2: one persistent CTA per SM whose producer takes the next tile while its
/// consumers finish the last (dispatch before the previous end), and a second stage's CTA
/// on SM0 afterwards:
///
/// ```text
/// SM0: cta 0 t0 [0 0 0 10]  t2 [8 8 10 20]  t4 [18 18 20 30]   stage 1 cta 0: u0 [30 31 31 40]
/// SM1: cta 1 t1 [0 0 0 10]  t3 [8 8 10 20]
/// ```
///
/// One CTA slot per SM (not two): the same CTA keeps its slot, rounds 1, 2, 3 on SM0; the
/// other stage's CTA reuses the freed slot.
#[test]
fn a_ctas_overlapping_tiles_share_its_slot() {
    let rows: [Row; 6] = [
        (0, 0, 0, 0, [0, 0, 0, 10]),
        (0, 1, 1, 1, [0, 0, 0, 10]),
        (0, 2, 0, 0, [8, 8, 10, 20]),
        (0, 3, 1, 1, [8, 8, 10, 20]),
        (0, 4, 0, 0, [18, 18, 20, 30]),
        (1, 0, 0, 0, [30, 31, 31, 40]),
    ];
    let ev = events(&rows);
    let s = crate::trace::slots::Slots::assign(&ev, 2);
    assert_eq!(s.per_sm, vec![1, 1]);
    assert_eq!(s.slot, vec![0; 6]);
    assert_eq!(s.round, vec![1, 1, 2, 2, 3, 4]);
    assert_eq!(s.prev, vec![None, None, Some(0), Some(1), Some(2), Some(4)]);
    let trace = Trace::new(TraceMeta::default(), ev).unwrap();
    let a = analyze(&trace, &AnalysisOptions::default()).unwrap();
    assert_eq!(a.slots_per_sm, 1);
}

/// Two persistent CTAs of one stage on 2 SMs, each taking its next tile before the last one
/// ended (a warp-specialized producer's head start), then a new CTA on SM1 (us):
///
/// ```text
/// SM0 (CTA 0): t0 [d0 r0 s1 e10]  t2 [d8 r8 s11 e20]  t4 [d17 r17 s19 e30]
/// SM1 (CTA 1): t1 [d0 r0 s1 e12]  t3 [d10 r12 s12 e22]
/// SM1 (CTA 2):                                          t5 [d22 r22 s24 e30]
/// ```
fn persistent_ctas() -> Trace {
    let rows: [Row; 6] = [
        (0, 0, 0, 0, [0, 0, 1, 10]),
        (0, 1, 1, 1, [0, 0, 1, 12]),
        (0, 2, 0, 0, [8, 8, 11, 20]),
        (0, 3, 1, 1, [10, 12, 12, 22]),
        (0, 4, 0, 0, [17, 17, 19, 30]),
        (0, 5, 1, 2, [22, 22, 24, 30]),
    ];
    Trace::new(meta("persistent", Some(2), &[(0, "stage", Some(1))]), events(&rows)).unwrap()
}

/// On [`persistent_ctas`], pairs of one CTA: (t0, t2) gap 11 - 10 = 1, lead 10 - 8 = 2;
/// (t2, t4) gap 19 - 20 = -1 (the next tile began before the last one's post was stamped),
/// lead 20 - 17 = 3; (t1, t3) gap 0, lead 2. (t3, t5) share a slot but not a CTA: not a pair.
/// So 3 pairs, gaps [-1, 0, 1]: median 0, max 1; leads [2, 2, 3]: median 2.
#[test]
fn between_tiles_of_one_cta() {
    let trace = persistent_ctas();
    let a = analyze(&trace, &AnalysisOptions::default()).unwrap();
    assert_eq!(a.slots_per_sm, 1);
    let b = a.stages[0].between;
    assert_eq!(b.pairs, 3);
    assert!(close(b.gap_median_ns, 0.0));
    assert_eq!(b.gap_max_ns, 1_000);
    assert!(close(b.lead_median_ns, 2_000.0));
    assert!(
        a.report()
            .contains("between a CTA's tiles (3 pairs): gap median 0.00 us, max 1.00 us"),
        "{}",
        a.report()
    );
    // One tile per CTA: no pairs and no line.
    let one = analyze(&super::hand_pipelined(), &AnalysisOptions::default()).unwrap();
    assert!(one
        .stages
        .iter()
        .all(|s| s.between == crate::trace::BetweenTiles::default()));
    assert!(!one.report().contains("between a CTA's tiles"));
}

/// Lead-ins `t_start - t_dispatch` on [`persistent_ctas`]' trace: first tiles of
/// CTAs 0, 1 and 2 (t0, t1, t5) take 1, 1 and 2 µs; the later ones (t2, t3, t4) 3, 2 and 2.
#[test]
fn lead_ins_split_each_ctas_first_tile_from_its_later_ones() {
    let trace = persistent_ctas();
    let a = analyze(&trace, &AnalysisOptions::default()).unwrap();
    let l = a.stages[0].lead_ins;
    assert_eq!((l.first.count, l.first.min_ns, l.first.max_ns), (3, 1_000, 2_000));
    assert!(close(l.first.median_ns, 1_000.0));
    assert_eq!((l.later.count, l.later.min_ns, l.later.max_ns), (3, 2_000, 3_000));
    assert!(close(l.later.median_ns, 2_000.0));
    assert!(
        a.report().contains(
            "dispatch -> main loop: each CTA's first tile median 1.00 us, max 2.00 us (3 CTAs); \
             later tiles median 2.00 us, max 3.00 us (3 tiles)"
        ),
        "{}",
        a.report()
    );
    // One tile per CTA: first tiles only.
    let one = analyze(&super::hand_pipelined(), &AnalysisOptions::default()).unwrap();
    assert!(one
        .stages
        .iter()
        .all(|s| s.lead_ins.later.count == 0 && s.lead_ins.first.count == s.tiles));
    assert!(!one.report().contains("later tiles median"));
}

/// Ten tiles on ten SMs, one each, dispatched and started at 0: 10 us each, but SM 7's takes
/// 12 us and SM 9's 13 us (SM 4's 10.9 us stays under the 1.10x bar). Median 10 us (the
/// sorted times' 5th and 6th are both 10), so SMs 9 (1.3x) and 7 (1.2x) are slow; the stage
/// ends at 13 us, the other SMs' last tile at 10.9 us: a 2.1 us tail.
fn hand_slow_sms(tiles: usize) -> Trace {
    let rows: Vec<Row> = (0..tiles as u32)
        .map(|i| {
            let end_ns = match i {
                7 => 12_000,
                9 => 13_000,
                4 => 10_900,
                _ => 10_000,
            };
            (0, i, i, i, [0, 0, 0, end_ns])
        })
        .collect();
    let mut ev = events(&rows);
    // `events` takes microseconds; these ends are in ns.
    for (e, r) in ev.iter_mut().zip(&rows) {
        e.t_end = super::BASE + r.4[3];
    }
    Trace::new(meta("hand outliers", Some(16), &[(0, "stage", Some(1))]), ev).unwrap()
}

#[test]
fn slow_sms_are_named_with_their_tail() {
    let a = analyze(&hand_slow_sms(10), &AnalysisOptions::default()).unwrap();
    let slow = &a.stages[0].slow_sms;
    let named: Vec<(u32, u32)> = slow.sms.iter().map(|s| (s.sm, s.tiles)).collect();
    assert_eq!(named, [(9, 1), (7, 1)]);
    assert!(close(slow.sms[0].ratio, 1.3) && close(slow.sms[1].ratio, 1.2));
    assert_eq!(slow.tail_ns, 2_100);
    assert_eq!(
        slow.summary().as_deref(),
        Some("slow SMs 2 (+20% to +30% over the median tile), tail 2.1 us")
    );
    assert_eq!(slow.sms_used, 10);
    let trace = hand_slow_sms(10);
    assert_eq!(SlowSms::of_events(&trace.events), *slow);
    // Half the SMs at 2x (stream-K ranges of unequal length, say): no SM stands out.
    let rows: Vec<Row> = (0..10)
        .map(|i| (0, i, i, i, [0, 0, 0, if i < 5 { 20 } else { 10 }]))
        .collect();
    let uneven = SlowSms::of_events(&events(&rows));
    assert!(uneven.widespread() && uneven.sms.len() == 5);
    assert_eq!(
        uneven.summary().as_deref(),
        Some("tile times vary widely (5 of 10 SMs at >= 1.10x the median)")
    );
    let report = Trace::new(meta("uneven", Some(16), &[(0, "stage", Some(1))]), events(&rows))
        .unwrap()
        .analyze()
        .unwrap()
        .report();
    assert!(
        report.contains("    tile times vary widely (5 of 10 SMs") && !report.contains("slow SMs ("),
        "{report}"
    );
    let report = a.report();
    assert!(
        report.contains(
            "slow SMs (2, tiles >= 1.10x the median on average): 9 (+30%), 7 (+20%); the stage ends 2.10 us after"
        ),
        "{report}"
    );
}

#[test]
fn slow_sms_need_enough_tiles_and_a_real_outlier() {
    // Seven tiles: too few to judge.
    let a = analyze(&hand_slow_sms(7), &AnalysisOptions::default()).unwrap();
    assert_eq!(a.stages[0].slow_sms, SlowSms::default());
    assert_eq!(a.stages[0].slow_sms.summary(), None);
    assert!(!a.report().contains("slow SMs"));
    // Ten tiles, every one 100 us but one of 109 us (under the bar): nobody is slow.
    let rows: Vec<Row> = (0..10)
        .map(|i| (0, i, i, i, [0, 0, 0, 100 + 9 * u64::from(i == 4)]))
        .collect();
    let a = Trace::new(meta("alike", Some(16), &[(0, "stage", Some(1))]), events(&rows))
        .unwrap()
        .analyze()
        .unwrap();
    let slow = &a.stages[0].slow_sms;
    assert!(slow.sms.is_empty() && slow.tail_ns == 0 && slow.sms_used == 10 && slow.summary().is_none());
}
